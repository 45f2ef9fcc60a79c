//! Draft families as tables (spec sections 6 and 10).
//!
//! A family is data: per role, its name, its shape as a function of the config, the forms it may
//! take, and which config switch turns it on. The checks walk these tables ("every role this config
//! switches on is present, in an accepted form, of its shape") instead of listing tensors, so a third
//! family is one new table.

mod dflash;
mod dflash2;
pub mod gguf_names;
pub mod names;

pub use names::{
    looks_second_family, source_name, Alias, ConvPart, ConvSite, Kind, LayerGain, Naming,
    Projection, Role, Scalar, SelectorPart, SourceName, SCALAR_PREFIX,
};

use crate::config::{Architecture, DraftConfig, Field, Geometry};

/// A form a tensor may take (spec section 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// A q4_1 tile grid of the role's N x K.
    Grid,
    /// A BF16 matrix declared 2-D `[N, K]`.
    Bf16Matrix,
    /// A BF16 tensor declared with exactly the role's shape (a DFlash2 base kernel).
    Bf16Tensor,
    /// A BF16 norm gain `[len]`, read as bf16 rather than f16.
    Gain,
    /// The fusion matrix: BF16 `[hidden, taps*hidden]` or row-blocked `[hidden/32, taps*hidden, 32]`.
    Fusion,
}

/// A feature of the second family, switched on by a pair of config fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    Conv,
    Selector,
}

impl Feature {
    pub const ALL: [Feature; 2] = [Feature::Conv, Feature::Selector];

    /// The check that proves the feature's tensors.
    pub fn check_id(self) -> &'static str {
        match self {
            Feature::Conv => crate::check_id::CheckId::DFLASH2_CONV,
            Feature::Selector => crate::check_id::CheckId::DFLASH2_SELECTOR,
        }
    }

    /// The config fields that switch it on (both or neither).
    pub fn fields(self) -> [&'static str; 2] {
        match self {
            Feature::Conv => ["conv_kernel_size", "conv_group_size"],
            Feature::Selector => ["selector_rank", "selector_top_k"],
        }
    }

    /// What it is, for messages.
    pub fn noun(self) -> &'static str {
        match self {
            Feature::Conv => "convolution",
            Feature::Selector => "candidate selector",
        }
    }

    /// Whether `config` switches it on; a broken pair is the pair's problem.
    pub fn is_on(self, config: &DraftConfig) -> Field<bool> {
        Ok(match self {
            Feature::Conv => config.conv.clone()?.is_some(),
            Feature::Selector => config.selector.clone()?.is_some(),
        })
    }
}

/// What makes a role expected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Switch {
    /// Every package of the family holds it.
    Always,
    /// Explained when present, never required (a draft's own embedding table).
    Optional,
    /// Held exactly when the config switches the feature on.
    Feature(Feature),
}

/// One row of a family's table.
pub struct RoleSpec {
    pub kind: Kind,
    /// The logical shape: `[N, K]` for a matrix, `[len]` for a gain, the full shape of a tensor.
    pub shape: fn(&Geometry<'_>) -> Field<Vec<u64>>,
    /// Accepted forms, the first being the one the reference writes.
    pub forms: &'static [Form],
    pub switch: Switch,
}

/// A draft family: its tables of roles, its scalars and its aliases.
pub struct Family {
    /// `DFlash` or `DFlash2`, for messages.
    pub name: &'static str,
    /// A stable token for the JSON census (`census.family`): `dflash`, `assistant_head`, `dflash2`.
    pub token: &'static str,
    pub tables: &'static [&'static [RoleSpec]],
    /// The `dflash.*` scalars, in groups: the first family's, then any the family adds.
    pub scalar_groups: &'static [&'static [Scalar]],
    pub aliases: &'static [Alias],
}

impl std::fmt::Debug for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Family")
            .field("name", &self.name)
            .field("aliases", &self.aliases)
            .finish_non_exhaustive()
    }
}

/// Families are statics: one is another only if it is the same table.
impl PartialEq for Family {
    fn eq(&self, other: &Family) -> bool {
        std::ptr::eq(self, other)
    }
}

/// The first family (spec section 6).
pub static DFLASH: Family = Family {
    name: "DFlash",
    token: "dflash",
    tables: &[dflash::ROLES],
    scalar_groups: &[&Scalar::ALL],
    aliases: &[],
};

/// The first family under the assistant head's names (spec section 10).
pub static ASSISTANT_HEAD: Family = Family {
    name: "DFlash",
    token: "assistant_head",
    tables: &[dflash::ROLES],
    scalar_groups: &[&Scalar::ALL],
    aliases: dflash::ASSISTANT_ALIASES,
};

/// The second family: the first plus per-layer convolutions and a candidate selector (spec section 10).
pub static DFLASH2: Family = Family {
    name: "DFlash2",
    token: "dflash2",
    tables: &[dflash::ROLES, dflash2::ROLES],
    scalar_groups: &[&Scalar::ALL, &Scalar::SECOND_FAMILY],
    aliases: &[],
};

/// The family an architecture names: `config` reads what the JSON declares, the family recognises it.
pub fn of(architecture: Architecture) -> &'static Family {
    match architecture {
        Architecture::Dflash => &DFLASH,
        Architecture::Dflash2 => &DFLASH2,
        Architecture::AssistantHead => &ASSISTANT_HEAD,
    }
}

impl DraftConfig {
    /// The table of roles this config's tensors are read against.
    pub fn family(&self) -> &'static Family {
        of(self.architecture)
    }
}

/// Every alias any family uses, for mapping checkpoint names.
pub fn all_aliases() -> &'static [Alias] {
    dflash::ASSISTANT_ALIASES
}

impl Family {
    pub fn specs(&self) -> impl Iterator<Item = &'static RoleSpec> + '_ {
        self.tables.iter().flat_map(|t| t.iter())
    }

    /// Every scalar of the family, in report order.
    pub fn scalars(&self) -> impl Iterator<Item = Scalar> + '_ {
        self.scalar_groups.iter().flat_map(|g| g.iter().copied())
    }

    /// The row for `kind`, or `None` when this family has no such role.
    pub fn spec(&self, kind: Kind) -> Option<&'static RoleSpec> {
        self.specs().find(|s| s.kind == kind)
    }

    pub fn is_second(&self) -> bool {
        self.specs().any(|s| matches!(s.switch, Switch::Feature(_)))
    }

    /// The features this family can switch on.
    pub fn features(&self) -> Vec<Feature> {
        Feature::ALL
            .into_iter()
            .filter(|f| self.specs().any(|s| s.switch == Switch::Feature(*f)))
            .collect()
    }

    /// Every role of `layers` layers whose row `keep` accepts, layer by layer in table order, then
    /// the roles that occur once.
    pub fn roles(
        &self,
        layers: u64,
        keep: impl Fn(&RoleSpec) -> bool,
    ) -> Vec<(Role, &'static RoleSpec)> {
        let mut out = Vec::new();
        for layer in 0..layers {
            for s in self.specs().filter(|s| s.kind.is_per_layer() && keep(s)) {
                out.push((s.kind.at(layer), s));
            }
        }
        for s in self.specs().filter(|s| !s.kind.is_per_layer() && keep(s)) {
            out.push((s.kind.at(0), s));
        }
        out
    }

    /// The file's spelling with this family's aliases.
    pub fn naming<'n>(&self, names: impl IntoIterator<Item = &'n str>) -> Naming {
        Naming::detect(names).with_aliases(self.aliases)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_family_holds_the_first() {
        for s in DFLASH.specs() {
            assert!(DFLASH2.spec(s.kind).is_some(), "{:?}", s.kind);
        }
        assert!(DFLASH2.is_second() && !DFLASH.is_second());
        assert_eq!(DFLASH2.features(), Feature::ALL);
    }

    #[test]
    fn every_kind_has_one_row_at_most() {
        for family in [&DFLASH, &DFLASH2] {
            for kind in Kind::all() {
                assert!(family.specs().filter(|s| s.kind == kind).count() <= 1);
            }
        }
    }

    /// The published DFlash2 fixture's bf16 checkpoint: 81 tensors, 5,544,319,488 data bytes (spec
    /// section 10), from this table and the fixture's config alone.
    #[test]
    fn the_dflash2_table_sizes_the_published_checkpoint() {
        let text = include_str!("../../../fixtures/configs/dflash2-reference.json");
        let config = DraftConfig::from_json(text.as_bytes()).unwrap();
        let g = Geometry::new(&config);
        let roles = DFLASH2.roles(5, |s| s.switch != Switch::Optional);
        let bytes: u64 = roles
            .iter()
            .map(|(_, s)| (s.shape)(&g).unwrap().iter().product::<u64>() * 2)
            .sum();
        assert_eq!((roles.len(), bytes), (81, 5_544_319_488));
    }

    #[test]
    fn roles_walk_layers_then_the_rest() {
        let roles = DFLASH.roles(2, |s| matches!(s.kind, Kind::Projection(_)));
        assert_eq!(roles.len(), 14);
        assert_eq!(
            roles[7].0,
            Role::Projection {
                layer: 1,
                projection: Projection::Q
            }
        );
    }
}
