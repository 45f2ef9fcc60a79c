//! Arms for a draft as llama.cpp loads it: one GGUF file (architecture `dflash`), named directly or
//! as the one `*.gguf` of a directory. Each file is the synthetic converter's GGUF (Q4_1 matrices,
//! F32 gains, BF16 fc, llama.cpp's names and keys) bent once; a control holds when the gate refuses
//! it at the named check, naming the tensor or key, and every other check still passes or was
//! stopped by that one.

use super::folder::{fail, judge, Owed};
use super::{Base, SEED};
use crate::synth::gguf::{gguf_for, GgufFile, GgufOptions};
use crate::synth::{Encoding, Package};
use dflash_gate::__private::gguf::GgmlType;
use dflash_gate::{gate, CheckId, Form, Options, Outcome};
use std::path::{Path, PathBuf};

pub type Trial = Box<dyn FnOnce() -> Result<(), String> + Send>;

#[derive(Clone, Copy)]
struct GgufArm {
    name: &'static str,
    options: GgufOptions,
    /// Done to the GGUF before it is written.
    bend: fn(&mut GgufFile),
    /// Done to the written file's directory; returns the path to gate (the file, or a directory).
    place: fn(&Path) -> PathBuf,
    owed: Owed,
}

const fn arm(name: &'static str, bend: fn(&mut GgufFile), owed: Owed) -> GgufArm {
    GgufArm {
        name,
        options: GgufOptions::DEFAULT,
        bend,
        place: the_file,
        owed,
    }
}

const IS_DFLASH: &str = CheckId::CONFIG_IS_DFLASH;
const GEOMETRY: &str = CheckId::CONFIG_GEOMETRY;
const MASK_TOKEN: &str = CheckId::CONFIG_MASK_TOKEN;
const PARSES: &str = CheckId::CONTAINER_PARSES;
const COMPLETE: &str = CheckId::INVENTORY_COMPLETE;
const EXPLAINED: &str = CheckId::INVENTORY_EXPLAINED;
const FINITE: &str = CheckId::BF16_FINITE;

const FILE: &str = "draft.gguf";

fn as_is(_: &mut GgufFile) {}

/// A draft's config.json, as a draft's subdirectory holds it.
const DRAFT_CONFIG: &str = r#"{"architectures": ["DFlashDraftModel"], "model_type": "qwen3",
    "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "intermediate_size": 512, "block_size": 8,
    "dflash_config": {"target_layer_ids": [1, 3], "mask_token_id": 999}}"#;

/// A target model's config.json.
const TARGET_CONFIG: &str = r#"{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
    "hidden_size": 256, "num_hidden_layers": 8, "vocab_size": 1000}"#;

/// A GGUF target model: another architecture, no draft keys.
fn target_model() -> GgufFile {
    let mut f = GgufFile::new();
    f.string("general.architecture", "qwen3");
    f.u32("qwen3.block_count", 8);
    f.u32("qwen3.embedding_length", 256);
    f
}

fn the_file(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

fn the_directory(dir: &Path) -> PathBuf {
    dir.to_owned()
}

/// The default file with its matrices of another ggml type.
const fn of_type(
    name: &'static str,
    matrices: GgmlType,
    bend: fn(&mut GgufFile),
    owed: Owed,
) -> GgufArm {
    GgufArm {
        options: GgufOptions {
            matrices,
            ..GgufOptions::DEFAULT
        },
        ..arm(name, bend, owed)
    }
}

const ARMS: &[GgufArm] = &[
    arm("gguf_draft::pass::faithful", as_is, Owed::Pass),
    of_type(
        "gguf_draft::pass::faithful_f16",
        GgmlType::F16,
        as_is,
        Owed::Pass,
    ),
    of_type(
        "gguf_draft::pass::faithful_bf16",
        GgmlType::BF16,
        as_is,
        Owed::Pass,
    ),
    of_type(
        "gguf_draft::pass::faithful_q8_0",
        GgmlType::Q8_0,
        as_is,
        Owed::Pass,
    ),
    of_type(
        "gguf_draft::pass::faithful_q4_k",
        GgmlType::Q4_K,
        as_is,
        Owed::Pass,
    ),
    of_type(
        "gguf_draft::pass::faithful_q4_0",
        GgmlType::Q4_0,
        as_is,
        Owed::Pass,
    ),
    of_type(
        "gguf_draft::pass::faithful_q5_0",
        GgmlType::Q5_0,
        as_is,
        Owed::Pass,
    ),
    of_type(
        "gguf_draft::pass::faithful_q5_1",
        GgmlType::Q5_1,
        as_is,
        Owed::Pass,
    ),
    of_type(
        "gguf_draft::pass::faithful_q5_k",
        GgmlType::Q5_K,
        as_is,
        Owed::Pass,
    ),
    of_type(
        "gguf_draft::pass::faithful_q6_k",
        GgmlType::Q6_K,
        as_is,
        Owed::Pass,
    ),
    GgufArm {
        // `-00001-of-00001` is the whole model, as the Hub holds many: not a shard to merge.
        place: |d| {
            let whole = d.join("draft-00001-of-00001.gguf");
            std::fs::rename(d.join(FILE), &whole).unwrap();
            whole
        },
        ..arm(
            "gguf_draft::pass::named_one_shard_of_one",
            as_is,
            Owed::Pass,
        )
    },
    GgufArm {
        place: |d| {
            let shard = d.join("draft-00001-of-00002.gguf");
            std::fs::rename(d.join(FILE), &shard).unwrap();
            shard
        },
        ..arm(
            "gguf_draft::control::split_by_name",
            as_is,
            Owed::Error(&[
                "draft-00001-of-00002.gguf",
                "one shard of a split GGUF",
                "gguf-split --merge",
            ]),
        )
    },
    arm(
        "gguf_draft::control::split_by_metadata",
        |f| f.u32("split.count", 2),
        Owed::Error(&[
            "split.count is 2",
            "one shard of a split GGUF",
            "gguf-split --merge",
        ]),
    ),
    of_type(
        "gguf_draft::control::nan_in_f16_tensor",
        GgmlType::F16,
        |f| {
            let data = &mut tensor(f, "blk.1.attn_v.weight").3;
            data[2 * 77..2 * 78].copy_from_slice(&0x7e00u16.to_le_bytes());
        },
        fail(FINITE, &["blk.1.attn_v.weight f16", "element 77", "NaN"]),
    ),
    of_type(
        "gguf_draft::control::nan_q4_k_block_scale",
        GgmlType::Q4_K,
        |f| {
            // Super-block 3's d: every weight of its 256 reads as NaN.
            let data = &mut tensor(f, "blk.0.ffn_up.weight").3;
            data[3 * 144..3 * 144 + 2].copy_from_slice(&0x7e00u16.to_le_bytes());
        },
        fail(
            FINITE,
            &["blk.0.ffn_up.weight q4_K", "block 3's scale d", "NaN"],
        ),
    ),
    GgufArm {
        place: the_directory,
        ..arm("gguf_draft::pass::directory_holding_one", as_is, Owed::Pass)
    },
    GgufArm {
        options: GgufOptions {
            matrices: GgmlType::Q8_0,
            gains: GgmlType::F16,
            fc: GgmlType::F32,
            ..GgufOptions::DEFAULT
        },
        ..arm("gguf_draft::pass::q8_0_f16_gains_f32_fc", as_is, Owed::Pass)
    },
    // llama.cpp reads the mask from tokenizer.ggml.mask_token_id alone (llama_vocab_mask): under the
    // older key only, it drafts with mask id -1 and aborts at the first draft.
    arm(
        "gguf_draft::control::mask_under_the_older_key_only",
        older_mask_key,
        fail(
            MASK_TOKEN,
            &["the mask id is stated only as dflash.mask_token_id 999", "llama.cpp reads tokenizer.ggml.mask_token_id alone"],
        ),
    ),
    arm(
        "gguf_draft::control::tensor_missing",
        |f| f.tensors.retain(|t| t.0 != "blk.0.ffn_down.weight"),
        fail(COMPLETE, &["blk.0.ffn_down.weight is missing", "llama.cpp"]),
    ),
    arm(
        "gguf_draft::control::tensor_misshapen",
        |f| tensor(f, "blk.1.ffn_gate.weight").1.reverse(),
        fail(
            COMPLETE,
            &["blk.1.ffn_gate.weight", "ne [512, 256]", "[256, 512]"],
        ),
    ),
    // DFlash2 as upstream llama.cpp names it (spec 18.3): four keys, seven tensors per layer pair.
    arm("gguf_draft::pass::dflash2_f16", |f| dflash2(f, GgmlType::F16), Owed::Pass),
    arm("gguf_draft::pass::dflash2_q8_0", |f| dflash2(f, GgmlType::Q8_0), Owed::Pass),
    arm(
        "gguf_draft::control::dflash2_key_missing",
        |f| {
            dflash2(f, GgmlType::F16);
            assert!(f.remove("dflash.selector_top_k"));
        },
        fail(
            GEOMETRY,
            &["without dflash.selector_top_k: DFlash2's four keys are all or none"],
        ),
    ),
    arm(
        "gguf_draft::control::dflash2_selector_lattice_wider_than_the_embedding",
        |f| {
            dflash2(f, GgmlType::F16);
            assert!(f.replace("dflash.selector_top_k", 4, &16u32.to_le_bytes()));
        },
        fail(
            GEOMETRY,
            &["dflash.selector_top_k is 16, whose selector lattice needs dflash.embedding_length of at least 16 x 17 = 272, not 256: llama.cpp refuses it"],
        ),
    ),
    arm(
        "gguf_draft::control::dflash2_selector_top_k_beyond_the_vocabulary",
        |f| {
            dflash2(f, GgmlType::F16);
            assert!(f.replace("dflash.selector_top_k", 4, &u32::MAX.to_le_bytes()));
        },
        fail(
            GEOMETRY,
            &["dflash.selector_top_k is 4294967295, more than dflash.vocab_size 1000"],
        ),
    ),
    arm(
        "gguf_draft::control::dflash2_group_not_dividing_hidden",
        |f| {
            dflash2(f, GgmlType::F16);
            assert!(f.replace("dflash.conv_group_size", 4, &48u32.to_le_bytes()));
        },
        fail(
            GEOMETRY,
            &["dflash.conv_group_size is 48, which does not divide dflash.embedding_length 256"],
        ),
    ),
    arm(
        "gguf_draft::control::dflash2_conv_base_missing",
        |f| {
            dflash2(f, GgmlType::F16);
            f.tensors.retain(|t| t.0 != "blk.1.ffn_conv_base");
        },
        fail(COMPLETE, &["blk.1.ffn_conv_base is missing"]),
    ),
    arm(
        "gguf_draft::control::dflash2_conv_projection_misshapen",
        |f| {
            dflash2(f, GgmlType::F16);
            f.tensors.retain(|t| t.0 != "blk.0.attn_conv_proj.weight");
            let name = "blk.0.attn_conv_proj.weight";
            f.tensor(name, vec![256, 16], GgmlType::F16, vec![0; 256 * 16 * 2]);
        },
        fail(
            COMPLETE,
            &["blk.0.attn_conv_proj.weight is f16 ne [256, 16], the metadata makes it [256, 32]"],
        ),
    ),
    arm(
        "gguf_draft::control::dflash2_tensors_without_the_keys",
        |f| {
            dflash2(f, GgmlType::F16);
            for key in DFLASH2_KEYS {
                assert!(f.remove(key));
            }
        },
        fail(
            EXPLAINED,
            &[
                "blk.0.attn_conv_base (a second-family (DFlash2) conv attention_conv.base_kernel tensor, but the metadata declares the DFlash family)",
                "wrong number of tensors",
            ],
        ),
    ),
    // DSpark (spec 18.3): llama.cpp b11434 builds a Markov head and a confidence head beside the
    // dflash graph from these keys and tensors, but DSpark's GGUF layout is not settled upstream:
    // UNDECIDED naming them, never a PASS, and never a FAIL that calls the heads unexplained.
    arm(
        "gguf_draft::control::dspark_heads",
        |f| dspark(f, true),
        undecided(
            GEOMETRY,
            &[
                "DSpark's dflash.sample_from_anchor, dflash.has_confidence_head, markov_w1.weight, markov_w2.weight, conf_proj.weight",
                "llama.cpp b11434 builds a DSpark draft",
                "not settled upstream",
            ],
        ),
    ),
    arm(
        "gguf_draft::control::dspark_keys_only",
        |f| {
            f.raw("dflash.sample_from_anchor", 7, &[1]);
            f.raw("dflash.has_confidence_head", 7, &[0]);
        },
        undecided(
            GEOMETRY,
            &["DSpark's dflash.sample_from_anchor, dflash.has_confidence_head,"],
        ),
    ),
    arm(
        // markov_w1.weight alone is what makes llama.cpp build the Markov head.
        "gguf_draft::control::dspark_markov_head_without_its_keys",
        |f| dspark(f, false),
        undecided(
            GEOMETRY,
            &["DSpark's markov_w1.weight, markov_w2.weight, conf_proj.weight,"],
        ),
    ),
    arm(
        // A reduced vocabulary: d2t (I64) and a head of its rows, which llama.cpp sizes by d2t.
        "gguf_draft::control::dspark_reduced_vocabulary",
        |f| {
            dspark(f, true);
            f.tensor("d2t", vec![500], GgmlType::I64, vec![0; 500 * 8]);
            let bytes = 256 * 500 * 2;
            f.tensor("output.weight", vec![256, 500], GgmlType::F16, vec![0; bytes]);
        },
        undecided(GEOMETRY, &["conf_proj.weight, d2t,"]),
    ),
    arm(
        // DeepSeek-V4's backbone: the dflash keys are not its own, so one it lacks is no FAIL.
        "gguf_draft::control::dspark_deepseek4_backbone",
        |f| {
            dspark(f, true);
            f.u32("dflash.hyper_connection.count", 4);
            assert!(f.remove("dflash.feed_forward_length"));
        },
        Owed::Refused {
            check: GEOMETRY,
            outcome: Outcome::Undecided,
            mentions: &[
                "dflash.hyper_connection.count",
                "DeepSeek-V4's backbone, whose keys and tensors are not the dflash graph's",
            ],
            also: &[],
        },
    ),
    arm(
        // A key every dflash draft needs, DSpark's too: its absence is the FAIL it is.
        "gguf_draft::control::dspark_heads_without_target_layers",
        |f| {
            dspark(f, true);
            assert!(f.remove("dflash.target_layers"));
        },
        fail(
            GEOMETRY,
            &[
                "dflash.target_layers is absent",
                "the file also holds DSpark's dflash.sample_from_anchor",
            ],
        ),
    ),
    arm(
        "gguf_draft::control::dspark_nan_in_the_markov_head",
        |f| {
            dspark(f, true);
            tensor(f, "markov_w1.weight").3[2 * 5..2 * 6].copy_from_slice(&0x7e00u16.to_le_bytes());
        },
        Owed::Refused {
            check: FINITE,
            outcome: Outcome::Fail,
            mentions: &["markov_w1.weight f16", "element 5", "NaN"],
            also: &[GEOMETRY, COMPLETE, EXPLAINED],
        },
    ),
    // A draft with its own embedding table and output head (token_embd and output), as llama.cpp
    // loads them: ne [hidden, vocab], the vocabulary the metadata's or, unstated, the target's.
    arm(
        "gguf_draft::pass::own_embedding_and_output_head",
        |f| own_embedding_and_output_head(f, 256, 1000),
        Owed::Pass,
    ),
    arm(
        "gguf_draft::pass::own_embedding_of_the_targets_vocabulary",
        |f| {
            assert!(f.remove("dflash.vocab_size"));
            own_embedding_and_output_head(f, 256, 1000);
        },
        Owed::Pass,
    ),
    // llama.cpp's n_vocab is the token count: without dflash.vocab_size, an own embedding of
    // other rows is held to the tokens (check_tensor_dims: tensor 'token_embd.weight' has wrong shape).
    arm(
        "gguf_draft::control::own_embedding_beside_fewer_tokens",
        |f| {
            assert!(f.remove("dflash.vocab_size"));
            own_embedding_and_output_head(f, 256, 1200);
        },
        fail(
            COMPLETE,
            &["token_embd.weight is f16 ne [256, 1200], the metadata makes it [256, 1000]"],
        ),
    ),
    arm(
        "gguf_draft::control::own_embedding_of_another_vocabulary",
        |f| own_embedding_and_output_head(f, 256, 1200),
        fail(
            COMPLETE,
            &["token_embd.weight is f16 ne [256, 1200], the metadata makes it [256, 1000]", "wrong shape"],
        ),
    ),
    arm(
        "gguf_draft::control::own_embedding_of_another_hidden_size",
        |f| {
            assert!(f.remove("dflash.vocab_size"));
            own_embedding_and_output_head(f, 128, 1000);
        },
        fail(
            COMPLETE,
            &["token_embd.weight is f16 ne [128, 1000], the metadata makes it [256, 1000]"],
        ),
    ),
    // Without dflash.vocab_size or tokens the vocabulary is the target's, and only an own table's
    // other side is known: the hidden size.
    arm(
        "gguf_draft::pass::own_embedding_with_no_vocabulary_stated",
        |f| {
            no_vocabulary_stated(f);
            own_embedding_and_output_head(f, 256, 1000);
        },
        Owed::Pass,
    ),
    arm(
        "gguf_draft::control::own_embedding_with_no_vocabulary_stated_another_hidden_size",
        |f| {
            no_vocabulary_stated(f);
            own_embedding_and_output_head(f, 128, 1000);
        },
        fail(
            COMPLETE,
            &["token_embd.weight is f16 ne [128, 1000], the metadata makes it [256, vocab]"],
        ),
    ),
    arm(
        "gguf_draft::control::tensor_extra",
        |f| f.tensor("blk.0.extra.weight", vec![4], GgmlType::F32, vec![0; 16]),
        fail(
            EXPLAINED,
            &["blk.0.extra.weight", "wrong number of tensors"],
        ),
    ),
    arm(
        "gguf_draft::control::fc_one_tap_short",
        |f| {
            let t = tensor(f, "fc.weight");
            t.1[0] -= 256;
            t.3.truncate(t.3.len() / 3 * 2);
        },
        fail(COMPLETE, &["fc.weight", "ne [512, 256]", "[768, 256]"]),
    ),
    arm(
        "gguf_draft::control::nan_in_f32_gain",
        |f| tensor(f, "output_norm.weight").3[8..12].copy_from_slice(&f32::NAN.to_le_bytes()),
        fail(FINITE, &["output_norm.weight f32", "element 2", "NaN"]),
    ),
    arm(
        "gguf_draft::control::nan_in_bf16_fc",
        |f| tensor(f, "fc.weight").3[6..8].copy_from_slice(&0x7fc0u16.to_le_bytes()),
        fail(FINITE, &["fc.weight bf16", "element 3", "NaN"]),
    ),
    arm(
        "gguf_draft::control::nan_block_scale_in_q4_1",
        // Block 3's `d`: each Q4_1 block is d, m (f16 each) and 16 bytes of codes.
        |f| tensor(f, "blk.0.attn_q.weight").3[60..62].copy_from_slice(&0x7e00u16.to_le_bytes()),
        fail(
            FINITE,
            &["blk.0.attn_q.weight q4_1", "block 3's scale d is NaN"],
        ),
    ),
    arm(
        "gguf_draft::control::infinite_minimum_in_q4_1",
        |f| tensor(f, "blk.1.ffn_down.weight").3[2..4].copy_from_slice(&0xfc00u16.to_le_bytes()),
        fail(
            FINITE,
            &[
                "blk.1.ffn_down.weight q4_1",
                "block 0's scale m is -infinity",
            ],
        ),
    ),
    arm(
        "gguf_draft::control::target_layers_absent",
        |f| assert!(f.remove("dflash.target_layers")),
        fail(
            GEOMETRY,
            &["dflash.target_layers is absent", "never guesses"],
        ),
    ),
    arm(
        "gguf_draft::control::target_layers_not_increasing",
        |f| {
            f.remove("dflash.target_layers");
            f.i32_array("dflash.target_layers", &[4, 2, 6]);
        },
        fail(
            GEOMETRY,
            &[
                "dflash.target_layers",
                "not strictly increasing",
                "[3, 1, 5]",
            ],
        ),
    ),
    arm(
        "gguf_draft::control::target_layer_zero",
        |f| {
            f.remove("dflash.target_layers");
            f.i32_array("dflash.target_layers", &[0, 2, 4]);
        },
        fail(GEOMETRY, &["dflash.target_layers holds 0", "plus one"]),
    ),
    arm(
        "gguf_draft::control::block_size_one",
        |f| assert!(f.replace("dflash.block_size", 4, &1u32.to_le_bytes())),
        fail(GEOMETRY, &["dflash.block_size is 1"]),
    ),
    arm(
        // Read as a count, it would have the gate build four billion layers' names.
        "gguf_draft::control::block_count_beyond_the_tensors",
        |f| assert!(f.replace("dflash.block_count", 4, &4_000_000_000u32.to_le_bytes())),
        fail(
            GEOMETRY,
            &[
                "dflash.block_count is 4000000000",
                "44000000000 tensors",
                "the file holds 25",
            ],
        ),
    ),
    arm(
        // One layer more than the file's 25 tensors hold (2 layers of 11, and 3 more).
        "gguf_draft::control::block_count_one_layer_beyond_the_tensors",
        |f| assert!(f.replace("dflash.block_count", 4, &3u32.to_le_bytes())),
        fail(
            GEOMETRY,
            &["dflash.block_count is 3", "33 tensors", "the file holds 25"],
        ),
    ),
    arm(
        "gguf_draft::control::block_size_above_any_known",
        |f| assert!(f.replace("dflash.block_size", 4, &1000u32.to_le_bytes())),
        Owed::Refused {
            check: GEOMETRY,
            outcome: Outcome::Undecided,
            mentions: &["dflash.block_size is 1000", "above 64"],
            also: &[],
        },
    ),
    arm(
        "gguf_draft::control::block_count_stored_as_i32",
        |f| assert!(f.replace("dflash.block_count", 5, &2i32.to_le_bytes())),
        fail(
            GEOMETRY,
            &["dflash.block_count is stored as i32", "only as a u32"],
        ),
    ),
    arm(
        "gguf_draft::control::mask_token_id_stored_as_i32",
        |f| assert!(f.replace("tokenizer.ggml.mask_token_id", 5, &999i32.to_le_bytes())),
        fail(
            GEOMETRY,
            &[
                "tokenizer.ggml.mask_token_id is not a token id",
                "only as a u32",
            ],
        ),
    ),
    arm(
        "gguf_draft::control::target_layers_a_u8_array",
        |f| {
            assert!(f.remove("dflash.target_layers"));
            let mut value = 0u32.to_le_bytes().to_vec();
            value.extend_from_slice(&3u64.to_le_bytes());
            value.extend_from_slice(&[2, 4, 6]);
            f.raw("dflash.target_layers", 9, &value);
        },
        fail(
            GEOMETRY,
            &[
                "dflash.target_layers",
                "not a non-empty array of i32 or u32",
            ],
        ),
    ),
    arm(
        "gguf_draft::control::rope_freq_base_absent",
        |f| assert!(f.remove("dflash.rope.freq_base")),
        fail(GEOMETRY, &["dflash.rope.freq_base is absent (required)"]),
    ),
    arm(
        "gguf_draft::control::value_head_differs_from_key_head",
        |f| {
            assert!(f.remove("dflash.attention.value_length"));
            f.u32("dflash.attention.value_length", 32);
        },
        fail(
            GEOMETRY,
            &[
                "dflash.attention.value_length is 32 and the key head is 64",
                "requires equal key and value heads",
            ],
        ),
    ),
    arm(
        "gguf_draft::control::value_length_absent_and_key_head_not_the_split",
        |f| {
            assert!(f.remove("dflash.attention.value_length"));
            assert!(f.remove("dflash.attention.key_length"));
            f.u32("dflash.attention.key_length", 128);
        },
        fail(
            GEOMETRY,
            &[
                "dflash.attention.value_length is absent, so llama.cpp takes dflash.embedding_length / dflash.attention.head_count = 64",
                "the key head is 128",
            ],
        ),
    ),
    arm(
        "gguf_draft::pass::value_length_absent_where_the_split_is_the_key_head",
        |f| assert!(f.remove("dflash.attention.value_length")),
        Owed::Pass,
    ),
    arm(
        "gguf_draft::control::rms_epsilon_stored_as_f64",
        |f| {
            let key = "dflash.attention.layer_norm_rms_epsilon";
            assert!(f.replace(key, 12, &1e-6f64.to_le_bytes()));
        },
        fail(
            GEOMETRY,
            &[
                "dflash.attention.layer_norm_rms_epsilon is stored as f64",
                "only as an f32",
            ],
        ),
    ),
    arm(
        "gguf_draft::control::two_mask_ids_disagree",
        |f| f.u32("dflash.mask_token_id", 5),
        fail(
            GEOMETRY,
            &[
                "tokenizer.ggml.mask_token_id is 999 and dflash.mask_token_id is 5",
                "stated twice",
            ],
        ),
    ),
    arm(
        "gguf_draft::control::vocab_size_stored_as_i32",
        |f| assert!(f.replace("dflash.vocab_size", 5, &(-3i32).to_le_bytes())),
        fail(GEOMETRY, &["dflash.vocab_size is not a u32 count"]),
    ),
    arm(
        // llama.cpp would size the embedding by it: a count past the gate's limit is refused
        // before anything is built from it.
        "gguf_draft::control::vocab_size_beyond_the_limit",
        |f| assert!(f.replace("dflash.vocab_size", 4, &u32::MAX.to_le_bytes())),
        fail(
            GEOMETRY,
            &["dflash.vocab_size is 4294967295", "beyond the gate's limit"],
        ),
    ),
    arm(
        "gguf_draft::control::more_tokens_than_vocab_size",
        |f| {
            assert!(f.remove("tokenizer.ggml.tokens"));
            let tokens: Vec<String> = (0..1001).map(|i| format!("tok{i}")).collect();
            f.string_array("tokenizer.ggml.tokens", &tokens);
        },
        fail(
            GEOMETRY,
            &[
                "tokenizer.ggml.tokens holds 1001 tokens, more than dflash.vocab_size 1000",
                "past the embedding's rows",
            ],
        ),
    ),
    arm(
        "gguf_draft::control::rms_epsilon_nan",
        |f| {
            let key = "dflash.attention.layer_norm_rms_epsilon";
            assert!(f.replace(key, 6, &f32::NAN.to_le_bytes()));
        },
        fail(
            GEOMETRY,
            &[
                "dflash.attention.layer_norm_rms_epsilon is NaN",
                "not a finite positive number",
            ],
        ),
    ),
    arm(
        "gguf_draft::control::rms_epsilon_zero",
        |f| {
            let key = "dflash.attention.layer_norm_rms_epsilon";
            assert!(f.replace(key, 6, &0f32.to_le_bytes()));
        },
        fail(
            GEOMETRY,
            &[
                "dflash.attention.layer_norm_rms_epsilon is 0,",
                "not a finite positive number",
            ],
        ),
    ),
    arm(
        "gguf_draft::control::rope_freq_base_negative",
        |f| assert!(f.replace("dflash.rope.freq_base", 6, &(-1e6f32).to_le_bytes())),
        fail(
            GEOMETRY,
            &[
                "dflash.rope.freq_base is -1000000",
                "not a finite positive number",
            ],
        ),
    ),
    arm(
        "gguf_draft::control::rope_freq_base_infinite",
        |f| assert!(f.replace("dflash.rope.freq_base", 6, &f32::INFINITY.to_le_bytes())),
        fail(
            GEOMETRY,
            &["dflash.rope.freq_base is inf", "not a finite positive number"],
        ),
    ),
    arm(
        "gguf_draft::control::head_count_absent",
        |f| assert!(f.remove("dflash.attention.head_count")),
        fail(GEOMETRY, &["dflash.attention.head_count is absent"]),
    ),
    arm(
        "gguf_draft::control::mask_token_id_absent",
        |f| assert!(f.remove("tokenizer.ggml.mask_token_id")),
        fail(
            GEOMETRY,
            &["tokenizer.ggml.mask_token_id", "absent", "required"],
        ),
    ),
    arm(
        "gguf_draft::control::mask_is_a_normal_token",
        |f| {
            assert!(f.remove("tokenizer.ggml.token_type"));
            f.i32_array("tokenizer.ggml.token_type", &[1; 1000]);
        },
        // llama.cpp builds and loads it: the mask rule refuses it, and the inventory still runs.
        fail(
            MASK_TOKEN,
            &["tokenizer.ggml.mask_token_id 999 is the NORMAL (1) token \"tok999\" of tokenizer.ggml.tokens"],
        ),
    ),
    arm(
        "gguf_draft::pass::mask_is_a_control_token",
        as_is,
        Owed::PassSaying {
            check: MASK_TOKEN,
            mentions: &["tokenizer.ggml.mask_token_id 999 is the CONTROL (3) token \"tok999\" of tokenizer.ggml.tokens"],
        },
    ),
    arm(
        "gguf_draft::control::mask_type_unstated",
        |f| assert!(f.remove("tokenizer.ggml.token_type")),
        Owed::Refused {
            check: MASK_TOKEN,
            outcome: Outcome::Undecided,
            mentions: &["cannot decide whether tokenizer.ggml.mask_token_id 999 is a special token: the GGUF states no tokenizer.ggml.token_type"],
            also: &[],
        },
    ),
    arm(
        "gguf_draft::control::mask_beyond_the_vocabulary",
        |f| {
            // Both lists cut to 900 tokens, so the mask is past them (and nothing else is wrong).
            assert!(f.remove("tokenizer.ggml.token_type"));
            f.i32_array("tokenizer.ggml.token_type", &[3; 900]);
            let tokens: Vec<String> = (0..900).map(|i| format!("tok{i}")).collect();
            assert!(f.remove("tokenizer.ggml.tokens"));
            f.string_array("tokenizer.ggml.tokens", &tokens);
        },
        fail(GEOMETRY, &["mask token id 999", "not a token", "holds 900"]),
    ),
    arm(
        "gguf_draft::control::token_types_shorter_than_tokens",
        |f| {
            assert!(f.remove("tokenizer.ggml.token_type"));
            f.i32_array("tokenizer.ggml.token_type", &[3; 900]);
        },
        fail(
            GEOMETRY,
            &["tokenizer.ggml.token_type holds 900 types (i32), fewer than the 1000 tokens of tokenizer.ggml.tokens"],
        ),
    ),
    arm(
        "gguf_draft::control::token_types_of_f32",
        |f| {
            let mut value = 6u32.to_le_bytes().to_vec();
            value.extend_from_slice(&1000u64.to_le_bytes());
            for _ in 0..1000 {
                value.extend_from_slice(&3.0f32.to_le_bytes());
            }
            assert!(f.replace("tokenizer.ggml.token_type", 9, &value));
        },
        fail(
            GEOMETRY,
            &["tokenizer.ggml.token_type is an array of 1000 f32, not i32 (beside the 1000 tokens of tokenizer.ggml.tokens)"],
        ),
    ),
    arm(
        "gguf_draft::control::mask_is_the_eos_token",
        |f| f.u32("tokenizer.ggml.eos_token_id", 999),
        fail(
            GEOMETRY,
            &["mask token id 999 is tokenizer.ggml.eos_token_id"],
        ),
    ),
    arm(
        "gguf_draft::control::fork_dialect",
        |f| architecture(f, "dflash-draft"),
        Owed::Refused {
            check: IS_DFLASH,
            outcome: Outcome::Undecided,
            mentions: &[
                "dflash-draft",
                "read by Lucebox's DFlash runtime",
                "upstream llama.cpp does not load it",
            ],
            also: &[],
        },
    ),
    arm(
        "gguf_draft::control::gemma4_fork_dialect",
        |f| architecture(f, "gemma4-dflash-draft"),
        Owed::Refused {
            check: IS_DFLASH,
            outcome: Outcome::Undecided,
            mentions: &[
                "gemma4-dflash-draft",
                "written by Lucebox's Gemma 4 DFlash converter",
                "upstream llama.cpp",
            ],
            also: &[],
        },
    ),
    arm(
        "gguf_draft::control::deepseek4_fork_dialect",
        |f| architecture(f, "deepseek4-dflash-draft"),
        Owed::Refused {
            check: IS_DFLASH,
            outcome: Outcome::Undecided,
            mentions: &[
                "deepseek4-dflash-draft",
                "DeepSeek-V4 DSpark drafters Lucebox publishes",
                "upstream llama.cpp",
            ],
            also: &[],
        },
    ),
    arm(
        "gguf_draft::control::not_a_draft",
        |f| architecture(f, "qwen3"),
        fail(IS_DFLASH, &["\"qwen3\"", "not a draft"]),
    ),
    GgufArm {
        place: |d| {
            let path = d.join(FILE);
            let mut bytes = std::fs::read(&path).unwrap();
            bytes.truncate(bytes.len() - 100);
            std::fs::write(&path, bytes).unwrap();
            path
        },
        ..arm(
            "gguf_draft::control::truncated",
            as_is,
            fail(PARSES, &["does not parse"]),
        )
    },
    GgufArm {
        place: |d| {
            std::fs::copy(d.join(FILE), d.join("other.gguf")).unwrap();
            d.to_owned()
        },
        ..arm(
            "gguf_draft::control::directory_holding_two",
            as_is,
            Owed::Error(&[
                "holds 2 GGUF files: draft.gguf (a DFlash draft), other.gguf (a DFlash draft)",
                "give the folder to --all",
            ]),
        )
    },
    // Several GGUFs are named for what each is: a draft beside its target is not two drafts.
    GgufArm {
        place: |d| {
            std::fs::write(d.join("target.gguf"), target_model().bytes()).unwrap();
            d.to_owned()
        },
        ..arm(
            "gguf_draft::control::directory_holding_a_draft_and_its_target",
            as_is,
            Owed::Error(&[
                "draft.gguf (a DFlash draft), target.gguf (another model: general.architecture \"qwen3\")",
                "name the draft's file (draft.gguf); a target model is given with --target",
            ]),
        )
    },
    GgufArm {
        place: |d| {
            std::fs::remove_file(d.join(FILE)).unwrap();
            std::fs::write(d.join("a.gguf"), target_model().bytes()).unwrap();
            std::fs::write(d.join("b.gguf"), target_model().bytes()).unwrap();
            d.to_owned()
        },
        ..arm(
            "gguf_draft::control::directory_holding_two_targets",
            as_is,
            Owed::Error(&[
                "a.gguf (another model: general.architecture \"qwen3\")",
                "none of them is a DFlash draft",
            ]),
        )
    },
    // A draft in a subdirectory beside the file makes the folder a folder of drafts (exit 2,
    // pointing at --all); another model's folder, or notes, beside it do not.
    GgufArm {
        place: |d| {
            let sub = d.join("sub");
            std::fs::create_dir(&sub).unwrap();
            std::fs::write(sub.join("config.json"), DRAFT_CONFIG).unwrap();
            d.to_owned()
        },
        ..arm(
            "gguf_draft::control::directory_holding_a_draft_folder_too",
            as_is,
            Owed::Error(&[
                "holds a draft directory (sub) beside draft.gguf",
                "did you mean --all?",
            ]),
        )
    },
    GgufArm {
        place: |d| {
            let target = d.join("target");
            std::fs::create_dir(&target).unwrap();
            std::fs::write(target.join("config.json"), TARGET_CONFIG).unwrap();
            std::fs::write(target.join("model.gguf"), target_model().bytes()).unwrap();
            let notes = d.join("notes");
            std::fs::create_dir(&notes).unwrap();
            std::fs::write(notes.join("README"), b"not a draft").unwrap();
            d.to_owned()
        },
        ..arm(
            "gguf_draft::pass::directory_holding_one_beside_another_models_folder",
            as_is,
            Owed::Pass,
        )
    },
    GgufArm {
        place: |d| {
            std::fs::write(d.join("model.safetensors"), b"").unwrap();
            d.to_owned()
        },
        ..arm(
            "gguf_draft::control::directory_holding_safetensors_too",
            as_is,
            Owed::Error(&["draft.gguf", "model.safetensors", "does not pick"]),
        )
    },
];

/// Each arm, as a named trial.
pub fn trials() -> Vec<(String, Trial)> {
    ARMS.iter()
        .map(|a| {
            (
                format!("arms::{}", a.name),
                Box::new(move || run(a)) as Trial,
            )
        })
        .collect()
}

/// DFlash2's four keys, as upstream llama.cpp writes them.
const DFLASH2_KEYS: [&str; 4] = [
    "dflash.conv_kernel_size",
    "dflash.conv_group_size",
    "dflash.selector_rank",
    "dflash.selector_top_k",
];

/// The default file made a DFlash2 draft as upstream llama.cpp lays one out (spec 18.3): kernel 4,
/// group 64, rank 32, top k 16 over hidden 256 and 1000 tokens; each layer's two convolutions (base
/// kernels F16 `{hidden, kernel, 2}`, projections `{hidden, 2 * kernel * hidden / group}` of
/// `ty`) and the candidate selector (`{rank, vocab}` codebooks, `{hidden, rank}` projection).
fn dflash2(f: &mut GgufFile, ty: GgmlType) {
    let (hidden, kernel, group, rank, vocab) = (256u64, 4u64, 64u64, 32u64, 1000u64);
    // top k 8: its lattice (8 x 9) fits the hidden size, as llama.cpp requires.
    for (key, value) in DFLASH2_KEYS.iter().zip([kernel, group, rank, 8]) {
        f.u32(key, value as u32);
    }
    let zeros = |dims: &[u64], ty: GgmlType| -> Vec<u8> {
        let n: u64 = dims.iter().product();
        match ty {
            GgmlType::Q8_0 => vec![0; (n / 32 * 34) as usize],
            _ => vec![0; (n * 2) as usize],
        }
    };
    for layer in 0..2 {
        for site in ["attn", "ffn"] {
            let base = vec![hidden, kernel, 2];
            let data = zeros(&base, GgmlType::F16);
            f.tensor(
                &format!("blk.{layer}.{site}_conv_base"),
                base,
                GgmlType::F16,
                data,
            );
            let proj = vec![hidden, 2 * kernel * hidden / group];
            let data = zeros(&proj, ty);
            f.tensor(
                &format!("blk.{layer}.{site}_conv_proj.weight"),
                proj,
                ty,
                data,
            );
        }
    }
    for name in ["selector_predecessor.weight", "selector_successor.weight"] {
        let dims = vec![rank, vocab];
        let data = zeros(&dims, ty);
        f.tensor(name, dims, ty, data);
    }
    let dims = vec![hidden, rank];
    let data = zeros(&dims, ty);
    f.tensor("selector_hidden.weight", dims, ty, data);
}

/// DSpark's heads as llama.cpp b11434 creates them (`src/models/dflash.cpp`): the Markov head
/// (`markov_w1.weight` and `markov_w2.weight`, ne `{rank, vocab}`, rank 32) and the confidence head
/// (`conf_proj.weight`, ne `{hidden + rank, 1}`), of zeros; with `keys`, the two keys the converter's
/// `DSparkModel` writes beside them.
pub(crate) fn dspark(f: &mut GgufFile, keys: bool) {
    let (hidden, rank, vocab) = (256u64, 32u64, 1000u64);
    if keys {
        f.raw("dflash.sample_from_anchor", 7, &[1]);
        f.raw("dflash.has_confidence_head", 7, &[1]);
    }
    for name in ["markov_w1.weight", "markov_w2.weight"] {
        let bytes = (rank * vocab * 2) as usize;
        f.tensor(name, vec![rank, vocab], GgmlType::F16, vec![0; bytes]);
    }
    let bytes = ((hidden + rank) * 4) as usize;
    f.tensor(
        "conf_proj.weight",
        vec![hidden + rank, 1],
        GgmlType::F32,
        vec![0; bytes],
    );
}

/// The check `check` UNDECIDED naming each of `mentions`; every other check passes or is blocked by it.
const fn undecided(check: &'static str, mentions: &'static [&'static str]) -> Owed {
    Owed::Refused {
        check,
        outcome: Outcome::Undecided,
        mentions,
        also: &[],
    }
}

/// An embedding table and output head of zeros, ne `[hidden, vocab]` each, in F16.
/// A draft that states no vocabulary: no `dflash.vocab_size`, no tokens (their types stay, for the
/// mask's), so its vocabulary is the target's.
fn no_vocabulary_stated(f: &mut GgufFile) {
    for key in [
        "dflash.vocab_size",
        "tokenizer.ggml.model",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.merges",
    ] {
        assert!(f.remove(key), "{key}");
    }
}

fn own_embedding_and_output_head(f: &mut GgufFile, hidden: u64, vocab: u64) {
    for name in ["token_embd.weight", "output.weight"] {
        let bytes = (hidden * vocab * 2) as usize;
        f.tensor(name, vec![hidden, vocab], GgmlType::F16, vec![0; bytes]);
    }
}

pub(crate) fn tensor<'f>(
    f: &'f mut GgufFile,
    name: &str,
) -> &'f mut (String, Vec<u64>, GgmlType, Vec<u8>) {
    f.tensors
        .iter_mut()
        .find(|t| t.0 == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

/// The mask id moved from `tokenizer.ggml.mask_token_id` to the older `dflash.mask_token_id`.
pub(crate) fn older_mask_key(f: &mut GgufFile) {
    let (_, ty, value) = f
        .metadata
        .iter()
        .find(|(k, _, _)| k == "tokenizer.ggml.mask_token_id")
        .cloned()
        .expect("mask");
    f.remove("tokenizer.ggml.mask_token_id");
    f.raw("dflash.mask_token_id", ty, &value);
}

fn architecture(f: &mut GgufFile, name: &str) {
    let mut value = (name.len() as u64).to_le_bytes().to_vec();
    value.extend_from_slice(name.as_bytes());
    assert!(f.replace("general.architecture", 8, &value));
}

/// The report the gate gives the GGUF arm `name`, against the target `target` writes beside it
/// when one is given (its path is handed to `--target`).
pub(crate) fn report_of(
    name: &str,
    target: Option<&dyn Fn(&Path) -> PathBuf>,
) -> Result<dflash_gate::Report, String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = write_named(name, root.path())?;
    let options = match target {
        Some(write) => Options::default().with_target(write(root.path())),
        None => Options::default(),
    };
    gate(&path, &options).map_err(|e| format!("{name}: no report: {e}"))
}

/// Every GGUF arm's name, in the order the suite lists them.
pub fn names() -> impl Iterator<Item = &'static str> {
    ARMS.iter().map(|a| a.name)
}

/// Writes the GGUF arm `name` under `root` with the arm's own writer: the path to gate (the file,
/// or the directory the arm places it in).
pub fn write_named(name: &str, root: &Path) -> Result<PathBuf, String> {
    let arm = ARMS
        .iter()
        .find(|a| a.name == name)
        .ok_or_else(|| format!("no GGUF arm {name}"))?;
    write_arm(arm, root)
}

/// Writes the arm's GGUF under `root`: the path to gate.
fn write_arm(arm: &GgufArm, root: &Path) -> Result<PathBuf, String> {
    let dir = root.join("draft");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut package = Package::generate(&Base::Small.geometry(), Encoding::default(), SEED);
    let mut file = gguf_for(&mut package, arm.options, SEED).map_err(|e| e.to_string())?;
    (arm.bend)(&mut file);
    std::fs::write(dir.join(FILE), file.bytes()).map_err(|e| e.to_string())?;
    Ok((arm.place)(&dir))
}

fn run(arm: &GgufArm) -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = write_arm(arm, root.path())?;
    let result = gate(&path, &Options::default());
    if let Ok(report) = &result {
        crate::schema::validate(&report.to_json())?;
        crate::loaders::stricter_than_every_engine(report)?;
        let quantized = report
            .census()
            .tensors
            .iter()
            .any(|t| t.dtype.starts_with('q'));
        let block_type = arm.options.matrices.block_size() > 1;
        if matches!(arm.owed, Owed::Pass) && block_type && !quantized {
            return Err(format!(
                "the census lists no ggml block type:\n{}",
                report.to_text(false)
            ));
        }
        // The census lists the metadata the gate read, the architecture among it.
        let metadata = &report.census().metadata;
        let architecture = metadata.iter().find(|(k, _)| k == "general.architecture");
        if matches!(arm.owed, Owed::Pass) && architecture.is_none_or(|(_, v)| v != "dflash") {
            return Err(format!(
                "census.metadata lacks the architecture: {metadata:?}"
            ));
        }
        // The summary line counts every tensor by its type: the quantized matrices and fc too,
        // not only the gains.
        let mut types = std::collections::BTreeMap::<&str, usize>::new();
        for t in &report.census().tensors {
            *types.entry(t.dtype.as_str()).or_default() += 1;
        }
        let summary = report.census().summary();
        if let Some((t, n)) = types
            .iter()
            .find(|(t, n)| !summary.contains(&format!("{n} {t}")))
        {
            return Err(format!("the census line does not count {n} {t}: {summary}"));
        }
        // A GGUF draft has no config.json and `--manifest` is refused for it: no line may say
        // otherwise.
        let text = report.not_checked_text().join("\n");
        if text.contains("config.json") || text.contains("--manifest") {
            return Err(format!("a NOT CHECKED line misleads:\n{text}"));
        }
        // Only --source tells the raw ids from the ids plus one: without it, a line says so.
        let line = text
            .lines()
            .find(|l| l.contains("whether these are the right weights"));
        if !line.is_some_and(|l| {
            l.contains("the HF ids plus one or the raw ids")
                && l.contains("(give --source DIR, the Hugging Face folder it was converted from")
        }) {
            return Err(format!(
                "no NOT CHECKED line names --source for the weights and ids:\n{text}"
            ));
        }
        // The architecture is read from a header read whole: whatever it names, the file parsed,
        // and container.parses says so rather than "not run".
        let read_architecture = report
            .check(IS_DFLASH)
            .is_some_and(|c| c.blocked_by() != Some(PARSES));
        let parses = report.check(PARSES).map(|c| c.outcome());
        if read_architecture && parses != Some(Outcome::Pass) {
            return Err(format!(
                "the header was read, yet container.parses is {parses:?}:\n{}",
                report.to_text(false)
            ));
        }
    }
    judge(Form::Gguf, arm.owed, result)
}
