//! Arms for a draft as its publisher ships it (spec section 13): a Hugging Face folder, single or
//! sharded, and the hub cache's layouts. Each folder is written by the generator as z-lab releases one
//! (`model_type: "qwen3"`, the DFlash fields in `dflash_config`, bf16 safetensors) and bent once; a
//! control holds when the gate refuses it at the named check, naming the field or tensor, and every
//! other check still passes or was stopped by that one.

use super::{Base, SEED};
use crate::synth::pack_quantized::{
    pack_quantize, read_tensors, write_tensors, PackOptions, Tensor,
};
use crate::synth::source::{write_source, SourceOptions};
use crate::synth::torch;
use crate::synth::{Encoding, Package};
use dflash_gate::__private::dtype::Dtype;
use dflash_gate::{gate, CheckId, Form, Options, Outcome, Report};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

mod quantized;

pub type Trial = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// Every folder arm: this file's, and the quantized schemes' of [`quantized`].
fn all() -> impl Iterator<Item = &'static FolderArm> {
    ARMS.iter().chain(quantized::ARMS)
}

/// What the gate owes a draft in a publisher's form (a folder, a GGUF).
#[derive(Clone, Copy)]
pub(crate) enum Owed {
    /// Every check passes.
    Pass,
    /// `check` has `outcome`, its message names each of `mentions`; every other check passes, is
    /// blocked by it, or is one of `also`.
    Refused {
        check: &'static str,
        outcome: Outcome,
        mentions: &'static [&'static str],
        also: &'static [&'static str],
    },
    /// No report: an error (exit 2) whose message names each of these.
    Error(&'static [&'static str]),
    /// Every check passes, and the census's `tensor` is described with each of `mentions`.
    CensusSaying {
        tensor: &'static str,
        mentions: &'static [&'static str],
    },
    /// Every check passes, and `check`'s message names each of `mentions`.
    PassSaying {
        check: &'static str,
        mentions: &'static [&'static str],
    },
    /// Every check passes, and the report says the draft was found in `folder` under the repository
    /// named: `against().draft_in`, the JSON document's `draft_in` (held to the schema) and the
    /// header's line.
    PassFoundIn { folder: &'static str },
}

#[derive(Clone, Copy)]
struct FolderArm {
    name: &'static str,
    base: Base,
    dtype: Dtype,
    shards: usize,
    /// One file and an index naming it (mlx-lm's `save_model`).
    indexed: bool,
    /// Done to the written folder before it is gated; returns the path to gate (the folder, or a cache
    /// path that leads to it).
    bend: fn(&Path) -> PathBuf,
    owed: Owed,
    /// Checks the report lists: a folder's six, and `scalars.mask_token_id` with `mask_embedding.pt`.
    checks: usize,
}

const fn arm(name: &'static str, bend: fn(&Path) -> PathBuf, owed: Owed) -> FolderArm {
    FolderArm {
        name,
        base: Base::Small,
        dtype: Dtype::Bf16,
        shards: 1,
        indexed: false,
        bend,
        owed,
        checks: 6,
    }
}

/// An arm of a folder holding `mask_embedding.pt`: seven checks.
const fn mask_arm(name: &'static str, bend: fn(&Path) -> PathBuf, owed: Owed) -> FolderArm {
    FolderArm {
        checks: 7,
        ..arm(name, bend, owed)
    }
}

pub(crate) const fn fail(check: &'static str, mentions: &'static [&'static str]) -> Owed {
    Owed::Refused {
        check,
        outcome: Outcome::Fail,
        mentions,
        also: &[],
    }
}

const GEOMETRY: &str = CheckId::CONFIG_GEOMETRY;
const PARSES: &str = CheckId::CONTAINER_PARSES;
const COMPLETE: &str = CheckId::INVENTORY_COMPLETE;
const EXPLAINED: &str = CheckId::INVENTORY_EXPLAINED;
const FINITE: &str = CheckId::BF16_FINITE;
const SCALES: &str = CheckId::QUANT_SCALES;
const MASK: &str = CheckId::SCALARS_MASK_TOKEN_ID;

fn as_is(dir: &Path) -> PathBuf {
    dir.to_owned()
}

const ARMS: &[FolderArm] = &[
    arm("folder::pass::dflash", as_is, Owed::Pass),
    FolderArm {
        base: Base::Dflash2,
        ..arm("folder::pass::dflash2", as_is, Owed::Pass)
    },
    FolderArm {
        shards: 3,
        ..arm("folder::pass::sharded", as_is, Owed::Pass)
    },
    FolderArm {
        dtype: Dtype::F16,
        ..arm("folder::pass::f16", as_is, Owed::Pass)
    },
    FolderArm {
        dtype: Dtype::F32,
        ..arm("folder::pass::f32", as_is, Owed::Pass)
    },
    FolderArm {
        indexed: true,
        ..arm("folder::pass::mlx_one_file_indexed", as_is, Owed::Pass)
    },
    arm(
        "folder::pass::old_schema_top_level_fields",
        old_schema,
        Owed::Pass,
    ),
    arm("folder::pass::model_prefix", model_prefix, Owed::Pass),
    arm("folder::pass::cache_snapshot", cache_snapshot, Owed::Pass),
    arm(
        "folder::pass::cache_repository",
        cache_repository,
        Owed::Pass,
    ),
    arm(
        "folder::pass::cache_repository_id",
        cache_repository_id,
        Owed::Pass,
    ),
    // Variant drafts (spec 18.2): an own embedding table and head, Nemotron's EAGLE ids, MiMo's sinks.
    arm("folder::pass::nemotron_like_own_embedding", nemotron_like, Owed::Pass),
    arm(
        "folder::control::has_embed_tokens_without_the_tensor",
        has_embed_tokens_without_the_tensor,
        fail(
            COMPLETE,
            &["embed_tokens.weight is missing (the config says has_embed_tokens: true"],
        ),
    ),
    arm(
        "folder::control::has_own_lm_head_without_the_tensor",
        has_own_lm_head_without_the_tensor,
        fail(
            COMPLETE,
            &["lm_head.weight is missing (the config says has_own_lm_head: true"],
        ),
    ),
    arm(
        "folder::control::eagle_ids_not_the_ids_plus_one",
        eagle_ids_not_plus_one,
        fail(
            GEOMETRY,
            &["eagle_aux_hidden_state_layer_ids is [1, 3, 5], not dflash_config.target_layer_ids [1, 3, 5] plus one ([2, 4, 6])"],
        ),
    ),
    arm("folder::pass::mimo_like_attention_sinks", mimo_like, Owed::Pass),
    // XiaomiMiMo's layout (spec 18.2): the repository's root holds the target's files (or only a
    // README) and its `dflash/` the draft, whose weights may be named `dflash_draft_model*` by an
    // index. Gating the repository gates the draft there, and says so.
    mask_arm(
        "folder::pass::mimo_repository_keeping_its_draft_in_dflash",
        |d| {
            mimo_like(d);
            mask_embedding(d, |_, _| {});
            named_as_mimo(d, DRAFT_INDEX);
            in_dflash(d, true)
        },
        Owed::PassFoundIn { folder: "dflash" },
    ),
    arm(
        "folder::pass::readme_beside_a_dflash_folder",
        |d| in_dflash(d, false),
        Owed::PassFoundIn { folder: "dflash" },
    ),
    arm(
        "folder::pass::cache_repository_keeping_its_draft_in_dflash",
        |d| {
            in_dflash(d, true);
            cache_repository(d)
        },
        Owed::PassFoundIn { folder: "dflash" },
    ),
    arm(
        "folder::pass::draft_weights_named_by_their_own_index",
        |d| named_as_mimo(d, DRAFT_INDEX),
        Owed::Pass,
    ),
    FolderArm {
        shards: 2,
        ..arm(
            "folder::pass::draft_shards_named_by_the_model_index",
            |d| named_as_mimo(d, MODEL_INDEX),
            Owed::Pass,
        )
    },
    arm(
        // The draft in dflash/ is gated for real: its defects are found there.
        "folder::control::dflash_folder_draft_tensor_missing",
        |d| {
            tensor_missing(d);
            in_dflash(d, true)
        },
        fail(COMPLETE, &["layers.0.mlp.down_proj.weight"]),
    ),
    arm(
        // The root is a draft too: the gate never descends past it, and a folder of two drafts
        // is --all's.
        "folder::control::dflash_folder_beside_a_draft_at_the_root",
        |d| {
            in_dflash(d, false);
            std::fs::copy(d.join("dflash/config.json"), d.join("config.json")).unwrap();
            d.to_owned()
        },
        Owed::Error(&["holds a draft directory (dflash)", "did you mean --all?"]),
    ),
    arm(
        // A root config that cannot be read may be a broken draft's: not passed over.
        "folder::control::dflash_folder_beside_an_unreadable_root_config",
        |d| {
            in_dflash(d, true);
            std::fs::write(d.join("config.json"), b"{not json").unwrap();
            d.to_owned()
        },
        Owed::Error(&["holds a draft directory (dflash)", "did you mean --all?"]),
    ),
    arm(
        // A GGUF at the root may be a draft: the gate does not pass over it to the folder.
        "folder::control::dflash_folder_beside_a_gguf_at_the_root",
        |d| {
            in_dflash(d, false);
            std::fs::write(d.join("draft.gguf"), b"GGUF").unwrap();
            d.to_owned()
        },
        Owed::Error(&["holds a draft directory (dflash) beside draft.gguf", "did you mean --all?"]),
    ),
    arm(
        "folder::control::dflash_folder_beside_another_draft_folder",
        |d| {
            in_dflash(d, true);
            copy_dir(&d.join("dflash"), &d.join("other"));
            d.to_owned()
        },
        Owed::Error(&["holds draft directories (dflash, other)", "did you mean --all?"]),
    ),
    arm(
        "folder::control::dflash_folder_leaves_the_repository",
        |d| {
            in_dflash(d, true);
            let outside = d.parent().unwrap().join("elsewhere");
            std::fs::rename(d.join("dflash"), &outside).unwrap();
            std::os::unix::fs::symlink(&outside, d.join("dflash")).unwrap();
            d.to_owned()
        },
        Owed::Error(&["dflash", "leads out of the package"]),
    ),
    arm(
        // Read only as an index names them: a loader that reads an index finds nothing.
        "folder::control::draft_weights_no_index_names",
        |d| {
            named_as_mimo(d, DRAFT_INDEX);
            std::fs::remove_file(d.join(DRAFT_INDEX)).unwrap();
            d.to_owned()
        },
        fail(
            PARSES,
            &["dflash_draft_model.safetensors is there, but no index names it"],
        ),
    ),
    FolderArm {
        shards: 2,
        ..arm(
            // A stray file the index does not list is refused, as any unlisted safetensors is.
            "folder::control::draft_shard_the_index_does_not_list",
            |d| {
                named_as_mimo(d, DRAFT_INDEX);
                std::fs::copy(
                    d.join("dflash_draft_model-00002-of-00002.safetensors"),
                    d.join("dflash_draft_model-00003-of-00002.safetensors"),
                )
                .unwrap();
                d.to_owned()
            },
            fail(
                PARSES,
                &["dflash_draft_model-00003-of-00002.safetensors beside the weights dflash_draft_model.safetensors.index.json names"],
            ),
        )
    },
    FolderArm {
        shards: 2,
        ..arm(
            "folder::control::draft_weights_named_by_two_indexes",
            |d| {
                named_as_mimo(d, DRAFT_INDEX);
                std::fs::copy(d.join(DRAFT_INDEX), d.join(MODEL_INDEX)).unwrap();
                d.to_owned()
            },
            fail(
                PARSES,
                &["holds both model.safetensors.index.json and dflash_draft_model.safetensors.index.json"],
            ),
        )
    },
    arm(
        "folder::control::attention_sink_missing",
        attention_sink_missing,
        fail(
            COMPLETE,
            &["layers.1.self_attn.attention_sink_bias is missing"],
        ),
    ),
    arm(
        "folder::control::attention_sinks_without_the_flag",
        attention_sinks_without_the_flag,
        fail(
            EXPLAINED,
            &["layers.0.self_attn.attention_sink_bias (an attention sink, but the config sets no attention_sink_bias: true"],
        ),
    ),
    arm(
        "folder::control::attention_sink_misshapen",
        attention_sink_misshapen,
        fail(
            COMPLETE,
            &["layers.0.self_attn.attention_sink_bias is BF16 [8], the config makes it [4]"],
        ),
    ),
    arm(
        "folder::control::tensor_missing",
        tensor_missing,
        fail(
            COMPLETE,
            &["layers.0.mlp.down_proj.weight is missing", "at random"],
        ),
    ),
    arm(
        "folder::control::tensor_misshapen",
        tensor_misshapen,
        fail(
            COMPLETE,
            &["layers.0.mlp.gate_proj.weight", "[256, 512]", "[512, 256]"],
        ),
    ),
    arm(
        "folder::control::tensor_extra",
        tensor_extra,
        fail(EXPLAINED, &["layers.0.self_attn.extra.weight"]),
    ),
    arm(
        "folder::control::tensor_of_integers",
        tensor_of_integers,
        fail(COMPLETE, &["norm.weight", "I16", "not a float type"]),
    ),
    FolderArm {
        base: Base::Dflash2,
        ..arm(
            "folder::control::dflash2_codebook_with_weight_suffix",
            codebook_suffixed,
            fail(
                COMPLETE,
                &["candidate_selector.predecessor_codebook.weight", "KeyError"],
            ),
        )
    },
    arm(
        "folder::control::nan_in_bf16",
        nan_in_fc,
        fail(FINITE, &["fc.weight", "NaN"]),
    ),
    FolderArm {
        dtype: Dtype::F16,
        ..arm(
            "folder::control::f16_overflowed_to_inf",
            inf_in_f16,
            fail(FINITE, &["fc.weight F16", "inf"]),
        )
    },
    arm(
        "folder::control::target_layer_ids_absent",
        ids_absent,
        fail(
            GEOMETRY,
            &[
                "dflash_config.target_layer_ids",
                "required",
                "never guesses",
                "; fix: add target_layer_ids to dflash_config, the target's layer ids the draft was trained with",
            ],
        ),
    ),
    arm(
        "folder::control::target_layer_ids_unsorted",
        ids_unsorted,
        Owed::Refused {
            check: GEOMETRY,
            outcome: Outcome::Fail,
            mentions: &["target_layer_ids"],
            // fc's width is taps x hidden whatever their order; nothing else reads them.
            also: &[],
        },
    ),
    arm(
        "folder::control::mask_token_id_absent",
        mask_absent,
        fail(
            GEOMETRY,
            &[
                "mask_token_id",
                "required",
                "; fix: add mask_token_id to dflash_config, the mask id the draft was trained with",
            ],
        ),
    ),
    arm(
        // The config's own eos ids (a list, as Qwen3's generation config writes them) hold the mask.
        "folder::control::mask_is_the_drafts_own_eos",
        |d| config(d, |c| c["eos_token_id"] = json!([2, 999])),
        fail(
            GEOMETRY,
            &["mask_token_id 999 is the draft's own eos token (eos_token_id in config.json)"],
        ),
    ),
    arm(
        "folder::control::block_size_one",
        |d| config(d, |c| c["block_size"] = json!(1)),
        fail(GEOMETRY, &["block_size", "is 1"]),
    ),
    arm(
        "folder::control::block_size_above_64",
        |d| config(d, |c| c["block_size"] = json!(128)),
        Owed::Refused {
            check: GEOMETRY,
            outcome: Outcome::Undecided,
            mentions: &["block_size", "128", "above 64"],
            also: &[],
        },
    ),
    arm(
        "folder::control::layer_types_wrong_length",
        |d| {
            config(d, |c| {
                c["layer_types"] = json!(["full_attention", "full_attention", "full_attention"])
            })
        },
        fail(GEOMETRY, &["layer_types", "3"]),
    ),
    arm(
        "folder::control::sliding_layer_without_window",
        |d| {
            config(d, |c| {
                c["layer_types"] = json!(["sliding_attention", "full_attention"]);
                c["sliding_window"] = Value::Null;
            })
        },
        fail(
            GEOMETRY,
            &["is \"sliding_attention\" but sliding_window is"],
        ),
    ),
    arm(
        "folder::control::block_size_in_two_homes_differs",
        |d| config(d, |c| c["dflash_config"]["block_size"] = json!(16)),
        fail(GEOMETRY, &["block_size", "dflash_config"]),
    ),
    arm(
        "folder::control::quantization_config_named",
        |d| {
            config(d, |c| {
                c["quantization_config"] = json!({"quant_method": "compressed-tensors"})
            })
        },
        Owed::Refused {
            check: COMPLETE,
            outcome: Outcome::Undecided,
            mentions: &["compressed-tensors", "quantization_config"],
            also: &[EXPLAINED, FINITE, SCALES],
        },
    ),
    arm(
        "folder::pass::pack_quantized_w4_group",
        |d| packed(d, PackOptions::default()),
        Owed::Pass,
    ),
    arm(
        "folder::pass::pack_quantized_census_names_the_scheme",
        |d| packed(d, ASYMMETRIC),
        Owed::CensusSaying {
            tensor: "fc.weight_packed",
            mentions: &[
                "I32 [256, 96], compressed-tensors pack-quantized W4A16 group 32, asymmetric",
            ],
        },
    ),
    arm(
        "folder::pass::pack_quantized_w8_channel",
        |d| {
            packed(
                d,
                PackOptions {
                    bits: 8,
                    group: None,
                    ..PackOptions::default()
                },
            )
        },
        Owed::Pass,
    ),
    arm(
        "folder::pass::pack_quantized_w4_asymmetric",
        |d| packed(d, ASYMMETRIC),
        Owed::Pass,
    ),
    arm(
        "folder::pass::pack_quantized_fc_ignored_by_pattern",
        |d| packed_ignoring(d, FC_DENSE, |_| json!(["re:.*fc$"])),
        Owed::Pass,
    ),
    // compressed-tensors matches ignore against the checkpoint's module names: fc stays dense.
    arm(
        "folder::pass::pack_quantized_fc_ignored_by_name",
        |d| packed(d, FC_DENSE),
        Owed::Pass,
    ),
    // A fused layer's shards left dense by their checkpoint names.
    arm(
        "folder::pass::pack_quantized_qkv_ignored_by_name",
        |d| packed(d, QKV_DENSE),
        Owed::Pass,
    ),
    // A name in vLLM's spelling of the draft's first layer (numbered after the target's last):
    // no module of the checkpoint.
    arm(
        "folder::pass::pack_quantized_ignore_numbered_as_vllm",
        |d| {
            packed_ignoring(d, PackOptions::default(), |c| {
                let t = c["num_target_layers"].as_u64().expect("num_target_layers");
                json!([format!("model.layers.{t}.mlp.down_proj")])
            })
        },
        Owed::Pass,
    ),
    // Targets naming the layers by their checkpoint paths (fc, which none names, left dense): no
    // engine that names them otherwise finds a target for them.
    arm(
        "folder::pass::pack_quantized_targets_by_checkpoint_path",
        |d| {
            packed_ignoring(d, FC_DENSE, |_| json!([]));
            config(d, |c| {
                c["quantization_config"]["config_groups"]["group_0"]["targets"] =
                    json!(["re:layers\\..*"])
            })
        },
        Owed::Pass,
    ),
    // An entry in vLLM's spelling names no module of the checkpoint: fc is quantized.
    arm(
        "folder::pass::pack_quantized_ignore_in_vllms_names",
        |d| packed_ignoring(d, PackOptions::default(), |_| json!(["model.fc"])),
        Owed::Pass,
    ),
    arm(
        "folder::pass::pack_quantized_hostile_ignore_list",
        |d| {
            packed(d, PackOptions::default());
            config(d, |c| {
                let mut ignore: Vec<String> = (0..100_000).map(|i| format!("m{i}")).collect();
                ignore.push(format!("re:(a|aa)+(a+)+${}", "(x?)".repeat(64)));
                c["quantization_config"]["ignore"] = json!(ignore);
            })
        },
        Owed::Pass,
    ),
    // A config that states the most layers the gate reads, over a file of two, with the most
    // patterns it compiles: the loaders' passes over the config's layers skip the layers the file
    // does not hold (bounded by the file, not the config).
    arm(
        "folder::control::pack_quantized_config_layers_beyond_the_file",
        |d| {
            packed_ignoring(d, PackOptions::default(), |_| {
                json!((0..255).map(|i| format!("re:m{i}")).collect::<Vec<_>>())
            });
            config(d, |c| c["num_hidden_layers"] = json!(1024))
        },
        fail(COMPLETE, &["layers.2.self_attn.q_proj.weight is missing"]),
    ),
    arm(
        "folder::control::pack_quantized_group_not_dividing_k",
        |d| {
            packed(d, PackOptions::default());
            config(d, |c| {
                c["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] =
                    json!(48)
            })
        },
        fail(COMPLETE, &["group size 48 does not divide", "K = 256"]),
    ),
    arm(
        "folder::control::pack_quantized_packed_width_one_short",
        |d| {
            packed(d, PackOptions::default());
            weights(d, |t| {
                let p = named(t, "layers.0.mlp.down_proj.weight_packed");
                let rows = p.2[0] as usize;
                p.2[1] -= 1;
                p.3.truncate(p.3.len() - rows * 4);
            })
        },
        fail(
            COMPLETE,
            &["layers.0.mlp.down_proj.weight_packed is I32", "packs into"],
        ),
    ),
    arm(
        "folder::control::pack_quantized_zero_point_missing",
        |d| {
            packed(d, ASYMMETRIC);
            weights(d, |t| t.retain(|t| t.0 != "fc.weight_zero_point"))
        },
        fail(COMPLETE, &["fc.weight_zero_point is missing", "asymmetric"]),
    ),
    arm(
        "folder::control::pack_quantized_zero_point_when_symmetric",
        |d| {
            packed(d, ASYMMETRIC);
            config(d, |c| {
                c["quantization_config"]["config_groups"]["group_0"]["weights"]["symmetric"] =
                    json!(true)
            })
        },
        fail(
            COMPLETE,
            &["weight_zero_point is there, but the scheme is symmetric"],
        ),
    ),
    arm(
        "folder::control::pack_quantized_weight_shape_disagrees",
        |d| {
            packed(d, PackOptions::default());
            weights(d, |t| {
                let s = named(t, "fc.weight_shape");
                let k = i64::from_le_bytes(s.3[8..16].try_into().unwrap());
                s.3[8..16].copy_from_slice(&(2 * k).to_le_bytes());
            })
        },
        fail(COMPLETE, &["fc.weight_shape holds", "packs into"]),
    ),
    arm(
        "folder::control::pack_quantized_weight_shape_of_2_63",
        |d| {
            packed(d, PackOptions::default());
            weights(d, |t| {
                named(t, "fc.weight_shape").3[..8].copy_from_slice(&i64::MAX.to_le_bytes())
            })
        },
        fail(
            COMPLETE,
            &["fc.weight_shape holds 9223372036854775807, not a dimension"],
        ),
    ),
    arm(
        "folder::control::pack_quantized_but_ignored",
        |d| packed_ignoring(d, PackOptions::default(), |_| json!(["re:.*fc$"])),
        fail(
            COMPLETE,
            &[
                "fc.weight_packed: fc is stored quantized",
                "ignore lists it (re:.*fc$)",
            ],
        ),
    ),
    arm(
        "folder::control::pack_quantized_dense_but_quantized_by_config",
        |d| packed_ignoring(d, FC_DENSE, |_| json!([])),
        fail(
            COMPLETE,
            &[
                "fc.weight is stored dense (BF16)",
                "quantizes fc (targets Linear)",
            ],
        ),
    ),
    arm(
        "folder::control::pack_quantized_norm",
        |d| {
            packed(d, PackOptions::default());
            weights(d, |t| {
                named(t, "norm.weight").0 = "norm.weight_packed".into()
            })
        },
        fail(
            COMPLETE,
            &[
                "norm.weight_packed: norm is stored quantized",
                "never quantized",
            ],
        ),
    ),
    arm(
        "folder::control::pack_quantized_unknown_format",
        |d| {
            packed(d, PackOptions::default());
            config(d, |c| {
                c["quantization_config"]["format"] = json!("marlin-24")
            })
        },
        Owed::Refused {
            check: COMPLETE,
            outcome: Outcome::Undecided,
            mentions: &["format \"marlin-24\"", "compressed-tensors"],
            also: &[EXPLAINED, FINITE, SCALES],
        },
    ),
    arm(
        "folder::control::pack_quantized_too_many_patterns",
        |d| {
            packed(d, PackOptions::default());
            config(d, |c| {
                let ignore: Vec<String> = (0..300).map(|i| format!("re:m{i}")).collect();
                c["quantization_config"]["ignore"] = json!(ignore);
            })
        },
        Owed::Refused {
            check: COMPLETE,
            outcome: Outcome::Undecided,
            mentions: &["more than the 256 patterns"],
            also: &[EXPLAINED, FINITE, SCALES],
        },
    ),
    arm(
        "folder::control::pack_quantized_scale_zero",
        |d| scale_set(d, "layers.0.self_attn.q_proj.weight_scale", 5, 0.0),
        fail(
            SCALES,
            &["layers.0.self_attn.q_proj.weight_scale[5] is 0", "> 0"],
        ),
    ),
    arm(
        "folder::control::pack_quantized_scale_negative",
        |d| scale_set(d, "layers.1.mlp.up_proj.weight_scale", 0, -0.5),
        fail(SCALES, &["layers.1.mlp.up_proj.weight_scale[0] is -0.5"]),
    ),
    arm(
        "folder::control::pack_quantized_scale_nan",
        |d| scale_set(d, "fc.weight_scale", 3, f32::NAN),
        fail(SCALES, &["fc.weight_scale[3] is NaN", "finite"]),
    ),
    // The same copy alone, without `quantization`, names no scheme: it is not read as MLX's.
    arm(
        "folder::control::quantization_config_without_quant_method",
        |d| {
            config(d, |c| {
                c["quantization_config"] = json!({"group_size": 64, "bits": 4, "mode": "affine"})
            })
        },
        Owed::Refused {
            check: COMPLETE,
            outcome: Outcome::Undecided,
            mentions: &["an unnamed scheme", "no quant_method"],
            also: &[EXPLAINED, FINITE, SCALES],
        },
    ),
    arm(
        "folder::control::not_a_draft_config",
        |d| config(d, |c| c["architectures"] = json!(["Qwen3ForCausalLM"])),
        fail(
            CheckId::CONFIG_IS_DFLASH,
            &["not a DFlash draft", "Qwen3ForCausalLM"],
        ),
    ),
    // The speculators format (spec 18.1): the same draft as vLLM's training writes it.
    arm("folder::pass::speculators_dflash", speculators, Owed::Pass),
    FolderArm {
        base: Base::Dflash2,
        ..arm("folder::pass::speculators_dflash2", speculators, Owed::Pass)
    },
    arm(
        "folder::pass::speculators_reduced_vocabulary",
        reduced_vocabulary,
        Owed::Pass,
    ),
    arm(
        "folder::control::speculators_d2t_not_increasing",
        |d| {
            reduced_vocabulary(d);
            // Draft token 10 maps to target id 18, draft token 9's.
            weights(d, |t| {
                named(t, "d2t").3[80..88].copy_from_slice(&8i64.to_le_bytes())
            })
        },
        fail(COMPLETE, &["d2t[10]", "target id 18", "strictly increase"]),
    ),
    arm(
        "folder::control::speculators_t2d_count_wrong",
        |d| {
            reduced_vocabulary(d);
            weights(d, |t| named(t, "t2d").3[1] = 1)
        },
        fail(COMPLETE, &["t2d[1]", "501 true", "draft_vocab_size is 500"]),
    ),
    arm(
        "folder::control::speculators_draft_vocab_above_the_verifiers",
        |d| {
            speculators(d);
            config(d, |c| c["draft_vocab_size"] = json!(1001))
        },
        fail(GEOMETRY, &["draft_vocab_size", "1001", "above the verifier's"]),
    ),
    FolderArm {
        base: Base::Dflash2,
        ..arm(
            "folder::control::speculators_dflash2_draft_vocab_reduced",
            |d| {
                speculators(d);
                config(d, |c| c["draft_vocab_size"] = json!(500))
            },
            fail(GEOMETRY, &["draft_vocab_size", "500", "whole vocabulary"]),
        )
    },
    arm(
        "folder::control::speculators_raw_ids",
        |d| {
            speculators(d);
            config(d, |c| c["aux_hidden_state_layer_ids"] = json!([0, 3, 5]))
        },
        fail(GEOMETRY, &["aux_hidden_state_layer_ids", "[0,3,5]", "plus one"]),
    ),
    arm(
        "folder::control::speculators_mask_null",
        |d| {
            speculators(d);
            config(d, |c| c["mask_token_id"] = Value::Null)
        },
        fail(GEOMETRY, &["mask_token_id", "is null"]),
    ),
    arm(
        "folder::control::speculators_mask_absent",
        |d| {
            speculators(d);
            config(d, |c| {
                c.as_object_mut().unwrap().remove("mask_token_id");
            })
        },
        fail(GEOMETRY, &["mask_token_id", "KeyError"]),
    ),
    arm(
        "folder::control::speculators_verifier_name_missing",
        |d| {
            speculators(d);
            config(d, |c| {
                c["speculators_config"]["verifier"]
                    .as_object_mut()
                    .unwrap()
                    .remove("name_or_path");
            })
        },
        fail(
            GEOMETRY,
            &["speculators_config.verifier.name_or_path", "required"],
        ),
    ),
    FolderArm {
        base: Base::Dflash2,
        ..arm(
            "folder::control::speculators_dflash2_tokens_off_by_one",
            |d| {
                speculators(d);
                config(d, |c| {
                    let block = c["block_size"].clone();
                    c["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = block;
                })
            },
            fail(GEOMETRY, &["speculative_tokens", "block_size", "minus one"]),
        )
    },
    FolderArm {
        shards: 3,
        ..arm(
            "folder::control::index_names_a_missing_shard",
            |d| {
                std::fs::remove_file(d.join("model-00002-of-00003.safetensors")).unwrap();
                d.to_owned()
            },
            fail(PARSES, &["model-00002-of-00003.safetensors"]),
        )
    },
    FolderArm {
        shards: 3,
        ..arm(
            "folder::control::index_does_not_list_a_tensor",
            unlisted_tensor,
            fail(PARSES, &["fc.weight", "not in the index"]),
        )
    },
    FolderArm {
        indexed: true,
        ..arm(
            "folder::control::mlx_index_names_another_file",
            |d| {
                index_edit(d, |m| {
                    m["fc.weight"] = json!("model-00002-of-00002.safetensors")
                })
            },
            fail(
                PARSES,
                &[
                    "holds both model.safetensors and model.safetensors.index.json",
                    "names model-00002-of-00002.safetensors",
                ],
            ),
        )
    },
    FolderArm {
        indexed: true,
        ..arm(
            "folder::control::mlx_index_lists_a_tensor_the_file_lacks",
            |d| {
                index_edit(d, |m| {
                    m["layers.0.extra.weight"] = json!("model.safetensors")
                })
            },
            fail(
                PARSES,
                &[
                    "layers.0.extra.weight",
                    "model.safetensors",
                    "no such tensor",
                ],
            ),
        )
    },
    FolderArm {
        indexed: true,
        ..arm(
            "folder::control::mlx_index_omits_a_tensor_of_the_file",
            unlisted_tensor,
            fail(PARSES, &["fc.weight", "not in the index"]),
        )
    },
    arm(
        "folder::control::shard_no_index_names",
        |d| {
            std::fs::copy(
                d.join("model.safetensors"),
                d.join("model-extra.safetensors"),
            )
            .unwrap();
            d.to_owned()
        },
        fail(PARSES, &["model-extra.safetensors", "globs"]),
    ),
    arm(
        "folder::control::q4nx_and_safetensors_both",
        |d| {
            std::fs::write(d.join("model.q4nx"), b"").unwrap();
            d.to_owned()
        },
        Owed::Error(&["model.q4nx", "model.safetensors", "does not pick"]),
    ),
    arm(
        "folder::control::cache_link_leaves_the_repository",
        cache_link_out,
        Owed::Error(&["config.json", "leads out of the package"]),
    ),
    // A link that leaves the repository is refused at the step that leaves, whichever it is; a
    // cache that is itself reached through a link (moved to another disk) is read.
    arm(
        "folder::pass::cache_reached_through_a_linked_cache",
        cache_through_a_link,
        Owed::Pass,
    ),
    arm(
        "folder::control::cache_blobs_leave_the_repository",
        |d| cache_step_out(d, "blobs"),
        Owed::Error(&["/blobs: is a symbolic link to", "leads out of the package"]),
    ),
    arm(
        "folder::control::cache_snapshots_leave_the_repository",
        |d| cache_step_out(d, "snapshots"),
        Owed::Error(&["/snapshots: is a symbolic link to", "leads out of the package"]),
    ),
    arm(
        "folder::control::cache_snapshot_leaves_the_repository",
        |d| cache_step_out(d, &format!("snapshots/{COMMIT}")),
        Owed::Error(&[
            "/snapshots/4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a: is a symbolic link to",
            "leads out of the package",
        ]),
    ),
    arm(
        "folder::control::cache_refs_leave_the_repository",
        |d| cache_step_out(d, "refs"),
        Owed::Error(&["/refs: is a symbolic link to", "leads out of the package"]),
    ),
    arm(
        "folder::control::cache_ref_leaves_the_repository",
        |d| cache_step_out(d, "refs/main"),
        Owed::Error(&["/refs/main: is a symbolic link to", "leads out of the package"]),
    ),
    // A download that stopped before the weights: the folder's checks name what is missing, and the
    // repository's unfinished blob says the download is incomplete; an unfinished blob of another
    // file beside a whole snapshot changes nothing.
    arm(
        "folder::control::cache_download_interrupted",
        |d| cache_interrupted(d, "model.safetensors"),
        fail(
            PARSES,
            &[
                "neither model.safetensors nor model.safetensors.index.json is there",
                "the download is incomplete",
                ".incomplete)",
                "; fix: `huggingface-cli download z-lab/synthetic-dflash` resumes it",
            ],
        ),
    ),
    FolderArm {
        shards: 3,
        ..arm(
            "folder::control::cache_shard_download_interrupted",
            |d| cache_interrupted(d, "model-00002-of-00003.safetensors"),
            fail(
                PARSES,
                &[
                    "model-00002-of-00003.safetensors",
                    "the download is incomplete",
                ],
            ),
        )
    },
    arm(
        "folder::pass::cache_with_another_files_download_unfinished",
        |d| {
            let repo = cache_repository(d);
            std::fs::write(repo.join("blobs").join(format!("{:064x}.incomplete", 99)), b"").unwrap();
            repo
        },
        Owed::Pass,
    ),
    arm(
        "folder::control::weights_missing_beside_a_transformers_config",
        |d| {
            std::fs::remove_file(d.join("model.safetensors")).unwrap();
            d.to_owned()
        },
        fail(
            PARSES,
            &["neither model.safetensors nor model.safetensors.index.json is there"],
        ),
    ),
    // A folder holding the draft in a subdirectory (a models folder) is no draft of its own: it is
    // pointed at --all, where it was "no config.json".
    arm(
        "folder::control::models_folder_of_a_draft",
        |d| {
            let models = d.parent().unwrap().join("models");
            std::fs::create_dir(&models).unwrap();
            std::fs::rename(d, models.join("sub")).unwrap();
            models
        },
        Owed::Error(&["holds a draft directory (sub)", "did you mean --all?"]),
    ),
    arm(
        "folder::control::cache_revision_not_held",
        |d| {
            let repo = cache_repository(d);
            repo.join("?revision=v9")
        },
        Owed::Error(&["no snapshot for revision v9", "downloads nothing"]),
    ),
    mask_arm(
        "folder::pass::mask_embedding",
        |d| mask_embedding(d, |_, _| {}),
        Owed::PassSaying {
            check: MASK,
            mentions: &[
                "mask_embedding.pt holds mask_token_id",
                "read without executing",
            ],
        },
    ),
    mask_arm(
        "folder::control::mask_embedding_wrong_id",
        |d| mask_embedding(d, |id, _| *id += 1),
        fail(
            MASK,
            &[
                "mask_embedding.pt holds mask_token_id",
                "where config.json states",
                "raise",
            ],
        ),
    ),
    mask_arm(
        "folder::control::mask_embedding_wrong_length",
        |d| mask_embedding(d, |_, v| v.push(0.5)),
        fail(
            MASK,
            &[
                "mask_embedding.pt's embedding is F32 [",
                "not [hidden_size]",
            ],
        ),
    ),
    mask_arm(
        "folder::control::mask_embedding_nan",
        |d| mask_embedding(d, |_, v| v[3] = f32::NAN),
        fail(
            MASK,
            &["mask_embedding.pt's embedding is not finite: element 3 is NaN"],
        ),
    ),
    mask_arm(
        "folder::control::mask_embedding_malicious_global",
        |d| mask_embedding_bytes(d, system_pt(&d.join("executed"))),
        fail(
            MASK,
            &[
                "mask_embedding.pt",
                "mask_embedding/data.pkl",
                "the global posix.system",
                "refused unread",
            ],
        ),
    ),
    mask_arm(
        "folder::control::mask_embedding_legacy",
        |d| mask_embedding_bytes(d, torch::legacy_pt()),
        fail(MASK, &["mask_embedding.pt", "a legacy torch file"]),
    ),
    mask_arm(
        "folder::control::mask_embedding_compressed",
        |d| {
            let (id, values) = mask_of(d);
            let pkl = torch::mask_embedding_pickle(id, values.len(), torch::Payload::Tensor, "");
            let bytes = torch::archive("mask_embedding", &torch::records(&pkl, &values), true);
            mask_embedding_bytes(d, bytes)
        },
        fail(
            MASK,
            &[
                "mask_embedding.pt",
                "mask_embedding/data.pkl is compressed (method 8)",
            ],
        ),
    ),
];

/// The config's mask id and a faithful embedding of its hidden size.
fn mask_of(dir: &Path) -> (i64, Vec<f32>) {
    let c: Value =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    let id = c["dflash_config"]["mask_token_id"].as_i64().unwrap();
    let hidden = c["hidden_size"].as_u64().unwrap() as usize;
    (
        id,
        (0..hidden)
            .map(|i| (i as f32 * 0.37).sin() * 0.02)
            .collect(),
    )
}

/// `mask_embedding.pt` as torch.save writes it, of the config's id and hidden size bent by `edit`.
fn mask_embedding(dir: &Path, edit: fn(&mut i64, &mut Vec<f32>)) -> PathBuf {
    let (mut id, mut values) = mask_of(dir);
    edit(&mut id, &mut values);
    mask_embedding_bytes(dir, torch::mask_embedding_pt(id, &values))
}

fn mask_embedding_bytes(dir: &Path, bytes: Vec<u8>) -> PathBuf {
    std::fs::write(dir.join("mask_embedding.pt"), bytes).unwrap();
    dir.to_owned()
}

/// An archive whose pickle, if executed, would run `touch <path>` through `posix.system`.
fn system_pt(path: &Path) -> Vec<u8> {
    let pkl = torch::mask_embedding_pickle(7, 0, torch::Payload::System, &path.to_string_lossy());
    torch::archive("mask_embedding", &torch::records(&pkl, &[]), false)
}

/// The gate meets a pickle that would create a file if it were executed: it refuses it naming the
/// global, and the file is not there afterwards (nor was it before).
fn executes_nothing() -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = root.path().join("draft");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut package = Package::generate(&Base::Small.geometry(), Encoding::default(), SEED);
    write_source(&mut package, &dir, SourceOptions::default(), SEED).map_err(|e| e.to_string())?;
    let witness = root.path().join("executed");
    mask_embedding_bytes(&dir, system_pt(&witness));
    let report = gate(&dir, &Options::default()).map_err(|e| e.to_string())?;
    let check = report
        .checks()
        .iter()
        .find(|c| c.id() == MASK)
        .ok_or("no scalars.mask_token_id")?;
    if check.outcome() != Outcome::Fail || !check.message().contains("posix.system") {
        return Err(format!(
            "not refused naming posix.system: {}",
            check.message()
        ));
    }
    if witness.exists() {
        return Err(format!("{} exists: the pickle ran", witness.display()));
    }
    Ok(())
}

/// Each arm, as a named trial.
pub fn trials() -> Vec<(String, Trial)> {
    all()
        .map(|a| {
            (
                format!("arms::{}", a.name),
                Box::new(move || run(a)) as Trial,
            )
        })
        .chain([(
            "arms::folder::control::mask_embedding_executes_nothing".to_owned(),
            Box::new(executes_nothing) as Trial,
        )])
        .collect()
}

fn run(arm: &FolderArm) -> Result<(), String> {
    let (result, quantized) = gate_arm(arm)?;
    judge_counted(
        Form::Safetensors,
        arm.owed,
        result,
        arm.checks + usize::from(quantized),
    )
}

/// The report the gate gives the folder arm `name` (as its trial gates it), for trials that ask
/// more of the same draft.
pub(crate) fn report_of(name: &str) -> Result<Report, String> {
    let arm = all()
        .find(|a| a.name == name)
        .ok_or_else(|| format!("no folder arm {name}"))?;
    gate_arm(arm)?
        .0
        .map_err(|e| format!("{name}: no report: {e}"))
}

/// Writes the folder arm `name`'s draft into `dir` (created), as its trial does: the path its trial
/// gates (the folder, or a cache path beside it that leads to it). For trials that hand the same
/// draft to something else, an engine's own loader.
pub fn write_arm(name: &str, dir: &Path) -> Result<PathBuf, String> {
    let arm = all()
        .find(|a| a.name == name)
        .ok_or_else(|| format!("no folder arm {name}"))?;
    write_folder(arm, dir)
}

fn write_folder(arm: &FolderArm, dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let mut package = Package::generate(&arm.base.geometry(), Encoding::default(), SEED);
    let options = SourceOptions {
        dtype: arm.dtype,
        shards: arm.shards,
        index_one_file: arm.indexed,
        ..SourceOptions::default()
    };
    write_source(&mut package, dir, options, SEED).map_err(|e| e.to_string())?;
    Ok((arm.bend)(dir))
}

/// Writes the arm's folder and gates it: the result, and whether its config states a quantization.
fn gate_arm(arm: &FolderArm) -> Result<(Result<Report, dflash_gate::PackageError>, bool), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = root.path().join("draft");
    let path = write_folder(arm, &dir)?;
    // A revision rides on the path as `?revision=REV` (an arm is a path and nothing else).
    let (path, options) = match path.to_str().and_then(|p| p.split_once("?revision=")) {
        Some((p, rev)) => (PathBuf::from(p), Options::default().with_revision(rev)),
        None => (path, Options::default()),
    };
    let result = match path.to_str().and_then(|p| p.strip_prefix("id:")) {
        Some(rest) => {
            let (cache, id) = rest.split_once('|').ok_or("an id arm names its cache")?;
            let snapshot = dflash_gate::__private::hub::resolve(
                Path::new(id),
                options.revision.as_deref(),
                Some(Path::new(cache)),
            )
            .map_err(|e| e.to_string())?;
            gate(&snapshot, &options)
        }
        None => gate(&path, &options),
    };
    // A draft whose config states a quantization counts quant.scales too, whatever the damage.
    let quantized = std::fs::read(dir.join("config.json"))
        .ok()
        .and_then(|c| serde_json::from_slice::<Value>(&c).ok())
        .is_some_and(|c| c.get("quantization_config").is_some() || c.get("quantization").is_some())
        || dir.join("hf_quant_config.json").exists();
    Ok((result, quantized))
}

/// What the gate said of a draft in `form`, against what it owes it: six checks whatever the damage
/// (a GGUF's seven: its mask's type is `config.mask_token`'s).
pub(crate) fn judge(
    form: Form,
    owed: Owed,
    result: Result<Report, dflash_gate::PackageError>,
) -> Result<(), String> {
    let count = if form == Form::Gguf { 7 } else { 6 };
    judge_counted(form, owed, result, count)
}

/// [`judge`] for a report of `count` checks (a form's six and the steps its options add).
pub(crate) fn judge_counted(
    form: Form,
    owed: Owed,
    result: Result<Report, dflash_gate::PackageError>,
    count: usize,
) -> Result<(), String> {
    let report = match (owed, result) {
        (Owed::Error(mentions), Err(e)) => {
            let text = e.to_string();
            return match mentions.iter().find(|m| !text.contains(**m)) {
                None => Ok(()),
                Some(m) => Err(format!("the error does not name {m:?}: {text}")),
            };
        }
        (Owed::Error(_), Ok(r)) => {
            return Err(format!(
                "a report where an error was owed:\n{}",
                r.to_text(false)
            ))
        }
        (_, Err(e)) => return Err(format!("no report: {e}")),
        (_, Ok(r)) => r,
    };
    if report.census().form != form {
        return Err(format!("census.form is {:?}", report.census().form));
    }
    crate::loaders::stricter_than_every_engine(&report)?;
    let text = report.to_text(false);
    match owed {
        Owed::Pass => {
            if report.verdict() != Outcome::Pass {
                return Err(format!("not a PASS:\n{text}"));
            }
            if let Some(folder) = &report.against().draft_in {
                if !text.contains("draft        ") {
                    return Err(format!(
                        "draft_in is {folder}, and no header line says so:\n{text}"
                    ));
                }
            }
            if report.checks().len() != count {
                return Err(format!(
                    "{} checks, {count} owed:\n{text}",
                    report.checks().len()
                ));
            }
            Ok(())
        }
        Owed::CensusSaying { tensor, mentions } => {
            judge_counted(form, Owed::Pass, Ok(report.clone()), count)?;
            let said = report
                .census()
                .tensors
                .iter()
                .find(|t| t.name == tensor)
                .map(|t| t.form_text.clone())
                .ok_or_else(|| format!("no {tensor} in the census:\n{text}"))?;
            match mentions.iter().find(|m| !said.contains(**m)) {
                None => Ok(()),
                Some(m) => Err(format!("the census's {tensor} does not say {m:?}: {said}")),
            }
        }
        Owed::PassFoundIn { folder } => {
            judge_counted(form, Owed::Pass, Ok(report.clone()), count)?;
            let json = report.to_json();
            crate::schema::validate(&json)?;
            let line = format!("draft        {folder}/ (the repository keeps its draft there");
            if report.against().draft_in.as_deref() != Some(folder)
                || json["draft_in"] != folder
                || !text.lines().any(|l| l.starts_with(&line))
                || report.package().ends_with(folder)
            {
                return Err(format!(
                    "the report does not say the draft is in {folder}/ of the repository:\n{text}"
                ));
            }
            Ok(())
        }
        Owed::PassSaying { check, mentions } => {
            judge_counted(form, Owed::Pass, Ok(report.clone()), count)?;
            let said = report
                .checks()
                .iter()
                .find(|c| c.id() == check)
                .map(|c| c.message().to_owned())
                .ok_or_else(|| format!("no {check}:\n{text}"))?;
            match mentions.iter().find(|m| !said.contains(**m)) {
                None => Ok(()),
                Some(m) => Err(format!("{check} does not say {m:?}: {said}")),
            }
        }
        Owed::Refused {
            check,
            outcome,
            mentions,
            also,
        } => {
            let found = report
                .checks()
                .iter()
                .find(|c| c.id() == check)
                .ok_or_else(|| format!("no {check}:\n{text}"))?;
            if found.outcome() != outcome {
                return Err(format!(
                    "{check} is {}, {outcome} owed:\n{text}",
                    found.outcome()
                ));
            }
            if let Some(m) = mentions.iter().find(|m| !found.message().contains(**m)) {
                return Err(format!("{check} does not name {m:?}:\n{text}"));
            }
            // The count never moves with the damage: a check that could not run is listed, blocked.
            if report.checks().len() != count {
                return Err(format!(
                    "{} checks, {count} owed:\n{text}",
                    report.checks().len()
                ));
            }
            for c in report.checks() {
                let fine = c.id() == check
                    || c.outcome() == Outcome::Pass
                    || c.blocked_by() == Some(check)
                    || also.contains(&c.id());
                if !fine {
                    return Err(format!(
                        "{} changed too ({}): a broken control\n{text}",
                        c.id(),
                        c.outcome()
                    ));
                }
            }
            Ok(())
        }
        Owed::Error(_) => unreachable!("handled above"),
    }
}

/// config.json, edited in place.
pub(crate) fn config(dir: &Path, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let path = dir.join("config.json");
    let mut c: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut c);
    std::fs::write(&path, serde_json::to_vec_pretty(&c).unwrap()).unwrap();
    dir.to_owned()
}

/// One safetensors file's tensors, in file order.
pub(crate) type Tensors = Vec<Tensor>;

/// `model.safetensors` (or `file`), rewritten after `edit`.
fn weights_in(dir: &Path, file: &str, edit: impl FnOnce(&mut Tensors)) -> PathBuf {
    let path = dir.join(file);
    let mut tensors = read_tensors(&path);
    edit(&mut tensors);
    write_tensors(&path, &tensors);
    dir.to_owned()
}

/// The asymmetric W4A16 scheme (zero points stored).
const ASYMMETRIC: PackOptions = PackOptions {
    bits: 4,
    group: Some(32),
    symmetric: false,
    ignore: &[],
};

/// W4A16 with fc left dense and listed in `ignore`.
const FC_DENSE: PackOptions = PackOptions {
    bits: 4,
    group: Some(32),
    symmetric: true,
    ignore: &["fc"],
};

/// W4A16 with the first layer's q, k and v left dense and listed in `ignore`.
const QKV_DENSE: PackOptions = PackOptions {
    bits: 4,
    group: Some(32),
    symmetric: true,
    ignore: &[
        "layers.0.self_attn.q_proj",
        "layers.0.self_attn.k_proj",
        "layers.0.self_attn.v_proj",
    ],
};

/// The W4A16 folder with one scale (BF16) of `tensor` set to `value`.
fn scale_set(dir: &Path, tensor: &str, index: usize, value: f32) -> PathBuf {
    packed(dir, PackOptions::default());
    weights(dir, |t| {
        let bits = half::bf16::from_f32(value).to_bits().to_le_bytes();
        named(t, tensor).3[2 * index..2 * index + 2].copy_from_slice(&bits)
    })
}

/// The folder quantized by compressed-tensors' pack-quantized format.
fn packed(dir: &Path, options: PackOptions) -> PathBuf {
    pack_quantize(dir, options);
    dir.to_owned()
}

/// [`packed`], its config's `ignore` then set to what `ignore` makes of the config.
fn packed_ignoring(dir: &Path, options: PackOptions, ignore: impl Fn(&Value) -> Value) -> PathBuf {
    packed(dir, options);
    config(dir, |c| c["quantization_config"]["ignore"] = ignore(c))
}

pub(crate) fn weights(dir: &Path, edit: impl FnOnce(&mut Tensors)) -> PathBuf {
    weights_in(dir, "model.safetensors", edit)
}

pub(crate) fn named<'t>(t: &'t mut Tensors, name: &str) -> &'t mut Tensor {
    t.iter_mut()
        .find(|t| t.0 == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

/// A zero BF16 tensor of `shape`.
pub(crate) fn zeros(name: &str, shape: Vec<u64>) -> Tensor {
    let bytes = shape.iter().product::<u64>() as usize * 2;
    (name.into(), "BF16".into(), shape, vec![0; bytes])
}

/// Nemotron 3.5's shape: its own embedding table and head, stated, and the taps in EAGLE's
/// convention beside z-lab's.
fn nemotron_like(dir: &Path) -> PathBuf {
    config(dir, |c| {
        c["has_embed_tokens"] = json!(true);
        c["has_own_lm_head"] = json!(true);
        c["eagle_aux_hidden_state_layer_ids"] = json!([2, 4, 6]);
    });
    weights(dir, |t| {
        t.push(zeros("embed_tokens.weight", vec![1000, 256]));
        t.push(zeros("lm_head.weight", vec![1000, 256]));
    })
}

/// Whether a z-lab config's top-level `key` is a DFlash field (the speculators format keeps those at
/// its top level, outside `transformer_layer_config`) rather than the layers' geometry.
fn dflash_field(key: &str) -> bool {
    key.starts_with("conv_")
        || key.starts_with("selector_")
        || key.ends_with("embedding_scale")
        || matches!(
            key,
            "block_size" | "num_target_layers" | "output_multiplier" | "final_logit_softcapping"
        )
}

/// The folder's config rewritten as the speculators library writes one (vLLM's training output): no
/// `model_type`, `speculators_model_type` naming the family, the geometry in
/// `transformer_layer_config`, the taps as `aux_hidden_state_layer_ids` (each id plus one), the DFlash
/// fields at the top level, the verifier and the proposal under `speculators_config`.
pub(crate) fn speculators(dir: &Path) -> PathBuf {
    config(dir, |c| {
        let mut zlab = std::mem::take(c.as_object_mut().unwrap());
        let second = zlab.get("architectures") == Some(&json!(["DFlash2DraftModel"]));
        zlab.remove("architectures");
        let mut top = serde_json::Map::new();
        if let Some(Value::Object(nested)) = zlab.remove("dflash_config") {
            for (k, v) in nested {
                top.insert(k, v);
            }
        }
        let moved: Vec<String> = zlab.keys().filter(|k| dflash_field(k)).cloned().collect();
        for key in moved {
            let v = zlab.remove(&key).unwrap();
            top.insert(key, v);
        }
        let ids = top.remove("target_layer_ids").unwrap();
        let aux: Vec<u64> = ids
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap() + 1)
            .collect();
        let block = top["block_size"].as_u64().unwrap();
        let vocab = zlab["vocab_size"].clone();
        zlab.insert("model_type".into(), json!("qwen3"));
        let (family, class) = if second {
            ("dflash2", "DFlash2DraftModel")
        } else {
            ("dflash", "DFlashSpeculator")
        };
        top.insert("speculators_model_type".into(), json!(family));
        top.insert("architectures".into(), json!([class]));
        top.insert("aux_hidden_state_layer_ids".into(), json!(aux));
        top.insert("draft_vocab_size".into(), vocab);
        top.insert(
            "speculators_config".into(),
            json!({
                "algorithm": family,
                "default_proposal_method": "greedy",
                "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": block - 1}],
                "verifier": {"name_or_path": "Qwen/Qwen3-8B", "architectures": ["Qwen3ForCausalLM"]}
            }),
        );
        top.insert("transformer_layer_config".into(), Value::Object(zlab));
        *c = Value::Object(top);
    })
}

/// A speculators draft with a reduced vocabulary: 500 of the verifier's 1000 tokens (the even
/// ids), its own head over them, `d2t` (draft token i is target id i + d2t[i]) and `t2d` (true at the
/// ids the draft scores).
fn reduced_vocabulary(dir: &Path) -> PathBuf {
    speculators(dir);
    config(dir, |c| c["draft_vocab_size"] = json!(500));
    weights(dir, |t| {
        t.push(zeros("lm_head.weight", vec![500, 256]));
        let d2t: Vec<u8> = (0..500i64).flat_map(|i| i.to_le_bytes()).collect();
        t.push(("d2t".into(), "I64".into(), vec![500], d2t));
        let t2d: Vec<u8> = (0..1000).map(|id| u8::from(id % 2 == 0)).collect();
        t.push(("t2d".into(), "BOOL".into(), vec![1000], t2d));
    })
}

fn has_embed_tokens_without_the_tensor(dir: &Path) -> PathBuf {
    nemotron_like(dir);
    weights(dir, |t| t.retain(|t| t.0 != "embed_tokens.weight"))
}

fn has_own_lm_head_without_the_tensor(dir: &Path) -> PathBuf {
    nemotron_like(dir);
    weights(dir, |t| t.retain(|t| t.0 != "lm_head.weight"))
}

fn eagle_ids_not_plus_one(dir: &Path) -> PathBuf {
    nemotron_like(dir);
    config(dir, |c| {
        c["eagle_aux_hidden_state_layer_ids"] = json!([1, 3, 5])
    })
}

const MODEL_INDEX: &str = "model.safetensors.index.json";
const DRAFT_INDEX: &str = "dflash_draft_model.safetensors.index.json";

/// The folder's weights named as MiMo names its draft's (`model*.safetensors` become
/// `dflash_draft_model*.safetensors`), and listed by the index `index` (written from the file's own
/// header when the folder has one file and no index).
fn named_as_mimo(dir: &Path, index: &str) -> PathBuf {
    let old = dir.join(MODEL_INDEX);
    let mut map = serde_json::Map::new();
    if old.exists() {
        let doc: Value = serde_json::from_slice(&std::fs::read(&old).unwrap()).unwrap();
        map = doc["weight_map"].as_object().unwrap().clone();
        std::fs::remove_file(&old).unwrap();
    } else {
        for (name, ..) in read_tensors(&dir.join("model.safetensors")) {
            map.insert(name, json!("model.safetensors"));
        }
    }
    let renamed = |f: &str| f.replacen("model", "dflash_draft_model", 1);
    let files: std::collections::BTreeSet<String> = map
        .values()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    for f in &files {
        std::fs::rename(dir.join(f), dir.join(renamed(f))).unwrap();
    }
    for v in map.values_mut() {
        *v = json!(renamed(v.as_str().unwrap()));
    }
    let doc = json!({"metadata": {}, "weight_map": map});
    std::fs::write(dir.join(index), serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    dir.to_owned()
}

/// XiaomiMiMo's layout: the folder's draft moved into the repository's `dflash/`, the root holding a
/// README and, with `target`, the target's config.json and weights (another model's, which the root
/// is then: no draft).
fn in_dflash(dir: &Path, target: bool) -> PathBuf {
    let folder = dir.join("dflash");
    let names: Vec<std::ffi::OsString> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    std::fs::create_dir(&folder).unwrap();
    for name in names {
        std::fs::rename(dir.join(&name), folder.join(&name)).unwrap();
    }
    std::fs::write(
        dir.join("README.md"),
        b"# A model, and its DFlash draft in dflash/\n",
    )
    .unwrap();
    if target {
        let config = json!({"architectures": ["MiMoV2ForCausalLM"], "model_type": "mimo_v2",
            "hidden_size": 256, "num_hidden_layers": 8, "vocab_size": 1000});
        std::fs::write(
            dir.join("config.json"),
            serde_json::to_vec_pretty(&config).unwrap(),
        )
        .unwrap();
        write_tensors(
            &dir.join("model-00001-of-00001.safetensors"),
            &[zeros("model.embed_tokens.weight", vec![1000, 256])],
        );
        let index = json!({"metadata": {}, "weight_map": {"model.embed_tokens.weight": "model-00001-of-00001.safetensors"}});
        std::fs::write(
            dir.join(MODEL_INDEX),
            serde_json::to_vec_pretty(&index).unwrap(),
        )
        .unwrap();
    }
    dir.to_owned()
}

/// Copies the files of directory `from` into a new directory `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// MiMo's shape: `dflash_config.attention_sink_bias` and a sink of `[num_attention_heads]` per layer.
fn mimo_like(dir: &Path) -> PathBuf {
    config(dir, |c| {
        c["dflash_config"]["attention_sink_bias"] = json!(true)
    });
    weights(dir, |t| {
        for layer in 0..2 {
            let name = format!("layers.{layer}.self_attn.attention_sink_bias");
            t.push(zeros(&name, vec![4]));
        }
    })
}

fn attention_sink_missing(dir: &Path) -> PathBuf {
    mimo_like(dir);
    weights(dir, |t| {
        t.retain(|t| t.0 != "layers.1.self_attn.attention_sink_bias")
    })
}

fn attention_sinks_without_the_flag(dir: &Path) -> PathBuf {
    mimo_like(dir);
    config(dir, |c| {
        c["dflash_config"]
            .as_object_mut()
            .unwrap()
            .remove("attention_sink_bias");
    })
}

fn attention_sink_misshapen(dir: &Path) -> PathBuf {
    mimo_like(dir);
    weights(dir, |t| {
        *named(t, "layers.0.self_attn.attention_sink_bias") =
            zeros("layers.0.self_attn.attention_sink_bias", vec![8])
    })
}

fn tensor_missing(dir: &Path) -> PathBuf {
    weights(dir, |t| {
        t.retain(|t| t.0 != "layers.0.mlp.down_proj.weight")
    })
}

fn tensor_misshapen(dir: &Path) -> PathBuf {
    weights(dir, |t| {
        named(t, "layers.0.mlp.gate_proj.weight").2 = vec![256, 512]
    })
}

fn tensor_extra(dir: &Path) -> PathBuf {
    weights(dir, |t| {
        t.push((
            "layers.0.self_attn.extra.weight".into(),
            "BF16".into(),
            vec![4],
            vec![0; 8],
        ))
    })
}

fn tensor_of_integers(dir: &Path) -> PathBuf {
    weights(dir, |t| named(t, "norm.weight").1 = "I16".into())
}

fn codebook_suffixed(dir: &Path) -> PathBuf {
    weights(dir, |t| {
        named(t, "candidate_selector.predecessor_codebook").0 =
            "candidate_selector.predecessor_codebook.weight".into()
    })
}

fn nan_in_fc(dir: &Path) -> PathBuf {
    weights(dir, |t| {
        named(t, "fc.weight").3[6..8].copy_from_slice(&0x7fc0u16.to_le_bytes())
    })
}

fn inf_in_f16(dir: &Path) -> PathBuf {
    weights(dir, |t| {
        named(t, "fc.weight").3[6..8].copy_from_slice(&0x7c00u16.to_le_bytes())
    })
}

fn model_prefix(dir: &Path) -> PathBuf {
    weights(dir, |t| {
        for t in t.iter_mut() {
            t.0 = format!("model.{}", t.0);
        }
    })
}

fn ids_absent(dir: &Path) -> PathBuf {
    config(dir, |c| {
        c["dflash_config"]
            .as_object_mut()
            .unwrap()
            .remove("target_layer_ids");
    })
}

fn ids_unsorted(dir: &Path) -> PathBuf {
    config(dir, |c| {
        let ids = c["dflash_config"]["target_layer_ids"]
            .as_array_mut()
            .unwrap();
        ids.reverse();
    })
}

fn mask_absent(dir: &Path) -> PathBuf {
    config(dir, |c| {
        c["dflash_config"]
            .as_object_mut()
            .unwrap()
            .remove("mask_token_id");
    })
}

/// Older z-lab and SpecForge configs: every DFlash field at the top level, no `dflash_config`.
fn old_schema(dir: &Path) -> PathBuf {
    config(dir, |c| {
        let nested = c.as_object_mut().unwrap().remove("dflash_config").unwrap();
        for (k, v) in nested.as_object().unwrap() {
            c[k.as_str()] = v.clone();
        }
    })
}

/// The index's `weight_map`, edited in place.
fn index_edit(dir: &Path, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let path = dir.join("model.safetensors.index.json");
    let mut index: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut index["weight_map"]);
    std::fs::write(&path, serde_json::to_vec(&index).unwrap()).unwrap();
    dir.to_owned()
}

fn unlisted_tensor(dir: &Path) -> PathBuf {
    index_edit(dir, |m| {
        m.as_object_mut().unwrap().remove("fc.weight");
    })
}

const COMMIT: &str = "4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a";

/// The folder moved into a hub cache as the client lays one out: each file a blob named by its
/// digest, the snapshot's names links to them, `refs/main` naming the commit. Returns the repository
/// directory.
fn cache_repository(dir: &Path) -> PathBuf {
    let repo = dir
        .parent()
        .unwrap()
        .join("hub/models--z-lab--synthetic-dflash");
    let snapshot = repo.join("snapshots").join(COMMIT);
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), COMMIT).unwrap();
    let mut blobs = 0usize;
    let mut link = |file: &Path, at: &Path, up: &str| {
        let blob = format!("{blobs:064x}");
        blobs += 1;
        std::fs::rename(file, repo.join("blobs").join(&blob)).unwrap();
        std::os::unix::fs::symlink(format!("{up}blobs/{blob}"), at).unwrap();
    };
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        // A folder of the repository (`dflash/`) is a directory of the snapshot, its files links.
        if entry.path().is_dir() {
            let folder = snapshot.join(entry.file_name());
            std::fs::create_dir(&folder).unwrap();
            for file in std::fs::read_dir(entry.path()).unwrap() {
                let file = file.unwrap();
                link(&file.path(), &folder.join(file.file_name()), "../../../");
            }
            continue;
        }
        link(&entry.path(), &snapshot.join(entry.file_name()), "../../");
    }
    repo
}

fn cache_snapshot(dir: &Path) -> PathBuf {
    cache_repository(dir).join("snapshots").join(COMMIT)
}

/// `ORG/NAME`, looked up in the cache the folder was moved into (the `id:` form names both).
fn cache_repository_id(dir: &Path) -> PathBuf {
    let repo = cache_repository(dir);
    let cache = repo.parent().unwrap();
    PathBuf::from(format!("id:{}|z-lab/synthetic-dflash", cache.display()))
}

/// The folder moved into a hub cache whose `step` (`blobs`, `snapshots`, a snapshot, `refs` or a
/// ref, a path in the repository) is then moved out of the repository and linked back: everything is
/// still reachable, through a link that leaves. Returns the repository directory.
fn cache_step_out(dir: &Path, step: &str) -> PathBuf {
    let repo = cache_repository(dir);
    let outside = dir.parent().unwrap().join("elsewhere");
    std::fs::rename(repo.join(step), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, repo.join(step)).unwrap();
    repo
}

/// The folder moved into a hub cache as a download that stopped before `name`: the snapshot has no
/// link for it (the hub client links a file once it is whole), and its blob, cut short, is named
/// `<digest>.incomplete`, as the client leaves one it is still writing. Returns the repository.
fn cache_interrupted(dir: &Path, name: &str) -> PathBuf {
    let repo = cache_repository(dir);
    let link = repo.join("snapshots").join(COMMIT).join(name);
    let blob = repo
        .join("snapshots")
        .join(COMMIT)
        .join(std::fs::read_link(&link).unwrap());
    let bytes = std::fs::read(&blob).unwrap();
    let unfinished = blob.with_file_name(format!(
        "{}.incomplete",
        blob.file_name().unwrap().to_str().unwrap()
    ));
    std::fs::write(&unfinished, &bytes[..bytes.len() / 3]).unwrap();
    std::fs::remove_file(&blob).unwrap();
    std::fs::remove_file(&link).unwrap();
    repo
}

/// The hub cache itself moved and linked where it was (a cache on another disk): every step of the
/// repository stays inside it, so it is read. Returns the repository through the link.
fn cache_through_a_link(dir: &Path) -> PathBuf {
    let repo = cache_repository(dir);
    let cache = repo.parent().unwrap().to_owned();
    let moved = dir.parent().unwrap().join("hub-on-another-disk");
    std::fs::rename(&cache, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &cache).unwrap();
    repo
}

/// A snapshot whose config.json links to a file outside the repository (a `--local-dir` download
/// made with links, or a hand-made snapshot).
fn cache_link_out(dir: &Path) -> PathBuf {
    let repo = cache_repository(dir);
    let snapshot = repo.join("snapshots").join(COMMIT);
    let outside = dir.parent().unwrap().join("elsewhere.json");
    std::fs::copy(snapshot.join("config.json"), &outside).unwrap();
    std::fs::remove_file(snapshot.join("config.json")).unwrap();
    std::os::unix::fs::symlink(&outside, snapshot.join("config.json")).unwrap();
    repo
}
