//! Hostile values that once compared equal after a wrapping cast or an f32 rounding (issue: exact
//! integers, bounded config integers, a finite positive `embedding_scale`).

use super::{arm, fail, with_manifest, Arm, Base, Expect};
use crate::defects::Scenario;
use dflash_gate::__private::dtype::Dtype;
use dflash_gate::__private::family::{Projection, Scalar};
use dflash_gate::Outcome;
use serde_json::json;
use std::path::Path;

/// The hostile-value arms, in a stable order.
pub fn all() -> Vec<Arm> {
    vec![
        // Container integers are exact: a negative one is refused as such, never cast to a huge u64.
        arm(
            "control::container_mask_token_i64_negative",
            Base::Small,
            mask_token_i64_minus_one,
            fail(
                "scalars.mask_token_id",
                &["dflash.mask_token_id holds -1", "cannot be negative"],
            ),
        ),
        arm(
            "control::container_tap_i32_negative",
            Base::Small,
            tap_i32_negative,
            fail(
                "scalars.target_layer_ids",
                &["dflash.target_layer_ids holds -1", "cannot be negative"],
            ),
        ),
        // Config integers are bounded: 2^64-1 no longer "equals" an I64 -1, and no size is unbounded.
        arm(
            "control::config_mask_token_wraps_to_minus_one",
            Base::Small,
            mask_token_wraps,
            Expect::Refused {
                check: "config.geometry",
                outcome: Outcome::Fail,
                mentions: &[
                    "mask_token_id is 18446744073709551615, beyond the gate's limit of 16777215",
                ],
                also: &[(
                    "scalars.mask_token_id",
                    Outcome::Fail,
                    "the container's I64 -1 is refused as negative on its own",
                )],
            },
        ),
        arm(
            "control::config_vocab_size_beyond_limit",
            Base::Small,
            vocab_beyond_limit,
            fail(
                "config.geometry",
                &["vocab_size is 18446744073709551615, beyond the gate's limit of 16777216"],
            ),
        ),
        arm(
            "control::config_num_target_layers_beyond_limit",
            Base::Small,
            target_layers_beyond_limit,
            fail(
                "config.geometry",
                &["num_target_layers is 5000, beyond the gate's limit of 1024"],
            ),
        ),
        arm(
            "control::config_hidden_size_thirty_digits",
            Base::Small,
            hidden_thirty_digits,
            fail(
                "config.geometry",
                &["hidden_size is 1.2345678901234568e+29, beyond the gate's limit of 1048576"],
            ),
        ),
        arm(
            "control::config_tap_beyond_limit",
            Base::Small,
            tap_beyond_limit,
            fail(
                "config.geometry",
                &["target_layer_ids[2] is 4096, beyond the gate's limit of 1023"],
            ),
        ),
        // embedding_scale is compared as the f32 it is stored as, and both must be finite and positive.
        arm(
            "control::embedding_scale_overflows_f32",
            Base::Small,
            scale_overflows,
            fail(
                "config.geometry",
                &[
                    "embedding_scale is 1e+39, which is inf as f32",
                    "not a finite positive f32",
                ],
            ),
        ),
        arm(
            "control::embedding_scale_underflows_f32",
            Base::Small,
            scale_underflows,
            fail(
                "config.geometry",
                &["which is 0 as f32", "not a finite positive f32"],
            ),
        ),
        arm(
            "control::container_embedding_scale_infinite",
            Base::Small,
            container_scale_infinite,
            fail(
                "scalars.embedding_scale",
                &["the container's value inf is not a finite positive f32"],
            ),
        ),
        arm(
            "control::container_embedding_scale_zero",
            Base::Small,
            container_scale_zero,
            fail(
                "scalars.embedding_scale",
                &["the container's value 0 is not a finite positive f32"],
            ),
        ),
        // A grid of zeros holds no weights: refused from its planes, and a large one without reading
        // its codes or most of its tiles.
        arm(
            "control::grid_all_zero",
            Base::Small,
            zero_grid,
            fail(
                "tiles.q4_1_signature",
                &["model.layers.0.self_attn.q_proj.weight: scale and minimum planes are zero in all 8 tiles read of 8"],
            ),
        ),
        arm(
            "control::large_grid_all_zero_refused_from_samples",
            Base::Bolt,
            zero_grid,
            Expect::Refused {
                check: "tiles.q4_1_signature",
                outcome: Outcome::Fail,
                mentions: &["model.layers.0.self_attn.q_proj.weight: scale and minimum planes are zero in all 32 tiles read of 1280"],
                also: &[
                    ("tiles.headers_sane", Outcome::Fail, "the sampled groups are refused as a grid of no weights, codes unread"),
                ],
            },
        ),
        // The manifest compares names as bytes and never follows a listed symlink out of the package.
        with_manifest(
            "control::manifest_look_alike_name_hides_an_unlisted_file",
            look_alike_names,
            fail("manifest.sha256", &["unlisted: notes\\xff.txt (a name that is not UTF-8)"]),
        ),
        with_manifest(
            "control::manifest_lists_a_symlink_out_of_the_package",
            symlink_out,
            fail("manifest.sha256", &["symlinks out of the package, not read: outside.txt"]),
        ),
    ]
}

/// A listed `notes\u{fffd}.txt` and an unlisted `notes\xff.txt`, equal under a lossy conversion.
fn look_alike_names(dir: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let listed = "notes\u{fffd}.txt";
    std::fs::write(dir.join(listed), b"listed").expect("write");
    let (hex, _) = dflash_gate::__private::manifest::hash_file(&dir.join(listed), &mut [0u8; 64])
        .expect("hash");
    append_line(dir, &format!("{hex}  {listed}"));
    std::fs::write(
        dir.join(std::ffi::OsStr::from_bytes(b"notes\xff.txt")),
        b"hidden",
    )
    .expect("write");
}

/// `outside.txt`, listed with the true digest of what it points to: a file outside the package.
fn symlink_out(dir: &Path) {
    let outside = dir.with_extension("outside");
    std::fs::write(&outside, b"not in the package").expect("write");
    std::os::unix::fs::symlink(&outside, dir.join("outside.txt")).expect("symlink");
    let (hex, _) =
        dflash_gate::__private::manifest::hash_file(&outside, &mut [0u8; 64]).expect("hash");
    append_line(dir, &format!("{hex}  outside.txt"));
}

fn append_line(dir: &Path, line: &str) {
    let path = dir.join("MANIFEST.sha256");
    let mut text = std::fs::read_to_string(&path).expect("manifest");
    text.push_str(line);
    text.push('\n');
    std::fs::write(path, text).expect("manifest");
}

fn zero_grid(s: &mut Scenario) {
    let t = s
        .package
        .tensor_mut(&crate::defects::proj(0, Projection::Q));
    t.data.fill(0);
}

fn set_ints(s: &mut Scenario, scalar: Scalar, dtype: Dtype, values: &[i64]) {
    let t = s.package.tensor_mut(&scalar.tensor_name());
    t.dtype = dtype;
    t.shape = vec![values.len() as u64];
    t.data = match dtype {
        Dtype::I64 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        _ => values
            .iter()
            .flat_map(|&v| (v as i32).to_le_bytes())
            .collect(),
    };
}

fn set_scale(s: &mut Scenario, value: f32) {
    let t = s.package.tensor_mut(&Scalar::EmbeddingScale.tensor_name());
    t.data = value.to_le_bytes().to_vec();
}

fn mask_token_i64_minus_one(s: &mut Scenario) {
    set_ints(s, Scalar::MaskTokenId, Dtype::I64, &[-1]);
}

fn tap_i32_negative(s: &mut Scenario) {
    set_ints(s, Scalar::TargetLayerIds, Dtype::I32, &[-1, 1, 5]);
}

fn mask_token_wraps(s: &mut Scenario) {
    // With no vocab_size to bound it, only the field's own limit stands between 2^64-1 and a PASS
    // against the container's I64 -1.
    s.config_mut().remove("vocab_size");
    s.config_mut()
        .insert("mask_token_id".into(), json!(u64::MAX));
    set_ints(s, Scalar::MaskTokenId, Dtype::I64, &[-1]);
}

fn vocab_beyond_limit(s: &mut Scenario) {
    s.config_mut().insert("vocab_size".into(), json!(u64::MAX));
}

fn target_layers_beyond_limit(s: &mut Scenario) {
    s.config_mut()
        .insert("num_target_layers".into(), json!(5000));
    set_ints(s, Scalar::NumTargetLayers, Dtype::I32, &[5000]);
}

fn hidden_thirty_digits(s: &mut Scenario) {
    let mut text = serde_json::to_string(&s.package.config).expect("json");
    let hidden = format!("\"hidden_size\":{}", s.package.config["hidden_size"]);
    assert!(text.contains(&hidden), "the config states hidden_size");
    text = text.replace(&hidden, "\"hidden_size\":123456789012345678901234567890");
    s.config_text = Some(text.into_bytes());
}

fn tap_beyond_limit(s: &mut Scenario) {
    s.config_mut()
        .insert("target_layer_ids".into(), json!([1, 3, 4096]));
    set_ints(s, Scalar::TargetLayerIds, Dtype::I32, &[1, 3, 4096]);
}

fn scale_overflows(s: &mut Scenario) {
    s.config_text = Some(config_with_raw(s, "embedding_scale", "1e39"));
    set_scale(s, f32::INFINITY);
}

fn scale_underflows(s: &mut Scenario) {
    s.config_text = Some(config_with_raw(s, "embedding_scale", "1e-50"));
    set_scale(s, 0.0);
}

fn container_scale_infinite(s: &mut Scenario) {
    set_scale(s, f32::INFINITY);
}

fn container_scale_zero(s: &mut Scenario) {
    set_scale(s, 0.0);
}

/// config.json with `key` set to `raw` written verbatim (a number serde_json would respell).
fn config_with_raw(s: &mut Scenario, key: &str, raw: &str) -> Vec<u8> {
    s.config_mut().insert(key.into(), json!("RAW"));
    let text = serde_json::to_string(&s.package.config).expect("json");
    text.replace(&format!("\"{key}\":\"RAW\""), &format!("\"{key}\":{raw}"))
        .into_bytes()
}
