//! The C ABI as a loader calls it, on bytes it holds: the verdict and first objection it reads, and a
//! report freed twice. Here so that `cargo xtask mutants` can break the C ABI and see a trial go red.

use dflash_gate::CheckId;
use dflash_gate_capi::*;
use libtest_mimic::{Failed, Trial};
use std::path::Path;

pub fn trials() -> Vec<Trial> {
    vec![
        Trial::test(
            "capi::a_mapping_cut_short_is_refused_at_its_parse",
            cut_short,
        ),
        Trial::test("capi::a_report_freed_twice_is_refused", freed_twice),
        Trial::test(
            "capi::an_empty_config_handed_over_as_a_null_pointer_is_there_and_empty",
            empty_config,
        ),
    ]
}

fn tiny(file: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/tiny")
            .join(file),
    )
    .expect("the committed package")
}

/// `dflash_gate_evaluate` on `weights` beside the committed config.json.
fn evaluate(weights: &[u8]) -> Result<*mut dflash_gate_report, Failed> {
    let config = tiny("config.json");
    let (package, name) = ("held", "model.q4nx");
    let mut report = std::ptr::null_mut();
    // SAFETY: every pointer and length pair is a live buffer; the caller frees the report.
    let status = unsafe {
        dflash_gate_evaluate(
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
        )
    };
    match status {
        dflash_gate_status::DFLASH_GATE_OK => Ok(report),
        other => Err(format!("dflash_gate_evaluate: {other:?}").into()),
    }
}

fn cut_short() -> Result<(), Failed> {
    let weights = tiny("model.q4nx");
    let whole = evaluate(&weights)?;
    let cut = evaluate(&weights[..weights.len() - 1])?;
    let mut verdicts = [dflash_gate_verdict::DFLASH_GATE_UNDECIDED; 2];
    let mut objection = std::mem::MaybeUninit::<dflash_gate_check>::uninit();
    // SAFETY: live reports, valid out-pointers; the strings are read before the report is freed.
    let (id, codes) = unsafe {
        dflash_gate_report_verdict(whole, &mut verdicts[0]);
        dflash_gate_report_verdict(cut, &mut verdicts[1]);
        let found = dflash_gate_report_first_objection(cut, objection.as_mut_ptr());
        if found != dflash_gate_status::DFLASH_GATE_OK {
            return Err(format!("no first objection: {found:?}").into());
        }
        let id = objection.assume_init().id;
        let id = std::str::from_utf8(std::slice::from_raw_parts(id.ptr.cast::<u8>(), id.len))?
            .to_owned();
        let codes = [
            dflash_gate_report_exit_status(whole),
            dflash_gate_report_exit_status(cut),
        ];
        dflash_gate_report_free(whole);
        dflash_gate_report_free(cut);
        (id, codes)
    };
    let want = [
        dflash_gate_verdict::DFLASH_GATE_PASS,
        dflash_gate_verdict::DFLASH_GATE_FAIL,
    ];
    if verdicts != want || codes != [0, 1] || id != CheckId::CONTAINER_PARSES {
        return Err(format!(
            "whole and cut: verdicts {verdicts:?} (want {want:?}), exit statuses {codes:?} (want [0, 1]), first objection {id} (want {})",
            CheckId::CONTAINER_PARSES
        )
        .into());
    }
    Ok(())
}

fn freed_twice() -> Result<(), Failed> {
    let report = evaluate(&tiny("model.q4nx"))?;
    // SAFETY: a live report, then the same pointer freed, which the library must refuse.
    let (first, second) = unsafe {
        (
            dflash_gate_report_free(report),
            dflash_gate_report_free(report),
        )
    };
    if first != dflash_gate_status::DFLASH_GATE_OK
        || second != dflash_gate_status::DFLASH_GATE_INVALID_HANDLE
    {
        return Err(format!("freed twice: {first:?} then {second:?}").into());
    }
    Ok(())
}

/// A C++ loader that read an empty config.json into a `std::vector` hands over `data()`, which is
/// null: with `has_config` the file is there, so the refusal is about its contents, never "no
/// config.json".
fn empty_config() -> Result<(), Failed> {
    let weights = tiny("model.q4nx");
    let (package, name) = ("held", "model.q4nx");
    let mut report = std::ptr::null_mut();
    let mut objection = std::mem::MaybeUninit::<dflash_gate_check>::uninit();
    // SAFETY: a null config with length 0 is the empty string; the other pairs are live buffers; the
    // message is read before the report is freed.
    let message = unsafe {
        let status = dflash_gate_evaluate(
            package.as_ptr().cast(),
            package.len(),
            true,
            std::ptr::null(),
            0,
            name.as_ptr().cast(),
            name.len(),
            true,
            weights.as_ptr(),
            weights.len(),
            &mut report,
        );
        if status != dflash_gate_status::DFLASH_GATE_OK {
            return Err(format!("dflash_gate_evaluate: {status:?}").into());
        }
        let found = dflash_gate_report_first_objection(report, objection.as_mut_ptr());
        let message = match found {
            dflash_gate_status::DFLASH_GATE_OK => {
                let m = objection.assume_init().message;
                String::from_utf8_lossy(std::slice::from_raw_parts(m.ptr.cast::<u8>(), m.len))
                    .into_owned()
            }
            other => format!("no first objection: {other:?}"),
        };
        dflash_gate_report_free(report);
        message
    };
    if message.contains("no config.json") || !message.contains("config.json") {
        return Err(format!(
            "an empty config.json: {message:?}, expected a refusal of its contents"
        )
        .into());
    }
    Ok(())
}
