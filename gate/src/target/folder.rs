//! A target folder: a Q4NX package or a Hugging Face folder (`config.json` plus, when present, the
//! headers of its weight files; a hub cache entry is resolved to its snapshot before it gets here).

use super::tokenizer::{tokenizer_at, TOKENIZER_FILE};
use super::{Target, Tokenizer};
use crate::checkpoint;
use crate::config::{Field, FieldProblem, ProblemKind};
use crate::container::TensorInfo;
use crate::error::PackageError;
use crate::escape;
use crate::files::{self, FileError, WeightFile};
use serde_json::Value;
use std::ffi::OsString;
use std::path::Path;

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
    let (bytes, config, config_file) =
        crate::checkpoint::read_config_inside(dir, "target's", Some(&inside))?;
    if let Ok(draft) = crate::config::DraftConfig::from_json(&bytes) {
        return Err(PackageError::DraftAsTarget {
            path: dir.join(crate::files::CONFIG_FILE),
            why: format!("it declares a DFlash draft ({})", draft.declared_as),
        });
    }
    let tokenizer = tokenizer_at(&dir.join(TOKENIZER_FILE));
    let (tensors, weights_absent) = match read_headers(dir, &inside)? {
        Headers::Read(tensors) => (Ok(tensors), false),
        Headers::Ambiguous(why) => (Err(why), false),
        Headers::Absent(why) => (Err(why), true),
    };
    let target = Target {
        hidden_size: stated(&config, "hidden_size"),
        num_hidden_layers: stated(&config, "num_hidden_layers"),
        vocab_size: stated(&config, "vocab_size"),
        tensors,
        tokens: crate::tokenizer::read(dir, &inside, &config, tokenizer == Tokenizer::Present)?,
        tokenizer,
        stated_in: super::StatedIn::Config,
        rope: super::rope::of_target_config(&config),
        weights_absent,
        architecture: architecture(&config),
        architectures: architectures(&config),
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
    // A multimodal config's text model is one object deep: a `text_config` of another type is named,
    // not read through (nothing nested under it is followed further, so no nesting can loop).
    if top.is_none() {
        match config.get("text_config") {
            None | Some(Value::Null) | Some(Value::Object(_)) => {}
            Some(other) => {
                return Err(FieldProblem::new(
                    "text_config",
                    ProblemKind::WrongType(format!(
                        "{}, not an object (the text model's fields, {name} among them)",
                        shown(other)
                    )),
                ))
            }
        }
    }
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

/// The architecture a target's config states, as llama.cpp's converter chooses its model class:
/// `text_config.architectures[0]` where stated, else `architectures[0]`.
fn architecture(config: &Value) -> super::Architecture {
    let first = |v: Option<&Value>| match v.and_then(|a| a.as_array()).and_then(|a| a.first()) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    let nested = config
        .get("text_config")
        .and_then(|t| t.get("architectures"));
    if let Some(name) = first(nested) {
        return super::Architecture::Config {
            name,
            field: "text_config.architectures[0]",
        };
    }
    match first(config.get("architectures")) {
        Some(name) => super::Architecture::Config {
            name,
            field: "architectures[0]",
        },
        None => super::Architecture::NotStated(
            "the target's config.json states no architectures (a list whose first entry is a string)"
                .to_owned(),
        ),
    }
}

/// The classes the target's config.json names in `architectures` (Transformers writes the model's
/// class there, as a speculators config names its verifier's), or why there are none to compare.
fn architectures(config: &Value) -> Result<Vec<String>, String> {
    let at = "the target's config.json";
    let value = match config.get("architectures") {
        None | Some(Value::Null) => return Err(format!("{at} states no architectures")),
        Some(v) => v,
    };
    let not = || {
        format!(
            "{at}'s architectures is {}, not an array of class names",
            shown(value)
        )
    };
    let items = value.as_array().filter(|a| !a.is_empty()).ok_or_else(not)?;
    items
        .iter()
        .map(|item| item.as_str().map(str::to_owned).ok_or_else(not))
        .collect()
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

/// The target's weight headers, never its data: `model.q4nx` (or the single `*.q4nx`), else a
/// safetensors checkpoint (`model.safetensors`, or the shards its index names). `Ok(Err(..))` when the
/// target holds no weight file at all (nothing to count); a weight file that is there and cannot be
/// read or parsed is an error.
///
/// Names are kept as the file system spells them (`OsString`), so a name that is not UTF-8 still opens;
/// a lossy conversion would open a different name (`\u{fffd}` for each bad byte) and report it missing.
/// Where a name is printed, it is escaped ([`escape::name`]).
/// What a folder's weight files gave: their header entries, or why there are none to read.
enum Headers {
    Read(Vec<TensorInfo>),
    /// Several `*.q4nx` and no `model.q4nx`: the gate does not pick one.
    Ambiguous(String),
    /// No weight file at all.
    Absent(String),
}

fn read_headers(dir: &Path, inside: &files::Inside) -> Result<Headers, PackageError> {
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
            return Ok(Headers::Ambiguous(format!(
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
        return Ok(Headers::Read(table.entries));
    }
    let safetensors = [checkpoint::SINGLE_FILE, checkpoint::INDEX_FILE]
        .iter()
        .any(|n| std::fs::symlink_metadata(dir.join(n)).is_ok());
    if !safetensors {
        return Ok(Headers::Absent(format!(
            "the target has no weight file (no *.q4nx, {}, or {})",
            checkpoint::SINGLE_FILE,
            checkpoint::INDEX_FILE
        )));
    }
    let headers = checkpoint::Headers::read_inside(dir, inside)?;
    Ok(Headers::Read(headers.entries().cloned().collect()))
}
