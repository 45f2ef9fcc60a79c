//! The second family's part of the generator (spec section 10): per-layer convolutions, the candidate
//! selector, their config fields and scalars, in either form of each matrix.

use super::{normal, quantized_grid, Draft, Encoding, Geometry, Tensor};
use dflash_gate::__private::dtype::Dtype;
use dflash_gate::__private::family::{ConvPart, ConvSite, Naming, Role, Scalar, SelectorPart};
use dflash_gate::__private::tile::{GridGeometry, TILE_BYTES};
use half::bf16;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Map, Value};

/// Which DFlash2 features a package switches on, and its optional fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Features {
    /// `(conv_kernel_size, conv_group_size)`.
    pub conv: Option<(u64, u64)>,
    /// `(selector_rank, selector_top_k)`.
    pub selector: Option<(u64, u64)>,
    pub output_multiplier: Option<f32>,
    pub final_logit_softcapping: Option<f32>,
    pub is_causal: bool,
    /// Write `layer_types` (sliding when the geometry has a window, else full).
    pub layer_types: bool,
}

impl Features {
    /// Both features, every optional field.
    pub fn both(conv: (u64, u64), selector: (u64, u64)) -> Features {
        Features {
            conv: Some(conv),
            selector: Some(selector),
            output_multiplier: Some(0.5),
            final_logit_softcapping: Some(30.0),
            is_causal: false,
            layer_types: true,
        }
    }

    /// The fields this writes into config.json: the pairs and logit fields where the reference puts
    /// them (`dflash_config`, or the top level when the encoding says so), `is_causal` and
    /// `layer_types` at the top.
    pub fn config_fields(
        &self,
        g: &Geometry,
        top: &mut Map<String, Value>,
        dflash: &mut Map<String, Value>,
    ) {
        if let Some((k, group)) = self.conv {
            dflash.insert("conv_kernel_size".into(), json!(k));
            dflash.insert("conv_group_size".into(), json!(group));
        }
        if let Some((rank, top_k)) = self.selector {
            dflash.insert("selector_rank".into(), json!(rank));
            dflash.insert("selector_top_k".into(), json!(top_k));
        }
        if let Some(m) = self.output_multiplier {
            dflash.insert("output_multiplier".into(), json!(f64::from(m)));
        }
        if let Some(c) = self.final_logit_softcapping {
            dflash.insert("final_logit_softcapping".into(), json!(f64::from(c)));
        }
        top.insert("is_causal".into(), json!(self.is_causal));
        if self.layer_types {
            let kind = if g.sliding_window.is_some() {
                "sliding_attention"
            } else {
                "full_attention"
            };
            top.insert("layer_types".into(), json!(vec![kind; g.layers as usize]));
        }
    }
}

impl Geometry {
    /// The small geometry as a DFlash2 draft with both features: kernel projections 64 x 256 (two
    /// tiles), a 32 x 256 hidden projection, 1000 x 32 codebooks (a padded grid when gridded).
    pub fn dflash2_small() -> Geometry {
        Geometry {
            draft: Draft::DFlash2(Features::both((2, 16), (32, 8))),
            ..Geometry::small()
        }
    }

    /// The published DFlash2 fixture's geometry (spec section 10): about 2.2 GB as a Q4NX package with
    /// its matrices gridded and its codebooks BF16.
    pub fn dflash2_reference() -> Geometry {
        Geometry {
            hidden: 6656,
            layers: 5,
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            intermediate: 19968,
            block_size: 16,
            taps: vec![1, 13, 25, 37, 49],
            sliding_window: Some(2048),
            mask_token_id: 202_047,
            num_target_layers: 52,
            vocab_size: 202_048,
            draft: Draft::DFlash2(Features {
                output_multiplier: None,
                final_logit_softcapping: None,
                ..Features::both((2, 16), (256, 16))
            }),
        }
    }

    /// Rows of a kernel projection: `2 * conv_kernel_size * hidden / conv_group_size`.
    pub fn kernel_projection_rows(&self, (k, group): (u64, u64)) -> u64 {
        2 * k * self.hidden / group
    }
}

/// N x K of a DFlash2 matrix (the forms a converter may grid), or `None` for any other role.
pub fn grid_dims(g: &Geometry, role: Role) -> Option<(u64, u64)> {
    let Draft::DFlash2(f) = &g.draft else {
        return None;
    };
    match role {
        Role::Conv {
            part: ConvPart::KernelProjection,
            ..
        } => f.conv.map(|c| (g.kernel_projection_rows(c), g.hidden)),
        Role::Selector(SelectorPart::HiddenProjection) => f.selector.map(|(r, _)| (r, g.hidden)),
        Role::Selector(_) => f.selector.map(|(r, _)| (g.vocab_size, r)),
        _ => None,
    }
}

/// How one tensor is to be made.
enum Make {
    Bf16(Vec<u64>),
    Grid(u64, u64),
}

/// The feature tensors and their scalars, deterministic in `seed`.
pub fn tensors(g: &Geometry, f: &Features, e: Encoding, naming: Naming, seed: u64) -> Vec<Tensor> {
    let matrix = |n: u64, k: u64, bf16: bool| {
        if bf16 {
            Make::Bf16(vec![n, k])
        } else {
            Make::Grid(n, k)
        }
    };
    let mut plan: Vec<(String, Make)> = Vec::new();
    if let Some(conv) = f.conv {
        let rows = g.kernel_projection_rows(conv);
        for layer in 0..g.layers {
            for site in [ConvSite::Attention, ConvSite::Mlp] {
                let role = |part| Role::Conv { layer, site, part };
                plan.push((
                    naming.name(role(ConvPart::BaseKernel)),
                    Make::Bf16(vec![2, conv.0, g.hidden]),
                ));
                plan.push((
                    naming.name(role(ConvPart::KernelProjection)),
                    matrix(rows, g.hidden, e.dflash2_matrices_bf16),
                ));
            }
        }
    }
    if let Some((rank, _)) = f.selector {
        plan.push((
            naming.name(Role::Selector(SelectorPart::HiddenProjection)),
            matrix(rank, g.hidden, e.dflash2_matrices_bf16),
        ));
        for part in [
            SelectorPart::PredecessorCodebook,
            SelectorPart::SuccessorCodebook,
        ] {
            let mut name = naming.name(Role::Selector(part));
            if e.codebooks_weight_suffix {
                name.push_str(".weight");
            }
            plan.push((name, matrix(g.vocab_size, rank, !e.codebooks_gridded)));
        }
    }
    let seeded: Vec<(usize, u64)> = (0..plan.len())
        .map(|i| (i, seed ^ (0x5bd1_e995 * (i as u64 + 101))))
        .collect();
    let made = dflash_gate::__private::parallel::map(
        "the generator's DFlash2 tensors",
        &seeded,
        || (),
        |_, &(i, s)| match &plan[i].1 {
            Make::Grid(n, k) => quantized_grid(*n, *k, s),
            Make::Bf16(shape) => bf16_values(shape.iter().product(), s),
        },
    )
    .expect("the generator's workers do not panic");
    let mut out: Vec<Tensor> = plan
        .into_iter()
        .zip(made)
        .map(|((name, make), data)| match make {
            Make::Bf16(shape) => Tensor {
                name,
                dtype: Dtype::Bf16,
                shape,
                data,
            },
            Make::Grid(n, k) => {
                let grid = GridGeometry::new(n, k).expect("generator geometry has a grid");
                let shape = if e.tiles_3d {
                    vec![grid.row_blocks, grid.col_blocks, TILE_BYTES]
                } else {
                    vec![grid.tiles(), TILE_BYTES]
                };
                Tensor {
                    name,
                    dtype: Dtype::I8,
                    shape,
                    data,
                }
            }
        })
        .collect();
    out.extend(scalars(f));
    out
}

/// Small normal weights as bf16.
fn bf16_values(count: u64, seed: u64) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..count)
        .flat_map(|_| {
            bf16::from_f32(normal(&mut rng) * 0.02)
                .to_bits()
                .to_le_bytes()
        })
        .collect()
}

/// The `dflash.*` copies of the features' fields.
fn scalars(f: &Features) -> Vec<Tensor> {
    let int = |s: Scalar, v: u64| Tensor {
        name: s.tensor_name(),
        dtype: Dtype::I32,
        shape: vec![1],
        data: (v as i32).to_le_bytes().to_vec(),
    };
    let float = |s: Scalar, v: f32| Tensor {
        name: s.tensor_name(),
        dtype: Dtype::F32,
        shape: vec![1],
        data: v.to_le_bytes().to_vec(),
    };
    let mut out = Vec::new();
    if let Some((k, group)) = f.conv {
        out.push(int(Scalar::ConvKernelSize, k));
        out.push(int(Scalar::ConvGroupSize, group));
    }
    if let Some((rank, top_k)) = f.selector {
        out.push(int(Scalar::SelectorRank, rank));
        out.push(int(Scalar::SelectorTopK, top_k));
    }
    if let Some(m) = f.output_multiplier {
        out.push(float(Scalar::OutputMultiplier, m));
    }
    if let Some(c) = f.final_logit_softcapping {
        out.push(float(Scalar::FinalLogitSoftcapping, c));
    }
    out
}
