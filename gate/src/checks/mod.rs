//! The checks of spec section 7 that read the container, run in report order.
//!
//! Each submodule holds one family of checks. A check that cannot run because a config field or an
//! earlier check let it down is UNDECIDED with `blocked_by` naming that check, so a reader (and a
//! negative control) can tell "failed here" from "could not be asked".

mod dflash2;
pub mod finite;
mod gains;
mod geometry;
pub mod inventory;
mod projections;
mod scalars;
pub mod scales;

pub use geometry::{check_draft_geometry, check_geometry, Geometry, MAX_KNOWN_BLOCK};
pub use projections::{HEADERS, SCAN_STEP};

use crate::config::DraftConfig;
use crate::container::Container;
use crate::family::{Kind, Naming, Role};
use crate::report::{Check, GridCensus};
use crate::tile::{GridGeometry, TileGrid};
use std::collections::HashMap;

/// The ids of the checks the package front end runs before these (kept here, with the others, so
/// that `source`, `target` and `manifest` can name them without importing the front end).
pub const IS_DFLASH: &str = crate::check_id::CheckId::CONFIG_IS_DFLASH;
pub const PARSES: &str = crate::check_id::CheckId::CONTAINER_PARSES;
pub const GEOMETRY: &str = crate::check_id::CheckId::CONFIG_GEOMETRY;

/// What the checks learned about each tensor's form: for the census, and (the grids they proved)
/// for `--source`, which compares each grid as the checks read it instead of proving it again.
#[derive(Default)]
pub struct Forms<'a> {
    pub by_name: HashMap<String, (String, Option<GridCensus>)>,
    /// The tensors the tile checks read as q4_1 grids, exactly those whose census has a grid.
    pub grids: HashMap<String, TileGrid<'a>>,
}

impl<'a> Forms<'a> {
    fn set(&mut self, name: &str, form: String, grid: Option<GridCensus>) {
        // A later finding about a tensor replaces an earlier one, the grid too: the two maps agree.
        self.grids.remove(name);
        self.by_name.insert(name.to_owned(), (form, grid));
    }

    fn set_grid(&mut self, name: &str, form: String, census: GridCensus, grid: TileGrid<'a>) {
        self.by_name.insert(name.to_owned(), (form, Some(census)));
        self.grids.insert(name.to_owned(), grid);
    }
}

/// Everything a check may look at.
pub struct Inputs<'r, 'a> {
    pub config: &'r DraftConfig,
    pub geometry: Geometry<'r>,
    pub container: &'r Container<'a>,
    pub naming: Naming,
}

/// Runs every container-reading check, in report order; `bf16.finite`, last, only when not
/// `defer_finite` (with `--source`, which reads fc as it compares it, the caller runs it after, so
/// that fc is read once: see [`finite::run_except`]).
pub fn run<'a>(
    config: &DraftConfig,
    container: &Container<'a>,
    defer_finite: bool,
) -> Result<(Vec<Check>, Forms<'a>), crate::parallel::WorkerPanic> {
    let naming = config
        .family()
        .naming(container.table.entries.iter().map(|e| e.name.as_str()));
    let inputs = Inputs {
        config,
        geometry: Geometry::new(config),
        container,
        naming,
    };
    let mut forms = Forms::default();
    // The second family's matrices (and a draft's own embedding table) are decided first: those found
    // gridded join the tile checks.
    let dflash2::Features {
        checks: feature_checks,
        mut grids,
    } = dflash2::run(&inputs, &mut forms);
    grids.extend(embedding_grid(&inputs));
    let mut checks = projections::run(&inputs, &mut forms, &grids)?;
    checks.extend(scalars::run(&inputs, &mut forms));
    checks.extend(gains::run(&inputs, &mut forms));
    checks.extend(feature_checks);
    checks.push(q4nx_inventory(&inputs));
    if !defer_finite {
        checks.push(finite::run(container)?);
    }
    Ok((checks, forms))
}

/// How a Q4NX package's loader meets its tensors: its own checks prove presence grid by grid, so the
/// one inventory is asked only what is unexplained; its DFlash fields are `dflash.*` scalars.
const Q4NX: inventory::Loader = inventory::Loader {
    defines: "the package's loader reads",
    wrong: "missing or wrong",
    held_to: "of the config's shape",
    source: "the config",
    declares: "config.json",
    missing: "the package's loader cannot build the draft without it",
    misshapen: "",
    extra: "",
    unexplained: "are unexplained",
    owned: "have a role",
    reversed: false,
    scalar_tensors: true,
    vocabulary_of_the_target: false,
};

/// `inventory.explained` of a Q4NX package, through the one inventory.
fn q4nx_inventory(inputs: &Inputs<'_, '_>) -> crate::report::Check {
    let entries = &inputs.container.table.entries;
    let held: Vec<inventory::Held<'_>> = entries
        .iter()
        .map(|e| inventory::Held {
            name: &e.name,
            shape: e.shape.clone(),
            shown: format!("{} {}", e.dtype, e.shape_text()),
            readable: Ok(()),
        })
        .collect();
    let by_name: HashMap<&str, &crate::container::TensorInfo> =
        entries.iter().map(|e| (e.name.as_str(), e)).collect();
    let embedding = |t: &inventory::Held<'_>| match by_name.get(t.name) {
        Some(e) => q4nx_embedding(inputs, e),
        None => Err(None),
    };
    inventory::explained_only(
        inputs.config,
        inventory::Spelling::Checkpoint(inputs.naming),
        &Q4NX,
        &held,
        &embedding,
    )
}

/// `Ok` when a Q4NX package's embedding table is BF16 `[vocab, hidden]` or a q4_1 grid of that size;
/// `Err(None)` when the config cannot size it.
fn q4nx_embedding(
    inputs: &Inputs<'_, '_>,
    e: &crate::container::TensorInfo,
) -> Result<(), Option<String>> {
    let (Ok(Some(vocab)), Ok(hidden)) =
        (inputs.config.vocab_size.clone(), inputs.geometry.hidden())
    else {
        return Err(None);
    };
    if e.dtype == crate::dtype::Dtype::Bf16 && e.shape == [vocab, hidden] {
        return Ok(());
    }
    if let Some(g) = GridGeometry::new(vocab, hidden) {
        if TileGrid::new(e, inputs.container.data(e), g).is_ok() {
            return Ok(());
        }
    }
    Err(Some(format!("an embedding table, but {} {} is neither BF16 [{vocab}, {hidden}] nor a q4_1 grid of {vocab} x {hidden}", e.dtype, e.shape_text())))
}

/// A draft's own embedding table when it is a whole q4_1 grid of its row's shape: a grid like any other,
/// so its headers are proven by the tile checks (inventory.explained says what else it may be).
fn embedding_grid<'a>(inputs: &Inputs<'_, 'a>) -> Option<(String, TileGrid<'a>)> {
    let spec = inputs.config.family().spec(Kind::EmbedTokens)?;
    let name = inputs.naming.name(Role::EmbedTokens);
    let info = inputs.container.get(&name)?;
    let [n, k] = (spec.shape)(&inputs.geometry).ok()?[..] else {
        return None;
    };
    let grid = TileGrid::new(info, inputs.container.data(info), GridGeometry::new(n, k)?).ok()?;
    Some((name, grid))
}

/// The ids `run` produces for this config whatever the container holds, in report order: the
/// projection and tile checks (`tiles.padding_zero` when the config's geometry pads a grid), one
/// `scalars.*` check per scalar of the family the config gives a value (a converter stores each of
/// those), the gains', the checks of the features the config switches on, the inventory's and
/// `bf16.finite`. Listed blocked when the container could not be read, so that a damaged package
/// counts the checks its good package does.
pub fn container_checks(config: &DraftConfig) -> Vec<&'static str> {
    let features = config
        .family()
        .features()
        .into_iter()
        .filter(|f| f.is_on(config) != Ok(false))
        .map(crate::family::Feature::check_id)
        .collect();
    listing(
        config.family(),
        projections::padded(config),
        |s| scalars::stated(s, config),
        features,
    )
}

/// The ids after `config.is_dflash` for a config that was refused: no family is known, so the first
/// family's (DFlash: `config.geometry`, `container.parses`, then [`container_checks`] of a geometry
/// without padding, every scalar stated, no feature). A good package of that family counts as many.
pub fn refused_config_checks() -> Vec<&'static str> {
    let mut ids = vec![GEOMETRY, PARSES];
    ids.extend(listing(&crate::family::DFLASH, false, |_| true, Vec::new()));
    ids
}

/// [`CONTAINER_CHECKS`] with the padding check, the family's scalars and the features' checks in
/// their places in report order.
fn listing(
    family: &crate::family::Family,
    padded: bool,
    stated: impl Fn(crate::family::Scalar) -> bool,
    features: Vec<&'static str>,
) -> Vec<&'static str> {
    let [present, grid, headers, signature, fc, sizes, bf16, inventory, finite] = CONTAINER_CHECKS;
    let mut ids = vec![present, grid, headers];
    if padded {
        ids.push(projections::PADDING);
    }
    ids.push(signature);
    ids.extend(family.scalars().filter(|s| stated(*s)).filter_map(|s| {
        crate::check_id::CheckId::ALL
            .into_iter()
            .find(|id| id.strip_prefix("scalars.") == Some(s.field()))
    }));
    ids.extend([fc, sizes, bf16]);
    ids.extend(features);
    ids.extend([inventory, finite]);
    ids
}

/// The ids of the checks `run` produces whatever the container holds or the config says, in report
/// order ([`container_checks`] adds the rest in their places).
pub const CONTAINER_CHECKS: [&str; 9] = [
    "projections.present",
    "projections.tile_grid",
    "tiles.headers_sane",
    "tiles.q4_1_signature",
    "fc.shape",
    "norms.sizes",
    "norms.bf16",
    "inventory.explained",
    finite::ID,
];

/// `a, b, c (+2 more)`, or `none`.
pub fn list<S: AsRef<str>>(items: &[S], max: usize) -> String {
    list_of(items, items.len(), max)
}

/// [`list`] of the first of `total` items (the rest were counted, not kept).
pub fn list_of<S: AsRef<str>>(items: &[S], total: usize, max: usize) -> String {
    if items.is_empty() {
        return "none".to_owned();
    }
    let shown: Vec<&str> = items.iter().take(max).map(AsRef::as_ref).collect();
    let more = total.saturating_sub(shown.len());
    if more > 0 {
        format!("{} (+{more} more)", shown.join(", "))
    } else {
        shown.join(", ")
    }
}
