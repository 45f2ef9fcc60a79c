//! A Hugging Face folder quantized in the float and MLX schemes, laid out as each library writes it
//! (tensor names, element types, shapes and the config's statement, as compressed-tensors 0.20,
//! Transformers' fine-grained FP8, ModelOpt and mlx-lm write them; `differential::writers` holds the
//! layouts to the libraries' own files). The codes are a plain nearest-value quantization: the gate
//! reads layouts and scales, not how well the codes were chosen.

use super::pack_quantized::{is_linear, read_tensors, write_tensors, Tensor};
use half::bf16;
use serde_json::{json, Value};
use std::path::Path;

/// Who writes the FP8 or NVFP4 draft.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    CompressedTensors,
    HuggingFace,
    ModelOpt,
}

/// The grain of an FP8 weight's scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grain {
    Tensor,
    Channel,
    Block(usize, usize),
}

/// An MLX quantization: mode, bits, group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mlx {
    pub mode: &'static str,
    pub bits: u32,
    pub group: usize,
}

/// The E4M3 (`fn`) value of each code 0x00..=0x7e (the positive half; 0x7f is NaN).
fn e4m3_values() -> Vec<f32> {
    (0u8..0x7f)
        .map(|b| {
            let (e, m) = (i32::from(b >> 3), (b & 7) as f32);
            match e {
                0 => m / 8.0 * 2f32.powi(-6),
                e => (1.0 + m / 8.0) * 2f32.powi(e - 7),
            }
        })
        .collect()
}

/// The E4M3 code nearest `x` (saturating at 448).
fn e4m3(values: &[f32], x: f32) -> u8 {
    let a = x.abs();
    let i = values.partition_point(|v| *v < a).min(values.len() - 1);
    let i = if i > 0 && (a - values[i - 1]) <= (values[i] - a) {
        i - 1
    } else {
        i
    };
    i as u8 | if x < 0.0 && i > 0 { 0x80 } else { 0 }
}

/// E2M1's magnitudes, code 0..=7.
const E2M1: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

fn e2m1(x: f32) -> u8 {
    let a = x.abs();
    let i = (0..8)
        .min_by(|&i, &j| (E2M1[i] - a).abs().total_cmp(&(E2M1[j] - a).abs()))
        .unwrap_or(0) as u8;
    i | if x < 0.0 && i > 0 { 8 } else { 0 }
}

fn floats(t: &Tensor) -> Vec<f32> {
    t.3.chunks_exact(2)
        .map(|b| bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32())
        .collect()
}

fn bf16_bytes(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|v| bf16::from_f32(*v).to_bits().to_le_bytes())
        .collect()
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn amax(values: &[f32]) -> f32 {
    values.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6)
}

/// Quantizes every Linear of the folder's `model.safetensors` but those in `dense` with `one`, and
/// states `quantization` under `key` in config.json (and its copy, for MLX).
fn quantize_folder(
    dir: &Path,
    dense: &[&str],
    mut one: impl FnMut(&str, &Tensor) -> Vec<Tensor>,
    states: impl FnOnce(&mut Value),
) {
    let path = dir.join("model.safetensors");
    let mut out = Vec::new();
    for t in read_tensors(&path) {
        let module = t.0.strip_suffix(".weight").unwrap_or(&t.0).to_owned();
        if !is_linear(&t.0) || dense.contains(&module.as_str()) {
            out.push(t);
            continue;
        }
        out.extend(one(&module, &t));
    }
    write_tensors(&path, &out);
    let config_path = dir.join("config.json");
    let mut config: Value =
        serde_json::from_slice(&std::fs::read(&config_path).expect("config")).expect("json");
    states(&mut config);
    std::fs::write(
        config_path,
        serde_json::to_vec_pretty(&config).expect("json"),
    )
    .expect("write config");
}

/// FP8 E4M3 weights with a scale per `grain`, as `writer` names and states them.
pub fn fp8_quantize(dir: &Path, writer: Writer, grain: Grain, input_scale: bool) {
    fp8_quantize_but(dir, writer, grain, input_scale, &[])
}

/// [`fp8_quantize`], leaving the modules `dense` names dense (the config's lists are the caller's).
pub fn fp8_quantize_but(
    dir: &Path,
    writer: Writer,
    grain: Grain,
    input_scale: bool,
    dense: &[&str],
) {
    let table = e4m3_values();
    let one = |module: &str, t: &Tensor| {
        let (n, k) = (t.2[0] as usize, t.2[1] as usize);
        let w = floats(t);
        let (rows, cols) = match grain {
            Grain::Tensor => (n, k),
            Grain::Channel => (1, k),
            Grain::Block(r, c) => (r, c),
        };
        let (br, bc) = (n.div_ceil(rows), k.div_ceil(cols));
        let mut scales = vec![0f32; br * bc];
        for (i, s) in scales.iter_mut().enumerate() {
            let (r0, c0) = (i / bc * rows, i % bc * cols);
            let block: Vec<f32> = (r0..(r0 + rows).min(n))
                .flat_map(|r| (c0..(c0 + cols).min(k)).map(move |c| (r, c)))
                .map(|(r, c)| w[r * k + c])
                .collect();
            // Rounded to the scale's stored type before the codes are drawn from it.
            *s = match writer {
                Writer::CompressedTensors => bf16::from_f32(amax(&block) / 448.0).to_f32(),
                _ => amax(&block) / 448.0,
            };
        }
        let codes: Vec<u8> = (0..n * k)
            .map(|i| e4m3(&table, w[i] / scales[(i / k / rows) * bc + (i % k) / cols]))
            .collect();
        let name = |p: &str| format!("{module}.{p}");
        let scale_shape = match grain {
            Grain::Tensor if writer == Writer::CompressedTensors => vec![1],
            Grain::Tensor => vec![],
            _ => vec![br as u64, bc as u64],
        };
        let (scale_name, scale_type, scale_bytes) = match writer {
            Writer::CompressedTensors => ("weight_scale", "BF16", bf16_bytes(&scales)),
            Writer::HuggingFace => ("weight_scale_inv", "F32", f32_bytes(&scales)),
            Writer::ModelOpt => ("weight_scale", "F32", f32_bytes(&scales)),
        };
        let mut set = vec![
            (name("weight"), "F8_E4M3".to_owned(), t.2.clone(), codes),
            (
                name(scale_name),
                scale_type.to_owned(),
                scale_shape.clone(),
                scale_bytes,
            ),
        ];
        if input_scale {
            let (input, bytes) = match writer {
                Writer::CompressedTensors => ("input_scale", bf16_bytes(&[0.02])),
                Writer::HuggingFace => ("activation_scale", f32_bytes(&[0.02])),
                Writer::ModelOpt => ("input_scale", f32_bytes(&[0.02])),
            };
            set.push((
                name(input),
                scale_type.to_owned(),
                scale_shape.iter().take(1).map(|_| 1).collect(),
                bytes,
            ));
        }
        set
    };
    quantize_folder(dir, dense, one, |c| {
        c["quantization_config"] = match writer {
            Writer::CompressedTensors => {
                let (strategy, block) = match grain {
                    Grain::Tensor => ("tensor", Value::Null),
                    Grain::Channel => ("channel", Value::Null),
                    Grain::Block(r, c) => ("block", json!([r, c])),
                };
                let inputs = match input_scale {
                    true => {
                        json!({"dynamic": false, "num_bits": 8, "strategy": "tensor", "symmetric": true, "type": "float"})
                    }
                    false => {
                        json!({"dynamic": true, "num_bits": 8, "strategy": "token", "symmetric": true, "type": "float"})
                    }
                };
                let mut weights = json!({"dynamic": false, "group_size": null, "num_bits": 8,
                    "strategy": strategy, "symmetric": true, "type": "float"});
                if !block.is_null() {
                    weights["block_structure"] = block;
                }
                compressed_tensors("float-quantized", weights, inputs)
            }
            // As Transformers 5.14's `save_pretrained` writes it after `FineGrainedFP8Config`.
            Writer::HuggingFace => json!({
                "quant_method": "fp8",
                "activation_scheme": if input_scale { "static" } else { "dynamic" },
                "dequantize": false,
                "modules_to_not_convert": null,
                "scale_fmt": "float",
                "weight_block_size": match grain { Grain::Block(r, c) => json!([r, c]), _ => Value::Null },
            }),
            Writer::ModelOpt => modelopt("FP8"),
        }
    });
}

fn compressed_tensors(format: &str, weights: Value, inputs: Value) -> Value {
    json!({
        "config_groups": {"group_0": {"format": format, "input_activations": inputs,
            "output_activations": null, "targets": ["Linear"], "weights": weights}},
        "format": format, "global_compression_ratio": null, "ignore": [], "kv_cache_scheme": null,
        "quant_method": "compressed-tensors", "quantization_status": "compressed",
        "version": "0.20.0",
    })
}

/// config.json's `quantization_config` as ModelOpt 0.47's `export_hf_checkpoint` writes it: the
/// modules it left alone under `ignore` (its hf_quant_config.json says `exclude_modules`).
fn modelopt(algo: &str) -> Value {
    let (bits, group) = match algo {
        "FP8" => (8, Value::Null),
        _ => (4, json!(16)),
    };
    let mut args = json!({"dynamic": false, "num_bits": bits, "type": "float"});
    if !group.is_null() {
        args["group_size"] = group;
    }
    json!({"config_groups": {"group_0": {"input_activations": args, "weights": args,
            "targets": ["Linear"]}},
        "ignore": ["lm_head", "model.embed_tokens"], "quant_algo": algo,
        "producer": {"name": "modelopt", "version": "0.47.0"}, "quant_method": "modelopt"})
}

/// NVFP4: E2M1 codes two to a byte (the even column in the low nibble), an E4M3 scale per 16, and
/// an F32 global scale, as compressed-tensors (`nvfp4-pack-quantized`) or ModelOpt names them.
pub fn nvfp4_quantize(dir: &Path, writer: Writer, input_scale: bool) {
    let table = e4m3_values();
    let one = |module: &str, t: &Tensor| {
        let (n, k) = (t.2[0] as usize, t.2[1] as usize);
        let w = floats(t);
        let global = 448.0 * 6.0 / amax(&w);
        let mut scales = Vec::with_capacity(n * k / 16);
        let mut packed = vec![0u8; n * k / 2];
        for r in 0..n {
            for g in 0..k / 16 {
                let group = &w[r * k + g * 16..r * k + g * 16 + 16];
                let code = e4m3(&table, amax(group) / 6.0 * global).max(1);
                let s = table[code as usize] / global;
                scales.push(code);
                for (j, v) in group.iter().enumerate() {
                    let c = r * k + g * 16 + j;
                    packed[c / 2] |= e2m1(v / s) << (4 * (c % 2));
                }
            }
        }
        let name = |p: &str| format!("{module}.{p}");
        let modelopt = writer == Writer::ModelOpt;
        let half = vec![n as u64, (k / 2) as u64];
        let mut set = vec![
            (
                name(if modelopt { "weight" } else { "weight_packed" }),
                "U8".to_owned(),
                half,
                packed,
            ),
            (
                name("weight_scale"),
                "F8_E4M3".to_owned(),
                vec![n as u64, (k / 16) as u64],
                scales,
            ),
        ];
        // compressed-tensors stores the global scale (448 * 6 / amax); ModelOpt its inverse.
        let (global_name, global_value, shape) = match modelopt {
            true => ("weight_scale_2", 1.0 / global, vec![]),
            false => ("weight_global_scale", global, vec![1]),
        };
        set.push((
            name(global_name),
            "F32".to_owned(),
            shape.clone(),
            f32_bytes(&[global_value]),
        ));
        if input_scale {
            let input = if modelopt {
                "input_scale"
            } else {
                "input_global_scale"
            };
            set.push((name(input), "F32".to_owned(), shape, f32_bytes(&[300.0])));
        }
        set
    };
    quantize_folder(dir, &[], one, |c| {
        c["quantization_config"] = match writer {
            Writer::ModelOpt => modelopt("NVFP4"),
            _ => {
                let weights = json!({"dynamic": false, "group_size": 16, "num_bits": 4,
                    "scale_dtype": "torch.float8_e4m3fn", "strategy": "tensor_group",
                    "symmetric": true, "type": "float"});
                let inputs = match input_scale {
                    true => json!({"dynamic": "local", "group_size": 16, "num_bits": 4,
                        "strategy": "tensor_group", "symmetric": true, "type": "float"}),
                    false => Value::Null,
                };
                compressed_tensors("nvfp4-pack-quantized", weights, inputs)
            }
        }
    });
}

/// MLX's `quantize`: each row's codes one little-endian bit stream in U32 words, `scales` (and,
/// affine, `biases`) per group; the Linears in `dense` left dense, those in `overrides` quantized
/// with their own parameters and named in the config, as mlx-lm's `quantize_model` writes them.
pub fn mlx_quantize(dir: &Path, default: Mlx, dense: &[&str], overrides: &[(&str, Mlx)]) {
    let table = e4m3_values();
    let one = |module: &str, t: &Tensor| {
        let p = overrides
            .iter()
            .find(|(m, _)| *m == module)
            .map_or(default, |(_, p)| *p);
        let (n, k) = (t.2[0] as usize, t.2[1] as usize);
        let w = floats(t);
        let (bits, group) = (p.bits as usize, p.group);
        let mut codes = vec![0u32; n * k];
        let (mut scales, mut biases, mut bytes) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..n {
            for g in 0..k / group {
                let values = &w[r * k + g * group..r * k + (g + 1) * group];
                let at = r * k + g * group;
                if p.mode == "affine" {
                    let (lo, hi) = values
                        .iter()
                        .fold((f32::MAX, f32::MIN), |(l, h), v| (l.min(*v), h.max(*v)));
                    let steps = ((1u32 << bits) - 1) as f32;
                    let s = bf16::from_f32(((hi - lo) / steps).max(1e-6)).to_f32();
                    let b = bf16::from_f32(lo).to_f32();
                    scales.push(s);
                    biases.push(b);
                    for (j, v) in values.iter().enumerate() {
                        codes[at + j] = ((v - b) / s).round().clamp(0.0, steps) as u32;
                    }
                } else {
                    // A power-of-two (E8M0) or E4M3 scale; FP4 or FP8 codes of value / scale.
                    let top = if bits == 4 { 6.0 } else { 448.0 };
                    let (scale, byte) = if p.mode == "nvfp4" {
                        let code = e4m3(&table, amax(values) / top).max(1);
                        (table[code as usize], code)
                    } else {
                        let e = (amax(values) / top).log2().ceil().clamp(-127.0, 127.0) as i32;
                        (2f32.powi(e), (e + 127) as u8)
                    };
                    bytes.push(byte);
                    for (j, v) in values.iter().enumerate() {
                        codes[at + j] = match bits {
                            4 => u32::from(e2m1(v / scale)),
                            _ => u32::from(e4m3(&table, v / scale)),
                        };
                    }
                }
            }
        }
        let words_per_row = k * bits / 32;
        let mut words = vec![0u32; n * words_per_row];
        for r in 0..n {
            for c in 0..k {
                let bit = c * bits;
                let v = u64::from(codes[r * k + c]) << (bit % 32);
                let at = r * words_per_row + bit / 32;
                words[at] |= v as u32;
                if bit % 32 + bits > 32 {
                    words[at + 1] |= (v >> 32) as u32;
                }
            }
        }
        let name = |p: &str| format!("{module}.{p}");
        let cols = vec![n as u64, (k / group) as u64];
        let mut set = vec![(
            name("weight"),
            "U32".to_owned(),
            vec![n as u64, words_per_row as u64],
            words.iter().flat_map(|w| w.to_le_bytes()).collect(),
        )];
        if p.mode == "affine" {
            set.push((
                name("scales"),
                "BF16".to_owned(),
                cols.clone(),
                bf16_bytes(&scales),
            ));
            set.push((name("biases"), "BF16".to_owned(), cols, bf16_bytes(&biases)));
        } else {
            set.push((name("scales"), "U8".to_owned(), cols, bytes));
        }
        set
    };
    quantize_folder(dir, dense, one, |c| {
        let mut q =
            json!({"group_size": default.group, "bits": default.bits, "mode": default.mode});
        for (module, p) in overrides {
            q[*module] = json!({"group_size": p.group, "bits": p.bits, "mode": p.mode});
        }
        c["quantization"] = q.clone();
        c["quantization_config"] = q;
    });
}
