//! The q4_1 tile grid (FastFlowLM "Q4NX", spec section 4.1): arithmetic and shape proof (`grid`),
//! the header scan (`scan`), and decoding a tile's weights (`dequant`), over the bf16 bit helpers
//! both use (`bits`).
//!
//! A `TileGrid` exists only once a tensor's declared dtype, shape and byte count were proven to be a
//! whole grid of the config's N x K; the scan then reads tile headers (scales and minimums), and code
//! bytes only where a group's header says they must be zero.

pub mod bits;
pub mod dequant;
mod grid;
mod scan;
mod sink;

pub use grid::{tile_count, GridGeometry, TileGrid};
pub use scan::{median, BadGroup, Defect, GridScan, ScanBuffers};

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

pub(crate) const SCALES: usize = 0;
pub(crate) const MINIMUMS: usize = 512;
pub(crate) const CODES: usize = 1024;
pub(crate) const CODES_PER_HALF: usize = 2048;

#[cfg(test)]
mod tests;
