//! The source checkpoint beside a synthetic package (`--source`): bf16 values drawn from a seed, the
//! package's grids quantized from exactly those values, and the checkpoint written as its publisher
//! ships one (bare names, fc plain 2-D, `config.json` plus `model.safetensors` or index-named shards).

use super::{ggml, header_bytes, normal, set_code, write_group, Entry, Package};
use dflash_gate::__private::dtype::Dtype;
use dflash_gate::__private::tile::{GridGeometry, TILE_BYTES, TILE_COLS, TILE_ROWS};
use half::bf16;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::io::{self, Write};
use std::path::Path;

/// How the package's q4_1 groups are fitted to their source values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantizer {
    /// ggml's reference: `d = (max - min) / 15`, `m = min`, codes rounded.
    MinMax,
    /// Codes chosen as by `MinMax`, then `d` and `m` refitted by least squares over those codes, as
    /// ggml's importance-matrix path (`make_qkx3_quants`) refits after choosing codes.
    Refit,
    /// A converter with a wrong range, for a negative control: each group's range halved about its
    /// centre (`m = min + (max - min) / 4`, `d = (max - min) / 30`), values clamped into it, codes
    /// rounded. Every value inside the range is within half a step; a quarter of the values at each
    /// end lie up to 7.5 steps outside it.
    Clipping,
    /// ggml's importance-matrix path itself ([`ggml`], `quantize_row_q4_1_impl` with
    /// `make_qkx3_quants`) under a uniform importance (`qw[j] = 1` for every column): each element
    /// weighted by `sqrt(sigma2 + x^2)`, `sigma2` the mean of `x^2` over the element's whole row, and
    /// 37 candidate ranges searched for the least weighted squared error. `d` and `m` are rounded from
    /// `f32` to bf16 directly (nearest-even, as `half::bf16::from_f32` rounds). A converter from GGUF
    /// would go through f16 first (ggml stores `d` and `-min` as f16, and the converter widens those
    /// to bf16); measured over a million groups each of normal, Student-t and outlier-laden rows, that
    /// double rounding gives nearly the same results as the direct one (under a uniform importance, one
    /// group in a million of the normal and Student-t rows then has a value up to 1.03 steps outside
    /// its range, against none rounded directly).
    GgmlImatrix,
}

/// How the checkpoint is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceOptions {
    /// BF16 (as published), F16 or F32.
    pub dtype: Dtype,
    /// 1: `model.safetensors`; more: that many shards named by `model.safetensors.index.json`.
    pub shards: usize,
    pub quantizer: Quantizer,
    /// A bare tensor name left out of the checkpoint (a negative control's source).
    pub omit: Option<&'static str>,
    /// With one file, an index naming it too, as mlx-lm's `save_model` writes every model.
    pub index_one_file: bool,
}

impl Default for SourceOptions {
    fn default() -> SourceOptions {
        SourceOptions {
            dtype: Dtype::Bf16,
            shards: 1,
            quantizer: Quantizer::MinMax,
            omit: None,
            index_one_file: false,
        }
    }
}

/// The checkpoint's config.json for a package's, as z-lab releases one: `model_type: "qwen3"` beside
/// the draft architecture, `target_layer_ids` and `mask_token_id` in `dflash_config`, and the
/// bookkeeping Transformers writes (its version, the dtype, token ids of the target's tokenizer,
/// `use_cache`, ...), none of which the package converted from it keeps.
pub fn checkpoint_config(package: &serde_json::Value) -> serde_json::Value {
    use serde_json::{json, Value};
    let mut c = package.clone();
    let Some(top) = c.as_object_mut() else {
        return c;
    };
    let assistant = top.get("architectures") == Some(&json!(["MuseGlimmerAssistantModel"]));
    if !top.contains_key("architectures") {
        top.insert("architectures".into(), json!(["DFlashDraftModel"]));
    }
    if !assistant {
        top.insert("model_type".into(), json!("qwen3"));
        let mut nested = match top.remove("dflash_config") {
            Some(Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        for key in ["target_layer_ids", "mask_token_id"] {
            if let Some(v) = top.remove(key) {
                nested.insert(key.into(), v);
            }
        }
        top.insert("dflash_config".into(), Value::Object(nested));
    }
    top.remove("torch_dtype");
    let layers = top.get("num_hidden_layers").cloned().unwrap_or(json!(1));
    for (key, value) in [
        ("transformers_version", json!("4.57.1")),
        ("dtype", json!("bfloat16")),
        ("use_cache", json!(true)),
        ("initializer_range", json!(0.02)),
        ("attention_dropout", json!(0.0)),
        ("max_window_layers", layers),
        ("use_sliding_window", json!(false)),
        ("tie_word_embeddings", json!(false)),
        ("rope_scaling", Value::Null),
        ("bos_token_id", json!(1)),
        ("eos_token_id", json!(2)),
    ] {
        top.entry(key).or_insert(value);
    }
    c
}

/// Draws a bf16 source matrix for every grid of `package` (from `seed`), quantizes the grid from it,
/// and writes the checkpoint (every non-scalar tensor of the package, under its bare name) into `dir`.
/// One tensor's values are in memory at a time, so the reference geometry's checkpoint costs no more
/// than its largest matrix.
pub fn write_source(
    package: &mut Package,
    dir: &Path,
    options: SourceOptions,
    seed: u64,
) -> io::Result<()> {
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_vec_pretty(&checkpoint_config(&package.config))?,
    )?;
    let mut plan: Vec<(String, Vec<u64>, usize)> = Vec::new();
    for (i, t) in package.tensors.iter().enumerate() {
        if t.name.starts_with("dflash.") {
            continue;
        }
        let name = t.name.strip_prefix("model.").unwrap_or(&t.name).to_owned();
        let shape = match (t.dtype, t.shape.as_slice()) {
            (Dtype::I8, _) => {
                let (n, k) = grid_dims(&name, &package.geometry).ok_or_else(|| {
                    io::Error::other(format!(
                        "{name}: only projections' grids have a source here"
                    ))
                })?;
                vec![n, k]
            }
            (_, [blocks, cols, 32]) if is_fc(&name) => vec![blocks * 32, *cols],
            (_, shape) => shape.to_vec(),
        };
        plan.push((name, shape, i));
    }
    plan.sort();
    if let Some(omit) = options.omit {
        plan.retain(|(name, _, _)| name != omit);
    }
    // As many shards as asked (each holding at least one tensor), the tensors spread evenly, so that a
    // file named `-of-N` has N siblings.
    let shards = options.shards.clamp(1, plan.len().max(1));
    let bounds: Vec<usize> = (0..=shards).map(|s| s * plan.len() / shards).collect();
    let mut weight_map = serde_json::Map::new();
    for (s, chunk) in bounds.windows(2).map(|w| &plan[w[0]..w[1]]).enumerate() {
        let file_name = if shards == 1 {
            "model.safetensors".to_owned()
        } else {
            format!("model-{:05}-of-{shards:05}.safetensors", s + 1)
        };
        let mut entries = Vec::new();
        let mut offset = 0u64;
        for (name, shape, _) in chunk {
            let len = shape.iter().product::<u64>() * options.dtype.size();
            entries.push(Entry {
                name: name.clone(),
                dtype: options.dtype.name().to_owned(),
                shape: shape.iter().map(|&d| d as i64).collect(),
                offsets: [offset, offset + len],
            });
            offset += len;
            weight_map.insert(name.clone(), file_name.clone().into());
        }
        let header = header_bytes(&entries, &[]);
        let mut file = io::BufWriter::new(std::fs::File::create(dir.join(&file_name))?);
        file.write_all(&(header.len() as u64).to_le_bytes())?;
        file.write_all(&header)?;
        for (name, shape, i) in chunk {
            let t = &mut package.tensors[*i];
            let values = if t.dtype == Dtype::I8 {
                let (n, k) = (shape[0], shape[1]);
                let values = source_matrix(n, k, matrix_seed(seed, *i));
                t.data = quantize(n, k, &values, options.quantizer);
                values
            } else {
                let values: Vec<f32> = t
                    .data
                    .chunks_exact(2)
                    .map(|b| bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32())
                    .collect();
                if t.shape.len() == 3 && is_fc(name) {
                    unblock(&values, shape[0], shape[1])
                } else {
                    values
                }
            };
            file.write_all(&to_bytes(&values, options.dtype))?;
        }
        file.flush()?;
    }
    if shards > 1 || options.index_one_file {
        let index = serde_json::json!({ "metadata": {}, "weight_map": weight_map });
        std::fs::write(
            dir.join("model.safetensors.index.json"),
            serde_json::to_vec_pretty(&index)?,
        )?;
    }
    Ok(())
}

/// The seed of the source matrix of the package's tensor `i`.
pub(crate) fn matrix_seed(seed: u64, i: usize) -> u64 {
    seed ^ (0x5851_f42d * (i as u64 + 1))
}

/// The source values [`write_source`] (given `seed`) draws for the package's grid `name`, as N, K and
/// row-major values: for a control that quantizes one grid another way.
pub fn grid_source(package: &Package, name: &str, seed: u64) -> Option<(u64, u64, Vec<f32>)> {
    let i = package.tensors.iter().position(|t| t.name == name)?;
    let bare = name.strip_prefix("model.").unwrap_or(name);
    let (n, k) = grid_dims(bare, &package.geometry)?;
    Some((n, k, source_matrix(n, k, matrix_seed(seed, i))))
}

/// Values (already bf16-exact) as the checkpoint stores them.
fn to_bytes(values: &[f32], dtype: Dtype) -> Vec<u8> {
    match dtype {
        Dtype::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        Dtype::F16 => values
            .iter()
            .flat_map(|&v| half::f16::from_f32(v).to_bits().to_le_bytes())
            .collect(),
        _ => values
            .iter()
            .flat_map(|&v| bf16::from_f32(v).to_bits().to_le_bytes())
            .collect(),
    }
}

/// A gridded matrix's N x K from its name and the geometry: a projection, or a DFlash2 matrix.
fn grid_dims(name: &str, g: &super::Geometry) -> Option<(u64, u64)> {
    match dflash_gate::__private::family::Naming::BARE.role(name)? {
        dflash_gate::__private::family::Role::Projection { projection, .. } => {
            Some(g.dims(projection))
        }
        role => super::dflash2::grid_dims(g, role),
    }
}

/// Only the fusion matrix is row-blocked; other 3-D tensors (a DFlash2 base kernel) are as declared.
fn is_fc(name: &str) -> bool {
    dflash_gate::__private::family::source_name(name)
        .is_some_and(|s| s.role == dflash_gate::__private::family::Role::Fc)
}

/// Row-major N x K bf16-exact values, each row with its own spread as trained projections have.
pub fn source_matrix(n: u64, k: u64, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::with_capacity((n * k) as usize);
    for row in 0..n {
        let sigma = 0.02 * (1.0 + 0.5 * (row % 7) as f32 / 7.0);
        for _ in 0..k {
            out.push(bf16::from_f32(normal(&mut rng) * sigma).to_f32());
        }
    }
    out
}

/// The q4_1 grid of a row-major N x K matrix. Row by row, since a quantizer may look at the whole row
/// a group is in ([`Quantizer::GgmlImatrix`] weighs by the row's mean square); each group is written
/// into its own place in its tile, so the order leaves the others' grids as they were.
pub fn quantize(n: u64, k: u64, values: &[f32], quantizer: Quantizer) -> Vec<u8> {
    let g = GridGeometry::new(n, k).expect("grid geometry");
    let mut out = vec![0u8; g.bytes() as usize];
    let uniform = vec![1.0f32; k as usize];
    for (row, source) in values.chunks_exact(k as usize).take(n as usize).enumerate() {
        let blocks = match quantizer {
            Quantizer::GgmlImatrix => ggml::quantize_row_q4_1(source, &uniform),
            _ => Vec::new(),
        };
        let (tile_row, r) = (row / TILE_ROWS as usize, row % TILE_ROWS as usize);
        for (b, group) in source.chunks_exact(32).enumerate() {
            let col = b * 32;
            let t = tile_row * g.col_blocks as usize + col / TILE_COLS as usize;
            let tile = &mut out[t * TILE_BYTES as usize..(t + 1) * TILE_BYTES as usize];
            let c = (col % TILE_COLS as usize) / 32;
            let group: &[f32; 32] = group.try_into().expect("32 values");
            match quantizer {
                Quantizer::MinMax => write_group(tile, c, r, group),
                Quantizer::Refit => write_group_refit(tile, c, r, group),
                Quantizer::Clipping => write_group_clipping(tile, c, r, group),
                Quantizer::GgmlImatrix => write_block(tile, c, r, &blocks[b]),
            }
        }
    }
    out
}

/// Group (c, r) of a tile as ggml's quantizer left it: `d` and `m` rounded to bf16 (see
/// [`Quantizer::GgmlImatrix`]), codes as chosen against the unrounded ones.
fn write_block(tile: &mut [u8], c: usize, r: usize, block: &ggml::Block) {
    let i = c * 32 + r;
    let (d, m) = (bf16::from_f32(block.d), bf16::from_f32(block.m));
    tile[2 * i..2 * i + 2].copy_from_slice(&d.to_bits().to_le_bytes());
    tile[512 + 2 * i..512 + 2 * i + 2].copy_from_slice(&m.to_bits().to_le_bytes());
    for (j, &q) in block.codes.iter().enumerate() {
        set_code(tile, c * 32 + j, r, q);
    }
}

/// Codes as the reference quantizer picks them, then `d` and `m` by least squares over those codes.
fn write_group_refit(tile: &mut [u8], c: usize, r: usize, weights: &[f32; 32]) {
    write_group(tile, c, r, weights);
    let codes: Vec<f64> = (0..32)
        .map(|j| {
            let byte = tile[1024 + (r / 16) * 2048 + (c * 32 + j) * 8 + (r % 16) / 2];
            f64::from(if r.is_multiple_of(2) {
                byte & 0x0f
            } else {
                byte >> 4
            })
        })
        .collect();
    let n = 32.0;
    let (sq, sw) = (
        codes.iter().sum::<f64>(),
        weights.iter().map(|&w| f64::from(w)).sum::<f64>(),
    );
    let sqq: f64 = codes.iter().map(|q| q * q).sum();
    let sqw: f64 = codes
        .iter()
        .zip(weights)
        .map(|(q, &w)| q * f64::from(w))
        .sum();
    let denominator = n * sqq - sq * sq;
    if denominator <= 0.0 {
        return;
    }
    let d = (n * sqw - sq * sw) / denominator;
    let m = (sw - d * sq) / n;
    if d <= 0.0 {
        return;
    }
    let i = c * 32 + r;
    let (d, m) = (bf16::from_f64(d), bf16::from_f64(m));
    tile[2 * i..2 * i + 2].copy_from_slice(&d.to_bits().to_le_bytes());
    tile[512 + 2 * i..512 + 2 * i + 2].copy_from_slice(&m.to_bits().to_le_bytes());
    for (j, &q) in codes.iter().enumerate() {
        set_code(tile, c * 32 + j, r, q as u8);
    }
}

/// See [`Quantizer::Clipping`].
fn write_group_clipping(tile: &mut [u8], c: usize, r: usize, weights: &[f32; 32]) {
    let min = weights.iter().copied().fold(f32::INFINITY, f32::min);
    let max = weights.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let d = bf16::from_f32((max - min) / 30.0);
    let m = bf16::from_f32(min + (max - min) / 4.0);
    let i = c * 32 + r;
    tile[2 * i..2 * i + 2].copy_from_slice(&d.to_bits().to_le_bytes());
    tile[512 + 2 * i..512 + 2 * i + 2].copy_from_slice(&m.to_bits().to_le_bytes());
    let (d, m) = (d.to_f32(), m.to_f32());
    for (j, &w) in weights.iter().enumerate() {
        let q = if d > 0.0 {
            ((w - m) / d).round().clamp(0.0, 15.0) as u8
        } else {
            0
        };
        set_code(tile, c * 32 + j, r, q);
    }
}

/// fc's row-blocked values `[hidden/32, cols, 32]` back in row-major `[hidden, cols]` order.
pub fn unblock(blocked: &[f32], hidden: u64, cols: u64) -> Vec<f32> {
    let mut out = vec![0f32; blocked.len()];
    for row in 0..hidden {
        for col in 0..cols {
            out[(row * cols + col) as usize] =
                blocked[(((row / 32) * cols + col) * 32 + row % 32) as usize];
        }
    }
    out
}
