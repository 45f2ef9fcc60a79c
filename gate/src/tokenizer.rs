//! The target's tokenizer, read strictly: which ids are tokens, which of them are special, and which
//! are live (bos, eos, pad, unk), for `target.mask_token` and `target.tokenizer`.
//!
//! `tokenizer.json` is read straight into the few things the checks need (the added tokens, the size
//! of `model.vocab`, the ids of a handful of named tokens), never into a JSON tree: it is held to the
//! strict parser's rules (no duplicate key at any depth, bounded nesting) and to
//! [`MAX_TOKENIZER_BYTES`]. Its bytes are kept, so the text of a regular token is found by scanning
//! them again when a message needs it. A GGUF's token list gives the same answers through
//! [`Tokens::from_gguf`].

use crate::error::PackageError;
use crate::files::{FileError, Inside};
use crate::limits::{MAX_ADDED_TOKENS, MAX_CONFIG_BYTES, MAX_TOKENIZER_BYTES};
use crate::report::Check;
use crate::strict_json::Skip;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::hash_map::RandomState;
use std::collections::HashSet;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::path::Path;

/// The tokenizer file a Hugging Face target carries.
pub const TOKENIZER_JSON: &str = "tokenizer.json";
/// Where a Hugging Face target states its special tokens by text.
pub const TOKENIZER_CONFIG: &str = "tokenizer_config.json";
/// Where a Hugging Face target states the ids generation stops and pads at.
pub const GENERATION_CONFIG: &str = "generation_config.json";

/// A token the target uses as bos, eos, pad or unk, and where that was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Live {
    /// "bos", "eos", "pad" or "unk".
    pub role: &'static str,
    pub id: u64,
    /// The file and key it was read from: "eos_token_id in generation_config.json".
    pub from: String,
}

/// A token of the added list (`added_tokens` in tokenizer.json; for a GGUF, a CONTROL, USER_DEFINED or
/// UNUSED token).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Added {
    pub id: u64,
    pub content: String,
    pub special: bool,
}

/// Where the text of a regular token is found.
#[derive(Clone, Debug)]
enum Texts {
    /// tokenizer.json's bytes, already read once and valid: scanned again for one id.
    Json(Vec<u8>),
    /// A GGUF's `tokenizer.ggml.tokens`, by id; `kinds` says whether its token types were given.
    Listed { tokens: Vec<String>, kinds: bool },
}

/// What a tokenizer says about ids.
#[derive(Clone, Debug)]
pub struct Vocabulary {
    /// Max id + 1 over `model.vocab` and the added tokens.
    pub count: u64,
    /// How many entries `model.vocab` has (for a GGUF, how many tokens are not in [`Vocabulary::added`]).
    pub model_entries: u64,
    pub added: Vec<Added>,
    /// What it was read from, for messages: "the target's tokenizer.json".
    pub source: &'static str,
    texts: Texts,
}

/// Why a tokenizer could not be used, and whether that is a verdict on it (it is not a tokenizer: a
/// FAIL) or only a reading that did not happen (UNDECIDED).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub message: String,
    pub undecided: bool,
}

/// Everything `target.mask_token` and `target.tokenizer` know of the target's tokens.
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    /// The tokenizer: `None` when there was none to read (absent, or not a regular file: the
    /// `target.tokenizer` check says which).
    pub vocabulary: Option<Result<Vocabulary, Problem>>,
    /// Every live id stated, each with where.
    pub live: Vec<Live>,
    /// Statements of live ids that could not be used (a file that is not JSON, an id of the wrong
    /// type): while any remain, a mask id is never called "not live".
    pub unusable: Vec<String>,
}

/// The keys of config.json and generation_config.json that name live ids.
const ID_KEYS: [(&str, &str); 3] = [
    ("bos", "bos_token_id"),
    ("eos", "eos_token_id"),
    ("pad", "pad_token_id"),
];

/// The keys of tokenizer_config.json that name live tokens by text.
const TEXT_KEYS: [(&str, &str); 4] = [
    ("bos", "bos_token"),
    ("eos", "eos_token"),
    ("pad", "pad_token"),
    ("unk", "unk_token"),
];

/// Reads the tokens of the Hugging Face target in `dir`, every file through `inside` (a link out of
/// the target is refused unread, exit 2, as for config.json). `config` is the target's config.json;
/// `present` whether `tokenizer.json` is a regular file (otherwise it is not opened). A file read
/// and then found changed is exit 2; anything else wrong with a tokenizer file is kept for the checks.
pub fn read(
    dir: &Path,
    inside: &Inside,
    config: &Value,
    present: bool,
) -> Result<Tokens, PackageError> {
    let mut tokens = Tokens::default();
    live_ids(config, "config.json", &mut tokens);
    if let Some(text) = config.get("text_config").filter(|t| t.is_object()) {
        live_ids(text, "config.json's text_config", &mut tokens);
    }
    if let Some(generation) = json_file(dir, inside, GENERATION_CONFIG, &mut tokens)? {
        live_ids(&generation, GENERATION_CONFIG, &mut tokens);
    }
    let named = match json_file(dir, inside, TOKENIZER_CONFIG, &mut tokens)? {
        Some(tc) => named_tokens(&tc, &mut tokens),
        None => Vec::new(),
    };
    if !present {
        return Ok(tokens);
    }
    let wanted: Vec<String> = named.iter().map(|(_, _, text)| text.clone()).collect();
    let vocabulary = match open_read(dir, inside, TOKENIZER_JSON, MAX_TOKENIZER_BYTES)? {
        Err(problem) => Err(problem),
        Ok(bytes) => parse_tokenizer(bytes, &wanted).map(|(vocabulary, ids)| {
            for ((role, from, _), id) in named.iter().zip(ids) {
                if let Some(id) = id {
                    tokens.live.push(Live {
                        role,
                        id,
                        from: from.clone(),
                    });
                }
            }
            vocabulary
        }),
    };
    tokens.vocabulary = Some(vocabulary);
    Ok(tokens)
}

/// `dir/name` read whole under `cap`: `Ok(Err(..))` for what is wrong with the file itself, `Err` for
/// a link out of the target or a file that changed while read (exit 2, as for config.json).
fn open_read(
    dir: &Path,
    inside: &Inside,
    name: &str,
    cap: u64,
) -> Result<Result<Vec<u8>, Problem>, PackageError> {
    let read = inside.open(&dir.join(name)).and_then(|file| {
        let bytes = file.read_all(cap)?;
        file.unchanged()?;
        Ok(bytes)
    });
    match read {
        Ok(bytes) => Ok(Ok(bytes)),
        Err(e @ (FileError::Outside { .. } | FileError::Changed { .. })) => Err(e.into()),
        Err(e) => Ok(Err(Problem {
            undecided: matches!(e, FileError::Unreadable { .. }),
            message: format!("the target's {name}: {}", e.reason()),
        })),
    }
}

/// A small JSON file of the target (generation_config.json, tokenizer_config.json), strictly parsed:
/// `None` when absent; one that cannot be used is noted in `tokens.unusable`.
fn json_file(
    dir: &Path,
    inside: &Inside,
    name: &str,
    tokens: &mut Tokens,
) -> Result<Option<Value>, PackageError> {
    if std::fs::symlink_metadata(dir.join(name)).is_err() {
        return Ok(None);
    }
    let bytes = match open_read(dir, inside, name, MAX_CONFIG_BYTES)? {
        Ok(bytes) => bytes,
        Err(problem) => {
            tokens.unusable.push(problem.message);
            return Ok(None);
        }
    };
    match crate::strict_json::parse(&bytes) {
        Ok(v @ Value::Object(_)) => Ok(Some(v)),
        Ok(_) => {
            tokens
                .unusable
                .push(format!("the target's {name} is not a JSON object"));
            Ok(None)
        }
        Err(e) => {
            tokens
                .unusable
                .push(format!("the target's {name} is not valid JSON: {e}"));
            Ok(None)
        }
    }
}

/// The live ids an object states (`bos_token_id`, `eos_token_id` as an integer or a list,
/// `pad_token_id`). Null is none; a negative integer is no token (some configs write -1 for "none");
/// anything else that is not a non-negative integer is unusable, named.
pub(crate) fn live_ids(object: &Value, file: &str, tokens: &mut Tokens) {
    for (role, key) in ID_KEYS {
        let Some(v) = object.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        let listed: Vec<&Value> = match v {
            Value::Array(items) if role == "eos" => items.iter().collect(),
            v => vec![v],
        };
        for item in listed {
            match item {
                Value::Number(n) if n.as_u64().is_some() => tokens.live.push(Live {
                    role,
                    id: n.as_u64().unwrap_or_default(),
                    from: format!("{key} in {file}"),
                }),
                Value::Number(n) if n.as_i64().is_some() => {}
                other => tokens.unusable.push(format!(
                    "{key} in the target's {file} is {}, not a token id",
                    shown(other)
                )),
            }
        }
    }
}

/// tokenizer_config.json's special tokens by text (a string, or an object with a string `content`):
/// (role, where, text). One of another form is unusable, named.
fn named_tokens(tc: &Value, tokens: &mut Tokens) -> Vec<(&'static str, String, String)> {
    let mut named = Vec::new();
    for (role, key) in TEXT_KEYS {
        let text = match tc.get(key) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => s,
            Some(Value::Object(o)) => match o.get("content") {
                Some(Value::String(s)) => s,
                _ => {
                    tokens.unusable.push(format!(
                        "{key} in the target's {TOKENIZER_CONFIG} is an object without a string content"
                    ));
                    continue;
                }
            },
            Some(other) => {
                tokens.unusable.push(format!(
                    "{key} in the target's {TOKENIZER_CONFIG} is {}, not a token",
                    shown(other)
                ));
                continue;
            }
        };
        named.push((role, format!("{key} in {TOKENIZER_CONFIG}"), text.clone()));
    }
    named
}

/// A JSON value as a message shows it: a scalar as written (a long string by length), an array or
/// object by kind only.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) if s.chars().count() <= 32 => format!("{v}, a string"),
        Value::String(s) => format!("a string of {} characters", s.chars().count()),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
        other => other.to_string(),
    }
}

impl Tokens {
    /// The tokens of a GGUF target, from its metadata as plain values: `tokenizer.ggml.tokens`,
    /// `tokenizer.ggml.token_type` (llama.cpp's types, when the file carries them) and the
    /// `tokenizer.ggml.{bos,eos,padding,unknown}_token_id` keys, each `None` when absent. A CONTROL,
    /// USER_DEFINED or UNUSED token counts as an added special token; any other type as regular.
    pub fn from_gguf(
        tokens: Vec<String>,
        token_types: Option<&[i32]>,
        bos: Option<i128>,
        eos: Option<i128>,
        padding: Option<i128>,
        unknown: Option<i128>,
    ) -> Tokens {
        // llama.cpp's `llama_token_type`.
        const CONTROL: i32 = 3;
        const USER_DEFINED: i32 = 4;
        const UNUSED: i32 = 5;
        let mut out = Tokens::default();
        for (role, key, id) in [
            ("bos", "bos_token_id", bos),
            ("eos", "eos_token_id", eos),
            ("pad", "padding_token_id", padding),
            ("unk", "unknown_token_id", unknown),
        ] {
            if let Some(id) = id.and_then(|id| u64::try_from(id).ok()) {
                out.live.push(Live {
                    role,
                    id,
                    from: format!("tokenizer.ggml.{key} in the GGUF"),
                });
            }
        }
        let types = token_types.filter(|t| t.len() == tokens.len());
        let added: Vec<Added> = match types {
            Some(types) => tokens
                .iter()
                .zip(types)
                .enumerate()
                .filter(|(_, (_, t))| matches!(**t, CONTROL | USER_DEFINED | UNUSED))
                .map(|(id, (text, _))| Added {
                    id: id as u64,
                    content: text.clone(),
                    special: true,
                })
                .collect(),
            None => Vec::new(),
        };
        let count = tokens.len() as u64;
        out.vocabulary = Some(Ok(Vocabulary {
            count,
            model_entries: count - added.len() as u64,
            added,
            source: "the target GGUF's tokenizer.ggml.tokens",
            texts: Texts::Listed {
                tokens,
                kinds: types.is_some(),
            },
        }));
        out
    }
}

impl Vocabulary {
    /// The text of regular token `id`, if the tokenizer has one.
    fn text_of(&self, id: u64) -> Option<String> {
        match &self.texts {
            Texts::Listed { tokens, .. } => usize::try_from(id)
                .ok()
                .and_then(|i| tokens.get(i))
                .cloned(),
            Texts::Json(bytes) => {
                let mut found = Found::new(Want {
                    text_of: Some(id),
                    ids_of: &[],
                    texts_of: &[],
                });
                // The scan stops, as an error, at the token sought.
                let _ = scan_all(bytes, &mut found);
                found.text
            }
        }
    }

    /// Whether token types say which tokens are special (tokenizer.json always does).
    fn kinds_known(&self) -> bool {
        !matches!(self.texts, Texts::Listed { kinds: false, .. })
    }
}

/// What a scan looks for besides the counts.
struct Want<'w> {
    text_of: Option<u64>,
    ids_of: &'w [String],
    /// Ids (sorted) whose `model.vocab` texts are all kept, in [`Found::texts`].
    texts_of: &'w [u64],
}

/// What a scan of tokenizer.json found.
struct Found<'w> {
    want: Want<'w>,
    has_model: bool,
    has_vocab: bool,
    has_added: bool,
    model_entries: u64,
    /// Max id + 1 seen so far, saturating.
    count: u64,
    added: Vec<Added>,
    text: Option<String>,
    ids: Vec<Option<u64>>,
    /// Every id of `model.vocab`, in file order (not kept by a scan for texts).
    vocab_ids: Vec<u64>,
    /// The (id, text) entries of `model.vocab` for [`Want::texts_of`], in file order: at most one
    /// more than the ids sought.
    texts: Vec<(u64, String)>,
    /// When set, the keys of `model.vocab` are only hashed here, for the caller to compare.
    keys: Option<(Keyed, Vec<u64>)>,
}

impl<'w> Found<'w> {
    fn new(want: Want<'w>) -> Found<'w> {
        Found {
            ids: vec![None; want.ids_of.len()],
            want,
            has_model: false,
            has_vocab: false,
            has_added: false,
            model_entries: 0,
            count: 0,
            added: Vec::new(),
            text: None,
            vocab_ids: Vec::new(),
            texts: Vec::new(),
            keys: None,
        }
    }

    /// A vocabulary entry (`text`, `id`) of `model.vocab`.
    fn entry(&mut self, text: &str, id: u64) {
        self.model_entries += 1;
        self.count = self.count.max(id.saturating_add(1));
        if self.want.text_of == Some(id) && self.text.is_none() {
            self.text = Some(text.to_owned());
        }
        if self.want.text_of.is_none() && self.want.texts_of.is_empty() {
            self.vocab_ids.push(id);
        } else if self.want.texts_of.binary_search(&id).is_ok()
            && self.texts.len() <= self.want.texts_of.len()
        {
            self.texts.push((id, text.to_owned()));
        }
        for (i, w) in self.want.ids_of.iter().enumerate() {
            if w == text && self.ids[i].is_none() {
                self.ids[i] = Some(id);
            }
        }
    }
}

/// Whether no two of `hashes` are equal: spread into buckets by their top bits (one counting pass;
/// a quarter of the time a full sort takes), then each bucket of a few sorted.
fn distinct(hashes: &[u64]) -> bool {
    const BITS: u32 = 14;
    let bucket = |h: u64| (h >> (64 - BITS)) as usize;
    let mut starts = vec![0usize; (1 << BITS) + 1];
    for &h in hashes {
        starts[bucket(h) + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut next = starts.clone();
    let mut spread = vec![0u64; hashes.len()];
    for &h in hashes {
        let at = &mut next[bucket(h)];
        spread[*at] = h;
        *at += 1;
    }
    starts.windows(2).all(|w| {
        let one = &mut spread[w[0]..w[1]];
        one.sort_unstable();
        one.windows(2).all(|p| p[0] != p[1])
    })
}

/// Reads `bytes` as one JSON document into `found`. Text that is UTF-8 throughout (as a tokenizer
/// is) is read without checking each string again; other bytes are read as bytes, to be refused
/// where the first string that is not UTF-8 is.
fn scan_all(bytes: &[u8], found: &mut Found<'_>) -> Result<(), serde_json::Error> {
    fn run<'de, R: serde_json::de::Read<'de>>(
        mut json: serde_json::Deserializer<R>,
        found: &mut Found<'_>,
    ) -> Result<(), serde_json::Error> {
        Top { found }.deserialize(&mut json)?;
        json.end()
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => run(serde_json::Deserializer::from_str(text), found),
        Err(_) => run(serde_json::Deserializer::from_slice(bytes), found),
    }
}

/// Parses tokenizer.json's `bytes`, also finding the ids of the `wanted` texts (added tokens first,
/// then `model.vocab`, as the tokenizer resolves them).
fn parse_tokenizer(
    bytes: Vec<u8>,
    wanted: &[String],
) -> Result<(Vocabulary, Vec<Option<u64>>), Problem> {
    let scan = |keys: Option<Keyed>| {
        let mut found = Found::new(Want {
            text_of: None,
            ids_of: wanted,
            texts_of: &[],
        });
        found.keys = keys.map(|keyed| (keyed, Vec::new()));
        let parsed = scan_all(&bytes, &mut found);
        (parsed, found)
    };
    // A hash table of 150,000 keys costs more than the rest of the read (a cache miss an entry), so
    // model.vocab's keys are first only hashed, in order, and the sorted hashes compared. A file
    // that is not taken as it is (two hashes equal, or any error) is read again checking each key
    // as it comes, which says exactly what is wrong and where, as for every other object.
    let (mut parsed, mut found) = scan(Some(Keyed::new()));
    let clean = parsed.is_ok() && found.keys.as_ref().is_some_and(|(_, h)| distinct(h));
    if !clean {
        (parsed, found) = scan(None);
    }
    let not = |why: String| Problem {
        message: format!("the target's {TOKENIZER_JSON} is not a tokenizer: {why}"),
        undecided: false,
    };
    if let Err(e) = parsed {
        return Err(not(e.to_string()));
    }
    if !found.has_model || !found.has_vocab {
        return Err(not("it has no model.vocab".to_owned()));
    }
    if !found.has_added {
        return Err(not("it has no added_tokens".to_owned()));
    }
    if let Some(why) = listed_twice(&bytes, &mut found) {
        return Err(not(why));
    }
    let mut ids = found.ids;
    for (i, w) in wanted.iter().enumerate() {
        if let Some(a) = found.added.iter().find(|a| &a.content == w) {
            ids[i] = Some(a.id);
        }
    }
    let count = found
        .added
        .iter()
        .fold(found.count, |c, a| c.max(a.id.saturating_add(1)));
    Ok((
        Vocabulary {
            count,
            model_entries: found.model_entries,
            added: found.added,
            source: "the target's tokenizer.json",
            texts: Texts::Json(bytes),
        },
        ids,
    ))
}

/// An id the tokenizer gives two texts: twice in `model.vocab`, twice in `added_tokens`, or in both
/// with another text (an added token repeating its vocabulary entry, same id and same text, is what
/// tokenizers write). Which text such an id means depends on which entry a reader meets first, so
/// the mask rule could answer on either. `found` is a whole scan of `bytes`; the texts of the ids
/// concerned are found by one more scan, only when the two lists share an id.
fn listed_twice(bytes: &[u8], found: &mut Found<'_>) -> Option<String> {
    let mut ids = std::mem::take(&mut found.vocab_ids);
    ids.sort_unstable();
    let twice = ids.windows(2).find(|w| w[0] == w[1]).map(|w| w[0]);
    let mut by_id: Vec<&Added> = found.added.iter().collect();
    by_id.sort_by_key(|a| a.id);
    if let Some(w) = by_id
        .windows(2)
        .find(|w| w[0].id == w[1].id && w[0].content != w[1].content)
    {
        return Some(format!(
            "added_tokens lists id {} twice, as {} and as {}: which text the id means depends on the reader",
            w[0].id,
            quoted(&w[0].content),
            quoted(&w[1].content)
        ));
    }
    let mut sought: Vec<u64> = match twice {
        Some(id) => vec![id],
        None => by_id
            .iter()
            .map(|a| a.id)
            .filter(|id| ids.binary_search(id).is_ok())
            .collect(),
    };
    sought.dedup();
    if sought.is_empty() {
        return None;
    }
    let mut texts = Found::new(Want {
        text_of: None,
        ids_of: &[],
        texts_of: &sought,
    });
    // The bytes were read whole and found valid: this scan fails only where the first did not.
    let _ = scan_all(bytes, &mut texts);
    if let Some(id) = twice {
        let mut of = texts
            .texts
            .iter()
            .filter(|(i, _)| *i == id)
            .map(|(_, t)| quoted(t));
        let (first, second) = (of.next()?, of.next()?);
        return Some(format!(
            "model.vocab lists id {id} twice, as {first} and as {second}: which text the id means depends on the reader"
        ));
    }
    let mut vocab = texts.texts;
    vocab.sort_unstable_by_key(|(id, _)| *id);
    found.added.iter().find_map(|a| {
        let at = vocab.binary_search_by_key(&a.id, |(id, _)| *id).ok()?;
        let text = &vocab[at].1;
        (*text != a.content).then(|| {
            format!(
                "id {} is {} in model.vocab and {} in added_tokens: which text the id means depends on the reader",
                a.id,
                quoted(text),
                quoted(&a.content)
            )
        })
    })
}

/// The keys of one object seen so far, borrowed from the input (a key is copied only when it has
/// escapes to decode).
type Seen<'de> = HashSet<Cow<'de, str>, Keyed>;

fn no_keys<'de>() -> Seen<'de> {
    HashSet::with_hasher(Keyed::new())
}

/// The hash of [`Seen`]: std's SipHash cost more than the rest of reading a 150,000-entry
/// vocabulary, so keys are hashed a word at a time by a folded multiply, keyed by a random seed per
/// set (from std's random keys) so that a file cannot be written to make its keys collide.
#[derive(Clone)]
struct Keyed(u64);

impl Keyed {
    fn new() -> Keyed {
        Keyed(RandomState::new().hash_one(0x6b65_7965_645f_7365_u64))
    }
}

impl BuildHasher for Keyed {
    type Hasher = Fold;
    fn build_hasher(&self) -> Fold {
        Fold(self.0)
    }
}

struct Fold(u64);

impl Fold {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;

    fn mix(&mut self, word: u64) {
        let p = u128::from(self.0 ^ word) * u128::from(Self::K);
        self.0 = (p as u64) ^ ((p >> 64) as u64);
    }
}

impl Hasher for Fold {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            self.mix(u64::from_le_bytes(b));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            // The top byte, never part of a remainder, holds its length: "a" and "a\0" differ.
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            b[7] = rest.len() as u8;
            self.mix(u64::from_le_bytes(b));
        }
    }

    fn finish(&self) -> u64 {
        let p = u128::from(self.0) * u128::from(Self::K.rotate_left(29));
        (p as u64) ^ ((p >> 64) as u64)
    }
}

/// A map key as the input holds it: borrowed when it has no escapes.
struct KeyText;

impl<'de> DeserializeSeed<'de> for KeyText {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyText {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v))
    }
}

/// A value where a token id is expected: `Ok` with a non-negative integer, taken as is (no JSON value
/// is built for it); anything else read whole as a JSON value, `Err`, for [`token_id`] to refuse by
/// name.
struct IdValue;

impl<'de> DeserializeSeed<'de> for IdValue {
    type Value = Result<u64, Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IdValue {
    type Value = Result<u64, Value>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Ok(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Err(Value::from(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        // As serde_json reads a float into a value.
        Ok(Err(
            serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
        ))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Err(Value::Bool(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Err(Value::String(v.to_owned())))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Err(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        serde::Deserialize::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(Err)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        serde::Deserialize::deserialize(de::value::MapAccessDeserializer::new(map)).map(Err)
    }
}

/// A map's next key, refused when it repeats one already seen.
fn key<'de, A: MapAccess<'de>>(
    map: &mut A,
    seen: &mut Seen<'de>,
    at: &str,
) -> Result<Option<Cow<'de, str>>, A::Error> {
    let Some(k) = map.next_key_seed(KeyText)? else {
        return Ok(None);
    };
    if !seen.insert(k.clone()) {
        return Err(de::Error::custom(format_args!(
            "duplicate key {k:?} in {at}"
        )));
    }
    Ok(Some(k))
}

/// A token id: a non-negative integer, else an error naming `what` and the value.
fn token_id<E: de::Error>(v: &Value, what: &dyn fmt::Display) -> Result<u64, E> {
    v.as_u64().ok_or_else(|| {
        E::custom(format_args!(
            "{what} is {}, not a token id (a non-negative integer)",
            shown(v)
        ))
    })
}

/// Each reader below is its own seed: it asks for any value, and its visitor says which it accepts
/// (anything else is an error naming what was expected).
macro_rules! seed {
    ($($ty:ty => $out:ty),* $(,)?) => {$(
        impl<'de> DeserializeSeed<'de> for $ty {
            type Value = $out;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<$out, D::Error> {
                d.deserialize_any(self)
            }
        }
    )*};
}

seed!(
    Top<'_, '_> => (),
    AddedList<'_, '_> => (),
    AddedEntry => Added,
    Model<'_, '_> => (),
    Vocab<'_, '_> => (),
);

/// The top-level object.
struct Top<'a, 'w> {
    found: &'a mut Found<'w>,
}

impl<'de> Visitor<'de> for Top<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = no_keys();
        while let Some(k) = key(&mut map, &mut seen, "the top-level object")? {
            match &*k {
                "added_tokens" => {
                    self.found.has_added = true;
                    map.next_value_seed(AddedList {
                        found: &mut *self.found,
                    })?
                }
                "model" => {
                    self.found.has_model = true;
                    map.next_value_seed(Model {
                        found: &mut *self.found,
                    })?
                }
                _ => map.next_value_seed(Skip { depth: 1 })?,
            }
        }
        Ok(())
    }
}

/// `added_tokens`: an array of `{id, content, special, ...}`.
struct AddedList<'a, 'w> {
    found: &'a mut Found<'w>,
}

impl<'de> Visitor<'de> for AddedList<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("added_tokens as an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        while let Some(entry) = seq.next_element_seed(AddedEntry { index: i })? {
            if self.found.added.len() >= MAX_ADDED_TOKENS {
                return Err(de::Error::custom(format_args!(
                    "added_tokens holds more than the {MAX_ADDED_TOKENS} accepted"
                )));
            }
            self.found.added.push(entry);
            i += 1;
        }
        Ok(())
    }
}

/// One entry of `added_tokens`, at `index`.
struct AddedEntry {
    index: usize,
}

impl<'de> Visitor<'de> for AddedEntry {
    type Value = Added;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "added_tokens[{}] as an object", self.index)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Added, A::Error> {
        let i = self.index;
        let at = format!("added_tokens[{i}]");
        let mut seen = no_keys();
        let (mut id, mut content, mut special) = (None, None, false);
        while let Some(k) = key(&mut map, &mut seen, &at)? {
            match &*k {
                "id" => {
                    let v: Value = map.next_value()?;
                    id = Some(token_id::<A::Error>(&v, &format_args!("{at}.id"))?);
                }
                "content" => match map.next_value::<Value>()? {
                    Value::String(s) => content = Some(s),
                    v => {
                        return Err(de::Error::custom(format_args!(
                            "{at}.content is {}, not a string",
                            shown(&v)
                        )))
                    }
                },
                "special" => match map.next_value::<Value>()? {
                    Value::Bool(b) => special = b,
                    v => {
                        return Err(de::Error::custom(format_args!(
                            "{at}.special is {}, not a boolean",
                            shown(&v)
                        )))
                    }
                },
                _ => map.next_value_seed(Skip { depth: 3 })?,
            }
        }
        match (id, content) {
            (Some(id), Some(content)) => Ok(Added {
                id,
                content,
                special,
            }),
            (None, _) => Err(de::Error::custom(format_args!("{at} has no id"))),
            (_, None) => Err(de::Error::custom(format_args!("{at} has no content"))),
        }
    }
}

/// `model`: an object whose `vocab` is read.
struct Model<'a, 'w> {
    found: &'a mut Found<'w>,
}

impl<'de> Visitor<'de> for Model<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("model as an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = no_keys();
        while let Some(k) = key(&mut map, &mut seen, "model")? {
            if k == "vocab" {
                self.found.has_vocab = true;
                map.next_value_seed(Vocab {
                    found: &mut *self.found,
                })?;
            } else {
                map.next_value_seed(Skip { depth: 2 })?;
            }
        }
        Ok(())
    }
}

/// `model.vocab`: `{text: id}` (BPE, WordPiece, WordLevel) or `[[text, score], ...]` (Unigram, ids
/// by position).
struct Vocab<'a, 'w> {
    found: &'a mut Found<'w>,
}

impl<'de> Visitor<'de> for Vocab<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("model.vocab as an object or an array")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // A scan for one token's text reads bytes already read whole and found valid: it neither
        // checks keys again nor goes on past the token.
        let rescan = self.found.want.text_of.is_some() || !self.found.want.texts_of.is_empty();
        let mut seen = no_keys();
        loop {
            let k = if rescan {
                map.next_key_seed(KeyText)?
            } else if let Some((keyed, hashes)) = &mut self.found.keys {
                let k = map.next_key_seed(KeyText)?;
                if let Some(k) = &k {
                    hashes.push(keyed.hash_one(&**k));
                }
                k
            } else {
                key(&mut map, &mut seen, "model.vocab")?
            };
            let Some(k) = k else { break };
            let id = match map.next_value_seed(IdValue)? {
                Ok(id) => id,
                Err(v) => token_id::<A::Error>(&v, &format_args!("model.vocab[{k:?}]"))?,
            };
            self.found.entry(&k, id);
            if self.found.text.is_some() {
                return Err(de::Error::custom("found the token sought"));
            }
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut id = 0u64;
        while let Some(v) = seq.next_element::<Value>()? {
            match v.as_array().map(Vec::as_slice) {
                Some([Value::String(text), Value::Number(_)]) => self.found.entry(text, id),
                _ => {
                    return Err(de::Error::custom(format_args!(
                        "model.vocab[{id}] is {}, not a [text, score] pair",
                        shown(&v)
                    )))
                }
            }
            id += 1;
        }
        Ok(())
    }
}

/// `target.mask_token`'s second half, once `mask` is known to be a row of the target's embedding
/// (`bound` says below what, as the message words it): the mask is not a live token, and is either a
/// row past the tokenizer's last token or an added special token.
pub fn mask_check(id: &str, mask: u64, bound: &str, tokens: &Tokens) -> Check {
    let live: Vec<String> = tokens
        .live
        .iter()
        .filter(|l| l.id == mask)
        .map(|l| format!("the target's {} token ({})", l.role, l.from))
        .collect();
    if !live.is_empty() {
        return Check::fail(
            id,
            format!(
                "mask_token_id {mask} is {}: a live token, not one of its own (the draft's mask would read as it)",
                live.join(", and ")
            ),
        );
    }
    let first = format!("mask_token_id {mask} is below {bound}");
    if !tokens.unusable.is_empty() {
        return Check::undecided(
            id,
            format!(
                "{first}; cannot decide whether it is a live token: {}",
                tokens.unusable.join("; ")
            ),
        );
    }
    let vocabulary = match &tokens.vocabulary {
        None => {
            return Check::undecided(
                id,
                format!("{first}, and is none of the live ids stated; cannot decide whether it is a token of the target: the target has no tokenizer to read"),
            )
        }
        Some(Err(p)) => {
            return Check::undecided(
                id,
                format!("{first}, and is none of the live ids stated; cannot decide whether it is a token of the target: {}", p.message),
            )
        }
        Some(Ok(v)) => v,
    };
    let source = vocabulary.source;
    if mask >= vocabulary.count {
        return Check::pass(
            id,
            format!(
                "{first}, and is a padded row past the {} tokens of {source}",
                vocabulary.count
            ),
        );
    }
    if let Some(a) = vocabulary.added.iter().find(|a| a.id == mask) {
        let text = quoted(&a.content);
        return if a.special {
            Check::pass(
                id,
                format!("{first}, and is the added special token {text} of {source}"),
            )
        } else {
            Check::fail(
                id,
                format!("mask_token_id {mask} is the added token {text} of {source}, which is not special: text the target writes"),
            )
        };
    }
    if !vocabulary.kinds_known() {
        return Check::undecided(
            id,
            format!("{first}; cannot decide whether it is a special token: the GGUF states no tokenizer.ggml.token_type"),
        );
    }
    match vocabulary.text_of(mask) {
        Some(text) => Check::fail(
            id,
            format!(
                "mask_token_id {mask} is the regular token {} of {source}: text the target writes, so the draft's mask would read as it",
                quoted(&text)
            ),
        ),
        None => Check::pass(
            id,
            format!("{first}, and no token of {source} has that id (a row below its last token that no token uses)"),
        ),
    }
}

/// A token's text as a message shows it: quoted, escaped (one line, no control characters), and cut
/// at 64 characters, saying how long it was.
pub(crate) fn quoted(text: &str) -> String {
    let escaped = crate::escape::escape(text);
    let n = escaped.chars().count();
    if n <= 64 {
        return format!("\"{escaped}\"");
    }
    let cut: String = escaped.chars().take(64).collect();
    format!("\"{cut}...\" ({n} characters)")
}

/// `target.tokenizer` for a tokenizer that is there: readable, and its token count at most the
/// embedding rows (`rows`: the target's vocab_size, or why it has none).
pub fn tokenizer_check(id: &str, tokens: &Tokens, rows: Result<u64, String>) -> Check {
    let v = match &tokens.vocabulary {
        None => {
            return Check::fail(
                id,
                "the target has no tokenizer: a draft serves with its target's tokenizer, so its own (a GGUF draft carries one) is no stand-in",
            )
        }
        Some(Err(p)) if p.undecided => {
            return Check::undecided(id, format!("cannot decide: {}", p.message))
        }
        Some(Err(p)) => return Check::fail(id, p.message.clone()),
        Some(Ok(v)) => v,
    };
    let holds = format!(
        "{} holds {} tokens ({} in its vocabulary, {} added)",
        v.source,
        v.count,
        v.model_entries,
        v.added.len()
    );
    match rows {
        Ok(rows) if v.count <= rows => Check::pass(
            id,
            format!("{holds}, within the target's vocab_size {rows} (drafts share the target's tokenizer)"),
        ),
        Ok(rows) => Check::fail(
            id,
            format!("{holds}, more than the target's vocab_size {rows}: a token id past the embedding's rows"),
        ),
        Err(why) => Check::undecided(
            id,
            format!("{holds}; cannot decide whether the embedding has a row for each: {why}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Outcome;

    /// A tokenizer.json of `vocab` regular tokens "t0".."tN" and the added tokens given.
    fn tokenizer(vocab: u64, added: &[(u64, &str, bool)]) -> Vec<u8> {
        let entries: Vec<String> = (0..vocab).map(|i| format!("\"t{i}\": {i}")).collect();
        let added: Vec<String> = added
            .iter()
            .map(|(id, c, s)| format!(r#"{{"id": {id}, "content": "{c}", "special": {s}}}"#))
            .collect();
        format!(
            r#"{{"version": "1.0", "added_tokens": [{}], "model": {{"type": "BPE", "vocab": {{{}}}, "merges": []}}}}"#,
            added.join(", "),
            entries.join(", ")
        )
        .into_bytes()
    }

    fn parsed(bytes: Vec<u8>) -> Result<Vocabulary, Problem> {
        parse_tokenizer(bytes, &[]).map(|(v, _)| v)
    }

    fn refused(bytes: &[u8], says: &str) {
        let e = parsed(bytes.to_vec()).expect_err("refused");
        assert!(e.message.contains(says), "{says:?} not in {}", e.message);
        assert!(!e.undecided);
    }

    #[test]
    fn counts_are_max_id_plus_one_over_both_lists() {
        let v = parsed(tokenizer(
            10,
            &[(10, "<|eot|>", true), (12, "<|MASK|>", true)],
        ))
        .unwrap();
        assert_eq!((v.count, v.model_entries, v.added.len()), (13, 10, 2));
        assert_eq!(v.text_of(3).as_deref(), Some("t3"));
        assert_eq!(v.text_of(11), None);
        // Unigram: [text, score] pairs, ids by position.
        let unigram =
            br#"{"added_tokens": [], "model": {"type": "Unigram", "vocab": [["a", 0.0], ["b", -1.5]]}}"#;
        let v = parsed(unigram.to_vec()).unwrap();
        assert_eq!((v.count, v.text_of(1).as_deref()), (2, Some("b")));
    }

    #[test]
    fn a_tokenizer_is_read_strictly() {
        refused(b"{\"added_tokens\": [", "not a tokenizer");
        refused(b"[]", "expected a JSON object");
        refused(br#"{"version": "1.0"}"#, "no model.vocab");
        refused(br#"{"model": {"vocab": {}}}"#, "no added_tokens");
        refused(
            br#"{"added_tokens": [], "model": {"vocab": {"a": 0, "a": 1}}}"#,
            "duplicate key \"a\" in model.vocab",
        );
        // The same key spelt with an escape, and a repeat far from the first.
        refused(
            br#"{"added_tokens": [], "model": {"vocab": {"a": 0, "b": 1, "\u0061": 2}}}"#,
            "duplicate key \"a\" in model.vocab",
        );
        let mut far = tokenizer(5000, &[]);
        far.truncate(far.len() - "}, \"merges\": []}}".len());
        far.extend_from_slice(b", \"t17\": 9}, \"merges\": []}}");
        refused(&far, "duplicate key \"t17\" in model.vocab");
        assert!(distinct(&[3, 1 << 63, 2, 1]) && !distinct(&[5, 1 << 63, 7, 5]));
        refused(
            br#"{"added_tokens": [], "added_tokens": [], "model": {"vocab": {}}}"#,
            "duplicate key \"added_tokens\"",
        );
        refused(
            br#"{"added_tokens": {"id": 1}, "model": {"vocab": {}}}"#,
            "expected added_tokens as an array",
        );
        refused(
            br#"{"added_tokens": [{"id": -1, "content": "x"}], "model": {"vocab": {}}}"#,
            "added_tokens[0].id is -1, not a token id",
        );
        refused(
            br#"{"added_tokens": [{"id": 2.5, "content": "x"}], "model": {"vocab": {}}}"#,
            "added_tokens[0].id is 2.5, not a token id",
        );
        refused(
            br#"{"added_tokens": [], "model": {"vocab": {"a": "0"}}}"#,
            "model.vocab[\"a\"] is \"0\", a string, not a token id",
        );
        refused(
            br#"{"added_tokens": [{"content": "x"}], "model": {"vocab": {}}}"#,
            "added_tokens[0] has no id",
        );
        refused(
            br#"{"added_tokens": [], "model": {"vocab": [["a", 0.0], 7]}}"#,
            "model.vocab[1] is 7, not a [text, score] pair",
        );
        // An id as large as u64 allows counts saturated, never wrapped.
        let v = parsed(
            br#"{"added_tokens": [{"id": 18446744073709551615, "content": "x"}], "model": {"vocab": {}}}"#
                .to_vec(),
        )
        .unwrap();
        assert_eq!(v.count, u64::MAX);
    }

    #[test]
    fn an_id_is_one_text() {
        // An added token repeating its vocabulary entry, as real tokenizers write them, is one text.
        let v = parsed(tokenizer(10, &[(3, "t3", true), (10, "<x>", true)])).unwrap();
        assert_eq!((v.count, v.model_entries, v.added.len()), (11, 10, 2));
        refused(
            &tokenizer(10, &[(3, "<|MASK|>", true)]),
            "id 3 is \"t3\" in model.vocab and \"<|MASK|>\" in added_tokens",
        );
        refused(
            br#"{"added_tokens": [], "model": {"vocab": {"a": 0, "b": 7, "c": 7}}}"#,
            "model.vocab lists id 7 twice, as \"b\" and as \"c\"",
        );
        refused(
            br#"{"added_tokens": [{"id": 4, "content": "<a>"}, {"id": 4, "content": "<b>"}], "model": {"vocab": {}}}"#,
            "added_tokens lists id 4 twice, as \"<a>\" and as \"<b>\"",
        );
        // The same added token twice is one text.
        let twice = br#"{"added_tokens": [{"id": 4, "content": "<a>"}, {"id": 4, "content": "<a>"}], "model": {"vocab": {}}}"#;
        assert!(parsed(twice.to_vec()).is_ok());
    }

    fn tokens(bytes: Vec<u8>, live: &[(&'static str, u64, &str)]) -> Tokens {
        Tokens {
            vocabulary: Some(parsed(bytes)),
            live: live
                .iter()
                .map(|&(role, id, from)| Live {
                    role,
                    id,
                    from: from.to_string(),
                })
                .collect(),
            unusable: Vec::new(),
        }
    }

    fn expect(c: Check, outcome: Outcome, says: &str) {
        assert!(
            c.outcome == outcome && c.message.contains(says),
            "expected {outcome} saying {says:?}, got {}: {}",
            c.outcome,
            c.message
        );
    }

    #[test]
    fn the_mask_rule() {
        let t = tokens(
            tokenizer(
                10,
                &[
                    (10, "<|eot|>", true),
                    (11, "<think>", false),
                    (13, "<|MASK|>", true),
                ],
            ),
            &[("eos", 10, "eos_token_id in generation_config.json")],
        );
        let check = |m| mask_check("target.mask_token", m, "the target's vocab_size 20", &t);
        expect(check(14), Outcome::Pass, "a padded row past the 14 tokens");
        expect(
            check(13),
            Outcome::Pass,
            "the added special token \"<|MASK|>\"",
        );
        expect(check(3), Outcome::Fail, "the regular token \"t3\"");
        expect(check(11), Outcome::Fail, "the added token \"<think>\"");
        expect(
            check(12),
            Outcome::Pass,
            "no token of the target's tokenizer.json has that id",
        );
        expect(
            check(10),
            Outcome::Fail,
            "the target's eos token (eos_token_id in generation_config.json)",
        );
        let none = Tokens::default();
        expect(
            mask_check("m", 3, "x", &none),
            Outcome::Undecided,
            "the target has no tokenizer to read",
        );
        let unusable = Tokens {
            unusable: vec![
                "eos_token_id in the target's config.json is \"2\", a string, not a token id"
                    .to_owned(),
            ],
            ..t.clone()
        };
        expect(
            mask_check("m", 14, "x", &unusable),
            Outcome::Undecided,
            "cannot decide whether it is a live token",
        );
    }

    #[test]
    fn the_token_count_is_held_to_the_rows() {
        let t = tokens(tokenizer(10, &[(11, "<x>", true)]), &[]);
        expect(
            tokenizer_check("t", &t, Ok(12)),
            Outcome::Pass,
            "holds 12 tokens",
        );
        expect(
            tokenizer_check("t", &t, Ok(11)),
            Outcome::Fail,
            "holds 12 tokens (10 in its vocabulary, 1 added), more than the target's vocab_size 11",
        );
        expect(
            tokenizer_check("t", &t, Err("no vocab_size".into())),
            Outcome::Undecided,
            "no vocab_size",
        );
    }

    #[test]
    fn live_ids_are_read_with_where() {
        let mut t = Tokens::default();
        let config: Value = serde_json::from_str(
            r#"{"bos_token_id": 1, "eos_token_id": [2, 3], "pad_token_id": -1}"#,
        )
        .unwrap();
        live_ids(&config, "config.json", &mut t);
        let ids: Vec<(&str, u64)> = t.live.iter().map(|l| (l.role, l.id)).collect();
        assert_eq!(ids, [("bos", 1), ("eos", 2), ("eos", 3)]);
        assert_eq!(t.live[2].from, "eos_token_id in config.json");
        let bad: Value = serde_json::from_str(r#"{"eos_token_id": 2.0}"#).unwrap();
        live_ids(&bad, "generation_config.json", &mut t);
        assert_eq!(
            t.unusable,
            ["eos_token_id in the target's generation_config.json is 2.0, not a token id"]
        );
        // tokenizer_config.json names tokens by text, resolved through the tokenizer.
        let tc: Value = serde_json::from_str(
            r#"{"eos_token": {"content": "<|eot|>", "special": true}, "pad_token": "t4", "unk_token": null}"#,
        )
        .unwrap();
        let named = named_tokens(&tc, &mut t);
        let wanted: Vec<String> = named.iter().map(|n| n.2.clone()).collect();
        let (_, ids) = parse_tokenizer(tokenizer(10, &[(10, "<|eot|>", true)]), &wanted).unwrap();
        assert_eq!(ids, [Some(10), Some(4)]);
        assert_eq!(named[0].1, "eos_token in tokenizer_config.json");
    }

    #[test]
    fn a_gguf_token_list_serves_the_same_rule() {
        let list: Vec<String> = ["a", "b", "<eos>", "<mask>"].map(String::from).to_vec();
        let t = Tokens::from_gguf(
            list.clone(),
            Some(&[1, 1, 3, 4][..]),
            None,
            Some(2),
            None,
            Some(-1),
        );
        let check = |t: &Tokens, m| mask_check("m", m, "x", t);
        expect(
            check(&t, 3),
            Outcome::Pass,
            "the added special token \"<mask>\" of the target GGUF's tokenizer.ggml.tokens",
        );
        expect(check(&t, 1), Outcome::Fail, "the regular token \"b\"");
        expect(
            check(&t, 2),
            Outcome::Fail,
            "eos token (tokenizer.ggml.eos_token_id in the GGUF)",
        );
        expect(
            check(&t, 4),
            Outcome::Pass,
            "a padded row past the 4 tokens",
        );
        let untyped = Tokens::from_gguf(list, None, None, None, None, None);
        expect(
            check(&untyped, 1),
            Outcome::Undecided,
            "states no tokenizer.ggml.token_type",
        );
    }
}
