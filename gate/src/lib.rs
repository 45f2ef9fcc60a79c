//! The gate in front of a DFlash draft loader.
//!
//! A DFlash draft package is a `config.json` plus one Q4NX weight container (a safetensors file of
//! q4_1 tile grids). [`gate`] answers, from the bytes alone and before any load: is every tensor in a
//! form the reader decodes, does the geometry agree with the config, what is in there, and is anything
//! unexplained. It fails closed: the verdict is PASS only when every check passed, and "could not
//! decide" is its own outcome.
//!
//! ```no_run
//! use dflash_gate::{gate, Options, Outcome};
//!
//! let report = gate(std::path::Path::new("models/bolt-dflash"), &Options::default())?;
//! if report.verdict() != Outcome::Pass {
//!     for check in report.checks.iter().filter(|c| c.outcome != Outcome::Pass) {
//!         eprintln!("{} {}: {}", check.outcome, check.id, check.message);
//!     }
//!     return Err("draft package refused".into());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod checkpoint;
pub mod checks;
pub mod config;
pub mod container;
pub mod dtype;
pub mod error;
pub mod escape;
pub mod family;
pub mod files;
pub mod limits;
pub mod manifest;
pub mod package;
pub mod parallel;
pub mod report;
pub mod source;
pub mod strict_json;
pub mod target;
pub mod tile;

pub use package::{evaluate, gate, Options, PackageError};
pub use report::{Check, Outcome, Report};

/// The README's Rust examples compile as doc tests, so the README cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeExamples;

/// The other Markdown files' Rust examples too (a test in the task runner fails when a file with a
/// Rust example is missing here). Each file is its own item, so a failure names the file.
#[cfg(doctest)]
mod markdown_examples {
    #[doc = include_str!("../../CONTRIBUTING.md")]
    struct Contributing;
    #[doc = include_str!("../../docs/cmake.md")]
    struct Cmake;
    #[doc = include_str!("../../docs/format.md")]
    struct Format;
    #[doc = include_str!("../../docs/glossary.md")]
    struct Glossary;
    #[doc = include_str!("../../docs/hostile-input.md")]
    struct HostileInput;
    #[doc = include_str!("../../docs/json.md")]
    struct Json;
    #[doc = include_str!("../../docs/performance.md")]
    struct Performance;
    #[doc = include_str!("../../docs/source.md")]
    struct Source;
    #[doc = include_str!("../../docs/target-and-manifest.md")]
    struct TargetAndManifest;
    #[doc = include_str!("../../docs/usage.md")]
    struct Usage;
}
