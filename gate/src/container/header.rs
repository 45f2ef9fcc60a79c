//! The container header read straight from its JSON into tensor entries, with no `serde_json::Value`
//! tree in between.
//!
//! A `Value` costs about 17 times the JSON it came from when the JSON is one huge array of small
//! numbers, and the header may be 100 MiB. A tensor table has one shape only: an object of entries,
//! each an object of `dtype` (a string), `shape` (at most `MAX_RANK` integers) and `data_offsets` (two
//! integers), plus `__metadata__` (an object of strings). So the header is read against that shape as
//! it streams: anything else is refused the moment it is met, before it is materialised; what is kept
//! is the entries themselves (a few times the bytes that declared them, at most). Remainders that are
//! only counted for a message (the tensors past `MAX_TENSORS`, a shape's rank past `MAX_RANK`) are
//! skipped without being stored.

use super::{ContainerError, TensorInfo, METADATA_KEY};
use crate::dtype::Dtype;
use crate::limits::{MAX_EMPTY_TENSORS, MAX_JSON_DEPTH, MAX_METADATA_KEYS, MAX_RANK, MAX_TENSORS};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

/// The entries and metadata of a header, in the order the header gives them.
pub(super) struct Parsed {
    pub entries: Vec<TensorInfo>,
    pub metadata: Vec<(String, String)>,
}

/// Reads `text` (a whole header) as a tensor table. Errors are the container's own where the JSON is
/// well formed but not a table, and `HeaderNotJson` where it is not JSON (or repeats a key).
pub(super) fn parse(text: &str) -> Result<Parsed, ContainerError> {
    let refusal = RefCell::new(None);
    let mut json = serde_json::Deserializer::from_str(text);
    let parsed = Top { refusal: &refusal }
        .deserialize(&mut json)
        .and_then(|p| json.end().map(|()| p));
    parsed.map_err(|e| {
        refusal
            .into_inner()
            .unwrap_or_else(|| ContainerError::HeaderNotJson {
                reason: e.to_string(),
            })
    })
}

/// The visits of a JSON value that is not an object, each refused through `self.$refuse(kind)`.
macro_rules! refuse_non_objects {
    ($de:lifetime, $value:ty, $refuse:ident) => {
        fn visit_seq<A: SeqAccess<$de>>(self, _: A) -> Result<$value, A::Error> {
            Err(self.$refuse("array"))
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<$value, E> {
            Err(self.$refuse("string"))
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<$value, E> {
            Err(self.$refuse("boolean"))
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<$value, E> {
            Err(self.$refuse("number"))
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<$value, E> {
            Err(self.$refuse("number"))
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<$value, E> {
            Err(self.$refuse("number"))
        }
        fn visit_unit<E: de::Error>(self) -> Result<$value, E> {
            Err(self.$refuse("null"))
        }
    };
}

/// A visitor that is its own seed: the value is handed to it whole (`$how`: what the reader is
/// told to expect).
macro_rules! own_seed {
    ($seed:ty, $value:ty, $how:ident) => {
        impl<'de> DeserializeSeed<'de> for $seed {
            type Value = $value;

            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<$value, D::Error> {
                d.$how(self)
            }
        }
    };
}

/// Where a visitor leaves the container error it stopped on (serde's own error type carries text only).
type Slot<'r> = &'r RefCell<Option<ContainerError>>;

fn refuse<E: de::Error>(slot: Slot<'_>, e: ContainerError) -> E {
    let text = e.to_string();
    slot.borrow_mut().get_or_insert(e);
    E::custom(text)
}

fn duplicate<E: de::Error>(key: &str) -> E {
    E::custom(format_args!("duplicate key {key:?}"))
}

/// The JSON kind a visitor was offered, for messages ("a JSON number, not a string").
struct Kind(&'static str);

/// Reads past a value without keeping any of it, refusing nesting deeper than `MAX_JSON_DEPTH`.
struct Skip {
    depth: usize,
}

own_seed!(Skip, (), deserialize_any);

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
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        skip_seq(seq, self.depth)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        skip_map(map, self.depth)
    }
}

/// Reads past the rest of an array at nesting `depth`, keeping nothing.
fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A, depth: usize) -> Result<(), A::Error> {
    let depth = deeper::<A::Error>(depth)?;
    while seq.next_element_seed(Skip { depth })?.is_some() {}
    Ok(())
}

/// Reads past the rest of an object at nesting `depth`, keeping nothing.
fn skip_map<'de, A: MapAccess<'de>>(mut map: A, depth: usize) -> Result<(), A::Error> {
    let depth = deeper::<A::Error>(depth)?;
    while map.next_key::<IgnoredAny>()?.is_some() {
        map.next_value_seed(Skip { depth })?;
    }
    Ok(())
}

fn deeper<E: de::Error>(depth: usize) -> Result<usize, E> {
    if depth >= MAX_JSON_DEPTH {
        return Err(E::custom(format_args!(
            "nested deeper than the {MAX_JSON_DEPTH} levels accepted"
        )));
    }
    Ok(depth + 1)
}

/// A value that should be a string: the string, a dtype's name looked up as it is read (never
/// copied), or the kind found instead (never materialised).
enum Text {
    Str(String),
    Dtype(Dtype),
    Other(Kind),
}

/// Reads a value that should be a string; `dtype`, one that should name a dtype.
struct TextSeed {
    dtype: bool,
}

impl<'de> DeserializeSeed<'de> for TextSeed {
    type Value = Text;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Text, D::Error> {
        d.deserialize_any(KindVisitor { dtype: self.dtype })
    }
}

/// Accepts any JSON value, keeping a string (or, `dtype`, the dtype it names, and the string only
/// when it names none) and only the kind of anything else. Arrays and objects are not read: the
/// caller refuses them, which ends the parse.
struct KindVisitor {
    dtype: bool,
}

impl<'de> Visitor<'de> for KindVisitor {
    type Value = Text;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Text, E> {
        Ok(Text::Other(Kind("boolean")))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Text, E> {
        Ok(Text::Other(Kind("number")))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Text, E> {
        Ok(Text::Other(Kind("number")))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Text, E> {
        Ok(Text::Other(Kind("number")))
    }
    fn visit_str<E>(self, v: &str) -> Result<Text, E> {
        let named = self.dtype.then(|| Dtype::from_name(v)).flatten();
        Ok(named.map_or_else(|| Text::Str(v.to_owned()), Text::Dtype))
    }
    fn visit_unit<E>(self) -> Result<Text, E> {
        Ok(Text::Other(Kind("null")))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Text, A::Error> {
        skip_seq(seq, 1)?;
        Ok(Text::Other(Kind("array")))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Text, A::Error> {
        skip_map(map, 1)?;
        Ok(Text::Other(Kind("object")))
    }
}

/// The whole header: an object of entries and `__metadata__`.
struct Top<'r> {
    refusal: Slot<'r>,
}

own_seed!(Top<'_>, Parsed, deserialize_any);

impl<'de> Visitor<'de> for Top<'_> {
    type Value = Parsed;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object of tensor entries")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        let mut entries: Vec<TensorInfo> = Vec::new();
        let mut metadata = None;
        let mut empty = 0usize;
        while let Some(key) = map.next_key::<String>()? {
            if key == METADATA_KEY {
                if metadata.is_some() {
                    return Err(duplicate(&key));
                }
                metadata = Some(map.next_value_seed(Metadata {
                    refusal: self.refusal,
                })?);
                continue;
            }
            if entries.len() == MAX_TENSORS {
                // Count the rest without keeping them, to say how many were declared.
                map.next_value_seed(Skip { depth: 1 })?;
                let mut count = entries.len() + 1;
                while map.next_key::<IgnoredAny>()?.is_some() {
                    map.next_value_seed(Skip { depth: 1 })?;
                    count += 1;
                }
                return Err(refuse(
                    self.refusal,
                    ContainerError::TooManyTensors { count },
                ));
            }
            let entry = map.next_value_seed(Entry {
                name: key,
                refusal: self.refusal,
            })?;
            if entry.begin == entry.end {
                empty += 1;
                if empty > MAX_EMPTY_TENSORS {
                    return Err(refuse(
                        self.refusal,
                        ContainerError::TooManyEmptyTensors { count: empty },
                    ));
                }
            }
            entries.push(entry);
        }
        Ok(Parsed {
            entries,
            metadata: metadata.unwrap_or_default(),
        })
    }

    refuse_non_objects!('de, Parsed, not_object);
}

impl Top<'_> {
    fn not_object<E: de::Error>(&self, found: &'static str) -> E {
        refuse(self.refusal, ContainerError::HeaderNotObject { found })
    }
}

/// `__metadata__`: an object of at most `MAX_METADATA_KEYS` strings.
struct Metadata<'r> {
    refusal: Slot<'r>,
}

own_seed!(Metadata<'_>, Vec<(String, String)>, deserialize_any);

impl<'de> Visitor<'de> for Metadata<'_> {
    type Value = Vec<(String, String)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(duplicate(&key));
            }
            if out.len() == MAX_METADATA_KEYS {
                return Err(refuse(self.refusal, ContainerError::TooMuchMetadata));
            }
            match map.next_value_seed(TextSeed { dtype: false })? {
                Text::Str(v) => out.push((key, v)),
                Text::Dtype(_) | Text::Other(_) => {
                    return Err(refuse(
                        self.refusal,
                        ContainerError::BadMetadata { key: Some(key) },
                    ))
                }
            }
        }
        Ok(out)
    }

    refuse_non_objects!('de, Vec<(String, String)>, not_object);
}

impl Metadata<'_> {
    fn not_object<E: de::Error>(&self, _found: &'static str) -> E {
        refuse(self.refusal, ContainerError::BadMetadata { key: None })
    }
}

/// One tensor entry, validated as it is read.
struct Entry<'r> {
    name: String,
    refusal: Slot<'r>,
}

own_seed!(Entry<'_>, TensorInfo, deserialize_any);

impl Entry<'_> {
    fn refuse<E: de::Error>(&self, e: ContainerError) -> E {
        refuse(self.refusal, e)
    }

    fn not_entry<E: de::Error>(&self, found: &'static str) -> E {
        self.refuse(ContainerError::NotATensorEntry {
            key: self.name.clone(),
            found,
        })
    }
}

impl<'de> Visitor<'de> for Entry<'_> {
    type Value = TensorInfo;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tensor entry")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TensorInfo, A::Error> {
        let tensor = || self.name.clone();
        let mut dtype = None;
        let mut shape = None;
        let mut offsets = None;
        // Keys and the dtype are matched as the parser hands them over, never copied: a header
        // holds thousands of entries, and these were four of an entry's nine allocations.
        while let Some(field) = map.next_key_seed(FieldSeed)? {
            match field {
                Field::Dtype if dtype.is_some() => return Err(duplicate("dtype")),
                Field::Shape if shape.is_some() => return Err(duplicate("shape")),
                Field::Offsets if offsets.is_some() => return Err(duplicate("data_offsets")),
                Field::Dtype => {
                    dtype = Some(match map.next_value_seed(TextSeed { dtype: true })? {
                        Text::Dtype(d) => d,
                        Text::Str(s) => {
                            return Err(self.refuse(ContainerError::UnknownDtype {
                                tensor: tensor(),
                                dtype: s,
                            }))
                        }
                        Text::Other(Kind(k)) => {
                            return Err(self.refuse(ContainerError::BadField {
                                tensor: tensor(),
                                field: "dtype",
                                reason: format!("a JSON {k}, not a string"),
                            }))
                        }
                    })
                }
                Field::Shape => {
                    let dims = map.next_value_seed(Integers { limit: MAX_RANK })?;
                    shape = Some(self.shape(dims)?);
                }
                Field::Offsets => {
                    let pair = map.next_value_seed(Integers { limit: 2 })?;
                    offsets = Some(match pair {
                        Integers_::Items {
                            values: [b, e, ..],
                            read: 2,
                            other: None,
                            len: 2,
                        } => (b, e),
                        _ => return Err(self.bad_offsets()),
                    });
                }
                Field::Other(field) => {
                    return Err(self.refuse(ContainerError::UnknownField {
                        tensor: tensor(),
                        field,
                    }))
                }
            }
        }
        let missing = |field| {
            self.refuse(ContainerError::MissingField {
                tensor: tensor(),
                field,
            })
        };
        let dtype = dtype.ok_or_else(|| missing("dtype"))?;
        let shape = shape.ok_or_else(|| missing("shape"))?;
        let (begin, end) = offsets.ok_or_else(|| missing("data_offsets"))?;
        let Entry { name, refusal } = self;
        super::entry(name, dtype, shape, begin, end).map_err(|e| refuse(refusal, e))
    }

    refuse_non_objects!('de, TensorInfo, not_entry);
}

impl Entry<'_> {
    fn bad_offsets<E: de::Error>(&self) -> E {
        self.refuse(ContainerError::BadField {
            tensor: self.name.clone(),
            field: "data_offsets",
            reason: "not a pair of non-negative integers".to_owned(),
        })
    }

    fn shape<E: de::Error>(&self, dims: Integers_) -> Result<Vec<u64>, E> {
        let Integers_::Items {
            values,
            read,
            other,
            len,
        } = dims
        else {
            return Err(self.refuse(ContainerError::BadField {
                tensor: self.name.clone(),
                field: "shape",
                reason: "not an array".to_owned(),
            }));
        };
        if len > MAX_RANK {
            return Err(self.refuse(ContainerError::RankTooLarge {
                tensor: self.name.clone(),
                rank: len,
            }));
        }
        if let Some((index, value)) = other {
            return Err(self.refuse(ContainerError::BadDimension {
                tensor: self.name.clone(),
                index,
                value,
            }));
        }
        Ok(values[..read].to_vec())
    }
}

/// An entry's key: one of its three fields, matched without copying it, or any other (kept for
/// the refusal that names it).
enum Field {
    Dtype,
    Shape,
    Offsets,
    Other(String),
}

struct FieldSeed;

own_seed!(FieldSeed, Field, deserialize_str);

impl<'de> Visitor<'de> for FieldSeed {
    type Value = Field;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E>(self, v: &str) -> Result<Field, E> {
        Ok(match v {
            "dtype" => Field::Dtype,
            "shape" => Field::Shape,
            "data_offsets" => Field::Offsets,
            other => Field::Other(other.to_owned()),
        })
    }
}

/// A JSON number as the header states it: a `u64`, or the text of anything else (negative,
/// fractional, too large, or not a number at all).
enum Number {
    U64(u64),
    Other(String),
}

/// An array read for at most `limit` items, the rest counted and skipped.
struct Integers {
    limit: usize,
}

/// What [`Integers`] found: the integers among the first `limit` items (`read` of them, in order,
/// up to the first item that is not one, which is kept with its index as text), and the array's
/// full length; or not an array. Held in place: every entry reads two such arrays.
enum Integers_ {
    Items {
        values: [u64; MAX_RANK],
        read: usize,
        other: Option<(usize, String)>,
        len: usize,
    },
    NotArray,
}

own_seed!(Integers, Integers_, deserialize_any);

impl<'de> Visitor<'de> for Integers {
    type Value = Integers_;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of integers")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Integers_, A::Error> {
        let limit = self.limit.min(MAX_RANK);
        let (mut values, mut read, mut other) = ([0u64; MAX_RANK], 0usize, None);
        let mut len = 0usize;
        while len < limit {
            match seq.next_element_seed(NumberSeed)? {
                Some(Number::U64(v)) if other.is_none() => {
                    values[read] = v;
                    read += 1;
                }
                Some(Number::U64(_)) => {}
                Some(Number::Other(text)) => {
                    other.get_or_insert((len, text));
                }
                None => break,
            }
            len += 1;
        }
        if len == limit {
            while seq.next_element_seed(Skip { depth: 3 })?.is_some() {
                len += 1;
            }
        }
        Ok(Integers_::Items {
            values,
            read,
            other,
            len,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Integers_, A::Error> {
        skip_map(map, 2)?;
        Ok(Integers_::NotArray)
    }
    fn visit_str<E>(self, _: &str) -> Result<Integers_, E> {
        Ok(Integers_::NotArray)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Integers_, E> {
        Ok(Integers_::NotArray)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Integers_, E> {
        Ok(Integers_::NotArray)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Integers_, E> {
        Ok(Integers_::NotArray)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Integers_, E> {
        Ok(Integers_::NotArray)
    }
    fn visit_unit<E>(self) -> Result<Integers_, E> {
        Ok(Integers_::NotArray)
    }
}

struct NumberSeed;

own_seed!(NumberSeed, Number, deserialize_any);

impl<'de> Visitor<'de> for NumberSeed {
    type Value = Number;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer")
    }
    fn visit_u64<E>(self, v: u64) -> Result<Number, E> {
        Ok(Number::U64(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Number, E> {
        Ok(u64::try_from(v).map_or_else(|_| Number::Other(v.to_string()), Number::U64))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Number, E> {
        // Spelled as serde_json spells a float, so messages read as the header does.
        Ok(Number::Other(
            serde_json::Number::from_f64(v).map_or_else(|| v.to_string(), |n| n.to_string()),
        ))
    }
    fn visit_str<E>(self, v: &str) -> Result<Number, E> {
        Ok(Number::Other(format!("{v:?}")))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Number, E> {
        Ok(Number::Other(v.to_string()))
    }
    fn visit_unit<E>(self) -> Result<Number, E> {
        Ok(Number::Other("null".to_owned()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Number, A::Error> {
        skip_seq(seq, 3)?;
        Ok(Number::Other("an array".to_owned()))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Number, A::Error> {
        skip_map(map, 3)?;
        Ok(Number::Other("an object".to_owned()))
    }
}
