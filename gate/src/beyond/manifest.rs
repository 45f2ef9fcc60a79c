//! `manifest.sha256`: every file listed in `MANIFEST.sha256` matches, none is missing, none unlisted.

use crate::error::PackageError;
use crate::escape;
use crate::files::{self, FileError};
use crate::limits::MAX_MANIFEST_BYTES;
use crate::report::Check;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::ffi::OsString;
use std::path::Path;

pub const MANIFEST: &str = "manifest.sha256";
pub const MANIFEST_FILE: &str = "MANIFEST.sha256";

/// Verifies `dir/MANIFEST.sha256`; hashes files on all cores, streaming. A manifest that cannot be
/// read (not a regular file, an I/O error) or a package directory that cannot be listed is an error
/// (exit 2), not a verdict; a manifest that is there but wrong is a FAIL.
///
/// Names are compared as bytes: a package file whose name is not UTF-8 can never be listed (the
/// manifest is UTF-8) and is reported unlisted under an escaped spelling, never folded into a
/// look-alike. A listed file that is a symlink out of the package is refused, unread.
pub fn check(dir: &Path) -> Result<Check, PackageError> {
    let path = dir.join(MANIFEST_FILE);
    let text = match read_manifest(&path)? {
        Ok(Some(t)) => t,
        Ok(None) => {
            return Ok(Check::undecided(
                MANIFEST,
                format!("--manifest was asked for, but the package has no {MANIFEST_FILE}"),
            ))
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
    let results = hash_all(dir, &entries)?;
    let mut mismatched = Vec::new();
    let mut missing = Vec::new();
    let mut unreadable = Vec::new();
    let mut outside = Vec::new();
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
                }
            }
            Err(Refusal::File(FileError::NotFound { .. })) => missing.push(file.clone()),
            Err(Refusal::File(e)) => unreadable.push(format!("{file} ({})", e.reason())),
            Err(Refusal::Outside) => outside.push(file.clone()),
        }
    }
    let evidence = json!({ "listed": listed.len(), "hashed_bytes": bytes, "mismatched": mismatched, "missing": missing, "unreadable": unreadable, "outside_the_package": outside, "unlisted": unlisted });
    if mismatched.is_empty()
        && missing.is_empty()
        && unreadable.is_empty()
        && outside.is_empty()
        && unlisted.is_empty()
    {
        return Ok(Check::pass(MANIFEST, format!("every file listed in {MANIFEST_FILE} matches: {} files, {bytes} bytes hashed (unlisted: none)", listed.len()))
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
/// large or not UTF-8 (a FAIL); `Err` when it cannot be read at all (exit 2).
fn read_manifest(path: &Path) -> Result<Result<Option<String>, String>, PackageError> {
    let bytes = match files::read_capped(path, MAX_MANIFEST_BYTES) {
        Ok(bytes) => bytes,
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
pub fn parse(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |why: &str| format!("line {}: {why}: {line:?}", i + 1);
        let (hex, rest) = line
            .split_at_checked(64)
            .ok_or_else(|| bad("not `<64 hex>  <file>`"))?;
        if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad("the digest is not 64 hex digits"));
        }
        let file = rest
            .strip_prefix("  ")
            .or_else(|| rest.strip_prefix(" *"))
            .ok_or_else(|| bad("not `<64 hex>  <file>`"))?;
        let file = file.strip_prefix("./").unwrap_or(file);
        if file.is_empty()
            || file.contains('/')
            || file.contains('\\')
            || file == ".."
            || file == "."
        {
            return Err(bad("the file is not a plain name inside the package"));
        }
        if out.iter().any(|(_, f)| f == file) {
            return Err(bad("the file is listed twice"));
        }
        out.push((hex.to_ascii_lowercase(), file.to_owned()));
    }
    if out.is_empty() {
        return Err("lists no file".to_owned());
    }
    Ok(out)
}

/// Why a listed file was not hashed.
enum Refusal {
    File(FileError),
    /// A symlink whose target is outside the package directory.
    Outside,
}

/// A listed file's hash and length, or why it was not hashed.
type Hashed = Result<(String, u64), Refusal>;

/// Hashes each listed file (streaming, 1 MiB at a time), files spread over all cores. A worker that
/// panicked is an error: the files it held would otherwise be missing from the comparison.
fn hash_all(dir: &Path, entries: &[(String, String)]) -> Result<Vec<Hashed>, PackageError> {
    let root = std::fs::canonicalize(dir);
    crate::parallel::map(
        MANIFEST,
        entries,
        || vec![0u8; 1 << 20],
        |buffer, (_, file)| {
            let path = dir.join(file);
            if !inside(&path, root.as_deref().ok()) {
                return Err(Refusal::Outside);
            }
            hash_file(&path, buffer).map_err(Refusal::File)
        },
    )
    .map_err(|p| PackageError::internal(dir, p))
}

/// Whether `path` (a name in the package) is a plain file or a symlink resolving inside `root` (the
/// package, canonical). A dangling symlink counts as inside: opening it then says "no such file".
fn inside(path: &Path, root: Option<&Path>) -> bool {
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if !is_link {
        return true;
    }
    match (std::fs::canonicalize(path), root) {
        (Ok(target), Some(root)) => target.starts_with(root),
        (Err(e), _) if e.kind() == std::io::ErrorKind::NotFound => true,
        _ => false,
    }
}

/// The SHA-256 (lowercase hex) and length of a regular file, streamed through `buffer`.
pub fn hash_file(path: &Path, buffer: &mut [u8]) -> Result<(String, u64), FileError> {
    let file = files::open(path)?;
    let mut hasher = Sha256::new();
    let total = file.read_chunks(buffer, |chunk| hasher.update(chunk))?;
    file.unchanged()?;
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok((hex, total))
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
        assert!(parse(&format!("{h}  a\n{h}  a"))
            .unwrap_err()
            .contains("twice"));
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
