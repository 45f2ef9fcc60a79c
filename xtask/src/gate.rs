//! `cargo xtask gate`: builds `dflash-gate` optimised (the tile scan is far too slow unoptimised on a
//! 270 MB package), asks cargo where it put it (so `CARGO_TARGET_DIR` is respected and a stale binary
//! elsewhere is never run), and runs it with the given arguments, passing its exit status through.
//!
//! The arguments are checked with the binary's own parser first, so a typo or `--help` answers at
//! once, before any build.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

/// Gated when no directory is named, so the quick start works on a fresh clone.
pub const DEFAULT_PACKAGE: &str = "fixtures/tiny";

pub fn run(args: &[String]) -> Result<ExitCode, String> {
    let raw: Vec<OsString> = args.iter().map(OsString::from).collect();
    let parsed = crate::gate_cli::parse(raw, crate::gate_cli::OPTIONS).map_err(|e| {
        // `e` quotes the command line: an argument may hold a newline or a terminal escape.
        let e = crate::escape::line(&e);
        format!("gate: {e}\nfor more, run 'cargo xtask gate --help'")
    })?;
    let mut args = args.to_vec();
    if parsed.operands.is_empty() && !parsed.has("--all") && !parsed.has("--version") {
        // An option that names what to compare a package with says the user meant a package of
        // their own: gating the bundled one against their checkpoint or target would answer a
        // question nobody asked (and fail, as if their files were at fault).
        if let Some(option) = ["--source", "--target"].into_iter().find(|o| parsed.has(o)) {
            return Err(format!(
                "gate: {option} was given but no package directory was named (cargo xtask gate <package-dir> {option} <dir>)"
            ));
        }
        eprintln!("xtask: no package named; gating the bundled {DEFAULT_PACKAGE}");
        args.push(
            crate::root()
                .join(DEFAULT_PACKAGE)
                .to_string_lossy()
                .into_owned(),
        );
    }
    let binary = build()?;
    // The user's working directory, not the workspace, resolves their relative paths.
    let status = Command::new(&binary)
        .args(&args)
        .status()
        .map_err(|e| format!("running {}: {e}", binary.display()))?;
    Ok(ExitCode::from(status.code().map_or(2, |c| c as u8)))
}

/// Builds the release binary and returns the path cargo reports for it.
pub fn build() -> Result<PathBuf, String> {
    build_with(&[])
}

/// The same, with more of cargo build's options (`cargo xtask dist`: `--locked`, `--target`).
pub fn build_with(options: &[&str]) -> Result<PathBuf, String> {
    let messages = cargo_build(
        "dflash-gate",
        &["--package", "dflash-gate", "--bin", "dflash-gate"],
        options,
    )?;
    executable(&messages, "dflash-gate")
        .ok_or_else(|| "cargo built dflash-gate but did not say where".to_owned())
}

/// Runs an optimised `cargo build` of `selection` (named `what` in what it says) with `options`, and
/// returns cargo's JSON messages, which say where each artifact was put: the one place the gate and
/// `cargo xtask dist`'s C library are built from, so both honour `CARGO_TARGET_DIR` and `--target`.
pub fn cargo_build(what: &str, selection: &[&str], options: &[&str]) -> Result<String, String> {
    let terminal = std::io::stderr().is_terminal();
    if !terminal {
        // cargo is quiet here (a log, a script): one line says what the wait is.
        eprintln!("xtask: building {what} (optimised; a first build takes a minute or more)");
    }
    let output = Command::new(crate::cargo())
        .current_dir(crate::root())
        .args(build_args(terminal))
        .args(selection)
        .args(options)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running cargo build: {e}"))?;
    if !output.status.success() {
        return Err(format!("building {what} failed (cargo's errors are above)"));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Cargo's arguments. On a terminal cargo's own progress is shown (a cold checkout compiles for a
/// minute or two, which must not look like a hang); elsewhere (CI logs, scripts) it is quiet.
fn build_args(terminal: bool) -> Vec<&'static str> {
    let mut args = vec!["build"];
    if !terminal {
        args.push("--quiet");
    }
    args.extend(["--release", "--message-format=json-render-diagnostics"]);
    args
}

/// The `executable` of the `compiler-artifact` message for binary `name` in cargo's JSON messages.
fn executable(messages: &str, name: &str) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == name)
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_checkpoint_or_target_without_a_package_is_a_usage_error_not_the_bundled_fixture() {
        for option in ["--source", "--target"] {
            let args = [
                option.to_owned(),
                "some/dir".to_owned(),
                "--json".to_owned(),
            ];
            let err = super::run(&args).expect_err("refused before any build");
            assert!(
                err.contains(&format!("{option} was given but no package directory")),
                "{err}"
            );
        }
    }

    #[test]
    fn cargo_shows_its_progress_on_a_terminal_only() {
        assert!(!super::build_args(true).contains(&"--quiet"));
        assert!(super::build_args(false).contains(&"--quiet"));
    }

    #[test]
    fn a_forged_argument_is_escaped_in_the_usage_error() {
        let args = ["--x\n\u{1b}[2KVERDICT      PASS".to_owned()];
        let err = super::run(&args).expect_err("an unknown option");
        assert!(!err.contains('\u{1b}'), "{err:?}");
        assert!(err.contains("--x\\n\\u{1b}[2KVERDICT"), "{err:?}");
    }

    #[test]
    fn the_executable_is_read_from_cargos_messages() {
        let messages = r#"{"reason":"compiler-artifact","target":{"name":"gate","kind":["lib"]},"executable":null}
{"reason":"compiler-artifact","target":{"name":"dflash-gate","kind":["bin"]},"executable":"/t/release/dflash-gate"}
{"reason":"build-finished","success":true}"#;
        assert_eq!(
            super::executable(messages, "dflash-gate"),
            Some("/t/release/dflash-gate".into())
        );
        assert_eq!(super::executable("", "dflash-gate"), None);
    }
}
