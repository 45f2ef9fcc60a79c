//! The command line's own hostile input: a folder under `--all` whose packages cannot be read, and
//! arguments that try to forge lines of their own. The binary runs as users run it.

use gate_tests::fixture::copy;
use libtest_mimic::{Failed, Trial};
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

pub fn trials() -> Vec<Trial> {
    vec![
        Trial::test(
            "cli::all_gates_or_counts_every_directory_that_looks_like_a_package",
            all_counts_the_unreadable,
        ),
        Trial::test(
            "cli::usage_errors_escape_what_the_command_line_said",
            usage_errors_escaped,
        ),
        Trial::test(
            "cli::two_packages_whose_names_differ_in_bytes_that_are_not_utf8_print_apart",
            names_apart,
        ),
        Trial::test(
            "cli::all_skips_another_models_directory_and_gates_a_draft_under_another_name",
            all_skips_another_model,
        ),
        Trial::test(
            "cli::all_gates_a_gguf_draft_file_and_skips_a_target_gguf",
            all_gguf,
        ),
        Trial::test(
            "cli::manifest_on_a_gguf_draft_is_held_in_its_folder_and_undecided_alone",
            gguf_manifest,
        ),
        Trial::test(
            "cli::a_path_that_is_no_draft_is_refused_for_what_it_is",
            refused_for_what_it_is,
        ),
        Trial::test(
            "cli::all_reads_nothing_a_cache_repositorys_link_out_reaches",
            all_cache_link_out,
        ),
        Trial::test(
            "cli::all_gates_a_repository_keeping_its_draft_in_dflash",
            all_dflash_folder,
        ),
    ]
}

/// A repository that keeps its draft in `dflash/` (XiaomiMiMo's layout: the target's config and
/// weights at its root) is gated by `--all`, where its root alone reads as another model's folder
/// (skipped), and its row and JSON document say where the draft was found.
fn all_dflash_folder() -> Result<(), Failed> {
    use gate_tests::synth::{source, Encoding, Geometry, Package};
    let root = tempfile::tempdir()?;
    let models = root.path().join("models");
    let repository = models.join("mimo");
    let mut package = Package::generate(&Geometry::small(), Encoding::default(), 7);
    std::fs::create_dir_all(repository.join("dflash"))?;
    source::write_source(
        &mut package,
        &repository.join("dflash"),
        Default::default(),
        7,
    )?;
    std::fs::copy(
        repository.join("dflash/model.safetensors"),
        repository.join("model.safetensors"),
    )?;
    std::fs::write(
        repository.join("config.json"),
        r#"{"architectures":["MiMoV2ForCausalLM"],"model_type":"mimo_v2","hidden_size":256}"#,
    )?;
    let o = gate(&["--all".as_ref(), models.as_os_str()])?;
    let out = text(&o.stdout);
    let row = out.lines().next().unwrap_or_default();
    if o.status.code() != Some(0)
        || !row.starts_with("PASS")
        || !row.contains("/mimo ")
        || !row.contains("[safetensors, draft in dflash/] 6 of 6")
    {
        return Err(format!(
            "exit {:?}, owed 0 with the repository gated in dflash/:\n{out}{}",
            o.status.code(),
            text(&o.stderr)
        )
        .into());
    }
    let o = gate(&["--all".as_ref(), models.as_os_str(), "--json".as_ref()])?;
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout)?;
    let report = &doc[0];
    let named = report["package"]
        .as_str()
        .is_some_and(|p| p.ends_with("mimo"));
    if report["draft_in"] != "dflash" || !named {
        return Err(format!("the document does not say the draft is in dflash/: {doc}").into());
    }
    Ok(())
}

/// `--all` over a hub cache whose repository's `blobs` is a link out of it: its row is an ERROR
/// naming the link, and nothing the outside directory holds reaches the listing, where the config
/// there, read to tell a draft from another model, was printed as the repository's model.
#[cfg(unix)]
fn all_cache_link_out() -> Result<(), Failed> {
    let root = tempfile::tempdir()?;
    let cache = root.path().join("hub");
    let repo = cache.join("models--org--name");
    let commit = "4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a";
    let snapshot = repo.join("snapshots").join(commit);
    std::fs::create_dir_all(&snapshot)?;
    std::fs::create_dir_all(repo.join("refs"))?;
    std::fs::write(repo.join("refs/main"), commit)?;
    let outside = root.path().join("outside");
    std::fs::create_dir(&outside)?;
    std::fs::write(
        outside.join("c0"),
        br#"{"architectures": ["OutsideSecretModel"], "hidden_size": 8}"#,
    )?;
    std::fs::write(outside.join("w0"), b"")?;
    std::os::unix::fs::symlink(&outside, repo.join("blobs"))?;
    std::os::unix::fs::symlink("../../blobs/c0", snapshot.join("config.json"))?;
    std::os::unix::fs::symlink("../../blobs/w0", snapshot.join("model.safetensors"))?;
    let o = gate(&["--all".as_ref(), cache.as_os_str()])?;
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    let refused = out
        .lines()
        .any(|l| l.starts_with("ERROR ") && l.contains("blobs: is a symbolic link to"));
    if o.status.code() != Some(2) || !refused || format!("{out}{err}").contains("OutsideSecret") {
        return Err(format!(
            "exit {:?}, owed 2 with an ERROR naming blobs and nothing from outside:\n{out}{err}",
            o.status.code()
        )
        .into());
    }
    Ok(())
}

/// A draft is a directory or a `.gguf` file: a missing `.gguf` is no such file (not directory), a
/// FIFO is named as one, and nothing that is not a directory is called a file unless it is one.
#[cfg(unix)]
fn refused_for_what_it_is() -> Result<(), Failed> {
    let root = tempfile::tempdir()?;
    let fifo = |name: &str| -> Result<std::path::PathBuf, Failed> {
        let path = root.path().join(name);
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())?;
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
        if unsafe { libc::mkfifo(c.as_ptr(), 0o644) } != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        Ok(path)
    };
    let plain = root.path().join("notes.txt");
    std::fs::write(&plain, b"not a draft\n")?;
    let cases = [
        (root.path().join("absent.gguf"), "no such file", "directory"),
        (root.path().join("absent"), "no such directory", "file"),
        (fifo("draft.gguf")?, "is a FIFO", "directory"),
        (fifo("draft")?, "not a directory", "a file"),
        (plain, "not a directory", "a file"),
    ];
    // Two parts read as a hub repository id first, looked up in a cache that does not hold it.
    let cache = root.path().join("hub");
    std::fs::create_dir(&cache)?;
    for (id, says) in [
        ("models/absent.gguf", "no such file, and the hub cache"),
        ("models/absent", "no such directory, and the hub cache"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_dflash-gate"))
            .arg(id)
            .current_dir(root.path())
            .env("HF_HUB_CACHE", &cache)
            .env_remove("CLICOLOR_FORCE")
            .output()?;
        let stderr = text(&out.stderr);
        if out.status.code() != Some(2) || !stderr.contains(says) {
            return Err(format!(
                "{id}: exit {:?}, owed 2 saying {says:?}: {stderr}",
                out.status.code()
            )
            .into());
        }
    }
    for (path, says, never) in cases {
        let out = gate(&[path.as_os_str()])?;
        let stderr = text(&out.stderr).replace(&path.display().to_string(), "PATH");
        if out.status.code() != Some(2) || !stderr.contains(says) || stderr.contains(never) {
            return Err(format!(
                "{}: exit {:?}, owed 2 saying {says:?} and never {never:?}: {stderr}",
                path.display(),
                out.status.code()
            )
            .into());
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn refused_for_what_it_is() -> Result<(), Failed> {
    Ok(())
}

#[cfg(not(unix))]
fn all_cache_link_out() -> Result<(), Failed> {
    Ok(())
}

fn gate(args: &[&OsStr]) -> Result<Output, Failed> {
    Ok(Command::new(env!("CARGO_BIN_EXE_dflash-gate"))
        .args(args)
        .env_remove("CLICOLOR_FORCE")
        .output()?)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Puts something other than a regular file where a config.json goes.
#[cfg(unix)]
type Make = fn(&Path) -> std::io::Result<()>;

/// Under `--all`: a config.json that is a link to nothing (beside a weight file or alone), a FIFO or
/// a directory, a weight file with no config.json, and a link to nothing where a package was, each
/// counted as not gated (exit 2), never dropped; a safetensors
/// checkpoint listed as skipped; a folder of notes not counted at all.
#[cfg(unix)]
fn all_counts_the_unreadable() -> Result<(), Failed> {
    let root = tempfile::tempdir()?;
    let models = root.path().join("models");
    copy(&models, "a-good");
    let broken: [(&str, Make); 4] = [
        ("b-dangling", |c| {
            std::os::unix::fs::symlink("nowhere.json", c)
        }),
        ("c-fifo", |c| {
            let path = std::ffi::CString::new(c.as_os_str().as_encoded_bytes())?;
            // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
            match unsafe { libc::mkfifo(path.as_ptr(), 0o644) } {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        }),
        ("d-directory", |c| std::fs::create_dir(c)),
        ("e-weights-only", |_| Ok(())),
    ];
    for (name, make) in broken {
        let d = copy(&models, name);
        std::fs::remove_file(d.join("config.json"))?;
        make(&d.join("config.json"))?;
    }
    // A download that stopped after its config.json link: no weight file says "package" here.
    let alone = models.join("b-link-alone");
    std::fs::create_dir(&alone)?;
    std::os::unix::fs::symlink("nowhere.json", alone.join("config.json"))?;
    // A package linked in from a disk that is not there.
    std::os::unix::fs::symlink(
        root.path().join("unmounted"),
        models.join("h-link-to-nothing"),
    )?;
    // A target's checkpoint: its config declares no draft (a draft's folder is gated, in its form).
    let checkpoint = models.join("f-checkpoint");
    std::fs::create_dir(&checkpoint)?;
    std::fs::write(checkpoint.join("config.json"), br#"{"hidden_size": 256}"#)?;
    std::fs::write(checkpoint.join("model.safetensors"), b"")?;
    let notes = models.join("g-notes");
    std::fs::create_dir(&notes)?;
    std::fs::write(notes.join("README"), b"not a package")?;

    let o = gate(&["--all".as_ref(), models.as_os_str()])?;
    let out = text(&o.stdout);
    if o.status.code() != Some(2) {
        return Err(format!(
            "exit {:?}, expected 2 (six not gated):\n{out}",
            o.status.code()
        )
        .into());
    }
    let lines: Vec<&str> = out.lines().collect();
    let starts = |label: &str, name: &str| {
        lines
            .iter()
            .filter(|l| l.starts_with(label) && l.contains(&format!("/{name}  ")))
            .count()
            == 1
    };
    for name in [
        "b-dangling",
        "b-link-alone",
        "c-fifo",
        "d-directory",
        "e-weights-only",
        "h-link-to-nothing",
    ] {
        if !starts("ERROR ", name) {
            return Err(format!("{name}: no ERROR line of its own:\n{out}").into());
        }
    }
    // The folder of notes is no package: listed and counted as one, never dropped.
    if !starts("PASS ", "a-good")
        || !starts("SKIPPED ", "f-checkpoint")
        || !starts("SKIPPED ", "g-notes")
    {
        return Err(
            format!("a-good passed, f-checkpoint and g-notes skipped, each once:\n{out}").into(),
        );
    }
    if lines.len() != 10 {
        return Err(format!("nine entries listed and the summary:\n{out}").into());
    }
    let summary = "7 packages: 1 pass, 0 fail, 0 undecided, 6 not gated (3 no config, 2 not a regular file, 1 unreadable); 2 skipped (1 checkpoint, 1 not a package)";
    if lines.last() != Some(&summary) {
        return Err(format!("the summary is not {summary:?}:\n{out}").into());
    }
    // The JSON array has a document for each of the seven, six of them errors, and the skipped
    // checkpoint's in its place.
    let o = gate(&["--all".as_ref(), models.as_os_str(), "--json".as_ref()])?;
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout)?;
    let kinds: Vec<&str> = doc
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["kind"].as_str())
        .collect();
    if kinds
        != [
            "report", "error", "error", "error", "error", "error", "skipped", "skipped", "error",
        ]
        || o.status.code() != Some(2)
    {
        return Err(format!("--json: {kinds:?}, exit {:?}", o.status.code()).into());
    }
    Ok(())
}

#[cfg(not(unix))]
fn all_counts_the_unreadable() -> Result<(), Failed> {
    Ok(())
}

/// An unknown option, an `--all` folder, a `--color` value and a package directory, each holding a
/// newline, a terminal escape and a forged verdict: every message prints them escaped, on the line
/// it belongs to.
fn usage_errors_escaped() -> Result<(), Failed> {
    let forged = "\n\u{1b}[2KVERDICT      PASS\r\u{202e}";
    let root = tempfile::tempdir()?;
    let absent = root.path().join(format!("absent{forged}"));
    let models = root.path().join("models");
    copy(&models, "good");
    copy(&models, &format!("pkg{forged}"));
    std::fs::write(models.join(format!("pkg{forged}/config.json")), b"{")?;
    let os = |s: &str| std::ffi::OsString::from(s);
    let runs = [
        vec![os(&format!("--x{forged}")), os("pkg")],
        vec![os("--all"), absent.clone().into_os_string()],
        vec![absent.clone().into_os_string()],
        vec![os("--color"), os(&format!("a{forged}")), os("pkg")],
        vec![os("--all"), models.into_os_string()],
    ];
    for args in runs {
        let o = gate(&args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>())?;
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        let both = format!("{out}{err}");
        if !matches!(o.status.code(), Some(1 | 2)) {
            return Err(format!("{args:?}: exit {:?}\n{both}", o.status.code()).into());
        }
        if let Some(c) = both
            .chars()
            .find(|&c| c == '\u{1b}' || c == '\r' || c == '\u{202e}')
        {
            return Err(format!("{args:?}: {c:?} reached the output:\n{both}").into());
        }
        if both.lines().any(|l| l.starts_with("VERDICT")) {
            return Err(format!("{args:?}: a forged verdict line:\n{both}").into());
        }
        if !both.contains("\\n\\u{1b}[2KVERDICT      PASS") {
            return Err(format!("{args:?}: the argument is not shown escaped:\n{both}").into());
        }
    }
    Ok(())
}

/// `--all` over `c` + 0xfe (a good package) and `c` + 0xff (a broken one): each is named by its own
/// bytes, in the listing and in the JSON, so a reader can tell which failed.
#[cfg(unix)]
fn names_apart() -> Result<(), Failed> {
    use std::os::unix::ffi::OsStrExt;
    let root = tempfile::tempdir()?;
    let models = root.path().join("models");
    for byte in [0xfe_u8, 0xff] {
        let name = [b'c', byte];
        let dir = copy(&models, "x");
        std::fs::rename(&dir, models.join(OsStr::from_bytes(&name)))?;
    }
    let broken = models.join(OsStr::from_bytes(b"c\xff")).join("config.json");
    let config = std::fs::read_to_string(&broken)?;
    std::fs::write(
        &broken,
        config.replacen("\"block_size\": 8", "\"block_size\": 9", 1),
    )?;
    let o = gate(&["--all".as_ref(), models.as_os_str()])?;
    let listing = text(&o.stdout);
    let line = |verdict: &str| -> Result<String, Failed> {
        Ok(listing
            .lines()
            .find(|l| l.starts_with(verdict))
            .ok_or_else(|| format!("no {verdict} line: {listing}"))?
            .to_owned())
    };
    // The human report doubles the escape's backslash, as it does for every file name.
    if !line("PASS")?.contains("/c\\\\xfe  ") || !line("FAIL")?.contains("/c\\\\xff  ") {
        return Err(format!("the packages are not named apart: {listing}").into());
    }
    let o = gate(&["--all".as_ref(), models.as_os_str(), "--json".as_ref()])?;
    let docs: serde_json::Value = serde_json::from_slice(&o.stdout)?;
    let named = |verdict: &str| -> Option<String> {
        docs.as_array()?
            .iter()
            .find(|d| d["verdict"] == verdict)
            .and_then(|d| d["package"].as_str())
            .map(str::to_owned)
    };
    match (named("PASS"), named("FAIL")) {
        (Some(pass), Some(fail)) if pass.ends_with("/c\\xfe") && fail.ends_with("/c\\xff") => {
            Ok(())
        }
        other => Err(format!("the JSON does not name the packages apart: {other:?}").into()),
    }
}

#[cfg(not(unix))]
fn names_apart() -> Result<(), Failed> {
    Ok(())
}

/// Under `--all`: a target beside its draft (a config naming another architecture, no draft field)
/// is listed as skipped and leaves the exit status alone; a draft whose config names another
/// architecture but keeps its draft fields (a misspelt or wrong `architectures`) is still gated,
/// and refused: only a config that is plainly not a draft's is passed over.
fn all_skips_another_model() -> Result<(), Failed> {
    use gate_tests::synth::{Geometry, TargetPackage};
    let root = tempfile::tempdir()?;
    let models = root.path().join("models");
    std::fs::create_dir(&models)?;
    copy(&models, "draft");
    TargetPackage::matching(&Geometry::small()).write(&models.join("target"))?;
    let listing = |o: &Output| format!("{}{}", text(&o.stdout), text(&o.stderr));
    let o = gate(&["--all".as_ref(), models.as_os_str()])?;
    let skipped = text(&o.stdout)
        .lines()
        .any(|l| l.starts_with("SKIPPED") && l.contains("/target  another model"));
    if o.status.code() != Some(0) || !skipped {
        return Err(format!(
            "a draft and its target: exit {:?}, expected 0 with the target skipped:\n{}",
            o.status.code(),
            listing(&o)
        )
        .into());
    }
    let misspelt = copy(&models, "misspelt");
    gate_tests::fixture::edit_config(&misspelt, |c| {
        c.insert(
            "architectures".into(),
            serde_json::json!(["LlamaForCausalLM"]),
        );
        // As a released checkpoint says it: `model_type` alone would declare a draft.
        c.insert("model_type".into(), serde_json::json!("qwen3"));
    });
    let o = gate(&["--all".as_ref(), models.as_os_str()])?;
    let refused = text(&o.stdout)
        .lines()
        .any(|l| l.starts_with("FAIL") && l.contains("/misspelt  config.is_dflash"));
    if o.status.code() != Some(1) || !refused {
        return Err(format!(
            "a draft whose architectures name another model: exit {:?}, expected 1 with it refused:\n{}",
            o.status.code(),
            listing(&o)
        )
        .into());
    }
    // No draft field at all, but model_type "dflash" over another class: a draft mislabelled
    // (loaders would build the class named), gated and refused, never passed over as another model.
    let over = models.join("over-another-class");
    std::fs::create_dir(&over)?;
    std::fs::write(
        over.join("config.json"),
        r#"{"architectures":["LlamaForCausalLM"],"model_type":"dflash","hidden_size":256}"#,
    )?;
    let o = gate(&["--all".as_ref(), models.as_os_str()])?;
    let refused = text(&o.stdout)
        .lines()
        .any(|l| l.starts_with("FAIL") && l.contains("/over-another-class  config.is_dflash"));
    if o.status.code() != Some(1) || !refused {
        return Err(format!(
            "model_type dflash over another class: exit {:?}, expected 1 with it refused:\n{}",
            o.status.code(),
            listing(&o)
        )
        .into());
    }
    Ok(())
}

/// Under `--all`: a GGUF draft directly under the folder is gated as the directories are (never
/// dropped from the count), and a directory whose one GGUF is a model of another architecture (a
/// target beside its draft) is listed as skipped, as a target's Hugging Face folder is.
fn all_gguf() -> Result<(), Failed> {
    use gate_tests::synth::gguf::{gguf_for, GgufFile, GgufOptions};
    use gate_tests::synth::{Encoding, Geometry, Package};
    let root = tempfile::tempdir()?;
    let models = root.path().join("models");
    std::fs::create_dir(&models)?;
    let mut package = Package::generate(&Geometry::small(), Encoding::default(), 7);
    let draft = gguf_for(&mut package, GgufOptions::DEFAULT, 7)?;
    std::fs::write(models.join("loose-draft.gguf"), draft.bytes())?;
    let target = models.join("target");
    std::fs::create_dir(&target)?;
    let mut model = GgufFile::new();
    model.string("general.architecture", "qwen3");
    model.u32("qwen3.block_count", 8);
    std::fs::write(target.join("qwen3.gguf"), model.bytes())?;
    let o = gate(&["--all".as_ref(), models.as_os_str()])?;
    let out = text(&o.stdout);
    let line = |start: &str, name: &str| {
        out.lines()
            .any(|l| l.starts_with(start) && l.contains(&format!("/{name}  ")))
    };
    let summary =
        "1 package: 1 pass, 0 fail, 0 undecided, 0 not gated; 1 skipped (1 another model)";
    if o.status.code() != Some(0)
        || !line("PASS ", "loose-draft.gguf")
        || !line("SKIPPED ", "target")
        || !out.contains("general.architecture is \"qwen3\"")
        || out.lines().last() != Some(summary)
    {
        return Err(format!(
            "exit {:?}, expected 0 with the loose draft passed and the target skipped ({summary}):\n{out}{}",
            o.status.code(),
            text(&o.stderr)
        )
        .into());
    }
    Ok(())
}

/// `--manifest` on a GGUF draft: in a folder with its MANIFEST.sha256 the file is hashed and held to
/// it (a byte changed: FAIL naming it); named alone there is nothing beside it the gate reads, so the
/// check is UNDECIDED saying to name the folder, and the rest of the report stands (never exit 2).
fn gguf_manifest() -> Result<(), Failed> {
    use gate_tests::synth::gguf::{gguf_for, GgufOptions};
    use gate_tests::synth::{write_manifest, Encoding, Geometry, Package};
    let root = tempfile::tempdir()?;
    let folder = root.path().join("draft");
    std::fs::create_dir(&folder)?;
    let mut package = Package::generate(&Geometry::small(), Encoding::default(), 7);
    let file = folder.join("draft.gguf");
    std::fs::write(
        &file,
        gguf_for(&mut package, GgufOptions::DEFAULT, 7)?.bytes(),
    )?;
    write_manifest(&folder)?;
    let manifest_line = |o: &Output| {
        text(&o.stdout)
            .lines()
            .find(|l| l.contains(" manifest.sha256 "))
            .map(str::to_owned)
            .unwrap_or_default()
    };
    let o = gate(&[folder.as_os_str(), "--manifest".as_ref()])?;
    if o.status.code() != Some(0) || !manifest_line(&o).starts_with("PASS ") {
        return Err(format!("a GGUF folder with its manifest:\n{}", text(&o.stdout)).into());
    }
    let o = gate(&[file.as_os_str(), "--manifest".as_ref()])?;
    let line = manifest_line(&o);
    if o.status.code() != Some(3)
        || !line.starts_with("UNDECIDED ")
        || !line.contains("a GGUF file named alone")
    {
        return Err(format!("a GGUF file alone with --manifest:\n{}", text(&o.stdout)).into());
    }
    let mut bytes = std::fs::read(&file)?;
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&file, bytes)?;
    let o = gate(&[folder.as_os_str(), "--manifest".as_ref()])?;
    let line = manifest_line(&o);
    if o.status.code() != Some(1) || !line.starts_with("FAIL ") || !line.contains("draft.gguf") {
        return Err(format!("a GGUF changed after its manifest:\n{}", text(&o.stdout)).into());
    }
    Ok(())
}
