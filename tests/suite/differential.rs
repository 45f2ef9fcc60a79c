//! Our container verdict against the reference safetensors reader's, on a few thousand malformed
//! headers. They must agree except where our rules are deliberately different (docs/hostile-input.md,
//! "Differences from the reference reader"); each such case is recognised by our own error, never by
//! hope.
//!
//! Needs a Python with the `safetensors` package: `DFLASH_GATE_PYTHON=/path/to/python`. Without it the
//! trial is listed as ignored, with the reason in its name. The GGUF reader and dequantization are held
//! to gguf-py's the same way (`differential/gguf.rs`), when that Python has the `gguf` package; the
//! GGUF llama.cpp's own converter writes is gated in `differential/converter.rs`, when the Python named
//! by `DFLASH_GATE_TORCH_PYTHON` has the converter; the loader verdicts are held to z-lab's loaders
//! themselves in `differential/engines.rs`, when `DFLASH_GATE_ZLAB_PYTHON` names a Python with them,
//! and every GGUF draft arm to llama.cpp's own model loader in `differential/llama_cpp.rs`, when
//! `DFLASH_GATE_LLAMA_CPP` names a built llama.cpp, and its pairing rows to llama.cpp's speculative
//! decoding in `differential/llama_cpp_pairs.rs`, when `DFLASH_GATE_LLAMA_CPP_SPECULATIVE` names its
//! `llama-speculative-simple`; SGLang's and vLLM's config rules are held to
//! those engines' own config-reading functions in `differential/config_rules.rs`, when
//! `DFLASH_GATE_SGLANG_SRC` or `DFLASH_GATE_VLLM_SRC` names their sources; drafts written by the real
//! libraries (torch.save, speculators, compressed-tensors, mlx-lm) are gated in
//! `differential/writers.rs`, when `DFLASH_GATE_WRITERS_PYTHON` names a Python with them.

use dflash_gate::__private::container::{Container, ContainerError};
use libtest_mimic::{Failed, Trial};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

pub const PYTHON_VAR: &str = "DFLASH_GATE_PYTHON";
const CASES: usize = 3000;

pub fn trials() -> Vec<Trial> {
    let mut out = match std::env::var_os(PYTHON_VAR) {
        Some(python) => vec![Trial::test(
            "differential::safetensors_reference",
            move || compare(PathBuf::from(&python)),
        )],
        None => vec![Trial::test(
            "differential::safetensors_reference_needs_DFLASH_GATE_PYTHON",
            || Ok(()),
        )
        .with_ignored_flag(true)],
    };
    out.extend(gguf::trials());
    out.extend(model_class::trials());
    out.extend(converter::trials());
    out.extend(engines::trials());
    out.extend(llama_cpp::trials());
    out.extend(llama_cpp_pairs::trials());
    out.extend(config_rules::trials());
    out.extend(writers::trials());
    out
}

mod config_rules;
mod converter;
mod engines;
mod writers;

/// Tensor names and their shapes, as two readers saw them.
type Shapes = std::collections::BTreeMap<String, Vec<u64>>;

/// The entries of a shapes map that the other lacks or shapes otherwise.
type Only<'a> = Vec<(&'a String, &'a Vec<u64>)>;

/// Each side's entries the other lacks or shapes otherwise, for a message that shows both.
fn one_sided<'a>(a: &'a Shapes, b: &'a Shapes) -> (Only<'a>, Only<'a>) {
    let only = |x: &'a Shapes, y: &'a Shapes| -> Only<'a> {
        x.iter().filter(|(k, v)| y.get(*k) != Some(v)).collect()
    };
    (only(a, b), only(b, a))
}
mod gguf;
mod llama_cpp;
mod llama_cpp_pairs;
mod model_class;

/// Our deliberate differences: `Some(reason)` when our refusal of a file the reference accepts is one.
fn stricter(e: &ContainerError) -> Option<&'static str> {
    match e {
        ContainerError::HeaderNotJson { reason } if reason.contains("duplicate key") => {
            Some("duplicate keys: the reference keeps the last silently")
        }
        ContainerError::UnknownField { .. } => {
            Some("unknown entry fields: the reference ignores them")
        }
        ContainerError::UnknownDtype { .. } => {
            Some("dtypes outside the spec's list (F4, F8_E8M0, C64...)")
        }
        ContainerError::RankTooLarge { .. } => Some("more than 8 dimensions"),
        _ => None,
    }
}

fn compare(python: PathBuf) -> Result<(), Failed> {
    let mut cases = gate_tests::campaign::header_mutants(0xd1ff, CASES);
    cases.extend(hand_written());
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/differential/reference.py");
    let mut child = Command::new(&python)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let payload: Vec<Vec<u8>> = cases.iter().map(|(_, b)| b.clone()).collect();
    let writer = std::thread::spawn(move || {
        for bytes in payload {
            stdin.write_all(&(bytes.len() as u64).to_le_bytes())?;
            stdin.write_all(&bytes)?;
        }
        Ok::<(), std::io::Error>(())
    });
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let verdicts: Vec<String> = std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .collect();
    writer
        .join()
        .map_err(|_| "writer panicked")?
        .map_err(|e| e.to_string())?;
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() || verdicts.len() != cases.len() {
        return Err(format!(
            "the reference reader answered {} of {} cases ({status})",
            verdicts.len(),
            cases.len()
        )
        .into());
    }
    let mut disagreements = Vec::new();
    let (mut agree, mut ours_stricter, mut ours_aligned) = (0, 0, 0);
    for ((what, bytes), theirs) in cases.iter().zip(&verdicts) {
        let ours = Container::parse(bytes);
        let theirs_ok = theirs == "ok";
        match (&ours, theirs_ok) {
            (Ok(_), true) | (Err(_), false) => agree += 1,
            (Err(e), true) if stricter(e).is_some() => ours_stricter += 1,
            (Ok(c), false) if !c.table.gaps.is_empty() => ours_aligned += 1,
            (Ok(_), false) => {
                disagreements.push(format!("{what}: we accept, the reference says {theirs}"))
            }
            (Err(e), true) => {
                disagreements.push(format!("{what}: the reference accepts, we refuse: {e}"))
            }
        }
    }
    if !disagreements.is_empty() {
        return Err(format!(
            "{} unexplained disagreements of {} (agree {agree}, stricter {ours_stricter}, aligned {ours_aligned}):\n{}",
            disagreements.len(),
            cases.len(),
            disagreements.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
        )
        .into());
    }
    if ours_stricter == 0 || ours_aligned == 0 {
        return Err(format!("the hand-written cases did not exercise both deliberate differences ({ours_stricter}, {ours_aligned})").into());
    }
    Ok(())
}

/// Cases the mutations rarely reach: each deliberate difference once, and the packer's alignment.
fn hand_written() -> Vec<(String, Vec<u8>)> {
    let file = gate_tests::synth::container_file;
    vec![
        (
            "duplicate key".into(),
            file(
                r#"{"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]},"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}}"#,
                &[0; 4],
            ),
        ),
        (
            "unknown field".into(),
            file(
                r#"{"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4],"q":1}}"#,
                &[0; 4],
            ),
        ),
        (
            "aligned gap".into(),
            file(
                r#"{"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"I8","shape":[4],"data_offsets":[64,68]}}"#,
                &[0; 68],
            ),
        ),
        (
            "leading whitespace".into(),
            file(
                r#"  {"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}}"#,
                &[0; 4],
            ),
        ),
        ("empty header object".into(), file("{}", &[])),
    ]
}
