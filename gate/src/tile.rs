//! The q4_1 tile grid (FastFlowLM "Q4NX", spec section 4.1): arithmetic, shape proof, and header scan.
//!
//! A `TileGrid` exists only once a tensor's declared dtype, shape and byte count were proven to be a
//! whole grid of the config's N x K; the scan then reads tile headers (scales and minimums), and code
//! bytes only where a group's header says they must be zero.

use crate::container::TensorInfo;
use crate::dtype::Dtype;
use half::bf16;

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
        let need = format!("{} x {} needs {want} tiles", geometry.n, geometry.k);
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

    /// Reads every tile header, collecting min/scale ratios of real groups into `ratios` (cleared
    /// first, so one buffer serves every tensor a worker scans).
    pub fn scan(&self, ratios: &mut Vec<f32>) -> GridScan {
        ratios.clear();
        let g = self.geometry;
        let mut scan = GridScan::default();
        let mut all_minimums_zero = true;
        for (t, tile) in self.bytes.chunks_exact(TILE_BYTES as usize).enumerate() {
            let t = t as u64;
            let row0 = (t / g.col_blocks) * TILE_ROWS;
            let col0 = (t % g.col_blocks) * TILE_COLS;
            let scales = &tile[SCALES..MINIMUMS];
            let minimums = &tile[MINIMUMS..CODES];
            for (i, (s, m)) in scales
                .chunks_exact(2)
                .zip(minimums.chunks_exact(2))
                .enumerate()
            {
                let d = bf16_at(s);
                let m = bf16_at(m);
                let (c, r) = (i / 32, i % 32);
                let real = row0 + (r as u64) < g.n && col0 + (c as u64) * GROUP < g.k;
                if !real {
                    scan.padding_groups += 1;
                    if scan.first_bad_padding.is_none()
                        && (d.to_bits() != 0 || m.to_bits() != 0 || !codes_zero(tile, c, r))
                    {
                        scan.first_bad_padding =
                            Some(BadGroup::new(t, c, r, d, m, "padding group is not zero"));
                    }
                    continue;
                }
                scan.real_groups += 1;
                all_minimums_zero &= m == 0.0;
                let problem = if !d.is_finite() {
                    Some("scale is not finite")
                } else if d < 0.0 {
                    Some("scale is negative")
                } else if !m.is_finite() {
                    Some("minimum is not finite")
                } else if d == 0.0 {
                    if codes_zero(tile, c, r) {
                        scan.constant_groups += 1;
                        None
                    } else {
                        Some("zero scale over non-zero codes")
                    }
                } else {
                    ratios.push(m / d);
                    scan.scale_range = Some(match scan.scale_range {
                        None => (d, d),
                        Some((lo, hi)) => (lo.min(d), hi.max(d)),
                    });
                    None
                };
                if let Some(why) = problem {
                    scan.bad_groups += 1;
                    if scan.first_bad.is_none() {
                        scan.first_bad = Some(BadGroup::new(t, c, r, d, m, why));
                    }
                }
            }
        }
        scan.zero_minimum_plane = scan.real_groups > 0 && all_minimums_zero;
        scan.ratio_median = median(ratios);
        scan
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

fn bf16_at(two: &[u8]) -> f32 {
    bf16::from_bits(u16::from_le_bytes([two[0], two[1]])).to_f32()
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
        let mut ratios = Vec::new();
        let scan = grid.scan(&mut ratios);
        assert_eq!(scan.real_groups, 256);
        assert_eq!(scan.scale_range, Some((1.0 / 64.0, 4.0)));
        assert_eq!(scan.ratio_median, Some(-7.5));
        assert_eq!(scan.first_bad, None);
        // Element 2*32 + 1 (group c 2, row 1) gets scale 0 over codes that are not all zero.
        tile[2 * 65..2 * 65 + 2].copy_from_slice(&[0, 0]);
        let col = 2 * 32 + 7;
        tile[1024 + col * 8] = 0x10; // row 1 is the high nibble of row pair 0 in half 0.
        let grid = TileGrid::new(&info, &tile, GridGeometry::new(32, 256).unwrap()).unwrap();
        let bad = grid.scan(&mut ratios).first_bad.unwrap();
        assert_eq!(
            (bad.tile, bad.column_group, bad.row, bad.why),
            (0, 2, 1, "zero scale over non-zero codes")
        );
        // The same byte in the low nibble belongs to row 0, whose scale is positive: no complaint.
        tile[1024 + col * 8] = 0x01;
        let grid = TileGrid::new(&info, &tile, GridGeometry::new(32, 256).unwrap()).unwrap();
        let scan = grid.scan(&mut ratios);
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
    fn median_by_selection() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }
}
