//! Tensor names and the roles they play (spec sections 6 and 10).
//!
//! A name is explained only when it parses to a role here and the config's family holds that role;
//! anything else is reported by name as unexplained, never guessed at. Parsing knows every family's
//! names, so a second-family tensor in a first-family package can be named as such.

use crate::role_class::RoleClass;
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

/// Where a DFlash2 layer convolves: after attention or after the MLP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConvSite {
    Attention,
    Mlp,
}

/// The two tensors of one DFlash2 convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConvPart {
    /// BF16 `[2, conv_kernel_size, hidden]`.
    BaseKernel,
    /// `(2 * conv_kernel_size * hidden / conv_group_size) x hidden`.
    KernelProjection,
}

/// The three tensors of the DFlash2 candidate selector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SelectorPart {
    HiddenProjection,
    PredecessorCodebook,
    SuccessorCodebook,
}

impl SelectorPart {
    pub const ALL: [SelectorPart; 3] = [
        SelectorPart::HiddenProjection,
        SelectorPart::PredecessorCodebook,
        SelectorPart::SuccessorCodebook,
    ];

    /// The codebooks carry no `.weight` in the released checkpoints; one loader adds it.
    pub fn is_codebook(self) -> bool {
        !matches!(self, SelectorPart::HiddenProjection)
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
    ConvKernelSize,
    ConvGroupSize,
    SelectorRank,
    SelectorTopK,
    OutputMultiplier,
    FinalLogitSoftcapping,
}

impl Scalar {
    /// The first family's scalars (spec section 4.3).
    pub const ALL: [Scalar; 6] = [
        Scalar::BlockSize,
        Scalar::TargetLayerIds,
        Scalar::SlidingWindow,
        Scalar::EmbeddingScale,
        Scalar::MaskTokenId,
        Scalar::NumTargetLayers,
    ];

    /// The second family's further scalars (spec section 10).
    pub const SECOND_FAMILY: [Scalar; 6] = [
        Scalar::ConvKernelSize,
        Scalar::ConvGroupSize,
        Scalar::SelectorRank,
        Scalar::SelectorTopK,
        Scalar::OutputMultiplier,
        Scalar::FinalLogitSoftcapping,
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
            Scalar::ConvKernelSize => "conv_kernel_size",
            Scalar::ConvGroupSize => "conv_group_size",
            Scalar::SelectorRank => "selector_rank",
            Scalar::SelectorTopK => "selector_top_k",
            Scalar::OutputMultiplier => "output_multiplier",
            Scalar::FinalLogitSoftcapping => "final_logit_softcapping",
        }
    }

    /// The second-family feature whose config pair this scalar copies, if any.
    pub fn feature(self) -> Option<super::Feature> {
        match self {
            Scalar::ConvKernelSize | Scalar::ConvGroupSize => Some(super::Feature::Conv),
            Scalar::SelectorRank | Scalar::SelectorTopK => Some(super::Feature::Selector),
            _ => None,
        }
    }

    /// Stored as one F32 rather than I32/I64 integers.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            Scalar::EmbeddingScale | Scalar::OutputMultiplier | Scalar::FinalLogitSoftcapping
        )
    }

    pub fn tensor_name(self) -> String {
        format!("{SCALAR_PREFIX}{}", self.field())
    }
}

/// Scalars are named the same under either spelling.
pub const SCALAR_PREFIX: &str = "dflash.";

/// What a tensor is for: a kind, and the layer for per-layer kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Projection {
        layer: u64,
        projection: Projection,
    },
    LayerGain {
        layer: u64,
        gain: LayerGain,
    },
    Conv {
        layer: u64,
        site: ConvSite,
        part: ConvPart,
    },
    Fc,
    FinalNorm,
    HiddenNorm,
    Selector(SelectorPart),
    Scalar(Scalar),
    EmbedTokens,
}

/// A role without its layer: what a row of a family's table describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Projection(Projection),
    LayerGain(LayerGain),
    Conv(ConvSite, ConvPart),
    Fc,
    FinalNorm,
    HiddenNorm,
    Selector(SelectorPart),
    EmbedTokens,
}

impl Kind {
    pub fn is_per_layer(self) -> bool {
        matches!(
            self,
            Kind::Projection(_) | Kind::LayerGain(_) | Kind::Conv(..)
        )
    }

    /// The role of this kind in `layer` (ignored for kinds that occur once).
    pub fn at(self, layer: u64) -> Role {
        match self {
            Kind::Projection(projection) => Role::Projection { layer, projection },
            Kind::LayerGain(gain) => Role::LayerGain { layer, gain },
            Kind::Conv(site, part) => Role::Conv { layer, site, part },
            Kind::Fc => Role::Fc,
            Kind::FinalNorm => Role::FinalNorm,
            Kind::HiddenNorm => Role::HiddenNorm,
            Kind::Selector(part) => Role::Selector(part),
            Kind::EmbedTokens => Role::EmbedTokens,
        }
    }

    /// The canonical name after the prefix and, for per-layer kinds, after `layers.{i}.`.
    pub fn path(self) -> &'static str {
        match self {
            Kind::Projection(p) => p.path(),
            Kind::LayerGain(g) => g.path(),
            Kind::Conv(ConvSite::Attention, ConvPart::BaseKernel) => "attention_conv.base_kernel",
            Kind::Conv(ConvSite::Attention, ConvPart::KernelProjection) => {
                "attention_conv.kernel_projection.weight"
            }
            Kind::Conv(ConvSite::Mlp, ConvPart::BaseKernel) => "mlp_conv.base_kernel",
            Kind::Conv(ConvSite::Mlp, ConvPart::KernelProjection) => {
                "mlp_conv.kernel_projection.weight"
            }
            Kind::Fc => "fc.weight",
            Kind::FinalNorm => "norm.weight",
            Kind::HiddenNorm => "hidden_norm.weight",
            Kind::Selector(SelectorPart::HiddenProjection) => {
                "candidate_selector.hidden_projection.weight"
            }
            Kind::Selector(SelectorPart::PredecessorCodebook) => {
                "candidate_selector.predecessor_codebook"
            }
            Kind::Selector(SelectorPart::SuccessorCodebook) => {
                "candidate_selector.successor_codebook"
            }
            Kind::EmbedTokens => "embed_tokens.weight",
        }
    }

    /// Every kind any family holds, for parsing.
    pub fn all() -> impl Iterator<Item = Kind> {
        let per_layer = Projection::ALL
            .into_iter()
            .map(Kind::Projection)
            .chain(LayerGain::ALL.into_iter().map(Kind::LayerGain))
            .chain(
                [ConvSite::Attention, ConvSite::Mlp]
                    .into_iter()
                    .flat_map(|s| {
                        [ConvPart::BaseKernel, ConvPart::KernelProjection].map(|p| Kind::Conv(s, p))
                    }),
            );
        let once = [
            Kind::Fc,
            Kind::FinalNorm,
            Kind::HiddenNorm,
            Kind::EmbedTokens,
        ]
        .into_iter()
        .chain(SelectorPart::ALL.into_iter().map(Kind::Selector));
        per_layer.chain(once)
    }

    /// True for the second family's own kinds (convolutions and the selector).
    pub fn is_second_family(self) -> bool {
        matches!(self, Kind::Conv(..) | Kind::Selector(_))
    }
}

impl Role {
    /// The kind, or `None` for a scalar (scalars are listed by family apart from the tables).
    pub fn kind(self) -> Option<Kind> {
        Some(match self {
            Role::Projection { projection, .. } => Kind::Projection(projection),
            Role::LayerGain { gain, .. } => Kind::LayerGain(gain),
            Role::Conv { site, part, .. } => Kind::Conv(site, part),
            Role::Fc => Kind::Fc,
            Role::FinalNorm => Kind::FinalNorm,
            Role::HiddenNorm => Kind::HiddenNorm,
            Role::Selector(part) => Kind::Selector(part),
            Role::EmbedTokens => Kind::EmbedTokens,
            Role::Scalar(_) => return None,
        })
    }

    /// A token for what the tensor is: `projection`, `gain`, `conv`, `fc`, `selector`, `scalar` or
    /// `embedding`. The JSON census's `role`, for programs to branch on; `Display` is the human label.
    pub fn class(self) -> RoleClass {
        match self {
            Role::Projection { .. } => RoleClass::Projection,
            Role::LayerGain { .. } | Role::FinalNorm | Role::HiddenNorm => RoleClass::Gain,
            Role::Conv { .. } => RoleClass::Conv,
            Role::Fc => RoleClass::Fc,
            Role::Selector(_) => RoleClass::Selector,
            Role::Scalar(_) => RoleClass::Scalar,
            Role::EmbedTokens => RoleClass::Embedding,
        }
    }

    pub fn layer(self) -> Option<u64> {
        match self {
            Role::Projection { layer, .. }
            | Role::LayerGain { layer, .. }
            | Role::Conv { layer, .. } => Some(layer),
            _ => None,
        }
    }

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
            Role::Conv { site, part, .. } => {
                let path = Kind::Conv(*site, *part).path();
                write!(f, "conv {}", path.strip_suffix(".weight").unwrap_or(path))
            }
            Role::Fc => f.write_str("fusion matrix fc"),
            Role::FinalNorm => f.write_str("gain norm"),
            Role::HiddenNorm => f.write_str("gain hidden_norm"),
            Role::Selector(part) => {
                write!(f, "selector {}", short(Kind::Selector(*part).path()))
            }
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

/// A second name under which one family stores a kind (spec section 10: the assistant head's
/// `encoder.fc.weight` is fc). Written after the prefix, like a canonical name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alias {
    pub kind: Kind,
    pub name: &'static str,
}

/// How a file spells its names: with the `model.` prefix (the reference container) or without (the
/// published checkpoints), one spelling per file; and the family's aliases, which replace the
/// canonical names of their kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Naming {
    pub prefix: &'static str,
    pub aliases: &'static [Alias],
}

impl Naming {
    pub const PREFIXED: Naming = Naming {
        prefix: "model.",
        aliases: &[],
    };
    pub const BARE: Naming = Naming {
        prefix: "",
        aliases: &[],
    };

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

    /// This spelling with a family's aliases.
    pub fn with_aliases(self, aliases: &'static [Alias]) -> Naming {
        Naming { aliases, ..self }
    }

    /// The name `role` is looked up under in this file.
    pub fn name(self, role: Role) -> String {
        let p = self.prefix;
        let kind = match (role, role.kind()) {
            (_, Some(kind)) => kind,
            (Role::Scalar(s), None) => return s.tensor_name(),
            // Only scalars have no kind.
            (_, None) => return String::new(),
        };
        let path = self
            .aliases
            .iter()
            .find(|a| a.kind == kind)
            .map_or(kind.path(), |a| a.name);
        match role.layer() {
            Some(layer) => format!("{p}layers.{layer}.{path}"),
            None => format!("{p}{path}"),
        }
    }

    /// The role `name` plays under this spelling, for any layer index (the caller bounds it). An
    /// aliased kind answers only to its alias.
    pub fn role(self, name: &str) -> Option<Role> {
        if let Some(field) = name.strip_prefix(SCALAR_PREFIX) {
            return Scalar::ALL
                .into_iter()
                .chain(Scalar::SECOND_FAMILY)
                .find(|s| s.field() == field)
                .map(Role::Scalar);
        }
        let rest = name.strip_prefix(self.prefix)?;
        if let Some(a) = self.aliases.iter().find(|a| a.name == rest) {
            return Some(a.kind.at(0));
        }
        let role = parse_canonical(rest)?;
        let aliased = self.aliases.iter().any(|a| Some(a.kind) == role.kind());
        (!aliased).then_some(role)
    }
}

/// A canonical name without its prefix: `fc.weight`, `layers.3.mlp_conv.base_kernel`, a codebook with
/// or without `.weight`.
fn parse_canonical(rest: &str) -> Option<Role> {
    let [once, per_layer] = &*KINDS;
    if let Some((kind, _)) = once
        .iter()
        .find(|(k, path)| *path == rest || is_codebook_with_suffix(*k, rest))
    {
        return Some(kind.at(0));
    }
    let (index, path) = rest.strip_prefix("layers.")?.split_once('.')?;
    let layer = parse_index(index)?;
    per_layer
        .iter()
        .find(|(_, p)| *p == path)
        .map(|(k, _)| k.at(layer))
}

/// Every kind with its path, those that occur once apart from those per layer: made once, as every
/// tensor name is parsed against them by the census, the inventory and the loaders' facts (walking
/// [`Kind::all`]'s chained iterators for each was a tenth of a quantized folder's own work).
static KINDS: std::sync::LazyLock<[Vec<(Kind, &'static str)>; 2]> =
    std::sync::LazyLock::new(|| {
        let (per_layer, once) = Kind::all()
            .map(|k| (k, k.path()))
            .partition(|(k, _)| k.is_per_layer());
        [once, per_layer]
    });

fn is_codebook_with_suffix(kind: Kind, rest: &str) -> bool {
    matches!(kind, Kind::Selector(p) if p.is_codebook())
        && rest.strip_suffix(".weight") == Some(kind.path())
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

/// A package tensor as its source checkpoint names it (spec section 11).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceName {
    pub role: Role,
    /// The name without the `model.` prefix, as written in the package.
    pub bare: String,
    /// Every name a checkpoint may give this role: the canonical one, the aliases any family gives
    /// it, and a codebook with and without `.weight`.
    pub spellings: Vec<String>,
}

/// Maps a package tensor name (either spelling, canonical or aliased) to its role and its bare
/// checkpoint name. `None` for a name no family explains, and for the `dflash.*` scalars, which have
/// no source tensor.
pub fn source_name(name: &str) -> Option<SourceName> {
    if name.starts_with(SCALAR_PREFIX) {
        return None;
    }
    let bare = name.strip_prefix("model.").unwrap_or(name);
    let aliases = super::all_aliases();
    let role = Naming::BARE
        .with_aliases(aliases)
        .role(bare)
        .or_else(|| parse_canonical(bare))?;
    let kind = role.kind()?;
    let at = |path: &str| match role.layer() {
        Some(layer) => format!("layers.{layer}.{path}"),
        None => path.to_owned(),
    };
    let mut spellings = vec![at(kind.path())];
    if matches!(kind, Kind::Selector(p) if p.is_codebook()) {
        spellings.push(at(&format!("{}.weight", kind.path())));
    }
    spellings.extend(
        aliases
            .iter()
            .filter(|a| a.kind == kind)
            .map(|a| at(a.name)),
    );
    Some(SourceName {
        role,
        bare: bare.to_owned(),
        spellings,
    })
}

/// True for made-up names that look like the second family's (selector or convolution), for a
/// clearer refusal.
pub fn looks_second_family(name: &str) -> bool {
    name.contains("selector") || name.contains("conv")
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
                Role::Conv {
                    layer: 2,
                    site: ConvSite::Mlp,
                    part: ConvPart::KernelProjection,
                },
                Role::Selector(SelectorPart::SuccessorCodebook),
                Role::Fc,
                Role::HiddenNorm,
                Role::Scalar(Scalar::EmbeddingScale),
                Role::Scalar(Scalar::SelectorTopK),
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
    fn codebooks_answer_with_and_without_weight() {
        let want = Some(Role::Selector(SelectorPart::PredecessorCodebook));
        assert_eq!(
            Naming::BARE.role("candidate_selector.predecessor_codebook"),
            want
        );
        assert_eq!(
            Naming::BARE.role("candidate_selector.predecessor_codebook.weight"),
            want
        );
        assert_eq!(
            Naming::BARE.role("candidate_selector.hidden_projection"),
            None
        );
    }

    #[test]
    fn aliases_replace_the_canonical_name() {
        let n = Naming::BARE.with_aliases(crate::family::ASSISTANT_HEAD.aliases);
        assert_eq!(n.name(Role::Fc), "encoder.fc.weight");
        assert_eq!(n.role("encoder.fc.weight"), Some(Role::Fc));
        assert_eq!(
            n.role("encoder.output_norm_enc.weight"),
            Some(Role::HiddenNorm)
        );
        assert_eq!(n.role("fc.weight"), None);
        assert_eq!(Naming::BARE.role("encoder.fc.weight"), None);
    }

    #[test]
    fn source_names_strip_the_prefix_and_know_aliases() {
        let s = source_name("model.layers.1.mlp_conv.base_kernel").unwrap();
        assert_eq!(s.bare, "layers.1.mlp_conv.base_kernel");
        let s = source_name("encoder.output_norm_enc.weight").unwrap();
        assert_eq!(s.role, Role::HiddenNorm);
        assert!(s.spellings.contains(&"hidden_norm.weight".to_owned()));
        let s = source_name("candidate_selector.successor_codebook.weight").unwrap();
        assert_eq!(s.spellings.len(), 2);
        assert_eq!(source_name("dflash.block_size"), None);
        assert_eq!(source_name("lm_head.weight"), None);
    }

    #[test]
    fn unknown_names_have_no_role() {
        let n = Naming::PREFIXED;
        for name in [
            "model.selector.weight",
            "model.layers.0.conv.weight",
            "model.layers.01.mlp.up_proj.weight",
            "model.layers.-1.mlp.up_proj.weight",
            "model.layers.0.attention_conv.kernel_projection",
            "lm_head.weight",
            "dflash.unknown",
        ] {
            assert_eq!(n.role(name), None, "{name}");
        }
        assert!(looks_second_family("model.selector.weight"));
    }
}
