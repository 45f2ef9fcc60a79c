//! The whole-tile comparison of `source.q4_1` in AVX2 + FMA, straight from the tile's bytes and the
//! BF16 source rows: the path nearly every tile of a faithful grid takes.
//!
//! It only ever vouches: `Some` means every element of the tile is finite and under 0.999 of a
//! step from its source value (so in bound), with the exact largest error in steps (the same
//! `|w - s| * (1 / d)` as the plain loop) and the squared sums. Anything it cannot vouch for (a
//! group that is not plain, a `1 / d` that overflows, a non-finite source value, an element within
//! rounding reach of the bound) is `None`, and the caller takes the exact path, which counts and
//! names offenders. So a failing grid is as well reported as before, only slower.
//!
//! Why the arithmetic agrees bit for bit with the plain loop: `d` and `m` are bf16 (8 significant
//! bits) and codes 4 bits, so `q * d` and `15 * d` are exact in f32 and one fused multiply-add
//! rounds `q * d + m` exactly as a multiply and an add do.

use crate::tile::{CODES, CODES_PER_HALF, MINIMUMS, SCALES, TILE_BYTES, TILE_COLS, TILE_ROWS};

/// Bytes of one tile row of BF16 source values (256 columns).
pub const ROW_BYTES: usize = 2 * TILE_COLS as usize;
const ROWS: usize = TILE_ROWS as usize;
/// An element this many steps from its dequantized value, or more, is left to the exact path: with
/// `1 / d` finite, an element out of bound (`e > d`) gives `e * (1 / d) >= 1 - 2^-24` whatever the
/// rounding, and clamping only makes an error smaller.
const NEAR_BOUND: f32 = 0.999;

/// What a vouched-for tile adds to its grid.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TileSums {
    pub max_steps: f32,
    pub sq_err: f64,
    pub sq_src: f64,
}

/// Whether this processor runs [`tile`]'s vectorized comparison (AVX2 and FMA).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A tile's 32 rows of BF16 source values (256 columns each).
pub type Rows<'a> = [&'a [u8; ROW_BYTES]; ROWS];

/// A placeholder row, for building [`Rows`] before every row is found.
pub static NO_ROW: [u8; ROW_BYTES] = [0; ROW_BYTES];

/// A worker's reusable room for one tile's decoded planes and regrouped codes (12 KiB: allocated
/// once per worker, never cleared, every byte written before it is read).
pub struct Scratch {
    d: [f32; 256],
    m: [f32; 256],
    per_step: [f32; 256],
    codes: [u8; 8192],
}

impl Default for Scratch {
    fn default() -> Scratch {
        Scratch {
            d: [0.0; 256],
            m: [0.0; 256],
            per_step: [0.0; 256],
            codes: [0; 8192],
        }
    }
}

/// Compares one whole tile (every row and column real) with its 32 BF16 source rows, asking for
/// `next`'s rows (a tile further on) as it goes. `None` when the processor lacks AVX2 or FMA, or
/// the tile needs the exact path.
pub fn tile(
    scratch: &mut Scratch,
    tile: &[u8; TILE_BYTES as usize],
    rows: &Rows<'_>,
    next: Option<&Rows<'_>>,
) -> Option<TileSums> {
    #[cfg(target_arch = "x86_64")]
    if available() {
        // SAFETY: the processor was just found to support both features the function enables.
        return unsafe { x86::tile(scratch, tile, rows, next) };
    }
    let _ = (scratch, tile, rows, next);
    None
}

/// `tile`'s codes regrouped as [`tile`]'s main loop reads them: entry `16 r + w` holds row `r`'s
/// window `w` (columns `16 w + [0 1 2 3 8 9 10 11 4 5 6 7 12 13 14 15]`). `None` without AVX2. Only
/// for the suite's trial of the regrouping, which needs the order pinned apart from the comparison.
#[doc(hidden)]
pub fn regrouped_for_test(tile: &[u8; TILE_BYTES as usize]) -> Option<Vec<[u8; 16]>> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor was just found to support AVX2, the only feature enabled.
        return Some(unsafe { x86::regrouped(tile) });
    }
    let _ = tile;
    None
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::*;
    use core::arch::x86_64::*;

    /// Eight bf16 (16 bytes) widened to f32: a bf16 is the high half of its f32.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn widen(bytes: &[u8; 16]) -> __m256 {
        // SAFETY: an unaligned 16-byte load of a 16-byte array.
        let v = unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) };
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(v)))
    }

    #[inline(always)]
    fn sixteen(bytes: &[u8], at: usize) -> &[u8; 16] {
        bytes[at..at + 16].try_into().expect("16 bytes")
    }

    /// Decodes the planes; `None` unless every group is plain: `d` finite and positive, `m` and
    /// `m + 15 d` finite, and `1 / d` finite too. A subnormal `d` below 2^-128 is a sane header
    /// whose `1 / d` overflows; with it an error of 0 would make `0 * inf`, a NaN among the steps,
    /// where an infinite step must stand. The exact path takes such a tile.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn planes(tile: &[u8; TILE_BYTES as usize], planes: &mut Scratch) -> Option<()> {
        let zero = _mm256_setzero_ps();
        let infinity = _mm256_set1_ps(f32::INFINITY);
        let magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
        let mut plain = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
        for i in 0..32 {
            let d = widen(sixteen(tile, SCALES + 16 * i));
            let m = widen(sixteen(tile, MINIMUMS + 16 * i));
            let hi = _mm256_fmadd_ps(_mm256_set1_ps(15.0), d, m);
            let ok = _mm256_and_ps(
                _mm256_and_ps(
                    _mm256_cmp_ps::<_CMP_GT_OQ>(d, zero),
                    _mm256_cmp_ps::<_CMP_LT_OQ>(d, infinity),
                ),
                _mm256_and_ps(
                    _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_and_ps(m, magnitude), infinity),
                    _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_and_ps(hi, magnitude), infinity),
                ),
            );
            let per_step = _mm256_div_ps(_mm256_set1_ps(1.0), d);
            let ok = _mm256_and_ps(ok, _mm256_cmp_ps::<_CMP_LT_OQ>(per_step, infinity));
            plain = _mm256_and_ps(plain, ok);
            let at = 8 * i;
            // SAFETY: unaligned 8-float stores into arrays of 256, at 8 * i <= 248.
            unsafe {
                _mm256_storeu_ps(planes.d[at..at + 8].as_mut_ptr(), d);
                _mm256_storeu_ps(planes.m[at..at + 8].as_mut_ptr(), m);
                _mm256_storeu_ps(planes.per_step[at..at + 8].as_mut_ptr(), per_step);
            }
        }
        (_mm256_movemask_ps(plain) == 0xff).then_some(())
    }

    /// A tile's codes, one byte (0..15) per element, regrouped by [`regroup`] to match how
    /// [`source_pair`] widens 16 source values: per row and 16-column window, the codes of columns
    /// 0-3 and 8-11, then of 4-7 and 12-15.
    type Codes = [u8; 8192];

    /// Where row `r` (0..32) of window `w` (16 columns, 0..16) starts in [`Codes`].
    #[inline(always)]
    fn codes_at(r: usize, w: usize) -> usize {
        let (half, row) = (r / 16, r % 16);
        let (pair, parity) = (row / 2, row % 2);
        ((half * 16 + w) * 8 + 4 * parity + (pair & 3)) * 32 + 16 * (pair >> 2)
    }

    /// Transposes each pair of 64-byte blocks of codes, stored (column, row pair), to (row pair,
    /// column) and splits the two rows' nibbles. Per block, two in-lane shuffles interleave each
    /// register's two columns and two rounds of word unpacking gather a row pair's eight columns
    /// into one 8-byte word; a round of double-word unpacking then interleaves the two blocks'
    /// words into the order of [`Codes`].
    #[inline]
    #[target_feature(enable = "avx2")]
    fn regroup(tile: &[u8; TILE_BYTES as usize], out: &mut Codes) {
        let interleave = _mm256_setr_epi8(
            0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12,
            5, 13, 6, 14, 7, 15,
        );
        let low = _mm256_set1_epi8(0x0f);
        // Row pairs 0, 1 | 4, 5 and 2, 3 | 6, 7 of one block, eight columns each.
        let block = |at: usize| {
            // Words (c0 c1) per row pair | (c2 c3); and (c4 c5) | (c6 c7).
            let a0 = _mm256_shuffle_epi8(load32(tile, at), interleave);
            let a1 = _mm256_shuffle_epi8(load32(tile, at + 32), interleave);
            // (c0c1 c4c5) per row pair 0..3 | (c2c3 c6c7); then the same for pairs 4..7.
            let l = _mm256_unpacklo_epi16(a0, a1);
            let h = _mm256_unpackhi_epi16(a0, a1);
            let p = _mm256_permute2x128_si256::<0x20>(l, h);
            let q = _mm256_permute2x128_si256::<0x31>(l, h);
            [_mm256_unpacklo_epi16(p, q), _mm256_unpackhi_epi16(p, q)]
        };
        for half in 0..2 {
            for w in 0..16 {
                let at = CODES + half * CODES_PER_HALF + 128 * w;
                let ([a1, a2], [b1, b2]) = (block(at), block(at + 64));
                // Row pairs 0 | 4, 1 | 5, 2 | 6 and 3 | 7, sixteen columns each in window order.
                let pairs = [
                    _mm256_unpacklo_epi32(a1, b1),
                    _mm256_unpackhi_epi32(a1, b1),
                    _mm256_unpacklo_epi32(a2, b2),
                    _mm256_unpackhi_epi32(a2, b2),
                ];
                let base = (half * 16 + w) * 256;
                for (i, v) in pairs.iter().enumerate() {
                    for (parity, nibbles) in [
                        _mm256_and_si256(*v, low),
                        _mm256_and_si256(_mm256_srli_epi16::<4>(*v), low),
                    ]
                    .into_iter()
                    .enumerate()
                    {
                        let at = base + (4 * parity + i) * 32;
                        let dst: &mut [u8; 32] =
                            (&mut out[at..at + 32]).try_into().expect("32 bytes");
                        // SAFETY: an unaligned 32-byte store into a 32-byte array.
                        unsafe { _mm256_storeu_si256(dst.as_mut_ptr().cast(), nibbles) };
                    }
                }
            }
        }
    }

    /// The sum of two vectors' lanes, each widened to f64 first.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn sum_f64(v: [__m256; 2]) -> f64 {
        let wide = |x: __m256| {
            _mm256_add_pd(
                _mm256_cvtps_pd(_mm256_castps256_ps128(x)),
                _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x)),
            )
        };
        let s = _mm256_add_pd(wide(v[0]), wide(v[1]));
        let s = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd::<1>(s));
        _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)))
    }

    /// The largest lane (a NaN lane may or may not win; a NaN result is not vouched for).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn largest_lane(v: __m256) -> f32 {
        let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps::<0b01>(m, m)))
    }

    /// Row `r`'s 16 codes of window `w` as the main loop reads them, every row and window in order.
    #[target_feature(enable = "avx2")]
    pub(super) fn regrouped(tile: &[u8; TILE_BYTES as usize]) -> Vec<[u8; 16]> {
        let mut codes = Box::new([0u8; 8192]);
        regroup(tile, &mut codes);
        (0..32 * 16)
            .map(|i| {
                let at = codes_at(i / 16, i % 16);
                codes[at..at + 16].try_into().expect("16 codes")
            })
            .collect()
    }

    /// Sixteen BF16 source values (32 bytes) as two vectors of f32: columns 0-3 and 8-11, then
    /// 4-7 and 12-15 (a bf16 is the high half of its f32; unpacking below zeros puts it there).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn source_pair(bytes: &[u8], at: usize) -> [__m256; 2] {
        let v = load32(bytes, at);
        let zero = _mm256_setzero_si256();
        [
            _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, v)),
            _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, v)),
        ]
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn load32(bytes: &[u8], at: usize) -> __m256i {
        let chunk: &[u8; 32] = bytes[at..at + 32].try_into().expect("32 bytes");
        // SAFETY: an unaligned 32-byte load of a 32-byte array.
        unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) }
    }

    /// Eight codes widened to 32-bit lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn eight_codes(codes: &Codes, at: usize) -> __m256i {
        let chunk: &[u8; 8] = codes[at..at + 8].try_into().expect("8 bytes");
        // SAFETY: an 8-byte load of an 8-byte array.
        _mm256_cvtepu8_epi32(unsafe { _mm_loadl_epi64(chunk.as_ptr().cast()) })
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn tile(
        p: &mut Scratch,
        tile: &[u8; TILE_BYTES as usize],
        rows: &Rows<'_>,
        next: Option<&Rows<'_>>,
    ) -> Option<TileSums> {
        planes(tile, p)?;
        regroup(tile, &mut p.codes);
        let codes = &p.codes;
        let magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
        let mut steps = _mm256_setzero_ps();
        let mut sq_err = [_mm256_setzero_ps(); 2];
        let mut sq_src = [_mm256_setzero_ps(); 2];
        for (r, row) in rows.iter().enumerate() {
            // Rows of the tiles ahead into the second-level cache, and this tile's row two on into
            // the first: each a row per row, as a burst of requests would stall on the memory
            // system's queue. Hints: they read nothing and cannot fault.
            if let Some(next) = next {
                for line in next[r].chunks_exact(64) {
                    _mm_prefetch::<_MM_HINT_T1>(line.as_ptr().cast());
                }
            }
            if let Some(soon) = rows.get(r + 2) {
                for line in soon.chunks_exact(64) {
                    _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast());
                }
            }
            for c in 0..8 {
                let at = 32 * c + r;
                let d = _mm256_set1_ps(p.d[at]);
                let m = _mm256_set1_ps(p.m[at]);
                // Errors are non-negative floats, whose bits order as integers: the running
                // maximum takes an integer lane, leaving the float adders to the rest.
                let mut worst = _mm256_setzero_si256();
                for j in 0..2 {
                    let at = codes_at(r, 2 * c + j);
                    let sources = source_pair(&row[..], 64 * c + 32 * j);
                    for (k, s) in sources.into_iter().enumerate() {
                        let q = eight_codes(codes, at + 8 * k);
                        let w = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), d, m);
                        let diff = _mm256_sub_ps(w, s);
                        let e = _mm256_and_ps(diff, magnitude);
                        worst = _mm256_max_epu32(worst, _mm256_castps_si256(e));
                        sq_err[k] = _mm256_fmadd_ps(diff, diff, sq_err[k]);
                        sq_src[k] = _mm256_fmadd_ps(s, s, sq_src[k]);
                    }
                }
                let per_step = _mm256_set1_ps(p.per_step[at]);
                let worst = _mm256_castsi256_ps(worst);
                // `max` returns its second operand when either is NaN: a NaN product (none can
                // arise with `1 / d` finite) is passed over, as the plain loop's `>` passes it.
                steps = _mm256_max_ps(_mm256_mul_ps(worst, per_step), steps);
            }
        }
        let max_steps = largest_lane(steps);
        let (sq_err, sq_src) = (sum_f64(sq_err), sum_f64(sq_src));
        // A NaN or infinite source value (or a square too large for f32) leaves a sum non-finite,
        // and squares of tiny values underflow: the exact path sums those again in f64. Steps that
        // are NaN fail the comparison and go to the exact path too.
        let vouched =
            crate::source::kernels::sums_trusted(sq_err, sq_src) && max_steps < NEAR_BOUND;
        vouched.then_some(TileSums {
            max_steps,
            sq_err,
            sq_src,
        })
    }
}
