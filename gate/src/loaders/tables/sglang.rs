//! SGLang 0.5.23 (the PyPI wheel `sglang-0.5.23`): `srt/speculative/dflash_utils.py`
//! (`parse_dflash_draft_config`), `srt/models/dflash.py` (`DFlashDraftModel.load_weights`),
//! `srt/speculative/dflash_worker_v2.py` (the mask id, `mask_embedding.pt`),
//! `srt/model_executor/model_runner_components/spec_aux_hidden_state.py` (the taps against the
//! target) and `srt/model_loader/weight_utils.py` (`default_weight_loader`).

use crate::engine::{Engine, LoaderOutcome::*};
use crate::loaders::{Rule, Shape, Table, When};

pub static TABLE: Table = Table {
    engine: Engine::Sglang,
    version: "0.5.23",
    reads: &[Shape::Folder],
    other_forms: (
        "not loaded: a speculators config has no model_type, and AutoConfig raises \"Unrecognized model ... Should have a `model_type` key in its config.json\"; no GGUF or Q4NX path builds a DFlash class",
        "srt/utils/hf_transformers/config.py (get_config, via AutoConfig.from_pretrained)",
    ),
    rules: &[
        Rule {
            id: "fc_shape",
            reads: "fc.weight",
            when: When::FcMisshapen,
            outcome: Refuses,
            words: "DFLASH fc.weight shape mismatch ... Expected fc.weight.shape=...",
            source: "srt/models/dflash.py (DFlashDraftModel.load_weights)",
        },
        Rule {
            id: "weight_shape",
            reads: "every layer, norm, conv and selector tensor",
            when: When::TensorMisshapen,
            outcome: Crashes,
            words: "AssertionError: Attempted to load weight (...) into parameter (...)",
            source: "srt/model_loader/weight_utils.py (default_weight_loader)",
        },
        Rule {
            id: "taps_beyond_the_target",
            reads: "target_layer_ids against the target's num_hidden_layers",
            when: When::TapBeyondTarget,
            outcome: Refuses,
            words: "DFLASH target_layer_ids contains an out-of-range layer id",
            source: "srt/model_executor/model_runner_components/spec_aux_hidden_state.py",
        },
        Rule {
            id: "mask_id_outside_the_target_vocab",
            reads: "mask_token_id against the target's vocab_size",
            when: When::MaskOutsideTargetVocab,
            outcome: Refuses,
            words: "DFLASH mask_token_id is outside the target vocab size",
            source: "srt/speculative/dflash_worker_v2.py (_resolve_mask_token_id)",
        },
        Rule {
            id: "mask_embedding_id",
            reads: "mask_embedding.pt's mask_token_id",
            when: When::MaskEmbeddingDiffers,
            outcome: Refuses,
            words: "DFLASH mask_embedding.pt was trained with mask_token_id=..., but the current resolved mask_token_id=.... These must match.",
            source: "srt/speculative/dflash_worker_v2.py (_maybe_merge_trained_mask_embedding)",
        },
        Rule {
            id: "hidden_size_of_the_target",
            reads: "hidden_size against the target's",
            when: When::HiddenDiffers,
            outcome: Refuses,
            words: "DFLASH target_hidden feature dim mismatch (at the first forward, not at load)",
            source: "srt/models/dflash.py (project_target_hidden)",
        },
        Rule {
            id: "packed_fc_skipped",
            reads: "fc.weight_packed, fc.weight_scale (a quantized fc)",
            when: When::FcQuantized,
            outcome: LoadsWrongly,
            words: "fc is a plain nn.Linear: the packed tensors are skipped as unexpected and fc drafts from its random initial values",
            source: "srt/models/dflash.py (DFlashDraftModel.load_weights)",
        },
        Rule {
            id: "target_layer_ids_guessed",
            reads: "target_layer_ids",
            when: When::TargetLayerIdsAbsent,
            outcome: LoadsWrongly,
            words: "the taps are guessed, spread evenly over the target (build_target_layer_ids), without a warning",
            source: "srt/speculative/dflash_utils.py (resolve_target_layer_ids)",
        },
        Rule {
            id: "mask_token_id_guessed",
            reads: "mask_token_id",
            when: When::MaskTokenIdAbsent,
            outcome: LoadsWrongly,
            words: "the mask id is guessed from the tokenizer (or <|MASK|> is added as a new token)",
            source: "srt/speculative/dflash_worker_v2.py (_resolve_mask_token_id)",
        },
        Rule {
            id: "missing_weight_uninitialised",
            reads: "every tensor the model class builds",
            when: When::TensorMissing,
            outcome: LoadsWrongly,
            words: "no missing-weight check: the parameter keeps its initial value (random, empty or ones)",
            source: "srt/model_loader/loader.py (load_weights_and_postprocess)",
        },
        Rule {
            id: "unexpected_weight_skipped",
            reads: "any tensor the model class does not build",
            when: When::TensorUnexplained,
            outcome: LoadsWrongly,
            words: "unexpected weights are ignored without a word (\"Ignore unexpected weights\")",
            source: "srt/models/dflash.py (DFlashDraftModel.load_weights)",
        },
        Rule {
            id: "own_embedding_dropped",
            reads: "embed_tokens.weight, lm_head.weight",
            when: When::OwnEmbeddingOrHead,
            outcome: LoadsWrongly,
            words: "the draft's own embedding and head are dropped: it drafts with the target's",
            source: "srt/speculative/dflash_worker_v2.py (DFlashWorkerV2.__init__)",
        },
        Rule {
            id: "values_unchecked",
            reads: "every weight's values",
            when: When::NonFinite,
            outcome: LoadsWrongly,
            words: "weights are copied without a look at their values: it drafts from NaN",
            source: "srt/model_loader/weight_utils.py (default_weight_loader)",
        },
    ],
};
