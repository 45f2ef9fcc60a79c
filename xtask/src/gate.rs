//! `cargo xtask gate`: builds `dflash-gate` optimised (the tile scan is far too slow unoptimised on a
//! 270 MB package) and runs it with the given arguments, passing its exit status through.

use std::process::ExitCode;

/// Gated when no directory is named, so the quick start works on a fresh clone.
pub const DEFAULT_PACKAGE: &str = "fixtures/tiny";

pub fn run(args: &[String]) -> Result<ExitCode, String> {
    let sh = crate::shell()?;
    let cargo = crate::cargo();
    xshell::cmd!(
        sh,
        "{cargo} build --quiet --release --package gate --bin dflash-gate"
    )
    .run()
    .map_err(|e| format!("building dflash-gate: {e}"))?;
    let mut args = args.to_vec();
    if !args.iter().any(|a| !a.starts_with('-')) {
        eprintln!("xtask: no package named; gating the bundled {DEFAULT_PACKAGE}");
        args.push(
            crate::root()
                .join(DEFAULT_PACKAGE)
                .to_string_lossy()
                .into_owned(),
        );
    }
    let binary = crate::root().join("target/release/dflash-gate");
    // The user's working directory, not the workspace, resolves their relative paths.
    let status = std::process::Command::new(binary)
        .args(&args)
        .status()
        .map_err(|e| format!("running dflash-gate: {e}"))?;
    Ok(ExitCode::from(status.code().map_or(2, |c| c as u8)))
}
