//! Where the header scan's ordinary keys go: counted when below the median's bracket, kept when
//! inside it (about a sixteenth of them), so the median is selected from few keys.
//!
//! A whole tile's 256 keys are offered at once. Kept one at a time, each key's store waits on the
//! count of those kept before it, and that chain was a third of the scan; with AVX2, eight keys are
//! judged at once and the ones inside are packed to the front by one permutation from a table.

use super::GROUPS_PER_TILE;

/// Proof that the processor runs AVX2.
#[derive(Clone, Copy, Debug)]
pub(super) struct Wide(());

impl Wide {
    /// # Safety
    /// Only where the processor has AVX2 (inside a function built for it, say).
    pub(super) unsafe fn asserted() -> Option<Wide> {
        Some(Wide(()))
    }
}

pub(super) struct Sink<'k> {
    pub(super) lo: u32,
    pub(super) width: u32,
    /// Ordinary keys below the bracket.
    pub(super) below: u64,
    /// Ordinary keys in all.
    pub(super) ordinary: u64,
    pub(super) keys: &'k mut Vec<u32>,
}

impl Sink<'_> {
    pub(super) fn offer(&mut self, key: u32) {
        self.ordinary += 1;
        self.below += u64::from(key < self.lo);
        if self.inside(key) {
            self.keys.push(key);
        }
    }

    fn inside(&self, key: u32) -> bool {
        key.wrapping_sub(self.lo) <= self.width
    }

    /// A whole tile's keys, in order.
    #[inline(always)]
    pub(super) fn offer_tile(&mut self, tile_keys: &[u32; GROUPS_PER_TILE], wide: Option<Wide>) {
        self.ordinary += GROUPS_PER_TILE as u64;
        #[cfg(target_arch = "x86_64")]
        if let Some(wide) = wide {
            // SAFETY: a `Wide` exists only where the processor has AVX2.
            return unsafe { self.offer_tile_avx2(tile_keys, wide) };
        }
        let _ = wide;
        self.offer_tile_scalar(tile_keys);
    }

    /// Branch-free: each key is written at the cursor, which moves past those inside.
    fn offer_tile_scalar(&mut self, tile_keys: &[u32; GROUPS_PER_TILE]) {
        let mut kept = [0u32; GROUPS_PER_TILE];
        let (mut inside, mut below) = (0usize, 0u64);
        for &key in tile_keys {
            below += u64::from(key < self.lo);
            kept[inside] = key;
            inside += usize::from(self.inside(key));
        }
        self.below += below;
        self.keys.extend_from_slice(&kept[..inside]);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn offer_tile_avx2(&mut self, tile_keys: &[u32; GROUPS_PER_TILE], _: Wide) {
        use core::arch::x86_64::*;
        // AVX2 compares signed lanes: flipping the top bit of both sides orders them unsigned.
        let flip = _mm256_set1_epi32(i32::MIN);
        let lo = _mm256_set1_epi32(self.lo as i32);
        let lo_flipped = _mm256_xor_si256(lo, flip);
        let width_flipped = _mm256_set1_epi32((self.width ^ 0x8000_0000) as i32);
        let mut kept = [0u32; GROUPS_PER_TILE];
        let (mut inside, mut below) = (0usize, _mm256_setzero_si256());
        for chunk in tile_keys.as_chunks::<8>().0 {
            // SAFETY: an unaligned load of 8 u32s.
            let keys = unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) };
            // A lane is -1 where the key is below the bracket.
            let under = _mm256_cmpgt_epi32(lo_flipped, _mm256_xor_si256(keys, flip));
            below = _mm256_sub_epi32(below, under);
            let offset = _mm256_xor_si256(_mm256_sub_epi32(keys, lo), flip);
            let outside = _mm256_cmpgt_epi32(offset, width_flipped);
            let mask = !_mm256_movemask_ps(_mm256_castsi256_ps(outside)) as usize & 0xff;
            let packed = _mm256_permutevar8x32_epi32(keys, PACK[mask]);
            // `inside` is at most 248 here (8 keys a chunk, 32 chunks): the 8 lanes stored fit.
            if let Some(to) = kept.get_mut(inside..inside + 8) {
                // SAFETY: an unaligned store of 8 u32s into 8 u32s.
                unsafe { _mm256_storeu_si256(to.as_mut_ptr().cast(), packed) };
            }
            inside += mask.count_ones() as usize;
        }
        let mut lanes = [0u32; 8];
        // SAFETY: an unaligned store of 8 u32s into 8 u32s.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), below) };
        self.below += lanes.iter().map(|&n| u64::from(n)).sum::<u64>();
        self.keys.extend_from_slice(&kept[..inside]);
    }
}

/// For each 8-bit mask, the lanes whose bit is set, in order, then the rest: the permutation that
/// packs the kept keys to the front.
#[cfg(target_arch = "x86_64")]
static PACK: [core::arch::x86_64::__m256i; 256] = {
    let mut table = [[0i32; 8]; 256];
    let mut mask = 0;
    while mask < 256 {
        let mut at = 0;
        let mut lane = 0;
        while lane < 8 {
            if mask & (1 << lane) != 0 {
                table[mask][at] = lane;
                at += 1;
            }
            lane += 1;
        }
        mask += 1;
    }
    // SAFETY: [i32; 8] and __m256i are both 32 plain bytes.
    unsafe { core::mem::transmute::<[[i32; 8]; 256], [core::arch::x86_64::__m256i; 256]>(table) }
};

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(keys: &[u32; GROUPS_PER_TILE], lo: u32, width: u32, wide: bool) -> (u64, Vec<u32>) {
        let mut kept = Vec::new();
        let mut sink = Sink {
            lo,
            width,
            below: 0,
            ordinary: 0,
            keys: &mut kept,
        };
        if wide {
            // SAFETY: only called after AVX2 was detected.
            let token = unsafe { Wide::asserted() };
            sink.offer_tile(keys, token);
        } else {
            sink.offer_tile(keys, None);
        }
        assert_eq!(sink.ordinary, GROUPS_PER_TILE as u64);
        (sink.below, kept)
    }

    /// The vector path keeps and counts exactly what the scalar path does, at the edges of the
    /// unsigned order too (keys and brackets at 0, at the top bit, at u32::MAX).
    #[test]
    fn the_vector_sink_is_the_scalar_sink() {
        #[cfg(target_arch = "x86_64")]
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut random = crate::testing::seeded(0x2545_f491_4f6c_dd1d);
        let mut next = move || random() as u32;
        let edges = [0u32, 1, 0x7fff_ffff, 0x8000_0000, 0x8000_0001, u32::MAX];
        let mut seen_some_kept = false;
        for round in 0..400 {
            let keys: [u32; GROUPS_PER_TILE] = core::array::from_fn(|i| match round % 3 {
                0 => next(),
                1 => edges[(next() as usize + i) % edges.len()],
                _ => 0x8000_0000u32.wrapping_add(next() >> 4),
            });
            let lo = if round % 5 == 0 {
                edges[round % edges.len()]
            } else {
                next()
            };
            let width = match round % 4 {
                0 => u32::MAX,
                1 => 0,
                _ => next() >> 3,
            };
            let scalar = offered(&keys, lo, width, false);
            seen_some_kept |= !scalar.1.is_empty() && scalar.1.len() < GROUPS_PER_TILE;
            assert_eq!(offered(&keys, lo, width, true), scalar, "round {round}");
        }
        assert!(seen_some_kept);
    }
}
