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

/// Elements tested whole before a run is searched: long enough that the test of a run costs
/// nothing beside reading it, short enough that a bad element is found within a page of it.
const RUN: usize = 256;

/// The index of the first element whose `excess` is not zero. `excess` is how far the element's
/// bits lie past the last value its rule accepts (a saturating subtraction, so zero for every good
/// one): ORed over a run it vectorizes in the element's own width, where a comparison's mask had to
/// be narrowed to a byte, and a scan of the scales costs what reading them costs. Only a run whose
/// excess is not zero is searched.
#[inline(always)]
fn first_excess<const W: usize, U>(
    elements: &[[u8; W]],
    excess: impl Fn([u8; W]) -> U,
) -> Option<usize>
where
    U: Copy + Default + PartialEq + std::ops::BitOr<Output = U>,
{
    let none = U::default();
    let (runs, rest) = elements.as_chunks::<RUN>();
    let search = |run: &[[u8; W]], base: usize| {
        run.iter()
            .position(|e| excess(*e) != none)
            .map(|i| base + i)
    };
    for (r, run) in runs.iter().enumerate() {
        if run.iter().fold(none, |any, e| any | excess(*e)) != none {
            return search(run, r * RUN);
        }
    }
    search(rest, runs.len() * RUN)
}

/// The excess of a float's `bits` over its rule, in the type's own width: `positive`, how far
/// `bits - 1` lies past `largest - 1` (the type's finite values `> 0` are the one range
/// `1..=largest` of its bits: sign clear, not zero, below infinity; zero wraps to the top);
/// otherwise how far its magnitude's bits lie below the `exponent` mask's value (all ones there is
/// infinity or NaN, and the magnitude is `>= exponent` exactly then).
macro_rules! float_excess {
    ($name:ident, $bits:ty) => {
        #[inline(always)]
        fn $name(bits: $bits, exponent: $bits, largest: $bits, positive: bool) -> $bits {
            if positive {
                bits.wrapping_sub(1).saturating_sub(largest - 1)
            } else {
                (bits & !(1 << (<$bits>::BITS - 1))).saturating_sub(exponent - 1)
            }
        }
    };
}
float_excess!(float16_excess, u16);
float_excess!(float32_excess, u32);

/// The first float of `words` breaking the rule (`positive` or only finite), for a type with the
/// given `exponent` mask and `largest` finite bits. The rule is chosen outside the loop.
macro_rules! first_float {
    ($words:expr, $bits:ty, $excess:ident, $exponent:expr, $largest:expr, $positive:expr) => {
        if $positive {
            first_excess($words, |w| {
                $excess(<$bits>::from_le_bytes(w), $exponent, $largest, true)
            })
        } else {
            first_excess($words, |w| {
                $excess(<$bits>::from_le_bytes(w), $exponent, $largest, false)
            })
        }
    };
}

/// Bytes as one-byte elements, for [`first_excess`].
fn as_elements(bytes: &[u8]) -> &[[u8; 1]] {
    bytes.as_chunks::<1>().0
}

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
                let i = first_float!(words, u16, float16_excess, 0x7f80, 0x7f7f, positive);
                (
                    i,
                    i.map(|i| f64::from(bf16::from_le_bytes(words[i]).to_f32())),
                )
            }
            Dtype::F16 => {
                let (words, _) = bytes.as_chunks::<2>();
                let i = first_float!(words, u16, float16_excess, 0x7c00, 0x7bff, positive);
                (
                    i,
                    i.map(|i| f64::from(f16::from_le_bytes(words[i]).to_f32())),
                )
            }
            Dtype::F32 => {
                let (words, _) = bytes.as_chunks::<4>();
                let i = first_float!(
                    words,
                    u32,
                    float32_excess,
                    0x7f80_0000,
                    0x7f7f_ffff,
                    positive
                );
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
            // Finite and > 0 is 0x01..=0x7e (zero wraps to the top); finite is anything whose
            // magnitude is not 0x7f.
            let at = if rule == Rule::E4m3Positive {
                first_excess(as_elements(bytes), |[b]| {
                    b.wrapping_sub(1).saturating_sub(0x7d)
                })
            } else {
                first_excess(as_elements(bytes), |[b]| (b & 0x7f).saturating_sub(0x7e))
            };
            Some(at.map(|i| (i as u64, format!("{} (0x{:02x})", e4m3(bytes[i]), bytes[i]))))
        }
        Rule::E8m0 if dtype == Dtype::U8 => Some(
            first_excess(as_elements(bytes), |[b]| b.saturating_sub(0xfe))
                .map(|i| (i as u64, "NaN (0xff)".to_owned())),
        ),
        // Codes are bytes whatever the container (MLX packs mxfp8's four to a U32 word).
        Rule::Fp8Codes => Some(
            first_excess(as_elements(bytes), |[b]| (b & 0x7f).saturating_sub(0x7e))
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

    /// Every 16-bit and 8-bit pattern, at every place in a run and past the last whole run, is
    /// judged as its value says: the bitwise excess against the float it decodes to.
    #[test]
    fn every_bit_pattern_is_judged_by_its_value() {
        let place = |bits: &[u8], at: usize, len: usize, width: usize| {
            let mut b = vec![0u8; len * width];
            // Filled with a good value of every rule (1.0, or the E4M3/E8M0 byte 0x38).
            let good: &[u8] = match width {
                2 => &[0x80, 0x3f],
                4 => &[0, 0, 0x80, 0x3f],
                _ => &[0x38],
            };
            for e in b.chunks_mut(width) {
                e.copy_from_slice(good);
            }
            b[at * width..(at + 1) * width].copy_from_slice(bits);
            b
        };
        let len = 2 * RUN + 3;
        let found = |rule, dtype, b: &[u8]| first_bad(rule, dtype, b).unwrap().map(|f| f.0);
        for bits in 0..=u16::MAX {
            let at = usize::from(bits) % len;
            let b = place(&bits.to_le_bytes(), at, len, 2);
            for (dtype, value) in [
                (Dtype::Bf16, bf16::from_bits(bits).to_f32()),
                (Dtype::F16, f16::from_bits(bits).to_f32()),
            ] {
                let positive = value.is_finite() && value > 0.0;
                let expect = |ok: bool| (!ok).then_some(at as u64);
                assert_eq!(
                    found(Rule::Positive, dtype, &b),
                    expect(positive),
                    "{dtype:?} {bits:#06x}"
                );
                assert_eq!(
                    found(Rule::Finite, dtype, &b),
                    expect(value.is_finite()),
                    "{dtype:?} {bits:#06x}"
                );
            }
        }
        for byte in 0..=u8::MAX {
            let at = usize::from(byte) * 3 % len;
            let b = place(&[byte], at, len, 1);
            let value = crate::dtype::e4m3_to_f32(byte);
            let expect = |ok: bool| (!ok).then_some(at as u64);
            let positive = value.is_finite() && value > 0.0;
            assert_eq!(
                found(Rule::E4m3Positive, Dtype::F8E4M3, &b),
                expect(positive),
                "{byte:#04x}"
            );
            assert_eq!(
                found(Rule::E4m3Finite, Dtype::U8, &b),
                expect(value.is_finite()),
                "{byte:#04x}"
            );
            assert_eq!(
                found(Rule::Fp8Codes, Dtype::U8, &b),
                expect(value.is_finite()),
                "{byte:#04x}"
            );
            assert_eq!(
                found(Rule::E8m0, Dtype::U8, &b),
                expect(byte != 0xff),
                "{byte:#04x}"
            );
        }
        // F32: the edges of each range, at the end of a run and in the tail.
        for bits in [
            0,
            1,
            0x7f7f_ffff,
            0x7f80_0000,
            0x7fc0_0000,
            0x8000_0000,
            0x8000_0001,
            0xff7f_ffff,
            0xff80_0000,
            u32::MAX,
        ] {
            let value = f32::from_bits(bits);
            for at in [RUN - 1, 2 * RUN + 1] {
                let b = place(&bits.to_le_bytes(), at, len, 4);
                let expect = |ok: bool| (!ok).then_some(at as u64);
                assert_eq!(
                    found(Rule::Positive, Dtype::F32, &b),
                    expect(value.is_finite() && value > 0.0),
                    "{bits:#010x}"
                );
                assert_eq!(
                    found(Rule::Finite, Dtype::F32, &b),
                    expect(value.is_finite()),
                    "{bits:#010x}"
                );
            }
        }
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
