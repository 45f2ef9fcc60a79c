//! The command-line conventions users expect of a tool like ripgrep or cargo: help and version on
//! stdout with exit 0, `--` ending options, the nearest option suggested for a typo, a repeated
//! single-valued option refused, "no such directory" told from "a file", and a report that cannot be
//! written never read as a verdict (exit 2).

use gate_tests::fixture::{copy, tiny as fixture};
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

fn gate_in(cwd: Option<&Path>, args: &[&OsStr]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dflash-gate"));
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    cmd.args(args).output().expect("runs")
}

fn gate(args: &[&str]) -> Output {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    gate_in(None, &args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn help_goes_to_stdout_with_exit_0_and_names_every_option() {
    for flag in ["--help", "-h"] {
        let o = gate(&[flag]);
        assert_eq!(o.status.code(), Some(0), "{flag}");
        assert!(o.stderr.is_empty(), "{flag}: {}", text(&o.stderr));
        let out = text(&o.stdout);
        assert!(out.contains("usage: dflash-gate"), "{out}");
        for option in [
            "--json",
            "--census",
            "--target DIR",
            "--manifest",
            "--all DIR",
            "--full",
            "-q, --quiet",
            "--color WHEN",
            "--loader NAME[,NAME]",
            "--version",
        ] {
            assert!(
                out.contains(option),
                "{flag} does not mention {option}:\n{out}"
            );
        }
        assert!(out.contains("exit status"), "{out}");
    }
    // Help wins over everything else on the line, and gates nothing.
    let o = gate(&["/nonexistent", "--help"]);
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn version_goes_to_stdout_with_exit_0() {
    for flag in ["--version", "-V"] {
        let o = gate(&[flag]);
        assert_eq!(o.status.code(), Some(0));
        assert_eq!(
            text(&o.stdout),
            format!("dflash-gate {}\n", env!("CARGO_PKG_VERSION"))
        );
    }
}

#[test]
fn double_dash_ends_options() {
    let root = tempfile::tempdir().unwrap();
    copy(root.path(), "-x");
    let o = gate_in(Some(root.path()), &["--".as_ref(), "-x".as_ref()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("VERDICT      PASS"));
    // Without `--`, `-x` is an (unknown) option.
    let o = gate_in(Some(root.path()), &["-x".as_ref()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("unknown option -x"),
        "{}",
        text(&o.stderr)
    );
    // After `--`, even `--json` is a directory name.
    let o = gate_in(Some(root.path()), &["--".as_ref(), "--json".as_ref()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--json: no such directory"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn a_typo_is_answered_with_the_nearest_option() {
    let dir = fixture();
    let dir = dir.to_str().unwrap();
    for (typo, nearest) in [
        ("--jsn", "--json"),
        ("--taget", "--target"),
        ("--manfest", "--manifest"),
        ("--censsus", "--census"),
        ("--verison", "--version"),
    ] {
        let o = gate(&[dir, typo]);
        assert_eq!(o.status.code(), Some(2), "{typo}");
        assert!(
            o.stdout.is_empty(),
            "{typo}: nothing gated, nothing on stdout"
        );
        let err = text(&o.stderr);
        assert!(
            err.contains(&format!("unknown option {typo} (did you mean {nearest}?)")),
            "{typo}: {err}"
        );
        assert!(err.contains("dflash-gate --help"), "{err}");
    }
    let err = text(&gate(&[dir, "--zzzzzzzzzz"]).stderr);
    assert!(
        err.contains("unknown option --zzzzzzzzzz") && !err.contains("did you mean"),
        "{err}"
    );
}

#[test]
fn loader_names_engines_and_an_unknown_one_is_a_usage_error() {
    let dir = fixture();
    let dir = dir.to_str().unwrap();
    let o = gate(&[dir, "--loader", "vllm,nope"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("--loader: unknown engine \"nope\" (known: vllm, sglang, llama.cpp, transformers, mlx, dflash-mlx)"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
    // Given twice, the lists add up; each engine is one check, in the order first given.
    let o = gate(&[
        dir,
        "--loader",
        "llama.cpp",
        "--loader=vllm,LLAMA.CPP",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids: Vec<&str> = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["id"].as_str())
        .filter(|id| id.starts_with("loader."))
        .collect();
    assert_eq!(ids, ["loader.llama.cpp", "loader.vllm"]);
    assert_eq!(doc["loaders"].as_array().map(Vec::len), Some(6));
}

#[test]
fn a_repeated_single_valued_option_is_refused() {
    let dir = fixture();
    let dir = dir.to_str().unwrap();
    let o = gate(&[dir, "--source", "a", "--source=b"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains("--source given twice"), "{err}");
    assert!(err.contains("\"a\"") && err.contains("\"b\""), "{err}");
    // A repeated switch changes nothing.
    assert_eq!(gate(&[dir, "--census", "--census"]).status.code(), Some(0));
    // A value where none is taken, and none where one is needed.
    assert!(text(&gate(&[dir, "--json=yes"]).stderr).contains("--json takes no value"));
    let err = text(&gate(&[dir, "--target"]).stderr);
    assert!(
        err.contains("--target needs a value: --target DIR"),
        "{err}"
    );
}

#[test]
fn equals_form_is_the_same_option() {
    let root = tempfile::tempdir().unwrap();
    let models = root.path().join("models");
    copy(&models, "one");
    let all = format!("--all={}", models.display());
    let o = gate(&[all.as_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("1 package: 1 pass"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn no_such_directory_is_told_from_a_file() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("config.json");
    std::fs::write(&file, b"{}").unwrap();
    let absent = root.path().join("absent");
    for (path, said) in [(&absent, "no such directory"), (&file, "not a directory")] {
        let o = gate(&[path.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2));
        let err = text(&o.stderr);
        assert!(
            err.contains(&format!("{}: {said}", path.display())),
            "{err}"
        );
        // --all says the same of its folder.
        let o = gate(&["--all", path.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2));
        assert!(text(&o.stderr).contains(said), "{}", text(&o.stderr));
    }
}

#[test]
fn a_bad_target_or_source_directory_names_its_option() {
    let root = tempfile::tempdir().unwrap();
    let absent = root.path().join("absent");
    let dir = fixture();
    for option in ["--target", "--source"] {
        let o = gate(&[dir.to_str().unwrap(), option, absent.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2));
        let err = text(&o.stderr);
        let want = format!("{option} {}: no such directory", absent.display());
        assert!(err.contains(&want), "{err}");
    }
}

/// `dflash-gate pkg >/dev/full`: the report could not be written, so the exit is 2, never the
/// verdict's 0.
#[cfg(target_os = "linux")]
#[test]
fn a_report_that_cannot_be_written_is_exit_2() {
    for args in [vec![], vec!["--json"], vec!["--census"]] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_dflash-gate"))
            .arg(fixture())
            .args(&args)
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            text(&o.stderr).contains("cannot write the report to stdout"),
            "{}",
            text(&o.stderr)
        );
    }
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_dflash-gate"))
        .arg("--help")
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "--help into /dev/full");
}

/// `dflash-gate --all models | head -1`: the reader went away. As ripgrep does, the gate stops
/// writing and exits quietly, but with the verdict's own status, whatever the pipe buffer held: every
/// package is still gated, so a FAIL after the lines the reader took is never hidden by an exit 0.
#[cfg(unix)]
#[test]
fn a_closed_pipe_is_the_verdicts_status_quietly() {
    let root = tempfile::tempdir().unwrap();
    let models = root.path().join("models");
    for name in ["a", "b", "c"] {
        copy(&models, name);
    }
    let run = |extra: &[&str]| {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        Command::new(env!("CARGO_BIN_EXE_dflash-gate"))
            .arg("--all")
            .arg(&models)
            .args(extra)
            .stdout(writer)
            .output()
            .unwrap()
    };
    for extra in [&[][..], &["--full"][..], &["--json"][..]] {
        let o = run(extra);
        assert_eq!(o.status.code(), Some(0), "{extra:?}: {}", text(&o.stderr));
        assert!(o.stderr.is_empty(), "{extra:?}: {}", text(&o.stderr));
    }
    // The last package fails: the reader took nothing, the status is still 1.
    let d = models.join("c");
    std::fs::write(d.join("model.q4nx"), b"").unwrap();
    for extra in [&[][..], &["--full"][..], &["--json"][..]] {
        let o = run(extra);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {}", text(&o.stderr));
    }
    // `2>&1 | head -1`: stderr is the closed pipe too, and a package that cannot be gated says so
    // there: still the verdicts' status (2 for the unreadable one), never a crash.
    std::fs::remove_file(d.join("config.json")).unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = Command::new(env!("CARGO_BIN_EXE_dflash-gate"))
        .arg("--all")
        .arg(&models)
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .status()
        .unwrap();
    assert_eq!(o.code(), Some(2));
    // --help into a closed pipe is still an answer.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = Command::new(env!("CARGO_BIN_EXE_dflash-gate"))
        .arg("--help")
        .stdout(writer)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
}
