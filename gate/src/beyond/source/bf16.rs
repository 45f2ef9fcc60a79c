//! `source.bf16`: every BF16 package tensor bit for bit against its source (rounded to bf16 when the
//! source is F16 or F32), fc after undoing the row-blocked layout `[hidden/32, taps*hidden, 32]`.

use super::values::{bf16_at, Matrix};
use crate::dtype::Dtype;
use crate::parallel;

/// Source rows handed to a worker at a time.
const ROWS_PER_ITEM: u64 = 32;

/// How a BF16 package tensor lays out its source's rows and columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The source's order: element (row, col) at `row * cols + col`.
    Plain,
    /// fc's row-blocked form: element (row, col) at `((row / 32) * cols + col) * 32 + row % 32`.
    RowBlocked,
}

pub struct Job<'a> {
    pub name: &'a str,
    pub package: &'a [u8],
    pub layout: Layout,
    pub source: Matrix<'a>,
}

/// The first differing element of a tensor and how many differ.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    pub differing: u64,
    /// (row, col, package bits, source bits as bf16).
    pub first: Option<(u64, u64, u16, u16)>,
}

pub fn compare(jobs: &[Job<'_>]) -> Vec<Outcome> {
    let mut items = Vec::new();
    for (j, job) in jobs.iter().enumerate() {
        let mut r = 0;
        while r < job.source.rows {
            items.push((j, r, (r + ROWS_PER_ITEM).min(job.source.rows)));
            r += ROWS_PER_ITEM;
        }
    }
    let parts = parallel::map(
        &items,
        || (),
        |_, &(j, from, to)| (j, rows(&jobs[j], from, to)),
    );
    let mut outcomes = vec![Outcome::default(); jobs.len()];
    for (j, part) in parts {
        let o = &mut outcomes[j];
        o.differing += part.differing;
        if o.first.is_none() {
            o.first = part.first;
        }
    }
    outcomes
}

/// Rows `from..to` of one job (every row of a row block lies in one item: items are whole blocks).
fn rows(job: &Job<'_>, from: u64, to: u64) -> Outcome {
    let src = job.source;
    let cols = src.cols;
    let mut outcome = Outcome::default();
    let mut note = |row: u64, col: u64, p: u16, s: u16| {
        outcome.differing += 1;
        if outcome.first.is_none() {
            outcome.first = Some((row, col, p, s));
        }
    };
    let package_at = |row: u64, col: u64| -> Option<u16> {
        let i = match job.layout {
            Layout::Plain => row.checked_mul(cols)?.checked_add(col)?,
            Layout::RowBlocked => ((row / 32).checked_mul(cols)?.checked_add(col)?)
                .checked_mul(32)?
                .checked_add(row % 32)?,
        };
        let at = usize::try_from(i).ok()?.checked_mul(2)?;
        let b = job.package.get(at..at + 2)?;
        Some(u16::from_le_bytes([b[0], b[1]]))
    };
    for row in from..to {
        // The common case, a BF16 source row its package row equals, is decided without decoding an
        // element; only a row with a difference takes the element-by-element path below.
        if src.dtype == Dtype::Bf16 && same_bf16_row(job, row) {
            continue;
        }
        for col in 0..cols {
            let i = usize::try_from(row * cols + col).unwrap_or(usize::MAX);
            let s = bf16_at(src.dtype, src.bytes, i);
            let p = package_at(row, col);
            match (p, s) {
                (Some(p), Some(s)) if p == s => {}
                (p, s) => note(row, col, p.unwrap_or(0), s.unwrap_or(0)),
            }
        }
    }
    outcome
}

/// True when row `row` of a BF16 source equals the package's, read in the package's layout.
fn same_bf16_row(job: &Job<'_>, row: u64) -> bool {
    let cols = job.source.cols;
    let Ok(width) = usize::try_from(cols) else {
        return false;
    };
    let Some(source) = job.source.span(row, 0, width) else {
        return false;
    };
    match job.layout {
        Layout::Plain => usize::try_from(row * cols * 2)
            .ok()
            .and_then(|at| job.package.get(at..at.checked_add(width * 2)?))
            .is_some_and(|package| package == source),
        Layout::RowBlocked => {
            // Block `row / 32` holds, per column, the 32 rows of the block (64 bytes).
            let block = usize::try_from((row / 32) * cols * 64)
                .ok()
                .and_then(|at| job.package.get(at..at.checked_add(width * 64)?));
            let Some(block) = block else {
                return false;
            };
            let r = 2 * (row % 32) as usize;
            let (columns, _) = block.as_chunks::<64>();
            let (elements, _) = source.as_chunks::<2>();
            columns
                .iter()
                .zip(elements)
                .all(|(c, e)| c[r] == e[0] && c[r + 1] == e[1])
        }
    }
}

/// A bf16's value for a message.
pub fn value(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}
