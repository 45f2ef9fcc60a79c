//! `target.*`: the draft against the target package it drafts for. Only the target's config.json and
//! the header of its weight file are read: never its data section, so a 20 GB target costs
//! milliseconds.

use crate::checkpoint;
use crate::config::DraftConfig;
use crate::container::TensorInfo;
use crate::dtype::Dtype;
use crate::error::PackageError;
use crate::files::{self, FileError, CONFIG_FILE};
use crate::limits::MAX_CONFIG_BYTES;
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
    /// Every tensor entry of the target's weight file headers (one Q4NX file, or a safetensors
    /// checkpoint, single or sharded), or why the target has none to read.
    pub tensors: Result<Vec<TensorInfo>, String>,
    pub tokenizer: bool,
}

/// Reads the target's config and weight-file headers. A target that cannot be read (no config, a
/// config that is not JSON, a weight file that is not a regular file, cannot be read or does not
/// parse) is a usage error, exit 2: never a PASS over what was not read.
pub fn read(dir: &Path) -> Result<Target, PackageError> {
    crate::error::require_dir(dir)?;
    let config_path = dir.join(CONFIG_FILE);
    let bytes = match files::read_capped(&config_path, MAX_CONFIG_BYTES) {
        Ok(bytes) => bytes,
        Err(FileError::NotFound { .. }) => {
            return Err(PackageError::NoConfig {
                path: dir.to_owned(),
            })
        }
        Err(e) => return Err(e.into()),
    };
    let config = match crate::strict_json::parse(&bytes) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => {
            return Err(malformed(
                &config_path,
                "the target's config.json is not a JSON object".to_owned(),
            ))
        }
        Err(e) => {
            return Err(malformed(
                &config_path,
                format!("the target's config.json is not valid JSON: {e}"),
            ))
        }
    };
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
        tensors: read_headers(dir)?,
        tokenizer: dir.join("tokenizer.json").is_file(),
    })
}

fn malformed(path: &Path, why: String) -> PackageError {
    PackageError::Malformed {
        path: path.to_owned(),
        why,
    }
}

/// The target's weight headers, never its data: `model.q4nx` (or the single `*.q4nx`), else a
/// safetensors checkpoint (`model.safetensors`, or the shards its index names). `Ok(Err(..))` when the
/// target holds no weight file at all (nothing to count); a weight file that is there and cannot be
/// read or parsed is an error.
fn read_headers(dir: &Path) -> Result<Result<Vec<TensorInfo>, String>, PackageError> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|source| FileError::Unreadable {
            path: dir.to_owned(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".q4nx"))
        .collect();
    names.sort();
    let q4nx = if names.iter().any(|n| n == "model.q4nx") {
        Some("model.q4nx".to_owned())
    } else {
        match names.as_slice() {
            [one] => Some(one.clone()),
            [] => None,
            _ => {
                return Ok(Err(format!(
                "the target has {} *.q4nx files and no model.q4nx: the gate does not guess which",
                names.len()
            )))
            }
        }
    };
    if let Some(name) = q4nx {
        let table = checkpoint::read_table(&files::open(&dir.join(name))?)?;
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
    let headers = checkpoint::Headers::read(dir)?;
    Ok(Ok(headers.entries().cloned().collect()))
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
        (Err(p), _) => Check::blocked(HIDDEN, "config.geometry", format!("cannot decide: {}", p.needs())),
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
                format!("cannot decide: {}", p.needs()),
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
    if let Ok(tensors) = &target.tensors {
        for name in [
            "model.embed_tokens.weight",
            "embed_tokens.weight",
            "lm_head.weight",
            "model.lm_head.weight",
        ] {
            let Some(info) = tensors.iter().find(|e| e.name == name) else {
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
            if !matches!(rows(info, target.hidden_size), Rows::Unknown) {
                rows_read.push(name);
            }
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
    // The target's own vocab_size bounds the token; the draft's stands in only when the target states
    // none, and the message says whose it is.
    let vocab = match (target.vocab_size, draft.vocab_size.clone().ok().flatten()) {
        (Some(v), _) => Some((v, "the target's vocab_size")),
        (None, Some(v)) => Some((
            v,
            "the draft's vocab_size (the target's config.json states none)",
        )),
        (None, None) => None,
    };
    match (draft.mask_token_id.clone(), vocab) {
        (Err(p), _) => Check::blocked(MASK, "config.geometry", format!("cannot decide: {}", p.needs())),
        (Ok(None), _) => Check::undecided(
            MASK,
            "cannot decide: the draft's config states no mask_token_id",
        ),
        (_, None) => Check::undecided(
            MASK,
            "cannot decide: neither the target nor the draft states a vocab_size to bound mask_token_id",
        ),
        (Ok(Some(m)), Some((v, whose))) if m < v => {
            Check::pass(MASK, format!("mask_token_id {m} is below {whose} {v}"))
        }
        (Ok(Some(m)), Some((v, whose))) => {
            Check::fail(MASK, format!("mask_token_id {m} is not below {whose} {v}"))
        }
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
