use super::*;
use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, RngExt, SeedableRng};

/// ggml's loops for one super-block.
type Reference = fn(&[u8], &mut [f32]);

const TYPES: [(GgmlType, Reference); 3] = [
    (GgmlType::Q4_K, oracle::q4_k),
    (GgmlType::Q5_K, oracle::q5_k),
    (GgmlType::Q6_K, oracle::q6_k),
];

/// The same bits, or both NaN: a NaN's payload is not a value (ggml's and numpy's may differ).
fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Random super-blocks, the fast path against ggml's loops transcribed: the same value bit for bit.
/// Half of the blocks keep their random scales (any f16: subnormal, infinite, NaN), half have
/// readable ones, so that the codes' arithmetic is seen on finite values too.
#[test]
fn the_fast_path_is_ggmls_loops_bit_for_bit_on_random_blocks() {
    let mut rng = StdRng::seed_from_u64(0x4b5f_7175_616e_7473);
    for (ty, reference) in TYPES {
        let size = ty.type_size() as usize;
        for round in 0..400 {
            let blocks = 1 + round % 4;
            let mut bytes = vec![0u8; blocks * size];
            rng.fill_bytes(&mut bytes);
            if round % 2 == 0 {
                for block in bytes.chunks_exact_mut(size) {
                    let d = f16::from_f32(rng.random_range(-4.0f32..4.0)).to_bits();
                    let m = f16::from_f32(rng.random_range(-4.0f32..4.0)).to_bits();
                    let at = if ty == GgmlType::Q6_K { 208 } else { 0 };
                    block[at..at + 2].copy_from_slice(&d.to_le_bytes());
                    if ty != GgmlType::Q6_K {
                        block[2..4].copy_from_slice(&m.to_le_bytes());
                    }
                }
            }
            let mut fast = vec![0f32; blocks * 256];
            dequantize_k_quant(ty, &bytes, &mut fast).expect("whole blocks");
            let mut slow = vec![0f32; blocks * 256];
            for (x, y) in bytes.chunks_exact(size).zip(slow.chunks_exact_mut(256)) {
                reference(x, y);
            }
            for (i, (&a, &b)) in fast.iter().zip(&slow).enumerate() {
                assert!(
                    same(a, b),
                    "{ty} round {round} value {i}: fast {a} ({:#010x}), ggml's loops {b} ({:#010x})",
                    a.to_bits(),
                    b.to_bits()
                );
            }
        }
    }
}

/// One readable Q4_K block: scale pair 5 (the packed case) and its codes land where ggml puts them.
#[test]
fn q4_k_sub_block_5_takes_its_scale_from_the_packed_bytes() {
    let mut x = [0u8; 144];
    x[..2].copy_from_slice(&f16::from_f32(0.5).to_bits().to_le_bytes());
    x[2..4].copy_from_slice(&f16::from_f32(0.25).to_bits().to_le_bytes());
    // Scale 5: low nibble from byte 9, top bits from byte 1's; min 5: byte 9's high nibble, byte 5's.
    x[4 + 9] = 0x3a; // scale low 0xa, min low 0x3
    x[4 + 1] = 0b0100_0000; // scale top bits 01
    x[4 + 5] = 0b1000_0000; // min top bits 10
                            // Sub-block 5 is the high nibbles of code bytes 64..96.
    x[16 + 64] = 0x70;
    let mut y = [0f32; 256];
    dequantize_k_quant(GgmlType::Q4_K, &x, &mut y).expect("one block");
    let (sc, m) = (0x1a as f32, 0x23 as f32);
    assert_eq!(y[160], 0.5 * sc * 7.0 - 0.25 * m);
    assert_eq!(y[161], -(0.25 * m));
    let mut z = [0f32; 256];
    oracle::q4_k(&x, &mut z);
    assert_eq!(y, z);
}

#[test]
fn q6_k_codes_are_signed_around_32_and_scales_signed() {
    let mut x = [0u8; 210];
    x[208..].copy_from_slice(&f16::from_f32(2.0).to_bits().to_le_bytes());
    x[192 + 11] = (-3i8) as u8; // scale 11: values 176..192 (second half, quarter 1, n = 1)
    x[64 + 32 + 16] = 0x05; // ql for value 176's low nibble
    x[128 + 32 + 16] = 0b0000_1100; // qh bits 2..4 = 3 for quarter 1
    let mut y = [0f32; 256];
    dequantize_k_quant(GgmlType::Q6_K, &x, &mut y).expect("one block");
    assert_eq!(y[176], 2.0 * -3.0 * f32::from((0x05 | (3 << 4)) - 32i8));
    assert_eq!(y[177], 2.0 * -3.0 * -32.0);
    let mut z = [0f32; 256];
    oracle::q6_k(&x, &mut z);
    assert_eq!(y, z);
}

#[test]
fn other_types_and_wrong_lengths_are_errors_naming_the_type() {
    for &ty in GgmlType::ALL {
        let ok = dequantize_k_quant(ty, &[], &mut []).is_ok();
        assert_eq!(ok, k_quant(ty), "{ty}");
    }
    let e = dequantize_k_quant(GgmlType::Q8_0, &[0; 34], &mut [0f32; 32]).expect_err("q8_0");
    assert_eq!(
        e.to_string(),
        "ggml type q8_0 (id 8) is not a K-quant the gate dequantizes (q4_K, q5_K, q6_K)"
    );
    let e = dequantize_k_quant(GgmlType::Q5_K, &[0; 177], &mut [0f32; 256]).expect_err("length");
    assert!(
        matches!(
            e,
            DequantError::Length {
                ty: GgmlType::Q5_K,
                bytes: 177,
                values: 256
            }
        ),
        "{e}"
    );
    let e = dequantize_k_quant(GgmlType::Q6_K, &[0; 210], &mut [0f32; 255]).expect_err("values");
    assert!(matches!(e, DequantError::Length { .. }), "{e}");
}
