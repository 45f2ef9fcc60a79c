//! The gate's GGUF verdicts held to llama.cpp's own model loader. Every GGUF draft arm
//! (`arms::gguf_draft::*`) is written by the arm's own writer, gated by the library, and loaded by
//! `llama_model_load_from_file` with default parameters on the CPU (`tests/differential/llama_load.c`,
//! compiled here against a llama.cpp built beforehand). Three things must hold:
//!
//! - a draft the gate PASSes, llama.cpp loads;
//! - a draft llama.cpp's table (`gate/src/loaders/tables/llama_cpp.rs`) says it `refuses` by a
//!   load-time rule (`tensor_missing`, `tensor_shape`, `fc_shape`, `second_family_metadata`,
//!   `tensor_count`), its loader
//!   refuses, and its error line holds every fixed piece of the rule's words, in order (the words
//!   between the `...` placeholders: `check_tensor_dims: tensor '` and `' not found`);
//! - a draft the table says it `loads` or `loads, wrongly`, its loader loads.
//!
//! The table's `crashes` rows (the mask under another key, taps past the target, another hidden
//! size, a mask past the target's vocabulary) abort at the first draft or prefill, not in the loader:
//! loading alone cannot show them, so they are printed and not held here
//! (`differential::gguf_pairs_against_llama_cpps_speculative_decoding` holds them, `llama_cpp_pairs.rs`). Nor are `cannot tell` and
//! `not its form`, nor the arms the gate gives no report (exit 2: a shard, a directory it does not
//! pick from). Every arm is printed in one table: the gate's verdict, the table's, what the loader
//! did and its message.
//!
//! Needs llama.cpp's `llama` library, built from the release the table was read from, in a directory
//! named by `DFLASH_GATE_LLAMA_CPP` (CONTRIBUTING.md): `include/` holding `llama.h` and ggml's
//! headers, `lib/` holding `libllama` and the ggml libraries it links. The trial compiles the loader
//! with `cc` and never builds llama.cpp; without the variable it is listed as ignored, with the
//! reason in its name.

use dflash_gate::{gate, Engine, LoaderOutcome, LoaderVerdict, Options, Outcome};
use gate_tests::arms::gguf_draft;
use libtest_mimic::{Failed, Trial};
use std::path::{Path, PathBuf};
use std::process::Command;

pub const LLAMA_CPP_VAR: &str = "DFLASH_GATE_LLAMA_CPP";
const NAME: &str = "differential::gguf_drafts_against_llama_cpps_loader";

/// The table's rules llama.cpp's loader applies while loading: the ones loading alone can show.
const LOAD_TIME: &[&str] = &[
    "tensor_missing",
    "tensor_shape",
    "fc_shape",
    "second_family_metadata",
    "tensor_count",
];

pub fn trials() -> Vec<Trial> {
    match std::env::var_os(LLAMA_CPP_VAR) {
        Some(dir) => vec![Trial::test(NAME, move || {
            against_the_loader(Path::new(&dir)).map_err(Failed::from)
        })],
        None => vec![
            Trial::test(format!("{NAME}_needs_{LLAMA_CPP_VAR}"), || Ok(())).with_ignored_flag(true),
        ],
    }
}

/// What llama.cpp's loader did with one file.
enum Deed {
    Loaded,
    /// It refused, with its last error line.
    Refused(String),
    /// The process died before it could say (a GGML_ASSERT), with what it wrote to stderr.
    Aborted(String),
    /// The arm placed no file for it to load.
    NoFile,
}

impl Deed {
    fn label(&self) -> &'static str {
        match self {
            Deed::Loaded => "loaded",
            Deed::Refused(_) => "refused",
            Deed::Aborted(_) => "aborted",
            Deed::NoFile => "no file",
        }
    }

    fn message(&self) -> &str {
        match self {
            Deed::Refused(m) | Deed::Aborted(m) => m,
            Deed::Loaded | Deed::NoFile => "",
        }
    }
}

fn against_the_loader(dir: &Path) -> Result<(), String> {
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let loader = compile(dir, work.path())?;
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for name in gguf_draft::names() {
        let root = work.path().join(format!("arm{}", rows.len()));
        let path = gguf_draft::write_named(name, &root)?;
        let report = gate(&path, &Options::default());
        let verdict = report.as_ref().ok().and_then(|r| {
            r.loaders()
                .iter()
                .find(|v| v.engine == Engine::LlamaCpp)
                .cloned()
        });
        let loaded = load(&loader, &the_gguf(&path))?;
        let gate_says = match &report {
            Ok(r) => r.verdict().label().to_owned(),
            Err(_) => "exit 2".to_owned(),
        };
        let table_says = verdict
            .as_ref()
            .map_or("-".to_owned(), |v| match v.reasons.first() {
                Some(r) => format!("{} ({})", v.outcome, r.rule),
                None => v.outcome.to_string(),
            });
        if let Some(why) = disagreement(
            report.as_ref().ok().map(|r| r.verdict()),
            verdict.as_ref(),
            &loaded,
        ) {
            let gate_message = match &report {
                Ok(r) => first_failure(r),
                Err(e) => e.to_string(),
            };
            failures.push(format!(
                "{name}: {why}\n  the gate: {gate_says}: {gate_message}\n  the table: {table_says}\n  llama.cpp: {}: {}",
                loaded.label(),
                loaded.message()
            ));
        }
        rows.push([
            name.trim_start_matches("gguf_draft::").to_owned(),
            gate_says,
            table_says,
            loaded.label().to_owned(),
            loaded.message().to_owned(),
        ]);
    }
    print_table(&rows);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} GGUF arms: llama.cpp's loader disagrees with the gate or its table:\n{}",
            failures.len(),
            rows.len(),
            failures.join("\n")
        ))
    }
}

/// Why the loader's deed contradicts the gate's verdict or the table's, if it does.
fn disagreement(
    gate_says: Option<Outcome>,
    table: Option<&LoaderVerdict>,
    loaded: &Deed,
) -> Option<String> {
    if matches!(loaded, Deed::NoFile) {
        return None;
    }
    let loads = matches!(loaded, Deed::Loaded);
    if gate_says == Some(Outcome::Pass) && !loads {
        return Some("the gate passes it, llama.cpp's loader does not load it".into());
    }
    let table = table?;
    match table.outcome {
        LoaderOutcome::Loads | LoaderOutcome::LoadsWrongly if !loads => Some(format!(
            "the table says llama.cpp {}, its loader does not load it",
            table.outcome
        )),
        LoaderOutcome::Refuses => {
            let load_time: Vec<_> = table
                .reasons
                .iter()
                .filter(|r| r.outcome == LoaderOutcome::Refuses && LOAD_TIME.contains(&r.rule))
                .collect();
            if load_time.is_empty() {
                return None;
            }
            let Deed::Refused(line) = loaded else {
                return Some(format!(
                    "the table says llama.cpp refuses ({}), its loader {}",
                    load_time[0].rule,
                    loaded.label()
                ));
            };
            if load_time.iter().any(|r| in_order(r.words, line)) {
                return None;
            }
            let words: Vec<_> = load_time
                .iter()
                .map(|r| format!("{}: {}", r.rule, r.words))
                .collect();
            Some(format!(
                "llama.cpp's loader refuses, not in the table's words ({})",
                words.join("; ")
            ))
        }
        _ => None,
    }
}

/// Whether `line` holds every fixed piece of `words` (the text between its `...` placeholders), in
/// order.
fn in_order(words: &str, line: &str) -> bool {
    let mut rest = line;
    for piece in words.split("...").map(str::trim).filter(|p| !p.is_empty()) {
        let piece = piece.trim_matches('\'').trim();
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

/// The first failing check's evidence, for a failure message that shows the gate's side.
fn first_failure(report: &dflash_gate::Report) -> String {
    report
        .checks()
        .iter()
        .find(|c| c.outcome() != Outcome::Pass)
        .map_or_else(
            || "every check passed".to_owned(),
            |c| format!("{} {}: {}", c.id(), c.outcome().label(), c.message()),
        )
}

/// The file llama.cpp is given for a gated path: the path itself, or a directory's `draft.gguf`.
pub(super) fn the_gguf(path: &Path) -> Option<PathBuf> {
    if path.is_file() {
        return Some(path.to_owned());
    }
    let file = path.join("draft.gguf");
    file.is_file().then_some(file)
}

/// Compiles `tests/differential/llama_load.c` against the llama.cpp in `dir`.
fn compile(dir: &Path, work: &Path) -> Result<PathBuf, String> {
    let (include, lib) = (dir.join("include"), dir.join("lib"));
    if !include.join("llama.h").is_file() || !include.join("ggml.h").is_file() {
        return Err(format!(
            "{LLAMA_CPP_VAR}={}: no include/llama.h and include/ggml.h (CONTRIBUTING.md says what the directory holds)",
            dir.display()
        ));
    }
    let source =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/differential/llama_load.c");
    let out = work.join("llama_load");
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let status = Command::new(&cc)
        .arg(&source)
        .arg("-I")
        .arg(&include)
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lllama")
        .arg("-o")
        .arg(&out)
        .output()
        .map_err(|e| format!("{}: {e}", cc.to_string_lossy()))?;
    if !status.status.success() {
        return Err(format!(
            "llama_load.c does not build against {}: {}",
            dir.display(),
            String::from_utf8_lossy(&status.stderr)
        ));
    }
    Ok(out)
}

/// Loads `file` with llama.cpp's loader: what it did.
fn load(loader: &Path, file: &Option<PathBuf>) -> Result<Deed, String> {
    let Some(file) = file else {
        return Ok(Deed::NoFile);
    };
    // An abort prints its assertion, then a backtrace through gdb where one is installed: the
    // assertion is what the table shows.
    let out = Command::new(loader)
        .arg(file)
        .env("GGML_NO_BACKTRACE", "1")
        .output()
        .map_err(|e| format!("{}: {e}", loader.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find(|l| l.starts_with('{'));
    let (true, Some(line)) = (out.status.success(), line) else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = stderr
            .lines()
            .find(|l| l.contains("GGML_ASSERT") || l.contains("terminate called"))
            .or_else(|| stderr.lines().rev().find(|l| !l.trim().is_empty()))
            .unwrap_or("");
        return Ok(Deed::Aborted(format!("{}: {said}", out.status)));
    };
    let said: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("llama_load said {line:?}: {e}"))?;
    let error = said["error"].as_str().unwrap_or_default().to_owned();
    Ok(match said["loaded"].as_bool() {
        Some(true) => Deed::Loaded,
        Some(false) => Deed::Refused(error),
        None => return Err(format!("llama_load said {line:?}")),
    })
}

#[allow(clippy::print_stdout)]
fn print_table(rows: &[[String; 5]]) {
    let header = ["arm", "gate", "llama.cpp's table", "loader", "its message"];
    let widths: Vec<usize> = (0..4)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in std::iter::once(header.map(str::to_owned)).chain(rows.iter().cloned()) {
        println!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3]
        );
    }
}
