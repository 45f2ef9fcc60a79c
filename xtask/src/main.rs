//! `cargo xtask <task>`: the project's commands, so that CI and a person at a terminal run the same
//! thing. Each task is a small module; the table below is both the dispatch and the help.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bench;
mod cmake;
mod fuzz;
mod gate;
mod mutants;
mod selftest;

use std::path::PathBuf;
use std::process::ExitCode;

type Task = fn(&[String]) -> Result<ExitCode, String>;

const TASKS: &[(&str, Task, &str)] = &[
    ("gate", gate::run, "gate <dir>... [--json] [--census]: gate packages with the optimised binary (default: fixtures/tiny)"),
    ("selftest", selftest::run, "selftest: run every arm of the test suite; PASS/FAIL per arm, exit 0 only if all hold"),
    ("cmake", cmake::run, "cmake [--out FILE | --check FILE]: print the CMake module that registers the gate's ctest rows"),
    ("cmake-smoke", cmake::smoke, "cmake-smoke: configure a throwaway CMake project with the module; good rows pass, a broken row fails"),
    ("bench", bench::run, "bench [--runs N]: time the gate against the floor on the reference and a 1.4 GB package"),
    ("fuzz", fuzz::run, "fuzz <container|package> [seconds]: seed a corpus from synthetic packages and run cargo fuzz"),
    ("mutants", mutants::run, "mutants: break each check on purpose; every mutant must turn an arm red"),
    ("bless", selftest::bless, "bless: rewrite fixtures/tiny and its golden report from the generator"),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match try_main(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::from(2)
        }
    }
}

fn try_main(args: &[String]) -> Result<ExitCode, String> {
    let Some((name, rest)) = args.split_first() else {
        help();
        return Ok(ExitCode::from(2));
    };
    match TASKS.iter().find(|(n, _, _)| n == name) {
        Some((_, task, _)) => task(rest),
        None => {
            eprintln!("xtask: unknown task {name:?}");
            help();
            Ok(ExitCode::from(2))
        }
    }
}

fn help() {
    eprintln!("usage: cargo xtask <task> [args]\n\ntasks:");
    for (_, _, text) in TASKS {
        eprintln!("  {text}");
    }
}

/// The workspace root: the parent of this crate's manifest directory.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// The cargo that runs us, so child builds use the same toolchain.
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// A shell rooted at the workspace.
pub fn shell() -> Result<xshell::Shell, String> {
    let sh = xshell::Shell::new().map_err(|e| e.to_string())?;
    sh.change_dir(root());
    Ok(sh)
}
