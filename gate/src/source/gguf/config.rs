//! `source.config` against a GGUF: the metadata keys of section 12.2 against the package's config.
//! Integers compare by value whatever integer type the file stores them in; floats as f32 (a GGUF
//! stores f32, a config a decimal). A required key the file lacks is a FAIL naming it; a key the
//! file states and the config does not cannot be compared (UNDECIDED, unless another differs). The
//! config's fields are read canonically ([`Canonical`]: the RoPE base in either home, the DFlash
//! fields in `dflash_config` or at the top level).
//!
//! The keys follow llama.cpp's converter (`conversion/qwen.py`, `DFlashModel`): `target_layers`
//! holds every HF id plus one (the input of layer id + 1, which is the output of layer id, what the id
//! means), and the mask id is `tokenizer.ggml.mask_token_id` (older writers: `{a}.mask_token_id`).
//! A file holding the ids themselves is read by llama.cpp one layer early at every tap: a FAIL that
//! says so.

use crate::config::canonical::Canonical;
use crate::config::DraftConfig;
use crate::escape::escape;
use crate::gguf::{Header, Value};
use crate::report::Check;
use crate::source::config::Found;

/// What a key's counterpart in the package config is.
enum Package {
    Integer(u64),
    Float(f64),
    /// The config does not state it (or states it unreadably, as config.geometry says).
    Absent(String),
}

/// A key after `{a}.`, the config field it is compared with, whether the file must have it.
const KEYS: [(&str, &str, bool); 17] = [
    ("block_count", "num_hidden_layers", true),
    ("embedding_length", "hidden_size", true),
    ("feed_forward_length", "intermediate_size", true),
    ("attention.head_count", "num_attention_heads", true),
    ("attention.head_count_kv", "num_key_value_heads", true),
    ("attention.key_length", "head_dim", false),
    ("attention.value_length", "head_dim", false),
    ("attention.layer_norm_rms_epsilon", "rms_norm_eps", false),
    ("rope.freq_base", "rope_theta", false),
    ("context_length", "max_position_embeddings", false),
    ("vocab_size", "vocab_size", false),
    ("block_size", "block_size", false),
    ("target_hidden_size", "hidden_size", false),
    // DFlash2's keys (spec 18.3), against the config's fields of the same names.
    ("conv_kernel_size", "conv_kernel_size", false),
    ("conv_group_size", "conv_group_size", false),
    ("selector_rank", "selector_rank", false),
    ("selector_top_k", "selector_top_k", false),
];

fn stated<T: Copy>(field: &str, value: &crate::config::Field<T>, name: &str) -> Result<T, String> {
    value
        .as_ref()
        .copied()
        .map_err(|_| format!("the {name} has no readable {field}"))
}

fn optional(field: &str, value: &crate::config::Field<Option<u64>>, name: &str) -> Package {
    match stated(field, value, name) {
        Ok(Some(v)) => Package::Integer(v),
        Ok(None) => Package::Absent(format!("the {name} does not state {field}")),
        Err(why) => Package::Absent(why),
    }
}

/// A field the draft reader does not read itself, read canonically.
fn from_json(canonical: &Canonical, field: &str, float: bool, name: &str) -> Package {
    match canonical.fields.get(field).map(|r| &r.value) {
        None => Package::Absent(format!("the {name} does not state {field}")),
        Some(v) if float => v.as_f64().map_or_else(
            || Package::Absent(format!("the {name}'s {field} is not a number")),
            Package::Float,
        ),
        Some(v) => v.as_u64().map_or_else(
            || Package::Absent(format!("the {name}'s {field} is not a whole number")),
            Package::Integer,
        ),
    }
}

fn package_value(config: &DraftConfig, canonical: &Canonical, field: &str, name: &str) -> Package {
    let integer = |r: Result<u64, String>| r.map_or_else(Package::Absent, Package::Integer);
    match field {
        "num_hidden_layers" => integer(stated(field, &config.num_hidden_layers, name)),
        "hidden_size" => integer(stated(field, &config.hidden_size, name)),
        "intermediate_size" => integer(stated(field, &config.intermediate_size, name)),
        "num_attention_heads" => integer(stated(field, &config.num_attention_heads, name)),
        "num_key_value_heads" => integer(stated(field, &config.num_key_value_heads, name)),
        "head_dim" => integer(stated(field, &config.head_dim, name).map(|(d, _)| d)),
        "block_size" => integer(stated(field, &config.block_size, name)),
        "vocab_size" => optional(field, &config.vocab_size, name),
        "mask_token_id" => optional(field, &config.mask_token_id, name),
        "rms_norm_eps" | "rope_theta" => from_json(canonical, field, true, name),
        _ => from_json(canonical, field, false, name),
    }
}

pub fn compare(config: &DraftConfig, header: &Header, name: &str) -> Check {
    let mut found = Found::default();
    let canonical = &config.canonical;
    // A field the package's config states twice, differently, is read as neither: named, as it is
    // against a checkpoint, never mistaken for a field the config does not state.
    found.differing.extend(
        canonical
            .conflicts
            .iter()
            .map(|c| format!("the {name}: {c}")),
    );
    let arch_key = "general.architecture";
    found.fields.push(arch_key.to_owned());
    let arch = header.architecture();
    match arch {
        Some("dflash") => found.compared.push(arch_key.to_owned()),
        Some(other) => found
            .differing
            .push(format!("{arch_key} is \"{}\", not dflash", escape(other))),
        None => found.differing.push(format!(
            "{arch_key} is absent or not a string (required: dflash)"
        )),
    }
    // The keys are the file's own architecture's, whatever it is: read as it wrote them.
    let prefix = arch.unwrap_or("dflash");
    let mask = mask_key(header, prefix, &mut found);
    if mask.is_none() {
        lost(
            config,
            "mask_token_id",
            "tokenizer.ggml.mask_token_id",
            &mut found,
            name,
        );
    }
    let keys = KEYS
        .iter()
        .map(|&(key, field, required)| (format!("{prefix}.{key}"), field, required))
        .chain(mask.map(|key| (key, "mask_token_id", false)));
    for (key, field, required) in keys {
        let Some(kept) = header.get(&key) else {
            if required {
                found.fields.push(escape(&key).into_owned());
                found.differing.push(format!(
                    "{} is absent (required: the package's {field})",
                    escape(&key)
                ));
            }
            continue;
        };
        let key = escape(&key).into_owned();
        found.fields.push(key.clone());
        let package = package_value(config, canonical, field, name);
        let gguf = match &kept.value {
            Value::Integer(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        };
        let Some(g) = gguf else {
            found.differing.push(format!(
                "{key} is a {} ({}), not a number",
                kept.ty,
                describe(&kept.value)
            ));
            continue;
        };
        match (package, &kept.value) {
            (Package::Absent(why), _) => found
                .one_sided
                .push(format!("{key} (stated by the GGUF only: {why})")),
            (Package::Integer(p), Value::Integer(g)) => {
                if *g == i128::from(p) {
                    found.compared.push(key);
                } else {
                    found
                        .differing
                        .push(format!("{key}: GGUF {g}, package {field} {p}"));
                }
            }
            (Package::Integer(p), _) => found.differing.push(format!(
                "{key} is a {} ({g}), the package's {field} the integer {p}",
                kept.ty
            )),
            (Package::Float(p), _) => {
                // As f32, so that a config's decimal and the file's f32 of it are one value; a NaN
                // equals nothing.
                if (g as f32) == (p as f32) {
                    found.compared.push(key);
                } else {
                    found.differing.push(format!(
                        "{key}: GGUF {}, package {field} {} (as f32)",
                        g as f32, p as f32
                    ));
                }
            }
        }
    }
    // A DFlash2 folder converted without its features' keys is a first-family file: each feature
    // field the config states and the file lost is a difference.
    for field in crate::gguf::DFLASH2_KEYS {
        let key = format!("{prefix}.{field}");
        if header.get(&key).is_none() {
            lost(config, field, &escape(&key), &mut found, name);
        }
    }
    target_layers(config, header, prefix, &mut found, name);
    rope_scaling(canonical, header, prefix, &mut found, name);
    // Fields a config states that no key of the file holds: named, so that silence is never read
    // as agreement.
    let skipped: Vec<String> = UNSTATED
        .iter()
        .filter(|f| canonical.fields.contains_key(**f))
        .map(|f| (*f).to_owned())
        .collect();
    verdict(found, skipped, name)
}

/// Config fields the source comparison compares between configs that llama.cpp's DFlash GGUF has
/// no key for.
const UNSTATED: [&str; 9] = [
    "hidden_act",
    "attention_bias",
    "sliding_window",
    "layer_types",
    "is_causal",
    "num_target_layers",
    "embedding_scale",
    "output_multiplier",
    "final_logit_softcapping",
];

/// The RoPE scaling: `{a}.rope.scaling.type` (absent or "none" is no scaling, the config's
/// `default`) against `rope.rope_type`, and, where either states one, the factor and the original
/// context against `rope.factor` and `rope.original_max_position_embeddings`. A draft whose
/// positions scale one way in the file and another in its config rotates every query differently.
fn rope_scaling(
    canonical: &Canonical,
    header: &Header,
    prefix: &str,
    found: &mut Found,
    name: &str,
) {
    let type_key = format!("{prefix}.rope.scaling.type");
    let gguf_type = match header.get(&type_key).map(|k| &k.value) {
        None => "default".to_owned(),
        Some(Value::String(s)) if s == "none" => "default".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            found.fields.push(escape(&type_key).into_owned());
            found.differing.push(format!(
                "{} is {}, not a scaling type",
                escape(&type_key),
                describe(other)
            ));
            return;
        }
    };
    let package_type = canonical
        .fields
        .get("rope.rope_type")
        .and_then(|r| r.value.as_str())
        .unwrap_or("default");
    found.fields.push(escape(&type_key).into_owned());
    // llama.cpp writes these four as a type; another (llama3's, say, which it keeps as a
    // `rope_freqs` tensor) has no key to hold it to.
    if !["default", "linear", "yarn", "longrope"].contains(&package_type) {
        found.one_sided.push(format!(
            "the {name}'s rope.rope_type {package_type:?} (llama.cpp states no such scaling type in {})",
            escape(&type_key)
        ));
        return;
    }
    if gguf_type != package_type {
        found.differing.push(format!(
            "{}: GGUF {:?}{}, the {name}'s rope.rope_type {package_type:?}",
            escape(&type_key),
            escape(&gguf_type),
            if header.get(&type_key).is_none() {
                " (absent: no scaling)"
            } else {
                ""
            }
        ));
        return;
    }
    found.compared.push(escape(&type_key).into_owned());
    for (key, field) in [
        ("rope.scaling.factor", "rope.factor"),
        (
            "rope.scaling.original_context_length",
            "rope.original_max_position_embeddings",
        ),
    ] {
        let key = format!("{prefix}.{key}");
        let gguf = header.get(&key).map(|k| match k.value {
            Value::Integer(i) => Some(i as f64),
            Value::Float(f) => Some(f),
            _ => None,
        });
        let package = canonical.fields.get(field).map(|r| r.value.as_f64());
        let shown = escape(&key).into_owned();
        match (gguf, package) {
            (None, None) => continue,
            (Some(Some(g)), Some(Some(p))) if (g as f32) == (p as f32) => {
                found.fields.push(shown.clone());
                found.compared.push(shown);
            }
            (Some(Some(g)), Some(Some(p))) => {
                found.fields.push(shown.clone());
                found
                    .differing
                    .push(format!("{shown}: GGUF {g}, the {name}'s {field} {p}"));
            }
            (Some(_), None) => {
                found.fields.push(shown.clone());
                found.one_sided.push(format!(
                    "{shown} (stated by the GGUF only: the {name} does not state {field})"
                ));
            }
            (None, Some(_)) => {
                found.fields.push(shown.clone());
                found.one_sided.push(format!(
                    "{field} (stated by the {name} only: the GGUF has no {shown})"
                ));
            }
            _ => {
                found.fields.push(shown.clone());
                found
                    .differing
                    .push(format!("{shown} or the {name}'s {field} is not a number"));
            }
        }
    }
}

/// The key that holds the mask id: `tokenizer.ggml.mask_token_id` (llama.cpp's converter), else the
/// older `{a}.mask_token_id`. A file stating both with different values says two things: named.
fn mask_key(header: &Header, prefix: &str, found: &mut Found) -> Option<String> {
    let current = "tokenizer.ggml.mask_token_id".to_owned();
    let older = format!("{prefix}.mask_token_id");
    match (header.get(&current), header.get(&older)) {
        (Some(a), Some(b)) if a.value != b.value => {
            found.fields.push(escape(&older).into_owned());
            found.differing.push(format!(
                "{current} is {} but {} is {}: the file states two mask ids",
                describe(&a.value),
                escape(&older),
                describe(&b.value)
            ));
            Some(current)
        }
        (Some(_), _) => Some(current),
        (None, Some(_)) => Some(older),
        (None, None) => None,
    }
}

/// A DFlash field the config states and the file has no key for: the converter dropped it (llama.cpp's
/// reads `dflash_config` only, so an older config's top-level ids are lost), and the file is no
/// conversion of this config. A difference, never an agreement over a field not compared.
fn lost(config: &DraftConfig, field: &str, key: &str, found: &mut Found, name: &str) {
    let Some(reading) = config.canonical.fields.get(field).filter(|r| !r.defaulted) else {
        return;
    };
    found.fields.push(key.to_owned());
    found.differing.push(format!(
        "{key} is absent, but the {name} states {field} {} (at {}): the converter dropped it; convert again from a config that states it in dflash_config",
        crate::config::canonical::shown(&reading.value),
        reading.at
    ));
}

fn describe(v: &Value) -> String {
    match v {
        Value::String(s) => format!("\"{}\"", escape(s)),
        Value::Bool(b) => b.to_string(),
        Value::Array { element, count, .. } => format!("an array of {count} {element}"),
        Value::Integer(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
    }
}

/// `{a}.target_layers` against `target_layer_ids`: every one plus one (llama.cpp's convention), the
/// ids themselves (read one layer early), or something else.
fn target_layers(
    config: &DraftConfig,
    header: &Header,
    prefix: &str,
    found: &mut Found,
    name: &str,
) {
    let key = escape(&format!("{prefix}.target_layers")).into_owned();
    let Some(kept) = header.get(&format!("{prefix}.target_layers")) else {
        lost(config, "target_layer_ids", &key, found, name);
        return;
    };
    found.fields.push(key.clone());
    let Ok(taps) = &config.target_layer_ids else {
        found.one_sided.push(format!(
            "{key} (stated by the GGUF only: the {name} has no readable target_layer_ids)"
        ));
        return;
    };
    let Value::Array {
        integers: Some(layers),
        ..
    } = &kept.value
    else {
        found.differing.push(format!(
            "{key} is {}, not an array of layer ids",
            describe(&kept.value)
        ));
        return;
    };
    let same = |offset: i128| {
        layers.len() == taps.len()
            && layers
                .iter()
                .zip(taps.iter())
                .all(|(&l, &t)| l == i128::from(t) + offset)
    };
    let plus_one: Vec<i128> = taps.iter().map(|&t| i128::from(t) + 1).collect();
    if same(1) {
        found.compared.push(key);
    } else if same(0) {
        found.differing.push(format!(
            "{key} is {layers:?}, the package's target_layer_ids themselves: llama.cpp reads {key} as each id plus one (the input of layer id + 1, the output of layer id), so it would read the layer before every tap; its converter writes {plus_one:?}"
        ));
        found.fix = Some(
            "convert the draft again with llama.cpp's convert_hf_to_gguf.py (with --target-model-dir naming its target), which writes each id plus one".to_owned(),
        );
    } else {
        found.differing.push(format!(
            "{key}: GGUF {layers:?}, package target_layer_ids {taps:?} (llama.cpp's converter writes each plus one: {plus_one:?})"
        ));
    }
}

fn verdict(found: Found, skipped: Vec<String>, name: &str) -> Check {
    let not_compared = if skipped.is_empty() {
        String::new()
    } else {
        format!(
            "; not compared, as no key of the file states them: {}",
            skipped.join(", ")
        )
    };
    let evidence = crate::evidence::SourceConfig {
        fields: found.fields.clone(),
        compared: found.compared.clone(),
        differing: found.differing.clone(),
        one_sided: found.one_sided.clone(),
        skipped,
        // Nothing is left undecided by its value since `target_layers` plus one is agreement; the
        // list stays in the document's shape.
        undecided: Some(Vec::new()),
    };
    let id = super::super::CONFIG;
    if !found.differing.is_empty() {
        let check = Check::fail(
            id,
            format!(
                "the GGUF's metadata differs from the {name}: {}",
                found.differing.join("; ")
            ),
        )
        .with_evidence(evidence);
        return match found.fix {
            Some(fix) => check.with_fix(fix),
            None => check,
        };
    }
    if !found.one_sided.is_empty() {
        return Check::undecided(
            id,
            format!(
                "cannot decide: {}{not_compared}",
                found.one_sided.join("; ")
            ),
        )
        .with_evidence(evidence);
    }
    Check::pass(
        id,
        format!(
            "the GGUF's metadata equals the {name}: {} keys compared ({}){not_compared}",
            found.compared.len(),
            found.compared.join(", ")
        ),
    )
    .with_evidence(evidence)
}
