//! `scalars.*`: the container's `dflash.*` copies of config values against config.json.

use super::{Forms, Inputs};
use crate::config::{DraftConfig, Field, FieldProblem};
use crate::container::TensorInfo;
use crate::dtype::Dtype;
use crate::evidence::{ScalarFloat, ScalarInts};
use crate::family::Scalar;
use crate::report::Check;

/// Relative tolerance accepted for `embedding_scale` when the f32 values are not identical.
pub const EMBEDDING_SCALE_REL_TOL: f64 = 1e-6;

pub fn run(inputs: &Inputs<'_, '_>, forms: &mut Forms) -> Vec<Check> {
    let mut checks = Vec::new();
    // Only the family's scalars: another family's is left to inventory.explained.
    for scalar in inputs.config.family().scalars() {
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

/// Whether config.json gives `scalar` a value (a field that is there but unreadable counts: its check
/// says why it cannot decide), which a converter stores as `dflash.<field>`: the scalars a report lists
/// blocked when the container could not be read. A window of null, a feature switched off, an absent
/// optional field: nothing to store, so not listed.
pub fn stated(scalar: Scalar, c: &DraftConfig) -> bool {
    fn given<T>(field: &Field<Option<T>>) -> bool {
        !matches!(field, Ok(None))
    }
    match scalar {
        Scalar::BlockSize | Scalar::TargetLayerIds => true,
        Scalar::MaskTokenId => given(&c.mask_token_id),
        Scalar::NumTargetLayers => given(&c.num_target_layers),
        Scalar::SlidingWindow => !matches!(c.sliding_window, Ok(None) | Ok(Some(None))),
        Scalar::EmbeddingScale => given(&c.embedding_scale),
        Scalar::OutputMultiplier => given(&c.output_multiplier),
        Scalar::FinalLogitSoftcapping => given(&c.final_logit_softcapping),
        Scalar::ConvKernelSize | Scalar::ConvGroupSize => given(&c.conv),
        Scalar::SelectorRank | Scalar::SelectorTopK => given(&c.selector),
    }
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
    if scalar.is_float() {
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
    // Exact integers on both sides: the container's as read (I32 or I64), the config's as u64, never
    // cast into each other's type. Every field here is a size, an index or a count, so a negative
    // stored value is refused as such, not compared.
    let ints = |want: Field<Option<Vec<u64>>>| -> Check {
        let Stored::Ints(got) = stored else {
            return Check::fail(
                id,
                format!("{} holds a float, expected integers", scalar.tensor_name()),
            );
        };
        if let Some(negative) = got.iter().find(|&&g| g < 0) {
            return Check::fail(
                id,
                format!(
                    "{} holds {negative} (in {got:?}): {field} cannot be negative",
                    scalar.tensor_name()
                ),
            )
            // The same evidence shape as a comparison's, the config's side as read.
            .with_evidence(ScalarInts {
                container: got.clone(),
                config: want.clone().ok().flatten(),
            });
        }
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
                let evidence = ScalarInts {
                    container: got.clone(),
                    config: Some(want.clone()),
                };
                let equal = got.len() == want.len()
                    && got
                        .iter()
                        .zip(&want)
                        .all(|(&g, &w)| i128::from(g) == i128::from(w));
                if equal {
                    Check::pass(id, statement(&a, &b)).with_evidence(evidence)
                } else {
                    Check::fail(id, differs(&a, &b)).with_evidence(evidence)
                }
            }
        }
    };
    let one = |f: Field<u64>| f.map(|v| Some(vec![v]));
    match scalar {
        Scalar::BlockSize => ints(one(c.block_size.clone())),
        Scalar::TargetLayerIds => ints(c.target_layer_ids.clone().map(Some)),
        Scalar::MaskTokenId => ints(c.mask_token_id.clone().map(|o| o.map(|v| vec![v]))),
        Scalar::NumTargetLayers => ints(c.num_target_layers.clone().map(|o| o.map(|v| vec![v]))),
        Scalar::SlidingWindow => match c.sliding_window.clone() {
            Ok(Some(None)) => Check::fail(
                id,
                format!(
                    "{} holds {}, but config.json's sliding_window is null (no window)",
                    scalar.tensor_name(),
                    stored.text()
                ),
            ),
            other => ints(other.map(|o| o.flatten().map(|w| vec![w]))),
        },
        Scalar::EmbeddingScale | Scalar::OutputMultiplier | Scalar::FinalLogitSoftcapping => {
            let Stored::Float(got) = stored else {
                return Check::fail(id, format!("{} is not a float", scalar.tensor_name()));
            };
            let want = match scalar {
                Scalar::OutputMultiplier => c.output_multiplier.clone(),
                Scalar::FinalLogitSoftcapping => c.final_logit_softcapping.clone(),
                _ => c.embedding_scale.clone(),
            };
            match want {
                Err(p) => undecided(id, &p),
                Ok(None) => Check::undecided(
                    id,
                    format!("cannot decide: config.json has no {field} to compare with {got}"),
                ),
                // embedding_scale multiplies embeddings: zero or negative is no scale. The logit
                // fields need only be finite (a softcap of 0 is "off").
                Ok(Some(want)) => compare_float(
                    id,
                    (*got, want),
                    scalar == Scalar::EmbeddingScale,
                    statement,
                    differs,
                ),
            }
        }
        Scalar::ConvKernelSize => ints(c.conv.clone().map(|o| o.map(|(k, _)| vec![k]))),
        Scalar::ConvGroupSize => ints(c.conv.clone().map(|o| o.map(|(_, g)| vec![g]))),
        Scalar::SelectorRank => ints(c.selector.clone().map(|o| o.map(|(r, _)| vec![r]))),
        Scalar::SelectorTopK => ints(c.selector.clone().map(|o| o.map(|(_, k)| vec![k]))),
    }
}

/// Compares the stored f32 with `f32(config value)`: exactly, else within a relative 1e-6, and says
/// which. Both must be finite (and positive, when `positive`) first: an infinity equals nothing.
fn compare_float(
    id: &str,
    (got, want): (f32, f64),
    positive: bool,
    statement: impl Fn(&str, &str) -> String,
    differs: impl Fn(&str, &str) -> String,
) -> Check {
    let want32 = want as f32;
    let (a, b) = (format!("[{got}]"), format!("[{want}]"));
    let evidence = ScalarFloat {
        container: got.into(),
        config: want,
        config_as_f32: want32.into(),
    };
    for (whose, value) in [("the container's", got), ("config.json's (as f32)", want32)] {
        if !(value.is_finite() && (value > 0.0 || !positive)) {
            let want = if positive {
                "finite positive"
            } else {
                "finite"
            };
            return Check::fail(
                id,
                format!(
                    "{}: {whose} value {value} is not a {want} f32",
                    differs(&a, &b)
                ),
            )
            .with_evidence(evidence);
        }
    }
    // Both are finite here, so == is exact equality (and 0 equals -0).
    if got == want32 {
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
    Check::blocked(id, super::GEOMETRY, format!("cannot decide: {}", p.needs()))
}
