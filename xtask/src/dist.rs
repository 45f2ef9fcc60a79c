//! `cargo xtask dist`: the release archive of dflash-gate for one platform, and its checksum, exactly
//! as the release job attaches them to a tagged release (it runs this, once per platform), so running
//! it here is the release's dry run.
//!
//! `dflash-gate-<version>-<triple>.tar.gz` holds one directory of that name, laid out as an install
//! prefix, so that directory is all a user needs: no checkout, no cargo. `CMAKE_PREFIX_PATH=<it>` serves
//! `find_package(DFlashGate)`, `<it>/bin` goes on the PATH, and a C or C++ loader compiles against
//! `<it>/include` and links `<it>/lib` (the layout is [`contents`]'s). `<archive>.sha256` is one
//! `sha256sum` line, so `sha256sum -c` (or `shasum -a 256 -c`) checks a download.
//!
//! The binary is at `bin/dflash-gate` only, not also at the top as the first archives had it: no
//! release was ever published with that layout, so nobody's install step depends on it, and a second
//! copy would double the download and leave a prefix with two binaries.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The installed binary, where `find_package(DFlashGate)` looks for it beside the package config.
const BINARY: &str = "bin/dflash-gate";
/// The C library's header, from the checkout's `capi/include`.
const HEADER: (&str, &str) = ("capi/include/dflash_gate.h", "include/dflash_gate.h");
/// The C libraries (static and shared, as `capi/` builds them) go here, and the package config below.
const LIB_DIR: &str = "lib";
const CONFIG_DIR: &str = "lib/cmake/DFlashGate";
/// The JSON document's schema (`--json`, and the C library's `dflash_gate_report_json`).
const SCHEMA: (&str, &str) = (
    "schema/report.schema.json",
    "share/dflash-gate/schema/report.schema.json",
);
/// The README, the licences (the manifest declares both), CONTRIBUTING.md and `docs/*.md`, at the
/// places they have in the checkout relative to one another, so the README's links and the docs'
/// work from the archive as they do on the repository's pages.
const DOC_DIR: &str = "share/doc/dflash-gate";
const DOCS: &[&str] = &[
    "README.md",
    "LICENSE-MIT",
    "LICENSE-APACHE",
    "CONTRIBUTING.md",
];
/// Symbolic links inside [`DOC_DIR`] for the two files outside `docs/` that the docs link to
/// (`../schema/report.schema.json`, `../capi/include/dflash_gate.h`): each points at the one copy the
/// prefix has, so the links resolve without shipping the bytes twice.
const DOC_LINKS: &[(&str, &str)] = &[
    ("schema", "../../dflash-gate/schema"),
    ("capi/include", "../../../../include"),
];

pub fn run(args: &[String]) -> Result<ExitCode, String> {
    let mut target = None;
    let mut out = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let slot = match arg.as_str() {
            "--target" => &mut target,
            "--out" => &mut out,
            _ => return Err(format!("dist: unknown argument {arg:?}; usage: {USAGE}")),
        };
        let Some(value) = rest.next() else {
            return Err(format!("dist: {arg} needs a value; usage: {USAGE}"));
        };
        if slot.replace(value.clone()).is_some() {
            return Err(format!("dist: {arg} given twice"));
        }
    }
    let out = out
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("dist"));
    let (archive, sum) = make(target.as_deref(), &out)?;
    println!("{}", archive.display());
    println!("{}", sum.display());
    Ok(ExitCode::SUCCESS)
}

/// The archive and its checksum for `target` (default the host), built and written into `out` as
/// `cargo xtask dist` writes them: `cargo xtask cmake-smoke archive` tests the very same archive.
pub fn make(target: Option<&str>, out: &Path) -> Result<(PathBuf, PathBuf), String> {
    let triple = match target {
        Some(t) => t.to_owned(),
        None => host()?,
    };
    package(&build(target)?, &triple, out)
}

pub const USAGE: &str = "dist [--target TRIPLE] [--out DIR]";

/// cargo's target directory for this workspace.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::root().join("target"))
}

/// The triple rustc builds for by default.
fn host() -> Result<String, String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out = Command::new(&rustc)
        .arg("-vV")
        .output()
        .map_err(|e| format!("running {rustc} -vV: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_owned)
        .ok_or_else(|| format!("{rustc} -vV named no host triple"))
}

/// What the archive ships that cargo builds: the optimised binary and the C libraries.
struct Built {
    binary: PathBuf,
    libraries: Vec<PathBuf>,
}

/// The optimised binary and C libraries, from the committed lock file, where cargo says it put them.
fn build(target: Option<&str>) -> Result<Built, String> {
    let mut options = vec!["--locked"];
    if let Some(target) = target {
        options.extend(["--target", target]);
    }
    let binary = crate::gate::build_with(&options)?;
    let messages = crate::gate::cargo_build(
        "the C library",
        &["--package", "dflash-gate-capi", "--lib"],
        &options,
    )?;
    let libraries = c_libraries(&messages);
    if libraries.is_empty() {
        return Err(
            "cargo built dflash-gate-capi but named no static or shared library".to_owned(),
        );
    }
    Ok(Built { binary, libraries })
}

/// The static and shared libraries among the files cargo's JSON messages say it made for the C ABI
/// crate (its rlib is for Rust callers, and is not shipped).
fn c_libraries(messages: &str) -> Vec<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "dflash_gate_capi")
        .flat_map(|m| m["filenames"].as_array().cloned().unwrap_or_default())
        .filter_map(|f| f.as_str().map(PathBuf::from))
        .filter(|f| {
            f.extension()
                .is_some_and(|x| x == "a" || x == "so" || x == "dylib")
        })
        .collect()
}

/// Every file and symbolic link of the archive, below its top directory, as (path in the archive,
/// where it comes from); the package config is written, not copied, and is not listed.
fn contents(built: &Built) -> Result<Vec<(PathBuf, Source)>, String> {
    let root = crate::root();
    let mut out = vec![(PathBuf::from(BINARY), Source::File(built.binary.clone()))];
    for library in &built.libraries {
        let name = library
            .file_name()
            .ok_or_else(|| format!("{}: a library with no file name", library.display()))?;
        out.push((Path::new(LIB_DIR).join(name), Source::File(library.clone())));
    }
    for (from, to) in [HEADER, SCHEMA] {
        out.push((PathBuf::from(to), Source::File(root.join(from))));
    }
    let doc = Path::new(DOC_DIR);
    for file in DOCS {
        out.push((doc.join(file), Source::File(root.join(file))));
    }
    for file in crate::docs::markdown_files(&root) {
        if let Ok(rel) = file.strip_prefix(root.join("docs")) {
            out.push((doc.join("docs").join(rel), Source::File(file.clone())));
        }
    }
    for (link, to) in DOC_LINKS {
        out.push((doc.join(link), Source::Link(PathBuf::from(to))));
    }
    Ok(out)
}

/// Where an archive entry comes from: a file copied in, or a symbolic link's target.
enum Source {
    File(PathBuf),
    Link(PathBuf),
}

/// Writes `<out>/<name>.tar.gz` and `<out>/<name>.tar.gz.sha256`; returns both paths.
fn package(built: &Built, triple: &str, out: &Path) -> Result<(PathBuf, PathBuf), String> {
    let name = format!("dflash-gate-{}-{triple}", crate::cmake_files::version());
    let staging = out.join(&name);
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    }
    for (to, from) in contents(built)? {
        let to = staging.join(to);
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        match from {
            Source::File(from) => std::fs::copy(&from, &to)
                .map(drop)
                .map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))?,
            Source::Link(target) => std::os::unix::fs::symlink(&target, &to)
                .map_err(|e| format!("linking {} to {}: {e}", to.display(), target.display()))?,
        }
    }
    crate::cmake_files::write_relocatable_config(&staging.join(CONFIG_DIR))?;
    let archive = out.join(format!("{name}.tar.gz"));
    let status = Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(out)
        .arg(&name)
        .status()
        .map_err(|e| format!("running tar: {e}"))?;
    std::fs::remove_dir_all(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    if !status.success() {
        return Err(format!("tar failed writing {}", archive.display()));
    }
    let bytes = std::fs::read(&archive).map_err(|e| format!("{}: {e}", archive.display()))?;
    let sum = out.join(format!("{name}.tar.gz.sha256"));
    std::fs::write(&sum, sha256_line(&bytes, &format!("{name}.tar.gz")))
        .map_err(|e| format!("{}: {e}", sum.display()))?;
    Ok((archive, sum))
}

/// One `sha256sum` line: the digest in lowercase hex, two spaces, the file name.
fn sha256_line(bytes: &[u8], name: &str) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{hex}  {name}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The archive, made from stand-ins for what cargo builds, holds a whole install prefix: the
    /// binary, the C library and its header, the package config, the schema, and the docs with every
    /// relative link resolving inside the archive. (The first archives held the binary, the README and
    /// the licences alone.)
    #[test]
    fn the_archive_is_a_prefix_that_needs_nothing_else() {
        let work = tempfile::tempdir().unwrap();
        let made = work.path().join("made");
        std::fs::create_dir(&made).unwrap();
        let stand_in = |name: &str| {
            let file = made.join(name);
            std::fs::write(&file, name).unwrap();
            file
        };
        let built = Built {
            binary: stand_in("dflash-gate"),
            libraries: vec![
                stand_in("libdflash_gate_capi.a"),
                stand_in("libdflash_gate_capi.so"),
            ],
        };
        let out = work.path().join("out");
        let (archive, sum) = package(&built, "x86_64-test", &out).unwrap();
        let top = format!("dflash-gate-{}-x86_64-test", crate::cmake_files::version());
        assert_eq!(archive, out.join(format!("{top}.tar.gz")));
        assert!(std::fs::read_to_string(&sum)
            .unwrap()
            .ends_with(&format!("  {top}.tar.gz\n")));

        let listed = Command::new("tar")
            .arg("-tzf")
            .arg(&archive)
            .output()
            .unwrap();
        let mut listed: Vec<String> = String::from_utf8_lossy(&listed.stdout)
            .lines()
            .filter(|l| !l.ends_with('/'))
            .map(|l| l.strip_prefix(&format!("{top}/")).unwrap_or(l).to_owned())
            .collect();
        listed.sort();
        let mut expected: Vec<String> = [
            "bin/dflash-gate",
            "include/dflash_gate.h",
            "lib/libdflash_gate_capi.a",
            "lib/libdflash_gate_capi.so",
            "lib/cmake/DFlashGate/DFlashGateConfig.cmake",
            "lib/cmake/DFlashGate/DFlashGateConfigVersion.cmake",
            "share/dflash-gate/schema/report.schema.json",
            "share/doc/dflash-gate/README.md",
            "share/doc/dflash-gate/CONTRIBUTING.md",
            "share/doc/dflash-gate/LICENSE-MIT",
            "share/doc/dflash-gate/LICENSE-APACHE",
            "share/doc/dflash-gate/schema",
            "share/doc/dflash-gate/capi/include",
        ]
        .map(str::to_owned)
        .into();
        let root = crate::root();
        for file in crate::docs::markdown_files(&root) {
            if let Ok(doc) = file.strip_prefix(root.join("docs")) {
                expected.push(format!("share/doc/dflash-gate/docs/{}", doc.display()));
            }
        }
        expected.sort();
        assert_eq!(listed, expected);

        // Unpacked, the docs' relative links (the README's to docs/ and CONTRIBUTING.md, the docs' to
        // the schema, the header and the README) all resolve inside the archive.
        let unpacked = work.path().join("unpacked");
        std::fs::create_dir(&unpacked).unwrap();
        let status = Command::new("tar")
            .arg("-xzf")
            .arg(&archive)
            .arg("-C")
            .arg(&unpacked)
            .status()
            .unwrap();
        assert!(status.success());
        let doc = unpacked.join(&top).join(DOC_DIR);
        let mut broken = Vec::new();
        for file in crate::docs::markdown_files(&doc) {
            broken.extend(crate::docs::broken_links(&doc, &file).unwrap());
        }
        assert!(broken.is_empty(), "{broken:#?}");
        assert_eq!(
            std::fs::read(doc.join("capi/include/dflash_gate.h")).unwrap(),
            std::fs::read(root.join(HEADER.0)).unwrap()
        );
        // The package config is the relocatable one: it names no checkout.
        let config = std::fs::read_to_string(
            unpacked
                .join(&top)
                .join(CONFIG_DIR)
                .join(crate::cmake_files::CONFIG_FILE),
        )
        .unwrap();
        assert!(config.contains("set(_dflash_gate_recorded_root \"\")"));
    }

    #[test]
    fn the_c_libraries_are_read_from_cargos_messages() {
        let messages = r#"{"reason":"compiler-artifact","target":{"name":"dflash_gate"},"filenames":["/t/libdflash_gate.rlib"]}
{"reason":"compiler-artifact","target":{"name":"dflash_gate_capi"},"filenames":["/t/libdflash_gate_capi.rlib","/t/libdflash_gate_capi.a","/t/libdflash_gate_capi.so"]}"#;
        assert_eq!(
            c_libraries(messages),
            [
                PathBuf::from("/t/libdflash_gate_capi.a"),
                PathBuf::from("/t/libdflash_gate_capi.so")
            ]
        );
    }

    #[test]
    fn the_checksum_line_is_what_sha256sum_prints() {
        // `printf abc | sha256sum`
        assert_eq!(
            sha256_line(b"abc", "x.tar.gz"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  x.tar.gz\n"
        );
    }
}
