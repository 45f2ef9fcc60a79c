//! The committed fixture packages (every directory under `fixtures/` with a config.json): every check
//! of each is a trial. For `fixtures/tiny`, also: every check passes, its bytes are the generator's (same seed, same
//! bytes), its `--json` report matches the golden file byte for byte, and the README's sample report is
//! the binary's own output on it.
//!
//! To re-bless after a deliberate change: `cargo xtask bless` (it reruns these trials with
//! `DFLASH_GATE_BLESS=1`, which rewrites the fixture, the golden report and the README's sample).

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
        Trial::test("fixtures::tiny::readme_sample", readme_sample),
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
    let report = dflash_gate::gate(&dir.join("tiny"), &dflash_gate::Options::default())
        .map_err(|e| e.to_string())?;
    // The golden names the package as the repository does, wherever the test runs from.
    let mut doc = report.to_json();
    doc["package"] = "fixtures/tiny".into();
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())? + "\n";
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

/// The comment that precedes the README's sample report; the ```text block after it is the sample.
pub const SAMPLE_MARKER: &str = "<!-- sample report: fixtures::tiny::readme_sample";

/// The README's sample report is what the binary prints for `fixtures/tiny` (as `cargo xtask gate
/// fixtures/tiny` runs it: from the workspace root, into a pipe), so it cannot drift from the real
/// output. Only the timing at the end of the last line may differ.
fn readme_sample() -> Result<(), Failed> {
    let root = fixtures_dir().join("..");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_dflash-gate"))
        .arg("fixtures/tiny")
        .current_dir(&root)
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .output()
        .map_err(|e| format!("running dflash-gate: {e}"))?;
    if output.status.code() != Some(0) {
        return Err(format!(
            "dflash-gate fixtures/tiny exited {:?}, not 0",
            output.status
        )
        .into());
    }
    let actual = String::from_utf8(output.stdout).map_err(|e| e.to_string())?;
    let readme_path = root.join("README.md");
    let readme = std::fs::read_to_string(&readme_path).map_err(|e| format!("README.md: {e}"))?;
    let (start, end) = sample_block(&readme).ok_or(
        "README.md has no sample report: a line starting with the sample marker, then a ```text block",
    )?;
    if blessing() {
        let text = format!("{}{}{}", &readme[..start], actual, &readme[end..]);
        std::fs::write(&readme_path, text).map_err(|e| format!("README.md: {e}"))?;
        return Ok(());
    }
    let shown = &readme[start..end];
    if without_timing(shown) != without_timing(&actual) {
        let line = shown
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| without_timing(a) != without_timing(b))
            .unwrap_or_else(|| shown.lines().count().min(actual.lines().count()));
        return Err(format!(
            "the README's sample report differs from `dflash-gate fixtures/tiny` at line {}: README {:?}, now {:?} \
             (run `cargo xtask bless`, or paste this block):\n```text\n{actual}```",
            line + 1,
            shown.lines().nth(line).unwrap_or("(no line)"),
            actual.lines().nth(line).unwrap_or("(no line)"),
        )
        .into());
    }
    Ok(())
}

/// The byte range of the sample's body: the lines between the ```text fence that follows the marker
/// and the closing fence.
fn sample_block(readme: &str) -> Option<(usize, usize)> {
    let marker = readme.find(SAMPLE_MARKER)?;
    let fence = marker + readme[marker..].find("\n```text\n")? + 1;
    let start = fence + "```text\n".len();
    let end = if readme[start..].starts_with("```") {
        start
    } else {
        start + readme[start..].find("\n```")? + 1
    };
    Some((start, end))
}

/// The report with its timing, `(0.00 s)` at the end of its last line, blanked.
fn without_timing(text: &str) -> String {
    text.lines()
        .map(|line| match line.rsplit_once(" (") {
            Some((head, tail))
                if tail.ends_with(" s)")
                    && tail[..tail.len() - 3]
                        .chars()
                        .all(|c| c.is_ascii_digit() || c == '.') =>
            {
                format!("{head} (T s)")
            }
            _ => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}
