//! `bf16.finite` alone: the pass over every BF16 byte of a package, against a floor that reads the
//! same bytes once on every core with no test at all, and beside the whole gate on the same package.
//!
//! The check is the one place the gate reads a BF16 matrix's values (fc, the DFlash2 codebooks and
//! base kernels, a BF16 kernel projection, an own embedding table): it should cost what reading them
//! costs. Measured in rounds, each ratio beside its own floor run (the floor is bound by memory
//! bandwidth, which a shared machine's other tenants take in bursts).

use super::{median, ms};
use dflash_gate::__private::container::Container;
use dflash_gate::__private::dtype::Dtype;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

/// The floor's unit of work, as the check hands out its own.
const CHUNK_BYTES: usize = 1 << 20;

/// The floor of a pass over every value: each chunk's bytes read once, on every core, tested for
/// nothing.
pub fn read_every_byte(chunks: &[&[u8]]) -> Vec<u64> {
    dflash_gate::__private::parallel::map(
        "bench floor",
        chunks,
        || (),
        |_, c| {
            c.chunks_exact(8).fold(0u64, |s, w| {
                s.wrapping_add(u64::from_le_bytes(w.try_into().unwrap_or_default()))
            })
        },
    )
    .expect("every worker finished")
}

pub fn run(name: &str, dir: &Path, runs: usize) {
    let weights =
        dflash_gate::__private::files::bytes(&dir.join("model.q4nx")).expect("weight file");
    let container = Container::parse(weights.as_slice()).expect("container");
    let chunks: Vec<&[u8]> = container
        .table
        .entries
        .iter()
        .filter(|e| e.dtype == Dtype::Bf16)
        .flat_map(|e| container.data(e).chunks(CHUNK_BYTES))
        .collect();
    let bf16_bytes: usize = chunks.iter().map(|c| c.len()).sum();
    let scan =
        dflash_gate::__private::checks::finite::scan(&container).expect("every worker finished");
    assert!(scan.found.is_empty(), "the bench package holds no NaN");
    let floor = || read_every_byte(&chunks);
    // Warm: both the floor and the pass have every page mapped before timing.
    black_box(floor());
    let options = dflash_gate::Options::default();
    let (mut floors, mut passes, mut gates, mut ratios) = (vec![], vec![], vec![], vec![]);
    for _ in 0..runs {
        let start = Instant::now();
        black_box(floor());
        let f = start.elapsed();
        let start = Instant::now();
        black_box(
            dflash_gate::__private::checks::finite::scan(&container)
                .expect("every worker finished"),
        );
        let p = start.elapsed();
        let start = Instant::now();
        black_box(dflash_gate::gate(dir, &options).expect("gate runs"));
        let g = start.elapsed();
        ratios.push(p.as_secs_f64() / f.as_secs_f64());
        floors.push(f);
        passes.push(p);
        gates.push(g);
    }
    ratios.sort_by(f64::total_cmp);
    let (floor, pass, gate): (Duration, Duration, Duration) =
        (median(floors), median(passes), median(gates));
    println!(
        "\nbf16.finite on {name}: {} BF16 tensors, {:.1} MB ({} runs)",
        scan.tensors,
        bf16_bytes as f64 / 1e6,
        runs
    );
    println!(
        "  floor (read every BF16 byte on every core) {:>8.1}ms  {:>6.2} GB/s",
        ms(floor),
        bf16_bytes as f64 / 1e9 / floor.as_secs_f64()
    );
    println!(
        "  the finiteness pass                        {:>8.1}ms  {:>6.2} GB/s  pass/floor {:.2} ({:.2}..{:.2} per round)",
        ms(pass),
        bf16_bytes as f64 / 1e9 / pass.as_secs_f64(),
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1]
    );
    println!(
        "  the whole gate                             {:>8.1}ms  (the pass is {:.0}% of it)",
        ms(gate),
        100.0 * pass.as_secs_f64() / gate.as_secs_f64()
    );
}
