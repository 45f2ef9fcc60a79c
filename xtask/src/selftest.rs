//! `cargo xtask selftest` and `cargo xtask bless`: wrappers over the test suite, never a copy of it.

use std::process::ExitCode;

/// Runs the suite and reprints each trial as `PASS  <name>` / `FAIL  <name>`, then the count.
pub fn run(args: &[String]) -> Result<ExitCode, String> {
    let sh = crate::shell()?;
    let cargo = crate::cargo();
    let output = xshell::cmd!(
        sh,
        "{cargo} test --quiet --package dflash-gate --test suite -- --format pretty {args...}"
    )
    .ignore_status()
    .output()
    .map_err(|e| format!("running the suite: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let (mut passed, mut failed) = (0, 0);
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("test ") else {
            continue;
        };
        let Some((name, verdict)) = rest.rsplit_once(" ... ") else {
            continue;
        };
        let label = match verdict.trim() {
            "ok" => {
                passed += 1;
                "PASS"
            }
            "FAILED" => {
                failed += 1;
                "FAIL"
            }
            other => other,
        };
        println!("{label:<5} {}", name.trim());
    }
    if failed > 0 || !output.status.success() {
        // The suite's own account of each failure.
        if let Some(at) = stdout.find("failures:") {
            println!("\n{}", &stdout[at..]);
        }
        eprint!("{}", String::from_utf8_lossy(&output.stderr));
    }
    println!("{passed} passed, {failed} failed");
    if passed == 0 {
        return Err("the suite ran no trial".to_owned());
    }
    Ok(if failed == 0 && output.status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Regenerates `fixtures/tiny`, its golden report, and the README's sample report of it.
pub fn bless(_: &[String]) -> Result<ExitCode, String> {
    let sh = crate::shell()?;
    let cargo = crate::cargo();
    let _env = sh.push_env("DFLASH_GATE_BLESS", "1");
    for trial in [
        "fixtures::tiny::bytes_are_the_generators",
        "fixtures::tiny::golden_json",
        "fixtures::tiny::readme_sample",
    ] {
        xshell::cmd!(
            sh,
            "{cargo} test --quiet --package dflash-gate --test suite -- --exact {trial}"
        )
        .quiet()
        .run()
        .map_err(|e| format!("blessing {trial}: {e}"))?;
    }
    println!(
        "blessed fixtures/tiny, fixtures/tiny.report.json and the README's sample report; review with git diff"
    );
    Ok(ExitCode::SUCCESS)
}
