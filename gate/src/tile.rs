//! The q4_1 tile grid (FastFlowLM "Q4NX", spec section 4.1): arithmetic, shape proof, and header scan.
//!
//! A `TileGrid` exists only once a tensor's declared dtype, shape and byte count were proven to be a
//! whole grid of the config's N x K; the scan then reads tile headers (scales and minimums), and code
//! bytes only where a group's header says they must be zero.

use crate::container::TensorInfo;
use crate::dtype::Dtype;

/// Bytes in one tile: 512 of scales, 512 of minimums, 4,096 of codes.
pub const TILE_BYTES: u64 = 5120;
pub const TILE_ROWS: u64 = 32;
pub const TILE_COLS: u64 = 256;
/// Weights sharing one scale and minimum, along K.
pub const GROUP: u64 = 32;
/// Groups (and so scales, and minimums) per tile: 8 column groups x 32 rows.
pub const GROUPS_PER_TILE: usize = 256;
/// A q8_0 tile (256 bf16 scales + 8,192 int8 codes): a look-alike recognised by size, never decoded.
pub const Q8_0_TILE_BYTES: u64 = 8704;

const SCALES: usize = 0;
const MINIMUMS: usize = 512;
const CODES: usize = 1024;
const CODES_PER_HALF: usize = 2048;

/// The padded geometry of an N x K projection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridGeometry {
    pub n: u64,
    pub k: u64,
    pub row_blocks: u64,
    pub col_blocks: u64,
}

impl GridGeometry {
    /// `None` when N or K is zero, K is not a whole number of groups, or the sizes overflow.
    pub fn new(n: u64, k: u64) -> Option<GridGeometry> {
        if n == 0 || k == 0 || !k.is_multiple_of(GROUP) {
            return None;
        }
        let row_blocks = n.div_ceil(TILE_ROWS);
        let col_blocks = k.div_ceil(TILE_COLS);
        row_blocks
            .checked_mul(col_blocks)?
            .checked_mul(TILE_BYTES)?;
        Some(GridGeometry {
            n,
            k,
            row_blocks,
            col_blocks,
        })
    }

    pub fn tiles(&self) -> u64 {
        self.row_blocks * self.col_blocks
    }

    pub fn bytes(&self) -> u64 {
        self.tiles() * TILE_BYTES
    }

    /// Groups in the whole padded grid.
    pub fn groups(&self) -> u64 {
        self.tiles() * GROUPS_PER_TILE as u64
    }

    /// Groups holding real weights (rows below N, columns below K).
    pub fn real_groups(&self) -> u64 {
        self.n * (self.k / GROUP)
    }

    pub fn is_padded(&self) -> bool {
        !self.n.is_multiple_of(TILE_ROWS) || !self.k.is_multiple_of(TILE_COLS)
    }
}

/// The tile count of an N x K q4_1 grid, or `None` where no grid of that size exists.
pub fn tile_count(n: u64, k: u64) -> Option<u64> {
    GridGeometry::new(n, k).map(|g| g.tiles())
}

/// A tensor proven to be a whole q4_1 tile grid of a given geometry.
#[derive(Clone, Copy, Debug)]
pub struct TileGrid<'a> {
    pub geometry: GridGeometry,
    bytes: &'a [u8],
}

impl<'a> TileGrid<'a> {
    /// Proves `info` (whose bytes are `bytes`) is the N x K grid `geometry`, or says why it is not.
    pub fn new(
        info: &TensorInfo,
        bytes: &'a [u8],
        geometry: GridGeometry,
    ) -> Result<TileGrid<'a>, String> {
        let declared = format!("declared {} {}", info.dtype, info.shape_text());
        if info.dtype.is_half_float() {
            return Err(format!(
                "{declared}: a half-float matrix, not a q4_1 tile grid"
            ));
        }
        if !matches!(info.dtype, Dtype::I8 | Dtype::U8) {
            return Err(format!(
                "{declared}: a q4_1 tile grid is declared I8 (or U8)"
            ));
        }
        let last = info.shape.last().copied().unwrap_or(0);
        if last == Q8_0_TILE_BYTES {
            return Err(format!(
                "{declared}: q8_0 tile grid: not a form this draft reader decodes"
            ));
        }
        if last != TILE_BYTES {
            return Err(format!(
                "{declared}: last dimension is not a {TILE_BYTES}-byte tile"
            ));
        }
        let want = geometry.tiles();
        let plural = if want == 1 { "" } else { "s" };
        let need = format!("{} x {} needs {want} tile{plural}", geometry.n, geometry.k);
        match info.shape.as_slice() {
            [tiles, _] if *tiles == want => {}
            [tiles, _] if *tiles < want => {
                return Err(format!(
                    "{declared}: {tiles} tiles, {} short ({need})",
                    want - tiles
                ))
            }
            [tiles, _] => {
                return Err(format!(
                    "{declared}: {tiles} tiles, {} too many ({need})",
                    tiles - want
                ))
            }
            [rows, cols, _] if (*rows, *cols) == (geometry.row_blocks, geometry.col_blocks) => {}
            [rows, cols, _] => {
                return Err(format!(
                    "{declared}: {rows} x {cols} tile blocks, {} x {} needs {} x {}",
                    geometry.n, geometry.k, geometry.row_blocks, geometry.col_blocks
                ))
            }
            _ => {
                return Err(format!(
                    "{declared}: a tile grid is [tiles, 5120] or [N/32, Kp/256, 5120]"
                ))
            }
        }
        if bytes.len() as u64 != geometry.bytes() {
            return Err(format!(
                "{declared}: {} bytes, {need} = {} bytes",
                bytes.len(),
                geometry.bytes()
            ));
        }
        Ok(TileGrid { geometry, bytes })
    }

    /// Reads every tile header once: sanity of every group, padding, the scale range, and the exact
    /// median of minimum/scale over ordinary groups (positive finite scale, finite minimum).
    ///
    /// The median never needs every key stored: a sample of tiles brackets it first, the pass then
    /// counts keys below the bracket and keeps only those inside (about an eighth), and selection
    /// finishes there. If the sample misled (the bracket misses the middle), a second pass keeps every
    /// key: slower, never wrong.
    pub fn scan(&self, buffers: &mut ScanBuffers) -> GridScan {
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

    /// Brackets the median key from the ordinary groups of up to `SAMPLE_TILES` evenly spaced whole
    /// tiles; the full key range for a grid too small to be worth sampling.
    fn sample_bracket(&self, sample: &mut Vec<u32>) -> (u32, u32) {
        let g = self.geometry;
        let tiles = g.tiles();
        if tiles < 4 * SAMPLE_TILES {
            return (0, u32::MAX);
        }
        sample.clear();
        for i in 0..SAMPLE_TILES {
            let t = i * tiles / SAMPLE_TILES;
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
                    sample.push(order_key(bf16_bits(m) / bf16_bits(d)));
                }
            }
        }
        if sample.len() < GROUPS_PER_TILE {
            return (0, u32::MAX);
        }
        // Two selections instead of a sort: only the bracket's ends are needed.
        let mid = sample.len() / 2;
        let margin = sample.len() / 16;
        let (lo_at, hi_at) = (mid - margin, (mid + margin).min(sample.len() - 1));
        let (_, &mut lo, above) = sample.select_nth_unstable(lo_at);
        let (_, &mut hi, _) = above.select_nth_unstable(hi_at - lo_at - 1);
        (lo, hi)
    }

    /// One pass over every tile header, keeping the ordinary keys inside `bracket` in `keys`.
    fn pass(&self, bracket: (u32, u32), keys: &mut Vec<u32>) -> Pass {
        let g = self.geometry;
        keys.clear();
        let mut acc = Accumulator {
            scan: GridScan::default(),
            minimum_bits: 0,
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
                *key = order_key(bf16_bits(m) / bf16_bits(d));
                extraordinary |= u16::from(!(is_positive_finite(d) & is_finite(m)));
                lo = lo.min(d);
                hi = hi.max(d);
                min_bits |= m & 0x7fff;
            }
            if extraordinary == 0 {
                acc.scale_bits = (acc.scale_bits.0.min(lo), acc.scale_bits.1.max(hi));
                acc.minimum_bits |= min_bits;
                acc.scan.real_groups += GROUPS_PER_TILE as u64;
                acc.sink.offer_tile(&tile_keys);
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
            scale_bits,
            sink,
        } = acc;
        scan.zero_minimum_plane = scan.real_groups > 0 && minimum_bits == 0;
        if scale_bits.0 <= scale_bits.1 {
            scan.scale_range = Some((bf16_bits(scale_bits.0), bf16_bits(scale_bits.1)));
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

/// Where ordinary groups' keys go: counted when below the bracket, kept when inside it.
struct Sink<'k> {
    lo: u32,
    width: u32,
    below: u64,
    ordinary: u64,
    keys: &'k mut Vec<u32>,
}

impl Sink<'_> {
    fn offer(&mut self, key: u32) {
        self.ordinary += 1;
        self.below += u64::from(key < self.lo);
        if key.wrapping_sub(self.lo) <= self.width {
            self.keys.push(key);
        }
    }

    /// A whole tile's keys, branch-free: each is written at the cursor, which moves past those inside.
    #[inline(always)]
    fn offer_tile(&mut self, tile_keys: &[u32; GROUPS_PER_TILE]) {
        let mut kept = [0u32; GROUPS_PER_TILE];
        let (mut inside, mut below) = (0usize, 0u64);
        for &key in tile_keys {
            below += u64::from(key < self.lo);
            kept[inside] = key;
            inside += usize::from(key.wrapping_sub(self.lo) <= self.width);
        }
        self.below += below;
        self.ordinary += GROUPS_PER_TILE as u64;
        self.keys.extend_from_slice(&kept[..inside]);
    }
}

/// The exact median of `ordinary` keys, of which `below` lie under `inside` (the rest above it); `None`
/// when the middle ranks are not inside. The mean of the two middle values for an even count.
fn median_inside(inside: &mut [u32], below: u64, ordinary: u64) -> Option<f32> {
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

fn u16_at(plane: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([plane[2 * i], plane[2 * i + 1]])
}

/// The running state of one grid's pass.
struct Accumulator<'k> {
    scan: GridScan,
    sink: Sink<'k>,
    /// OR of every real group's minimum bits without the sign: zero only for an all-zero minimum plane.
    minimum_bits: u16,
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
        let (d, m) = (bf16_bits(d_bits), bf16_bits(m_bits));
        let scan = &mut self.scan;
        if !real {
            scan.padding_groups += 1;
            if scan.first_bad_padding.is_none()
                && (d_bits != 0 || m_bits != 0 || !codes_zero(tile, c, r))
            {
                scan.first_bad_padding =
                    Some(BadGroup::new(t, c, r, d, m, "padding group is not zero"));
            }
            return;
        }
        scan.real_groups += 1;
        self.minimum_bits |= m_bits & 0x7fff;
        if is_positive_finite(d_bits) && is_finite(m_bits) {
            self.scale_bits = (self.scale_bits.0.min(d_bits), self.scale_bits.1.max(d_bits));
            self.sink.offer(order_key(m / d));
            return;
        }
        let why = if !d.is_finite() {
            "scale is not finite"
        } else if d < 0.0 {
            "scale is negative"
        } else if !m.is_finite() {
            "minimum is not finite"
        } else if codes_zero(tile, c, r) {
            // d is zero here: ggml's quantizer gives that when a group's max equals its min.
            scan.constant_groups += 1;
            return;
        } else {
            "zero scale over non-zero codes"
        };
        scan.bad_groups += 1;
        if scan.first_bad.is_none() {
            scan.first_bad = Some(BadGroup::new(t, c, r, d, m, why));
        }
    }
}

/// A bf16 whose bits are `0 < bits < 0x7f80`: positive (sign clear), not zero, not infinite or NaN.
#[inline(always)]
fn is_positive_finite(bits: u16) -> bool {
    bits.wrapping_sub(1) < 0x7f7f
}

/// A bf16 whose exponent is not all ones.
#[inline(always)]
fn is_finite(bits: u16) -> bool {
    bits & 0x7f80 != 0x7f80
}

/// bf16 to f32 is a shift: bf16 is the top half of an f32.
#[inline(always)]
fn bf16_bits(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// Maps an f32 to a u32 whose integer order is `f32::total_cmp`'s order.
#[inline(always)]
fn order_key(x: f32) -> u32 {
    // Negative: flip every bit (larger magnitude sorts lower). Positive: set the sign bit.
    let bits = x.to_bits();
    bits ^ (((bits as i32 >> 31) as u32) | 0x8000_0000)
}

fn from_order_key(key: u32) -> f32 {
    if key & 0x8000_0000 != 0 {
        f32::from_bits(key & 0x7fff_ffff)
    } else {
        f32::from_bits(!key)
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
    pub why: &'static str,
}

impl BadGroup {
    fn new(
        tile: u64,
        column_group: usize,
        row: usize,
        d: f32,
        m: f32,
        why: &'static str,
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
fn codes_zero(tile: &[u8], c: usize, r: usize) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    #[test]
    fn tile_arithmetic_matches_the_spec() {
        assert_eq!(tile_count(4096, 2560), Some(1280));
        assert_eq!(tile_count(1024, 2560), Some(320));
        assert_eq!(tile_count(5120, 2560), Some(1600));
        assert_eq!(tile_count(2560, 5120), Some(1600));
        assert_eq!(tile_count(1280, 2560), Some(400));
        assert_eq!(
            GridGeometry::new(4096, 2560).map(|g| g.bytes()),
            Some(6_553_600)
        );
    }

    #[test]
    fn padding_rounds_both_dimensions_up() {
        let g = GridGeometry::new(400, 288).unwrap();
        assert_eq!((g.row_blocks, g.col_blocks, g.tiles()), (13, 2, 26));
        assert!(g.is_padded());
        assert_eq!(g.real_groups(), 400 * 9);
        assert!(!GridGeometry::new(4096, 2560).unwrap().is_padded());
    }

    #[test]
    fn no_grid_for_degenerate_sizes() {
        assert_eq!(tile_count(0, 256), None);
        assert_eq!(tile_count(32, 100), None);
        assert_eq!(tile_count(u64::MAX, u64::MAX - 31), None);
    }

    #[test]
    fn a_known_tile_decodes_to_known_scales() {
        // One 32 x 256 tile: group (c, r) gets scale (c*32 + r + 1) / 64 and minimum -7.5 times that,
        // written at element c*32 + r of each plane; codes all 0x5 except row 1 of group c=2.
        let mut tile = vec![0u8; TILE_BYTES as usize];
        for i in 0..GROUPS_PER_TILE {
            let d = bf16::from_f32((i as f32 + 1.0) / 64.0);
            let m = bf16::from_f32(-7.5 * d.to_f32());
            tile[2 * i..2 * i + 2].copy_from_slice(&d.to_bits().to_le_bytes());
            tile[512 + 2 * i..512 + 2 * i + 2].copy_from_slice(&m.to_bits().to_le_bytes());
        }
        let info = TensorInfo {
            name: "t".into(),
            dtype: Dtype::I8,
            shape: vec![1, 5120],
            begin: 0,
            end: 5120,
        };
        let grid = TileGrid::new(&info, &tile, GridGeometry::new(32, 256).unwrap()).unwrap();
        let mut keys = ScanBuffers::new();
        let scan = grid.scan(&mut keys);
        assert_eq!(scan.real_groups, 256);
        assert_eq!(scan.scale_range, Some((1.0 / 64.0, 4.0)));
        assert_eq!(scan.ratio_median, Some(-7.5));
        assert_eq!(scan.first_bad, None);
        // Element 2*32 + 1 (group c 2, row 1) gets scale 0 over codes that are not all zero.
        tile[2 * 65..2 * 65 + 2].copy_from_slice(&[0, 0]);
        let col = 2 * 32 + 7;
        tile[1024 + col * 8] = 0x10; // row 1 is the high nibble of row pair 0 in half 0.
        let grid = TileGrid::new(&info, &tile, GridGeometry::new(32, 256).unwrap()).unwrap();
        let bad = grid.scan(&mut keys).first_bad.unwrap();
        assert_eq!(
            (bad.tile, bad.column_group, bad.row, bad.why),
            (0, 2, 1, "zero scale over non-zero codes")
        );
        // The same byte in the low nibble belongs to row 0, whose scale is positive: no complaint.
        tile[1024 + col * 8] = 0x01;
        let grid = TileGrid::new(&info, &tile, GridGeometry::new(32, 256).unwrap()).unwrap();
        let scan = grid.scan(&mut keys);
        assert_eq!((scan.first_bad, scan.constant_groups), (None, 1));
    }

    #[test]
    fn shape_refusals_name_the_form() {
        let g = GridGeometry::new(4096, 2560).unwrap();
        let info = |dtype, shape: Vec<u64>| TensorInfo {
            name: "q".into(),
            dtype,
            shape,
            begin: 0,
            end: 0,
        };
        let no_bytes = [0u8; 0];
        let refuse = |i: TensorInfo| TileGrid::new(&i, &no_bytes, g).unwrap_err();
        assert!(refuse(info(Dtype::I8, vec![1279, 5120])).contains("1279 tiles, 1 short"));
        assert!(refuse(info(Dtype::F16, vec![1280, 2560])).contains("half-float matrix"));
        assert!(refuse(info(Dtype::I8, vec![128, 8704])).contains("q8_0 tile grid"));
        assert!(refuse(info(Dtype::I8, vec![40, 10, 5120])).contains("needs 128 x 10"));
        assert!(refuse(info(Dtype::I8, vec![1280, 5120])).contains("bytes"));
    }

    #[test]
    fn order_keys_sort_like_floats() {
        let mut xs = [
            3.5f32,
            -0.0,
            0.0,
            -7.5,
            f32::MIN_POSITIVE,
            -1e30,
            1e30,
            -1.0,
        ];
        let mut keys: Vec<u32> = xs.iter().map(|&x| order_key(x)).collect();
        keys.sort();
        xs.sort_by(f32::total_cmp);
        let back: Vec<u32> = keys.iter().map(|&k| from_order_key(k).to_bits()).collect();
        assert_eq!(back, xs.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    }

    #[test]
    fn median_inside_a_bracket_is_exact_or_refuses() {
        let key = order_key;
        // 10 keys: 3 below the bracket, 4 inside (-7.6, -7.5, -7.4, -7.3), 3 above.
        let got = median_inside(&mut [key(-7.3), key(-7.5), key(-7.4), key(-7.6)], 3, 10);
        assert_eq!(got, Some((-7.5f32 + -7.4) / 2.0));
        assert_eq!(median_inside(&mut [key(-7.5)], 4, 9), Some(-7.5));
        // The middle is not inside: refuse rather than guess.
        assert_eq!(median_inside(&mut [key(-7.5)], 5, 10), None);
        assert_eq!(median_inside(&mut [], 0, 0), None);
    }

    /// A 128-tile grid (big enough to be sampled) where every group has scale 1/64 and minimum
    /// `ratio(t, i)` times that.
    fn sampled_grid(ratio: impl Fn(usize, usize) -> f32) -> Vec<u8> {
        let mut bytes = vec![0u8; 128 * TILE_BYTES as usize];
        for (t, tile) in bytes.chunks_exact_mut(TILE_BYTES as usize).enumerate() {
            for i in 0..GROUPS_PER_TILE {
                let d = bf16::from_f32(1.0 / 64.0);
                let m = bf16::from_f32(ratio(t, i) / 64.0);
                tile[2 * i..2 * i + 2].copy_from_slice(&d.to_bits().to_le_bytes());
                tile[512 + 2 * i..512 + 2 * i + 2].copy_from_slice(&m.to_bits().to_le_bytes());
            }
        }
        bytes
    }

    fn brute_median(bytes: &[u8]) -> Option<f32> {
        let mut all = Vec::new();
        for tile in bytes.chunks_exact(TILE_BYTES as usize) {
            for i in 0..GROUPS_PER_TILE {
                all.push(
                    bf16_bits(u16_at(&tile[512..1024], i)) / bf16_bits(u16_at(&tile[..512], i)),
                );
            }
        }
        median(&mut all)
    }

    #[test]
    fn sampled_scan_median_is_exact_even_when_the_sample_misleads() {
        let g = GridGeometry::new(4096, 256).unwrap();
        let info = |len| TensorInfo {
            name: "t".into(),
            dtype: Dtype::I8,
            shape: vec![128, 5120],
            begin: 0,
            end: len,
        };
        // Spread ratios: the bracket holds.
        let spread = sampled_grid(|t, i| -7.0 - ((t * 7 + i * 13) % 97) as f32 / 97.0);
        // The sampled tiles (every fourth) read -100, all others near -7.5: the bracket misses.
        let misleading = sampled_grid(|t, i| {
            if t % 4 == 0 {
                -100.0
            } else {
                -7.5 + (i % 5) as f32 / 10.0
            }
        });
        for bytes in [spread, misleading] {
            let grid = TileGrid::new(&info(bytes.len() as u64), &bytes, g).unwrap();
            let scan = grid.scan(&mut ScanBuffers::new());
            assert_eq!(scan.ratio_median, brute_median(&bytes));
            assert_eq!(scan.real_groups, 128 * 256);
        }
    }

    #[test]
    fn bit_classification_matches_floats() {
        for bits in 0..=u16::MAX {
            let x = bf16_bits(bits);
            assert_eq!(
                is_positive_finite(bits),
                x.is_finite() && x > 0.0,
                "{bits:#x}"
            );
            assert_eq!(is_finite(bits), x.is_finite(), "{bits:#x}");
        }
    }

    #[test]
    fn median_by_selection() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    /// The scan written the plain way: every group in order, no fast path, no sampling.
    fn naive_scan(bytes: &[u8], g: GridGeometry) -> GridScan {
        let mut scan = GridScan::default();
        let mut ratios = Vec::new();
        let mut min_bits = 0u16;
        let mut scales: Vec<u16> = Vec::new();
        for (t, tile) in bytes.chunks_exact(TILE_BYTES as usize).enumerate() {
            let t = t as u64;
            let (row0, col0) = (
                (t / g.col_blocks) * TILE_ROWS,
                (t % g.col_blocks) * TILE_COLS,
            );
            for i in 0..GROUPS_PER_TILE {
                let (c, r) = (i / 32, i % 32);
                let (db, mb) = (u16_at(&tile[..512], i), u16_at(&tile[512..1024], i));
                let (d, m) = (bf16_bits(db), bf16_bits(mb));
                if row0 + r as u64 >= g.n || col0 + c as u64 * 32 >= g.k {
                    scan.padding_groups += 1;
                    if scan.first_bad_padding.is_none()
                        && (db != 0 || mb != 0 || !codes_zero(tile, c, r))
                    {
                        scan.first_bad_padding =
                            Some(BadGroup::new(t, c, r, d, m, "padding group is not zero"));
                    }
                    continue;
                }
                scan.real_groups += 1;
                min_bits |= mb & 0x7fff;
                let why = if d.is_finite() && d > 0.0 && m.is_finite() {
                    ratios.push(m / d);
                    scales.push(db);
                    None
                } else if !d.is_finite() {
                    Some("scale is not finite")
                } else if d < 0.0 {
                    Some("scale is negative")
                } else if !m.is_finite() {
                    Some("minimum is not finite")
                } else if codes_zero(tile, c, r) {
                    scan.constant_groups += 1;
                    None
                } else {
                    Some("zero scale over non-zero codes")
                };
                if let Some(why) = why {
                    scan.bad_groups += 1;
                    if scan.first_bad.is_none() {
                        scan.first_bad = Some(BadGroup::new(t, c, r, d, m, why));
                    }
                }
            }
        }
        scan.zero_minimum_plane = scan.real_groups > 0 && min_bits == 0;
        scan.scale_range = match (scales.iter().min(), scales.iter().max()) {
            (Some(&lo), Some(&hi)) => Some((bf16_bits(lo), bf16_bits(hi))),
            _ => None,
        };
        scan.ratio_median = median(&mut ratios);
        scan
    }

    /// A grid of random headers: mostly q4_1-like groups, with every kind of special value mixed in
    /// at `special` probability, and padding that is usually (not always) zero.
    fn random_grid(g: GridGeometry, special: f64, state: &mut u64) -> Vec<u8> {
        let mut next = || {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            *state
        };
        let mut unit = || (next() >> 11) as f64 / (1u64 << 53) as f64;
        let mut bytes = vec![0u8; g.bytes() as usize];
        for (t, tile) in bytes.chunks_exact_mut(TILE_BYTES as usize).enumerate() {
            let t = t as u64;
            let (row0, col0) = (
                (t / g.col_blocks) * TILE_ROWS,
                (t % g.col_blocks) * TILE_COLS,
            );
            for i in 0..GROUPS_PER_TILE {
                let (c, r) = (i / 32, i % 32);
                let padding = row0 + r as u64 >= g.n || col0 + c as u64 * 32 >= g.k;
                if padding && unit() > special {
                    continue;
                }
                let mut d = (0.002 + 0.01 * unit()) as f32;
                let mut m = -7.5 * d * (1.0 + 0.1 * (unit() as f32 - 0.5));
                if unit() < special {
                    d = [0.0, -0.01, f32::NAN, f32::INFINITY, 1e-40, -0.0]
                        [(unit() * 6.0) as usize % 6];
                }
                if unit() < special {
                    m = [0.0, f32::NAN, f32::NEG_INFINITY, -0.0][(unit() * 4.0) as usize % 4];
                }
                let codes = unit() < 0.5;
                for (plane, v) in [(0, d), (512, m)] {
                    tile[plane + 2 * i..plane + 2 * i + 2]
                        .copy_from_slice(&bf16::from_f32(v).to_bits().to_le_bytes());
                }
                if codes {
                    for col in c * 32..c * 32 + 32 {
                        let byte = 1024 + (r / 16) * 2048 + col * 8 + (r % 16) / 2;
                        tile[byte] |= if r % 2 == 0 { 0x05 } else { 0x50 };
                    }
                }
            }
        }
        bytes
    }

    fn same(a: &GridScan, b: &GridScan) -> bool {
        let bad = |x: &Option<BadGroup>| {
            x.as_ref().map(|b| {
                (
                    b.tile,
                    b.column_group,
                    b.row,
                    b.why,
                    b.scale.to_bits(),
                    b.minimum.to_bits(),
                )
            })
        };
        (
            a.real_groups,
            a.padding_groups,
            a.constant_groups,
            a.bad_groups,
            a.zero_minimum_plane,
        ) == (
            b.real_groups,
            b.padding_groups,
            b.constant_groups,
            b.bad_groups,
            b.zero_minimum_plane,
        ) && bad(&a.first_bad) == bad(&b.first_bad)
            && bad(&a.first_bad_padding) == bad(&b.first_bad_padding)
            && a.ratio_median.map(f32::to_bits) == b.ratio_median.map(f32::to_bits)
            && a.scale_range.map(|(l, h)| (l.to_bits(), h.to_bits()))
                == b.scale_range.map(|(l, h)| (l.to_bits(), h.to_bits()))
    }

    #[test]
    fn the_fast_scan_agrees_with_the_plain_one() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let geometries = [
            (4096, 256),
            (256, 256),
            (100, 288),
            (80, 416),
            (4096, 512),
            (33, 32),
        ];
        for (n, k) in geometries {
            let g = GridGeometry::new(n, k).unwrap();
            for special in [0.0, 0.0005, 0.02, 0.3] {
                let bytes = random_grid(g, special, &mut state);
                let info = TensorInfo {
                    name: "t".into(),
                    dtype: Dtype::I8,
                    shape: vec![g.tiles(), 5120],
                    begin: 0,
                    end: bytes.len() as u64,
                };
                let fast = TileGrid::new(&info, &bytes, g)
                    .unwrap()
                    .scan(&mut ScanBuffers::new());
                let plain = naive_scan(&bytes, g);
                assert!(
                    same(&fast, &plain),
                    "{n} x {k}, special {special}:\nfast  {fast:?}\nplain {plain:?}"
                );
            }
        }
    }
}
