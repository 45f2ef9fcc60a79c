//! A seeded mutation campaign over the small fixture package: bit flips, byte sets, truncations,
//! extensions, and structured header edits. What must hold for every mutant:
//!
//! - the gate never panics, and returns within a bounded time;
//! - it never allocates more than the file's size plus a fixed margin in one piece (measured by the
//!   caller, which runs the campaign in a process of its own with a counting allocator);
//! - a header built to blow up in memory (one huge array, a huge metadata object, a shape of a
//!   million dimensions, deep nesting, a million empty tensors) costs at most
//!   [`HEADER_HEAP_FACTOR`] times its size in live heap, at its peak;
//! - a mutant whose header no longer says what the original said is never PASS, unless an independent
//!   reading finds the new header equivalent;
//! - a scale or minimum made non-finite, negative, or zero over non-zero codes is FAIL at
//!   `tiles.headers_sane`, naming the tensor and the tile.

use crate::synth::{Encoding, Geometry, Package};
use dflash_gate::{Outcome, Report};
use half::bf16;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The longest one evaluation may take before the campaign calls it a hang (the fixture takes
/// milliseconds; this only catches loops that do not end).
pub const TIME_LIMIT: Duration = Duration::from_secs(10);

/// The most live heap a blow-up header may cost, as a multiple of the header's size, beyond
/// [`HEADER_HEAP_MARGIN`]. A `serde_json::Value` tree costs about 17 times its JSON.
pub const HEADER_HEAP_FACTOR: usize = 4;
pub const HEADER_HEAP_MARGIN: usize = 1 << 20;

/// The caller's view of the heap (a counting allocator): mark the live bytes now, and later ask for
/// the peak above that mark.
pub trait Heap {
    fn mark(&self);
    fn peak_since_mark(&self) -> usize;
}

/// No heap measurement (the in-process unit test).
pub struct Unmeasured;

impl Heap for Unmeasured {
    fn mark(&self) {}
    fn peak_since_mark(&self) -> usize {
        0
    }
}

/// What a campaign found.
#[derive(Debug, Default)]
pub struct Findings {
    pub runs: usize,
    pub by_kind: std::collections::BTreeMap<&'static str, usize>,
    pub verdicts: [usize; 3],
    pub largest_file: usize,
    pub slowest: Duration,
    pub violations: Vec<String>,
}

/// Runs `count` mutants from `seed`, with no heap measurement.
pub fn run(seed: u64, count: usize) -> Findings {
    run_measured(seed, count, &Unmeasured, &|_, _| {})
}

/// Runs `count` mutants from `seed`, holding blow-up headers to [`HEADER_HEAP_FACTOR`] on `heap`;
/// `progress` hears of each mutant (its index and what was done) before it runs.
pub fn run_measured(
    seed: u64,
    count: usize,
    heap: &dyn Heap,
    progress: &dyn Fn(usize, &str),
) -> Findings {
    let package = Package::generate(&Geometry::tiny(), Encoding::default(), crate::arms::SEED);
    let config = serde_json::to_vec_pretty(&package.config).expect("config");
    let original = package.weight_bytes();
    let original_header = header_of(&original).expect("the fixture's header parses");
    let grid_tiles = grid_tiles(&original);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut findings = Findings::default();
    for i in 0..count {
        let mut bytes = original.clone();
        let mutation = mutate(&mut rng, &mut bytes, &grid_tiles);
        *findings.by_kind.entry(mutation.kind).or_default() += 1;
        findings.largest_file = findings.largest_file.max(bytes.len());
        let config = config.clone();
        progress(i, &mutation.describe);
        heap.mark();
        let start = Instant::now();
        let outcome = std::panic::catch_unwind(|| {
            dflash_gate::evaluate("mutant", Ok(config), Ok(("model.q4nx", &bytes)), Vec::new())
        });
        let took = start.elapsed();
        let peak = heap.peak_since_mark();
        findings.slowest = findings.slowest.max(took);
        findings.runs += 1;
        let label = format!("mutant {i} (seed {seed}): {}", mutation.describe);
        let header = header_end(&bytes);
        if mutation.kind == BLOWUP && peak > HEADER_HEAP_FACTOR * header + HEADER_HEAP_MARGIN {
            findings.violations.push(format!(
                "{label}: a {header}-byte header cost {peak} bytes of heap at its peak"
            ));
        }
        let report = match outcome {
            Ok(Ok(r)) => r,
            // A worker's panic is caught by the gate and said as an error: still a panic on hostile input.
            Ok(Err(e)) => {
                findings
                    .violations
                    .push(format!("{label}: the gate could not run: {e}"));
                continue;
            }
            Err(_) => {
                findings
                    .violations
                    .push(format!("{label}: the gate panicked"));
                continue;
            }
        };
        findings.verdicts[match report.verdict() {
            Outcome::Pass => 0,
            Outcome::Fail => 1,
            // Undecided, and any outcome a later gate adds: not a pass.
            _ => 2,
        }] += 1;
        if took > TIME_LIMIT {
            findings.violations.push(format!("{label}: took {took:?}"));
        }
        if let Some(why) = judge(&report, &bytes, &original_header, &mutation) {
            findings.violations.push(format!("{label}: {why}"));
        }
    }
    findings
}

/// `count` mutants of the micro package's weight file whose mutations reach the header (bit flips and
/// byte sets in it, truncations, extensions, structured edits, lying lengths), for comparing container
/// verdicts with another reader.
pub fn header_mutants(seed: u64, count: usize) -> Vec<(String, Vec<u8>)> {
    let original = Package::generate(&Geometry::micro(), Encoding::default(), crate::arms::SEED)
        .weight_bytes();
    let mut rng = StdRng::seed_from_u64(seed);
    (0..count)
        .map(|_| {
            let mut bytes = original.clone();
            let header_end = header_end(&bytes);
            let m = match rng.random_range(0..8u32) {
                0 | 1 => {
                    let at = rng.random_range(0..header_end);
                    let bit = rng.random_range(0..8);
                    bytes[at] ^= 1 << bit;
                    mutation("bit flip", format!("flip bit {bit} of header byte {at}"))
                }
                2 => {
                    let at = rng.random_range(0..header_end);
                    let value: u8 = rng.random();
                    bytes[at] = value;
                    mutation("byte set", format!("set header byte {at} to {value:#04x}"))
                }
                3 => {
                    let len = rng.random_range(0..bytes.len());
                    bytes.truncate(len);
                    mutation("truncation", format!("truncate to {len}"))
                }
                4 => {
                    let extra = rng.random_range(1..64);
                    bytes.extend(std::iter::repeat_n(0u8, extra));
                    mutation("extension", format!("append {extra} zero bytes"))
                }
                5 => length_edit(&mut rng, &mut bytes),
                _ => header_edit(&mut rng, &mut bytes),
            };
            (format!("{}: {}", m.kind, m.describe), bytes)
        })
        .collect()
}

/// One mutation: what kind, what exactly, and (for a header-plane edit) which tensor and tile it broke.
struct Mutation {
    kind: &'static str,
    describe: String,
    broken_group: Option<(String, u64)>,
}

fn mutation(kind: &'static str, describe: String) -> Mutation {
    Mutation {
        kind,
        describe,
        broken_group: None,
    }
}

/// Where the grids' tiles are: (tensor name, first tile's file offset, tile count).
fn grid_tiles(bytes: &[u8]) -> Vec<(String, usize, usize)> {
    let c = dflash_gate::__private::container::Container::parse(bytes).expect("fixture parses");
    let start = c.table.header_bytes as usize;
    c.table
        .entries
        .iter()
        .filter(|e| e.dtype == dflash_gate::__private::dtype::Dtype::I8)
        .map(|e| {
            (
                e.name.clone(),
                start + e.begin as usize,
                (e.byte_len() / 5120) as usize,
            )
        })
        .collect()
}

fn mutate(rng: &mut StdRng, bytes: &mut Vec<u8>, grids: &[(String, usize, usize)]) -> Mutation {
    let header_end = header_end(bytes);
    let anywhere = |rng: &mut StdRng, len: usize| rng.random_range(0..len.max(1));
    // Half the byte-level mutations land in the header, where a single bit matters most.
    let target = |rng: &mut StdRng, len: usize| {
        if rng.random_bool(0.5) {
            rng.random_range(0..header_end.min(len).max(1))
        } else {
            anywhere(rng, len)
        }
    };
    match rng.random_range(0..17u32) {
        0..=3 => {
            let at = target(rng, bytes.len());
            let bit = rng.random_range(0..8);
            bytes[at] ^= 1 << bit;
            mutation("bit flip", format!("flip bit {bit} of byte {at}"))
        }
        4..=5 => {
            let at = target(rng, bytes.len());
            let value: u8 = rng.random();
            bytes[at] = value;
            mutation("byte set", format!("set byte {at} to {value:#04x}"))
        }
        6 => {
            let len = anywhere(rng, bytes.len());
            bytes.truncate(len);
            mutation("truncation", format!("truncate to {len} bytes"))
        }
        7 => {
            let extra = rng.random_range(1..65536);
            bytes.extend((0..extra).map(|_| rng.random::<u8>()));
            mutation("extension", format!("append {extra} bytes"))
        }
        8..=11 => header_edit(rng, bytes),
        12 => length_edit(rng, bytes),
        13 => blowup(rng, bytes),
        _ => plane_edit(rng, bytes, grids),
    }
}

const BLOWUP: &str = "header blow-up";

/// Replaces the header with one of the structures no tensor table has, built to cost memory out of
/// proportion to its bytes if materialised, keeping the data section.
fn blowup(rng: &mut StdRng, bytes: &mut Vec<u8>) -> Mutation {
    use std::fmt::Write;
    let count = rng.random_range(50_000..300_000usize);
    // Written straight into the file's bytes: the campaign's own allocations stay one buffer.
    let mut h = String::new();
    let describe = match rng.random_range(0..5u32) {
        0 => {
            h.push('[');
            (0..count).for_each(|_| h.push_str("0,"));
            h.push_str("0]");
            format!("one array of {} zeros", count + 1)
        }
        1 => {
            h.push_str("{\"__metadata__\":{");
            for i in 0..count / 4 {
                let _ = write!(h, "\"{i}\":\"\",");
            }
            h.push_str("\"end\":\"\"}}");
            format!("__metadata__ of {} keys", count / 4 + 1)
        }
        2 => {
            h.push_str("{\"t\":{\"dtype\":\"U8\",\"shape\":[");
            (0..count).for_each(|_| h.push_str("1,"));
            h.push_str("1],\"data_offsets\":[0,1]}}");
            format!("a shape of {} dimensions", count + 1)
        }
        3 => {
            (0..count).for_each(|_| h.push('['));
            (0..count).for_each(|_| h.push(']'));
            format!("{count} nested arrays")
        }
        _ => {
            h.push('{');
            for i in 0..count / 10 {
                let _ = write!(
                    h,
                    "\"e{i}\":{{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}},"
                );
            }
            h.push_str("\"end\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}");
            format!("{} zero-byte tensors", count / 10 + 1)
        }
    };
    let start = header_end(bytes).min(bytes.len());
    bytes.splice(
        ..start,
        (h.len() as u64)
            .to_le_bytes()
            .into_iter()
            .chain(h.into_bytes()),
    );
    mutation(BLOWUP, describe)
}

fn header_end(bytes: &[u8]) -> usize {
    bytes.get(..8).map_or(0, |b| {
        usize::try_from(u64::from_le_bytes(b.try_into().unwrap_or_default()))
            .unwrap_or(usize::MAX)
            .saturating_add(8)
    })
}

/// The header as an independent, plain reading sees it: name to (dtype, shape, offsets), or `None`.
fn header_of(bytes: &[u8]) -> Option<serde_json::Map<String, Value>> {
    let end = header_end(bytes);
    let text = std::str::from_utf8(bytes.get(8..end)?).ok()?;
    match serde_json::from_str::<Value>(text).ok()? {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// Rewrites the header (keeping the data) after one structured edit of its JSON.
fn header_edit(rng: &mut StdRng, bytes: &mut Vec<u8>) -> Mutation {
    let Some(mut map) = header_of(bytes) else {
        return mutation("header edit", "none (header unreadable)".into());
    };
    let names: Vec<String> = map.keys().cloned().collect();
    let name = names[rng.random_range(0..names.len())].clone();
    let other = names[rng.random_range(0..names.len())].clone();
    let mut extra_raw: Option<String> = None;
    let describe;
    {
        let entry = map.get_mut(&name).and_then(Value::as_object_mut);
        let Some(entry) = entry else {
            return mutation("header edit", "none".into());
        };
        let offsets = entry["data_offsets"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let (b, e) = (
            offsets[0].as_i64().unwrap_or(0),
            offsets[1].as_i64().unwrap_or(0),
        );
        match rng.random_range(0..10u32) {
            0 => {
                let d = if rng.random_bool(0.5) { 1 } else { -1 };
                entry["data_offsets"] = serde_json::json!([b + d, e]);
                describe = format!("{name}: begin {b} -> {}", b + d);
            }
            1 => {
                let d = if rng.random_bool(0.5) { 1 } else { -1 };
                entry["data_offsets"] = serde_json::json!([b, e + d]);
                describe = format!("{name}: end {e} -> {}", e + d);
            }
            2 => {
                entry["data_offsets"] = serde_json::json!([e, b]);
                describe = format!("{name}: offsets swapped");
            }
            3 => {
                entry["data_offsets"] = serde_json::json!([0, e - b]);
                describe = format!("{name}: moved to offset 0 (overlap)");
            }
            4 => {
                entry["shape"] = serde_json::json!([u64::MAX, 2]);
                describe = format!("{name}: shape [u64::MAX, 2] (overflow)");
            }
            5 => {
                entry["shape"] = serde_json::json!([-1, 5120]);
                describe = format!("{name}: negative dimension");
            }
            6 => {
                entry["shape"] = serde_json::json!([4294967296u64, 4294967296u64, 5120]);
                describe = format!("{name}: shape whose product overflows");
            }
            7 => {
                entry["dtype"] = Value::String(
                    ["F16", "BF16", "U8", "I32", "Q4_1", "F64"][rng.random_range(0..6)].into(),
                );
                describe = format!("{name}: dtype -> {}", entry["dtype"]);
            }
            8 => {
                let dup = serde_json::to_string(&entry.clone()).unwrap_or_default();
                extra_raw = Some(format!("{}:{dup}", Value::String(other.clone())));
                describe = format!("duplicate key {other:?}");
            }
            _ => {
                extra_raw = Some("\"block_size\":8".to_owned());
                describe = "a config scalar at the top level".to_owned();
            }
        }
    }
    let mut text = serde_json::to_string(&map).unwrap_or_default();
    if let Some(raw) = extra_raw {
        text.insert_str(1, &format!("{raw},"));
    }
    let mut header = text.into_bytes();
    if rng.random_bool(0.1) {
        let at = rng.random_range(0..header.len());
        header[at] = 0xff;
    }
    let header = crate::synth::pad_header(header);
    let data = bytes[header_end(bytes).min(bytes.len())..].to_vec();
    bytes.clear();
    bytes.extend_from_slice(&(header.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&header);
    bytes.extend_from_slice(&data);
    mutation("header edit", describe)
}

/// Lies about the header length: past the file, over 100 MiB, or zero.
fn length_edit(rng: &mut StdRng, bytes: &mut [u8]) -> Mutation {
    let n: u64 = match rng.random_range(0..4u32) {
        0 => bytes.len() as u64,
        1 => 100 * 1024 * 1024 + 1,
        2 => u64::MAX,
        _ => 0,
    };
    bytes[..8].copy_from_slice(&n.to_le_bytes());
    mutation("header length", format!("header length {n}"))
}

/// Makes one scale or minimum non-finite or non-positive: the gate must name the tensor and tile.
fn plane_edit(rng: &mut StdRng, bytes: &mut [u8], grids: &[(String, usize, usize)]) -> Mutation {
    let (name, first, tiles) = &grids[rng.random_range(0..grids.len())];
    let tile = rng.random_range(0..*tiles);
    let group = rng.random_range(0..256usize);
    let (plane, value, what) = match rng.random_range(0..5u32) {
        0 => (0, bf16::NAN, "scale NaN"),
        1 => (0, bf16::INFINITY, "scale +inf"),
        2 => (0, bf16::from_f32(-0.01), "scale negative"),
        3 => (1, bf16::NEG_INFINITY, "minimum -inf"),
        _ => (0, bf16::ZERO, "scale zero over its codes"),
    };
    let at = first + tile * 5120 + plane * 512 + 2 * group;
    bytes[at..at + 2].copy_from_slice(&value.to_bits().to_le_bytes());
    let mut m = mutation(
        "scale or minimum",
        format!("{what} at {name} tile {tile} group {group}"),
    );
    // A zero scale over all-zero codes is a legitimate constant group; the generator's codes for a
    // group are all zero only if its weights were all at the minimum, so check the bytes.
    let codes_zero = (0..32).all(|j| {
        let (c, r) = (group / 32, group % 32);
        let byte = first + tile * 5120 + 1024 + (r / 16) * 2048 + (c * 32 + j) * 8 + (r % 16) / 2;
        let mask = if r % 2 == 0 { 0x0f } else { 0xf0 };
        bytes[byte] & mask == 0
    });
    if !(what == "scale zero over its codes" && codes_zero) {
        m.broken_group = Some((name.clone(), tile as u64));
    }
    m
}

/// `Some(why)` when the report breaks a property for this mutant.
fn judge(
    report: &Report,
    bytes: &[u8],
    original: &serde_json::Map<String, Value>,
    m: &Mutation,
) -> Option<String> {
    if let Some((tensor, tile)) = &m.broken_group {
        let check = report.check("tiles.headers_sane")?;
        let named = check.message().contains(tensor.as_str())
            && check.message().contains(&format!("tile {tile} "));
        if check.outcome() != Outcome::Fail || !named {
            return Some(format!(
                "tiles.headers_sane did not name {tensor} tile {tile}: {} {}",
                check.outcome(),
                check.message()
            ));
        }
        return None;
    }
    if report.verdict() != Outcome::Pass {
        return None;
    }
    // PASS: the header must say what the original said (an independent, plain reading), else the gate
    // passed a changed header.
    match header_of(bytes) {
        Some(h) if equivalent(&h, original) => None,
        Some(_) => Some("PASS on a header that differs from the original".to_owned()),
        None => Some("PASS on a header a plain JSON reading cannot parse".to_owned()),
    }
}

/// The same header, allowing the one documented equivalence: a tile grid declared `U8` instead of
/// `I8` (spec section 4.1).
fn equivalent(
    h: &serde_json::Map<String, Value>,
    original: &serde_json::Map<String, Value>,
) -> bool {
    let normal = |m: &serde_json::Map<String, Value>| -> serde_json::Map<String, Value> {
        m.iter()
            .map(|(k, v)| {
                let mut v = v.clone();
                if v.get("dtype") == Some(&Value::String("U8".into())) {
                    v["dtype"] = Value::String("I8".into());
                }
                (k.clone(), v)
            })
            .collect()
    };
    normal(h) == normal(original)
}

pub(crate) mod tests {
    unit_tests![a_short_campaign_holds];

    fn a_short_campaign_holds() {
        let f = super::run(1, 300);
        assert!(f.violations.is_empty(), "{:#?}", f.violations);
        assert_eq!(f.runs, 300);
    }
}
