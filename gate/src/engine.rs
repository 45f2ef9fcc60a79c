//! The engines that serve a draft, and what one would do with it (spec 19): the words the report
//! prints and a loader branches on. They live below the report; the rule tables that decide them
//! (`loaders/`) read the whole evaluation and so sit above it.

use serde::{Serialize, Serializer};
use std::fmt;

/// An engine that loads DFlash drafts, as `--loader` and the report's `loaders` section name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Engine {
    /// vLLM (a z-lab folder, and the speculators format its training writes).
    Vllm,
    /// SGLang.
    Sglang,
    /// llama.cpp (a GGUF file).
    LlamaCpp,
    /// Hugging Face Transformers, through z-lab's `dflash` package.
    Transformers,
    /// MLX, through z-lab's `model_mlx.py`.
    Mlx,
    /// MLX, through the `dflash-mlx` package.
    DflashMlx,
}

impl Engine {
    /// Every engine, in the order the report lists them.
    pub const ALL: [Engine; 6] = [
        Engine::Vllm,
        Engine::Sglang,
        Engine::LlamaCpp,
        Engine::Transformers,
        Engine::Mlx,
        Engine::DflashMlx,
    ];

    /// The name `--loader` takes and the JSON document carries.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::LlamaCpp => "llama.cpp",
            Engine::Transformers => "transformers",
            Engine::Mlx => "mlx",
            Engine::DflashMlx => "dflash-mlx",
        }
    }

    /// The engine `name` names (as [`Engine::name`] spells it, any case), if any.
    pub fn from_name(name: &str) -> Option<Engine> {
        Engine::ALL
            .into_iter()
            .find(|e| e.name().eq_ignore_ascii_case(name))
    }

    /// The id of the check `--loader NAME` adds for it.
    pub fn check_id(self) -> &'static str {
        use crate::check_id::CheckId;
        match self {
            Engine::Vllm => CheckId::LOADER_VLLM,
            Engine::Sglang => CheckId::LOADER_SGLANG,
            Engine::LlamaCpp => CheckId::LOADER_LLAMA_CPP,
            Engine::Transformers => CheckId::LOADER_TRANSFORMERS,
            Engine::Mlx => CheckId::LOADER_MLX,
            Engine::DflashMlx => CheckId::LOADER_DFLASH_MLX,
        }
    }

    /// Every name, for a refusal of an unknown one.
    pub fn names() -> String {
        Engine::ALL.map(Engine::name).join(", ")
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Engine {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// What an engine would do with the draft, by the rules read from its code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LoaderOutcome {
    /// Nothing the engine's code refuses or mishandles was found.
    Loads,
    /// It loads the draft and serves it wrong without an error.
    LoadsWrongly,
    /// The gate could not tell: a fact one of the engine's rules reads was not decided (the check
    /// that decides it did not run). Never read as `loads`.
    Undecided,
    /// The engine's own check stops it, with its message.
    Refuses,
    /// The engine aborts (an assertion) instead of refusing.
    Crashes,
    /// The engine does not read this form at all.
    NotItsForm,
}

impl LoaderOutcome {
    /// The words of the human report.
    pub fn label(self) -> &'static str {
        match self {
            LoaderOutcome::Loads => "loads",
            LoaderOutcome::LoadsWrongly => "loads, wrongly",
            LoaderOutcome::Undecided => "cannot tell",
            LoaderOutcome::Refuses => "refuses",
            LoaderOutcome::Crashes => "crashes",
            LoaderOutcome::NotItsForm => "not its form",
        }
    }

    /// Whether the engine stops here (a refusal, an abort, or a form it does not serve): the rules
    /// after it are never reached.
    pub fn stops(self) -> bool {
        matches!(
            self,
            LoaderOutcome::Refuses | LoaderOutcome::Crashes | LoaderOutcome::NotItsForm
        )
    }

    /// Whether the engine meets a defect of the draft and will not serve it: a refusal or an abort.
    /// The gate never passes such a draft. `not its form` is not one: the engine does not serve that
    /// form, schema or variant at all, however faithful the draft.
    pub fn refuses_a_defect(self) -> bool {
        matches!(self, LoaderOutcome::Refuses | LoaderOutcome::Crashes)
    }
}

impl fmt::Display for LoaderOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One rule of an engine's table that met the draft: which rule, what it reads, what the engine
/// does, in its own words where it has any, where in its code, and what in this draft met it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LoaderReason {
    /// The rule's id in its table (`mask_token_id_required`).
    pub rule: &'static str,
    /// The config field or tensor the rule reads.
    pub reads: &'static str,
    /// What the engine does when the rule meets (for `undecided`, what the rule would have done).
    pub outcome: LoaderOutcome,
    /// The engine's own words (its exception or message), or why it serves the draft wrong.
    pub words: &'static str,
    /// The engine's source file the rule was read from, with its function.
    pub source: &'static str,
    /// What in this draft met the rule (a tensor's name, a field's value), or why the gate could
    /// not tell.
    pub found: String,
}

/// One engine's verdict on the draft.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LoaderVerdict {
    pub engine: Engine,
    /// The release the rules were read from.
    pub version: &'static str,
    pub outcome: LoaderOutcome,
    /// The rules that met, the one that stops the engine first; empty for `loads`.
    pub reasons: Vec<LoaderReason>,
}

impl LoaderVerdict {
    /// The human report's line for it, within 100 columns: the engine, its version, the
    /// outcome and the first reason; the JSON document has them all.
    pub fn line(&self) -> String {
        let head = format!(
            "loader       {:<26} {}",
            format!("{} {}", self.engine, self.version),
            self.outcome
        );
        let Some(first) = self.reasons.first() else {
            return head;
        };
        let more = match self.reasons.len() {
            1 => String::new(),
            n => format!(" (+{} more)", n - 1),
        };
        let text = format!("{head}: {}: {}", first.found, first.words);
        clip(&text, LINE_COLUMNS - more.chars().count()) + &more
    }
}

/// How wide a loader line of the human report may be.
pub const LINE_COLUMNS: usize = 100;

/// `text` cut to `columns` characters, ending in `...` when it was cut.
fn clip(text: &str, columns: usize) -> String {
    if text.chars().count() <= columns {
        return text.to_owned();
    }
    let kept: String = text.chars().take(columns.saturating_sub(3)).collect();
    format!("{}...", kept.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_is_none() {
        for e in Engine::ALL {
            assert_eq!(Engine::from_name(e.name()), Some(e));
            assert_eq!(Engine::from_name(&e.name().to_uppercase()), Some(e));
        }
        assert_eq!(Engine::from_name("vllm2"), None);
        assert_eq!(Engine::from_name(""), None);
    }

    #[test]
    fn a_line_stays_within_its_columns() {
        let reason = LoaderReason {
            rule: "r",
            reads: "x",
            outcome: LoaderOutcome::Refuses,
            words: "a very long message from the engine that goes on and on and on and on and on and on and on",
            source: "s",
            found: "the tensor fc.weight_packed".to_owned(),
        };
        let verdict = LoaderVerdict {
            engine: Engine::DflashMlx,
            version: "0.1.8",
            outcome: LoaderOutcome::Refuses,
            reasons: vec![reason.clone(), reason],
        };
        let line = verdict.line();
        assert!(line.chars().count() <= LINE_COLUMNS, "{line}");
        assert!(line.ends_with("... (+1 more)"), "{line}");
        let alone = LoaderVerdict {
            reasons: Vec::new(),
            outcome: LoaderOutcome::Loads,
            ..verdict
        };
        assert!(alone.line().ends_with("loads"), "{}", alone.line());
    }
}
