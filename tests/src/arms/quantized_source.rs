//! Arms for `--source DIR` against a quantized folder (spec 17.2): the folder arm's bf16 draft as
//! the source, and a copy of it quantized in each scheme the gate reads. A faithful pair passes all
//! eleven checks; each control bends the source once and is refused at the named check, naming the
//! tensor.

use super::folder::{fail, judge_counted, named, weights, write_arm, Owed};
use super::gguf_draft::Trial;
use crate::synth::pack_quantized::{pack_quantize, PackOptions};
use crate::synth::quantized::{fp8_quantize, mlx_quantize, nvfp4_quantize, Grain, Mlx, Writer};
use dflash_gate::{gate, CheckId, Form, Options};
use std::path::{Path, PathBuf};

const BF16: &str = CheckId::SOURCE_BF16;
const Q4_1: &str = CheckId::SOURCE_Q4_1;
const INVENTORY: &str = CheckId::SOURCE_INVENTORY;

struct Arm {
    name: &'static str,
    quantize: fn(&Path),
    /// Done to the written source folder.
    bend: fn(&Path),
    owed: Owed,
}

const fn pass(name: &'static str, quantize: fn(&Path)) -> Arm {
    Arm {
        name,
        quantize,
        bend: |_| {},
        owed: Owed::Pass,
    }
}

fn w4(d: &Path) {
    pack_quantize(d, PackOptions::default())
}

const AFFINE_4: Mlx = Mlx {
    mode: "affine",
    bits: 4,
    group: 64,
};

/// The folder quantized by MLX in one mode throughout.
fn mlx(d: &Path, mode: &'static str, bits: u32, group: usize) {
    mlx_quantize(d, Mlx { mode, bits, group }, &[], &[])
}

/// The source's `a` and `b` swapped (both `[N, K]` of one shape): the draft's `a` was then
/// quantized from another tensor's weights.
fn swap(d: &Path, a: &str, b: &str) {
    weights(d, |t| {
        let (x, y) = (named(t, a).3.clone(), named(t, b).3.clone());
        named(t, a).3 = y;
        named(t, b).3 = x;
    });
}

const ARMS: &[Arm] = &[
    pass("quantized_source::pass::pack_quantized_w4_group", w4),
    pass(
        "quantized_source::pass::pack_quantized_w4_asymmetric",
        |d| {
            let options = PackOptions {
                symmetric: false,
                ..PackOptions::default()
            };
            pack_quantize(d, options)
        },
    ),
    pass("quantized_source::pass::pack_quantized_w8_channel", |d| {
        let options = PackOptions {
            bits: 8,
            group: None,
            ..PackOptions::default()
        };
        pack_quantize(d, options)
    }),
    pass(
        "quantized_source::pass::fp8_block_compressed_tensors",
        |d| fp8_quantize(d, Writer::CompressedTensors, Grain::Block(128, 128), false),
    ),
    pass("quantized_source::pass::fp8_tensor_modelopt", |d| {
        fp8_quantize(d, Writer::ModelOpt, Grain::Tensor, true)
    }),
    pass("quantized_source::pass::fp8_channel_hugging_face", |d| {
        fp8_quantize(d, Writer::HuggingFace, Grain::Block(1, 1 << 20), false)
    }),
    pass("quantized_source::pass::nvfp4_compressed_tensors", |d| {
        nvfp4_quantize(d, Writer::CompressedTensors, false)
    }),
    pass("quantized_source::pass::nvfp4_modelopt", |d| {
        nvfp4_quantize(d, Writer::ModelOpt, true)
    }),
    pass("quantized_source::pass::mlx_affine_4", |d| {
        mlx_quantize(d, AFFINE_4, &[], &[])
    }),
    pass(
        "quantized_source::pass::mlx_affine_3_with_an_override",
        |d| {
            let three = Mlx {
                mode: "affine",
                bits: 3,
                group: 32,
            };
            let eight = Mlx {
                mode: "affine",
                bits: 8,
                group: 32,
            };
            mlx_quantize(d, three, &["fc"], &[("layers.0.mlp.down_proj", eight)])
        },
    ),
    pass("quantized_source::pass::mlx_mxfp4", |d| {
        mlx(d, "mxfp4", 4, 32)
    }),
    pass("quantized_source::pass::mlx_nvfp4", |d| {
        mlx(d, "nvfp4", 4, 16)
    }),
    pass("quantized_source::pass::mlx_mxfp8", |d| {
        mlx(d, "mxfp8", 8, 32)
    }),
    Arm {
        name: "quantized_source::control::pack_quantized_from_another_tensor",
        quantize: w4,
        bend: |d| {
            swap(
                d,
                "layers.0.mlp.gate_proj.weight",
                "layers.0.mlp.up_proj.weight",
            )
        },
        owed: fail(
            Q4_1,
            &["layers.0.mlp.gate_proj element [0, ", "more than one step"],
        ),
    },
    Arm {
        name: "quantized_source::control::fp8_from_another_tensor",
        quantize: |d| fp8_quantize(d, Writer::CompressedTensors, Grain::Channel, false),
        bend: |d| {
            swap(
                d,
                "layers.1.self_attn.q_proj.weight",
                "layers.1.self_attn.o_proj.weight",
            )
        },
        owed: fail(
            Q4_1,
            &["layers.1.self_attn.o_proj element", "more than one step"],
        ),
    },
    Arm {
        name: "quantized_source::control::mlx_from_another_tensor",
        quantize: |d| mlx_quantize(d, AFFINE_4, &[], &[]),
        bend: |d| {
            swap(
                d,
                "layers.0.mlp.gate_proj.weight",
                "layers.0.mlp.up_proj.weight",
            )
        },
        owed: fail(
            Q4_1,
            &["layers.0.mlp.gate_proj element", "more than one step"],
        ),
    },
    Arm {
        name: "quantized_source::control::nvfp4_from_another_tensor",
        quantize: |d| nvfp4_quantize(d, Writer::ModelOpt, false),
        bend: |d| {
            swap(
                d,
                "layers.0.mlp.gate_proj.weight",
                "layers.0.mlp.up_proj.weight",
            )
        },
        owed: fail(
            Q4_1,
            &["layers.0.mlp.gate_proj element", "more than one step"],
        ),
    },
    Arm {
        name: "quantized_source::control::dense_norm_differs",
        quantize: w4,
        bend: |d| {
            weights(d, |t| named(t, "norm.weight").3[6] ^= 0x01);
        },
        owed: fail(BF16, &["norm.weight holds 1 values unlike its source"]),
    },
    Arm {
        name: "quantized_source::control::source_lacks_a_tensor",
        quantize: w4,
        bend: |d| {
            weights(d, |t| t.retain(|t| t.0 != "layers.1.mlp.down_proj.weight"));
        },
        owed: fail(
            INVENTORY,
            &["with no source tensor: layers.1.mlp.down_proj.weight"],
        ),
    },
    Arm {
        name: "quantized_source::control::dense_folder_refused",
        quantize: |_| {},
        bend: |_| {},
        owed: Owed::Error(&["--source", "not quantized in a scheme the gate reads"]),
    },
];

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

fn run(arm: &Arm) -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (draft, source) = pair(arm, root.path())?;
    let result = gate(&draft, &Options::default().with_source(source));
    if let Ok(report) = &result {
        crate::schema::validate(&report.to_json())?;
    }
    if matches!(arm.owed, Owed::Pass) {
        content_line(&draft, result.as_ref().ok())?;
    }
    judge_counted(Form::Safetensors, arm.owed, result, 11)
}

/// A quantized folder's NOT CHECKED list asks for the bf16 folder it came from (never says, as a
/// published folder's does, that no `--source` compares it), and `--source` answering removes it.
fn content_line(draft: &Path, compared: Option<&dflash_gate::Report>) -> Result<(), String> {
    use dflash_gate::NotChecked::{PublishedContent, QuantizedContent};
    let alone = gate(draft, &Options::default()).map_err(|e| e.to_string())?;
    let listed = |r: &dflash_gate::Report| {
        [QuantizedContent, PublishedContent].map(|item| r.not_checked().contains(&item))
    };
    if listed(&alone) != [true, false] {
        return Err(format!(
            "gated alone, NOT CHECKED should ask for --source and not call the folder published: {:?}",
            alone.not_checked_text()
        ));
    }
    match compared.map(listed) {
        Some([false, false]) => Ok(()),
        _ => Err(format!(
            "with --source answering, NOT CHECKED still lists the content: {:?}",
            compared.map(|r| r.not_checked_text())
        )),
    }
}

/// The arm's source (the bf16 draft, bent) and its quantized copy under `root`.
fn pair(arm: &Arm, root: &Path) -> Result<(PathBuf, PathBuf), String> {
    let source = write_arm("folder::pass::dflash", &root.join("source"))?;
    let draft = root.join("draft");
    std::fs::create_dir_all(&draft).map_err(|e| e.to_string())?;
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(source.join(f), draft.join(f)).map_err(|e| e.to_string())?;
    }
    (arm.quantize)(&draft);
    (arm.bend)(&source);
    Ok((draft, source))
}
