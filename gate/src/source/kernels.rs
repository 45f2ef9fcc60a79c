//! The element comparison of `source.q4_1`, one 32-weight group at a time: a vectorizing loop over
//! fixed-size arrays, and the plain scalar loop it must agree with (the test oracle, and the bench's
//! baseline). The whole-tile AVX2 path is the submodule `wide`.
//!
//! A real element passes when `|code * d + m - clamp(source, m, m + 15 d)| <= d` and its source value
//! is finite (spec section 11). The statistics measure the error itself, `w - source`, unclamped: the
//! largest in steps of `d` and the squared sums of the relative RMS. Clamping is the bound's allowance
//! for a quantizer that gives up on outliers, not a smaller error; and the unclamped error is what
//! the whole-tile path (`wide`) measures at its speed.

/// Public only so the bench can time the kernel alone; not part of the gate's API.
#[doc(hidden)]
pub mod wide;

use crate::dtype::{bf16_to_f32, f32_to_bf16};

/// Lanes of the running sums: independent accumulators let the compiler keep them in vector registers
/// (one running float sum would force the elements into order).
const LANES: usize = 8;
pub const GROUP: usize = 32;

/// What one group (or a sum of groups) contributed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Elements out of bound (or whose source value is not finite).
    pub out: u64,
    /// Largest error `|w - s|` in steps of `d` (`e * (1 / d)`), over groups with `d > 0`.
    pub max_steps: f32,
    /// Sum of `(w - s)^2`, and of `s^2`: their ratio's root is the relative RMS error.
    pub sq_err: f64,
    pub sq_src: f64,
}

impl Stats {
    pub fn add(&mut self, other: &Stats) {
        self.out += other.out;
        self.max_steps = self.max_steps.max(other.max_steps);
        self.sq_err += other.sq_err;
        self.sq_src += other.sq_src;
    }
}

fn is_finite_bits(x: f32) -> bool {
    x.to_bits() & 0x7f80_0000 != 0x7f80_0000
}

/// The smallest sum of squared source values a tile's f32 sums are taken at. Below it the squares
/// may have underflowed (a square under 2^-126 loses bits, under 2^-149 vanishes): a grid of tiny
/// values would then read as no error at all. 1e-30 leaves 8192 underflowed squares (at most 2^-150
/// each off) a relative weight under 1e-9.
pub const TRUSTED_SQUARES: f64 = 1e-30;

/// Whether a tile's squared sums, added in f32, are the real ones: finite (no square or sum
/// overflowed, which a finite but huge source value does: `1e20 * 1e20` is infinite in f32) and not
/// small enough to have underflowed. A tile whose sums are not is summed again in f64
/// ([`group_sums_f64`]), where no square of a finite f32 overflows or underflows.
pub fn sums_trusted(sq_err: f64, sq_src: f64) -> bool {
    sq_err.is_finite() && sq_src.is_finite() && sq_src >= TRUSTED_SQUARES
}

/// The squared sums of one group in f64, difference included: exact enough for any finite input
/// (`(2 * f32::MAX)^2` is about 4.6e77).
pub fn group_sums_f64(codes: &[u8], source: &[f32], d: f32, m: f32) -> (f64, f64) {
    let (mut sq_err, mut sq_src) = (0f64, 0f64);
    for (&q, &s) in codes.iter().zip(source) {
        let diff = f64::from(f32::from(q) * d + m) - f64::from(s);
        sq_err += diff * diff;
        sq_src += f64::from(s) * f64::from(s);
    }
    (sq_err, sq_src)
}

/// A header the comparison applies to: a finite positive scale and a finite minimum.
pub fn plain_header(d: f32, m: f32) -> bool {
    d > 0.0 && d.is_finite() && m.is_finite()
}

/// `s` clamped to `[lo, hi]` without `f32::clamp`'s panic when the range is empty or NaN (a broken
/// header's): a NaN bound leaves `s` as it is, and the comparison with `d` then fails.
fn clamp(s: f32, lo: f32, hi: f32) -> f32 {
    if s < lo {
        lo
    } else if s > hi {
        hi
    } else {
        s
    }
}

/// Running per-lane sums over many groups: reduced (`flush`) once per tile, not per group, so the
/// inner loop is all vector work.
#[derive(Clone, Copy, Debug, Default)]
pub struct Lanes {
    out: [u32; LANES],
    max_steps: [f32; LANES],
    sq_err: [f32; LANES],
    sq_src: [f32; LANES],
}

impl Lanes {
    /// Elements out of bound so far (a cheap sum, to notice the group that added some).
    #[inline(always)]
    pub fn out(&self) -> u32 {
        self.out.iter().sum()
    }

    /// Adds the lanes into `stats` and clears them.
    pub fn flush(&mut self, stats: &mut Stats) {
        stats.add(&Stats {
            out: self.out.iter().map(|&o| u64::from(o)).sum(),
            max_steps: self.max_steps.iter().fold(0f32, |a, &b| a.max(b)),
            sq_err: self.sq_err.iter().map(|&x| f64::from(x)).sum(),
            sq_src: self.sq_src.iter().map(|&x| f64::from(x)).sum(),
        });
        *self = Lanes::default();
    }
}

/// One group with a finite positive scale `d` and a finite minimum `m`, vectorized, into `lanes`.
/// Errors are measured in steps as `e * (1 / d)`, one division per group.
#[inline(always)]
pub fn group(lanes: &mut Lanes, codes: &[u8; GROUP], source: &[f32; GROUP], d: f32, m: f32) {
    let hi = m + 15.0 * d;
    let per_step = 1.0 / d;
    for j in 0..GROUP / LANES {
        for l in 0..LANES {
            let i = j * LANES + l;
            let s = source[i];
            let w = f32::from(codes[i]) * d + m;
            let clamped = if s < m {
                m
            } else if s > hi {
                hi
            } else {
                s
            };
            let e = (w - clamped).abs();
            // Written so that a NaN error is out of bound.
            let ok = (e <= d) & is_finite_bits(s);
            lanes.out[l] += u32::from(!ok);
            let diff = w - s;
            let steps = diff.abs() * per_step;
            lanes.max_steps[l] = if steps > lanes.max_steps[l] {
                steps
            } else {
                lanes.max_steps[l]
            };
            lanes.sq_err[l] += diff * diff;
            lanes.sq_src[l] += s * s;
        }
    }
}

/// The same comparison, one element at a time with plain control flow: the oracle.
pub fn group_scalar(codes: &[u8], source: &[f32], d: f32, m: f32) -> Stats {
    let mut stats = Stats::default();
    let mut max_err = 0f32;
    for (&q, &s) in codes.iter().zip(source) {
        let w = f32::from(q) * d + m;
        let e = (w - clamp(s, m, m + 15.0 * d)).abs();
        if !(s.is_finite() && e <= d) {
            stats.out += 1;
        }
        let steps = (w - s).abs() * (1.0 / d);
        if steps > max_err {
            max_err = steps;
        }
        // As group_sums_f64 sums them (one pass here: this loop is the bench's baseline).
        let diff = f64::from(w) - f64::from(s);
        stats.sq_err += diff * diff;
        stats.sq_src += f64::from(s) * f64::from(s);
    }
    stats.max_steps = max_err;
    stats
}

/// Whether element `i` of a group is in bound (the scalar rule, for naming the first offender). No
/// element of a group with a broken header is.
pub fn element_ok(q: u8, s: f32, d: f32, m: f32) -> bool {
    let w = f32::from(q) * d + m;
    plain_header(d, m) && s.is_finite() && (w - clamp(s, m, m + 15.0 * d)).abs() <= d
}

/// A constant group (`d = 0`): every source value must round to the minimum as bf16.
pub fn constant_group(source: &[f32], m: f32) -> Stats {
    let mut stats = Stats::default();
    for &s in source {
        if !(s.is_finite() && round_to_bf16(s) == m) {
            stats.out += 1;
        }
        let diff = f64::from(m) - f64::from(s);
        stats.sq_err += diff * diff;
        stats.sq_src += f64::from(s) * f64::from(s);
    }
    stats
}

/// Rounds an f32 to the nearest bf16, ties to even, returned as f32 (NaN stays NaN).
pub fn round_to_bf16(x: f32) -> f32 {
    bf16_to_f32(f32_to_bf16(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vectorized_loop_agrees_with_the_scalar_one() {
        let mut next = crate::testing::seeded(0x9e37_79b9_7f4a_7c15);
        for round in 0..20_000 {
            let mut codes = [0u8; GROUP];
            let mut source = [0f32; GROUP];
            for i in 0..GROUP {
                codes[i] = (next() % 16) as u8;
                let u = (next() % 2001) as f32 / 1000.0 - 1.0;
                source[i] = u * 0.05;
            }
            if round % 97 == 0 {
                source[round % GROUP] = f32::NAN;
            }
            if round % 89 == 0 {
                source[(round + 3) % GROUP] = f32::INFINITY;
            }
            let d = 0.1 / 15.0 * (1.0 + (next() % 100) as f32 / 100.0);
            let m = -0.05 + (next() % 100) as f32 / 10_000.0;
            let mut lanes = Lanes::default();
            group(&mut lanes, &codes, &source, d, m);
            let mut fast = Stats::default();
            lanes.flush(&mut fast);
            let plain = group_scalar(&codes, &source, d, m);
            assert_eq!(fast.out, plain.out, "round {round}");
            let out = (0..GROUP)
                .filter(|&i| !element_ok(codes[i], source[i], d, m))
                .count() as u64;
            assert_eq!(fast.out, out, "round {round}");
            if source.iter().all(|s| s.is_finite()) {
                assert_eq!(fast.max_steps, plain.max_steps, "round {round}");
                assert!((fast.sq_err - plain.sq_err).abs() <= 1e-5 * plain.sq_err.max(1e-12));
                assert!((fast.sq_src - plain.sq_src).abs() <= 1e-5 * plain.sq_src.max(1e-12));
            }
        }
    }

    #[test]
    fn one_step_is_the_bound() {
        let d = 0.25;
        let m = -1.0;
        // Code 4 dequantizes to 0.0: a source of 0.25 is one step off (in), 0.3 is more (out).
        assert!(element_ok(4, 0.25, d, m));
        assert!(!element_ok(4, 0.3, d, m));
        // Clamped to the range: far below the minimum counts from m.
        assert!(element_ok(0, -50.0, d, m));
        assert!(!element_ok(0, f32::NAN, d, m));
    }

    #[test]
    fn huge_values_are_summed_without_overflow() {
        // 1e38 squared overflows f32; in f64 the sums stay finite and the ratio is near 1.
        let codes = [15u8; GROUP];
        let mut source = [1.0f32; GROUP];
        source[0] = 1e38;
        let stats = group_scalar(&codes, &source, 1.0 / 15.0, 0.0);
        assert!(stats.sq_err.is_finite() && stats.sq_src.is_finite());
        assert!((stats.sq_err / stats.sq_src - 1.0).abs() < 1e-6);
        let (e, s) = group_sums_f64(&codes, &source, 1.0 / 15.0, 0.0);
        assert_eq!((e, s), (stats.sq_err, stats.sq_src));
        let constant = constant_group(&[1e38; GROUP], 0.0);
        assert!(constant.sq_src.is_finite() && constant.sq_err.is_finite());
        assert!(!sums_trusted(f64::INFINITY, 1.0) && !sums_trusted(1.0, f64::NAN));
        assert!(!sums_trusted(0.0, 1e-40) && sums_trusted(0.0, 1.0));
    }

    #[test]
    fn bf16_rounding_is_nearest_even() {
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        // Halfway between 0x3f80 and 0x3f81 rounds to even (0x3f80); just above rounds up.
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
        assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
        assert_eq!(round_to_bf16(f32::MAX), f32::INFINITY);
    }
}
