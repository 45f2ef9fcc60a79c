//! `source.q4_1`: every real element of a q4_1 grid against its source value, tile by tile on every
//! core. Memory follows the workers (one decoded tile and one source row each), never a tensor.

use super::kernels::{self, wide, Stats, GROUP};
use super::values::Matrix;
use crate::dtype::Dtype;
use crate::parallel;
use crate::tile::dequant::{DecodedTile, COLUMN_GROUPS};
use crate::tile::{GridGeometry, TileGrid, TILE_BYTES, TILE_COLS, TILE_ROWS};

/// Tiles handed to a worker at a time: small enough to balance two cores over one large grid, large
/// enough that handing out costs nothing.
const TILES_PER_ITEM: u64 = 32;

/// One grid and the source matrix it was quantized from (already proven the same N x K).
pub struct Job<'a> {
    pub name: &'a str,
    pub grid: TileGrid<'a>,
    pub source: Matrix<'a>,
}

/// The first element out of bound, located every way a reader may look for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Offender {
    pub row: u64,
    pub col: u64,
    pub tile: u64,
    /// 32-column group inside the tile (0..8).
    pub group: usize,
    pub code: u8,
    pub source: f32,
    pub dequantized: f32,
    pub scale: f32,
    pub minimum: f32,
}

impl Offender {
    pub fn describe(&self) -> String {
        format!(
            "row {}, column {} (tile {}, group {}, code {}): source {}, dequantized {} (scale {}, minimum {})",
            self.row, self.col, self.tile, self.group, self.code, self.source, self.dequantized, self.scale, self.minimum
        )
    }
}

/// What one grid's comparison found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    pub stats: Stats,
    pub first: Option<Offender>,
    pub elements: u64,
    /// Groups whose header is broken (neither plain nor constant: `tiles.headers_sane` fails them),
    /// so not compared: what a code means there is undefined, and no verdict on the grid's content
    /// is drawn from the rest of it.
    pub broken_groups: u64,
}

impl Outcome {
    fn add(&mut self, other: Outcome) {
        self.stats.add(&other.stats);
        self.elements += other.elements;
        self.broken_groups += other.broken_groups;
        if self.first.is_none() {
            self.first = other.first;
        }
    }

    /// Root of the squared error over the squared source: about 0.08 for a faithful 4-bit grid. A
    /// sum that is NaN gives NaN (which fails the ceiling), never the other sum's root alone.
    pub fn relative_rms(&self) -> f64 {
        if self.stats.sq_src == 0.0 {
            self.stats.sq_err.sqrt()
        } else {
            (self.stats.sq_err / self.stats.sq_src).sqrt()
        }
    }
}

/// Compares every job, in order; `scalar` selects the plain loop (the bench's baseline). A worker
/// that panicked is an error, never a grid compared in part.
pub fn compare(jobs: &[Job<'_>], scalar: bool) -> Result<Vec<Outcome>, parallel::WorkerPanic> {
    let items = items(jobs.iter().map(|j| j.grid.geometry.tiles()));
    let parts = parallel::map(
        super::Q4_1,
        &items,
        Worker::default,
        |worker, &(j, from, to)| (j, worker.tiles(&jobs[j], from, to, scalar)),
    )?;
    let mut outcomes = vec![Outcome::default(); jobs.len()];
    for (j, part) in parts {
        outcomes[j].add(part);
    }
    Ok(outcomes)
}

/// The work items of grids of `tiles` tiles each: (grid, first tile, end), [`TILES_PER_ITEM`] tiles
/// at most.
pub(super) fn items(tiles: impl Iterator<Item = u64>) -> Vec<(usize, u64, u64)> {
    let mut items = Vec::new();
    for (j, tiles) in tiles.enumerate() {
        let mut t = 0;
        while t < tiles {
            items.push((j, t, (t + TILES_PER_ITEM).min(tiles)));
            t += TILES_PER_ITEM;
        }
    }
    items
}

/// Row and column where tile `t` starts: tiles are stored row-block-major (spec section 4.1).
#[inline(always)]
fn origin(g: GridGeometry, t: u64) -> (u64, u64) {
    (
        (t / g.col_blocks) * TILE_ROWS,
        (t % g.col_blocks) * TILE_COLS,
    )
}

/// Asks for the source rows tile `t` will read (32 rows of up to 512 bytes each, far apart in the
/// file: more streams than the hardware prefetcher follows).
#[inline(always)]
fn prefetch_source(job: &Job<'_>, t: u64) {
    let g = job.grid.geometry;
    let (row0, col0) = origin(g, t);
    let width = (g.k - col0).min(TILE_COLS) as usize;
    for row in row0..(row0 + TILE_ROWS).min(g.n) {
        if let Some(span) = job.source.span(row, col0, width) {
            prefetch(span);
        }
    }
}

/// Asks for every cache line `bytes` touches (its first byte's, every 64 bytes on, its last
/// byte's: a span need not start on a line) into the core's second-level cache. A hint: it reads
/// nothing and cannot fault.
#[inline(always)]
pub(in crate::source) fn prefetch(bytes: &[u8]) {
    for at in (0..bytes.len())
        .step_by(64)
        .chain(bytes.len().checked_sub(1))
    {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch hint never faults, and `at` is inside `bytes`.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T1 }>(
                bytes.as_ptr().add(at).cast::<i8>(),
            )
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = at;
    }
}

/// The 32 BF16 source rows of tile `t` when the whole-tile comparison applies to it: a BF16
/// source and a tile whose rows and columns are all real.
#[inline(always)]
fn wide_rows<'a>(job: &Job<'a>, t: u64) -> Option<wide::Rows<'a>> {
    let g = job.grid.geometry;
    if job.source.dtype != Dtype::Bf16 || t >= g.tiles() {
        return None;
    }
    let (row0, col0) = origin(g, t);
    if row0 + TILE_ROWS > g.n || col0 + TILE_COLS > g.k {
        return None;
    }
    let mut rows = [&wide::NO_ROW; TILE_ROWS as usize];
    for (r, row) in rows.iter_mut().enumerate() {
        *row = job
            .source
            .span(row0 + r as u64, col0, TILE_COLS as usize)?
            .try_into()
            .ok()?;
    }
    Some(rows)
}

/// Tiles ahead of use whose bytes and source rows are asked for: one tile ahead is too late to
/// hide the memory's latency behind a tile's arithmetic (the reference package: 73 ms one ahead,
/// 67 ms two, three no better).
const AHEAD: u64 = 2;

/// A worker's reusable state: one decoded tile and one row of source values.
struct Worker {
    tile: Box<DecodedTile>,
    wide: Box<wide::Scratch>,
    row: [f32; TILE_COLS as usize],
}

impl Default for Worker {
    fn default() -> Worker {
        Worker {
            tile: Box::default(),
            wide: Box::default(),
            row: [0.0; TILE_COLS as usize],
        }
    }
}

impl Worker {
    /// Tiles `from..to` of one job: each whole tile through `wide` where the processor has AVX2 and
    /// FMA, and every tile it does not vouch for through the exact loop, itself compiled for 8-wide
    /// vectors where AVX2 is there (without FMA, so its results are the baseline build's). The two
    /// paths agree exactly on every count and on the largest error; the squared sums behind the
    /// relative RMS differ only by the order of f32 additions.
    fn tiles(&mut self, job: &Job<'_>, from: u64, to: u64, scalar: bool) -> Outcome {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor was just found to support AVX2, the only feature enabled.
            return unsafe { self.tiles_avx2(job, from, to, scalar) };
        }
        self.tiles_baseline(job, from, to, scalar)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn tiles_avx2(&mut self, job: &Job<'_>, from: u64, to: u64, scalar: bool) -> Outcome {
        self.tiles_baseline(job, from, to, scalar)
    }

    #[inline(always)]
    fn tiles_baseline(&mut self, job: &Job<'_>, from: u64, to: u64, scalar: bool) -> Outcome {
        let g = job.grid.geometry;
        let mut outcome = Outcome::default();
        let mut lanes = kernels::Lanes::default();
        let wide = !scalar && wide::available();
        for t in from..to {
            let rows = if wide { wide_rows(job, t) } else { None };
            let next = if wide {
                wide_rows(job, t + AHEAD)
            } else {
                None
            };
            let at = (t * TILE_BYTES) as usize;
            let Some(bytes) = job.grid.bytes().get(at..at + TILE_BYTES as usize) else {
                continue;
            };
            let tile: Option<&[u8; TILE_BYTES as usize]> = bytes.try_into().ok();
            let ahead = ((t + AHEAD) * TILE_BYTES) as usize;
            if let Some(ahead) = job.grid.bytes().get(ahead..ahead + TILE_BYTES as usize) {
                prefetch(ahead);
            }
            if let (Some(rows), Some(tile)) = (&rows, tile) {
                if let Some(sums) = wide::tile(&mut self.wide, tile, rows, next.as_ref()) {
                    outcome.stats.add(&Stats {
                        out: 0,
                        max_steps: sums.max_steps,
                        sq_err: sums.sq_err,
                        sq_src: sums.sq_src,
                    });
                    outcome.elements += TILE_ROWS * TILE_COLS;
                    continue;
                }
            }
            if t + 1 < g.tiles() {
                prefetch_source(job, t + 1);
            }
            self.tile.decode(bytes);
            let (row0, col0) = origin(g, t);
            let rows = (g.n - row0).min(TILE_ROWS) as usize;
            let groups = ((g.k - col0).min(TILE_COLS) / GROUP as u64) as usize;
            for r in 0..rows {
                let row = row0 + r as u64;
                let real = &mut self.row[..groups * GROUP];
                let read = job.source.read_f32(row, col0, real);
                let columns = groups.min(COLUMN_GROUPS);
                if read && !scalar && self.row_is_plain(r, columns) {
                    self.plain_row(&mut lanes, &mut outcome, t, r, row, col0, columns);
                    continue;
                }
                for c in 0..columns {
                    let at = c * GROUP;
                    let codes: &[u8; GROUP] = self.tile.codes[r][at..at + GROUP]
                        .try_into()
                        .unwrap_or(&[0; GROUP]);
                    let source: &[f32; GROUP] = self.row[at..at + GROUP]
                        .try_into()
                        .unwrap_or(&[f32::NAN; GROUP]);
                    let (d, m) = (self.tile.scales[r][c], self.tile.minimums[r][c]);
                    let constant = d == 0.0 && m.is_finite();
                    if read && !kernels::plain_header(d, m) && !constant {
                        // A broken header (tiles.headers_sane names it): nothing in it is compared.
                        outcome.broken_groups += 1;
                        continue;
                    }
                    // Counting the lanes costs a reduction: only while no offender is named yet.
                    let looking = outcome.first.is_none();
                    let before = if looking { lanes.out() } else { 0 };
                    let mut stats = Stats::default();
                    if !read {
                        stats.out = GROUP as u64;
                    } else if constant {
                        stats = kernels::constant_group(source, m);
                    } else if scalar {
                        stats = kernels::group_scalar(codes, source, d, m);
                    } else {
                        kernels::group(&mut lanes, codes, source, d, m);
                    }
                    if looking && (stats.out > 0 || lanes.out() != before) {
                        outcome.first = Some(self.offender(t, r, c, row, col0, source, d, m));
                    }
                    outcome.stats.add(&stats);
                    outcome.elements += GROUP as u64;
                }
            }
            let mut sums = Stats::default();
            lanes.flush(&mut sums);
            // The lanes add squares in f32 (the loop's speed): a huge source value overflows them
            // and tiny ones underflow, so such a tile's sums are taken again in f64.
            if !scalar && !kernels::sums_trusted(sums.sq_err, sums.sq_src) {
                (sums.sq_err, sums.sq_src) = self.plain_sums_f64(job, t);
            }
            outcome.stats.add(&sums);
        }
        outcome
    }

    /// The squared sums, in f64, of the plain groups of tile `t` (those the lanes summed).
    fn plain_sums_f64(&mut self, job: &Job<'_>, t: u64) -> (f64, f64) {
        let g = job.grid.geometry;
        let (row0, col0) = origin(g, t);
        let rows = (g.n - row0).min(TILE_ROWS) as usize;
        let columns = (((g.k - col0).min(TILE_COLS) / GROUP as u64) as usize).min(COLUMN_GROUPS);
        let (mut sq_err, mut sq_src) = (0f64, 0f64);
        for r in 0..rows {
            let real = &mut self.row[..columns * GROUP];
            if !job.source.read_f32(row0 + r as u64, col0, real) {
                continue;
            }
            for c in 0..columns {
                let (d, m) = (self.tile.scales[r][c], self.tile.minimums[r][c]);
                if !kernels::plain_header(d, m) {
                    continue;
                }
                let at = c * GROUP;
                let (e, s) = kernels::group_sums_f64(
                    &self.tile.codes[r][at..at + GROUP],
                    &self.row[at..at + GROUP],
                    d,
                    m,
                );
                sq_err += e;
                sq_src += s;
            }
        }
        (sq_err, sq_src)
    }

    /// Whether every group of row `r` (up to `columns`) has a finite positive scale and a finite
    /// minimum: the common case, compared without per-group bookkeeping.
    #[inline(always)]
    fn row_is_plain(&self, r: usize, columns: usize) -> bool {
        let (scales, minimums) = (&self.tile.scales[r], &self.tile.minimums[r]);
        (0..columns).all(|c| kernels::plain_header(scales[c], minimums[c]))
    }

    /// Row `r` of the tile, every group vectorized into `lanes`; the lanes are counted once per row
    /// (not per group) to notice the first offender, which is then found group by group.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn plain_row(
        &self,
        lanes: &mut kernels::Lanes,
        outcome: &mut Outcome,
        t: u64,
        r: usize,
        row: u64,
        col0: u64,
        columns: usize,
    ) {
        let looking = outcome.first.is_none();
        let before = if looking { lanes.out() } else { 0 };
        let (codes, source) = (&self.tile.codes[r], &self.row);
        for c in 0..columns {
            let at = c * GROUP;
            let (Ok(q), Ok(s)) = (
                <&[u8; GROUP]>::try_from(&codes[at..at + GROUP]),
                <&[f32; GROUP]>::try_from(&source[at..at + GROUP]),
            ) else {
                continue;
            };
            kernels::group(
                lanes,
                q,
                s,
                self.tile.scales[r][c],
                self.tile.minimums[r][c],
            );
        }
        outcome.elements += (columns * GROUP) as u64;
        if looking && lanes.out() != before {
            let (scales, minimums) = (&self.tile.scales[r], &self.tile.minimums[r]);
            let bad = (0..columns).find(|&c| {
                (0..GROUP).any(|i| {
                    let at = c * GROUP + i;
                    !kernels::element_ok(codes[at], source[at], scales[c], minimums[c])
                })
            });
            if let Some(c) = bad {
                let at = c * GROUP;
                let s: &[f32; GROUP] = source[at..at + GROUP]
                    .try_into()
                    .unwrap_or(&[f32::NAN; GROUP]);
                outcome.first = Some(self.offender(t, r, c, row, col0, s, scales[c], minimums[c]));
            }
        }
    }

    /// The first element of group `c` in row `r` that is out of bound.
    #[allow(clippy::too_many_arguments)]
    fn offender(
        &self,
        tile: u64,
        r: usize,
        c: usize,
        row: u64,
        col0: u64,
        source: &[f32; GROUP],
        d: f32,
        m: f32,
    ) -> Offender {
        let codes = &self.tile.codes[r][c * GROUP..c * GROUP + GROUP];
        let i = (0..GROUP)
            .find(|&i| {
                let (q, s) = (codes[i], source[i]);
                if d == 0.0 {
                    !(s.is_finite() && kernels::round_to_bf16(s) == m)
                } else {
                    !kernels::element_ok(q, s, d, m)
                }
            })
            .unwrap_or(0);
        Offender {
            row,
            col: col0 + (c * GROUP + i) as u64,
            tile,
            group: c,
            code: codes[i],
            source: source[i],
            dequantized: f32::from(codes[i]) * d + m,
            scale: d,
            minimum: m,
        }
    }
}
