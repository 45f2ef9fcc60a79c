//! `--source` against its floor: the reference package (Bolt) and its ~721 MB bf16 checkpoint.
//!
//! The floor maps both files and reads every byte once on every core (the least any element-by-element
//! comparison must do). The gate runs whole (every form check plus `source.*`), once with the
//! vectorized comparison and once with the plain scalar loop, so the table shows what vectorizing buys.
//!
//! Three more rows say where the gate's time goes and how far it could fall here: the form checks
//! alone (the gate without `--source`); the comparison's arithmetic alone (its whole-tile kernel over
//! one tile held in cache, as many times as the package has tiles); and the sequential yardstick
//! (`yardstick.rs`: the same arithmetic streaming both files in address order). The last lines add
//! the form checks to each, as bounds on the gate's time while the form checks are a pass of their own.
//!
//! The floor is bound by memory bandwidth, which other tenants of a shared machine take in bursts,
//! and the gate mostly by arithmetic: timed in separate batches, their ratio follows the neighbours.
//! So floor and gate runs alternate, and gate/floor is given per pair (median, and the range).
//!
//! Both also depend on how the page cache holds the files: pages a program just wrote are mapped
//! 4 KiB at a time, pages readahead brought in come in large folios, mapped many at once. Measured
//! here, the floor over freshly written files took 77 ms, over the same files read back 19 ms. So
//! before timing, each file is dropped from the page cache and read once from end to end, as a
//! published file a loader opens has been: every run, on every machine, then starts alike.

use super::{median, ms, LIVE, PEAK};
use gate::beyond::source::wide;
use gate_tests::arms::SEED;
use gate_tests::synth::source::{quantize, source_matrix, write_source, Quantizer, SourceOptions};
use gate_tests::synth::{Encoding, Geometry, Package};
use half::bf16;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Marks a finished pair, so an interrupted generation is redone rather than measured.
const DONE: &str = "bench-pair-complete";

/// Writes the Bolt package and its source checkpoint under `dir` unless a finished pair is there.
fn ensure_pair(dir: &Path) -> (PathBuf, PathBuf) {
    let (draft, source) = (dir.join("draft"), dir.join("source"));
    if dir.join(DONE).is_file() {
        return (draft, source);
    }
    eprintln!(
        "generating {} (package and source checkpoint) ...",
        dir.display()
    );
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(&draft).expect("draft directory");
    std::fs::create_dir_all(&source).expect("source directory");
    let mut package = Package::generate(&Geometry::bolt(), Encoding::default(), SEED);
    write_source(&mut package, &source, SourceOptions::default(), SEED)
        .expect("writing the source");
    package.write(&draft).expect("writing the package");
    std::fs::write(dir.join(DONE), b"").expect("marker");
    (draft, source)
}

/// Drops each file's pages from the page cache and reads it once in order, so readahead holds it as
/// it holds a file read from disk (see the module's comment). Best effort: the advice is a hint.
fn settle(files: &[PathBuf]) {
    use std::io::Read;
    for path in files {
        let mut file = std::fs::File::open(path).expect("file");
        // `off_t` is 64 bits on 64-bit Linux, as declared below.
        #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
        {
            use std::os::fd::AsRawFd;
            extern "C" {
                fn posix_fadvise(fd: i32, offset: i64, len: i64, advice: i32) -> i32;
            }
            /// `POSIX_FADV_DONTNEED` on Linux.
            const DONT_NEED: i32 = 4;
            // SAFETY: an open descriptor; the call only advises the kernel about its pages.
            unsafe { posix_fadvise(file.as_raw_fd(), 0, 0, DONT_NEED) };
        }
        let mut buffer = vec![0u8; 1 << 20];
        while file.read(&mut buffer).expect("read") > 0 {}
    }
}

/// Maps both files and reads every byte once, split across every core.
fn floor(files: &[PathBuf]) -> u64 {
    let maps: Vec<memmap2::Mmap> = files
        .iter()
        .map(|p| {
            let file = std::fs::File::open(p).expect("file");
            // SAFETY: read-only map of a file nothing else writes during the benchmark.
            unsafe { memmap2::Mmap::map(&file) }.expect("map")
        })
        .collect();
    const CHUNK: usize = 1 << 20;
    let chunks: Vec<&[u8]> = maps.iter().flat_map(|m| m.chunks(CHUNK)).collect();
    gate::parallel::map(
        &chunks,
        || (),
        |_, chunk| {
            let (words, _) = chunk.as_chunks::<8>();
            words
                .iter()
                .fold(0u64, |s, w| s.wrapping_add(u64::from_le_bytes(*w)))
        },
    )
    .into_iter()
    .fold(0, u64::wrapping_add)
}

/// One timed gate run: its time, the peak heap above what was live before it, and the elements
/// it compared.
fn time_gate(draft: &Path, options: &gate::Options) -> (Duration, usize, u64) {
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
    let base = LIVE.load(Ordering::Relaxed);
    let start = Instant::now();
    let report = black_box(gate::gate(draft, options).expect("gate runs"));
    let time = start.elapsed();
    let peak_heap = PEAK.load(Ordering::Relaxed) - base;
    assert_eq!(
        report.verdict(),
        gate::Outcome::Pass,
        "{}",
        report.to_text(false)
    );
    let elements = report.census.source_grids.iter().map(|g| g.elements).sum();
    (time, peak_heap, elements)
}

fn time_floor(files: &[PathBuf]) -> Duration {
    let start = Instant::now();
    black_box(floor(files));
    start.elapsed()
}

/// The comparison's arithmetic with no memory to wait for: the gate's whole-tile kernel over one
/// faithful tile and its source rows, held in cache, as many times as the package has tiles, on every
/// core. What the gate spends beyond this (and beyond its form checks) is waiting for memory. `None`
/// where the processor lacks the kernel's features.
fn time_arithmetic(elements: u64) -> Option<Duration> {
    if !wide::available() {
        return None;
    }
    const ROW_BYTES: usize = wide::ROW_BYTES;
    let values = source_matrix(32, 256, SEED);
    let tile: [u8; gate::tile::TILE_BYTES as usize] = quantize(32, 256, &values, Quantizer::MinMax)
        .try_into()
        .expect("one tile");
    let bytes: Vec<u8> = values
        .iter()
        .flat_map(|&v| bf16::from_f32(v).to_bits().to_le_bytes())
        .collect();
    let (chunks, _) = bytes.as_chunks::<ROW_BYTES>();
    let rows: wide::Rows<'_> = std::array::from_fn(|r| &chunks[r]);
    const TILES_PER_ITEM: u64 = 256;
    let tiles = elements / 8192;
    let items: Vec<u64> = (0..tiles.div_ceil(TILES_PER_ITEM))
        .map(|i| TILES_PER_ITEM.min(tiles - i * TILES_PER_ITEM))
        .collect();
    let start = Instant::now();
    let vouched = gate::parallel::map(&items, Box::<wide::Scratch>::default, |scratch, &count| {
        (0..count)
            .filter(|_| {
                wide::tile(scratch, black_box(&tile), black_box(&rows), Some(&rows)).is_some()
            })
            .count() as u64
    });
    let time = start.elapsed();
    // Counted here, not asserted in the workers: a worker's panic only shortens `map`'s result.
    assert_eq!(
        vouched.iter().sum::<u64>(),
        tiles,
        "the kernel vouches for every copy of a faithful tile"
    );
    Some(time)
}

pub fn run(cache: &Path, runs: usize) {
    let runs = runs.max(1);
    let (draft, source) = ensure_pair(&cache.join("bolt-source"));
    let files = vec![draft.join("model.q4nx"), source.join("model.safetensors")];
    let bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let vectorized = gate::Options {
        source: Some(source.clone()),
        ..gate::Options::default()
    };
    let scalar = gate::Options {
        scalar_source_loop: true,
        ..vectorized.clone()
    };
    settle(&files);
    black_box(floor(&files));
    let (mut floors, mut gates, mut scalars, mut ratios) = (vec![], vec![], vec![], vec![]);
    let (mut forms, mut arithmetic, mut sequential) = (vec![], vec![], vec![]);
    let (mut heap, mut scalar_heap, mut elements) = (0, 0, 0);
    for _ in 0..runs {
        let floor_time = time_floor(&files);
        let (time, h, e) = time_gate(&draft, &vectorized);
        ratios.push(time.as_secs_f64() / floor_time.as_secs_f64());
        (heap, elements) = (heap.max(h), e);
        floors.push(floor_time);
        gates.push(time);
        forms.push(time_gate(&draft, &gate::Options::default()).0);
        arithmetic.extend(time_arithmetic(elements));
        sequential.extend(super::yardstick::time(&files[0], &files[1], elements));
    }
    // The scalar loop only needs to show its order of magnitude: a few runs.
    for _ in 0..runs.min(3) {
        let (time, h, _) = time_gate(&draft, &scalar);
        scalar_heap = scalar_heap.max(h);
        scalars.push(time);
    }
    let (floor_time, gate_time, scalar_time) = (median(floors), median(gates), median(scalars));
    let form_time = median(forms);
    let arithmetic_time = (!arithmetic.is_empty()).then(|| median(arithmetic));
    let sequential_time = (!sequential.is_empty()).then(|| median(sequential));
    ratios.sort_by(f64::total_cmp);
    println!(
        "\n--source, reference package + bf16 checkpoint ({bytes} bytes, {elements} grid elements)"
    );
    println!(
        "{:<22} {:>10} {:>8} {:>9} {:>14} {:>12}",
        "", "time", "x floor", "GB/s", "elements/s", "peak heap"
    );
    let row = |name: &str, t: Duration, heap: Option<usize>| {
        println!(
            "{:<22} {:>8.1}ms {:>8.2} {:>9.2} {:>14.3e} {:>12}",
            name,
            ms(t),
            t.as_secs_f64() / floor_time.as_secs_f64(),
            bytes as f64 / 1e9 / t.as_secs_f64(),
            elements as f64 / t.as_secs_f64(),
            heap.map_or(String::new(), |h| format!(
                "{:.2}MiB",
                h as f64 / (1 << 20) as f64
            ))
        );
    };
    row("floor (read both)", floor_time, None);
    row("gate --source", gate_time, Some(heap));
    row("form checks alone", form_time, None);
    if let Some(t) = arithmetic_time {
        row("arithmetic in cache", t, None);
    }
    if let Some(t) = sequential_time {
        row("sequential yardstick", t, None);
    }
    row("gate, scalar loop", scalar_time, Some(scalar_heap));
    println!(
        "vectorizing buys {:.2}x over the scalar loop (whole gate); gate/floor per pair: median {:.2} (range {:.2}..{:.2}, {} pairs)",
        scalar_time.as_secs_f64() / gate_time.as_secs_f64(),
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1],
        ratios.len()
    );
    // Two bounds under the gate's structure (form checks, then the comparison): with every memory wait
    // hidden behind arithmetic, and with waits as the sequential yardstick meets them.
    let floor_s = floor_time.as_secs_f64();
    let bound = |name: &str, comparison: f64| {
        let total = form_time.as_secs_f64() + comparison;
        println!(
            "form checks + {name} = {:.1}ms, {:.2}x floor",
            total * 1e3,
            total / floor_s
        );
    };
    if let Some(a) = arithmetic_time {
        bound(
            "max(arithmetic in cache, floor)",
            a.as_secs_f64().max(floor_s),
        );
    }
    if let Some(y) = sequential_time {
        bound("sequential yardstick", y.as_secs_f64());
    }
}
