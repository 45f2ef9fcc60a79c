//! The command line as users run it: exit statuses, the JSON document, several packages at once, and
//! the file-system cases a downloaded package can present. Packages are copies of the committed
//! fixture, broken one way each.

use gate_tests::fixture::{copy, edit_config, tiny as fixture};
use std::path::Path;
use std::process::{Command, Output};

fn gate(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dflash-gate"))
        .args(args)
        .output()
        .expect("runs")
}

fn gate_dir(dir: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<&std::ffi::OsStr> = vec![dir.as_os_str()];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    gate(&args)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_good_package_exits_0_and_prints_every_check() {
    let o = gate_dir(&fixture(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let text = stdout(&o);
    assert!(text.contains("PASS       tiles.q4_1_signature"), "{text}");
    assert!(
        text.contains("NOT CHECKED  whether the draft's forward pass is correct"),
        "{text}"
    );
    let last: Vec<&str> = text.lines().rev().take(2).collect();
    assert_eq!(last[1], "VERDICT      PASS", "{text}");
    assert!(last[0].starts_with("18 of 18 checks passed ("), "{text}");
}

#[test]
fn json_is_one_document_with_the_verdict() {
    let o = gate_dir(&fixture(), &["--json"]);
    let doc: serde_json::Value =
        serde_json::from_slice(&o.stdout).expect("stdout is one JSON document");
    assert_eq!(doc["schema_version"], dflash_gate::SCHEMA_VERSION);
    assert_eq!(doc["verdict"], "PASS");
    assert_eq!(
        doc["checks"].as_array().unwrap().len(),
        doc["checks_total"].as_u64().unwrap() as usize
    );
    assert_eq!(doc["census"]["tensors"].as_array().unwrap().len(), 20);
}

#[test]
fn a_failed_check_exits_1_and_an_undecided_one_3() {
    let root = tempfile::tempdir().unwrap();
    let broken = copy(root.path(), "broken");
    edit_config(&broken, |c| {
        c.insert("block_size".into(), 4.into());
    });
    let o = gate_dir(&broken, &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("FAIL       scalars.block_size"),
        "{}",
        stdout(&o)
    );
    let undecided = copy(root.path(), "undecided");
    edit_config(&undecided, |c| {
        c.remove("intermediate_size");
    });
    let o = gate_dir(&undecided, &[]);
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
}

#[test]
fn usage_errors_and_unreadable_paths_exit_2() {
    assert_eq!(gate(&[]).status.code(), Some(2));
    assert_eq!(gate_dir(&fixture(), &["--bogus"]).status.code(), Some(2));
    assert_eq!(
        gate_dir(Path::new("/nonexistent/package"), &[])
            .status
            .code(),
        Some(2)
    );
    let root = tempfile::tempdir().unwrap();
    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = gate_dir(&empty, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no config.json"));
}

#[test]
fn many_packages_one_line_each_and_the_worst_exit() {
    let root = tempfile::tempdir().unwrap();
    let models = root.path().join("models");
    copy(&models, "a-good");
    let bad = copy(&models, "b-bad");
    std::fs::OpenOptions::new()
        .write(true)
        .open(bad.join("model.q4nx"))
        .unwrap()
        .set_len(1000)
        .unwrap();
    let undecided = copy(&models, "c-undecided");
    edit_config(&undecided, |c| {
        c.remove("hidden_size");
    });
    std::fs::create_dir(models.join("not-a-package")).unwrap();
    let o = gate(&["--all".as_ref(), models.as_os_str()]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(
        lines[0].starts_with("PASS") && lines[0].contains("a-good"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("FAIL")
            && lines[1].contains("b-bad")
            && lines[1].contains("container.parses"),
        "{text}"
    );
    assert!(
        lines[2].starts_with("UNDECIDED") && lines[2].contains("c-undecided"),
        "{text}"
    );
    // A directory that is no package is listed and counted, never dropped.
    assert!(
        lines[3].starts_with("SKIPPED") && lines[3].contains("not-a-package  empty: not a package"),
        "{text}"
    );
    assert_eq!(
        lines[4],
        "3 packages: 1 pass, 1 fail, 1 undecided, 0 not gated; 1 skipped (1 not a package)"
    );
    let o = gate(&["--all".as_ref(), models.as_os_str(), "--json".as_ref()]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let verdicts: Vec<&str> = doc
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["verdict"].as_str().or(d["reason"].as_str()).unwrap())
        .collect();
    assert_eq!(verdicts, ["PASS", "FAIL", "UNDECIDED", "not_a_package"]);
}

#[test]
fn file_system_cases_get_exit_2_or_a_named_fail() {
    let root = tempfile::tempdir().unwrap();
    // A directory where config.json should be.
    let d = copy(root.path(), "config-is-a-dir");
    std::fs::remove_file(d.join("config.json")).unwrap();
    std::fs::create_dir(d.join("config.json")).unwrap();
    assert_eq!(gate_dir(&d, &[]).status.code(), Some(2));
    // A directory where the weight file should be.
    let d = copy(root.path(), "weights-is-a-dir");
    std::fs::remove_file(d.join("model.q4nx")).unwrap();
    std::fs::create_dir(d.join("model.q4nx")).unwrap();
    assert_eq!(gate_dir(&d, &[]).status.code(), Some(2));
    // A zero-byte weight file: a named refusal of the container.
    let d = copy(root.path(), "zero-bytes");
    std::fs::write(d.join("model.q4nx"), b"").unwrap();
    let o = gate_dir(&d, &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("file is 0 bytes, shorter than the 8-byte header length"),
        "{}",
        stdout(&o)
    );
    // Two weight files and no model.q4nx.
    let d = copy(root.path(), "two-weights");
    std::fs::rename(d.join("model.q4nx"), d.join("a.q4nx")).unwrap();
    std::fs::copy(d.join("a.q4nx"), d.join("b.q4nx")).unwrap();
    let o = gate_dir(&d, &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("2 *.q4nx files and no model.q4nx (a.q4nx, b.q4nx)"),
        "{}",
        stdout(&o)
    );
    // A 1 GiB config.json (sparse): refused by size, never read whole.
    let d = copy(root.path(), "huge-config");
    std::fs::OpenOptions::new()
        .write(true)
        .open(d.join("config.json"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let o = gate_dir(&d, &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("config.json is larger than the 4194304-byte limit"),
        "{}",
        stdout(&o)
    );
}

#[cfg(unix)]
#[test]
fn unix_file_system_cases() {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    // A symlink loop where the weight file should be.
    let d = copy(root.path(), "loop");
    std::fs::remove_file(d.join("model.q4nx")).unwrap();
    std::os::unix::fs::symlink(d.join("model.q4nx"), d.join("model.q4nx")).unwrap();
    let o = gate_dir(&d, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    // A package directory whose name is not UTF-8.
    let name = std::ffi::OsStr::from_bytes(b"pkg-\xff\xfe");
    let d = root.path().join(name);
    std::fs::create_dir(&d).unwrap();
    for file in ["config.json", "model.q4nx"] {
        std::fs::copy(fixture().join(file), d.join(file)).unwrap();
    }
    assert_eq!(gate_dir(&d, &[]).status.code(), Some(0));
    // An unreadable config.json (meaningless as root, who reads anything).
    let d = copy(root.path(), "unreadable");
    std::fs::set_permissions(
        d.join("config.json"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    if std::fs::read(d.join("config.json")).is_err() {
        assert_eq!(gate_dir(&d, &[]).status.code(), Some(2));
    }
}

#[test]
fn manifest_and_target_options_run_their_checks() {
    let root = tempfile::tempdir().unwrap();
    let d = copy(root.path(), "draft");
    let o = gate_dir(&d, &["--manifest"]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "no manifest: undecided\n{}",
        stdout(&o)
    );
    let target = gate_tests::fixture::target_without_weights(root.path());
    let o = gate_dir(&d, &["--target", target.to_str().unwrap()]);
    let text = stdout(&o);
    assert!(text.contains("PASS       target.hidden_size"), "{text}");
    // A target with only its config.json: the config's vocab_size is its rows, every target check
    // decides, and the agreement's NOT CHECKED line goes.
    assert!(text.contains("PASS       target.vocab"), "{text}");
    assert!(!text.contains("agreement with the target"), "{text}");
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert_eq!(
        gate_dir(&d, &["--target", "/nonexistent"]).status.code(),
        Some(2)
    );
}

/// The common layout: the packages, the checkpoint they came from, and another checkpoint, side by
/// side. The `--source` directory and the checkpoint are listed as skipped and leave the exit 0.
#[test]
fn all_skips_the_source_directory_and_checkpoints() {
    use gate_tests::synth::{source, Encoding, Geometry, Package};
    let root = tempfile::tempdir().unwrap();
    let models = root.path().join("models");
    let mut package = Package::generate(&Geometry::small(), Encoding::default(), 7);
    for dir in ["source", "other-checkpoint"] {
        std::fs::create_dir_all(models.join(dir)).unwrap();
        source::write_source(&mut package, &models.join(dir), Default::default(), 7).unwrap();
    }
    std::fs::create_dir(models.join("draft")).unwrap();
    package.write(&models.join("draft")).unwrap();
    let src = models.join("source");
    let o = gate(&[
        "--all".as_ref(),
        models.as_os_str(),
        "--source".as_ref(),
        src.as_os_str(),
    ]);
    let text = stdout(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("PASS") && lines[0].contains("/draft  "),
        "{text}"
    );
    assert!(
        lines[1].starts_with("SKIPPED")
            && lines[1]
                .contains("/other-checkpoint  a Hugging Face safetensors draft: --source compares"),
        "{text}"
    );
    assert!(
        lines[2].starts_with("SKIPPED")
            && lines[2].contains("/source ")
            && lines[2].ends_with("  the --source directory, not a package"),
        "{text}"
    );
    assert_eq!(
        lines[3],
        "1 package: 1 pass, 0 fail, 0 undecided, 0 not gated; 2 skipped (1 checkpoint, 1 option directory)"
    );
    // A folder of nothing but other models' checkpoints has no draft to gate: exit 2, not an empty
    // pass.
    let only = root.path().join("only");
    std::fs::create_dir_all(only.join("ckpt")).unwrap();
    source::write_source(&mut package, &only.join("ckpt"), Default::default(), 7).unwrap();
    std::fs::write(
        only.join("ckpt/config.json"),
        r#"{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3"}"#,
    )
    .unwrap();
    let o = gate(&["--all".as_ref(), only.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("no package directory (with a config.json, a *.q4nx or a *.gguf) and no *.gguf file under it (1 skipped"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_folder_of_packages_named_as_one_suggests_all() {
    let root = tempfile::tempdir().unwrap();
    let models = root.path().join("models");
    copy(&models, "one");
    let o = gate_dir(&models, &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("holds a draft directory (one): a folder of drafts is not one draft")
            && err.contains("did you mean --all?"),
        "{err}"
    );
    // And the other way round: --all naming a package.
    let o = gate(&["--all".as_ref(), models.join("one").as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no package directory (with a config.json, a *.q4nx or a *.gguf) and no *.gguf file under it; it is a package itself: name it without --all"),
        "{err}"
    );
}

/// The plain report (no colour: a pipe) is the library's text, byte for byte, but for its timing:
/// scripts that read it see no change.
#[test]
fn the_plain_report_of_a_passing_package_is_the_librarys_text() {
    let o = gate_dir(&fixture(), &["--census"]);
    let report = dflash_gate::gate(&fixture(), &dflash_gate::Options::default()).unwrap();
    let want = report.to_text(true);
    let text = stdout(&o);
    let (got, want) = (
        text.rsplit_once("checks passed (").unwrap().0,
        want.rsplit_once("checks passed (").unwrap().0,
    );
    assert_eq!(got, want);
}

/// Colour: forced on, forced off, `NO_COLOR` (it wins over `CLICOLOR_FORCE`), a pipe; never in JSON.
/// Only the labels are coloured; the text is otherwise the plain text.
#[test]
fn colour_is_chosen_by_option_environment_and_terminal() {
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dflash-gate"));
        cmd.arg(fixture()).args(args);
        cmd.env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .env_remove("CLICOLOR");
        for (k, v) in env {
            cmd.env(k, v);
        }
        stdout(&cmd.output().unwrap())
    };
    let esc = |s: &str| s.contains('\u{1b}');
    let always = run(&["--color", "always"], &[]);
    assert!(
        always
            .lines()
            .find(|l| l.contains("tiles.q4_1_signature"))
            .unwrap()
            .starts_with("\u{1b}["),
        "{always}"
    );
    assert!(always.contains("VERDICT      PASS\u{1b}[0m"), "{always}");
    // Stripped of its escapes, the coloured report is the plain one.
    let plain = run(&["--color", "never"], &[]);
    assert!(!esc(&plain), "{plain}");
    let strip = |s: &str| {
        let mut out = String::new();
        let mut rest = s;
        while let Some(at) = rest.find('\u{1b}') {
            out.push_str(&rest[..at]);
            rest = &rest[at..];
            rest = &rest[rest.find('m').unwrap() + 1..];
        }
        out + rest
    };
    let cut = |s: &str| s.rsplit_once("checks passed (").unwrap().0.to_owned();
    assert_eq!(cut(&strip(&always)), cut(&plain));
    // auto: a pipe is never coloured; CLICOLOR_FORCE asks for colour, NO_COLOR overrules it.
    assert!(!esc(&run(&[], &[])));
    assert!(esc(&run(&[], &[("CLICOLOR_FORCE", "1")])));
    assert!(!esc(&run(
        &["--color=auto"],
        &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]
    )));
    assert!(!esc(&run(&["--json", "--color", "always"], &[])));
    let o = gate_dir(&fixture(), &["--color", "sometimes"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("--color takes auto, always or never, not \"sometimes\""));
}

/// A verdict that is not PASS names its checks; `--quiet` prints the package with its verdict on one
/// line, then each check that failed or could not decide on its own, once.
#[test]
fn the_verdict_names_what_failed_and_quiet_prints_only_that() {
    let root = tempfile::tempdir().unwrap();
    let d = copy(root.path(), "broken");
    edit_config(&d, |c| {
        c.insert("block_size".into(), 4.into());
    });
    let o = gate_dir(&d, &[]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1));
    let verdict: Vec<&str> = text.lines().filter(|l| l.starts_with("VERDICT")).collect();
    assert_eq!(
        verdict,
        ["VERDICT      FAIL (failed: scalars.block_size)"],
        "{text}"
    );
    let o = gate_dir(&d, &["--quiet"]);
    assert_eq!(o.status.code(), Some(1));
    let quiet = stdout(&o);
    let lines: Vec<&str> = quiet.lines().collect();
    assert_eq!(lines.len(), 2, "{quiet}");
    assert_eq!(
        lines[0],
        format!("FAIL       {}  failed: scalars.block_size", d.display())
    );
    assert!(
        lines[1].starts_with("FAIL       scalars.block_size"),
        "{quiet}"
    );
    // A weight file cut short stops fifteen checks (the scalars too, listed so the count does not
    // change with the damage): they are one line, naming the check that stopped them, not fifteen
    // copies of "the weight file did not parse".
    let cut = copy(root.path(), "cut");
    let weights = cut.join("model.q4nx");
    let len = std::fs::metadata(&weights).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&weights)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let quiet = stdout(&gate_dir(&cut, &["-q"]));
    let lines: Vec<&str> = quiet.lines().collect();
    assert_eq!(lines.len(), 3, "{quiet}");
    assert!(
        lines[0].ends_with("/cut  failed: container.parses; 15 blocked")
            && lines[1].starts_with("FAIL       container.parses")
            && lines[2].starts_with("UNDECIDED  15 checks blocked by container.parses"),
        "{quiet}"
    );
    // An undecided one names the checks that could not decide.
    let u = copy(root.path(), "undecided");
    edit_config(&u, |c| {
        c.remove("intermediate_size");
    });
    let quiet = stdout(&gate_dir(&u, &["-q"]));
    let first = quiet.lines().next().unwrap();
    assert!(
        first.starts_with(&format!("UNDECIDED  {}  undecided: ", u.display())),
        "{quiet}"
    );
    assert!(
        quiet.lines().all(|l| l.starts_with("UNDECIDED ")),
        "{quiet}"
    );
    // A pass under --quiet is one line, the package and its verdict; several: only what did not
    // pass, and the summary.
    assert_eq!(
        stdout(&gate_dir(&fixture(), &["-q"])),
        format!(
            "PASS       {}  18 of 18 checks passed\n",
            fixture().display()
        )
    );
    let models = root.path().join("models");
    copy(&models, "a");
    std::fs::rename(&d, models.join("b")).unwrap();
    let text = stdout(&gate(&[
        "--all".as_ref(),
        models.as_os_str(),
        "-q".as_ref(),
    ]));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with("FAIL") && lines[0].contains("/b  scalars.block_size"),
        "{text}"
    );
    // --quiet with --json is refused: the document is whole.
    assert_eq!(
        gate_dir(&fixture(), &["-q", "--json"]).status.code(),
        Some(2)
    );
}

/// A check that had nothing to look at says so: with a required field missing no grid is proven,
/// so no tile header was read, and the message must not read as a pass over zero groups.
#[test]
fn a_check_with_nothing_to_look_at_says_so() {
    let root = tempfile::tempdir().unwrap();
    let d = copy(root.path(), "no-hidden-size");
    edit_config(&d, |c| {
        c.remove("hidden_size");
    });
    let report = dflash_gate::gate(&d, &dflash_gate::Options::default()).unwrap();
    for id in ["tiles.headers_sane", "tiles.q4_1_signature"] {
        let c = report.check(id).unwrap();
        assert_eq!(c.outcome(), dflash_gate::Outcome::Undecided, "{id}");
        assert_eq!(c.blocked_by(), Some("projections.tile_grid"), "{id}");
        assert!(
            c.message()
                .starts_with("nothing to look at: no grid was read"),
            "{id}: {}",
            c.message()
        );
    }
}

/// A weight file cut short names the word and the tensor it cuts off.
#[test]
fn a_truncated_weight_file_names_the_tensor_cut_off() {
    let root = tempfile::tempdir().unwrap();
    let d = copy(root.path(), "truncated");
    let file = d.join("model.q4nx");
    let len = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let o = gate_dir(&d, &[]);
    assert_eq!(o.status.code(), Some(1));
    let text = stdout(&o);
    let line = text
        .lines()
        .find(|l| l.starts_with("FAIL       container.parses"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("truncated") && line.contains(") is cut off"),
        "{line}"
    );
    assert!(line.contains("tensor \"model."), "{line}");
}

/// `--color auto` on a real terminal (a pseudo-terminal as stdout): coloured, and plain under
/// `NO_COLOR` or `--color never`.
#[cfg(target_os = "linux")]
#[test]
fn auto_colours_a_terminal_unless_no_color() {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let run = |args: &[&str], env: &[(&str, &str)]| -> String {
        let (mut master, mut slave) = (0, 0);
        // SAFETY: two out-pointers to c_ints; no name, termios or window size asked for.
        let r = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just opened and are owned by nothing else.
        let (mut master, slave) = unsafe {
            (
                std::fs::File::from_raw_fd(master),
                std::fs::File::from_raw_fd(slave),
            )
        };
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dflash-gate"));
        cmd.arg(fixture()).args(args).stdout(slave);
        cmd.env("TERM", "xterm-256color")
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .env_remove("CLICOLOR");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        // The terminal's other end closes with the child: reading stops there (EIO on Linux).
        drop(cmd);
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = master.read(&mut buf) {
            out.extend_from_slice(&buf[..n]);
        }
        assert_eq!(child.wait().unwrap().code(), Some(0));
        String::from_utf8_lossy(&out).into_owned()
    };
    let coloured = run(&[], &[]);
    assert!(coloured.contains("\u{1b}[32mPASS\u{1b}[0m"), "{coloured:?}");
    assert!(!run(&[], &[("NO_COLOR", "1")]).contains('\u{1b}'));
    assert!(!run(&["--color", "never"], &[]).contains('\u{1b}'));
    assert!(!run(&["--json"], &[]).contains('\u{1b}'));
}

/// The shell steps of a workflow in a YAML block, in order: `(name, command, always)` for each `run:`
/// (one line, or a `|` block as its indented lines), with the step's `name` if it has one and whether
/// it runs `if: always()`. Line by line, as the doc writes them: the test holds the doc's layout too.
fn workflow_runs(block: &str) -> Vec<(String, String, bool)> {
    let lines: Vec<&str> = block.lines().collect();
    let mut runs = Vec::new();
    let (mut name, mut always) = (String::new(), false);
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let field = trimmed.strip_prefix("- ").unwrap_or(trimmed);
        if trimmed.starts_with("- ") {
            (name, always) = (String::new(), false);
        }
        if let Some(n) = field.strip_prefix("name: ") {
            name = n.to_owned();
        } else if field == "if: always()" {
            always = true;
        } else if field == "run: |" {
            let mut body = Vec::new();
            while i + 1 < lines.len() {
                let next = lines[i + 1];
                if next.trim().is_empty() || next.len() - next.trim_start().len() <= indent {
                    break;
                }
                body.push(next.trim());
                i += 1;
            }
            runs.push((name.clone(), body.join("\n"), always));
        } else if let Some(command) = field.strip_prefix("run: ") {
            runs.push((name.clone(), command.to_owned(), always));
        }
        i += 1;
    }
    runs
}

/// docs/ci.md's whole workflow, its shell steps run as written, in order, as a runner would: all but
/// the two that fetch (the gate's install, held to a pinned commit, and the Hub download, for which
/// the test lays a draft and a target into `$HF_HUB_CACHE` as the Hub client does). A draft
/// (`models/bolt-dflash`, with its MANIFEST.sha256) and its Q4NX target (`models/bolt`) side by
/// side; every step exits 0, the targets are listed as skipped, the report kept is a JSON array of
/// every package, and the step summary names each draft with its verdict.
#[test]
fn the_ci_doc_example_runs_as_written() {
    use gate_tests::synth::{write_manifest, Encoding, Geometry, Package, TargetPackage};
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/ci.md"))
        .unwrap();
    let start = doc.find("```yaml\n").expect("docs/ci.md has a yaml block");
    let block = &doc[start..start + doc[start..].find("\n```\n").unwrap()];
    for needed in [
        "\non:\n",
        "actions/cache@",
        "actions/upload-artifact@",
        "--format github",
    ] {
        assert!(
            block.contains(needed),
            "docs/ci.md's workflow lacks {needed:?}:\n{block}"
        );
    }
    let runs = workflow_runs(block);
    let (fetch, steps): (Vec<_>, Vec<_>) = runs
        .iter()
        .partition(|(_, cmd, _)| cmd.starts_with("cargo install") || cmd.contains("hf download"));
    // It installs what exists: the repository at a pinned commit, never a release download.
    assert!(
        fetch.len() == 2
            && fetch[0].1.starts_with("cargo install --locked --git")
            && fetch[0].1.contains("--rev ")
            && !block.contains("release download"),
        "docs/ci.md's workflow installs from a release, or from a commit it does not pin, or \
         fetches something else:\n{fetch:?}"
    );
    assert_eq!(steps.len(), 3, "the workflow's gate steps: {steps:?}");
    let root = tempfile::tempdir().unwrap();
    let models = root.path().join("models");
    let draft = models.join("bolt-dflash");
    std::fs::create_dir_all(&draft).unwrap();
    Package::generate(&Geometry::small(), Encoding::default(), 7)
        .write(&draft)
        .unwrap();
    write_manifest(&draft).unwrap();
    TargetPackage::matching(&Geometry::small())
        .write(&models.join("bolt"))
        .unwrap();
    // What the download step leaves: a draft repository and a target's, as the Hub client lays them.
    let hub = root.path().join("hub");
    a_cache(root.path());
    std::fs::rename(root.path().join("huggingface/hub"), &hub).unwrap();
    let summary = root.path().join("summary.md");
    let bin = Path::new(env!("CARGO_BIN_EXE_dflash-gate"))
        .parent()
        .unwrap();
    let path = std::env::join_paths(std::iter::once(bin.to_owned()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    for (name, run, _) in &steps {
        // As the runner runs a `run:` step: bash, stopping at the first failing command.
        let o = Command::new("bash")
            .args(["-e", "-c", run])
            .current_dir(root.path())
            .env("PATH", &path)
            .env("HF_HUB_CACHE", &hub)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .output()
            .unwrap();
        let text = stdout(&o);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{name}: {run}:\n{text}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        if run.starts_with("dflash-gate --all") && !run.contains('\n') {
            let skipped = text
                .lines()
                .find(|l| l.starts_with("SKIPPED") && l.contains("models/bolt "))
                .unwrap_or_else(|| panic!("{run}: the target is not listed as skipped:\n{text}"));
            assert!(
                skipped.contains("Qwen3ForCausalLM") && skipped.contains("not a DFlash draft"),
                "{skipped}"
            );
            assert!(
                text.contains("z-lab/draft@4f3c2b1 (main)") && !text.contains("::error"),
                "{run}: the cache's draft is not gated, or something failed:\n{text}"
            );
        }
    }
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.path().join("gate-report.json")).unwrap())
            .unwrap();
    let kinds: Vec<&str> = report
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"skipped"), "{report}");
    let summary = std::fs::read_to_string(&summary).unwrap();
    assert!(
        summary.starts_with("```\n")
            && summary.contains("PASS       z-lab/draft@4f3c2b1")
            && summary.ends_with("```\n"),
        "{summary}"
    );
}

/// Several packages read as a table: the package column as wide as the widest name, so the details
/// line up; a path that is not there named once (`ERROR      nonexist  no such directory`); counts
/// in words that agree with them ("1 package").
#[test]
fn several_packages_line_up_and_count_in_words() {
    let root = tempfile::tempdir().unwrap();
    let models = root.path().join("models");
    copy(&models, "a");
    copy(&models, "a-much-longer-name");
    let o = gate(&["--all".as_ref(), models.as_os_str()]);
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    let column = |line: &str| line.find("  18 of 18").unwrap_or(0);
    assert!(
        column(lines[0]) > 0 && column(lines[0]) == column(lines[1]),
        "{text}"
    );
    let o = gate(&["nonexist".as_ref(), fixture().as_os_str()]);
    let text = stdout(&o);
    let error = text.lines().find(|l| l.starts_with("ERROR")).unwrap();
    assert_eq!(error.matches("nonexist").count(), 1, "{text}");
    assert!(error.ends_with("  no such directory"), "{text}");
    let one = root.path().join("one");
    copy(&one, "a");
    let text = stdout(&gate(&["--all".as_ref(), one.as_os_str()]));
    assert!(
        text.ends_with("1 package: 1 pass, 0 fail, 0 undecided, 0 not gated\n"),
        "{text}"
    );
}

/// A path `--all` cannot use is an error about the path, not a usage error: no usage text; and a
/// folder with no package directly under it says that `--all` looks one level deep.
#[test]
fn all_path_errors_say_what_is_wrong_without_the_usage_text() {
    let o = gate(&["--all".as_ref(), "nonexist".as_ref()]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("--all nonexist: no such directory"), "{err}");
    assert!(!err.contains("usage:"), "{err}");
    let root = tempfile::tempdir().unwrap();
    let deep = root.path().join("models");
    copy(&deep.join("org"), "draft");
    let o = gate(&["--all".as_ref(), deep.as_os_str()]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(err.contains("one level deep"), "{err}");
    assert!(!err.contains("usage:"), "{err}");
}

/// A config.json that links out of the package says what to do about it; a config naming another
/// model without a model_type says there is none, not `model_type "(none)"`.
#[test]
fn messages_say_what_to_do_and_what_is_there() {
    let root = tempfile::tempdir().unwrap();
    let d = copy(root.path(), "linked");
    let outside = root.path().join("config.json");
    std::fs::rename(d.join("config.json"), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, d.join("config.json")).unwrap();
    let o = gate_dir(&d, &[]);
    let all = format!("{}{}", stdout(&o), String::from_utf8_lossy(&o.stderr));
    assert!(
        all.contains("copy the file into the package, or gate the directory it points into"),
        "{all}"
    );
    let n = copy(root.path(), "named");
    edit_config(&n, |c| {
        c.insert(
            "architectures".into(),
            serde_json::json!(["LlamaForCausalLM"]),
        );
        c.remove("model_type");
    });
    let text = stdout(&gate_dir(&n, &[]));
    assert!(!text.contains("(none)"), "{text}");
    assert!(text.contains("no model_type"), "{text}");
}

/// A second `*.q4nx` beside `model.q4nx` is never read, and a loader that globs `*.q4nx` may load it
/// instead: it is not listed as the package's weights, and the verdict is UNDECIDED naming both.
#[test]
fn a_second_weight_file_beside_model_q4nx_is_not_approved() {
    let root = tempfile::tempdir().unwrap();
    let d = copy(root.path(), "two");
    std::fs::copy(d.join("model.q4nx"), d.join("other.q4nx")).unwrap();
    let o = gate_dir(&d, &[]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(3), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("UNDECIDED  container.parses"))
        .unwrap_or_else(|| panic!("container.parses is not UNDECIDED:\n{text}"));
    assert!(
        line.contains("other.q4nx") && line.contains("model.q4nx"),
        "{line}"
    );
    assert!(!text.contains("other.q4nx (weights)"), "{text}");
}

/// Ctrl-C during `--all` stops the run after the package being gated: stderr says how far it got,
/// the exit status is 130 (never one that reads as approval), and `--json` still prints one whole
/// document, of the packages gated before it.
#[test]
fn ctrl_c_stops_the_run_says_how_far_and_closes_the_json() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;
    const PACKAGES: usize = 3000;
    let root = tempfile::tempdir().unwrap();
    let one = copy(root.path(), "one");
    let models = root.path().join("models");
    std::fs::create_dir(&models).unwrap();
    for i in 0..PACKAGES {
        std::os::unix::fs::symlink(&one, models.join(format!("p{i:04}"))).unwrap();
    }
    let interrupt = |pid: u32| {
        let status = Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    for json in [false, true] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_dflash-gate"))
            .arg("--all")
            .arg(&models)
            .args(json.then_some("--json"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut text = String::new();
        if json {
            // Nothing is printed before the end: give it a moment to start gating.
            std::thread::sleep(std::time::Duration::from_millis(300));
        } else {
            // The first package's line: the run (and its handler) has started.
            stdout.read_line(&mut text).unwrap();
        }
        interrupt(child.id());
        stdout.read_to_string(&mut text).unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "json {json}: {err}");
        let done: usize = err
            .split("interrupted after ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("json {json}: stderr does not say how far: {err}"));
        assert!(
            err.contains(&format!("interrupted after {done} of {PACKAGES} packages"))
                && done < PACKAGES,
            "{err}"
        );
        if json {
            let doc: serde_json::Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("not one JSON document ({e}): {text}"));
            assert_eq!(doc.as_array().map(Vec::len), Some(done), "{err}");
        } else {
            assert!(
                text.lines()
                    .last()
                    .is_some_and(|l| l.ends_with(&format!("; interrupted after {done}"))),
                "{}",
                text.lines().last().unwrap_or_default()
            );
        }
    }
}

/// On a terminal the report fits its width: a line longer than the terminal wraps with a hanging
/// indent under the message's column, and nothing is lost (the continuation lines joined back give
/// the plain report a pipe gets). Run on a pseudo-terminal 100 columns wide (`script`).
#[cfg(target_os = "linux")]
#[test]
fn on_a_terminal_the_report_fits_its_width() {
    const COLUMNS: usize = 100;
    let bin = env!("CARGO_BIN_EXE_dflash-gate");
    let pkg = fixture();
    let command = format!(
        "stty cols {COLUMNS} rows 50; exec '{bin}' --color never '{}'",
        pkg.display()
    );
    let o = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .output()
        .expect("script runs");
    let text = String::from_utf8_lossy(&o.stdout).replace('\r', "");
    assert_eq!(o.status.code(), Some(0), "{text}");
    let widest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(widest <= COLUMNS, "widest line {widest} columns:\n{text}");
    // Joined back, the wrapped lines are the plain report's (timing aside).
    // (No line of the plain report starts with a space, so every one that does continues the last.)
    let mut joined: Vec<String> = Vec::new();
    for line in text.lines() {
        match (line.strip_prefix(' '), joined.last_mut()) {
            (Some(rest), Some(last)) => {
                last.push(' ');
                last.push_str(rest.trim_start());
            }
            _ => joined.push(line.to_owned()),
        }
    }
    let plain = stdout(&gate_dir(&pkg, &[]));
    let mut plain: Vec<String> = plain.lines().map(str::to_owned).collect();
    for lines in [&mut joined, &mut plain] {
        if let Some(last) = lines.last_mut() {
            *last = last.split(" (").next().unwrap_or_default().to_owned();
        }
    }
    assert_eq!(joined, plain, "wrapped:\n{text}");
}

/// `--census` is a table: a header row names the columns, and every tensor's row starts each cell
/// where the header's does, whatever the length of a name or a role (`post_attention_layernorm`
/// pushed the form column out of line when the widths were fixed).
#[test]
fn the_census_is_an_aligned_table() {
    let text = stdout(&gate_dir(&fixture(), &["--census"]));
    let mut lines = text
        .lines()
        .skip_while(|l| !l.starts_with("census:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "));
    let header = lines.next().expect("a header row");
    let starts: Vec<usize> = ["dtype", "shape", "role", "form"]
        .iter()
        .map(|c| header.find(&format!("  {c}")).expect("the column") + 2)
        .collect();
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 20, "{text}");
    for row in rows {
        for &at in &starts {
            let (before, after) = row.split_at(at);
            assert!(
                before.ends_with(' ') && !after.starts_with(' '),
                "a cell out of line at column {at}: {row}"
            );
        }
    }
}

/// `--all` gates a Hugging Face draft folder and a folder holding a GGUF draft beside a package,
/// naming each form, and passes over a target's folder (a config that declares no draft) saying what it is.
#[test]
fn all_gates_a_draft_folder_and_names_its_form() {
    use gate_tests::synth::{source, Encoding, Geometry, Package};
    let root = tempfile::tempdir().unwrap();
    let models = root.path().join("models");
    let mut package = Package::generate(&Geometry::small(), Encoding::default(), 7);
    std::fs::create_dir_all(models.join("folder")).unwrap();
    source::write_source(&mut package, &models.join("folder"), Default::default(), 7).unwrap();
    std::fs::create_dir(models.join("draft")).unwrap();
    package.write(&models.join("draft")).unwrap();
    std::fs::create_dir(models.join("gguf")).unwrap();
    gate_tests::synth::gguf::write_gguf(
        &mut package,
        &models.join("gguf/draft.gguf"),
        gate_tests::synth::gguf::GgufOptions::default(),
        7,
    )
    .unwrap();
    std::fs::create_dir(models.join("target")).unwrap();
    std::fs::copy(
        models.join("folder/model.safetensors"),
        models.join("target/model.safetensors"),
    )
    .unwrap();
    std::fs::write(
        models.join("target/config.json"),
        r#"{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":256}"#,
    )
    .unwrap();
    let o = gate(&["--all".as_ref(), models.as_os_str()]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("PASS") && lines[0].contains("/draft  "),
        "{text}"
    );
    assert!(
        lines[1].starts_with("PASS")
            && lines[1].contains("/folder ")
            && lines[1].contains("[safetensors] 6 of 6"),
        "{text}"
    );
    assert!(
        lines[2].starts_with("PASS")
            && lines[2].contains("/gguf ")
            && lines[2].contains("[gguf] 7 of 7"),
        "{text}"
    );
    assert!(
        lines[3].starts_with("SKIPPED") && lines[3].contains("another model"),
        "{text}"
    );
}

/// `--all dir`'s stdout, once its exit status is `code`.
fn gate_all(dir: &Path, code: i32) -> String {
    let o = gate(&["--all".as_ref(), dir.as_os_str()]);
    let text = stdout(&o);
    assert_eq!(
        o.status.code(),
        Some(code),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    text
}

const MAIN: &str = "4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a";

/// `folder`'s files moved into `cache` as the hub client lays a repository out (`models--ID` with
/// each file a blob, the snapshot `commit` of links into them, `refs/main` naming `main`).
fn into_cache(
    cache: &Path,
    id: &str,
    folder: &Path,
    commit: &str,
    main: &str,
) -> std::path::PathBuf {
    let repo = cache.join(format!("models--{id}"));
    let snapshot = repo.join("snapshots").join(commit);
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), main).unwrap();
    for entry in std::fs::read_dir(folder).unwrap() {
        let entry = entry.unwrap();
        let blob = format!("{commit}-{}", entry.file_name().to_string_lossy());
        std::fs::copy(entry.path(), repo.join("blobs").join(&blob)).unwrap();
        std::os::unix::fs::symlink(
            format!("../../blobs/{blob}"),
            snapshot.join(entry.file_name()),
        )
        .unwrap();
    }
    repo
}

/// A hub cache holding a draft (with an older snapshot beside its main one) and its target: the
/// target's repository is skipped as another model, as its folder would be, and counted.
fn a_cache(root: &Path) -> std::path::PathBuf {
    let cache = root.join("huggingface/hub");
    let draft = copy(root, "draft");
    into_cache(&cache, "z-lab--draft", &draft, MAIN, MAIN);
    into_cache(
        &cache,
        "z-lab--draft",
        &draft,
        "0123456789abcdef0123456789abcdef01234567",
        MAIN,
    );
    let target = root.join("target");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(
        target.join("config.json"),
        r#"{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":256}"#,
    )
    .unwrap();
    into_cache(&cache, "Qwen--Qwen3-8B", &target, MAIN, MAIN);
    std::fs::create_dir(cache.join(".locks")).unwrap();
    cache
}

#[test]
fn all_gates_a_hub_cache_at_refs_main_and_skips_its_targets() {
    let root = tempfile::tempdir().unwrap();
    let cache = a_cache(root.path());
    // The cache itself, and the folder holding it (`--all ~/.cache/huggingface`): the same rows.
    for all in [cache.clone(), cache.parent().unwrap().to_owned()] {
        let text = gate_all(&all, 0);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(
            lines[0].starts_with("SKIPPED")
                && lines[0].contains("/.locks ")
                && lines[0].ends_with("  empty: not a package"),
            "{text}"
        );
        assert!(
            lines[1].starts_with("SKIPPED    Qwen/Qwen3-8B@4f3c2b1 (main) ")
                && lines[1].contains("  another model ("),
            "{text}"
        );
        assert!(
            lines[2].starts_with("PASS       z-lab/draft@4f3c2b1 (main) ")
                && lines[2].ends_with(" checks passed (1 other snapshot not gated: 0123456)"),
            "{text}"
        );
        assert_eq!(
            lines[3],
            "1 package: 1 pass, 0 fail, 0 undecided, 0 not gated; 2 skipped (1 another model, 1 not a package)"
        );
    }
    let o = gate(&["--all".as_ref(), cache.as_os_str(), "--json".as_ref()]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let kinds: Vec<(&str, &str)> = doc
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap(),
                d["reason"].as_str().or(d["verdict"].as_str()).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("skipped", "not_a_package"),
            ("skipped", "another_model"),
            ("report", "PASS")
        ]
    );
    // A directory holding a cache, named as one package, is pointed at --all.
    let o = gate_dir(&cache, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("did you mean --all?"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_broken_draft_in_a_hub_cache_still_fails_under_all() {
    let root = tempfile::tempdir().unwrap();
    let cache = a_cache(root.path());
    let broken = copy(root.path(), "broken");
    edit_config(&broken, |c| {
        c.insert("block_size".into(), 4.into());
    });
    into_cache(&cache, "z-lab--broken", &broken, MAIN, MAIN);
    // A repository whose refs/main names a snapshot the cache does not hold: not gated, exit 2.
    into_cache(
        &cache,
        "z-lab--gone",
        &broken,
        MAIN,
        "89abcdef89abcdef89abcdef89abcdef89abcdef",
    );
    let text = gate_all(&cache, 2);
    assert!(
        text.lines()
            .any(|l| l.starts_with("FAIL       z-lab/broken@4f3c2b1 (main)")
                && l.contains("scalars.block_size")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("ERROR      z-lab/gone (main)")
                && l.contains("refs/main names commit 89abcdef")),
        "{text}"
    );
    assert!(
        text.ends_with("3 packages: 1 pass, 1 fail, 0 undecided, 1 not gated (1 file not found); 2 skipped (1 another model, 1 not a package)\n"),
        "{text}"
    );
    // Without the broken ones, the same cache passes: the refusal is theirs.
    std::fs::remove_dir_all(cache.join("models--z-lab--gone")).unwrap();
    std::fs::remove_dir_all(cache.join("models--z-lab--broken")).unwrap();
    gate_all(&cache, 0);
}

#[test]
fn all_counts_what_it_does_not_gate_and_gates_a_folder_of_ggufs_file_by_file() {
    use gate_tests::synth::gguf::{write_gguf, GgufOptions};
    use gate_tests::synth::{Encoding, Geometry, Package};
    let root = tempfile::tempdir().unwrap();
    let models = root.path().join("models");
    copy(&models, "draft");
    std::fs::create_dir_all(models.join("empty")).unwrap();
    std::fs::create_dir_all(models.join("notes")).unwrap();
    std::fs::write(models.join("notes/README.md"), "notes").unwrap();
    let mut package = Package::generate(&Geometry::small(), Encoding::default(), 7);
    std::fs::create_dir(models.join("gguf")).unwrap();
    for name in ["draft-f16.gguf", "draft-q8.gguf"] {
        write_gguf(
            &mut package,
            &models.join("gguf").join(name),
            GgufOptions::default(),
            7,
        )
        .unwrap();
    }
    let text = gate_all(&models, 0);
    let lines: Vec<&str> = text.lines().collect();
    let rows = [
        ("PASS", "/draft ", "18 of 18"),
        ("SKIPPED", "/empty ", "  empty: not a package"),
        ("PASS", "/gguf/draft-f16.gguf ", " [gguf] 7 of 7"),
        ("PASS", "/gguf/draft-q8.gguf ", " [gguf] 7 of 7"),
        ("SKIPPED", "/notes ", "  not a package: no config.json"),
    ];
    for (line, (label, name, words)) in lines.iter().zip(rows) {
        assert!(
            line.starts_with(label) && line.contains(name) && line.contains(words),
            "{label} {name} {words}:\n{text}"
        );
    }
    assert_eq!(
        lines[5],
        "3 packages: 3 pass, 0 fail, 0 undecided, 0 not gated; 2 skipped (2 not a package)"
    );
    // One GGUF of the folder cut short: that file fails, by name; the other still passes.
    let cut = models.join("gguf/draft-q8.gguf");
    let bytes = std::fs::read(&cut).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let text = gate_all(&models, 1);
    assert!(
        text.lines()
            .any(|l| l.starts_with("FAIL") && l.contains("/gguf/draft-q8.gguf ")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("PASS") && l.contains("/gguf/draft-f16.gguf ")),
        "{text}"
    );
    // GGUFs beside other weights: the gate does not pick; the error is printed once, on its row.
    std::fs::write(models.join("gguf/model.safetensors"), b"").unwrap();
    let o = gate(&["--all".as_ref(), models.as_os_str()]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert_eq!(text.matches("holds both a GGUF").count(), 1, "{text}");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.contains("1 not gated (1 malformed)"), "{text}");
    // With --json, stdout is the document: stderr says it, once.
    let o = gate(&["--all".as_ref(), models.as_os_str(), "--json".as_ref()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("holds both a GGUF").count(), 1, "{err}");
}

#[test]
fn a_report_names_what_it_was_checked_against() {
    let root = tempfile::tempdir().unwrap();
    let cache = root.path().join("hub");
    let draft = copy(root.path(), "draft");
    into_cache(&cache, "z-lab--draft", &draft, MAIN, MAIN);
    let target = gate_tests::fixture::target_without_weights(root.path());
    into_cache(&cache, "Qwen--Qwen3-8B", &target, MAIN, MAIN);
    let run = |extra: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_dflash-gate"))
            .env("HF_HUB_CACHE", &cache)
            .args(["z-lab/draft", "--target", "Qwen/Qwen3-8B"])
            .args(extra)
            .output()
            .expect("runs");
        assert_ne!(
            o.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        stdout(&o)
    };
    let doc: serde_json::Value = serde_json::from_str(&run(&["--json"])).unwrap();
    gate_tests::schema::validate(&doc).unwrap();
    assert_eq!(doc["repository"], "z-lab/draft");
    assert_eq!(doc["revision"], MAIN);
    assert_eq!(doc["target"]["given"], "Qwen/Qwen3-8B");
    let resolved = doc["target"]["resolved"].as_str().unwrap();
    assert!(
        resolved.ends_with(&format!("hub/models--Qwen--Qwen3-8B/snapshots/{MAIN}")),
        "{resolved}"
    );
    assert!(doc.get("source").is_none(), "{doc}");
    let text = run(&[]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[1], format!("repository   z-lab/draft@{MAIN} (main)"));
    assert_eq!(
        lines[2],
        format!("target       Qwen/Qwen3-8B (resolved: {resolved})")
    );
    assert!(
        lines[3].starts_with("PASS       config.is_dflash"),
        "{text}"
    );
    // --quiet lists each objection's own line, never a header line in its place: a target of
    // another depth fails target.depth.
    edit_config(&target, |c| {
        c.insert("num_hidden_layers".into(), 4.into());
    });
    into_cache(&cache, "Qwen--Qwen3-4B", &target, MAIN, MAIN);
    let o = Command::new(env!("CARGO_BIN_EXE_dflash-gate"))
        .env("HF_HUB_CACHE", &cache)
        .args(["z-lab/draft", "--target", "Qwen/Qwen3-4B", "--quiet"])
        .output()
        .expect("runs");
    let quiet = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{quiet}");
    let objection = quiet.lines().nth(1).unwrap_or_default();
    assert!(objection.starts_with("FAIL       target."), "{quiet}");
    // A plain folder named with no option: nothing to name, in the text or the document.
    let o = gate_dir(&draft, &["--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for key in ["target", "source", "repository", "revision"] {
        assert!(doc.get(key).is_none(), "{key}: {doc}");
    }
    let text = stdout(&gate_dir(&draft, &[]));
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .starts_with("PASS       config.is_dflash"),
        "{text}"
    );
}

#[test]
fn format_github_annotates_what_failed_and_what_could_not_run() {
    let root = tempfile::tempdir().unwrap();
    let good = copy(root.path(), "good");
    let bad = copy(root.path(), "bad");
    edit_config(&bad, |c| {
        c.insert("block_size".into(), 4.into());
    });
    let cut = copy(root.path(), "cut");
    std::fs::remove_file(cut.join("config.json")).unwrap();
    let args: Vec<&std::ffi::OsStr> = vec![
        "--format".as_ref(),
        "github".as_ref(),
        good.as_os_str(),
        bad.as_os_str(),
        cut.as_os_str(),
    ];
    let o = gate(&args);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    let commands: Vec<&str> = text.lines().filter(|l| l.starts_with("::")).collect();
    assert_eq!(commands.len(), 2, "{text}");
    // The failed check, titled by its id, after its package's line; the stopped ones add nothing.
    assert!(
        commands[0].starts_with("::error title=dflash-gate scalars.block_size::")
            && commands[0].contains(&format!("{}: ", bad.display())),
        "{text}"
    );
    assert!(
        commands[1].starts_with("::error title=dflash-gate could not run::")
            && commands[1].contains("no config.json"),
        "{text}"
    );
    // The text is still there, and a passing package adds no annotation.
    assert!(text.contains("PASS       "), "{text}");
    // Without the option: no workflow command at all.
    let plain = stdout(&gate(&args[2..]));
    assert!(!plain.lines().any(|l| l.starts_with("::")), "{plain}");
    // JSON is a document, not lines: asking for both is a usage error.
    let both = gate_dir(&good, &["--json", "--format", "github"]);
    assert_eq!(both.status.code(), Some(2));
    // `--format json` is `--json`.
    let json = stdout(&gate_dir(&good, &["--format", "json"]));
    assert_eq!(json, stdout(&gate_dir(&good, &["--json"])));
}

/// A fit report: one draft and three targets (given as a folder of them) is one table, a row per
/// target: the one it fits says yes, the others no with their first reason; the exit status is 0, as
/// it fits one. `--target` given several times is the same report, and the JSON a document per pair
/// naming its target. A folder holding no target is refused, saying so.
#[test]
fn a_fit_report_says_which_targets_a_draft_fits() {
    use gate_tests::synth::{Encoding, Geometry, Package, TargetPackage};
    let root = tempfile::tempdir().unwrap();
    let draft = root.path().join("draft");
    std::fs::create_dir_all(&draft).unwrap();
    Package::generate(&Geometry::small(), Encoding::default(), 7)
        .write(&draft)
        .unwrap();
    let targets = root.path().join("targets");
    for name in ["fits", "wide", "shallow"] {
        std::fs::create_dir_all(targets.join(name)).unwrap();
        TargetPackage::matching(&Geometry::small())
            .write(&targets.join(name))
            .unwrap();
    }
    edit_config(&targets.join("wide"), |c| {
        c.insert("hidden_size".into(), 512.into());
    });
    edit_config(&targets.join("shallow"), |c| {
        c.insert("num_hidden_layers".into(), 2.into());
    });
    // A draft's GGUF beside the targets is no target: the report leaves it out, as a draft folder.
    {
        use gate_tests::synth::gguf::{gguf_for, GgufOptions};
        let mut package = Package::generate(&Geometry::small(), Encoding::default(), 7);
        let bytes = gguf_for(&mut package, GgufOptions::DEFAULT, 7)
            .unwrap()
            .bytes();
        std::fs::write(targets.join("draft.gguf"), bytes).unwrap();
    }
    let o = gate_dir(&draft, &["--target", targets.to_str().unwrap()]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains(": fits 1 of 3 targets"), "{text}");
    let row = |name: &str| {
        text.lines()
            .find(|l| l.contains(&format!("/{name} ")))
            .unwrap_or_else(|| panic!("no row for {name}:\n{text}"))
            .to_owned()
    };
    assert!(row("fits").contains("  yes  "), "{text}");
    assert!(
        row("wide").contains("  no  ") && row("wide").contains("target.hidden_size: "),
        "{text}"
    );
    assert!(
        row("shallow").contains("  no  ") && row("shallow").contains("target.depth: "),
        "{text}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    // Named one by one: the same rows; as JSON, a report per pair naming its target.
    let each: Vec<String> = ["fits", "wide", "shallow"]
        .iter()
        .map(|n| targets.join(n).to_str().unwrap().to_owned())
        .collect();
    let mut args: Vec<&std::ffi::OsStr> = vec![draft.as_os_str()];
    for t in &each {
        args.push(std::ffi::OsStr::new("--target"));
        args.push(std::ffi::OsStr::new(t));
    }
    args.push(std::ffi::OsStr::new("--json"));
    let o = gate(&args);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let given: Vec<&str> = doc
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["target"]["given"].as_str().unwrap())
        .collect();
    assert_eq!(given, each.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(0));
    // Fitting none: the best pair's status (here a FAIL), and with --format github an annotation.
    std::fs::remove_dir_all(targets.join("fits")).unwrap();
    let o = gate_dir(
        &draft,
        &["--target", targets.to_str().unwrap(), "--format", "github"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains(": fits 0 of 2 targets"),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains("::error title=dflash-gate fit::")
            && stdout(&o).contains("fits none of the targets given"),
        "{}",
        stdout(&o)
    );
    // A folder of no targets.
    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = gate_dir(&draft, &["--target", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no target model under it"));
}

/// `--source` names the release a package was converted from as `--target` names a target: by its
/// Hugging Face id (or repository directory) in the hub cache, read at the snapshot `refs/main` names;
/// the report says it as given and as resolved.
#[test]
fn source_is_read_from_the_hub_cache_by_its_id() {
    use gate_tests::synth::{source, Encoding, Geometry, Package};
    let root = tempfile::tempdir().unwrap();
    let mut package = Package::generate(&Geometry::small(), Encoding::default(), 7);
    let release = root.path().join("release");
    std::fs::create_dir_all(&release).unwrap();
    source::write_source(&mut package, &release, Default::default(), 7).unwrap();
    let draft = root.path().join("draft");
    std::fs::create_dir(&draft).unwrap();
    package.write(&draft).unwrap();
    let cache = root.path().join("hub");
    let repo = into_cache(&cache, "z-lab--release", &release, MAIN, MAIN);
    for named in [std::ffi::OsStr::new("z-lab/release"), repo.as_os_str()] {
        let o = Command::new(env!("CARGO_BIN_EXE_dflash-gate"))
            .env("HF_HUB_CACHE", &cache)
            .arg(&draft)
            .arg("--source")
            .arg(named)
            .arg("--json")
            .output()
            .expect("runs");
        let out = stdout(&o);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(doc["source"]["given"], named.to_str().unwrap());
        let resolved = doc["source"]["resolved"].as_str().unwrap();
        assert!(
            resolved.ends_with(&format!("snapshots/{MAIN}")),
            "{resolved}"
        );
        let ids: Vec<&str> = doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["id"].as_str())
            .filter(|id| id.starts_with("source."))
            .collect();
        assert!(ids.len() >= 3, "{ids:?}");
    }
}
