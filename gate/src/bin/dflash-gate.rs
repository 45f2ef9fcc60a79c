//! `dflash-gate <dir>... [--json] [--census] [--target DIR] [--manifest] [--all MODELS]`.
//!
//! Exit status: 0 every check passed, 1 a check failed, 3 nothing failed but something was
//! undecided, 2 a usage error or an unreadable path. With several packages, the worst of them.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use gate::{Options, Outcome, Report};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: dflash-gate <package-dir>... [options]

Gates DFlash draft packages (config.json + one Q4NX weight file), fail-closed.
  --json          print one JSON document (an array when several packages are gated)
  --census        list every tensor in the human report
  --target DIR    also check the draft against this target package (target.* checks)
  --manifest      also verify MANIFEST.sha256 (manifest.sha256)
  --all DIR       gate every package directory (one holding config.json) directly under DIR
  --full          with several packages, print every report instead of one line each
exit status: 0 pass, 1 fail, 3 undecided, 2 usage error or unreadable path (worst of several)";

struct Args {
    dirs: Vec<PathBuf>,
    json: bool,
    census: bool,
    full: bool,
    options: Options,
}

fn parse_args(raw: Vec<std::ffi::OsString>) -> Result<Args, String> {
    let mut args = Args {
        dirs: Vec::new(),
        json: false,
        census: false,
        full: false,
        options: Options::default(),
    };
    let mut raw = raw.into_iter();
    while let Some(arg) = raw.next() {
        match arg.to_str() {
            Some("--json") => args.json = true,
            Some("--census") => args.census = true,
            Some("--full") => args.full = true,
            Some("--manifest") => args.options.manifest = true,
            Some("-h" | "--help") => return Err(String::new()),
            Some("--target") => {
                let dir = raw.next().ok_or("--target needs a directory")?;
                args.options.target = Some(PathBuf::from(dir));
            }
            Some("--all") => {
                let models = PathBuf::from(raw.next().ok_or("--all needs a directory")?);
                args.dirs.extend(packages_under(&models)?);
            }
            Some(s) if s.starts_with('-') => return Err(format!("unknown option {s}")),
            _ => args.dirs.push(PathBuf::from(arg)),
        }
    }
    if args.dirs.is_empty() {
        return Err("no package directory given".to_owned());
    }
    Ok(args)
}

/// Every directory directly under `models` that holds a config.json, sorted.
fn packages_under(models: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(models).map_err(|e| format!("{}: {e}", models.display()))?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("config.json").is_file())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err(format!(
            "{}: no package directory (with a config.json) under it",
            models.display()
        ));
    }
    Ok(dirs)
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args_os().skip(1).collect()) {
        Ok(a) => a,
        Err(why) => {
            if !why.is_empty() {
                eprintln!("dflash-gate: {why}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let many = args.dirs.len() > 1;
    let mut worst = 0u8;
    let mut documents = Vec::new();
    let mut counts = [0usize; 4];
    let mut out = io::stdout().lock();
    for dir in &args.dirs {
        let (code, text) = match gate::gate(dir, &args.options) {
            Ok(report) => {
                let code = report.verdict().exit_code();
                if args.json {
                    documents.push(report.to_json());
                }
                (
                    code,
                    if many && !args.full {
                        verdict_line(&report)
                    } else {
                        report.to_text(args.census)
                    },
                )
            }
            Err(e) => {
                eprintln!("dflash-gate: {e}");
                if args.json {
                    documents.push(serde_json::json!({ "package": dir.to_string_lossy(), "error": e.to_string() }));
                }
                (2, format!("ERROR      {}  {e}\n", dir.display()))
            }
        };
        counts[usize::from(code)] += 1;
        worst = worse(worst, code);
        if !args.json && (many || code != 2) && write!(out, "{text}").is_err() {
            return ExitCode::from(worst);
        }
    }
    if args.json {
        let doc = if many {
            serde_json::Value::Array(documents)
        } else {
            documents.pop().unwrap_or_default()
        };
        if doc.is_null() {
            return ExitCode::from(worst);
        }
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        if writeln!(out, "{text}").is_err() {
            return ExitCode::from(worst);
        }
    } else if many {
        let _ = writeln!(
            out,
            "{} packages: {} pass, {} fail, {} undecided, {} not gated",
            args.dirs.len(),
            counts[0],
            counts[1],
            counts[3],
            counts[2]
        );
    }
    ExitCode::from(worst)
}

/// One line for a package among several: the verdict and, unless it passed, the first objection.
fn verdict_line(report: &Report) -> String {
    let verdict = report.verdict();
    let first = report
        .checks
        .iter()
        .find(|c| c.outcome == verdict && verdict != Outcome::Pass);
    let detail = match first {
        Some(c) => format!("{}: {}", c.id, c.message),
        None => format!(
            "{} of {} checks passed",
            report.passed(),
            report.checks.len()
        ),
    };
    format!("{:<10} {}  {detail}\n", verdict.label(), report.package)
}

/// Orders exit statuses by badness: 2 (could not run) over 1 (fail) over 3 (undecided) over 0.
fn worse(a: u8, b: u8) -> u8 {
    let rank = |c: u8| match c {
        0 => 0,
        3 => 1,
        1 => 2,
        _ => 3,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}
