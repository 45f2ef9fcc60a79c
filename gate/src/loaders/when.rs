//! The facts an engine's rule reads, each decided from what the gate already found: the draft's
//! config as the one reader read it, the census, and the checks' evidence. A rule never reads a file;
//! where the check that decides its fact did not run, the fact is not known, and the engine's line
//! says it cannot tell rather than `loads`.

use super::vllm_names::Disagreements;
use crate::check_id::CheckId;
use crate::config::{DraftConfig, ProblemKind};
use crate::evidence::Evidence;
use crate::form::Form;
use crate::report::{Outcome, Report};
use std::cell::OnceCell;
use std::collections::HashSet;

/// What a draft is, as the engine tables tell forms apart: the same safetensors folder is z-lab's
/// schema or the speculators format, and engines read one and not the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A Hugging Face folder in z-lab's schema (`model_type` and `dflash_config`).
    Folder,
    /// A Hugging Face folder in the speculators format (`speculators_model_type`, no `model_type`).
    Speculators,
    /// A GGUF file.
    Gguf,
    /// FastFlowLM's Q4NX package.
    Q4nx,
}

impl Shape {
    /// The words a `not its form` line says the draft is.
    pub fn words(self) -> &'static str {
        match self {
            Shape::Folder => "a Hugging Face safetensors folder",
            Shape::Speculators => "a speculators-format folder (no model_type)",
            Shape::Gguf => "a GGUF file",
            Shape::Q4nx => "a Q4NX package (FastFlowLM's)",
        }
    }
}

/// A fact a rule reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// The config states no `mask_token_id` (absent, or null).
    MaskTokenIdAbsent,
    /// The config states no `target_layer_ids` (nor, in the speculators format,
    /// `aux_hidden_state_layer_ids`).
    TargetLayerIdsAbsent,
    /// [`When::TargetLayerIdsAbsent`], in a draft of this shape only: an engine that reads both
    /// forms may guess the taps in one and refuse the other without them (vLLM).
    TargetLayerIdsAbsentIn(Shape),
    /// `fc` is stored as a quantized set (`fc.weight_packed` and its scales, or a scale beside
    /// an FP8 `fc.weight`), where a plain Linear has only `fc.weight`, and not as
    /// [`When::FcPackedWeight`]: a loader that checks fc.weight's shape stops there first.
    FcQuantized,
    /// `fc.weight` is stored packed in an integer type (ModelOpt NVFP4's U8, MLX's U32): its shape
    /// is not the dense layer's.
    FcPackedWeight,
    /// The config states a quantization (`quantization_config`, or MLX's `quantization`).
    Quantized,
    /// The config states MLX's quantization (`quantization`).
    QuantizedMlx,
    /// The config states a compressed-tensors quantization.
    QuantizedCompressedTensors,
    /// config.json's `quantization_config` is ModelOpt's own object (no `quant_method`), as
    /// ModelOpt's DFlash exporter writes it.
    QuantizedModeloptObject,
    /// ModelOpt's own object states a `quant_algo` vLLM names no method for: it names the object's
    /// method by the algorithm alone (FP8, FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO, NVFP4,
    /// MIXED_PRECISION, in any case), and raises for any other.
    ModeloptObjectAlgoVllmUnnamed,
    /// The draft holds its own embedding table or output head.
    OwnEmbeddingOrHead,
    /// The draft holds its own embedding table (`embed_tokens.weight`).
    OwnEmbedding,
    /// One of these keys is not stated at the config's top level (a loader that reads them there
    /// and nowhere else).
    TopLevelAbsent(&'static [&'static str]),
    /// `target_layer_ids` or `mask_token_id` is stated outside `dflash_config` (the top level of an
    /// older z-lab config).
    IdsOutsideDflashConfig,
    /// `target_layer_ids` is stated outside `dflash_config`, and there are not as many taps as the
    /// draft has layers (a loader that then builds one tap per layer sizes `fc` otherwise).
    TapsOutsideDflashConfigMiscount,
    /// No RoPE base is stated (`rope_theta`, or `rope_parameters.rope_theta`).
    RopeThetaAbsent,
    /// The draft holds its own output head (`lm_head.weight`).
    OwnHead,
    /// A tensor the model class builds is missing (`inventory.complete`).
    TensorMissing,
    /// A tensor's shape or element type is not what the model class builds (`inventory.complete`),
    /// `fc` aside.
    TensorMisshapen,
    /// `fc`'s shape is not what the model class builds (`inventory.complete`).
    FcMisshapen,
    /// A tensor no role explains (`inventory.explained`).
    TensorUnexplained,
    /// A tensor no role explains, other than a `.bias`.
    UnexplainedNotBias,
    /// A `.bias` no role explains (a bias the config does not build).
    UnexplainedBias,
    /// A GGUF holds `selector_hidden.weight` where its metadata declares no DFlash2 keys: llama.cpp
    /// takes the tensor as the second family's mark and then asks for the keys.
    SelectorWithoutKeys,
    /// A Hugging Face folder's tensors are named with the `model.` prefix.
    ModelPrefixed,
    /// A speculators config states `sliding_window_non_causal: false` and a layer is full attention:
    /// vLLM builds every layer causal from it.
    AllLayersCausal,
    /// A weight holds NaN or an infinity (`bf16.finite`).
    NonFinite,
    /// `mask_embedding.pt` disagrees with the config (`scalars.mask_token_id` of a folder).
    MaskEmbeddingDiffers,
    /// A GGUF's mask id is a live token (`config.mask_token`).
    MaskIsLiveToken,
    /// With `--target`: a tap is not below the target's layer count (`target.depth`).
    TapBeyondTarget,
    /// With `--target`, a GGUF draft: its deepest `dflash.target_layers` entry is the target's layer
    /// count (the last layer's output), and the target's architecture is one whose llama.cpp graph
    /// records no input past its last layer (`target.depth`).
    TapAtTargetsLastLayer,
    /// With `--target`: the mask id is at or past the target's vocabulary (`target.mask_token`).
    MaskOutsideTargetVocab,
    /// With `--target`: the draft's hidden size is not the target's (`target.hidden_size`).
    HiddenDiffers,
    /// A Linear the config leaves dense under the checkpoint's name (`fc`, `layers.i.…`), which
    /// vLLM builds quantized under its own (`model.fc`, `model.layers.{T + i}.…`): it matches the
    /// config's lists (compressed-tensors', Hugging Face fp8's) against those names. `Kept` says
    /// what the scheme's quantized layer holds, which decides what the load then does.
    VllmBuildsQuantized(Kept),
    /// A Linear the config quantizes under the checkpoint's name, which vLLM builds dense under its
    /// own.
    VllmBuildsDense,
    /// A layer Linear of a compressed-tensors draft that no `targets` entry matches under SGLang's
    /// bare name for it (`qkv_proj`, `o_proj`, `gate_up_proj`, `down_proj`).
    SglangUntargeted,
    /// A layer Linear of a compressed-tensors draft that SGLang builds otherwise than the config
    /// stores it, matching the config's lists against those bare names.
    SglangBuildsOtherwise,
}

/// What a scheme's quantized Linear holds where the dense one holds `weight`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    /// A `weight` parameter of its own type (FP8): a dense weight is cast into it.
    Weight,
    /// Packed codes and scales, no `weight` (compressed-tensors' pack-quantized and NVFP4).
    Packed,
}

/// Whether a fact holds for this draft.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Met {
    /// It does not.
    No,
    /// It does: what in the draft meets it (a tensor, a field).
    Yes(String),
    /// The gate did not decide it: why.
    Unknown(String),
}

/// What a rule may look at: the report so far and the draft's config when it has one (a folder or
/// a Q4NX package; a GGUF states its config as metadata, which its own checks read).
pub struct Facts<'a> {
    pub report: &'a Report,
    pub config: Option<&'a DraftConfig>,
    /// vLLM's reading of the config's module lists, found once for the rows that ask it.
    vllm_names: OnceCell<Disagreements>,
}

impl<'a> Facts<'a> {
    pub fn new(report: &'a Report, config: Option<&'a DraftConfig>) -> Facts<'a> {
        Facts {
            report,
            config,
            vllm_names: OnceCell::new(),
        }
    }

    fn vllm_names(&self) -> &Disagreements {
        self.vllm_names
            .get_or_init(|| super::vllm_names::find(self))
    }

    /// The modules the draft stores a tensor of (a tensor's name less its last part, as stored),
    /// or `None` when the census did not list every tensor: the passes over a config's layers skip
    /// a module the draft does not hold, so a config that states a thousand layers for a file of two
    /// costs two layers' work.
    pub(super) fn stored_modules(&self) -> Option<HashSet<&str>> {
        let census = &self.report.census;
        (census.tensors_not_listed == 0).then(|| {
            census
                .tensors
                .iter()
                .filter_map(|t| t.name.rsplit_once('.').map(|(m, _)| m))
                .collect()
        })
    }

    /// The shape the tables tell forms apart by.
    pub fn shape(&self) -> Shape {
        match self.report.census.form {
            Form::Q4nx => Shape::Q4nx,
            Form::Gguf => Shape::Gguf,
            Form::Safetensors => match self.config.and_then(|c| c.speculators.as_ref()) {
                Some(_) => Shape::Speculators,
                None => Shape::Folder,
            },
        }
    }

    /// Whether `when` holds.
    pub fn test(&self, when: When) -> Met {
        match when {
            When::MaskTokenIdAbsent if self.config.is_none() => self.gguf_mask_absent(),
            When::MaskTokenIdAbsent => self.config_fact(|c| match &c.mask_token_id {
                Ok(Some(_)) => Met::No,
                Ok(None) => Met::Yes("mask_token_id is not stated".to_owned()),
                Err(p) if p.kind == ProblemKind::Missing => {
                    Met::Yes(format!("{} is not stated", p.field))
                }
                Err(p) => Met::Unknown(format!("{} is unusable", p.field)),
            }),
            When::TargetLayerIdsAbsent => self.config_fact(|c| match &c.target_layer_ids {
                Ok(_) => Met::No,
                Err(p) if p.kind == ProblemKind::Missing => {
                    Met::Yes(format!("{} is not stated", p.field))
                }
                Err(p) => Met::Unknown(format!("{} is unusable", p.field)),
            }),
            When::TargetLayerIdsAbsentIn(shape) if self.shape() != shape => Met::No,
            When::TargetLayerIdsAbsentIn(_) => self.test(When::TargetLayerIdsAbsent),
            When::Quantized => self.config_fact(|c| match &c.quantization {
                Some(q) => Met::Yes(format!("the config states a quantization ({})", q.named)),
                None => Met::No,
            }),
            When::QuantizedMlx => self.config_fact(|c| match &c.quantization {
                Some(q) if q.named.starts_with("MLX") => {
                    Met::Yes(format!("the config states {}", q.named))
                }
                _ => Met::No,
            }),
            When::ModeloptObjectAlgoVllmUnnamed => self.config_fact(|c| {
                const NAMED: [&str; 5] = [
                    "FP8",
                    "FP8_PER_CHANNEL_PER_TOKEN",
                    "FP8_PB_WO",
                    "NVFP4",
                    "MIXED_PRECISION",
                ];
                match c.quantization.as_ref().and_then(|q| q.own_object_algo.as_deref()) {
                    Some(algo) if !NAMED.contains(&algo.to_uppercase().as_str()) => Met::Yes(format!(
                        "ModelOpt's own object states quant_algo {}",
                        crate::escape::escape(algo)
                    )),
                    _ => Met::No,
                }
            }),
            When::QuantizedModeloptObject => self.config_fact(|c| match &c.quantization {
                Some(q) if q.own_object_algo.is_some() => Met::Yes(
                    "the config's quantization_config is ModelOpt's own object, without quant_method"
                        .to_owned(),
                ),
                _ => Met::No,
            }),
            When::QuantizedCompressedTensors => self.config_fact(|c| match &c.quantization {
                Some(q) if q.named == "compressed-tensors" => {
                    Met::Yes(format!("the config states {}", q.named))
                }
                _ => Met::No,
            }),
            When::OwnEmbedding => self.stored(|name| name == "embed_tokens.weight"),
            When::TopLevelAbsent(keys) => {
                self.config_fact(|c| match keys.iter().find(|k| !states_at_top(c, k)) {
                    Some(k) => Met::Yes(format!("{k} is not stated at the top level")),
                    None => Met::No,
                })
            }
            When::IdsOutsideDflashConfig => self.config_fact(|c| {
                let outside = ["target_layer_ids", "mask_token_id"].into_iter().find(|k| {
                    c.canonical
                        .fields
                        .get(*k)
                        .is_some_and(|r| !r.defaulted && !r.at.starts_with("dflash_config."))
                });
                match outside {
                    Some(k) => Met::Yes(format!("{k} is stated outside dflash_config")),
                    None => Met::No,
                }
            }),
            When::TapsOutsideDflashConfigMiscount => self.config_fact(|c| {
                let outside = c
                    .canonical
                    .fields
                    .get("target_layer_ids")
                    .is_some_and(|r| !r.defaulted && !r.at.starts_with("dflash_config."));
                match (&c.target_layer_ids, &c.num_hidden_layers) {
                    (Ok(taps), Ok(layers)) if outside && taps.len() as u64 != *layers => {
                        Met::Yes(format!(
                            "{} taps stated outside dflash_config for {layers} draft layers",
                            taps.len()
                        ))
                    }
                    (Ok(_), Ok(_)) => Met::No,
                    _ if !outside => Met::No,
                    _ => Met::Unknown("the taps or the layer count are unusable".to_owned()),
                }
            }),
            When::RopeThetaAbsent => self.config_fact(|c| match &c.rope_theta {
                Ok(Some(_)) => Met::No,
                Ok(None) => Met::Yes("no rope_theta is stated".to_owned()),
                Err(p) => Met::Unknown(format!("{} is unusable", p.field)),
            }),
            When::FcQuantized => match self.test(When::FcPackedWeight) {
                Met::No => self.stored(|name| {
                    name.strip_prefix("fc.")
                        .is_some_and(|rest| rest != "weight" && rest != "bias")
                }),
                Met::Yes(_) => Met::No,
                unknown => unknown,
            },
            When::FcPackedWeight => {
                self.stored_as(|name, dtype| name == "fc.weight" && dtype.starts_with(['U', 'I']))
            }
            When::OwnEmbeddingOrHead => {
                self.stored(|name| matches!(name, "embed_tokens.weight" | "lm_head.weight"))
            }
            When::OwnHead => self.stored(|name| name == "lm_head.weight"),
            When::TensorMissing => self.inventory(|kind, _| kind == "missing"),
            When::TensorMisshapen => self.inventory(|kind, name| {
                matches!(kind, "misshapen" | "element_type") && !is_fc(name)
            }),
            When::FcMisshapen => self.inventory(|kind, name| {
                matches!(kind, "misshapen" | "element_type") && is_fc(name)
            }),
            When::TensorUnexplained => self.unexplained(|_| true),
            When::UnexplainedNotBias => self.unexplained(|name| !name.ends_with(".bias")),
            When::UnexplainedBias => self.unexplained(|name| name.ends_with(".bias")),
            When::SelectorWithoutKeys => self.unexplained(|name| name == "selector_hidden.weight"),
            When::ModelPrefixed => self.stored(|_| true).and(|name| name.starts_with("model.")),
            When::AllLayersCausal => self.config_fact(|c| {
                let stated = c
                    .canonical
                    .speculators
                    .get(crate::config::canonical::SLIDING_WINDOW_NON_CAUSAL)
                    .map(|r| &r.value);
                if stated != Some(&serde_json::Value::Bool(false)) {
                    return Met::No;
                }
                match &c.layer_types {
                    Ok(Some(types))
                        if types
                            .iter()
                            .all(|t| *t == crate::config::LayerType::Sliding) =>
                    {
                        Met::No
                    }
                    Ok(_) => Met::Yes(
                        "sliding_window_non_causal is false and a layer is full attention"
                            .to_owned(),
                    ),
                    Err(p) => Met::Unknown(format!("{} is unusable", p.field)),
                }
            }),
            // bf16.finite fails for a value that is not finite and nothing else, so a FAIL meets
            // the fact whether or not its evidence locates the value.
            When::NonFinite => match self.failed(CheckId::BF16_FINITE, |e| match e {
                Evidence::Bf16Finite(e) => e
                    .first
                    .as_ref()
                    .map(|f| format!("{}[{}] is {}", f.tensor, f.index, f.value)),
                _ => None,
            }) {
                Met::Unknown(_)
                    if self
                        .report
                        .check(CheckId::BF16_FINITE)
                        .is_some_and(|c| c.outcome() == Outcome::Fail) =>
                {
                    Met::Yes("a weight is not finite (bf16.finite)".to_owned())
                }
                met => met,
            },
            When::MaskEmbeddingDiffers => {
                self.paired(CheckId::SCALARS_MASK_TOKEN_ID, |e| match e {
                    Evidence::ScalarInts(e) if e.config.as_deref() != Some(&[]) => {
                        let stated = e.config.as_ref().and_then(|c| c.first().copied());
                        let held = e.container.first().copied();
                        (held.map(i128::from) != stated.map(i128::from)).then(|| {
                            format!(
                                "mask_embedding.pt holds mask_token_id {}",
                                held.map_or("none".to_owned(), |h| h.to_string())
                            )
                        })
                    }
                    _ => None,
                })
            }
            When::MaskIsLiveToken => self.failed(CheckId::CONFIG_MASK_TOKEN, |e| match e {
                // llama.cpp's CONTROL, USER_DEFINED and UNUSED: a token of its own.
                Evidence::ConfigMaskToken(e) => match e.token_type {
                    Some(3..=5) | None => None,
                    Some(t) => Some(format!(
                        "the mask id {} is a token of type {t}",
                        e.mask_token_id
                    )),
                },
                _ => None,
            }),
            When::TapBeyondTarget => self.paired(CheckId::TARGET_DEPTH, |e| match e {
                Evidence::TargetDepth(e) => e
                    .taps
                    .iter()
                    .find(|t| **t >= e.target_layers)
                    .map(|t| format!("tap {t} of a target of {} layers", e.target_layers)),
                _ => None,
            }),
            // A config's ids are read by engines that take the last layer's own output; only a
            // GGUF's entry equal to the layer count asks for an input past the last layer.
            When::TapAtTargetsLastLayer if self.shape() != Shape::Gguf => Met::No,
            When::TapAtTargetsLastLayer => self.paired(CheckId::TARGET_DEPTH, |e| match e {
                Evidence::TargetDepth(e)
                    if e.records_last_layer == Some(false)
                        && e.target_layers
                            .checked_sub(1)
                            .is_some_and(|last| e.taps.contains(&last)) =>
                {
                    Some(format!(
                        "dflash.target_layers entry {} of a {} target of {} layers",
                        e.target_layers,
                        e.target_architecture.as_deref().unwrap_or("?"),
                        e.target_layers
                    ))
                }
                _ => None,
            }),
            When::MaskOutsideTargetVocab => self.paired(CheckId::TARGET_MASK_TOKEN, |e| match e {
                Evidence::TargetMaskToken(e) if e.mask_token_id >= e.vocab_size => Some(format!(
                    "mask id {} of a target vocabulary of {}",
                    e.mask_token_id, e.vocab_size
                )),
                _ => None,
            }),
            When::VllmBuildsQuantized(kept) => self.vllm_names().built_quantized(kept),
            When::VllmBuildsDense => self.vllm_names().built_dense(),
            When::SglangUntargeted => super::sglang_names::built_otherwise(self, true),
            When::SglangBuildsOtherwise => super::sglang_names::built_otherwise(self, false),
            When::HiddenDiffers => self.paired(CheckId::TARGET_HIDDEN_SIZE, |e| match e {
                Evidence::TargetHiddenSize(e) => Some(format!(
                    "hidden {} against the target's {}",
                    e.draft.map_or("?".to_owned(), |h| h.to_string()),
                    e.target.map_or("?".to_owned(), |h| h.to_string())
                )),
                _ => None,
            }),
        }
    }

    /// Whether a GGUF states no mask id under the key llama.cpp reads (`config.mask_token` says
    /// which key it was read from).
    fn gguf_mask_absent(&self) -> Met {
        if self.report.census.form != Form::Gguf {
            return Met::Unknown("the draft's config.json was not read".to_owned());
        }
        let key = self
            .report
            .check(CheckId::CONFIG_MASK_TOKEN)
            .and_then(|c| c.evidence())
            .and_then(|e| match e {
                Evidence::ConfigMaskToken(e) => Some(e.key.as_str()),
                _ => None,
            });
        match key {
            Some(crate::gguf::MASK_KEY) => Met::No,
            Some(other) => Met::Yes(format!(
                "the mask id is stated only as {other}, not {}",
                crate::gguf::MASK_KEY
            )),
            None => Met::Unknown(format!(
                "{} did not say where the mask id was read",
                CheckId::CONFIG_MASK_TOKEN
            )),
        }
    }

    /// A fact of the draft's config: not known for a draft without one.
    fn config_fact(&self, read: impl Fn(&DraftConfig) -> Met) -> Met {
        match self.config {
            Some(c) => read(c),
            None => Met::Unknown("the draft's config.json was not read".to_owned()),
        }
    }

    /// Whether a tensor whose name (without `model.`) satisfies `name` is stored: every tensor is
    /// in the census, or the fact is not known.
    fn stored(&self, name: impl Fn(&str) -> bool) -> Met {
        self.stored_as(|bare, _| name(bare))
    }

    /// [`Facts::stored`], deciding on the name (without `model.`) and the stored dtype (`U8`).
    fn stored_as(&self, which: impl Fn(&str, &str) -> bool) -> Met {
        let census = &self.report.census;
        let found = census.tensors.iter().find(|t| {
            let bare = t.name.strip_prefix("model.").unwrap_or(&t.name);
            which(bare, &t.dtype)
        });
        match found {
            Some(t) => Met::Yes(t.name.clone()),
            None if census.tensors_not_listed > 0 => Met::Unknown(format!(
                "{} tensors past the census's limit were not listed",
                census.tensors_not_listed
            )),
            None if census.tensors.is_empty() => {
                Met::Unknown("no tensor of the draft was read".to_owned())
            }
            None => Met::No,
        }
    }

    /// A tensor `inventory.explained` found unexplained whose name satisfies `which`.
    fn unexplained(&self, which: impl Fn(&str) -> bool) -> Met {
        self.failed(CheckId::INVENTORY_EXPLAINED, |e| match e {
            Evidence::InventoryExplained(e) => e
                .unexplained
                .iter()
                .find(|f| which(&f.name))
                .map(|f| f.name.clone()),
            _ => None,
        })
    }

    /// A problem `inventory.complete` found whose kind and tensor satisfy `which`.
    fn inventory(&self, which: impl Fn(&str, &str) -> bool) -> Met {
        self.failed(CheckId::INVENTORY_COMPLETE, |e| match e {
            Evidence::InventoryComplete(e) => e
                .problems
                .iter()
                .find(|f| which(f.kind, &f.name))
                .map(|f| format!("{} ({})", f.name, f.kind.replace('_', " "))),
            _ => None,
        })
    }

    /// A fact a check of the draft's own decides: a FAIL whose evidence `found` names it. The check
    /// absent or UNDECIDED is not knowing; a FAIL without evidence is not knowing which fault it is.
    fn failed(&self, id: &str, found: impl Fn(&Evidence) -> Option<String>) -> Met {
        match self.report.check(id) {
            None => Met::Unknown(format!("{id} did not run")),
            Some(c) => match c.outcome() {
                Outcome::Pass => Met::No,
                Outcome::Undecided => Met::Unknown(format!("{id} was UNDECIDED")),
                Outcome::Fail => match c.evidence() {
                    Some(e) => found(e).map_or(Met::No, Met::Yes),
                    None => Met::Unknown(format!("{id} failed without saying which fault")),
                },
            },
        }
    }

    /// A fact a check decides only when what it reads is there: a pairing (`target.*`, without
    /// `--target` the pairing was not asked, and the report's NOT CHECKED says so) or a folder's
    /// `mask_embedding.pt` (none, nothing to disagree). An absent check does not meet the rule.
    fn paired(&self, id: &str, found: impl Fn(&Evidence) -> Option<String>) -> Met {
        match self.report.check(id) {
            None => Met::No,
            Some(_) => self.failed(id, found),
        }
    }
}

/// Whether the config states `key` at its top level (not only in `dflash_config`, and not a default
/// the reader filled in).
fn states_at_top(c: &DraftConfig, key: &str) -> bool {
    c.canonical
        .fields
        .get(key)
        .is_some_and(|r| r.at == key && !r.defaulted)
        || c.canonical.not_compared.contains(key)
}

impl Met {
    /// `Yes` only when what was found also satisfies `also`.
    fn and(self, also: impl Fn(&str) -> bool) -> Met {
        match self {
            Met::Yes(found) if !also(&found) => Met::No,
            other => other,
        }
    }
}

/// `fc.weight` (or `model.fc.weight`), as the inventory names it.
fn is_fc(name: &str) -> bool {
    let bare = name.strip_prefix("model.").unwrap_or(name);
    bare == "fc.weight" || bare == "fc"
}
