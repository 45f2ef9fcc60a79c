//! Every row of every engine's table (spec 19), both ways: a draft that meets the row's fact, whose
//! report must list the row under that engine with the row's outcome, and a faithful draft beside
//! it, whose report must not. The trials are made from the tables themselves
//! (`loaders::<engine>::<rule>::meets` and `::clear`), so a row added without a draft that meets its
//! fact fails here by name.

use super::folder::{config, named, report_of, speculators, weights, write_arm, zeros};
use super::gguf_draft;
use super::{Base, SEED};
use crate::synth::source::{write_source, SourceOptions};
use crate::synth::{Encoding, Package, TargetPackage};
use dflash_gate::__private::loaders::{Kept, Shape, Table, When, TABLES};
use dflash_gate::{gate, LoaderOutcome, Options, Report};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub type Trial = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// How a trial's draft is made.
#[derive(Clone, Copy)]
enum Draft {
    /// A folder arm of the suite, by name.
    Arm(&'static str),
    /// The small faithful folder, bent.
    Bent(fn(&Path) -> PathBuf),
    /// The small faithful folder with one key taken from its config's top level.
    TopLevelTaken(&'static [&'static str]),
    /// The small faithful folder against a target that matches it, its config bent.
    Paired(fn(&mut Value)),
    /// A GGUF draft arm of the suite, by name.
    GgufArm(&'static str),
    /// The faithful GGUF draft against a target that matches it, its config bent.
    GgufPaired(fn(&mut Value)),
}

const FAITHFUL: Draft = Draft::Arm("folder::pass::dflash");
const MATCHED: Draft = Draft::Paired(|_| {});

const FAITHFUL_GGUF: Draft = Draft::GgufArm("gguf_draft::pass::faithful");
const MATCHED_GGUF: Draft = Draft::GgufPaired(|_| {});

/// A GGUF draft that meets `when` (for an engine that reads GGUF files), and one that does not.
fn gguf_drafts(when: When) -> Option<(Draft, Draft)> {
    use Draft::*;
    Some(match when {
        When::TensorMissing => (
            GgufArm("gguf_draft::control::tensor_missing"),
            FAITHFUL_GGUF,
        ),
        When::TensorMisshapen => (
            GgufArm("gguf_draft::control::tensor_misshapen"),
            FAITHFUL_GGUF,
        ),
        When::FcMisshapen => (
            GgufArm("gguf_draft::control::fc_one_tap_short"),
            FAITHFUL_GGUF,
        ),
        When::TensorUnexplained => (GgufArm("gguf_draft::control::tensor_extra"), FAITHFUL_GGUF),
        When::SelectorWithoutKeys => (
            GgufArm("gguf_draft::control::dflash2_tensors_without_the_keys"),
            GgufArm("gguf_draft::control::tensor_extra"),
        ),
        When::MaskTokenIdAbsent => (
            GgufArm("gguf_draft::control::mask_under_the_older_key_only"),
            FAITHFUL_GGUF,
        ),
        When::MaskIsLiveToken => (
            GgufArm("gguf_draft::control::mask_is_a_normal_token"),
            GgufArm("gguf_draft::pass::mask_is_a_control_token"),
        ),
        When::NonFinite => (
            GgufArm("gguf_draft::control::nan_in_bf16_fc"),
            FAITHFUL_GGUF,
        ),
        When::TapBeyondTarget => (
            GgufPaired(|c| c["num_hidden_layers"] = 3.into()),
            MATCHED_GGUF,
        ),
        // The small draft's deepest dflash.target_layers entry is 6: a Qwen3 target of six layers
        // records no output past its last layer; a Nemotron-H target of six records it.
        When::TapAtTargetsLastLayer => (
            GgufPaired(|c| c["num_hidden_layers"] = 6.into()),
            GgufPaired(|c| {
                c["num_hidden_layers"] = 6.into();
                c["architectures"] = serde_json::json!(["NemotronHForCausalLM"]);
            }),
        ),
        When::MaskOutsideTargetVocab => {
            (GgufPaired(|c| c["vocab_size"] = 999.into()), MATCHED_GGUF)
        }
        When::HiddenDiffers => (GgufPaired(|c| c["hidden_size"] = 512.into()), MATCHED_GGUF),
        _ => return None,
    })
}

/// A folder draft that meets `when`, and one beside it that does not.
fn drafts(when: When) -> Option<(Draft, Draft)> {
    use Draft::*;
    Some(match when {
        When::MaskTokenIdAbsent => (Arm("folder::control::mask_token_id_absent"), FAITHFUL),
        When::TargetLayerIdsAbsent | When::TargetLayerIdsAbsentIn(Shape::Folder) => {
            (Arm("folder::control::target_layer_ids_absent"), FAITHFUL)
        }
        When::TargetLayerIdsAbsentIn(Shape::Speculators) => (
            Bent(speculators_taps_absent),
            Arm("folder::pass::speculators_dflash"),
        ),
        When::FcQuantized => (
            Arm("folder::pass::pack_quantized_w4_group"),
            Arm("folder::pass::pack_quantized_fc_ignored_by_pattern"),
        ),
        When::FcPackedWeight => (
            Arm("folder::pass::nvfp4_modelopt"),
            Arm("folder::pass::pack_quantized_w4_group"),
        ),
        When::Quantized | When::QuantizedCompressedTensors => {
            (Arm("folder::pass::pack_quantized_w4_group"), FAITHFUL)
        }
        When::VllmBuildsQuantized(Kept::Packed) => (
            Arm("folder::pass::pack_quantized_fc_ignored_by_name"),
            Arm("folder::pass::pack_quantized_ignore_in_vllms_names"),
        ),
        When::VllmBuildsQuantized(Kept::Weight) => (
            Arm("folder::pass::fp8_hugging_face_fc_not_converted"),
            Arm("folder::pass::fp8_hugging_face_not_converted_in_vllms_names"),
        ),
        When::VllmBuildsDense => (
            Arm("folder::pass::pack_quantized_ignore_in_vllms_names"),
            Arm("folder::pass::pack_quantized_fc_ignored_by_name"),
        ),
        When::SglangUntargeted => (
            Arm("folder::pass::pack_quantized_targets_by_checkpoint_path"),
            Arm("folder::pass::pack_quantized_w4_group"),
        ),
        When::SglangBuildsOtherwise => (
            Arm("folder::pass::pack_quantized_qkv_ignored_by_name"),
            Arm("folder::pass::pack_quantized_fc_ignored_by_name"),
        ),
        When::QuantizedMlx => (Arm("folder::pass::mlx_affine_4_group_64"), FAITHFUL),
        When::ModeloptObjectAlgoVllmUnnamed => (
            Arm("folder::pass::w4a16_nvfp4_modelopt_dflash_exporter"),
            Arm("folder::pass::nvfp4_modelopt_dflash_exporter"),
        ),
        When::QuantizedModeloptObject => (
            Arm("folder::pass::nvfp4_modelopt_dflash_exporter"),
            Arm("folder::pass::nvfp4_modelopt"),
        ),
        When::OwnEmbeddingOrHead | When::OwnEmbedding | When::OwnHead => {
            (Arm("folder::pass::nemotron_like_own_embedding"), FAITHFUL)
        }
        When::TopLevelAbsent(keys) => (TopLevelTaken(keys), FAITHFUL),
        When::IdsOutsideDflashConfig | When::TapsOutsideDflashConfigMiscount => {
            (Arm("folder::pass::old_schema_top_level_fields"), FAITHFUL)
        }
        When::RopeThetaAbsent => (Bent(rope_theta_absent), FAITHFUL),
        When::TensorMissing => (Arm("folder::control::tensor_missing"), FAITHFUL),
        When::TensorMisshapen => (Arm("folder::control::tensor_misshapen"), FAITHFUL),
        When::FcMisshapen => (Bent(fc_transposed), FAITHFUL),
        When::TensorUnexplained | When::UnexplainedNotBias => {
            (Arm("folder::control::tensor_extra"), FAITHFUL)
        }
        When::UnexplainedBias => (Bent(bias_without_the_flag), FAITHFUL),
        When::ModelPrefixed => (Arm("folder::pass::model_prefix"), FAITHFUL),
        When::AllLayersCausal => (
            Bent(speculators_every_layer_causal),
            Arm("folder::pass::speculators_dflash"),
        ),
        When::NonFinite => (Arm("folder::control::nan_in_bf16"), FAITHFUL),
        When::MaskEmbeddingDiffers => (
            Arm("folder::control::mask_embedding_wrong_id"),
            Arm("folder::pass::mask_embedding"),
        ),
        When::TapBeyondTarget => (Paired(|c| c["num_hidden_layers"] = 3.into()), MATCHED),
        When::MaskOutsideTargetVocab => (Paired(|c| c["vocab_size"] = 999.into()), MATCHED),
        When::HiddenDiffers => (Paired(|c| c["hidden_size"] = 512.into()), MATCHED),
        _ => return None,
    })
}

fn rope_theta_absent(dir: &Path) -> PathBuf {
    config(dir, |c| {
        c.as_object_mut().unwrap().remove("rope_theta");
    })
}

/// `fc.weight` stored `[in, out]`: the same bytes, the wrong shape.
fn fc_transposed(dir: &Path) -> PathBuf {
    weights(dir, |t| {
        let fc = named(t, "fc.weight");
        fc.2.reverse();
    })
}

/// A q_proj bias in a draft whose config says `attention_bias: false`.
fn bias_without_the_flag(dir: &Path) -> PathBuf {
    weights(dir, |t| {
        t.push(zeros("layers.0.self_attn.q_proj.bias", vec![256]))
    })
}

/// A speculators draft without `aux_hidden_state_layer_ids`.
fn speculators_taps_absent(dir: &Path) -> PathBuf {
    let dir = speculators(dir);
    config(&dir, |c| {
        c.as_object_mut()
            .unwrap()
            .remove("aux_hidden_state_layer_ids");
    })
}

fn speculators_every_layer_causal(dir: &Path) -> PathBuf {
    let dir = speculators(dir);
    config(&dir, |c| c["sliding_window_non_causal"] = false.into())
}

/// The small faithful folder, written into `dir`.
fn faithful(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let mut package = Package::generate(&Base::Small.geometry(), Encoding::default(), SEED);
    write_source(&mut package, dir, SourceOptions::default(), SEED).map_err(|e| e.to_string())
}

/// The report the gate gives `draft`, held to the gate being stricter than every engine.
fn report(draft: Draft) -> Result<Report, String> {
    let r = gated(draft)?;
    crate::loaders::stricter_than_every_engine(&r)?;
    Ok(r)
}

/// The report the gate gives `draft`.
fn gated(draft: Draft) -> Result<Report, String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = root.path().join("draft");
    let gate_at =
        |path: &Path, options: &Options| gate(path, options).map_err(|e| format!("no report: {e}"));
    match draft {
        Draft::Arm(name) => report_of(name),
        Draft::Bent(bend) => {
            faithful(&dir)?;
            gate_at(&bend(&dir), &Options::default())
        }
        Draft::TopLevelTaken(keys) => {
            faithful(&dir)?;
            let key = keys
                .iter()
                .find(|k| **k != "model_type")
                .ok_or("no key to take")?;
            config(&dir, |c| {
                let top = c.as_object_mut().unwrap();
                // A DFlash field moves into dflash_config (its other home); any other goes.
                if let Some(v) = top.remove(*key) {
                    if ["num_target_layers", "block_size"].contains(key) {
                        c["dflash_config"][*key] = v;
                    }
                }
            });
            gate_at(&dir, &Options::default())
        }
        Draft::Paired(bend) => {
            faithful(&dir)?;
            let target = matching_target(root.path(), bend)?;
            gate_at(&dir, &Options::default().with_target(target))
        }
        Draft::GgufArm(name) => gguf_draft::report_of(name, None),
        Draft::GgufPaired(bend) => {
            let write = |root: &Path| matching_target(root, bend).expect("the target");
            gguf_draft::report_of("gguf_draft::pass::faithful", Some(&write))
        }
    }
}

/// A target that matches the small draft, its config bent, written under `root`.
fn matching_target(root: &Path, bend: fn(&mut Value)) -> Result<PathBuf, String> {
    let target = root.join("target");
    let mut t = TargetPackage::matching(&Base::Small.geometry());
    bend(&mut t.config);
    t.write(&target).map_err(|e| e.to_string())?;
    Ok(target)
}

/// The outcome of `table`'s engine in the report.
fn verdict_of(report: &Report, table: &Table) -> Result<LoaderOutcome, String> {
    report
        .loaders()
        .iter()
        .find(|v| v.engine == table.engine)
        .map(|v| v.outcome)
        .ok_or_else(|| format!("no verdict of {}:\n{}", table.engine, report.to_text(false)))
}

/// Whether the report lists `rule` under `table`'s engine, with its outcome.
fn listed(report: &Report, table: &Table, rule: &str) -> Result<Option<LoaderOutcome>, String> {
    let verdict = report
        .loaders()
        .iter()
        .find(|v| v.engine == table.engine)
        .ok_or_else(|| format!("no verdict of {}:\n{}", table.engine, report.to_text(false)))?;
    Ok(verdict
        .reasons
        .iter()
        .find(|r| r.rule == rule)
        .map(|r| r.outcome))
}

/// Each engine's outcome on a draft, as `(engine name, outcome)`.
fn outcomes(report: &Report) -> Vec<(&'static str, LoaderOutcome)> {
    report
        .loaders()
        .iter()
        .map(|v| (v.engine.name(), v.outcome))
        .collect()
}

/// A faithful draft loads in every engine that reads its form, and no other reads it.
fn faithful_loads(draft: Draft, readers: &[&str]) -> Result<(), String> {
    let r = report(draft)?;
    let wrong: Vec<String> = outcomes(&r)
        .into_iter()
        .filter(|(engine, outcome)| {
            let owed = match readers.contains(engine) {
                true => LoaderOutcome::Loads,
                false => LoaderOutcome::NotItsForm,
            };
            *outcome != owed
        })
        .map(|(e, o)| format!("{e} {o:?}"))
        .collect();
    if r.loaders().len() != dflash_gate::Engine::ALL.len() || !wrong.is_empty() {
        return Err(format!("{wrong:?}:\n{}", r.to_text(false)));
    }
    Ok(())
}

/// `--loader` makes each engine asked for a check: PASS where it loads the draft, FAIL where it does
/// not read its form or serves it wrong, UNDECIDED where the gate cannot tell; a refused config
/// blocks them all.
fn asked(arm: &'static str, owed: &'static [(&'static str, dflash_gate::Outcome)]) -> Trial {
    Box::new(move || {
        let root = tempfile::tempdir().map_err(|e| e.to_string())?;
        let dir = root.path().join("draft");
        faithful(&dir)?;
        let bend: fn(&Path) -> PathBuf = match arm {
            "nan" => |d| {
                weights(d, |t| {
                    named(t, "fc.weight").3[6..8].copy_from_slice(&0x7fc0u16.to_le_bytes())
                })
            },
            "ids_absent" => |d| {
                config(d, |c| {
                    c["dflash_config"]
                        .as_object_mut()
                        .unwrap()
                        .remove("target_layer_ids");
                })
            },
            "not_a_draft" => |d| {
                config(d, |c| {
                    c["architectures"] = serde_json::json!(["Qwen3ForCausalLM"])
                })
            },
            _ => |d| d.to_owned(),
        };
        let engines = owed.iter().map(|(id, _)| {
            dflash_gate::Engine::ALL
                .into_iter()
                .find(|e| e.check_id() == *id)
                .expect("an engine's check id")
        });
        let r = gate(&bend(&dir), &Options::default().with_loaders(engines))
            .map_err(|e| format!("no report: {e}"))?;
        crate::schema::validate(&r.to_json())?;
        for (id, outcome) in owed {
            match r.check(id) {
                Some(c) if c.outcome() == *outcome => {}
                other => {
                    return Err(format!(
                        "{id} is {:?}, not {outcome:?}:\n{}",
                        other.map(|c| c.outcome()),
                        r.to_text(false)
                    ))
                }
            }
        }
        Ok(())
    })
}

/// Two trials for every row of every table, and the section as a whole.
pub fn trials() -> Vec<(String, Trial)> {
    use dflash_gate::CheckId as Id;
    use dflash_gate::Outcome::*;
    let mut out: Vec<(String, Trial)> = vec![
        (
            "loaders::faithful_folder_loads_where_it_is_read".to_owned(),
            Box::new(|| {
                faithful_loads(
                    FAITHFUL,
                    &["vllm", "sglang", "transformers", "mlx", "dflash-mlx"],
                )
            }),
        ),
        (
            "loaders::faithful_gguf_loads_in_llama_cpp_alone".to_owned(),
            Box::new(|| faithful_loads(FAITHFUL_GGUF, &["llama.cpp"])),
        ),
        (
            "loaders::faithful_pairing_loads_where_it_is_read".to_owned(),
            Box::new(|| {
                faithful_loads(
                    MATCHED,
                    &["vllm", "sglang", "transformers", "mlx", "dflash-mlx"],
                )
            }),
        ),
        (
            "loaders::asked::faithful".to_owned(),
            asked(
                "faithful",
                &[
                    (Id::LOADER_VLLM, Pass),
                    (Id::LOADER_LLAMA_CPP, Fail),
                    (Id::LOADER_DFLASH_MLX, Pass),
                ],
            ),
        ),
        (
            "loaders::asked::loads_wrongly_fails".to_owned(),
            asked(
                "nan",
                &[(Id::LOADER_SGLANG, Fail), (Id::LOADER_TRANSFORMERS, Fail)],
            ),
        ),
        (
            "loaders::asked::cannot_tell_is_undecided".to_owned(),
            asked("ids_absent", &[(Id::LOADER_VLLM, Undecided)]),
        ),
        (
            "loaders::asked::a_refused_config_blocks_them".to_owned(),
            asked(
                "not_a_draft",
                &[(Id::LOADER_VLLM, Undecided), (Id::LOADER_MLX, Undecided)],
            ),
        ),
    ];
    out.push((
        "loaders::engines_names_not_known_past_the_census".to_owned(),
        Box::new(engines_names_past_the_census),
    ));
    for table in TABLES {
        for rule in table.rules {
            let name = format!("loaders::{}::{}", table.engine, rule.id);
            let gguf = table.reads.contains(&Shape::Gguf);
            let pair = match gguf {
                true => gguf_drafts(rule.when),
                false => drafts(rule.when),
            };
            let Some((meets, clear)) = pair else {
                out.push((
                    format!("{name}::meets"),
                    Box::new(move || Err(format!("no draft meets {:?}", rule.when))),
                ));
                continue;
            };
            out.push((
                format!("{name}::meets"),
                Box::new(move || {
                    let r = report(meets)?;
                    let verdict = verdict_of(&r, table)?;
                    // The rule decides the engine's outcome as far as it reaches: a rule that stops the
                    // engine stops it, one it serves wrong by keeps `loads` from being said.
                    let reaches = match rule.outcome {
                        o if o.stops() => verdict.stops(),
                        _ => verdict != LoaderOutcome::Loads,
                    };
                    if !reaches {
                        return Err(format!(
                            "{} meets {} ({:?}) and says {verdict:?}:\n{}",
                            table.engine,
                            rule.id,
                            rule.outcome,
                            r.to_text(false)
                        ));
                    }
                    match listed(&r, table, rule.id)? {
                        Some(o) if o == rule.outcome => Ok(()),
                        other => Err(format!(
                            "{} lists {} as {other:?}, not {:?}:\n{}",
                            table.engine,
                            rule.id,
                            rule.outcome,
                            r.to_text(false)
                        )),
                    }
                }),
            ));
            out.push((
                format!("{name}::clear"),
                Box::new(move || {
                    let r = report(clear)?;
                    match listed(&r, table, rule.id)? {
                        None => Ok(()),
                        Some(o) => Err(format!(
                            "{} lists {} ({o:?}) for a draft that does not meet it:\n{}",
                            table.engine,
                            rule.id,
                            r.to_text(false)
                        )),
                    }
                }),
            ));
        }
    }
    out
}

/// A draft whose tensors outnumber the census's list: which Linears it holds is not known, so the
/// rows that read vLLM's and SGLang's names for them cannot tell (they never walk the config's
/// layers instead).
fn engines_names_past_the_census() -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = write_arm(
        "folder::pass::pack_quantized_fc_ignored_by_name",
        &root.path().join("draft"),
    )?;
    let past = dflash_gate::__private::limits::MAX_CENSUS_TENSORS + 8;
    weights(&dir, |t| {
        t.extend((0..past).map(|i| zeros(&format!("extra.{i}"), vec![1])))
    });
    let r = gate(&dir, &Options::default()).map_err(|e| format!("no report: {e}"))?;
    for (engine, rule) in [
        (dflash_gate::Engine::Vllm, "ignore_on_vllms_names"),
        (dflash_gate::Engine::Sglang, "layer_lists_on_bare_names"),
    ] {
        let verdict = r
            .loaders()
            .iter()
            .find(|v| v.engine == engine)
            .ok_or_else(|| format!("no verdict of {engine}"))?;
        let reason = verdict.reasons.iter().find(|x| x.rule == rule);
        match reason {
            Some(x)
                if x.outcome == LoaderOutcome::Undecided
                    && x.found.contains("census did not list every tensor") => {}
            other => {
                return Err(format!(
                    "{engine} {rule}: {other:?}, not `cannot tell` for the census:\n{}",
                    r.to_text(false)
                ))
            }
        }
    }
    Ok(())
}
