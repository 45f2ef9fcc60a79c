//! Grid arithmetic (tiles, padding, bytes of an N x K projection) and the proof that a tensor is one.

use super::{GROUP, GROUPS_PER_TILE, Q8_0_TILE_BYTES, TILE_BYTES, TILE_COLS, TILE_ROWS};
use crate::container::TensorInfo;
use crate::dtype::Dtype;

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
    pub(super) bytes: &'a [u8],
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

    /// The grid's bytes: `tiles` tiles of `TILE_BYTES`, row-block-major.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// A grid over `bytes` taken as is, for unit tests of the code that reads grids.
    #[cfg(test)]
    pub(crate) fn unchecked(geometry: GridGeometry, bytes: &'a [u8]) -> TileGrid<'a> {
        TileGrid { geometry, bytes }
    }
}
