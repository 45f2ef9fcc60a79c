//! One quantized set read against its scheme: the logical `[N, K]` its tensors agree on, or why they
//! do not make one its loader reads (naming the tensor). Every length comes from a header whose
//! shapes the container reader bounded, and every product here is of dimensions of at most
//! [`MAX_DIMENSION`] (2^20), so nothing overflows a u64.

use crate::checkpoint::Checkpoint;
use crate::checks::scales::Rule;
use crate::container::TensorInfo;
use crate::dtype::Dtype;
use crate::escape::escape;
use crate::limits::MAX_DIMENSION;
use crate::quant::{Fp8Scale, MlxMode, MlxParams, Storage, Writer};

/// A tensor of the set by its suffix (`.weight_scale`), if the folder stores it.
pub type Part<'a, 't> = &'a dyn Fn(&str) -> Option<&'t TensorInfo>;

/// The logical `[N, K]` of `module`'s set, whose primary tensor is `primary`.
pub fn read<'a>(
    storage: &'a Storage,
    checkpoint: &Checkpoint,
    part: Part<'a, '_>,
    module: &'a str,
    primary: &'a TensorInfo,
) -> Result<Vec<u64>, String> {
    let set = Set {
        storage,
        part,
        m: escape(module),
        primary,
    };
    match storage {
        Storage::PackInt {
            bits,
            group,
            symmetric,
        } => set.pack_int(checkpoint, u64::from(*bits), *group, *symmetric),
        Storage::Fp8 {
            writer,
            scale,
            input_scale,
        } => set.fp8(*writer, *scale, *input_scale),
        Storage::Nvfp4 { writer } => set.nvfp4(*writer),
        Storage::Mlx(p) => set.mlx(*p),
    }
}

/// What `quant.scales` holds the set's tensor `suffix` to, if it reads it.
pub fn rule(storage: &Storage, suffix: &str) -> Option<Rule> {
    let positive_float = [
        ".input_scale",
        ".activation_scale",
        ".weight_global_scale",
        ".input_global_scale",
        ".weight_scale_2",
        ".weight_scale_inv",
    ];
    Some(match (storage, suffix) {
        (_, s) if positive_float.contains(&s) => Rule::Positive,
        (Storage::PackInt { .. }, ".weight_scale") => Rule::Positive,
        (Storage::Fp8 { .. }, ".weight_scale") => Rule::Positive,
        (Storage::Fp8 { .. }, ".weight") => Rule::Fp8Codes,
        (Storage::Nvfp4 { .. }, ".weight_scale") => Rule::E4m3Positive,
        (Storage::Mlx(p), ".scales") => match p.mode {
            MlxMode::Affine => Rule::Finite,
            MlxMode::Nvfp4 => Rule::E4m3Finite,
            MlxMode::Mxfp4 | MlxMode::Mxfp8 => Rule::E8m0,
        },
        (Storage::Mlx(_), ".biases") => Rule::Finite,
        (
            Storage::Mlx(MlxParams {
                mode: MlxMode::Mxfp8,
                ..
            }),
            ".weight",
        ) => Rule::Fp8Codes,
        _ => return None,
    })
}

struct Set<'a, 't> {
    storage: &'a Storage,
    part: Part<'a, 't>,
    /// The module's name as messages show it.
    m: std::borrow::Cow<'a, str>,
    primary: &'a TensorInfo,
}

fn float(d: Dtype) -> bool {
    matches!(d, Dtype::Bf16 | Dtype::F16 | Dtype::F32)
}

impl Set<'_, '_> {
    fn name(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.m)
    }

    fn required(&self, suffix: &str) -> Result<&TensorInfo, String> {
        (self.part)(suffix).ok_or_else(|| {
            format!(
                "{} is missing: {} stores it beside {}",
                self.name(suffix),
                self.storage.describe(),
                escape(&self.primary.name)
            )
        })
    }

    /// The primary as `want` `[N, columns]`; `what` says the columns (only a refusal spells it).
    fn matrix(&self, want: Dtype, what: impl Fn() -> String) -> Result<(u64, u64), String> {
        match (self.primary.dtype, self.primary.shape.as_slice()) {
            (d, [n, w]) if d == want && *n <= MAX_DIMENSION && *w <= MAX_DIMENSION => Ok((*n, *w)),
            _ => Err(format!(
                "{} is {} {}, not {want} {} ({})",
                escape(&self.primary.name),
                self.primary.dtype,
                self.primary.shape_text(),
                what(),
                self.storage.describe()
            )),
        }
    }

    /// `suffix` is a tensor of a type `ok` accepts and of shape `shape`.
    fn shaped(
        &self,
        t: &TensorInfo,
        suffix: &str,
        ok: fn(Dtype) -> bool,
        kind: &str,
        shape: &[u64],
    ) -> Result<(), String> {
        if ok(t.dtype) && t.shape == shape {
            return Ok(());
        }
        Err(format!(
            "{} is {} {}, not {kind} {shape:?} ({})",
            self.name(suffix),
            t.dtype,
            t.shape_text(),
            self.storage.describe()
        ))
    }

    /// A one-value scale (`[]` or `[1]`, as each writer spells a scalar) of an F32 (or float) type.
    fn scalar(&self, suffix: &str, required: bool) -> Result<(), String> {
        let Some(t) = (self.part)(suffix) else {
            return match required {
                true => self.required(suffix).map(|_| ()),
                false => Ok(()),
            };
        };
        if float(t.dtype) && matches!(t.shape.as_slice(), [] | [1]) {
            return Ok(());
        }
        Err(format!(
            "{} is {} {}, not one float value ([] or [1])",
            self.name(suffix),
            t.dtype,
            t.shape_text()
        ))
    }

    /// A part the scheme does not store for this module is refused, not skipped.
    fn absent(&self, suffix: &str, why: &str) -> Result<(), String> {
        match (self.part)(suffix) {
            Some(_) => Err(format!("{} is there, but {why}", self.name(suffix))),
            None => Ok(()),
        }
    }

    fn pack_int(
        &self,
        checkpoint: &Checkpoint,
        bits: u64,
        group: Option<u64>,
        symmetric: bool,
    ) -> Result<Vec<u64>, String> {
        let (n, width) = self.matrix(Dtype::I32, || format!("[N, K * {bits} / 32]"))?;
        let shape_name = || self.name(".weight_shape");
        let stated = (self.part)(".weight_shape").ok_or_else(|| {
            format!(
                "{} is missing: the loader reads [N, K] from it",
                shape_name()
            )
        })?;
        let [sn, sk] = weight_shape(checkpoint, stated)?;
        // ceil(K * bits / 32) words per row.
        let words = (sk * bits).div_ceil(32);
        if sn != n || words != width {
            return Err(format!(
                "{} holds [{sn}, {sk}], but {} is I32 {}: [{sn}, {sk}] at {bits} bits packs into [{sn}, {words}]",
                shape_name(),
                escape(&self.primary.name),
                self.primary.shape_text()
            ));
        }
        let columns = match group {
            Some(g) if sk % g != 0 => {
                return Err(format!(
                    "group size {g} does not divide {}'s K = {sk} ({})",
                    self.m,
                    shape_name()
                ))
            }
            Some(g) => sk / g,
            None => 1,
        };
        let scale = self.required(".weight_scale")?;
        self.shaped(scale, ".weight_scale", float, "a float", &[n, columns])?;
        let zero_name = || self.name(".weight_zero_point");
        match ((self.part)(".weight_zero_point"), symmetric) {
            (Some(_), true) => {
                return Err(format!("{} is there, but the scheme is symmetric (quantization_config says symmetric: true): the loader reads no zero point", zero_name()))
            }
            (None, false) => {
                return Err(format!("{} is missing, and the scheme is asymmetric (symmetric: false): every weight of {} would be off by its zero point", zero_name(), self.m))
            }
            (Some(z), false) => {
                let rows = (n * bits).div_ceil(32);
                if z.dtype != Dtype::I32 || z.shape != [rows, columns] {
                    return Err(format!(
                        "{} is {} {}, not I32 [{rows}, {columns}] (packed along N)",
                        zero_name(),
                        z.dtype,
                        z.shape_text()
                    ));
                }
            }
            (None, true) => {}
        }
        Ok(vec![sn, sk])
    }

    fn fp8(&self, writer: Writer, scale: Fp8Scale, input_scale: bool) -> Result<Vec<u64>, String> {
        let (n, k) = self.matrix(Dtype::F8E4M3, || "[N, K]".to_owned())?;
        let suffix = match writer {
            Writer::HuggingFace => ".weight_scale_inv",
            _ => ".weight_scale",
        };
        let s = self.required(suffix)?;
        match scale {
            Fp8Scale::Tensor => self.scalar(suffix, true)?,
            Fp8Scale::Channel => self.shaped(s, suffix, float, "a float", &[n, 1])?,
            Fp8Scale::Block([r, c]) => {
                self.shaped(s, suffix, float, "a float", &[n.div_ceil(r), k.div_ceil(c)])?
            }
        }
        let input = match writer {
            Writer::HuggingFace => ".activation_scale",
            _ => ".input_scale",
        };
        match input_scale {
            true => self.scalar(input, true)?,
            false => self.absent(
                input,
                "the inputs are quantized dynamically: the loader reads no static input scale",
            )?,
        }
        self.absent(
            ".weight_zero_point",
            "FP8 is symmetric: the loader reads no zero point",
        )?;
        Ok(vec![n, k])
    }

    fn nvfp4(&self, writer: Writer) -> Result<Vec<u64>, String> {
        let (n, width) =
            self.matrix(Dtype::U8, || "[N, K / 2] (two FP4 codes a byte)".to_owned())?;
        let k = width * 2;
        if k > MAX_DIMENSION {
            return Err(format!(
                "{}'s K = {k} is past the gate's {MAX_DIMENSION}",
                self.m
            ));
        }
        if k % 16 != 0 {
            return Err(format!(
                "NVFP4's group of 16 does not divide {}'s K = {k} ({} holds {width} bytes a row)",
                self.m,
                escape(&self.primary.name)
            ));
        }
        let scale = self.required(".weight_scale")?;
        self.shaped(
            scale,
            ".weight_scale",
            |d| d == Dtype::F8E4M3,
            "F8_E4M3",
            &[n, k / 16],
        )?;
        match writer {
            Writer::ModelOpt => {
                self.scalar(".weight_scale_2", true)?;
                self.scalar(".input_scale", false)?;
            }
            _ => {
                self.scalar(".weight_global_scale", true)?;
                self.scalar(".input_global_scale", false)?;
                self.absent(
                    ".weight_zero_point",
                    "NVFP4 is symmetric: the loader reads no zero point",
                )?;
            }
        }
        Ok(vec![n, k])
    }

    fn mlx(&self, p: MlxParams) -> Result<Vec<u64>, String> {
        let bits = u64::from(p.bits);
        let (n, width) = self.matrix(Dtype::U32, || format!("[N, K * {bits} / 32]"))?;
        let scales = self.required(".scales")?;
        let columns = match scales.shape.as_slice() {
            [_, c] if *c <= MAX_DIMENSION => *c,
            _ => 0,
        };
        // K as the scales count it, and as the packed width at the config's bits holds it: a
        // config whose bits are not the file's disagrees here.
        let k = columns * p.group;
        if width * 32 != k * bits {
            return Err(format!(
                "{} is U32 {}, but {} holds {columns} groups of {} a row (K = {k}): at {bits} bits ({}) K = {k} packs into {} words a row",
                escape(&self.primary.name),
                self.primary.shape_text(),
                self.name(".scales"),
                p.group,
                p.describe(),
                (k * bits).div_ceil(32)
            ));
        }
        let (kind, ok): (&str, fn(Dtype) -> bool) = match p.mode {
            MlxMode::Affine => ("a float", float),
            _ => ("U8", |d| d == Dtype::U8),
        };
        self.shaped(scales, ".scales", ok, kind, &[n, columns])?;
        match p.mode {
            MlxMode::Affine => {
                let biases = self.required(".biases")?;
                self.shaped(biases, ".biases", float, "a float", &[n, columns])?;
            }
            _ => self.absent(".biases", "only MLX's affine mode stores biases")?,
        }
        Ok(vec![n, k])
    }
}

/// `X.weight_shape`'s two values, each a dimension the gate sizes (I64 or I32, `[2]`).
fn weight_shape(checkpoint: &Checkpoint, t: &TensorInfo) -> Result<[u64; 2], String> {
    let name = escape(&t.name);
    let width = match (t.dtype, t.shape.as_slice()) {
        (Dtype::I64, [2]) => 8,
        (Dtype::I32, [2]) => 4,
        _ => {
            return Err(format!(
                "{name} is {} {}, not I64 or I32 [2]",
                t.dtype,
                t.shape_text()
            ))
        }
    };
    let Some((_, bytes)) = checkpoint.tensor(&t.name) else {
        return Err(format!(
            "{name}: its bytes were not where its header put them"
        ));
    };
    let mut values = bytes.chunks_exact(width).map(|b| match b.len() {
        8 => i64::from_le_bytes(b.try_into().unwrap_or_default()),
        _ => i64::from(i32::from_le_bytes(b.try_into().unwrap_or_default())),
    });
    let mut dim = || {
        let v = values.next().unwrap_or(-1);
        u64::try_from(v)
            .ok()
            .filter(|d| 1 <= *d && *d <= MAX_DIMENSION)
            .ok_or(v)
    };
    match (dim(), dim()) {
        (Ok(a), Ok(b)) => Ok([a, b]),
        (Err(v), _) | (_, Err(v)) => Err(format!(
            "{name} holds {v}, not a dimension from 1 to {MAX_DIMENSION}"
        )),
    }
}
