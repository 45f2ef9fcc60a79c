//! The seeded generator of well-formed packages.

pub mod dflash2;

pub use dflash2::Features;

use dflash_gate::__private::dtype::Dtype;
use dflash_gate::__private::family::{LayerGain, Naming, Projection, Role, Scalar};
use dflash_gate::__private::tile::{
    GridGeometry, GROUPS_PER_TILE, TILE_BYTES, TILE_COLS, TILE_ROWS,
};
use half::bf16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::io::{self, Write};
use std::path::Path;

pub mod blocks;
pub mod ggml;
pub mod gguf;
pub mod pack_quantized;
pub mod quantized;
pub mod qwen3;
pub mod source;
pub mod torch;

/// A draft's geometry and config values.
#[derive(Clone, Debug, PartialEq)]
pub struct Geometry {
    pub hidden: u64,
    pub layers: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub intermediate: u64,
    pub block_size: u64,
    pub taps: Vec<u64>,
    pub sliding_window: Option<u64>,
    pub mask_token_id: u64,
    pub num_target_layers: u64,
    pub vocab_size: u64,
    /// Which family the package is (and, for the second, which features it switches on).
    pub draft: Draft,
}

/// The family a generated package declares.
#[derive(Clone, Debug, PartialEq)]
pub enum Draft {
    /// `DFlashDraftModel`.
    DFlash,
    /// `MuseGlimmerAssistantModel`: the first family with fc and hidden_norm under the encoder's names.
    AssistantHead,
    /// `DFlash2DraftModel` with these features.
    DFlash2(Features),
}

impl Geometry {
    /// The reference draft "Bolt" (spec section 6): 64 tensors, 270.4 MB.
    pub fn bolt() -> Geometry {
        Geometry {
            hidden: 2560,
            layers: 5,
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            intermediate: 5120,
            block_size: 8,
            taps: vec![5, 11, 17, 23, 35],
            sliding_window: Some(1024),
            mask_token_id: 262_143,
            num_target_layers: 36,
            vocab_size: 262_144,
            draft: Draft::DFlash,
        }
    }

    /// Two layers, 256 wide, no padding: every role, about 1.1 MB. The negative controls start here.
    pub fn small() -> Geometry {
        Geometry {
            hidden: 256,
            layers: 2,
            heads: 4,
            kv_heads: 2,
            head_dim: 64,
            intermediate: 512,
            block_size: 8,
            taps: vec![1, 3, 5],
            sliding_window: Some(128),
            mask_token_id: 999,
            num_target_layers: 8,
            vocab_size: 1000,
            draft: Draft::DFlash,
        }
    }

    /// One layer, two taps: the committed fixture (under 1 MB).
    pub fn tiny() -> Geometry {
        Geometry {
            layers: 1,
            taps: vec![1, 3],
            ..Geometry::small()
        }
    }

    /// The smallest package there is: every dimension 32, so each projection is one padded tile (36 KB
    /// in all). The fuzz targets' seed.
    pub fn micro() -> Geometry {
        Geometry {
            hidden: 32,
            layers: 1,
            heads: 1,
            kv_heads: 1,
            head_dim: 32,
            intermediate: 32,
            block_size: 4,
            taps: vec![0, 1],
            sliding_window: Some(16),
            mask_token_id: 7,
            num_target_layers: 2,
            vocab_size: 64,
            draft: Draft::DFlash,
        }
    }

    /// Every named geometry, for tools that write one by name.
    pub fn named(name: &str) -> Option<Geometry> {
        Some(match name {
            "micro" => Geometry::micro(),
            "tiny" => Geometry::tiny(),
            "small" => Geometry::small(),
            "padded" => Geometry::padded(),
            "bolt" => Geometry::bolt(),
            "large" => Geometry::large(),
            "dflash2-small" => Geometry::dflash2_small(),
            "dflash2-reference" => Geometry::dflash2_reference(),
            "assistant-head" => Geometry::assistant_head(),
            _ => return None,
        })
    }

    /// Dimensions that are not multiples of a tile: K of 288, 320 and 416 pad columns, and k/v's 80 rows
    /// pad rows, so every projection carries padding groups.
    pub fn padded() -> Geometry {
        Geometry {
            hidden: 288,
            layers: 1,
            heads: 4,
            kv_heads: 1,
            head_dim: 80,
            intermediate: 416,
            block_size: 4,
            taps: vec![0, 2],
            sliding_window: None,
            mask_token_id: 5,
            num_target_layers: 4,
            vocab_size: 512,
            draft: Draft::DFlash,
        }
    }

    /// A larger same-family draft of 1.37 GB (10 layers of 4096 wide, intermediate 12288: 235,520
    /// tiles), for the benchmark.
    pub fn large() -> Geometry {
        Geometry {
            hidden: 4096,
            layers: 10,
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            intermediate: 12288,
            block_size: 16,
            taps: vec![1, 9, 17, 25, 33],
            sliding_window: Some(2048),
            mask_token_id: 151_669,
            num_target_layers: 36,
            vocab_size: 151_936,
            draft: Draft::DFlash,
        }
    }

    pub fn q_dim(&self) -> u64 {
        self.heads * self.head_dim
    }

    pub fn kv_dim(&self) -> u64 {
        self.kv_heads * self.head_dim
    }

    /// N x K of a projection.
    pub fn dims(&self, p: Projection) -> (u64, u64) {
        match p {
            Projection::Q => (self.q_dim(), self.hidden),
            Projection::K | Projection::V => (self.kv_dim(), self.hidden),
            Projection::O => (self.hidden, self.q_dim()),
            Projection::Gate | Projection::Up => (self.intermediate, self.hidden),
            Projection::Down => (self.hidden, self.intermediate),
        }
    }

    /// How a package of this geometry spells its names under `encoding`.
    pub fn naming(&self, encoding: Encoding) -> Naming {
        let naming = if encoding.prefixed {
            Naming::PREFIXED
        } else {
            Naming::BARE
        };
        match self.draft {
            Draft::AssistantHead => {
                naming.with_aliases(dflash_gate::__private::family::ASSISTANT_HEAD.aliases)
            }
            _ => naming,
        }
    }

    /// The small geometry as an assistant head (`MuseGlimmerAssistantModel`).
    pub fn assistant_head() -> Geometry {
        Geometry {
            draft: Draft::AssistantHead,
            ..Geometry::small()
        }
    }

    /// `float32(sqrt(hidden))`, as the reference writes it.
    pub fn embedding_scale(&self) -> f32 {
        (self.hidden as f32).sqrt()
    }
}

/// How the package spells what the format allows two ways.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Encoding {
    /// `[Np/32, Kp/256, 5120]` instead of `[tiles, 5120]`.
    pub tiles_3d: bool,
    /// `[hidden/32, taps*hidden, 32]` (the reference) instead of `[hidden, taps*hidden]`.
    pub fc_row_blocked: bool,
    /// `model.` prefix (the reference container) or bare names (the published checkpoints).
    pub prefixed: bool,
    /// `target_layer_ids` (and block_size) in `dflash_config` rather than at top level.
    pub nested_dflash_config: bool,
    /// Leave `head_dim` out so the gate must derive it.
    pub head_dim_stated: bool,
    /// Declare the draft by `model_type: "dflash"` instead of the architecture name.
    pub model_type_dflash: bool,
    /// Align every tensor to 64 bytes with zero gaps, as the engine's own packer does.
    pub aligned: bool,
    /// DFlash2: the kernel and hidden projections as BF16 matrices instead of q4_1 grids.
    pub dflash2_matrices_bf16: bool,
    /// DFlash2: the codebooks as q4_1 grids instead of BF16 matrices.
    pub codebooks_gridded: bool,
    /// DFlash2: the codebooks named with `.weight`, as one loader writes them.
    pub codebooks_weight_suffix: bool,
}

impl Default for Encoding {
    /// The reference container's choices.
    fn default() -> Encoding {
        Encoding {
            tiles_3d: false,
            fc_row_blocked: true,
            prefixed: true,
            nested_dflash_config: false,
            head_dim_stated: true,
            model_type_dflash: false,
            aligned: false,
            dflash2_matrices_bf16: false,
            codebooks_gridded: false,
            codebooks_weight_suffix: false,
        }
    }
}

/// One tensor: header fields and bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub dtype: Dtype,
    pub shape: Vec<u64>,
    pub data: Vec<u8>,
}

/// A header entry as it will be written; defects may edit these before writing.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<i64>,
    pub offsets: [u64; 2],
}

/// A whole package in memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Package {
    pub geometry: Geometry,
    pub encoding: Encoding,
    pub config: Value,
    pub tensors: Vec<Tensor>,
    /// Extra top-level header keys written verbatim (a defect's way to add a non-tensor key).
    pub raw_header_keys: Vec<(String, String)>,
}

impl Package {
    /// A well-formed package. Same geometry, encoding and seed: same bytes.
    pub fn generate(geometry: &Geometry, encoding: Encoding, seed: u64) -> Package {
        let naming = geometry.naming(encoding);
        let mut tensors = Vec::new();
        let mut jobs = Vec::new();
        for layer in 0..geometry.layers {
            for projection in Projection::ALL {
                jobs.push((
                    naming.name(Role::Projection { layer, projection }),
                    geometry.dims(projection),
                ));
            }
        }
        // Projections dominate the bytes: quantize them on every core, each from its own seed so the
        // result does not depend on the thread count.
        let seeded: Vec<(u64, u64, u64)> = jobs
            .iter()
            .enumerate()
            .map(|(i, (_, (n, k)))| (*n, *k, seed ^ (0x9e37_79b9 * (i as u64 + 1))))
            .collect();
        let grids = dflash_gate::__private::parallel::map(
            "the generator's grids",
            &seeded,
            || (),
            |_, &(n, k, s)| quantized_grid(n, k, s),
        )
        .expect("the generator's workers do not panic");
        for ((name, (n, k)), data) in jobs.into_iter().zip(grids) {
            let g = GridGeometry::new(n, k).expect("generator geometry has a grid");
            let shape = if encoding.tiles_3d {
                vec![g.row_blocks, g.col_blocks, TILE_BYTES]
            } else {
                vec![g.tiles(), TILE_BYTES]
            };
            tensors.push(Tensor {
                name,
                dtype: Dtype::I8,
                shape,
                data,
            });
        }
        let mut rng = StdRng::seed_from_u64(seed);
        for layer in 0..geometry.layers {
            for gain in LayerGain::ALL {
                let len = if gain.is_per_head() {
                    geometry.head_dim
                } else {
                    geometry.hidden
                };
                tensors.push(gain_tensor(
                    naming.name(Role::LayerGain { layer, gain }),
                    len,
                    &mut rng,
                ));
            }
        }
        tensors.push(gain_tensor(
            naming.name(Role::FinalNorm),
            geometry.hidden,
            &mut rng,
        ));
        tensors.push(gain_tensor(
            naming.name(Role::HiddenNorm),
            geometry.hidden,
            &mut rng,
        ));
        tensors.push(fc_tensor(
            naming.name(Role::Fc),
            geometry,
            encoding.fc_row_blocked,
            &mut rng,
        ));
        tensors.extend(scalar_tensors(geometry));
        if let Draft::DFlash2(features) = &geometry.draft {
            tensors.extend(dflash2::tensors(geometry, features, encoding, naming, seed));
        }
        Package {
            geometry: geometry.clone(),
            encoding,
            config: config_json(geometry, encoding),
            tensors,
            raw_header_keys: Vec::new(),
        }
    }

    pub fn tensor(&self, name: &str) -> &Tensor {
        self.tensors
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no tensor {name}"))
    }

    pub fn tensor_mut(&mut self, name: &str) -> &mut Tensor {
        self.tensors
            .iter_mut()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no tensor {name}"))
    }

    /// The name of a role under this package's spelling (and its family's aliases).
    pub fn name(&self, role: Role) -> String {
        self.geometry.naming(self.encoding).name(role)
    }

    /// Tensors in the order safetensors' writer puts them: by dtype alignment descending, then name.
    fn ordered(&self) -> Vec<&Tensor> {
        let mut order: Vec<&Tensor> = self.tensors.iter().collect();
        order.sort_by(|a, b| {
            writer_rank(b.dtype)
                .cmp(&writer_rank(a.dtype))
                .then(a.name.cmp(&b.name))
        });
        order
    }

    /// The header entries the writer would produce, in data order.
    pub fn entries(&self) -> Vec<Entry> {
        let mut offset = 0u64;
        self.ordered()
            .into_iter()
            .map(|t| {
                if self.encoding.aligned {
                    offset = offset.div_ceil(64) * 64;
                }
                let begin = offset;
                offset += t.data.len() as u64;
                Entry {
                    name: t.name.clone(),
                    dtype: t.dtype.name().to_owned(),
                    shape: t.shape.iter().map(|&d| d as i64).collect(),
                    offsets: [begin, offset],
                }
            })
            .collect()
    }

    /// Writes the weight file with `entries` as its header (the writer's own, or a defect's edit).
    /// Data bytes always follow the writer's order and offsets, so an edited header lies about them.
    pub fn write_weights_with(&self, entries: &[Entry], out: &mut impl Write) -> io::Result<()> {
        let header = header_bytes(entries, &self.raw_header_keys);
        out.write_all(&(header.len() as u64).to_le_bytes())?;
        out.write_all(&header)?;
        let mut written = 0u64;
        for (t, e) in self.ordered().into_iter().zip(self.entries()) {
            let pad = e.offsets[0] - written;
            out.write_all(&vec![0u8; pad as usize])?;
            out.write_all(&t.data)?;
            written = e.offsets[1];
        }
        Ok(())
    }

    pub fn weight_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_weights_with(&self.entries(), &mut out)
            .expect("writing to memory");
        out
    }

    /// Writes `config.json` and `model.q4nx` into `dir`.
    pub fn write(&self, dir: &Path) -> io::Result<()> {
        self.write_with(dir, &self.entries())
    }

    pub fn write_with(&self, dir: &Path, entries: &[Entry]) -> io::Result<()> {
        std::fs::write(
            dir.join("config.json"),
            serde_json::to_vec_pretty(&self.config)?,
        )?;
        let mut file = io::BufWriter::new(std::fs::File::create(dir.join("model.q4nx"))?);
        self.write_weights_with(entries, &mut file)?;
        file.flush()
    }
}

/// safetensors' writer sorts by its dtype enum, descending. For the dtypes a package holds (I8, BF16,
/// I32, F32, I64) this crate's enum has the same relative order.
fn writer_rank(d: Dtype) -> u32 {
    Dtype::ALL.iter().position(|&x| x == d).unwrap_or(0) as u32
}

/// The header JSON exactly as safetensors' writer spells it: compact, entries in data order, each
/// `dtype`, `shape`, `data_offsets`, padded with spaces to a multiple of 8.
pub fn header_bytes(entries: &[Entry], raw: &[(String, String)]) -> Vec<u8> {
    let mut parts: Vec<String> = raw
        .iter()
        .map(|(k, v)| format!("{}:{v}", Value::String(k.clone())))
        .collect();
    for e in entries {
        let shape: Vec<String> = e.shape.iter().map(i64::to_string).collect();
        parts.push(format!(
            "{}:{{\"dtype\":{},\"shape\":[{}],\"data_offsets\":[{},{}]}}",
            Value::String(e.name.clone()),
            Value::String(e.dtype.clone()),
            shape.join(","),
            e.offsets[0],
            e.offsets[1]
        ));
    }
    pad_header(format!("{{{}}}", parts.join(",")).into_bytes())
}

/// Pads a header with spaces to a multiple of 8 bytes, as safetensors' writer does.
pub fn pad_header(mut header: Vec<u8>) -> Vec<u8> {
    while !header.len().is_multiple_of(8) {
        header.push(b' ');
    }
    header
}

/// A whole container: `json` as the (padded) header, then `data`.
pub fn container_file(json: &str, data: &[u8]) -> Vec<u8> {
    let header = pad_header(json.as_bytes().to_vec());
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&header);
    out.extend_from_slice(data);
    out
}

/// The package's config.json as FastFlowLM's converter writes one: the checkpoint's model fields,
/// `model_type: "dflash"` (a released checkpoint says `"qwen3"`: see [`source::checkpoint_config`]).
fn config_json(g: &Geometry, e: Encoding) -> Value {
    let mut c = json!({
        "architectures": ["DFlashDraftModel"],
        "model_type": "dflash",
        "hidden_act": "silu",
        "attention_bias": false,
        "max_position_embeddings": 40960,
        "rope_theta": 1_000_000.0,
        "hidden_size": g.hidden,
        "num_hidden_layers": g.layers,
        "num_attention_heads": g.heads,
        "num_key_value_heads": g.kv_heads,
        "intermediate_size": g.intermediate,
        "sliding_window": g.sliding_window,
        "embedding_scale": f64::from(g.embedding_scale()),
        "vocab_size": g.vocab_size,
        "num_target_layers": g.num_target_layers,
        "rms_norm_eps": 1e-6,
        "torch_dtype": "bfloat16",
    });
    let top = c.as_object_mut().expect("object");
    if e.head_dim_stated {
        top.insert("head_dim".into(), json!(g.head_dim));
    }
    if e.model_type_dflash {
        top.remove("architectures");
        top.insert("model_type".into(), json!("dflash"));
    }
    let mut dflash = json!({ "block_size": g.block_size, "target_layer_ids": g.taps, "mask_token_id": g.mask_token_id });
    match &g.draft {
        Draft::DFlash => {}
        Draft::AssistantHead => {
            top.insert("architectures".into(), json!(["MuseGlimmerAssistantModel"]));
            top.remove("model_type");
        }
        Draft::DFlash2(features) => {
            top.insert("architectures".into(), json!(["DFlash2DraftModel"]));
            if let Value::Object(nested) = &mut dflash {
                features.config_fields(g, top, nested);
            }
        }
    }
    // The assistant head keeps every field at the top level.
    if e.nested_dflash_config && g.draft != Draft::AssistantHead {
        top.insert("dflash_config".into(), dflash);
    } else if let Value::Object(fields) = dflash {
        top.extend(fields);
    }
    c
}

/// Roughly normal samples from one `u64` (the sum of four 16-bit uniforms), cheap enough for the
/// reference geometry's 327 million weights.
pub(crate) fn normal(rng: &mut StdRng) -> f32 {
    let x = rng.next_u64();
    let sum = (x & 0xffff) + ((x >> 16) & 0xffff) + ((x >> 32) & 0xffff) + (x >> 48);
    // Irwin-Hall(4) scaled to unit variance: mean 2, variance 4/12.
    (sum as f32 / 65536.0 - 2.0) * 1.732_050_8
}

/// An N x K projection quantized to q4_1 tiles the way ggml's reference quantizer does: per group of
/// 32 weights along K, `d = (max - min) / 15`, `m = min`, codes `round((w - m) / d)` clamped to 0..15.
pub fn quantized_grid(n: u64, k: u64, seed: u64) -> Vec<u8> {
    let g = GridGeometry::new(n, k).expect("grid geometry");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = vec![0u8; g.bytes() as usize];
    let mut weights = [0f32; 32];
    for (t, tile) in out.chunks_exact_mut(TILE_BYTES as usize).enumerate() {
        let row0 = (t as u64 / g.col_blocks) * TILE_ROWS;
        let col0 = (t as u64 % g.col_blocks) * TILE_COLS;
        for i in 0..GROUPS_PER_TILE {
            let (c, r) = (i / 32, i % 32);
            if row0 + r as u64 >= n || col0 + (c as u64) * 32 >= k {
                continue; // padding stays zero
            }
            // Each row has its own spread, as trained projections do.
            let sigma = 0.02 * (1.0 + 0.5 * ((row0 + r as u64) % 7) as f32 / 7.0);
            for w in &mut weights {
                *w = normal(&mut rng) * sigma;
            }
            write_group(tile, c, r, &weights);
        }
    }
    out
}

/// Quantizes 32 weights into group (c, r) of a tile.
pub fn write_group(tile: &mut [u8], c: usize, r: usize, weights: &[f32; 32]) {
    let min = weights.iter().copied().fold(f32::INFINITY, f32::min);
    let max = weights.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let d = bf16::from_f32((max - min) / 15.0);
    let m = bf16::from_f32(min);
    let i = c * 32 + r;
    tile[2 * i..2 * i + 2].copy_from_slice(&d.to_bits().to_le_bytes());
    tile[512 + 2 * i..512 + 2 * i + 2].copy_from_slice(&m.to_bits().to_le_bytes());
    let (d, m) = (d.to_f32(), m.to_f32());
    let inverse = if d > 0.0 { 1.0 / d } else { 0.0 };
    for (j, w) in weights.iter().enumerate() {
        let q = (((w - m) * inverse + 0.5) as i32).clamp(0, 15) as u8;
        set_code(tile, c * 32 + j, r, q);
    }
}

/// Sets the 4-bit code of row `r`, tile column `col`.
pub fn set_code(tile: &mut [u8], col: usize, r: usize, q: u8) {
    let byte = 1024 + (r / 16) * 2048 + col * 8 + (r % 16) / 2;
    if r.is_multiple_of(2) {
        tile[byte] = (tile[byte] & 0xf0) | q;
    } else {
        tile[byte] = (tile[byte] & 0x0f) | (q << 4);
    }
}

/// A norm gain: values spread over several binades (0.12 .. 1.05, as real gains are), bf16.
pub(crate) fn gain_tensor(name: String, len: u64, rng: &mut StdRng) -> Tensor {
    let (lo, hi) = (0.12f32.ln(), 1.05f32.ln());
    let data = (0..len)
        .flat_map(|_| {
            let u = (rng.next_u32() >> 8) as f32 / (1u32 << 24) as f32;
            bf16::from_f32((lo + u * (hi - lo)).exp())
                .to_bits()
                .to_le_bytes()
        })
        .collect();
    Tensor {
        name,
        dtype: Dtype::Bf16,
        shape: vec![len],
        data,
    }
}

/// The fusion matrix: small weights, in either declared shape (the gate checks its size and shape).
fn fc_tensor(name: String, g: &Geometry, row_blocked: bool, rng: &mut StdRng) -> Tensor {
    let cols = g.taps.len() as u64 * g.hidden;
    let data = (0..g.hidden * cols)
        .flat_map(|_| bf16::from_f32(normal(rng) * 0.02).to_bits().to_le_bytes())
        .collect();
    let shape = if row_blocked {
        vec![g.hidden / 32, cols, 32]
    } else {
        vec![g.hidden, cols]
    };
    Tensor {
        name,
        dtype: Dtype::Bf16,
        shape,
        data,
    }
}

fn scalar_tensors(g: &Geometry) -> Vec<Tensor> {
    let int = |s: Scalar, values: &[u64]| Tensor {
        name: s.tensor_name(),
        dtype: Dtype::I32,
        shape: vec![values.len() as u64],
        data: values
            .iter()
            .flat_map(|&v| (v as i32).to_le_bytes())
            .collect(),
    };
    let mut out = vec![
        int(Scalar::BlockSize, &[g.block_size]),
        int(Scalar::TargetLayerIds, &g.taps),
        int(Scalar::MaskTokenId, &[g.mask_token_id]),
        int(Scalar::NumTargetLayers, &[g.num_target_layers]),
        Tensor {
            name: Scalar::EmbeddingScale.tensor_name(),
            dtype: Dtype::F32,
            shape: vec![1],
            data: g.embedding_scale().to_le_bytes().to_vec(),
        },
    ];
    if let Some(w) = g.sliding_window {
        out.push(int(Scalar::SlidingWindow, &[w]));
    }
    out
}

/// A target package as the gate reads one: config.json, a weight file whose header is real and whose
/// data section is a hole (sparse: the gate never reads it), and optionally tokenizer.json.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetPackage {
    pub config: Value,
    pub tensors: Vec<Entry>,
    pub tokenizer: bool,
    /// How many regular tokens (`t0`, `t1`, ...: ids from 0) the written tokenizer.json has in
    /// `model.vocab`.
    pub regular_tokens: u64,
    /// Its `added_tokens`: (id, content, special).
    pub added_tokens: Vec<(u64, String, bool)>,
}

impl TargetPackage {
    /// The target a draft of `g` is made for: same hidden size, `num_target_layers` layers, the
    /// draft's vocabulary, with its embedding table and head.
    pub fn matching(g: &Geometry) -> TargetPackage {
        let config = json!({
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "hidden_size": g.hidden,
            "num_hidden_layers": g.num_target_layers,
            "vocab_size": g.vocab_size,
            "rope_theta": 1_000_000,
        });
        let mut target = TargetPackage {
            config,
            tensors: Vec::new(),
            tokenizer: true,
            // As Qwen3's: regular tokens, then its special tokens, then the mask as the first row
            // past the last token.
            regular_tokens: g.mask_token_id.saturating_sub(1),
            added_tokens: vec![(
                g.mask_token_id.saturating_sub(1),
                "<|endoftext|>".to_owned(),
                true,
            )],
        };
        target.set_table("model.embed_tokens.weight", g.vocab_size, g.hidden);
        target.set_table("lm_head.weight", g.vocab_size, g.hidden);
        target
    }

    /// Adds or replaces a BF16 `[rows, cols]` table, re-laying offsets.
    pub fn set_table(&mut self, name: &str, rows: u64, cols: u64) {
        self.tensors.retain(|e| e.name != name);
        self.tensors.push(Entry {
            name: name.to_owned(),
            dtype: "BF16".into(),
            shape: vec![rows as i64, cols as i64],
            offsets: [0, 0],
        });
        let mut offset = 0;
        for e in &mut self.tensors {
            let len = e.shape.iter().product::<i64>() as u64 * 2;
            e.offsets = [offset, offset + len];
            offset += len;
        }
    }

    pub fn write(&self, dir: &Path) -> io::Result<()> {
        self.write_as(dir, "model.q4nx")
    }

    /// The tokenizer.json written: a BPE model of [`TargetPackage::regular_tokens`] and the added
    /// tokens, as the tokenizers library serializes one.
    pub fn tokenizer_json(&self) -> Vec<u8> {
        let vocab: serde_json::Map<String, Value> = (0..self.regular_tokens)
            .map(|i| (format!("t{i}"), i.into()))
            .collect();
        let added: Vec<Value> = self
            .added_tokens
            .iter()
            .map(|(id, content, special)| {
                json!({"id": id, "content": content, "single_word": false, "lstrip": false,
                    "rstrip": false, "normalized": false, "special": special})
            })
            .collect();
        let tokenizer = json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "model": {"type": "BPE", "dropout": null, "vocab": vocab, "merges": []},
        });
        serde_json::to_vec(&tokenizer).expect("serializes")
    }

    /// Writes the target with its weight header under `weight_file` (e.g. `model.safetensors`).
    pub fn write_as(&self, dir: &Path, weight_file: &str) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(
            dir.join("config.json"),
            serde_json::to_vec_pretty(&self.config)?,
        )?;
        if self.tokenizer {
            std::fs::write(dir.join("tokenizer.json"), self.tokenizer_json())?;
        }
        let header = header_bytes(&self.tensors, &[]);
        let data_len = self.tensors.last().map_or(0, |e| e.offsets[1]);
        let mut file = std::fs::File::create(dir.join(weight_file))?;
        file.write_all(&(header.len() as u64).to_le_bytes())?;
        file.write_all(&header)?;
        file.set_len(8 + header.len() as u64 + data_len)
    }
}

/// Writes `MANIFEST.sha256` (sha256sum format) over every file now in `dir`.
pub fn write_manifest(dir: &Path) -> io::Result<()> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n != "MANIFEST.sha256")
        .collect();
    names.sort();
    let mut buffer = vec![0u8; 1 << 16];
    let mut text = String::new();
    for name in names {
        let (hex, _) = dflash_gate::__private::manifest::hash_file(&dir.join(&name), &mut buffer)
            .map_err(io::Error::other)?;
        text.push_str(&format!("{hex}  {name}\n"));
    }
    std::fs::write(dir.join("MANIFEST.sha256"), text)
}
