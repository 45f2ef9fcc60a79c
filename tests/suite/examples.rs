//! The example configs under `fixtures/configs/`: each must be recognised (or refused) at the first
//! check exactly as its name says.

use gate::report::Outcome;
use libtest_mimic::{Failed, Trial};
use std::path::PathBuf;

/// (file, outcome of config.is_dflash, a phrase its message must carry)
const EXAMPLES: [(&str, Outcome, &str); 3] = [
    ("reference-draft.json", Outcome::Pass, "DFlashDraftModel"),
    ("second-family.json", Outcome::Fail, "second DFlash family"),
    ("not-dflash.json", Outcome::Fail, "not a DFlash draft"),
];

pub fn trials() -> Vec<Trial> {
    EXAMPLES
        .iter()
        .map(|&(file, want, phrase)| {
            let stem = file.trim_end_matches(".json").replace('-', "_");
            Trial::test(format!("examples::configs::{stem}"), move || {
                let path = configs_dir().join(file);
                let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                let report = gate::evaluate(file, Ok(bytes), Err("config only".into()), Vec::new());
                let first = &report.checks[0];
                if first.id != "config.is_dflash"
                    || first.outcome != want
                    || !first.message.contains(phrase)
                {
                    return Err(Failed::from(format!(
                        "{}: {} {}",
                        first.id, first.outcome, first.message
                    )));
                }
                Ok(())
            })
        })
        .collect()
}

fn configs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/configs")
}
