//! A Hugging Face folder whose Linears are quantized (spec 17.1), as the inventory sees it: each
//! quantized Linear `X` stores a set of tensors in place of its dense `X.weight` (the scheme's
//! primary, `X.weight_packed` or a `X.weight` of codes, and its parts: scales, shapes, zero points,
//! global scales; see [`crate::quant::Storage`]).
//!
//! The set becomes one tensor for the inventory, named `X.weight`, of the logical `[N, K]` its parts
//! agree on: the family table then holds it to the config's shape like any dense weight, and the
//! set's parts are explained as parts of that role. A set that does not agree with itself, or that
//! the config says is not quantized (or a dense Linear the config quantizes), is a storage the
//! loader cannot read as that role's weights: its `readable` says why, naming the tensor, and
//! `inventory.complete` FAILs with it.

mod sets;
pub mod source;

use crate::checkpoint::Checkpoint;
use crate::checks::scales::Rule;
use crate::config::DraftConfig;
use crate::container::TensorInfo;
use crate::escape::escape;
use crate::family::{Kind, Naming};
use crate::quant::{Expect, Scheme, Storage};
use std::collections::{HashMap, HashSet};

/// One tensor as the inventory sees it, owning its name (a quantized set's is its role's `X.weight`).
pub struct Folded {
    pub name: String,
    pub shape: Vec<u64>,
    pub shown: String,
    pub readable: Result<(), String>,
}

/// The modules stored quantized: each whose scheme's marker (`X.weight_packed`, `X.weight_scale`,
/// `X.scales`, ...) is among `tensors`.
fn modules<'t>(scheme: &Scheme, tensors: &[&'t TensorInfo]) -> HashSet<&'t str> {
    let marker = scheme.storage.marker();
    tensors
        .iter()
        .filter_map(|t| t.name.strip_suffix(marker))
        .collect()
}

/// The module whose set `name` is a part of (its primary or one of its parts), if it is one.
fn set_of<'n>(scheme: &Scheme, modules: &HashSet<&str>, name: &'n str) -> Option<&'n str> {
    let storage = &scheme.storage;
    std::iter::once(storage.primary())
        .chain(storage.parts().iter().copied())
        .filter_map(|p| name.strip_suffix(p))
        .find(|m| modules.contains(m))
}

/// The storage `module`'s set is read as: the config's for it, or the scheme's when the config
/// leaves it dense (the set is then refused for that, and its scales still read by its scheme).
fn storage_of(scheme: &Scheme, module: &str) -> (Storage, Result<String, String>) {
    match scheme.expect(module) {
        Expect::Quantized(s, entry) => (s, Ok(entry)),
        Expect::Either(s) => (s, Ok("stored quantized".to_owned())),
        Expect::Dense(why) => (scheme.storage.clone(), Err(why)),
    }
}

/// The folder's tensors with every quantized set folded into one, in file order.
pub fn fold(
    config: &DraftConfig,
    scheme: &Scheme,
    checkpoint: &Checkpoint,
    tensors: &[&TensorInfo],
    dense: impl Fn(&TensorInfo) -> Folded,
) -> Vec<Folded> {
    let by_name: HashMap<&str, &TensorInfo> =
        tensors.iter().map(|t| (t.name.as_str(), *t)).collect();
    let modules = modules(scheme, tensors);
    let primary = scheme.storage.primary();
    // The spelling (bare or `model.`) is the folder's, read from the names its roles go by.
    let logical: Vec<String> = tensors
        .iter()
        .map(|t| role_name(scheme, &t.name).into_owned())
        .collect();
    let naming = config.family().naming(logical.iter().map(String::as_str));
    let mlx = matches!(scheme.storage, Storage::Mlx(_));
    let mut out = Vec::with_capacity(tensors.len());
    for t in tensors {
        let module = t.name.strip_suffix(primary).filter(|m| modules.contains(m));
        if let Some(module) = module {
            // One quantized set, folded into its role's weight.
            let (storage, said) = storage_of(scheme, module);
            let read = match said {
                _ if !quantizable(naming, &format!("{module}.weight"), mlx) => Err(format!("{}: {} is stored quantized, but it is not a Linear layer (norms, embeddings, codebooks and base kernels are never quantized): the loader reads a float weight and finds none", escape(&t.name), escape(module))),
                Err(why) => Err(format!("{}: {} is stored quantized, but {why}: the loader builds a dense layer, finds no float {}.weight and drops the quantized tensors", escape(&t.name), escape(module), escape(module))),
                Ok(_) => {
                    let part = |suffix: &str| by_name.get(format!("{module}{suffix}").as_str()).copied();
                    sets::read(&storage, checkpoint, &part, module, t)
                }
            };
            let (shape, readable) = match read {
                Ok(shape) => (shape, Ok(())),
                Err(why) => (t.shape.clone(), Err(why)),
            };
            out.push(Folded {
                name: format!("{module}.weight"),
                shape,
                shown: format!("{} {} ({})", t.dtype, t.shape_text(), storage.describe()),
                readable,
            });
            continue;
        }
        if set_of(scheme, &modules, &t.name).is_some() {
            continue;
        }
        let mut folded = dense(t);
        if folded.readable.is_ok() {
            if let Some(module) = t
                .name
                .strip_suffix(".weight")
                .filter(|_| quantizable(naming, &t.name, mlx))
            {
                if let Expect::Quantized(storage, entry) = scheme.expect(module) {
                    folded.readable = Err(format!(
                        "{} is stored dense ({}), but the config quantizes {} ({entry}): the loader builds a {} layer and finds no {}{}",
                        escape(&t.name), t.dtype, escape(module), storage.describe(), escape(module), storage.marker()
                    ));
                }
            }
        }
        out.push(folded);
    }
    out
}

/// What `quant.scales` reads of the quantized sets among `tensors`, by name: each scale, zero
/// point and global scale, and FP8 codes (which have NaN encodings), each with its rule.
pub fn reads<'t>(scheme: &Scheme, tensors: &[&'t TensorInfo]) -> HashMap<&'t str, Rule> {
    let modules = modules(scheme, tensors);
    let mut out = HashMap::new();
    for t in tensors {
        let Some(module) = set_of(scheme, &modules, &t.name) else {
            continue;
        };
        let suffix = &t.name[module.len()..];
        let (storage, _) = storage_of(scheme, module);
        if let Some(rule) = sets::rule(&storage, suffix) {
            out.insert(t.name.as_str(), rule);
        }
    }
    out
}

/// The name of the role a stored tensor is a part of: `X.weight` for every part of a quantized set
/// (`X.weight_packed`, `X.weight_scale`, `X.scales`, ...), the name itself otherwise.
pub fn role_name<'n>(scheme: &Scheme, name: &'n str) -> std::borrow::Cow<'n, str> {
    let storage = &scheme.storage;
    std::iter::once(storage.primary())
        .chain(storage.parts().iter().copied())
        .find_map(|p| name.strip_suffix(p))
        .map_or(std::borrow::Cow::Borrowed(name), |m| {
            std::borrow::Cow::Owned(format!("{m}.weight"))
        })
}

/// The storage of the codes `name` holds, described, when it is a set's primary (`X.weight_packed`,
/// or a `X.weight` of a type that is not a float): for the census.
pub fn codes(scheme: &Scheme, name: &str, dtype: crate::dtype::Dtype) -> Option<String> {
    let module = name.strip_suffix(scheme.storage.primary())?;
    if crate::checks::finite::is_float(dtype) {
        return None;
    }
    Some(storage_of(scheme, module).0.describe())
}

/// Whether `name` (`X.weight`) may be stored quantized: a Linear's weight (a projection, fc, or the
/// output head) and, for MLX, whose `nn.quantize` quantizes embeddings too, the embedding table.
/// Norms, codebooks and base kernels are not, and no writer quantizes them.
fn quantizable(naming: Naming, name: &str, mlx: bool) -> bool {
    name == "lm_head.weight"
        || match naming.role(name).and_then(|r| r.kind()) {
            Some(Kind::Projection(_) | Kind::Fc) => true,
            Some(Kind::EmbedTokens) => mlx,
            _ => false,
        }
}
