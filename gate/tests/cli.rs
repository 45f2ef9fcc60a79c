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
    assert_eq!(doc["schema_version"], 2);
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
    assert_eq!(lines.len(), 4, "{text}");
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
    assert_eq!(
        lines[3],
        "3 packages: 1 pass, 1 fail, 1 undecided, 0 not gated"
    );
    let o = gate(&["--all".as_ref(), models.as_os_str(), "--json".as_ref()]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let verdicts: Vec<&str> = doc
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["PASS", "FAIL", "UNDECIDED"]);
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
    assert!(!text.contains("agreement with the target"), "{text}");
    // A target with no weight file has no embedding rows to count: undecided, never a pass.
    assert!(text.contains("UNDECIDED  target.vocab"), "{text}");
    assert_eq!(o.status.code(), Some(3), "{text}");
    assert_eq!(
        gate_dir(&d, &["--target", "/nonexistent"]).status.code(),
        Some(2)
    );
}
