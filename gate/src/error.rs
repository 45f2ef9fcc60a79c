//! Why the gate could not run at all (exit 2): the error every reader of a package directory returns.
//!
//! It lives below `package` and `beyond` so that both can return it without importing each other.

use crate::files::FileError;
use std::fmt;
use std::path::PathBuf;

/// The gate could not run at all: exit 2, not a verdict on the package.
#[derive(Debug)]
pub enum PackageError {
    /// The path is not a directory (or does not exist).
    NotADirectory { path: PathBuf },
    /// The directory has no config.json.
    NoConfig { path: PathBuf },
    /// A file the gate must read could not be opened or read, is not a regular file, or changed while
    /// it was read.
    File(FileError),
}

impl fmt::Display for PackageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PackageError::NotADirectory { path } => {
                write!(f, "{}: not a package directory", path.display())
            }
            PackageError::NoConfig { path } => write!(f, "{}: no config.json", path.display()),
            PackageError::File(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for PackageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PackageError::File(e) => Some(e),
            _ => None,
        }
    }
}

impl From<FileError> for PackageError {
    fn from(e: FileError) -> Self {
        PackageError::File(e)
    }
}
