//! The second family's own rows (spec section 10): two convolutions per layer and the candidate
//! selector, each switched on by a pair of config fields. The family holds the first family's rows too.

use super::{ConvPart, ConvSite, Feature, Form, Kind, RoleSpec, SelectorPart, Switch};
use crate::config::{Field, FieldProblem, Geometry, ProblemKind};

/// A converter may grid the matrices or keep them BF16; the codebooks are BF16 in the reference.
const MATRIX: &[Form] = &[Form::Grid, Form::Bf16Matrix];
const CODEBOOK: &[Form] = &[Form::Bf16Matrix, Form::Grid];

const fn conv(site: ConvSite, part: ConvPart) -> RoleSpec {
    match part {
        ConvPart::BaseKernel => RoleSpec {
            kind: Kind::Conv(site, part),
            shape: base_kernel,
            forms: &[Form::Bf16Tensor],
            switch: Switch::Feature(Feature::Conv),
        },
        ConvPart::KernelProjection => RoleSpec {
            kind: Kind::Conv(site, part),
            shape: kernel_projection,
            forms: MATRIX,
            switch: Switch::Feature(Feature::Conv),
        },
    }
}

const fn selector(part: SelectorPart, forms: &'static [Form]) -> RoleSpec {
    RoleSpec {
        kind: Kind::Selector(part),
        shape: match part {
            SelectorPart::HiddenProjection => |g| Ok(vec![g.selector_rank()?, g.hidden()?]),
            _ => |g| Ok(vec![g.vocab()?, g.selector_rank()?]),
        },
        forms,
        switch: Switch::Feature(Feature::Selector),
    }
}

/// `[2, conv_kernel_size, hidden]`.
fn base_kernel(g: &Geometry<'_>) -> Field<Vec<u64>> {
    Ok(vec![2, g.conv_kernel_size()?, g.hidden()?])
}

/// `(2 * conv_kernel_size * hidden / conv_group_size) x hidden`; no shape at all when the group size
/// does not divide hidden. The sizes are capped at 2^20, so the product fits.
fn kernel_projection(g: &Geometry<'_>) -> Field<Vec<u64>> {
    let (hidden, size, group) = (g.hidden()?, g.conv_kernel_size()?, g.conv_group_size()?);
    if !hidden.is_multiple_of(group) {
        return Err(FieldProblem {
            field: "conv_group_size".to_owned(),
            kind: ProblemKind::Invalid(format!("{group} does not divide hidden_size {hidden}")),
        });
    }
    Ok(vec![2 * size * (hidden / group), hidden])
}

pub(super) static ROLES: &[RoleSpec] = &[
    conv(ConvSite::Attention, ConvPart::BaseKernel),
    conv(ConvSite::Attention, ConvPart::KernelProjection),
    conv(ConvSite::Mlp, ConvPart::BaseKernel),
    conv(ConvSite::Mlp, ConvPart::KernelProjection),
    selector(SelectorPart::HiddenProjection, MATRIX),
    selector(SelectorPart::PredecessorCodebook, CODEBOOK),
    selector(SelectorPart::SuccessorCodebook, CODEBOOK),
];
