//! JSON parsing that refuses duplicate object keys.
//!
//! `serde_json::Value` keeps the last of two equal keys without a word, so a header could name a tensor
//! twice with different offsets and one of them would silently vanish. Every document the gate reads
//! (the container header, config.json) goes through this instead.

use crate::limits::MAX_JSON_DEPTH;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;

/// Parses `bytes` as one JSON value, failing on a duplicate key at any depth and on nesting deeper
/// than [`MAX_JSON_DEPTH`]. Errors say where (line and column), never what: the text did not parse as
/// what it should be, so it may be anything (a config.json linked to a credentials file).
pub fn parse(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut json = serde_json::Deserializer::from_slice(bytes);
    let value = StrictVisitor { depth: 0 }.deserialize(&mut json)?;
    json.end()?;
    Ok(value)
}

/// A value at nesting `depth` (the top level is 0).
struct StrictVisitor {
    depth: usize,
}

impl StrictVisitor {
    fn inner<E: de::Error>(&self) -> Result<StrictVisitor, E> {
        if self.depth >= MAX_JSON_DEPTH {
            return Err(E::custom(format_args!(
                "nested deeper than the {MAX_JSON_DEPTH} levels accepted"
            )));
        }
        Ok(StrictVisitor {
            depth: self.depth + 1,
        })
    }
}

impl<'de> DeserializeSeed<'de> for StrictVisitor {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(self.inner()?)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // One search of the keys so far, for the check and the insertion both.
            match out.entry(key) {
                serde_json::map::Entry::Occupied(_) => {
                    return Err(de::Error::custom("duplicate key"))
                }
                serde_json::map::Entry::Vacant(slot) => {
                    slot.insert(map.next_value_seed(self.inner()?)?);
                }
            }
        }
        Ok(Value::Object(out))
    }
}

/// Reads one JSON value and keeps nothing of it, held to the same rules as [`parse`] (no duplicate
/// key, nesting at most [`MAX_JSON_DEPTH`] deep counting from `depth`): for the parts of a document a
/// typed reader does not use, so that they cost the keys of one object at a time, not a tree.
pub struct Skip {
    pub depth: usize,
}

impl<'de> DeserializeSeed<'de> for Skip {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let inner = StrictVisitor { depth: self.depth }.inner()?;
        while seq
            .next_element_seed(Skip { depth: inner.depth })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let inner = StrictVisitor { depth: self.depth }.inner()?;
        let mut keys = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if keys.contains(&key) {
                return Err(de::Error::custom(format_args!("duplicate key {key:?}")));
            }
            keys.insert(key);
            map.next_value_seed(Skip { depth: inner.depth })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        let top = parse(br#"{"a": 1, "a": 2}"#).unwrap_err().to_string();
        assert_eq!(top, "duplicate key at line 1 column 12");
        let nested = parse(b"{\"t\": {\"secret\": 1,\n \"secret\": 2}}")
            .unwrap_err()
            .to_string();
        assert_eq!(nested, "duplicate key at line 2 column 9");
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse(deep(MAX_JSON_DEPTH).as_bytes()).is_ok());
        let e = parse(deep(MAX_JSON_DEPTH + 1).as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("nested deeper than the 64 levels accepted"),
            "{e}"
        );
        let objects = format!("{}1{}", "{\"a\":".repeat(65), "}".repeat(65));
        assert!(parse(objects.as_bytes()).is_err());
    }

    #[test]
    fn skipping_holds_a_value_to_the_same_rules() {
        let skip = |text: &[u8]| {
            let mut json = serde_json::Deserializer::from_slice(text);
            Skip { depth: 0 }.deserialize(&mut json)?;
            json.end()
        };
        assert!(skip(br#"{"a": [1, {"b": null}], "c": "d"}"#).is_ok());
        let nested = skip(br#"{"t": {"x": 1, "x": 2}}"#).unwrap_err().to_string();
        assert!(nested.contains("duplicate key \"x\""), "{nested}");
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(skip(deep(MAX_JSON_DEPTH).as_bytes()).is_ok());
        assert!(skip(deep(MAX_JSON_DEPTH + 1).as_bytes()).is_err());
    }

    #[test]
    fn ordinary_documents_parse_like_serde_json() {
        let text = br#"{"a": [1, -2, 3.5, null, true, "s"], "b": {"c": {}}}"#;
        assert_eq!(
            parse(text).unwrap(),
            serde_json::from_slice::<Value>(text).unwrap()
        );
    }
}
