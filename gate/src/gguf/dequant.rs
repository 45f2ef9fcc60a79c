//! ggml's reference dequantization (`ggml-quants.c`, `dequantize_row_*`) for the types a converter
//! meets in a draft's GGUF: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0. The arithmetic is the C
//! code's in `f32`, in its order and without fused multiply-adds (`q * d + m` rounds twice), so each
//! value is the one ggml (and gguf-py's `dequantize`) computes, bit for bit. Any other type is an
//! error naming it: the caller leaves that tensor undecided rather than guess.

use super::GgmlType;
use half::f16;
use std::fmt;

/// Why [`dequantize`] gave no values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DequantError {
    /// A type the gate does not dequantize (K-quants, IQ types, MXFP4, integers...).
    Unsupported(GgmlType),
    /// A type [`super::dequantize_k_quant`] does not know: it is for Q4_K, Q5_K and Q6_K.
    NotKQuant(GgmlType),
    /// The bytes are not whole blocks, or `out` does not hold their values exactly.
    Length {
        ty: GgmlType,
        bytes: usize,
        values: usize,
    },
}

impl fmt::Display for DequantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DequantError::Unsupported(ty) => write!(
                f,
                "ggml type {ty} (id {}) is not one the gate dequantizes (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0)",
                ty.id()
            ),
            DequantError::NotKQuant(ty) => write!(
                f,
                "ggml type {ty} (id {}) is not a K-quant the gate dequantizes (q4_K, q5_K, q6_K)",
                ty.id()
            ),
            DequantError::Length { ty, bytes, values } => write!(
                f,
                "{bytes} bytes of {ty} are not whole blocks of {} bytes holding {values} values",
                ty.type_size()
            ),
        }
    }
}

impl std::error::Error for DequantError {}

/// Whether [`dequantize`] turns this type into values.
pub fn supported(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(ty, F32 | F16 | BF16 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0)
}

/// Dequantizes whole blocks of `ty` (a tensor's bytes, or any run of its blocks) into `out`, which
/// must hold exactly their values (`blocks.len() / type_size * block_size`).
pub fn dequantize(ty: GgmlType, blocks: &[u8], out: &mut [f32]) -> Result<(), DequantError> {
    if !supported(ty) {
        return Err(DequantError::Unsupported(ty));
    }
    let (size, block) = (ty.type_size() as usize, ty.block_size() as usize);
    if !blocks.len().is_multiple_of(size) || blocks.len() / size * block != out.len() {
        return Err(DequantError::Length {
            ty,
            bytes: blocks.len(),
            values: out.len(),
        });
    }
    match ty {
        GgmlType::F32 => {
            for (y, x) in out.iter_mut().zip(blocks.as_chunks::<4>().0) {
                *y = f32::from_le_bytes(*x);
            }
        }
        GgmlType::F16 => {
            for (y, x) in out.iter_mut().zip(blocks.as_chunks::<2>().0) {
                *y = half(*x);
            }
        }
        GgmlType::BF16 => {
            for (y, x) in out.iter_mut().zip(blocks.as_chunks::<2>().0) {
                *y = f32::from_bits(u32::from(u16::from_le_bytes(*x)) << 16);
            }
        }
        GgmlType::Q4_0 => each::<18>(blocks, out, q4_0),
        GgmlType::Q4_1 => each::<20>(blocks, out, q4_1),
        GgmlType::Q5_0 => each::<22>(blocks, out, q5_0),
        GgmlType::Q5_1 => each::<24>(blocks, out, q5_1),
        GgmlType::Q8_0 => each::<34>(blocks, out, q8_0),
        _ => return Err(DequantError::Unsupported(ty)),
    }
    Ok(())
}

/// Runs `f` over each `N`-byte block and its 32 values.
fn each<const N: usize>(blocks: &[u8], out: &mut [f32], f: fn(&[u8; N], &mut [f32; 32])) {
    for (x, y) in blocks
        .as_chunks::<N>()
        .0
        .iter()
        .zip(out.as_chunks_mut::<32>().0)
    {
        f(x, y);
    }
}

fn half(bytes: [u8; 2]) -> f32 {
    f16::from_bits(u16::from_le_bytes(bytes)).to_f32()
}

/// `block_q4_0`: f16 d, 16 bytes of codes; `(q - 8) * d`.
fn q4_0(x: &[u8; 18], y: &mut [f32; 32]) {
    let d = half([x[0], x[1]]);
    for j in 0..16 {
        let q = x[2 + j];
        y[j] = (i32::from(q & 0x0f) - 8) as f32 * d;
        y[j + 16] = (i32::from(q >> 4) - 8) as f32 * d;
    }
}

/// `block_q4_1`: f16 d, f16 m, 16 bytes of codes; `q * d + m`.
fn q4_1(x: &[u8; 20], y: &mut [f32; 32]) {
    let (d, m) = (half([x[0], x[1]]), half([x[2], x[3]]));
    for j in 0..16 {
        let q = x[4 + j];
        y[j] = f32::from(q & 0x0f) * d + m;
        y[j + 16] = f32::from(q >> 4) * d + m;
    }
}

/// The fifth bits of a q5 block: bit `j` of the little-endian `qh` belongs to element `j`.
fn high_bits(qh: [u8; 4], j: usize) -> (u8, u8) {
    let qh = u32::from_le_bytes(qh);
    let low = ((qh >> j) << 4) & 0x10;
    let high = (qh >> (j + 12)) & 0x10;
    (low as u8, high as u8)
}

/// `block_q5_0`: f16 d, 4 bytes of fifth bits, 16 bytes of codes; `(q - 16) * d`.
fn q5_0(x: &[u8; 22], y: &mut [f32; 32]) {
    let d = half([x[0], x[1]]);
    let qh = [x[2], x[3], x[4], x[5]];
    for j in 0..16 {
        let q = x[6 + j];
        let (h0, h1) = high_bits(qh, j);
        y[j] = (i32::from((q & 0x0f) | h0) - 16) as f32 * d;
        y[j + 16] = (i32::from((q >> 4) | h1) - 16) as f32 * d;
    }
}

/// `block_q5_1`: f16 d, f16 m, 4 bytes of fifth bits, 16 bytes of codes; `q * d + m`.
fn q5_1(x: &[u8; 24], y: &mut [f32; 32]) {
    let (d, m) = (half([x[0], x[1]]), half([x[2], x[3]]));
    let qh = [x[4], x[5], x[6], x[7]];
    for j in 0..16 {
        let q = x[8 + j];
        let (h0, h1) = high_bits(qh, j);
        y[j] = f32::from((q & 0x0f) | h0) * d + m;
        y[j + 16] = f32::from((q >> 4) | h1) * d + m;
    }
}

/// `block_q8_0`: f16 d, 32 signed codes; `q * d`.
fn q8_0(x: &[u8; 34], y: &mut [f32; 32]) {
    let d = half([x[0], x[1]]);
    for (j, v) in y.iter_mut().enumerate() {
        *v = f32::from(x[2 + j] as i8) * d;
    }
}
