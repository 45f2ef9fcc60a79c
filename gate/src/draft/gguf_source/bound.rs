//! The element bound a GGUF draft's quantized tensor is held to against its source, a block at a
//! time: each dequantized element within one step of its source value clamped to the block's range,
//! and the squared errors and squared source values summed for the relative RMS error.
//!
//! It is the comparison's whole arithmetic, run once for every element of every quantized tensor, so
//! it has a vector kernel (AVX2) beside the scalar definition; a unit test holds the two to the same
//! bits.

/// What the comparison adds up over a tensor: the squared errors and squared source values in four
/// lanes each (element `e` of a block in lane `e % 4`), so that no addition waits on the one before;
/// the largest error in steps; how many elements are out of bound.
pub(super) struct Sums {
    pub(super) err2: [f64; 4],
    pub(super) ref2: [f64; 4],
    pub(super) max_steps: f32,
    pub(super) out: u64,
    /// Whether the processor has AVX2, asked once per tensor rather than once per run.
    wide: bool,
}

impl Sums {
    /// Sums that take the vector kernel where `wide` allows it and the processor has AVX2.
    pub(super) fn new(wide: bool) -> Self {
        #[cfg(target_arch = "x86_64")]
        let wide = wide && std::arch::is_x86_feature_detected!("avx2");
        #[cfg(not(target_arch = "x86_64"))]
        let wide = {
            let _ = wide;
            false
        };
        Sums {
            err2: [0.0; 4],
            ref2: [0.0; 4],
            max_steps: 0.0,
            out: 0,
            wide,
        }
    }

    /// Elements against their runs' steps and ranges (`spans[i]` covers elements
    /// `i * run..(i + 1) * run`, a chunk of whole blocks, so that element `e` of a block is in lane
    /// `e % 4`); whether any is out of bound. A run's largest error is divided by its step once,
    /// which is the largest of its elements' ratios (a division by a positive step keeps their
    /// order).
    pub(super) fn runs(
        &mut self,
        spans: &[(f32, f32, f32)],
        run: usize,
        xs: &[f32],
        ys: &[f32],
    ) -> bool {
        let whole = run > 0
            && run.is_multiple_of(4)
            && xs.len() == ys.len()
            && Some(xs.len()) == spans.len().checked_mul(run);
        #[cfg(target_arch = "x86_64")]
        if self.wide && whole {
            // SAFETY: `wide` is true only where the processor was found to support AVX2.
            return unsafe { self.runs_avx2(spans, run, xs, ys) } > 0;
        }
        let _ = whole;
        self.runs_scalar(spans, run, xs, ys) > 0
    }

    /// [`Sums::runs`] a run at a time: the definition, and the kernel where AVX2 is missing.
    fn runs_scalar(
        &mut self,
        spans: &[(f32, f32, f32)],
        run: usize,
        xs: &[f32],
        ys: &[f32],
    ) -> u64 {
        let mut out = 0;
        for (&(step, lo, hi), (xs, ys)) in spans.iter().zip(xs.chunks(run).zip(ys.chunks(run))) {
            let (largest, beyond) = run_scalar(
                Span { step, lo, hi },
                xs,
                ys,
                &mut self.err2,
                &mut self.ref2,
            );
            out += beyond;
            self.largest(largest, step);
        }
        self.out += out;
        out
    }

    /// A run's largest error, in steps, against the largest so far.
    #[inline(always)]
    fn largest(&mut self, largest: f32, step: f32) {
        self.max_steps = self
            .max_steps
            .max(if step > 0.0 { largest / step } else { 0.0 });
    }

    /// [`Sums::runs_scalar`] with four elements in a vector, for runs of whole fours: the same
    /// operations in the same order (the squares multiplied and added apart, not fused, so each
    /// sum rounds as the scalar one does), and the clamp written as two selects that leave a NaN
    /// source value a NaN, as [`error`] does.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn runs_avx2(&mut self, spans: &[(f32, f32, f32)], run: usize, xs: &[f32], ys: &[f32]) -> u64 {
        use core::arch::x86_64::*;
        let magnitude = _mm_castsi128_ps(_mm_set1_epi32(0x7fff_ffff));
        // SAFETY: unaligned loads of four f64s from four-element arrays.
        let (mut e2, mut r2) = unsafe {
            (
                _mm256_loadu_pd(self.err2.as_ptr()),
                _mm256_loadu_pd(self.ref2.as_ptr()),
            )
        };
        let mut beyond = _mm_setzero_si128();
        for (&(step, lo, hi), (xs, ys)) in spans
            .iter()
            .zip(xs.chunks_exact(run).zip(ys.chunks_exact(run)))
        {
            let (lo4, hi4, step4) = (_mm_set1_ps(lo), _mm_set1_ps(hi), _mm_set1_ps(step));
            let mut largest = _mm_setzero_ps();
            for (x, y) in xs.chunks_exact(4).zip(ys.chunks_exact(4)) {
                // SAFETY: unaligned loads of four f32s from four-element chunks.
                let (x, y) = unsafe { (_mm_loadu_ps(x.as_ptr()), _mm_loadu_ps(y.as_ptr())) };
                let d = _mm256_cvtps_pd(_mm_sub_ps(y, x));
                e2 = _mm256_add_pd(e2, _mm256_mul_pd(d, d));
                let wide_x = _mm256_cvtps_pd(x);
                r2 = _mm256_add_pd(r2, _mm256_mul_pd(wide_x, wide_x));
                // Below the range: its low end; above: its high end; otherwise (a NaN too) itself.
                let clamped = _mm_blendv_ps(x, lo4, _mm_cmplt_ps(x, lo4));
                let clamped = _mm_blendv_ps(clamped, hi4, _mm_cmpgt_ps(clamped, hi4));
                let err = _mm_and_ps(_mm_sub_ps(y, clamped), magnitude);
                // MAXPS keeps its second operand when the first is a NaN, as `f32::max` keeps the
                // number.
                largest = _mm_max_ps(err, largest);
                // Not within the step (a NaN error is not): all ones, which is minus one.
                beyond = _mm_sub_epi32(beyond, _mm_castps_si128(_mm_cmpnle_ps(err, step4)));
            }
            // No lane is a NaN, so the order the lanes are taken in does not matter.
            let pairs = _mm_max_ps(largest, _mm_movehl_ps(largest, largest));
            let one = _mm_max_ss(pairs, _mm_shuffle_ps::<1>(pairs, pairs));
            self.largest(_mm_cvtss_f32(one), step);
        }
        let mut counts = [0u32; 4];
        // SAFETY: unaligned stores into four-element arrays.
        unsafe {
            _mm256_storeu_pd(self.err2.as_mut_ptr(), e2);
            _mm256_storeu_pd(self.ref2.as_mut_ptr(), r2);
            _mm_storeu_si128(counts.as_mut_ptr().cast(), beyond);
        }
        let out = counts.iter().map(|&c| u64::from(c)).sum::<u64>();
        self.out += out;
        out
    }
}

/// The first element out of bound of a chunk [`Sums::runs`] found one in.
pub(super) fn first_out(
    spans: &[(f32, f32, f32)],
    run: usize,
    xs: &[f32],
    ys: &[f32],
) -> Option<usize> {
    xs.iter().zip(ys).enumerate().position(|(e, (&x, &y))| {
        let (step, lo, hi) = spans
            .get(e.checked_div(run).unwrap_or(usize::MAX))
            .copied()
            .unwrap_or((f32::NAN, 0.0, 0.0));
        !within(error(x, y, lo, hi), step)
    })
}

/// A run's step and the range its block can represent.
#[derive(Clone, Copy)]
struct Span {
    step: f32,
    lo: f32,
    hi: f32,
}

/// One element into lane `l`: its squares summed, its error against the largest, whether it is
/// out of bound. The definition both kernels keep to.
#[inline(always)]
fn element(
    span: Span,
    l: usize,
    x: f32,
    y: f32,
    err2: &mut [f64; 4],
    ref2: &mut [f64; 4],
    largest: &mut [f32; 4],
) -> u64 {
    let d = f64::from(y - x);
    err2[l] += d * d;
    ref2[l] += f64::from(x) * f64::from(x);
    let err = error(x, y, span.lo, span.hi);
    // A NaN error (a NaN element) is never the largest.
    largest[l] = largest[l].max(err);
    u64::from(!within(err, span.step))
}

/// The elements past the last whole four (none, for every ggml type), all into lane 0.
#[inline(always)]
fn tail(
    span: Span,
    xs: &[f32],
    ys: &[f32],
    err2: &mut [f64; 4],
    ref2: &mut [f64; 4],
    largest: &mut [f32; 4],
) -> u64 {
    let whole = xs.len().min(ys.len()) / 4 * 4;
    let mut out = 0;
    for (&x, &y) in xs[whole..].iter().zip(&ys[whole..]) {
        out += element(span, 0, x, y, err2, ref2, largest);
    }
    out
}

/// A run, four elements at a time: the definition, and the kernel where AVX2 is missing.
fn run_scalar(
    span: Span,
    xs: &[f32],
    ys: &[f32],
    err2: &mut [f64; 4],
    ref2: &mut [f64; 4],
) -> (f32, u64) {
    let mut largest = [0f32; 4];
    let mut out = 0u64;
    let whole = xs.len().min(ys.len()) / 4 * 4;
    for (x, y) in xs[..whole].chunks_exact(4).zip(ys[..whole].chunks_exact(4)) {
        for l in 0..4 {
            out += element(span, l, x[l], y[l], err2, ref2, &mut largest);
        }
    }
    out += tail(span, xs, ys, err2, ref2, &mut largest);
    (largest.into_iter().fold(0.0, f32::max), out)
}

/// How far the dequantized `y` is from the source `x` clamped to its block's range `lo..=hi`. A
/// NaN source value stays NaN (`max` and `min` would turn it into an end of the range, which a value
/// near that end would then match).
#[inline(always)]
fn error(x: f32, y: f32, lo: f32, hi: f32) -> f32 {
    let clamped = if x.is_nan() { x } else { x.max(lo).min(hi) };
    (y - clamped).abs()
}

/// Whether an element's error is within its step, written so that a NaN (a value or a scale) is
/// not.
fn within(err: f32, step: f32) -> bool {
    err <= step
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values that find the edges: NaNs, infinities, zeros of both signs, the range's ends.
    fn value(next: &mut impl FnMut() -> u32, lo: f32, hi: f32) -> f32 {
        match next() % 16 {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => f32::NEG_INFINITY,
            3 => -0.0,
            4 => 0.0,
            5 => lo,
            6 => hi,
            _ => (next() as f32 / u32::MAX as f32 - 0.5) * 8.0,
        }
    }

    /// The vector kernel gives the scalar one's sums, largest ratio and count bit for bit, over
    /// chunks of runs whose spans include NaN, infinite, zero and negative steps and ranges.
    #[test]
    fn the_vector_runs_are_the_scalar_runs() {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            let mut random = crate::testing::seeded(0x2545_f491);
            let mut next = move || random() as u32;
            for round in 0..500 {
                let run = [16, 32][round % 2];
                let spans: Vec<(f32, f32, f32)> = (0..1 + round % 5)
                    .map(|_| {
                        let (a, b) = (value(&mut next, -1.0, 1.0), value(&mut next, -1.0, 1.0));
                        (value(&mut next, 0.0, 0.5), a.min(b), a.max(b))
                    })
                    .collect();
                let (mut xs, mut ys) = (Vec::new(), Vec::new());
                for &(_, lo, hi) in &spans {
                    for _ in 0..run {
                        xs.push(value(&mut next, lo, hi));
                        ys.push(value(&mut next, lo, hi));
                    }
                }
                let start = [f64::from(next()), 1.5, -0.0, 3.25];
                let (mut scalar, mut vector) = (Sums::new(true), Sums::new(true));
                (scalar.err2, scalar.ref2, vector.err2, vector.ref2) = (start, start, start, start);
                let s = scalar.runs_scalar(&spans, run, &xs, &ys);
                // SAFETY: the processor was just found to support AVX2.
                let v = unsafe { vector.runs_avx2(&spans, run, &xs, &ys) };
                assert_eq!(s, v, "count, round {round}");
                assert_eq!(scalar.out, vector.out, "count, round {round}");
                // Bit for bit, except that a NaN is any NaN: which operand's NaN an addition
                // keeps is the instruction's choice, and no outcome reads a NaN's sign.
                let bits = |v: [f64; 4]| v.map(|x| if x.is_nan() { 0 } else { x.to_bits() });
                assert_eq!(
                    bits(scalar.err2),
                    bits(vector.err2),
                    "squared errors, round {round}"
                );
                assert_eq!(
                    bits(scalar.ref2),
                    bits(vector.ref2),
                    "squared source, round {round}"
                );
                assert_eq!(
                    scalar.max_steps.to_bits(),
                    vector.max_steps.to_bits(),
                    "largest ratio, round {round}"
                );
            }
        }
    }

    /// The largest ratio, taken a run at a time, is the largest of the elements' own ratios, the
    /// count is the elements out of bound and the first is the first, on either kernel.
    #[test]
    fn runs_are_their_elements() {
        let spans = [(0.25f32, -1.0f32, 1.0f32), (0.5, -2.0, 0.0)];
        let xs: Vec<f32> = (0..32).map(|i| i as f32 / 8.0 - 2.0).collect();
        let ys: Vec<f32> = xs.iter().map(|x| x + 0.3).collect();
        for wide in [false, true] {
            let mut sums = Sums::new(wide);
            assert!(sums.runs(&spans, 16, &xs, &ys));
            let (mut largest, mut out, mut first) = (0f32, 0u64, None);
            for (e, (&x, &y)) in xs.iter().zip(&ys).enumerate() {
                let (step, lo, hi) = spans[e / 16];
                let err = error(x, y, lo, hi);
                largest = largest.max(err / step);
                if !within(err, step) {
                    out += 1;
                    first = first.or(Some(e));
                }
            }
            assert_eq!(sums.max_steps, largest);
            assert_eq!(sums.out, out);
            assert!(out > 0);
            assert_eq!(first_out(&spans, 16, &xs, &ys), first);
        }
    }
}
