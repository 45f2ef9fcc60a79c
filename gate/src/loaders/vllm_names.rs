//! The Linears vLLM 0.33.0 builds for a DFlash draft, under vLLM's own names, and whether each is
//! built as the config stores it (`qwen3_dflash.py`: the draft model sits under `model`, its first
//! layer numbered after the target's last, `start_layer_id = target_layer_num`, and the draft's
//! quant config, made afresh by `get_draft_quant_config`, is matched against those names with no
//! fused mapping: the class is not `SupportsQuant`, so nothing fills its `packed_modules_mapping`).

use super::when::{Facts, Kept, Met};
use crate::check_id::CheckId;
use crate::config::DraftConfig;
use crate::evidence::Evidence;
use crate::quant::{Built, Expect, Storage, Writer};

/// A layer's Linears as vLLM builds them: the layer's path, its class, and the checkpoint modules
/// it holds.
const LAYERS: [(&str, &str, &[&str]); 4] = [
    (
        "self_attn.qkv_proj",
        "QKVParallelLinear",
        &["q_proj", "k_proj", "v_proj"],
    ),
    ("self_attn.o_proj", "RowParallelLinear", &["o_proj"]),
    (
        "mlp.gate_up_proj",
        "MergedColumnParallelLinear",
        &["gate_proj", "up_proj"],
    ),
    ("mlp.down_proj", "RowParallelLinear", &["down_proj"]),
];

/// What vLLM builds otherwise than the config stores, both ways, found in one pass over the
/// draft's Linears (every row that reads it asks the same pass).
#[derive(Debug)]
pub struct Disagreements {
    /// What a quantized layer of the scheme keeps of the dense one; `None` when that is not known
    /// (then both mets are `No`, or both not known).
    kept: Option<Kept>,
    /// A Linear stored dense that vLLM builds quantized.
    built_quantized: Met,
    /// A Linear stored quantized that vLLM builds dense.
    built_dense: Met,
}

impl Disagreements {
    /// A Linear stored dense built quantized, by a scheme whose quantized layer keeps `kept`.
    pub(super) fn built_quantized(&self, kept: Kept) -> Met {
        // No storage known (a scheme not read): the fact is what was found, for either kind.
        match self.kept.is_none_or(|k| k == kept) {
            true => self.built_quantized.clone(),
            false => Met::No,
        }
    }

    /// A Linear stored quantized built dense.
    pub(super) fn built_dense(&self) -> Met {
        self.built_dense.clone()
    }

    fn both(kept: Option<Kept>, met: Met) -> Disagreements {
        Disagreements {
            kept,
            built_quantized: met.clone(),
            built_dense: met,
        }
    }
}

/// What a quantized Linear of `storage` holds: a `weight` parameter (FP8: a dense weight is cast
/// into it), or packed codes only.
fn kept(storage: &Storage) -> Option<Kept> {
    match storage {
        Storage::Fp8 { .. } => Some(Kept::Weight),
        Storage::PackInt { .. }
        | Storage::Nvfp4 {
            writer: Writer::CompressedTensors,
        } => Some(Kept::Packed),
        _ => None,
    }
}

/// Every Linear the draft holds, as the config stores it under the checkpoint's name and as vLLM
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
        Ok(s) if s.matched_by_runtime_names().is_some() => s,
        Ok(_) => return Disagreements::both(None, Met::No),
        Err(why) if ["compressed-tensors", "fp8"].contains(&q.named.as_str()) => {
            let unknown = Met::Unknown(format!("the scheme is not read: {why}"));
            return Disagreements::both(None, unknown);
        }
        Err(_) => return Disagreements::both(None, Met::No),
    };
    let kept = kept(&scheme.storage);
    // Lists of class names alone match every Linear alike under any name.
    if !scheme.runtime_names_matter() {
        return Disagreements::both(kept, Met::No);
    }
    let Some(held) = facts.stored_modules() else {
        let why =
            "the census did not list every tensor, so which Linears the draft holds is not known";
        return Disagreements::both(kept, Met::Unknown(why.to_owned()));
    };
    let layers = match &c.num_hidden_layers {
        Ok(n) => *n,
        Err(p) => {
            return Disagreements::both(kept, Met::Unknown(format!("{} is unusable", p.field)))
        }
    };
    // The checkpoint's spelling: vLLM refuses a `model.`-prefixed folder anyway, but the config's
    // lists were written against that spelling.
    let prefix = match facts.test(super::When::ModelPrefixed) {
        Met::Yes(_) => "model.",
        _ => "",
    };
    let mut found = Disagreements::both(kept, Met::No);
    let mut differs = |checkpoint: &str, layer: &str, class: &str| {
        let spelled = format!("{prefix}{checkpoint}");
        if !held.contains(spelled.as_str()) {
            return;
        }
        let stored = match scheme.expect(&spelled) {
            Expect::Quantized(..) => true,
            Expect::Dense(_) => false,
            Expect::Either(_) => return,
        };
        let Some(built) = scheme.runtime_builds(layer, class) else {
            return;
        };
        let built = built == Built::Quantized;
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
    // The assistant-head family stores fc as `encoder.fc`: vLLM renames the weight, not the lists.
    for fc in ["fc", "encoder.fc"] {
        differs(fc, "model.fc", "ReplicatedLinear");
    }
    let offset = match target_layers(facts, c) {
        Some(t) => t,
        // Without the target's layer count, the layers' names are known but for their number.
        None if scheme.runtime_reads_layer_numbers() => {
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
            return Disagreements::both(kept, overflow);
        };
        for (path, class, modules) in LAYERS {
            let layer = format!("model.layers.{n}.{path}");
            let scope = path.split_once('.').map_or("", |(s, _)| s);
            for m in modules {
                differs(&format!("layers.{i}.{scope}.{m}"), &layer, class);
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
