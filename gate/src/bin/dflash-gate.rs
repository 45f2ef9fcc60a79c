//! `dflash-gate [options] <package-dir>...`: the gate on the command line.
//!
//! Exit status: 0 every check passed, 1 a check failed, 3 nothing failed but something was
//! undecided, 2 a usage error, an unreadable path, or a report that could not be written. With several
//! packages, the worst of them. A reader that closed the pipe is no lost report: the verdict's status.
// No `print!`/`eprintln!` (the workspace denies them): they panic when the stream is closed.

#[path = "dflash-gate/cli.rs"]
mod cli;
#[path = "dflash-gate/print.rs"]
mod print;
#[path = "dflash-gate/tree.rs"]
mod tree;

use dflash_gate::{Options, Outcome, Report};
use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tree::Item;

const ABOUT: &str = "Gates DFlash draft packages (config.json + one Q4NX weight file), fail-closed.

usage: dflash-gate [options] <package-dir>...
       dflash-gate [options] --all <models-dir>
       dflash-gate [options] -- <package-dir>...   (a directory whose name starts with '-')
";

const EXIT: &str =
    "exit status: 0 pass, 1 fail, 3 undecided, 2 usage error, unreadable path or unwritable
output (with several packages, the worst: 2 over 1 over 3 over 0; a reader that closes the pipe
early still gets the verdict's status)";

/// What to gate and how to print it.
struct Args {
    items: Vec<Item>,
    json: bool,
    census: bool,
    full: bool,
    /// Only the objections and the verdict.
    quiet: bool,
    /// `--all` or several directories: one line each (or a JSON array) and a summary.
    many: bool,
    colour: print::When,
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
    let mut options = Options::default().with_manifest(parsed.has("--manifest"));
    if let Some(dir) = parsed.value("--target") {
        options = options.with_target(dir);
    }
    if let Some(dir) = parsed.value("--source") {
        options = options.with_source(dir);
    }
    let colour = match parsed.value("--color") {
        Some(v) => print::When::parse(&v.to_string_lossy())?,
        None => print::When::Auto,
    };
    let (json, quiet) = (parsed.has("--json"), parsed.has("--quiet"));
    if json && quiet {
        return Err(
            "--quiet and --json do not go together: the JSON document is always whole".to_owned(),
        );
    }
    let mut items: Vec<Item> = parsed
        .operands
        .iter()
        .map(|d| Item::Gate(PathBuf::from(d)))
        .collect();
    let beside: Vec<(&str, &Path)> = [("--source", &options.source), ("--target", &options.target)]
        .into_iter()
        .filter_map(|(option, dir)| dir.as_deref().map(|d| (option, d)))
        .collect();
    let mut all = false;
    for models in parsed.values("--all") {
        items.extend(tree::packages_under(Path::new(models), &beside)?);
        all = true;
    }
    if items.is_empty() {
        return Err("no package directory given".to_owned());
    }
    Ok(Request::Gate(Args {
        many: all || items.len() > 1,
        items,
        json,
        census: parsed.has("--census"),
        full: parsed.has("--full"),
        quiet,
        colour,
        options,
    }))
}

fn main() -> ExitCode {
    command(std::env::args_os().skip(1).collect())
}

/// The whole command on `raw`, the arguments after the program's name. Not `main` itself, so that
/// `python -m dflash_gate` (python/src/lib.rs compiles this file) runs this very code on the
/// arguments Python was given.
pub(crate) fn command(raw: Vec<OsString>) -> ExitCode {
    let args = match request(raw) {
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
            // `why` quotes the command line: an argument may hold a newline or a terminal escape.
            let why = dflash_gate::__private::escape::line(&why);
            say(&format!("dflash-gate: {why}\nusage: dflash-gate [options] <package-dir>...\nfor more, run 'dflash-gate --help'"));
            return ExitCode::from(2);
        }
    };
    let colour = !args.json && args.colour.colour_stdout();
    let mut out = print::Out::new(io::stdout().lock());
    let mut gated = Gated::default();
    run(&args, colour, &mut out, &mut gated);
    out.flush();
    match out.error {
        None => ExitCode::from(gated.worst),
        // The reader left: it has what it read; the status is still the verdict's (never a 0 for
        // a run that holds a FAIL: every package was gated).
        Some(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::from(gated.worst),
        Some(e) => {
            // The verdict did not reach its reader: never an exit that could read as approval.
            let total = args.packages();
            let unreported = total - gated.reported.min(total);
            say(&format!(
                "dflash-gate: cannot write the report to stdout: {e}; {unreported} of {total} package(s) not reported"
            ));
            ExitCode::from(2)
        }
    }
}

impl Args {
    /// The directories that count (all but the skipped).
    fn packages(&self) -> usize {
        self.items
            .iter()
            .filter(|i| !matches!(i, Item::Skip { .. }))
            .count()
    }
}

/// One message on stderr. Unlike `eprintln!`, a stderr that cannot be written (`2>&1 | head -1`, the
/// reader gone) is no panic: the exit status, which is the verdict's, still reaches the caller.
fn say(text: &str) {
    let _ = writeln!(io::stderr(), "{text}");
}

/// `--help` and `--version`: stdout, exit 0 (also when the reader closed the pipe early; 2 if the
/// text could not be written otherwise).
fn answer(text: &str) -> ExitCode {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            say(&format!("dflash-gate: cannot write to stdout: {e}"));
            ExitCode::from(2)
        }
    }
}

/// What has been gated so far: the worst exit status, how many packages got each, how many were
/// skipped, and how many reports were written out.
#[derive(Default)]
struct Gated {
    worst: u8,
    counts: [usize; 4],
    skipped: usize,
    reported: usize,
}

impl Gated {
    fn count(&mut self, code: u8) {
        self.counts[usize::from(code)] += 1;
        self.worst = worse(self.worst, code);
    }
}

/// Gates every package and writes its report as it goes (JSON: at the end, as one document). A lost
/// report (a full disk) stops the run; a closed pipe does not: the rest is gated unprinted, so the
/// exit status covers every package asked for.
fn run(args: &Args, colour: bool, out: &mut print::Out<impl Write>, gated: &mut Gated) {
    let mut documents = Vec::new();
    for item in &args.items {
        if out.lost() {
            return;
        }
        let text = match item {
            Item::Gate(dir) => match dflash_gate::gate(dir, &args.options) {
                Ok(report) => {
                    gated.count(report.verdict().exit_code());
                    if args.json {
                        documents.push(report.to_json());
                    }
                    if !args.many || args.full {
                        print::report_text(&report, args.census, args.quiet, args.many)
                    } else if args.quiet && report.verdict() == Outcome::Pass {
                        String::new()
                    } else {
                        verdict_line(&report)
                    }
                }
                Err(e) => not_gated(args, dir, &e, gated, &mut documents),
            },
            Item::NotGated { dir, error } => not_gated(args, dir, error, gated, &mut documents),
            Item::Skip { dir, why } => {
                gated.skipped += 1;
                if args.json {
                    // The JSON array holds reports and errors only; the skip is said on stderr.
                    let line = format!("skipped {}: {why}", dir.display());
                    say(&format!(
                        "dflash-gate: {}",
                        dflash_gate::__private::escape::line(&line)
                    ));
                }
                let line = format!("{:<10} {}  {why}", "SKIPPED", dir.display());
                format!("{}\n", dflash_gate::__private::escape::line(&line))
            }
        };
        if !args.json
            && out.write(&print::paint(&text, colour))
            && !matches!(item, Item::Skip { .. })
        {
            gated.reported += 1;
        }
    }
    if args.json {
        let doc = if args.many {
            serde_json::Value::Array(documents)
        } else {
            documents.pop().unwrap_or_default()
        };
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        if out.write(&format!("{text}\n")) {
            gated.reported = args.packages();
        }
    } else if args.many {
        let c = &gated.counts;
        let skipped = match gated.skipped {
            0 => String::new(),
            n => format!("; {n} skipped"),
        };
        out.write(&format!(
            "{} packages: {} pass, {} fail, {} undecided, {} not gated{skipped}\n",
            args.packages(),
            c[0],
            c[1],
            c[3],
            c[2]
        ));
    }
}

/// A package the gate could not run on: stderr says why, the many-package listing has an ERROR line
/// and the JSON an error document; exit 2.
fn not_gated(
    args: &Args,
    dir: &Path,
    e: &dflash_gate::PackageError,
    gated: &mut Gated,
    documents: &mut Vec<serde_json::Value>,
) -> String {
    gated.count(2);
    let why = format!("{e}{}", hint(dir, e));
    say(&format!(
        "dflash-gate: {}",
        dflash_gate::__private::escape::line(&why)
    ));
    if args.json {
        documents.push(dflash_gate::error_json(&dir.to_string_lossy(), e));
    }
    if args.many {
        let line = format!("ERROR      {}  {why}", dir.display());
        format!("{}\n", dflash_gate::__private::escape::line(&line))
    } else {
        String::new()
    }
}

/// What the error alone does not say: a config.json that is a link to nothing, or a folder of
/// packages named where one package was meant.
fn hint(dir: &Path, e: &dflash_gate::PackageError) -> &'static str {
    if !matches!(e, dflash_gate::PackageError::NoConfig { .. }) {
        return "";
    }
    let config = dir.join(dflash_gate::__private::files::CONFIG_FILE);
    if config.symlink_metadata().is_ok_and(|m| m.is_symlink()) {
        "; it is a symbolic link to nothing"
    } else if tree::holds_packages(dir) {
        "; did you mean --all? (directories under it hold one)"
    } else {
        ""
    }
}

/// One line for a package among several: the verdict and, unless it passed, the first objection.
fn verdict_line(report: &Report) -> String {
    let verdict = report.verdict();
    let first = report
        .checks()
        .iter()
        .find(|c| c.outcome() == verdict && verdict != Outcome::Pass);
    let detail = match first {
        Some(c) => format!("{}: {}", c.id(), c.message()),
        None => format!(
            "{} of {} checks passed",
            report.passed(),
            report.checks().len()
        ),
    };
    let line = format!("{:<10} {}  {detail}", verdict.label(), report.package());
    format!("{}\n", dflash_gate::__private::escape::line(&line))
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
