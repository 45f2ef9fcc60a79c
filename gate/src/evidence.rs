//! The machine-readable facts behind each check's message: one type per check id.
//!
//! A loader branches on these, so they hold numbers, names and tokens, never a sentence: prose lives
//! in the check's `message`. Each type serializes to the `evidence:<id>` definition of
//! `schema/report.schema.json`, and the suite validates every arm's report against a closed copy of
//! that schema, so a field added here without the schema (or the other way round) fails a test.
//!
//! To give a new check its evidence:
//! 1. write a struct here (`#[derive(Clone, Debug, PartialEq, Serialize)]`, fields named as the JSON
//!    names them; a list of refused things is a `Vec<Finding>` whose `kind` tokens are `&'static str`
//!    constants, a list of plain names a `Vec<String>`);
//! 2. add a variant to [`Evidence`] and the struct's name to the `evidence!` list below (that writes
//!    the `From` impl, so the check says `Check::fail(ID, message).with_evidence(TheStruct { .. })`);
//! 3. add the `evidence:<id>` definition and its if/then rule to the schema (its `$comment` says
//!    where), and a line to `docs/json.md`; an arm of the suite must produce the check, so that its
//!    report is validated.

use serde::Serialize;
use std::collections::BTreeMap;

/// One check's evidence. Serialized untagged: the check's `id` says which shape it is.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Evidence {
    ConfigGeometry(ConfigGeometry),
    ConfigMaskToken(ConfigMaskToken),
    ContainerParses(ContainerParses),
    ProjectionsPresent(ProjectionsPresent),
    ProjectionsTileGrid(ProjectionsTileGrid),
    TilesHeadersSane(TilesHeadersSane),
    TilesPaddingZero(TilesPaddingZero),
    TilesQ41Signature(TilesQ41Signature),
    /// Every integer `scalars.*` check.
    ScalarInts(ScalarInts),
    /// Every float `scalars.*` check (`embedding_scale`, `output_multiplier`,
    /// `final_logit_softcapping`).
    ScalarFloat(ScalarFloat),
    FcShape(FcShape),
    NormsSizes(NormsSizes),
    NormsBf16(NormsBf16),
    /// `dflash2.conv` and `dflash2.selector`.
    Dflash2Feature(Dflash2Feature),
    InventoryComplete(InventoryComplete),
    InventoryExplained(InventoryExplained),
    Bf16Finite(Bf16Finite),
    QuantScales(QuantScales),
    TargetHiddenSize(TargetHiddenSize),
    TargetDepth(TargetDepth),
    TargetVocab(TargetVocab),
    TargetMaskToken(TargetMaskToken),
    TargetRope(TargetRope),
    TargetTokenizer(TargetTokenizer),
    ManifestSha256(ManifestSha256),
    SourceConfig(SourceConfig),
    SourceInventory(SourceInventory),
    SourceBf16(SourceBf16),
    SourceQ41(SourceQ41),
    /// Every `loader.*` check: the engine's verdict, as the report's `loaders` section holds it.
    Loader(Loader),
}

macro_rules! evidence {
    ($($variant:ident),* $(,)?) => {
        $(impl From<$variant> for Evidence {
            fn from(e: $variant) -> Evidence {
                Evidence::$variant(e)
            }
        })*
    };
}

evidence!(
    ConfigGeometry,
    ConfigMaskToken,
    ContainerParses,
    ProjectionsPresent,
    ProjectionsTileGrid,
    TilesHeadersSane,
    TilesPaddingZero,
    TilesQ41Signature,
    ScalarInts,
    ScalarFloat,
    FcShape,
    NormsSizes,
    NormsBf16,
    Dflash2Feature,
    InventoryComplete,
    InventoryExplained,
    Bf16Finite,
    QuantScales,
    TargetHiddenSize,
    TargetDepth,
    TargetVocab,
    TargetMaskToken,
    TargetRope,
    TargetTokenizer,
    ManifestSha256,
    SourceConfig,
    SourceInventory,
    SourceBf16,
    SourceQ41,
    Loader,
);

/// `loader.*`: one engine's verdict on the draft (spec 19).
pub type Loader = crate::engine::LoaderVerdict;

/// One thing a check refused or could not decide: what it is called, and why as a token (each
/// list's tokens are enumerated in the schema). The sentence with the values is in the message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Finding {
    pub name: String,
    pub kind: &'static str,
}

impl Finding {
    pub fn new(name: impl Into<String>, kind: &'static str) -> Finding {
        Finding {
            name: name.into(),
            kind,
        }
    }
}

/// Why a config field let a check down: `missing`, `wrong_type` or `invalid`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct FieldFinding {
    pub field: String,
    pub kind: &'static str,
}

/// `config.geometry`: each field as read (null when it could not be), and the problems found.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ConfigGeometry {
    pub problems: Vec<FieldFinding>,
    pub hidden_size: Option<u64>,
    pub num_hidden_layers: Option<u64>,
    pub num_attention_heads: Option<u64>,
    pub num_key_value_heads: Option<u64>,
    pub head_dim: Option<u64>,
    pub head_dim_derived: bool,
    pub intermediate_size: Option<u64>,
    pub block_size: Option<u64>,
    pub target_layer_ids: Option<Vec<u64>>,
}

/// `container.parses` on a FAIL: the refusal, as a `kind` token and the offsets, sizes and names it
/// involves (a PASS has null evidence: its facts are the census's).
pub type ContainerParses = crate::container::ContainerError;

/// What a weight file was found to be instead of a container: `found` of the `not_a_container`
/// refusal, so a program can tell a checkout without LFS from a damaged file.
pub use crate::container::Impostor;

#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ProjectionsPresent {
    pub expected: usize,
    pub absent: Vec<String>,
}

/// `projections.tile_grid`: `refused` kinds `not_a_grid`, `no_grid_geometry`; `undecided` kinds
/// `needs_field`, `not_read`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ProjectionsTileGrid {
    pub proven: usize,
    pub expected: usize,
    pub refused: Vec<Finding>,
    pub undecided: Vec<Finding>,
}

/// Where the first broken tile header is.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct BadHeader {
    pub tensor: String,
    pub tile: u64,
    pub column_group: usize,
    pub row: usize,
    pub scale: f64,
    pub minimum: f64,
    /// `scale_not_finite`, `scale_negative`, `minimum_not_finite`, `zero_scale_over_codes` or
    /// `zero_planes`.
    pub why: &'static str,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TilesHeadersSane {
    pub groups: u64,
    pub constant_groups: u64,
    pub bad_groups: u64,
    pub bad_tensors: Vec<String>,
    pub first_bad: Option<BadHeader>,
}

/// Where the first padding group that is not zero is.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct BadPadding {
    pub tensor: String,
    pub tile: u64,
    pub column_group: usize,
    pub row: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TilesPaddingZero {
    pub padding_groups: u64,
    pub first_bad: Option<BadPadding>,
}

/// `tiles.q4_1_signature`: `refused` kinds `zero_planes`, `zero_minimum_plane`, `off_signature`;
/// `undecided` kind `no_positive_scale`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TilesQ41Signature {
    pub band: [f32; 2],
    pub medians: BTreeMap<String, Option<f64>>,
    pub refused: Vec<Finding>,
    pub undecided: Vec<Finding>,
}

/// An integer scalar: the container's values as stored, the config's as read (null when absent).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ScalarInts {
    pub container: Vec<i64>,
    pub config: Option<Vec<u64>>,
}

/// A float JSON can carry, or the text of one it cannot (`inf`, `NaN`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Float {
    Number(f64),
    Text(String),
}

impl From<f32> for Float {
    fn from(v: f32) -> Float {
        if v.is_finite() {
            Float::Number(f64::from(v))
        } else {
            Float::Text(v.to_string())
        }
    }
}

/// A float scalar: the container's f32, the config's value, and that value as f32.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ScalarFloat {
    pub container: Float,
    pub config: f64,
    pub config_as_f32: Float,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct FcShape {
    pub dtype: &'static str,
    pub shape: Vec<u64>,
    pub bytes: u64,
    pub expected_bytes: u64,
}

/// `norms.sizes`: `off_size` kinds `not_bf16`, `wrong_shape`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct NormsSizes {
    pub expected: usize,
    pub absent: Vec<String>,
    pub off_size: Vec<Finding>,
}

/// `norms.bf16`: the gains in each list, by name.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct NormsBf16 {
    pub read_as_bf16: usize,
    pub read_as_f16: Vec<String>,
    pub unclear: Vec<String>,
    pub not_labelled_bf16: Vec<String>,
}

/// `dflash2.*`: `refused` kinds `two_names`, `wrong_form`; `undecided` kind `needs_field`;
/// `proven` kinds `q4_1_grid`, `bf16`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Dflash2Feature {
    pub expected: usize,
    pub absent: Vec<String>,
    pub refused: Vec<Finding>,
    pub undecided: Vec<Finding>,
    pub proven: Vec<Finding>,
}

/// `inventory.complete` (a draft whose tensors are plain float arrays): what the model class defines
/// and what of it is missing or wrong.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct InventoryComplete {
    /// The tensors the model class defines for this config (optional ones not counted).
    pub required: usize,
    /// Of those and the optional ones, how many the folder holds.
    pub present: usize,
    /// The first [`crate::limits::MAX_CENSUS_TENSORS`] tensors missing or wrong: `missing`,
    /// `misshapen`, `element_type`, `codebook_suffix`, `vocabulary_map` (a reduced vocabulary's
    /// `d2t` or `t2d` whose values break the map, spec 18.1).
    pub problems: Vec<Finding>,
    /// Problems past that limit, counted and not listed; absent when none were left out.
    #[serde(skip_serializing_if = "is_zero")]
    pub not_listed: u64,
}

/// `inventory.explained`: `unexplained` kinds `no_role`, `second_name`, `second_family`,
/// `beyond_layers`, `feature_off`, `embedding_form`; `undecided` kinds `needs_field`,
/// `needs_vocab_size`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct InventoryExplained {
    pub tensors: usize,
    /// The first [`crate::limits::MAX_CENSUS_TENSORS`] findings of each kind.
    pub unexplained: Vec<Finding>,
    pub undecided: Vec<Finding>,
    /// Findings past that limit, counted and not listed; absent when none were left out.
    #[serde(skip_serializing_if = "is_zero")]
    pub not_listed: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The first non-finite value of `bf16.finite`: its tensor, element index, and `inf`, `-inf` or
/// `NaN`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct FirstNonFinite {
    pub tensor: String,
    pub index: u64,
    pub value: &'static str,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Bf16Finite {
    pub tensors: usize,
    pub elements: u64,
    /// The first [`crate::limits::MAX_CENSUS_TENSORS`] tensors holding a non-finite value, with how
    /// many each holds.
    pub non_finite: BTreeMap<String, u64>,
    /// Tensors holding one past that limit, counted and not listed; absent when none were left out.
    #[serde(skip_serializing_if = "is_zero")]
    pub not_listed: u64,
    pub first: Option<FirstNonFinite>,
}

/// `quant.scales`: how many scale tensors and scales were read, and the first that is not finite and
/// `> 0`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct QuantScales {
    pub tensors: usize,
    pub elements: u64,
    pub first: Option<FirstBadScale>,
}

/// The first bad scale: its tensor, its index in the tensor's row-major order, and its value as
/// text (`NaN`, `inf`, `0`, `-0.5`: JSON has no NaN).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct FirstBadScale {
    pub tensor: String,
    pub index: u64,
    pub value: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TargetHiddenSize {
    pub draft: Option<u64>,
    pub target: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TargetDepth {
    pub taps: Vec<u64>,
    pub target_layers: u64,
    pub draft_num_target_layers: Option<u64>,
    /// The architecture the target states (a GGUF's `general.architecture`, a config's
    /// `architectures[0]`); `None` when it states none.
    pub target_architecture: Option<String>,
    /// Whether llama.cpp b11434's graph for that architecture records the last layer's output (a GGUF
    /// draft's `dflash.target_layers` entry equal to the target's layer count reads it); `None` when
    /// the target states no architecture.
    pub records_last_layer: Option<bool>,
    /// The verifier a speculators draft names against the target's architectures (spec 18.1); null
    /// for a draft whose form names no verifier.
    pub verifier_architectures: Option<VerifierArchitectures>,
}

/// `target.depth`'s comparison of the verifier a speculators config names
/// (`speculators_config.verifier.architectures`) with the target's `architectures` (its
/// config.json): `compared` only when both were read; a side not read is null.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct VerifierArchitectures {
    pub verifier: Option<Vec<String>>,
    pub target: Option<Vec<String>>,
    pub compared: bool,
}

/// `target.vocab`: `problems` kinds `draft_vocab_size` (the two differ), `draft_field` (the draft's
/// is unusable), `rows` and `padded_rows` (a table's rows disagree), named by field or table.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TargetVocab {
    pub target_vocab_size: u64,
    pub draft_vocab_size: Option<u64>,
    pub tables_read: Vec<&'static str>,
    pub problems: Vec<Finding>,
}

/// `config.mask_token` (a GGUF draft): its mask id, and that token's type in
/// `tokenizer.ggml.token_type` (llama.cpp's `llama_token_type`; null when the file states none).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ConfigMaskToken {
    pub mask_token_id: u64,
    pub token_type: Option<i32>,
    /// The metadata key the id was read from: `tokenizer.ggml.mask_token_id`, the key llama.cpp
    /// reads, or the older `dflash.mask_token_id`, which it does not.
    pub key: String,
}

/// `target.mask_token`, once both numbers are known: the draft's mask token, the vocabulary size it
/// must be below, and whose that is (`target`, or `draft` when the target's could not be read).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TargetMaskToken {
    pub mask_token_id: u64,
    pub vocab_size: u64,
    pub vocab_size_from: &'static str,
}

/// `target.tokenizer`: what the target's tokenizer.json is: `present`, `absent`, `dangling` (a link
/// to nothing), `not_regular` or `unexamined`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TargetTokenizer {
    pub tokenizer: &'static str,
}

/// `target.rope`: the RoPE fields by canonical name (`rope_theta`, `rope.rope_type`, `rope.factor`,
/// ...): those equal on both sides, and those that differ or one side does not state, each as the
/// message says it (with both values and where each was read).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TargetRope {
    pub compared: Vec<String>,
    pub differing: Vec<String>,
    pub absent: Vec<String>,
}

/// `manifest.sha256`: files by name; `unreadable` kinds are the error document's `reason` tokens.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ManifestSha256 {
    /// What vouched for the files: `MANIFEST.sha256`, or a hub cache snapshot's blob names.
    pub against: ManifestAgainst,
    pub listed: usize,
    pub hashed_bytes: u64,
    pub mismatched: Vec<String>,
    pub missing: Vec<String>,
    pub unreadable: Vec<Finding>,
    pub outside_the_package: Vec<String>,
    pub unlisted: Vec<String>,
    /// Files of a hub cache snapshot that no digest names (a file of its own, not a link to a
    /// blob): not vouched for. Always empty against a `MANIFEST.sha256`, where such a file is
    /// `unlisted`.
    pub unverified: Vec<String>,
}

/// What `manifest.sha256` held the files to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ManifestAgainst {
    /// The package's `MANIFEST.sha256`.
    ManifestFile,
    /// A hub cache snapshot's blob names: SHA-256 (Git LFS objects) and git's blob hash.
    HubCache,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct SourceConfig {
    pub fields: Vec<String>,
    pub compared: Vec<String>,
    pub differing: Vec<String>,
    pub one_sided: Vec<String>,
    pub skipped: Vec<String>,
    /// Only against a GGUF: keys whose value cannot decide the comparison (`target_layers` one
    /// above every id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undecided: Option<Vec<String>>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct SourceInventory {
    pub paired: usize,
    pub missing: Vec<String>,
    pub extra: Vec<String>,
    pub misshapen: Vec<String>,
    /// Only against a GGUF: tensors that could not be paired. Always empty now: every tensor is
    /// paired by its name, DFlash2's by llama.cpp's (spec 18.3); kept within schema 3.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unpaired: Option<Vec<String>>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct SourceBf16 {
    pub compared: Vec<String>,
    pub differing: BTreeMap<String, u64>,
    pub not_compared: Vec<String>,
}

/// `source.q4_1`: per grid, by name.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct SourceQ41 {
    pub max_error_steps: BTreeMap<String, f64>,
    pub relative_rms: BTreeMap<String, f64>,
    pub out_of_bound: BTreeMap<String, u64>,
    /// Only against a GGUF: each grid compared exactly with its Q4_1 tensor, by package name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact: Option<BTreeMap<String, ExactGrid>>,
    /// Only against a GGUF: grids not compared, their tensors of a type the gate cannot dequantize.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undecided: Option<Vec<String>>,
}

/// One grid of `source.q4_1` compared group for block with a Q4_1 GGUF tensor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ExactGrid {
    /// The GGUF tensor's name.
    pub gguf: String,
    pub groups_compared: u64,
    pub groups_differing: u64,
    /// The first group unlike its block, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<ExactDifference>,
}

/// The first group of a grid unlike its GGUF block, located as the message locates it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ExactDifference {
    pub tile: u64,
    /// The 32-column group inside the tile (0 to 7).
    pub group: u64,
    pub row: u64,
    /// The differing code's column, or the group's first column.
    pub column: u64,
    /// The block's index in the GGUF tensor (row-major, `K / 32` blocks a row).
    pub gguf_block: u64,
    /// `code`, `scale`, `minimum`, or `not_finite` (the block's f16 `d` or `m` is not finite).
    pub kind: &'static str,
    /// The two values compared: codes (0 to 15), or scales' and minimums' bf16 bits (the GGUF's
    /// rounded to bf16); null for `not_finite`.
    pub package_value: Option<u16>,
    pub gguf_value: Option<u16>,
}
