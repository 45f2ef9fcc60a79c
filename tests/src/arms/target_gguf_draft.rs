//! A GGUF draft against its target, the target in either form: the same `target.*` checks as a
//! config's, fed from the GGUF's metadata (`dflash.target_layers` minus one are the HF ids it means;
//! it states no `num_target_layers`, so depth asks only that every id be a layer the target has).
//! Each trial names the check and the key its message must name.

use super::target_forms::{expect, gguf_target};
use super::{Base, SEED};
use crate::synth::gguf::{gguf_for, write_gguf, GgufFile, GgufOptions};
use crate::synth::{Encoding, Geometry, Package, TargetPackage};
use dflash_gate::{Outcome, Report};
use std::path::{Path, PathBuf};

/// A trial's body: `Err` says what the gate did instead.
pub type Trial = fn() -> Result<(), String>;

/// Gates the small draft, as a GGUF file, against the target `write` puts in the temporary root (it
/// returns the path to give `--target`).
fn against(
    write: impl FnOnce(&Path, &Geometry) -> PathBuf,
) -> Result<Result<Report, dflash_gate::PackageError>, String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let g = Base::Small.geometry();
    let mut package = Package::generate(&g, Encoding::default(), SEED);
    let draft = root.path().join("draft.gguf");
    write_gguf(&mut package, &draft, GgufOptions::DEFAULT, SEED).map_err(|e| e.to_string())?;
    let target = write(root.path(), &g);
    let options = dflash_gate::Options::default().with_target(target);
    Ok(dflash_gate::gate(&draft, &options))
}

/// [`against`], the draft GGUF written as llama.cpp's converter writes one: no `dflash.vocab_size`,
/// the vocabulary given only as the length of `tokenizer.ggml.tokens`.
fn converted_against(
    write: impl FnOnce(&Path, &Geometry) -> PathBuf,
) -> Result<Result<Report, dflash_gate::PackageError>, String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let g = Base::Small.geometry();
    let mut package = Package::generate(&g, Encoding::default(), SEED);
    let mut file = gguf_for(&mut package, GgufOptions::DEFAULT, SEED).map_err(|e| e.to_string())?;
    if !file.remove("dflash.vocab_size") {
        return Err("the generator wrote no dflash.vocab_size to remove".to_owned());
    }
    let draft = root.path().join("draft.gguf");
    std::fs::write(&draft, file.bytes()).map_err(|e| e.to_string())?;
    let target = write(root.path(), &g);
    let options = dflash_gate::Options::default().with_target(target);
    Ok(dflash_gate::gate(&draft, &options))
}

/// A Hugging Face folder target matching the draft, its config edited by `bend`.
fn folder(bend: fn(&mut serde_json::Value)) -> impl FnOnce(&Path, &Geometry) -> PathBuf {
    move |root, g| {
        let path = root.join("target");
        let mut t = TargetPackage::matching(g);
        bend(&mut t.config);
        t.write(&path).expect("target");
        path
    }
}

/// [`folder`] with only its config and tokenizer: the weights not downloaded.
fn config_only(bend: fn(&mut serde_json::Value)) -> impl FnOnce(&Path, &Geometry) -> PathBuf {
    move |root, g| {
        let path = folder(bend)(root, g);
        std::fs::remove_file(path.join("model.q4nx")).expect("rm");
        path
    }
}

/// A GGUF target matching the draft (its mask row a CONTROL token, as a target's added special
/// token is), edited by `bend`.
fn gguf(bend: fn(&mut GgufFile)) -> impl FnOnce(&Path, &Geometry) -> PathBuf {
    move |root, g| {
        let path = root.join("target.gguf");
        // The shared GGUF target carries its tokens, the last row (the draft's mask id) CONTROL.
        std::fs::write(&path, gguf_target(g, bend).bytes()).expect("gguf");
        path
    }
}

/// The block count a GGUF target states, as its `qwen3.block_count` bytes.
fn layers(f: &mut GgufFile, n: u64) {
    f.replace("qwen3.block_count", 4, &(n as u32).to_le_bytes());
}

/// The largest `dflash.target_layers` entry the small draft stores (its largest HF id plus one).
fn deepest() -> u64 {
    Base::Small
        .geometry()
        .taps
        .iter()
        .max()
        .copied()
        .unwrap_or(0)
        + 1
}

/// Every trial of this module: (name, body).
pub fn trials() -> Vec<(&'static str, Trial)> {
    vec![
        ("target_gguf_draft::folder_target_matches", || {
            expect(
                against(folder(|_| {})),
                &[
                    ("target.depth", Outcome::Pass, "dflash.target_layers"),
                    (
                        "target.hidden_size",
                        Outcome::Pass,
                        "dflash.embedding_length in the GGUF",
                    ),
                    ("target.vocab", Outcome::Pass, "the vocabularies agree"),
                    ("target.rope", Outcome::Pass, "dflash.rope.freq_base"),
                    (
                        "target.mask_token",
                        Outcome::Pass,
                        "tokenizer.ggml.mask_token_id in the GGUF",
                    ),
                ],
            )
        }),
        ("target_gguf_draft::gguf_target_matches", || {
            expect(
                against(gguf(|_| {})),
                &[
                    ("target.depth", Outcome::Pass, "the HF ids"),
                    ("target.hidden_size", Outcome::Pass, "token_embd.weight is"),
                    ("target.vocab", Outcome::Pass, "token_embd.weight has"),
                    (
                        "target.mask_token",
                        Outcome::Pass,
                        "tokenizer.ggml.mask_token_id",
                    ),
                ],
            )
        }),
        // A target folder holding only its config decides target.vocab from its vocab_size for a GGUF
        // draft as for a folder's: against dflash.vocab_size, or, where the file states none (as
        // llama.cpp's converter writes it), against its token list's length.
        ("target_gguf_draft::config_only_target", || {
            expect(
                against(config_only(|_| {})),
                &[(
                    "target.vocab",
                    Outcome::Pass,
                    "draft vocab_size 1000 (dflash.vocab_size in the GGUF)",
                )],
            )
        }),
        (
            "target_gguf_draft::config_only_target_of_a_converted_gguf",
            || {
                expect(
                    converted_against(config_only(|_| {})),
                    &[(
                        "target.vocab",
                        Outcome::Pass,
                        "draft vocab_size 1000 (the length of tokenizer.ggml.tokens in the GGUF, which states no dflash.vocab_size)",
                    )],
                )
            },
        ),
        (
            "target_gguf_draft::config_only_target_of_another_vocabulary",
            || {
                expect(
                    converted_against(config_only(|c| c["vocab_size"] = 1024.into())),
                    &[(
                        "target.vocab",
                        Outcome::Fail,
                        "the draft's vocab_size (the length of tokenizer.ggml.tokens in the GGUF, which states no dflash.vocab_size) is 1000, the target's 1024",
                    )],
                )
            },
        ),
        // An entry equal to the target's layer count reads the last layer's output, which llama.cpp
        // records only for the architectures that record it: a Qwen3 target's first prefill aborts.
        ("target_gguf_draft::deepest_tap_is_the_last_layer", || {
            expect(
                against(gguf(|f| layers(f, deepest()))),
                &[(
                    "target.depth",
                    Outcome::Fail,
                    "dflash.target_layers [2, 4, 6] in the GGUF, the HF ids [1, 3, 5] reaches 6, the target's layer count (6 layers)",
                ), (
                    "target.depth",
                    Outcome::Fail,
                    "not this one (general.architecture \"qwen3\"), and aborts at the first prefill, GGML_ASSERT(t_layer_inp[il] != nullptr && \"layer input tensor is null\")",
                )],
            )
        }),
        (
            "target_gguf_draft::deepest_tap_is_the_last_layer_of_a_qwen3_folder",
            || {
                expect(
                    against(folder(|c| c["num_hidden_layers"] = deepest().into())),
                    &[(
                        "target.depth",
                        Outcome::Fail,
                        "not this one (architectures[0] \"Qwen3ForCausalLM\")",
                    )],
                )
            },
        ),
        // Nemotron-H's graph records the last layer's output (t_layer_inp[n_layer]): the tap is served.
        (
            "target_gguf_draft::deepest_tap_is_the_last_layer_of_a_nemotron_h",
            || {
                expect(
                    against(folder(|c| {
                        c["num_hidden_layers"] = deepest().into();
                        c["architectures"] = serde_json::json!(["NemotronHForCausalLM"]);
                    })),
                    &[(
                        "target.depth",
                        Outcome::Pass,
                        "every tap in dflash.target_layers [2, 4, 6] in the GGUF",
                    )],
                )
            },
        ),
        // A multimodal config's text model names its own class, as llama.cpp's converter reads it.
        (
            "target_gguf_draft::deepest_tap_is_the_last_layer_of_a_nested_mimo2",
            || {
                expect(
                    against(folder(|c| {
                        c["num_hidden_layers"] = deepest().into();
                        c["text_config"] =
                            serde_json::json!({"architectures": ["MiMoV2ForCausalLM"]});
                    })),
                    &[("target.depth", Outcome::Pass, "every tap in")],
                )
            },
        ),
        // A target that names no architecture: whether llama.cpp records its last layer is not known.
        (
            "target_gguf_draft::deepest_tap_is_the_last_layer_of_an_unnamed_target",
            || {
                expect(
                    against(folder(|c| {
                        c["num_hidden_layers"] = deepest().into();
                        c.as_object_mut().unwrap().remove("architectures");
                    })),
                    &[(
                        "target.depth",
                        Outcome::Undecided,
                        "the target's config.json states no architectures",
                    )],
                )
            },
        ),
        ("target_gguf_draft::deepest_tap_past_the_last_layer", || {
            expect(
                against(gguf(|f| layers(f, deepest() - 1))),
                &[("target.depth", Outcome::Fail, "dflash.target_layers")],
            )
        }),
        ("target_gguf_draft::hidden_differs", || {
            expect(
                against(folder(|c| c["hidden_size"] = 512.into())),
                &[(
                    "target.hidden_size",
                    Outcome::Fail,
                    "the draft's hidden size (dflash.embedding_length in the GGUF) differs",
                )],
            )
        }),
        ("target_gguf_draft::mask_is_the_targets_eos", || {
            expect(
                against(folder(|c| {
                    c["eos_token_id"] = Base::Small.geometry().mask_token_id.into()
                })),
                &[(
                    "target.mask_token",
                    Outcome::Fail,
                    "(tokenizer.ggml.mask_token_id in the GGUF): mask_token_id",
                )],
            )
        }),
    ]
}
