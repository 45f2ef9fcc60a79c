//! The one reading of a config's model-defining fields (spec sections 11.1 and 13.2), for comparing
//! two configs that different programs wrote for different loaders: a checkpoint and the package
//! converted from it, later a draft and its target.
//!
//! Each field is read where every loader reads it (z-lab's `_draft_value`: `dflash_config.X`, else
//! the top level; the RoPE base in `rope_parameters`, else `rope_theta`), and each reading says where
//! it was found. So a field moved between its homes is the same field, and one stated in both homes
//! with different values is a conflict named with both. Where both loaders apply a default (`head_dim`
//! from `hidden_size / num_attention_heads`, every layer `full_attention` without `layer_types`, a
//! RoPE type of `default`), the default is the reading, marked as such. Everything else a config
//! states is identity or bookkeeping (`model_type`, `architectures`, `transformers_version`, token ids
//! of the target's tokenizer, ...): listed by name, never compared.

use super::{recognise, Architecture};
use crate::limits::MAX_LAYERS;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Read at the top level only: the model's geometry as Transformers' config classes keep it.
const TOP: [&str; 12] = [
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "rms_norm_eps",
    "hidden_act",
    "attention_bias",
    "max_position_embeddings",
    "sliding_window",
];

/// Read in `dflash_config`, else at the top level: the DFlash fields, which older z-lab and
/// SpecForge configs keep at the top level and newer ones nest.
const EITHER: [&str; 16] = [
    "block_size",
    "target_layer_ids",
    "mask_token_id",
    "num_target_layers",
    "conv_kernel_size",
    "conv_group_size",
    "selector_rank",
    "selector_top_k",
    "output_multiplier",
    "final_logit_softcapping",
    "layer_types",
    "is_causal",
    // The variant drafts' fields (spec 18.2): an own embedding table or head, Nemotron's taps in
    // EAGLE's convention, MiMo's attention sinks.
    "has_embed_tokens",
    "has_own_lm_head",
    "eagle_aux_hidden_state_layer_ids",
    "attention_sink_bias",
];

/// `embedding_scale` under either of its names (the first family's, and DFlash2's
/// `input_embedding_scale`), in either home.
const EMBEDDING_SCALE: [&str; 2] = ["embedding_scale", "input_embedding_scale"];

/// The draft family a config declares: the first (DFlash, or an alias of it) or the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    First,
    Second,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::First => "DFlash",
            Family::Second => "DFlash2",
        }
    }
}

/// One compared field as a config states it: the value, and where it was read (`block_size`,
/// `dflash_config.block_size`, `rope_parameters.rope_theta`, or a default named as one).
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    pub value: Value,
    pub at: String,
    /// The value is a default both loaders apply, not something the config states.
    pub defaulted: bool,
}

/// A config's compared fields, read canonically, and the names of everything else it states.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Canonical {
    /// `Ok` the family it declares; `Err` why it is no draft (the first check's refusal).
    pub family: Option<Result<Family, String>>,
    /// By canonical name: the names above, `rope_theta` and `rope.<field>` for the RoPE scaling.
    pub fields: BTreeMap<String, Reading>,
    /// Fields stated in two homes with different values, each with both values.
    pub conflicts: Vec<String>,
    /// The same conflicts by canonical name (`stated as 8 in block_size and as 16 in ...`), so the
    /// draft's reader refuses the field it cannot read instead of taking one of the two values.
    pub conflicted: BTreeMap<String, String>,
    /// Every other field it states, by dotted name (`dflash_config.X` for one nested).
    pub not_compared: BTreeSet<String>,
    /// Fields whose stated value cannot be the reading at all (speculators' `aux_hidden_state_layer_ids`
    /// holding a 0, a `mask_token_id` of null), by canonical name: where it was read, and why.
    pub refused: BTreeMap<String, (String, String)>,
    /// The schema the config is written in, which says where a missing field is asked for.
    pub schema: Schema,
    /// The speculators format's own fields (spec 18.1), by their path: `draft_vocab_size`,
    /// `speculators_config.proposal_methods[0].speculative_tokens`,
    /// `speculators_config.verifier.name_or_path` and `.architectures`. Not compared with a source:
    /// they say how vLLM wraps the draft, not what the draft is.
    pub speculators: BTreeMap<String, Reading>,
}

/// How a config is laid out: z-lab's (geometry at the top level, DFlash fields in `dflash_config`
/// or at the top level), or the speculators library's (geometry in `transformer_layer_config`,
/// DFlash fields at the top level, the taps as `aux_hidden_state_layer_ids`, each id plus one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Schema {
    #[default]
    Zlab,
    Speculators,
}

/// Where the speculators format keeps the draft's geometry: a Hugging Face config of its own.
pub const LAYER_CONFIG: &str = "transformer_layer_config";

/// The speculators format's taps: z-lab's `target_layer_ids`, each plus one.
pub const AUX_IDS: &str = "aux_hidden_state_layer_ids";

/// The speculators format's own required fields, each a path into the config, in report order.
pub const SPECULATIVE_TOKENS: &str = "speculators_config.proposal_methods[0].speculative_tokens";
pub const VERIFIER_NAME: &str = "speculators_config.verifier.name_or_path";
pub const VERIFIER_ARCHITECTURES: &str = "speculators_config.verifier.architectures";
pub const DRAFT_VOCAB_SIZE: &str = "draft_vocab_size";
/// Kept for the loader rules, not the draft's geometry: vLLM builds every layer causal from
/// `sliding_window_non_causal: false`, full-attention layers too.
pub const SLIDING_WINDOW_NON_CAUSAL: &str = "sliding_window_non_causal";

/// The family a speculators config declares (`speculators_model_type` `dflash` or `dflash2`, and no
/// `model_type`), or `None` for any other config.
pub fn speculators_family(config: &Map<String, Value>) -> Option<Family> {
    if config.contains_key("model_type") {
        return None;
    }
    match config.get("speculators_model_type")?.as_str()? {
        "dflash" => Some(Family::First),
        "dflash2" => Some(Family::Second),
        _ => None,
    }
}

impl Canonical {
    /// Reads `config` (a config.json's top-level object).
    pub fn read(config: &Map<String, Value>) -> Canonical {
        if speculators_family(config).is_some() {
            return Canonical::read_speculators(config);
        }
        let mut c = Canonical {
            family: Some(recognise(config).map(|(_, a)| match a {
                Architecture::Dflash | Architecture::AssistantHead => Family::First,
                Architecture::Dflash2 => Family::Second,
            })),
            ..Canonical::default()
        };
        let nested = match config.get("dflash_config") {
            Some(Value::Object(m)) => Some(m),
            _ => None,
        };
        let mut used: BTreeSet<String> = BTreeSet::new();
        for name in TOP {
            if let Some(v) = config.get(name) {
                c.state(name, v.clone(), name.to_owned());
                used.insert(name.to_owned());
            }
        }
        for name in EITHER {
            c.either(config, nested, name, &[name], &mut used);
        }
        c.either(
            config,
            nested,
            "embedding_scale",
            &EMBEDDING_SCALE,
            &mut used,
        );
        c.rope(config, "", &mut used);
        c.defaults();
        for (key, value) in config {
            if used.contains(key) {
                continue;
            }
            match (key.as_str(), value, nested) {
                ("dflash_config", _, Some(nested)) => {
                    for inner in nested.keys() {
                        if !used.contains(&format!("dflash_config.{inner}")) {
                            c.not_compared.insert(format!("dflash_config.{inner}"));
                        }
                    }
                }
                _ => {
                    c.not_compared.insert(key.clone());
                }
            }
        }
        c
    }

    /// The speculators format (spec 18.1): the geometry from `transformer_layer_config` (a Hugging
    /// Face config of its own), the DFlash fields from the top level, the taps from
    /// `aux_hidden_state_layer_ids` minus one (the stored list beside the reading), and the format's
    /// own fields where vLLM reads them.
    fn read_speculators(config: &Map<String, Value>) -> Canonical {
        let mut c = Canonical {
            family: Some(recognise(config).map(|(_, a)| match a {
                Architecture::Dflash | Architecture::AssistantHead => Family::First,
                Architecture::Dflash2 => Family::Second,
            })),
            schema: Schema::Speculators,
            ..Canonical::default()
        };
        let empty = Map::new();
        let layer = match config.get(LAYER_CONFIG) {
            Some(Value::Object(m)) => m,
            _ => &empty,
        };
        let mut used: BTreeSet<String> = BTreeSet::new();
        if config.get(LAYER_CONFIG).is_some_and(Value::is_object) {
            used.insert(LAYER_CONFIG.to_owned());
        }
        for name in TOP {
            if let Some(v) = layer.get(name) {
                c.state(name, v.clone(), format!("{LAYER_CONFIG}.{name}"));
            }
        }
        for name in EITHER {
            if name == "target_layer_ids" {
                continue;
            }
            // `layer_types` and `is_causal` are Hugging Face fields too: in either home, as z-lab's
            // fields are in theirs.
            let mut found = Vec::new();
            if let Some(v) = layer.get(name) {
                found.push((format!("{LAYER_CONFIG}.{name}"), v));
            }
            if let Some(v) = config.get(name) {
                found.push((name.to_owned(), v));
                used.insert(name.to_owned());
            }
            c.first_of(name, found);
        }
        c.either(config, None, "embedding_scale", &EMBEDDING_SCALE, &mut used);
        c.rope(layer, &format!("{LAYER_CONFIG}."), &mut BTreeSet::new());
        if let Some(v) = config.get(AUX_IDS) {
            used.insert(AUX_IDS.to_owned());
            c.aux_ids(v);
        }
        if config.get("mask_token_id") == Some(&Value::Null) {
            c.fields.remove("mask_token_id");
            c.refused.insert(
                "mask_token_id".to_owned(),
                (
                    "mask_token_id".to_owned(),
                    "is null: vLLM reads the mask id from it and has none to draft a block with"
                        .to_owned(),
                ),
            );
        }
        let path = |steps: &[&str], index: Option<usize>| -> Option<Value> {
            let mut v = config.get(steps[0])?;
            for (i, step) in steps[1..].iter().enumerate() {
                v = v.get(*step)?;
                if i == 0 {
                    if let Some(n) = index {
                        v = v.get(n)?;
                    }
                }
            }
            Some(v.clone())
        };
        for (name, found) in [
            (
                SPECULATIVE_TOKENS,
                path(
                    &[
                        "speculators_config",
                        "proposal_methods",
                        "speculative_tokens",
                    ],
                    Some(0),
                ),
            ),
            (
                VERIFIER_NAME,
                path(&["speculators_config", "verifier", "name_or_path"], None),
            ),
            (
                VERIFIER_ARCHITECTURES,
                path(&["speculators_config", "verifier", "architectures"], None),
            ),
            (DRAFT_VOCAB_SIZE, config.get(DRAFT_VOCAB_SIZE).cloned()),
            (
                SLIDING_WINDOW_NON_CAUSAL,
                config.get(SLIDING_WINDOW_NON_CAUSAL).cloned(),
            ),
        ] {
            if let Some(value) = found {
                c.speculators.insert(
                    name.to_owned(),
                    Reading {
                        value,
                        at: name.to_owned(),
                        defaulted: false,
                    },
                );
            }
        }
        c.defaults();
        for (key, _) in config {
            if !used.contains(key) {
                c.not_compared.insert(key.clone());
            }
        }
        for key in layer.keys() {
            let read = TOP.contains(&key.as_str())
                || EITHER.contains(&key.as_str())
                || ["rope_theta", "rope_parameters", "rope_scaling"].contains(&key.as_str());
            if !read {
                c.not_compared.insert(format!("{LAYER_CONFIG}.{key}"));
            }
        }
        c
    }

    /// `aux_hidden_state_layer_ids`, each id plus one: the reading is the list minus one, with the
    /// stored list beside it. A 0 cannot be an id plus one: the file holds the raw ids, and vLLM,
    /// subtracting one, would read the layer before every tap.
    fn aux_ids(&mut self, stored: &Value) {
        let Some(items) = stored.as_array() else {
            // Not a list: typed (and refused) by the draft's reader under the stored name.
            self.state("target_layer_ids", stored.clone(), AUX_IDS.to_owned());
            return;
        };
        let ids: Option<Vec<u64>> = items.iter().map(Value::as_u64).collect();
        let Some(ids) = ids.filter(|ids| !ids.is_empty()) else {
            self.state("target_layer_ids", stored.clone(), AUX_IDS.to_owned());
            return;
        };
        if ids.contains(&0) {
            self.refused.insert(
                "target_layer_ids".to_owned(),
                (
                    AUX_IDS.to_owned(),
                    format!(
                        "is {}, which holds 0: the speculators format stores each target_layer_id plus one (vLLM subtracts one), so 0 is no id plus one; a file holding the raw ids reads the layer before every tap",
                        shown(stored)
                    ),
                ),
            );
            return;
        }
        let minus_one: Vec<Value> = ids.iter().map(|i| Value::from(i - 1)).collect();
        self.state(
            "target_layer_ids",
            Value::Array(minus_one),
            format!("{AUX_IDS} {} minus one", shown(stored).replace(',', ", ")),
        );
    }

    fn conflict(&mut self, name: &str, what: String) {
        self.conflicts.push(format!("{name}: {what}"));
        self.conflicted.entry(name.to_owned()).or_insert(what);
    }

    fn state(&mut self, name: &str, value: Value, at: String) {
        self.fields.insert(
            name.to_owned(),
            Reading {
                value,
                at,
                defaulted: false,
            },
        );
    }

    /// `name` from `dflash_config` under any of `spellings`, else from the top level under any of
    /// them; two readings that disagree are a conflict.
    fn either(
        &mut self,
        top: &Map<String, Value>,
        nested: Option<&Map<String, Value>>,
        name: &str,
        spellings: &[&str],
        used: &mut BTreeSet<String>,
    ) {
        let mut found: Vec<(String, &Value)> = Vec::new();
        for s in spellings {
            if let Some(v) = nested.and_then(|m| m.get(*s)) {
                found.push((format!("dflash_config.{s}"), v));
                used.insert(format!("dflash_config.{s}"));
            }
        }
        for s in spellings {
            if let Some(v) = top.get(*s) {
                found.push(((*s).to_owned(), v));
                used.insert((*s).to_owned());
            }
        }
        self.first_of(name, found);
    }

    /// The first of `found` (in the order loaders look), or a conflict naming every reading when
    /// they differ.
    fn first_of(&mut self, name: &str, found: Vec<(String, &Value)>) {
        let Some((at, value)) = found.first() else {
            return;
        };
        if let Some((other_at, other)) = found.iter().find(|(_, v)| !same(v, value)) {
            self.conflict(
                name,
                format!(
                    "stated as {} in {at} and as {} in {other_at}",
                    shown(value),
                    shown(other)
                ),
            );
            return;
        }
        self.state(name, (*value).clone(), at.clone());
    }

    /// The RoPE: its base in `rope_parameters.rope_theta` (Transformers 5) else `rope_theta`; its
    /// scaling fields in `rope_parameters` else `rope_scaling` (`type` is `rope_type`'s older name),
    /// each as `rope.<field>`.
    fn rope(&mut self, top: &Map<String, Value>, prefix: &str, used: &mut BTreeSet<String>) {
        let parameters = match top.get("rope_parameters") {
            Some(Value::Object(m)) => Some(m),
            _ => None,
        };
        let mut base = Vec::new();
        if let Some(v) = parameters.and_then(|p| p.get("rope_theta")) {
            base.push((format!("{prefix}rope_parameters.rope_theta"), v));
        }
        if let Some(v) = top.get("rope_theta") {
            base.push((format!("{prefix}rope_theta"), v));
            used.insert(format!("{prefix}rope_theta"));
        }
        self.first_of("rope_theta", base);
        let (home, scaling) = match (parameters, top.get("rope_scaling")) {
            (Some(p), _) => ("rope_parameters", Some(p)),
            (None, Some(Value::Object(s))) => ("rope_scaling", Some(s)),
            _ => ("rope_scaling", None),
        };
        // A `rope_scaling` of null is no scaling, as loaders read it; one of another type is a field
        // like any other, left for the not-compared list to name.
        if parameters.is_some() {
            used.insert(format!("{prefix}rope_parameters"));
        }
        if matches!(
            top.get("rope_scaling"),
            Some(Value::Object(_) | Value::Null)
        ) {
            used.insert(format!("{prefix}rope_scaling"));
        }
        if let (Some(_), Some(Value::Object(s))) = (parameters, top.get("rope_scaling")) {
            // Both homes: Transformers 5 reads rope_parameters; the older one's fields must agree.
            for (key, v) in s {
                let name = rope_name(key);
                let theirs = parameters.and_then(|p| p.get(key).or_else(|| alias(p, key)));
                if theirs.is_none() {
                    // Not read beside rope_parameters: said, so silence is not read as agreement.
                    self.not_compared
                        .insert(format!("rope_scaling.{key} (rope_parameters is read)"));
                }
                if theirs.is_some_and(|t| !same(t, v)) {
                    self.conflict(
                        &name,
                        format!(
                            "stated as {} in rope_parameters.{key} and as {} in rope_scaling.{key}",
                            shown(theirs.unwrap_or(&Value::Null)),
                            shown(v)
                        ),
                    );
                }
            }
        }
        for (key, v) in scaling.into_iter().flatten() {
            if key == "rope_theta" {
                continue;
            }
            let name = rope_name(key);
            if self.fields.contains_key(&name) {
                // `type` and `rope_type` both: the first read stands unless they differ.
                if !same(&self.fields[&name].value, v) {
                    let what = format!(
                        "stated twice in {home} with different values ({} and {})",
                        shown(&self.fields[&name].value),
                        shown(v)
                    );
                    self.conflict(&name, what);
                }
                continue;
            }
            self.state(&name, v.clone(), format!("{prefix}{home}.{key}"));
        }
    }

    /// The defaults both loaders apply, where the config is silent.
    fn defaults(&mut self) {
        // Numbers by value, as they are compared: `2.0` layers are 2.
        let integer = |c: &Canonical, name: &str| {
            let v = &c.fields.get(name)?.value;
            v.as_u64().or_else(|| {
                v.as_f64()
                    .filter(|f| f.fract() == 0.0 && (0.0..=u32::MAX.into()).contains(f))
                    .map(|f| f as u64)
            })
        };
        if !self.fields.contains_key("head_dim") {
            if let (Some(h), Some(n)) = (
                integer(self, "hidden_size"),
                integer(self, "num_attention_heads"),
            ) {
                if n > 0 && h % n == 0 {
                    self.assume(
                        "head_dim",
                        Value::from(h / n),
                        "hidden_size / num_attention_heads",
                    );
                }
            }
        }
        if !self.fields.contains_key("layer_types") {
            if let Some(n) = integer(self, "num_hidden_layers").filter(|&n| n <= MAX_LAYERS) {
                let full = vec![Value::from("full_attention"); n as usize];
                self.assume(
                    "layer_types",
                    Value::Array(full),
                    "every layer full_attention",
                );
            }
        }
        if !self.fields.contains_key("rope.rope_type") {
            self.assume(
                "rope.rope_type",
                Value::from("default"),
                "no scaling stated",
            );
        }
    }

    fn assume(&mut self, name: &str, value: Value, why: &str) {
        self.fields.insert(
            name.to_owned(),
            Reading {
                value,
                at: format!("default: {why}"),
                defaulted: true,
            },
        );
    }

    /// Whether any layer slides, by the layer types read (or their default).
    pub fn slides(&self) -> bool {
        self.fields
            .get("layer_types")
            .and_then(|r| r.value.as_array())
            .is_some_and(|a| a.iter().any(|t| t == "sliding_attention"))
    }

    /// Each layer's causality where the config does not state `is_causal`: a layer is causal
    /// exactly when it slides (z-lab's rule); `None` without readable layer types.
    pub fn causal_by_layer(&self) -> Option<Vec<bool>> {
        let types = self.fields.get("layer_types")?.value.as_array()?;
        Some(types.iter().map(|t| t == "sliding_attention").collect())
    }
}

/// The canonical name of a RoPE scaling field.
fn rope_name(key: &str) -> String {
    match key {
        "type" => "rope.rope_type".to_owned(),
        k => format!("rope.{k}"),
    }
}

/// `key`'s other spelling in `m` (`type` for `rope_type` and the reverse).
fn alias<'m>(m: &'m Map<String, Value>, key: &str) -> Option<&'m Value> {
    match key {
        "type" => m.get("rope_type"),
        "rope_type" => m.get("type"),
        _ => None,
    }
}

/// JSON equality with numbers compared by value: `16 == 16.0`, `[1, 2] == [1.0, 2.0]`, `16 != "16"`.
pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => same_number(x, y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Integers exactly (an integral float against an integer too: 2^53 + 1 is not 2^53 written as a
/// float, which an f64 comparison would call equal), anything else as the f32 the engines compute
/// with: a converter that went through a GGUF writes `rms_norm_eps` as 9.999999974752427e-07, the
/// f32 of the checkpoint's 1e-6, which is no other model.
fn same_number(x: &serde_json::Number, y: &serde_json::Number) -> bool {
    let integer = |n: &serde_json::Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    let float_is = |f: Option<f64>, i: i128| {
        // Integral and under 2^100: exactly representable as i128, so the cast is exact.
        f.is_some_and(|f| f.fract() == 0.0 && f.abs() < 1e30 && f as i128 == i)
    };
    match (integer(x), integer(y)) {
        (Some(a), Some(b)) => a == b,
        (Some(a), None) => float_is(y.as_f64(), a),
        (None, Some(b)) => float_is(x.as_f64(), b),
        (None, None) => match (x.as_f64(), y.as_f64()) {
            (Some(a), Some(b)) => (a as f32) == (b as f32),
            _ => false,
        },
    }
}

/// A value for a message, cut at 80 characters.
pub fn shown(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 80 {
        format!("{}...", text.chars().take(77).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(v: Value) -> Canonical {
        Canonical::read(v.as_object().expect("object"))
    }

    #[test]
    fn fields_are_read_where_loaders_read_them_and_say_where() {
        let c = read(json!({
            "architectures": ["DFlashDraftModel"], "model_type": "qwen3",
            "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 2,
            "block_size": 8, "dflash_config": {"target_layer_ids": [1, 3], "mask_token_id": 7, "extra": 1},
            "rope_parameters": {"rope_theta": 1e6, "rope_type": "default"},
            "transformers_version": "5.0.0"
        }));
        assert_eq!(c.family, Some(Ok(Family::First)));
        let at = |n: &str| c.fields[n].at.clone();
        assert_eq!(at("block_size"), "block_size");
        assert_eq!(at("target_layer_ids"), "dflash_config.target_layer_ids");
        assert_eq!(at("rope_theta"), "rope_parameters.rope_theta");
        assert_eq!(at("head_dim"), "default: hidden_size / num_attention_heads");
        assert_eq!(c.fields["head_dim"].value, json!(64));
        assert_eq!(
            c.fields["layer_types"].value,
            json!(["full_attention", "full_attention"])
        );
        let not: Vec<&str> = c.not_compared.iter().map(String::as_str).collect();
        assert_eq!(
            not,
            [
                "architectures",
                "dflash_config.extra",
                "model_type",
                "transformers_version"
            ]
        );
        assert!(c.conflicts.is_empty(), "{:?}", c.conflicts);
    }

    /// The speculators format (spec 18.1): the geometry from `transformer_layer_config`, the taps
    /// from `aux_hidden_state_layer_ids` minus one with the stored list beside them, the format's
    /// own fields kept apart from the compared ones.
    #[test]
    fn the_speculators_format_is_read_where_vllm_reads_it() {
        let config = json!({
            "speculators_model_type": "dflash2", "architectures": ["DFlash2DraftModel"],
            "aux_hidden_state_layer_ids": [2, 4, 6], "mask_token_id": 7, "block_size": 8,
            "draft_vocab_size": 1000, "conv_kernel_size": 2,
            "speculators_config": {"proposal_methods": [{"speculative_tokens": 7}],
                "verifier": {"name_or_path": "Org/Target", "architectures": ["Qwen3ForCausalLM"]}},
            "transformer_layer_config": {"model_type": "qwen3", "hidden_size": 256,
                "num_attention_heads": 4, "num_hidden_layers": 2, "rope_theta": 1e6,
                "vocab_size": 1000, "eos_token_id": 2}
        });
        let c = read(config);
        assert_eq!(c.schema, Schema::Speculators);
        assert_eq!(c.family, Some(Ok(Family::Second)));
        let at = |n: &str| c.fields[n].at.clone();
        assert_eq!(at("hidden_size"), "transformer_layer_config.hidden_size");
        assert_eq!(at("rope_theta"), "transformer_layer_config.rope_theta");
        assert_eq!(at("block_size"), "block_size");
        assert_eq!(c.fields["target_layer_ids"].value, json!([1, 3, 5]));
        assert_eq!(
            at("target_layer_ids"),
            "aux_hidden_state_layer_ids [2, 4, 6] minus one"
        );
        assert_eq!(c.speculators[SPECULATIVE_TOKENS].value, json!(7));
        assert_eq!(c.speculators[VERIFIER_NAME].value, json!("Org/Target"));
        assert!(!c.fields.contains_key(DRAFT_VOCAB_SIZE));
        assert!(c
            .not_compared
            .contains("transformer_layer_config.eos_token_id"));
        // A 0 is no id plus one: refused, naming the stored list and the convention.
        let raw = read(json!({"speculators_model_type": "dflash",
            "aux_hidden_state_layer_ids": [0, 3], "mask_token_id": null}));
        let (field, why) = &raw.refused["target_layer_ids"];
        assert_eq!(field, AUX_IDS);
        assert!(why.contains("[0,3]") && why.contains("plus one"), "{why}");
        assert!(raw.refused["mask_token_id"].1.contains("null"));
        // With a model_type it is z-lab's schema, whatever else it says.
        let zlab = read(json!({"speculators_model_type": "dflash", "model_type": "dflash"}));
        assert_eq!(zlab.schema, Schema::Zlab);
    }

    #[test]
    fn two_homes_that_disagree_are_a_conflict_naming_both() {
        let c = read(json!({
            "block_size": 8, "dflash_config": {"block_size": 16},
            "rope_theta": 10000, "rope_parameters": {"rope_theta": 1e6},
            "embedding_scale": 16, "input_embedding_scale": 16.0
        }));
        assert_eq!(
            c.conflicts,
            [
                "block_size: stated as 16 in dflash_config.block_size and as 8 in block_size",
                "rope_theta: stated as 1000000.0 in rope_parameters.rope_theta and as 10000 in rope_theta",
            ]
        );
        assert_eq!(c.fields["embedding_scale"].at, "embedding_scale");
        assert!(matches!(c.family, Some(Err(_))));
    }

    #[test]
    fn the_rope_scaling_is_read_from_either_home_with_type_as_rope_type() {
        let old = read(json!({"rope_scaling": {"type": "yarn", "factor": 4.0}, "rope_theta": 1e6}));
        let new = read(
            json!({"rope_parameters": {"rope_type": "yarn", "factor": 4, "rope_theta": 1000000}}),
        );
        for name in ["rope_theta", "rope.rope_type", "rope.factor"] {
            assert!(
                same(&old.fields[name].value, &new.fields[name].value),
                "{name}"
            );
        }
        let none = read(json!({"rope_scaling": null, "rope_theta": 1e6}));
        assert_eq!(none.fields["rope.rope_type"].value, json!("default"));
        assert!(none.fields["rope.rope_type"].defaulted);
        assert!(none.not_compared.is_empty(), "{:?}", none.not_compared);
    }
}
