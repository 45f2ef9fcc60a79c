//! The second family (spec section 10) and the assistant head: one pass arm per accepted encoding,
//! and one control per way a DFlash2 package (or a first-family one holding its tensors) goes wrong.

use super::source::Source;
use super::{arm, expect_eq, fail, grids, none, Arm, Base, Expect, Extra};
use crate::defects::{set_element, set_header, stray, Scenario};
use crate::synth::source::SourceOptions;
use crate::synth::{Draft, Encoding, Features, Geometry, Package, Tensor};
use dflash_gate::__private::dtype::Dtype;
use dflash_gate::__private::family::{ConvPart, ConvSite, Role, Scalar, SelectorPart};
use dflash_gate::{Outcome, Report};
use half::bf16;
use serde_json::{json, Map, Value};

/// The reference's encoding: the feature fields in `dflash_config`.
fn reference() -> Encoding {
    Encoding {
        nested_dflash_config: true,
        ..Encoding::default()
    }
}

fn d2(
    name: &'static str,
    base: Base,
    encoding: Encoding,
    defect: fn(&mut Scenario),
    expect: Expect,
) -> Arm {
    Arm {
        name,
        base,
        encoding,
        defect,
        extra: Extra::None,
        expect,
    }
}

fn d2x(name: &'static str, encoding: Encoding, source: Source, expect: Expect) -> Arm {
    Arm {
        name,
        base: Base::Dflash2,
        encoding,
        defect: none,
        extra: Extra::Source(source),
        expect,
    }
}

fn untouched(_: &std::path::Path) {}

/// The source's config says its attention is causal (spec section 10's `is_causal`); the package's
/// does not.
fn source_is_causal(dir: &std::path::Path) {
    let path = dir.join("config.json");
    let mut config: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("config")).expect("json");
    assert_eq!(
        config["is_causal"],
        json!(false),
        "the package's config says false"
    );
    config["is_causal"] = json!(true);
    std::fs::write(&path, serde_json::to_vec_pretty(&config).expect("json")).expect("write");
}

/// The package's own checkpoint, written beside it (less `omit`).
fn faithful(omit: Option<&'static str>) -> Source {
    Source {
        options: SourceOptions {
            omit,
            ..SourceOptions::default()
        },
        after: untouched,
        gguf: None,
    }
}

fn passes(
    name: &'static str,
    base: Base,
    encoding: Encoding,
    facts: fn(&Report) -> Result<(), String>,
) -> Arm {
    d2(name, base, encoding, none, Expect::Pass { facts })
}

/// The small DFlash2 geometry with only the convolutions switched on.
pub fn conv_only() -> Geometry {
    with_features(|f| f.selector = None)
}

/// The small DFlash2 geometry with only the candidate selector switched on.
pub fn selector_only() -> Geometry {
    with_features(|f| f.conv = None)
}

fn with_features(edit: fn(&mut Features)) -> Geometry {
    let mut g = Geometry::dflash2_small();
    if let Draft::DFlash2(f) = &mut g.draft {
        edit(f);
    }
    g
}

/// Every DFlash2 and assistant-head arm, in a stable order.
#[rustfmt::skip]
pub fn all() -> Vec<Arm> {
    let r = reference();
    vec![
        // One pass arm per accepted encoding.
        passes("pass::dflash2_matrices_gridded", Base::Dflash2, r, gridded_census),
        passes("pass::dflash2_matrices_bf16", Base::Dflash2, Encoding { dflash2_matrices_bf16: true, ..r }, bf16_census),
        passes("pass::dflash2_codebooks_gridded", Base::Dflash2, Encoding { codebooks_gridded: true, ..r }, gridded_codebooks_census),
        passes("pass::dflash2_codebooks_with_weight", Base::Dflash2, Encoding { codebooks_weight_suffix: true, ..r }, both_features),
        passes("pass::dflash2_bare_names", Base::Dflash2, Encoding { prefixed: false, ..r }, both_features),
        passes("pass::dflash2_tiles_declared_3d", Base::Dflash2, Encoding { tiles_3d: true, ..r }, both_features),
        passes("pass::dflash2_fields_at_top_level", Base::Dflash2, Encoding::default(), both_features),
        passes("pass::dflash2_conv_only", Base::Dflash2ConvOnly, r, conv_only_census),
        passes("pass::dflash2_selector_only", Base::Dflash2SelectorOnly, r, selector_only_census),
        passes("pass::assistant_head", Base::AssistantHead, Encoding::default(), assistant_census),
        // --source compares the second family's tensors too, in either form.
        d2x("pass::dflash2_source_matches", Encoding { codebooks_gridded: true, ..r }, faithful(None), Expect::Pass { facts: source_compared }),
        d2x("pass::dflash2_source_bf16_matrices", Encoding { dflash2_matrices_bf16: true, ..r }, faithful(None), Expect::Pass { facts: source_passes }),
        d2x("control::dflash2_source_config_is_causal_differs", r, Source { after: source_is_causal, ..faithful(None) }, fail("source.config", &["is_causal: package false, source true"])),
        d2x("control::dflash2_source_lacks_a_kernel_projection", r, faithful(Some("layers.0.mlp_conv.kernel_projection.weight")), fail("source.inventory", &["layers.0.mlp_conv.kernel_projection.weight"])),
        // A draft's own embedding table as a q4_1 grid (1000 x 256: rows pad to 1024) is a grid like
        // any other: its headers go through the tile checks.
        arm("pass::own_embedding_grid", Base::Small, embedding_grid, Expect::Pass { facts: embedding_grid_scanned }),
        arm("control::own_embedding_grid_nan_scale", Base::Small, embedding_grid_nan_scale, Expect::Refused {
            check: "tiles.headers_sane",
            outcome: Outcome::Fail,
            mentions: &["model.embed_tokens.weight", "tile 3", "scale is not finite"],
            also: &[("tiles.padding_zero", Outcome::Pass, "the table's 1000 rows pad to 1024, so the padding check runs")],
        }),
        // The controls.
        arm("control::dflash2_neither_feature", Base::Small, neither_feature, fail("config.geometry", &["DFlash2DraftModel", "switches on neither feature"])),
        d2("control::dflash2_mlp_conv_missing", Base::Dflash2, r, mlp_conv_missing, fail("dflash2.conv", &["absent: model.layers.1.mlp_conv.base_kernel, model.layers.1.mlp_conv.kernel_projection.weight"])),
        d2("control::dflash2_base_kernel_wrong_kernel_size", Base::Dflash2, r, base_kernel_wrong_size, fail("dflash2.conv", &["model.layers.0.attention_conv.base_kernel: declared BF16 [2, 3, 256], expected BF16 [2, 2, 256]"])),
        d2("control::dflash2_kernel_projection_for_another_group_size", Base::Dflash2, r, kernel_projection_other_group, fail("dflash2.conv", &["model.layers.0.mlp_conv.kernel_projection.weight", "1 short (64 x 256 needs 2 tiles)"])),
        d2("control::dflash2_group_size_does_not_divide_hidden", Base::Dflash2, r, group_not_dividing, Expect::Refused {
            check: "config.geometry",
            outcome: Outcome::Fail,
            mentions: &["conv_group_size 24 does not divide hidden_size 256"],
            also: &[("scalars.conv_group_size", Outcome::Fail, "the container's copy (16) now differs from the config's (24)")],
        }),
        d2("control::dflash2_half_a_pair", Base::Dflash2, r, half_a_pair, fail("config.geometry", &["selector_top_k is absent while dflash_config.selector_rank is 32", "both or neither"])),
        d2("control::dflash2_selector_tensors_without_fields", Base::Dflash2ConvOnly, r, selector_without_fields, fail("inventory.explained", &["model.candidate_selector.predecessor_codebook", "candidate selector tensor, but config.json sets no selector_rank/selector_top_k"])),
        d2("control::dflash2_codebook_one_row_short", Base::Dflash2, r, codebook_row_short, fail("dflash2.selector", &["model.candidate_selector.successor_codebook: declared BF16 [999, 32], expected BF16 matrix 1000 x 32 or a q4_1 grid of 1000 x 32"])),
        d2("control::dflash2_codebook_in_both_spellings", Base::Dflash2, r, codebook_twice, Expect::Refused {
            check: "dflash2.selector",
            outcome: Outcome::Fail,
            mentions: &["model.candidate_selector.predecessor_codebook and model.candidate_selector.predecessor_codebook.weight are both present"],
            also: &[("inventory.explained", Outcome::Fail, "the second name for one role is left unexplained, by name")],
        }),
        d2("control::dflash2_top_k_above_vocab", Base::Dflash2, r, top_k_above_vocab, Expect::Refused {
            check: "config.geometry",
            outcome: Outcome::Fail,
            mentions: &["selector_top_k 1001 exceeds vocab_size 1000"],
            also: &[("scalars.selector_top_k", Outcome::Fail, "the container's copy (8) now differs from the config's (1001)")],
        }),
        d2("control::dflash2_feature_scalar_without_fields", Base::Dflash2SelectorOnly, r, conv_scalar_without_fields, Expect::Refused {
            check: "inventory.explained",
            outcome: Outcome::Fail,
            mentions: &["dflash.conv_kernel_size (a DFlash2 convolution scalar, but config.json sets no conv_kernel_size/conv_group_size)"],
            also: &[("scalars.conv_kernel_size", Outcome::Undecided, "the config has no conv_kernel_size to compare it with")],
        }),
        arm("control::conv_tensors_in_first_family", Base::Small, conv_in_first_family, fail("inventory.explained", &["model.layers.0.attention_conv.base_kernel", "second-family (DFlash2) conv attention_conv.base_kernel tensor, but config.json declares the DFlash family"])),
        d2("control::dflash2_inf_in_base_kernel", Base::Dflash2, r, inf_in_base_kernel, fail("bf16.finite", &["model.layers.1.attention_conv.base_kernel holds 1 non-finite value", "the first inf at element 300 of 1024 ([0, 1, 44] in its shape [2, 2, 256])"])),
        d2("control::dflash2_nan_in_codebook", Base::Dflash2, r, nan_in_codebook, fail("bf16.finite", &["model.candidate_selector.predecessor_codebook holds 1 non-finite value", "the first NaN at element 777 of 32000 ([24, 9] in its shape [1000, 32])"])),
        d2("control::dflash2_nan_in_bf16_kernel_projection", Base::Dflash2, Encoding { dflash2_matrices_bf16: true, ..r }, nan_in_bf16_kernel_projection, fail("bf16.finite", &["model.layers.0.mlp_conv.kernel_projection.weight holds 1 non-finite value", "the first NaN at element 100 of 16384 ([0, 100] in its shape [64, 256])"])),
        d2("control::dflash2_nan_scale_in_gridded_kernel_projection", Base::Dflash2, r, nan_in_kernel_projection, fail("tiles.headers_sane", &["model.layers.0.mlp_conv.kernel_projection.weight", "tile 1", "scale is not finite"])),
        arm("control::layer_types_wrong_length", Base::Small, layer_types_wrong_length, fail("config.geometry", &["layer_types has 3 entries, num_hidden_layers is 2"])),
        arm("control::sliding_layer_without_window", Base::Padded, sliding_without_window, fail("config.geometry", &["layer_types[0] is \"sliding_attention\" but sliding_window is null"])),
        d2("control::dflash2_scalar_differs", Base::Dflash2, r, conv_scalar_differs, fail("scalars.conv_kernel_size", &["[3] vs [2]"])),
        arm("control::assistant_alias_misspelled", Base::AssistantHead, alias_misspelled, Expect::Refused {
            check: "norms.sizes",
            outcome: Outcome::Fail,
            mentions: &["absent: model.encoder.output_norm_enc.weight"],
            also: &[("inventory.explained", Outcome::Fail, "the misspelled name is left unexplained, by name")],
        }),
    ]
}

// ---- census facts of the pass arms ----

fn outcome(r: &Report, id: &str) -> Option<Outcome> {
    r.check(id).map(|c| c.outcome())
}

fn form<'r>(r: &'r Report, name: &str) -> Result<&'r str, String> {
    r.census()
        .tensors
        .iter()
        .find(|t| t.name == name)
        .map(|t| t.form_text.as_str())
        .ok_or_else(|| format!("{name} is not in the census"))
}

fn both_features(r: &Report) -> Result<(), String> {
    expect_eq("census.family", r.census().family, Some("dflash2"))?;
    expect_eq(
        "dflash2.conv",
        outcome(r, "dflash2.conv"),
        Some(Outcome::Pass),
    )?;
    expect_eq(
        "dflash2.selector",
        outcome(r, "dflash2.selector"),
        Some(Outcome::Pass),
    )?;
    for s in Scalar::SECOND_FAMILY {
        let id = format!("scalars.{}", s.field());
        expect_eq(&id, outcome(r, &id), Some(Outcome::Pass))?;
    }
    expect_eq(
        "unexplained",
        r.census()
            .tensors
            .iter()
            .filter(|t| t.role.is_none())
            .count(),
        0,
    )
}

/// 2 layers x 7 projections, 4 kernel projections and the hidden projection are grids.
fn gridded_census(r: &Report) -> Result<(), String> {
    both_features(r)?;
    expect_eq("grids", grids(r).len(), 14 + 4 + 1)?;
    let kp = form(r, "model.layers.1.mlp_conv.kernel_projection.weight")?;
    expect_eq(
        "kernel projection form",
        kp,
        "q4_1 tile grid 64 x 256, 2 tiles",
    )?;
    let cb = form(r, "model.candidate_selector.predecessor_codebook")?;
    expect_eq("codebook form", cb, "BF16 matrix 1000 x 32")?;
    let bk = form(r, "model.layers.0.attention_conv.base_kernel")?;
    expect_eq("base kernel form", bk, "BF16 [2, 2, 256]")
}

fn bf16_census(r: &Report) -> Result<(), String> {
    both_features(r)?;
    expect_eq("grids", grids(r).len(), 14)?;
    let kp = form(r, "model.layers.1.attention_conv.kernel_projection.weight")?;
    expect_eq("kernel projection form", kp, "BF16 matrix 64 x 256")
}

/// Gridded codebooks are 1000 x 32: padded to 1024 x 256, so the padding check runs on them.
fn gridded_codebooks_census(r: &Report) -> Result<(), String> {
    both_features(r)?;
    expect_eq("grids", grids(r).len(), 14 + 4 + 1 + 2)?;
    let cb = form(r, "model.candidate_selector.successor_codebook")?;
    expect_eq("codebook form", cb, "q4_1 tile grid 1000 x 32, 32 tiles")?;
    expect_eq(
        "padding check",
        outcome(r, "tiles.padding_zero"),
        Some(Outcome::Pass),
    )
}

fn conv_only_census(r: &Report) -> Result<(), String> {
    expect_eq(
        "dflash2.conv",
        outcome(r, "dflash2.conv"),
        Some(Outcome::Pass),
    )?;
    expect_eq("dflash2.selector", outcome(r, "dflash2.selector"), None)
}

fn selector_only_census(r: &Report) -> Result<(), String> {
    expect_eq("dflash2.conv", outcome(r, "dflash2.conv"), None)?;
    expect_eq(
        "dflash2.selector",
        outcome(r, "dflash2.selector"),
        Some(Outcome::Pass),
    )
}

fn assistant_census(r: &Report) -> Result<(), String> {
    expect_eq("census.family", r.census().family, Some("assistant_head"))?;
    let first = r
        .check("config.is_dflash")
        .map(|c| c.message())
        .unwrap_or_default();
    if !first.contains("MuseGlimmerAssistantModel")
        || !first.contains("encoder.output_norm_enc.weight is hidden_norm")
    {
        return Err(format!(
            "config.is_dflash does not name the aliases: {first}"
        ));
    }
    let role = |name: &str| {
        r.census()
            .tensors
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.role_text.clone())
    };
    expect_eq(
        "encoder.fc.weight",
        role("model.encoder.fc.weight").as_deref(),
        Some("fusion matrix fc"),
    )?;
    expect_eq("dflash2.conv", outcome(r, "dflash2.conv"), None)
}

/// Every check of --source passed.
fn source_passes(r: &Report) -> Result<(), String> {
    for id in dflash_gate::__private::source::CHECKS {
        expect_eq(id, outcome(r, id), Some(Outcome::Pass))?;
    }
    Ok(())
}

/// Every grid was compared with its source, the DFlash2 matrices and gridded codebooks among them.
fn source_compared(r: &Report) -> Result<(), String> {
    source_passes(r)?;
    let names: Vec<&str> = r
        .census()
        .source_grids
        .iter()
        .map(|g| g.name.as_str())
        .collect();
    expect_eq("grids compared", names.len(), 14 + 4 + 1 + 2)?;
    for name in [
        "model.layers.1.attention_conv.kernel_projection.weight",
        "model.candidate_selector.successor_codebook",
    ] {
        if !names.contains(&name) {
            return Err(format!("{name} was not compared with its source"));
        }
    }
    Ok(())
}

fn embedding_grid_scanned(r: &Report) -> Result<(), String> {
    let form = form(r, "model.embed_tokens.weight")?;
    expect_eq(
        "embedding form",
        form,
        "q4_1 tile grid 1000 x 256, 32 tiles",
    )?;
    expect_eq(
        "padding check",
        outcome(r, "tiles.padding_zero"),
        Some(Outcome::Pass),
    )
}

// ---- defects ----

/// `dflash_config` of a package written with the reference encoding.
fn nested(s: &mut Scenario) -> &mut Map<String, Value> {
    s.config_mut()
        .get_mut("dflash_config")
        .and_then(Value::as_object_mut)
        .expect("the reference encoding nests dflash_config")
}

fn conv_name(s: &Scenario, layer: u64, site: ConvSite, part: ConvPart) -> String {
    s.package.name(Role::Conv { layer, site, part })
}

fn replace(s: &mut Scenario, tensor: Tensor) {
    let t = s.package.tensor_mut(&tensor.name.clone());
    *t = tensor;
}

fn embedding_grid(s: &mut Scenario) {
    s.package.tensors.push(Tensor {
        name: "model.embed_tokens.weight".into(),
        dtype: Dtype::I8,
        shape: vec![32, 5120],
        data: crate::synth::quantized_grid(1000, 256, 9),
    });
}

fn embedding_grid_nan_scale(s: &mut Scenario) {
    embedding_grid(s);
    set_header(
        s.package.tensor_mut("model.embed_tokens.weight"),
        3,
        0,
        17,
        bf16::NAN,
    );
}

fn neither_feature(s: &mut Scenario) {
    s.config_mut()
        .insert("architectures".into(), json!(["DFlash2DraftModel"]));
}

fn mlp_conv_missing(s: &mut Scenario) {
    let names = [ConvPart::BaseKernel, ConvPart::KernelProjection]
        .map(|p| conv_name(s, 1, ConvSite::Mlp, p));
    s.package.tensors.retain(|t| !names.contains(&t.name));
}

fn base_kernel_wrong_size(s: &mut Scenario) {
    let name = conv_name(s, 0, ConvSite::Attention, ConvPart::BaseKernel);
    replace(s, stray(&name, vec![2, 3, 256]));
}

/// A kernel projection made for conv_group_size 32: 2 * 2 * 256 / 32 = 32 rows, one tile block.
fn kernel_projection_other_group(s: &mut Scenario) {
    let name = conv_name(s, 0, ConvSite::Mlp, ConvPart::KernelProjection);
    replace(
        s,
        Tensor {
            name,
            dtype: Dtype::I8,
            shape: vec![1, 5120],
            data: crate::synth::quantized_grid(32, 256, 7),
        },
    );
}

fn group_not_dividing(s: &mut Scenario) {
    nested(s).insert("conv_group_size".into(), json!(24));
}

fn half_a_pair(s: &mut Scenario) {
    nested(s).remove("selector_top_k");
}

/// The selector's three tensors, taken from a package that has them, in one that switches it off.
fn selector_without_fields(s: &mut Scenario) {
    let donor = Package::generate(&Geometry::dflash2_small(), reference(), 5);
    for part in SelectorPart::ALL {
        s.package
            .tensors
            .push(donor.tensor(&donor.name(Role::Selector(part))).clone());
    }
}

fn codebook_row_short(s: &mut Scenario) {
    let name = s
        .package
        .name(Role::Selector(SelectorPart::SuccessorCodebook));
    replace(s, stray(&name, vec![999, 32]));
}

fn codebook_twice(s: &mut Scenario) {
    let name = s
        .package
        .name(Role::Selector(SelectorPart::PredecessorCodebook));
    let mut twin = s.package.tensor(&name).clone();
    twin.name = format!("{name}.weight");
    s.package.tensors.push(twin);
}

fn top_k_above_vocab(s: &mut Scenario) {
    nested(s).insert("selector_top_k".into(), json!(1001));
}

fn conv_scalar_without_fields(s: &mut Scenario) {
    s.package.tensors.push(Tensor {
        name: Scalar::ConvKernelSize.tensor_name(),
        dtype: Dtype::I32,
        shape: vec![1],
        data: 2i32.to_le_bytes().to_vec(),
    });
}

fn conv_in_first_family(s: &mut Scenario) {
    let donor = Package::generate(&Geometry::dflash2_small(), reference(), 5);
    for part in [ConvPart::BaseKernel, ConvPart::KernelProjection] {
        let name = donor.name(Role::Conv {
            layer: 0,
            site: ConvSite::Attention,
            part,
        });
        s.package.tensors.push(donor.tensor(&name).clone());
    }
}

fn inf_in_base_kernel(s: &mut Scenario) {
    let name = "model.layers.1.attention_conv.base_kernel";
    set_element(s.package.tensor_mut(name), 300, bf16::INFINITY.to_bits());
}

fn nan_in_codebook(s: &mut Scenario) {
    let name = "model.candidate_selector.predecessor_codebook";
    set_element(s.package.tensor_mut(name), 777, bf16::NAN.to_bits());
}

fn nan_in_bf16_kernel_projection(s: &mut Scenario) {
    let name = "model.layers.0.mlp_conv.kernel_projection.weight";
    set_element(s.package.tensor_mut(name), 100, bf16::NAN.to_bits());
}

fn nan_in_kernel_projection(s: &mut Scenario) {
    let name = conv_name(s, 0, ConvSite::Mlp, ConvPart::KernelProjection);
    set_header(s.package.tensor_mut(&name), 1, 0, 40, bf16::NAN);
}

fn layer_types_wrong_length(s: &mut Scenario) {
    s.config_mut()
        .insert("layer_types".into(), json!(vec!["full_attention"; 3]));
}

fn sliding_without_window(s: &mut Scenario) {
    s.config_mut()
        .insert("layer_types".into(), json!(["sliding_attention"]));
}

fn conv_scalar_differs(s: &mut Scenario) {
    let t = s.package.tensor_mut(&Scalar::ConvKernelSize.tensor_name());
    t.data = 3i32.to_le_bytes().to_vec();
}

fn alias_misspelled(s: &mut Scenario) {
    s.package
        .tensor_mut("model.encoder.output_norm_enc.weight")
        .name = "model.encoder.output_norm.weight".into();
}
