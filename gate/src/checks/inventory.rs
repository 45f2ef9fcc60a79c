//! `inventory.explained`: every tensor has a role, or is named as unexplained.

use super::list;
use super::Inputs;
use crate::dtype::Dtype;
use crate::report::Check;
use crate::roles::{looks_second_family, Role};
use crate::tile::GridGeometry;
use serde_json::json;

pub const EXPLAINED: &str = "inventory.explained";

pub fn run(inputs: &Inputs<'_, '_>) -> Check {
    let layers = match inputs.geometry.layers() {
        Ok(l) => l,
        Err(p) => return super::geometry::blocked_by_field(EXPLAINED, &p),
    };
    let entries = &inputs.container.table.entries;
    let mut unexplained = Vec::new();
    let mut undecided = Vec::new();
    for e in entries {
        let role = inputs.naming.role(&e.name);
        let why = match role {
            None if looks_second_family(&e.name) => {
                Some("a second-family (DFlash2) selector or convolution tensor".to_owned())
            }
            None => None,
            Some(Role::Projection { layer, .. } | Role::LayerGain { layer, .. })
                if layer >= layers =>
            {
                Some(format!("layer {layer}, but the config has {layers} layers"))
            }
            Some(Role::EmbedTokens) => match embed_problem(inputs, e) {
                Ok(()) => continue,
                Err(Some(why)) => Some(why),
                Err(None) => {
                    undecided.push(format!(
                        "{}: an embedding table, but config.json has no vocab_size to size it",
                        e.name
                    ));
                    continue;
                }
            },
            Some(_) => continue,
        };
        unexplained.push(match why {
            Some(why) => format!("{} ({why})", e.name),
            None => e.name.clone(),
        });
    }
    let evidence =
        json!({ "tensors": entries.len(), "unexplained": unexplained, "undecided": undecided });
    if !unexplained.is_empty() {
        return Check::fail(
            EXPLAINED,
            format!(
                "{} of {} tensors are unexplained: {}",
                unexplained.len(),
                entries.len(),
                list(&unexplained, 3)
            ),
        )
        .with_evidence(evidence);
    }
    if !undecided.is_empty() {
        return Check::blocked(
            EXPLAINED,
            super::GEOMETRY,
            format!("cannot decide: {}", list(&undecided, 2)),
        )
        .with_evidence(evidence);
    }
    Check::pass(
        EXPLAINED,
        format!(
            "no tensor is left unexplained: {} of {} have a role (unexplained: none)",
            entries.len(),
            entries.len()
        ),
    )
    .with_evidence(evidence)
}

/// `Ok` when an embedding table is BF16 `[vocab, hidden]` or a q4_1 grid of that size; `Err(None)`
/// when the config cannot size it.
fn embed_problem(
    inputs: &Inputs<'_, '_>,
    e: &crate::container::TensorInfo,
) -> Result<(), Option<String>> {
    let (Ok(Some(vocab)), Ok(hidden)) =
        (inputs.config.vocab_size.clone(), inputs.geometry.hidden())
    else {
        return Err(None);
    };
    if e.dtype == Dtype::Bf16 && e.shape == [vocab, hidden] {
        return Ok(());
    }
    if let Some(g) = GridGeometry::new(vocab, hidden) {
        if crate::tile::TileGrid::new(e, inputs.container.data(e), g).is_ok() {
            return Ok(());
        }
    }
    Err(Some(format!("an embedding table, but {} {} is neither BF16 [{vocab}, {hidden}] nor a q4_1 grid of {vocab} x {hidden}", e.dtype, e.shape_text())))
}
