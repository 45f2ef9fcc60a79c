//! The gate against the floor, on the reference package, on a 1.4 GB one, and on the DFlash2
//! reference geometry (2.2 GB: its matrices gridded, its codebooks BF16).
//!
//! The floor is the least work any gate must do: map the file and read every tile-header byte once, in a
//! plain loop with no checks. Both are timed warm, in one process, N times each; the figures that
//! matter are ratios measured in the same run, since the machines are shared and noisy.
//!
//! `cargo xtask bench [--runs N] [--only source|gguf|finite|capi|folder|quantized|target]` runs this; packages are generated once and cached under
//! `target/bench-packages/`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "gate/capi.rs"]
mod capi;
#[path = "gate/finite.rs"]
mod finite;
#[path = "gate/folder.rs"]
mod folder;
#[path = "gate/gguf.rs"]
mod gguf;
#[path = "gate/quantized.rs"]
mod quantized;
#[path = "gate/source.rs"]
mod source;
#[path = "gate/target.rs"]
mod target;
#[path = "gate/yardstick.rs"]
mod yardstick;

use dflash_gate::__private::container::Container;
use dflash_gate::__private::tile::TILE_BYTES;
use gate_tests::arms::SEED;
use gate_tests::synth::{Encoding, Geometry, Package};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Counts live heap bytes and their peak, so heap is measured apart from mapped file pages (which RSS
/// would count).
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

struct Figures {
    name: &'static str,
    bytes: u64,
    groups: u64,
    gate: Duration,
    floor: Duration,
    peak_heap: usize,
}

fn main() {
    let mut runs = 7;
    // `--only source` runs the --source table alone (the rest takes minutes and does not change).
    let mut only = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--runs" {
            runs = args.next().and_then(|n| n.parse().ok()).unwrap_or(runs);
        } else if a == "--only" {
            only = args.next();
        }
    }
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench-packages");
    if only.as_deref() == Some("source") {
        source::run(&cache, runs);
        return;
    }
    // `--only folder` times a Hugging Face folder of the reference geometry against reading it.
    if only.as_deref() == Some("folder") {
        folder::run(&cache, runs);
        return;
    }
    // `--only quantized` times W4A16 and MLX 4-bit folders of the reference geometry.
    if only.as_deref() == Some("quantized") {
        quantized::run(&cache, runs);
        return;
    }
    // `--only target` times --target on a 27B-size target read by header only (sparse files).
    if only.as_deref() == Some("target") {
        target::run(&cache, runs);
        return;
    }
    // `--only gguf` runs the --source FILE.gguf table alone.
    if only.as_deref() == Some("gguf") {
        gguf::run(&cache, runs);
        return;
    }
    let mut all = Vec::new();
    // The DFlash2 package keeps its feature fields in dflash_config, as the published fixture does.
    let nested = Encoding {
        nested_dflash_config: true,
        ..Encoding::default()
    };
    let packages = [
        ("reference (Bolt)", Geometry::bolt(), Encoding::default()),
        (
            "large (4096 x 10 layers)",
            Geometry::large(),
            Encoding::default(),
        ),
        (
            "dflash2 (reference, 2.2 GB)",
            Geometry::dflash2_reference(),
            nested,
        ),
    ];
    let dir_of = |name: &str| cache.join(name.split(' ').next().unwrap_or(name));
    // The CLI that `cargo xtask bench` builds beside this bench, for the in-process row.
    let cli = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/dflash-gate");
    // `--only capi` times the gate in process through the C ABI against the CLI, on the reference.
    if only.as_deref() == Some("capi") {
        let (name, geometry, encoding) = &packages[0];
        ensure_package(&dir_of(name), geometry, *encoding);
        capi::run(name, &dir_of(name), &cli, runs);
        return;
    }
    // `--only finite` times the BF16 finiteness pass alone, on the reference and DFlash2 packages.
    if only.as_deref() == Some("finite") {
        for (name, geometry, encoding) in packages.iter().filter(|p| !p.0.starts_with("large")) {
            ensure_package(&dir_of(name), geometry, *encoding);
            finite::run(name, &dir_of(name), runs);
        }
        return;
    }
    for (name, geometry, encoding) in &packages {
        let dir = dir_of(name);
        ensure_package(&dir, geometry, *encoding);
        all.push(measure(name, &dir, runs));
    }
    println!(
        "\n{:<26} {:>10} {:>10} {:>10} {:>8} {:>9} {:>12} {:>12}",
        "package", "bytes", "gate", "floor", "g/f", "GB/s", "groups/s", "peak heap"
    );
    for f in &all {
        println!(
            "{:<26} {:>10} {:>8.1}ms {:>8.1}ms {:>8.2} {:>9.2} {:>12.3e} {:>10.2}MiB",
            f.name,
            f.bytes,
            ms(f.gate),
            ms(f.floor),
            f.gate.as_secs_f64() / f.floor.as_secs_f64(),
            f.bytes as f64 / 1e9 / f.gate.as_secs_f64(),
            f.groups as f64 / f.gate.as_secs_f64(),
            f.peak_heap as f64 / (1 << 20) as f64
        );
    }
    read_paths(&cache.join("large"), runs);
    capi::run(packages[0].0, &dir_of(packages[0].0), &cli, runs);
    if let [small, large, second] = all.as_slice() {
        let per_gb = |f: &Figures| f.gate.as_secs_f64() / (f.bytes as f64 / 1e9);
        println!(
            "\nper-GB gate time: reference {:.1} ms/GB, large {:.1} ms/GB, ratio large/reference {:.2}",
            per_gb(small) * 1e3,
            per_gb(large) * 1e3,
            per_gb(large) / per_gb(small)
        );
        println!(
            "DFlash2 reference: {:.1} ms/GB, ratio DFlash2/reference {:.2} (target <= 1.25); gate/floor {:.2} (target <= 2.0)",
            per_gb(second) * 1e3,
            per_gb(second) / per_gb(small),
            second.gate.as_secs_f64() / second.floor.as_secs_f64()
        );
    }
    for (name, _, _) in packages.iter().filter(|p| !p.0.starts_with("large")) {
        finite::run(name, &dir_of(name), runs);
    }
    source::run(&cache, runs);
    gguf::run(&cache, runs);
    println!(
        "(medians of {runs} warm runs each; {} worker threads)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Writes the package unless a previous run left one from the same geometry, encoding and seed (its
/// stamp says so, and its weight file is there), so the multi-GB packages are not regenerated in
/// memory on every run.
fn ensure_package(dir: &Path, geometry: &Geometry, encoding: Encoding) {
    let stamp = format!("{geometry:?}\n{encoding:?}\nseed {SEED}\n");
    let stamp_path = dir.join("bench.stamp");
    let fresh = std::fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp)
        && dir.join("model.q4nx").is_file();
    if fresh {
        return;
    }
    eprintln!("generating {} ...", dir.display());
    std::fs::create_dir_all(dir).expect("cache directory");
    let _ = std::fs::remove_file(&stamp_path);
    Package::generate(geometry, encoding, SEED)
        .write(dir)
        .expect("writing the bench package");
    std::fs::write(&stamp_path, stamp).expect("writing the stamp");
}

fn measure(name: &'static str, dir: &Path, runs: usize) -> Figures {
    let options = dflash_gate::Options::default();
    // Warm the page cache and check the package before timing anything.
    let report = dflash_gate::gate(dir, &options).expect("gate runs");
    assert_eq!(
        report.verdict(),
        dflash_gate::Outcome::Pass,
        "{}",
        report.to_text(false)
    );
    let groups: u64 = report
        .census()
        .tensors
        .iter()
        .filter_map(|t| t.grid.as_ref())
        .map(|g| g.real_groups)
        .sum();
    let bytes = report.census().file_bytes.unwrap_or(0);
    let headers = tile_header_ranges(&dir.join("model.q4nx"));
    let mut gate_times = Vec::new();
    let mut floor_times = Vec::new();
    let mut peak_heap = 0;
    for _ in 0..runs {
        let start = Instant::now();
        black_box(floor(&dir.join("model.q4nx"), &headers));
        floor_times.push(start.elapsed());
        PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
        let base = LIVE.load(Ordering::Relaxed);
        let start = Instant::now();
        let report = black_box(dflash_gate::gate(dir, &options).expect("gate runs"));
        gate_times.push(start.elapsed());
        peak_heap = peak_heap.max(PEAK.load(Ordering::Relaxed) - base);
        drop(report);
    }
    eprintln!("{name}: gate {:?}", gate_times);
    Figures {
        name,
        bytes,
        groups,
        gate: median(gate_times),
        floor: median(floor_times),
        peak_heap,
    }
}

/// Byte ranges (in the file) of every tile's 1,024 header bytes, found before timing.
fn tile_header_ranges(path: &Path) -> Vec<(usize, usize)> {
    let file = std::fs::File::open(path).expect("weight file");
    // SAFETY: read-only map of a file nothing else writes during the benchmark.
    let bytes = unsafe { memmap2::Mmap::map(&file) }.expect("map");
    let container = Container::parse(&bytes).expect("container");
    let data_start = container.table.header_bytes as usize;
    let mut out = Vec::new();
    for e in &container.table.entries {
        if e.dtype == dflash_gate::__private::dtype::Dtype::I8 {
            let mut at = data_start + e.begin as usize;
            while at < data_start + e.end as usize {
                out.push((at, at + 1024));
                at += TILE_BYTES as usize;
            }
        }
    }
    out
}

/// Maps the file and reads every tile-header byte once.
fn floor(path: &Path, headers: &[(usize, usize)]) -> u64 {
    let file = std::fs::File::open(path).expect("weight file");
    // SAFETY: read-only map of a file nothing else writes during the benchmark.
    let map = unsafe { memmap2::Mmap::map(&file) }.expect("map");
    sum_headers(&map, headers)
}

fn sum_headers(bytes: &[u8], headers: &[(usize, usize)]) -> u64 {
    let mut sum = 0u64;
    for &(a, b) in headers {
        sum = sum.wrapping_add(sum_range(&bytes[a..b]));
    }
    sum
}

fn sum_range(bytes: &[u8]) -> u64 {
    bytes.chunks_exact(8).fold(0u64, |s, c| {
        s.wrapping_add(u64::from_le_bytes(c.try_into().unwrap_or_default()))
    })
}

/// The ways a truncation-safe gate could read the same tile headers, timed against the plain map
/// (the floor): the map under the SIGBUS guard the gate uses, positioned reads into one reused
/// buffer, and the whole file read into memory. Prints medians, the ratio to the plain map, and peak
/// heap.
fn read_paths(dir: &Path, runs: usize) {
    let path = dir.join("model.q4nx");
    let headers = tile_header_ranges(&path);
    type Reader = (&'static str, Box<dyn Fn() -> u64>);
    let paths: Vec<Reader> = vec![
        ("map, unguarded (the floor)", {
            let (p, h) = (path.clone(), headers.clone());
            Box::new(move || floor(&p, &h))
        }),
        ("map under the SIGBUS guard", {
            let (p, h) = (path.clone(), headers.clone());
            Box::new(move || {
                let bytes = dflash_gate::__private::files::bytes(&p).expect("weight file");
                let sum = sum_headers(bytes.as_slice(), &h);
                bytes.unchanged().expect("unchanged");
                sum
            })
        }),
        ("pread into a reused buffer", {
            let (p, h) = (path.clone(), headers.clone());
            Box::new(move || {
                let file = dflash_gate::__private::files::open(&p).expect("weight file");
                let mut buffer = [0u8; 1024];
                h.iter().fold(0u64, |s, &(a, b)| {
                    file.read_exact_at(a as u64, &mut buffer[..b - a])
                        .expect("read");
                    s.wrapping_add(sum_range(&buffer[..b - a]))
                })
            })
        }),
        ("read whole into memory", {
            let (p, h) = (path.clone(), headers.clone());
            Box::new(move || {
                let bytes = std::fs::read(&p).expect("weight file");
                sum_headers(&bytes, &h)
            })
        }),
    ];
    println!(
        "\nreading the {} tile headers of {} ({} runs):",
        headers.len(),
        path.display(),
        runs
    );
    let mut base = None;
    for (name, read) in &paths {
        let mut times = Vec::new();
        let mut peak_heap = 0;
        let mut sums = Vec::new();
        for _ in 0..runs {
            let live = LIVE.load(Ordering::Relaxed);
            PEAK.store(live, Ordering::Relaxed);
            let start = Instant::now();
            sums.push(black_box(read()));
            times.push(start.elapsed());
            peak_heap = peak_heap.max(PEAK.load(Ordering::Relaxed) - live);
        }
        assert!(sums.windows(2).all(|w| w[0] == w[1]), "{name}: sums differ");
        let t = median(times);
        let base = *base.get_or_insert(t);
        println!(
            "  {name:<30} {:>9.1}ms {:>7.2}x {:>10.2}MiB",
            ms(t),
            t.as_secs_f64() / base.as_secs_f64(),
            peak_heap as f64 / (1 << 20) as f64
        );
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}
