//! What a hostile package directory can hold besides bad bytes: FIFOs, devices, symlinks to endless
//! files or out of the package, names that are not UTF-8 or carry control characters. Each case runs
//! the binary under a deadline, so a hang fails the test instead of stalling the run.
#![cfg(unix)]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longer than any case takes; a blocked open would never end.
const DEADLINE: Duration = Duration::from_secs(30);

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Runs the gate on `dir` with `extra` arguments; a run past the deadline is killed and fails.
fn gate(dir: &Path, extra: &[&OsStr]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dflash-gate"))
        .arg(dir)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let start = Instant::now();
    while child.try_wait().expect("waits").is_none() {
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the gate was still running after {DEADLINE:?} on {}",
                dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().expect("output");
    Run {
        code: status.code(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

fn fixture(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/tiny")
        .join(file)
}

/// `root/name` holding the fixture's two files.
fn package(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["config.json", "model.q4nx"] {
        std::fs::copy(fixture(file), dir.join(file)).unwrap();
    }
    dir
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success());
}

fn replace_with_fifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    mkfifo(path);
}

/// A manifest (sha256sum format) listing `names` of `dir`, hashed as they are now; `extra` lines
/// are appended verbatim.
fn write_manifest(dir: &Path, names: &[&str], extra: &[String]) {
    let mut text = String::new();
    for name in names {
        let (hex, _) =
            dflash_gate::__private::manifest::hash_file(&dir.join(name), &mut [0u8; 4096]).unwrap();
        text.push_str(&format!("{hex}  {name}\n"));
    }
    for line in extra {
        text.push_str(line);
        text.push('\n');
    }
    std::fs::write(dir.join("MANIFEST.sha256"), text).unwrap();
}

fn any_digest() -> String {
    "0".repeat(64)
}

#[test]
fn fifos_and_devices_are_refused_without_blocking() {
    let root = tempfile::tempdir().unwrap();
    for file in ["model.q4nx", "config.json"] {
        let d = package(root.path(), &format!("fifo-{file}"));
        replace_with_fifo(&d.join(file));
        let r = gate(&d, &[]);
        assert_eq!(r.code, Some(2), "{file}: {}", r.all());
        assert!(
            r.stderr
                .contains(&format!("{file}: is a FIFO, not a regular file")),
            "{}",
            r.all()
        );
    }
    // A weight file that is a symlink to a device, endless or not.
    for device in ["/dev/zero", "/dev/null"] {
        let d = package(root.path(), &format!("device{}", device.replace('/', "-")));
        std::fs::remove_file(d.join("model.q4nx")).unwrap();
        std::os::unix::fs::symlink(device, d.join("model.q4nx")).unwrap();
        let r = gate(&d, &[]);
        assert_eq!(r.code, Some(2), "{device}: {}", r.all());
        assert!(r.stderr.contains("is a character device"), "{}", r.all());
    }
    // A target whose weight file is a FIFO: the target is read without blocking, and the FIFO named.
    let d = package(root.path(), "draft");
    let target = gate_tests::fixture::target_without_weights(root.path());
    mkfifo(&target.join("model.q4nx"));
    let r = gate(&d, &[OsStr::new("--target"), target.as_os_str()]);
    assert!(r.all().contains("is a FIFO"), "{}", r.all());
}

#[test]
fn a_manifest_that_cannot_be_read_is_exit_2() {
    let root = tempfile::tempdir().unwrap();
    let d = package(root.path(), "fifo-manifest");
    mkfifo(&d.join("MANIFEST.sha256"));
    let r = gate(&d, &[OsStr::new("--manifest")]);
    assert_eq!(r.code, Some(2), "{}", r.all());
    assert!(
        r.stderr.contains("MANIFEST.sha256: is a FIFO"),
        "{}",
        r.all()
    );
    let d = package(root.path(), "dir-manifest");
    std::fs::create_dir(d.join("MANIFEST.sha256")).unwrap();
    let r = gate(&d, &[OsStr::new("--manifest")]);
    assert_eq!(r.code, Some(2), "{}", r.all());
    assert!(
        r.stderr.contains("MANIFEST.sha256: is a directory"),
        "{}",
        r.all()
    );
}

#[test]
fn listed_files_that_are_not_regular_are_unreadable_not_missing_and_never_read() {
    let root = tempfile::tempdir().unwrap();
    let d = package(root.path(), "listed");
    mkfifo(&d.join("pipe"));
    std::fs::create_dir(d.join("sub")).unwrap();
    write_manifest(
        &d,
        &["config.json", "model.q4nx"],
        &[
            format!("{}  pipe", any_digest()),
            format!("{}  sub", any_digest()),
            format!("{}  gone.json", any_digest()),
        ],
    );
    let r = gate(&d, &[OsStr::new("--manifest")]);
    assert_eq!(r.code, Some(1), "{}", r.all());
    let text = &r.stdout;
    assert!(text.contains("missing: gone.json"), "{text}");
    assert!(
        text.contains("pipe (is a FIFO, not a regular file: not read)"),
        "{text}"
    );
    assert!(
        text.contains("sub (is a directory, not a regular file: not read)"),
        "{text}"
    );
    assert!(
        !text.contains("missing: pipe") && !text.contains("gone.json,"),
        "{text}"
    );
}

#[test]
fn listed_symlinks_out_of_the_package_are_refused_unread() {
    let root = tempfile::tempdir().unwrap();
    let outside = root.path().join("outside.txt");
    std::fs::write(&outside, b"secret").unwrap();
    let d = package(root.path(), "links");
    // An endless file (/proc where there is one), a device, and a plain file elsewhere: none is
    // hashed, none's digest shown.
    let endless = if Path::new("/proc/self/status").exists() {
        "/proc/self/status"
    } else {
        "/dev/zero"
    };
    std::os::unix::fs::symlink(endless, d.join("status")).unwrap();
    std::os::unix::fs::symlink("/dev/urandom", d.join("random")).unwrap();
    std::os::unix::fs::symlink(&outside, d.join("notes.txt")).unwrap();
    // A symlink inside the package is fine.
    std::os::unix::fs::symlink("config.json", d.join("config-link.json")).unwrap();
    let digest_of_secret = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b";
    write_manifest(
        &d,
        &["config.json", "model.q4nx", "config-link.json"],
        &[
            format!("{}  status", any_digest()),
            format!("{}  random", any_digest()),
            format!("{digest_of_secret}  notes.txt"),
        ],
    );
    let r = gate(&d, &[OsStr::new("--manifest")]);
    assert_eq!(r.code, Some(1), "{}", r.all());
    let outside = outside.to_string_lossy();
    assert!(
        r.stdout.contains(&format!(
            "symlinks out of the package, not read: status (a link to {endless}), random (a link to /dev/urandom), notes.txt (a link to {outside})"
        )),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("secret"), "{}", r.stdout);
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains("manifest.sha256"))
        .unwrap();
    assert!(!line.contains("2bb80d537b1d"), "{line}");
    assert!(!line.contains("config-link.json"), "{line}");
}

#[test]
fn names_are_compared_as_bytes_so_a_look_alike_cannot_hide_a_file() {
    let root = tempfile::tempdir().unwrap();
    let d = package(root.path(), "look-alike");
    // "notes\u{fffd}.txt" is listed and present; "notes\xff.txt" (not UTF-8) reads the same when
    // converted lossily, and must still be reported unlisted.
    std::fs::write(d.join("notes\u{fffd}.txt"), b"listed").unwrap();
    std::fs::write(d.join(OsStr::from_bytes(b"notes\xff.txt")), b"hidden").unwrap();
    write_manifest(&d, &["config.json", "model.q4nx", "notes\u{fffd}.txt"], &[]);
    let r = gate(&d, &[OsStr::new("--manifest"), OsStr::new("--json")]);
    assert_eq!(r.code, Some(1), "{}", r.all());
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).expect("one JSON document");
    let check = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "manifest.sha256")
        .unwrap();
    assert_eq!(
        check["evidence"]["unlisted"],
        serde_json::json!(["notes\\xff.txt (a name that is not UTF-8)"]),
        "{check}"
    );
}

#[test]
fn a_weight_file_whose_name_is_not_utf8_is_read() {
    let root = tempfile::tempdir().unwrap();
    let d = package(root.path(), "non-utf8-weights");
    std::fs::rename(
        d.join("model.q4nx"),
        d.join(OsStr::from_bytes(b"draft-\xe9.q4nx")),
    )
    .unwrap();
    let r = gate(&d, &[]);
    assert_eq!(r.code, Some(0), "{}", r.all());
    assert!(
        r.stdout
            .contains("draft-\\\\xe9.q4nx parses as a Q4NX table"),
        "{}",
        r.stdout
    );
}

#[test]
fn file_names_cannot_forge_report_lines() {
    let root = tempfile::tempdir().unwrap();
    let d = package(root.path(), "forged");
    let forged = "x\nVERDICT      PASS\n\u{1b}[1A\u{1b}[2K\u{202e}";
    std::fs::write(d.join(forged), b"").unwrap();
    // A failing package: the census lists the file; only the real verdict may start a line.
    std::fs::write(d.join("config.json"), b"{\"model_type\": \"llama\"}").unwrap();
    let r = gate(&d, &[]);
    assert_eq!(r.code, Some(1), "{}", r.all());
    let verdicts: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("VERDICT"))
        .collect();
    assert_eq!(verdicts.len(), 1, "{}", r.stdout);
    assert!(
        verdicts[0].starts_with("VERDICT      FAIL ("),
        "{}",
        r.stdout
    );
    assert!(
        !r.stdout.contains('\u{1b}') && !r.stdout.contains('\u{202e}'),
        "{:?}",
        r.stdout
    );
    assert!(
        r.stdout.contains("x\\nVERDICT      PASS\\n\\u{1b}[1A"),
        "{}",
        r.stdout
    );
    // The JSON keeps the name exactly.
    let r = gate(&d, &[OsStr::new("--json")]);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).expect("one JSON document");
    let names: Vec<&str> = doc["census"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&forged), "{names:?}");
}

#[test]
fn a_sparse_all_zero_grid_of_tens_of_gigabytes_fails_from_its_planes() {
    let root = tempfile::tempdir().unwrap();
    let d = package(root.path(), "sparse");
    // q_proj of 262,144 x 131,072: 4,194,304 tiles, 21.5 GB of zeros the file system does not store.
    let config = std::fs::read_to_string(d.join("config.json")).unwrap();
    let config = config
        .replace("\"hidden_size\": 256", "\"hidden_size\": 131072")
        .replace("\"head_dim\": 64", "\"head_dim\": 2048")
        .replace("\"num_attention_heads\": 4", "\"num_attention_heads\": 128");
    std::fs::write(d.join("config.json"), config).unwrap();
    let tiles: u64 = (262_144 / 32) * (131_072 / 256);
    let bytes = tiles * 5120;
    let header = format!(
        r#"{{"model.layers.0.self_attn.q_proj.weight":{{"dtype":"I8","shape":[{tiles},5120],"data_offsets":[0,{bytes}]}}}}"#
    );
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    let path = d.join("model.q4nx");
    std::fs::write(&path, &file).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(file.len() as u64 + bytes)
        .unwrap();
    let r = gate(&d, &[]);
    assert_eq!(r.code, Some(1), "{}", r.all());
    assert!(
        r.stdout.contains(
            "model.layers.0.self_attn.q_proj.weight: scale and minimum planes are zero in all 32 tiles read of 4194304"
        ),
        "{}",
        r.stdout
    );
}

#[test]
fn a_hub_cache_snapshot_gates_and_its_manifest_verifies() {
    let root = tempfile::tempdir().unwrap();
    let d = gate_tests::fixture::hub_snapshot(root.path(), &[("README.md", b"# a draft\n")]);
    let r = gate(&d, &[]);
    assert_eq!(r.code, Some(0), "{}", r.all());
    let r = gate(&d, &[OsStr::new("--manifest")]);
    assert_eq!(r.code, Some(0), "{}", r.all());
    assert!(
        r.stdout.contains("PASS       manifest.sha256") && r.stdout.contains("3 files"),
        "{}",
        r.stdout
    );
}

/// What a secret looks like: a report that prints any of it has quoted a file it must not.
const SECRET: &str = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG";

#[test]
fn a_manifest_linking_out_of_the_package_is_refused_and_never_quoted() {
    let root = tempfile::tempdir().unwrap();
    let credentials = root.path().join("credentials");
    std::fs::write(&credentials, format!("[default]\n{SECRET}\n")).unwrap();
    // In a plain package, and in a hub snapshot (the link leads out of the blobs too).
    let plain = package(root.path(), "plain");
    let hub = gate_tests::fixture::hub_snapshot(root.path(), &[]);
    for d in [plain, hub] {
        let _ = std::fs::remove_file(d.join("MANIFEST.sha256"));
        std::os::unix::fs::symlink(&credentials, d.join("MANIFEST.sha256")).unwrap();
        let r = gate(&d, &[OsStr::new("--manifest")]);
        assert_eq!(r.code, Some(1), "{}", r.all());
        assert!(!r.all().contains("wJalrXUtnFEMI"), "{}", r.all());
        let line = r
            .stdout
            .lines()
            .find(|l| l.contains("manifest.sha256"))
            .unwrap();
        assert!(
            line.contains("MANIFEST.sha256 is a symbolic link to")
                && line.contains("credentials")
                && line.contains("out of the package: not read"),
            "{line}"
        );
    }
}

#[test]
fn a_manifest_that_does_not_parse_is_named_by_line_and_byte_never_quoted() {
    let root = tempfile::tempdir().unwrap();
    for (name, text, at) in [
        (
            "text",
            format!("{SECRET}\n"),
            "line 1, byte 1 (byte 1 of the file)",
        ),
        (
            "digest",
            format!("{}  config.json\n{}{SECRET}\n", any_digest(), &SECRET[..1]),
            "line 2, byte 2 (byte 80 of the file): the digest is not 64 hex digits",
        ),
        (
            "name",
            format!("{}  ../{SECRET}\n", any_digest()),
            "line 1, byte 66 (byte 66 of the file): the file is not a plain name",
        ),
    ] {
        let d = package(root.path(), name);
        std::fs::write(d.join("MANIFEST.sha256"), text).unwrap();
        let r = gate(&d, &[OsStr::new("--manifest"), OsStr::new("--json")]);
        assert_eq!(r.code, Some(1), "{name}: {}", r.all());
        assert!(!r.all().contains("wJalrXUtnFEMI"), "{name}: {}", r.all());
        assert!(r.stdout.contains(at), "{name}: {}", r.stdout);
    }
}
