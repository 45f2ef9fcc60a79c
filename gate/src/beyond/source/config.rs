//! `source.config`: the source checkpoint's config against the package's, field by field.
//!
//! Compared as the JSON each file states (a number stays the number written), so a converter that
//! rounds or retypes a field is named; fields are looked up where the draft reader looks for them
//! (top level or `dflash_config`, spec section 5), so moving a field between the two is no difference.

use crate::report::Check;
use serde_json::{json, Value};

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
    let mut differing = Vec::new();
    let mut compared = Vec::new();
    for (field, nested_first) in FIELDS {
        let (p, s) = (
            lookup(&package, field, nested_first),
            lookup(&source, field, nested_first),
        );
        match (p, s) {
            (None, None) => {}
            (Some(p), Some(s)) if p == s => compared.push(field),
            (p, s) => differing.push(format!(
                "{field}: package {}, source {}",
                shown(p),
                shown(s)
            )),
        }
    }
    let evidence = json!({ "compared": compared, "differing": differing });
    if differing.is_empty() {
        Check::pass(
            ID,
            format!(
                "the source's config states the package's {} geometry and DFlash fields",
                compared.len()
            ),
        )
        .with_evidence(evidence)
    } else {
        Check::fail(
            ID,
            format!(
                "the source's config differs from the package's: {}",
                differing.join("; ")
            ),
        )
        .with_evidence(evidence)
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
}
