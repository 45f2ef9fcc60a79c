//! The vectorized kernels of `source.q4_1` (AVX2 and FMA), held to the exact path: trials rather
//! than the library's unit tests, because where the processor lacks the features they are ignored,
//! with the reason, when the list is built (libtest's `#[ignore]` is fixed at compile time, and a
//! test that returns early there would pass having checked nothing).
//!
//! `DFLASH_GATE_SUITE_ASSUME_NO_AVX2` (any value) makes the suite list them as on such a processor,
//! to see that listing on one that has the features.

use dflash_gate::__private::source::kernels::{self, wide};
use dflash_gate::__private::tile::dequant::DecodedTile;
use dflash_gate::__private::tile::TILE_BYTES;
use half::bf16;
use libtest_mimic::{Completion, Failed, Trial};
use wide::{tile, Rows, Scratch, TileSums, ROW_BYTES};

/// Set to list the trials that need AVX2 and FMA as ignored, as on a processor without them.
const ASSUME_ABSENT: &str = "DFLASH_GATE_SUITE_ASSUME_NO_AVX2";

/// Where the codes start in a tile, and how far apart its two 16-row halves are (spec section 4.1).
const CODES: usize = 1024;
const CODES_PER_HALF: usize = 2048;

pub fn trials() -> Vec<Trial> {
    let absent = wide_absent();
    let mut out: Vec<Trial> = [
        (
            "a_faithful_tile_is_vouched_for_with_the_exact_statistics",
            a_faithful_tile_is_vouched_for_with_the_exact_statistics as fn(),
        ),
        (
            "a_tile_with_an_element_out_of_bound_is_never_vouched_for",
            a_tile_with_an_element_out_of_bound_is_never_vouched_for as fn(),
        ),
        (
            "non_finite_source_values_and_broken_headers_go_to_the_exact_path",
            non_finite_source_values_and_broken_headers_go_to_the_exact_path as fn(),
        ),
        (
            "a_scale_whose_reciprocal_overflows_goes_to_the_exact_path",
            a_scale_whose_reciprocal_overflows_goes_to_the_exact_path as fn(),
        ),
        (
            "whatever_a_few_flipped_bytes_do_a_vouched_tile_is_in_bound",
            whatever_a_few_flipped_bytes_do_a_vouched_tile_is_in_bound as fn(),
        ),
        (
            "a_tile_of_tiny_values_is_left_to_the_exact_sums",
            a_tile_of_tiny_values_is_left_to_the_exact_sums as fn(),
        ),
        (
            "random_codes_are_not_vouched_for",
            random_codes_are_not_vouched_for as fn(),
        ),
        (
            "codes_are_regrouped_where_the_main_loop_reads_them",
            codes_are_regrouped_where_the_main_loop_reads_them as fn(),
        ),
    ]
    .into_iter()
    .map(|(name, test)| {
        needs_wide(absent, format!("kernels::wide::{name}"), move || {
            test();
            Ok(())
        })
    })
    .collect();
    out.push(Trial::test(
        "kernels::wide::vouches_only_where_the_processor_has_avx2_and_fma",
        || {
            vouches_only_where_the_processor_has_avx2_and_fma();
            Ok(())
        },
    ));
    out.push(Trial::test(
        "kernels::wide::trials_are_ignored_without_avx2_or_fma",
        decision_follows_the_processor,
    ));
    out
}

/// Why the trials that need the whole-tile path cannot run here, decided once, when the list is
/// built: the processor lacks AVX2 or FMA, or [`ASSUME_ABSENT`] says to act as if it did.
pub fn wide_absent() -> Option<&'static str> {
    absent_because(wide::available(), std::env::var_os(ASSUME_ABSENT).is_some())
}

fn absent_because(available: bool, assume_absent: bool) -> Option<&'static str> {
    if assume_absent {
        Some("needs AVX2 and FMA (assumed absent)")
    } else if available {
        None
    } else {
        Some("needs AVX2 and FMA")
    }
}

/// A trial that only means something where the whole-tile path runs: listed as ignored, with the
/// reason as its kind, where it cannot; and asked to run anyway (`--include-ignored`), it reports
/// itself ignored with the reason rather than passing having compared nothing.
pub fn needs_wide(
    absent: Option<&'static str>,
    name: String,
    body: impl FnOnce() -> Result<(), Failed> + Send + 'static,
) -> Trial {
    let trial = Trial::ignorable_test(name, move || match absent {
        Some(why) => Ok(Completion::ignored_with(why)),
        None => body().map(|()| Completion::Completed),
    });
    match absent {
        Some(why) => trial.with_kind(why).with_ignored_flag(true),
        None => trial,
    }
}

/// The decision: run where the processor has both features, ignore with the reason otherwise, and
/// ignore when told to assume they are absent.
fn decision_follows_the_processor() -> Result<(), Failed> {
    let cases = [
        (true, false, None),
        (false, false, Some("needs AVX2 and FMA")),
        (true, true, Some("needs AVX2 and FMA (assumed absent)")),
    ];
    for (available, assume, want) in cases {
        let got = absent_because(available, assume);
        if got != want {
            return Err(format!("available {available}, assumed absent {assume}: {got:?}").into());
        }
    }
    let trial = needs_wide(Some("needs AVX2 and FMA"), "x".to_owned(), || Ok(()));
    if !(trial.has_ignored_flag() && trial.kind() == "needs AVX2 and FMA") {
        return Err(format!("an absent trial is listed as {trial:?}").into());
    }
    let trial = needs_wide(None, "x".to_owned(), || Ok(()));
    if trial.has_ignored_flag() || !trial.kind().is_empty() {
        return Err(format!("a trial that can run is listed as {trial:?}").into());
    }
    Ok(())
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f32 {
        (self.next() % 20_001) as f32 / 10_000.0 - 1.0
    }
}

/// A tile quantized from `source` (32 rows x 256 columns) with ggml's min/max rule, laid out
/// as spec section 4.1 says.
fn quantize(source: &[[f32; 256]; 32]) -> Vec<u8> {
    let mut tile = vec![0u8; TILE_BYTES as usize];
    for (r, row) in source.iter().enumerate() {
        for c in 0..8 {
            let group = &row[32 * c..32 * c + 32];
            let lo = group.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = group.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let d = bf16::from_f32((hi - lo) / 15.0).to_f32();
            let m = bf16::from_f32(lo).to_f32();
            let i = c * 32 + r;
            tile[2 * i..2 * i + 2].copy_from_slice(&bf16::from_f32(d).to_bits().to_le_bytes());
            tile[512 + 2 * i..512 + 2 * i + 2]
                .copy_from_slice(&bf16::from_f32(m).to_bits().to_le_bytes());
            for (k, &s) in group.iter().enumerate() {
                let q = if d > 0.0 {
                    ((s - m) / d).round().clamp(0.0, 15.0) as u8
                } else {
                    0
                };
                set_code(&mut tile, r, 32 * c + k, q);
            }
        }
    }
    tile
}

fn set_code(tile: &mut [u8], row: usize, col: usize, q: u8) {
    let at = CODES + (row / 16) * CODES_PER_HALF + col * 8 + (row % 16) / 2;
    tile[at] = if row.is_multiple_of(2) {
        (tile[at] & 0xf0) | q
    } else {
        (tile[at] & 0x0f) | (q << 4)
    };
}

/// Source values rounded to bf16, as rows of bytes and of floats.
fn source(rng: &mut Rng) -> ([[u8; ROW_BYTES]; 32], [[f32; 256]; 32]) {
    let mut bytes = [[0u8; ROW_BYTES]; 32];
    let mut values = [[0f32; 256]; 32];
    for r in 0..32 {
        let scale = 0.01 + 0.05 * (rng.next() % 100) as f32 / 100.0;
        for c in 0..256 {
            let v = bf16::from_f32(rng.unit() * scale);
            values[r][c] = v.to_f32();
            bytes[r][2 * c..2 * c + 2].copy_from_slice(&v.to_bits().to_le_bytes());
        }
    }
    (bytes, values)
}

/// The exact path's verdict on a whole tile: elements out of bound, largest steps, sums.
fn exact(tile: &[u8], values: &[[f32; 256]; 32]) -> (u64, kernels::Stats) {
    let mut decoded = DecodedTile::default();
    assert!(decoded.decode(tile));
    let mut total = kernels::Stats::default();
    for (r, row) in values.iter().enumerate() {
        for c in 0..8 {
            let (d, m) = (decoded.scales[r][c], decoded.minimums[r][c]);
            let codes = &decoded.codes[r][32 * c..32 * c + 32];
            let stats = if d > 0.0 && d.is_finite() && m.is_finite() {
                kernels::group_scalar(codes, &row[32 * c..32 * c + 32], d, m)
            } else {
                kernels::Stats {
                    out: 32,
                    ..Default::default()
                }
            };
            total.add(&stats);
        }
    }
    (total.out, total)
}

fn run(tile_bytes: &[u8], rows: &[[u8; ROW_BYTES]; 32]) -> Option<TileSums> {
    let refs: Rows<'_> = core::array::from_fn(|r| &rows[r]);
    let mut scratch = Box::<Scratch>::default();
    tile(
        &mut scratch,
        tile_bytes.try_into().expect("a whole tile"),
        &refs,
        Some(&refs),
    )
}

/// Checks one case: whatever the whole-tile path vouches for, the exact path finds in bound,
/// with the same largest error and sums; returns whether it vouched.
fn agree(tile: &[u8], bytes: &[[u8; ROW_BYTES]; 32], values: &[[f32; 256]; 32]) -> bool {
    let (out, stats) = exact(tile, values);
    let Some(sums) = run(tile, bytes) else {
        return false;
    };
    assert_eq!(
        out, 0,
        "vouched for a tile with {out} elements out of bound"
    );
    assert_eq!(sums.max_steps, stats.max_steps);
    assert!((sums.sq_err - stats.sq_err).abs() <= 1e-5 * stats.sq_err);
    assert!((sums.sq_src - stats.sq_src).abs() <= 1e-5 * stats.sq_src);
    true
}

fn a_faithful_tile_is_vouched_for_with_the_exact_statistics() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for _ in 0..50 {
        let (bytes, values) = source(&mut rng);
        let tile = quantize(&values);
        assert!(
            agree(&tile, &bytes, &values),
            "a faithful tile was not vouched for"
        );
    }
}

fn a_tile_with_an_element_out_of_bound_is_never_vouched_for() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..400 {
        let (bytes, values) = source(&mut rng);
        let mut tile = quantize(&values);
        let (r, col) = ((rng.next() % 32) as usize, (rng.next() % 256) as usize);
        // One code moved by 2..15 steps: more than a step off, whatever the rounding.
        let at = CODES + (r / 16) * CODES_PER_HALF + col * 8 + (r % 16) / 2;
        let q = if r % 2 == 0 {
            tile[at] & 0x0f
        } else {
            tile[at] >> 4
        };
        let moved = if q >= 8 {
            q - 2 - (round % 7) as u8
        } else {
            q + 2 + (round % 7) as u8
        };
        set_code(&mut tile, r, col, moved);
        assert!(
            exact(&tile, &values).0 > 0,
            "round {round}: the control is in bound"
        );
        assert!(!agree(&tile, &bytes, &values), "round {round}: vouched");
    }
}

fn non_finite_source_values_and_broken_headers_go_to_the_exact_path() {
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    let (bytes, values) = source(&mut rng);
    let tile = quantize(&values);
    for bits in [0x7fc0u16, 0x7f80, 0xff80] {
        let mut b = bytes;
        b[7][2 * 100..2 * 100 + 2].copy_from_slice(&bits.to_le_bytes());
        assert!(run(&tile, &b).is_none(), "source bits {bits:#06x}");
    }
    // A huge finite source value: its square overflows f32, so the sums cannot be trusted.
    let mut b = bytes;
    b[3][0..2].copy_from_slice(&bf16::from_f32(3e38).to_bits().to_le_bytes());
    assert!(run(&tile, &b).is_none());
    for (plane, bits) in [
        (0, 0u16),
        (0, 0xbf80),
        (0, 0x7fc0),
        (0, 0x7f80),
        (512, 0x7f80),
    ] {
        let mut t = tile.clone();
        t[plane + 2 * 77..plane + 2 * 77 + 2].copy_from_slice(&bits.to_le_bytes());
        assert!(run(&t, &bytes).is_none(), "plane {plane} bits {bits:#06x}");
    }
}

fn a_scale_whose_reciprocal_overflows_goes_to_the_exact_path() {
    // Every group: d = 1/16, m = -1/2, codes 8, so w = 0 against a source of 0; but row 0's
    // groups 0 and 1 have the smallest subnormal d (1 / d = inf) and m = 0, codes 0, so w = 0:
    // group 0 against a source of 0.5 (32 elements out of bound, steps inf), group 1 against
    // 0 (error 0, steps 0 * inf = NaN, which must not hide the inf before it).
    let mut tile = vec![0u8; TILE_BYTES as usize];
    for i in 0..256 {
        let (d, m) = if i == 0 || i == 32 {
            (0x0001u16, 0u16)
        } else {
            (0x3d80, 0xbf00)
        };
        tile[2 * i..2 * i + 2].copy_from_slice(&d.to_le_bytes());
        tile[512 + 2 * i..512 + 2 * i + 2].copy_from_slice(&m.to_le_bytes());
    }
    for r in 0..32 {
        for col in 0..256 {
            let tiny = r == 0 && col < 64;
            set_code(&mut tile, r, col, if tiny { 0 } else { 8 });
        }
    }
    let mut bytes = [[0u8; ROW_BYTES]; 32];
    let mut values = [[0f32; 256]; 32];
    for col in 0..32 {
        bytes[0][2 * col..2 * col + 2].copy_from_slice(&0x3f00u16.to_le_bytes());
        values[0][col] = 0.5;
    }
    assert_eq!(
        exact(&tile, &values).0,
        32,
        "the control's 32 elements are out of bound"
    );
    assert!(
        run(&tile, &bytes).is_none(),
        "vouched for 32 elements out of bound"
    );
}

fn whatever_a_few_flipped_bytes_do_a_vouched_tile_is_in_bound() {
    // A faithful pair with 1 to 4 random bytes changed anywhere (planes, codes or source): the
    // path may refuse, but what it vouches for the exact path must find in bound, with the
    // same statistics (`agree` asserts both).
    let mut rng = Rng(0x5851_f42d_4c95_7f2d);
    let (mut vouched, mut refused) = (0, 0);
    for _ in 0..3_000 {
        let (mut bytes, mut values) = source(&mut rng);
        let mut tile = quantize(&values);
        for _ in 0..1 + rng.next() % 4 {
            let bit = 1u8 << (rng.next() % 8);
            if rng.next().is_multiple_of(2) {
                let at = (rng.next() % TILE_BYTES) as usize;
                tile[at] ^= bit;
            } else {
                let (r, at) = ((rng.next() % 32) as usize, (rng.next() % 512) as usize);
                bytes[r][at] ^= bit;
                let c = at / 2;
                let pair = [bytes[r][2 * c], bytes[r][2 * c + 1]];
                values[r][c] = bf16::from_bits(u16::from_le_bytes(pair)).to_f32();
            }
        }
        if agree(&tile, &bytes, &values) {
            vouched += 1;
        } else {
            refused += 1;
        }
    }
    // Both outcomes occur, or the property was not put to the test.
    assert!(
        vouched > 100 && refused > 100,
        "{vouched} vouched, {refused} refused"
    );
}

fn a_tile_of_tiny_values_is_left_to_the_exact_sums() {
    // Values near 1e-25: every square underflows f32 to zero, so the tile's sums would read as
    // no error at all. The exact path sums them again in f64.
    let mut rng = Rng(0x1234_5678_9abc_def0);
    let (mut bytes, mut values) = source(&mut rng);
    for r in 0..32 {
        for c in 0..256 {
            let v = bf16::from_f32(values[r][c] * 1e-25);
            values[r][c] = v.to_f32();
            bytes[r][2 * c..2 * c + 2].copy_from_slice(&v.to_bits().to_le_bytes());
        }
    }
    let tile = quantize(&values);
    assert_eq!(exact(&tile, &values).0, 0, "the control is faithful");
    assert!(
        run(&tile, &bytes).is_none(),
        "vouched with underflowed sums"
    );
}

fn random_codes_are_not_vouched_for() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let (bytes, values) = source(&mut rng);
    let mut tile = quantize(&values);
    for b in tile[CODES..].iter_mut() {
        *b = rng.next() as u8;
    }
    assert!(!agree(&tile, &bytes, &values));
}

fn codes_are_regrouped_where_the_main_loop_reads_them() {
    let mut tile = vec![0u8; TILE_BYTES as usize];
    for r in 0..32 {
        for col in 0..256 {
            set_code(&mut tile, r, col, ((r * 7 + col * 3) % 16) as u8);
        }
    }
    let tile: &[u8; TILE_BYTES as usize] = tile.as_slice().try_into().expect("tile");
    let words = wide::regrouped_for_test(tile).expect("AVX2 (the trial runs only where it is)");
    for r in 0..32 {
        for w in 0..16 {
            let order = [0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15];
            for (i, &k) in order.iter().enumerate() {
                let col = 16 * w + k;
                assert_eq!(
                    words[r * 16 + w][i],
                    ((r * 7 + col * 3) % 16) as u8,
                    "row {r} column {col}"
                );
            }
        }
    }
}

/// Without AVX2 and FMA the path vouches for nothing (every tile takes the exact path); with them,
/// it vouches for a faithful tile. Runs everywhere: neither answer is a pass by default.
fn vouches_only_where_the_processor_has_avx2_and_fma() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (bytes, values) = source(&mut rng);
    let vouched = run(&quantize(&values), &bytes).is_some();
    assert_eq!(vouched, wide::available(), "vouched: {vouched}");
}
