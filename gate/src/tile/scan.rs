//! The header scan: every group's scale and minimum read once, the sanity of each, and the exact
//! median of minimum/scale that is the q4_1 signature.

use super::bits::{from_order_key, is_finite, is_positive_finite, order_key, u16_at};
use super::sink::{Sink, Wide};
use super::{
    TileGrid, CODES, CODES_PER_HALF, GROUP, GROUPS_PER_TILE, MINIMUMS, SCALES, TILE_BYTES,
    TILE_COLS, TILE_ROWS,
};
use crate::dtype::bf16_to_f32;

impl TileGrid<'_> {
    /// Reads every tile header once: sanity of every group, padding, the scale range, and the exact
    /// median of minimum/scale over ordinary groups (positive finite scale, finite minimum).
    ///
    /// The median never needs every key stored: a sample of tiles brackets it first, the pass then
    /// counts keys below the bracket and keeps only those inside (about a sixteenth), and selection
    /// finishes there. If the sample misled (the bracket misses the middle), a second pass keeps every
    /// key: slower, never wrong.
    ///
    /// A large grid whose sampled tiles all have zero scale and minimum planes holds no weights: it is
    /// refused from those planes alone, its codes and the rest of its tiles unread (a sparse file of
    /// tens of gigabytes of zeros costs 32 tile headers, not a read of the whole).
    pub fn scan(&self, buffers: &mut ScanBuffers) -> GridScan {
        if let Some(refused) = self.sampled_planes_zero() {
            return refused;
        }
        let ScanBuffers { keys, sample } = buffers;
        let bracket = self.sample_bracket(sample);
        let first = self.pass(bracket, keys);
        if let Some(median) = median_inside(keys, first.below, first.ordinary) {
            return GridScan {
                ratio_median: Some(median),
                ..first.scan
            };
        }
        let all = self.pass((0, u32::MAX), keys);
        GridScan {
            ratio_median: median_inside(keys, 0, all.ordinary),
            ..all.scan
        }
    }

    /// The tiles `sample_bracket` reads: up to `SAMPLE_TILES` evenly spaced, none for a grid too small
    /// to be worth sampling.
    fn sampled_tiles(&self) -> impl Iterator<Item = u64> {
        let tiles = self.geometry.tiles();
        let count = if tiles < 4 * SAMPLE_TILES {
            0
        } else {
            SAMPLE_TILES
        };
        (0..count).map(move |i| i * tiles / SAMPLE_TILES)
    }

    /// `Some` (the refusal) when every sampled tile's scale and minimum planes are zero.
    fn sampled_planes_zero(&self) -> Option<GridScan> {
        let mut sampled = 0u64;
        for t in self.sampled_tiles() {
            let at = (t * TILE_BYTES) as usize;
            let planes = self.bytes.get(at..at + CODES)?;
            if planes.iter().any(|&b| b != 0) {
                return None;
            }
            sampled += 1;
        }
        if sampled == 0 {
            return None;
        }
        let groups = sampled * GROUPS_PER_TILE as u64;
        Some(GridScan {
            real_groups: groups,
            bad_groups: groups,
            first_bad: Some(BadGroup::new(0, 0, 0, 0.0, 0.0, Defect::ZeroPlanes)),
            zero_planes: Some((sampled, self.geometry.tiles())),
            ..GridScan::default()
        })
    }

    /// Brackets the median key from the ordinary groups of up to `SAMPLE_TILES` evenly spaced whole
    /// tiles; the full key range for a grid too small to be worth sampling.
    fn sample_bracket(&self, sample: &mut Vec<u32>) -> (u32, u32) {
        let g = self.geometry;
        sample.clear();
        for t in self.sampled_tiles() {
            let row0 = (t / g.col_blocks) * TILE_ROWS;
            let col0 = (t % g.col_blocks) * TILE_COLS;
            if row0 + TILE_ROWS > g.n || col0 + TILE_COLS > g.k {
                continue;
            }
            let at = (t * TILE_BYTES) as usize;
            let Some(tile) = self.bytes.get(at..at + CODES) else {
                continue;
            };
            for i in 0..GROUPS_PER_TILE {
                let (d, m) = (
                    u16_at(&tile[SCALES..MINIMUMS], i),
                    u16_at(&tile[MINIMUMS..CODES], i),
                );
                if is_positive_finite(d) && is_finite(m) {
                    sample.push(order_key(bf16_to_f32(m) / bf16_to_f32(d)));
                }
            }
        }
        if sample.len() < GROUPS_PER_TILE {
            return (0, u32::MAX);
        }
        // Two selections instead of a sort: only the bracket's ends are needed. The bracket is the
        // sample's middle sixteenth: at 8,192 sampled keys the median's rank in the sample varies by
        // about half a percent, a sixth of the three percent on either side, and a miss costs a
        // second pass, never a wrong median. A middle eighth kept twice the keys, and their
        // selection was a tenth of the form checks' time.
        let mid = sample.len() / 2;
        let margin = sample.len() / 32;
        let (lo_at, hi_at) = (mid - margin, (mid + margin).min(sample.len() - 1));
        let (_, &mut lo, above) = sample.select_nth_unstable(lo_at);
        let (_, &mut hi, _) = above.select_nth_unstable(hi_at - lo_at - 1);
        (lo, hi)
    }

    /// One pass over every tile header, keeping the ordinary keys inside `bracket` in `keys`.
    fn pass(&self, bracket: (u32, u32), keys: &mut Vec<u32>) -> Pass {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor was just found to support AVX2, the only feature enabled.
            return unsafe { self.pass_avx2(bracket, keys) };
        }
        self.pass_baseline(bracket, keys, None)
    }

    /// The same pass compiled for 8-wide vectors: the per-group arithmetic (a division among it)
    /// is most of the scan's work, and the baseline build has 4-wide vectors only.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn pass_avx2(&self, bracket: (u32, u32), keys: &mut Vec<u32>) -> Pass {
        // SAFETY: this function runs only where the processor has AVX2.
        self.pass_baseline(bracket, keys, unsafe { Wide::asserted() })
    }

    #[inline(always)]
    fn pass_baseline(&self, bracket: (u32, u32), keys: &mut Vec<u32>, wide: Option<Wide>) -> Pass {
        let g = self.geometry;
        keys.clear();
        let mut acc = Accumulator {
            scan: GridScan::default(),
            minimum_bits: 0,
            plane_bits: 0,
            scale_bits: (u16::MAX, 0),
            sink: Sink {
                lo: bracket.0,
                width: bracket.1.wrapping_sub(bracket.0),
                below: 0,
                ordinary: 0,
                keys,
            },
        };
        let mut tile_keys = [0u32; GROUPS_PER_TILE];
        for (t, tile) in self.bytes.chunks_exact(TILE_BYTES as usize).enumerate() {
            prefetch_header(self.bytes, t + 2);
            let t = t as u64;
            let row0 = (t / g.col_blocks) * TILE_ROWS;
            let col0 = (t % g.col_blocks) * TILE_COLS;
            let scales = &tile[SCALES..MINIMUMS];
            let minimums = &tile[MINIMUMS..CODES];
            let whole = row0 + TILE_ROWS <= g.n && col0 + TILE_COLS <= g.k;
            if !whole {
                for i in 0..GROUPS_PER_TILE {
                    let (c, r) = (i / 32, i % 32);
                    let real = row0 + (r as u64) < g.n && col0 + (c as u64) * GROUP < g.k;
                    acc.careful(tile, t, c, r, u16_at(scales, i), u16_at(minimums, i), real);
                }
                continue;
            }
            // Every group's key is computed without a branch, so the loop vectorizes; the tile is taken
            // whole when every group was ordinary, which for a sane grid is every tile. Otherwise each
            // group goes the careful way.
            let (mut extraordinary, mut lo, mut hi, mut min_bits) = (0u16, u16::MAX, 0u16, 0u16);
            let (scale_pairs, _) = scales.as_chunks::<2>();
            let (minimum_pairs, _) = minimums.as_chunks::<2>();
            for ((&s, &m), key) in scale_pairs
                .iter()
                .zip(minimum_pairs)
                .zip(tile_keys.iter_mut())
            {
                let d = u16::from_le_bytes(s);
                let m = u16::from_le_bytes(m);
                *key = order_key(bf16_to_f32(m) / bf16_to_f32(d));
                extraordinary |= u16::from(!(is_positive_finite(d) & is_finite(m)));
                lo = lo.min(d);
                hi = hi.max(d);
                min_bits |= m & 0x7fff;
            }
            if extraordinary == 0 {
                acc.plane_bits |= hi;
                acc.scale_bits = (acc.scale_bits.0.min(lo), acc.scale_bits.1.max(hi));
                acc.minimum_bits |= min_bits;
                acc.scan.real_groups += GROUPS_PER_TILE as u64;
                acc.sink.offer_tile(&tile_keys, wide);
                continue;
            }
            for i in 0..GROUPS_PER_TILE {
                acc.careful(
                    tile,
                    t,
                    i / 32,
                    i % 32,
                    u16_at(scales, i),
                    u16_at(minimums, i),
                    true,
                );
            }
        }
        let Accumulator {
            mut scan,
            minimum_bits,
            plane_bits,
            scale_bits,
            sink,
        } = acc;
        scan.zero_minimum_plane = scan.real_groups > 0 && minimum_bits == 0;
        if scan.real_groups > 0 && plane_bits == 0 {
            scan.zero_planes = Some((g.tiles(), g.tiles()));
        }
        if scale_bits.0 <= scale_bits.1 {
            scan.scale_range = Some((bf16_to_f32(scale_bits.0), bf16_to_f32(scale_bits.1)));
        }
        Pass {
            scan,
            below: sink.below,
            ordinary: sink.ordinary,
        }
    }
}

/// Tiles sampled to bracket a grid's median before its pass.
const SAMPLE_TILES: u64 = 32;

/// What one pass found, before the median.
struct Pass {
    scan: GridScan,
    /// Ordinary keys below the bracket.
    below: u64,
    /// Ordinary keys in all.
    ordinary: u64,
}

/// The exact median of `ordinary` keys, of which `below` lie under `inside` (the rest above it); `None`
/// when the middle ranks are not inside. The mean of the two middle values for an even count.
pub(super) fn median_inside(inside: &mut [u32], below: u64, ordinary: u64) -> Option<f32> {
    if ordinary == 0 {
        return None;
    }
    let upper = ordinary / 2;
    let lower = if ordinary.is_multiple_of(2) {
        upper - 1
    } else {
        upper
    };
    if lower < below || upper >= below + inside.len() as u64 {
        return None;
    }
    let (left, middle, _) = inside.select_nth_unstable((upper - below) as usize);
    let upper_value = from_order_key(*middle);
    if lower == upper {
        return Some(upper_value);
    }
    // `lower >= below` puts the lower middle inside too: the largest key left of the upper one.
    let lower_value = left
        .iter()
        .copied()
        .max()
        .map_or(upper_value, from_order_key);
    Some((lower_value + upper_value) / 2.0)
}

/// Asks for a coming tile's 1,024 header bytes ahead of use. Tiles are 5,120 bytes apart, so each
/// header starts on a page the hardware prefetcher has not seen; the hint takes the scan from about 3x
/// to about 1.3x the floor (`cargo xtask bench`). It reads nothing and cannot fault.
#[inline(always)]
fn prefetch_header(bytes: &[u8], tile: usize) {
    let at = tile * TILE_BYTES as usize;
    if let Some(header) = bytes.get(at..at + CODES) {
        for line in header.chunks_exact(64) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: a prefetch hint never faults and `line` is in bounds.
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                    line.as_ptr() as *const i8,
                )
            };
        }
    }
}
/// The running state of one grid's pass.
struct Accumulator<'k> {
    scan: GridScan,
    sink: Sink<'k>,
    /// OR of every real group's minimum bits without the sign: zero only for an all-zero minimum plane.
    minimum_bits: u16,
    /// OR of every real group's scale and minimum bits without the sign: zero only when both planes
    /// are zero.
    plane_bits: u16,
    /// Smallest and largest positive finite scale, as bits (their integer order is their float order).
    scale_bits: (u16, u16),
}

impl Accumulator<'_> {
    /// Every group the fast path did not keep: padding, a constant group, a broken header, or any group
    /// of a tile that holds padding.
    #[allow(clippy::too_many_arguments)]
    fn careful(
        &mut self,
        tile: &[u8],
        t: u64,
        c: usize,
        r: usize,
        d_bits: u16,
        m_bits: u16,
        real: bool,
    ) {
        let (d, m) = (bf16_to_f32(d_bits), bf16_to_f32(m_bits));
        let scan = &mut self.scan;
        if !real {
            scan.padding_groups += 1;
            if scan.first_bad_padding.is_none()
                && (d_bits != 0 || m_bits != 0 || !codes_zero(tile, c, r))
            {
                scan.first_bad_padding = Some(BadGroup::new(t, c, r, d, m, Defect::PaddingNotZero));
            }
            return;
        }
        scan.real_groups += 1;
        self.minimum_bits |= m_bits & 0x7fff;
        self.plane_bits |= (d_bits | m_bits) & 0x7fff;
        if is_positive_finite(d_bits) && is_finite(m_bits) {
            self.scale_bits = (self.scale_bits.0.min(d_bits), self.scale_bits.1.max(d_bits));
            self.sink.offer(order_key(m / d));
            return;
        }
        let why = if !d.is_finite() {
            Defect::ScaleNotFinite
        } else if d < 0.0 {
            Defect::ScaleNegative
        } else if !m.is_finite() {
            Defect::MinimumNotFinite
        } else if codes_zero(tile, c, r) {
            // d is zero here: ggml's quantizer gives that when a group's max equals its min.
            scan.constant_groups += 1;
            return;
        } else {
            Defect::ZeroScaleOverCodes
        };
        scan.bad_groups += 1;
        if scan.first_bad.is_none() {
            scan.first_bad = Some(BadGroup::new(t, c, r, d, m, why));
        }
    }
}

/// Buffers one scanning worker reuses across tensors: the keys kept inside a grid's bracket and the
/// sample that chose it. Their size follows the largest tensor's bracket, not the package.
#[derive(Default)]
pub struct ScanBuffers {
    keys: Vec<u32>,
    sample: Vec<u32>,
}

impl ScanBuffers {
    pub fn new() -> ScanBuffers {
        ScanBuffers::default()
    }
}

/// What a scan of one grid found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GridScan {
    pub real_groups: u64,
    pub padding_groups: u64,
    /// Real groups with `d = 0` over all-zero codes (ggml's quantizer where max equals min).
    pub constant_groups: u64,
    pub bad_groups: u64,
    pub first_bad: Option<BadGroup>,
    pub first_bad_padding: Option<BadGroup>,
    /// Median of `m / d` over real groups with a finite positive scale and finite minimum.
    pub ratio_median: Option<f32>,
    /// Smallest and largest finite positive scale.
    pub scale_range: Option<(f32, f32)>,
    /// Every real group's minimum is zero: FastFlowLM's q4_0 variant, not q4_1.
    pub zero_minimum_plane: bool,
    /// Every real group read has zero scale and zero minimum: a grid of no weights. `(tiles read,
    /// tiles)`: a large grid is refused from its sampled tiles, the rest unread.
    pub zero_planes: Option<(u64, u64)>,
}

/// The first offending group of a scan, located by tile and by position inside it.
#[derive(Clone, Debug, PartialEq)]
pub struct BadGroup {
    pub tile: u64,
    /// 32-column group inside the tile (0..8).
    pub column_group: usize,
    pub row: usize,
    pub scale: f32,
    pub minimum: f32,
    pub why: Defect,
}

/// What is wrong with a group's header: a sentence for the message, a token for the evidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Defect {
    ScaleNotFinite,
    ScaleNegative,
    MinimumNotFinite,
    ZeroScaleOverCodes,
    PaddingNotZero,
    /// Every sampled tile's scale and minimum planes are zero (the group is tile 0's first).
    ZeroPlanes,
}

impl Defect {
    pub fn token(self) -> &'static str {
        match self {
            Defect::ScaleNotFinite => "scale_not_finite",
            Defect::ScaleNegative => "scale_negative",
            Defect::MinimumNotFinite => "minimum_not_finite",
            Defect::ZeroScaleOverCodes => "zero_scale_over_codes",
            Defect::PaddingNotZero => "padding_not_zero",
            Defect::ZeroPlanes => "zero_planes",
        }
    }
}

impl std::fmt::Display for Defect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Defect::ScaleNotFinite => "scale is not finite",
            Defect::ScaleNegative => "scale is negative",
            Defect::MinimumNotFinite => "minimum is not finite",
            Defect::ZeroScaleOverCodes => "zero scale over non-zero codes",
            Defect::PaddingNotZero => "padding group is not zero",
            Defect::ZeroPlanes => "scale and minimum planes are zero in every sampled tile: a grid of no weights (codes not read)",
        })
    }
}

impl BadGroup {
    pub(super) fn new(
        tile: u64,
        column_group: usize,
        row: usize,
        d: f32,
        m: f32,
        why: Defect,
    ) -> BadGroup {
        BadGroup {
            tile,
            column_group,
            row,
            scale: d,
            minimum: m,
            why,
        }
    }

    /// `tile 17 group (c 3, r 5): scale is not finite (scale NaN, minimum -0.01)`.
    pub fn describe(&self) -> String {
        format!(
            "tile {} group (c {}, r {}): {} (scale {}, minimum {})",
            self.tile, self.column_group, self.row, self.why, self.scale, self.minimum
        )
    }
}

/// True when the 32 codes of group (c, r) in `tile` are all zero. Codes are stored by row half `g`,
/// column, and row pair: byte `g*2048 + col*8 + rp`, low nibble for the even row.
pub(super) fn codes_zero(tile: &[u8], c: usize, r: usize) -> bool {
    let base = CODES + (r / 16) * CODES_PER_HALF + (r % 16) / 2;
    let mask = if r.is_multiple_of(2) { 0x0f } else { 0xf0 };
    (c * 32..c * 32 + 32).all(|col| tile.get(base + col * 8).is_some_and(|b| b & mask == 0))
}

/// Median by selection (O(n)); the mean of the two middle values for an even count.
pub fn median(values: &mut [f32]) -> Option<f32> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let (lower, upper, _) = values.select_nth_unstable_by(n / 2, f32::total_cmp);
    let upper = *upper;
    if n % 2 == 1 {
        return Some(upper);
    }
    let lower_max = lower
        .iter()
        .copied()
        .max_by(f32::total_cmp)
        .unwrap_or(upper);
    Some((lower_max + upper) / 2.0)
}
