//! One defect at a time, applied to a good package before (or while) it is written.
//!
//! A `Scenario` is a package plus everything a defect may bend: the header entries the writer will
//! emit, the raw config.json text, byte edits to the finished weight file, extra files. Defects are
//! plain functions over it, so each negative control names exactly one thing it broke.

use crate::synth::{Entry, Package, Tensor};
use dflash_gate::__private::dtype::Dtype;
use dflash_gate::__private::family::{LayerGain, Projection, Role};
use dflash_gate::__private::tile::TILE_BYTES;
use half::{bf16, f16};
use serde_json::Value;
use std::io;
use std::path::Path;

/// A package about to be written, and how a defect bent it.
pub struct Scenario {
    pub package: Package,
    /// `None`: the writer's own entries, computed at write time from the (possibly edited) tensors.
    pub entries: Option<Vec<Entry>>,
    /// Replaces config.json's text verbatim.
    pub config_text: Option<Vec<u8>>,
    /// Edits to the finished weight file's bytes, in order.
    pub weight_edits: Vec<fn(&mut Vec<u8>)>,
    /// The weight file's name (`model.q4nx` unless a defect renames it); `None` writes none.
    pub weight_name: Option<String>,
    pub extra_files: Vec<(String, Vec<u8>)>,
}

impl Scenario {
    pub fn new(package: Package) -> Scenario {
        Scenario {
            package,
            entries: None,
            config_text: None,
            weight_edits: Vec::new(),
            weight_name: Some("model.q4nx".to_owned()),
            extra_files: Vec::new(),
        }
    }

    pub fn config_mut(&mut self) -> &mut serde_json::Map<String, Value> {
        self.package
            .config
            .as_object_mut()
            .expect("config is an object")
    }

    /// The writer's entries, materialised so a defect can edit them.
    pub fn entries_mut(&mut self) -> &mut Vec<Entry> {
        let package = &self.package;
        self.entries.get_or_insert_with(|| package.entries())
    }

    pub fn weight_bytes(&self) -> Vec<u8> {
        let entries = self
            .entries
            .clone()
            .unwrap_or_else(|| self.package.entries());
        let mut bytes = Vec::new();
        self.package
            .write_weights_with(&entries, &mut bytes)
            .expect("writing to memory");
        for edit in &self.weight_edits {
            edit(&mut bytes);
        }
        bytes
    }

    pub fn config_bytes(&self) -> Vec<u8> {
        self.config_text
            .clone()
            .unwrap_or_else(|| serde_json::to_vec_pretty(&self.package.config).expect("json"))
    }

    pub fn write(&self, dir: &Path) -> io::Result<()> {
        std::fs::write(dir.join("config.json"), self.config_bytes())?;
        if let Some(name) = &self.weight_name {
            std::fs::write(dir.join(name), self.weight_bytes())?;
        }
        for (name, bytes) in &self.extra_files {
            std::fs::write(dir.join(name), bytes)?;
        }
        Ok(())
    }
}

/// Names of the small geometry's tensors under the default (prefixed) spelling.
pub fn proj(layer: u64, projection: Projection) -> String {
    dflash_gate::__private::family::Naming::PREFIXED.name(Role::Projection { layer, projection })
}

pub fn gain(layer: u64, gain: LayerGain) -> String {
    dflash_gate::__private::family::Naming::PREFIXED.name(Role::LayerGain { layer, gain })
}

/// Writes bf16 `value` as the scale (plane 0) or minimum (plane 1) of group `i` in tile `t`.
pub fn set_header(t: &mut Tensor, tile: usize, plane: usize, i: usize, value: bf16) {
    let at = tile * TILE_BYTES as usize + plane * 512 + 2 * i;
    t.data[at..at + 2].copy_from_slice(&value.to_bits().to_le_bytes());
}

/// Writes bf16 bits `bits` as element `i` (in declared order) of a BF16 tensor.
pub fn set_element(t: &mut Tensor, i: usize, bits: u16) {
    t.data[2 * i..2 * i + 2].copy_from_slice(&bits.to_le_bytes());
}

/// Re-encodes a bf16 tensor's values as f16 bits, keeping the BF16 label.
pub fn bf16_to_f16_bits(t: &mut Tensor) {
    for pair in t.data.chunks_exact_mut(2) {
        let v = bf16::from_bits(u16::from_le_bytes([pair[0], pair[1]])).to_f32();
        pair.copy_from_slice(&f16::from_f32(v).to_bits().to_le_bytes());
    }
}

/// Replaces a tensor's bytes with a plain f16 matrix of the same byte count (small weights).
pub fn half_float_fill(t: &mut Tensor, seed: u64) {
    let mut state = seed | 1;
    for pair in t.data.chunks_exact_mut(2) {
        // xorshift: any spread of small signed values will do, the point is the form.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let u = (state >> 40) as f32 / (1u64 << 24) as f32;
        pair.copy_from_slice(&f16::from_f32((u - 0.5) * 0.08).to_bits().to_le_bytes());
    }
}

/// A BF16 tensor of `len` values that no role explains.
pub fn stray(name: &str, shape: Vec<u64>) -> Tensor {
    let n: u64 = shape.iter().product();
    let data = (0..n)
        .flat_map(|_| bf16::from_f32(0.01).to_bits().to_le_bytes())
        .collect();
    Tensor {
        name: name.to_owned(),
        dtype: Dtype::Bf16,
        shape,
        data,
    }
}

/// The data section's start in a weight file (8 + the header length it declares).
pub fn data_start(bytes: &[u8]) -> usize {
    8 + u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize
}
