//! Arms for `--source FILE.gguf` (spec section 12): a package against the GGUF it was converted from.
//! Each control starts from a faithful pair (the GGUF written beside the package, the package's grids
//! made from its blocks as FastFlowLM's converter makes them) and breaks one thing. A grid from a
//! Q4_1 tensor is compared exactly, so controls the bound of `--source DIR` lets through (another
//! quantizer's codes from the same weights, scales rounded by truncation, one code one step off) fail
//! here by name.

use super::source::{
    checks_passed, fc_unblocked, gain_from_other_layer, gain_missing, layers_swapped,
    nibbles_swapped, other_weights, planes_row_major, sourced, tiles_column_block_major, Source,
    FAITHFUL,
};
use super::{fail, none, Arm, Expect, SEED};
use crate::defects::{proj, Scenario};
use crate::synth::gguf::{
    gguf_for, grid_from_blocks_rounding, q4_1_blocks, GgufFile, GgufNames, GgufOptions,
};
use crate::synth::source::{grid_source, quantize, Quantizer};
use crate::synth::{set_code, Encoding, Package};
use dflash_gate::__private::family::Projection;
use dflash_gate::__private::gguf::GgmlType;
use dflash_gate::__private::tile::{GridGeometry, TILE_BYTES};
use dflash_gate::{CheckId, Outcome, Report};
use std::path::{Path, PathBuf};

/// How an arm's GGUF is written, and what is done to it before it is.
#[derive(Clone, Copy)]
pub struct GgufSource {
    pub options: GgufOptions,
    pub bend: fn(&mut GgufFile),
    /// `--source` names the directory holding the file, not the file.
    pub by_dir: bool,
}

fn unbent(_: &mut GgufFile) {}

impl GgufSource {
    /// The same GGUF, unbent: the control's good twin.
    pub fn faithful(self) -> GgufSource {
        GgufSource {
            bend: unbent,
            ..self
        }
    }

    /// Writes `draft.gguf` into `dir` (the package's grids made from it); the path `--source` names.
    pub fn write(&self, package: &mut Package, dir: &Path) -> Result<PathBuf, String> {
        let mut file =
            gguf_for(package, self.options, SEED).map_err(|e| format!("writing the GGUF: {e}"))?;
        (self.bend)(&mut file);
        let path = dir.join("draft.gguf");
        std::fs::write(&path, file.bytes()).map_err(|e| format!("writing the GGUF: {e}"))?;
        Ok(if self.by_dir { dir.to_owned() } else { path })
    }
}

pub const OPTIONS: GgufOptions = GgufOptions::DEFAULT;

pub const GGUF: GgufSource = GgufSource {
    options: OPTIONS,
    bend: unbent,
    by_dir: false,
};

/// The faithful GGUF as an arm's source.
pub const SOURCE: Source = Source {
    gguf: Some(GGUF),
    ..FAITHFUL
};

fn with(g: GgufSource) -> Source {
    Source {
        gguf: Some(g),
        ..FAITHFUL
    }
}

fn gguf_arm(name: &'static str, defect: fn(&mut Scenario), g: GgufSource, expect: Expect) -> Arm {
    sourced(name, defect, with(g), expect)
}

fn bent(bend: fn(&mut GgufFile)) -> GgufSource {
    GgufSource { bend, ..GGUF }
}

fn encoded(name: &'static str, encoding: Encoding, expect: Expect) -> Arm {
    Arm {
        encoding,
        ..gguf_arm(name, none, GGUF, expect)
    }
}

/// The small geometry's 14 grids each compared exactly, every group equal to its block.
fn exact(r: &Report) -> Result<(), String> {
    exact_grids(r, 14)
}

/// The padded geometry's 7 grids (rows and columns in part-filled tiles) each compared exactly.
fn exact_padded(r: &Report) -> Result<(), String> {
    exact_grids(r, 7)
}

fn exact_grids(r: &Report, count: usize) -> Result<(), String> {
    checks_passed(r)?;
    let grids = &r.census().source_grids;
    if grids.len() != count {
        return Err(format!("{} grids compared, {count} expected", grids.len()));
    }
    for g in grids {
        if !(g.comparison == dflash_gate::Comparison::Exact
            && g.groups_differing == Some(0)
            && g.groups_compared * 32 == g.elements
            && g.elements > 0)
        {
            return Err(format!(
                "{g:?} is not an exact grid with no group differing"
            ));
        }
    }
    let message = &r
        .check(CheckId::SOURCE_Q4_1)
        .ok_or("no source.q4_1")?
        .message();
    if !message.contains(&format!(
        "every one of the {count} grids from Q4_1 GGUF tensors is their blocks re-laid exactly"
    )) {
        return Err(format!(
            "source.q4_1 does not say it compared exactly: {message}"
        ));
    }
    Ok(())
}

/// The 14 grids of a Q8_0 GGUF, each held to the bound (the converter re-quantized them).
fn bounded(r: &Report) -> Result<(), String> {
    checks_passed(r)?;
    let grids = &r.census().source_grids;
    if grids.len() != 14 {
        return Err(format!("{} grids compared, 14 expected", grids.len()));
    }
    for g in grids {
        if g.comparison == dflash_gate::Comparison::Exact
            || g.groups_differing.is_some()
            || g.out_of_bound != 0
            || g.relative_rms.is_nan()
            || g.relative_rms >= 0.15
        {
            return Err(format!("{g:?} is not a bounded grid within its bound"));
        }
    }
    Ok(())
}

pub fn arms() -> Vec<Arm> {
    let d = Encoding::default();
    let q4_1 = CheckId::SOURCE_Q4_1;
    let bf16 = CheckId::SOURCE_BF16;
    let inventory = CheckId::SOURCE_INVENTORY;
    let config = CheckId::SOURCE_CONFIG;
    vec![
        gguf_arm("pass::gguf_q4_1", none, GGUF, Expect::Pass { facts: exact }),
        gguf_arm(
            "pass::gguf_in_a_directory",
            none,
            GgufSource { by_dir: true, ..GGUF },
            Expect::Pass { facts: exact },
        ),
        gguf_arm(
            "pass::gguf_f16_gains_f32_fc_aligned_64",
            none,
            GgufSource {
                options: GgufOptions {
                    gains: GgmlType::F16,
                    fc: GgmlType::F32,
                    alignment: 64,
                    ..OPTIONS
                },
                ..GGUF
            },
            Expect::Pass { facts: exact },
        ),
        encoded("pass::gguf_grids_3d", Encoding { tiles_3d: true, ..d }, Expect::Pass { facts: exact }),
        encoded("pass::gguf_fc_2d", Encoding { fc_row_blocked: false, ..d }, Expect::Pass { facts: exact }),
        encoded("pass::gguf_package_aligned", Encoding { aligned: true, ..d }, Expect::Pass { facts: exact }),
        gguf_arm(
            "pass::gguf_checkpoint_names_prefixed",
            none,
            GgufSource {
                options: GgufOptions { names: GgufNames::Prefixed, ..OPTIONS },
                ..GGUF
            },
            Expect::Pass { facts: exact },
        ),
        gguf_arm(
            "pass::gguf_checkpoint_names_bare",
            none,
            GgufSource {
                options: GgufOptions { names: GgufNames::Bare, ..OPTIONS },
                ..GGUF
            },
            Expect::Pass { facts: exact },
        ),
        gguf_arm(
            "pass::gguf_q8_0_requantized",
            none,
            GgufSource {
                options: GgufOptions { matrices: GgmlType::Q8_0, tokenizer: false, ..OPTIONS },
                ..GGUF
            },
            Expect::Pass { facts: bounded },
        ),
        Arm {
            base: super::Base::Padded,
            ..gguf_arm("pass::gguf_padded_geometry", none, GGUF, Expect::Pass { facts: exact_padded })
        },
        // Row 70, column 270 of the padded k_proj (80 x 288): a tile of 16 real rows and one real
        // group, compared group by group.
        Arm {
            base: super::Base::Padded,
            ..gguf_arm(
                "control::gguf_padded_code_flipped",
                padded_code_flipped,
                GGUF,
                fail(q4_1, &["model.layers.0.self_attn.k_proj.weight is not GGUF tensor blk.0.attn_k.weight's", "tile 5, group 0, row 70, column 270: code ", "1 of its 720 groups differ"]),
            )
        },
        gguf_arm(
            "control::gguf_tiles_column_block_major",
            tiles_column_block_major,
            GGUF,
            fail(q4_1, &[
                "model.layers.0.mlp.down_proj.weight is not GGUF tensor blk.0.ffn_down.weight's Q4_1 blocks re-laid",
                "first at tile 1, group 0, row 0, column 256: ",
                "groups differ; 1 of 14 grids from Q4_1 tensors differ",
            ]),
        ),
        gguf_arm(
            "control::gguf_nibbles_swapped",
            nibbles_swapped,
            GGUF,
            fail(q4_1, &["model.layers.1.self_attn.q_proj.weight is not GGUF tensor blk.1.attn_q.weight's", "tile 0, group 0, row 0, column ", ": code "]),
        ),
        gguf_arm(
            "control::gguf_planes_row_major",
            planes_row_major,
            GGUF,
            fail(q4_1, &["model.layers.0.mlp.up_proj.weight is not GGUF tensor blk.0.ffn_up.weight's", "scale ", "GGUF's rounded to bf16"]),
        ),
        gguf_arm(
            "control::gguf_layers_swapped",
            layers_swapped,
            GGUF,
            fail(q4_1, &["model.layers.0.self_attn.o_proj.weight is not GGUF tensor blk.0.attn_output.weight's", "2 of 14 grids from Q4_1 tensors differ"]),
        ),
        gguf_arm(
            "control::gguf_grid_from_other_weights",
            other_weights,
            GGUF,
            fail(q4_1, &["model.layers.1.mlp.gate_proj.weight is not GGUF tensor blk.1.ffn_gate.weight's", "1 of 14 grids"]),
        ),
        // Refitted from the same weights: within the bound (pass::source_refitting_quantizer passes
        // the same grids against the checkpoint), and not the GGUF's blocks.
        gguf_arm(
            "control::gguf_another_quantizers_codes",
            refitted,
            GGUF,
            fail(q4_1, &["model.layers.0.mlp.gate_proj.weight is not GGUF tensor blk.0.ffn_gate.weight's", "1 of 14 grids"]),
        ),
        gguf_arm(
            "control::gguf_scales_truncated",
            scales_truncated,
            GGUF,
            fail(q4_1, &["model.layers.1.self_attn.v_proj.weight is not GGUF tensor blk.1.attn_v.weight's", ": scale ", "GGUF's rounded to bf16"]),
        ),
        // One code moved one step toward its source value: against the checkpoint it is within the
        // bound (pass::source_one_code_one_step_off_within_the_bound), against the GGUF it is named.
        gguf_arm(
            "control::gguf_one_code_one_step_off",
            one_code_one_step_off,
            GGUF,
            fail(q4_1, &["model.layers.0.self_attn.k_proj.weight is not GGUF tensor blk.0.attn_k.weight's", "tile 1, group 3, row 37, column ", "code 8, GGUF's 7; 1 of its 1024 groups differ"]),
        ),
        sourced(
            "pass::source_one_code_one_step_off_within_the_bound",
            one_code_one_step_off,
            FAITHFUL,
            Expect::Pass { facts: checks_passed },
        ),
        gguf_arm(
            "control::gguf_fc_unblocked",
            fc_unblocked,
            GGUF,
            fail(bf16, &["model.fc.weight (read row-blocked) differs from source fc.weight at row 0, column 1"]),
        ),
        gguf_arm(
            "control::gguf_gain_from_other_layer",
            gain_from_other_layer,
            GGUF,
            fail(bf16, &["model.layers.0.input_layernorm.weight differs from source blk.0.attn_norm.weight", "1 of 11 BF16 tensors"]),
        ),
        gguf_arm(
            "control::gguf_tensor_missing_from_package",
            gain_missing,
            GGUF,
            Expect::Refused {
                check: inventory,
                outcome: Outcome::Fail,
                mentions: &["GGUF tensor blk.1.attn_k_norm.weight has no package counterpart"],
                also: &[("norms.sizes", Outcome::Fail, "the package's own check sees the gain missing too")],
            },
        ),
        gguf_arm(
            "control::gguf_tensor_missing_from_gguf",
            none,
            bent(without_ffn_norm),
            fail(inventory, &["model.layers.1.post_attention_layernorm.weight has no GGUF tensor (llama.cpp's name: blk.1.ffn_norm.weight)"]),
        ),
        gguf_arm(
            "control::gguf_mixed_spellings",
            none,
            bent(one_name_checkpoint_style),
            fail(inventory, &["GGUF tensor layers.1.mlp.up_proj.weight is in the checkpoint's bare names, the file's others in llama.cpp's names"]),
        ),
        gguf_arm(
            "control::gguf_k_quant_tensor",
            none,
            bent(up_proj_as_q4_k),
            Expect::Refused {
                check: q4_1,
                outcome: Outcome::Undecided,
                mentions: &["model.layers.0.mlp.up_proj.weight (GGUF blk.0.ffn_up.weight is q4_K, which the gate does not dequantize)"],
                also: &[],
            },
        ),
        gguf_arm(
            "control::gguf_not_dflash",
            none,
            bent(architecture_llama),
            fail(config, &["general.architecture is \"llama\", not dflash"]),
        ),
        gguf_arm(
            "pass::gguf_shapes_padded_with_ones",
            none,
            bent(padded_with_ones),
            Expect::Pass { facts: exact },
        ),
        gguf_arm(
            "control::gguf_gain_reshaped",
            none,
            bent(gain_reshaped),
            fail(inventory, &["model.layers.0.input_layernorm.weight is [256] in the package, GGUF blk.0.attn_norm.weight is f32 [128, 2] (ne0 first, so [2, 128] rows first)"]),
        ),
        gguf_arm(
            "control::gguf_rope_base_differs",
            none,
            bent(rope_base_other),
            fail(config, &["dflash.rope.freq_base: GGUF 10000, package rope_theta 1000000 (as f32)"]),
        ),
        gguf_arm(
            "control::gguf_scales_rope_the_package_does_not",
            none,
            bent(rope_yarn),
            fail(config, &["dflash.rope.scaling.type: GGUF \"yarn\"", "rope.rope_type \"default\""]),
        ),
        gguf_arm(
            "control::gguf_package_config_states_two_rope_bases",
            package_with_two_rope_bases,
            GGUF,
            Expect::Refused {
                check: config,
                outcome: Outcome::Fail,
                mentions: &["the package config: rope_theta: stated as 10000.0 in rope_parameters.rope_theta and as 1000000.0 in rope_theta"],
                also: &[("config.geometry", Outcome::Fail, "the package's own config is refused for the same two bases: one reading for every check")],
            },
        ),
        gguf_arm(
            "control::gguf_target_layers_raw_ids",
            none,
            bent(target_layers_raw_ids),
            fail(config, &["dflash.target_layers is [1, 3, 5], the package's target_layer_ids themselves: llama.cpp reads dflash.target_layers as each id plus one (the input of layer id + 1, the output of layer id), so it would read the layer before every tap; its converter writes [2, 4, 6]", "; fix: convert the draft again with llama.cpp's convert_hf_to_gguf.py (with --target-model-dir naming its target), which writes each id plus one"]),
        ),
        gguf_arm(
            "control::gguf_target_layers_differ",
            none,
            bent(target_layers_other),
            fail(config, &["dflash.target_layers: GGUF [1, 3, 6], package target_layer_ids [1, 3, 5] (llama.cpp's converter writes each plus one: [2, 4, 6])"]),
        ),
        gguf_arm(
            "pass::gguf_mask_token_id_under_the_older_key",
            none,
            bent(mask_under_the_older_key),
            Expect::Pass { facts: older_mask_key_compared },
        ),
        gguf_arm(
            "control::gguf_mask_token_id_differs",
            none,
            bent(mask_other),
            fail(config, &["tokenizer.ggml.mask_token_id: GGUF 998, package mask_token_id 999"]),
        ),
        gguf_arm(
            "control::gguf_two_mask_ids",
            none,
            bent(two_mask_ids),
            fail(config, &["tokenizer.ggml.mask_token_id is 999 but dflash.mask_token_id is 998: the file states two mask ids"]),
        ),
        gguf_arm(
            "control::gguf_rms_epsilon_differs",
            none,
            bent(epsilon_other),
            fail(config, &["dflash.attention.layer_norm_rms_epsilon: GGUF 0.00001, package rms_norm_eps 0.000001 (as f32)"]),
        ),
        gguf_arm(
            "control::gguf_non_finite_scale",
            none,
            bent(nan_scale_in_gguf),
            fail(q4_1, &[
                "model.layers.1.self_attn.k_proj.weight is not GGUF tensor blk.1.attn_k.weight's",
                "tile 0, group 1, row 1, column 32: GGUF block 9 has a non-finite f16 scale or minimum (d NaN",
            ]),
        ),
        // A converter that widens only normal f16s: block 9's subnormal d (2^-24) rebiased as if it
        // were normal, 2^-15 in the tile. The whole-tile kernel's arithmetic gives those same bits,
        // so only its refusal of subnormals sends the tile to the group path, which names the scale.
        gguf_arm(
            "control::gguf_subnormal_scale_rebiased",
            subnormal_scale_rebiased,
            bent(subnormal_scale_in_gguf),
            fail(q4_1, &[
                "model.layers.1.self_attn.k_proj.weight is not GGUF tensor blk.1.attn_k.weight's",
                "tile 0, group 1, row 1, column 32: scale 0.000030517578 (bf16 0x3800), GGUF's rounded to bf16 ",
            ]),
        ),
    ]
}

fn refitted(s: &mut Scenario) {
    let name = proj(0, Projection::Gate);
    let (n, k, values) = grid_source(&s.package, &name, SEED).expect("a grid's source");
    s.package.tensor_mut(&name).data = quantize(n, k, &values, Quantizer::Refit);
}

/// Layer 1's v_proj made from its GGUF blocks with every `d` and `m` truncated to bf16 (the top
/// 16 bits of the f32) instead of rounded to nearest.
fn scales_truncated(s: &mut Scenario) {
    let name = proj(1, Projection::V);
    let (n, k, values) = grid_source(&s.package, &name, SEED).expect("a grid's source");
    s.package.tensor_mut(&name).data =
        grid_from_blocks_rounding(n, k, &q4_1_blocks(&values), |x| (x.to_bits() >> 16) as u16);
}

/// Row 37 of layer 0's k_proj (128 x 256: tile 1, row 5), group 3: the code of the element furthest
/// from its code's value moved one step toward its source value, so its error stays under a step.
fn one_code_one_step_off(s: &mut Scenario) {
    let name = proj(0, Projection::K);
    let (n, k, values) = grid_source(&s.package, &name, SEED).expect("a grid's source");
    let g = GridGeometry::new(n, k).expect("grid");
    assert_eq!(g.col_blocks, 1, "k_proj is one column block");
    let (row, c) = (37usize, 3usize);
    let (t, r) = (row / 32, row % 32);
    let data = &mut s.package.tensor_mut(&name).data;
    let tile = &mut data[t * TILE_BYTES as usize..(t + 1) * TILE_BYTES as usize];
    let plane = |at: usize| half::bf16::from_le_bytes([tile[at], tile[at + 1]]).to_f32();
    let (d, m) = (plane(2 * (c * 32 + r)), plane(512 + 2 * (c * 32 + r)));
    let code = |tile: &[u8], col: usize| {
        let byte = tile[1024 + (r / 16) * 2048 + col * 8 + (r % 16) / 2];
        if r % 2 == 0 {
            byte & 0x0f
        } else {
            byte >> 4
        }
    };
    let (col, q, step) = (c * 32..c * 32 + 32)
        .map(|col| {
            let q = code(tile, col);
            let x = (values[row * k as usize + col] - m) / d - f32::from(q);
            (col, q, x)
        })
        .filter(|&(_, q, x)| (x > 0.0 && q < 15) || (x < 0.0 && q > 0))
        .max_by(|a, b| a.2.abs().total_cmp(&b.2.abs()))
        .expect("a code that can move toward its source value");
    set_code(tile, col, r, if step > 0.0 { q + 1 } else { q - 1 });
}

fn padded_code_flipped(s: &mut Scenario) {
    let t = s.package.tensor_mut(&proj(0, Projection::K));
    let tile = &mut t.data[5 * TILE_BYTES as usize..6 * TILE_BYTES as usize];
    let (col, r) = (270 - 256, 70 - 64);
    let byte = 1024 + (r / 16) * 2048 + col * 8 + (r % 16) / 2;
    tile[byte] ^= 0x01;
}

fn without_ffn_norm(f: &mut GgufFile) {
    f.tensors.retain(|t| t.0 != "blk.1.ffn_norm.weight");
}

fn one_name_checkpoint_style(f: &mut GgufFile) {
    let t = f
        .tensors
        .iter_mut()
        .find(|t| t.0 == "blk.1.ffn_up.weight")
        .expect("up_proj");
    t.0 = "layers.1.mlp.up_proj.weight".into();
}

/// Layer 0's up_proj (K = 256, one Q4_K block per row) as a Q4_K tensor of the right size.
fn up_proj_as_q4_k(f: &mut GgufFile) {
    let t = f
        .tensors
        .iter_mut()
        .find(|t| t.0 == "blk.0.ffn_up.weight")
        .expect("up_proj");
    let rows = t.1[1] as usize;
    assert_eq!(t.1[0], 256, "one Q4_K block a row");
    t.2 = GgmlType::Q4_K;
    t.3 = vec![0; rows * GgmlType::Q4_K.type_size() as usize];
}

fn architecture_llama(f: &mut GgufFile) {
    let mut value = 5u64.to_le_bytes().to_vec();
    value.extend_from_slice(b"llama");
    assert!(f.replace("general.architecture", 8, &value));
}

fn target_layers(f: &mut GgufFile, layers: &[i32]) {
    let mut value = 5u32.to_le_bytes().to_vec();
    value.extend_from_slice(&(layers.len() as u64).to_le_bytes());
    for l in layers {
        value.extend_from_slice(&l.to_le_bytes());
    }
    assert!(f.replace("dflash.target_layers", 9, &value));
}

/// fc as `ne = [512, 256, 1, 1]` and a gain as `[256, 1]`: ggml's padding of a shape with 1s, which
/// gguf-py and llama.cpp read as the same tensors.
fn padded_with_ones(f: &mut GgufFile) {
    for (name, dims, _, _) in f.tensors.iter_mut() {
        if name == "fc.weight" {
            dims.extend([1, 1]);
        }
        if name == "blk.0.attn_norm.weight" {
            dims.push(1);
        }
    }
}

/// A gain of 256 stored as `ne = [128, 2]`: the same bytes, another shape.
fn gain_reshaped(f: &mut GgufFile) {
    let gain = f
        .tensors
        .iter_mut()
        .find(|t| t.0 == "blk.0.attn_norm.weight")
        .expect("the gain");
    gain.1 = vec![128, 2];
}

fn rope_base_other(f: &mut GgufFile) {
    assert!(f.replace("dflash.rope.freq_base", 6, &10_000f32.to_le_bytes()));
}

/// The file scales its positions (yarn, 4x) where the package's config states no scaling.
fn rope_yarn(f: &mut GgufFile) {
    f.string("dflash.rope.scaling.type", "yarn");
    f.f32("dflash.rope.scaling.factor", 4.0);
}

/// The package's config states a second RoPE base, in Transformers 5's home, beside its own.
fn package_with_two_rope_bases(s: &mut Scenario) {
    s.config_mut().insert(
        "rope_parameters".into(),
        serde_json::json!({"rope_theta": 10000.0}),
    );
}

/// The HF ids themselves, as a converter that does not follow llama.cpp would write them.
fn target_layers_raw_ids(f: &mut GgufFile) {
    target_layers(f, &[1, 3, 5]);
}

fn target_layers_other(f: &mut GgufFile) {
    target_layers(f, &[1, 3, 6]);
}

/// The mask id where older writers put it, `dflash.mask_token_id`, and not under the tokenizer's key.
fn mask_under_the_older_key(f: &mut GgufFile) {
    let id = mask_id(f);
    assert!(f.remove("tokenizer.ggml.mask_token_id"));
    f.u32("dflash.mask_token_id", id);
}

fn mask_other(f: &mut GgufFile) {
    let id = mask_id(f);
    assert!(f.replace("tokenizer.ggml.mask_token_id", 4, &(id - 1).to_le_bytes()));
}

/// The tokenizer's key right, the older key beside it one lower.
fn two_mask_ids(f: &mut GgufFile) {
    let id = mask_id(f);
    f.u32("dflash.mask_token_id", id - 1);
}

fn mask_id(f: &GgufFile) -> u32 {
    let (_, _, value) = f
        .metadata
        .iter()
        .find(|(k, _, _)| k == "tokenizer.ggml.mask_token_id")
        .expect("the converter's mask key");
    u32::from_le_bytes(value[..4].try_into().expect("a u32"))
}

/// The faithful pair's facts, and its mask id compared under the older key.
fn older_mask_key_compared(r: &Report) -> Result<(), String> {
    exact(r)?;
    compared_key(r, "dflash.mask_token_id")
}

fn compared_key(r: &Report, key: &str) -> Result<(), String> {
    let check = r.check(CheckId::SOURCE_CONFIG).ok_or("no source.config")?;
    let evidence = serde_json::to_value(check.evidence()).map_err(|e| e.to_string())?;
    if !evidence["compared"]
        .as_array()
        .is_some_and(|a| a.iter().any(|k| k == key))
    {
        return Err(format!("source.config did not compare {key}: {evidence}"));
    }
    Ok(())
}

fn epsilon_other(f: &mut GgufFile) {
    assert!(f.replace(
        "dflash.attention.layer_norm_rms_epsilon",
        6,
        &1e-5f32.to_le_bytes()
    ));
}

/// A GGUF block's f16 scale as a NaN (the package's group stays the finite one it was made from).
/// Block 9 of layer 1's k_proj (row 1, group 1) given the smallest subnormal f16 scale.
fn subnormal_scale_in_gguf(f: &mut GgufFile) {
    k_proj_block_9_scale(f, 0x0001);
}

/// The scale of row 1, group 1 in tile 0 of layer 1's k_proj (element 33 of the scale plane) set to
/// what rebiasing `subnormal_scale_in_gguf`'s f16 as a normal one gives: 2^-15.
fn subnormal_scale_rebiased(s: &mut Scenario) {
    let data = &mut s.package.tensor_mut(&proj(1, Projection::K)).data;
    data[66..68].copy_from_slice(&0x3800u16.to_le_bytes());
}

fn nan_scale_in_gguf(f: &mut GgufFile) {
    k_proj_block_9_scale(f, 0x7e00);
}

/// Block 9 of layer 1's k_proj (row 1, the second block of its row: K = 256 is 8 blocks a row)
/// given the f16 scale `bits`.
fn k_proj_block_9_scale(f: &mut GgufFile, bits: u16) {
    let t = f
        .tensors
        .iter_mut()
        .find(|t| t.0 == "blk.1.attn_k.weight")
        .expect("k_proj");
    t.3[9 * 20..9 * 20 + 2].copy_from_slice(&bits.to_le_bytes());
}

/// A trial: `Err` says what the gate got wrong.
pub type Trial = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// A source the gate must refuse (exit 2): what is done to the source directory after the GGUF is
/// written there, and the path `--source` then names; the reason and what the message names.
struct Refused {
    name: &'static str,
    after: After,
    reason: &'static str,
    mentions: &'static [&'static str],
    /// The reader's rule, for a GGUF it refuses (empty otherwise).
    rule: &'static str,
}

/// What is done to the source: the directory bent (the path `--source` names returned), or the
/// GGUF's bytes edited in place (the reader must refuse it).
#[derive(Clone, Copy)]
enum After {
    Dir(fn(&Path) -> PathBuf),
    Bytes(fn(&mut Vec<u8>, &dflash_gate::__private::gguf::Header)),
    /// The faithful GGUF rebuilt with its entries changed, and its bytes then cut (a layout a byte
    /// edit cannot reach: an entry added or a tensor appended).
    Rebuilt(fn(&mut GgufFile) -> Vec<u8>),
}

/// The source directory bent by `after` (which returns the path `--source` names).
const fn bent_dir(
    name: &'static str,
    after: fn(&Path) -> PathBuf,
    mentions: &'static [&'static str],
) -> Refused {
    Refused {
        name,
        after: After::Dir(after),
        reason: "malformed",
        mentions,
        rule: "",
    }
}

/// A GGUF edited so that the reader refuses it for the rule `mention` names.
const fn reader(
    name: &'static str,
    edit: fn(&mut Vec<u8>, &dflash_gate::__private::gguf::Header),
    mention: &'static str,
) -> Refused {
    Refused {
        name,
        after: After::Bytes(edit),
        reason: "malformed",
        mentions: &["draft.gguf"],
        rule: mention,
    }
}

/// A GGUF rebuilt by `rebuild` that the reader must refuse for the rule `mention` names.
const fn rebuilt(
    name: &'static str,
    rebuild: fn(&mut GgufFile) -> Vec<u8>,
    mention: &'static str,
) -> Refused {
    Refused {
        name,
        after: After::Rebuilt(rebuild),
        reason: "malformed",
        mentions: &["draft.gguf"],
        rule: mention,
    }
}

/// A metadata entry whose key has no bytes, its value well-formed: ggml refuses the file.
fn empty_key(f: &mut GgufFile) -> Vec<u8> {
    f.u32("", 7);
    f.bytes()
}

/// A 3-element F32 tensor appended (12 bytes, padded to 32), the file cut where its data ends: the
/// data section is 20 bytes short of the padded size ggml reads.
fn data_short_of_its_padding(f: &mut GgufFile) -> Vec<u8> {
    f.tensors
        .push(("extra.weight".into(), vec![3], GgmlType::F32, vec![0; 12]));
    let mut bytes = f.bytes();
    assert_eq!(f.alignment, 32, "the default alignment");
    bytes.truncate(bytes.len() - 20);
    bytes
}

/// The source directory's GGUF as bytes, edited by `edit`, written back; the file's path.
fn edit_gguf(
    dir: &Path,
    edit: impl FnOnce(&mut Vec<u8>, &dflash_gate::__private::gguf::Header),
) -> PathBuf {
    let path = dir.join("draft.gguf");
    let mut bytes = std::fs::read(&path).expect("the GGUF");
    let header = dflash_gate::__private::gguf::parse(&bytes).expect("a faithful GGUF parses");
    edit(&mut bytes, &header);
    std::fs::write(&path, bytes).expect("write the GGUF");
    path
}

fn find(bytes: &[u8], needle: &[u8]) -> usize {
    bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("in the file")
}

/// Where the second tensor's info has its ggml type; its offset is 4 bytes on.
fn second_type_at(bytes: &[u8], h: &dflash_gate::__private::gguf::Header) -> usize {
    let t = &h.tensors[1];
    let mut name = (t.name.len() as u64).to_le_bytes().to_vec();
    name.extend_from_slice(t.name.as_bytes());
    find(bytes, &name) + name.len() + 4 + 8 * t.dims.len()
}

/// The source directory's GGUF under another name; its path.
fn renamed(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::rename(dir.join("draft.gguf"), &path).expect("rename");
    path
}

/// The second tensor's offset moved by `delta` bytes.
fn move_second(bytes: &mut [u8], h: &dflash_gate::__private::gguf::Header, delta: i64) {
    let at = second_type_at(bytes, h) + 4;
    let offset = h.tensors[1]
        .offset
        .checked_add_signed(delta)
        .expect("an offset");
    put(bytes, at, &offset.to_le_bytes());
}

fn put(bytes: &mut [u8], at: usize, with: &[u8]) {
    bytes[at..at + with.len()].copy_from_slice(with);
}

const MALFORMED: &[&str] = &["draft.gguf", "is not a GGUF the gate reads"];

const REFUSED: &[Refused] = &[
    bent_dir(
        "gguf::refused::both_a_gguf_and_a_checkpoint",
        |dir| {
            std::fs::write(dir.join("model.safetensors"), b"").expect("write");
            dir.to_owned()
        },
        &["holds both a GGUF (draft.gguf) and a safetensors checkpoint (model.safetensors): the gate does not pick"],
    ),
    bent_dir(
        "gguf::refused::two_ggufs",
        |dir| {
            std::fs::copy(dir.join("draft.gguf"), dir.join("other.gguf")).expect("copy");
            dir.to_owned()
        },
        &["holds 2 GGUF files (draft.gguf, other.gguf): the gate does not pick"],
    ),
    bent_dir(
        "gguf::refused::a_shard_named",
        |dir| renamed(dir, "draft-00001-of-00002.gguf"),
        &["draft-00001-of-00002.gguf is one shard of a split GGUF: sharded GGUFs are not read"],
    ),
    bent_dir(
        "gguf::refused::a_directory_of_shards",
        |dir| {
            renamed(dir, "draft-00001-of-00002.gguf");
            std::fs::write(dir.join("draft-00002-of-00002.gguf"), b"").expect("write");
            dir.to_owned()
        },
        &["holds a split GGUF (draft-00001-of-00002.gguf, draft-00002-of-00002.gguf): sharded GGUFs are not read"],
    ),
    bent_dir(
        "gguf::refused::a_file_not_a_gguf",
        |dir| renamed(dir, "draft.bin"),
        &["draft.bin", "is a file but not a .gguf"],
    ),
    bent_dir(
        "gguf::refused::truncated",
        |dir| {
            let path = dir.join("draft.gguf");
            let bytes = std::fs::read(&path).expect("read");
            std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("write");
            path
        },
        &["draft.gguf", "past the end of the"],
    ),
    reader(
        "gguf::refused::bad_magic",
        |b, _| put(b, 0, b"GGUX"),
        "at byte 0: starts with GGUX, not the magic GGUF",
    ),
    reader(
        "gguf::refused::version_1",
        |b, _| put(b, 4, &1u32.to_le_bytes()),
        "at byte 4: is GGUF version 1",
    ),
    reader(
        "gguf::refused::big_endian",
        |b, _| put(b, 4, &3u32.to_be_bytes()),
        "a big-endian GGUF, which the gate does not read",
    ),
    // A million tensor infos (under the reader's cap) need more bytes than the file has.
    reader(
        "gguf::refused::a_count_past_the_end",
        |b, _| put(b, 8, &1_000_000u64.to_le_bytes()),
        "the file is truncated or a length in it is false",
    ),
    reader(
        "gguf::refused::a_length_past_the_end",
        |b, _| {
                // general.architecture's value: u32 type 8, then the string's u64 length.
                let at = find(b, b"general.architecture") + "general.architecture".len() + 4;
                put(b, at, &(1u64 << 40).to_le_bytes())
            },
        "the file is truncated or a length in it is false",
    ),
    reader(
        "gguf::refused::a_duplicate_key",
        |b, _| {
            let at = find(b, b"dflash.block_size");
            put(b, at, b"dflash.vocab_size")
        },
        "metadata key dflash.vocab_size appears twice",
    ),
    rebuilt(
        "gguf::refused::an_empty_key",
        empty_key,
        "a metadata key of 0 bytes: ggml refuses an empty key",
    ),
    rebuilt(
        "gguf::refused::data_short_of_its_padding",
        data_short_of_its_padding,
        "tensor extra.weight's data padded to the alignment ends at byte",
    ),
    reader(
        "gguf::refused::a_misaligned_offset",
        |b, h| move_second(b, h, 1),
        "not a multiple of the alignment 32",
    ),
    reader(
        "gguf::refused::an_overlapping_offset",
        |b, h| move_second(b, h, -32),
        "inside the previous tensor",
    ),
    reader(
        "gguf::refused::a_gap",
        |b, h| move_second(b, h, 32),
        "leaving a gap after the previous tensor",
    ),
    reader(
        "gguf::refused::an_unknown_type",
        |b, h| {
            let at = second_type_at(b, h);
            put(b, at, &4u32.to_le_bytes())
        },
        "has ggml type 4, which ggml does not define",
    ),
    reader(
        "gguf::refused::a_dimension_product_overflows",
        |b, h| {
                // The second tensor (a gain: one dimension) 2^62 long: its bytes overflow.
                let at = second_type_at(b, h) - 8;
                assert_eq!(h.tensors[1].dims.len(), 1, "a gain");
                put(b, at, &(1u64 << 62).to_le_bytes())
            },
        "overflows ggml's int64",
    ),
];

/// A package and its faithful GGUF under `root`: the package's directory and the options that
/// compare it with the GGUF.
fn faithful_pair(
    root: &Path,
    base: super::Base,
) -> Result<(PathBuf, dflash_gate::Options), String> {
    super::prepare_arm(
        root,
        base,
        Encoding::default(),
        none,
        super::Extra::Source(with(GGUF)),
    )
}

fn refused(case: &Refused) -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (dir, mut options) = faithful_pair(root.path(), super::Base::Small)?;
    let source = root.path().join("source");
    options.source = Some(match case.after {
        After::Dir(bend) => bend(&source),
        After::Bytes(edit) => edit_gguf(&source, edit),
        After::Rebuilt(rebuild) => {
            let mut package =
                Package::generate(&super::Base::Small.geometry(), Encoding::default(), SEED);
            let mut file = gguf_for(&mut package, OPTIONS, SEED).map_err(|e| e.to_string())?;
            let path = source.join("draft.gguf");
            std::fs::write(&path, rebuild(&mut file)).map_err(|e| e.to_string())?;
            path
        }
    });
    let err = match dflash_gate::gate(&dir, &options) {
        Ok(r) => {
            return Err(format!(
                "the gate ran ({}) over a source it must refuse",
                r.verdict()
            ))
        }
        Err(e) => e,
    };
    let text = err.to_string();
    if err.reason() != case.reason || !text.starts_with("--source ") {
        return Err(format!(
            "expected --source ... with reason {}, got {}: {text}",
            case.reason,
            err.reason()
        ));
    }
    if let Some(m) = case.mentions.iter().find(|m| !text.contains(*m)) {
        return Err(format!("the error does not name {m:?}: {text}"));
    }
    // A file the reader refuses is named with the reader's words and the rule.
    if matches!(case.after, After::Bytes(_) | After::Rebuilt(_))
        && !MALFORMED
            .iter()
            .chain([&case.rule])
            .all(|m| text.contains(m))
    {
        return Err(format!(
            "the error is not the reader's refusal for {:?}: {text}",
            case.rule
        ));
    }
    Ok(())
}

/// The faithful pair gated, then the GGUF rewritten with its metadata edited by `edit` and gated
/// again: `check` must have `outcome` naming `mentions`, and nothing else change.
fn metadata_edited(
    edit: impl FnOnce(&mut GgufFile),
    outcome: Outcome,
    mentions: &[&str],
) -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (dir, options) = faithful_pair(root.path(), super::Base::Small)?;
    let gate = || dflash_gate::gate(&dir, &options).map_err(|e| e.to_string());
    let good = gate()?;
    let mut package = Package::generate(&super::Base::Small.geometry(), Encoding::default(), SEED);
    let mut file = gguf_for(&mut package, OPTIONS, SEED).map_err(|e| e.to_string())?;
    edit(&mut file);
    std::fs::write(root.path().join("source/draft.gguf"), file.bytes())
        .map_err(|e| e.to_string())?;
    let bad = gate()?;
    super::judge(&good, &bad, CheckId::SOURCE_CONFIG, outcome, mentions, &[])
}

/// The compared keys stored in other integer types (u64, i64, u16, u8) and the epsilon as an f64,
/// each with the config's value: compared by value (floats as f32), so source.config still passes.
fn other_types_same_values() -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (dir, options) = faithful_pair(root.path(), super::Base::Small)?;
    let mut package = Package::generate(&super::Base::Small.geometry(), Encoding::default(), SEED);
    let mut file = gguf_for(&mut package, OPTIONS, SEED).map_err(|e| e.to_string())?;
    let g = super::Base::Small.geometry();
    let retyped = [
        file.replace("dflash.block_count", 10, &g.layers.to_le_bytes()),
        file.replace(
            "dflash.embedding_length",
            11,
            &(g.hidden as i64).to_le_bytes(),
        ),
        file.replace(
            "dflash.attention.head_count",
            2,
            &(g.heads as u16).to_le_bytes(),
        ),
        file.replace("dflash.attention.head_count_kv", 0, &[g.kv_heads as u8]),
        file.replace(
            "dflash.attention.layer_norm_rms_epsilon",
            12,
            &1e-6f64.to_le_bytes(),
        ),
    ];
    if retyped.contains(&false) {
        return Err("a key to retype is not in the GGUF".into());
    }
    std::fs::write(root.path().join("source/draft.gguf"), file.bytes())
        .map_err(|e| e.to_string())?;
    let r = dflash_gate::gate(&dir, &options).map_err(|e| e.to_string())?;
    let config = r.check(CheckId::SOURCE_CONFIG).ok_or("no source.config")?;
    if config.outcome() != Outcome::Pass {
        return Err(format!(
            "source.config {}: {}",
            config.outcome(),
            config.message()
        ));
    }
    Ok(())
}

/// The keys section 12.2 requires, and the config field each stands for.
const REQUIRED: [(&str, &str); 5] = [
    ("dflash.block_count", "num_hidden_layers"),
    ("dflash.embedding_length", "hidden_size"),
    ("dflash.feed_forward_length", "intermediate_size"),
    ("dflash.attention.head_count", "num_attention_heads"),
    ("dflash.attention.head_count_kv", "num_key_value_heads"),
];

/// A DFlash2 package against the GGUF it was converted from (spec 18.3): its convolutions and
/// selector are paired by llama.cpp's names (`blk.{i}.attn_conv_base`, `selector_predecessor.weight`,
/// ...) and compared as every other tensor, so the faithful pair passes every check, 36 tensors
/// paired where the first family's 25 are.
fn dflash2_against_gguf() -> Result<(), String> {
    let r = dflash2_pair(unbent)?;
    let inventory = r
        .check(CheckId::SOURCE_INVENTORY)
        .ok_or("no source.inventory")?;
    if !inventory
        .message()
        .contains("every one of the 36 package tensors")
    {
        return Err(format!("source.inventory: {}", inventory.message()));
    }
    match r.checks().iter().find(|c| c.outcome() != Outcome::Pass) {
        Some(c) => Err(format!("{} {}: {}", c.id(), c.outcome(), c.message())),
        None => Ok(()),
    }
}

/// The DFlash2 package gated against its GGUF bent by `bend`.
fn dflash2_pair(bend: fn(&mut GgufFile)) -> Result<Report, String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (dir, options) = super::prepare_arm(
        root.path(),
        super::Base::Dflash2,
        Encoding::default(),
        none,
        super::Extra::Source(with(GgufSource { bend, ..GGUF })),
    )?;
    dflash_gate::gate(&dir, &options).map_err(|e| e.to_string())
}

/// Every check passes but `owed`, which has each outcome and names each of its words.
fn only(r: &Report, owed: &[(&str, Outcome, &[&str])]) -> Result<(), String> {
    for c in r.checks() {
        let (outcome, words) = match owed.iter().find(|(id, ..)| *id == c.id()) {
            Some((_, outcome, words)) => (*outcome, *words),
            None => (Outcome::Pass, &[][..]),
        };
        if c.outcome() != outcome || words.iter().any(|w| !c.message().contains(w)) {
            return Err(format!(
                "{}: {} {}, owed {outcome} naming {words:?}",
                c.id(),
                c.outcome(),
                c.message()
            ));
        }
    }
    Ok(())
}

/// A first-family GGUF against the DFlash2 package (its four keys and seven kinds of tensor
/// dropped): no conversion of it. `source.config` names each key the converter dropped, and
/// `source.inventory` each tensor, by llama.cpp's name.
fn dflash2_against_a_first_family_gguf() -> Result<(), String> {
    let r = dflash2_pair(|f| {
        for key in [
            "dflash.conv_kernel_size",
            "dflash.conv_group_size",
            "dflash.selector_rank",
            "dflash.selector_top_k",
        ] {
            assert!(f.remove(key));
        }
        f.tensors
            .retain(|t| !t.0.contains("_conv_") && !t.0.starts_with("selector_"));
    })?;
    only(
        &r,
        &[
            (
                CheckId::SOURCE_CONFIG,
                Outcome::Fail,
                &["dflash.conv_kernel_size is absent, but the package config states conv_kernel_size"],
            ),
            (
                CheckId::SOURCE_INVENTORY,
                Outcome::Fail,
                &["model.layers.0.attention_conv.base_kernel has no GGUF tensor (llama.cpp's name: blk.0.attn_conv_base)"],
            ),
        ],
    )
}

/// One base kernel's value changed in the GGUF: `source.bf16` names it.
fn dflash2_conv_base_differs_from_its_gguf() -> Result<(), String> {
    let r = dflash2_pair(|f| {
        let data = &mut super::gguf_draft::tensor(f, "blk.1.ffn_conv_base").3;
        data[4 * 7..4 * 8].copy_from_slice(&0.75f32.to_le_bytes());
    })?;
    only(
        &r,
        &[(
            CheckId::SOURCE_BF16,
            Outcome::Fail,
            &["model.layers.1.mlp_conv.base_kernel"],
        )],
    )
}

/// Every trial of this module, named.
pub fn trials() -> Vec<(String, Trial)> {
    let mut out: Vec<(String, Trial)> = REFUSED
        .iter()
        .map(|case| {
            (
                format!("arms::{}", case.name),
                Box::new(move || refused(case)) as Trial,
            )
        })
        .collect();
    for (key, field) in REQUIRED {
        let absent: Trial = Box::new(move || {
            metadata_edited(
                |f| assert!(f.remove(key)),
                Outcome::Fail,
                &[&format!(
                    "{key} is absent (required: the package's {field})"
                )],
            )
        });
        out.push((format!("arms::gguf::config::{key}_absent"), absent));
        let different: Trial = Box::new(move || {
            let mut expected = None;
            let bad = {
                let mut package =
                    Package::generate(&super::Base::Small.geometry(), Encoding::default(), SEED);
                let file = gguf_for(&mut package, OPTIONS, SEED).map_err(|e| e.to_string())?;
                let (_, _, value) = file
                    .metadata
                    .iter()
                    .find(|(k, _, _)| k == key)
                    .ok_or("no such key")?;
                let v = u32::from_le_bytes(value[..4].try_into().map_err(|_| "a u32")?);
                expected.replace(format!("{key}: GGUF {}, package {field} {v}", v + 1));
                v + 1
            };
            let expected = expected.unwrap_or_default();
            metadata_edited(
                |f| assert!(f.replace(key, 4, &bad.to_le_bytes())),
                Outcome::Fail,
                &[&expected],
            )
        });
        out.push((format!("arms::gguf::config::{key}_differs"), different));
    }
    out.push((
        "arms::gguf::pass::dflash2_package_against_its_gguf".into(),
        Box::new(dflash2_against_gguf),
    ));
    out.push((
        "arms::gguf::control::dflash2_package_against_a_first_family_gguf".into(),
        Box::new(dflash2_against_a_first_family_gguf),
    ));
    out.push((
        "arms::gguf::control::dflash2_conv_base_differs_from_its_gguf".into(),
        Box::new(dflash2_conv_base_differs_from_its_gguf),
    ));
    out.push((
        "arms::gguf::config::other_integer_and_float_types_compare_by_value".into(),
        Box::new(other_types_same_values),
    ));
    out.push((
        "arms::gguf::a_difference_is_located_in_the_evidence".to_owned(),
        Box::new(located_in_evidence) as Trial,
    ));
    out
}

/// A FAIL of `source.q4_1` against a GGUF gives the first difference as evidence a program can
/// read (tile, group, row, column, block, the two codes), not only in the message.
fn located_in_evidence() -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (dir, options) = super::prepare_arm(
        root.path(),
        super::Base::Small,
        Encoding::default(),
        one_code_one_step_off,
        super::Extra::Source(SOURCE),
    )?;
    let report = dflash_gate::gate(&dir, &options).map_err(|e| e.to_string())?;
    let check = report.check(CheckId::SOURCE_Q4_1).ok_or("no source.q4_1")?;
    let evidence = serde_json::to_value(check.evidence()).map_err(|e| e.to_string())?;
    let grid = &evidence["exact"]["model.layers.0.self_attn.k_proj.weight"];
    let first = &grid["first"];
    let want = serde_json::json!({"tile": 1, "group": 3, "row": 37, "kind": "code",
        "package_value": 8, "gguf_value": 7});
    let matches = want
        .as_object()
        .is_some_and(|w| w.iter().all(|(k, v)| &first[k] == v));
    let column = first["column"].as_u64().unwrap_or(0);
    let block = first["gguf_block"].as_u64();
    let per_row = 256 / 32;
    if check.outcome() != Outcome::Fail
        || !matches
        || !(96..128).contains(&column)
        || block != Some(37 * per_row + 3)
        || grid["groups_differing"] != 1
    {
        return Err(format!(
            "source.q4_1 {}: the first difference in evidence is {first}, expected {want} with a column of group 3 and block {}",
            check.outcome(),
            37 * per_row + 3
        ));
    }
    Ok(())
}
