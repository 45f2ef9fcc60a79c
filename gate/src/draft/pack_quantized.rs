//! A Hugging Face folder quantized by compressed-tensors' `pack-quantized` format (spec 17.1), as the
//! inventory sees it: each quantized Linear `X` is stored as `X.weight_packed` (I32 `[N, ceil(K *
//! bits / 32)]`), `X.weight_scale` (`[N, K / group]`, or `[N, 1]` per channel, a float type),
//! `X.weight_shape` (`[2]`, holding `[N, K]`) and, asymmetric, `X.weight_zero_point` (I32
//! `[ceil(N * bits / 32), K / group]`); compressed-tensors' `pack_quantized/helpers.py` writes them.
//!
//! The set becomes one tensor for the inventory, named `X.weight`, of the logical `[N, K]` that
//! `weight_shape` states and every other part agrees with: the family table then holds it to the
//! config's shape like any dense weight, and the set's parts are explained as parts of that role.
//! A set that does not agree with itself, or that the config says is not quantized (or a dense
//! Linear the config quantizes), is a storage the loader cannot read as that role's weights: its
//! `readable` says why, naming the tensor, and `inventory.complete` FAILs with it.

use crate::checkpoint::Checkpoint;
use crate::config::DraftConfig;
use crate::container::TensorInfo;
use crate::dtype::Dtype;
use crate::escape::escape;
use crate::family::{Kind, Naming};
use crate::quant::PackQuantized;
use std::collections::{HashMap, HashSet};

/// The parts a quantized Linear stores beside `X.weight_packed`.
const PARTS: [&str; 3] = [".weight_scale", ".weight_shape", ".weight_zero_point"];
const PACKED: &str = ".weight_packed";

/// One tensor as the inventory sees it, owning its name (a quantized set's is its role's `X.weight`).
pub struct Folded {
    pub name: String,
    pub shape: Vec<u64>,
    pub shown: String,
    pub readable: Result<(), String>,
}

/// The folder's tensors with every quantized set folded into one, in file order.
pub fn fold(
    config: &DraftConfig,
    scheme: &PackQuantized,
    checkpoint: &Checkpoint,
    tensors: &[&TensorInfo],
    dense: impl Fn(&TensorInfo) -> Folded,
) -> Vec<Folded> {
    let by_name: HashMap<&str, &TensorInfo> =
        tensors.iter().map(|t| (t.name.as_str(), *t)).collect();
    let modules: HashSet<&str> = tensors
        .iter()
        .filter_map(|t| t.name.strip_suffix(PACKED))
        .collect();
    // The spelling (bare or `model.`) is the folder's, read from the names its roles go by.
    let logical: Vec<String> = tensors
        .iter()
        .map(|t| match t.name.strip_suffix(PACKED) {
            Some(module) => format!("{module}.weight"),
            None => t.name.clone(),
        })
        .collect();
    let naming = config.family().naming(logical.iter().map(String::as_str));
    let mut out = Vec::with_capacity(tensors.len());
    for t in tensors {
        if let Some(module) = t.name.strip_suffix(PACKED) {
            // One quantized set, folded into its role's weight.
            let (shape, readable) = match read_set(scheme, checkpoint, &by_name, naming, module, t)
            {
                Ok(shape) => (shape, Ok(())),
                Err(why) => (t.shape.clone(), Err(why)),
            };
            out.push(Folded {
                name: format!("{module}.weight"),
                shape,
                shown: format!(
                    "{} {} packed ({})",
                    t.dtype,
                    t.shape_text(),
                    scheme.describe()
                ),
                readable,
            });
            continue;
        }
        let part_of_a_set = PARTS
            .iter()
            .any(|p| t.name.strip_suffix(p).is_some_and(|m| modules.contains(m)));
        if part_of_a_set {
            continue;
        }
        let mut folded = dense(t);
        if folded.readable.is_ok() {
            if let Some(module) = t
                .name
                .strip_suffix(".weight")
                .filter(|_| linear(naming, &t.name))
            {
                if let Ok(entry) = scheme.quantizes(module) {
                    folded.readable = Err(format!(
                        "{} is stored dense ({}), but quantization_config quantizes {} ({entry}): the loader builds a packed layer and finds no {}{PACKED}",
                        escape(&t.name), t.dtype, escape(module), escape(module)
                    ));
                }
            }
        }
        out.push(folded);
    }
    out
}

/// The scales of the quantized sets among `tensors`: each `X.weight_scale` beside an
/// `X.weight_packed` (one pass over the names, whatever their number).
pub fn scales<'t>(tensors: &[&'t TensorInfo]) -> HashSet<&'t str> {
    let modules: HashSet<&str> = tensors
        .iter()
        .filter_map(|t| t.name.strip_suffix(PACKED))
        .collect();
    tensors
        .iter()
        .map(|t| t.name.as_str())
        .filter(|n| {
            n.strip_suffix(".weight_scale")
                .is_some_and(|m| modules.contains(m))
        })
        .collect()
}

/// The name of the role a stored tensor is a part of: `X.weight` for every part of a quantized set
/// (`X.weight_packed`, `X.weight_scale`, ...), the name itself otherwise.
pub fn role_name(name: &str) -> std::borrow::Cow<'_, str> {
    std::iter::once(PACKED)
        .chain(PARTS)
        .find_map(|p| name.strip_suffix(p))
        .map_or(std::borrow::Cow::Borrowed(name), |m| {
            std::borrow::Cow::Owned(format!("{m}.weight"))
        })
}

/// Whether `name` (`X.weight`) is a Linear's weight: a projection, fc, or the output head. Norms,
/// embeddings, codebooks and base kernels are not, and no writer quantizes them.
fn linear(naming: Naming, name: &str) -> bool {
    name == "lm_head.weight"
        || matches!(
            naming.role(name).and_then(|r| r.kind()),
            Some(Kind::Projection(_) | Kind::Fc)
        )
}

/// The logical `[N, K]` of a quantized set, or why its parts do not make one the loader reads.
fn read_set(
    scheme: &PackQuantized,
    checkpoint: &Checkpoint,
    by_name: &HashMap<&str, &TensorInfo>,
    naming: Naming,
    module: &str,
    packed: &TensorInfo,
) -> Result<Vec<u64>, String> {
    let m = escape(module);
    let packed_name = escape(&packed.name);
    if !linear(naming, &format!("{module}.weight")) {
        return Err(format!("{packed_name}: {m} is stored quantized, but it is not a Linear layer (norms, embeddings, codebooks and base kernels are never quantized): the loader reads a float weight and finds none"));
    }
    if let Err(why) = scheme.quantizes(module) {
        return Err(format!("{packed_name}: {m} is stored quantized, but {why}: the loader builds a dense Linear, finds no {m}.weight and drops the packed tensors"));
    }
    let part = |suffix: &str| by_name.get(format!("{module}{suffix}").as_str()).copied();
    let [w] = match (packed.dtype, packed.shape.as_slice()) {
        (Dtype::I32, [n, w]) => [(*n, *w)],
        _ => {
            return Err(format!(
                "{packed_name} is {} {}, not I32 [N, K * {} / 32]",
                packed.dtype,
                packed.shape_text(),
                scheme.bits
            ))
        }
    };
    let (n, width) = w;
    let shape_name = format!("{m}.weight_shape");
    let stated = part(".weight_shape")
        .ok_or_else(|| format!("{shape_name} is missing: the loader reads [N, K] from it"))?;
    let [sn, sk] = weight_shape(checkpoint, stated)?;
    let bits = u64::from(scheme.bits);
    // ceil(K * bits / 32) words per row; K is at most MAX_DIMENSION, so nothing overflows.
    let words = (sk * bits).div_ceil(32);
    if sn != n || words != width {
        return Err(format!(
            "{shape_name} holds [{sn}, {sk}], but {packed_name} is I32 {}: [{sn}, {sk}] at {bits} bits packs into [{sn}, {words}]",
            packed.shape_text()
        ));
    }
    let columns = match scheme.group {
        Some(g) if sk % g != 0 => {
            return Err(format!(
                "group size {g} does not divide {m}'s K = {sk} ({shape_name})"
            ))
        }
        Some(g) => sk / g,
        None => 1,
    };
    let scale_name = format!("{m}.weight_scale");
    let scale = part(".weight_scale").ok_or_else(|| format!("{scale_name} is missing"))?;
    let float = matches!(scale.dtype, Dtype::Bf16 | Dtype::F16 | Dtype::F32);
    if !float || scale.shape != [n, columns] {
        return Err(format!(
            "{scale_name} is {} {}, not a float [{n}, {columns}] ({})",
            scale.dtype,
            scale.shape_text(),
            scheme.describe()
        ));
    }
    let zero_name = format!("{m}.weight_zero_point");
    match (part(".weight_zero_point"), scheme.symmetric) {
        (Some(_), true) => {
            return Err(format!("{zero_name} is there, but the scheme is symmetric (quantization_config says symmetric: true): the loader reads no zero point"))
        }
        (None, false) => {
            return Err(format!("{zero_name} is missing, and the scheme is asymmetric (symmetric: false): every weight of {m} would be off by its zero point"))
        }
        (Some(z), false) => {
            let rows = (n * bits).div_ceil(32);
            if z.dtype != Dtype::I32 || z.shape != [rows, columns] {
                return Err(format!(
                    "{zero_name} is {} {}, not I32 [{rows}, {columns}] (packed along N)",
                    z.dtype,
                    z.shape_text()
                ));
            }
        }
        (None, true) => {}
    }
    Ok(vec![sn, sk])
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
            .filter(|d| 1 <= *d && *d <= crate::limits::MAX_DIMENSION)
            .ok_or(v)
    };
    match (dim(), dim()) {
        (Ok(a), Ok(b)) => Ok([a, b]),
        (Err(v), _) | (_, Err(v)) => Err(format!(
            "{name} holds {v}, not a dimension from 1 to {}",
            crate::limits::MAX_DIMENSION
        )),
    }
}
