//! `projections.present`, `projections.tile_grid` and the tile-header checks (`tiles.*`).

use super::geometry::blocked_by_field;
use super::{list, Forms, Inputs};
use crate::config::{DraftConfig, Field, Geometry};
use crate::container::TensorInfo;
use crate::evidence::{
    BadHeader, BadPadding, Finding, ProjectionsPresent, ProjectionsTileGrid, TilesHeadersSane,
    TilesPaddingZero, TilesQ41Signature,
};
use crate::family::{Kind, Projection};
use crate::parallel::WorkerPanic;
use crate::report::{Check, GridCensus};
use crate::tile::{GridGeometry, GridScan, TileGrid};

pub const PRESENT: &str = crate::check_id::CheckId::PROJECTIONS_PRESENT;
pub const TILE_GRID: &str = crate::check_id::CheckId::PROJECTIONS_TILE_GRID;
pub const HEADERS: &str = crate::check_id::CheckId::TILES_HEADERS_SANE;
pub const PADDING: &str = crate::check_id::CheckId::TILES_PADDING_ZERO;
pub const SIGNATURE: &str = crate::check_id::CheckId::TILES_Q4_1_SIGNATURE;
/// The step that reads every grid's tile headers, for `tiles.*`.
pub const SCAN_STEP: &str = "the tile-header scan (tiles.*)";

/// The accepted band for the per-tensor median of minimum/scale (spec section 4.1).
pub const SIGNATURE_LO: f32 = -8.5;
pub const SIGNATURE_HI: f32 = -6.5;

/// One expected projection and what became of it.
struct Slot<'r, 'a> {
    name: String,
    /// q, k, v or o: a projection `attention_bias` gives a bias.
    attention: bool,
    geometry: Field<Option<GridGeometry>>,
    info: Option<&'r TensorInfo>,
    grid: Option<Result<TileGrid<'a>, String>>,
}

/// The projection checks, and the tile checks over the projections and `extra`: further tensors
/// (the second family's matrices) already proven to be grids. A scan worker that panicked is an
/// error: the grids it held would otherwise be missing from every `tiles.*` check.
pub fn run<'a>(
    inputs: &Inputs<'_, 'a>,
    forms: &mut Forms<'a>,
    extra: &[(String, TileGrid<'a>)],
) -> Result<Vec<Check>, WorkerPanic> {
    let layers = match inputs.geometry.layers() {
        Ok(l) => l,
        Err(p) => {
            return Ok([PRESENT, TILE_GRID, HEADERS, SIGNATURE]
                .iter()
                .map(|id| blocked_by_field(id, &p))
                .collect());
        }
    };
    let family = inputs.config.family();
    let mut slots = Vec::new();
    for (role, spec) in family.roles(layers, |s| matches!(s.kind, Kind::Projection(_))) {
        let name = inputs.naming.name(role);
        let info = inputs.container.get(&name);
        let geometry = (spec.shape)(&inputs.geometry).map(|dims| match dims.as_slice() {
            [n, k] => GridGeometry::new(*n, *k),
            _ => None,
        });
        let attention = matches!(
            spec.kind,
            Kind::Projection(Projection::Q | Projection::K | Projection::V | Projection::O)
        );
        slots.push(Slot {
            name,
            attention,
            geometry,
            info,
            grid: None,
        });
    }
    let mut checks = vec![with_biases(present(&slots, layers), inputs, &slots)];
    for slot in &mut slots {
        if let (Some(info), Ok(Some(g))) = (slot.info, &slot.geometry) {
            slot.grid = Some(TileGrid::new(info, inputs.container.data(info), *g));
        }
    }
    checks.push(tile_grid(&slots));
    let proven: Vec<(&str, TileGrid<'_>)> = slots
        .iter()
        .filter_map(|s| match &s.grid {
            Some(Ok(g)) => Some((s.name.as_str(), *g)),
            _ => None,
        })
        .collect();
    let all_grids = proven.len() == slots.len();
    let grids: Vec<(&str, TileGrid<'_>)> = proven
        .into_iter()
        .chain(extra.iter().map(|(n, g)| (n.as_str(), *g)))
        .collect();
    let scans = scan_all(&grids)?;
    for ((name, grid), scan) in grids.iter().zip(&scans) {
        let g = grid.geometry;
        let census = GridCensus {
            n: g.n,
            k: g.k,
            tiles: g.tiles(),
            real_groups: scan.real_groups,
            constant_groups: scan.constant_groups,
            min_scale_median: scan.ratio_median,
            scale_range: scan.scale_range,
        };
        forms.set_grid(
            name,
            format!("q4_1 tile grid {} x {}, {} tiles", g.n, g.k, g.tiles()),
            census,
            *grid,
        );
    }
    for slot in &slots {
        if let Some(Err(why)) = &slot.grid {
            forms.set(
                &slot.name,
                format!("not a q4_1 grid of the config's N x K: {why}"),
                None,
            );
        }
    }
    checks.push(headers(&grids, &scans, all_grids));
    if padded(inputs.config) || extra.iter().any(|(_, g)| g.geometry.is_padded()) {
        checks.push(padding(&grids, &scans, all_grids));
    }
    checks.push(signature(&grids, &scans, all_grids));
    Ok(checks)
}

/// Whether the config's geometry pads a projection's grid (N or K not a whole number of tiles):
/// then `tiles.padding_zero` runs, whatever the container holds.
pub fn padded(config: &DraftConfig) -> bool {
    let geometry = Geometry::new(config);
    let Ok(layers) = geometry.layers() else {
        return false;
    };
    config
        .family()
        .roles(layers, |s| matches!(s.kind, Kind::Projection(_)))
        .into_iter()
        .any(|(_, spec)| match (spec.shape)(&geometry).as_deref() {
            Ok([n, k]) => GridGeometry::new(*n, *k).is_some_and(|g| g.is_padded()),
            _ => false,
        })
}

fn present(slots: &[Slot<'_, '_>], layers: u64) -> Check {
    let absent: Vec<&str> = slots
        .iter()
        .filter(|s| s.info.is_none())
        .map(|s| s.name.as_str())
        .collect();
    let message = format!(
        "all {layers} x 7 projections are in the container (absent: {})",
        list(&absent, 4)
    );
    let evidence = ProjectionsPresent {
        expected: slots.len(),
        absent: absent.iter().map(|n| (*n).to_owned()).collect(),
    };
    if absent.is_empty() {
        Check::pass(PRESENT, message).with_evidence(evidence)
    } else {
        Check::fail(
            PRESENT,
            format!(
                "{} of {} projections are absent: {}",
                absent.len(),
                slots.len(),
                list(&absent, 4)
            ),
        )
        .with_evidence(evidence)
    }
}

/// `projections.present` when the config says `attention_bias: true`: the q, k, v and o biases
/// that model builds must be in the container too, or a loader runs the draft without them.
fn with_biases(check: Check, inputs: &Inputs<'_, '_>, slots: &[Slot<'_, '_>]) -> Check {
    if inputs.config.attention_bias != Ok(Some(true)) {
        return check;
    }
    let missing: Vec<String> = slots
        .iter()
        .filter(|s| s.attention)
        .map(|s| format!("{}.bias", s.name.trim_end_matches(".weight")))
        .filter(|b| inputs.container.get(b).is_none())
        .collect();
    if missing.is_empty() || check.outcome() != crate::report::Outcome::Pass {
        return check;
    }
    Check::fail(
        PRESENT,
        format!(
            "config.json says attention_bias: true, and {} of the attention projections' biases are not in the container: {} (a loader would run the draft without them)",
            missing.len(),
            list(&missing, 4)
        ),
    )
}

fn tile_grid(slots: &[Slot<'_, '_>]) -> Check {
    let total = slots.len();
    let mut failed = Vec::new();
    let mut undecided = Vec::new();
    // The same lists as evidence: each name with why as a token.
    let (mut refused_items, mut undecided_items) = (Vec::new(), Vec::new());
    let mut proven = 0;
    for s in slots {
        let (list, items, kind, why) = match (&s.grid, &s.geometry, s.info) {
            (Some(Ok(_)), _, _) => {
                proven += 1;
                continue;
            }
            (Some(Err(why)), _, _) => (&mut failed, &mut refused_items, "not_a_grid", why.clone()),
            (None, Ok(None), Some(_)) => (
                &mut failed,
                &mut refused_items,
                "no_grid_geometry",
                "the config's N x K has no q4_1 tile grid".to_owned(),
            ),
            (None, Err(p), Some(_)) => (
                &mut undecided,
                &mut undecided_items,
                "needs_field",
                p.needs(),
            ),
            (None, Ok(Some(_)), Some(_)) => (
                &mut undecided,
                &mut undecided_items,
                "not_read",
                "not read".to_owned(),
            ),
            (None, _, None) => continue,
        };
        list.push(format!("{}: {why}", s.name));
        items.push(Finding::new(&s.name, kind));
    }
    let absent = slots.iter().filter(|s| s.info.is_none()).count();
    let evidence = ProjectionsTileGrid {
        proven,
        expected: total,
        refused: refused_items,
        undecided: undecided_items,
    };
    if !failed.is_empty() {
        let also = match (undecided.len(), absent) {
            (0, 0) => String::new(),
            (u, a) => format!(" ({u} more undecided, {a} absent)"),
        };
        return Check::fail(
            TILE_GRID,
            format!(
                "{} of {total} projections are not whole q4_1 tile grids of the config's N x K{also}: {}",
                failed.len(),
                list(&failed, 2)
            ),
        )
        .with_evidence(evidence);
    }
    if !undecided.is_empty() {
        return Check::blocked(
            TILE_GRID,
            super::GEOMETRY,
            format!("cannot decide: {}", list(&undecided, 2)),
        )
        .with_evidence(evidence);
    }
    if absent > 0 {
        return Check::blocked(
            TILE_GRID,
            PRESENT,
            format!("{proven} projections are whole q4_1 tile grids; {absent} are absent"),
        )
        .with_evidence(evidence);
    }
    Check::pass(TILE_GRID, format!("each projection is a whole q4_1 tile grid of the config's N x K: bytes == (Np/32)(Kp/256) x 5120 ({proven} of {total})"))
        .with_evidence(evidence)
}

/// Scans every grid's headers on all cores, one scan buffer per worker.
fn scan_all(grids: &[(&str, TileGrid<'_>)]) -> Result<Vec<GridScan>, WorkerPanic> {
    crate::parallel::map(
        SCAN_STEP,
        grids,
        crate::tile::ScanBuffers::new,
        |buffers, (_, grid)| grid.scan(buffers),
    )
}

/// What a tiles check says when no grid was proven, so none was read: it looked at nothing, and its
/// message must not read as a pass over zero groups.
const NOTHING_READ: &str =
    "nothing to look at: no grid was read (no projection is a proven tile grid; see projections.tile_grid)";

fn headers(grids: &[(&str, TileGrid<'_>)], scans: &[GridScan], all_grids: bool) -> Check {
    let groups: u64 = scans.iter().map(|s| s.real_groups).sum();
    let constant: u64 = scans.iter().map(|s| s.constant_groups).sum();
    let bad: u64 = scans.iter().map(|s| s.bad_groups).sum();
    let bad_tensors: Vec<&str> = grids
        .iter()
        .zip(scans)
        .filter(|(_, s)| s.bad_groups > 0)
        .map(|((n, _), _)| *n)
        .collect();
    let first = grids
        .iter()
        .zip(scans)
        .find_map(|((name, _), s)| s.first_bad.as_ref().map(|b| (*name, b)));
    let evidence = TilesHeadersSane {
        groups,
        constant_groups: constant,
        bad_groups: bad,
        bad_tensors: bad_tensors.iter().map(|n| (*n).to_owned()).collect(),
        first_bad: first.map(|(name, b)| BadHeader {
            tensor: name.to_owned(),
            tile: b.tile,
            column_group: b.column_group,
            row: b.row,
            scale: f64::from(b.scale),
            minimum: f64::from(b.minimum),
            why: b.why.token(),
        }),
    };
    if let Some((name, b)) = first {
        return Check::fail(
            HEADERS,
            format!(
                "{bad} of {groups} groups have a broken tile header in {} {}; first bad: {name} {}",
                bad_tensors.len(),
                if bad_tensors.len() == 1 {
                    "tensor"
                } else {
                    "tensors"
                },
                b.describe()
            ),
        )
        .with_evidence(evidence);
    }
    if grids.is_empty() {
        return Check::blocked(HEADERS, TILE_GRID, NOTHING_READ).with_evidence(evidence);
    }
    let statement = format!(
        "every tile header is sane: scale finite and positive (or a constant group), minimum finite, over {groups} groups in {} grids ({constant} constant groups; first bad: none)",
        grids.len()
    );
    if !all_grids {
        return Check::blocked(
            HEADERS,
            TILE_GRID,
            format!("partial: {statement}; projections that are not proven grids were not read"),
        )
        .with_evidence(evidence);
    }
    Check::pass(HEADERS, statement).with_evidence(evidence)
}

fn padding(grids: &[(&str, TileGrid<'_>)], scans: &[GridScan], all_grids: bool) -> Check {
    // A grid refused from its sampled planes had the rest of its tiles, padding too, left unread.
    let all_grids = all_grids
        && scans
            .iter()
            .all(|s| s.zero_planes.is_none_or(|(read, tiles)| read == tiles));
    let groups: u64 = scans.iter().map(|s| s.padding_groups).sum();
    let first = grids
        .iter()
        .zip(scans)
        .find_map(|((name, _), s)| s.first_bad_padding.as_ref().map(|b| (*name, b)));
    let evidence = TilesPaddingZero {
        padding_groups: groups,
        first_bad: first.map(|(n, b)| BadPadding {
            tensor: n.to_owned(),
            tile: b.tile,
            column_group: b.column_group,
            row: b.row,
        }),
    };
    if let Some((name, b)) = first {
        return Check::fail(
            PADDING,
            format!(
                "a padding group beyond N or K is not zero: {name} {}",
                b.describe()
            ),
        )
        .with_evidence(evidence);
    }
    if grids.is_empty() {
        return Check::blocked(PADDING, TILE_GRID, NOTHING_READ).with_evidence(evidence);
    }
    let statement = format!(
        "padding groups beyond N or K hold zero scale, minimum and codes ({groups} groups)"
    );
    if !all_grids {
        return Check::blocked(PADDING, TILE_GRID, format!("partial: {statement}"))
            .with_evidence(evidence);
    }
    Check::pass(PADDING, statement).with_evidence(evidence)
}

fn signature(grids: &[(&str, TileGrid<'_>)], scans: &[GridScan], all_grids: bool) -> Check {
    let mut failed = Vec::new();
    let mut undecided = Vec::new();
    let (mut refused_items, mut undecided_items) = (Vec::new(), Vec::new());
    let mut medians = Vec::new();
    for ((name, _), scan) in grids.iter().zip(scans) {
        match scan.ratio_median {
            _ if scan.zero_planes.is_some() => {
                let (read, tiles) = scan.zero_planes.unwrap_or_default();
                failed.push(format!(
                    "{name}: scale and minimum planes are zero in all {read} tiles read of {tiles}: a grid of no weights"
                ));
                refused_items.push(Finding::new(*name, "zero_planes"));
            }
            _ if scan.zero_minimum_plane => {
                failed.push(format!(
                    "{name}: q4_0-style tile grid (zero minimum plane): not q4_1"
                ));
                refused_items.push(Finding::new(*name, "zero_minimum_plane"));
            }
            None => {
                undecided.push(format!("{name}: no group has a positive scale"));
                undecided_items.push(Finding::new(*name, "no_positive_scale"));
            }
            Some(m) if SIGNATURE_LO <= m && m <= SIGNATURE_HI => medians.push(m),
            Some(m) => {
                failed.push(format!(
                    "{name}: median minimum/scale {m:.3}, outside [{SIGNATURE_LO}, {SIGNATURE_HI}]"
                ));
                refused_items.push(Finding::new(*name, "off_signature"));
            }
        }
    }
    let lo = medians.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = medians.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let evidence = TilesQ41Signature {
        band: [SIGNATURE_LO, SIGNATURE_HI],
        medians: grids
            .iter()
            .zip(scans)
            .map(|((n, _), s)| ((*n).to_owned(), s.ratio_median.map(f64::from)))
            .collect(),
        refused: refused_items,
        undecided: undecided_items,
    };
    if !failed.is_empty() {
        return Check::fail(
            SIGNATURE,
            format!(
                "{} of {} grids are off the q4_1 minimum/scale signature: {}",
                failed.len(),
                grids.len(),
                list(&failed, 2)
            ),
        )
        .with_evidence(evidence);
    }
    if !undecided.is_empty() {
        return Check::undecided(
            SIGNATURE,
            format!("cannot decide the signature: {}", list(&undecided, 2)),
        )
        .with_evidence(evidence);
    }
    if !all_grids || grids.is_empty() {
        let statement = if grids.is_empty() {
            NOTHING_READ.to_owned()
        } else {
            format!(
                "partial: median per tensor {lo:.3} .. {hi:.3} over {} grids",
                grids.len()
            )
        };
        return Check::blocked(SIGNATURE, TILE_GRID, statement).with_evidence(evidence);
    }
    Check::pass(SIGNATURE, format!("minimum/scale sits at the q4_1 signature: median per tensor {lo:.3} .. {hi:.3} (expected near -7.5, accepted [{SIGNATURE_LO}, {SIGNATURE_HI}])"))
        .with_evidence(evidence)
}
