//! The role names under their historical path: everything lives in [`crate::family`] now.

pub use crate::family::names::*;
