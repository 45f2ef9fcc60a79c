//! `target.*`: the draft against the target package it drafts for. Only the target's config.json and
//! the header of its weight file are read: never its data section, so a 20 GB target costs
//! milliseconds.

use crate::config::DraftConfig;
use crate::container::{parse_header_only, Table, TensorInfo};
use crate::dtype::Dtype;
use crate::error::PackageError;
use crate::files::{self, FileError, CONFIG_FILE};
use crate::limits::{MAX_CONFIG_BYTES, MAX_HEADER_BYTES};
use crate::report::Check;
use crate::tile::TILE_BYTES;
use serde_json::{json, Value};
use std::path::Path;

pub const HIDDEN: &str = "target.hidden_size";
pub const DEPTH: &str = "target.depth";
pub const VOCAB: &str = "target.vocab";
pub const MASK: &str = "target.mask_token";
pub const TOKENIZER: &str = "target.tokenizer";

/// What the gate reads of a target package.
pub struct Target {
    pub hidden_size: Option<u64>,
    pub num_hidden_layers: Option<u64>,
    pub vocab_size: Option<u64>,
    /// The target's weight file header, or why there is none to read.
    pub table: Result<Table, String>,
    pub tokenizer: bool,
}

/// Reads the target's config and weight-file header. A target that cannot be read is a usage error.
pub fn read(dir: &Path) -> Result<Target, PackageError> {
    crate::error::require_dir(dir)?;
    let bytes = match files::read_capped(&dir.join(CONFIG_FILE), MAX_CONFIG_BYTES) {
        Ok(bytes) => bytes,
        Err(FileError::NotFound { .. }) => {
            return Err(PackageError::NoConfig {
                path: dir.to_owned(),
            })
        }
        Err(e) => return Err(e.into()),
    };
    let config: Value = crate::strict_json::parse(&bytes).unwrap_or(Value::Null);
    // Multimodal targets keep the language model's fields under text_config.
    let field = |name: &str| {
        config
            .get(name)
            .or_else(|| config.get("text_config").and_then(|t| t.get(name)))
            .and_then(Value::as_u64)
    };
    Ok(Target {
        hidden_size: field("hidden_size"),
        num_hidden_layers: field("num_hidden_layers"),
        vocab_size: field("vocab_size"),
        table: read_header(dir),
        tokenizer: dir.join("tokenizer.json").is_file(),
    })
}

/// The target's `model.q4nx` (or single `*.q4nx`) header: 8 bytes, then `n`, and nothing more.
fn read_header(dir: &Path) -> Result<Table, String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".q4nx"))
        .collect();
    names.sort();
    let name = if names.iter().any(|n| n == "model.q4nx") {
        "model.q4nx".to_owned()
    } else {
        match names.as_slice() {
            [one] => one.clone(),
            [] => return Err("the target has no *.q4nx weight file".to_owned()),
            _ => {
                return Err(format!(
                    "the target has {} *.q4nx files and no model.q4nx",
                    names.len()
                ))
            }
        }
    };
    let file = files::open(&dir.join(&name)).map_err(|e| e.to_string())?;
    let file_len = file.len();
    let mut prefix = [0u8; 8];
    if file_len < 8 {
        return Err(format!("{name}: shorter than 8 bytes"));
    }
    file.read_exact_at(0, &mut prefix)
        .map_err(|e| e.to_string())?;
    let n = u64::from_le_bytes(prefix);
    if n > MAX_HEADER_BYTES || 8 + n > file_len {
        return Err(format!("{name}: header length {n} is over the limit or past the end of the {file_len}-byte file"));
    }
    // n is checked against the cap and the file's size before it sizes this buffer.
    let mut header = vec![0u8; 8 + n as usize];
    header[..8].copy_from_slice(&prefix);
    file.read_exact_at(8, &mut header[8..])
        .map_err(|e| e.to_string())?;
    parse_header_only(&header, file_len).map_err(|e| format!("{name}: {e}"))
}

/// The `target.*` checks, in report order.
pub fn checks(draft: &DraftConfig, target: &Target) -> Vec<Check> {
    vec![
        hidden(draft, target),
        depth(draft, target),
        vocab(draft, target),
        mask(draft, target),
        tokenizer(target),
    ]
}

fn hidden(draft: &DraftConfig, target: &Target) -> Check {
    match (&draft.hidden_size, target.hidden_size) {
        (Err(p), _) => Check::blocked(HIDDEN, "config.geometry", format!("cannot decide: needs {p}")),
        (_, None) => Check::undecided(HIDDEN, "cannot decide: the target's config.json has no hidden_size"),
        (Ok(d), Some(t)) if *d == t => Check::pass(HIDDEN, format!("the draft's hidden size equals the target's ({d} vs {t}): fc fuses the target's hidden states")),
        (Ok(d), Some(t)) => Check::fail(HIDDEN, format!("the draft's hidden size differs from the target's ({d} vs {t}): fc cannot fuse the target's hidden states")),
    }
    .with_evidence(json!({ "draft": draft.hidden_size.clone().ok(), "target": target.hidden_size }))
}

fn depth(draft: &DraftConfig, target: &Target) -> Check {
    let taps = match &draft.target_layer_ids {
        Ok(t) => t,
        Err(p) => {
            return Check::blocked(
                DEPTH,
                "config.geometry",
                format!("cannot decide: needs {p}"),
            )
        }
    };
    let Some(layers) = target.num_hidden_layers else {
        return Check::undecided(
            DEPTH,
            "cannot decide: the target's config.json has no num_hidden_layers",
        );
    };
    let evidence = json!({ "taps": taps, "target_layers": layers, "draft_num_target_layers": draft.num_target_layers.clone().ok().flatten() });
    if let Some(bad) = taps.iter().find(|&&t| t >= layers) {
        return Check::fail(
            DEPTH,
            format!(
                "tap {bad} of target_layer_ids {taps:?} is not below the target's {layers} layers"
            ),
        )
        .with_evidence(evidence);
    }
    match draft.num_target_layers.clone() {
        Ok(Some(n)) if n != layers => Check::fail(
            DEPTH,
            format!("the draft's num_target_layers is {n}, the target has {layers} layers"),
        )
        .with_evidence(evidence),
        _ => Check::pass(
            DEPTH,
            format!("every tap in {taps:?} is below the target's {layers} layers"),
        )
        .with_evidence(evidence),
    }
}

fn vocab(draft: &DraftConfig, target: &Target) -> Check {
    let Some(vocab) = target.vocab_size else {
        return Check::undecided(
            VOCAB,
            "cannot decide: the target's config.json has no vocab_size",
        );
    };
    let mut problems = Vec::new();
    let mut agreed = vec![format!("target vocab_size {vocab}")];
    match draft.vocab_size.clone() {
        Ok(Some(d)) if d != vocab => problems.push(format!(
            "the draft's vocab_size is {d}, the target's {vocab}"
        )),
        Ok(Some(d)) => agreed.push(format!("draft vocab_size {d}")),
        Ok(None) => agreed.push("draft states no vocab_size".to_owned()),
        Err(p) => problems.push(format!("the draft's {p}")),
    }
    let mut rows_read = Vec::new();
    if let Err(why) = &target.table {
        agreed.push(format!("no embedding rows read ({why})"));
    }
    if let Ok(table) = &target.table {
        for name in [
            "model.embed_tokens.weight",
            "embed_tokens.weight",
            "lm_head.weight",
            "model.lm_head.weight",
        ] {
            let Some(info) = table.entries.iter().find(|e| e.name == name) else {
                continue;
            };
            match rows(info, target.hidden_size) {
                Rows::Exact(r) if r == vocab => agreed.push(format!("{name} has {r} rows")),
                Rows::Exact(r) => {
                    problems.push(format!("{name} has {r} rows, vocab_size is {vocab}"))
                }
                Rows::Padded(np) if vocab <= np && np - vocab < 32 => {
                    agreed.push(format!("{name} is a tile grid of {np} padded rows"))
                }
                Rows::Padded(np) => problems.push(format!(
                    "{name} is a tile grid of {np} padded rows, vocab_size is {vocab}"
                )),
                Rows::Unknown => {}
            }
            rows_read.push(name);
        }
    }
    let evidence = json!({ "target_vocab_size": vocab, "draft_vocab_size": draft.vocab_size.clone().ok().flatten(), "tables_read": rows_read, "problems": problems });
    if !problems.is_empty() {
        return Check::fail(
            VOCAB,
            format!("the vocabularies disagree: {}", problems.join("; ")),
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
    let col_blocks = hidden.map(|h| h.div_ceil(256)).filter(|&c| c > 0);
    match (info.dtype, info.shape.as_slice(), col_blocks) {
        (Dtype::Bf16 | Dtype::F16 | Dtype::F32, [rows, _], _) => Rows::Exact(*rows),
        (Dtype::I8 | Dtype::U8, [row_blocks, _, last], _) if *last == TILE_BYTES => {
            Rows::Padded(row_blocks.saturating_mul(32))
        }
        (Dtype::I8 | Dtype::U8, [tiles, last], Some(c))
            if *last == TILE_BYTES && tiles % c == 0 =>
        {
            Rows::Padded((tiles / c).saturating_mul(32))
        }
        _ => Rows::Unknown,
    }
}

fn mask(draft: &DraftConfig, target: &Target) -> Check {
    let vocab = target
        .vocab_size
        .or(draft.vocab_size.clone().ok().flatten());
    match (draft.mask_token_id.clone(), vocab) {
        (Err(p), _) => Check::blocked(MASK, "config.geometry", format!("cannot decide: needs {p}")),
        (Ok(None), _) => Check::undecided(
            MASK,
            "cannot decide: the draft's config states no mask_token_id",
        ),
        (_, None) => Check::undecided(MASK, "cannot decide: no vocab_size to bound mask_token_id"),
        (Ok(Some(m)), Some(v)) if m < v => Check::pass(
            MASK,
            format!("mask_token_id {m} is below the target's vocab_size {v}"),
        ),
        (Ok(Some(m)), Some(v)) => Check::fail(
            MASK,
            format!("mask_token_id {m} is not below the target's vocab_size {v}"),
        ),
    }
}

fn tokenizer(target: &Target) -> Check {
    if target.tokenizer {
        Check::pass(
            TOKENIZER,
            "the target carries tokenizer.json (drafts share the target's tokenizer)",
        )
    } else {
        Check::fail(
            TOKENIZER,
            "the target has no tokenizer.json: the draft has none of its own to fall back on",
        )
    }
}
