//! The forms a draft ships in, and the readers that turn each into what the form-free checks read.
//!
//! A Q4NX package is read by `evaluation` (its container checks prove grids and scalars that only it
//! has); a Hugging Face folder by [`folder`]. Every reader names its form in the census, so a report
//! says which loader's view it took.

pub mod folder;
pub mod gguf;
pub mod gguf_source;
pub mod mask_embedding;
pub(crate) mod quantized;
