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
    sets: Option<&quantized::Sets<'_, '_>>,
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
    let folded: Vec<quantized::Folded> = match sets {
        Some(sets) => sets.fold(config, checkpoint, tensors, dense),
        None => tensors.iter().map(|t| dense(t)).collect(),
    };
    // The names stay in `names` for the inventory to borrow; the rest moves, uncopied.
    let (names, rest): (Vec<String>, Vec<_>) = folded
        .into_iter()
        .map(|t| (t.name, (t.shape, t.shown, t.readable)))
        .unzip();
    let held: Vec<checks::inventory::Held<'_>> = names
        .iter()
        .zip(rest)
        .map(|(name, (shape, shown, readable))| checks::inventory::Held {
            name,
            shape,
            shown,
            readable,
        })
        .collect();
    let naming = config.family().naming(names.iter().map(String::as_str));
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
    let parsed = config.and_then(|bytes| DraftConfig::from_json(&bytes).map(|c| (c, bytes)));
    let (mut config, bytes) = match parsed {
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
    let checkpoint = match Checkpoint::open_inside(dir, inside, &bytes) {
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
    // The sets the config's scheme stores, read once for the census, the inventory and the scans
    // (the census names a set's parts under any scheme the gate reads).
    let sets = config
        .quantization
        .as_ref()
        .and_then(|q| q.scheme.as_ref().ok())
        .map(|scheme| quantized::Sets::new(scheme, &tensors));
    let undecided = match config
        .quantization
        .as_ref()
        .map(|q| (&q.scheme, config.architecture))
    {
        None | Some((Ok(_), Architecture::Dflash)) => None,
        Some((Ok(scheme), _)) => Some(format!(
            "config.json states {}, which the gate reads for the first DFlash family only",
            scheme.describe()
        )),
        Some((Err(why), _)) => Some(why.clone()),
    };
    let take_census = |report: &mut Report| {
        census(
            report,
            config,
            checkpoint,
            &tensors,
            file_bytes,
            sets.as_ref(),
        )
    };
    if let Some(why) = undecided {
        take_census(report);
        let why = format!("cannot decide: {why}: its tensors are packed, not weights to read as floats, and the gate does not decode them");
        report.checks.extend(
            WEIGHT_CHECKS
                .into_iter()
                .chain([checks::scales::ID])
                .map(|id| Check::undecided(id, why.clone())),
        );
        return Ok(());
    }
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
    let (mut scales, mut floats) = (Vec::new(), Vec::new());
    for (t, bytes) in data {
        match sets.as_ref().and_then(|s| s.rule(&t.name)) {
            Some(rule) => scales.push((t, bytes, rule)),
            None if checks::finite::is_float(t.dtype) => floats.push((t, bytes)),
            None => {}
        }
    }
    // The census and the inventory are taken on this thread while the other workers start on the
    // scans. The inventory reads a few values (`weight_shape`) that sit on pages beside the scales:
    // a page fault each, which the scans would otherwise take, and on a W4A16 draft a tenth of the
    // gate when read after the scans on one core with the other idle.
    let ([mut complete, explained], finite, found) = scans(&floats, &scales, || {
        take_census(report);
        inventory(config, &tensors, checkpoint, sets.as_ref())
    })
    .map_err(|p| PackageError::internal(dir, p))?;
    let finite = checks::finite::floats_verdict(&finite);
    let scales = sets
        .as_ref()
        .map(|sets| checks::scales::judge(&sets.scheme().describe(), &scales, found));
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
    report.checks.push(finite);
    report.checks.extend(scales);
    Ok(())
}

/// The step that reads a folder's weights: `bf16.finite`'s and `quant.scales`'s tensors, which a
/// worker panic names.
pub const SCANS: &str = "the weights' scans";

/// What [`scans`] returns: what this thread's own step found, `bf16.finite`'s scan, and what
/// `quant.scales` found in each of its tensors.
type Scanned<'t, A> = (A, checks::finite::Scan<'t>, Vec<checks::scales::Found>);

/// One piece of the scans: a chunk of a float tensor for `bf16.finite`, or a quantized set's
/// tensor for `quant.scales` (by its index among the scales).
enum Piece {
    Finite(checks::finite::Chunk),
    Scale(usize),
}

/// What a piece found.
enum Found {
    Finite(checks::finite::Read),
    Scale(checks::scales::Found),
}

/// `bf16.finite`'s pass over `floats` and `quant.scales`'s over `scales`, in one step on every
/// core: a quantized draft's few float tensors (its norms) each sit on pages of their own between
/// packed codes, a page fault apiece, and read in a step of their own they were faulted in on one
/// core, after a thread start of its own. This thread runs `first` (the census and the
/// inventory) before it joins them, while the other workers read.
fn scans<'t, A>(
    floats: &[(&'t TensorInfo, &[u8])],
    scales: &[(&TensorInfo, &[u8], checks::scales::Rule)],
    first: impl FnOnce() -> A,
) -> Result<Scanned<'t, A>, crate::parallel::WorkerPanic> {
    let chunks = checks::finite::chunks(floats);
    let pieces: Vec<Piece> = (0..scales.len())
        .map(Piece::Scale)
        .chain(chunks.iter().copied().map(Piece::Finite))
        .collect();
    let bytes = floats.iter().map(|(_, b)| b.len()).sum::<usize>()
        + scales.iter().map(|(_, b, _)| b.len()).sum::<usize>();
    let (done_first, found) = crate::parallel::map_reading_after(
        SCANS,
        &pieces,
        bytes,
        || (),
        |_, piece| match piece {
            Piece::Finite(c) => Found::Finite(checks::finite::read(floats, c)),
            Piece::Scale(i) => Found::Scale(
                scales
                    .get(*i)
                    .and_then(|(t, b, rule)| checks::scales::first_bad(*rule, t.dtype, b)),
            ),
        },
        first,
    );
    let found = found?;
    let (mut read, mut scanned) = (Vec::new(), Vec::new());
    for f in found {
        match f {
            Found::Finite(r) => read.push(r),
            Found::Scale(s) => scanned.push(s),
        }
    }
    Ok((
        done_first,
        checks::finite::gather(floats, &chunks, read),
        scanned,
    ))
}

/// The census of a folder's tensors: each with its role, as stored, shard by shard.
fn census<'t>(
    report: &mut Report,
    config: &DraftConfig,
    checkpoint: &'t Checkpoint,
    tensors: &[&'t TensorInfo],
    file_bytes: u64,
    sets: Option<&'t quantized::Sets<'_, 't>>,
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
    // The name of the role each tensor plays: a part of a quantized set plays its set's (spec
    // 17.1); `tensors` are the shards' entries in order, as the loop below walks them.
    let role_name = |i: usize, name: &'t str| -> &'t str {
        sets.and_then(|s| s.roles.get(i))
            .map_or(name, |r| r.as_ref())
    };
    let naming = config.family().naming(
        tensors
            .iter()
            .enumerate()
            .map(|(i, t)| role_name(i, &t.name)),
    );
    census.naming = Some(
        if naming.prefix.is_empty() {
            "bare"
        } else {
            "model."
        }
        .to_owned(),
    );
    census.tensors = Vec::with_capacity(tensors.len().min(MAX_CENSUS_TENSORS));
    for (i, (shard, e)) in headers
        .shards
        .iter()
        .flat_map(|(shard, table)| table.entries.iter().map(move |e| (shard, e)))
        .enumerate()
    {
        let mut form = if sharded {
            format!("{} {} in {shard}", e.dtype, e.shape_text())
        } else {
            format!("{} {}", e.dtype, e.shape_text())
        };
        // A quantized role's stored codes name the scheme, bits and grouping.
        if let Some(described) = sets.and_then(|s| s.codes(&e.name, e.dtype)) {
            form = format!("{form}, {described}");
        }
        let role = naming.role(role_name(i, &e.name));
        let t = TensorCensus::of(e, role, form, None);
        census.list(t);
    }
}
