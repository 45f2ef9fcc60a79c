//! `cargo xtask cmake`: the CMake support that registers the gate's ctest rows, two ways.
//!
//! - The module, committed at `cmake/DFlashGate.cmake`, for `include()` from a checkout: it builds the
//!   binary from that checkout. `--out FILE` anywhere else writes a copy that records this checkout, so
//!   it works wherever it is put.
//! - The package config, `DFlashGateConfig.cmake` and its version file, which `--install-dir DIR`
//!   writes (say `<prefix>/lib/cmake/DFlashGate` beside a `cargo install --root <prefix>`), for
//!   `find_package(DFlashGate)`: it runs the installed binary, and builds nothing.
//!
//! Both are one text (`cmake_files.rs`) with the mode filled in, so the rows they register cannot
//! drift apart. `--check` (and the tests below) fail when a written copy is stale. `cargo xtask cmake-smoke` proves
//! both ways on the consumer projects in `tests/cmake-consumer` and `tests/cmake-consumer-installed`.

use crate::cmake_files::{
    installed_files, module, text, version, Kind, CONFIG_FILE, CONFIG_VERSION_FILE,
};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub const MODULE_PATH: &str = "cmake/DFlashGate.cmake";

const USAGE: &str = "usage: cargo xtask cmake [--out FILE | --install-dir DIR | --check [FILE...] | --check --install-dir DIR]";

/// `cmake` (print the module), `--out FILE` (write it), `--install-dir DIR` (write the package config
/// and its version file into DIR), `--check FILE...` or `--check --install-dir DIR` (exit 1 if any is
/// stale; what each file should be is told by its name; no file: the committed module).
pub fn run(args: &[String]) -> Result<ExitCode, String> {
    match args {
        [] => {
            print!("{}", module(None));
            Ok(ExitCode::SUCCESS)
        }
        [flag, file] if flag == "--out" => {
            write(Path::new(file))?;
            println!("wrote {file}");
            Ok(ExitCode::SUCCESS)
        }
        [flag, dir] if flag == "--install-dir" => {
            std::fs::create_dir_all(dir).map_err(|e| format!("{dir}: {e}"))?;
            for file in installed_files(Path::new(dir)) {
                write(&file)?;
                println!("wrote {}", file.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        [flag] if flag == "--check" => check(&[crate::root().join(MODULE_PATH)]),
        [flag, install, dir] if flag == "--check" && install == "--install-dir" => {
            check(&installed_files(Path::new(dir)))
        }
        [flag, files @ ..] if flag == "--check" && !files.is_empty() => {
            check(&files.iter().map(PathBuf::from).collect::<Vec<_>>())
        }
        _ => Err(USAGE.to_owned()),
    }
}

pub(crate) fn write(file: &Path) -> Result<(), String> {
    std::fs::write(file, text_for(file)).map_err(|e| format!("{}: {e}", file.display()))
}

/// Every file is what would be written there now; else each stale one is named, with the command that
/// rewrites it, and the exit status is 1.
fn check(files: &[PathBuf]) -> Result<ExitCode, String> {
    let mut stale = 0;
    for file in files {
        let on_disk =
            std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        if on_disk != text_for(file) {
            let rewrite = match Kind::of(file) {
                Kind::Module => format!("--out {}", file.display()),
                Kind::Config | Kind::ConfigVersion => format!(
                    "--install-dir {}",
                    file.parent().unwrap_or(Path::new(".")).display()
                ),
            };
            eprintln!(
                "{} is stale: run `cargo xtask cmake {rewrite}`",
                file.display()
            );
            stale += 1;
        }
    }
    Ok(if stale == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The text for `file`, told by its name: a copy in the checkout's own `cmake/` finds the checkout from
/// where it sits; a copy anywhere else records this checkout.
fn text_for(file: &Path) -> String {
    let root = crate::root();
    let kind = Kind::of(file);
    let in_checkout = file
        .file_name()
        .map(|name| root.join("cmake").join(name))
        .unwrap_or_default();
    let resolved = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .canonicalize()
        .ok()
        .zip(file.file_name())
        .map(|(dir, name)| dir.join(name));
    let is_committed = resolved
        .is_some_and(|r| r == in_checkout || in_checkout.canonicalize().is_ok_and(|c| c == r));
    if is_committed {
        text(kind, None)
    } else {
        text(kind, Some(&root))
    }
}

/// The consumer projects the smoke test builds (committed, so they double as examples): one that
/// includes the module from a checkout, one that finds an installed gate.
const CONSUMER: &str = "tests/cmake-consumer";
const CONSUMER_INSTALLED: &str = "tests/cmake-consumer-installed";

/// One consumer build: a copy of a consumer project, its build directory, and what it is configured
/// with every time.
struct Consumer {
    project: PathBuf,
    build: PathBuf,
    defines: Vec<String>,
}

impl Consumer {
    /// A copy of the project `from` (every file of its folder: the CMakeLists.txt and any source it
    /// compiles); for the module's consumer, with the module written with `--out` into the project's
    /// own folder, as a user would.
    fn new(work: &Path, name: &str, from: &str, defines: &[String]) -> Result<Consumer, String> {
        let project = work.join(name);
        std::fs::create_dir_all(project.join("cmake")).map_err(|e| e.to_string())?;
        let source = crate::root().join(from);
        let entries =
            std::fs::read_dir(&source).map_err(|e| format!("{}: {e}", source.display()))?;
        for entry in entries {
            let path = entry
                .map_err(|e| format!("{}: {e}", source.display()))?
                .path();
            if path.is_file() {
                let to = project.join(path.file_name().unwrap_or_default());
                std::fs::copy(&path, &to).map_err(|e| {
                    format!("copying the consumer project's {}: {e}", path.display())
                })?;
            }
        }
        if from == CONSUMER {
            write(&project.join("cmake/DFlashGate.cmake"))?;
        }
        Ok(Consumer {
            build: work.join(format!("{name}-build")),
            project,
            defines: defines.to_vec(),
        })
    }

    /// Configures with `defines` beside the consumer's own, and `env` set (the PATH, say): its success
    /// and its output.
    fn try_configure(&self, defines: &[String], env: &[(&str, &str)]) -> (bool, String) {
        let mut cmd = std::process::Command::new("cmake");
        cmd.arg("-S")
            .arg(&self.project)
            .arg("-B")
            .arg(&self.build)
            .args(&self.defines)
            .args(defines)
            .envs(env.iter().copied())
            // Without the reference reader, the differential trial is listed as ignored: the row
            // that must be reported skipped.
            .env_remove("DFLASH_GATE_PYTHON");
        output(&mut cmd)
    }

    /// Configures with `defines` and `path` as the PATH: whether it succeeded and found `binary` as
    /// the binary the rows run (every installed way's first question), and its output.
    fn configure_finding(&self, defines: &[String], path: &str, binary: &Path) -> (bool, String) {
        let (ok, out) = self.try_configure(defines, &[("PATH", path)]);
        let found = self.cached("DFLASH_GATE_EXECUTABLE").as_deref() == binary.to_str();
        (ok && found, out)
    }

    fn configure(&self, defines: &[String], env: &[(&str, &str)]) -> Result<(), String> {
        match self.try_configure(defines, env) {
            (true, _) => Ok(()),
            (false, out) => Err(format!("cmake configure failed:\n{out}")),
        }
    }

    fn build(&self) -> Result<(), String> {
        quiet(
            std::process::Command::new("cmake")
                .arg("--build")
                .arg(&self.build),
            "cmake --build",
        )
    }

    /// `ctest` over the rows matching `regex` with the hub cache `HF_HUB_CACHE` names.
    fn ctest_with_cache(&self, regex: &str, cache: &Path) -> (bool, String) {
        let mut cmd = std::process::Command::new("ctest");
        cmd.current_dir(&self.build)
            .args(["--output-on-failure", "--no-tests=error", "-R", regex])
            .env("HF_HUB_CACHE", cache);
        output(&mut cmd)
    }

    /// `ctest` over the rows matching `regex`, with `path` as the PATH when given: its exit success
    /// and its output.
    fn ctest(&self, regex: &str, env_removed: &[&str], path: Option<&str>) -> (bool, String) {
        let mut cmd = std::process::Command::new("ctest");
        cmd.current_dir(&self.build)
            // A regex that matches no row is a failure, never a pass.
            .args([
                "--output-on-failure",
                "--no-tests=error",
                "-j2",
                "-R",
                regex,
            ]);
        for var in env_removed {
            cmd.env_remove(var);
        }
        if let Some(path) = path {
            cmd.env("PATH", path);
        }
        output(&mut cmd)
    }

    /// The rows as ctest lists them: name, command and properties of each.
    fn rows(&self) -> Result<Vec<Row>, String> {
        let out = std::process::Command::new("ctest")
            .current_dir(&self.build)
            .arg("--show-only=json-v1")
            .output()
            .map_err(|e| format!("ctest --show-only: {e}"))?;
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("ctest --show-only=json-v1 is not JSON: {e}"))?;
        let tests = doc["tests"].as_array().cloned().unwrap_or_default();
        Ok(tests
            .iter()
            .map(|t| {
                let property = |name: &str| {
                    t["properties"]
                        .as_array()
                        .and_then(|ps| ps.iter().find(|p| p["name"] == name))
                        .map(|p| p["value"].clone())
                        .unwrap_or(serde_json::Value::Null)
                };
                let strings = |value: &serde_json::Value| -> Vec<String> {
                    value
                        .as_array()
                        .map(|vs| {
                            vs.iter()
                                .filter_map(|v| v.as_str().map(str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default()
                };
                let command = strings(&t["command"]);
                Row {
                    name: t["name"].as_str().unwrap_or_default().to_owned(),
                    program: command.first().cloned().unwrap_or_default(),
                    command,
                    working_directory: property("WORKING_DIRECTORY")
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    environment: strings(&property("ENVIRONMENT")),
                    labels: strings(&property("LABELS")),
                    timeout: property("TIMEOUT").as_f64(),
                }
            })
            .collect())
    }

    /// A variable from the build tree's cache.
    fn cached(&self, name: &str) -> Option<String> {
        let cache = std::fs::read_to_string(self.build.join("CMakeCache.txt")).ok()?;
        cache.lines().find_map(|line| {
            let (key, value) = line.split_once('=')?;
            (key.split(':').next() == Some(name)).then(|| value.to_owned())
        })
    }
}

/// One ctest row.
struct Row {
    name: String,
    program: String,
    /// The program and its arguments.
    command: Vec<String>,
    working_directory: String,
    /// `NAME=value` each.
    environment: Vec<String>,
    labels: Vec<String>,
    timeout: Option<f64>,
}

impl Row {
    fn names(rows: &[Row]) -> Vec<&str> {
        rows.iter().map(|r| r.name.as_str()).collect()
    }

    fn describe(rows: &[Row]) -> String {
        rows.iter()
            .map(|r| {
                format!(
                    "  {}: runs {:?}, labels {:?}, timeout {:?}\n",
                    r.name, r.program, r.labels, r.timeout
                )
            })
            .collect()
    }
}

/// The package rows are exactly good, broken and unproven, each running `program` directly, labelled
/// `dflash_gate`, with a timeout (unproven's its own 60 s).
fn package_rows_hold(rows: &[Row], program: &Path) -> bool {
    // The hub cache's rows, which only the checkout's plain consumer asks for (HUB_ID).
    let mut names: Vec<_> = Row::names(rows)
        .into_iter()
        .filter(|n| !n.starts_with("dflash_gate_package_from_cache"))
        .collect();
    names.sort_unstable();
    names
        == [
            "dflash_gate_package_broken",
            "dflash_gate_package_good",
            "dflash_gate_package_unproven",
        ]
        && rows.iter().all(|r| {
            Path::new(&r.program) == program
                && r.labels == ["dflash_gate"]
                && r.timeout.is_some_and(|t| t > 0.0)
        })
        && rows
            .iter()
            .any(|r| r.name.ends_with("unproven") && r.timeout == Some(60.0))
}

/// A revision the smoke test's hub cache does not hold.
const NOT_HELD: &str = "v-not-held";

/// A hub cache holding `package`'s files as the draft `org/draft` at `refs/main`, as the hub client
/// lays a download out (each file a blob, the snapshot's names links to them).
fn hub_cache(work: &Path, package: &Path) -> Result<PathBuf, String> {
    let cache = work.join("hub");
    let repo = cache.join("models--org--draft");
    let commit = "4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a";
    let snapshot = repo.join("snapshots").join(commit);
    let io = |e: std::io::Error| format!("writing the hub cache in {}: {e}", cache.display());
    for dir in [&snapshot, &repo.join("blobs"), &repo.join("refs")] {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    std::fs::write(repo.join("refs/main"), commit).map_err(io)?;
    for (i, name) in ["config.json", "model.q4nx"].iter().enumerate() {
        let blob = format!("blob{i}");
        std::fs::copy(package.join(name), repo.join("blobs").join(&blob)).map_err(io)?;
        std::os::unix::fs::symlink(format!("../../blobs/{blob}"), snapshot.join(name))
            .map_err(io)?;
    }
    Ok(cache)
}

/// `text` with every run of white space one space: CMake wraps the messages it relays.
fn squeezed(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Runs `cmd`: its success and what it printed.
pub(crate) fn output(cmd: &mut std::process::Command) -> (bool, String) {
    match cmd.output() {
        Ok(out) => (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        ),
        Err(e) => (false, format!("{cmd:?}: {e}")),
    }
}

/// Runs `cmd`, and only on failure shows what it printed.
pub(crate) fn quiet(cmd: &mut std::process::Command, what: &str) -> Result<(), String> {
    match output(cmd) {
        (true, _) => Ok(()),
        (false, out) => Err(format!("{what} failed:\n{out}")),
    }
}

/// Whether cargo's target directory holds a compiled test suite (any `suite-<hash>` executable).
fn suite_compiled(cargo_target: &Path) -> bool {
    ["debug/deps", "release/deps"].iter().any(|dir| {
        std::fs::read_dir(cargo_target.join(dir)).is_ok_and(|entries| {
            entries.filter_map(Result::ok).any(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with("suite-") && !name.contains('.')
            })
        })
    })
}

/// The PATH without any directory that holds `cargo` or a `dflash-gate`: configure and test with it
/// prove that the installed way needs no cargo, and that it finds the binary where it says.
fn path_without_cargo() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let kept: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|dir| !dir.join("cargo").exists() && !dir.join("dflash-gate").exists())
        .collect();
    std::env::join_paths(kept)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Tallies the smoke test's expectations and prints one line for each.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) passed: usize,
    pub(crate) failed: Vec<String>,
}

impl Tally {
    pub(crate) fn expect(&mut self, holds: bool, shows: &str, detail: &str) {
        if holds {
            println!("PASS  {shows}");
            self.passed += 1;
        } else {
            println!("FAIL  {shows}\n{detail}");
            self.failed.push(shows.to_owned());
        }
    }
}

/// A copy of the package `good` in `work/broken`, its weight file one byte short: the container must be
/// refused.
pub(crate) fn broken_package(work: &Path, good: &Path) -> Result<PathBuf, String> {
    let broken = work.join("broken");
    std::fs::create_dir(&broken).map_err(|e| e.to_string())?;
    for file in ["config.json", "model.q4nx"] {
        std::fs::copy(good.join(file), broken.join(file)).map_err(|e| e.to_string())?;
    }
    let weights = std::fs::OpenOptions::new()
        .write(true)
        .open(broken.join("model.q4nx"))
        .map_err(|e| e.to_string())?;
    let len = weights.metadata().map_err(|e| e.to_string())?.len();
    weights.set_len(len - 1).map_err(|e| e.to_string())?;
    Ok(broken)
}

/// Both ways a consumer meets the gate, each in a throwaway copy of its committed project:
/// - from a checkout (`tests/cmake-consumer`, the module written with `--out`), with a fresh cargo
///   target directory: (a) it configures; (b) a row whose trial did not run is not Passed (gone:
///   Failed; ignored: skipped); (c) a package row fails on a broken package and passes on a good one;
///   (d) configure compiles nothing when no suite rows are asked for, and the package rows run the
///   binary the build target built, compiling no test suite either; asked for, the suite rows are
///   registered, two per-trial rows pass, and the whole-suite row's command is `cargo xtask
///   selftest`, which, filtered, passes on a passing trial and fails on a failing one or on none
///   (never the whole suite again: `cargo test` ran it already);
/// - installed (`tests/cmake-consumer-installed`): `cargo install` into a throwaway prefix and
///   `--install-dir <prefix>/lib/cmake/DFlashGate`, then find_package finds the binary beside the
///   config (or on the PATH), with no cargo on the PATH and nothing built, refuses a missing binary,
///   one of another version and a request for another version, and builds from the checkout when
///   asked; `--check` sees a stale package config.
pub fn smoke(args: &[String]) -> Result<ExitCode, String> {
    let usage = || format!("usage: cargo xtask {SMOKE_USAGE}");
    let mut way = None;
    let mut given_archive = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--archive" => {
                let file = rest.next().ok_or_else(usage)?;
                if given_archive.replace(PathBuf::from(file)).is_some() {
                    return Err(format!("--archive given twice; {}", usage()));
                }
            }
            "checkout" | "installed" | "archive" if way.is_none() => way = Some(arg.as_str()),
            _ => return Err(usage()),
        }
    }
    let wanted = |name: &str| way.is_none_or(|w| w == name);
    let (checkout, installed_way, archive_way) =
        (wanted("checkout"), wanted("installed"), wanted("archive"));
    let root = crate::root();
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let work = work.path();
    let good = root.join("fixtures/tiny");
    let broken = broken_package(work, &good)?;
    let packages = [
        format!("-DGOOD_PACKAGE={}", good.display()),
        format!("-DBROKEN_PACKAGE={}", broken.display()),
    ];
    let cargo_target = work.join("cargo-target");
    let mut tally = Tally::default();
    if checkout {
        from_checkout(&mut tally, work, &packages, &cargo_target, &good, &broken)?;
    }
    if installed_way {
        installed(&mut tally, work, &packages)?;
    }
    if archive_way {
        from_archive(&mut tally, work, &packages, given_archive.as_deref())?;
    }
    println!("{} passed, {} failed", tally.passed, tally.failed.len());
    Ok(if tally.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Cargo's target directory for this workspace, as cargo itself picks it.
fn workspace_target() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::root().join("target"))
}

/// The module included from a checkout (the way the first registration worked, kept).
fn from_checkout(
    tally: &mut Tally,
    work: &Path,
    packages: &[String],
    cargo_target: &Path,
    good: &Path,
    broken: &Path,
) -> Result<(), String> {
    let mut defines = packages.to_vec();
    defines.push(format!(
        "-DDFLASH_GATE_TARGET_DIR={}",
        cargo_target.display()
    ));
    // A draft by its Hugging Face id, in a hub cache the rows are given at test time.
    let cache = hub_cache(work, good)?;
    defines.push("-DHUB_ID=org/draft".to_owned());
    defines.push(format!("-DHUB_REVISION={NOT_HELD}"));
    // Package rows only.
    let plain = Consumer::new(work, "plain", CONSUMER, &defines)?;
    plain.configure(&[], &[])?;
    tally.expect(
        true,
        "(a) the module written by --out into the project's cmake/ configures",
        "",
    );
    tally.expect(
        !suite_compiled(cargo_target),
        "(d) configure without suite rows compiled no test suite",
        &format!("{} holds a suite binary", cargo_target.display()),
    );
    plain.build()?;
    // (ctest names a row's program only once it exists.)
    let rows = plain.rows()?;
    let built = cargo_target.join("release/dflash-gate");
    tally.expect(
        package_rows_hold(&rows, &built),
        "the module registers only the package rows, each running the built binary, labelled dflash_gate, with a timeout",
        &Row::describe(&rows),
    );
    tally.expect(
        built.is_file() && !suite_compiled(cargo_target),
        "the build target built dflash-gate into the build tree's cargo target, and no suite",
        &format!("{}", cargo_target.display()),
    );
    let (ok, out) = plain.ctest("^dflash_gate_package_good$", &[], None);
    tally.expect(ok, "(c) the good package's row passes", &out);
    let (ok, out) = plain.ctest("^dflash_gate_package_broken$", &[], None);
    tally.expect(!ok, "(c) the truncated package's row fails", &out);
    // The fixture has no MANIFEST.sha256: asked to verify one, the row is UNDECIDED (exit 3).
    let (ok, out) = plain.ctest("^dflash_gate_package_unproven$", &[], None);
    tally.expect(!ok, "a MANIFEST row fails when there is no manifest", &out);
    let (ok, out) = plain.ctest_with_cache("^dflash_gate_package_from_cache$", &cache);
    // Made a path (as rows made every argument before), org/draft is no directory: exit 2.
    tally.expect(
        ok,
        "a row naming a draft by its ORG/NAME gates it from the hub cache, not as a path",
        &out,
    );
    let (ok, out) = plain.ctest_with_cache("^dflash_gate_package_from_cache_at$", &cache);
    tally.expect(
        !ok && out.contains(NOT_HELD),
        "a row's REVISION reaches the gate: one the cache does not hold fails naming it",
        &out,
    );
    tally.expect(
        !suite_compiled(cargo_target),
        "(d) the package rows compiled no test suite either",
        "",
    );

    // With the suite's rows, and a package named to the suite at configure time only. These rows
    // compile the suite in the workspace's own target directory, where the README's `cargo test` has
    // already built it: compiling it again in a fresh directory proved nothing the plain consumer's
    // fresh build does not, and cost CI minutes (configure still runs cargo, which rebuilds whatever
    // is stale, so a checkout never tested before works too).
    let mut suite_defines = packages.to_vec();
    suite_defines.push(format!(
        "-DDFLASH_GATE_TARGET_DIR={}",
        workspace_target().display()
    ));
    let arms = Consumer::new(work, "arms", CONSUMER, &suite_defines)?;
    let named = good.to_string_lossy().into_owned();
    arms.configure(
        &[
            "-DWITH_ARM_ROWS=ON".to_owned(),
            "-DWITH_SUITE_ROW=ON".to_owned(),
        ],
        &[("DFLASH_GATE_PACKAGES", &named)],
    )?;
    let rows = arms.rows()?;
    let names = Row::names(&rows);
    tally.expect(
        names.contains(&"dflash_gate::arms::pass::small_well_formed")
            && names.contains(&"dflash_gate::packages::tiny::container.parses")
            && names.contains(&"dflash_gate_own_suite")
            && rows
                .iter()
                .filter(|r| !r.name.starts_with("dflash_gate_package_"))
                .all(|r| r.labels == ["dflash_gate_own_suite"] && r.timeout.is_some()),
        "asked for, the suite's rows are added: a row per trial (packages named at configure included) and dflash_gate_own_suite, labelled dflash_gate_own_suite",
        &format!("{names:?}"),
    );
    // A few of the per-trial rows, not all of them (some 400: minutes of cargo starting once a
    // row): they are one template, and a row of each kind of trial shows that template passes.
    let (ok, out) = arms.ctest(ARM_ROWS_RUN, &[], None);
    tally.expect(
        ok && out.contains("0 tests failed out of 2"),
        "a pass arm's row and a control arm's row run and pass",
        &out,
    );
    // (b) The package is not named at test time: its trial does not run, and its row must not pass.
    let (ok, out) = arms.ctest(
        "^dflash_gate::packages::tiny::container[.]parses$",
        &["DFLASH_GATE_PACKAGES"],
        None,
    );
    tally.expect(
        !ok && !out.contains(" Passed ") && out.contains("Failed"),
        "(b) a row whose trial did not run (package named at configure only) fails, not Passed",
        &out,
    );
    // (b) An ignored trial (no reference reader to compare with) is skipped, not Passed.
    let (_, out) = arms.ctest(
        "^dflash_gate::differential::",
        &["DFLASH_GATE_PYTHON"],
        None,
    );
    tally.expect(
        out.contains("Skipped") && !out.contains(" Passed "),
        "(b) a row whose trial was ignored is reported skipped, not Passed",
        &out,
    );
    suite_row_holds(tally, &rows, &arms, broken);
    Ok(())
}

/// The per-trial rows the smoke runs: a pass arm and a control arm.
const ARM_ROWS_RUN: &str =
    "^dflash_gate::arms::(pass::small_well_formed|control::not_a_dflash_config)$";

/// The whole-suite row, without running the whole suite (`cargo test` has, minutes before): its
/// command is `cargo xtask selftest` in the checkout with the configured target directory, and that
/// very command, a trial filter added, passes when its trial passes, fails when a trial fails, and
/// fails when no trial ran.
fn suite_row_holds(tally: &mut Tally, rows: &[Row], consumer: &Consumer, broken: &Path) {
    let Some(row) = rows.iter().find(|r| r.name == "dflash_gate_own_suite") else {
        tally.expect(
            false,
            "the dflash_gate_own_suite row is registered",
            &Row::describe(rows),
        );
        return;
    };
    let cargo = consumer.cached("DFLASH_GATE_CARGO").unwrap_or_default();
    let target = format!("CARGO_TARGET_DIR={}", workspace_target().display());
    let holds = row.command == [cargo.as_str(), "xtask", "selftest"]
        && Path::new(&row.working_directory) == crate::root()
        && row.environment == [target.as_str()];
    tally.expect(
        holds,
        "the dflash_gate_own_suite row runs `cargo xtask selftest` (the cached cargo) in the checkout, with the configured target directory",
        &format!(
            "command {:?}, in {:?}, environment {:?}",
            row.command, row.working_directory, row.environment
        ),
    );
    if !holds {
        // The command below would not be the row's.
        return;
    }
    // The row's command as ctest runs it, with `extra` arguments, and `packages` named to the suite
    // or none.
    let run = |extra: &[&str], packages: Option<&Path>| {
        let mut cmd = std::process::Command::new(&row.command[0]);
        cmd.args(&row.command[1..])
            .args(extra)
            .current_dir(&row.working_directory);
        match packages {
            Some(dir) => cmd.env("DFLASH_GATE_PACKAGES", dir),
            None => cmd.env_remove("DFLASH_GATE_PACKAGES"),
        };
        for pair in &row.environment {
            if let Some((name, value)) = pair.split_once('=') {
                cmd.env(name, value);
            }
        }
        output(&mut cmd)
    };
    let (ok, out) = run(&["arms::pass::small_well_formed", "--exact"], None);
    tally.expect(
        ok && out.contains("PASS  arms::pass::small_well_formed")
            && out.contains("1 passed, 0 failed"),
        "the dflash_gate_own_suite row's command, filtered to one trial, runs it and passes",
        &out,
    );
    let (ok, out) = run(&["packages::"], Some(broken));
    tally.expect(
        !ok && out.contains("FAIL  packages::broken::"),
        "the dflash_gate_own_suite row's command fails when a trial fails (the truncated package named)",
        &out,
    );
    let (ok, out) = run(&["no_trial_has_this_name", "--exact"], None);
    tally.expect(
        !ok && out.contains("the suite ran no trial"),
        "the dflash_gate_own_suite row's command fails when no trial ran",
        &out,
    );
}

/// find_package(DFlashGate) against a `cargo install`-ed binary.
fn installed(tally: &mut Tally, work: &Path, packages: &[String]) -> Result<(), String> {
    let root = crate::root();
    let prefix = work.join("prefix");
    // Offline, from the workspace's lock file, into the workspace's target directory (so its release
    // build is reused, and later runs cost little).
    let install_target = workspace_target();
    let started = std::time::Instant::now();
    quiet(
        std::process::Command::new(crate::cargo())
            .current_dir(&root)
            .env("CARGO_TARGET_DIR", &install_target)
            .args([
                "install",
                "--quiet",
                "--locked",
                "--offline",
                "--path",
                "gate",
                "--root",
            ])
            .arg(&prefix),
        "cargo install",
    )?;
    println!(
        "      (cargo install --locked --offline --path gate --root <prefix>: {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    let installed_binary = prefix.join("bin/dflash-gate");
    let config_dir = prefix.join("lib/cmake/DFlashGate");
    run(&[
        "--install-dir".to_owned(),
        config_dir.to_string_lossy().into_owned(),
    ])?;

    // --check: the files just written are current; an edited config or version file is stale.
    let check = |dir: &Path| {
        run(&[
            "--check".to_owned(),
            "--install-dir".to_owned(),
            dir.to_string_lossy().into_owned(),
        ])
    };
    tally.expect(
        check(&config_dir)? == ExitCode::SUCCESS,
        "--check --install-dir passes on the package config just written",
        "",
    );
    for (stale, file, edit) in [
        (
            "stale-config",
            CONFIG_FILE,
            "set(_dflash_gate_version \"0.0.0\")\n",
        ),
        (
            "stale-version",
            CONFIG_VERSION_FILE,
            "set(PACKAGE_VERSION \"0.0.0\")\n",
        ),
    ] {
        let stale = work.join(stale);
        run(&[
            "--install-dir".to_owned(),
            stale.to_string_lossy().into_owned(),
        ])?;
        let mut text = std::fs::read_to_string(stale.join(file)).map_err(|e| e.to_string())?;
        text.push_str(edit);
        std::fs::write(stale.join(file), text).map_err(|e| e.to_string())?;
        tally.expect(
            check(&stale)? == ExitCode::FAILURE,
            &format!("--check --install-dir fails on a stale {file}"),
            "",
        );
    }

    let no_cargo = path_without_cargo();
    let consumer = Consumer::new(work, "installed", CONSUMER_INSTALLED, packages)?;
    let at_prefix = format!("-DCMAKE_PREFIX_PATH={}", prefix.display());
    let (found, out) = consumer.configure_finding(
        std::slice::from_ref(&at_prefix),
        &no_cargo,
        &installed_binary,
    );
    tally.expect(
        found,
        "find_package(DFlashGate 0.1) with CMAKE_PREFIX_PATH=<prefix> configures with no cargo on the PATH, and finds the binary beside the config",
        &out,
    );
    let rows = consumer.rows()?;
    tally.expect(
        package_rows_hold(&rows, &installed_binary),
        "it registers only the package rows (no suite row), each running the installed binary, labelled dflash_gate, with a timeout",
        &Row::describe(&rows),
    );
    // Never built: the rows run as configured.
    let (ok, out) = consumer.ctest("^dflash_gate_package_good$", &[], Some(&no_cargo));
    tally.expect(
        ok,
        "the good package's row passes (no build, no cargo on the PATH)",
        &out,
    );
    let (ok, out) = consumer.ctest("^dflash_gate_package_broken$", &[], Some(&no_cargo));
    tally.expect(
        !ok && out.contains("Failed"),
        "the truncated package's row fails",
        &out,
    );
    let (ok, out) = consumer.ctest("^dflash_gate_package_unproven$", &[], Some(&no_cargo));
    tally.expect(!ok, "a MANIFEST row fails when there is no manifest", &out);
    tally.expect(
        !consumer.build.join("dflash-gate-cargo").exists(),
        "nothing was built from source in the build tree",
        "",
    );
    let wanted = {
        let mut parts = version().split('.');
        let major = parts.next().unwrap_or("0");
        let minor: u64 = parts.next().and_then(|m| m.parse().ok()).unwrap_or(0);
        format!("{major}.{}", minor + 1)
    };
    let later = Consumer::new(work, "later", CONSUMER_INSTALLED, packages)?;
    let (ok, out) = later.try_configure(
        &[at_prefix.clone(), format!("-DDFLASH_GATE_WANTED={wanted}")],
        &[("PATH", &no_cargo)],
    );
    tally.expect(
        !ok && squeezed(&out).contains(&format!("version: {}", version())),
        &format!(
            "find_package(DFlashGate {wanted}) refuses this {}",
            version()
        ),
        &out,
    );

    // Found by its directory alone (no prefix searched), the config still finds the binary beside it.
    let beside = Consumer::new(work, "beside", CONSUMER_INSTALLED, packages)?;
    let (found, out) = beside.configure_finding(
        &[format!("-DDFlashGate_DIR={}", config_dir.display())],
        &no_cargo,
        &installed_binary,
    );
    tally.expect(
        found,
        "with DFlashGate_DIR=<prefix>/lib/cmake/DFlashGate and no prefix searched, the binary in <prefix>/bin is found",
        &out,
    );

    // A config with no binary beside it: the PATH's is used; with none there either, not found.
    let bare = work.join("bare/lib/cmake/DFlashGate");
    run(&[
        "--install-dir".to_owned(),
        bare.to_string_lossy().into_owned(),
    ])?;
    let at_bare = format!("-DDFlashGate_DIR={}", bare.display());
    let on_path = Consumer::new(work, "on-path", CONSUMER_INSTALLED, packages)?;
    let path = format!("{}:{no_cargo}", prefix.join("bin").display());
    let (found, out) =
        on_path.configure_finding(std::slice::from_ref(&at_bare), &path, &installed_binary);
    let (passes, ctest_out) = on_path.ctest("^dflash_gate_package_good$", &[], Some(&no_cargo));
    tally.expect(
        found && passes,
        "no binary beside the config: the one on the PATH is found, and its row passes",
        &format!("{out}{ctest_out}"),
    );
    let missing = Consumer::new(work, "missing", CONSUMER_INSTALLED, packages)?;
    let (ok, out) = missing.try_configure(&[at_bare], &[("PATH", &no_cargo)]);
    tally.expect(
        !ok && squeezed(&out).contains("no dflash-gate binary in")
            && squeezed(&out).contains("nor on the PATH"),
        "no binary beside the config nor on the PATH: DFlashGate is not found, saying where it looked",
        &out,
    );
    // A binary of another version beside the config.
    let other = work.join("other");
    std::fs::create_dir_all(other.join("bin")).map_err(|e| e.to_string())?;
    let fake = other.join("bin/dflash-gate");
    std::fs::write(&fake, "#!/bin/sh\necho 'dflash-gate 9.9.9'\n").map_err(|e| e.to_string())?;
    make_executable(&fake)?;
    run(&[
        "--install-dir".to_owned(),
        other
            .join("lib/cmake/DFlashGate")
            .to_string_lossy()
            .into_owned(),
    ])?;
    let mismatched = Consumer::new(work, "mismatched", CONSUMER_INSTALLED, packages)?;
    let (ok, out) = mismatched.try_configure(
        &[format!("-DCMAKE_PREFIX_PATH={}", other.display())],
        &[("PATH", &no_cargo)],
    );
    tally.expect(
        !ok && squeezed(&out).contains("is dflash-gate 9.9.9, but this package config is for"),
        "a binary that says another version is refused",
        &out,
    );

    // Asked to, the package config builds the binary from the checkout it records (into the target
    // directory cargo install just filled, so cargo has little to do) and adds the suite row.
    let from_source = Consumer::new(work, "from-source", CONSUMER_INSTALLED, packages)?;
    from_source.configure(
        &[
            at_prefix,
            "-DDFLASH_GATE_BUILD_FROM_SOURCE=ON".to_owned(),
            "-DWITH_SUITE_ROW=ON".to_owned(),
            format!("-DDFLASH_GATE_TARGET_DIR={}", install_target.display()),
        ],
        &[],
    )?;
    from_source.build()?;
    let rows = from_source.rows()?;
    let built = install_target.join("release/dflash-gate");
    let (package, suite): (Vec<Row>, Vec<Row>) = rows
        .into_iter()
        .partition(|r| r.name.starts_with("dflash_gate_package_"));
    tally.expect(
        package_rows_hold(&package, &built)
            && Row::names(&suite) == ["dflash_gate_own_suite"]
            && suite[0].labels == ["dflash_gate_own_suite"],
        "DFLASH_GATE_BUILD_FROM_SOURCE=ON: the rows run the binary built from the checkout; WITH_SUITE_ROW adds dflash_gate_own_suite",
        &format!("{}{}", Row::describe(&package), Row::describe(&suite)),
    );
    let (ok, out) = from_source.ctest("^dflash_gate_package_good$", &[], None);
    let (fails, _) = from_source.ctest("^dflash_gate_package_broken$", &[], None);
    tally.expect(
        ok && !fails,
        "built from source, the good package's row passes and the truncated one's fails",
        &out,
    );
    Ok(())
}

/// `cmake-smoke`'s arguments, for its usage line and `cargo xtask help`.
pub const SMOKE_USAGE: &str = "cmake-smoke [checkout | installed | archive] [--archive FILE]";

/// find_package(DFlashGate) against the release archive unpacked alone into a fresh prefix: `FILE`
/// (say, the one `cargo xtask dist` just wrote), else an archive made here as `cargo xtask dist`
/// makes it. Nothing of the checkout is used but the consumer project and the test packages, and
/// cargo is not on the PATH: the archive must be complete by itself. Its package config records no
/// checkout; it finds the archive's own binary; the package rows pass and fail as they must; and a C
/// program links the archive's C library through the imported target dflash_gate::dflash_gate and
/// gates the same packages in process.
fn from_archive(
    tally: &mut Tally,
    work: &Path,
    packages: &[String],
    given: Option<&Path>,
) -> Result<(), String> {
    let archive = match given {
        Some(file) => file.to_path_buf(),
        None => crate::dist::make(None, &work.join("dist"))?.0,
    };
    let unpacked = work.join("unpacked");
    std::fs::create_dir_all(&unpacked).map_err(|e| format!("{}: {e}", unpacked.display()))?;
    quiet(
        std::process::Command::new("tar")
            .arg("-xzf")
            .arg(&archive)
            .arg("-C")
            .arg(&unpacked),
        &format!("unpacking {}", archive.display()),
    )?;
    // The archive holds one directory, dflash-gate-<version>-<triple>: that is the prefix.
    let tops: Vec<PathBuf> = std::fs::read_dir(&unpacked)
        .map_err(|e| format!("{}: {e}", unpacked.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    let [prefix] = tops.as_slice() else {
        return Err(format!(
            "{} holds {} top-level entries, not the one directory dflash-gate-<version>-<triple>",
            archive.display(),
            tops.len()
        ));
    };
    let binary = prefix.join("bin/dflash-gate");
    let config = prefix.join("lib/cmake/DFlashGate").join(CONFIG_FILE);
    let root = crate::root().to_string_lossy().into_owned();
    let recorded = std::fs::read_to_string(&config).unwrap_or_default();
    tally.expect(
        !recorded.is_empty() && !recorded.contains(&root),
        "the archive's package config is there and names no checkout",
        &format!("{}: {} bytes", config.display(), recorded.len()),
    );

    let no_cargo = path_without_cargo();
    let consumer = Consumer::new(work, "from-archive", CONSUMER_INSTALLED, packages)?;
    let (found, out) = consumer.configure_finding(
        &[
            format!("-DCMAKE_PREFIX_PATH={}", prefix.display()),
            "-DWITH_C_LOADER=ON".to_owned(),
        ],
        &no_cargo,
        &binary,
    );
    tally.expect(
        found,
        "find_package(DFlashGate 0.1) with CMAKE_PREFIX_PATH=<unpacked archive> configures with no cargo on the PATH, and finds the archive's binary",
        &out,
    );
    if !found {
        // Nothing below can run on a project that did not configure.
        return Ok(());
    }
    let (package, loader): (Vec<Row>, Vec<Row>) = consumer
        .rows()?
        .into_iter()
        .partition(|r| r.name.starts_with("dflash_gate_package_"));
    tally.expect(
        package_rows_hold(&package, &binary)
            && Row::names(&loader) == ["c_loader_good", "c_loader_broken"],
        "it registers the package rows, each running the archive's binary, and the C loader's two rows",
        &format!("{}{}", Row::describe(&package), Row::describe(&loader)),
    );
    let built = quiet(
        std::process::Command::new("cmake")
            .arg("--build")
            .arg(&consumer.build)
            .env("PATH", &no_cargo),
        "cmake --build",
    );
    tally.expect(
        built.is_ok(),
        "the C loader builds against the archive's header and links its static library (dflash_gate::dflash_gate), with no cargo on the PATH",
        &built.err().unwrap_or_default(),
    );
    for (row, passes, shows) in [
        (
            "dflash_gate_package_good",
            true,
            "the good package's row passes",
        ),
        (
            "dflash_gate_package_broken",
            false,
            "the truncated package's row fails",
        ),
        (
            "c_loader_good",
            true,
            "the C loader passes the good package in process",
        ),
        (
            "c_loader_broken",
            false,
            "the C loader refuses the truncated package",
        ),
    ] {
        let (ok, out) = consumer.ctest(&format!("^{row}$"), &[], Some(&no_cargo));
        tally.expect(
            ok == passes && (passes || out.contains("Failed")),
            &format!("(archive) {shows}"),
            &out,
        );
    }
    tally.expect(
        !consumer.build.join("dflash-gate-cargo").exists(),
        "(archive) nothing was built from source in the build tree",
        "",
    );
    Ok(())
}

fn make_executable(file: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("{}: {e}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_module_is_current() {
        let path = crate::root().join(MODULE_PATH);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == module(None),
            "{} is stale: run `cargo xtask cmake --out {}`",
            path.display(),
            MODULE_PATH
        );
    }

    #[test]
    fn a_copy_elsewhere_records_the_checkout_and_the_committed_one_does_not() {
        let root = crate::root();
        let committed = text_for(&root.join(MODULE_PATH));
        assert!(committed.contains("set(_dflash_gate_recorded_root \"\")"));
        let recorded = format!(
            "set(_dflash_gate_recorded_root \"{}\")",
            root.to_string_lossy()
        );
        for name in ["DFlashGate.cmake", CONFIG_FILE] {
            let elsewhere = text_for(&Path::new("/tmp/x").join(name));
            assert!(elsewhere.contains(&recorded), "{name}: {elsewhere}");
        }
    }

    #[test]
    fn each_file_is_told_by_its_name() {
        let dir = Path::new("/tmp/x");
        let module = text_for(&dir.join("DFlashGate.cmake"));
        let config = text_for(&dir.join(CONFIG_FILE));
        let version_file = text_for(&dir.join(CONFIG_VERSION_FILE));
        assert!(module.contains("set(_dflash_gate_mode \"module\")"));
        assert!(config.contains("set(_dflash_gate_mode \"package\")"));
        let states = format!("set(PACKAGE_VERSION \"{}\")", version());
        assert!(version_file.contains(&states), "{version_file}");
        for text in [&module, &config, &version_file] {
            assert!(!text.contains('@'), "a placeholder is left:\n{text}");
        }
        assert!(config.contains(&format!("set(_dflash_gate_version \"{}\")", version())));
    }

    #[test]
    fn check_sees_a_stale_package_config() {
        let dir = tempfile::tempdir().unwrap();
        let arg = dir.path().to_string_lossy().into_owned();
        assert_eq!(
            run(&["--install-dir".to_owned(), arg.clone()]),
            Ok(ExitCode::SUCCESS)
        );
        let check = ["--check".to_owned(), "--install-dir".to_owned(), arg];
        assert_eq!(run(&check), Ok(ExitCode::SUCCESS));
        let config = dir.path().join(CONFIG_FILE);
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, text.replace("LABELS dflash_gate ", "")).unwrap();
        assert_eq!(run(&check), Ok(ExitCode::FAILURE));
    }
}
