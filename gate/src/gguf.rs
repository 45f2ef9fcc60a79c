//! A GGUF file read strictly (spec section 12.1): the file a package may have been converted from.
//!
//! The rules are ggml's (`docs/gguf.md`, and what `gguf_init_from_file_impl` refuses), applied to
//! untrusted bytes: every length and count read from the file is held against the bytes left before
//! it sizes anything, keys and tensor names are unique, every tensor's byte size follows from its
//! ggml type's block size, and the data section is ggml's contiguous layout (each tensor's offset the
//! sum of the earlier tensors' sizes, each rounded up to the alignment; no gap, no overlap, no byte
//! after the last tensor but zero padding). Metadata is streamed past: only `general.architecture`,
//! `general.alignment` and the `{architecture}.*` keys section 12.2 compares are kept, so a tokenizer
//! of hundreds of thousands of strings costs time in proportion to its bytes and no memory.
//!
//! [`parse`] reads bytes in memory (tests, the fuzz target); [`Gguf::open`] opens a file through
//! [`crate::files`] (a regular file only, its size at open, mapped under the `SIGBUS` guard) and turns
//! a broken rule into a [`PackageError`] naming the file, the byte offset and the rule (exit 2).
//! [`dequantize`] turns a tensor's blocks into `f32` as ggml's reference code does, and
//! [`dequantize_k_quant`] a Q4_K, Q5_K or Q6_K tensor's; [`scan_tensor`]
//! finds a tensor's first value or block scale that is not finite.

use crate::error::PackageError;
use crate::files::{self, Bytes};
use crate::limits::{
    GGML_MAX_DIMS, GGML_MAX_NAME, MAX_GGUF_ARRAY_DEPTH, MAX_GGUF_KEPT_ARRAY, MAX_GGUF_KEY_BYTES,
    MAX_GGUF_METADATA_KEYS, MAX_GGUF_TENSORS,
};
use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

mod blocks;
mod dequant;
mod kquant;
mod types;

pub use blocks::{
    block_scales, scan_tensor, scan_values, Fault, NotFinite, Scale, ScaleKind, ValueError,
};
pub use dequant::{dequantize, supported, DequantError};
pub(crate) use kquant::scales_and_mins;
pub use kquant::{dequantize_k_quant, k_quant};
pub use types::GgmlType;

/// The four bytes every GGUF starts with.
pub const MAGIC: &[u8; 4] = b"GGUF";

/// The alignment of the data section and of each tensor when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// The metadata keys section 12.2 compares, after the architecture's prefix (`{a}.`).
pub const COMPARED_KEYS: [&str; 22] = [
    "block_count",
    "embedding_length",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.layer_norm_rms_epsilon",
    "rope.freq_base",
    "rope.scaling.type",
    "rope.scaling.factor",
    "rope.scaling.original_context_length",
    "context_length",
    "vocab_size",
    "block_size",
    "mask_token_id",
    "target_hidden_size",
    "target_layers",
    "conv_kernel_size",
    "conv_group_size",
    "selector_rank",
    "selector_top_k",
];

/// DFlash2's four keys after `{a}.` (spec 18.3), in the order a config states their fields: kept with
/// the geometry, all or none.
pub const DFLASH2_KEYS: [&str; 4] = [
    "conv_kernel_size",
    "conv_group_size",
    "selector_rank",
    "selector_top_k",
];

/// The keys after `{a}.` that llama.cpp b11434 reads or its converter writes for a DSpark draft (a
/// DFlash draft with a Markov head and a confidence head): `sample_from_anchor` (read by the Markov
/// head, `src/models/dflash.cpp`), `has_confidence_head` (written by `conversion/qwen.py`'s
/// `DSparkModel`) and `hyper_connection.count` (DeepSeek-V4's backbone under a DSpark draft). Kept, so
/// a draft holding them is named UNDECIDED rather than read as the dflash graph (spec 18.3: DSpark's
/// GGUF keys are not settled upstream).
pub const DSPARK_KEYS: [&str; 3] = [
    "sample_from_anchor",
    "has_confidence_head",
    "hyper_connection.count",
];

/// Whether a name is a GGUF file's by its extension (any case), as every reader that tells the form
/// from a path does: the draft, `--all`, a target, a source, the hub lookup's wording.
pub fn is_gguf_name(name: &std::ffi::OsStr) -> bool {
    std::path::Path::new(name)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
}

/// How many files a split GGUF is (`gguf-split` writes it into each): kept, so a draft that is one
/// shard of several is refused naming why.
pub const SPLIT_COUNT_KEY: &str = "split.count";

/// The key llama.cpp reads a draft's mask id from (`llama_vocab_mask`), the only one.
pub const MASK_KEY: &str = "tokenizer.ggml.mask_token_id";

/// Keys outside the architecture's prefix that [`Header::kept`] holds: the mask id, which llama.cpp's
/// converter writes as the tokenizer's, and the special tokens a mask must not be.
pub const KEPT_TOKENIZER_KEYS: [&str; 5] = [
    MASK_KEY,
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.padding_token_id",
    "tokenizer.ggml.unknown_token_id",
];

/// The key of each token's type (llama.cpp's `llama_token_type`: 1 NORMAL, 3 CONTROL, ...).
pub const TOKEN_TYPE_KEY: &str = "tokenizer.ggml.token_type";

/// The key of the token texts, in id order.
pub const TOKENS_KEY: &str = "tokenizer.ggml.tokens";

/// A metadata value's type (the `gguf_type` enum).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    String,
    Array,
    U64,
    I64,
    F64,
}

impl ValueType {
    fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }

    /// The bytes of one value of a fixed-size type; `None` for strings and arrays.
    fn fixed_size(self) -> Option<u64> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    /// The fewest bytes one element of this type takes: what a count is held against.
    fn min_size(self) -> u64 {
        match self {
            ValueType::String => 8,
            ValueType::Array => 12,
            fixed => fixed.fixed_size().unwrap_or(1),
        }
    }

    fn is_integer(self) -> bool {
        use ValueType::*;
        matches!(self, U8 | I8 | U16 | I16 | U32 | I32 | U64 | I64)
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A kept metadata value. Integers of every width are held by value (section 12.2 compares them so),
/// floats widened to `f64` from the `f32` or `f64` stored.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Integer(i128),
    Float(f64),
    Bool(bool),
    String(String),
    /// An array: its element type and count, and its elements when they are integers and at most
    /// [`MAX_GGUF_KEPT_ARRAY`] of them.
    Array {
        element: ValueType,
        count: u64,
        integers: Option<Vec<i128>>,
    },
}

/// One kept metadata entry: its key, its type as stored, its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Kept {
    pub key: String,
    pub ty: ValueType,
    pub value: Value,
}

/// One tensor info, checked: its byte size follows from its type and dimensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// ne0 first: a matrix of N rows x K columns is `[K, N]`.
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    /// From the start of the data section.
    pub offset: u64,
    /// Its data's length in bytes (unpadded).
    pub bytes: u64,
}

impl TensorInfo {
    /// The element count (the product of the dimensions; checked when read).
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Elements per row (ne0): a whole number of blocks.
    pub fn row_len(&self) -> u64 {
        self.dims[0]
    }

    /// Rows: the product of every dimension after the first.
    pub fn rows(&self) -> u64 {
        self.dims[1..].iter().product()
    }

    /// Its blocks (each [`GgmlType::block_size`] elements, [`GgmlType::type_size`] bytes).
    pub fn blocks(&self) -> u64 {
        self.bytes / self.ty.type_size()
    }
}

/// What [`parse`] reads: the header with its tensor infos checked against the file's length.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    pub version: u32,
    pub alignment: u64,
    /// Where the data section starts: the end of the tensor infos rounded up to the alignment.
    pub data_start: u64,
    /// How many metadata entries the file has (each read and checked; few kept).
    pub metadata_count: u64,
    /// `general.architecture`, `general.alignment`, [`KEPT_TOKENIZER_KEYS`] and
    /// `{architecture}.{key}` for each of [`COMPARED_KEYS`] and [`DSPARK_KEYS`], in file order.
    pub kept: Vec<Kept>,
    /// In file order, which is data order.
    pub tensors: Vec<TensorInfo>,
    /// Where the value of [`TOKEN_TYPE_KEY`] starts (its element type), when it is an array: read
    /// one element at a time by [`Gguf::token_type`], never kept whole.
    pub token_types: Option<u64>,
    /// Where the value of [`TOKENS_KEY`] starts, when it is an array: read only when a target's
    /// tokens are asked for ([`Gguf::token_texts`]).
    pub token_texts: Option<u64>,
}

impl Header {
    /// A kept entry by its full key.
    pub fn get(&self, key: &str) -> Option<&Kept> {
        self.kept.iter().find(|k| k.key == key)
    }

    /// `general.architecture` when it is a string.
    pub fn architecture(&self) -> Option<&str> {
        match &self.get("general.architecture")?.value {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The byte range of a tensor's data in the file (checked against the file's length when read).
    pub fn range(&self, info: &TensorInfo) -> std::ops::Range<u64> {
        let begin = self.data_start + info.offset;
        begin..begin + info.bytes
    }
}

/// Where a GGUF breaks a rule, and which.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GgufError {
    /// The byte offset of the field that breaks it.
    pub at: u64,
    pub rule: Rule,
}

/// Each rule of section 12.1 a file can break.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// A field, or what a length or count asks for, runs past the end of the file.
    PastEnd {
        what: String,
        needs: u64,
        left: u64,
    },
    /// The first four bytes are not `GGUF`.
    BadMagic([u8; 4]),
    /// GGUF version 1 (32-bit counts): ggml no longer reads it.
    Version1,
    /// A version that reads byte-swapped: a big-endian file.
    BigEndian(u32),
    /// Any other version than 2 or 3.
    UnknownVersion(u32),
    /// More metadata entries or tensors than the gate's limits allow.
    TooMany {
        what: &'static str,
        count: u64,
        cap: u64,
    },
    /// A metadata key over [`MAX_GGUF_KEY_BYTES`].
    KeyTooLong {
        len: u64,
    },
    /// A key, string value or tensor name that is not UTF-8.
    NotUtf8 {
        what: String,
    },
    DuplicateKey(String),
    /// A value (or array element) type outside 0..=12.
    UnknownValueType {
        key: String,
        id: u32,
    },
    /// Arrays nested deeper than [`MAX_GGUF_ARRAY_DEPTH`].
    ArrayTooDeep {
        key: String,
    },
    /// A bool that is neither 0 nor 1.
    BadBool {
        key: String,
        byte: u8,
    },
    /// `general.alignment` is not a u32.
    AlignmentType(ValueType),
    /// `general.alignment` is zero or not a power of two.
    Alignment(u32),
    /// A tensor name of [`GGML_MAX_NAME`] bytes or more.
    NameTooLong {
        len: u64,
    },
    DuplicateTensor(String),
    /// A dimension count outside 1..=[`GGML_MAX_DIMS`].
    DimensionCount {
        tensor: String,
        count: u32,
    },
    /// A dimension above `i64::MAX` (ggml reads them as signed).
    Dimension {
        tensor: String,
        index: usize,
        value: u64,
    },
    /// The dimensions' product, or the byte size, does not fit ggml's `int64_t`.
    Overflow {
        tensor: String,
        what: &'static str,
    },
    /// A ggml type id no ggml defines (or one whose support ggml removed).
    UnknownType {
        tensor: String,
        id: u32,
    },
    /// ne0 is not a multiple of the type's block size.
    NotWholeBlocks {
        tensor: String,
        ty: GgmlType,
        ne0: u64,
    },
    /// An offset that is not a multiple of the alignment.
    Misaligned {
        tensor: String,
        offset: u64,
        alignment: u64,
    },
    /// An offset before the end of the previous tensor's (padded) data.
    Overlap {
        tensor: String,
        offset: u64,
        expected: u64,
    },
    /// An offset after the end of the previous tensor's (padded) data.
    Gap {
        tensor: String,
        offset: u64,
        expected: u64,
    },
    /// A tensor's data runs past the end of the file.
    DataPastEnd {
        tensor: String,
        end: u64,
        file_len: u64,
    },
    /// Padding (after the tensor infos, between tensors, or at the end) that is not zero.
    PaddingNotZero {
        byte: u8,
    },
    /// A metadata key of no bytes: ggml's reader refuses it (`gguf_init_from_file`: "key is empty").
    EmptyKey,
    /// The data section ends before the last tensor's padding does: ggml sizes the data section as
    /// the sum of every tensor's size rounded up to the alignment, and reads that many bytes.
    PaddingPastEnd {
        tensor: String,
        end: u64,
        file_len: u64,
    },
    /// Bytes after the last tensor's data and its padding.
    Trailing {
        end: u64,
        file_len: u64,
    },
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::PastEnd { what, needs, left } => write!(
                f,
                "{what} needs {needs} bytes, but {left} are left: the file is truncated or a length in it is false"
            ),
            Rule::BadMagic(m) => write!(
                f,
                "starts with {}, not the magic GGUF",
                crate::escape::line(&String::from_utf8_lossy(m))
            ),
            Rule::Version1 => f.write_str(
                "is GGUF version 1, which ggml no longer reads (versions 2 and 3 are read)",
            ),
            Rule::BigEndian(v) => write!(
                f,
                "version reads {v} ({} byte-swapped): a big-endian GGUF, which the gate does not read",
                v.swap_bytes()
            ),
            Rule::UnknownVersion(v) => {
                write!(f, "is GGUF version {v}: only versions 2 and 3 are read")
            }
            Rule::TooMany { what, count, cap } => {
                write!(f, "declares {count} {what}, more than the {cap} the gate reads")
            }
            Rule::KeyTooLong { len } => write!(
                f,
                "a metadata key of {len} bytes, longer than {MAX_GGUF_KEY_BYTES}"
            ),
            Rule::NotUtf8 { what } => write!(f, "{what} is not UTF-8"),
            Rule::DuplicateKey(k) => write!(f, "metadata key {k} appears twice"),
            Rule::UnknownValueType { key, id } => {
                write!(f, "metadata key {key} has value type {id}, not a GGUF type (0 to 12)")
            }
            Rule::ArrayTooDeep { key } => write!(
                f,
                "metadata key {key} nests arrays deeper than {MAX_GGUF_ARRAY_DEPTH}"
            ),
            Rule::BadBool { key, byte } => {
                write!(f, "metadata key {key} holds a bool of {byte}, not 0 or 1")
            }
            Rule::AlignmentType(t) => write!(f, "general.alignment is a {t}, not a u32"),
            Rule::Alignment(a) => write!(
                f,
                "general.alignment is {a}, not a non-zero power of two"
            ),
            Rule::NameTooLong { len } => write!(
                f,
                "a tensor name of {len} bytes: ggml's names are shorter than {GGML_MAX_NAME}"
            ),
            Rule::DuplicateTensor(t) => write!(f, "tensor {t} appears twice"),
            Rule::DimensionCount { tensor, count } => write!(
                f,
                "tensor {tensor} has {count} dimensions, not 1 to {GGML_MAX_DIMS}"
            ),
            Rule::Dimension {
                tensor,
                index,
                value,
            } => write!(
                f,
                "tensor {tensor} dimension {index} is {value}, above ggml's int64 range"
            ),
            Rule::Overflow { tensor, what } => {
                write!(f, "tensor {tensor}: its {what} overflows ggml's int64")
            }
            Rule::UnknownType { tensor, id } => {
                write!(f, "tensor {tensor} has ggml type {id}, which ggml does not define")
            }
            Rule::NotWholeBlocks { tensor, ty, ne0 } => write!(
                f,
                "tensor {tensor} ({ty}) has {ne0} elements per row, not a multiple of its block of {}",
                ty.block_size()
            ),
            Rule::Misaligned {
                tensor,
                offset,
                alignment,
            } => write!(
                f,
                "tensor {tensor} is at offset {offset}, not a multiple of the alignment {alignment}"
            ),
            Rule::Overlap {
                tensor,
                offset,
                expected,
            } => write!(
                f,
                "tensor {tensor} is at offset {offset}, inside the previous tensor (ggml requires {expected}: tensors in order, no overlap)"
            ),
            Rule::Gap {
                tensor,
                offset,
                expected,
            } => write!(
                f,
                "tensor {tensor} is at offset {offset}, leaving a gap after the previous tensor (ggml requires {expected}: tensors in order, no gap)"
            ),
            Rule::DataPastEnd {
                tensor,
                end,
                file_len,
            } => write!(
                f,
                "tensor {tensor}'s data ends at byte {end}, past the end of the {file_len}-byte file"
            ),
            Rule::PaddingNotZero { byte } => {
                write!(f, "padding holds {byte:#04x}, not zero")
            }
            Rule::EmptyKey => f.write_str(
                "a metadata key of 0 bytes: ggml refuses an empty key",
            ),
            Rule::PaddingPastEnd {
                tensor,
                end,
                file_len,
            } => write!(
                f,
                "tensor {tensor}'s data padded to the alignment ends at byte {end}, past the end of the {file_len}-byte file: ggml reads the data section with every tensor padded, so the file is truncated"
            ),
            Rule::Trailing { end, file_len } => write!(
                f,
                "the data ends (padded) at byte {end}, but the file has {file_len} bytes: trailing bytes"
            ),
        }
    }
}

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.at, self.rule)
    }
}

impl std::error::Error for GgufError {}

/// A GGUF file, open: its header and its bytes (mapped when large).
pub struct Gguf {
    pub path: PathBuf,
    pub header: Header,
    bytes: Bytes,
}

impl Gguf {
    /// Opens and reads a GGUF. A file that cannot be read is its [`crate::files::FileError`]; one
    /// that breaks a rule is [`PackageError::Malformed`] naming the byte offset and the rule.
    pub fn open(path: &Path) -> Result<Gguf, PackageError> {
        let bytes = files::open(path)?.into_bytes()?;
        let header = parse(bytes.as_slice()).map_err(|e| PackageError::Malformed {
            path: path.to_owned(),
            why: format!("is not a GGUF the gate reads: {e}"),
        })?;
        Ok(Gguf {
            path: path.to_owned(),
            header,
            bytes,
        })
    }

    /// The file the bytes were read from, as opened (for the link rule, held to this handle rather
    /// than to the name opened again).
    pub fn file(&self) -> &crate::files::RegularFile {
        self.bytes.file()
    }

    /// A tensor's info and data bytes.
    pub fn tensor(&self, name: &str) -> Option<(&TensorInfo, &[u8])> {
        let info = self.header.tensor(name)?;
        Some((info, self.data(info)?))
    }

    /// A tensor's data bytes (`None` only for an info that is not this file's).
    pub fn data(&self, info: &TensorInfo) -> Option<&[u8]> {
        let range = self.header.range(info);
        let begin = usize::try_from(range.start).ok()?;
        let end = usize::try_from(range.end).ok()?;
        self.bytes.as_slice().get(begin..end)
    }

    /// Token `id`'s type in [`TOKEN_TYPE_KEY`]: `None` when the file has no such array of I32 (as
    /// llama.cpp writes it); else the array's length, and the type when `id` is below it.
    pub fn token_type(&self, id: u64) -> Option<(u64, Option<i32>)> {
        let at = usize::try_from(self.header.token_types?).ok()?;
        let bytes = self.bytes.as_slice();
        let word = |from: usize, n: usize| bytes.get(from..from.checked_add(n)?);
        let element = u32::from_le_bytes(word(at, 4)?.try_into().ok()?);
        if ValueType::from_id(element) != Some(ValueType::I32) {
            return None;
        }
        let count = u64::from_le_bytes(word(at + 4, 8)?.try_into().ok()?);
        if id >= count {
            return Some((count, None));
        }
        let from = at + 12 + 4 * usize::try_from(id).ok()?;
        let ty = i32::from_le_bytes(word(from, 4)?.try_into().ok()?);
        Some((count, Some(ty)))
    }

    /// How many tokens [`TOKENS_KEY`] holds: `None` when the file has no such array of strings.
    pub fn token_count(&self) -> Option<u64> {
        let at = usize::try_from(self.header.token_texts?).ok()?;
        let bytes = self.bytes.as_slice();
        let element = u32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?);
        if ValueType::from_id(element) != Some(ValueType::String) {
            return None;
        }
        Some(u64::from_le_bytes(
            bytes.get(at + 4..at.checked_add(12)?)?.try_into().ok()?,
        ))
    }

    /// Every token's text in [`TOKENS_KEY`], in id order: `None` when the file has no such array of
    /// strings. The header's parse already walked the array within the file, so the count is bounded
    /// by the bytes (each string takes at least its 8-byte length), and a string that is not UTF-8 is
    /// shown with replacement characters (it only names a token in a message).
    pub fn token_texts(&self) -> Option<Vec<String>> {
        let mut at = usize::try_from(self.header.token_texts?).ok()?;
        let bytes = self.bytes.as_slice();
        let word = |from: usize, n: usize| bytes.get(from..from.checked_add(n)?);
        let element = u32::from_le_bytes(word(at, 4)?.try_into().ok()?);
        if ValueType::from_id(element) != Some(ValueType::String) {
            return None;
        }
        let count = u64::from_le_bytes(word(at + 4, 8)?.try_into().ok()?);
        at += 12;
        let most = bytes.len().saturating_sub(at) / 8;
        let mut texts = Vec::with_capacity(usize::try_from(count).ok()?.min(most));
        for _ in 0..count {
            let len = u64::from_le_bytes(word(at, 8)?.try_into().ok()?);
            let len = usize::try_from(len).ok()?;
            texts.push(String::from_utf8_lossy(word(at + 8, len)?).into_owned());
            at = at.checked_add(8)?.checked_add(len)?;
        }
        Some(texts)
    }

    /// Every token's type in [`TOKEN_TYPE_KEY`], in id order, when the file has that array of I32.
    pub fn token_type_list(&self) -> Option<Vec<i32>> {
        let (count, _) = self.token_type(0)?;
        (0..count)
            .map(|id| self.token_type(id).and_then(|(_, ty)| ty))
            .collect()
    }

    /// What is wrong with [`TOKEN_TYPE_KEY`] beside [`TOKENS_KEY`]: llama.cpp's vocabulary loader
    /// reads both by token id, checking neither the types' element type nor their length, so an
    /// array of another type than I32 is read as i32s and one shorter than the tokens is read past
    /// its end. `None` when the two agree, or either is absent.
    pub fn token_types_fault(&self) -> Option<String> {
        let tokens = self.token_count()?;
        let at = usize::try_from(self.header.token_types?).ok()?;
        let bytes = self.bytes.as_slice();
        let word = |from: usize, n: usize| bytes.get(from..from.checked_add(n)?);
        let element = u32::from_le_bytes(word(at, 4)?.try_into().ok()?);
        let count = u64::from_le_bytes(word(at.checked_add(4)?, 8)?.try_into().ok()?);
        match ValueType::from_id(element) {
            Some(ValueType::I32) if count >= tokens => None,
            Some(ValueType::I32) => Some(format!(
                "{TOKEN_TYPE_KEY} holds {count} types (i32), fewer than the {tokens} tokens of {TOKENS_KEY}: llama.cpp reads a type for every token, past the array's end"
            )),
            ty => Some(format!(
                "{TOKEN_TYPE_KEY} is an array of {count} {}, not i32 (beside the {tokens} tokens of {TOKENS_KEY}): llama.cpp reads each token's type from it as an i32",
                ty.map_or("elements of an unknown type", ValueType::name)
            )),
        }
    }

    /// The file still has its size and modification time at open, and no mapped page was lost.
    pub fn unchanged(&self) -> Result<(), PackageError> {
        Ok(self.bytes.unchanged()?)
    }
}

/// Reads a whole GGUF held in memory.
pub fn parse(bytes: &[u8]) -> Result<Header, GgufError> {
    let mut r = Reader { bytes, pos: 0 };
    let magic = r.array::<4>(What::Is("the magic"))?;
    if &magic != MAGIC {
        return Err(r.error_at(0, Rule::BadMagic(magic)));
    }
    let version = r.u32(What::Is("the version"))?;
    match version {
        2 | 3 => {}
        1 => return Err(r.error_at(4, Rule::Version1)),
        v if v != 0 && v & 0xffff == 0 => return Err(r.error_at(4, Rule::BigEndian(v))),
        v => return Err(r.error_at(4, Rule::UnknownVersion(v))),
    }
    let tensor_count = r.u64(What::Is("the tensor count"))?;
    let metadata_count = r.u64(What::Is("the metadata count"))?;
    // Counts are capped, then held against the bytes left at the smallest size each entry can have.
    if tensor_count > MAX_GGUF_TENSORS {
        return Err(r.error_at(
            8,
            Rule::TooMany {
                what: "tensors",
                count: tensor_count,
                cap: MAX_GGUF_TENSORS,
            },
        ));
    }
    if metadata_count > MAX_GGUF_METADATA_KEYS {
        return Err(r.error_at(
            16,
            Rule::TooMany {
                what: "metadata entries",
                count: metadata_count,
                cap: MAX_GGUF_METADATA_KEYS,
            },
        ));
    }
    // A key of 8 + 0 bytes, a type, a one-byte value; a tensor info of an empty name, one dimension.
    r.fits(metadata_count, 13, What::Is("the metadata entries"))?;
    r.fits(
        metadata_count
            .saturating_mul(13)
            .saturating_add(tensor_count.saturating_mul(32)),
        1,
        What::Is("the metadata entries and tensor infos"),
    )?;

    let mut keys: HashSet<&str> = HashSet::new();
    let mut candidates: Vec<(&str, ValueType, usize)> = Vec::new();
    let mut token_types = None;
    let mut token_texts = None;
    for _ in 0..metadata_count {
        let at = r.pos;
        let len = r.u64(What::Is("a metadata key's length"))?;
        if len > MAX_GGUF_KEY_BYTES {
            return Err(r.error_at(at, Rule::KeyTooLong { len }));
        }
        if len == 0 {
            return Err(r.error_at(at, Rule::EmptyKey));
        }
        let key = r.text(len, What::Is("a metadata key"))?;
        if !keys.insert(key) {
            return Err(r.error_at(at, Rule::DuplicateKey(key.to_owned())));
        }
        let ty = r.value_type(key)?;
        if kept_candidate(key) {
            candidates.push((key, ty, r.pos));
        }
        if key == TOKEN_TYPE_KEY && ty == ValueType::Array {
            token_types = Some(r.pos as u64);
        }
        if key == TOKENS_KEY && ty == ValueType::Array {
            token_texts = Some(r.pos as u64);
        }
        r.skip_value(ty, key, 1)?;
    }
    let header_end = r.pos;

    let mut kept = Vec::new();
    let mut alignment = DEFAULT_ALIGNMENT;
    let architecture = candidates.iter().find_map(|&(key, ty, at)| {
        (key == "general.architecture" && ty == ValueType::String).then_some(at)
    });
    let architecture =
        architecture.map(|at| Reader { bytes, pos: at }.kept_value(ValueType::String));
    let prefix = match &architecture {
        Some(Value::String(a)) => Some(format!("{a}.")),
        _ => None,
    };
    for &(key, ty, at) in &candidates {
        let wanted = key.starts_with("general.")
            || key == SPLIT_COUNT_KEY
            || KEPT_TOKENIZER_KEYS.contains(&key)
            || prefix.as_deref().is_some_and(|p| {
                key.strip_prefix(p).is_some_and(|rest| {
                    COMPARED_KEYS.contains(&rest) || DSPARK_KEYS.contains(&rest)
                })
            });
        if !wanted {
            continue;
        }
        let value = Reader { bytes, pos: at }.kept_value(ty);
        if key == "general.alignment" {
            let a = match value {
                Value::Integer(a) if ty == ValueType::U32 => a as u32,
                _ => return Err(r.error_at(at, Rule::AlignmentType(ty))),
            };
            if !a.is_power_of_two() {
                return Err(r.error_at(at, Rule::Alignment(a)));
            }
            alignment = u64::from(a);
        }
        kept.push(Kept {
            key: key.to_owned(),
            ty,
            value,
        });
    }
    r.pos = header_end;

    let mut names: HashSet<&str> = HashSet::new();
    let mut infos: Vec<(usize, TensorInfo)> = Vec::with_capacity(tensor_count as usize);
    for _ in 0..tensor_count {
        let at = r.pos;
        let len = r.u64(What::Is("a tensor name's length"))?;
        if len >= GGML_MAX_NAME {
            return Err(r.error_at(at, Rule::NameTooLong { len }));
        }
        let name = r.text(len, What::Is("a tensor name"))?;
        if !names.insert(name) {
            return Err(r.error_at(at, Rule::DuplicateTensor(name.to_owned())));
        }
        let tensor = || name.to_owned();
        let dims_at = r.pos;
        let count = r.u32(What::Is("a tensor's dimension count"))?;
        if !(1..=GGML_MAX_DIMS).contains(&count) {
            return Err(r.error_at(
                dims_at,
                Rule::DimensionCount {
                    tensor: tensor(),
                    count,
                },
            ));
        }
        let mut dims = Vec::with_capacity(count as usize);
        let mut elements = 1u64;
        for index in 0..count as usize {
            let dim_at = r.pos;
            let value = r.u64(What::Is("a tensor dimension"))?;
            if value > i64::MAX as u64 {
                return Err(r.error_at(
                    dim_at,
                    Rule::Dimension {
                        tensor: tensor(),
                        index,
                        value,
                    },
                ));
            }
            elements = match elements.checked_mul(value) {
                Some(e) if e <= i64::MAX as u64 => e,
                _ => {
                    return Err(r.error_at(
                        dims_at,
                        Rule::Overflow {
                            tensor: tensor(),
                            what: "element count",
                        },
                    ))
                }
            };
            dims.push(value);
        }
        let type_at = r.pos;
        let id = r.u32(What::Is("a tensor's type"))?;
        let Some(ty) = GgmlType::from_id(id) else {
            return Err(r.error_at(
                type_at,
                Rule::UnknownType {
                    tensor: tensor(),
                    id,
                },
            ));
        };
        if dims[0] % ty.block_size() != 0 {
            return Err(r.error_at(
                dims_at,
                Rule::NotWholeBlocks {
                    tensor: tensor(),
                    ty,
                    ne0: dims[0],
                },
            ));
        }
        // Whole blocks: elements / block_size of them, each type_size bytes.
        let size = (elements / ty.block_size())
            .checked_mul(ty.type_size())
            .filter(|&s| s <= i64::MAX as u64);
        let Some(size) = size else {
            return Err(r.error_at(
                type_at,
                Rule::Overflow {
                    tensor: tensor(),
                    what: "byte size",
                },
            ));
        };
        let offset_at = r.pos;
        let offset = r.u64(What::Is("a tensor's offset"))?;
        infos.push((
            offset_at,
            TensorInfo {
                name: name.to_owned(),
                dims,
                ty,
                offset,
                bytes: size,
            },
        ));
    }

    let infos_end = r.pos as u64;
    let file_len = bytes.len() as u64;
    let Some(data_start) = pad(infos_end, alignment) else {
        return Err(r.error_at(
            r.pos,
            Rule::PastEnd {
                what: "the data section".to_owned(),
                needs: u64::MAX,
                left: 0,
            },
        ));
    };
    zero_padding(bytes, infos_end, data_start.min(file_len))?;
    let mut expected = 0u64;
    let mut end = infos_end;
    let mut tensors = Vec::with_capacity(infos.len());
    for (offset_at, info) in infos {
        let at = offset_at as u64;
        let tensor = || info.name.clone();
        if info.offset % alignment != 0 {
            return Err(r.error_at(
                offset_at,
                Rule::Misaligned {
                    tensor: tensor(),
                    offset: info.offset,
                    alignment,
                },
            ));
        }
        if info.offset < expected {
            return Err(GgufError {
                at,
                rule: Rule::Overlap {
                    tensor: tensor(),
                    offset: info.offset,
                    expected,
                },
            });
        }
        if info.offset > expected {
            return Err(GgufError {
                at,
                rule: Rule::Gap {
                    tensor: tensor(),
                    offset: info.offset,
                    expected,
                },
            });
        }
        let overflow = || GgufError {
            at,
            rule: Rule::Overflow {
                tensor: tensor(),
                what: "end in the file",
            },
        };
        end = data_start
            .checked_add(info.offset)
            .and_then(|b| b.checked_add(info.bytes))
            .ok_or_else(overflow)?;
        if end > file_len {
            return Err(GgufError {
                at,
                rule: Rule::DataPastEnd {
                    tensor: tensor(),
                    end,
                    file_len,
                },
            });
        }
        expected = info
            .offset
            .checked_add(info.bytes)
            .and_then(|e| pad(e, alignment))
            .ok_or_else(overflow)?;
        let padded_end = data_start.checked_add(expected).ok_or_else(overflow)?;
        if padded_end > file_len {
            return Err(GgufError {
                at,
                rule: Rule::PaddingPastEnd {
                    tensor: tensor(),
                    end: padded_end,
                    file_len,
                },
            });
        }
        zero_padding(bytes, end, padded_end)?;
        tensors.push(info);
    }
    // The file ends where the last tensor's padding does (or at the data section's start, with no
    // tensors), not after.
    let limit = if tensors.is_empty() {
        data_start
    } else {
        data_start + expected
    };
    if file_len > limit {
        return Err(GgufError {
            at: limit,
            rule: Rule::Trailing {
                end: limit,
                file_len,
            },
        });
    }
    debug_assert!(end <= file_len);
    Ok(Header {
        version,
        alignment,
        data_start,
        metadata_count,
        kept,
        tensors,
        token_types,
        token_texts,
    })
}

/// Whether a key may be one [`Header::kept`] holds: `general.architecture`, `general.alignment`, or
/// `{prefix}.{one of COMPARED_KEYS or DSPARK_KEYS}` (the prefix is held to the architecture once all are read).
fn kept_candidate(key: &str) -> bool {
    if key == "general.architecture"
        || key == "general.alignment"
        || key == SPLIT_COUNT_KEY
        || KEPT_TOKENIZER_KEYS.contains(&key)
    {
        return true;
    }
    key.split_once('.')
        .is_some_and(|(_, rest)| COMPARED_KEYS.contains(&rest) || DSPARK_KEYS.contains(&rest))
}

/// `x` rounded up to `alignment` (a power of two), or `None` on overflow.
fn pad(x: u64, alignment: u64) -> Option<u64> {
    Some(x.checked_add(alignment - 1)? & !(alignment - 1))
}

/// Bytes `from..to` of the file are zero.
fn zero_padding(bytes: &[u8], from: u64, to: u64) -> Result<(), GgufError> {
    let (from, to) = (from as usize, to as usize);
    let Some(padding) = bytes.get(from..to.max(from)) else {
        return Ok(());
    };
    match padding.iter().position(|&b| b != 0) {
        None => Ok(()),
        Some(i) => Err(GgufError {
            at: (from + i) as u64,
            rule: Rule::PaddingNotZero { byte: padding[i] },
        }),
    }
}

/// What a read is of, for its error: formatted only when the read fails, since a tokenizer's array
/// of a million strings under a long key must not cost a million copies of the key.
#[derive(Clone, Copy)]
enum What<'k> {
    Is(&'static str),
    StringOf(&'k str),
    ArrayOf(&'k str, u64, ValueType),
    ValueOf(&'k str, ValueType),
}

impl fmt::Display for What<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            What::Is(what) => f.write_str(what),
            What::StringOf(key) => write!(f, "the string value of {key}"),
            What::ArrayOf(key, count, element) => {
                write!(f, "the array value of {key} ({count} x {element})")
            }
            What::ValueOf(key, ty) => write!(f, "the {ty} value of {key}"),
        }
    }
}

/// A cursor over the file's bytes: every read checked against what is left.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    fn error_at(&self, at: usize, rule: Rule) -> GgufError {
        GgufError {
            at: at as u64,
            rule,
        }
    }

    /// `count` items of at least `size` bytes each fit in what is left.
    fn fits(&self, count: u64, size: u64, what: What<'_>) -> Result<(), GgufError> {
        let needs = count.saturating_mul(size);
        if needs > self.left() {
            return Err(self.error_at(
                self.pos,
                Rule::PastEnd {
                    what: what.to_string(),
                    needs,
                    left: self.left(),
                },
            ));
        }
        Ok(())
    }

    fn take(&mut self, n: u64, what: What<'_>) -> Result<&'a [u8], GgufError> {
        self.fits(n, 1, what)?;
        let slice = &self.bytes[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, what: What<'_>) -> Result<[u8; N], GgufError> {
        let slice = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(slice);
        Ok(out)
    }

    fn u32(&mut self, what: What<'_>) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: What<'_>) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// `len` bytes of UTF-8 (the length already checked against its own cap by the caller).
    fn text(&mut self, len: u64, what: What<'_>) -> Result<&'a str, GgufError> {
        let at = self.pos;
        let bytes = self.take(len, what)?;
        std::str::from_utf8(bytes).map_err(|_| {
            self.error_at(
                at,
                Rule::NotUtf8 {
                    what: what.to_string(),
                },
            )
        })
    }

    fn value_type(&mut self, key: &str) -> Result<ValueType, GgufError> {
        let at = self.pos;
        let id = self.u32(What::Is("a metadata value's type"))?;
        ValueType::from_id(id).ok_or_else(|| {
            self.error_at(
                at,
                Rule::UnknownValueType {
                    key: key.to_owned(),
                    id,
                },
            )
        })
    }

    /// Reads past `count` strings, checked as [`Reader::skip_value`] checks each, in one loop: a
    /// tokenizer's vocabulary is hundreds of thousands of short strings, and read one value at a
    /// time their dispatch was most of a draft GGUF's header time. A string that is not plain
    /// ASCII, or that runs past the end, is left to `skip_value`, which reads or names it.
    fn skip_strings(&mut self, count: u64, key: &str) -> Result<(), GgufError> {
        for _ in 0..count {
            let rest = &self.bytes[self.pos..];
            if let Some((len, after)) = rest.split_first_chunk::<8>() {
                let text = usize::try_from(u64::from_le_bytes(*len))
                    .ok()
                    .and_then(|n| after.get(..n));
                if let Some(text) = text.filter(|t| t.is_ascii()) {
                    self.pos += 8 + text.len();
                    continue;
                }
            }
            self.skip_value(ValueType::String, key, 0)?;
        }
        Ok(())
    }

    /// Reads past one value of type `ty`, checking it: strings UTF-8, bools 0 or 1, arrays' counts
    /// held against the bytes left before a single element is read, nesting bounded.
    fn skip_value(&mut self, ty: ValueType, key: &str, depth: usize) -> Result<(), GgufError> {
        match ty {
            ValueType::String => {
                let len = self.u64(What::Is("a string's length"))?;
                self.text(len, What::StringOf(key))?;
            }
            ValueType::Array => {
                if depth > MAX_GGUF_ARRAY_DEPTH {
                    return Err(self.error_at(
                        self.pos,
                        Rule::ArrayTooDeep {
                            key: key.to_owned(),
                        },
                    ));
                }
                let element = self.value_type(key)?;
                let count = self.u64(What::Is("an array's count"))?;
                let what = What::ArrayOf(key, count, element);
                match element.fixed_size() {
                    Some(size) => {
                        self.fits(count, size, what)?;
                        let at = self.pos;
                        let values = self.take(count * size, what)?;
                        if element == ValueType::Bool {
                            check_bools(values, at, key)?;
                        }
                    }
                    None if element == ValueType::String => {
                        self.fits(count, element.min_size(), what)?;
                        self.skip_strings(count, key)?;
                    }
                    None => {
                        self.fits(count, element.min_size(), what)?;
                        for _ in 0..count {
                            self.skip_value(element, key, depth + 1)?;
                        }
                    }
                }
            }
            fixed => {
                let size = fixed.fixed_size().unwrap_or(1);
                let at = self.pos;
                let value = self.take(size, What::ValueOf(key, fixed))?;
                if fixed == ValueType::Bool {
                    check_bools(value, at, key)?;
                }
            }
        }
        Ok(())
    }

    /// Decodes a value already checked by [`Reader::skip_value`] (so no read here can fail).
    fn kept_value(&mut self, ty: ValueType) -> Value {
        match ty {
            ValueType::String => {
                let len = self.u64(What::Is("")).unwrap_or(0);
                Value::String(self.text(len, What::Is("")).unwrap_or_default().to_owned())
            }
            ValueType::Array => {
                let element = self
                    .u32(What::Is(""))
                    .ok()
                    .and_then(ValueType::from_id)
                    .unwrap_or(ValueType::Array);
                let count = self.u64(What::Is("")).unwrap_or(0);
                let integers = (element.is_integer() && count <= MAX_GGUF_KEPT_ARRAY)
                    .then(|| (0..count).map(|_| self.integer(element)).collect());
                Value::Array {
                    element,
                    count,
                    integers,
                }
            }
            ValueType::F32 => Value::Float(f64::from(f32::from_le_bytes(
                self.array(What::Is("")).unwrap_or_default(),
            ))),
            ValueType::F64 => Value::Float(f64::from_le_bytes(
                self.array(What::Is("")).unwrap_or_default(),
            )),
            ValueType::Bool => {
                Value::Bool(self.array::<1>(What::Is("")).unwrap_or_default()[0] == 1)
            }
            int => Value::Integer(self.integer(int)),
        }
    }

    fn integer(&mut self, ty: ValueType) -> i128 {
        use ValueType::*;
        match ty {
            U8 => i128::from(u8::from_le_bytes(
                self.array(What::Is("")).unwrap_or_default(),
            )),
            I8 => i128::from(i8::from_le_bytes(
                self.array(What::Is("")).unwrap_or_default(),
            )),
            U16 => i128::from(u16::from_le_bytes(
                self.array(What::Is("")).unwrap_or_default(),
            )),
            I16 => i128::from(i16::from_le_bytes(
                self.array(What::Is("")).unwrap_or_default(),
            )),
            U32 => i128::from(u32::from_le_bytes(
                self.array(What::Is("")).unwrap_or_default(),
            )),
            I32 => i128::from(i32::from_le_bytes(
                self.array(What::Is("")).unwrap_or_default(),
            )),
            U64 => i128::from(u64::from_le_bytes(
                self.array(What::Is("")).unwrap_or_default(),
            )),
            I64 => i128::from(i64::from_le_bytes(
                self.array(What::Is("")).unwrap_or_default(),
            )),
            _ => 0,
        }
    }
}

fn check_bools(values: &[u8], at: usize, key: &str) -> Result<(), GgufError> {
    match values.iter().position(|&b| b > 1) {
        None => Ok(()),
        Some(i) => Err(GgufError {
            at: (at + i) as u64,
            rule: Rule::BadBool {
                key: key.to_owned(),
                byte: values[i],
            },
        }),
    }
}

#[cfg(test)]
mod tests;
