//! The typed report a gate run returns, and its JSON form.
//!
//! The CLI, the test harness and a loader all read this one structure; nothing here prints.

use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

/// Version of the JSON document. Bump on any change that is not purely additive. The document's
/// schema is `schema/report.schema.json`; a test validates real reports against it.
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Outcome {
    Pass,
    /// Could not decide (a field missing, a prerequisite failed): never a pass.
    Undecided,
    Fail,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Undecided => "UNDECIDED",
        }
    }

    /// The exit status that reports this verdict: 0 pass, 1 fail, 3 undecided (2 is a usage error).
    pub fn exit_code(self) -> u8 {
        match self {
            Outcome::Pass => 0,
            Outcome::Fail => 1,
            Outcome::Undecided => 3,
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One check's result.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// Stable id, e.g. `tiles.q4_1_signature`.
    pub id: String,
    pub outcome: Outcome,
    /// One line saying what was checked and what was found, naming what it objected to.
    pub message: String,
    /// Machine-readable facts behind the message.
    pub evidence: Value,
    /// For an UNDECIDED check that could not run: the id of the check whose failure or missing input
    /// stopped it.
    pub blocked_by: Option<String>,
}

impl Check {
    pub fn new(id: impl Into<String>, outcome: Outcome, message: impl Into<String>) -> Check {
        Check {
            id: id.into(),
            outcome,
            message: message.into(),
            evidence: Value::Null,
            blocked_by: None,
        }
    }

    pub fn pass(id: impl Into<String>, message: impl Into<String>) -> Check {
        Check::new(id, Outcome::Pass, message)
    }

    pub fn fail(id: impl Into<String>, message: impl Into<String>) -> Check {
        Check::new(id, Outcome::Fail, message)
    }

    pub fn undecided(id: impl Into<String>, message: impl Into<String>) -> Check {
        Check::new(id, Outcome::Undecided, message)
    }

    /// UNDECIDED because `by` failed or lacked what this check needs.
    pub fn blocked(id: impl Into<String>, by: &str, message: impl Into<String>) -> Check {
        Check {
            blocked_by: Some(by.to_owned()),
            ..Check::undecided(id, message)
        }
    }

    pub fn with_evidence(mut self, evidence: Value) -> Check {
        self.evidence = evidence;
        self
    }

    pub fn to_json(&self) -> Value {
        json!({
            "kind": "check",
            "id": self.id,
            "outcome": self.outcome.label(),
            "message": self.message,
            "evidence": self.evidence,
            "blocked_by": self.blocked_by,
        })
    }
}

/// One tensor as the census lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorCensus {
    pub name: String,
    /// The role it plays, as a human label (`gain input_layernorm`), or `None` when unexplained.
    pub role: Option<String>,
    /// The role's class as a token (`projection`, `gain`, `conv`, `fc`, `selector`, `scalar`,
    /// `embedding`): what a program branches on.
    pub role_class: Option<&'static str>,
    /// The layer of a per-layer role.
    pub layer: Option<u64>,
    pub dtype: String,
    pub shape: Vec<u64>,
    pub offsets: (u64, u64),
    /// What the bytes were found to be, e.g. `q4_1 tile grid 4096 x 2560, 1280 tiles`.
    pub form: String,
    pub grid: Option<GridCensus>,
}

/// Facts of one q4_1 grid's headers.
#[derive(Clone, Debug, PartialEq)]
pub struct GridCensus {
    pub n: u64,
    pub k: u64,
    pub tiles: u64,
    pub real_groups: u64,
    pub constant_groups: u64,
    pub ratio_median: Option<f32>,
    pub scale_range: Option<(f32, f32)>,
}

/// A file in the package directory.
#[derive(Clone, Debug, PartialEq)]
pub struct FileCensus {
    pub name: String,
    pub bytes: u64,
    /// How the gate used it: `config`, `weights`, `manifest`, or `not checked`.
    pub use_: String,
}

/// What is in the package.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Census {
    pub files: Vec<FileCensus>,
    pub weight_file: Option<String>,
    pub header_bytes: Option<u64>,
    pub file_bytes: Option<u64>,
    /// Spelling of tensor names: `model.` or bare.
    pub naming: Option<String>,
    /// The family config.json declares (its token), once the config was accepted.
    pub family: Option<&'static str>,
    pub aligned_gaps: u64,
    pub metadata: Vec<(String, String)>,
    pub tensors: Vec<TensorCensus>,
    /// Each q4_1 grid compared with its source (`--source`), in package order.
    pub source_grids: Vec<SourceGridCensus>,
}

/// How far one grid's dequantized weights lie from its source checkpoint's (`source.q4_1`).
#[derive(Clone, Debug, PartialEq)]
pub struct SourceGridCensus {
    pub name: String,
    /// Real elements compared.
    pub elements: u64,
    /// Largest `|dequantized - source|` over the group's step `d`, before clamping (the bound clamps:
    /// a quantizer that gives up on an outlier passes with this above 1). About 0.5 for ggml's
    /// min/max quantizer.
    pub max_error_steps: f32,
    /// RMS of (dequantized - source) over RMS of source: about 0.08 for a faithful 4-bit grid.
    pub relative_rms: f64,
    pub out_of_bound: u64,
    /// Compared exactly, group for block, with a Q4_1 GGUF tensor (`--source FILE.gguf`); the
    /// largest error and the relative RMS are then not measured (NaN, null in JSON).
    pub exact: bool,
    pub groups_compared: u64,
    /// Groups unlike their GGUF block (exact grids only: a bounded comparison counts elements).
    pub groups_differing: Option<u64>,
}

impl Census {
    /// One line: how many tensors of each kind, for the human report.
    pub fn summary(&self) -> String {
        if self.tensors.is_empty() {
            let files: Vec<&str> = self.files.iter().map(|f| f.name.as_str()).collect();
            return format!("census: no tensors read; files: {}", files.join(", "));
        }
        let grids: Vec<&GridCensus> = self
            .tensors
            .iter()
            .filter_map(|t| t.grid.as_ref())
            .collect();
        let tiles: u64 = grids.iter().map(|g| g.tiles).sum();
        let count =
            |f: &dyn Fn(&TensorCensus) -> bool| self.tensors.iter().filter(|t| f(t)).count();
        let unexplained = count(&|t| t.role.is_none());
        let gains = count(&|t| t.role_class == Some("gain"));
        let scalars = count(&|t| t.role_class == Some("scalar"));
        let files: Vec<String> = self
            .files
            .iter()
            .map(|f| format!("{} ({})", f.name, f.use_))
            .collect();
        format!(
            "census: {} tensors: {} q4_1 grids ({} tiles), {} gains, {} scalars, {} unexplained; files: {}",
            self.tensors.len(),
            grids.len(),
            tiles,
            gains,
            scalars,
            unexplained,
            files.join(", ")
        )
    }

    pub fn to_json(&self) -> Value {
        let tensors: Vec<Value> = self
            .tensors
            .iter()
            .map(|t| {
                json!({
                    "kind": "tensor",
                    "name": t.name,
                    "role": t.role_class,
                    "role_text": t.role,
                    "layer": t.layer,
                    "dtype": t.dtype,
                    "shape": t.shape,
                    "data_offsets": [t.offsets.0, t.offsets.1],
                    "bytes": t.offsets.1 - t.offsets.0,
                    "form_text": t.form,
                    "grid": t.grid.as_ref().map(|g| json!({
                        "kind": "q4_1_grid",
                        "n": g.n,
                        "k": g.k,
                        "tiles": g.tiles,
                        "real_groups": g.real_groups,
                        "constant_groups": g.constant_groups,
                        "min_scale_median": g.ratio_median.map(f64::from),
                        "scale_range": g.scale_range.map(|(lo, hi)| [f64::from(lo), f64::from(hi)]),
                    })),
                })
            })
            .collect();
        let files: Vec<Value> = self
            .files
            .iter()
            .map(|f| json!({"kind": "file", "name": f.name, "bytes": f.bytes, "use": f.use_.replace(' ', "_")}))
            .collect();
        let metadata: serde_json::Map<String, Value> = self
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let mut doc = json!({
            "kind": "census",
            "files": files,
            "weight_file": self.weight_file,
            "header_bytes": self.header_bytes,
            "file_bytes": self.file_bytes,
            "naming": self.naming,
            "family": self.family,
            "aligned_gaps": self.aligned_gaps,
            "metadata": metadata,
            "tensors": tensors,
        });
        // Only with --source, so reports without it keep their shape.
        if !self.source_grids.is_empty() {
            doc["source_grids"] = self
                .source_grids
                .iter()
                .map(|g| {
                    json!({
                        "kind": "source_grid",
                        "name": g.name,
                        "elements": g.elements,
                        "max_error_steps": f64::from(g.max_error_steps),
                        "relative_rms": g.relative_rms,
                        "out_of_bound": g.out_of_bound,
                        "comparison": if g.exact { "exact" } else { "bounded" },
                        "groups_compared": g.groups_compared,
                        "groups_differing": g.groups_differing,
                    })
                })
                .collect();
        }
        doc
    }
}

/// The JSON document for a package the gate could not run on (exit 2): what it was named, why, and the
/// path at fault. `reason` is a token a program can branch on; `message` is the human line.
pub fn error_json(package: &str, error: &crate::error::PackageError) -> Value {
    json!({
        "kind": "error",
        "schema_version": SCHEMA_VERSION,
        "package": package,
        "reason": error.reason(),
        "path": error.path().to_string_lossy(),
        "message": error.to_string(),
    })
}

/// One thing the gate cannot know from the package alone. `--target`, `--source` and `--manifest`
/// each remove the items they answer, and only when they ran: `--manifest` proves bytes, not
/// content, and `--source` proves content, not where the files came from. Declared in the order the
/// report lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum NotChecked {
    /// Vocabulary, tokenizer and depth agreement with the target (`--target`).
    TargetAgreement,
    /// Whether these are the right weights, element by element (`--source`).
    Content,
    /// Whether these are the publisher's files, byte for byte (`--manifest`).
    Provenance,
    /// Whether the forward pass is correct: nothing the gate does answers it.
    ForwardPass,
    /// The 4-bit codes of groups that are neither constant nor padding (`--source`).
    RealGroupCodes,
    /// Files other than config.json and the weight file: listed, not interpreted.
    OtherFiles,
}

impl NotChecked {
    /// Every item, as a report starts with them.
    pub const ALL: [NotChecked; 6] = [
        NotChecked::TargetAgreement,
        NotChecked::Content,
        NotChecked::Provenance,
        NotChecked::ForwardPass,
        NotChecked::RealGroupCodes,
        NotChecked::OtherFiles,
    ];
}

impl fmt::Display for NotChecked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NotChecked::TargetAgreement => "vocabulary and tokenizer agreement with the target, and the target's depth (give --target DIR)",
            NotChecked::Content => "whether these are the right weights: a grid in another tile or nibble order, or another layer's matrix, has the same form (give --source DIR to compare every element with the original checkpoint)",
            NotChecked::Provenance => "whether these are the publisher's files, byte for byte: provenance (give --manifest to verify MANIFEST.sha256)",
            NotChecked::ForwardPass => "whether the draft's forward pass is correct: the gate reads bytes, it runs no model",
            NotChecked::RealGroupCodes => "the 4-bit codes of real groups: only constant and padding groups are read (give --source DIR to compare every element)",
            NotChecked::OtherFiles => "files other than config.json and the weight file: listed in the census, not interpreted (--manifest hashes those it lists)",
        })
    }
}

/// The whole answer for one package.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The package directory as it was named.
    pub package: String,
    pub checks: Vec<Check>,
    pub census: Census,
    /// What the gate cannot know, said out loud so that silence is never read as approval; each
    /// later step removes the items it answered. Ordered as the report prints them.
    pub not_checked: BTreeSet<NotChecked>,
    pub elapsed: Duration,
}

impl Report {
    /// FAIL if any check failed; UNDECIDED if none failed but one could not decide; PASS only when
    /// every check passed.
    pub fn verdict(&self) -> Outcome {
        self.checks
            .iter()
            .map(|c| c.outcome)
            .max()
            .unwrap_or(Outcome::Undecided)
    }

    pub fn check(&self, id: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.id == id)
    }

    pub fn passed(&self) -> usize {
        self.count(Outcome::Pass)
    }

    /// How many checks ended with `outcome`.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.checks.iter().filter(|c| c.outcome == outcome).count()
    }

    /// The JSON document (`schema/report.schema.json`). Deterministic: no timings, checks in run order.
    pub fn to_json(&self) -> Value {
        json!({
            "kind": "report",
            "schema_version": SCHEMA_VERSION,
            "package": self.package,
            "verdict": self.verdict().label(),
            "checks_passed": self.passed(),
            "checks_failed": self.count(Outcome::Fail),
            "checks_undecided": self.count(Outcome::Undecided),
            "checks_total": self.checks.len(),
            "checks": self.checks.iter().map(Check::to_json).collect::<Vec<_>>(),
            "not_checked": self.not_checked.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "census": self.census.to_json(),
        })
    }

    /// The human report: one line per check, the census line, the NOT CHECKED lines, the verdict,
    /// and the count. Every line goes through [`crate::escape::line`]: names from the package cannot
    /// start a line of their own, move the cursor or hide text, and no line runs past
    /// [`crate::escape::MAX_LINE_CHARS`].
    pub fn to_text(&self, with_census: bool) -> String {
        let mut out = String::new();
        let mut line = |text: String| {
            out.push_str(&crate::escape::line(&text));
            out.push('\n');
        };
        line(format!("dflash-gate {}", self.package));
        for c in &self.checks {
            line(format!(
                "{:<10} {:<28} {}",
                c.outcome.label(),
                c.id,
                c.message
            ));
        }
        line(self.census.summary());
        if with_census {
            for t in &self.census.tensors {
                let role = t.role.as_deref().unwrap_or("UNEXPLAINED");
                line(format!(
                    "  {:<48} {:<5} {:<22} {:<26} {}",
                    t.name,
                    t.dtype,
                    crate::container::shape_text(&t.shape),
                    role,
                    t.form
                ));
            }
            for g in &self.census.source_grids {
                if g.exact {
                    line(format!(
                        "  source {:<41} exact: {} of {} groups differ from their GGUF blocks",
                        g.name,
                        g.groups_differing.unwrap_or_default(),
                        g.groups_compared
                    ));
                    continue;
                }
                line(format!(
                    "  source {:<41} largest error {:.3} steps, relative RMS {:.4}, {} of {} out of bound",
                    g.name, g.max_error_steps, g.relative_rms, g.out_of_bound, g.elements
                ));
            }
        }
        for item in &self.not_checked {
            line(format!("NOT CHECKED  {item}"));
        }
        // The spec's closing line, preceded by the verdict it adds up to.
        line(format!("VERDICT      {}", self.verdict()));
        line(format!(
            "{} of {} checks passed ({:.2} s)",
            self.passed(),
            self.checks.len(),
            self.elapsed.as_secs_f64()
        ));
        out
    }
}
