//! The mutation campaign as trials. Each trial runs its share of mutants in a child process (this same
//! binary, told so by `CAMPAIGN_VAR`), so that the counting allocator there sees only the gate and the
//! campaign: the largest single allocation must stay within the largest mutant's size plus a margin.

use libtest_mimic::{Failed, Trial};
use std::io::{BufRead, BufReader, Read};
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

// SAFETY: every call is forwarded unchanged to the system allocator; the counters only observe.
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
    let mut trials: Vec<Trial> = SEEDS
        .iter()
        .map(|&seed| {
            Trial::test(
                format!("campaign::mutations_seed_{seed}_x{PER_TRIAL}"),
                move || parent(&format!("{seed}:{PER_TRIAL}"), CHILD_LIMIT),
            )
        })
        .collect();
    trials.push(Trial::test(
        "campaign::a_hung_child_is_killed_and_its_mutant_named",
        hung_child,
    ));
    trials
}

/// The longest a campaign child may run (10,000 mutants take seconds): past it the child is killed
/// and the trial names the mutant it was on.
const CHILD_LIMIT: Duration = Duration::from_secs(300);

/// Spec suffix that makes the child hang at one mutant, for the trial that proves the kill.
const HANG_AT: &str = "hang-at=";

/// A child told to hang at mutant 3 is killed at the limit, and the failure names mutant 3.
fn hung_child() -> Result<(), Failed> {
    match parent(&format!("1:10:{HANG_AT}3"), Duration::from_secs(5)) {
        Err(e)
            if e.message().is_some_and(|m| {
                m.contains("still running") && m.contains("mutant 3 (seed 1)")
            }) =>
        {
            Ok(())
        }
        Err(e) => Err(format!("failed, but not as a named hang: {:?}", e.message()).into()),
        Ok(()) => Err("a child that hangs was not caught".into()),
    }
}

/// Runs the campaign `spec` (`seed:count[:hang-at=N]`) in a child process, killing it at `limit`.
fn parent(spec: &str, limit: Duration) -> Result<(), Failed> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(exe)
        .env(CAMPAIGN_VAR, spec)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut o) = stdout {
            let _ = o.read_to_string(&mut text);
        }
        text
    });
    // The child names each mutant on stderr before running it; the last name is the one it is on.
    let last = Arc::new(Mutex::new(String::new()));
    let errors = {
        let last = Arc::clone(&last);
        std::thread::spawn(move || {
            let mut other = String::new();
            for line in stderr.into_iter().flat_map(|e| BufReader::new(e).lines()) {
                let Ok(line) = line else { break };
                match line.strip_prefix(RUNNING) {
                    Some(what) => *last.lock().unwrap_or_else(|p| p.into_inner()) = what.to_owned(),
                    None => {
                        other.push_str(&line);
                        other.push('\n');
                    }
                }
            }
            other
        })
    };
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let on = last.lock().unwrap_or_else(|p| p.into_inner()).clone();
            return Err(format!(
                "the campaign child was still running after {limit:?}: killed; it hung on {on}"
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = out.join().unwrap_or_default();
    let errors = errors.join().unwrap_or_default();
    if !status.success() {
        return Err(format!("the campaign child failed:\n{text}\n{errors}").into());
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

/// Stderr prefix of the child's progress lines.
const RUNNING: &str = "running ";

/// The child: runs the campaign and prints its figures on one line; exit 1 on any violation. Each
/// mutant is named on stderr before it runs, so a parent that must kill the child can say where.
pub fn child(spec: &str) -> ExitCode {
    let mut parts = spec.split(':');
    let mut number = || {
        parts
            .next()
            .and_then(|p| p.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let (seed, count) = (number(), number() as usize);
    let hang_at: Option<usize> = spec
        .split(':')
        .find_map(|p| p.strip_prefix(HANG_AT))
        .and_then(|n| n.parse().ok());
    let progress = |i: usize, what: &str| {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("{RUNNING}mutant {i} (seed {seed}): {what}");
        }
        if hang_at == Some(i) {
            loop {
                std::thread::park();
            }
        }
    };
    let heap = Counted {
        base: AtomicUsize::new(0),
    };
    let findings = gate_tests::campaign::run_measured(seed, count, &heap, &progress);
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
