//! The safetensors element types and their sizes, and the one bf16 <-> f32 conversion every reader
//! uses (through `half`, so there is one rounding rule and one NaN rule in the gate).

use std::fmt;

/// A bf16's value: bf16 is the top half of an f32 (a NaN stays a NaN).
#[inline(always)]
pub fn bf16_to_f32(bits: u16) -> f32 {
    half::bf16::from_bits(bits).to_f32()
}

/// The bf16 nearest `x`, ties to even (a NaN stays a NaN, an f32 past bf16's range is infinite).
#[inline(always)]
pub fn f32_to_bf16(x: f32) -> u16 {
    half::bf16::from_f32(x).to_bits()
}

/// An FP8 E4M3 (`fn`: no infinities, `S.1111.111` NaN) byte's value: the one decoding of E4M3 the
/// gate has, for quantized drafts' codes and scales.
pub fn e4m3_to_f32(b: u8) -> f32 {
    let sign = if b & 0x80 == 0 { 1.0 } else { -1.0 };
    let (e, m) = (i32::from((b >> 3) & 0x0f), f32::from(b & 0x07));
    if e == 0x0f && m == 7.0 {
        return f32::NAN;
    }
    sign * match e {
        0 => m / 8.0 * 2f32.powi(-6),
        e => (1.0 + m / 8.0) * 2f32.powi(e - 7),
    }
}

/// A declared element type. The names are safetensors' own spelling, which is also how they print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dtype {
    Bool,
    U8,
    I8,
    F8E4M3,
    F8E5M2,
    I16,
    U16,
    F16,
    Bf16,
    I32,
    U32,
    F32,
    I64,
    U64,
    F64,
}

impl Dtype {
    /// Every dtype the reader knows, for lookups and tests.
    pub const ALL: [Dtype; 15] = [
        Dtype::Bool,
        Dtype::U8,
        Dtype::I8,
        Dtype::F8E4M3,
        Dtype::F8E5M2,
        Dtype::I16,
        Dtype::U16,
        Dtype::F16,
        Dtype::Bf16,
        Dtype::I32,
        Dtype::U32,
        Dtype::F32,
        Dtype::I64,
        Dtype::U64,
        Dtype::F64,
    ];

    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            Dtype::Bool | Dtype::U8 | Dtype::I8 | Dtype::F8E4M3 | Dtype::F8E5M2 => 1,
            Dtype::I16 | Dtype::U16 | Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::U64 | Dtype::F64 => 8,
        }
    }

    /// The header's spelling of this dtype.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bool => "BOOL",
            Dtype::U8 => "U8",
            Dtype::I8 => "I8",
            Dtype::F8E4M3 => "F8_E4M3",
            Dtype::F8E5M2 => "F8_E5M2",
            Dtype::I16 => "I16",
            Dtype::U16 => "U16",
            Dtype::F16 => "F16",
            Dtype::Bf16 => "BF16",
            Dtype::I32 => "I32",
            Dtype::U32 => "U32",
            Dtype::F32 => "F32",
            Dtype::I64 => "I64",
            Dtype::U64 => "U64",
            Dtype::F64 => "F64",
        }
    }

    /// Parses the header's spelling; `None` for anything else (the caller names the tensor).
    pub fn from_name(name: &str) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.name() == name)
    }

    /// True for the 2-byte float types, which sizes alone cannot tell apart (spec section 4.2).
    pub fn is_half_float(self) -> bool {
        matches!(self, Dtype::F16 | Dtype::Bf16)
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in Dtype::ALL {
            assert_eq!(Dtype::from_name(d.name()), Some(d));
        }
        assert_eq!(Dtype::from_name("bf16"), None);
        assert_eq!(Dtype::from_name("Q4_1"), None);
    }

    #[test]
    fn sizes_match_the_spec() {
        let by_size = |n| Dtype::ALL.iter().filter(|d| d.size() == n).count();
        assert_eq!(
            (by_size(1), by_size(2), by_size(4), by_size(8)),
            (5, 4, 3, 3)
        );
    }
}
