//! `inventory.explained`: every tensor has a role, or is named as unexplained.

use super::list_of;
use super::Inputs;
use crate::dtype::Dtype;
use crate::evidence::{Finding, InventoryExplained};
use crate::family::{looks_second_family, Role, Switch};
use crate::limits::MAX_CENSUS_TENSORS;
use crate::report::Check;
use crate::tile::GridGeometry;
use std::collections::HashMap;

pub const EXPLAINED: &str = crate::check_id::CheckId::INVENTORY_EXPLAINED;

pub fn run(inputs: &Inputs<'_, '_>) -> Check {
    let layers = match inputs.geometry.layers() {
        Ok(l) => l,
        Err(p) => return super::geometry::blocked_by_field(EXPLAINED, &p),
    };
    let entries = &inputs.container.table.entries;
    // Every tensor is judged; the findings are kept up to the census's limit and the rest counted,
    // so a header of a million stray tensors costs no more to report than a few thousand.
    let (mut unexplained, mut undecided) = (Vec::new(), Vec::new());
    let (mut unexplained_items, mut undecided_items) = (Vec::new(), Vec::new());
    let (mut unexplained_total, mut undecided_total, mut not_listed) = (0usize, 0usize, 0u64);
    let mut seen: HashMap<Role, &str> = HashMap::new();
    for e in entries {
        let role = inputs.naming.role(&e.name);
        let finding = if let Some(first) = role.and_then(|r| seen.get(&r)) {
            // A codebook with and without `.weight`, or a name and its alias: one role, two tensors.
            let role = role.map(|r| r.to_string()).unwrap_or_default();
            Verdict::Unexplained(
                "second_name",
                Some(format!("a second name for {role}: {first}")),
            )
        } else {
            if let Some(role) = role {
                seen.insert(role, &e.name);
            }
            judge(inputs, e, role, layers)
        };
        match finding {
            Verdict::Explained => {}
            Verdict::Undecided(kind, why) => {
                undecided_total += 1;
                if undecided_items.len() < MAX_CENSUS_TENSORS {
                    undecided.push(format!("{}: {why}", e.name));
                    undecided_items.push(Finding::new(&e.name, kind));
                } else {
                    not_listed += 1;
                }
            }
            Verdict::Unexplained(kind, why) => {
                unexplained_total += 1;
                if unexplained_items.len() < MAX_CENSUS_TENSORS {
                    unexplained.push(match why {
                        Some(why) => format!("{} ({why})", e.name),
                        None => e.name.clone(),
                    });
                    unexplained_items.push(Finding::new(&e.name, kind));
                } else {
                    not_listed += 1;
                }
            }
        }
    }
    let evidence = InventoryExplained {
        tensors: entries.len(),
        unexplained: unexplained_items,
        undecided: undecided_items,
        not_listed,
    };
    if unexplained_total > 0 {
        return Check::fail(
            EXPLAINED,
            format!(
                "{unexplained_total} of {} tensors are unexplained: {}",
                entries.len(),
                list_of(&unexplained, unexplained_total, 3)
            ),
        )
        .with_evidence(evidence);
    }
    if undecided_total > 0 {
        return Check::blocked(
            EXPLAINED,
            super::GEOMETRY,
            format!("cannot decide: {}", list_of(&undecided, undecided_total, 2)),
        )
        .with_evidence(evidence);
    }
    Check::pass(
        EXPLAINED,
        format!(
            "no tensor is left unexplained: {} of {} have a role (unexplained: none)",
            entries.len(),
            entries.len()
        ),
    )
    .with_evidence(evidence)
}

/// What the inventory makes of one tensor: a verdict other than explained carries why, as a token
/// for the evidence and (when there is more to say than the name) as a sentence for the message.
enum Verdict {
    Explained,
    Unexplained(&'static str, Option<String>),
    Undecided(&'static str, String),
}

/// A tensor is explained when its name parses to a role of the config's family, in a layer the config
/// has, switched on by the config (an embedding table also needs the shape the config gives it).
fn judge(
    inputs: &Inputs<'_, '_>,
    e: &crate::container::TensorInfo,
    role: Option<Role>,
    layers: u64,
) -> Verdict {
    let family = inputs.config.family();
    let Some(role) = role else {
        return if looks_second_family(&e.name) {
            Verdict::Unexplained(
                "second_family",
                Some("a second-family (DFlash2) selector or convolution tensor".to_owned()),
            )
        } else {
            Verdict::Unexplained("no_role", None)
        };
    };
    let second = |what: String| {
        Verdict::Unexplained(
            "second_family",
            Some(format!(
                "a second-family (DFlash2) {what}, but config.json declares the {} family",
                family.name
            )),
        )
    };
    if let Some(layer) = role.layer().filter(|l| *l >= layers) {
        return Verdict::Unexplained(
            "beyond_layers",
            Some(format!(
                "layer {layer}, but the config has {layers} {}",
                if layers == 1 { "layer" } else { "layers" }
            )),
        );
    }
    let Some(kind) = role.kind() else {
        return match role {
            Role::Scalar(s) if !family.scalars().any(|f| f == s) => second("scalar".to_owned()),
            // A feature's copy of its pair, in a package whose config switches the feature off.
            Role::Scalar(s) => match s.feature().map(|f| (f, f.is_on(inputs.config))) {
                Some((f, Ok(false))) => off(f, "scalar"),
                _ => Verdict::Explained,
            },
            _ => Verdict::Explained,
        };
    };
    let Some(spec) = family.spec(kind) else {
        return second(format!("{role} tensor"));
    };
    match (spec.switch, role) {
        (Switch::Feature(f), _) => match f.is_on(inputs.config) {
            Ok(true) => Verdict::Explained,
            Ok(false) => off(f, "tensor"),
            Err(p) => Verdict::Undecided("needs_field", p.needs()),
        },
        (_, Role::EmbedTokens) => match embed_problem(inputs, e) {
            Ok(()) => Verdict::Explained,
            Err(Some(why)) => Verdict::Unexplained("embedding_form", Some(why)),
            Err(None) => Verdict::Undecided(
                "needs_vocab_size",
                "an embedding table, but config.json has no vocab_size to size it".to_owned(),
            ),
        },
        _ => Verdict::Explained,
    }
}

/// A feature's tensor (or scalar) in a package whose config does not switch the feature on.
fn off(f: crate::family::Feature, what: &str) -> Verdict {
    let [a, b] = f.fields();
    Verdict::Unexplained(
        "feature_off",
        Some(format!(
            "a DFlash2 {} {what}, but config.json sets no {a}/{b}",
            f.noun()
        )),
    )
}

/// `Ok` when an embedding table is BF16 `[vocab, hidden]` or a q4_1 grid of that size; `Err(None)`
/// when the config cannot size it.
fn embed_problem(
    inputs: &Inputs<'_, '_>,
    e: &crate::container::TensorInfo,
) -> Result<(), Option<String>> {
    let (Ok(Some(vocab)), Ok(hidden)) =
        (inputs.config.vocab_size.clone(), inputs.geometry.hidden())
    else {
        return Err(None);
    };
    if e.dtype == Dtype::Bf16 && e.shape == [vocab, hidden] {
        return Ok(());
    }
    if let Some(g) = GridGeometry::new(vocab, hidden) {
        if crate::tile::TileGrid::new(e, inputs.container.data(e), g).is_ok() {
            return Ok(());
        }
    }
    Err(Some(format!("an embedding table, but {} {} is neither BF16 [{vocab}, {hidden}] nor a q4_1 grid of {vocab} x {hidden}", e.dtype, e.shape_text())))
}
