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
    /// Elements compared, counted row by row as each is decided, so that a PASS can be held to
    /// every element of the tensor.
    pub compared: u64,
    pub differing: u64,
    /// (row, col, package bits, source bits as bf16).
    pub first: Option<(u64, u64, u16, u16)>,
    /// Elements of the package proven finite as they were compared (whole row blocks found equal
    /// to a source holding no NaN or infinity), so `bf16.finite` need not read them again.
    pub finite: u64,
}

impl Outcome {
    /// Whether every element of `job`'s package bytes was proven finite: the proven blocks are
    /// disjoint and inside the bytes, so a count equal to the bytes' elements covers each of them.
    pub fn proves_finite(&self, job: &Job<'_>) -> bool {
        job.package.len().is_multiple_of(2) && self.finite == (job.package.len() / 2) as u64
    }
}

/// Every job's outcome, in order; a worker that panicked is an error, never a tensor left out.
pub fn compare(jobs: &[Job<'_>]) -> Result<Vec<Outcome>, parallel::WorkerPanic> {
    let mut items = Vec::new();
    for (j, job) in jobs.iter().enumerate() {
        let mut r = 0;
        while r < job.source.rows {
            items.push((j, r, (r + ROWS_PER_ITEM).min(job.source.rows)));
            r += ROWS_PER_ITEM;
        }
    }
    let parts = parallel::map(
        super::BF16,
        &items,
        || (),
        |_, &(j, from, to)| (j, rows(&jobs[j], from, to)),
    )?;
    let mut outcomes = vec![Outcome::default(); jobs.len()];
    for (j, part) in parts {
        let o = &mut outcomes[j];
        o.compared += part.compared;
        o.differing += part.differing;
        o.finite += part.finite;
        if o.first.is_none() {
            o.first = part.first;
        }
    }
    Ok(outcomes)
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
    if whole_block_equal(job, from, to) {
        outcome.compared = (to - from) * cols;
        outcome.finite = outcome.compared;
        return outcome;
    }
    for row in from..to {
        outcome.compared += cols;
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
                // A NaN is never equal, not even to the same bits: NaN copied from a checkpoint is
                // no proof the conversion was faithful, and no weight a loader can use.
                (Some(p), Some(s)) if p == s && !is_nan(s) => {}
                (p, s) => note(row, col, p.unwrap_or(0), s.unwrap_or(0)),
            }
        }
    }
    outcome
}

/// A bf16 NaN: all exponent bits set and a mantissa.
pub fn is_nan(bits: u16) -> bool {
    bits & 0x7fff > 0x7f80
}

/// Bit 15 set in the result when `bits` is a NaN: `(bits & 0x7fff) + 0x7f` reaches 0x8000 exactly
/// when `bits & 0x7fff` is above 0x7f80. Folded with `|` over a row, it vectorizes.
fn nan_flag(bits: u16) -> u16 {
    (bits & 0x7fff) + 0x7f
}

/// True when row `row` of a BF16 source equals the package's, read in the package's layout, and holds
/// no NaN (a NaN is never equal: the element path then names it).
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
            .is_some_and(|package| {
                let (p, _) = package.as_chunks::<2>();
                let (s, _) = source.as_chunks::<2>();
                let (differ, nan) = p.iter().zip(s).fold((0u16, 0u16), |(d, n), (p, s)| {
                    let s = u16::from_le_bytes(*s);
                    (d | (u16::from_le_bytes(*p) ^ s), n | nan_flag(s))
                });
                p.len() == s.len() && differ == 0 && nan & 0x8000 == 0
            }),
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
                .all(|(c, e)| c[r] == e[0] && c[r + 1] == e[1] && !is_nan(u16::from_le_bytes(*e)))
        }
    }
}

/// True when rows `from..to` are one whole 32-row block of a row-blocked tensor over a BF16 source
/// and every element equals its source and is finite: a block compared with 8 x 8 transposes in
/// registers rather than a 64-byte stride per element. Anything else (a difference, or a NaN or an
/// infinity, which the row path takes as equal when copied) is left to the row path, which finds
/// and names the first difference. A block proven here is proven finite too, for `bf16.finite`.
fn whole_block_equal(job: &Job<'_>, from: u64, to: u64) -> bool {
    let src = job.source;
    if job.layout != Layout::RowBlocked
        || src.dtype != Dtype::Bf16
        || !from.is_multiple_of(32)
        || to != from + 32
        || !src.cols.is_multiple_of(8)
    {
        return false;
    }
    let Ok(cols) = usize::try_from(src.cols) else {
        return false;
    };
    let block = usize::try_from((from / 32) * src.cols * 64)
        .ok()
        .and_then(|at| job.package.get(at..at.checked_add(cols.checked_mul(64)?)?));
    let Some(block) = block else {
        return false;
    };
    let mut rows: [&[u8]; 32] = [&[]; 32];
    for (r, row) in rows.iter_mut().enumerate() {
        match src.span(from + r as u64, 0, cols) {
            Some(span) => *row = span,
            None => return false,
        }
    }
    // SAFETY: SSE2 is part of every x86_64 processor (and the fallback elsewhere needs nothing).
    #[allow(unused_unsafe)]
    unsafe {
        block_equal(block, &rows, cols)
    }
}

/// Columns of a 32-row block read ahead at a time: 64 KiB of the package's block and 2 KiB of each
/// source row, inside a core's second-level cache with room to spare.
#[cfg(target_arch = "x86_64")]
const READ_AHEAD_COLUMNS: usize = 1024;

/// Reads a byte of every cache line of columns `c0..c0 + READ_AHEAD_COLUMNS` of the block and of
/// each source row, in order, returning their sum so that the reads are kept. The comparison reads
/// 32 rows 16 bytes at a time between transposes, so few of its misses overlap; a tight loop of
/// reads first lets them overlap and the prefetcher run, and the comparison then finds its bytes in
/// cache: the CLI on the reference took 0.90 times as long (see docs/performance.md). Reads only
/// what `.get` finds, so never out of bounds.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn read_ahead(block: &[u8], rows: &[&[u8]; 32], c0: usize) -> u64 {
    let lines = |sum: u64, bytes: Option<&[u8]>| {
        bytes.map_or(sum, |b| {
            b.iter()
                .step_by(64)
                .fold(sum, |s, &x| s.wrapping_add(u64::from(x)))
        })
    };
    let end = c0.saturating_add(READ_AHEAD_COLUMNS);
    let mut sum = 0;
    for row in rows {
        sum = lines(sum, row.get(2 * c0..end.saturating_mul(2).min(row.len())));
    }
    lines(
        sum,
        block.get(64 * c0..end.saturating_mul(64).min(block.len())),
    )
}

/// `block` holds, per column, 32 rows of bf16 (64 bytes); `rows` are the 32 source rows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn block_equal(block: &[u8], rows: &[&[u8]; 32], cols: usize) -> bool {
    use core::arch::x86_64::*;
    let load = |bytes: &[u8], at: usize| -> __m128i {
        let chunk: &[u8; 16] = bytes[at..at + 16].try_into().expect("16 bytes");
        // SAFETY: an unaligned 16-byte load of a 16-byte array (SSE2 is part of x86_64).
        unsafe { _mm_loadu_si128(chunk.as_ptr().cast()) }
    };
    let mut differ = _mm_setzero_si128();
    // Bit 15 of each lane set by a package value that is a NaN or an infinity: adding the exponent's
    // lowest bit to its exponent bits carries into bit 15 exactly when they are all set.
    let mut non_finite = _mm_setzero_si128();
    let (exponent, carry) = (_mm_set1_epi16(0x7f80), _mm_set1_epi16(0x80));
    for c0 in (0..cols).step_by(8) {
        if c0.is_multiple_of(READ_AHEAD_COLUMNS) {
            std::hint::black_box(read_ahead(block, rows, c0));
        }
        // The block's 8 lines of these columns' next read-ahead span are asked for now, so that
        // reading it ahead finds them coming and the transposes' arithmetic overlaps its misses:
        // `source.bf16` over fc took 7.2 ms instead of 7.9 on the reference (eight runs by turns).
        // A hint: it reads nothing and cannot fault.
        if let Some(ahead) = block.get(64 * (c0 + READ_AHEAD_COLUMNS)..) {
            for line in ahead.chunks(64).take(8) {
                _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast());
            }
        }
        // Each 64 bytes into the rows, the 32 rows' lines 2 KiB on are asked for: 32 streams are
        // more than the hardware prefetcher follows (the reference fc: 7.5 ms without, 6 with). A
        // hint: it reads nothing and cannot fault.
        if c0.is_multiple_of(32) {
            for row in rows {
                if let Some(line) = row.get(2 * c0 + 2048..) {
                    _mm_prefetch::<_MM_HINT_T1>(line.as_ptr().cast());
                }
            }
        }
        for r0 in (0..32).step_by(8) {
            // a[i]: column c0 + i, rows r0..r0 + 8; transposed to t[j]: row r0 + j, 8 columns.
            let a: [__m128i; 8] = core::array::from_fn(|i| load(block, (c0 + i) * 64 + 2 * r0));
            let b = [
                _mm_unpacklo_epi16(a[0], a[1]),
                _mm_unpackhi_epi16(a[0], a[1]),
                _mm_unpacklo_epi16(a[2], a[3]),
                _mm_unpackhi_epi16(a[2], a[3]),
                _mm_unpacklo_epi16(a[4], a[5]),
                _mm_unpackhi_epi16(a[4], a[5]),
                _mm_unpacklo_epi16(a[6], a[7]),
                _mm_unpackhi_epi16(a[6], a[7]),
            ];
            let c = [
                _mm_unpacklo_epi32(b[0], b[2]),
                _mm_unpackhi_epi32(b[0], b[2]),
                _mm_unpacklo_epi32(b[1], b[3]),
                _mm_unpackhi_epi32(b[1], b[3]),
                _mm_unpacklo_epi32(b[4], b[6]),
                _mm_unpackhi_epi32(b[4], b[6]),
                _mm_unpacklo_epi32(b[5], b[7]),
                _mm_unpackhi_epi32(b[5], b[7]),
            ];
            let t = [
                _mm_unpacklo_epi64(c[0], c[4]),
                _mm_unpackhi_epi64(c[0], c[4]),
                _mm_unpacklo_epi64(c[1], c[5]),
                _mm_unpackhi_epi64(c[1], c[5]),
                _mm_unpacklo_epi64(c[2], c[6]),
                _mm_unpackhi_epi64(c[2], c[6]),
                _mm_unpacklo_epi64(c[3], c[7]),
                _mm_unpackhi_epi64(c[3], c[7]),
            ];
            for (j, t) in t.iter().enumerate() {
                let s = load(rows[r0 + j], 2 * c0);
                differ = _mm_or_si128(differ, _mm_xor_si128(*t, s));
                non_finite = _mm_or_si128(
                    non_finite,
                    _mm_add_epi16(_mm_and_si128(*t, exponent), carry),
                );
            }
        }
    }
    // The odd bytes' sign bits are the lanes' bit 15.
    let finite = _mm_movemask_epi8(non_finite) & 0xaaaa == 0;
    finite && _mm_movemask_epi8(_mm_cmpeq_epi8(differ, _mm_setzero_si128())) == 0xffff
}

/// Elsewhere the row path compares every block.
#[cfg(not(target_arch = "x86_64"))]
fn block_equal(_block: &[u8], _rows: &[&[u8]; 32], _cols: usize) -> bool {
    false
}

/// A bf16's value for a message.
pub fn value(bits: u16) -> f32 {
    crate::dtype::bf16_to_f32(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reading ahead touches one byte of every line of the columns asked for, of each row and of
    /// the block, and of short rows only what they hold.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn reading_ahead_reads_its_columns_of_every_row_and_the_block_and_no_more() {
        let cols = 1500;
        let source = vec![1u8; 32 * cols * 2];
        let block = vec![1u8; cols * 64];
        let rows: [&[u8]; 32] = core::array::from_fn(|r| &source[r * cols * 2..(r + 1) * cols * 2]);
        // Columns 0..1024: 2,048 bytes (32 lines) of each row, 64 KiB (1,024 lines) of the block.
        assert_eq!(read_ahead(&block, &rows, 0), 32 * 32 + 1024);
        // Columns 1024..1500: 952 bytes (15 lines) of each row, 476 lines of the block.
        assert_eq!(read_ahead(&block, &rows, 1024), 32 * 15 + 476);
        assert_eq!(read_ahead(&block, &rows, cols), 0);
        let short: [&[u8]; 32] = core::array::from_fn(|r| &rows[r][..r * 10]);
        // From column 8 (byte 16) of rows of r * 10 bytes, and nothing of a 100-byte block (its
        // column 8 starts at byte 512).
        let owed: u64 = (0..32u64)
            .map(|r| (r * 10).saturating_sub(16).div_ceil(64))
            .sum();
        assert_eq!(read_ahead(&block[..100], &short, 8), owed);
    }

    /// A `rows x cols` BF16 source of distinct values and the same values row-blocked.
    fn pair(rows: usize, cols: usize) -> (Vec<u8>, Vec<u8>) {
        let value = |r: usize, c: usize| ((r * 131 + c * 7) % 65_000) as u16 ^ 0x3c00;
        let mut source = vec![0u8; rows * cols * 2];
        let mut blocked = vec![0u8; rows * cols * 2];
        for r in 0..rows {
            for c in 0..cols {
                let bits = value(r, c).to_le_bytes();
                let s = 2 * (r * cols + c);
                source[s..s + 2].copy_from_slice(&bits);
                let b = 2 * (((r / 32) * cols + c) * 32 + r % 32);
                blocked[b..b + 2].copy_from_slice(&bits);
            }
        }
        (source, blocked)
    }

    fn job<'a>(source: &'a [u8], blocked: &'a [u8], rows: u64, cols: u64) -> Job<'a> {
        Job {
            name: "fc",
            package: blocked,
            layout: Layout::RowBlocked,
            source: Matrix {
                name: "fc",
                dtype: Dtype::Bf16,
                rows,
                cols,
                bytes: source,
            },
        }
    }

    /// Rows that compared every one of their `elements` and found no difference (whatever they
    /// proved finite: the tests that ask say so).
    fn clean_of(outcome: Outcome, elements: u64) -> Result<(), Outcome> {
        let clean = Outcome {
            compared: elements,
            finite: outcome.finite,
            ..Outcome::default()
        };
        if outcome == clean {
            Ok(())
        } else {
            Err(outcome)
        }
    }

    #[test]
    fn whole_blocks_compare_by_transposes_and_a_difference_is_named_by_the_row_path() {
        let (source, mut blocked) = pair(64, 48);
        let clean = job(&source, &blocked, 64, 48);
        assert!(whole_block_equal(&clean, 0, 32));
        assert!(whole_block_equal(&clean, 32, 64));
        assert_eq!(clean_of(rows(&clean, 32, 64), 32 * 48), Ok(()));
        assert_eq!(
            rows(&clean, 32, 64).finite,
            32 * 48,
            "a proven block is finite"
        );
        // Row 37, column 13, changed in the package: that block alone is no longer equal, and the
        // row path names the element.
        let at = 2 * ((48 + 13) * 32 + 5);
        blocked[at] ^= 0x40;
        let broken = job(&source, &blocked, 64, 48);
        assert!(whole_block_equal(&broken, 0, 32));
        assert!(!whole_block_equal(&broken, 32, 64));
        let outcome = rows(&broken, 32, 64);
        assert_eq!(
            outcome.finite, 0,
            "a block the row path took proves nothing finite"
        );
        assert_eq!(outcome.differing, 1);
        assert_eq!(outcome.first.map(|(r, c, _, _)| (r, c)), Some((37, 13)));
    }

    #[test]
    fn a_nan_copied_from_the_source_is_never_equal() {
        // Row 37, column 13 NaN in both: the whole-block path, the row path (44 columns: no
        // transposes) and the plain layout each name it.
        for (cols, layout) in [
            (48, Layout::RowBlocked),
            (44, Layout::RowBlocked),
            (48, Layout::Plain),
        ] {
            let (mut source, mut blocked) = pair(64, cols);
            let (row, col) = (37, 13);
            let s = 2 * (row * cols + col);
            source[s..s + 2].copy_from_slice(&0x7fc1u16.to_le_bytes());
            let package = if layout == Layout::Plain {
                source.clone()
            } else {
                let b = 2 * (((row / 32) * cols + col) * 32 + row % 32);
                blocked[b..b + 2].copy_from_slice(&0x7fc1u16.to_le_bytes());
                blocked
            };
            let job = Job {
                layout,
                ..job(&source, &package, 64, cols as u64)
            };
            let outcome = rows(&job, 32, 64);
            assert_eq!(outcome.differing, 1, "{cols} columns, {layout:?}");
            assert_eq!(
                outcome.first,
                Some((37, 13, 0x7fc1, 0x7fc1)),
                "{cols} columns, {layout:?}"
            );
            assert_eq!(clean_of(rows(&job, 0, 32), 32 * cols as u64), Ok(()));
        }
        // An infinity copied is equal (bf16.finite refuses it in the package), in either layout,
        // and the row-blocked one proves none of its block finite (the transposes leave it to the
        // row path), so bf16.finite reads it again.
        let (mut source, mut blocked) = pair(32, 8);
        source[..2].copy_from_slice(&0xff80u16.to_le_bytes());
        blocked[..2].copy_from_slice(&0xff80u16.to_le_bytes());
        let plain = Job {
            layout: Layout::Plain,
            ..job(&source, &source, 32, 8)
        };
        assert_eq!(clean_of(rows(&plain, 0, 32), 32 * 8), Ok(()));
        let blocked_job = job(&source, &blocked, 32, 8);
        let outcome = rows(&blocked_job, 0, 32);
        assert_eq!(clean_of(outcome.clone(), 32 * 8), Ok(()));
        assert_eq!(outcome.finite, 0);
        assert!(!outcome.proves_finite(&blocked_job));
        // Without it, the transposes prove the whole block finite (elsewhere they are not built).
        let (source, blocked) = pair(32, 8);
        let whole = job(&source, &blocked, 32, 8);
        let proven = rows(&whole, 0, 32).proves_finite(&whole);
        assert_eq!(proven, cfg!(target_arch = "x86_64"));
    }

    #[test]
    fn a_block_the_transposes_cannot_take_goes_to_the_row_path() {
        // 44 columns is not a whole number of 8-column steps.
        let (source, blocked) = pair(32, 44);
        let clean = job(&source, &blocked, 32, 44);
        assert!(!whole_block_equal(&clean, 0, 32));
        assert_eq!(clean_of(rows(&clean, 0, 32), 32 * 44), Ok(()));
    }
}
