//! How `--target` reads a target (spec section 8, the hostile-input issue's item 8): a weight file
//! that is there but cannot be read, or is not a whole container, stops the gate (exit 2); a
//! safetensors target, single or sharded, has its embedding rows counted from its headers; a target
//! with nothing to count leaves `target.vocab` UNDECIDED, never PASS.

use super::Base;
use crate::synth::{header_bytes, TargetPackage};
use dflash_gate::{Outcome, Report};
use std::path::Path;

/// Gates the small package against a matching target that `bend` then edits on disk.
fn against(bend: fn(&Path)) -> Result<Result<Report, dflash_gate::PackageError>, String> {
    super::target_tokenizer::gate(|_| {}, bend)
}

fn expect_error(bend: fn(&Path), reason: &str, names: &str) -> Result<(), String> {
    match against(bend)? {
        Ok(r) => Err(format!(
            "the gate ran ({}) over a target it could not read",
            r.verdict()
        )),
        // A fix clause the message must end with is the error's `fix` too (the document's field).
        Err(e)
            if e.reason() == reason
                && e.to_string().contains(names)
                && names
                    .split_once("; fix: ")
                    .is_none_or(|(_, fix)| e.fix().is_some_and(|f| f.starts_with(fix))) =>
        {
            Ok(())
        }
        Err(e) => Err(format!(
            "expected {reason} naming {names:?}, got {}: {e}",
            e.reason()
        )),
    }
}

fn expect_check(bend: fn(&Path), id: &str, outcome: Outcome, names: &str) -> Result<(), String> {
    let report = against(bend)?.map_err(|e| format!("the gate could not run: {e}"))?;
    let check = report.check(id).ok_or(format!("{id} did not run"))?;
    if check.outcome() != outcome || !check.message().contains(names) {
        return Err(format!(
            "{id}: expected {outcome} naming {names:?}, got {}: {}",
            check.outcome(),
            check.message()
        ));
    }
    // A target check that could not decide keeps the agreement's NOT CHECKED line.
    let kept = report
        .not_checked()
        .contains(&dflash_gate::NotChecked::TargetAgreement);
    if outcome == Outcome::Undecided && !kept {
        return Err(format!(
            "{id} is UNDECIDED, yet the NOT CHECKED line about agreement with the target went"
        ));
    }
    Ok(())
}

fn replace_with_dir(dir: &Path, name: &str) {
    let _ = std::fs::remove_file(dir.join(name));
    std::fs::create_dir(dir.join(name)).expect("dir");
}

fn append(path: &Path, bytes: &[u8]) {
    let mut all = std::fs::read(path).expect("read");
    all.extend_from_slice(bytes);
    std::fs::write(path, all).expect("write");
}

fn as_safetensors(dir: &Path) {
    std::fs::rename(dir.join("model.q4nx"), dir.join("model.safetensors")).expect("rename");
}

/// The matching target's two tables in two shards named by an index.
fn as_shards(dir: &Path) {
    std::fs::remove_file(dir.join("model.q4nx")).expect("remove");
    let target = TargetPackage::matching(&Base::Small.geometry());
    let mut map = serde_json::Map::new();
    for (i, entry) in target.tensors.iter().enumerate() {
        let name = format!("model-{:05}-of-00002.safetensors", i + 1);
        let mut e = entry.clone();
        let len = e.offsets[1] - e.offsets[0];
        e.offsets = [0, len];
        let header = header_bytes(&[e], &[]);
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(&header);
        bytes.resize(bytes.len() + len as usize, 0);
        std::fs::write(dir.join(&name), bytes).expect("shard");
        map.insert(entry.name.clone(), name.into());
    }
    let index = serde_json::json!({ "weight_map": map });
    std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).expect("index");
}

/// The target folder holds a draft's config instead (the two folders given the wrong way round).
fn a_draft_config(dir: &Path) {
    let config = dir.join("config.json");
    let text = std::fs::read_to_string(&config).expect("config");
    let mut v: serde_json::Value = serde_json::from_str(&text).expect("json");
    v["architectures"] = serde_json::json!(["DFlashDraftModel"]);
    std::fs::write(&config, v.to_string()).expect("write");
}

/// The target folder holds only the draft as a GGUF: no config.json, one `*.gguf`.
fn only_a_draft_gguf(dir: &Path) {
    for entry in std::fs::read_dir(dir).expect("list").flatten() {
        std::fs::remove_file(entry.path()).expect("remove");
    }
    let mut package = crate::synth::Package::generate(
        &Base::Small.geometry(),
        crate::synth::Encoding::default(),
        super::SEED,
    );
    let file = crate::synth::gguf::gguf_for(
        &mut package,
        crate::synth::gguf::GgufOptions::DEFAULT,
        super::SEED,
    )
    .expect("gguf");
    std::fs::write(dir.join("draft.gguf"), file.bytes()).expect("write");
}

/// The target folder holds only a GGUF target model: the target's tokens, a non-DFlash architecture.
fn only_a_target_gguf(dir: &Path) {
    only_a_draft_gguf(dir);
    let mut file = crate::synth::gguf::GgufFile::new();
    file.string("general.architecture", "qwen3");
    file.u32("qwen3.block_count", 8);
    file.u32("qwen3.embedding_length", 256);
    let tokens: Vec<String> = (0..1000).map(|i| format!("tok{i}")).collect();
    file.string_array("tokenizer.ggml.tokens", &tokens);
    std::fs::remove_file(dir.join("draft.gguf")).expect("remove");
    std::fs::write(dir.join("target.gguf"), file.bytes()).expect("write");
}

/// A trial's body: `Err` says what the gate did instead.
pub type Trial = fn() -> Result<(), String>;

/// Every trial of this module: (name, body).
pub fn trials() -> Vec<(&'static str, Trial)> {
    vec![
        // Given the wrong way round, a draft is named as the draft it is, not read as a target.
        ("target_read::a_draft_folder_given_as_the_target", || {
            expect_error(a_draft_config, "malformed", "declares a DFlash draft (architectures: DFlashDraftModel): a draft, not the model it drafts for; fix: give --target the target model")
        }),
        ("target_read::a_draft_gguf_given_as_the_target", || {
            expect_error(only_a_draft_gguf, "malformed", "general.architecture is \"dflash\": a draft, not the model it drafts for; fix: give --target the target model")
        }),
        // A directory holding one GGUF and no config.json is that GGUF, as a draft directory is.
        (
            "target_read::a_directory_holding_one_gguf_is_read_as_it",
            || expect_check(only_a_target_gguf, "target.depth", Outcome::Pass, ""),
        ),
        (
            "target_read::a_directory_holding_two_ggufs_is_refused",
            || {
                expect_error(
                    |d| {
                        only_a_target_gguf(d);
                        std::fs::copy(d.join("target.gguf"), d.join("other.gguf")).expect("copy");
                    },
                    "malformed",
                    "several GGUF files",
                )
            },
        ),
        ("target_read::weight_file_is_a_directory", || {
            expect_error(
                |d| replace_with_dir(d, "model.q4nx"),
                "not_a_regular_file",
                "model.q4nx",
            )
        }),
        ("target_read::safetensors_is_a_directory", || {
            expect_error(
                |d| {
                    std::fs::remove_file(d.join("model.q4nx")).expect("rm");
                    replace_with_dir(d, "model.safetensors")
                },
                "not_a_regular_file",
                "model.safetensors",
            )
        }),
        ("target_read::weight_file_has_trailing_bytes", || {
            expect_error(
                |d| append(&d.join("model.q4nx"), &[0; 16]),
                "malformed",
                "model.q4nx",
            )
        }),
        ("target_read::safetensors_has_trailing_bytes", || {
            expect_error(
                |d| {
                    as_safetensors(d);
                    append(&d.join("model.safetensors"), &[1; 8])
                },
                "malformed",
                "model.safetensors",
            )
        }),
        ("target_read::weight_file_is_a_dangling_link", || {
            expect_error(
                |d| {
                    std::fs::remove_file(d.join("model.q4nx")).expect("rm");
                    std::os::unix::fs::symlink(d.join("gone"), d.join("model.q4nx")).expect("link")
                },
                "file_not_found",
                "model.q4nx",
            )
        }),
        ("target_read::weight_file_is_a_symlink_loop", || {
            expect_error(
                |d| {
                    std::fs::remove_file(d.join("model.q4nx")).expect("rm");
                    std::os::unix::fs::symlink(d.join("model.q4nx"), d.join("model.q4nx"))
                        .expect("link")
                },
                "unreadable",
                "model.q4nx",
            )
        }),
        ("target_read::shard_missing", || {
            expect_error(
                |d| {
                    as_shards(d);
                    std::fs::remove_file(d.join("model-00002-of-00002.safetensors")).expect("rm")
                },
                "file_not_found",
                "model-00002-of-00002.safetensors",
            )
        }),
        ("target_read::config_not_json", || {
            expect_error(
                |d| std::fs::write(d.join("config.json"), b"{\"hidden_size\": 256,").expect("w"),
                "malformed",
                "not valid JSON",
            )
        }),
        ("target_read::safetensors_rows_counted", || {
            expect_check(
                as_safetensors,
                "target.vocab",
                Outcome::Pass,
                "model.embed_tokens.weight has 1000 rows",
            )
        }),
        ("target_read::sharded_rows_counted", || {
            expect_check(
                as_shards,
                "target.vocab",
                Outcome::Pass,
                "lm_head.weight has 1000 rows",
            )
        }),
        ("target_read::sharded_rows_disagree", || {
            expect_check(
                |d| {
                    as_shards(d);
                    let path = d.join("config.json");
                    let mut c: serde_json::Value =
                        serde_json::from_slice(&std::fs::read(&path).expect("r")).expect("json");
                    c["vocab_size"] = 1024.into();
                    std::fs::write(&path, c.to_string()).expect("w");
                },
                "target.vocab",
                Outcome::Fail,
                "has 1000 rows, vocab_size is 1024",
            )
        }),
        ("target_read::no_weight_file_compares_the_configs", || {
            expect_check(
                |d| std::fs::remove_file(d.join("model.q4nx")).expect("rm"),
                "target.vocab",
                Outcome::Pass,
                "the rows are the config's vocab_size",
            )
        }),
        ("target_read::no_embedding_table_is_undecided", || {
            expect_check(
                |d| {
                    let header = header_bytes(&[], &[]);
                    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
                    bytes.extend_from_slice(&header);
                    std::fs::write(d.join("model.q4nx"), bytes).expect("w")
                },
                "target.vocab",
                Outcome::Undecided,
                "no embed_tokens or lm_head table",
            )
        }),
        ("target_read::mask_bound_says_whose_vocab", || {
            expect_check(
                |d| {
                    let path = d.join("config.json");
                    let mut c: serde_json::Value =
                        serde_json::from_slice(&std::fs::read(&path).expect("r")).expect("json");
                    c.as_object_mut().expect("object").remove("vocab_size");
                    std::fs::write(&path, c.to_string()).expect("w");
                },
                "target.mask_token",
                Outcome::Pass,
                "below the draft's vocab_size (the target's config.json states none) 1000",
            )
        }),
    ]
}
