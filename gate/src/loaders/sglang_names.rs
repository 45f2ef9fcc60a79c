//! The layer Linears SGLang 0.5.23 builds for a DFlash draft, under SGLang's own names, and whether
//! each is built as the config stores it. `DFlashDraftModel.supports_quantization` is false, so its
//! layers are built with an empty prefix (`srt/models/dflash.py`: `prefix=... if self.quantizable
//! else ""`), and each Linear takes its bare name: `qkv_proj`, `o_proj`, `gate_up_proj`, `down_proj`.
//! The class states no `packed_modules_mapping`, so a fused layer is matched by that name alone.
//! compressed-tensors' `ignore` is matched exactly, as a dotted suffix, or as `re:` from the start
//! (`check_equal_or_regex_match`): an entry naming a layer's module by its path matches nothing, and
//! the layer is built as the scheme builds every Linear. (`fc` is a plain `nn.Linear` there, never
//! quantized: its own rows say so.)

use super::when::{Facts, Met};
use crate::quant::{Expect, Writer};

/// A layer's Linears as SGLang builds them: its bare name, and the checkpoint modules it holds.
const LAYERS: [(&str, &str, &[&str]); 4] = [
    ("qkv_proj", "self_attn", &["q_proj", "k_proj", "v_proj"]),
    ("o_proj", "self_attn", &["o_proj"]),
    ("gate_up_proj", "mlp", &["gate_proj", "up_proj"]),
    ("down_proj", "mlp", &["down_proj"]),
];

/// A layer Linear of a compressed-tensors draft stored otherwise than SGLang builds it.
pub(super) fn built_otherwise(facts: &Facts<'_>) -> Met {
    let Some(q) = facts.config.and_then(|c| c.quantization.as_ref()) else {
        return Met::No;
    };
    let scheme = match &q.scheme {
        Ok(s) if s.matched_by_vllm_names() == Some(Writer::CompressedTensors) => s,
        Ok(_) => return Met::No,
        Err(_) if q.named != "compressed-tensors" => return Met::No,
        Err(why) => return Met::Unknown(format!("the scheme is not read: {why}")),
    };
    if !scheme.vllm_names_matter() {
        return Met::No;
    }
    let Some(c) = facts.config else {
        return Met::No;
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
    let built: Vec<Option<bool>> = LAYERS
        .iter()
        .map(|(name, _, _)| scheme.vllm_quantizes(name, &[]))
        .collect();
    let held = facts.stored_modules();
    for i in 0..layers {
        for ((name, scope, modules), built) in LAYERS.iter().zip(&built) {
            let Some(built) = *built else { continue };
            for m in *modules {
                let checkpoint = format!("layers.{i}.{scope}.{m}");
                let spelled = format!("{prefix}{checkpoint}");
                if held.as_ref().is_some_and(|h| !h.contains(spelled.as_str())) {
                    continue;
                }
                let stored = match scheme.expect(&spelled) {
                    Expect::Quantized(..) => true,
                    Expect::Dense(_) => false,
                    Expect::Either(_) => continue,
                };
                if stored != built {
                    let how = |q: bool| if q { "quantized" } else { "dense" };
                    return Met::Yes(format!(
                        "{checkpoint}: the config stores it {} under that name; SGLang names it {name}, and builds it {}",
                        how(stored),
                        how(built)
                    ));
                }
            }
        }
    }
    Met::No
}
