//! `bf16.finite`: every value of every tensor labelled BF16 is finite.
//!
//! The form checks size a BF16 matrix (fc, a DFlash2 base kernel, codebook or BF16 kernel projection,
//! a draft's own embedding table) without reading its values, and `--source` compares bits, so a NaN
//! the converter copied passes both; a loader then multiplies with it and every activation it touches
//! turns NaN. Reading every BF16 byte once costs a pass at memory speed, so it is done for every
//! tensor, gains included (their own check reads them too, for another question).

use crate::container::{Container, TensorInfo};
use crate::dtype::Dtype;
use crate::evidence::{Bf16Finite, FirstNonFinite};
use crate::limits::MAX_CENSUS_TENSORS;
use crate::parallel::WorkerPanic;
use crate::report::Check;

pub const ID: &str = crate::check_id::CheckId::BF16_FINITE;

/// Bytes handed to a worker at a time: large enough that handing them out costs nothing, small enough
/// that one large tensor keeps every core busy. Even, so no element straddles two chunks.
const CHUNK_BYTES: usize = 1 << 20;

/// A bf16 whose exponent bits are all set is an infinity or a NaN.
const EXPONENT: u16 = 0x7f80;

/// The non-finite values of one float tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NonFinite<'t> {
    pub tensor: &'t TensorInfo,
    pub count: u64,
    /// The first one's element index (in declared order) and its bits.
    pub first: (u64, u32),
}

/// What the pass read: how many float tensors and elements, and every tensor holding a non-finite
/// value (in the order given).
pub struct Scan<'t> {
    pub tensors: usize,
    pub elements: u64,
    pub found: Vec<NonFinite<'t>>,
}

/// The float types whose every value is read: BF16 in a Q4NX package (its reader writes no other), and
/// F16 and F32 too in the forms that ship them (a Hugging Face folder, a GGUF).
pub fn is_float(dtype: Dtype) -> bool {
    matches!(dtype, Dtype::Bf16 | Dtype::F16 | Dtype::F32)
}

/// Reads every BF16 tensor of `container`, on every core. Public for the bench, which times it alone.
/// A worker that panicked loses the whole pass (nothing is then vouched for).
pub fn scan<'t>(container: &'t Container<'_>) -> Result<Scan<'t>, WorkerPanic> {
    let tensors: Vec<(&TensorInfo, &[u8])> = container
        .table
        .entries
        .iter()
        .filter(|e| e.dtype == Dtype::Bf16)
        .map(|e| (e, container.data(e)))
        .collect();
    scan_tensors(&tensors)
}

/// Reads every value of each float tensor given (its header entry and data bytes), on every core;
/// a tensor of another type is counted as nothing and skipped by the caller's filter, not here.
pub fn scan_tensors<'t>(tensors: &[(&'t TensorInfo, &[u8])]) -> Result<Scan<'t>, WorkerPanic> {
    let items = chunks(tensors);
    let bytes = tensors.iter().map(|(_, data)| data.len()).sum();
    let parts = crate::parallel::map_reading(ID, &items, bytes, || (), |_, c| read(tensors, c))?;
    Ok(gather(tensors, &items, parts))
}

/// A piece of the pass: the index of a tensor among those given, and the bytes `[from, to)` of
/// its data that one worker reads whole.
pub type Chunk = (usize, usize, usize);

/// What one chunk held: how many non-finite values, the first one's index within the chunk and
/// its bits; `None` for none.
pub type Read = Option<(u64, u64, u32)>;

/// The pass over `tensors` cut into chunks, for a caller that reads them in a step of its own
/// (a folder's scans read these beside `quant.scales`'s tensors, on the same workers).
pub fn chunks(tensors: &[(&TensorInfo, &[u8])]) -> Vec<Chunk> {
    let mut items = Vec::new();
    for (t, (_, data)) in tensors.iter().enumerate() {
        let len = data.len();
        let mut from = 0;
        while from < len {
            let to = from.saturating_add(CHUNK_BYTES).min(len);
            items.push((t, from, to));
            from = to;
        }
    }
    items
}

/// Reads one chunk of `tensors`; a chunk outside them reads as nothing found.
pub fn read(tensors: &[(&TensorInfo, &[u8])], &(t, from, to): &Chunk) -> Read {
    let (tensor, data) = tensors.get(t)?;
    chunk(tensor.dtype, data.get(from..to)?)
}

/// The pass's findings from each chunk's read (`parts`, in the order of `items`).
pub fn gather<'t>(
    tensors: &[(&'t TensorInfo, &[u8])],
    items: &[Chunk],
    parts: impl IntoIterator<Item = Read>,
) -> Scan<'t> {
    let mut found: Vec<NonFinite<'t>> = Vec::new();
    for (&(t, from, _), part) in items.iter().zip(parts) {
        let (Some((count, at, bits)), Some((tensor, _))) = (part, tensors.get(t)) else {
            continue;
        };
        let index = (from / width(tensor.dtype)) as u64 + at;
        match found.last_mut() {
            Some(last) if std::ptr::eq(last.tensor, *tensor) => last.count += count,
            _ => found.push(NonFinite {
                tensor,
                count,
                first: (index, bits),
            }),
        }
    }
    let elements = tensors
        .iter()
        .map(|(t, data)| (data.len() / width(t.dtype)) as u64)
        .sum();
    Scan {
        tensors: tensors.len(),
        elements,
        found,
    }
}

/// Bytes per element of a float type the scan reads (2 for anything not F32: the caller passes only
/// floats).
fn width(dtype: Dtype) -> usize {
    if dtype == Dtype::F32 {
        4
    } else {
        2
    }
}

/// How many elements of `bytes` (of float type `dtype`) are non-finite, the first one's index and
/// bits; `None` for none.
fn chunk(dtype: Dtype, bytes: &[u8]) -> Option<(u64, u64, u32)> {
    match dtype {
        Dtype::F32 => chunk_f32(bytes),
        Dtype::F16 => chunk_16(bytes, 0x7c00),
        _ => chunk_16(bytes, EXPONENT),
    }
}

/// A 16-bit float type whose exponent bits are `exponent` (BF16 `0x7f80`, F16 `0x7c00`).
fn chunk_16(bytes: &[u8], exponent: u16) -> Option<(u64, u64, u32)> {
    let (elements, _) = bytes.as_chunks::<2>();
    // Adding the exponent's lowest bit to the exponent bits carries into the sign position exactly
    // when they are all set: one add, one and, one or per element, which the compiler vectorizes.
    // Only a chunk that holds one is read again, element by element.
    let carry = exponent & exponent.wrapping_neg();
    let flagged = elements.iter().fold(0u16, |acc, e| {
        acc | (u16::from_le_bytes(*e) & exponent).wrapping_add(carry)
    });
    if flagged & 0x8000 == 0 {
        return None;
    }
    let bits = |e: &[u8; 2]| u16::from_le_bytes(*e);
    let bad = |e: &&[u8; 2]| bits(e) & exponent == exponent;
    let at = elements.iter().position(|e| bad(&e))?;
    let count = elements.iter().filter(bad).count() as u64;
    Some((count, at as u64, u32::from(bits(&elements[at]))))
}

fn chunk_f32(bytes: &[u8]) -> Option<(u64, u64, u32)> {
    const F32_EXPONENT: u32 = 0x7f80_0000;
    let (elements, _) = bytes.as_chunks::<4>();
    let flagged = elements.iter().fold(0u32, |acc, e| {
        acc | (u32::from_le_bytes(*e) & F32_EXPONENT).wrapping_add(0x0080_0000)
    });
    if flagged & 0x8000_0000 == 0 {
        return None;
    }
    let bad = |e: &&[u8; 4]| u32::from_le_bytes(**e) & F32_EXPONENT == F32_EXPONENT;
    let at = elements.iter().position(|e| bad(&e))?;
    let count = elements.iter().filter(bad).count() as u64;
    Some((count, at as u64, u32::from_le_bytes(elements[at])))
}

/// `[i, j, k]`: element `index` of a tensor of `shape`, row-major.
fn coordinates(shape: &[u64], mut index: u64) -> String {
    let mut at = vec![0u64; shape.len()];
    for (c, &d) in at.iter_mut().zip(shape).rev() {
        if d > 0 {
            *c = index % d;
            index /= d;
        }
    }
    let at: Vec<String> = at.iter().map(u64::to_string).collect();
    format!("[{}]", at.join(", "))
}

/// `inf`, `-inf` or `NaN`: the mantissa bits below the exponent are zero exactly for an infinity.
fn value(dtype: Dtype, bits: u32) -> &'static str {
    let (sign, mantissa) = match dtype {
        Dtype::F32 => (0x8000_0000, 0x007f_ffff),
        Dtype::F16 => (0x8000, 0x03ff),
        _ => (0x8000, 0x007f),
    };
    match (bits & mantissa == 0, bits & sign != 0) {
        (true, false) => "inf",
        (true, true) => "-inf",
        _ => "NaN",
    }
}

pub fn run(container: &Container<'_>) -> Result<Check, WorkerPanic> {
    run_except(container, &[])
}

/// The check, reading every BF16 tensor but those named in `proven`, which another pass (the
/// `source.bf16` comparison) read whole and found finite: they are counted as read, and the report
/// is the one a pass over them all makes. A name no BF16 tensor has proves nothing.
pub fn run_except(container: &Container<'_>, proven: &[String]) -> Result<Check, WorkerPanic> {
    let (mut tensors, mut elements) = (0, 0u64);
    let mut read = Vec::new();
    for e in container
        .table
        .entries
        .iter()
        .filter(|e| e.dtype == Dtype::Bf16)
    {
        let data = container.data(e);
        if proven.contains(&e.name) {
            tensors += 1;
            elements += (data.len() / width(e.dtype)) as u64;
        } else {
            read.push((e, data));
        }
    }
    let mut scan = scan_tensors(&read)?;
    scan.tensors += tensors;
    scan.elements += elements;
    Ok(verdict(&scan, "BF16"))
}

/// The check for a draft folder's float tensors (read from every shard, every value of every
/// BF16, F16 and F32 tensor), from their finished scan.
pub fn floats_verdict(scan: &Scan<'_>) -> Check {
    verdict(scan, "float (BF16, F16, F32)")
}

/// The check for a finished scan; `kind` names the tensors it read (`BF16`).
fn verdict(scan: &Scan<'_>, kind: &str) -> Check {
    let evidence = Bf16Finite {
        tensors: scan.tensors,
        elements: scan.elements,
        // Listed up to the census's limit, the rest counted: a million NaN tensors stay a few lines.
        non_finite: scan
            .found
            .iter()
            .take(MAX_CENSUS_TENSORS)
            .map(|f| (f.tensor.name.clone(), f.count))
            .collect(),
        not_listed: scan.found.len().saturating_sub(MAX_CENSUS_TENSORS) as u64,
        first: scan.found.first().map(|f| FirstNonFinite {
            tensor: f.tensor.name.clone(),
            index: f.first.0,
            value: value(f.tensor.dtype, f.first.1),
        }),
    };
    if let Some(f) = scan.found.first() {
        let names: Vec<&str> = scan.found.iter().map(|f| f.tensor.name.as_str()).collect();
        let elements: u64 = f.tensor.shape.iter().product();
        let dtype = if kind == "BF16" {
            String::new()
        } else {
            format!(" {}", f.tensor.dtype)
        };
        return Check::fail(
            ID,
            format!(
                "{}{dtype} holds {} non-finite value{} (NaN or infinite), the first {} at element {} of {} ({} in its shape {}); {} of the {} {kind} tensors hold one: {}",
                f.tensor.name,
                f.count,
                if f.count == 1 { "" } else { "s" },
                value(f.tensor.dtype, f.first.1),
                f.first.0,
                elements,
                coordinates(&f.tensor.shape, f.first.0),
                f.tensor.shape_text(),
                scan.found.len(),
                scan.tensors,
                super::list(&names, 4)
            ),
        )
        .with_evidence(evidence);
    }
    if scan.tensors == 0 {
        return Check::undecided(ID, format!("cannot decide: no tensor is labelled {kind}"))
            .with_evidence(evidence);
    }
    Check::pass(
        ID,
        format!(
            "every value of the {} {kind} tensors is finite ({} elements read)",
            scan.tensors, scan.elements
        ),
    )
    .with_evidence(evidence)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(values: &[u16]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn every_non_finite_bf16_is_found_and_nothing_else() {
        assert_eq!(
            chunk(
                Dtype::Bf16,
                &bytes(&[0x3f80, 0x7f7f, 0xff7f, 0x0001, 0x8000])
            ),
            None
        );
        for bad in [0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffff] {
            let found = chunk(Dtype::Bf16, &bytes(&[0x3f80, 0x1234, bad, 0x0000, bad]));
            assert_eq!(found, Some((2, 2, u32::from(bad))), "{bad:#06x}");
        }
    }

    /// F16's exponent sits lower than BF16's: 0x7bff is its largest finite value, 0x7c00 infinity
    /// (an F16 draft that overflowed in conversion).
    #[test]
    fn every_non_finite_f16_and_f32_is_found_and_nothing_else() {
        assert_eq!(
            chunk(Dtype::F16, &bytes(&[0x3c00, 0x7bff, 0xfbff, 0x0001])),
            None
        );
        for bad in [0x7c00u16, 0xfc00, 0x7e00, 0x7c01] {
            let found = chunk(Dtype::F16, &bytes(&[0x3c00, bad, 0x0000]));
            assert_eq!(found, Some((1, 1, u32::from(bad))), "{bad:#06x}");
        }
        assert_eq!(value(Dtype::F16, 0xfc00), "-inf");
        let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        assert_eq!(chunk(Dtype::F32, &f32s(&[1.0, f32::MAX, -f32::MAX])), None);
        let found = chunk(Dtype::F32, &f32s(&[1.0, 2.0, f32::INFINITY, f32::NAN]));
        assert_eq!(found, Some((2, 2, f32::INFINITY.to_bits())));
        assert_eq!(value(Dtype::F32, f32::NAN.to_bits()), "NaN");
    }

    #[test]
    fn coordinates_follow_the_declared_shape() {
        assert_eq!(coordinates(&[4, 6], 13), "[2, 1]");
        assert_eq!(coordinates(&[2, 3, 32], 32 * 3 + 33), "[1, 1, 1]");
        assert_eq!(coordinates(&[7], 5), "[5]");
    }
}
