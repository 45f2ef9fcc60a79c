//! `--source` against its floor: the reference package (Bolt) and its ~721 MB bf16 checkpoint.
//!
//! The floor maps both files and reads every byte once on every core (the least any element-by-element
//! comparison must do). The gate runs whole (every form check plus `source.*`), once with the
//! vectorized comparison and once with the plain scalar loop, so the table shows what vectorizing buys.
//!
//! More rows say where the gate's time goes and how far it could fall here: the form checks alone (the
//! gate without `--source`); the comparison's arithmetic alone (its whole-tile kernel over one tile
//! held in cache, as many times as the package has tiles); and the sequential yardstick
//! (`yardstick.rs`: the same arithmetic streaming both files in address order), also over one tile in
//! cache. The last lines add the form checks to each, as bounds on the gate's time while the form
//! checks are a pass of their own.
//!
//! A last table times pairing by name at scale: the small package with 100,000 more tensors, all
//! paired with the checkpoint, with and without `--source`.
//!
//! The floor is bound by memory bandwidth, which other tenants of a shared machine take in bursts,
//! and the gate mostly by arithmetic: timed in separate batches, their ratio follows the neighbours.
//! So every measurement is taken in rounds, beside a floor run, and each ratio to the floor is the
//! median of the rounds' own ratios.
//!
//! Both also depend on how the page cache holds the files: pages a program just wrote are mapped
//! 4 KiB at a time, pages readahead brought in come in large folios, mapped many at once. Measured
//! here, the floor over freshly written files took 77 ms, over the same files read back 19 ms. So
//! before timing, each file is dropped from the page cache and read once from end to end, as a
//! published file a loader opens has been: every run, on every machine, then starts alike.

use super::yardstick::Reading;
use super::{median, LIVE, PEAK};
use dflash_gate::__private::source::kernels::wide;
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
pub(super) fn settle(files: &[PathBuf]) {
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
pub(super) fn floor(files: &[PathBuf]) -> u64 {
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
    let sums = dflash_gate::__private::parallel::map(
        "the floor",
        &chunks,
        || (),
        |_, chunk| {
            let (words, _) = chunk.as_chunks::<8>();
            words
                .iter()
                .fold(0u64, |s, w| s.wrapping_add(u64::from_le_bytes(*w)))
        },
    )
    .expect("the floor read every chunk");
    sums.into_iter().fold(0, u64::wrapping_add)
}

/// One timed gate run: its time, the peak heap above what was live before it, and the elements
/// it compared.
pub(super) fn time_gate(draft: &Path, options: &dflash_gate::Options) -> (Duration, usize, u64) {
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
    let base = LIVE.load(Ordering::Relaxed);
    let start = Instant::now();
    let report = black_box(dflash_gate::gate(draft, options).expect("gate runs"));
    let time = start.elapsed();
    let peak_heap = PEAK.load(Ordering::Relaxed) - base;
    assert_eq!(
        report.verdict(),
        dflash_gate::Outcome::Pass,
        "{}",
        report.to_text(false)
    );
    let elements = report
        .census()
        .source_grids
        .iter()
        .map(|g| g.elements)
        .sum();
    (time, peak_heap, elements)
}

pub(super) fn time_floor(files: &[PathBuf]) -> Duration {
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
    let tile: [u8; dflash_gate::__private::tile::TILE_BYTES as usize] =
        quantize(32, 256, &values, Quantizer::MinMax)
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
    assert_eq!(tiles * 8192, elements, "the gate compared whole tiles");
    let items: Vec<u64> = (0..tiles.div_ceil(TILES_PER_ITEM))
        .map(|i| TILES_PER_ITEM.min(tiles - i * TILES_PER_ITEM))
        .collect();
    let start = Instant::now();
    let vouched = dflash_gate::__private::parallel::map(
        "the kernel in cache",
        &items,
        Box::<wide::Scratch>::default,
        |scratch, &count| {
            (0..count)
                .filter(|_| {
                    wide::tile(scratch, black_box(&tile), black_box(&rows), Some(&rows)).is_some()
                })
                .count() as u64
        },
    )
    .expect("the kernel ran over every copy");
    let time = start.elapsed();
    assert_eq!(
        vouched.iter().sum::<u64>(),
        tiles,
        "the kernel vouches for every copy of a faithful tile"
    );
    Some(time)
}

/// One round of measurements, each taken beside the round's floor run so that its ratio to the floor
/// is of the same spell of the machine.
struct Round {
    floor: Duration,
    gate: Duration,
    form: Duration,
    arithmetic: Option<Duration>,
    yardstick: Option<Duration>,
    yardstick_in_cache: Option<Duration>,
    scalar: Option<Duration>,
}

/// Median, least and greatest of the values `f` gives for the rounds (`None` when it gives none).
fn spread(rounds: &[Round], f: impl Fn(&Round) -> Option<f64>) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = rounds.iter().filter_map(f).collect();
    v.sort_by(f64::total_cmp);
    Some((*v.get(v.len() / 2)?, *v.first()?, *v.last()?))
}

pub fn run(cache: &Path, runs: usize) {
    let runs = runs.max(1);
    let (draft, source) = ensure_pair(&cache.join("bolt-source"));
    let files = vec![draft.join("model.q4nx"), source.join("model.safetensors")];
    let bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let vectorized = dflash_gate::Options::default().with_source(source.clone());
    settle(&files);
    black_box(floor(&files));
    let (mut heap, mut scalar_heap, mut elements) = (0, 0, 0);
    let mut rounds = Vec::new();
    for round in 0..runs {
        let floor = time_floor(&files);
        let (gate, h, e) = time_gate(&draft, &vectorized);
        (heap, elements) = (heap.max(h), e);
        let form = time_gate(&draft, &dflash_gate::Options::default()).0;
        let yardstick = |reading| super::yardstick::time(&files[0], &files[1], elements, reading);
        let (arithmetic, yardstick, yardstick_in_cache) = (
            time_arithmetic(elements),
            yardstick(Reading::Streaming),
            yardstick(Reading::InCache),
        );
        // The scalar loop only needs to show its order of magnitude: the first three rounds.
        let scalar = (round < 3).then(|| {
            let (time, h, _) =
                dflash_gate::__private::with_scalar_source_loop(|| time_gate(&draft, &vectorized));
            scalar_heap = scalar_heap.max(h);
            time
        });
        rounds.push(Round {
            floor,
            gate,
            form,
            arithmetic,
            yardstick,
            yardstick_in_cache,
            scalar,
        });
    }
    println!(
        "\n--source, reference package + bf16 checkpoint ({bytes} bytes, {elements} grid elements)"
    );
    println!(
        "{:<22} {:>10} {:>8} {:>9} {:>14} {:>12}",
        "", "median", "x floor", "GB/s", "elements/s", "peak heap"
    );
    // Each row: the median time, and the median of its ratios to the floor run of the same round.
    let row = |name: &str, f: &dyn Fn(&Round) -> Option<Duration>, heap: Option<usize>| {
        let times: Vec<Duration> = rounds.iter().filter_map(f).collect();
        let Some(ratio) = spread(&rounds, |r| {
            Some(f(r)?.as_secs_f64() / r.floor.as_secs_f64())
        }) else {
            return;
        };
        let t = median(times).as_secs_f64();
        println!(
            "{:<22} {:>8.1}ms {:>8.2} {:>9.2} {:>14.3e} {:>12}",
            name,
            t * 1e3,
            ratio.0,
            bytes as f64 / 1e9 / t,
            elements as f64 / t,
            heap.map_or(String::new(), |h| format!(
                "{:.2}MiB",
                h as f64 / (1 << 20) as f64
            ))
        );
    };
    row("floor (read both)", &|r| Some(r.floor), None);
    row("gate --source", &|r| Some(r.gate), Some(heap));
    row("form checks alone", &|r| Some(r.form), None);
    row("arithmetic in cache", &|r| r.arithmetic, None);
    row("sequential yardstick", &|r| r.yardstick, None);
    row("yardstick in cache", &|r| r.yardstick_in_cache, None);
    row("gate, scalar loop", &|r| r.scalar, Some(scalar_heap));
    let seconds = |d: Duration| d.as_secs_f64();
    let line = |what: &str, f: &dyn Fn(&Round) -> Option<f64>| {
        if let Some((m, lo, hi)) = spread(&rounds, f) {
            println!(
                "{what}: median {m:.2} (range {lo:.2}..{hi:.2}, {} rounds)",
                rounds.len()
            );
        }
    };
    line("gate/floor per round", &|r| {
        Some(seconds(r.gate) / seconds(r.floor))
    });
    line("vectorizing buys (scalar loop / gate, same round)", &|r| {
        Some(seconds(r.scalar?) / seconds(r.gate))
    });
    // Bounds on the gate while its form checks are a pass of their own: with every memory wait hidden
    // behind the comparison's arithmetic, and with waits as the yardstick meets them. Slightly high:
    // the form checks' own run maps and faults in the package, which the gate does once for both.
    line(
        "form checks + max(arithmetic in cache, floor), x floor",
        &|r| {
            Some(
                (seconds(r.form) + seconds(r.arithmetic?).max(seconds(r.floor))) / seconds(r.floor),
            )
        },
    );
    line("form checks + sequential yardstick, x floor", &|r| {
        Some((seconds(r.form) + seconds(r.yardstick?)) / seconds(r.floor))
    });
    line(
        "the gate less its form checks, x the sequential yardstick",
        &|r| Some((seconds(r.gate) - seconds(r.form)) / seconds(r.yardstick?)),
    );
    line("yardstick / kernel, both in cache", &|r| {
        Some(seconds(r.yardstick_in_cache?) / seconds(r.arithmetic?))
    });
    pairing(cache, runs);
}

/// Tensors paired by `--source` beside the package's own: 100,000 tiny BF16 tensors in both.
const PAIRED: usize = 100_000;

/// The small package with [`PAIRED`] more BF16 tensors, and a checkpoint holding every one of them.
fn ensure_many(dir: &Path) -> (PathBuf, PathBuf) {
    let (draft, source) = (dir.join("draft"), dir.join("source"));
    if dir.join(DONE).is_file() {
        return (draft, source);
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(&draft).expect("draft directory");
    std::fs::create_dir_all(&source).expect("source directory");
    let mut package = Package::generate(&Geometry::small(), Encoding::default(), SEED);
    for i in 0..PAIRED {
        let name = format!("extra.{i}.weight");
        package
            .tensors
            .push(gate_tests::defects::stray(&name, vec![2]));
    }
    write_source(&mut package, &source, SourceOptions::default(), SEED)
        .expect("writing the source");
    package.write(&draft).expect("writing the package");
    std::fs::write(dir.join(DONE), b"").expect("marker");
    (draft, source)
}

/// Pairing by name at scale: the gate with and without `--source` over [`PAIRED`] extra tensors
/// (the package fails inventory.explained for them; `source.inventory` must pair every one). With a
/// linear search per pair this took 22 s against 0.2 s without `--source`.
fn pairing(cache: &Path, runs: usize) {
    let (draft, source) = ensure_many(&cache.join("many-paired"));
    let with = dflash_gate::Options::default().with_source(source);
    let time = |options: &dflash_gate::Options| {
        let start = Instant::now();
        let report = black_box(dflash_gate::gate(&draft, options).expect("gate runs"));
        let took = start.elapsed();
        if options.source.is_some() {
            let inventory = report.check(dflash_gate::CheckId::SOURCE_INVENTORY);
            assert_eq!(
                inventory.map(|c| c.outcome()),
                Some(dflash_gate::Outcome::Pass),
                "every tensor paired"
            );
        }
        took
    };
    let (mut sourced, mut plain, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs.max(1) {
        let (s, p) = (time(&with), time(&dflash_gate::Options::default()));
        ratios.push(s.as_secs_f64() / p.as_secs_f64());
        sourced.push(s);
        plain.push(p);
    }
    ratios.sort_by(f64::total_cmp);
    println!("\npairing, small package + {PAIRED} BF16 tensors paired with their source");
    println!(
        "{:<22} {:>8.1}ms\n{:<22} {:>8.1}ms\nwith / without --source per round: median {:.2} (range {:.2}..{:.2}, {} rounds)",
        "gate --source",
        median(sourced).as_secs_f64() * 1e3,
        "gate without --source",
        median(plain).as_secs_f64() * 1e3,
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1],
        ratios.len()
    );
}
