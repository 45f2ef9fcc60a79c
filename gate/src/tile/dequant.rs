//! Decoding one tile to its weights' parts, row by row: the 4-bit code of every element and the
//! scale and minimum of every group, so a weight is `code * scale + minimum` (spec section 4.1).
//!
//! The tile stores codes by row half, column and row pair, and its planes by group-major index
//! `c*32 + r`; decoding once into row-major arrays lets a caller walk a row of 256 weights
//! contiguously, beside the matching row of a row-major source matrix.

use super::bits::{bf16_bits, u16_at};
use super::{CODES, CODES_PER_HALF, MINIMUMS, SCALES, TILE_BYTES, TILE_COLS, TILE_ROWS};

const ROWS: usize = TILE_ROWS as usize;
const COLS: usize = TILE_COLS as usize;
/// 32-column groups across a tile.
pub const COLUMN_GROUPS: usize = COLS / 32;

/// One tile's weights, decoded: `codes[r][col]`, `scales[r][c]`, `minimums[r][c]` (c = col / 32).
#[derive(Clone)]
pub struct DecodedTile {
    pub codes: [[u8; COLS]; ROWS],
    pub scales: [[f32; COLUMN_GROUPS]; ROWS],
    pub minimums: [[f32; COLUMN_GROUPS]; ROWS],
}

impl Default for DecodedTile {
    fn default() -> DecodedTile {
        DecodedTile {
            codes: [[0; COLS]; ROWS],
            scales: [[0.0; COLUMN_GROUPS]; ROWS],
            minimums: [[0.0; COLUMN_GROUPS]; ROWS],
        }
    }
}

impl DecodedTile {
    /// Decodes `tile` (exactly `TILE_BYTES` bytes; anything else leaves `self` unchanged and says so).
    #[inline(always)]
    pub fn decode(&mut self, tile: &[u8]) -> bool {
        if tile.len() as u64 != TILE_BYTES {
            return false;
        }
        for r in 0..ROWS {
            for c in 0..COLUMN_GROUPS {
                self.scales[r][c] = bf16_bits(u16_at(&tile[SCALES..MINIMUMS], c * 32 + r));
                self.minimums[r][c] = bf16_bits(u16_at(&tile[MINIMUMS..CODES], c * 32 + r));
            }
        }
        for g in 0..2 {
            let half = &tile[CODES + g * CODES_PER_HALF..CODES + (g + 1) * CODES_PER_HALF];
            let (columns, _) = half.as_chunks::<8>();
            for (col, pairs) in columns.iter().enumerate() {
                for (rp, &byte) in pairs.iter().enumerate() {
                    let row = 16 * g + 2 * rp;
                    self.codes[row][col] = byte & 0x0f;
                    self.codes[row + 1][col] = byte >> 4;
                }
            }
        }
        true
    }

    /// The weight at row `r`, column `col` of the tile: `code * scale + minimum`.
    pub fn weight(&self, r: usize, col: usize) -> f32 {
        let c = col / 32;
        f32::from(self.codes[r][col]) * self.scales[r][c] + self.minimums[r][c]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    #[test]
    fn every_element_lands_where_the_spec_puts_it() {
        let mut tile = vec![0u8; TILE_BYTES as usize];
        for i in 0..256 {
            let d = bf16::from_f32((i + 1) as f32 / 8.0).to_bits().to_le_bytes();
            let m = bf16::from_f32(-(i as f32)).to_bits().to_le_bytes();
            tile[2 * i..2 * i + 2].copy_from_slice(&d);
            tile[512 + 2 * i..512 + 2 * i + 2].copy_from_slice(&m);
        }
        // Code of (row, col) = (row + col) % 16, written where section 4.1 says.
        for row in 0..32 {
            for col in 0..256 {
                let at = 1024 + (row / 16) * 2048 + col * 8 + (row % 16) / 2;
                let code = ((row + col) % 16) as u8;
                tile[at] |= if row % 2 == 0 { code } else { code << 4 };
            }
        }
        let mut decoded = DecodedTile::default();
        assert!(decoded.decode(&tile));
        for row in 0..32 {
            for col in 0..256 {
                let i = (col / 32) * 32 + row;
                let want = ((row + col) % 16) as f32 * ((i + 1) as f32 / 8.0) - i as f32;
                assert_eq!(decoded.weight(row, col), want, "row {row} col {col}");
            }
        }
        assert!(!decoded.decode(&tile[1..]));
    }
}
