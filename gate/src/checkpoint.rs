//! A checkpoint directory as its publisher ships it: `config.json` plus `model.safetensors`, or shards
//! named by `model.safetensors.index.json`. Read by `--source` (whole) and by `--target` (headers only).
//!
//! Every shard is read with the package container's strict parser and limits. The index is untrusted
//! input: every shard it names must be a plain file name inside the directory, every tensor must sit in
//! exactly one shard, and the index's names and the shards' headers must agree both ways. Anything
//! else is a [`PackageError`] (exit 2): a checkpoint that cannot be read is not a verdict on a package.

use crate::container::{parse_header_only, Table, TensorInfo};
use crate::error::PackageError;
use crate::files::{self, Bytes, FileError, RegularFile, CONFIG_FILE};
use crate::limits::{MAX_CONFIG_BYTES, MAX_HEADER_BYTES};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub const SINGLE_FILE: &str = "model.safetensors";
pub const INDEX_FILE: &str = "model.safetensors.index.json";

/// A checkpoint's config bytes and its shards' headers, with every tensor located once.
pub struct Headers {
    pub dir: PathBuf,
    pub config: Vec<u8>,
    /// Each shard: its file name, its open file, and its table.
    pub shards: Vec<(String, RegularFile, Table)>,
    /// Tensor name -> (shard, entry in that shard's table).
    at: HashMap<String, (usize, usize)>,
}

/// A checkpoint with every shard's bytes in hand (mapped when large).
pub struct Checkpoint {
    pub headers: Headers,
    bytes: Vec<Bytes>,
}

impl Headers {
    /// Reads config.json and every shard's header; no tensor data.
    pub fn read(dir: &Path) -> Result<Headers, PackageError> {
        crate::error::require_dir(dir)?;
        let config = match files::read_capped(&dir.join(CONFIG_FILE), MAX_CONFIG_BYTES) {
            Ok(bytes) => bytes,
            Err(FileError::NotFound { .. }) => {
                return Err(PackageError::NoConfig {
                    path: dir.to_owned(),
                })
            }
            Err(e) => return Err(e.into()),
        };
        let (names, index) = shard_names(dir)?;
        let mut shards = Vec::with_capacity(names.len());
        let mut at = HashMap::new();
        for name in names {
            let file = files::open(&dir.join(&name))?;
            let table = read_table(&file)?;
            for (i, entry) in table.entries.iter().enumerate() {
                if let Some((other, _)) = at.insert(entry.name.clone(), (shards.len(), i)) {
                    let first: &(String, RegularFile, Table) = &shards[other];
                    return Err(malformed(
                        &dir.join(&name),
                        format!("tensor {} is also in {}", entry.name, first.0),
                    ));
                }
            }
            shards.push((name, file, table));
        }
        let headers = Headers {
            dir: dir.to_owned(),
            config,
            shards,
            at,
        };
        if let Some(index) = index {
            headers.agree_with(&index)?;
        }
        Ok(headers)
    }

    /// Every tensor the index names is in the shard it names, and every shard tensor is named.
    fn agree_with(&self, index: &HashMap<String, String>) -> Result<(), PackageError> {
        let path = self.dir.join(INDEX_FILE);
        let mut names: Vec<&String> = index.keys().collect();
        names.sort();
        for name in names {
            let shard = &index[name];
            match self.at.get(name) {
                None => {
                    return Err(malformed(
                        &path,
                        format!(
                            "tensor {name} is listed in {shard} but that shard has no such tensor"
                        ),
                    ))
                }
                Some(&(s, _)) if self.shards[s].0 != *shard => {
                    return Err(malformed(
                        &path,
                        format!(
                            "tensor {name} is listed in {shard} but stored in {}",
                            self.shards[s].0
                        ),
                    ))
                }
                Some(_) => {}
            }
        }
        if let Some((name, &(s, _))) = self.at.iter().find(|(n, _)| !index.contains_key(*n)) {
            return Err(malformed(
                &path,
                format!(
                    "tensor {name} in {} is not in the index's weight_map",
                    self.shards[s].0
                ),
            ));
        }
        Ok(())
    }

    /// The header entry of `name`, and the shard holding it.
    pub fn get(&self, name: &str) -> Option<(usize, &TensorInfo)> {
        let &(s, e) = self.at.get(name)?;
        Some((s, &self.shards[s].2.entries[e]))
    }

    /// Every tensor, in shard order then file order.
    pub fn entries(&self) -> impl Iterator<Item = &TensorInfo> {
        self.shards.iter().flat_map(|(_, _, t)| t.entries.iter())
    }

    /// Takes every shard's bytes (mapping the large ones), for reading tensor data.
    pub fn into_checkpoint(self) -> Result<Checkpoint, PackageError> {
        let mut bytes = Vec::with_capacity(self.shards.len());
        for (_, file, table) in &self.shards {
            let whole = files::bytes(file.path())?;
            if whole.len() != table.header_bytes + table.data_len {
                return Err(FileError::Changed {
                    path: file.path().to_owned(),
                    why: format!(
                        "{} bytes when its header was read, {} now",
                        table.header_bytes + table.data_len,
                        whole.len()
                    ),
                }
                .into());
            }
            bytes.push(whole);
        }
        Ok(Checkpoint {
            headers: self,
            bytes,
        })
    }
}

impl Checkpoint {
    /// Reads a checkpoint directory whole (config, index, every shard).
    pub fn open(dir: &Path) -> Result<Checkpoint, PackageError> {
        Headers::read(dir)?.into_checkpoint()
    }

    /// Every shard still has the size and modification time it had when opened: a checkpoint rewritten
    /// while it was compared is an error, not a verdict.
    pub fn unchanged(&self) -> Result<(), PackageError> {
        for bytes in &self.bytes {
            bytes.unchanged()?;
        }
        Ok(())
    }

    /// The header entry and data bytes of `name`.
    pub fn tensor(&self, name: &str) -> Option<(&TensorInfo, &[u8])> {
        let (s, info) = self.headers.get(name)?;
        let table = &self.headers.shards[s].2;
        let begin = usize::try_from(table.header_bytes + info.begin).ok()?;
        let end = usize::try_from(table.header_bytes + info.end).ok()?;
        Some((info, self.bytes[s].as_slice().get(begin..end)?))
    }
}

/// Reads a safetensors file's header and nothing more: 8 bytes, then `n` (bounded by the limit and the
/// file's size before it sizes a buffer), then the strict parse against the file's length.
pub fn read_table(file: &RegularFile) -> Result<Table, PackageError> {
    let path = file.path();
    let file_len = file.len();
    if file_len < 8 {
        return Err(malformed(
            path,
            format!("{file_len} bytes: shorter than a container's 8-byte length prefix"),
        ));
    }
    let mut prefix = [0u8; 8];
    file.read_exact_at(0, &mut prefix)?;
    let n = u64::from_le_bytes(prefix);
    if n > MAX_HEADER_BYTES || 8 + n > file_len {
        return Err(malformed(
            path,
            format!("header length {n} is over the {MAX_HEADER_BYTES}-byte limit or past the end of the {file_len}-byte file"),
        ));
    }
    let mut header = vec![0u8; 8 + n as usize];
    header[..8].copy_from_slice(&prefix);
    file.read_exact_at(8, &mut header[8..])?;
    parse_header_only(&header, file_len).map_err(|e| {
        malformed(
            path,
            format!("does not parse as a safetensors container: {e}"),
        )
    })
}

/// The shard file names: the index's shards (sorted, each once), else `model.safetensors` alone.
#[allow(clippy::type_complexity)]
fn shard_names(dir: &Path) -> Result<(Vec<String>, Option<HashMap<String, String>>), PackageError> {
    let index_path = dir.join(INDEX_FILE);
    let bytes = match files::read_capped(&index_path, MAX_CONFIG_BYTES) {
        Ok(bytes) => bytes,
        Err(FileError::NotFound { .. }) => {
            if dir.join(SINGLE_FILE).exists() {
                return Ok((vec![SINGLE_FILE.to_owned()], None));
            }
            return Err(malformed(
                dir,
                format!("no weights: neither {SINGLE_FILE} nor {INDEX_FILE}"),
            ));
        }
        Err(e) => return Err(e.into()),
    };
    let index = parse_index(&bytes).map_err(|why| malformed(&index_path, why))?;
    let mut names: Vec<String> = index.values().cloned().collect();
    names.sort();
    names.dedup();
    if names.is_empty() {
        return Err(malformed(
            &index_path,
            "weight_map lists no tensors".to_owned(),
        ));
    }
    Ok((names, Some(index)))
}

/// `weight_map` of an index file: tensor name -> shard file name, each shard a plain file name.
fn parse_index(bytes: &[u8]) -> Result<HashMap<String, String>, String> {
    let value = crate::strict_json::parse(bytes).map_err(|e| format!("not valid JSON: {e}"))?;
    let Some(Value::Object(map)) = value.get("weight_map") else {
        return Err("has no weight_map object".to_owned());
    };
    let mut index = HashMap::with_capacity(map.len());
    for (name, shard) in map {
        let Value::String(shard) = shard else {
            return Err(format!("weight_map entry {name} is not a file name string"));
        };
        let plain = !shard.is_empty()
            && shard != "."
            && shard != ".."
            && !shard.contains(['/', '\\', '\0']);
        if !plain {
            return Err(format!(
                "weight_map entry {name} names {shard:?}, not a file inside the checkpoint"
            ));
        }
        index.insert(name.clone(), shard.clone());
    }
    Ok(index)
}

fn malformed(path: &Path, why: String) -> PackageError {
    PackageError::Malformed {
        path: path.to_owned(),
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A safetensors file holding one BF16 `[2]` tensor per name.
    fn shard(names: &[&str]) -> Vec<u8> {
        let entries: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                format!(
                    "\"{n}\":{{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[{},{}]}}",
                    4 * i,
                    4 * i + 4
                )
            })
            .collect();
        let mut header = format!("{{{}}}", entries.join(",")).into_bytes();
        while header.len() % 8 != 0 {
            header.push(b' ');
        }
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&header);
        out.resize(out.len() + 4 * names.len(), 0);
        out
    }

    fn checkpoint(files: &[(&str, Vec<u8>)]) -> Result<Checkpoint, PackageError> {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(CONFIG_FILE), b"{}").expect("config");
        for (name, bytes) in files {
            std::fs::write(dir.path().join(name), bytes).expect("file");
        }
        Checkpoint::open(dir.path())
    }

    fn index(map: &str) -> Vec<u8> {
        format!("{{\"weight_map\": {{{map}}}}}").into_bytes()
    }

    fn refused(files: &[(&str, Vec<u8>)], says: &str) {
        match checkpoint(files) {
            Ok(_) => panic!("read a checkpoint that should be refused ({says})"),
            Err(e) => assert!(e.to_string().contains(says), "{e}"),
        }
    }

    #[test]
    fn single_and_sharded_checkpoints_read_every_tensor_once() {
        let one = checkpoint(&[(SINGLE_FILE, shard(&["a", "b"]))]).expect("single");
        assert_eq!(
            one.tensor("b").map(|(i, d)| (i.shape.clone(), d.len())),
            Some((vec![2], 4))
        );
        let sharded = checkpoint(&[
            ("s1", shard(&["a"])),
            ("s2", shard(&["b"])),
            (INDEX_FILE, index(r#""a": "s1", "b": "s2""#)),
        ])
        .expect("sharded");
        assert!(sharded.tensor("a").is_some() && sharded.tensor("b").is_some());
        assert!(sharded.tensor("c").is_none());
    }

    #[test]
    fn an_untrusted_index_is_held_to_the_shards() {
        refused(
            &[(INDEX_FILE, index(r#""a": "../s1""#))],
            "not a file inside the checkpoint",
        );
        refused(&[(INDEX_FILE, index(r#""a": "s1""#))], "no such file");
        refused(
            &[
                ("s1", shard(&["a"])),
                (INDEX_FILE, index(r#""a": "s1", "b": "s1""#)),
            ],
            "tensor b is listed in s1 but that shard has no such tensor",
        );
        refused(
            &[
                ("s1", shard(&["a", "b"])),
                (INDEX_FILE, index(r#""a": "s1""#)),
            ],
            "tensor b in s1 is not in the index's weight_map",
        );
        refused(
            &[
                ("s1", shard(&["a"])),
                ("s2", shard(&["a", "b"])),
                (INDEX_FILE, index(r#""a": "s1", "b": "s2""#)),
            ],
            "tensor a is also in s1",
        );
        refused(
            &[(INDEX_FILE, b"{\"weight_map\": []}".to_vec())],
            "has no weight_map object",
        );
        refused(&[], "no weights");
        let mut trailing = shard(&["a"]);
        trailing.push(0);
        refused(&[(SINGLE_FILE, trailing)], "does not parse");
    }
}
