//! `manifest.sha256` (`--manifest`): every file listed in `MANIFEST.sha256` matches, none is missing, none unlisted.
//! A hub cache snapshot, which has none, is held to its blobs' digests instead ([`cache`]).

mod cache;

use crate::error::PackageError;
use crate::escape;
use crate::evaluation::Evaluation;
use crate::evidence::{Finding, ManifestAgainst as Against, ManifestSha256};
use crate::files::{self, FileError};
use crate::limits::MAX_MANIFEST_BYTES;
use crate::report::{Check, NotChecked, Outcome};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::ffi::OsString;
use std::path::Path;

pub const MANIFEST: &str = crate::check_id::CheckId::MANIFEST_SHA256;
pub const MANIFEST_FILE: &str = "MANIFEST.sha256";

/// What `--manifest` answers when it verified something (an absent manifest, UNDECIDED, verified
/// nothing): the bytes are the publisher's. Not the content: that is `--source`'s.
pub const ANSWERS: [NotChecked; 1] = [NotChecked::Provenance];

/// `manifest.sha256` for an evaluation whose draft config was recognised (for a refused one, blocked
/// by `config.is_dflash`: the verdict is already a FAIL, and hashing gigabytes would not change it),
/// and the items it answered. `read` as for [`check`].
pub fn checks(
    evaluation: &Evaluation<'_>,
    dir: &Path,
    read: &[&files::RegularFile],
) -> Result<(Vec<Check>, Vec<NotChecked>), PackageError> {
    if evaluation.draft.is_err() {
        return Ok((
            crate::evaluation::refused_step(&[MANIFEST], "--manifest"),
            Vec::new(),
        ));
    }
    let check = check(dir, read)?;
    let answered = if check.outcome == Outcome::Undecided {
        Vec::new()
    } else {
        ANSWERS.to_vec()
    };
    Ok((vec![check], answered))
}

/// Verifies `dir/MANIFEST.sha256`; hashes files on all cores, streaming. A manifest that cannot be
/// read (not a regular file, an I/O error) or a package directory that cannot be listed is an error
/// (exit 2), not a verdict; a manifest that is there but wrong is a FAIL.
///
/// Names are compared as bytes: a package file whose name is not UTF-8 can never be listed (the
/// manifest is UTF-8) and is reported unlisted under an escaped spelling, never folded into a
/// look-alike. A listed file that is a symlink out of the package is refused, unread.
///
/// `read` are the files the checks already read (config.json, the weight file): each is hashed from
/// that same handle, not opened again by name, and must still be the file its name holds
/// ([`files::RegularFile::unchanged`]), so the manifest vouches for exactly the bytes that were judged
/// and a file renamed into place meanwhile is exit 2, "changed while it was read".
pub fn check(dir: &Path, read: &[&files::RegularFile]) -> Result<Check, PackageError> {
    BEFORE_HASHING.with(|hook| hook.take().map(|f| f()));
    let inside = files::Inside::package(dir)?;
    let path = dir.join(MANIFEST_FILE);
    let text = match read_manifest(&path, &inside)? {
        Ok(Some(t)) => t,
        Ok(None) => {
            return Ok(match cache::check(dir, read, &inside)? {
                Some(check) => check,
                None => Check::undecided(
                    MANIFEST,
                    format!("--manifest was asked for, but the package has no {MANIFEST_FILE}, and is no hub cache snapshot (whose blobs are named by their digests)"),
                ),
            })
        }
        Err(why) => return Ok(Check::fail(MANIFEST, why)),
    };
    let entries = match parse(&text) {
        Ok(e) => e,
        Err(why) => return Ok(Check::fail(MANIFEST, format!("{MANIFEST_FILE}: {why}"))),
    };
    let listed: Vec<&str> = entries.iter().map(|(_, f)| f.as_str()).collect();
    let wanted: HashSet<&[u8]> = listed.iter().map(|f| f.as_bytes()).collect();
    let unlisted: Vec<String> = package_files(dir)?
        .iter()
        .filter(|f| f.as_encoded_bytes() != MANIFEST_FILE.as_bytes())
        .filter(|f| !wanted.contains(f.as_encoded_bytes()))
        .map(|f| match f.to_str() {
            Some(name) => name.to_owned(),
            None => format!("{} (a name that is not UTF-8)", escape::os(f)),
        })
        .collect();
    let mut results = hash_all(dir, &entries, read, &inside)?;
    // A file that changed while it was hashed is no verdict on the package: exit 2.
    let changed = |r: &Result<_, FileError>| matches!(r, Err(FileError::Changed { .. }));
    if let Some(i) = results.iter().position(changed) {
        if let Err(e) = results.swap_remove(i) {
            return Err(e.into());
        }
    }
    let mut mismatched = Vec::new();
    let mut missing = Vec::new();
    let mut unreadable = Vec::new();
    let mut outside = Vec::new();
    // The evidence names each file; the hashes and link targets are in the message.
    let (mut mismatched_names, mut unreadable_items, mut outside_names) =
        (Vec::new(), Vec::new(), Vec::new());
    let mut bytes = 0u64;
    for ((want, file), got) in entries.iter().zip(&results) {
        match got {
            Ok((hex, n)) => {
                bytes += n;
                if hex != want {
                    mismatched.push(format!(
                        "{file} (listed {}..., found {}...)",
                        &want[..12],
                        &hex[..12]
                    ));
                    mismatched_names.push(file.clone());
                }
            }
            Err(FileError::NotFound { .. }) => missing.push(file.clone()),
            Err(FileError::Outside { to, .. }) => {
                outside.push(format!("{file} (a link to {})", escape::os(to.as_os_str())));
                outside_names.push(file.clone());
            }
            Err(e) => {
                unreadable.push(format!("{file} ({})", e.reason()));
                unreadable_items.push(Finding::new(file, crate::error::file_reason(e)));
            }
        }
    }
    let evidence = ManifestSha256 {
        against: Against::ManifestFile,
        listed: listed.len(),
        hashed_bytes: bytes,
        mismatched: mismatched_names,
        missing: missing.clone(),
        unreadable: unreadable_items,
        outside_the_package: outside_names,
        unlisted: unlisted.clone(),
        unverified: Vec::new(),
    };
    if mismatched.is_empty()
        && missing.is_empty()
        && unreadable.is_empty()
        && outside.is_empty()
        && unlisted.is_empty()
    {
        return Ok(Check::pass(MANIFEST, format!("every file listed in {MANIFEST_FILE} matches: {} {}, {bytes} bytes hashed (unlisted: none)", listed.len(), if listed.len() == 1 { "file" } else { "files" }))
            .with_evidence(evidence));
    }
    let mut parts = Vec::new();
    if !mismatched.is_empty() {
        parts.push(format!("mismatched: {}", mismatched.join(", ")));
    }
    if !missing.is_empty() {
        parts.push(format!("missing: {}", missing.join(", ")));
    }
    if !unreadable.is_empty() {
        parts.push(format!("unreadable: {}", unreadable.join(", ")));
    }
    if !outside.is_empty() {
        parts.push(format!(
            "symlinks out of the package, not read: {}",
            outside.join(", ")
        ));
    }
    if !unlisted.is_empty() {
        parts.push(format!("unlisted: {}", unlisted.join(", ")));
    }
    Ok(Check::fail(
        MANIFEST,
        format!(
            "{MANIFEST_FILE} does not match the package: {}",
            parts.join("; ")
        ),
    )
    .with_evidence(evidence))
}

/// The manifest's text; `Ok(Ok(None))` when there is none; `Ok(Err(why))` when it is there but too
/// large, a link out of the package (the link rule of the files it lists: see [`files::Inside`]) or
/// not UTF-8 (a FAIL); `Err` when it cannot be read at all (exit 2).
fn read_manifest(
    path: &Path,
    inside: &files::Inside,
) -> Result<Result<Option<String>, String>, PackageError> {
    let bytes = match inside
        .open(path)
        .and_then(|file| file.read_all(MAX_MANIFEST_BYTES))
    {
        Ok(bytes) => bytes,
        Err(e @ FileError::Outside { .. }) => {
            return Ok(Err(format!("{MANIFEST_FILE} {}", e.reason())))
        }
        Err(FileError::NotFound { .. }) => return Ok(Ok(None)),
        Err(FileError::TooLarge { .. }) => {
            return Ok(Err(format!(
                "{MANIFEST_FILE} is larger than the {MAX_MANIFEST_BYTES}-byte limit"
            )))
        }
        Err(e) => return Err(e.into()),
    };
    Ok(String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| format!("{MANIFEST_FILE} is not UTF-8")))
}

/// Every name in the package directory, as the file system spells it.
fn package_files(dir: &Path) -> Result<Vec<OsString>, PackageError> {
    let unreadable = |source| FileError::Unreadable {
        path: dir.to_owned(),
        source,
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        names.push(entry.map_err(unreadable)?.file_name());
    }
    names.sort();
    Ok(names)
}

/// `sha256sum` lines: 64 hex digits, a space, a space or `*`, a file name inside the package.
///
/// A line that is not one is named by its number and the byte where it goes wrong, never quoted: the
/// manifest may be any file (a link the gate refused to follow is not the only way a secret gets
/// there), and a report goes to logs.
pub fn parse(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut lines: Vec<usize> = Vec::new();
    let mut offset = 0usize;
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let begins = offset;
        offset += raw.len();
        let line = raw.strip_suffix('\n').unwrap_or(raw);
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let bad = |at: usize, why: &str| {
            format!(
                "line {}, byte {at} (byte {} of the file): {why}",
                i + 1,
                begins + at
            )
        };
        let bytes = line.as_bytes();
        if let Some(at) = (0..64).find(|&at| !bytes.get(at).is_some_and(u8::is_ascii_hexdigit)) {
            return Err(bad(at, "the digest is not 64 hex digits"));
        }
        // The first 64 bytes are ASCII: 64 and 66 are character boundaries when they are in the line.
        let (hex, rest) = line.split_at(64);
        let file = rest
            .strip_prefix("  ")
            .or_else(|| rest.strip_prefix(" *"))
            .ok_or_else(|| bad(64, "not `<64 hex>  <file>`"))?;
        let file = file.strip_prefix("./").unwrap_or(file);
        if file.is_empty()
            || file.contains('/')
            || file.contains('\\')
            || file == ".."
            || file == "."
        {
            return Err(bad(66, "the file is not a plain name inside the package"));
        }
        // Two lines for one file (`./x` is `x`) cannot both be honoured: whichever a verifier
        // takes, the other hash is never checked, so the manifest is refused naming both lines.
        if let Some(first) = out.iter().position(|(_, f)| f == file) {
            return Err(bad(
                66,
                &format!(
                    "{} is listed twice, on lines {} and {}",
                    escape::escape(file),
                    lines[first],
                    i + 1
                ),
            ));
        }
        out.push((hex.to_ascii_lowercase(), file.to_owned()));
        lines.push(i + 1);
    }
    if out.is_empty() {
        return Err("lists no file".to_owned());
    }
    Ok(out)
}

/// A listed file's hash and length, or why it was not hashed.
type Hashed = Result<(String, u64), FileError>;

/// Hashes each listed file (streaming, 1 MiB at a time), files spread over all cores. A file the
/// checks read is hashed from their handle; every file, theirs too, is held to the link rule. A worker
/// that panicked is an error: the files it held would otherwise be missing from the comparison.
fn hash_all(
    dir: &Path,
    entries: &[(String, String)],
    read: &[&files::RegularFile],
    inside: &files::Inside,
) -> Result<Vec<Hashed>, PackageError> {
    crate::parallel::map(
        MANIFEST,
        entries,
        || vec![0u8; 1 << 20],
        |buffer, (_, file)| {
            let path = dir.join(file);
            if let Some(held) = read.iter().find(|f| f.path() == path) {
                inside.admits(held)?;
                return hash_open(held, buffer);
            }
            hash_open(&inside.open(&path)?, buffer)
        },
    )
    .map_err(|p| PackageError::internal(dir, p))
}

/// The SHA-256 (lowercase hex) and length of a regular file, streamed through `buffer`.
pub fn hash_file(path: &Path, buffer: &mut [u8]) -> Result<(String, u64), FileError> {
    hash_open(&files::open(path)?, buffer)
}

/// The SHA-256 and length of a file already open, from its first byte, and proof that it is still the
/// file its name holds.
fn hash_open(file: &files::RegularFile, buffer: &mut [u8]) -> Result<(String, u64), FileError> {
    let mut hasher = Sha256::new();
    let total = file.read_chunks(buffer, |chunk| hasher.update(chunk))?;
    file.unchanged()?;
    Ok((hex(&hasher.finalize()), total))
}

/// A digest as lowercase hex.
fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

thread_local! {
    static BEFORE_HASHING: std::cell::Cell<Option<Box<dyn FnOnce()>>> = const { std::cell::Cell::new(None) };
}

/// Runs `between` once, on this thread, when the next manifest check starts: after the checks read the
/// package, before any file is hashed. For tests that rename a file into place at exactly that moment;
/// no option reaches it.
#[doc(hidden)]
pub fn before_hashing(between: impl FnOnce() + 'static) {
    BEFORE_HASHING.with(|hook| hook.set(Some(Box::new(between))));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sha256sum_lines_and_refuses_escapes() {
        let h = "a".repeat(64);
        let ok = parse(&format!("{h}  config.json\n{h} *model.q4nx\n")).unwrap();
        assert_eq!(ok[1].1, "model.q4nx");
        for bad in [
            format!("{h}  ../x"),
            format!("{h}  /etc/passwd"),
            format!("{h} config.json"),
            "zz  x".to_owned(),
        ] {
            assert!(parse(&bad).is_err(), "{bad}");
        }
        assert!(parse(&format!("{h}  a\n{h}  a")).unwrap_err().contains(
            "line 2, byte 66 (byte 134 of the file): a is listed twice, on lines 1 and 2"
        ));
        // Once as ./a, after a blank line, the wrong hash first: the same file, named by both lines.
        let twice = format!("{}  ./a\n\n{h}  a\n", "b".repeat(64));
        assert!(parse(&twice).unwrap_err().contains(
            "line 3, byte 66 (byte 137 of the file): a is listed twice, on lines 1 and 3"
        ));
    }

    #[test]
    fn hashes_a_known_string() {
        let dir = std::env::temp_dir().join(format!("dflash-gate-sha-{}", std::process::id()));
        std::fs::write(&dir, b"abc").unwrap();
        let (hex, n) = hash_file(&dir, &mut [0u8; 2]).unwrap();
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(
            (hex.as_str(), n),
            (
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                3
            )
        );
    }
}
