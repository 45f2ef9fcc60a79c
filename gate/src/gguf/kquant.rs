//! ggml's dequantization of the K-quants a converter writes most (`dequantize_row_q4_K`, `_q5_K`,
//! `_q6_K` in `ggml-quants.c`), bit for bit: each value is computed in `f32` with the C code's
//! operations in its order and no fused multiply-add (`d * sc` rounds, then `* q`, then `- dmin *
//! m`), which is also what gguf-py's numpy `dequantize` computes.
//!
//! This is the fast path: each super-block's sub-block scales are unpacked first (the 6-bit pairs of
//! Q4_K and Q5_K by the three-row layout of the 12 bytes, not `get_scale_min_k4`'s two cases), and
//! each sub-block is then one branch-free loop over its elements, which the compiler vectorizes.
//! The `oracle` module (tests only) is the C code's loops transcribed; a property test holds the two to each other on
//! random blocks, and the suite holds this one to gguf-py.
//!
//! It is apart from [`super::dequantize`] because `source.q4_1` dequantizes every type that
//! [`super::supported`] names, and a K-quant there is left undecided until that check says how a
//! K-quant compares to a Q4_1 grid.

use super::{DequantError, GgmlType};
use half::f16;

/// Elements per K-quant super-block (`QK_K`).
const QK_K: usize = 256;

/// Whether [`dequantize_k_quant`] turns this type into values: Q4_K, Q5_K and Q6_K.
pub fn k_quant(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K)
}

/// Dequantizes whole super-blocks of a K-quant (a tensor's bytes, or any run of its blocks) into
/// `out`, which must hold exactly their values (`blocks.len() / type_size * 256`).
pub fn dequantize_k_quant(
    ty: GgmlType,
    blocks: &[u8],
    out: &mut [f32],
) -> Result<(), DequantError> {
    check(ty, blocks, out)?;
    match ty {
        GgmlType::Q4_K => each::<144>(blocks, out, q4_k),
        GgmlType::Q5_K => each::<176>(blocks, out, q5_k),
        GgmlType::Q6_K => each::<210>(blocks, out, q6_k),
        _ => return Err(DequantError::NotKQuant(ty)),
    }
    Ok(())
}

/// The type is a K-quant this module knows, and the lengths are whole blocks and their values.
fn check(ty: GgmlType, blocks: &[u8], out: &[f32]) -> Result<(), DequantError> {
    if !k_quant(ty) {
        return Err(DequantError::NotKQuant(ty));
    }
    let size = ty.type_size() as usize;
    if !blocks.len().is_multiple_of(size) || blocks.len() / size * QK_K != out.len() {
        return Err(DequantError::Length {
            ty,
            bytes: blocks.len(),
            values: out.len(),
        });
    }
    Ok(())
}

/// Runs `f` over each `N`-byte super-block and its 256 values.
fn each<const N: usize>(blocks: &[u8], out: &mut [f32], f: fn(&[u8; N], &mut [f32; QK_K])) {
    for (x, y) in blocks
        .as_chunks::<N>()
        .0
        .iter()
        .zip(out.as_chunks_mut::<QK_K>().0)
    {
        f(x, y);
    }
}

fn half(x: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([x[at], x[at + 1]])).to_f32()
}

/// The eight 6-bit scales and mins of a Q4_K or Q5_K super-block. The 12 bytes are three rows of
/// four: row 0 holds scales 0-3 in its low six bits, row 1 mins 0-3; row 2 holds the low nibbles of
/// scales 4-7 and the high nibbles of mins 4-7, whose top two bits are rows 0 and 1's top bits.
pub(crate) fn scales_and_mins(s: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let (mut sc, mut m) = ([0u8; 8], [0u8; 8]);
    for j in 0..4 {
        sc[j] = s[j] & 63;
        m[j] = s[4 + j] & 63;
        sc[4 + j] = (s[8 + j] & 0x0f) | ((s[j] >> 6) << 4);
        m[4 + j] = (s[8 + j] >> 4) | ((s[4 + j] >> 6) << 4);
    }
    (sc, m)
}

/// `block_q4_K`: f16 d, f16 dmin, 12 bytes of scales, 128 bytes of codes. Sub-block `j` (32 values)
/// is the low nibbles (even `j`) or high nibbles (odd `j`) of code bytes `32 * (j / 2)..`;
/// `d * sc[j] * q - dmin * m[j]`.
fn q4_k(x: &[u8; 144], y: &mut [f32; QK_K]) {
    let (d, dmin) = (half(x, 0), half(x, 2));
    let (sc, m) = scales_and_mins(x[4..16].try_into().unwrap_or(&[0; 12]));
    let qs = &x[16..];
    for (j, y) in y.as_chunks_mut::<32>().0.iter_mut().enumerate() {
        let (dj, mj) = (d * f32::from(sc[j]), dmin * f32::from(m[j]));
        let shift = 4 * (j % 2);
        for (v, &q) in y.iter_mut().zip(&qs[32 * (j / 2)..]) {
            *v = dj * f32::from((q >> shift) & 0x0f) - mj;
        }
    }
}

/// `block_q5_K`: as Q4_K with 32 bytes of fifth bits before the codes: bit `j` of `qh[l]` is the
/// fifth bit of sub-block `j`'s element `l`.
fn q5_k(x: &[u8; 176], y: &mut [f32; QK_K]) {
    let (d, dmin) = (half(x, 0), half(x, 2));
    let (sc, m) = scales_and_mins(x[4..16].try_into().unwrap_or(&[0; 12]));
    let (qh, qs) = (&x[16..48], &x[48..]);
    for (j, y) in y.as_chunks_mut::<32>().0.iter_mut().enumerate() {
        let (dj, mj) = (d * f32::from(sc[j]), dmin * f32::from(m[j]));
        let shift = 4 * (j % 2);
        let codes = qs[32 * (j / 2)..].iter().zip(qh);
        for (v, (&q, &h)) in y.iter_mut().zip(codes) {
            let q = ((q >> shift) & 0x0f) | (((h >> j) & 1) << 4);
            *v = dj * f32::from(q) - mj;
        }
    }
}

/// `block_q6_K`: 128 bytes of low nibbles, 64 bytes of high pairs, 16 signed scales, f16 d. Each
/// 128 values `n` are four quarters of 32: quarter `k`'s low nibbles are `ql[64n + 32 (k & 1)..]`
/// (high nibbles for `k >= 2`), its high pairs bits `2k` of `qh[32n..]`; sub-block `s` of 16 values
/// has scale `s`. `d * sc[s] * (q - 32)`.
fn q6_k(x: &[u8; 210], y: &mut [f32; QK_K]) {
    let d = half(x, 208);
    let (ql, qh, sc) = (&x[..128], &x[128..192], &x[192..208]);
    for (s, y) in y.as_chunks_mut::<16>().0.iter_mut().enumerate() {
        let (n, k, first) = (s / 8, (s % 8) / 2, 16 * (s % 2));
        let ds = d * f32::from(sc[s] as i8);
        let low = &ql[64 * n + 32 * (k & 1) + first..];
        let high = &qh[32 * n + first..];
        let (low_shift, high_shift) = (4 * (k >> 1), 2 * k);
        for (v, (&l, &h)) in y.iter_mut().zip(low.iter().zip(high)) {
            let q = ((l >> low_shift) & 0x0f) | (((h >> high_shift) & 3) << 4);
            *v = ds * f32::from(q as i8 - 32);
        }
    }
}

#[cfg(test)]
mod oracle;
#[cfg(test)]
mod tests;
