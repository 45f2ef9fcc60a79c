//! The target's tokenizer, read (the mask-token rule and the token count of `--target`): the small
//! package against a Hugging Face folder target whose `tokenizer.json`, `generation_config.json` and
//! `tokenizer_config.json` each trial writes. The small draft's mask id is 999 of 1000 rows; the
//! matching target's tokenizer has 998 regular tokens and `<|endoftext|>` at 998, so the mask is the
//! first padded row, as the released Qwen3 drafts' 151669 is.

use super::{Base, SEED};
use crate::defects::Scenario;
use crate::synth::{Encoding, Package, TargetPackage};
use dflash_gate::{Outcome, Report};
use std::path::Path;

const MASK: &str = "target.mask_token";
const TOKENIZER: &str = "target.tokenizer";

/// Gates the small package against its matching target, edited by `edit` before it is written and
/// by `bend` on disk after.
pub(crate) fn gate(
    edit: fn(&mut TargetPackage),
    bend: impl Fn(&Path),
) -> Result<Result<Report, dflash_gate::PackageError>, String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (draft, target) = (root.path().join("draft"), root.path().join("target"));
    std::fs::create_dir(&draft).map_err(|e| e.to_string())?;
    Scenario::new(Package::generate(
        &Base::Small.geometry(),
        Encoding::default(),
        SEED,
    ))
    .write(&draft)
    .map_err(|e| e.to_string())?;
    let mut package = TargetPackage::matching(&Base::Small.geometry());
    edit(&mut package);
    package.write(&target).map_err(|e| e.to_string())?;
    bend(&target);
    let options = dflash_gate::Options::default().with_target(target);
    Ok(dflash_gate::gate(&draft, &options))
}

/// `id` ends `outcome` naming `names`; every other `target.*` check passes, but those `also` lists
/// (a control that moves two checks says so).
fn expect(
    edit: fn(&mut TargetPackage),
    bend: impl Fn(&Path),
    id: &str,
    outcome: Outcome,
    names: &str,
    also: &[(&str, Outcome)],
) -> Result<(), String> {
    let report = gate(edit, bend)?.map_err(|e| format!("the gate could not run: {e}"))?;
    let check = report.check(id).ok_or(format!("{id} did not run"))?;
    if check.outcome() != outcome || !check.message().contains(names) {
        return Err(format!(
            "{id}: expected {outcome} naming {names:?}, got {}: {}",
            check.outcome(),
            check.message()
        ));
    }
    for c in report
        .checks()
        .iter()
        .filter(|c| c.id().starts_with("target."))
    {
        if c.id() == id {
            continue;
        }
        let want = also
            .iter()
            .find(|(other, _)| *other == c.id())
            .map_or(Outcome::Pass, |(_, o)| *o);
        if c.outcome() != want {
            return Err(format!(
                "{}: expected {want}, got {}: {}",
                c.id(),
                c.outcome(),
                c.message()
            ));
        }
    }
    Ok(())
}

fn same(_: &mut TargetPackage) {}

fn untouched(_: &Path) {}

/// Sets `key` of the target's config.json (read back from disk) to `value`.
fn set_config(dir: &Path, key: &str, value: serde_json::Value) {
    let path = dir.join("config.json");
    let mut c: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("r")).expect("json");
    c[key] = value;
    std::fs::write(&path, c.to_string()).expect("w");
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("w");
}

/// The mask id as an added special token `<|MASK|>`, the tokenizer otherwise the matching one.
fn mask_added(t: &mut TargetPackage) {
    t.added_tokens.push((999, "<|MASK|>".to_owned(), true));
}

/// A tokenizer.json that is not one, and what `target.tokenizer` must say of it.
fn not_a_tokenizer(text: &'static str, says: &str) -> Result<(), String> {
    let bend = move |d: &Path| write(d, "tokenizer.json", text);
    expect(
        same,
        bend,
        TOKENIZER,
        Outcome::Fail,
        says,
        &[(MASK, Outcome::Undecided)],
    )?;
    // The mask's second half cannot be decided from it, and says why.
    expect(
        same,
        bend,
        MASK,
        Outcome::Undecided,
        "the target's tokenizer.json is not a tokenizer",
        &[(TOKENIZER, Outcome::Fail)],
    )
}

/// A trial's body: `Err` says what the gate did instead.
pub type Trial = fn() -> Result<(), String>;

/// Every trial of this module: (name, body).
pub fn trials() -> Vec<(&'static str, Trial)> {
    vec![
        ("target_tokenizer::matching_target_passes", || {
            expect(same, untouched, TOKENIZER, Outcome::Pass,
                "the target's tokenizer.json holds 999 tokens (998 in its vocabulary, 1 added), within the target's vocab_size 1000", &[])
        }),
        ("target_tokenizer::mask_is_a_padded_row", || {
            expect(same, untouched, MASK, Outcome::Pass,
                "mask_token_id 999 is below the target's vocab_size 1000, and is a padded row past the 999 tokens of the target's tokenizer.json", &[])
        }),
        ("target_tokenizer::mask_is_an_added_special_token", || {
            expect(
                mask_added,
                untouched,
                MASK,
                Outcome::Pass,
                "is the added special token \"<|MASK|>\" of the target's tokenizer.json",
                &[],
            )
        }),
        ("target_tokenizer::mask_past_the_rows", || {
            expect(
                |t| {
                    t.config["vocab_size"] = 999.into();
                    t.set_table("model.embed_tokens.weight", 999, 256);
                    t.set_table("lm_head.weight", 999, 256);
                },
                untouched,
                MASK,
                Outcome::Fail,
                "mask_token_id 999 is not below the target's vocab_size 999",
                &[("target.vocab", Outcome::Fail)],
            )
        }),
        ("target_tokenizer::mask_is_eos_in_config", || {
            expect(
                same,
                |d| set_config(d, "eos_token_id", 999.into()),
                MASK,
                Outcome::Fail,
                "mask_token_id 999 is the target's eos token (eos_token_id in config.json)",
                &[],
            )
        }),
        ("target_tokenizer::mask_is_eos_in_generation_config", || {
            expect(same, |d| write(d, "generation_config.json", r#"{"bos_token_id": 1, "eos_token_id": [2, 999]}"#),
                MASK, Outcome::Fail,
                "mask_token_id 999 is the target's eos token (eos_token_id in generation_config.json)", &[])
        }),
        ("target_tokenizer::mask_is_eos_in_tokenizer_config", || {
            expect(
                |t| t.added_tokens.push((999, "<|im_end|>".to_owned(), true)),
                |d| {
                    write(
                        d,
                        "tokenizer_config.json",
                        r#"{"eos_token": {"content": "<|im_end|>", "special": true}}"#,
                    )
                },
                MASK,
                Outcome::Fail,
                "mask_token_id 999 is the target's eos token (eos_token in tokenizer_config.json)",
                &[],
            )
        }),
        ("target_tokenizer::mask_is_a_regular_token", || {
            expect(
                |t| {
                    t.regular_tokens = 1000;
                    t.added_tokens.clear();
                },
                untouched,
                MASK,
                Outcome::Fail,
                "mask_token_id 999 is the regular token \"t999\" of the target's tokenizer.json",
                &[],
            )
        }),
        ("target_tokenizer::tokenizer_larger_than_the_rows", || {
            expect(
                |t| {
                    mask_added(t);
                    t.added_tokens.push((1000, "<|extra|>".to_owned(), true));
                },
                untouched,
                TOKENIZER,
                Outcome::Fail,
                "holds 1001 tokens (998 in its vocabulary, 3 added), more than the target's vocab_size 1000",
                &[],
            )
        }),
        (
            "target_tokenizer::no_tokenizer_leaves_the_mask_undecided",
            || {
                expect(|t| t.tokenizer = false, untouched, MASK, Outcome::Undecided,
                "cannot decide whether it is a token of the target: the target has no tokenizer to read",
                &[(TOKENIZER, Outcome::Fail)])
            },
        ),
        ("target_tokenizer::hostile::over_the_size_limit", || {
            expect(
                same,
                |d| {
                    // Sparse: 64 MiB and one byte, none of it written.
                    let f = std::fs::File::create(d.join("tokenizer.json")).expect("create");
                    f.set_len((64 << 20) + 1).expect("set_len");
                },
                TOKENIZER,
                Outcome::Fail,
                "the target's tokenizer.json: 67108865 bytes, larger than the 67108864-byte limit: refused unread",
                &[(MASK, Outcome::Undecided)],
            )
        }),
        ("target_tokenizer::hostile::malformed_json", || {
            not_a_tokenizer(
                r#"{"added_tokens": [], "model": {"vocab": {"a": 0}"#,
                "EOF while parsing",
            )
        }),
        ("target_tokenizer::hostile::duplicate_keys", || {
            not_a_tokenizer(
                r#"{"added_tokens": [], "model": {"vocab": {"a": 0, "b": 1, "a": 2}}}"#,
                "duplicate key \"a\" in model.vocab",
            )
        }),
        (
            "target_tokenizer::hostile::added_tokens_not_an_array",
            || {
                not_a_tokenizer(
                    r#"{"added_tokens": {"id": 0, "content": "a"}, "model": {"vocab": {}}}"#,
                    "expected added_tokens as an array",
                )
            },
        ),
        ("target_tokenizer::hostile::negative_id", || {
            not_a_tokenizer(
                r#"{"added_tokens": [{"id": -1, "content": "<s>", "special": true}], "model": {"vocab": {}}}"#,
                "added_tokens[0].id is -1, not a token id",
            )
        }),
        (
            "target_tokenizer::added_token_repeating_its_vocab_entry",
            || {
                // As real tokenizers write their special tokens: the same id, the same text, in both lists.
                expect(
                |t| t.added_tokens.push((5, "t5".to_owned(), true)),
                untouched,
                TOKENIZER,
                Outcome::Pass,
                "holds 999 tokens (998 in its vocabulary, 2 added), within the target's vocab_size 1000",
                &[],
            )
            },
        ),
        (
            "target_tokenizer::hostile::id_in_vocab_and_added_with_another_text",
            || {
                let f =
                    |t: &mut TargetPackage| t.added_tokens.push((5, "<|MASK|>".to_owned(), true));
                expect(
                    f,
                    untouched,
                    TOKENIZER,
                    Outcome::Fail,
                    "id 5 is \"t5\" in model.vocab and \"<|MASK|>\" in added_tokens",
                    &[(MASK, Outcome::Undecided)],
                )
            },
        ),
        ("target_tokenizer::hostile::vocab_id_twice", || {
            not_a_tokenizer(
                r#"{"added_tokens": [], "model": {"vocab": {"a": 0, "b": 1, "c": 1}}}"#,
                "model.vocab lists id 1 twice, as \"b\" and as \"c\"",
            )
        }),
        ("target_tokenizer::hostile::float_id", || {
            not_a_tokenizer(
                r#"{"added_tokens": [], "model": {"vocab": {"a": 0, "b": 1.5}}}"#,
                "model.vocab[\"b\"] is 1.5, not a token id",
            )
        }),
        (
            "target_tokenizer::hostile::generation_config_not_json",
            || {
                expect(same, |d| write(d, "generation_config.json", "{\"eos_token_id\": "), MASK, Outcome::Undecided,
                "cannot decide whether it is a live token: the target's generation_config.json is not valid JSON", &[])
            },
        ),
        (
            "target_tokenizer::hostile::link_out_of_the_target",
            || match gate(same, |d| {
                let outside = d.parent().expect("parent").join("elsewhere.json");
                std::fs::rename(d.join("tokenizer.json"), &outside).expect("mv");
                std::os::unix::fs::symlink(&outside, d.join("tokenizer.json")).expect("link");
            })? {
                Ok(r) => Err(format!(
                    "the gate ran ({}) over a tokenizer.json outside the target",
                    r.verdict()
                )),
                Err(e)
                    if e.to_string().contains("tokenizer.json")
                        && e.to_string().contains("leads out of") =>
                {
                    Ok(())
                }
                Err(e) => Err(format!(
                    "expected a refusal naming tokenizer.json, got: {e}"
                )),
            },
        ),
    ]
}
