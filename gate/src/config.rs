//! config.json: what it declares (a DFlash draft of which architecture) and its geometry (spec
//! sections 5 and 10). Which table of roles an architecture means is `family`'s to say: this module
//! reads the JSON and knows no tables, so the families can read fields without a circle.
//!
//! Every field is kept as a `Result` naming the field, so a check that needs a missing or mistyped
//! field says so (UNDECIDED) instead of running on a default.

pub mod canonical;

use crate::limits::{MAX_DIMENSION, MAX_LAYERS, MAX_VOCAB};
use serde_json::{Map, Value};
use std::fmt;

/// The architecture name released drafts carry.
pub const DRAFT_ARCHITECTURE: &str = "DFlashDraftModel";

/// The fields only a draft's config.json has: one of them in a config that names another
/// architecture is a draft mislabelled, to be gated and refused, not passed over as another model.
pub const DRAFT_FIELDS: [&str; 5] = [
    "dflash_config",
    "block_size",
    "mask_token_id",
    "num_target_layers",
    "target_layer_ids",
];

/// Whether config.json's bytes are a draft's: recognised as one, or holding a field only drafts
/// have (a draft mislabelled is still a draft, which the gate then refuses by name).
pub fn reads_as_a_draft(bytes: &[u8]) -> bool {
    if DraftConfig::from_json(bytes).is_ok() {
        return true;
    }
    matches!(
        crate::strict_json::parse(bytes),
        Ok(Value::Object(top)) if DRAFT_FIELDS.iter().any(|f| top.contains_key(*f))
            || top.contains_key("speculators_model_type")
    )
}
/// The second family (per-layer convolutions and a candidate selector).
pub const SECOND_FAMILY_ARCHITECTURE: &str = "DFlash2DraftModel";
/// A published head read as a first-family draft whose fc and hidden norm carry other names.
pub const ASSISTANT_HEAD_ARCHITECTURE: &str = "MuseGlimmerAssistantModel";

/// The draft architecture a config declares, by `architectures` or `model_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Architecture {
    /// `DFlashDraftModel`, or `model_type: dflash`.
    Dflash,
    /// `DFlash2DraftModel`: per-layer convolutions and a candidate selector.
    Dflash2,
    /// `MuseGlimmerAssistantModel`: the first family under other names for fc and the hidden norm.
    AssistantHead,
}

/// One entry of `layer_types`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerType {
    Full,
    Sliding,
}

/// What is wrong with one config field; `field` is its JSON path, e.g. `dflash_config.block_size`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldProblem {
    pub field: String,
    pub kind: ProblemKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    /// Absent: the checks that need it are UNDECIDED.
    Missing,
    /// Present with the wrong JSON type: also UNDECIDED, the value is not guessed at.
    WrongType(String),
    /// Present, typed, and inconsistent (zero, negative, decreasing, out of range): a FAIL.
    Invalid(String),
}

impl FieldProblem {
    pub fn new(field: &str, kind: ProblemKind) -> FieldProblem {
        FieldProblem {
            field: field.to_owned(),
            kind,
        }
    }

    pub fn is_invalid(&self) -> bool {
        matches!(self.kind, ProblemKind::Invalid(_))
    }

    /// The problem as evidence: the field, and `missing`, `wrong_type` or `invalid`.
    pub fn finding(&self) -> crate::evidence::FieldFinding {
        crate::evidence::FieldFinding {
            field: self.field.clone(),
            kind: match self.kind {
                ProblemKind::Missing => "missing",
                ProblemKind::WrongType(_) => "wrong_type",
                ProblemKind::Invalid(_) => "invalid",
            },
        }
    }

    /// What a check that could not run says of the field it lacked: `needs hidden_size, which is
    /// missing` (the `Display` form reads as a statement, not as a need).
    pub fn needs(&self) -> String {
        match &self.kind {
            ProblemKind::Missing => format!("needs {}, which is missing", self.field),
            ProblemKind::WrongType(t) => format!("needs {}, which is {t}", self.field),
            ProblemKind::Invalid(why) => format!("needs {}, which {why}", self.field),
        }
    }
}

impl fmt::Display for FieldProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ProblemKind::Missing => write!(f, "{} is missing", self.field),
            ProblemKind::WrongType(t) => write!(f, "{} is {t}", self.field),
            ProblemKind::Invalid(why) => write!(f, "{} {why}", self.field),
        }
    }
}

pub type Field<T> = Result<T, FieldProblem>;

/// How `head_dim` was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadDimSource {
    Stated,
    /// `hidden_size / num_attention_heads`: the report says so.
    Derived,
}

/// The fields of a draft config the gate reads; everything else is ignored.
#[derive(Clone, Debug, PartialEq)]
pub struct DraftConfig {
    /// How the config declared itself a draft, for the first check's message.
    pub declared_as: String,
    /// What it declared; `family` says which table of roles that means.
    pub architecture: Architecture,
    pub hidden_size: Field<u64>,
    pub num_hidden_layers: Field<u64>,
    pub num_attention_heads: Field<u64>,
    pub num_key_value_heads: Field<u64>,
    pub head_dim: Field<(u64, HeadDimSource)>,
    pub intermediate_size: Field<u64>,
    pub block_size: Field<u64>,
    pub target_layer_ids: Field<Vec<u64>>,
    pub mask_token_id: Field<Option<u64>>,
    pub num_target_layers: Field<Option<u64>>,
    /// `Some(None)` is an explicit null: no sliding window.
    pub sliding_window: Field<Option<Option<u64>>>,
    pub embedding_scale: Field<Option<f64>>,
    pub vocab_size: Field<Option<u64>>,
    /// Each divides or scales every step of the draft: when stated, finite and positive.
    pub rms_norm_eps: Field<Option<f64>>,
    /// `rope_parameters.rope_theta` (Transformers 5), else `rope_theta`.
    pub rope_theta: Field<Option<f64>>,
    /// `(conv_kernel_size, conv_group_size)` when the second family's convolutions are switched on.
    pub conv: Field<Option<(u64, u64)>>,
    /// `(selector_rank, selector_top_k)` when its candidate selector is switched on.
    pub selector: Field<Option<(u64, u64)>>,
    pub output_multiplier: Field<Option<f64>>,
    pub final_logit_softcapping: Field<Option<f64>>,
    pub is_causal: Field<Option<bool>>,
    /// Read for any family; its length and sliding entries are checked against the geometry.
    pub layer_types: Field<Option<Vec<LayerType>>>,
    /// Whether q, k, v and o carry a bias (`attention_bias`): a Hugging Face folder then holds the four
    /// bias vectors of every layer. Absent is false, as the model class reads it.
    pub attention_bias: Field<Option<bool>>,
    /// A variant draft's own embedding table (`has_embed_tokens`, Nemotron 3.5) or output head
    /// (`has_own_lm_head`): stated true, the tensor is required, since Transformers initialises a
    /// missing one at random and the draft then embeds (or scores) noise.
    pub has_embed_tokens: Field<Option<bool>>,
    pub has_own_lm_head: Field<Option<bool>>,
    /// Nemotron 3.5's copy of the taps in EAGLE's convention: each `target_layer_ids` entry plus one.
    pub eagle_aux_hidden_state_layer_ids: Field<Option<Vec<u64>>>,
    /// MiMo's attention sinks: true, every layer holds `self_attn.attention_sink_bias`
    /// `[num_attention_heads]`; false or absent, none does.
    pub attention_sink_bias: Field<Option<bool>>,
    /// The draft's own `bos_token_id`, `eos_token_id` and `pad_token_id` as config.json states them
    /// (an object of just those keys): the mask must be none of them, in every form.
    pub own_token_ids: Value,
    /// The scheme `quantization_config` (or MLX's `quantization`) states, when it is there: packed
    /// integers are not weights to read as floats.
    pub quantization: Option<crate::quant::Quantization>,
    /// The speculators format's own fields, for a config in that format (spec 18.1).
    pub speculators: Option<Speculators>,
    /// Where every field above was read, and the fields it does not type: the one reading that the
    /// comparisons with a source or a target use too.
    pub canonical: canonical::Canonical,
}

/// The speculators format's own fields (spec 18.1), each typed where vLLM reads it: present for a
/// config in that format, `None` for any other.
#[derive(Clone, Debug, PartialEq)]
pub struct Speculators {
    /// `speculators_config.proposal_methods[0].speculative_tokens`: vLLM sizes the proposal (and a
    /// DFlash2 draft's convolution block, as this plus one) from it.
    pub speculative_tokens: Field<u64>,
    /// `speculators_config.verifier.name_or_path`.
    pub verifier_name: Field<String>,
    /// `speculators_config.verifier.architectures`.
    pub verifier_architectures: Field<Vec<String>>,
    /// `draft_vocab_size`: the draft's output vocabulary, the verifier's or a reduced one.
    pub draft_vocab_size: Field<u64>,
}

impl Speculators {
    fn read(canonical: &canonical::Canonical) -> Speculators {
        let get = |name: &str| -> Field<(String, &Value)> {
            canonical
                .speculators
                .get(name)
                .map(|r| (r.at.clone(), &r.value))
                .ok_or_else(|| FieldProblem::new(name, ProblemKind::Missing))
        };
        let count = |name: &str| -> Field<u64> {
            let (at, v) = get(name)?;
            bounded(Lookup::Found(at, v), 1, MAX_VOCAB)
        };
        let text = |name: &str| -> Field<String> {
            let (at, v) = get(name)?;
            match v.as_str() {
                Some(t) if !t.is_empty() => Ok(t.to_owned()),
                Some(_) => Err(FieldProblem::new(
                    &at,
                    ProblemKind::Invalid("is empty".into()),
                )),
                None => Err(FieldProblem::new(
                    &at,
                    ProblemKind::WrongType(format!("{}, not a string", kind(v))),
                )),
            }
        };
        let architectures = (|| -> Field<Vec<String>> {
            let (at, v) = get(canonical::VERIFIER_ARCHITECTURES)?;
            let items = v.as_array().ok_or_else(|| {
                FieldProblem::new(
                    &at,
                    ProblemKind::WrongType(format!("{}, not an array of class names", kind(v))),
                )
            })?;
            if items.is_empty() {
                return Err(FieldProblem::new(
                    &at,
                    ProblemKind::Invalid("is empty".into()),
                ));
            }
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    item.as_str().map(str::to_owned).ok_or_else(|| {
                        FieldProblem::new(
                            &format!("{at}[{i}]"),
                            ProblemKind::WrongType(format!("{}, not a class name", kind(item))),
                        )
                    })
                })
                .collect()
        })();
        Speculators {
            speculative_tokens: count(canonical::SPECULATIVE_TOKENS),
            verifier_name: text(canonical::VERIFIER_NAME),
            verifier_architectures: architectures,
            draft_vocab_size: count(canonical::DRAFT_VOCAB_SIZE),
        }
    }
}

impl DraftConfig {
    /// Recognises a draft config and reads its fields, or says why it is not one this gate reads.
    pub fn from_json(bytes: &[u8]) -> Result<DraftConfig, String> {
        let value = crate::strict_json::parse(bytes)
            .map_err(|e| format!("config.json is not valid JSON: {e}"))?;
        let Value::Object(top) = value else {
            return Err("config.json is not a JSON object".to_owned());
        };
        DraftConfig::from_object(&top)
    }

    pub(crate) fn from_object(top: &Map<String, Value>) -> Result<DraftConfig, String> {
        let (declared_as, architecture) = recognise(top)?;
        if let Some(other) = top
            .get("dflash_config")
            .filter(|v| !v.is_object() && !v.is_null())
        {
            return Err(format!(
                "dflash_config is {}, not an object of the draft's fields",
                kind(other)
            ));
        }
        // The one reading of where each field is (`canonical`): this reader only types the values
        // it found, so a field has one home and one provenance for every check and comparison.
        let canonical = canonical::Canonical::read(top);
        let at = Placement {
            canonical: &canonical,
        };
        let hidden_size = dimension(at.top("hidden_size"));
        let num_attention_heads = dimension(at.top("num_attention_heads"));
        let head_dim = match at.top("head_dim") {
            Lookup::Absent(_) => derive_head_dim(&hidden_size, &num_attention_heads),
            stated => dimension(stated).map(|v| (v, HeadDimSource::Stated)),
        };
        let num_target_layers = optional(at.either("num_target_layers", Order::TopFirst), |l| {
            bounded(l, 1, MAX_LAYERS)
        });
        // The feature pairs mean something only to the architecture that has the features.
        let (conv, selector) = if architecture == Architecture::Dflash2 {
            (
                pair(&at, "conv_kernel_size", "conv_group_size"),
                pair(&at, "selector_rank", "selector_top_k"),
            )
        } else {
            (Ok(None), Ok(None))
        };
        let nested = |key| at.either(key, Order::NestedFirst);
        let config = DraftConfig {
            declared_as,
            architecture,
            conv,
            selector,
            output_multiplier: optional(nested("output_multiplier"), finite_f32),
            final_logit_softcapping: optional(nested("final_logit_softcapping"), finite_f32),
            is_causal: optional(nested("is_causal"), boolean),
            layer_types: optional(nested("layer_types"), layer_types),
            num_hidden_layers: bounded(at.top("num_hidden_layers"), 1, MAX_LAYERS),
            num_key_value_heads: dimension(at.top("num_key_value_heads")),
            intermediate_size: dimension(at.top("intermediate_size")),
            block_size: dimension(at.either("block_size", Order::TopFirst)),
            target_layer_ids: taps(at.either("target_layer_ids", Order::NestedFirst)),
            mask_token_id: optional(at.either("mask_token_id", Order::NestedFirst), |l| {
                bounded(l, 0, MAX_VOCAB - 1)
            }),
            sliding_window: sliding_window(at.top("sliding_window")),
            // A DFlash field like the rest: in dflash_config or at the top level (spec 13.2), under
            // either of its names (`input_embedding_scale` is DFlash2's).
            embedding_scale: optional(at.either("embedding_scale", Order::TopFirst), positive_f32),
            vocab_size: optional(at.top("vocab_size"), |l| bounded(l, 1, MAX_VOCAB)),
            rms_norm_eps: optional(at.top("rms_norm_eps"), positive_f32),
            // Under its canonical name, wherever it was read (`rope_parameters` or the top level).
            rope_theta: optional(at.top("rope_theta"), positive_f32),
            attention_bias: optional(at.top("attention_bias"), boolean),
            has_embed_tokens: optional(nested("has_embed_tokens"), boolean),
            has_own_lm_head: optional(nested("has_own_lm_head"), boolean),
            eagle_aux_hidden_state_layer_ids: optional(
                nested("eagle_aux_hidden_state_layer_ids"),
                taps,
            ),
            attention_sink_bias: optional(nested("attention_sink_bias"), boolean),
            // The speculators format keeps them in its Hugging Face config of the layers.
            own_token_ids: Value::Object(
                ["bos_token_id", "eos_token_id", "pad_token_id"]
                    .iter()
                    .filter_map(|k| {
                        let home = match canonical.schema {
                            canonical::Schema::Zlab => top,
                            canonical::Schema::Speculators => {
                                top.get(canonical::LAYER_CONFIG)?.as_object()?
                            }
                        };
                        Some(((*k).to_owned(), home.get(*k)?.clone()))
                    })
                    .collect(),
            ),
            quantization: crate::quant::read(top),
            hidden_size,
            num_attention_heads,
            head_dim,
            num_target_layers,
            speculators: (canonical.schema == canonical::Schema::Speculators)
                .then(|| Speculators::read(&canonical)),
            canonical: canonical.clone(),
        };
        Ok(config)
    }
}

impl DraftConfig {
    /// A speculators draft's reduced vocabulary (spec 18.1): `(draft_vocab_size, vocab_size)` when
    /// the draft scores fewer tokens than the verifier has, mapped through `d2t` and `t2d`.
    pub fn reduced_vocabulary(&self) -> Option<(u64, u64)> {
        // A DFlash2 draft's selector scores the verifier's whole vocabulary: a smaller one is
        // config.geometry's refusal, not a map to read.
        if self.architecture == Architecture::Dflash2 {
            return None;
        }
        let draft = self.speculators.as_ref()?.draft_vocab_size.clone().ok()?;
        let verifier = self.vocab_size.clone().ok()??;
        (draft < verifier).then_some((draft, verifier))
    }
}

/// Derived dimensions, each still a `Field` so a check (or a family's shape formula) that needs a
/// missing one can name it.
#[derive(Clone, Copy)]
pub struct Geometry<'c> {
    pub config: &'c DraftConfig,
}

impl<'c> Geometry<'c> {
    pub fn new(config: &'c DraftConfig) -> Geometry<'c> {
        Geometry { config }
    }

    pub fn hidden(&self) -> Field<u64> {
        self.config.hidden_size.clone()
    }

    pub fn layers(&self) -> Field<u64> {
        self.config.num_hidden_layers.clone()
    }

    pub fn head_dim(&self) -> Field<u64> {
        self.config.head_dim.clone().map(|(d, _)| d)
    }

    pub fn intermediate(&self) -> Field<u64> {
        self.config.intermediate_size.clone()
    }

    pub fn taps(&self) -> Field<Vec<u64>> {
        self.config.target_layer_ids.clone()
    }

    pub fn heads(&self) -> Field<u64> {
        self.config.num_attention_heads.clone()
    }

    /// `num_attention_heads * head_dim`.
    pub fn q_dim(&self) -> Field<u64> {
        product(
            "q_dim",
            self.config.num_attention_heads.clone()?,
            self.head_dim()?,
        )
    }

    /// `num_key_value_heads * head_dim`.
    pub fn kv_dim(&self) -> Field<u64> {
        product(
            "kv_dim",
            self.config.num_key_value_heads.clone()?,
            self.head_dim()?,
        )
    }

    /// `vocab_size`, required by whatever asks for it.
    pub fn vocab(&self) -> Field<u64> {
        present("vocab_size", self.config.vocab_size.clone())
    }

    pub fn conv_kernel_size(&self) -> Field<u64> {
        present("conv_kernel_size", self.config.conv.clone()).map(|(k, _)| k)
    }

    pub fn conv_group_size(&self) -> Field<u64> {
        present("conv_group_size", self.config.conv.clone()).map(|(_, g)| g)
    }

    pub fn selector_rank(&self) -> Field<u64> {
        present("selector_rank", self.config.selector.clone()).map(|(r, _)| r)
    }
}

fn present<T>(field: &str, f: Field<Option<T>>) -> Field<T> {
    f?.ok_or_else(|| FieldProblem::new(field, ProblemKind::Missing))
}

fn product(name: &str, a: u64, b: u64) -> Field<u64> {
    a.checked_mul(b).ok_or_else(|| {
        FieldProblem::new(name, ProblemKind::Invalid(format!("overflows ({a} x {b})")))
    })
}

/// Returns how the config declares itself a draft and as which architecture, or the refusal.
fn recognise(top: &Map<String, Value>) -> Result<(String, Architecture), String> {
    // The speculators format names its own class in `architectures` (`DFlashSpeculator`); vLLM
    // dispatches on `speculators_model_type`, and so does the gate.
    if let Some(family) = canonical::speculators_family(top) {
        let (name, architecture) = match family {
            canonical::Family::First => ("dflash", Architecture::Dflash),
            canonical::Family::Second => ("dflash2", Architecture::Dflash2),
        };
        return Ok((
            format!("speculators_model_type: {name}, vLLM's speculators format"),
            architecture,
        ));
    }
    let model_type = top.get("model_type").and_then(Value::as_str);
    // Loaders build the class `architectures` names, so a value they cannot read as class names is
    // named as what it is, never read as no architectures.
    let architectures: Vec<&str> = match top.get("architectures") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_str()
                    .ok_or_else(|| format!("architectures[{i}] is {}, not a class name", kind(v)))
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(format!(
                "architectures is {}, not an array of class names",
                kind(other)
            ))
        }
    };
    let draft_classes = [
        DRAFT_ARCHITECTURE,
        SECOND_FAMILY_ARCHITECTURE,
        ASSISTANT_HEAD_ARCHITECTURE,
    ];
    let declared: Vec<&str> = draft_classes
        .into_iter()
        .filter(|a| architectures.contains(a))
        .collect();
    // A draft that also names another class, or says model_type "dflash" over another class, is
    // loaded as that class by whichever loader takes it first: not as a draft.
    let others: Vec<&str> = architectures
        .iter()
        .copied()
        .filter(|a| !draft_classes.contains(a))
        .collect();
    if !others.is_empty() && (!declared.is_empty() || model_type == Some("dflash")) {
        return Err(format!(
            "architectures names {:?}, not a draft class: loaders build the class architectures names, so this config loads as that model, not as a draft",
            others
        ));
    }
    if declared.len() > 1 {
        return Err(format!(
            "architectures names {}: more than one draft family, and the gate does not guess which",
            declared.join(" and ")
        ));
    }
    if architectures.contains(&SECOND_FAMILY_ARCHITECTURE) {
        return Ok((
            format!(
                "architectures: {SECOND_FAMILY_ARCHITECTURE}, the second family: per-layer \
                 convolutions and a candidate selector"
            ),
            Architecture::Dflash2,
        ));
    }
    if architectures.contains(&ASSISTANT_HEAD_ARCHITECTURE) {
        return Ok((
            format!(
                "architectures: {ASSISTANT_HEAD_ARCHITECTURE}, an assistant head read as a \
                 first-family draft: encoder.fc.weight is fc, encoder.output_norm_enc.weight is \
                 hidden_norm"
            ),
            Architecture::AssistantHead,
        ));
    }
    if architectures.contains(&DRAFT_ARCHITECTURE) {
        return Ok((
            format!("architectures: {DRAFT_ARCHITECTURE}"),
            Architecture::Dflash,
        ));
    }
    if model_type == Some("dflash") {
        return Ok(("model_type: dflash".to_owned(), Architecture::Dflash));
    }
    let found = match (model_type, architectures.as_slice()) {
        (None, []) => "neither model_type nor architectures".to_owned(),
        (Some(mt), archs) => format!("model_type {mt:?}, architectures {archs:?}"),
        (None, archs) => format!("no model_type, architectures {archs:?}"),
    };
    Err(format!("not a DFlash draft: {found} (want model_type \"dflash\" or architectures [\"{DRAFT_ARCHITECTURE}\"], [\"{SECOND_FAMILY_ARCHITECTURE}\"] or [\"{ASSISTANT_HEAD_ARCHITECTURE}\"])"))
}

/// A field looked up in one of its two homes.
enum Lookup<'a> {
    Found(String, &'a Value),
    Absent(String),
    Problem(FieldProblem),
}

#[derive(Clone, Copy)]
enum Order {
    TopFirst,
    NestedFirst,
}

/// Where the draft's reader finds a field: where the canonical reading found it.
struct Placement<'a> {
    canonical: &'a canonical::Canonical,
}

impl<'a> Placement<'a> {
    /// A field with one home (the top level), or the RoPE base under its canonical name.
    fn top(&self, key: &str) -> Lookup<'a> {
        let absent_as = match self.canonical.schema {
            canonical::Schema::Zlab => key.to_owned(),
            canonical::Schema::Speculators => format!("{}.{key}", canonical::LAYER_CONFIG),
        };
        self.find(key, absent_as)
    }

    /// A DFlash field, in `dflash_config` or at the top level; `order` names the home a missing one
    /// is asked for in. Two homes that disagree are a problem in themselves.
    fn either(&self, key: &str, order: Order) -> Lookup<'a> {
        self.find(
            key,
            match (self.canonical.schema, order) {
                (canonical::Schema::Speculators, _) if key == "target_layer_ids" => {
                    canonical::AUX_IDS.to_owned()
                }
                (canonical::Schema::Speculators, _) | (_, Order::TopFirst) => key.to_owned(),
                (_, Order::NestedFirst) => format!("dflash_config.{key}"),
            },
        )
    }

    fn find(&self, key: &str, absent_as: String) -> Lookup<'a> {
        if let Some((at, why)) = self.canonical.refused.get(key) {
            return Lookup::Problem(FieldProblem::new(at, ProblemKind::Invalid(why.clone())));
        }
        if let Some(what) = self.canonical.conflicted.get(key) {
            return Lookup::Problem(FieldProblem::new(
                key,
                ProblemKind::Invalid(format!("is {what}: they disagree")),
            ));
        }
        match self.canonical.fields.get(key) {
            // A default is the comparison's reading; this reader applies its own where it needs
            // one (a derived head_dim says so) and holds every stated field to its type.
            Some(r) if !r.defaulted => Lookup::Found(r.at.clone(), &r.value),
            _ => Lookup::Absent(absent_as),
        }
    }
}

/// 2^63: serde_json reads integers of this magnitude or more (beyond `i64` and `u64`) as floats.
const TOO_LONG_FOR_64_BITS: f64 = 9_223_372_036_854_775_808.0;

/// The one reader of a JSON integer, for the draft's config and the target's: exact at any size
/// serde_json keeps, saturating past 64 bits, and of the wrong type for anything else, `256.0`
/// included. `shown` words a value that is not a number for the message.
pub fn integer(field: &str, v: &Value, shown: impl Fn(&Value) -> String) -> Field<i128> {
    match v {
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                Ok(i128::from(u))
            } else if let Some(i) = n.as_i64() {
                Ok(i128::from(i))
            } else if n.as_f64().is_some_and(|f| f == 0.0 && f.is_sign_negative()) {
                // `-0`, which serde_json keeps as the float -0.0 (`0.0` is a float of the other
                // sign): the integer zero, for the bounds to name.
                Ok(0)
            } else if let Some(f) = n
                .as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() >= TOO_LONG_FOR_64_BITS)
            {
                // An integer too long for 64 bits (serde_json keeps it as a float): beyond every
                // limit, so it saturates and the bound names it as written. A float that merely has
                // an integral value (`256.0`) is of the wrong type, not over a limit.
                Ok(if f < 0.0 { i128::MIN } else { i128::MAX })
            } else {
                Err(FieldProblem::new(
                    field,
                    ProblemKind::WrongType(format!("{n}, a number that is not an integer")),
                ))
            }
        }
        other => Err(FieldProblem::new(
            field,
            ProblemKind::WrongType(format!("{}, not an integer", shown(other))),
        )),
    }
}

fn required(lookup: Lookup<'_>) -> Field<(String, &Value)> {
    match lookup {
        Lookup::Found(name, v) => Ok((name, v)),
        Lookup::Absent(name) => Err(FieldProblem::new(&name, ProblemKind::Missing)),
        Lookup::Problem(p) => Err(p),
    }
}

fn bounded(lookup: Lookup<'_>, min: i128, max: u64) -> Field<u64> {
    let (name, v) = required(lookup)?;
    let i = integer(&name, v, |v| kind(v).to_owned())?;
    within(&name, v, i, min, max)
}

/// `i` (read from `v`) against `min..=max`: below is "not positive"/"not non-negative", above names
/// the limit. Every integer the config gives goes through here, so none is unbounded.
fn within(name: &str, v: &Value, i: i128, min: i128, max: u64) -> Field<u64> {
    if i < min {
        let want = if min > 0 { "positive" } else { "non-negative" };
        return Err(FieldProblem::new(
            name,
            ProblemKind::Invalid(format!("is {v}, not {want}")),
        ));
    }
    if i > i128::from(max) {
        let why = format!("is {v}, beyond the gate's limit of {max}");
        return Err(FieldProblem::new(name, ProblemKind::Invalid(why)));
    }
    u64::try_from(i)
        .map_err(|_| FieldProblem::new(name, ProblemKind::Invalid(format!("is {v}, out of range"))))
}

/// A model dimension: positive and at most `MAX_DIMENSION`, so no product of a few overflows.
fn dimension(lookup: Lookup<'_>) -> Field<u64> {
    bounded(lookup, 1, MAX_DIMENSION)
}

/// A number that is finite and positive as the f32 the engine stores: a value that overflows f32 (to
/// infinity) or underflows it (to zero) is refused, not compared.
fn positive_f32(lookup: Lookup<'_>) -> Field<f64> {
    let (name, v) = required(lookup)?;
    let f = match v {
        Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| FieldProblem::new(&name, ProblemKind::WrongType(n.to_string())))?,
        other => {
            return Err(FieldProblem::new(
                &name,
                ProblemKind::WrongType(format!("{}, not a number", kind(other))),
            ))
        }
    };
    let as_f32 = f as f32;
    if !(f.is_finite() && f > 0.0 && as_f32.is_finite() && as_f32 > 0.0) {
        return Err(FieldProblem::new(
            &name,
            ProblemKind::Invalid(format!(
                "is {v}, which is {as_f32} as f32: not a finite positive f32"
            )),
        ));
    }
    Ok(f)
}

/// A number that is finite as the f32 a container stores (section 10's logit fields).
fn finite_f32(lookup: Lookup<'_>) -> Field<f64> {
    let (name, v) = required(lookup)?;
    let Some(f) = v.as_f64() else {
        return Err(FieldProblem::new(
            &name,
            ProblemKind::WrongType(format!("{}, not a number", kind(v))),
        ));
    };
    if !(f as f32).is_finite() {
        return Err(FieldProblem::new(
            &name,
            ProblemKind::Invalid(format!("is {v}, not finite as f32")),
        ));
    }
    Ok(f)
}

/// An optional field: absent is `None`; present but wrong is still a problem.
fn optional<T>(lookup: Lookup<'_>, read: impl Fn(Lookup<'_>) -> Field<T>) -> Field<Option<T>> {
    match lookup {
        Lookup::Absent(_) => Ok(None),
        found => read(found).map(Some),
    }
}

fn boolean(lookup: Lookup<'_>) -> Field<bool> {
    let (name, v) = required(lookup)?;
    v.as_bool().ok_or_else(|| {
        FieldProblem::new(
            &name,
            ProblemKind::WrongType(format!("{}, not a boolean", kind(v))),
        )
    })
}

/// A feature pair (spec section 10): both or neither, each a positive dimension. Half a pair is a
/// failure that names both fields and the value that is there.
fn pair(at: &Placement<'_>, a: &str, b: &str) -> Field<Option<(u64, u64)>> {
    let (la, lb) = (
        at.either(a, Order::NestedFirst),
        at.either(b, Order::NestedFirst),
    );
    match (la, lb) {
        (Lookup::Absent(_), Lookup::Absent(_)) => Ok(None),
        (Lookup::Absent(missing), found) | (found, Lookup::Absent(missing)) => {
            let (name, v) = required(found)?;
            Err(FieldProblem::new(
                &missing,
                ProblemKind::Invalid(format!(
                    "is absent while {name} is {v}: the pair is both or neither"
                )),
            ))
        }
        (fa, fb) => Ok(Some((dimension(fa)?, dimension(fb)?))),
    }
}

/// `layer_types`: an array of `"full_attention"` / `"sliding_attention"`; its length is checked
/// against `num_hidden_layers` with the rest of the geometry.
fn layer_types(lookup: Lookup<'_>) -> Field<Vec<LayerType>> {
    let (name, v) = required(lookup)?;
    let Value::Array(items) = v else {
        return Err(FieldProblem::new(
            &name,
            ProblemKind::WrongType(format!("{}, not an array", kind(v))),
        ));
    };
    if items.len() as u64 > MAX_LAYERS {
        return Err(FieldProblem::new(
            &name,
            ProblemKind::Invalid(format!(
                "has {} entries, beyond the gate's limit of {MAX_LAYERS} layers",
                items.len()
            )),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item.as_str() {
            Some("full_attention") => Ok(LayerType::Full),
            Some("sliding_attention") => Ok(LayerType::Sliding),
            _ => Err(FieldProblem::new(
                &format!("{name}[{i}]"),
                ProblemKind::Invalid(format!(
                    "is {item}, not \"full_attention\" or \"sliding_attention\""
                )),
            )),
        })
        .collect()
}

fn sliding_window(lookup: Lookup<'_>) -> Field<Option<Option<u64>>> {
    match lookup {
        Lookup::Absent(_) => Ok(None),
        Lookup::Found(_, Value::Null) => Ok(Some(None)),
        found => dimension(found).map(|w| Some(Some(w))),
    }
}

fn taps(lookup: Lookup<'_>) -> Field<Vec<u64>> {
    let (name, v) = required(lookup)?;
    let Value::Array(items) = v else {
        return Err(FieldProblem::new(
            &name,
            ProblemKind::WrongType(format!("{}, not an array", kind(v))),
        ));
    };
    if items.is_empty() {
        return Err(FieldProblem::new(
            &name,
            ProblemKind::Invalid("is empty".to_owned()),
        ));
    }
    if items.len() as u64 > MAX_LAYERS {
        return Err(FieldProblem::new(
            &name,
            ProblemKind::Invalid(format!(
                "lists {} taps, beyond the gate's limit of {MAX_LAYERS}",
                items.len()
            )),
        ));
    }
    let mut out: Vec<u64> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let element = format!("{name}[{i}]");
        let tap = integer(&element, item, |v| kind(v).to_owned())?;
        let tap = within(&element, item, tap, 0, MAX_LAYERS - 1)?;
        if let Some(&prev) = out.last() {
            if tap <= prev {
                return Err(FieldProblem::new(
                    &name,
                    ProblemKind::Invalid(format!("is not strictly increasing ({prev} then {tap})")),
                ));
            }
        }
        out.push(tap);
    }
    Ok(out)
}

fn derive_head_dim(hidden: &Field<u64>, heads: &Field<u64>) -> Field<(u64, HeadDimSource)> {
    let (Ok(h), Ok(n)) = (hidden, heads) else {
        return Err(FieldProblem::new(
            "head_dim",
            ProblemKind::WrongType(
                "absent, and cannot be derived without hidden_size and num_attention_heads"
                    .to_owned(),
            ),
        ));
    };
    if h % n != 0 {
        return Err(FieldProblem::new(
            "head_dim",
            ProblemKind::Invalid(format!(
                "is absent and hidden_size {h} is not a multiple of num_attention_heads {n}"
            )),
        ));
    }
    Ok((h / n, HeadDimSource::Derived))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOLT_TOP: &str = r#"{"architectures":["DFlashDraftModel"],"model_type":"qwen3","hidden_size":2560,
        "num_hidden_layers":5,"num_attention_heads":32,"num_key_value_heads":8,"head_dim":128,
        "intermediate_size":5120,"block_size":8,"target_layer_ids":[5,11,17,23,35],"sliding_window":1024}"#;

    #[test]
    fn reads_top_level_fields() {
        let c = DraftConfig::from_json(BOLT_TOP.as_bytes()).unwrap();
        assert_eq!(c.hidden_size, Ok(2560));
        assert_eq!(c.head_dim, Ok((128, HeadDimSource::Stated)));
        assert_eq!(c.target_layer_ids, Ok(vec![5, 11, 17, 23, 35]));
        assert_eq!(c.sliding_window, Ok(Some(Some(1024))));
        assert_eq!(c.mask_token_id, Ok(None));
    }

    #[test]
    fn reads_dflash_config_placement() {
        let text = r#"{"model_type":"dflash","hidden_size":256,"num_hidden_layers":1,"num_attention_heads":4,
            "num_key_value_heads":2,"intermediate_size":512,
            "dflash_config":{"block_size":4,"target_layer_ids":[1,3],"mask_token_id":7}}"#;
        let c = DraftConfig::from_json(text.as_bytes()).unwrap();
        assert_eq!(c.block_size, Ok(4));
        assert_eq!(c.target_layer_ids, Ok(vec![1, 3]));
        assert_eq!(c.mask_token_id, Ok(Some(7)));
        assert_eq!(c.head_dim, Ok((64, HeadDimSource::Derived)));
    }

    /// The draft's reader takes each field where the one canonical reading found it: under its
    /// other name, in its other home, and with the provenance the comparisons report.
    #[test]
    fn every_field_is_read_where_the_canonical_reading_found_it() {
        let text = br#"{"architectures":["DFlash2DraftModel"],
            "dflash_config":{"input_embedding_scale":16.0,"block_size":8},
            "rope_parameters":{"rope_theta":1000000.0}}"#;
        let c = DraftConfig::from_json(text).unwrap();
        assert_eq!(c.embedding_scale, Ok(Some(16.0)));
        assert_eq!(c.rope_theta, Ok(Some(1_000_000.0)));
        assert_eq!(c.block_size, Ok(8));
        let at = |name: &str| c.canonical.fields[name].at.clone();
        assert_eq!(at("embedding_scale"), "dflash_config.input_embedding_scale");
        assert_eq!(at("rope_theta"), "rope_parameters.rope_theta");
        assert_eq!(at("block_size"), "dflash_config.block_size");
    }

    /// A field stated twice with different values is neither value: refused naming both homes,
    /// whichever pair of homes or names it is (spec 13.2).
    #[test]
    fn a_field_stated_twice_differently_is_refused_naming_both() {
        let text = br#"{"model_type":"dflash","rope_theta":10000.0,
            "rope_parameters":{"rope_theta":1000000.0},
            "embedding_scale":16.0,"dflash_config":{"input_embedding_scale":8.0}}"#;
        let c = DraftConfig::from_json(text).unwrap();
        let rope = c.rope_theta.unwrap_err();
        assert!(rope.is_invalid(), "{rope}");
        assert!(
            rope.to_string().contains("rope_parameters.rope_theta")
                && rope.to_string().contains("10000"),
            "{rope}"
        );
        let scale = c.embedding_scale.unwrap_err();
        assert!(scale.is_invalid(), "{scale}");
        assert!(
            scale
                .to_string()
                .contains("dflash_config.input_embedding_scale")
                && scale.to_string().contains("embedding_scale"),
            "{scale}"
        );
    }

    #[test]
    fn disagreeing_placements_are_named() {
        let text = r#"{"model_type":"dflash","block_size":8,"dflash_config":{"block_size":16}}"#;
        let c = DraftConfig::from_json(text.as_bytes()).unwrap();
        let p = c.block_size.unwrap_err();
        assert!(p.is_invalid() && p.to_string().contains("disagree"), "{p}");
    }

    #[test]
    fn missing_and_mistyped_fields_are_named_not_defaulted() {
        let text = r#"{"model_type":"dflash","hidden_size":"2560","num_hidden_layers":2.5}"#;
        let c = DraftConfig::from_json(text.as_bytes()).unwrap();
        assert_eq!(
            c.hidden_size.unwrap_err().to_string(),
            "hidden_size is a string, not an integer"
        );
        assert!(c
            .num_hidden_layers
            .unwrap_err()
            .to_string()
            .contains("not an integer"));
        assert_eq!(c.intermediate_size.unwrap_err().kind, ProblemKind::Missing);
        assert_eq!(
            c.target_layer_ids.unwrap_err().field,
            "dflash_config.target_layer_ids"
        );
    }

    #[test]
    fn an_integral_float_is_of_the_wrong_type_not_over_a_limit() {
        let text = r#"{"model_type":"dflash","hidden_size":256.0,"intermediate_size":1e30}"#;
        let c = DraftConfig::from_json(text.as_bytes()).unwrap();
        let p = c.hidden_size.unwrap_err();
        assert_eq!(
            p.kind,
            ProblemKind::WrongType("256.0, a number that is not an integer".into())
        );
        assert_eq!(
            p.needs(),
            "needs hidden_size, which is 256.0, a number that is not an integer"
        );
        // Too long for 64 bits is still over the limit, named as written.
        assert!(c
            .intermediate_size
            .unwrap_err()
            .to_string()
            .contains("beyond the gate's limit"));
        let missing = DraftConfig::from_json(b"{\"model_type\":\"dflash\"}").unwrap();
        assert_eq!(
            missing.hidden_size.unwrap_err().needs(),
            "needs hidden_size, which is missing"
        );
    }

    #[test]
    fn sizes_beyond_the_limits_are_refused_not_looped_over() {
        let text = r#"{"model_type":"dflash","num_hidden_layers":1000000000000,"hidden_size":1099511627776}"#;
        let c = DraftConfig::from_json(text.as_bytes()).unwrap();
        assert!(c
            .num_hidden_layers
            .unwrap_err()
            .to_string()
            .contains("beyond the gate's limit of 1024"));
        assert!(c.hidden_size.unwrap_err().is_invalid());
    }

    #[test]
    fn taps_must_increase() {
        let text = r#"{"model_type":"dflash","target_layer_ids":[5,5]}"#;
        let c = DraftConfig::from_json(text.as_bytes()).unwrap();
        assert!(c
            .target_layer_ids
            .unwrap_err()
            .to_string()
            .contains("strictly increasing"));
    }

    #[test]
    fn refusals_name_what_was_found() {
        let e = DraftConfig::from_json(
            br#"{"model_type":"llama","architectures":["LlamaForCausalLM"]}"#,
        )
        .unwrap_err();
        assert!(
            e.contains("\"llama\"") && e.contains("LlamaForCausalLM"),
            "{e}"
        );
        let e = DraftConfig::from_json(
            br#"{"architectures":["DFlash2DraftModel","DFlashDraftModel"]}"#,
        )
        .unwrap_err();
        assert!(e.contains("more than one draft family"), "{e}");
        assert!(DraftConfig::from_json(b"{")
            .unwrap_err()
            .contains("not valid JSON"));
    }

    /// Loaders build the class `architectures` names: a draft class beside another, or model_type
    /// "dflash" over another class, is that other model; a value that is no list of class names is
    /// named as what it is.
    #[test]
    fn architectures_that_load_as_another_model_are_refused_naming_it() {
        for text in [
            r#"{"model_type":"dflash","architectures":["LlamaForCausalLM"]}"#,
            r#"{"model_type":"qwen3","architectures":["LlamaForCausalLM","DFlashDraftModel"]}"#,
        ] {
            let e = DraftConfig::from_json(text.as_bytes()).unwrap_err();
            assert!(
                e.contains("[\"LlamaForCausalLM\"], not a draft class"),
                "{text}: {e}"
            );
        }
        let e = DraftConfig::from_json(
            br#"{"model_type":"dflash","architectures":"DFlashDraftModel"}"#,
        )
        .unwrap_err();
        assert_eq!(e, "architectures is a string, not an array of class names");
        let e = DraftConfig::from_json(br#"{"architectures":[["DFlashDraftModel"]]}"#).unwrap_err();
        assert_eq!(e, "architectures[0] is an array, not a class name");
        let e =
            DraftConfig::from_json(br#"{"model_type":"dflash","dflash_config":[1]}"#).unwrap_err();
        assert_eq!(
            e,
            "dflash_config is an array, not an object of the draft's fields"
        );
        // What real drafts say still reads.
        for text in [
            r#"{"model_type":"qwen3","architectures":["DFlashDraftModel"]}"#,
            r#"{"model_type":"dflash","architectures":null,"dflash_config":null}"#,
        ] {
            assert!(DraftConfig::from_json(text.as_bytes()).is_ok(), "{text}");
        }
    }

    /// `-0` is the integer zero (serde_json keeps it as the float -0.0), so the bound names it;
    /// `0.0` is still a float.
    #[test]
    fn negative_zero_is_zero_and_not_positive() {
        let c = DraftConfig::from_json(
            br#"{"model_type":"dflash","hidden_size":-0,"num_hidden_layers":0.0}"#,
        )
        .unwrap();
        assert_eq!(
            c.hidden_size.unwrap_err().to_string(),
            "hidden_size is -0.0, not positive"
        );
        assert!(matches!(
            c.num_hidden_layers.unwrap_err().kind,
            ProblemKind::WrongType(_)
        ));
    }
}
