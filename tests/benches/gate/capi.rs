//! The gate in process through the C ABI, on a package the loader has mapped, against the CLI on the
//! same package (a process started, the package read by it): what a C++ loader saves by asking in
//! process. Both timed warm, alternately, in one run; the ratio is the figure.

use dflash_gate_capi::{
    dflash_gate_evaluate, dflash_gate_report_exit_status, dflash_gate_report_free,
    dflash_gate_status,
};
use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Maps config.json and the weight file, as a loader does, and gates the mapping: the exit status.
fn in_process(dir: &Path) -> i32 {
    let map = |name: &str| {
        let file = std::fs::File::open(dir.join(name)).expect("package file");
        // SAFETY: read-only map of a file nothing else writes during the benchmark.
        unsafe { memmap2::Mmap::map(&file) }.expect("map")
    };
    let (config, weights) = (map("config.json"), map("model.q4nx"));
    let (package, name) = ("bench", "model.q4nx");
    let mut report = std::ptr::null_mut();
    // SAFETY: every pointer and length pair is a live buffer; the report is freed below.
    unsafe {
        let status = dflash_gate_evaluate(
            package.as_ptr().cast(),
            package.len(),
            true,
            config.as_ptr(),
            config.len(),
            name.as_ptr().cast(),
            name.len(),
            true,
            weights.as_ptr(),
            weights.len(),
            &mut report,
        );
        assert_eq!(status, dflash_gate_status::DFLASH_GATE_OK);
        let code = dflash_gate_report_exit_status(report);
        assert_eq!(
            dflash_gate_report_free(report),
            dflash_gate_status::DFLASH_GATE_OK
        );
        code
    }
}

fn cli(program: &Path, dir: &Path) -> i32 {
    Command::new(program)
        .arg("--quiet")
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("running the CLI")
        .code()
        .unwrap_or(-1)
}

pub fn run(name: &str, dir: &Path, program: &Path, runs: usize) {
    if !program.is_file() {
        eprintln!(
            "no {}: cargo xtask bench builds it first; in-process row skipped",
            program.display()
        );
        return;
    }
    // Warm, and both must say PASS before anything is timed.
    assert_eq!(in_process(dir), 0, "in process: {name} does not pass");
    assert_eq!(cli(program, dir), 0, "CLI: {name} does not pass");
    let (mut inside, mut outside) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let start = Instant::now();
        black_box(in_process(dir));
        inside.push(start.elapsed());
        let start = Instant::now();
        black_box(cli(program, dir));
        outside.push(start.elapsed());
    }
    let (inside, outside) = (super::median(inside), super::median(outside));
    println!(
        "\nin process (C ABI, mapped by the caller) vs the CLI on {name} ({runs} runs):\n{:<26} {:>8.1}ms\n{:<26} {:>8.1}ms\nratio CLI / in process {:.2}",
        "in process",
        super::ms(inside),
        "CLI (dflash-gate --quiet)",
        super::ms(outside),
        outside.as_secs_f64() / inside.as_secs_f64()
    );
}
