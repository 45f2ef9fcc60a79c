//! The target's tokenizer and the draft's mask token against it (`target.tokenizer`,
//! `target.mask_token`).

use super::{Draft, Target, MASK, TOKENIZER};
use crate::config::ProblemKind;
use crate::escape;
use crate::evidence::{TargetMaskToken, TargetTokenizer};
use crate::files;
use crate::report::Check;
use std::io;
use std::path::Path;

/// What is at the target's `tokenizer.json`. Told apart so that a tokenizer that is there but cannot
/// be one (a FIFO, a directory) is not reported as absent, and one that could not be examined is
/// UNDECIDED rather than a verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tokenizer {
    /// A regular file (symlinks followed), then read by `crate::tokenizer` into [`Target::tokens`]
    /// (for a GGUF target: its `tokenizer.ggml.tokens` array).
    Present,
    /// Nothing there.
    Absent,
    /// A symbolic link that leads to no file: where it points.
    Dangling(String),
    /// Something other than a regular file: "a directory", "a FIFO", ...
    NotRegular(&'static str),
    /// `stat` failed for another reason (permissions, a loop of symlinks): the error, as text.
    Unexamined(String),
}

impl Tokenizer {
    /// What `target.tokenizer`'s evidence calls it.
    fn token(&self) -> &'static str {
        match self {
            Tokenizer::Present => "present",
            Tokenizer::Absent => "absent",
            Tokenizer::Dangling(_) => "dangling",
            Tokenizer::NotRegular(_) => "not_regular",
            Tokenizer::Unexamined(_) => "unexamined",
        }
    }
}

/// The file `target.tokenizer` looks for: drafts carry no tokenizer and use the target's.
pub const TOKENIZER_FILE: &str = "tokenizer.json";

/// What is at `path`, by `stat` (symlinks followed), before it is opened: only a regular file is then
/// read (`crate::tokenizer::read`); a device or FIFO is never opened only to learn its kind.
pub(super) fn tokenizer_at(path: &Path) -> Tokenizer {
    match std::fs::metadata(path) {
        Ok(meta) => match files::not_regular(meta.file_type()) {
            None => Tokenizer::Present,
            Some(what) => Tokenizer::NotRegular(what),
        },
        // A link that leads nowhere is there, and says where it points: not "no tokenizer.json".
        Err(e) if e.kind() == io::ErrorKind::NotFound => match std::fs::read_link(path) {
            Ok(to) => Tokenizer::Dangling(escape::name(to.as_os_str())),
            Err(_) => Tokenizer::Absent,
        },
        Err(e) => Tokenizer::Unexamined(e.to_string()),
    }
}

pub(super) fn mask(draft: &Draft, target: &Target) -> Check {
    let m = match draft.mask_token_id.clone() {
        Err(p) => {
            return Check::blocked(
                MASK,
                "config.geometry",
                format!("cannot decide: {}", p.needs()),
            )
        }
        Ok(None) => {
            return Check::undecided(
                MASK,
                "cannot decide: the draft's config states no mask_token_id",
            )
        }
        Ok(Some(m)) => m,
    };
    // The target's own vocab_size bounds the token; the draft's stands in only when the target's
    // cannot be read (absent, or of the wrong type), and the message says whose it is and why. A
    // target's vocab_size that is there but zero or negative is a bound no token is below.
    let (v, whose) = match (&target.vocab_size, draft.vocab_size.clone().ok().flatten()) {
        (Ok(v), _) => (*v, "the target's vocab_size".to_owned()),
        (Err(p), _) if p.is_invalid() => {
            return Check::fail(
                MASK,
                format!("mask_token_id {m} cannot be below the target's vocabulary: in the target's config.json, {p}"),
            )
        }
        (Err(p), Some(v)) if p.kind == ProblemKind::Missing => (
            v,
            "the draft's vocab_size (the target's config.json states none)".to_owned(),
        ),
        (Err(p), Some(v)) => (
            v,
            format!("the draft's vocab_size (in the target's config.json, {p})"),
        ),
        (Err(p), None) if p.kind == ProblemKind::Missing => {
            return Check::undecided(
                MASK,
                "cannot decide: neither the target nor the draft states a vocab_size to bound mask_token_id",
            )
        }
        (Err(p), None) => {
            return Check::undecided(
                MASK,
                format!("cannot decide: in the target's config.json, {p}, and the draft states no vocab_size to bound mask_token_id instead"),
            )
        }
    };
    let evidence = TargetMaskToken {
        mask_token_id: m,
        vocab_size: v,
        vocab_size_from: if target.vocab_size.is_ok() {
            "target"
        } else {
            "draft"
        },
    };
    let mut check = if m < v {
        crate::tokenizer::mask_check(MASK, m, &format!("{whose} {v}"), &target.tokens)
    } else {
        Check::fail(MASK, format!("mask_token_id {m} is not below {whose} {v}"))
    };
    let at = draft.read_at("mask");
    if !at.is_empty() {
        check.message = format!("the draft's mask_token_id{at}: {}", check.message);
    }
    check.with_evidence(evidence)
}

pub(super) fn tokenizer(target: &Target) -> Check {
    let evidence = TargetTokenizer {
        tokenizer: target.tokenizer.token(),
    };
    let check = match &target.tokenizer {
        Tokenizer::Present => crate::tokenizer::tokenizer_check(
            TOKENIZER,
            &target.tokens,
            target
                .vocab_size
                .clone()
                .map_err(|p| format!("the target's vocab_size: {p}")),
        ),
        Tokenizer::Absent => Check::fail(
            TOKENIZER,
            "the target has no tokenizer.json: a draft serves with its target's tokenizer, so its own (a GGUF draft carries one) is no stand-in",
        ),
        Tokenizer::Dangling(to) => Check::fail(
            TOKENIZER,
            format!("the target's tokenizer.json is a symbolic link to {to}, which leads to no file: a draft serves with its target's tokenizer, so its own (a GGUF draft carries one) is no stand-in"),
        ),
        Tokenizer::NotRegular(what) => Check::fail(
            TOKENIZER,
            format!("the target's tokenizer.json is {what}, not a regular file: no tokenizer can be read from it, and a draft serves with its target's tokenizer, so its own (a GGUF draft carries one) is no stand-in"),
        ),
        Tokenizer::Unexamined(why) => Check::undecided(
            TOKENIZER,
            format!("cannot decide: the target's tokenizer.json could not be examined: {why}"),
        ),
    };
    check.with_evidence(evidence)
}
