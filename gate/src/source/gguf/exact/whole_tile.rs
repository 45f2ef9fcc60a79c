//! The exact comparison's common case, a whole tile equal to its 32 rows of blocks, proven with
//! 256-bit vectors. The group-by-group path spends most of its time regrouping: a tile holds each
//! row pair's codes column by column, a block holds one row's, so every 16 rows of a group are an
//! 8 x 16 byte transpose, and every scale and minimum is widened on its own. Here two groups share
//! each transpose (one per 128-bit lane, which is where AVX2's byte unpacks work anyway), and the
//! scales and minimums of 8 rows are gathered and widened together in 16-bit lanes.
//!
//! It only ever proves equality. A differing byte, or a block whose `d` or `m` is zero, subnormal
//! or not finite, answers "not proven", and the group-by-group path decides and names it, so what
//! a report says never depends on this kernel.

use super::BLOCK;
use crate::tile::TILE_BYTES;

/// Proof that the processor runs AVX2 (only [`Avx2::detect`] makes one).
#[derive(Clone, Copy, Debug)]
pub(super) struct Avx2(());

impl Avx2 {
    pub(super) fn detect() -> Option<Avx2> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            return Some(Avx2(()));
        }
        None
    }

    /// True when tile `tile` equals the blocks of its 32 rows, row `r`'s 8 blocks being the 160
    /// bytes at `first + r * stride` of `blocks`: every code, and every `d` and `m` its block's
    /// widened from a normal f16. False says only that this kernel did not prove it.
    pub(super) fn equal(
        self,
        tile: &[u8; TILE_BYTES as usize],
        blocks: &[u8],
        first: usize,
        stride: usize,
        ahead: &mut super::Ahead<'_>,
    ) -> bool {
        // Every byte read is inside the 32 rows' 160 bytes, and the gathers' offsets (up to 15
        // rows from a half's first row) are i32s.
        let in_bounds = stride
            .checked_mul(31)
            .and_then(|last| last.checked_add(first)?.checked_add(8 * BLOCK))
            .is_some_and(|end| end <= blocks.len());
        let gatherable = stride
            .checked_mul(15)
            .is_some_and(|far| i32::try_from(far).is_ok());
        if !in_bounds || !gatherable {
            return false;
        }
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: an `Avx2` exists only where the processor has AVX2, and every byte the
            // kernel reads was just proven inside `blocks` and `tile`.
            unsafe { equal_avx2(tile, blocks, first, stride, ahead) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }
}

/// # Safety
/// The processor has AVX2; `first + 31 * stride + 160 <= blocks.len()` and `15 * stride` is an
/// i32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn equal_avx2(
    tile: &[u8; TILE_BYTES as usize],
    blocks: &[u8],
    first: usize,
    stride: usize,
    ahead: &mut super::Ahead<'_>,
) -> bool {
    use core::arch::x86_64::*;
    // Every pointer below stays in bounds: rows 0..32, groups 0..8 and at most 16 bytes from a
    // block's offset 4 stay inside row `r`'s 160 bytes, which the caller proved inside `blocks`;
    // tile offsets stay inside its 5,120 bytes (planes at 0 and 512, codes from 1,024).
    // SAFETY: row `r` (0..32) starts inside `blocks`, as the caller proved.
    let row = |r: usize| unsafe { blocks.as_ptr().add(first + r * stride) };
    let held = tile.as_ptr();
    // SAFETY: each caller passes two pointers with 16 readable bytes (see above); AVX2 is enabled.
    let two = |high: *const u8, low: *const u8| unsafe {
        _mm256_loadu2_m128i(high.cast::<__m128i>(), low.cast::<__m128i>())
    };
    let (low_nibbles, high_nibbles) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(0xf0u8 as i8));
    let mut differ = _mm256_setzero_si256();
    for half in 0..2 {
        for pair in 0..4 {
            let (c0, c1) = (2 * pair, 2 * pair + 1);
            let mut lo = [_mm256_setzero_si256(); 8];
            let mut hi = [_mm256_setzero_si256(); 8];
            for rp in 0..8 {
                ahead.step();
                let r = 16 * half + 2 * rp;
                // SAFETY: 16 code bytes at offset 4 of groups c0 and c1 (< 8), inside row `r`.
                let qs = |r: usize| unsafe {
                    two(row(r).add(c1 * BLOCK + 4), row(r).add(c0 * BLOCK + 4))
                };
                let (a, b) = (qs(r), qs(r + 1));
                // Columns 0..16 of the pair (a's low nibbles, b's above them), then 16..32.
                lo[rp] = _mm256_or_si256(
                    _mm256_and_si256(a, low_nibbles),
                    _mm256_and_si256(_mm256_slli_epi16(b, 4), high_nibbles),
                );
                hi[rp] = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(a, 4), low_nibbles),
                    _mm256_and_si256(b, high_nibbles),
                );
            }
            // SAFETY: group c0's 256 code bytes of this half, and c1's right after them.
            let region = unsafe { held.add(1024 + half * 2048 + c0 * 256) };
            for (part, columns) in [transpose(&lo), transpose(&hi)].iter().enumerate() {
                for (i, v) in columns.iter().enumerate() {
                    let at = part * 128 + i * 16;
                    // SAFETY: 16 bytes at `at` (< 256) of group c0's region and of c1's after it.
                    let want = unsafe { two(region.add(256 + at), region.add(at)) };
                    differ = _mm256_or_si256(differ, _mm256_xor_si256(*v, want));
                }
            }
        }
    }
    let s = stride as i32;
    // Rows 0..4 and 8..12 of a half, then 4..8 and 12..16: the order 16-bit unpacks of the
    // planes give, lane by lane.
    let first_rows = _mm256_setr_epi32(0, s, 2 * s, 3 * s, 8 * s, 9 * s, 10 * s, 11 * s);
    let second_rows = _mm256_setr_epi32(4 * s, 5 * s, 6 * s, 7 * s, 12 * s, 13 * s, 14 * s, 15 * s);
    for half in 0..2 {
        for c in 0..8 {
            ahead.step();
            // Each block's d then m, as one little-endian u32: 16-bit lanes d, m, d, m, ...
            // SAFETY: group c's block in the half's first row, inside `blocks`.
            let at = unsafe { row(16 * half).add(c * BLOCK) }.cast::<i32>();
            // SAFETY: the 4 bytes at each of rows 0..16 from `at` are inside `blocks`, and the
            // offsets are the i32s the caller proved.
            let gathered = unsafe {
                [
                    _mm256_i32gather_epi32::<1>(at, first_rows),
                    _mm256_i32gather_epi32::<1>(at, second_rows),
                ]
            };
            // The planes hold element `c * 32 + r`: rows 16 * half.. of group c.
            // SAFETY: 32 bytes at 64 * c + 32 * half (< 512) of a 512-byte plane.
            let plane = |offset: usize| unsafe {
                _mm256_loadu_si256(held.add(offset + 64 * c + 32 * half).cast::<__m256i>())
            };
            let (d, m) = (plane(0), plane(512));
            let wanted = [_mm256_unpacklo_epi16(d, m), _mm256_unpackhi_epi16(d, m)];
            for (g, want) in gathered.iter().zip(wanted) {
                let (widened, uncovered) = widen(*g);
                differ = _mm256_or_si256(
                    differ,
                    _mm256_or_si256(_mm256_xor_si256(widened, want), uncovered),
                );
            }
        }
    }
    _mm256_testz_si256(differ, differ) == 1
}

/// Sixteen f16s widened to bf16 (rounded to nearest-even), with a lane of ones where the f16 is
/// zero, subnormal, infinite or NaN, which this path leaves to the group-by-group one. For a
/// normal f16 widening is a rebias of the exponent (112) and bf16's rounding of the 10 mantissa
/// bits to 7, done on the f16's own bits: the carry of a rounding up runs into the exponent.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn widen(
    h: core::arch::x86_64::__m256i,
) -> (core::arch::x86_64::__m256i, core::arch::x86_64::__m256i) {
    use core::arch::x86_64::*;
    let magnitude = _mm256_and_si256(h, _mm256_set1_epi16(0x7fff));
    let sign = _mm256_and_si256(h, _mm256_set1_epi16(0x8000u16 as i16));
    let even = _mm256_and_si256(_mm256_srli_epi16(magnitude, 3), _mm256_set1_epi16(1));
    let rounded = _mm256_srli_epi16(
        _mm256_add_epi16(_mm256_add_epi16(magnitude, _mm256_set1_epi16(3)), even),
        3,
    );
    let widened = _mm256_or_si256(_mm256_add_epi16(rounded, _mm256_set1_epi16(112 << 7)), sign);
    let uncovered = _mm256_or_si256(
        _mm256_cmpgt_epi16(_mm256_set1_epi16(0x0400), magnitude),
        _mm256_cmpgt_epi16(magnitude, _mm256_set1_epi16(0x7bff)),
    );
    (widened, uncovered)
}

/// Rows `rp` (8) by 16 columns, per 128-bit lane, into 16 eight-byte columns: bytes, pairs,
/// quads, as the group-by-group path's transpose does in 128 bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn transpose(m: &[core::arch::x86_64::__m256i; 8]) -> [core::arch::x86_64::__m256i; 8] {
    use core::arch::x86_64::*;
    let b = [
        _mm256_unpacklo_epi8(m[0], m[1]),
        _mm256_unpackhi_epi8(m[0], m[1]),
        _mm256_unpacklo_epi8(m[2], m[3]),
        _mm256_unpackhi_epi8(m[2], m[3]),
        _mm256_unpacklo_epi8(m[4], m[5]),
        _mm256_unpackhi_epi8(m[4], m[5]),
        _mm256_unpacklo_epi8(m[6], m[7]),
        _mm256_unpackhi_epi8(m[6], m[7]),
    ];
    let w = [
        _mm256_unpacklo_epi16(b[0], b[2]),
        _mm256_unpackhi_epi16(b[0], b[2]),
        _mm256_unpacklo_epi16(b[1], b[3]),
        _mm256_unpackhi_epi16(b[1], b[3]),
        _mm256_unpacklo_epi16(b[4], b[6]),
        _mm256_unpackhi_epi16(b[4], b[6]),
        _mm256_unpacklo_epi16(b[5], b[7]),
        _mm256_unpackhi_epi16(b[5], b[7]),
    ];
    [
        _mm256_unpacklo_epi32(w[0], w[4]),
        _mm256_unpackhi_epi32(w[0], w[4]),
        _mm256_unpacklo_epi32(w[1], w[5]),
        _mm256_unpackhi_epi32(w[1], w[5]),
        _mm256_unpacklo_epi32(w[2], w[6]),
        _mm256_unpackhi_epi32(w[2], w[6]),
        _mm256_unpacklo_epi32(w[3], w[7]),
        _mm256_unpackhi_epi32(w[3], w[7]),
    ]
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::super::widened;
    use super::*;

    /// Every f16, sixteen at a time: the vector widening is the converter's where it says it
    /// covers the value, and it covers exactly the normal f16s.
    #[test]
    fn the_vector_widening_is_the_converters_for_every_normal_f16() {
        if Avx2::detect().is_none() {
            return;
        }
        use core::arch::x86_64::*;
        let mut covered = 0;
        for first in (0..=u16::MAX).step_by(16) {
            let input: [u16; 16] = core::array::from_fn(|i| first + i as u16);
            let (mut out, mut flags) = ([0u16; 16], [0u16; 16]);
            // SAFETY: AVX2 was detected; unaligned loads and stores of 16 u16s.
            unsafe {
                let (w, u) = widen(_mm256_loadu_si256(input.as_ptr().cast()));
                _mm256_storeu_si256(out.as_mut_ptr().cast(), w);
                _mm256_storeu_si256(flags.as_mut_ptr().cast(), u);
            }
            for ((&h, &w), &u) in input.iter().zip(&out).zip(&flags) {
                let magnitude = h & 0x7fff;
                let normal = (0x0400..0x7c00).contains(&magnitude);
                assert_eq!(u == 0, normal, "{h:#06x}");
                if normal {
                    assert_eq!(w, widened(h), "{h:#06x}");
                    covered += 1;
                }
            }
        }
        assert_eq!(covered, 2 * (0x7c00 - 0x0400));
    }
}
