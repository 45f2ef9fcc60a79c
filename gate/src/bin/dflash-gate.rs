//! `dflash-gate <dir>... [--json] [--census]`: the gate's command line.
//!
//! Exit status: 0 every check passed, 1 a check failed, 3 nothing failed but something was
//! undecided, 2 a usage error or an unreadable path. With several packages, the worst of them.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use gate::Options;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: dflash-gate <package-dir>... [--json] [--census]

Gates DFlash draft packages (config.json + one Q4NX weight file), fail-closed.
  --json     print one JSON document (an array when several packages are given)
  --census   list every tensor in the human report
exit status: 0 pass, 1 fail, 3 undecided, 2 usage error or unreadable path";

struct Args {
    dirs: Vec<PathBuf>,
    json: bool,
    census: bool,
    options: Options,
}

fn parse_args(raw: impl Iterator<Item = std::ffi::OsString>) -> Result<Args, String> {
    let mut args = Args {
        dirs: Vec::new(),
        json: false,
        census: false,
        options: Options::default(),
    };
    for arg in raw {
        match arg.to_str() {
            Some("--json") => args.json = true,
            Some("--census") => args.census = true,
            Some("-h" | "--help") => return Err(String::new()),
            Some("--target" | "--manifest") => {
                return Err(format!(
                    "{}: not available in this version of the gate",
                    arg.to_string_lossy()
                ))
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

fn main() -> ExitCode {
    let args = match parse_args(std::env::args_os().skip(1)) {
        Ok(a) => a,
        Err(why) => {
            if !why.is_empty() {
                eprintln!("dflash-gate: {why}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut worst = 0u8;
    let mut documents = Vec::new();
    let mut out = io::stdout().lock();
    for dir in &args.dirs {
        let report = match gate::gate(dir, &args.options) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("dflash-gate: {e}");
                worst = 2;
                continue;
            }
        };
        let code = report.verdict().exit_code();
        worst = worse(worst, code);
        if args.json {
            documents.push(report.to_json());
        } else if write!(out, "{}", report.to_text(args.census)).is_err() {
            return ExitCode::from(worst);
        }
    }
    if args.json {
        let doc = match documents.len() {
            1 if args.dirs.len() == 1 => documents.remove(0),
            _ => serde_json::Value::Array(documents),
        };
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        if writeln!(out, "{text}").is_err() {
            return ExitCode::from(worst);
        }
    }
    ExitCode::from(worst)
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
