//! Hostile conditions around the bytes rather than in them: a weight file truncated while the gate
//! reads it. The gate runs in this process, so a `SIGBUS` would end the whole suite.

use dflash_gate::FileError;
use dflash_gate::PackageError;
use gate_tests::arms::{prepare_arm, Base, Extra, SEED};
use gate_tests::synth::{Encoding, Geometry, Package};
use libtest_mimic::{Failed, Trial};
use sha2::Digest;
use std::time::{Duration, Instant};

pub fn trials() -> Vec<Trial> {
    let mut trials = worker_panics();
    trials.extend([
        Trial::test(
            "hostile::a_worker_panic_in_a_folders_scans_is_an_internal_error_not_a_verdict",
            folder_scans_panic,
        ),
        Trial::test(
            "hostile::weight_file_truncated_while_read_is_changed_never_a_signal",
            truncated_while_read,
        ),
        Trial::test(
            "hostile::a_million_empty_tensors_and_a_thousand_layers_are_refused_by_count",
            million_empty_tensors,
        ),
        Trial::test(
            "hostile::a_million_one_byte_tensors_are_reported_in_bounded_memory",
            million_one_byte_tensors,
        ),
        Trial::test(
            "hostile::names_from_the_file_cannot_forge_report_lines",
            forged_lines,
        ),
        Trial::test(
            "hostile::source_bounds_fail_on_nan_and_on_broken_headers",
            source_bounds,
        ),
        Trial::test(
            "hostile::a_hundred_thousand_paired_tensors_are_paired_by_index",
            many_paired_tensors,
        ),
        Trial::test(
            "hostile::a_config_or_weight_file_linking_out_of_the_package_is_never_read",
            linked_out,
        ),
        Trial::test(
            "hostile::an_absent_manifest_leaves_provenance_not_checked",
            absent_manifest,
        ),
        Trial::test(
            "hostile::a_file_renamed_into_place_before_the_manifest_is_hashed_is_changed",
            renamed_before_hashing,
        ),
        Trial::test(
            "hostile::a_hub_cache_snapshot_gates_and_verifies_its_manifest",
            hub_snapshot,
        ),
        Trial::test(
            "hostile::a_hub_cache_download_passes_manifest_by_its_blob_names",
            hub_download_passes,
        ),
        Trial::test(
            "hostile::a_hub_cache_blob_changed_in_place_fails_manifest_naming_the_file",
            hub_blob_changed,
        ),
        Trial::test(
            "hostile::a_hub_cache_file_no_digest_names_leaves_manifest_undecided",
            hub_file_of_its_own,
        ),
        Trial::test(
            "hostile::a_manifest_is_never_quoted_nor_followed_out_of_the_package",
            manifest_never_quoted,
        ),
        Trial::test(
            "hostile::a_target_header_length_past_its_file_or_the_limit_is_refused_unread",
            target_header_length,
        ),
        Trial::test(
            "hostile::a_refused_container_names_its_refusal_and_offsets",
            container_refusal,
        ),
        Trial::test(
            "hostile::a_weight_file_that_is_another_kind_of_file_says_what_it_is_and_what_to_do",
            foreign_weight_files,
        ),
        Trial::test(
            "hostile::a_source_comparison_that_could_not_decide_leaves_its_not_checked_lines",
            undecided_source_keeps_not_checked,
        ),
    ]);
    trials
}

/// Tensors `--source` pairs, many of them: every lookup by name is indexed, so 100,000 paired
/// tensors (a linear search per pair took seconds per ten thousand) cost a small factor of the run
/// without `--source`. The limit is generous, for a loaded machine; `cargo xtask bench --only source` times it.
fn many_paired_tensors() -> Result<(), Failed> {
    const COUNT: usize = 100_000;
    const LIMIT: Duration = Duration::from_secs(30);
    let root = tempfile::tempdir()?;
    let mut package = Package::generate(&Geometry::small(), Encoding::default(), SEED);
    let own = package.tensors.len();
    for i in 0..COUNT {
        package.tensors.push(gate_tests::defects::stray(
            &format!("extra.{i}.weight"),
            vec![2],
        ));
    }
    let source = root.path().join("source");
    std::fs::create_dir(&source)?;
    gate_tests::synth::source::write_source(
        &mut package,
        &source,
        gate_tests::arms::source::FAITHFUL.options,
        SEED,
    )?;
    let dir = root.path().join("draft");
    std::fs::create_dir(&dir)?;
    package.write(&dir)?;
    let options = dflash_gate::Options::default().with_source(source);
    let start = Instant::now();
    let report = dflash_gate::gate(&dir, &options)?;
    let took = start.elapsed();
    let start = Instant::now();
    dflash_gate::gate(&dir, &dflash_gate::Options::default())?;
    let plain = start.elapsed();
    let paired = report
        .check(dflash_gate::CheckId::SOURCE_INVENTORY)
        .map(|c| match c.evidence() {
            Some(dflash_gate::Evidence::SourceInventory(e)) => (c.outcome(), Some(e.paired as u64)),
            _ => (c.outcome(), None),
        });
    // The package's own tensors less its scalars, which have no source tensor, plus the strays.
    let scalars = package
        .tensors
        .iter()
        .filter(|t| t.name.starts_with("dflash."))
        .count();
    let want = (own - scalars + COUNT) as u64;
    if paired != Some((dflash_gate::Outcome::Pass, Some(want))) {
        return Err(
            format!("source.inventory: {paired:?}, expected PASS with {want} paired").into(),
        );
    }
    let bf16 = report
        .check(dflash_gate::CheckId::SOURCE_BF16)
        .map(|c| c.outcome());
    if bf16 != Some(dflash_gate::Outcome::Pass) {
        return Err(format!("source.bf16: {bf16:?}, expected PASS").into());
    }
    // Measured about 3 times the run without --source; the quadratic pairing took 22 s against its
    // 0.2 s. The bound leaves room for a loaded machine.
    let limit = LIMIT.min(plain * 20 + Duration::from_secs(5));
    if took > limit {
        return Err(format!(
            "{want} paired tensors took {took:?} with --source, {plain:?} without: over {limit:?}"
        )
        .into());
    }
    Ok(())
}

/// `source.q4_1`'s bounds, where no arm reaches: a NaN or infinite relative RMS error is over the
/// ceiling, and no element of a group whose header is broken (a NaN, negative or infinite scale, a
/// minimum that is not finite) is in bound, nor does asking panic on the empty or NaN range such a
/// header makes.
fn source_bounds() -> Result<(), Failed> {
    use dflash_gate::__private::source::{kernels, within_ceiling, RMS_CEILING};
    for rms in [f64::NAN, f64::INFINITY, RMS_CEILING * 1.0001] {
        if within_ceiling(rms) {
            return Err(format!("a relative RMS error of {rms} passed the ceiling").into());
        }
    }
    for rms in [0.0, 0.08, RMS_CEILING] {
        if !within_ceiling(rms) {
            return Err(format!("a relative RMS error of {rms} failed the ceiling").into());
        }
    }
    let broken = [
        (f32::NAN, 0.0),
        (-0.01, 0.0),
        (f32::INFINITY, 0.0),
        (0.1, f32::NAN),
        (0.1, f32::INFINITY),
        (0.1, f32::NEG_INFINITY),
    ];
    for (d, m) in broken {
        for q in [0u8, 1, 8, 15] {
            for s in [0.0f32, 0.5, -0.5, 1e30] {
                if kernels::element_ok(q, s, d, m) {
                    return Err(format!(
                        "code {q} against {s} is in bound under the broken header d = {d}, m = {m}"
                    )
                    .into());
                }
            }
        }
    }
    Ok(())
}

/// Every step that runs on all cores, with its workers made to panic: the run ends as an internal
/// error (exit 2) naming the step, never a verdict drawn from what the other workers returned. The
/// same package without the panic passes, so the error is the panic's alone.
fn worker_panics() -> Vec<Trial> {
    let steps: [(&str, &'static str, Extra); 8] = [
        (
            "tile_header_scan",
            dflash_gate::__private::checks::SCAN_STEP,
            Extra::None,
        ),
        (
            "bf16_finite",
            dflash_gate::CheckId::BF16_FINITE,
            Extra::None,
        ),
        // With --source, bf16.finite runs after the comparison, over what it did not prove: the gains.
        (
            "bf16_finite_after_the_source",
            dflash_gate::CheckId::BF16_FINITE,
            Extra::Source(gate_tests::arms::source::FAITHFUL),
        ),
        (
            "source_bf16",
            dflash_gate::CheckId::SOURCE_BF16,
            Extra::Source(gate_tests::arms::source::FAITHFUL),
        ),
        (
            "source_q4_1",
            dflash_gate::CheckId::SOURCE_Q4_1,
            Extra::Source(gate_tests::arms::source::FAITHFUL),
        ),
        (
            "source_q4_1_against_a_gguf",
            dflash_gate::CheckId::SOURCE_Q4_1,
            Extra::Source(gate_tests::arms::gguf::SOURCE),
        ),
        (
            "opening_the_source",
            dflash_gate::__private::package::OPEN_SOURCE,
            Extra::Source(gate_tests::arms::gguf::SOURCE),
        ),
        (
            "manifest_hashing",
            dflash_gate::CheckId::MANIFEST_SHA256,
            Extra::Manifest(|_| {}),
        ),
    ];
    steps
        .into_iter()
        .map(|(name, step, extra)| {
            Trial::test(
                format!("hostile::a_worker_panic_in_{name}_is_an_internal_error_not_a_verdict"),
                move || worker_panic(step, extra),
            )
        })
        .collect()
}

fn worker_panic(step: &'static str, extra: Extra) -> Result<(), Failed> {
    let root = tempfile::tempdir()?;
    let (dir, options) = prepare_arm(root.path(), Base::Small, Encoding::default(), |_| {}, extra)?;
    let report = dflash_gate::gate(&dir, &options)?;
    if report.verdict() != dflash_gate::Outcome::Pass {
        return Err(format!("without the panic: {}, expected PASS", report.verdict()).into());
    }
    let err = gate_with_a_panic_in(step, &dir, &options)?;
    gate_tests::schema::validate(&dflash_gate::error_json("draft", &err))?;
    Ok(())
}

/// Gates `dir` with every worker of `step` made to panic: the internal error naming the step that
/// the gate must end with, or why what it gave instead is wrong.
fn gate_with_a_panic_in(
    step: &'static str,
    dir: &std::path::Path,
    options: &dflash_gate::Options,
) -> Result<PackageError, Failed> {
    let outcome = {
        let _armed = dflash_gate::__private::parallel::fault::panic_in(step);
        dflash_gate::gate(dir, options)
    };
    let err = match outcome {
        Ok(report) => {
            return Err(format!(
                "a worker of {step} panicked and the gate still gave a verdict: {}",
                report.verdict()
            )
            .into())
        }
        Err(e) => e,
    };
    let text = err.to_string();
    if err.reason() != "internal" || !text.contains(step) || !text.contains("injected into") {
        return Err(format!(
            "expected an internal error naming {step:?}, got {}: {text}",
            err.reason()
        )
        .into());
    }
    Ok(err)
}

/// A quantized folder's scans (`bf16.finite`'s norms and `quant.scales`'s scales, read in one step
/// on every core): a worker that panics is an internal error naming the step, never a verdict drawn
/// from what the other worker read. The same folder without the panic passes.
fn folder_scans_panic() -> Result<(), Failed> {
    let root = tempfile::tempdir()?;
    let dir = gate_tests::arms::folder::write_arm(
        "folder::pass::pack_quantized_w4_group",
        &root.path().join("draft"),
    )?;
    let options = dflash_gate::Options::default();
    let report = dflash_gate::gate(&dir, &options)?;
    if report.verdict() != dflash_gate::Outcome::Pass {
        return Err(format!("without the panic: {}, expected PASS", report.verdict()).into());
    }
    let err = gate_with_a_panic_in(dflash_gate::__private::draft::folder::SCANS, &dir, &options)?;
    gate_tests::schema::validate(&dflash_gate::error_json("draft", &err))?;
    Ok(())
}

/// Tensor names and metadata holding newlines, terminal escapes and a bidirectional override: the
/// human report keeps each on its line, escaped, and the JSON keeps them exactly.
fn forged_lines() -> Result<(), Failed> {
    let forged = [
        "x\nVERDICT      PASS\n17 of 17 checks passed (0.01 s)",
        "y\r\u{1b}[1A\u{1b}[2KPASS       inventory.explained",
        "z\u{202e}SSAP",
    ];
    let mut package = Package::generate(&Geometry::small(), Encoding::default(), SEED);
    for name in forged {
        package
            .tensors
            .push(gate_tests::defects::stray(name, vec![2]));
    }
    let long = "n".repeat(3 * dflash_gate::__private::escape::MAX_LINE_CHARS);
    package
        .tensors
        .push(gate_tests::defects::stray(&long, vec![2]));
    let config = serde_json::to_vec(&package.config)?;
    let weights = package.weight_bytes();
    let report = dflash_gate::evaluate(
        "forged",
        Ok(config),
        Ok(("model.q4nx", &weights)),
        Vec::new(),
    )?;
    if report.verdict() != dflash_gate::Outcome::Fail {
        return Err(format!("verdict {}, expected FAIL", report.verdict()).into());
    }
    for census in [false, true] {
        let text = report.to_text(census);
        let verdicts: Vec<&str> = text.lines().filter(|l| l.starts_with("VERDICT")).collect();
        if verdicts != ["VERDICT      FAIL"] {
            return Err(format!("verdict lines {verdicts:?} in:\n{text}").into());
        }
        if text
            .lines()
            .filter(|l| {
                l.starts_with(|c: char| c.is_ascii_digit()) && l.contains(" checks passed (")
            })
            .count()
            != 1
        {
            return Err(format!("a forged count line in:\n{text}").into());
        }
        if let Some(c) = text
            .chars()
            .find(|&c| c == '\u{1b}' || c == '\r' || c == '\u{202e}')
        {
            return Err(format!("{c:?} reached the human report").into());
        }
        if let Some(l) = text
            .lines()
            .find(|l| l.chars().count() > dflash_gate::__private::escape::MAX_LINE_CHARS + 64)
        {
            return Err(format!("a line of {} characters", l.chars().count()).into());
        }
    }
    let json = report.to_json().to_string();
    let back: serde_json::Value = serde_json::from_str(&json)?;
    let names: Vec<&str> = back["census"]["tensors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for name in forged.iter().chain([&long.as_str()]) {
        if !names.contains(name) {
            return Err(format!("the JSON lost {name:?}").into());
        }
    }
    Ok(())
}

/// A header of 2^20 zero-byte tensors under a config of 1,000 layers: once a minute of quadratic
/// lookups (and a census of a million lines), now refused as it streams, past the 1,024th. The run
/// has a deadline, so a return to quadratic cost fails instead of stalling the suite.
fn million_empty_tensors() -> Result<(), Failed> {
    use std::fmt::Write;
    let mut header = String::from("{");
    for i in 0..1u32 << 20 {
        let _ = write!(
            header,
            "\"model.layers.{}.t{i}\":{{\"dtype\":\"I8\",\"shape\":[0],\"data_offsets\":[0,0]}},",
            i % 1000
        );
    }
    header.push_str("\"z\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[0,1]}}");
    let mut weights = (header.len() as u64).to_le_bytes().to_vec();
    weights.extend_from_slice(header.as_bytes());
    weights.push(0);
    drop(header);
    let mut package = Package::generate(&Geometry::small(), Encoding::default(), SEED);
    package.config["num_hidden_layers"] = 1000.into();
    let config = serde_json::to_vec(&package.config)?;
    let (done, report) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = dflash_gate::evaluate(
            "hostile",
            Ok(config),
            Ok(("model.q4nx", &weights)),
            Vec::new(),
        );
        let _ = done.send(r);
    });
    let report = report
        .recv_timeout(Duration::from_secs(120))
        .map_err(|_| "the gate did not return within 120 s")??;
    let parses = report
        .check("container.parses")
        .map(|c| (c.outcome(), c.message()));
    match parses {
        Some((dflash_gate::Outcome::Fail, m))
            if m.contains("at least 1025 zero-byte tensors, more than the 1024 accepted") =>
        {
            Ok(())
        }
        other => Err(format!("container.parses: {other:?}").into()),
    }
}

/// A package whose header declares 2^20 one-byte tensors (the format's tensor limit) in just under
/// the format's 100 MiB header limit. The command line gates it three ways (the report, `--json`,
/// `--census`), each in a child whose peak resident memory the kernel reports (`wait4`): each must
/// stay under 8 times the header and under 2 GiB, and say how many tensors it checked but did not
/// list. Before the census was bounded, `--json` of such a header took 3.2 GB.
#[cfg(target_os = "linux")]
fn million_one_byte_tensors() -> Result<(), Failed> {
    use std::fmt::Write;
    let count = dflash_gate::__private::limits::MAX_TENSORS;
    let mut header = String::with_capacity(100 << 20);
    header.push('{');
    for i in 0..count {
        let _ = write!(
            header,
            "\"model.layers.0.mlp.extra_{i:07}.weight\":{{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[{i},{}]}},",
            i + 1
        );
    }
    header.pop();
    header.push('}');
    while !header.len().is_multiple_of(8) {
        header.push(' ');
    }
    let header_bytes = header.len() as u64;
    let limit = dflash_gate::__private::limits::MAX_HEADER_BYTES;
    if !(limit - (8 << 20) < header_bytes && header_bytes <= limit) {
        return Err(format!("the header is {header_bytes} bytes, not just under {limit}").into());
    }
    let root = tempfile::tempdir()?;
    let dir = root.path().join("wide");
    std::fs::create_dir(&dir)?;
    let mut weights = header_bytes.to_le_bytes().to_vec();
    weights.extend_from_slice(header.as_bytes());
    drop(header);
    weights.resize(weights.len() + count, 0);
    std::fs::write(dir.join("model.q4nx"), &weights)?;
    drop(weights);
    let package = Package::generate(&Geometry::small(), Encoding::default(), SEED);
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_vec(&package.config)?,
    )?;
    let bound = (8 * header_bytes).min(2 << 30);
    for extra in [None, Some("--json"), Some("--census")] {
        let out = root.path().join("out");
        let (code, peak) = measured(
            &[env!("CARGO_BIN_EXE_dflash-gate").as_ref(), dir.as_os_str()],
            extra,
            &out,
            &root.path().join("peak"),
        )?;
        let shown = extra.unwrap_or("the report");
        // A NaN-free bound: a peak of 0 (not measured) fails too.
        if !(0 < peak && peak < bound) {
            return Err(format!(
                "{shown}: peak memory {peak} bytes, bound {bound} (header {header_bytes})"
            )
            .into());
        }
        let text = std::fs::read_to_string(&out)?;
        let said = match extra {
            Some("--json") => {
                let doc: serde_json::Value = serde_json::from_str(&text)?;
                gate_tests::schema::validate(&doc)?;
                doc["census"]["tensors_not_listed"]
                    == serde_json::json!(count - dflash_gate::__private::limits::MAX_CENSUS_TENSORS)
            }
            Some(_) => text.contains(&format!(
                "... and {} more tensors, checked but not listed",
                count - dflash_gate::__private::limits::MAX_CENSUS_TENSORS
            )),
            None => text.contains(&format!("census: {count} tensors:")),
        };
        if code != Some(1) || !said {
            return Err(
                format!("{shown}: exit {code:?}, the output does not count every tensor").into(),
            );
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn million_one_byte_tensors() -> Result<(), Failed> {
    Err("needs Linux's wait4 to measure a child's peak memory".into())
}

/// The environment variable that makes the suite binary measure one command instead of running
/// trials (see [`measure`]); its value is the file the peak is written to.
pub const MEASURE_VAR: &str = "DFLASH_GATE_SUITE_MEASURE";

/// Runs `program args extra` through a fresh copy of this binary in measure mode, stdout to `out`;
/// the exit code and the peak resident memory in bytes. Measured from a fresh process, not from this
/// one: Linux carries the high-water mark of the memory a child was forked from across its `exec`,
/// so a child spawned straight from the suite (hundreds of MB at its peak) reports the suite's
/// peak, not its own.
#[cfg(target_os = "linux")]
fn measured(
    program: &[&std::ffi::OsStr],
    extra: Option<&str>,
    out: &std::path::Path,
    peak: &std::path::Path,
) -> Result<(Option<i32>, u64), Failed> {
    let status = std::process::Command::new(std::env::current_exe()?)
        .env(MEASURE_VAR, peak)
        .args(program)
        .args(extra)
        .stdout(std::fs::File::create(out)?)
        .stderr(std::process::Stdio::null())
        .status()?;
    let peak: u64 = std::fs::read_to_string(peak)?.trim().parse()?;
    Ok((status.code(), peak))
}

/// Measure mode: runs this process's arguments as a command and writes its peak resident memory in
/// bytes to `report`; exits with its exit code. This process is fresh, a few MB, so the command's
/// high-water mark is its own.
#[cfg(target_os = "linux")]
pub fn measure(report: &str) -> std::process::ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next() else {
        return std::process::ExitCode::from(2);
    };
    let mut command = std::process::Command::new(program);
    command.args(args).env_remove(MEASURE_VAR);
    match peak_memory(command) {
        Ok((code, peak)) if std::fs::write(report, peak.to_string()).is_ok() => {
            std::process::ExitCode::from(code.and_then(|c| u8::try_from(c).ok()).unwrap_or(255))
        }
        _ => std::process::ExitCode::from(2),
    }
}

#[cfg(not(target_os = "linux"))]
pub fn measure(_: &str) -> std::process::ExitCode {
    std::process::ExitCode::from(2)
}

/// Runs `command` to its end; its exit code and its peak resident memory in bytes, as the kernel
/// accounted it for that child alone.
#[cfg(target_os = "linux")]
fn peak_memory(mut command: std::process::Command) -> Result<(Option<i32>, u64), Failed> {
    let child = command.spawn()?;
    let pid = libc::pid_t::try_from(child.id())?;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct wait4 fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is this process's own unreaped child; both pointers are to live locals.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if reaped != pid {
        return Err(std::io::Error::last_os_error().into());
    }
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    // Linux reports ru_maxrss in KiB.
    Ok((code, u64::try_from(usage.ru_maxrss)? * 1024))
}

/// Truncates the reference-sized weight file at a spread of moments during a gate run. Each run must
/// end as one of: refused as changed (truncated mid-read), a failed container (truncated before it was
/// opened), or a pass (truncated after it was read); and the middle must have been hit at least once.
fn truncated_while_read() -> Result<(), Failed> {
    let root = tempfile::tempdir()?;
    let dir = root.path();
    Package::generate(&Geometry::bolt(), Encoding::default(), SEED).write(dir)?;
    let path = dir.join("model.q4nx");
    let whole = std::fs::read(&path)?;
    let options = dflash_gate::Options::default();
    let start = Instant::now();
    let report = dflash_gate::gate(dir, &options)?;
    let full = start.elapsed();
    if report.verdict() != dflash_gate::Outcome::Pass {
        return Err("the untouched package does not pass".into());
    }
    const TRIES: u32 = 6;
    let (mut changed, mut before, mut after) = (0, 0, 0);
    for i in 0..TRIES {
        std::fs::write(&path, &whole)?;
        let run = {
            let dir = dir.to_owned();
            let options = options.clone();
            std::thread::spawn(move || dflash_gate::gate(&dir, &options))
        };
        std::thread::sleep(full * (i + 1) / (TRIES + 2) + Duration::from_micros(50));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)?
            .set_len(whole.len() as u64 / 3)?;
        match run.join().map_err(|_| "the gate panicked")? {
            Err(PackageError::File(FileError::Changed { why, .. })) => {
                changed += 1;
                if !why.contains("truncated while mapped") && !why.contains("bytes at open") {
                    return Err(format!("changed, but the reason is not named: {why}").into());
                }
            }
            Err(e) => return Err(format!("try {i}: unexpected error: {e}").into()),
            Ok(r) if r.verdict() == dflash_gate::Outcome::Pass => after += 1,
            Ok(r) => {
                let parses = r.check("container.parses").map(|c| c.message());
                if !parses.is_some_and(|m| m.contains("file is short")) {
                    return Err(format!(
                        "try {i}: refused for another reason: {}",
                        r.to_text(false)
                    )
                    .into());
                }
                before += 1;
            }
        }
    }
    if changed == 0 {
        return Err(format!(
            "no try truncated the file mid-read ({before} before, {after} after, a full run takes {full:?})"
        )
        .into());
    }
    Ok(())
}

/// A Hugging Face hub cache snapshot, every file (the manifest too) a link into `../../blobs/`:
/// the links stay inside the cache's blobs, so the package gates and its manifest verifies.
fn hub_snapshot() -> Result<(), Failed> {
    let root = tempfile::tempdir()?;
    let dir = gate_tests::fixture::hub_snapshot(root.path(), &[("README.md", b"# a draft\n")]);
    let options = dflash_gate::Options::default().with_manifest(true);
    let report = dflash_gate::gate(&dir, &options)?;
    let manifest = report.check("manifest.sha256").ok_or("no manifest check")?;
    if report.verdict() != dflash_gate::Outcome::Pass || !manifest.message().contains("3 files") {
        return Err(format!("the hub snapshot does not pass:\n{}", report.to_text(false)).into());
    }
    Ok(())
}

/// `manifest.sha256` of a hub cache download (no MANIFEST.sha256): its outcome, message and evidence.
fn hub_manifest(
    dir: &std::path::Path,
) -> Result<(dflash_gate::Outcome, String, serde_json::Value, String), Failed> {
    let options = dflash_gate::Options::default().with_manifest(true);
    let report = dflash_gate::gate(dir, &options)?;
    let check = report.check("manifest.sha256").ok_or("no manifest check")?;
    let document = report.to_json();
    let evidence = document["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["id"] == "manifest.sha256"))
        .map(|c| c["evidence"].clone())
        .unwrap_or_default();
    Ok((
        check.outcome(),
        check.message().to_owned(),
        evidence,
        report.to_text(false),
    ))
}

/// A snapshot as the hub client downloads it has no MANIFEST.sha256: each file is held to the
/// digest its blob is named by, the weights by SHA-256 (the LFS etag), config.json and README.md by
/// git's blob hash; named as the snapshot or as its repository.
fn hub_download_passes() -> Result<(), Failed> {
    let root = tempfile::tempdir()?;
    let dir = gate_tests::fixture::hub_download(root.path(), &[("README.md", b"# a draft\n")]);
    let repository = dir
        .parent()
        .and_then(|d| d.parent())
        .ok_or("no repository")?;
    for named in [dir.as_path(), repository] {
        let (outcome, message, evidence, text) = hub_manifest(named)?;
        if outcome != dflash_gate::Outcome::Pass
            || !message.contains("3 files (1 by SHA-256, the hub's LFS etag; 2 by git's blob hash)")
            || evidence["against"] != "hub_cache"
        {
            return Err(format!("the download does not pass:\n{text}\n{evidence}").into());
        }
    }
    Ok(())
}

/// config.json's blob edited in place (a value that still parses): the file is not the blob its
/// git hash names, and the check FAILs naming config.json.
fn hub_blob_changed() -> Result<(), Failed> {
    let root = tempfile::tempdir()?;
    let dir = gate_tests::fixture::hub_download(root.path(), &[]);
    let blob = std::fs::canonicalize(dir.join("config.json"))?;
    let text = std::fs::read_to_string(&blob)?;
    std::fs::write(&blob, text.replacen("1e-6", "1e-5", 1))?;
    let (outcome, message, evidence, text) = hub_manifest(&dir)?;
    if outcome != dflash_gate::Outcome::Fail
        || !message.contains("not the blob its digest names: config.json (its blob is named ")
        || evidence["mismatched"] != serde_json::json!(["config.json"])
    {
        return Err(format!("a changed blob is not named:\n{text}\n{evidence}").into());
    }
    Ok(())
}

/// A file of its own beside the snapshot's links: nothing vouches for it, so the check cannot pass.
fn hub_file_of_its_own() -> Result<(), Failed> {
    let root = tempfile::tempdir()?;
    let dir = gate_tests::fixture::hub_download(root.path(), &[]);
    std::fs::write(dir.join("notes.txt"), b"added by hand")?;
    let (outcome, message, evidence, text) = hub_manifest(&dir)?;
    if outcome != dflash_gate::Outcome::Undecided
        || !message.contains("no digest names notes.txt (a file of its own, not a link to a blob)")
        || evidence["unverified"] != serde_json::json!(["notes.txt"])
    {
        return Err(format!("an unvouched file is not named:\n{text}\n{evidence}").into());
    }
    Ok(())
}

/// A manifest that is a link to a credentials file out of the package is refused unread, and one in
/// the package whose first line is that secret is named by line and byte: neither report holds it.
fn manifest_never_quoted() -> Result<(), Failed> {
    const SECRET: &str = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG";
    let root = tempfile::tempdir()?;
    let credentials = root.path().join("credentials");
    std::fs::write(&credentials, format!("{SECRET}\n"))?;
    let linked = gate_tests::fixture::copy(root.path(), "linked");
    std::os::unix::fs::symlink(&credentials, linked.join("MANIFEST.sha256"))?;
    let inside = gate_tests::fixture::copy(root.path(), "inside");
    std::fs::copy(&credentials, inside.join("MANIFEST.sha256"))?;
    let options = dflash_gate::Options::default().with_manifest(true);
    for (dir, said) in [
        (&linked, "MANIFEST.sha256 is a symbolic link to "),
        (
            &inside,
            "MANIFEST.sha256: line 1, byte 1 (byte 1 of the file): the digest is not",
        ),
    ] {
        let report = dflash_gate::gate(dir, &options)?;
        let text = report.to_text(false);
        let check = report.check("manifest.sha256").ok_or("no manifest check")?;
        if check.outcome() != dflash_gate::Outcome::Fail || !check.message().contains(said) {
            return Err(format!("not refused as {said:?}:\n{text}").into());
        }
        if text.contains("wJalrXUtnFEMI") || report.to_json().to_string().contains("wJalrXUtnFEMI")
        {
            return Err(format!("the report quotes the file:\n{text}").into());
        }
    }
    Ok(())
}

/// config.json or the weight file replaced by a rename after the checks read it and before
/// `--manifest` hashes it, with a manifest that lists the file renamed in: the checks judged one file
/// and the manifest would vouch for another. Exit 2, "changed while it was read", naming the swap.
fn renamed_before_hashing() -> Result<(), Failed> {
    for name in ["config.json", "model.q4nx"] {
        let root = tempfile::tempdir()?;
        let dir = root.path();
        Package::generate(&Geometry::small(), Encoding::default(), SEED).write(dir)?;
        let mut swapped = std::fs::read(dir.join(name))?;
        // Another config (a geometry the weights do not have), or other weights.
        if name == "config.json" {
            swapped.splice(1..1, *b"\"num_hidden_layers\": 1000,");
        } else {
            *swapped.last_mut().ok_or("an empty weight file")? ^= 0xff;
        }
        let mut manifest = String::new();
        for listed in ["config.json", "model.q4nx"] {
            let bytes = if listed == name {
                swapped.clone()
            } else {
                std::fs::read(dir.join(listed))?
            };
            let digest: String = sha2::Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            manifest += &format!("{digest}  {listed}\n");
        }
        std::fs::write(dir.join("MANIFEST.sha256"), manifest)?;
        let staged = dir.join("staged");
        std::fs::write(&staged, &swapped)?;
        let target = dir.join(name);
        dflash_gate::__private::manifest::before_hashing(move || {
            std::fs::rename(&staged, &target).expect("rename into place")
        });
        let options = dflash_gate::Options::default().with_manifest(true);
        match dflash_gate::gate(dir, &options) {
            Err(PackageError::File(e @ FileError::Changed { .. })) => {
                let text = e.to_string();
                if e.path() != dir.join(name)
                    || !text.contains("changed while it was read")
                    || !text.contains("another file was put in its place")
                {
                    return Err(format!("{name}: changed, but not said so: {text}").into());
                }
            }
            Err(e) => return Err(format!("{name}: another error: {e}").into()),
            Ok(r) => {
                return Err(format!(
                    "{name}: a verdict on files never read together:\n{}",
                    r.to_text(false)
                )
                .into())
            }
        }
    }
    Ok(())
}

/// `--manifest` asked for where there is no manifest: UNDECIDED, and since nothing was verified, the
/// provenance item stays in the not-checked list (silence about it would read as "verified").
fn absent_manifest() -> Result<(), Failed> {
    let root = tempfile::tempdir()?;
    let remove = |dir: &std::path::Path| {
        std::fs::remove_file(dir.join("MANIFEST.sha256")).expect("the arm's manifest is there")
    };
    let (dir, options) = prepare_arm(
        root.path(),
        Base::Small,
        Encoding::default(),
        |_| {},
        Extra::Manifest(remove),
    )?;
    let report = dflash_gate::gate(&dir, &options)?;
    let outcome = report.check("manifest.sha256").map(|c| c.outcome());
    if outcome != Some(dflash_gate::Outcome::Undecided) {
        return Err(format!("manifest.sha256 is {outcome:?}, expected UNDECIDED").into());
    }
    if !report
        .not_checked()
        .contains(&dflash_gate::NotChecked::Provenance)
    {
        return Err("an absent manifest removed the provenance item: nothing was verified".into());
    }
    Ok(())
}

/// config.json or the weight file as a link to a file outside the package (a credentials file): exit
/// 2, "outside the package", before a byte is read, so nothing derived from that file's bytes (the
/// first eight read as a header length, a string read as an architecture) reaches the report.
fn linked_out() -> Result<(), Failed> {
    const SECRET: &[u8] = b"AKIASECRETKEY123AKIASECRETKEY123";
    let root = tempfile::tempdir()?;
    let out = root.path().join("credentials");
    std::fs::write(&out, SECRET)?;
    let json = root.path().join("secret.json");
    std::fs::write(&json, br#"{"architectures": ["sk-live-SECRET123"]}"#)?;
    // The secret's first eight bytes as the little-endian header length the container reader reads.
    let derived = u64::from_le_bytes(SECRET[..8].try_into().expect("eight bytes")).to_string();
    for (file, target) in [("model.q4nx", &out), ("config.json", &json)] {
        let dir = root.path().join(format!("pkg-{file}"));
        std::fs::create_dir_all(&dir)?;
        Package::generate(&Geometry::small(), Encoding::default(), SEED).write(&dir)?;
        std::fs::remove_file(dir.join(file))?;
        std::os::unix::fs::symlink(target, dir.join(file))?;
        let err = match dflash_gate::gate(&dir, &dflash_gate::Options::default()) {
            Ok(report) => {
                return Err(format!(
                    "{file} linking out of the package was read: {}",
                    report.verdict()
                )
                .into())
            }
            Err(e) => e,
        };
        let text = err.to_string();
        if err.reason() != "outside_the_package" {
            return Err(format!(
                "{file}: reason {}, expected outside_the_package: {text}",
                err.reason()
            )
            .into());
        }
        for leaked in ["AKIASECR", "sk-live-SECRET123", derived.as_str()] {
            if text.contains(leaked) {
                return Err(format!(
                    "{file}: the error quotes the linked file ({leaked:?}): {text}"
                )
                .into());
            }
        }
    }
    Ok(())
}

/// A target's weight file whose 8-byte header length runs past the file, or over the header limit,
/// is malformed (exit 2, the file and the length named) before any buffer is sized from it: through
/// the container reader (`model.q4nx`) and the checkpoint reader (`model.safetensors`) alike.
fn target_header_length() -> Result<(), Failed> {
    use dflash_gate::__private::limits::MAX_HEADER_BYTES;
    use gate_tests::synth::TargetPackage;
    let root = tempfile::tempdir()?;
    let draft = root.path().join("draft");
    std::fs::create_dir(&draft)?;
    Package::generate(&Geometry::small(), Encoding::default(), SEED).write(&draft)?;
    for file in ["model.q4nx", "model.safetensors"] {
        for past in [false, true] {
            let target = root.path().join(format!("target-{file}-{past}"));
            TargetPackage::matching(&Geometry::small()).write(&target)?;
            std::fs::rename(target.join("model.q4nx"), target.join(file))?;
            let path = target.join(file);
            let mut bytes = std::fs::read(&path)?;
            let n = if past {
                bytes.len() as u64 - 7
            } else {
                MAX_HEADER_BYTES + 1
            };
            bytes[..8].copy_from_slice(&n.to_le_bytes());
            std::fs::write(&path, &bytes)?;
            let options = dflash_gate::Options::default().with_target(&target);
            let err = match dflash_gate::gate(&draft, &options) {
                Ok(r) => {
                    return Err(
                        format!("{file} with header length {n}: gated, {}", r.verdict()).into(),
                    )
                }
                Err(e) => e,
            };
            let text = err.to_string();
            if err.reason() != "malformed"
                || !text.contains(file)
                || !text.contains(&format!("header length {n} "))
            {
                return Err(format!(
                    "{file} with header length {n}: {}, expected malformed naming both: {text}",
                    err.reason()
                )
                .into());
            }
        }
    }
    Ok(())
}

/// `container.parses` refuses with facts a program can branch on: the refusal's kind as a token and
/// the offsets it involves, not only the message's sentence.
fn container_refusal() -> Result<(), Failed> {
    let package = Package::generate(&Geometry::small(), Encoding::default(), SEED);
    let config = serde_json::to_vec(&package.config)?;
    let weights = package.weight_bytes();
    let cut = weights.len() - 100;
    let evidence = |bytes: &[u8]| -> Result<serde_json::Value, Failed> {
        let report = dflash_gate::evaluate(
            "refused",
            Ok(config.clone()),
            Ok(("model.q4nx", bytes)),
            Vec::new(),
        )?;
        let check = report
            .check(dflash_gate::CheckId::CONTAINER_PARSES)
            .ok_or("no container.parses")?;
        if check.outcome() != dflash_gate::Outcome::Fail {
            return Err(format!("container.parses {}, expected FAIL", check.outcome()).into());
        }
        Ok(serde_json::to_value(check.evidence())?)
    };
    let truncated = evidence(&weights[..cut])?;
    let data_len = truncated["data_len"].as_u64().ok_or("no data_len")?;
    let end = truncated["end"].as_u64().ok_or("no end")?;
    if truncated["kind"] != "truncated" || data_len >= end || !truncated["tensor"].is_string() {
        return Err(format!("a cut weight file: evidence {truncated}").into());
    }
    let short = evidence(&weights[..4])?;
    if short != serde_json::json!({"kind": "too_short", "len": 4}) {
        return Err(format!("a 4-byte weight file: evidence {short}").into());
    }
    Ok(())
}

/// `--source` answers the NOT CHECKED lines about content and real groups' codes only when it
/// decided: against a package whose weight file does not parse (every weight comparison blocked by
/// `container.parses`) both lines stay, as they go for the same package whole.
fn undecided_source_keeps_not_checked() -> Result<(), Failed> {
    use dflash_gate::NotChecked::{Content, RealGroupCodes};
    let root = tempfile::tempdir()?;
    let (draft, gguf) = (root.path().join("draft"), root.path().join("draft.gguf"));
    let mut package = Package::generate(&Geometry::small(), Encoding::default(), SEED);
    gate_tests::synth::gguf::write_gguf(&mut package, &gguf, Default::default(), SEED)?;
    std::fs::create_dir(&draft)?;
    package.write(&draft)?;
    let options = dflash_gate::Options::default().with_source(&gguf);
    let kept = |report: &dflash_gate::Report| {
        [Content, RealGroupCodes].map(|item| report.not_checked().contains(&item))
    };
    let whole = dflash_gate::gate(&draft, &options)?;
    if whole.verdict() != dflash_gate::Outcome::Pass || kept(&whole) != [false, false] {
        return Err(format!(
            "the whole package: {} with content and codes not checked {:?}, expected PASS answering both",
            whole.verdict(),
            kept(&whole)
        )
        .into());
    }
    let weights = draft.join("model.q4nx");
    let len = std::fs::metadata(&weights)?.len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&weights)?
        .set_len(len - 1000)?;
    let cut = dflash_gate::gate(&draft, &options)?;
    if kept(&cut) != [true, true] {
        return Err(format!(
            "a weight file that does not parse, compared with nothing: content and codes kept {:?}, expected both",
            kept(&cut)
        )
        .into());
    }
    Ok(())
}

/// What a checkout without LFS, a saved error page, a reserved-but-unwritten download, an archive or
/// a GGUF leaves as `model.q4nx` is named, with what to do, where a header length of quintillions of
/// bytes told the user nothing: in `container.parses` (its evidence `not_a_container` and what was
/// found) and, for a target's weight file read header-only, in the malformed error.
fn foreign_weight_files() -> Result<(), Failed> {
    use gate_tests::synth::TargetPackage;
    const LFS: &[u8] = b"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 1338\n";
    let package = Package::generate(&Geometry::small(), Encoding::default(), SEED);
    let config = serde_json::to_vec(&package.config)?;
    let cases: [(&str, Vec<u8>, &str); 6] = [
        ("git_lfs_pointer", LFS.to_vec(), "git lfs pull"),
        (
            "html",
            b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head></html>\n".to_vec(),
            "download the file again",
        ),
        ("zeros", vec![0; 65536], "download or copy the file again"),
        (
            "gzip",
            b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03rest".to_vec(),
            "gunzip",
        ),
        (
            "zip",
            b"PK\x03\x04\x14\x00\x00\x00\x08\x00rest".to_vec(),
            "unpack it",
        ),
        (
            "gguf",
            b"GGUF\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00".to_vec(),
            "--source",
        ),
    ];
    for (found, bytes, advice) in &cases {
        let report = dflash_gate::evaluate(
            "foreign",
            Ok(config.clone()),
            Ok(("model.q4nx", bytes)),
            Vec::new(),
        )?;
        let check = report
            .check(dflash_gate::CheckId::CONTAINER_PARSES)
            .ok_or("no container.parses")?;
        let evidence = serde_json::to_value(check.evidence())?;
        let want = serde_json::json!({"kind": "not_a_container", "found": found});
        if check.outcome() != dflash_gate::Outcome::Fail
            || evidence != want
            || !check.message().contains(advice)
        {
            return Err(format!(
                "model.q4nx that is {found}: {} {evidence}: {:?}, expected FAIL with {want} saying {advice:?}",
                check.outcome(),
                check.message()
            )
            .into());
        }
    }
    let root = tempfile::tempdir()?;
    let draft = root.path().join("draft");
    std::fs::create_dir(&draft)?;
    package.write(&draft)?;
    let target = root.path().join("target");
    TargetPackage::matching(&Geometry::small()).write(&target)?;
    std::fs::remove_file(target.join("model.q4nx"))?;
    std::fs::write(target.join("model.safetensors"), LFS)?;
    let options = dflash_gate::Options::default().with_target(&target);
    match dflash_gate::gate(&draft, &options) {
        Ok(r) => Err(format!(
            "a target whose weights are an LFS pointer: gated, {}",
            r.verdict()
        )
        .into()),
        Err(e) if e.reason() == "malformed" && e.to_string().contains("a Git LFS pointer") => {
            Ok(())
        }
        Err(e) => Err(format!(
            "a target whose weights are an LFS pointer: {}: {e}",
            e.reason()
        )
        .into()),
    }
}
