//! The committed fixture packages (every directory under `fixtures/` with a config.json): every check
//! of each is a trial. For `fixtures/tiny`, also: every check passes, its bytes are the generator's (same seed, same
//! bytes), and its `--json` report matches the golden file byte for byte.
//!
//! To re-bless after a deliberate change: `cargo xtask bless` (it reruns these trials with
//! `DFLASH_GATE_BLESS=1`, which rewrites the fixture and the golden report).

use crate::packages::{fixtures_dir, package_trials};
use gate_tests::arms::SEED;
use gate_tests::synth::{Encoding, Geometry, Package};
use libtest_mimic::{Failed, Trial};

pub const BLESS_VAR: &str = "DFLASH_GATE_BLESS";
pub const GOLDEN: &str = "tiny.report.json";

pub fn trials() -> Vec<Trial> {
    let mut out = vec![
        Trial::test("fixtures::tiny::bytes_are_the_generators", fixture_bytes),
        Trial::test("fixtures::tiny::golden_json", golden_json),
    ];
    out.extend(
        fixture_packages()
            .iter()
            .flat_map(|dir| package_trials("fixtures", dir)),
    );
    out
}

/// Every package directory under `fixtures/` (one holding a config.json), sorted.
fn fixture_packages() -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<_> = std::fs::read_dir(fixtures_dir())
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.join("config.json").is_file())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

fn blessing() -> bool {
    std::env::var_os(BLESS_VAR).is_some()
}

fn fixture_bytes() -> Result<(), Failed> {
    let dir = fixtures_dir().join("tiny");
    let package = Package::generate(&Geometry::tiny(), Encoding::default(), SEED);
    if blessing() {
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        package.write(&dir).map_err(|e| e.to_string())?;
        return Ok(());
    }
    let on_disk = std::fs::read(dir.join("model.q4nx"))
        .map_err(|e| format!("fixtures/tiny/model.q4nx: {e}"))?;
    if on_disk != package.weight_bytes() {
        return Err("fixtures/tiny/model.q4nx differs from the generator's output (run `cargo xtask bless` if deliberate)".into());
    }
    Ok(())
}

fn golden_json() -> Result<(), Failed> {
    let dir = fixtures_dir();
    let mut report =
        gate::gate(&dir.join("tiny"), &gate::Options::default()).map_err(|e| e.to_string())?;
    report.package = "fixtures/tiny".to_owned();
    let text = serde_json::to_string_pretty(&report.to_json()).map_err(|e| e.to_string())? + "\n";
    let golden = dir.join(GOLDEN);
    if blessing() {
        std::fs::write(&golden, text).map_err(|e| e.to_string())?;
        return Ok(());
    }
    let want = std::fs::read_to_string(&golden).map_err(|e| format!("fixtures/{GOLDEN}: {e}"))?;
    if want != text {
        let line = want
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        return Err(format!(
            "the report differs from fixtures/{GOLDEN} at line {}: golden {:?}, now {:?} (run `cargo xtask bless` if deliberate)",
            line + 1,
            want.lines().nth(line).unwrap_or(""),
            text.lines().nth(line).unwrap_or("")
        )
        .into());
    }
    Ok(())
}
