//! `source.q4_1` against a Q4_1 GGUF tensor: exact. FastFlowLM's converter copies each ggml block's
//! codes into the tile unchanged and widens its f16 `d` and `m` to bf16 (nearest-even), so a
//! faithful grid's every real group *is* its block: 32 codes equal, `d` and `m` the block's rounded.
//! Nothing is dequantized: each code byte of the tile and each byte of the GGUF is read once, on
//! every core, with no allocation per group.

use crate::dtype::f32_to_bf16;
use crate::parallel;
use crate::tile::{GridGeometry, TileGrid, TILE_BYTES, TILE_COLS, TILE_ROWS};

mod whole_tile;

use whole_tile::Avx2;

/// ggml's `block_q4_1`: f16 `d`, f16 `m`, 16 bytes of codes.
const BLOCK: usize = 20;
const GROUP: u64 = 32;

/// One grid and the Q4_1 GGUF tensor it was converted from (already proven the same N x K).
pub struct Job<'a> {
    pub name: &'a str,
    pub gguf_name: &'a str,
    pub grid: TileGrid<'a>,
    /// The GGUF tensor's blocks, row-major: `K / 32` per row.
    pub blocks: &'a [u8],
}

/// What differs in a group.
#[derive(Clone, Debug, PartialEq)]
pub enum What {
    /// The GGUF block's f16 scale or minimum is an infinity or a NaN: no faithful copy exists.
    NotFinite {
        block: u64,
        d: u16,
        m: u16,
    },
    Scale {
        package: u16,
        gguf: u16,
    },
    Minimum {
        package: u16,
        gguf: u16,
    },
    Code {
        col: u64,
        package: u8,
        gguf: u8,
    },
}

/// The first differing group, located every way a reader may look for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    pub tile: u64,
    /// 32-column group inside the tile (0..8).
    pub group: usize,
    pub row: u64,
    /// The group's first column.
    pub col: u64,
    pub what: What,
}

fn bf16(bits: u16) -> f32 {
    crate::dtype::bf16_to_f32(bits)
}

fn f16(bits: u16) -> f32 {
    half::f16::from_bits(bits).to_f32()
}

impl Difference {
    /// The difference as evidence; `per_row` is the GGUF tensor's blocks a row (`K / 32`).
    pub fn evidence(&self, per_row: u64) -> crate::evidence::ExactDifference {
        let (kind, package_value, gguf_value, block) = match self.what {
            What::NotFinite { block, .. } => ("not_finite", None, None, block),
            What::Scale { package, gguf } => ("scale", Some(package), Some(gguf), 0),
            What::Minimum { package, gguf } => ("minimum", Some(package), Some(gguf), 0),
            What::Code { package, gguf, .. } => {
                ("code", Some(u16::from(package)), Some(u16::from(gguf)), 0)
            }
        };
        let column = match self.what {
            What::Code { col, .. } => col,
            _ => self.col,
        };
        let gguf_block = match self.what {
            What::NotFinite { .. } => block,
            _ => self.row * per_row + self.col / GROUP,
        };
        crate::evidence::ExactDifference {
            tile: self.tile,
            group: self.group as u64,
            row: self.row,
            column,
            gguf_block,
            kind,
            package_value,
            gguf_value,
        }
    }

    pub fn describe(&self) -> String {
        let at = format!("tile {}, group {}, row {}", self.tile, self.group, self.row);
        match &self.what {
            What::NotFinite { block, d, m } => format!(
                "{at}, column {}: GGUF block {block} has a non-finite f16 scale or minimum (d {}, m {}), which no bf16 copy is faithful to",
                self.col,
                f16(*d),
                f16(*m)
            ),
            What::Scale { package, gguf } => format!(
                "{at}, column {}: scale {} (bf16 0x{package:04x}), GGUF's rounded to bf16 {} (0x{gguf:04x})",
                self.col,
                bf16(*package),
                bf16(*gguf)
            ),
            What::Minimum { package, gguf } => format!(
                "{at}, column {}: minimum {} (bf16 0x{package:04x}), GGUF's rounded to bf16 {} (0x{gguf:04x})",
                self.col,
                bf16(*package),
                bf16(*gguf)
            ),
            What::Code { col, package, gguf } => {
                format!("{at}, column {col}: code {package}, GGUF's {gguf}")
            }
        }
    }
}

/// What one grid's comparison found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Real groups compared (padding groups are `tiles.padding_zero`'s).
    pub groups: u64,
    pub differing: u64,
    pub first: Option<Difference>,
}

impl Outcome {
    fn add(&mut self, other: Outcome) {
        self.groups += other.groups;
        self.differing += other.differing;
        if self.first.is_none() {
            self.first = other.first;
        }
    }
}

/// Compares every job, in order. A worker that panicked is an error, never a grid compared in part.
pub fn compare(jobs: &[Job<'_>]) -> Result<Vec<Outcome>, parallel::WorkerPanic> {
    let items = crate::source::q4_1::items(jobs.iter().map(|j| j.grid.geometry.tiles()));
    let parts = parallel::map(
        crate::source::Q4_1,
        &items,
        || (),
        |_, &(j, from, to)| (j, tiles(&jobs[j], from, to)),
    )?;
    let mut outcomes = vec![Outcome::default(); jobs.len()];
    for (j, part) in parts {
        outcomes[j].add(part);
    }
    Ok(outcomes)
}

/// Tiles `from..to` of a job, built for AVX2 where the processor has it (the compiler widens the
/// group path's loops, and whole tiles go to the [`whole_tile`] kernel first), else for the
/// baseline.
fn tiles(job: &Job<'_>, from: u64, to: u64) -> Outcome {
    #[cfg(target_arch = "x86_64")]
    if let Some(wide) = Avx2::detect() {
        // SAFETY: the processor was just found to support AVX2, the only feature enabled.
        return unsafe { tiles_avx2(job, from, to, wide) };
    }
    tiles_baseline(job, from, to, None)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn tiles_avx2(job: &Job<'_>, from: u64, to: u64, wide: Avx2) -> Outcome {
    tiles_baseline(job, from, to, Some(wide))
}

/// Tiles in runs of at most [`RUN_TILES`] along one 32-row band, each run read through once in
/// order before it is compared (see [`read_ahead`]), the next run asked for while it is (see
/// [`Ahead`]).
#[inline(always)]
fn tiles_baseline(job: &Job<'_>, from: u64, to: u64, wide: Option<Avx2>) -> Outcome {
    let mut outcome = Outcome::default();
    let across = job.grid.geometry.col_blocks.max(1);
    let mut t = from;
    while t < to {
        let end = run_end(across, t, to);
        std::hint::black_box(read_ahead(job, t, end));
        let mut ahead = Ahead::of(Spans::of(job, end, run_end(across, end, to)));
        for t in t..end {
            tile(job, t, &mut outcome, wide, &mut ahead);
        }
        t = end;
    }
    outcome
}

/// Where the run from tile `t` ends: at most [`RUN_TILES`] on, inside its band and `..to`.
fn run_end(across: u64, t: u64, to: u64) -> u64 {
    to.min((t / across + 1) * across).min(t + RUN_TILES)
}

/// Tiles read ahead at a time: at most 240 KiB of tiles and blocks, well inside a core's
/// second-level cache, and a whole band of the reference's grids (10 and 20 tiles across).
const RUN_TILES: u64 = 24;

/// Reads a byte of every cache line of tiles `from..to` (one band's) and of their blocks, row by
/// row, returning their sum so that the reads are kept. The comparison reads a tile's 32 rows of
/// blocks 160 bytes at a time, 32 short streams that the hardware prefetcher follows late, and
/// between them it computes, so few of its misses overlap: measured, it took about twice as long
/// as reading the same bytes in order. Read in order first, each row's run of blocks is one stream
/// the prefetcher runs ahead of, and the comparison then finds its bytes in cache: the exact
/// comparison went from 53 to 64 ms to 42 to 48 ms (see docs/performance.md). Reads only what
/// `.get` finds inside the tiles and blocks, so a short file reads less and never out of bounds.
#[inline(always)]
fn read_ahead(job: &Job<'_>, from: u64, to: u64) -> u64 {
    let line = |sum: u64, bytes: &[u8]| {
        bytes
            .iter()
            .step_by(64)
            .fold(sum, |s, &b| s.wrapping_add(u64::from(b)))
    };
    let spans = Spans::of(job, from, to);
    spans.spans[..spans.count].iter().fold(0, |s, b| line(s, b))
}

/// The bytes tiles `from..to` (one band's) are compared with: each row's run of blocks, then the
/// tiles, each as much of it as the file holds.
struct Spans<'a> {
    spans: [&'a [u8]; TILE_ROWS as usize + 1],
    count: usize,
}

impl<'a> Spans<'a> {
    #[inline(always)]
    fn of(job: &Job<'a>, from: u64, to: u64) -> Spans<'a> {
        let mut out = Spans {
            spans: [&[]; TILE_ROWS as usize + 1],
            count: 0,
        };
        let g = job.grid.geometry;
        let per_row = g.k / GROUP;
        fn span(bytes: &[u8], a: u64, b: u64) -> Option<&[u8]> {
            let (a, b) = (usize::try_from(a).ok()?, usize::try_from(b).ok()?);
            bytes.get(a..b.min(bytes.len()))
        }
        let Some(last) = to.checked_sub(1) else {
            return out;
        };
        let across = g.col_blocks.max(1);
        let row0 = (from / across) * TILE_ROWS;
        let (first_block, end_block) = (
            (from % across) * (TILE_COLS / GROUP),
            ((last % across + 1) * (TILE_COLS / GROUP)).min(per_row),
        );
        for row in row0..(row0 + TILE_ROWS).min(g.n) {
            let at = |block: u64| {
                row.saturating_mul(per_row)
                    .saturating_add(block)
                    .saturating_mul(BLOCK as u64)
            };
            if let Some(blocks) = span(job.blocks, at(first_block), at(end_block)) {
                out.spans[out.count] = blocks;
                out.count += 1;
            }
        }
        if let Some(tiles) = span(
            job.grid.bytes(),
            from.saturating_mul(TILE_BYTES),
            to.saturating_mul(TILE_BYTES),
        ) {
            out.spans[out.count] = tiles;
            out.count += 1;
        }
        out
    }
}

/// The next run's lines, asked for a few at a time while this run is compared (by the whole-tile
/// kernel, between its steps), so that reading that run ahead finds them coming and the kernel's
/// arithmetic overlaps its misses. Asked for in one burst before each tile instead, the CLI took
/// 1.05 times as long (see docs/performance.md); spread this way, with fc's next span asked for
/// likewise in `source.bf16`, it took 0.90 times as long (21 rounds by turns).
pub(super) struct Ahead<'a> {
    spans: Spans<'a>,
    span: usize,
    at: usize,
}

impl<'a> Ahead<'a> {
    /// Nothing to ask for.
    #[cfg(test)]
    pub(super) fn none() -> Ahead<'a> {
        Ahead::of(Spans {
            spans: [&[]; TILE_ROWS as usize + 1],
            count: 0,
        })
    }

    #[inline(always)]
    fn of(spans: Spans<'a>) -> Ahead<'a> {
        Ahead {
            spans,
            span: 0,
            at: 0,
        }
    }

    /// The next line's first byte (each span's bytes 64 apart from its start), `None` once every
    /// span is done.
    #[inline(always)]
    fn next_line(&mut self) -> Option<&'a u8> {
        loop {
            let bytes: &'a [u8] = self.spans.spans[..self.spans.count].get(self.span)?;
            if let Some(b) = bytes.get(self.at) {
                self.at += 64;
                return Some(b);
            }
            self.span += 1;
            self.at = 0;
        }
    }

    /// Asks for the next [`AHEAD_LINES`] lines. The kernel calls it 80 times a tile: 160 lines, a
    /// tile's and its blocks', so the next run (of as many tiles) is asked for by this one's end,
    /// bar a line or so a row where a run's blocks do not fill their last line.
    #[inline(always)]
    pub(super) fn step(&mut self) {
        for _ in 0..AHEAD_LINES {
            let Some(b) = self.next_line() else {
                return;
            };
            #[cfg(target_arch = "x86_64")]
            // SAFETY: a prefetch hint never faults, and `b` is a byte of the job's bytes.
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                    (b as *const u8).cast::<i8>(),
                )
            };
            #[cfg(not(target_arch = "x86_64"))]
            let _ = b;
        }
    }
}

const AHEAD_LINES: usize = 2;

/// The bf16 a converter stores for an f16 `d` or `m`: widened, rounded to nearest-even.
pub fn widened(f16_bits: u16) -> u16 {
    f32_to_bf16(f16(f16_bits))
}

/// [`widened`] for every f16, made once (128 KiB): two lookups per group instead of two software
/// conversions, which cost more than the rest of the group's comparison.
fn widening() -> &'static [u16; 1 << 16] {
    static TABLE: std::sync::OnceLock<Box<[u16; 1 << 16]>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = Box::new([0u16; 1 << 16]);
        for (bits, out) in table.iter_mut().enumerate() {
            *out = widened(bits as u16);
        }
        table
    })
}

fn not_finite(f16_bits: u16) -> bool {
    f16_bits & 0x7c00 == 0x7c00
}

/// Code `j` (0..32) of a block: element `j` is `qs[j] & 0xF`, element `j + 16` is `qs[j] >> 4`.
#[inline(always)]
fn code(block: &[u8; BLOCK], j: usize) -> u8 {
    if j < 16 {
        block[4 + j] & 0x0f
    } else {
        block[4 + j - 16] >> 4
    }
}

/// One block, when the GGUF has it (always, for a pair whose shapes were proven equal).
#[inline(always)]
fn block<'a>(job: &Job<'a>, index: u64) -> Option<&'a [u8; BLOCK]> {
    let at = usize::try_from(index).ok()?.checked_mul(BLOCK)?;
    job.blocks.get(at..at.checked_add(BLOCK)?)?.try_into().ok()
}

/// [`widened`] computed instead of looked up, for an f16 that is zero or normal, with whether `h`
/// is one it does not cover (subnormal, infinite or NaN): branch-free, so the compiler compares a
/// row of groups at once. Exact for the values it covers: an f16's exponent always fits bf16's,
/// so widening is a rebias, and the rounding of its 10 mantissa bits to 7 is bf16's own
/// nearest-even step on the f32.
#[inline(always)]
fn widened_normal(h: u32) -> (u32, bool) {
    let sign = (h & 0x8000) << 16;
    let magnitude = h & 0x7fff;
    let f32_bits = sign | ((magnitude << 13) + (112 << 23));
    let rounded = (f32_bits + 0x7fff + ((f32_bits >> 16) & 1)) >> 16;
    let zero = magnitude == 0;
    let bf16 = if zero { sign >> 16 } else { rounded };
    let uncovered = (!zero && magnitude < 0x0400) | (magnitude >= 0x7c00);
    (bf16, uncovered)
}

/// Tile `t` of a job: which groups' codes differ (a bit per group, per row), then each group's
/// scale and minimum against its block's, every real group counted.
#[inline(always)]
fn tile(job: &Job<'_>, t: u64, outcome: &mut Outcome, wide: Option<Avx2>, ahead: &mut Ahead<'_>) {
    let g: GridGeometry = job.grid.geometry;
    let at = (t * TILE_BYTES) as usize;
    let Some(tile) = job
        .grid
        .bytes()
        .get(at..at + TILE_BYTES as usize)
        .and_then(|b| <&[u8; TILE_BYTES as usize]>::try_from(b).ok())
    else {
        return;
    };
    let table = widening();
    let (row0, col0) = (
        (t / g.col_blocks) * TILE_ROWS,
        (t % g.col_blocks) * TILE_COLS,
    );
    let rows = (g.n - row0).min(TILE_ROWS) as usize;
    let groups = ((g.k - col0).min(TILE_COLS) / GROUP) as usize;
    let per_row = g.k / GROUP;
    let index = |r: usize, c: usize| (row0 + r as u64) * per_row + col0 / GROUP + c as u64;
    if let Some(wide) = wide.filter(|_| rows == TILE_ROWS as usize && groups == 8) {
        let first = usize::try_from(index(0, 0))
            .ok()
            .and_then(|i| i.checked_mul(BLOCK));
        let stride = usize::try_from(per_row)
            .ok()
            .and_then(|p| p.checked_mul(BLOCK));
        if let (Some(first), Some(stride)) = (first, stride) {
            if wide.equal(tile, job.blocks, first, stride, ahead) {
                outcome.groups += (rows * groups) as u64;
                return;
            }
        }
    }
    let masks = match whole_rows(job, tile, rows, groups, index(0, 0), per_row) {
        // The common case, a faithful whole tile, is counted without a group's bookkeeping.
        Some((masks, true)) if masks == [0; TILE_ROWS as usize] => {
            outcome.groups += (rows * groups) as u64;
            return;
        }
        Some((masks, _)) => masks,
        None => partial_codes(job, tile, rows, groups, &index),
    };
    let header = |plane: usize, c: usize, r: usize| {
        let i = plane + 2 * (c * 32 + r);
        u16::from_le_bytes([tile[i], tile[i + 1]])
    };
    for (r, mask) in masks.iter().enumerate().take(rows) {
        for c in 0..groups {
            outcome.groups += 1;
            let (pd, pm) = (header(0, c, r), header(512, c, r));
            let what = match block(job, index(r, c)) {
                None => Some(What::NotFinite {
                    block: index(r, c),
                    d: 0x7e00,
                    m: 0x7e00,
                }),
                Some(blk) => {
                    let (d, m) = (
                        u16::from_le_bytes([blk[0], blk[1]]),
                        u16::from_le_bytes([blk[2], blk[3]]),
                    );
                    let (wd, wm) = (table[d as usize], table[m as usize]);
                    if not_finite(d) || not_finite(m) {
                        Some(What::NotFinite {
                            block: index(r, c),
                            d,
                            m,
                        })
                    } else if pd != wd {
                        Some(What::Scale {
                            package: pd,
                            gguf: wd,
                        })
                    } else if pm != wm {
                        Some(What::Minimum {
                            package: pm,
                            gguf: wm,
                        })
                    } else if mask & (1 << c) != 0 {
                        Some(first_code(tile, r, c, blk, col0))
                    } else {
                        None
                    }
                }
            };
            let Some(what) = what else { continue };
            outcome.differing += 1;
            if outcome.first.is_none() {
                outcome.first = Some(Difference {
                    tile: t,
                    group: c,
                    row: row0 + r as u64,
                    col: col0 + c as u64 * GROUP,
                    what,
                });
            }
        }
    }
}

/// Where the code byte of row `r` (its pair's), column `col` of a tile is.
fn code_byte(r: usize, col: usize) -> usize {
    1024 + (r / 16) * 2048 + col * 8 + (r % 16) / 2
}

/// The code-difference masks of a tile whose 32 rows and 8 groups are all real and whose blocks
/// are all in the file (`None` otherwise), and whether every scale and minimum equals its block's
/// widened and every block's is finite. Per row half and group, the 256 code bytes the 16 rows'
/// blocks make are compared with the tile's ([`region_differs`]).
#[inline(always)]
fn whole_rows(
    job: &Job<'_>,
    tile: &[u8; TILE_BYTES as usize],
    rows: usize,
    groups: usize,
    first: u64,
    per_row: u64,
) -> Option<([u8; TILE_ROWS as usize], bool)> {
    const ROW_BLOCKS: usize = 8 * BLOCK;
    if rows != TILE_ROWS as usize || groups != 8 {
        return None;
    }
    let mut blocks: [&[u8; ROW_BLOCKS]; TILE_ROWS as usize] =
        [&[0; ROW_BLOCKS]; TILE_ROWS as usize];
    for (r, row) in blocks.iter_mut().enumerate() {
        let at = usize::try_from(first + r as u64 * per_row)
            .ok()?
            .checked_mul(BLOCK)?;
        *row = job
            .blocks
            .get(at..at.checked_add(ROW_BLOCKS)?)?
            .try_into()
            .ok()?;
    }
    let mut masks = [0u8; TILE_ROWS as usize];
    for half in 0..2 {
        for c in 0..8 {
            let at = code_byte(16 * half, c * 32);
            let held: &[u8; 256] = tile[at..at + 256].try_into().ok()?;
            let mut pairs = [(&[0u8; 16], &[0u8; 16]); 8];
            for (rp, pair) in pairs.iter_mut().enumerate() {
                let r = 16 * half + 2 * rp;
                let qs = |r: usize| -> Option<&[u8; 16]> {
                    blocks[r][c * BLOCK + 4..c * BLOCK + BLOCK].try_into().ok()
                };
                *pair = (qs(r)?, qs(r + 1)?);
            }
            let differ = region_differs(&pairs, held);
            if differ == 0 {
                continue;
            }
            for (rp, byte) in differ.to_le_bytes().into_iter().enumerate() {
                let r = 16 * half + 2 * rp;
                masks[r] |= u8::from(byte & 0x0f != 0) << c;
                masks[r + 1] |= u8::from(byte >> 4 != 0) << c;
            }
        }
    }
    Some((masks, headers_equal(&blocks, tile)))
}

/// Whether every group's `d` and `m` in the tile are its block's widened, and every block's are
/// finite (`d` and `m` of group `c`, row `r` are element `c * 32 + r` of their planes).
#[inline(always)]
fn headers_equal(
    blocks: &[&[u8; 8 * BLOCK]; TILE_ROWS as usize],
    tile: &[u8; TILE_BYTES as usize],
) -> bool {
    // A block whose d or m is subnormal (or not finite) makes this answer no: the group-by-group
    // path, which looks every value up, then decides the tile.
    let mut differ = 0u32;
    for c in 0..8 {
        let mut dm = [0u32; TILE_ROWS as usize];
        for (v, row) in dm.iter_mut().zip(blocks) {
            let b = &row[c * BLOCK..c * BLOCK + 4];
            *v = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        let planes = |plane: usize| &tile[plane + 64 * c..plane + 64 * (c + 1)];
        let (pd, pm) = (planes(0), planes(512));
        for (r, &v) in dm.iter().enumerate() {
            let (wd, ud) = widened_normal(v & 0xffff);
            let (wm, um) = widened_normal(v >> 16);
            let held =
                |plane: &[u8]| u32::from(u16::from_le_bytes([plane[2 * r], plane[2 * r + 1]]));
            differ |= (held(pd) ^ wd) | (held(pm) ^ wm) | u32::from(ud | um);
        }
    }
    differ == 0
}

/// Byte `rp` of the result: the bits that differ, over one group's 32 columns, between the code
/// bytes of row pair `rp` the tile holds (`held[j * 8 + rp]`: column `j`, low nibble the pair's
/// first row) and those its two blocks `pairs[rp]` make.
fn region_differs(pairs: &[(&[u8; 16], &[u8; 16]); 8], held: &[u8; 256]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: SSE2 is part of every x86_64 processor.
        unsafe { region_differs_sse2(pairs, held) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    region_differs_scalar(pairs, held)
}

/// [`region_differs`] a byte at a time: the reference the vector path is tested against.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn region_differs_scalar(pairs: &[(&[u8; 16], &[u8; 16]); 8], held: &[u8; 256]) -> u64 {
    let mut expected = [0u8; 256];
    for (rp, (a, b)) in pairs.iter().enumerate() {
        for j in 0..16 {
            expected[j * 8 + rp] = (a[j] & 0x0f) | (b[j] << 4);
            expected[(j + 16) * 8 + rp] = (a[j] >> 4) | (b[j] & 0xf0);
        }
    }
    let mut differ = 0u64;
    for (e, h) in expected
        .as_chunks::<8>()
        .0
        .iter()
        .zip(held.as_chunks::<8>().0)
    {
        differ |= u64::from_le_bytes(*e) ^ u64::from_le_bytes(*h);
    }
    differ
}

/// [`region_differs`] with 16-byte vectors: each row pair's 32 expected code bytes made at once
/// from its two blocks, then the 8 x 16 byte matrices transposed into the tile's column-major
/// order by unpacks, and compared.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn region_differs_sse2(pairs: &[(&[u8; 16], &[u8; 16]); 8], held: &[u8; 256]) -> u64 {
    use core::arch::x86_64::*;
    let load = |bytes: &[u8; 16]| {
        // SAFETY: an unaligned 16-byte load of a 16-byte array (SSE2 is part of x86_64).
        unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
    };
    let (low, high) = (_mm_set1_epi8(0x0f), _mm_set1_epi8(0xf0u8 as i8));
    let mut lo = [_mm_setzero_si128(); 8];
    let mut hi = [_mm_setzero_si128(); 8];
    for (rp, (a, b)) in pairs.iter().enumerate() {
        let (a, b) = (load(a), load(b));
        // Columns 0..16: a's low nibbles, b's low nibbles above them; columns 16..32: the highs.
        lo[rp] = _mm_or_si128(
            _mm_and_si128(a, low),
            _mm_and_si128(_mm_slli_epi16(b, 4), high),
        );
        hi[rp] = _mm_or_si128(
            _mm_and_si128(_mm_srli_epi16(a, 4), low),
            _mm_and_si128(b, high),
        );
    }
    // Rows rp (8) by columns j (16) into 16 eight-byte columns: bytes, then pairs, then quads.
    let transpose = |m: &[__m128i; 8]| -> [__m128i; 8] {
        let b = [
            _mm_unpacklo_epi8(m[0], m[1]),
            _mm_unpackhi_epi8(m[0], m[1]),
            _mm_unpacklo_epi8(m[2], m[3]),
            _mm_unpackhi_epi8(m[2], m[3]),
            _mm_unpacklo_epi8(m[4], m[5]),
            _mm_unpackhi_epi8(m[4], m[5]),
            _mm_unpacklo_epi8(m[6], m[7]),
            _mm_unpackhi_epi8(m[6], m[7]),
        ];
        let w = [
            _mm_unpacklo_epi16(b[0], b[2]),
            _mm_unpackhi_epi16(b[0], b[2]),
            _mm_unpacklo_epi16(b[1], b[3]),
            _mm_unpackhi_epi16(b[1], b[3]),
            _mm_unpacklo_epi16(b[4], b[6]),
            _mm_unpackhi_epi16(b[4], b[6]),
            _mm_unpacklo_epi16(b[5], b[7]),
            _mm_unpackhi_epi16(b[5], b[7]),
        ];
        [
            _mm_unpacklo_epi32(w[0], w[4]),
            _mm_unpackhi_epi32(w[0], w[4]),
            _mm_unpacklo_epi32(w[1], w[5]),
            _mm_unpackhi_epi32(w[1], w[5]),
            _mm_unpacklo_epi32(w[2], w[6]),
            _mm_unpackhi_epi32(w[2], w[6]),
            _mm_unpacklo_epi32(w[3], w[7]),
            _mm_unpackhi_epi32(w[3], w[7]),
        ]
    };
    let mut differ = _mm_setzero_si128();
    for (half, m) in [transpose(&lo), transpose(&hi)].iter().enumerate() {
        for (i, v) in m.iter().enumerate() {
            let at = half * 128 + i * 16;
            let chunk: &[u8; 16] = held[at..at + 16].try_into().unwrap_or(&[0; 16]);
            differ = _mm_or_si128(differ, _mm_xor_si128(*v, load(chunk)));
        }
    }
    let mut lanes = [0u8; 16];
    // SAFETY: an unaligned 16-byte store into a 16-byte array.
    unsafe { _mm_storeu_si128(lanes.as_mut_ptr().cast(), differ) };
    let (first, second) = lanes.split_at(8);
    u64::from_le_bytes(first.try_into().unwrap_or_default())
        | u64::from_le_bytes(second.try_into().unwrap_or_default())
}

/// The code-difference masks of any tile, group by group (a tile with padding rows or groups, or
/// at the end of a GGUF that lacks a block; a missing block is named by the caller).
fn partial_codes(
    job: &Job<'_>,
    tile: &[u8; TILE_BYTES as usize],
    rows: usize,
    groups: usize,
    index: &impl Fn(usize, usize) -> u64,
) -> [u8; TILE_ROWS as usize] {
    let mut masks = [0u8; TILE_ROWS as usize];
    for (r, mask) in masks.iter_mut().enumerate().take(rows) {
        let shift = 4 * (r % 2);
        for c in 0..groups {
            let Some(blk) = block(job, index(r, c)) else {
                continue;
            };
            let differs =
                (0..32).any(|j| (tile[code_byte(r, c * 32 + j)] >> shift) & 0x0f != code(blk, j));
            *mask |= u8::from(differs) << c;
        }
    }
    masks
}

/// The first code of group `c` in row `r` that differs from its block's.
fn first_code(tile: &[u8], r: usize, c: usize, blk: &[u8; BLOCK], col0: u64) -> What {
    let nibble = |j: usize| (tile[code_byte(r, c * 32 + j)] >> (4 * (r % 2))) & 0x0f;
    let j = (0..32).find(|&j| nibble(j) != code(blk, j)).unwrap_or(0);
    What::Code {
        col: col0 + (c * 32 + j) as u64,
        package: nibble(j),
        gguf: code(blk, j),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random Q4_1 blocks of an N x K tensor (normal f16 scales and minimums) and the tiles a
    /// faithful converter makes of them.
    fn faithful(n: u64, k: u64, seed: u64) -> (Vec<u8>, Vec<u8>, GridGeometry) {
        let g = GridGeometry::new(n, k).expect("a grid");
        let per_row = (k / GROUP) as usize;
        let mut next = crate::testing::seeded(seed);
        let mut blocks = vec![0u8; n as usize * per_row * BLOCK];
        for b in blocks.chunks_mut(BLOCK) {
            let d = half::f16::from_f32(1e-3 + (next() % 4096) as f32 * 1e-5).to_bits();
            let m = half::f16::from_f32(-0.2 + (next() % 4096) as f32 * 1e-5).to_bits();
            b[0..2].copy_from_slice(&d.to_le_bytes());
            b[2..4].copy_from_slice(&m.to_le_bytes());
            b[4..].iter_mut().for_each(|q| *q = next() as u8);
        }
        let mut tiles = vec![0u8; g.bytes() as usize];
        for (t, tile) in tiles.chunks_mut(TILE_BYTES as usize).enumerate() {
            let t = t as u64;
            let (row0, col0) = (
                (t / g.col_blocks) * TILE_ROWS,
                (t % g.col_blocks) * TILE_COLS,
            );
            for r in 0..TILE_ROWS as usize {
                for c in 0..8 {
                    let at = ((row0 as usize + r) * per_row + col0 as usize / 32 + c) * BLOCK;
                    let blk: &[u8; BLOCK] = blocks[at..at + BLOCK].try_into().expect("a block");
                    let i = 2 * (c * 32 + r);
                    let (d, m) = (
                        widened(u16::from_le_bytes([blk[0], blk[1]])),
                        widened(u16::from_le_bytes([blk[2], blk[3]])),
                    );
                    tile[i..i + 2].copy_from_slice(&d.to_le_bytes());
                    tile[512 + i..512 + i + 2].copy_from_slice(&m.to_le_bytes());
                    for j in 0..32 {
                        tile[code_byte(r, c * 32 + j)] |= code(blk, j) << (4 * (r % 2));
                    }
                }
            }
        }
        (tiles, blocks, g)
    }

    /// Reading ahead touches one byte of every line of a run's row segments of blocks and of its
    /// tiles, for whole and partial bands and rows, and a file shorter than its grid claims is read
    /// only as far as it goes; asking for a run ahead asks for those same lines, each once.
    #[test]
    fn reading_ahead_reads_a_runs_blocks_and_tiles_and_stays_inside_them() {
        let (n, k) = (70u64, 800u64);
        let g = GridGeometry::new(n, k).expect("a grid");
        let per_row = k / GROUP;
        let blocks = vec![1u8; (n * per_row) as usize * BLOCK];
        let tiles = vec![1u8; g.bytes() as usize];
        let job = |tiles, blocks| Job {
            name: "m",
            gguf_name: "b",
            grid: TileGrid::unchecked(g, tiles),
            blocks,
        };
        let lines = |bytes: u64| bytes.div_ceil(64);
        for band in 0..g.row_blocks {
            let rows = (n - band * TILE_ROWS).min(TILE_ROWS);
            let from = band * g.col_blocks;
            // The whole band: each row's 25 blocks (500 bytes), then 4 tiles.
            assert_eq!(
                read_ahead(&job(&tiles, &blocks), from, from + g.col_blocks),
                rows * lines(per_row * BLOCK as u64) + lines(g.col_blocks * TILE_BYTES),
                "band {band}"
            );
            // Tiles 1 and 2 of it: blocks 8..24 of each row.
            assert_eq!(
                read_ahead(&job(&tiles, &blocks), from + 1, from + 3),
                rows * lines(16 * BLOCK as u64) + lines(2 * TILE_BYTES),
                "band {band}, tiles 1..3"
            );
        }
        assert_eq!(read_ahead(&job(&tiles, &blocks), 5, 5), 0);
        let (short_tiles, short_blocks) = (&tiles[..7000], &blocks[..1234]);
        for t in 0..g.tiles() {
            let sum = read_ahead(&job(short_tiles, short_blocks), t, t + 1);
            assert!(sum <= lines(7000) + lines(1234), "tile {t}: {sum}");
        }
        // Asking for a run ahead asks for the lines reading it ahead reads, each once, whole
        // grid or short file.
        for (tiles, blocks) in [(&tiles[..], &blocks[..]), (short_tiles, short_blocks)] {
            for (from, to) in [(0, 4), (1, 3), (4, 8), (9, 10), (5, 5)] {
                let job = job(tiles, blocks);
                let mut ahead = Ahead::of(Spans::of(&job, from, to));
                let mut asked = Vec::new();
                while let Some(b) = ahead.next_line() {
                    asked.push(b as *const u8 as usize);
                }
                let read = read_ahead(&job, from, to);
                assert_eq!(asked.len() as u64, read, "tiles {from}..{to}");
                asked.sort_unstable();
                asked.dedup();
                assert_eq!(asked.len() as u64, read, "tiles {from}..{to}: a line twice");
            }
        }
        let whole = tiles_baseline(&job(short_tiles, short_blocks), 0, g.tiles(), None);
        assert_eq!(whole.groups, 32 * 8, "only tile 0 is inside the short grid");
    }

    /// Whether the group path finds tile `t` equal: no code differs and every scale and minimum
    /// is its block's widened from an f16 the computed widening covers.
    fn group_path_equal(job: &Job<'_>, t: u64) -> bool {
        let g = job.grid.geometry;
        let per_row = g.k / GROUP;
        let first = (t / g.col_blocks) * TILE_ROWS * per_row + (t % g.col_blocks) * 8;
        let at = (t * TILE_BYTES) as usize;
        let tile = job.grid.bytes()[at..at + TILE_BYTES as usize]
            .try_into()
            .expect("a tile");
        whole_rows(job, tile, 32, 8, first, per_row) == Some(([0; 32], true))
    }

    /// The whole-tile kernel proves a tile equal exactly when the group path finds it equal: every
    /// faithful tile, then after each of many single-bit flips anywhere in a tile or its blocks
    /// (a flip of a scale's low bit can round to the same bf16, and then both say equal).
    #[test]
    fn the_whole_tile_kernel_proves_what_the_group_path_proves() {
        let Some(wide) = Avx2::detect() else {
            return;
        };
        let (k, n) = (512u64, 64u64);
        let (mut tiles, mut blocks, g) = faithful(n, k, 0x51ed_270b_27d4_f1a3);
        let per_row = (k / GROUP) as usize;
        let verdicts = |tiles: &[u8], blocks: &[u8], t: u64| {
            let job = Job {
                name: "m",
                gguf_name: "b",
                grid: TileGrid::unchecked(g, tiles),
                blocks,
            };
            let first = ((t / g.col_blocks) * TILE_ROWS * per_row as u64 + (t % g.col_blocks) * 8)
                as usize
                * BLOCK;
            let at = (t * TILE_BYTES) as usize;
            let tile = tiles[at..at + TILE_BYTES as usize]
                .try_into()
                .expect("a tile");
            // The next tiles asked for while it is compared, as in a run: asking never changes
            // an answer.
            let mut ahead = Ahead::of(Spans::of(&job, t + 1, (t + 3).min(g.tiles())));
            (
                wide.equal(tile, blocks, first, per_row * BLOCK, &mut ahead),
                group_path_equal(&job, t),
            )
        };
        for t in 0..g.tiles() {
            assert_eq!(
                verdicts(&tiles, &blocks, t),
                (true, true),
                "faithful tile {t}"
            );
        }
        let mut next = crate::testing::seeded(0x0123_4567_89ab_cdef);
        let (mut same, mut differ) = (0, 0);
        for round in 0..3000 {
            let in_tile = round % 2 == 0;
            let bytes = if in_tile { &mut tiles } else { &mut blocks };
            let at = (next() % bytes.len() as u64) as usize;
            let bit = 1u8 << (next() % 8);
            bytes[at] ^= bit;
            let t = if in_tile {
                at as u64 / TILE_BYTES
            } else {
                let row = (at / BLOCK / per_row) as u64;
                let block = (at / BLOCK % per_row) as u64;
                (row / TILE_ROWS) * g.col_blocks + block / 8
            };
            let (kernel, group) = verdicts(&tiles, &blocks, t);
            assert_eq!(
                kernel, group,
                "round {round}: bit {bit:#x} of byte {at}, tile {t}"
            );
            if group {
                same += 1;
            } else {
                differ += 1;
            }
            let bytes = if in_tile { &mut tiles } else { &mut blocks };
            bytes[at] ^= bit;
        }
        assert!(
            same > 0 && differ > 2000,
            "{same} flips kept equal, {differ} made a difference"
        );
    }

    /// A block the computed widening does not cover is never proven by the kernel, even where the
    /// tile holds what the widening's arithmetic gives for it: a subnormal rebiased as if normal (a
    /// converter's mistake), a zero, an infinity.
    #[test]
    fn the_whole_tile_kernel_leaves_zeros_subnormals_and_infinities_to_the_group_path() {
        let Some(wide) = Avx2::detect() else {
            return;
        };
        let (k, n) = (256u64, 32u64);
        for (f16_bits, held) in [
            (0x0001u16, 0x3800u16),
            (0x0000, 0x3800),
            (0x7c00, 0x4780),
            (0x8000, 0xb800),
        ] {
            let (mut tiles, mut blocks, g) = faithful(n, k, 7);
            // Row 1, group 1: block 9, and element 33 of the scale plane.
            blocks[9 * BLOCK..9 * BLOCK + 2].copy_from_slice(&f16_bits.to_le_bytes());
            tiles[66..68].copy_from_slice(&held.to_le_bytes());
            let tile = tiles[..TILE_BYTES as usize].try_into().expect("a tile");
            assert!(
                !wide.equal(tile, &blocks, 0, 8 * BLOCK, &mut Ahead::none()),
                "f16 {f16_bits:#06x}"
            );
            let job = Job {
                name: "m",
                gguf_name: "b",
                grid: TileGrid::unchecked(g, &tiles),
                blocks: &blocks,
            };
            let mut outcome = Outcome::default();
            super::tile(&job, 0, &mut outcome, Some(wide), &mut Ahead::none());
            assert_eq!(outcome.differing, 1, "f16 {f16_bits:#06x}");
        }
    }

    /// Rows past the end of the blocks are never read: the kernel answers "not proven".
    #[test]
    fn the_whole_tile_kernel_refuses_rows_outside_the_blocks() {
        let Some(wide) = Avx2::detect() else {
            return;
        };
        let (tiles, blocks, _) = faithful(32, 256, 11);
        let tile = tiles[..TILE_BYTES as usize].try_into().expect("a tile");
        assert!(wide.equal(tile, &blocks, 0, 8 * BLOCK, &mut Ahead::none()));
        assert!(!wide.equal(
            tile,
            &blocks[..blocks.len() - 1],
            0,
            8 * BLOCK,
            &mut Ahead::none()
        ));
        assert!(!wide.equal(tile, &blocks, 1, 8 * BLOCK, &mut Ahead::none()));
        assert!(!wide.equal(tile, &blocks, 0, usize::MAX / 16, &mut Ahead::none()));
    }

    /// The vector path against the byte-at-a-time one, on random blocks and code bytes, with
    /// the tile's bytes made to agree and then one nibble at a time made to differ.
    #[test]
    fn the_vector_region_comparison_is_the_scalar_one() {
        let mut random = crate::testing::seeded(0x9e37_79b9_7f4a_7c15);
        let mut next = move || random() as u8;
        for round in 0..200 {
            let blocks: Vec<([u8; 16], [u8; 16])> = (0..8)
                .map(|_| {
                    (
                        core::array::from_fn(|_| next()),
                        core::array::from_fn(|_| next()),
                    )
                })
                .collect();
            let pairs: [(&[u8; 16], &[u8; 16]); 8] =
                core::array::from_fn(|i| (&blocks[i].0, &blocks[i].1));
            let mut held = [0u8; 256];
            for (rp, (a, b)) in pairs.iter().enumerate() {
                for j in 0..16 {
                    held[j * 8 + rp] = (a[j] & 0x0f) | (b[j] << 4);
                    held[(j + 16) * 8 + rp] = (a[j] >> 4) | (b[j] & 0xf0);
                }
            }
            assert_eq!(region_differs(&pairs, &held), 0);
            let at = usize::from(next());
            let bit = 1u8 << (round % 8);
            held[at] ^= bit;
            let want = region_differs_scalar(&pairs, &held);
            assert_eq!(want, u64::from(bit) << (8 * (at % 8)));
            assert_eq!(region_differs(&pairs, &held), want, "byte {at}, bit {bit}");
        }
    }

    /// The computed widening is the table's for every f16 it covers, and says which it does not.
    #[test]
    fn the_computed_widening_is_the_table_for_zeros_and_normals() {
        let table = widening();
        let mut covered = 0;
        for bits in 0..=u16::MAX {
            let (w, uncovered) = widened_normal(u32::from(bits));
            let magnitude = bits & 0x7fff;
            let expected = (magnitude != 0 && magnitude < 0x0400) || not_finite(bits);
            assert_eq!(uncovered, expected, "{bits:#06x}");
            if !uncovered {
                assert_eq!(w, u32::from(table[usize::from(bits)]), "{bits:#06x}");
                covered += 1;
            }
        }
        assert_eq!(covered, 65536 - 2 * 1023 - 2 * 1024);
    }

    #[test]
    fn the_table_is_the_widening() {
        let table = widening();
        for bits in (0..=u16::MAX)
            .step_by(7)
            .chain([0x7c00, 0xfc00, 0x7e00, 0x3c01])
        {
            assert_eq!(table[bits as usize], widened(bits), "{bits:#06x}");
        }
    }

    #[test]
    fn the_widening_rounds_to_nearest_even_and_keeps_signs_and_zero() {
        // f16 1 + 2^-8 + 2^-10 lies above the halfway point between two bf16 values: up, not truncated.
        let f = half::f16::from_f32(1.0 + 1.0 / 256.0 + 1.0 / 1024.0).to_bits();
        assert_eq!(widened(f), 0x3f81);
        // Exactly halfway (1 + 2^-8): to even, down.
        assert_eq!(
            widened(half::f16::from_f32(1.0 + 1.0 / 256.0).to_bits()),
            0x3f80
        );
        assert_eq!(widened(0x0000), 0x0000);
        assert_eq!(widened(0x8000), 0x8000);
        assert!(not_finite(0x7c00) && not_finite(0xfe00) && !not_finite(0x7bff));
    }
}
