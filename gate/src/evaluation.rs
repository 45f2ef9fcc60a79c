//! The package checks run over bytes in memory (sections 3 to 7, 10), and what they found, kept as
//! a value: the later steps (`--target`, `--source`, `--manifest`) take it as input, so none of them
//! parses a file again or reads the report back. Below those steps and the directory front end
//! (`package`), which only call in.

use crate::checks::{self, IS_DFLASH, PARSES};
use crate::config::DraftConfig;
use crate::container::Container;
use crate::error::PackageError;
use crate::form::Form;
use crate::limits::MAX_CENSUS_TENSORS;
use crate::report::{Census, Check, FileCensus, NotChecked, Report, TensorCensus};
use std::path::Path;

/// The gate on bytes already in memory: config.json (or why it could not be read) and the weight
/// file (or why there is none). The directory front end and the fuzz target both come here. `Err`
/// only when a step of the gate itself broke (a worker panicked): never a verdict from part of the work.
pub fn evaluate(
    package: &str,
    config: Result<Vec<u8>, String>,
    weights: Result<(&str, &[u8]), String>,
    files: Vec<FileCensus>,
) -> Result<Report, PackageError> {
    evaluation(package, config, weights, files, false).map(|mut e| {
        let config = e.draft.as_ref().ok().map(|d| &d.config);
        crate::loaders::judge(&mut e.report, config, &[]);
        e.report
    })
}

/// A draft config the gate recognised (`config.is_dflash` passed). Every later step reads its fields,
/// and where each was read, from it: none parses config.json again.
pub struct Draft {
    pub config: DraftConfig,
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
    /// Where `bf16.finite` goes in the report when it was left to run after `--source` (see
    /// [`checks::run`]); whoever asked for that inserts it there before the report is handed back.
    pub finite_pending: Option<usize>,
}

impl Evaluation<'_> {
    /// An evaluation before any check: the package's files listed, everything in `not_checked` still
    /// unanswered.
    pub(crate) fn start(
        package: &str,
        form: Form,
        files: Vec<FileCensus>,
        not_checked: &[NotChecked],
    ) -> Self {
        Evaluation {
            report: Report {
                package: package.to_owned(),
                checks: Vec::new(),
                census: Census {
                    form,
                    files,
                    ..Census::default()
                },
                not_checked: not_checked.iter().copied().collect(),
                given: Default::default(),
                against: Default::default(),
                elapsed: Default::default(),
                loaders: Vec::new(),
            },
            draft: Err(String::new()),
            container: None,
            forms: checks::Forms::default(),
            finite_pending: None,
        }
    }
}

/// [`evaluate`], keeping what the checks found for the steps after them; `defer_finite` leaves
/// `bf16.finite` to the caller (see [`Evaluation::finite_pending`]).
pub fn evaluation<'a>(
    package: &str,
    config: Result<Vec<u8>, String>,
    weights: Result<(&str, &'a [u8]), String>,
    files: Vec<FileCensus>,
    defer_finite: bool,
) -> Result<Evaluation<'a>, PackageError> {
    let mut evaluation = Evaluation::start(package, Form::Q4nx, files, &NotChecked::ALL);
    let report = &mut evaluation.report;
    let config = match config.and_then(|bytes| DraftConfig::from_json(&bytes)) {
        Ok(c) => c,
        Err(why) => {
            report.checks.push(Check::fail(IS_DFLASH, why.clone()));
            // Listed, not left out: the package counts the checks a good one does, each saying
            // what stopped it.
            report.checks.extend(checks::refused_config_checks().into_iter().map(|id| {
                Check::blocked(
                    id,
                    IS_DFLASH,
                    "not run: config.json was refused, so there is no draft to check the package against",
                )
            }));
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
    let (container, forms) = container_checks(package, report, &config, weights, defer_finite)?;
    if defer_finite && container.is_some() {
        evaluation.finite_pending = Some(report.checks.len());
    }
    evaluation.draft = Ok(Draft { config });
    evaluation.container = container;
    evaluation.forms = forms;
    Ok(evaluation)
}

/// The checks of a step the caller asked for (`--target`, `--source`, `--manifest`) on a package whose
/// config was refused: each listed UNDECIDED, blocked by `config.is_dflash`, so the option given is
/// never silent and the count does not change with the damage.
pub fn refused_step(ids: &[&str], option: &str) -> Vec<Check> {
    ids.iter()
        .map(|id| {
            Check::blocked(
                *id,
                IS_DFLASH,
                format!("{option} given: not compared, the config was refused"),
            )
        })
        .collect()
}

/// The container's checks and census for a recognised config: the parsed container (none when the
/// weight file was not read or did not parse) and the forms the checks proved.
fn container_checks<'a>(
    package: &str,
    report: &mut Report,
    config: &DraftConfig,
    weights: Result<(&str, &'a [u8]), String>,
    defer_finite: bool,
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
            report.checks.push(
                Check::fail(
                    PARSES,
                    format!("{name} does not parse as a Q4NX table: {e}"),
                )
                .with_evidence(e),
            );
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
    let (container_checks, forms) = checks::run(config, &container, defer_finite)
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
    report.census.tensors = Vec::with_capacity(table.entries.len().min(MAX_CENSUS_TENSORS));
    for e in &table.entries {
        let (form, grid) = forms
            .by_name
            .get(&e.name)
            .cloned()
            .unwrap_or_else(|| (format!("{} {}", e.dtype, e.shape_text()), None));
        let t = TensorCensus::of(e, naming.role(&e.name), form, grid);
        report.census.list(t);
    }
    Ok((Some(container), forms))
}
