//! `source.config`: the source checkpoint's config against the package's, field by field.
//!
//! Every field either config states is compared, except the few in [`SKIPPED`], which a checkpoint
//! and the package converted from it may state differently without changing the model; those are
//! named in the report, never passed over silently. A field that changes the forward pass and that
//! the draft reader never looks at (`rope_theta`, `hidden_act`, `tie_word_embeddings`, ...) is a
//! field a loader of either file may read, so it counts like the rest.
//!
//! Compared as JSON values, numbers by value: `16`, `16.0` and `1.6e1` are one number (JSON has one
//! number type, and a publisher's serializer chooses the spelling), while a converter that rounds a
//! field, or writes `"16"`, is named. Integers compare exactly, beyond what an f64 holds. Objects
//! (`rope_scaling`, `dflash_config`) compare field by field, named with dotted paths. The fields the
//! draft reader takes from the top level or from `dflash_config` ([`EITHER`], spec sections 5 and 10)
//! are named without the prefix wherever they are, so moving one between the two is no difference;
//! a config that states one in both places with different values is named as differing. A field
//! only one config states cannot be compared: the check is then UNDECIDED, naming it and the side
//! that states it, unless another field differs.

use crate::report::Check;
use serde_json::{Map, Number, Value};
use std::collections::BTreeMap;

pub const ID: &str = crate::check_id::CheckId::SOURCE_CONFIG;

/// Fields a checkpoint and its package may state differently, each with why; not compared, and named
/// in the report whenever either config states them.
pub const SKIPPED: [(&str, &str); 5] = [
    (
        "transformers_version",
        "the version of the library that wrote the file, not a property of the model",
    ),
    (
        "torch_dtype",
        "the checkpoint's storage type; a package stores q4_1 grids and bf16 whatever it says, and source.bf16 and source.q4_1 compare the values",
    ),
    (
        "dtype",
        "torch_dtype under the name transformers writes since 4.56",
    ),
    (
        "_name_or_path",
        "the directory the writer loaded the model from",
    ),
    (
        "quantization_config",
        "how the package was quantized; its grids are proven by the tile checks and source.q4_1, not by what the config says of them",
    ),
];

/// The fields the draft reader looks for at the top level and in `dflash_config` alike.
const EITHER: [&str; 12] = [
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
    "is_causal",
    "layer_types",
];

/// A field's path from the top level (`["rope_scaling", "factor"]`); a key holding a dot is one
/// segment, so `{"a.b": 1}` is not `{"a": {"b": 1}}`.
type Path = Vec<String>;

fn dotted(path: &Path) -> String {
    let segments: Vec<String> = path
        .iter()
        .map(|s| {
            if s.contains('.') || s.is_empty() {
                Value::from(s.as_str()).to_string()
            } else {
                s.clone()
            }
        })
        .collect();
    segments.join(".")
}

/// One config's fields, flattened.
#[derive(Default)]
struct Fields<'v> {
    values: BTreeMap<Path, &'v Value>,
    /// Skipped fields it states, by dotted name.
    skipped: Vec<String>,
    /// Fields of [`EITHER`] stated in both places with different values.
    conflicts: Vec<String>,
}

impl<'v> Fields<'v> {
    fn of(config: &'v Map<String, Value>, whose: &str) -> Fields<'v> {
        let mut fields = Fields::default();
        let nested = match config.get("dflash_config") {
            Some(Value::Object(m)) => Some(m),
            _ => None,
        };
        for (key, value) in config {
            if key == "dflash_config" && nested.is_some() {
                continue;
            }
            fields.add(vec![key.clone()], value);
        }
        for (key, value) in nested.into_iter().flatten() {
            if !EITHER.contains(&key.as_str()) {
                fields.add(vec!["dflash_config".to_owned(), key.clone()], value);
                continue;
            }
            match config.get(key) {
                None => fields.add(vec![key.clone()], value),
                Some(top) if same(top, value) => {}
                Some(top) => fields.conflicts.push(format!(
                    "{key}: the {whose} config states {} at the top level and {} in dflash_config",
                    shown(Some(top)),
                    shown(Some(value))
                )),
            }
        }
        fields
    }

    fn add(&mut self, path: Path, value: &'v Value) {
        let name = dotted(&path);
        if SKIPPED.iter().any(|(s, _)| *s == name) {
            self.skipped.push(name);
            return;
        }
        match value {
            Value::Object(m) if !m.is_empty() => {
                for (key, inner) in m {
                    let mut deeper = path.clone();
                    deeper.push(key.clone());
                    self.add(deeper, inner);
                }
            }
            _ => {
                self.values.insert(path, value);
            }
        }
    }
}

fn parse(bytes: &[u8], whose: &str) -> Result<Map<String, Value>, String> {
    match crate::strict_json::parse(bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(format!("the {whose} config.json is not a JSON object")),
        Err(e) => Err(format!("the {whose} config.json is not valid JSON: {e}")),
    }
}

/// [`compare`] from the package config's bytes, for the tests of the comparison itself.
#[cfg(test)]
fn check(package: &[u8], source: &[u8]) -> Check {
    match parse(package, "package's") {
        Ok(package) => compare(&package, source),
        Err(why) => Check::fail(ID, why),
    }
}

/// The package's config (the object the evaluation parsed) against the source's config.json.
pub fn compare(package: &Map<String, Value>, source: &[u8]) -> Check {
    let source = match parse(source, "source's") {
        Ok(s) => s,
        Err(why) => return Check::fail(ID, why),
    };
    let (p, s) = (
        Fields::of(package, "package's"),
        Fields::of(&source, "source's"),
    );
    let mut names: Vec<&Path> = p.values.keys().chain(s.values.keys()).collect();
    names.sort();
    names.dedup();
    let (mut equal, mut differing, mut one_sided) = (Vec::new(), Vec::new(), Vec::new());
    differing.extend(p.conflicts.iter().chain(&s.conflicts).cloned());
    for path in &names {
        let field = dotted(path);
        match (p.values.get(*path), s.values.get(*path)) {
            (Some(p), Some(s)) if same(p, s) => equal.push(field),
            (Some(p), Some(s)) => differing.push(format!(
                "{field}: package {}, source {}",
                shown(Some(p)),
                shown(Some(s))
            )),
            (Some(_), None) => one_sided.push(format!("{field} (stated by the package only)")),
            (None, Some(_)) => one_sided.push(format!("{field} (stated by the source only)")),
            (None, None) => {}
        }
    }
    let mut skipped: Vec<String> = p.skipped.into_iter().chain(s.skipped).collect();
    skipped.sort();
    skipped.dedup();
    let not_compared = if skipped.is_empty() {
        String::new()
    } else {
        format!(
            "; not compared, as a checkpoint and its package may state them differently: {}",
            skipped.join(", ")
        )
    };
    let evidence = crate::evidence::SourceConfig {
        fields: names.iter().map(|p| dotted(p)).collect(),
        compared: equal.clone(),
        differing: differing.clone(),
        one_sided: one_sided.clone(),
        skipped: skipped.clone(),
        undecided: None,
    };
    let check = if !differing.is_empty() {
        Check::fail(
            ID,
            format!(
                "the source's config differs from the package's: {}{not_compared}",
                differing.join("; ")
            ),
        )
    } else if !one_sided.is_empty() {
        Check::undecided(
            ID,
            format!(
                "cannot decide: {} stated by one config only: {}{not_compared}",
                match one_sided.len() {
                    1 => "a field is".to_owned(),
                    n => format!("{n} fields are"),
                },
                one_sided.join("; ")
            ),
        )
    } else {
        Check::pass(
            ID,
            format!(
                "the source's config states every one of the package's {} fields alike, numbers by value{not_compared}",
                equal.len()
            ),
        )
    };
    check.with_evidence(evidence)
}

/// JSON equality with numbers compared by value: `16 == 16.0`, `[1, 2] == [1.0, 2.0]`, `16 != "16"`.
fn same(a: &Value, b: &Value) -> bool {
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
/// float, which an f64 comparison would call equal), anything else as f64.
fn same_number(x: &Number, y: &Number) -> bool {
    let integer = |n: &Number| {
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
        (None, None) => x.as_f64().is_some() && x.as_f64() == y.as_f64(),
    }
}

fn shown(v: Option<&Value>) -> String {
    match v {
        None => "absent".to_owned(),
        Some(v) => {
            let text = v.to_string();
            if text.chars().count() > 80 {
                format!("{}...", text.chars().take(77).collect::<String>())
            } else {
                text
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Outcome;
    use serde_json::json;

    #[test]
    fn fields_compare_where_the_reader_finds_them() {
        let package = br#"{"hidden_size": 64, "dflash_config": {"target_layer_ids": [1, 2]}, "block_size": 8}"#;
        let moved = br#"{"hidden_size": 64, "target_layer_ids": [1, 2], "dflash_config": {"block_size": 8}}"#;
        assert_eq!(check(package, moved).outcome, Outcome::Pass);
        let other = br#"{"hidden_size": 64, "target_layer_ids": [1, 3], "block_size": 8}"#;
        let c = check(package, other);
        assert_eq!(c.outcome, Outcome::Fail);
        assert!(
            c.message
                .contains("target_layer_ids: package [1,2], source [1,3]"),
            "{}",
            c.message
        );
        assert_eq!(check(package, b"{").outcome, Outcome::Fail);
    }

    /// A change to one config's top-level object.
    type Edit = dyn Fn(&mut Map<String, Value>);

    /// `c` has `outcome` and its message holds every one of `says`.
    fn says(c: &Check, outcome: Outcome, says: &[&str]) {
        assert_eq!(c.outcome, outcome, "{}", c.message);
        for s in says {
            assert!(c.message.contains(s), "{s}: {}", c.message);
        }
    }

    #[test]
    fn every_field_is_compared_but_the_named_few() {
        let package = br#"{"hidden_size": 64, "rope_theta": 1000000.0, "hidden_act": "silu", "tie_word_embeddings": false, "is_causal": false, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}, "transformers_version": "4.57.1", "torch_dtype": "bfloat16", "quantization_config": {"bits": 4}}"#;
        let base: Value = serde_json::from_slice(package).expect("json");
        let with = |edit: &Edit| {
            let mut v = base.clone();
            edit(v.as_object_mut().expect("object"));
            check(package, v.to_string().as_bytes())
        };
        // The writer's version and the storage type differ, the quantizer's record is the package's
        // alone: named, not compared.
        let c = with(&|m| {
            m.insert("transformers_version".into(), json!("4.51.0"));
            m.insert("torch_dtype".into(), json!("float32"));
            m.remove("quantization_config");
        });
        says(&c, Outcome::Pass, &["every one of the package's 7 fields alike", "may state them differently: quantization_config, torch_dtype, transformers_version"]);
        let edits: [(&Edit, &str); 5] = [
            (
                &|m| drop(m.insert("rope_theta".into(), json!(500000))),
                "rope_theta: package 1000000.0, source 500000",
            ),
            (
                &|m| drop(m.insert("hidden_act".into(), json!("gelu"))),
                r#"hidden_act: package "silu", source "gelu""#,
            ),
            (
                &|m| drop(m.insert("tie_word_embeddings".into(), json!(true))),
                "tie_word_embeddings: package false, source true",
            ),
            (
                &|m| drop(m.insert("is_causal".into(), json!(true))),
                "is_causal: package false, source true",
            ),
            (
                &|m| m["rope_scaling"]["factor"] = json!(8.0),
                "rope_scaling.factor: package 4.0, source 8.0",
            ),
        ];
        for (edit, named) in edits {
            says(&with(edit), Outcome::Fail, &[named]);
        }
        // A field only one side states, however deep, is named with its side.
        let c = with(&|m| {
            m.insert("max_position_embeddings".into(), json!(40960));
            m["rope_scaling"]
                .as_object_mut()
                .expect("object")
                .remove("rope_type");
        });
        says(
            &c,
            Outcome::Undecided,
            &[
                "max_position_embeddings (stated by the source only)",
                "rope_scaling.rope_type (stated by the package only)",
            ],
        );
    }

    #[test]
    fn a_field_the_reader_takes_from_either_place_may_move_but_not_disagree() {
        let package = br#"{"is_causal": false, "dflash_config": {"block_size": 8, "other": 1}}"#;
        let moved = br#"{"block_size": 8, "dflash_config": {"is_causal": false, "other": 1.0}}"#;
        says(&check(package, moved), Outcome::Pass, &[]);
        // A field the reader takes only from dflash_config is not the top level's.
        let flat = br#"{"is_causal": false, "block_size": 8, "other": 1}"#;
        says(
            &check(package, flat),
            Outcome::Undecided,
            &["dflash_config.other (stated by the package only)"],
        );
        let both = br#"{"is_causal": false, "block_size": 8, "dflash_config": {"block_size": 16, "other": 1}}"#;
        says(
            &check(package, both),
            Outcome::Fail,
            &["block_size: the source's config states 8 at the top level and 16 in dflash_config"],
        );
        // A key holding a dot is not a path.
        let dotted = check(br#"{"a": {"b": 1}}"#, br#"{"a.b": 1}"#);
        says(
            &dotted,
            Outcome::Undecided,
            &[r#""a.b" (stated by the source only)"#],
        );
    }

    #[test]
    fn numbers_compare_by_value_and_a_field_one_side_states_is_undecided() {
        let package = br#"{"embedding_scale": 16.0, "rms_norm_eps": 1e-6, "target_layer_ids": [1, 2], "vocab_size": 9007199254740993}"#;
        let respelled = br#"{"embedding_scale": 16, "rms_norm_eps": 0.000001, "target_layer_ids": [1.0, 2e0], "vocab_size": 9007199254740993}"#;
        let c = check(package, respelled);
        assert_eq!(c.outcome, Outcome::Pass, "{}", c.message);
        // Rounded, retyped, or an integer an f64 cannot tell from its neighbour: named.
        for (source, named) in [
            (
                br#"{"embedding_scale": 16.5}"#.as_slice(),
                "embedding_scale",
            ),
            (br#"{"embedding_scale": "16"}"#, "embedding_scale"),
            (br#"{"vocab_size": 9007199254740992.0}"#, "vocab_size"),
            (br#"{"target_layer_ids": [1, 2, 3]}"#, "target_layer_ids"),
        ] {
            let mut merged: Value = serde_json::from_slice(respelled).expect("json");
            let over: Value = serde_json::from_slice(source).expect("json");
            for (k, v) in over.as_object().expect("object") {
                merged[k] = v.clone();
            }
            let c = check(package, merged.to_string().as_bytes());
            assert_eq!(c.outcome, Outcome::Fail, "{}", c.message);
            assert!(
                c.message.contains(&format!("{named}: package")),
                "{}",
                c.message
            );
        }
        let c = check(
            package,
            br#"{"embedding_scale": 16, "rms_norm_eps": 1e-6, "target_layer_ids": [1, 2]}"#,
        );
        assert_eq!(c.outcome, Outcome::Undecided, "{}", c.message);
        assert!(
            c.message
                .contains("vocab_size (stated by the package only)"),
            "{}",
            c.message
        );
        let c = check(
            br#"{"hidden_size": 64}"#,
            br#"{"hidden_size": 64, "block_size": 8}"#,
        );
        assert_eq!(c.outcome, Outcome::Undecided, "{}", c.message);
        assert!(
            c.message.contains("block_size (stated by the source only)"),
            "{}",
            c.message
        );
    }
}
