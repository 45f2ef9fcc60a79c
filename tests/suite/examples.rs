//! The example configs under `fixtures/configs/`: each must be recognised (or refused) at the first
//! check exactly as its name says, and its geometry read as the second column says.

use dflash_gate::Outcome;
use libtest_mimic::{Failed, Trial};
use std::path::PathBuf;

/// (file, outcome of config.is_dflash, a phrase its message must carry, outcome of config.geometry:
/// UNDECIDED, blocked by config.is_dflash, for a refused config)
const EXAMPLES: [(&str, Outcome, &str, Option<Outcome>); 5] = [
    (
        "reference-draft.json",
        Outcome::Pass,
        "DFlashDraftModel",
        Some(Outcome::Pass),
    ),
    (
        "dflash2-reference.json",
        Outcome::Pass,
        "the second family",
        Some(Outcome::Pass),
    ),
    (
        "assistant-head.json",
        Outcome::Pass,
        "encoder.fc.weight is fc",
        Some(Outcome::Pass),
    ),
    // Half a feature pair: conv_kernel_size without conv_group_size.
    (
        "second-family.json",
        Outcome::Pass,
        "the second family",
        Some(Outcome::Fail),
    ),
    (
        "not-dflash.json",
        Outcome::Fail,
        "not a DFlash draft",
        Some(Outcome::Undecided),
    ),
];

pub fn trials() -> Vec<Trial> {
    EXAMPLES
        .iter()
        .map(|&(file, want, phrase, geometry)| {
            let stem = file.trim_end_matches(".json").replace('-', "_");
            Trial::test(format!("examples::configs::{stem}"), move || {
                let path = configs_dir().join(file);
                let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                let report =
                    dflash_gate::evaluate(file, Ok(bytes), Err("config only".into()), Vec::new())
                        .map_err(|e| format!("the gate could not run: {e}"))?;
                let first = &report.checks()[0];
                if first.id() != "config.is_dflash"
                    || first.outcome() != want
                    || !first.message().contains(phrase)
                {
                    return Err(Failed::from(format!(
                        "{}: {} {}",
                        first.id(),
                        first.outcome(),
                        first.message()
                    )));
                }
                let got = report.check("config.geometry");
                if got.map(|c| c.outcome()) != geometry {
                    return Err(Failed::from(format!("config.geometry: {got:?}")));
                }
                Ok(())
            })
        })
        .collect()
}

fn configs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/configs")
}
