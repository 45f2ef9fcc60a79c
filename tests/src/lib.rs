//! Synthetic DFlash draft packages for the gate's tests, selftest and benchmark.
//!
//! [`synth`] writes a well-formed package of any geometry from a seed, quantized the way ggml's
//! reference q4_1 quantizer does so that the min/scale signature is earned, and laid out the way
//! safetensors' writer lays files out. [`defects`] breaks one thing at a time; [`arms`] pairs each
//! package with the exact outcome the gate must give it; [`schema`] checks JSON reports against the
//! published schema.

pub mod arms;
pub mod campaign;
pub mod defects;
pub mod fixture;
pub mod schema;
pub mod synth;
