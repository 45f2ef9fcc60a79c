//! Synthetic DFlash draft packages for the gate's tests, selftest and benchmark.
//!
//! [`synth`] writes a well-formed package of any geometry from a seed, quantized the way ggml's
//! reference q4_1 quantizer does so that the min/scale signature is earned, and laid out the way
//! safetensors' writer lays files out. [`defects`] breaks one thing at a time; [`arms`] pairs each
//! package with the exact outcome the gate must give it; [`schema`] checks JSON reports against the
//! published schema.

/// Declares a module's unit tests: plain functions, listed here, that the suite runs as trials named
/// by their full path (`gate_tests::synth::ggml::tests::...`). This package is not a default member
/// of the workspace (see the root Cargo.toml), so libtest `#[test]`s here would not run under the
/// README's `cargo test`; a function left out of the list is dead code, which clippy refuses.
macro_rules! unit_tests {
    ($($name:ident),+ $(,)?) => {
        pub(crate) const UNIT_TESTS: &[(&str, fn())] =
            &[$((concat!(module_path!(), "::", stringify!($name)), $name as fn())),+];
    };
}

pub mod arms;
pub mod campaign;
pub mod defects;
pub mod fixture;
pub mod loaders;
pub mod schema;
pub mod synth;

/// Every unit test of this package (see `unit_tests!`), by its full path.
pub fn unit_tests() -> impl Iterator<Item = (&'static str, fn())> {
    [
        campaign::tests::UNIT_TESTS,
        synth::blocks::tests::UNIT_TESTS,
        synth::ggml::tests::UNIT_TESTS,
        synth::gguf::tests::UNIT_TESTS,
        synth::torch::tests::UNIT_TESTS,
    ]
    .into_iter()
    .flatten()
    .copied()
}
