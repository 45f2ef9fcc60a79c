//! The gate from Python: `dflash_gate._native`, the extension module inside the `dflash_gate`
//! package (python/dflash_gate re-exports it; python/dflash_gate/_native.pyi types it).
//!
//! A thin layer over the library's curated API, as the C ABI is: the verdict, the checks and the
//! document are the library's own, turned into Python values; nothing is decided here. The one
//! thing added is what Python needs and Rust does not: the GIL released while the gate reads, an
//! exception for "could not run" (the CLI's exit 2), and the command line as a function of its
//! arguments for `python -m dflash_gate`.

use dflash_gate::{Options, Outcome, PackageError};
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use serde_json::Value;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The command-line gate's own source, compiled into this extension, so that `python -m
/// dflash_gate` is the very code of `dflash-gate` (its argument parsing, output, colours, exit
/// statuses), not a copy that could drift. Included by path rather than moved into the library: the
/// library never prints (the workspace denies it), and the binary stays where it is built from.
/// Its `main` is the binary's; here [`binary::command`] is the entry.
#[allow(dead_code)]
#[path = "../../gate/src/bin/dflash-gate.rs"]
mod binary;

pyo3::create_exception!(
    dflash_gate,
    GateError,
    PyException,
    "The gate could not run on the package: what `dflash-gate` exits 2 on (no such directory, no \
     config.json, an unreadable file, a --source or --target that cannot be read). Never a verdict: \
     `reason` is the JSON error document's token, `path` the path at fault, `package` the package \
     as named."
);

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", dflash_gate::TOOL.version)?;
    m.add("GateError", m.py().get_type::<GateError>())?;
    m.add_class::<Report>()?;
    m.add_class::<Check>()?;
    m.add_class::<Row>()?;
    m.add_function(wrap_pyfunction!(gate, m)?)?;
    m.add_function(wrap_pyfunction!(gate_all, m)?)?;
    m.add_function(wrap_pyfunction!(main, m)?)?;
    Ok(())
}

/// Gates the draft at `path` (the library's `gate`), with the GIL released while it runs: a Q4NX
/// package, a Hugging Face folder, a hub cache repository directory or an `ORG/NAME` id looked up
/// offline in the hub cache. `target`, `source`, `manifest`, `revision` and `loader` (a list of
/// engine names) are `--target`, `--source`, `--manifest`, `--revision` and `--loader`.
#[pyfunction]
#[pyo3(signature = (path, *, target=None, source=None, manifest=false, revision=None, loader=None))]
fn gate(
    py: Python<'_>,
    path: PathBuf,
    target: Option<PathBuf>,
    source: Option<PathBuf>,
    manifest: bool,
    revision: Option<String>,
    loader: Option<Vec<String>>,
) -> PyResult<Report> {
    let mut options = options(target, source, manifest, loader)?;
    if let Some(revision) = revision {
        options = options.with_revision(revision);
    }
    let result = py.detach(|| dflash_gate::gate(&path, &options));
    // A Ctrl-C that arrived while the gate ran is raised here, by the call, rather than at some
    // later line of the caller's, after a report was already acted upon.
    py.check_signals()?;
    match result {
        Ok(report) => Ok(Report::new(report)),
        Err(error) => Err(gate_error(py, &path, &error)),
    }
}

/// The options `gate` and `gate_all` share, from their keyword arguments.
fn options(
    target: Option<PathBuf>,
    source: Option<PathBuf>,
    manifest: bool,
    loader: Option<Vec<String>>,
) -> PyResult<Options> {
    let mut options = Options::default().with_manifest(manifest);
    for name in loader.unwrap_or_default() {
        let engine = dflash_gate::Engine::from_name(&name).ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "loader: unknown engine {name:?} (known: {})",
                dflash_gate::Engine::names()
            ))
        })?;
        options = options.with_loaders([engine]);
    }
    if let Some(target) = target {
        options = options.with_target(target);
    }
    if let Some(source) = source {
        options = options.with_source(source);
    }
    Ok(options)
}

/// `dflash-gate --all MODELS` in process: every directory directly under `models` (a hub cache's
/// repositories at `refs/main`, a folder of GGUF drafts file by file), one [`Row`] each, in the
/// order the command line lists them. Nothing is dropped: what is not gated is a row saying why,
/// and a package that could not be read is a row carrying its [`GateError`], so one broken
/// download never hides the verdicts of the rest. Only a `models` that cannot be listed raises.
#[pyfunction]
#[pyo3(signature = (models, *, target=None, source=None, manifest=false, loader=None))]
fn gate_all(
    py: Python<'_>,
    models: PathBuf,
    target: Option<PathBuf>,
    source: Option<PathBuf>,
    manifest: bool,
    loader: Option<Vec<String>>,
) -> PyResult<Vec<Row>> {
    let options = options(target, source, manifest, loader)?;
    if let Err(error) = dflash_gate::__private::error::require_dir(&models) {
        return Err(gate_error(py, &models, &error));
    }
    let beside: Vec<(&str, &Path)> = [("--source", &options.source), ("--target", &options.target)]
        .into_iter()
        .filter_map(|(option, dir)| dir.as_deref().map(|d| (option, d)))
        .collect();
    let items = py
        .detach(|| binary::tree::packages_under(&models, &beside))
        .map_err(GateError::new_err)?;
    let mut rows = Vec::with_capacity(items.len());
    for item in items {
        let (name, note) = (item.name(), item.note().map(str::to_owned));
        let path = item.dir().to_owned();
        let (kind, report, reason, message, error) = match item {
            binary::tree::Item::Gate { dir, .. } => {
                match py.detach(|| dflash_gate::gate(&dir, &options)) {
                    Ok(report) => ("gated", Some(Report::new(report)), None, None, None),
                    Err(e) => not_gated_row(py, &dir, &e),
                }
            }
            binary::tree::Item::Skip { why, reason, .. } => {
                ("skipped", None, Some(reason), Some(why), None)
            }
            binary::tree::Item::NotGated { dir, error, .. } => not_gated_row(py, &dir, &error),
        };
        py.check_signals()?;
        rows.push(Row {
            name,
            path,
            kind,
            report: report.map(|r| Py::new(py, r)).transpose()?,
            reason,
            message,
            error,
            note,
        });
    }
    Ok(rows)
}

/// A row's fields for a package the gate could not run on.
#[allow(clippy::type_complexity)]
fn not_gated_row(
    py: Python<'_>,
    dir: &Path,
    error: &PackageError,
) -> (
    &'static str,
    Option<Report>,
    Option<&'static str>,
    Option<String>,
    Option<PyErr>,
) {
    (
        "not_gated",
        None,
        Some(error.reason()),
        Some(error.to_string()),
        Some(gate_error(py, dir, error)),
    )
}

/// One directory of a [`gate_all`] run: gated (with its report), skipped (another model, a
/// checkpoint, the `--target` or `--source` directory, or no package at all: `reason` says which) or
/// not gated (it could not be read: `error`).
#[pyclass(frozen, module = "dflash_gate")]
struct Row {
    name: String,
    path: PathBuf,
    kind: &'static str,
    report: Option<Py<Report>>,
    reason: Option<&'static str>,
    message: Option<String>,
    error: Option<PyErr>,
    note: Option<String>,
}

#[pymethods]
impl Row {
    /// The row's name as the command line prints it: the path, or `ORG/NAME@REV7 (main)` for a
    /// hub cache repository.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The directory (or GGUF file) the row is about.
    #[getter]
    fn path(&self) -> &Path {
        &self.path
    }

    /// `"gated"`, `"skipped"` or `"not_gated"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind
    }

    /// The report of a gated row; else `None`.
    #[getter]
    fn report(&self, py: Python<'_>) -> Option<Py<Report>> {
        self.report.as_ref().map(|r| r.clone_ref(py))
    }

    /// Why a row was not gated, as the JSON document's token: a skipped row's `reason`
    /// (`another_model`, ...) or a not-gated row's error reason (`no_config`, ...).
    #[getter]
    fn reason(&self) -> Option<&'static str> {
        self.reason
    }

    /// The sentence saying why, for a row that was not gated.
    #[getter]
    fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// The [`GateError`] a not-gated row's package raises from `gate()`; else `None`.
    #[getter]
    fn error(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.error
            .as_ref()
            .map(|e| e.value(py).clone().into_any().unbind())
    }

    /// What the row adds: the snapshots of its hub repository that were not gated.
    #[getter]
    fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// The exit status this row adds to the run's worst: the report's, 2 for a row not gated, and
    /// 0 for a skipped one.
    #[getter]
    fn exit_code(&self, py: Python<'_>) -> u8 {
        match (&self.report, self.kind) {
            (Some(r), _) => r.borrow(py).report.verdict().exit_code(),
            (None, "not_gated") => 2,
            (None, _) => 0,
        }
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        match &self.report {
            Some(r) => format!(
                "<dflash_gate.Row {} {:?}>",
                r.borrow(py).report.verdict(),
                self.name
            ),
            None => format!(
                "<dflash_gate.Row {} {:?}: {}>",
                self.kind,
                self.name,
                self.reason.unwrap_or("")
            ),
        }
    }
}

/// A [`GateError`] carrying what the CLI's JSON error document says (`dflash_gate::error_json`).
fn gate_error(py: Python<'_>, package: &Path, error: &PackageError) -> PyErr {
    let err = GateError::new_err(error.to_string());
    let value = err.value(py);
    // The paths as the caller's `os.fsdecode` would give them (a byte that is not UTF-8 as a
    // surrogate), so `os.fsencode` recovers the very bytes; never a lossy copy.
    let set = || -> PyResult<()> {
        value.setattr("reason", error.reason())?;
        value.setattr("fix", error.fix())?;
        value.setattr("path", error.path().as_os_str())?;
        value.setattr("package", package.as_os_str())
    };
    match set() {
        Ok(()) => err,
        Err(e) => e,
    }
}

/// `python -m dflash_gate ARGS`: the command-line gate run on `args` (the arguments after the
/// program's name, as bytes, so that a name that is not UTF-8 reaches it unchanged); returns its
/// exit status. It writes to the process's stdout and stderr as the binary does.
#[pyfunction]
fn main(py: Python<'_>, args: Vec<Vec<u8>>) -> u8 {
    let raw: Vec<OsString> = args.into_iter().map(OsString::from_vec).collect();
    let code = py.detach(|| binary::command(raw));
    // `ExitCode` hides its number but compares equal to the one made from it; the binary exits
    // with one of 0 to 3, all made by `ExitCode::from(u8)`.
    (0..=u8::MAX)
        .find(|n| code == ExitCode::from(*n))
        .unwrap_or(2)
}

/// The answer for one package: the library's report and its JSON document, made once.
#[pyclass(frozen, module = "dflash_gate")]
struct Report {
    report: dflash_gate::Report,
    document: Value,
}

impl Report {
    fn new(report: dflash_gate::Report) -> Report {
        Report {
            document: report.to_json(),
            report,
        }
    }

    /// The document's field `name` (a report document has every one asked for here).
    fn field(&self, name: &str) -> &Value {
        self.document.get(name).unwrap_or(&Value::Null)
    }
}

#[pymethods]
impl Report {
    /// `"PASS"` only when every check passed; `"FAIL"` if any failed; `"UNDECIDED"` otherwise.
    #[getter]
    fn verdict(&self) -> &'static str {
        self.report.verdict().label()
    }

    /// The package directory as it was named.
    #[getter]
    fn package(&self) -> &str {
        self.report.package()
    }

    /// The CLI's exit status for this verdict: 0 PASS, 1 FAIL, 3 UNDECIDED.
    #[getter]
    fn exit_code(&self) -> u8 {
        self.report.verdict().exit_code()
    }

    /// Every check, in run order (a new list each time: changing it changes no report).
    #[getter]
    fn checks(&self) -> Vec<Check> {
        let documents = self.field("checks").as_array();
        self.report
            .checks()
            .iter()
            .enumerate()
            .map(|(i, c)| Check {
                id: c.id().to_owned(),
                outcome: c.outcome().label(),
                message: c.message().to_owned(),
                blocked_by: c.blocked_by().map(str::to_owned),
                fix: c.fix().map(str::to_owned),
                evidence: documents
                    .and_then(|d| d.get(i))
                    .and_then(|d| d.get("evidence"))
                    .cloned()
                    .unwrap_or(Value::Null),
            })
            .collect()
    }

    /// What was found in the package, as the document's `census` object (dicts and lists).
    #[getter]
    fn census<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        python_value(py, self.field("census"))
    }

    /// What each engine would do with the draft, as the document's `loaders` array (dicts): its
    /// `engine`, `version`, `outcome` and `reasons`.
    #[getter]
    fn loaders<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        python_value(py, self.field("loaders"))
    }

    /// The `--target` the draft was held to, as the document's `{given, resolved}` dict; `None`
    /// without one. A saved report that says PASS names what it passed against.
    #[getter]
    fn target<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        python_value(py, self.field("target"))
    }

    /// The `--source` the weights were compared with, as `{given, resolved}`; `None` without one.
    #[getter]
    fn source<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        python_value(py, self.field("source"))
    }

    /// The hub repository id (`ORG/NAME`) of a draft read from the Hugging Face cache; else `None`.
    #[getter]
    fn repository(&self) -> Option<&str> {
        self.report.against().repository.as_deref()
    }

    /// The commit of the cache snapshot read, beside `repository`; else `None`.
    #[getter]
    fn revision(&self) -> Option<&str> {
        self.report.against().revision.as_deref()
    }

    /// The human report, exactly as `dflash-gate` prints it for this package (the binary's own
    /// printing code, compiled in): `census=True` is `--census`, `quiet=True` is `--quiet`. No
    /// colour and no wrapping, as the binary prints into a pipe.
    #[pyo3(signature = (*, census=false, quiet=false))]
    fn text(&self, census: bool, quiet: bool) -> String {
        binary::print::report_text(&self.report, census, quiet)
    }

    /// What the gate cannot know from what it was given, one sentence each.
    #[getter]
    fn not_checked(&self) -> Vec<String> {
        self.report.not_checked_text()
    }

    /// The JSON document exactly as `dflash-gate --json` writes it, final newline included.
    fn to_json(&self) -> String {
        let text = serde_json::to_string_pretty(&self.document).unwrap_or_default();
        format!("{text}\n")
    }

    /// True only for PASS: `if dflash_gate.gate(path):` never launches on FAIL or UNDECIDED.
    fn __bool__(&self) -> bool {
        self.report.verdict() == Outcome::Pass
    }

    fn __repr__(&self) -> String {
        format!(
            "<dflash_gate.Report {} {:?}: {} of {} checks passed>",
            self.report.verdict(),
            self.report.package(),
            self.report.passed(),
            self.report.checks().len()
        )
    }
}

/// One check's result.
#[pyclass(frozen, module = "dflash_gate")]
struct Check {
    id: String,
    outcome: &'static str,
    message: String,
    blocked_by: Option<String>,
    fix: Option<String>,
    evidence: Value,
}

#[pymethods]
impl Check {
    /// Stable id, e.g. `tiles.q4_1_signature`.
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    /// `"PASS"`, `"FAIL"` or `"UNDECIDED"`.
    #[getter]
    fn outcome(&self) -> &'static str {
        self.outcome
    }

    /// One line for a human, naming what it objected to; never to be parsed (see `evidence`).
    #[getter]
    fn message(&self) -> &str {
        &self.message
    }

    /// The facts behind the message as the document's `evidence` (a dict), or None when the check
    /// stopped before it could gather them.
    #[getter]
    fn evidence<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        python_value(py, &self.evidence)
    }

    /// For an UNDECIDED check that could not run: the id of the check that stopped it.
    #[getter]
    fn blocked_by(&self) -> Option<&str> {
        self.blocked_by.as_deref()
    }

    /// What to do about it, where the cause has a known remedy (the message ends with it too).
    #[getter]
    fn fix(&self) -> Option<&str> {
        self.fix.as_deref()
    }

    fn __repr__(&self) -> String {
        format!(
            "<dflash_gate.Check {} {}: {:?}>",
            self.outcome, self.id, self.message
        )
    }
}

/// A JSON value as the Python value `json.loads` would give for it.
fn python_value<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.into_pyobject(py)?.into_any(),
            (None, Some(i)) => i.into_pyobject(py)?.into_any(),
            // Neither integer: serde_json holds it as a finite f64.
            (None, None) => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(python_value(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(fields) => {
            let dict = PyDict::new(py);
            for (key, field) in fields {
                dict.set_item(key, python_value(py, field)?)?;
            }
            dict.into_any()
        }
    })
}
