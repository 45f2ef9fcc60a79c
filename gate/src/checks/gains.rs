//! `fc.shape`, `norms.sizes` and `norms.bf16`: the 2-byte float tensors.

use super::geometry::blocked_by_field;
use super::{list, Forms, Inputs};
use crate::container::TensorInfo;
use crate::dtype::Dtype;
use crate::evidence::{FcShape, Finding, NormsBf16, NormsSizes};
use crate::family::{Form, Role};
use crate::report::Check;
use crate::tile::median;
use half::f16;

pub const FC: &str = crate::check_id::CheckId::FC_SHAPE;
pub const SIZES: &str = crate::check_id::CheckId::NORMS_SIZES;
pub const BF16: &str = crate::check_id::CheckId::NORMS_BF16;

/// Median |gain| of genuine bf16 gains lies in [2^-6, 2^6] (spec section 4.2).
pub const GAIN_LO: f32 = 1.0 / 64.0;
pub const GAIN_HI: f32 = 64.0;

pub fn run(inputs: &Inputs<'_, '_>, forms: &mut Forms) -> Vec<Check> {
    let gains = expected_gains(inputs);
    vec![
        fc(inputs, forms),
        sizes(inputs, &gains),
        bf16_reading(inputs, &gains, forms),
    ]
}

fn fc(inputs: &Inputs<'_, '_>, forms: &mut Forms) -> Check {
    let name = inputs.naming.name(Role::Fc);
    let (hidden, taps) = match (inputs.geometry.hidden(), inputs.geometry.taps()) {
        (Ok(h), Ok(t)) => (h, t.len() as u64),
        (Err(p), _) | (_, Err(p)) => return blocked_by_field(FC, &p),
    };
    let Some(info) = inputs.container.get(&name) else {
        return Check::fail(FC, format!("{name} is absent"));
    };
    let declared = format!("declared {} {}", info.dtype, info.shape_text());
    // Dimensions are capped at 2^20 and taps by the config's size, so these products fit in u64.
    let cols = taps.saturating_mul(hidden);
    let shape_ok = match info.shape.as_slice() {
        [rows, c] => *rows == hidden && *c == cols,
        [blocks, c, 32] => hidden % 32 == 0 && *blocks == hidden / 32 && *c == cols,
        _ => false,
    };
    let bytes = info.byte_len();
    let want_bytes = hidden.saturating_mul(cols).saturating_mul(2);
    let evidence = FcShape {
        dtype: info.dtype.name(),
        shape: info.shape.clone(),
        bytes,
        expected_bytes: want_bytes,
    };
    if info.dtype != Dtype::Bf16 {
        return Check::fail(
            FC,
            format!("{name} is {declared}: the fusion matrix is BF16"),
        )
        .with_evidence(evidence);
    }
    if !shape_ok {
        return Check::fail(
            FC,
            format!("{name} is {declared}; hidden x (taps x hidden) is {hidden} x {cols} ({taps} taps), as [{hidden}, {cols}] or [{}, {cols}, 32]", hidden / 32),
        )
        .with_evidence(evidence);
    }
    forms.set(
        &name,
        format!("{} matrix {hidden} x {cols}", info.dtype),
        None,
    );
    Check::pass(FC, format!("{name} is hidden x (taps x hidden) at 2 bytes: {bytes} B == {hidden} x {cols} x 2 ({declared})"))
        .with_evidence(evidence)
}

/// Every gain a well-formed package holds, with the length it must have; `None` for the whole list
/// when the config lacks what names or sizes them.
fn expected_gains(inputs: &Inputs<'_, '_>) -> Result<Vec<(String, u64)>, Check> {
    let g = &inputs.geometry;
    let blocked = |id: &str, p| blocked_by_field(id, &p);
    let layers = g.layers().map_err(|p| blocked(SIZES, p))?;
    let mut out = Vec::new();
    for (role, spec) in inputs
        .config
        .family()
        .roles(layers, |s| s.forms == [Form::Gain])
    {
        // A gain's shape has one dimension.
        if let [len] = (spec.shape)(g).map_err(|p| blocked(SIZES, p))?.as_slice() {
            out.push((inputs.naming.name(role), *len));
        }
    }
    Ok(out)
}

fn sizes(inputs: &Inputs<'_, '_>, gains: &Result<Vec<(String, u64)>, Check>) -> Check {
    let gains = match gains {
        Ok(g) => g,
        Err(blocked) => return blocked.clone(),
    };
    let mut absent = Vec::new();
    let mut off = Vec::new();
    let mut off_items = Vec::new();
    for (name, len) in gains {
        match inputs.container.get(name) {
            None => absent.push(name.clone()),
            // The format's gains are BF16; an F16 label would have a loader read bf16 bits as f16.
            Some(info) if info.dtype != Dtype::Bf16 || info.shape != [*len] => {
                off.push(format!(
                    "{name} is {} {}, expected BF16 [{len}]",
                    info.dtype,
                    info.shape_text()
                ));
                let kind = if info.dtype != Dtype::Bf16 {
                    "not_bf16"
                } else {
                    "wrong_shape"
                };
                off_items.push(Finding::new(name, kind));
            }
            Some(_) => {}
        }
    }
    let evidence = NormsSizes {
        expected: gains.len(),
        absent: absent.clone(),
        off_size: off_items,
    };
    if !absent.is_empty() || !off.is_empty() {
        let mut parts = Vec::new();
        if !off.is_empty() {
            parts.push(format!("off-size: {}", list(&off, 3)));
        }
        if !absent.is_empty() {
            parts.push(format!("absent: {}", list(&absent, 3)));
        }
        return Check::fail(
            SIZES,
            format!(
                "not every gain is 2 bytes x hidden or x head_dim: {}",
                parts.join("; ")
            ),
        )
        .with_evidence(evidence);
    }
    Check::pass(
        SIZES,
        format!(
            "{} gains are 2 bytes x hidden or x head_dim (off-size: none)",
            gains.len()
        ),
    )
    .with_evidence(evidence)
}

/// The verdict of the bf16-versus-f16 rule on one gain.
enum Reading {
    Bf16 {
        median: f32,
    },
    F16 {
        bf16_median: f32,
        f16_median: f32,
        non_finite: usize,
    },
    Unclear {
        bf16_median: f32,
        f16_median: f32,
        non_finite: usize,
    },
}

fn read_gain(bytes: &[u8]) -> Reading {
    let mut as_bf16 = Vec::with_capacity(bytes.len() / 2);
    let mut as_f16 = Vec::with_capacity(bytes.len() / 2);
    let mut non_finite = 0;
    for pair in bytes.chunks_exact(2) {
        let bits = u16::from_le_bytes([pair[0], pair[1]]);
        let b = crate::dtype::bf16_to_f32(bits);
        non_finite += usize::from(!b.is_finite());
        as_bf16.push(b.abs());
        as_f16.push(f16::from_bits(bits).to_f32().abs());
    }
    let bm = median(&mut as_bf16).unwrap_or(f32::NAN);
    let fm = median(&mut as_f16).unwrap_or(f32::NAN);
    let inside = |m: f32| GAIN_LO <= m && m <= GAIN_HI;
    if inside(bm) && non_finite == 0 {
        Reading::Bf16 { median: bm }
    } else if inside(fm) {
        Reading::F16 {
            bf16_median: bm,
            f16_median: fm,
            non_finite,
        }
    } else {
        Reading::Unclear {
            bf16_median: bm,
            f16_median: fm,
            non_finite,
        }
    }
}

fn bf16_reading(
    inputs: &Inputs<'_, '_>,
    gains: &Result<Vec<(String, u64)>, Check>,
    forms: &mut Forms,
) -> Check {
    // Gains are found by role, so this check runs even when the config cannot size them.
    let mut found: Vec<&TensorInfo> = inputs
        .container
        .table
        .entries
        .iter()
        .filter(|e| inputs.naming.role(&e.name).is_some_and(Role::is_gain))
        .collect();
    if let Ok(expected) = gains {
        found.retain(|e| expected.iter().any(|(n, _)| *n == e.name));
    }
    let mut medians = Vec::new();
    let mut as_f16 = Vec::new();
    let mut unclear = Vec::new();
    let mut not_bf16 = Vec::new();
    for info in &found {
        if info.dtype != Dtype::Bf16 {
            not_bf16.push(info.name.clone());
            continue;
        }
        match read_gain(inputs.container.data(info)) {
            Reading::Bf16 { median } => {
                medians.push(median);
                forms.set(&info.name, format!("bf16 gain, median |x| {median:.4}"), None);
            }
            Reading::F16 { bf16_median, f16_median, non_finite } => as_f16.push((info.name.clone(), format!(
                "{}: reads as f16, not bf16 (bf16 reading median |x| {bf16_median:.3e}, {non_finite} non-finite; f16 reading median {f16_median:.4})",
                info.name
            ))),
            Reading::Unclear { bf16_median, f16_median, non_finite } => unclear.push((info.name.clone(), format!(
                "{}: neither reading is a gain (bf16 median |x| {bf16_median:.3e}, {non_finite} non-finite; f16 median {f16_median:.3e})",
                info.name
            ))),
        }
    }
    let lo = medians.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = medians.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let names = |found: &[(String, String)]| found.iter().map(|(n, _)| n.clone()).collect();
    let evidence = NormsBf16 {
        read_as_bf16: medians.len(),
        read_as_f16: names(&as_f16),
        unclear: names(&unclear),
        not_labelled_bf16: not_bf16.clone(),
    };
    let said = |found: &[(String, String)]| -> Vec<String> {
        found.iter().map(|(_, s)| s.clone()).collect()
    };
    let (as_f16, unclear) = (said(&as_f16), said(&unclear));
    if !as_f16.is_empty() {
        return Check::fail(
            BF16,
            format!(
                "{} gain(s) labelled BF16 are f16: {}",
                as_f16.len(),
                list(&as_f16, 2)
            ),
        )
        .with_evidence(evidence);
    }
    if !unclear.is_empty() {
        return Check::undecided(
            BF16,
            format!(
                "cannot tell bf16 from f16 for {} gain(s): {}",
                unclear.len(),
                list(&unclear, 2)
            ),
        )
        .with_evidence(evidence);
    }
    if medians.is_empty() {
        return Check::blocked(BF16, SIZES, "no gain labelled BF16 to read")
            .with_evidence(evidence);
    }
    let f16_note = if not_bf16.is_empty() {
        String::new()
    } else {
        format!("; {} not labelled BF16 (see norms.sizes)", not_bf16.len())
    };
    Check::pass(
        BF16,
        format!("{} gains labelled BF16 read as bf16, not f16: median |x| {lo:.3} .. {hi:.3}, all finite{f16_note}", medians.len()),
    )
    .with_evidence(evidence)
}
