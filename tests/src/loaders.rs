//! The gate stays stricter than every engine (spec 19): whatever an engine's table says it refuses
//! or crashes on, the gate's own verdict on that draft is not PASS. Every arm of the suite, passing
//! or refused, is held to it where its report is judged, so the property is tried on every draft the
//! suite writes.

use dflash_gate::{Outcome, Report};

/// `Ok` unless an engine refuses or crashes on a draft the gate passed.
pub fn stricter_than_every_engine(report: &Report) -> Result<(), String> {
    if report.verdict() != Outcome::Pass {
        return Ok(());
    }
    let refused: Vec<String> = report
        .loaders()
        .iter()
        .filter(|v| v.outcome.refuses_a_defect())
        .map(|v| {
            let why = v
                .reasons
                .first()
                .map(|r| format!("{} ({}: {})", r.rule, r.found, r.words))
                .unwrap_or_default();
            format!("{} {} {}: {why}", v.engine, v.version, v.outcome)
        })
        .collect();
    match refused.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "the gate passed a draft an engine refuses:\n  {}",
            refused.join("\n  ")
        )),
    }
}
