//! The GGUF reader on the generator's GGUFs (spec section 12): each variant read back with the
//! package's tensors, exactly; each rule of section 12.1 broken once in a real file, refused for
//! that rule; and the values scan naming a non-finite value or block scale of every type.

use dflash_gate::__private::gguf::{
    block_scales, dequantize, dequantize_k_quant, scan_tensor, Fault, GgmlType, Gguf, NotFinite,
    Rule, ScaleKind, Value,
};
use dflash_gate::Outcome;
use gate_tests::synth::gguf::{
    gguf_for, gguf_name, grid_from_blocks, write_gguf, GgufFile, GgufOptions,
};
use gate_tests::synth::{Encoding, Geometry, Package};
use half::bf16;
use libtest_mimic::{Failed, Trial};

const SEED: u64 = 0x6767;

fn variants() -> Vec<(&'static str, GgufOptions)> {
    let default = GgufOptions::default();
    vec![
        ("q4_1", default),
        (
            "f16_gains_f32_fc_aligned_64",
            GgufOptions {
                gains: GgmlType::F16,
                fc: GgmlType::F32,
                alignment: 64,
                ..default
            },
        ),
        (
            "q8_0",
            GgufOptions {
                matrices: GgmlType::Q8_0,
                tokenizer: false,
                ..default
            },
        ),
    ]
}

pub fn trials() -> Vec<Trial> {
    let mut out: Vec<Trial> = variants()
        .into_iter()
        .map(|(name, options)| {
            Trial::test(format!("gguf::round_trip_{name}"), move || {
                round_trip(options).map_err(Failed::from)
            })
        })
        .collect();
    out.push(Trial::test("gguf::rules_on_a_real_file", || {
        rules().map_err(Failed::from)
    }));
    out.push(Trial::test("gguf::k_quants_dequantize_as_gguf_py", || {
        k_quants().map_err(Failed::from)
    }));
    out.push(Trial::test(
        "gguf::non_finite_values_and_block_scales_named",
        || non_finite().map_err(Failed::from),
    ));
    out
}

/// A small package and its GGUF, written; the GGUF read back by the gate's reader: every package
/// tensor with a GGUF name is there, its values the package's (a Q4_1 matrix's blocks re-laid are the
/// package's grid byte for byte), the compared metadata the config's, and the package still passes.
fn round_trip(options: GgufOptions) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let geometry = Geometry::small();
    let mut package = Package::generate(&geometry, Encoding::default(), SEED);
    let path = dir.path().join("draft.gguf");
    write_gguf(&mut package, &path, options, SEED).map_err(|e| e.to_string())?;
    let pkg = dir.path().join("package");
    std::fs::create_dir(&pkg).map_err(|e| e.to_string())?;
    package.write(&pkg).map_err(|e| e.to_string())?;
    let report =
        dflash_gate::gate(&pkg, &dflash_gate::Options::default()).map_err(|e| e.to_string())?;
    if report.verdict() != Outcome::Pass {
        return Err("the package made from the GGUF does not pass".into());
    }
    let gguf = Gguf::open(&path).map_err(|e| e.to_string())?;
    let h = &gguf.header;
    if h.alignment != u64::from(options.alignment) || h.data_start % h.alignment != 0 {
        return Err(format!(
            "alignment {} data start {}",
            h.alignment, h.data_start
        ));
    }
    let int = |key: &str| match h.get(&format!("dflash.{key}")).map(|k| &k.value) {
        Some(Value::Integer(v)) => u64::try_from(*v).ok(),
        _ => None,
    };
    for (key, want) in [
        ("block_count", geometry.layers),
        ("embedding_length", geometry.hidden),
        ("feed_forward_length", geometry.intermediate),
        ("attention.head_count", geometry.heads),
        ("attention.head_count_kv", geometry.kv_heads),
        ("attention.key_length", geometry.head_dim),
        ("block_size", geometry.block_size),
        ("vocab_size", geometry.vocab_size),
    ] {
        if int(key) != Some(want) {
            return Err(format!("dflash.{key} is {:?}, not {want}", int(key)));
        }
    }
    // As llama.cpp's converter writes them: the mask id under the tokenizer's key, each tap plus one.
    match h.get("tokenizer.ggml.mask_token_id").map(|k| &k.value) {
        Some(Value::Integer(v)) if *v == i128::from(geometry.mask_token_id) => {}
        other => return Err(format!("tokenizer.ggml.mask_token_id is {other:?}")),
    }
    let taps: Vec<i128> = geometry.taps.iter().map(|&t| i128::from(t) + 1).collect();
    match h.get("dflash.target_layers").map(|k| &k.value) {
        Some(Value::Array {
            integers: Some(v), ..
        }) if *v == taps => {}
        other => return Err(format!("dflash.target_layers is {other:?}")),
    }
    if h.get("tokenizer.ggml.tokens").is_some() {
        return Err("the tokenizer was kept".into());
    }
    let naming = geometry.naming(package.encoding);
    let mut seen = 0;
    for t in &package.tensors {
        let Some(name) = naming.role(&t.name).and_then(gguf_name) else {
            continue;
        };
        seen += 1;
        let (info, data) = gguf
            .tensor(&name)
            .ok_or(format!("{name} is not in the GGUF"))?;
        if t.dtype == dflash_gate::__private::dtype::Dtype::I8 {
            let (k, n) = (info.dims[0], info.dims[1]);
            if info.ty != options.matrices {
                return Err(format!("{name} is {}", info.ty));
            }
            if info.ty == GgmlType::Q4_1 && grid_from_blocks(n, k, data) != t.data {
                return Err(format!(
                    "{name}: its blocks re-laid are not {}'s grid",
                    t.name
                ));
            }
            continue;
        }
        let mut values = vec![0f32; info.elements() as usize];
        dequantize(info.ty, data, &mut values).map_err(|e| e.to_string())?;
        let mut bytes: Vec<u8> = values
            .iter()
            .flat_map(|&v| bf16::from_f32(v).to_bits().to_le_bytes())
            .collect();
        if t.shape.len() == 3 {
            // fc: the package holds it row-blocked, [hidden/32, cols, 32].
            let (cols, hidden) = (info.dims[0] as usize, info.dims[1] as usize);
            let mut blocked = vec![0u8; bytes.len()];
            for row in 0..hidden {
                for col in 0..cols {
                    let to = ((row / 32) * cols + col) * 32 + row % 32;
                    let from = row * cols + col;
                    blocked[2 * to..2 * to + 2].copy_from_slice(&bytes[2 * from..2 * from + 2]);
                }
            }
            bytes = blocked;
        }
        if bytes != t.data {
            return Err(format!("{name} dequantized is not {}'s values", t.name));
        }
    }
    if seen != h.tensors.len() || seen != 2 * 11 + 3 {
        return Err(format!(
            "{seen} package tensors, {} in the GGUF",
            h.tensors.len()
        ));
    }
    gguf.unchanged().map_err(|e| e.to_string())
}

/// Whether a refusal is for the rule a case breaks.
type Refused = fn(&Rule) -> bool;

/// The generator's GGUF, broken one rule at a time.
fn rules() -> Result<(), String> {
    let mut package = Package::generate(&Geometry::micro(), Encoding::default(), SEED);
    let file = gguf_for(&mut package, GgufOptions::default(), SEED).map_err(|e| e.to_string())?;
    let good = file.bytes();
    let h = dflash_gate::__private::gguf::parse(&good).map_err(|e| e.to_string())?;
    let find = |needle: &[u8]| {
        good.windows(needle.len())
            .position(|w| w == needle)
            .ok_or("not in the file")
    };
    // The offset field of the second tensor: after its name, dimensions and type.
    let second = &h.tensors[1];
    let mut name = (second.name.len() as u64).to_le_bytes().to_vec();
    name.extend_from_slice(second.name.as_bytes());
    let second_at = find(&name)?;
    let type_at = second_at + name.len() + 4 + 8 * second.dims.len();
    let offset_at = type_at + 4;
    let key = find(b"dflash.block_size")?;
    let cases: Vec<(&str, Vec<u8>, Refused)> = vec![
        ("version 1", edit(&good, 4, &1u32.to_le_bytes()), |r| {
            *r == Rule::Version1
        }),
        (
            "a duplicate key",
            edit(&good, key, b"dflash.vocab_size"),
            |r| *r == Rule::DuplicateKey("dflash.vocab_size".into()),
        ),
        (
            "a gap",
            edit(&good, offset_at, &(second.offset + 32).to_le_bytes()),
            |r| matches!(r, Rule::Gap { .. }),
        ),
        (
            "an overlap",
            edit(&good, offset_at, &(second.offset - 32).to_le_bytes()),
            |r| matches!(r, Rule::Overlap { .. }),
        ),
        (
            "an unknown type",
            edit(&good, type_at, &4u32.to_le_bytes()),
            |r| matches!(r, Rule::UnknownType { id: 4, .. }),
        ),
        (
            "a token that is not UTF-8",
            edit(&good, find(b"tok7")? + 2, b"\xff"),
            |r| matches!(r, Rule::NotUtf8 { what } if what.contains("tokenizer.ggml.tokens")),
        ),
        (
            "trailing bytes",
            [good.as_slice(), &[0; 32]].concat(),
            |r| matches!(r, Rule::Trailing { .. }),
        ),
    ];
    for (what, bytes, rule) in cases {
        match dflash_gate::__private::gguf::parse(&bytes) {
            Ok(_) => return Err(format!("{what}: read")),
            Err(e) if rule(&e.rule) => {}
            Err(e) => return Err(format!("{what}: refused for another rule: {e}")),
        }
    }
    Ok(())
}

fn edit(bytes: &[u8], at: usize, with: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out[at..at + with.len()].copy_from_slice(with);
    out
}

/// A GGUF of every type with a scale or a value that can be non-finite, written and opened as a
/// file: for each, a clean tensor of random codes under finite scales, and a copy whose second
/// block's last scale (or whose 40th value) is NaN, then +infinity. The scan passes every clean one
/// and names the bad one's tensor, type, block and scale (or element).
fn non_finite() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut state = 0x5ca1e_u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 56) as u8
    };
    let mut file = GgufFile::new();
    file.string("general.architecture", "scan");
    let mut expected = Vec::new();
    for &ty in GgmlType::ALL {
        let (block, size) = (ty.block_size() as usize, ty.type_size() as usize);
        let values = 2 * block.max(64);
        let mut clean: Vec<u8> = (0..values / block * size).map(|_| next()).collect();
        let bad: Vec<(u32, NotFinite)> = match ty {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 | GgmlType::F64 => {
                let width = size;
                for v in clean.chunks_exact_mut(width) {
                    // A zero exponent's top bit: finite whatever the rest.
                    v[width - 1] &= 0x3f;
                }
                let (nan, inf): (&[u8], &[u8]) = match ty {
                    GgmlType::F32 => (&[0, 0, 0xc0, 0x7f], &[0, 0, 0x80, 0x7f]),
                    GgmlType::F64 => (
                        &[0, 0, 0, 0, 0, 0, 0xf8, 0x7f],
                        &[0, 0, 0, 0, 0, 0, 0xf0, 0x7f],
                    ),
                    GgmlType::F16 => (&[0, 0x7e], &[0, 0x7c]),
                    _ => (&[0xc0, 0x7f], &[0x80, 0x7f]),
                };
                for (i, (what, bits)) in [(NotFinite::NaN, nan), (NotFinite::PlusInfinity, inf)]
                    .into_iter()
                    .enumerate()
                {
                    let mut data = clean.clone();
                    data[40 * width..41 * width].copy_from_slice(bits);
                    let name = format!("t.{ty}.bad{i}");
                    file.tensor(&name, vec![(values / 2) as u64, 2], ty, data);
                    expected.push((name, ty, Some(Err(what))));
                }
                Vec::new()
            }
            _ if block_scales(ty).is_empty() => Vec::new(),
            _ => {
                for b in clean.chunks_exact_mut(size) {
                    for scale in block_scales(ty) {
                        // Finite: 0.5 in each kind, E8M0's 2^0.
                        let finite = match scale.kind {
                            ScaleKind::F16 | ScaleKind::Iq1mNibbles => 0x3800,
                            ScaleKind::F32 => 0x3f00_0000,
                            ScaleKind::E8m0 => 0x7f,
                        };
                        put_scale(b, scale.offset, scale.kind, finite);
                    }
                }
                let last = block_scales(ty).last().map(|s| s.kind);
                match last {
                    Some(ScaleKind::E8m0) => vec![(0xff, NotFinite::NaN)],
                    Some(ScaleKind::F32) => vec![
                        (0x7fc0_0000, NotFinite::NaN),
                        (0x7f80_0000, NotFinite::PlusInfinity),
                    ],
                    _ => vec![(0x7e00, NotFinite::NaN), (0x7c00, NotFinite::PlusInfinity)],
                }
            }
        };
        let dims = vec![(values / 2) as u64, 2];
        let name = format!("t.{ty}.clean");
        file.tensor(&name, dims.clone(), ty, clean.clone());
        expected.push((name, ty, None));
        let Some(scale) = block_scales(ty).last() else {
            continue;
        };
        for (i, (bits, what)) in bad.into_iter().enumerate() {
            let mut data = clean.clone();
            put_scale(&mut data[size..2 * size], scale.offset, scale.kind, bits);
            let name = format!("t.{ty}.bad{i}");
            file.tensor(&name, dims.clone(), ty, data);
            expected.push((name, ty, Some(Ok((scale.name, bits, what)))));
        }
    }
    let path = dir.path().join("scan.gguf");
    std::fs::write(&path, file.bytes()).map_err(|e| e.to_string())?;
    let gguf = Gguf::open(&path).map_err(|e| e.to_string())?;
    let mut scales_seen = 0;
    for (name, ty, want) in expected {
        let (info, data) = gguf.tensor(&name).ok_or(format!("{name} not read"))?;
        let got = scan_tensor(info, data);
        let ok = match (&want, &got) {
            (None, Ok(())) => true,
            (Some(Err(what)), Err(e)) => {
                matches!(e.fault, Fault::Element { index: 40, what: w, .. } if w == *what)
            }
            (Some(Ok((scale, bits, what))), Err(e)) => {
                scales_seen += 1;
                e.fault
                    == Fault::Scale {
                        block: 1,
                        scale,
                        bits: *bits,
                        what: *what,
                    }
                    && e.to_string().starts_with(&format!(
                        "tensor {name} ({ty}): block 1's scale {scale} is {what}"
                    ))
            }
            _ => false,
        };
        if !ok {
            return Err(format!("{name}: wanted {want:?}, the scan gives {got:?}"));
        }
    }
    if scales_seen < 40 {
        return Err(format!("only {scales_seen} bad scales were made"));
    }
    Ok(())
}

/// Writes a scale as its kind stores it (IQ1_M's half into the top nibbles of its four words).
fn put_scale(block: &mut [u8], at: usize, kind: ScaleKind, bits: u32) {
    match kind {
        ScaleKind::F16 => block[at..at + 2].copy_from_slice(&(bits as u16).to_le_bytes()),
        ScaleKind::F32 => block[at..at + 4].copy_from_slice(&bits.to_le_bytes()),
        ScaleKind::E8m0 => block[at] = bits as u8,
        ScaleKind::Iq1mNibbles => {
            for i in 0..4 {
                let word = &mut block[at + 2 * i..at + 2 * i + 2];
                let w = u16::from_le_bytes([word[0], word[1]]) & 0x0fff;
                let w = w | ((((bits >> (4 * i)) & 0xf) as u16) << 12);
                word.copy_from_slice(&w.to_le_bytes());
            }
        }
    }
}

/// What gguf-py 0.19.0's `gguf.quants.dequantize` (numpy 2.3.5) gives for [`k_pattern`]: the value
/// count, the FNV-1a digest of the values' bits (little-endian, every NaN as `0x7fc00000`), and the
/// bits of values 0 and 300.
const K_QUANTS_FROM_GGUF_PY: [(GgmlType, usize, u64, u32, u32); 3] = [
    (
        GgmlType::Q4_K,
        1024,
        0xb17a_a716_f88e_8726,
        0x4050_a900,
        0xc2e1_0000,
    ),
    (
        GgmlType::Q5_K,
        1024,
        0xad0a_af2f_fbc9_3a04,
        0x4111_4280,
        0xc40c_9000,
    ),
    (
        GgmlType::Q6_K,
        1024,
        0x76ff_20bd_aebf_a18e,
        0x4061_1d00,
        0x4434_0000,
    ),
];

/// Four super-blocks of a multiplicative hash, the first three with readable scales (`d` of 0.0123,
/// -0.5 and 3; `dmin` of -0.1, 0.25 and -7), the fourth with the hash's.
fn k_pattern(ty: GgmlType) -> Vec<u8> {
    let size = ty.type_size() as usize;
    let mut raw: Vec<u8> = (0..4 * size as u64)
        .map(|i| (((i * 37 + u64::from(ty.id()) * 101 + 11) * 2_654_435_761) >> 13) as u8)
        .collect();
    let f16 = |v: f32| half::f16::from_f32(v).to_bits().to_le_bytes();
    for (b, block) in raw.chunks_exact_mut(size).take(3).enumerate() {
        let (d, dmin) = ([0.0123f32, -0.5, 3.0][b], [-0.1f32, 0.25, -7.0][b]);
        if ty == GgmlType::Q6_K {
            block[208..210].copy_from_slice(&f16(d));
        } else {
            block[..2].copy_from_slice(&f16(d));
            block[2..4].copy_from_slice(&f16(dmin));
        }
    }
    raw
}

/// The K-quants the gate dequantizes give gguf-py's values bit for bit (pinned here, so held without
/// Python; `differential::gguf_k_quants` holds them to a live gguf-py on random blocks), and any run
/// of whole blocks gives the values of the whole.
fn k_quants() -> Result<(), String> {
    for (ty, count, want, first, at_300) in K_QUANTS_FROM_GGUF_PY {
        let bytes = k_pattern(ty);
        let mut out = vec![0f32; count];
        dequantize_k_quant(ty, &bytes, &mut out).map_err(|e| e.to_string())?;
        let mut h = 0xcbf2_9ce4_8422_2325_u64;
        let bits = |v: &f32| if v.is_nan() { 0x7fc0_0000 } else { v.to_bits() };
        for b in out.iter().flat_map(|v| bits(v).to_le_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        let got = (out[0].to_bits(), out[300].to_bits(), h);
        if got != (first, at_300, want) {
            return Err(format!(
                "{ty}: values 0 and 300 and the digest are {got:#x?}, gguf-py's {:#x?}",
                (first, at_300, want)
            ));
        }
        let size = ty.type_size() as usize;
        let mut one = vec![0f32; 256];
        dequantize_k_quant(ty, &bytes[2 * size..3 * size], &mut one).map_err(|e| e.to_string())?;
        if one != out[512..768] {
            return Err(format!(
                "{ty}: block 2 alone differs from block 2 of the whole"
            ));
        }
    }
    Ok(())
}
