//! The schemes written by a vendor's own tool rather than compressed-tensors: Hugging Face's `fp8`
//! (Transformers' fine-grained FP8, DeepSeek-V3's layout: `weight_scale_inv` per 128x128 block) and
//! NVIDIA ModelOpt's `NVFP4` and `FP8` (its `quantization_config`, or the `quantization` object of
//! its `hf_quant_config.json`).

use super::{block, shown, strings, text, Fp8Scale, Matchers, Scheme, Select, Storage, Writer};
use serde_json::{Map, Value};

/// Transformers' `FineGrainedFP8Config`: `weight_block_size` (absent or null: one scale per
/// tensor), `activation_scheme` (`dynamic`, or `static` with an `activation_scale` per module),
/// `modules_to_not_convert`.
pub(super) fn hugging_face_fp8(q: &Map<String, Value>) -> Result<Scheme, String> {
    let scale = match q.get("weight_block_size") {
        None | Some(Value::Null) => Fp8Scale::Tensor,
        Some(v) => block(v, "weight_block_size")?,
    };
    // `ue8m0` stores the block scales as F8_E8M0 powers of two, which the gate does not decode.
    match text(q.get("scale_fmt")).as_deref() {
        None | Some("float") => {}
        Some(other) => {
            return Err(format!(
                "scale_fmt is {other:?}, not \"float\" (the gate reads float block scales)"
            ))
        }
    }
    let input_scale = match text(q.get("activation_scheme")).as_deref() {
        None | Some("dynamic") => false,
        Some("static") => true,
        Some(other) => {
            return Err(format!(
                "activation_scheme is {other:?}, not \"dynamic\" or \"static\""
            ))
        }
    };
    // Transformers 5.19 converts the modules `modules_to_convert` lists as well (embedding tables
    // stored FP8, `replace_with_fp8_embedding`): a layout the gate does not read.
    if q.get("modules_to_convert")
        .is_some_and(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
    {
        return Err(format!(
            "modules_to_convert is {} (Transformers stores those modules FP8 too, embeddings among them), which the gate does not read",
            shown(q.get("modules_to_convert"))
        ));
    }
    let mut keys = Matchers::default();
    let mut budget = super::MAX_PATTERNS;
    let stated = q.get("modules_to_not_convert").filter(|v| !v.is_null());
    for key in strings(stated, "modules_to_not_convert")? {
        keys.push_pattern(key, key, "modules_to_not_convert", &mut budget)?;
    }
    // Unstated, Transformers leaves the output head unconverted (`get_keys_to_not_convert`).
    if stated.is_none() {
        keys.push_pattern("lm_head", "lm_head", "modules_to_not_convert", &mut budget)?;
    }
    Ok(Scheme {
        storage: Storage::Fp8 {
            writer: Writer::HuggingFace,
            scale,
            input_scale,
        },
        select: Select::NotConverted {
            keys,
            // vLLM's fp8 reads `ignored_layers` first (Transformers does not read it at all).
            ignored_layers: strings(q.get("ignored_layers"), "ignored_layers")?
                .into_iter()
                .map(str::to_owned)
                .collect(),
        },
    })
}

/// ModelOpt's `quant_algo` (`NVFP4`, `W4A16_NVFP4` or `FP8`), `group_size` and `exclude_modules`
/// or `ignore` (globs), stated flat or under `quantization` (as `hf_quant_config.json` nests them).
pub(super) fn modelopt(q: &Map<String, Value>) -> Result<Scheme, String> {
    let (q, nested) = match q.get("quantization") {
        Some(Value::Object(inner)) => (inner, true),
        _ => (q, false),
    };
    let storage = match text(q.get("quant_algo")).as_deref() {
        // W4A16_NVFP4 stores what NVFP4 does, with no input scales (the inputs stay 16-bit).
        Some("NVFP4" | "W4A16_NVFP4") => {
            match q.get("group_size").and_then(Value::as_u64) {
                None | Some(16) => {}
                Some(g) => return Err(format!("group_size is {g}: NVFP4 scales groups of 16")),
            }
            Storage::Nvfp4 {
                writer: Writer::ModelOpt,
            }
        }
        Some("FP8") => Storage::Fp8 {
            writer: Writer::ModelOpt,
            scale: Fp8Scale::Tensor,
            input_scale: true,
        },
        Some(other) => {
            return Err(format!(
                "quant_algo {other:?} is not one the gate decodes (it reads NVFP4 and FP8)"
            ))
        }
        None => return Err(format!("quant_algo is {}", shown(q.get("quant_algo")))),
    };
    let mut globs = Matchers::default();
    let mut budget = super::MAX_PATTERNS;
    // ModelOpt 0.47 states the modules it left alone as `exclude_modules` in hf_quant_config.json's
    // nested object and as `ignore` in config.json's flat quantization_config
    // (`["lm_head", "model.embed_tokens"]`). vLLM reads the nested object's `exclude_modules` only
    // (`ModelOptQuantConfigBase.from_config`), so an `ignore` there leaves nothing alone.
    let mut listed = strings(q.get("exclude_modules"), "exclude_modules")?;
    if !nested {
        listed.extend(strings(q.get("ignore"), "ignore")?);
    }
    for glob in listed {
        if !glob.contains(['*', '?', '[']) {
            globs.names.insert(glob.to_owned());
            continue;
        }
        globs.push_pattern(glob, &glob_pattern(glob), "exclude_modules", &mut budget)?;
    }
    Ok(Scheme {
        storage,
        select: Select::Excluded(globs),
    })
}

/// A shell glob as `fnmatch` reads it (`*` any run, `?` one character, `[...]` a class), as a
/// regular expression matching the whole name.
fn glob_pattern(glob: &str) -> String {
    let mut out = String::from("^(?:");
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => out.push_str(".*"),
            '?' => out.push('.'),
            '[' => {
                let mut class = String::new();
                let mut closed = false;
                for d in chars.by_ref() {
                    if d == ']' && !class.is_empty() {
                        closed = true;
                        break;
                    }
                    class.push(d);
                }
                match (closed, class.strip_prefix('!')) {
                    (false, _) => out.push_str(&regex::escape(&format!("[{class}"))),
                    (true, Some(rest)) => {
                        out.push_str(&format!("[^{}]", rest.replace('\\', "\\\\")))
                    }
                    (true, None) => out.push_str(&format!("[{}]", class.replace('\\', "\\\\"))),
                }
            }
            c => out.push_str(&regex::escape(&c.to_string())),
        }
    }
    out.push_str(")$");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glob_matches_the_whole_name() {
        let re = regex::Regex::new(&glob_pattern("layers.*.mlp.[gu]*_proj")).unwrap();
        assert!(re.is_match("layers.0.mlp.gate_proj"));
        assert!(re.is_match("layers.12.mlp.up_proj"));
        assert!(!re.is_match("layers.0.mlp.down_proj"));
        assert!(!re.is_match("xlayers.0.mlp.up_proj.extra"));
        let re = regex::Regex::new(&glob_pattern("fc?")).unwrap();
        assert!(re.is_match("fc1") && !re.is_match("fc"));
    }
}
