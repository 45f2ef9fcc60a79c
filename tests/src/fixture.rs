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
