//! `--target` on a 27B-size target read by header only: a Hugging Face folder whose single
//! `model.safetensors` declares about 50 GB of bf16, and a GGUF model file of about 16 GB. Both weight
//! files are sparse (the header written, then the file extended to its full length), so they cost no
//! disk; a gate that read any tensor's data would take seconds here. The figure is the time `--target`
//! adds to gating the small draft: it should stay under 50 ms.

use super::{median, ms};
use gate_tests::arms::{Base, SEED};
use gate_tests::defects::Scenario;
use gate_tests::synth::gguf::GgufFile;
use gate_tests::synth::{header_bytes, Encoding, Entry, Package};
use std::path::Path;
use std::time::Instant;

/// A 27B dense model's shape (Qwen3.5-27B-like): 64 layers of hidden 5120.
const HIDDEN: u64 = 5120;
const LAYERS: u64 = 64;
const INTERMEDIATE: u64 = 17408;
const VOCAB: u64 = 151_936;

pub fn run(cache: &Path, runs: usize) {
    let root = cache.join("target-27b");
    let draft = root.join("draft");
    let folder = root.join("folder");
    let gguf = root.join("target.gguf");
    std::fs::create_dir_all(&draft).expect("bench dir");
    Scenario::new(Package::generate(
        &Base::Small.geometry(),
        Encoding::default(),
        SEED,
    ))
    .write(&draft)
    .expect("draft");
    let declared = write_folder(&folder);
    let gguf_bytes = write_gguf(&gguf);
    let time = |target: Option<&Path>| {
        let options = match target {
            Some(t) => dflash_gate::Options::default().with_target(t),
            None => dflash_gate::Options::default(),
        };
        let mut times = Vec::new();
        for _ in 0..runs.max(3) {
            let start = Instant::now();
            let report = dflash_gate::gate(&draft, &options).expect("the gate runs");
            times.push(start.elapsed());
            std::hint::black_box(report);
        }
        median(times)
    };
    let alone = time(None);
    println!("--target on a 27B-size target, read by header only (median of {runs} runs):");
    for (name, path, bytes) in [
        ("safetensors folder", folder.as_path(), declared),
        ("GGUF model file", gguf.as_path(), gguf_bytes),
    ] {
        let with = time(Some(path));
        let added = with.saturating_sub(alone);
        println!(
            "  {name:<20} {:>6.1} GB declared: gate {:>7.2} ms, without --target {:>7.2} ms, --target adds {:>6.2} ms ({})",
            bytes as f64 / 1e9,
            ms(with),
            ms(alone),
            ms(added),
            if ms(added) < 50.0 { "under 50 ms" } else { "OVER 50 ms" }
        );
    }
}

/// `config.json` and a sparse `model.safetensors` whose header lists every tensor of the model;
/// returns the bytes its tensors declare.
fn write_folder(dir: &Path) -> u64 {
    std::fs::create_dir_all(dir).expect("folder");
    let config = serde_json::json!({
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "intermediate_size": INTERMEDIATE,
        "vocab_size": VOCAB,
        "rope_theta": 1_000_000.0,
    });
    std::fs::write(dir.join("config.json"), config.to_string()).expect("config");
    std::fs::write(dir.join("tokenizer.json"), b"{}").expect("tokenizer");
    let mut entries = Vec::new();
    let mut offset = 0u64;
    let mut push = |name: String, shape: [u64; 2]| {
        let len = shape[0] * shape[1] * 2;
        entries.push(Entry {
            name,
            dtype: "BF16".to_owned(),
            shape: shape.iter().map(|&d| d as i64).collect(),
            offsets: [offset, offset + len],
        });
        offset += len;
    };
    push("model.embed_tokens.weight".to_owned(), [VOCAB, HIDDEN]);
    for i in 0..LAYERS {
        for p in ["q_proj", "k_proj", "v_proj", "o_proj"] {
            push(
                format!("model.layers.{i}.self_attn.{p}.weight"),
                [HIDDEN, HIDDEN],
            );
        }
        for p in ["gate_proj", "up_proj"] {
            push(
                format!("model.layers.{i}.mlp.{p}.weight"),
                [INTERMEDIATE, HIDDEN],
            );
        }
        push(
            format!("model.layers.{i}.mlp.down_proj.weight"),
            [HIDDEN, INTERMEDIATE],
        );
    }
    push("lm_head.weight".to_owned(), [VOCAB, HIDDEN]);
    let header = header_bytes(&entries, &[]);
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(&header);
    let path = dir.join("model.safetensors");
    std::fs::write(&path, &bytes).expect("header");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("weights");
    file.set_len(bytes.len() as u64 + offset).expect("sparse");
    offset
}

/// A sparse GGUF of the same model in Q4_K (4.5 bits a weight); returns its length.
fn write_gguf(path: &Path) -> u64 {
    use dflash_gate::__private::gguf::GgmlType;
    let mut f = GgufFile::new();
    f.string("general.architecture", "qwen3");
    f.u32("qwen3.block_count", LAYERS as u32);
    f.u32("qwen3.embedding_length", HIDDEN as u32);
    f.f32("qwen3.rope.freq_base", 1_000_000.0);
    f.i32_array("tokenizer.ggml.token_type", &vec![1; VOCAB as usize]);
    // Q4_K: 144 bytes per 256 weights. The data vectors are empty; the file is extended below.
    let q4k = |n: u64, k: u64| n * k / 256 * 144;
    let mut infos = vec![("token_embd.weight".to_owned(), vec![HIDDEN, VOCAB])];
    for i in 0..LAYERS {
        for p in ["attn_q", "attn_k", "attn_v", "attn_output"] {
            infos.push((format!("blk.{i}.{p}.weight"), vec![HIDDEN, HIDDEN]));
        }
        for p in ["ffn_gate", "ffn_up"] {
            infos.push((format!("blk.{i}.{p}.weight"), vec![HIDDEN, INTERMEDIATE]));
        }
        infos.push((
            format!("blk.{i}.ffn_down.weight"),
            vec![INTERMEDIATE, HIDDEN],
        ));
    }
    infos.push(("output.weight".to_owned(), vec![HIDDEN, VOCAB]));
    let mut lens = Vec::new();
    for (name, dims) in infos {
        lens.push(q4k(dims[0], dims[1]));
        // No data: the file is extended to the length the header declares.
        f.tensor(&name, dims, GgmlType::Q4_K, Vec::new());
    }
    let (header, total) = f.header_declaring(&lens);
    std::fs::write(path, &header).expect("gguf");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("gguf");
    file.set_len(total).expect("sparse");
    total
}
