//! JSON parsing that refuses duplicate object keys.
//!
//! `serde_json::Value` keeps the last of two equal keys without a word, so a header could name a tensor
//! twice with different offsets and one of them would silently vanish. Every document the gate reads
//! (the container header, config.json) goes through this instead.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;

/// Parses `bytes` as one JSON value, failing on a duplicate key at any depth (the error names the key).
pub fn parse(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let strict: Strict = serde_json::from_slice(bytes)?;
    Ok(strict.0)
}

struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

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
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format_args!("duplicate key {key:?}")));
            }
            let Strict(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        let top = parse(br#"{"a": 1, "a": 2}"#).unwrap_err().to_string();
        assert!(top.contains("duplicate key \"a\""), "{top}");
        let nested = parse(br#"{"t": {"dtype": "I8", "dtype": "U8"}}"#)
            .unwrap_err()
            .to_string();
        assert!(nested.contains("duplicate key \"dtype\""), "{nested}");
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
