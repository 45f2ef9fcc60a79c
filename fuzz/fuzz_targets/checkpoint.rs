//! The checkpoint reader (`--source`, `--target`) on an arbitrary directory: the input is cut into
//! files by 4-byte little-endian lengths (config.json, then either model.safetensors alone or an
//! index and two shards) and written to a scratch directory, which is then read whole. The only
//! property is that it returns.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gate-fuzz-checkpoint-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// The next piece of `data`: a 4-byte length, then that many bytes (as many as there are).
fn piece<'a>(data: &mut &'a [u8]) -> &'a [u8] {
    let Some((len, rest)) = data.split_first_chunk::<4>() else {
        return &[];
    };
    let len = (u32::from_le_bytes(*len) as usize).min(rest.len());
    let (head, tail) = rest.split_at(len);
    *data = tail;
    head
}

fuzz_target!(|data: &[u8]| {
    let Some((&layout, mut data)) = data.split_first() else { return };
    let dir = scratch();
    for old in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let _ = std::fs::remove_file(old.path());
    }
    let names: &[&str] = if layout % 2 == 0 {
        &["config.json", "model.safetensors"]
    } else {
        &[
            "config.json",
            "model.safetensors.index.json",
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
        ]
    };
    for name in names {
        let bytes = piece(&mut data);
        let _ = std::fs::write(dir.join(name), bytes);
    }
    if let Ok(headers) = dflash_gate::__private::checkpoint::Headers::read(&dir) {
        let _ = headers.entries().count();
    }
    if let Ok(checkpoint) = dflash_gate::__private::checkpoint::Checkpoint::open(&dir) {
        let names: Vec<String> = checkpoint.headers.entries().map(|e| e.name.clone()).collect();
        for name in &names {
            let _ = checkpoint.tensor(name);
        }
    }
});
