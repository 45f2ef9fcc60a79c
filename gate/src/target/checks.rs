//! The target's geometry against the draft's: `target.hidden_size`, `target.depth`, `target.vocab`.

use super::{Draft, StatedIn, Target, DEPTH, HIDDEN, VOCAB};
use crate::config::{FieldProblem, ProblemKind};
use crate::container::TensorInfo;
use crate::dtype::Dtype;
use crate::evidence::{Finding, TargetDepth, TargetHiddenSize, TargetVocab, VerifierArchitectures};
use crate::report::Check;
use crate::tile::{TILE_BYTES, TILE_COLS, TILE_ROWS};

/// The embedding and head tables whose rows `target.vocab` counts and whose width `target.hidden_size`
/// compares, under the names targets give them.
const TABLES: [&str; 5] = [
    "model.embed_tokens.weight",
    "embed_tokens.weight",
    "lm_head.weight",
    "model.lm_head.weight",
    super::gguf::TOKEN_EMBD,
];

/// Where a target's counts were read, as a message names it.
fn stated_in(at: StatedIn) -> &'static str {
    match at {
        StatedIn::Config => "the target's config.json",
        StatedIn::Gguf => "the target GGUF's metadata",
    }
}

/// A target config count a check cannot use, as `config.geometry` treats the draft's own fields: absent
/// or of the wrong type is UNDECIDED (nothing is guessed at), present and typed but zero, negative or
/// too long for 64 bits is a FAIL (no draft fits it).
fn unusable(id: &str, p: &FieldProblem, at: StatedIn) -> Check {
    let file = stated_in(at);
    match (&p.kind, at) {
        (ProblemKind::Missing, StatedIn::Config) => Check::undecided(
            id,
            format!(
                "cannot decide: {file} has no {}, at top level or in text_config \
                 (null counts as none)",
                p.field
            ),
        ),
        (ProblemKind::Missing, StatedIn::Gguf) => {
            Check::undecided(id, format!("cannot decide: {file} has no {}", p.field))
        }
        (ProblemKind::WrongType(_), _) => {
            Check::undecided(id, format!("cannot decide: in {file}, {p}"))
        }
        (ProblemKind::Invalid(_), _) => Check::fail(id, format!("in {file}, {p}")),
    }
}

/// `target.hidden_size`: the draft's hidden size is the target's, and the target's embedding and head
/// tables are as wide as the hidden size its config states. fc fuses the target's hidden states, whose
/// width those tables fix; a config whose `hidden_size` disagrees with its own tables would let a
/// draft pass against a number the target does not have. Problems that do not depend on the draft (the
/// target's `hidden_size` zero or negative, a table of another width) FAIL even when the draft's own
/// hidden size could not be read.
pub(super) fn hidden(draft: &Draft, target: &Target) -> Check {
    let mut problems = Vec::new();
    let mut compared = Vec::new();
    if let Err(p) = &target.hidden_size {
        if p.is_invalid() {
            problems.push(format!("in {}, {p}", stated_in(target.stated_in)));
        }
    }
    if let (Ok(d), Ok(t)) = (&draft.hidden_size, &target.hidden_size) {
        if d != t {
            problems.push(format!("the draft's hidden size{} differs from the target's ({d} vs {t}): fc cannot fuse the target's hidden states", draft.read_at("hidden")));
        }
    }
    if let (Ok(t), Ok(tensors)) = (&target.hidden_size, &target.tensors) {
        for name in TABLES {
            let Some(info) = tensors.iter().find(|e| e.name == name) else {
                continue;
            };
            let declared = format!("{name} is {} {}", info.dtype, info.shape_text());
            match width(info) {
                Width::Columns(w) if w == *t => compared.push(name),
                Width::Columns(w) => problems.push(format!(
                    "{declared}: {w} wide, the target's hidden_size is {t}"
                )),
                Width::ColumnBlocks(b) if b == t.div_ceil(TILE_COLS) => compared.push(name),
                Width::ColumnBlocks(b) => problems.push(format!(
                    "{declared}: a tile grid {b} column blocks wide, the target's hidden_size {t} needs {} (of {TILE_COLS} columns each)",
                    t.div_ceil(TILE_COLS)
                )),
                Width::Unstated => {}
            }
        }
    }
    // The evidence keeps its documented shape (schema/report.schema.json): the tables compared are
    // named in the message.
    let evidence = TargetHiddenSize {
        draft: draft.hidden_size.clone().ok(),
        target: target.hidden_size.clone().ok(),
    };
    if !problems.is_empty() {
        return Check::fail(HIDDEN, problems.join("; ")).with_evidence(evidence);
    }
    let d = match &draft.hidden_size {
        Ok(d) => *d,
        Err(p) => {
            return Check::blocked(
                HIDDEN,
                "config.geometry",
                format!("cannot decide: {}", p.needs()),
            )
            .with_evidence(evidence)
        }
    };
    let t = match &target.hidden_size {
        Ok(t) => *t,
        Err(p) => return unusable(HIDDEN, p, target.stated_in).with_evidence(evidence),
    };
    let mut message = format!("the draft's hidden size{} equals the target's ({d} vs {t}): fc fuses the target's hidden states", draft.read_at("hidden"));
    if !compared.is_empty() {
        message.push_str(&format!(
            "; the target's {} as wide",
            match compared.as_slice() {
                [one] => format!("{one} is"),
                many => format!("{} are", many.join(" and ")),
            }
        ));
    }
    Check::pass(HIDDEN, message).with_evidence(evidence)
}

/// How wide an embedding or head table is, as far as its header says.
enum Width {
    /// A plain matrix: exactly this many columns.
    Columns(u64),
    /// A `[N/32, Kp/256, 5120]` tile grid: this many blocks of 256 columns, so the width is known to
    /// within the last block's padding (the same header field `rows` reads the row blocks from).
    ColumnBlocks(u64),
    /// Nothing to compare: a form the gate does not read, or a flat `[tiles, 5120]` grid, whose width
    /// is not stated at all (`rows` derives its rows by assuming the width is the target's hidden
    /// size, so comparing the two would prove nothing).
    Unstated,
}

fn width(info: &TensorInfo) -> Width {
    // A GGUF's table is `[ne1, ne0]` in elements whatever its block type: never read as a tile grid.
    if let (super::gguf::TOKEN_EMBD, [_, cols]) = (info.name.as_str(), info.shape.as_slice()) {
        return Width::Columns(*cols);
    }
    match (info.dtype, info.shape.as_slice()) {
        (d, [_, cols]) if is_float(d) => Width::Columns(*cols),
        (Dtype::I8 | Dtype::U8, [_, col_blocks, last]) if *last == TILE_BYTES => {
            Width::ColumnBlocks(*col_blocks)
        }
        _ => Width::Unstated,
    }
}

/// The float dtypes a plain `[rows, columns]` table may be declared in.
fn is_float(d: Dtype) -> bool {
    matches!(
        d,
        Dtype::F8E4M3 | Dtype::F8E5M2 | Dtype::F16 | Dtype::Bf16 | Dtype::F32 | Dtype::F64
    )
}

/// The verifier a speculators draft names against the target's architectures, as `target.depth`
/// says it: its evidence, the clause a message carries, and whether the two differ. `None` for a
/// draft whose form names no verifier.
struct Verifier {
    evidence: VerifierArchitectures,
    said: String,
    differs: bool,
}

fn verifier(draft: &Draft, target: &Target) -> Option<Verifier> {
    let stated = draft.verifier_architectures.as_ref()?;
    let field = crate::config::canonical::VERIFIER_ARCHITECTURES;
    let classes = |c: &[String]| c.join(", ");
    let (said, differs) = match (stated, &target.architectures) {
        (Err(p), _) => (
            format!("the verifier's architectures were not compared: the draft's {p}"),
            false,
        ),
        (Ok(v), Err(why)) => (
            format!(
                "the verifier's architectures ({field} [{}]) were not compared: {why}",
                classes(v)
            ),
            false,
        ),
        (Ok(v), Ok(t)) => {
            let set = |c: &[String]| c.iter().cloned().collect::<std::collections::BTreeSet<_>>();
            if set(v) == set(t) {
                (
                    format!(
                        "the verifier the draft was trained against ({field} [{}]) is the target's (architectures in its config.json)",
                        classes(v)
                    ),
                    false,
                )
            } else {
                (
                    format!(
                        "the draft was trained against {field} [{}], and the target's config.json states architectures [{}]: its taps read another model's layers",
                        classes(v),
                        classes(t)
                    ),
                    true,
                )
            }
        }
    };
    Some(Verifier {
        evidence: VerifierArchitectures {
            verifier: stated.clone().ok(),
            target: target.architectures.clone().ok(),
            compared: stated.is_ok() && target.architectures.is_ok(),
        },
        said,
        differs,
    })
}

/// `target.depth`: every tap is a layer the target has, the draft's `num_target_layers` (where it
/// states one) is the target's count, and a speculators draft's verifier is the target's model
/// (its architectures against the target config's, when both are stated; otherwise the message says
/// they were not compared). Another verifier FAILs whatever the counts, as it does not depend on them.
pub(super) fn depth(draft: &Draft, target: &Target) -> Check {
    let verifier = verifier(draft, target);
    let record = verifier.as_ref().map(|v| v.evidence.clone());
    if let Some(v) = verifier.as_ref().filter(|v| v.differs) {
        let check = Check::fail(DEPTH, v.said.clone());
        return match (&draft.target_layer_ids, &target.num_hidden_layers) {
            (Ok(taps), Ok(layers)) => check.with_evidence(TargetDepth {
                taps: taps.clone(),
                target_layers: *layers,
                draft_num_target_layers: draft.num_target_layers.clone().ok().flatten(),
                target_architecture: target.architecture.name().map(str::to_owned),
                records_last_layer: target.architecture.records_last_layer(),
                verifier_architectures: record,
            }),
            _ => check,
        };
    }
    let said = verifier
        .map(|v| format!("; {}", v.said))
        .unwrap_or_default();
    if let Err(p) = &target.num_hidden_layers {
        if p.is_invalid() {
            return unusable(DEPTH, p, target.stated_in);
        }
    }
    let taps = match &draft.target_layer_ids {
        Ok(t) => t,
        Err(p) => {
            return Check::blocked(
                DEPTH,
                "config.geometry",
                format!("cannot decide: {}", p.needs()),
            )
        }
    };
    let layers = match &target.num_hidden_layers {
        Ok(layers) => *layers,
        Err(p) => return unusable(DEPTH, p, target.stated_in),
    };
    let evidence = TargetDepth {
        taps: taps.clone(),
        target_layers: layers,
        draft_num_target_layers: draft.num_target_layers.clone().ok().flatten(),
        target_architecture: target.architecture.name().map(str::to_owned),
        records_last_layer: target.architecture.records_last_layer(),
        verifier_architectures: record,
    };
    if let Some(bad) = taps.iter().find(|&&t| t >= layers) {
        return Check::fail(
            DEPTH,
            format!(
                "tap {bad} of {} is not below the target's {}",
                draft.taps_named(taps),
                crate::report::count_layers(layers)
            ),
        )
        .with_evidence(evidence);
    }
    if let Some(check) = last_layer(draft, target, taps, layers) {
        return check.with_evidence(evidence);
    }
    match draft.num_target_layers.clone() {
        Ok(Some(n)) if n != layers => Check::fail(
            DEPTH,
            format!(
                "the draft's num_target_layers is {n}, the target has {}",
                crate::report::count_layers(layers)
            ),
        )
        .with_evidence(evidence),
        _ => Check::pass(
            DEPTH,
            format!(
                "every tap in {} is below the target's {}{said}",
                match draft.gguf {
                    None => format!("{taps:?}"),
                    Some(_) => draft.taps_named(taps),
                },
                crate::report::count_layers(layers)
            ),
        )
        .with_evidence(evidence),
    }
}

/// llama.cpp's abort when a GGUF draft taps a layer input its target's graph never records.
const NULL_LAYER_INPUT: &str =
    "GGML_ASSERT(t_layer_inp[il] != nullptr && \"layer input tensor is null\")";

/// A GGUF draft whose deepest `dflash.target_layers` entry is the target's layer count: the output of
/// the last layer, which llama.cpp b11434 records only for the architectures that record it
/// ([`super::RECORDS_LAST_LAYER_GGUF`]). Its context accepts the tap (`lid <= n_layer()`), then the
/// first prefill aborts for every other architecture. Stricter than spec 15's `<= layers`: a FAIL
/// for an architecture that does not record it, UNDECIDED when the target states none. `None` when
/// the draft does not tap the last layer, or the architecture records it.
fn last_layer(draft: &Draft, target: &Target, taps: &[u64], layers: u64) -> Option<Check> {
    draft.gguf.as_ref()?;
    // `layers` is positive: both readers refuse a count of 0.
    if !taps.contains(&(layers - 1)) {
        return None;
    }
    let reads = format!(
        "{} reaches {layers}, the target's layer count ({}): the output of its last layer",
        draft.taps_named(taps),
        crate::report::count_layers(layers)
    );
    match (
        target.architecture.records_last_layer(),
        target.architecture.named(),
    ) {
        (Some(true), _) => None,
        (Some(false), Some(named)) => Some(Check::fail(
            DEPTH,
            format!(
                "{reads}: llama.cpp b11434 records it only for a target of {}, not this one ({named}), \
                 and aborts at the first prefill, {NULL_LAYER_INPUT}",
                super::RECORDS_LAST_LAYER_GGUF.join(", ")
            ),
        )),
        _ => Some(Check::undecided(
            DEPTH,
            format!(
                "{reads}: llama.cpp b11434 records it only for a target of {}, and aborts at the first \
                 prefill on any other ({NULL_LAYER_INPUT}); {}, so which it is cannot be told",
                super::RECORDS_LAST_LAYER_GGUF.join(", "),
                match &target.architecture {
                    super::Architecture::NotStated(why) => why.as_str(),
                    _ => "the target states no architecture",
                }
            ),
        )),
    }
}

pub(super) fn vocab(draft: &Draft, target: &Target) -> Check {
    let vocab = match &target.vocab_size {
        Ok(vocab) => *vocab,
        Err(p) => return unusable(VOCAB, p, target.stated_in),
    };
    let mut problems = Vec::new();
    let mut found = Vec::new();
    let mut agreed = vec![format!("target vocab_size {vocab}")];
    let at = match &draft.vocab_read_at {
        Some(at) => format!(" ({at})"),
        None => String::new(),
    };
    match draft.vocab_size.clone() {
        Ok(Some(d)) if d != vocab => {
            problems.push(format!(
                "the draft's vocab_size{at} is {d}, the target's {vocab}"
            ));
            found.push(Finding::new("vocab_size", "draft_vocab_size"));
        }
        Ok(Some(d)) => agreed.push(format!("draft vocab_size {d}{at}")),
        Ok(None) => agreed.push("draft states no vocab_size".to_owned()),
        Err(p) => {
            problems.push(format!("the draft's {p}"));
            found.push(Finding::new("vocab_size", "draft_field"));
        }
    }
    let mut rows_read = Vec::new();
    let hidden = target.hidden_size.clone().ok();
    if let Ok(tensors) = &target.tensors {
        for name in TABLES {
            let Some(info) = tensors.iter().find(|e| e.name == name) else {
                continue;
            };
            match rows(info, hidden) {
                Rows::Exact(r) if r == vocab => agreed.push(format!("{name} has {r} rows")),
                Rows::Exact(r) => {
                    problems.push(format!("{name} has {r} rows, vocab_size is {vocab}"));
                    found.push(Finding::new(name, "rows"));
                }
                Rows::Padded(np) if vocab <= np && np - vocab < 32 => {
                    agreed.push(format!("{name} is a tile grid of {np} padded rows"))
                }
                Rows::Padded(np) => {
                    problems.push(format!(
                        "{name} is a tile grid of {np} padded rows, vocab_size is {vocab}"
                    ));
                    found.push(Finding::new(name, "padded_rows"));
                }
                Rows::Unknown => {}
            }
            if !matches!(rows(info, hidden), Rows::Unknown) {
                rows_read.push(name);
            }
        }
    }
    let evidence = TargetVocab {
        target_vocab_size: vocab,
        draft_vocab_size: draft.vocab_size.clone().ok().flatten(),
        tables_read: rows_read.clone(),
        problems: found,
    };
    if !problems.is_empty() {
        return Check::fail(
            VOCAB,
            format!("the vocabularies disagree: {}", problems.join("; ")),
        )
        .with_evidence(evidence);
    }
    let compared = matches!(draft.vocab_size, Ok(Some(_)));
    if rows_read.is_empty() && compared && target.weights_absent {
        if let Err(why) = &target.tensors {
            // A folder with only its config (the weights not downloaded): the config's vocab_size is
            // the row count its loader builds the embedding with, so the two configs agreeing is the
            // answer. Weights that are there but hold no table of a known form are another matter.
            return Check::pass(
                VOCAB,
                format!(
                    "the vocabularies agree: {} ({why}: the rows are the config's vocab_size)",
                    agreed.join(", ")
                ),
            )
            .with_evidence(evidence);
        }
    }
    if rows_read.is_empty() {
        // Nothing was counted: agreement of two config numbers is not agreement of the tables.
        let why = match &target.tensors {
            Err(why) => why.clone(),
            Ok(_) => "its weight headers hold no embed_tokens or lm_head table of a known form"
                .to_owned(),
        };
        return Check::undecided(
            VOCAB,
            format!(
                "cannot decide: no embedding rows of the target were counted ({why}); {}",
                agreed.join(", ")
            ),
        )
        .with_evidence(evidence);
    }
    Check::pass(
        VOCAB,
        format!("the vocabularies agree: {}", agreed.join(", ")),
    )
    .with_evidence(evidence)
}

enum Rows {
    Exact(u64),
    /// A q4_1 grid: rows rounded up to a multiple of 32.
    Padded(u64),
    Unknown,
}

/// How many rows an embedding or head table has, from its header entry (and, for a flat tile grid,
/// the target's hidden size, which is its K).
fn rows(info: &TensorInfo, hidden: Option<u64>) -> Rows {
    if let (super::gguf::TOKEN_EMBD, [rows, _]) = (info.name.as_str(), info.shape.as_slice()) {
        return Rows::Exact(*rows);
    }
    let col_blocks = hidden.map(|h| h.div_ceil(TILE_COLS)).filter(|&c| c > 0);
    match (info.dtype, info.shape.as_slice(), col_blocks) {
        (d, [rows, _], _) if is_float(d) => Rows::Exact(*rows),
        (Dtype::I8 | Dtype::U8, [row_blocks, _, last], _) if *last == TILE_BYTES => {
            Rows::Padded(row_blocks.saturating_mul(TILE_ROWS))
        }
        (Dtype::I8 | Dtype::U8, [tiles, last], Some(c))
            if *last == TILE_BYTES && tiles % c == 0 =>
        {
            Rows::Padded((tiles / c).saturating_mul(TILE_ROWS))
        }
        _ => Rows::Unknown,
    }
}
