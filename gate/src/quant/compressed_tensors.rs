//! compressed-tensors' `quantization_config` (what llm-compressor writes): one config group whose
//! `weights` say the codes, grain and symmetry, in the format its compressor stores them:
//! `pack-quantized` (integer codes packed into I32), `float-quantized` (FP8 E4M3 weights) or
//! `nvfp4-pack-quantized` (FP4 codes two to a byte, E4M3 group scales, an F32 global scale).

use super::{block, shown, strings, text, Fp8Scale, Matchers, Scheme, Select, Storage, Writer};
use serde_json::{Map, Value};

/// The integer bit widths `pack-quantized` packs into 32-bit words that the gate decodes.
const INT_BITS: [u64; 2] = [4, 8];

pub(super) fn read(q: &Map<String, Value>) -> Result<Scheme, String> {
    let Some(Value::Object(groups)) = q.get("config_groups") else {
        return Err("config_groups is absent or not an object".to_owned());
    };
    let mut entries = groups.iter();
    let (Some((name, group)), None) = (entries.next(), entries.next()) else {
        return Err(format!(
            "config_groups holds {} groups; the gate reads a config of exactly one",
            groups.len()
        ));
    };
    let format = text(group.get("format")).or_else(|| text(q.get("format")));
    let Some(Value::Object(w)) = group.get("weights") else {
        return Err(format!(
            "config_groups.{name}.weights is absent or not an object"
        ));
    };
    let field = |k: &str| format!("config_groups.{name}.weights.{k}");
    let inputs = group.get("input_activations").filter(|a| !a.is_null());
    let storage = match format.as_deref() {
        Some("pack-quantized") => {
            if inputs.is_some() {
                return Err(format!("config_groups.{name}.input_activations quantizes activations, which pack-quantized's readers do not"));
            }
            pack_quantized(w, &field)?
        }
        Some("float-quantized") => float_quantized(w, inputs, &field, name)?,
        Some("nvfp4-pack-quantized") => nvfp4(w, &field)?,
        Some(f) => {
            return Err(format!(
                "format {f:?} is not one the gate decodes (it reads pack-quantized, float-quantized and nvfp4-pack-quantized)"
            ))
        }
        None => return Err("no format".to_owned()),
    };
    let mut budget = super::MAX_PATTERNS;
    let targets = matchers(
        group.get("targets"),
        &format!("config_groups.{name}.targets"),
        &mut budget,
    )?;
    let ignore = matchers(q.get("ignore"), "ignore", &mut budget)?;
    Ok(Scheme {
        storage,
        select: Select::TargetsIgnore { targets, ignore },
    })
}

/// `type`, `num_bits` and `symmetric`, each what `want` says.
fn expect_args(
    w: &Map<String, Value>,
    field: &dyn Fn(&str) -> String,
    kind: &str,
    bits: &[u64],
) -> Result<(u64, bool), String> {
    match text(w.get("type")).as_deref() {
        Some(t) if t == kind => {}
        other => return Err(format!("{} is {other:?}, not {kind:?}", field("type"))),
    }
    let b = match w.get("num_bits").and_then(Value::as_u64) {
        Some(b) if bits.contains(&b) => b,
        _ => {
            return Err(format!(
                "{} is {}, not one of {bits:?}",
                field("num_bits"),
                shown(w.get("num_bits"))
            ))
        }
    };
    let symmetric = match w.get("symmetric") {
        Some(Value::Bool(b)) => *b,
        other => {
            return Err(format!(
                "{} is {}, not true or false",
                field("symmetric"),
                shown(other)
            ))
        }
    };
    Ok((b, symmetric))
}

fn pack_quantized(
    w: &Map<String, Value>,
    field: &dyn Fn(&str) -> String,
) -> Result<Storage, String> {
    let (bits, symmetric) = expect_args(w, field, "int", &INT_BITS)?;
    let group = match text(w.get("strategy")).as_deref() {
        Some("group") => Some(group_size(w, field)?),
        Some("channel") => None,
        other => {
            return Err(format!(
                "{} is {other:?}, not \"group\" or \"channel\"",
                field("strategy")
            ))
        }
    };
    Ok(Storage::PackInt {
        bits: bits as u32,
        group,
        symmetric,
    })
}

fn group_size(w: &Map<String, Value>, field: &dyn Fn(&str) -> String) -> Result<u64, String> {
    match w.get("group_size").and_then(Value::as_u64) {
        Some(g) if 1 <= g && g <= crate::limits::MAX_DIMENSION => Ok(g),
        _ => Err(format!(
            "{} is {}, not a group size from 1 to {}",
            field("group_size"),
            shown(w.get("group_size")),
            crate::limits::MAX_DIMENSION
        )),
    }
}

fn float_quantized(
    w: &Map<String, Value>,
    inputs: Option<&Value>,
    field: &dyn Fn(&str) -> String,
    name: &str,
) -> Result<Storage, String> {
    let (_, symmetric) = expect_args(w, field, "float", &[8])?;
    if !symmetric {
        return Err(format!(
            "{} is false: an asymmetric FP8 scheme is not one the gate decodes",
            field("symmetric")
        ));
    }
    let scale = match text(w.get("strategy")).as_deref() {
        Some("tensor") => Fp8Scale::Tensor,
        Some("channel") => Fp8Scale::Channel,
        Some("block") => block(
            w.get("block_structure").unwrap_or(&Value::Null),
            &field("block_structure"),
        )?,
        other => {
            return Err(format!(
                "{} is {other:?}, not \"tensor\", \"channel\" or \"block\"",
                field("strategy")
            ))
        }
    };
    // Static input activations store one input scale per module; dynamic ones store none.
    let input_scale = match inputs {
        None => false,
        Some(a) => match a.get("dynamic") {
            Some(Value::Bool(d)) => !d,
            other => {
                return Err(format!(
                    "config_groups.{name}.input_activations.dynamic is {}, not true or false",
                    shown(other)
                ))
            }
        },
    };
    Ok(Storage::Fp8 {
        writer: Writer::CompressedTensors,
        scale,
        input_scale,
    })
}

fn nvfp4(w: &Map<String, Value>, field: &dyn Fn(&str) -> String) -> Result<Storage, String> {
    let (_, symmetric) = expect_args(w, field, "float", &[4])?;
    if !symmetric {
        return Err(format!(
            "{} is false: NVFP4 is symmetric",
            field("symmetric")
        ));
    }
    if group_size(w, field)? != 16 {
        return Err(format!(
            "{} is {}: NVFP4 scales groups of 16",
            field("group_size"),
            shown(w.get("group_size"))
        ));
    }
    Ok(Storage::Nvfp4 {
        writer: Writer::CompressedTensors,
    })
}

/// A `targets` or `ignore` list: names, and `re:` patterns compiled with bounded size.
fn matchers(v: Option<&Value>, field: &str, budget: &mut usize) -> Result<Matchers, String> {
    let mut out = Matchers::default();
    for s in strings(v, field)? {
        match s.strip_prefix("re:") {
            Some(pattern) => out.push_pattern(s, pattern, field, budget)?,
            None => {
                out.names.insert(s.to_owned());
            }
        }
    }
    Ok(out)
}
