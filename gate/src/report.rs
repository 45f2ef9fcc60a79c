//! The typed report a gate run returns, and its JSON form.
//!
//! The CLI, the test harness and a loader all read this one structure; nothing here prints.

pub use crate::evidence::Evidence;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::role_class::RoleClass;
use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

/// Version of the JSON document. Bump on any change that is not purely additive. The document's
/// schema is `schema/report.schema.json`; a test validates real reports against it.
pub const SCHEMA_VERSION: u32 = 3;

/// The program that wrote a document, so that a stored report says which gate judged it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Tool {
    pub name: &'static str,
    pub version: &'static str,
}

/// This build of the gate.
pub const TOOL: Tool = Tool {
    name: env!("CARGO_PKG_NAME"),
    version: env!("CARGO_PKG_VERSION"),
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
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
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename = "check")]
pub struct Check {
    /// Stable id, e.g. `tiles.q4_1_signature`.
    pub(crate) id: String,
    pub(crate) outcome: Outcome,
    /// One line saying what was checked and what was found, naming what it objected to.
    pub(crate) message: String,
    /// Machine-readable facts behind the message: `None` (null) when the check stopped before it
    /// could gather them. Boxed: the largest evidence type is several times a check's other fields.
    pub(crate) evidence: Option<Box<Evidence>>,
    /// For an UNDECIDED check that could not run: the id of the check whose failure or missing input
    /// stopped it.
    pub(crate) blocked_by: Option<String>,
    /// What to do about it, where the cause has a known remedy: the message's last clause
    /// (`; fix: ...`), repeated here for a program.
    pub(crate) fix: Option<String>,
}

impl Check {
    pub(crate) fn new(
        id: impl Into<String>,
        outcome: Outcome,
        message: impl Into<String>,
    ) -> Check {
        Check {
            id: id.into(),
            outcome,
            message: message.into(),
            evidence: None,
            blocked_by: None,
            fix: None,
        }
    }

    pub(crate) fn pass(id: impl Into<String>, message: impl Into<String>) -> Check {
        Check::new(id, Outcome::Pass, message)
    }

    pub(crate) fn fail(id: impl Into<String>, message: impl Into<String>) -> Check {
        Check::new(id, Outcome::Fail, message)
    }

    pub(crate) fn undecided(id: impl Into<String>, message: impl Into<String>) -> Check {
        Check::new(id, Outcome::Undecided, message)
    }

    /// UNDECIDED because `by` failed or lacked what this check needs.
    pub(crate) fn blocked(id: impl Into<String>, by: &str, message: impl Into<String>) -> Check {
        Check {
            blocked_by: Some(by.to_owned()),
            ..Check::undecided(id, message)
        }
    }

    /// Stable id, e.g. `tiles.q4_1_signature` (the constants of [`crate::CheckId`]).
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// One line saying what was checked and what was found, naming what it objected to: for a
    /// human, never to be parsed (the facts are [`Check::evidence`]).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The facts behind the message; `None` when the check stopped before it could gather them.
    pub fn evidence(&self) -> Option<&Evidence> {
        self.evidence.as_deref()
    }

    /// For an UNDECIDED check that could not run: the id of the check that stopped it.
    pub fn blocked_by(&self) -> Option<&str> {
        self.blocked_by.as_deref()
    }

    /// What to do about it, where the cause has a known remedy (the message ends with it too).
    pub fn fix(&self) -> Option<&str> {
        self.fix.as_deref()
    }

    /// The check with the remedy for its cause: the message gains it as its last clause, so a
    /// human reading the line and a program reading `fix` are told the same.
    pub(crate) fn with_fix(mut self, fix: impl Into<String>) -> Check {
        let fix = fix.into();
        self.message = format!("{}; fix: {fix}", self.message);
        self.fix = Some(fix);
        self
    }

    /// The check with the facts behind its message (one type per check id: [`crate::evidence`]).
    pub(crate) fn with_evidence(mut self, evidence: impl Into<Evidence>) -> Check {
        self.evidence = Some(Box::new(evidence.into()));
        self
    }
}

/// One tensor as the census lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename = "tensor")]
#[non_exhaustive]
pub struct TensorCensus {
    pub name: String,
    /// The role's class: what a program branches on. `None` when unexplained.
    pub role: Option<RoleClass>,
    /// The role as a human label (`gain input_layernorm`), or `None` when unexplained.
    pub role_text: Option<String>,
    /// The layer of a per-layer role.
    pub layer: Option<u64>,
    pub dtype: String,
    pub shape: Vec<u64>,
    pub data_offsets: [u64; 2],
    /// `data_offsets[1] - data_offsets[0]`, which the container's reader proved is the dtype and
    /// shape's byte count.
    pub bytes: u64,
    /// What the bytes were found to be, for a human: `q4_1 tile grid 4096 x 2560, 1280 tiles`.
    pub form_text: String,
    pub grid: Option<GridCensus>,
}

impl TensorCensus {
    /// A tensor as its header entry states it, with the role its name plays and what its bytes were
    /// found to be.
    pub(crate) fn of(
        e: &crate::container::TensorInfo,
        role: Option<crate::family::Role>,
        form_text: String,
        grid: Option<GridCensus>,
    ) -> TensorCensus {
        TensorCensus {
            name: e.name.clone(),
            role: role.map(|r| r.class()),
            role_text: role.map(|r| r.to_string()),
            layer: role.and_then(|r| r.layer()),
            dtype: e.dtype.name().to_owned(),
            shape: e.shape.clone(),
            data_offsets: [e.begin, e.end],
            bytes: e.end - e.begin,
            form_text,
            grid,
        }
    }
}

/// Facts of one q4_1 grid's headers.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename = "q4_1_grid")]
#[non_exhaustive]
pub struct GridCensus {
    pub n: u64,
    pub k: u64,
    pub tiles: u64,
    pub real_groups: u64,
    pub constant_groups: u64,
    /// Median of minimum/scale over the grid's real groups (near -7.5 for q4_1).
    pub min_scale_median: Option<f32>,
    pub scale_range: Option<(f32, f32)>,
}

/// How the gate used a file of the package.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FileUse {
    Config,
    Weights,
    Manifest,
    /// Listed, not interpreted.
    NotChecked,
}

impl fmt::Display for FileUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileUse::Config => "config",
            FileUse::Weights => "weights",
            FileUse::Manifest => "manifest",
            FileUse::NotChecked => "not checked",
        })
    }
}

/// A file in the package directory.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename = "file")]
#[non_exhaustive]
pub struct FileCensus {
    pub name: String,
    pub bytes: u64,
    #[serde(rename = "use")]
    pub use_: FileUse,
}

/// What is in the package.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(tag = "kind", rename = "census")]
#[non_exhaustive]
pub struct Census {
    /// The form the draft ships in, as the reader that read it names it.
    pub form: crate::form::Form,
    pub files: Vec<FileCensus>,
    pub weight_file: Option<String>,
    pub header_bytes: Option<u64>,
    pub file_bytes: Option<u64>,
    /// Spelling of tensor names: `model.` or bare.
    pub naming: Option<String>,
    /// The family config.json declares (its token), once the config was accepted.
    pub family: Option<&'static str>,
    pub aligned_gaps: u64,
    /// The container's `__metadata__`, in its order (a JSON object in the document).
    #[serde(serialize_with = "as_object")]
    pub metadata: Vec<(String, String)>,
    /// The first [`crate::limits::MAX_CENSUS_TENSORS`] tensors, in file order.
    pub tensors: Vec<TensorCensus>,
    /// Tensors past that limit: checked like the rest, counted here, not listed. Absent from the
    /// document when every tensor is listed.
    #[serde(skip_serializing_if = "is_zero")]
    pub tensors_not_listed: u64,
    /// What the summary line counts of the tensors not listed (boxed: nearly every census has none).
    #[serde(skip)]
    pub(crate) unlisted: Option<Box<TensorCounts>>,
    /// Each q4_1 grid compared with its source (`--source`), in package order; absent from the
    /// document without `--source`, so reports without it keep their shape.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub source_grids: Vec<SourceGridCensus>,
}

impl FileCensus {
    /// A file of the package, for [`crate::evaluate`] on bytes already in memory.
    pub fn new(name: impl Into<String>, bytes: u64, use_: FileUse) -> FileCensus {
        FileCensus {
            name: name.into(),
            bytes,
            use_,
        }
    }
}

fn as_object<S: Serializer>(pairs: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
}

/// How far one grid's dequantized weights lie from its source checkpoint's (`source.q4_1`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename = "source_grid")]
#[non_exhaustive]
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
    /// Exact (group for block, with a Q4_1 GGUF tensor: `--source FILE.gguf`) or bounded; for an
    /// exact grid the largest error and the relative RMS are not measured (NaN, null in JSON).
    pub comparison: Comparison,
    pub groups_compared: u64,
    /// Groups unlike their GGUF block (exact grids only: a bounded comparison counts elements).
    pub groups_differing: Option<u64>,
}

/// How a grid was compared with its source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Comparison {
    /// Every code and scale equal to its GGUF block's (section 12.3).
    Exact,
    /// Every element within the section 11 bound, and the RMS ceiling.
    Bounded,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How many tensors of each kind the summary line counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TensorCounts {
    pub tensors: u64,
    pub grids: u64,
    pub tiles: u64,
    pub gains: u64,
    pub scalars: u64,
    pub unexplained: u64,
    /// Tensors per stored type: in a GGUF or a folder the type is what says a matrix is quantized
    /// or not, where a Q4NX package says it with its grids. Keyed by the type's name, of which a
    /// reader knows a few dozen, so a header of a million tensors keeps a few dozen keys.
    pub types: std::collections::BTreeMap<String, u64>,
}

impl TensorCounts {
    pub fn add(&mut self, t: &TensorCensus) {
        self.tensors += 1;
        match self.types.get_mut(&t.dtype) {
            Some(n) => *n += 1,
            None => {
                self.types.insert(t.dtype.clone(), 1);
            }
        }
        if let Some(g) = &t.grid {
            self.grids += 1;
            self.tiles += g.tiles;
        }
        match t.role {
            None => self.unexplained += 1,
            Some(RoleClass::Gain) => self.gains += 1,
            Some(RoleClass::Scalar) => self.scalars += 1,
            Some(_) => {}
        }
    }
}

impl Census {
    /// Lists a tensor, up to [`crate::limits::MAX_CENSUS_TENSORS`], and counts the rest: a header of
    /// a million tensors is reported in the memory of a few thousand.
    pub(crate) fn list(&mut self, t: TensorCensus) {
        if self.tensors.len() < crate::limits::MAX_CENSUS_TENSORS {
            self.tensors.push(t);
        } else {
            self.unlisted.get_or_insert_default().add(&t);
            self.tensors_not_listed += 1;
        }
    }

    /// One line: how many tensors of each kind, for the human report.
    pub fn summary(&self) -> String {
        if self.tensors.is_empty() {
            let files: Vec<&str> = self.files.iter().map(|f| f.name.as_str()).collect();
            return format!("census: no tensors read; files: {}", files.join(", "));
        }
        let mut n = self.unlisted.as_deref().cloned().unwrap_or_default();
        for t in &self.tensors {
            n.add(t);
        }
        let files: Vec<String> = self
            .files
            .iter()
            .map(|f| format!("{} ({})", f.name, f.use_))
            .collect();
        if self.form != crate::form::Form::Q4nx {
            let mut types: Vec<(&String, &u64)> = n.types.iter().collect();
            types.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let types: Vec<String> = types.iter().map(|(t, c)| format!("{c} {t}")).collect();
            return format!(
                "census: a {}, {} tensors ({}): {} gains, {} unexplained; files: {}",
                self.form,
                n.tensors,
                types.join(", "),
                n.gains,
                n.unexplained,
                files.join(", ")
            );
        }
        format!(
            "census: {} tensors: {} q4_1 grids ({} tiles), {} gains, {} scalars, {} unexplained; files: {}",
            n.tensors,
            n.grids,
            n.tiles,
            n.gains,
            n.scalars,
            n.unexplained,
            files.join(", ")
        )
    }
}

/// The JSON document for a package the gate could not run on (exit 2): what it was named, why, and the
/// path at fault. `reason` is a token a program can branch on; `message` is the human line.
pub fn error_json(package: &str, error: &crate::error::PackageError) -> Value {
    #[derive(Serialize)]
    #[serde(tag = "kind", rename = "error")]
    struct ErrorDocument<'a> {
        schema_version: u32,
        tool: Tool,
        package: &'a str,
        reason: &'static str,
        path: String,
        message: String,
        fix: Option<&'static str>,
    }
    to_value(&ErrorDocument {
        schema_version: SCHEMA_VERSION,
        tool: TOOL,
        package,
        reason: error.reason(),
        path: crate::escape::name(error.path().as_os_str()),
        message: error.to_string(),
        fix: error.fix(),
    })
}

/// The document as a JSON value. Its objects' keys come out sorted (serde_json's map without
/// `preserve_order`), which keeps the document byte for byte reproducible whatever the field order
/// of the types.
fn to_value(document: &impl Serialize) -> Value {
    // Every map key here is a string and every type is plain data, so serializing cannot fail; if
    // it ever did, the document says so rather than being silently empty.
    serde_json::to_value(document).unwrap_or_else(|e| {
        Value::String(format!("internal error: the report did not serialize: {e}"))
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
    /// Whether a GGUF draft holds the weights, and the layer ids, of the folder it was converted
    /// from (`--source`): only that comparison tells `dflash.target_layers` holding the raw ids from
    /// the ids plus one llama.cpp reads.
    ConvertedContent,
    /// Whether a Hugging Face folder holds the weights its publisher trained: it is the form others are
    /// converted from, so nothing compares it element by element.
    PublishedContent,
    /// Whether a quantized folder holds the weights it was quantized from (`--source`): a set
    /// quantized from another tensor's weights, or from other weights, has the same form.
    QuantizedContent,
    /// Whether these are the publisher's files, byte for byte (`--manifest`).
    Provenance,
    /// Whether the forward pass is correct: nothing the gate does answers it.
    ForwardPass,
    /// The 4-bit codes of groups that are neither constant nor padding (`--source`).
    RealGroupCodes,
    /// Files other than config.json and the weight file: listed, not interpreted.
    OtherFiles,
    /// Files beside a GGUF draft: listed, not interpreted. Its own line, because a GGUF draft has no
    /// config.json and `--manifest` is refused for it, so [`NotChecked::OtherFiles`]'s would mislead.
    FilesBesideTheGguf,
}

impl NotChecked {
    /// What a Hugging Face folder's report starts with: no grid codes to leave unread, and no source
    /// to compare it with.
    pub const FOLDER: [NotChecked; 5] = [
        NotChecked::TargetAgreement,
        NotChecked::PublishedContent,
        NotChecked::Provenance,
        NotChecked::ForwardPass,
        NotChecked::OtherFiles,
    ];

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

impl NotChecked {
    /// The option whose step answers this item, when one does.
    pub fn option(self) -> Option<&'static str> {
        match self {
            NotChecked::TargetAgreement => Some("--target"),
            NotChecked::Content
            | NotChecked::ConvertedContent
            | NotChecked::QuantizedContent
            | NotChecked::RealGroupCodes => Some("--source"),
            NotChecked::Provenance => Some("--manifest"),
            NotChecked::PublishedContent
            | NotChecked::ForwardPass
            | NotChecked::OtherFiles
            | NotChecked::FilesBesideTheGguf => None,
        }
    }

    /// What is not known, without the parenthesis that says how to learn it.
    fn what(self) -> &'static str {
        match self {
            NotChecked::TargetAgreement => "vocabulary and tokenizer agreement with the target, and the target's depth",
            NotChecked::Content => "whether these are the right weights: a grid in another tile or nibble order, or another layer's matrix, has the same form",
            NotChecked::ConvertedContent => "whether these are the right weights, and whether dflash.target_layers holds the HF ids plus one or the raw ids: other weights, or the raw ids, have the same form",
            NotChecked::PublishedContent => "whether these are the weights the publisher trained: a Hugging Face folder is the form others are converted from, so no --source compares it (--manifest pins its bytes, not their training)",
            NotChecked::QuantizedContent => "whether these are the weights they were quantized from: a set quantized from another tensor's or another release's weights has the same form",
            NotChecked::Provenance => "whether these are the publisher's files, byte for byte: provenance",
            NotChecked::ForwardPass => "whether the draft's forward pass is correct: the gate reads bytes, it runs no model",
            NotChecked::RealGroupCodes => "the 4-bit codes of real groups: only constant and padding groups are read",
            NotChecked::OtherFiles => "files other than config.json and the weight file: listed in the census, not interpreted",
            NotChecked::FilesBesideTheGguf => "files other than the GGUF: listed in the census, not interpreted",
        }
    }

    /// How to learn it, when the option was not given.
    fn hint(self) -> Option<&'static str> {
        match self {
            NotChecked::TargetAgreement => Some("give --target DIR"),
            NotChecked::Content => Some("give --source PATH to compare every element with the checkpoint or the GGUF it was converted from"),
            NotChecked::ConvertedContent => Some("give --source DIR, the Hugging Face folder it was converted from, to compare every tensor and the ids with it"),
            NotChecked::PublishedContent => None,
            NotChecked::QuantizedContent => Some("give --source DIR, the bf16 folder it was quantized from, to hold every element to its step"),
            NotChecked::Provenance => Some("give --manifest to verify MANIFEST.sha256"),
            NotChecked::ForwardPass => None,
            NotChecked::RealGroupCodes => Some("give --source PATH to compare every element"),
            NotChecked::OtherFiles => Some("--manifest hashes those it lists"),
            NotChecked::FilesBesideTheGguf => None,
        }
    }

    /// The line for this item when its option was given but did not answer it, `why` saying so.
    fn given(self, why: &str) -> String {
        format!("{} ({why})", self.what())
    }
}

impl fmt::Display for NotChecked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.hint() {
            Some(hint) => write!(f, "{} ({hint})", self.what()),
            None => f.write_str(self.what()),
        }
    }
}

/// "1 layer", "36 layers".
pub(crate) fn count_layers(n: u64) -> String {
    match n {
        1 => "1 layer".to_owned(),
        n => format!("{n} layers"),
    }
}

/// Why the items `option` answers stay not checked after its step ran: `checks`, its checks, could
/// not decide. Never "give `option`": it was given.
pub(crate) fn unanswered(option: &str, checks: &[Check]) -> String {
    let undecided: Vec<&Check> = checks
        .iter()
        .filter(|c| c.outcome == Outcome::Undecided)
        .collect();
    let by: BTreeSet<Option<&str>> = undecided.iter().map(|c| c.blocked_by.as_deref()).collect();
    let ids: Vec<&str> = undecided.iter().map(|c| c.id.as_str()).collect();
    match by.into_iter().collect::<Vec<_>>()[..] {
        [] => format!("{option} given: not answered"),
        [Some(crate::check_id::CheckId::CONFIG_IS_DFLASH)] => {
            format!("{option} given: not compared, the config was refused")
        }
        [Some(by)] => format!(
            "{option} given: not answered, {} UNDECIDED, blocked by {by}",
            ids.join(", ")
        ),
        _ => format!("{option} given: not answered, {} UNDECIDED", ids.join(", ")),
    }
}

/// A path an option named: as given on the command line, and as the gate resolved it (a hub cache
/// repository or `ORG/NAME` to its snapshot directory); the same path when there was nothing to
/// resolve. Both escaped as file names are.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Named {
    pub given: String,
    pub resolved: String,
}

/// What a report was checked against, beside the package: the `--target` and `--source` it was
/// given, and, for a draft read from a Hugging Face hub cache, its repository id and the commit of
/// the snapshot read (with the ref it was reached by, for the human header); for a repository that
/// keeps its draft in a folder of its own, that folder. Each is absent from the document when it
/// does not apply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Against {
    pub target: Option<Named>,
    pub source: Option<Named>,
    pub repository: Option<String>,
    pub revision: Option<String>,
    /// The ref (`main`, or the `--revision` given) the snapshot was reached by, when it was.
    pub reference: Option<String>,
    /// The folder under the package the draft was found in and gated (`dflash`, XiaomiMiMo's
    /// layout): the package names a repository whose root is no draft. The census's files are that
    /// folder's.
    pub draft_in: Option<String>,
}

impl Against {
    /// The header lines of the human report that say it, after `dflash-gate PACKAGE`.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let (Some(repository), Some(revision)) = (&self.repository, &self.revision) {
            let by = self
                .reference
                .as_deref()
                .map(|r| format!(" ({})", crate::escape::escape(r)))
                .unwrap_or_default();
            out.push(format!("repository   {repository}@{revision}{by}"));
        }
        if let Some(folder) = &self.draft_in {
            out.push(format!(
                "draft        {folder}/ (the repository keeps its draft there; its root is no draft)"
            ));
        }
        for (word, named) in [("target", &self.target), ("source", &self.source)] {
            if let Some(n) = named {
                out.push(match n.given == n.resolved {
                    true => format!("{word:<12} {}", n.given),
                    false => format!("{word:<12} {} (resolved: {})", n.given, n.resolved),
                });
            }
        }
        out
    }
}

/// The whole answer for one package.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The package directory as it was named.
    pub(crate) package: String,
    pub(crate) checks: Vec<Check>,
    pub(crate) census: Census,
    /// What the gate cannot know, said out loud so that silence is never read as approval; each
    /// later step removes the items it answered. Ordered as the report prints them.
    pub(crate) not_checked: BTreeSet<NotChecked>,
    /// For an item whose option was given and whose step did not answer it: why (its line says so
    /// instead of asking for the option).
    pub(crate) given: std::collections::BTreeMap<NotChecked, String>,
    pub(crate) elapsed: Duration,
    pub(crate) against: Against,
    /// What each engine would do with the draft (spec 19), by its rules; empty for a draft whose
    /// config was refused.
    pub(crate) loaders: Vec<crate::engine::LoaderVerdict>,
}

/// The report as the document prints it: the verdict and the counts are derived here, from the
/// checks, so they cannot disagree with them.
impl Serialize for Report {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(tag = "kind", rename = "report")]
        struct ReportDocument<'a> {
            schema_version: u32,
            tool: Tool,
            package: &'a str,
            verdict: Outcome,
            checks_passed: usize,
            checks_failed: usize,
            checks_undecided: usize,
            checks_total: usize,
            checks: &'a [Check],
            not_checked: Vec<String>,
            census: &'a Census,
            loaders: &'a [crate::engine::LoaderVerdict],
            #[serde(skip_serializing_if = "Option::is_none")]
            target: Option<&'a Named>,
            #[serde(skip_serializing_if = "Option::is_none")]
            source: Option<&'a Named>,
            #[serde(skip_serializing_if = "Option::is_none")]
            repository: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            revision: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            draft_in: Option<&'a str>,
        }
        ReportDocument {
            schema_version: SCHEMA_VERSION,
            tool: TOOL,
            package: &self.package,
            verdict: self.verdict(),
            checks_passed: self.passed(),
            checks_failed: self.count(Outcome::Fail),
            checks_undecided: self.count(Outcome::Undecided),
            checks_total: self.checks.len(),
            checks: &self.checks,
            not_checked: self.not_checked_text(),
            census: &self.census,
            loaders: &self.loaders,
            target: self.against.target.as_ref(),
            source: self.against.source.as_ref(),
            repository: self.against.repository.as_deref(),
            revision: self.against.revision.as_deref(),
            draft_in: self.against.draft_in.as_deref(),
        }
        .serialize(s)
    }
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

    /// The package directory as it was named.
    pub fn package(&self) -> &str {
        &self.package
    }

    /// What the package was checked against: the `--target` and `--source` given and resolved,
    /// and the hub cache repository and revision it was read from.
    pub fn against(&self) -> &Against {
        &self.against
    }

    /// Every check, in run order. Read-only: the verdict is derived from them.
    pub fn checks(&self) -> &[Check] {
        &self.checks
    }

    pub fn census(&self) -> &Census {
        &self.census
    }

    /// What each engine would do with the draft, by the rules read from its code (spec 19), in
    /// [`crate::Engine::ALL`]'s order; empty when the config was refused.
    pub fn loaders(&self) -> &[crate::engine::LoaderVerdict] {
        &self.loaders
    }

    /// The human report's loader lines: one per engine whose form the draft is, and one naming the
    /// engines that do not read it at all.
    pub fn loader_lines(&self) -> Vec<String> {
        use crate::engine::LoaderOutcome;
        let mut out: Vec<String> = self
            .loaders
            .iter()
            .filter(|v| {
                v.outcome != LoaderOutcome::NotItsForm
                    || v.reasons.first().is_some_and(|r| r.rule != "form")
            })
            .map(|v| v.line())
            .collect();
        let others: Vec<&crate::engine::LoaderVerdict> = self
            .loaders
            .iter()
            .filter(|v| {
                v.outcome == LoaderOutcome::NotItsForm
                    && v.reasons.first().is_none_or(|r| r.rule == "form")
            })
            .collect();
        if let Some(first) = others.first() {
            let names: Vec<&str> = others.iter().map(|v| v.engine.name()).collect();
            let what = first
                .reasons
                .first()
                .map_or("this form", |r| r.found.as_str());
            out.push(format!(
                "loader       not its form for {}: {what}",
                names.join(", ")
            ));
        }
        out
    }

    /// What the gate cannot know (less what `--target`, `--source` and `--manifest` answered), in
    /// the order the report prints them.
    pub fn not_checked(&self) -> &BTreeSet<NotChecked> {
        &self.not_checked
    }

    /// Each [`Report::not_checked`] item as the report prints it: asking for the option that would
    /// answer it, or, when that option was given and could not, saying so and why.
    pub fn not_checked_text(&self) -> Vec<String> {
        self.not_checked
            .iter()
            .map(|item| match self.given.get(item) {
                Some(why) => item.given(why),
                None => item.to_string(),
            })
            .collect()
    }

    /// Records that `option` was given and its step ran: each item it answers that is still not
    /// checked says `why` instead of asking for the option.
    pub(crate) fn given(&mut self, option: &str, why: &str) {
        for item in &self.not_checked {
            if item.option() == Some(option) {
                self.given.insert(*item, why.to_owned());
            }
        }
    }

    /// How long the gate took (not in the JSON document, which is reproducible byte for byte).
    pub fn elapsed(&self) -> Duration {
        self.elapsed
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
        to_value(self)
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
        for header in self.against.lines() {
            line(header);
        }
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
            // A table: each column as wide as its widest cell, so no long name or role pushes the
            // columns after it out of line.
            let rows: Vec<[String; 5]> = self
                .census
                .tensors
                .iter()
                .map(|t| {
                    [
                        t.name.clone(),
                        t.dtype.clone(),
                        crate::container::shape_text(&t.shape),
                        t.role_text.as_deref().unwrap_or("UNEXPLAINED").to_owned(),
                        t.form_text.clone(),
                    ]
                })
                .collect();
            let header = ["tensor", "dtype", "shape", "role", "form"].map(str::to_owned);
            // A hostile name of thousands of characters widens only its own row.
            const WIDEST: usize = 64;
            let mut widths = [0usize; 4];
            for row in std::iter::once(&header).chain(&rows) {
                for (w, cell) in widths.iter_mut().zip(row) {
                    *w = (*w).max(cell.chars().count().min(WIDEST));
                }
            }
            for row in std::iter::once(&header).chain(&rows) {
                let [name, dtype, shape, role, form] = row;
                let [a, b, c, d] = widths;
                line(format!(
                    "  {name:<a$}  {dtype:<b$}  {shape:<c$}  {role:<d$}  {form}"
                ));
            }
            if self.census.tensors_not_listed > 0 {
                line(format!(
                    "  ... and {} more tensors, checked but not listed: the census lists the first {}",
                    self.census.tensors_not_listed,
                    self.census.tensors.len()
                ));
            }
            for g in &self.census.source_grids {
                if g.comparison == Comparison::Exact {
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
        for loader in self.loader_lines() {
            line(loader);
        }
        for item in self.not_checked_text() {
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

#[cfg(test)]
mod tests {
    #[test]
    fn one_layer_is_one_layer() {
        assert_eq!(super::count_layers(1), "1 layer");
        assert_eq!(super::count_layers(0), "0 layers");
        assert_eq!(super::count_layers(36), "36 layers");
    }
}
