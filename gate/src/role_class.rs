//! The class of a tensor's role. The family tables assign it and the report prints it, so it lives
//! below both: the tables never reach up into the report for a word they define.

use serde::Serialize;

/// The class of a tensor's role, as the census's `role` token names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RoleClass {
    Projection,
    Gain,
    Conv,
    Fc,
    Selector,
    Scalar,
    Embedding,
}

impl RoleClass {
    /// The token the document spells it as (`projection`, `gain`, ...).
    pub fn token(self) -> &'static str {
        match self {
            RoleClass::Projection => "projection",
            RoleClass::Gain => "gain",
            RoleClass::Conv => "conv",
            RoleClass::Fc => "fc",
            RoleClass::Selector => "selector",
            RoleClass::Scalar => "scalar",
            RoleClass::Embedding => "embedding",
        }
    }
}
