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
        br#"{"hidden_size": 256, "num_hidden_layers": 8, "vocab_size": 1000}"#,
    )
    .expect("writes the target's config.json");
    std::fs::write(target.join("tokenizer.json"), b"{}").expect("writes the tokenizer");
    target
}
