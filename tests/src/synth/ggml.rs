//! ggml's q4_1 importance-matrix quantizer, ported to Rust for [`Quantizer::GgmlImatrix`].
//!
//! From ggml-org/llama.cpp (MIT licence), `ggml/src/ggml-quants.c`: `nearest_int`, `make_qkx3_quants` and
//! `quantize_row_q4_1_impl` (the path `quantize_q4_1` takes when it is given an importance matrix).
//! Spec section 11 says a faithful package converted through ggml's importance-matrix path must pass
//! `source.q4_1`; the generator's other quantizers only approximate that path ([`Quantizer::Refit`]
//! refits `d` and `m` to min/max codes), so this is the path itself, computed in `f32` exactly as the C
//! code computes it: the same operations in the same order, the same sequential `f32` accumulations,
//! `nearest_int`'s magic-number rounding, no fused multiply-adds. The unit tests below hold results of
//! the C code (a few groups in full, a digest of 2048 more), so the port cannot drift from it silently.
//!
//! "As the C code computes" means as C's semantics say, which is what a compiler gives without
//! contracting `a * b + c` into a fused multiply-add. A ggml built to contract (gcc's default once
//! `-march=native` enables FMA) rounds some sums differently: of 129 568 test groups, most then
//! differ in the last bits of their `f32` `d` or `m`, and 175 (0.14%) in a code or a bf16 `d` or `m`.
//!
//! [`Quantizer::GgmlImatrix`]: super::source::Quantizer::GgmlImatrix
//! [`Quantizer::Refit`]: super::source::Quantizer::Refit

/// Weights per q4_1 group (`QK4_1`).
pub const QK4_1: usize = 32;

/// One q4_1 group as ggml's quantizer leaves it, before its `d` and `m` are stored at lower precision:
/// value `j` is approximated by `codes[j] * d + m`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Block {
    pub d: f32,
    /// The group's minimum (`y[ib].m`, the negated `the_min` of `make_qkx3_quants`).
    pub m: f32,
    pub codes: [u8; QK4_1],
}

/// ggml's `nearest_int`: round to nearest, ties to even, by adding 1.5 * 2^23 and reading the
/// mantissa (valid for `|fval| <= 4194303`).
fn nearest_int(fval: f32) -> i32 {
    debug_assert!(fval.abs() <= 4_194_303.0);
    let val = fval + 12_582_912.0;
    (val.to_bits() as i32 & 0x007f_ffff) - 0x0040_0000
}

/// ggml's `make_qkx3_quants` with non-null `weights` (the only way `quantize_row_q4_1_impl` calls
/// it): codes in `0..=nmax` into `l`, returns `(scale, the_min)` with `the_min` the negated minimum.
/// `laux` is scratch, as in C.
#[allow(clippy::too_many_arguments)] // ggml's signature
pub fn make_qkx3_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l: &mut [u8],
    laux: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
) -> (f32, f32) {
    let n = x.len();
    assert!(weights.len() == n && l.len() == n && laux.len() == n && n > 0);
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max <= min {
        l.fill(0);
        return (0.0, -min);
    }
    let nmax_f = nmax as f32;
    let mut iscale = nmax_f / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_mad = 0.0f32;
    for i in 0..n {
        let li = nearest_int(iscale * (x[i] - min));
        l[i] = li.clamp(0, nmax) as u8;
        let mut diff = scale * f32::from(l[i]) + min - x[i];
        diff = if use_mad { diff.abs() } else { diff * diff };
        best_mad += weights[i] * diff;
    }
    if nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax_f) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let v = iscale * (x[i] - min);
            // MIN(v, nmax) as the C macro evaluates it.
            let li = if v > 0.0 {
                nearest_int(if v < nmax_f { v } else { nmax_f })
            } else {
                0
            };
            laux[i] = li as u8;
            let w = weights[i];
            let lf = li as f32;
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        let d = sum_w * sum_l2 - sum_l * sum_l;
        if d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut mad = 0.0f32;
            for i in 0..n {
                let mut diff = this_scale * f32::from(laux[i]) + this_min - x[i];
                diff = if use_mad { diff.abs() } else { diff * diff };
                mad += weights[i] * diff;
            }
            if mad < best_mad {
                l.copy_from_slice(laux);
                best_mad = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// `sigma2` of `quantize_row_q4_1_impl`: the mean of `x^2` over the whole row, summed in order.
pub fn row_sigma2(row: &[f32]) -> f32 {
    let mut sum_x2 = 0.0f32;
    for &x in row {
        sum_x2 += x * x;
    }
    sum_x2 / row.len() as f32
}

/// One group of `quantize_row_q4_1_impl`: its 32 values, their importance `qw`, and the row's
/// [`row_sigma2`].
pub fn quantize_group(xb: &[f32; QK4_1], qw: &[f32; QK4_1], sigma2: f32) -> Block {
    let mut weight = [0f32; QK4_1];
    for j in 0..QK4_1 {
        weight[j] = qw[j] * (sigma2 + xb[j] * xb[j]).sqrt();
    }
    let (mut l, mut laux) = ([0u8; QK4_1], [0u8; QK4_1]);
    let (d, the_min) = make_qkx3_quants(15, xb, &weight, &mut l, &mut laux, -0.9, 0.05, 36, false);
    Block {
        d,
        m: -the_min,
        codes: l,
    }
}

/// `quantize_row_q4_1_impl` over one row (its length a multiple of 32) with its importance
/// `quant_weights` (one per column), `d` and `m` left in `f32` (ggml then stores them as f16).
pub fn quantize_row_q4_1(row: &[f32], quant_weights: &[f32]) -> Vec<Block> {
    assert!(row.len().is_multiple_of(QK4_1) && quant_weights.len() == row.len());
    let sigma2 = row_sigma2(row);
    row.chunks_exact(QK4_1)
        .zip(quant_weights.chunks_exact(QK4_1))
        .map(|(xb, qw)| {
            quantize_group(
                xb.try_into().expect("32 values"),
                qw.try_into().expect("32 weights"),
                sigma2,
            )
        })
        .collect()
}

pub(crate) mod tests {
    use super::*;

    unit_tests![
        agrees_with_ggml_c_bit_for_bit,
        agrees_with_ggml_c_on_many_rows,
        nearest_int_rounds_half_to_even,
        the_quantizer_writes_ggml_blocks_into_tiles
    ];

    /// Exact, portable inputs: multiples of 2^-16 in (-1/32, 1/32) from a multiplicative hash.
    fn hashed(len: usize, salt: u32) -> Vec<f32> {
        (0..len as u32)
            .map(|i| {
                let h = (i ^ salt).wrapping_mul(2_654_435_761) >> 21;
                (h as f32 - 1023.5) / 32768.0
            })
            .collect()
    }

    /// The rows and importances pinned below: a uniform-importance row of four groups (plain; one
    /// outlier at 8 times the spread; all positive, so the minimum is held at 0; constant, so `d` is 0),
    /// a row of two groups under an uneven importance, and one whose importance is 0 for every fifth
    /// column (candidate ranges then tie, and only the first of equals may win).
    fn fixture() -> Vec<(Vec<f32>, Vec<f32>)> {
        let mut a = hashed(128, 0);
        a[40] = 0.25;
        for v in &mut a[64..96] {
            *v = v.abs() + 0.001;
        }
        a[96..].fill(-0.007_812_5);
        let b = hashed(64, 0x5bd1);
        let qw = (0..64).map(|i| 0.25 * (1 + (i * 7) % 13) as f32).collect();
        let c = hashed(64, 0x0077);
        let zeros = (0..64)
            .map(|i| if i % 5 == 0 { 0.0 } else { 1.0 })
            .collect();
        vec![(a, vec![1.0; 128]), (b, qw), (c, zeros)]
    }

    /// `d` and `m` (f32 bits) and the 32 codes (hex digits) of each group of [`fixture`]'s rows, as
    /// ggml's C code computes them: `quantize_row_q4_1_impl` and `make_qkx3_quants` copied verbatim
    /// from ggml/src/ggml-quants.c, compiled by gcc 12 for x86-64 (no fused multiply-adds), before
    /// the f16 store.
    const FROM_GGML_C: [&[(u32, u32, &str)]; 3] = [
        &[
            (0x3b85_3f2c, 0xbcf4_c57f, "093d71b5e82c60a4d72b5f93c71a4e82"),
            (0x3c97_5185, 0xbce1_9f1a, "21021310f13203102132021321310213"),
            (0x3b07_87af, 0x0000_0000, "2a93f58c1c85f39a2e67d1b94f48b1d7"),
            (0x0000_0000, 0xbc00_0000, "00000000000000000000000000000000"),
        ],
        &[
            (0x3b88_1946, 0xbd01_911f, "d4286b9fd3175a8e06497db1e5396ca1"),
            (0x3b7c_8db4, 0xbcf2_1360, "a0e4286c9fd3175bc2064a7eb1f5397d"),
        ],
        &[
            (0x3b7b_699f, 0xbcf5_6910, "9f5b17d38e4a06c2a07d39f59f6c28e4"),
            (0x3b82_f4c5, 0xbcfa_9d62, "c28e4a17b17d4a06e4a06c38d39f5b28"),
        ],
    ];

    fn agrees_with_ggml_c_bit_for_bit() {
        for ((x, qw), expected) in fixture().iter().zip(FROM_GGML_C) {
            let blocks = quantize_row_q4_1(x, qw);
            assert_eq!(blocks.len(), expected.len());
            for (ib, (block, &(d, m, codes))) in blocks.iter().zip(expected).enumerate() {
                let codes: Vec<u8> = codes
                    .chars()
                    .map(|c| c.to_digit(16).expect("a hex digit") as u8)
                    .collect();
                assert_eq!(
                    (block.d.to_bits(), block.m.to_bits(), &block.codes[..]),
                    (d, m, &codes[..]),
                    "group {ib}: {block:?}"
                );
            }
        }
    }

    /// splitmix64: a portable stream for [`many_rows`].
    fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// 64 bf16-exact rows of 1024 values (2048 groups), drawn with integer arithmetic and exact float
    /// operations only, so any platform draws the same: roughly normal, each row with its own spread;
    /// every third row with one outlier (6 to 21 times the spread) per group; every fourth row under
    /// an uneven importance (quarters from 1/4 to 4), the others under a uniform one.
    fn many_rows() -> Vec<(Vec<f32>, Vec<f32>)> {
        let mut state = 0x0df1_a5a0_u64;
        (0..64)
            .map(|row| {
                let sigma = 0.02 * (1.0 + (row % 7) as f32 / 8.0);
                let mut x: Vec<f32> = (0..1024)
                    .map(|_| {
                        let h = splitmix(&mut state);
                        let sum =
                            (h & 0xffff) + ((h >> 16) & 0xffff) + ((h >> 32) & 0xffff) + (h >> 48);
                        let normal = (sum as f32 / 65536.0 - 2.0) * 1.732_050_8;
                        half::bf16::from_f32(normal * sigma).to_f32()
                    })
                    .collect();
                if row % 3 == 0 {
                    for group in x.chunks_exact_mut(32) {
                        let h = splitmix(&mut state);
                        let size = (6 + h % 16) as f32 * if h & 0x100 == 0 { 1.0 } else { -1.0 };
                        group[(h >> 32) as usize % 32] =
                            half::bf16::from_f32(size * sigma).to_f32();
                    }
                }
                let qw = (0..1024)
                    .map(|_| {
                        if row % 4 == 3 {
                            (1 + splitmix(&mut state) % 16) as f32 / 4.0
                        } else {
                            1.0
                        }
                    })
                    .collect();
                (x, qw)
            })
            .collect()
    }

    /// FNV-1a over each group's `d` and `m` (f32 bits, little-endian) and its 32 codes, in order.
    fn digest(blocks: impl IntoIterator<Item = Block>) -> u64 {
        let mut h = 0xcbf2_9ce4_8422_2325_u64;
        for b in blocks {
            let bytes =
                b.d.to_le_bytes()
                    .into_iter()
                    .chain(b.m.to_le_bytes())
                    .chain(b.codes);
            for byte in bytes {
                h = (h ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }

    /// [`digest`] of [`many_rows`] quantized by ggml's C code (compiled as for [`FROM_GGML_C`]): a
    /// change in any of 2048 groups' bits shows.
    const MANY_ROWS_FROM_GGML_C: u64 = 0xa42f_887d_6060_c2c5;

    fn agrees_with_ggml_c_on_many_rows() {
        let blocks = many_rows()
            .iter()
            .flat_map(|(x, qw)| quantize_row_q4_1(x, qw))
            .collect::<Vec<_>>();
        assert_eq!(blocks.len(), 2048);
        assert_eq!(digest(blocks), MANY_ROWS_FROM_GGML_C);
    }

    fn nearest_int_rounds_half_to_even() {
        for (v, n) in [
            (0.5, 0),
            (1.5, 2),
            (2.5, 2),
            (-0.5, 0),
            (-1.5, -2),
            (14.49, 14),
            (7.0, 7),
        ] {
            assert_eq!(nearest_int(v), n, "{v}");
        }
    }

    /// `quantize` stores each group's `d` and `m` rounded to bf16 and its codes where the tile layout
    /// puts them, one row at a time (a matrix of two row blocks, the second partial, and of a partial
    /// column block).
    fn the_quantizer_writes_ggml_blocks_into_tiles() {
        use super::super::source::{quantize, source_matrix, Quantizer};
        use dflash_gate::__private::tile::{GridGeometry, TILE_BYTES};
        use half::bf16;
        let (n, k) = (40u64, 320u64);
        let values = source_matrix(n, k, 7);
        let tiles = quantize(n, k, &values, Quantizer::GgmlImatrix);
        let g = GridGeometry::new(n, k).expect("grid");
        let ones = vec![1.0; k as usize];
        for (row, source) in values.chunks_exact(k as usize).enumerate() {
            for (b, block) in quantize_row_q4_1(source, &ones).iter().enumerate() {
                let t = (row / 32) * g.col_blocks as usize + b / 8;
                let tile = &tiles[t * TILE_BYTES as usize..][..TILE_BYTES as usize];
                let (c, r) = (b % 8, row % 32);
                let plane =
                    |at: usize| bf16::from_bits(u16::from_le_bytes([tile[at], tile[at + 1]]));
                assert_eq!(plane(2 * (c * 32 + r)), bf16::from_f32(block.d));
                assert_eq!(plane(512 + 2 * (c * 32 + r)), bf16::from_f32(block.m));
                for (j, &q) in block.codes.iter().enumerate() {
                    let byte = tile[1024 + (r / 16) * 2048 + (c * 32 + j) * 8 + (r % 16) / 2];
                    let code = if r % 2 == 0 { byte & 0x0f } else { byte >> 4 };
                    assert_eq!(code, q, "row {row}, group {b}, code {j}");
                }
            }
        }
    }
}
