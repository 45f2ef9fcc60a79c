//! Real packages: one trial per check per package, named `<package>::<check id>`.

use dflash_gate::Outcome;
use libtest_mimic::{Failed, Trial};
use std::path::{Path, PathBuf};

/// Directories of real packages to gate, separated like PATH.
pub const PACKAGES_VAR: &str = "DFLASH_GATE_PACKAGES";

pub fn trials() -> Vec<Trial> {
    let Some(list) = std::env::var_os(PACKAGES_VAR) else {
        return Vec::new();
    };
    std::env::split_paths(&list)
        .filter(|p| !p.as_os_str().is_empty())
        .flat_map(|dir| package_trials("packages", &dir))
        .collect()
}

/// A trial per check of the package in `dir`; an ignored trial saying why when it cannot be gated.
pub fn package_trials(group: &str, dir: &Path) -> Vec<Trial> {
    let label = dir
        .file_name()
        .map(|n| {
            n.to_string_lossy()
                .replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_")
        })
        .unwrap_or_else(|| "package".into());
    if !dir.is_dir() {
        return vec![
            Trial::test(format!("{group}::{label}::missing_not_gated"), || Ok(()))
                .with_ignored_flag(true),
        ];
    }
    let report = match dflash_gate::gate(dir, &dflash_gate::Options::default()) {
        Ok(r) => r,
        Err(e) => {
            let why = e.to_string();
            return vec![Trial::test(
                format!("{group}::{label}::gate_could_not_run"),
                move || Err(Failed::from(why.clone())),
            )];
        }
    };
    report
        .checks()
        .to_vec()
        .into_iter()
        .map(|c| {
            Trial::test(format!("{group}::{label}::{}", c.id()), move || {
                match c.outcome() {
                    Outcome::Pass => Ok(()),
                    other => Err(Failed::from(format!("{other}: {}", c.message()))),
                }
            })
        })
        .collect()
}

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}
