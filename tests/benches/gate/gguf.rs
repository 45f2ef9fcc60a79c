//! `--source FILE.gguf` against its floor: the reference package (Bolt) and the Q4_1 GGUF it is made
//! from, beside the same package against its bf16 checkpoint.
//!
//! One package is generated with both sources (the checkpoint first, then the GGUF from the same
//! values, whose blocks the package's grids are remade from), so the two comparisons judge the same
//! package bytes. The floor of each maps the package and that source and reads every byte once on
//! every core. Every measurement is taken in rounds, beside its own floor run, and each ratio is the
//! median of the rounds' own ratios (see `source.rs` for why a shared machine needs that). Files are
//! settled in the page cache first, as `source.rs` does.

use super::median;
use super::source::{floor, settle, time_floor, time_gate};
use gate_tests::arms::SEED;
use gate_tests::synth::gguf::{write_gguf, GgufOptions};
use gate_tests::synth::source::{write_source, SourceOptions};
use gate_tests::synth::{Encoding, Geometry, Package};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Marks a finished triple, so an interrupted generation is redone rather than measured.
const DONE: &str = "bench-triple-complete";
const GGUF: &str = "draft.gguf";

/// Writes the Bolt package, its bf16 checkpoint and its Q4_1 GGUF under `dir` unless they are there.
fn ensure_triple(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (draft, checkpoint, gguf) = (dir.join("draft"), dir.join("checkpoint"), dir.join("gguf"));
    if dir.join(DONE).is_file() {
        return (draft, checkpoint, gguf.join(GGUF));
    }
    eprintln!(
        "generating {} (package, bf16 checkpoint and Q4_1 GGUF) ...",
        dir.display()
    );
    let _ = std::fs::remove_dir_all(dir);
    for d in [&draft, &checkpoint, &gguf] {
        std::fs::create_dir_all(d).expect("bench directory");
    }
    let mut package = Package::generate(&Geometry::bolt(), Encoding::default(), SEED);
    write_source(&mut package, &checkpoint, SourceOptions::default(), SEED)
        .expect("writing the checkpoint");
    write_gguf(&mut package, &gguf.join(GGUF), GgufOptions::default(), SEED)
        .expect("writing the GGUF");
    package.write(&draft).expect("writing the package");
    std::fs::write(dir.join(DONE), b"").expect("marker");
    (draft, checkpoint, gguf.join(GGUF))
}

/// The Bolt package re-quantized from a Q8_0 GGUF, and that GGUF, under `dir` unless they are there.
fn ensure_q8_0(dir: &Path) -> (PathBuf, PathBuf) {
    let (draft, gguf) = (dir.join("draft"), dir.join("draft.gguf"));
    if dir.join(DONE).is_file() {
        return (draft, gguf);
    }
    eprintln!("generating {} (package and Q8_0 GGUF) ...", dir.display());
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(&draft).expect("bench directory");
    let mut package = Package::generate(&Geometry::bolt(), Encoding::default(), SEED);
    let options = GgufOptions {
        matrices: dflash_gate::__private::gguf::GgmlType::Q8_0,
        ..GgufOptions::default()
    };
    write_gguf(&mut package, &gguf, options, SEED).expect("writing the GGUF");
    package.write(&draft).expect("writing the package");
    std::fs::write(dir.join(DONE), b"").expect("marker");
    (draft, gguf)
}

/// One round: each gate run beside the floor of the two files it reads.
struct Round {
    gguf_floor: Duration,
    gguf: Duration,
    checkpoint_floor: Duration,
    checkpoint: Duration,
    form: Duration,
}

fn spread(rounds: &[Round], f: impl Fn(&Round) -> f64) -> (f64, f64, f64) {
    let mut v: Vec<f64> = rounds.iter().map(f).collect();
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn bytes_of(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum()
}

pub fn run(cache: &Path, runs: usize) {
    let runs = runs.max(1);
    let (draft, checkpoint, gguf) = ensure_triple(&cache.join("bolt-gguf"));
    let package = draft.join("model.q4nx");
    let gguf_files = vec![package.clone(), gguf.clone()];
    let checkpoint_files = vec![package, checkpoint.join("model.safetensors")];
    let mut all = gguf_files.clone();
    all.push(checkpoint_files[1].clone());
    settle(&all);
    let against_gguf = dflash_gate::Options::default().with_source(gguf.clone());
    let against_checkpoint = dflash_gate::Options::default().with_source(checkpoint.clone());
    // One untimed run of each, so the first round does not pay for first faults alone.
    black_box(floor(&all));
    time_gate(&draft, &against_gguf);
    let (mut gguf_heap, mut checkpoint_heap) = (0, 0);
    let mut rounds = Vec::new();
    for _ in 0..runs {
        let gguf_floor = time_floor(&gguf_files);
        let (gguf_time, h, _) = time_gate(&draft, &against_gguf);
        gguf_heap = gguf_heap.max(h);
        let checkpoint_floor = time_floor(&checkpoint_files);
        let (checkpoint_time, h, _) = time_gate(&draft, &against_checkpoint);
        checkpoint_heap = checkpoint_heap.max(h);
        let form = time_gate(&draft, &dflash_gate::Options::default()).0;
        rounds.push(Round {
            gguf_floor,
            gguf: gguf_time,
            checkpoint_floor,
            checkpoint: checkpoint_time,
            form,
        });
    }
    let (gguf_bytes, checkpoint_bytes) = (bytes_of(&gguf_files), bytes_of(&checkpoint_files));
    println!(
        "\n--source FILE.gguf, reference package + Q4_1 GGUF ({gguf_bytes} bytes) beside the same package + bf16 checkpoint ({checkpoint_bytes} bytes)"
    );
    println!(
        "{:<28} {:>10} {:>8} {:>9} {:>12}",
        "", "median", "x floor", "GB/s", "peak heap"
    );
    let seconds = Duration::as_secs_f64;
    let row = |name: &str,
               time: &dyn Fn(&Round) -> Duration,
               floor: &dyn Fn(&Round) -> Duration,
               bytes: u64,
               heap: Option<usize>| {
        let t = seconds(&median(rounds.iter().map(time).collect()));
        let (ratio, _, _) = spread(&rounds, |r| seconds(&time(r)) / seconds(&floor(r)));
        println!(
            "{:<28} {:>8.1}ms {:>8.2} {:>9.2} {:>12}",
            name,
            t * 1e3,
            ratio,
            bytes as f64 / 1e9 / t,
            heap.map_or(String::new(), |h| format!(
                "{:.2}MiB",
                h as f64 / (1 << 20) as f64
            ))
        );
    };
    row(
        "floor (package + GGUF)",
        &|r| r.gguf_floor,
        &|r| r.gguf_floor,
        gguf_bytes,
        None,
    );
    row(
        "gate --source FILE.gguf",
        &|r| r.gguf,
        &|r| r.gguf_floor,
        gguf_bytes,
        Some(gguf_heap),
    );
    row(
        "floor (package + bf16)",
        &|r| r.checkpoint_floor,
        &|r| r.checkpoint_floor,
        checkpoint_bytes,
        None,
    );
    row(
        "gate --source bf16 DIR",
        &|r| r.checkpoint,
        &|r| r.checkpoint_floor,
        checkpoint_bytes,
        Some(checkpoint_heap),
    );
    row(
        "form checks alone",
        &|r| r.form,
        &|r| r.gguf_floor,
        bytes_of(&gguf_files[..1]),
        None,
    );
    let line = |what: &str, f: &dyn Fn(&Round) -> f64| {
        let (m, lo, hi) = spread(&rounds, f);
        println!(
            "{what}: median {m:.2} (range {lo:.2}..{hi:.2}, {} rounds)",
            rounds.len()
        );
    };
    line("gguf gate/floor per round (target <= 1.3)", &|r| {
        seconds(&r.gguf) / seconds(&r.gguf_floor)
    });
    line("bf16 gate / gguf gate, same round (target > 1)", &|r| {
        seconds(&r.checkpoint) / seconds(&r.gguf)
    });
    println!(
        "peak heap, gguf: {:.2} MiB (target < 64 MiB plus the metadata it keeps)",
        gguf_heap as f64 / (1 << 20) as f64
    );
    // A GGUF whose matrices are Q8_0: each is dequantized to bf16 and held to the bound, a batch
    // of tensors at a time.
    let (q8_draft, q8_gguf) = ensure_q8_0(&cache.join("bolt-gguf-q8_0"));
    let q8 = dflash_gate::Options::default().with_source(q8_gguf.clone());
    settle(&[q8_draft.join("model.q4nx"), q8_gguf]);
    let (mut times, mut q8_heap) = (Vec::new(), 0);
    for _ in 0..runs {
        let (time, heap, _) = time_gate(&q8_draft, &q8);
        times.push(time);
        q8_heap = q8_heap.max(heap);
    }
    println!(
        "gate --source Q8_0 GGUF (bounded, dequantized a batch at a time): median {:.1} ms, peak heap {:.2} MiB",
        seconds(&median(times)) * 1e3,
        q8_heap as f64 / (1 << 20) as f64
    );
    // The same GGUF gated as a draft of its own against the bf16 folder its values came from
    // (`--source DIR`): every tensor dequantized and held to the bound, a tensor per worker. Each
    // run beside the floor of the two files it reads.
    let draft_files = vec![gguf.clone(), checkpoint.join("model.safetensors")];
    let against_folder = dflash_gate::Options::default().with_source(checkpoint);
    settle(&draft_files);
    time_gate(&gguf, &against_folder);
    let (mut times, mut ratios, mut heap) = (Vec::new(), Vec::new(), 0);
    for _ in 0..runs {
        let floor = time_floor(&draft_files);
        let (time, h, _) = time_gate(&gguf, &against_folder);
        heap = heap.max(h);
        ratios.push(seconds(&time) / seconds(&floor));
        times.push(time);
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "GGUF draft --source DIR ({} bytes read): median {:.1} ms, gate/floor per round {:.2} (range {:.2}..{:.2}), peak heap {:.2} MiB",
        bytes_of(&draft_files),
        seconds(&median(times)) * 1e3,
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1],
        heap as f64 / (1 << 20) as f64
    );
}
