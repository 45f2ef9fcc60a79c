//! How vLLM 0.33.0 reads a scheme's module lists. It matches them against its own names for the
//! layers it builds, not the checkpoint's: a DFlash draft's `fc` is `model.fc` there and its layer
//! `i` is `model.layers.{T + i}` (T the target's layer count), with q/k/v fused into `qkv_proj` and
//! gate/up into `gate_up_proj`. compressed-tensors' `targets` and `ignore` are matched exactly or as
//! `re:` patterns from the name's start (`is_equal_or_regex_match`, with the fused layer's own name
//! first and then every shard's), its `targets` also by class name (every Linear is a `Linear`);
//! Hugging Face fp8's `modules_to_not_convert` is matched exactly (`is_layer_skipped`, mode
//! `exact`). ModelOpt's lists are renamed to vLLM's names first (`map_draft_quant_config`), and MLX's
//! quantization is not read at all, so neither is judged here.

use super::{Matchers, Scheme, Select, Writer};

impl Scheme {
    /// The library whose module lists vLLM matches against its own names, when it is one that does.
    pub fn matched_by_vllm_names(&self) -> Option<Writer> {
        match self.select {
            Select::TargetsIgnore { .. } => Some(Writer::CompressedTensors),
            Select::NotConverted(_) => Some(Writer::HuggingFace),
            Select::Excluded(_) | Select::Mlx(_) => None,
        }
    }

    /// Whether vLLM's names could make any difference: not when `ignore` is empty and `targets`
    /// holds only the class `Linear` (compressed-tensors), which match every Linear alike under
    /// any name.
    pub fn vllm_names_matter(&self) -> bool {
        match &self.select {
            Select::TargetsIgnore { targets, ignore } => {
                !ignore.names.is_empty()
                    || !ignore.patterns.is_empty()
                    || !targets.patterns.is_empty()
                    || targets.names.iter().any(|n| n != "Linear")
            }
            Select::NotConverted(keys) => !keys.patterns.is_empty() || !keys.names.is_empty(),
            Select::Excluded(_) | Select::Mlx(_) => false,
        }
    }

    /// Whether vLLM builds its layer `layer` quantized: `shards` are the names of the checkpoint
    /// modules it fuses (empty for a layer it does not fuse), all by vLLM's names. `None` for a
    /// scheme vLLM does not match by its own names.
    pub fn vllm_quantizes(&self, layer: &str, shards: &[String]) -> Option<bool> {
        // A fused layer matches when its own name does, or when every shard's does.
        let each = |matches: &dyn Fn(&str) -> bool| {
            matches(layer) || (!shards.is_empty() && shards.iter().all(|s| matches(s)))
        };
        match &self.select {
            Select::TargetsIgnore { targets, ignore } => {
                let targeted = targets.first_match(layer, true).is_some()
                    || each(&|n| targets.first_match(n, false).is_some());
                let ignored = each(&|n| ignore.first_match(n, false).is_some());
                Some(targeted && !ignored)
            }
            Select::NotConverted(keys) => Some(!each(&|n| listed(keys, n))),
            Select::Excluded(_) | Select::Mlx(_) => None,
        }
    }

    /// Whether an entry vLLM matches could match one draft layer and not another by the number
    /// vLLM gives it: a pattern, or a name under `model.layers.`. Only then does it matter how many
    /// layers the target has.
    pub fn vllm_reads_layer_numbers(&self) -> bool {
        let numbered = |m: &Matchers| {
            !m.patterns.is_empty() || m.names.iter().any(|n| n.starts_with("model.layers."))
        };
        match &self.select {
            Select::TargetsIgnore { targets, ignore } => numbered(targets) || numbered(ignore),
            Select::NotConverted(keys) => keys
                .patterns
                .iter()
                .any(|(k, _)| k.starts_with("model.layers.")),
            Select::Excluded(_) | Select::Mlx(_) => false,
        }
    }
}

/// Whether `name` is an entry of `keys`, spelled exactly.
fn listed(keys: &Matchers, name: &str) -> bool {
    keys.names.contains(name) || keys.patterns.iter().any(|(k, _)| k == name)
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

    fn compressed_tensors(ignore: Value) -> Scheme {
        scheme(json!({
            "quant_method": "compressed-tensors", "format": "pack-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 32}}},
            "ignore": ignore}))
    }

    fn qkv(layer: u64) -> (String, Vec<String>) {
        let at = format!("model.layers.{layer}.self_attn");
        let shards = ["q_proj", "k_proj", "v_proj"].map(|p| format!("{at}.{p}"));
        (format!("{at}.qkv_proj"), shards.to_vec())
    }

    #[test]
    fn an_ignore_entry_spelled_as_the_checkpoint_names_it_does_not_match_vllms_name() {
        let s = compressed_tensors(json!(["fc"]));
        assert_eq!(s.vllm_quantizes("model.fc", &[]), Some(true));
        let s = compressed_tensors(json!(["model.fc"]));
        assert_eq!(s.vllm_quantizes("model.fc", &[]), Some(false));
        let s = compressed_tensors(json!(["re:.*fc$"]));
        assert_eq!(s.vllm_quantizes("model.fc", &[]), Some(false));
        // re.match anchors at the start: `re:fc` does not reach past `model.`.
        let s = compressed_tensors(json!(["re:fc"]));
        assert_eq!(s.vllm_quantizes("model.fc", &[]), Some(true));
    }

    #[test]
    fn a_fused_layer_is_ignored_by_its_own_name_or_by_every_shard() {
        let (layer, shards) = qkv(36);
        let s = compressed_tensors(json!(["re:.*qkv_proj$"]));
        assert_eq!(s.vllm_quantizes(&layer, &shards), Some(false));
        let s = compressed_tensors(json!(shards.clone()));
        assert_eq!(s.vllm_quantizes(&layer, &shards), Some(false));
        let s = compressed_tensors(json!([shards[0].clone()]));
        assert_eq!(s.vllm_quantizes(&layer, &shards), Some(true));
    }

    #[test]
    fn hugging_face_fp8_lists_are_matched_exactly() {
        let fp8 = |keys: Value| {
            scheme(
                json!({"quant_method": "fp8", "activation_scheme": "dynamic",
                "weight_block_size": [128, 128], "modules_to_not_convert": keys}),
            )
        };
        assert_eq!(
            fp8(json!(["fc"])).vllm_quantizes("model.fc", &[]),
            Some(true)
        );
        assert_eq!(
            fp8(json!(["model.fc"])).vllm_quantizes("model.fc", &[]),
            Some(false)
        );
        assert!(!fp8(json!(["fc", "re:.*"])).vllm_reads_layer_numbers());
        assert!(fp8(json!(["model.layers.36.mlp.down_proj"])).vllm_reads_layer_numbers());
    }

    #[test]
    fn only_patterns_and_numbered_names_read_the_layer_number() {
        assert!(
            !compressed_tensors(json!(["fc", "layers.0.mlp.down_proj"])).vllm_reads_layer_numbers()
        );
        assert!(compressed_tensors(json!(["re:.*fc$"])).vllm_reads_layer_numbers());
        assert!(
            compressed_tensors(json!(["model.layers.3.mlp.down_proj"])).vllm_reads_layer_numbers()
        );
    }

    #[test]
    fn lists_of_the_class_alone_match_every_name_alike() {
        assert!(!compressed_tensors(json!([])).vllm_names_matter());
        assert!(compressed_tensors(json!(["lm_head"])).vllm_names_matter());
        assert!(compressed_tensors(json!(["re:.*fc$"])).vllm_names_matter());
    }

    #[test]
    fn modelopt_and_mlx_lists_are_not_vllms_to_match() {
        let s = scheme(
            json!({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
            "exclude_modules": ["fc"]}),
        );
        assert_eq!(s.matched_by_vllm_names(), None);
        assert_eq!(s.vllm_quantizes("model.fc", &[]), None);
    }
}
