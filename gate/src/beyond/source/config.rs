//! `source.config`: the source checkpoint's config against the package's, field by field.
//!
//! Compared as JSON values, numbers by value: `16`, `16.0` and `1.6e1` are one number (JSON has one
//! number type, and a publisher's serializer chooses the spelling), while a converter that rounds a
//! field, or writes `"16"`, is named. Integers compare exactly, beyond what an f64 holds. Fields are
//! looked up where the draft reader looks for them (top level or `dflash_config`, spec section 5), so
//! moving a field between the two is no difference. A field only one config states cannot be compared:
//! the check is then UNDECIDED, naming it, unless another field differs.

use crate::report::Check;
use serde_json::{json, Number, Value};

pub const ID: &str = "source.config";

/// (field, read `dflash_config` first) — the geometry and DFlash fields of spec sections 5 and 10.
const FIELDS: [(&str, bool); 21] = [
    ("hidden_size", false),
    ("num_hidden_layers", false),
    ("num_attention_heads", false),
    ("num_key_value_heads", false),
    ("head_dim", false),
    ("intermediate_size", false),
    ("vocab_size", false),
    ("block_size", false),
    ("target_layer_ids", true),
    ("mask_token_id", true),
    ("num_target_layers", false),
    ("sliding_window", false),
    ("embedding_scale", false),
    ("layer_types", false),
    ("conv_kernel_size", true),
    ("conv_group_size", true),
    ("selector_rank", true),
    ("selector_top_k", true),
    ("output_multiplier", true),
    ("final_logit_softcapping", true),
    ("rms_norm_eps", false),
];

fn lookup<'v>(config: &'v Value, field: &str, nested_first: bool) -> Option<&'v Value> {
    let top = config.get(field);
    let nested = config.get("dflash_config").and_then(|d| d.get(field));
    if nested_first {
        nested.or(top)
    } else {
        top.or(nested)
    }
}

pub fn check(package: &[u8], source: &[u8]) -> Check {
    let parse = |bytes: &[u8], whose: &str| match crate::strict_json::parse(bytes) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(format!("the {whose} config.json is not a JSON object")),
        Err(e) => Err(format!("the {whose} config.json is not valid JSON: {e}")),
    };
    let (package, source) = match (parse(package, "package's"), parse(source, "source's")) {
        (Ok(p), Ok(s)) => (p, s),
        (Err(why), _) | (_, Err(why)) => return Check::fail(ID, why),
    };
    let (mut equal, mut differing, mut one_sided) = (Vec::new(), Vec::new(), Vec::new());
    for (field, nested_first) in FIELDS {
        let (p, s) = (
            lookup(&package, field, nested_first),
            lookup(&source, field, nested_first),
        );
        match (p, s) {
            (None, None) => {}
            (Some(p), Some(s)) if same(p, s) => equal.push(field),
            (Some(_), Some(_)) => differing.push(format!(
                "{field}: package {}, source {}",
                shown(p),
                shown(s)
            )),
            (Some(_), None) => one_sided.push(format!("{field} (stated by the package only)")),
            (None, Some(_)) => one_sided.push(format!("{field} (stated by the source only)")),
        }
    }
    let evidence = json!({
        "fields": FIELDS.map(|(f, _)| f),
        "compared": equal,
        "differing": differing,
        "one_sided": one_sided,
    });
    let check = if !differing.is_empty() {
        Check::fail(
            ID,
            format!(
                "the source's config differs from the package's: {}",
                differing.join("; ")
            ),
        )
    } else if !one_sided.is_empty() {
        Check::undecided(
            ID,
            format!(
                "cannot decide: {} stated by one config only: {}",
                match one_sided.len() {
                    1 => "a compared field is".to_owned(),
                    n => format!("{n} compared fields are"),
                },
                one_sided.join("; ")
            ),
        )
    } else {
        Check::pass(
            ID,
            format!(
                "the source's config states the package's {} geometry and DFlash fields (of the {} compared when stated)",
                equal.len(),
                FIELDS.len()
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
