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
use std::borrow::Cow;
use std::collections::HashMap;

/// One tensor as the inventory sees it, owning its name (a quantized set's is its role's `X.weight`).
pub struct Folded {
    pub name: String,
    pub shape: Vec<u64>,
    pub shown: String,
    pub readable: Result<(), String>,
}

/// A folder's tensors as `scheme` stores them, classified once: the census, the inventory and
/// `quant.scales` each ask which set a tensor is a part of, the role it goes by and how the config
/// says its module is stored; asked anew by each (a string built and the config's lists matched
/// per tensor each time), that was a third of a quantized folder's gate beyond reading its bytes.
pub struct Sets<'s, 't> {
    scheme: &'s Scheme,
    /// Each tensor's role name, in the order of the tensors the sets were read from: `X.weight`
    /// for every part of a set (`X.weight_packed`, `X.weight_scale`, `X.scales`, ...), the name
    /// itself otherwise.
    pub roles: Vec<Cow<'t, str>>,
    /// The modules stored quantized (each whose scheme's marker, `X.weight_packed`,
    /// `X.weight_scale`, `X.scales`, ..., is among the tensors), each with the storage its set is
    /// read as: the config's for it, or the scheme's when the config leaves it dense (the set is
    /// then refused for that, and its scales still read by its scheme).
    modules: HashMap<&'t str, Stored>,
}

/// How a module's set is read: its storage, what the config says of it (why it is dense, when the
/// config says so), and the storage described, for the census and the inventory's messages.
type Stored = (Storage, Result<String, String>, String);

impl<'s, 't> Sets<'s, 't> {
    pub fn new(scheme: &'s Scheme, tensors: &[&'t TensorInfo]) -> Sets<'s, 't> {
        let marker = scheme.storage.marker();
        let modules = tensors
            .iter()
            .filter_map(|t| t.name.strip_suffix(marker))
            .map(|m| {
                let (storage, said) = storage_of(scheme, m);
                let described = storage.describe();
                (m, (storage, said, described))
            })
            .collect();
        let roles = tensors.iter().map(|t| role_name(scheme, &t.name)).collect();
        Sets {
            scheme,
            roles,
            modules,
        }
    }

    /// The scheme the sets are read by.
    pub fn scheme(&self) -> &'s Scheme {
        self.scheme
    }

    /// The module whose set `name` is the primary of (`X.weight_packed`, or MLX's `X.weight`), with
    /// how it is stored, if it is one.
    pub(super) fn primary_of<'n>(&self, name: &'n str) -> Option<(&'n str, &Stored)> {
        let m = name.strip_suffix(self.scheme.storage.primary())?;
        Some((m, self.modules.get(m)?))
    }

    /// The module whose set `name` is a part of (its primary or one of its parts), if it is one.
    pub(super) fn set_of<'n>(&self, name: &'n str) -> Option<(&'n str, &Stored)> {
        let storage = &self.scheme.storage;
        std::iter::once(storage.primary())
            .chain(storage.parts().iter().copied())
            .filter_map(|p| name.strip_suffix(p))
            .find_map(|m| Some((m, self.modules.get(m)?)))
    }

    /// The folder's tensors (those the sets were read from) with every quantized set folded into
    /// one, in file order.
    pub fn fold(
        &self,
        config: &DraftConfig,
        checkpoint: &Checkpoint,
        tensors: &[&TensorInfo],
        dense: impl Fn(&TensorInfo) -> Folded,
    ) -> Vec<Folded> {
        let scheme = self.scheme;
        // The spelling (bare or `model.`) is the folder's, read from the names its roles go by.
        let naming = config
            .family()
            .naming(self.roles.iter().map(|r| r.as_ref()));
        let mlx = matches!(scheme.storage, Storage::Mlx(_));
        let mut out = Vec::with_capacity(tensors.len());
        for t in tensors {
            if let Some((module, (storage, said, described))) = self.primary_of(&t.name) {
                // One quantized set, folded into its role's weight.
                let name = format!("{module}.weight");
                let read = match said {
                    _ if !quantizable(naming, &name, mlx) => Err(format!("{}: {} is stored quantized, but it is not a Linear layer (norms, embeddings, codebooks and base kernels are never quantized): the loader reads a float weight and finds none", escape(&t.name), escape(module))),
                    Err(why) => Err(format!("{}: {} is stored quantized, but {why}: the loader builds a dense layer, finds no float {}.weight and drops the quantized tensors", escape(&t.name), escape(module), escape(module))),
                    Ok(_) => {
                        let part = |suffix: &str| checkpoint.headers.get(&format!("{module}{suffix}")).map(|(_, t)| t);
                        sets::read(storage, checkpoint, &part, module, t)
                    }
                };
                let (shape, readable) = match read {
                    Ok(shape) => (shape, Ok(())),
                    Err(why) => (t.shape.clone(), Err(why)),
                };
                out.push(Folded {
                    name,
                    shape,
                    shown: format!("{} {} ({described})", t.dtype, t.shape_text()),
                    readable,
                });
                continue;
            }
            if self.set_of(&t.name).is_some() {
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

    /// The rule `quant.scales` reads `name` by, when it is a part of a quantized set the check
    /// reads: a scale, zero point or global scale, or FP8 codes (which have NaN encodings).
    pub fn rule(&self, name: &str) -> Option<Rule> {
        let (module, (storage, ..)) = self.set_of(name)?;
        sets::rule(storage, &name[module.len()..])
    }

    /// The storage of the codes `name` holds, described, when it is a set's primary
    /// (`X.weight_packed`, or a `X.weight` of a type that is not a float): for the census.
    pub fn codes(&self, name: &str, dtype: crate::dtype::Dtype) -> Option<String> {
        let module = name.strip_suffix(self.scheme.storage.primary())?;
        if crate::checks::finite::is_float(dtype) {
            return None;
        }
        Some(match self.modules.get(module) {
            Some((.., described)) => described.clone(),
            None => storage_of(self.scheme, module).0.describe(),
        })
    }
}

/// The storage `module`'s set is read as: the config's for it, or the scheme's when the config
/// leaves it dense.
fn storage_of(scheme: &Scheme, module: &str) -> (Storage, Result<String, String>) {
    match scheme.expect(module) {
        Expect::Quantized(s, entry) => (s, Ok(entry)),
        Expect::Either(s) => (s, Ok("stored quantized".to_owned())),
        Expect::Dense(why) => (scheme.storage.clone(), Err(why)),
    }
}

/// The name of the role a stored tensor is a part of: `X.weight` for every part of a quantized set
/// (`X.weight_packed`, `X.weight_scale`, `X.scales`, ...), the name itself otherwise.
fn role_name<'n>(scheme: &Scheme, name: &'n str) -> Cow<'n, str> {
    let storage = &scheme.storage;
    std::iter::once(storage.primary())
        .chain(storage.parts().iter().copied())
        .find_map(|p| name.strip_suffix(p))
        .map_or(Cow::Borrowed(name), |m| Cow::Owned(format!("{m}.weight")))
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
