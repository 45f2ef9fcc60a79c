//! The Q4NX weight container: a safetensors file, read strictly (spec section 3).
//!
//! Validation order follows the safetensors reference: the length prefix through `get`, capped and
//! checked against the file before anything is sized from it; UTF-8, then JSON (duplicate keys refused);
//! every entry's element count by checked multiplication; entries sorted by offset and required to tile
//! the data section exactly. Tensor bytes are borrowed from the caller's buffer (a memory map), never
//! copied.

use crate::dtype::Dtype;
use crate::limits::{MAX_EMPTY_TENSORS, MAX_METADATA_KEYS};
use crate::limits::{MAX_HEADER_BYTES, MAX_RANK, MAX_TENSORS, TENSOR_ALIGNMENT};
use std::fmt;

mod header;
mod recognise;

pub use recognise::{recognise, Impostor};

/// The key safetensors reserves for free-form string metadata.
pub const METADATA_KEY: &str = "__metadata__";

/// One tensor's header entry, validated against the data section's length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    pub dtype: Dtype,
    pub shape: Vec<u64>,
    /// `[begin, end)` relative to the start of the data section.
    pub begin: u64,
    pub end: u64,
}

impl TensorInfo {
    pub fn byte_len(&self) -> u64 {
        self.end - self.begin
    }

    /// The shape as the header spells it, e.g. `[1280, 5120]`.
    pub fn shape_text(&self) -> String {
        shape_text(&self.shape)
    }
}

/// Formats a shape the way the header spells it.
pub fn shape_text(shape: &[u64]) -> String {
    use std::fmt::Write;
    // Written into one string, not a string a dimension joined: the census and the inventory spell
    // every tensor's shape.
    let mut text = String::with_capacity(2 + 8 * shape.len());
    text.push('[');
    for (i, d) in shape.iter().enumerate() {
        let comma = if i > 0 { ", " } else { "" };
        let _ = write!(text, "{comma}{d}");
    }
    text.push(']');
    text
}

/// A validated header: every entry, sorted by offset, plus what the layout revealed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    /// Sorted by `begin`; each starts where the previous ended, or after an accepted alignment gap.
    pub entries: Vec<TensorInfo>,
    pub metadata: Vec<(String, String)>,
    /// `8 + n`: the length prefix plus the JSON header.
    pub header_bytes: u64,
    pub data_len: u64,
    /// Gaps between tensors, `[begin, end)` in data-section offsets, each shorter than the alignment and
    /// ending on an aligned offset. Only `Container::parse` proves their bytes are zero.
    pub gaps: Vec<(u64, u64)>,
    /// Positions in `entries`, ordered by name: [`Table::get`] is a binary search, so checks that look
    /// up every name a config implies cost `names x log(tensors)`, not `names x tensors`.
    by_name: Vec<u32>,
}

/// A container whose header has been validated against its bytes, with zero-copy tensor views.
#[derive(Debug)]
pub struct Container<'a> {
    pub table: Table,
    data: &'a [u8],
}

/// Why a container was refused. Each message names the tensor or key, and the values involved. As
/// `container.parses` evidence it is an object: `kind` (the variant, as a token) and the variant's
/// fields, less the ones that are prose (those are in the message).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ContainerError {
    /// The file cannot even hold the 8-byte header length.
    TooShort { len: u64 },
    /// The header length prefix exceeds the reader's cap.
    HeaderTooLarge { n: u64 },
    /// The header length prefix points past the end of the file.
    HeaderPastEnd { n: u64, file_len: u64 },
    /// The header bytes are not UTF-8; `offset` is the first bad byte within the header.
    HeaderNotUtf8 { offset: usize },
    /// The header is not one JSON value (or repeats a key).
    HeaderNotJson {
        #[serde(skip)]
        reason: String,
    },
    /// The header is JSON but not an object.
    HeaderNotObject { found: &'static str },
    /// More entries than the reader accepts.
    TooManyTensors { count: usize },
    /// More zero-byte entries than the reader accepts (counted up to the first one too many).
    TooManyEmptyTensors { count: usize },
    /// More `__metadata__` keys than the reader accepts.
    TooMuchMetadata,
    /// `__metadata__` is not an object of strings.
    BadMetadata { key: Option<String> },
    /// A top-level key whose value is not a tensor entry (e.g. a config scalar a converter put there).
    NotATensorEntry { key: String, found: &'static str },
    /// An entry lacks one of `dtype`, `shape`, `data_offsets`.
    MissingField { tensor: String, field: &'static str },
    /// An entry has a field the format does not define.
    UnknownField { tensor: String, field: String },
    /// A field has the wrong JSON type.
    BadField {
        tensor: String,
        field: &'static str,
        #[serde(skip)]
        reason: String,
    },
    /// A dtype safetensors does not define.
    UnknownDtype { tensor: String, dtype: String },
    /// A dimension that is negative, fractional, or beyond `u64`.
    BadDimension {
        tensor: String,
        index: usize,
        value: String,
    },
    /// More dimensions than the reader accepts.
    RankTooLarge { tensor: String, rank: usize },
    /// The element count times the dtype size does not fit in `u64`.
    ByteCountOverflow { tensor: String },
    /// The shape's byte count differs from the span of its offsets.
    SizeMismatch {
        tensor: String,
        declared: u64,
        span: u64,
    },
    /// `begin > end`.
    BeginAfterEnd {
        tensor: String,
        begin: u64,
        end: u64,
    },
    /// Two entries share bytes.
    Overlap {
        tensor: String,
        other: String,
        begin: u64,
        other_end: u64,
    },
    /// Bytes between two entries (or before the first) that are not an accepted alignment gap.
    Hole {
        tensor: String,
        gap_begin: u64,
        gap_end: u64,
        #[serde(skip)]
        why: &'static str,
    },
    /// The last entry does not end where the data section ends (trailing bytes, or a short file).
    DataLengthMismatch { last_end: u64, data_len: u64 },
    /// The data section ends inside a tensor, or before it: the file was cut short (a download or
    /// copy that stopped). `tensor` is the first one not wholly there; `beyond` more start past the end.
    Truncated {
        tensor: String,
        begin: u64,
        end: u64,
        last_end: u64,
        data_len: u64,
        beyond: usize,
    },
    /// The file is something else a download or checkout leaves where the weights should be (a Git
    /// LFS pointer, an HTML page, zeros, an archive, a GGUF), recognised from its first bytes only
    /// once the container reading failed: the message says what it is and what to do.
    NotAContainer { found: Impostor },
}

impl fmt::Display for ContainerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ContainerError::*;
        match self {
            TooShort { len } => write!(f, "file is {len} bytes, shorter than the 8-byte header length"),
            HeaderTooLarge { n } => {
                write!(f, "header length {n} exceeds the {MAX_HEADER_BYTES}-byte limit")
            }
            HeaderPastEnd { n, file_len } => {
                write!(f, "header length {n} runs past the end of the {file_len}-byte file: truncated in its header, or not a Q4NX file")
            }
            HeaderNotUtf8 { offset } => write!(f, "header is not UTF-8 (bad byte at header offset {offset})"),
            HeaderNotJson { reason } => write!(f, "header is not valid JSON: {reason}"),
            HeaderNotObject { found } => write!(f, "header is a JSON {found}, not an object"),
            TooManyTensors { count } => {
                write!(f, "header declares {count} tensors, more than the {MAX_TENSORS} accepted")
            }
            TooManyEmptyTensors { count } => write!(
                f,
                "header declares at least {count} zero-byte tensors, more than the {MAX_EMPTY_TENSORS} accepted"
            ),
            TooMuchMetadata => {
                write!(f, "{METADATA_KEY} holds more than the {MAX_METADATA_KEYS} keys accepted")
            }
            BadMetadata { key: None } => write!(f, "{METADATA_KEY} is not an object"),
            BadMetadata { key: Some(k) } => write!(f, "{METADATA_KEY} value {k:?} is not a string"),
            NotATensorEntry { key, found } => {
                write!(f, "top-level key {key:?} is a JSON {found}, not a tensor entry")
            }
            MissingField { tensor, field } => write!(f, "tensor {tensor:?} lacks field {field:?}"),
            UnknownField { tensor, field } => write!(f, "tensor {tensor:?} has unknown field {field:?}"),
            BadField { tensor, field, reason } => write!(f, "tensor {tensor:?} field {field:?}: {reason}"),
            UnknownDtype { tensor, dtype } => write!(f, "tensor {tensor:?} has unknown dtype {dtype:?}"),
            BadDimension { tensor, index, value } => write!(
                f,
                "tensor {tensor:?} dimension {index} is {value}, not a non-negative integer"
            ),
            RankTooLarge { tensor, rank } => {
                write!(f, "tensor {tensor:?} has {rank} dimensions, more than the {MAX_RANK} accepted")
            }
            ByteCountOverflow { tensor } => {
                write!(f, "tensor {tensor:?}: shape's byte count overflows u64")
            }
            SizeMismatch { tensor, declared, span } => write!(
                f,
                "tensor {tensor:?}: dtype and shape make {declared} bytes, offsets span {span}"
            ),
            BeginAfterEnd { tensor, begin, end } => {
                write!(f, "tensor {tensor:?}: offsets [{begin}, {end}] begin after they end")
            }
            Overlap { tensor, other, begin, other_end } => write!(
                f,
                "tensor {tensor:?} begins at {begin}, inside {other:?} which ends at {other_end}"
            ),
            Hole { tensor, gap_begin, gap_end, why } => write!(
                f,
                "hole of {} bytes at data offsets [{gap_begin}, {gap_end}) before tensor {tensor:?}: {why}",
                gap_end - gap_begin
            ),
            DataLengthMismatch { last_end, data_len } if last_end < data_len => write!(
                f,
                "{} trailing bytes: tensors end at {last_end}, data section is {data_len} bytes",
                data_len - last_end
            ),
            DataLengthMismatch { last_end, data_len } => write!(
                f,
                "file is short: tensors end at {last_end}, data section is only {data_len} bytes"
            ),
            Truncated { tensor, begin, end, last_end, data_len, beyond } => {
                write!(
                    f,
                    "file is short, truncated: tensors end at {last_end}, data section is only {data_len} bytes; tensor {tensor:?} (data offsets [{begin}, {end}]) is cut off"
                )?;
                match beyond {
                    0 => {}
                    1 => write!(f, ", and 1 more tensor starts past the end")?,
                    n => write!(f, ", and {n} more tensors start past the end")?,
                }
                Ok(())
            }
            NotAContainer { found } => write!(f, "the file is {found}"),
        }
    }
}

impl std::error::Error for ContainerError {}

impl<'a> Container<'a> {
    /// Validates a whole container held in `bytes`.
    pub fn parse(bytes: &'a [u8]) -> Result<Container<'a>, ContainerError> {
        let (n, header) = split_header(bytes, bytes.len() as u64)
            .map_err(|e| recognise::instead(e, bytes, true))?;
        let data = bytes.get(header_end(n)..).unwrap_or_default();
        let table = Table::parse(header, data.len() as u64)
            .map_err(|e| recognise::instead(e, bytes, true))?;
        for &(gap_begin, gap_end) in &table.gaps {
            let gap = data
                .get(to_usize(gap_begin)..to_usize(gap_end))
                .unwrap_or_default();
            if gap.iter().any(|&b| b != 0) {
                let next = table.entries.iter().find(|e| e.begin == gap_end);
                return Err(ContainerError::Hole {
                    tensor: next.map(|e| e.name.clone()).unwrap_or_default(),
                    gap_begin,
                    gap_end,
                    why: "the gap holds non-zero bytes",
                });
            }
        }
        Ok(Container { table, data })
    }

    /// The bytes of `entry`, which must come from this container's table.
    pub fn data(&self, entry: &TensorInfo) -> &'a [u8] {
        self.data
            .get(to_usize(entry.begin)..to_usize(entry.end))
            .unwrap_or_default()
    }

    /// The entry named `name` (a binary search of the table's name index).
    pub fn get(&self, name: &str) -> Option<&TensorInfo> {
        self.table.get(name)
    }
}

/// Validates only the header of a container, given its first bytes and the whole file's length: for a
/// target model whose data section the gate must never read. Alignment gaps are accepted unread.
pub fn parse_header_only(prefix: &[u8], file_len: u64) -> Result<Table, ContainerError> {
    let whole = prefix.len() as u64 == file_len;
    let (n, header) =
        split_header(prefix, file_len).map_err(|e| recognise::instead(e, prefix, whole))?;
    Table::parse(header, file_len - 8 - n).map_err(|e| recognise::instead(e, prefix, whole))
}

/// Reads the length prefix of a file of `file_len` bytes whose first bytes are `prefix`, and returns
/// `n` and the header bytes. `prefix` must hold the whole header when it fits in the file.
pub fn split_header(prefix: &[u8], file_len: u64) -> Result<(u64, &[u8]), ContainerError> {
    let Some(len_bytes) = prefix.get(..8) else {
        return Err(ContainerError::TooShort {
            len: file_len.min(prefix.len() as u64),
        });
    };
    let n = header_length(len_bytes.try_into().unwrap_or_default(), file_len)?;
    match prefix.get(8..header_end(n)) {
        Some(header) => Ok((n, header)),
        None => Err(ContainerError::HeaderPastEnd {
            n,
            file_len: prefix.len() as u64,
        }),
    }
}

/// The header length a safetensors file's first 8 bytes declare (little-endian), bounded before
/// anything is sized from it: at most [`MAX_HEADER_BYTES`], and inside the file of `file_len` bytes.
/// The one place both the container and the checkpoint readers take it from.
pub fn header_length(len_bytes: [u8; 8], file_len: u64) -> Result<u64, ContainerError> {
    let n = u64::from_le_bytes(len_bytes);
    if n > MAX_HEADER_BYTES {
        return Err(ContainerError::HeaderTooLarge { n });
    }
    // n <= 100 MiB, so 8 + n cannot overflow.
    if 8 + n > file_len {
        return Err(ContainerError::HeaderPastEnd { n, file_len });
    }
    Ok(n)
}

fn header_end(n: u64) -> usize {
    to_usize(8 + n)
}

/// Offsets reaching this point were checked against a buffer's length, so they fit in `usize`.
fn to_usize(x: u64) -> usize {
    usize::try_from(x).unwrap_or(usize::MAX)
}

impl Table {
    /// Validates the JSON header against a data section of `data_len` bytes.
    pub fn parse(header: &[u8], data_len: u64) -> Result<Table, ContainerError> {
        let text = std::str::from_utf8(header).map_err(|e| ContainerError::HeaderNotUtf8 {
            offset: e.valid_up_to(),
        })?;
        let header::Parsed {
            mut entries,
            metadata,
        } = header::parse(text)?;
        entries.sort_by(|a, b| (a.begin, a.end, &a.name).cmp(&(b.begin, b.end, &b.name)));
        // At most MAX_TENSORS entries, so every position fits in u32.
        let mut by_name: Vec<u32> = (0..entries.len() as u32).collect();
        by_name.sort_unstable_by(|&a, &b| entries[a as usize].name.cmp(&entries[b as usize].name));
        if let Some(pair) = by_name
            .windows(2)
            .find(|w| entries[w[0] as usize].name == entries[w[1] as usize].name)
        {
            return Err(ContainerError::HeaderNotJson {
                reason: format!("duplicate key {:?}", entries[pair[0] as usize].name),
            });
        }
        let gaps = check_layout(&entries, data_len)?;
        Ok(Table {
            entries,
            metadata,
            header_bytes: 8 + header.len() as u64,
            data_len,
            gaps,
            by_name,
        })
    }

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&TensorInfo> {
        let at = self
            .by_name
            .binary_search_by(|&i| self.entries[i as usize].name.as_str().cmp(name))
            .ok()?;
        self.entries.get(self.by_name[at] as usize)
    }
}

/// The checks on one entry once its fields are read: offsets in order, and the shape's byte count
/// (by checked multiplication) equal to their span.
fn entry(
    name: String,
    dtype: Dtype,
    shape: Vec<u64>,
    begin: u64,
    end: u64,
) -> Result<TensorInfo, ContainerError> {
    let tensor = || name.clone();
    if begin > end {
        return Err(ContainerError::BeginAfterEnd {
            tensor: tensor(),
            begin,
            end,
        });
    }
    let declared = shape
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| ContainerError::ByteCountOverflow { tensor: tensor() })?;
    if declared != end - begin {
        return Err(ContainerError::SizeMismatch {
            tensor: tensor(),
            declared,
            span: end - begin,
        });
    }
    Ok(TensorInfo {
        name,
        dtype,
        shape,
        begin,
        end,
    })
}

/// Requires the sorted entries to tile `[0, data_len)`, allowing only the packer's alignment gaps.
fn check_layout(entries: &[TensorInfo], data_len: u64) -> Result<Vec<(u64, u64)>, ContainerError> {
    let mut gaps = Vec::new();
    let mut cursor = 0u64;
    let mut previous: Option<&TensorInfo> = None;
    for entry in entries {
        if entry.begin < cursor {
            let prev = previous.map(|p| p.name.clone()).unwrap_or_default();
            return Err(ContainerError::Overlap {
                tensor: entry.name.clone(),
                other: prev,
                begin: entry.begin,
                other_end: cursor,
            });
        }
        if entry.begin > cursor {
            let hole = |why| ContainerError::Hole {
                tensor: entry.name.clone(),
                gap_begin: cursor,
                gap_end: entry.begin,
                why,
            };
            if previous.is_none() {
                return Err(hole("the first tensor must start at offset 0"));
            }
            if entry.begin - cursor >= TENSOR_ALIGNMENT {
                return Err(hole(
                    "too long for an alignment gap, which is shorter than 64 bytes",
                ));
            }
            if entry.begin % TENSOR_ALIGNMENT != 0 {
                return Err(hole("the next tensor does not start on a 64-byte boundary"));
            }
            gaps.push((cursor, entry.begin));
        }
        cursor = entry.end;
        previous = Some(entry);
    }
    if let Some(at) = entries.iter().position(|e| e.end > data_len) {
        let cut = &entries[at];
        return Err(ContainerError::Truncated {
            tensor: cut.name.clone(),
            begin: cut.begin,
            end: cut.end,
            last_end: cursor,
            data_len,
            beyond: entries[at + 1..]
                .iter()
                .filter(|e| e.begin >= data_len)
                .count(),
        });
    }
    if cursor != data_len {
        return Err(ContainerError::DataLengthMismatch {
            last_end: cursor,
            data_len,
        });
    }
    Ok(gaps)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A container whose header is `json` (padded to 8 bytes like the writer) followed by `data`.
    fn file(json: &str, data: &[u8]) -> Vec<u8> {
        let mut header = json.as_bytes().to_vec();
        while !header.len().is_multiple_of(8) {
            header.push(b' ');
        }
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&header);
        out.extend_from_slice(data);
        out
    }

    fn refusal(bytes: &[u8]) -> ContainerError {
        Container::parse(bytes).expect_err("should be refused")
    }

    const TWO: &str = r#"{"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]}}"#;

    #[test]
    fn a_well_formed_file_parses_with_views() {
        let bytes = file(TWO, &[1, 2, 3, 4, 5, 6, 7, 8]);
        let c = Container::parse(&bytes).unwrap();
        assert_eq!(c.table.entries.len(), 2);
        assert_eq!(c.data(c.get("b").unwrap()), &[5, 6, 7, 8]);
        assert_eq!(c.table.header_bytes, bytes.len() as u64 - 8);
        assert!(c.table.gaps.is_empty());
    }

    #[test]
    fn too_short() {
        assert_eq!(refusal(&[0; 7]), ContainerError::TooShort { len: 7 });
    }

    #[test]
    fn header_too_large() {
        let mut b = (MAX_HEADER_BYTES + 1).to_le_bytes().to_vec();
        b.extend_from_slice(b"{}");
        assert_eq!(
            refusal(&b),
            ContainerError::HeaderTooLarge {
                n: MAX_HEADER_BYTES + 1
            }
        );
    }

    #[test]
    fn header_past_end() {
        let mut b = 100u64.to_le_bytes().to_vec();
        b.extend_from_slice(b"{}");
        assert_eq!(
            refusal(&b),
            ContainerError::HeaderPastEnd {
                n: 100,
                file_len: 10
            }
        );
        assert!(refusal(&b)
            .to_string()
            .ends_with("-byte file: truncated in its header, or not a Q4NX file"));
    }

    #[test]
    fn header_not_utf8() {
        let mut b = 4u64.to_le_bytes().to_vec();
        b.extend_from_slice(&[b'{', 0xff, b'}', b' ']);
        assert_eq!(refusal(&b), ContainerError::HeaderNotUtf8 { offset: 1 });
    }

    #[test]
    fn header_not_json_and_duplicate_keys() {
        assert!(matches!(
            refusal(&file("{", &[])),
            ContainerError::HeaderNotJson { .. }
        ));
        let dup = r#"{"a":{"dtype":"I8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"I8","shape":[1],"data_offsets":[1,2]}}"#;
        let e = refusal(&file(dup, &[0, 0])).to_string();
        assert!(e.contains("duplicate key \"a\""), "{e}");
    }

    #[test]
    fn header_not_object() {
        assert_eq!(
            refusal(&file("[]", &[])),
            ContainerError::HeaderNotObject { found: "array" }
        );
    }

    #[test]
    fn bad_metadata() {
        let e = refusal(&file(r#"{"__metadata__":{"k":1}}"#, &[]));
        assert_eq!(
            e,
            ContainerError::BadMetadata {
                key: Some("k".into())
            }
        );
    }

    #[test]
    fn config_scalar_at_top_level_is_named() {
        let e = refusal(&file(r#"{"block_size":8}"#, &[]));
        assert_eq!(
            e,
            ContainerError::NotATensorEntry {
                key: "block_size".into(),
                found: "number"
            }
        );
    }

    #[test]
    fn missing_unknown_and_bad_fields() {
        let e = refusal(&file(r#"{"t":{"dtype":"I8","shape":[1]}}"#, &[0]));
        assert_eq!(
            e,
            ContainerError::MissingField {
                tensor: "t".into(),
                field: "data_offsets"
            }
        );
        let e = refusal(&file(
            r#"{"t":{"dtype":"I8","shape":[1],"data_offsets":[0,1],"q":1}}"#,
            &[0],
        ));
        assert_eq!(
            e,
            ContainerError::UnknownField {
                tensor: "t".into(),
                field: "q".into()
            }
        );
        let e = refusal(&file(
            r#"{"t":{"dtype":"I8","shape":[1],"data_offsets":[0]}}"#,
            &[0],
        ));
        assert!(matches!(
            e,
            ContainerError::BadField {
                field: "data_offsets",
                ..
            }
        ));
    }

    #[test]
    fn unknown_dtype() {
        let e = refusal(&file(
            r#"{"t":{"dtype":"Q4_1","shape":[1],"data_offsets":[0,1]}}"#,
            &[0],
        ));
        assert_eq!(
            e,
            ContainerError::UnknownDtype {
                tensor: "t".into(),
                dtype: "Q4_1".into()
            }
        );
    }

    #[test]
    fn negative_and_fractional_dimensions() {
        for dim in ["-1", "1.5", "18446744073709551616"] {
            let json = format!(r#"{{"t":{{"dtype":"I8","shape":[{dim}],"data_offsets":[0,1]}}}}"#);
            assert!(
                matches!(
                    refusal(&file(&json, &[0])),
                    ContainerError::BadDimension { index: 0, .. }
                ),
                "{dim}"
            );
        }
    }

    #[test]
    fn structures_no_table_has_are_refused_as_they_stream() {
        // One huge array, where an object of entries belongs: refused at its first byte.
        let array = format!("[{}0]", "0,".repeat(100_000));
        assert_eq!(
            refusal(&file(&array, &[])),
            ContainerError::HeaderNotObject { found: "array" }
        );
        // A shape of a million dimensions is counted, not kept.
        let wide = format!(
            r#"{{"t":{{"dtype":"I8","shape":[{}1],"data_offsets":[0,1]}}}}"#,
            "1,".repeat(999_999)
        );
        assert_eq!(
            refusal(&file(&wide, &[0])),
            ContainerError::RankTooLarge {
                tensor: "t".into(),
                rank: 1_000_000
            }
        );
        // Deep nesting anywhere is refused at the limit, not at serde_json's own.
        let deep = format!(
            r#"{{"t":{{"dtype":"I8","shape":[{}{}],"data_offsets":[0,1]}}}}"#,
            "[".repeat(100),
            "]".repeat(100)
        );
        let e = refusal(&file(&deep, &[0])).to_string();
        assert!(
            e.contains("nested deeper than the 64 levels accepted"),
            "{e}"
        );
        // Metadata is bounded too.
        let keys: Vec<String> = (0..=MAX_METADATA_KEYS)
            .map(|i| format!("\"k{i}\":\"\""))
            .collect();
        let meta = format!(r#"{{"__metadata__":{{{}}}}}"#, keys.join(","));
        assert_eq!(refusal(&file(&meta, &[])), ContainerError::TooMuchMetadata);
    }

    #[test]
    fn empty_tensors_are_bounded_and_names_are_indexed() {
        let entries = |n: usize| -> String {
            let e: Vec<String> = (0..n)
                .map(|i| format!(r#""t{i}":{{"dtype":"I8","shape":[0],"data_offsets":[0,0]}}"#))
                .collect();
            format!("{{{}}}", e.join(","))
        };
        let bytes = file(&entries(MAX_EMPTY_TENSORS), &[]);
        let c = Container::parse(&bytes).unwrap();
        assert_eq!(c.get("t77").map(|e| e.name.as_str()), Some("t77"));
        assert!(c.get("t").is_none() && c.get("t1024").is_none());
        assert_eq!(
            refusal(&file(&entries(1 << 20), &[])),
            ContainerError::TooManyEmptyTensors {
                count: MAX_EMPTY_TENSORS + 1
            }
        );
    }

    /// The fields matched in place (keys and the dtype never copied) are matched as JSON spells
    /// them, escapes included, and refused as before when repeated or malformed.
    #[test]
    fn entry_fields_matched_in_place() {
        let escaped = r#"{"t":{"dty\u0070e":"I\u0038","shape":[1],"data_offsets":[0,1]}}"#;
        let bytes = file(escaped, &[0]);
        let c = Container::parse(&bytes).unwrap();
        assert_eq!(c.get("t").map(|e| e.dtype), Some(Dtype::I8));
        for (field, json) in [
            (
                "dtype",
                r#"{"t":{"dtype":"I8","dtype":"I8","shape":[1],"data_offsets":[0,1]}}"#,
            ),
            (
                "shape",
                r#"{"t":{"shape":[1],"dtype":"I8","shape":[1],"data_offsets":[0,1]}}"#,
            ),
            (
                "data_offsets",
                r#"{"t":{"data_offsets":[0,1],"dtype":"I8","shape":[1],"data_offsets":[0,1]}}"#,
            ),
        ] {
            let e = refusal(&file(json, &[0])).to_string();
            assert!(e.contains(&format!("duplicate key \"{field}\"")), "{e}");
        }
        for offsets in ["[0,1,2]", "[0,-1]", "[0.5,1]", "[\"0\",1]", "{}"] {
            let json = format!(r#"{{"t":{{"dtype":"I8","shape":[1],"data_offsets":{offsets}}}}}"#);
            assert!(
                matches!(
                    refusal(&file(&json, &[0])),
                    ContainerError::BadField {
                        field: "data_offsets",
                        ..
                    }
                ),
                "{offsets}"
            );
        }
        let json = r#"{"t":{"dtype":"I8","shape":[1,-2,-3],"data_offsets":[0,1]}}"#;
        assert_eq!(
            refusal(&file(json, &[0])),
            ContainerError::BadDimension {
                tensor: "t".into(),
                index: 1,
                value: "-2".into()
            }
        );
        let json = r#"{"t":{"dtype":7,"shape":[1],"data_offsets":[0,1]}}"#;
        assert!(matches!(
            refusal(&file(json, &[0])),
            ContainerError::BadField { field: "dtype", .. }
        ));
    }

    #[test]
    fn rank_too_large() {
        let e = refusal(&file(
            r#"{"t":{"dtype":"I8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}}"#,
            &[0],
        ));
        assert_eq!(
            e,
            ContainerError::RankTooLarge {
                tensor: "t".into(),
                rank: 9
            }
        );
    }

    #[test]
    fn byte_count_overflow() {
        let json = r#"{"t":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,1]}}"#;
        assert_eq!(
            refusal(&file(json, &[0])),
            ContainerError::ByteCountOverflow { tensor: "t".into() }
        );
    }

    #[test]
    fn size_mismatch() {
        let e = refusal(&file(
            r#"{"t":{"dtype":"BF16","shape":[2],"data_offsets":[0,3]}}"#,
            &[0; 3],
        ));
        assert_eq!(
            e,
            ContainerError::SizeMismatch {
                tensor: "t".into(),
                declared: 4,
                span: 3
            }
        );
    }

    #[test]
    fn begin_after_end() {
        let e = refusal(&file(
            r#"{"t":{"dtype":"I8","shape":[0],"data_offsets":[2,1]}}"#,
            &[0; 2],
        ));
        assert_eq!(
            e,
            ContainerError::BeginAfterEnd {
                tensor: "t".into(),
                begin: 2,
                end: 1
            }
        );
    }

    #[test]
    fn overlap_names_both() {
        let json = r#"{"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"I8","shape":[4],"data_offsets":[2,6]}}"#;
        let e = refusal(&file(json, &[0; 6]));
        assert_eq!(
            e,
            ContainerError::Overlap {
                tensor: "b".into(),
                other: "a".into(),
                begin: 2,
                other_end: 4
            }
        );
    }

    #[test]
    fn holes() {
        let first = r#"{"a":{"dtype":"I8","shape":[4],"data_offsets":[4,8]}}"#;
        assert!(matches!(
            refusal(&file(first, &[0; 8])),
            ContainerError::Hole { gap_begin: 0, .. }
        ));
        let unaligned = r#"{"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"I8","shape":[4],"data_offsets":[8,12]}}"#;
        let e = refusal(&file(unaligned, &[0; 12])).to_string();
        assert!(e.contains("64-byte boundary") && e.contains("\"b\""), "{e}");
        let wide = r#"{"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"I8","shape":[4],"data_offsets":[128,132]}}"#;
        let e = refusal(&file(wide, &[0; 132])).to_string();
        assert!(e.contains("shorter than 64"), "{e}");
    }

    #[test]
    fn aligned_zero_gap_is_accepted_and_a_dirty_one_refused() {
        let json = r#"{"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"I8","shape":[4],"data_offsets":[64,68]}}"#;
        let mut data = vec![0u8; 68];
        let c = Container::parse(&file(json, &data))
            .map(|c| c.table.gaps)
            .unwrap();
        assert_eq!(c, vec![(4, 64)]);
        data[10] = 1;
        let e = refusal(&file(json, &data)).to_string();
        assert!(e.contains("non-zero"), "{e}");
    }

    #[test]
    fn trailing_bytes_and_short_file() {
        let mut b = file(TWO, &[0; 8]);
        b.push(0);
        assert_eq!(
            refusal(&b),
            ContainerError::DataLengthMismatch {
                last_end: 8,
                data_len: 9
            }
        );
        b.truncate(b.len() - 2);
        let short = refusal(&b);
        assert_eq!(
            short,
            ContainerError::Truncated {
                tensor: "b".to_owned(),
                begin: 4,
                end: 8,
                last_end: 8,
                data_len: 7,
                beyond: 0
            }
        );
        // A short file is named truncated, with the tensor it cuts off.
        let said = short.to_string();
        assert!(
            said.contains("file is short, truncated")
                && said.contains("tensor \"b\" (data offsets [4, 8]) is cut off"),
            "{said}"
        );
        b.truncate(b.len() - 4);
        let said = refusal(&b).to_string();
        assert!(said.ends_with("tensor \"a\" (data offsets [0, 4]) is cut off, and 1 more tensor starts past the end"), "{said}");
    }

    #[test]
    fn header_only_reads_no_data() {
        let b = file(TWO, &[9; 8]);
        let header_len = b.len() - 8;
        let t = parse_header_only(&b[..header_len], b.len() as u64).unwrap();
        assert_eq!(t.entries.len(), 2);
    }
}
