//! `--all DIR`: which directories under DIR are packages to gate, which are skipped, and which cannot
//! be gated at all.
//!
//! Fail-closed like the gate itself: a directory that looks like a package (it holds a `config.json`
//! entry of any kind, or a `*.q4nx` entry) is gated, and one whose config.json is a link to nothing, a
//! FIFO or a directory then ends as "not gated" (exit 2), never dropped from the count, as does an
//! entry that cannot be followed (a link to nothing: it may have been a package). Only three kinds
//! are passed over, each listed as skipped: a directory `--source` or `--target` names (the checkpoint
//! or target beside the packages); a safetensors checkpoint (`config.json` plus `model.safetensors`
//! or its index, and no `*.q4nx`), which is what a package is converted from, not a package; and a
//! directory whose config.json declares another model (a target beside its draft), named by its
//! `architectures` or `model_type` and carrying none of a draft's own fields, so that a draft whose
//! architecture is misspelt is still gated and refused. A GGUF draft is a file: a directory holding a
//! `*.gguf`, and a `*.gguf` directly under DIR, are gated, unless the file's `general.architecture` is
//! another model's (neither `dflash` nor a fork's dialect: a target beside its draft), which is
//! skipped, named by it. A directory with neither a config.json nor a weight file is not a package and
//! is not counted.

use dflash_gate::__private::checkpoint::{INDEX_FILE, SINGLE_FILE};
use dflash_gate::__private::files::WEIGHT_EXTENSION;
use dflash_gate::__private::files::{FileError, CONFIG_FILE};
use dflash_gate::PackageError;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// One directory of the run, named on the command line or found under `--all`.
pub enum Item {
    Gate(PathBuf),
    /// Not a package of this run: shown, but it changes nothing in the exit status. `reason` is the
    /// JSON document's token (`option_directory`, `checkpoint`, `another_model`).
    Skip {
        dir: PathBuf,
        why: String,
        reason: &'static str,
    },
    /// Looks like a package, but could not even be looked at: exit 2.
    NotGated {
        dir: PathBuf,
        error: PackageError,
    },
}

impl Item {
    pub fn dir(&self) -> &Path {
        match self {
            Item::Gate(dir) | Item::Skip { dir, .. } | Item::NotGated { dir, .. } => dir,
        }
    }
}

/// Every directory directly under `models` that looks like a package, sorted, with why each one not
/// gated is passed over. `beside` are the directories `--source` and `--target` name.
pub fn packages_under(models: &Path, beside: &[(&str, &Path)]) -> Result<Vec<Item>, String> {
    dflash_gate::__private::error::require_dir(models).map_err(|e| format!("--all {e}"))?;
    let listing = |e: std::io::Error| {
        format!(
            "--all {}: cannot list it: {e}",
            dflash_gate::__private::escape::name(models.as_os_str())
        )
    };
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    let mut unknown = Vec::new();
    for entry in std::fs::read_dir(models).map_err(listing)? {
        let path = entry.map_err(listing)?.path();
        // Following links: a package may be linked into the folder. Files beside the packages (a
        // README) are not packages; an entry that cannot be followed (a link to nothing, a loop)
        // may have been one, so it is not gated rather than passed over.
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => dirs.push(path),
            // A GGUF draft is a file: one beside the directories is gated as they are.
            Ok(_) if is_gguf(path.as_os_str()) => files.push(path),
            Ok(_) => {}
            Err(source) => unknown.push(Item::NotGated {
                error: PackageError::FileNoted {
                    error: FileError::Unreadable {
                        path: path.clone(),
                        source,
                    },
                    note: "it cannot be followed, so whether it is a package is unknown".to_owned(),
                },
                dir: path,
            }),
        }
    }
    dirs.sort();
    let mut items: Vec<Item> = dirs
        .into_iter()
        .filter_map(|dir| classify(dir, beside))
        .chain(files.into_iter().map(|file| gguf_item(file, beside)))
        .chain(unknown)
        .collect();
    items.sort_by(|a, b| a.dir().cmp(b.dir()));
    if !items.iter().any(|i| !matches!(i, Item::Skip { .. })) {
        // Nothing to gate is no verdict: never an empty, passing run.
        let skipped = items.len();
        let mut also = if skipped == 0 {
            String::new()
        } else {
            format!(" ({skipped} skipped: not packages of this run)")
        };
        if models.join(CONFIG_FILE).symlink_metadata().is_ok() {
            also.push_str("; it is a package itself: name it without --all");
        }
        return Err(format!(
            "--all {}: no package directory (with a config.json, a *.q4nx or a *.gguf) and no *.gguf file under it{also}; --all looks one level deep, at the entries directly under it",
            dflash_gate::__private::escape::name(models.as_os_str())
        ));
    }
    Ok(items)
}

/// What to do with one directory under `--all`; `None` when it is not a package at all.
fn classify(dir: PathBuf, beside: &[(&str, &Path)]) -> Option<Item> {
    if let Some((option, _)) = beside.iter().find(|(_, named)| same_dir(&dir, named)) {
        let why = format!("the {option} directory, not a package");
        let reason = "option_directory";
        return Some(Item::Skip { dir, why, reason });
    }
    // Any kind of entry: a link to nothing, a FIFO, a directory named config.json still say that a
    // package was meant here.
    let config = dir.join(CONFIG_FILE).symlink_metadata().is_ok();
    let names = match entry_names(&dir) {
        Ok(names) => names,
        Err(_) if config => return Some(Item::Gate(dir)),
        Err(source) => {
            let path = dir.clone();
            let error = PackageError::File(FileError::Unreadable { path, source });
            return Some(Item::NotGated { dir, error });
        }
    };
    let weights = names
        .iter()
        .any(|n| dflash_gate::__private::files::is_weight_file(n));
    let checkpoint = names.iter().any(|n| n == SINGLE_FILE || n == INDEX_FILE);
    let ggufs: Vec<&OsString> = names.iter().filter(|n| is_gguf(n)).collect();
    let gguf = !ggufs.is_empty();
    match (config, weights) {
        // A hub cache repository: gated as the snapshot its `refs/main` names.
        (false, false) if dflash_gate::__private::hub::is_repository(&dir) => Some(Item::Gate(dir)),
        // A GGUF draft carries its config in its metadata: a directory holding one is a draft,
        // unless its one GGUF says it is another model (a target beside its draft).
        (false, false) if gguf => match ggufs.as_slice() {
            [one] => match another_gguf(&dir.join(one)) {
                Some(why) => Some(Item::Skip { reason: "another_model", dir, why }),
                None => Some(Item::Gate(dir)),
            },
            _ => Some(Item::Gate(dir)),
        },
        (false, false) => None,
        // A Hugging Face folder is a draft when its config says so (the gate then says what is wrong
        // with it); another model's folder (a target's checkpoint) is passed over, saying what it is.
        (true, false) if checkpoint => match another_model(&dir) {
            Some(why) => Some(Item::Skip {
                dir,
                reason: "another_model",
                why,
            }),
            // `--source` holds converted drafts against their folders: a folder is not one of them.
            None if is_draft_config(&dir) && beside.iter().any(|(o, _)| *o == "--source") => {
                Some(Item::Skip {
                    dir,
                    reason: "checkpoint",
                    why: "a Hugging Face safetensors draft: --source compares converted drafts with their folders, so it is not gated with --source (gate it without)".to_owned(),
                })
            }
            None if is_draft_config(&dir) => Some(Item::Gate(dir)),
            None => Some(Item::Skip {
                dir,
                reason: "checkpoint",
                why: format!(
                    "a checkpoint whose {CONFIG_FILE} declares no DFlash draft ({SINGLE_FILE} or its index, no *.{WEIGHT_EXTENSION})"
                ),
            }),
        },
        (true, _) => match another_model(&dir) {
            Some(why) => Some(Item::Skip { dir, why, reason: "another_model" }),
            None => Some(Item::Gate(dir)),
        },
        (false, true) => Some(Item::Gate(dir)),
    }
}

fn is_gguf(name: &std::ffi::OsStr) -> bool {
    dflash_gate::__private::gguf::is_gguf_name(name)
}

/// A `*.gguf` file directly under `--all`: gated as a draft, unless an option names it or it says
/// it is another model.
fn gguf_item(file: PathBuf, beside: &[(&str, &Path)]) -> Item {
    if let Some((option, _)) = beside.iter().find(|(_, named)| same_dir(&file, named)) {
        let why = format!("the {option} file, not a draft");
        return Item::Skip {
            dir: file,
            why,
            reason: "option_directory",
        };
    }
    match another_gguf(&file) {
        Some(why) => Item::Skip {
            dir: file,
            why,
            reason: "another_model",
        },
        None => Item::Gate(file),
    }
}

/// Why the GGUF at `path` is another model's: its `general.architecture` is neither a DFlash draft's
/// nor a fork dialect's. `None` when it may be a draft, or cannot be read: the gate then says what
/// is wrong with it.
fn another_gguf(path: &Path) -> Option<String> {
    use dflash_gate::__private::draft::gguf::{ARCHITECTURE, FORK_DIALECTS};
    let gguf = dflash_gate::__private::gguf::Gguf::open(path).ok()?;
    let architecture = gguf.header.architecture()?;
    if architecture == ARCHITECTURE || FORK_DIALECTS.contains(&architecture) {
        return None;
    }
    // The name is the file's: a value written to flood the listing is cut short.
    let shown: String = architecture.chars().take(64).collect();
    Some(format!(
        "another model (a GGUF whose general.architecture is \"{}\"), not a DFlash draft",
        dflash_gate::__private::escape::escape(&shown)
    ))
}

/// Whether `dir`'s config.json reads as a draft's (recognised, or holding a field only drafts have).
fn is_draft_config(dir: &Path) -> bool {
    use dflash_gate::__private::config::DraftConfig;
    use dflash_gate::__private::limits::MAX_CONFIG_BYTES;
    let Ok(bytes) =
        dflash_gate::__private::files::read_capped(&dir.join(CONFIG_FILE), MAX_CONFIG_BYTES)
    else {
        return false;
    };
    if DraftConfig::from_json(&bytes).is_ok() {
        return true;
    }
    matches!(
        dflash_gate::__private::strict_json::parse(&bytes),
        Ok(serde_json::Value::Object(top)) if DRAFT_FIELDS.iter().any(|f| top.contains_key(*f))
            || top.contains_key("speculators_model_type")
    )
}

/// The fields only a draft's config.json has: one of them in a config that names another
/// architecture is a draft mislabelled, to be gated and refused, not passed over.
const DRAFT_FIELDS: [&str; 5] = [
    "dflash_config",
    "block_size",
    "mask_token_id",
    "num_target_layers",
    "target_layer_ids",
];

/// Why `dir` is another model's directory (its config.json names an architecture or model type and
/// is not a draft's), or `None` when it may be a draft: anything the gate cannot read or recognise
/// is gated, and the gate says what is wrong with it.
fn another_model(dir: &Path) -> Option<String> {
    use dflash_gate::__private::config::{self, DraftConfig};
    use dflash_gate::__private::limits::MAX_CONFIG_BYTES;
    use serde_json::Value;
    let bytes =
        dflash_gate::__private::files::read_capped(&dir.join(CONFIG_FILE), MAX_CONFIG_BYTES)
            .ok()?;
    if DraftConfig::from_json(&bytes).is_ok() {
        return None;
    }
    let Ok(Value::Object(top)) = dflash_gate::__private::strict_json::parse(&bytes) else {
        return None;
    };
    if DRAFT_FIELDS.iter().any(|f| top.contains_key(*f)) {
        return None;
    }
    let architectures: Vec<&str> = match top.get("architectures") {
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let model_type = top.get("model_type").and_then(Value::as_str);
    // A config that says it is a draft and names another class beside (which the reader refuses)
    // is a draft mislabelled: gated and refused, not passed over.
    let draft_classes = [
        config::DRAFT_ARCHITECTURE,
        config::SECOND_FAMILY_ARCHITECTURE,
        config::ASSISTANT_HEAD_ARCHITECTURE,
    ];
    if model_type == Some("dflash") || architectures.iter().any(|a| draft_classes.contains(a)) {
        return None;
    }
    let declared = match (architectures.as_slice(), model_type) {
        ([], None) => return None,
        ([], Some(t)) => format!("model_type {t:?}"),
        (a, None) => format!("architectures {a:?}"),
        (a, Some(t)) => format!("architectures {a:?}, model_type {t:?}"),
    };
    // The names are the file's: a config written to flood the listing is cut short.
    const SHOWN: usize = 160;
    let declared = match declared.char_indices().nth(SHOWN) {
        Some((at, _)) => format!("{}...", &declared[..at]),
        None => declared,
    };
    Some(format!(
        "another model ({declared}), not a DFlash draft: its {CONFIG_FILE} has no draft field"
    ))
}

fn entry_names(dir: &Path) -> std::io::Result<Vec<OsString>> {
    std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.file_name()))
        .collect()
}

/// Whether two paths name one directory (however each was spelled).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// For `dflash-gate DIR` when DIR has no config.json: whether it is a folder of packages (some
/// directory directly under it holds a config.json entry), so the message can suggest `--all`.
pub fn holds_packages(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .any(|e| e.path().join(CONFIG_FILE).symlink_metadata().is_ok())
    })
}
