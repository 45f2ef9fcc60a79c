//! How vLLM 0.33.0 and SGLang 0.5.23 read a scheme's module lists: against their own names for the
//! Linears they build, not the checkpoint's (the loaders' rules say which names each gives a
//! DFlash draft's Linears). compressed-tensors' `ignore` and `targets` are matched exactly or as
//! `re:` patterns from the name's start (vLLM's `is_equal_or_regex_match`, SGLang's
//! `check_equal_or_regex_match`, whose dotted-suffix match cannot apply to a draft's names), a fused
//! layer by its own name (neither engine states a fused mapping for a DFlash draft's quant config),
//! and `targets` also by the layer's class name, as a case-blind substring or a pattern
//! (`find_matched_target`). Hugging Face fp8's `ignored_layers`, else `modules_to_not_convert`, is
//! matched exactly (vLLM's `is_layer_skipped`, mode `exact`). ModelOpt's lists are renamed to
//! vLLM's names first (`map_draft_quant_config`), and MLX's quantization is not read by either, so
//! neither is judged here.

use super::{Matchers, Scheme, Select, Writer};

/// How an engine builds one Linear under a scheme's lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Built {
    Quantized,
    Dense,
    /// No `targets` entry matches it (compressed-tensors): vLLM builds it dense, SGLang raises.
    Untargeted,
}

impl Scheme {
    /// The library whose module lists the engines match against their own names, when it is one
    /// that does.
    pub fn matched_by_runtime_names(&self) -> Option<Writer> {
        match self.select {
            Select::TargetsIgnore { .. } => Some(Writer::CompressedTensors),
            Select::NotConverted { .. } => Some(Writer::HuggingFace),
            Select::Excluded(_) | Select::Mlx(_) => None,
        }
    }

    /// Whether the engine's names could make any difference: not when `ignore` is empty and
    /// `targets` holds only the class `Linear` (compressed-tensors), which match every Linear alike
    /// under any name.
    pub fn runtime_names_matter(&self) -> bool {
        match &self.select {
            Select::TargetsIgnore { targets, ignore } => {
                !ignore.names.is_empty()
                    || !ignore.patterns.is_empty()
                    || !targets.patterns.is_empty()
                    || targets.names.iter().any(|n| n != "Linear")
            }
            Select::NotConverted {
                keys,
                ignored_layers,
            } => !keys.patterns.is_empty() || !keys.names.is_empty() || !ignored_layers.is_empty(),
            Select::Excluded(_) | Select::Mlx(_) => false,
        }
    }

    /// How the engine builds the Linear it names `layer`, of class `class`; `None` for a scheme
    /// the engines do not match by their own names.
    pub fn runtime_builds(&self, layer: &str, class: &str) -> Option<Built> {
        match &self.select {
            Select::TargetsIgnore { targets, ignore } => {
                Some(if ignore.first_match(layer, false).is_some() {
                    Built::Dense
                } else if targets.first_match(layer, false).is_some() || names_class(targets, class)
                {
                    Built::Quantized
                } else {
                    Built::Untargeted
                })
            }
            Select::NotConverted {
                keys,
                ignored_layers,
            } => {
                let skipped = match ignored_layers.is_empty() {
                    false => ignored_layers.iter().any(|k| k == layer),
                    true => {
                        keys.names.contains(layer) || keys.patterns.iter().any(|(k, _)| k == layer)
                    }
                };
                Some(if skipped {
                    Built::Dense
                } else {
                    Built::Quantized
                })
            }
            Select::Excluded(_) | Select::Mlx(_) => None,
        }
    }

    /// Whether an entry the engine matches could match one draft layer and not another by the
    /// number vLLM gives it: a pattern, or a name under `model.layers.`. Only then does it matter
    /// how many layers the target has.
    pub fn runtime_reads_layer_numbers(&self) -> bool {
        let numbered = |m: &Matchers| {
            !m.patterns.is_empty() || m.names.iter().any(|n| n.starts_with("model.layers."))
        };
        match &self.select {
            Select::TargetsIgnore { targets, ignore } => numbered(targets) || numbered(ignore),
            Select::NotConverted {
                keys,
                ignored_layers,
            } => keys
                .patterns
                .iter()
                .map(|(k, _)| k)
                .chain(ignored_layers)
                .any(|k| k.starts_with("model.layers.")),
            Select::Excluded(_) | Select::Mlx(_) => false,
        }
    }
}

/// Whether a `targets` entry names the class `class`: a case-blind substring of it, or a pattern
/// matching it from its start (`_find_first_match(..., check_contains=True)`).
fn names_class(targets: &Matchers, class: &str) -> bool {
    let class_lower = class.to_ascii_lowercase();
    targets
        .names
        .iter()
        .any(|t| class_lower.contains(&t.to_ascii_lowercase()))
        || targets
            .patterns
            .iter()
            .any(|(_, re)| re.find(class).is_some_and(|m| m.start() == 0))
}

#[cfg(test)]
mod tests {
    use super::super::read;
    use super::*;
    use serde_json::{json, Value};

    fn scheme(quantization_config: Value) -> Scheme {
        let config = json!({ "quantization_config": quantization_config });
        read(config.as_object().unwrap()).unwrap().scheme.unwrap()
    }

    fn compressed_tensors(targets: Value, ignore: Value) -> Scheme {
        scheme(json!({
            "quant_method": "compressed-tensors", "format": "pack-quantized",
            "config_groups": {"group_0": {"targets": targets, "weights": {
                "num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 32}}},
            "ignore": ignore}))
    }

    fn ignoring(ignore: Value) -> Scheme {
        compressed_tensors(json!(["Linear"]), ignore)
    }

    const QKV: &str = "model.layers.36.self_attn.qkv_proj";

    #[test]
    fn an_ignore_entry_spelled_as_the_checkpoint_names_it_does_not_match_the_engines_name() {
        let fc = |s: Scheme| s.runtime_builds("model.fc", "ReplicatedLinear");
        assert_eq!(fc(ignoring(json!(["fc"]))), Some(Built::Quantized));
        assert_eq!(fc(ignoring(json!(["model.fc"]))), Some(Built::Dense));
        assert_eq!(fc(ignoring(json!(["re:.*fc$"]))), Some(Built::Dense));
        // re.match anchors at the start: `re:fc` does not reach past `model.`.
        assert_eq!(fc(ignoring(json!(["re:fc"]))), Some(Built::Quantized));
    }

    #[test]
    fn a_fused_layer_is_matched_by_its_own_name_only() {
        let s = ignoring(json!(["re:.*qkv_proj$"]));
        assert_eq!(
            s.runtime_builds(QKV, "QKVParallelLinear"),
            Some(Built::Dense)
        );
        let shards: Vec<String> = ["q", "k", "v"]
            .map(|p| format!("model.layers.36.self_attn.{p}_proj"))
            .to_vec();
        let s = ignoring(json!(shards));
        assert_eq!(
            s.runtime_builds(QKV, "QKVParallelLinear"),
            Some(Built::Quantized)
        );
    }

    #[test]
    fn targets_match_a_class_as_a_case_blind_substring_or_a_pattern() {
        let build =
            |t: Value| compressed_tensors(t, json!([])).runtime_builds(QKV, "QKVParallelLinear");
        assert_eq!(build(json!(["linear"])), Some(Built::Quantized));
        assert_eq!(build(json!(["re:QKV.*"])), Some(Built::Quantized));
        assert_eq!(build(json!(["re:layers\\..*"])), Some(Built::Untargeted));
        assert_eq!(
            build(json!(["re:model\\.layers\\..*"])),
            Some(Built::Quantized)
        );
    }

    #[test]
    fn hugging_face_fp8_lists_are_matched_exactly_ignored_layers_first() {
        let fp8 = |extra: Value| {
            let mut q = json!({"quant_method": "fp8", "activation_scheme": "dynamic",
                "weight_block_size": [128, 128]});
            q.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            scheme(q).runtime_builds("model.fc", "ReplicatedLinear")
        };
        assert_eq!(
            fp8(json!({"modules_to_not_convert": ["fc"]})),
            Some(Built::Quantized)
        );
        assert_eq!(
            fp8(json!({"modules_to_not_convert": ["model.fc"]})),
            Some(Built::Dense)
        );
        assert_eq!(
            fp8(json!({"modules_to_not_convert": ["model.fc"], "ignored_layers": ["lm_head"]})),
            Some(Built::Quantized)
        );
        assert_eq!(
            fp8(json!({"ignored_layers": ["model.fc"]})),
            Some(Built::Dense)
        );
    }

    #[test]
    fn only_patterns_and_numbered_names_read_the_layer_number() {
        assert!(!ignoring(json!(["fc", "layers.0.mlp.down_proj"])).runtime_reads_layer_numbers());
        assert!(ignoring(json!(["re:.*fc$"])).runtime_reads_layer_numbers());
        assert!(ignoring(json!(["model.layers.3.mlp.down_proj"])).runtime_reads_layer_numbers());
    }

    #[test]
    fn lists_of_the_class_alone_match_every_name_alike() {
        assert!(!ignoring(json!([])).runtime_names_matter());
        assert!(ignoring(json!(["lm_head"])).runtime_names_matter());
        assert!(compressed_tensors(json!(["linear"]), json!([])).runtime_names_matter());
    }

    #[test]
    fn modelopt_and_mlx_lists_are_not_the_engines_to_match() {
        let s = scheme(
            json!({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
            "exclude_modules": ["fc"]}),
        );
        assert_eq!(s.matched_by_runtime_names(), None);
        assert_eq!(s.runtime_builds("model.fc", "ReplicatedLinear"), None);
    }
}
