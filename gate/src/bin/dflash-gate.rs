//! `dflash-gate [options] <package-dir>...`: the gate on the command line.
//!
//! Exit status: 0 every check passed, 1 a check failed, 3 nothing failed but something was
//! undecided, 2 a usage error, an unreadable path, or a report that could not be written. With several
//! packages, the worst of them. A reader that closed the pipe is no lost report: the verdict's status.
// No `print!`/`eprintln!` (the workspace denies them): they panic when the stream is closed.

#[path = "dflash-gate/cli.rs"]
mod cli;
#[path = "dflash-gate/fit.rs"]
mod fit;
#[path = "dflash-gate/interrupt.rs"]
mod interrupt;
#[path = "dflash-gate/print.rs"]
pub(crate) mod print;
#[path = "dflash-gate/tree.rs"]
pub(crate) mod tree;

use dflash_gate::{Options, Outcome, Report};
use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tree::Item;

const ABOUT: &str =
    "Gates DFlash drafts, fail-closed: a Q4NX package (config.json + one *.q4nx), a Hugging
Face safetensors folder (config.json + model.safetensors or shards), a hub cache entry (ORG/NAME),
or a GGUF draft as llama.cpp loads it (a .gguf file, or a directory holding one).

usage: dflash-gate [options] <package-dir>...
       dflash-gate [options] --all <models-dir>
       dflash-gate [options] -- <package-dir>...   (a directory whose name starts with '-')
";

const EXIT: &str =
    "exit status: 0 pass, 1 fail, 3 undecided, 2 usage error, unreadable path or unwritable
output (with several packages, the worst: 2 over 1 over 3 over 0; a reader that closes the pipe
early still gets the verdict's status; Ctrl-C during several packages: 130, after the package
being gated)";

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
    /// `--format github`: a workflow annotation after each package's text for what it objects to.
    github: bool,
    /// A fit report's targets (several `--target`, or a folder of them), with their row names: each
    /// draft is held to each, and `options.target` is unset.
    fit: Vec<(String, PathBuf)>,
    colour: print::When,
    options: Options,
}

/// What the command line asks for.
enum Request {
    Gate(Args),
    Help,
    Version,
}

/// Why the command line was refused: a usage error (followed by the usage text), or a path it named
/// that cannot be used (the usage text would say nothing about what is wrong with the path).
struct Refused {
    why: String,
    usage: bool,
}

impl From<String> for Refused {
    fn from(why: String) -> Refused {
        Refused { why, usage: true }
    }
}

/// The engines `--loader NAME[,NAME]` names, or a refusal listing those it knows.
fn engines(names: &str) -> Result<Vec<dflash_gate::Engine>, String> {
    names
        .split(',')
        .map(|name| {
            dflash_gate::Engine::from_name(name.trim()).ok_or_else(|| {
                format!(
                    "--loader: unknown engine {:?} (known: {})",
                    name.trim(),
                    dflash_gate::Engine::names()
                )
            })
        })
        .collect()
}

fn request(raw: Vec<OsString>) -> Result<Request, Refused> {
    let parsed = cli::parse(raw, cli::OPTIONS)?;
    if parsed.has("--help") {
        return Ok(Request::Help);
    }
    if parsed.has("--version") {
        return Ok(Request::Version);
    }
    let mut options = Options::default().with_manifest(parsed.has("--manifest"));
    let mut fit = Vec::new();
    for dir in parsed.values("--target") {
        let named =
            tree::targets_named(Path::new(dir)).map_err(|why| Refused { why, usage: false })?;
        fit.extend(named);
    }
    if fit.len() == 1 {
        options = options.with_target(&fit[0].1);
        fit.clear();
    }
    if let Some(dir) = parsed.value("--source") {
        options = options.with_source(dir);
    }
    if let Some(rev) = parsed.value("--revision") {
        options = options.with_revision(rev.to_string_lossy());
    }
    for names in parsed.values("--loader") {
        options = options.with_loaders(engines(&names.to_string_lossy())?);
    }
    let colour = match parsed.value("--color") {
        Some(v) => print::When::parse(&v.to_string_lossy())?,
        None => print::When::Auto,
    };
    let format = match parsed.value("--format") {
        Some(v) => Some(Format::parse(&v.to_string_lossy())?),
        None => None,
    };
    let json = match (parsed.has("--json"), format) {
        (true, Some(Format::Github)) => {
            return Err(
                "--json and --format github do not go together: annotations are lines of text"
                    .to_owned()
                    .into(),
            )
        }
        (json, format) => json || format == Some(Format::Json),
    };
    let quiet = parsed.has("--quiet");
    if json && quiet {
        return Err(
            "--quiet and --json do not go together: the JSON document is always whole"
                .to_owned()
                .into(),
        );
    }
    let mut items: Vec<Item> = parsed
        .operands
        .iter()
        .map(|d| Item::gate(PathBuf::from(d)))
        .collect();
    let beside: Vec<(&str, &Path)> = [("--source", &options.source), ("--target", &options.target)]
        .into_iter()
        .filter_map(|(option, dir)| dir.as_deref().map(|d| (option, d)))
        .collect();
    if parsed.has("--all") || items.len() > 1 {
        // Before `--all` lists its folder (which reads every config.json there): Ctrl-C from here on
        // ends the run in order, never mid-document.
        interrupt::install();
    }
    let mut all = false;
    for models in parsed.values("--all") {
        let under = tree::packages_under(Path::new(models), &beside);
        items.extend(under.map_err(|why| Refused { why, usage: false })?);
        all = true;
    }
    if items.is_empty() {
        return Err("no package directory given".to_owned().into());
    }
    Ok(Request::Gate(Args {
        many: all || items.len() > 1 || !fit.is_empty(),
        items,
        json,
        census: parsed.has("--census"),
        full: parsed.has("--full"),
        quiet,
        colour,
        options,
        github: format == Some(Format::Github),
        fit,
    }))
}

/// `--format`: what the report is printed as.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Text,
    Json,
    Github,
}

impl Format {
    fn parse(value: &str) -> Result<Format, String> {
        match value {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            "github" => Ok(Format::Github),
            other => Err(format!(
                "--format: unknown format {other:?} (known: text, json, github)"
            )),
        }
    }
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
        Err(Refused { why, usage }) => {
            // `why` quotes the command line: an argument may hold a newline or a terminal escape.
            let why = dflash_gate::__private::escape::line(&why);
            match usage {
                true => say(&format!("dflash-gate: {why}\nusage: dflash-gate [options] <package-dir>...\nfor more, run 'dflash-gate --help'")),
                false => say(&format!("dflash-gate: {why}")),
            }
            return ExitCode::from(2);
        }
    };
    let colour = !args.json && args.colour.colour_stdout();
    let mut out = print::Out::new(io::stdout().lock());
    let mut gated = Gated::default();
    // On a terminal the report wraps at its width; a pipe gets the plain lines.
    let columns = match args.json {
        true => None,
        false => print::terminal_width(),
    };
    run(&args, colour, columns, &mut out, &mut gated);
    out.flush();
    if let Some(done) = gated.interrupted {
        // Never a status that reads as approval: not every package was gated.
        say(&format!(
            "dflash-gate: interrupted after {done} of {} {}",
            args.packages(),
            packages(args.packages())
        ));
        return ExitCode::from(INTERRUPTED);
    }
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
                "dflash-gate: cannot write the report to stdout: {e}; {unreported} of {total} {} not reported",
                packages(total)
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
    /// The directories passed over, and those not gated, by reason token (counted in the summary).
    skipped_by: std::collections::BTreeMap<&'static str, usize>,
    not_gated_by: std::collections::BTreeMap<&'static str, usize>,
    reported: usize,
    /// Ctrl-C stopped the run after this many packages were gated.
    interrupted: Option<usize>,
}

/// The exit status of a run Ctrl-C stopped: 128 plus `SIGINT`, as a shell reports it.
const INTERRUPTED: u8 = 130;

impl Gated {
    fn count(&mut self, code: u8) {
        self.counts[usize::from(code)] += 1;
        self.worst = worse(self.worst, code);
    }
}

/// Gates every package and writes its report as it goes (JSON: at the end, as one document). A lost
/// report (a full disk) stops the run; a closed pipe does not: the rest is gated unprinted, so the
/// exit status covers every package asked for.
fn run(
    args: &Args,
    colour: bool,
    columns: Option<usize>,
    out: &mut print::Out<impl Write>,
    gated: &mut Gated,
) {
    let mut documents = Vec::new();
    // A fit report reads each target once, whatever the number of drafts.
    let targets: Vec<_> = args
        .fit
        .iter()
        .map(|(_, dir)| dflash_gate::read_target(dir))
        .collect();
    // One line per package reads as a table: the package column as wide as the widest name.
    let width = args
        .items
        .iter()
        .map(|i| i.name().chars().count())
        .max()
        .unwrap_or(0);
    for item in &args.items {
        if out.lost() {
            return;
        }
        if args.many && interrupt::interrupted() {
            gated.interrupted = Some(gated.counts.iter().sum());
            break;
        }
        // `--format github`'s annotations for this item.
        let mut notes = String::new();
        let text = match item {
            Item::Gate { dir, .. } if !args.fit.is_empty() => {
                let name = item
                    .label_name()
                    .map(str::to_owned)
                    .unwrap_or_else(|| item.name());
                let (text, code) = fit::report(
                    dir,
                    &name,
                    &args.fit,
                    &targets,
                    &args.options,
                    args.json,
                    &mut documents,
                );
                gated.count(code);
                if args.github && code != 0 {
                    notes = print::fit_annotation(&name, code);
                }
                text
            }
            Item::Gate { dir, .. } => match dflash_gate::gate(dir, &args.options) {
                Ok(report) => {
                    gated.count(report.verdict().exit_code());
                    if args.github {
                        notes = print::annotations(&report);
                    }
                    if args.json {
                        documents.push(report.to_json());
                    }
                    if !args.many || args.full {
                        print::report_text(&report, args.census, args.quiet)
                    } else if args.quiet && report.verdict() == Outcome::Pass {
                        String::new()
                    } else {
                        let name = item.label_name().unwrap_or(report.package());
                        verdict_line(&report, name, item.note(), width)
                    }
                }
                Err(e) => {
                    if args.github {
                        notes = print::error_annotation(&e.to_string());
                    }
                    not_gated(args, item, &e, gated, &mut documents, width)
                }
            },
            Item::NotGated { error, .. } => {
                if args.github {
                    notes = print::error_annotation(&error.to_string());
                }
                not_gated(args, item, error, gated, &mut documents, width)
            }
            Item::Skip {
                dir, why, reason, ..
            } => {
                gated.skipped += 1;
                *gated.skipped_by.entry(reason).or_default() += 1;
                if args.json {
                    documents.push(skipped_json(dir, reason, why));
                }
                let line = format!(
                    "{:<10} {:<width$}  {why}{}",
                    "SKIPPED",
                    item.name(),
                    noted(item.note())
                );
                format!("{}\n", dflash_gate::__private::escape::line(&line))
            }
        };
        let mut text = match columns {
            Some(columns) => print::wrap(&text, columns),
            None => text,
        };
        // After the wrap: an annotation is one line whatever its length, or the runner drops it.
        if args.github {
            text.push_str(&notes);
        }
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
        let mut skipped = match gated.skipped {
            0 => String::new(),
            n => format!("; {n} skipped ({})", by_reason(&gated.skipped_by)),
        };
        let not_gated = match c[2] {
            0 => String::new(),
            _ => format!(" ({})", by_reason(&gated.not_gated_by)),
        };
        if let Some(done) = gated.interrupted {
            skipped.push_str(&format!("; interrupted after {done}"));
        }
        out.write(&format!(
            "{} {}: {} pass, {} fail, {} undecided, {} not gated{not_gated}{skipped}\n",
            args.packages(),
            packages(args.packages()),
            c[0],
            c[1],
            c[3],
            c[2]
        ));
    }
}

/// A package directory as the report names it: escaped as file names are, so that two names that
/// differ only in bytes that are not UTF-8 never print the same.
fn shown(dir: &Path) -> String {
    dflash_gate::__private::escape::name(dir.as_os_str())
}

/// A directory `--all` passed over, as a document in the array where it was met: a reader of the
/// JSON sees every directory the run looked at, not only those it gated.
fn skipped_json(dir: &Path, reason: &'static str, why: &str) -> serde_json::Value {
    #[derive(serde::Serialize)]
    #[serde(tag = "kind", rename = "skipped")]
    struct Skipped<'a> {
        schema_version: u32,
        tool: dflash_gate::Tool,
        package: String,
        reason: &'static str,
        message: &'a str,
    }
    serde_json::to_value(Skipped {
        schema_version: dflash_gate::SCHEMA_VERSION,
        tool: dflash_gate::TOOL,
        package: shown(dir),
        reason,
        message: why,
    })
    .unwrap_or_default()
}

/// A package the gate could not run on: the JSON an error document and, with several packages, an
/// ERROR line on stdout, else stderr says why (once: the listing's line is the message); exit 2.
fn not_gated(
    args: &Args,
    item: &Item,
    e: &dflash_gate::PackageError,
    gated: &mut Gated,
    documents: &mut Vec<serde_json::Value>,
    width: usize,
) -> String {
    let dir = item.dir();
    gated.count(2);
    *gated.not_gated_by.entry(e.reason()).or_default() += 1;
    let why = format!("{e}{}", hint(dir, e));
    if args.json {
        documents.push(dflash_gate::error_json(&shown(dir), e));
    }
    if !args.many || args.json {
        say(&format!(
            "dflash-gate: {}",
            dflash_gate::__private::escape::line(&why)
        ));
        return String::new();
    }
    // The line names the directory once: the error's own copy of the path goes.
    let named = format!("{}: ", shown(dir));
    let why = why.strip_prefix(&named).unwrap_or(&why);
    let line = format!(
        "{:<10} {:<width$}  {why}{}",
        "ERROR",
        item.name(),
        noted(item.note())
    );
    format!("{}\n", dflash_gate::__private::escape::line(&line))
}

/// A row's note, after its own words.
fn noted(note: Option<&str>) -> String {
    note.map(|n| format!(" ({n})")).unwrap_or_default()
}

/// `2 another model, 1 not a package`: counts by reason token, in the tokens' order.
fn by_reason(counts: &std::collections::BTreeMap<&'static str, usize>) -> String {
    counts
        .iter()
        .map(|(reason, n)| format!("{n} {}", reason.replace('_', " ")))
        .collect::<Vec<_>>()
        .join(", ")
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
fn verdict_line(report: &Report, name: &str, note: Option<&str>, width: usize) -> String {
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
    // A package's form goes unsaid (it is the form the gate began with); any other form is named,
    // and so is the folder of a repository the draft was found in.
    let form = match (report.census().form, &report.against().draft_in) {
        (dflash_gate::Form::Q4nx, None) => String::new(),
        (dflash_gate::Form::Q4nx, Some(folder)) => format!("[draft in {folder}/] "),
        (other, None) => format!("[{}] ", other.token()),
        (other, Some(folder)) => format!("[{}, draft in {folder}/] ", other.token()),
    };
    let line = format!(
        "{:<10} {name:<width$}  {form}{detail}{}",
        verdict.label(),
        noted(note)
    );
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

/// "package" or "packages", for `n` of them.
fn packages(n: usize) -> &'static str {
    match n {
        1 => "package",
        _ => "packages",
    }
}
