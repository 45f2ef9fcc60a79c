//! Reading a source matrix's elements as f32, whatever float type its checkpoint stores (BF16, F16 or
//! F32), and as the bf16 bits a BF16 package tensor must hold.

use crate::dtype::Dtype;
use crate::dtype::{bf16_to_f32, f32_to_bf16};

/// A row-major source matrix (a 1-D tensor is one row).
#[derive(Clone, Copy, Debug)]
pub struct Matrix<'a> {
    pub name: &'a str,
    pub dtype: Dtype,
    pub rows: u64,
    pub cols: u64,
    pub bytes: &'a [u8],
}

impl<'a> Matrix<'a> {
    /// Element size in bytes; only float types reach here.
    pub fn size(&self) -> usize {
        self.dtype.size() as usize
    }

    /// The bytes of `count` elements from (row, col), if they are inside the tensor.
    #[inline(always)]
    pub fn span(&self, row: u64, col: u64, count: usize) -> Option<&'a [u8]> {
        let first = row.checked_mul(self.cols)?.checked_add(col)?;
        let begin = usize::try_from(first).ok()?.checked_mul(self.size())?;
        self.bytes
            .get(begin..begin.checked_add(count * self.size())?)
    }

    /// Elements from (row, col) into `out` as f32; `false` when they are not all inside.
    #[inline(always)]
    pub fn read_f32(&self, row: u64, col: u64, out: &mut [f32]) -> bool {
        let Some(bytes) = self.span(row, col, out.len()) else {
            return false;
        };
        to_f32(self.dtype, bytes, out);
        true
    }
}

/// Converts little-endian elements of `dtype` to f32 (`bytes` holds exactly `out.len()` of them).
#[inline(always)]
pub fn to_f32(dtype: Dtype, bytes: &[u8], out: &mut [f32]) {
    match dtype {
        Dtype::Bf16 => {
            let (pairs, _) = bytes.as_chunks::<2>();
            for (o, &p) in out.iter_mut().zip(pairs) {
                *o = bf16_to_f32(u16::from_le_bytes(p));
            }
        }
        Dtype::F16 => {
            let (pairs, _) = bytes.as_chunks::<2>();
            for (o, &p) in out.iter_mut().zip(pairs) {
                *o = half::f16::from_bits(u16::from_le_bytes(p)).to_f32();
            }
        }
        Dtype::F32 => {
            let (quads, _) = bytes.as_chunks::<4>();
            for (o, &q) in out.iter_mut().zip(quads) {
                *o = f32::from_le_bytes(q);
            }
        }
        _ => out.fill(f32::NAN),
    }
}

/// Element `i` of a source tensor as the bf16 bits a faithful BF16 package tensor holds: the bits
/// themselves for BF16, the nearest bf16 (ties to even) for F16 and F32.
pub fn bf16_at(dtype: Dtype, bytes: &[u8], i: usize) -> Option<u16> {
    let size = dtype.size() as usize;
    let e = bytes.get(i.checked_mul(size)?..i.checked_mul(size)? + size)?;
    Some(match dtype {
        Dtype::Bf16 => u16::from_le_bytes([e[0], e[1]]),
        Dtype::F16 => f32_to_bf16(half::f16::from_bits(u16::from_le_bytes([e[0], e[1]])).to_f32()),
        Dtype::F32 => f32_to_bf16(f32::from_le_bytes([e[0], e[1], e[2], e[3]])),
        _ => return None,
    })
}

/// True for the float types a checkpoint may store.
pub fn is_float(dtype: Dtype) -> bool {
    matches!(dtype, Dtype::Bf16 | Dtype::F16 | Dtype::F32)
}
