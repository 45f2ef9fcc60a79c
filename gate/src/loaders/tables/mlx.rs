//! MLX through z-lab's `model_mlx.py` (`load_draft`), in the `dflash` 0.1.0 wheel (with mlx 0.32.0's
//! `nn/layers/base.py` `load_weights`, strict by default). Each row was also run on small drafts
//! on MLX's CPU backend. Its loader takes a Hugging Face repository id only (a local path is refused
//! by huggingface_hub's validator): the rules are those it applies to the files it downloads.

use crate::engine::{Engine, LoaderOutcome::*};
use crate::loaders::{Rule, Shape, Table, When};

pub static TABLE: Table = Table {
    engine: Engine::Mlx,
    version: "dflash 0.1.0",
    reads: &[Shape::Folder],
    other_forms: (
        "not loaded: load_draft reads a z-lab config's keys by name (a speculators config: KeyError: 'num_hidden_layers') and *.safetensors only (a GGUF: Missing N parameters)",
        "dflash/model_mlx.py (load_draft)",
    ),
    rules: &[
        Rule {
            id: "quantized_refused",
            reads: "quantization_config, quantization (and their scales)",
            when: When::Quantized,
            outcome: NotItsForm,
            words: "ValueError: Received N parameters not in model: fc.scales, ... (strict load_weights: it quantizes a bf16 draft after loading, with --draft-bits)",
            source: "dflash/model_mlx.py (load_draft); mlx nn/layers/base.py (load_weights)",
        },
        Rule {
            id: "own_embedding_or_head_refused",
            reads: "embed_tokens.weight, lm_head.weight",
            when: When::OwnEmbeddingOrHead,
            outcome: NotItsForm,
            words: "ValueError: Received 1 parameters not in model: lm_head.weight (strict: the draft borrows the target's)",
            source: "mlx nn/layers/base.py (load_weights)",
        },
        Rule {
            id: "bare_names_only",
            reads: "every tensor's name",
            when: When::ModelPrefixed,
            outcome: NotItsForm,
            words: "ValueError: Received N parameters not in model: model.... (strict, bare names only)",
            source: "mlx nn/layers/base.py (load_weights)",
        },
        Rule {
            id: "ids_in_dflash_config",
            reads: "dflash_config.target_layer_ids, dflash_config.mask_token_id",
            when: When::IdsOutsideDflashConfig,
            outcome: NotItsForm,
            words: "KeyError: 'target_layer_ids' (or 'mask_token_id'): read from dflash_config only, never the top level",
            source: "dflash/model_mlx.py (load_draft)",
        },
        Rule {
            id: "mask_token_id_required",
            reads: "dflash_config.mask_token_id",
            when: When::MaskTokenIdAbsent,
            outcome: Crashes,
            words: "KeyError: 'mask_token_id' (read by name, no default)",
            source: "dflash/model_mlx.py (load_draft)",
        },
        Rule {
            id: "target_layer_ids_required",
            reads: "dflash_config.target_layer_ids",
            when: When::TargetLayerIdsAbsent,
            outcome: Crashes,
            words: "KeyError: 'target_layer_ids' (read by name, no default)",
            source: "dflash/model_mlx.py (load_draft)",
        },
        Rule {
            id: "config_keys_at_the_top",
            reads: "num_target_layers, head_dim, rms_norm_eps, max_position_embeddings, vocab_size (top level)",
            when: When::TopLevelAbsent(&[
                "num_target_layers",
                "head_dim",
                "rms_norm_eps",
                "max_position_embeddings",
                "vocab_size",
            ]),
            outcome: NotItsForm,
            words: "KeyError naming the field (e.g. KeyError: 'num_target_layers'): it reads these at the top level only",
            source: "dflash/model_mlx.py (load_draft)",
        },
        Rule {
            id: "missing_weight",
            reads: "every tensor the model builds",
            when: When::TensorMissing,
            outcome: Refuses,
            words: "ValueError: Missing N parameters: ...",
            source: "mlx nn/layers/base.py (load_weights)",
        },
        Rule {
            id: "unexpected_weight",
            reads: "any tensor the model does not build",
            when: When::TensorUnexplained,
            outcome: Refuses,
            words: "ValueError: Received N parameters not in model: ...",
            source: "mlx nn/layers/base.py (load_weights)",
        },
        Rule {
            id: "fc_shape",
            reads: "fc.weight",
            when: When::FcMisshapen,
            outcome: Refuses,
            words: "ValueError: Expected shape ... but received shape ... for parameter fc.weight",
            source: "mlx nn/layers/base.py (load_weights)",
        },
        Rule {
            id: "weight_shape",
            reads: "every tensor's shape",
            when: When::TensorMisshapen,
            outcome: Refuses,
            words: "ValueError: Expected shape ... but received shape ... for parameter ...",
            source: "mlx nn/layers/base.py (load_weights)",
        },
        Rule {
            id: "taps_beyond_the_target",
            reads: "target_layer_ids against the target's layers",
            when: When::TapBeyondTarget,
            outcome: Crashes,
            words: "IndexError on the target's layers[id] (no check against the target)",
            source: "dflash/model_mlx.py (the target hooks)",
        },
        Rule {
            id: "rope_base_defaulted",
            reads: "rope_theta, rope_parameters.rope_theta",
            when: When::RopeThetaAbsent,
            outcome: LoadsWrongly,
            words: "the RoPE base falls back to 10000.0 without a word",
            source: "dflash/model_mlx.py (load_draft)",
        },
        Rule {
            id: "values_unchecked",
            reads: "every weight's values",
            when: When::NonFinite,
            outcome: LoadsWrongly,
            words: "weights are loaded without a look at their values: it drafts from NaN",
            source: "mlx nn/layers/base.py (load_weights)",
        },
    ],
};
