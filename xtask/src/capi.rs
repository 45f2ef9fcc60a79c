//! `cargo xtask capi-smoke`: the C library as a C++ loader's project meets it, in a throwaway copy of
//! `tests/capi-consumer` (the CMake module written with `--out` into its `cmake/`, and the example of
//! `docs/c-abi.md` beside it), configured, built and tested with ctest.

use crate::cmake::{broken_package, output, quiet, write, Tally};
use std::path::Path;
use std::process::{Command, ExitCode};

const CONSUMER: &str = "tests/capi-consumer";
const DOC: &str = "docs/c-abi.md";

/// The one ```` ```cpp ```` block of the page: the example the consumer compiles.
fn example(doc: &str) -> Result<String, String> {
    let start = doc
        .find("```cpp\n")
        .ok_or(format!("{DOC} has no ```cpp block"))?
        + "```cpp\n".len();
    let len = doc[start..]
        .find("```")
        .ok_or(format!("{DOC}: the ```cpp block does not end"))?;
    Ok(doc[start..start + len].to_owned())
}

/// The row `name`, run alone: whether ctest passed it, and what it printed.
fn row(build: &Path, name: &str) -> (bool, String) {
    output(
        Command::new("ctest")
            .current_dir(build)
            .args(["--verbose", "--no-tests=error", "-R"])
            .arg(format!("^{name}$")),
    )
}

/// Requires: configure compiles nothing (a fresh cargo target directory stays empty); the loader's
/// row passes on the good package and fails on the truncated one, naming its objection; an unreadable
/// package is "could not run"; the header compiles alone as C99 and C++17, twice in one unit; the
/// page's example compiles and passes (and on an empty config.json objects to its contents, never
/// reads it as absent); the loader under AddressSanitizer is clean on every kind of
/// input, and red when a report is leaked on purpose.
pub fn smoke(args: &[String]) -> Result<ExitCode, String> {
    if !args.is_empty() {
        return Err("usage: cargo xtask capi-smoke".to_owned());
    }
    let root = crate::root();
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let work = work.path();
    let good = root.join("fixtures/tiny");
    let broken = broken_package(work, &good)?;
    // The good package with its config.json emptied: the example reads it into a vector whose data()
    // is null, and must still say the file is there.
    let empty_config = work.join("empty-config");
    std::fs::create_dir_all(&empty_config).map_err(|e| e.to_string())?;
    std::fs::write(empty_config.join("config.json"), b"").map_err(|e| e.to_string())?;
    std::fs::copy(good.join("model.q4nx"), empty_config.join("model.q4nx"))
        .map_err(|e| format!("copying the good package's weights: {e}"))?;
    let project = work.join("consumer");
    std::fs::create_dir_all(project.join("cmake")).map_err(|e| e.to_string())?;
    for entry in std::fs::read_dir(root.join(CONSUMER)).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        std::fs::copy(entry.path(), project.join(entry.file_name()))
            .map_err(|e| format!("copying {CONSUMER}: {e}"))?;
    }
    write(&project.join("cmake/DFlashGate.cmake"))?;
    let doc = std::fs::read_to_string(root.join(DOC)).map_err(|e| format!("{DOC}: {e}"))?;
    std::fs::write(project.join("example.cpp"), example(&doc)?).map_err(|e| e.to_string())?;
    let mut tally = Tally::default();

    // A fresh target directory: configure must leave it without anything built.
    let fresh = work.join("fresh-target");
    let configure = |build: &Path, target: &Path| {
        output(
            Command::new("cmake")
                .arg("-S")
                .arg(&project)
                .arg("-B")
                .arg(build)
                .arg(format!("-DGOOD_PACKAGE={}", good.display()))
                .arg(format!("-DBROKEN_PACKAGE={}", broken.display()))
                .arg(format!("-DEMPTY_CONFIG_PACKAGE={}", empty_config.display()))
                .arg(format!("-DDFLASH_GATE_TARGET_DIR={}", target.display())),
        )
    };
    let (ok, out) = configure(&work.join("fresh-build"), &fresh);
    let built = std::fs::read_dir(&fresh).map_or(0, |d| d.count());
    tally.expect(
        ok && built == 0,
        "(a) configure compiles nothing",
        &format!("configure ok: {ok}, {built} entries in the target directory\n{out}"),
    );

    // The real build reuses one target directory under target/, so a second run builds nothing.
    let build = work.join("build");
    let (ok, out) = configure(&build, &root.join("target/capi-smoke"));
    if !ok {
        return Err(format!("cmake configure failed:\n{out}"));
    }
    // The project links the C library and registers no package row: its build must not build the
    // command-line gate (a leftover binary from an earlier run is removed first, so its absence after
    // the build says the build did not make it).
    let cli = root.join("target/capi-smoke/release/dflash-gate");
    match std::fs::remove_file(&cli) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("removing {}: {e}", cli.display()))
        }
        _ => {}
    }
    quiet(
        Command::new("cmake").arg("--build").arg(&build),
        "cmake --build",
    )?;
    tally.expect(
        !cli.exists(),
        "(a) and builds only what is linked: the C library, not the command-line gate",
        &format!("{} was built", cli.display()),
    );

    let (ok, out) = row(&build, "capi_good");
    tally.expect(
        ok && out.contains("verdict PASS"),
        "(b) the loader gates a good package's mapping in process: PASS",
        &out,
    );
    let (ok, out) = row(&build, "capi_broken");
    tally.expect(
        !ok && out.contains("verdict FAIL") && out.contains("objection container.parses"),
        "(c) a truncated package's row fails, its first objection container.parses",
        &out,
    );
    let (ok, out) = row(&build, "capi_unreadable");
    tally.expect(
        !ok && out.contains("verdict COULD NOT RUN") && out.contains("no such directory"),
        "(d) an unreadable package's row fails: could not run, saying why",
        &out,
    );
    let (ok, out) = row(&build, "capi_header_compiles");
    tally.expect(
        ok,
        "(e) the header compiles alone, C99 and C++17, -Wall -Wextra -Werror -pedantic, twice in one unit",
        &out,
    );
    let (ok, out) = row(&build, "capi_example");
    tally.expect(ok, "(f) docs/c-abi.md's example compiles and passes", &out);
    let (ok, out) = row(&build, "capi_example_empty_config");
    tally.expect(
        !ok && out.contains("refused: config.is_dflash") && !out.contains("no config.json"),
        "(f) and on an empty config.json, the example's row fails for the file's contents, not as absent",
        &out,
    );
    let (ok, out) = row(&build, "capi_asan");
    tally.expect(
        ok,
        "(g) under AddressSanitizer: no leak, no invalid read on pass, fail, unreadable, double free",
        &out,
    );
    let (ok, out) = output(
        Command::new("cmake")
            .arg(format!("-DLOADER={}", build.join("loader_asan").display()))
            .arg(format!("-DGOOD={}", good.display()))
            .arg("-DLEAK=1")
            .arg("-P")
            .arg(project.join("asan.cmake")),
    );
    tally.expect(
        // CMake wraps the message it relays: compared with white space squeezed.
        !ok && out.contains("LeakSanitizer")
            && out
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .contains("exited 86"),
        "(h) the same run with a report leaked on purpose is red",
        &out,
    );

    println!("{} passed, {} failed", tally.passed, tally.failed.len());
    Ok(if tally.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
