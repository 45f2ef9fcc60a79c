//! Untrusted text made safe to print on one terminal line.
//!
//! Tensor names, file names, manifest lines and metadata come from the package. Printed raw, a name
//! holding a newline can forge a `VERDICT  PASS` line, and terminal escapes or bidirectional
//! overrides can hide or reorder what is on screen. The human report passes every line through
//! `line`; the JSON document needs none of this (serde_json escapes control characters, and keeps
//! every string whole).

use std::borrow::Cow;
use std::ffi::OsStr;
use std::fmt::Write;

/// The longest line the human report prints; the rest is cut, saying how much (the JSON keeps all).
pub const MAX_LINE_CHARS: usize = 2000;

/// Whether `c` must not reach a terminal as itself: C0 and C1 controls (newline, carriage return,
/// escape, ...), and the invisible formatting characters that reorder or hide text (bidirectional
/// overrides and isolates, zero-width characters, the byte-order mark).
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// `s` with every unsafe character written as a Rust-style escape (`\n`, `\t`, `\u{1b}`) and every
/// backslash doubled, so that the printed form is unambiguous and stays on one line.
pub fn escape(s: &str) -> Cow<'_, str> {
    // Printable ASCII but the backslash is safe as it is: tested byte by byte first, since every
    // tensor name of a report passes here, and almost every one is such.
    let plain = |b: &u8| (b' '..=b'~').contains(b) && *b != b'\\';
    if s.bytes().all(|b| plain(&b)) || !s.chars().any(|c| is_unsafe(c) || c == '\\') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_unsafe(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A file name from the file system: escaped as [`escape`], with bytes that are not UTF-8 written
/// `\xNN`, so two different names never print the same.
pub fn os(name: &OsStr) -> String {
    let bytes = name.as_encoded_bytes();
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        out.push_str(&escape(chunk.valid()));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// A file or directory name as text for the report: itself when it is UTF-8 and holds no backslash
/// (the JSON then carries it exactly), else its [`os`] spelling, with the bytes that are not UTF-8
/// written `\xNN` and every backslash doubled. So a text with no backslash is the name, and one with
/// a backslash is the escaped spelling of exactly one name: `c\xfe` (three characters and a
/// backslash, a UTF-8 name) and `c` followed by the byte 0xfe never read the same.
pub fn name(name: &OsStr) -> String {
    match name.to_str() {
        Some(text) if !text.contains('\\') => text.to_owned(),
        _ => os(name),
    }
}

/// One line of the human report: escaped, and cut at [`MAX_LINE_CHARS`] with a note of how many
/// characters were left out.
pub fn line(s: &str) -> String {
    let escaped = escape(s);
    let total = escaped.chars().count();
    if total <= MAX_LINE_CHARS {
        return escaped.into_owned();
    }
    let kept: String = escaped.chars().take(MAX_LINE_CHARS).collect();
    format!(
        "{kept} [... {} more characters: see --json]",
        total - MAX_LINE_CHARS
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forged_line_stays_on_its_own_line() {
        let name = "x\nVERDICT      PASS\r\u{1b}[2K\u{202e}";
        let e = escape(name);
        assert!(
            !e.contains('\n') && !e.contains('\r') && !e.contains('\u{1b}'),
            "{e}"
        );
        assert_eq!(e, "x\\nVERDICT      PASS\\r\\u{1b}[2K\\u{202e}");
        assert_eq!(escape("model.norm.weight"), "model.norm.weight");
        // A backslash is doubled, so an escape cannot be forged either.
        assert_eq!(escape("a\\nb"), "a\\\\nb");
        assert_ne!(escape("a\\nb"), escape("a\nb"));
    }

    #[test]
    fn names_that_are_not_utf8_print_their_bytes() {
        use std::os::unix::ffi::OsStrExt;
        assert_eq!(os(OsStr::from_bytes(b"model\xff.q4nx")), "model\\xff.q4nx");
        assert_ne!(os(OsStr::from_bytes(b"a\xff")), os(OsStr::new("a\u{fffd}")));
    }

    #[test]
    fn names_are_exact_without_a_backslash_and_escaped_with_one() {
        use std::os::unix::ffi::OsStrExt;
        assert_eq!(name(OsStr::new("models/c")), "models/c");
        let byte = name(OsStr::from_bytes(b"c\xfe"));
        let text = name(OsStr::new("c\\xfe"));
        assert_eq!((byte.as_str(), text.as_str()), ("c\\xfe", "c\\\\xfe"));
        assert_ne!(
            name(OsStr::from_bytes(b"c\xfe")),
            name(OsStr::from_bytes(b"c\xff"))
        );
    }

    #[test]
    fn long_lines_are_cut_with_a_count() {
        let long = "n".repeat(MAX_LINE_CHARS + 5);
        let l = line(&long);
        assert!(l.ends_with("[... 5 more characters: see --json]"), "{l}");
        assert_eq!(line("short"), "short");
    }
}
