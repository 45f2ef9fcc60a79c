//! `cargo xtask dist`: the release archive of the `dflash-gate` binary for one platform, and its
//! checksum, exactly as the release job attaches them to a tagged release (it runs this, once per
//! platform), so running it here is the release's dry run.
//!
//! `dflash-gate-<version>-<triple>.tar.gz` holds one directory of that name: the optimised binary, the
//! README and both licence texts. `<archive>.sha256` is one `sha256sum` line, so `sha256sum -c` (or
//! `shasum -a 256 -c`) checks a download.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Shipped beside the binary: what it is, and the terms it is under (the manifest declares both
/// licences).
const BESIDE: &[&str] = &["README.md", "LICENSE-MIT", "LICENSE-APACHE"];

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
    let triple = match target.clone() {
        Some(t) => t,
        None => host()?,
    };
    let out = out
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("dist"));
    let binary = build(target.as_deref())?;
    let (archive, sum) = package(&binary, &triple, &out)?;
    println!("{}", archive.display());
    println!("{}", sum.display());
    Ok(ExitCode::SUCCESS)
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

/// The optimised binary, from the committed lock file, where cargo says it put it.
fn build(target: Option<&str>) -> Result<PathBuf, String> {
    match target {
        Some(target) => crate::gate::build_with(&["--locked", "--target", target]),
        None => crate::gate::build_with(&["--locked"]),
    }
}

/// Writes `<out>/<name>.tar.gz` and `<out>/<name>.tar.gz.sha256`; returns both paths.
fn package(binary: &Path, triple: &str, out: &Path) -> Result<(PathBuf, PathBuf), String> {
    let name = format!("dflash-gate-{}-{triple}", crate::cmake::version());
    let staging = out.join(&name);
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    }
    std::fs::create_dir_all(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    let copy = |from: &Path, to: &Path| {
        std::fs::copy(from, to)
            .map(drop)
            .map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))
    };
    copy(binary, &staging.join("dflash-gate"))?;
    for file in BESIDE {
        copy(&crate::root().join(file), &staging.join(file))?;
    }
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
    #[test]
    fn the_checksum_line_is_what_sha256sum_prints() {
        // `printf abc | sha256sum`
        assert_eq!(
            super::sha256_line(b"abc", "x.tar.gz"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  x.tar.gz\n"
        );
    }
}
