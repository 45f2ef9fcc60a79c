//! The gate in front of a DFlash draft loader.
//!
//! A DFlash draft ships in several forms ([`Form`]): the publisher's Hugging Face folder
//! (`config.json` plus float safetensors, one file or shards, also inside the Hugging Face cache),
//! as vLLM, SGLang, Transformers and MLX load it; a GGUF file (`general.architecture = dflash`, its
//! config in the metadata), as llama.cpp loads it; and FastFlowLM's Q4NX package (`config.json` plus
//! a safetensors container of q4_1 tile grids). [`gate`] answers, from the bytes alone and before any
//! load: is every tensor in a form the loader decodes, does the geometry agree with the config (and,
//! given one, with the target and the source checkpoint), what is in there, and is anything
//! unexplained. It fails closed: the verdict is PASS only when every check passed, and "could not
//! decide" is its own outcome.
//!
//! Every report also says what each engine that serves DFlash drafts (vLLM, SGLang, llama.cpp,
//! Transformers, MLX) would do with the draft ([`Report::loaders`]), by rules read from that
//! engine's own code; [`Options::with_loaders`] makes those verdicts checks of their own.
//!
//! ```no_run
//! use dflash_gate::{gate, Options, Outcome};
//!
//! let report = gate(std::path::Path::new("models/bolt-dflash"), &Options::default())?;
//! if report.verdict() != Outcome::Pass {
//!     for check in report.checks().iter().filter(|c| c.outcome() != Outcome::Pass) {
//!         eprintln!("{} {}: {}", check.outcome(), check.id(), check.message());
//!     }
//!     return Err("draft package refused".into());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(not(unix))]
compile_error!("dflash-gate builds on Unix only (Linux, macOS): it reads packages through mmap, guarded by a SIGBUS handler, and has no equivalent for other platforms");

mod check_id;
mod checkpoint;
mod checks;
mod config;
mod container;
mod draft;
mod dtype;
mod engine;
mod error;
mod escape;
mod evaluation;
pub mod evidence;
mod family;
mod files;
mod form;
mod gguf;
mod hub;
mod limits;
mod loaders;
mod manifest;
mod package;
mod parallel;
mod pickle;
mod quant;
mod report;
mod role_class;
mod source;
mod strict_json;
mod target;
#[cfg(test)]
mod testing;
mod tile;
mod tokenizer;
mod torch_archive;

pub use check_id::CheckId;
pub use engine::{Engine, LoaderOutcome, LoaderReason, LoaderVerdict};
pub use error::PackageError;
pub use evaluation::evaluate;
pub use files::FileError;
pub use form::Form;
pub use package::{gate, read_target, Options, ReadTarget};
pub use report::{
    error_json, Against, Census, Check, Comparison, Evidence, FileCensus, FileUse, GridCensus,
    Named, NotChecked, Outcome, Report, SourceGridCensus, TensorCensus, Tool, SCHEMA_VERSION, TOOL,
};
pub use role_class::RoleClass;

/// Not part of the API: the gate's insides, for its own binary, test suite, benches and fuzz
/// targets. Nothing here is covered by semver; a loader uses the names at the crate root.
#[doc(hidden)]
pub mod __private {
    pub use crate::source::with_scalar_source_loop;

    macro_rules! mirror {
        ($($module:ident),* $(,)?) => {
            $(pub mod $module {
                pub use crate::$module::*;
            })*
        };
    }
    mirror!(
        checkpoint,
        checks,
        config,
        container,
        draft,
        dtype,
        error,
        escape,
        evaluation,
        family,
        files,
        gguf,
        hub,
        limits,
        loaders,
        manifest,
        package,
        parallel,
        report,
        source,
        strict_json,
        target,
        tile,
        torch_archive,
        pickle,
        quant,
    );
}

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
