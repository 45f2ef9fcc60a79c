//! A draft as its publisher ships it on Hugging Face: `config.json` plus float safetensors, one file
//! or shards named by an index (z-lab's releases; loaded by vLLM, SGLang, Transformers and MLX).
//!
//! The weights are read by the checkpoint reader `--source` uses (every shard strict, the index
//! untrusted), under the package's link rule, so a hub cache snapshot's links into its blobs are read
//! and a link out of the repository is refused unread. What that reader refuses about the files (a
//! shard the index names and the folder lacks, a tensor the index does not list, a tensor in two
//! shards) is this draft's `container.parses` FAIL, naming it; a file that cannot be read at all is an
//! error, as for a package.

use super::quantized;
use crate::checkpoint::{Checkpoint, INDEX_FILE, SINGLE_FILE};
use crate::checks::{self, IS_DFLASH, PARSES};
use crate::config::{Architecture, DraftConfig};
use crate::container::TensorInfo;
use crate::dtype::Dtype;
use crate::error::PackageError;
use crate::evaluation::{Draft, Evaluation};
use crate::files::Inside;
use crate::form::Form;
use crate::limits::MAX_CENSUS_TENSORS;
use crate::quant::Scheme;
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
    declares: "config.json",
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
/// are plain arrays whose declared shape is the logical one, read as weights when of a float type;
/// under a quantization scheme each quantized set is one tensor of its role (see [`quantized`]).
fn inventory(
    config: &DraftConfig,
    tensors: &[&TensorInfo],
    checkpoint: &Checkpoint,
    scheme: Option<&Scheme>,
) -> [Check; 2] {
    let reduced = config.reduced_vocabulary().is_some();
    let dense = |t: &TensorInfo| quantized::Folded {
        name: t.name.clone(),
        shape: t.shape.clone(),
        shown: format!("{} {}", t.dtype, t.shape_text()),
        readable: match (reduced, t.name.as_str()) {
            // A reduced vocabulary's map: integers and a mask, as speculators writes them.
            (true, checks::inventory::D2T) => map_type(t, Dtype::I64),
            (true, checks::inventory::T2D) => map_type(t, Dtype::Bool),
            _ if checks::finite::is_float(t.dtype) => Ok(()),
            _ => Err(format!(
                "{} is {}, not a float type a loader reads as weights (BF16, F16 or F32)",
                t.name, t.dtype
            )),
        },
    };
    let folded: Vec<quantized::Folded> = match scheme {
        Some(scheme) => quantized::fold(config, scheme, checkpoint, tensors, dense),
        None => tensors.iter().map(|t| dense(t)).collect(),
    };
    let held: Vec<checks::inventory::Held<'_>> = folded
        .iter()
        .map(|t| checks::inventory::Held {
            name: &t.name,
            shape: t.shape.clone(),
            shown: t.shown.clone(),
            readable: t.readable.clone(),
        })
        .collect();
    let naming = config
        .family()
        .naming(folded.iter().map(|t| t.name.as_str()));
    checks::inventory::run(
        config,
        checks::inventory::Spelling::Checkpoint(naming),
        &LOADER,
        &held,
    )
}

/// A vocabulary map's tensor is of the one type vLLM reads it as.
fn map_type(t: &TensorInfo, want: Dtype) -> Result<(), String> {
    if t.dtype == want {
        Ok(())
    } else {
        Err(format!(
            "{} is {}, not {want}: the reduced vocabulary's map is read as {want}",
            t.name, t.dtype
        ))
    }
}

/// Whether `names` (a directory's entries) hold a Hugging Face folder's weights: `model.safetensors`,
/// an index, or MiMo's `dflash_draft_model*.safetensors` (read only as an index names them: without
/// one, `container.parses` says so, rather than reading the folder as a Q4NX package).
pub fn holds_weights(names: &[std::ffi::OsString]) -> bool {
    names.iter().any(|n| {
        n == SINGLE_FILE || crate::checkpoint::is_index(n) || crate::checkpoint::is_draft_weights(n)
    })
}

/// Whether a directory holding config.json and no weights of any form is a Hugging Face release
/// whose weights are missing (a download that stopped after config.json), so that it is held to
/// the safetensors its loaders read, not to a Q4NX file: it is a hub cache snapshot (what the hub
/// client downloads), or its config was written by Transformers (`transformers_version`, which
/// `save_pretrained` writes into every config) or names the remote code Transformers loads with it
/// (`auto_map`, as z-lab's releases do). A Q4NX package's config states neither.
pub fn released_as_a_folder(dir: &Path, config: &Result<Vec<u8>, String>) -> bool {
    if crate::hub::snapshot_of(dir).is_some() {
        return true;
    }
    let Ok(bytes) = config else {
        return false;
    };
    matches!(
        crate::strict_json::parse(bytes),
        Ok(serde_json::Value::Object(top))
            if top.contains_key("transformers_version") || top.contains_key("auto_map")
    )
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
    let parsed = config.and_then(|bytes| DraftConfig::from_json(&bytes));
    let mut config = match parsed {
        Ok(c) => c,
        Err(why) => {
            report.checks.push(Check::fail(IS_DFLASH, why.clone()));
            not_run(report);
            evaluation.draft = Err(why);
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
    if config.quantization.is_none() {
        config.quantization = modelopt_file(dir, inside, report);
    }
    // A folder quantized in a scheme the gate reads came from a bf16 one, which --source compares.
    if config
        .quantization
        .as_ref()
        .is_some_and(|q| q.scheme.is_ok())
    {
        report.not_checked.remove(&NotChecked::PublishedContent);
        report.not_checked.insert(NotChecked::QuantizedContent);
    }
    report.census.family = Some(config.family().token);
    report.checks.push(checks::check_draft_geometry(&config));
    let checkpoint = match Checkpoint::open_inside(dir, inside) {
        Ok(c) => Some(c),
        Err(
            e @ (PackageError::Malformed { .. }
            | PackageError::FileNoted { .. }
            | PackageError::Missing { .. }),
        ) => {
            // A download the hub client has not finished says so: the weights are not broken,
            // they are not there yet.
            let unfinished = crate::hub::unfinished_download(dir);
            let note = unfinished
                .as_ref()
                .map(|(note, _)| format!("; {note}"))
                .unwrap_or_default();
            let why = format!("the safetensors weights do not read: {e}{note}");
            report.checks.push(match unfinished {
                Some((_, fix)) => Check::fail(PARSES, why).with_fix(fix),
                None => Check::fail(PARSES, why),
            });
            blocked(report, "the weights were not read");
            quantized_blocked(report, &config, "the weights were not read");
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

/// ModelOpt's `hf_quant_config.json`, read as the scheme when config.json states none (vLLM and
/// SGLang read it so: a ModelOpt export may state its quantization there only).
fn modelopt_file(
    dir: &Path,
    inside: &Inside,
    report: &Report,
) -> Option<crate::quant::Quantization> {
    let file = crate::quant::MODELOPT_FILE;
    report.census.files.iter().find(|f| f.name == file)?;
    let bytes = inside
        .open(&dir.join(file))
        .and_then(|f| f.read_all(crate::limits::MAX_CONFIG_BYTES))
        .map_err(|e| e.reason());
    Some(crate::quant::read_modelopt_file(bytes.and_then(|b| {
        crate::strict_json::parse(&b).map_err(|e| format!("{file} is not JSON: {e}"))
    })))
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

/// `quant.scales`, blocked by `container.parses`, in the report of a draft whose config states a
/// quantization: such a draft counts one check more whatever the damage.
fn quantized_blocked(report: &mut Report, config: &DraftConfig, why: &str) {
    if config.quantization.is_some() {
        report
            .checks
            .push(Check::blocked(checks::scales::ID, PARSES, why));
    }
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
            if read.len() > 1 || read.first() != Some(&SINGLE_FILE) { headers.index.unwrap_or(INDEX_FILE) } else { "the folder" },
            if unread.len() == 1 { "it" } else { "them" },
            if unread.len() == 1 { "it" } else { "them" },
        );
        report.checks.push(Check::fail(PARSES, why));
        blocked(report, "the folder holds weights no index names");
        quantized_blocked(report, config, "the folder holds weights no index names");
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
    let scheme = match config
        .quantization
        .as_ref()
        .map(|q| (&q.scheme, config.architecture))
    {
        None => None,
        Some((Ok(scheme), Architecture::Dflash)) => Some(scheme),
        Some((read, _)) => {
            let why = match read {
                Ok(scheme) => format!(
                    "config.json states {}, which the gate reads for the first DFlash family only",
                    scheme.describe()
                ),
                Err(why) => why.clone(),
            };
            let why = format!("cannot decide: {why}: its tensors are packed, not weights to read as floats, and the gate does not decode them");
            report.checks.extend(
                WEIGHT_CHECKS
                    .into_iter()
                    .chain([checks::scales::ID])
                    .map(|id| Check::undecided(id, why.clone())),
            );
            return Ok(());
        }
    };
    let [mut complete, explained] = inventory(config, &tensors, checkpoint, scheme);
    if let (Some((_, vocab)), Some((_, d2t)), Some((_, t2d))) = (
        config.reduced_vocabulary(),
        checkpoint.tensor(checks::inventory::D2T),
        checkpoint.tensor(checks::inventory::T2D),
    ) {
        // Both are there with the config's shapes when `complete` passed: a few bytes per token.
        complete = checks::inventory::vocabulary_map(complete, d2t, t2d, vocab);
    }
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
    // A quantized set's scales are quant.scales's to read (a NaN scale is that check's finding,
    // not bf16.finite's); every other float tensor is bf16.finite's.
    let rules = match scheme {
        Some(scheme) => quantized::reads(scheme, &tensors),
        None => Default::default(),
    };
    let (scales, dense): (Vec<_>, Vec<_>) = data
        .into_iter()
        .partition(|(t, _)| rules.contains_key(t.name.as_str()));
    let finite = checks::finite::run_tensors(&dense).map_err(|p| PackageError::internal(dir, p))?;
    report.checks.push(finite);
    if let Some(scheme) = scheme {
        let scales: Vec<_> = scales
            .into_iter()
            .filter_map(|(t, b)| Some((t, b, *rules.get(t.name.as_str())?)))
            .collect();
        let check = checks::scales::run(&scheme.describe(), &scales)
            .map_err(|p| PackageError::internal(dir, p))?;
        report.checks.push(check);
    }
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
    let index = headers.index.unwrap_or(INDEX_FILE);
    census.weight_file = Some(if sharded { index } else { SINGLE_FILE }.to_owned());
    census.file_bytes = Some(file_bytes);
    census.header_bytes = Some(headers.shards.iter().map(|(_, t)| t.header_bytes).sum());
    let scheme = config
        .quantization
        .as_ref()
        .and_then(|q| q.scheme.as_ref().ok());
    let role_name = |name| match scheme {
        Some(scheme) => quantized::role_name(scheme, name),
        None => std::borrow::Cow::Borrowed(name),
    };
    let names: Vec<std::borrow::Cow<'_, str>> =
        tensors.iter().map(|t| role_name(&t.name)).collect();
    let naming = config.family().naming(names.iter().map(|n| n.as_ref()));
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
        let mut form = if sharded {
            format!("{} {} in {shard}", e.dtype, e.shape_text())
        } else {
            format!("{} {}", e.dtype, e.shape_text())
        };
        // A quantized role's stored codes name the scheme, bits and grouping.
        if let Some(described) = scheme.and_then(|s| quantized::codes(s, &e.name, e.dtype)) {
            form = format!("{form}, {described}");
        }
        // A part of a quantized set plays its role's part (spec 17.1).
        let role = naming.role(&role_name(&e.name));
        let t = TensorCensus::of(e, role, form, None);
        census.list(t);
    }
}
