//! `scalars.*`: the container's `dflash.*` copies of config values against config.json.

use super::{Forms, Inputs};
use crate::config::{Field, FieldProblem};
use crate::container::TensorInfo;
use crate::dtype::Dtype;
use crate::report::Check;
use crate::roles::Scalar;
use serde_json::json;

/// Relative tolerance accepted for `embedding_scale` when the f32 values are not identical.
pub const EMBEDDING_SCALE_REL_TOL: f64 = 1e-6;

pub fn run(inputs: &Inputs<'_, '_>, forms: &mut Forms) -> Vec<Check> {
    let mut checks = Vec::new();
    for scalar in Scalar::ALL {
        let name = scalar.tensor_name();
        let Some(info) = inputs.container.get(&name) else {
            continue;
        };
        let id = format!("scalars.{}", scalar.field());
        let bytes = inputs.container.data(info);
        let check = match read(scalar, info, bytes) {
            Err(why) => Check::fail(&id, format!("{name}: {why}")),
            Ok(stored) => {
                forms.set(
                    &name,
                    format!(
                        "scalar {} {} = {}",
                        info.dtype,
                        info.shape_text(),
                        stored.text()
                    ),
                    None,
                );
                compare(&id, scalar, &stored, inputs)
            }
        };
        checks.push(check);
    }
    checks
}

/// A scalar tensor's values, decoded.
enum Stored {
    Ints(Vec<i64>),
    Float(f32),
}

impl Stored {
    fn text(&self) -> String {
        match self {
            Stored::Ints(v) => format!("{v:?}"),
            Stored::Float(f) => format!("[{f}]"),
        }
    }
}

fn read(scalar: Scalar, info: &TensorInfo, bytes: &[u8]) -> Result<Stored, String> {
    let declared = format!("declared {} {}", info.dtype, info.shape_text());
    let one = matches!(info.shape.as_slice(), [] | [1]);
    if scalar == Scalar::EmbeddingScale {
        if info.dtype != Dtype::F32 || !one {
            return Err(format!("{declared}, expected F32 [1]"));
        }
        let b: [u8; 4] = bytes
            .try_into()
            .map_err(|_| format!("{declared}: {} bytes", bytes.len()))?;
        return Ok(Stored::Float(f32::from_le_bytes(b)));
    }
    let list = scalar == Scalar::TargetLayerIds;
    if !(list && info.shape.len() == 1 || !list && one) {
        let want = if list { "[taps]" } else { "[1]" };
        return Err(format!("{declared}, expected I32 {want}"));
    }
    let values = match info.dtype {
        Dtype::I32 => bytes
            .chunks_exact(4)
            .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        Dtype::I64 => bytes
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect(),
        _ => return Err(format!("{declared}, expected I32 (or I64)")),
    };
    Ok(Stored::Ints(values))
}

fn compare(id: &str, scalar: Scalar, stored: &Stored, inputs: &Inputs<'_, '_>) -> Check {
    let c = inputs.config;
    let field = scalar.field();
    let statement = |a: &str, b: &str| {
        format!("dflash.{field} in the container equals config.json's {field} ({a} vs {b})")
    };
    let differs = |a: &str, b: &str| {
        format!("dflash.{field} in the container differs from config.json's {field} ({a} vs {b})")
    };
    let ints = |want: Field<Option<Vec<i64>>>| -> Check {
        let Stored::Ints(got) = stored else {
            return Check::fail(
                id,
                format!("{} holds a float, expected integers", scalar.tensor_name()),
            );
        };
        match want {
            Err(p) => undecided(id, &p),
            Ok(None) => Check::undecided(
                id,
                format!(
                    "cannot decide: config.json has no {field} to compare with {} {got:?}",
                    scalar.tensor_name()
                ),
            ),
            Ok(Some(want)) => {
                let (a, b) = (format!("{got:?}"), format!("{want:?}"));
                let evidence = json!({ "container": got, "config": want });
                if *got == want {
                    Check::pass(id, statement(&a, &b)).with_evidence(evidence)
                } else {
                    Check::fail(id, differs(&a, &b)).with_evidence(evidence)
                }
            }
        }
    };
    let one = |f: Field<u64>| f.map(|v| Some(vec![v as i64]));
    match scalar {
        Scalar::BlockSize => ints(one(c.block_size.clone())),
        Scalar::TargetLayerIds => ints(
            c.target_layer_ids
                .clone()
                .map(|v| Some(v.iter().map(|&t| t as i64).collect())),
        ),
        Scalar::MaskTokenId => ints(c.mask_token_id.clone().map(|o| o.map(|v| vec![v as i64]))),
        Scalar::NumTargetLayers => ints(
            c.num_target_layers
                .clone()
                .map(|o| o.map(|v| vec![v as i64])),
        ),
        Scalar::SlidingWindow => match c.sliding_window.clone() {
            Ok(Some(None)) => Check::fail(
                id,
                format!(
                    "{} holds {}, but config.json's sliding_window is null (no window)",
                    scalar.tensor_name(),
                    stored.text()
                ),
            ),
            other => ints(other.map(|o| o.flatten().map(|w| vec![w as i64]))),
        },
        Scalar::EmbeddingScale => {
            let Stored::Float(got) = stored else {
                return Check::fail(id, "dflash.embedding_scale is not a float");
            };
            match c.embedding_scale.clone() {
                Err(p) => undecided(id, &p),
                Ok(None) => Check::undecided(
                    id,
                    format!(
                        "cannot decide: config.json has no embedding_scale to compare with {got}"
                    ),
                ),
                Ok(Some(want)) => compare_float(id, *got, want, statement, differs),
            }
        }
    }
}

/// Compares the stored f32 with `f32(config value)`: exactly, else within a relative 1e-6, and says
/// which.
fn compare_float(
    id: &str,
    got: f32,
    want: f64,
    statement: impl Fn(&str, &str) -> String,
    differs: impl Fn(&str, &str) -> String,
) -> Check {
    let want32 = want as f32;
    let (a, b) = (format!("[{got}]"), format!("[{want}]"));
    let evidence =
        json!({ "container": f64::from(got), "config": want, "config_as_f32": f64::from(want32) });
    if got.to_bits() == want32.to_bits() {
        return Check::pass(id, format!("{}: equal as f32, exactly", statement(&a, &b)))
            .with_evidence(evidence);
    }
    let rel = (f64::from(got) - f64::from(want32)).abs() / f64::from(want32).abs();
    if rel <= EMBEDDING_SCALE_REL_TOL {
        return Check::pass(
            id,
            format!(
                "{}: within relative {EMBEDDING_SCALE_REL_TOL:e} (not exact: {rel:.2e})",
                statement(&a, &b)
            ),
        )
        .with_evidence(evidence);
    }
    Check::fail(
        id,
        format!(
            "{}: relative difference {rel:.2e} exceeds {EMBEDDING_SCALE_REL_TOL:e}",
            differs(&a, &b)
        ),
    )
    .with_evidence(evidence)
}

fn undecided(id: &str, p: &FieldProblem) -> Check {
    Check::blocked(id, super::GEOMETRY, format!("cannot decide: needs {p}"))
}
