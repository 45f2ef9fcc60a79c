//! llama.cpp's pairing rows held to llama.cpp running a draft with its target. The table's
//! `crashes` rows (`gate/src/loaders/tables/llama_cpp.rs`: the mask under another key, taps past the
//! target's depth, a tap at its last layer, another hidden size, a mask id past the target's vocabulary) and its live-token
//! mask (`loads, wrongly`) show only when the draft drafts, which loading alone never does
//! (`differential::gguf_drafts_against_llama_cpps_loader` prints them and holds nothing of them).
//! Here each pair, a GGUF draft written by its arm's own writer and a Qwen3 target llama.cpp runs
//! (`gate_tests::synth::qwen3`: every tensor, seeded random weights, a byte-fallback vocabulary), is
//! gated by the library with `--target`, and run by llama.cpp's `llama-speculative-simple` for a few
//! tokens on the CPU, killed after a minute. Two things must hold:
//!
//! - where the table says llama.cpp `crashes`, the run ends without completing and its stderr holds
//!   llama.cpp's own words for that row (a `GGML_ASSERT`, a `GGML_ABORT` or an error line), words the
//!   row quotes;
//! - where it says llama.cpp `loads` or `loads, wrongly`, the run completes (exit 0), the draft
//!   having proposed tokens (its `n_drafted`).
//!
//! A run that outlives the minute, one that completes without drafting, or a pair whose llama.cpp
//! verdict the gate cannot tell, is `cannot tell`, counted and printed. Every pair is printed: the gate's verdict, the table's, what the run did
//! and the line that says so, and the counts.
//!
//! Needs `llama-speculative-simple` built from the release the table was read from, named by
//! `DFLASH_GATE_LLAMA_CPP_SPECULATIVE` (CONTRIBUTING.md); without it the trial is listed as ignored,
//! with the reason in its name.

use super::llama_cpp::the_gguf;
use dflash_gate::{gate, Engine, LoaderOutcome, LoaderVerdict, Options, Outcome, Report};
use gate_tests::arms::gguf_draft;
use gate_tests::synth::qwen3::Qwen3Target;
use gate_tests::synth::Geometry;
use libtest_mimic::{Failed, Trial};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const SPECULATIVE_VAR: &str = "DFLASH_GATE_LLAMA_CPP_SPECULATIVE";
const NAME: &str = "differential::gguf_pairs_against_llama_cpps_speculative_decoding";

/// How long one run may take before it is killed and counted `cannot tell`.
const BOUND: Duration = Duration::from_secs(60);

/// The seed of the targets' weights.
const TARGET_SEED: u64 = 48;

/// What llama.cpp writes to stderr when each `crashes` row meets, as the row's words quote it.
const SAYS: &[(&str, &str)] = &[
    ("mask_key", "get_sub_batch: failed to add embedding"),
    (
        "taps_beyond_the_target",
        "GGML_ASSERT(lid <= model.hparams.n_layer()) failed",
    ),
    (
        "tap_at_the_targets_last_layer",
        "GGML_ASSERT(t_layer_inp[il] != nullptr && \"layer input tensor is null\") failed",
    ),
    (
        "hidden_size_of_the_target",
        "GGML_ASSERT(ggml_can_mul_mat(a, b)) failed",
    ),
    (
        "mask_id_outside_the_target_vocab",
        "GGML_ASSERT(i01 >= 0 && i01 < ne01)",
    ),
];

/// One pair: a name, the draft arm, and how the target departs from the one the draft is made for.
struct Pair {
    name: &'static str,
    draft: &'static str,
    target: fn(&mut Qwen3Target),
}

const FAITHFUL: &str = "gguf_draft::pass::faithful";

fn pairs() -> Vec<Pair> {
    vec![
        Pair {
            name: "faithful",
            draft: FAITHFUL,
            target: |_| {},
        },
        Pair {
            name: "mask_under_the_older_key_only",
            draft: "gguf_draft::control::mask_under_the_older_key_only",
            target: |_| {},
        },
        Pair {
            name: "mask_token_id_absent",
            draft: "gguf_draft::control::mask_token_id_absent",
            target: |_| {},
        },
        // The small draft's deepest tap is HF layer 5 (dflash.target_layers 6): a target of seven
        // layers runs it, one of five asserts. One of six, the tap its last layer's output, passes
        // lid <= n_layer and aborts at the first prefill: a Qwen3 graph records no input past its
        // last layer (GGML_ASSERT t_layer_inp[il] != nullptr in src/llama-graph.cpp).
        Pair {
            name: "deepest_tap_below_the_last_layer",
            draft: FAITHFUL,
            target: |t| t.layers = 7,
        },
        Pair {
            name: "deepest_tap_at_the_last_layer",
            draft: FAITHFUL,
            target: |t| t.layers = 6,
        },
        Pair {
            name: "deepest_tap_past_the_last_layer",
            draft: FAITHFUL,
            target: |t| t.layers = 5,
        },
        Pair {
            name: "hidden_differs",
            draft: FAITHFUL,
            target: |t| t.hidden = 512,
        },
        // The mask id is 999: the last row of a vocabulary of 1000, one past a vocabulary of 999.
        Pair {
            name: "mask_past_the_target_vocab",
            draft: FAITHFUL,
            target: |t| {
                t.vocab = 999;
                t.mask_row = None;
            },
        },
        Pair {
            name: "mask_is_a_live_token",
            draft: "gguf_draft::control::mask_is_a_normal_token",
            target: |t| t.mask_row = None,
        },
    ]
}

pub fn trials() -> Vec<Trial> {
    match std::env::var_os(SPECULATIVE_VAR) {
        Some(binary) => vec![Trial::test(NAME, move || {
            against_speculative_decoding(Path::new(&binary)).map_err(Failed::from)
        })],
        None => vec![
            Trial::test(format!("{NAME}_needs_{SPECULATIVE_VAR}"), || Ok(()))
                .with_ignored_flag(true),
        ],
    }
}

/// What one run of `llama-speculative-simple` did.
enum Run {
    /// It decided every token it was asked for and exited 0, the draft having proposed this many
    /// tokens (its `n_drafted` line; `None` when it printed none).
    Completed(Option<u64>),
    /// It ended otherwise: its status and the line of stderr that says why.
    Ended(ExitStatus, String),
    /// It outlived [`BOUND`] and was killed.
    TimedOut,
}

impl Run {
    fn label(&self) -> String {
        match self {
            Run::Completed(Some(n)) => format!("completed, {n} drafted"),
            Run::Completed(None) => "completed".to_owned(),
            Run::Ended(status, _) => match status.code() {
                Some(code) => format!("exit {code}"),
                None => signal(status),
            },
            Run::TimedOut => format!("ran past {}s", BOUND.as_secs()),
        }
    }
}

#[cfg(unix)]
fn signal(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(6) => "aborted (SIGABRT)".to_owned(),
        Some(11) => "crashed (SIGSEGV)".to_owned(),
        Some(s) => format!("killed by signal {s}"),
        None => "killed by a signal".to_owned(),
    }
}

#[cfg(not(unix))]
fn signal(_: &ExitStatus) -> String {
    "killed by a signal".to_owned()
}

/// How a pair's run stands against the table.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stand {
    Agree,
    Disagree,
    CannotTell,
}

fn against_speculative_decoding(binary: &Path) -> Result<(), String> {
    if !binary.is_file() {
        return Err(format!(
            "{SPECULATIVE_VAR}={}: no such file (CONTRIBUTING.md says how to build llama-speculative-simple)",
            binary.display()
        ));
    }
    for (rule, quote) in SAYS {
        let words = rule_words(rule)?;
        if !words.contains(quote) {
            return Err(format!(
                "llama.cpp's table row {rule} does not quote what llama.cpp says ({quote:?}): {words}"
            ));
        }
    }
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    let mut counts = [0usize; 3];
    for (i, pair) in pairs().iter().enumerate() {
        let root = work.path().join(format!("pair{i}"));
        let path = gguf_draft::write_named(pair.draft, &root)?;
        let draft = the_gguf(&path).ok_or(format!("{}: the arm placed no GGUF", pair.draft))?;
        let mut shape = Qwen3Target::matching(&Geometry::small());
        (pair.target)(&mut shape);
        let target = root.join("target.gguf");
        std::fs::write(&target, shape.gguf(TARGET_SEED).bytes()).map_err(|e| e.to_string())?;

        let report = gate(&path, &Options::default().with_target(&target));
        let verdict = report.as_ref().ok().and_then(|r| {
            r.loaders()
                .iter()
                .find(|v| v.engine == Engine::LlamaCpp)
                .cloned()
        });
        let run = run(binary, &target, &draft, &root)?;
        let (stand, why) = judge(verdict.as_ref(), &run);
        counts[stand as usize] += 1;
        let gate_says = match &report {
            Ok(r) => gate_line(r),
            Err(e) => format!("exit 2: {e}"),
        };
        let table_says = verdict.as_ref().map_or("-".to_owned(), |v| {
            let rules: Vec<_> = v.reasons.iter().map(|r| r.rule).collect();
            match v.outcome {
                _ if rules.is_empty() => v.outcome.to_string(),
                LoaderOutcome::Undecided => format!("{} ({} rows)", v.outcome, rules.len()),
                _ => format!("{} ({})", v.outcome, rules.join(", ")),
            }
        });
        let said = match &run {
            Run::Ended(_, line) => line.clone(),
            Run::Completed(_) | Run::TimedOut => String::new(),
        };
        if stand == Stand::Disagree {
            failures.push(format!(
                "{}: {why}\n  the gate: {gate_says}\n  the table: {table_says}\n  llama.cpp: {}: {said}",
                pair.name,
                run.label()
            ));
        }
        rows.push([
            pair.name.to_owned(),
            gate_says,
            table_says,
            run.label(),
            match stand {
                Stand::Agree => "agree",
                Stand::Disagree => "DISAGREE",
                Stand::CannotTell => "cannot tell",
            }
            .to_owned(),
            said,
        ]);
    }
    print_table(&rows, counts);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} pairs: llama.cpp's speculative decoding disagrees with its table:\n{}",
            failures.len(),
            rows.len(),
            failures.join("\n")
        ))
    }
}

/// The words of llama.cpp's table row `rule`.
fn rule_words(rule: &str) -> Result<&'static str, String> {
    dflash_gate::__private::loaders::TABLES
        .iter()
        .filter(|t| t.engine == Engine::LlamaCpp)
        .flat_map(|t| t.rules.iter())
        .find(|r| r.id == rule)
        .map(|r| r.words)
        .ok_or(format!("llama.cpp's table has no row {rule}"))
}

/// Whether the run bears the table out, and if not, why.
fn judge(table: Option<&LoaderVerdict>, run: &Run) -> (Stand, String) {
    let Some(table) = table else {
        return (
            Stand::CannotTell,
            "the gate gave no llama.cpp verdict".into(),
        );
    };
    if matches!(run, Run::TimedOut) {
        return (Stand::CannotTell, "the run outlived its bound".into());
    }
    match (table.outcome, run) {
        // A run that never drafted has not shown the draft served.
        (LoaderOutcome::Loads | LoaderOutcome::LoadsWrongly, Run::Completed(drafted)) => {
            match drafted {
                Some(n) if *n > 0 => (Stand::Agree, String::new()),
                _ => (
                    Stand::CannotTell,
                    "the run completed without drafting".into(),
                ),
            }
        }
        (LoaderOutcome::Loads | LoaderOutcome::LoadsWrongly, _) => (
            Stand::Disagree,
            format!(
                "the table says llama.cpp {}, the run did not complete",
                table.outcome
            ),
        ),
        (LoaderOutcome::Crashes, Run::Ended(_, _)) => {
            let crashes: Vec<_> = table
                .reasons
                .iter()
                .filter(|r| r.outcome == LoaderOutcome::Crashes)
                .collect();
            let Run::Ended(_, line) = run else {
                unreachable!()
            };
            let quoted = crashes.iter().find_map(|r| {
                SAYS.iter()
                    .find(|(rule, _)| *rule == r.rule)
                    .filter(|(_, quote)| line.contains(quote))
            });
            match quoted {
                Some(_) => (Stand::Agree, String::new()),
                None => {
                    let rules: Vec<_> = crashes.iter().map(|r| r.rule).collect();
                    (
                        Stand::Disagree,
                        format!(
                            "the run ended, but not in the words of {} ({})",
                            rules.join(", "),
                            rules
                                .iter()
                                .filter_map(|r| SAYS.iter().find(|(id, _)| id == r))
                                .map(|(_, q)| format!("{q:?}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )
                }
            }
        }
        (LoaderOutcome::Crashes, _) => (
            Stand::Disagree,
            "the table says llama.cpp crashes, the run completed".into(),
        ),
        (LoaderOutcome::Refuses, Run::Ended(_, _)) => (Stand::Agree, String::new()),
        (LoaderOutcome::Refuses, _) => (
            Stand::Disagree,
            "the table says llama.cpp refuses, the run completed".into(),
        ),
        (outcome, _) => (Stand::CannotTell, format!("the table says {outcome}")),
    }
}

/// The gate's verdict and its first objection, short.
fn gate_line(report: &Report) -> String {
    let first = report
        .checks()
        .iter()
        .find(|c| c.outcome() != Outcome::Pass)
        .map(|c| format!(" ({})", c.id()));
    format!("{}{}", report.verdict().label(), first.unwrap_or_default())
}

/// Runs the target and the draft together for a few tokens on the CPU, bounded in time.
fn run(binary: &Path, target: &Path, draft: &Path, work: &Path) -> Result<Run, String> {
    let (out, err) = (work.join("stdout"), work.join("stderr"));
    let file = |p: &PathBuf| std::fs::File::create(p).map_err(|e| e.to_string());
    let mut child = Command::new(binary)
        .arg("-m")
        .arg(target)
        .arg("-md")
        .arg(draft)
        .args(["--spec-type", "draft-dflash", "--spec-draft-n-max", "7"])
        .args(["-p", "hello world", "-n", "8", "-c", "256"])
        .args(["--temp", "0", "--top-k", "1", "--seed", "42", "-t", "2"])
        .args(["-ngl", "0", "-ngld", "0"])
        .env("GGML_NO_BACKTRACE", "1")
        .stdin(Stdio::null())
        .stdout(file(&out)?)
        .stderr(file(&err)?)
        .spawn()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if start.elapsed() > BOUND {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(Run::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = String::from_utf8_lossy(&std::fs::read(&err).unwrap_or_default()).into_owned();
    if status.success() {
        // speculative-simple's summary: `n_drafted = 7`.
        let drafted = stderr.lines().find_map(|l| {
            let (_, n) = l.split_once("n_drafted = ")?;
            n.trim().parse().ok()
        });
        return Ok(Run::Completed(drafted));
    }
    Ok(Run::Ended(status, why(&stderr)))
}

/// The line of stderr that says why a run ended: the first that holds a row's quote, else the first
/// assertion, abort or uncaught exception, else the last line. (A generic `failed` line is no
/// guide: llama.cpp logs one at error level while fitting memory, on every DFlash run.)
fn why(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let pick = lines
        .iter()
        .find(|l| SAYS.iter().any(|(_, q)| l.contains(q)))
        .or_else(|| {
            lines.iter().find(|l| {
                ["GGML_ASSERT", "GGML_ABORT", "terminate called"]
                    .iter()
                    .any(|w| l.contains(w))
            })
        })
        .or(lines.last());
    pick.map_or(String::new(), |l| l.trim().to_owned())
}

#[allow(clippy::print_stdout)]
fn print_table(rows: &[[String; 6]], counts: [usize; 3]) {
    let header = [
        "pair",
        "gate",
        "llama.cpp's table",
        "speculative-simple",
        "",
        "its line",
    ];
    let widths: Vec<usize> = (0..5)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in std::iter::once(header.map(str::to_owned)).chain(rows.iter().cloned()) {
        let mut line = String::new();
        for (cell, w) in row.iter().zip(&widths) {
            line.push_str(&format!("{cell:<w$}  "));
        }
        line.push_str(&row[5]);
        println!("{}", line.trim_end());
    }
    println!(
        "agree {}, disagree {}, cannot tell {}",
        counts[Stand::Agree as usize],
        counts[Stand::Disagree as usize],
        counts[Stand::CannotTell as usize]
    );
}
