//! A draft as llama.cpp loads it: one GGUF file (`general.architecture` `dflash`), its metadata the
//! config and its tensors under llama.cpp's names (`blk.{i}.attn_q.weight`, `fc.weight`, ...).
//!
//! The file is read by the strict GGUF reader `--source FILE.gguf` uses (section 12.1's container
//! rules): a file it refuses is this draft's `container.parses` FAIL, and every check that needs what
//! it holds is listed, blocked by it. The checks carry the folder's ids, so a report reads the same
//! whatever the form: `config.is_dflash` (the architecture), `config.geometry` (the metadata keys the
//! graph is built from), `config.mask_token` (the mask id a special token of the tokenizer the file
//! carries), `inventory.complete` and `inventory.explained` (the tensors llama.cpp creates
//! for that metadata, each of its `ne` shape, and nothing else: its loader refuses a file with a
//! tensor missing, misshapen or left over), `bf16.finite` (every float value and every block scale
//! finite).

use crate::checks::{self, list, list_of, GEOMETRY, IS_DFLASH, PARSES};
use crate::config::{DraftConfig, DRAFT_ARCHITECTURE};
use crate::container::shape_text;
use crate::error::PackageError;
use crate::escape::escape;
use crate::evaluation::Evaluation;
use crate::evidence::ConfigMaskToken;
use crate::form::Form;
use crate::gguf::{self as blocks, Gguf, Header, TensorInfo, Value, ValueType};
use crate::limits::{MAX_CENSUS_TENSORS, MAX_VOCAB};
use crate::report::{Check, FileCensus, NotChecked, Report, TensorCensus};
use std::path::Path;

/// The mask rule's check for a GGUF draft: its mask id's type in the tokenizer it carries.
const MASK_TOKEN: &str = crate::check_id::CheckId::CONFIG_MASK_TOKEN;

/// The architecture upstream llama.cpp builds a DFlash draft's graph for.
pub const ARCHITECTURE: &str = "dflash";

/// Architectures forks of llama.cpp write for their DFlash drafts: recognised, never read as a draft
/// upstream loads.
pub const FORK_DIALECTS: [&str; 3] = [
    "dflash-draft",
    "gemma4-dflash-draft",
    "deepseek4-dflash-draft",
];

/// Who writes or reads each fork dialect, as their published code says, so that a user holding
/// one knows which runtime it was made for (all three are Lucebox's, github.com/Luce-Org/lucebox).
fn fork_of(dialect: &str) -> &'static str {
    match dialect {
        "gemma4-dflash-draft" => {
            "written by Lucebox's Gemma 4 DFlash converter and read by its runtime"
        }
        "deepseek4-dflash-draft" => {
            "the DeepSeek-V4 DSpark drafters Lucebox publishes, read by its runtime"
        }
        _ => "read by Lucebox's DFlash runtime beside its qwen35 and gemma4 dialects",
    }
}

/// What a GGUF draft's checks leave open. `--manifest` is refused for this form, so its line says so
/// rather than pointing at it; `--target` answers the first when it is given, `--source` the second.
const NOT_CHECKED: [NotChecked; 5] = [
    NotChecked::TargetAgreement,
    NotChecked::ConvertedContent,
    NotChecked::Provenance,
    NotChecked::ForwardPass,
    NotChecked::FilesBesideTheGguf,
];

/// The metadata the graph is built from, read from the file's keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub layers: u64,
    pub hidden: u64,
    pub intermediate: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub block_size: u64,
    /// `{a}.target_layers` as stored: each HF id plus one.
    pub target_layers: Vec<u64>,
    pub mask_token_id: u64,
    /// The key the mask token id was read from: `tokenizer.ggml.mask_token_id`, or the older
    /// `{a}.mask_token_id`.
    pub mask_key: String,
    pub vocab: Option<u64>,
    /// DFlash2's convolution, `(conv_kernel_size, conv_group_size)`, and candidate selector,
    /// `(selector_rank, selector_top_k)`: the four keys all or none (spec 18.3).
    pub dflash2: Option<((u64, u64), (u64, u64))>,
}

pub use crate::gguf::DFLASH2_KEYS;

/// The tensors llama.cpp b11434 creates for a DSpark draft beside the dflash graph (its
/// `load_arch_tensors`, `src/models/dflash.cpp`): the Markov head (`markov_w1.weight`, whose
/// presence is what makes llama.cpp build one, `markov_w2.weight` and its optional scale), the
/// optional confidence head (`conf_proj`), and the reduced vocabulary's map `d2t`, which only the
/// converter's `DSparkModel` writes.
pub const DSPARK_TENSORS: [&str; 6] = [
    "markov_w1.weight",
    "markov_w2.weight",
    "markov_w2.scale",
    "conf_proj.weight",
    "conf_proj.bias",
    "d2t",
];

/// DSpark's keys ([`crate::gguf::DSPARK_KEYS`] after `dflash.`) and tensors ([`DSPARK_TENSORS`]) the
/// file holds, named in that order. DSpark's GGUF layout is not settled upstream (spec 18.3): a draft
/// holding any of them is UNDECIDED naming them, never held to the dflash graph alone (which would
/// call its heads unexplained, or its reduced head misshapen) and never passed.
pub fn dspark_parts(header: &Header) -> Vec<String> {
    let a = ARCHITECTURE;
    let keys = crate::gguf::DSPARK_KEYS
        .iter()
        .map(|k| format!("{a}.{k}"))
        .filter(|k| header.get(k).is_some());
    let tensors = DSPARK_TENSORS
        .iter()
        .filter(|t| header.tensor(t).is_some())
        .map(|t| (*t).to_owned());
    keys.chain(tensors).collect()
}

/// The GGUF's checks. `path` is the `.gguf` file; the file comes back open with the evaluation so the
/// caller can prove, when the report is done, that it still holds what was read.
pub fn evaluation(
    path: &Path,
    package: &str,
    files: Vec<FileCensus>,
) -> Result<(Evaluation<'static>, Option<Gguf>), PackageError> {
    let mut evaluation = Evaluation::start(package, Form::Gguf, files, &NOT_CHECKED);
    let report = &mut evaluation.report;
    report.given("--manifest", "not read for a GGUF draft yet");
    let gguf = match Gguf::open(path) {
        Ok(g) => g,
        Err(PackageError::Malformed { why, .. }) => {
            let blocked = "not run: the GGUF does not parse, so its metadata was not read";
            report
                .checks
                .push(Check::blocked(IS_DFLASH, PARSES, blocked));
            report
                .checks
                .push(Check::blocked(GEOMETRY, PARSES, blocked));
            report
                .checks
                .push(Check::blocked(MASK_TOKEN, PARSES, blocked));
            report.checks.push(Check::fail(
                PARSES,
                format!("the GGUF does not parse: {why}"),
            ));
            super::folder::blocked(report, "the GGUF does not parse");
            return Ok((evaluation, None));
        }
        Err(e) => return Err(e),
    };
    let header = &gguf.header;
    if let Some(Value::Integer(count)) = header.get(crate::gguf::SPLIT_COUNT_KEY).map(|k| &k.value)
    {
        if *count > 1 {
            return Err(PackageError::Malformed {
                path: path.to_owned(),
                why: format!("{} is {count}: the file is one shard of a split GGUF, and a split draft is not read (merge it with llama.cpp's gguf-split --merge first)", crate::gguf::SPLIT_COUNT_KEY),
            });
        }
    }
    let architecture = is_dflash(header);
    let dflash = architecture.outcome() == crate::report::Outcome::Pass;
    report.checks.push(architecture);
    if !dflash {
        // The file did parse: that is said, and only what needs a draft is blocked.
        super::folder::not_a_draft_parsed(
            report,
            parses(header),
            "not run: the GGUF holds no draft upstream llama.cpp loads as one",
        );
        report.checks.push(Check::blocked(
            MASK_TOKEN,
            IS_DFLASH,
            "not run: the GGUF holds no draft upstream llama.cpp loads as one",
        ));
        return Ok((evaluation, Some(gguf)));
    }
    report.census.family = Some("dflash");
    let meta = read_meta(header, ARCHITECTURE).and_then(|m| {
        match token_count(&gguf, &m)
            .or_else(|| gguf.token_types_fault())
            .or_else(|| mask_token(&gguf, &m))
        {
            Some(problem) => Err(vec![problem]),
            None => Ok(m),
        }
    });
    if let Ok(Meta {
        dflash2: Some(_), ..
    }) = &meta
    {
        report.census.family = Some(crate::family::DFLASH2.token);
    }
    let dspark = dspark_parts(header);
    report.checks.push(geometry_check(&meta, &dspark));
    report.checks.push(mask_type(&gguf, &meta));
    report.checks.push(parses(header));
    census(report, &gguf, path);
    match &meta {
        Ok(_) if !dspark.is_empty() => {
            for id in [checks::inventory::COMPLETE, checks::inventory::EXPLAINED] {
                report.checks.push(Check::blocked(
                    id,
                    GEOMETRY,
                    "not run: the tensors llama.cpp creates for a DSpark draft follow from DSpark's keys and tensors, which the gate does not read",
                ));
            }
        }
        Ok(meta) => {
            // llama.cpp sizes an own embedding table and head by its vocabulary's token count
            // (n_vocab), which dflash.vocab_size only restates: without that key, the tokens are
            // what the tensors are held to.
            let meta = Meta {
                vocab: meta.vocab.or_else(|| gguf.token_count()),
                ..meta.clone()
            };
            let [complete, explained] = inventory(&meta, &header.tensors);
            report.checks.push(complete);
            report.checks.push(explained);
        }
        Err(_) => {
            for id in [checks::inventory::COMPLETE, checks::inventory::EXPLAINED] {
                report.checks.push(Check::blocked(
                    id,
                    GEOMETRY,
                    "not run: the tensors' shapes follow from the metadata config.geometry did not accept",
                ));
            }
        }
    }
    let finite = finite(&gguf).map_err(|p| PackageError::internal(path, p))?;
    report.checks.push(finite);
    Ok((evaluation, Some(gguf)))
}

/// `container.parses` for a GGUF whose header was read whole.
fn parses(header: &Header) -> Check {
    Check::pass(
        PARSES,
        format!(
            "the GGUF parses: version {}, {} metadata entries, {} tensors, {} bytes",
            header.version,
            header.metadata_count,
            header.tensors.len(),
            data_end(header)
        ),
    )
}

/// `config.is_dflash`: `general.architecture` is `dflash`.
fn is_dflash(header: &Header) -> Check {
    match header.architecture() {
        Some(ARCHITECTURE) => Check::pass(
            IS_DFLASH,
            "general.architecture is \"dflash\": a DFlash draft, in a GGUF file as llama.cpp loads it",
        ),
        Some(fork) if FORK_DIALECTS.contains(&fork) => Check::undecided(
            IS_DFLASH,
            format!(
                "cannot decide: general.architecture is \"{fork}\", a fork's DFlash dialect ({}, github.com/Luce-Org/lucebox): upstream llama.cpp does not load it (its draft architecture is \"dflash\"), and the gate does not read the fork's graph",
                fork_of(fork)
            ),
        ),
        Some(other) => Check::fail(
            IS_DFLASH,
            format!(
                "general.architecture is \"{}\": not a draft (a DFlash draft's GGUF is \"dflash\")",
                escape(other)
            ),
        ),
        None => Check::fail(
            IS_DFLASH,
            "general.architecture is absent or not a string: not a draft (a DFlash draft's GGUF is \"dflash\")",
        ),
    }
}

/// Tensors every layer of llama.cpp's dflash graph creates (see [`expected`]).
const LAYER_TENSORS: u64 = 11;

/// A metadata value as a refusal quotes it.
fn value_text(value: &Value) -> String {
    match value {
        Value::Integer(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => format!("\"{}\"", escape(s)),
        Value::Array { element, count, .. } => format!("an array of {count} {element}"),
    }
}

/// A kept metadata value as the census lists it: a string as itself (escaped as names are), an f32
/// as the f32 it is (not its f64 widening's digits), an integer array kept whole as its values,
/// another array as its length and type.
fn metadata_text(kept: &crate::gguf::Kept) -> String {
    match &kept.value {
        Value::String(s) => escape(s).into_owned(),
        Value::Float(f) if kept.ty == ValueType::F32 => (*f as f32).to_string(),
        Value::Array {
            integers: Some(values),
            ..
        } => format!("{values:?}"),
        other => value_text(other),
    }
}

/// The metadata, or every key that is absent or unusable, named.
pub fn read_meta(header: &Header, a: &str) -> Result<Meta, Vec<String>> {
    let mut problems = Vec::new();
    // llama.cpp reads each of these as a u32 and refuses the file when the key has any other type
    // ("key ... has wrong type"), so another integer type is a FAIL, not a value to widen.
    let int = |key: String, problems: &mut Vec<String>| -> Option<u64> {
        let kept = header.get(&key);
        match kept.map(|k| (k.ty, &k.value)) {
            None => {
                problems.push(format!("{} is absent (required)", escape(&key)));
                None
            }
            Some((ValueType::U32, Value::Integer(i))) if *i >= 1 => Some(*i as u64),
            Some((ValueType::U32, Value::Integer(i))) => {
                problems.push(format!("{} is {i}, not a count of 1 or more", escape(&key)));
                None
            }
            Some((ty, _)) => {
                problems.push(format!(
                    "{} is stored as {ty}: llama.cpp reads it only as a u32 and refuses any other type",
                    escape(&key)
                ));
                None
            }
        }
    };
    let layers = int(format!("{a}.block_count"), &mut problems);
    // Each layer is 11 tensors, so a count the file's tensors cannot hold is refused before a
    // list of names is built from it.
    let layers = match layers {
        Some(n) if n.saturating_mul(LAYER_TENSORS) > header.tensors.len() as u64 => {
            problems.push(format!(
                "{a}.block_count is {n}: {n} layers need {} tensors, and the file holds {}",
                n.saturating_mul(LAYER_TENSORS),
                header.tensors.len()
            ));
            None
        }
        other => other,
    };
    // Required by the draft's contract (llama.cpp would fall back to its own defaults, which are
    // not the target's), and read by llama.cpp only as an f32.
    for key in [
        format!("{a}.rope.freq_base"),
        format!("{a}.attention.layer_norm_rms_epsilon"),
    ] {
        match header.get(&key).map(|k| (k.ty, &k.value)) {
            None => problems.push(format!("{} is absent (required)", escape(&key))),
            // Both divide or scale every step: zero, a negative, an infinity or a NaN loads and
            // then gives norms or rotations of no use (llama.cpp checks neither).
            Some((ValueType::F32, Value::Float(f))) if f.is_finite() && *f > 0.0 => {}
            Some((ValueType::F32, Value::Float(f))) => problems.push(format!(
                "{} is {f}, not a finite positive number",
                escape(&key)
            )),
            Some((ty, _)) => problems.push(format!(
                "{} is stored as {ty}: llama.cpp reads it only as an f32 and refuses any other type",
                escape(&key)
            )),
        }
    }
    let hidden = int(format!("{a}.embedding_length"), &mut problems);
    let intermediate = int(format!("{a}.feed_forward_length"), &mut problems);
    let heads = int(format!("{a}.attention.head_count"), &mut problems);
    let kv_heads = int(format!("{a}.attention.head_count_kv"), &mut problems);
    let block_size = int(format!("{a}.block_size"), &mut problems);
    let head_dim = match header.get(&format!("{a}.attention.key_length")) {
        Some(_) => int(format!("{a}.attention.key_length"), &mut problems),
        // llama.cpp's default: the embedding split evenly across the heads.
        None => match (hidden, heads) {
            (Some(h), Some(n)) if h % n == 0 => Some(h / n),
            (Some(h), Some(n)) => {
                problems.push(format!(
                    "{a}.attention.key_length is absent and {a}.embedding_length {h} is not a multiple of {a}.attention.head_count {n}"
                ));
                None
            }
            _ => None,
        },
    };
    // llama.cpp sizes attn_v by value_length, whose default is the embedding split across the
    // heads (not key_length), and its dflash graph asserts the two head sizes equal: a file whose
    // value head differs loads no graph. Its converter writes both from config.json's head_dim.
    let value_key = format!("{a}.attention.value_length");
    let value_dim = match header.get(&value_key) {
        Some(_) => int(value_key.clone(), &mut problems).map(|v| (v, true)),
        None => hidden.zip(heads).map(|(h, n)| (h / n, false)),
    };
    if let (Some(k), Some((v, stated))) = (head_dim, value_dim) {
        if k != v {
            let value = if stated {
                format!("{} is {v}", escape(&value_key))
            } else {
                format!(
                    "{} is absent, so llama.cpp takes {a}.embedding_length / {a}.attention.head_count = {v} for it",
                    escape(&value_key)
                )
            };
            problems.push(format!(
                "{value} and the key head is {k}: llama.cpp's dflash graph requires equal key and value heads (it sizes attn_v by value_length; its converter writes both from head_dim)"
            ));
        }
    }
    if let (Some(n), Some(kv)) = (heads, kv_heads) {
        if n % kv != 0 {
            problems.push(format!(
                "{a}.attention.head_count {n} is not a multiple of {a}.attention.head_count_kv {kv}"
            ));
        }
    }
    if block_size == Some(1) {
        problems.push(format!(
            "{a}.block_size is 1: a draft proposes at least one token past the anchor (2 or more)"
        ));
    }
    let taps_key = format!("{a}.target_layers");
    let target_layers = match header.get(&taps_key).map(|k| &k.value) {
        None => {
            problems.push(format!(
                "{} is absent (required: the target layers whose hidden states the draft reads; the gate never guesses them)",
                escape(&taps_key)
            ));
            None
        }
        Some(Value::Array {
            element,
            integers: Some(values),
            ..
        }) if !values.is_empty() && matches!(element, ValueType::I32 | ValueType::U32) => {
            if let Some(bad) = values.iter().find(|&&v| v < 1 || v > i128::from(u32::MAX)) {
                problems.push(format!(
                    "{} holds {bad}: each is an HF layer id plus one, so at least 1",
                    escape(&taps_key)
                ));
                None
            } else if values.windows(2).any(|w| w[0] >= w[1]) {
                problems.push(format!(
                    "{} is {values:?}: not strictly increasing (HF ids {:?})",
                    escape(&taps_key),
                    values.iter().map(|v| v - 1).collect::<Vec<_>>()
                ));
                None
            } else {
                Some(values.iter().map(|&v| v as u64).collect::<Vec<u64>>())
            }
        }
        Some(_) => {
            problems.push(format!(
                "{} is not a non-empty array of i32 or u32 (llama.cpp refuses any other array)",
                escape(&taps_key)
            ));
            None
        }
    };
    let mask_key = [
        crate::gguf::MASK_KEY.to_owned(),
        format!("{a}.mask_token_id"),
    ]
    .into_iter()
    .find(|k| header.get(k).is_some());
    let mask_token_id = match &mask_key {
        None => {
            problems.push(format!(
                "tokenizer.ggml.mask_token_id (or the older {a}.mask_token_id) is absent (required: the token the draft fills its block with)"
            ));
            None
        }
        Some(key) => match header.get(key).map(|k| (k.ty, &k.value)) {
            Some((ValueType::U32, Value::Integer(i))) => Some(*i as u64),
            _ => {
                problems.push(format!(
                    "{} is not a token id (llama.cpp reads it only as a u32)",
                    escape(key)
                ));
                None
            }
        },
    };
    // Both keys stated: they must agree, or which one a reader takes decides the mask.
    let older = format!("{a}.mask_token_id");
    if let (Some(key), Some(mask), Some(other)) = (&mask_key, mask_token_id, header.get(&older)) {
        if key != &older && !matches!(other.value, Value::Integer(i) if i == i128::from(mask)) {
            problems.push(format!(
                "{} is {mask} and {} is {}: the mask token is stated twice, differently",
                escape(key),
                escape(&older),
                value_text(&other.value)
            ));
        }
    }
    let vocab_key = format!("{a}.vocab_size");
    let vocab = match header.get(&vocab_key).map(|k| (k.ty, &k.value)) {
        None => None,
        Some((ValueType::U32, Value::Integer(i))) if *i > i128::from(MAX_VOCAB) => {
            problems.push(format!(
                "{} is {i}, beyond the gate's limit of {MAX_VOCAB}",
                escape(&vocab_key)
            ));
            None
        }
        Some((ValueType::U32, Value::Integer(i))) if *i >= 1 => Some(*i as u64),
        Some(_) => {
            problems.push(format!(
                "{} is not a u32 count of 1 or more",
                escape(&vocab_key)
            ));
            None
        }
    };
    if let (Some(mask), Some(vocab)) = (mask_token_id, vocab) {
        if mask >= vocab {
            problems.push(format!(
                "the mask token id {mask} is not below {a}.vocab_size {vocab}"
            ));
        }
    }
    let dflash2 = dflash2_keys(header, a, hidden, vocab, &mut problems);
    if !problems.is_empty() {
        return Err(problems);
    }
    // Every key was read (a problem would have been named above).
    let meta = || {
        Some(Meta {
            layers: layers?,
            hidden: hidden?,
            intermediate: intermediate?,
            heads: heads?,
            kv_heads: kv_heads?,
            head_dim: head_dim?,
            block_size: block_size?,
            target_layers: target_layers?,
            mask_token_id: mask_token_id?,
            mask_key: mask_key.clone()?,
            vocab,
            dflash2,
        })
    };
    meta().ok_or_else(|| vec!["a required key is unusable".to_owned()])
}

/// DFlash2's four keys (spec 18.3): all or none, each a u32 count llama.cpp reads, the group dividing
/// the hidden size (the convolution's projection is sized by `hidden / group`), and the selector's
/// top k at most the vocabulary (the gate's limit when the file states none).
fn dflash2_keys(
    header: &Header,
    a: &str,
    hidden: Option<u64>,
    vocab: Option<u64>,
    problems: &mut Vec<String>,
) -> Option<((u64, u64), (u64, u64))> {
    let keys = DFLASH2_KEYS.map(|k| format!("{a}.{k}"));
    let stated: Vec<&String> = keys.iter().filter(|k| header.get(k).is_some()).collect();
    if stated.is_empty() {
        return None;
    }
    if stated.len() < keys.len() {
        let absent: Vec<String> = keys
            .iter()
            .filter(|k| header.get(k).is_none())
            .map(|k| escape(k).into_owned())
            .collect();
        problems.push(format!(
            "{} stated without {}: DFlash2's four keys are all or none",
            list(
                &stated
                    .iter()
                    .map(|k| escape(k).into_owned())
                    .collect::<Vec<_>>(),
                4
            ),
            list(&absent, 4)
        ));
        return None;
    }
    let mut values = [0u64; 4];
    for (value, key) in values.iter_mut().zip(&keys) {
        match header.get(key).map(|k| (k.ty, &k.value)) {
            Some((ValueType::U32, Value::Integer(i))) if *i >= 1 => *value = *i as u64,
            Some((ValueType::U32, Value::Integer(i))) => {
                problems.push(format!("{} is {i}, not a count of 1 or more", escape(key)));
                return None;
            }
            _ => {
                problems.push(format!(
                    "{} is not a u32 (llama.cpp reads it only as a u32)",
                    escape(key)
                ));
                return None;
            }
        }
    }
    let [kernel, group, rank, top_k] = values;
    if let Some(h) = hidden.filter(|h| h % group != 0) {
        problems.push(format!(
            "{} is {group}, which does not divide {a}.embedding_length {h}",
            escape(&keys[1])
        ));
    }
    let (bound, of) = match vocab {
        Some(v) => (v, format!("{a}.vocab_size")),
        None => (MAX_VOCAB, "the gate's limit on a vocabulary".to_owned()),
    };
    if top_k > bound {
        problems.push(format!(
            "{} is {top_k}, more than {of} {bound}: the selector keeps at most every token",
            escape(&keys[3])
        ));
    }
    // llama.cpp's dflash graph lays the selector's top-k lattice out across the hidden state, and
    // refuses a draft whose embedding is narrower (its load_arch_tensors).
    let lattice = top_k.saturating_mul(top_k.saturating_add(1));
    if let Some(h) = hidden.filter(|h| *h < lattice) {
        problems.push(format!(
            "{} is {top_k}, whose selector lattice needs {a}.embedding_length of at least {top_k} x {} = {lattice}, not {h}: llama.cpp refuses it (DFlash2 hidden size is too small for the selector lattice)",
            escape(&keys[3]),
            top_k.saturating_add(1)
        ));
    }
    if kernel > crate::limits::MAX_DIMENSION || rank > crate::limits::MAX_DIMENSION {
        problems.push(format!(
            "{} {kernel} or {} {rank} is beyond the gate's limit of {}",
            escape(&keys[0]),
            escape(&keys[2]),
            crate::limits::MAX_DIMENSION
        ));
    }
    Some(((kernel, group), (rank, top_k)))
}

/// The token list against `vocab_size`: a token past the embedding's rows is an id the draft
/// cannot read nor its head emit. Fewer tokens than rows is a padded table, as a target's may be.
fn token_count(gguf: &Gguf, meta: &Meta) -> Option<String> {
    let (vocab, count) = (meta.vocab?, gguf.token_count()?);
    (count > vocab).then(|| {
        format!(
            "{} holds {count} tokens, more than {ARCHITECTURE}.vocab_size {vocab}: a token id past the embedding's rows",
            crate::gguf::TOKENS_KEY
        )
    })
}

/// The vocabulary rule's part the graph needs: the mask id is none of the tokenizer's special tokens,
/// and (when the file carries `tokenizer.ggml.token_type`) a token of the vocabulary. Its type is
/// [`mask_type`]'s.
fn mask_token(gguf: &Gguf, meta: &Meta) -> Option<String> {
    let mask = meta.mask_token_id;
    for key in &crate::gguf::KEPT_TOKENIZER_KEYS[1..] {
        if let Some(Value::Integer(i)) = gguf.header.get(key).map(|k| &k.value) {
            if *i == i128::from(mask) {
                return Some(format!(
                    "the mask token id {mask} is {key}: the mask must be a token of its own"
                ));
            }
        }
    }
    let key = crate::gguf::TOKEN_TYPE_KEY;
    let (count, ty) = gguf.token_type(mask)?;
    ty.is_none().then(|| {
        format!("the mask token id {mask} is not a token of the vocabulary ({key} holds {count})")
    })
}

/// `config.mask_token`: the mask id is a special token of the tokenizer the GGUF carries (its
/// target's), typed CONTROL, USER_DEFINED or UNUSED in `tokenizer.ggml.token_type`. A NORMAL token
/// is text the target writes, so the draft's mask would read as it: the mask rule's refusal, not the
/// geometry's (llama.cpp builds and loads such a draft all the same).
fn mask_type(gguf: &Gguf, meta: &Result<Meta, Vec<String>>) -> Check {
    // llama.cpp's `llama_token_type`.
    const CONTROL: i32 = 3;
    const USER_DEFINED: i32 = 4;
    const UNUSED: i32 = 5;
    let Ok(meta) = meta else {
        return Check::blocked(
            MASK_TOKEN,
            GEOMETRY,
            "not run: the mask id is read with the metadata config.geometry did not accept",
        );
    };
    let (mask, at) = (meta.mask_token_id, &meta.mask_key);
    let key = crate::gguf::TOKEN_TYPE_KEY;
    let evidence = |token_type| ConfigMaskToken {
        mask_token_id: mask,
        token_type,
        key: at.clone(),
    };
    if at != crate::gguf::MASK_KEY {
        let ty = gguf.token_type(mask).and_then(|(_, ty)| ty);
        return Check::fail(
            MASK_TOKEN,
            format!(
                "the mask id is stated only as {at} {mask}: llama.cpp reads {} alone, finds none and drafts with mask id -1 (it aborts at the first draft: common_batch::get_sub_batch: failed to add embedding); write it under {}, as llama.cpp's converter does",
                crate::gguf::MASK_KEY,
                crate::gguf::MASK_KEY
            ),
        )
        .with_evidence(evidence(ty));
    }
    let Some((_, Some(ty))) = gguf.token_type(mask) else {
        return Check::undecided(
            MASK_TOKEN,
            format!("cannot decide whether {at} {mask} is a special token: the GGUF states no {key} (an array of i32)"),
        )
        .with_evidence(evidence(None));
    };
    let text = gguf
        .token_texts()
        .and_then(|texts| texts.into_iter().nth(usize::try_from(mask).ok()?))
        .map(|t| format!(" {}", crate::tokenizer::quoted(&t)))
        .unwrap_or_default();
    let kind = match ty {
        0 => "UNDEFINED (0)".to_owned(),
        1 => "NORMAL (1)".to_owned(),
        2 => "UNKNOWN (2)".to_owned(),
        CONTROL => "CONTROL (3)".to_owned(),
        USER_DEFINED => "USER_DEFINED (4)".to_owned(),
        UNUSED => "UNUSED (5)".to_owned(),
        6 => "BYTE (6)".to_owned(),
        other => format!("type {other}"),
    };
    let tokens = crate::gguf::TOKENS_KEY;
    match ty {
        CONTROL | USER_DEFINED | UNUSED => Check::pass(
            MASK_TOKEN,
            format!("{at} {mask} is the {kind} token{text} of {tokens}: a special token of its own"),
        ),
        _ => Check::fail(
            MASK_TOKEN,
            format!("{at} {mask} is the {kind} token{text} of {tokens}, not CONTROL, USER_DEFINED or UNUSED in {key}: text the target writes, so the draft's mask would read as it"),
        ),
    }
    .with_evidence(evidence(Some(ty)))
}

/// `config.geometry` over the metadata. A draft holding DSpark's keys or tensors (`dspark`) is
/// UNDECIDED naming them, unless the dflash keys llama.cpp reads for every draft are themselves
/// refused: that FAIL stands, and says what else the file holds. Over DeepSeek-V4's backbone
/// (`hyper_connection.count`) the dflash keys are not that backbone's, so nothing is refused from them.
fn geometry_check(meta: &Result<Meta, Vec<String>>, dspark: &[String]) -> Check {
    use crate::checks::MAX_KNOWN_BLOCK;
    if !dspark.is_empty() {
        let backbone = dspark
            .iter()
            .any(|k| k.ends_with(".hyper_connection.count"));
        let held = list(dspark, dspark.len());
        match meta {
            Err(problems) if !backbone => {
                return Check::fail(
                    GEOMETRY,
                    format!(
                        "the metadata does not give a draft llama.cpp builds: {}; the file also holds DSpark's {held}, which the gate does not read",
                        list_of(problems, problems.len(), 4)
                    ),
                );
            }
            _ => {
                let what = if backbone {
                    "a DSpark draft over DeepSeek-V4's backbone, whose keys and tensors are not the dflash graph's"
                } else {
                    "a DSpark draft (the dflash graph with a Markov head, and a confidence head where conf_proj is held)"
                };
                return Check::undecided(
                    GEOMETRY,
                    format!(
                        "cannot decide: the file holds DSpark's {held}, from which llama.cpp b11434 builds {what}; DSpark's GGUF keys and tensors are not settled upstream, so the gate does not read them"
                    ),
                );
            }
        }
    }
    match meta {
        // As a config's is: a block no draft or loader is known to use is not decided.
        Ok(m) if m.block_size > MAX_KNOWN_BLOCK => Check::undecided(
            GEOMETRY,
            format!(
                "cannot decide the metadata's geometry: dflash.block_size is {}: no released draft, and no loader found, uses a block above {MAX_KNOWN_BLOCK}",
                m.block_size
            ),
        ),
        Ok(m) => Check::pass(
            GEOMETRY,
            format!(
                "the metadata gives a draft llama.cpp builds: {}, hidden {}, intermediate {}, {} heads ({} kv) of {}, block_size {}, target layers {:?} (HF ids {:?}), mask token {}",
                crate::report::count_layers(m.layers),
                m.hidden,
                m.intermediate,
                m.heads,
                m.kv_heads,
                m.head_dim,
                m.block_size,
                m.target_layers,
                m.target_layers.iter().map(|v| v - 1).collect::<Vec<_>>(),
                m.mask_token_id
            ),
        ),
        Err(problems) => Check::fail(
            GEOMETRY,
            format!(
                "the metadata does not give a draft llama.cpp builds: {}",
                list_of(problems, problems.len(), 4)
            ),
        ),
    }
}

/// How llama.cpp meets a GGUF draft's tensors: `llm_build_dflash` creates each one with the shape its
/// hyperparameters give (`check_tensor_dims` refuses any other) and counts them all.
const LOADER: checks::inventory::Loader = checks::inventory::Loader {
    defines: "llama.cpp's dflash graph needs",
    wrong: "missing or misshapen",
    held_to: "of the metadata's ne shape",
    source: "the metadata",
    declares: "the metadata",
    missing: "llama.cpp refuses the file: missing tensor",
    misshapen: " (llama.cpp refuses the file: wrong shape)",
    extra: " (llama.cpp refuses the file: wrong number of tensors)",
    unexplained: "are not the dflash graph's",
    owned: "are the graph's",
    reversed: true,
    scalar_tensors: false,
    // Its vocabulary is the target's when the file does not state one: only ne0 is known then.
    vocabulary_of_the_target: true,
};

/// The metadata as the config the family table sizes tensors from: the same fields under their
/// config.json names, the taps as the Hugging Face ids (each stored value minus one), so the one
/// inventory holds a GGUF to the roles and shapes it holds a folder to.
fn config_of(meta: &Meta) -> Result<DraftConfig, String> {
    let mut top = serde_json::Map::new();
    let architecture = match meta.dflash2 {
        None => DRAFT_ARCHITECTURE,
        Some(((kernel, group), (rank, top_k))) => {
            top.insert(
                "dflash_config".into(),
                serde_json::json!({
                    "conv_kernel_size": kernel,
                    "conv_group_size": group,
                    "selector_rank": rank,
                    "selector_top_k": top_k,
                }),
            );
            crate::config::SECOND_FAMILY_ARCHITECTURE
        }
    };
    top.insert("architectures".into(), serde_json::json!([architecture]));
    for (key, value) in [
        ("hidden_size", meta.hidden),
        ("num_hidden_layers", meta.layers),
        ("num_attention_heads", meta.heads),
        ("num_key_value_heads", meta.kv_heads),
        ("head_dim", meta.head_dim),
        ("intermediate_size", meta.intermediate),
        ("block_size", meta.block_size),
        ("mask_token_id", meta.mask_token_id),
    ] {
        top.insert(key.into(), value.into());
    }
    if let Some(vocab) = meta.vocab {
        top.insert("vocab_size".into(), vocab.into());
    }
    let ids: Vec<u64> = meta
        .target_layers
        .iter()
        .map(|v| v.saturating_sub(1))
        .collect();
    top.insert("target_layer_ids".into(), ids.into());
    DraftConfig::from_object(&top)
}

/// `inventory.complete` and `inventory.explained` over the file's tensor infos, through the one
/// inventory: llama.cpp's names, each `ne` read reversed as the logical `[out, in]` shape.
fn inventory(meta: &Meta, tensors: &[TensorInfo]) -> [Check; 2] {
    let config = match config_of(meta) {
        Ok(c) => c,
        Err(why) => {
            // The metadata passed config.geometry, so its config reads; anything else is the gate's.
            let why = format!("cannot decide: the metadata does not read as a draft config: {why}");
            return [
                Check::undecided(checks::inventory::COMPLETE, why.clone()),
                Check::undecided(checks::inventory::EXPLAINED, why),
            ];
        }
    };
    let held: Vec<checks::inventory::Held<'_>> = tensors
        .iter()
        .map(|t| checks::inventory::Held {
            name: &t.name,
            shape: t.dims.iter().rev().copied().collect(),
            shown: format!("{} ne {}", t.ty, shape_text(&t.dims)),
            readable: Ok(()),
        })
        .collect();
    checks::inventory::run(&config, checks::inventory::Spelling::Llama, &LOADER, &held)
}

/// `bf16.finite` over every tensor: every value of a float tensor, every scale of a block tensor.
fn finite(gguf: &Gguf) -> Result<Check, crate::parallel::WorkerPanic> {
    let tensors = &gguf.header.tensors;
    let faults = crate::parallel::map(
        checks::finite::ID,
        tensors,
        || (),
        |_, t| match gguf.data(t) {
            Some(data) => blocks::scan_tensor(t, data).err(),
            None => Some(blocks::ValueError {
                tensor: t.name.clone(),
                ty: t.ty,
                fault: blocks::Fault::NotWholeBlocks { bytes: 0 },
            }),
        },
    )?;
    let found: Vec<&blocks::ValueError> = faults.iter().flatten().collect();
    let Some(first) = found.first() else {
        return Ok(Check::pass(
            checks::finite::ID,
            format!(
                "every value of the float tensors and every block scale of the quantized ones is finite: {} tensors read",
                tensors.len()
            ),
        ));
    };
    let names: Vec<String> = found
        .iter()
        .map(|e| escape(&e.tensor).into_owned())
        .collect();
    Ok(Check::fail(
        checks::finite::ID,
        format!(
            "{} {}: {}; {} of the {} tensors hold a non-finite value or scale: {}",
            escape(&first.tensor),
            first.ty,
            first.fault,
            found.len(),
            tensors.len(),
            list(&names, 4)
        ),
    ))
}

/// Where the last tensor's data ends: the bytes the reader vouched for.
fn data_end(header: &Header) -> u64 {
    header
        .tensors
        .iter()
        .map(|t| header.range(t).end)
        .max()
        .unwrap_or(header.data_start)
}

/// The census: each tensor with its role (read through the package's names), its ggml type and ne
/// shape.
fn census(report: &mut Report, gguf: &Gguf, path: &Path) {
    let header = &gguf.header;
    let census = &mut report.census;
    census.weight_file = path.file_name().map(crate::escape::name);
    census.header_bytes = Some(header.data_start);
    census.file_bytes = Some(data_end(header));
    // The entries the gate reads (a few dozen keys at most: the rest, a tokenizer's hundreds of
    // thousands of strings among them, are checked as they are parsed and not kept).
    census.metadata = header
        .kept
        .iter()
        .map(|k| (escape(&k.key).into_owned(), metadata_text(k)))
        .collect();
    census.tensors = Vec::with_capacity(header.tensors.len().min(MAX_CENSUS_TENSORS));
    for t in &header.tensors {
        let role = checks::inventory::Spelling::Llama.role(&t.name);
        let range = header.range(t);
        census.list(TensorCensus {
            name: t.name.clone(),
            role: role.map(|r| r.class()),
            role_text: role.map(|r| r.to_string()),
            layer: role.and_then(|r| r.layer()),
            dtype: t.ty.to_string(),
            shape: t.dims.clone(),
            data_offsets: [range.start, range.end],
            bytes: t.bytes,
            form_text: format!("{} ne {}", t.ty, shape_text(&t.dims)),
            grid: None,
        });
    }
}
