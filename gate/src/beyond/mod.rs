//! What the gate can know beyond the draft itself, when asked: the target package it will draft for
//! (`--target`) and the files' provenance (`--manifest`).

pub mod manifest;
pub mod source;
pub mod target;
