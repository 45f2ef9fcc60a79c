use super::bits::*;
use super::scan::*;
use super::*;
use crate::container::TensorInfo;
use crate::dtype::bf16_to_f32;
use crate::dtype::Dtype;
use half::bf16;

#[test]
fn tile_arithmetic_matches_the_spec() {
    assert_eq!(tile_count(4096, 2560), Some(1280));
    assert_eq!(tile_count(1024, 2560), Some(320));
    assert_eq!(tile_count(5120, 2560), Some(1600));
    assert_eq!(tile_count(2560, 5120), Some(1600));
    assert_eq!(tile_count(1280, 2560), Some(400));
    assert_eq!(
        GridGeometry::new(4096, 2560).map(|g| g.bytes()),
        Some(6_553_600)
    );
}

#[test]
fn padding_rounds_both_dimensions_up() {
    let g = GridGeometry::new(400, 288).unwrap();
    assert_eq!((g.row_blocks, g.col_blocks, g.tiles()), (13, 2, 26));
    assert!(g.is_padded());
    assert_eq!(g.real_groups(), 400 * 9);
    assert!(!GridGeometry::new(4096, 2560).unwrap().is_padded());
}

#[test]
fn no_grid_for_degenerate_sizes() {
    assert_eq!(tile_count(0, 256), None);
    assert_eq!(tile_count(32, 100), None);
    assert_eq!(tile_count(u64::MAX, u64::MAX - 31), None);
}

#[test]
fn a_known_tile_decodes_to_known_scales() {
    // One 32 x 256 tile: group (c, r) gets scale (c*32 + r + 1) / 64 and minimum -7.5 times that,
    // written at element c*32 + r of each plane; codes all 0x5 except row 1 of group c=2.
    let mut tile = vec![0u8; TILE_BYTES as usize];
    for i in 0..GROUPS_PER_TILE {
        let d = bf16::from_f32((i as f32 + 1.0) / 64.0);
        let m = bf16::from_f32(-7.5 * d.to_f32());
        tile[2 * i..2 * i + 2].copy_from_slice(&d.to_bits().to_le_bytes());
        tile[512 + 2 * i..512 + 2 * i + 2].copy_from_slice(&m.to_bits().to_le_bytes());
    }
    let info = TensorInfo {
        name: "t".into(),
        dtype: Dtype::I8,
        shape: vec![1, 5120],
        begin: 0,
        end: 5120,
    };
    let grid = TileGrid::new(&info, &tile, GridGeometry::new(32, 256).unwrap()).unwrap();
    let mut keys = ScanBuffers::new();
    let scan = grid.scan(&mut keys);
    assert_eq!(scan.real_groups, 256);
    assert_eq!(scan.scale_range, Some((1.0 / 64.0, 4.0)));
    assert_eq!(scan.ratio_median, Some(-7.5));
    assert_eq!(scan.first_bad, None);
    // Element 2*32 + 1 (group c 2, row 1) gets scale 0 over codes that are not all zero.
    tile[2 * 65..2 * 65 + 2].copy_from_slice(&[0, 0]);
    let col = 2 * 32 + 7;
    tile[1024 + col * 8] = 0x10; // row 1 is the high nibble of row pair 0 in half 0.
    let grid = TileGrid::new(&info, &tile, GridGeometry::new(32, 256).unwrap()).unwrap();
    let bad = grid.scan(&mut keys).first_bad.unwrap();
    assert_eq!(
        (bad.tile, bad.column_group, bad.row, bad.why),
        (0, 2, 1, Defect::ZeroScaleOverCodes)
    );
    // The same byte in the low nibble belongs to row 0, whose scale is positive: no complaint.
    tile[1024 + col * 8] = 0x01;
    let grid = TileGrid::new(&info, &tile, GridGeometry::new(32, 256).unwrap()).unwrap();
    let scan = grid.scan(&mut keys);
    assert_eq!((scan.first_bad, scan.constant_groups), (None, 1));
}

#[test]
fn shape_refusals_name_the_form() {
    let g = GridGeometry::new(4096, 2560).unwrap();
    let info = |dtype, shape: Vec<u64>| TensorInfo {
        name: "q".into(),
        dtype,
        shape,
        begin: 0,
        end: 0,
    };
    let no_bytes = [0u8; 0];
    let refuse = |i: TensorInfo| TileGrid::new(&i, &no_bytes, g).unwrap_err();
    assert!(refuse(info(Dtype::I8, vec![1279, 5120])).contains("1279 tiles, 1 short"));
    assert!(refuse(info(Dtype::F16, vec![1280, 2560])).contains("half-float matrix"));
    assert!(refuse(info(Dtype::I8, vec![128, 8704])).contains("q8_0 tile grid"));
    assert!(refuse(info(Dtype::I8, vec![40, 10, 5120])).contains("needs 128 x 10"));
    assert!(refuse(info(Dtype::I8, vec![1280, 5120])).contains("bytes"));
}

#[test]
fn order_keys_sort_like_floats() {
    let mut xs = [
        3.5f32,
        -0.0,
        0.0,
        -7.5,
        f32::MIN_POSITIVE,
        -1e30,
        1e30,
        -1.0,
    ];
    let mut keys: Vec<u32> = xs.iter().map(|&x| order_key(x)).collect();
    keys.sort();
    xs.sort_by(f32::total_cmp);
    let back: Vec<u32> = keys.iter().map(|&k| from_order_key(k).to_bits()).collect();
    assert_eq!(back, xs.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
}

#[test]
fn median_inside_a_bracket_is_exact_or_refuses() {
    let key = order_key;
    // 10 keys: 3 below the bracket, 4 inside (-7.6, -7.5, -7.4, -7.3), 3 above.
    let got = median_inside(&mut [key(-7.3), key(-7.5), key(-7.4), key(-7.6)], 3, 10);
    assert_eq!(got, Some((-7.5f32 + -7.4) / 2.0));
    assert_eq!(median_inside(&mut [key(-7.5)], 4, 9), Some(-7.5));
    // The middle is not inside: refuse rather than guess.
    assert_eq!(median_inside(&mut [key(-7.5)], 5, 10), None);
    assert_eq!(median_inside(&mut [], 0, 0), None);
}

/// A 128-tile grid (big enough to be sampled) where every group has scale 1/64 and minimum
/// `ratio(t, i)` times that.
fn sampled_grid(ratio: impl Fn(usize, usize) -> f32) -> Vec<u8> {
    let mut bytes = vec![0u8; 128 * TILE_BYTES as usize];
    for (t, tile) in bytes.chunks_exact_mut(TILE_BYTES as usize).enumerate() {
        for i in 0..GROUPS_PER_TILE {
            let d = bf16::from_f32(1.0 / 64.0);
            let m = bf16::from_f32(ratio(t, i) / 64.0);
            tile[2 * i..2 * i + 2].copy_from_slice(&d.to_bits().to_le_bytes());
            tile[512 + 2 * i..512 + 2 * i + 2].copy_from_slice(&m.to_bits().to_le_bytes());
        }
    }
    bytes
}

fn brute_median(bytes: &[u8]) -> Option<f32> {
    let mut all = Vec::new();
    for tile in bytes.chunks_exact(TILE_BYTES as usize) {
        for i in 0..GROUPS_PER_TILE {
            all.push(
                bf16_to_f32(u16_at(&tile[512..1024], i)) / bf16_to_f32(u16_at(&tile[..512], i)),
            );
        }
    }
    median(&mut all)
}

#[test]
fn sampled_scan_median_is_exact_even_when_the_sample_misleads() {
    let g = GridGeometry::new(4096, 256).unwrap();
    let info = |len| TensorInfo {
        name: "t".into(),
        dtype: Dtype::I8,
        shape: vec![128, 5120],
        begin: 0,
        end: len,
    };
    // Spread ratios: the bracket holds.
    let spread = sampled_grid(|t, i| -7.0 - ((t * 7 + i * 13) % 97) as f32 / 97.0);
    // The sampled tiles (every fourth) read -100, all others near -7.5: the bracket misses.
    let misleading = sampled_grid(|t, i| {
        if t % 4 == 0 {
            -100.0
        } else {
            -7.5 + (i % 5) as f32 / 10.0
        }
    });
    for bytes in [spread, misleading] {
        let grid = TileGrid::new(&info(bytes.len() as u64), &bytes, g).unwrap();
        let scan = grid.scan(&mut ScanBuffers::new());
        assert_eq!(scan.ratio_median, brute_median(&bytes));
        assert_eq!(scan.real_groups, 128 * 256);
    }
}

#[test]
fn bit_classification_matches_floats() {
    for bits in 0..=u16::MAX {
        let x = bf16_to_f32(bits);
        assert_eq!(
            is_positive_finite(bits),
            x.is_finite() && x > 0.0,
            "{bits:#x}"
        );
        assert_eq!(is_finite(bits), x.is_finite(), "{bits:#x}");
    }
}

#[test]
fn median_by_selection() {
    assert_eq!(median(&mut []), None);
    assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
}

/// The scan written the plain way: every group in order, no fast path, no sampling.
fn naive_scan(bytes: &[u8], g: GridGeometry) -> GridScan {
    let mut scan = GridScan::default();
    let mut ratios = Vec::new();
    let mut min_bits = 0u16;
    let mut scales: Vec<u16> = Vec::new();
    for (t, tile) in bytes.chunks_exact(TILE_BYTES as usize).enumerate() {
        let t = t as u64;
        let (row0, col0) = (
            (t / g.col_blocks) * TILE_ROWS,
            (t % g.col_blocks) * TILE_COLS,
        );
        for i in 0..GROUPS_PER_TILE {
            let (c, r) = (i / 32, i % 32);
            let (db, mb) = (u16_at(&tile[..512], i), u16_at(&tile[512..1024], i));
            let (d, m) = (bf16_to_f32(db), bf16_to_f32(mb));
            if row0 + r as u64 >= g.n || col0 + c as u64 * 32 >= g.k {
                scan.padding_groups += 1;
                if scan.first_bad_padding.is_none()
                    && (db != 0 || mb != 0 || !codes_zero(tile, c, r))
                {
                    scan.first_bad_padding =
                        Some(BadGroup::new(t, c, r, d, m, Defect::PaddingNotZero));
                }
                continue;
            }
            scan.real_groups += 1;
            min_bits |= mb & 0x7fff;
            let why = if d.is_finite() && d > 0.0 && m.is_finite() {
                ratios.push(m / d);
                scales.push(db);
                None
            } else if !d.is_finite() {
                Some(Defect::ScaleNotFinite)
            } else if d < 0.0 {
                Some(Defect::ScaleNegative)
            } else if !m.is_finite() {
                Some(Defect::MinimumNotFinite)
            } else if codes_zero(tile, c, r) {
                scan.constant_groups += 1;
                None
            } else {
                Some(Defect::ZeroScaleOverCodes)
            };
            if let Some(why) = why {
                scan.bad_groups += 1;
                if scan.first_bad.is_none() {
                    scan.first_bad = Some(BadGroup::new(t, c, r, d, m, why));
                }
            }
        }
    }
    scan.zero_minimum_plane = scan.real_groups > 0 && min_bits == 0;
    scan.scale_range = match (scales.iter().min(), scales.iter().max()) {
        (Some(&lo), Some(&hi)) => Some((bf16_to_f32(lo), bf16_to_f32(hi))),
        _ => None,
    };
    scan.ratio_median = median(&mut ratios);
    scan
}

/// A grid of random headers: mostly q4_1-like groups, with every kind of special value mixed in
/// at `special` probability, and padding that is usually (not always) zero.
fn random_grid(g: GridGeometry, special: f64, mut next: impl FnMut() -> u64) -> Vec<u8> {
    let mut unit = || (next() >> 11) as f64 / (1u64 << 53) as f64;
    let mut bytes = vec![0u8; g.bytes() as usize];
    for (t, tile) in bytes.chunks_exact_mut(TILE_BYTES as usize).enumerate() {
        let t = t as u64;
        let (row0, col0) = (
            (t / g.col_blocks) * TILE_ROWS,
            (t % g.col_blocks) * TILE_COLS,
        );
        for i in 0..GROUPS_PER_TILE {
            let (c, r) = (i / 32, i % 32);
            let padding = row0 + r as u64 >= g.n || col0 + c as u64 * 32 >= g.k;
            if padding && unit() > special {
                continue;
            }
            let mut d = (0.002 + 0.01 * unit()) as f32;
            let mut m = -7.5 * d * (1.0 + 0.1 * (unit() as f32 - 0.5));
            if unit() < special {
                d = [0.0, -0.01, f32::NAN, f32::INFINITY, 1e-40, -0.0][(unit() * 6.0) as usize % 6];
            }
            if unit() < special {
                m = [0.0, f32::NAN, f32::NEG_INFINITY, -0.0][(unit() * 4.0) as usize % 4];
            }
            let codes = unit() < 0.5;
            for (plane, v) in [(0, d), (512, m)] {
                tile[plane + 2 * i..plane + 2 * i + 2]
                    .copy_from_slice(&bf16::from_f32(v).to_bits().to_le_bytes());
            }
            if codes {
                for col in c * 32..c * 32 + 32 {
                    let byte = 1024 + (r / 16) * 2048 + col * 8 + (r % 16) / 2;
                    tile[byte] |= if r % 2 == 0 { 0x05 } else { 0x50 };
                }
            }
        }
    }
    bytes
}

fn same(a: &GridScan, b: &GridScan) -> bool {
    let bad = |x: &Option<BadGroup>| {
        x.as_ref().map(|b| {
            (
                b.tile,
                b.column_group,
                b.row,
                b.why,
                b.scale.to_bits(),
                b.minimum.to_bits(),
            )
        })
    };
    (
        a.real_groups,
        a.padding_groups,
        a.constant_groups,
        a.bad_groups,
        a.zero_minimum_plane,
    ) == (
        b.real_groups,
        b.padding_groups,
        b.constant_groups,
        b.bad_groups,
        b.zero_minimum_plane,
    ) && bad(&a.first_bad) == bad(&b.first_bad)
        && bad(&a.first_bad_padding) == bad(&b.first_bad_padding)
        && a.ratio_median.map(f32::to_bits) == b.ratio_median.map(f32::to_bits)
        && a.scale_range.map(|(l, h)| (l.to_bits(), h.to_bits()))
            == b.scale_range.map(|(l, h)| (l.to_bits(), h.to_bits()))
}

#[test]
fn the_fast_scan_agrees_with_the_plain_one() {
    let mut next = crate::testing::seeded(0x9e37_79b9_7f4a_7c15);
    let geometries = [
        (4096, 256),
        (256, 256),
        (100, 288),
        (80, 416),
        (4096, 512),
        (33, 32),
    ];
    for (n, k) in geometries {
        let g = GridGeometry::new(n, k).unwrap();
        for special in [0.0, 0.0005, 0.02, 0.3] {
            let bytes = random_grid(g, special, &mut next);
            let info = TensorInfo {
                name: "t".into(),
                dtype: Dtype::I8,
                shape: vec![g.tiles(), 5120],
                begin: 0,
                end: bytes.len() as u64,
            };
            let fast = TileGrid::new(&info, &bytes, g)
                .unwrap()
                .scan(&mut ScanBuffers::new());
            let plain = naive_scan(&bytes, g);
            assert!(
                same(&fast, &plain),
                "{n} x {k}, special {special}:\nfast  {fast:?}\nplain {plain:?}"
            );
        }
    }
}
