//! The gate in process, for a loader written in C or C++: the functions `include/dflash_gate.h`
//! declares.
//!
//! The loader this gate stands in front of is C++; without this crate its only way to ask is to
//! start the binary and parse its output, reading the package a second time. Here it asks in process,
//! and can gate the very bytes it has already mapped ([`dflash_gate_evaluate`]).
//!
//! The rules every function keeps, so a C caller can rely on them without reading Rust:
//!
//! - every exported name starts `dflash_gate_`; handles (`dflash_gate_report`, `dflash_gate_options`)
//!   are opaque, allocated and freed by this library only;
//! - a string coming in is a pointer and a length, UTF-8, never assumed NUL-terminated (a null
//!   pointer with length 0 is the empty string); a string going out is a [`dflash_gate_str`] (pointer
//!   and length, not NUL-terminated), valid until the handle it came from is freed;
//! - every function returns a status (or, for the few that return a value, a documented value on
//!   error) and never lets a panic cross the boundary: a panic is caught and is its own status,
//!   [`dflash_gate_status::DFLASH_GATE_PANIC`];
//! - handles are checked against the set of live handles before use, so a null, a freed or a foreign
//!   pointer is refused with a status instead of being read. (An address the allocator has since
//!   reused for a new handle cannot be told apart from that handle.)
//! - thread safety: every function may be called from any thread, at the same time, on the same or
//!   different handles, except that a handle must not be freed while another thread is using it or a
//!   string borrowed from it. A report is never changed after it is made.

// Names are the C names, so the header and this file read the same.
#![allow(non_camel_case_types)]

use dflash_gate::{FileCensus, FileUse, Options, Outcome, PackageError, Report, RoleClass};
use std::collections::HashMap;
use std::ffi::{c_char, OsStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// What a call did. Zero is success; every other value names why nothing (or nothing more) was done.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum dflash_gate_status {
    DFLASH_GATE_OK = 0,
    /// A pointer that must not be null was null (or a null string was given a non-zero length).
    DFLASH_GATE_NULL_ARGUMENT = 1,
    /// A string argument is not UTF-8.
    DFLASH_GATE_INVALID_UTF8 = 2,
    /// The handle is not one this library handed out and has not yet freed (e.g. freed twice).
    DFLASH_GATE_INVALID_HANDLE = 3,
    /// An index past the end, or a length longer than any buffer can be.
    DFLASH_GATE_OUT_OF_RANGE = 4,
    /// There is nothing to return: no check objected.
    DFLASH_GATE_NOT_FOUND = 5,
    /// The library panicked (a bug): the call did nothing the caller can use.
    DFLASH_GATE_PANIC = 6,
    /// A name the library does not know (an engine for `--loader`): nothing was set.
    DFLASH_GATE_UNKNOWN_NAME = 7,
}

use dflash_gate_status::*;

/// A verdict or a check's outcome. The values are the exit statuses the command-line gate gives for
/// them, so a loader can pass one on as its own exit status.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum dflash_gate_verdict {
    DFLASH_GATE_PASS = 0,
    DFLASH_GATE_FAIL = 1,
    /// The gate could not run at all: an unreadable path, no config.json, a broken option.
    DFLASH_GATE_COULD_NOT_RUN = 2,
    DFLASH_GATE_UNDECIDED = 3,
}

use dflash_gate_verdict::*;

/// A string going out: UTF-8, `len` bytes at `ptr` (never null), not NUL-terminated.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct dflash_gate_str {
    pub ptr: *const c_char,
    pub len: usize,
}

impl dflash_gate_str {
    fn of(s: &str) -> dflash_gate_str {
        dflash_gate_str {
            ptr: s.as_ptr().cast(),
            len: s.len(),
        }
    }
}

/// One check's result, borrowed from its report.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct dflash_gate_check {
    /// Stable id, e.g. `tiles.q4_1_signature` (for a gate that could not run: the reason token).
    pub id: dflash_gate_str,
    pub outcome: dflash_gate_verdict,
    /// The one-line finding, naming what it objected to.
    pub message: dflash_gate_str,
    /// For a check that could not run: the id of the check that stopped it; empty otherwise.
    pub blocked_by: dflash_gate_str,
}

/// One tensor of the weight file as the census lists it, borrowed from its report. Names are the
/// file's own bytes: escape them before printing them to a terminal.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct dflash_gate_tensor {
    pub name: dflash_gate_str,
    /// The role it plays (`gain input_layernorm`); empty when unexplained.
    pub role: dflash_gate_str,
    /// The role's class as a token (`projection`, `gain`, ...); empty when unexplained.
    pub role_class: dflash_gate_str,
    /// What the bytes were found to be, e.g. `q4_1 tile grid 4096 x 2560, 1280 tiles`.
    pub form: dflash_gate_str,
    pub dtype: dflash_gate_str,
    /// `rank` dimensions.
    pub shape: *const u64,
    pub rank: usize,
    /// Where its bytes are in the weight file, from the file's first byte.
    pub offset: u64,
    pub length: u64,
}

/// What a report was checked against, borrowed from its report; each field empty when it does not
/// apply: a report that says PASS names the target it passed against.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct dflash_gate_against {
    /// The `--target` as given, and as resolved (a hub cache repository to its snapshot).
    pub target: dflash_gate_str,
    pub target_resolved: dflash_gate_str,
    /// The `--source` as given, and as resolved.
    pub source: dflash_gate_str,
    pub source_resolved: dflash_gate_str,
    /// For a draft read from a Hugging Face hub cache: its repository id (`ORG/NAME`) and the
    /// commit of the snapshot read.
    pub repository: dflash_gate_str,
    pub revision: dflash_gate_str,
}

impl dflash_gate_against {
    /// Nothing checked against: every field empty.
    fn empty() -> dflash_gate_against {
        let none = dflash_gate_str::of("");
        dflash_gate_against {
            target: none,
            target_resolved: none,
            source: none,
            source_resolved: none,
            repository: none,
            revision: none,
        }
    }
}

/// The questions beyond the draft itself (the library's `Options`): target, source, manifest.
pub struct dflash_gate_options {
    options: Options,
}

/// The answer for one package; read with the `dflash_gate_report_*` functions.
pub struct dflash_gate_report {
    answer: Answer,
    json: OnceLock<String>,
    /// The NOT CHECKED lines as text, made once: the library keeps them as typed items, and the
    /// strings handed out must live as long as the report.
    not_checked: Vec<String>,
}

enum Answer {
    /// Boxed: a report is many times the size of the error beside it.
    Report(Box<Report>),
    CouldNotRun {
        package: String,
        error: PackageError,
        message: String,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Options,
    Report,
}

/// Every live handle, so that a freed or foreign pointer is refused rather than read. Keyed by
/// [`key`], never by the address itself: a leak checker that scans memory for pointers (LeakSanitizer)
/// must still see a report the caller forgot to free as leaked.
fn live() -> std::sync::MutexGuard<'static, HashMap<usize, Kind>> {
    static LIVE: OnceLock<Mutex<HashMap<usize, Kind>>> = OnceLock::new();
    LIVE.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn key<T>(ptr: *const T) -> usize {
    !(ptr as usize)
}

fn hand_out<T>(value: T, kind: Kind) -> *mut T {
    let ptr = Box::into_raw(Box::new(value));
    live().insert(key(ptr), kind);
    ptr
}

/// The handle behind `ptr`, if it is a live one of `kind`.
///
/// # Safety
/// A live handle of `kind` points at a `T` this library allocated; the caller does not free it during
/// the call (the header's thread-safety rule).
unsafe fn handle<'a, T>(ptr: *const T, kind: Kind) -> Result<&'a T, dflash_gate_status> {
    if ptr.is_null() {
        return Err(DFLASH_GATE_NULL_ARGUMENT);
    }
    if live().get(&key(ptr)) != Some(&kind) {
        return Err(DFLASH_GATE_INVALID_HANDLE);
    }
    // SAFETY: live and of this kind, so a Box<T> of ours not yet freed.
    Ok(unsafe { &*ptr })
}

/// Takes `ptr` out of the live set and frees it; refused when it is not live (freed twice).
///
/// # Safety
/// As for [`handle`].
unsafe fn free<T>(ptr: *mut T, kind: Kind) -> dflash_gate_status {
    if ptr.is_null() {
        return DFLASH_GATE_NULL_ARGUMENT;
    }
    {
        let mut live = live();
        if live.get(&key(ptr)) != Some(&kind) {
            return DFLASH_GATE_INVALID_HANDLE;
        }
        live.remove(&key(ptr));
    }
    // SAFETY: it was live and is no longer, so this is the one drop of the Box we made.
    drop(unsafe { Box::from_raw(ptr) });
    DFLASH_GATE_OK
}

/// `len` bytes at `ptr`; a null pointer is the empty slice when `len` is 0.
///
/// # Safety
/// A non-null `ptr` points at `len` readable bytes that stay unchanged during the call.
unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> Result<&'a [u8], dflash_gate_status> {
    if ptr.is_null() {
        return if len == 0 {
            Ok(&[])
        } else {
            Err(DFLASH_GATE_NULL_ARGUMENT)
        };
    }
    if len > isize::MAX as usize {
        return Err(DFLASH_GATE_OUT_OF_RANGE);
    }
    // SAFETY: the caller's promise, and len fits a slice.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// A UTF-8 string argument.
///
/// # Safety
/// As for [`bytes`].
unsafe fn text<'a>(ptr: *const c_char, len: usize) -> Result<&'a str, dflash_gate_status> {
    // SAFETY: the caller's promise.
    let bytes = unsafe { bytes(ptr.cast(), len) }?;
    std::str::from_utf8(bytes).map_err(|_| DFLASH_GATE_INVALID_UTF8)
}

/// Writes through an out-pointer that must not be null.
///
/// # Safety
/// A non-null `out` is valid for a write of `T`.
unsafe fn put<T>(out: *mut T, value: T) -> dflash_gate_status {
    if out.is_null() {
        return DFLASH_GATE_NULL_ARGUMENT;
    }
    // SAFETY: the caller's promise; `write`, so whatever was there is not dropped.
    unsafe { out.write(value) };
    DFLASH_GATE_OK
}

#[cfg(test)]
thread_local! {
    /// Makes the next boundary on this thread panic inside, so a test sees the panic caught.
    static PANIC_INSIDE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `body` behind the panic boundary: a panic becomes [`DFLASH_GATE_PANIC`].
fn boundary(body: impl FnOnce() -> Result<(), dflash_gate_status>) -> dflash_gate_status {
    let result = catch_unwind(AssertUnwindSafe(|| {
        #[cfg(test)]
        if PANIC_INSIDE.with(|p| p.replace(false)) {
            panic!("a panic asked for by a test");
        }
        body()
    }));
    match result {
        Ok(Ok(())) => DFLASH_GATE_OK,
        Ok(Err(status)) => status,
        Err(_) => DFLASH_GATE_PANIC,
    }
}

fn verdict_of(outcome: Outcome) -> dflash_gate_verdict {
    match outcome {
        Outcome::Pass => DFLASH_GATE_PASS,
        Outcome::Fail => DFLASH_GATE_FAIL,
        // Undecided, and any outcome added later: never read as a pass.
        _ => DFLASH_GATE_UNDECIDED,
    }
}

impl dflash_gate_report {
    fn new(answer: Answer) -> *mut dflash_gate_report {
        let not_checked = match &answer {
            Answer::Report(r) => r.not_checked_text(),
            Answer::CouldNotRun { .. } => Vec::new(),
        };
        hand_out(
            dflash_gate_report {
                answer,
                json: OnceLock::new(),
                not_checked,
            },
            Kind::Report,
        )
    }

    fn verdict(&self) -> dflash_gate_verdict {
        match &self.answer {
            Answer::Report(r) => verdict_of(r.verdict()),
            Answer::CouldNotRun { .. } => DFLASH_GATE_COULD_NOT_RUN,
        }
    }

    fn checks(&self) -> &[dflash_gate::Check] {
        match &self.answer {
            Answer::Report(r) => r.checks(),
            Answer::CouldNotRun { .. } => &[],
        }
    }

    fn not_checked(&self) -> &[String] {
        &self.not_checked
    }

    fn tensors(&self) -> &[dflash_gate::TensorCensus] {
        match &self.answer {
            Answer::Report(r) => &r.census().tensors,
            Answer::CouldNotRun { .. } => &[],
        }
    }
}

fn check_of(check: &dflash_gate::Check) -> dflash_gate_check {
    dflash_gate_check {
        id: dflash_gate_str::of(check.id()),
        outcome: verdict_of(check.outcome()),
        message: dflash_gate_str::of(check.message()),
        blocked_by: dflash_gate_str::of(check.blocked_by().unwrap_or("")),
    }
}

fn answer_of(package: &str, result: Result<Report, PackageError>) -> Answer {
    match result {
        Ok(report) => Answer::Report(Box::new(report)),
        Err(error) => Answer::CouldNotRun {
            package: package.to_owned(),
            message: error.to_string(),
            error,
        },
    }
}

/// The library's version (`0.1.0`), a static string.
#[no_mangle]
pub extern "C" fn dflash_gate_version() -> dflash_gate_str {
    dflash_gate_str::of(env!("CARGO_PKG_VERSION"))
}

/// Read, never map (process-wide, from now on): for a host that keeps `SIGBUS` to itself. Without it
/// the library maps large weight files under its own `SIGBUS` guard, installed once at the first map,
/// handing every fault outside its maps to the handler that was there before, and reading instead of
/// mapping whenever a host has installed its own handler since. With it, the library never maps and
/// never touches the signal's action. `false` goes back to mapping.
#[no_mangle]
pub extern "C" fn dflash_gate_set_never_map(never: bool) -> dflash_gate_status {
    boundary(|| {
        // The library's switch lives among its insides: it is process-wide, not an option of a call.
        dflash_gate::__private::files::set_never_map(never);
        Ok(())
    })
}

/// Makes a set of options asking nothing beyond the draft itself.
///
/// # Safety
/// `out` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_options_new(
    out: *mut *mut dflash_gate_options,
) -> dflash_gate_status {
    boundary(|| {
        let options = hand_out(
            dflash_gate_options {
                options: Options::default(),
            },
            Kind::Options,
        );
        // SAFETY: the caller's promise.
        match unsafe { put(out, options) } {
            DFLASH_GATE_OK => Ok(()),
            status => {
                // SAFETY: just handed out, never seen by the caller.
                unsafe { free(options, Kind::Options) };
                Err(status)
            }
        }
    })
}

/// Options are changed only through these setters, one thread at a time.
///
/// # Safety
/// `options` is null or a handle; `dir` points at `dir_len` bytes (or is null with length 0).
unsafe fn set_dir(
    options: *mut dflash_gate_options,
    dir: *const c_char,
    dir_len: usize,
    set: fn(Options, PathBuf) -> Options,
) -> dflash_gate_status {
    boundary(|| {
        // SAFETY: the caller's promises.
        let dir = unsafe {
            handle(options, Kind::Options)?;
            text(dir, dir_len)?
        };
        // SAFETY: live, and the header says options are not shared while being set.
        let options = unsafe { &mut *options };
        options.options = set(std::mem::take(&mut options.options), PathBuf::from(dir));
        Ok(())
    })
}

/// Also checks the draft against the target package in `dir` (`--target`).
///
/// # Safety
/// `options` is null or a handle; `dir` points at `dir_len` bytes (or is null with length 0).
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_options_set_target(
    options: *mut dflash_gate_options,
    dir: *const c_char,
    dir_len: usize,
) -> dflash_gate_status {
    // SAFETY: the caller's promises.
    unsafe { set_dir(options, dir, dir_len, |o, d| o.with_target(d)) }
}

/// Also compares every weight with its source (`--source`): `path` is the checkpoint's directory, or
/// the `.gguf` file the package was converted from.
///
/// # Safety
/// As for [`dflash_gate_options_set_target`].
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_options_set_source(
    options: *mut dflash_gate_options,
    path: *const c_char,
    path_len: usize,
) -> dflash_gate_status {
    // SAFETY: the caller's promises.
    unsafe { set_dir(options, path, path_len, |o, d| o.with_source(d)) }
}

/// Also verifies `MANIFEST.sha256` (`--manifest`) when `manifest` is true.
///
/// # Safety
/// `options` is null or a handle.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_options_set_manifest(
    options: *mut dflash_gate_options,
    manifest: bool,
) -> dflash_gate_status {
    boundary(|| {
        // SAFETY: the caller's promise.
        unsafe { handle(options, Kind::Options) }?;
        // SAFETY: live, and not shared while being set.
        let options = unsafe { &mut *options };
        options.options = std::mem::take(&mut options.options).with_manifest(manifest);
        Ok(())
    })
}

/// Also answers for these engines (`--loader`): `names` is a comma-separated list (`vllm,sglang`),
/// each engine's verdict a `loader.NAME` check. An unknown name sets nothing
/// (`DFLASH_GATE_UNKNOWN_NAME`).
///
/// # Safety
/// `options` is null or a handle; `names` points at `names_len` bytes (or is null with length 0).
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_options_set_loaders(
    options: *mut dflash_gate_options,
    names: *const c_char,
    names_len: usize,
) -> dflash_gate_status {
    boundary(|| {
        // SAFETY: the caller's promises.
        let names = unsafe {
            handle(options, Kind::Options)?;
            text(names, names_len)?
        };
        let engines = names
            .split(',')
            .map(|n| dflash_gate::Engine::from_name(n.trim()).ok_or(DFLASH_GATE_UNKNOWN_NAME))
            .collect::<Result<Vec<_>, _>>()?;
        // SAFETY: live, and not shared while being set.
        let options = unsafe { &mut *options };
        options.options = std::mem::take(&mut options.options).with_loaders(engines);
        Ok(())
    })
}

/// Frees options; a second free of the same handle is refused (`DFLASH_GATE_INVALID_HANDLE`).
///
/// # Safety
/// `options` is null or a pointer this library may have handed out.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_options_free(
    options: *mut dflash_gate_options,
) -> dflash_gate_status {
    // SAFETY: the caller's promise; `free` refuses what is not live.
    boundary(|| match unsafe { free(options, Kind::Options) } {
        DFLASH_GATE_OK => Ok(()),
        status => Err(status),
    })
}

/// Gates the package directory `dir` (the library's `gate`), with `options` (null: the draft alone).
/// A report comes back also when the gate could not run (its verdict is then
/// `DFLASH_GATE_COULD_NOT_RUN`, and its first objection says why); free it with
/// [`dflash_gate_report_free`].
///
/// # Safety
/// `dir` points at `dir_len` bytes; `options` is null or a handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_gate(
    dir: *const c_char,
    dir_len: usize,
    options: *const dflash_gate_options,
    out: *mut *mut dflash_gate_report,
) -> dflash_gate_status {
    boundary(|| {
        if out.is_null() {
            return Err(DFLASH_GATE_NULL_ARGUMENT);
        }
        // SAFETY: the caller's promises.
        let (dir, options) = unsafe {
            out.write(std::ptr::null_mut());
            let dir = text(dir, dir_len)?;
            let options = match options.is_null() {
                true => Options::default(),
                false => handle(options, Kind::Options)?.options.clone(),
            };
            (dir, options)
        };
        let answer = answer_of(dir, dflash_gate::gate(std::path::Path::new(dir), &options));
        // SAFETY: checked not null above.
        unsafe { out.write(dflash_gate_report::new(answer)) };
        Ok(())
    })
}

/// Gates a package whose bytes the caller already holds (the library's `evaluate`): its `config.json`
/// when `has_config` (the `config_len` bytes at `config`), and its weight file named `weight_name` when
/// `has_weights`. Absence is a flag, not a null pointer, because an empty file read into a C++
/// `std::vector` has a null `data()`: a null pointer with length 0 is an empty file, never a missing
/// one. A loader maps the files once and gates the mapping; the bytes must not change during the
/// call, and nothing is kept after it. `package` names the package in the report.
///
/// # Safety
/// Each pointer and length pair is readable as documented; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_evaluate(
    package: *const c_char,
    package_len: usize,
    has_config: bool,
    config: *const u8,
    config_len: usize,
    weight_name: *const c_char,
    weight_name_len: usize,
    has_weights: bool,
    weights: *const u8,
    weights_len: usize,
    out: *mut *mut dflash_gate_report,
) -> dflash_gate_status {
    boundary(|| {
        if out.is_null() {
            return Err(DFLASH_GATE_NULL_ARGUMENT);
        }
        // SAFETY: the caller's promises.
        unsafe { out.write(std::ptr::null_mut()) };
        // SAFETY: the caller's promises.
        let (package, name) = unsafe {
            (
                text(package, package_len)?,
                text(weight_name, weight_name_len)?,
            )
        };
        let name = dflash_gate::__private::escape::name(OsStr::new(name));
        let mut files = Vec::new();
        let config = match has_config {
            false => Err("no config.json: the package must hold one".to_owned()),
            true => {
                // SAFETY: the caller's promise.
                let config = unsafe { bytes(config, config_len) }?;
                files.push(file("config.json", config.len(), FileUse::Config));
                Ok(config.to_vec())
            }
        };
        let weights = match has_weights {
            false => Err("no weight file: the package must hold one".to_owned()),
            true => {
                // SAFETY: the caller's promise.
                let weights = unsafe { bytes(weights, weights_len) }?;
                files.push(file(&name, weights.len(), FileUse::Weights));
                Ok((name.as_str(), weights))
            }
        };
        let answer = answer_of(
            package,
            dflash_gate::evaluate(package, config, weights, files),
        );
        // SAFETY: checked not null above.
        unsafe { out.write(dflash_gate_report::new(answer)) };
        Ok(())
    })
}

fn file(name: &str, bytes: usize, use_: FileUse) -> FileCensus {
    FileCensus::new(name, bytes as u64, use_)
}

/// Reads a live report under the panic boundary.
///
/// # Safety
/// `report` is null or a pointer this library may have handed out, not freed during the call.
unsafe fn with_report(
    report: *const dflash_gate_report,
    body: impl FnOnce(&dflash_gate_report) -> Result<(), dflash_gate_status>,
) -> dflash_gate_status {
    // SAFETY: the caller's promise; `handle` refuses what is not live.
    boundary(|| body(unsafe { handle(report, Kind::Report) }?))
}

/// The verdict: PASS only when every check passed.
///
/// # Safety
/// `report` is null or a handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_report_verdict(
    report: *const dflash_gate_report,
    out: *mut dflash_gate_verdict,
) -> dflash_gate_status {
    // SAFETY: the caller's promises.
    unsafe { with_report(report, |r| status(put(out, r.verdict()))) }
}

fn status(status: dflash_gate_status) -> Result<(), dflash_gate_status> {
    match status {
        DFLASH_GATE_OK => Ok(()),
        other => Err(other),
    }
}

/// The exit status the command-line gate gives for this report: 0 pass, 1 fail, 3 undecided, 2
/// could not run; also 2 when `report` is not a live report (never a status that reads as a pass).
///
/// # Safety
/// `report` is null or a pointer this library may have handed out.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_report_exit_status(report: *const dflash_gate_report) -> i32 {
    let mut code = DFLASH_GATE_COULD_NOT_RUN as i32;
    // SAFETY: the caller's promise.
    unsafe {
        with_report(report, |r| {
            code = r.verdict() as i32;
            Ok(())
        })
    };
    code
}

/// How many checks ran (0 for a gate that could not run).
///
/// # Safety
/// `report` is null or a handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_report_check_count(
    report: *const dflash_gate_report,
    out: *mut usize,
) -> dflash_gate_status {
    // SAFETY: the caller's promises.
    unsafe { with_report(report, |r| status(put(out, r.checks().len()))) }
}

/// Check `index` (from 0, in run order).
///
/// # Safety
/// `report` is null or a handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_report_check(
    report: *const dflash_gate_report,
    index: usize,
    out: *mut dflash_gate_check,
) -> dflash_gate_status {
    // SAFETY: the caller's promises.
    unsafe {
        with_report(report, |r| {
            let check = r.checks().get(index).ok_or(DFLASH_GATE_OUT_OF_RANGE)?;
            status(put(out, check_of(check)))
        })
    }
}

/// The check the verdict rests on: the first that failed, else the first undecided;
/// `DFLASH_GATE_NOT_FOUND` when every check passed. For a gate that could not run: its reason (as
/// `id`) and message, outcome `DFLASH_GATE_COULD_NOT_RUN`.
///
/// # Safety
/// `report` is null or a handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_report_first_objection(
    report: *const dflash_gate_report,
    out: *mut dflash_gate_check,
) -> dflash_gate_status {
    // SAFETY: the caller's promises.
    unsafe {
        with_report(report, |r| {
            let objection = match &r.answer {
                Answer::CouldNotRun { error, message, .. } => dflash_gate_check {
                    id: dflash_gate_str::of(error.reason()),
                    outcome: DFLASH_GATE_COULD_NOT_RUN,
                    message: dflash_gate_str::of(message),
                    blocked_by: dflash_gate_str::of(""),
                },
                Answer::Report(report) => {
                    let first = |o| report.checks().iter().find(|c| c.outcome() == o);
                    // No checks at all is no pass either: the verdict is then UNDECIDED.
                    let check = first(Outcome::Fail)
                        .or_else(|| {
                            report
                                .checks()
                                .iter()
                                .find(|c| c.outcome() != Outcome::Pass)
                        })
                        .ok_or(match report.checks().is_empty() {
                            true => DFLASH_GATE_OUT_OF_RANGE,
                            false => DFLASH_GATE_NOT_FOUND,
                        })?;
                    check_of(check)
                }
            };
            status(put(out, objection))
        })
    }
}

/// How many NOT CHECKED lines the report has.
///
/// # Safety
/// `report` is null or a handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_report_not_checked_count(
    report: *const dflash_gate_report,
    out: *mut usize,
) -> dflash_gate_status {
    // SAFETY: the caller's promises.
    unsafe { with_report(report, |r| status(put(out, r.not_checked().len()))) }
}

/// NOT CHECKED line `index`: what the gate did not check, said so that silence is not approval.
///
/// # Safety
/// `report` is null or a handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_report_not_checked(
    report: *const dflash_gate_report,
    index: usize,
    out: *mut dflash_gate_str,
) -> dflash_gate_status {
    // SAFETY: the caller's promises.
    unsafe {
        with_report(report, |r| {
            let line = r.not_checked().get(index).ok_or(DFLASH_GATE_OUT_OF_RANGE)?;
            status(put(out, dflash_gate_str::of(line)))
        })
    }
}

/// What the report was checked against: its target, source, and hub repository and revision (each
/// empty when not given, or for a gate that could not run).
///
/// # Safety
/// `report` is null or a handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_report_against(
    report: *const dflash_gate_report,
    out: *mut dflash_gate_against,
) -> dflash_gate_status {
    // SAFETY: the caller's promises.
    unsafe {
        with_report(report, |r| {
            let none = dflash_gate_str::of("");
            let mut against = dflash_gate_against::empty();
            if let Answer::Report(report) = &r.answer {
                let a = report.against();
                let str_of = |s: &Option<String>| s.as_deref().map_or(none, dflash_gate_str::of);
                if let Some(t) = &a.target {
                    against.target = dflash_gate_str::of(&t.given);
                    against.target_resolved = dflash_gate_str::of(&t.resolved);
                }
                if let Some(s) = &a.source {
                    against.source = dflash_gate_str::of(&s.given);
                    against.source_resolved = dflash_gate_str::of(&s.resolved);
                }
                against.repository = str_of(&a.repository);
                against.revision = str_of(&a.revision);
            }
            status(put(out, against))
        })
    }
}

/// How many tensors the census lists (0 when the weight file did not parse).
///
/// # Safety
/// `report` is null or a handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_report_tensor_count(
    report: *const dflash_gate_report,
    out: *mut usize,
) -> dflash_gate_status {
    // SAFETY: the caller's promises.
    unsafe { with_report(report, |r| status(put(out, r.tensors().len()))) }
}

/// Tensor `index` of the census, in the weight file's order.
///
/// # Safety
/// `report` is null or a handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_report_tensor(
    report: *const dflash_gate_report,
    index: usize,
    out: *mut dflash_gate_tensor,
) -> dflash_gate_status {
    // SAFETY: the caller's promises.
    unsafe {
        with_report(report, |r| {
            let t = r.tensors().get(index).ok_or(DFLASH_GATE_OUT_OF_RANGE)?;
            // The census holds offsets into the data section, which starts after the header.
            let header = match &r.answer {
                Answer::Report(report) => report.census().header_bytes.unwrap_or(0),
                Answer::CouldNotRun { .. } => 0,
            };
            let [begin, end] = t.data_offsets;
            let tensor = dflash_gate_tensor {
                name: dflash_gate_str::of(&t.name),
                role: dflash_gate_str::of(t.role_text.as_deref().unwrap_or("")),
                role_class: dflash_gate_str::of(t.role.map_or("", RoleClass::token)),
                form: dflash_gate_str::of(&t.form_text),
                dtype: dflash_gate_str::of(&t.dtype),
                shape: t.shape.as_ptr(),
                rank: t.shape.len(),
                offset: header.checked_add(begin).ok_or(DFLASH_GATE_OUT_OF_RANGE)?,
                length: end.checked_sub(begin).ok_or(DFLASH_GATE_OUT_OF_RANGE)?,
            };
            status(put(out, tensor))
        })
    }
}

/// The whole report as the JSON document `dflash-gate --json` prints for one package (the same
/// schema, `schema/report.schema.json`; an error document when the gate could not run).
///
/// # Safety
/// `report` is null or a handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_report_json(
    report: *const dflash_gate_report,
    out: *mut dflash_gate_str,
) -> dflash_gate_status {
    // SAFETY: the caller's promises.
    unsafe {
        with_report(report, |r| {
            let json = r.json.get_or_init(|| {
                let doc = match &r.answer {
                    Answer::Report(report) => report.to_json(),
                    Answer::CouldNotRun { package, error, .. } => {
                        dflash_gate::error_json(package, error)
                    }
                };
                serde_json::to_string_pretty(&doc).unwrap_or_default()
            });
            status(put(out, dflash_gate_str::of(json)))
        })
    }
}

/// Frees a report and every string borrowed from it. A second free of the same handle is refused
/// with `DFLASH_GATE_INVALID_HANDLE` and frees nothing.
///
/// # Safety
/// `report` is null or a pointer this library may have handed out, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn dflash_gate_report_free(
    report: *mut dflash_gate_report,
) -> dflash_gate_status {
    // SAFETY: the caller's promise; `free` refuses what is not live.
    boundary(|| status(unsafe { free(report, Kind::Report) }))
}

#[cfg(test)]
mod header;
#[cfg(test)]
mod tests;
