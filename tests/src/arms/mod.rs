//! Every arm: a package (good, or good with one named defect) and the exact outcome the gate owes it.
//!
//! A negative control passes only when the gate refuses it with the expected outcome, at the expected
//! check, with a message naming the defect, and when no other check changed outcome except by being
//! blocked by the failure (or being one the arm lists with its reason). A control that fails for
//! another reason turns red.

mod dflash2;
pub mod folder;
pub mod gguf;
pub mod gguf_draft;
pub mod gguf_source;
mod hostile;
pub mod loader_rules;

use crate::defects::{
    bf16_to_f16_bits, data_start, gain, half_float_fill, proj, set_element, set_header, stray,
    Scenario,
};
use crate::synth::{write_manifest, Encoding, Geometry, Package, TargetPackage};
use dflash_gate::__private::family::{LayerGain, Projection, Role};
use dflash_gate::__private::tile::TILE_BYTES;
use dflash_gate::{NotChecked, Outcome, Report};
use half::bf16;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub mod quantized_source;
pub mod source;
pub mod target_forms;
pub mod target_gguf_draft;
pub mod target_read;
pub mod target_tokenizer;

/// The generator seed every arm uses: fixed, so a failure reproduces.
pub const SEED: u64 = 0x0df1_a5a0;

/// Which good package an arm starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    Small,
    Tiny,
    Padded,
    Bolt,
    /// The small geometry as DFlash2 drafts: both features, convolutions only, the selector only.
    Dflash2,
    Dflash2ConvOnly,
    Dflash2SelectorOnly,
    /// The small geometry as the assistant head (first family, aliased names).
    AssistantHead,
}

impl Base {
    pub fn geometry(self) -> Geometry {
        match self {
            Base::Small => Geometry::small(),
            Base::Tiny => Geometry::tiny(),
            Base::Padded => Geometry::padded(),
            Base::Bolt => Geometry::bolt(),
            Base::Dflash2 => Geometry::dflash2_small(),
            Base::Dflash2ConvOnly => dflash2::conv_only(),
            Base::Dflash2SelectorOnly => dflash2::selector_only(),
            Base::AssistantHead => Geometry::assistant_head(),
        }
    }
}

/// What the gate must say.
pub enum Expect {
    /// Every check passes; `facts` checks the census (or returns what was wrong).
    Pass {
        facts: fn(&Report) -> Result<(), String>,
    },
    /// `check` has `outcome` and its message contains each of `mentions`; `also` lists further checks
    /// whose outcome the same defect legitimately changes, each with its reason.
    Refused {
        check: &'static str,
        outcome: Outcome,
        mentions: &'static [&'static str],
        also: &'static [(&'static str, Outcome, &'static str)],
    },
}

pub struct Arm {
    /// `pass::...` or `control::...`; the harness prefixes `arms::`.
    pub name: &'static str,
    pub base: Base,
    pub encoding: Encoding,
    pub defect: fn(&mut Scenario),
    pub extra: Extra,
    pub expect: Expect,
}

/// What the arm asks of the gate beyond the draft.
#[derive(Clone, Copy)]
pub enum Extra {
    None,
    /// `--target`: a matching target package, bent by this function.
    Target(fn(&mut TargetPackage)),
    /// `--manifest`: a manifest written over the finished package, then this applied to the directory.
    Manifest(fn(&Path)),
    /// `--source`: the checkpoint written beside the package (its grids quantized from it) before the
    /// defect, then bent as this says.
    Source(source::Source),
}

fn none(_: &mut Scenario) {}

fn no_facts(_: &Report) -> Result<(), String> {
    Ok(())
}

fn fail(check: &'static str, mentions: &'static [&'static str]) -> Expect {
    Expect::Refused {
        check,
        outcome: Outcome::Fail,
        mentions,
        also: &[],
    }
}

fn arm(name: &'static str, base: Base, defect: fn(&mut Scenario), expect: Expect) -> Arm {
    Arm {
        name,
        base,
        encoding: Encoding::default(),
        defect,
        extra: Extra::None,
        expect,
    }
}

fn encoded(name: &'static str, base: Base, encoding: Encoding) -> Arm {
    Arm {
        name,
        base,
        encoding,
        defect: none,
        extra: Extra::None,
        expect: Expect::Pass { facts: no_facts },
    }
}

fn with_target(
    name: &'static str,
    defect: fn(&mut Scenario),
    target: fn(&mut TargetPackage),
    expect: Expect,
) -> Arm {
    Arm {
        name,
        base: Base::Small,
        encoding: Encoding::default(),
        defect,
        extra: Extra::Target(target),
        expect,
    }
}

fn with_manifest(name: &'static str, after: fn(&Path), expect: Expect) -> Arm {
    Arm {
        name,
        base: Base::Small,
        encoding: Encoding::default(),
        defect: none,
        extra: Extra::Manifest(after),
        expect,
    }
}

fn same_target(_: &mut TargetPackage) {}

fn untouched(_: &Path) {}

/// Every arm, in a stable order.
pub fn all() -> Vec<Arm> {
    let d = Encoding::default();
    vec![
        // The positive direction.
        arm("pass::small_well_formed", Base::Small, none, Expect::Pass { facts: small_census }),
        arm("pass::bolt_reference_geometry", Base::Bolt, none, Expect::Pass { facts: bolt_census }),
        arm("pass::padded_geometry", Base::Padded, none, Expect::Pass { facts: padded_census }),
        encoded("pass::tiles_declared_3d", Base::Small, Encoding { tiles_3d: true, ..d }),
        encoded("pass::fc_declared_2d", Base::Small, Encoding { fc_row_blocked: false, ..d }),
        encoded("pass::bare_names", Base::Small, Encoding { prefixed: false, ..d }),
        encoded("pass::taps_in_dflash_config", Base::Small, Encoding { nested_dflash_config: true, ..d }),
        encoded("pass::head_dim_derived", Base::Small, Encoding { head_dim_stated: false, ..d }),
        encoded("pass::model_type_dflash", Base::Small, Encoding { model_type_dflash: true, ..d }),
        Arm {
            name: "pass::packer_aligned_gaps",
            base: Base::Small,
            encoding: Encoding { aligned: true, ..d },
            defect: none,
            extra: Extra::None,
            expect: Expect::Pass { facts: aligned_census },
        },
        arm("pass::constant_group_counted", Base::Small, constant_group, Expect::Pass { facts: one_constant_group }),
        // The original tool's controls.
        arm("control::projection_one_tile_short", Base::Small, one_tile_short, fail("projections.tile_grid", &["model.layers.0.self_attn.q_proj.weight", "1 short"])),
        arm(
            "control::head_dim_disagrees_with_tiles",
            Base::Small,
            head_dim_disagrees,
            Expect::Refused {
                check: "projections.tile_grid",
                outcome: Outcome::Fail,
                mentions: &["model.layers.0.self_attn.q_proj.weight", "8 tiles", "64 x 256 needs 2 tiles"],
                also: &[
                    ("norms.sizes", Outcome::Fail, "q_norm and k_norm are sized by head_dim too"),
                    ("tiles.padding_zero", Outcome::Fail, "o_proj keeps its 8 tiles, and its stored columns beyond the config's q_dim of 64 read as non-zero padding"),
                ],
            },
        ),
        arm("control::one_nan_scale", Base::Small, nan_scale, fail("tiles.headers_sane", &["model.layers.1.mlp.gate_proj.weight", "tile 3", "scale is not finite"])),
        arm(
            "control::half_float_bytes_labelled_as_tiles",
            Base::Small,
            half_float_in_grid,
            Expect::Refused {
                check: "tiles.headers_sane",
                outcome: Outcome::Fail,
                mentions: &["model.layers.0.self_attn.q_proj.weight", "scale is negative"],
                also: &[("tiles.q4_1_signature", Outcome::Fail, "half-float bits read as min/scale land far from -7.5")],
            },
        ),
        arm("control::half_float_matrix_declared", Base::Small, half_float_declared, fail("projections.tile_grid", &["model.layers.0.self_attn.q_proj.weight", "F16 [80, 256]", "half-float matrix"])),
        arm("control::block_size_mismatch", Base::Small, block_size_mismatch, fail("scalars.block_size", &["[8] vs [4]"])),
        arm("control::second_family_tensor", Base::Small, second_family_tensor, fail("inventory.explained", &["model.selector.weight", "second-family"])),
        arm("control::not_a_dflash_config", Base::Small, not_dflash, fail("config.is_dflash", &["LlamaForCausalLM"])),
        arm("control::model_type_dflash_over_another_class", Base::Small, dflash_over_another_class, fail("config.is_dflash", &["[\"LlamaForCausalLM\"], not a draft class", "loads as that model"])),
        arm("control::draft_class_beside_another", Base::Small, draft_class_beside_another, fail("config.is_dflash", &["[\"Qwen3ForCausalLM\"], not a draft class"])),
        arm("control::architectures_a_string", Base::Small, architectures_a_string, fail("config.is_dflash", &["architectures is a string, not an array of class names"])),
        arm("control::rms_norm_eps_zero", Base::Small, rms_norm_eps_zero, fail("config.geometry", &["rms_norm_eps is 0", "not a finite positive f32"])),
        arm("control::rope_theta_negative_in_rope_parameters", Base::Small, rope_theta_negative, fail("config.geometry", &["rope_parameters.rope_theta is -10000", "not a finite positive f32"])),
        arm("control::rope_theta_in_two_homes_disagrees", Base::Small, rope_theta_in_two_homes, fail("config.geometry", &["rope_theta is stated as 500000 in rope_parameters.rope_theta and as 1000000.0 in rope_theta"])),
        arm("control::embedding_scale_under_two_names_disagrees", Base::Small, embedding_scale_under_two_names, fail("config.geometry", &["embedding_scale is stated as 8.0 in dflash_config.input_embedding_scale and as"])),
        arm("control::attention_bias_without_biases", Base::Small, attention_bias_without_biases, fail("projections.present", &["attention_bias: true", "model.layers.0.self_attn.q_proj.bias"])),
        arm("control::dflash_config_an_array", Base::Small, dflash_config_an_array, fail("config.is_dflash", &["dflash_config is an array, not an object"])),
        // The spec's further controls.
        arm("control::zeroed_tile_header", Base::Small, zeroed_tile_header, fail("tiles.headers_sane", &["model.layers.0.mlp.up_proj.weight", "tile 5", "zero scale over non-zero codes"])),
        arm("control::sliding_window_mismatch", Base::Small, sliding_window_mismatch, fail("scalars.sliding_window", &["[128] vs [64]"])),
        arm("control::f16_gain_labelled_bf16", Base::Small, f16_gain, fail("norms.bf16", &["model.norm.weight", "reads as f16"])),
        arm("control::truncated_weight_file", Base::Small, truncated, fail("container.parses", &["model.q4nx", "file is short"])),
        arm("control::overlapping_offsets", Base::Small, overlapping, fail("container.parses", &["\"model.layers.1.self_attn.v_proj.weight\" begins at", "inside \"model.layers.1.self_attn.q_proj.weight\""])),
        arm(
            "control::missing_required_field",
            Base::Small,
            missing_intermediate,
            Expect::Refused { check: "config.geometry", outcome: Outcome::Undecided, mentions: &["intermediate_size is missing"], also: &[] },
        ),
        // Look-alikes and further refusals, each by name.
        arm("control::q8_0_tile_grid", Base::Small, q8_0_lookalike, fail("projections.tile_grid", &["model.layers.0.self_attn.q_proj.weight", "q8_0 tile grid"])),
        arm("control::q4_0_zero_minimum_plane", Base::Small, q4_0_lookalike, fail("tiles.q4_1_signature", &["model.layers.0.self_attn.q_proj.weight", "q4_0-style tile grid (zero minimum plane)"])),
        arm("control::padding_not_zero", Base::Padded, padding_not_zero, fail("tiles.padding_zero", &["model.layers.0.self_attn.q_proj.weight", "tile 1", "padding group is not zero"])),
        arm("control::negative_scale", Base::Small, negative_scale, fail("tiles.headers_sane", &["model.layers.1.mlp.down_proj.weight", "tile 2", "scale is negative"])),
        arm("control::infinite_minimum", Base::Small, infinite_minimum, fail("tiles.headers_sane", &["model.layers.0.self_attn.v_proj.weight", "tile 1", "minimum is not finite"])),
        arm("control::embedding_scale_mismatch", Base::Small, embedding_scale_mismatch, fail("scalars.embedding_scale", &["[16] vs [16.5]"])),
        arm("control::mask_token_mismatch", Base::Small, mask_token_mismatch, fail("scalars.mask_token_id", &["[999] vs [998]"])),
        arm("control::mask_is_the_drafts_own_eos", Base::Small, mask_is_own_eos, fail("config.geometry", &["mask_token_id 999 is the draft's own eos token (eos_token_id in config.json)"])),
        arm("control::projection_absent", Base::Small, projection_absent, fail("projections.present", &["model.layers.1.mlp.down_proj.weight"])),
        arm("control::extra_layer_tensor", Base::Small, extra_layer, fail("inventory.explained", &["model.layers.2.self_attn.q_proj.weight", "layer 2"])),
        arm("control::config_scalar_in_header", Base::Small, config_scalar_in_header, fail("container.parses", &["\"block_size\"", "not a tensor entry"])),
        arm("control::duplicate_header_key", Base::Small, duplicate_header_key, fail("container.parses", &["duplicate key \"dflash.block_size\""])),
        arm("control::trailing_bytes", Base::Small, trailing_bytes, fail("container.parses", &["16 trailing bytes"])),
        arm("control::dirty_alignment_gap", Base::Small, dirty_gap, fail("container.parses", &["non-zero"])),
        arm(
            "control::fc_missing_a_tap",
            Base::Small,
            fc_missing_tap,
            fail("fc.shape", &["model.fc.weight", "768 (3 taps)"]),
        ),
        arm("control::gain_off_size", Base::Small, gain_off_size, fail("norms.sizes", &["model.layers.0.self_attn.q_norm.weight", "expected BF16 [64]"])),
        arm("control::taps_not_increasing", Base::Small, taps_not_increasing, fail("config.geometry", &["target_layer_ids", "strictly increasing"])),
        arm("control::tap_beyond_target_depth", Base::Small, tap_beyond_depth, Expect::Refused {
                check: "config.geometry",
                outcome: Outcome::Fail,
                mentions: &["holds 5, not below num_target_layers 5"],
                also: &[("scalars.num_target_layers", Outcome::Fail, "the container's copy (8) now differs from the config's (5)")],
            }),
        arm("control::malformed_config_json", Base::Small, malformed_config, fail("config.is_dflash", &["not valid JSON"])),
        arm("control::no_weight_file", Base::Small, no_weight_file, fail("container.parses", &["no weight file"])),
        arm("control::two_weight_files", Base::Small, two_weight_files, fail("container.parses", &["2 *.q4nx files", "a.q4nx, b.q4nx"])),
        arm(
            "control::another_weight_file_beside_model_q4nx",
            Base::Small,
            another_weight_file,
            Expect::Refused { check: "container.parses", outcome: Outcome::Undecided, mentions: &["not read: other.q4nx", "weights are model.q4nx"], also: &[] },
        ),
        // A draft carrying its own embedding table (one published layout does).
        arm("pass::own_embedding_table", Base::Small, own_embedding, Expect::Pass { facts: embedding_explained }),
        arm(
            "control::embedding_without_vocab_size",
            Base::Small,
            embedding_without_vocab,
            Expect::Refused {
                check: "inventory.explained",
                outcome: Outcome::Undecided,
                mentions: &["model.embed_tokens.weight", "no vocab_size"],
                also: &[],
            },
        ),
        arm("control::embedding_wrong_shape", Base::Small, embedding_wrong_shape, fail("inventory.explained", &["model.embed_tokens.weight", "neither BF16 [1000, 256] nor a q4_1 grid of 1000 x 256"])),
        // Found by the mutation campaign: a BF16 label turned F16 must not pass.
        arm("control::gain_labelled_f16", Base::Small, gain_labelled_f16, fail("norms.sizes", &["model.layers.1.input_layernorm.weight is F16 [256], expected BF16 [256]"])),
        arm("control::fc_labelled_f16", Base::Small, fc_labelled_f16, fail("fc.shape", &["model.fc.weight is declared F16", "the fusion matrix is BF16"])),
        // A non-finite value in a BF16 matrix: no form check reads the values, this one does.
        arm("control::nan_in_fc", Base::Small, nan_in_fc, fail("bf16.finite", &["model.fc.weight holds 1 non-finite value", "the first NaN at element 1234 of 196608 ([0, 38, 18] in its shape [8, 768, 32])"])),
        arm("control::nan_in_own_embedding_table", Base::Small, nan_in_embedding, fail("bf16.finite", &["model.embed_tokens.weight holds 2 non-finite values", "the first NaN at element 5000 of 256000 ([19, 136] in its shape [1000, 256])"])),
        // The target package (--target), both directions.
        with_target("pass::target_matches", none, same_target, Expect::Pass { facts: target_checked }),
        with_target("control::target_hidden_differs", none, |t| set(t, "hidden_size", 512), fail("target.hidden_size", &["(256 vs 512)"])),
        with_target("control::target_too_shallow", none, |t| set(t, "num_hidden_layers", 5), Expect::Refused {
            check: "target.depth",
            outcome: Outcome::Fail,
            mentions: &["tap 5", "not below the target's 5 layers"],
            also: &[],
        }),
        with_target("control::target_depth_differs_from_num_target_layers", none, |t| set(t, "num_hidden_layers", 9), fail("target.depth", &["num_target_layers is 8, the target has 9 layers"])),
        with_target("control::target_vocab_differs", none, |t| set(t, "vocab_size", 1200), fail("target.vocab", &["the draft's vocab_size is 1000, the target's 1200"])),
        with_target("control::target_embedding_rows_differ", none, |t| t.set_table("model.embed_tokens.weight", 999, 256), fail("target.vocab", &["model.embed_tokens.weight has 999 rows, vocab_size is 1000"])),
        with_target("control::mask_token_beyond_target_vocab", drop_vocab_size, shrink_target_vocab, fail("target.mask_token", &["mask_token_id 999 is not below the target's vocab_size 999"])),
        with_target("control::target_without_tokenizer", none, |t| t.tokenizer = false, Expect::Refused {
            check: "target.tokenizer",
            outcome: Outcome::Fail,
            mentions: &["no tokenizer.json"],
            also: &[("target.mask_token", Outcome::Undecided, "with no tokenizer to read, whether the mask is a token of the target is not decided")],
        }),
        with_target("control::target_embedding_wider_than_its_hidden_size", none, |t| t.set_table("model.embed_tokens.weight", 1000, 512), fail("target.hidden_size", &["model.embed_tokens.weight is BF16 [1000, 512]: 512 wide, the target's hidden_size is 256"])),
        with_target("control::target_hidden_size_a_string", none, |t| t.config["hidden_size"] = "256".into(), Expect::Refused {
            check: "target.hidden_size",
            outcome: Outcome::Undecided,
            mentions: &[r#"hidden_size is "256", a string, not an integer"#],
            also: &[],
        }),
        // Provenance (--manifest), both directions.
        with_manifest("pass::manifest_matches", untouched, Expect::Pass { facts: manifest_checked }),
        with_manifest("control::manifest_flipped_byte", flip_fc_byte, fail("manifest.sha256", &["mismatched: model.q4nx"])),
        with_manifest("control::manifest_lists_a_missing_file", list_missing_file, fail("manifest.sha256", &["missing: tokenizer_extra.json"])),
        with_manifest("control::manifest_leaves_a_file_unlisted", add_unlisted_file, fail("manifest.sha256", &["unlisted: notes.txt"])),
        with_manifest("control::manifest_lists_a_file_twice_wrong_hash_last", list_weights_again_wrongly, fail("manifest.sha256", &["model.q4nx is listed twice, on lines"])),
        with_manifest("control::manifest_lists_a_file_twice_wrong_hash_first", list_weights_wrongly_first_as_dot_slash, fail("manifest.sha256", &["model.q4nx is listed twice, on lines 1 and"])),
        with_manifest("control::manifest_absent", remove_manifest, Expect::Refused {
            check: "manifest.sha256",
            outcome: Outcome::Undecided,
            mentions: &["no MANIFEST.sha256"],
            also: &[],
        }),
    ]
    .into_iter()
    .chain(hostile::all())
    .chain(dflash2::all())
    .chain(source::arms())
    .chain(gguf::arms())
    .collect()
}

// ---- census facts of the positive arms ----

fn grids(r: &Report) -> Vec<&dflash_gate::GridCensus> {
    r.census()
        .tensors
        .iter()
        .filter_map(|t| t.grid.as_ref())
        .collect()
}

fn medians_near_q4_1(r: &Report) -> Result<(), String> {
    for g in grids(r) {
        let m = g.min_scale_median.ok_or("a grid without a median")?;
        if !(-7.9 <= m && m <= -7.1) {
            return Err(format!("median min/scale {m} is not near -7.5"));
        }
    }
    Ok(())
}

fn expect_eq<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, want {want:?}"))
    }
}

fn small_census(r: &Report) -> Result<(), String> {
    expect_eq("census.family", r.census().family, Some("dflash"))?;
    let roles: BTreeMap<String, usize> =
        r.census().tensors.iter().fold(BTreeMap::new(), |mut m, t| {
            *m.entry(t.role_text.clone().unwrap_or_default())
                .or_default() += 1;
            m
        });
    for p in [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    ] {
        expect_eq(p, roles.get(&format!("projection {p}")).copied(), Some(2))?;
    }
    expect_eq("grids", grids(r).len(), 14)?;
    medians_near_q4_1(r)
}

fn bolt_census(r: &Report) -> Result<(), String> {
    let g = grids(r);
    expect_eq("tensors", r.census().tensors.len(), 64)?;
    expect_eq("grids", g.len(), 35)?;
    expect_eq("tiles", g.iter().map(|g| g.tiles).sum::<u64>(), 40_000)?;
    expect_eq(
        "groups",
        g.iter().map(|g| g.real_groups).sum::<u64>(),
        10_240_000,
    )?;
    // Spec section 6: this specification's scalar names in safetensors' own order.
    expect_eq("header bytes", r.census().header_bytes, Some(6_792))?;
    expect_eq("file bytes", r.census().file_bytes, Some(270_406_832))?;
    let by_role = |role: &str| {
        g.iter()
            .zip(r.census().tensors.iter().filter(|t| t.grid.is_some()))
            .filter(|(_, t)| t.role_text.as_deref() == Some(role))
            .map(|(g, _)| g.tiles)
            .collect::<BTreeSet<u64>>()
    };
    expect_eq(
        "q_proj tiles",
        by_role("projection q_proj"),
        BTreeSet::from([1280]),
    )?;
    expect_eq(
        "k_proj tiles",
        by_role("projection k_proj"),
        BTreeSet::from([320]),
    )?;
    expect_eq(
        "down_proj tiles",
        by_role("projection down_proj"),
        BTreeSet::from([1600]),
    )?;
    medians_near_q4_1(r)
}

fn padded_census(r: &Report) -> Result<(), String> {
    expect_eq(
        "padding check ran",
        r.check("tiles.padding_zero").map(|c| c.outcome()),
        Some(Outcome::Pass),
    )?;
    medians_near_q4_1(r)
}

fn aligned_census(r: &Report) -> Result<(), String> {
    if r.census().aligned_gaps == 0 {
        return Err("the packer's gaps were not reported".into());
    }
    let parses = r
        .check("container.parses")
        .map(|c| c.message())
        .unwrap_or_default();
    if !parses.contains("strict safetensors readers refuse this file") {
        return Err(format!(
            "container.parses does not warn of the gaps: {parses}"
        ));
    }
    Ok(())
}

fn one_constant_group(r: &Report) -> Result<(), String> {
    expect_eq(
        "constant groups",
        grids(r).iter().map(|g| g.constant_groups).sum::<u64>(),
        1,
    )
}

fn target_checked(r: &Report) -> Result<(), String> {
    for id in [
        "target.hidden_size",
        "target.depth",
        "target.vocab",
        "target.mask_token",
        "target.tokenizer",
    ] {
        expect_eq(id, r.check(id).map(|c| c.outcome()), Some(Outcome::Pass))?;
    }
    if r.not_checked().contains(&NotChecked::TargetAgreement) {
        return Err("the target is still listed as not checked".into());
    }
    Ok(())
}

fn manifest_checked(r: &Report) -> Result<(), String> {
    expect_eq(
        "manifest.sha256",
        r.check("manifest.sha256").map(|c| c.outcome()),
        Some(Outcome::Pass),
    )?;
    if r.not_checked().contains(&NotChecked::Provenance) {
        return Err("provenance is still listed as not checked".into());
    }
    // The manifest proves bytes, not content: the right-weights line stays without --source.
    if !r.not_checked().contains(&NotChecked::Content) {
        return Err(
            "--manifest removed the right-weights line, which only --source answers".into(),
        );
    }
    Ok(())
}

fn embedding_explained(r: &Report) -> Result<(), String> {
    let t = r
        .census()
        .tensors
        .iter()
        .find(|t| t.name == "model.embed_tokens.weight")
        .ok_or("no embedding in the census")?;
    expect_eq(
        "embedding role",
        t.role_text.as_deref(),
        Some("embedding table"),
    )
}

fn own_embedding(s: &mut Scenario) {
    s.package
        .tensors
        .push(stray("model.embed_tokens.weight", vec![1000, 256]));
}

fn nan_in_fc(s: &mut Scenario) {
    set_element(
        s.package.tensor_mut("model.fc.weight"),
        1234,
        bf16::NAN.to_bits(),
    );
}

/// Two NaNs (a quiet one and one with a payload) in the draft's own BF16 embedding table.
fn nan_in_embedding(s: &mut Scenario) {
    own_embedding(s);
    let table = s.package.tensor_mut("model.embed_tokens.weight");
    set_element(table, 5000, 0xffc0);
    set_element(table, 255_999, 0x7f81);
}

fn embedding_without_vocab(s: &mut Scenario) {
    own_embedding(s);
    s.config_mut().remove("vocab_size");
}

fn embedding_wrong_shape(s: &mut Scenario) {
    s.package
        .tensors
        .push(stray("model.embed_tokens.weight", vec![999, 256]));
}

fn gain_labelled_f16(s: &mut Scenario) {
    s.package.tensor_mut(&gain(1, LayerGain::Input)).dtype =
        dflash_gate::__private::dtype::Dtype::F16;
}

fn fc_labelled_f16(s: &mut Scenario) {
    let name = s.package.name(Role::Fc);
    s.package.tensor_mut(&name).dtype = dflash_gate::__private::dtype::Dtype::F16;
}

// ---- target and manifest defects ----

fn set(t: &mut TargetPackage, field: &str, value: u64) {
    t.config[field] = json!(value);
}

fn drop_vocab_size(s: &mut Scenario) {
    s.config_mut().remove("vocab_size");
}

fn shrink_target_vocab(t: &mut TargetPackage) {
    set(t, "vocab_size", 999);
    t.set_table("model.embed_tokens.weight", 999, 256);
    t.set_table("lm_head.weight", 999, 256);
}

fn flip_fc_byte(dir: &Path) {
    // A byte of the fc matrix: no check reads its values, so only provenance can see the change.
    let path = dir.join("model.q4nx");
    let mut bytes = std::fs::read(&path).expect("weights");
    let container = dflash_gate::__private::container::Container::parse(&bytes).expect("container");
    let fc = container.get("model.fc.weight").expect("fc").begin;
    let at = data_start(&bytes) + fc as usize + 100;
    bytes[at] ^= 0x01;
    std::fs::write(&path, bytes).expect("weights");
}

fn list_missing_file(dir: &Path) {
    let path = dir.join("MANIFEST.sha256");
    let mut text = std::fs::read_to_string(&path).expect("manifest");
    text.push_str(&format!("{}  tokenizer_extra.json\n", "0".repeat(64)));
    std::fs::write(path, text).expect("manifest");
}

/// The weights listed a second time, after their own line, with a hash of nothing they hold.
fn list_weights_again_wrongly(dir: &Path) {
    let path = dir.join("MANIFEST.sha256");
    let mut text = std::fs::read_to_string(&path).expect("manifest");
    text.push_str(&format!("{}  model.q4nx\n", "0".repeat(64)));
    std::fs::write(path, text).expect("manifest");
}

/// The weights listed first as `./model.q4nx` with a wrong hash, their right line after it.
fn list_weights_wrongly_first_as_dot_slash(dir: &Path) {
    let path = dir.join("MANIFEST.sha256");
    let text = std::fs::read_to_string(&path).expect("manifest");
    let text = format!("{} *./model.q4nx\n{text}", "0".repeat(64));
    std::fs::write(path, text).expect("manifest");
}

fn add_unlisted_file(dir: &Path) {
    std::fs::write(dir.join("notes.txt"), b"added after the manifest").expect("notes");
}

fn remove_manifest(dir: &Path) {
    std::fs::remove_file(dir.join("MANIFEST.sha256")).expect("manifest");
}

// ---- defects ----

fn constant_group(s: &mut Scenario) {
    // ggml's quantizer on a group whose 32 weights are equal: d = 0, m = the value, codes 0.
    let t = s.package.tensor_mut(&proj(0, Projection::Q));
    let mut tile = t.data[..TILE_BYTES as usize].to_vec();
    crate::synth::write_group(&mut tile, 2, 9, &[0.015; 32]);
    t.data[..TILE_BYTES as usize].copy_from_slice(&tile);
}

fn one_tile_short(s: &mut Scenario) {
    let t = s.package.tensor_mut(&proj(0, Projection::Q));
    t.shape[0] -= 1;
    t.data.truncate(t.data.len() - TILE_BYTES as usize);
}

fn head_dim_disagrees(s: &mut Scenario) {
    s.config_mut().insert("head_dim".into(), json!(16));
}

fn nan_scale(s: &mut Scenario) {
    set_header(
        s.package.tensor_mut(&proj(1, Projection::Gate)),
        3,
        0,
        17,
        bf16::NAN,
    );
}

fn negative_scale(s: &mut Scenario) {
    set_header(
        s.package.tensor_mut(&proj(1, Projection::Down)),
        2,
        0,
        40,
        bf16::from_f32(-0.01),
    );
}

fn infinite_minimum(s: &mut Scenario) {
    set_header(
        s.package.tensor_mut(&proj(0, Projection::V)),
        1,
        1,
        200,
        bf16::NEG_INFINITY,
    );
}

fn half_float_in_grid(s: &mut Scenario) {
    half_float_fill(s.package.tensor_mut(&proj(0, Projection::Q)), 7);
}

fn half_float_declared(s: &mut Scenario) {
    let t = s.package.tensor_mut(&proj(0, Projection::Q));
    half_float_fill(t, 7);
    t.dtype = dflash_gate::__private::dtype::Dtype::F16;
    t.shape = vec![t.data.len() as u64 / 2 / 256, 256];
}

fn block_size_mismatch(s: &mut Scenario) {
    s.config_mut().insert("block_size".into(), json!(4));
}

fn second_family_tensor(s: &mut Scenario) {
    s.package
        .tensors
        .push(stray("model.selector.weight", vec![4, 256]));
}

fn not_dflash(s: &mut Scenario) {
    let c = s.config_mut();
    c.insert("model_type".into(), json!("llama"));
    c.insert("architectures".into(), json!(["LlamaForCausalLM"]));
}

fn dflash_over_another_class(s: &mut Scenario) {
    let c = s.config_mut();
    c.insert("model_type".into(), json!("dflash"));
    c.insert("architectures".into(), json!(["LlamaForCausalLM"]));
}

fn draft_class_beside_another(s: &mut Scenario) {
    let c = s.config_mut();
    c.insert(
        "architectures".into(),
        json!(["Qwen3ForCausalLM", "DFlashDraftModel"]),
    );
}

fn architectures_a_string(s: &mut Scenario) {
    let c = s.config_mut();
    c.insert("model_type".into(), json!("dflash"));
    c.insert("architectures".into(), json!("DFlashDraftModel"));
}

fn rms_norm_eps_zero(s: &mut Scenario) {
    s.config_mut().insert("rms_norm_eps".into(), json!(0));
}

/// Transformers 5 reads the base here first, so a good `rope_theta` beside it is no excuse.
/// The base moved into `rope_parameters` (as Transformers 5 writes it), negative there.
fn rope_theta_negative(s: &mut Scenario) {
    s.config_mut().remove("rope_theta");
    s.config_mut().insert(
        "rope_parameters".into(),
        json!({"rope_type": "default", "rope_theta": -10000}),
    );
}

/// Two RoPE bases, one in each home loaders read: Transformers 5 takes one, older loaders the other.
fn rope_theta_in_two_homes(s: &mut Scenario) {
    s.config_mut().insert(
        "rope_parameters".into(),
        json!({"rope_type": "default", "rope_theta": 500000}),
    );
}

/// DFlash2's name for the embedding scale, nested, beside the first family's at the top level.
fn embedding_scale_under_two_names(s: &mut Scenario) {
    let config = s.config_mut();
    let nested = config.entry("dflash_config").or_insert_with(|| json!({}));
    nested["input_embedding_scale"] = json!(8.0);
}

/// The config gives q, k, v and o biases (Qwen2's shape) that the package does not hold.
fn attention_bias_without_biases(s: &mut Scenario) {
    s.config_mut().insert("attention_bias".into(), json!(true));
}

fn dflash_config_an_array(s: &mut Scenario) {
    s.config_mut().insert("dflash_config".into(), json!([1]));
}

fn zeroed_tile_header(s: &mut Scenario) {
    let t = s.package.tensor_mut(&proj(0, Projection::Up));
    let at = 5 * TILE_BYTES as usize;
    t.data[at..at + 1024].fill(0);
}

fn sliding_window_mismatch(s: &mut Scenario) {
    s.config_mut().insert("sliding_window".into(), json!(64));
}

fn f16_gain(s: &mut Scenario) {
    let name = s.package.name(Role::FinalNorm);
    bf16_to_f16_bits(s.package.tensor_mut(&name));
}

fn truncated(s: &mut Scenario) {
    s.weight_edits.push(|b| b.truncate(b.len() - 1000));
}

fn overlapping(s: &mut Scenario) {
    // The last two entries in writer order are layer 1's q_proj and v_proj; v_proj is moved to start
    // one tile into q_proj.
    let e = s.entries_mut();
    let (last, prev) = (e.len() - 1, e.len() - 2);
    let len = e[last].offsets[1] - e[last].offsets[0];
    let begin = e[prev].offsets[0] + TILE_BYTES;
    e[last].offsets = [begin, begin + len];
}

fn missing_intermediate(s: &mut Scenario) {
    s.config_mut().remove("intermediate_size");
}

fn q8_0_lookalike(s: &mut Scenario) {
    let t = s.package.tensor_mut(&proj(0, Projection::Q));
    let tiles = t.shape[0];
    t.shape = vec![tiles, 8704];
    t.data = vec![0x11; (tiles * 8704) as usize];
}

fn q4_0_lookalike(s: &mut Scenario) {
    let t = s.package.tensor_mut(&proj(0, Projection::Q));
    for tile in t.data.chunks_exact_mut(TILE_BYTES as usize) {
        tile[512..1024].fill(0);
    }
}

fn padding_not_zero(s: &mut Scenario) {
    // Padded geometry: K = 288, so tile 1 of q_proj covers columns 256..511 and only its first
    // column group is real. Column 40 of that tile (group c 1), row 0, is padding.
    let t = s.package.tensor_mut(&proj(0, Projection::Q));
    let mut tile = t.data[TILE_BYTES as usize..2 * TILE_BYTES as usize].to_vec();
    crate::synth::set_code(&mut tile, 40, 0, 3);
    t.data[TILE_BYTES as usize..2 * TILE_BYTES as usize].copy_from_slice(&tile);
}

fn embedding_scale_mismatch(s: &mut Scenario) {
    s.config_mut().insert("embedding_scale".into(), json!(16.5));
}

fn mask_token_mismatch(s: &mut Scenario) {
    s.config_mut().insert("mask_token_id".into(), json!(998));
}

fn mask_is_own_eos(s: &mut Scenario) {
    s.config_mut().insert("eos_token_id".into(), json!(999));
}

fn projection_absent(s: &mut Scenario) {
    let name = proj(1, Projection::Down);
    s.package.tensors.retain(|t| t.name != name);
}

fn extra_layer(s: &mut Scenario) {
    let mut t = s.package.tensor(&proj(0, Projection::Q)).clone();
    t.name = proj(2, Projection::Q);
    s.package.tensors.push(t);
}

fn config_scalar_in_header(s: &mut Scenario) {
    s.package
        .raw_header_keys
        .push(("block_size".into(), "8".into()));
}

fn duplicate_header_key(s: &mut Scenario) {
    s.package.raw_header_keys.push((
        "dflash.block_size".into(),
        r#"{"dtype":"I32","shape":[1],"data_offsets":[0,4]}"#.into(),
    ));
}

fn trailing_bytes(s: &mut Scenario) {
    s.weight_edits.push(|b| b.extend_from_slice(&[0; 16]));
}

fn dirty_gap(s: &mut Scenario) {
    s.package.encoding.aligned = true;
    // The first tensor in writer order is the 4-byte embedding_scale, so data bytes 4..64 are a gap.
    s.weight_edits.push(|b| {
        let at = data_start(b) + 10;
        b[at] = 0x5a;
    });
}

fn fc_missing_tap(s: &mut Scenario) {
    let name = s.package.name(Role::Fc);
    let t = s.package.tensor_mut(&name);
    t.shape = vec![256, 512];
    t.data.truncate(256 * 512 * 2);
}

fn gain_off_size(s: &mut Scenario) {
    let t = s.package.tensor_mut(&gain(0, LayerGain::QNorm));
    t.shape = vec![62];
    t.data.truncate(124);
}

fn taps_not_increasing(s: &mut Scenario) {
    s.config_mut()
        .insert("target_layer_ids".into(), json!([3, 1, 5]));
}

fn tap_beyond_depth(s: &mut Scenario) {
    s.config_mut().insert("num_target_layers".into(), json!(5));
}

fn malformed_config(s: &mut Scenario) {
    s.config_text = Some(b"{\"model_type\": \"dflash\",".to_vec());
}

fn no_weight_file(s: &mut Scenario) {
    s.weight_name = None;
}

/// A copy of the weights beside model.q4nx under another name: never read, and a loader that globs
/// may load it.
fn another_weight_file(s: &mut Scenario) {
    let copy = s.weight_bytes();
    s.extra_files.push(("other.q4nx".into(), copy));
}

fn two_weight_files(s: &mut Scenario) {
    s.weight_name = Some("a.q4nx".into());
    let copy = s.weight_bytes();
    s.extra_files.push(("b.q4nx".into(), copy));
}

// ---- running an arm ----

/// Builds the arm's package (and target, manifest or source) in a fresh temporary directory and gates it.
pub fn gate_arm(
    base: Base,
    encoding: Encoding,
    defect: fn(&mut Scenario),
    extra: Extra,
) -> Result<Report, String> {
    let root = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
    gate_arm_in(root.path(), base, encoding, defect, extra)?
        .map_err(|e| format!("the gate could not run: {e}"))
}

/// `gate_arm` under `root`, keeping the gate's own error apart from the harness's.
pub fn gate_arm_in(
    root: &Path,
    base: Base,
    encoding: Encoding,
    defect: fn(&mut Scenario),
    extra: Extra,
) -> Result<Result<Report, dflash_gate::PackageError>, String> {
    let (dir, options) = prepare_arm(root, base, encoding, defect, extra)?;
    Ok(dflash_gate::gate(&dir, &options))
}

/// Writes an arm's package (and its source, target or manifest) under `root`: the package's
/// directory and the options that gate it as the arm does.
pub fn prepare_arm(
    root: &Path,
    base: Base,
    encoding: Encoding,
    defect: fn(&mut Scenario),
    extra: Extra,
) -> Result<(std::path::PathBuf, dflash_gate::Options), String> {
    let mut scenario = Scenario::new(Package::generate(&base.geometry(), encoding, SEED));
    let mut options = dflash_gate::Options::default();
    if let Extra::Source(source) = extra {
        let source_dir = root.join("source");
        std::fs::create_dir(&source_dir).map_err(|e| e.to_string())?;
        let path = match source.gguf {
            Some(gguf) => gguf.write(&mut scenario.package, &source_dir)?,
            None => {
                crate::synth::source::write_source(
                    &mut scenario.package,
                    &source_dir,
                    source.options,
                    SEED,
                )
                .map_err(|e| format!("writing the source: {e}"))?;
                source_dir.clone()
            }
        };
        (source.after)(&source_dir);
        options.source = Some(path);
    }
    defect(&mut scenario);
    let dir = root.join("draft");
    std::fs::create_dir(&dir).map_err(|e| e.to_string())?;
    scenario
        .write(&dir)
        .map_err(|e| format!("writing the package: {e}"))?;
    match extra {
        Extra::None | Extra::Source(_) => {}
        Extra::Target(bend) => {
            let mut target = TargetPackage::matching(&base.geometry());
            bend(&mut target);
            let target_dir = root.join("target");
            target
                .write(&target_dir)
                .map_err(|e| format!("writing the target: {e}"))?;
            options.target = Some(target_dir);
        }
        Extra::Manifest(after) => {
            write_manifest(&dir).map_err(|e| format!("writing the manifest: {e}"))?;
            after(&dir);
            options.manifest = true;
        }
    }
    Ok((dir, options))
}

/// Runs one arm: `Ok` when the gate said exactly what the arm expects.
pub fn run(arm: &Arm) -> Result<(), String> {
    let report = gate_arm(arm.base, arm.encoding, arm.defect, arm.extra)?;
    // Every arm's report, passing or refused, is also a test of the published JSON schema.
    crate::schema::validate(&report.to_json())?;
    crate::loaders::stricter_than_every_engine(&report)?;
    match &arm.expect {
        Expect::Pass { facts } => {
            if report.verdict() != Outcome::Pass {
                let bad: Vec<String> = report
                    .checks()
                    .iter()
                    .filter(|c| c.outcome() != Outcome::Pass)
                    .map(|c| format!("{} {}: {}", c.outcome(), c.id(), c.message()))
                    .collect();
                return Err(format!(
                    "expected PASS, got {}:\n  {}",
                    report.verdict(),
                    bad.join("\n  ")
                ));
            }
            // PASS is no proof if a check it promises is missing (one left to run later, never run).
            for id in dflash_gate::__private::checks::CONTAINER_CHECKS {
                let runs = report.checks().iter().filter(|c| c.id() == id).count();
                if runs != 1 {
                    return Err(format!("{id} is in the report {runs} times, owed once"));
                }
            }
            facts(&report)
        }
        Expect::Refused {
            check,
            outcome,
            mentions,
            also,
        } => {
            let good_extra = match arm.extra {
                Extra::None => Extra::None,
                Extra::Target(_) => Extra::Target(same_target),
                Extra::Manifest(_) => Extra::Manifest(untouched),
                Extra::Source(s) => Extra::Source(s.faithful()),
            };
            let good = gate_arm(arm.base, arm.encoding, none, good_extra)?;
            if good.verdict() != Outcome::Pass {
                return Err(format!(
                    "the control's good package does not pass ({})",
                    good.verdict()
                ));
            }
            judge(&good, &report, check, *outcome, mentions, also)
        }
    }
}

/// Compares a control's report with its good package's, check by check.
pub fn judge(
    good: &Report,
    bad: &Report,
    target: &str,
    outcome: Outcome,
    mentions: &[&str],
    also: &[(&str, Outcome, &str)],
) -> Result<(), String> {
    let Some(hit) = bad.check(target) else {
        return Err(format!(
            "check {target} did not run; checks: {:?}",
            bad.checks().iter().map(|c| c.id()).collect::<Vec<_>>()
        ));
    };
    if hit.outcome() != outcome {
        return Err(format!(
            "{target}: expected {outcome}, got {}: {}",
            hit.outcome(),
            hit.message()
        ));
    }
    for m in mentions {
        if !hit.message().contains(m) {
            return Err(format!("{target} does not name {m:?}: {}", hit.message()));
        }
    }
    let allowed: BTreeSet<&str> = also.iter().map(|(id, _, _)| *id).chain([target]).collect();
    for (id, want, why) in also {
        let got = bad.check(id).map(|c| c.outcome());
        if got != Some(*want) {
            return Err(format!("{id} ({why}): expected {want}, got {got:?}"));
        }
    }
    // A refused config names no family: it lists the first family's checks of an unpadded geometry,
    // so only another family's good package (or a padded one) runs checks the control does not list.
    // Every other stop lists each check it stopped, blocked.
    let stops_the_run = target == "config.is_dflash"
        && (good.census().family != Some("dflash") || good.check("tiles.padding_zero").is_some());
    for c in bad.checks() {
        if allowed.contains(c.id()) {
            continue;
        }
        let before = good.check(c.id()).map(|g| g.outcome());
        let blocked = c.outcome() == Outcome::Undecided
            && c.blocked_by().is_some_and(|b| changed(good, bad, b));
        if before != Some(c.outcome()) && !blocked {
            return Err(format!(
                "{} changed outcome ({before:?} -> {}) for another reason: {}",
                c.id(),
                c.outcome(),
                c.message()
            ));
        }
    }
    for g in good.checks() {
        if bad.check(g.id()).is_none() && !stops_the_run {
            return Err(format!(
                "{} ran on the good package but not on the control",
                g.id()
            ));
        }
    }
    Ok(())
}

/// True when check `id` has a different outcome on the control than on the good package.
fn changed(good: &Report, bad: &Report, id: &str) -> bool {
    good.check(id).map(|c| c.outcome()) != bad.check(id).map(|c| c.outcome())
}
