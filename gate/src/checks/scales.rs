//! `quant.scales`: every scale of a quantized draft is a number its dequantization can multiply by
//! (spec 17.2). Each scheme dequantizes a group as its scale times its codes (less a zero point, or
//! plus a bias, times a global scale): a NaN or infinite scale poisons every weight of its group,
//! and a zero or negative one, where the scheme's scales are magnitudes, zeroes or flips it. FP8
//! codes have NaN encodings (E4M3's `S.1111.111`), which no writer emits: one is read as NaN by
//! every loader. Zero points stored packed are in range by construction (each is `bits` wide), and
//! integer and FP4 codes have no invalid values, so those are not read.

use crate::container::TensorInfo;
use crate::dtype::Dtype;
use crate::escape::escape;
use crate::evidence::{FirstBadScale, QuantScales};
use crate::report::Check;
use half::{bf16, f16};

pub const ID: &str = crate::check_id::CheckId::QUANT_SCALES;

/// What one tensor's values must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// A float scale (BF16, F16, F32) that is finite and `> 0`: compressed-tensors', ModelOpt's and
    /// Transformers' scales, global scales and input scales.
    Positive,
    /// A float that is finite: MLX's affine scales (which are signed) and biases.
    Finite,
    /// E4M3 bytes (F8_E4M3, or MLX's U8) that are finite and `> 0`: NVFP4's group scales.
    E4m3Positive,
    /// E4M3 bytes that are finite: MLX's nvfp4 scales.
    E4m3Finite,
    /// E8M0 bytes (a power of two each), `0xff` being NaN: MLX's mxfp4 and mxfp8 scales.
    E8m0,
    /// FP8 E4M3 codes (weights), free of NaN encodings.
    Fp8Codes,
}

impl Rule {
    fn demand(self) -> &'static str {
        match self {
            Rule::Positive | Rule::E4m3Positive => "finite and > 0",
            Rule::Finite | Rule::E4m3Finite | Rule::E8m0 => "finite",
            Rule::Fp8Codes => "an E4M3 code, not one of its NaN encodings (0x7f, 0xff)",
        }
    }

    fn why(self) -> &'static str {
        match self {
            Rule::Fp8Codes => "every loader reads the code as NaN, and it poisons every output it touches",
            _ => "every weight of its group is dequantized through it, so this one poisons, zeroes or flips its group",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Rule::Fp8Codes => "weight",
            _ => "scale",
        }
    }
}

/// E4M3 as an f64, for messages.
fn e4m3(b: u8) -> f64 {
    f64::from(crate::dtype::e4m3_to_f32(b))
}

/// The index of the first element `bad` holds for. Each run of elements is tested whole without
/// stopping (a loop the compiler vectorizes), and only a run holding a bad one is searched.
#[inline(always)]
fn first_where<T>(elements: &[T], bad: impl Fn(&T) -> bool) -> Option<usize> {
    const RUN: usize = 64;
    let mut base = 0;
    for run in elements.chunks(RUN) {
        if run.iter().fold(0u8, |any, e| any | u8::from(bad(e))) != 0 {
            return run.iter().position(&bad).map(|i| base + i);
        }
        base += run.len();
    }
    None
}

/// Whether a float's `bits` break the rule: not finite (its type's `exponent` mask all ones), or,
/// `positive`, not in `1..=largest` (the bits of the type's finite values `> 0`: sign clear, not
/// zero, below infinity). Bitwise, without branches, so the scan vectorizes; in the type's own
/// width, so a vector holds as many 16-bit floats as it can (widened to 32 bits, it held half).
macro_rules! bad_float {
    ($name:ident, $bits:ty) => {
        #[inline(always)]
        fn $name(bits: $bits, exponent: $bits, largest: $bits, positive: bool) -> bool {
            let not_finite = bits & exponent == exponent;
            let not_positive = bits.wrapping_sub(1) >= largest;
            not_finite | (positive & not_positive)
        }
    };
}
bad_float!(bad_float16, u16);
bad_float!(bad_float32, u32);

/// What reading one tensor found: its first bad element's index and value as text, `None` for
/// none; `None` outside when its type is not one its rule reads.
pub type Found = Option<Option<(u64, String)>>;

/// The first element of `bytes` (of `dtype`) that breaks `rule`: its index and value as text.
/// `None` when every element keeps it, or when `dtype` is not one the rule reads (the inventory
/// refuses a scale of the wrong type, naming it).
pub fn first_bad(rule: Rule, dtype: Dtype, bytes: &[u8]) -> Option<Option<(u64, String)>> {
    let floats = |positive: bool| -> Option<Option<(u64, String)>> {
        // Read as bits, so the scan costs what reading the bytes costs.
        let (at, value) = match dtype {
            Dtype::Bf16 => {
                let (words, _) = bytes.as_chunks::<2>();
                let i = first_where(words, |w| {
                    bad_float16(u16::from_le_bytes(*w), 0x7f80, 0x7f7f, positive)
                });
                (
                    i,
                    i.map(|i| f64::from(bf16::from_le_bytes(words[i]).to_f32())),
                )
            }
            Dtype::F16 => {
                let (words, _) = bytes.as_chunks::<2>();
                let i = first_where(words, |w| {
                    bad_float16(u16::from_le_bytes(*w), 0x7c00, 0x7bff, positive)
                });
                (
                    i,
                    i.map(|i| f64::from(f16::from_le_bytes(words[i]).to_f32())),
                )
            }
            Dtype::F32 => {
                let (words, _) = bytes.as_chunks::<4>();
                let i = first_where(words, |w| {
                    bad_float32(u32::from_le_bytes(*w), 0x7f80_0000, 0x7f7f_ffff, positive)
                });
                (i, i.map(|i| f64::from(f32::from_le_bytes(words[i]))))
            }
            _ => return None,
        };
        Some(at.zip(value).map(|(i, v)| (i as u64, format!("{v}"))))
    };
    let bytewise = matches!(dtype, Dtype::F8E4M3 | Dtype::U8);
    match rule {
        Rule::Positive => floats(true),
        Rule::Finite => floats(false),
        Rule::E4m3Positive | Rule::E4m3Finite if bytewise => {
            // Finite and > 0 is 0x01..=0x7e; finite is anything but 0x7f and 0xff.
            let positive = rule == Rule::E4m3Positive;
            let bad = |b: u8| (b & 0x7f == 0x7f) | (positive & (b.wrapping_sub(1) >= 0x7e));
            Some(
                first_where(bytes, |b| bad(*b))
                    .map(|i| (i as u64, format!("{} (0x{:02x})", e4m3(bytes[i]), bytes[i]))),
            )
        }
        Rule::E8m0 if dtype == Dtype::U8 => {
            Some(first_where(bytes, |b| *b == 0xff).map(|i| (i as u64, "NaN (0xff)".to_owned())))
        }
        // Codes are bytes whatever the container (MLX packs mxfp8's four to a U32 word).
        Rule::Fp8Codes => Some(
            first_where(bytes, |b| b & 0x7f == 0x7f)
                .map(|i| (i as u64, format!("NaN (0x{:02x})", bytes[i]))),
        ),
        _ => None,
    }
}

/// The check over `reads` (each tensor with its bytes and rule, read on a worker of its own: the
/// scales of a large draft are tens of megabytes), from what reading each found (`found`, in the
/// order of `reads`, each from [`first_bad`]); `scheme` names the scheme for the message.
pub fn judge(
    scheme: &str,
    reads: &[(&TensorInfo, &[u8], Rule)],
    found: impl IntoIterator<Item = Found>,
) -> Check {
    let (mut tensors, mut elements) = (0usize, 0u64);
    for ((t, bytes, rule), bad) in reads.iter().zip(found) {
        let Some(bad) = bad else {
            continue;
        };
        tensors += 1;
        // FP8 codes are counted and found byte by byte whatever holds them; MLX's mxfp8 packs four
        // to a U32 word, and the tensor's index is the word's (the message says which code).
        let per_value = if *rule == Rule::Fp8Codes {
            1
        } else {
            t.dtype.size()
        };
        let Some((at, value)) = bad else {
            elements += bytes.len() as u64 / per_value;
            continue;
        };
        elements += at + 1;
        let (index, within) = match (*rule, t.dtype.size()) {
            (Rule::Fp8Codes, word @ 2..) => (
                at / word,
                format!(
                    " in its code {} of {word} (E4M3 codes packed {word} to a {} word, the first in the lowest byte)",
                    at % word + 1,
                    t.dtype
                ),
            ),
            _ => (at, String::new()),
        };
        let message = format!(
            "{}[{index}] is {value}{within}: a {scheme} {} must be {} ({})",
            escape(&t.name),
            rule.what(),
            rule.demand(),
            rule.why()
        );
        return Check::fail(ID, message).with_evidence(QuantScales {
            tensors,
            elements,
            first: Some(FirstBadScale {
                tensor: t.name.clone(),
                index,
                value,
            }),
        });
    }
    Check::pass(
        ID,
        format!("every scale and FP8 code of the {tensors} quantized tensors read is what its scheme requires ({elements} values read, {scheme})"),
    )
    .with_evidence(QuantScales {
        tensors,
        elements,
        first: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e4m3_reads_its_extremes_and_nan() {
        assert_eq!(e4m3(0x7e), 448.0);
        assert_eq!(e4m3(0x38), 1.0);
        assert_eq!(e4m3(0x01), 2f64.powi(-9));
        assert!(e4m3(0x7f).is_nan() && e4m3(0xff).is_nan());
        assert_eq!(e4m3(0xb8), -1.0);
    }

    #[test]
    fn each_rule_finds_its_first_bad_value() {
        let e4 = |r, b: &[u8]| first_bad(r, Dtype::F8E4M3, b).unwrap();
        assert_eq!(e4(Rule::E4m3Positive, &[0x38, 0x00]).unwrap().0, 1);
        assert_eq!(e4(Rule::E4m3Positive, &[0x38, 0xb8]).unwrap().0, 1);
        assert!(e4(Rule::E4m3Finite, &[0x00, 0xb8]).is_none());
        assert_eq!(e4(Rule::E4m3Finite, &[0x00, 0xff]).unwrap().0, 1);
        assert_eq!(e4(Rule::Fp8Codes, &[0x00, 0x01, 0x7f]).unwrap().0, 2);
        let e8 = first_bad(Rule::E8m0, Dtype::U8, &[0x00, 0x7f, 0xff]).unwrap();
        assert_eq!(e8.unwrap().0, 2);
        let f = |r, v: f32| first_bad(r, Dtype::F32, &v.to_le_bytes()).unwrap();
        assert!(f(Rule::Positive, -1.0).is_some() && f(Rule::Finite, -1.0).is_none());
        assert!(f(Rule::Finite, f32::NAN).is_some());
        assert!(first_bad(Rule::Positive, Dtype::I32, &[0; 4]).is_none());
    }
}
