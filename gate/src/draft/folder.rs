//! A draft as its publisher ships it on Hugging Face: `config.json` plus float safetensors, one file
//! or shards named by an index (z-lab's releases; loaded by vLLM, SGLang, Transformers and MLX).
//!
//! The weights are read by the checkpoint reader `--source` uses (every shard strict, the index
//! untrusted), under the package's link rule, so a hub cache snapshot's links into its blobs are read
//! and a link out of the repository is refused unread. What that reader refuses about the files (a
//! shard the index names and the folder lacks, a tensor the index does not list, a tensor in two
//! shards) is this draft's `container.parses` FAIL, naming it; a file that cannot be read at all is an
//! error, as for a package.

use crate::checkpoint::{Checkpoint, INDEX_FILE, SINGLE_FILE};
use crate::checks::{self, IS_DFLASH, PARSES};
use crate::config::DraftConfig;
use crate::container::TensorInfo;
use crate::error::PackageError;
use crate::evaluation::{Draft, Evaluation};
use crate::files::Inside;
use crate::form::Form;
use crate::limits::MAX_CENSUS_TENSORS;
use crate::report::{Check, FileCensus, NotChecked, Report, TensorCensus};
use std::path::Path;

/// The checks this form runs after `container.parses`, in report order: the ones a weight file that
/// could not be read leaves UNDECIDED.
pub const WEIGHT_CHECKS: [&str; 3] = [
    checks::inventory::COMPLETE,
    checks::inventory::EXPLAINED,
    checks::finite::ID,
];

/// How Transformers (and the engines that build z-lab's model class) meet a folder's tensors.
const LOADER: checks::inventory::Loader = checks::inventory::Loader {
    defines: "the model class defines",
    wrong: "missing or wrong",
    held_to: "of the config's shape and a float type",
    source: "the config",
    missing: "Transformers would initialise it at random and load without an error",
    misshapen: "",
    extra: "",
    unexplained: "are unexplained",
    owned: "are the model class's",
    reversed: false,
    scalar_tensors: false,
    vocabulary_of_the_target: false,
};

/// `inventory.complete` and `inventory.explained` through the one inventory: the folder's tensors
/// are plain arrays whose declared shape is the logical one, read as weights when of a float type.
fn inventory(config: &DraftConfig, tensors: &[&TensorInfo]) -> [Check; 2] {
    let held: Vec<checks::inventory::Held<'_>> = tensors
        .iter()
        .map(|t| checks::inventory::Held {
            name: &t.name,
            shape: t.shape.clone(),
            shown: format!("{} {}", t.dtype, t.shape_text()),
            readable: if checks::finite::is_float(t.dtype) {
                Ok(())
            } else {
                Err(format!(
                    "{} is {}, not a float type a loader reads as weights (BF16, F16 or F32)",
                    t.name, t.dtype
                ))
            },
        })
        .collect();
    let naming = config
        .family()
        .naming(tensors.iter().map(|t| t.name.as_str()));
    checks::inventory::run(
        config,
        checks::inventory::Spelling::Checkpoint(naming),
        &LOADER,
        &held,
    )
}

/// Whether `names` (a directory's entries) hold a Hugging Face folder's weights.
pub fn holds_weights(names: &[std::ffi::OsString]) -> bool {
    names.iter().any(|n| n == SINGLE_FILE || n == INDEX_FILE)
}

/// The folder's checks. `config` is config.json's bytes (or why they were refused); the weights are
/// read only once the config is recognised as a draft's, and come back with the evaluation so the
/// caller can prove, when the report is done, that they are still the files that were read.
pub fn evaluation(
    dir: &Path,
    inside: &Inside,
    package: &str,
    config: Result<Vec<u8>, String>,
    files: Vec<FileCensus>,
) -> Result<(Evaluation<'static>, Option<Checkpoint>), PackageError> {
    let mut evaluation = Evaluation::start(package, Form::Safetensors, files, &NotChecked::FOLDER);
    let report = &mut evaluation.report;
    let parsed = config.map_err(Ok).and_then(|bytes| {
        if let Ok(serde_json::Value::Object(top)) = crate::strict_json::parse(&bytes) {
            if let Some(why) = crate::config::speculators_format(&top) {
                return Err(Err(why));
            }
        }
        DraftConfig::from_json(&bytes).map_err(Ok)
    });
    let config = match parsed {
        Ok(c) => c,
        Err(Ok(why)) => {
            report.checks.push(Check::fail(IS_DFLASH, why.clone()));
            not_run(report);
            evaluation.draft = Err(why);
            return Ok((evaluation, None));
        }
        Err(Err(speculators)) => {
            report
                .checks
                .push(Check::undecided(IS_DFLASH, speculators.clone()));
            not_run(report);
            evaluation.draft = Err(speculators);
            return Ok((evaluation, None));
        }
    };
    report.checks.push(Check::pass(
        IS_DFLASH,
        format!(
            "config.json declares a DFlash draft ({}), in a Hugging Face safetensors folder",
            config.declared_as
        ),
    ));
    report.census.family = Some(config.family().token);
    report.checks.push(checks::check_draft_geometry(&config));
    let checkpoint = match Checkpoint::open_inside(dir, inside) {
        Ok(c) => Some(c),
        Err(e @ (PackageError::Malformed { .. } | PackageError::FileNoted { .. })) => {
            let why = format!("the safetensors weights do not read: {e}");
            report.checks.push(Check::fail(PARSES, why));
            blocked(report, "the weights were not read");
            None
        }
        Err(e) => return Err(e),
    };
    if let Some(checkpoint) = &checkpoint {
        weight_checks(dir, report, &config, checkpoint)?;
    }
    let names: Vec<&str> = report
        .census
        .files
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    if let Some(check) = super::mask_embedding::check(dir, inside, &names, &config) {
        report.checks.push(check);
    }
    evaluation.draft = Ok(Draft { config });
    Ok((evaluation, checkpoint))
}

/// Every check after `config.is_dflash`, when it did not pass: listed, each blocked by it, so a
/// folder counts the checks a good one does whatever the damage.
fn not_run(report: &mut Report) {
    not_a_draft(
        report,
        "not run: config.json declares no draft the gate reads",
    );
}

/// Every check after `config.is_dflash` (a form's), each blocked by it, saying `why`.
pub(super) fn not_a_draft(report: &mut Report, why: &str) {
    report.checks.extend(
        [checks::GEOMETRY, PARSES]
            .into_iter()
            .chain(WEIGHT_CHECKS)
            .map(|id| Check::blocked(id, IS_DFLASH, why)),
    );
}

/// [`not_a_draft`] for a form whose weight file was read whatever it holds (a GGUF's header names
/// its architecture): `parses` is that reading's own check, not one blocked by the draft's.
pub(super) fn not_a_draft_parsed(report: &mut Report, parses: Check, why: &str) {
    report
        .checks
        .push(Check::blocked(checks::GEOMETRY, IS_DFLASH, why));
    report.checks.push(parses);
    report.checks.extend(
        WEIGHT_CHECKS
            .into_iter()
            .map(|id| Check::blocked(id, IS_DFLASH, why)),
    );
}

/// The checks after `container.parses` could not run: listed, each blocked by it.
pub(super) fn blocked(report: &mut Report, why: &str) {
    report.checks.extend(
        WEIGHT_CHECKS
            .into_iter()
            .map(|id| Check::blocked(id, PARSES, why)),
    );
}

fn weight_checks(
    dir: &Path,
    report: &mut Report,
    config: &DraftConfig,
    checkpoint: &Checkpoint,
) -> Result<(), PackageError> {
    let headers = &checkpoint.headers;
    let tensors: Vec<&TensorInfo> = headers.entries().collect();
    let shards = headers.shards.len();
    let file_bytes: u64 = headers
        .shards
        .iter()
        .map(|(_, t)| t.header_bytes + t.data_len)
        .sum();
    let read: Vec<&str> = headers.shards.iter().map(|(n, _)| n.as_str()).collect();
    let unread: Vec<&str> = report
        .census
        .files
        .iter()
        .map(|f| f.name.as_str())
        .filter(|n| n.ends_with(".safetensors") && !read.contains(n))
        .collect();
    if !unread.is_empty() {
        let why = format!(
            "{} beside the weights {} names: a loader that globs *.safetensors (vLLM) loads {} too, and nothing here vouches for {}",
            checks::list(&unread, 3),
            if read.len() > 1 || read.first() != Some(&SINGLE_FILE) { INDEX_FILE } else { "the folder" },
            if unread.len() == 1 { "it" } else { "them" },
            if unread.len() == 1 { "it" } else { "them" },
        );
        report.checks.push(Check::fail(PARSES, why));
        blocked(report, "the folder holds weights no index names");
        return Ok(());
    }
    report.checks.push(Check::pass(
        PARSES,
        format!(
            "the safetensors weights parse: {} tensors in {shards} file{} ({}), {file_bytes} bytes",
            tensors.len(),
            if shards == 1 { "" } else { "s" },
            checks::list(
                &headers
                    .shards
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>(),
                3
            )
        ),
    ));
    census(report, config, checkpoint, &tensors, file_bytes);
    if let Some(scheme) = &config.quantization {
        let why = format!("cannot decide: config.json's quantization_config names {scheme}: its tensors are packed, not weights to read as floats, and the gate does not decode {scheme}");
        report.checks.extend(
            WEIGHT_CHECKS
                .into_iter()
                .map(|id| Check::undecided(id, why.clone())),
        );
        return Ok(());
    }
    let [complete, explained] = inventory(config, &tensors);
    report.checks.push(complete);
    report.checks.push(explained);
    let data: Vec<(&TensorInfo, &[u8])> = tensors
        .iter()
        .filter_map(|t| checkpoint.tensor(&t.name))
        .collect();
    if data.len() != tensors.len() {
        // The reader proved every entry's bytes are in its shard; one not found is the gate's fault.
        return Err(PackageError::Internal {
            path: dir.to_owned(),
            step: checks::finite::ID,
            message: "a tensor's bytes were not where its shard's header put them".to_owned(),
        });
    }
    let finite = checks::finite::run_tensors(&data).map_err(|p| PackageError::internal(dir, p))?;
    report.checks.push(finite);
    Ok(())
}

/// The census of a folder's tensors: each with its role, as stored, shard by shard.
fn census(
    report: &mut Report,
    config: &DraftConfig,
    checkpoint: &Checkpoint,
    tensors: &[&TensorInfo],
    file_bytes: u64,
) {
    let headers = &checkpoint.headers;
    let census = &mut report.census;
    let sharded = headers.shards.len() > 1
        || headers
            .shards
            .first()
            .is_some_and(|(n, _)| n != SINGLE_FILE);
    census.weight_file = Some(if sharded { INDEX_FILE } else { SINGLE_FILE }.to_owned());
    census.file_bytes = Some(file_bytes);
    census.header_bytes = Some(headers.shards.iter().map(|(_, t)| t.header_bytes).sum());
    let naming = config
        .family()
        .naming(tensors.iter().map(|t| t.name.as_str()));
    census.naming = Some(
        if naming.prefix.is_empty() {
            "bare"
        } else {
            "model."
        }
        .to_owned(),
    );
    census.tensors = Vec::with_capacity(tensors.len().min(MAX_CENSUS_TENSORS));
    for (shard, e) in headers
        .shards
        .iter()
        .flat_map(|(shard, table)| table.entries.iter().map(move |e| (shard, e)))
    {
        let form = if sharded {
            format!("{} {} in {shard}", e.dtype, e.shape_text())
        } else {
            format!("{} {}", e.dtype, e.shape_text())
        };
        let t = TensorCensus::of(e, naming.role(&e.name), form, None);
        census.list(t);
    }
}
