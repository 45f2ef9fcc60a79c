//! `mask_embedding.pt` beside a Hugging Face draft (spec section 18.2, MiMo): vLLM and SGLang load
//! it with `torch.load` and raise when its `mask_token_id` differs from the config's. The gate reads
//! it without executing it (`torch_archive.rs`) and reports under `scalars.mask_token_id`, the
//! check that holds a stored mask id to config.json's: its id equals the config's, its embedding is
//! `[hidden_size]`, and every value is finite. The check is listed only when the file is there.

use crate::config::DraftConfig;
use crate::evidence::ScalarInts;
use crate::files::Inside;
use crate::limits::MAX_TORCH_ARCHIVE_BYTES;
use crate::report::Check;
use crate::torch_archive::{read_mask_embedding, MASK_EMBEDDING_FILE};
use std::path::Path;

const ID: &str = crate::check_id::CheckId::SCALARS_MASK_TOKEN_ID;

/// The check, when `names` (the folder's files) hold `mask_embedding.pt`.
pub fn check(dir: &Path, inside: &Inside, names: &[&str], config: &DraftConfig) -> Option<Check> {
    if !names.contains(&MASK_EMBEDDING_FILE) {
        return None;
    }
    let bytes = inside
        .open(&dir.join(MASK_EMBEDDING_FILE))
        .and_then(|f| f.read_all(MAX_TORCH_ARCHIVE_BYTES));
    Some(match bytes {
        Ok(bytes) => judge(&bytes, config),
        Err(e) => Check::fail(
            ID,
            format!("{MASK_EMBEDDING_FILE} does not read: {}", e.reason()),
        ),
    })
}

/// The check of `mask_embedding.pt`'s bytes against the config.
pub fn judge(bytes: &[u8], config: &DraftConfig) -> Check {
    let read = match read_mask_embedding(bytes) {
        Ok(m) => m,
        Err(why) => {
            return Check::fail(
                ID,
                format!("{MASK_EMBEDDING_FILE} is refused unread by the loaders' rules: {why}"),
            )
        }
    };
    let stated = match &config.mask_token_id {
        Ok(Some(id)) => *id,
        _ => {
            return Check::undecided(
                ID,
                format!(
                    "cannot decide: {MASK_EMBEDDING_FILE} holds mask_token_id {} and config.json states none to compare",
                    read.mask_token_id
                ),
            )
        }
    };
    let evidence = ScalarInts {
        container: vec![read.mask_token_id],
        config: Some(vec![stated]),
    };
    if i64::try_from(stated) != Ok(read.mask_token_id) {
        return Check::fail(
            ID,
            format!(
                "{MASK_EMBEDDING_FILE} holds mask_token_id {} where config.json states {stated}: vLLM and SGLang raise on loading it",
                read.mask_token_id
            ),
        )
        .with_evidence(evidence);
    }
    if let Ok(hidden) = config.hidden_size {
        if read.shape != [hidden] {
            return Check::fail(
                ID,
                format!(
                    "{MASK_EMBEDDING_FILE}'s embedding is {} {:?}, not [hidden_size] = [{hidden}]",
                    read.dtype.name(),
                    read.shape
                ),
            )
            .with_evidence(evidence);
        }
    }
    if let Some(i) = read.values.iter().position(|v| !v.is_finite()) {
        return Check::fail(
            ID,
            format!(
                "{MASK_EMBEDDING_FILE}'s embedding is not finite: element {i} is {}",
                read.values[i]
            ),
        )
        .with_evidence(evidence);
    }
    Check::pass(
        ID,
        format!(
            "{MASK_EMBEDDING_FILE} holds mask_token_id {stated}, as config.json states, and a finite {} {:?} embedding (read without executing its pickle)",
            read.dtype.name(),
            read.shape
        ),
    )
    .with_evidence(evidence)
}
