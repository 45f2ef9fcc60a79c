//! The form a draft ships in: one word every layer uses (the readers that produce it, the report that
//! prints it, the evaluation that branches on it), so it lives below all of them.

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
