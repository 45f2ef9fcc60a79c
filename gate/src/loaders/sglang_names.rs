//! The layer Linears SGLang 0.5.23 builds for a DFlash draft, under SGLang's own names, and whether
//! each is built as the config stores it. `DFlashDraftModel.supports_quantization` is false, so its
//! layers are built with an empty prefix (`srt/models/dflash.py`: `prefix=... if self.quantizable
//! else ""`), and each Linear takes its bare name: `qkv_proj`, `o_proj`, `gate_up_proj`, `down_proj`.
//! The class states no `packed_modules_mapping`, so a fused layer is matched by that name alone.
//! compressed-tensors' lists are matched as [`crate::quant::Built`] says; a layer no `targets` entry
//! matches is refused at build (`find_matched_target` raises). (`fc` is a plain `nn.Linear` there,
//! never quantized: its own rows say so.)

use super::when::{Facts, Met};
use crate::quant::{Built, Expect, Writer};

/// A layer's Linears as SGLang builds them: its bare name, class, scope, and the checkpoint
/// modules it holds.
const LAYERS: [(&str, &str, &str, &[&str]); 4] = [
    (
        "qkv_proj",
        "QKVParallelLinear",
        "self_attn",
        &["q_proj", "k_proj", "v_proj"],
    ),
    ("o_proj", "RowParallelLinear", "self_attn", &["o_proj"]),
    (
        "gate_up_proj",
        "MergedColumnParallelLinear",
        "mlp",
        &["gate_proj", "up_proj"],
    ),
    ("down_proj", "RowParallelLinear", "mlp", &["down_proj"]),
];

/// A layer Linear of a compressed-tensors draft SGLang builds otherwise than the config stores it
/// (`untargeted` false), or that no `targets` entry matches under SGLang's name (`untargeted`).
pub(super) fn built_otherwise(facts: &Facts<'_>, untargeted: bool) -> Met {
    let Some(c) = facts.config else {
        return Met::No;
    };
    let Some(q) = &c.quantization else {
        return Met::No;
    };
    let scheme = match &q.scheme {
        Ok(s) if s.matched_by_runtime_names() == Some(Writer::CompressedTensors) => s,
        Ok(_) => return Met::No,
        Err(_) if q.named != "compressed-tensors" => return Met::No,
        Err(why) => return Met::Unknown(format!("the scheme is not read: {why}")),
    };
    if !scheme.runtime_names_matter() {
        return Met::No;
    }
    let Some(held) = facts.stored_modules() else {
        return Met::Unknown(
            "the census did not list every tensor, so which Linears the draft holds is not known"
                .to_owned(),
        );
    };
    let layers = match &c.num_hidden_layers {
        Ok(n) => *n,
        Err(p) => return Met::Unknown(format!("{} is unusable", p.field)),
    };
    let prefix = match facts.test(super::When::ModelPrefixed) {
        Met::Yes(_) => "model.",
        _ => "",
    };
    // The same for every layer: SGLang's names carry no layer number.
    let built: Vec<Option<Built>> = LAYERS
        .iter()
        .map(|(name, class, _, _)| scheme.runtime_builds(name, class))
        .collect();
    for i in 0..layers {
        for ((name, _, scope, modules), built) in LAYERS.iter().zip(&built) {
            let Some(built) = *built else { continue };
            for m in *modules {
                let checkpoint = format!("layers.{i}.{scope}.{m}");
                let spelled = format!("{prefix}{checkpoint}");
                if !held.contains(spelled.as_str()) {
                    continue;
                }
                if untargeted {
                    if built == Built::Untargeted {
                        return Met::Yes(format!(
                            "{checkpoint}: SGLang names it {name}, which no entry of targets matches"
                        ));
                    }
                    continue;
                }
                let stored = match scheme.expect(&spelled) {
                    Expect::Quantized(..) => true,
                    Expect::Dense(_) => false,
                    Expect::Either(_) => continue,
                };
                let quantized = match built {
                    Built::Quantized => true,
                    Built::Dense => false,
                    Built::Untargeted => continue,
                };
                if stored != quantized {
                    let how = |q: bool| if q { "quantized" } else { "dense" };
                    return Met::Yes(format!(
                        "{checkpoint}: the config stores it {} under that name; SGLang names it {name}, and builds it {}",
                        how(stored),
                        how(quantized)
                    ));
                }
            }
        }
    }
    Met::No
}
