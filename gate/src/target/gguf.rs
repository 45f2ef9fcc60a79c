//! A GGUF model file as the target (`--target model.gguf`): its header and metadata only, read by
//! the strict reader the GGUF draft uses. No tensor's data is touched, so a 16 GB target costs what
//! its header costs.
//!
//! `{arch}.block_count` is the layer count, `{arch}.embedding_length` the hidden size, and the
//! vocabulary is the rows of `token_embd.weight` (its ne1), else `{arch}.vocab_size`, else the length
//! of `tokenizer.ggml.token_type`. A key a check needs and the file lacks makes that check UNDECIDED
//! naming the key.

use super::{Target, Tokenizer};
use crate::config::{Field, FieldProblem, ProblemKind};
use crate::container::TensorInfo;
use crate::dtype::Dtype;
use crate::error::PackageError;
use crate::gguf::{GgmlType, Gguf, Header, Value};
use std::path::Path;

/// The embedding table a GGUF keeps its vocabulary in.
pub const TOKEN_EMBD: &str = "token_embd.weight";

/// Whether `path` names a GGUF file (by its extension, as the draft side tells the form).
pub fn is_gguf(path: &Path) -> bool {
    crate::gguf::is_gguf_name(path.as_os_str()) && !path.is_dir()
}

/// Reads a GGUF target's header and metadata. One that does not parse is exit 2 naming the rule it
/// breaks, as any target that cannot be read.
pub fn read(path: &Path) -> Result<Target, PackageError> {
    let gguf = Gguf::open(path)?;
    let header = &gguf.header;
    let Some(arch) = header.architecture().map(str::to_owned) else {
        return Err(PackageError::Malformed {
            path: path.to_owned(),
            why: "the target GGUF states no general.architecture (a string): its model keys cannot be named".to_owned(),
        });
    };
    if arch == crate::draft::gguf::ARCHITECTURE
        || crate::draft::gguf::FORK_DIALECTS.contains(&arch.as_str())
    {
        return Err(PackageError::DraftAsTarget {
            path: path.to_owned(),
            why: format!("general.architecture is {arch:?}"),
        });
    }
    let tokens = gguf.token_type(0).map(|(count, _)| count);
    // The token texts live in the metadata, not the data section: reading them keeps the rule.
    let texts = gguf.token_texts();
    let embd = header.tensor(TOKEN_EMBD);
    let vocab_size = match embd {
        Some(t) if t.dims.len() == 2 => Ok(t.dims[1]),
        _ => match count(header, &format!("{arch}.vocab_size")) {
            Err(p) if p.kind == ProblemKind::Missing => match tokens {
                Some(n) if n > 0 => Ok(n),
                _ => Err(FieldProblem::new(
                    &format!("{TOKEN_EMBD} (or {arch}.vocab_size, or tokenizer.ggml.token_type)"),
                    ProblemKind::Missing,
                )),
            },
            other => other,
        },
    };
    let tensors = match embd {
        Some(t) if t.dims.len() == 2 => Ok(vec![table(TOKEN_EMBD, t.ty, &t.dims)]),
        Some(t) => Err(format!(
            "the target GGUF's {TOKEN_EMBD} has {} dimensions, not 2",
            t.dims.len()
        )),
        None => Err(format!("the target GGUF holds no {TOKEN_EMBD}")),
    };
    let mut target = Target {
        hidden_size: count(header, &format!("{arch}.embedding_length")),
        num_hidden_layers: count(header, &format!("{arch}.block_count")),
        vocab_size,
        tensors,
        tokenizer: match texts {
            Some(_) => Tokenizer::Present,
            None => Tokenizer::Absent,
        },
        tokens: match texts {
            Some(texts) => {
                let id = |key: &str| match header.get(key).map(|k| &k.value) {
                    Some(Value::Integer(i)) => Some(*i),
                    _ => None,
                };
                crate::tokenizer::Tokens::from_gguf(
                    texts,
                    gguf.token_type_list().as_deref(),
                    id("tokenizer.ggml.bos_token_id"),
                    id("tokenizer.ggml.eos_token_id"),
                    id("tokenizer.ggml.padding_token_id"),
                    id("tokenizer.ggml.unknown_token_id"),
                )
            }
            None => crate::tokenizer::Tokens::default(),
        },
        stated_in: super::StatedIn::Gguf,
        rope: super::rope::of_gguf(header, &arch),
        weights_absent: false,
        architecture: super::Architecture::Gguf(arch.clone()),
        architectures: Err(format!(
            "a GGUF target states general.architecture \"{}\", not the Transformers classes a verifier is named by",
            crate::escape::escape(&arch)
        )),
    };
    if let Some(fault) = gguf.token_types_fault() {
        // Read by id beside the tokens, as llama.cpp reads them: not a tokenizer to take the
        // mask's type from.
        target.tokens.vocabulary = Some(Err(crate::tokenizer::Problem {
            message: format!("the target GGUF's {fault}"),
            undecided: false,
        }));
    }
    gguf.unchanged()?;
    Ok(target)
}

/// A GGUF table as the checks read a header entry: `[rows, columns]` (ne1, ne0), its element type
/// where safetensors has one, else bytes (the checks read only its shape).
fn table(name: &str, ty: GgmlType, dims: &[u64]) -> TensorInfo {
    let dtype = match ty {
        GgmlType::F32 => Dtype::F32,
        GgmlType::F16 => Dtype::F16,
        GgmlType::BF16 => Dtype::Bf16,
        _ => Dtype::U8,
    };
    TensorInfo {
        name: name.to_owned(),
        dtype,
        shape: vec![dims[1], dims[0]],
        begin: 0,
        end: 0,
    }
}

/// A positive count a metadata key states: absent is missing (UNDECIDED), another type is named,
/// zero is invalid (no draft fits it).
fn count(header: &Header, key: &str) -> Field<u64> {
    match header.get(key).map(|k| &k.value) {
        None => Err(FieldProblem::new(key, ProblemKind::Missing)),
        Some(Value::Integer(i)) if *i >= 1 => u64::try_from(*i).map_err(|_| {
            FieldProblem::new(
                key,
                ProblemKind::Invalid(format!("is {i}, an integer too long for 64 bits")),
            )
        }),
        Some(Value::Integer(i)) => Err(FieldProblem::new(
            key,
            ProblemKind::Invalid(format!("is {i}, not positive")),
        )),
        Some(_) => Err(FieldProblem::new(
            key,
            ProblemKind::WrongType("not an integer".to_owned()),
        )),
    }
}
