//! `--manifest` on a Hugging Face hub cache snapshot, which never holds a `MANIFEST.sha256`: the hub
//! client names every blob by its digest and links each snapshot's file names to those blobs, so the
//! cache is itself a manifest, written by the download. A blob named by 64 hex digits is a Git LFS
//! object, named by the SHA-256 of its bytes (the hub's LFS etag); one named by 40 is a git object,
//! named by git's blob hash (SHA-1 over `blob <length>\0` and the bytes: small files such as
//! config.json). Each file is hashed and held to its name; a file no digest names (a plain file in
//! the snapshot, a link to a blob named otherwise) is not vouched for, so the check cannot pass.

use super::{hash_open, Hashed, MANIFEST};
use crate::error::PackageError;
use crate::evidence::{Finding, ManifestSha256};
use crate::files::{self, FileError};
use crate::report::Check;
use sha1::{Digest, Sha1};
use std::path::{Path, PathBuf};

/// The most files one snapshot may hold for this check (a draft repository holds a dozen): a
/// directory built to hold millions is refused before any is hashed.
const MAX_FILES: usize = 10_000;

/// How deep the snapshot's folders are walked (the hub keeps a repository's own folders, such as
/// `original/`, as folders of the snapshot).
const MAX_DEPTH: usize = 8;

/// How a blob's name says its bytes must hash.
#[derive(Clone, Debug, PartialEq)]
enum Named {
    /// A Git LFS object: the SHA-256 of its bytes.
    Sha256(String),
    /// A git object: SHA-1 over `blob <length>\0` and its bytes.
    GitBlob(String),
    /// Nothing vouches for it, and why.
    Neither(&'static str),
}

/// One file of the snapshot: its name under the snapshot, its path, and what names its bytes.
struct Entry {
    name: String,
    path: PathBuf,
    named: Named,
}

/// `manifest.sha256` of a snapshot `dir` of a hub cache (`None` when `dir` is no snapshot), every
/// file held to the digest its blob is named by. `read` are the files the checks read, hashed from
/// their handles as a manifest's are.
pub(super) fn check(
    dir: &Path,
    read: &[&files::RegularFile],
    inside: &files::Inside,
) -> Result<Option<Check>, PackageError> {
    if crate::hub::snapshot_of(dir).is_none() {
        return Ok(None);
    }
    let mut entries = Vec::new();
    if let Err(why) = walk(dir, "", 0, &mut entries) {
        return Ok(Some(Check::undecided(
            MANIFEST,
            format!("--manifest on a hub cache snapshot: {why}"),
        )));
    }
    let hashed = crate::parallel::map(
        MANIFEST,
        &entries,
        || vec![0u8; 1 << 20],
        |buffer, entry| -> Option<Hashed> {
            let hash = match &entry.named {
                Named::Neither(_) => return None,
                Named::Sha256(_) => hash_open,
                Named::GitBlob(_) => git_blob_hash,
            };
            Some(match read.iter().find(|f| f.path() == entry.path) {
                Some(held) => inside.admits(held).and_then(|()| hash(held, buffer)),
                None => inside.open(&entry.path).and_then(|f| hash(&f, buffer)),
            })
        },
    )
    .map_err(|p| PackageError::internal(dir, p))?;
    let mut evidence = ManifestSha256 {
        against: super::Against::HubCache,
        listed: entries.len(),
        hashed_bytes: 0,
        mismatched: Vec::new(),
        missing: Vec::new(),
        unreadable: Vec::new(),
        outside_the_package: Vec::new(),
        unlisted: Vec::new(),
        unverified: Vec::new(),
    };
    let (mut mismatched, mut unreadable, mut unverified) = (Vec::new(), Vec::new(), Vec::new());
    let (mut lfs, mut git) = (0usize, 0usize);
    for (entry, got) in entries.iter().zip(hashed) {
        let (want, kind) = match &entry.named {
            Named::Sha256(want) => (want, &mut lfs),
            Named::GitBlob(want) => (want, &mut git),
            Named::Neither(why) => {
                unverified.push(format!("{} ({why})", entry.name));
                evidence.unverified.push(entry.name.clone());
                continue;
            }
        };
        match got {
            Some(Ok((hex, n))) => {
                evidence.hashed_bytes += n;
                *kind += 1;
                if &hex != want {
                    mismatched.push(format!(
                        "{} (its blob is named {}..., its bytes hash to {}...)",
                        entry.name,
                        &want[..12],
                        &hex[..12]
                    ));
                    evidence.mismatched.push(entry.name.clone());
                }
            }
            Some(Err(e @ FileError::Changed { .. })) => return Err(e.into()),
            Some(Err(FileError::Outside { .. })) => {
                evidence.outside_the_package.push(entry.name.clone());
                unreadable.push(format!("{} (a link out of the repository)", entry.name));
            }
            Some(Err(e)) => {
                unreadable.push(format!("{} ({})", entry.name, e.reason()));
                evidence
                    .unreadable
                    .push(Finding::new(&entry.name, crate::error::file_reason(&e)));
            }
            None => {}
        }
    }
    let bytes = evidence.hashed_bytes;
    let check = if !mismatched.is_empty() || !unreadable.is_empty() {
        let mut parts = Vec::new();
        if !mismatched.is_empty() {
            parts.push(format!(
                "not the blob its digest names: {}",
                mismatched.join(", ")
            ));
        }
        if !unreadable.is_empty() {
            parts.push(format!("not hashed: {}", unreadable.join(", ")));
        }
        Check::fail(
            MANIFEST,
            format!(
                "the hub cache snapshot does not match its blobs' digests: {}; the hub client does not hash a blob it already holds: `huggingface-cli download --force-download` fetches the files again",
                parts.join("; ")
            ),
        )
    } else if !unverified.is_empty() {
        Check::undecided(
            MANIFEST,
            format!(
                "--manifest on a hub cache snapshot: {lfs} files by SHA-256 and {git} by git's blob hash match their blobs, but no digest names {}",
                unverified.join(", ")
            ),
        )
    } else {
        Check::pass(
            MANIFEST,
            format!(
                "every file of the hub cache snapshot is the blob its digest names: {} files ({lfs} by SHA-256, the hub's LFS etag; {git} by git's blob hash), {bytes} bytes hashed",
                entries.len()
            ),
        )
    };
    Ok(Some(check.with_evidence(evidence)))
}

/// The snapshot's files under `dir` (`prefix` their names' folder), each with what names its bytes;
/// an error when there are more than [`MAX_FILES`] or folders deeper than [`MAX_DEPTH`].
fn walk(dir: &Path, prefix: &str, depth: usize, out: &mut Vec<Entry>) -> Result<(), String> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .and_then(|entries| entries.map(|e| e.map(|e| e.file_name())).collect())
        .map_err(|e| format!("{prefix}: cannot be listed ({e})"))?;
    names.sort();
    for name in names {
        let path = dir.join(&name);
        let shown = format!("{prefix}{}", crate::escape::name(&name));
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|e| format!("{shown}: cannot be read ({e})"))?;
        let named = if meta.file_type().is_symlink() {
            match std::fs::metadata(&path) {
                Ok(target) if target.is_dir() => {
                    return Err(format!(
                        "{shown} is a link to a folder, which the hub never writes"
                    ))
                }
                _ => blob_name(&path),
            }
        } else if meta.is_dir() {
            if depth + 1 >= MAX_DEPTH {
                return Err(format!("{shown}: folders nested deeper than {MAX_DEPTH}"));
            }
            walk(&path, &format!("{shown}/"), depth + 1, out)?;
            continue;
        } else {
            Named::Neither("a file of its own, not a link to a blob")
        };
        if out.len() == MAX_FILES {
            return Err(format!("more than {MAX_FILES} files"));
        }
        out.push(Entry {
            name: shown,
            path,
            named,
        });
    }
    Ok(())
}

/// What the name of the blob `link` points to says of its bytes.
fn blob_name(link: &Path) -> Named {
    let Ok(target) = std::fs::read_link(link) else {
        return Named::Neither("a link that cannot be read");
    };
    let Some(name) = target.file_name().and_then(|n| n.to_str()) else {
        return Named::Neither("a link to a blob named by no digest");
    };
    let hex = name
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    match name.len() {
        64 if hex => Named::Sha256(name.to_owned()),
        40 if hex => Named::GitBlob(name.to_owned()),
        _ => Named::Neither("a link to a blob named by no digest"),
    }
}

/// Git's blob hash of a file already open: SHA-1 over `blob <length>\0` and its bytes, and proof it
/// is still the file its name holds.
fn git_blob_hash(file: &files::RegularFile, buffer: &mut [u8]) -> Hashed {
    let mut hasher = Sha1::new();
    hasher.update(format!("blob {}\0", file.len()).as_bytes());
    let total = file.read_chunks(buffer, |chunk| hasher.update(chunk))?;
    file.unchanged()?;
    Ok((super::hex(&hasher.finalize()), total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blobs_name_says_how_its_bytes_hash() {
        let dir = tempfile::tempdir().unwrap();
        let link = |to: &str| {
            let path = dir.path().join(to.replace('/', "_"));
            std::os::unix::fs::symlink(to, &path).unwrap();
            blob_name(&path)
        };
        let lfs = "a".repeat(64);
        let git = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(link(&format!("../../blobs/{lfs}")), Named::Sha256(lfs));
        assert_eq!(
            link(&format!("../../blobs/{git}")),
            Named::GitBlob(git.to_owned())
        );
        for other in ["../../blobs/config.json", &"A".repeat(64), &"a".repeat(63)] {
            assert!(matches!(link(other), Named::Neither(_)), "{other}");
        }
    }

    #[test]
    fn git_s_blob_hash_of_a_known_file() {
        // `printf 'hello\n' | git hash-object --stdin`.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"hello\n").unwrap();
        let file = files::open(&path).unwrap();
        let (hex, n) = git_blob_hash(&file, &mut [0u8; 3]).unwrap();
        assert_eq!(
            (hex.as_str(), n),
            ("ce013625030ba8dba906f756967f9e9ca394464a", 6)
        );
    }
}
