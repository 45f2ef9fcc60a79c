use super::*;
use crate::gguf::GgmlType::{self, *};

/// ggml's `type_traits` (`ggml.c`) with `sizeof(block_*)` worked out from `ggml-common.h`: id,
/// elements per block, bytes per block, for every type ggml defines.
const GGML: &[(GgmlType, u32, u64, u64)] = &[
    (F32, 0, 1, 4),
    (F16, 1, 1, 2),
    (Q4_0, 2, 32, 18),
    (Q4_1, 3, 32, 20),
    (Q5_0, 6, 32, 22),
    (Q5_1, 7, 32, 24),
    (Q8_0, 8, 32, 34),
    (Q8_1, 9, 32, 36),
    (Q2_K, 10, 256, 84),
    (Q3_K, 11, 256, 110),
    (Q4_K, 12, 256, 144),
    (Q5_K, 13, 256, 176),
    (Q6_K, 14, 256, 210),
    (Q8_K, 15, 256, 292),
    (IQ2_XXS, 16, 256, 66),
    (IQ2_XS, 17, 256, 74),
    (IQ3_XXS, 18, 256, 98),
    (IQ1_S, 19, 256, 50),
    (IQ4_NL, 20, 32, 18),
    (IQ3_S, 21, 256, 110),
    (IQ2_S, 22, 256, 82),
    (IQ4_XS, 23, 256, 136),
    (I8, 24, 1, 1),
    (I16, 25, 1, 2),
    (I32, 26, 1, 4),
    (I64, 27, 1, 8),
    (F64, 28, 1, 8),
    (IQ1_M, 29, 256, 56),
    (BF16, 30, 1, 2),
    (TQ1_0, 34, 256, 54),
    (TQ2_0, 35, 256, 66),
    (MXFP4, 39, 32, 17),
    (NVFP4, 40, 64, 36),
    (Q1_0, 41, 128, 18),
    (Q2_0, 42, 64, 18),
];

#[test]
fn every_type_has_ggmls_id_block_and_size() {
    assert_eq!(GGML.len(), GgmlType::ALL.len());
    for &(ty, id, block, size) in GGML {
        assert_eq!(
            (ty.id(), ty.block_size(), ty.type_size()),
            (id, block, size),
            "{ty}"
        );
        assert_eq!(GgmlType::from_id(id), Some(ty));
    }
}

#[test]
fn every_scale_lies_inside_its_block_and_apart_from_the_others() {
    for &ty in GgmlType::ALL {
        let mut used = vec![false; ty.type_size() as usize];
        for scale in block_scales(ty) {
            let width = match scale.kind {
                ScaleKind::F16 => 2,
                ScaleKind::F32 => 4,
                ScaleKind::E8m0 => 1,
                ScaleKind::Iq1mNibbles => 8,
            };
            let end = scale.offset + width;
            assert!(end <= used.len(), "{ty} {}", scale.name);
            assert!(
                used[scale.offset..end].iter().all(|u| !u),
                "{ty} {}",
                scale.name
            );
            used[scale.offset..end].fill(true);
        }
    }
}

/// Every type whose elements are values or whose blocks have scales that can be non-finite.
#[test]
fn the_types_without_scales_are_the_float_integer_and_nvfp4_ones() {
    let without: Vec<GgmlType> = GgmlType::ALL
        .iter()
        .copied()
        .filter(|&t| block_scales(t).is_empty())
        .collect();
    assert_eq!(without, [F32, F16, I8, I16, I32, I64, F64, BF16, NVFP4]);
}

const F16_NAN: u16 = 0x7e00;
const F16_INF: u16 = 0x7c00;

/// Writes a scale's value as it is stored (for IQ1_M, into the top nibbles of its four words).
fn put(block: &mut [u8], scale: &Scale, bits: u32) {
    let at = scale.offset;
    match scale.kind {
        ScaleKind::F16 => block[at..at + 2].copy_from_slice(&(bits as u16).to_le_bytes()),
        ScaleKind::F32 => block[at..at + 4].copy_from_slice(&bits.to_le_bytes()),
        ScaleKind::E8m0 => block[at] = bits as u8,
        ScaleKind::Iq1mNibbles => {
            for i in 0..4 {
                let nibble = ((bits >> (4 * i)) & 0xf) as u16;
                let w = u16::from_le_bytes([block[at + 2 * i], block[at + 2 * i + 1]]);
                let w = (w & 0x0fff) | (nibble << 12);
                block[at + 2 * i..at + 2 * i + 2].copy_from_slice(&w.to_le_bytes());
            }
        }
    }
}

/// A non-finite value of the scale's kind: NaN or +infinity.
fn bad(kind: ScaleKind, nan: bool) -> Option<u32> {
    match (kind, nan) {
        (ScaleKind::F16 | ScaleKind::Iq1mNibbles, true) => Some(F16_NAN.into()),
        (ScaleKind::F16 | ScaleKind::Iq1mNibbles, false) => Some(F16_INF.into()),
        (ScaleKind::F32, true) => Some(0x7fc0_0000),
        (ScaleKind::F32, false) => Some(0x7f80_0000),
        (ScaleKind::E8m0, true) => Some(0xff),
        // E8M0 has no infinity.
        (ScaleKind::E8m0, false) => None,
    }
}

#[test]
fn a_non_finite_scale_is_named_by_its_block_and_field_in_every_type() {
    for &ty in GgmlType::ALL {
        let size = ty.type_size() as usize;
        assert_eq!(scan_values(ty, &vec![0; 3 * size]), Ok(()), "{ty} zeros");
        for scale in block_scales(ty) {
            for nan in [true, false] {
                let Some(bits) = bad(scale.kind, nan) else {
                    continue;
                };
                // Blocks 1 and 2 are both bad: block 1 is named.
                let mut bytes = vec![0u8; 3 * size];
                put(&mut bytes[size..2 * size], scale, bits);
                put(&mut bytes[2 * size..], scale, bits);
                let what = if nan {
                    NotFinite::NaN
                } else {
                    NotFinite::PlusInfinity
                };
                assert_eq!(
                    scan_values(ty, &bytes),
                    Err(Fault::Scale {
                        block: 1,
                        scale: scale.name,
                        bits,
                        what
                    }),
                    "{ty} {}",
                    scale.name
                );
            }
        }
    }
}

#[test]
fn a_nan_dmin_and_a_minus_infinite_d_are_found_where_ggml_keeps_them() {
    // Q4_K: d, dmin first; Q2_K: d, dmin last; Q6_K: d last.
    let mut q4_k = [0u8; 144];
    q4_k[2..4].copy_from_slice(&F16_NAN.to_le_bytes());
    assert!(matches!(
        scan_values(Q4_K, &q4_k),
        Err(Fault::Scale {
            block: 0,
            scale: "dmin",
            what: NotFinite::NaN,
            ..
        })
    ));
    let mut q2_k = [0u8; 84];
    q2_k[82..84].copy_from_slice(&F16_NAN.to_le_bytes());
    let e = scan_values(Q2_K, &q2_k).expect_err("dmin");
    assert_eq!(e.to_string(), "block 0's scale dmin is NaN (bits 0x7e00)");
    let mut q6_k = [0u8; 210];
    q6_k[208..].copy_from_slice(&0xfc00u16.to_le_bytes());
    assert!(matches!(
        scan_values(Q6_K, &q6_k),
        Err(Fault::Scale {
            scale: "d",
            what: NotFinite::MinusInfinity,
            ..
        })
    ));
    // Both of a block's scales bad: d, the first in the struct, is named.
    let mut q5_1 = [0u8; 24];
    q5_1[..2].copy_from_slice(&F16_INF.to_le_bytes());
    q5_1[2..4].copy_from_slice(&F16_NAN.to_le_bytes());
    assert!(matches!(
        scan_values(Q5_1, &q5_1),
        Err(Fault::Scale { scale: "d", .. })
    ));
}

#[test]
fn codes_are_not_scales_and_the_largest_finite_scales_pass() {
    // Every byte but the scales 0xff: the codes of a block are never judged.
    for &ty in GgmlType::ALL {
        if block_scales(ty).is_empty() {
            continue;
        }
        let mut block = vec![0xffu8; ty.type_size() as usize];
        for scale in block_scales(ty) {
            let finite = match scale.kind {
                ScaleKind::F16 | ScaleKind::Iq1mNibbles => 0x7bff, // 65504
                ScaleKind::F32 => 0x7f7f_ffff,
                ScaleKind::E8m0 => 0xfe,
            };
            put(&mut block, scale, finite);
        }
        assert_eq!(scan_values(ty, &block), Ok(()), "{ty}");
    }
    // MXFP4's e of 0xff is NaN; 0xfe is 2^127.
    assert!(matches!(
        scan_values(MXFP4, &[0xff; 17]),
        Err(Fault::Scale {
            scale: "e",
            bits: 0xff,
            what: NotFinite::NaN,
            ..
        })
    ));
    // NVFP4's scales decode finite for every byte.
    assert_eq!(scan_values(NVFP4, &[0xff; 72]), Ok(()));
}

#[test]
fn float_tensors_are_scanned_value_by_value() {
    let mut f32s = vec![0u8; 4 * 200];
    f32s[4 * 130..4 * 131].copy_from_slice(&f32::NEG_INFINITY.to_le_bytes());
    f32s[4 * 150..4 * 151].copy_from_slice(&f32::NAN.to_le_bytes());
    assert_eq!(
        scan_values(F32, &f32s),
        Err(Fault::Element {
            index: 130,
            bits: 0xff80_0000,
            what: NotFinite::MinusInfinity
        })
    );
    let mut f16s = vec![0u8; 2 * 70];
    f16s[2 * 69..].copy_from_slice(&0x7c01u16.to_le_bytes());
    assert_eq!(
        scan_values(F16, &f16s),
        Err(Fault::Element {
            index: 69,
            bits: 0x7c01,
            what: NotFinite::NaN
        })
    );
    let mut bf16s = vec![0u8; 2 * 3];
    bf16s[2..4].copy_from_slice(&0x7f80u16.to_le_bytes());
    assert_eq!(
        scan_values(BF16, &bf16s),
        Err(Fault::Element {
            index: 1,
            bits: 0x7f80,
            what: NotFinite::PlusInfinity
        })
    );
    assert!(matches!(
        scan_values(F64, &f64::NAN.to_le_bytes()),
        Err(Fault::Element { index: 0, .. })
    ));
    // The largest finite values, subnormals and negative zero are finite.
    let mut fine = Vec::new();
    for v in [f32::MAX, f32::MIN, f32::MIN_POSITIVE / 2.0, -0.0] {
        fine.extend_from_slice(&v.to_le_bytes());
    }
    assert_eq!(scan_values(F32, &fine), Ok(()));
    assert_eq!(scan_values(F16, &[0xff, 0x7b, 0x01, 0x80]), Ok(()));
    assert_eq!(scan_values(BF16, &[0x7f, 0x7f]), Ok(()));
    // Integers have no non-finite values.
    assert_eq!(scan_values(I32, &[0xff; 16]), Ok(()));
}

#[test]
fn a_run_that_is_not_whole_blocks_is_a_fault_not_a_panic() {
    for &ty in GgmlType::ALL {
        let size = ty.type_size() as usize;
        if size > 1 {
            assert_eq!(
                scan_values(ty, &vec![0; size + 1]),
                Err(Fault::NotWholeBlocks {
                    bytes: size as u64 + 1
                }),
                "{ty}"
            );
        }
        assert_eq!(scan_values(ty, &[]), Ok(()), "{ty}");
    }
}

#[test]
fn any_bytes_give_an_answer() {
    let mut state = 0x5ca1_u64;
    let mut bytes = vec![0u8; 4096];
    for _ in 0..64 {
        for b in &mut bytes {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            *b = (state >> 56) as u8;
        }
        for &ty in GgmlType::ALL {
            for len in [0, 1, 17, 292, 4096] {
                let _ = scan_values(ty, &bytes[..len]);
            }
        }
    }
}

#[test]
fn a_tensor_fault_names_the_tensor_and_its_type() {
    let mut data = vec![0u8; 2 * 176];
    data[176 + 2..176 + 4].copy_from_slice(&F16_NAN.to_le_bytes());
    let info = TensorInfo {
        name: "blk.0.ffn_up.weight".into(),
        dims: vec![256, 2],
        ty: Q5_K,
        offset: 0,
        bytes: 2 * 176,
    };
    let e = scan_tensor(&info, &data).expect_err("NaN dmin");
    assert_eq!(
        e.to_string(),
        "tensor blk.0.ffn_up.weight (q5_K): block 1's scale dmin is NaN (bits 0x7e00)"
    );
    assert_eq!(scan_tensor(&info, &data[..176]).map_err(|e| e.fault), {
        Err(Fault::NotWholeBlocks { bytes: 176 })
    });
    data[176 + 3] = 0;
    assert_eq!(scan_tensor(&info, &data), Ok(()));
}
