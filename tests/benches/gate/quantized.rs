//! Quantized Hugging Face folders of the reference geometry: compressed-tensors W4A16 (group 128)
//! and MLX affine 4-bit (group 64), the whole gate against a floor that lists the folder, parses
//! config.json and the safetensors header, maps the file and reads, once on every core, exactly the
//! bytes the rules must read: every scale, bias and `weight_shape`, and every dense tensor. The packed codes are not read by the gate (no rule needs
//! them: every code of a packed integer is a valid one), so the floor skips them too; target
//! gate/floor <= 1.3. As for the bf16 folder, each round times both back to back and the ratio is
//! taken per round; here a round times [`BATCH`] of each, since one takes a millisecond.

use super::folder::{ensure_folder, rounds};
use super::ms;
use gate_tests::synth::pack_quantized::{pack_quantize, PackOptions};
use gate_tests::synth::quantized::{mlx_quantize, Mlx};
use std::hint::black_box;
use std::path::Path;

const CHUNK_BYTES: usize = 1 << 20;

/// Floors and gates timed together in a round (each takes a millisecond or a few).
const BATCH: usize = 20;

pub fn run(cache: &Path, runs: usize) {
    let drafts: [Draft; 2] = [
        ("compressed-tensors W4A16 group 128", w4a16),
        ("MLX affine 4-bit group 64", affine),
    ];
    for (i, (name, quantize)) in drafts.into_iter().enumerate() {
        let dir = cache.join(format!("quantized-bolt-{i}"));
        ensure_folder(&dir, name, quantize);
        measure(name, &dir, runs);
    }
}

/// A bench draft: its name, and how the bf16 folder is quantized into it.
type Draft = (&'static str, fn(&Path));

fn w4a16(d: &Path) {
    let options = PackOptions {
        bits: 4,
        group: Some(128),
        symmetric: true,
        ignore: &[],
    };
    pack_quantize(d, options)
}

fn affine(d: &Path) {
    let p = Mlx {
        mode: "affine",
        bits: 4,
        group: 64,
    };
    mlx_quantize(d, p, &[], &[])
}

fn measure(name: &str, dir: &Path, runs: usize) {
    let path = dir.join("model.safetensors");
    let options = dflash_gate::Options::default();
    let report = dflash_gate::gate(dir, &options).expect("gate runs");
    assert_eq!(
        report.verdict(),
        dflash_gate::Outcome::Pass,
        "{}",
        report.to_text(false)
    );
    let read = read_ranges(&path);
    let floor = || {
        // What any gate must do before it reads a value: list the folder, parse config.json and
        // the safetensors header (to know where each scale is), and map the file.
        let listed = std::fs::read_dir(dir).expect("the folder").count();
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("config.json")).expect("config"))
                .expect("a config");
        let map = dflash_gate::__private::files::bytes(&path).expect("the weights");
        let bytes = map.as_slice();
        let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
        let header: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&bytes[8..8 + n]).expect("a header");
        black_box((listed, config, header.len()));
        let chunks: Vec<&[u8]> = read
            .iter()
            .flat_map(|&(b, e)| bytes[b..e].chunks(CHUNK_BYTES))
            .collect();
        super::finite::read_every_byte(&chunks)
    };
    let (floor, gate, ratios) = rounds(runs, BATCH, floor, || {
        dflash_gate::gate(dir, &options).expect("gate runs")
    });
    let file = report.census().file_bytes.unwrap_or(0);
    let needed: usize = read.iter().map(|(b, e)| e - b).sum();
    println!(
        "\n{name}, reference geometry: {} tensors, {:.1} MB, of which the rules read {:.1} MB ({runs} runs)",
        report.census().tensors.len(),
        file as f64 / 1e6,
        needed as f64 / 1e6
    );
    println!(
        "  floor (parse the config and header, read the scales and dense tensors) {:>8.1}ms",
        ms(floor)
    );
    println!(
        "  gate                                                                  {:>8.1}ms",
        ms(gate)
    );
    println!(
        "  gate/floor per round: median {:.2}, range {:.2} .. {:.2} (target <= 1.3)",
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1]
    );
}

/// The byte ranges the rules read: the header, and every tensor but packed codes (compressed-
/// tensors' `weight_packed`, MLX's U32 `weight`).
fn read_ranges(path: &Path) -> Vec<(usize, usize)> {
    let mut file = std::fs::File::open(path).expect("the weights");
    let mut len = [0u8; 8];
    std::io::Read::read_exact(&mut file, &mut len).expect("the header length");
    let n = u64::from_le_bytes(len) as usize;
    let mut header = vec![0u8; n];
    std::io::Read::read_exact(&mut file, &mut header).expect("the header");
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&header).expect("a header");
    let mut ranges = vec![(0, 8 + n)];
    for (name, t) in header.iter().filter(|(k, _)| *k != "__metadata__") {
        let codes = name.ends_with(".weight_packed") || t["dtype"] == "U32";
        if codes {
            continue;
        }
        let [b, e] = [0, 1].map(|i| t["data_offsets"][i].as_u64().expect("an offset") as usize);
        ranges.push((8 + n + b, 8 + n + e));
    }
    ranges
}
