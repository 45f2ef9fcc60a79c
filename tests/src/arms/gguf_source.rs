//! Arms for `--source DIR` against a GGUF draft: the synthetic converter's GGUF and the Hugging Face
//! folder it was converted from, both drawn from one package and seed (the folder holds the source
//! values, the GGUF their F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K form). A
//! faithful pair passes all ten checks; each control bends the GGUF or the folder once and is
//! refused at the named check, naming the tensor or key.

use super::folder::{fail, judge_counted, Owed};
use super::gguf_draft::{tensor, Trial};
use super::{Base, SEED};
use crate::synth::gguf::{gguf_for, GgufFile, GgufOptions};
use crate::synth::source::{write_source, SourceOptions};
use crate::synth::{Encoding, Package};
use dflash_gate::__private::gguf::GgmlType;
use dflash_gate::{gate, CheckId, Form, Options, Outcome};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy)]
struct SourceArm {
    name: &'static str,
    /// The draft's geometry: the first family, or DFlash2 (its seven tensors converted from the
    /// folder's own values, as llama.cpp's converter writes them).
    base: Base,
    matrices: GgmlType,
    /// Done to the GGUF before it is written.
    bend: fn(&mut GgufFile),
    /// Done to the written source folder (`root` holds it as `source/`); returns what `--source` names.
    source: fn(&Path) -> PathBuf,
    owed: Owed,
}

const fn arm(name: &'static str, matrices: GgmlType, owed: Owed) -> SourceArm {
    SourceArm {
        name,
        base: Base::Small,
        matrices,
        bend: |_| {},
        source: |root| root.join("source"),
        owed,
    }
}

const CONFIG: &str = CheckId::SOURCE_CONFIG;
const INVENTORY: &str = CheckId::SOURCE_INVENTORY;
const BF16: &str = CheckId::SOURCE_BF16;
const Q4_1: &str = CheckId::SOURCE_Q4_1;

const ARMS: &[SourceArm] = &[
    arm("gguf_source::pass::faithful_f16", GgmlType::F16, Owed::Pass),
    arm(
        "gguf_source::pass::faithful_q8_0",
        GgmlType::Q8_0,
        Owed::Pass,
    ),
    arm(
        "gguf_source::pass::faithful_q4_k",
        GgmlType::Q4_K,
        Owed::Pass,
    ),
    arm(
        "gguf_source::pass::faithful_q4_1",
        GgmlType::Q4_1,
        Owed::Pass,
    ),
    arm(
        "gguf_source::pass::faithful_bf16",
        GgmlType::BF16,
        Owed::Pass,
    ),
    arm(
        "gguf_source::pass::faithful_q4_0",
        GgmlType::Q4_0,
        Owed::Pass,
    ),
    arm(
        "gguf_source::pass::faithful_q5_0",
        GgmlType::Q5_0,
        Owed::Pass,
    ),
    arm(
        "gguf_source::pass::faithful_q5_1",
        GgmlType::Q5_1,
        Owed::Pass,
    ),
    arm(
        "gguf_source::pass::faithful_q5_k",
        GgmlType::Q5_K,
        Owed::Pass,
    ),
    arm(
        "gguf_source::pass::faithful_q6_k",
        GgmlType::Q6_K,
        Owed::Pass,
    ),
    SourceArm {
        bend: |f| {
            // Block 5's codes negated: 32 values mirrored through zero.
            let data = &mut tensor(f, "blk.1.ffn_gate.weight").3;
            for q in &mut data[5 * 34 + 2..6 * 34] {
                *q = (*q as i8).wrapping_neg() as u8;
            }
        },
        ..arm(
            "gguf_source::control::tensor_changed",
            GgmlType::Q8_0,
            fail(
                Q4_1,
                &[
                    "blk.1.ffn_gate.weight (q8_0)",
                    "block 5",
                    "layers.1.mlp.gate_proj.weight",
                ],
            ),
        )
    },
    SourceArm {
        bend: |f| {
            // Super-block 2's codes shifted by one: every value a step off, and some past their range.
            let data = &mut tensor(f, "blk.0.attn_output.weight").3;
            for q in &mut data[2 * 144 + 16..3 * 144] {
                *q = q.rotate_left(4);
            }
        },
        ..arm(
            "gguf_source::control::q4_k_codes_swapped",
            GgmlType::Q4_K,
            fail(
                Q4_1,
                &[
                    "blk.0.attn_output.weight (q4_K)",
                    "block 2",
                    "layers.0.self_attn.o_proj.weight",
                ],
            ),
        )
    },
    SourceArm {
        bend: |f| {
            let data = &mut tensor(f, "blk.0.attn_k.weight").3;
            data[2 * 40..2 * 41].copy_from_slice(&half::f16::from_f32(0.5).to_bits().to_le_bytes());
        },
        ..arm(
            "gguf_source::control::f16_element_changed",
            GgmlType::F16,
            fail(
                BF16,
                &[
                    "blk.0.attn_k.weight (f16)",
                    "layers.0.self_attn.k_proj.weight",
                    "row 0, column 40",
                    "GGUF 0.5",
                ],
            ),
        )
    },
    SourceArm {
        bend: |f| {
            let data = &mut tensor(f, "blk.0.attn_k.weight").3;
            data[2 * 40..2 * 41].copy_from_slice(&0x7fc0u16.to_le_bytes());
        },
        source: |root| {
            let dir = root.join("source");
            set_source_element(&dir, "layers.0.self_attn.k_proj.weight", 40, f32::NAN);
            dir
        },
        ..arm(
            // The same NaN in both: equal bytes, and still no element equals a NaN.
            // `bf16.finite` names it too, from the GGUF alone.
            "gguf_source::control::nan_in_a_bf16_tensor_and_its_source",
            GgmlType::BF16,
            Owed::Refused {
                check: BF16,
                outcome: Outcome::Fail,
                mentions: &[
                    "blk.0.attn_k.weight (bf16)",
                    "layers.0.self_attn.k_proj.weight",
                    "row 0, column 40",
                    "GGUF NaN",
                ],
                also: &[CheckId::BF16_FINITE],
            },
        )
    },
    SourceArm {
        bend: |f| {
            // Block 1's first sub-block scale negated: its 16 values mirrored through zero.
            let data = &mut tensor(f, "blk.0.attn_output.weight").3;
            data[210 + 192] = (data[210 + 192] as i8).wrapping_neg() as u8;
        },
        ..arm(
            "gguf_source::control::q6_k_scale_negated",
            GgmlType::Q6_K,
            fail(
                Q4_1,
                &[
                    "blk.0.attn_output.weight (q6_K)",
                    "block 1:",
                    "layers.0.self_attn.o_proj.weight",
                ],
            ),
        )
    },
    SourceArm {
        bend: |f| {
            // Block 2's fifth bits of its first sub-block flipped: each value 16 steps off.
            let data = &mut tensor(f, "blk.1.ffn_up.weight").3;
            for qh in &mut data[2 * 176 + 16..2 * 176 + 48] {
                *qh ^= 0x01;
            }
        },
        ..arm(
            "gguf_source::control::q5_k_fifth_bits_flipped",
            GgmlType::Q5_K,
            fail(
                Q4_1,
                &[
                    "blk.1.ffn_up.weight (q5_K)",
                    "block 2:",
                    "layers.1.mlp.up_proj.weight",
                ],
            ),
        )
    },
    SourceArm {
        bend: |f| {
            // Block 3's fifth bits of its first eight values flipped: each 16 steps off.
            let data = &mut tensor(f, "blk.0.attn_q.weight").3;
            data[3 * 22 + 2] ^= 0xff;
        },
        ..arm(
            "gguf_source::control::q5_0_fifth_bits_flipped",
            GgmlType::Q5_0,
            fail(
                Q4_1,
                &[
                    "blk.0.attn_q.weight (q5_0)",
                    "block 3:",
                    "layers.0.self_attn.q_proj.weight",
                ],
            ),
        )
    },
    SourceArm {
        // The folder's config scales its positions (yarn) and the GGUF states no scaling: llama.cpp
        // would rotate every query as if unscaled.
        source: |root| {
            let dir = root.join("source");
            crate::fixture::edit_config(&dir, |c| {
                c.insert(
                    "rope_scaling".into(),
                    serde_json::json!({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}),
                );
            });
            dir
        },
        ..arm(
            "gguf_source::control::folder_scales_rope_the_gguf_does_not",
            GgmlType::Q8_0,
            fail(
                CONFIG,
                &[
                    "dflash.rope.scaling.type: GGUF \"default\" (absent: no scaling)",
                    "rope.rope_type \"yarn\"",
                ],
            ),
        )
    },
    SourceArm {
        // Fields no key of the GGUF holds are named as not compared, never read as agreement.
        source: |root| {
            let dir = root.join("source");
            crate::fixture::edit_config(&dir, |c| {
                c.insert("hidden_act".into(), serde_json::json!("gelu"));
            });
            dir
        },
        ..arm(
            "gguf_source::pass::fields_no_key_holds_are_named_not_compared",
            GgmlType::Q8_0,
            Owed::PassSaying {
                check: CONFIG,
                mentions: &["not compared, as no key of the file states them: hidden_act"],
            },
        )
    },
    SourceArm {
        bend: |f| f.tensors.retain(|t| t.0 != "blk.0.ffn_down.weight"),
        ..arm(
            "gguf_source::control::tensor_dropped",
            GgmlType::Q8_0,
            Owed::Refused {
                check: INVENTORY,
                outcome: Outcome::Fail,
                mentions: &["layers.0.mlp.down_proj.weight has no GGUF counterpart"],
                also: &[CheckId::INVENTORY_COMPLETE],
            },
        )
    },
    // A converter that reads dflash_config only drops an older config's top-level ids: the file
    // is no conversion of the folder, and source.config says so rather than "equals".
    SourceArm {
        bend: |f| assert!(f.remove("dflash.target_layers")),
        ..arm(
            "gguf_source::control::target_layers_dropped_by_the_converter",
            GgmlType::Q8_0,
            Owed::Refused {
                check: CONFIG,
                outcome: Outcome::Fail,
                mentions: &[
                    "dflash.target_layers is absent, but the source folder's config states target_layer_ids [1,3,5]",
                    "convert again from a config that states it in dflash_config",
                ],
                also: &[
                    CheckId::CONFIG_GEOMETRY,
                    CheckId::CONFIG_MASK_TOKEN,
                    CheckId::INVENTORY_COMPLETE,
                    CheckId::INVENTORY_EXPLAINED,
                ],
            },
        )
    },
    SourceArm {
        bend: |f| assert!(f.remove("tokenizer.ggml.mask_token_id")),
        ..arm(
            "gguf_source::control::mask_token_id_dropped_by_the_converter",
            GgmlType::Q8_0,
            Owed::Refused {
                check: CONFIG,
                outcome: Outcome::Fail,
                mentions: &[
                    "tokenizer.ggml.mask_token_id is absent, but the source folder's config states mask_token_id 999",
                ],
                also: &[
                    CheckId::CONFIG_GEOMETRY,
                    CheckId::CONFIG_MASK_TOKEN,
                    CheckId::INVENTORY_COMPLETE,
                    CheckId::INVENTORY_EXPLAINED,
                ],
            },
        )
    },
    SourceArm {
        bend: |f| {
            assert!(f.remove("dflash.target_layers"));
            f.i32_array("dflash.target_layers", &[1, 3, 5]);
        },
        ..arm(
            "gguf_source::control::target_layers_raw_ids",
            GgmlType::Q8_0,
            fail(
                CONFIG,
                &[
                    "dflash.target_layers is [1, 3, 5]",
                    "the layer before every tap",
                    "[2, 4, 6]",
                ],
            ),
        )
    },
    SourceArm {
        source: |root| {
            // Past its block's range, an element is clamped to the range's end before the bound
            // is applied, and the block's largest value dequantizes to that end: the element stays
            // within a step. Only the RMS ceiling, which compares the unclamped source, sees it.
            let dir = root.join("source");
            set_block_extreme(&dir, "layers.0.mlp.down_proj.weight", 1000.0);
            dir
        },
        ..arm(
            "gguf_source::control::rms_above_the_ceiling_every_element_in_bound",
            GgmlType::Q8_0,
            fail(
                Q4_1,
                &[
                    "blk.0.ffn_down.weight (q8_0): relative RMS error",
                    "layers.0.mlp.down_proj.weight",
                    "the ceiling for its step",
                ],
            ),
        )
    },
    SourceArm {
        source: |root| {
            // A NaN source value compares false with everything, the clamp included. Put where a
            // clamp that let it through would land it within a step (a block's most negative
            // value, code -127 of Q8_0's range -128..127), it is still out of bound, as NaN.
            let dir = root.join("source");
            edit_source(&dir, "layers.1.mlp.down_proj.weight", |values| {
                let value = |b: &[u8; 2]| half::bf16::from_le_bytes(*b).to_f32();
                let all: Vec<f32> = values.as_chunks::<2>().0.iter().map(value).collect();
                let index = all
                    .chunks_exact(32)
                    .enumerate()
                    .find_map(|(b, block)| {
                        let (j, extreme) = block
                            .iter()
                            .enumerate()
                            .max_by(|x, y| x.1.abs().total_cmp(&y.1.abs()))?;
                        (*extreme < 0.0).then_some(32 * b + j)
                    })
                    .expect("a block whose largest value is negative");
                (index, f32::NAN)
            });
            dir
        },
        ..arm(
            "gguf_source::control::nan_in_the_source",
            GgmlType::Q8_0,
            fail(
                Q4_1,
                &[
                    "blk.1.ffn_down.weight (q8_0)",
                    "layers.1.mlp.down_proj.weight value NaN",
                ],
            ),
        )
    },
    SourceArm {
        source: |root| {
            let dir = root.join("source");
            set_source_element(&dir, "layers.1.self_attn.q_proj.weight", 3, 1.0e5);
            dir
        },
        ..arm(
            "gguf_source::control::f16_overflow",
            GgmlType::F16,
            fail(
                BF16,
                &[
                    "blk.1.attn_q.weight",
                    "row 0, column 3",
                    "value 99840",
                    "beyond f16's range",
                    "overflows to inf",
                ],
            ),
        )
    },
    // DSpark's heads have no converter mapping the gate reads (spec 18.3): nothing is compared,
    // each source check blocked by config.geometry's UNDECIDED, never a FAIL of unmapped tensors.
    // DFlash2 (spec 18.3): the seven tensors, as llama.cpp's converter maps them from the folder
    // (no transpose; base kernels F32), are paired and compared as every other tensor.
    SourceArm {
        base: Base::Dflash2,
        ..arm("gguf_source::pass::dflash2_f16", GgmlType::F16, Owed::Pass)
    },
    SourceArm {
        base: Base::Dflash2,
        ..arm("gguf_source::pass::dflash2_q8_0", GgmlType::Q8_0, Owed::Pass)
    },
    SourceArm {
        base: Base::Dflash2,
        bend: |f| {
            let data = &mut tensor(f, "blk.0.attn_conv_base").3;
            data[4 * 300..4 * 301].copy_from_slice(&0.75f32.to_le_bytes());
        },
        ..arm(
            "gguf_source::control::dflash2_conv_base_changed",
            GgmlType::F16,
            fail(
                BF16,
                &[
                    "blk.0.attn_conv_base (f32) differs from source layers.0.attention_conv.base_kernel",
                    "row 1, column 44",
                    "GGUF 0.75",
                ],
            ),
        )
    },
    SourceArm {
        base: Base::Dflash2,
        // The two codebooks under each other's names: every shape right, the values not.
        bend: |f| {
            let successor = tensor(f, "selector_successor.weight").3.clone();
            let predecessor = std::mem::replace(&mut tensor(f, "selector_predecessor.weight").3, successor);
            tensor(f, "selector_successor.weight").3 = predecessor;
        },
        ..arm(
            "gguf_source::control::dflash2_codebooks_swapped",
            GgmlType::Q8_0,
            fail(
                Q4_1,
                &["selector_predecessor.weight (q8_0)", "candidate_selector.predecessor_codebook"],
            ),
        )
    },
    SourceArm {
        base: Base::Dflash2,
        // A converter that transposed the hidden projection: llama.cpp refuses its shape, and it
        // pairs with no source tensor of its shape.
        bend: |f| {
            let t = tensor(f, "selector_hidden.weight");
            let (k, n) = (t.1[0] as usize, t.1[1] as usize);
            let halves: Vec<[u8; 2]> = t.3.as_chunks::<2>().0.to_vec();
            t.3 = (0..k)
                .flat_map(|c| (0..n).map(move |r| (r, c)))
                .flat_map(|(r, c)| halves[r * k + c])
                .collect();
            t.1 = vec![n as u64, k as u64];
        },
        ..arm(
            "gguf_source::control::dflash2_selector_hidden_transposed",
            GgmlType::F16,
            Owed::Refused {
                check: INVENTORY,
                outcome: Outcome::Fail,
                mentions: &["GGUF tensor selector_hidden.weight is f16 ne [32, 256], source candidate_selector.hidden_projection.weight is"],
                also: &[CheckId::INVENTORY_COMPLETE],
            },
        )
    },
    SourceArm {
        bend: |f| super::gguf_draft::dspark(f, true),
        ..arm(
            "gguf_source::control::dspark_heads_not_compared",
            GgmlType::Q8_0,
            Owed::Refused {
                check: CheckId::CONFIG_GEOMETRY,
                outcome: Outcome::Undecided,
                mentions: &["DSpark's", "markov_w1.weight", "not settled upstream"],
                also: &[],
            },
        )
    },
    SourceArm {
        source: |root| root.join("draft").join("draft.gguf"),
        ..arm(
            "gguf_source::control::source_is_a_gguf",
            GgmlType::Q8_0,
            Owed::Error(&[
                "--source",
                "names a GGUF",
                "Hugging Face folder it was converted from",
            ]),
        )
    },
    SourceArm {
        source: |root| {
            let dir = root.join("package");
            std::fs::create_dir_all(&dir).expect("package dir");
            std::fs::write(dir.join("config.json"), b"{}").expect("config");
            std::fs::write(dir.join("model.q4nx"), b"").expect("weights");
            dir
        },
        ..arm(
            "gguf_source::control::source_is_a_package",
            GgmlType::Q8_0,
            Owed::Error(&[
                "--source",
                "names a Q4NX package",
                "Hugging Face folder it was converted from",
            ]),
        )
    },
];

/// Each arm, as a named trial.
pub fn trials() -> Vec<(String, Trial)> {
    let mut trials: Vec<(String, Trial)> = ARMS
        .iter()
        .map(|a| {
            (
                format!("arms::{}", a.name),
                Box::new(move || run(a)) as Trial,
            )
        })
        .collect();
    // Each arm again through the plain loops (no vector kernel, no chunk decided by its bytes),
    // owing the same: the two paths are held to one outcome, and a break in either is seen.
    trials.extend(ARMS.iter().map(|a| {
        let rest = a.name.trim_start_matches("gguf_source::");
        (
            format!("arms::gguf_source::scalar::{rest}"),
            Box::new(move || dflash_gate::__private::with_scalar_source_loop(|| run(a))) as Trial,
        )
    }));
    // The F16 draft's matrices are compared by `source.bf16`'s workers, the Q8_0 one's by
    // `source.q4_1`'s.
    for (step, matrices) in [(BF16, GgmlType::F16), (Q4_1, GgmlType::Q8_0)] {
        trials.push((
            format!(
                "arms::gguf_source::hostile::a_worker_panic_in_{}_is_an_internal_error",
                step.replace('.', "_")
            ),
            Box::new(move || worker_panic(step, matrices)) as Trial,
        ));
    }
    trials
}

/// A faithful pair gated with every worker of `step` made to panic: an internal error naming the
/// step, never a verdict from the tensors the other workers compared.
fn worker_panic(step: &'static str, matrices: GgmlType) -> Result<(), String> {
    let arm = arm("", matrices, Owed::Pass);
    let (_root, draft, named) = write_pair(&arm)?;
    let options = Options::default().with_source(named);
    let report = gate(&draft, &options).map_err(|e| e.to_string())?;
    if report.verdict() != Outcome::Pass {
        return Err(format!(
            "without the panic: {}, expected PASS",
            report.verdict()
        ));
    }
    let outcome = {
        let _armed = dflash_gate::__private::parallel::fault::panic_in(step);
        gate(&draft, &options)
    };
    match outcome {
        Ok(report) => Err(format!(
            "a worker of {step} panicked and the gate still gave a verdict: {}",
            report.verdict()
        )),
        Err(e) if e.reason() == "internal" && e.to_string().contains(step) => Ok(()),
        Err(e) => Err(format!(
            "expected an internal error naming {step}, got {}: {e}",
            e.reason()
        )),
    }
}

/// Sets element `index` of the BF16 source tensor `name` in `dir/model.safetensors` to `value`.
fn set_source_element(dir: &Path, name: &str, index: usize, value: f32) {
    edit_source(dir, name, |_| (index, value));
}

/// Sets the source tensor `name`'s first-block element of largest magnitude to `magnitude`, its
/// sign kept.
fn set_block_extreme(dir: &Path, name: &str, magnitude: f32) {
    edit_source(dir, name, |values| {
        let block = values.as_chunks::<2>().0.iter().take(32);
        let value = |b: &[u8; 2]| half::bf16::from_le_bytes(*b).to_f32();
        let (index, largest) = block
            .map(value)
            .enumerate()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .expect("a block of values");
        (index, magnitude.copysign(largest))
    });
}

/// Sets one bf16 element of the source tensor `name`: `choose` picks it, and its value, from the
/// tensor's bytes.
fn edit_source(dir: &Path, name: &str, choose: impl Fn(&[u8]) -> (usize, f32)) {
    let path = dir.join("model.safetensors");
    let mut bytes = std::fs::read(&path).expect("source weights");
    let len = u64::from_le_bytes(bytes[..8].try_into().expect("length")) as usize;
    let header: serde_json::Value =
        serde_json::from_slice(&bytes[8..8 + len]).expect("source header");
    let offsets = |i: usize| header[name]["data_offsets"][i].as_u64().expect("offsets") as usize;
    let data = 8 + len + offsets(0)..8 + len + offsets(1);
    let (index, value) = choose(&bytes[data.clone()]);
    let at = data.start + 2 * index;
    bytes[at..at + 2].copy_from_slice(&half::bf16::from_f32(value).to_bits().to_le_bytes());
    std::fs::write(&path, bytes).expect("source weights");
}

fn run(arm: &SourceArm) -> Result<(), String> {
    let (_root, draft, named) = write_pair(arm)?;
    let result = gate(&draft, &Options::default().with_source(named));
    if let Ok(report) = &result {
        crate::schema::validate(&report.to_json())?;
        crate::loaders::stricter_than_every_engine(report)?;
        // --source was given: no line asks for it; once it passed, the right-weights line is gone.
        let text = report.not_checked_text().join("\n");
        let weights = text.contains("whether these are the right weights");
        if text.contains("give --source") || matches!(arm.owed, Owed::Pass) && weights {
            return Err(format!(
                "a NOT CHECKED line misleads after --source:\n{text}"
            ));
        }
    }
    judge_counted(Form::Gguf, arm.owed, result, 11)
}

/// The arm's GGUF draft and the folder it was written from, in a directory of their own (kept while
/// the first value lives): the draft's path, and what `--source` names.
fn write_pair(arm: &SourceArm) -> Result<(tempfile::TempDir, PathBuf, PathBuf), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (dir, source) = (root.path().join("draft"), root.path().join("source"));
    for d in [&dir, &source] {
        std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
    }
    let geometry = arm.base.geometry();
    let mut package = Package::generate(&geometry, Encoding::default(), SEED);
    let options = GgufOptions {
        matrices: arm.matrices,
        ..GgufOptions::DEFAULT
    };
    let mut file = gguf_for(&mut package, options, SEED).map_err(|e| e.to_string())?;
    write_source(&mut package, &source, SourceOptions::default(), SEED)
        .map_err(|e| e.to_string())?;
    (arm.bend)(&mut file);
    std::fs::write(dir.join("draft.gguf"), file.bytes()).map_err(|e| e.to_string())?;
    let named = (arm.source)(root.path());
    let draft = dir.join("draft.gguf");
    Ok((root, draft, named))
}
