//! MLX's `quantization` (what mlx-lm's `quantize_model` writes and `load_model` reads): the default
//! `group_size`, `bits` and `mode`, and beside them one key per module that is quantized otherwise:
//! `false` (left dense) or its own parameters. mlx-lm's loader quantizes a module the file stores
//! quantized (its `X.scales` is there) unless the config names it.

use super::{shown, Scheme, Select, Storage, MAX_NAMES};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// MLX's quantization modes (`mx.quantize(mode=...)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MlxMode {
    /// Integer codes with a float scale and bias per group.
    Affine,
    /// FP4 E2M1 codes, an E8M0 scale per 32.
    Mxfp4,
    /// FP4 E2M1 codes, an E4M3 scale per 16.
    Nvfp4,
    /// FP8 E4M3 codes, an E8M0 scale per 32.
    Mxfp8,
}

/// One module's (or the default) MLX quantization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MlxParams {
    pub mode: MlxMode,
    pub bits: u32,
    pub group: u64,
}

impl MlxMode {
    fn name(self) -> &'static str {
        match self {
            MlxMode::Affine => "affine",
            MlxMode::Mxfp4 => "mxfp4",
            MlxMode::Nvfp4 => "nvfp4",
            MlxMode::Mxfp8 => "mxfp8",
        }
    }

    /// The mode's bits and group when the config leaves them out (mlx-lm's `defaults_for_mode`),
    /// and the bits and groups MLX's kernels take.
    fn rules(self) -> ((u64, u64), &'static [u64], &'static [u64]) {
        match self {
            MlxMode::Affine => ((4, 64), &[2, 3, 4, 5, 6, 8], &[32, 64, 128]),
            MlxMode::Mxfp4 => ((4, 32), &[4], &[32]),
            MlxMode::Nvfp4 => ((4, 16), &[4], &[16]),
            MlxMode::Mxfp8 => ((8, 32), &[8], &[32]),
        }
    }
}

impl MlxParams {
    pub fn describe(&self) -> String {
        format!(
            "{} {}-bit group {}",
            self.mode.name(),
            self.bits,
            self.group
        )
    }
}

pub(super) fn read(v: &Value) -> Result<Scheme, String> {
    let Value::Object(q) = v else {
        return Err(format!("quantization is {}, not an object", shown(Some(v))));
    };
    let default = params(q, "quantization")?;
    let modules = q
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "group_size" | "bits" | "mode"));
    let mut overrides = HashMap::new();
    for (i, (module, value)) in modules.enumerate() {
        if i == MAX_NAMES {
            return Err(format!(
                "quantization names more than the {MAX_NAMES} modules the gate reads"
            ));
        }
        let field = format!("quantization.{}", crate::escape::escape(module));
        let p = match value {
            Value::Bool(false) => None,
            Value::Bool(true) => Some(default),
            Value::Object(o) => Some(params(o, &field)?),
            other => {
                return Err(format!(
                    "{field} is {}, not false, true or an object of group_size, bits and mode",
                    shown(Some(other))
                ))
            }
        };
        overrides.insert(module.clone(), p);
    }
    Ok(Scheme {
        storage: Storage::Mlx(default),
        select: Select::Mlx(overrides),
    })
}

/// `group_size`, `bits` and `mode` of one object: the mode's own defaults where absent (an
/// override's mode defaults to affine, as `nn.quantize` does), each one MLX quantizes with.
fn params(o: &Map<String, Value>, field: &str) -> Result<MlxParams, String> {
    let mode = match o.get("mode") {
        None | Some(Value::Null) => MlxMode::Affine,
        Some(Value::String(m)) => match m.as_str() {
            "affine" => MlxMode::Affine,
            "mxfp4" => MlxMode::Mxfp4,
            "nvfp4" => MlxMode::Nvfp4,
            "mxfp8" => MlxMode::Mxfp8,
            other => {
                return Err(format!(
                "{field}.mode is {:?}, not a mode the gate decodes (affine, mxfp4, nvfp4, mxfp8)",
                other.chars().take(64).collect::<String>()
            ))
            }
        },
        Some(other) => {
            return Err(format!(
                "{field}.mode is {}, not a string",
                shown(Some(other))
            ))
        }
    };
    let ((bits, group), all_bits, all_groups) = mode.rules();
    let number = |key: &str, default: u64, allowed: &[u64]| match o.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) if allowed.contains(&n) => Ok(n),
            _ => Err(format!(
                "{field}.{key} is {}, not one of {allowed:?} ({} mode)",
                shown(Some(v)),
                mode.name()
            )),
        },
    };
    Ok(MlxParams {
        mode,
        bits: number("bits", bits, all_bits)? as u32,
        group: number("group_size", group, all_groups)?,
    })
}
