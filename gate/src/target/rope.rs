//! `target.rope`: the draft's RoPE (base, type and scaling) is the target's. The draft attends over
//! the target's positions, so a base read from the wrong place loads cleanly and collapses
//! acceptance.
//!
//! Each side is read the one canonical way ([`Canonical`]): the base in `rope_parameters.rope_theta`
//! else `rope_theta`, the scaling fields in `rope_parameters` else `rope_scaling`, a type of
//! `default` where none is stated; a target's config at top level, else its `text_config`; a GGUF's
//! `{arch}.rope.freq_base` and `{arch}.rope.scaling.*`. So a base moved into `rope_parameters` on one
//! side only is the same base.

use super::ROPE;
use crate::config::canonical::{same, shown, Canonical, Reading};
use crate::evidence::TargetRope;
use crate::gguf::{Header, Value as GgufValue};
use crate::report::Check;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One side's RoPE, by canonical name (`rope_theta`, `rope.rope_type`, `rope.factor`, ...): each value
/// and where it was read.
pub type Rope = BTreeMap<String, Reading>;

/// The RoPE fields of a config object (a draft's config, or a target's text model), each `at` prefixed
/// by `prefix` (`text_config.` for a multimodal target's).
pub fn of_config(config: &Map<String, Value>, prefix: &str) -> Rope {
    of_canonical(&Canonical::read(config), prefix)
}

/// The RoPE fields of a config already read (a draft's, whose reading the draft config holds).
pub fn of_canonical(canonical: &Canonical, prefix: &str) -> Rope {
    canonical
        .fields
        .iter()
        .filter(|(name, _)| *name == "rope_theta" || name.starts_with("rope."))
        .map(|(name, r)| {
            let mut r = r.clone();
            if !r.defaulted {
                r.at = format!("{prefix}{}", r.at);
            }
            (name.clone(), r)
        })
        .collect()
}

/// A target's config: the top level when it states any RoPE field, else its `text_config` (where a
/// multimodal target keeps its language model's).
pub fn of_target_config(config: &Value) -> Rope {
    let Some(top) = config.as_object() else {
        return Rope::new();
    };
    let states = |m: &Map<String, Value>| {
        ["rope_theta", "rope_parameters", "rope_scaling"]
            .iter()
            .any(|k| m.get(*k).is_some_and(|v| !v.is_null()))
    };
    match top.get("text_config") {
        Some(Value::Object(text)) if !states(top) && states(text) => {
            of_config(text, "text_config.")
        }
        _ => of_config(top, ""),
    }
}

/// A GGUF's RoPE keys under architecture `arch`: `{arch}.rope.freq_base` as the base,
/// `{arch}.rope.scaling.type` as the type (llama.cpp's `none` is no scaling, `default`) and
/// `{arch}.rope.scaling.factor` as the factor.
pub fn of_gguf(header: &Header, arch: &str) -> Rope {
    let mut rope = Rope::new();
    let mut read = |name: &str, key: String, value: Option<Value>| {
        if let Some(value) = value {
            rope.insert(
                name.to_owned(),
                Reading {
                    value,
                    at: key,
                    defaulted: false,
                },
            );
        }
    };
    let get = |key: &str| match header.get(key).map(|k| &k.value) {
        Some(GgufValue::Float(f)) => serde_json::Number::from_f64(*f).map(Value::Number),
        Some(GgufValue::Integer(i)) => i64::try_from(*i).ok().map(Value::from),
        Some(GgufValue::String(s)) if s == "none" => Some(Value::from("default")),
        Some(GgufValue::String(s)) => Some(Value::from(s.as_str())),
        Some(GgufValue::Bool(b)) => Some(Value::Bool(*b)),
        _ => None,
    };
    let base = format!("{arch}.rope.freq_base");
    read("rope_theta", base.clone(), get(&base));
    let kind = format!("{arch}.rope.scaling.type");
    read("rope.rope_type", kind.clone(), get(&kind));
    let factor = format!("{arch}.rope.scaling.factor");
    read("rope.factor", factor.clone(), get(&factor));
    rope.entry("rope.rope_type".to_owned()).or_insert(Reading {
        value: Value::from("default"),
        at: "default: no scaling stated".to_owned(),
        defaulted: true,
    });
    rope
}

/// Two values of one RoPE field are equal: numbers compared as `f64` once read, and equal when they
/// round to the same `f32`, the width a GGUF stores them in (its f32 1000000.0 is a config's JSON
/// 1000000, and a config's 1e-6 the f32 a converter wrote from it); NaN equals nothing. Any other
/// value as the canonical reading compares it.
fn equal(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x as f32) == (y as f32),
        _ => same(a, b),
    }
}

/// A reading for a message: the value, and where it was read.
fn named(r: &Reading) -> String {
    format!("{} ({})", shown(&r.value), r.at)
}

/// `target.rope`: every RoPE field either side states, compared. A difference FAILs naming both
/// values and where each was read; a field one side does not state (the base, or a scaling field
/// beside an equal type) is UNDECIDED naming it.
pub(super) fn check(draft: &Rope, target: &Rope, draft_in: &str, target_in: &str) -> Check {
    let mut names: Vec<&String> = draft.keys().chain(target.keys()).collect();
    names.sort();
    names.dedup();
    let mut differing = Vec::new();
    let mut absent = Vec::new();
    let mut compared = Vec::new();
    for name in names {
        match (draft.get(name), target.get(name)) {
            (Some(d), Some(t)) if equal(&d.value, &t.value) => compared.push(name.clone()),
            (Some(d), Some(t)) => differing.push(format!(
                "{name}: the draft's {}, the target's {}",
                named(d),
                named(t)
            )),
            (Some(d), None) => absent.push(format!(
                "{name} (the draft's is {}; {target_in} states none)",
                named(d)
            )),
            (None, Some(t)) => absent.push(format!(
                "{name} (the target's is {}; {draft_in} states none)",
                named(t)
            )),
            (None, None) => {}
        }
    }
    if !draft.contains_key("rope_theta") && !target.contains_key("rope_theta") {
        absent.push(format!(
            "rope_theta ({draft_in} and {target_in} state no RoPE base)"
        ));
    }
    let evidence = TargetRope {
        compared: compared.clone(),
        differing: differing.clone(),
        absent: absent.clone(),
    };
    let check = if !differing.is_empty() {
        Check::fail(
            ROPE,
            format!(
                "the draft's RoPE differs from the target's: {}",
                differing.join("; ")
            ),
        )
    } else if !absent.is_empty() {
        Check::undecided(
            ROPE,
            format!(
                "cannot decide whether the draft's RoPE is the target's: not stated by one side: {}",
                absent.join("; ")
            ),
        )
    } else {
        let base = draft.get("rope_theta").map(named).unwrap_or_default();
        Check::pass(
            ROPE,
            format!(
                "the draft's RoPE is the target's ({}, numbers equal as f32): base {base}, the target's {}",
                compared.join(", "),
                target.get("rope_theta").map(named).unwrap_or_default()
            ),
        )
    };
    check.with_evidence(evidence)
}
