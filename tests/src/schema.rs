//! Validates JSON documents against `schema/report.schema.json`, and against its strict copy.
//!
//! A small checker for the subset of JSON Schema (2020-12) that file uses, rather than a validator
//! crate: the subset is a screenful, and a keyword the checker does not know is an error, never
//! silently ignored, so the schema cannot promise more than is checked.
//!
//! The published schema is open (a reader of version 3 must accept a field or a check id a later
//! gate adds within the version). The project's own reports are held to [`strict`], made from it by
//! closing every object and every check id, rather than to a second committed file: one file to edit,
//! and the two cannot drift apart. So a field added to the report types and not to the schema fails
//! the suite, and so does a check id the schema does not list.

use serde_json::{Map, Value};
use std::path::PathBuf;

/// The committed schema.
pub fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../schema/report.schema.json")
}

/// The committed schema, parsed.
pub fn load() -> Result<Value, String> {
    let path = path();
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The committed schema closed: every object schema that lists `properties` and says nothing of
/// others gets `additionalProperties: false` (`close`), and a check's `id` must be one of
/// `$defs/check_id`.
pub fn strict() -> Result<Value, String> {
    let mut schema = load()?;
    close(&mut schema);
    let id = schema
        .pointer_mut("/$defs/check/properties/id")
        .ok_or("the schema has no $defs/check/properties/id")?;
    *id = serde_json::json!({"$ref": "#/$defs/check_id"});
    Ok(schema)
}

/// Closes every schema of an object (`"type": "object"` with `properties`) under `schema`. The
/// conditions of `allOf` (`if {"properties": {"id": ...}} then {"properties": {"evidence": ...}}`)
/// state no type and stay open: each constrains one field of an object closed elsewhere.
fn close(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let object = map.get("type") == Some(&Value::String("object".into()));
            if object && map.contains_key("properties") && !map.contains_key("additionalProperties")
            {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            map.values_mut().for_each(close);
        }
        Value::Array(items) => items.iter_mut().for_each(close),
        _ => {}
    }
}

/// Checks `doc` against the strict copy of the committed schema ([`strict`]); the error names every
/// place that does not match.
pub fn validate(doc: &Value) -> Result<(), String> {
    let mut errors = errors(&strict()?, doc);
    if errors.is_empty() {
        Ok(())
    } else {
        errors.truncate(20);
        Err(format!(
            "the JSON document does not match schema/report.schema.json (when the report types changed, \
             change the schema too; its $comment says how):\n  {}",
            errors.join("\n  ")
        ))
    }
}

/// Every way `doc` fails `schema`, one line each, naming the JSON pointer.
pub fn errors(schema: &Value, doc: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(schema, schema, doc, "", &mut errors);
    errors
}

/// Keywords that only annotate.
const ANNOTATIONS: [&str; 6] = [
    "$schema",
    "$id",
    "$comment",
    "$defs",
    "title",
    "description",
];

/// Appends to `errors` every way `value` (at JSON pointer `at`) fails `schema`.
fn check(root: &Value, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    let schema = match schema {
        Value::Bool(true) => return,
        Value::Bool(false) => {
            errors.push(format!("{at}: nothing is allowed here"));
            return;
        }
        Value::Object(map) => map,
        _ => {
            errors.push(format!("{at}: the schema here is not an object"));
            return;
        }
    };
    for (keyword, arg) in schema {
        match keyword.as_str() {
            k if ANNOTATIONS.contains(&k) => {}
            "$ref" => match resolve(root, arg) {
                Some(target) => check(root, target, value, at, errors),
                None => errors.push(format!("{at}: unresolvable $ref {arg}")),
            },
            "type" => {
                let types: Vec<&str> = match arg {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                    _ => vec![],
                };
                if !types.iter().any(|t| has_type(value, t)) {
                    errors.push(format!(
                        "{at}: {} is not of type {}",
                        brief(value),
                        types.join(" or ")
                    ));
                }
            }
            "const" => {
                if value != arg {
                    errors.push(format!("{at}: {} is not {arg}", brief(value)));
                }
            }
            "enum" => {
                if !arg
                    .as_array()
                    .is_some_and(|options| options.contains(value))
                {
                    errors.push(format!("{at}: {} is not one of {arg}", brief(value)));
                }
            }
            "properties" => {
                if let (Some(props), Some(object)) = (arg.as_object(), value.as_object()) {
                    for (name, sub) in props {
                        if let Some(v) = object.get(name) {
                            check(root, sub, v, &format!("{at}/{name}"), errors);
                        }
                    }
                }
            }
            "required" => {
                if let (Some(names), Some(object)) = (arg.as_array(), value.as_object()) {
                    for name in names.iter().filter_map(Value::as_str) {
                        if !object.contains_key(name) {
                            errors.push(format!("{at}: lacks the required field {name:?}"));
                        }
                    }
                }
            }
            "additionalProperties" => {
                if let Some(object) = value.as_object() {
                    let declared = schema.get("properties").and_then(Value::as_object);
                    for (name, v) in extra(object, declared) {
                        if arg == &Value::Bool(false) {
                            errors.push(format!("{at}: field {name:?} is not in the schema"));
                        } else {
                            check(root, arg, v, &format!("{at}/{name}"), errors);
                        }
                    }
                }
            }
            "items" => {
                if let Some(items) = value.as_array() {
                    for (i, v) in items.iter().enumerate() {
                        check(root, arg, v, &format!("{at}/{i}"), errors);
                    }
                }
            }
            "minItems" | "maxItems" => {
                if let (Some(items), Some(n)) = (value.as_array(), arg.as_u64()) {
                    let len = items.len() as u64;
                    if (keyword == "minItems" && len < n) || (keyword == "maxItems" && len > n) {
                        errors.push(format!("{at}: {len} items breaks {keyword} {n}"));
                    }
                }
            }
            "minimum" => {
                if let (Some(v), Some(min)) = (value.as_f64(), arg.as_f64()) {
                    if v < min {
                        errors.push(format!("{at}: {v} is below the minimum {min}"));
                    }
                }
            }
            "oneOf" | "anyOf" => {
                let branches = arg.as_array().map(Vec::as_slice).unwrap_or_default();
                let (matched, nearest) = matches(root, branches, value, at);
                if matched == 0 {
                    // Say why the branch the value came closest to refused it.
                    errors.extend(nearest);
                } else if keyword == "oneOf" && matched > 1 {
                    errors.push(format!(
                        "{at}: {} matches {matched} oneOf branches",
                        brief(value)
                    ));
                }
            }
            "allOf" => {
                for sub in arg.as_array().map(Vec::as_slice).unwrap_or_default() {
                    check(root, sub, value, at, errors);
                }
            }
            "if" => {
                let mut trial = Vec::new();
                check(root, arg, value, at, &mut trial);
                let branch = if trial.is_empty() { "then" } else { "else" };
                if let Some(sub) = schema.get(branch) {
                    check(root, sub, value, at, errors);
                }
            }
            "then" | "else" => {}
            other => errors.push(format!(
                "{at}: the schema uses {other:?}, which this checker does not know"
            )),
        }
    }
}

/// How many of `branches` `value` satisfies, and the errors of the closest miss: the branch whose
/// deepest error lies deepest in the document (it got furthest before refusing).
fn matches(root: &Value, branches: &[Value], value: &Value, at: &str) -> (usize, Vec<String>) {
    let mut matched = 0;
    let mut nearest: Option<(usize, Vec<String>)> = None;
    for branch in branches {
        let mut errors = Vec::new();
        check(root, branch, value, at, &mut errors);
        // A branch of another type is the furthest miss of all.
        let wrong_type = errors
            .iter()
            .any(|e| e.starts_with(&format!("{at}: ")) && e.contains("is not of type"));
        let depth = errors
            .iter()
            .map(|e| e.split(": ").next().unwrap_or("").matches('/').count() + 1)
            .max()
            .map(|d| if wrong_type { 0 } else { d });
        match depth {
            None => matched += 1,
            Some(d) if nearest.as_ref().is_none_or(|(best, _)| d > *best) => {
                nearest = Some((d, errors));
            }
            Some(_) => {}
        }
    }
    (matched, nearest.map(|(_, e)| e).unwrap_or_default())
}

/// The fields of `object` not declared in `declared`.
fn extra<'v>(
    object: &'v Map<String, Value>,
    declared: Option<&'v Map<String, Value>>,
) -> impl Iterator<Item = (&'v String, &'v Value)> {
    object
        .iter()
        .filter(move |(name, _)| !declared.is_some_and(|d| d.contains_key(*name)))
}

/// A local reference: `#/$defs/<name>` (a name may hold `:` and `.`, not `/`).
fn resolve<'r>(root: &'r Value, reference: &Value) -> Option<&'r Value> {
    let pointer = reference.as_str()?.strip_prefix('#')?;
    root.pointer(pointer)
}

fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        _ => false,
    }
}

/// A value, cut short for an error line.
fn brief(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(60) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}
