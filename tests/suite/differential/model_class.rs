//! The inventory of a Hugging Face folder against z-lab's own model class: the tensors
//! `dflash.model.DFlashDraftModel` builds for the folder's config (names and shapes, on the meta
//! device) must be exactly the folder's, which the gate passes; so `inventory.complete` requires what
//! the loader builds, no more and no less.
//!
//! Needs a Python with torch, transformers and z-lab's `dflash` package, named by
//! `DFLASH_GATE_TORCH_PYTHON` (torch is too heavy for CI: there the trial is listed as ignored, the
//! reason in its name).

use gate_tests::arms::{Base, SEED};
use gate_tests::synth::source::{write_source, SourceOptions};
use gate_tests::synth::{Encoding, Package};
use libtest_mimic::{Failed, Trial};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const TORCH_PYTHON_VAR: &str = "DFLASH_GATE_TORCH_PYTHON";

pub fn trials() -> Vec<Trial> {
    let name = "differential::inventory_against_the_dflash_model_class";
    match std::env::var_os(TORCH_PYTHON_VAR) {
        Some(python) => vec![Trial::test(name, move || {
            compare(Path::new(&python)).map_err(Failed::from)
        })],
        None => vec![
            Trial::test(format!("{name}_needs_DFLASH_GATE_TORCH_PYTHON"), || Ok(()))
                .with_ignored_flag(true),
        ],
    }
}

fn compare(python: &Path) -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = root.path().join("draft");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut package = Package::generate(&Base::Small.geometry(), Encoding::default(), SEED);
    write_source(&mut package, &dir, SourceOptions::default(), SEED).map_err(|e| e.to_string())?;
    let report =
        dflash_gate::gate(&dir, &dflash_gate::Options::default()).map_err(|e| e.to_string())?;
    if report.verdict() != dflash_gate::Outcome::Pass {
        return Err(format!(
            "the folder is not a PASS:\n{}",
            report.to_text(false)
        ));
    }
    let ours: BTreeMap<String, Vec<u64>> = report
        .census()
        .tensors
        .iter()
        .map(|t| (t.name.clone(), t.shape.clone()))
        .collect();
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/differential/model_class.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(dir.join("config.json"))
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "model_class.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut theirs = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let (name, shape) = line.split_once(' ').ok_or(format!("a line {line:?}"))?;
        let shape: Vec<u64> = serde_json::from_str(shape).map_err(|e| format!("{line}: {e}"))?;
        theirs.insert(name.to_owned(), shape);
    }
    if ours != theirs {
        let (only_ours, only_theirs) = super::one_sided(&ours, &theirs);
        return Err(format!(
            "the folder the gate passes and the model class differ: only in the folder {only_ours:?}; only in the class {only_theirs:?}"
        ));
    }
    Ok(())
}
