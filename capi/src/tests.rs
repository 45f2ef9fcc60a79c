//! The exported functions, called as a C caller calls them: raw pointers, lengths, statuses.

use super::*;
use std::path::Path;
use std::ptr::null_mut;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tiny() -> PathBuf {
    root().join("fixtures/tiny")
}

fn string(s: dflash_gate_str) -> String {
    assert!(!s.ptr.is_null());
    // SAFETY: a string the library handed out, borrowed from a live report.
    let bytes = unsafe { std::slice::from_raw_parts(s.ptr.cast::<u8>(), s.len) };
    std::str::from_utf8(bytes).unwrap().to_owned()
}

/// `dflash_gate_gate` on `dir`: its status and the report it wrote.
fn try_gate(
    dir: &[u8],
    options: *const dflash_gate_options,
) -> (dflash_gate_status, *mut dflash_gate_report) {
    let mut report = null_mut();
    // SAFETY: a valid buffer and out-pointer.
    let status = unsafe { dflash_gate_gate(dir.as_ptr().cast(), dir.len(), options, &mut report) };
    (status, report)
}

fn gate_dir(dir: &[u8], options: *const dflash_gate_options) -> *mut dflash_gate_report {
    let (status, report) = try_gate(dir, options);
    assert_eq!(status, DFLASH_GATE_OK);
    assert!(!report.is_null());
    report
}

fn evaluate(config: Option<&[u8]>, weights: Option<&[u8]>) -> *mut dflash_gate_report {
    let (package, name) = ("in memory", "model.q4nx");
    let (c, c_len) = config.map_or((std::ptr::null(), 0), |c| (c.as_ptr(), c.len()));
    let (w, w_len) = weights.map_or((std::ptr::null(), 0), |w| (w.as_ptr(), w.len()));
    let (has_config, has_weights) = (config.is_some(), weights.is_some());
    let mut report = null_mut();
    // SAFETY: valid buffers and out-pointer.
    let status = unsafe {
        dflash_gate_evaluate(
            package.as_ptr().cast(),
            package.len(),
            has_config,
            c,
            c_len,
            name.as_ptr().cast(),
            name.len(),
            has_weights,
            w,
            w_len,
            &mut report,
        )
    };
    assert_eq!(status, DFLASH_GATE_OK);
    report
}

fn verdict(report: *const dflash_gate_report) -> dflash_gate_verdict {
    let mut verdict = DFLASH_GATE_PASS;
    assert_eq!(
        // SAFETY: a report handle and a valid out-pointer.
        unsafe { dflash_gate_report_verdict(report, &mut verdict) },
        DFLASH_GATE_OK
    );
    verdict
}

fn objection(report: *const dflash_gate_report) -> (dflash_gate_status, String, String) {
    let mut check = dflash_gate_check {
        id: dflash_gate_str::of(""),
        outcome: DFLASH_GATE_PASS,
        message: dflash_gate_str::of(""),
        blocked_by: dflash_gate_str::of(""),
    };
    // SAFETY: a report handle and a valid out-pointer.
    let status = unsafe { dflash_gate_report_first_objection(report, &mut check) };
    (status, string(check.id), string(check.message))
}

fn count(
    report: *const dflash_gate_report,
    f: unsafe extern "C" fn(*const dflash_gate_report, *mut usize) -> dflash_gate_status,
) -> usize {
    let mut n = usize::MAX;
    // SAFETY: a report handle and a valid out-pointer.
    assert_eq!(unsafe { f(report, &mut n) }, DFLASH_GATE_OK);
    n
}

fn json(report: *const dflash_gate_report) -> serde_json::Value {
    let mut s = dflash_gate_str::of("");
    assert_eq!(
        // SAFETY: a report handle and a valid out-pointer.
        unsafe { dflash_gate_report_json(report, &mut s) },
        DFLASH_GATE_OK
    );
    serde_json::from_str(&string(s)).unwrap()
}

fn free(report: *mut dflash_gate_report) -> dflash_gate_status {
    // SAFETY: the handle is checked by the library.
    unsafe { dflash_gate_report_free(report) }
}

#[test]
fn version_is_the_packages() {
    assert_eq!(string(dflash_gate_version()), env!("CARGO_PKG_VERSION"));
}

#[test]
fn a_good_package_passes_with_every_fact_a_loader_reads() {
    let dir = tiny();
    let report = gate_dir(dir.to_str().unwrap().as_bytes(), std::ptr::null());
    assert_eq!(verdict(report), DFLASH_GATE_PASS);
    // SAFETY: a live report.
    assert_eq!(unsafe { dflash_gate_report_exit_status(report) }, 0);
    assert_eq!(count(report, dflash_gate_report_check_count), 18);
    assert_eq!(objection(report).0, DFLASH_GATE_NOT_FOUND);
    let lines = count(report, dflash_gate_report_not_checked_count);
    assert_eq!(lines, 6);
    let mut line = dflash_gate_str::of("");
    assert_eq!(
        // SAFETY: a live report, valid out-pointer.
        unsafe { dflash_gate_report_not_checked(report, 0, &mut line) },
        DFLASH_GATE_OK
    );
    assert!(string(line).starts_with("vocabulary"), "{}", string(line));
    assert_eq!(
        // SAFETY: as above; one past the end.
        unsafe { dflash_gate_report_not_checked(report, lines, &mut line) },
        DFLASH_GATE_OUT_OF_RANGE
    );

    // The census's offsets are the weight file's: each tensor's bytes are where the header says, and
    // the last one ends at the end of the file.
    let weights = std::fs::read(dir.join("model.q4nx")).unwrap();
    let tensors = count(report, dflash_gate_report_tensor_count);
    assert_eq!(tensors, 20);
    let mut end = 0;
    for i in 0..tensors {
        // SAFETY: a zeroed tensor is plain data to be overwritten.
        let mut t: dflash_gate_tensor = unsafe { std::mem::zeroed() };
        assert_eq!(
            // SAFETY: a live report, valid out-pointer.
            unsafe { dflash_gate_report_tensor(report, i, &mut t) },
            DFLASH_GATE_OK
        );
        // SAFETY: rank dimensions borrowed from the live report.
        let shape = unsafe { std::slice::from_raw_parts(t.shape, t.rank) };
        assert!(!string(t.name).is_empty() && !string(t.dtype).is_empty());
        assert!(!string(t.role).is_empty(), "{} has no role", string(t.name));
        let elements: u64 = shape.iter().product();
        if string(t.dtype) == "BF16" {
            assert_eq!(t.length, elements * 2, "{}", string(t.name));
        }
        assert!(end <= t.offset, "{} overlaps", string(t.name));
        end = t.offset + t.length;
    }
    assert_eq!(end, weights.len() as u64);

    // The JSON is the CLI's document: the committed golden report, the package's name aside.
    let mut golden: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root().join("fixtures/tiny.report.json")).unwrap())
            .unwrap();
    golden["package"] = dir.to_str().unwrap().into();
    assert_eq!(json(report), golden);
    assert_eq!(free(report), DFLASH_GATE_OK);
}

#[test]
fn bytes_already_held_are_gated_as_the_directory_is() {
    let config = std::fs::read(tiny().join("config.json")).unwrap();
    let weights = std::fs::read(tiny().join("model.q4nx")).unwrap();
    let held = evaluate(Some(&config), Some(&weights));
    assert_eq!(verdict(held), DFLASH_GATE_PASS);
    let dir = gate_dir(tiny().to_str().unwrap().as_bytes(), std::ptr::null());
    let (mut a, mut b) = (json(held), json(dir));
    a["package"] = "".into();
    b["package"] = "".into();
    assert_eq!(a, b);
    assert_eq!(free(held), DFLASH_GATE_OK);
    assert_eq!(free(dir), DFLASH_GATE_OK);

    // Cut short, the mapping fails at the container's parse, and says so first.
    let cut = evaluate(Some(&config), Some(&weights[..weights.len() - 100]));
    assert_eq!(verdict(cut), DFLASH_GATE_FAIL);
    // SAFETY: a live report.
    assert_eq!(unsafe { dflash_gate_report_exit_status(cut) }, 1);
    let (status, id, message) = objection(cut);
    assert_eq!(status, DFLASH_GATE_OK);
    assert_eq!(id, dflash_gate::CheckId::CONTAINER_PARSES);
    assert!(message.contains("model.q4nx"), "{message}");
    assert_eq!(free(cut), DFLASH_GATE_OK);

    // No config.json at all: refused at the first check, never a pass.
    let none = evaluate(None, Some(&weights));
    assert_eq!(verdict(none), DFLASH_GATE_FAIL);
    let (_, id, message) = objection(none);
    assert_eq!(id, dflash_gate::CheckId::CONFIG_IS_DFLASH);
    assert!(message.contains("config.json"), "{message}");
    assert_eq!(free(none), DFLASH_GATE_OK);
}

#[test]
fn a_path_that_cannot_be_read_is_a_report_that_could_not_run() {
    let report = gate_dir(b"/nonexistent/dflash-gate-capi", std::ptr::null());
    assert_eq!(verdict(report), DFLASH_GATE_COULD_NOT_RUN);
    // SAFETY: a live report.
    assert_eq!(unsafe { dflash_gate_report_exit_status(report) }, 2);
    assert_eq!(count(report, dflash_gate_report_check_count), 0);
    let (status, id, message) = objection(report);
    assert_eq!(status, DFLASH_GATE_OK);
    assert!(!id.is_empty());
    assert!(
        message.contains("/nonexistent/dflash-gate-capi"),
        "{message}"
    );
    assert_eq!(json(report)["kind"], "error");
    assert_eq!(free(report), DFLASH_GATE_OK);
}

#[test]
fn options_reach_the_library() {
    let mut options = null_mut();
    assert_eq!(
        // SAFETY: a valid out-pointer.
        unsafe { dflash_gate_options_new(&mut options) },
        DFLASH_GATE_OK
    );
    let target = b"/nonexistent/target";
    assert_eq!(
        // SAFETY: a live options handle and a valid buffer.
        unsafe { dflash_gate_options_set_target(options, target.as_ptr().cast(), target.len()) },
        DFLASH_GATE_OK
    );
    let report = gate_dir(tiny().to_str().unwrap().as_bytes(), options);
    // The target cannot be read: the gate could not run, and says it was --target.
    assert_eq!(verdict(report), DFLASH_GATE_COULD_NOT_RUN);
    assert!(
        objection(report).2.contains("--target"),
        "{:?}",
        objection(report)
    );
    assert_eq!(free(report), DFLASH_GATE_OK);
    assert_eq!(
        // SAFETY: a live options handle.
        unsafe { dflash_gate_options_set_manifest(options, true) },
        DFLASH_GATE_OK
    );
    // SAFETY: a live options handle, then the same one again.
    unsafe {
        assert_eq!(dflash_gate_options_free(options), DFLASH_GATE_OK);
        assert_eq!(
            dflash_gate_options_free(options),
            DFLASH_GATE_INVALID_HANDLE
        );
        assert_eq!(
            dflash_gate_options_set_manifest(options, true),
            DFLASH_GATE_INVALID_HANDLE
        );
    }
}

#[test]
fn null_pointers_are_refused_with_a_status() {
    let mut report = null_mut();
    let mut n = 0;
    // SAFETY: every pointer is null or valid; the library must refuse the null ones.
    unsafe {
        assert_eq!(
            dflash_gate_gate(std::ptr::null(), 3, std::ptr::null(), &mut report),
            DFLASH_GATE_NULL_ARGUMENT
        );
        assert!(report.is_null());
        assert_eq!(
            dflash_gate_gate(b"x".as_ptr().cast(), 1, std::ptr::null(), null_mut()),
            DFLASH_GATE_NULL_ARGUMENT
        );
        assert_eq!(
            dflash_gate_report_check_count(std::ptr::null(), &mut n),
            DFLASH_GATE_NULL_ARGUMENT
        );
        assert_eq!(dflash_gate_report_exit_status(std::ptr::null()), 2);
        assert_eq!(
            dflash_gate_report_free(null_mut()),
            DFLASH_GATE_NULL_ARGUMENT
        );
        assert_eq!(
            dflash_gate_options_new(null_mut()),
            DFLASH_GATE_NULL_ARGUMENT
        );
    }
    let live = gate_dir(tiny().to_str().unwrap().as_bytes(), std::ptr::null());
    assert_eq!(
        // SAFETY: a live report and a null out-pointer, which must be refused.
        unsafe { dflash_gate_report_check_count(live, null_mut()) },
        DFLASH_GATE_NULL_ARGUMENT
    );
    assert_eq!(free(live), DFLASH_GATE_OK);
}

#[test]
fn a_path_that_is_not_utf8_is_refused() {
    let (status, report) = try_gate(b"fixtures/\xfftiny", std::ptr::null());
    assert_eq!(status, DFLASH_GATE_INVALID_UTF8);
    assert!(report.is_null());
}

#[test]
fn a_report_freed_twice_is_refused_and_not_read_after() {
    let report = gate_dir(tiny().to_str().unwrap().as_bytes(), std::ptr::null());
    assert_eq!(free(report), DFLASH_GATE_OK);
    assert_eq!(free(report), DFLASH_GATE_INVALID_HANDLE);
    let mut n = 0;
    // SAFETY: a freed handle, which the library must refuse without reading it.
    unsafe {
        assert_eq!(
            dflash_gate_report_check_count(report, &mut n),
            DFLASH_GATE_INVALID_HANDLE
        );
        assert_eq!(dflash_gate_report_exit_status(report), 2);
    }
    // An options handle is not a report.
    let mut options = null_mut();
    // SAFETY: valid out-pointer, then the wrong kind of live handle.
    unsafe {
        assert_eq!(dflash_gate_options_new(&mut options), DFLASH_GATE_OK);
        assert_eq!(
            dflash_gate_report_free(options.cast()),
            DFLASH_GATE_INVALID_HANDLE
        );
        assert_eq!(dflash_gate_options_free(options), DFLASH_GATE_OK);
    }
}

#[test]
fn a_panic_inside_is_caught_and_is_its_own_status() {
    PANIC_INSIDE.with(|p| p.set(true));
    let dir = tiny();
    let dir = dir.to_str().unwrap();
    let (status, report) = try_gate(dir.as_bytes(), std::ptr::null());
    assert_eq!(status, DFLASH_GATE_PANIC);
    assert!(report.is_null());
    // And the next call works.
    let report = gate_dir(dir.as_bytes(), std::ptr::null());
    assert_eq!(verdict(report), DFLASH_GATE_PASS);
    assert_eq!(free(report), DFLASH_GATE_OK);
}

#[test]
fn one_report_is_read_from_many_threads_at_once() {
    let report = gate_dir(tiny().to_str().unwrap().as_bytes(), std::ptr::null()) as usize;
    // The JSON is made on first request: the threads race to it.
    let readers: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let report = report as *const dflash_gate_report;
                (0..50)
                    .map(|_| (json(report), count(report, dflash_gate_report_tensor_count)))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let first = json(report as *const dflash_gate_report);
    for reader in readers {
        for (doc, tensors) in reader.join().unwrap() {
            assert_eq!(doc, first);
            assert_eq!(tensors, 20);
        }
    }
    assert_eq!(free(report as *mut dflash_gate_report), DFLASH_GATE_OK);
}

#[test]
fn an_empty_config_held_in_a_vector_is_an_empty_file_not_an_absent_one() {
    // `std::vector<uint8_t>{}.data()` is null: what a C++ loader hands over for a config.json it read
    // and found empty. The package has the file, so the refusal must be about its contents.
    let weights = std::fs::read(tiny().join("model.q4nx")).unwrap();
    let (package, name) = ("in memory", "model.q4nx");
    let mut report = null_mut();
    // SAFETY: valid buffers and out-pointer; a null config with length 0 is the empty string.
    let status = unsafe {
        dflash_gate_evaluate(
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
        )
    };
    assert_eq!(status, DFLASH_GATE_OK);
    let (_, id, message) = objection(report);
    assert_eq!(id, dflash_gate::CheckId::CONFIG_IS_DFLASH);
    assert!(
        !message.contains("no config.json"),
        "an empty config.json read as absent: {message}"
    );
    assert_eq!(free(report), DFLASH_GATE_OK);

    // Not there at all is the flag's to say, whatever the pointer.
    let report = evaluate(None, Some(&weights));
    let (_, _, message) = objection(report);
    assert!(message.contains("no config.json"), "{message}");
    assert_eq!(free(report), DFLASH_GATE_OK);
}

#[test]
fn loaders_reach_the_library_and_an_unknown_name_sets_nothing() {
    let mut options = null_mut();
    assert_eq!(
        // SAFETY: a valid out-pointer.
        unsafe { dflash_gate_options_new(&mut options) },
        DFLASH_GATE_OK
    );
    let unknown = b"vllm,nope";
    assert_eq!(
        // SAFETY: a live options handle and a valid buffer.
        unsafe { dflash_gate_options_set_loaders(options, unknown.as_ptr().cast(), unknown.len()) },
        DFLASH_GATE_UNKNOWN_NAME
    );
    let report = gate_dir(tiny().to_str().unwrap().as_bytes(), options);
    let ids = |doc: &serde_json::Value| -> Vec<String> {
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .filter(|id| id.starts_with("loader."))
            .collect()
    };
    assert_eq!(ids(&json(report)), Vec::<String>::new());
    assert_eq!(free(report), DFLASH_GATE_OK);
    let names = b"vllm, llama.cpp";
    assert_eq!(
        // SAFETY: a live options handle and a valid buffer.
        unsafe { dflash_gate_options_set_loaders(options, names.as_ptr().cast(), names.len()) },
        DFLASH_GATE_OK
    );
    let report = gate_dir(tiny().to_str().unwrap().as_bytes(), options);
    let doc = json(report);
    assert_eq!(ids(&doc), ["loader.vllm", "loader.llama.cpp"]);
    // The Q4NX package is no form of either: each loader check fails, and the section says why.
    assert_eq!(verdict(report), DFLASH_GATE_FAIL);
    assert_eq!(doc["loaders"][0]["outcome"], "not_its_form");
    assert_eq!(free(report), DFLASH_GATE_OK);
    // SAFETY: a live options handle.
    assert_eq!(unsafe { dflash_gate_options_free(options) }, DFLASH_GATE_OK);
}

fn against(report: *const dflash_gate_report) -> (dflash_gate_status, [String; 6]) {
    let mut a = dflash_gate_against::empty();
    // SAFETY: the handle is checked by the library; a valid out-pointer.
    let status = unsafe { dflash_gate_report_against(report, &mut a) };
    let fields = [
        a.target,
        a.target_resolved,
        a.source,
        a.source_resolved,
        a.repository,
        a.revision,
    ]
    .map(string);
    (status, fields)
}

#[test]
fn a_report_names_what_it_was_checked_against() {
    let tiny = tiny();
    let tiny = tiny.to_str().unwrap();
    // A target the gate reads (a report, whatever its verdict): a config with a target's geometry.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":256,"num_hidden_layers":8,"vocab_size":1000}"#,
    )
    .unwrap();
    let target = dir.path().to_str().unwrap();
    let alone = gate_dir(tiny.as_bytes(), std::ptr::null());
    assert_eq!(against(alone), (DFLASH_GATE_OK, Default::default()));
    assert_eq!(free(alone), DFLASH_GATE_OK);
    let mut options = null_mut();
    // SAFETY: a valid out-pointer, then a live handle and a valid buffer.
    unsafe {
        assert_eq!(dflash_gate_options_new(&mut options), DFLASH_GATE_OK);
        assert_eq!(
            dflash_gate_options_set_target(options, target.as_ptr().cast(), target.len()),
            DFLASH_GATE_OK
        );
    }
    let report = gate_dir(tiny.as_bytes(), options);
    assert_ne!(verdict(report), DFLASH_GATE_COULD_NOT_RUN);
    let (status, fields) = against(report);
    assert_eq!(status, DFLASH_GATE_OK);
    assert_eq!(fields[0], target);
    assert_eq!(fields[1], target);
    assert!(fields[2..].iter().all(String::is_empty), "{fields:?}");
    // The document says the same.
    assert_eq!(json(report)["target"]["given"], target);
    assert_eq!(free(report), DFLASH_GATE_OK);
    // A freed report answers nothing.
    assert_eq!(against(report).0, DFLASH_GATE_INVALID_HANDLE);
    // SAFETY: a live options handle.
    assert_eq!(unsafe { dflash_gate_options_free(options) }, DFLASH_GATE_OK);
}
