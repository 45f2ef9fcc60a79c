//! A yardstick for `--source`, not a gate: the comparison's per-element arithmetic over both files
//! read in address order, as if the package were laid out for the comparison.
//!
//! Per element it does what the gate's whole-tile kernel does (`w = q * d + m`, `|w - s|`, the running
//! largest error, the squared error and the squared source summed), its codes split from nibbles in
//! the loop (ten vector operations for eight elements, the kernel's nine). Per group it takes `d` and
//! `m` from the planes in scalar code and keeps the largest error unscaled. Per tile it does none of the
//! kernel's work: no planes checked, no `1 / d`, no regrouping; and none of the gate's: no tile order
//! to follow (source and tile bytes are read front to back), no form checks. The rest of both files is
//! read once as the floor reads it. Its codes and source values are paired by position, not as a grid
//! pairs them: the sums mean nothing, only the time does.
//!
//! Streaming, its time over the floor's is what this arithmetic and the memory cost together when both
//! cores compute while they stream, in the most favourable order, with prefetching tuned (two tiles
//! ahead into the second-level cache: one, four or eight tiles ahead, or other hints, measured no
//! better). In cache (`Reading::InCache`) it shows its arithmetic against the kernel's.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const TILE_BYTES: usize = dflash_gate::__private::tile::TILE_BYTES as usize;
/// Elements of one tile (32 rows x 256 columns).
const TILE_ELEMENTS: usize = 8192;
const TILES_PER_ITEM: usize = 32;

/// Where a safetensors file's tensor bytes begin: after its 8-byte header length and its header.
fn data(file: &[u8]) -> &[u8] {
    let (length, rest) = file.split_first_chunk::<8>().expect("a safetensors file");
    let length = usize::try_from(u64::from_le_bytes(*length)).expect("header length");
    &rest[length..]
}

enum Item<'a> {
    /// Tiles `from..to`: their bytes in the package, their elements in the source.
    Tiles(usize, usize),
    /// Bytes beyond the tiles, read once.
    Rest(&'a [u8]),
}

/// Where the yardstick's tile bytes come from.
#[derive(Clone, Copy, PartialEq)]
pub enum Reading {
    /// Both files, front to back, every byte once: the yardstick proper.
    Streaming,
    /// The first tile and its source values, again and again, and nothing else read: the
    /// yardstick's arithmetic with no memory to wait for, to set beside the kernel's.
    InCache,
}

/// The yardstick's time for `elements` grid elements, mapping both files and unmapping them inside
/// the timing as the floor does; `None` where the processor lacks AVX2 and FMA. Panics when the
/// files hold fewer than `elements`, so that its figure is never one of a smaller comparison.
pub fn time(
    package: &PathBuf,
    source: &PathBuf,
    elements: u64,
    reading: Reading,
) -> Option<Duration> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        let start = Instant::now();
        black_box(run(package, source, elements, reading));
        return Some(start.elapsed());
    }
    let _ = (package, source, elements, reading);
    None
}

#[cfg(target_arch = "x86_64")]
fn run(package: &PathBuf, source: &PathBuf, elements: u64, reading: Reading) -> Vec<f64> {
    let map = |path: &PathBuf| {
        let file = std::fs::File::open(path).expect("file");
        // SAFETY: read-only map of a file nothing else writes during the benchmark.
        unsafe { memmap2::Mmap::map(&file) }.expect("map")
    };
    let (package_map, source_map) = (map(package), map(source));
    let (package, source) = (data(&package_map), data(&source_map));
    let whole = usize::try_from(elements).expect("elements");
    let tiles = whole / TILE_ELEMENTS;
    assert!(
        tiles * TILE_ELEMENTS == whole
            && tiles <= package.len() / TILE_BYTES
            && tiles <= source.len() / (2 * TILE_ELEMENTS),
        "the yardstick compares the gate's {elements} elements, whole tiles of both files"
    );
    let mut items: Vec<Item<'_>> = (0..tiles.div_ceil(TILES_PER_ITEM))
        .map(|i| Item::Tiles(i * TILES_PER_ITEM, ((i + 1) * TILES_PER_ITEM).min(tiles)))
        .collect();
    if reading == Reading::Streaming {
        for rest in [
            &package[tiles * TILE_BYTES..],
            &source[tiles * 2 * TILE_ELEMENTS..],
        ] {
            items.extend(rest.chunks(1 << 20).map(Item::Rest));
        }
    }
    let in_cache = reading == Reading::InCache;
    let sums = dflash_gate::__private::parallel::map(
        "the yardstick",
        &items,
        || (),
        |_, item| match *item {
            // SAFETY: `time` found the processor to support both features the function enables.
            Item::Tiles(from, to) => unsafe { x86::tiles(package, source, from, to, in_cache) },
            Item::Rest(bytes) => {
                let (words, _) = bytes.as_chunks::<8>();
                words.iter().fold(0u64, |s, w| s ^ u64::from_le_bytes(*w)) as f64
            }
        },
    )
    .expect("the yardstick read every item");
    sums
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{TILE_BYTES, TILE_ELEMENTS};
    use core::arch::x86_64::*;

    /// A plane entry as a normal bf16 of the given sign: the yardstick's package bytes are not
    /// a faithful grid, and a NaN or subnormal scale would time a slower arithmetic than the gate's.
    fn plane(bits: u16, negative: bool) -> f32 {
        let sign = if negative { 0x8000 } else { 0 };
        f32::from_bits(u32::from((bits & 0x7f) | 0x3c00 | sign) << 16)
    }

    /// Tiles `from..to` (tile 0 each time when `in_cache`): each tile's 256 groups of 32 elements,
    /// the scale and minimum of group `g` at entry `g` of the tile's planes, its codes two to a byte
    /// in element order.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn tiles<'a>(
        package: &'a [u8],
        source: &'a [u8],
        from: usize,
        to: usize,
        in_cache: bool,
    ) -> f64 {
        let magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
        let low = _mm256_set1_epi32(0x0f);
        let zero = _mm256_setzero_si256();
        let mut largest = zero;
        let (mut sq_err, mut sq_src) = ([_mm256_setzero_ps(); 2], [_mm256_setzero_ps(); 2]);
        for t in from..to {
            let t = if in_cache { 0 } else { t };
            // Arrays, so that every index below is checked when compiling, not in the loop.
            let tile: &[u8; TILE_BYTES] = package[t * TILE_BYTES..(t + 1) * TILE_BYTES]
                .try_into()
                .expect("a tile");
            let values: &[u8; 2 * TILE_ELEMENTS] = source
                [t * 2 * TILE_ELEMENTS..(t + 1) * 2 * TILE_ELEMENTS]
                .try_into()
                .expect("a tile's source values");
            // The bytes two tiles on, asked for into the second-level cache a line per group (the
            // hardware's own prefetching alone measured about 7% slower, four tiles on the same,
            // eight or the first-level cache slower).
            let ahead = |bytes: &'a [u8], size: usize| bytes.get((t + 2) * size..).unwrap_or(&[]);
            let (source_ahead, tile_ahead) =
                (ahead(source, 2 * TILE_ELEMENTS), ahead(package, TILE_BYTES));
            for g in 0..256 {
                if let Some(line) = source_ahead.get(64 * g..) {
                    _mm_prefetch::<_MM_HINT_T1>(line.as_ptr().cast());
                }
                if g % 3 == 0 {
                    if let Some(line) = tile_ahead.get(64 * (g / 3)..) {
                        _mm_prefetch::<_MM_HINT_T1>(line.as_ptr().cast());
                    }
                }
                let entry = |at: usize| u16::from_le_bytes([tile[at], tile[at + 1]]);
                let d = plane(entry(2 * g), false);
                let m = plane(entry(512 + 2 * g), true);
                let (vd, vm) = (_mm256_set1_ps(d), _mm256_set1_ps(m));
                let mut worst = zero;
                for half in 0..2 {
                    let e = 32 * g + 16 * half;
                    let s: &[u8; 32] = values[2 * e..2 * e + 32].try_into().expect("32 bytes");
                    let c: &[u8; 8] = tile[1024 + e / 2..1024 + e / 2 + 8]
                        .try_into()
                        .expect("8 bytes");
                    // SAFETY: unaligned loads of arrays of exactly the loaded size.
                    let (s, c) = unsafe {
                        (
                            _mm256_loadu_si256(s.as_ptr().cast()),
                            _mm256_cvtepu8_epi32(_mm_loadl_epi64(c.as_ptr().cast())),
                        )
                    };
                    let codes = [_mm256_and_si256(c, low), _mm256_srli_epi32::<4>(c)];
                    let sources = [
                        _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, s)),
                        _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, s)),
                    ];
                    for k in 0..2 {
                        let w = _mm256_fmadd_ps(_mm256_cvtepi32_ps(codes[k]), vd, vm);
                        let diff = _mm256_sub_ps(w, sources[k]);
                        let e = _mm256_castps_si256(_mm256_and_ps(diff, magnitude));
                        worst = _mm256_max_epu32(worst, e);
                        sq_err[k] = _mm256_fmadd_ps(diff, diff, sq_err[k]);
                        sq_src[k] = _mm256_fmadd_ps(sources[k], sources[k], sq_src[k]);
                    }
                }
                // The largest error itself, not in steps: no multiply by `1 / d`.
                largest = _mm256_max_epu32(worst, largest);
            }
        }
        let mut lanes = [0f32; 8];
        let total = _mm256_add_ps(
            _mm256_add_ps(sq_err[0], sq_err[1]),
            _mm256_add_ps(
                _mm256_add_ps(sq_src[0], sq_src[1]),
                _mm256_castsi256_ps(largest),
            ),
        );
        // SAFETY: an unaligned 8-float store into an array of 8.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), total) };
        lanes.iter().map(|&x| f64::from(x)).sum()
    }
}
