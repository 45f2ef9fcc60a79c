//! What `--source PATH` names, decided in one place: a checkpoint directory (spec section 11), a
//! `.gguf` file, or a directory holding exactly one `*.gguf` and no safetensors checkpoint (section
//! 12). A directory holding both kinds is refused (the gate does not pick which the package was
//! converted from), as are several GGUFs and a sharded one (`-00001-of-00003.gguf`), which is not
//! read.

use crate::checkpoint::Checkpoint;
use crate::error::PackageError;
use crate::escape;
use crate::evaluation::Evaluation;
use crate::files::FileError;
use crate::gguf::Gguf;
use crate::parallel::WorkerPanic;
use std::ffi::OsString;
use std::path::Path;

/// The source a package is compared with, opened and read.
pub enum Source {
    Checkpoint(Checkpoint),
    Gguf(Gguf),
}

fn has_extension(name: &OsString, extension: &str) -> bool {
    Path::new(name)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case(extension))
}

/// `name-00001-of-00003.gguf` (llama.cpp's `gguf-split` names): digits, `-of-`, digits, the count
/// above one (`-00001-of-00001` names a whole model).
pub(crate) fn is_shard(name: &str) -> bool {
    let Some(stem) = name
        .len()
        .checked_sub(5)
        .and_then(|n| name.get(..n))
        .filter(|_| name[name.len() - 5..].eq_ignore_ascii_case(".gguf"))
    else {
        return false;
    };
    let Some((before, count)) = stem.rsplit_once("-of-") else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(count)
        && count.parse::<u64>().map_or(true, |n| n > 1)
        && before
            .rsplit_once('-')
            .is_some_and(|(_, index)| digits(index))
}

fn malformed(path: &Path, why: String) -> PackageError {
    PackageError::Malformed {
        path: path.to_owned(),
        why,
    }
}

/// A GGUF named directly or found in a directory: refused by name when sharded.
fn open_gguf(path: &Path) -> Result<Source, PackageError> {
    let name = path.file_name().map(escape::name).unwrap_or_default();
    if is_shard(&name) {
        return Err(malformed(
            path,
            format!("{name} is one shard of a split GGUF: sharded GGUFs are not read (merge them with llama.cpp's gguf-split --merge first)"),
        ));
    }
    Gguf::open(path).map(Source::Gguf)
}

impl Source {
    /// Opens what `path` names (see the module's documentation); anything else is exit 2.
    pub fn open(path: &Path) -> Result<Source, PackageError> {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) if crate::gguf::is_gguf_name(path.as_os_str()) => {
                return open_gguf(path)
            }
            Ok(_) => {
                return Err(malformed(
                    path,
                    "is a file but not a .gguf: --source takes a checkpoint directory, a .gguf file, or a directory holding one".to_owned(),
                ))
            }
            // No such path, or unreadable: the GGUF reader says which of a `.gguf` path (no such
            // file), the checkpoint reader of any other (no such directory).
            Err(_) if crate::gguf::is_gguf_name(path.as_os_str()) => {
                return open_gguf(path)
            }
            Err(_) => return Checkpoint::open(path).map(Source::Checkpoint),
        }
        let unreadable = |source| FileError::Unreadable {
            path: path.to_owned(),
            source,
        };
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path).map_err(unreadable)? {
            names.push(entry.map_err(unreadable)?.file_name());
        }
        names.sort();
        let ggufs: Vec<&OsString> = names
            .iter()
            .filter(|n| crate::gguf::is_gguf_name(n))
            .collect();
        let checkpoint: Vec<&OsString> = names
            .iter()
            .filter(|n| has_extension(n, "safetensors") || crate::checkpoint::is_index(n))
            .collect();
        let listed = |names: &[&OsString]| {
            names
                .iter()
                .map(|n| escape::name(n))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match (ggufs.as_slice(), checkpoint.is_empty()) {
            ([], _) => Checkpoint::open(path).map(Source::Checkpoint),
            (_, false) => Err(malformed(
                path,
                format!(
                    "holds both a GGUF ({}) and a safetensors checkpoint ({}): the gate does not pick which the package was converted from; name the .gguf file, or move one out",
                    listed(&ggufs),
                    listed(&checkpoint)
                ),
            )),
            ([one], true) => open_gguf(&path.join(one)),
            (many, true) if many.iter().all(|n| is_shard(&escape::name(n))) => Err(malformed(
                path,
                format!("holds a split GGUF ({}): sharded GGUFs are not read (merge them with llama.cpp's gguf-split --merge first)", listed(many)),
            )),
            (many, true) => Err(malformed(
                path,
                format!(
                    "holds {} GGUF files ({}): the gate does not pick which the package was converted from; name the .gguf file",
                    many.len(),
                    listed(many)
                ),
            )),
        }
    }

    /// The `source.*` checks and the census of every compared grid (see [`super::checks`] and
    /// [`super::gguf::checks`]).
    pub fn checks(
        &self,
        evaluation: &Evaluation<'_>,
        scalar: bool,
    ) -> Result<super::Answer, WorkerPanic> {
        match self {
            Source::Checkpoint(c) => super::checks(evaluation, c, scalar),
            Source::Gguf(g) => super::gguf::checks(evaluation, g, scalar),
        }
    }

    /// Every file read is still as it was read.
    pub fn unchanged(&self) -> Result<(), PackageError> {
        match self {
            Source::Checkpoint(c) => c.unchanged(),
            Source::Gguf(g) => g.unchanged(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_shard;

    #[test]
    fn split_names_are_shards_and_others_are_not() {
        assert!(is_shard("draft-00001-of-00003.gguf"));
        assert!(is_shard("a-b-2-of-2.GGUF"));
        assert!(!is_shard("draft.gguf"));
        assert!(!is_shard("draft-00001-of-00001.gguf"));
        assert!(is_shard("draft-1-of-99999999999999999999999.gguf"));
        assert!(!is_shard("draft-of-3.gguf"));
        assert!(!is_shard("draft-1-of-.gguf"));
        assert!(!is_shard("draft-00001-of-00003.safetensors"));
        assert!(!is_shard("é.gguf"));
    }
}
