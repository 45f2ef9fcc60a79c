//! `quant.scales`: every scale of a quantized draft is a number its dequantization can multiply by
//! (spec 17.2). compressed-tensors dequantizes `scale * (q - zero)`: a NaN or infinite scale poisons
//! every weight of its group, and a zero or negative one zeroes or flips it, so each must be finite
//! and `> 0`. Zero points stored packed are in range by construction (each is `bits` wide), so the
//! scales are what is read, whole; packed weights are not read.

use crate::container::TensorInfo;
use crate::dtype::Dtype;
use crate::escape::escape;
use crate::evidence::{FirstBadScale, QuantScales};
use crate::report::Check;
use half::{bf16, f16};

pub const ID: &str = crate::check_id::CheckId::QUANT_SCALES;

/// The check over `scales` (each quantized set's `X.weight_scale` with its bytes); `scheme` names
/// the scheme for the message. A scale of a type that is not a float is `inventory.complete`'s
/// finding and is not read here.
pub fn run(scheme: &str, scales: &[(&TensorInfo, &[u8])]) -> Check {
    let (mut tensors, mut elements) = (0usize, 0u64);
    for (t, bytes) in scales {
        let values: Box<dyn Iterator<Item = f64>> = match t.dtype {
            Dtype::Bf16 => Box::new(
                bytes
                    .chunks_exact(2)
                    .map(|b| f64::from(bf16::from_le_bytes([b[0], b[1]]).to_f32())),
            ),
            Dtype::F16 => Box::new(
                bytes
                    .chunks_exact(2)
                    .map(|b| f64::from(f16::from_le_bytes([b[0], b[1]]).to_f32())),
            ),
            Dtype::F32 => Box::new(
                bytes
                    .chunks_exact(4)
                    .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
            ),
            _ => continue,
        };
        tensors += 1;
        for (index, v) in values.enumerate() {
            elements += 1;
            if v.is_finite() && v > 0.0 {
                continue;
            }
            let value = format!("{v}");
            let message = format!(
                "{}[{index}] is {value}: a {scheme} scale must be finite and > 0 (every weight of its group is scale * (q - zero), so this one poisons, zeroes or flips its group)",
                escape(&t.name)
            );
            return Check::fail(ID, message).with_evidence(QuantScales {
                tensors,
                elements,
                first: Some(FirstBadScale {
                    tensor: t.name.clone(),
                    index: index as u64,
                    value,
                }),
            });
        }
    }
    Check::pass(
        ID,
        format!("every scale of the {tensors} quantized tensors is finite and > 0 ({elements} scales read, {scheme})"),
    )
    .with_evidence(QuantScales {
        tensors,
        elements,
        first: None,
    })
}
