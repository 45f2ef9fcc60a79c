//! Decoding one tile to its weights' parts, row by row: the 4-bit code of every element and the
//! scale and minimum of every group, so a weight is `code * scale + minimum` (spec section 4.1).
//!
//! The tile stores codes by row half, column and row pair, and its planes by group-major index
//! `c*32 + r`; decoding once into row-major arrays lets a caller walk a row of 256 weights
//! contiguously, beside the matching row of a row-major source matrix.

use super::bits::u16_at;
use super::{CODES, CODES_PER_HALF, MINIMUMS, SCALES, TILE_BYTES, TILE_COLS, TILE_ROWS};
use crate::dtype::bf16_to_f32;

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
                self.scales[r][c] = bf16_to_f32(u16_at(&tile[SCALES..MINIMUMS], c * 32 + r));
                self.minimums[r][c] = bf16_to_f32(u16_at(&tile[MINIMUMS..CODES], c * 32 + r));
            }
        }
        // Eight columns at a time: their 8 x 8 bytes (column, row pair) transposed in registers to
        // (row pair, column), then split into the two rows' nibbles: 16 word stores per 64 bytes
        // rather than 128 byte stores 256 bytes apart.
        const LOW: u64 = 0x0f0f_0f0f_0f0f_0f0f;
        for g in 0..2 {
            let half = &tile[CODES + g * CODES_PER_HALF..CODES + (g + 1) * CODES_PER_HALF];
            let (blocks, _) = half.as_chunks::<64>();
            for (b, block) in blocks.iter().enumerate() {
                let (words, _) = block.as_chunks::<8>();
                let mut w = [0u64; 8];
                for (w, &bytes) in w.iter_mut().zip(words) {
                    *w = u64::from_le_bytes(bytes);
                }
                transpose_bytes(&mut w);
                for (rp, &pair) in w.iter().enumerate() {
                    let row = 16 * g + 2 * rp;
                    let at = 8 * b;
                    self.codes[row][at..at + 8].copy_from_slice(&(pair & LOW).to_le_bytes());
                    self.codes[row + 1][at..at + 8]
                        .copy_from_slice(&((pair >> 4) & LOW).to_le_bytes());
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

/// Transposes an 8 x 8 byte matrix held as eight little-endian words (`w[i]` byte `k` becomes
/// `w[k]` byte `i`): three rounds swapping 4-, 2- and 1-byte blocks between word pairs.
#[inline(always)]
fn transpose_bytes(w: &mut [u64; 8]) {
    for (span, mask) in [
        (4, 0x0000_0000_ffff_ffffu64),
        (2, 0x0000_ffff_0000_ffff),
        (1, 0x00ff_00ff_00ff_00ff),
    ] {
        for i in 0..8 {
            if i & span == 0 {
                let shift = 8 * span as u32;
                let t = ((w[i] >> shift) ^ w[i + span]) & mask;
                w[i + span] ^= t;
                w[i] ^= t << shift;
            }
        }
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

    #[test]
    fn the_byte_transpose_swaps_rows_and_columns() {
        let mut w = [0u64; 8];
        for (i, w) in w.iter_mut().enumerate() {
            *w = u64::from_le_bytes(core::array::from_fn(|k| (16 * i + k) as u8));
        }
        transpose_bytes(&mut w);
        for (k, w) in w.iter().enumerate() {
            assert_eq!(
                w.to_le_bytes(),
                core::array::from_fn(|i| (16 * i + k) as u8)
            );
        }
    }
}
