//! A draft in a Hugging Face hub cache, found offline: a snapshot directory is a folder like any
//! other, but users name the repository directory (`models--ORG--NAME`) or the repository id
//! (`ORG/NAME`) as they name it to the hub client. Both resolve to one snapshot through `refs/`, the
//! way the client does, and nothing is ever downloaded: a revision the cache does not hold is an error
//! that says so.

use crate::error::PackageError;
use crate::files;
use std::path::{Path, PathBuf};

/// The revision the hub client reads when none is named.
pub const DEFAULT_REVISION: &str = "main";

/// Longer than any ref the client writes (a 40-hex commit and a newline): a larger file is not a ref.
const MAX_REF_BYTES: u64 = 256;

/// Where the hub client keeps its cache, from the environment as the client reads it: `HF_HUB_CACHE`,
/// else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`. `None` when none of them is set.
pub fn cache_root() -> Option<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(cache) = var("HF_HUB_CACHE") {
        return Some(PathBuf::from(cache));
    }
    if let Some(home) = var("HF_HOME") {
        return Some(PathBuf::from(home).join("hub"));
    }
    var("HOME").map(|home| PathBuf::from(home).join(".cache/huggingface/hub"))
}

/// The directory to gate for `path`: a hub repository directory resolved to the snapshot of
/// `revision` (default `main`), a repository id `ORG/NAME` that names no directory looked up in
/// `cache` first, and any other path as it is (its reader says what is wrong with it).
pub fn resolve(
    path: &Path,
    revision: Option<&str>,
    cache: Option<&Path>,
) -> Result<PathBuf, PackageError> {
    if std::fs::symlink_metadata(path).is_ok() {
        if is_repository(path) {
            return snapshot(path, revision.unwrap_or(DEFAULT_REVISION));
        }
        return match revision {
            None => Ok(path.to_owned()),
            Some(rev) => Err(PackageError::Missing {
                path: path.to_owned(),
                why: format!("--revision {} picks a snapshot of a hub cache repository (a models--ORG--NAME directory, or ORG/NAME), and this is not one", shown(rev)),
            }),
        };
    }
    let Some(repo) = path.to_str().and_then(repository_id) else {
        return Ok(path.to_owned());
    };
    // What the path was taken for first: a `.gguf` names a file, anything else a folder.
    let nothing = if crate::gguf::is_gguf_name(path.as_os_str()) {
        "no such file"
    } else {
        "no such directory"
    };
    let Some(cache) = cache else {
        return Err(PackageError::Missing {
            path: path.to_owned(),
            why: format!("{nothing}, and no hub cache to look the repository id up in (neither HF_HUB_CACHE, HF_HOME nor HOME is set)"),
        });
    };
    let dir = cache.join(&repo);
    if !dir.is_dir() {
        return Err(PackageError::Missing {
            path: path.to_owned(),
            why: format!(
                "{nothing}, and the hub cache at {} holds no {}: the gate reads the cache offline and downloads nothing (fetch it with the hub client first, or name the folder)",
                crate::escape::name(cache.as_os_str()),
                repo
            ),
        });
    }
    snapshot(&dir, revision.unwrap_or(DEFAULT_REVISION))
}

/// `ORG/NAME` as the hub cache names its directory (`models--ORG--NAME`), for a string that reads as a
/// model repository id and nothing else (no path of more parts, no `.` or `..` parts).
fn repository_id(id: &str) -> Option<String> {
    let (org, name) = id.split_once('/')?;
    let part = |p: &str| {
        !p.is_empty()
            && !p.starts_with('.')
            && p.len() <= 96
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    (part(org) && part(name)).then(|| format!("models--{org}--{name}"))
}

/// A hub cache repository directory: named `models--...`, holding `snapshots/`.
pub fn is_repository(dir: &Path) -> bool {
    dir.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("models--"))
        && dir.join("snapshots").is_dir()
}

/// `ORG/NAME` for a hub cache repository directory (`models--ORG--NAME`), as the hub client names
/// the repository; `NAME` alone for one without an organisation (`models--gpt2`).
pub fn repository_name(repo: &Path) -> Option<String> {
    let name = repo.file_name()?.to_str()?.strip_prefix("models--")?;
    Some(match name.split_once("--") {
        Some((org, name)) => format!("{org}/{name}"),
        None => name.to_owned(),
    })
}

/// The snapshot `refs/main` names in repository directory `repo`, the one the hub client loads, and
/// the other snapshots the repository holds (sorted), which nothing resolves to unless named.
pub fn main_snapshot(repo: &Path) -> Result<(PathBuf, Vec<String>), PackageError> {
    let dir = snapshot(repo, DEFAULT_REVISION)?;
    let mut others: Vec<String> = std::fs::read_dir(repo.join("snapshots"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| Some(n.as_os_str()) != dir.file_name())
        .map(|n| crate::escape::name(&n))
        .collect();
    others.sort();
    Ok((dir, others))
}

/// A directory holding hub cache repositories (`models--ORG--NAME` with `snapshots/`): the hub cache
/// itself (`~/.cache/huggingface/hub`).
pub fn is_cache(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .any(|e| is_repository(&e.path()))
    })
}

/// The repository id and commit of a snapshot directory (`.../models--ORG--NAME/snapshots/REV`),
/// or of a file directly in one; `None` for anything else.
pub fn snapshot_of(path: &Path) -> Option<(String, String)> {
    let dir = if path.is_dir() { path } else { path.parent()? };
    let revision = dir.file_name()?.to_str()?;
    let snapshots = dir.parent()?;
    if snapshots.file_name()? != "snapshots" {
        return None;
    }
    let repo = snapshots.parent()?;
    Some((repository_name(repo)?, revision.to_owned()))
}

/// What a hub cache snapshot's repository says of a download in progress: its `blobs/` holds files
/// the hub client writes as `<digest>.incomplete` and renames once whole (a snapshot links only the
/// finished ones). `None` for a directory that is no snapshot, or a repository with none. Only names
/// are read, from a `blobs/` the link rule has already held inside the repository. Returns what is
/// unfinished, and the command that resumes it.
pub fn unfinished_download(snapshot: &Path) -> Option<(String, String)> {
    let (repository, _) = snapshot_of(snapshot)?;
    let blobs = snapshot.parent()?.parent()?.join("blobs");
    let mut unfinished: Vec<String> = std::fs::read_dir(&blobs)
        .ok()?
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.as_encoded_bytes().ends_with(INCOMPLETE.as_bytes()))
        .map(|n| crate::escape::name(&n))
        .collect();
    if unfinished.is_empty() {
        return None;
    }
    unfinished.sort();
    let shown: Vec<String> = unfinished.iter().map(|n| format!("blobs/{n}")).collect();
    Some((
        format!(
            "the download is incomplete: the repository holds {} the hub client has not finished ({})",
            match unfinished.len() {
                1 => "1 file".to_owned(),
                n => format!("{n} files"),
            },
            crate::checks::list(&shown, 2),
        ),
        format!(
            "`huggingface-cli download {}` resumes it",
            crate::escape::escape(&repository)
        ),
    ))
}

/// What the hub client names a blob it is still writing: the digest, then this.
const INCOMPLETE: &str = ".incomplete";

/// The snapshot `revision` names in repository directory `repo`: `refs/REV` holds the commit whose
/// snapshot it is; a commit may be named directly.
/// The fewest hex digits a short commit may have: git's default abbreviation.
const MIN_SHORT_COMMIT: usize = 7;

fn snapshot(repo: &Path, revision: &str) -> Result<PathBuf, PackageError> {
    let plain = !revision.is_empty()
        && revision != "."
        && revision != ".."
        && !revision.contains(['/', '\0']);
    let missing = |why: String| PackageError::Missing {
        path: repo.to_owned(),
        why,
    };
    if !plain {
        return Err(missing(format!(
            "{} is not a revision name (a branch, tag or commit, with no '/')",
            shown(revision)
        )));
    }
    // A ref is held inside the repository before it is read, step by step (`refs`, then the ref): a
    // link out of it is refused unread, so no text from outside reaches a message. The snapshot's
    // steps, and `blobs`, are held by the link rule of the folder read (`files::Inside::package`).
    let home = std::fs::canonicalize(repo).map_err(|source| files::FileError::Unreadable {
        path: repo.to_owned(),
        source,
    })?;
    let reference = repo.join("refs").join(revision);
    files::stays_in(&home, &repo.join("refs"))?;
    files::stays_in(&home, &reference)?;
    let commit = if reference.symlink_metadata().is_ok() {
        let bytes = files::read_capped(&reference, MAX_REF_BYTES)?;
        let text = String::from_utf8_lossy(&bytes).trim().to_owned();
        let hex = text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex {
            return Err(PackageError::Malformed {
                path: reference,
                why: format!(
                    "holds {}, not a 40-digit commit as the hub client writes",
                    shown(&text)
                ),
            });
        }
        text
    } else {
        revision.to_owned()
    };
    let dir = repo.join("snapshots").join(&commit);
    if dir.is_dir() {
        return Ok(dir);
    }
    let mut held: Vec<String> = std::fs::read_dir(repo.join("snapshots"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| crate::escape::name(&e.file_name()))
        .collect();
    held.sort();
    // A short commit, as git and the gate's own notes print one (7 digits or more), names the one
    // snapshot it begins; two it begins is no answer, and the error lists them.
    let short = commit == revision
        && revision.len() >= MIN_SHORT_COMMIT
        && revision.bytes().all(|b| b.is_ascii_hexdigit());
    if short {
        let starting: Vec<&String> = held
            .iter()
            .filter(|h| h.len() == 40 && h.starts_with(&revision.to_ascii_lowercase()))
            .collect();
        if let [one] = starting[..] {
            return Ok(repo.join("snapshots").join(one));
        }
    }
    let held = crate::checks::list(&held, 4);
    Err(missing(if commit == revision {
        format!("no snapshot for revision {} (neither refs/{0} nor snapshots/{0}; snapshots held: {held}): the gate reads the cache offline and downloads nothing", shown(revision))
    } else {
        format!("refs/{} names commit {commit}, whose snapshot is not in the cache (snapshots held: {held})", shown(revision))
    }))
}

/// A name from the command line or a ref file, cut short and escaped for a message.
fn shown(text: &str) -> String {
    let cut: String = text.chars().take(64).collect();
    crate::escape::name(std::ffi::OsStr::new(&cut))
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

    fn cache() -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let repo = root.path().join("models--z-lab--Qwen3-4B-DFlash-b16");
        std::fs::create_dir_all(repo.join("snapshots").join(COMMIT)).unwrap();
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::write(repo.join("refs/main"), format!("{COMMIT}\n")).unwrap();
        (root, repo)
    }

    #[test]
    fn a_repository_resolves_through_refs_main() {
        let (_root, repo) = cache();
        let got = resolve(&repo, None, None).unwrap();
        assert_eq!(got, repo.join("snapshots").join(COMMIT));
    }

    #[test]
    fn a_repository_id_is_looked_up_in_the_cache() {
        let (root, repo) = cache();
        let id = Path::new("z-lab/Qwen3-4B-DFlash-b16");
        let got = resolve(id, None, Some(root.path())).unwrap();
        assert_eq!(got, repo.join("snapshots").join(COMMIT));
        let e = resolve(Path::new("z-lab/absent"), None, Some(root.path())).unwrap_err();
        assert!(e.to_string().contains("downloads nothing"), "{e}");
    }

    #[test]
    fn a_revision_names_a_ref_or_a_commit_and_nothing_else() {
        let (_root, repo) = cache();
        assert!(resolve(&repo, Some(COMMIT), None).is_ok());
        let e = resolve(&repo, Some("v2"), None).unwrap_err().to_string();
        assert!(
            e.contains("no snapshot for revision v2") && e.contains(COMMIT),
            "{e}"
        );
        let e = resolve(&repo, Some("../x"), None).unwrap_err().to_string();
        assert!(e.contains("not a revision name"), "{e}");
        std::fs::write(repo.join("refs/bad"), "not a commit").unwrap();
        let e = resolve(&repo, Some("bad"), None).unwrap_err().to_string();
        assert!(e.contains("not a 40-digit commit"), "{e}");
    }

    #[test]
    fn a_short_commit_names_the_one_snapshot_it_begins() {
        let (_tmp, repo) = cache();
        let commit = std::fs::read_dir(repo.join("snapshots"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.len() == 40)
            .expect("a 40-digit snapshot");
        let found = snapshot(&repo, &commit[..7]).unwrap();
        assert!(found.ends_with(&commit), "{}", found.display());
        // Six digits are not enough, and a prefix no snapshot begins is refused naming it.
        assert!(snapshot(&repo, &commit[..6]).is_err());
        let other = if commit.starts_with('0') {
            "1111111"
        } else {
            "0000000"
        };
        let e = snapshot(&repo, other).unwrap_err().to_string();
        assert!(e.contains(other), "{e}");
    }

    #[test]
    fn a_revision_on_a_plain_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(resolve(dir.path(), None, None).unwrap(), dir.path());
        let e = resolve(dir.path(), Some("main"), None).unwrap_err();
        assert!(e.to_string().contains("not one"), "{e}");
    }

    #[test]
    fn a_repository_is_named_and_its_other_snapshots_listed() {
        let (root, repo) = cache();
        assert_eq!(
            repository_name(&repo).as_deref(),
            Some("z-lab/Qwen3-4B-DFlash-b16")
        );
        assert_eq!(
            repository_name(Path::new("models--gpt2")).as_deref(),
            Some("gpt2")
        );
        assert_eq!(repository_name(Path::new("datasets--a--b")), None);
        assert!(is_cache(root.path()) && !is_cache(&repo));
        let (dir, others) = main_snapshot(&repo).unwrap();
        assert_eq!(
            (dir, others.len()),
            (repo.join("snapshots").join(COMMIT), 0)
        );
        assert_eq!(
            snapshot_of(&repo.join("snapshots").join(COMMIT)),
            Some(("z-lab/Qwen3-4B-DFlash-b16".to_owned(), COMMIT.to_owned()))
        );
        assert_eq!(snapshot_of(&repo), None);
        std::fs::create_dir(repo.join("snapshots/abc")).unwrap();
        assert_eq!(main_snapshot(&repo).unwrap().1, ["abc"]);
    }

    #[test]
    fn only_a_two_part_id_is_a_repository_id() {
        assert_eq!(repository_id("a/b").as_deref(), Some("models--a--b"));
        for not in ["a", "a/b/c", "../b", "a/..", "/b", "a/", "a b/c"] {
            assert_eq!(repository_id(not), None, "{not}");
        }
    }
}
