//! The values scan of a GGUF tensor: a float tensor's every value finite, a block type's every scale
//! finite. A NaN or infinite scale makes every value of its block NaN or infinite once dequantized,
//! whatever the codes, so a block type is judged by its scales alone: ggml's struct for each type
//! (`ggml-common.h`) says where they are. The work is one pass over the bytes (a float tensor's every
//! value, a block tensor's scales), nothing is allocated, and any bytes give an answer, never a panic.

use super::{GgmlType, TensorInfo};
use std::fmt;

/// How a block scale is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleKind {
    /// A `ggml_half` (IEEE binary16), little-endian.
    F16,
    /// A `float` (Q8_K's `d`), little-endian.
    F32,
    /// An OCP E8M0 exponent (MXFP4's `e`): 0xFF is NaN in the format. ggml decodes it as 2^127
    /// without a check, so only a scan can tell a writer's NaN from a scale.
    E8m0,
    /// IQ1_M's half, which has no field: it is the top nibbles of the block's four `u16` scales
    /// (`dequantize_row_iq1_m`), the first word's the lowest.
    Iq1mNibbles,
}

/// One scale in a block: its name in ggml's struct, its byte offset in the block, its encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scale {
    pub name: &'static str,
    pub offset: usize,
    pub kind: ScaleKind,
}

const fn half(name: &'static str, offset: usize) -> Scale {
    Scale {
        name,
        offset,
        kind: ScaleKind::F16,
    }
}

/// The scales of a block of `ty`, in struct order; empty for the float and integer types (whose
/// elements are their values) and for NVFP4, whose UE4M3 scales ggml decodes to a finite value for
/// every byte (`ggml_ue4m3_to_fp32`: 0x7F, E4M3's NaN, is read as zero).
pub fn block_scales(ty: GgmlType) -> &'static [Scale] {
    use GgmlType::*;
    const D: &[Scale] = &[half("d", 0)];
    const D_M: &[Scale] = &[half("d", 0), half("m", 2)];
    const D_S: &[Scale] = &[half("d", 0), half("s", 2)];
    const D_DMIN: &[Scale] = &[half("d", 0), half("dmin", 2)];
    // scales[16], qs[64], then d and dmin.
    const Q2_K_SCALES: &[Scale] = &[half("d", 80), half("dmin", 82)];
    // hmask[32], qs[64], scales[12], then d.
    const Q3_K_SCALES: &[Scale] = &[half("d", 108)];
    // ql[128], qh[64], scales[16], then d.
    const Q6_K_SCALES: &[Scale] = &[half("d", 208)];
    // qs[48], qh[4], then d.
    const TQ1_0_SCALES: &[Scale] = &[half("d", 52)];
    // qs[64], then d.
    const TQ2_0_SCALES: &[Scale] = &[half("d", 64)];
    const Q8_K_SCALES: &[Scale] = &[Scale {
        name: "d",
        offset: 0,
        kind: ScaleKind::F32,
    }];
    // qs[32], qh[16], then the four u16 scales.
    const IQ1_M_SCALES: &[Scale] = &[Scale {
        name: "d (the scales' top nibbles)",
        offset: 48,
        kind: ScaleKind::Iq1mNibbles,
    }];
    const MXFP4_SCALES: &[Scale] = &[Scale {
        name: "e",
        offset: 0,
        kind: ScaleKind::E8m0,
    }];
    match ty {
        F32 | F16 | BF16 | F64 | I8 | I16 | I32 | I64 | NVFP4 => &[],
        Q4_0 | Q5_0 | Q8_0 | Q1_0 | Q2_0 => D,
        IQ2_XXS | IQ2_XS | IQ3_XXS | IQ1_S | IQ4_NL | IQ3_S | IQ2_S | IQ4_XS => D,
        Q4_1 | Q5_1 => D_M,
        Q8_1 => D_S,
        Q2_K => Q2_K_SCALES,
        Q3_K => Q3_K_SCALES,
        Q4_K | Q5_K => D_DMIN,
        Q6_K => Q6_K_SCALES,
        Q8_K => Q8_K_SCALES,
        IQ1_M => IQ1_M_SCALES,
        TQ1_0 => TQ1_0_SCALES,
        TQ2_0 => TQ2_0_SCALES,
        MXFP4 => MXFP4_SCALES,
    }
}

/// What is not finite: NaN or an infinity of either sign.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotFinite {
    NaN,
    PlusInfinity,
    MinusInfinity,
}

impl fmt::Display for NotFinite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NotFinite::NaN => "NaN",
            NotFinite::PlusInfinity => "+infinity",
            NotFinite::MinusInfinity => "-infinity",
        })
    }
}

/// The first fault [`scan_values`] finds in a tensor's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The bytes are not whole blocks of the type (the reader sizes a tensor so; a caller's slice
    /// may not be).
    NotWholeBlocks { bytes: u64 },
    /// A float tensor's element, by its index (ne0 fastest), with its bits as stored.
    Element {
        index: u64,
        bits: u64,
        what: NotFinite,
    },
    /// A block's scale, by the block's index (in data order) and the scale's name in ggml's struct,
    /// with its bits as stored (IQ1_M's as assembled).
    Scale {
        block: u64,
        scale: &'static str,
        bits: u32,
        what: NotFinite,
    },
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::NotWholeBlocks { bytes } => write!(f, "{bytes} bytes are not whole blocks"),
            Fault::Element { index, bits, what } => {
                write!(f, "element {index} is {what} (bits {bits:#x})")
            }
            Fault::Scale {
                block,
                scale,
                bits,
                what,
            } => write!(
                f,
                "block {block}'s scale {scale} is {what} (bits {bits:#x})"
            ),
        }
    }
}

/// A tensor whose values are not all finite: the tensor and its type named, and the first fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueError {
    pub tensor: String,
    pub ty: GgmlType,
    pub fault: Fault,
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tensor {} ({}): {}", self.tensor, self.ty, self.fault)
    }
}

impl std::error::Error for ValueError {}

/// Scans a tensor's data (as [`super::Gguf::data`] gives it): every value of a float tensor, every
/// scale of a block tensor, finite.
pub fn scan_tensor(info: &TensorInfo, data: &[u8]) -> Result<(), ValueError> {
    let fault = if data.len() as u64 == info.bytes {
        scan_values(info.ty, data).err()
    } else {
        Some(Fault::NotWholeBlocks {
            bytes: data.len() as u64,
        })
    };
    match fault {
        None => Ok(()),
        Some(fault) => Err(ValueError {
            tensor: info.name.clone(),
            ty: info.ty,
            fault,
        }),
    }
}

/// Scans whole blocks of `ty` (a tensor's data, or any run of its blocks): the first element or
/// block scale that is NaN or infinite, in data order. Integer types have none.
pub fn scan_values(ty: GgmlType, bytes: &[u8]) -> Result<(), Fault> {
    let size = ty.type_size() as usize;
    if size == 0 || !bytes.len().is_multiple_of(size) {
        return Err(Fault::NotWholeBlocks {
            bytes: bytes.len() as u64,
        });
    }
    match ty {
        GgmlType::F32 => elements::<4>(bytes, |b| {
            let bits = u32::from_le_bytes(b);
            classify(u64::from(bits), 0x7f80_0000, 0x007f_ffff, 1 << 31)
        }),
        GgmlType::F16 => elements::<2>(bytes, |b| {
            classify(u64::from(u16::from_le_bytes(b)), 0x7c00, 0x03ff, 1 << 15)
        }),
        GgmlType::BF16 => elements::<2>(bytes, |b| {
            classify(u64::from(u16::from_le_bytes(b)), 0x7f80, 0x007f, 1 << 15)
        }),
        GgmlType::F64 => elements::<8>(bytes, |b| {
            classify(
                u64::from_le_bytes(b),
                0x7ff0_0000_0000_0000,
                0x000f_ffff_ffff_ffff,
                1 << 63,
            )
        }),
        _ => {
            let scales = block_scales(ty);
            if scales.is_empty() {
                return Ok(());
            }
            for (block, x) in bytes.chunks_exact(size).enumerate() {
                for scale in scales {
                    if let Some((bits, what)) = scale_fault(x, scale) {
                        return Err(Fault::Scale {
                            block: block as u64,
                            scale: scale.name,
                            bits,
                            what,
                        });
                    }
                }
            }
            Ok(())
        }
    }
}

/// Elements checked this many at a time without an early exit (a loop the compiler vectorizes),
/// the first bad one then found within the chunk.
const CHUNK: usize = 64;

fn elements<const N: usize>(
    bytes: &[u8],
    check: impl Fn([u8; N]) -> Option<(u64, NotFinite)>,
) -> Result<(), Fault> {
    let values = bytes.as_chunks::<N>().0;
    for (c, chunk) in values.chunks(CHUNK).enumerate() {
        if !chunk.iter().fold(false, |bad, &b| bad | check(b).is_some()) {
            continue;
        }
        for (i, &b) in chunk.iter().enumerate() {
            if let Some((bits, what)) = check(b) {
                return Err(Fault::Element {
                    index: (c * CHUNK + i) as u64,
                    bits,
                    what,
                });
            }
        }
    }
    Ok(())
}

/// An IEEE value's bits, with its format's exponent, mantissa and sign masks: `None` when finite.
fn classify(bits: u64, exponent: u64, mantissa: u64, sign: u64) -> Option<(u64, NotFinite)> {
    if bits & exponent != exponent {
        return None;
    }
    let what = if bits & mantissa != 0 {
        NotFinite::NaN
    } else if bits & sign != 0 {
        NotFinite::MinusInfinity
    } else {
        NotFinite::PlusInfinity
    };
    Some((bits, what))
}

/// The scale's bits and what it is, when it is not finite. `block` is one whole block, so every
/// scale's bytes are in it (the table's offsets are held to the sizes by a test); a read outside
/// would be a table error, answered as finite rather than a panic.
fn scale_fault(block: &[u8], scale: &Scale) -> Option<(u32, NotFinite)> {
    let at = |n: usize| block.get(scale.offset..scale.offset + n);
    let (bits, found) = match scale.kind {
        ScaleKind::F16 => {
            let b = at(2)?;
            let bits = u16::from_le_bytes([b[0], b[1]]);
            (u32::from(bits), f16_fault(bits))
        }
        ScaleKind::F32 => {
            let b = at(4)?;
            let bits = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let found = classify(u64::from(bits), 0x7f80_0000, 0x007f_ffff, 1 << 31);
            (bits, found.map(|(_, what)| what))
        }
        ScaleKind::E8m0 => {
            let e = *at(1)?.first()?;
            (u32::from(e), (e == 0xff).then_some(NotFinite::NaN))
        }
        ScaleKind::Iq1mNibbles => {
            let b = at(8)?;
            let word = |i: usize| u16::from_le_bytes([b[2 * i], b[2 * i + 1]]);
            let bits = (word(0) >> 12)
                | ((word(1) >> 8) & 0x00f0)
                | ((word(2) >> 4) & 0x0f00)
                | (word(3) & 0xf000);
            (u32::from(bits), f16_fault(bits))
        }
    };
    Some((bits, found?))
}

fn f16_fault(bits: u16) -> Option<NotFinite> {
    classify(u64::from(bits), 0x7c00, 0x03ff, 1 << 15).map(|(_, what)| what)
}

#[cfg(test)]
mod tests;
