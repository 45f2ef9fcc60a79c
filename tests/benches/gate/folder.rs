//! A Hugging Face folder of the reference geometry (about 1 GB of bf16): the whole gate against a
//! floor that maps every shard and reads each of its bytes once on every core, with no test at all.
//!
//! The folder's checks read every value once (`bf16.finite`) and every header; nothing else touches
//! the data, so the gate should cost what reading the folder costs (target gate/floor <= 1.3). Each
//! round times the floor and the gate back to back, and the ratio is taken per round: the floor is
//! bound by memory bandwidth, which a shared machine's other tenants take in bursts.

use super::{median, ms};
use gate_tests::arms::SEED;
use gate_tests::synth::source::{write_source, SourceOptions};
use gate_tests::synth::{Encoding, Geometry, Package};
use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

/// The floor's unit of work, as the gate hands out its own.
const CHUNK_BYTES: usize = 1 << 20;

pub fn run(cache: &Path, runs: usize) {
    let dir = cache.join("folder-bolt");
    ensure(&dir);
    let shards: Vec<_> = std::fs::read_dir(&dir)
        .expect("the folder")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
        .collect();
    let options = dflash_gate::Options::default();
    let report = dflash_gate::gate(&dir, &options).expect("gate runs");
    assert_eq!(
        report.verdict(),
        dflash_gate::Outcome::Pass,
        "{}",
        report.to_text(false)
    );
    let floor = || {
        let maps: Vec<dflash_gate::__private::files::Bytes> = shards
            .iter()
            .map(|p| dflash_gate::__private::files::bytes(p).expect("a shard"))
            .collect();
        let chunks: Vec<&[u8]> = maps
            .iter()
            .flat_map(|m| m.as_slice().chunks(CHUNK_BYTES))
            .collect();
        super::finite::read_every_byte(&chunks)
    };
    let (floor, gate, ratios) = rounds(runs, 1, floor, || {
        dflash_gate::gate(&dir, &options).expect("gate runs")
    });
    let bytes = report.census().file_bytes.unwrap_or(0);
    println!(
        "\nHugging Face folder, reference geometry: {} tensors, {:.1} MB in {} file(s) ({runs} runs)",
        report.census().tensors.len(),
        bytes as f64 / 1e6,
        shards.len()
    );
    println!(
        "  floor (map every shard, read every byte on every core) {:>8.1}ms  {:>6.2} GB/s",
        ms(floor),
        bytes as f64 / floor.as_secs_f64() / 1e9
    );
    println!(
        "  gate                                                   {:>8.1}ms  {:>6.2} GB/s",
        ms(gate),
        bytes as f64 / gate.as_secs_f64() / 1e9
    );
    println!(
        "  gate/floor per round: median {:.2}, range {:.2} .. {:.2} (target <= 1.3)",
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1]
    );
}

/// Writes the folder unless a previous run left one from the same geometry and seed.
fn ensure(dir: &Path) {
    ensure_folder(dir, "folder", |_| {});
}

/// Writes the reference geometry's bf16 folder into `dir`, then does `then` to it, unless a previous
/// run left one stamped `label` (from the same geometry and seed).
pub fn ensure_folder(dir: &Path, label: &str, then: fn(&Path)) {
    let geometry = Geometry::bolt();
    let stamp = format!("{geometry:?}\n{label}\nseed {SEED}\n");
    let stamp_path = dir.join("bench.stamp");
    if std::fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp) {
        return;
    }
    eprintln!("generating {} ...", dir.display());
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("cache directory");
    let mut package = Package::generate(&geometry, Encoding::default(), SEED);
    write_source(&mut package, dir, SourceOptions::default(), SEED).expect("writing the folder");
    then(dir);
    std::fs::write(&stamp_path, stamp).expect("writing the stamp");
}

/// The floor and the gate, back to back `runs` times: their medians, and the per-round ratios
/// sorted (the floor is bound by memory bandwidth, which other tenants take in bursts). Each round
/// times `batch` floors, then `batch` gates, and takes each one's mean: a draft gated in a
/// millisecond, timed once a round, gave ratios that moved by a third from one run to the next.
pub fn rounds<F, G>(
    runs: usize,
    batch: usize,
    floor: impl Fn() -> F,
    gate: impl Fn() -> G,
) -> (std::time::Duration, std::time::Duration, Vec<f64>) {
    black_box(floor());
    black_box(gate());
    let batch = batch.max(1);
    let (mut floors, mut gates, mut ratios) = (vec![], vec![], vec![]);
    for _ in 0..runs {
        let start = Instant::now();
        for _ in 0..batch {
            black_box(floor());
        }
        let f = start.elapsed() / batch as u32;
        let start = Instant::now();
        for _ in 0..batch {
            black_box(gate());
        }
        let g = start.elapsed() / batch as u32;
        ratios.push(g.as_secs_f64() / f.as_secs_f64());
        floors.push(f);
        gates.push(g);
    }
    ratios.sort_by(f64::total_cmp);
    (median(floors), median(gates), ratios)
}
