//! The committed fixture package (`fixtures/tiny`) and copies of it to break, for the command-line
//! tests of the gate package.

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The committed package every command-line test starts from.
pub fn tiny() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/tiny")
}

/// A copy of the fixture's config.json and weight file in `root/name` (created as needed).
pub fn copy(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("creates the copy's directory");
    for file in ["config.json", "model.q4nx"] {
        std::fs::copy(tiny().join(file), dir.join(file)).expect("copies the fixture");
    }
    dir
}

/// Rewrites `dir/config.json` through `edit`.
pub fn edit_config(dir: &Path, edit: impl FnOnce(&mut Map<String, Value>)) {
    let path = dir.join("config.json");
    let bytes = std::fs::read(&path).expect("reads config.json");
    let mut config: Value = serde_json::from_slice(&bytes).expect("config.json is JSON");
    edit(config.as_object_mut().expect("config.json is an object"));
    std::fs::write(path, serde_json::to_vec(&config).expect("serializes")).expect("writes");
}

/// A target package for the fixture in `root/target`: a config matching the fixture's hidden size,
/// depth and vocabulary, and a tokenizer, but no weight file (callers add the one they test).
pub fn target_without_weights(root: &Path) -> PathBuf {
    let target = root.join("target");
    std::fs::create_dir_all(&target).expect("creates the target directory");
    std::fs::write(
        target.join("config.json"),
        br#"{"hidden_size": 256, "num_hidden_layers": 8, "vocab_size": 1000, "rope_theta": 1000000.0}"#,
    )
    .expect("writes the target's config.json");
    std::fs::write(
        target.join("tokenizer.json"),
        br#"{"added_tokens": [{"id": 998, "content": "<|endoftext|>", "special": true}],
            "model": {"type": "BPE", "vocab": {"a": 0}}}"#,
    )
    .expect("writes the tokenizer");
    target
}

/// A Hugging Face hub cache entry: `models--org--draft/snapshots/<rev>/` whose files are links into
/// `../../blobs/`, each blob named by its digest, as the hub client lays them out. `extra` files are
/// added the same way; the manifest lists every file and is itself a link into the blobs. Returns the
/// snapshot directory, the package to gate.
pub fn hub_snapshot(root: &Path, extra: &[(&str, &[u8])]) -> PathBuf {
    let repo = root.join("models--org--draft");
    let blobs = repo.join("blobs");
    let snapshot = repo.join("snapshots").join("0123456789abcdef");
    std::fs::create_dir_all(&blobs).expect("writes the hub cache");
    std::fs::create_dir_all(&snapshot).expect("writes the hub cache");
    let mut files: Vec<(String, Vec<u8>)> = ["config.json", "model.q4nx"]
        .iter()
        .map(|f| {
            (
                f.to_string(),
                std::fs::read(tiny().join(f)).expect("reads the fixture"),
            )
        })
        .collect();
    files.extend(extra.iter().map(|(n, b)| (n.to_string(), b.to_vec())));
    let mut manifest = String::new();
    let link = |name: &str, bytes: &[u8]| {
        let incoming = blobs.join("incoming");
        std::fs::write(&incoming, bytes).expect("writes the hub cache");
        let (hex, _) = dflash_gate::__private::manifest::hash_file(&incoming, &mut [0u8; 4096])
            .expect("hashes the blob");
        std::fs::rename(&incoming, blobs.join(&hex)).expect("writes the hub cache");
        std::os::unix::fs::symlink(format!("../../blobs/{hex}"), snapshot.join(name))
            .expect("writes the hub cache");
        hex
    };
    for (name, bytes) in &files {
        let hex = link(name, bytes);
        manifest.push_str(&format!("{hex}  {name}\n"));
    }
    link("MANIFEST.sha256", manifest.as_bytes());
    snapshot
}

/// A Hugging Face hub cache entry as a download leaves it, with no `MANIFEST.sha256`: the weight
/// file's blob named by its SHA-256 (a Git LFS object, the hub's LFS etag), config.json's and each
/// of `extra`'s by git's blob hash (SHA-1 over `blob <length>\0` and the bytes), as the hub names
/// small files kept in git. Returns the snapshot directory.
pub fn hub_download(root: &Path, extra: &[(&str, &[u8])]) -> PathBuf {
    use sha1::Digest;
    let repo = root.join("models--org--draft");
    let blobs = repo.join("blobs");
    let snapshot = repo
        .join("snapshots")
        .join("4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a");
    std::fs::create_dir_all(&blobs).expect("writes the hub cache");
    std::fs::create_dir_all(&snapshot).expect("writes the hub cache");
    std::fs::create_dir_all(repo.join("refs")).expect("writes the hub cache");
    std::fs::write(
        repo.join("refs/main"),
        snapshot.file_name().unwrap().as_encoded_bytes(),
    )
    .expect("writes the hub cache");
    let mut files: Vec<(String, Vec<u8>)> = ["config.json", "model.q4nx"]
        .iter()
        .map(|f| {
            (
                f.to_string(),
                std::fs::read(tiny().join(f)).expect("reads the fixture"),
            )
        })
        .collect();
    files.extend(extra.iter().map(|(n, b)| (n.to_string(), b.to_vec())));
    for (name, bytes) in &files {
        let hex: String = if name.ends_with(".q4nx") {
            let incoming = blobs.join("incoming");
            std::fs::write(&incoming, bytes).expect("writes the hub cache");
            dflash_gate::__private::manifest::hash_file(&incoming, &mut [0u8; 4096])
                .expect("hashes the blob")
                .0
        } else {
            let mut git = sha1::Sha1::new();
            git.update(format!("blob {}\0", bytes.len()).as_bytes());
            git.update(bytes);
            git.finalize().iter().map(|b| format!("{b:02x}")).collect()
        };
        std::fs::write(blobs.join(&hex), bytes).expect("writes the hub cache");
        std::os::unix::fs::symlink(format!("../../blobs/{hex}"), snapshot.join(name))
            .expect("writes the hub cache");
    }
    let _ = std::fs::remove_file(blobs.join("incoming"));
    snapshot
}
