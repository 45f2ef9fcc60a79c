//! One small file per rule, each refused for that rule at its byte; and the dequantized values of
//! every supported type against gguf-py's `dequantize`.

use super::*;

/// A GGUF string: u64 length, bytes.
fn s(text: &str) -> Vec<u8> {
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    out
}

/// A metadata entry: key, value type, value bytes.
fn kv(key: &str, ty: u32, value: &[u8]) -> Vec<u8> {
    let mut out = s(key);
    out.extend_from_slice(&ty.to_le_bytes());
    out.extend_from_slice(value);
    out
}

fn u32_kv(key: &str, v: u32) -> Vec<u8> {
    kv(key, 4, &v.to_le_bytes())
}

/// A tensor info: name, dimensions, ggml type id, offset.
fn info(name: &str, dims: &[u64], ty: u32, offset: u64) -> Vec<u8> {
    let mut out = s(name);
    out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
    for d in dims {
        out.extend_from_slice(&d.to_le_bytes());
    }
    out.extend_from_slice(&ty.to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    out
}

/// A whole file: the header (version 3), the infos, zero padding to `alignment`, then `data`.
fn file(kvs: &[Vec<u8>], infos: &[Vec<u8>], alignment: usize, data: &[u8]) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&(infos.len() as u64).to_le_bytes());
    out.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
    for part in kvs.iter().chain(infos) {
        out.extend_from_slice(part);
    }
    out.resize(out.len().div_ceil(alignment) * alignment, 0);
    out.extend_from_slice(data);
    out
}

fn good_kvs() -> Vec<Vec<u8>> {
    vec![
        kv("general.architecture", 8, &s("dflash")),
        u32_kv("dflash.block_count", 2),
    ]
}

/// Tensor `a` (f32 [32], 128 bytes) then `b` (q4_1 [32, 2], two blocks of 20 bytes) at 128.
fn good_infos() -> Vec<Vec<u8>> {
    vec![info("a", &[32], 0, 0), info("b", &[32, 2], 3, 128)]
}

/// [`good_infos`]' data: 168 bytes padded to 192 (not all zero, so the padding can be told apart).
fn good_data() -> Vec<u8> {
    let mut data: Vec<u8> = (0..168).map(|i| (i % 7 + 1) as u8).collect();
    data.resize(192, 0);
    data
}

fn good() -> Vec<u8> {
    file(&good_kvs(), &good_infos(), 32, &good_data())
}

/// The header length of [`good`] before its data (where the data section starts).
fn good_data_start() -> usize {
    good().len() - 192
}

#[track_caller]
fn refused(bytes: &[u8]) -> GgufError {
    match parse(bytes) {
        Ok(h) => panic!("read a GGUF that breaks a rule: {h:?}"),
        Err(e) => e,
    }
}

#[test]
fn a_good_file_is_read_with_its_kept_keys_and_tensors() {
    let bytes = good();
    let h = parse(&bytes).expect("good");
    assert_eq!((h.version, h.alignment, h.metadata_count), (3, 32, 2));
    assert_eq!(h.data_start as usize, good_data_start());
    assert_eq!(h.data_start % 32, 0);
    assert_eq!(h.architecture(), Some("dflash"));
    assert_eq!(
        h.get("dflash.block_count").map(|k| (&k.value, k.ty)),
        Some((&Value::Integer(2), ValueType::U32))
    );
    let b = h.tensor("b").expect("b");
    assert_eq!(
        (b.ty, b.bytes, b.offset, b.blocks()),
        (GgmlType::Q4_1, 40, 128, 2)
    );
    assert_eq!((b.row_len(), b.rows(), b.elements()), (32, 2, 64));
    assert_eq!(h.range(b), h.data_start + 128..h.data_start + 168);
    // The last tensor's padding left off, wholly or in part: ggml reads the data section padded, so
    // the file is short of it.
    for cut in [24, 1] {
        let e = refused(&bytes[..bytes.len() - cut]);
        assert_eq!(
            e.rule,
            Rule::PaddingPastEnd {
                tensor: "b".to_owned(),
                end: bytes.len() as u64,
                file_len: (bytes.len() - cut) as u64,
            },
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("tensor b's data padded to the alignment ends at byte"),
            "{e}"
        );
    }
}

#[test]
fn every_truncation_before_the_last_tensor_ends_is_refused_as_past_the_end() {
    let bytes = good();
    let end = good_data_start() + 168;
    for len in 0..end {
        let e = refused(&bytes[..len]);
        assert!(
            matches!(e.rule, Rule::PastEnd { .. } | Rule::DataPastEnd { .. }),
            "{len}: {e}"
        );
    }
    let e = refused(&bytes[..end - 1]);
    assert_eq!(
        e.rule,
        Rule::DataPastEnd {
            tensor: "b".into(),
            end: end as u64,
            file_len: end as u64 - 1
        }
    );
    let e = refused(&bytes[..10]);
    assert_eq!(e.at, 8, "{e}");
    assert!(
        e.to_string()
            .contains("the tensor count needs 8 bytes, but 2 are left"),
        "{e}"
    );
}

#[test]
fn a_bad_magic_is_refused() {
    let mut bytes = good();
    bytes[..4].copy_from_slice(b"GGML");
    let e = refused(&bytes);
    assert_eq!((e.at, e.rule.clone()), (0, Rule::BadMagic(*b"GGML")), "{e}");
}

#[test]
fn version_1_big_endian_and_unknown_versions_are_refused_by_name() {
    for (version, rule) in [
        (1u32, Rule::Version1),
        (0x0300_0000, Rule::BigEndian(0x0300_0000)),
        (4, Rule::UnknownVersion(4)),
        (0, Rule::UnknownVersion(0)),
    ] {
        let mut bytes = good();
        bytes[4..8].copy_from_slice(&version.to_le_bytes());
        let e = refused(&bytes);
        assert_eq!((e.at, e.rule.clone()), (4, rule), "{e}");
    }
    let mut bytes = good();
    bytes[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert!(refused(&bytes).to_string().contains("big-endian"));
    bytes[4..8].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(parse(&bytes).expect("version 2").version, 2);
}

#[test]
fn counts_and_lengths_past_the_end_are_refused_before_anything_is_sized() {
    // A metadata count the file cannot hold, under the cap.
    let mut bytes = good();
    bytes[16..24].copy_from_slice(&(1u64 << 15).to_le_bytes());
    let e = refused(&bytes);
    assert!(
        matches!(&e.rule, Rule::PastEnd { what, .. } if what == "the metadata entries"),
        "{e}"
    );
    // Counts over the caps.
    let mut bytes = good();
    bytes[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    let e = refused(&bytes);
    assert!(
        matches!(
            e.rule,
            Rule::TooMany {
                what: "tensors",
                ..
            }
        ),
        "{e}"
    );
    let mut bytes = good();
    bytes[16..24].copy_from_slice(&(MAX_GGUF_METADATA_KEYS + 1).to_le_bytes());
    let e = refused(&bytes);
    assert_eq!(e.at, 16, "{e}");
    assert!(
        matches!(
            e.rule,
            Rule::TooMany {
                what: "metadata entries",
                ..
            }
        ),
        "{e}"
    );
    // A key's length, a string value's length, an array's count.
    let mut long_key = 1000u64.to_le_bytes().to_vec();
    long_key.extend_from_slice(b"general");
    let e = refused(&file(&[long_key], &[], 32, &[]));
    assert_eq!(e.at, 32, "{e}");
    assert!(
        matches!(&e.rule, Rule::PastEnd { what, needs: 1000, .. } if what == "a metadata key"),
        "{e}"
    );
    let mut string = 1u64.wrapping_shl(40).to_le_bytes().to_vec();
    string.extend_from_slice(b"x");
    let e = refused(&file(&[kv("k", 8, &string)], &[], 32, &[]));
    assert!(
        e.to_string()
            .contains("the string value of k needs 1099511627776 bytes"),
        "{e}"
    );
    let mut array = 4u32.to_le_bytes().to_vec();
    array.extend_from_slice(&(u64::MAX / 2).to_le_bytes());
    let e = refused(&file(&[kv("k", 9, &array)], &[], 32, &[]));
    assert!(
        matches!(&e.rule, Rule::PastEnd { what, needs: u64::MAX, .. } if what.starts_with("the array value of k")),
        "{e}"
    );
    // An array of strings whose count fits in bytes but not at eight bytes each.
    let mut array = 8u32.to_le_bytes().to_vec();
    array.extend_from_slice(&64u64.to_le_bytes());
    array.extend_from_slice(&[0; 100]);
    let e = refused(&file(&[kv("k", 9, &array)], &[], 32, &[]));
    assert!(matches!(&e.rule, Rule::PastEnd { needs: 512, .. }), "{e}");
}

#[test]
fn a_duplicate_key_is_refused() {
    let mut kvs = good_kvs();
    kvs.push(u32_kv("dflash.block_count", 3));
    let e = refused(&file(&kvs, &good_infos(), 32, &good_data()));
    assert_eq!(
        e.rule,
        Rule::DuplicateKey("dflash.block_count".into()),
        "{e}"
    );
    let at = 24 + kvs[0].len() + kvs[1].len();
    assert_eq!(e.at as usize, at, "{e}");
}

#[test]
fn a_duplicate_tensor_name_is_refused() {
    let infos = vec![info("a", &[32], 0, 0), info("a", &[32, 2], 3, 128)];
    let e = refused(&file(&good_kvs(), &infos, 32, &good_data()));
    assert_eq!(e.rule, Rule::DuplicateTensor("a".into()), "{e}");
}

#[test]
fn offsets_must_be_ggmls_contiguous_layout() {
    let with_b_at = |offset| {
        let infos = vec![info("a", &[32], 0, 0), info("b", &[32, 2], 3, offset)];
        let mut data = good_data();
        data.resize(256, 0);
        file(&good_kvs(), &infos, 32, &data)
    };
    let e = refused(&with_b_at(130));
    assert!(
        matches!(
            e.rule,
            Rule::Misaligned {
                offset: 130,
                alignment: 32,
                ..
            }
        ),
        "{e}"
    );
    let e = refused(&with_b_at(96));
    assert!(
        matches!(
            e.rule,
            Rule::Overlap {
                offset: 96,
                expected: 128,
                ..
            }
        ),
        "{e}"
    );
    let e = refused(&with_b_at(160));
    assert!(
        matches!(
            e.rule,
            Rule::Gap {
                offset: 160,
                expected: 128,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("tensor b is at offset 160, leaving a gap"),
        "{e}"
    );
    // The error is at b's offset field: the end of the infos less 8.
    let infos_end = 24 + good_kvs().concat().len() + good_infos().concat().len();
    assert_eq!(e.at as usize, infos_end - 8, "{e}");
    // The first tensor must start the data section.
    let infos = vec![info("a", &[32], 0, 32), info("b", &[32, 2], 3, 160)];
    let e = refused(&file(&good_kvs(), &infos, 32, &[0; 224]));
    assert!(
        matches!(
            e.rule,
            Rule::Gap {
                offset: 32,
                expected: 0,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn unknown_and_removed_types_are_refused_by_number() {
    for id in [4u32, 5, 31, 36, 43, u32::MAX] {
        let infos = vec![info("a", &[32], id, 0)];
        let e = refused(&file(&good_kvs(), &infos, 32, &[0; 128]));
        assert_eq!(
            e.rule,
            Rule::UnknownType {
                tensor: "a".into(),
                id
            },
            "{e}"
        );
    }
    // Every known type's size follows from its block: one block of each is read.
    for &ty in GgmlType::ALL {
        let infos = vec![info("a", &[ty.block_size()], ty.id(), 0)];
        // ggml reads the data section padded to the alignment.
        let data = vec![0u8; ty.type_size().next_multiple_of(32) as usize];
        let h = parse(&file(&good_kvs(), &infos, 32, &data)).expect("one block");
        assert_eq!(h.tensors[0].bytes, ty.type_size(), "{ty}");
    }
}

#[test]
fn dimensions_are_checked_for_count_range_overflow_and_whole_blocks() {
    let refuse =
        |dims: &[u64], ty: u32| refused(&file(&good_kvs(), &[info("a", dims, ty, 0)], 32, &[]));
    let e = refuse(&[1 << 32, 1 << 32], 0);
    assert!(
        matches!(
            e.rule,
            Rule::Overflow {
                what: "element count",
                ..
            }
        ),
        "{e}"
    );
    let e = refuse(&[1 << 61], 0);
    assert!(
        matches!(
            e.rule,
            Rule::Overflow {
                what: "byte size",
                ..
            }
        ),
        "{e}"
    );
    let e = refuse(&[1 << 63], 0);
    assert!(
        matches!(e.rule, Rule::Dimension { index: 0, value, .. } if value == 1 << 63),
        "{e}"
    );
    for count in [0, 5] {
        let e = refuse(&vec![1; count], 0);
        assert!(
            matches!(e.rule, Rule::DimensionCount { count: c, .. } if c as usize == count),
            "{e}"
        );
    }
    let e = refuse(&[16, 2], 3);
    assert!(
        matches!(
            e.rule,
            Rule::NotWholeBlocks {
                ne0: 16,
                ty: GgmlType::Q4_1,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string().contains("not a multiple of its block of 32"),
        "{e}"
    );
}

#[test]
fn the_alignment_is_a_u32_power_of_two_and_places_every_tensor() {
    for a in [0u32, 48, 3] {
        let mut kvs = good_kvs();
        kvs.push(u32_kv("general.alignment", a));
        let e = refused(&file(&kvs, &good_infos(), 32, &good_data()));
        assert_eq!(e.rule, Rule::Alignment(a), "{e}");
    }
    let mut kvs = good_kvs();
    kvs.push(kv("general.alignment", 10, &64u64.to_le_bytes()));
    let e = refused(&file(&kvs, &good_infos(), 32, &good_data()));
    assert_eq!(e.rule, Rule::AlignmentType(ValueType::U64), "{e}");
    // At 256, b moves to 256 and the data section starts on a 256-byte boundary.
    let mut kvs = good_kvs();
    kvs.push(u32_kv("general.alignment", 256));
    let infos = vec![info("a", &[32], 0, 0), info("b", &[32, 2], 3, 256)];
    let mut data = vec![0u8; 512];
    data[0] = 1;
    let h = parse(&file(&kvs, &infos, 256, &data)).expect("aligned to 256");
    assert_eq!((h.alignment, h.data_start % 256), (256, 0));
    let e = refused(&file(&kvs, &good_infos(), 256, &data));
    assert!(
        matches!(
            e.rule,
            Rule::Misaligned {
                offset: 128,
                alignment: 256,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn trailing_bytes_and_padding_that_is_not_zero_are_refused() {
    let mut bytes = good();
    bytes.push(0);
    let e = refused(&bytes);
    let len = bytes.len() as u64;
    assert_eq!(
        e.rule,
        Rule::Trailing {
            end: len - 1,
            file_len: len
        },
        "{e}"
    );
    let mut bytes = good();
    bytes.extend_from_slice(&[0; 32]);
    assert!(matches!(refused(&bytes).rule, Rule::Trailing { .. }));
    // The last tensor's padding, the padding after a and before b (none here), and the infos'.
    let mut bytes = good();
    let last = bytes.len() - 1;
    bytes[last] = 9;
    let e = refused(&bytes);
    assert_eq!(
        (e.at as usize, e.rule.clone()),
        (last, Rule::PaddingNotZero { byte: 9 }),
        "{e}"
    );
    let mut bytes = good();
    bytes[good_data_start() - 1] = 1;
    assert!(matches!(
        refused(&bytes).rule,
        Rule::PaddingNotZero { byte: 1 }
    ));
    // No tensors: the file ends at the end of the metadata or in its padding.
    let bare = file(&good_kvs(), &[], 32, &[]);
    parse(&bare).expect("no tensors");
    let mut longer = bare.clone();
    longer.push(0);
    assert!(matches!(refused(&longer).rule, Rule::Trailing { .. }));
}

#[test]
fn an_empty_key_is_refused_as_ggml_refuses_it() {
    let mut key = 0u64.to_le_bytes().to_vec();
    key.extend_from_slice(&4u32.to_le_bytes());
    key.extend_from_slice(&1u32.to_le_bytes());
    let e = refused(&file(&[key], &[], 32, &[]));
    assert_eq!((e.at, e.rule.clone()), (24, Rule::EmptyKey), "{e}");
    assert!(e.to_string().contains("a metadata key of 0 bytes"), "{e}");
}

#[test]
fn keys_names_and_values_are_held_to_their_types_and_lengths() {
    let mut key = 65_536u64.to_le_bytes().to_vec();
    key.resize(key.len() + 65_536, b'k');
    let e = refused(&file(&[key], &[], 32, &[]));
    assert_eq!(
        (e.at, e.rule.clone()),
        (24, Rule::KeyTooLong { len: 65_536 }),
        "{e}"
    );
    let mut bad_key = 1u64.to_le_bytes().to_vec();
    bad_key.push(0xff);
    bad_key.extend_from_slice(&4u32.to_le_bytes());
    bad_key.extend_from_slice(&[0; 4]);
    let e = refused(&file(&[bad_key], &[], 32, &[]));
    assert!(
        matches!(&e.rule, Rule::NotUtf8 { what } if what == "a metadata key"),
        "{e}"
    );
    let e = refused(&file(&[kv("k", 13, &[0; 4])], &[], 32, &[]));
    assert_eq!(
        e.rule,
        Rule::UnknownValueType {
            key: "k".into(),
            id: 13
        },
        "{e}"
    );
    let e = refused(&file(&[kv("k", 7, &[2])], &[], 32, &[]));
    assert_eq!(
        e.rule,
        Rule::BadBool {
            key: "k".into(),
            byte: 2
        },
        "{e}"
    );
    let mut bools = 7u32.to_le_bytes().to_vec();
    bools.extend_from_slice(&3u64.to_le_bytes());
    bools.extend_from_slice(&[1, 0, 5]);
    let e = refused(&file(&[kv("k", 9, &bools)], &[], 32, &[]));
    assert_eq!(
        e.rule,
        Rule::BadBool {
            key: "k".into(),
            byte: 5
        },
        "{e}"
    );
    // Arrays nest to the limit and no deeper.
    let nested = |depth: usize| {
        let mut value = 4u32.to_le_bytes().to_vec();
        value.extend_from_slice(&0u64.to_le_bytes());
        for _ in 1..depth {
            let mut outer = 9u32.to_le_bytes().to_vec();
            outer.extend_from_slice(&1u64.to_le_bytes());
            outer.extend_from_slice(&value);
            value = outer;
        }
        file(&[kv("k", 9, &value)], &[], 32, &[])
    };
    parse(&nested(MAX_GGUF_ARRAY_DEPTH)).expect("at the depth limit");
    let e = refused(&nested(MAX_GGUF_ARRAY_DEPTH + 1));
    assert_eq!(e.rule, Rule::ArrayTooDeep { key: "k".into() }, "{e}");
    // Tensor names: shorter than 64 bytes, UTF-8.
    let name = "n".repeat(63);
    parse(&file(&[], &[info(&name, &[32], 0, 0)], 32, &[0; 128])).expect("63 bytes");
    let name = "n".repeat(64);
    let e = refused(&file(&[], &[info(&name, &[32], 0, 0)], 32, &[0; 128]));
    assert_eq!(e.rule, Rule::NameTooLong { len: 64 }, "{e}");
    let mut bad = info("ab", &[32], 0, 0);
    bad[8] = 0xff;
    let e = refused(&file(&[], &[bad], 32, &[0; 128]));
    assert!(
        matches!(&e.rule, Rule::NotUtf8 { what } if what == "a tensor name"),
        "{e}"
    );
}

#[test]
fn only_the_architectures_compared_keys_are_kept_and_a_tokenizer_is_streamed_past() {
    let mut tokens = 8u32.to_le_bytes().to_vec();
    let count = 300_000u64;
    tokens.extend_from_slice(&count.to_le_bytes());
    for i in 0..count {
        tokens.extend_from_slice(&s(&format!("tok{i}")));
    }
    let mut layers = 5u32.to_le_bytes().to_vec();
    layers.extend_from_slice(&3u64.to_le_bytes());
    for id in [1i32, 3, 5] {
        layers.extend_from_slice(&id.to_le_bytes());
    }
    let kvs = vec![
        u32_kv("llama.block_count", 9),
        kv("tokenizer.ggml.tokens", 9, &tokens),
        kv("dflash.target_layers", 9, &layers),
        kv(
            "dflash.attention.layer_norm_rms_epsilon",
            6,
            &1e-6f32.to_le_bytes(),
        ),
        kv("dflash.vocab_size", 11, &(-1i64).to_le_bytes()),
        kv("general.architecture", 8, &s("dflash")),
        u32_kv("dflash.unlisted", 1),
        // DSpark's keys are kept, so a draft holding them is named for them (spec 18.3).
        u32_kv("dflash.hyper_connection.count", 4),
        u32_kv("llama.hyper_connection.count", 4),
    ];
    let h = parse(&file(&kvs, &[], 32, &[])).expect("tokenizer");
    let keys: Vec<&str> = h.kept.iter().map(|k| k.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "dflash.target_layers",
            "dflash.attention.layer_norm_rms_epsilon",
            "dflash.vocab_size",
            "general.architecture",
            "dflash.hyper_connection.count"
        ]
    );
    assert_eq!(
        h.get("dflash.target_layers").map(|k| &k.value),
        Some(&Value::Array {
            element: ValueType::I32,
            count: 3,
            integers: Some(vec![1, 3, 5])
        })
    );
    assert_eq!(
        h.get("dflash.attention.layer_norm_rms_epsilon")
            .map(|k| &k.value),
        Some(&Value::Float(f64::from(1e-6f32)))
    );
    assert_eq!(
        h.get("dflash.vocab_size").map(|k| &k.value),
        Some(&Value::Integer(-1))
    );
    assert_eq!(h.metadata_count, 9);
}

#[test]
fn open_names_the_file_the_byte_and_the_rule() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("draft.gguf");
    let mut bytes = good();
    bytes[4..8].copy_from_slice(&1u32.to_le_bytes());
    std::fs::write(&path, &bytes).expect("write");
    let e = Gguf::open(&path).err().expect("version 1 refused");
    assert_eq!((e.reason(), e.path()), ("malformed", path.as_path()), "{e}");
    let text = e.to_string();
    assert!(text.starts_with(&path.display().to_string()), "{text}");
    assert!(text.contains("at byte 4: is GGUF version 1"), "{text}");
    std::fs::write(&path, good()).expect("write");
    let gguf = Gguf::open(&path).expect("good");
    let (info, data) = gguf.tensor("b").expect("b");
    assert_eq!(
        (info.bytes, data.len(), data[0]),
        (40, 40, (128 % 7 + 1) as u8)
    );
    gguf.unchanged().expect("unchanged");
    let e = Gguf::open(dir.path()).err().expect("a directory");
    assert_eq!(e.reason(), "not_a_regular_file", "{e}");
}

/// FNV-1a over the values' bits, little-endian, every NaN as `0x7fc00000`: a NaN's payload is not
/// a value (numpy keeps an f16 signalling NaN's, ggml and `half` quiet it).
fn digest(values: &[f32]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325_u64;
    let bits = |v: &f32| if v.is_nan() { 0x7fc0_0000 } else { v.to_bits() };
    for b in values.iter().flat_map(|v| bits(v).to_le_bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The bytes the expectations below were computed from: a multiplicative hash, with each quantized
/// block's `d` (and `m`) set to a readable f16 and f32 values kept finite.
fn pattern(ty: GgmlType) -> Vec<u8> {
    let blocks = if ty.block_size() == 1 { 64 } else { 3 };
    let size = ty.type_size() as usize;
    let mut raw: Vec<u8> = (0..blocks * size as u64)
        .map(|i| (((i * 37 + u64::from(ty.id()) * 101 + 11) * 2_654_435_761) >> 13) as u8)
        .collect();
    if ty.block_size() == 32 {
        for (b, block) in raw.chunks_exact_mut(size).enumerate() {
            let d = [0.0123f32, -0.5, 3.0][b];
            block[..2].copy_from_slice(&half::f16::from_f32(d).to_bits().to_le_bytes());
            if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
                let m = [-0.1f32, 0.25, -7.0][b];
                block[2..4].copy_from_slice(&half::f16::from_f32(m).to_bits().to_le_bytes());
            }
        }
    } else if ty == GgmlType::F32 {
        for v in raw.chunks_exact_mut(4) {
            let bits = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
            v.copy_from_slice(&((bits & 0x807f_ffff) | 0x3f00_0000).to_le_bytes());
        }
    }
    raw
}

/// What gguf-py 0.19.0's `gguf.quants.dequantize` gives for [`pattern`] (numpy 2.3.5): the value
/// count, the [`digest`] and the first value's bits.
const FROM_GGUF_PY: [(GgmlType, usize, u64, u32); 8] = [
    (GgmlType::F32, 64, 0x1833_5174_0d8d_78b0, 0x3f5b_3611),
    (GgmlType::F16, 64, 0xfac4_c2db_7cfb_ddf6, 0x41c5_2000),
    (GgmlType::BF16, 64, 0xb8f1_92e2_b214_ea86, 0x09e4_0000),
    (GgmlType::Q4_0, 96, 0xf8a2_2203_5a95_0368, 0x3d17_2000),
    (GgmlType::Q4_1, 96, 0x4a17_8c96_97fe_dbda, 0x3d43_0000),
    (GgmlType::Q5_0, 96, 0x882b_83ae_02c5_863f, 0x3e30_5000),
    (GgmlType::Q5_1, 96, 0xeea3_15fc_5d12_98ca, 0x3dc6_4000),
    (GgmlType::Q8_0, 96, 0x7425_fcaf_0a0d_35f9, 0x3eaa_0400),
];

#[test]
fn dequantization_matches_gguf_py_bit_for_bit() {
    for (ty, count, want, first) in FROM_GGUF_PY {
        let bytes = pattern(ty);
        let mut out = vec![0f32; count];
        dequantize(ty, &bytes, &mut out).expect("supported");
        assert_eq!((out[0].to_bits(), digest(&out)), (first, want), "{ty}");
        // Any run of whole blocks gives the same values as the whole.
        let size = ty.type_size() as usize;
        let per = ty.block_size() as usize;
        let mut one = vec![0f32; per];
        dequantize(ty, &bytes[size..2 * size], &mut one).expect("one block");
        assert_eq!(one, out[per..2 * per], "{ty}");
    }
}

#[test]
fn q4_1_is_codes_times_d_plus_m_low_nibbles_first() {
    let mut block = [0u8; 20];
    block[..2].copy_from_slice(&half::f16::from_f32(0.5).to_bits().to_le_bytes());
    block[2..4].copy_from_slice(&half::f16::from_f32(-1.0).to_bits().to_le_bytes());
    block[4] = 0x3a; // element 0 is 0xa, element 16 is 0x3
    let mut out = [0f32; 32];
    dequantize(GgmlType::Q4_1, &block, &mut out).expect("q4_1");
    assert_eq!((out[0], out[16], out[1]), (4.0, 0.5, -1.0));
}

#[test]
fn other_types_and_wrong_lengths_are_errors_naming_the_type() {
    let e = dequantize(GgmlType::Q4_K, &[0; 144], &mut [0f32; 256]).expect_err("q4_K");
    assert_eq!(e, DequantError::Unsupported(GgmlType::Q4_K));
    assert!(
        e.to_string()
            .contains("ggml type q4_K (id 12) is not one the gate dequantizes"),
        "{e}"
    );
    for &ty in GgmlType::ALL {
        let ok = dequantize(ty, &[], &mut []).is_ok();
        assert_eq!(ok, supported(ty), "{ty}");
    }
    let e = dequantize(GgmlType::Q8_0, &[0; 35], &mut [0f32; 32]).expect_err("length");
    assert!(
        matches!(
            e,
            DequantError::Length {
                bytes: 35,
                values: 32,
                ..
            }
        ),
        "{e}"
    );
    let e = dequantize(GgmlType::F16, &[0; 4], &mut [0f32; 3]).expect_err("length");
    assert!(matches!(e, DequantError::Length { .. }), "{e}");
}

/// A hostile file's cost is its bytes, not its bytes times a key's length: 4,096 empty strings and
/// 4,096 empty arrays under 65,534-byte keys are read asking the heap for less than the file's own
/// size of 213 KB (with each element's description formatted as it is checked, the key copied for
/// every element, it asked for 1.6 GB). A count, not a time, so a loaded machine cannot fail it.
#[test]
fn a_long_key_over_many_elements_costs_only_the_files_bytes() {
    let key = "k".repeat(MAX_GGUF_KEY_BYTES as usize - 1);
    let count = 1u64 << 12;
    let mut strings = 8u32.to_le_bytes().to_vec();
    strings.extend_from_slice(&count.to_le_bytes());
    strings.resize(strings.len() + 8 * count as usize, 0);
    let mut arrays = 9u32.to_le_bytes().to_vec();
    arrays.extend_from_slice(&count.to_le_bytes());
    for _ in 0..count {
        arrays.extend_from_slice(&0u32.to_le_bytes());
        arrays.extend_from_slice(&0u64.to_le_bytes());
    }
    let bytes = file(
        &[kv(&key, 9, &strings), kv(&format!("{key}2"), 9, &arrays)],
        &[],
        32,
        &[],
    );
    let (h, asked) = crate::testing::heap_asked_by(|| parse(&bytes));
    assert_eq!(h.expect("long keys, many elements").metadata_count, 2);
    assert!(
        asked < bytes.len() as u64,
        "the parse asked the heap for {asked} bytes, reading a file of {}",
        bytes.len()
    );
}

/// An array of strings is read in one loop (the tokenizer's fast path), and still holds every
/// string to the rules one string is held to: UTF-8 that is not ASCII is read, bytes that are not
/// UTF-8 are refused naming the key, and a length past the end is refused before it is used.
#[test]
fn an_array_of_strings_is_held_to_the_rules_of_one_string() {
    let array = |strings: &[&[u8]]| {
        let mut out = 8u32.to_le_bytes().to_vec();
        out.extend_from_slice(&(strings.len() as u64).to_le_bytes());
        for text in strings {
            out.extend_from_slice(&(text.len() as u64).to_le_bytes());
            out.extend_from_slice(text);
        }
        out
    };
    let tokens = |strings: &[&[u8]]| {
        let mut kvs = good_kvs();
        kvs.push(kv("tokenizer.ggml.tokens", 9, &array(strings)));
        file(&kvs, &good_infos(), 32, &good_data())
    };
    parse(&tokens(&[b"a", "\u{e9}t\u{e9}".as_bytes(), b"", b"tok"])).expect("UTF-8 strings");
    let e = refused(&tokens(&[b"a", b"b\xff", b"c"]));
    assert!(
        matches!(&e.rule, Rule::NotUtf8 { what } if what.contains("tokenizer.ggml.tokens")),
        "{e}"
    );
    let mut past = good_kvs();
    let mut value = array(&[b"a"]);
    // The second string claims more bytes than the file has left.
    value[4..12].copy_from_slice(&2u64.to_le_bytes());
    value.extend_from_slice(&u64::MAX.to_le_bytes());
    past.push(kv("tokenizer.ggml.tokens", 9, &value));
    let e = refused(&file(&past, &good_infos(), 32, &good_data()));
    assert!(matches!(e.rule, Rule::PastEnd { .. }), "{e}");
}
