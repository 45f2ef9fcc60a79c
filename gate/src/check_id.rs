//! The stable id of every check, in one place.

/// The id of each check as the report, `--json` and `schema/report.schema.json` spell it. The
/// strings are the contract (a loader may match on them); these are their names in Rust, so a
/// caller writes `report.check(CheckId::SOURCE_Q4_1)` rather than a literal that could drift.
#[derive(Debug)]
#[non_exhaustive]
pub struct CheckId;

impl CheckId {
    pub const CONFIG_IS_DFLASH: &'static str = "config.is_dflash";
    pub const CONFIG_GEOMETRY: &'static str = "config.geometry";
    pub const CONFIG_MASK_TOKEN: &'static str = "config.mask_token";
    pub const CONTAINER_PARSES: &'static str = "container.parses";
    pub const PROJECTIONS_PRESENT: &'static str = "projections.present";
    pub const PROJECTIONS_TILE_GRID: &'static str = "projections.tile_grid";
    pub const TILES_HEADERS_SANE: &'static str = "tiles.headers_sane";
    pub const TILES_PADDING_ZERO: &'static str = "tiles.padding_zero";
    pub const TILES_Q4_1_SIGNATURE: &'static str = "tiles.q4_1_signature";
    pub const SCALARS_BLOCK_SIZE: &'static str = "scalars.block_size";
    pub const SCALARS_TARGET_LAYER_IDS: &'static str = "scalars.target_layer_ids";
    pub const SCALARS_SLIDING_WINDOW: &'static str = "scalars.sliding_window";
    pub const SCALARS_EMBEDDING_SCALE: &'static str = "scalars.embedding_scale";
    pub const SCALARS_MASK_TOKEN_ID: &'static str = "scalars.mask_token_id";
    pub const SCALARS_NUM_TARGET_LAYERS: &'static str = "scalars.num_target_layers";
    pub const SCALARS_CONV_KERNEL_SIZE: &'static str = "scalars.conv_kernel_size";
    pub const SCALARS_CONV_GROUP_SIZE: &'static str = "scalars.conv_group_size";
    pub const SCALARS_SELECTOR_RANK: &'static str = "scalars.selector_rank";
    pub const SCALARS_SELECTOR_TOP_K: &'static str = "scalars.selector_top_k";
    pub const SCALARS_OUTPUT_MULTIPLIER: &'static str = "scalars.output_multiplier";
    pub const SCALARS_FINAL_LOGIT_SOFTCAPPING: &'static str = "scalars.final_logit_softcapping";
    pub const FC_SHAPE: &'static str = "fc.shape";
    pub const NORMS_SIZES: &'static str = "norms.sizes";
    pub const NORMS_BF16: &'static str = "norms.bf16";
    pub const DFLASH2_CONV: &'static str = "dflash2.conv";
    pub const DFLASH2_SELECTOR: &'static str = "dflash2.selector";
    pub const INVENTORY_COMPLETE: &'static str = "inventory.complete";
    pub const INVENTORY_EXPLAINED: &'static str = "inventory.explained";
    pub const BF16_FINITE: &'static str = "bf16.finite";
    pub const QUANT_SCALES: &'static str = "quant.scales";
    pub const TARGET_HIDDEN_SIZE: &'static str = "target.hidden_size";
    pub const TARGET_DEPTH: &'static str = "target.depth";
    pub const TARGET_VOCAB: &'static str = "target.vocab";
    pub const TARGET_MASK_TOKEN: &'static str = "target.mask_token";
    pub const TARGET_ROPE: &'static str = "target.rope";
    pub const TARGET_TOKENIZER: &'static str = "target.tokenizer";
    pub const MANIFEST_SHA256: &'static str = "manifest.sha256";
    pub const SOURCE_CONFIG: &'static str = "source.config";
    pub const SOURCE_INVENTORY: &'static str = "source.inventory";
    pub const SOURCE_BF16: &'static str = "source.bf16";
    pub const SOURCE_Q4_1: &'static str = "source.q4_1";
    pub const LOADER_VLLM: &'static str = "loader.vllm";
    pub const LOADER_SGLANG: &'static str = "loader.sglang";
    pub const LOADER_LLAMA_CPP: &'static str = "loader.llama.cpp";
    pub const LOADER_TRANSFORMERS: &'static str = "loader.transformers";
    pub const LOADER_MLX: &'static str = "loader.mlx";
    pub const LOADER_DFLASH_MLX: &'static str = "loader.dflash-mlx";

    /// Every id, in report order (a package, then `--target`, `--manifest`, `--source`, `--loader`).
    pub const ALL: [&'static str; 47] = [
        CheckId::CONFIG_IS_DFLASH,
        CheckId::CONFIG_GEOMETRY,
        CheckId::CONFIG_MASK_TOKEN,
        CheckId::CONTAINER_PARSES,
        CheckId::PROJECTIONS_PRESENT,
        CheckId::PROJECTIONS_TILE_GRID,
        CheckId::TILES_HEADERS_SANE,
        CheckId::TILES_PADDING_ZERO,
        CheckId::TILES_Q4_1_SIGNATURE,
        CheckId::SCALARS_BLOCK_SIZE,
        CheckId::SCALARS_TARGET_LAYER_IDS,
        CheckId::SCALARS_SLIDING_WINDOW,
        CheckId::SCALARS_EMBEDDING_SCALE,
        CheckId::SCALARS_MASK_TOKEN_ID,
        CheckId::SCALARS_NUM_TARGET_LAYERS,
        CheckId::SCALARS_CONV_KERNEL_SIZE,
        CheckId::SCALARS_CONV_GROUP_SIZE,
        CheckId::SCALARS_SELECTOR_RANK,
        CheckId::SCALARS_SELECTOR_TOP_K,
        CheckId::SCALARS_OUTPUT_MULTIPLIER,
        CheckId::SCALARS_FINAL_LOGIT_SOFTCAPPING,
        CheckId::FC_SHAPE,
        CheckId::NORMS_SIZES,
        CheckId::NORMS_BF16,
        CheckId::DFLASH2_CONV,
        CheckId::DFLASH2_SELECTOR,
        CheckId::INVENTORY_COMPLETE,
        CheckId::INVENTORY_EXPLAINED,
        CheckId::BF16_FINITE,
        CheckId::QUANT_SCALES,
        CheckId::TARGET_HIDDEN_SIZE,
        CheckId::TARGET_DEPTH,
        CheckId::TARGET_VOCAB,
        CheckId::TARGET_MASK_TOKEN,
        CheckId::TARGET_ROPE,
        CheckId::TARGET_TOKENIZER,
        CheckId::MANIFEST_SHA256,
        CheckId::SOURCE_CONFIG,
        CheckId::SOURCE_INVENTORY,
        CheckId::SOURCE_BF16,
        CheckId::SOURCE_Q4_1,
        CheckId::LOADER_VLLM,
        CheckId::LOADER_SGLANG,
        CheckId::LOADER_LLAMA_CPP,
        CheckId::LOADER_TRANSFORMERS,
        CheckId::LOADER_MLX,
        CheckId::LOADER_DFLASH_MLX,
    ];
}

#[cfg(test)]
mod tests {
    use super::CheckId;
    use crate::family::{Feature, Scalar};

    /// The schema's list of ids and this one are the same set: an id added on one side only fails.
    #[test]
    fn every_id_is_the_schemas_and_only_those() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../schema/report.schema.json")).expect("schema");
        let listed = &schema["$defs"]["check_id"]["enum"];
        let mut listed: Vec<&str> = listed
            .as_array()
            .expect("the schema lists the check ids")
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        let mut ours = CheckId::ALL.to_vec();
        listed.sort_unstable();
        ours.sort_unstable();
        assert_eq!(ours, listed);
    }

    /// Ids the checks build from a table name one of the constants.
    #[test]
    fn built_ids_are_listed() {
        let mut scalars = Scalar::ALL.to_vec();
        scalars.extend(Scalar::SECOND_FAMILY);
        for s in scalars {
            let id = format!("scalars.{}", s.field());
            assert!(CheckId::ALL.contains(&id.as_str()), "{id}");
        }
        for f in Feature::ALL {
            assert!(CheckId::ALL.contains(&f.check_id()), "{}", f.check_id());
        }
    }
}
