//! What a weight file is when it is not a container: the files a download, a checkout or a converter
//! leaves where the weights should be.
//!
//! A Git LFS pointer (a checkout without LFS) or a saved HTML error page read as a container gives a
//! "header length" of some quintillion bytes, which tells the user nothing about what went wrong or
//! what to do. These are recognised from their first bytes, and only after the container reading
//! failed: a file that parses is never second-guessed, and a recognised file was refused anyway, so
//! recognising it changes the message, never the outcome.

use super::ContainerError;
use std::fmt;

/// A file that is not a container, by what it is instead. As evidence, a token (`git_lfs_pointer`,
/// `html`, `zeros`, `gzip`, `zip`, `gguf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Impostor {
    /// The text stub Git LFS checks out in place of a large file when the objects were not fetched
    /// (`actions/checkout` without `lfs: true`).
    GitLfsPointer,
    /// An HTML or XML page: a download that saved a server's error or sign-in page.
    Html,
    /// Nothing but zero bytes: space a download or copy reserved and never wrote.
    Zeros,
    /// A gzip stream: the weights, or a whole package, still compressed.
    Gzip,
    /// A zip archive (a PyTorch `.bin` or `.pt` checkpoint is one).
    Zip,
    /// A GGUF file, the format the weights are converted from, not the Q4NX container.
    Gguf,
}

impl fmt::Display for Impostor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Impostor::GitLfsPointer => "a Git LFS pointer, not the weights: fetch them with `git lfs pull` (in GitHub Actions, check out with `lfs: true`)",
            Impostor::Html => "an HTML or XML page (a download that saved an error or sign-in page), not the weights: download the file again, with the credentials the host asks for",
            Impostor::Zeros => "all zero bytes (space a download or copy reserved and never wrote), not the weights: download or copy the file again",
            Impostor::Gzip => "a gzip stream, not the weights: decompress it (`gunzip`) and gate what it holds",
            Impostor::Zip => "a zip archive (a PyTorch checkpoint is one), not a Q4NX container: unpack it, or convert the checkpoint to Q4NX, and gate the result",
            Impostor::Gguf => "a GGUF file, not a Q4NX container: convert it to Q4NX and gate the result (to compare a package with this GGUF, give it as --source)",
        })
    }
}

/// The error to report for a file whose reading stopped at `e`: `e` itself, unless the file's first
/// bytes (`head`) say what else it is. `whole` is true when `head` is the entire file, the only case
/// in which "all zeros" can be said.
pub(crate) fn instead(e: ContainerError, head: &[u8], whole: bool) -> ContainerError {
    // Every head recognised below is refused by its first 8 bytes already (as a length they are over
    // the limit, or zero, or the file is shorter), so only the refusal of the header's start is ever
    // renamed, never one about tensors a real header declared.
    match recognise(head, whole) {
        Some(found) => ContainerError::NotAContainer { found },
        None => e,
    }
}

/// What `head` (a file's first bytes; the whole file when `whole`) is, if it is one of the files
/// that are mistaken for weights.
pub fn recognise(head: &[u8], whole: bool) -> Option<Impostor> {
    const LFS: &[u8] = b"version https://git-lfs.github.com/spec/";
    if head.starts_with(LFS) {
        return Some(Impostor::GitLfsPointer);
    }
    if head.starts_with(b"GGUF") {
        return Some(Impostor::Gguf);
    }
    if head.starts_with(&[0x1f, 0x8b]) {
        return Some(Impostor::Gzip);
    }
    // A local file header, or the end record an empty archive is made of.
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        return Some(Impostor::Zip);
    }
    // A file too short for the 8-byte length is too short first, whatever its bytes.
    if whole && head.len() >= 8 && head.iter().all(|&b| b == 0) {
        return Some(Impostor::Zeros);
    }
    let text = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    let start = text.iter().position(|b| !b.is_ascii_whitespace())?;
    let text = text.get(start..)?;
    let markup = [
        &b"<!doctype html"[..],
        b"<html",
        b"<head",
        b"<body",
        b"<?xml",
    ];
    if markup.iter().any(|m| {
        text.get(..m.len())
            .is_some_and(|t| t.eq_ignore_ascii_case(m))
    }) {
        return Some(Impostor::Html);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container::Container;

    fn found(bytes: &[u8]) -> Option<Impostor> {
        match Container::parse(bytes) {
            Err(ContainerError::NotAContainer { found }) => Some(found),
            _ => None,
        }
    }

    #[test]
    fn each_foreign_file_is_named() {
        let lfs = b"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 1338\n";
        assert_eq!(found(lfs), Some(Impostor::GitLfsPointer));
        let page = b"\n  <!DOCTYPE html>\n<html><head><title>404</title></head></html>\n";
        assert_eq!(found(page), Some(Impostor::Html));
        let s3 =
            b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied</Code></Error>";
        assert_eq!(found(s3), Some(Impostor::Html));
        assert_eq!(found(&[0u8; 4096]), Some(Impostor::Zeros));
        assert_eq!(
            found(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"),
            Some(Impostor::Gzip)
        );
        assert_eq!(
            found(b"PK\x03\x04\x14\x00\x00\x00\x08\x00"),
            Some(Impostor::Zip)
        );
        assert_eq!(
            found(b"GGUF\x03\x00\x00\x00\x00\x00\x00\x00"),
            Some(Impostor::Gguf)
        );
    }

    #[test]
    fn the_message_says_what_to_do() {
        let lfs = b"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 1338\n";
        let e = Container::parse(lfs).expect_err("a pointer is refused");
        let text = e.to_string();
        assert!(text.contains("Git LFS pointer"), "{text}");
        assert!(
            text.contains("git lfs pull") && text.contains("lfs: true"),
            "{text}"
        );
    }

    #[test]
    fn zeros_are_said_only_of_a_whole_file() {
        assert_eq!(recognise(&[0u8; 64], true), Some(Impostor::Zeros));
        assert_eq!(recognise(&[0u8; 64], false), None);
        assert_eq!(found(&[]), None);
        assert_eq!(found(&[0; 7]), None);
    }
}
