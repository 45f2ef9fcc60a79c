//! Arms for drafts quantized in the float and MLX schemes (spec 17): compressed-tensors' FP8 and
//! NVFP4, Transformers' fine-grained FP8, ModelOpt's NVFP4 and FP8, and MLX's modes with per-module
//! overrides. Each good layout passes; each control breaks one tensor or field and is refused at the
//! check that owns it, naming it.

use super::{
    arm, config, fail, named, weights, FolderArm, Owed, COMPLETE, EXPLAINED, FINITE, SCALES,
};
use crate::synth::quantized::{
    fp8_quantize, fp8_quantize_but, mlx_quantize, nvfp4_quantize, Grain, Mlx, Writer,
};
use dflash_gate::Outcome;
use serde_json::json;
use std::path::{Path, PathBuf};

const AFFINE_4: Mlx = Mlx {
    mode: "affine",
    bits: 4,
    group: 64,
};

const MXFP8: Mlx = Mlx {
    mode: "mxfp8",
    bits: 8,
    group: 32,
};

fn ct_fp8(d: &Path, grain: Grain, input: bool) -> PathBuf {
    fp8_quantize(d, Writer::CompressedTensors, grain, input);
    d.to_owned()
}

fn ct_nvfp4(d: &Path) -> PathBuf {
    nvfp4_quantize(d, Writer::CompressedTensors, false);
    d.to_owned()
}

fn mlx(d: &Path, p: Mlx) -> PathBuf {
    mlx_quantize(d, p, &[], &[]);
    d.to_owned()
}

/// Transformers' FP8 in 128x128 blocks, leaving the modules `dense` names dense, its config's
/// `modules_to_not_convert` set to `keys`.
fn hugging_face_fp8(d: &Path, dense: &[&str], keys: serde_json::Value) -> PathBuf {
    fp8_quantize_but(d, Writer::HuggingFace, Grain::Block(128, 128), false, dense);
    config(d, |c| {
        c["quantization_config"]["modules_to_not_convert"] = keys
    })
}

/// Moves the folder's ModelOpt `quantization_config` into `hf_quant_config.json`, stating
/// `quantization` there instead.
fn modelopt_file(d: &Path, quantization: serde_json::Value) -> PathBuf {
    config(d, |c| {
        c.as_object_mut().unwrap().remove("quantization_config");
    });
    let file = json!({"producer": {"name": "modelopt", "version": "0.47.0"}, "quantization": quantization});
    std::fs::write(
        d.join("hf_quant_config.json"),
        serde_json::to_vec_pretty(&file).unwrap(),
    )
    .unwrap();
    d.to_owned()
}

/// config.json's `quantization_config` as ModelOpt's DFlash exporter writes it: the producer and
/// `quantization` (hf_quant_config.json's object), and, `file`, that file beside it.
fn modelopt_exported(d: &Path, quantization: serde_json::Value, file: bool) -> PathBuf {
    let object = json!({"producer": {"name": "modelopt", "version": "0.47.0"}, "quantization": quantization});
    if file {
        std::fs::write(
            d.join("hf_quant_config.json"),
            serde_json::to_vec_pretty(&object).unwrap(),
        )
        .unwrap();
    }
    config(d, |c| c["quantization_config"] = object)
}

/// ModelOpt NVFP4 (with static input scales, `input_scale`) stated as its DFlash exporter states it.
fn nvfp4_exported(
    d: &Path,
    input_scale: bool,
    quantization: serde_json::Value,
    file: bool,
) -> PathBuf {
    nvfp4_quantize(d, Writer::ModelOpt, input_scale);
    modelopt_exported(d, quantization, file)
}

/// An UNDECIDED weight reading: every weight check says why, naming the scheme's field.
const fn undecided(mentions: &'static [&'static str]) -> Owed {
    Owed::Refused {
        check: COMPLETE,
        outcome: Outcome::Undecided,
        mentions,
        also: &[EXPLAINED, FINITE, SCALES],
    }
}

pub(super) const ARMS: &[FolderArm] = &[
    arm(
        "folder::pass::fp8_tensor_static_input_compressed_tensors",
        |d| ct_fp8(d, Grain::Tensor, true),
        Owed::Pass,
    ),
    arm(
        "folder::pass::fp8_channel_compressed_tensors",
        |d| ct_fp8(d, Grain::Channel, false),
        Owed::Pass,
    ),
    arm(
        "folder::pass::fp8_block_compressed_tensors",
        |d| ct_fp8(d, Grain::Block(128, 128), false),
        Owed::Pass,
    ),
    arm(
        "folder::pass::fp8_block_hugging_face",
        |d| {
            fp8_quantize(d, Writer::HuggingFace, Grain::Block(128, 128), false);
            d.to_owned()
        },
        Owed::Pass,
    ),
    // Transformers matches modules_to_not_convert against its own module names, as the checkpoint
    // spells them: fc stays dense. vLLM matches it exactly against `model.fc` (its loader rules).
    arm(
        "folder::pass::fp8_hugging_face_fc_not_converted",
        |d| hugging_face_fp8(d, &["fc"], json!(["fc"])),
        Owed::Pass,
    ),
    // compressed-tensors FP8 with fc left dense and listed in ignore by its checkpoint name.
    arm(
        "folder::pass::fp8_compressed_tensors_fc_ignored_by_name",
        |d| {
            fp8_quantize_but(
                d,
                Writer::CompressedTensors,
                Grain::Block(128, 128),
                false,
                &["fc"],
            );
            config(d, |c| c["quantization_config"]["ignore"] = json!(["fc"]))
        },
        Owed::Pass,
    ),
    // An entry in vLLM's spelling names no module of the checkpoint: fc is converted.
    arm(
        "folder::pass::fp8_hugging_face_not_converted_in_vllms_names",
        |d| hugging_face_fp8(d, &[], json!(["model.fc"])),
        Owed::Pass,
    ),
    arm(
        "folder::pass::fp8_modelopt",
        |d| {
            fp8_quantize(d, Writer::ModelOpt, Grain::Tensor, true);
            d.to_owned()
        },
        Owed::Pass,
    ),
    arm(
        "folder::pass::fp8_census_names_the_scheme",
        |d| ct_fp8(d, Grain::Block(128, 128), false),
        Owed::CensusSaying {
            tensor: "fc.weight",
            mentions: &["F8_E4M3 [256, 768], compressed-tensors FP8 E4M3 128x128 blocks"],
        },
    ),
    arm(
        "folder::pass::nvfp4_compressed_tensors",
        ct_nvfp4,
        Owed::Pass,
    ),
    arm(
        "folder::pass::nvfp4_compressed_tensors_static_input",
        |d| {
            nvfp4_quantize(d, Writer::CompressedTensors, true);
            d.to_owned()
        },
        Owed::Pass,
    ),
    arm(
        "folder::pass::nvfp4_modelopt",
        |d| {
            nvfp4_quantize(d, Writer::ModelOpt, true);
            d.to_owned()
        },
        Owed::Pass,
    ),
    // ModelOpt's export may state its scheme only in hf_quant_config.json, which vLLM reads.
    arm(
        "folder::pass::nvfp4_modelopt_stated_in_hf_quant_config",
        |d| {
            nvfp4_quantize(d, Writer::ModelOpt, false);
            modelopt_file(
                d,
                json!({"quant_algo": "W4A16_NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}),
            )
        },
        Owed::Pass,
    ),
    // ModelOpt's DFlash exporter writes hf_quant_config.json's object itself as config.json's
    // quantization_config (no quant_method), and the file beside it; vLLM reads it by its producer.
    arm(
        "folder::pass::nvfp4_modelopt_dflash_exporter",
        |d| {
            nvfp4_exported(
                d,
                true,
                json!({"quant_algo": "NVFP4", "kv_cache_quant_algo": null, "group_size": 16, "exclude_modules": ["lm_head"]}),
                true,
            )
        },
        Owed::Pass,
    ),
    // W4A16_NVFP4 as the exporter writes it: faithful, read by the gate; vLLM names no method for
    // it (its loader rule says so).
    arm(
        "folder::pass::w4a16_nvfp4_modelopt_dflash_exporter",
        |d| {
            nvfp4_exported(
                d,
                false,
                json!({"quant_algo": "W4A16_NVFP4", "group_size": 16, "exclude_modules": ["lm_head", "model.embed_tokens"]}),
                true,
            )
        },
        Owed::Pass,
    ),
    // In ModelOpt's nested object vLLM reads exclude_modules only: an `ignore` there leaves nothing
    // alone, so fc stored quantized is what it builds.
    arm(
        "folder::pass::modelopt_object_ignore_not_read",
        |d| {
            nvfp4_exported(
                d,
                true,
                json!({"quant_algo": "NVFP4", "group_size": 16, "ignore": ["fc"]}),
                false,
            )
        },
        Owed::Pass,
    ),
    arm(
        "folder::control::modelopt_object_excludes_a_quantized_fc",
        |d| {
            nvfp4_exported(
                d,
                true,
                json!({"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["fc"]}),
                false,
            )
        },
        fail(COMPLETE, &["fc is stored quantized", "lists it (fc)"]),
    ),
    arm(
        "folder::control::modelopt_exporter_algo_unknown",
        |d| {
            nvfp4_exported(
                d,
                true,
                json!({"quant_algo": "NVFP4_AWQ", "group_size": 16}),
                false,
            )
        },
        undecided(&[
            "modelopt (ModelOpt's own object, as its DFlash exporter writes it)",
            "quant_algo \"NVFP4_AWQ\" is not one the gate decodes",
        ]),
    ),
    arm(
        "folder::control::nvfp4_modelopt_file_not_json",
        |d| {
            nvfp4_quantize(d, Writer::ModelOpt, false);
            modelopt_file(d, json!({}));
            std::fs::write(d.join("hf_quant_config.json"), b"{\"producer\": ").unwrap();
            d.to_owned()
        },
        undecided(&[
            "modelopt (hf_quant_config.json)",
            "hf_quant_config.json is not JSON",
        ]),
    ),
    arm(
        "folder::pass::mlx_affine_4_group_64",
        |d| mlx(d, AFFINE_4),
        Owed::Pass,
    ),
    arm(
        "folder::pass::mlx_affine_3_group_32",
        |d| {
            let p = Mlx {
                mode: "affine",
                bits: 3,
                group: 32,
            };
            mlx(d, p)
        },
        Owed::Pass,
    ),
    arm(
        "folder::pass::mlx_mxfp4",
        |d| {
            mlx(
                d,
                Mlx {
                    mode: "mxfp4",
                    bits: 4,
                    group: 32,
                },
            )
        },
        Owed::Pass,
    ),
    arm(
        "folder::pass::mlx_nvfp4",
        |d| {
            mlx(
                d,
                Mlx {
                    mode: "nvfp4",
                    bits: 4,
                    group: 16,
                },
            )
        },
        Owed::Pass,
    ),
    arm("folder::pass::mlx_mxfp8", |d| mlx(d, MXFP8), Owed::Pass),
    arm(
        "folder::pass::mlx_override_and_a_dense_fc",
        |d| {
            let eight = Mlx {
                mode: "affine",
                bits: 8,
                group: 32,
            };
            mlx_quantize(d, AFFINE_4, &["fc"], &[("layers.0.mlp.down_proj", eight)]);
            d.to_owned()
        },
        Owed::Pass,
    ),
    // A config stating MLX's quantization over a folder that stores nothing quantized: mlx-lm
    // quantizes only what the file stores quantized, so it loads dense.
    arm(
        "folder::pass::mlx_quantization_over_dense_weights",
        |d| {
            config(d, |c| {
                let q = json!({"group_size": 64, "bits": 4, "mode": "affine"});
                c["quantization"] = q.clone();
                c["quantization_config"] = q;
            })
        },
        Owed::Pass,
    ),
    arm(
        "folder::pass::mlx_hostile_override_count",
        |d| {
            mlx(d, AFFINE_4);
            config(d, |c| {
                for i in 0..100_000 {
                    c["quantization"][format!("m{i}")] = json!(false);
                }
            })
        },
        Owed::Pass,
    ),
    arm(
        "folder::control::fp8_weight_nan_byte",
        |d| {
            ct_fp8(d, Grain::Channel, false);
            weights(d, |t| named(t, "fc.weight").3[5] = 0x7f)
        },
        fail(SCALES, &["fc.weight[5] is NaN (0x7f)", "NaN encodings"]),
    ),
    arm(
        "folder::control::fp8_scale_zero",
        |d| {
            ct_fp8(d, Grain::Channel, false);
            weights(d, |t| {
                named(t, "fc.weight_scale").3[4..6].copy_from_slice(&[0, 0])
            })
        },
        fail(SCALES, &["fc.weight_scale[2] is 0", "> 0"]),
    ),
    arm(
        "folder::control::fp8_block_scale_misshapen",
        |d| {
            ct_fp8(d, Grain::Block(128, 128), false);
            weights(d, |t| {
                let s = named(t, "fc.weight_scale");
                s.2 = vec![2, 5];
                s.3.truncate(2 * 2 * 5);
            })
        },
        fail(
            COMPLETE,
            &["fc.weight_scale is BF16 [2, 5], not a float [2, 6]"],
        ),
    ),
    arm(
        "folder::control::fp8_static_input_scale_missing",
        |d| {
            ct_fp8(d, Grain::Tensor, true);
            weights(d, |t| t.retain(|t| t.0 != "fc.input_scale"))
        },
        fail(COMPLETE, &["fc.input_scale is missing"]),
    ),
    arm(
        "folder::control::fp8_hugging_face_not_converted_yet_quantized",
        |d| hugging_face_fp8(d, &[], json!(["fc"])),
        fail(
            COMPLETE,
            &[
                "fc is stored quantized",
                "modules_to_not_convert lists it (fc)",
            ],
        ),
    ),
    arm(
        "folder::control::fp8_asymmetric_undecided",
        |d| {
            ct_fp8(d, Grain::Channel, false);
            config(d, |c| {
                c["quantization_config"]["config_groups"]["group_0"]["weights"]["symmetric"] =
                    json!(false)
            })
        },
        undecided(&["weights.symmetric is false", "asymmetric FP8"]),
    ),
    arm(
        "folder::control::nvfp4_global_scale_zero",
        |d| {
            ct_nvfp4(d);
            weights(d, |t| {
                named(t, "fc.weight_global_scale").3 = 0f32.to_le_bytes().to_vec()
            })
        },
        fail(SCALES, &["fc.weight_global_scale[0] is 0", "> 0"]),
    ),
    arm(
        "folder::control::nvfp4_scale_nan_byte",
        |d| {
            ct_nvfp4(d);
            weights(d, |t| named(t, "fc.weight_scale").3[48 + 2] = 0x7f)
        },
        fail(SCALES, &["fc.weight_scale[50] is NaN (0x7f)"]),
    ),
    arm(
        "folder::control::nvfp4_packed_width_one_short",
        |d| {
            ct_nvfp4(d);
            weights(d, |t| {
                let p = named(t, "fc.weight_packed");
                let (rows, width) = (p.2[0] as usize, p.2[1] as usize);
                p.3 =
                    p.3.chunks(width)
                        .flat_map(|r| r[..width - 1].to_vec())
                        .collect();
                p.2[1] -= 1;
                assert_eq!(p.3.len(), rows * (width - 1));
            })
        },
        fail(
            COMPLETE,
            &["NVFP4's group of 16 does not divide fc's K = 766"],
        ),
    ),
    arm(
        "folder::control::nvfp4_modelopt_second_scale_missing",
        |d| {
            nvfp4_quantize(d, Writer::ModelOpt, true);
            weights(d, |t| {
                t.retain(|t| t.0 != "layers.1.self_attn.o_proj.weight_scale_2")
            })
        },
        fail(
            COMPLETE,
            &["layers.1.self_attn.o_proj.weight_scale_2 is missing"],
        ),
    ),
    arm(
        "folder::control::nvfp4_modelopt_excluded_yet_quantized",
        |d| {
            nvfp4_quantize(d, Writer::ModelOpt, true);
            config(d, |c| {
                c["quantization_config"]["exclude_modules"] = json!(["layers.*.mlp.*"])
            })
        },
        fail(
            COMPLETE,
            &[
                "is stored quantized",
                "exclude_modules (or ignore) lists it (layers.*.mlp.*)",
            ],
        ),
    ),
    // ModelOpt's config.json names what it left alone under `ignore`.
    arm(
        "folder::control::nvfp4_modelopt_ignored_yet_quantized",
        |d| {
            nvfp4_quantize(d, Writer::ModelOpt, false);
            config(d, |c| c["quantization_config"]["ignore"] = json!(["fc"]))
        },
        fail(COMPLETE, &["fc is stored quantized", "lists it (fc)"]),
    ),
    arm(
        "folder::control::fp8_hugging_face_ue8m0_scales_undecided",
        |d| {
            fp8_quantize(d, Writer::HuggingFace, Grain::Block(128, 128), false);
            config(d, |c| {
                c["quantization_config"]["scale_fmt"] = json!("ue8m0")
            })
        },
        undecided(&["scale_fmt is \"ue8m0\"", "float block scales"]),
    ),
    // Transformers 5.19's FineGrainedFP8Config writes modules_to_convert (null, or the embeddings it
    // also stores FP8): a list there is UNDECIDED, null passes (folder::pass::fp8_hugging_face_*).
    arm(
        "folder::control::fp8_hugging_face_modules_to_convert_undecided",
        |d| {
            fp8_quantize(d, Writer::HuggingFace, Grain::Block(128, 128), false);
            config(d, |c| {
                c["quantization_config"]["modules_to_convert"] = json!(["embed_tokens"])
            })
        },
        undecided(&[
            "modules_to_convert is [\"embed_tokens\"]",
            "which the gate does not read",
        ]),
    ),
    arm(
        "folder::pass::fp8_hugging_face_modules_to_convert_null",
        |d| {
            fp8_quantize(d, Writer::HuggingFace, Grain::Block(128, 128), false);
            config(d, |c| {
                c["quantization_config"]["modules_to_convert"] = json!(null)
            })
        },
        Owed::Pass,
    ),
    arm(
        "folder::control::mlx_bits_disagree_with_the_packed_width",
        |d| {
            mlx(d, AFFINE_4);
            config(d, |c| {
                c["quantization"]["bits"] = json!(8);
                c["quantization_config"]["bits"] = json!(8);
            })
        },
        fail(
            COMPLETE,
            &[
                "layers.0.self_attn.q_proj.weight is U32 [256, 32]",
                "at 8 bits",
            ],
        ),
    ),
    arm(
        "folder::control::mlx_scale_nan",
        |d| {
            mlx(d, AFFINE_4);
            weights(d, |t| {
                let nan = half::bf16::NAN.to_bits().to_le_bytes();
                named(t, "fc.scales").3[2..4].copy_from_slice(&nan)
            })
        },
        fail(SCALES, &["fc.scales[1] is NaN", "finite"]),
    ),
    arm(
        // Byte 4 * 3 + 1 of fc's codes: the second code of its U32 word 3.
        "folder::control::mlx_mxfp8_code_nan",
        |d| {
            mlx(d, MXFP8);
            weights(d, |t| named(t, "fc.weight").3[13] = 0xff)
        },
        fail(
            SCALES,
            &["fc.weight[3] is NaN (0xff) in its code 2 of 4", "U32 word"],
        ),
    ),
    arm(
        "folder::control::mlx_e8m0_scale_nan",
        |d| {
            mlx(
                d,
                Mlx {
                    mode: "mxfp4",
                    bits: 4,
                    group: 32,
                },
            );
            weights(d, |t| named(t, "fc.scales").3[7] = 0xff)
        },
        fail(SCALES, &["fc.scales[7] is NaN (0xff)"]),
    ),
    arm(
        "folder::control::mlx_biases_missing",
        |d| {
            mlx(d, AFFINE_4);
            weights(d, |t| t.retain(|t| t.0 != "fc.biases"))
        },
        fail(COMPLETE, &["fc.biases is missing"]),
    ),
    arm(
        "folder::control::mlx_override_false_yet_quantized",
        |d| {
            mlx(d, AFFINE_4);
            config(d, |c| c["quantization"]["fc"] = json!(false))
        },
        fail(
            COMPLETE,
            &["fc is stored quantized", "quantization.fc is false"],
        ),
    ),
    arm(
        "folder::control::mlx_override_yet_stored_dense",
        |d| {
            mlx_quantize(d, AFFINE_4, &["fc"], &[]);
            config(d, |c| {
                c["quantization"]["fc"] = json!({"group_size": 32, "bits": 8, "mode": "affine"})
            })
        },
        fail(
            COMPLETE,
            &[
                "fc.weight is stored dense",
                "quantization.fc gives it affine 8-bit group 32",
            ],
        ),
    ),
    arm(
        "folder::control::mlx_unknown_mode_undecided",
        |d| {
            mlx(d, AFFINE_4);
            config(d, |c| c["quantization"]["mode"] = json!("turbo"))
        },
        undecided(&[
            "quantization.mode is \"turbo\"",
            "not a mode the gate decodes",
        ]),
    ),
];
