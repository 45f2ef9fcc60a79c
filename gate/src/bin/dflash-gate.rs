//! `dflash-gate [options] <package-dir>...`: the gate on the command line.
//!
//! Exit status: 0 every check passed, 1 a check failed, 3 nothing failed but something was
//! undecided, 2 a usage error, an unreadable path, or a report that could not be written. With several
//! packages, the worst of them.
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "dflash-gate/cli.rs"]
mod cli;

use gate::{Options, Outcome, Report};
use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const ABOUT: &str = "Gates DFlash draft packages (config.json + one Q4NX weight file), fail-closed.

usage: dflash-gate [options] <package-dir>...
       dflash-gate [options] --all <models-dir>
       dflash-gate [options] -- <package-dir>...   (a directory whose name starts with '-')
";

const EXIT: &str =
    "exit status: 0 pass, 1 fail, 3 undecided, 2 usage error, unreadable path or unwritable
output (with several packages, the worst: 2 over 1 over 3 over 0)";

/// What to gate and how to print it.
struct Args {
    dirs: Vec<PathBuf>,
    json: bool,
    census: bool,
    full: bool,
    /// `--all` or several directories: one line each (or a JSON array) and a summary.
    many: bool,
    options: Options,
}

/// What the command line asks for.
enum Request {
    Gate(Args),
    Help,
    Version,
}

fn request(raw: Vec<OsString>) -> Result<Request, String> {
    let parsed = cli::parse(raw, cli::OPTIONS)?;
    if parsed.has("--help") {
        return Ok(Request::Help);
    }
    if parsed.has("--version") {
        return Ok(Request::Version);
    }
    let mut dirs: Vec<PathBuf> = parsed.operands.iter().map(PathBuf::from).collect();
    let mut all = false;
    for models in parsed.values("--all") {
        dirs.extend(packages_under(Path::new(models))?);
        all = true;
    }
    if dirs.is_empty() {
        return Err("no package directory given".to_owned());
    }
    Ok(Request::Gate(Args {
        many: all || dirs.len() > 1,
        dirs,
        json: parsed.has("--json"),
        census: parsed.has("--census"),
        full: parsed.has("--full"),
        options: Options {
            target: parsed.value("--target").map(PathBuf::from),
            manifest: parsed.has("--manifest"),
            source: parsed.value("--source").map(PathBuf::from),
            ..Options::default()
        },
    }))
}

/// Every directory directly under `models` that holds a config.json, sorted.
fn packages_under(models: &Path) -> Result<Vec<PathBuf>, String> {
    gate::error::require_dir(models).map_err(|e| format!("--all {e}"))?;
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
    let args = match request(std::env::args_os().skip(1).collect()) {
        Ok(Request::Gate(args)) => args,
        Ok(Request::Help) => {
            let text = format!(
                "{ABOUT}\noptions:\n{}\n{EXIT}\n",
                cli::options_help(cli::OPTIONS)
            );
            return answer(&text);
        }
        Ok(Request::Version) => {
            return answer(&format!("dflash-gate {}\n", env!("CARGO_PKG_VERSION")));
        }
        Err(why) => {
            eprintln!("dflash-gate: {why}\nusage: dflash-gate [options] <package-dir>...\nfor more, run 'dflash-gate --help'");
            return ExitCode::from(2);
        }
    };
    let mut out = io::stdout().lock();
    let mut gated = Gated::default();
    let result = run(&args, &mut out, &mut gated).and_then(|()| out.flush());
    match result {
        Ok(()) => ExitCode::from(gated.worst),
        Err(e) => {
            // The verdict did not reach its reader: never an exit that could read as approval.
            let unreported = args.dirs.len() - gated.reported;
            eprintln!(
                "dflash-gate: cannot write the report to stdout: {e}; {unreported} of {} package(s) not reported",
                args.dirs.len()
            );
            ExitCode::from(2)
        }
    }
}

/// `--help` and `--version`: stdout, exit 0 (2 if even that cannot be written).
fn answer(text: &str) -> ExitCode {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dflash-gate: cannot write to stdout: {e}");
            ExitCode::from(2)
        }
    }
}

/// What has been gated so far: the worst exit status, how many packages got each, and how many
/// reports were written out.
#[derive(Default)]
struct Gated {
    worst: u8,
    counts: [usize; 4],
    reported: usize,
}

/// Gates every package and writes its report as it goes (JSON: at the end, as one document). Any
/// write error stops the run.
fn run(args: &Args, out: &mut impl Write, gated: &mut Gated) -> io::Result<()> {
    let mut documents = Vec::new();
    for dir in &args.dirs {
        let (code, text) = match gate::gate(dir, &args.options) {
            Ok(report) => {
                if args.json {
                    documents.push(report.to_json());
                }
                let text = if args.many && !args.full {
                    verdict_line(&report)
                } else {
                    report.to_text(args.census)
                };
                (report.verdict().exit_code(), text)
            }
            Err(e) => {
                eprintln!("dflash-gate: {}", gate::escape::line(&e.to_string()));
                if args.json {
                    documents.push(gate::report::error_json(&dir.to_string_lossy(), &e));
                }
                let text = if args.many {
                    let line = format!("ERROR      {}  {e}", dir.display());
                    format!("{}\n", gate::escape::line(&line))
                } else {
                    String::new()
                };
                (2, text)
            }
        };
        gated.counts[usize::from(code)] += 1;
        gated.worst = worse(gated.worst, code);
        if !args.json {
            out.write_all(text.as_bytes())?;
            gated.reported += 1;
        }
    }
    if args.json {
        let doc = if args.many {
            serde_json::Value::Array(documents)
        } else {
            documents.pop().unwrap_or_default()
        };
        let text = serde_json::to_string_pretty(&doc).map_err(io::Error::other)?;
        writeln!(out, "{text}")?;
        gated.reported = args.dirs.len();
    } else if args.many {
        let c = &gated.counts;
        writeln!(
            out,
            "{} packages: {} pass, {} fail, {} undecided, {} not gated",
            args.dirs.len(),
            c[0],
            c[1],
            c[3],
            c[2]
        )?;
    }
    Ok(())
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
    let line = format!("{:<10} {}  {detail}", verdict.label(), report.package);
    format!("{}\n", gate::escape::line(&line))
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
