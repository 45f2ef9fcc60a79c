//! The reference: `dequantize_row_q4_K`, `_q5_K` and `_q6_K` of `ggml-quants.c` transcribed loop for
//! loop (its cursors, its `get_scale_min_k4`, its bit masks), one super-block at a time, for the
//! fast path to be held to.

use half::f16;

fn half(x: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([x[at], x[at + 1]])).to_f32()
}

/// `get_scale_min_k4`: scale and min `j` of the 12 packed bytes.
fn get_scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// `d * sc` and `min * m` of sub-block `j`, as both loops compute them.
fn scaled(j: usize, scales: &[u8], d: f32, min: f32) -> (f32, f32) {
    let (sc, m) = get_scale_min_k4(j, scales);
    (d * f32::from(sc), min * f32::from(m))
}

pub fn q4_k(x: &[u8], y: &mut [f32]) {
    let d = half(x, 0);
    let min = half(x, 2);
    let scales = &x[4..16];
    let mut q = 16;
    let mut out = 0;
    let mut is = 0;
    for _ in (0..256).step_by(64) {
        let (d1, m1) = scaled(is, scales, d, min);
        let (d2, m2) = scaled(is + 1, scales, d, min);
        for l in 0..32 {
            y[out] = d1 * f32::from(x[q + l] & 0xf) - m1;
            out += 1;
        }
        for l in 0..32 {
            y[out] = d2 * f32::from(x[q + l] >> 4) - m2;
            out += 1;
        }
        q += 32;
        is += 2;
    }
}

pub fn q5_k(x: &[u8], y: &mut [f32]) {
    let d = half(x, 0);
    let min = half(x, 2);
    let scales = &x[4..16];
    let qh = &x[16..48];
    let mut ql = 48;
    let mut out = 0;
    let mut is = 0;
    let (mut u1, mut u2) = (1u8, 2u8);
    for _ in (0..256).step_by(64) {
        let (d1, m1) = scaled(is, scales, d, min);
        let (d2, m2) = scaled(is + 1, scales, d, min);
        for l in 0..32 {
            let high = if qh[l] & u1 != 0 { 16 } else { 0 };
            y[out] = d1 * f32::from((x[ql + l] & 0xf) + high) - m1;
            out += 1;
        }
        for l in 0..32 {
            let high = if qh[l] & u2 != 0 { 16 } else { 0 };
            y[out] = d2 * f32::from((x[ql + l] >> 4) + high) - m2;
            out += 1;
        }
        ql += 32;
        is += 2;
        u1 = u1.wrapping_shl(2);
        u2 = u2.wrapping_shl(2);
    }
}

pub fn q6_k(x: &[u8], y: &mut [f32]) {
    let d = half(x, 208);
    let (mut ql, mut qh, mut sc, mut out) = (0, 128, 192, 0);
    for _ in (0..256).step_by(128) {
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((x[ql + l] & 0xf) | ((x[qh + l] & 3) << 4)) as i8 - 32;
            let q2 = ((x[ql + l + 32] & 0xf) | (((x[qh + l] >> 2) & 3) << 4)) as i8 - 32;
            let q3 = ((x[ql + l] >> 4) | (((x[qh + l] >> 4) & 3) << 4)) as i8 - 32;
            let q4 = ((x[ql + l + 32] >> 4) | (((x[qh + l] >> 6) & 3) << 4)) as i8 - 32;
            let s = |k: usize| f32::from(x[sc + is + k] as i8);
            y[out + l] = d * s(0) * f32::from(q1);
            y[out + l + 32] = d * s(2) * f32::from(q2);
            y[out + l + 64] = d * s(4) * f32::from(q3);
            y[out + l + 96] = d * s(6) * f32::from(q4);
        }
        out += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}
