//! Drafts written by the real libraries, gated (issues 46 and 47). The suite's quantized,
//! speculators, MLX and `mask_embedding.pt` arms are written by the generator from the libraries'
//! code as read; here the libraries write them themselves (`tests/differential/writers.py`), from the
//! synthetic folder arms' drafts: `torch.save` (spec 18.2), speculators 0.9.0's own model classes and
//! `save_pretrained` (18.1), compressed-tensors 0.20's pack-quantized, FP8 and NVFP4 compressors (17),
//! mlx-lm's `save_model` and `quantize_model` in each MLX mode (13.1, 17), and ModelOpt 0.47's
//! DFlash exporter, NVFP4 and FP8, from a draft of its own (17). Every good file must PASS, every control must be
//! refused at its check naming the tensor or field, every good file is read back by the library that
//! wrote it (loaded, decompressed or dequantized, and compared), and where the generator writes the
//! same layout for an arm CI runs, the two layouts are held equal, so a library that changes its
//! layout fails here, naming what moved, before a user's draft does.
//!
//! Needs a Python with the libraries, named by `DFLASH_GATE_WRITERS_PYTHON` (torch is too heavy for
//! CI). Without it each trial is one ignored trial whose name says which variable it needs; with it,
//! a trial whose library that Python does not import is listed ignored with the library as its kind.

use dflash_gate::__private::pickle::StorageType;
use dflash_gate::__private::torch_archive::{read_mask_embedding, MaskEmbedding};
use dflash_gate::{gate, CheckId, Options, Outcome, Report};
use gate_tests::arms::folder::write_arm;
use gate_tests::synth::pack_quantized::{pack_quantize, read_tensors, PackOptions};
use gate_tests::synth::quantized::{fp8_quantize, mlx_quantize, nvfp4_quantize, Grain, Mlx};
use gate_tests::synth::torch;
use libtest_mimic::{Failed, Trial};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const WRITERS_PYTHON_VAR: &str = "DFLASH_GATE_WRITERS_PYTHON";

struct Writer {
    name: &'static str,
    /// The modules the driver imports for it.
    imports: &'static [&'static str],
    run: fn(&Path) -> Result<(), String>,
}

const WRITERS: &[Writer] = &[
    Writer {
        name: "differential::writers::torch_save_mask_embedding",
        imports: &["torch"],
        run: mask_embedding,
    },
    Writer {
        name: "differential::writers::speculators_save_pretrained",
        imports: &["torch", "transformers", "speculators"],
        run: speculators,
    },
    Writer {
        name: "differential::writers::compressed_tensors_pack_quantized",
        imports: &["torch", "safetensors", "compressed_tensors"],
        run: compressed_tensors,
    },
    Writer {
        name: "differential::writers::mlx_lm_save_model",
        imports: &["mlx", "mlx_lm"],
        run: mlx,
    },
    Writer {
        name: "differential::writers::transformers_fine_grained_fp8",
        imports: &["torch", "safetensors", "transformers"],
        run: hugging_face_fp8,
    },
    Writer {
        name: "differential::writers::modelopt_dflash_exporter",
        imports: &["torch", "safetensors", "transformers", "modelopt"],
        run: modelopt,
    },
];

pub fn trials() -> Vec<Trial> {
    let python = std::env::var_os(WRITERS_PYTHON_VAR).map(PathBuf::from);
    let absent = python.as_deref().map(absent_modules);
    WRITERS
        .iter()
        .map(|w| match (&python, &absent) {
            (Some(python), Some(absent)) => {
                let lacks: Vec<&str> = w
                    .imports
                    .iter()
                    .copied()
                    .filter(|m| absent.iter().any(|a| a == m))
                    .collect();
                if lacks.is_empty() {
                    let python = python.clone();
                    let run = w.run;
                    Trial::test(w.name, move || run(&python).map_err(Failed::from))
                } else {
                    Trial::test(w.name, || Ok(()))
                        .with_kind(format!(
                            "{WRITERS_PYTHON_VAR} cannot import {} (CONTRIBUTING.md)",
                            lacks.join(", ")
                        ))
                        .with_ignored_flag(true)
                }
            }
            _ => Trial::test(format!("{}_needs_{WRITERS_PYTHON_VAR}", w.name), || Ok(()))
                .with_ignored_flag(true),
        })
        .collect()
}

/// The modules of every writer that `python` cannot find (all of them when it does not run).
fn absent_modules(python: &Path) -> Vec<String> {
    let mut all: Vec<&str> = WRITERS
        .iter()
        .flat_map(|w| w.imports.iter().copied())
        .collect();
    all.sort_unstable();
    all.dedup();
    let probe = "import importlib.util, sys\nprint(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))";
    match Command::new(python).args(["-c", probe]).args(&all).output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
        _ => all.into_iter().map(str::to_owned).collect(),
    }
}

/// One file or folder the driver wrote: its case, path, what reading it back found, and the rest
/// of its line.
struct Written {
    case: String,
    path: PathBuf,
    readback: String,
    line: Value,
}

/// Runs `writers.py COMMAND WORK ARGS...`, and every case it wrote (each read back clean).
fn drive(python: &Path, command: &str, work: &Path, args: &[&str]) -> Result<Vec<Written>, String> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/differential/writers.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(command)
        .arg(work)
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "writers.py {command} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut written = Vec::new();
    // A library may print its own lines (mlx-lm's "[INFO] ..."): the driver's are JSON objects.
    for line in String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
    {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("{line}: {e}"))?;
        let text = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        written.push(Written {
            case: text("case"),
            path: PathBuf::from(text("path")),
            readback: text("readback"),
            line: v,
        });
    }
    let unread: Vec<String> = written
        .iter()
        .filter(|w| w.readback != "ok")
        .map(|w| format!("{}: {}", w.case, w.readback))
        .collect();
    if !unread.is_empty() {
        return Err(format!(
            "the library's own reading of what it wrote: {}",
            unread.join("; ")
        ));
    }
    Ok(written)
}

/// The synthetic bf16 folder (`folder::pass::dflash`), and what the driver's `command` wrote from
/// it (in a folder of the command's name), under a temporary root that lives as long as the caller
/// holds it.
fn from_the_bf16_folder(
    python: &Path,
    command: &str,
) -> Result<(tempfile::TempDir, PathBuf, Vec<Written>), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let base = folder("folder::pass::dflash", &root.path().join("bf16"))?;
    let written = drive(
        python,
        command,
        &root.path().join(command),
        &[&base.to_string_lossy()],
    )?;
    Ok((root, base, written))
}

/// The case `name` of `written`, which the driver must have written.
fn case<'w>(written: &'w [Written], name: &str) -> Result<&'w Written, String> {
    written
        .iter()
        .find(|w| w.case == name)
        .ok_or_else(|| format!("the driver wrote no {name}"))
}

/// The library's quantized draft held to the bf16 folder it was quantized from (`--source`, spec
/// 17.2): every `source.*` check passes, so the dequantization the gate does is the library's own,
/// and the one-step bound holds the library's own rounding.
fn against_its_source(what: &str, path: &Path, source: &Path) -> Result<(), String> {
    let options = Options::default().with_source(source);
    let report = gate(path, &options).map_err(|e| format!("{what} --source: {e}"))?;
    let q = report
        .checks()
        .iter()
        .find(|c| c.id() == CheckId::SOURCE_Q4_1);
    if report.verdict() != Outcome::Pass || q.is_none() {
        return Err(format!(
            "{what} --source: not a PASS:\n{}",
            report.to_text(false)
        ));
    }
    Ok(())
}

/// The gate's report on `path`.
fn gated(path: &Path) -> Result<Report, String> {
    gate(path, &Options::default()).map_err(|e| format!("{}: {e}", path.display()))
}

/// `Ok` when the report is a PASS whose `check` (when given) says each of `mentions`.
fn passes(
    what: &str,
    report: &Report,
    check: Option<&str>,
    mentions: &[&str],
) -> Result<(), String> {
    let text = report.to_text(false);
    if report.verdict() != Outcome::Pass {
        return Err(format!("{what}: not a PASS:\n{text}"));
    }
    if let Some(check) = check {
        let said = report
            .checks()
            .iter()
            .find(|c| c.id() == check)
            .map(|c| c.message().to_owned())
            .ok_or_else(|| format!("{what}: no {check}:\n{text}"))?;
        if let Some(m) = mentions.iter().find(|m| !said.contains(**m)) {
            return Err(format!("{what}: {check} does not say {m:?}: {said}"));
        }
    }
    Ok(())
}

/// `Ok` when `check` has `outcome` naming each of `mentions`, and every other check passes, was
/// blocked by it, or is one of `also` with the same outcome for the same reason (naming `mentions[0]`).
fn refused(
    what: &str,
    report: &Report,
    check: &str,
    outcome: Outcome,
    mentions: &[&str],
    also: &[&str],
) -> Result<(), String> {
    let text = report.to_text(false);
    let found = report
        .checks()
        .iter()
        .find(|c| c.id() == check)
        .ok_or_else(|| format!("{what}: no {check}:\n{text}"))?;
    if found.outcome() != outcome {
        return Err(format!(
            "{what}: {check} is {}, {outcome} owed:\n{text}",
            found.outcome()
        ));
    }
    if let Some(m) = mentions.iter().find(|m| !found.message().contains(**m)) {
        return Err(format!("{what}: {check} does not name {m:?}:\n{text}"));
    }
    let same_reason = |c: &dflash_gate::Check| {
        also.contains(&c.id())
            && c.outcome() == outcome
            && mentions.first().is_none_or(|m| c.message().contains(m))
    };
    let others: Vec<&str> = report
        .checks()
        .iter()
        .filter(|c| {
            c.id() != check
                && c.outcome() != Outcome::Pass
                && c.blocked_by() != Some(check)
                && !same_reason(c)
        })
        .map(|c| c.id())
        .collect();
    if !others.is_empty() {
        return Err(format!("{what}: {others:?} changed too:\n{text}"));
    }
    Ok(())
}

/// A control the driver wrote: its case, and the check that must FAIL naming each of the mentions.
type Control<'m> = (&'m str, &'m str, &'m [&'m str]);

/// Each control of `controls` the driver wrote FAILs at its check naming its tensor, and nothing
/// else changed.
fn failed_controls(
    failures: &mut Failures,
    written: &[Written],
    library: &str,
    controls: &[Control<'_>],
) {
    for (name, check, mentions) in controls {
        failures.note((|| {
            let w = case(written, name)?;
            let what = format!("{library} {name}");
            refused(&what, &gated(&w.path)?, check, Outcome::Fail, mentions, &[])
        })());
    }
}

/// Collects every failure of a trial's cases, so one run names them all.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn note(&mut self, r: Result<(), String>) {
        if let Err(e) = r {
            self.0.push(e);
        }
    }

    fn done(self) -> Result<(), String> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(self.0.join("\n"))
        }
    }
}

/// The folder arm `arm`'s draft, written into `dir`.
fn folder(arm: &str, dir: &Path) -> Result<PathBuf, String> {
    write_arm(arm, dir)
}

/// A copy of the regular files of `from` in `to` (created).
fn copy_folder(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| e.to_string())?;
    for entry in std::fs::read_dir(from).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        if entry.file_type().map_err(|e| e.to_string())?.is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

fn config_of(dir: &Path) -> Result<Value, String> {
    let bytes = std::fs::read(dir.join("config.json")).map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}

const MASK: &str = CheckId::SCALARS_MASK_TOKEN_ID;

/// `mask_embedding.pt` written by `torch.save` (spec 18.2), beside the synthetic DFlash folder: a
/// dict and an OrderedDict, F32 and BF16, pass; the wrong id, the wrong length and a NaN fail naming
/// it; a pickle whose id would run `touch` is refused naming `posix.system`, and nothing ran.
fn mask_embedding(python: &Path) -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let base = folder("folder::pass::dflash", &root.path().join("base"))?;
    let c = config_of(&base)?;
    let hidden = c["hidden_size"].as_u64().ok_or("no hidden_size")?;
    let id = c["dflash_config"]["mask_token_id"]
        .as_u64()
        .ok_or("no mask_token_id")?;
    let witness = root.path().join("executed");
    let written = drive(
        python,
        "mask",
        &root.path().join("torch"),
        &[
            &hidden.to_string(),
            &id.to_string(),
            &witness.to_string_lossy(),
        ],
    )?;
    let mut failures = Failures::default();
    let gate_case = |name: &str| -> Result<(String, Report), String> {
        let w = case(&written, name)?;
        let dir = root.path().join("gated").join(name);
        copy_folder(&base, &dir)?;
        std::fs::copy(&w.path, dir.join("mask_embedding.pt")).map_err(|e| e.to_string())?;
        Ok((format!("torch.save {name}"), gated(&dir)?))
    };
    for name in ["dict_f32", "dict_bf16", "ordered_f32", "ordered_bf16"] {
        failures.note(gate_case(name).and_then(|(what, r)| {
            passes(
                &what,
                &r,
                Some(MASK),
                &[
                    "mask_embedding.pt holds mask_token_id",
                    "read without executing",
                ],
            )
        }));
        failures.note(case(&written, name).and_then(|w| same_reading(w, hidden)));
    }
    let controls: [(&str, &[&str]); 4] = [
        (
            "wrong_id",
            &[
                "mask_embedding.pt holds mask_token_id",
                "where config.json states",
            ],
        ),
        (
            "wrong_length",
            &["mask_embedding.pt's embedding is", "not [hidden_size]"],
        ),
        (
            "nan",
            &["mask_embedding.pt's embedding is not finite: element 3 is NaN"],
        ),
        (
            "malicious",
            &[
                "mask_embedding.pt",
                "the global posix.system",
                "refused unread",
            ],
        ),
    ];
    for (name, mentions) in controls {
        failures.note(
            gate_case(name)
                .and_then(|(what, r)| refused(&what, &r, MASK, Outcome::Fail, mentions, &[])),
        );
    }
    if witness.exists() {
        failures.note(Err(format!(
            "{} exists: the malicious pickle ran",
            witness.display()
        )));
    }
    failures.done()
}

/// The gate's reading of torch's file holds the id, dtype and values torch saved; for F32, the
/// generator's `mask_embedding.pt` of those values reads the same.
fn same_reading(w: &Written, hidden: u64) -> Result<(), String> {
    let bytes = std::fs::read(&w.path).map_err(|e| e.to_string())?;
    let read = read_mask_embedding(&bytes).map_err(|e| format!("torch.save {}: {e}", w.case))?;
    let saved: Vec<f32> = w.line["values"]
        .as_array()
        .ok_or("no values")?
        .iter()
        .map(|v| v.as_f64().map_or(f32::NAN, |v| v as f32))
        .collect();
    let dtype = match w.line["dtype"].as_str() {
        Some("float32") => StorageType::Float,
        Some("bfloat16") => StorageType::BFloat16,
        other => return Err(format!("torch.save {}: dtype {other:?}", w.case)),
    };
    let want = MaskEmbedding {
        mask_token_id: w.line["mask_token_id"].as_i64().ok_or("no mask_token_id")?,
        dtype,
        shape: vec![hidden],
        values: saved,
    };
    if read != want {
        return Err(format!(
            "torch.save {}: the gate reads {:?} {:?} {:?}, torch saved {:?} {:?} {:?} (or the values differ)",
            w.case, read.mask_token_id, read.dtype, read.shape, want.mask_token_id, want.dtype, want.shape
        ));
    }
    if dtype == StorageType::Float {
        let ours =
            read_mask_embedding(&torch::mask_embedding_pt(want.mask_token_id, &want.values))?;
        if ours != read {
            return Err(format!(
                "torch.save {}: the generator's mask_embedding.pt of the same values reads otherwise",
                w.case
            ));
        }
    }
    Ok(())
}

/// Tensor names and shapes of a folder's `model.safetensors`.
fn layout(dir: &Path) -> BTreeMap<String, (String, Vec<u64>)> {
    read_tensors(&dir.join("model.safetensors"))
        .into_iter()
        .map(|(name, dtype, shape, _)| (name, (dtype, shape)))
        .collect()
}

/// Each side's names the other lacks or holds otherwise, for a message.
fn differ(
    ours: &BTreeMap<String, (String, Vec<u64>)>,
    theirs: &BTreeMap<String, (String, Vec<u64>)>,
) -> Option<String> {
    let only = |a: &BTreeMap<String, (String, Vec<u64>)>,
                b: &BTreeMap<String, (String, Vec<u64>)>| {
        a.iter()
            .filter(|(k, v)| b.get(*k) != Some(v))
            .map(|(k, (d, s))| format!("{k} {d} {s:?}"))
            .collect::<Vec<_>>()
    };
    let (a, b) = (only(ours, theirs), only(theirs, ours));
    (!a.is_empty() || !b.is_empty())
        .then(|| format!("only the generator's: {a:?}; only the library's: {b:?}"))
}

/// Speculators 0.9.0's own drafts (spec 18.1): DFlash, DFlash2 and a reduced vocabulary, written by
/// its config classes and `save_pretrained`, and the z-lab DFlash folder converted by its own
/// `DFlashConverter` (`speculators convert --algorithm dflash`), pass; their tensors are the
/// generator's speculators arms' (names and shapes; dtypes aside), and the fields the gate reads say
/// what the generator's say.
fn speculators(python: &Path) -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dflash = folder("folder::pass::dflash", &root.path().join("zlab1"))?;
    let dflash2 = folder("folder::pass::dflash2", &root.path().join("zlab2"))?;
    let written = drive(
        python,
        "speculators",
        &root.path().join("speculators"),
        &[&dflash.to_string_lossy(), &dflash2.to_string_lossy()],
    )?;
    let mut failures = Failures::default();
    for (name, arm) in [
        ("dflash", "folder::pass::speculators_dflash"),
        ("dflash2", "folder::pass::speculators_dflash2"),
        ("reduced", "folder::pass::speculators_reduced_vocabulary"),
        ("converted", "folder::pass::speculators_dflash"),
    ] {
        failures.note((|| {
            let w = case(&written, name)?;
            let what = format!("speculators {name}");
            passes(&what, &gated(&w.path)?, None, &[])?;
            let ours_dir = folder(arm, &root.path().join("generator").join(name))?;
            let shapes = |m: BTreeMap<String, (String, Vec<u64>)>| {
                m.into_iter()
                    .map(|(k, (_, s))| (k, (String::new(), s)))
                    .collect::<BTreeMap<_, _>>()
            };
            if let Some(d) = differ(&shapes(layout(&ours_dir)), &shapes(layout(&w.path))) {
                return Err(format!("{what}: tensors differ from {arm}'s: {d}"));
            }
            let (ours, theirs) = (config_of(&ours_dir)?, config_of(&w.path)?);
            for pointer in [
                "/speculators_model_type",
                "/aux_hidden_state_layer_ids",
                "/mask_token_id",
                "/draft_vocab_size",
                "/block_size",
                "/speculators_config/proposal_methods/0/speculative_tokens",
                "/speculators_config/verifier/architectures",
                "/transformer_layer_config/hidden_size",
                "/transformer_layer_config/num_hidden_layers",
                "/transformer_layer_config/vocab_size",
            ] {
                if ours.pointer(pointer) != theirs.pointer(pointer) {
                    return Err(format!(
                        "{what}: {pointer} is {:?} where {arm} writes {:?}",
                        theirs.pointer(pointer),
                        ours.pointer(pointer)
                    ));
                }
            }
            Ok(())
        })());
    }
    failures.done()
}

/// compressed-tensors' float schemes: the driver's case, and the generator's writing of it.
type Scheme = (&'static str, fn(&Path));
const FLOAT_SCHEMES: &[Scheme] = &[
    ("fp8_tensor", |d| {
        fp8_quantize(d, CompressedTensors, Grain::Tensor, true)
    }),
    ("fp8_channel", |d| {
        fp8_quantize(d, CompressedTensors, Grain::Channel, false)
    }),
    ("fp8_block", |d| {
        fp8_quantize(d, CompressedTensors, Grain::Block(128, 128), false)
    }),
    ("nvfp4a16", |d| nvfp4_quantize(d, CompressedTensors, false)),
    ("nvfp4", |d| nvfp4_quantize(d, CompressedTensors, true)),
];

use gate_tests::synth::quantized::Writer::CompressedTensors;

/// compressed-tensors' pack-quantized schemes: the driver's case, and the generator's writing of it.
const PACK_SCHEMES: &[Scheme] = &[
    ("w4_group32_sym", |d| pack(d, 4, Some(32), true)),
    ("w4_group128_asym", |d| pack(d, 4, Some(128), false)),
    ("w4_channel_sym", |d| pack(d, 4, None, true)),
    ("w4_channel_asym", |d| pack(d, 4, None, false)),
    ("w8_channel_sym", |d| pack(d, 8, None, true)),
];

fn pack(dir: &Path, bits: u32, group: Option<u64>, symmetric: bool) {
    let options = PackOptions {
        bits,
        group,
        symmetric,
        ignore: &[],
    };
    pack_quantize(dir, options)
}

/// compressed-tensors 0.20's pack-quantized drafts (spec 17), each scheme compressed by its own
/// compressor from the synthetic bf16 folder and decompressed back by it: each passes, holds the
/// generator's tensors for the same scheme (names, dtypes, shapes), and the config's scheme reads as
/// the generator's; a NaN scale and a packed tensor one column short fail naming the tensor.
fn compressed_tensors(python: &Path) -> Result<(), String> {
    let (root, base, written) = from_the_bf16_folder(python, "compressed")?;
    let mut failures = Failures::default();
    for (name, write) in PACK_SCHEMES.iter().chain(FLOAT_SCHEMES) {
        failures.note((|| {
            let w = case(&written, name)?;
            let what = format!("compressed-tensors {name}");
            passes(&what, &gated(&w.path)?, None, &[])?;
            against_its_source(&what, &w.path, &base)?;
            let ours = root.path().join("generator").join(name);
            copy_folder(&base, &ours)?;
            write(&ours);
            if let Some(d) = differ(&layout(&ours), &layout(&w.path)) {
                return Err(format!("{what}: tensors differ from the generator's: {d}"));
            }
            let (ours, theirs) = (config_of(&ours)?, config_of(&w.path)?);
            let group = "/quantization_config/config_groups/group_0";
            for pointer in [
                "/quantization_config/quant_method".to_owned(),
                "/quantization_config/format".to_owned(),
                format!("{group}/targets"),
                format!("{group}/weights/num_bits"),
                format!("{group}/weights/type"),
                format!("{group}/weights/symmetric"),
                format!("{group}/weights/strategy"),
                format!("{group}/weights/group_size"),
                format!("{group}/weights/block_structure"),
                format!("{group}/input_activations/dynamic"),
                "/quantization_config/ignore".to_owned(),
            ] {
                same_field(&what, &ours, &theirs, &pointer)?;
            }
            Ok(())
        })());
    }
    let controls: [Control<'_>; 6] = [
        (
            "scale_nan",
            CheckId::QUANT_SCALES,
            &["fc.weight_scale[3] is NaN", "finite"],
        ),
        (
            "packed_truncated",
            CheckId::INVENTORY_COMPLETE,
            &["fc.weight_packed is I32", "packs into"],
        ),
        (
            "fp8_weight_nan",
            CheckId::QUANT_SCALES,
            &["fc.weight[5] is NaN (0x7f)"],
        ),
        (
            "fp8_scale_zero",
            CheckId::QUANT_SCALES,
            &["fc.weight_scale[2] is 0", "> 0"],
        ),
        (
            "nvfp4_global_scale_zero",
            CheckId::QUANT_SCALES,
            &["fc.weight_global_scale[0] is 0", "> 0"],
        ),
        (
            "nvfp4_scale_nan",
            CheckId::QUANT_SCALES,
            &["fc.weight_scale[50] is NaN (0x7f)"],
        ),
    ];
    failed_controls(&mut failures, &written, "compressed-tensors", &controls);
    failures.done()
}

/// Transformers' fine-grained FP8 (spec 17): the synthetic bf16 folder quantized by Transformers'
/// own `Fp8Quantize` op in 128x128 blocks, `FineGrainedFP8Config().to_dict()` as its config, read
/// back by Transformers' own `Fp8Dequantize`. It passes, holds `--source` against the bf16 folder,
/// holds the generator's tensors for the scheme, and states the config fields the gate reads as the
/// generator does.
fn hugging_face_fp8(python: &Path) -> Result<(), String> {
    let (root, base, written) = from_the_bf16_folder(python, "hf_fp8")?;
    let w = case(&written, "fp8_block")?;
    let what = "Transformers' fine-grained FP8";
    passes(
        what,
        &gated(&w.path)?,
        Some(CheckId::QUANT_SCALES),
        &["Hugging Face FP8 E4M3 128x128 blocks"],
    )?;
    against_its_source(what, &w.path, &base)?;
    let ours = root.path().join("generator");
    copy_folder(&base, &ours)?;
    fp8_quantize(&ours, HuggingFaceWriter, Grain::Block(128, 128), false);
    if let Some(d) = differ(&layout(&ours), &layout(&w.path)) {
        return Err(format!("{what}: tensors differ from the generator's: {d}"));
    }
    let (ours, theirs) = (config_of(&ours)?, config_of(&w.path)?);
    for field in [
        "quant_method",
        "weight_block_size",
        "activation_scheme",
        "scale_fmt",
    ] {
        same_field(
            what,
            &ours,
            &theirs,
            &format!("/quantization_config/{field}"),
        )?;
    }
    Ok(())
}

/// `Ok` when the library's config (`theirs`) states at `pointer` what the generator's (`ours`) does.
fn same_field(what: &str, ours: &Value, theirs: &Value, pointer: &str) -> Result<(), String> {
    if ours.pointer(pointer) != theirs.pointer(pointer) {
        return Err(format!(
            "{what}: {pointer} is {:?} where the generator writes {:?}",
            theirs.pointer(pointer),
            ours.pointer(pointer)
        ));
    }
    Ok(())
}

use gate_tests::synth::quantized::Writer::HuggingFace as HuggingFaceWriter;

/// ModelOpt's schemes as its DFlash exporter writes them: the driver's case, and the generator's
/// writing of it.
const MODELOPT_SCHEMES: &[Scheme] = &[
    ("nvfp4", |d| nvfp4_quantize(d, ModelOptWriter, true)),
    ("w4a16_nvfp4", |d| nvfp4_quantize(d, ModelOptWriter, false)),
    ("fp8", |d| {
        fp8_quantize(d, ModelOptWriter, Grain::Tensor, true)
    }),
];

use gate_tests::synth::quantized::Writer::ModelOpt as ModelOptWriter;

/// ModelOpt 0.47's DFlash exporter (`export_speculative_decoding`, spec 17): a draft ModelOpt
/// builds for a small Qwen3 target, exported as bf16 and quantized (NVFP4, W4A16_NVFP4, FP8) on the
/// CPU and read back by ModelOpt's own dequantization. The bf16 export passes; each quantized one
/// passes, holds `--source` against the bf16 export, holds the generator's tensors for its scheme
/// (names, dtypes, shapes), states ModelOpt's own object as its `quantization_config` (no
/// `quant_method`), and is read as ModelOpt's scheme; vLLM's verdict is `modelopt_object_algo`'s
/// exactly for W4A16_NVFP4, the algorithm vLLM names no method for.
fn modelopt(python: &Path) -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let written = drive(python, "modelopt", &root.path().join("modelopt"), &[])?;
    let source = &case(&written, "bf16")?.path;
    passes("ModelOpt's bf16 export", &gated(source)?, None, &[])?;
    let mut failures = Failures::default();
    for (name, write) in MODELOPT_SCHEMES {
        failures.note((|| {
            let w = case(&written, name)?;
            let what = format!("ModelOpt's DFlash exporter, {name}");
            let report = gated(&w.path)?;
            passes(&what, &report, Some(CheckId::QUANT_SCALES), &["ModelOpt"])?;
            let vllm_refuses = report.loaders().iter().any(|l| {
                l.engine == dflash_gate::Engine::Vllm
                    && l.reasons.iter().any(|r| r.rule == "modelopt_object_algo")
            });
            if vllm_refuses != (*name == "w4a16_nvfp4") {
                return Err(format!(
                    "{what}: vLLM's modelopt_object_algo met: {vllm_refuses}"
                ));
            }
            against_its_source(&what, &w.path, source)?;
            let ours = root.path().join("generator").join(name);
            copy_folder(source, &ours)?;
            write(&ours);
            if let Some(d) = differ(&layout(&ours), &layout(&w.path)) {
                return Err(format!("{what}: tensors differ from the generator's: {d}"));
            }
            let config = config_of(&w.path)?;
            let stated = config.pointer("/quantization_config");
            let own = stated.and_then(|q| q.pointer("/producer/name"))
                == Some(&Value::from("modelopt"))
                && stated.is_some_and(|q| q.get("quant_method").is_none());
            if !own {
                return Err(format!(
                    "{what}: quantization_config is {stated:?}, not ModelOpt's own object"
                ));
            }
            Ok(())
        })());
    }
    failures.done()
}

const fn mode(mode: &'static str, bits: u32, group: usize) -> Mlx {
    Mlx { mode, bits, group }
}

/// mlx-lm's quantized cases: the driver's name, the default quantization, the Linears left dense
/// and those quantized otherwise, as the generator writes the same draft.
type MlxCase = (
    &'static str,
    Mlx,
    &'static [&'static str],
    &'static [(&'static str, Mlx)],
);
const MLX_CASES: &[MlxCase] = &[
    ("quantized", mode("affine", 4, 64), &[], &[]),
    ("affine_2_128", mode("affine", 2, 128), &[], &[]),
    ("affine_3_32", mode("affine", 3, 32), &[], &[]),
    ("affine_6_64", mode("affine", 6, 64), &[], &[]),
    ("affine_8_32", mode("affine", 8, 32), &[], &[]),
    ("mxfp4", mode("mxfp4", 4, 32), &[], &[]),
    ("nvfp4", mode("nvfp4", 4, 16), &[], &[]),
    ("mxfp8", mode("mxfp8", 8, 32), &[], &[]),
    (
        "override",
        mode("affine", 4, 64),
        &["fc"],
        &[("layers.0.mlp.down_proj", mode("affine", 8, 32))],
    ),
];

/// mlx-lm's `save_model` (one `model.safetensors` and an index naming it) passes, and lays the
/// draft out as the generator's `mlx_one_file_indexed` arm (its index's weight map too); a draft
/// quantized by mlx-lm's `quantize_model` in each mode (and with a module overridden and one left
/// dense) passes and is laid out as the generator's for the same quantization; a NaN scale and bits
/// that disagree with the packed width are refused naming the tensor.
fn mlx(python: &Path) -> Result<(), String> {
    let (root, base, written) = from_the_bf16_folder(python, "mlx")?;
    let mut failures = Failures::default();
    failures.note((|| {
        let w = case(&written, "plain")?;
        passes("mlx-lm save_model", &gated(&w.path)?, None, &[])?;
        let ours = folder("folder::pass::mlx_one_file_indexed", &root.path().join("generator"))?;
        if let Some(d) = differ(&layout(&ours), &layout(&w.path)) {
            return Err(format!("mlx-lm save_model: tensors differ from the generator's: {d}"));
        }
        let map = |dir: &Path| -> Result<Value, String> {
            let bytes = std::fs::read(dir.join("model.safetensors.index.json"))
                .map_err(|e| format!("{}: {e}", dir.display()))?;
            let index: Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
            Ok(index["weight_map"].clone())
        };
        if map(&ours)? != map(&w.path)? {
            return Err(format!(
                "mlx-lm save_model: the index's weight_map differs from the generator's: {} against {}",
                map(&w.path)?,
                map(&ours)?
            ));
        }
        Ok(())
    })());
    for (name, default, dense, overrides) in MLX_CASES {
        failures.note((|| {
            let w = case(&written, name)?;
            let what = format!("mlx-lm quantize_model {name}");
            let config = config_of(&w.path)?;
            if config.get("quantization").is_none() {
                return Err(format!("{what} wrote no quantization key"));
            }
            passes(&what, &gated(&w.path)?, None, &[])?;
            against_its_source(&what, &w.path, &base)?;
            let ours = root.path().join("generator").join(name);
            copy_folder(&base, &ours)?;
            mlx_quantize(&ours, *default, dense, overrides);
            if let Some(d) = differ(&layout(&ours), &layout(&w.path)) {
                return Err(format!("{what}: tensors differ from the generator's: {d}"));
            }
            if config_of(&ours)?["quantization"] != config["quantization"] {
                return Err(format!(
                    "{what}: quantization is {} where the generator writes {}",
                    config["quantization"],
                    config_of(&ours)?["quantization"]
                ));
            }
            Ok(())
        })());
    }
    let controls: [Control<'_>; 2] = [
        (
            "mlx_scale_nan",
            CheckId::QUANT_SCALES,
            &["fc.scales[1] is NaN", "finite"],
        ),
        (
            "mlx_bits_disagree",
            CheckId::INVENTORY_COMPLETE,
            &["at 8 bits", "words a row"],
        ),
    ];
    failed_controls(&mut failures, &written, "mlx-lm", &controls);
    failures.done()
}
