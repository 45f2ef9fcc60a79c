//! `cargo xtask bench`: runs the `gate` bench target (optimised), which prints figures and ratios.

use std::process::ExitCode;

pub fn run(args: &[String]) -> Result<ExitCode, String> {
    let sh = crate::shell()?;
    let cargo = crate::cargo();
    // The CLI, for the row that sets the gate in process against it on the same package.
    xshell::cmd!(
        sh,
        "{cargo} build --quiet --release --package dflash-gate --bin dflash-gate"
    )
    .quiet()
    .run()
    .map_err(|e| format!("bench: building the CLI: {e}"))?;
    xshell::cmd!(
        sh,
        "{cargo} bench --quiet --package gate-tests --bench gate -- {args...}"
    )
    .quiet()
    .run()
    .map_err(|e| format!("bench: {e}"))?;
    Ok(ExitCode::SUCCESS)
}
