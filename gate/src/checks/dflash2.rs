//! `dflash2.conv` and `dflash2.selector`: the second family's tensors (spec section 10).
//!
//! Each feature the config switches on gets its check: every role of the feature present, in one of
//! its accepted forms, of the shape the config gives it. A matrix's form is decided from its declared
//! dtype and byte count; one found gridded is proven by the tile checks like any projection, which is
//! why this runs before them and hands them its grids.

use super::geometry::blocked_by_field;
use super::{list, Forms, Inputs};
use crate::container::TensorInfo;
use crate::dtype::Dtype;
use crate::evidence::{Dflash2Feature, Finding};
use crate::family::{Feature, Form, Kind, Role, Switch};
use crate::report::Check;
use crate::tile::{GridGeometry, TileGrid};

/// The feature checks, and the matrices found to be grids (for the tile checks).
pub struct Features<'a> {
    pub checks: Vec<Check>,
    pub grids: Vec<(String, TileGrid<'a>)>,
}

pub fn run<'a>(inputs: &Inputs<'_, 'a>, forms: &mut Forms) -> Features<'a> {
    let mut out = Features {
        checks: Vec::new(),
        grids: Vec::new(),
    };
    for feature in inputs.config.family().features() {
        let id = feature.check_id();
        match feature.is_on(inputs.config) {
            Ok(false) => {}
            Err(p) => out.checks.push(blocked_by_field(id, &p)),
            Ok(true) => {
                let check = check_feature(inputs, feature, forms, &mut out.grids);
                out.checks.push(check);
            }
        }
    }
    out
}

/// What became of one expected tensor.
enum Found<'a> {
    Grid(TileGrid<'a>),
    Bf16(String),
}

fn check_feature<'a>(
    inputs: &Inputs<'_, 'a>,
    feature: Feature,
    forms: &mut Forms,
    grids: &mut Vec<(String, TileGrid<'a>)>,
) -> Check {
    let id = feature.check_id();
    let layers = match inputs.geometry.layers() {
        Ok(l) => l,
        Err(p) => return blocked_by_field(id, &p),
    };
    let roles = inputs
        .config
        .family()
        .roles(layers, |s| s.switch == Switch::Feature(feature));
    let mut absent = Vec::new();
    let mut refused = Vec::new();
    let mut undecided = Vec::new();
    let mut proven = Vec::new();
    let (mut refused_items, mut undecided_items) = (Vec::new(), Vec::new());
    for (role, spec) in &roles {
        let names = candidates(inputs, *role);
        let present: Vec<&TensorInfo> = names
            .iter()
            .filter_map(|n| inputs.container.get(n))
            .collect();
        let info = match present.as_slice() {
            [] => {
                absent.push(names[0].clone());
                continue;
            }
            [one] => *one,
            [first, second, ..] => {
                refused.push(format!(
                    "{} and {} are both present: one name per tensor",
                    first.name, second.name
                ));
                refused_items.push(Finding::new(&second.name, "two_names"));
                continue;
            }
        };
        let shape = match (spec.shape)(&inputs.geometry) {
            Ok(s) => s,
            Err(p) => {
                undecided.push(format!("{}: {}", info.name, p.needs()));
                undecided_items.push(Finding::new(&info.name, "needs_field"));
                continue;
            }
        };
        match decide(inputs, info, &shape, spec.forms) {
            Ok(Found::Grid(g)) => {
                proven.push(Finding::new(&info.name, "q4_1_grid"));
                grids.push((info.name.clone(), g));
            }
            Ok(Found::Bf16(form)) => {
                forms.set(&info.name, form, None);
                proven.push(Finding::new(&info.name, "bf16"));
            }
            Err(why) => {
                forms.set(&info.name, format!("not an accepted form: {why}"), None);
                refused.push(format!("{}: {why}", info.name));
                refused_items.push(Finding::new(&info.name, "wrong_form"));
            }
        }
    }
    let total = roles.len();
    let [a, b] = feature.fields();
    let evidence = Dflash2Feature {
        expected: total,
        absent: absent.clone(),
        refused: refused_items,
        undecided: undecided_items,
        proven: proven.clone(),
    };
    if !absent.is_empty() || !refused.is_empty() {
        let mut parts = Vec::new();
        if !refused.is_empty() {
            parts.push(format!(
                "not of the config's shape or form: {}",
                list(&refused, 2)
            ));
        }
        if !absent.is_empty() {
            parts.push(format!("absent: {}", list(&absent, 3)));
        }
        return Check::fail(
            id,
            format!(
                "{} of {total} {} tensors switched on by {a}/{b} are absent or off: {}",
                absent.len() + refused.len(),
                feature.noun(),
                parts.join("; ")
            ),
        )
        .with_evidence(evidence);
    }
    if !undecided.is_empty() {
        return Check::blocked(
            id,
            super::GEOMETRY,
            format!("cannot decide: {}", list(&undecided, 2)),
        )
        .with_evidence(evidence);
    }
    let gridded = proven.iter().filter(|p| p.kind == "q4_1_grid").count();
    Check::pass(
        id,
        format!(
            "every {} tensor switched on by {a}/{b} is present, in an accepted form, of the config's shape: {total} tensors (q4_1 grids: {gridded}, BF16: {})",
            feature.noun(),
            total - gridded
        ),
    )
    .with_evidence(evidence)
}

/// The names a role may carry in this file: a codebook with and without `.weight`.
fn candidates(inputs: &Inputs<'_, '_>, role: Role) -> Vec<String> {
    let name = inputs.naming.name(role);
    match role.kind() {
        Some(Kind::Selector(p)) if p.is_codebook() => {
            let suffixed = format!("{name}.weight");
            vec![name, suffixed]
        }
        _ => vec![name],
    }
}

/// Decides a tensor's form from its declared dtype and byte count, and proves it: a grid must be a
/// whole grid of the shape's N x K, a BF16 tensor must be declared with exactly the shape.
fn decide<'a>(
    inputs: &Inputs<'_, 'a>,
    info: &TensorInfo,
    shape: &[u64],
    accepted: &[Form],
) -> Result<Found<'a>, String> {
    let declared = format!("declared {} {}", info.dtype, info.shape_text());
    let wanted: Vec<String> = accepted.iter().map(|f| describe(*f, shape)).collect();
    let expected = wanted.join(" or ");
    let gridded = matches!(info.dtype, Dtype::I8 | Dtype::U8);
    if gridded && accepted.contains(&Form::Grid) {
        let [n, k] = shape else {
            return Err(format!("{declared}, expected {expected}"));
        };
        let Some(geometry) = GridGeometry::new(*n, *k) else {
            return Err(format!("{declared}: {n} x {k} has no q4_1 tile grid"));
        };
        return TileGrid::new(info, inputs.container.data(info), geometry)
            .map(Found::Grid)
            .map_err(|why| format!("{why}, expected {expected}"));
    }
    let bf16_form = accepted
        .iter()
        .find(|f| matches!(f, Form::Bf16Matrix | Form::Bf16Tensor));
    match bf16_form {
        Some(form) if info.dtype == Dtype::Bf16 && info.shape == shape => {
            Ok(Found::Bf16(describe(*form, shape)))
        }
        _ => Err(format!("{declared}, expected {expected}")),
    }
}

fn describe(form: Form, shape: &[u64]) -> String {
    let dims = crate::container::shape_text(shape);
    match (form, shape) {
        (Form::Grid, [n, k]) => format!("a q4_1 grid of {n} x {k}"),
        (Form::Bf16Matrix, [n, k]) => format!("BF16 matrix {n} x {k}"),
        _ => format!("BF16 {dims}"),
    }
}
