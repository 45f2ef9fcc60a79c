//! The loader verdicts (docs/loaders.md) held against the engines themselves: a set of the suite's
//! drafts, each gated by the library and loaded by each engine's real loader on the same folder
//! (`tests/differential/engines.py`): Transformers through z-lab's `dflash` 0.1.0, z-lab's MLX
//! loader (`dflash/model_mlx.py`), and `dflash-mlx` 0.1.8. What the loader did is held to the
//! gate's verdict for that engine: where the gate says it refuses, crashes or does not read the form,
//! the loader must raise at load; where it says it loads, it must load with nothing missing or
//! unexpected; where it says it loads wrongly, it must load, and report missing (or unexpected)
//! exactly when the gate's reason is a missing tensor (or one the engine does not build: unexplained,
//! or the draft's own embedding or head), the tensor the reason names among them.
//! A `cannot tell` is skipped and counted.
//!
//! Needs a Python with torch, transformers and z-lab's `dflash` 0.1.0 (and, for the MLX engines,
//! `mlx` and `mlx_lm`; `dflash_mlx` 0.1.8), named by `DFLASH_GATE_ZLAB_PYTHON`. An MLX engine whose
//! packages do not import is skipped and counted. Without the variable the trial is listed as ignored,
//! the reason in its name: torch is too heavy for CI.

use dflash_gate::__private::loaders::{When, TABLES};
use dflash_gate::{gate, Engine, LoaderOutcome, LoaderVerdict, Options};
use libtest_mimic::{Failed, Trial};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const ZLAB_PYTHON_VAR: &str = "DFLASH_GATE_ZLAB_PYTHON";

/// The engines the driver runs, by the names the report and the driver both use.
const ENGINES: [Engine; 3] = [Engine::Transformers, Engine::Mlx, Engine::DflashMlx];

/// The drafts: folder arms of the suite by name, and the faithful folder with its config bent.
const DRAFTS: &[(&str, Draft)] = &[
    ("folder::pass::dflash", Draft::Arm),
    ("folder::control::tensor_missing", Draft::Arm),
    ("folder::control::tensor_extra", Draft::Arm),
    ("folder::control::tensor_misshapen", Draft::Arm),
    ("folder::pass::model_prefix", Draft::Arm),
    ("folder::pass::nemotron_like_own_embedding", Draft::Arm),
    ("folder::pass::old_schema_top_level_fields", Draft::Arm),
    ("folder::pass::pack_quantized_w4_group", Draft::Arm),
    (
        "num_target_layers_in_dflash_config",
        Draft::Bent(|c| {
            let moved = c
                .as_object_mut()
                .and_then(|top| top.remove("num_target_layers"));
            c["dflash_config"]["num_target_layers"] = moved.unwrap_or(Value::Null);
        }),
    ),
    (
        "rope_theta_absent",
        Draft::Bent(|c| {
            c.as_object_mut().map(|top| top.remove("rope_theta"));
        }),
    ),
];

#[derive(Clone, Copy)]
enum Draft {
    /// The folder arm of that name.
    Arm,
    /// `folder::pass::dflash`, its config edited.
    Bent(fn(&mut Value)),
}

pub fn trials() -> Vec<Trial> {
    let name = "differential::loaders_against_the_zlab_loaders";
    match std::env::var_os(ZLAB_PYTHON_VAR) {
        Some(python) => vec![Trial::test(name, move || {
            compare(Path::new(&python)).map_err(Failed::from)
        })],
        None => vec![
            Trial::test(format!("{name}_needs_DFLASH_GATE_ZLAB_PYTHON"), || Ok(()))
                .with_ignored_flag(true),
        ],
    }
}

/// What one engine's loader did with one draft, as the driver says.
struct Run {
    outcome: String,
    message: String,
    missing: Vec<String>,
    unexpected: Vec<String>,
}

fn compare(python: &Path) -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut manifest = Vec::new();
    let mut verdicts = Vec::new();
    for (i, (name, draft)) in DRAFTS.iter().enumerate() {
        let dir = root.path().join(format!("{i:02}"));
        let path = write(name, *draft, &dir)?;
        let report = gate(&path, &Options::default()).map_err(|e| format!("{name}: {e}"))?;
        verdicts.push(report.loaders().to_vec());
        manifest.push(serde_json::json!({ "draft": name, "path": path }));
    }
    let manifest_path = root.path().join("manifest.json");
    std::fs::write(&manifest_path, Value::Array(manifest).to_string())
        .map_err(|e| e.to_string())?;
    let runs = drive(python, &manifest_path)?;

    let mut table = String::new();
    let mut disagreements = Vec::new();
    let (mut agreed, mut cannot_tell, mut unavailable) = (0, 0, 0);
    for ((name, _), verdicts) in DRAFTS.iter().zip(&verdicts) {
        for engine in ENGINES {
            let verdict = verdicts
                .iter()
                .find(|v| v.engine == engine)
                .ok_or_else(|| format!("{name}: no verdict of {engine}"))?;
            let run = runs
                .iter()
                .find(|(d, e, _)| d == name && e == engine.name())
                .map(|(_, _, r)| r)
                .ok_or_else(|| format!("{name}: the driver did not run {engine}"))?;
            let gate_says = says(verdict);
            let _ = writeln!(
                table,
                "{name:<44} {:<13} {gate_says:<60} {:<11} {}",
                engine.name(),
                run.outcome,
                run.message
            );
            if run.outcome == "unavailable" {
                if engine == Engine::Transformers {
                    return Err(format!(
                        "{ZLAB_PYTHON_VAR} does not import dflash with torch and transformers: {}",
                        run.message
                    ));
                }
                unavailable += 1;
                continue;
            }
            match held(verdict, run) {
                Held::Agrees => agreed += 1,
                Held::CannotTell => cannot_tell += 1,
                Held::Disagrees(why) => disagreements.push(format!(
                    "{name}, {engine}: the gate says {gate_says}; the loader {} ({why}): {}",
                    run.outcome, run.message
                )),
            }
        }
    }
    // The table is the trial's record of what each engine did: shown whether it passes or not.
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "{table}agree {agreed}, cannot tell (skipped) {cannot_tell}, engine unavailable (skipped) {unavailable}, disagree {}",
            disagreements.len()
        );
    }
    if !disagreements.is_empty() {
        return Err(format!(
            "{} disagreements between the gate's loader verdicts and the loaders:\n{}",
            disagreements.len(),
            disagreements.join("\n")
        ));
    }
    if agreed == 0 {
        return Err("no draft was held to any engine".into());
    }
    Ok(())
}

/// Writes the draft `name` into `dir`: the path to gate and load.
fn write(name: &str, draft: Draft, dir: &Path) -> Result<PathBuf, String> {
    use gate_tests::arms::folder::write_arm;
    match draft {
        Draft::Arm => write_arm(name, dir),
        Draft::Bent(bend) => {
            let path = write_arm("folder::pass::dflash", dir)?;
            let config = path.join("config.json");
            let text = std::fs::read(&config).map_err(|e| e.to_string())?;
            let mut c: Value = serde_json::from_slice(&text).map_err(|e| e.to_string())?;
            bend(&mut c);
            std::fs::write(&config, c.to_string()).map_err(|e| e.to_string())?;
            Ok(path)
        }
    }
}

/// Runs the driver on the manifest: `(draft, engine, run)` for each line it prints.
fn drive(python: &Path, manifest: &Path) -> Result<Vec<(String, String, Run)>, String> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/differential/engines.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(manifest)
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "engines.py failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let mut runs = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("{line}: {e}"))?;
        let text = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        runs.push((
            text("draft"),
            text("engine"),
            Run {
                outcome: text("outcome"),
                message: text("message"),
                missing: strings(&v["missing"]),
                unexpected: strings(&v["unexpected"]),
            },
        ));
    }
    Ok(runs)
}

/// The verdict in a few words: its outcome and the rule that decided it.
fn says(verdict: &LoaderVerdict) -> String {
    match verdict.reasons.first() {
        Some(r) => format!("{} ({})", verdict.outcome.label(), r.rule),
        None => verdict.outcome.label().to_owned(),
    }
}

enum Held {
    Agrees,
    CannotTell,
    Disagrees(String),
}

/// The loader's run against the gate's verdict for its engine.
fn held(verdict: &LoaderVerdict, run: &Run) -> Held {
    use LoaderOutcome::*;
    let raised = run.outcome == "raised";
    match verdict.outcome {
        o if o.stops() && raised => Held::Agrees,
        o if o.stops() => Held::Disagrees("it did not raise at load".into()),
        Loads | LoadsWrongly if raised => Held::Disagrees("it raised at load".into()),
        Loads | LoadsWrongly => {
            // What the loader reported of the weights must be what the gate's reasons say of them.
            let named = |facts: &[When]| -> Option<String> {
                let found: Vec<&str> = verdict
                    .reasons
                    .iter()
                    .filter(|r| when_of(verdict.engine, r.rule).is_some_and(|w| facts.contains(&w)))
                    .map(|r| r.found.as_str())
                    .collect();
                (!found.is_empty()).then(|| found.join("; "))
            };
            let missing = named(&[When::TensorMissing]);
            // A tensor the class does not build is reported unexpected and dropped, whether the gate
            // found it unexplained or a draft's own embedding or head that the engine never reads.
            let unexpected = named(&[
                When::TensorUnexplained,
                When::UnexplainedNotBias,
                When::UnexplainedBias,
                When::OwnEmbeddingOrHead,
                When::OwnEmbedding,
                When::OwnHead,
            ]);
            for (what, gate_found, reported) in [
                ("missing", missing, &run.missing),
                ("unexpected", unexpected, &run.unexpected),
            ] {
                match (gate_found, reported.is_empty()) {
                    (None, true) => {}
                    (None, false) => {
                        return Held::Disagrees(format!(
                            "it reported {what} weights the gate's verdict does not name"
                        ))
                    }
                    (Some(found), true) => {
                        return Held::Disagrees(format!(
                            "the gate names {what} weights ({found}) and the loader reported none"
                        ))
                    }
                    // A reason names the first tensor that meets it: the loader must report that one.
                    (Some(found), false) => {
                        if !reported.iter().any(|t| found.contains(t.as_str())) {
                            return Held::Disagrees(format!(
                                "it reported {} {what}, not the tensor the gate names ({found})",
                                reported.join(", ")
                            ));
                        }
                    }
                }
            }
            Held::Agrees
        }
        // `cannot tell`: nothing to hold the loader to.
        _ => Held::CannotTell,
    }
}

/// The fact `engine`'s table row `rule` reads.
fn when_of(engine: Engine, rule: &str) -> Option<When> {
    TABLES
        .iter()
        .filter(|t| t.engine == engine)
        .flat_map(|t| t.rules)
        .find(|r| r.id == rule)
        .map(|r| r.when)
}
