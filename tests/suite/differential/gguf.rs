//! Our GGUF reader and dequantization against gguf-py's (`GGUFReader`, `gguf.quants.dequantize`), on
//! the generator's GGUFs (each variant) and on a file of random blocks of every type we dequantize:
//! the same tensors (names, types, dimensions, offsets, sizes), the same kept metadata, and the same
//! values bit for bit (a NaN's payload aside); and on 600 broken copies of a GGUF, every one gguf-py
//! refuses is refused by us too. Two trials more: the K-quants we dequantize (Q4_K, Q5_K, Q6_K) on
//! random super-blocks, bit for bit; and our type table against gguf-py's `GGML_QUANT_SIZES`.
//!
//! Needs `DFLASH_GATE_PYTHON` with the `gguf` package (`pip install gguf==0.19.0 numpy==2.3.5`);
//! without it each trial is listed as ignored, with the reason in its name.

use super::PYTHON_VAR;
use dflash_gate::__private::gguf::{
    dequantize, dequantize_k_quant, k_quant, parse, GgmlType, Header, Value as Kept,
};
use gate_tests::synth::gguf::{gguf_for, GgufFile, GgufOptions};
use gate_tests::synth::{Encoding, Geometry, Package};
use libtest_mimic::{Failed, Trial};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

type Compare = fn(&Path) -> Result<(), String>;

/// The trials, by name: each run with the Python of `DFLASH_GATE_PYTHON`, or listed as ignored with
/// why in its name when there is no such Python or it has no `gguf` package.
pub fn trials() -> Vec<Trial> {
    let all: [(&str, Compare); 4] = [
        ("gguf_reference", compare_all),
        ("gguf_k_quants", compare_k_quants),
        ("gguf_quant_sizes", compare_quant_sizes),
        ("gguf_drafts_written_by_gguf_py", written_by_gguf_py),
    ];
    let python = std::env::var_os(PYTHON_VAR).map(PathBuf::from);
    let missing = match &python {
        None => Some("needs_DFLASH_GATE_PYTHON"),
        Some(python) => {
            let has_gguf = Command::new(python)
                .args(["-c", "import gguf"])
                .output()
                .is_ok_and(|o| o.status.success());
            (!has_gguf).then_some("needs_the_gguf_package_in_DFLASH_GATE_PYTHON")
        }
    };
    all.into_iter()
        .map(|(name, compare)| match (&python, missing) {
            (Some(python), None) => {
                let python = python.clone();
                Trial::test(format!("differential::{name}"), move || {
                    compare(&python).map_err(Failed::from)
                })
            }
            (_, reason) => Trial::test(
                format!(
                    "differential::{name}_{}",
                    reason.unwrap_or("needs_DFLASH_GATE_PYTHON")
                ),
                || Ok(()),
            )
            .with_ignored_flag(true),
        })
        .collect()
}

fn compare_all(python: &Path) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut files: Vec<(String, GgufFile)> = Vec::new();
    for (name, options) in [
        ("q4_1", GgufOptions::default()),
        (
            "f16_gains_f32_fc_aligned_64",
            GgufOptions {
                gains: GgmlType::F16,
                fc: GgmlType::F32,
                alignment: 64,
                ..GgufOptions::default()
            },
        ),
        (
            "q8_0",
            GgufOptions {
                matrices: GgmlType::Q8_0,
                ..GgufOptions::default()
            },
        ),
    ] {
        let mut package = Package::generate(&Geometry::small(), Encoding::default(), 21);
        let file = gguf_for(&mut package, options, 21).map_err(|e| e.to_string())?;
        files.push((name.to_owned(), file));
    }
    let micro = {
        let mut package = Package::generate(&Geometry::micro(), Encoding::default(), 21);
        gguf_for(&mut package, GgufOptions::default(), 21).map_err(|e| e.to_string())?
    };
    verdicts(python, dir.path(), &micro.bytes())?;
    files.push(("random blocks".to_owned(), random_blocks()));
    for (i, (name, file)) in files.iter().enumerate() {
        read_by_both(python, dir.path(), &i.to_string(), file)
            .map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

/// Writes `file` as `{stem}.gguf` in `dir`, has gguf-py read and dequantize it, and compares.
fn read_by_both(python: &Path, dir: &Path, stem: &str, file: &GgufFile) -> Result<(), String> {
    let bytes = file.bytes();
    let path = dir.join(format!("{stem}.gguf"));
    std::fs::write(&path, &bytes).map_err(|e| e.to_string())?;
    let out = dir.join(format!("{stem}.values"));
    std::fs::create_dir(&out).map_err(|e| e.to_string())?;
    let header = parse(&bytes).map_err(|e| e.to_string())?;
    compare(python, &path, &out, &header, &bytes)
}

/// Q4_K, Q5_K and Q6_K: 48 super-blocks each of random bytes (scales of every kind: subnormal,
/// infinite, NaN, and every code), then 48 whose `d` and `dmin` are random finite halves between
/// -4 and 4, dequantized by us and by gguf-py's numpy: the same values bit for bit.
fn compare_k_quants(python: &Path) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let types = [GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K];
    let random = random_file(&types, [1024, 12], 0x4b51, false);
    read_by_both(python, dir.path(), "random", &random)
        .map_err(|e| format!("random scales: {e}"))?;
    let finite = random_file(&types, [1024, 12], 0x4b52, true);
    read_by_both(python, dir.path(), "finite", &finite).map_err(|e| format!("finite scales: {e}"))
}

/// Our type table against gguf-py's `GGML_QUANT_SIZES`, type by type (id, elements per block, bytes
/// per block), where ggml and gguf-py agree. Where they do not, ours is ggml's, and the difference
/// is named here so that a gguf-py that changes it turns this red: Q8_1, 40 bytes in gguf-py (its
/// `d` and `s` as floats), 36 in ggml; and Q2_0, a type gguf-py 0.19.0 does not have.
fn compare_quant_sizes(python: &Path) -> Result<(), String> {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/differential/gguf_reference.py");
    let run = Command::new(python)
        .arg(&script)
        .arg("--quant-sizes")
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !run.status.success() {
        return Err(String::from_utf8_lossy(&run.stderr).into_owned());
    }
    let theirs: Value = serde_json::from_slice(&run.stdout).map_err(|e| e.to_string())?;
    let theirs = theirs.as_object().ok_or("not an object")?;
    let mut problems = Vec::new();
    for &ty in GgmlType::ALL {
        let ours = [u64::from(ty.id()), ty.block_size(), ty.type_size()];
        let got: Option<Vec<u64>> = theirs
            .get(&ty.name().to_uppercase())
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).collect());
        let expected_difference = match ty {
            GgmlType::Q8_1 => Some(vec![9, 32, 40]),
            GgmlType::Q2_0 => None,
            _ => Some(ours.to_vec()),
        };
        if got != expected_difference {
            problems.push(format!(
                "{ty}: ours {ours:?}, gguf-py's {got:?}, expected of gguf-py {expected_difference:?}"
            ));
        }
    }
    for name in theirs.keys() {
        if !GgmlType::ALL
            .iter()
            .any(|t| t.name().eq_ignore_ascii_case(name))
        {
            problems.push(format!("{name}: in gguf-py's table, not in ours"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// Broken copies of a good GGUF (truncations, byte changes in the header, fields set to huge values)
/// read by both: every file gguf-py refuses, we refuse too (we refuse more: gguf-py does not hold
/// offsets to ggml's layout, nor padding, nor trailing bytes).
fn verdicts(python: &Path, dir: &Path, good: &[u8]) -> Result<(), String> {
    let header = parse(good).map_err(|e| e.to_string())?;
    let infos_end = header.data_start as usize;
    let mut state = 0xd1ff_u64;
    let mut next = move |below: usize| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) as usize) % below.max(1)
    };
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    for _ in 0..150 {
        let len = next(good.len());
        cases.push((format!("cut at {len}"), good[..len].to_vec()));
    }
    for _ in 0..300 {
        let (at, byte) = (next(infos_end), next(256) as u8);
        let mut bytes = good.to_vec();
        bytes[at] = byte;
        cases.push((format!("byte {at} set to {byte}"), bytes));
    }
    for _ in 0..150 {
        let at = next(infos_end - 8);
        let value = [u64::MAX, 1 << 40, 1 << 32, (1 << 31) + 1][next(4)];
        let mut bytes = good.to_vec();
        bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
        cases.push((format!("bytes {at}..{} set to {value}", at + 8), bytes));
    }
    let mut paths = String::new();
    for (i, (_, bytes)) in cases.iter().enumerate() {
        let path = dir.join(format!("case{i}.gguf"));
        std::fs::write(&path, bytes).map_err(|e| e.to_string())?;
        paths.push_str(&format!("{}\n", path.display()));
    }
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/differential/gguf_reference.py");
    let mut child = Command::new(python)
        .arg(&script)
        .arg("--verdicts")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let writer =
        std::thread::spawn(move || std::io::Write::write_all(&mut stdin, paths.as_bytes()));
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    writer
        .join()
        .map_err(|_| "writer panicked")?
        .map_err(|e| e.to_string())?;
    let theirs: Vec<&str> = std::str::from_utf8(&output.stdout)
        .map_err(|e| e.to_string())?
        .lines()
        .collect();
    if theirs.len() != cases.len() {
        return Err(format!(
            "gguf-py answered {} of {} broken files",
            theirs.len(),
            cases.len()
        ));
    }
    let (mut both, mut ours_only) = (0, 0);
    for ((what, bytes), theirs) in cases.iter().zip(&theirs) {
        match (parse(bytes), *theirs == "ok") {
            (Ok(_), false) => {
                return Err(format!("{what}: gguf-py refuses it ({theirs}), we read it"))
            }
            (Err(_), false) => both += 1,
            (Err(_), true) => ours_only += 1,
            (Ok(_), true) => {}
        }
    }
    if both < 100 || ours_only == 0 {
        return Err(format!(
            "the broken files did not exercise both readers: both refuse {both}, only we refuse {ours_only}"
        ));
    }
    Ok(())
}

/// Every type we dequantize, 64 x 3 elements of random bytes: scales of every kind (subnormal,
/// infinite, NaN) and every code.
fn random_blocks() -> GgufFile {
    random_file(
        &[
            GgmlType::F32,
            GgmlType::F16,
            GgmlType::BF16,
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q5_0,
            GgmlType::Q5_1,
            GgmlType::Q8_0,
        ],
        [64, 3],
        0x6767,
        false,
    )
}

/// A GGUF of one tensor of `dims` random bytes for each of `types`; with `finite_k_scales`, each
/// K-quant super-block's `d` and `dmin` a random finite half between -4 and 4 (an exponent of 1 to
/// 17, any mantissa and sign).
fn random_file(types: &[GgmlType], dims: [u64; 2], seed: u64, finite_k_scales: bool) -> GgufFile {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as u8
    };
    let mut file = GgufFile::new();
    file.string("general.architecture", "random");
    for &ty in types {
        let blocks = dims[0] * dims[1] / ty.block_size();
        let mut data: Vec<u8> = (0..blocks * ty.type_size()).map(|_| next()).collect();
        let scales: &[usize] = match ty {
            GgmlType::Q4_K | GgmlType::Q5_K if finite_k_scales => &[0, 2],
            GgmlType::Q6_K if finite_k_scales => &[208],
            _ => &[],
        };
        for block in data.chunks_exact_mut(ty.type_size() as usize) {
            for &at in scales {
                let bits = u16::from_le_bytes([next(), next()]);
                let bits = (bits & 0x83ff) | ((1 + (bits >> 10) % 17) << 10);
                block[at..at + 2].copy_from_slice(&bits.to_le_bytes());
            }
        }
        file.tensor(&format!("t.{ty}"), dims.to_vec(), ty, data);
    }
    file
}

fn compare(
    python: &Path,
    path: &Path,
    out: &Path,
    ours: &Header,
    bytes: &[u8],
) -> Result<(), String> {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/differential/gguf_reference.py");
    let run = Command::new(python)
        .arg(&script)
        .arg(path)
        .arg(out)
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !run.status.success() {
        return Err(format!(
            "gguf-py did not read it: {}",
            String::from_utf8_lossy(&run.stderr)
        ));
    }
    let theirs: Value = serde_json::from_slice(&run.stdout).map_err(|e| e.to_string())?;
    let tensors = theirs["tensors"].as_array().ok_or("no tensors")?;
    if tensors.len() != ours.tensors.len() {
        return Err(format!(
            "gguf-py reads {} tensors, we read {}",
            tensors.len(),
            ours.tensors.len()
        ));
    }
    for (i, (t, info)) in tensors.iter().zip(&ours.tensors).enumerate() {
        let dims: Vec<u64> = t["dims"]
            .as_array()
            .map(|d| d.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        let range = ours.range(info);
        let same = t["name"] == info.name.as_str()
            && t["type"] == info.ty.name().to_uppercase().as_str()
            && dims == info.dims
            && t["offset"].as_u64() == Some(range.start)
            && t["bytes"].as_u64() == Some(info.bytes)
            && t["values"].as_u64() == Some(info.elements());
        if !same {
            return Err(format!(
                "tensor {i}: gguf-py reads {t}, we read {} {} {:?} at {} ({} bytes)",
                info.name, info.ty, info.dims, range.start, info.bytes
            ));
        }
        let data = &bytes[range.start as usize..range.end as usize];
        let mut values = vec![0f32; info.elements() as usize];
        let dequantized = if k_quant(info.ty) {
            dequantize_k_quant(info.ty, data, &mut values)
        } else {
            dequantize(info.ty, data, &mut values)
        };
        dequantized.map_err(|e| format!("{}: {e}", info.name))?;
        let raw = std::fs::read(out.join(format!("{i}.f32"))).map_err(|e| e.to_string())?;
        let reference = raw
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        for (j, (a, b)) in values.iter().zip(reference).enumerate() {
            if !(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())) {
                return Err(format!(
                    "{} ({}) element {j}: we dequantize {a} ({:#010x}), gguf-py {b} ({:#010x})",
                    info.name,
                    info.ty,
                    a.to_bits(),
                    b.to_bits()
                ));
            }
        }
    }
    let fields = theirs["fields"].as_object().ok_or("no fields")?;
    if fields.len() as u64 != ours.metadata_count {
        return Err(format!(
            "gguf-py reads {} metadata entries, we read {}",
            fields.len(),
            ours.metadata_count
        ));
    }
    for kept in &ours.kept {
        let theirs = &fields[&kept.key];
        let same = match &kept.value {
            Kept::Integer(v) => theirs.as_i64().map(i128::from) == Some(*v),
            Kept::Float(v) => theirs.as_f64() == Some(*v),
            Kept::String(s) => theirs == s.as_str(),
            Kept::Bool(b) => theirs.as_bool() == Some(*b),
            Kept::Array {
                integers: Some(v), ..
            } => {
                theirs.as_array().map(|a| {
                    a.iter()
                        .filter_map(Value::as_i64)
                        .map(i128::from)
                        .collect::<Vec<_>>()
                }) == Some(v.clone())
            }
            Kept::Array { count, .. } => theirs["count"].as_u64() == Some(*count),
        };
        if !same {
            return Err(format!(
                "metadata {}: gguf-py reads {theirs}, we keep {:?}",
                kept.key, kept.value
            ));
        }
    }
    Ok(())
}

/// The GGUF draft arms, DFlash2's among them, written again by gguf-py's own `GGUFWriter` (the
/// library llama.cpp's converter writes with: `tests/differential/gguf_rewrite.py`) and gated: each
/// is judged as the arm's own file is (the same verdict and the same failing checks), so the gate
/// reads the converter's library's layout, not only the generator's copy of it.
fn written_by_gguf_py(python: &Path) -> Result<(), String> {
    use gate_tests::arms::gguf_draft;
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/differential/gguf_rewrite.py");
    let arms = [
        "gguf_draft::pass::faithful",
        "gguf_draft::pass::dflash2_f16",
        "gguf_draft::pass::dflash2_q8_0",
        "gguf_draft::control::dflash2_key_missing",
        "gguf_draft::control::dflash2_selector_top_k_beyond_the_vocabulary",
        "gguf_draft::control::dflash2_conv_projection_misshapen",
    ];
    for name in arms {
        let root = tempfile::tempdir().map_err(|e| e.to_string())?;
        let path = gguf_draft::write_named(name, root.path())?;
        let file = match path.is_dir() {
            true => std::fs::read_dir(&path)
                .map_err(|e| e.to_string())?
                .flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "gguf"))
                .ok_or(format!("{name}: no .gguf in {}", path.display()))?,
            false => path.clone(),
        };
        let rewritten = root.path().join("rewritten.gguf");
        let out = Command::new(python)
            .arg(&script)
            .arg(&file)
            .arg(&rewritten)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "{name}: gguf-py did not rewrite it: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let options = dflash_gate::Options::default();
        let ours = dflash_gate::gate(&file, &options).map_err(|e| format!("{name}: {e}"))?;
        let theirs = dflash_gate::gate(&rewritten, &options)
            .map_err(|e| format!("{name} rewritten: {e}"))?;
        let objections = |r: &dflash_gate::Report| -> Vec<(String, dflash_gate::Outcome)> {
            r.checks()
                .iter()
                .filter(|c| c.outcome() != dflash_gate::Outcome::Pass)
                .map(|c| (c.id().to_owned(), c.outcome()))
                .collect()
        };
        if ours.verdict() != theirs.verdict() || objections(&ours) != objections(&theirs) {
            return Err(format!(
                "{name}: the generator's file is {} {:?}, gguf-py's is {} {:?}:\n{}",
                ours.verdict(),
                objections(&ours),
                theirs.verdict(),
                objections(&theirs),
                theirs.to_text(false)
            ));
        }
        said(&format!(
            "{name}: {} either way, {:?}",
            theirs.verdict(),
            objections(&theirs)
        ));
    }
    Ok(())
}

/// One line of the trial's record, shown with `--nocapture`.
#[allow(clippy::print_stdout)]
fn said(line: &str) {
    println!("{line}");
}
