//! `source.*` against the GGUF a package was converted from (`--source FILE.gguf`, spec section 12).
//!
//! FastFlowLM's converter copies a Q4_1 tensor's blocks into tiles (codes unchanged, `d` and `m`
//! rounded from f16 to bf16), stores F32, F16 and BF16 tensors as bf16, and dequantizes any other
//! type and quantizes it again. So a Q4_1 tensor's grid is compared exactly ([`exact`]); a grid from
//! another type is held to section 11's bound against the GGUF's values dequantized as ggml does and
//! rounded to bf16 (the checkpoint comparison's own code, fed those values); a BF16 package tensor
//! equals its GGUF tensor rounded to bf16, bit for bit (the checkpoint comparison's too). A type the
//! gate cannot dequantize leaves its tensor, and the check, undecided: never a pass.

pub(crate) mod config;
pub mod exact;
pub use crate::family::gguf_names as names;

use super::values::Matrix;
use super::{form_of, rows_cols, source_names, Form, Pair};
use crate::container::shape_text;
use crate::dtype::{f32_to_bf16, Dtype};
use crate::escape::escape;
use crate::evaluation::Evaluation;
use crate::evidence::{Evidence, ExactGrid, SourceQ41};
use crate::family::{source_name, SCALAR_PREFIX};
use crate::gguf::{GgmlType, Gguf, TensorInfo as GgufInfo};
use crate::parallel::{self, WorkerPanic};
use crate::report::{Check, SourceGridCensus};
use names::Spelling;
use std::collections::{BTreeMap, HashMap, HashSet};

/// The GGUF's tensors by the package's bare name, in the file's one spelling.
struct Index<'g> {
    by_bare: HashMap<String, usize>,
    spelling: Option<Spelling>,
    /// GGUF tensors left out of the index, and why (a second spelling of one already in it).
    refused: Vec<(&'g str, String)>,
}

impl<'g> Index<'g> {
    fn new(tensors: &'g [GgufInfo]) -> Index<'g> {
        let mut index = Index {
            by_bare: HashMap::new(),
            spelling: None,
            refused: Vec::new(),
        };
        for (i, t) in tensors.iter().enumerate() {
            let (bare, spelling) = names::to_package(&t.name);
            // A checkpoint-style name is a spelling only when it names a role: an unknown name says
            // nothing about the file's spelling (it is unpaired, and named as such).
            let spelling =
                spelling.filter(|s| *s == Spelling::Llama || source_name(&bare).is_some());
            match (spelling, index.spelling) {
                (Some(s), None) => index.spelling = Some(s),
                (Some(s), Some(file)) if s != file => {
                    index.refused.push((
                        &t.name,
                        format!(
                            "GGUF tensor {} is in {}, the file's others in {}: one spelling per file",
                            escape(&t.name),
                            s.describe(),
                            file.describe()
                        ),
                    ));
                    continue;
                }
                _ => {}
            }
            if let Some(&other) = index.by_bare.get(&bare) {
                index.refused.push((
                    &t.name,
                    format!(
                        "GGUF tensor {} is a second spelling of {}",
                        escape(&t.name),
                        escape(&tensors[other].name)
                    ),
                ));
                continue;
            }
            index.by_bare.insert(bare, i);
        }
        index
    }
}

/// Rows first, as the package states shapes (ggml's dimensions are ne0 first), without the trailing 1s ggml pads `ne` with (`ne = [768, 256, 1, 1]` is 256 rows of
/// 768), as gguf-py and llama.cpp read the shape.
fn logical(info: &GgufInfo) -> Vec<u64> {
    super::squeezed(&info.dims).iter().rev().copied().collect()
}

/// How one paired tensor is compared.
enum Plan<'a> {
    /// A grid against a Q4_1 tensor: block for group.
    Exact(exact::Job<'a>),
    /// Against the GGUF's own bytes (F32, F16, BF16: what [`Matrix`] reads).
    Direct(Pair<'a>),
    /// Against the GGUF's values dequantized and rounded to bf16 (made before the comparison).
    Dequantized {
        name: &'a str,
        info: &'a crate::container::TensorInfo,
        form: Form<'a>,
        gguf: &'a GgufInfo,
        bytes: &'a [u8],
        rows: u64,
        cols: u64,
    },
}

fn dtype_of(ty: GgmlType) -> Option<Dtype> {
    match ty {
        GgmlType::F32 => Some(Dtype::F32),
        GgmlType::F16 => Some(Dtype::F16),
        GgmlType::BF16 => Some(Dtype::Bf16),
        _ => None,
    }
}

/// Blocks dequantized at a time: a worker's buffer, not a tensor's.
const DEQUANTIZE_VALUES: usize = 8192;

/// A tensor's values dequantized as ggml does and rounded to bf16 (nearest-even), as little-endian
/// bf16 bytes; `None` if the reader's dequantization refused them (it does not for a supported type
/// whose size the reader checked).
fn to_bf16(ty: GgmlType, bytes: &[u8], values: &mut Vec<f32>) -> Option<Vec<u8>> {
    let (size, block) = (ty.type_size() as usize, ty.block_size() as usize);
    let per_chunk = (DEQUANTIZE_VALUES / block).max(1) * size;
    let mut out = Vec::with_capacity(bytes.len() / size * block * 2);
    for chunk in bytes.chunks(per_chunk) {
        values.resize(chunk.len() / size * block, 0.0);
        crate::gguf::dequantize(ty, chunk, values).ok()?;
        out.extend(values.iter().flat_map(|&v| f32_to_bf16(v).to_le_bytes()));
    }
    Some(out)
}

/// How many bytes of dequantized grids are held at once (a tensor larger than this is a batch of
/// its own); a batch also holds at most two tensors per core.
const DEQUANTIZED_BATCH_BYTES: u64 = 32 << 20;

/// The dequantized plans' GGUF values rounded to bf16, one tensor per item on every core (`None`
/// for one that did not dequantize).
fn dequantize(plans: &[Plan<'_>]) -> Result<Vec<Option<Vec<u8>>>, WorkerPanic> {
    let wanted: Vec<(GgmlType, &[u8])> = plans
        .iter()
        .filter_map(|p| match p {
            Plan::Dequantized { gguf, bytes, .. } => Some((gguf.ty, *bytes)),
            _ => None,
        })
        .collect();
    parallel::map(super::Q4_1, &wanted, Vec::new, |values, &(ty, bytes)| {
        to_bf16(ty, bytes, values)
    })
}

/// Each dequantized plan paired with its buffer, in order; one that did not dequantize is left
/// undecided, named.
fn made_pairs<'a>(
    plans: Vec<Plan<'a>>,
    buffers: &'a [Option<Vec<u8>>],
    undecided: &mut Vec<(String, String)>,
) -> Vec<Pair<'a>> {
    let mut pairs = Vec::new();
    for (plan, buffer) in plans.into_iter().zip(buffers) {
        let Plan::Dequantized {
            name,
            info,
            form,
            gguf: g,
            rows,
            cols,
            ..
        } = plan
        else {
            continue;
        };
        match buffer {
            Some(bytes) => pairs.push(Pair {
                name,
                info,
                form,
                source: Matrix {
                    name: &g.name,
                    dtype: Dtype::Bf16,
                    rows,
                    cols,
                    bytes,
                },
            }),
            None => undecided.push((
                name.to_owned(),
                format!(
                    "{name} (GGUF {} of type {} did not dequantize)",
                    escape(&g.name),
                    g.ty
                ),
            )),
        }
    }
    pairs
}

/// The `source.*` checks against a GGUF, and the census of every compared grid.
pub fn checks(
    evaluation: &Evaluation<'_>,
    gguf: &Gguf,
    scalar: bool,
) -> Result<super::Answer, WorkerPanic> {
    let Ok(draft) = &evaluation.draft else {
        return Ok(super::Answer::only(super::refused()));
    };
    let mut checks = vec![config::compare(
        &draft.config,
        &gguf.header,
        "package config",
    )];
    let Some(container) = &evaluation.container else {
        checks.extend(super::blocked_by_parses());
        return Ok(super::Answer::only(checks));
    };
    let tensors = &gguf.header.tensors;
    let index = Index::new(tensors);
    let mut claimed = HashSet::new();
    let (mut missing, mut misshapen) = (Vec::new(), Vec::new());
    let (mut other, mut undecided) = (Vec::new(), Vec::new());
    let mut plans = Vec::new();
    for info in &container.table.entries {
        if info.name.starts_with(SCALAR_PREFIX) {
            continue;
        }
        let found = source_names(&info.name)
            .into_iter()
            .find_map(|n| index.by_bare.get(&n).copied());
        // DFlash2's tensors are paired by llama.cpp's names as every other tensor is (spec 18.3:
        // `blk.{i}.attn_conv_base`, `selector_predecessor.weight`, ...), so one the GGUF lacks is
        // missing: a DFlash2 GGUF holds them.
        let Some(i) = found else {
            let bare = info.name.strip_prefix("model.").unwrap_or(&info.name);
            let expected = match (index.spelling, names::to_llama(bare)) {
                (Some(Spelling::Llama) | None, Some(llama)) => {
                    format!(" (llama.cpp's name: {llama})")
                }
                _ => String::new(),
            };
            missing.push(format!("{} has no GGUF tensor{expected}", info.name));
            continue;
        };
        claimed.insert(i);
        let g = &tensors[i];
        let (shape, form) = form_of(info, &evaluation.forms);
        let rows_first = logical(g);
        let Some((rows, cols)) =
            rows_cols(&rows_first).filter(|_| super::squeezed(&shape) == rows_first)
        else {
            misshapen.push(format!(
                "{} is {} in the package, GGUF {} is {} {} (ne0 first, so {} rows first)",
                info.name,
                shape_text(&shape),
                escape(&g.name),
                g.ty,
                shape_text(&g.dims),
                shape_text(&rows_first)
            ));
            continue;
        };
        let Some(bytes) = gguf.data(g) else {
            misshapen.push(format!("GGUF {} has no data in the file", escape(&g.name)));
            continue;
        };
        let direct = |form, dtype| {
            Plan::Direct(Pair {
                name: &info.name,
                info,
                form,
                source: Matrix {
                    name: &g.name,
                    dtype,
                    rows,
                    cols,
                    bytes,
                },
            })
        };
        let supported = crate::gguf::supported(g.ty);
        match form {
            Form::Grid(grid) if g.ty == GgmlType::Q4_1 => plans.push(Plan::Exact(exact::Job {
                name: &info.name,
                gguf_name: &g.name,
                grid,
                blocks: bytes,
            })),
            Form::Grid(_) if g.ty == GgmlType::BF16 => plans.push(direct(form, Dtype::Bf16)),
            Form::Bf16(_) if dtype_of(g.ty).is_some() => {
                plans.push(direct(form, dtype_of(g.ty).unwrap_or(Dtype::Bf16)))
            }
            Form::Grid(_) | Form::Bf16(_) if supported => plans.push(Plan::Dequantized {
                name: &info.name,
                info,
                form,
                gguf: g,
                bytes,
                rows,
                cols,
            }),
            Form::Grid(_) => undecided.push((
                info.name.clone(),
                format!(
                    "{} (GGUF {} is {}, which the gate does not dequantize)",
                    info.name,
                    escape(&g.name),
                    g.ty
                ),
            )),
            Form::Bf16(_) => other.push(format!(
                "{} (GGUF {} is {}, which the gate does not dequantize)",
                info.name,
                escape(&g.name),
                g.ty
            )),
            Form::Other(what) => other.push(format!(
                "{} (neither a proven q4_1 grid nor BF16: {what})",
                info.name
            )),
        }
    }
    let mut extra: Vec<String> = index.refused.iter().map(|(_, why)| why.clone()).collect();
    let refused: HashSet<&str> = index.refused.iter().map(|(n, _)| *n).collect();
    let mut strangers = Vec::new();
    for (i, t) in tensors.iter().enumerate() {
        if !claimed.contains(&i) && !refused.contains(t.name.as_str()) {
            strangers.push(escape(&t.name).into_owned());
        }
    }
    extra.extend(
        strangers
            .iter()
            .map(|n| format!("GGUF tensor {n} has no package counterpart")),
    );
    extra.sort();
    // Tensors of other types are dequantized and rounded to bf16 first, one tensor per item on
    // every core: the BF16 ones (gains, fc) at once, the grids' a batch at a time, each batch
    // compared and its buffers freed before the next is made, so the heap holds at most
    // DEQUANTIZED_BATCH_BYTES of them (or the largest one) however many there are.
    let (mut pairs, mut jobs, mut grids) = (Vec::new(), Vec::new(), Vec::new());
    let mut dequantized = Vec::new();
    for plan in plans {
        match plan {
            Plan::Exact(job) => jobs.push(job),
            Plan::Direct(pair) => pairs.push(pair),
            Plan::Dequantized { ref form, .. } if matches!(form, Form::Grid(_)) => grids.push(plan),
            plan @ Plan::Dequantized { .. } => dequantized.push(plan),
        }
    }
    let buffers = dequantize(&dequantized)?;
    pairs.extend(made_pairs(dequantized, &buffers, &mut undecided));
    // Every package tensor paired with a GGUF tensor it was compared with (a grid's when its
    // batch is made, below).
    let mut paired = pairs.len() + jobs.len();
    let mut compared = Vec::new();
    let mut batch = Vec::new();
    let mut batch_bytes = 0u64;
    // Enough tensors in a batch for every core to dequantize one, twice over.
    let batch_tensors = 2 * crate::parallel::cores();
    let mut grids = grids.into_iter().peekable();
    while let Some(plan) = grids.next() {
        if let Plan::Dequantized { rows, cols, .. } = plan {
            batch_bytes = batch_bytes.saturating_add(rows.saturating_mul(cols).saturating_mul(2));
        }
        batch.push(plan);
        let full = batch.len() >= batch_tensors
            || grids.peek().is_none_or(|next| match next {
                Plan::Dequantized { rows, cols, .. } => {
                    batch_bytes.saturating_add(rows.saturating_mul(*cols).saturating_mul(2))
                        > DEQUANTIZED_BATCH_BYTES
                }
                _ => false,
            });
        if full {
            let plans = std::mem::take(&mut batch);
            let buffers = dequantize(&plans)?;
            let made = made_pairs(plans, &buffers, &mut undecided);
            paired += made.len();
            compared.extend(super::compare_grid_pairs(&made, scalar)?);
            batch_bytes = 0;
        }
    }
    checks.push(inventory(paired, &missing, &extra, &misshapen));
    let (bf16, finite) = super::compare_bf16(container, &pairs, &other)?;
    checks.push(bf16);
    let bound = (!compared.is_empty()).then(|| super::grid_verdict(&compared));
    let outcomes = exact::compare(&jobs)?;
    let (q4_1, census) = q4_1(&jobs, &outcomes, bound, &undecided);
    checks.push(q4_1);
    Ok(super::Answer {
        checks,
        grids: census,
        finite,
    })
}

fn inventory(paired: usize, missing: &[String], extra: &[String], misshapen: &[String]) -> Check {
    let evidence = crate::evidence::SourceInventory {
        paired,
        missing: missing.to_vec(),
        extra: extra.to_vec(),
        misshapen: misshapen.to_vec(),
        // Every tensor is paired by its name now, DFlash2's by llama.cpp's: none is left unpaired
        // (the field stays, empty, within schema 3).
        unpaired: Some(Vec::new()),
    };
    let id = super::INVENTORY;
    let problems: Vec<&String> = missing.iter().chain(extra).chain(misshapen).collect();
    if !problems.is_empty() {
        return Check::fail(
            id,
            format!(
                "the package and its GGUF do not hold the same tensors: {}",
                crate::checks::list(&problems, 6)
            ),
        )
        .with_evidence(evidence);
    }
    Check::pass(
        id,
        format!(
            "every one of the {paired} package tensors has a GGUF tensor of its logical shape (ne0 first read rows first), and every GGUF tensor a package counterpart"
        ),
    )
    .with_evidence(evidence)
}

/// `source.q4_1` from the exact comparisons, the bounded one (if any grid came from another type),
/// and the grids left undecided; with the census of every grid compared.
fn q4_1(
    jobs: &[exact::Job<'_>],
    outcomes: &[exact::Outcome],
    bound: Option<(Check, Vec<SourceGridCensus>)>,
    undecided: &[(String, String)],
) -> (Check, Vec<SourceGridCensus>) {
    let mut census: Vec<SourceGridCensus> = jobs
        .iter()
        .zip(outcomes)
        .map(|(j, o)| SourceGridCensus {
            name: j.name.to_owned(),
            elements: o.groups * 32,
            max_error_steps: f32::NAN,
            relative_rms: f64::NAN,
            out_of_bound: 0,
            comparison: crate::report::Comparison::Exact,
            groups_compared: o.groups,
            groups_differing: Some(o.differing),
        })
        .collect();
    let exact_evidence: BTreeMap<String, ExactGrid> = jobs
        .iter()
        .zip(outcomes)
        .map(|(j, o)| {
            (
                j.name.to_owned(),
                ExactGrid {
                    gguf: escape(j.gguf_name).into_owned(),
                    groups_compared: o.groups,
                    groups_differing: o.differing,
                    first: o.first.as_ref().map(|d| d.evidence(j.grid.geometry.k / 32)),
                },
            )
        })
        .collect();
    let (bound_check, bound_census) = match bound {
        Some((check, c)) => (Some(check), c),
        None => (None, Vec::new()),
    };
    census.extend(bound_census);
    // The bounded grids' figures, from the bounded comparison's own evidence, with the exact grids
    // and the undecided ones beside them.
    let mut evidence = match bound_check.as_ref().and_then(Check::evidence) {
        Some(Evidence::SourceQ41(e)) => e.clone(),
        _ => SourceQ41 {
            max_error_steps: BTreeMap::new(),
            relative_rms: BTreeMap::new(),
            out_of_bound: BTreeMap::new(),
            exact: None,
            undecided: None,
        },
    };
    evidence.exact = Some(exact_evidence);
    // The grids by name; why each was not compared is the message's.
    evidence.undecided = Some(undecided.iter().map(|(name, _)| name.clone()).collect());
    let id = super::Q4_1;
    let failing: Vec<(&exact::Job<'_>, &exact::Outcome)> = jobs
        .iter()
        .zip(outcomes)
        .filter(|(_, o)| o.differing > 0)
        .collect();
    let groups: u64 = outcomes.iter().map(|o| o.groups).sum();
    let bound_failed = bound_check
        .as_ref()
        .filter(|c| c.outcome == crate::report::Outcome::Fail);
    // A PASS covers only groups that were compared: a grid of which fewer than every real group
    // was (a tile the comparison could not read) is not vouched for by the rest of it.
    let short: Vec<String> = jobs
        .iter()
        .zip(outcomes)
        .filter(|(j, o)| o.groups != j.grid.geometry.real_groups())
        .map(|(j, o)| {
            format!(
                "{} ({} of its {} real groups)",
                j.name,
                o.groups,
                j.grid.geometry.real_groups()
            )
        })
        .collect();
    let check = if let Some((job, o)) = failing.first() {
        let also = bound_failed.map_or_else(String::new, |c| format!("; and {}", c.message));
        Check::fail(
            id,
            format!(
                "{} is not GGUF tensor {}'s Q4_1 blocks re-laid: first at {}; {} of its {} groups differ; {} of {} grids from Q4_1 tensors differ{also}",
                job.name,
                escape(job.gguf_name),
                o.first.as_ref().map_or_else(String::new, exact::Difference::describe),
                o.differing,
                o.groups,
                failing.len(),
                jobs.len()
            ),
        )
    } else if !short.is_empty() {
        Check::undecided(
            id,
            format!(
                "cannot decide: not every real group of {} of the grids was compared with its GGUF block: {}",
                short.len(),
                crate::checks::list(&short, 4)
            ),
        )
    } else if let Some(c) = bound_failed {
        c.clone()
    } else if !undecided.is_empty() {
        Check::undecided(
            id,
            format!(
                "cannot decide: {} {} not compared, their GGUF tensors of a type the gate cannot dequantize (K-quants, IQ types, MXFP4): {}",
                undecided.len(),
                if undecided.len() == 1 { "grid" } else { "grids" },
                crate::checks::list(&undecided.iter().map(|(_, why)| why).collect::<Vec<_>>(), 4)
            ),
        )
    } else if let Some(c) = bound_check.filter(|c| c.outcome != crate::report::Outcome::Pass) {
        c
    } else if census.is_empty() {
        Check::undecided(
            id,
            "cannot decide: no q4_1 grid was paired with a GGUF tensor",
        )
    } else {
        let bounded = census.len() - jobs.len();
        let faithful = format!("dequantized and rounded to bf16, each a faithful quantization of them (every element within one step of its value clamped to the group's range, relative RMS at most {})", super::RMS_CEILING);
        let message = match (jobs.len(), bounded) {
            (0, n) => format!("every one of the {n} grids, from GGUF tensors of other types than Q4_1, {faithful}"),
            (exact, 0) => format!("every one of the {exact} grids from Q4_1 GGUF tensors is their blocks re-laid exactly: {groups} groups, codes equal, scales and minimums the f16 values rounded to bf16 nearest-even"),
            (exact, n) => format!("every one of the {exact} grids from Q4_1 GGUF tensors is their blocks re-laid exactly: {groups} groups, codes equal, scales and minimums the f16 values rounded to bf16 nearest-even; {n} from GGUF tensors of other types, {faithful}"),
        };
        Check::pass(id, message)
    };
    (check.with_evidence(evidence), census)
}
