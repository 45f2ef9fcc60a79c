//! One ggml block of each quantized type a synthetic GGUF draft is written in, from its values.
//! Each is laid out as ggml's `block_*` struct is (the gate's dequantizer, held bit for bit against
//! gguf-py's, reads them back); codes are chosen by rounding to the nearest step, as ggml's
//! reference quantizers do, so every value dequantizes within one step of itself.

use half::f16;

fn f16_bytes(v: f32) -> [u8; 2] {
    f16::from_f32(v).to_bits().to_le_bytes()
}

/// The value of largest magnitude, its sign kept (ggml's `max` in the symmetric quantizers).
fn signed_max(x: &[f32]) -> f32 {
    x.iter()
        .copied()
        .fold(0.0f32, |m, v| if v.abs() > m.abs() { v } else { m })
}

fn inverse(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// The minimum, step and inverse step of an asymmetric block whose codes run `0..=top`.
fn min_and_step(x: &[f32], top: f32) -> (f32, f32, f32) {
    let min = x.iter().copied().fold(f32::MAX, f32::min);
    let max = x.iter().copied().fold(-f32::MAX, f32::max);
    let d = (max - min) / top;
    (min, d, inverse(d))
}

/// `block_q4_0`: f16 `d`, 16 bytes of codes; `x = (q - 8) * d`, `d = max / -8`.
pub fn q4_0(x: &[f32]) -> [u8; 18] {
    let d = signed_max(x) / -8.0;
    let id = inverse(d);
    let mut out = [0u8; 18];
    out[..2].copy_from_slice(&f16_bytes(d));
    let code = |v: f32| ((v * id + 8.5) as i8).clamp(0, 15) as u8;
    for j in 0..16 {
        out[2 + j] = code(x[j]) | (code(x[j + 16]) << 4);
    }
    out
}

/// Element `j`'s five-bit code split into a nibble in `qs` and a bit in the 32-bit `qh`, as
/// `block_q5_0` and `block_q5_1` store them.
fn five_bit(codes: &[u8; 32], qh: &mut [u8], qs: &mut [u8]) {
    let mut high = 0u32;
    for j in 0..16 {
        let (a, b) = (codes[j], codes[j + 16]);
        qs[j] = (a & 0x0f) | ((b & 0x0f) << 4);
        high |= u32::from(a >> 4) << j;
        high |= u32::from(b >> 4) << (j + 16);
    }
    qh.copy_from_slice(&high.to_le_bytes());
}

/// `block_q5_0`: f16 `d`, 4 bytes of high bits, 16 of nibbles; `x = (q - 16) * d`, `d = max / -16`.
pub fn q5_0(x: &[f32]) -> [u8; 22] {
    let d = signed_max(x) / -16.0;
    let id = inverse(d);
    let mut codes = [0u8; 32];
    for (c, &v) in codes.iter_mut().zip(x) {
        *c = ((v * id + 16.5) as i8).clamp(0, 31) as u8;
    }
    let mut out = [0u8; 22];
    out[..2].copy_from_slice(&f16_bytes(d));
    let (qh, qs) = out[2..].split_at_mut(4);
    five_bit(&codes, qh, qs);
    out
}

/// `block_q5_1`: f16 `d` and `m`, 4 bytes of high bits, 16 of nibbles; `x = q * d + m`.
pub fn q5_1(x: &[f32]) -> [u8; 24] {
    let (min, d, id) = min_and_step(x, 31.0);
    let mut codes = [0u8; 32];
    for (c, &v) in codes.iter_mut().zip(x) {
        *c = (((v - min) * id + 0.5) as u8).min(31);
    }
    let mut out = [0u8; 24];
    out[..2].copy_from_slice(&f16_bytes(d));
    out[2..4].copy_from_slice(&f16_bytes(min));
    let (qh, qs) = out[4..].split_at_mut(4);
    five_bit(&codes, qh, qs);
    out
}

/// `block_q8_0`: f16 `d`, 32 signed codes; `d = amax / 127`.
pub fn q8_0(x: &[f32]) -> [u8; 34] {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = inverse(d);
    let mut out = [0u8; 34];
    out[..2].copy_from_slice(&f16_bytes(d));
    for j in 0..32 {
        out[2 + j] = ((x[j] * id).round() as i8) as u8;
    }
    out
}

/// `block_q4_1`: f16 `d` and `m`, 16 bytes of codes, as `quantize_row_q4_1_ref` writes it (codes
/// chosen against the unrounded `f32` scale and minimum).
pub fn q4_1(x: &[f32]) -> [u8; 20] {
    let (min, d, id) = min_and_step(x, 15.0);
    let mut out = [0u8; 20];
    out[..2].copy_from_slice(&f16_bytes(d));
    out[2..4].copy_from_slice(&f16_bytes(min));
    for j in 0..16 {
        let code = |v: f32| (((v - min) * id + 0.5) as i8).min(15) as u8;
        out[4 + j] = code(x[j]) | (code(x[j + 16]) << 4);
    }
    out
}

/// The scales of a Q4_K or Q5_K super-block (256 values, 8 sub-blocks of 32 whose codes run
/// `0..=top`): per sub-block a min/max scale and min (the min never above 0), both quantized to 6
/// bits against the super-block's f16 `d` and `dmin`, packed into 12 bytes by ggml's three-row
/// layout. With each sub-block's scale and min as rounded, which the codes are chosen against.
struct KScales {
    head: [u8; 16],
    step: [f32; 8],
    min: [f32; 8],
}

fn k_scales(x: &[f32], top: f32) -> KScales {
    let (mut scales, mut mins) = ([0f32; 8], [0f32; 8]);
    for (j, sub) in x.chunks_exact(32).enumerate() {
        let min = sub.iter().copied().fold(f32::MAX, f32::min).min(0.0);
        let max = sub.iter().copied().fold(-f32::MAX, f32::max);
        scales[j] = (max - min) / top;
        mins[j] = -min;
    }
    let (max_scale, max_min) = (
        scales.iter().copied().fold(0.0f32, f32::max),
        mins.iter().copied().fold(0.0f32, f32::max),
    );
    let six = |v: f32, top: f32| {
        if top > 0.0 {
            (v * 63.0 / top).round().clamp(0.0, 63.0) as u8
        } else {
            0
        }
    };
    let sc: Vec<u8> = scales.iter().map(|&v| six(v, max_scale)).collect();
    let m: Vec<u8> = mins.iter().map(|&v| six(v, max_min)).collect();
    let (d, dmin) = (
        f16::from_f32(max_scale / 63.0),
        f16::from_f32(max_min / 63.0),
    );
    let mut head = [0u8; 16];
    head[..2].copy_from_slice(&d.to_bits().to_le_bytes());
    head[2..4].copy_from_slice(&dmin.to_bits().to_le_bytes());
    let packed = &mut head[4..16];
    for j in 0..8 {
        if j < 4 {
            packed[j] = sc[j];
            packed[j + 4] = m[j];
        } else {
            packed[j + 4] = (sc[j] & 0x0f) | ((m[j] & 0x0f) << 4);
            packed[j - 4] |= (sc[j] >> 4) << 6;
            packed[j] |= (m[j] >> 4) << 6;
        }
    }
    let mut out = KScales {
        head,
        step: [0.0; 8],
        min: [0.0; 8],
    };
    for j in 0..8 {
        out.step[j] = d.to_f32() * f32::from(sc[j]);
        out.min[j] = dmin.to_f32() * f32::from(m[j]);
    }
    out
}

/// Code of `v` in a K-quant sub-block of `step` and `min`, within `0..=top`.
fn k_code(v: f32, step: f32, min: f32, top: f32) -> u8 {
    if step > 0.0 {
        ((v + min) / step).round().clamp(0.0, top) as u8
    } else {
        0
    }
}

/// A K-quant super-block of `N` bytes: its scales, then each sub-block `j`'s code `q` of element
/// `l` put in place by `place(out, j, l, q)`.
fn k_block<const N: usize>(
    x: &[f32],
    top: f32,
    place: fn(&mut [u8; N], usize, usize, u8),
) -> [u8; N] {
    let scales = k_scales(x, top);
    let mut out = [0u8; N];
    out[..16].copy_from_slice(&scales.head);
    for (j, sub) in x.chunks_exact(32).enumerate() {
        for (l, &v) in sub.iter().enumerate() {
            place(
                &mut out,
                j,
                l,
                k_code(v, scales.step[j], scales.min[j], top),
            );
        }
    }
    out
}

/// `block_q4_K`: the super-block's scales, then 128 bytes of codes (sub-blocks `2i` and `2i + 1`
/// share 32 bytes, low and high nibbles).
pub fn q4_k(x: &[f32]) -> [u8; 144] {
    k_block(x, 15.0, |out, j, l, q| {
        out[16 + 32 * (j / 2) + l] |= q << (4 * (j % 2));
    })
}

/// `block_q5_K`: the super-block's scales, 32 bytes of fifth bits (bit `j` of byte `l` for element
/// `l` of sub-block `j`), then the low nibbles as `block_q4_K` lays them out.
pub fn q5_k(x: &[f32]) -> [u8; 176] {
    k_block(x, 31.0, |out, j, l, q| {
        out[16 + l] |= (q >> 4) << j;
        out[48 + 32 * (j / 2) + l] |= (q & 0x0f) << (4 * (j % 2));
    })
}

/// `block_q6_K`: 128 bytes of low nibbles, 64 of high bit pairs, 16 signed scales (one per 16
/// values) and an f16 `d`; `x = d * scale * (q - 32)`.
pub fn q6_k(x: &[f32]) -> [u8; 210] {
    let mut steps = [0f32; 16];
    for (s, sub) in x.chunks_exact(16).enumerate() {
        steps[s] = sub.iter().fold(0.0f32, |a, v| a.max(v.abs())) / 31.0;
    }
    let top = steps.iter().copied().fold(0.0f32, f32::max);
    let d = f16::from_f32(top / 127.0);
    let mut scales = [0i8; 16];
    let mut codes = [0u8; 256];
    for (s, sub) in x.chunks_exact(16).enumerate() {
        let sc = if d.to_f32() > 0.0 {
            (steps[s] / d.to_f32()).round().clamp(-128.0, 127.0) as i8
        } else {
            0
        };
        scales[s] = sc;
        let step = d.to_f32() * f32::from(sc);
        for (l, &v) in sub.iter().enumerate() {
            let q = if step != 0.0 {
                (v / step).round().clamp(-32.0, 31.0) as i32
            } else {
                0
            };
            codes[16 * s + l] = (q + 32) as u8;
        }
    }
    let mut out = [0u8; 210];
    for half in 0..2 {
        let (ql, qh, q) = (
            64 * half,
            128 + 32 * half,
            &codes[128 * half..128 * half + 128],
        );
        for l in 0..32 {
            let (a, b, c, e) = (q[l], q[l + 32], q[l + 64], q[l + 96]);
            out[ql + l] = (a & 0x0f) | ((c & 0x0f) << 4);
            out[ql + l + 32] = (b & 0x0f) | ((e & 0x0f) << 4);
            out[qh + l] = (a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6);
        }
    }
    for (o, sc) in out[192..208].iter_mut().zip(scales) {
        *o = sc as u8;
    }
    out[208..].copy_from_slice(&d.to_bits().to_le_bytes());
    out
}

pub(crate) mod tests {
    use super::*;
    use dflash_gate::__private::gguf::{dequantize, dequantize_k_quant, k_quant, GgmlType};

    unit_tests![
        every_block_dequantizes_within_a_step_of_its_values,
        a_q4_k_super_block_dequantizes_within_half_a_step_of_its_values
    ];

    /// Values of a few magnitudes, both signs, a sub-block of larger ones among them.
    fn values() -> Vec<f32> {
        (0..256)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.001 * (1.0 + (i / 32) as f32))
            .collect()
    }

    fn each_block(ty: GgmlType, x: &[f32]) -> Vec<u8> {
        let per = ty.block_size() as usize;
        x.chunks_exact(per)
            .flat_map(|b| match ty {
                GgmlType::Q4_0 => q4_0(b).to_vec(),
                GgmlType::Q4_1 => q4_1(b).to_vec(),
                GgmlType::Q5_0 => q5_0(b).to_vec(),
                GgmlType::Q5_1 => q5_1(b).to_vec(),
                GgmlType::Q8_0 => q8_0(b).to_vec(),
                GgmlType::Q4_K => q4_k(b).to_vec(),
                GgmlType::Q5_K => q5_k(b).to_vec(),
                _ => q6_k(b).to_vec(),
            })
            .collect()
    }

    fn every_block_dequantizes_within_a_step_of_its_values() {
        use GgmlType::*;
        let x = values();
        for (ty, levels) in [
            (Q4_0, 15.0),
            (Q4_1, 15.0),
            (Q5_0, 31.0),
            (Q5_1, 31.0),
            (Q8_0, 254.0),
            (Q4_K, 15.0),
            (Q5_K, 31.0),
            (Q6_K, 62.0),
        ] {
            let blocks = each_block(ty, &x);
            assert_eq!(
                blocks.len() as u64,
                x.len() as u64 / ty.block_size() * ty.type_size(),
                "{ty}: block size"
            );
            let mut y = vec![0f32; x.len()];
            if k_quant(ty) {
                dequantize_k_quant(ty, &blocks, &mut y).expect("dequantizes");
            } else {
                dequantize(ty, &blocks, &mut y).expect("dequantizes");
            }
            // Within one step of the whole range's spread, a bound every sub-block's own step is
            // under (a wrong layout puts values tens of steps away).
            let spread = x.iter().fold(0.0f32, |a, v| a.max(v.abs())) * 2.0;
            for (i, (a, b)) in x.iter().zip(&y).enumerate() {
                assert!(
                    (a - b).abs() <= spread / levels,
                    "{ty}: element {i}: {a} became {b}"
                );
            }
        }
    }

    fn a_q4_k_super_block_dequantizes_within_half_a_step_of_its_values() {
        let values: Vec<f32> = (0..256)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.001 * (1.0 + (i / 32) as f32))
            .collect();
        let block = q4_k(&values);
        let mut out = vec![0f32; 256];
        dequantize_k_quant(GgmlType::Q4_K, &block, &mut out).expect("dequantizes");
        for (j, (x, y)) in values.chunks(32).zip(out.chunks(32)).enumerate() {
            let spread =
                x.iter().copied().fold(0.0f32, f32::max) - x.iter().copied().fold(0.0f32, f32::min);
            for (a, b) in x.iter().zip(y) {
                assert!(
                    (a - b).abs() <= spread / 15.0,
                    "sub-block {j}: {a} became {b}"
                );
            }
        }
    }
}
