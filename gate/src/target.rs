//! `target.*` (`--target DIR`): the draft against the target package it drafts for. Only the target's config.json,
//! its tokenizer files (`crate::tokenizer`) and the header of its weight file are read: never its data
//! section, so a 20 GB target costs milliseconds.

use crate::checkpoint;
use crate::config::{DraftConfig, Field, FieldProblem, ProblemKind};
use crate::container::TensorInfo;
use crate::dtype::Dtype;
use crate::error::PackageError;
use crate::escape;
use crate::evaluation::Evaluation;
use crate::evidence::{
    Finding, TargetDepth, TargetHiddenSize, TargetMaskToken, TargetTokenizer, TargetVocab,
};
use crate::files::{self, FileError, WeightFile};
use crate::report::{Check, NotChecked};
use crate::tile::{TILE_BYTES, TILE_COLS, TILE_ROWS};
use serde_json::Value;
use std::ffi::OsString;
use std::io;
use std::path::Path;

pub const HIDDEN: &str = crate::check_id::CheckId::TARGET_HIDDEN_SIZE;
pub const DEPTH: &str = crate::check_id::CheckId::TARGET_DEPTH;
pub const VOCAB: &str = crate::check_id::CheckId::TARGET_VOCAB;
pub const MASK: &str = crate::check_id::CheckId::TARGET_MASK_TOKEN;
pub const TOKENIZER: &str = crate::check_id::CheckId::TARGET_TOKENIZER;
/// Every check `--target` adds, in report order.
pub const CHECKS: [&str; 5] = [HIDDEN, DEPTH, VOCAB, MASK, TOKENIZER];

/// What the gate reads of a target package.
///
/// The three counts keep what was wrong with them (`stated`), so a check that cannot use one says
/// whether it is absent, of the wrong type or out of range, instead of calling every one "missing".
pub struct Target {
    pub hidden_size: Field<u64>,
    pub num_hidden_layers: Field<u64>,
    pub vocab_size: Field<u64>,
    /// Every tensor entry of the target's weight file headers (one Q4NX file, or a safetensors
    /// checkpoint, single or sharded), or why the target has none to read.
    pub tensors: Result<Vec<TensorInfo>, String>,
    pub tokenizer: Tokenizer,
    /// What the target's tokenizer files say of its tokens (`crate::tokenizer`).
    pub tokens: crate::tokenizer::Tokens,
}

/// What is at the target's `tokenizer.json`. Told apart so that a tokenizer that is there but cannot
/// be one (a FIFO, a directory) is not reported as absent, and one that could not be examined is
/// UNDECIDED rather than a verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tokenizer {
    /// A regular file (symlinks followed), then read by `crate::tokenizer` into [`Target::tokens`].
    Present,
    /// Nothing there.
    Absent,
    /// A symbolic link that leads to no file: where it points.
    Dangling(String),
    /// Something other than a regular file: "a directory", "a FIFO", ...
    NotRegular(&'static str),
    /// `stat` failed for another reason (permissions, a loop of symlinks): the error, as text.
    Unexamined(String),
}

impl Tokenizer {
    /// What `target.tokenizer`'s evidence calls it.
    fn token(&self) -> &'static str {
        match self {
            Tokenizer::Present => "present",
            Tokenizer::Absent => "absent",
            Tokenizer::Dangling(_) => "dangling",
            Tokenizer::NotRegular(_) => "not_regular",
            Tokenizer::Unexamined(_) => "unexamined",
        }
    }
}

/// The file `target.tokenizer` looks for: drafts carry no tokenizer and use the target's.
pub const TOKENIZER_FILE: &str = "tokenizer.json";

/// Reads the target's config and weight-file headers. A target that cannot be read (no config, a
/// config that is not JSON, a weight file that is not a regular file, cannot be read or does not
/// parse) is a usage error, exit 2: never a PASS over what was not read.
///
/// A target follows the draft's link rule: a file whose name is a link that stays inside the target's
/// directory (in the hub cache, into its repository's blobs) is read; one that leads out of it is
/// refused unread, so no value from another file reaches a report as the target's.
pub fn read(dir: &Path) -> Result<Target, PackageError> {
    crate::error::require_dir(dir)?;
    let inside = files::Inside::package(dir)?;
    let (_, config, config_file) =
        crate::checkpoint::read_config_inside(dir, "target's", Some(&inside))?;
    let tokenizer = tokenizer_at(&dir.join(TOKENIZER_FILE));
    let target = Target {
        hidden_size: stated(&config, "hidden_size"),
        num_hidden_layers: stated(&config, "num_hidden_layers"),
        vocab_size: stated(&config, "vocab_size"),
        tensors: read_headers(dir, &inside)?,
        tokens: crate::tokenizer::read(dir, &inside, &config, tokenizer == Tokenizer::Present)?,
        tokenizer,
    };
    // The config and the weight headers were there together: a config renamed into place while the
    // headers were read is "changed while it was read", not a target that never existed.
    config_file.unchanged()?;
    Ok(target)
}

/// A count the target's config states (`hidden_size`, `num_hidden_layers`, `vocab_size`): at top level,
/// else under `text_config`, where multimodal targets keep the language model's fields.
///
/// A null counts as absent, at either place: Hugging Face writes an unset attribute as null, and a
/// multimodal wrapper may leave its top-level copy null while `text_config` holds the value, so a null
/// must not hide the nested one. Anything else found at top level is the answer, right or wrong.
///
/// Read by the draft config's rules (`config.rs`), so that one JSON value means the same on both
/// sides: a number that is not an integer, `256.0` included, or a value of another JSON type is of the
/// wrong type (the checks that need it are UNDECIDED, the value is not guessed at); an integer that is
/// zero or negative, or too long for 64 bits, is invalid (a FAIL: no draft fits such a target, as a
/// stated 0 never let one). There is no upper limit: these numbers are only compared, they never size
/// anything.
fn stated(config: &Value, name: &str) -> Field<u64> {
    let top = config.get(name).filter(|v| !v.is_null());
    let nested = || {
        config
            .get("text_config")
            .and_then(|t| t.get(name))
            .filter(|v| !v.is_null())
    };
    let (field, v) = match top {
        Some(v) => (name.to_owned(), v),
        None => match nested() {
            Some(v) => (format!("text_config.{name}"), v),
            None => return Err(FieldProblem::new(name, ProblemKind::Missing)),
        },
    };
    let problem = |why: String| Err(FieldProblem::new(&field, ProblemKind::Invalid(why)));
    // Saturated past 64 bits, so `i128::MAX` is an integer no u64 holds.
    match crate::config::integer(&field, v, shown)? {
        i if i <= 0 => problem(format!("is {v}, not positive")),
        i => match u64::try_from(i) {
            Ok(u) => Ok(u),
            Err(_) => problem(format!("is {v}, an integer too long for 64 bits")),
        },
    }
}

/// A JSON value of the wrong type as a message shows it: a short string or a scalar as written, an
/// array or object (or a long string) by kind only, so that a config cannot put a megabyte into a line.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) if s.chars().count() <= 32 => format!("{v}, a string"),
        Value::String(s) => format!("a string of {} characters", s.chars().count()),
        Value::Bool(_) => format!("{v}, a boolean"),
        Value::Null => "null".to_owned(),
        Value::Number(n) => n.to_string(),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// What is at `path`, by `stat` (symlinks followed), before it is opened: only a regular file is then
/// read (`crate::tokenizer::read`); a device or FIFO is never opened only to learn its kind.
fn tokenizer_at(path: &Path) -> Tokenizer {
    match std::fs::metadata(path) {
        Ok(meta) => match files::not_regular(meta.file_type()) {
            None => Tokenizer::Present,
            Some(what) => Tokenizer::NotRegular(what),
        },
        // A link that leads nowhere is there, and says where it points: not "no tokenizer.json".
        Err(e) if e.kind() == io::ErrorKind::NotFound => match std::fs::read_link(path) {
            Ok(to) => Tokenizer::Dangling(escape::name(to.as_os_str())),
            Err(_) => Tokenizer::Absent,
        },
        Err(e) => Tokenizer::Unexamined(e.to_string()),
    }
}

/// The target's weight headers, never its data: `model.q4nx` (or the single `*.q4nx`), else a
/// safetensors checkpoint (`model.safetensors`, or the shards its index names). `Ok(Err(..))` when the
/// target holds no weight file at all (nothing to count); a weight file that is there and cannot be
/// read or parsed is an error.
///
/// Names are kept as the file system spells them (`OsString`), so a name that is not UTF-8 still opens;
/// a lossy conversion would open a different name (`\u{fffd}` for each bad byte) and report it missing.
/// Where a name is printed, it is escaped ([`escape::name`]).
fn read_headers(
    dir: &Path,
    inside: &files::Inside,
) -> Result<Result<Vec<TensorInfo>, String>, PackageError> {
    let mut names: Vec<OsString> = std::fs::read_dir(dir)
        .map_err(|source| FileError::Unreadable {
            path: dir.to_owned(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    names.sort();
    let q4nx = match files::weight_file(&names) {
        WeightFile::One(name) => Some(name),
        WeightFile::None => None,
        WeightFile::Many(many) => {
            let listed: Vec<String> = many.iter().map(|n| escape::name(n)).collect();
            return Ok(Err(format!(
                    "the target has {} *.q4nx files ({}) and no model.q4nx: the gate does not guess which",
                    many.len(),
                    crate::checks::list(&listed, 4)
                )));
        }
    };
    if let Some(name) = q4nx {
        let file = inside.open(&dir.join(name))?;
        let table = checkpoint::read_table(&file)?;
        file.unchanged()?;
        return Ok(Ok(table.entries));
    }
    let safetensors = [checkpoint::SINGLE_FILE, checkpoint::INDEX_FILE]
        .iter()
        .any(|n| std::fs::symlink_metadata(dir.join(n)).is_ok());
    if !safetensors {
        return Ok(Err(format!(
            "the target has no weight file (no *.q4nx, {}, or {})",
            checkpoint::SINGLE_FILE,
            checkpoint::INDEX_FILE
        )));
    }
    let headers = checkpoint::Headers::read_inside(dir, inside)?;
    Ok(Ok(headers.entries().cloned().collect()))
}

/// What `--target` answers once the target was read (whether or not the draft was recognised: a
/// refused draft has nothing left to agree with).
pub const ANSWERS: [NotChecked; 1] = [NotChecked::TargetAgreement];

/// What these `target.*` checks answered: the agreement, unless one of them could not decide (its
/// line stays, so that what was not compared never reads as agreed).
pub fn answered(checks: &[Check]) -> &'static [NotChecked] {
    if checks
        .iter()
        .any(|c| c.outcome == crate::report::Outcome::Undecided)
    {
        &[]
    } else {
        &ANSWERS
    }
}

/// The `target.*` checks, in report order, for an evaluation whose draft config was recognised (for
/// a refused one, each blocked by `config.is_dflash`: there is no draft geometry to hold against the
/// target).
pub fn checks(evaluation: &Evaluation<'_>, target: &Target) -> Vec<Check> {
    match &evaluation.draft {
        Ok(draft) => of_draft(&draft.config, target),
        Err(_) => crate::evaluation::refused_step(&CHECKS, "--target"),
    }
}

fn of_draft(draft: &DraftConfig, target: &Target) -> Vec<Check> {
    vec![
        hidden(draft, target),
        depth(draft, target),
        vocab(draft, target),
        mask(draft, target),
        tokenizer(target),
    ]
}

/// The embedding and head tables whose rows `target.vocab` counts and whose width `target.hidden_size`
/// compares, under the names targets give them.
const TABLES: [&str; 4] = [
    "model.embed_tokens.weight",
    "embed_tokens.weight",
    "lm_head.weight",
    "model.lm_head.weight",
];

/// A target config count a check cannot use, as `config.geometry` treats the draft's own fields: absent
/// or of the wrong type is UNDECIDED (nothing is guessed at), present and typed but zero, negative or
/// too long for 64 bits is a FAIL (no draft fits it).
fn unusable(id: &str, p: &FieldProblem) -> Check {
    match &p.kind {
        ProblemKind::Missing => Check::undecided(
            id,
            format!(
                "cannot decide: the target's config.json has no {}, at top level or in text_config \
                 (null counts as none)",
                p.field
            ),
        ),
        ProblemKind::WrongType(_) => Check::undecided(
            id,
            format!("cannot decide: in the target's config.json, {p}"),
        ),
        ProblemKind::Invalid(_) => Check::fail(id, format!("in the target's config.json, {p}")),
    }
}

/// `target.hidden_size`: the draft's hidden size is the target's, and the target's embedding and head
/// tables are as wide as the hidden size its config states. fc fuses the target's hidden states, whose
/// width those tables fix; a config whose `hidden_size` disagrees with its own tables would let a
/// draft pass against a number the target does not have. Problems that do not depend on the draft (the
/// target's `hidden_size` zero or negative, a table of another width) FAIL even when the draft's own
/// hidden size could not be read.
fn hidden(draft: &DraftConfig, target: &Target) -> Check {
    let mut problems = Vec::new();
    let mut compared = Vec::new();
    if let Err(p) = &target.hidden_size {
        if p.is_invalid() {
            problems.push(format!("in the target's config.json, {p}"));
        }
    }
    if let (Ok(d), Ok(t)) = (&draft.hidden_size, &target.hidden_size) {
        if d != t {
            problems.push(format!("the draft's hidden size differs from the target's ({d} vs {t}): fc cannot fuse the target's hidden states"));
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
        Err(p) => return unusable(HIDDEN, p).with_evidence(evidence),
    };
    let mut message = format!("the draft's hidden size equals the target's ({d} vs {t}): fc fuses the target's hidden states");
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

fn depth(draft: &DraftConfig, target: &Target) -> Check {
    if let Err(p) = &target.num_hidden_layers {
        if p.is_invalid() {
            return unusable(DEPTH, p);
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
        Err(p) => return unusable(DEPTH, p),
    };
    let evidence = TargetDepth {
        taps: taps.clone(),
        target_layers: layers,
        draft_num_target_layers: draft.num_target_layers.clone().ok().flatten(),
    };
    if let Some(bad) = taps.iter().find(|&&t| t >= layers) {
        return Check::fail(
            DEPTH,
            format!(
                "tap {bad} of target_layer_ids {taps:?} is not below the target's {}",
                count_layers(layers)
            ),
        )
        .with_evidence(evidence);
    }
    match draft.num_target_layers.clone() {
        Ok(Some(n)) if n != layers => Check::fail(
            DEPTH,
            format!(
                "the draft's num_target_layers is {n}, the target has {}",
                count_layers(layers)
            ),
        )
        .with_evidence(evidence),
        _ => Check::pass(
            DEPTH,
            format!(
                "every tap in {taps:?} is below the target's {}",
                count_layers(layers)
            ),
        )
        .with_evidence(evidence),
    }
}

/// "1 layer", "36 layers".
fn count_layers(n: u64) -> String {
    match n {
        1 => "1 layer".to_owned(),
        n => format!("{n} layers"),
    }
}

fn vocab(draft: &DraftConfig, target: &Target) -> Check {
    let vocab = match &target.vocab_size {
        Ok(vocab) => *vocab,
        Err(p) => return unusable(VOCAB, p),
    };
    let mut problems = Vec::new();
    let mut found = Vec::new();
    let mut agreed = vec![format!("target vocab_size {vocab}")];
    match draft.vocab_size.clone() {
        Ok(Some(d)) if d != vocab => {
            problems.push(format!(
                "the draft's vocab_size is {d}, the target's {vocab}"
            ));
            found.push(Finding::new("vocab_size", "draft_vocab_size"));
        }
        Ok(Some(d)) => agreed.push(format!("draft vocab_size {d}")),
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

fn mask(draft: &DraftConfig, target: &Target) -> Check {
    let m = match draft.mask_token_id.clone() {
        Err(p) => {
            return Check::blocked(
                MASK,
                "config.geometry",
                format!("cannot decide: {}", p.needs()),
            )
        }
        Ok(None) => {
            return Check::undecided(
                MASK,
                "cannot decide: the draft's config states no mask_token_id",
            )
        }
        Ok(Some(m)) => m,
    };
    // The target's own vocab_size bounds the token; the draft's stands in only when the target's
    // cannot be read (absent, or of the wrong type), and the message says whose it is and why. A
    // target's vocab_size that is there but zero or negative is a bound no token is below.
    let (v, whose) = match (&target.vocab_size, draft.vocab_size.clone().ok().flatten()) {
        (Ok(v), _) => (*v, "the target's vocab_size".to_owned()),
        (Err(p), _) if p.is_invalid() => {
            return Check::fail(
                MASK,
                format!("mask_token_id {m} cannot be below the target's vocabulary: in the target's config.json, {p}"),
            )
        }
        (Err(p), Some(v)) if p.kind == ProblemKind::Missing => (
            v,
            "the draft's vocab_size (the target's config.json states none)".to_owned(),
        ),
        (Err(p), Some(v)) => (
            v,
            format!("the draft's vocab_size (in the target's config.json, {p})"),
        ),
        (Err(p), None) if p.kind == ProblemKind::Missing => {
            return Check::undecided(
                MASK,
                "cannot decide: neither the target nor the draft states a vocab_size to bound mask_token_id",
            )
        }
        (Err(p), None) => {
            return Check::undecided(
                MASK,
                format!("cannot decide: in the target's config.json, {p}, and the draft states no vocab_size to bound mask_token_id instead"),
            )
        }
    };
    let evidence = TargetMaskToken {
        mask_token_id: m,
        vocab_size: v,
        vocab_size_from: if target.vocab_size.is_ok() {
            "target"
        } else {
            "draft"
        },
    };
    if m < v {
        crate::tokenizer::mask_check(MASK, m, &format!("{whose} {v}"), &target.tokens)
            .with_evidence(evidence)
    } else {
        Check::fail(MASK, format!("mask_token_id {m} is not below {whose} {v}"))
            .with_evidence(evidence)
    }
}

fn tokenizer(target: &Target) -> Check {
    let evidence = TargetTokenizer {
        tokenizer: target.tokenizer.token(),
    };
    let check = match &target.tokenizer {
        Tokenizer::Present => crate::tokenizer::tokenizer_check(
            TOKENIZER,
            &target.tokens,
            target
                .vocab_size
                .clone()
                .map_err(|p| format!("in the target's config.json, {p}")),
        ),
        Tokenizer::Absent => Check::fail(
            TOKENIZER,
            "the target has no tokenizer.json: the draft has none of its own to fall back on",
        ),
        Tokenizer::Dangling(to) => Check::fail(
            TOKENIZER,
            format!("the target's tokenizer.json is a symbolic link to {to}, which leads to no file: the draft has none of its own to fall back on"),
        ),
        Tokenizer::NotRegular(what) => Check::fail(
            TOKENIZER,
            format!("the target's tokenizer.json is {what}, not a regular file: no tokenizer can be read from it, and the draft has none of its own to fall back on"),
        ),
        Tokenizer::Unexamined(why) => Check::undecided(
            TOKENIZER,
            format!("cannot decide: the target's tokenizer.json could not be examined: {why}"),
        ),
    };
    check.with_evidence(evidence)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Outcome;

    const DRAFT: &str = r#"{"model_type":"dflash","hidden_size":256,"num_hidden_layers":1,
        "num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":512,"block_size":4,
        "target_layer_ids":[1,3],"vocab_size":1000,"mask_token_id":7}"#;

    fn draft() -> DraftConfig {
        DraftConfig::from_json(DRAFT.as_bytes()).expect("draft config")
    }

    /// A safetensors container holding one table per `(name, dtype, shape)`, zero-filled.
    fn container(tables: &[(&str, &str, &[u64])]) -> Vec<u8> {
        let mut offset = 0u64;
        let mut entries = Vec::new();
        for (name, dtype, shape) in tables {
            let size = Dtype::from_name(dtype).expect("dtype").size();
            let len = shape.iter().product::<u64>() * size;
            entries.push(format!(
                "\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":{shape:?},\"data_offsets\":[{offset},{}]}}",
                offset + len
            ));
            offset += len;
        }
        let mut header = format!("{{{}}}", entries.join(",")).into_bytes();
        while header.len() % 8 != 0 {
            header.push(b' ');
        }
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&header);
        out.resize(out.len() + offset as usize, 0);
        out
    }

    /// A target's config.json that links to a file outside the target is refused unread (it once
    /// was read, and its values printed as the target's); one linking inside the target is read.
    #[test]
    fn a_target_link_out_of_its_directory_is_refused_unread() {
        let outside = tempfile::tempdir().expect("tempdir");
        let elsewhere = outside.path().join("elsewhere.json");
        std::fs::write(
            &elsewhere,
            r#"{"hidden_size":256,"num_hidden_layers":7777}"#,
        )
        .unwrap();
        let dir = target_dir("{}");
        let config = dir.path().join(crate::files::CONFIG_FILE);
        std::fs::remove_file(&config).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &config).unwrap();
        let e = read(dir.path()).err().expect("refused");
        assert!(e.to_string().contains("leads out of"), "{e}");
        std::fs::write(dir.path().join("real.json"), r#"{"hidden_size":256}"#).unwrap();
        std::fs::remove_file(&config).unwrap();
        std::os::unix::fs::symlink("real.json", &config).unwrap();
        assert!(read(dir.path()).is_ok());
    }

    /// A target directory with `config` and a tokenizer, and no weight file.
    fn target_dir(config: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(crate::files::CONFIG_FILE), config).expect("config");
        std::fs::write(
            dir.path().join(TOKENIZER_FILE),
            br#"{"added_tokens": [], "model": {"vocab": {"a": 0}}}"#,
        )
        .expect("tokenizer");
        dir
    }

    fn run(config: &str) -> Vec<Check> {
        let dir = target_dir(config);
        of_draft(&draft(), &read(dir.path()).expect("target"))
    }

    fn check<'a>(checks: &'a [Check], id: &str) -> &'a Check {
        checks.iter().find(|c| c.id == id).expect("check ran")
    }

    fn expect(checks: &[Check], id: &str, outcome: Outcome, says: &str) {
        let c = check(checks, id);
        assert!(
            c.outcome == outcome && c.message.contains(says),
            "{id}: expected {outcome} saying {says:?}, got {}: {}",
            c.outcome,
            c.message
        );
    }

    /// A target whose tensors are `tables` and whose config states hidden size 256.
    fn with_tables(tables: Vec<TensorInfo>) -> Target {
        Target {
            hidden_size: Ok(256),
            num_hidden_layers: Ok(8),
            vocab_size: Ok(1000),
            tensors: Ok(tables),
            tokenizer: Tokenizer::Present,
            tokens: Default::default(),
        }
    }

    fn table(name: &str, dtype: Dtype, shape: &[u64]) -> TensorInfo {
        TensorInfo {
            name: name.to_owned(),
            dtype,
            shape: shape.to_vec(),
            begin: 0,
            end: 0,
        }
    }

    #[test]
    fn a_mistyped_or_out_of_range_target_count_is_named_not_called_missing() {
        // Of the wrong type: UNDECIDED, with the value; 256.0 is no integer, as for the draft's config.
        let c = run(r#"{"hidden_size":"256","num_hidden_layers":8,"vocab_size":1000}"#);
        expect(
            &c,
            HIDDEN,
            Outcome::Undecided,
            r#"in the target's config.json, hidden_size is "256", a string, not an integer"#,
        );
        let c = run(r#"{"hidden_size":256.0,"num_hidden_layers":8,"vocab_size":1000}"#);
        expect(
            &c,
            HIDDEN,
            Outcome::Undecided,
            "hidden_size is 256.0, a number that is not an integer",
        );
        let c = run(r#"{"hidden_size":256,"num_hidden_layers":[8],"vocab_size":1000}"#);
        expect(
            &c,
            DEPTH,
            Outcome::Undecided,
            "num_hidden_layers is an array, not an integer",
        );
        // Present, typed, and not positive: a FAIL naming the field, as config.geometry does.
        let c = run(r#"{"hidden_size":256,"num_hidden_layers":-1,"vocab_size":1000}"#);
        expect(
            &c,
            DEPTH,
            Outcome::Fail,
            "in the target's config.json, num_hidden_layers is -1, not positive",
        );
        let c = run(r#"{"hidden_size":0,"num_hidden_layers":8,"vocab_size":-5}"#);
        expect(&c, HIDDEN, Outcome::Fail, "hidden_size is 0, not positive");
        expect(&c, VOCAB, Outcome::Fail, "vocab_size is -5, not positive");
        let c =
            run(r#"{"hidden_size":256,"num_hidden_layers":8,"vocab_size":18446744073709551616}"#);
        expect(
            &c,
            VOCAB,
            Outcome::Fail,
            "vocab_size is 1.8446744073709552e+19, an integer too long for 64 bits",
        );
        let c = run(r#"{"hidden_size":0,"num_hidden_layers":8,"vocab_size":-5}"#);
        // The draft's vocab_size does not stand in for a target's that is there and negative.
        expect(
            &c,
            MASK,
            Outcome::Fail,
            "in the target's config.json, vocab_size is -5, not positive",
        );
        // A wrong-typed one is not "states none" either.
        let c = run(r#"{"hidden_size":256,"num_hidden_layers":8,"vocab_size":"x"}"#);
        expect(
            &c,
            MASK,
            Outcome::Pass,
            r#"the draft's vocab_size (in the target's config.json, vocab_size is "x", a string, not an integer) 1000"#,
        );
        // Absent is still absent.
        let c = run(r#"{"num_hidden_layers":8,"vocab_size":1000}"#);
        expect(
            &c,
            HIDDEN,
            Outcome::Undecided,
            "the target's config.json has no hidden_size",
        );
    }

    #[test]
    fn a_null_does_not_hide_the_text_config_value() {
        let c = run(r#"{"hidden_size":null,"vocab_size":null,
                "text_config":{"hidden_size":256,"num_hidden_layers":8,"vocab_size":1000}}"#);
        expect(&c, HIDDEN, Outcome::Pass, "(256 vs 256)");
        expect(&c, DEPTH, Outcome::Pass, "below the target's 8 layers");
        expect(
            &c,
            MASK,
            Outcome::Pass,
            "below the target's vocab_size 1000",
        );
        // A nested value of the wrong type is named where it is.
        let c = run(r#"{"hidden_size":null,"text_config":{"hidden_size":"256"}}"#);
        expect(
            &c,
            HIDDEN,
            Outcome::Undecided,
            r#"text_config.hidden_size is "256", a string, not an integer"#,
        );
        // Null at both places is none.
        let c = run(r#"{"hidden_size":null,"text_config":{"hidden_size":null}}"#);
        expect(
            &c,
            HIDDEN,
            Outcome::Undecided,
            "has no hidden_size, at top level or in text_config (null counts as none)",
        );
    }

    #[test]
    fn a_tokenizer_that_is_not_a_regular_file_is_said_to_be_there() {
        let config = r#"{"hidden_size":256,"num_hidden_layers":8,"vocab_size":1000}"#;
        let dir = target_dir(config);
        let path = dir.path().join(TOKENIZER_FILE);
        std::fs::remove_file(&path).expect("rm");
        let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let refused = |says: &str| {
            let c = of_draft(&draft(), &read(dir.path()).expect("target"));
            expect(&c, TOKENIZER, Outcome::Fail, says);
        };
        refused("the target's tokenizer.json is a FIFO, not a regular file");
        std::fs::remove_file(&path).expect("rm");
        std::fs::create_dir(&path).expect("dir");
        refused("the target's tokenizer.json is a directory, not a regular file");
        std::fs::remove_dir(&path).expect("rmdir");
        refused("the target has no tokenizer.json");
        std::os::unix::fs::symlink("gone.json", &path).expect("symlink");
        refused(
            "the target's tokenizer.json is a symbolic link to gone.json, which leads to no file",
        );
    }

    // Linux only: macOS's file systems refuse a name that is not UTF-8 before the gate could see one.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_weight_file_whose_name_is_not_utf8_is_opened_by_its_real_name() {
        use std::os::unix::ffi::OsStrExt;
        let config = r#"{"hidden_size":256,"num_hidden_layers":8,"vocab_size":1000}"#;
        let dir = target_dir(config);
        let name = std::ffi::OsStr::from_bytes(b"\xffx.q4nx");
        let bytes = container(&[("model.embed_tokens.weight", "BF16", &[1000, 256])]);
        std::fs::write(dir.path().join(name), &bytes).expect("weights");
        let target = read(dir.path()).expect("the file is opened by its real name");
        let c = of_draft(&draft(), &target);
        expect(
            &c,
            VOCAB,
            Outcome::Pass,
            "model.embed_tokens.weight has 1000 rows",
        );
        // Two of them: the refusal lists both, the one that is not UTF-8 escaped.
        std::fs::write(dir.path().join("other.q4nx"), &bytes).expect("weights");
        let c = of_draft(&draft(), &read(dir.path()).expect("target"));
        expect(
            &c,
            VOCAB,
            Outcome::Undecided,
            "2 *.q4nx files (other.q4nx, \\xffx.q4nx) and no model.q4nx",
        );
    }

    #[test]
    fn a_table_wider_or_narrower_than_the_hidden_size_fails_it() {
        let d = draft();
        let wide = with_tables(vec![table(
            "model.embed_tokens.weight",
            Dtype::Bf16,
            &[1000, 1 << 26],
        )]);
        expect(
            &of_draft(&d, &wide),
            HIDDEN,
            Outcome::Fail,
            "model.embed_tokens.weight is BF16 [1000, 67108864]: 67108864 wide, the target's hidden_size is 256",
        );
        let narrow = with_tables(vec![table("lm_head.weight", Dtype::F8E4M3, &[1000, 128])]);
        expect(
            &of_draft(&d, &narrow),
            HIDDEN,
            Outcome::Fail,
            "lm_head.weight is F8_E4M3 [1000, 128]: 128 wide, the target's hidden_size is 256",
        );
        // A [N/32, Kp/256, 5120] grid states its column blocks: 3 are not the 1 that 256 needs.
        let grid = with_tables(vec![table(
            "lm_head.weight",
            Dtype::I8,
            &[32, 3, TILE_BYTES],
        )]);
        expect(
            &of_draft(&d, &grid),
            HIDDEN,
            Outcome::Fail,
            "lm_head.weight is I8 [32, 3, 5120]: a tile grid 3 column blocks wide, the target's hidden_size 256 needs 1",
        );
        // Objected to even when the draft's own hidden size cannot be read.
        let blind =
            DraftConfig::from_json(br#"{"model_type":"dflash","hidden_size":"256"}"#).unwrap();
        expect(
            &of_draft(&blind, &wide),
            HIDDEN,
            Outcome::Fail,
            "67108864 wide",
        );
        // Tables of the right width pass, and the message says they were compared; a flat grid
        // states no width, so it is not claimed.
        let right = with_tables(vec![
            table("model.embed_tokens.weight", Dtype::Bf16, &[1000, 256]),
            table("lm_head.weight", Dtype::I8, &[32, 1, TILE_BYTES]),
            table("embed_tokens.weight", Dtype::I8, &[32, TILE_BYTES]),
        ]);
        expect(
            &of_draft(&d, &right),
            HIDDEN,
            Outcome::Pass,
            "the draft's hidden size equals the target's (256 vs 256): fc fuses the target's hidden states; \
             the target's model.embed_tokens.weight and lm_head.weight are as wide",
        );
    }
}
