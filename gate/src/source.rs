//! `source.*` (`--source DIR`, spec section 11): the package against the checkpoint it was converted
//! from, element by element. Sections 4 to 7 prove form; these prove content: a grid in the wrong tile
//! order, with swapped nibbles, a transposed scale plane, another layer's matrix, or an fc whose bytes
//! are plain row-major under a row-blocked shape, is well formed and fails here.
//!
//! Each package tensor is compared in the form the package checks proved for it (a q4_1 grid, taken
//! from the evaluation as they read it, or BF16), so whichever form a converter chose for a matrix is
//! compared as such.

mod bf16;
pub(crate) mod config;
pub mod gguf;
pub mod kernels;
mod origin;
mod q4_1;
pub(crate) mod values;

pub(crate) use origin::is_shard;
pub use origin::Source;

use crate::checkpoint::Checkpoint;
use crate::checks::Forms;
use crate::container::{Container, TensorInfo};
use crate::dtype::Dtype;
use crate::evaluation::Evaluation;
use crate::family::{source_name, Role, SCALAR_PREFIX};
use crate::parallel::WorkerPanic;
use crate::report::{Check, NotChecked, SourceGridCensus};
use crate::tile::TileGrid;
use values::Matrix;

pub const CONFIG: &str = config::ID;
pub const INVENTORY: &str = crate::check_id::CheckId::SOURCE_INVENTORY;
pub const BF16: &str = crate::check_id::CheckId::SOURCE_BF16;
pub const Q4_1: &str = crate::check_id::CheckId::SOURCE_Q4_1;
thread_local! {
    static SCALAR_SOURCE_LOOP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with `source.q4_1` taking its plain scalar loop instead of the vectorized paths, on
/// this thread (the outcome is the same: the bench times the difference, the suite holds them
/// equal). Not an option, since no caller of the gate has a reason to ask for it.
pub fn with_scalar_source_loop<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            SCALAR_SOURCE_LOOP.set(self.0);
        }
    }
    let _restore = Restore(SCALAR_SOURCE_LOOP.replace(true));
    f()
}

/// Whether this thread is inside [`with_scalar_source_loop`].
pub fn scalar_source_loop() -> bool {
    SCALAR_SOURCE_LOOP.get()
}

/// What `--source` answered.
pub struct Answer {
    /// Its checks, in report order.
    pub checks: Vec<Check>,
    /// The census of every compared grid.
    pub grids: Vec<SourceGridCensus>,
    /// The BF16 package tensors whose every value `source.bf16` read and found finite as it compared
    /// them (fc, a quarter of a package, when it equals its source): `bf16.finite`, run after
    /// `--source`, reads only the others, where it would read fc a second time.
    pub finite: Vec<String>,
}

impl Answer {
    /// Checks that compared no BF16 tensor (blocked or refused).
    fn only(checks: Vec<Check>) -> Answer {
        Answer {
            checks,
            grids: Vec::new(),
            finite: Vec::new(),
        }
    }
}

/// Every check `--source` adds, in report order.
pub const CHECKS: [&str; 4] = [CONFIG, INVENTORY, BF16, Q4_1];

/// What these `source.*` checks answered (provenance, whether the source and these files are the
/// publisher's, is never among it): the codes of real groups once `source.q4_1` decided
/// (passed or failed), the content once every comparison of weights decided. A comparison that
/// could not decide (blocked by an unreadable weight file, a tensor of a type the gate does not
/// dequantize) leaves its line: silence about what was not compared would read as approval.
pub fn answered(checks: &[Check]) -> Vec<NotChecked> {
    let decided = |id: &str| {
        checks
            .iter()
            .any(|c| c.id == id && c.outcome != crate::report::Outcome::Undecided)
    };
    let mut answered = Vec::new();
    if [INVENTORY, BF16, Q4_1].iter().all(|id| decided(id)) {
        answered.push(NotChecked::Content);
    }
    if decided(Q4_1) {
        answered.push(NotChecked::RealGroupCodes);
    }
    answered
}

/// The names a package tensor's source counterpart may have: its own name without `model.` first,
/// then every spelling its family gives the role (the assistant head's aliases, a codebook with and
/// without `.weight`), then each of those with the `model.` prefix that Hugging Face checkpoints of
/// the target's kind carry (spec section 11 names the bare spelling; the content comparison, not the
/// name, is what proves a pairing). A name no family explains is looked up as it is.
pub(crate) fn source_names(package_name: &str) -> Vec<String> {
    let bare = package_name.strip_prefix("model.").unwrap_or(package_name);
    let mut names = vec![bare.to_owned()];
    if let Some(s) = source_name(package_name) {
        names.extend(s.spellings.into_iter().filter(|n| n != bare));
    }
    let prefixed: Vec<String> = names.iter().map(|n| format!("model.{n}")).collect();
    names.extend(prefixed);
    names
}

fn is_fc(package_name: &str) -> bool {
    source_name(package_name).is_some_and(|s| s.role == Role::Fc)
}

/// How a package tensor is compared, from the form the package checks proved.
enum Form<'a> {
    Grid(TileGrid<'a>),
    Bf16(bf16::Layout),
    /// Neither a proven grid nor BF16: shapes are compared, elements are not.
    Other(String),
}

/// One package tensor and its source counterpart.
struct Pair<'a> {
    name: &'a str,
    info: &'a TensorInfo,
    form: Form<'a>,
    source: Matrix<'a>,
}

/// The package tensor's logical shape (rows x columns, or its length), and how it is compared.
fn form_of<'a>(info: &TensorInfo, forms: &Forms<'a>) -> (Vec<u64>, Form<'a>) {
    if let Some(grid) = forms.grids.get(&info.name) {
        let g = grid.geometry;
        return (vec![g.n, g.k], Form::Grid(*grid));
    }
    let form = || {
        forms.by_name.get(&info.name).map_or_else(
            || format!("{} {}", info.dtype, info.shape_text()),
            |(form, _)| form.clone(),
        )
    };
    if info.dtype != Dtype::Bf16 {
        return (info.shape.clone(), Form::Other(form()));
    }
    match info.shape.as_slice() {
        [blocks, cols, 32] if is_fc(&info.name) => (
            vec![blocks.saturating_mul(32), *cols],
            Form::Bf16(bf16::Layout::RowBlocked),
        ),
        _ => (info.shape.clone(), Form::Bf16(bf16::Layout::Plain)),
    }
}

/// `shape` without its trailing 1s (one dimension kept at least). ggml pads every shape with 1s to
/// four dimensions, and gguf-py and llama.cpp read `[768, 256, 1, 1]` as `[768, 256]` and a gain
/// `[256, 1]` as `[256]`; a safetensors writer may keep such a 1 too. The elements, in order, are
/// the same, so shapes are compared squeezed.
pub(crate) fn squeezed(shape: &[u64]) -> &[u64] {
    let keep = shape
        .iter()
        .rposition(|&d| d != 1)
        .map_or(1, |last| last + 1);
    &shape[..keep.min(shape.len())]
}

/// `[N, K]` as rows and columns; a 1-D tensor is one row; a higher-rank one (a DFlash2 base kernel
/// `[2, conv_kernel_size, hidden]`) is its leading dimensions' product of rows of its last.
fn rows_cols(shape: &[u64]) -> Option<(u64, u64)> {
    match shape {
        [n] => Some((1, *n)),
        [n, k] => Some((*n, *k)),
        [leading @ .., k] => {
            let rows = leading.iter().try_fold(1u64, |a, &d| a.checked_mul(d))?;
            Some((rows, *k))
        }
        [] => None,
    }
}

/// The `source.*` checks and the census of every compared grid, for an evaluation whose draft config
/// was recognised (for a refused one, none: there is nothing to compare it as). Blocked by
/// `container.parses` when the weight file was not read or did not parse. `scalar` runs the plain
/// comparison loop instead of the vectorized one (the bench's baseline; the outcome is the same).
pub fn checks(
    evaluation: &Evaluation<'_>,
    source: &Checkpoint,
    scalar: bool,
) -> Result<Answer, WorkerPanic> {
    let Ok(draft) = &evaluation.draft else {
        return Ok(Answer::only(refused()));
    };
    let mut checks = vec![config::compare(
        &draft.config.canonical,
        &source.headers.config,
    )];
    let Some(container) = &evaluation.container else {
        checks.extend(blocked_by_parses());
        return Ok(Answer::only(checks));
    };
    // Every lookup by name is indexed (the container's and the checkpoint's tables are searched by
    // binary search, the forms by hash): pairing is not quadratic in the tensors.
    let mut pairs = Vec::new();
    let mut claimed = std::collections::HashSet::new();
    let (mut missing, mut misshapen, mut other) = (Vec::new(), Vec::new(), Vec::new());
    for info in &container.table.entries {
        if info.name.starts_with(SCALAR_PREFIX) {
            continue;
        }
        let found = source_names(&info.name)
            .into_iter()
            .find_map(|n| source.tensor(&n).map(|t| (n, t)));
        let Some((source_name, (source_info, bytes))) = found else {
            missing.push(format!("{} has no source tensor", info.name));
            continue;
        };
        claimed.insert(source_name.clone());
        let (shape, form) = form_of(info, &evaluation.forms);
        let source_shape = squeezed(&source_info.shape);
        let dims = rows_cols(source_shape);
        if squeezed(&shape) != source_shape
            || !values::is_float(source_info.dtype)
            || dims.is_none()
        {
            misshapen.push(format!(
                "{} is {} in the package, source {source_name} is {} {}",
                info.name,
                crate::container::shape_text(&shape),
                source_info.dtype,
                source_info.shape_text()
            ));
            continue;
        }
        if let Form::Other(what) = &form {
            other.push(format!(
                "{} (neither a proven q4_1 grid nor BF16: {what})",
                info.name
            ));
        }
        let (rows, cols) = dims.unwrap_or_default();
        pairs.push(Pair {
            name: &info.name,
            info,
            form,
            source: Matrix {
                name: &source_info.name,
                dtype: source_info.dtype,
                rows,
                cols,
                bytes,
            },
        });
    }
    let mut extra: Vec<String> = source
        .headers
        .entries()
        .filter(|e| !claimed.contains(&e.name))
        .map(|e| {
            // Both spellings of one tensor in the source: which one a loader takes is not ours to guess.
            let twin = e
                .name
                .strip_prefix("model.")
                .map_or_else(|| format!("model.{}", e.name), str::to_owned);
            if claimed.contains(&twin) {
                format!(
                    "source tensor {} is a second spelling of {twin}, which was compared",
                    e.name
                )
            } else {
                format!("source tensor {} has no package counterpart", e.name)
            }
        })
        .collect();
    extra.sort();
    checks.push(inventory(pairs.len(), &missing, &extra, &misshapen));
    let (bf16, finite) = compare_bf16(container, &pairs, &other)?;
    checks.push(bf16);
    let (q4_1, grids) = compare_grids(&pairs, scalar)?;
    checks.push(q4_1);
    Ok(Answer {
        checks,
        grids,
        finite,
    })
}

/// The checks after `source.config`, when the weight file was not read or did not parse.
/// Every `source.*` check, blocked by a config that was refused: there is no draft to compare.
fn refused() -> Vec<Check> {
    crate::evaluation::refused_step(&CHECKS, "--source")
}

fn blocked_by_parses() -> impl Iterator<Item = Check> {
    CHECKS[1..].iter().map(|id| {
        Check::blocked(
            *id,
            crate::checks::PARSES,
            "the weight file was not read or did not parse",
        )
    })
}

pub(crate) fn inventory(
    paired: usize,
    missing: &[String],
    extra: &[String],
    misshapen: &[String],
) -> Check {
    let evidence = crate::evidence::SourceInventory {
        paired,
        missing: missing.to_vec(),
        extra: extra.to_vec(),
        misshapen: misshapen.to_vec(),
        unpaired: None,
    };
    let problems: Vec<&String> = missing.iter().chain(extra).chain(misshapen).collect();
    if problems.is_empty() {
        return Check::pass(
            INVENTORY,
            format!(
                "every one of the {paired} draft tensors has a source tensor of its logical shape, and every source tensor a draft counterpart"
            ),
        )
        .with_evidence(evidence);
    }
    Check::fail(
        INVENTORY,
        format!(
            "the package and its source do not hold the same tensors: {}",
            crate::checks::list(&problems, 6)
        ),
    )
    .with_evidence(evidence)
}

/// `source.bf16`, and the tensors it proved finite (see [`Answer::finite`]).
fn compare_bf16(
    container: &Container<'_>,
    pairs: &[Pair<'_>],
    other: &[String],
) -> Result<(Check, Vec<String>), WorkerPanic> {
    let jobs: Vec<bf16::Job<'_>> = pairs
        .iter()
        .filter_map(|p| match p.form {
            Form::Bf16(layout) => Some(bf16::Job {
                name: p.name,
                package: container.data(p.info),
                layout,
                source: p.source,
            }),
            _ => None,
        })
        .collect();
    let outcomes = bf16::compare(&jobs)?;
    let finite = jobs
        .iter()
        .zip(&outcomes)
        .filter(|(j, o)| o.proves_finite(j))
        .map(|(j, _)| j.name.to_owned())
        .collect();
    Ok((verdict_bf16(&jobs, &outcomes, other), finite))
}

fn verdict_bf16(jobs: &[bf16::Job<'_>], outcomes: &[bf16::Outcome], other: &[String]) -> Check {
    // A PASS covers only elements that were compared (see `compare_grids`).
    let short: Vec<String> = jobs
        .iter()
        .zip(outcomes)
        .filter(|(j, o)| o.compared != j.source.rows * j.source.cols)
        .map(|(j, o)| {
            format!(
                "{} ({} of its {} elements)",
                j.name,
                o.compared,
                j.source.rows * j.source.cols
            )
        })
        .collect();
    let differing: Vec<(&bf16::Job<'_>, &bf16::Outcome)> = jobs
        .iter()
        .zip(outcomes)
        .filter(|(_, o)| o.differing > 0)
        .collect();
    let evidence = crate::evidence::SourceBf16 {
        compared: jobs.iter().map(|j| j.name.to_owned()).collect(),
        differing: differing
            .iter()
            .map(|(j, o)| (j.name.to_owned(), o.differing))
            .collect(),
        not_compared: other.to_vec(),
    };
    if let Some((job, o)) = differing.first() {
        let (row, col, p, s) = o.first.unwrap_or_default();
        let fc = if job.layout == bf16::Layout::RowBlocked {
            " (read row-blocked)"
        } else {
            ""
        };
        let nan = if bf16::is_nan(p) || bf16::is_nan(s) {
            ", and a NaN equals nothing"
        } else {
            ""
        };
        return Check::fail(
            BF16,
            format!(
                "{}{fc} differs from source {} at row {row}, column {col}: package {}, source {}{nan} ({} of its elements differ; {} of {} BF16 tensors differ)",
                job.name,
                job.source.name,
                bf16::value(p),
                bf16::value(s),
                o.differing,
                differing.len(),
                jobs.len()
            ),
        )
        .with_evidence(evidence);
    }
    if !short.is_empty() {
        return Check::undecided(
            BF16,
            format!(
                "cannot decide: not every element of {} of the BF16 tensors was compared with its source: {}",
                short.len(),
                crate::checks::list(&short, 4)
            ),
        )
        .with_evidence(evidence);
    }
    if !other.is_empty() {
        return Check::undecided(
            BF16,
            format!(
                "cannot decide: not compared element by element: {}",
                crate::checks::list(other, 4)
            ),
        )
        .with_evidence(evidence);
    }
    if jobs.is_empty() {
        return Check::undecided(
            BF16,
            "cannot decide: no BF16 tensor was paired with a source tensor",
        )
        .with_evidence(evidence);
    }
    let rounded = jobs
        .iter()
        .filter(|j| j.source.dtype != crate::dtype::Dtype::Bf16)
        .count();
    let rounded = match rounded {
        0 => String::new(),
        n => format!(" ({n} of them from an F16 or F32 source, rounded to bf16 nearest-even)"),
    };
    Check::pass(
        BF16,
        format!(
            "every one of the {} BF16 tensors paired with a source tensor equals it bit for bit{rounded}",
            jobs.len()
        ),
    )
    .with_evidence(evidence)
}

/// The largest relative RMS error a faithful grid may have. A 4-bit grid quantized from its source has
/// about 0.07 to 0.09, whichever quantizer chose its codes (ggml's min/max or importance-matrix path,
/// measured); a grid in the wrong order, from other weights or with codes and ranges that are not this
/// source's has 0.25 and more (spec section 11). The per-element bound cannot see one failure this does:
/// ranges that are all too narrow. It measures each element against its source value clamped to its
/// group's range, the allowance for a quantizer that clips outliers, so a clipped value only has to sit
/// at its range's end: a converter that halved every range (relative RMS 0.35), or shrank them to
/// nothing (1.0), kept every element within a step. A bound on how far outside its range a value may
/// lie would refuse ggml's importance-matrix quantizer, which leaves low-importance values many steps
/// outside (measured up to 20 steps with realistic importance spreads); this ceiling does not.
pub const RMS_CEILING: f64 = 0.25;

/// Whether a grid's relative RMS error is at most [`RMS_CEILING`], written so that a NaN (sums that
/// are not numbers) is not: no finite input makes one, so a NaN is a failure, never a pass.
pub fn within_ceiling(relative_rms: f64) -> bool {
    relative_rms <= RMS_CEILING
}

fn compare_grids(
    pairs: &[Pair<'_>],
    scalar: bool,
) -> Result<(Check, Vec<SourceGridCensus>), WorkerPanic> {
    Ok(grid_verdict(&compare_grid_pairs(pairs, scalar)?))
}

/// What the verdict of `source.q4_1` needs of one compared grid, kept past the source bytes it was
/// compared with: a GGUF's dequantized tensors are compared a batch at a time, each batch's
/// buffers freed before the next is made.
struct Compared {
    name: String,
    source: String,
    /// The grid's real elements (N x K): what a complete comparison counts.
    elements: u64,
    outcome: q4_1::Outcome,
}

/// Compares the grids among `pairs` with their sources.
fn compare_grid_pairs(pairs: &[Pair<'_>], scalar: bool) -> Result<Vec<Compared>, WorkerPanic> {
    // Each grid is compared as the package checks read it (the evaluation's own `TileGrid`), so there
    // is no second proof here that could disagree with theirs.
    let jobs: Vec<q4_1::Job<'_>> = pairs
        .iter()
        .filter_map(|p| match p.form {
            Form::Grid(grid) => Some(q4_1::Job {
                name: p.name,
                grid,
                source: p.source,
            }),
            _ => None,
        })
        .collect();
    let outcomes = q4_1::compare(&jobs, scalar)?;
    Ok(jobs
        .iter()
        .zip(outcomes)
        .map(|(j, outcome)| Compared {
            name: j.name.to_owned(),
            source: j.source.name.to_owned(),
            elements: j.grid.geometry.n * j.grid.geometry.k,
            outcome,
        })
        .collect())
}

/// `source.q4_1` and the census of every grid compared with a bound.
fn grid_verdict(compared: &[Compared]) -> (Check, Vec<SourceGridCensus>) {
    let pairs = || compared.iter().map(|c| (c, &c.outcome));
    let census: Vec<SourceGridCensus> = pairs()
        .map(|(j, o)| SourceGridCensus {
            name: j.name.clone(),
            elements: o.elements,
            max_error_steps: o.stats.max_steps,
            relative_rms: o.relative_rms(),
            out_of_bound: o.stats.out,
            comparison: crate::report::Comparison::Bounded,
            groups_compared: o.elements / kernels::GROUP as u64,
            groups_differing: None,
        })
        .collect();
    let evidence = crate::evidence::SourceQ41 {
        max_error_steps: census
            .iter()
            .map(|g| (g.name.clone(), f64::from(g.max_error_steps)))
            .collect(),
        relative_rms: census
            .iter()
            .map(|g| (g.name.clone(), g.relative_rms))
            .collect(),
        out_of_bound: census
            .iter()
            .map(|g| (g.name.clone(), g.out_of_bound))
            .collect(),
        exact: None,
        undecided: None,
    };
    let worst_steps = census
        .iter()
        .map(|g| g.max_error_steps)
        .fold(0f32, f32::max);
    let worst_rms = census.iter().map(|g| g.relative_rms).fold(0f64, f64::max);
    // A grid with broken headers is not judged here: tiles.headers_sane fails it, and what its codes
    // mean is undefined, so neither a PASS nor a FAIL on its content is drawn from the rest of it.
    let broken: Vec<String> = pairs()
        .filter(|(_, o)| o.broken_groups > 0)
        .map(|(j, o)| format!("{} ({} groups)", j.name, o.broken_groups))
        .collect();
    let failing: Vec<(&Compared, &q4_1::Outcome)> = pairs()
        .filter(|(_, o)| {
            o.broken_groups == 0 && (o.stats.out > 0 || !within_ceiling(o.relative_rms()))
        })
        .collect();
    let not_compared = match broken.len() {
        0 => String::new(),
        n => format!("; {n} more not compared: broken tile headers"),
    };
    // A PASS covers only elements that were compared: a grid of which fewer than every real
    // element was (a tile the comparison could not read) is not vouched for by the rest of it.
    let short: Vec<String> = pairs()
        .filter(|(j, o)| o.broken_groups == 0 && o.elements != j.elements)
        .map(|(j, o)| format!("{} ({} of its {} elements)", j.name, o.elements, j.elements))
        .collect();
    let check = if let Some((job, o)) = failing.first() {
        let how = if o.stats.out > 0 {
            let first = o.first.as_ref().map_or_else(String::new, |f| f.describe());
            format!(
                "{} of {} elements are more than one step from their source value clamped to the group's range (largest error, unclamped, {:.2} steps; relative RMS {:.3}); first at {first}",
                o.stats.out,
                o.elements,
                o.stats.max_steps,
                o.relative_rms(),
            )
        } else {
            format!(
                "its relative RMS error is {:.3}, above the {RMS_CEILING} no faithful 4-bit grid reaches (about 0.08): every element is within a step of its source value clamped to its group's range, but the ranges or codes are not this source's (largest error, unclamped, {:.2} steps)",
                o.relative_rms(),
                o.stats.max_steps,
            )
        };
        Check::fail(
            Q4_1,
            format!(
                "{} is not a faithful quantization of source {}: {how}; {} of {} grids fail{not_compared}",
                job.name,
                job.source,
                failing.len(),
                compared.len()
            ),
        )
    } else if !short.is_empty() {
        Check::undecided(
            Q4_1,
            format!(
                "cannot decide: not every real element of {} of the grids was compared with its source: {}",
                short.len(),
                crate::checks::list(&short, 4)
            ),
        )
    } else if !broken.is_empty() {
        Check::blocked(
            Q4_1,
            crate::checks::HEADERS,
            format!(
                "cannot decide: {} of {} grids have broken tile headers (tiles.headers_sane), so they were not compared with their source: {}; the other {} are faithful quantizations of theirs",
                broken.len(),
                compared.len(),
                crate::checks::list(&broken, 4),
                compared.len() - broken.len()
            ),
        )
    } else if compared.is_empty() {
        Check::undecided(
            Q4_1,
            "cannot decide: no q4_1 grid was paired with a source matrix",
        )
    } else {
        let elements: u64 = pairs().map(|(_, o)| o.elements).sum();
        Check::pass(
            Q4_1,
            format!(
                "every one of the {} grids paired with a source matrix is a faithful quantization of it: {elements} elements within one step of their source value clamped to the group's range (largest error, unclamped, {worst_steps:.2} steps; worst relative RMS {worst_rms:.3}, at most {RMS_CEILING})",
                compared.len()
            ),
        )
    };
    (check.with_evidence(evidence), census)
}

#[cfg(test)]
mod tests {
    use super::{scalar_source_loop, with_scalar_source_loop};

    /// The switch holds inside the call only, on its thread only, and is put back even by a panic.
    #[test]
    fn the_scalar_loop_is_on_inside_the_call_only() {
        assert!(!scalar_source_loop());
        assert!(with_scalar_source_loop(scalar_source_loop));
        assert!(!with_scalar_source_loop(|| std::thread::spawn(
            scalar_source_loop
        )
        .join()
        .expect("thread")));
        let _ = std::panic::catch_unwind(|| with_scalar_source_loop(|| panic!("inside")));
        assert!(!scalar_source_loop());
    }
}
