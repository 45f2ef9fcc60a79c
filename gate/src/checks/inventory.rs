//! `inventory.complete` and `inventory.explained`, once for every form.
//!
//! Each form reader hands over its tensors as the inventory sees them ([`Held`]: the name as stored,
//! the logical `[out, in]` shape, whether its storage is one the loader reads as weights) and a
//! [`Spelling`] of role names; the expected tensors come from the family table and the config
//! alone. So a Hugging Face folder, a GGUF and a Q4NX package are held to one list of roles, one
//! rule for what is missing, misshapen or extra, and one vocabulary of reasons; only the loader's
//! words ([`Loader`]) and the form's own storage rules differ.
//!
//! The model classes build every weight from the config, and Transformers initialises one the file
//! lacks at random and loads without an error: a missing tensor is a draft that drafts noise, so
//! absence FAILs by name. A Q4NX package proves presence grid by grid in its own checks and runs only
//! `inventory.explained` here.

use super::list_of;
use crate::config::{DraftConfig, Field, Geometry};
use crate::container::shape_text;
use crate::escape::escape;
use crate::evidence::{Finding, InventoryComplete, InventoryExplained};
use crate::family::{
    gguf_names, looks_second_family, Feature, Kind, Naming, Projection, Role, Switch,
};
use crate::limits::MAX_CENSUS_TENSORS;
use crate::report::Check;
use std::collections::HashMap;

pub const COMPLETE: &str = crate::check_id::CheckId::INVENTORY_COMPLETE;
pub const EXPLAINED: &str = crate::check_id::CheckId::INVENTORY_EXPLAINED;

/// How a form names its tensors: a Hugging Face or Q4NX spelling of the family's names, or llama.cpp's.
#[derive(Clone, Copy, Debug)]
pub enum Spelling {
    /// `model.` or bare names, with the family's aliases.
    Checkpoint(Naming),
    /// llama.cpp's `blk.{i}.attn_q.weight`, read through the package's bare names.
    Llama,
}

impl Spelling {
    /// The name `role` is stored under in this form.
    pub fn name(self, role: Role) -> String {
        match self {
            Spelling::Checkpoint(naming) => naming.name(role),
            Spelling::Llama if role == Role::EmbedTokens => LLAMA_EMBEDDING.to_owned(),
            Spelling::Llama => {
                let bare = Naming::BARE.name(role);
                gguf_names::to_llama(&bare).unwrap_or(bare)
            }
        }
    }

    /// The role a stored name plays, for any layer index (the caller bounds it).
    pub fn role(self, name: &str) -> Option<Role> {
        match self {
            Spelling::Checkpoint(naming) => naming.role(name),
            Spelling::Llama if name == LLAMA_EMBEDDING => Some(Role::EmbedTokens),
            Spelling::Llama => Naming::BARE.role(&gguf_names::to_package(name).0),
        }
    }

    /// The output head a self-contained draft may carry beside its embedding table. It is not in the
    /// family tables (a Q4NX package never holds one), and Transformers keeps it outside `model.`
    /// whatever the folder's spelling.
    fn output_head(self) -> &'static str {
        match self {
            Spelling::Checkpoint(_) => "lm_head.weight",
            Spelling::Llama => "output.weight",
        }
    }
}

/// llama.cpp's name for the embedding table.
const LLAMA_EMBEDDING: &str = "token_embd.weight";

/// The words a form's loader gives each outcome, and how it states a shape.
pub struct Loader {
    /// What builds the tensors, and how: `the model class defines`, `llama.cpp's dflash graph needs`.
    pub defines: &'static str,
    /// What a failing `inventory.complete` found them: `missing or wrong`.
    pub wrong: &'static str,
    /// What a passing one found them: `of the config's shape and a float type`.
    pub held_to: &'static str,
    /// Where the shapes come from: `the config`, `the metadata`.
    pub source: &'static str,
    /// What declares the family and its features: `config.json`, `the metadata`.
    pub declares: &'static str,
    /// What follows a missing tensor, in parentheses.
    pub missing: &'static str,
    /// What follows a misshapen one (empty: nothing to add).
    pub misshapen: &'static str,
    /// What follows an unexplained one, after the list (empty: nothing to add).
    pub extra: &'static str,
    /// What a failing `inventory.explained` says the extra tensors are: `are unexplained`.
    pub unexplained: &'static str,
    /// What its PASS says the tensors are: `have a role`, `are the model class's`.
    pub owned: &'static str,
    /// The form states shapes reversed (llama.cpp's `ne`, innermost first).
    pub reversed: bool,
    /// The form's DFlash fields are scalar tensors (a Q4NX package's `dflash.*`), not config fields.
    pub scalar_tensors: bool,
    /// An embedding table or output head whose vocabulary the draft does not state is the target's:
    /// only its hidden side is known, and held (llama.cpp sizes it from the file).
    pub vocabulary_of_the_target: bool,
}

impl Loader {
    /// A logical shape as the form writes it.
    fn show(&self, shape: &[u64]) -> String {
        if self.reversed {
            let ne: Vec<u64> = shape.iter().rev().copied().collect();
            shape_text(&ne)
        } else {
            shape_text(shape)
        }
    }
}

/// One tensor of the draft as the inventory sees it.
pub struct Held<'a> {
    /// As stored, for messages and evidence.
    pub name: &'a str,
    /// The logical `[out, in]` shape (a gain `[len]`).
    pub shape: Vec<u64>,
    /// The tensor as the form states it (`BF16 [8, 512]`, `Q8_0 ne [512, 8]`).
    pub shown: String,
    /// `Err(why)` when its storage is not one the loader reads as weights.
    pub readable: Result<(), String>,
}

/// A form-specific rule for an embedding table `inventory.explained` meets: `Ok` when the form
/// reads it, `Err(None)` when the config cannot size it.
pub type EmbeddingRule<'r> = &'r dyn Fn(&Held<'_>) -> Result<(), Option<String>>;

/// One tensor the model class defines for this config, under the name this form spells it.
struct Expected {
    name: String,
    /// The config field that makes an otherwise optional tensor required (`has_embed_tokens: true`).
    required_by: Option<&'static str>,
    /// The shape, or the config field that would size it.
    shape: Field<Vec<u64>>,
    /// Only checked when present (an embedding table, an output head).
    optional: bool,
    /// A codebook: the MLX loader reads it only without `.weight`.
    codebook: bool,
    /// Sized by the vocabulary (an embedding table, an output head, a codebook): its other side,
    /// when the config gives it, so that a form whose vocabulary is the target's holds that side.
    vocabulary: Option<Field<u64>>,
}

/// Both checks, in report order.
pub fn run(
    config: &DraftConfig,
    spelling: Spelling,
    loader: &Loader,
    held: &[Held<'_>],
) -> [Check; 2] {
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
    let (expected, features_unread) = expected(config, &geometry, spelling, layers);
    let by_name: HashMap<&str, &Held<'_>> = held.iter().map(|t| (t.name, t)).collect();
    let no_rule = |_: &Held<'_>| Ok(());
    [
        complete(loader, &expected, &features_unread, &by_name),
        explained(
            config,
            spelling,
            loader,
            layers,
            Some(&expected),
            held,
            &no_rule,
        ),
    ]
}

/// `inventory.explained` alone, for a form whose own checks prove presence (a Q4NX package): every
/// tensor has a role of the config's family, switched on and in a layer the config has, and an
/// embedding table passes `embedding`.
pub fn explained_only(
    config: &DraftConfig,
    spelling: Spelling,
    loader: &Loader,
    held: &[Held<'_>],
    embedding: EmbeddingRule<'_>,
) -> Check {
    match Geometry::new(config).layers() {
        Ok(layers) => explained(config, spelling, loader, layers, None, held, embedding),
        Err(p) => super::geometry::blocked_by_field(EXPLAINED, &p),
    }
}

/// Every tensor the model class defines, in the family table's order, and the features whose config
/// pair could not be read (their tensors cannot be listed).
fn expected(
    config: &DraftConfig,
    geometry: &Geometry<'_>,
    spelling: Spelling,
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
            name: spelling.name(role),
            required_by: (role == Role::EmbedTokens && config.has_embed_tokens == Ok(Some(true)))
                .then_some("has_embed_tokens: true"),
            shape: (spec.shape)(geometry),
            optional: spec.switch == Switch::Optional
                && !(role == Role::EmbedTokens && config.has_embed_tokens == Ok(Some(true))),
            codebook: matches!(role.kind(), Some(Kind::Selector(p)) if p.is_codebook()),
            // The embedding table and the selector's codebooks have a row per token.
            vocabulary: match role.kind() {
                Some(Kind::EmbedTokens) => Some(geometry.hidden()),
                Some(Kind::Selector(p)) if p.is_codebook() => Some(geometry.selector_rank()),
                _ => None,
            },
        })
        .collect();
    let own_head = config.has_own_lm_head == Ok(Some(true));
    let reduced = config.reduced_vocabulary();
    out.push(Expected {
        name: spelling.output_head().to_owned(),
        required_by: match reduced {
            Some(_) => Some("draft_vocab_size below the verifier's vocabulary"),
            None => own_head.then_some("has_own_lm_head: true"),
        },
        shape: match reduced {
            Some((draft, _)) => geometry.hidden().map(|h| vec![draft, h]),
            None => vocab_by_hidden(geometry),
        },
        optional: !own_head && reduced.is_none(),
        codebook: false,
        // A reduced vocabulary's head is sized by the draft's own; otherwise by the target's.
        vocabulary: reduced.is_none().then(|| geometry.hidden()),
    });
    // A reduced vocabulary's map (speculators): draft token i is target id i + d2t[i], and t2d marks
    // the target ids the draft scores.
    if let Some((draft, verifier)) = reduced {
        for (name, len) in [(D2T, draft), (T2D, verifier)] {
            out.push(Expected {
                name: name.to_owned(),
                required_by: Some("draft_vocab_size below the verifier's vocabulary"),
                shape: Ok(vec![len]),
                optional: false,
                codebook: false,
                vocabulary: None,
            });
        }
    }
    if let Ok(Some(true)) = config.attention_bias {
        for layer in 0..layers {
            for p in [Projection::Q, Projection::K, Projection::V, Projection::O] {
                let weight = spelling.name(Role::Projection {
                    layer,
                    projection: p,
                });
                let shape = match p {
                    Projection::Q => geometry.q_dim(),
                    Projection::K | Projection::V => geometry.kv_dim(),
                    _ => geometry.hidden(),
                };
                out.push(Expected {
                    name: format!("{}.bias", weight.trim_end_matches(".weight")),
                    required_by: None,
                    shape: shape.map(|n| vec![n]),
                    optional: false,
                    codebook: false,
                    vocabulary: None,
                });
            }
        }
    }
    if let Ok(Some(true)) = config.attention_sink_bias {
        for layer in 0..layers {
            out.push(Expected {
                name: sink_name(spelling, layer),
                required_by: None,
                shape: geometry.heads().map(|n| vec![n]),
                optional: false,
                codebook: false,
                vocabulary: None,
            });
        }
    }
    (out, unread)
}

/// A reduced vocabulary's map from draft token to target token (I64 `[draft_vocab_size]`: each
/// entry the offset to add) and its inverse mask (BOOL `[vocab_size]`), as speculators names them.
pub const D2T: &str = "d2t";
pub const T2D: &str = "t2d";

/// `inventory.complete` of a draft with a reduced vocabulary, once the map's two tensors are read:
/// a PASS stands only when target id `i + d2t[i]` strictly increases and stays below
/// `vocab_size`, and `t2d` is true exactly at those ids. The first break is named with its index.
/// The map is what gives each row of the draft's head its target token: a broken one scores other
/// tokens than the draft was trained on, with every shape right.
pub fn vocabulary_map(complete: Check, d2t: &[u8], t2d: &[u8], vocab: u64) -> Check {
    if complete.outcome() != crate::report::Outcome::Pass {
        return complete;
    }
    let Err((name, why)) = map_breaks(d2t, t2d, vocab) else {
        return complete;
    };
    let mut evidence = match complete.evidence() {
        Some(crate::evidence::Evidence::InventoryComplete(e)) => e.clone(),
        _ => InventoryComplete {
            required: 0,
            present: 0,
            problems: Vec::new(),
            not_listed: 0,
        },
    };
    evidence.problems.push(Finding::new(name, "vocabulary_map"));
    Check::fail(
        COMPLETE,
        format!("the reduced vocabulary's map is broken: {why}"),
    )
    .with_evidence(evidence)
}

/// The first break of the map, as the tensor and why.
fn map_breaks(d2t: &[u8], t2d: &[u8], vocab: u64) -> Result<(), (&'static str, String)> {
    let (chunks, _) = d2t.as_chunks::<8>();
    let mut targets: Vec<u64> = Vec::with_capacity(chunks.len());
    for (i, chunk) in chunks.iter().enumerate() {
        let offset = i64::from_le_bytes(*chunk);
        let target = i as i128 + i128::from(offset);
        if target < 0 || target >= i128::from(vocab) {
            return Err((D2T, format!("d2t[{i}] is {offset}: draft token {i} maps to target id {target}, outside the verifier's vocabulary of {vocab}")));
        }
        if let Some(&previous) = targets.last() {
            if target <= i128::from(previous) {
                return Err((D2T, format!("d2t[{i}] is {offset}: draft token {i} maps to target id {target}, not above draft token {}'s {previous}: the target ids i + d2t[i] must strictly increase", i - 1)));
            }
        }
        targets.push(target as u64);
    }
    let trues = t2d.iter().filter(|&&b| b == 1).count();
    let mut next = 0usize;
    for (id, &b) in t2d.iter().enumerate() {
        let mapped = targets.get(next) == Some(&(id as u64));
        let why = match (b, mapped) {
            (0, false) | (1, true) => None,
            (0, true) => Some(format!("t2d[{id}] is false, but draft token {next} maps to target id {id} (d2t)")),
            (1, false) => Some(format!("t2d[{id}] is true, but no draft token maps to target id {id} (t2d holds {trues} true, draft_vocab_size is {})", targets.len())),
            (b, _) => Some(format!("t2d[{id}] is {b}, not a boolean (0 or 1)")),
        };
        if let Some(why) = why {
            return Err((T2D, why));
        }
        next += usize::from(mapped);
    }
    Ok(())
}

/// MiMo's per-layer attention sink, under this form's spelling of the layer's attention.
fn sink_name(spelling: Spelling, layer: u64) -> String {
    let q = spelling.name(Role::Projection {
        layer,
        projection: Projection::Q,
    });
    let attention = q.trim_end_matches(".weight").trim_end_matches("q_proj");
    format!("{attention}{SINK}")
}

/// The name of MiMo's attention sink after its layer's `self_attn.`.
const SINK: &str = "attention_sink_bias";

fn vocab_by_hidden(geometry: &Geometry<'_>) -> Field<Vec<u64>> {
    Ok(vec![geometry.vocab()?, geometry.hidden()?])
}

/// `, N optional` for the optional tensors among `present`, or nothing.
fn optional_present(present: usize, required: usize) -> String {
    match present.saturating_sub(required) {
        0 => String::new(),
        n => format!(", {n} optional"),
    }
}

/// `inventory.complete`.
fn complete(
    loader: &Loader,
    expected: &[Expected],
    features_unread: &[String],
    by_name: &HashMap<&str, &Held<'_>>,
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
        let Some(t) = by_name.get(e.name.as_str()).copied() else {
            let suffixed = format!("{}.weight", e.name);
            if let (true, Some(t)) = (e.codebook, by_name.get(suffixed.as_str())) {
                note(&mut problems, t.name, "codebook_suffix", format!("{} is stored as {}: z-lab's MLX loader (load_draft) reads the released name {} and raises a KeyError on this one (Transformers reads either)", e.name, escape(t.name), e.name));
            } else if !e.optional {
                let why = match e.required_by {
                    Some(field) => format!("the config says {field}; {}", loader.missing),
                    None => loader.missing.to_owned(),
                };
                note(
                    &mut problems,
                    &e.name,
                    "missing",
                    format!("{} is missing ({why})", e.name),
                );
            }
            continue;
        };
        present += 1;
        if let Err(why) = &t.readable {
            note(&mut problems, t.name, "element_type", why.clone());
            continue;
        }
        let beside = e
            .vocabulary
            .clone()
            .filter(|_| loader.vocabulary_of_the_target);
        let want = match (&e.shape, beside) {
            (Ok(shape), _) if *shape == t.shape => continue,
            (Ok(shape), _) => loader.show(shape),
            // The target's vocabulary: whatever it is, the other side must be the draft's.
            (Err(p), Some(other)) => match other {
                Ok(h) if t.shape.len() == 2 && t.shape[1] == h => continue,
                Ok(h) if loader.reversed => format!("[{h}, vocab]"),
                Ok(h) => format!("[vocab, {h}]"),
                Err(_) => {
                    undecided.push(format!("{}: {}", escape(t.name), p.needs()));
                    continue;
                }
            },
            (Err(p), None) => {
                undecided.push(format!("{}: {}", escape(t.name), p.needs()));
                continue;
            }
        };
        note(
            &mut problems,
            t.name,
            "misshapen",
            format!(
                "{} is {}, {} makes it {want}{}",
                escape(t.name),
                t.shown,
                loader.source,
                loader.misshapen
            ),
        );
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
                "{total} of the tensors {} are {}: {}",
                loader.defines,
                loader.wrong,
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
            "every tensor {} is there, {}: {required} required{}",
            loader.defines,
            loader.held_to,
            optional_present(present, required)
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

/// `inventory.explained`: every tensor is one the model class defines; anything else is named.
/// `expected`, when the form lists its tensors by name, explains those names (an output head, bias
/// vectors, a codebook under either name); without it a role of the family explains a tensor.
fn explained(
    config: &DraftConfig,
    spelling: Spelling,
    loader: &Loader,
    layers: u64,
    expected: Option<&[Expected]>,
    held: &[Held<'_>],
    embedding: EmbeddingRule<'_>,
) -> Check {
    let known: HashMap<&str, bool> = expected
        .into_iter()
        .flatten()
        .map(|e| (e.name.as_str(), e.codebook))
        .collect();
    // Every tensor is judged; the findings are kept up to the census's limit and the rest counted,
    // so a header of a million stray tensors costs no more to report than a few thousand.
    let (mut unexplained, mut undecided) = (Vec::new(), Vec::new());
    let (mut unexplained_items, mut undecided_items) = (Vec::new(), Vec::new());
    let (mut unexplained_total, mut undecided_total, mut not_listed) = (0usize, 0usize, 0u64);
    let mut seen: HashMap<Role, &str> = HashMap::new();
    for t in held {
        let role = spelling.role(t.name);
        let codebook_suffixed = t
            .name
            .strip_suffix(".weight")
            .is_some_and(|bare| known.get(bare) == Some(&true));
        let verdict = if let Some(first) = role.and_then(|r| seen.get(&r)) {
            // A codebook with and without `.weight`, or a name and its alias: one role, two tensors.
            let role = role.map(|r| r.to_string()).unwrap_or_default();
            Verdict::Unexplained(
                "second_name",
                Some(format!("a second name for {role}: {}", escape(first))),
            )
        } else if known.contains_key(t.name) || codebook_suffixed {
            Verdict::Explained
        } else {
            judge(
                config,
                loader,
                expected.is_some(),
                t,
                role,
                layers,
                embedding,
            )
        };
        if let Some(role) = role {
            seen.entry(role).or_insert(t.name);
        }
        match verdict {
            Verdict::Explained => {}
            Verdict::Undecided(kind, why) => {
                undecided_total += 1;
                if undecided_items.len() < MAX_CENSUS_TENSORS {
                    undecided.push(format!("{}: {why}", escape(t.name)));
                    undecided_items.push(Finding::new(t.name, kind));
                } else {
                    not_listed += 1;
                }
            }
            Verdict::Unexplained(kind, why) => {
                unexplained_total += 1;
                if unexplained_items.len() < MAX_CENSUS_TENSORS {
                    unexplained.push(match why {
                        Some(why) => format!("{} ({why})", escape(t.name)),
                        None => escape(t.name).into_owned(),
                    });
                    unexplained_items.push(Finding::new(t.name, kind));
                } else {
                    not_listed += 1;
                }
            }
        }
    }
    let evidence = InventoryExplained {
        tensors: held.len(),
        unexplained: unexplained_items,
        undecided: undecided_items,
        not_listed,
    };
    if unexplained_total > 0 {
        return Check::fail(
            EXPLAINED,
            format!(
                "{unexplained_total} of {} tensors {}: {}{}",
                held.len(),
                loader.unexplained,
                list_of(&unexplained, unexplained_total, 3),
                loader.extra
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
            "no tensor is left unexplained: {} of {} {} (unexplained: none)",
            held.len(),
            held.len(),
            loader.owned
        ),
    )
    .with_evidence(evidence)
}

/// Why a tensor not explained by name is there, or that its role explains it: a role of the
/// config's family, in a layer the config has, switched on by the config (an embedding table also
/// passes the form's rule). `listed` says the form's expected names were already tried, so a role
/// that would be explained is one spelled unlike the form's other names.
fn judge(
    config: &DraftConfig,
    loader: &Loader,
    listed: bool,
    t: &Held<'_>,
    role: Option<Role>,
    layers: u64,
    embedding: EmbeddingRule<'_>,
) -> Verdict {
    let family = config.family();
    let Some(role) = role else {
        if t.name.ends_with(&format!("self_attn.{SINK}"))
            && config.attention_sink_bias != Ok(Some(true))
        {
            return Verdict::Unexplained(
                "feature_off",
                Some(format!(
                    "an attention sink, but the config sets no {SINK}: true (MiMo's drafts state it in dflash_config)"
                )),
            );
        }
        return if looks_second_family(t.name) {
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
                "a second-family (DFlash2) {what}, but {} declares the {} family",
                loader.declares, family.name
            )),
        )
    };
    if let Some(layer) = role.layer().filter(|l| *l >= layers) {
        return Verdict::Unexplained(
            "beyond_layers",
            Some(format!(
                "layer {layer}, but {} has {layers} {}",
                loader.source,
                if layers == 1 { "layer" } else { "layers" }
            )),
        );
    }
    let Some(kind) = role.kind() else {
        let Role::Scalar(s) = role else {
            return Verdict::Explained;
        };
        if !loader.scalar_tensors {
            return Verdict::Unexplained(
                "no_role",
                Some(format!(
                    "a Q4NX package's scalar: this form states its DFlash fields in {}",
                    loader.source
                )),
            );
        }
        return match s.feature().map(|f| (f, f.is_on(config))) {
            _ if !family.scalars().any(|f| f == s) => second("scalar".to_owned()),
            // A feature's copy of its pair, in a package whose config switches the feature off.
            Some((f, Ok(false))) => off(loader, f, "scalar"),
            _ => Verdict::Explained,
        };
    };
    let Some(spec) = family.spec(kind) else {
        return second(format!("{role} tensor"));
    };
    match (spec.switch, role) {
        (Switch::Feature(f), _) => match f.is_on(config) {
            Ok(false) => off(loader, f, "tensor"),
            Err(p) => Verdict::Undecided("needs_field", p.needs()),
            Ok(true) if listed => misspelled(),
            Ok(true) => Verdict::Explained,
        },
        _ if listed => misspelled(),
        (_, Role::EmbedTokens) => match embedding(t) {
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

/// A role the config switches on whose name this form does not spell (another prefix).
fn misspelled() -> Verdict {
    Verdict::Unexplained(
        "no_role",
        Some("spelled unlike the file's other names".to_owned()),
    )
}

/// A feature's tensor (or scalar) in a package whose config does not switch the feature on.
fn off(loader: &Loader, f: Feature, what: &str) -> Verdict {
    let [a, b] = f.fields();
    Verdict::Unexplained(
        "feature_off",
        Some(format!(
            "a DFlash2 {} {what}, but {} sets no {a}/{b}",
            f.noun(),
            loader.declares
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d2t(offsets: &[i64]) -> Vec<u8> {
        offsets.iter().flat_map(|o| o.to_le_bytes()).collect()
    }

    /// The map's breaks the arms do not make: a target id past the vocabulary, below zero, a
    /// target id `t2d` leaves false, and a `t2d` byte that is no boolean.
    #[test]
    fn a_vocabulary_map_is_held_entry_by_entry() {
        // Draft tokens 0, 1, 2 are target ids 0, 2, 4 of 6.
        let good = d2t(&[0, 1, 2]);
        let mask = [1, 0, 1, 0, 1, 0];
        assert_eq!(map_breaks(&good, &mask, 6), Ok(()));
        let (name, why) = map_breaks(&d2t(&[0, 1, 4]), &mask, 6).unwrap_err();
        assert_eq!(name, D2T);
        assert!(why.contains("d2t[2]") && why.contains("outside"), "{why}");
        let (_, why) = map_breaks(&d2t(&[-1, 1, 2]), &mask, 6).unwrap_err();
        assert!(why.contains("d2t[0] is -1"), "{why}");
        let (name, why) = map_breaks(&good, &[1, 0, 0, 0, 1, 0], 6).unwrap_err();
        assert_eq!(name, T2D);
        assert!(
            why.contains("t2d[2] is false") && why.contains("draft token 1"),
            "{why}"
        );
        let (_, why) = map_breaks(&good, &[1, 0, 1, 0, 2, 0], 6).unwrap_err();
        assert!(why.contains("t2d[4] is 2"), "{why}");
    }
}
