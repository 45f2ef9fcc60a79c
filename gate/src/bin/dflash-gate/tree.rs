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
//! skipped, named by it. A repository that keeps its draft in a `dflash/` folder (its root no
//! draft, the folder one) is gated, as the gate descends into it. A directory with neither a
//! config.json nor a weight file is not a package:
//! listed as skipped and counted, never dropped. A folder of several GGUF drafts is gated file by
//! file. A hub cache (DIR itself, or a directory directly under it) is gated repository by
//! repository, each at its `refs/main` snapshot by the rules of a plain folder.

use dflash_gate::__private::checkpoint::{INDEX_FILE, SINGLE_FILE};
use dflash_gate::__private::files::WEIGHT_EXTENSION;
use dflash_gate::__private::files::{FileError, CONFIG_FILE};
use dflash_gate::PackageError;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// One directory of the run, named on the command line or found under `--all`.
pub enum Item {
    Gate {
        dir: PathBuf,
        label: Option<Label>,
    },
    /// Not a package of this run: shown, but it changes nothing in the exit status. `reason` is the
    /// JSON document's token (`option_directory`, `checkpoint`, `another_model`, `not_a_package`).
    Skip {
        dir: PathBuf,
        label: Option<Label>,
        why: String,
        reason: &'static str,
    },
    /// Looks like a package, but could not even be looked at: exit 2.
    NotGated {
        dir: PathBuf,
        label: Option<Label>,
        error: PackageError,
    },
}

/// How a row names what it gated when the path alone would not say it: a hub cache repository is
/// `ORG/NAME@REV7 (main)`, as its users name it, with a note of the snapshots the run did not gate.
#[derive(Clone)]
pub struct Label {
    pub name: String,
    pub note: Option<String>,
}

impl Item {
    /// A path named on the command line: gated as it is.
    pub fn gate(dir: PathBuf) -> Item {
        Item::Gate { dir, label: None }
    }

    pub fn dir(&self) -> &Path {
        match self {
            Item::Gate { dir, .. } | Item::Skip { dir, .. } | Item::NotGated { dir, .. } => dir,
        }
    }

    fn label_mut(&mut self) -> &mut Option<Label> {
        match self {
            Item::Gate { label, .. } | Item::Skip { label, .. } | Item::NotGated { label, .. } => {
                label
            }
        }
    }

    /// The row's name: the label, else the path escaped as file names are.
    pub fn name(&self) -> String {
        match self {
            Item::Gate { label, dir }
            | Item::Skip { label, dir, .. }
            | Item::NotGated { label, dir, .. } => match label {
                Some(label) => label.name.clone(),
                None => dflash_gate::__private::escape::name(dir.as_os_str()),
            },
        }
    }

    /// The label's name, when the row has one.
    pub fn label_name(&self) -> Option<&str> {
        match self {
            Item::Gate { label, .. } | Item::Skip { label, .. } | Item::NotGated { label, .. } => {
                label.as_ref().map(|l| l.name.as_str())
            }
        }
    }

    /// What the row adds after its own words: the snapshots of its repository not gated.
    pub fn note(&self) -> Option<&str> {
        match self {
            Item::Gate { label, .. } | Item::Skip { label, .. } | Item::NotGated { label, .. } => {
                label.as_ref().and_then(|l| l.note.as_deref())
            }
        }
    }
}

fn skip(dir: PathBuf, reason: &'static str, why: String) -> Item {
    Item::Skip {
        dir,
        label: None,
        why,
        reason,
    }
}

fn not_gated(dir: PathBuf, error: PackageError) -> Item {
    Item::NotGated {
        dir,
        label: None,
        error,
    }
}

/// Every directory directly under `models`, sorted: those to gate, and why each one not gated is
/// passed over. A hub cache among them (or `models` itself being one) is gated repository by
/// repository. `beside` are the directories `--source` and `--target` name.
pub fn packages_under(models: &Path, beside: &[(&str, &Path)]) -> Result<Vec<Item>, String> {
    dflash_gate::__private::error::require_dir(models).map_err(|e| format!("--all {e}"))?;
    let listing = |e: std::io::Error| {
        format!(
            "--all {}: cannot list it: {e}",
            dflash_gate::__private::escape::name(models.as_os_str())
        )
    };
    let mut items = entries_under(models, beside, true).map_err(listing)?;
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

/// What `--target DIR` names: the one target DIR is, or, when DIR is a folder of targets or a hub
/// cache (no config.json and no hub repository of its own), each model directly under it
/// that is another model than a draft (as `--all` lists it skipped), with its row name. A folder
/// under which no target is found is refused.
pub fn targets_named(dir: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let plain = || {
        Ok(vec![(
            dflash_gate::__private::escape::name(dir.as_os_str()),
            dir.to_owned(),
        )])
    };
    // A GGUF beside the targets is classified as each entry is (a draft is no target); a folder
    // holding only its target's GGUF names that file.
    let holds_own = |names: &[OsString]| names.iter().any(|n| n == CONFIG_FILE);
    if !dir.is_dir() || dflash_gate::__private::hub::is_repository(dir) {
        return plain();
    }
    match entry_names(dir) {
        Ok(names) if !holds_own(&names) => {}
        _ => return plain(),
    }
    let items = entries_under(dir, &[], true).map_err(|e| {
        format!(
            "--target {}: cannot list it: {e}",
            dflash_gate::__private::escape::name(dir.as_os_str())
        )
    })?;
    let mut targets: Vec<(String, PathBuf)> = items
        .iter()
        .filter(|i| matches!(i, Item::Skip { reason, .. } if *reason == "another_model"))
        .map(|i| (i.name(), i.dir().to_owned()))
        .collect();
    targets.sort_by(|a, b| a.1.cmp(&b.1));
    if targets.is_empty() {
        return Err(format!(
            "--target {}: no target model under it (a folder with a config.json or a GGUF of a model, not a draft), and it is none itself",
            dflash_gate::__private::escape::name(dir.as_os_str())
        ));
    }
    Ok(targets)
}

/// The items for the entries of `dir`. `descend`: a hub cache directly under it is looked into, one
/// level (the repositories of `~/.cache/huggingface/hub` under `--all ~/.cache/huggingface`).
fn entries_under(
    dir: &Path,
    beside: &[(&str, &Path)],
    descend: bool,
) -> std::io::Result<Vec<Item>> {
    let mut items = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        // Following links: a package may be linked into the folder. Files beside the packages (a
        // README) are not packages; an entry that cannot be followed (a link to nothing, a loop)
        // may have been one, so it is not gated rather than passed over.
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => items.extend(classify(path, beside, descend)),
            // A GGUF draft is a file: one beside the directories is gated as they are.
            Ok(_) if is_gguf(path.as_os_str()) => items.push(gguf_item(path, beside)),
            Ok(_) => {}
            Err(source) => items.push(not_gated(
                path.clone(),
                PackageError::FileNoted {
                    error: FileError::Unreadable { path, source },
                    note: "it cannot be followed, so whether it is a package is unknown".to_owned(),
                },
            )),
        }
    }
    Ok(items)
}

/// What to do with one directory under `--all`: one item, or one per draft it holds (a hub cache,
/// a folder of GGUF drafts). A directory that is not a package is an item too, skipped and counted.
fn classify(dir: PathBuf, beside: &[(&str, &Path)], descend: bool) -> Vec<Item> {
    if let Some((option, _)) = beside.iter().find(|(_, named)| same_dir(&dir, named)) {
        let why = format!("the {option} directory, not a package");
        return vec![skip(dir, "option_directory", why)];
    }
    // A repository that keeps its draft in a `dflash/` folder (XiaomiMiMo's layout): its root is the
    // target's files or a README, so by its root alone it would be passed over; the gate descends.
    if dflash_gate::__private::package::keeps_its_draft_in_a_folder_at(&dir) {
        return vec![Item::gate(dir)];
    }
    // Any kind of entry: a link to nothing, a FIFO, a directory named config.json still say that a
    // package was meant here.
    let config = dir.join(CONFIG_FILE).symlink_metadata().is_ok();
    let names = match entry_names(&dir) {
        Ok(names) => names,
        Err(_) if config => return vec![Item::gate(dir)],
        Err(source) => {
            let path = dir.clone();
            let error = PackageError::File(FileError::Unreadable { path, source });
            return vec![not_gated(dir, error)];
        }
    };
    let weights = names
        .iter()
        .any(|n| dflash_gate::__private::files::is_weight_file(n));
    let checkpoint = names.iter().any(|n| n == SINGLE_FILE || n == INDEX_FILE);
    let ggufs: Vec<&OsString> = names.iter().filter(|n| is_gguf(n)).collect();
    let safetensors = names
        .iter()
        .any(|n| n.as_encoded_bytes().ends_with(b".safetensors"));
    let gguf = !ggufs.is_empty();
    let item = match (config, weights) {
        // A hub cache repository: gated as the snapshot its `refs/main` names.
        (false, false) if dflash_gate::__private::hub::is_repository(&dir) => {
            return repository(dir, beside);
        }
        // A GGUF draft carries its config in its metadata: a directory holding one is a draft,
        // unless its one GGUF says it is another model (a target beside its draft).
        (false, false) if gguf => match ggufs.as_slice() {
            [one] => match another_gguf(&dir.join(one)) {
                Some(architecture) => skip(dir, "another_model", architecture),
                None => Item::gate(dir),
            },
            // A folder of GGUF drafts (the quantizations of one draft): each is a draft, gated
            // file by file, as it would be directly under DIR.
            many if !safetensors => {
                let mut files: Vec<PathBuf> = many.iter().map(|n| dir.join(n)).collect();
                files.sort();
                return files.into_iter().map(|f| gguf_item(f, beside)).collect();
            }
            // GGUFs beside other weights: the gate says which it will not pick.
            _ => Item::gate(dir),
        },
        (false, false) if descend && dflash_gate::__private::hub::is_cache(&dir) => {
            return match entries_under(&dir, beside, false) {
                Ok(items) => items,
                Err(source) => {
                    let path = dir.clone();
                    let error = PackageError::File(FileError::Unreadable { path, source });
                    vec![not_gated(dir, error)]
                }
            };
        }
        (false, false) => {
            let why = match names.is_empty() {
                true => "empty: not a package".to_owned(),
                false => format!("not a package: no {CONFIG_FILE}, no *.{WEIGHT_EXTENSION} and no *.gguf in it"),
            };
            skip(dir, "not_a_package", why)
        }
        // A Hugging Face folder is a draft when its config says so (the gate then says what is wrong
        // with it); another model's folder (a target's checkpoint) is passed over, saying what it is.
        (true, false) if checkpoint => match another_model(&dir) {
            Some(declared) => skip(dir, "another_model", declared),
            // A config not read under the link rule (one that leads out of the directory or its
            // repository, a FIFO) says nothing of what the folder is: gated, the gate says why not.
            None if config_of(&dir).is_none() => Item::gate(dir),
            // `--source` holds converted drafts against their folders: a folder is not one of them.
            None if is_draft_config(&dir) && beside.iter().any(|(o, _)| *o == "--source") => {
                skip(dir, "checkpoint", "a Hugging Face safetensors draft: --source compares converted drafts with their folders, so it is not gated with --source (gate it without)".to_owned())
            }
            None if is_draft_config(&dir) => Item::gate(dir),
            None => skip(dir, "checkpoint", format!(
                "a checkpoint whose {CONFIG_FILE} declares no DFlash draft ({SINGLE_FILE} or its index, no *.{WEIGHT_EXTENSION})"
            )),
        },
        (true, _) => match another_model(&dir) {
            Some(why) => skip(dir, "another_model", why),
            None => Item::gate(dir),
        },
        (false, true) => Item::gate(dir),
    };
    vec![item]
}

/// A hub cache repository under `--all`: its `refs/main` snapshot is what the hub client loads, so it
/// is what is gated, by the rules of a plain folder (a target's repository is skipped as another
/// model), on a row named `ORG/NAME@REV7 (main)`. Its other snapshots are named, not gated.
fn repository(repo: PathBuf, beside: &[(&str, &Path)]) -> Vec<Item> {
    use dflash_gate::__private::hub;
    let id = hub::repository_name(&repo)
        .map(|id| dflash_gate::__private::escape::escape(&id).into_owned())
        .unwrap_or_else(|| dflash_gate::__private::escape::name(repo.as_os_str()));
    if let Some((option, _)) = beside.iter().find(|(_, named)| same_dir(&repo, named)) {
        let why = format!("the {option} directory, not a package");
        return vec![skip(repo, "option_directory", why)];
    }
    let (snapshot, others) = match hub::main_snapshot(&repo) {
        Ok(found) => found,
        Err(error) => {
            let label = Label {
                name: format!("{id} (main)"),
                note: None,
            };
            let mut item = not_gated(repo, error);
            *item.label_mut() = Some(label);
            return vec![item];
        }
    };
    let revision = snapshot
        .file_name()
        .map(dflash_gate::__private::escape::name)
        .unwrap_or_default();
    let short: String = revision.chars().take(7).collect();
    let note = match others.as_slice() {
        [] => None,
        [one] => Some(format!("1 other snapshot not gated: {}", abbreviated(one))),
        many => Some(format!(
            "{} other snapshots not gated: {}",
            many.len(),
            dflash_gate::__private::checks::list(
                &many.iter().map(|s| abbreviated(s)).collect::<Vec<_>>(),
                3
            )
        )),
    };
    let mut items = classify(snapshot.clone(), beside, false);
    for item in &mut items {
        let name = match item.dir().strip_prefix(&snapshot) {
            Ok(file) if !file.as_os_str().is_empty() => format!(
                "{id}@{short}/{} (main)",
                dflash_gate::__private::escape::name(file.as_os_str())
            ),
            _ => format!("{id}@{short} (main)"),
        };
        // The snapshot itself is gated as the repository, so the report knows the ref it came by.
        let (Item::Gate { dir, .. } | Item::Skip { dir, .. } | Item::NotGated { dir, .. }) = item;
        if *dir == snapshot {
            *dir = repo.clone();
        }
        *item.label_mut() = Some(Label {
            name,
            note: note.clone(),
        });
    }
    items
}

/// A snapshot's commit as a row names it: its first seven characters.
fn abbreviated(revision: &str) -> String {
    revision.chars().take(7).collect()
}

fn is_gguf(name: &std::ffi::OsStr) -> bool {
    dflash_gate::__private::gguf::is_gguf_name(name)
}

/// A `*.gguf` file directly under `--all`: gated as a draft, unless an option names it or it says
/// it is another model.
fn gguf_item(file: PathBuf, beside: &[(&str, &Path)]) -> Item {
    if let Some((option, _)) = beside.iter().find(|(_, named)| same_dir(&file, named)) {
        let why = format!("the {option} file, not a draft");
        return skip(file, "option_directory", why);
    }
    match another_gguf(&file) {
        Some(why) => skip(file, "another_model", why),
        None => Item::gate(file),
    }
}

/// Why the GGUF at `path` is another model's: its `general.architecture` is neither a DFlash draft's
/// nor a fork dialect's. `None` when it may be a draft, or cannot be read: the gate then says what
/// is wrong with it.
fn another_gguf(path: &Path) -> Option<String> {
    use dflash_gate::__private::draft::gguf::{ARCHITECTURE, FORK_DIALECTS};
    let inside = dflash_gate::__private::files::Inside::package(path.parent()?).ok()?;
    inside.open(path).ok()?;
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
    config_of(dir).is_some_and(|bytes| dflash_gate::__private::config::reads_as_a_draft(&bytes))
}

/// Why `dir` is another model's directory (its config.json names an architecture or model type and
/// is not a draft's), or `None` when it may be a draft: anything the gate cannot read or recognise
/// is gated, and the gate says what is wrong with it.
fn another_model(dir: &Path) -> Option<String> {
    use dflash_gate::__private::config::{self, DraftConfig};
    use serde_json::Value;
    let bytes = config_of(dir)?;
    if DraftConfig::from_json(&bytes).is_ok() {
        return None;
    }
    let Ok(Value::Object(top)) = dflash_gate::__private::strict_json::parse(&bytes) else {
        return None;
    };
    if config::DRAFT_FIELDS.iter().any(|f| top.contains_key(*f)) {
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

/// `dir`'s config.json, read under the gate's link rule: a link out of the directory (or out of its
/// hub cache repository, at any step) is not read, so nothing a listing says of a directory comes
/// from outside it. `None` then: the directory is gated, and the gate says what it refused.
fn config_of(dir: &Path) -> Option<Vec<u8>> {
    use dflash_gate::__private::limits::MAX_CONFIG_BYTES;
    let inside = dflash_gate::__private::files::Inside::package(dir).ok()?;
    let file = inside.open(&dir.join(CONFIG_FILE)).ok()?;
    file.read_all(MAX_CONFIG_BYTES).ok()
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
/// directory directly under it holds a config.json entry) or a hub cache, so the message can suggest
/// `--all`.
pub fn holds_packages(dir: &Path) -> bool {
    dflash_gate::__private::hub::is_cache(dir)
        || std::fs::read_dir(dir).is_ok_and(|entries| {
            entries
                .filter_map(Result::ok)
                .any(|e| e.path().join(CONFIG_FILE).symlink_metadata().is_ok())
        })
}
