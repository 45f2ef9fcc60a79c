//! Why the gate could not run at all (exit 2): the error every reader of a package directory returns.
//!
//! It lives below `package` and the optional steps (`source`, `target`, `manifest`) so that all of
//! them can return it without importing each other.

use crate::files::FileError;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// The remedy for a draft given where its target was meant.
const DRAFT_AS_TARGET_FIX: &str = "give --target the target model: its folder with config.json and tokenizer.json, its Hugging Face id, or its GGUF";

/// The gate could not run at all: exit 2, not a verdict on the package.
#[derive(Debug)]
#[non_exhaustive]
pub enum PackageError {
    /// Nothing exists at the path.
    NoSuchDirectory { path: PathBuf },
    /// Something exists at the path, but it is not a directory (a file, a FIFO, a device): the
    /// message says only that, since which it is was not asked.
    NotADirectory { path: PathBuf },
    /// The directory has no config.json.
    NoConfig { path: PathBuf },
    /// A file the gate must read could not be opened or read, is not a regular file, or changed while
    /// it was read.
    File(FileError),
    /// A file error with what the reader knew that the file system does not say (the index that named
    /// a missing shard, the symbolic link that leads nowhere): the reason stays the file's own.
    FileNoted { error: FileError, note: String },
    /// The directory holds none of the files it must have one of (a checkpoint with neither
    /// `model.safetensors` nor an index): `why` names them. Its reason is `file_not_found`.
    Missing { path: PathBuf, why: String },
    /// A file was read but is not what it must be (a checkpoint shard that does not parse, an index
    /// naming a shard that is not there): `why` says what, naming the file's contents.
    Malformed { path: PathBuf, why: String },
    /// A draft was named where its target was meant (`--target DRAFT`): `why` says what declares it
    /// a draft. Its reason is `malformed`; it is the one error whose remedy is always the same.
    DraftAsTarget { path: PathBuf, why: String },
    /// The error came from the directory an option named (`--target`, `--source`), not from the
    /// package: the message says which, since both are directories given on the same command line.
    Option {
        option: &'static str,
        inner: Box<PackageError>,
    },
    /// A step of the gate itself broke (a worker panicked): its result is incomplete, so there is no
    /// verdict on the package, only this error about the gate, naming the step.
    Internal {
        path: PathBuf,
        step: &'static str,
        message: String,
    },
}

impl fmt::Display for PackageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PackageError::NoSuchDirectory { path } => {
                write!(f, "{}: no such directory", crate::escape::name(path.as_os_str()))
            }
            PackageError::NotADirectory { path } => {
                write!(f, "{}: not a directory", crate::escape::name(path.as_os_str()))
            }
            PackageError::NoConfig { path } => write!(f, "{}: no config.json", crate::escape::name(path.as_os_str())),
            PackageError::File(e) => e.fmt(f),
            PackageError::FileNoted { error, note } => write!(f, "{error}; {note}"),
            PackageError::Missing { path, why } => write!(f, "{}: {why}", crate::escape::name(path.as_os_str())),
            PackageError::Malformed { path, why } => write!(f, "{}: {why}", crate::escape::name(path.as_os_str())),
            PackageError::DraftAsTarget { path, why } => write!(
                f,
                "{}: {why}: a draft, not the model it drafts for; fix: {DRAFT_AS_TARGET_FIX}",
                crate::escape::name(path.as_os_str())
            ),
            PackageError::Option { option, inner } => write!(f, "{option} {inner}"),
            PackageError::Internal {
                path,
                step,
                message,
            } => write!(
                f,
                "{}: internal error in {step}: a worker panicked ({message}); its result is incomplete, so no verdict",
                crate::escape::name(path.as_os_str())
            ),
        }
    }
}

impl std::error::Error for PackageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PackageError::File(e) | PackageError::FileNoted { error: e, .. } => Some(e),
            PackageError::Option { inner, .. } => Some(inner.as_ref()),
            _ => None,
        }
    }
}

impl From<FileError> for PackageError {
    fn from(e: FileError) -> Self {
        PackageError::File(e)
    }
}

impl PackageError {
    /// A stable token for the JSON document's `reason` (schema/report.schema.json lists every one).
    pub fn reason(&self) -> &'static str {
        match self {
            PackageError::NoSuchDirectory { .. } => "no_such_directory",
            PackageError::NotADirectory { .. } => "not_a_directory",
            PackageError::NoConfig { .. } => "no_config",
            PackageError::File(e) | PackageError::FileNoted { error: e, .. } => file_reason(e),
            PackageError::Missing { .. } => "file_not_found",
            PackageError::Malformed { .. } | PackageError::DraftAsTarget { .. } => "malformed",
            PackageError::Option { inner, .. } => inner.reason(),
            PackageError::Internal { .. } => "internal",
        }
    }

    /// What to do about it, where the cause has a known remedy: the message's last clause
    /// (`; fix: ...`), for a program (the error document's `fix`).
    pub fn fix(&self) -> Option<&'static str> {
        match self {
            PackageError::DraftAsTarget { .. } => Some(DRAFT_AS_TARGET_FIX),
            PackageError::Option { inner, .. } => inner.fix(),
            _ => None,
        }
    }

    /// The path the error is about (the package, or the file in it at fault).
    pub fn path(&self) -> &Path {
        match self {
            PackageError::NoSuchDirectory { path }
            | PackageError::NotADirectory { path }
            | PackageError::NoConfig { path }
            | PackageError::Missing { path, .. }
            | PackageError::Malformed { path, .. }
            | PackageError::DraftAsTarget { path, .. }
            | PackageError::Internal { path, .. } => path,
            PackageError::File(e) | PackageError::FileNoted { error: e, .. } => e.path(),
            PackageError::Option { inner, .. } => inner.path(),
        }
    }

    /// A worker of one of the gate's steps panicked while gating the package at `path`.
    pub(crate) fn internal(path: &Path, panic: crate::parallel::WorkerPanic) -> PackageError {
        PackageError::Internal {
            path: path.to_owned(),
            step: panic.step,
            message: panic.message,
        }
    }

    /// The same error, said to come from the directory `option` named.
    pub(crate) fn under_option(self, option: &'static str) -> PackageError {
        PackageError::Option {
            option,
            inner: Box::new(self),
        }
    }
}

/// The reason token of a file error, noted or not.
pub(crate) fn file_reason(e: &FileError) -> &'static str {
    match e {
        FileError::NotFound { .. } => "file_not_found",
        FileError::NotRegular { .. } => "not_a_regular_file",
        FileError::TooLarge { .. } => "file_too_large",
        FileError::Unreadable { .. } => "unreadable",
        FileError::Changed { .. } => "changed_while_read",
        FileError::Outside { .. } => "outside_the_package",
    }
}

/// `dir` is a directory: "no such directory" and "not a directory" are told apart.
/// Every reader of a package directory (the draft's, the target's, `--all`'s) asks this first.
pub fn require_dir(dir: &Path) -> Result<(), PackageError> {
    let path = dir.to_owned();
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(PackageError::NotADirectory { path }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Err(PackageError::NoSuchDirectory { path })
        }
        Err(source) => Err(PackageError::File(FileError::Unreadable { path, source })),
    }
}
