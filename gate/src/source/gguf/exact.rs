//! `source.q4_1` against a Q4_1 GGUF tensor: exact. FastFlowLM's converter copies each ggml block's
//! codes into the tile unchanged and widens its f16 `d` and `m` to bf16 (nearest-even), so a
//! faithful grid's every real group *is* its block: 32 codes equal, `d` and `m` the block's rounded.
//! Nothing is dequantized: each code byte of the tile and each byte of the GGUF is read once, on
//! every core, with no allocation per group.

use crate::dtype::f32_to_bf16;
use crate::parallel;
use crate::tile::{GridGeometry, TileGrid, TILE_BYTES, TILE_COLS, TILE_ROWS};

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
        |_, &(j, from, to)| {
            let mut outcome = Outcome::default();
            for t in from..to {
                tile(&jobs[j], t, &mut outcome);
            }
            (j, outcome)
        },
    )?;
    let mut outcomes = vec![Outcome::default(); jobs.len()];
    for (j, part) in parts {
        outcomes[j].add(part);
    }
    Ok(outcomes)
}

/// The bf16 a converter stores for an f16 `d` or `m`: widened, rounded to nearest-even.
#[inline(always)]
pub fn widened(f16_bits: u16) -> u16 {
    f32_to_bf16(f16(f16_bits))
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

/// Tile `t` of a job: its real rows two at a time (a code byte holds a row pair), each group
/// against its block.
fn tile(job: &Job<'_>, t: u64, outcome: &mut Outcome) {
    let g: GridGeometry = job.grid.geometry;
    let at = (t * TILE_BYTES) as usize;
    let Some(tile) = job.grid.bytes().get(at..at + TILE_BYTES as usize) else {
        return;
    };
    let (row0, col0) = (
        (t / g.col_blocks) * TILE_ROWS,
        (t % g.col_blocks) * TILE_COLS,
    );
    let rows = (g.n - row0).min(TILE_ROWS) as usize;
    let groups = ((g.k - col0).min(TILE_COLS) / GROUP) as usize;
    let per_row = g.k / GROUP;
    let header = |plane: usize, c: usize, r: usize| {
        let i = plane + 2 * (c * 32 + r);
        u16::from_le_bytes([tile[i], tile[i + 1]])
    };
    for r in (0..rows).step_by(2) {
        // Rows r (low nibbles) and r + 1 (high nibbles) share each code byte.
        let base = 1024 + (r / 16) * 2048 + (r % 16) / 2;
        let pair = r + 1 < rows;
        for c in 0..groups {
            let row = row0 + r as u64;
            let first_block = row * per_row + col0 / GROUP + c as u64;
            let a = block(job, first_block);
            let b = if pair {
                block(job, first_block + per_row)
            } else {
                None
            };
            let (mut da, mut db) = (0u8, 0u8);
            if let Some(a) = a {
                match b {
                    Some(b) => {
                        for j in 0..32 {
                            let p = tile[base + (c * 32 + j) * 8];
                            da |= (p & 0x0f) ^ code(a, j);
                            db |= (p >> 4) ^ code(b, j);
                        }
                    }
                    None => {
                        for j in 0..32 {
                            da |= (tile[base + (c * 32 + j) * 8] & 0x0f) ^ code(a, j);
                        }
                    }
                }
            }
            let members = [(0usize, a, da), (1, b, db)];
            for (i, blk, codes_differ) in members.into_iter().take(if pair { 2 } else { 1 }) {
                let r = r + i;
                outcome.groups += 1;
                let (pd, pm) = (header(0, c, r), header(512, c, r));
                let what = match blk {
                    None => Some(What::NotFinite {
                        block: first_block + i as u64 * per_row,
                        d: 0x7e00,
                        m: 0x7e00,
                    }),
                    Some(blk) => {
                        let (d, m) = (
                            u16::from_le_bytes([blk[0], blk[1]]),
                            u16::from_le_bytes([blk[2], blk[3]]),
                        );
                        if not_finite(d) || not_finite(m) {
                            Some(What::NotFinite {
                                block: first_block + i as u64 * per_row,
                                d,
                                m,
                            })
                        } else if pd != widened(d) {
                            Some(What::Scale {
                                package: pd,
                                gguf: widened(d),
                            })
                        } else if pm != widened(m) {
                            Some(What::Minimum {
                                package: pm,
                                gguf: widened(m),
                            })
                        } else if codes_differ != 0 {
                            Some(first_code(tile, base, c, i, blk, col0))
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
}

/// The first code of group `c` (row `r + i` of the pair at `base`) that differs from its block's.
fn first_code(tile: &[u8], base: usize, c: usize, i: usize, blk: &[u8; BLOCK], col0: u64) -> What {
    let nibble = |j: usize| (tile[base + (c * 32 + j) * 8] >> (4 * i)) & 0x0f;
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
