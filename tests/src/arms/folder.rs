//! Arms for a draft as its publisher ships it (spec section 13): a Hugging Face folder, single or
//! sharded, and the hub cache's layouts. Each folder is written by the generator as z-lab releases one
//! (`model_type: "qwen3"`, the DFlash fields in `dflash_config`, bf16 safetensors) and bent once; a
//! control holds when the gate refuses it at the named check, naming the field or tensor, and every
//! other check still passes or was stopped by that one.

use super::{Base, SEED};
use crate::synth::source::{write_source, SourceOptions};
use crate::synth::torch;
use crate::synth::{Encoding, Package};
use dflash_gate::__private::dtype::Dtype;
use dflash_gate::{gate, CheckId, Form, Options, Outcome, Report};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

pub type Trial = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// What the gate owes a draft in a publisher's form (a folder, a GGUF).
#[derive(Clone, Copy)]
pub(crate) enum Owed {
    /// Every check passes.
    Pass,
    /// `check` has `outcome`, its message names each of `mentions`; every other check passes, is
    /// blocked by it, or is one of `also`.
    Refused {
        check: &'static str,
        outcome: Outcome,
        mentions: &'static [&'static str],
        also: &'static [&'static str],
    },
    /// No report: an error (exit 2) whose message names each of these.
    Error(&'static [&'static str]),
    /// Every check passes, and `check`'s message names each of `mentions`.
    PassSaying {
        check: &'static str,
        mentions: &'static [&'static str],
    },
}

#[derive(Clone, Copy)]
struct FolderArm {
    name: &'static str,
    base: Base,
    dtype: Dtype,
    shards: usize,
    /// Done to the written folder before it is gated; returns the path to gate (the folder, or a cache
    /// path that leads to it).
    bend: fn(&Path) -> PathBuf,
    owed: Owed,
    /// Checks the report lists: a folder's six, and `scalars.mask_token_id` with `mask_embedding.pt`.
    checks: usize,
}

const fn arm(name: &'static str, bend: fn(&Path) -> PathBuf, owed: Owed) -> FolderArm {
    FolderArm {
        name,
        base: Base::Small,
        dtype: Dtype::Bf16,
        shards: 1,
        bend,
        owed,
        checks: 6,
    }
}

/// An arm of a folder holding `mask_embedding.pt`: seven checks.
const fn mask_arm(name: &'static str, bend: fn(&Path) -> PathBuf, owed: Owed) -> FolderArm {
    FolderArm {
        checks: 7,
        ..arm(name, bend, owed)
    }
}

pub(crate) const fn fail(check: &'static str, mentions: &'static [&'static str]) -> Owed {
    Owed::Refused {
        check,
        outcome: Outcome::Fail,
        mentions,
        also: &[],
    }
}

const GEOMETRY: &str = CheckId::CONFIG_GEOMETRY;
const PARSES: &str = CheckId::CONTAINER_PARSES;
const COMPLETE: &str = CheckId::INVENTORY_COMPLETE;
const EXPLAINED: &str = CheckId::INVENTORY_EXPLAINED;
const FINITE: &str = CheckId::BF16_FINITE;
const MASK: &str = CheckId::SCALARS_MASK_TOKEN_ID;

fn as_is(dir: &Path) -> PathBuf {
    dir.to_owned()
}

const ARMS: &[FolderArm] = &[
    arm("folder::pass::dflash", as_is, Owed::Pass),
    FolderArm {
        base: Base::Dflash2,
        ..arm("folder::pass::dflash2", as_is, Owed::Pass)
    },
    FolderArm {
        shards: 3,
        ..arm("folder::pass::sharded", as_is, Owed::Pass)
    },
    FolderArm {
        dtype: Dtype::F16,
        ..arm("folder::pass::f16", as_is, Owed::Pass)
    },
    FolderArm {
        dtype: Dtype::F32,
        ..arm("folder::pass::f32", as_is, Owed::Pass)
    },
    arm(
        "folder::pass::old_schema_top_level_fields",
        old_schema,
        Owed::Pass,
    ),
    arm("folder::pass::model_prefix", model_prefix, Owed::Pass),
    arm("folder::pass::cache_snapshot", cache_snapshot, Owed::Pass),
    arm(
        "folder::pass::cache_repository",
        cache_repository,
        Owed::Pass,
    ),
    arm(
        "folder::pass::cache_repository_id",
        cache_repository_id,
        Owed::Pass,
    ),
    arm(
        "folder::control::tensor_missing",
        tensor_missing,
        fail(
            COMPLETE,
            &["layers.0.mlp.down_proj.weight is missing", "at random"],
        ),
    ),
    arm(
        "folder::control::tensor_misshapen",
        tensor_misshapen,
        fail(
            COMPLETE,
            &["layers.0.mlp.gate_proj.weight", "[256, 512]", "[512, 256]"],
        ),
    ),
    arm(
        "folder::control::tensor_extra",
        tensor_extra,
        fail(EXPLAINED, &["layers.0.self_attn.extra.weight"]),
    ),
    arm(
        "folder::control::tensor_of_integers",
        tensor_of_integers,
        fail(COMPLETE, &["norm.weight", "I16", "not a float type"]),
    ),
    FolderArm {
        base: Base::Dflash2,
        ..arm(
            "folder::control::dflash2_codebook_with_weight_suffix",
            codebook_suffixed,
            fail(
                COMPLETE,
                &["candidate_selector.predecessor_codebook.weight", "KeyError"],
            ),
        )
    },
    arm(
        "folder::control::nan_in_bf16",
        nan_in_fc,
        fail(FINITE, &["fc.weight", "NaN"]),
    ),
    FolderArm {
        dtype: Dtype::F16,
        ..arm(
            "folder::control::f16_overflowed_to_inf",
            inf_in_f16,
            fail(FINITE, &["fc.weight F16", "inf"]),
        )
    },
    arm(
        "folder::control::target_layer_ids_absent",
        ids_absent,
        fail(
            GEOMETRY,
            &[
                "dflash_config.target_layer_ids",
                "required",
                "never guesses",
            ],
        ),
    ),
    arm(
        "folder::control::target_layer_ids_unsorted",
        ids_unsorted,
        Owed::Refused {
            check: GEOMETRY,
            outcome: Outcome::Fail,
            mentions: &["target_layer_ids"],
            // fc's width is taps x hidden whatever their order; nothing else reads them.
            also: &[],
        },
    ),
    arm(
        "folder::control::mask_token_id_absent",
        mask_absent,
        fail(GEOMETRY, &["mask_token_id", "required"]),
    ),
    arm(
        "folder::control::block_size_one",
        |d| config(d, |c| c["block_size"] = json!(1)),
        fail(GEOMETRY, &["block_size", "is 1"]),
    ),
    arm(
        "folder::control::block_size_above_64",
        |d| config(d, |c| c["block_size"] = json!(128)),
        Owed::Refused {
            check: GEOMETRY,
            outcome: Outcome::Undecided,
            mentions: &["block_size", "128", "above 64"],
            also: &[],
        },
    ),
    arm(
        "folder::control::layer_types_wrong_length",
        |d| {
            config(d, |c| {
                c["layer_types"] = json!(["full_attention", "full_attention", "full_attention"])
            })
        },
        fail(GEOMETRY, &["layer_types", "3"]),
    ),
    arm(
        "folder::control::sliding_layer_without_window",
        |d| {
            config(d, |c| {
                c["layer_types"] = json!(["sliding_attention", "full_attention"]);
                c["sliding_window"] = Value::Null;
            })
        },
        fail(
            GEOMETRY,
            &["is \"sliding_attention\" but sliding_window is"],
        ),
    ),
    arm(
        "folder::control::block_size_in_two_homes_differs",
        |d| config(d, |c| c["dflash_config"]["block_size"] = json!(16)),
        fail(GEOMETRY, &["block_size", "dflash_config"]),
    ),
    arm(
        "folder::control::quantization_config_named",
        |d| {
            config(d, |c| {
                c["quantization_config"] = json!({"quant_method": "compressed-tensors"})
            })
        },
        Owed::Refused {
            check: COMPLETE,
            outcome: Outcome::Undecided,
            mentions: &["compressed-tensors", "quantization_config"],
            also: &[EXPLAINED, FINITE],
        },
    ),
    arm(
        "folder::control::not_a_draft_config",
        |d| config(d, |c| c["architectures"] = json!(["Qwen3ForCausalLM"])),
        fail(
            CheckId::CONFIG_IS_DFLASH,
            &["not a DFlash draft", "Qwen3ForCausalLM"],
        ),
    ),
    arm(
        "folder::control::speculators_format_named",
        |d| config(d, |c| c["speculators_model_type"] = json!("dflash")),
        Owed::Refused {
            check: CheckId::CONFIG_IS_DFLASH,
            outcome: Outcome::Undecided,
            mentions: &["speculators", "not one the gate knows"],
            also: &[],
        },
    ),
    FolderArm {
        shards: 3,
        ..arm(
            "folder::control::index_names_a_missing_shard",
            |d| {
                std::fs::remove_file(d.join("model-00002-of-00003.safetensors")).unwrap();
                d.to_owned()
            },
            fail(PARSES, &["model-00002-of-00003.safetensors"]),
        )
    },
    FolderArm {
        shards: 3,
        ..arm(
            "folder::control::index_does_not_list_a_tensor",
            unlisted_tensor,
            fail(PARSES, &["fc.weight", "not in the index"]),
        )
    },
    arm(
        "folder::control::shard_no_index_names",
        |d| {
            std::fs::copy(
                d.join("model.safetensors"),
                d.join("model-extra.safetensors"),
            )
            .unwrap();
            d.to_owned()
        },
        fail(PARSES, &["model-extra.safetensors", "globs"]),
    ),
    arm(
        "folder::control::q4nx_and_safetensors_both",
        |d| {
            std::fs::write(d.join("model.q4nx"), b"").unwrap();
            d.to_owned()
        },
        Owed::Error(&["model.q4nx", "model.safetensors", "does not pick"]),
    ),
    arm(
        "folder::control::cache_link_leaves_the_repository",
        cache_link_out,
        Owed::Error(&["config.json", "leads out of the package"]),
    ),
    arm(
        "folder::control::cache_revision_not_held",
        |d| {
            let repo = cache_repository(d);
            repo.join("?revision=v9")
        },
        Owed::Error(&["no snapshot for revision v9", "downloads nothing"]),
    ),
    mask_arm(
        "folder::pass::mask_embedding",
        |d| mask_embedding(d, |_, _| {}),
        Owed::PassSaying {
            check: MASK,
            mentions: &[
                "mask_embedding.pt holds mask_token_id",
                "read without executing",
            ],
        },
    ),
    mask_arm(
        "folder::control::mask_embedding_wrong_id",
        |d| mask_embedding(d, |id, _| *id += 1),
        fail(
            MASK,
            &[
                "mask_embedding.pt holds mask_token_id",
                "where config.json states",
                "raise",
            ],
        ),
    ),
    mask_arm(
        "folder::control::mask_embedding_wrong_length",
        |d| mask_embedding(d, |_, v| v.push(0.5)),
        fail(
            MASK,
            &[
                "mask_embedding.pt's embedding is F32 [",
                "not [hidden_size]",
            ],
        ),
    ),
    mask_arm(
        "folder::control::mask_embedding_nan",
        |d| mask_embedding(d, |_, v| v[3] = f32::NAN),
        fail(
            MASK,
            &["mask_embedding.pt's embedding is not finite: element 3 is NaN"],
        ),
    ),
    mask_arm(
        "folder::control::mask_embedding_malicious_global",
        |d| mask_embedding_bytes(d, system_pt(&d.join("executed"))),
        fail(
            MASK,
            &[
                "mask_embedding.pt",
                "mask_embedding/data.pkl",
                "the global posix.system",
                "refused unread",
            ],
        ),
    ),
    mask_arm(
        "folder::control::mask_embedding_legacy",
        |d| mask_embedding_bytes(d, torch::legacy_pt()),
        fail(MASK, &["mask_embedding.pt", "a legacy torch file"]),
    ),
    mask_arm(
        "folder::control::mask_embedding_compressed",
        |d| {
            let (id, values) = mask_of(d);
            let pkl = torch::mask_embedding_pickle(id, values.len(), torch::Payload::Tensor, "");
            let bytes = torch::archive("mask_embedding", &torch::records(&pkl, &values), true);
            mask_embedding_bytes(d, bytes)
        },
        fail(
            MASK,
            &[
                "mask_embedding.pt",
                "mask_embedding/data.pkl is compressed (method 8)",
            ],
        ),
    ),
];

/// The config's mask id and a faithful embedding of its hidden size.
fn mask_of(dir: &Path) -> (i64, Vec<f32>) {
    let c: Value =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    let id = c["dflash_config"]["mask_token_id"].as_i64().unwrap();
    let hidden = c["hidden_size"].as_u64().unwrap() as usize;
    (
        id,
        (0..hidden)
            .map(|i| (i as f32 * 0.37).sin() * 0.02)
            .collect(),
    )
}

/// `mask_embedding.pt` as torch.save writes it, of the config's id and hidden size bent by `edit`.
fn mask_embedding(dir: &Path, edit: fn(&mut i64, &mut Vec<f32>)) -> PathBuf {
    let (mut id, mut values) = mask_of(dir);
    edit(&mut id, &mut values);
    mask_embedding_bytes(dir, torch::mask_embedding_pt(id, &values))
}

fn mask_embedding_bytes(dir: &Path, bytes: Vec<u8>) -> PathBuf {
    std::fs::write(dir.join("mask_embedding.pt"), bytes).unwrap();
    dir.to_owned()
}

/// An archive whose pickle, if executed, would run `touch <path>` through `posix.system`.
fn system_pt(path: &Path) -> Vec<u8> {
    let pkl = torch::mask_embedding_pickle(7, 0, torch::Payload::System, &path.to_string_lossy());
    torch::archive("mask_embedding", &torch::records(&pkl, &[]), false)
}

/// The gate meets a pickle that would create a file if it were executed: it refuses it naming the
/// global, and the file is not there afterwards (nor was it before).
fn executes_nothing() -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = root.path().join("draft");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut package = Package::generate(&Base::Small.geometry(), Encoding::default(), SEED);
    write_source(&mut package, &dir, SourceOptions::default(), SEED).map_err(|e| e.to_string())?;
    let witness = root.path().join("executed");
    mask_embedding_bytes(&dir, system_pt(&witness));
    let report = gate(&dir, &Options::default()).map_err(|e| e.to_string())?;
    let check = report
        .checks()
        .iter()
        .find(|c| c.id() == MASK)
        .ok_or("no scalars.mask_token_id")?;
    if check.outcome() != Outcome::Fail || !check.message().contains("posix.system") {
        return Err(format!(
            "not refused naming posix.system: {}",
            check.message()
        ));
    }
    if witness.exists() {
        return Err(format!("{} exists: the pickle ran", witness.display()));
    }
    Ok(())
}

/// Each arm, as a named trial.
pub fn trials() -> Vec<(String, Trial)> {
    ARMS.iter()
        .map(|a| {
            (
                format!("arms::{}", a.name),
                Box::new(move || run(a)) as Trial,
            )
        })
        .chain([(
            "arms::folder::control::mask_embedding_executes_nothing".to_owned(),
            Box::new(executes_nothing) as Trial,
        )])
        .collect()
}

fn run(arm: &FolderArm) -> Result<(), String> {
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = root.path().join("draft");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut package = Package::generate(&arm.base.geometry(), Encoding::default(), SEED);
    let options = SourceOptions {
        dtype: arm.dtype,
        shards: arm.shards,
        ..SourceOptions::default()
    };
    write_source(&mut package, &dir, options, SEED).map_err(|e| e.to_string())?;
    let path = (arm.bend)(&dir);
    // A revision rides on the path as `?revision=REV` (an arm is a path and nothing else).
    let (path, options) = match path.to_str().and_then(|p| p.split_once("?revision=")) {
        Some((p, rev)) => (PathBuf::from(p), Options::default().with_revision(rev)),
        None => (path, Options::default()),
    };
    let result = match path.to_str().and_then(|p| p.strip_prefix("id:")) {
        Some(rest) => {
            let (cache, id) = rest.split_once('|').ok_or("an id arm names its cache")?;
            let snapshot = dflash_gate::__private::hub::resolve(
                Path::new(id),
                options.revision.as_deref(),
                Some(Path::new(cache)),
            )
            .map_err(|e| e.to_string())?;
            gate(&snapshot, &options)
        }
        None => gate(&path, &options),
    };
    judge_counted(Form::Safetensors, arm.owed, result, arm.checks)
}

/// What the gate said of a draft in `form`, against what it owes it: six checks whatever the damage.
pub(crate) fn judge(
    form: Form,
    owed: Owed,
    result: Result<Report, dflash_gate::PackageError>,
) -> Result<(), String> {
    judge_counted(form, owed, result, 6)
}

/// [`judge`] for a report of `count` checks (a form's six and the steps its options add).
pub(crate) fn judge_counted(
    form: Form,
    owed: Owed,
    result: Result<Report, dflash_gate::PackageError>,
    count: usize,
) -> Result<(), String> {
    let report = match (owed, result) {
        (Owed::Error(mentions), Err(e)) => {
            let text = e.to_string();
            return match mentions.iter().find(|m| !text.contains(**m)) {
                None => Ok(()),
                Some(m) => Err(format!("the error does not name {m:?}: {text}")),
            };
        }
        (Owed::Error(_), Ok(r)) => {
            return Err(format!(
                "a report where an error was owed:\n{}",
                r.to_text(false)
            ))
        }
        (_, Err(e)) => return Err(format!("no report: {e}")),
        (_, Ok(r)) => r,
    };
    if report.census().form != form {
        return Err(format!("census.form is {:?}", report.census().form));
    }
    let text = report.to_text(false);
    match owed {
        Owed::Pass => {
            if report.verdict() != Outcome::Pass {
                return Err(format!("not a PASS:\n{text}"));
            }
            if report.checks().len() != count {
                return Err(format!(
                    "{} checks, {count} owed:\n{text}",
                    report.checks().len()
                ));
            }
            Ok(())
        }
        Owed::PassSaying { check, mentions } => {
            judge_counted(form, Owed::Pass, Ok(report.clone()), count)?;
            let said = report
                .checks()
                .iter()
                .find(|c| c.id() == check)
                .map(|c| c.message().to_owned())
                .ok_or_else(|| format!("no {check}:\n{text}"))?;
            match mentions.iter().find(|m| !said.contains(**m)) {
                None => Ok(()),
                Some(m) => Err(format!("{check} does not say {m:?}: {said}")),
            }
        }
        Owed::Refused {
            check,
            outcome,
            mentions,
            also,
        } => {
            let found = report
                .checks()
                .iter()
                .find(|c| c.id() == check)
                .ok_or_else(|| format!("no {check}:\n{text}"))?;
            if found.outcome() != outcome {
                return Err(format!(
                    "{check} is {}, {outcome} owed:\n{text}",
                    found.outcome()
                ));
            }
            if let Some(m) = mentions.iter().find(|m| !found.message().contains(**m)) {
                return Err(format!("{check} does not name {m:?}:\n{text}"));
            }
            // The count never moves with the damage: a check that could not run is listed, blocked.
            if report.checks().len() != count {
                return Err(format!(
                    "{} checks, {count} owed:\n{text}",
                    report.checks().len()
                ));
            }
            for c in report.checks() {
                let fine = c.id() == check
                    || c.outcome() == Outcome::Pass
                    || c.blocked_by() == Some(check)
                    || also.contains(&c.id());
                if !fine {
                    return Err(format!(
                        "{} changed too ({}): a broken control\n{text}",
                        c.id(),
                        c.outcome()
                    ));
                }
            }
            Ok(())
        }
        Owed::Error(_) => unreachable!("handled above"),
    }
}

/// config.json, edited in place.
fn config(dir: &Path, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let path = dir.join("config.json");
    let mut c: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut c);
    std::fs::write(&path, serde_json::to_vec_pretty(&c).unwrap()).unwrap();
    dir.to_owned()
}

/// One tensor of a safetensors file: name, dtype, shape, bytes.
type Tensor = (String, String, Vec<u64>, Vec<u8>);

/// One safetensors file's tensors, in file order.
type Tensors = Vec<Tensor>;

/// `model.safetensors` (or `file`), rewritten after `edit`.
fn weights_in(dir: &Path, file: &str, edit: impl FnOnce(&mut Tensors)) -> PathBuf {
    let path = dir.join(file);
    let bytes = std::fs::read(&path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, Value> = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let mut placed: Vec<(usize, Tensor)> = header
        .iter()
        .filter(|(k, _)| *k != "__metadata__")
        .map(|(name, v)| {
            let [b, e] = [0, 1].map(|i| v["data_offsets"][i].as_u64().unwrap() as usize);
            let shape = v["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            (
                b,
                (
                    name.clone(),
                    v["dtype"].as_str().unwrap().to_owned(),
                    shape,
                    data[b..e].to_vec(),
                ),
            )
        })
        .collect();
    placed.sort_by_key(|(b, _)| *b);
    let mut tensors: Tensors = placed.into_iter().map(|(_, t)| t).collect();
    edit(&mut tensors);
    let mut offset = 0usize;
    let mut head = serde_json::Map::new();
    for (name, dtype, shape, data) in &tensors {
        head.insert(
            name.clone(),
            json!({"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + data.len()]}),
        );
        offset += data.len();
    }
    let mut header = serde_json::to_vec(&Value::Object(head)).unwrap();
    while !header.len().is_multiple_of(8) {
        header.push(b' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header);
    for t in &tensors {
        out.extend(&t.3);
    }
    std::fs::write(&path, out).unwrap();
    dir.to_owned()
}

fn weights(dir: &Path, edit: impl FnOnce(&mut Tensors)) -> PathBuf {
    weights_in(dir, "model.safetensors", edit)
}

fn named<'t>(t: &'t mut Tensors, name: &str) -> &'t mut Tensor {
    t.iter_mut()
        .find(|t| t.0 == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

fn tensor_missing(dir: &Path) -> PathBuf {
    weights(dir, |t| {
        t.retain(|t| t.0 != "layers.0.mlp.down_proj.weight")
    })
}

fn tensor_misshapen(dir: &Path) -> PathBuf {
    weights(dir, |t| {
        named(t, "layers.0.mlp.gate_proj.weight").2 = vec![256, 512]
    })
}

fn tensor_extra(dir: &Path) -> PathBuf {
    weights(dir, |t| {
        t.push((
            "layers.0.self_attn.extra.weight".into(),
            "BF16".into(),
            vec![4],
            vec![0; 8],
        ))
    })
}

fn tensor_of_integers(dir: &Path) -> PathBuf {
    weights(dir, |t| named(t, "norm.weight").1 = "I16".into())
}

fn codebook_suffixed(dir: &Path) -> PathBuf {
    weights(dir, |t| {
        named(t, "candidate_selector.predecessor_codebook").0 =
            "candidate_selector.predecessor_codebook.weight".into()
    })
}

fn nan_in_fc(dir: &Path) -> PathBuf {
    weights(dir, |t| {
        named(t, "fc.weight").3[6..8].copy_from_slice(&0x7fc0u16.to_le_bytes())
    })
}

fn inf_in_f16(dir: &Path) -> PathBuf {
    weights(dir, |t| {
        named(t, "fc.weight").3[6..8].copy_from_slice(&0x7c00u16.to_le_bytes())
    })
}

fn model_prefix(dir: &Path) -> PathBuf {
    weights(dir, |t| {
        for t in t.iter_mut() {
            t.0 = format!("model.{}", t.0);
        }
    })
}

fn ids_absent(dir: &Path) -> PathBuf {
    config(dir, |c| {
        c["dflash_config"]
            .as_object_mut()
            .unwrap()
            .remove("target_layer_ids");
    })
}

fn ids_unsorted(dir: &Path) -> PathBuf {
    config(dir, |c| {
        let ids = c["dflash_config"]["target_layer_ids"]
            .as_array_mut()
            .unwrap();
        ids.reverse();
    })
}

fn mask_absent(dir: &Path) -> PathBuf {
    config(dir, |c| {
        c["dflash_config"]
            .as_object_mut()
            .unwrap()
            .remove("mask_token_id");
    })
}

/// Older z-lab and SpecForge configs: every DFlash field at the top level, no `dflash_config`.
fn old_schema(dir: &Path) -> PathBuf {
    config(dir, |c| {
        let nested = c.as_object_mut().unwrap().remove("dflash_config").unwrap();
        for (k, v) in nested.as_object().unwrap() {
            c[k.as_str()] = v.clone();
        }
    })
}

fn unlisted_tensor(dir: &Path) -> PathBuf {
    let path = dir.join("model.safetensors.index.json");
    let mut index: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    index["weight_map"]
        .as_object_mut()
        .unwrap()
        .remove("fc.weight");
    std::fs::write(&path, serde_json::to_vec(&index).unwrap()).unwrap();
    dir.to_owned()
}

const COMMIT: &str = "4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a";

/// The folder moved into a hub cache as the client lays one out: each file a blob named by its
/// digest, the snapshot's names links to them, `refs/main` naming the commit. Returns the repository
/// directory.
fn cache_repository(dir: &Path) -> PathBuf {
    let repo = dir
        .parent()
        .unwrap()
        .join("hub/models--z-lab--synthetic-dflash");
    let snapshot = repo.join("snapshots").join(COMMIT);
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), COMMIT).unwrap();
    for (i, entry) in std::fs::read_dir(dir).unwrap().enumerate() {
        let entry = entry.unwrap();
        let blob = format!("{i:064x}");
        std::fs::rename(entry.path(), repo.join("blobs").join(&blob)).unwrap();
        std::os::unix::fs::symlink(
            format!("../../blobs/{blob}"),
            snapshot.join(entry.file_name()),
        )
        .unwrap();
    }
    repo
}

fn cache_snapshot(dir: &Path) -> PathBuf {
    cache_repository(dir).join("snapshots").join(COMMIT)
}

/// `ORG/NAME`, looked up in the cache the folder was moved into (the `id:` form names both).
fn cache_repository_id(dir: &Path) -> PathBuf {
    let repo = cache_repository(dir);
    let cache = repo.parent().unwrap();
    PathBuf::from(format!("id:{}|z-lab/synthetic-dflash", cache.display()))
}

/// A snapshot whose config.json links to a file outside the repository (a `--local-dir` download
/// made with links, or a hand-made snapshot).
fn cache_link_out(dir: &Path) -> PathBuf {
    let repo = cache_repository(dir);
    let snapshot = repo.join("snapshots").join(COMMIT);
    let outside = dir.parent().unwrap().join("elsewhere.json");
    std::fs::copy(snapshot.join("config.json"), &outside).unwrap();
    std::fs::remove_file(snapshot.join("config.json")).unwrap();
    std::os::unix::fs::symlink(&outside, snapshot.join("config.json")).unwrap();
    repo
}
