//! SGLang's and vLLM's config rules (docs/loaders.md) held against those engines' own code. A set of
//! the suite's folder drafts (the faithful one, and controls that meet each config rule of the two
//! tables: the mask id absent or null, the taps absent, a mask id past a target's vocabulary, a tap
//! past a target's layers, `mask_embedding.pt` holding another id, `model.`-prefixed names, the
//! speculators format with its mask or taps absent or `sliding_window_non_causal: false`), each
//! gated by the library, with a target where the rule pairs the draft with one. The driver
//! (`tests/differential/config_engines.py`) runs, on the same folders, the engines' own functions
//! that read a draft's config, taken from their source files without importing either engine:
//! SGLang 0.5.23's `parse_dflash_draft_config`, `_resolve_dflash_aux_hidden_state`,
//! `_resolve_mask_token_id` and `_maybe_merge_trained_mask_embedding`; vLLM 0.33.0's
//! `SpeculatorsConfig` (with `update_dflash`), `get_parallel_drafting_token_id`,
//! `get_eagle3_aux_layers_from_config`, `_dflash_layer_causal`, `_read_mask_embedding` and the names
//! `load_weights` hands its loader. For each table row it ran, what the function did is held to
//! whether the gate's verdict for that engine lists the row:
//!
//! - a row that stops the engine (refuses, crashes, not its form) is listed exactly when the
//!   function raised, and the function's message holds the row's words;
//! - a `loads, wrongly` row is listed exactly when the function guessed a value the config does not
//!   state (or read the config into a setting that serves the draft wrong) without raising;
//! - the engine's reading of the folder at all (`form`) raises exactly when the verdict is `not its
//!   form`.
//!
//! A row the gate lists but the driver cannot run (decided by code that loads the weights on a GPU,
//! or `mask_embedding.pt` without torch), or that the gate cannot tell, is `cannot tell`, counted. A
//! pairing rule on a draft without a target is `not asked`. Every draft, engine and row is printed;
//! a disagreement fails the trial naming the draft, the engine, the rule and both sides.
//!
//! Needs the engines' sources: `DFLASH_GATE_SGLANG_SRC` names the `sglang` package directory of the
//! sglang 0.5.23 wheel, `DFLASH_GATE_VLLM_SRC` the `vllm` package directory of vllm 0.33.0 (one
//! alone holds that engine only: the other's rows are counted unavailable). The driver runs in the
//! Python named by `DFLASH_GATE_ZLAB_PYTHON` when it is set, else `python3`; it needs transformers
//! (the engines build their config objects with it), and torch to read `mask_embedding.pt`. Without
//! either source variable the trial is listed as ignored, the variables in its name.

use dflash_gate::__private::loaders::{Rule, TABLES};
use dflash_gate::{gate, Engine, LoaderOutcome, LoaderReason, LoaderVerdict, Options};
use gate_tests::arms::Base;
use gate_tests::synth::TargetPackage;
use libtest_mimic::{Failed, Trial};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const SGLANG_SRC_VAR: &str = "DFLASH_GATE_SGLANG_SRC";
pub const VLLM_SRC_VAR: &str = "DFLASH_GATE_VLLM_SRC";
const NAME: &str = "differential::config_rules_against_sglang_and_vllm";

/// The engines the driver runs, by the names the report and the driver both use.
const ENGINES: [Engine; 2] = [Engine::Sglang, Engine::Vllm];

/// One draft: a folder arm of the suite, its config bent or not, with a target or not.
struct Case {
    name: &'static str,
    arm: &'static str,
    bend: Option<fn(&mut Value)>,
    /// A target matching the small draft, its config bent.
    target: Option<fn(&mut Value)>,
}

const fn arm(arm: &'static str) -> Case {
    Case {
        name: arm,
        arm,
        bend: None,
        target: None,
    }
}

const FAITHFUL: &str = "folder::pass::dflash";
const SPECULATORS: &str = "folder::pass::speculators_dflash";

const CASES: &[Case] = &[
    arm(FAITHFUL),
    Case {
        name: "faithful, with its target",
        target: Some(|_| {}),
        ..arm(FAITHFUL)
    },
    arm("folder::pass::dflash2"),
    arm("folder::pass::old_schema_top_level_fields"),
    arm("folder::pass::model_prefix"),
    arm("folder::control::mask_token_id_absent"),
    Case {
        name: "mask_token_id absent, with a target",
        target: Some(|_| {}),
        ..arm("folder::control::mask_token_id_absent")
    },
    Case {
        name: "mask_token_id null",
        bend: Some(|c| c["dflash_config"]["mask_token_id"] = Value::Null),
        ..arm(FAITHFUL)
    },
    arm("folder::control::target_layer_ids_absent"),
    Case {
        name: "target_layer_ids absent, with a target",
        target: Some(|_| {}),
        ..arm("folder::control::target_layer_ids_absent")
    },
    Case {
        name: "mask id past the target's vocabulary",
        target: Some(|t| t["vocab_size"] = 999.into()),
        ..arm(FAITHFUL)
    },
    Case {
        name: "a tap past the target's layers",
        target: Some(|t| t["num_hidden_layers"] = 3.into()),
        ..arm(FAITHFUL)
    },
    arm("folder::pass::mask_embedding"),
    arm("folder::control::mask_embedding_wrong_id"),
    arm(SPECULATORS),
    arm("folder::pass::speculators_dflash2"),
    Case {
        name: "speculators, with its target",
        target: Some(|_| {}),
        ..arm(SPECULATORS)
    },
    arm("folder::control::speculators_mask_null"),
    arm("folder::control::speculators_mask_absent"),
    Case {
        name: "speculators, sliding_window_non_causal false",
        bend: Some(|c| c["sliding_window_non_causal"] = false.into()),
        ..arm(SPECULATORS)
    },
    Case {
        name: "speculators, sliding_window_non_causal true",
        bend: Some(|c| c["sliding_window_non_causal"] = true.into()),
        ..arm(SPECULATORS)
    },
    // Quantized drafts: the config's module lists as vLLM matches them against its own names.
    arm("folder::pass::pack_quantized_w4_group"),
    arm("folder::pass::pack_quantized_fc_ignored_by_name"),
    arm("folder::pass::pack_quantized_fc_ignored_by_pattern"),
    Case {
        name: "fc ignored by a pattern, with a target",
        target: Some(|_| {}),
        ..arm("folder::pass::pack_quantized_fc_ignored_by_pattern")
    },
    arm("folder::pass::pack_quantized_ignore_in_vllms_names"),
    arm("folder::pass::pack_quantized_qkv_ignored_by_name"),
    arm("folder::pass::pack_quantized_ignore_numbered_as_vllm"),
    Case {
        name: "a name numbered as vLLM's, with its target",
        target: Some(|_| {}),
        ..arm("folder::pass::pack_quantized_ignore_numbered_as_vllm")
    },
    Case {
        name: "a name numbered as vLLM's, with a target one layer deeper",
        target: Some(|t| {
            let n = t["num_hidden_layers"].as_u64().unwrap_or_default();
            t["num_hidden_layers"] = (n + 1).into();
        }),
        ..arm("folder::pass::pack_quantized_ignore_numbered_as_vllm")
    },
    Case {
        name: "q/k/v ignored by name and by vLLM's shard names",
        bend: Some(|c| {
            let ignore = &mut c["quantization_config"]["ignore"];
            if let Some(list) = ignore.as_array_mut() {
                for p in ["q_proj", "k_proj", "v_proj"] {
                    list.push(format!("model.layers.8.self_attn.{p}").into());
                }
            }
        }),
        ..arm("folder::pass::pack_quantized_qkv_ignored_by_name")
    },
    arm("folder::pass::pack_quantized_targets_by_checkpoint_path"),
    arm("folder::pass::fp8_compressed_tensors_fc_ignored_by_name"),
    Case {
        name: "fp8, ignored_layers in vLLM's names",
        bend: Some(|c| {
            c["quantization_config"]["ignored_layers"] = serde_json::json!(["model.fc"])
        }),
        ..arm("folder::pass::fp8_block_hugging_face")
    },
    arm("folder::pass::fp8_block_compressed_tensors"),
    arm("folder::pass::fp8_block_hugging_face"),
    arm("folder::pass::fp8_hugging_face_fc_not_converted"),
    arm("folder::pass::fp8_hugging_face_not_converted_in_vllms_names"),
    Case {
        name: "speculators, aux_hidden_state_layer_ids absent",
        bend: Some(|c| {
            c.as_object_mut()
                .map(|top| top.remove("aux_hidden_state_layer_ids"));
        }),
        ..arm(SPECULATORS)
    },
];

pub fn trials() -> Vec<Trial> {
    let given = [SGLANG_SRC_VAR, VLLM_SRC_VAR]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    if !given {
        return vec![Trial::test(
            format!("{NAME}_needs_{SGLANG_SRC_VAR}_or_{VLLM_SRC_VAR}"),
            || Ok(()),
        )
        .with_ignored_flag(true)];
    }
    vec![Trial::test(NAME, || compare().map_err(Failed::from))]
}

/// What one engine's code did with one rule of one draft, as the driver says.
struct Did {
    arm: String,
    engine: String,
    rule: String,
    did: String,
    message: String,
    value: Option<String>,
}

fn compare() -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut manifest = Vec::new();
    let mut verdicts = Vec::new();
    for (i, case) in CASES.iter().enumerate() {
        let dir = root.path().join(format!("{i:02}"));
        let (path, target) = write(case, &dir)?;
        let options = match &target {
            Some(t) => Options::default().with_target(t),
            None => Options::default(),
        };
        let report = gate(&path, &options).map_err(|e| format!("{}: {e}", case.name))?;
        verdicts.push(report.loaders().to_vec());
        manifest.push(json!({ "arm": case.name, "path": path, "target": target }));
    }
    let manifest_path = root.path().join("manifest.json");
    std::fs::write(&manifest_path, Value::Array(manifest).to_string())
        .map_err(|e| e.to_string())?;
    let done = drive(&manifest_path)?;

    let mut table = String::new();
    let mut disagreements = Vec::new();
    let (mut agreed, mut cannot_tell, mut not_asked, mut unavailable) = (0, 0, 0, 0);
    // Each rule the driver ran, on a draft the gate lists it for and on one it does not.
    let mut met: std::collections::BTreeMap<(String, String), (bool, bool)> = Default::default();
    for (case, verdicts) in CASES.iter().zip(&verdicts) {
        for engine in ENGINES {
            let verdict = verdicts
                .iter()
                .find(|v| v.engine == engine)
                .ok_or_else(|| format!("{}: no verdict of {engine}", case.name))?;
            let rows: Vec<&Did> = done
                .iter()
                .filter(|d| d.arm == case.name && d.engine == engine.name())
                .collect();
            if let Some(d) = rows.iter().find(|d| d.did == "unavailable") {
                let _ = writeln!(
                    table,
                    "{:<48} {:<7} {:<34} unavailable: {}",
                    case.name,
                    engine.name(),
                    "*",
                    d.message
                );
                unavailable += 1;
                continue;
            }
            let table_rules = TABLES
                .iter()
                .find(|t| t.engine == engine)
                .map(|t| t.rules)
                .unwrap_or_default();
            let not_its_form = verdict.reasons.iter().find(|r| r.rule == "form");
            let mut held_rows: Vec<(&str, Option<&LoaderReason>, Option<&Did>, Held)> = Vec::new();
            let form = rows.iter().copied().find(|d| d.rule == "form");
            held_rows.push((
                "form",
                not_its_form,
                form,
                form.map_or(
                    Held::CannotTell("the driver did not read the form".into()),
                    |d| held_form(not_its_form, d),
                ),
            ));
            if not_its_form.is_none() {
                for rule in table_rules {
                    let listed = verdict.reasons.iter().find(|r| r.rule == rule.id);
                    let did = rows.iter().copied().find(|d| d.rule == rule.id);
                    let held = match did {
                        Some(d) => held(rule, listed, d),
                        // Decided by code the driver does not run: said only where the gate lists it.
                        None if listed.is_some() => Held::CannotTell(
                            "decided by code the driver does not run (the weights loaded)".into(),
                        ),
                        None => continue,
                    };
                    if let Some(d) = did {
                        if !matches!(d.did.as_str(), "cannot_run" | "not_asked") {
                            let seen = met
                                .entry((engine.name().to_owned(), rule.id.to_owned()))
                                .or_default();
                            match listed {
                                Some(_) => seen.0 = true,
                                None => seen.1 = true,
                            }
                        }
                    }
                    held_rows.push((rule.id, listed, did, held));
                }
            }
            for (rule, listed, did, held) in held_rows {
                let gate_says = match listed {
                    Some(r) => format!("{} ({})", r.outcome.label(), r.found),
                    None => "-".to_owned(),
                };
                let engine_did = match did {
                    Some(d) => {
                        let value = d
                            .value
                            .as_deref()
                            .map(|v| format!(" {v}"))
                            .unwrap_or_default();
                        format!(
                            "{}{value}{}",
                            d.did,
                            if d.message.is_empty() {
                                String::new()
                            } else {
                                format!(": {}", d.message)
                            }
                        )
                    }
                    None => "-".to_owned(),
                };
                let label = match &held {
                    Held::Agrees => {
                        agreed += 1;
                        "agree"
                    }
                    Held::CannotTell(_) => {
                        cannot_tell += 1;
                        "cannot tell"
                    }
                    Held::NotAsked => {
                        not_asked += 1;
                        "not asked"
                    }
                    Held::Disagrees(why) => {
                        disagreements.push(format!(
                            "{}, {engine}, {rule}: {why}\n  the gate: {} ({})\n  the engine's code: {engine_did}",
                            case.name,
                            says(verdict),
                            gate_says
                        ));
                        "DISAGREE"
                    }
                };
                let why = match &held {
                    Held::CannotTell(w) if !engine_did.contains(w.as_str()) => format!(" ({w})"),
                    _ => String::new(),
                };
                let _ = writeln!(
                    table,
                    "{:<48} {:<7} {:<34} {label:<11} gate: {gate_says}; engine: {engine_did}{why}",
                    case.name,
                    engine.name(),
                    rule,
                );
            }
        }
    }
    // The table is the trial's record of what each engine's code did: shown whether it passes or not.
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "{table}agree {agreed}, cannot tell {cannot_tell}, disagree {}; not asked (no target) {not_asked}, engine unavailable {unavailable}",
            disagreements.len()
        );
    }
    if !disagreements.is_empty() {
        return Err(format!(
            "{} disagreements between the gate's loader verdicts and the engines' own code:\n{}",
            disagreements.len(),
            disagreements.join("\n")
        ));
    }
    // Every rule the driver runs is held both ways: a draft the gate lists it for, and one it does not.
    let one_sided: Vec<String> = met
        .iter()
        .filter(|(_, (listed, clear))| !(listed & clear))
        .map(|((engine, rule), (listed, _))| {
            format!(
                "{engine} {rule}: no draft {}",
                if *listed { "clear of it" } else { "meets it" }
            )
        })
        .collect();
    if !one_sided.is_empty() {
        return Err(format!(
            "rules held one way only:\n{}",
            one_sided.join("\n")
        ));
    }
    if agreed == 0 {
        return Err("no rule was held to either engine".into());
    }
    Ok(())
}

/// Writes the case's draft (and its target) under `dir`: the paths to gate.
fn write(case: &Case, dir: &Path) -> Result<(PathBuf, Option<PathBuf>), String> {
    let path = gate_tests::arms::folder::write_arm(case.arm, &dir.join("draft"))?;
    if let Some(bend) = case.bend {
        let config = path.join("config.json");
        let text = std::fs::read(&config).map_err(|e| e.to_string())?;
        let mut c: Value = serde_json::from_slice(&text).map_err(|e| e.to_string())?;
        bend(&mut c);
        std::fs::write(&config, c.to_string()).map_err(|e| e.to_string())?;
    }
    let target = match case.target {
        None => None,
        Some(bend) => {
            let target = dir.join("target");
            let mut t = TargetPackage::matching(&Base::Small.geometry());
            bend(&mut t.config);
            t.write(&target).map_err(|e| e.to_string())?;
            Some(target)
        }
    };
    Ok((path, target))
}

/// Runs the driver on the manifest: a [`Did`] for each line it prints.
fn drive(manifest: &Path) -> Result<Vec<Did>, String> {
    let python =
        std::env::var_os(super::engines::ZLAB_PYTHON_VAR).unwrap_or_else(|| "python3".into());
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/differential/config_engines.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(manifest)
        .output()
        .map_err(|e| format!("{}: {e}", python.to_string_lossy()))?;
    if !out.status.success() {
        return Err(format!(
            "config_engines.py failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut done = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("{line}: {e}"))?;
        let text = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        done.push(Did {
            arm: text("arm"),
            engine: text("engine"),
            rule: text("rule"),
            did: text("did"),
            message: text("message"),
            value: v["value"].as_str().map(str::to_owned),
        });
    }
    Ok(done)
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
    CannotTell(String),
    NotAsked,
    Disagrees(String),
}

/// The engine's reading of the folder at all against the gate's `not its form`.
fn held_form(not_its_form: Option<&LoaderReason>, did: &Did) -> Held {
    match (not_its_form, did.did.as_str()) {
        (_, "cannot_run") => Held::CannotTell(did.message.clone()),
        (Some(_), "raised") | (None, "accepted") => Held::Agrees,
        (Some(r), _) => Held::Disagrees(format!(
            "the gate says it is not the engine's form ({}); its code read it",
            r.found
        )),
        (None, _) => {
            Held::Disagrees("its code does not read the folder; the gate's verdict reads it".into())
        }
    }
}

/// What the engine's code did with one row against whether the gate lists the row.
fn held(rule: &Rule, listed: Option<&LoaderReason>, did: &Did) -> Held {
    if did.did == "cannot_run" {
        return Held::CannotTell(did.message.clone());
    }
    if let Some(r) = listed.filter(|r| r.outcome == LoaderOutcome::Undecided) {
        return Held::CannotTell(format!("the gate cannot tell: {}", r.found));
    }
    let listed_as = |r: &LoaderReason| format!("{} ({})", r.outcome.label(), r.found);
    match (did.did.as_str(), listed) {
        ("not_asked", None) => Held::NotAsked,
        ("not_asked", Some(r)) => Held::Disagrees(format!(
            "the gate lists a pairing rule, {}, and no target was given",
            listed_as(r)
        )),
        ("raised", Some(r)) if r.outcome.stops() => {
            if words_hold(rule.words, &did.message) {
                Held::Agrees
            } else {
                Held::Disagrees(format!(
                    "the engine's code raised, not in the row's words ({})",
                    rule.words
                ))
            }
        }
        ("raised", Some(r)) => Held::Disagrees(format!(
            "the gate says {}; the engine's code raised",
            listed_as(r)
        )),
        ("raised", None) => Held::Disagrees(
            "the engine's code raised; the gate's verdict does not list the rule".into(),
        ),
        ("guessed" | "wrongly", Some(r)) if r.outcome == LoaderOutcome::LoadsWrongly => {
            Held::Agrees
        }
        ("guessed" | "wrongly", Some(r)) => Held::Disagrees(format!(
            "the gate says {}; the engine's code {} without raising",
            listed_as(r),
            did.did
        )),
        ("guessed" | "wrongly", None) => Held::Disagrees(format!(
            "the engine's code {} ({}); the gate's verdict does not list the rule",
            did.did,
            rule.outcome.label()
        )),
        ("accepted", None) => Held::Agrees,
        ("accepted", Some(r)) => Held::Disagrees(format!(
            "the gate says {}; the engine's code accepted it",
            listed_as(r)
        )),
        (other, _) => Held::Disagrees(format!("the driver said {other:?}")),
    }
}

/// Whether the engine's message holds the row's words: one of its alternatives (separated by `; `),
/// a closing aside in parentheses set apart, every fixed piece (the text between `...`) in order.
fn words_hold(words: &str, message: &str) -> bool {
    words.split("; ").any(|alternative| {
        let mut alternative = alternative.trim();
        if alternative.ends_with(')') {
            if let Some(at) = alternative.rfind(" (") {
                alternative = &alternative[..at];
            }
        }
        let mut rest = message;
        alternative
            .split("...")
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .all(|piece| match rest.find(piece) {
                Some(at) => {
                    rest = &rest[at + piece.len()..];
                    true
                }
                None => false,
            })
    })
}
