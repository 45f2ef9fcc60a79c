//! A package directory: finding its files, reading them safely, and running the checks in order.

use crate::checks::{self, CONTAINER_CHECKS};
use crate::config::DraftConfig;
use crate::container::Container;
use crate::limits::MAX_CONFIG_BYTES;
use crate::report::{Census, Check, FileCensus, Report, TensorCensus};
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

pub const IS_DFLASH: &str = "config.is_dflash";
pub const PARSES: &str = "container.parses";
pub const CONFIG_FILE: &str = "config.json";
pub const WEIGHT_FILE: &str = "model.q4nx";
pub const WEIGHT_EXTENSION: &str = "q4nx";

/// What the caller asked for beyond the draft itself.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Check the draft against this target package (`target.*`).
    pub target: Option<PathBuf>,
    /// Verify `MANIFEST.sha256`.
    pub manifest: bool,
}

/// The gate could not run at all: exit 2, not a verdict on the package.
#[derive(Debug)]
pub enum PackageError {
    /// The path is not a directory (or does not exist).
    NotADirectory { path: PathBuf },
    /// The directory has no config.json.
    NoConfig { path: PathBuf },
    /// A file exists but cannot be read (permissions, a directory where a file should be, I/O).
    Unreadable { path: PathBuf, source: io::Error },
}

impl fmt::Display for PackageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PackageError::NotADirectory { path } => {
                write!(f, "{}: not a package directory", path.display())
            }
            PackageError::NoConfig { path } => write!(f, "{}: no config.json", path.display()),
            PackageError::Unreadable { path, source } => {
                write!(f, "{}: cannot read: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for PackageError {}

fn unreadable(path: &Path) -> impl FnOnce(io::Error) -> PackageError + '_ {
    move |source| PackageError::Unreadable {
        path: path.to_owned(),
        source,
    }
}

/// Gates the package in `dir`.
pub fn gate(dir: &Path, options: &Options) -> Result<Report, PackageError> {
    let start = Instant::now();
    if !dir.is_dir() {
        return Err(PackageError::NotADirectory {
            path: dir.to_owned(),
        });
    }
    let config_path = dir.join(CONFIG_FILE);
    let config_meta = std::fs::metadata(&config_path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => PackageError::NoConfig {
            path: dir.to_owned(),
        },
        _ => PackageError::Unreadable {
            path: config_path.clone(),
            source: e,
        },
    })?;
    if !config_meta.is_file() {
        let source = io::Error::other("not a regular file");
        return Err(PackageError::Unreadable {
            path: config_path,
            source,
        });
    }
    let config = read_capped(&config_path, MAX_CONFIG_BYTES)?;
    let files = list_files(dir)?;
    let weight = locate_weights(&files);
    let mapped = match &weight {
        Ok(name) => Ok((name.clone(), WeightBytes::open(&dir.join(name))?)),
        Err(why) => Err(why.clone()),
    };
    let weights = match &mapped {
        Ok((name, bytes)) => Ok((name.as_str(), bytes.as_slice())),
        Err(why) => Err(why.clone()),
    };
    let package = dir.to_string_lossy().into_owned();
    let config_bytes = config.clone();
    let file_names: Vec<String> = files.iter().map(|f| f.name.clone()).collect();
    let mut report = evaluate(&package, config, weights, files);
    let refused = report
        .check(IS_DFLASH)
        .is_none_or(|c| c.outcome != crate::Outcome::Pass);
    if let Some(target_dir) = &options.target {
        let target = crate::beyond::target::read(target_dir)?;
        report
            .not_checked
            .retain(|l| !l.starts_with(NOT_CHECKED_TARGET));
        if let (false, Ok(Ok(draft))) = (
            refused,
            config_bytes.as_ref().map(|b| DraftConfig::from_json(b)),
        ) {
            report
                .checks
                .extend(crate::beyond::target::checks(&draft, &target));
        }
    }
    if options.manifest {
        report
            .not_checked
            .retain(|l| !l.starts_with(NOT_CHECKED_PROVENANCE));
        if !refused {
            report
                .checks
                .push(crate::beyond::manifest::check(dir, &file_names));
        }
    }
    report.elapsed = start.elapsed();
    Ok(report)
}

/// The gate on bytes already in memory: config.json (or why it could not be read) and the weight
/// file (or why there is none). The directory front end and the fuzz target both come here.
pub fn evaluate(
    package: &str,
    config: Result<Vec<u8>, String>,
    weights: Result<(&str, &[u8]), String>,
    files: Vec<FileCensus>,
) -> Report {
    let mut report = Report {
        package: package.to_owned(),
        checks: Vec::new(),
        census: Census {
            files,
            ..Census::default()
        },
        not_checked: not_checked(),
        elapsed: Default::default(),
    };
    let parsed = config.and_then(|bytes| DraftConfig::from_json(&bytes));
    let config = match parsed {
        Ok(c) => c,
        Err(why) => {
            report.checks.push(Check::fail(IS_DFLASH, why));
            return report;
        }
    };
    report.checks.push(Check::pass(
        IS_DFLASH,
        format!(
            "config.json declares a DFlash draft ({})",
            config.declared_as
        ),
    ));
    report.checks.push(checks::check_geometry(&config));
    let (name, bytes) = match weights {
        Ok(w) => w,
        Err(why) => {
            report.checks.push(Check::fail(PARSES, why));
            report.checks.extend(
                CONTAINER_CHECKS
                    .iter()
                    .map(|id| Check::blocked(*id, PARSES, "the weight file was not read")),
            );
            return report;
        }
    };
    report.census.weight_file = Some(name.to_owned());
    report.census.file_bytes = Some(bytes.len() as u64);
    let container = match Container::parse(bytes) {
        Ok(c) => c,
        Err(e) => {
            report.checks.push(Check::fail(
                PARSES,
                format!("{name} does not parse as a Q4NX table: {e}"),
            ));
            report.checks.extend(
                CONTAINER_CHECKS
                    .iter()
                    .map(|id| Check::blocked(*id, PARSES, "the weight file did not parse")),
            );
            return report;
        }
    };
    let table = &container.table;
    let aligned = if table.gaps.is_empty() {
        String::new()
    } else {
        format!("; {} zero-filled 64-byte alignment gaps (the engine's packer: strict safetensors readers refuse this file)", table.gaps.len())
    };
    report.checks.push(Check::pass(
        PARSES,
        format!(
            "{name} parses as a Q4NX table: {} tensors, {}-byte header, {} bytes{aligned}",
            table.entries.len(),
            table.header_bytes,
            bytes.len()
        ),
    ));
    let (container_checks, forms) = checks::run(&config, &container);
    report.checks.extend(container_checks);
    let naming = crate::roles::Naming::detect(table.entries.iter().map(|e| e.name.as_str()));
    report.census.header_bytes = Some(table.header_bytes);
    report.census.naming = Some(
        if naming.prefix.is_empty() {
            "bare"
        } else {
            "model."
        }
        .to_owned(),
    );
    report.census.aligned_gaps = table.gaps.len() as u64;
    report.census.metadata = table.metadata.clone();
    report.census.tensors = table
        .entries
        .iter()
        .map(|e| {
            let (form, grid) = forms
                .by_name
                .get(&e.name)
                .cloned()
                .unwrap_or_else(|| (format!("{} {}", e.dtype, e.shape_text()), None));
            TensorCensus {
                name: e.name.clone(),
                role: naming.role(&e.name).map(|r| r.to_string()),
                dtype: e.dtype.name().to_owned(),
                shape: e.shape.clone(),
                offsets: (e.begin, e.end),
                form,
                grid,
            }
        })
        .collect();
    report
}

const NOT_CHECKED_TARGET: &str = "vocabulary and tokenizer agreement with the target";
const NOT_CHECKED_PROVENANCE: &str = "whether these are the right weights";

fn not_checked() -> Vec<String> {
    vec![
        format!("{NOT_CHECKED_TARGET}, and the target's depth (give --target DIR)"),
        format!("{NOT_CHECKED_PROVENANCE}: provenance (give --manifest to verify MANIFEST.sha256)"),
        "whether the draft's forward pass is correct: the gate reads bytes, it runs no model".to_owned(),
        "the 4-bit codes of real groups: every nibble is a valid code (only constant and padding groups are read)".to_owned(),
        "files other than config.json and the weight file: listed in the census, not read".to_owned(),
    ]
}

/// Reads a file whole, refusing (as a config failure, not an I/O error) one larger than `cap` without
/// reading it.
fn read_capped(path: &Path, cap: u64) -> Result<Result<Vec<u8>, String>, PackageError> {
    let file = File::open(path).map_err(unreadable(path))?;
    let mut bytes = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable(path))?;
    if bytes.len() as u64 > cap {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Ok(Err(format!(
            "{name} is larger than the {cap}-byte limit: refused unread"
        )));
    }
    Ok(Ok(bytes))
}

fn list_files(dir: &Path) -> Result<Vec<FileCensus>, PackageError> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable(dir))? {
        let entry = entry.map_err(unreadable(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let bytes = entry.metadata().map(|m| m.len()).unwrap_or(0);
        let use_ = match name.as_str() {
            CONFIG_FILE => "config",
            "MANIFEST.sha256" => "manifest",
            _ if name.ends_with(".q4nx") => "weights",
            _ => "not checked",
        };
        files.push(FileCensus {
            name,
            bytes,
            use_: use_.to_owned(),
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// `model.q4nx`, else the single `*.q4nx`. `Err` inside is a package failure (none, or ambiguous).
fn locate_weights(files: &[FileCensus]) -> Result<String, String> {
    if files.iter().any(|f| f.name == WEIGHT_FILE) {
        return Ok(WEIGHT_FILE.to_owned());
    }
    let candidates: Vec<&str> = files
        .iter()
        .filter(|f| {
            Path::new(&f.name)
                .extension()
                .is_some_and(|e| e == WEIGHT_EXTENSION)
        })
        .map(|f| f.name.as_str())
        .collect();
    match candidates.as_slice() {
        [] => Err("no weight file: neither model.q4nx nor any *.q4nx in the package".to_owned()),
        [one] => Ok((*one).to_owned()),
        many => Err(format!(
            "{} *.q4nx files and no model.q4nx ({}): the gate does not guess which is the draft's",
            many.len(),
            many.join(", ")
        )),
    }
}

/// A weight file's bytes: mapped when large, read when small (a zero-length file cannot be mapped).
pub enum WeightBytes {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

const READ_BELOW: u64 = 1 << 16;

impl WeightBytes {
    pub fn open(path: &Path) -> Result<WeightBytes, PackageError> {
        let file = File::open(path).map_err(unreadable(path))?;
        let meta = file.metadata().map_err(unreadable(path))?;
        if !meta.is_file() {
            return Err(PackageError::Unreadable {
                path: path.to_owned(),
                source: io::Error::other("not a regular file"),
            });
        }
        if meta.len() < READ_BELOW {
            let mut bytes = Vec::new();
            file.take(READ_BELOW)
                .read_to_end(&mut bytes)
                .map_err(unreadable(path))?;
            return Ok(WeightBytes::Read(bytes));
        }
        map(&file)
            .map(WeightBytes::Mapped)
            .map_err(unreadable(path))
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            WeightBytes::Mapped(m) => m,
            WeightBytes::Read(v) => v,
        }
    }
}

/// The one memory map of the gate.
fn map(file: &File) -> io::Result<memmap2::Mmap> {
    // SAFETY: the map is read-only and lives no longer than one gate run. We assume the package is not
    // modified while it is gated (the same assumption every mmap-based safetensors reader makes); a
    // concurrent truncation could fault, but cannot make the gate read outside the mapping, since every
    // offset is checked against the length taken at map time.
    unsafe { memmap2::Mmap::map(file) }
}
