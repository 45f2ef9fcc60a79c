//! A torch archive (`torch.save` since torch 1.6), read from its bytes without running anything.
//!
//! torch writes a zip of stored (uncompressed) entries under one folder named after the file:
//! `<name>/data.pkl` (the pickle), `<name>/data/<key>` (one per storage, the raw little-endian
//! elements), `<name>/version`, `<name>/byteorder` and a few more small records. The central
//! directory is read strictly: every offset through `get`, every sum overflow-checked, the entry
//! count and sizes bounded by [`crate::limits`], no name that leaves the archive, no duplicate, no
//! compressed or encrypted entry, and each entry's local header agreeing with its directory record
//! and its CRC-32 with its bytes. The pickle is read by [`crate::pickle`], which executes nothing.
//!
//! [`read_mask_embedding`] is the one entry point: the typed `{mask_token_id, embedding}` of
//! `mask_embedding.pt` (spec section 18.2), or what was wrong, in a sentence.

use crate::limits::{MAX_TORCH_ARCHIVE_BYTES, MAX_ZIP_ENTRIES, MAX_ZIP_NAME_BYTES};
use crate::pickle::{self, StorageType, Tensor, Value};

/// The file's name, as the draft folder holds it.
pub const MASK_EMBEDDING_FILE: &str = "mask_embedding.pt";

/// What `mask_embedding.pt` holds once read: the id and the embedding's values, widened to f32.
#[derive(Clone, Debug, PartialEq)]
pub struct MaskEmbedding {
    pub mask_token_id: i64,
    pub dtype: StorageType,
    pub shape: Vec<u64>,
    pub values: Vec<f32>,
}

/// Why an archive was refused: a lowercase sentence naming the entry, the field or the global.
pub type Refusal = String;

/// Reads `mask_embedding.pt`'s bytes: the archive, its pickle, and the embedding's storage.
pub fn read_mask_embedding(bytes: &[u8]) -> Result<MaskEmbedding, Refusal> {
    let archive = Archive::read(bytes)?;
    let prefix = archive.prefix()?;
    if let Some(order) = archive.entry(&format!("{prefix}/byteorder")) {
        if order != b"little" {
            return Err(format!(
                "{prefix}/byteorder is not \"little\": a big-endian archive is not read"
            ));
        }
    }
    let pkl = archive
        .entry(&format!("{prefix}/data.pkl"))
        .ok_or_else(|| format!("the archive has no {prefix}/data.pkl"))?;
    let value = pickle::read(pkl).map_err(|e| format!("{prefix}/data.pkl: {e}"))?;
    let Value::Dict(items, _) = &*value else {
        return Err(format!(
            "{prefix}/data.pkl holds {}, not a dict of mask_token_id and embedding",
            value.kind()
        ));
    };
    let mut id = None;
    let mut embedding = None;
    for (k, v) in items {
        let Value::Str(key) = &**k else {
            return Err(format!("a key of the dict is {}, not a string", k.kind()));
        };
        match (key.as_str(), &**v) {
            ("mask_token_id", Value::Int(i)) if id.is_none() => id = Some(*i),
            ("mask_token_id", other) if id.is_none() => {
                return Err(format!("mask_token_id is {}, not an integer", other.kind()))
            }
            ("embedding", Value::Tensor(t)) if embedding.is_none() => embedding = Some(t),
            ("embedding", other) if embedding.is_none() => {
                return Err(format!("embedding is {}, not a tensor", other.kind()))
            }
            ("mask_token_id" | "embedding", _) => {
                return Err(format!("the dict holds {key} twice"));
            }
            _ => {
                return Err(format!(
                    "the dict holds the key {key:?}: only mask_token_id and embedding are read"
                ))
            }
        }
    }
    let mask_token_id = id.ok_or("the dict has no mask_token_id")?;
    let tensor = embedding.ok_or("the dict has no embedding")?;
    let values = tensor_values(&archive, prefix, tensor)?;
    Ok(MaskEmbedding {
        mask_token_id,
        dtype: tensor.dtype,
        shape: tensor.shape.clone(),
        values,
    })
}

/// The tensor's values from its storage entry: contiguous, covered by the storage, of a float type.
fn tensor_values(archive: &Archive<'_>, prefix: &str, t: &Tensor) -> Result<Vec<f32>, Refusal> {
    let name = format!("{prefix}/data/{}", t.storage_key);
    let data = archive
        .entry(&name)
        .ok_or_else(|| format!("the embedding's storage {name} is not in the archive"))?;
    let size = t.dtype.element_bytes();
    if t.storage_numel.checked_mul(size) != Some(data.len() as u64) {
        return Err(format!(
            "{name} holds {} bytes where its {} elements of {} take {}",
            data.len(),
            t.storage_numel,
            t.dtype.name(),
            t.storage_numel.saturating_mul(size)
        ));
    }
    let mut expected = 1u64;
    for (i, (&dim, &stride)) in t.shape.iter().zip(&t.stride).enumerate().rev() {
        if dim > 1 && stride != expected {
            return Err(format!(
                "the embedding is not contiguous: stride {:?} for shape {:?} (dimension {i})",
                t.stride, t.shape
            ));
        }
        expected = expected
            .checked_mul(dim)
            .ok_or("the embedding's shape overflows")?;
    }
    let end = t
        .offset
        .checked_add(expected)
        .filter(|&e| e <= t.storage_numel);
    let Some(end) = end else {
        return Err(format!(
            "the embedding's {expected} elements from offset {} run past its storage's {}",
            t.offset, t.storage_numel
        ));
    };
    let (from, to) = (
        usize::try_from(t.offset * size).map_err(|_| "offset too large")?,
        usize::try_from(end * size).map_err(|_| "storage too large")?,
    );
    let bytes = data
        .get(from..to)
        .ok_or("the embedding's bytes are out of its storage")?;
    match t.dtype {
        StorageType::Float => Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()),
        StorageType::Half => Ok(bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect()),
        StorageType::BFloat16 => Ok(bytes
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect()),
        StorageType::Double => Ok(bytes
            .chunks_exact(8)
            .map(|c| {
                let v = f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
                // An f64 beyond f32's range is still finite: keep its finiteness, not its value.
                if v.is_finite() {
                    (v as f32).clamp(f32::MIN, f32::MAX)
                } else {
                    v as f32
                }
            })
            .collect()),
        other => Err(format!(
            "the embedding is {}, not a float type (torch.{}Storage)",
            other.name(),
            other.torch_name()
        )),
    }
}

/// A zip archive's entries, each its name and its stored bytes, in directory order.
pub struct Archive<'a> {
    entries: Vec<(String, &'a [u8])>,
}

const LOCAL: u32 = 0x0403_4b50;
const CENTRAL: u32 = 0x0201_4b50;
const END: u32 = 0x0605_4b50;
const END64: u32 = 0x0606_4b50;
const LOCATOR64: u32 = 0x0706_4b50;
/// The end record's fixed size; a comment may follow it, up to 65,535 bytes.
const END_BYTES: usize = 22;
/// A zip64 end record without extensible data, and its locator: torch's writer adds both.
const END64_BYTES: usize = 56;
const LOCATOR64_BYTES: usize = 20;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

impl<'a> Archive<'a> {
    /// Reads the archive's central directory and proves each entry's bytes are where it says.
    pub fn read(bytes: &'a [u8]) -> Result<Archive<'a>, Refusal> {
        if bytes.len() as u64 > MAX_TORCH_ARCHIVE_BYTES {
            return Err(format!(
                "the file is {} bytes, over the {MAX_TORCH_ARCHIVE_BYTES} a torch archive is read to",
                bytes.len()
            ));
        }
        if u32_at(bytes, 0) != Some(LOCAL) {
            return Err(not_a_zip(bytes));
        }
        let end =
            find_end(bytes).ok_or("the zip archive has no end of central directory record")?;
        let field = |at: usize| u16_at(bytes, end + at).map(usize::from);
        let (disk, cd_disk, here, total) = (field(4), field(6), field(8), field(10));
        let cd_size = u32_at(bytes, end + 12).ok_or("truncated end record")? as usize;
        let cd_offset = u32_at(bytes, end + 16).ok_or("truncated end record")? as usize;
        if disk != Some(0) || cd_disk != Some(0) || here != total {
            return Err("the zip archive spans several disks".to_owned());
        }
        let total = total.ok_or("truncated end record")?;
        if total > MAX_ZIP_ENTRIES {
            return Err(format!(
                "the zip archive declares {total} entries, over the {MAX_ZIP_ENTRIES} read"
            ));
        }
        let cd_end = cd_offset
            .checked_add(cd_size)
            .filter(|&e| e <= end)
            .ok_or("the central directory runs past its end record")?;
        // Between the directory and its end record: nothing, or torch's zip64 record and locator.
        match end - cd_end {
            0 => {}
            n if n == END64_BYTES + LOCATOR64_BYTES
                && u32_at(bytes, cd_end) == Some(END64)
                && u32_at(bytes, cd_end + END64_BYTES) == Some(LOCATOR64) => {}
            n => {
                return Err(format!(
                    "{n} bytes between the central directory and its end record are not a zip64 end record"
                ))
            }
        }
        let directory = bytes
            .get(cd_offset..cd_end)
            .ok_or("the central directory is out of the file")?;
        let mut entries: Vec<(String, &'a [u8])> = Vec::with_capacity(total);
        let mut at = 0usize;
        for i in 0..total {
            let (name, data, next) = central_entry(bytes, directory, at)
                .map_err(|e| format!("central directory entry {i}: {e}"))?;
            if entries.iter().any(|(n, _)| *n == name) {
                return Err(format!("the archive holds {name} twice"));
            }
            entries.push((name, data));
            at = next;
        }
        if at != directory.len() {
            return Err(format!(
                "the central directory holds {} bytes after its {total} entries",
                directory.len() - at
            ));
        }
        Ok(Archive { entries })
    }

    /// An entry's bytes by its full name.
    pub fn entry(&self, name: &str) -> Option<&'a [u8]> {
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, d)| *d)
    }

    /// The one folder every entry is in (torch names it after the file), proven to hold a pickle.
    fn prefix(&self) -> Result<&str, Refusal> {
        let first = self.entries.first().ok_or("the archive is empty")?;
        let prefix = first.0.split('/').next().unwrap_or_default();
        if let Some((n, _)) = self
            .entries
            .iter()
            .find(|(n, _)| n.split_once('/').is_none_or(|(p, _)| p != prefix))
        {
            return Err(format!(
                "{n} is outside the archive's folder {prefix}/: a torch archive keeps every entry in one"
            ));
        }
        Ok(prefix)
    }
}

/// What a file that is not a zip archive is, by its first bytes.
fn not_a_zip(bytes: &[u8]) -> Refusal {
    // torch.save before 1.6 (and `_use_new_zipfile_serialization=False`) writes pickles back to
    // back, the first a protocol-2 pickle of a magic number: `\x80\x02\x8a\x0a` then its bytes.
    if bytes.first() == Some(&0x80) {
        "a legacy torch file (a bare pickle stream, torch.save before 1.6 or _use_new_zipfile_serialization=False), not a torch zip archive: the gate reads only the zip form".to_owned()
    } else if bytes.len() >= 262 && bytes.get(257..262) == Some(b"ustar") {
        "a legacy torch tar file, not a torch zip archive: the gate reads only the zip form"
            .to_owned()
    } else {
        "not a torch zip archive (no zip local header at its start)".to_owned()
    }
}

/// The end of central directory record's offset: the last signature whose comment ends the file.
fn find_end(bytes: &[u8]) -> Option<usize> {
    let last = bytes.len().checked_sub(END_BYTES)?;
    let first = last.saturating_sub(usize::from(u16::MAX));
    (first..=last).rev().find(|&at| {
        u32_at(bytes, at) == Some(END)
            && u16_at(bytes, at + 20).map(usize::from) == Some(bytes.len() - at - END_BYTES)
    })
}

/// One central directory record at `at`: the entry's name, its bytes, and the next record's offset.
fn central_entry<'a>(
    file: &'a [u8],
    directory: &[u8],
    at: usize,
) -> Result<(String, &'a [u8], usize), Refusal> {
    let short = || "truncated".to_owned();
    if u32_at(directory, at) != Some(CENTRAL) {
        return Err("no central directory signature".to_owned());
    }
    let u16f = |o: usize| u16_at(directory, at + o).ok_or_else(short);
    let u32f = |o: usize| u32_at(directory, at + o).ok_or_else(short);
    let (flags, method) = (u16f(8)?, u16f(10)?);
    let (crc, compressed, size) = (u32f(16)?, u32f(20)?, u32f(24)?);
    let (name_len, extra_len, comment_len) = (
        usize::from(u16f(28)?),
        usize::from(u16f(30)?),
        usize::from(u16f(32)?),
    );
    let local = u32f(42)? as usize;
    if name_len > MAX_ZIP_NAME_BYTES {
        return Err(format!(
            "a name of {name_len} bytes, over {MAX_ZIP_NAME_BYTES}"
        ));
    }
    let name_at = at + 46;
    let raw = directory
        .get(name_at..name_at + name_len)
        .ok_or_else(short)?;
    let name = std::str::from_utf8(raw)
        .map_err(|_| "a name that is not UTF-8".to_owned())?
        .to_owned();
    let shown = crate::escape::escape(&name);
    if name.is_empty()
        || name.starts_with('/')
        || name.contains('\\')
        || name.contains(':')
        || name
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
        || name.chars().any(char::is_control)
    {
        return Err(format!("{shown} is not a name inside the archive"));
    }
    let next = name_at + name_len + extra_len + comment_len;
    if next > directory.len() {
        return Err(short());
    }
    if method != 0 {
        return Err(format!(
            "{shown} is compressed (method {method}): torch writes stored entries, and a compressed one is not read"
        ));
    }
    if flags & 1 != 0 {
        return Err(format!("{shown} is encrypted"));
    }
    if compressed != size {
        return Err(format!(
            "{shown} is stored with {compressed} bytes but declares {size}"
        ));
    }
    if u32_at(file, local) != Some(LOCAL) {
        return Err(format!("{shown}'s local header is not at offset {local}"));
    }
    let lu16 = |o: usize| u16_at(file, local + o).map(usize::from).ok_or_else(short);
    let (local_name_len, local_extra_len) = (lu16(26)?, lu16(28)?);
    let local_name = file
        .get(local + 30..local + 30 + local_name_len)
        .ok_or_else(short)?;
    if local_name != raw || lu16(8)? != usize::from(method) {
        return Err(format!(
            "{shown}'s local header disagrees with its directory entry"
        ));
    }
    // torch writes the local header's sizes and CRC (no data descriptor), as the directory does.
    if flags & 8 == 0
        && (u32_at(file, local + 14) != Some(crc)
            || u32_at(file, local + 18) != Some(compressed)
            || u32_at(file, local + 22) != Some(size))
    {
        return Err(format!(
            "{shown}'s local header disagrees with its directory entry"
        ));
    }
    let data_at = (local + 30)
        .checked_add(local_name_len)
        .and_then(|a| a.checked_add(local_extra_len))
        .ok_or_else(short)?;
    let data = file
        .get(data_at..)
        .and_then(|d| d.get(..size as usize))
        .ok_or_else(|| format!("{shown}'s {size} bytes run past the end of the file"))?;
    if crc32(data) != crc {
        return Err(format!("{shown}'s bytes do not match its CRC-32"));
    }
    Ok((name, data, next))
}

/// The zip CRC-32 (IEEE, reflected), bit by bit: the entries read are small.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{heap_asked_by, seeded};

    /// `torch.save({"mask_token_id": 151669, "embedding": <8 F32 values>})`, as the generator's
    /// writer lays torch's archive out (a suite test holds the two equal).
    const FIXTURE: &[u8] = include_bytes!("../../fixtures/mask_embedding.pt");

    fn refused(bytes: &[u8], says: &str) {
        match read_mask_embedding(bytes) {
            Ok(m) => panic!("read {m:?} where {says:?} was owed"),
            Err(e) => assert!(e.contains(says), "{e:?} does not say {says:?}"),
        }
    }

    /// A bare zip of stored `entries`: local headers, the directory, the end record.
    fn zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let (mut out, mut dir) = (Vec::new(), Vec::new());
        for (name, data) in entries {
            let head = |sig: u32| {
                let mut h = sig.to_le_bytes().to_vec();
                h.extend([0; 10]);
                h.extend(crc32(data).to_le_bytes());
                h.extend(
                    [
                        (data.len() as u32).to_le_bytes(),
                        (data.len() as u32).to_le_bytes(),
                    ]
                    .concat(),
                );
                h.extend((name.len() as u16).to_le_bytes());
                h.extend([0, 0]);
                h
            };
            let at = out.len() as u32;
            out.extend(head(LOCAL));
            out.extend(name.as_bytes());
            out.extend(*data);
            let mut d = head(CENTRAL);
            d.splice(4..4, [20, 0]);
            d.extend([0; 10]);
            d.extend(at.to_le_bytes());
            d.extend(name.as_bytes());
            dir.extend(d);
        }
        let (offset, size, n) = (out.len() as u32, dir.len() as u32, entries.len() as u16);
        out.extend(dir);
        out.extend(END.to_le_bytes());
        out.extend([0; 4]);
        out.extend([n.to_le_bytes(), n.to_le_bytes()].concat());
        out.extend([size.to_le_bytes(), offset.to_le_bytes()].concat());
        out.extend([0, 0]);
        out
    }

    #[test]
    fn reads_torchs_archive() {
        let m = read_mask_embedding(FIXTURE).unwrap();
        assert_eq!(m.mask_token_id, 151_669);
        assert_eq!(m.dtype, StorageType::Float);
        assert_eq!(m.shape, [8]);
        assert_eq!(
            m.values,
            (0..8).map(|i| i as f32 * 0.25 - 1.0).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_bare_zip_reads() {
        let pkl = b"\x80\x02}q\x00.";
        let a = zip(&[("a/data.pkl", pkl)]);
        refused(&a, "the dict has no mask_token_id");
    }

    #[test]
    fn refuses_a_legacy_torch_file() {
        refused(
            b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.",
            "a legacy torch file",
        );
    }

    #[test]
    fn refuses_a_file_that_is_no_zip() {
        refused(b"{\"mask_token_id\": 1}", "not a torch zip archive");
        refused(b"", "not a torch zip archive");
    }

    #[test]
    fn refuses_a_compressed_entry_naming_it() {
        let mut a = FIXTURE.to_vec();
        // The first entry (data.pkl): method 8 (deflate) in its local header and its directory record.
        a[8] = 8;
        let end = find_end(&a).unwrap();
        let cd = u32_at(&a, end + 16).unwrap() as usize;
        a[cd + 10] = 8;
        refused(&a, "mask_embedding/data.pkl is compressed (method 8)");
    }

    #[test]
    fn refuses_a_duplicate_name() {
        let a = zip(&[("a/data.pkl", b"."), ("a/data.pkl", b".")]);
        refused(&a, "the archive holds a/data.pkl twice");
    }

    #[test]
    fn refuses_a_name_that_leaves_the_archive() {
        refused(
            &zip(&[("a/../../etc/passwd", b"")]),
            "not a name inside the archive",
        );
        refused(
            &zip(&[("/etc/passwd", b"")]),
            "not a name inside the archive",
        );
    }

    #[test]
    fn refuses_an_entry_outside_the_folder() {
        refused(
            &zip(&[("a/data.pkl", b"."), ("b/data.pkl", b".")]),
            "outside the archive's folder a/",
        );
    }

    #[test]
    fn refuses_a_big_endian_archive() {
        refused(&zip(&[("a/byteorder", b"big")]), "big-endian");
    }

    #[test]
    fn refuses_bytes_that_do_not_match_their_crc() {
        let mut a = FIXTURE.to_vec();
        a[0x50] ^= 1;
        refused(
            &a,
            "mask_embedding/data.pkl's bytes do not match its CRC-32",
        );
    }

    #[test]
    fn refuses_too_many_entries() {
        let names: Vec<String> = (0..=MAX_ZIP_ENTRIES).map(|i| format!("a/{i}")).collect();
        let entries: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
        refused(&zip(&entries), "65 entries, over the 64");
    }

    /// The fixture's entries rebuilt as a bare zip, with its pickle's bytes `from` replaced by `to`.
    fn fixture_with(from: &[u8], to: &[u8]) -> Vec<u8> {
        let archive = Archive::read(FIXTURE).unwrap();
        let mut pkl = archive.entry("mask_embedding/data.pkl").unwrap().to_vec();
        let at = pkl.windows(from.len()).position(|w| w == from).unwrap();
        pkl.splice(at..at + from.len(), to.iter().copied());
        let entries: Vec<(&str, &[u8])> = archive
            .entries
            .iter()
            .map(|(n, d)| {
                (
                    n.as_str(),
                    if n.ends_with("data.pkl") {
                        &pkl[..]
                    } else {
                        *d
                    },
                )
            })
            .collect();
        zip(&entries)
    }

    #[test]
    fn refuses_a_storage_that_does_not_cover_the_tensor() {
        // The storage's persistent id says nine elements where its entry holds eight.
        let a = fixture_with(b"cpuq\x07K\x08t", b"cpuq\x07K\x09t");
        refused(
            &a,
            "mask_embedding/data/0 holds 32 bytes where its 9 elements of F32 take 36",
        );
    }

    #[test]
    fn refuses_a_storage_missing_from_the_archive() {
        let a = fixture_with(b"X\x01\x00\x00\x000", b"X\x01\x00\x00\x007");
        refused(
            &a,
            "the embedding's storage mask_embedding/data/7 is not in the archive",
        );
    }

    #[test]
    fn refuses_a_global_in_the_archives_pickle_naming_the_entry() {
        let a = fixture_with(b"torch._utils\n_rebuild_tensor_v2", b"posix\nsystem");
        refused(
            &a,
            "mask_embedding/data.pkl: GLOBAL at byte 47 names the global posix.system",
        );
    }

    #[test]
    fn refuses_an_embedding_that_is_not_contiguous() {
        let t = Tensor {
            dtype: StorageType::Float,
            storage_key: "0".to_owned(),
            storage_numel: 8,
            offset: 0,
            shape: vec![4],
            stride: vec![2],
        };
        let archive = Archive::read(FIXTURE).unwrap();
        let e = tensor_values(&archive, "mask_embedding", &t).unwrap_err();
        assert!(e.contains("not contiguous"), "{e}");
        let past = Tensor {
            offset: 5,
            stride: vec![1],
            ..t
        };
        let e = tensor_values(&archive, "mask_embedding", &past).unwrap_err();
        assert!(e.contains("run past its storage"), "{e}");
        let ints = Tensor {
            dtype: StorageType::Int,
            offset: 0,
            ..past
        };
        let e = tensor_values(&archive, "mask_embedding", &ints).unwrap_err();
        assert!(e.contains("not a float type"), "{e}");
    }

    #[test]
    fn refuses_a_file_over_the_size_limit() {
        let big = vec![0u8; MAX_TORCH_ARCHIVE_BYTES as usize + 1];
        refused(&big, "over the 16777216");
    }

    /// Thousands of archives bent at random (bytes flipped, fields set to extremes, the file cut
    /// short): each is read or refused, never a panic, and no reading asks the heap for more than a
    /// small multiple of the file, whatever its lengths claim.
    #[test]
    fn mutated_archives_never_panic_nor_allocate_from_a_claimed_length() {
        let mut next = seeded(0x70_69_63_6b);
        let extremes = [0u32, 1, 0x7f, 0xff, 0xffff, 0x7fff_ffff, 0xffff_ffff];
        for _ in 0..4000 {
            let mut a = FIXTURE.to_vec();
            for _ in 0..1 + next() % 4 {
                if a.is_empty() {
                    break;
                }
                let at = (next() % a.len() as u64) as usize;
                match next() % 4 {
                    0 => a[at] ^= 1 << (next() % 8),
                    1 => a[at] = next() as u8,
                    2 => {
                        let v = extremes[(next() % extremes.len() as u64) as usize].to_le_bytes();
                        let n = a.len().min(at + 4) - at;
                        a[at..at + n].copy_from_slice(&v[..n]);
                    }
                    _ => a.truncate(at),
                }
            }
            let (_, asked) = heap_asked_by(|| read_mask_embedding(&a));
            assert!(
                asked <= 64 * 1024 + 8 * a.len() as u64,
                "{asked} bytes for {} of archive",
                a.len()
            );
        }
    }
}
