//! Targets in every form: a GGUF model file read by its header and metadata, a Hugging Face folder
//! whose `config.json` is all there is, and a multimodal config whose `text_config` is not an object.
//! Each trial names the check and the field or key its message must name.

use super::{Base, SEED};
use crate::defects::Scenario;
use crate::synth::gguf::GgufFile;
use crate::synth::{Encoding, Geometry, Package, TargetPackage};
use dflash_gate::__private::gguf::GgmlType;
use dflash_gate::{Outcome, Report};
use std::path::Path;

/// A trial's body: `Err` says what the gate did instead.
pub type Trial = fn() -> Result<(), String>;

/// A GGUF target matching `g` (a Qwen3 model: its layers, hidden size, an F16 `token_embd.weight` of
/// the draft's vocabulary, and a token type for each row), edited by `bend`.
pub(super) fn gguf_target(g: &Geometry, bend: fn(&mut GgufFile)) -> GgufFile {
    let mut f = GgufFile::new();
    f.string("general.architecture", "qwen3");
    f.u32("qwen3.block_count", g.num_target_layers as u32);
    f.u32("qwen3.embedding_length", g.hidden as u32);
    f.f32("qwen3.rope.freq_base", 1_000_000.0);
    // Its tokenizer as llama.cpp's converter writes one: every token NORMAL but the last row, a
    // CONTROL token of its own (the draft's mask id, as the released drafts' padded row is).
    let texts: Vec<String> = (0..g.vocab_size).map(|i| format!("t{i}")).collect();
    f.string_array("tokenizer.ggml.tokens", &texts);
    let mut types = vec![1; g.vocab_size as usize];
    if let Some(last) = types.last_mut() {
        *last = 3;
    }
    f.i32_array("tokenizer.ggml.token_type", &types);
    let data = vec![0u8; (g.vocab_size * g.hidden * 2) as usize];
    f.tensor(
        "token_embd.weight",
        vec![g.hidden, g.vocab_size],
        GgmlType::F16,
        data,
    );
    bend(&mut f);
    f
}

/// Gates the small package against a target written by `write` into the temporary root (it returns
/// the path to give `--target`).
fn against(
    write: impl FnOnce(&Path, &Geometry) -> std::path::PathBuf,
) -> Result<Result<Report, dflash_gate::PackageError>, String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let draft = root.path().join("draft");
    std::fs::create_dir(&draft).map_err(|e| e.to_string())?;
    let g = Base::Small.geometry();
    Scenario::new(Package::generate(&g, Encoding::default(), SEED))
        .write(&draft)
        .map_err(|e| e.to_string())?;
    let target = write(root.path(), &g);
    let options = dflash_gate::Options::default().with_target(target);
    Ok(dflash_gate::gate(&draft, &options))
}

fn gguf(bend: fn(&mut GgufFile)) -> impl FnOnce(&Path, &Geometry) -> std::path::PathBuf {
    move |root, g| {
        let path = root.join("target.gguf");
        std::fs::write(&path, gguf_target(g, bend).bytes()).expect("gguf");
        path
    }
}

fn folder(
    bend: fn(&mut serde_json::Value),
    weights: bool,
) -> impl FnOnce(&Path, &Geometry) -> std::path::PathBuf {
    move |root, g| {
        let path = root.join("target");
        let mut t = TargetPackage::matching(g);
        bend(&mut t.config);
        t.write(&path).expect("target");
        if !weights {
            std::fs::remove_file(path.join("model.q4nx")).expect("rm");
        }
        path
    }
}

/// Gates the small draft as a speculators folder (vLLM's training output, whose verifier is
/// `Qwen3ForCausalLM`), its config bent by `bend`, against a target written by `write`; the report is
/// held to the schema, so the verifier's evidence is too.
fn speculators_against(
    bend: fn(&mut serde_json::Value),
    write: impl FnOnce(&Path, &Geometry) -> std::path::PathBuf,
) -> Result<Result<Report, dflash_gate::PackageError>, String> {
    use crate::synth::source::{write_source, SourceOptions};
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let draft = root.path().join("draft");
    std::fs::create_dir(&draft).map_err(|e| e.to_string())?;
    let g = Base::Small.geometry();
    let mut package = Package::generate(&g, Encoding::default(), SEED);
    write_source(&mut package, &draft, SourceOptions::default(), SEED)
        .map_err(|e| e.to_string())?;
    super::folder::speculators(&draft);
    super::folder::config(&draft, bend);
    let target = write(root.path(), &g);
    let options = dflash_gate::Options::default().with_target(target);
    let result = dflash_gate::gate(&draft, &options);
    if let Ok(report) = &result {
        crate::schema::validate(&report.to_json())?;
    }
    Ok(result)
}

/// `target.depth`'s evidence of the verifier's architectures, as the JSON document holds it.
fn verifier_evidence(report: &Report) -> serde_json::Value {
    let check = report.check("target.depth").map(|c| c.evidence().cloned());
    serde_json::to_value(check.flatten()).expect("evidence")["verifier_architectures"].clone()
}

/// [`expect`], and `target.depth`'s evidence of the verifier is `evidence`.
fn expect_verifier(
    report: Result<Result<Report, dflash_gate::PackageError>, String>,
    want: &[(&str, Outcome, &str)],
    evidence: serde_json::Value,
) -> Result<(), String> {
    let report = report?.map_err(|e| format!("the gate could not run: {e}"))?;
    let found = verifier_evidence(&report);
    if found != evidence {
        return Err(format!(
            "target.depth's verifier_architectures is {found}, {evidence} owed"
        ));
    }
    expect(Ok(Ok(report)), want)
}

/// Every check in `want` ended as said, naming what it must.
pub(super) fn expect(
    report: Result<Result<Report, dflash_gate::PackageError>, String>,
    want: &[(&str, Outcome, &str)],
) -> Result<(), String> {
    let report = report?.map_err(|e| format!("the gate could not run: {e}"))?;
    for (id, outcome, names) in want {
        let check = report.check(id).ok_or(format!("{id} did not run"))?;
        if check.outcome() != *outcome || !check.message().contains(names) {
            return Err(format!(
                "{id}: expected {outcome} naming {names:?}, got {}: {}",
                check.outcome(),
                check.message()
            ));
        }
    }
    Ok(())
}

/// Every trial of this module: (name, body).
pub fn trials() -> Vec<(&'static str, Trial)> {
    vec![
        ("target_forms::gguf_target_matches", || {
            expect(
                against(gguf(|_| {})),
                &[
                    ("target.depth", Outcome::Pass, "below the target's"),
                    ("target.hidden_size", Outcome::Pass, "token_embd.weight is"),
                    ("target.vocab", Outcome::Pass, "token_embd.weight has"),
                ],
            )
        }),
        ("target_forms::gguf_target_scales_rope", || {
            // A target whose positions scale (yarn) and a draft whose do not: llama.cpp keeps the
            // scaling in rope.scaling.*, which must be read, not taken as no scaling.
            expect(
                against(gguf(|f| {
                    f.string("qwen3.rope.scaling.type", "yarn");
                    f.f32("qwen3.rope.scaling.factor", 4.0);
                })),
                &[("target.rope", Outcome::Fail, "rope.rope_type")],
            )
        }),
        ("target_forms::gguf_target_fewer_layers", || {
            expect(
                against(gguf(|f| {
                    f.replace("qwen3.block_count", 4, &2u32.to_le_bytes());
                })),
                &[("target.depth", Outcome::Fail, "the target's 2 layers")],
            )
        }),
        ("target_forms::gguf_target_hidden_differs", || {
            expect(
                against(gguf(|f| {
                    f.replace("qwen3.embedding_length", 4, &512u32.to_le_bytes());
                })),
                &[("target.hidden_size", Outcome::Fail, "vs 512")],
            )
        }),
        ("target_forms::gguf_target_vocab_differs", || {
            expect(
                against(|root, g| {
                    let path = root.join("target.gguf");
                    let mut small = g.clone();
                    small.vocab_size = g.vocab_size + 8;
                    std::fs::write(&path, gguf_target(&small, |_| {}).bytes()).expect("gguf");
                    path
                }),
                &[("target.vocab", Outcome::Fail, "vocab_size is")],
            )
        }),
        (
            "target_forms::gguf_target_mask_is_its_control_token",
            || {
                expect(
                    against(gguf(|_| {})),
                    &[
                        ("target.mask_token", Outcome::Pass, "999"),
                        ("target.tokenizer", Outcome::Pass, "1000 tokens"),
                    ],
                )
            },
        ),
        ("target_forms::gguf_target_mask_is_a_normal_token", || {
            expect(
                against(gguf(|f| {
                    let types = vec![1; 1000];
                    f.remove("tokenizer.ggml.token_type");
                    f.i32_array("tokenizer.ggml.token_type", &types);
                })),
                &[("target.mask_token", Outcome::Fail, "\"t999\"")],
            )
        }),
        ("target_forms::gguf_target_token_types_shorter", || {
            expect(
                against(gguf(|f| {
                    f.remove("tokenizer.ggml.token_type");
                    f.i32_array("tokenizer.ggml.token_type", &[3; 900]);
                })),
                &[
                    ("target.tokenizer", Outcome::Fail, "the target GGUF's tokenizer.ggml.token_type holds 900 types (i32), fewer than the 1000 tokens of tokenizer.ggml.tokens"),
                    ("target.mask_token", Outcome::Undecided, "tokenizer.ggml.token_type holds 900"),
                ],
            )
        }),
        ("target_forms::gguf_target_token_types_of_f32", || {
            expect(
                against(gguf(|f| {
                    let mut value = 6u32.to_le_bytes().to_vec();
                    value.extend_from_slice(&1000u64.to_le_bytes());
                    for _ in 0..1000 {
                        value.extend_from_slice(&1.0f32.to_le_bytes());
                    }
                    assert!(f.replace("tokenizer.ggml.token_type", 9, &value));
                })),
                &[
                    ("target.tokenizer", Outcome::Fail, "the target GGUF's tokenizer.ggml.token_type is an array of 1000 f32, not i32"),
                    ("target.mask_token", Outcome::Undecided, "not i32"),
                ],
            )
        }),
        ("target_forms::gguf_target_mask_is_its_eos", || {
            expect(
                against(gguf(|f| f.u32("tokenizer.ggml.eos_token_id", 999))),
                &[("target.mask_token", Outcome::Fail, "eos")],
            )
        }),
        ("target_forms::gguf_target_without_tokens", || {
            expect(
                against(gguf(|f| {
                    f.remove("tokenizer.ggml.tokens");
                })),
                &[
                    ("target.tokenizer", Outcome::Fail, "no tokenizer"),
                    ("target.mask_token", Outcome::Undecided, "no tokenizer"),
                ],
            )
        }),
        ("target_forms::gguf_target_lacks_block_count", || {
            expect(
                against(gguf(|f| {
                    f.remove("qwen3.block_count");
                })),
                &[(
                    "target.depth",
                    Outcome::Undecided,
                    "the target GGUF's metadata has no qwen3.block_count",
                )],
            )
        }),
        ("target_forms::gguf_target_truncated", || {
            let report = against(|root, g| {
                let path = root.join("target.gguf");
                let bytes = gguf_target(g, |_| {}).bytes();
                std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("gguf");
                path
            })?;
            match report {
                Err(e) if e.reason() == "malformed" && e.to_string().contains("target.gguf") => {
                    Ok(())
                }
                Err(e) => Err(format!("expected malformed naming target.gguf, got {e}")),
                Ok(r) => Err(format!(
                    "the gate ran ({}) over a truncated GGUF",
                    r.verdict()
                )),
            }
        }),
        ("target_forms::config_only_folder", || {
            expect(
                against(folder(|_| {}, false)),
                &[
                    ("target.depth", Outcome::Pass, "below the target's"),
                    ("target.hidden_size", Outcome::Pass, "equals the target's"),
                    (
                        "target.vocab",
                        Outcome::Pass,
                        "the rows are the config's vocab_size",
                    ),
                ],
            )
        }),
        ("target_forms::text_config_read_for_the_text_model", || {
            expect(
                against(folder(
                    |c| {
                        let o = c.as_object_mut().expect("object");
                        let h = o.remove("hidden_size").expect("hidden_size");
                        let l = o.remove("num_hidden_layers").expect("layers");
                        o.insert(
                            "text_config".into(),
                            serde_json::json!({"hidden_size": h, "num_hidden_layers": l}),
                        );
                    },
                    false,
                )),
                &[
                    ("target.depth", Outcome::Pass, "below the target's"),
                    ("target.hidden_size", Outcome::Pass, "equals the target's"),
                ],
            )
        }),
        ("target_forms::rope_equal", || {
            expect(
                against(folder(|_| {}, false)),
                &[("target.rope", Outcome::Pass, "rope_theta")],
            )
        }),
        ("target_forms::rope_moved_to_rope_parameters", || {
            expect(
                against(folder(
                    |c| {
                        let o = c.as_object_mut().expect("object");
                        o.remove("rope_theta");
                        o.insert(
                            "rope_parameters".into(),
                            serde_json::json!({"rope_theta": 1e6, "rope_type": "default"}),
                        );
                    },
                    false,
                )),
                &[("target.rope", Outcome::Pass, "(rope_parameters.rope_theta)")],
            )
        }),
        ("target_forms::rope_base_differs", || {
            expect(
                against(folder(|c| c["rope_theta"] = 500_000.into(), false)),
                &[(
                    "target.rope",
                    Outcome::Fail,
                    "rope_theta: the draft's 1000000.0 (rope_theta), the target's 500000 (rope_theta)",
                )],
            )
        }),
        ("target_forms::rope_absent_on_the_target", || {
            expect(
                against(folder(
                    |c| drop(c.as_object_mut().expect("object").remove("rope_theta")),
                    false,
                )),
                &[(
                    "target.rope",
                    Outcome::Undecided,
                    "rope_theta (the draft's is 1000000.0 (rope_theta); the target's config.json states none)",
                )],
            )
        }),
        ("target_forms::gguf_target_rope_base_differs", || {
            expect(
                against(gguf(|f| {
                    f.replace("qwen3.rope.freq_base", 6, &10_000f32.to_le_bytes());
                })),
                &[(
                    "target.rope",
                    Outcome::Fail,
                    "the target's 10000.0 (qwen3.rope.freq_base)",
                )],
            )
        }),
        ("target_forms::gguf_target_rope_matches", || {
            expect(
                against(gguf(|_| {})),
                &[("target.rope", Outcome::Pass, "qwen3.rope.freq_base")],
            )
        }),
        // A speculators draft names its verifier (spec 18.1): held to the target's architectures
        // when both are stated, and said not compared otherwise, never passed as compared.
        ("target_forms::speculators_verifier_is_the_target", || {
            expect_verifier(
                speculators_against(|_| {}, folder(|_| {}, false)),
                &[(
                    "target.depth",
                    Outcome::Pass,
                    "the verifier the draft was trained against (speculators_config.verifier.architectures [Qwen3ForCausalLM]) is the target's",
                )],
                serde_json::json!({"verifier": ["Qwen3ForCausalLM"], "target": ["Qwen3ForCausalLM"], "compared": true}),
            )
        }),
        (
            "target_forms::speculators_verifier_is_another_model",
            || {
                expect_verifier(
                speculators_against(
                    |_| {},
                    folder(|c| c["architectures"] = serde_json::json!(["LlamaForCausalLM"]), false),
                ),
                &[
                    (
                        "target.depth",
                        Outcome::Fail,
                        "the draft was trained against speculators_config.verifier.architectures [Qwen3ForCausalLM], and the target's config.json states architectures [LlamaForCausalLM]",
                    ),
                    ("target.hidden_size", Outcome::Pass, "equals the target's"),
                ],
                serde_json::json!({"verifier": ["Qwen3ForCausalLM"], "target": ["LlamaForCausalLM"], "compared": true}),
            )
            },
        ),
        (
            "target_forms::speculators_verifier_another_model_beside_a_shallow_target",
            || {
                // Another model FAILs whatever the depth: a count the target states wrongly does not
                // hide it.
                expect(
                    speculators_against(
                        |_| {},
                        folder(
                            |c| {
                                c["architectures"] = serde_json::json!(["LlamaForCausalLM"]);
                                c["num_hidden_layers"] = serde_json::json!("eight");
                            },
                            false,
                        ),
                    ),
                    &[("target.depth", Outcome::Fail, "[LlamaForCausalLM]")],
                )
            },
        ),
        (
            "target_forms::speculators_target_states_no_architectures",
            || {
                expect_verifier(
                speculators_against(
                    |_| {},
                    folder(|c| drop(c.as_object_mut().expect("object").remove("architectures")), false),
                ),
                &[(
                    "target.depth",
                    Outcome::Pass,
                    "the verifier's architectures (speculators_config.verifier.architectures [Qwen3ForCausalLM]) were not compared: the target's config.json states no architectures",
                )],
                serde_json::json!({"verifier": ["Qwen3ForCausalLM"], "target": null, "compared": false}),
            )
            },
        ),
        (
            "target_forms::speculators_target_architectures_of_another_type",
            || {
                expect(
                speculators_against(
                    |_| {},
                    folder(|c| c["architectures"] = serde_json::json!("Qwen3ForCausalLM"), false),
                ),
                &[(
                    "target.depth",
                    Outcome::Pass,
                    "were not compared: the target's config.json's architectures is \"Qwen3ForCausalLM\", a string, not an array of class names",
                )],
            )
            },
        ),
        ("target_forms::speculators_against_a_gguf_target", || {
            expect_verifier(
                speculators_against(|_| {}, gguf(|_| {})),
                &[(
                    "target.depth",
                    Outcome::Pass,
                    "were not compared: a GGUF target states general.architecture \"qwen3\", not the Transformers classes a verifier is named by",
                )],
                serde_json::json!({"verifier": ["Qwen3ForCausalLM"], "target": null, "compared": false}),
            )
        }),
        (
            "target_forms::speculators_draft_names_no_verifier_architectures",
            || {
                expect_verifier(
                speculators_against(
                    |c| drop(c["speculators_config"]["verifier"].as_object_mut().expect("verifier").remove("architectures")),
                    folder(|_| {}, false),
                ),
                &[
                    (
                        "target.depth",
                        Outcome::Pass,
                        "the verifier's architectures were not compared: the draft's speculators_config.verifier.architectures is missing",
                    ),
                    ("config.geometry", Outcome::Fail, "speculators_config.verifier.architectures"),
                ],
                serde_json::json!({"verifier": null, "target": ["Qwen3ForCausalLM"], "compared": false}),
            )
            },
        ),
        ("target_forms::zlab_draft_names_no_verifier", || {
            // z-lab's schema names no verifier: nothing to compare, and nothing said of it.
            let report = against(folder(|_| {}, false))?.map_err(|e| e.to_string())?;
            let depth = report.check("target.depth").ok_or("no target.depth")?;
            if depth.message().contains("verifier") || !verifier_evidence(&report).is_null() {
                return Err(format!(
                    "target.depth speaks of a verifier: {}",
                    depth.message()
                ));
            }
            Ok(())
        }),
        ("target_forms::text_config_of_the_wrong_type", || {
            expect(
                against(folder(
                    |c| {
                        let o = c.as_object_mut().expect("object");
                        o.remove("hidden_size");
                        o.insert("text_config".into(), serde_json::json!(["x"]));
                    },
                    true,
                )),
                &[(
                    "target.hidden_size",
                    Outcome::Undecided,
                    "text_config is an array, not an object",
                )],
            )
        }),
    ]
}
