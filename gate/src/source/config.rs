//! `source.config`: the source checkpoint's config against the package's (spec section 11.1).
//!
//! A checkpoint and the package converted from it are written by different programs for different
//! loaders: a released z-lab checkpoint says `model_type: "qwen3"` beside `architectures:
//! ["DFlashDraftModel"]`, a FastFlowLM package says `model_type: "dflash"`, and each keeps its own
//! bookkeeping. So what is compared is what defines the model, each field read the one canonical way
//! ([`Canonical`]): the family, the geometry, the RoPE, the attention layout and every DFlash field. A
//! field moved between its homes is no difference; a field stated differently always is. Everything
//! else either config states is named in the evidence as not compared, so silence is never read as
//! agreement.
//!
//! A compared field only one side states cannot be compared: UNDECIDED naming it and the side, unless
//! both loaders apply a default (which [`Canonical`] reads as the field). `is_causal` stated by one side
//! only is held against the other's per-layer default (causal exactly where a layer slides);
//! `sliding_window` is compared only where some layer slides.

use crate::config::canonical::{same, shown, Canonical, Reading};
use crate::report::Check;
use serde_json::{Map, Value};

pub const ID: &str = crate::check_id::CheckId::SOURCE_CONFIG;

fn parse(bytes: &[u8], whose: &str) -> Result<Map<String, Value>, String> {
    match crate::strict_json::parse(bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(format!("the {whose} config.json is not a JSON object")),
        Err(e) => Err(format!("the {whose} config.json is not valid JSON: {e}")),
    }
}

/// [`compare`] from the package config's bytes, for the tests of the comparison itself.
#[cfg(test)]
fn check(package: &[u8], source: &[u8]) -> Check {
    match parse(package, "package's") {
        Ok(package) => compare(&Canonical::read(&package), source),
        Err(why) => Check::fail(ID, why),
    }
}

/// What the comparison found, in the evidence's shape (against a checkpoint and a GGUF alike).
#[derive(Default)]
pub(super) struct Found {
    pub fields: Vec<String>,
    pub compared: Vec<String>,
    pub differing: Vec<String>,
    pub one_sided: Vec<String>,
    /// The remedy, when a difference has a known one (the ids written raw: convert again).
    pub fix: Option<String>,
}

/// The package's config (as the draft's reader read it) against the source's config.json.
pub fn compare(p: &Canonical, source: &[u8]) -> Check {
    let source = match parse(source, "source's") {
        Ok(s) => s,
        Err(why) => return Check::fail(ID, why),
    };
    let s = Canonical::read(&source);
    let mut found = Found::default();
    family(p, &s, &mut found);
    found.differing.extend(
        p.conflicts
            .iter()
            .map(|c| format!("the package's config: {c}"))
            .chain(
                s.conflicts
                    .iter()
                    .map(|c| format!("the source's config: {c}")),
            ),
    );
    let slides = p.slides() || s.slides();
    let mut names: Vec<&String> = p.fields.keys().chain(s.fields.keys()).collect();
    names.sort();
    names.dedup();
    let mut not_compared: Vec<String> = p.not_compared.union(&s.not_compared).cloned().collect();
    for name in names {
        if name == "sliding_window" && !slides {
            not_compared.push("sliding_window (no layer slides)".to_owned());
            continue;
        }
        found.fields.push(name.clone());
        match (p.fields.get(name), s.fields.get(name)) {
            (Some(a), Some(b)) => field(name, a, b, &mut found),
            (one, other) if name == "is_causal" => {
                causal(p, &s, one.is_some(), other.or(one), &mut found);
            }
            (Some(r), None) => found.one_sided.push(one_side(name, "package", r)),
            (None, Some(r)) => found.one_sided.push(one_side(name, "source", r)),
            (None, None) => {}
        }
    }
    not_compared.sort();
    not_compared.dedup();
    verdict(found, not_compared)
}

/// A compared field only one side has: stated there, or defaulted there while the other side's
/// default cannot be worked out.
fn one_side(name: &str, whose: &str, r: &Reading) -> String {
    if r.defaulted {
        format!("{name} (known for the {whose} only, by {})", r.at)
    } else {
        format!("{name} (stated by the {whose} only, in {})", r.at)
    }
}

/// The family each side declares: a source that is no draft, or a draft of the other family, is not
/// this package's checkpoint.
fn family(p: &Canonical, s: &Canonical, found: &mut Found) {
    found.fields.push("family".to_owned());
    match (&p.family, &s.family) {
        (Some(Ok(a)), Some(Ok(b))) if a == b => found.compared.push("family".to_owned()),
        (Some(Ok(a)), Some(Ok(b))) => found.differing.push(format!(
            "family: the package is a {} draft, the source a {} draft",
            a.name(),
            b.name()
        )),
        (_, Some(Err(why))) => found
            .differing
            .push(format!("family: the source's config is {why}")),
        (Some(Err(why)), _) => found
            .differing
            .push(format!("family: the package's config is {why}")),
        _ => {}
    }
}

fn field(name: &str, a: &Reading, b: &Reading, found: &mut Found) {
    if same(&a.value, &b.value) {
        found.compared.push(name.to_owned());
        return;
    }
    let place = |r: &Reading| {
        if r.at == name {
            String::new()
        } else {
            format!(" ({})", r.at)
        }
    };
    found.differing.push(format!(
        "{name}: package {}{}, source {}{}",
        shown(&a.value),
        place(a),
        shown(&b.value),
        place(b)
    ));
}

/// `is_causal` stated by one side (`stated`, whose it is by `by_package`): the other side's layers are
/// causal exactly where they slide, and every one of them must be what the stated value says.
fn causal(
    p: &Canonical,
    s: &Canonical,
    by_package: bool,
    stated: Option<&Reading>,
    found: &mut Found,
) {
    let Some(stated) = stated else { return };
    let (whose, other, silent) = if by_package {
        ("package", "source", s)
    } else {
        ("source", "package", p)
    };
    let Some(layers) = silent.causal_by_layer() else {
        found.one_sided.push(format!(
            "is_causal (stated by the {whose} only, and the {other}'s layer types cannot be read)"
        ));
        return;
    };
    match stated.value.as_bool() {
        Some(b) if layers.iter().all(|&l| l == b) => found.compared.push("is_causal".to_owned()),
        _ => found.differing.push(format!(
            "is_causal: the {whose} states {}, the {other} states none, so its layers are causal where they slide: {layers:?}",
            shown(&stated.value)
        )),
    }
}

fn verdict(found: Found, not_compared: Vec<String>) -> Check {
    let note = if not_compared.is_empty() {
        String::new()
    } else {
        format!(
            "; not compared (identity and bookkeeping, which a checkpoint and its package state differently): {}",
            not_compared.join(", ")
        )
    };
    let evidence = crate::evidence::SourceConfig {
        fields: found.fields,
        compared: found.compared.clone(),
        differing: found.differing.clone(),
        one_sided: found.one_sided.clone(),
        skipped: not_compared,
        undecided: None,
    };
    let check = if !found.differing.is_empty() {
        Check::fail(
            ID,
            format!(
                "the source's config differs from the package's: {}{note}",
                found.differing.join("; ")
            ),
        )
    } else if !found.one_sided.is_empty() {
        Check::undecided(
            ID,
            format!(
                "cannot decide: {} stated by one config only: {}{note}",
                match found.one_sided.len() {
                    1 => "a compared field is".to_owned(),
                    n => format!("{n} compared fields are"),
                },
                found.one_sided.join("; ")
            ),
        )
    } else {
        Check::pass(
            ID,
            format!(
                "the source's config agrees with the package's on every compared field ({}), numbers by value{note}",
                found.compared.len()
            ),
        )
    };
    check.with_evidence(evidence)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Outcome;
    use serde_json::json;

    /// `c` has `outcome` and its message holds every one of `says`.
    fn says(c: &Check, outcome: Outcome, says: &[&str]) {
        assert_eq!(c.outcome, outcome, "{}", c.message);
        for s in says {
            assert!(c.message.contains(s), "{s}: {}", c.message);
        }
    }

    /// A released checkpoint's config: `model_type: "qwen3"`, the DFlash fields nested.
    fn checkpoint() -> Value {
        json!({
            "architectures": ["DFlashDraftModel"], "model_type": "qwen3",
            "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
            "vocab_size": 1000, "rms_norm_eps": 1e-6, "hidden_act": "silu",
            "attention_bias": false, "max_position_embeddings": 40960,
            "rope_theta": 1000000, "rope_scaling": null, "sliding_window": null,
            "num_target_layers": 8, "block_size": 8,
            "dflash_config": {"target_layer_ids": [1, 3], "mask_token_id": 999},
            "transformers_version": "4.57.1", "dtype": "bfloat16", "use_cache": true,
            "bos_token_id": 1, "eos_token_id": 2, "initializer_range": 0.02,
            "max_window_layers": 2, "use_sliding_window": false, "tie_word_embeddings": false
        })
    }

    /// The package converted from it, as a converter writes one: `model_type: "dflash"`, the DFlash
    /// fields at the top level, the RoPE base in Transformers 5's home, its own bookkeeping.
    fn package() -> Value {
        json!({
            "architectures": ["DFlashDraftModel"], "model_type": "dflash",
            "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "intermediate_size": 128,
            "vocab_size": 1000, "rms_norm_eps": 0.000001, "hidden_act": "silu",
            "attention_bias": false, "max_position_embeddings": 40960,
            "rope_parameters": {"rope_theta": 1e6, "rope_type": "default"},
            "num_target_layers": 8, "block_size": 8.0,
            "target_layer_ids": [1, 3], "mask_token_id": 999,
            "layer_types": ["full_attention", "full_attention"],
            "quantization_config": {"bits": 4}, "torch_dtype": "bfloat16"
        })
    }

    /// A change to one config's top-level object.
    type Edit = dyn Fn(&mut Map<String, Value>);

    fn with(v: Value, edit: impl FnOnce(&mut Map<String, Value>)) -> Vec<u8> {
        let mut v = v;
        edit(v.as_object_mut().expect("object"));
        v.to_string().into_bytes()
    }

    #[test]
    fn a_faithful_pair_written_by_different_tools_agrees() {
        let c = check(&with(package(), |_| {}), &with(checkpoint(), |_| {}));
        says(
            &c,
            Outcome::Pass,
            &[
                "agrees with the package's on every compared field",
                "not compared",
                "model_type",
                "transformers_version",
                "eos_token_id",
            ],
        );
        // The same pair, the other family on both sides, with the DFlash2 fields moved about.
        let second = |v: Value, nested: bool| {
            with(v, |m| {
                m.insert("architectures".into(), json!(["DFlash2DraftModel"]));
                let pair = json!({"conv_kernel_size": 4, "conv_group_size": 16});
                if nested {
                    m["dflash_config"]
                        .as_object_mut()
                        .expect("object")
                        .extend(pair.as_object().cloned().expect("object"));
                } else {
                    m.extend(pair.as_object().cloned().expect("object"));
                }
            })
        };
        says(
            &check(&second(package(), false), &second(checkpoint(), true)),
            Outcome::Pass,
            &[],
        );
    }

    #[test]
    fn a_compared_field_that_differs_fails_naming_it_and_where_it_was_read() {
        let edits: [(&Edit, &str); 7] = [
            (
                &|m| drop(m.insert("rope_theta".into(), json!(500000))),
                "rope_theta: package 1000000.0 (rope_parameters.rope_theta), source 500000",
            ),
            (
                &|m| drop(m.insert("hidden_act".into(), json!("gelu"))),
                r#"hidden_act: package "silu", source "gelu""#,
            ),
            (
                &|m| m["dflash_config"]["target_layer_ids"] = json!([1, 4]),
                "target_layer_ids: package [1,3], source [1,4] (dflash_config.target_layer_ids)",
            ),
            (
                &|m| {
                    drop(m.insert(
                        "rope_scaling".into(),
                        json!({"rope_type": "yarn", "factor": 4.0}),
                    ))
                },
                r#"rope.rope_type: package "default" (rope_parameters.rope_type), source "yarn" (rope_scaling.rope_type)"#,
            ),
            (
                &|m| {
                    drop(m.insert(
                        "layer_types".into(),
                        json!(["sliding_attention", "full_attention"]),
                    ))
                },
                "layer_types: package",
            ),
            (
                &|m| drop(m.insert("architectures".into(), json!(["DFlash2DraftModel"]))),
                "family: the package is a DFlash draft, the source a DFlash2 draft",
            ),
            (
                &|m| drop(m.remove("architectures")),
                "family: the source's config is not a DFlash draft",
            ),
        ];
        for (edit, named) in edits {
            says(
                &check(&with(package(), |_| {}), &with(checkpoint(), edit)),
                Outcome::Fail,
                &[named],
            );
        }
    }

    #[test]
    fn a_field_on_the_not_compared_list_may_differ_and_is_named() {
        let c = check(
            &with(package(), |m| {
                drop(m.insert("transformers_version".into(), json!("5.1.0")))
            }),
            &with(checkpoint(), |m| {
                m.insert("model_type".into(), json!("llama"));
                m.insert("eos_token_id".into(), json!([2, 3]));
                m.insert(
                    "auto_map".into(),
                    json!({"AutoModel": "dflash.DFlashDraftModel"}),
                );
            }),
        );
        says(
            &c,
            Outcome::Pass,
            &[
                "auto_map",
                "eos_token_id",
                "model_type",
                "quantization_config",
                "transformers_version",
            ],
        );
        let crate::evidence::Evidence::SourceConfig(e) = &**c.evidence.as_ref().expect("evidence")
        else {
            panic!("not source.config evidence")
        };
        assert!(
            e.skipped.iter().any(|s| s == "model_type"),
            "{:?}",
            e.skipped
        );
        assert!(e.compared.iter().any(|s| s == "family"), "{:?}", e.compared);
    }

    #[test]
    fn a_field_one_side_states_is_undecided_unless_both_loaders_default_it() {
        let c = check(
            &with(package(), |m| drop(m.remove("vocab_size"))),
            &with(checkpoint(), |_| {}),
        );
        says(
            &c,
            Outcome::Undecided,
            &["vocab_size (stated by the source only, in vocab_size)"],
        );
        // head_dim derived, layer_types all full, is_causal from them: defaults both loaders apply.
        let c = check(
            &with(package(), |m| {
                m.remove("layer_types");
                m.insert("is_causal".into(), json!(false));
                m.insert("head_dim".into(), json!(16));
            }),
            &with(checkpoint(), |m| drop(m.remove("head_dim"))),
        );
        says(&c, Outcome::Pass, &[]);
        let c = check(
            &with(package(), |m| {
                drop(m.insert("is_causal".into(), json!(true)))
            }),
            &with(checkpoint(), |_| {}),
        );
        says(
            &c,
            Outcome::Fail,
            &["is_causal: the package states true, the source states none"],
        );
    }

    #[test]
    fn a_field_in_two_homes_may_move_but_not_disagree() {
        let c = check(
            &with(package(), |_| {}),
            &with(checkpoint(), |m| {
                drop(m.insert("target_layer_ids".into(), json!([1, 3])))
            }),
        );
        says(&c, Outcome::Pass, &[]);
        let c = check(
            &with(package(), |_| {}),
            &with(checkpoint(), |m| {
                drop(m.insert("mask_token_id".into(), json!(5)))
            }),
        );
        says(&c, Outcome::Fail, &["the source's config: mask_token_id: stated as 999 in dflash_config.mask_token_id and as 5 in mask_token_id"]);
    }

    #[test]
    fn sliding_window_counts_only_where_a_layer_slides() {
        let c = check(
            &with(package(), |m| {
                drop(m.insert("sliding_window".into(), json!(4096)))
            }),
            &with(checkpoint(), |_| {}),
        );
        says(&c, Outcome::Pass, &["sliding_window (no layer slides)"]);
        let slide = |v: Value, w: Value| {
            with(v, |m| {
                m.insert(
                    "layer_types".into(),
                    json!(["sliding_attention", "full_attention"]),
                );
                m.insert("sliding_window".into(), w);
            })
        };
        says(
            &check(
                &slide(package(), json!(2048)),
                &slide(checkpoint(), json!(2048)),
            ),
            Outcome::Pass,
            &[],
        );
        says(
            &check(
                &slide(package(), json!(2048)),
                &slide(checkpoint(), json!(4096)),
            ),
            Outcome::Fail,
            &["sliding_window: package 2048, source 4096"],
        );
    }

    #[test]
    fn numbers_compare_by_value() {
        let c = check(
            &with(package(), |m| {
                drop(m.insert("vocab_size".into(), json!(9007199254740993u64)))
            }),
            &with(checkpoint(), |m| {
                drop(m.insert("vocab_size".into(), json!(9007199254740992.0)))
            }),
        );
        says(&c, Outcome::Fail, &["vocab_size: package 9007199254740993"]);
        let c = check(
            &with(package(), |m| {
                drop(m.insert("rms_norm_eps".into(), json!("1e-6")))
            }),
            &with(checkpoint(), |_| {}),
        );
        says(&c, Outcome::Fail, &["rms_norm_eps"]);
        assert_eq!(check(&with(package(), |_| {}), b"{").outcome, Outcome::Fail);
        // A float compares as the f32 the engines hold: the f32 of 1e-6 is 1e-6; 2e-6 is not.
        let eps = |v: f64| {
            check(
                &with(package(), |m| {
                    drop(m.insert("rms_norm_eps".into(), json!(v)))
                }),
                &with(checkpoint(), |_| {}),
            )
        };
        says(&eps(f64::from(1e-6f32)), Outcome::Pass, &[]);
        says(
            &eps(2e-6),
            Outcome::Fail,
            &["rms_norm_eps: package 2e-6, source 1e-6"],
        );
    }

    #[test]
    fn rope_scaling_beside_rope_parameters_is_named_not_read() {
        let c = check(
            &with(package(), |_| {}),
            &with(checkpoint(), |m| {
                m.remove("rope_theta");
                m.insert(
                    "rope_parameters".into(),
                    json!({"rope_theta": 1e6, "rope_type": "default"}),
                );
                m.insert("rope_scaling".into(), json!({"factor": 4.0}));
            }),
        );
        says(
            &c,
            Outcome::Pass,
            &["rope_scaling.factor (rope_parameters is read)"],
        );
    }
}
