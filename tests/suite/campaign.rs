//! The mutation campaign as trials. Each trial runs its share of mutants in a child process (this same
//! binary, told so by `CAMPAIGN_VAR`), so that the counting allocator there sees only the gate and the
//! campaign: the largest single allocation must stay within the largest mutant's size plus a margin.

use libtest_mimic::{Failed, Trial};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

pub const CAMPAIGN_VAR: &str = "DFLASH_GATE_CAMPAIGN";

/// Mutants per trial, and the trials' seeds: 2 x 10,000.
const PER_TRIAL: usize = 10_000;
const SEEDS: [u64; 2] = [1, 2];

/// What the gate may allocate beyond the file in one piece: the campaign's own copy of a mutant can
/// double in capacity when extended, and the gate's buffers are small.
const MARGIN: usize = 1 << 20;

/// Records the largest single allocation the process makes.
pub struct LargestAllocation;

pub static LARGEST: AtomicUsize = AtomicUsize::new(0);
/// Live heap bytes, and their peak since the campaign's last mark.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let live = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

unsafe impl std::alloc::GlobalAlloc for LargestAllocation {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        grew(layout.size());
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        grew(new_size);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

/// The counting allocator as the campaign's heap probe.
struct Counted {
    base: AtomicUsize,
}

impl gate_tests::campaign::Heap for Counted {
    fn mark(&self) {
        let live = LIVE.load(Ordering::Relaxed);
        self.base.store(live, Ordering::Relaxed);
        PEAK.store(live, Ordering::Relaxed);
    }

    fn peak_since_mark(&self) -> usize {
        PEAK.load(Ordering::Relaxed)
            .saturating_sub(self.base.load(Ordering::Relaxed))
    }
}

pub fn trials() -> Vec<Trial> {
    SEEDS
        .iter()
        .map(|&seed| {
            Trial::test(
                format!("campaign::mutations_seed_{seed}_x{PER_TRIAL}"),
                move || parent(seed),
            )
        })
        .collect()
}

fn parent(seed: u64) -> Result<(), Failed> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::process::Command::new(exe)
        .env(CAMPAIGN_VAR, format!("{seed}:{PER_TRIAL}"))
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "the campaign child failed:\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let field = |name: &str| -> Result<usize, Failed> {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| Failed::from(format!("no {name} in: {text}")))
    };
    let (runs, file, largest) = (
        field("runs")?,
        field("largest_file")?,
        field("largest_allocation")?,
    );
    if runs != PER_TRIAL {
        return Err(format!("ran {runs} mutants, not {PER_TRIAL}").into());
    }
    if largest > file + MARGIN {
        return Err(format!(
            "largest allocation {largest} bytes exceeds the largest file {file} + {MARGIN}"
        )
        .into());
    }
    Ok(())
}

/// The child: runs the campaign and prints its figures on one line; exit 1 on any violation.
pub fn child(spec: &str) -> ExitCode {
    let mut parts = spec.split(':').map(|p| p.parse::<u64>().unwrap_or(0));
    let (seed, count) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0) as usize,
    );
    let heap = Counted {
        base: AtomicUsize::new(0),
    };
    let findings = gate_tests::campaign::run_measured(seed, count, &heap);
    let largest = LARGEST.load(Ordering::Relaxed);
    #[allow(clippy::print_stdout)]
    {
        println!(
            "runs={} largest_file={} largest_allocation={largest} slowest_ms={} pass={} fail={} undecided={} kinds={:?}",
            findings.runs,
            findings.largest_file,
            findings.slowest.as_millis(),
            findings.verdicts[0],
            findings.verdicts[1],
            findings.verdicts[2],
            findings.by_kind
        );
        for v in &findings.violations {
            println!("VIOLATION {v}");
        }
    }
    if findings.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
