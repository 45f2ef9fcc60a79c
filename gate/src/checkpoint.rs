//! A checkpoint directory as its publisher ships it: `config.json` plus `model.safetensors`, or shards
//! named by `model.safetensors.index.json`. Read by `--source` (whole) and by `--target` (headers only).
//!
//! Every shard is read with the package container's strict parser and limits. The index is untrusted
//! input: every shard it names must be a plain file name inside the directory, every tensor must sit in
//! exactly one shard, and the index's names and the shards' headers must agree both ways (checked shard
//! by shard, as each header is read). A directory holding both `model.safetensors` and an index is
//! read as that one file when the index names exactly it and its tensors (mlx-lm's layout), and
//! refused otherwise: loaders differ on which they read. Anything else is a [`PackageError`] (exit 2): a
//! checkpoint that cannot be read is not a verdict on a package.

use crate::container::{self, parse_header_only, Table, TensorInfo};
use crate::error::PackageError;
use crate::files::{self, Bytes, FileError, RegularFile, CONFIG_FILE, GUARDED_MAPS};
use crate::limits::{
    MAX_CONFIG_BYTES, MAX_HEADER_BYTES, MAX_INDEX_BYTES, MAX_TENSORS, RECOGNISE_BYTES,
};
use crate::strict_json::Skip;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

pub const SINGLE_FILE: &str = "model.safetensors";
pub const INDEX_FILE: &str = "model.safetensors.index.json";
/// The index a repository that keeps its draft in a `dflash/` folder (MiMo's layout, spec 18.2) may
/// name its draft's weights by: its shards are `dflash_draft_model*.safetensors`, read as the index
/// names them, as `INDEX_FILE`'s are.
pub const DRAFT_INDEX_FILE: &str = "dflash_draft_model.safetensors.index.json";
/// What MiMo's draft weight files are named by (`dflash_draft_model.safetensors`, or its shards):
/// read when an index names them, never by their name alone.
pub const DRAFT_WEIGHTS_PREFIX: &str = "dflash_draft_model";

/// Whether `name` is one of MiMo's draft weight files (`dflash_draft_model*.safetensors`).
pub fn is_draft_weights(name: &std::ffi::OsStr) -> bool {
    let bytes = name.as_encoded_bytes();
    bytes.starts_with(DRAFT_WEIGHTS_PREFIX.as_bytes()) && bytes.ends_with(b".safetensors")
}

/// Whether `name` is an index of a checkpoint's shards ([`INDEX_FILE`] or [`DRAFT_INDEX_FILE`]).
pub fn is_index(name: &std::ffi::OsStr) -> bool {
    name == INDEX_FILE || name == DRAFT_INDEX_FILE
}

/// The most shards a checkpoint read whole may have. Each shard's bytes stay mapped, under the
/// `SIGBUS` guard, for the whole comparison; past the guard's [`GUARDED_MAPS`] slots a shard would be
/// read into memory whole instead. Half the slots are left for what is mapped at the same time: the
/// package's own weight file, and other gates a host (or the test suite) runs on other threads. Draft
/// checkpoints have one or two shards.
pub const MAX_SHARDS: usize = GUARDED_MAPS / 2;

/// A checkpoint's config bytes and its shards' headers, every tensor in exactly one shard.
pub struct Headers {
    pub dir: PathBuf,
    /// config.json as read: one JSON object (checked with the strict parser when read), kept as bytes
    /// for `source.config` to compare field by field.
    pub config: Vec<u8>,
    /// Each shard, in shard order (sorted by file name): its file name and its table. No tensor is in
    /// two shards.
    pub shards: Vec<(String, Table)>,
    /// The index the shards were named by ([`INDEX_FILE`] or [`DRAFT_INDEX_FILE`]); `None` for a
    /// single `model.safetensors` read without one.
    pub index: Option<&'static str>,
}

/// A checkpoint with every shard's bytes in hand (mapped when large).
pub struct Checkpoint {
    pub headers: Headers,
    bytes: Vec<Bytes>,
    /// The config.json `headers.config` was read from, held so that [`Checkpoint::unchanged`] can prove
    /// it is still the checkpoint's config when the comparison ends.
    config: RegularFile,
}

/// What a read keeps of each shard.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Read {
    /// Its table only (`--target`): the file is closed once its header is read, so any number of
    /// shards costs neither file handles nor maps.
    Headers,
    /// Its table and its open file, whose bytes are then held (`--source`): at most [`MAX_SHARDS`].
    Whole,
}

/// Where a checkpoint keeps its weights.
enum Layout {
    Single,
    /// The index's `weight_map` (tensor -> shard file name), and its shards, sorted, each once.
    Sharded {
        index: HashMap<String, String>,
        shards: Vec<String>,
        /// The index file as read.
        seen: files::Seen,
        /// Its name ([`INDEX_FILE`] or [`DRAFT_INDEX_FILE`]).
        named: &'static str,
    },
}

impl Headers {
    /// Reads config.json and every shard's header; no tensor data, and no shard is kept open.
    pub fn read(dir: &Path) -> Result<Headers, PackageError> {
        Ok(read(dir, Read::Headers, MAX_TENSORS, None, None)?.0)
    }

    /// [`Headers::read`] under a link rule: every file it opens is refused unread when its name is a
    /// link that leaves `inside`'s roots.
    pub fn read_inside(dir: &Path, inside: &files::Inside) -> Result<Headers, PackageError> {
        Ok(read(dir, Read::Headers, MAX_TENSORS, Some(inside), None)?.0)
    }

    /// The header entry of `name`, and the shard holding it (a binary search of each shard's table:
    /// a checkpoint read whole has at most [`MAX_SHARDS`]).
    pub fn get(&self, name: &str) -> Option<(usize, &TensorInfo)> {
        self.shards
            .iter()
            .enumerate()
            .find_map(|(s, (_, table))| Some((s, table.get(name)?)))
    }

    /// Every tensor, in shard order then file order.
    pub fn entries(&self) -> impl Iterator<Item = &TensorInfo> {
        self.shards.iter().flat_map(|(_, t)| t.entries.iter())
    }
}

impl Checkpoint {
    /// Reads a checkpoint directory whole (config, index, every shard).
    pub fn open(dir: &Path) -> Result<Checkpoint, PackageError> {
        let (headers, config, files) = read(dir, Read::Whole, MAX_TENSORS, None, None)?;
        Checkpoint::hold(headers, config, files)
    }

    /// Reads a draft's own folder whole, under the package's link rule: every file it opens (config,
    /// index, shards) is refused unread when its name is a link that leaves `inside`'s roots (a hub
    /// cache snapshot's links into its blobs are read).
    /// `config` is config.json as the caller read (and parsed) it: the checkpoint's own read of it
    /// must find the same bytes, which are not parsed twice.
    pub fn open_inside(
        dir: &Path,
        inside: &files::Inside,
        config: &[u8],
    ) -> Result<Checkpoint, PackageError> {
        let (headers, config, files) =
            read(dir, Read::Whole, MAX_TENSORS, Some(inside), Some(config))?;
        Checkpoint::hold(headers, config, files)
    }

    /// Takes the bytes of the very files whose headers were read (mapping the large ones). Never their
    /// paths opened again: a file renamed into place in between would pair one file's table with
    /// another's data. Each table was parsed against its file's size at open, which is the length of
    /// the bytes held; a file rewritten in place meanwhile is caught by [`Checkpoint::unchanged`].
    fn hold(
        headers: Headers,
        config: RegularFile,
        files: Vec<RegularFile>,
    ) -> Result<Checkpoint, PackageError> {
        let bytes = files
            .into_iter()
            .map(RegularFile::into_bytes)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Checkpoint {
            headers,
            bytes,
            config,
        })
    }

    /// Every shard and the config are still the files that were read, as they were read (see
    /// [`RegularFile::unchanged`]): a checkpoint rewritten, or with a file renamed into place, while
    /// it was compared is an error, not a verdict.
    pub fn unchanged(&self) -> Result<(), PackageError> {
        for bytes in &self.bytes {
            bytes.unchanged()?;
        }
        self.config.unchanged()?;
        Ok(())
    }

    /// The files the checkpoint was read from, as opened: config.json and every shard (for a manifest
    /// to hash the very bytes that were judged).
    pub fn files(&self) -> Vec<&RegularFile> {
        std::iter::once(&self.config)
            .chain(self.bytes.iter().map(Bytes::file))
            .collect()
    }

    /// The header entry and data bytes of `name`.
    pub fn tensor(&self, name: &str) -> Option<(&TensorInfo, &[u8])> {
        let (s, info) = self.headers.get(name)?;
        let table = &self.headers.shards[s].1;
        let begin = usize::try_from(table.header_bytes + info.begin).ok()?;
        let end = usize::try_from(table.header_bytes + info.end).ok()?;
        Some((info, self.bytes.get(s)?.as_slice().get(begin..end)?))
    }
}

/// Reads config.json and every shard's header; returns the open config.json, and with [`Read::Whole`]
/// every shard's open file.
/// A checkpoint may hold at most `max_tensors` tensors in all ([`MAX_TENSORS`], the container's limit
/// for one file: a model split into shards is held to what it would be held to as one file).
/// `known`: config.json's bytes as the caller read and parsed them, which this read must find
/// again (a config rewritten in between is [`FileError::Changed`]) and need not parse.
fn read(
    dir: &Path,
    how: Read,
    max_tensors: usize,
    inside: Option<&files::Inside>,
    known: Option<&[u8]>,
) -> Result<(Headers, RegularFile, Vec<RegularFile>), PackageError> {
    crate::error::require_dir(dir)?;
    let (config, config_file) = match known {
        None => {
            let (bytes, _, file) = read_config_inside(dir, "checkpoint's", inside)?;
            (bytes, file)
        }
        Some(known) => {
            let (bytes, file) = config_bytes_inside(dir, inside)?;
            if bytes != known {
                return Err(FileError::Changed {
                    path: dir.join(CONFIG_FILE),
                    why: "its bytes are not those read before the weights".to_owned(),
                }
                .into());
            }
            (bytes, file)
        }
    };
    // Every file read, so that the checkpoint read is proved to have been there together, as read,
    // once the last header is in: a file renamed into place midway is "changed while it was read".
    let mut seen = vec![config_file.seen()];
    let (names, index, index_file) = match layout(dir, how, max_tensors, inside)? {
        Layout::Single => (vec![SINGLE_FILE.to_owned()], None, None),
        Layout::Sharded {
            index,
            shards,
            seen: index_seen,
            named,
        } => {
            seen.push(index_seen);
            (shards, Some(index), Some(named))
        }
    };
    let mut listed: HashMap<&str, usize> = HashMap::new();
    for shard in index.iter().flat_map(HashMap::values) {
        *listed.entry(shard).or_default() += 1;
    }
    let mut shards: Vec<(String, Table)> = Vec::with_capacity(names.len());
    let mut files = Vec::new();
    for name in &names {
        let path = dir.join(name);
        let count = listed.get(name.as_str()).copied().unwrap_or_default();
        let plural = if count == 1 { "" } else { "s" };
        let named = index_file.map(|i| format!("{i} lists {count} tensor{plural} in it"));
        let file = open_present(&path, named, inside)?;
        let table = read_table(&file)?;
        if let (Some(index), Some(index_file)) = (&index, index_file) {
            agrees(&dir.join(index_file), index, name, count, &table, &shards)?;
        }
        shards.push((name.clone(), table));
        seen.push(file.seen());
        if how == Read::Whole {
            files.push(file);
        }
    }
    for file in &seen {
        file.unchanged()?;
    }
    let headers = Headers {
        dir: dir.to_owned(),
        config,
        shards,
        index: index_file,
    };
    Ok((headers, config_file, files))
}

/// config.json's bytes and the object they hold, refused unless the strict parser reads one JSON
/// object: a checkpoint (or target) whose config cannot be read is exit 2 when it is read, not a
/// finding about the package later. `whose` names it in the message ("checkpoint's", "target's").
/// The open file comes back too, for a reader that must prove later that it is still the config.
/// Under a link rule when one is given.
pub(crate) fn read_config_inside(
    dir: &Path,
    whose: &str,
    inside: Option<&files::Inside>,
) -> Result<(Vec<u8>, Value, RegularFile), PackageError> {
    let path = dir.join(CONFIG_FILE);
    let (bytes, file) = config_bytes_inside(dir, inside)?;
    match crate::strict_json::parse(&bytes) {
        Ok(v @ Value::Object(_)) => Ok((bytes, v, file)),
        Ok(_) => Err(malformed(
            &path,
            format!("the {whose} config.json is not a JSON object"),
        )),
        Err(e) => Err(malformed(
            &path,
            format!("the {whose} config.json is not valid JSON: {e}"),
        )),
    }
}

/// config.json's bytes and its open file, under a link rule when one is given; a folder without
/// one is [`PackageError::NoConfig`].
fn config_bytes_inside(
    dir: &Path,
    inside: Option<&files::Inside>,
) -> Result<(Vec<u8>, RegularFile), PackageError> {
    let path = dir.join(CONFIG_FILE);
    let read =
        open_under(&path, inside).and_then(|file| Ok((file.read_all(MAX_CONFIG_BYTES)?, file)));
    match read {
        Ok(read) => Ok(read),
        Err(FileError::NotFound { .. }) => Err(PackageError::NoConfig {
            path: dir.to_owned(),
        }),
        Err(e) => Err(e.into()),
    }
}

/// Which weight files the directory holds. Names are looked up without following links, so a link
/// that leads nowhere counts as there (and is then reported as what it is, not as absent).
fn layout(
    dir: &Path,
    how: Read,
    max_tensors: usize,
    inside: Option<&files::Inside>,
) -> Result<Layout, PackageError> {
    let there = |name: &str| match std::fs::symlink_metadata(dir.join(name)) {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    };
    let indexes: Vec<&'static str> = [INDEX_FILE, DRAFT_INDEX_FILE]
        .into_iter()
        .filter(|n| there(n))
        .collect();
    // Two indexes: a loader reads the one it looks for, and another loader the other.
    if indexes.len() > 1 {
        return Err(malformed(
            dir,
            format!("holds both {INDEX_FILE} and {DRAFT_INDEX_FILE}: a loader may read either, so the gate does not pick one"),
        ));
    }
    let index = indexes.first().copied();
    match (there(SINGLE_FILE), index) {
        (true, Some(index)) => one_file_indexed(dir, index, how, max_tensors, inside),
        (true, None) => Ok(Layout::Single),
        (false, Some(index)) => sharded(dir, index, how, max_tensors, inside),
        (false, None) => Err(PackageError::Missing {
            path: dir.to_owned(),
            why: no_weights(dir, how),
        }),
    }
}

/// A folder holding both `model.safetensors` and an index, as mlx-lm's `save_model` writes every
/// model (its index names the one file even when there is no other). Read as that one file when the
/// index names it and nothing else: whichever a loader reads, it then reads the same tensors (that
/// the index lists exactly the file's tensors is [`agrees`]'s, as for any shard). An index naming any
/// other file is refused naming it: then a loader that reads the index and one that reads
/// `model.safetensors` first (transformers) load different files, and the gate does not pick one.
fn one_file_indexed(
    dir: &Path,
    index: &'static str,
    how: Read,
    max_tensors: usize,
    inside: Option<&files::Inside>,
) -> Result<Layout, PackageError> {
    let layout = sharded(dir, index, how, max_tensors, inside)?;
    let Layout::Sharded { shards, .. } = &layout else {
        return Ok(layout);
    };
    let others: Vec<&str> = shards
        .iter()
        .map(String::as_str)
        .filter(|s| *s != SINGLE_FILE)
        .collect();
    if others.is_empty() {
        return Ok(layout);
    }
    let first = others.first().copied().unwrap_or_default();
    let more = match others.len() {
        1 => String::new(),
        n => format!(" and {} other file{}", n - 1, if n == 2 { "" } else { "s" }),
    };
    Err(malformed(
        dir,
        format!("holds both {SINGLE_FILE} and {index}, and the index names {first}{more}, not only {SINGLE_FILE}: a loader may read either (transformers reads {SINGLE_FILE} first), so the gate does not pick one"),
    ))
}

/// The index and the shards it names. Its tensor count is the checkpoint's (each shard must hold
/// exactly the tensors the index lists in it), so the cap on that is applied here, as the index is
/// read, before any shard is opened.
fn sharded(
    dir: &Path,
    named: &'static str,
    how: Read,
    max_tensors: usize,
    inside: Option<&files::Inside>,
) -> Result<Layout, PackageError> {
    let path = dir.join(named);
    let file = open_present(&path, None, inside)?;
    let bytes = file.read_all(MAX_INDEX_BYTES)?;
    let seen = file.seen();
    let index = parse_index(&bytes, max_tensors).map_err(|why| malformed(&path, why))?;
    let mut shards: Vec<String> = index.values().cloned().collect();
    shards.sort();
    shards.dedup();
    if shards.is_empty() {
        return Err(malformed(&path, "weight_map lists no tensors".to_owned()));
    }
    if how == Read::Whole && shards.len() > MAX_SHARDS {
        return Err(malformed(
            &path,
            format!(
                "names {} shards, more than the {MAX_SHARDS} the gate holds mapped at once (its guard against a file truncated while mapped has {GUARDED_MAPS} slots, shared with the package's weight file)",
                shards.len()
            ),
        ));
    }
    Ok(Layout::Sharded {
        index,
        shards,
        seen,
        named,
    })
}

/// Why a directory has no weights to read. Read whole, it is the source a package was converted from,
/// and a `*.q4nx` file there means the package was given in its place: the message says so. (A target
/// may well be a Q4NX package: its reader looks for one before it comes here.)
fn no_weights(dir: &Path, how: Read) -> String {
    let why = format!("no weights: neither {SINGLE_FILE} nor {INDEX_FILE} is there");
    // MiMo's draft weights are read only as an index names them.
    let mut unnamed: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| is_draft_weights(n))
        .map(|n| crate::escape::name(&n))
        .collect();
    if !unnamed.is_empty() {
        unnamed.sort();
        return format!(
            "{why}, nor {DRAFT_INDEX_FILE}; {} {} there, but no index names {}: a loader that reads an index (transformers) finds no weights, and the gate does not read what no index names",
            crate::checks::list(&unnamed, 3),
            if unnamed.len() == 1 { "is" } else { "are" },
            if unnamed.len() == 1 { "it" } else { "them" }
        );
    }
    if how == Read::Headers {
        return why;
    }
    let (mut count, mut first) = (0usize, None::<String>);
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = crate::escape::name(&entry.file_name());
        if name.ends_with(".q4nx") {
            count += 1;
            if first.as_ref().is_none_or(|f| name < *f) {
                first = Some(name);
            }
        }
    }
    let holds = match (count, first) {
        (1, Some(name)) => name,
        (n, Some(name)) => format!("{n} *.q4nx files ({name} first)"),
        _ => return why,
    };
    format!("{why}; it holds {holds}: it looks like a Q4NX package, not the safetensors checkpoint a package is converted from (were the package and the checkpoint swapped?)")
}

/// Opens a file the checkpoint says is there (the directory listed it, or the index named it). Not
/// found then means a symbolic link that leads nowhere, which is said with where it points, or a file
/// removed meanwhile; `named` says what named it, since "no such file" alone reads as a file nothing
/// asked for.
fn open_present(
    path: &Path,
    named: Option<String>,
    inside: Option<&files::Inside>,
) -> Result<RegularFile, PackageError> {
    let error = match open_under(path, inside) {
        Ok(file) => return Ok(file),
        Err(error @ FileError::NotFound { .. }) => error,
        Err(error) => return Err(error.into()),
    };
    let link = std::fs::read_link(path).ok().map(|to| {
        format!(
            "it is a symbolic link to {}, which leads to no file",
            crate::escape::name(to.as_os_str())
        )
    });
    let notes: Vec<String> = named.into_iter().chain(link).collect();
    if notes.is_empty() {
        return Err(error.into());
    }
    Err(PackageError::FileNoted {
        error,
        note: notes.join("; "),
    })
}

/// Opens `path`, under the link rule when there is one.
fn open_under(path: &Path, inside: Option<&files::Inside>) -> Result<RegularFile, FileError> {
    match inside {
        Some(inside) => inside.open(path),
        None => files::open(path),
    }
}

/// Checks one shard's table against the index as soon as it is read, so the first shard that
/// contradicts the index stops the read before another is parsed. `listed` is how many tensors the
/// index lists in it; `earlier` are the shards read before. The shard's entries are taken in file
/// order and the index's names in sorted order, so the tensor named is the same on every run.
fn agrees(
    index_path: &Path,
    index: &HashMap<String, String>,
    name: &str,
    listed: usize,
    table: &Table,
    earlier: &[(String, Table)],
) -> Result<(), PackageError> {
    let dir = index_path.parent().unwrap_or(index_path);
    for entry in &table.entries {
        let tensor = &entry.name;
        match index.get(tensor) {
            None => {
                return Err(malformed(
                    index_path,
                    format!("tensor {tensor} in {name} is not in the index's weight_map"),
                ))
            }
            Some(shard) if shard != name => {
                if let Some((other, _)) = earlier.iter().find(|(_, t)| t.get(tensor).is_some()) {
                    return Err(malformed(
                        &dir.join(name),
                        format!("tensor {tensor} is also in {other}"),
                    ));
                }
                return Err(malformed(
                    index_path,
                    format!("tensor {tensor} is listed in {shard} but stored in {name}"),
                ));
            }
            Some(_) => {}
        }
    }
    // Every entry is one the index lists here, and no two share a name: fewer means one is missing.
    if table.entries.len() < listed {
        let missing = index
            .iter()
            .filter(|&(tensor, shard)| shard == name && table.get(tensor).is_none())
            .map(|(tensor, _)| tensor)
            .min();
        if let Some(tensor) = missing {
            return Err(malformed(
                index_path,
                format!("tensor {tensor} is listed in {name} but that shard has no such tensor"),
            ));
        }
    }
    Ok(())
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
    let n = match container::header_length(prefix, file_len) {
        Ok(n) => n,
        Err(_) => {
            // A file mistaken for the weights (a Git LFS pointer, a saved web page) is named with
            // what to do, from its first bytes; anything else by the length it declares.
            let mut head = vec![0u8; file_len.min(RECOGNISE_BYTES) as usize];
            file.read_exact_at(0, &mut head)?;
            let why = match container::recognise(&head, head.len() as u64 == file_len) {
                Some(found) => format!("the file is {found}"),
                None => {
                    let n = u64::from_le_bytes(prefix);
                    format!("header length {n} is over the {MAX_HEADER_BYTES}-byte limit or past the end of the {file_len}-byte file")
                }
            };
            return Err(malformed(path, why));
        }
    };
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

/// `weight_map` of an index file: tensor name -> shard file name, each shard a plain file name. Names
/// are shown as they are written (the human report escapes what a terminal must not see).
fn parse_index(bytes: &[u8], max_tensors: usize) -> Result<HashMap<String, String>, String> {
    let mut json = serde_json::Deserializer::from_slice(bytes);
    let read = IndexSeed { max_tensors }
        .deserialize(&mut json)
        .and_then(|index| json.end().map(|()| index));
    let index = match read {
        Ok(Some(index)) => index,
        Ok(None) => return Err("has no weight_map object".to_owned()),
        Err(e) if e.classify() == serde_json::error::Category::Data => return Err(e.to_string()),
        Err(e) => return Err(format!("not valid JSON: {e}")),
    };
    for (name, shard) in &index {
        if shard.is_empty() {
            return Err(format!("weight_map entry {name} names an empty file name"));
        }
        if shard == "." || shard == ".." || shard.contains(['/', '\\', '\0']) {
            return Err(format!(
                "weight_map entry {name} names {shard}, not a file inside the checkpoint"
            ));
        }
    }
    Ok(index)
}

/// Reads the index straight into its `weight_map`, never into a JSON tree: a real index of a large
/// sharded model is tens of megabytes of entries, and a tree of them would cost several times that.
/// Every other value is read and dropped ([`Skip`]), held to the strict parser's rules. `None`: the
/// document, or its `weight_map`, is not an object.
struct IndexSeed {
    max_tensors: usize,
}

/// The non-object values of [`IndexSeed`] and [`WeightMapSeed`]: read, dropped, and `None`.
macro_rules! not_an_object {
    () => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            Skip { depth: 0 }.visit_seq(seq).map(|()| None)
        }
    };
}

impl<'de> DeserializeSeed<'de> for IndexSeed {
    type Value = Option<HashMap<String, String>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IndexSeed {
    type Value = Option<HashMap<String, String>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an index object")
    }

    not_an_object!();

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut keys = HashSet::new();
        let mut index = None;
        while let Some(key) = map.next_key::<String>()? {
            if keys.contains(&key) {
                return Err(de::Error::custom(format_args!("duplicate key {key:?}")));
            }
            if key == "weight_map" {
                index = map.next_value_seed(WeightMapSeed {
                    max_tensors: self.max_tensors,
                })?;
            } else {
                map.next_value_seed(Skip { depth: 1 })?;
            }
            keys.insert(key);
        }
        Ok(index)
    }
}

/// The `weight_map` object: tensor name to shard file name. Past `max_tensors` entries the rest are
/// counted for the message, not kept.
struct WeightMapSeed {
    max_tensors: usize,
}

impl<'de> DeserializeSeed<'de> for WeightMapSeed {
    type Value = Option<HashMap<String, String>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for WeightMapSeed {
    type Value = Option<HashMap<String, String>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a weight_map object")
    }

    not_an_object!();

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut index = HashMap::new();
        let mut count = 0usize;
        while let Some(name) = map.next_key::<String>()? {
            count += 1;
            if count > self.max_tensors {
                map.next_value_seed(Skip { depth: 2 })?;
                continue;
            }
            if index.contains_key(&name) {
                return Err(de::Error::custom(format_args!("duplicate key {name:?}")));
            }
            let shard = map.next_value_seed(ShardName { name: &name })?;
            index.insert(name, shard);
        }
        if count > self.max_tensors {
            return Err(de::Error::custom(format_args!(
                "weight_map lists {count} tensors, more than the {} one checkpoint may hold",
                self.max_tensors
            )));
        }
        Ok(Some(index))
    }
}

/// One entry's shard: a string, or an error naming the entry.
struct ShardName<'n> {
    name: &'n str,
}

impl<'de> DeserializeSeed<'de> for ShardName<'_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ShardName<'_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a file name string for weight_map entry {}", self.name)
    }

    fn visit_str<E>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }
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

    /// A safetensors file holding one U8 tensor `a` of `len` bytes, each `fill`.
    fn filled(len: usize, fill: u8) -> Vec<u8> {
        let mut header =
            format!("{{\"a\":{{\"dtype\":\"U8\",\"shape\":[{len}],\"data_offsets\":[0,{len}]}}}}")
                .into_bytes();
        while header.len() % 8 != 0 {
            header.push(b' ');
        }
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&header);
        out.resize(out.len() + len, fill);
        out
    }

    /// A checkpoint directory: config.json `{}` and `files`.
    fn directory(files: &[(&str, Vec<u8>)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(CONFIG_FILE), b"{}").expect("config");
        for (name, bytes) in files {
            std::fs::write(dir.path().join(name), bytes).expect("file");
        }
        dir
    }

    fn checkpoint(files: &[(&str, Vec<u8>)]) -> Result<Checkpoint, PackageError> {
        Checkpoint::open(directory(files).path())
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

    /// The length prefix is bounded before a buffer is sized from it: a file shorter than the prefix,
    /// a length over the limit, and one past the end of the file are each refused, saying so.
    #[test]
    fn a_header_length_is_refused_before_it_sizes_a_buffer() {
        refused(
            &[(SINGLE_FILE, vec![1; 7])],
            "7 bytes: shorter than a container's 8-byte length prefix",
        );
        let over = (MAX_HEADER_BYTES + 1).to_le_bytes().to_vec();
        refused(
            &[(SINGLE_FILE, over)],
            &format!("header length {} is over the {MAX_HEADER_BYTES}-byte limit or past the end of the 8-byte file", MAX_HEADER_BYTES + 1),
        );
        let mut past = shard(&["a"]);
        let len = past.len();
        past[..8].copy_from_slice(&(len as u64 - 7).to_le_bytes());
        refused(
            &[(SINGLE_FILE, past)],
            &format!("header length {} is over the {MAX_HEADER_BYTES}-byte limit or past the end of the {len}-byte file", len - 7),
        );
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

    /// The error of a read that must fail.
    fn error<T>(read: Result<T, PackageError>) -> PackageError {
        match read {
            Ok(_) => panic!("read a checkpoint that should be refused"),
            Err(e) => e,
        }
    }

    #[test]
    fn the_data_is_the_bytes_of_the_file_whose_header_was_read() {
        // Large enough to be mapped, and small enough to be read: both come from the open file.
        for len in [4, files::READ_BELOW as usize] {
            let dir = directory(&[(SINGLE_FILE, filled(len, 1))]);
            let (headers, config, files) =
                read(dir.path(), Read::Whole, MAX_TENSORS, None, None).expect("read");
            // Another file of the same length renamed into place between the header and the data.
            let other = dir.path().join("other");
            std::fs::write(&other, filled(len, 9)).expect("other");
            std::fs::rename(&other, dir.path().join(SINGLE_FILE)).expect("rename");
            let checkpoint = Checkpoint::hold(headers, config, files).expect("hold");
            let (_, data) = checkpoint.tensor("a").expect("a");
            assert!(
                data.iter().all(|&b| b == 1),
                "the data came from the other file"
            );
            // And the comparison vouches for nothing: the name now holds another file.
            let e = checkpoint
                .unchanged()
                .expect_err("a file was renamed into place");
            assert_eq!(e.reason(), "changed_while_read", "{e}");
            assert!(
                e.to_string().contains("another file was put in its place"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_config_renamed_into_place_during_the_comparison_is_changed() {
        let dir = directory(&[(SINGLE_FILE, filled(4, 1))]);
        let checkpoint = Checkpoint::open(dir.path()).expect("open");
        checkpoint.unchanged().expect("untouched");
        let other = dir.path().join("other");
        std::fs::write(&other, b"{}").expect("other");
        std::fs::rename(&other, dir.path().join(CONFIG_FILE)).expect("rename");
        let e = checkpoint
            .unchanged()
            .expect_err("config.json was replaced");
        assert_eq!(e.path(), dir.path().join(CONFIG_FILE), "{e}");
        assert!(e.to_string().contains("changed while it was read"), "{e}");
    }

    #[test]
    fn a_config_that_is_not_one_json_object_is_refused_when_read() {
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(70), "]".repeat(70));
        for bad in [
            &b""[..],
            b"[]",
            b"{\"a\": 1,",
            b"{\"a\": 1, \"a\": 2}",
            b"{\"a\": \"\xff\"}",
            deep.as_bytes(),
        ] {
            let dir = directory(&[(SINGLE_FILE, shard(&["a"]))]);
            std::fs::write(dir.path().join(CONFIG_FILE), bad).expect("config");
            for e in [
                error(Checkpoint::open(dir.path())),
                error(Headers::read(dir.path())),
            ] {
                assert_eq!(e.reason(), "malformed", "{e}");
                assert_eq!(e.path(), dir.path().join(CONFIG_FILE), "{e}");
                assert!(e.to_string().contains("config.json is not"), "{e}");
            }
        }
    }

    #[test]
    fn both_a_single_file_and_an_index_is_ambiguous() {
        let e = error(checkpoint(&[
            (SINGLE_FILE, shard(&["a"])),
            ("s1", shard(&["b"])),
            (INDEX_FILE, index(r#""b": "s1""#)),
        ]));
        let text = e.to_string();
        assert!(
            text.contains(SINGLE_FILE) && text.contains(INDEX_FILE),
            "{text}"
        );
        assert!(text.contains("a loader may read either"), "{text}");
    }

    #[test]
    fn each_shard_is_held_to_the_index_as_it_is_read() {
        // s1 contradicts the index; s2 does not even parse, and is never reached.
        let e = error(checkpoint(&[
            ("s1", shard(&["a", "x"])),
            ("s2", b"not a container".to_vec()),
            (INDEX_FILE, index(r#""a": "s1", "b": "s2""#)),
        ]));
        assert!(
            e.to_string()
                .contains("tensor x in s1 is not in the index's weight_map"),
            "{e}"
        );
    }

    /// A config.json the caller read and parsed is found again, not parsed again; bytes that are
    /// not those (the file rewritten in between) are a change, never a checkpoint.
    #[test]
    fn a_config_read_before_must_be_found_again() {
        let dir = directory(&[(SINGLE_FILE, shard(&["a"]))]);
        let whole = |known: &[u8]| read(dir.path(), Read::Whole, MAX_TENSORS, None, Some(known));
        assert!(whole(b"{}").is_ok());
        let e = error(whole(b"{ }"));
        assert!(
            matches!(&e, PackageError::File(FileError::Changed { path, .. }) if path.ends_with(CONFIG_FILE)),
            "{e:?}"
        );
    }

    #[test]
    fn the_tensor_count_is_capped_before_any_shard_is_opened() {
        let dir = directory(&[
            ("s1", b"not a container".to_vec()),
            (INDEX_FILE, index(r#""a": "s1", "b": "s1", "c": "s1""#)),
        ]);
        let e = error(read(dir.path(), Read::Headers, 2, None, None));
        assert_eq!(e.path(), dir.path().join(INDEX_FILE), "{e}");
        assert!(
            e.to_string()
                .contains("weight_map lists 3 tensors, more than the 2 one checkpoint may hold"),
            "{e}"
        );
        assert!(
            read(dir.path(), Read::Headers, 3, None, None).is_err_and(|e| e.path().ends_with("s1"))
        );
    }

    #[test]
    fn the_index_of_a_large_sharded_model_is_read_and_a_larger_file_refused_unread() {
        // 48,000 expert tensors in one shard, named as a large MoE checkpoint names them: the index is
        // over the 4 MiB config cap it was once held to.
        let names: Vec<String> = (0..48_000)
            .map(|i| {
                format!(
                    "model.layers.{}.mlp.experts.{}.down_proj.weight",
                    i / 256,
                    i % 256
                )
            })
            .collect();
        let shard_name = "model-00001-of-00001.safetensors";
        let map: Vec<String> = names
            .iter()
            .map(|n| format!("    \"{n}\": \"{shard_name}\""))
            .collect();
        let text = format!(
            "{{\n  \"metadata\": {{\"total_size\": {}}},\n  \"weight_map\": {{\n{}\n  }}\n}}",
            4 * names.len(),
            map.join(",\n")
        );
        assert!(text.len() as u64 > 4 * 1024 * 1024, "{} bytes", text.len());
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let dir = directory(&[(shard_name, shard(&refs)), (INDEX_FILE, text.into_bytes())]);
        let headers = Headers::read(dir.path()).expect("the index is read");
        assert_eq!(headers.entries().count(), names.len());
        // One byte over the cap: refused by its size, naming the file and the cap, before a byte is
        // read (the file is sparse).
        let file = std::fs::File::create(dir.path().join(INDEX_FILE)).expect("index");
        file.set_len(MAX_INDEX_BYTES + 1).expect("sparse");
        let e = error(Headers::read(dir.path()));
        assert_eq!(e.path(), dir.path().join(INDEX_FILE), "{e}");
        assert!(
            e.to_string()
                .contains(&format!("larger than the {MAX_INDEX_BYTES}-byte limit")),
            "{e}"
        );
    }

    #[test]
    fn the_index_is_read_as_strictly_as_any_document() {
        for (text, says) in [
            (
                r#"{"weight_map": {"a": "s1"}, "weight_map": {"a": "s1"}}"#,
                "duplicate key \"weight_map\"",
            ),
            (
                r#"{"weight_map": {"a": "s1", "a": "s2"}}"#,
                "duplicate key \"a\"",
            ),
            (
                r#"{"metadata": {"total_size": 1, "total_size": 2}, "weight_map": {"a": "s1"}}"#,
                "duplicate key \"total_size\"",
            ),
            (
                r#"{"weight_map": {"a": 3}}"#,
                "expected a file name string for weight_map entry a",
            ),
            (r#"{"weight_map": {"a": ["s1"]}}"#, "weight_map entry a"),
            (
                r#"[{"weight_map": {"a": "s1"}}]"#,
                "has no weight_map object",
            ),
            (r#"{"weight_map": "s1"}"#, "has no weight_map object"),
            (r#"{"weight_map": {"a": "s1"}"#, "not valid JSON"),
            (r#"{"weight_map": {"a": "s1"}} {}"#, "not valid JSON"),
        ] {
            let e = parse_index(text.as_bytes(), MAX_TENSORS).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
        let deep = format!(
            r#"{{"metadata": {}{}, "weight_map": {{"a": "s1"}}}}"#,
            "[".repeat(80),
            "]".repeat(80)
        );
        let e = parse_index(deep.as_bytes(), MAX_TENSORS).unwrap_err();
        assert!(e.contains("nested deeper"), "{e}");
        let index = parse_index(
            br#"{"metadata": {"x": [1, {}]}, "weight_map": {"a": "s1", "b": "s2"}}"#,
            1,
        )
        .unwrap_err();
        assert!(
            index.contains("weight_map lists 2 tensors, more than the 1"),
            "{index}"
        );
    }

    #[test]
    fn a_whole_read_has_at_most_as_many_shards_as_guarded_maps_allow() {
        let names: Vec<String> = (0..=MAX_SHARDS).map(|i| format!("s{i:03}")).collect();
        let map: Vec<String> = names.iter().map(|n| format!("\"t{n}\": \"{n}\"")).collect();
        let mut files: Vec<(&str, Vec<u8>)> = names
            .iter()
            .map(|n| (n.as_str(), shard(&[&format!("t{n}")])))
            .collect();
        files.push((INDEX_FILE, index(&map.join(", "))));
        let dir = directory(&files);
        let e = error(Checkpoint::open(dir.path()));
        assert!(
            e.to_string().contains(&format!(
                "names {} shards, more than the {MAX_SHARDS}",
                MAX_SHARDS + 1
            )),
            "{e}"
        );
        // Headers only hold no map: any number of shards is read.
        let headers = Headers::read(dir.path()).expect("headers");
        assert_eq!(headers.shards.len(), MAX_SHARDS + 1);
        // One shard fewer is read whole.
        std::fs::remove_file(dir.path().join(&names[MAX_SHARDS])).expect("rm");
        let map = map[..MAX_SHARDS].join(", ");
        std::fs::write(dir.path().join(INDEX_FILE), index(&map)).expect("index");
        Checkpoint::open(dir.path()).expect("at the limit");
    }

    #[test]
    fn index_errors_name_the_same_tensor_every_time_and_shards_as_written() {
        // Many tensors the index omits: the first in file order is named, on every read.
        let extra: Vec<String> = (0..20).map(|i| format!("t{}", (i * 7) % 20)).collect();
        let mut names = vec!["a"];
        names.extend(extra.iter().map(String::as_str));
        for _ in 0..5 {
            refused(
                &[("s1", shard(&names)), (INDEX_FILE, index(r#""a": "s1""#))],
                "tensor t0 in s1 is not in the index's weight_map",
            );
            refused(
                &[
                    ("s1", shard(&["a"])),
                    (
                        INDEX_FILE,
                        index(r#""a": "s1", "t3": "s1", "t1": "s1", "t2": "s1""#),
                    ),
                ],
                "tensor t1 is listed in s1 but that shard has no such tensor",
            );
        }
        refused(
            &[(INDEX_FILE, index(r#""a": "..\\bf16""#))],
            "weight_map entry a names ..\\bf16, not a file inside the checkpoint",
        );
        refused(
            &[(INDEX_FILE, index(r#""a": """#))],
            "weight_map entry a names an empty file name",
        );
    }

    #[test]
    fn a_missing_shard_is_said_to_be_named_by_the_index() {
        let e = error(checkpoint(&[
            ("s1", shard(&["a"])),
            (INDEX_FILE, index(r#""a": "s1", "b": "s2", "c": "s2""#)),
        ]));
        assert_eq!(e.reason(), "file_not_found", "{e}");
        assert!(e.path().ends_with("s2"), "{e}");
        assert!(
            e.to_string().ends_with(&format!(
                "s2: no such file; {INDEX_FILE} lists 2 tensors in it"
            )),
            "{e}"
        );
    }

    #[test]
    fn a_weight_file_that_is_there_but_unusable_is_not_no_weights() {
        let dir = directory(&[]);
        let single = dir.path().join(SINGLE_FILE);
        std::os::unix::fs::symlink(dir.path().join("gone"), &single).expect("link");
        let e = error(Checkpoint::open(dir.path()));
        assert_eq!(e.reason(), "file_not_found", "{e}");
        assert_eq!(e.path(), single, "{e}");
        assert!(e.to_string().contains("is a symbolic link to"), "{e}");
        std::fs::remove_file(&single).expect("rm");
        std::os::unix::fs::symlink(&single, &single).expect("loop");
        let e = error(Headers::read(dir.path()));
        assert_eq!(
            (e.reason(), e.path()),
            ("unreadable", single.as_path()),
            "{e}"
        );
        let index = dir.path().join(INDEX_FILE);
        std::fs::remove_file(&single).expect("rm");
        std::os::unix::fs::symlink(dir.path().join("gone"), &index).expect("link");
        let e = error(Checkpoint::open(dir.path()));
        assert_eq!(
            (e.reason(), e.path()),
            ("file_not_found", index.as_path()),
            "{e}"
        );
        assert!(!e.to_string().contains("no weights"), "{e}");
    }

    #[test]
    fn no_weights_is_file_not_found_with_a_hint_only_for_a_whole_read_of_a_package() {
        let dir = directory(&[]);
        let e = error(Checkpoint::open(dir.path()));
        assert_eq!(
            (e.reason(), e.path()),
            ("file_not_found", dir.path()),
            "{e}"
        );
        assert!(e.to_string().contains("no weights"), "{e}");
        assert!(!e.to_string().contains("Q4NX"), "{e}");
        std::fs::write(dir.path().join("model.q4nx"), b"").expect("q4nx");
        let e = error(Checkpoint::open(dir.path()));
        assert_eq!(e.reason(), "file_not_found", "{e}");
        assert!(
            e.to_string()
                .contains("no weights: neither model.safetensors nor model.safetensors.index.json is there; it holds model.q4nx: it looks like a Q4NX package"),
            "{e}"
        );
        // A target may be a Q4NX package: headers-only reading gives no such hint.
        let e = error(Headers::read(dir.path()));
        assert_eq!(e.reason(), "file_not_found", "{e}");
        assert!(!e.to_string().contains("Q4NX"), "{e}");
    }
}
