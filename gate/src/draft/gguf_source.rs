//! `--source DIR` against a GGUF draft: the Hugging Face folder it was converted from (llama.cpp's
//! `convert_hf_to_gguf.py`), tensor by tensor, with the ids `--source` uses for a package.
//!
//! - `source.config`: the folder's config against the metadata, read as `--source FILE.gguf` reads
//!   them (the same comparison, the roles swapped): `target_layers` holding each HF id plus one is
//!   agreement, the ids themselves a FAIL naming both.
//! - `source.inventory`: every GGUF tensor (its llama.cpp name mapped to the checkpoint's) has a
//!   source tensor of its logical shape (`ne` read last first), and every source tensor a GGUF one.
//! - `source.bf16`: an F32, F16 or BF16 GGUF tensor equals its source rounded to that type, bit for
//!   bit (nearest-even); a finite source value beyond f16's range is the overflow it is, named.
//! - `source.q4_1`: a block-quantized tensor (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K),
//!   dequantized as ggml does, holds every element within one step of its source value clamped to
//!   its block's (or sub-block's) range, and its relative RMS error under the 4-bit ceiling scaled by
//!   the type's step (15 steps span a 4-bit range, 255 an 8-bit one). Any other type leaves its
//!   tensor, and the check, undecided, naming the type.

use crate::checkpoint::Checkpoint;
use crate::config::DraftConfig;
use crate::dtype::{f32_to_bf16, Dtype};
use crate::escape::escape;
use crate::evidence::{SourceBf16, SourceQ41};
use crate::gguf::{GgmlType, Gguf, TensorInfo};
use crate::parallel::{self, WorkerPanic};
use crate::report::Check;
use crate::source::gguf::config::compare;
use crate::source::{source_names, squeezed, values, BF16, CHECKS, CONFIG, Q4_1};
use bound::Sums;

mod bound;
use half::f16;
use std::collections::{BTreeMap, HashSet};

/// Elements read from the source, and dequantized from the GGUF, at a time.
const CHUNK: usize = 8192;

/// The `source.*` checks when the draft was not read as one: each blocked by the check that stopped it.
pub fn blocked(by: &'static str, why: &str) -> Vec<Check> {
    CHECKS
        .iter()
        .map(|id| Check::blocked(*id, by, why))
        .collect()
}

/// The `source.*` checks of a GGUF draft that parsed and is `dflash`, against the checkpoint
/// `source`. Tensors are compared on every core, one at a time each; a worker that panicked is an
/// error, never a check over the tensors the others compared.
pub fn checks(gguf: &Gguf, source: &Checkpoint) -> Result<Vec<Check>, WorkerPanic> {
    let config = match DraftConfig::from_json(&source.headers.config) {
        Ok(config) => compare(&config, &gguf.header, "source folder's config"),
        Err(why) => Check::fail(
            CONFIG,
            format!("the source's config.json declares no draft the gate reads: {why}"),
        ),
    };
    let mut pairs = Vec::new();
    let mut claimed = HashSet::new();
    let (mut missing, mut misshapen) = (Vec::new(), Vec::new());
    for t in &gguf.header.tensors {
        let (bare, _) = crate::family::gguf_names::to_package(&t.name);
        let found = source_names(&bare)
            .into_iter()
            .find_map(|n| source.tensor(&n).map(|(info, bytes)| (n, info, bytes)));
        let Some((name, info, bytes)) = found else {
            missing.push(format!(
                "GGUF tensor {} ({}) has no source tensor",
                escape(&t.name),
                escape(&bare)
            ));
            continue;
        };
        claimed.insert(name.clone());
        let logical: Vec<u64> = squeezed(&t.dims).iter().rev().copied().collect();
        if logical != squeezed(&info.shape) || !values::is_float(info.dtype) {
            misshapen.push(format!(
                "GGUF tensor {} is {} ne {}, source {name} is {} {}",
                escape(&t.name),
                t.ty,
                crate::container::shape_text(&t.dims),
                info.dtype,
                info.shape_text()
            ));
            continue;
        }
        pairs.push(Pair {
            gguf: t,
            data: gguf.data(t).unwrap_or_default(),
            name,
            dtype: info.dtype,
            source: bytes,
            cols: logical.last().copied().unwrap_or(1).max(1),
        });
    }
    let mut extra: Vec<String> = source
        .headers
        .entries()
        .filter(|e| !claimed.contains(&e.name))
        .map(|e| format!("source tensor {} has no GGUF counterpart", e.name))
        .collect();
    extra.sort();
    let inventory = crate::source::inventory(pairs.len(), &missing, &extra, &misshapen);
    let (floats, quantized): (Vec<&Pair<'_>>, Vec<&Pair<'_>>) =
        pairs.iter().partition(|p| float_type(p.gguf.ty));
    // The suite runs each arm through the plain loops too, and holds the outcomes equal.
    let wide = !crate::source::scalar_source_loop();
    let floats_compared = parallel::map(BF16, &floats, || (), |_, p| compare_floats(p, wide))?;
    let quantized_compared =
        parallel::map(Q4_1, &quantized, || (), |_, p| compare_quantized(p, wide))?;
    Ok(vec![
        config,
        inventory,
        floats_check(&floats, floats_compared),
        quantized_check(&quantized, quantized_compared),
    ])
}

/// One GGUF tensor and its source counterpart.
struct Pair<'a> {
    gguf: &'a TensorInfo,
    data: &'a [u8],
    /// The source tensor's name.
    name: String,
    dtype: Dtype,
    source: &'a [u8],
    /// Elements per row (the GGUF's ne0).
    cols: u64,
}

impl Pair<'_> {
    fn elements(&self) -> usize {
        self.source.len() / self.dtype.size().max(1) as usize
    }

    fn at(&self, i: usize) -> String {
        let cols = self.cols as usize;
        format!("row {}, column {}", i / cols, i % cols)
    }
}

fn float_type(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
}

/// The source's values of elements `from..from + out.len()`, as f32.
fn source_values(pair: &Pair<'_>, from: usize, out: &mut [f32]) -> bool {
    let size = pair.dtype.size() as usize;
    let Some(bytes) = pair.source.get(from * size..(from + out.len()) * size) else {
        return false;
    };
    values::to_f32(pair.dtype, bytes, out);
    true
}

/// Where a GGUF float type and its source's dtype are the same encoding, the lowest magnitude bits
/// (sign cleared) of a NaN in it: then an element equals its source rounded to the type exactly
/// when their bytes are equal and it is not a NaN, so a chunk of equal bytes with no NaN is
/// decided whole, without a conversion per element.
fn same_encoding(ty: GgmlType, dtype: Dtype) -> Option<u32> {
    match (ty, dtype) {
        (GgmlType::F32, Dtype::F32) => Some(0x7f80_0001),
        (GgmlType::F16, Dtype::F16) => Some(0x7c01),
        (GgmlType::BF16, Dtype::Bf16) => Some(0x7f81),
        _ => None,
    }
}

/// Whether no element of `bytes` (little-endian, two bytes each when `nan` fits in 16 bits, else
/// four) has a NaN's magnitude bits, `nan` or above.
fn no_nan(bytes: &[u8], nan: u32) -> bool {
    if nan > 0xffff {
        let (words, rest) = bytes.as_chunks::<4>();
        let largest = words
            .iter()
            .fold(0, |m, &w| m.max(u32::from_le_bytes(w) & 0x7fff_ffff));
        return rest.is_empty() && largest < nan;
    }
    let (halves, rest) = bytes.as_chunks::<2>();
    let largest = halves
        .iter()
        .fold(0, |m, &h| m.max(u16::from_le_bytes(h) & 0x7fff));
    rest.is_empty() && u32::from(largest) < nan
}

/// The first element of an F32, F16 or BF16 tensor unlike its source rounded to that type, how many
/// are, and whether the first is an f16 overflow; `Err` when the sizes do not agree.
fn compare_floats(pair: &Pair<'_>, wide: bool) -> Result<(u64, Option<String>), String> {
    let n = pair.elements();
    let width = pair.gguf.ty.type_size() as usize;
    if pair.data.len() != n * width {
        return Err(format!(
            "{} holds {} bytes for {n} elements",
            escape(&pair.gguf.name),
            pair.data.len()
        ));
    }
    let (mut differing, mut first) = (0u64, None);
    let mut xs = vec![0f32; CHUNK.min(n)];
    let same = same_encoding(pair.gguf.ty, pair.dtype).filter(|_| wide);
    for from in (0..n).step_by(CHUNK) {
        let xs = &mut xs[..CHUNK.min(n - from)];
        let span = from * width..(from + xs.len()) * width;
        if let (Some(nan), Some(stored), Some(source)) =
            (same, pair.data.get(span.clone()), pair.source.get(span))
        {
            if stored == source && no_nan(stored, nan) {
                continue;
            }
        }
        if !source_values(pair, from, xs) {
            return Err(format!("source {} is shorter than its shape", pair.name));
        }
        for (j, &x) in xs.iter().enumerate() {
            let i = from + j;
            let bytes = &pair.data[i * width..(i + 1) * width];
            let (stored, rounded, overflow) = match pair.gguf.ty {
                GgmlType::F32 => {
                    let s = f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
                    (s, x, false)
                }
                GgmlType::F16 => {
                    let s = f16::from_bits(u16::from_le_bytes([bytes[0], bytes[1]])).to_f32();
                    let r = f16::from_f32(x).to_f32();
                    (s, r, x.is_finite() && r.is_infinite())
                }
                _ => {
                    let s = crate::dtype::bf16_to_f32(u16::from_le_bytes([bytes[0], bytes[1]]));
                    (s, crate::dtype::bf16_to_f32(f32_to_bf16(x)), false)
                }
            };
            // Bit for bit, and a NaN equals nothing.
            if stored.to_bits() == rounded.to_bits() && !stored.is_nan() && !overflow {
                continue;
            }
            differing += 1;
            if first.is_none() {
                first = Some(if overflow {
                    format!(
                        "{} at {}: source {} value {x} is beyond f16's range (largest 65504): it overflows to {rounded} in F16",
                        escape(&pair.gguf.name),
                        pair.at(i),
                        pair.name
                    )
                } else {
                    format!(
                        "{} ({}) differs from source {} at {}: GGUF {stored}, source {x} rounded to {} {rounded}",
                        escape(&pair.gguf.name),
                        pair.gguf.ty,
                        pair.name,
                        pair.at(i),
                        pair.gguf.ty
                    )
                });
            }
        }
    }
    Ok((differing, first))
}

/// `source.bf16` over the F32, F16 and BF16 tensors, from what comparing each found.
fn floats_check(
    pairs: &[&Pair<'_>],
    compared: Vec<Result<(u64, Option<String>), String>>,
) -> Check {
    let mut differing = BTreeMap::new();
    let mut firsts = Vec::new();
    for (pair, compared) in pairs.iter().zip(compared) {
        let (count, first) = compared.unwrap_or_else(|why| (1, Some(why)));
        if count > 0 {
            differing.insert(pair.gguf.name.clone(), count);
            firsts.extend(first);
        }
    }
    let evidence = SourceBf16 {
        compared: pairs.iter().map(|p| p.gguf.name.clone()).collect(),
        differing,
        not_compared: Vec::new(),
    };
    if let Some(first) = firsts.first() {
        return Check::fail(
            BF16,
            format!(
                "{first} ({} of the {} F32, F16 and BF16 tensors differ from their source)",
                firsts.len(),
                pairs.len()
            ),
        )
        .with_evidence(evidence);
    }
    if pairs.is_empty() {
        return Check::undecided(
            BF16,
            "cannot decide: no F32, F16 or BF16 GGUF tensor was paired with a source tensor",
        )
        .with_evidence(evidence);
    }
    Check::pass(
        BF16,
        format!(
            "every one of the {} F32, F16 and BF16 GGUF tensors equals its source rounded to its type, bit for bit",
            pairs.len()
        ),
    )
    .with_evidence(evidence)
}

/// How many elements in a row, in ggml's output order, share one scale: a K-quant's sub-block, the
/// whole block of the others.
fn run_length(ty: GgmlType) -> usize {
    match ty {
        GgmlType::Q6_K => 16,
        _ => 32,
    }
}

/// The step and the range each run of [`run_length`] elements of one block of `ty` can represent,
/// in ggml's output order: `(step, low, high)`. `false` for a type the gate does not dequantize.
/// Kept per run, not per element, so that the comparison divides by a step once a run.
fn ranges(ty: GgmlType, block: &[u8], out: &mut [(f32, f32, f32)]) -> bool {
    let h = |at: usize| f16::from_bits(u16::from_le_bytes([block[at], block[at + 1]])).to_f32();
    // Codes `lo..=hi` times `scale`, then less `min`.
    let span = |scale: f32, min: f32, lo: f32, hi: f32| {
        let (a, b) = (scale * lo - min, scale * hi - min);
        (scale.abs(), a.min(b), a.max(b))
    };
    match ty {
        GgmlType::Q4_0 => out.fill(span(h(0), 0.0, -8.0, 7.0)),
        GgmlType::Q4_1 => out.fill(span(h(0), -h(2), 0.0, 15.0)),
        GgmlType::Q5_0 => out.fill(span(h(0), 0.0, -16.0, 15.0)),
        GgmlType::Q5_1 => out.fill(span(h(0), -h(2), 0.0, 31.0)),
        GgmlType::Q8_0 => out.fill(span(h(0), 0.0, -128.0, 127.0)),
        GgmlType::Q4_K | GgmlType::Q5_K => {
            let (d, dmin) = (h(0), h(2));
            let top = if ty == GgmlType::Q4_K { 15.0 } else { 31.0 };
            let (sc, m) = crate::gguf::scales_and_mins(block[4..16].try_into().unwrap_or(&[0; 12]));
            for (j, sub) in out.iter_mut().enumerate() {
                let (dj, mj) = (d * f32::from(sc[j]), dmin * f32::from(m[j]));
                *sub = span(dj, mj, 0.0, top);
            }
        }
        GgmlType::Q6_K => {
            let d = h(208);
            for (s, sub) in out.iter_mut().enumerate() {
                *sub = span(d * f32::from(block[192 + s] as i8), 0.0, -32.0, 31.0);
            }
        }
        _ => return false,
    }
    true
}

/// Steps between a quantized type's lowest and highest code: what its RMS ceiling is scaled by.
fn levels(ty: GgmlType) -> f64 {
    match ty {
        GgmlType::Q8_0 => 255.0,
        GgmlType::Q6_K => 63.0,
        GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q5_K => 31.0,
        _ => 15.0,
    }
}

/// One quantized tensor against its source.
#[derive(Default)]
struct Bounded {
    out: u64,
    max_steps: f32,
    err2: f64,
    ref2: f64,
    first: Option<String>,
}

impl Bounded {
    fn relative_rms(&self) -> f64 {
        if self.ref2 == 0.0 && self.err2 == 0.0 {
            return 0.0;
        }
        (self.err2 / self.ref2).sqrt()
    }
}

fn dequantize(ty: GgmlType, blocks: &[u8], out: &mut [f32]) -> bool {
    if crate::gguf::k_quant(ty) {
        crate::gguf::dequantize_k_quant(ty, blocks, out).is_ok()
    } else {
        crate::gguf::dequantize(ty, blocks, out).is_ok()
    }
}

/// Every element of a quantized tensor against section 11's bound, a chunk of blocks at a time;
/// `None` for a type the gate does not dequantize, `Err` when the sizes do not agree.
fn compare_quantized(pair: &Pair<'_>, wide: bool) -> Result<Option<Bounded>, String> {
    let ty = pair.gguf.ty;
    let (size, block) = (ty.type_size() as usize, ty.block_size() as usize);
    if !(crate::gguf::k_quant(ty) || crate::gguf::supported(ty)) || float_type(ty) {
        return Ok(None);
    }
    let n = pair.elements();
    if !n.is_multiple_of(block) || pair.data.len() != n / block * size {
        return Err(format!(
            "{} holds {} bytes of {ty} for {n} elements",
            escape(&pair.gguf.name),
            pair.data.len()
        ));
    }
    let per = (CHUNK / block).max(1);
    let (mut ys, mut xs) = (vec![0f32; per * block], vec![0f32; per * block]);
    let run = run_length(ty);
    if !block.is_multiple_of(run) {
        return Ok(None);
    }
    let per_block = block / run;
    let mut spans = vec![(0f32, 0f32, 0f32); per * per_block];
    let mut sums = Sums::new(wide);
    let mut first = None;
    for (c, chunk) in pair.data.chunks(per * size).enumerate() {
        let count = chunk.len() / size * block;
        let from = c * per * block;
        let (ys, xs) = (&mut ys[..count], &mut xs[..count]);
        if !dequantize(ty, chunk, ys) || !source_values(pair, from, xs) {
            return Err(format!("{} did not dequantize", escape(&pair.gguf.name)));
        }
        let spans = &mut spans[..count / run];
        for (bytes, out) in chunk
            .chunks_exact(size)
            .zip(spans.chunks_exact_mut(per_block))
        {
            if !ranges(ty, bytes, out) {
                return Ok(None);
            }
        }
        if !sums.runs(spans, run, xs, ys) || first.is_some() {
            continue;
        }
        let Some(e) = bound::first_out(spans, run, xs, ys) else {
            continue;
        };
        let ((step, lo, hi), i) = (spans[e / run], from + e);
        first = Some(format!(
            "{} ({ty}) at {}, block {}: dequantized {}, source {} value {}, step {step} (the block's range {lo} to {hi})",
            escape(&pair.gguf.name),
            pair.at(i),
            i / block,
            ys[e],
            pair.name,
            xs[e]
        ));
    }
    Ok(Some(Bounded {
        out: sums.out,
        max_steps: sums.max_steps,
        err2: sums.err2.iter().sum(),
        ref2: sums.ref2.iter().sum(),
        first,
    }))
}

/// Whether `rms` is at most `ceiling`, written so that a NaN is not.
fn under(rms: f64, ceiling: f64) -> bool {
    rms <= ceiling
}

/// `source.q4_1` over the block-quantized tensors, from what comparing each found.
fn quantized_check(pairs: &[&Pair<'_>], compared: Vec<Result<Option<Bounded>, String>>) -> Check {
    let (mut undecided, mut failures) = (Vec::new(), Vec::new());
    let mut evidence = SourceQ41::default();
    for (pair, compared) in pairs.iter().zip(compared) {
        let name = escape(&pair.gguf.name).into_owned();
        let o = match compared {
            Ok(Some(o)) => o,
            Ok(None) => {
                undecided.push(format!(
                    "{name} (type {}, which the gate does not dequantize)",
                    pair.gguf.ty
                ));
                continue;
            }
            Err(why) => {
                failures.push(why);
                continue;
            }
        };
        let rms = o.relative_rms();
        let ceiling = crate::source::RMS_CEILING * 15.0 / levels(pair.gguf.ty);
        if let Some(first) = &o.first {
            failures.push(format!(
                "{first} ({} elements of {name} out of bound)",
                o.out
            ));
        } else if !under(rms, ceiling) {
            failures.push(format!(
                "{name} ({}): relative RMS error {rms:.4} against source {} is above {ceiling:.4}, the ceiling for its step",
                pair.gguf.ty, pair.name
            ));
        }
        evidence
            .max_error_steps
            .insert(name.clone(), f64::from(o.max_steps));
        evidence.relative_rms.insert(name.clone(), rms);
        evidence.out_of_bound.insert(name, o.out);
    }
    evidence.undecided = Some(undecided.clone());
    if let Some(first) = failures.first() {
        return Check::fail(
            Q4_1,
            format!(
                "{first}; {} of the {} quantized tensors are not a faithful quantization of their source",
                failures.len(),
                pairs.len()
            ),
        )
        .with_evidence(evidence);
    }
    if !undecided.is_empty() {
        return Check::undecided(
            Q4_1,
            format!(
                "cannot decide: not compared: {}",
                crate::checks::list(&undecided, 4)
            ),
        )
        .with_evidence(evidence);
    }
    if pairs.is_empty() {
        return Check::pass(
            Q4_1,
            "no GGUF tensor is block-quantized: every tensor was compared as a float type",
        )
        .with_evidence(evidence);
    }
    Check::pass(
        Q4_1,
        format!(
            "every one of the {} quantized GGUF tensors, dequantized as ggml does, lies within one step of its source clamped to its block's range, and under its type's RMS ceiling",
            pairs.len()
        ),
    )
    .with_evidence(evidence)
}

/// Why `--source` is refused for a GGUF draft when it names something other than the folder the draft
/// was converted from.
pub fn refused_source(path: &std::path::Path) -> Option<String> {
    let listed = std::fs::read_dir(path).ok().map(|entries| {
        entries
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect::<Vec<_>>()
    });
    let gguf = crate::gguf::is_gguf_name;
    if gguf(path.as_os_str()) || listed.as_ref().is_some_and(|l| l.iter().any(|n| gguf(n))) {
        return Some("names a GGUF: a GGUF draft is compared with the Hugging Face folder it was converted from (config.json and safetensors), not with another GGUF".to_owned());
    }
    if listed
        .as_ref()
        .is_some_and(|l| l.iter().any(|n| crate::files::is_weight_file(n)))
    {
        return Some("names a Q4NX package: a GGUF draft is compared with the Hugging Face folder it was converted from (config.json and safetensors), not with another converted form".to_owned());
    }
    None
}
