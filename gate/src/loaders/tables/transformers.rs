//! Transformers through z-lab's `dflash` 0.1.0 (the PyPI wheel, which pins transformers 5.15.0):
//! `dflash/model.py` (`DFlashDraftModel`), `dflash/benchmark.py` (`load_transformers_models`), and
//! transformers' `modeling_utils.py` (`_finalize_model_loading`), `core_model_loading.py`
//! (`set_param_for_module`), `utils/loading_report.py` and `quantizers/auto.py`. Each row was also
//! run on small drafts on CPU.

use crate::engine::{Engine, LoaderOutcome::*};
use crate::loaders::{Rule, Shape, Table, When};

pub static TABLE: Table = Table {
    engine: Engine::Transformers,
    version: "dflash 0.1.0",
    reads: &[Shape::Folder],
    other_forms: (
        "not loaded: a speculators config has no model_type (ValueError: Unrecognized model ... Should have a `model_type` key); a GGUF or Q4NX directory has no model.safetensors (OSError: Error no file named model.safetensors ...)",
        "dflash/benchmark.py (load_transformers_models); transformers configuration_auto.py, modeling_utils.py",
    ),
    rules: &[
        Rule {
            id: "mlx_quantization",
            reads: "quantization_config (MLX's, without quant_method)",
            when: When::QuantizedMlx,
            outcome: NotItsForm,
            words: "ValueError: The model's quantization config from the arguments has no `quant_method` attribute",
            source: "transformers quantizers/auto.py",
        },
        Rule {
            id: "modelopt_object",
            reads: "quantization_config (ModelOpt's own object, without quant_method)",
            when: When::QuantizedModeloptObject,
            outcome: NotItsForm,
            words: "ValueError: The model's quantization config from the arguments has no `quant_method` attribute",
            source: "transformers quantizers/auto.py",
        },
        Rule {
            id: "compressed_tensors_not_traced",
            reads: "quantization_config (compressed-tensors)",
            when: When::QuantizedCompressedTensors,
            outcome: Undecided,
            words: "read by transformers' compressed-tensors quantizer when that package is installed (ImportError otherwise); a packed DFlash draft through it was not traced",
            source: "transformers utils/quantization_config.py",
        },
        Rule {
            id: "num_target_layers_at_the_top",
            reads: "num_target_layers (top level)",
            when: When::TopLevelAbsent(&["num_target_layers"]),
            outcome: NotItsForm,
            words: "AttributeError: 'Qwen3Config' object has no attribute 'num_target_layers' (it reads it at the top level only)",
            source: "dflash/model.py (DFlashDraftModel.__init__)",
        },
        Rule {
            id: "fc_shape",
            reads: "fc.weight",
            when: When::FcMisshapen,
            outcome: Refuses,
            words: "RuntimeError: You set `ignore_mismatched_sizes` to `False`, thus raising an error",
            source: "transformers core_model_loading.py (set_param_for_module)",
        },
        Rule {
            id: "weight_shape",
            reads: "every tensor's shape",
            when: When::TensorMisshapen,
            outcome: Refuses,
            words: "RuntimeError: You set `ignore_mismatched_sizes` to `False`, thus raising an error",
            source: "transformers core_model_loading.py (set_param_for_module)",
        },
        Rule {
            id: "taps_beyond_the_target",
            reads: "target_layer_ids against the target's layers",
            when: When::TapBeyondTarget,
            outcome: Crashes,
            words: "IndexError: tuple index out of range (at generation: no check against the target)",
            source: "dflash/model.py (extract_context_feature)",
        },
        Rule {
            id: "hidden_size_of_the_target",
            reads: "hidden_size against the target's",
            when: When::HiddenDiffers,
            outcome: Crashes,
            words: "RuntimeError: mat1 and mat2 shapes cannot be multiplied (at generation)",
            source: "dflash/model.py (DFlashDraftModel.forward)",
        },
        Rule {
            id: "mask_id_outside_the_target_vocab",
            reads: "mask_token_id against the target's vocabulary",
            when: When::MaskOutsideTargetVocab,
            outcome: Crashes,
            words: "IndexError: index out of range in self (at generation)",
            source: "dflash/model.py (dflash_generate)",
        },
        Rule {
            id: "mask_token_id_absent",
            reads: "mask_token_id",
            when: When::MaskTokenIdAbsent,
            outcome: Crashes,
            words: "TypeError: full(): argument 'fill_value' (position 2) must be Number, not NoneType (at generation)",
            source: "dflash/model.py (dflash_generate)",
        },
        Rule {
            id: "missing_weight_random",
            reads: "every tensor the model class builds",
            when: When::TensorMissing,
            outcome: LoadsWrongly,
            words: "newly initialized because missing from the checkpoint: drawn at random (normal, std 0.02), a warning only",
            source: "transformers modeling_utils.py (_finalize_model_loading)",
        },
        Rule {
            id: "unexpected_weight_ignored",
            reads: "any tensor the model class does not build",
            when: When::TensorUnexplained,
            outcome: LoadsWrongly,
            words: "UNEXPECTED: can be ignored ... (a warning): the draft runs without it",
            source: "transformers utils/loading_report.py",
        },
        Rule {
            id: "own_embedding_dropped",
            reads: "embed_tokens.weight, lm_head.weight",
            when: When::OwnEmbeddingOrHead,
            outcome: LoadsWrongly,
            words: "UNEXPECTED in the load report: the draft's own embedding and head are dropped, and it drafts with the target's",
            source: "dflash/model.py (DFlashDraftModel: no embedding or head of its own); transformers utils/loading_report.py",
        },
        Rule {
            id: "target_layer_ids_guessed",
            reads: "target_layer_ids",
            when: When::TargetLayerIdsAbsent,
            outcome: LoadsWrongly,
            words: "the taps are built by build_target_layer_ids(num_target_layers, num_hidden_layers), without a word",
            source: "dflash/model.py (DFlashDraftModel.__init__)",
        },
        Rule {
            id: "rope_base_defaulted",
            reads: "rope_theta, rope_parameters",
            when: When::RopeThetaAbsent,
            outcome: LoadsWrongly,
            words: "rope_parameters becomes {'rope_theta': 10000.0, 'rope_type': 'default'}, without a word",
            source: "transformers modeling_rope_utils.py",
        },
        Rule {
            id: "values_unchecked",
            reads: "every weight's values",
            when: When::NonFinite,
            outcome: LoadsWrongly,
            words: "weights are loaded without a look at their values: it drafts from NaN",
            source: "transformers core_model_loading.py (set_param_for_module)",
        },
    ],
};
