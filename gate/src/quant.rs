//! A quantized draft's scheme, as its `quantization_config` states it (spec section 17): read from the
//! config, never guessed from the tensors' element types. Only compressed-tensors' `pack-quantized`
//! integer weights (W4A16, W8A16) are read today; any other scheme is named, and the weight checks
//! are UNDECIDED for it.
//!
//! Which modules are quantized is the config's statement: `targets` (a class name, a module name, or
//! `re:` and a regular expression) minus `ignore` (the same). Patterns come from the file, so they are
//! compiled by the `regex` crate, which matches in time linear in the name whatever the pattern, with
//! its compiled size bounded; at most [`MAX_PATTERNS`] of them are compiled.

use serde_json::{Map, Value};
use std::collections::HashSet;

/// The most `re:` patterns one config may hold (targets and ignore together). Each is compiled once
/// and tried against every module: a config of 10^5 patterns would cost seconds for nothing a writer
/// produces (llm-compressor writes a handful).
pub const MAX_PATTERNS: usize = 256;

/// The most bytes a compiled pattern may take (the `regex` crate's size limit), and its lazy DFA's
/// cache: a pattern built to blow up when compiled is refused, not built.
const PATTERN_BYTES: usize = 1 << 20;

/// The bit widths `pack-quantized` packs into 32-bit words that this reader decodes.
const BITS: [u32; 2] = [4, 8];

/// What `quantization_config` says, as far as the gate reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantization {
    /// The scheme as the config names it (`quant_method`, else `format`), for messages.
    pub named: String,
    /// The scheme, or why the gate does not read it (a sentence naming what it is).
    pub scheme: Result<PackQuantized, String>,
}

/// compressed-tensors' `pack-quantized` integer weights: `X.weight_packed`, `X.weight_scale`,
/// `X.weight_shape` and, asymmetric, `X.weight_zero_point` in place of `X.weight`.
#[derive(Clone, Debug, PartialEq)]
pub struct PackQuantized {
    pub bits: u32,
    /// The group size along K; `None` for `strategy: channel` (one scale per row).
    pub group: Option<u64>,
    pub symmetric: bool,
    targets: Matchers,
    ignore: Matchers,
}

/// A list of `targets` or `ignore` entries: names and class names looked up whole, patterns tried
/// in turn.
#[derive(Clone, Debug, Default)]
struct Matchers {
    names: HashSet<String>,
    patterns: Vec<(String, regex::Regex)>,
}

impl PackQuantized {
    /// Whether the config quantizes `module` (a Linear's name as stored, without `.weight`): the
    /// entry that says so, or why not.
    pub fn quantizes(&self, module: &str) -> Result<String, String> {
        let Some(target) = self.targets.first_match(module, true) else {
            return Err("no entry of quantization_config's targets matches it".to_owned());
        };
        match self.ignore.first_match(module, true) {
            Some(entry) => Err(format!("quantization_config's ignore lists it ({entry})")),
            None => Ok(format!("targets {target}")),
        }
    }

    /// `W4A16 group 128`, `W8A16 channel`, and whether it is asymmetric.
    pub fn describe(&self) -> String {
        let grouping = match self.group {
            Some(g) => format!("group {g}"),
            None => "channel".to_owned(),
        };
        let asymmetric = if self.symmetric { "" } else { ", asymmetric" };
        format!(
            "compressed-tensors pack-quantized W{}A16 {grouping}{asymmetric}",
            self.bits
        )
    }
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
    /// The first entry that matches `module`: its name, the class `Linear`, or a pattern matching from
    /// the name's start (Python's `re.match`, as compressed-tensors calls it).
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
}

/// The config's `quantization_config` (or MLX's `quantization`), when there is one.
pub fn read(top: &Map<String, Value>) -> Option<Quantization> {
    // MLX states its scheme under `quantization`, and mlx-lm's `quantize_model` duplicates it as
    // `quantization_config` (no `quant_method`): that duplicate is MLX's too, not an unnamed scheme.
    let mlx = top.contains_key("quantization")
        && top
            .get("quantization_config")
            .is_none_or(|q| q.get("quant_method").is_none());
    let q = match top.get("quantization_config") {
        Some(q) if !mlx => q,
        _ => {
            top.get("quantization")?;
            let named = "MLX's quantization".to_owned();
            return Some(Quantization {
                scheme: Err(format!(
                    "config.json names {named}, which the gate does not decode"
                )),
                named,
            });
        }
    };
    let Value::Object(q) = q else {
        let named = "an unreadable quantization_config (not an object)".to_owned();
        return Some(Quantization {
            scheme: Err(named.clone()),
            named,
        });
    };
    let named: String = match ["quant_method", "format"]
        .iter()
        .find_map(|k| q.get(*k).and_then(Value::as_str))
    {
        Some(n) => n.chars().take(64).collect(),
        None => "an unnamed scheme".to_owned(),
    };
    let scheme =
        pack_quantized(q).map_err(|why| format!("quantization_config names {named}: {why}"));
    Some(Quantization { named, scheme })
}

/// Reads a compressed-tensors `pack-quantized` config, or says what it is instead.
fn pack_quantized(q: &Map<String, Value>) -> Result<PackQuantized, String> {
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(|s| s.chars().take(64).collect::<String>())
    };
    match text(q.get("quant_method")) {
        Some(m) if m == "compressed-tensors" => {}
        Some(m) => {
            return Err(format!(
                "quant_method {m:?} is not a scheme the gate decodes"
            ))
        }
        None => return Err("no quant_method".to_owned()),
    }
    let Some(Value::Object(groups)) = q.get("config_groups") else {
        return Err("config_groups is absent or not an object".to_owned());
    };
    let mut groups = groups.iter();
    let (Some((group_name, group)), None) = (groups.next(), groups.next()) else {
        return Err(format!(
            "config_groups holds {} groups; the gate reads a config of exactly one",
            q["config_groups"].as_object().map_or(0, Map::len)
        ));
    };
    let format = text(group.get("format")).or_else(|| text(q.get("format")));
    match format.as_deref() {
        Some("pack-quantized") => {}
        Some(f) => {
            return Err(format!(
                "format {f:?} is not one the gate decodes (it reads pack-quantized)"
            ))
        }
        None => return Err("no format".to_owned()),
    }
    if group.get("input_activations").is_some_and(|a| !a.is_null()) {
        return Err(format!("config_groups.{group_name}.input_activations quantizes activations, which the gate does not read"));
    }
    let Some(Value::Object(w)) = group.get("weights") else {
        return Err(format!(
            "config_groups.{group_name}.weights is absent or not an object"
        ));
    };
    let field = |k: &str| format!("config_groups.{group_name}.weights.{k}");
    match text(w.get("type")).as_deref() {
        Some("int") => {}
        other => return Err(format!("{} is {other:?}, not \"int\"", field("type"))),
    }
    let bits = match w.get("num_bits").and_then(Value::as_u64) {
        Some(b) if BITS.contains(&(b as u32)) && b <= 8 => b as u32,
        _ => {
            return Err(format!(
                "{} is {}, not 4 or 8",
                field("num_bits"),
                shown(w.get("num_bits"))
            ))
        }
    };
    let symmetric = match w.get("symmetric") {
        Some(Value::Bool(b)) => *b,
        other => {
            return Err(format!(
                "{} is {}, not true or false",
                field("symmetric"),
                shown(other)
            ))
        }
    };
    let group_size = match text(w.get("strategy")).as_deref() {
        Some("group") => match w.get("group_size").and_then(Value::as_u64) {
            Some(g) if 1 <= g && g <= crate::limits::MAX_DIMENSION => Some(g),
            _ => {
                return Err(format!(
                    "{} is {}, not a group size from 1 to {}",
                    field("group_size"),
                    shown(w.get("group_size")),
                    crate::limits::MAX_DIMENSION
                ))
            }
        },
        Some("channel") => None,
        other => {
            return Err(format!(
                "{} is {other:?}, not \"group\" or \"channel\"",
                field("strategy")
            ))
        }
    };
    let mut budget = MAX_PATTERNS;
    let targets = matchers(
        group.get("targets"),
        &format!("config_groups.{group_name}.targets"),
        &mut budget,
    )?;
    let ignore = matchers(q.get("ignore"), "ignore", &mut budget)?;
    Ok(PackQuantized {
        bits,
        group: group_size,
        symmetric,
        targets,
        ignore,
    })
}

/// A JSON value as a message shows it (short).
fn shown(v: Option<&Value>) -> String {
    match v {
        None => "absent".to_owned(),
        Some(v) => v.to_string().chars().take(64).collect(),
    }
}

/// A `targets` or `ignore` list: names, and `re:` patterns compiled with bounded size, at most
/// `budget` patterns in all.
fn matchers(v: Option<&Value>, field: &str, budget: &mut usize) -> Result<Matchers, String> {
    let entries = match v {
        None | Some(Value::Null) => return Ok(Matchers::default()),
        Some(Value::Array(a)) => a,
        Some(other) => return Err(format!("{field} is {}, not a list", shown(Some(other)))),
    };
    let mut out = Matchers::default();
    for (i, e) in entries.iter().enumerate() {
        let Some(s) = e.as_str() else {
            return Err(format!("{field}[{i}] is {}, not a string", shown(Some(e))));
        };
        let Some(pattern) = s.strip_prefix("re:") else {
            out.names.insert(s.to_owned());
            continue;
        };
        if *budget == 0 {
            return Err(format!(
                "{field} holds more than the {MAX_PATTERNS} re: patterns the gate compiles"
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
                    "{field}[{i}] ({}) is not a pattern the gate reads: {first}",
                    crate::escape::escape(&s.chars().take(64).collect::<String>())
                )
            })?;
        out.patterns.push((s.to_owned(), re));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scheme(ignore: Value) -> Result<PackQuantized, String> {
        let config = json!({"quantization_config": {
            "quant_method": "compressed-tensors", "format": "pack-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 32}}},
            "ignore": ignore}});
        read(config.as_object().unwrap()).unwrap().scheme
    }

    #[test]
    fn a_pattern_matches_from_the_names_start_as_re_match_does() {
        let s = scheme(json!(["re:fc", "lm_head"])).unwrap();
        assert!(s.quantizes("fc").is_err());
        assert!(s.quantizes("fc.extra").is_err());
        assert!(
            s.quantizes("layers.0.fc").is_ok(),
            "re.match anchors at the start only"
        );
        assert!(s.quantizes("lm_head").is_err());
        assert!(s.quantizes("layers.0.mlp.up_proj").is_ok());
    }

    #[test]
    fn patterns_are_bounded_in_number_and_refused_when_not_read() {
        let many: Vec<String> = (0..=MAX_PATTERNS).map(|i| format!("re:m{i}")).collect();
        let why = scheme(json!(many)).unwrap_err();
        assert!(why.contains("more than the 256 re: patterns"), "{why}");
        let why = scheme(json!(["re:(?=x)"])).unwrap_err();
        assert!(
            why.contains("ignore[0]") && why.contains("not a pattern"),
            "{why}"
        );
    }

    #[test]
    fn another_scheme_is_named() {
        let config = json!({"quantization_config": {"quant_method": "fp8"}});
        let q = read(config.as_object().unwrap()).unwrap();
        assert_eq!(q.named, "fp8");
        assert!(q.scheme.unwrap_err().contains("\"fp8\""));
        let config = json!({"quantization": {"group_size": 64, "bits": 4}});
        assert!(read(config.as_object().unwrap()).unwrap().scheme.is_err());
    }
}
