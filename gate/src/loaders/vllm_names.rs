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

/// What vLLM builds otherwise than the config stores, both ways, found in one pass over the
/// draft's Linears (every row that reads it asks the same pass).
#[derive(Debug)]
pub struct Disagreements {
    /// The writer whose lists were matched; `None` when no scheme is matched by vLLM's names.
    writer: Option<Writer>,
    /// A Linear stored dense that vLLM builds quantized.
    built_quantized: Met,
    /// A Linear stored quantized that vLLM builds dense.
    built_dense: Met,
}

impl Disagreements {
    /// The fact for a scheme of `writer`'s: a Linear stored as `stored_quantized` says, built the
    /// other way.
    pub(super) fn get(&self, writer: Writer, stored_quantized: bool) -> Met {
        if self.writer != Some(writer) {
            return Met::No;
        }
        match stored_quantized {
            false => self.built_quantized.clone(),
            true => self.built_dense.clone(),
        }
    }

    fn both(writer: Option<Writer>, met: Met) -> Disagreements {
        Disagreements {
            writer,
            built_quantized: met.clone(),
            built_dense: met,
        }
    }
}

/// Every Linear of the draft, as the config stores it under the checkpoint's name and as vLLM
/// builds it under its own.
pub(super) fn find(facts: &Facts<'_>) -> Disagreements {
    // A GGUF states no quantization_config (and vLLM does not read one).
    let Some(c) = facts.config else {
        return Disagreements::both(None, Met::No);
    };
    let Some(q) = &c.quantization else {
        return Disagreements::both(None, Met::No);
    };
    let scheme = match &q.scheme {
        Ok(s) => s,
        Err(why) => {
            let unknown = Met::Unknown(format!("the scheme is not read: {why}"));
            return Disagreements::both(named_by(&q.named), unknown);
        }
    };
    let writer = scheme.matched_by_vllm_names();
    // Lists of class names alone match every Linear alike under any name.
    if writer.is_none() || !scheme.vllm_names_matter() {
        return Disagreements::both(writer, Met::No);
    }
    let layers = match &c.num_hidden_layers {
        Ok(n) => *n,
        Err(p) => {
            return Disagreements::both(writer, Met::Unknown(format!("{} is unusable", p.field)))
        }
    };
    // The checkpoint's spelling: vLLM refuses a `model.`-prefixed folder anyway, but the config's
    // lists were written against that spelling.
    let prefix = match facts.test(super::When::ModelPrefixed) {
        Met::Yes(_) => "model.",
        _ => "",
    };
    let held = facts.stored_modules();
    let mut found = Disagreements::both(writer, Met::No);
    let mut differs = |checkpoint: &str, layer: &str, shards: &[String]| {
        let spelled = format!("{prefix}{checkpoint}");
        if held.as_ref().is_some_and(|h| !h.contains(spelled.as_str())) {
            return;
        }
        let stored = match scheme.expect(&spelled) {
            Expect::Quantized(..) => true,
            Expect::Dense(_) => false,
            Expect::Either(_) => return,
        };
        let Some(built) = scheme.vllm_quantizes(layer, shards) else {
            return;
        };
        let slot = match (stored, built) {
            (false, true) => &mut found.built_quantized,
            (true, false) => &mut found.built_dense,
            _ => return,
        };
        if *slot == Met::No {
            let how = |q: bool| if q { "quantized" } else { "dense" };
            *slot = Met::Yes(format!(
                "{checkpoint}: the config stores it {} under that name; vLLM names it {layer}, and builds it {}",
                how(stored),
                how(built)
            ));
        }
    };
    differs("fc", "model.fc", &[]);
    let offset = match target_layers(facts, c) {
        Some(t) => t,
        // Without the target's layer count, the layers' names are known but for their number.
        None if scheme.vllm_reads_layer_numbers() => {
            let why = "the config's lists hold a pattern or a numbered name, and the target's layer count (--target, or num_target_layers) is not known";
            for slot in [&mut found.built_quantized, &mut found.built_dense] {
                if *slot == Met::No {
                    *slot = Met::Unknown(why.to_owned());
                }
            }
            return found;
        }
        None => 0,
    };
    for i in 0..layers {
        let Some(n) = offset.checked_add(i) else {
            let overflow = Met::Unknown("the target's layer count overflows".to_owned());
            return Disagreements::both(writer, overflow);
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
                differs(&format!("layers.{i}.{scope}.{m}"), &at, &shards);
            }
        }
    }
    found
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
