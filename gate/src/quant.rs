//! A quantized draft's scheme, as its `quantization_config` (or MLX's `quantization`) states it
//! (spec section 17): read from the config, never guessed from the tensors' element types. The
//! schemes read are compressed-tensors' `pack-quantized` (W4A16, W8A16), `float-quantized` (FP8) and
//! `nvfp4-pack-quantized`, Hugging Face's `fp8`, ModelOpt's `NVFP4` and `FP8`, and MLX's
//! `quantization` (affine, mxfp4, nvfp4, mxfp8, with per-module overrides); any other is named, and
//! the weight checks are UNDECIDED for it.
//!
//! Which modules are quantized is the config's statement, in each library's own terms (see
//! [`Select`]). Patterns come from the file, so they are compiled by the `regex` crate, which
//! matches in time linear in the name whatever the pattern, with its compiled size bounded; at most
//! [`MAX_PATTERNS`] of them are compiled.

mod compressed_tensors;
mod mlx;
mod runtime;
mod vendors;

pub use runtime::Built;

pub use mlx::{MlxMode, MlxParams};

use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// The most `re:` (or glob) patterns one config may hold. Each is compiled once and tried against
/// every module: a config of 10^5 patterns would cost seconds for nothing a writer produces
/// (llm-compressor writes a handful).
pub const MAX_PATTERNS: usize = 256;

/// The most names a config may list (`ignore`, `modules_to_not_convert`, MLX's per-module
/// overrides): a writer lists at most one per module, and a draft has a few hundred; names are
/// looked up whole, so even this many cost milliseconds.
pub const MAX_NAMES: usize = 1 << 20;

/// The most bytes a compiled pattern may take (the `regex` crate's size limit), and its lazy DFA's
/// cache: a pattern built to blow up when compiled is refused, not built.
const PATTERN_BYTES: usize = 1 << 20;

/// What `quantization_config` says, as far as the gate reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantization {
    /// The scheme as the config names it (`quant_method`, else `format`; `MLX's quantization`),
    /// for messages and the loaders' rules.
    pub named: String,
    /// The scheme, or why the gate does not read it (a sentence naming what it is).
    pub scheme: Result<Scheme, String>,
    /// ModelOpt's `quant_algo` as stated, when config.json's `quantization_config` is ModelOpt's
    /// own object (as its DFlash exporter writes it), which engines name by that algorithm.
    pub own_object_algo: Option<String>,
}

/// A scheme the gate reads: how a quantized Linear is stored, and which Linears are.
#[derive(Clone, Debug, PartialEq)]
pub struct Scheme {
    /// The scheme's storage for a module the config does not single out.
    pub storage: Storage,
    select: Select,
}

/// How one quantized Linear `X` is stored in place of its dense `X.weight` (spec 17.1).
#[derive(Clone, Debug, PartialEq)]
pub enum Storage {
    /// compressed-tensors `pack-quantized`: `X.weight_packed` (I32, `bits` wide codes along K),
    /// `X.weight_scale`, `X.weight_shape` and, asymmetric, `X.weight_zero_point`.
    PackInt {
        bits: u32,
        /// The group size along K; `None` for `strategy: channel` (one scale per row).
        group: Option<u64>,
        symmetric: bool,
    },
    /// FP8 E4M3 weights `X.weight` with a float scale per tensor, row or block: compressed-tensors
    /// `float-quantized` (`X.weight_scale`, `X.input_scale`), Hugging Face `fp8`
    /// (`X.weight_scale_inv`, `X.activation_scale`), ModelOpt `FP8` (`X.weight_scale`,
    /// `X.input_scale`).
    Fp8 {
        writer: Writer,
        scale: Fp8Scale,
        /// Whether a static input scale is stored beside the weight.
        input_scale: bool,
    },
    /// NVFP4: E2M1 codes two to a byte, an E4M3 scale per 16 along K, and an F32 global scale:
    /// compressed-tensors (`X.weight_packed`, `X.weight_scale`, `X.weight_global_scale`, and
    /// `X.input_global_scale` for static inputs) or ModelOpt (`X.weight`, `X.weight_scale`,
    /// `X.weight_scale_2`, `X.input_scale`).
    Nvfp4 { writer: Writer },
    /// MLX's `quantize`: `X.weight` (U32 words of `bits`-wide codes along K), `X.scales` and, affine,
    /// `X.biases`, `[N, K / group]` each.
    Mlx(MlxParams),
}

/// Which library wrote the tensors: it decides their names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    CompressedTensors,
    HuggingFace,
    ModelOpt,
}

/// The grain of an FP8 weight's scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fp8Scale {
    /// One scale for the tensor (`[1]`, or a scalar `[]`).
    Tensor,
    /// One per row (`[N, 1]`).
    Channel,
    /// One per `[rows, columns]` block (`[ceil(N / rows), ceil(K / columns)]`).
    Block([u64; 2]),
}

/// What the config says of one module.
#[derive(Clone, Debug, PartialEq)]
pub enum Expect {
    /// The config quantizes it, stored so; the entry that says so.
    Quantized(Storage, String),
    /// The config leaves it dense; the entry that says so.
    Dense(String),
    /// Either is read (MLX quantizes what its file stores quantized), this way when quantized.
    Either(Storage),
}

/// How a scheme's config says which Linears are quantized.
#[derive(Clone, Debug, PartialEq)]
enum Select {
    /// compressed-tensors: `targets` (class names, module names, `re:` patterns) minus `ignore`.
    TargetsIgnore { targets: Matchers, ignore: Matchers },
    /// Hugging Face `fp8`: every Linear but those a `modules_to_not_convert` entry matches (from
    /// the name's start as a pattern, or as the name's end: Transformers' `should_convert_module`).
    /// `ignored_layers`, when stated and not empty, is the list vLLM reads in its place.
    NotConverted {
        keys: Matchers,
        ignored_layers: Vec<String>,
    },
    /// ModelOpt: every Linear but those an `exclude_modules` (or `ignore`) glob matches.
    Excluded(Matchers),
    /// MLX: what the file stores quantized, unless `quantization` names the module: `false`
    /// (dense), or its own parameters.
    Mlx(HashMap<String, Option<MlxParams>>),
}

impl Scheme {
    /// What the config says of `module` (a Linear's name as stored, without `.weight`).
    pub fn expect(&self, module: &str) -> Expect {
        let quantized = |entry: String| Expect::Quantized(self.storage.clone(), entry);
        match &self.select {
            Select::TargetsIgnore { targets, ignore } => {
                let Some(target) = targets.first_match(module, true) else {
                    return Expect::Dense(
                        "no entry of quantization_config's targets matches it".to_owned(),
                    );
                };
                match ignore.first_match(module, true) {
                    Some(entry) => {
                        Expect::Dense(format!("quantization_config's ignore lists it ({entry})"))
                    }
                    None => quantized(format!("targets {target}")),
                }
            }
            Select::NotConverted { keys, .. } => {
                let ends = keys
                    .patterns
                    .iter()
                    .find(|(k, _)| module.ends_with(k.as_str()));
                match ends
                    .map(|(k, _)| k.clone())
                    .or_else(|| keys.first_match(module, false))
                {
                    Some(k) => Expect::Dense(format!(
                        "quantization_config's modules_to_not_convert lists it ({k})"
                    )),
                    None => quantized("every Linear not in modules_to_not_convert".to_owned()),
                }
            }
            Select::Excluded(globs) => match globs.first_match(module, false) {
                Some(g) => Expect::Dense(format!(
                    "ModelOpt's exclude_modules (or ignore) lists it ({g})"
                )),
                None => quantized("every Linear not in exclude_modules".to_owned()),
            },
            Select::Mlx(overrides) => match overrides.get(module) {
                Some(Some(p)) => Expect::Quantized(
                    Storage::Mlx(*p),
                    format!("quantization.{module} gives it {}", p.describe()),
                ),
                Some(None) => Expect::Dense(format!("quantization.{module} is false")),
                None => Expect::Either(self.storage.clone()),
            },
        }
    }

    /// `compressed-tensors pack-quantized W4A16 group 128`, `MLX affine 4-bit group 64`, ...
    pub fn describe(&self) -> String {
        self.storage.describe()
    }
}

impl Storage {
    /// The suffix of the tensor that stands in place of `X.weight`.
    pub fn primary(&self) -> &'static str {
        match self {
            Storage::PackInt { .. }
            | Storage::Nvfp4 {
                writer: Writer::CompressedTensors,
            } => ".weight_packed",
            _ => ".weight",
        }
    }

    /// The suffix whose presence says `X` is stored quantized (for a scheme whose primary keeps the
    /// dense name `X.weight`, its scale).
    pub fn marker(&self) -> &'static str {
        match self {
            Storage::Fp8 {
                writer: Writer::HuggingFace,
                ..
            } => ".weight_scale_inv",
            Storage::Mlx(_) => ".scales",
            Storage::PackInt { .. }
            | Storage::Nvfp4 {
                writer: Writer::CompressedTensors,
            } => ".weight_packed",
            _ => ".weight_scale",
        }
    }

    /// Every suffix a quantized set stores beside its primary.
    pub fn parts(&self) -> &'static [&'static str] {
        match self {
            Storage::PackInt { .. } => &[".weight_scale", ".weight_shape", ".weight_zero_point"],
            Storage::Fp8 {
                writer: Writer::HuggingFace,
                ..
            } => &[".weight_scale_inv", ".activation_scale"],
            Storage::Fp8 { .. } => &[".weight_scale", ".input_scale", ".weight_zero_point"],
            Storage::Nvfp4 {
                writer: Writer::CompressedTensors,
            } => &[
                ".weight_scale",
                ".weight_global_scale",
                ".input_global_scale",
                ".weight_zero_point",
            ],
            Storage::Nvfp4 { .. } => &[".weight_scale", ".weight_scale_2", ".input_scale"],
            Storage::Mlx(_) => &[".scales", ".biases"],
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Storage::PackInt {
                bits,
                group,
                symmetric,
            } => {
                let grouping = match group {
                    Some(g) => format!("group {g}"),
                    None => "channel".to_owned(),
                };
                let asymmetric = if *symmetric { "" } else { ", asymmetric" };
                format!("compressed-tensors pack-quantized W{bits}A16 {grouping}{asymmetric}")
            }
            Storage::Fp8 {
                writer,
                scale,
                input_scale,
            } => {
                let grain = match scale {
                    Fp8Scale::Tensor => "per tensor".to_owned(),
                    Fp8Scale::Channel => "per channel".to_owned(),
                    Fp8Scale::Block([r, c]) => format!("{r}x{c} blocks"),
                };
                let input = if *input_scale {
                    ", static input scale"
                } else {
                    ""
                };
                format!("{} FP8 E4M3 {grain}{input}", writer.name())
            }
            Storage::Nvfp4 { writer } => format!("{} NVFP4 group 16", writer.name()),
            Storage::Mlx(p) => format!("MLX {}", p.describe()),
        }
    }
}

impl Writer {
    fn name(self) -> &'static str {
        match self {
            Writer::CompressedTensors => "compressed-tensors",
            Writer::HuggingFace => "Hugging Face",
            Writer::ModelOpt => "ModelOpt",
        }
    }
}

/// A list of names and patterns: names and class names looked up whole, patterns tried in turn.
#[derive(Clone, Debug, Default)]
struct Matchers {
    names: HashSet<String>,
    patterns: Vec<(String, regex::Regex)>,
}

/// Two lists are equal when they hold the same entries (a compiled pattern is its text).
impl PartialEq for Matchers {
    fn eq(&self, other: &Matchers) -> bool {
        let texts = |m: &Matchers| {
            m.patterns
                .iter()
                .map(|(t, _)| t.clone())
                .collect::<Vec<_>>()
        };
        self.names == other.names && texts(self) == texts(other)
    }
}

impl Matchers {
    /// The first entry that matches `module`: its name, the class `Linear` (when `linear`), or a
    /// pattern matching from the name's start (Python's `re.match`, as compressed-tensors calls it;
    /// a glob's pattern is anchored at both ends).
    fn first_match(&self, module: &str, linear: bool) -> Option<String> {
        if self.names.contains(module) {
            return Some(module.to_owned());
        }
        if linear && self.names.contains("Linear") {
            return Some("Linear".to_owned());
        }
        // Leftmost-first: a match starting at 0 exists exactly when the leftmost one starts there.
        self.patterns
            .iter()
            .find(|(_, re)| re.find(module).is_some_and(|m| m.start() == 0))
            .map(|(text, _)| text.clone())
    }

    /// Adds `pattern` (a regular expression, from the file) under the shared `budget`.
    fn push_pattern(
        &mut self,
        entry: &str,
        pattern: &str,
        field: &str,
        budget: &mut usize,
    ) -> Result<(), String> {
        if *budget == 0 {
            return Err(format!(
                "{field} holds more than the {MAX_PATTERNS} patterns the gate compiles"
            ));
        }
        *budget -= 1;
        let re = regex::RegexBuilder::new(pattern)
            .size_limit(PATTERN_BYTES)
            .dfa_size_limit(PATTERN_BYTES)
            .build()
            .map_err(|e| {
                let first = e.to_string().lines().last().unwrap_or_default().to_owned();
                format!(
                    "{field} entry {} is not a pattern the gate reads: {first}",
                    crate::escape::escape(&entry.chars().take(64).collect::<String>())
                )
            })?;
        self.patterns.push((entry.to_owned(), re));
        Ok(())
    }
}

/// The config's `quantization_config` (or MLX's `quantization`), when there is one.
pub fn read(top: &Map<String, Value>) -> Option<Quantization> {
    // MLX states its scheme under `quantization`, and mlx-lm's `quantize_model` duplicates it as
    // `quantization_config` (no `quant_method`): that duplicate is MLX's too, not an unnamed scheme.
    let copy = top
        .get("quantization_config")
        .is_none_or(|q| q.get("quant_method").is_none());
    let stated = top.get("quantization");
    if let Some(q) = stated.filter(|_| copy) {
        let named = "MLX's quantization".to_owned();
        let scheme = mlx::read(q).map_err(|why| format!("{named}: {why}"));
        return Some(Quantization {
            named,
            scheme,
            own_object_algo: None,
        });
    }
    read_config(top.get("quantization_config")?)
}

/// What the gate names config.json's `quantization_config` when it is ModelOpt's own object (a
/// producer and a `quantization`, no `quant_method`), as ModelOpt's DFlash exporter writes it.
pub const MODELOPT_OBJECT: &str =
    "modelopt (ModelOpt's own object, as its DFlash exporter writes it)";

/// ModelOpt's own statement of its scheme beside config.json.
pub const MODELOPT_FILE: &str = "hf_quant_config.json";

/// `hf_quant_config.json` (its JSON, or why it did not read): ModelOpt's `producer` and
/// `quantization` objects.
pub fn read_modelopt_file(json: Result<Value, String>) -> Quantization {
    let named = format!("modelopt ({MODELOPT_FILE})");
    let scheme = json.and_then(|v| {
        let producer = v.pointer("/producer/name").and_then(Value::as_str);
        match (producer, v.get("quantization"), v.as_object()) {
            // The whole object, so its nesting is read as vLLM reads it.
            (Some("modelopt"), Some(Value::Object(_)), Some(whole)) => vendors::modelopt(whole),
            _ => Err(format!(
                "{MODELOPT_FILE} is not ModelOpt's (producer.name \"modelopt\" and a quantization object)"
            )),
        }
    });
    Quantization {
        scheme: scheme.map_err(|why| format!("{named}: {why}")),
        named,
        own_object_algo: None,
    }
}

/// A `quantization_config` object (config.json's, or the one ModelOpt's `hf_quant_config.json`
/// states).
pub fn read_config(q: &Value) -> Option<Quantization> {
    let Value::Object(q) = q else {
        let named = "an unreadable quantization_config (not an object)".to_owned();
        return Some(Quantization {
            scheme: Err(named.clone()),
            named,
            own_object_algo: None,
        });
    };
    // ModelOpt's DFlash exporter (0.47's `DFlashExporter`) writes hf_quant_config.json's object
    // itself as the config's `quantization_config`: a producer and a `quantization` object, no
    // `quant_method`. vLLM names it ModelOpt's from the producer (by its `quant_algo`: the
    // loaders' rules say which it refuses), and so does the gate.
    if q.get("quant_method").is_none_or(Value::is_null)
        && q.get("producer")
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            == Some("modelopt")
        && q.get("quantization").is_some_and(Value::is_object)
    {
        let named = MODELOPT_OBJECT.to_owned();
        let scheme =
            vendors::modelopt(q).map_err(|why| format!("quantization_config names {named}: {why}"));
        let algo = q
            .get("quantization")
            .and_then(|inner| text(inner.get("quant_algo")));
        return Some(Quantization {
            named,
            scheme,
            own_object_algo: Some(algo.unwrap_or_default()),
        });
    }
    let named: String = match ["quant_method", "format"]
        .iter()
        .find_map(|k| q.get(*k).and_then(Value::as_str))
    {
        Some(n) => n.chars().take(64).collect(),
        None => "an unnamed scheme".to_owned(),
    };
    let scheme = match text(q.get("quant_method")).as_deref() {
        Some("compressed-tensors") => compressed_tensors::read(q),
        Some("fp8") => vendors::hugging_face_fp8(q),
        Some("modelopt") => vendors::modelopt(q),
        Some(m) => Err(format!(
            "quant_method {m:?} is not a scheme the gate decodes"
        )),
        None => Err("no quant_method".to_owned()),
    }
    .map_err(|why| format!("quantization_config names {named}: {why}"));
    Some(Quantization {
        named,
        scheme,
        own_object_algo: None,
    })
}

/// A string value, cut to what a message shows.
fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .map(|s| s.chars().take(64).collect::<String>())
}

/// A JSON value as a message shows it (short).
fn shown(v: Option<&Value>) -> String {
    match v {
        None => "absent".to_owned(),
        Some(v) => v.to_string().chars().take(64).collect(),
    }
}

/// A `[rows, columns]` block (`block_structure`, `weight_block_size`), each a dimension.
fn block(v: &Value, field: &str) -> Result<Fp8Scale, String> {
    let dims = v
        .as_array()
        .map(|a| a.iter().map(Value::as_u64).collect::<Vec<_>>());
    let dimension = |d: &u64| (1..=crate::limits::MAX_DIMENSION).contains(d);
    match dims.as_deref() {
        Some([Some(r), Some(c)]) if dimension(r) && dimension(c) => Ok(Fp8Scale::Block([*r, *c])),
        _ => Err(format!(
            "{field} is {}, not [rows, columns]",
            shown(Some(v))
        )),
    }
}

/// A list of strings (`ignore`, `exclude_modules`, ...): absent or null is empty; at most
/// [`MAX_NAMES`] entries.
fn strings<'v>(v: Option<&'v Value>, field: &str) -> Result<Vec<&'v str>, String> {
    let entries = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(other) => return Err(format!("{field} is {}, not a list", shown(Some(other)))),
    };
    if entries.len() > MAX_NAMES {
        return Err(format!(
            "{field} lists {} entries, more than the {MAX_NAMES} the gate reads",
            entries.len()
        ));
    }
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            e.as_str()
                .ok_or_else(|| format!("{field}[{i}] is {}, not a string", shown(Some(e))))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scheme(ignore: Value) -> Result<Scheme, String> {
        let config = json!({"quantization_config": {
            "quant_method": "compressed-tensors", "format": "pack-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 32}}},
            "ignore": ignore}});
        read(config.as_object().unwrap()).unwrap().scheme
    }

    fn quantized(s: &Scheme, module: &str) -> bool {
        matches!(s.expect(module), Expect::Quantized(..))
    }

    #[test]
    fn a_pattern_matches_from_the_names_start_as_re_match_does() {
        let s = scheme(json!(["re:fc", "lm_head"])).unwrap();
        assert!(!quantized(&s, "fc"));
        assert!(!quantized(&s, "fc.extra"));
        assert!(
            quantized(&s, "layers.0.fc"),
            "re.match anchors at the start only"
        );
        assert!(!quantized(&s, "lm_head"));
        assert!(quantized(&s, "layers.0.mlp.up_proj"));
    }

    #[test]
    fn patterns_are_bounded_in_number_and_refused_when_not_read() {
        let many: Vec<String> = (0..=MAX_PATTERNS).map(|i| format!("re:m{i}")).collect();
        let why = scheme(json!(many)).unwrap_err();
        assert!(why.contains("more than the 256 patterns"), "{why}");
        let why = scheme(json!(["re:(?=x)"])).unwrap_err();
        assert!(
            why.contains("ignore entry") && why.contains("not a pattern"),
            "{why}"
        );
    }

    #[test]
    fn another_scheme_is_named() {
        let config = json!({"quantization_config": {"quant_method": "gptq"}});
        let q = read(config.as_object().unwrap()).unwrap();
        assert_eq!(q.named, "gptq");
        assert!(q.scheme.unwrap_err().contains("\"gptq\""));
        let config = json!({"quantization": {"group_size": 64, "bits": 4, "mode": "turbo"}});
        let q = read(config.as_object().unwrap()).unwrap();
        assert_eq!(q.named, "MLX's quantization");
        assert!(q.scheme.unwrap_err().contains("turbo"));
    }
}
