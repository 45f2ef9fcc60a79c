//! The GGUF a synthetic package is converted from (spec section 12): llama.cpp's names for a DFlash
//! draft (architecture `dflash`), the metadata section 12.2 compares, and the package's grids made
//! from the GGUF's own blocks the way FastFlowLM's converter makes them.
//!
//! For Q4_1 matrices each package group *is* a GGUF block: codes copied, `d` and `m` widened from f16
//! and rounded to bf16. For Q8_0 matrices the package grid is the blocks dequantized, rounded to bf16
//! and quantized to q4_1 by the min/max rule. Gains and fc are the package's bf16 values, stored as
//! F32 (or F16: exact for a gain's range) and BF16 (or F32).

use super::source::{matrix_seed, quantize, source_matrix, unblock, Quantizer};
use super::{blocks, set_code, Package};
use dflash_gate::__private::family::{
    ConvPart, ConvSite, LayerGain, Projection, Role, SelectorPart,
};
use dflash_gate::__private::gguf::GgmlType;
use dflash_gate::__private::tile::{GridGeometry, TILE_BYTES, TILE_COLS, TILE_ROWS};
use half::{bf16, f16};
use std::io::{self, Write};
use std::path::Path;

/// How the GGUF stores each kind of tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GgufOptions {
    /// Q4_1 (the package's blocks exactly) or Q8_0.
    pub matrices: GgmlType,
    /// F32 or F16.
    pub gains: GgmlType,
    /// BF16 or F32.
    pub fc: GgmlType,
    /// `general.alignment`, written only when it is not ggml's default of 32.
    pub alignment: u32,
    /// The target's tokenizer in the metadata (`tokenizer.ggml.*`, one string per vocabulary entry),
    /// as a real draft GGUF carries it.
    pub tokenizer: bool,
    /// How the tensors are named: llama.cpp's, or the checkpoint's own.
    pub names: GgufNames,
}

/// A GGUF's spelling of its tensor names (spec section 12.2): one per file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GgufNames {
    /// `blk.{i}.attn_q.weight`, `output_norm.weight`, ...
    Llama,
    /// `model.layers.{i}.self_attn.q_proj.weight`, ...
    Prefixed,
    /// `layers.{i}.self_attn.q_proj.weight`, ...
    Bare,
}

impl GgufOptions {
    /// A converter's usual GGUF: Q4_1 matrices, F32 gains, BF16 fc, llama.cpp's names, a tokenizer.
    pub const DEFAULT: GgufOptions = GgufOptions {
        matrices: GgmlType::Q4_1,
        gains: GgmlType::F32,
        fc: GgmlType::BF16,
        alignment: 32,
        tokenizer: true,
        names: GgufNames::Llama,
    };
}

impl Default for GgufOptions {
    fn default() -> GgufOptions {
        GgufOptions::DEFAULT
    }
}

/// A GGUF in the making: metadata entries as bytes, then tensors, written by [`GgufFile::bytes`].
#[derive(Clone, Debug, Default)]
pub struct GgufFile {
    /// Key, value type, value (encoded), in file order.
    pub metadata: Vec<(String, u32, Vec<u8>)>,
    /// Name, dimensions (ne0 first), ggml type, data.
    pub tensors: Vec<(String, Vec<u64>, GgmlType, Vec<u8>)>,
    pub alignment: u64,
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

impl GgufFile {
    pub fn new() -> GgufFile {
        GgufFile {
            alignment: 32,
            ..GgufFile::default()
        }
    }

    /// A metadata entry of value type `ty` whose value is `value` (already encoded).
    pub fn raw(&mut self, key: &str, ty: u32, value: &[u8]) {
        self.metadata.push((key.to_owned(), ty, value.to_vec()));
    }

    /// Takes a metadata entry out; `false` when there was none.
    pub fn remove(&mut self, key: &str) -> bool {
        let before = self.metadata.len();
        self.metadata.retain(|(k, _, _)| k != key);
        self.metadata.len() != before
    }

    /// Replaces a metadata entry's value (and type) where it stands; `false` when there was none.
    pub fn replace(&mut self, key: &str, ty: u32, value: &[u8]) -> bool {
        match self.metadata.iter_mut().find(|(k, _, _)| k == key) {
            Some(entry) => {
                *entry = (key.to_owned(), ty, value.to_vec());
                true
            }
            None => false,
        }
    }

    pub fn u32(&mut self, key: &str, v: u32) {
        self.raw(key, 4, &v.to_le_bytes());
    }

    pub fn f32(&mut self, key: &str, v: f32) {
        self.raw(key, 6, &v.to_le_bytes());
    }

    pub fn string(&mut self, key: &str, v: &str) {
        let mut value = Vec::new();
        string(&mut value, v);
        self.raw(key, 8, &value);
    }

    pub fn i32_array(&mut self, key: &str, values: &[i32]) {
        let mut value = 5u32.to_le_bytes().to_vec();
        value.extend_from_slice(&(values.len() as u64).to_le_bytes());
        for v in values {
            value.extend_from_slice(&v.to_le_bytes());
        }
        self.raw(key, 9, &value);
    }

    pub fn f32_array(&mut self, key: &str, values: &[f32]) {
        let mut value = 6u32.to_le_bytes().to_vec();
        value.extend_from_slice(&(values.len() as u64).to_le_bytes());
        for v in values {
            value.extend_from_slice(&v.to_le_bytes());
        }
        self.raw(key, 9, &value);
    }

    pub fn string_array<S: AsRef<str>>(&mut self, key: &str, values: &[S]) {
        let mut value = 8u32.to_le_bytes().to_vec();
        value.extend_from_slice(&(values.len() as u64).to_le_bytes());
        for v in values {
            string(&mut value, v.as_ref());
        }
        self.raw(key, 9, &value);
    }

    pub fn tensor(&mut self, name: &str, dims: Vec<u64>, ty: GgmlType, data: Vec<u8>) {
        self.tensors.push((name.to_owned(), dims, ty, data));
    }

    /// The file as ggml writes one: header, metadata, tensor infos (offsets in order, each padded to
    /// the alignment), zero padding to the alignment, each tensor's data followed by zero padding.
    pub fn bytes(&self) -> Vec<u8> {
        let a = self.alignment as usize;
        let lens: Vec<u64> = self.tensors.iter().map(|t| t.3.len() as u64).collect();
        let mut out = self.header(&lens);
        for (_, _, _, data) in &self.tensors {
            out.extend_from_slice(data);
            out.resize(out.len().div_ceil(a) * a, 0);
        }
        out
    }

    /// The header alone (up to the aligned start of the data section) for tensors whose data are
    /// `lens[i]` bytes each (their own data ignored), and the length the whole file then has: for a
    /// sparse file of a size no test could hold in memory.
    pub fn header_declaring(&self, lens: &[u64]) -> (Vec<u8>, u64) {
        let a = self.alignment;
        let header = self.header(lens);
        let data: u64 = lens.iter().map(|l| l.div_ceil(a) * a).sum();
        let total = header.len() as u64 + data;
        (header, total)
    }

    fn header(&self, lens: &[u64]) -> Vec<u8> {
        let a = self.alignment as usize;
        let mut out = b"GGUF".to_vec();
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, ty, value) in &self.metadata {
            string(&mut out, key);
            out.extend_from_slice(&ty.to_le_bytes());
            out.extend_from_slice(value);
        }
        let mut offset = 0u64;
        for ((name, dims, ty, _), len) in self.tensors.iter().zip(lens) {
            string(&mut out, name);
            out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&ty.id().to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offset += len.div_ceil(a as u64) * a as u64;
        }
        out.resize(out.len().div_ceil(a) * a, 0);
        out
    }
}

/// llama.cpp's name for a package role (spec section 12.2), `None` for roles without one.
pub fn gguf_name(role: Role) -> Option<String> {
    Some(match role {
        Role::Projection { layer, projection } => {
            let p = match projection {
                Projection::Q => "attn_q",
                Projection::K => "attn_k",
                Projection::V => "attn_v",
                Projection::O => "attn_output",
                Projection::Gate => "ffn_gate",
                Projection::Up => "ffn_up",
                Projection::Down => "ffn_down",
            };
            format!("blk.{layer}.{p}.weight")
        }
        Role::LayerGain { layer, gain } => {
            let g = match gain {
                LayerGain::Input => "attn_norm",
                LayerGain::PostAttention => "ffn_norm",
                LayerGain::QNorm => "attn_q_norm",
                LayerGain::KNorm => "attn_k_norm",
            };
            format!("blk.{layer}.{g}.weight")
        }
        Role::Fc => "fc.weight".to_owned(),
        Role::HiddenNorm => "enc.output_norm.weight".to_owned(),
        Role::FinalNorm => "output_norm.weight".to_owned(),
        _ => return None,
    })
}

/// llama.cpp's name for a DFlash2 role (spec 18.3; `gguf-py`'s `constants.py`, b11434), spelt here
/// apart from the gate's own table so that the two are held to each other: the base kernels
/// without `.weight`, the codebooks with it.
pub fn dflash2_gguf_name(role: Role) -> Option<String> {
    Some(match role {
        Role::Conv { layer, site, part } => {
            let site = match site {
                ConvSite::Attention => "attn",
                ConvSite::Mlp => "ffn",
            };
            match part {
                ConvPart::BaseKernel => format!("blk.{layer}.{site}_conv_base"),
                ConvPart::KernelProjection => format!("blk.{layer}.{site}_conv_proj.weight"),
            }
        }
        Role::Selector(SelectorPart::HiddenProjection) => "selector_hidden.weight".to_owned(),
        Role::Selector(SelectorPart::PredecessorCodebook) => {
            "selector_predecessor.weight".to_owned()
        }
        Role::Selector(SelectorPart::SuccessorCodebook) => "selector_successor.weight".to_owned(),
        _ => return None,
    })
}

/// The name a GGUF written with `names` gives a package role.
pub fn named(role: Role, names: GgufNames) -> Option<String> {
    match names {
        GgufNames::Llama => gguf_name(role),
        GgufNames::Bare | GgufNames::Prefixed => {
            // The same tensors as llama.cpp's names cover, under the checkpoint's names.
            gguf_name(role)?;
            let bare = dflash_gate::__private::family::Naming::BARE.name(role);
            Some(if names == GgufNames::Prefixed {
                format!("model.{bare}")
            } else {
                bare
            })
        }
    }
}

/// ggml's reference Q4_1 blocks of row-major values (32 to a block).
pub fn q4_1_blocks(values: &[f32]) -> Vec<u8> {
    values.chunks_exact(32).flat_map(blocks::q4_1).collect()
}

/// The package's q4_1 grid of an N x K matrix whose GGUF blocks (row-major, K / 32 per row) are
/// `blocks`: each group's codes copied, `d` and `m` rounded from f16 to bf16 (spec section 12).
pub fn grid_from_blocks(n: u64, k: u64, blocks: &[u8]) -> Vec<u8> {
    grid_from_blocks_rounding(n, k, blocks, |x| bf16::from_f32(x).to_bits())
}

/// [`grid_from_blocks`] with `d` and `m` made bf16 by `round` (a converter's other rounding, for a
/// negative control).
pub fn grid_from_blocks_rounding(n: u64, k: u64, blocks: &[u8], round: fn(f32) -> u16) -> Vec<u8> {
    let g = GridGeometry::new(n, k).expect("grid geometry");
    let mut out = vec![0u8; g.bytes() as usize];
    let per_row = (k / 32) as usize;
    for (i, block) in blocks.chunks_exact(20).enumerate() {
        let (row, b) = (i / per_row, i % per_row);
        let col = b * 32;
        let t = (row / TILE_ROWS as usize) * g.col_blocks as usize + col / TILE_COLS as usize;
        let tile = &mut out[t * TILE_BYTES as usize..(t + 1) * TILE_BYTES as usize];
        let (c, r) = ((col % TILE_COLS as usize) / 32, row % TILE_ROWS as usize);
        let widen = |at: usize| {
            let h = f16::from_bits(u16::from_le_bytes([block[at], block[at + 1]]));
            round(h.to_f32()).to_le_bytes()
        };
        let group = c * 32 + r;
        tile[2 * group..2 * group + 2].copy_from_slice(&widen(0));
        tile[512 + 2 * group..512 + 2 * group + 2].copy_from_slice(&widen(2));
        for j in 0..16 {
            set_code(tile, c * 32 + j, r, block[4 + j] & 0x0f);
            set_code(tile, c * 32 + j + 16, r, block[4 + j] >> 4);
        }
    }
    out
}

/// Writes the GGUF `package` is converted from to `path`, and makes the package's grids from it.
/// Matrices are drawn from the same values [`super::source::write_source`] draws (same `seed`), so a
/// checkpoint written first stays a faithful source of the package. The `dflash.*` scalars are metadata
/// here; a DFlash2 draft's features are its four keys and, under llama.cpp's names, its seven tensors
/// (spec 18.3), laid out as llama.cpp's converter (b11434) lays them out from a folder: each shape
/// reversed into `ne` order, no transpose, the base kernels F32 whatever the file type (their names do
/// not end in `.weight`, `conversion/base.py`), the others of the matrices' type.
pub fn write_gguf(
    package: &mut Package,
    path: &Path,
    options: GgufOptions,
    seed: u64,
) -> io::Result<()> {
    let file = gguf_for(package, options, seed)?;
    let mut out = io::BufWriter::new(std::fs::File::create(path)?);
    out.write_all(&file.bytes())?;
    out.flush()
}

/// The GGUF of [`write_gguf`] in memory (the package's grids remade from it).
pub fn gguf_for(package: &mut Package, options: GgufOptions, seed: u64) -> io::Result<GgufFile> {
    let g = package.geometry.clone();
    let naming = g.naming(package.encoding);
    let mut file = GgufFile::new();
    file.alignment = u64::from(options.alignment);
    file.string("general.architecture", "dflash");
    file.string("general.name", "synthetic dflash draft");
    file.u32("general.quantization_version", 2);
    // llama.cpp's `llama_ftype` for the matrices' type (MOSTLY_Q8_0, _F16, _BF16, _Q4_0, _Q5_0,
    // _Q5_1, _Q4_K_M, _Q5_K_M, _Q6_K, _Q4_1).
    let file_type = match options.matrices {
        GgmlType::Q8_0 => 7,
        GgmlType::F16 => 1,
        GgmlType::BF16 => 32,
        GgmlType::Q4_0 => 2,
        GgmlType::Q5_0 => 8,
        GgmlType::Q5_1 => 9,
        GgmlType::Q4_K => 15,
        GgmlType::Q5_K => 17,
        GgmlType::Q6_K => 18,
        _ => 3,
    };
    file.u32("general.file_type", file_type);
    if options.alignment != 32 {
        file.u32("general.alignment", options.alignment);
    }
    let narrow = |v: u64| u32::try_from(v).map_err(io::Error::other);
    file.u32("dflash.block_count", narrow(g.layers)?);
    file.u32("dflash.embedding_length", narrow(g.hidden)?);
    file.u32("dflash.feed_forward_length", narrow(g.intermediate)?);
    file.u32("dflash.attention.head_count", narrow(g.heads)?);
    file.u32("dflash.attention.head_count_kv", narrow(g.kv_heads)?);
    file.u32("dflash.attention.key_length", narrow(g.head_dim)?);
    file.u32("dflash.attention.value_length", narrow(g.head_dim)?);
    file.f32("dflash.attention.layer_norm_rms_epsilon", 1e-6);
    // A key llama.cpp's converter does not write (its GGUF gives the vocabulary only as the token
    // count); the gate reads it when present, and the hostile arms rename it, so it stays.
    file.u32("dflash.vocab_size", narrow(g.vocab_size)?);
    file.u32("dflash.block_size", narrow(g.block_size)?);
    // As llama.cpp's converter writes them (`conversion/qwen.py`, `DFlashModel`): the mask id under
    // the tokenizer's key, and each tap plus one (the input of layer id + 1, which is the output of
    // layer id, what an HF id means).
    file.u32("tokenizer.ggml.mask_token_id", narrow(g.mask_token_id)?);
    // The RoPE base and context its Qwen3 parameters add (`dflash.target_hidden_size` it never
    // writes), from the package's config.
    let number = |key: &str| package.config.get(key).and_then(serde_json::Value::as_f64);
    if let Some(theta) = number("rope_theta") {
        file.f32("dflash.rope.freq_base", theta as f32);
    }
    if let Some(context) = number("max_position_embeddings") {
        file.u32("dflash.context_length", context as u32);
    }
    let taps: Vec<i32> = g.taps.iter().map(|&t| t as i32 + 1).collect();
    file.i32_array("dflash.target_layers", &taps);
    if let super::Draft::DFlash2(f) = &g.draft {
        // `conversion/qwen.py`'s DFlashModel writes the four keys when the config has a convolution.
        if let (Some((kernel, group)), Some((rank, top_k))) = (f.conv, f.selector) {
            file.u32("dflash.conv_kernel_size", narrow(kernel)?);
            file.u32("dflash.conv_group_size", narrow(group)?);
            file.u32("dflash.selector_rank", narrow(rank)?);
            file.u32("dflash.selector_top_k", narrow(top_k)?);
        }
    }
    if options.tokenizer {
        file.string("tokenizer.ggml.model", "gpt2");
        let tokens: Vec<String> = (0..g.vocab_size).map(|i| format!("tok{i}")).collect();
        file.string_array("tokenizer.ggml.tokens", &tokens);
        // Every token NORMAL but the mask, CONTROL (as a tokenizer that adds one marks it, and as
        // llama.cpp's converter marks a target's special added token). The converter also writes
        // the target's `tokenizer.ggml.bos_token_id` and `.eos_token_id` (CONTROL tokens), scores
        // and `tokenizer.ggml.pre`; none is written here, so an arm can add its own eos id.
        let mut types = vec![1; tokens.len()];
        if let Some(t) = types.get_mut(g.mask_token_id as usize) {
            *t = 3;
        }
        file.i32_array("tokenizer.ggml.token_type", &types);
        let merges: Vec<String> = (0..g.vocab_size / 2)
            .map(|i| format!("t{} k{}", i % 97, i / 97))
            .collect();
        file.string_array("tokenizer.ggml.merges", &merges);
    }
    let mut entries = Vec::new();
    for (i, t) in package.tensors.iter().enumerate() {
        let Some(role) = naming.role(&t.name) else {
            continue;
        };
        let name = match named(role, options.names) {
            Some(name) => name,
            // DFlash2's tensors under llama.cpp's names (`blk.{i}.attn_conv_base`, ...).
            None if options.names == GgufNames::Llama => match dflash2_gguf_name(role) {
                Some(name) => name,
                None => continue,
            },
            None => continue,
        };
        entries.push((i, role, name));
    }
    // Layer by layer, then the model-wide tensors. llama.cpp's converter writes its checkpoint's
    // order instead (the sorted HF names: `fc`, `enc.output_norm`, block by block, `output_norm`
    // last); the gate reads either, and some arms pick a tensor by its position, so the order stays.
    entries.sort_by_key(|(_, role, name)| (role.layer().is_none(), role.layer(), name.clone()));
    for (i, role, name) in entries {
        let t = &mut package.tensors[i];
        let bf16_values = |data: &[u8]| -> Vec<f32> {
            data.chunks_exact(2)
                .map(|b| bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32())
                .collect()
        };
        match role {
            Role::Projection { projection, .. } => {
                let (n, k) = g.dims(projection);
                let values = source_matrix(n, k, matrix_seed(seed, i));
                let blocks: Vec<u8> = match options.matrices {
                    GgmlType::Q4_0 => values.chunks_exact(32).flat_map(blocks::q4_0).collect(),
                    GgmlType::Q5_0 => values.chunks_exact(32).flat_map(blocks::q5_0).collect(),
                    GgmlType::Q5_1 => values.chunks_exact(32).flat_map(blocks::q5_1).collect(),
                    GgmlType::Q8_0 => values.chunks_exact(32).flat_map(blocks::q8_0).collect(),
                    GgmlType::Q4_K => values.chunks_exact(256).flat_map(blocks::q4_k).collect(),
                    GgmlType::Q5_K => values.chunks_exact(256).flat_map(blocks::q5_k).collect(),
                    GgmlType::Q6_K => values.chunks_exact(256).flat_map(blocks::q6_k).collect(),
                    GgmlType::F16 => values
                        .iter()
                        .flat_map(|&v| f16::from_f32(v).to_bits().to_le_bytes())
                        .collect(),
                    GgmlType::BF16 => values
                        .iter()
                        .flat_map(|&v| bf16::from_f32(v).to_bits().to_le_bytes())
                        .collect(),
                    _ => q4_1_blocks(&values),
                };
                t.data = match options.matrices {
                    GgmlType::Q8_0 => {
                        let mut dequantized = vec![0f32; values.len()];
                        dflash_gate::__private::gguf::dequantize(
                            GgmlType::Q8_0,
                            &blocks,
                            &mut dequantized,
                        )
                        .map_err(io::Error::other)?;
                        let rounded: Vec<f32> = dequantized
                            .iter()
                            .map(|&v| bf16::from_f32(v).to_f32())
                            .collect();
                        quantize(n, k, &rounded, Quantizer::MinMax)
                    }
                    GgmlType::Q4_1 => grid_from_blocks(n, k, &blocks),
                    // The package's grid only stands beside the GGUF; it is quantized from the same
                    // values.
                    _ => quantize(n, k, &values, Quantizer::MinMax),
                };
                file.tensor(&name, vec![k, n], options.matrices, blocks);
            }
            Role::Conv {
                part: ConvPart::BaseKernel,
                ..
            } => {
                let values = bf16_values(&t.data);
                let ne: Vec<u64> = t.shape.iter().rev().copied().collect();
                let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                file.tensor(&name, ne, GgmlType::F32, data);
            }
            Role::Conv { .. } | Role::Selector(_) => {
                let (n, k) = super::dflash2::grid_dims(&g, role)
                    .ok_or_else(|| io::Error::other(format!("{name}: no DFlash2 matrix")))?;
                let gridded = t.dtype == dflash_gate::__private::dtype::Dtype::I8;
                // A gridded tensor's values are drawn as a projection's are (the source's own); a
                // BF16 one's are the package's, which then holds what a converter makes of the
                // GGUF's (its values, or their dequantization rounded to bf16).
                let values = if gridded {
                    source_matrix(n, k, matrix_seed(seed, i))
                } else {
                    bf16_values(&t.data)
                };
                let (blocks, grid) = matrix_blocks(n, k, &values, options.matrices)?;
                if gridded {
                    t.data = grid;
                } else if let Some(made) = dequantized_bf16(options.matrices, &blocks)? {
                    t.data = made;
                }
                file.tensor(&name, vec![k, n], options.matrices, blocks);
            }
            Role::Fc => {
                let values = bf16_values(&t.data);
                let (hidden, cols) = (g.hidden, g.taps.len() as u64 * g.hidden);
                let values = if t.shape.len() == 3 {
                    unblock(&values, hidden, cols)
                } else {
                    values
                };
                let data = match options.fc {
                    GgmlType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
                    _ => values
                        .iter()
                        .flat_map(|&v| bf16::from_f32(v).to_bits().to_le_bytes())
                        .collect(),
                };
                file.tensor(&name, vec![cols, hidden], options.fc, data);
            }
            _ => {
                let values = bf16_values(&t.data);
                let data: Vec<u8> = match options.gains {
                    GgmlType::F16 => values
                        .iter()
                        .flat_map(|&v| f16::from_f32(v).to_bits().to_le_bytes())
                        .collect(),
                    _ => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
                };
                if options.gains == GgmlType::F16
                    && values.iter().any(|&v| f16::from_f32(v).to_f32() != v)
                {
                    return Err(io::Error::other(format!(
                        "{name}: a gain is not exact in f16"
                    )));
                }
                file.tensor(&name, vec![values.len() as u64], options.gains, data);
            }
        }
    }
    Ok(file)
}

/// An N x K matrix's `values` as `ty`'s bytes (row-major, `ne` `{K, N}`), and the package grid a
/// converter makes of them (each Q4_1 block a group; any other type dequantized, rounded to bf16 and
/// quantized by the min/max rule; a float type the values quantized so).
fn matrix_blocks(n: u64, k: u64, values: &[f32], ty: GgmlType) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let blocks: Vec<u8> = match ty {
        GgmlType::Q8_0 => values.chunks_exact(32).flat_map(blocks::q8_0).collect(),
        GgmlType::Q4_1 => q4_1_blocks(values),
        GgmlType::F16 => values
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_bits().to_le_bytes())
            .collect(),
        GgmlType::BF16 => values
            .iter()
            .flat_map(|&v| bf16::from_f32(v).to_bits().to_le_bytes())
            .collect(),
        other => return Err(io::Error::other(format!("DFlash2 matrices in {other}"))),
    };
    let grid = match ty {
        GgmlType::Q4_1 => grid_from_blocks(n, k, &blocks),
        GgmlType::Q8_0 => {
            let rounded = dequantized_bf16(ty, &blocks)?.unwrap_or_default();
            let rounded: Vec<f32> = rounded
                .chunks_exact(2)
                .map(|b| bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32())
                .collect();
            quantize(n, k, &rounded, Quantizer::MinMax)
        }
        _ => quantize(n, k, values, Quantizer::MinMax),
    };
    Ok((blocks, grid))
}

/// A block type's values dequantized as ggml does and rounded to bf16 (as a converter stores them);
/// `None` for a float type, whose values are stored as they are.
fn dequantized_bf16(ty: GgmlType, blocks: &[u8]) -> io::Result<Option<Vec<u8>>> {
    if !matches!(ty, GgmlType::Q8_0 | GgmlType::Q4_1) {
        return Ok(None);
    }
    let count = blocks.len() / ty.type_size() as usize * ty.block_size() as usize;
    let mut values = vec![0f32; count];
    dflash_gate::__private::gguf::dequantize(ty, blocks, &mut values).map_err(io::Error::other)?;
    Ok(Some(
        values
            .iter()
            .flat_map(|&v| bf16::from_f32(v).to_bits().to_le_bytes())
            .collect(),
    ))
}

pub(crate) mod tests {
    use super::*;
    use crate::synth::{Encoding, Geometry};

    unit_tests![
        ggmls_reference_q4_1_blocks_become_the_packages_groups,
        the_gguf_is_read_by_the_gate_with_the_packages_names_and_shapes
    ];

    fn ggmls_reference_q4_1_blocks_become_the_packages_groups() {
        let values: Vec<f32> = (0..32).map(|i| (i as f32 - 10.0) * 0.01).collect();
        let block = blocks::q4_1(&values);
        assert_eq!(block[4] & 0x0f, 0, "the minimum is code 0");
        assert_eq!(block[4 + 15] >> 4, 15, "the maximum is code 15");
        let grid = grid_from_blocks(1, 32, &block);
        let d = f16::from_bits(u16::from_le_bytes([block[0], block[1]])).to_f32();
        assert_eq!(
            u16::from_le_bytes([grid[0], grid[1]]),
            bf16::from_f32(d).to_bits()
        );
    }

    fn the_gguf_is_read_by_the_gate_with_the_packages_names_and_shapes() {
        let mut package = Package::generate(&Geometry::micro(), Encoding::default(), 3);
        let file = gguf_for(&mut package, GgufOptions::default(), 3).expect("gguf");
        let header = dflash_gate::__private::gguf::parse(&file.bytes()).expect("parses");
        assert_eq!(header.architecture(), Some("dflash"));
        let q = header.tensor("blk.0.attn_q.weight").expect("q");
        assert_eq!((q.ty, q.dims.clone()), (GgmlType::Q4_1, vec![32, 32]));
        assert_eq!(header.tensors.len(), 7 + 4 + 3);
    }
}
