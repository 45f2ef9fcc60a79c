//! The tile arithmetic of spec section 9, and the generator's own promises: its unit tests
//! (`gate_tests::*`, declared with `unit_tests!` in the gate-tests package) run here, since the
//! README's `cargo test` does not build that package's test target.

use dflash_gate::__private::tile::tile_count;
use gate_tests::synth::{Encoding, Geometry, Package};
use libtest_mimic::{Failed, Trial};
use std::path::Path;

pub fn trials() -> Vec<Trial> {
    let mut out = Vec::new();
    for (n, k, tiles) in [
        (4096, 2560, 1280),
        (1024, 2560, 320),
        (5120, 2560, 1600),
        (2560, 5120, 1600),
        (1280, 2560, 400),
    ] {
        out.push(Trial::test(
            format!("tile_arithmetic::{n}x{k}_is_{tiles}_tiles"),
            move || match tile_count(n, k) {
                Some(t) if t == tiles => Ok(()),
                other => Err(format!("{n} x {k}: {other:?} tiles, expected {tiles}").into()),
            },
        ));
    }
    out.push(Trial::test(
        "tile_arithmetic::q_proj_bytes_fit_both_readings",
        || {
            // The trap of spec section 6: 6,553,600 bytes is 4096 x 2560 as tiles and 1280 x 2560 as f16.
            let grid = tile_count(4096, 2560).map(|t| t * 5120);
            let half = 1280 * 2560 * 2;
            if grid == Some(half) && tile_count(1280, 2560) == Some(400) {
                Ok(())
            } else {
                Err(format!("grid {grid:?} vs half-float {half}").into())
            }
        },
    ));
    out.push(Trial::test("generator::same_seed_same_bytes", || {
        let a = Package::generate(&Geometry::small(), Encoding::default(), 11);
        let b = Package::generate(&Geometry::small(), Encoding::default(), 11);
        let c = Package::generate(&Geometry::small(), Encoding::default(), 12);
        if a.weight_bytes() != b.weight_bytes() {
            return Err(Failed::from("same seed gave different bytes"));
        }
        if a.weight_bytes() == c.weight_bytes() {
            return Err(Failed::from("a different seed gave the same bytes"));
        }
        Ok(())
    }));
    for (name, test) in gate_tests::unit_tests() {
        out.push(Trial::test(name, move || {
            test();
            Ok(())
        }));
    }
    out.push(Trial::test(
        "generator::unit_tests_are_trials",
        no_libtest_tests,
    ));
    out
}

/// A libtest `#[test]` in the gate-tests package would run only under `cargo test -p gate-tests`,
/// which neither the README nor CI runs: every one is refused, by file and line.
fn no_libtest_tests() -> Result<(), Failed> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/src");
    let mut found = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            for (i, line) in text.lines().enumerate() {
                let line = line.trim_start();
                if line.starts_with("#[test]") || line.starts_with("#[cfg(test)]") {
                    found.push(format!("{}:{}", path.display(), i + 1));
                }
            }
        }
    }
    if found.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "libtest tests the README's cargo test never runs (declare them with unit_tests!): {}",
            found.join(", ")
        )
        .into())
    }
}
