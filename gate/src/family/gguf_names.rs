//! Section 12.2's names, both ways: llama.cpp's (`blk.{i}.attn_q.weight`, `output_norm.weight`) and
//! the checkpoint's own (`model.layers.{i}...`, or without `model.`) against the package's bare
//! names (`layers.{i}.self_attn.q_proj.weight`, `norm.weight`).

/// How a GGUF spells its tensor names. A file has one spelling; `fc.weight` is the same in
/// llama.cpp's and the bare checkpoint's, so it says nothing about which a file uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spelling {
    Llama,
    Prefixed,
    Bare,
}

impl Spelling {
    pub fn describe(self) -> &'static str {
        match self {
            Spelling::Llama => "llama.cpp's names (blk.{i}...)",
            Spelling::Prefixed => "the checkpoint's names with model.",
            Spelling::Bare => "the checkpoint's bare names",
        }
    }
}

/// Per layer: llama.cpp's name after `blk.{i}.`, the package's after `layers.{i}.`. The second
/// family's convolutions (spec 18.3) keep llama.cpp's base kernels without `.weight`.
const LAYER: [(&str, &str); 15] = [
    ("attn_q.weight", "self_attn.q_proj.weight"),
    ("attn_k.weight", "self_attn.k_proj.weight"),
    ("attn_v.weight", "self_attn.v_proj.weight"),
    ("attn_output.weight", "self_attn.o_proj.weight"),
    ("ffn_gate.weight", "mlp.gate_proj.weight"),
    ("ffn_up.weight", "mlp.up_proj.weight"),
    ("ffn_down.weight", "mlp.down_proj.weight"),
    ("attn_norm.weight", "input_layernorm.weight"),
    ("ffn_norm.weight", "post_attention_layernorm.weight"),
    ("attn_q_norm.weight", "self_attn.q_norm.weight"),
    ("attn_k_norm.weight", "self_attn.k_norm.weight"),
    ("attn_conv_base", "attention_conv.base_kernel"),
    (
        "attn_conv_proj.weight",
        "attention_conv.kernel_projection.weight",
    ),
    ("ffn_conv_base", "mlp_conv.base_kernel"),
    ("ffn_conv_proj.weight", "mlp_conv.kernel_projection.weight"),
];

/// The model-wide tensors: llama.cpp's name, the package's bare one (the second family's candidate
/// selector among them).
const GLOBAL: [(&str, &str); 6] = [
    ("fc.weight", "fc.weight"),
    ("enc.output_norm.weight", "hidden_norm.weight"),
    ("output_norm.weight", "norm.weight"),
    (
        "selector_hidden.weight",
        "candidate_selector.hidden_projection.weight",
    ),
    (
        "selector_predecessor.weight",
        "candidate_selector.predecessor_codebook",
    ),
    (
        "selector_successor.weight",
        "candidate_selector.successor_codebook",
    ),
];

/// `{prefix}{layer}.{part}` split into the layer and the part.
fn layer_part<'a>(name: &'a str, prefix: &str) -> Option<(u64, &'a str)> {
    let rest = name.strip_prefix(prefix)?;
    let (layer, part) = rest.split_once('.')?;
    if layer.is_empty()
        || !layer.bytes().all(|b| b.is_ascii_digit())
        || layer.len() > 1 && layer.starts_with('0')
    {
        return None;
    }
    Some((layer.parse().ok()?, part))
}

/// The package's bare name of a GGUF tensor, and the spelling it is in (`None` for `fc.weight`,
/// which both llama.cpp and the bare checkpoint spell so). A name llama.cpp's table does not have is
/// the checkpoint's own, with or without `model.`: whether the package has such a tensor is the
/// pairing's question, not this one's.
pub fn to_package(gguf: &str) -> (String, Option<Spelling>) {
    if let Some((layer, part)) = layer_part(gguf, "blk.") {
        if let Some((_, package)) = LAYER.iter().find(|(llama, _)| *llama == part) {
            return (format!("layers.{layer}.{package}"), Some(Spelling::Llama));
        }
    }
    if let Some((llama, package)) = GLOBAL.iter().find(|(llama, _)| *llama == gguf) {
        let spelling = (llama != package).then_some(Spelling::Llama);
        return ((*package).to_owned(), spelling);
    }
    match gguf.strip_prefix("model.") {
        Some(bare) => (bare.to_owned(), Some(Spelling::Prefixed)),
        None => (gguf.to_owned(), Some(Spelling::Bare)),
    }
}

/// llama.cpp's name for a package tensor's bare name, `None` for one llama.cpp has no name for (the
/// embedding table).
pub fn to_llama(package: &str) -> Option<String> {
    if let Some((layer, part)) = layer_part(package, "layers.") {
        let (llama, _) = LAYER.iter().find(|(_, p)| *p == part)?;
        return Some(format!("blk.{layer}.{llama}"));
    }
    GLOBAL
        .iter()
        .find(|(_, p)| *p == package)
        .map(|(llama, _)| (*llama).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_of_the_table_maps_both_ways() {
        for layer in [0u64, 4, 17] {
            for (llama, package) in LAYER {
                let (g, p) = (
                    format!("blk.{layer}.{llama}"),
                    format!("layers.{layer}.{package}"),
                );
                assert_eq!(to_package(&g), (p.clone(), Some(Spelling::Llama)));
                assert_eq!(to_llama(&p), Some(g));
            }
        }
        assert_eq!(
            to_package("output_norm.weight"),
            ("norm.weight".into(), Some(Spelling::Llama))
        );
        assert_eq!(
            to_package("enc.output_norm.weight"),
            ("hidden_norm.weight".into(), Some(Spelling::Llama))
        );
        assert_eq!(to_package("fc.weight"), ("fc.weight".into(), None));
        assert_eq!(
            to_llama("hidden_norm.weight").as_deref(),
            Some("enc.output_norm.weight")
        );
    }

    #[test]
    fn checkpoint_names_keep_their_spelling_and_odd_layers_are_not_llamas() {
        assert_eq!(
            to_package("model.layers.0.mlp.up_proj.weight"),
            (
                "layers.0.mlp.up_proj.weight".into(),
                Some(Spelling::Prefixed)
            )
        );
        assert_eq!(
            to_package("norm.weight"),
            ("norm.weight".into(), Some(Spelling::Bare))
        );
        assert_eq!(to_package("blk.01.attn_q.weight").1, Some(Spelling::Bare));
        assert_eq!(to_package("blk.0.attn_qq.weight").1, Some(Spelling::Bare));
        assert_eq!(
            to_llama("layers.0.attention_conv.base_kernel").as_deref(),
            Some("blk.0.attn_conv_base")
        );
        assert_eq!(to_llama("layers.0.attention_conv.other"), None);
    }
}
