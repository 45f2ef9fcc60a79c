//! The layers vLLM 0.33.0 builds for a DFlash draft, under vLLM's own names, and whether each is
//! built as the config stores it (`qwen3_dflash.py`: the draft model sits under `model`, its first
//! layer numbered after the target's last, `start_layer_id = target_layer_num`, and the quant
//! config's lists are matched against those names).

use super::when::{Facts, Met};
use crate::check_id::CheckId;
use crate::config::DraftConfig;
use crate::evidence::Evidence;
use crate::quant::{Expect, Writer};

/// The projections of a layer as vLLM builds them: its layer's path, and the checkpoint modules it
/// fuses (none for a layer it does not fuse).
const LAYERS: [(&str, &[&str]); 4] = [
    ("self_attn.qkv_proj", &["q_proj", "k_proj", "v_proj"]),
    ("self_attn.o_proj", &[]),
    ("mlp.gate_up_proj", &["gate_proj", "up_proj"]),
    ("mlp.down_proj", &[]),
];

/// A Linear of the draft the config stores as `stored_quantized` says under the checkpoint's
/// name, and that vLLM builds the other way under its own, for a scheme of `writer`'s.
pub(super) fn built_otherwise(facts: &Facts<'_>, writer: Writer, stored_quantized: bool) -> Met {
    let Some(c) = facts.config else {
        return Met::Unknown("the draft's config.json was not read".to_owned());
    };
    let Some(q) = &c.quantization else {
        return Met::No;
    };
    let scheme = match &q.scheme {
        Ok(s) if s.matched_by_vllm_names() == Some(writer) => s,
        Ok(_) => return Met::No,
        Err(_) if named_by(&q.named) != Some(writer) => return Met::No,
        Err(why) => return Met::Unknown(format!("the scheme is not read: {why}")),
    };
    let layers = match &c.num_hidden_layers {
        Ok(n) => *n,
        Err(p) => return Met::Unknown(format!("{} is unusable", p.field)),
    };
    // The checkpoint's spelling: vLLM refuses a `model.`-prefixed folder anyway, but the config's
    // lists were written against that spelling.
    let prefix = match facts.test(super::When::ModelPrefixed) {
        Met::Yes(_) => "model.",
        _ => "",
    };
    let offset = target_layers(facts, c);
    let differs = |checkpoint: &str, layer: &str, shards: &[String]| {
        let stored = match scheme.expect(&format!("{prefix}{checkpoint}")) {
            Expect::Quantized(..) => true,
            Expect::Dense(_) => false,
            Expect::Either(_) => return None,
        };
        let built = scheme.vllm_quantizes(layer, shards)?;
        (stored == stored_quantized && built != stored).then(|| {
            let how = |q: bool| if q { "quantized" } else { "dense" };
            format!(
                "{checkpoint}: the config stores it {} under that name; vLLM names it {layer}, and builds it {}",
                how(stored),
                how(built)
            )
        })
    };
    if let Some(found) = differs("fc", "model.fc", &[]) {
        return Met::Yes(found);
    }
    let offset = match offset {
        Some(t) => t,
        // Without the target's layer count, the layers' names are known but for their number.
        None if scheme.vllm_reads_layer_numbers() => {
            return Met::Unknown(
                "the config's lists hold a pattern or a numbered name, and the target's layer count (--target, or num_target_layers) is not known".to_owned(),
            )
        }
        None => 0,
    };
    for i in 0..layers {
        let Some(n) = offset.checked_add(i) else {
            return Met::Unknown("the target's layer count overflows".to_owned());
        };
        for (path, parts) in LAYERS {
            let at = format!("model.layers.{n}.{path}");
            let (scope, own) = path.rsplit_once('.').unwrap_or(("", path));
            let shards: Vec<String> = parts
                .iter()
                .map(|p| format!("model.layers.{n}.{scope}.{p}"))
                .collect();
            let modules: Vec<&str> = if parts.is_empty() {
                vec![own]
            } else {
                parts.to_vec()
            };
            for m in modules {
                if let Some(found) = differs(&format!("layers.{i}.{scope}.{m}"), &at, &shards) {
                    return Met::Yes(found);
                }
            }
        }
    }
    Met::No
}

/// The target's layer count: the paired target's, else the count the config says it drafts for.
fn target_layers(facts: &Facts<'_>, c: &DraftConfig) -> Option<u64> {
    let paired = facts
        .report
        .check(CheckId::TARGET_DEPTH)
        .and_then(|check| check.evidence())
        .and_then(|e| match e {
            Evidence::TargetDepth(e) => Some(e.target_layers),
            _ => None,
        });
    paired.or(match &c.num_target_layers {
        Ok(Some(t)) => Some(*t),
        _ => None,
    })
}

/// The writer a scheme the gate does not read is named for (`quant_method`).
fn named_by(named: &str) -> Option<Writer> {
    match named {
        "compressed-tensors" => Some(Writer::CompressedTensors),
        "fp8" => Some(Writer::HuggingFace),
        _ => None,
    }
}
