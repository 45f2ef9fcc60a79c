//! The fit report: one draft held to several targets (`--target` given several times, or naming a
//! folder of targets or a hub cache), one row per target: whether the draft fits it and, when not,
//! the first reason. "Which of my targets does this draft fit?" is one run, each target read once.

use dflash_gate::{Options, Outcome, PackageError, ReadTarget, Report};
use std::path::{Path, PathBuf};

/// The widest a row may be: the human report stays within 100 columns; the JSON has every word.
const COLUMNS: usize = 100;

/// The fit table of the draft at `dir` (named `name`) against `targets` (row names and paths, read
/// beforehand into `read`), and its exit status: 0 when it fits one target; else 3 when one could
/// not be decided, else 1; 2 when no target could be read or the draft could not be gated. With
/// `json`, each pair's document (a report naming its target, or the error) joins `documents`.
pub fn report(
    dir: &Path,
    name: &str,
    targets: &[(String, PathBuf)],
    read: &[Result<ReadTarget, PackageError>],
    options: &Options,
    json: bool,
    documents: &mut Vec<serde_json::Value>,
) -> (String, u8) {
    let mut rows = Vec::new();
    let mut codes = Vec::new();
    for ((target_name, target_dir), target) in targets.iter().zip(read) {
        // A target that could not be read is that error for every draft; a draft that could not
        // be gated against a target, its own.
        let gated = target.as_ref().map(|target| {
            dflash_gate::gate(
                dir,
                &options
                    .clone()
                    .with_read_target(target_dir.clone(), target.clone()),
            )
        });
        let answer: Result<&Report, &PackageError> = match &gated {
            Ok(Ok(report)) => Ok(report),
            Ok(Err(e)) => Err(e),
            Err(e) => Err(*e),
        };
        let (fits, why, code) = match answer {
            Ok(report) => row_of(report),
            Err(e) => ("not read", e.to_string(), 2),
        };
        if json {
            documents.push(match answer {
                Ok(report) => report.to_json(),
                Err(e) => dflash_gate::error_json(
                    &dflash_gate::__private::escape::name(dir.as_os_str()),
                    e,
                ),
            });
        }
        codes.push(code);
        rows.push((target_name.as_str(), fits, why));
    }
    let fitting = codes.iter().filter(|c| **c == 0).count();
    let code = if fitting > 0 {
        0
    } else if codes.contains(&3) {
        3
    } else if codes.contains(&1) {
        1
    } else {
        2
    };
    let width = rows
        .iter()
        .map(|(t, ..)| t.chars().count())
        .chain(std::iter::once("TARGET".len()))
        .max()
        .unwrap_or(0);
    let mut text = format!(
        "{}\n",
        dflash_gate::__private::escape::line(&format!(
            "dflash-gate {name}: fits {fitting} of {} {}",
            rows.len(),
            if rows.len() == 1 { "target" } else { "targets" }
        ))
    );
    text.push_str(&format!(
        "  {:<width$}  {:<11}  FIRST REASON\n",
        "TARGET", "FITS"
    ));
    for (target, fits, why) in rows {
        let line = format!("  {target:<width$}  {fits:<11}  {why}");
        let line = dflash_gate::__private::escape::line(&line);
        text.push_str(&cut(&line, COLUMNS));
        text.push('\n');
    }
    (text, code)
}

/// One pair's row: fits or not, the first reason (the first failed check, else the first
/// undecided, as `id: message`), and the pair's exit status.
fn row_of(report: &Report) -> (&'static str, String, u8) {
    let verdict = report.verdict();
    let first = report
        .checks()
        .iter()
        .find(|c| c.outcome() == verdict && verdict != Outcome::Pass);
    let fits = match verdict {
        Outcome::Pass => "yes",
        Outcome::Fail => "no",
        _ => "cannot tell",
    };
    let why = match first {
        Some(c) => format!("{}: {}", c.id(), c.message()),
        None => format!(
            "{} of {} checks passed",
            report.passed(),
            report.checks().len()
        ),
    };
    (fits, why, verdict.exit_code())
}

/// `line` cut to `columns` characters, the cut marked: the JSON keeps the whole reason.
fn cut(line: &str, columns: usize) -> String {
    if line.chars().count() <= columns {
        return line.to_owned();
    }
    let kept: String = line.chars().take(columns - 3).collect();
    format!("{kept}...")
}
