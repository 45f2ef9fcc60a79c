//! Tensor names and the roles they play (spec section 6).
//!
//! A name is explained only when it parses to a role here; anything else is reported by name as
//! unexplained, never guessed at.

use std::fmt;

/// The seven projections of a layer, in the order the census lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Projection {
    Q,
    K,
    V,
    O,
    Gate,
    Up,
    Down,
}

impl Projection {
    pub const ALL: [Projection; 7] = [
        Projection::Q,
        Projection::K,
        Projection::V,
        Projection::O,
        Projection::Gate,
        Projection::Up,
        Projection::Down,
    ];

    /// The name's path inside a layer.
    pub fn path(self) -> &'static str {
        match self {
            Projection::Q => "self_attn.q_proj.weight",
            Projection::K => "self_attn.k_proj.weight",
            Projection::V => "self_attn.v_proj.weight",
            Projection::O => "self_attn.o_proj.weight",
            Projection::Gate => "mlp.gate_proj.weight",
            Projection::Up => "mlp.up_proj.weight",
            Projection::Down => "mlp.down_proj.weight",
        }
    }
}

/// The per-layer norm gains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LayerGain {
    Input,
    PostAttention,
    QNorm,
    KNorm,
}

impl LayerGain {
    pub const ALL: [LayerGain; 4] = [
        LayerGain::Input,
        LayerGain::PostAttention,
        LayerGain::QNorm,
        LayerGain::KNorm,
    ];

    pub fn path(self) -> &'static str {
        match self {
            LayerGain::Input => "input_layernorm.weight",
            LayerGain::PostAttention => "post_attention_layernorm.weight",
            LayerGain::QNorm => "self_attn.q_norm.weight",
            LayerGain::KNorm => "self_attn.k_norm.weight",
        }
    }

    /// q_norm and k_norm act per head; the others over the hidden state.
    pub fn is_per_head(self) -> bool {
        matches!(self, LayerGain::QNorm | LayerGain::KNorm)
    }
}

/// The container's copies of config values (`dflash.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scalar {
    BlockSize,
    TargetLayerIds,
    SlidingWindow,
    EmbeddingScale,
    MaskTokenId,
    NumTargetLayers,
}

impl Scalar {
    pub const ALL: [Scalar; 6] = [
        Scalar::BlockSize,
        Scalar::TargetLayerIds,
        Scalar::SlidingWindow,
        Scalar::EmbeddingScale,
        Scalar::MaskTokenId,
        Scalar::NumTargetLayers,
    ];

    /// The config field (and the part of the tensor name after `dflash.`).
    pub fn field(self) -> &'static str {
        match self {
            Scalar::BlockSize => "block_size",
            Scalar::TargetLayerIds => "target_layer_ids",
            Scalar::SlidingWindow => "sliding_window",
            Scalar::EmbeddingScale => "embedding_scale",
            Scalar::MaskTokenId => "mask_token_id",
            Scalar::NumTargetLayers => "num_target_layers",
        }
    }

    pub fn tensor_name(self) -> String {
        format!("{SCALAR_PREFIX}{}", self.field())
    }
}

/// Scalars are named the same under either spelling.
pub const SCALAR_PREFIX: &str = "dflash.";

/// What a tensor is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Projection { layer: u64, projection: Projection },
    LayerGain { layer: u64, gain: LayerGain },
    Fc,
    FinalNorm,
    HiddenNorm,
    Scalar(Scalar),
    EmbedTokens,
}

impl Role {
    pub fn is_gain(self) -> bool {
        matches!(
            self,
            Role::LayerGain { .. } | Role::FinalNorm | Role::HiddenNorm
        )
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Projection { projection, .. } => {
                write!(f, "projection {}", short(projection.path()))
            }
            Role::LayerGain { gain, .. } => write!(f, "gain {}", short(gain.path())),
            Role::Fc => f.write_str("fusion matrix fc"),
            Role::FinalNorm => f.write_str("gain norm"),
            Role::HiddenNorm => f.write_str("gain hidden_norm"),
            Role::Scalar(s) => write!(f, "scalar {}", s.field()),
            Role::EmbedTokens => f.write_str("embedding table"),
        }
    }
}

/// `self_attn.q_proj.weight` -> `q_proj`.
fn short(path: &str) -> &str {
    let stem = path.strip_suffix(".weight").unwrap_or(path);
    stem.rsplit('.').next().unwrap_or(stem)
}

/// How a file spells its names: with the `model.` prefix (the reference container) or without (the
/// published checkpoints). One spelling per file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Naming {
    pub prefix: &'static str,
}

impl Naming {
    pub const PREFIXED: Naming = Naming { prefix: "model." };
    pub const BARE: Naming = Naming { prefix: "" };

    /// The spelling a file uses: prefixed if any non-scalar name carries `model.`.
    pub fn detect<'n>(names: impl IntoIterator<Item = &'n str>) -> Naming {
        let prefixed = names
            .into_iter()
            .any(|n| !n.starts_with(SCALAR_PREFIX) && n.starts_with("model."));
        if prefixed {
            Naming::PREFIXED
        } else {
            Naming::BARE
        }
    }

    pub fn name(self, role: Role) -> String {
        let p = self.prefix;
        match role {
            Role::Projection { layer, projection } => {
                format!("{p}layers.{layer}.{}", projection.path())
            }
            Role::LayerGain { layer, gain } => format!("{p}layers.{layer}.{}", gain.path()),
            Role::Fc => format!("{p}fc.weight"),
            Role::FinalNorm => format!("{p}norm.weight"),
            Role::HiddenNorm => format!("{p}hidden_norm.weight"),
            Role::Scalar(s) => s.tensor_name(),
            Role::EmbedTokens => format!("{p}embed_tokens.weight"),
        }
    }

    /// The role `name` plays under this spelling, for any layer index (the caller bounds it).
    pub fn role(self, name: &str) -> Option<Role> {
        if let Some(field) = name.strip_prefix(SCALAR_PREFIX) {
            return Scalar::ALL
                .into_iter()
                .find(|s| s.field() == field)
                .map(Role::Scalar);
        }
        let rest = name.strip_prefix(self.prefix)?;
        match rest {
            "fc.weight" => return Some(Role::Fc),
            "norm.weight" => return Some(Role::FinalNorm),
            "hidden_norm.weight" => return Some(Role::HiddenNorm),
            "embed_tokens.weight" => return Some(Role::EmbedTokens),
            _ => {}
        }
        let (index, path) = rest.strip_prefix("layers.")?.split_once('.')?;
        let layer = parse_index(index)?;
        if let Some(projection) = Projection::ALL.into_iter().find(|p| p.path() == path) {
            return Some(Role::Projection { layer, projection });
        }
        LayerGain::ALL
            .into_iter()
            .find(|g| g.path() == path)
            .map(|gain| Role::LayerGain { layer, gain })
    }
}

/// A layer index as a writer prints it: decimal digits, no sign, no leading zero.
fn parse_index(s: &str) -> Option<u64> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    if canonical {
        s.parse().ok()
    } else {
        None
    }
}

/// True for names of the second draft family (selector or convolution tensors), for a clearer refusal.
pub fn looks_second_family(name: &str) -> bool {
    name.contains("selector") || name.contains(".conv.") || name.contains("conv_kernel")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_round_trip() {
        for naming in [Naming::PREFIXED, Naming::BARE] {
            for role in [
                Role::Projection {
                    layer: 4,
                    projection: Projection::Down,
                },
                Role::LayerGain {
                    layer: 0,
                    gain: LayerGain::KNorm,
                },
                Role::Fc,
                Role::HiddenNorm,
                Role::Scalar(Scalar::EmbeddingScale),
            ] {
                assert_eq!(naming.role(&naming.name(role)), Some(role));
            }
        }
    }

    #[test]
    fn spelling_is_detected_and_enforced() {
        assert_eq!(
            Naming::detect(["dflash.block_size", "fc.weight"]),
            Naming::BARE
        );
        assert_eq!(Naming::detect(["model.fc.weight"]), Naming::PREFIXED);
        assert_eq!(Naming::PREFIXED.role("fc.weight"), None);
    }

    #[test]
    fn unknown_names_have_no_role() {
        let n = Naming::PREFIXED;
        for name in [
            "model.selector.weight",
            "model.layers.0.conv.weight",
            "model.layers.01.mlp.up_proj.weight",
            "model.layers.-1.mlp.up_proj.weight",
            "lm_head.weight",
            "dflash.unknown",
        ] {
            assert_eq!(n.role(name), None, "{name}");
        }
        assert!(looks_second_family("model.selector.weight"));
    }
}
