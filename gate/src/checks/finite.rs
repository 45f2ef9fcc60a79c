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

/// The non-finite values of one BF16 tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NonFinite<'t> {
    pub tensor: &'t TensorInfo,
    pub count: u64,
    /// The first one's element index (in declared order) and its bits.
    pub first: (u64, u16),
}

/// What the pass read: how many BF16 tensors and elements, and every tensor holding a non-finite value
/// (in table order).
pub struct Scan<'t> {
    pub tensors: usize,
    pub elements: u64,
    pub found: Vec<NonFinite<'t>>,
}

/// Reads every BF16 tensor of `container`, on every core. Public for the bench, which times it alone.
/// A worker that panicked loses the whole pass (nothing is then vouched for).
pub fn scan<'t>(container: &'t Container<'_>) -> Result<Scan<'t>, WorkerPanic> {
    let tensors: Vec<&TensorInfo> = container
        .table
        .entries
        .iter()
        .filter(|e| e.dtype == Dtype::Bf16)
        .collect();
    let mut items = Vec::new();
    for (t, info) in tensors.iter().enumerate() {
        let len = container.data(info).len();
        let mut from = 0;
        while from < len {
            let to = from.saturating_add(CHUNK_BYTES).min(len);
            items.push((t, from, to));
            from = to;
        }
    }
    let parts = crate::parallel::map(
        ID,
        &items,
        || (),
        |_, &(t, from, to)| chunk(&container.data(tensors[t])[from..to]),
    )?;
    let mut found: Vec<NonFinite<'t>> = Vec::new();
    for (&(t, from, _), part) in items.iter().zip(parts) {
        let Some((count, at, bits)) = part else {
            continue;
        };
        let index = (from / 2) as u64 + at;
        match found.last_mut() {
            Some(last) if std::ptr::eq(last.tensor, tensors[t]) => last.count += count,
            _ => found.push(NonFinite {
                tensor: tensors[t],
                count,
                first: (index, bits),
            }),
        }
    }
    let elements = tensors
        .iter()
        .map(|t| container.data(t).len() as u64 / 2)
        .sum();
    Ok(Scan {
        tensors: tensors.len(),
        elements,
        found,
    })
}

/// How many elements of `bytes` are non-finite, the first one's index and bits; `None` for none.
fn chunk(bytes: &[u8]) -> Option<(u64, u64, u16)> {
    let (elements, _) = bytes.as_chunks::<2>();
    // Adding 0x80 to the exponent bits carries into the sign position exactly when they are all set:
    // one add, one and, one or per element, which the compiler vectorizes. Only a chunk that holds
    // one is read again, element by element.
    let flagged = elements.iter().fold(0u16, |acc, e| {
        acc | (u16::from_le_bytes(*e) & EXPONENT).wrapping_add(0x80)
    });
    if flagged & 0x8000 == 0 {
        return None;
    }
    let bits = |e: &[u8; 2]| u16::from_le_bytes(*e);
    let bad = |e: &&[u8; 2]| bits(e) & EXPONENT == EXPONENT;
    let at = elements.iter().position(|e| bad(&e))?;
    let count = elements.iter().filter(bad).count() as u64;
    Some((count, at as u64, bits(&elements[at])))
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

fn value(bits: u16) -> &'static str {
    match bits {
        0x7f80 => "inf",
        0xff80 => "-inf",
        _ => "NaN",
    }
}

pub fn run(container: &Container<'_>) -> Result<Check, WorkerPanic> {
    let scan = scan(container)?;
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
            value: value(f.first.1),
        }),
    };
    if let Some(f) = scan.found.first() {
        let names: Vec<&str> = scan.found.iter().map(|f| f.tensor.name.as_str()).collect();
        return Ok(Check::fail(
            ID,
            format!(
                "{} holds {} non-finite value{} (NaN or infinite), the first {} at element {} of {} ({} in its shape {}); {} of the {} BF16 tensors hold one: {}",
                f.tensor.name,
                f.count,
                if f.count == 1 { "" } else { "s" },
                value(f.first.1),
                f.first.0,
                container.data(f.tensor).len() / 2,
                coordinates(&f.tensor.shape, f.first.0),
                f.tensor.shape_text(),
                scan.found.len(),
                scan.tensors,
                super::list(&names, 4)
            ),
        )
        .with_evidence(evidence));
    }
    if scan.tensors == 0 {
        return Ok(
            Check::undecided(ID, "cannot decide: no tensor is labelled BF16")
                .with_evidence(evidence),
        );
    }
    Ok(Check::pass(
        ID,
        format!(
            "every value of the {} BF16 tensors is finite ({} elements read)",
            scan.tensors, scan.elements
        ),
    )
    .with_evidence(evidence))
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
            chunk(&bytes(&[0x3f80, 0x7f7f, 0xff7f, 0x0001, 0x8000])),
            None
        );
        for bad in [0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffff] {
            let found = chunk(&bytes(&[0x3f80, 0x1234, bad, 0x0000, bad]));
            assert_eq!(found, Some((2, 2, bad)), "{bad:#06x}");
        }
    }

    #[test]
    fn coordinates_follow_the_declared_shape() {
        assert_eq!(coordinates(&[4, 6], 13), "[2, 1]");
        assert_eq!(coordinates(&[2, 3, 32], 32 * 3 + 33), "[1, 1, 1]");
        assert_eq!(coordinates(&[7], 5), "[5]");
    }
}
