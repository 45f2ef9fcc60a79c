//! bf16 bit helpers: classification and conversion without a float compare, so loops vectorize.

/// The little-endian u16 at element `i` of a plane.
#[inline(always)]
pub fn u16_at(plane: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([plane[2 * i], plane[2 * i + 1]])
}

/// A bf16 whose bits are `0 < bits < 0x7f80`: positive (sign clear), not zero, not infinite or NaN.
#[inline(always)]
pub fn is_positive_finite(bits: u16) -> bool {
    bits.wrapping_sub(1) < 0x7f7f
}

/// A bf16 whose exponent is not all ones.
#[inline(always)]
pub fn is_finite(bits: u16) -> bool {
    bits & 0x7f80 != 0x7f80
}

/// Maps an f32 to a u32 whose integer order is `f32::total_cmp`'s order.
#[inline(always)]
pub fn order_key(x: f32) -> u32 {
    // Negative: flip every bit (larger magnitude sorts lower). Positive: set the sign bit.
    let bits = x.to_bits();
    bits ^ (((bits as i32 >> 31) as u32) | 0x8000_0000)
}

pub fn from_order_key(key: u32) -> f32 {
    if key & 0x8000_0000 != 0 {
        f32::from_bits(key & 0x7fff_ffff)
    } else {
        f32::from_bits(!key)
    }
}
