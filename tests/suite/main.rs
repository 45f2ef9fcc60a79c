//! The test suite: every arm, every tile-arithmetic fact, and every check of every real package is an
//! individually named trial (`cargo test -- --list`).
//!
//! Real packages are `fixtures/*/` plus the directories listed in `DFLASH_GATE_PACKAGES` (separated
//! like PATH). A listed package that is missing is an ignored trial whose name says so, never a pass.

mod campaign;
mod capi;
mod cli;
mod differential;
mod examples;
mod fixtures;
mod generator;
mod gguf;
mod hostile;
mod kernels;
mod options;
mod packages;

use libtest_mimic::{Arguments, Failed, Trial};
use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: campaign::LargestAllocation = campaign::LargestAllocation;

fn main() -> ExitCode {
    if let Ok(spec) = std::env::var(campaign::CAMPAIGN_VAR) {
        return campaign::child(&spec);
    }
    if let Ok(report) = std::env::var(hostile::MEASURE_VAR) {
        return hostile::measure(&report);
    }
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    for arm in gate_tests::arms::all() {
        trials.push(Trial::test(format!("arms::{}", arm.name), move || {
            gate_tests::arms::run(&arm).map_err(Failed::from)
        }));
    }
    for (name, body) in gate_tests::arms::source::unreadable() {
        trials.push(Trial::test(name, move || body().map_err(Failed::from)));
    }
    for (name, body) in gate_tests::arms::folder::trials() {
        trials.push(Trial::test(name, move || body().map_err(Failed::from)));
    }
    for (name, body) in gate_tests::arms::gguf_draft::trials() {
        trials.push(Trial::test(name, move || body().map_err(Failed::from)));
    }
    for (name, body) in gate_tests::arms::gguf_source::trials() {
        trials.push(Trial::test(name, move || body().map_err(Failed::from)));
    }
    for (name, body) in gate_tests::arms::quantized_source::trials() {
        trials.push(Trial::test(name, move || body().map_err(Failed::from)));
    }
    for (name, body) in gate_tests::arms::loader_rules::trials() {
        trials.push(Trial::test(name, move || body().map_err(Failed::from)));
    }
    for (name, body) in gate_tests::arms::gguf::trials() {
        trials.push(Trial::test(name, move || body().map_err(Failed::from)));
    }
    // Without the whole-tile path both runs take the scalar loop: agreeing would prove nothing.
    let wide_absent = kernels::wide_absent();
    for (name, body) in gate_tests::arms::source::paths_agree() {
        trials.push(kernels::needs_wide(wide_absent, name, move || {
            body().map_err(Failed::from)
        }));
    }
    for (name, body) in gate_tests::arms::target_read::trials() {
        trials.push(Trial::test(name, move || body().map_err(Failed::from)));
    }
    for (name, body) in gate_tests::arms::target_forms::trials() {
        trials.push(Trial::test(name, move || body().map_err(Failed::from)));
    }
    for (name, body) in gate_tests::arms::target_gguf_draft::trials() {
        trials.push(Trial::test(name, move || body().map_err(Failed::from)));
    }
    for (name, body) in gate_tests::arms::target_tokenizer::trials() {
        trials.push(Trial::test(name, move || body().map_err(Failed::from)));
    }
    trials.extend(generator::trials());
    trials.extend(gguf::trials());
    trials.extend(examples::trials());
    trials.extend(fixtures::trials());
    trials.extend(packages::trials());
    trials.extend(campaign::trials());
    trials.extend(differential::trials());
    trials.extend(hostile::trials());
    trials.extend(options::trials());
    trials.extend(cli::trials());
    trials.extend(capi::trials());
    trials.extend(kernels::trials());
    libtest_mimic::run(&args, trials).exit_code()
}
