//! `target.*` (`--target PATH`): the draft against the target it drafts for. The target is read
//! apart from the checks that hold the draft against it: `folder.rs` reads a Q4NX package or a Hugging
//! Face folder (a cache entry resolves to one), `gguf.rs` a GGUF model file; `checks.rs` holds the
//! geometry checks and `tokenizer.rs` the tokenizer and the mask token. Only configs, metadata and weight
//! headers are read, never a tensor's data, so a 20 GB target costs milliseconds.

mod checks;
mod folder;
mod gguf;
mod rope;
mod tokenizer;

use crate::config::{DraftConfig, Field};
use crate::container::TensorInfo;
use crate::error::PackageError;
use crate::evaluation::Evaluation;
use crate::report::{Check, NotChecked};
use std::path::Path;

pub use tokenizer::{Tokenizer, TOKENIZER_FILE};

pub const HIDDEN: &str = crate::check_id::CheckId::TARGET_HIDDEN_SIZE;
pub const DEPTH: &str = crate::check_id::CheckId::TARGET_DEPTH;
pub const VOCAB: &str = crate::check_id::CheckId::TARGET_VOCAB;
pub const MASK: &str = crate::check_id::CheckId::TARGET_MASK_TOKEN;
pub const ROPE: &str = crate::check_id::CheckId::TARGET_ROPE;
pub const TOKENIZER: &str = crate::check_id::CheckId::TARGET_TOKENIZER;
/// Every check `--target` adds, in report order.
pub const CHECKS: [&str; 6] = [HIDDEN, DEPTH, VOCAB, MASK, ROPE, TOKENIZER];

/// What the gate reads of a target package.
///
/// The three counts keep what was wrong with them (`stated`), so a check that cannot use one says
/// whether it is absent, of the wrong type or out of range, instead of calling every one "missing".
pub struct Target {
    pub hidden_size: Field<u64>,
    pub num_hidden_layers: Field<u64>,
    pub vocab_size: Field<u64>,
    /// Every tensor entry of the target's weight file headers (one Q4NX file, or a safetensors
    /// checkpoint, single or sharded), or why the target has none to read.
    pub tensors: Result<Vec<TensorInfo>, String>,
    pub tokenizer: Tokenizer,
    /// What the target's tokenizer files (or a GGUF's `tokenizer.ggml.*`) say of its tokens.
    pub tokens: crate::tokenizer::Tokens,
    /// Where the counts above were read.
    pub stated_in: StatedIn,
    /// Its RoPE, read canonically (`target.rope`).
    pub rope: rope::Rope,
    /// A folder with no weight file at all (only its config was downloaded): its config's
    /// `vocab_size` is then the only statement of the rows, and `target.vocab` compares with it.
    /// Weights that are there but cannot be read as one set are not this.
    pub weights_absent: bool,
    /// The architecture the target states, as llama.cpp chooses the graph it runs by.
    pub architecture: Architecture,
    /// The Transformers classes its config.json names (`architectures`), which a speculators
    /// draft's verifier is held to; why there are none to compare (absent, of another type, a GGUF
    /// target) otherwise.
    pub architectures: Result<Vec<String>, String>,
}

/// What a target states of its architecture: a GGUF's `general.architecture`, or a config's
/// `architectures[0]` (`text_config.architectures[0]` where that is stated), the entry llama.cpp's
/// converter (`get_model_architecture`) chooses the model class, and so the GGUF's architecture, by.
/// A config's `model_type` is not read: the converter never reads it to choose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Architecture {
    /// A GGUF target's `general.architecture`.
    Gguf(String),
    /// A config's `architectures[0]`, and the field it was read from.
    Config { name: String, field: &'static str },
    /// None stated (or not a string): why.
    NotStated(String),
}

/// The target architectures whose graph in llama.cpp b11434 records the last layer's output as the
/// input of layer `n_layer` (`res->t_layer_inp[n_layer]`, in `src/models/deepseek4.cpp`,
/// `src/models/mimo2.cpp` and `src/models/nemotron-h.cpp`, whose graph `nemotron_h_moe` shares), so
/// a DFlash draft's `dflash.target_layers` entry equal to the target's layer count is served. Every
/// other graph records only the inputs of layers 0 to `n_layer - 1`.
pub const RECORDS_LAST_LAYER_GGUF: [&str; 4] =
    ["deepseek4", "mimo2", "nemotron_h", "nemotron_h_moe"];

/// The Hugging Face `architectures` llama.cpp's converter writes as one of
/// [`RECORDS_LAST_LAYER_GGUF`] (`conversion/deepseek.py`, `conversion/mimo.py`,
/// `conversion/nemotron.py`: the classes registered with `model_arch` `DEEPSEEK4`, `MIMO2`,
/// `NEMOTRON_H` and `NEMOTRON_H_MOE`).
pub const RECORDS_LAST_LAYER_HF: [&str; 5] = [
    "DeepseekV4ForCausalLM",
    "MiMoV2FlashForCausalLM",
    "MiMoV2ForCausalLM",
    "NemotronHForCausalLM",
    "NemotronHPuzzleForCausalLM",
];

impl Architecture {
    /// Whether llama.cpp b11434's graph for this architecture records the last layer's output;
    /// `None` when the target states none.
    pub fn records_last_layer(&self) -> Option<bool> {
        match self {
            Architecture::Gguf(a) => Some(RECORDS_LAST_LAYER_GGUF.contains(&a.as_str())),
            Architecture::Config { name, .. } => {
                Some(RECORDS_LAST_LAYER_HF.contains(&name.as_str()))
            }
            Architecture::NotStated(_) => None,
        }
    }

    /// The architecture as a message names it: `general.architecture "qwen3"`, or
    /// `architectures[0] "Qwen3ForCausalLM"`; `None` when not stated.
    pub fn named(&self) -> Option<String> {
        match self {
            Architecture::Gguf(a) => Some(format!("general.architecture {a:?}")),
            Architecture::Config { name, field } => Some(format!("{field} {name:?}")),
            Architecture::NotStated(_) => None,
        }
    }

    /// The name alone, for the evidence.
    pub fn name(&self) -> Option<&str> {
        match self {
            Architecture::Gguf(a) | Architecture::Config { name: a, .. } => Some(a),
            Architecture::NotStated(_) => None,
        }
    }
}

/// Reads the target at `path`: a GGUF model file by its header and metadata, anything else as a
/// folder (a Q4NX package or a Hugging Face folder).
pub fn read(path: &Path) -> Result<Target, PackageError> {
    if gguf::is_gguf(path) {
        return gguf::read(path);
    }
    if let Some(file) = one_gguf_without_config(path)? {
        return gguf::read(&file);
    }
    folder::read(path)
}

/// A directory with no config.json that holds one `*.gguf` is that GGUF, as a draft directory
/// holding one is; one that holds several is refused naming two (the gate does not pick one).
fn one_gguf_without_config(dir: &Path) -> Result<Option<std::path::PathBuf>, PackageError> {
    let config = dir.join(crate::files::CONFIG_FILE);
    if !dir.is_dir() || std::fs::symlink_metadata(&config).is_ok() {
        return Ok(None);
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(None);
    };
    // Two names are enough to refuse: the walk keeps no more, however large the directory.
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if crate::gguf::is_gguf_name(&name) {
            found.push(name);
            if found.len() == 2 {
                let [a, b] = [&found[0], &found[1]].map(|n| crate::escape::name(n));
                return Err(PackageError::Malformed {
                    path: dir.to_owned(),
                    why: format!("holds no config.json and several GGUF files ({a}, {b}, ...): the gate does not guess which is the target (name the .gguf file)"),
                });
            }
        }
    }
    Ok(found.pop().map(|name| dir.join(name)))
}

/// Where a target's counts were read, for the messages that name a field the target lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatedIn {
    /// A folder's `config.json` (top level, or `text_config`).
    Config,
    /// A GGUF model file's metadata keys and tensor infos.
    Gguf,
}

/// What `--target` answers once the target was read (whether or not the draft was recognised: a
/// refused draft has nothing left to agree with).
pub const ANSWERS: [NotChecked; 1] = [NotChecked::TargetAgreement];

/// What these `target.*` checks answered: the agreement, unless one of them could not decide (its
/// line stays, so that what was not compared never reads as agreed).
pub fn answered(checks: &[Check]) -> &'static [NotChecked] {
    if checks
        .iter()
        .any(|c| c.outcome == crate::report::Outcome::Undecided)
    {
        &[]
    } else {
        &ANSWERS
    }
}

/// The `target.*` checks, in report order, for an evaluation whose draft config was recognised (for
/// a refused one, each blocked by `config.is_dflash`: there is no draft geometry to hold against the
/// target).
pub fn checks(evaluation: &Evaluation<'_>, target: &Target) -> Vec<Check> {
    match &evaluation.draft {
        Ok(draft) => of(&Draft::of_config(&draft.config), target),
        Err(_) => crate::evaluation::refused_step(&CHECKS, "--target"),
    }
}

/// The `target.*` checks for a GGUF draft, from its metadata (`meta`, when `config.geometry` passed
/// it) by the same checks as a config's. `dflash` is whether `config.is_dflash` passed: a GGUF that
/// is no draft, or does not parse, has no geometry to hold against the target.
pub fn of_gguf(
    meta: Option<(&crate::draft::gguf::Meta, &crate::gguf::Gguf)>,
    dflash: bool,
    target: &Target,
) -> Vec<Check> {
    match meta {
        Some((meta, gguf)) if dflash => of(&Draft::of_gguf(meta, gguf), target),
        None if dflash => CHECKS
            .iter()
            .map(|id| {
                Check::blocked(
                    *id,
                    crate::check_id::CheckId::CONFIG_GEOMETRY,
                    "--target given: not compared, config.geometry did not accept the GGUF's metadata",
                )
            })
            .collect(),
        _ => crate::evaluation::refused_step(&CHECKS, "--target"),
    }
}

/// The draft-side values the `target.*` checks compare, whatever form the draft is in, and how a
/// message names where each was read: a config's field names, or a GGUF draft's metadata keys.
pub struct Draft {
    pub hidden_size: Field<u64>,
    /// The target layers the draft reads, as Hugging Face ids (a GGUF stores each plus one).
    pub target_layer_ids: Field<Vec<u64>>,
    /// How many layers the draft says its target has (a GGUF draft states none).
    pub num_target_layers: Field<Option<u64>>,
    pub vocab_size: Field<Option<u64>>,
    /// Where a GGUF draft's vocabulary was read (`dflash.vocab_size`, or the token list's length);
    /// `None` for a config, whose `vocab_size` names itself.
    pub vocab_read_at: Option<String>,
    pub mask_token_id: Field<Option<u64>>,
    /// A GGUF draft's `dflash.target_layers` as stored and the key its mask id was read from; `None`
    /// for a config.
    pub gguf: Option<(Vec<u64>, String)>,
    /// Its RoPE, read canonically (`target.rope`).
    pub rope: rope::Rope,
    /// The verifier a speculators config names (`speculators_config.verifier.architectures`, spec
    /// 18.1), which `target.depth` holds to the target's architectures; `None` for a draft whose form
    /// names no verifier (z-lab's schema, a GGUF).
    pub verifier_architectures: Option<Field<Vec<String>>>,
}

impl Draft {
    pub fn of_config(c: &DraftConfig) -> Draft {
        Draft {
            hidden_size: c.hidden_size.clone(),
            target_layer_ids: c.target_layer_ids.clone(),
            num_target_layers: c.num_target_layers.clone(),
            vocab_size: c.vocab_size.clone(),
            vocab_read_at: None,
            mask_token_id: c.mask_token_id.clone(),
            gguf: None,
            rope: rope::of_canonical(&c.canonical, ""),
            verifier_architectures: c
                .speculators
                .as_ref()
                .map(|s| s.verifier_architectures.clone()),
        }
    }

    /// A GGUF draft's metadata: `dflash.target_layers` minus one are the Hugging Face ids it means,
    /// and it states no `num_target_layers`, so depth asks only that each id be a layer the target has.
    /// Its vocabulary is `dflash.vocab_size`, else the length of `tokenizer.ggml.tokens`: llama.cpp's
    /// converter writes no `vocab_size` key, and pads the token list to the config's `vocab_size`
    /// (llama.cpp takes the list's length as the vocabulary), so a converted draft is compared with its
    /// target as the same draft's config would be.
    pub fn of_gguf(m: &crate::draft::gguf::Meta, gguf: &crate::gguf::Gguf) -> Draft {
        let header = &gguf.header;
        let a = crate::draft::gguf::ARCHITECTURE;
        let (vocab, vocab_read_at) = match (m.vocab, gguf.token_count()) {
            (Some(v), _) => (Some(v), Some(format!("{a}.vocab_size in the GGUF"))),
            (None, Some(tokens)) => (
                Some(tokens),
                Some(format!(
                    "the length of {} in the GGUF, which states no {a}.vocab_size",
                    crate::gguf::TOKENS_KEY
                )),
            ),
            (None, None) => (None, None),
        };
        Draft {
            hidden_size: Ok(m.hidden),
            target_layer_ids: Ok(m.target_layers.iter().map(|v| v - 1).collect()),
            num_target_layers: Ok(None),
            vocab_size: Ok(vocab),
            vocab_read_at,
            mask_token_id: Ok(Some(m.mask_token_id)),
            gguf: Some((m.target_layers.clone(), m.mask_key.clone())),
            rope: rope::of_gguf(header, crate::draft::gguf::ARCHITECTURE),
            verifier_architectures: None,
        }
    }

    /// The layer ids as a message names them: `target_layer_ids [1, 3]`, or for a GGUF draft
    /// `dflash.target_layers [2, 4] in the GGUF, the HF ids [1, 3]`.
    fn taps_named(&self, taps: &[u64]) -> String {
        match &self.gguf {
            None => format!("target_layer_ids {taps:?}"),
            Some((stored, _)) => format!(
                "{}.target_layers {stored:?} in the GGUF, the HF ids {taps:?}",
                crate::draft::gguf::ARCHITECTURE
            ),
        }
    }

    /// Where the draft's hidden size and mask token were read, for a GGUF draft (a config's messages
    /// name its fields already).
    fn read_at(&self, what: &str) -> String {
        match (&self.gguf, what) {
            (None, _) => String::new(),
            (Some((_, key)), "mask") => format!(" ({key} in the GGUF)"),
            (Some(_), _) => format!(
                " ({}.embedding_length in the GGUF)",
                crate::draft::gguf::ARCHITECTURE
            ),
        }
    }
}

#[cfg(test)]
fn of_draft(draft: &DraftConfig, target: &Target) -> Vec<Check> {
    of(&Draft::of_config(draft), target)
}

/// The `target.*` checks of `draft` against `target`, in report order.
pub fn of(draft: &Draft, target: &Target) -> Vec<Check> {
    vec![
        checks::hidden(draft, target),
        checks::depth(draft, target),
        checks::vocab(draft, target),
        tokenizer::mask(draft, target),
        rope::check(
            &draft.rope,
            &target.rope,
            match draft.gguf {
                None => "the draft's config.json",
                Some(_) => "the draft GGUF's metadata",
            },
            match target.stated_in {
                StatedIn::Config => "the target's config.json",
                StatedIn::Gguf => "the target GGUF's metadata",
            },
        ),
        tokenizer::tokenizer(target),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::Dtype;
    use crate::report::Outcome;
    use crate::tile::TILE_BYTES;

    const DRAFT: &str = r#"{"model_type":"dflash","hidden_size":256,"num_hidden_layers":1,
        "num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":512,"block_size":4,
        "target_layer_ids":[1,3],"vocab_size":1000,"mask_token_id":7}"#;

    fn draft() -> DraftConfig {
        DraftConfig::from_json(DRAFT.as_bytes()).expect("draft config")
    }

    /// A safetensors container holding one table per `(name, dtype, shape)`, zero-filled.
    fn container(tables: &[(&str, &str, &[u64])]) -> Vec<u8> {
        let mut offset = 0u64;
        let mut entries = Vec::new();
        for (name, dtype, shape) in tables {
            let size = Dtype::from_name(dtype).expect("dtype").size();
            let len = shape.iter().product::<u64>() * size;
            entries.push(format!(
                "\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":{shape:?},\"data_offsets\":[{offset},{}]}}",
                offset + len
            ));
            offset += len;
        }
        let mut header = format!("{{{}}}", entries.join(",")).into_bytes();
        while header.len() % 8 != 0 {
            header.push(b' ');
        }
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&header);
        out.resize(out.len() + offset as usize, 0);
        out
    }

    /// A target's config.json that links to a file outside the target is refused unread (it once
    /// was read, and its values printed as the target's); one linking inside the target is read.
    #[test]
    fn a_target_link_out_of_its_directory_is_refused_unread() {
        let outside = tempfile::tempdir().expect("tempdir");
        let elsewhere = outside.path().join("elsewhere.json");
        std::fs::write(
            &elsewhere,
            r#"{"hidden_size":256,"num_hidden_layers":7777}"#,
        )
        .unwrap();
        let dir = target_dir("{}");
        let config = dir.path().join(crate::files::CONFIG_FILE);
        std::fs::remove_file(&config).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &config).unwrap();
        let e = read(dir.path()).err().expect("refused");
        assert!(e.to_string().contains("leads out of"), "{e}");
        std::fs::write(dir.path().join("real.json"), r#"{"hidden_size":256}"#).unwrap();
        std::fs::remove_file(&config).unwrap();
        std::os::unix::fs::symlink("real.json", &config).unwrap();
        assert!(read(dir.path()).is_ok());
    }

    /// A target directory with `config` and a tokenizer, and no weight file.
    fn target_dir(config: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(crate::files::CONFIG_FILE), config).expect("config");
        std::fs::write(
            dir.path().join(TOKENIZER_FILE),
            br#"{"added_tokens": [], "model": {"vocab": {"a": 0}}}"#,
        )
        .expect("tokenizer");
        dir
    }

    fn run(config: &str) -> Vec<Check> {
        let dir = target_dir(config);
        of_draft(&draft(), &read(dir.path()).expect("target"))
    }

    fn check<'a>(checks: &'a [Check], id: &str) -> &'a Check {
        checks.iter().find(|c| c.id == id).expect("check ran")
    }

    fn expect(checks: &[Check], id: &str, outcome: Outcome, says: &str) {
        let c = check(checks, id);
        assert!(
            c.outcome == outcome && c.message.contains(says),
            "{id}: expected {outcome} saying {says:?}, got {}: {}",
            c.outcome,
            c.message
        );
    }

    /// A target whose tensors are `tables` and whose config states hidden size 256.
    fn with_tables(tables: Vec<TensorInfo>) -> Target {
        Target {
            hidden_size: Ok(256),
            num_hidden_layers: Ok(8),
            vocab_size: Ok(1000),
            tensors: Ok(tables),
            tokenizer: Tokenizer::Present,
            tokens: Default::default(),
            stated_in: StatedIn::Config,
            rope: Default::default(),
            weights_absent: false,
            architecture: Architecture::Config {
                name: "Qwen3ForCausalLM".to_owned(),
                field: "architectures[0]",
            },
            architectures: Err("the test target states none".to_owned()),
        }
    }

    fn table(name: &str, dtype: Dtype, shape: &[u64]) -> TensorInfo {
        TensorInfo {
            name: name.to_owned(),
            dtype,
            shape: shape.to_vec(),
            begin: 0,
            end: 0,
        }
    }

    #[test]
    fn a_mistyped_or_out_of_range_target_count_is_named_not_called_missing() {
        // Of the wrong type: UNDECIDED, with the value; 256.0 is no integer, as for the draft's config.
        let c = run(r#"{"hidden_size":"256","num_hidden_layers":8,"vocab_size":1000}"#);
        expect(
            &c,
            HIDDEN,
            Outcome::Undecided,
            r#"in the target's config.json, hidden_size is "256", a string, not an integer"#,
        );
        let c = run(r#"{"hidden_size":256.0,"num_hidden_layers":8,"vocab_size":1000}"#);
        expect(
            &c,
            HIDDEN,
            Outcome::Undecided,
            "hidden_size is 256.0, a number that is not an integer",
        );
        let c = run(r#"{"hidden_size":256,"num_hidden_layers":[8],"vocab_size":1000}"#);
        expect(
            &c,
            DEPTH,
            Outcome::Undecided,
            "num_hidden_layers is an array, not an integer",
        );
        // Present, typed, and not positive: a FAIL naming the field, as config.geometry does.
        let c = run(r#"{"hidden_size":256,"num_hidden_layers":-1,"vocab_size":1000}"#);
        expect(
            &c,
            DEPTH,
            Outcome::Fail,
            "in the target's config.json, num_hidden_layers is -1, not positive",
        );
        let c = run(r#"{"hidden_size":0,"num_hidden_layers":8,"vocab_size":-5}"#);
        expect(&c, HIDDEN, Outcome::Fail, "hidden_size is 0, not positive");
        expect(&c, VOCAB, Outcome::Fail, "vocab_size is -5, not positive");
        let c =
            run(r#"{"hidden_size":256,"num_hidden_layers":8,"vocab_size":18446744073709551616}"#);
        expect(
            &c,
            VOCAB,
            Outcome::Fail,
            "vocab_size is 1.8446744073709552e+19, an integer too long for 64 bits",
        );
        let c = run(r#"{"hidden_size":0,"num_hidden_layers":8,"vocab_size":-5}"#);
        // The draft's vocab_size does not stand in for a target's that is there and negative.
        expect(
            &c,
            MASK,
            Outcome::Fail,
            "in the target's config.json, vocab_size is -5, not positive",
        );
        // A wrong-typed one is not "states none" either.
        let c = run(r#"{"hidden_size":256,"num_hidden_layers":8,"vocab_size":"x"}"#);
        expect(
            &c,
            MASK,
            Outcome::Pass,
            r#"the draft's vocab_size (in the target's config.json, vocab_size is "x", a string, not an integer) 1000"#,
        );
        // Absent is still absent.
        let c = run(r#"{"num_hidden_layers":8,"vocab_size":1000}"#);
        expect(
            &c,
            HIDDEN,
            Outcome::Undecided,
            "the target's config.json has no hidden_size",
        );
    }

    #[test]
    fn a_null_does_not_hide_the_text_config_value() {
        let c = run(r#"{"hidden_size":null,"vocab_size":null,
                "text_config":{"hidden_size":256,"num_hidden_layers":8,"vocab_size":1000}}"#);
        expect(&c, HIDDEN, Outcome::Pass, "(256 vs 256)");
        expect(&c, DEPTH, Outcome::Pass, "below the target's 8 layers");
        expect(
            &c,
            MASK,
            Outcome::Pass,
            "below the target's vocab_size 1000",
        );
        // A nested value of the wrong type is named where it is.
        let c = run(r#"{"hidden_size":null,"text_config":{"hidden_size":"256"}}"#);
        expect(
            &c,
            HIDDEN,
            Outcome::Undecided,
            r#"text_config.hidden_size is "256", a string, not an integer"#,
        );
        // Null at both places is none.
        let c = run(r#"{"hidden_size":null,"text_config":{"hidden_size":null}}"#);
        expect(
            &c,
            HIDDEN,
            Outcome::Undecided,
            "has no hidden_size, at top level or in text_config (null counts as none)",
        );
    }

    #[test]
    fn a_tokenizer_that_is_not_a_regular_file_is_said_to_be_there() {
        let config = r#"{"hidden_size":256,"num_hidden_layers":8,"vocab_size":1000}"#;
        let dir = target_dir(config);
        let path = dir.path().join(TOKENIZER_FILE);
        std::fs::remove_file(&path).expect("rm");
        let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let refused = |says: &str| {
            let c = of_draft(&draft(), &read(dir.path()).expect("target"));
            expect(&c, TOKENIZER, Outcome::Fail, says);
        };
        refused("the target's tokenizer.json is a FIFO, not a regular file");
        std::fs::remove_file(&path).expect("rm");
        std::fs::create_dir(&path).expect("dir");
        refused("the target's tokenizer.json is a directory, not a regular file");
        std::fs::remove_dir(&path).expect("rmdir");
        refused("the target has no tokenizer.json");
        std::os::unix::fs::symlink("gone.json", &path).expect("symlink");
        refused(
            "the target's tokenizer.json is a symbolic link to gone.json, which leads to no file",
        );
    }

    // Linux only: macOS's file systems refuse a name that is not UTF-8 before the gate could see one.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_weight_file_whose_name_is_not_utf8_is_opened_by_its_real_name() {
        use std::os::unix::ffi::OsStrExt;
        let config = r#"{"hidden_size":256,"num_hidden_layers":8,"vocab_size":1000}"#;
        let dir = target_dir(config);
        let name = std::ffi::OsStr::from_bytes(b"\xffx.q4nx");
        let bytes = container(&[("model.embed_tokens.weight", "BF16", &[1000, 256])]);
        std::fs::write(dir.path().join(name), &bytes).expect("weights");
        let target = read(dir.path()).expect("the file is opened by its real name");
        let c = of_draft(&draft(), &target);
        expect(
            &c,
            VOCAB,
            Outcome::Pass,
            "model.embed_tokens.weight has 1000 rows",
        );
        // Two of them: the refusal lists both, the one that is not UTF-8 escaped.
        std::fs::write(dir.path().join("other.q4nx"), &bytes).expect("weights");
        let c = of_draft(&draft(), &read(dir.path()).expect("target"));
        expect(
            &c,
            VOCAB,
            Outcome::Undecided,
            "2 *.q4nx files (other.q4nx, \\xffx.q4nx) and no model.q4nx",
        );
    }

    #[test]
    fn a_table_wider_or_narrower_than_the_hidden_size_fails_it() {
        let d = draft();
        let wide = with_tables(vec![table(
            "model.embed_tokens.weight",
            Dtype::Bf16,
            &[1000, 1 << 26],
        )]);
        expect(
            &of_draft(&d, &wide),
            HIDDEN,
            Outcome::Fail,
            "model.embed_tokens.weight is BF16 [1000, 67108864]: 67108864 wide, the target's hidden_size is 256",
        );
        let narrow = with_tables(vec![table("lm_head.weight", Dtype::F8E4M3, &[1000, 128])]);
        expect(
            &of_draft(&d, &narrow),
            HIDDEN,
            Outcome::Fail,
            "lm_head.weight is F8_E4M3 [1000, 128]: 128 wide, the target's hidden_size is 256",
        );
        // A [N/32, Kp/256, 5120] grid states its column blocks: 3 are not the 1 that 256 needs.
        let grid = with_tables(vec![table(
            "lm_head.weight",
            Dtype::I8,
            &[32, 3, TILE_BYTES],
        )]);
        expect(
            &of_draft(&d, &grid),
            HIDDEN,
            Outcome::Fail,
            "lm_head.weight is I8 [32, 3, 5120]: a tile grid 3 column blocks wide, the target's hidden_size 256 needs 1",
        );
        // Objected to even when the draft's own hidden size cannot be read.
        let blind =
            DraftConfig::from_json(br#"{"model_type":"dflash","hidden_size":"256"}"#).unwrap();
        expect(
            &of_draft(&blind, &wide),
            HIDDEN,
            Outcome::Fail,
            "67108864 wide",
        );
        // Tables of the right width pass, and the message says they were compared; a flat grid
        // states no width, so it is not claimed.
        let right = with_tables(vec![
            table("model.embed_tokens.weight", Dtype::Bf16, &[1000, 256]),
            table("lm_head.weight", Dtype::I8, &[32, 1, TILE_BYTES]),
            table("embed_tokens.weight", Dtype::I8, &[32, TILE_BYTES]),
        ]);
        expect(
            &of_draft(&d, &right),
            HIDDEN,
            Outcome::Pass,
            "the draft's hidden size equals the target's (256 vs 256): fc fuses the target's hidden states; \
             the target's model.embed_tokens.weight and lm_head.weight are as wide",
        );
    }
}
