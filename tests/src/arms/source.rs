//! Arms for `--source`: a package against the checkpoint it was converted from. Each control starts
//! from a faithful pair (the checkpoint written beside the package, the package's grids quantized from
//! its values) and breaks one thing the form checks cannot see.

use super::{fail, none, Arm, Base, Expect, Extra};
use crate::defects::{gain, proj, Scenario};
use crate::synth::source::{grid_source, quantize, source_matrix, Quantizer, SourceOptions};
use crate::synth::Encoding;
use dflash_gate::__private::dtype::Dtype;
use dflash_gate::__private::family::{LayerGain, Projection, Role};
use dflash_gate::__private::tile::{GridGeometry, TILE_BYTES};
use dflash_gate::{NotChecked, Outcome, Report};
use half::bf16;
use std::path::Path;

/// How an arm's source checkpoint is written, and what is done to it afterwards.
#[derive(Clone, Copy)]
pub struct Source {
    pub options: SourceOptions,
    pub after: fn(&Path),
    /// A GGUF instead of the checkpoint (`--source FILE.gguf`, spec section 12).
    pub gguf: Option<super::gguf::GgufSource>,
}

fn untouched(_: &Path) {}

impl Source {
    /// The same checkpoint, unbent: the control's good twin.
    pub fn faithful(self) -> Source {
        Source {
            options: SourceOptions {
                omit: None,
                ..self.options
            },
            after: untouched,
            gguf: self.gguf.map(super::gguf::GgufSource::faithful),
        }
    }
}

/// A faithful BF16 checkpoint in one file, left as written.
pub const FAITHFUL: Source = Source {
    options: SourceOptions {
        dtype: Dtype::Bf16,
        shards: 1,
        quantizer: Quantizer::MinMax,
        omit: None,
        index_one_file: false,
    },
    after: untouched,
    gguf: None,
};

/// The faithful checkpoint, then bent by `after`.
fn bent(after: fn(&Path)) -> Source {
    Source { after, ..FAITHFUL }
}

pub(super) fn sourced(
    name: &'static str,
    defect: fn(&mut Scenario),
    source: Source,
    expect: Expect,
) -> Arm {
    Arm {
        name,
        base: Base::Small,
        encoding: Encoding::default(),
        defect,
        extra: Extra::Source(source),
        expect,
    }
}

fn compared(r: &Report) -> Result<(), String> {
    let grids = &r.census().source_grids;
    if grids.len() != 14 {
        return Err(format!("{} grids compared, 14 expected", grids.len()));
    }
    // The largest error is unclamped; none of the generator's faithful quantizers clips an outlier by
    // a step (ggml's importance-matrix search trims a range: on these grids it leaves values up to 0.91
    // of a step outside it), so a faithful grid of theirs is within a step even before clamping.
    for g in grids {
        if !(g.max_error_steps <= 1.0 && g.relative_rms < 0.15 && g.out_of_bound == 0) {
            return Err(format!(
                "{}: largest error {} steps, relative RMS {}",
                g.name, g.max_error_steps, g.relative_rms
            ));
        }
    }
    checks_passed(r)
}

/// Every source check ran and passed, the NOT CHECKED lines `--source` answers went, and the
/// provenance line stayed.
pub(super) fn checks_passed(r: &Report) -> Result<(), String> {
    for id in dflash_gate::__private::source::CHECKS {
        if r.check(id).map(|c| c.outcome()) != Some(Outcome::Pass) {
            return Err(format!("{id} did not run and pass"));
        }
    }
    if [NotChecked::Content, NotChecked::RealGroupCodes]
        .iter()
        .any(|n| r.not_checked().contains(n))
    {
        return Err("a NOT CHECKED line that --source answers survived it".into());
    }
    if !r.not_checked().contains(&NotChecked::Provenance) {
        return Err("--source removed the provenance line, which only --manifest answers".into());
    }
    Ok(())
}

pub fn arms() -> Vec<Arm> {
    let refit = Source {
        options: SourceOptions {
            quantizer: Quantizer::Refit,
            ..FAITHFUL.options
        },
        ..FAITHFUL
    };
    let ggml_imatrix = Source {
        options: SourceOptions {
            quantizer: Quantizer::GgmlImatrix,
            ..FAITHFUL.options
        },
        ..FAITHFUL
    };
    let f32_source = Source {
        options: SourceOptions {
            dtype: Dtype::F32,
            ..FAITHFUL.options
        },
        ..FAITHFUL
    };
    let sharded = Source {
        options: SourceOptions {
            shards: 3,
            ..FAITHFUL.options
        },
        ..FAITHFUL
    };
    let without_gain = Source {
        options: SourceOptions {
            omit: Some("layers.1.post_attention_layernorm.weight"),
            ..FAITHFUL.options
        },
        ..FAITHFUL
    };
    let q4_1 = dflash_gate::CheckId::SOURCE_Q4_1;
    let bf16 = dflash_gate::CheckId::SOURCE_BF16;
    vec![
        sourced(
            "pass::source_min_max_quantizer",
            none,
            FAITHFUL,
            Expect::Pass { facts: compared },
        ),
        sourced(
            "pass::source_refitting_quantizer",
            none,
            refit,
            Expect::Pass { facts: compared },
        ),
        sourced(
            "pass::source_ggml_imatrix_quantizer",
            none,
            ggml_imatrix,
            Expect::Pass { facts: compared },
        ),
        sourced(
            "pass::source_f32",
            none,
            f32_source,
            Expect::Pass { facts: compared },
        ),
        sourced(
            "pass::source_shapes_with_trailing_ones",
            none,
            bent(source_trailing_ones),
            Expect::Pass { facts: compared },
        ),
        sourced(
            "control::source_gain_reshaped",
            none,
            bent(source_gain_reshaped),
            fail(
                dflash_gate::CheckId::SOURCE_INVENTORY,
                &["model.layers.0.input_layernorm.weight is [256] in the package, source layers.0.input_layernorm.weight is BF16 [128, 2]"],
            ),
        ),
        sourced(
            "pass::source_sharded",
            none,
            sharded,
            Expect::Pass { facts: compared },
        ),
        sourced(
            "pass::source_names_model_prefixed",
            none,
            bent(source_names_prefixed),
            Expect::Pass { facts: compared },
        ),
        sourced(
            "control::source_tensor_in_both_spellings",
            none,
            bent(source_gain_in_both_spellings),
            fail(
                dflash_gate::CheckId::SOURCE_INVENTORY,
                &["source tensor model.layers.0.input_layernorm.weight is a second spelling of layers.0.input_layernorm.weight"],
            ),
        ),
        sourced(
            "control::source_ranges_clipped",
            ranges_clipped,
            FAITHFUL,
            fail(
                q4_1,
                &[
                    "model.layers.0.mlp.down_proj.weight",
                    "its relative RMS error is 0.",
                    "above the 0.25 no faithful 4-bit grid reaches",
                    "1 of 14 grids fail",
                ],
            ),
        ),
        // A grid whose tile header tiles.headers_sane refuses (a NaN or negative scale, an infinite
        // minimum) is not compared: source.q4_1 is blocked by it, never a PASS over the rest of the
        // grid, and never a panic on the range such a header makes.
        broken_header("control::source_nan_scale_grid_not_compared", super::nan_scale, &["model.layers.1.mlp.gate_proj.weight"]),
        broken_header("control::source_negative_scale_grid_not_compared", super::negative_scale, &["model.layers.1.mlp.down_proj.weight"]),
        broken_header("control::source_infinite_minimum_grid_not_compared", super::infinite_minimum, &["model.layers.0.self_attn.v_proj.weight"]),
        // A source value so large (1e38) that its square overflows f32, at the top of its group's
        // range, so its clamped value is in bound: the grid's relative RMS error is near 1, and
        // must not become NaN and pass the ceiling.
        sourced(
            "control::source_huge_value_fails_the_ceiling",
            none,
            bent(huge_source_value),
            fail(
                q4_1,
                &[
                    "model.layers.0.mlp.down_proj.weight",
                    "its relative RMS error is 1.000",
                    "1 of 14 grids fail",
                ],
            ),
        ),
        sourced(
            "control::source_tiles_column_block_major",
            tiles_column_block_major,
            FAITHFUL,
            fail(
                q4_1,
                &[
                    "model.layers.0.mlp.down_proj.weight",
                    "source layers.0.mlp.down_proj.weight",
                    "row ",
                    "column ",
                    "tile ",
                    "group ",
                    "code ",
                ],
            ),
        ),
        sourced(
            "control::source_nibbles_swapped",
            nibbles_swapped,
            FAITHFUL,
            fail(
                q4_1,
                &[
                    "model.layers.1.self_attn.q_proj.weight",
                    "elements are more than one step",
                ],
            ),
        ),
        sourced(
            "control::source_planes_row_major",
            planes_row_major,
            FAITHFUL,
            fail(q4_1, &["model.layers.0.mlp.up_proj.weight"]),
        ),
        sourced(
            "control::source_layers_swapped",
            layers_swapped,
            FAITHFUL,
            fail(
                q4_1,
                &[
                    "model.layers.0.self_attn.o_proj.weight",
                    "2 of 14 grids fail",
                ],
            ),
        ),
        sourced(
            "control::source_grid_from_other_weights",
            other_weights,
            FAITHFUL,
            fail(
                q4_1,
                &["model.layers.1.mlp.gate_proj.weight", "1 of 14 grids fail"],
            ),
        ),
        sourced(
            "control::source_one_code_flipped",
            one_code_flipped,
            FAITHFUL,
            fail(
                q4_1,
                &[
                    "model.layers.0.self_attn.k_proj.weight",
                    ": 1 of ",
                    "row 37, column 100 (tile 1, group 3, code ",
                ],
            ),
        ),
        sourced(
            "control::source_fc_unblocked",
            fc_unblocked,
            FAITHFUL,
            fail(
                bf16,
                &[
                    "model.fc.weight (read row-blocked)",
                    "source fc.weight",
                    "row 0, column 1",
                ],
            ),
        ),
        sourced(
            "control::source_gain_from_other_layer",
            gain_from_other_layer,
            FAITHFUL,
            fail(
                bf16,
                &[
                    "model.layers.0.input_layernorm.weight",
                    "source layers.0.input_layernorm.weight",
                    "1 of 11 BF16 tensors",
                ],
            ),
        ),
        sourced(
            "control::source_tensor_missing_from_package",
            gain_missing,
            FAITHFUL,
            Expect::Refused {
                check: dflash_gate::CheckId::SOURCE_INVENTORY,
                outcome: Outcome::Fail,
                mentions: &[
                    "source tensor layers.1.self_attn.k_norm.weight has no package counterpart",
                ],
                also: &[(
                    "norms.sizes",
                    Outcome::Fail,
                    "the package's own check sees the gain missing too",
                )],
            },
        ),
        sourced(
            "control::source_tensor_missing_from_source",
            none,
            without_gain,
            fail(
                dflash_gate::CheckId::SOURCE_INVENTORY,
                &["model.layers.1.post_attention_layernorm.weight has no source tensor"],
            ),
        ),
        // A NaN the converter copied is bit for bit its source's, and still no weight.
        sourced(
            "control::source_nan_copied_into_package",
            nan_in_fc,
            bent(nan_in_source_fc),
            Expect::Refused {
                check: dflash_gate::CheckId::SOURCE_BF16,
                outcome: Outcome::Fail,
                mentions: &[
                    "model.fc.weight (read row-blocked) differs from source fc.weight at row 37, column 13: package NaN, source NaN, and a NaN equals nothing (1 of its elements differ",
                ],
                also: &[(
                    "bf16.finite",
                    Outcome::Fail,
                    "the package's own check reads the same NaN",
                )],
            },
        ),
        Arm {
            encoding: Encoding {
                fc_row_blocked: false,
                ..Encoding::default()
            },
            ..sourced(
                "control::source_nan_copied_into_plain_fc",
                nan_in_plain_fc,
                bent(nan_in_source_fc),
                Expect::Refused {
                    check: dflash_gate::CheckId::SOURCE_BF16,
                    outcome: Outcome::Fail,
                    mentions: &[
                        "model.fc.weight differs from source fc.weight at row 37, column 13: package NaN, source NaN, and a NaN equals nothing (1 of its elements differ",
                    ],
                    also: &[(
                        "bf16.finite",
                        Outcome::Fail,
                        "the package's own check reads the same NaN",
                    )],
                },
            )
        },
        // An infinity the converter copied equals its source (source.bf16 passes it) and is no weight:
        // bf16.finite, which with --source skips only the tensors the comparison proved finite,
        // still reads fc, whose block holding it was not.
        sourced(
            "control::source_infinity_copied_into_package",
            infinity_in_fc,
            bent(infinity_in_source_fc),
            Expect::Refused {
                check: dflash_gate::CheckId::BF16_FINITE,
                outcome: Outcome::Fail,
                mentions: &[
                    "model.fc.weight holds 1 non-finite value (NaN or infinite), the first -inf at element 24997 of 196608",
                ],
                also: &[(
                    dflash_gate::CheckId::SOURCE_BF16,
                    Outcome::Pass,
                    "an infinity copied is its source's, bit for bit",
                )],
            },
        ),
        // fc proven finite by the comparison, a gain not: bf16.finite still reads the gain.
        sourced(
            "control::source_nan_in_a_gain_beside_a_proven_fc",
            nan_in_gain,
            FAITHFUL,
            Expect::Refused {
                check: dflash_gate::CheckId::BF16_FINITE,
                outcome: Outcome::Fail,
                mentions: &[
                    "model.layers.0.input_layernorm.weight holds 1 non-finite value (NaN or infinite), the first NaN at element 7",
                ],
                also: &[
                    (
                        dflash_gate::CheckId::SOURCE_BF16,
                        Outcome::Fail,
                        "the gain differs from its source",
                    ),
                    (
                        "norms.bf16",
                        Outcome::Fail,
                        "the gains' own check reads the NaN too",
                    ),
                ],
            },
        ),
        sourced(
            "control::source_config_field_differs",
            none,
            bent(source_config_differs),
            fail(
                dflash_gate::CheckId::SOURCE_CONFIG,
                &["intermediate_size: package 512, source 1024"],
            ),
        ),
        // Fields the draft reader never reads change the forward pass too: compared all the same,
        // nested ones by dotted name.
        sourced(
            "control::source_config_rope_theta_differs",
            package_rope,
            bent(source_rope_theta_halved),
            fail(
                dflash_gate::CheckId::SOURCE_CONFIG,
                &["rope_theta: package 1000000.0, source 500000.0"],
            ),
        ),
        sourced(
            "control::source_config_rope_scaling_factor_differs",
            package_rope,
            bent(source_rope_factor_doubled),
            fail(
                dflash_gate::CheckId::SOURCE_CONFIG,
                &["rope.factor: package 4.0 (rope_scaling.factor), source 8.0 (rope_scaling.factor)"],
            ),
        ),
        sourced(
            "control::source_config_hidden_act_only_in_source",
            package_without_hidden_act,
            bent(source_states_hidden_act),
            Expect::Refused {
                check: dflash_gate::CheckId::SOURCE_CONFIG,
                outcome: Outcome::Undecided,
                mentions: &["hidden_act (stated by the source only, in hidden_act)"],
                also: &[],
            },
        ),
        sourced(
            "pass::source_config_writer_fields_differ",
            none,
            bent(source_written_by_another_writer),
            Expect::Pass {
                facts: writer_fields_named,
            },
        ),
        sourced(
            "control::source_config_other_family",
            none,
            bent(source_of_the_other_family),
            fail(
                dflash_gate::CheckId::SOURCE_CONFIG,
                &["family: the package is a DFlash draft, the source a DFlash2 draft"],
            ),
        ),
        sourced(
            "control::source_config_two_homes_disagree",
            none,
            bent(source_mask_in_two_homes),
            fail(
                dflash_gate::CheckId::SOURCE_CONFIG,
                &["the source's config: mask_token_id: stated as 999 in dflash_config.mask_token_id and as 998 in mask_token_id"],
            ),
        ),
        sourced(
            "pass::source_config_released_checkpoint_against_its_package",
            none,
            bent(source_rope_in_transformers_5_home),
            Expect::Pass {
                facts: identity_named_not_compared,
            },
        ),
        sourced(
            "pass::source_config_numbers_respelled",
            none,
            bent(source_config_respelled),
            Expect::Pass { facts: compared },
        ),
        sourced(
            "control::source_config_field_absent",
            none,
            bent(source_config_field_absent),
            Expect::Refused {
                check: dflash_gate::CheckId::SOURCE_CONFIG,
                outcome: Outcome::Undecided,
                mentions: &["rms_norm_eps (stated by the package only, in rms_norm_eps)"],
                also: &[],
            },
        ),
    ]
}

/// Small geometry's down_proj is 256 x 512: 8 row blocks of 2 tiles. Store them column-block-major.
pub(super) fn tiles_column_block_major(s: &mut Scenario) {
    let t = s.package.tensor_mut(&proj(0, Projection::Down));
    let g = GridGeometry::new(256, 512).expect("grid");
    let tile = TILE_BYTES as usize;
    let old = t.data.clone();
    for p in 0..g.row_blocks as usize {
        for q in 0..g.col_blocks as usize {
            let from = (p * g.col_blocks as usize + q) * tile;
            let to = (q * g.row_blocks as usize + p) * tile;
            t.data[to..to + tile].copy_from_slice(&old[from..from + tile]);
        }
    }
}

pub(super) fn nibbles_swapped(s: &mut Scenario) {
    let t = s.package.tensor_mut(&proj(1, Projection::Q));
    for tile in t.data.chunks_exact_mut(TILE_BYTES as usize) {
        for b in &mut tile[1024..] {
            *b = b.rotate_left(4);
        }
    }
}

/// Scale and minimum planes written at `r*8 + c` instead of `c*32 + r`.
pub(super) fn planes_row_major(s: &mut Scenario) {
    let t = s.package.tensor_mut(&proj(0, Projection::Up));
    for tile in t.data.chunks_exact_mut(TILE_BYTES as usize) {
        let old = tile[..1024].to_vec();
        for plane in 0..2 {
            for c in 0..8 {
                for r in 0..32 {
                    let (from, to) = (
                        plane * 512 + 2 * (c * 32 + r),
                        plane * 512 + 2 * (r * 8 + c),
                    );
                    tile[to..to + 2].copy_from_slice(&old[from..from + 2]);
                }
            }
        }
    }
}

pub(super) fn layers_swapped(s: &mut Scenario) {
    let (a, b) = (proj(0, Projection::O), proj(1, Projection::O));
    let first = s.package.tensor(&a).data.clone();
    let second = std::mem::replace(&mut s.package.tensor_mut(&b).data, first);
    s.package.tensor_mut(&a).data = second;
}

/// layer 0's down_proj quantized from its own source values, but into ranges half as wide (see
/// [`Quantizer::Clipping`]): every element is within a step of its source value clamped to its range,
/// so only the grid's relative RMS error refuses it.
fn ranges_clipped(s: &mut Scenario) {
    let name = proj(0, Projection::Down);
    let (n, k, values) = grid_source(&s.package, &name, super::SEED).expect("a grid's source");
    s.package.tensor_mut(&name).data = quantize(n, k, &values, Quantizer::Clipping);
}

pub(super) fn other_weights(s: &mut Scenario) {
    let (n, k) = (512, 256);
    let values = source_matrix(n, k, 0x0bad_5eed);
    s.package.tensor_mut(&proj(1, Projection::Gate)).data =
        quantize(n, k, &values, Quantizer::MinMax);
}

/// Row 37, column 100 of k_proj (128 x 256, one column block: tile 1, row 5, group 3) gets its code
/// moved by 8 steps: one element, several steps off.
pub(super) fn one_code_flipped(s: &mut Scenario) {
    let t = s.package.tensor_mut(&proj(0, Projection::K));
    let (row, col) = (37usize, 100usize);
    let tile = row / 32;
    let (r, c) = (row % 32, col);
    let at = tile * TILE_BYTES as usize + 1024 + (r / 16) * 2048 + c * 8 + (r % 16) / 2;
    t.data[at] ^= if r % 2 == 0 { 0x08 } else { 0x80 };
}

/// fc's bytes in plain row-major order under the row-blocked shape.
pub(super) fn fc_unblocked(s: &mut Scenario) {
    let name = s.package.name(Role::Fc);
    let t = s.package.tensor_mut(&name);
    let [blocks, cols, 32] = t.shape[..] else {
        panic!("fc is row-blocked by default")
    };
    let (rows, cols) = ((blocks * 32) as usize, cols as usize);
    let old = t.data.clone();
    for row in 0..rows {
        for col in 0..cols {
            let blocked = ((row / 32) * cols + col) * 32 + row % 32;
            let plain = row * cols + col;
            t.data[2 * plain..2 * plain + 2].copy_from_slice(&old[2 * blocked..2 * blocked + 2]);
        }
    }
}

pub(super) fn gain_from_other_layer(s: &mut Scenario) {
    let other = s.package.tensor(&gain(1, LayerGain::Input)).data.clone();
    s.package.tensor_mut(&gain(0, LayerGain::Input)).data = other;
}

pub(super) fn gain_missing(s: &mut Scenario) {
    let name = gain(1, LayerGain::KNorm);
    s.package.tensors.retain(|t| t.name != name);
}

/// fc's element at row 37, column 13 (768 columns), as `bits`: in the package's row-blocked layout
/// `[8, 768, 32]` it is element ((37 / 32) * 768 + 13) * 32 + 37 % 32.
fn set_fc(s: &mut Scenario, bits: u16) {
    let fc = s.package.tensor_mut("model.fc.weight");
    assert_eq!(
        fc.shape,
        [8, 768, 32],
        "the small geometry's fc, row-blocked"
    );
    crate::defects::set_element(fc, (768 + 13) * 32 + 5, bits);
}

/// That element as a quiet NaN.
fn nan_in_fc(s: &mut Scenario) {
    set_fc(s, 0x7fc0);
}

/// That element as minus infinity.
fn infinity_in_fc(s: &mut Scenario) {
    set_fc(s, 0xff80);
}

/// A NaN in layer 0's input gain, and nowhere in the source.
fn nan_in_gain(s: &mut Scenario) {
    crate::defects::set_element(s.package.tensor_mut(&gain(0, LayerGain::Input)), 7, 0x7fc0);
}

/// The same NaN in a package whose fc is plain `[256, 768]`, as the source's.
fn nan_in_plain_fc(s: &mut Scenario) {
    let fc = s.package.tensor_mut("model.fc.weight");
    assert_eq!(fc.shape, [256, 768], "the small geometry's fc, plain");
    crate::defects::set_element(fc, 37 * 768 + 13, 0x7fc0);
}

/// The source's plain `[256, 768]` fc with `bits` at row 37, column 13.
fn set_source_fc(dir: &Path, bits: u16) {
    rewrite_source(dir, |tensors| {
        let fc = tensors
            .iter_mut()
            .find(|t| t.0 == "fc.weight")
            .expect("the source's fc");
        let at = 2 * (37 * 768 + 13);
        fc.3[at..at + 2].copy_from_slice(&bits.to_le_bytes());
    });
}

/// The same NaN in the source's fc.
fn nan_in_source_fc(dir: &Path) {
    set_source_fc(dir, 0x7fc0);
}

/// The same minus infinity in the source's fc.
fn infinity_in_source_fc(dir: &Path) {
    set_source_fc(dir, 0xff80);
}

/// The source's config.json as `edit` leaves it.
fn edit_source_config(
    dir: &Path,
    edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>),
) {
    let path = dir.join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("source config")).expect("json");
    edit(config.as_object_mut().expect("an object"));
    std::fs::write(&path, serde_json::to_vec_pretty(&config).expect("json")).expect("write");
}

/// A RoPE base and YaRN scaling factor, as a config states them.
fn rope(config: &mut serde_json::Map<String, serde_json::Value>, theta: f64, factor: f64) {
    config.insert("rope_theta".into(), serde_json::json!(theta));
    config.insert(
        "rope_scaling".into(),
        serde_json::json!({ "rope_type": "yarn", "factor": factor }),
    );
}

/// The package states a RoPE base of 10^6 and YaRN scaling by 4.
fn package_rope(s: &mut Scenario) {
    rope(s.config_mut(), 1_000_000.0, 4.0);
}

fn source_rope_theta_halved(dir: &Path) {
    edit_source_config(dir, |c| rope(c, 500_000.0, 4.0));
}

fn source_rope_factor_doubled(dir: &Path) {
    edit_source_config(dir, |c| rope(c, 1_000_000.0, 8.0));
}

fn package_without_hidden_act(s: &mut Scenario) {
    s.config_mut().remove("hidden_act");
}

/// The source declares the second family.
fn source_of_the_other_family(dir: &Path) {
    edit_source_config(dir, |c| {
        c.insert(
            "architectures".into(),
            serde_json::json!(["DFlash2DraftModel"]),
        );
    });
}

/// The mask id in dflash_config (as released) and another at the top level.
fn source_mask_in_two_homes(dir: &Path) {
    edit_source_config(dir, |c| {
        c.insert("mask_token_id".into(), 998.into());
    });
}

/// The RoPE base moved into `rope_parameters` (Transformers 5), `rope_scaling` gone.
fn source_rope_in_transformers_5_home(dir: &Path) {
    edit_source_config(dir, |c| {
        let theta = c
            .remove("rope_theta")
            .expect("the checkpoint states rope_theta");
        c.remove("rope_scaling");
        c.insert(
            "rope_parameters".into(),
            serde_json::json!({"rope_type": "default", "rope_theta": theta}),
        );
    });
}

/// A released checkpoint (`model_type: "qwen3"`) against a package (`model_type: "dflash"`): the
/// identity fields differ, are named as not compared, and the family is what was compared.
fn identity_named_not_compared(r: &Report) -> Result<(), String> {
    compared(r)?;
    let check = r
        .check(dflash_gate::CheckId::SOURCE_CONFIG)
        .ok_or("no source.config")?;
    let evidence = serde_json::to_value(check.evidence()).map_err(|e| e.to_string())?;
    let has = |list: &str, name: &str| {
        evidence[list]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v == name))
    };
    for name in [
        "model_type",
        "architectures",
        "transformers_version",
        "eos_token_id",
        "use_cache",
    ] {
        if !has("skipped", name) {
            return Err(format!(
                "source.config does not name {name} as not compared: {evidence}"
            ));
        }
    }
    for name in [
        "family",
        "rope_theta",
        "target_layer_ids",
        "mask_token_id",
        "hidden_act",
    ] {
        if !has("compared", name) {
            return Err(format!("source.config did not compare {name}: {evidence}"));
        }
    }
    Ok(())
}

fn source_states_hidden_act(dir: &Path) {
    edit_source_config(dir, |c| {
        c.insert("hidden_act".into(), "silu".into());
    });
}

/// Another library version wrote the checkpoint, in float32, from another directory.
fn source_written_by_another_writer(dir: &Path) {
    edit_source_config(dir, |c| {
        c.insert("transformers_version".into(), "4.51.0".into());
        c.insert("torch_dtype".into(), "float32".into());
        c.insert("_name_or_path".into(), "/checkpoints/draft".into());
    });
}

fn writer_fields_named(r: &Report) -> Result<(), String> {
    compared(r)?;
    let check = r
        .check(dflash_gate::CheckId::SOURCE_CONFIG)
        .ok_or("no source.config")?;
    let evidence = serde_json::to_value(check.evidence()).map_err(|e| e.to_string())?;
    for name in ["_name_or_path", "torch_dtype", "transformers_version"] {
        if !evidence["skipped"]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v == name))
        {
            return Err(format!("source.config skipped {}", evidence["skipped"]));
        }
        if !check.message().contains(name) {
            return Err(format!(
                "source.config does not name {name}: {}",
                check.message()
            ));
        }
    }
    if !check
        .message()
        .contains("not compared (identity and bookkeeping")
    {
        return Err(format!(
            "source.config does not say what it did not compare: {}",
            check.message()
        ));
    }
    Ok(())
}

fn broken_header(
    name: &'static str,
    defect: fn(&mut Scenario),
    mentions: &'static [&'static str],
) -> Arm {
    sourced(
        name,
        defect,
        FAITHFUL,
        Expect::Refused {
            check: "tiles.headers_sane",
            outcome: Outcome::Fail,
            mentions,
            also: &[(
                dflash_gate::CheckId::SOURCE_Q4_1,
                Outcome::Undecided,
                "the grid with a broken header is not compared",
            )],
        },
    )
}

/// The largest value of row 0's first group in layers.0.mlp.down_proj.weight raised to 1e38.
fn huge_source_value(dir: &Path) {
    rewrite_source(dir, |tensors| {
        let t = tensors
            .iter_mut()
            .find(|t| t.0 == "layers.0.mlp.down_proj.weight")
            .expect("down_proj in the source");
        assert_eq!(t.1, "BF16");
        let value = |d: &[u8], i: usize| bf16::from_le_bytes([d[2 * i], d[2 * i + 1]]).to_f32();
        let top = (0..32)
            .max_by(|&a, &b| value(&t.3, a).total_cmp(&value(&t.3, b)))
            .expect("32 elements");
        t.3[2 * top..2 * top + 2].copy_from_slice(&bf16::from_f32(1e38).to_le_bytes());
    });
}

fn source_config_differs(dir: &Path) {
    let path = dir.join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("source config")).expect("json");
    config["intermediate_size"] = 1024.into();
    std::fs::write(&path, serde_json::to_vec_pretty(&config).expect("json")).expect("write");
}

/// The source's `model.safetensors` rewritten: its tensors (name, dtype, shape, bytes) as `edit` leaves
/// them (read in name order; laid out in the order `edit` leaves them).
/// A gain stored `[256, 1]` and fc `[256, 512, 1, 1]`: the same tensors with the trailing 1s a
/// writer may keep.
fn source_trailing_ones(dir: &Path) {
    rewrite_source(dir, |tensors| {
        for (name, _, shape, _) in tensors.iter_mut() {
            if name == "layers.0.input_layernorm.weight" {
                shape.push(1);
            }
            if name == "fc.weight" {
                shape.extend([1, 1]);
            }
        }
    });
}

/// A gain of 256 stored as 128 x 2: the same bytes, another shape.
fn source_gain_reshaped(dir: &Path) {
    rewrite_source(dir, |tensors| {
        let gain = tensors
            .iter_mut()
            .find(|t| t.0 == "layers.0.input_layernorm.weight")
            .expect("the gain");
        gain.2 = vec![128, 2];
    });
}

fn rewrite_source(dir: &Path, edit: impl FnOnce(&mut Vec<(String, String, Vec<i64>, Vec<u8>)>)) {
    let path = dir.join("model.safetensors");
    let file = std::fs::read(&path).expect("the source's model.safetensors");
    let (length, rest) = file.split_at(8);
    let length = u64::from_le_bytes(length.try_into().expect("8 bytes")) as usize;
    let (header, data) = rest.split_at(length);
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(header).expect("a JSON header");
    let mut tensors: Vec<(String, String, Vec<i64>, Vec<u8>)> = header
        .iter()
        .filter(|(name, _)| *name != "__metadata__")
        .map(|(name, e)| {
            let at = |i: usize| e["data_offsets"][i].as_u64().expect("offset") as usize;
            (
                name.clone(),
                e["dtype"].as_str().expect("dtype").to_owned(),
                e["shape"]
                    .as_array()
                    .expect("shape")
                    .iter()
                    .map(|d| d.as_i64().expect("dimension"))
                    .collect(),
                data[at(0)..at(1)].to_vec(),
            )
        })
        .collect();
    edit(&mut tensors);
    let mut entries = Vec::new();
    let mut bytes = Vec::new();
    for (name, dtype, shape, data) in tensors {
        let begin = bytes.len() as u64;
        bytes.extend_from_slice(&data);
        entries.push(crate::synth::Entry {
            name,
            dtype,
            shape,
            offsets: [begin, bytes.len() as u64],
        });
    }
    let header = crate::synth::header_bytes(&entries, &[]);
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&header);
    out.extend_from_slice(&bytes);
    std::fs::write(&path, out).expect("write the source");
}

/// Every source tensor under its `model.`-prefixed name, as a Hugging Face checkpoint spells it.
fn source_names_prefixed(dir: &Path) {
    rewrite_source(dir, |tensors| {
        for t in tensors {
            t.0 = format!("model.{}", t.0);
        }
    });
}

/// One gain in the source twice, under both spellings.
fn source_gain_in_both_spellings(dir: &Path) {
    rewrite_source(dir, |tensors| {
        let gain = tensors
            .iter()
            .find(|t| t.0 == "layers.0.input_layernorm.weight")
            .expect("the gain")
            .clone();
        tensors.push((format!("model.{}", gain.0), gain.1, gain.2, gain.3));
    });
}

/// Every number of the source's config written another way with the same value (an integer as a
/// float, a float in exponent form), as another serializer would.
fn source_config_respelled(dir: &Path) {
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path).expect("source config");
    let config: serde_json::Value = serde_json::from_str(&text).expect("json");
    fn respell(v: &serde_json::Value) -> String {
        match v {
            serde_json::Value::Number(n) if n.is_f64() => {
                format!("{:e}", n.as_f64().unwrap_or(0.0))
            }
            serde_json::Value::Number(n) => format!("{n}.0"),
            serde_json::Value::Array(a) => {
                format!("[{}]", a.iter().map(respell).collect::<Vec<_>>().join(", "))
            }
            serde_json::Value::Object(o) => format!(
                "{{{}}}",
                o.iter()
                    .map(|(k, v)| format!(
                        "{}: {}",
                        serde_json::Value::from(k.as_str()),
                        respell(v)
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            other => other.to_string(),
        }
    }
    let respelled = respell(&config);
    assert!(respelled.contains(".0"), "some integer respelled");
    std::fs::write(&path, respelled).expect("write");
}

fn source_config_field_absent(dir: &Path) {
    edit_source_config(dir, |c| {
        c.remove("rms_norm_eps")
            .expect("the checkpoint states rms_norm_eps");
    });
}

/// A source that cannot be read, and what the gate must then say: it stops (exit 2) with `reason`,
/// its message starting with `--source ` and naming each of `mentions`.
struct Unreadable {
    name: &'static str,
    shards: usize,
    after: fn(&Path),
    reason: &'static str,
    mentions: &'static [&'static str],
}

const UNREADABLE: &[Unreadable] = &[
    Unreadable {
        name: "arms::control::source_shard_missing_is_exit_2",
        shards: 3,
        after: |dir| {
            std::fs::remove_file(dir.join("model-00002-of-00003.safetensors")).expect("shard")
        },
        reason: "file_not_found",
        mentions: &[
            "model-00002-of-00003.safetensors",
            "model.safetensors.index.json lists",
        ],
    },
    Unreadable {
        name: "arms::control::source_config_not_an_object_is_exit_2",
        shards: 1,
        after: |dir| std::fs::write(dir.join("config.json"), b"[]").expect("config"),
        reason: "malformed",
        mentions: &["config.json", "is not a JSON object"],
    },
    Unreadable {
        name: "arms::control::source_both_single_file_and_index_is_exit_2",
        shards: 3,
        after: |dir| {
            std::fs::copy(
                dir.join("model-00001-of-00003.safetensors"),
                dir.join("model.safetensors"),
            )
            .expect("copy");
        },
        reason: "malformed",
        mentions: &["holds both model.safetensors and model.safetensors.index.json"],
    },
    Unreadable {
        name: "arms::control::source_given_a_package_is_exit_2",
        shards: 1,
        after: |dir| {
            std::fs::rename(dir.join("model.safetensors"), dir.join("model.q4nx")).expect("rename")
        },
        reason: "file_not_found",
        mentions: &[
            "no weights",
            "it holds model.q4nx",
            "looks like a Q4NX package",
        ],
    },
];

/// One trial per source in `UNREADABLE`, named after it.
pub fn unreadable() -> Vec<(&'static str, AgreementTrial)> {
    UNREADABLE
        .iter()
        .map(|u| {
            let trial: AgreementTrial = Box::new(move || unreadable_source(u));
            (u.name, trial)
        })
        .collect()
}

fn unreadable_source(u: &Unreadable) -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let source = Source {
        options: SourceOptions {
            shards: u.shards,
            ..FAITHFUL.options
        },
        after: u.after,
        gguf: None,
    };
    let err = super::gate_arm_in(
        root.path(),
        Base::Small,
        Encoding::default(),
        none,
        Extra::Source(source),
    )?
    .err()
    .ok_or("the gate ran over a source it cannot read")?;
    let text = err.to_string();
    if err.reason() != u.reason || !text.starts_with("--source ") {
        return Err(format!(
            "expected --source ... with reason {}, got {}: {text}",
            u.reason,
            err.reason()
        ));
    }
    if let Some(m) = u.mentions.iter().find(|m| !text.contains(*m)) {
        return Err(format!("the error does not name {m:?}: {text}"));
    }
    Ok(())
}

/// A trial of [`paths_agree`]: `Err` says where the two paths differ.
pub type AgreementTrial = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// Every `--source` arm gated twice, through the whole-tile path (where the processor has AVX2 and
/// FMA) and through the plain scalar loop: the same verdict, and per grid the same element count,
/// out-of-bound count and largest error in steps, and relative RMS errors within f32 summation's
/// reach. One trial per arm, named after it.
pub fn paths_agree() -> Vec<(String, AgreementTrial)> {
    // Against a GGUF, only the grids of a Q8_0 one take a path that `scalar` chooses (the exact
    // comparison has no other).
    let bounded = super::gguf::arms()
        .into_iter()
        .filter(|a| a.name.contains("q8_0"));
    arms()
        .into_iter()
        .chain(bounded)
        .filter(|arm| matches!(arm.extra, Extra::Source(_)))
        .map(|arm| {
            let name = format!("source_paths_agree::{}", arm.name);
            let body = move || {
                let root = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
                let (dir, options) =
                    super::prepare_arm(root.path(), arm.base, arm.encoding, arm.defect, arm.extra)?;
                let gate = || {
                    dflash_gate::gate(&dir, &options)
                        .map_err(|e| format!("the gate could not run: {e}"))
                };
                let (wide, plain) = (
                    gate()?,
                    dflash_gate::__private::with_scalar_source_loop(gate)?,
                );
                let outcome = |r: &Report| r.check(dflash_gate::CheckId::SOURCE_Q4_1).map(|c| c.outcome());
                if outcome(&wide) != outcome(&plain) {
                    return Err(format!(
                        "source.q4_1: {:?} through the whole-tile path, {:?} through the scalar loop",
                        outcome(&wide),
                        outcome(&plain)
                    ));
                }
                let (a, b) = (&wide.census().source_grids, &plain.census().source_grids);
                if a.len() != b.len() {
                    return Err(format!("{} grids against {}", a.len(), b.len()));
                }
                for (x, y) in a.iter().zip(b) {
                    let rms_close = (x.relative_rms - y.relative_rms).abs()
                        <= 1e-5 * y.relative_rms.max(1e-12);
                    if x.name != y.name
                        || x.elements != y.elements
                        || x.out_of_bound != y.out_of_bound
                        || x.max_error_steps != y.max_error_steps
                        || !rms_close
                    {
                        return Err(format!("{x:?} through the whole-tile path, {y:?} through the scalar loop"));
                    }
                }
                Ok(())
            };
            (name, Box::new(body) as AgreementTrial)
        })
        .collect()
}
