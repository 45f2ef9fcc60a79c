//! The forms a draft ships in, and the readers that turn each into what the form-free checks read.
//!
//! A Q4NX package is read by `evaluation` (its container checks prove grids and scalars that only it
//! has); a Hugging Face folder by [`folder`]. Every reader names its form in the census, so a report
//! says which loader's view it took.

pub mod folder;
pub mod gguf;
pub mod gguf_source;

use serde::Serialize;

/// The form a draft ships in (`census.form`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Form {
    /// FastFlowLM's package: `config.json` and a safetensors container of q4_1 tile grids.
    #[default]
    Q4nx,
    /// The publisher's Hugging Face folder: `config.json` and float safetensors, single or sharded.
    Safetensors,
    /// A GGUF file, as llama.cpp loads it.
    Gguf,
}

impl Form {
    /// The token the census and `--json` use.
    pub fn token(self) -> &'static str {
        match self {
            Form::Q4nx => "q4nx",
            Form::Safetensors => "safetensors",
            Form::Gguf => "gguf",
        }
    }
}

impl std::fmt::Display for Form {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Form::Q4nx => "Q4NX package",
            Form::Safetensors => "Hugging Face safetensors folder",
            Form::Gguf => "GGUF file",
        })
    }
}
