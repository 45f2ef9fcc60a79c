//! `inventory.complete` and `inventory.explained` over a draft whose tensors are plain float arrays (a
//! Hugging Face folder): every tensor the family's model class defines is there, of exactly the shape
//! the config gives it and of a float type, and nothing else is.
//!
//! The model class (z-lab's `dflash/model.py`) builds each weight from the config, and Transformers
//! initialises one the file lacks at random and loads without an error: a missing tensor is a draft
//! that drafts noise. So absence FAILs by name here, where a Q4NX package's own checks prove presence
//! grid by grid.

use super::list_of;
use crate::config::{DraftConfig, Field, Geometry};
use crate::container::TensorInfo;
use crate::evidence::{Finding, InventoryComplete, InventoryExplained};
use crate::family::{looks_second_family, Feature, Kind, Naming, Projection, Role, Switch};
use crate::limits::MAX_CENSUS_TENSORS;
use crate::report::Check;
use std::collections::HashMap;

pub const COMPLETE: &str = crate::check_id::CheckId::INVENTORY_COMPLETE;
pub const EXPLAINED: &str = crate::check_id::CheckId::INVENTORY_EXPLAINED;

/// The output head a self-contained draft may carry beside its embedding table (not in the family
/// tables: a Q4NX package never holds one).
const LM_HEAD: &str = "lm_head.weight";

/// One tensor the model class defines for this config, under the name this folder spells it.
struct Expected {
    name: String,
    /// The shape, or the config field that would size it.
    shape: Field<Vec<u64>>,
    /// Only checked when present (an embedding table, an output head).
    optional: bool,
    /// A codebook: the MLX loader reads it only without `.weight`.
    codebook: bool,
}

/// Both checks, in report order.
pub fn run(config: &DraftConfig, tensors: &[&TensorInfo]) -> [Check; 2] {
    let geometry = Geometry::new(config);
    let layers = match geometry.layers() {
        Ok(l) => l,
        Err(p) => {
            return [
                super::geometry::blocked_by_field(COMPLETE, &p),
                super::geometry::blocked_by_field(EXPLAINED, &p),
            ]
        }
    };
    let family = config.family();
    let naming = family.naming(tensors.iter().map(|t| t.name.as_str()));
    let (expected, features_unread) = expected(config, &geometry, naming, layers);
    let by_name: HashMap<&str, &TensorInfo> =
        tensors.iter().map(|t| (t.name.as_str(), *t)).collect();
    [
        complete(&expected, &features_unread, &by_name),
        explained(config, naming, layers, &expected, tensors),
    ]
}

/// Every tensor the model class defines, in the family table's order, and the features whose config
/// pair could not be read (their tensors cannot be listed).
fn expected(
    config: &DraftConfig,
    geometry: &Geometry<'_>,
    naming: Naming,
    layers: u64,
) -> (Vec<Expected>, Vec<String>) {
    let family = config.family();
    let mut unread = Vec::new();
    let on = |f: Feature| f.is_on(config);
    for f in family.features() {
        if let Err(p) = on(f) {
            unread.push(p.needs());
        }
    }
    let mut out: Vec<Expected> = family
        .roles(layers, |s| match s.switch {
            Switch::Always | Switch::Optional => true,
            Switch::Feature(f) => on(f) == Ok(true),
        })
        .into_iter()
        .map(|(role, spec)| Expected {
            name: naming.name(role),
            shape: (spec.shape)(geometry),
            optional: spec.switch == Switch::Optional,
            codebook: matches!(role.kind(), Some(Kind::Selector(p)) if p.is_codebook()),
        })
        .collect();
    out.push(Expected {
        // Transformers keeps the head outside `model.` whatever the folder's spelling.
        name: LM_HEAD.to_owned(),
        shape: vocab_by_hidden(geometry),
        optional: true,
        codebook: false,
    });
    if let Ok(Some(true)) = config.attention_bias {
        for layer in 0..layers {
            for p in [Projection::Q, Projection::K, Projection::V, Projection::O] {
                let role = Role::Projection {
                    layer,
                    projection: p,
                };
                let weight = naming.name(role);
                let shape = match p {
                    Projection::Q => geometry.q_dim(),
                    Projection::K | Projection::V => geometry.kv_dim(),
                    _ => geometry.hidden(),
                };
                out.push(Expected {
                    name: format!("{}.bias", weight.trim_end_matches(".weight")),
                    shape: shape.map(|n| vec![n]),
                    optional: false,
                    codebook: false,
                });
            }
        }
    }
    (out, unread)
}

fn vocab_by_hidden(geometry: &Geometry<'_>) -> Field<Vec<u64>> {
    Ok(vec![geometry.vocab()?, geometry.hidden()?])
}

/// `inventory.complete`.
fn complete(
    expected: &[Expected],
    features_unread: &[String],
    by_name: &HashMap<&str, &TensorInfo>,
) -> Check {
    let (mut problems, mut findings, mut undecided) = (Vec::new(), Vec::new(), Vec::new());
    let mut total = 0usize;
    let mut note = |problems: &mut Vec<String>, name: &str, kind: &'static str, why: String| {
        total += 1;
        if findings.len() < MAX_CENSUS_TENSORS {
            problems.push(why);
            findings.push(Finding::new(name, kind));
        }
    };
    let mut present = 0usize;
    for e in expected {
        let suffixed = format!("{}.weight", e.name);
        let found = by_name.get(e.name.as_str()).copied();
        let Some(t) = found else {
            if let (true, Some(t)) = (e.codebook, by_name.get(suffixed.as_str())) {
                note(&mut problems, &t.name, "codebook_suffix", format!("{} is stored as {}: z-lab's MLX loader (load_draft) reads the released name {} and raises a KeyError on this one (Transformers reads either)", e.name, t.name, e.name));
            } else if !e.optional {
                note(
                    &mut problems,
                    &e.name,
                    "missing",
                    format!("{} is missing (Transformers would initialise it at random and load without an error)", e.name),
                );
            }
            continue;
        };
        present += 1;
        if !super::finite::is_float(t.dtype) {
            note(
                &mut problems,
                &t.name,
                "element_type",
                format!(
                    "{} is {}, not a float type a loader reads as weights (BF16, F16 or F32)",
                    t.name, t.dtype
                ),
            );
            continue;
        }
        match &e.shape {
            Ok(shape) if *shape == t.shape => {}
            Ok(shape) => note(
                &mut problems,
                &t.name,
                "misshapen",
                format!(
                    "{} is {} {}, the config makes it {}",
                    t.name,
                    t.dtype,
                    t.shape_text(),
                    shape_text(shape)
                ),
            ),
            Err(p) => undecided.push(format!("{}: {}", t.name, p.needs())),
        }
    }
    let required = expected.iter().filter(|e| !e.optional).count();
    let evidence = InventoryComplete {
        required,
        present,
        problems: findings,
        not_listed: total.saturating_sub(problems.len()) as u64,
    };
    if total > 0 {
        return Check::fail(
            COMPLETE,
            format!(
                "{total} of the tensors the model class defines are missing or wrong: {}",
                list_of(&problems, total, 3)
            ),
        )
        .with_evidence(evidence);
    }
    let undecided: Vec<String> = features_unread.iter().cloned().chain(undecided).collect();
    if !undecided.is_empty() {
        return Check::blocked(
            COMPLETE,
            super::GEOMETRY,
            format!("cannot decide: {}", list_of(&undecided, undecided.len(), 2)),
        )
        .with_evidence(evidence);
    }
    Check::pass(
        COMPLETE,
        format!(
            "every tensor the model class defines is there, of the config's shape and a float type: {required} required{}",
            optional_present(present, required)
        ),
    )
    .with_evidence(evidence)
}

/// `, N optional` for the optional tensors among `present`, or nothing.
pub(crate) fn optional_present(present: usize, required: usize) -> String {
    match present.saturating_sub(required) {
        0 => String::new(),
        n => format!(", {n} optional"),
    }
}

pub(crate) fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// `inventory.explained`: every tensor is one the model class defines; anything else is named.
fn explained(
    config: &DraftConfig,
    naming: Naming,
    layers: u64,
    expected: &[Expected],
    tensors: &[&TensorInfo],
) -> Check {
    let known: HashMap<&str, bool> = expected
        .iter()
        .map(|e| (e.name.as_str(), e.codebook))
        .collect();
    let mut seen: HashMap<Role, &str> = HashMap::new();
    let (mut listed, mut items, mut total) = (Vec::new(), Vec::new(), 0usize);
    for t in tensors {
        let role = naming.role(&t.name);
        let codebook_suffixed = t
            .name
            .strip_suffix(".weight")
            .is_some_and(|bare| known.get(bare) == Some(&true));
        let verdict: Option<(&'static str, Option<String>)> =
            if let Some(first) = role.and_then(|r| seen.get(&r)) {
                Some((
                    "second_name",
                    Some(format!("a second name for the tensor stored as {first}")),
                ))
            } else if known.contains_key(t.name.as_str()) || codebook_suffixed {
                None
            } else {
                Some(unexplained(config, role, layers, &t.name))
            };
        if let Some(role) = role {
            seen.entry(role).or_insert(&t.name);
        }
        if let Some((kind, why)) = verdict {
            total += 1;
            if items.len() < MAX_CENSUS_TENSORS {
                listed.push(match why {
                    Some(why) => format!("{} ({why})", t.name),
                    None => t.name.clone(),
                });
                items.push(Finding::new(&t.name, kind));
            }
        }
    }
    let evidence = InventoryExplained {
        tensors: tensors.len(),
        unexplained: items,
        undecided: Vec::new(),
        not_listed: total.saturating_sub(listed.len()) as u64,
    };
    if total > 0 {
        return Check::fail(
            EXPLAINED,
            format!(
                "{total} of {} tensors are unexplained: {}",
                tensors.len(),
                list_of(&listed, total, 3)
            ),
        )
        .with_evidence(evidence);
    }
    Check::pass(
        EXPLAINED,
        format!(
            "no tensor is left unexplained: {} of {} are the model class's (unexplained: none)",
            tensors.len(),
            tensors.len()
        ),
    )
    .with_evidence(evidence)
}

/// Why a tensor the model class does not define is there, as a token and (when there is more to say
/// than its name) a sentence.
fn unexplained(
    config: &DraftConfig,
    role: Option<Role>,
    layers: u64,
    name: &str,
) -> (&'static str, Option<String>) {
    let family = config.family();
    let Some(role) = role else {
        if looks_second_family(name) {
            return (
                "second_family",
                Some("a second-family (DFlash2) selector or convolution tensor".to_owned()),
            );
        }
        return ("no_role", None);
    };
    if let Some(layer) = role.layer().filter(|l| *l >= layers) {
        return (
            "beyond_layers",
            Some(format!("layer {layer}, but the config has {layers}")),
        );
    }
    let Some(kind) = role.kind() else {
        return (
            "no_role",
            Some(
                "a Q4NX package's scalar: this form states its DFlash fields in config.json"
                    .to_owned(),
            ),
        );
    };
    match family.spec(kind).map(|s| s.switch) {
        None => (
            "second_family",
            Some(format!(
                "a second-family (DFlash2) {role} tensor, but config.json declares the {} family",
                family.name
            )),
        ),
        Some(Switch::Feature(f)) => {
            let [a, b] = f.fields();
            (
                "feature_off",
                Some(format!(
                    "a DFlash2 {} tensor, but config.json sets no {a}/{b}",
                    f.noun()
                )),
            )
        }
        // A role the config switches on whose name this folder does not spell (another prefix).
        Some(_) => (
            "no_role",
            Some("spelled unlike the folder's other names".to_owned()),
        ),
    }
}
