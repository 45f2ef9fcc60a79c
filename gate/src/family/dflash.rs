//! The first family's table (spec section 6): seven q4_1 projections and four gains per layer, the
//! fusion matrix, two gains, and an optional embedding table.

use super::{Alias, Form, Kind, LayerGain, Projection, RoleSpec, Switch};
use crate::config::{Field, Geometry};

const GRID: &[Form] = &[Form::Grid];
const GAIN: &[Form] = &[Form::Gain];

const fn projection(p: Projection, shape: fn(&Geometry<'_>) -> Field<Vec<u64>>) -> RoleSpec {
    RoleSpec {
        kind: Kind::Projection(p),
        shape,
        forms: GRID,
        switch: Switch::Always,
    }
}

const fn gain(kind: Kind, shape: fn(&Geometry<'_>) -> Field<Vec<u64>>) -> RoleSpec {
    RoleSpec {
        kind,
        shape,
        forms: GAIN,
        switch: Switch::Always,
    }
}

fn hidden(g: &Geometry<'_>) -> Field<Vec<u64>> {
    Ok(vec![g.hidden()?])
}

fn head_dim(g: &Geometry<'_>) -> Field<Vec<u64>> {
    Ok(vec![g.head_dim()?])
}

pub(super) static ROLES: &[RoleSpec] = &[
    // N x K: rows are output features, columns input features.
    projection(Projection::Q, |g| Ok(vec![g.q_dim()?, g.hidden()?])),
    projection(Projection::K, |g| Ok(vec![g.kv_dim()?, g.hidden()?])),
    projection(Projection::V, |g| Ok(vec![g.kv_dim()?, g.hidden()?])),
    projection(Projection::O, |g| Ok(vec![g.hidden()?, g.q_dim()?])),
    projection(Projection::Gate, |g| {
        Ok(vec![g.intermediate()?, g.hidden()?])
    }),
    projection(Projection::Up, |g| Ok(vec![g.intermediate()?, g.hidden()?])),
    projection(Projection::Down, |g| {
        Ok(vec![g.hidden()?, g.intermediate()?])
    }),
    gain(Kind::LayerGain(LayerGain::Input), hidden),
    gain(Kind::LayerGain(LayerGain::PostAttention), hidden),
    gain(Kind::LayerGain(LayerGain::QNorm), head_dim),
    gain(Kind::LayerGain(LayerGain::KNorm), head_dim),
    RoleSpec {
        kind: Kind::Fc,
        // Dimensions are capped at 2^20 and taps by the config's size, so the product fits.
        shape: |g| {
            let h = g.hidden()?;
            Ok(vec![h, (g.taps()?.len() as u64).saturating_mul(h)])
        },
        forms: &[Form::Fusion],
        switch: Switch::Always,
    },
    gain(Kind::FinalNorm, hidden),
    gain(Kind::HiddenNorm, hidden),
    RoleSpec {
        kind: Kind::EmbedTokens,
        shape: |g| Ok(vec![g.vocab()?, g.hidden()?]),
        forms: &[Form::Bf16Matrix, Form::Grid],
        switch: Switch::Optional,
    },
];

/// The assistant head (`MuseGlimmerAssistantModel`) names fc and the hidden norm after its encoder.
pub(super) static ASSISTANT_ALIASES: &[Alias] = &[
    Alias {
        kind: Kind::Fc,
        name: "encoder.fc.weight",
    },
    Alias {
        kind: Kind::HiddenNorm,
        name: "encoder.output_norm_enc.weight",
    },
];
