//! A package directory: finding its files, reading them safely, and running the checks in order.

use crate::checks;
use crate::config::DraftConfig;
use crate::container::Container;
use crate::escape;
use crate::files::{self, FileError, WeightFile};
use crate::limits::MAX_CONFIG_BYTES;
use crate::report::{Census, Check, FileCensus, NotChecked, Report, TensorCensus};
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
}

impl Options {
    /// Also checks the draft against the target package in `dir` (`--target`).
    pub fn with_target(mut self, dir: impl Into<PathBuf>) -> Options {
        self.target = Some(dir.into());
        self
    }

    /// Also verifies `MANIFEST.sha256` (`--manifest`), or not.
    pub fn with_manifest(mut self, manifest: bool) -> Options {
        self.manifest = manifest;
        self
    }

    /// Also compares every weight with the checkpoint in `path`, or the GGUF at `path` (a `.gguf`
    /// file, or a directory holding exactly one) (`--source`).
    pub fn with_source(mut self, path: impl Into<PathBuf>) -> Options {
        self.source = Some(path.into());
        self
    }
}

/// Gates the package in `dir`.
pub fn gate(dir: &Path, options: &Options) -> Result<Report, PackageError> {
    let start = Instant::now();
    crate::error::require_dir(dir)?;
    // config.json and the weight file follow the manifest's link rule: a link out of the package is
    // refused before a byte of it is read, so no value derived from another file (a header length, an
    // architecture string) can reach a report.
    let inside = files::Inside::package(dir)?;
    let (config, config_file) = read_config(dir, &inside)?;
    let (names, files) = list_files(dir)?;
    let weight = locate_weights(&names);
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
    let package = dir.to_string_lossy().into_owned();
    let mut evaluation = evaluation(&package, config, weights, files)?;
    if let Ok((_, bytes)) = &held {
        bytes.unchanged()?;
    }
    if let Some(target_dir) = &options.target {
        let target = crate::target::read(target_dir).map_err(|e| e.from_option("--target"))?;
        let checks = crate::target::checks(&evaluation, &target);
        answered(&mut evaluation.report, checks, &crate::target::ANSWERS);
    }
    if let Some(source_dir) = &options.source {
        let source =
            crate::source::Source::open(source_dir).map_err(|e| e.from_option("--source"))?;
        let (checks, grids) = source
            .checks(&evaluation, crate::source::scalar_source_loop())
            .map_err(|p| PackageError::internal(dir, p))?;
        evaluation.report.census.source_grids = grids;
        // A refused draft was not compared, so it answered nothing.
        let answers = match evaluation.draft {
            Ok(_) => &crate::source::ANSWERS[..],
            Err(_) => &[],
        };
        answered(&mut evaluation.report, checks, answers);
        source.unchanged().map_err(|e| e.from_option("--source"))?;
        if let Ok((_, bytes)) = &held {
            bytes.unchanged()?;
        }
    }
    if options.manifest {
        let (checks, answers) =
            crate::manifest::checks(&evaluation, dir, &judged(&config_file, &held))?;
        answered(&mut evaluation.report, checks, &answers);
    }
    for file in judged(&config_file, &held) {
        file.unchanged()?;
    }
    let mut report = evaluation.report;
    report.elapsed = start.elapsed();
    Ok(report)
}

/// A later step's checks join the report, and the items it answered leave its NOT CHECKED list.
fn answered(report: &mut Report, checks: Vec<Check>, answers: &[NotChecked]) {
    report.checks.extend(checks);
    for item in answers {
        report.not_checked.remove(item);
    }
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

/// The gate on bytes already in memory: config.json (or why it could not be read) and the weight
/// file (or why there is none). The directory front end and the fuzz target both come here. `Err`
/// only when a step of the gate itself broke (a worker panicked): never a verdict from part of the work.
pub fn evaluate(
    package: &str,
    config: Result<Vec<u8>, String>,
    weights: Result<(&str, &[u8]), String>,
    files: Vec<FileCensus>,
) -> Result<Report, PackageError> {
    evaluation(package, config, weights, files).map(|e| e.report)
}

/// A draft config the gate recognised (`config.is_dflash` passed), and the JSON object it was read
/// from.
pub struct Draft {
    pub config: DraftConfig,
    pub json: serde_json::Map<String, serde_json::Value>,
}

/// What the package checks found, handed to the steps that ask more (`--target`, `--source`,
/// `--manifest`) so that none of them parses a file again or reads the report back.
pub struct Evaluation<'a> {
    /// The checks so far, the census, and what is not checked.
    pub report: Report,
    /// The recognised config, or why config.json was refused: every later step is for a draft only.
    pub draft: Result<Draft, String>,
    /// The weight file's table, when it was read and parsed.
    pub container: Option<Container<'a>>,
    /// Each tensor's form as the checks proved it, and the grids among them.
    pub forms: checks::Forms<'a>,
}

/// [`evaluate`], keeping what the checks found for the steps after them.
pub fn evaluation<'a>(
    package: &str,
    config: Result<Vec<u8>, String>,
    weights: Result<(&str, &'a [u8]), String>,
    files: Vec<FileCensus>,
) -> Result<Evaluation<'a>, PackageError> {
    let mut evaluation = Evaluation {
        report: Report {
            package: package.to_owned(),
            checks: Vec::new(),
            census: Census {
                files,
                ..Census::default()
            },
            not_checked: NotChecked::ALL.into_iter().collect(),
            elapsed: Default::default(),
        },
        draft: Err(String::new()),
        container: None,
        forms: checks::Forms::default(),
    };
    let report = &mut evaluation.report;
    let (config, json) = match config.and_then(|bytes| DraftConfig::parse(&bytes)) {
        Ok(c) => c,
        Err(why) => {
            report.checks.push(Check::fail(IS_DFLASH, why.clone()));
            evaluation.draft = Err(why);
            return Ok(evaluation);
        }
    };
    report.checks.push(Check::pass(
        IS_DFLASH,
        format!(
            "config.json declares a DFlash draft ({})",
            config.declared_as
        ),
    ));
    report.census.family = Some(config.family().token);
    report.checks.push(checks::check_geometry(&config));
    let (container, forms) = container_checks(package, report, &config, weights)?;
    evaluation.draft = Ok(Draft { config, json });
    evaluation.container = container;
    evaluation.forms = forms;
    Ok(evaluation)
}

/// The container's checks and census for a recognised config: the parsed container (none when the
/// weight file was not read or did not parse) and the forms the checks proved.
fn container_checks<'a>(
    package: &str,
    report: &mut Report,
    config: &DraftConfig,
    weights: Result<(&str, &'a [u8]), String>,
) -> Result<(Option<Container<'a>>, checks::Forms<'a>), PackageError> {
    let (name, bytes) = match weights {
        Ok(w) => w,
        Err(why) => {
            report.checks.push(Check::fail(PARSES, why));
            report.checks.extend(
                checks::container_checks(config)
                    .into_iter()
                    .map(|id| Check::blocked(id, PARSES, "the weight file was not read")),
            );
            return Ok((None, checks::Forms::default()));
        }
    };
    report.census.weight_file = Some(name.to_owned());
    report.census.file_bytes = Some(bytes.len() as u64);
    let container = match Container::parse(bytes) {
        Ok(c) => c,
        Err(e) => {
            report.checks.push(Check::fail(
                PARSES,
                format!("{name} does not parse as a Q4NX table: {e}"),
            ));
            report.checks.extend(
                checks::container_checks(config)
                    .into_iter()
                    .map(|id| Check::blocked(id, PARSES, "the weight file did not parse")),
            );
            return Ok((None, checks::Forms::default()));
        }
    };
    let table = &container.table;
    let aligned = if table.gaps.is_empty() {
        String::new()
    } else {
        format!("; {} zero-filled 64-byte alignment gaps (the engine's packer: strict safetensors readers refuse this file)", table.gaps.len())
    };
    report.checks.push(Check::pass(
        PARSES,
        format!(
            "{name} parses as a Q4NX table: {} tensors, {}-byte header, {} bytes{aligned}",
            table.entries.len(),
            table.header_bytes,
            bytes.len()
        ),
    ));
    let (container_checks, forms) = checks::run(config, &container)
        .map_err(|p| PackageError::internal(Path::new(package), p))?;
    report.checks.extend(container_checks);
    let naming = config
        .family()
        .naming(table.entries.iter().map(|e| e.name.as_str()));
    report.census.header_bytes = Some(table.header_bytes);
    report.census.naming = Some(
        if naming.prefix.is_empty() {
            "bare"
        } else {
            "model."
        }
        .to_owned(),
    );
    report.census.aligned_gaps = table.gaps.len() as u64;
    report.census.metadata = table.metadata.clone();
    report.census.tensors = table
        .entries
        .iter()
        .map(|e| {
            let (form, grid) = forms
                .by_name
                .get(&e.name)
                .cloned()
                .unwrap_or_else(|| (format!("{} {}", e.dtype, e.shape_text()), None));
            let role = naming.role(&e.name);
            TensorCensus {
                name: e.name.clone(),
                role: role.map(|r| r.to_string()),
                role_class: role.map(|r| r.class()),
                layer: role.and_then(|r| r.layer()),
                dtype: e.dtype.name().to_owned(),
                shape: e.shape.clone(),
                offsets: (e.begin, e.end),
                form,
                grid,
            }
        })
        .collect();
    Ok((Some(container), forms))
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
                "config"
            } else if raw == crate::manifest::MANIFEST_FILE {
                "manifest"
            } else if files::is_weight_file(raw) {
                "weights"
            } else {
                "not checked"
            };
            FileCensus {
                name: escape::name(raw),
                bytes: *bytes,
                use_: use_.to_owned(),
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
