//! A package directory: finding its files, reading them safely, and running the checks in order.

use crate::draft::folder;
use crate::escape;
use crate::evaluation::evaluation;
use crate::files::{self, FileError, WeightFile};
use crate::limits::MAX_CONFIG_BYTES;
use crate::report::{Check, FileCensus, FileUse, Named, NotChecked, Report};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub use crate::checks::{IS_DFLASH, PARSES};
pub use crate::error::PackageError;
pub use crate::files::{CONFIG_FILE, WEIGHT_EXTENSION, WEIGHT_FILE};

/// What the caller asked for beyond the draft itself: `Options::default()` gates the draft alone,
/// and each `with_` adds a question. Fields may be added, so it is built this way rather than by a
/// struct literal.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Options {
    /// Check the draft against this target package (`target.*`).
    pub target: Option<PathBuf>,
    /// Verify `MANIFEST.sha256`.
    pub manifest: bool,
    /// Compare every weight with what the package was converted from (`source.*`): a checkpoint
    /// directory, a `.gguf` file, or a directory holding one.
    pub source: Option<PathBuf>,
    /// The revision of a Hugging Face cache repository to gate (a branch, tag or commit; `main` when
    /// none is given), when the path names a repository rather than a folder.
    pub revision: Option<String>,
    /// Engines whose verdict on the draft is a check of its own (`loader.NAME`): what they refuse,
    /// crash on, serve wrong or do not read fails it (`--loader`).
    pub loaders: Vec<crate::engine::Engine>,
    /// `target`, already read ([`read_target`]): many drafts held to one target read it once.
    target_read: Option<ReadTarget>,
}

/// A target read once ([`read_target`]), to hold many drafts to it (a fit report) without reading
/// it again for each: [`Options::with_read_target`]. Cheap to clone.
#[derive(Clone)]
pub struct ReadTarget(std::sync::Arc<crate::target::Target>);

impl std::fmt::Debug for ReadTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadTarget")
    }
}

/// Reads the target at `path` (a folder, a GGUF, a hub cache repository or `ORG/NAME`) as `--target`
/// does: its config and the headers of its weight files. An error is `--target`'s.
pub fn read_target(path: &Path) -> Result<ReadTarget, PackageError> {
    let dir = crate::hub::resolve(path, None, crate::hub::cache_root().as_deref())
        .map_err(|e| e.under_option("--target"))?;
    crate::target::read(&dir)
        .map(|t| ReadTarget(std::sync::Arc::new(t)))
        .map_err(|e| e.under_option("--target"))
}

impl Options {
    /// Also checks the draft against the target package in `dir` (`--target`).
    pub fn with_target(mut self, dir: impl Into<PathBuf>) -> Options {
        self.target = Some(dir.into());
        self.target_read = None;
        self
    }

    /// Also checks the draft against `target`, read from `dir` beforehand ([`read_target`]): what
    /// `with_target(dir)` answers, without reading the target again.
    pub fn with_read_target(mut self, dir: impl Into<PathBuf>, target: ReadTarget) -> Options {
        self.target = Some(dir.into());
        self.target_read = Some(target);
        self
    }

    /// Also verifies `MANIFEST.sha256` (`--manifest`), or not.
    pub fn with_manifest(mut self, manifest: bool) -> Options {
        self.manifest = manifest;
        self
    }

    /// Gates this revision of a Hugging Face cache repository (`--revision`): the path is then a
    /// `models--ORG--NAME` directory or an `ORG/NAME` id looked up in the hub cache.
    pub fn with_revision(mut self, revision: impl Into<String>) -> Options {
        self.revision = Some(revision.into());
        self
    }

    /// Also answers for these engines (`--loader`): each one's verdict becomes a `loader.NAME`
    /// check, in the order given, each engine once.
    pub fn with_loaders(
        mut self,
        engines: impl IntoIterator<Item = crate::engine::Engine>,
    ) -> Options {
        for engine in engines {
            if !self.loaders.contains(&engine) {
                self.loaders.push(engine);
            }
        }
        self
    }

    /// Also compares every weight with the checkpoint in `path`, or the GGUF at `path` (a `.gguf`
    /// file, or a directory holding exactly one) (`--source`).
    pub fn with_source(mut self, path: impl Into<PathBuf>) -> Options {
        self.source = Some(path.into());
        self
    }
}

/// The step that opens `--source` beside the package checks (named when it is lost).
pub const OPEN_SOURCE: &str = "opening --source";

/// Gates the package in `dir`.
pub fn gate(path: &Path, options: &Options) -> Result<Report, PackageError> {
    let start = Instant::now();
    let cache = crate::hub::cache_root();
    // A hub cache repository (or `ORG/NAME`) is gated as the snapshot its ref names.
    let resolved = crate::hub::resolve(path, options.revision.as_deref(), cache.as_deref())?;
    // `--source` may name the release it was converted from as `--target` names its target: a hub
    // cache repository or `ORG/NAME`, read as the snapshot its `refs/main` names.
    let source = match &options.source {
        Some(given) => Some(
            crate::hub::resolve(given, None, cache.as_deref())
                .map_err(|e| e.under_option("--source"))?,
        ),
        None => None,
    };
    let given = options;
    let with_source;
    let options = match source {
        Some(source) if options.source.as_ref() != Some(&source) => {
            with_source = Options {
                source: Some(source),
                ..options.clone()
            };
            &with_source
        }
        _ => options,
    };
    let mut report = gate_resolved(&resolved, options, start)?;
    let named = |given: &Path| Named {
        given: escape::name(given.as_os_str()),
        resolved: escape::name(
            crate::hub::resolve(given, None, cache.as_deref())
                .unwrap_or_else(|_| given.to_owned())
                .as_os_str(),
        ),
    };
    let against = &mut report.against;
    against.target = given.target.as_deref().map(named);
    against.source = given.source.as_deref().map(named);
    if let Some((repository, revision)) = crate::hub::snapshot_of(&resolved) {
        against.repository = Some(repository);
        against.revision = Some(revision);
        // Reached through a ref (a repository directory or `ORG/NAME`), not named as a snapshot.
        if resolved != path {
            let reference = options.revision.as_deref();
            against.reference = Some(reference.unwrap_or(crate::hub::DEFAULT_REVISION).to_owned());
        }
    }
    Ok(report)
}

/// The folder a repository may keep its draft in: XiaomiMiMo's layout (spec 18.2), whose root holds
/// the target's files (or only a README) and whose `dflash/` holds the draft's config.json, weights
/// and `mask_embedding.pt`.
pub const DRAFT_FOLDER: &str = "dflash";

/// Gates the package in `dir`, a path already resolved out of any hub cache name.
fn gate_resolved(dir: &Path, options: &Options, start: Instant) -> Result<Report, PackageError> {
    // A GGUF draft carries its config in its metadata: a `.gguf` file, or a directory holding one.
    // A `.gguf` path that is no directory is read as the file it names, so that nothing there, or a
    // FIFO, is refused as the file it is not, not as a directory.
    if is_gguf(dir.as_os_str()) && !dir.is_dir() {
        return gate_gguf(dir, dir, None, options, start);
    }
    crate::error::require_dir(dir)?;
    // config.json and the weight file follow the manifest's link rule: a link out of the package is
    // refused before a byte of it is read, so no value derived from another file (a header length, an
    // architecture string) can reach a report.
    let inside = files::Inside::package(dir)?;
    let (names, files) = list_files(dir)?;
    if !keeps_its_draft_in_a_folder(dir, &names, &inside) {
        return gate_listed(dir, &inside, names, files, options, start);
    }
    // The repository is the package: its link rule (a hub cache snapshot's blobs among its roots)
    // holds the folder's files too, and a folder that is itself a link out of it is not read.
    let folder = dir.join(DRAFT_FOLDER);
    if !inside.holds(&folder) {
        let to = std::fs::read_link(&folder).unwrap_or_else(|_| folder.clone());
        return Err(FileError::Outside { path: folder, to }.into());
    }
    let (names, files) = list_files(&folder)?;
    let mut report = gate_listed(&folder, &inside, names, files, options, start)?;
    report.package = escape::name(dir.as_os_str());
    report.against.draft_in = Some(DRAFT_FOLDER.to_owned());
    Ok(report)
}

/// Whether the directory `dir` (its entries `names`) keeps its draft in [`DRAFT_FOLDER`], to be
/// gated there. Only when the root is no draft itself, so that the descent can never pass over a
/// draft, or a broken one, that the root holds: the root holds no `*.q4nx` and no `*.gguf`, and its
/// config.json, when it has one, reads (under the link rule) as a JSON object that is not a draft's:
/// another model's, such as the target's beside its draft. A config that cannot be read may be a
/// broken draft's, so the root is then gated as it is and says why. And only when `dflash/` holds a
/// draft and no other subdirectory does: several draft folders are a folder of drafts, which
/// `--all` gates one by one.
pub fn keeps_its_draft_in_a_folder(dir: &Path, names: &[OsString], inside: &files::Inside) -> bool {
    // Without a `dflash/` entry there is nothing to descend into: asked first, so a draft's own
    // folder is not made to read and parse its config.json once more only to be told so.
    if !names.iter().any(|n| n == DRAFT_FOLDER)
        || names.iter().any(|n| files::is_weight_file(n) || is_gguf(n))
    {
        return false;
    }
    if names.iter().any(|n| n == CONFIG_FILE) {
        let another = inside
            .open(&dir.join(CONFIG_FILE))
            .and_then(|f| f.read_all(MAX_CONFIG_BYTES))
            .is_ok_and(|bytes| {
                matches!(
                    crate::strict_json::parse(&bytes),
                    Ok(serde_json::Value::Object(_))
                ) && !crate::config::reads_as_a_draft(&bytes)
            });
        if !another {
            return false;
        }
    }
    let folder = dir.join(DRAFT_FOLDER);
    if !std::fs::metadata(&folder).is_ok_and(|m| m.is_dir()) || !holds_a_draft(&folder, inside) {
        return false;
    }
    !names.iter().any(|n| {
        n != DRAFT_FOLDER
            && std::fs::metadata(dir.join(n)).is_ok_and(|m| m.is_dir())
            && holds_a_draft(&dir.join(n), inside)
    })
}

/// [`keeps_its_draft_in_a_folder`] for a directory not yet listed (`--all`'s listing asks it of each
/// directory it meets): `false` when it cannot be listed or its link rule not set.
pub fn keeps_its_draft_in_a_folder_at(dir: &Path) -> bool {
    let Ok(inside) = files::Inside::package(dir) else {
        return false;
    };
    let Ok((names, _)) = list_files(dir) else {
        return false;
    };
    keeps_its_draft_in_a_folder(dir, &names, &inside)
}

/// Gates the directory `dir`, listed (`names`, `files`), under the link rule `inside`: the
/// package's, or for a draft kept in a folder of its repository, the repository's.
fn gate_listed(
    dir: &Path,
    inside: &files::Inside,
    names: Vec<OsString>,
    mut files: Vec<FileCensus>,
    options: &Options,
    start: Instant,
) -> Result<Report, PackageError> {
    drafts_under(dir, &names, inside)?;
    if let Some(name) = gguf_in(dir, &names, inside)? {
        let path = dir.join(&name);
        inside.admits(&files::open(&path)?)?;
        for file in &mut files {
            file.use_ = if file.name == escape::name(&name) {
                FileUse::Weights
            } else {
                FileUse::NotChecked
            };
        }
        return gate_gguf(&path, dir, Some((files, inside)), options, start);
    }
    let (config, config_file) = read_config(dir, inside)?;
    let q4nx: Vec<String> = names
        .iter()
        .filter(|n| files::is_weight_file(n))
        .map(|n| escape::name(n))
        .collect();
    // No weights of any form beside a Hugging Face release's config (a download that stopped after
    // config.json): its weights are the safetensors its loaders read, so the folder's checks name
    // what is missing, where a Q4NX package's would name a Q4NX file it never had.
    let unweighted = q4nx.is_empty()
        && !names
            .iter()
            .any(|n| n.as_encoded_bytes().ends_with(b".safetensors"));
    if unweighted && folder::released_as_a_folder(dir, &config) {
        return gate_folder(dir, inside, options, (config, config_file), files, start);
    }
    if folder::holds_weights(&names) {
        if !q4nx.is_empty() {
            return Err(PackageError::Malformed {
                path: dir.to_owned(),
                why: format!(
                    "holds both Q4NX weights ({}) and safetensors weights ({}): each form's loader reads its own, so the gate does not pick one (move one form out)",
                    crate::checks::list(&q4nx, 3),
                    match names.iter().find(|n| crate::checkpoint::is_index(n)) {
                        Some(index) => escape::name(index),
                        None => crate::checkpoint::SINGLE_FILE.into(),
                    }
                ),
            });
        }
        return gate_folder(dir, inside, options, (config, config_file), files, start);
    }
    let weight = locate_weights(&names);
    // Every other `*.q4nx` beside the one read: never read, so never the package's weights.
    let unread: Vec<String> = match &weight {
        Ok(read) => names
            .iter()
            .filter(|n| *n != read && files::is_weight_file(n))
            .map(|n| escape::name(n))
            .collect(),
        Err(_) => Vec::new(),
    };
    for file in files.iter_mut().filter(|f| unread.contains(&f.name)) {
        file.use_ = FileUse::NotChecked;
    }
    let held = match &weight {
        Ok(name) => {
            let file = files::open(&dir.join(name))?;
            inside.admits(&file)?;
            Ok((escape::name(name), file.into_bytes()?))
        }
        Err(why) => Err(why.clone()),
    };
    let weights = match &held {
        Ok((name, bytes)) => Ok((name.as_str(), bytes.as_slice())),
        Err(why) => Err(why.clone()),
    };
    // Escaped as file names are (`\xNN` for a byte that is not UTF-8): two directories whose
    // names differ only there must never print, or appear in JSON, as one.
    let package = crate::escape::name(dir.as_os_str());
    // The source is opened (mapped, its header or headers read) while the package is checked: that
    // waits on nothing the checks find. Its result is taken where it was opened before, after the
    // package's own errors and `--target`'s, so which error a run reports does not change.
    let (evaluation, opened) = match &options.source {
        Some(source) => {
            let (evaluation, opened) = crate::parallel::beside(
                OPEN_SOURCE,
                || crate::source::Source::open(source),
                // `bf16.finite` waits for `--source`, whose comparison reads fc (a quarter of
                // the package) and proves it finite in the same pass: fc is read once.
                || evaluation(&package, config, weights, files, true),
            );
            (evaluation, Some(opened))
        }
        None => (evaluation(&package, config, weights, files, false), None),
    };
    let mut evaluation = evaluation?;
    if let (Ok(read), false) = (&weight, unread.is_empty()) {
        unread_weights(&mut evaluation.report, &escape::name(read), &unread);
    }
    if let Ok((_, bytes)) = &held {
        bytes.unchanged()?;
    }
    if let Some(target_dir) = &options.target {
        let target = target_of(options, target_dir)?;
        let checks = crate::target::checks(&evaluation, &target);
        let answers = crate::target::answered(&checks);
        answered(&mut evaluation.report, "--target", checks, answers);
    }
    let mut proven_finite = Vec::new();
    if let Some(opened) = opened {
        let source = opened
            .map_err(|p| PackageError::internal(dir, p))?
            .map_err(|e| e.under_option("--source"))?;
        let answer = source
            .checks(&evaluation, crate::source::scalar_source_loop())
            .map_err(|p| PackageError::internal(dir, p))?;
        evaluation.report.census.source_grids = answer.grids;
        proven_finite = answer.finite;
        // A refused draft was not compared (its source.* checks are blocked), so it answered nothing.
        let checks = answer.checks;
        let answers = crate::source::answered(&checks);
        answered(&mut evaluation.report, "--source", checks, &answers);
        source.unchanged().map_err(|e| e.under_option("--source"))?;
        if let Ok((_, bytes)) = &held {
            bytes.unchanged()?;
        }
    }
    if let (Some(at), Some(container)) = (evaluation.finite_pending, &evaluation.container) {
        let finite = crate::checks::finite::run_except(container, &proven_finite)
            .map_err(|p| PackageError::internal(dir, p))?;
        evaluation.report.checks.insert(at, finite);
        evaluation.finite_pending = None;
    }
    if options.manifest {
        let (checks, answers) =
            crate::manifest::checks(&evaluation, dir, &judged(&config_file, &held))?;
        answered(&mut evaluation.report, "--manifest", checks, &answers);
    }
    for file in judged(&config_file, &held) {
        file.unchanged()?;
    }
    judge_loaders(&mut evaluation, options);
    let mut report = evaluation.report;
    report.elapsed = start.elapsed();
    Ok(report)
}

/// A Hugging Face folder: its own checks, then the steps the options ask for (`--source` compares a
/// converted draft with what it was converted from, so it does not apply to the folder itself).
fn gate_folder(
    dir: &Path,
    inside: &files::Inside,
    options: &Options,
    (config, config_file): ReadConfig,
    files: Vec<crate::report::FileCensus>,
    start: Instant,
) -> Result<Report, PackageError> {
    let package = escape::name(dir.as_os_str());
    let (mut evaluation, checkpoint) = folder::evaluation(dir, inside, &package, config, files)?;
    if let Some(source) = &options.source {
        quantized_source(dir, source, &mut evaluation, checkpoint.as_ref())?;
    }
    let mut judged: Vec<&files::RegularFile> = config_file.iter().collect();
    if let Some(checkpoint) = &checkpoint {
        judged.extend(checkpoint.files().into_iter().skip(1));
    }
    if let Some(target_dir) = &options.target {
        let target = target_of(options, target_dir)?;
        let checks = crate::target::checks(&evaluation, &target);
        let answers = crate::target::answered(&checks);
        answered(&mut evaluation.report, "--target", checks, answers);
    }
    if options.manifest {
        let (checks, answers) = crate::manifest::checks(&evaluation, dir, &judged)?;
        answered(&mut evaluation.report, "--manifest", checks, &answers);
    }
    for file in judged {
        file.unchanged()?;
    }
    if let Some(checkpoint) = &checkpoint {
        checkpoint.unchanged()?;
    }
    judge_loaders(&mut evaluation, options);
    let mut report = evaluation.report;
    report.elapsed = start.elapsed();
    Ok(report)
}

/// `--source DIR` against a quantized folder: the bf16 folder it was quantized from (spec 17.2). A
/// folder that is not quantized in a scheme the gate reads is the form drafts are converted and
/// quantized from, so nothing is compared: `--source` is refused, saying so.
fn quantized_source(
    dir: &Path,
    source: &Path,
    evaluation: &mut crate::evaluation::Evaluation<'_>,
    checkpoint: Option<&crate::checkpoint::Checkpoint>,
) -> Result<(), PackageError> {
    let refuse = |why: String| PackageError::Option {
        option: "--source",
        inner: Box::new(PackageError::Malformed {
            path: source.to_owned(),
            why,
        }),
    };
    let scheme = evaluation.draft.as_ref().ok().and_then(|d| {
        let q = d.config.quantization.as_ref()?;
        Some((&d.config, q.scheme.as_ref().ok()?))
    });
    let Some((config, scheme)) = scheme else {
        return Err(refuse(format!("not compared: {} is a Hugging Face safetensors folder that is not quantized in a scheme the gate reads, the form a draft is converted from; --source holds a converted draft (a Q4NX package or a GGUF) or a quantized folder against the folder it came from", escape::name(dir.as_os_str()))));
    };
    if let Some(why) = crate::draft::gguf_source::refused_source(source) {
        return Err(refuse(why.replace(
            "a GGUF draft is compared",
            "a quantized folder is compared",
        )));
    }
    let opened =
        crate::checkpoint::Checkpoint::open(source).map_err(|e| e.under_option("--source"))?;
    let checks = match checkpoint {
        Some(draft) => crate::draft::quantized::source::checks(config, scheme, draft, &opened)
            .map_err(|p| PackageError::internal(dir, p))?,
        None => crate::draft::gguf_source::blocked(
            PARSES,
            "not compared: the folder's weights do not read",
        ),
    };
    let answers = match crate::source::answered(&checks).contains(&NotChecked::Content) {
        true => &[NotChecked::QuantizedContent][..],
        false => &[],
    };
    answered(&mut evaluation.report, "--source", checks, answers);
    opened.unchanged().map_err(|e| e.under_option("--source"))
}

/// The target `--target` names: a folder or package, or a hub cache repository (or `ORG/NAME`)
/// resolved to its `main` snapshot, offline.
/// The target `options` names: as read beforehand, else read now from `path`.
fn target_of(
    options: &Options,
    path: &Path,
) -> Result<std::sync::Arc<crate::target::Target>, PackageError> {
    match &options.target_read {
        Some(read) => Ok(read.0.clone()),
        None => read_target(path).map(|r| r.0),
    }
}

fn is_gguf(name: &std::ffi::OsStr) -> bool {
    crate::gguf::is_gguf_name(name)
}

/// The one `*.gguf` a directory holds as its draft, `None` when it holds none; a directory holding
/// several, or a GGUF beside another form's weights, is refused (the gate does not pick one).
fn gguf_in(
    dir: &Path,
    names: &[OsString],
    inside: &files::Inside,
) -> Result<Option<OsString>, PackageError> {
    let ggufs: Vec<String> = names
        .iter()
        .filter(|n| is_gguf(n))
        .map(|n| escape::name(n))
        .collect();
    let others: Vec<String> = names
        .iter()
        .filter(|n| files::is_weight_file(n) || n.as_encoded_bytes().ends_with(b".safetensors"))
        .map(|n| escape::name(n))
        .collect();
    let malformed = |why: String| PackageError::Malformed {
        path: dir.to_owned(),
        why,
    };
    match (ggufs.len(), others.is_empty()) {
        (0, _) => Ok(None),
        (_, false) => Err(malformed(format!(
            "holds both a GGUF ({}) and other weights ({}): each form's loader reads its own, so the gate does not pick one (move one form out)",
            crate::checks::list(&ggufs, 3),
            crate::checks::list(&others, 3)
        ))),
        (1, true) => Ok(names.iter().find(|n| is_gguf(n)).cloned()),
        (_, true) => Err(malformed(several_ggufs(dir, names, inside))),
    }
}

/// Why a directory holding several `*.gguf` is not gated, saying what each file is (a DFlash draft,
/// another model by its `general.architecture`, or a file that does not read as a GGUF), since a
/// folder of a draft and its target is not a folder of drafts. The first few are read, by header,
/// under the package's link rule.
fn several_ggufs(dir: &Path, names: &[OsString], inside: &files::Inside) -> String {
    const READ: usize = 4;
    let ggufs: Vec<&OsString> = names.iter().filter(|n| is_gguf(n)).collect();
    let kinds: Vec<(String, Option<bool>, String)> = ggufs
        .iter()
        .take(READ)
        .map(|n| {
            let (draft, what) = gguf_kind(&dir.join(n), inside);
            (escape::name(n), draft, what)
        })
        .collect();
    let drafts: Vec<&str> = kinds
        .iter()
        .filter(|(_, draft, _)| *draft == Some(true))
        .map(|(name, _, _)| name.as_str())
        .collect();
    let said: Vec<String> = kinds
        .iter()
        .map(|(name, _, what)| format!("{name} ({what})"))
        .collect();
    let advice = match (drafts.as_slice(), ggufs.len() > READ) {
        ([], false) => "none of them is a DFlash draft: name the draft's own .gguf file (a target model is given with --target)".to_owned(),
        ([one], false) => format!("name the draft's file ({one}); a target model is given with --target"),
        _ => "name the .gguf file, or give the folder to --all, which gates each draft".to_owned(),
    };
    format!(
        "holds {} GGUF files: {}; the gate does not guess which is meant: {advice}",
        ggufs.len(),
        crate::checks::list_of(&said, ggufs.len(), READ)
    )
}

/// What the GGUF at `path` is, by its header: `Some(true)` a DFlash draft (or a fork's draft
/// dialect), `Some(false)` another model, `None` a file not read (a link out of the package, not a
/// GGUF the gate reads); with the words that say so.
fn gguf_kind(path: &Path, inside: &files::Inside) -> (Option<bool>, String) {
    use crate::draft::gguf::{ARCHITECTURE, FORK_DIALECTS};
    if let Err(e) = inside.open(path) {
        return (None, format!("not read: {}", e.reason()));
    }
    let gguf = match crate::gguf::Gguf::open(path) {
        Ok(gguf) => gguf,
        Err(_) => return (None, "not a GGUF the gate reads".to_owned()),
    };
    match gguf.header.architecture() {
        Some(a) if a == ARCHITECTURE => (Some(true), "a DFlash draft".to_owned()),
        Some(a) if FORK_DIALECTS.contains(&a) => {
            (Some(true), format!("a fork's DFlash draft, {a}"))
        }
        Some(a) => {
            // The name is the file's: a value written to flood the message is cut short.
            let shown: String = a.chars().take(64).collect();
            (
                Some(false),
                format!(
                    "another model: general.architecture \"{}\"",
                    crate::escape::escape(&shown)
                ),
            )
        }
        None => (Some(false), "no general.architecture".to_owned()),
    }
}

/// Refuses a directory holding a draft in a subdirectory, whatever sits beside it: one draft is
/// gated per path, and a folder of drafts (a models folder) names none of them, so gating the one
/// file beside them, or calling the folder no package, would pass over the drafts unsaid. `--all`
/// gates each. A subdirectory holds a draft when it holds a `*.q4nx`, a config.json that reads as a
/// draft's, or a `*.gguf` whose header says it is one; its files are read under the package's link
/// rule, and one that is a link out of the package is judged by its names alone, unread.
fn drafts_under(
    dir: &Path,
    names: &[OsString],
    inside: &files::Inside,
) -> Result<(), PackageError> {
    let drafts: Vec<String> = names
        .iter()
        .filter(|n| std::fs::metadata(dir.join(n)).is_ok_and(|m| m.is_dir()))
        .filter(|n| holds_a_draft(&dir.join(n), inside))
        .map(|n| escape::name(n))
        .collect();
    if drafts.is_empty() {
        return Ok(());
    }
    let beside: Vec<String> = names
        .iter()
        .filter(|n| {
            *n == CONFIG_FILE
                || is_gguf(n)
                || files::is_weight_file(n)
                || n.as_encoded_bytes().ends_with(b".safetensors")
                || crate::checkpoint::is_index(n)
        })
        .map(|n| escape::name(n))
        .collect();
    let (them, beside) = match (drafts.len(), beside.is_empty()) {
        (1, true) => ("a draft directory", String::new()),
        (1, false) => (
            "a draft directory",
            format!(" beside {}", crate::checks::list(&beside, 3)),
        ),
        (_, true) => ("draft directories", String::new()),
        (_, false) => (
            "draft directories",
            format!(" beside {}", crate::checks::list(&beside, 3)),
        ),
    };
    Err(PackageError::Malformed {
        path: dir.to_owned(),
        why: format!(
            "holds {them} ({}){beside}: a folder of drafts is not one draft, and the gate does not guess which is meant; did you mean --all? (it gates each draft under the folder; or name the draft's own directory or file)",
            crate::checks::list(&drafts, 3)
        ),
    })
}

/// Whether directory `sub` holds a draft (see [`drafts_under`]).
fn holds_a_draft(sub: &Path, inside: &files::Inside) -> bool {
    let Ok(entries) = std::fs::read_dir(sub) else {
        return false;
    };
    let names: Vec<OsString> = entries.flatten().map(|e| e.file_name()).collect();
    if names.iter().any(|n| files::is_weight_file(n)) {
        return true;
    }
    // Judged by its names only when it is a link out of the package: nothing there is read.
    let readable = inside.holds(sub);
    if names.iter().any(|n| n == CONFIG_FILE) {
        // A config not read (a link out, too large, not a file) may be a draft's.
        let another = readable
            && inside
                .open(&sub.join(CONFIG_FILE))
                .and_then(|f| f.read_all(MAX_CONFIG_BYTES))
                .is_ok_and(|bytes| !crate::config::reads_as_a_draft(&bytes));
        if !another {
            return true;
        }
    }
    names
        .iter()
        .filter(|n| is_gguf(n))
        .any(|n| !readable || gguf_kind(&sub.join(n), inside).0 != Some(false))
}

/// A GGUF draft (`path`, the file; `package`, what was named): its own checks, and with `--source`
/// the Hugging Face folder it was converted from; with `--target` the target it drafts for, by the
/// same `target.*` checks as a config's; with `--manifest` the folder's `MANIFEST.sha256` or hub cache
/// blob names, as for every form (a GGUF file named alone has neither: UNDECIDED, saying so). One
/// shard of a split GGUF is refused.
fn gate_gguf(
    path: &Path,
    package: &Path,
    files: Option<(Vec<FileCensus>, &files::Inside)>,
    options: &Options,
    start: Instant,
) -> Result<Report, PackageError> {
    let name = path.file_name().map(escape::name).unwrap_or_default();
    if crate::source::is_shard(&name) {
        return Err(PackageError::Malformed {
            path: path.to_owned(),
            why: format!("{name} is one shard of a split GGUF: a split draft is not read (merge it with llama.cpp's gguf-split --merge first)"),
        });
    }
    // `--source`: the Hugging Face folder the draft was converted from, opened before the draft is read.
    let source = match &options.source {
        None => None,
        Some(dir) => {
            if let Some(why) = crate::draft::gguf_source::refused_source(dir) {
                return Err(PackageError::Option {
                    option: "--source",
                    inner: Box::new(PackageError::Malformed {
                        path: dir.clone(),
                        why,
                    }),
                });
            }
            Some(crate::checkpoint::Checkpoint::open(dir).map_err(|e| e.under_option("--source"))?)
        }
    };
    let (files, inside) = match files {
        Some((f, inside)) => (f, Some(inside)),
        None => (
            vec![FileCensus {
                name: path.file_name().map(escape::name).unwrap_or_default(),
                bytes: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
                use_: FileUse::Weights,
            }],
            None,
        ),
    };
    let (mut evaluation, gguf) =
        crate::draft::gguf::evaluation(path, &escape::name(package.as_os_str()), files)?;
    if let Some(checkpoint) = &source {
        use crate::draft::gguf_source;
        let dflash = evaluation
            .report
            .checks
            .iter()
            .any(|c| c.id() == IS_DFLASH && c.outcome() == crate::report::Outcome::Pass);
        let checks = match &gguf {
            None => gguf_source::blocked(PARSES, "not compared: the GGUF does not parse"),
            Some(_) if !dflash => gguf_source::blocked(
                IS_DFLASH,
                "not compared: the GGUF holds no draft upstream llama.cpp loads as one",
            ),
            // DSpark's heads have no mapping to hold them to their source by (spec 18.3).
            Some(g) if !crate::draft::gguf::dspark_parts(&g.header).is_empty() => {
                gguf_source::blocked(
                    crate::checks::GEOMETRY,
                    "not compared: the GGUF holds DSpark's keys or tensors, which the gate does not read",
                )
            }
            Some(g) => {
                gguf_source::checks(g, checkpoint).map_err(|p| PackageError::internal(path, p))?
            }
        };
        // The weights and the ids, once every comparison decided (source.config holds the ids).
        let decided = checks.iter().any(|c| {
            c.id() == crate::source::CONFIG && c.outcome() != crate::report::Outcome::Undecided
        });
        let answers = match crate::source::answered(&checks).contains(&NotChecked::Content) {
            true if decided => &[NotChecked::ConvertedContent][..],
            _ => &[],
        };
        answered(&mut evaluation.report, "--source", checks, answers);
        checkpoint
            .unchanged()
            .map_err(|e| e.under_option("--source"))?;
    }
    if let Some(target) = &options.target {
        let target = target_of(options, target)?;
        let passed = |id: &str| {
            evaluation
                .report
                .checks
                .iter()
                .any(|c| c.id() == id && c.outcome() == crate::report::Outcome::Pass)
        };
        // config.geometry passed: the metadata reads as it did for the draft's own checks.
        let meta = gguf
            .as_ref()
            .filter(|_| passed(crate::checks::GEOMETRY))
            .and_then(|g| {
                let meta =
                    crate::draft::gguf::read_meta(&g.header, crate::draft::gguf::ARCHITECTURE);
                meta.ok().map(|m| (m, g))
            });
        let checks = crate::target::of_gguf(
            meta.as_ref().map(|(m, h)| (m, *h)),
            passed(IS_DFLASH),
            &target,
        );
        let answers = crate::target::answered(&checks);
        answered(&mut evaluation.report, "--target", checks, answers);
    }
    if options.manifest {
        let dflash = evaluation
            .report
            .checks
            .iter()
            .any(|c| c.id() == IS_DFLASH && c.outcome() == crate::report::Outcome::Pass);
        let (checks, answers) = match files_read(&gguf, package) {
            // As for a refused config: the verdict is already a FAIL, hashing would not change it.
            _ if !dflash => (
                crate::evaluation::refused_step(&[crate::manifest::MANIFEST], "--manifest"),
                Vec::new(),
            ),
            Some(read) => {
                let check = crate::manifest::check(package, &read)?;
                let answered = match check.outcome() {
                    crate::report::Outcome::Undecided => Vec::new(),
                    _ => crate::manifest::ANSWERS.to_vec(),
                };
                (vec![check], answered)
            }
            None => (
                vec![Check::undecided(
                    crate::manifest::MANIFEST,
                    "--manifest was asked for, but a GGUF file named alone has no MANIFEST.sha256 beside it that the gate reads: name the folder that holds it and its manifest (or its hub cache snapshot)",
                )],
                Vec::new(),
            ),
        };
        answered(&mut evaluation.report, "--manifest", checks, &answers);
    }
    if let Some(gguf) = &gguf {
        // The name was vetted before the reader opened it again: the file read is held to the
        // rule too, so a link swapped in between is refused, never reported.
        if let Some(inside) = inside {
            inside.admits(gguf.file())?;
        }
        gguf.unchanged()?;
    }
    judge_loaders(&mut evaluation, options);
    let mut report = evaluation.report;
    report.elapsed = start.elapsed();
    Ok(report)
}

/// The GGUF read, as the file `--manifest` hashes from its handle, when the draft was named by its
/// folder; `None` for a file named alone.
fn files_read<'a>(
    gguf: &'a Option<crate::gguf::Gguf>,
    package: &Path,
) -> Option<Vec<&'a files::RegularFile>> {
    package
        .is_dir()
        .then(|| gguf.iter().map(|g| g.file()).collect())
}

/// The report's `loaders` section, once every check of the draft has run, and the `loader.NAME`
/// checks `--loader` asked for.
fn judge_loaders(evaluation: &mut crate::evaluation::Evaluation<'_>, options: &Options) {
    let config = evaluation.draft.as_ref().ok().map(|d| &d.config);
    crate::loaders::judge(&mut evaluation.report, config, &options.loaders);
}

/// A weight file that parsed, with other `*.q4nx` files beside it: the gate read one, but a loader
/// that globs `*.q4nx` may load another, which nothing here vouches for. `container.parses` is
/// UNDECIDED naming both, so the package is never approved as it stands; the checks of the file
/// read still run and report.
fn unread_weights(report: &mut Report, read: &str, unread: &[String]) {
    let Some(check) = report.checks.iter_mut().find(|c| c.id() == PARSES) else {
        return;
    };
    if check.outcome() != crate::report::Outcome::Pass {
        return;
    }
    let (them, it) = match unread.len() {
        1 => (unread[0].clone(), "it"),
        _ => (unread.join(", "), "them"),
    };
    *check = Check::undecided(
        PARSES,
        format!(
            "{}; not read: {them} beside it (the package's weights are {read}), which a loader that globs *.{WEIGHT_EXTENSION} may load instead: remove {it} or move {it} out of the package",
            check.message()
        ),
    );
}

/// A later step's checks join the report, and the items it answered leave its NOT CHECKED list; those
/// of `option` it did not answer say it was given and why, never "give `option`".
fn answered(report: &mut Report, option: &str, checks: Vec<Check>, answers: &[NotChecked]) {
    let why = crate::report::unanswered(option, &checks);
    report.checks.extend(checks);
    for item in answers {
        report.not_checked.remove(item);
    }
    report.given(option, &why);
}

/// The package files the checks read: config.json and the weight file, as opened. The verdict is
/// about these handles' bytes, so the manifest hashes them, and each must still be what its name
/// holds when the report is handed back.
fn judged<'a>(
    config: &'a Option<files::RegularFile>,
    weights: &'a Result<(String, files::Bytes), String>,
) -> Vec<&'a files::RegularFile> {
    let weights = weights.as_ref().ok().map(|(_, bytes)| bytes.file());
    config.iter().chain(weights).collect()
}

/// config.json's bytes (or why they were refused unread), and the open file they came from.
type ReadConfig = (Result<Vec<u8>, String>, Option<files::RegularFile>);

/// The package's config.json, or (as a config failure, not an I/O error) why it is refused unread;
/// with the open file it was read from, when it was.
fn read_config(dir: &Path, inside: &files::Inside) -> Result<ReadConfig, PackageError> {
    let read = files::open(&dir.join(CONFIG_FILE)).and_then(|file| {
        inside.admits(&file)?;
        Ok((file.read_all(MAX_CONFIG_BYTES)?, file))
    });
    match read {
        Ok((bytes, file)) => Ok((Ok(bytes), Some(file))),
        Err(FileError::NotFound { .. }) => Err(PackageError::NoConfig {
            path: dir.to_owned(),
        }),
        Err(FileError::TooLarge { cap, .. }) => Ok((
            Err(format!(
                "{CONFIG_FILE} is larger than the {cap}-byte limit: refused unread"
            )),
            None,
        )),
        Err(e) => Err(e.into()),
    }
}

/// The directory's entries: their names as the file system spells them (sorted by bytes), and the
/// census of each.
fn list_files(dir: &Path) -> Result<(Vec<OsString>, Vec<FileCensus>), PackageError> {
    let unreadable = |source| FileError::Unreadable {
        path: dir.to_owned(),
        source,
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let bytes = entry.metadata().map(|m| m.len()).unwrap_or(0);
        names.push((entry.file_name(), bytes));
    }
    names.sort();
    let files = names
        .iter()
        .map(|(raw, bytes)| {
            let use_ = if raw == CONFIG_FILE {
                FileUse::Config
            } else if raw == crate::manifest::MANIFEST_FILE {
                FileUse::Manifest
            } else if files::is_weight_file(raw)
                || crate::checkpoint::is_index(raw)
                || raw.as_encoded_bytes().ends_with(b".safetensors")
            {
                FileUse::Weights
            } else {
                FileUse::NotChecked
            };
            FileCensus {
                name: escape::name(raw),
                bytes: *bytes,
                use_,
            }
        })
        .collect();
    Ok((names.into_iter().map(|(n, _)| n).collect(), files))
}

/// `model.q4nx`, else the single `*.q4nx` (its name as the file system spells it, so a name that is
/// not UTF-8 still opens). `Err` inside is a package failure (none, or ambiguous).
fn locate_weights(names: &[OsString]) -> Result<OsString, String> {
    match files::weight_file(names) {
        WeightFile::None => {
            Err("no weight file: neither model.q4nx nor any *.q4nx in the package".to_owned())
        }
        WeightFile::One(name) => Ok(name),
        WeightFile::Many(many) => Err(format!(
            "{} *.q4nx files and no model.q4nx ({}): the gate does not guess which is the draft's",
            many.len(),
            many.iter()
                .map(|n| escape::name(n))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}
