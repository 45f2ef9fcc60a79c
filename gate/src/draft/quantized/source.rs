//! `--source DIR` against a quantized folder (spec 17.2): the bf16 folder it was quantized from,
//! tensor by tensor, with the ids `--source` uses elsewhere.
//!
//! - `source.config`: the two configs' compared fields agree (the quantized one's
//!   `quantization_config` is its own).
//! - `source.inventory`: every role the draft stores (a quantized set as its `X.weight`, of the
//!   logical `[N, K]`) has a source tensor of its shape, and every source tensor a role here.
//! - `source.bf16`: a tensor left dense equals its source rounded to its type, bit for bit.
//! - `source.q4_1`: a quantized set, dequantized as its library does (compressed-tensors:
//!   `scale * (q - zero)`; FP8: `scale * e4m3`; NVFP4: the E4M3 group scale times the global one
//!   times `e2m1`; MLX: `scale * q + bias`, or a power-of-two or E4M3 scale times the codes), holds
//!   every element within one step of its source value clamped to its group's range, plus the
//!   rounding of the scale's and the value's own types. Not the spec's half step: the libraries'
//!   own files land up to 0.57 steps (compressed-tensors, asymmetric: its zero point is rounded) and
//!   1.04 steps (MLX affine: it refits each group's scale so one end is exact) from their source,
//!   and a gate that refused them would be wrong. A tensor quantized from another tensor's weights
//!   lands many steps off almost everywhere, and is named.

use super::sets::Part;
use super::Sets;
use crate::checkpoint::Checkpoint;
use crate::config::DraftConfig;
use crate::container::TensorInfo;
use crate::dtype::{e4m3_to_f32 as e4m3, Dtype};
use crate::escape::escape;
use crate::evidence::{SourceBf16, SourceInventory, SourceQ41};
use crate::parallel::{self, WorkerPanic};
use crate::quant::{Fp8Scale, MlxMode, Scheme, Storage, Writer};
use crate::report::Check;
use crate::source::{values, BF16, INVENTORY, Q4_1};
use std::collections::{BTreeMap, HashMap};

/// A quantized set and its source: the work of one worker.
struct Job<'a> {
    module: &'a str,
    storage: Storage,
    n: usize,
    k: usize,
    source: (&'a TensorInfo, &'a [u8]),
    parts: HashMap<&'static str, &'a [u8]>,
    dtypes: HashMap<&'static str, Dtype>,
}

/// What one set's comparison found.
struct Found {
    module: String,
    worst_steps: f64,
    sq_err: f64,
    sq_src: f64,
    out_of_bound: u64,
    /// The first element beyond its bound, said.
    first: Option<String>,
}

/// The four `source.*` checks of a quantized folder against `source`, its quantized sets compared
/// on every core; a worker that panicked is an error, never a check over the others.
pub fn checks(
    config: &DraftConfig,
    scheme: &Scheme,
    draft: &Checkpoint,
    source: &Checkpoint,
) -> Result<Vec<Check>, WorkerPanic> {
    let config_check = crate::source::config::compare(&config.canonical, &source.headers.config);
    let tensors: Vec<&TensorInfo> = draft.headers.entries().collect();
    let sets = Sets::new(scheme, &tensors);
    let by_name: HashMap<&str, &TensorInfo> =
        tensors.iter().map(|t| (t.name.as_str(), *t)).collect();
    let (mut jobs, mut dense) = (Vec::new(), Vec::new());
    let (mut missing, mut misshapen, mut paired) = (Vec::new(), Vec::new(), Vec::new());
    for t in &tensors {
        let set = sets.primary_of(&t.name);
        if set.is_none() && sets.set_of(&t.name).is_some() {
            continue;
        }
        let role = match set {
            Some((m, _)) => format!("{m}.weight"),
            None => t.name.clone(),
        };
        let Some(found) = crate::source::source_names(&role)
            .into_iter()
            .find_map(|n| source.tensor(&n))
        else {
            missing.push(role);
            continue;
        };
        paired.push(found.0.name.clone());
        let Some((module, (storage, ..))) = set else {
            if found.0.shape != t.shape {
                misshapen.push(format!(
                    "{role} {} against {}",
                    t.shape_text(),
                    found.0.shape_text()
                ));
            } else if let Some(bytes) = draft.tensor(&t.name) {
                dense.push((*t, bytes.1, found));
            }
            continue;
        };
        let part = |s: &str| by_name.get(format!("{module}{s}").as_str()).copied();
        // The set was read by the inventory; one it refused is its FAIL, not compared here.
        let Ok(shape) = super::sets::read(storage, draft, &part as Part<'_, '_>, module, t) else {
            continue;
        };
        if found.0.shape != shape {
            misshapen.push(format!(
                "{role} [{}, {}] against {}",
                shape[0],
                shape[1],
                found.0.shape_text()
            ));
            continue;
        }
        let mut parts = HashMap::new();
        let mut dtypes = HashMap::new();
        for suffix in
            std::iter::once(scheme.storage.primary()).chain(storage.parts().iter().copied())
        {
            if let (Some(info), Some((_, bytes))) =
                (part(suffix), draft.tensor(&format!("{module}{suffix}")))
            {
                parts.insert(suffix, bytes);
                dtypes.insert(suffix, info.dtype);
            }
        }
        jobs.push(Job {
            module,
            storage: storage.clone(),
            n: shape[0] as usize,
            k: shape[1] as usize,
            source: found,
            parts,
            dtypes,
        });
    }
    let extra: Vec<String> = source
        .headers
        .entries()
        .filter(|e| !paired.contains(&e.name))
        .map(|e| e.name.clone())
        .collect();
    let inventory = inventory_check(paired.len(), missing, extra, misshapen);
    let bf16 = bf16_check(&dense);
    let found = parallel::map(
        "source.q4_1 (quantized folder)",
        &jobs,
        || (),
        |_, j| compare(j),
    )?;
    Ok(vec![config_check, inventory, bf16, quantized_check(found)])
}

fn inventory_check(
    paired: usize,
    missing: Vec<String>,
    extra: Vec<String>,
    misshapen: Vec<String>,
) -> Check {
    let list =
        |v: &[String]| crate::checks::list(&v.iter().map(String::as_str).collect::<Vec<_>>(), 3);
    let check = if missing.is_empty() && extra.is_empty() && misshapen.is_empty() {
        Check::pass(
            INVENTORY,
            format!("every one of the {paired} roles stored (each quantized set as its logical weight) has a source tensor of its shape, and every source tensor a role"),
        )
    } else {
        let mut said = Vec::new();
        if !missing.is_empty() {
            said.push(format!("with no source tensor: {}", list(&missing)));
        }
        if !misshapen.is_empty() {
            said.push(format!(
                "of another shape than its source: {}",
                list(&misshapen)
            ));
        }
        if !extra.is_empty() {
            said.push(format!(
                "source tensors this draft does not store: {}",
                list(&extra)
            ));
        }
        Check::fail(
            INVENTORY,
            format!(
                "the draft and its source do not hold the same tensors: {}",
                said.join("; ")
            ),
        )
    };
    check.with_evidence(SourceInventory {
        paired,
        missing,
        extra,
        misshapen,
        unpaired: None,
    })
}

/// A dense tensor, its bytes, and its source with its bytes.
type Dense<'a> = (&'a TensorInfo, &'a [u8], (&'a TensorInfo, &'a [u8]));

/// Each dense tensor against its source rounded to its own type, bit for bit.
fn bf16_check(dense: &[Dense<'_>]) -> Check {
    let mut differing = BTreeMap::new();
    let (mut compared, mut not_compared) = (Vec::new(), Vec::new());
    for (t, bytes, (s, sbytes)) in dense {
        if !values::is_float(t.dtype) || !values::is_float(s.dtype) {
            not_compared.push(t.name.clone());
            continue;
        }
        let n = bytes.len() / t.dtype.size() as usize;
        let (mut ours, mut theirs) = (vec![0f32; n], vec![0f32; n]);
        values::to_f32(t.dtype, bytes, &mut ours);
        values::to_f32(
            s.dtype,
            &sbytes[..n.min(sbytes.len() / s.dtype.size() as usize) * s.dtype.size() as usize],
            &mut theirs,
        );
        let round = |x: f32| match t.dtype {
            Dtype::Bf16 => half::bf16::from_f32(x).to_f32(),
            Dtype::F16 => half::f16::from_f32(x).to_f32(),
            _ => x,
        };
        let differ = ours
            .iter()
            .zip(&theirs)
            .filter(|(a, b)| a.to_bits() != round(**b).to_bits())
            .count() as u64;
        compared.push(t.name.clone());
        if differ > 0 {
            differing.insert(t.name.clone(), differ);
        }
    }
    let check = match differing.iter().next() {
        None => Check::pass(
            BF16,
            format!("each of the {} tensors left dense equals its source rounded to its type, bit for bit", compared.len()),
        ),
        Some((name, count)) => Check::fail(
            BF16,
            format!("{} holds {count} values unlike its source rounded to its type ({} dense tensors differ)", escape(name), differing.len()),
        ),
    };
    check.with_evidence(SourceBf16 {
        compared,
        differing,
        not_compared,
    })
}

fn quantized_check(found: Vec<Found>) -> Check {
    let mut evidence = SourceQ41::default();
    let mut first = None;
    let mut worst = 0f64;
    for f in &found {
        let rms = (f.sq_err / f.sq_src).sqrt();
        evidence
            .max_error_steps
            .insert(f.module.clone(), f.worst_steps);
        evidence
            .relative_rms
            .insert(f.module.clone(), if rms.is_finite() { rms } else { 0.0 });
        evidence
            .out_of_bound
            .insert(f.module.clone(), f.out_of_bound);
        worst = worst.max(f.worst_steps);
        if first.is_none() {
            first = f.first.clone();
        }
    }
    let bad = found.iter().filter(|f| f.out_of_bound > 0).count();
    let check = match first {
        Some(said) => Check::fail(
            Q4_1,
            format!("{said}; {bad} of the {} quantized tensors are not a faithful quantization of their source", found.len()),
        ),
        None => Check::pass(
            Q4_1,
            format!("each of the {} quantized tensors, dequantized as its library does, is within one step of its source value clamped to its group's range (largest error {worst:.2} steps)", found.len()),
        ),
    };
    check.with_evidence(evidence)
}

const E2M1: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

fn e2m1(nibble: u8) -> f32 {
    let v = E2M1[usize::from(nibble & 7)];
    if nibble & 8 == 0 {
        v
    } else {
        -v
    }
}

/// The spacing of E4M3 (`mantissa` 3 bits, smallest normal 2^-6) or E2M1 (1 bit, smallest normal
/// 1) around magnitude `x`: one step of the format there.
fn float_step(x: f32, mantissa: i32, min_exponent: i32) -> f32 {
    let e = if x > 0.0 {
        x.log2().floor() as i32
    } else {
        min_exponent
    };
    2f32.powi(e.max(min_exponent) - mantissa)
}

/// One float part's value at `i` (BF16, F16, F32, or E4M3 bytes).
fn part_value(dtype: Dtype, bytes: &[u8], i: usize) -> f32 {
    match dtype {
        Dtype::F8E4M3 | Dtype::U8 => bytes.get(i).map_or(f32::NAN, |b| e4m3(*b)),
        d => {
            let size = d.size() as usize;
            let mut out = [0f32];
            match bytes.get(i * size..(i + 1) * size) {
                Some(b) => values::to_f32(d, b, &mut out),
                None => out[0] = f32::NAN,
            }
            out[0]
        }
    }
}

/// `bits`-wide code `c` of a row stream of little-endian 32-bit words (MLX's layout, and
/// compressed-tensors' when `bits` divides 32).
fn code(words: &[u8], row_words: usize, r: usize, c: usize, bits: usize) -> u32 {
    let bit = c * bits;
    let word = |w: usize| {
        let at = (r * row_words + w) * 4;
        words.get(at..at + 4).map_or(0u64, |b| {
            u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        })
    };
    let joined = word(bit / 32) | (word(bit / 32 + 1) << 32);
    ((joined >> (bit % 32)) & ((1u64 << bits) - 1)) as u32
}

/// Dequantizes one set row by row against its source; each element's error over its group's step.
fn compare(job: &Job<'_>) -> Found {
    let (n, k) = (job.n, job.k);
    let mut found = Found {
        module: job.module.to_owned(),
        worst_steps: 0.0,
        sq_err: 0.0,
        sq_src: 0.0,
        out_of_bound: 0,
        first: None,
    };
    let part = |s: &str| job.parts.get(s).copied().unwrap_or_default();
    let dtype = |s: &str| job.dtypes.get(s).copied().unwrap_or(Dtype::F32);
    let mut src = vec![0f32; k];
    let (sdtype, sbytes) = (job.source.0.dtype, job.source.1);
    let size = sdtype.size() as usize;
    for r in 0..n {
        let Some(row) = sbytes.get(r * k * size..(r + 1) * k * size) else {
            break;
        };
        values::to_f32(sdtype, row, &mut src);
        for (c, &s) in src.iter().enumerate() {
            // (dequantized value, the group's range, one step there, the rounding allowance)
            let (value, lo, hi, step, rounding) = match &job.storage {
                Storage::PackInt { bits, group, .. } => {
                    let bits = *bits as usize;
                    let g = group.map_or(k, |g| g as usize);
                    let columns = k.div_ceil(g);
                    let scale = part_value(
                        dtype(".weight_scale"),
                        part(".weight_scale"),
                        r * columns + c / g,
                    );
                    let offset = 1i64 << (bits - 1);
                    let q = i64::from(code(
                        part(".weight_packed"),
                        (k * bits).div_ceil(32),
                        r,
                        c,
                        bits,
                    )) - offset;
                    let zero = match job.parts.get(".weight_zero_point") {
                        Some(z) => {
                            let per = 32 / bits;
                            let word = (r / per) * columns + c / g;
                            let v = z
                                .get(word * 4..word * 4 + 4)
                                .map_or(0u32, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                            i64::from((v >> ((r % per) * bits)) & ((1u32 << bits) - 1)) - offset
                        }
                        None => 0,
                    };
                    let (qmin, qmax) = (-offset, offset - 1);
                    let a = scale * (qmin - zero) as f32;
                    let b = scale * (qmax - zero) as f32;
                    let reach = (q - zero).unsigned_abs() as f32 + 0.5;
                    (
                        scale * (q - zero) as f32,
                        a.min(b),
                        a.max(b),
                        scale.abs(),
                        scale.abs() * reach * 2f32.powi(-8),
                    )
                }
                Storage::Fp8 {
                    writer,
                    scale: grain,
                    ..
                } => {
                    let name = if *writer == Writer::HuggingFace {
                        ".weight_scale_inv"
                    } else {
                        ".weight_scale"
                    };
                    let at = match grain {
                        Fp8Scale::Tensor => 0,
                        Fp8Scale::Channel => r,
                        Fp8Scale::Block([br, bc]) => {
                            (r / *br as usize) * k.div_ceil(*bc as usize) + c / *bc as usize
                        }
                    };
                    let scale = part_value(dtype(name), part(name), at);
                    let x = part(".weight")
                        .get(r * k + c)
                        .map_or(f32::NAN, |b| e4m3(*b));
                    let v = x * scale;
                    let step =
                        float_step(x.abs().max((s / scale).abs().min(448.0)), 3, -6) * scale.abs();
                    (v, -448.0 * scale.abs(), 448.0 * scale.abs(), step, 0.0)
                }
                Storage::Nvfp4 { writer } => {
                    let packed = if *writer == Writer::ModelOpt {
                        ".weight"
                    } else {
                        ".weight_packed"
                    };
                    let block = part(".weight_scale")
                        .get(r * (k / 16) + c / 16)
                        .map_or(f32::NAN, |b| e4m3(*b));
                    let global = match writer {
                        Writer::ModelOpt => {
                            part_value(dtype(".weight_scale_2"), part(".weight_scale_2"), 0)
                        }
                        _ => {
                            1.0 / part_value(
                                dtype(".weight_global_scale"),
                                part(".weight_global_scale"),
                                0,
                            )
                        }
                    };
                    let eff = block * global;
                    let byte = part(packed).get((r * k + c) / 2).copied().unwrap_or(0);
                    let x = e2m1(byte >> (4 * (c % 2)));
                    let step = float_step(x.abs().max((s / eff).abs().min(6.0)), 1, 0) * eff.abs();
                    (x * eff, -6.0 * eff.abs(), 6.0 * eff.abs(), step, 0.0)
                }
                Storage::Mlx(p) => {
                    let bits = p.bits as usize;
                    let g = p.group as usize;
                    let columns = k / g;
                    let q = code(part(".weight"), k * bits / 32, r, c, bits);
                    let at = r * columns + c / g;
                    match p.mode {
                        MlxMode::Affine => {
                            let scale = part_value(dtype(".scales"), part(".scales"), at);
                            let bias = part_value(dtype(".biases"), part(".biases"), at);
                            let top = ((1u32 << bits) - 1) as f32;
                            let (a, b) = (bias, bias + scale * top);
                            let rounding = scale.abs() * (q as f32 + 0.5) * 2f32.powi(-8)
                                + bias.abs() * 2f32.powi(-8);
                            (
                                scale * q as f32 + bias,
                                a.min(b),
                                a.max(b),
                                scale.abs(),
                                rounding,
                            )
                        }
                        mode => {
                            let sbyte = part(".scales").get(at).copied().unwrap_or(0xff);
                            let scale = match mode {
                                MlxMode::Nvfp4 => e4m3(sbyte),
                                _ if sbyte == 0xff => f32::NAN,
                                _ => 2f32.powi(i32::from(sbyte) - 127),
                            };
                            let (x, top, mantissa, min_e) = match bits {
                                4 => (e2m1(q as u8), 6.0, 1, 0),
                                _ => (e4m3(q as u8), 448.0, 3, -6),
                            };
                            let step = float_step(
                                x.abs().max((s / scale).abs().min(top)),
                                mantissa,
                                min_e,
                            ) * scale.abs();
                            (x * scale, -top * scale.abs(), top * scale.abs(), step, 0.0)
                        }
                    }
                }
            };
            let clamped = s.max(lo).min(hi);
            let err = (value - clamped).abs();
            let allowed = step + rounding + s.abs() * 2f32.powi(-8) + f32::MIN_POSITIVE;
            found.sq_err += f64::from(value - s).powi(2);
            found.sq_src += f64::from(s).powi(2);
            let steps = f64::from(err / step.max(f32::MIN_POSITIVE));
            if steps.is_finite() {
                found.worst_steps = found.worst_steps.max(steps);
            }
            // Written so that a NaN anywhere (value, scale, source) is out of bound.
            let within = err <= allowed;
            if !within {
                found.out_of_bound += 1;
                if found.first.is_none() {
                    found.first = Some(format!(
                        "{} element [{r}, {c}] dequantizes to {value}, its source is {s}: more than one step ({step}) from the source clamped to its group's range [{lo}, {hi}] (was it quantized from this tensor's weights?)",
                        escape(job.module)
                    ));
                }
            }
        }
    }
    found
}
