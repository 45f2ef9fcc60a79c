//! A Hugging Face folder quantized as compressed-tensors' `pack-quantized` format writes one (W4A16,
//! W8A16; `compressors/quantized_compressors/pack_quantized.py`): each quantized Linear `X.weight`
//! becomes `X.weight_packed` (I32, element j of a row's word at bit j * bits, stored with the offset
//! 2^(bits-1) that makes it unsigned), `X.weight_scale` (BF16 `[N, K / group]` or `[N, 1]`),
//! `X.weight_shape` (I64 `[2]`) and, asymmetric, `X.weight_zero_point` (I32, packed along N), and
//! config.json gains the `quantization_config` llm-compressor writes.

use half::bf16;
use serde_json::{json, Value};
use std::path::Path;

/// One tensor of a safetensors file: name, dtype, shape, bytes.
pub type Tensor = (String, String, Vec<u64>, Vec<u8>);

/// What to quantize, and how.
#[derive(Clone, Copy, Debug)]
pub struct PackOptions {
    pub bits: u32,
    /// `None`: one scale per row (`strategy: channel`).
    pub group: Option<u64>,
    pub symmetric: bool,
    /// Module names left dense and listed in `ignore`.
    pub ignore: &'static [&'static str],
}

impl Default for PackOptions {
    fn default() -> PackOptions {
        PackOptions {
            bits: 4,
            group: Some(32),
            symmetric: true,
            ignore: &[],
        }
    }
}

/// A safetensors file's tensors, in file order.
pub fn read_tensors(path: &Path) -> Vec<Tensor> {
    let bytes = std::fs::read(path).expect("read the weights");
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let header: serde_json::Map<String, Value> =
        serde_json::from_slice(&bytes[8..8 + n]).expect("a header");
    let data = &bytes[8 + n..];
    let mut placed: Vec<(u64, Tensor)> = header
        .iter()
        .filter(|(k, _)| *k != "__metadata__")
        .map(|(name, v)| {
            let [b, e] = [0, 1].map(|i| v["data_offsets"][i].as_u64().expect("an offset"));
            let shape = v["shape"]
                .as_array()
                .expect("a shape")
                .iter()
                .map(|d| d.as_u64().expect("a dimension"))
                .collect();
            let dtype = v["dtype"].as_str().expect("a dtype").to_owned();
            let bytes = data[b as usize..e as usize].to_vec();
            (b, (name.clone(), dtype, shape, bytes))
        })
        .collect();
    placed.sort_by_key(|(b, _)| *b);
    placed.into_iter().map(|(_, t)| t).collect()
}

/// Writes `tensors` as a safetensors file, in that order.
pub fn write_tensors(path: &Path, tensors: &[Tensor]) {
    let mut offset = 0usize;
    let mut head = serde_json::Map::new();
    for (name, dtype, shape, data) in tensors {
        head.insert(
            name.clone(),
            json!({"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + data.len()]}),
        );
        offset += data.len();
    }
    let mut header = serde_json::to_vec(&Value::Object(head)).expect("a header");
    while !header.len().is_multiple_of(8) {
        header.push(b' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header);
    for t in tensors {
        out.extend(&t.3);
    }
    std::fs::write(path, out).expect("write the weights");
}

/// Whether a bare or `model.` name is a Linear's weight the writer quantizes (`targets: ["Linear"]`).
pub(crate) fn is_linear(name: &str) -> bool {
    name.ends_with("_proj.weight") || name.ends_with("fc.weight") || name == "lm_head.weight"
}

/// Quantizes the folder's `model.safetensors` (BF16) in place and states the scheme in config.json.
pub fn pack_quantize(dir: &Path, options: PackOptions) {
    let path = dir.join("model.safetensors");
    let mut out = Vec::new();
    for t in read_tensors(&path) {
        let module = t.0.strip_suffix(".weight").unwrap_or(&t.0).to_owned();
        if !is_linear(&t.0) || options.ignore.contains(&module.as_str()) {
            out.push(t);
            continue;
        }
        out.extend(quantize(&module, &t, options));
    }
    write_tensors(&path, &out);
    let config_path = dir.join("config.json");
    let mut config: Value =
        serde_json::from_slice(&std::fs::read(&config_path).expect("config")).expect("json");
    let (strategy, group) = match options.group {
        Some(g) => ("group", json!(g)),
        None => ("channel", Value::Null),
    };
    config["quantization_config"] = json!({
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "quantization_status": "compressed",
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "weights": {
                "num_bits": options.bits, "type": "int", "symmetric": options.symmetric,
                "strategy": strategy, "group_size": group, "dynamic": false, "observer": "minmax"
            },
            "input_activations": null,
            "output_activations": null
        }},
        "ignore": options.ignore,
    });
    std::fs::write(
        config_path,
        serde_json::to_vec_pretty(&config).expect("json"),
    )
    .expect("write config");
}

/// One BF16 `[N, K]` weight as its quantized set.
fn quantize(module: &str, t: &Tensor, options: PackOptions) -> Vec<Tensor> {
    let (n, k) = (t.2[0] as usize, t.2[1] as usize);
    let w: Vec<f32> =
        t.3.chunks_exact(2)
            .map(|b| bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32())
            .collect();
    let bits = options.bits;
    let group = options.group.map_or(k, |g| g as usize);
    let columns = k / group;
    let (qmin, qmax) = (-(1i32 << (bits - 1)), (1i32 << (bits - 1)) - 1);
    let mut q = vec![0i32; n * k];
    let mut scales = Vec::with_capacity(n * columns);
    let mut zeros = vec![0i32; n * columns];
    for r in 0..n {
        for c in 0..columns {
            let values = &w[r * k + c * group..r * k + (c + 1) * group];
            let (lo, hi) = values
                .iter()
                .fold((0f32, 0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            let (scale, zero) = if options.symmetric {
                let s = lo.abs().max(hi) / qmax as f32;
                (if s > 0.0 { s } else { 1.0 }, 0)
            } else {
                let s = (hi - lo) / (qmax - qmin) as f32;
                let s = if s > 0.0 { s } else { 1.0 };
                (s, (qmin - (lo / s).round() as i32).clamp(qmin, qmax))
            };
            let scale = bf16::from_f32(scale);
            let s = scale.to_f32();
            scales.push(scale);
            zeros[r * columns + c] = zero;
            for (j, v) in values.iter().enumerate() {
                q[r * k + c * group + j] = ((v / s).round() as i32 + zero).clamp(qmin, qmax);
            }
        }
    }
    let name = |part: &str| format!("{module}.{part}");
    let mut set = vec![
        (
            name("weight_packed"),
            "I32".to_owned(),
            vec![n as u64, (k * bits as usize).div_ceil(32) as u64],
            pack(&q, n, k, bits, false),
        ),
        (
            name("weight_scale"),
            "BF16".to_owned(),
            vec![n as u64, columns as u64],
            scales
                .iter()
                .flat_map(|s| s.to_bits().to_le_bytes())
                .collect(),
        ),
        (
            name("weight_shape"),
            "I64".to_owned(),
            vec![2],
            [n as i64, k as i64]
                .iter()
                .flat_map(|d| d.to_le_bytes())
                .collect(),
        ),
    ];
    if !options.symmetric {
        set.push((
            name("weight_zero_point"),
            "I32".to_owned(),
            vec![(n * bits as usize).div_ceil(32) as u64, columns as u64],
            pack(&zeros, n, columns, bits, true),
        ));
    }
    set
}

/// `pack_to_int32`: each value offset by 2^(bits-1) to unsigned, element j of a word at bit j *
/// bits, packed along the rows' columns (or, `along_rows`, down each column), padded with zeros.
fn pack(values: &[i32], rows: usize, cols: usize, bits: u32, along_rows: bool) -> Vec<u8> {
    let per = 32 / bits as usize;
    let offset = 1i32 << (bits - 1);
    let mask = (1u32 << bits) - 1;
    let (out_rows, out_cols) = if along_rows {
        (rows.div_ceil(per), cols)
    } else {
        (rows, cols.div_ceil(per))
    };
    let mut words = vec![0u32; out_rows * out_cols];
    for r in 0..rows {
        for c in 0..cols {
            let v = ((values[r * cols + c] + offset) as u32) & mask;
            let (wr, wc, j) = if along_rows {
                (r / per, c, r % per)
            } else {
                (r, c / per, c % per)
            };
            words[wr * out_cols + wc] |= v << (bits as usize * j);
        }
    }
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}
