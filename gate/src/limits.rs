//! Every limit the reader enforces on untrusted input, in one place.
//!
//! A number read from a file is compared with one of these (or with the file's real size) before it
//! sizes anything, so a crafted header cannot make the gate allocate or loop in proportion to a lie.
//!
//! Each cap on a file's size is sized from the largest real files of its kind, with room to spare,
//! and every file under one is read in memory a small multiple of its size (headers and indexes are
//! read straight into their tables, never into a JSON tree).

/// The largest container header accepted (the header length prefix `n`). The safetensors reference uses
/// the same cap; the reference draft's header is under 7 KiB, and a shard of a large public MoE
/// checkpoint (a few thousand expert tensors, about 100 bytes of header each) under 1 MiB.
pub const MAX_HEADER_BYTES: u64 = 100 * 1024 * 1024;

/// The most tensor entries a header (or a sharded checkpoint's index, in all) may declare. The
/// reference draft has 64; a main-model container a few thousand; the largest public sharded
/// checkpoints around 100,000 across all their shards.
pub const MAX_TENSORS: usize = 1 << 20;

/// How many of a weight file's first bytes a header-only reader reads to say what the file is when it
/// is not a container (a Git LFS pointer is about 130 bytes; an error page names itself in its first
/// line; "all zeros" is said only of a file this short, since only then were all its bytes read).
pub const RECOGNISE_BYTES: u64 = 4096;

/// The most zero-byte tensors a header may declare. No role of a package is empty; a header of a
/// million empty entries costs lookups and report lines while the file holds no bytes for them.
pub const MAX_EMPTY_TENSORS: usize = 1024;

/// The most tensors the census lists one by one (the report and the JSON alike); the rest are counted,
/// and the report says how many it left out. Every tensor is still checked. A released draft has 81
/// tensors and the largest DFlash2 drafts a few hundred; a header of a million one-byte tensors
/// (a 75 MB header the format allows) would otherwise cost gigabytes to report.
pub const MAX_CENSUS_TENSORS: usize = 4096;

/// The most `__metadata__` keys a header may carry (real ones carry one or two, e.g. `format`).
pub const MAX_METADATA_KEYS: usize = 4096;

/// The most dimensions a tensor shape may have.
pub const MAX_RANK: usize = 8;

/// The largest `config.json` read (a draft's, a checkpoint's, a target's). Real configs are a few KiB;
/// the largest public ones, multimodal models with a vision and an audio config nested in the text
/// model's, or a quantized model's `quantization_config` listing every module it left alone, stay
/// under a few hundred KiB. A larger file is refused before it is read whole.
pub const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// The largest `model.safetensors.index.json` read (a `--source` checkpoint's or a `--target`'s). Its
/// `weight_map` has one line of about 100 bytes per tensor; the largest public sharded checkpoints,
/// 400B+ MoE models of around 100,000 tensors (hundreds of experts per layer, each with its own
/// quantization scales), have indexes of 10 to 20 MB. 64 MiB leaves three times that, and sits where
/// [`MAX_TENSORS`] entries of ordinary length would. It is read straight into the name-to-shard map
/// (never a JSON tree), which holds each name and shard name once more: a small multiple of its size.
pub const MAX_INDEX_BYTES: u64 = 64 * 1024 * 1024;

/// The largest `MANIFEST.sha256` read. A line is a 64-digit hash and a file name, about 100 bytes: a
/// package has three or four, a checkpoint of hundreds of shards a few hundred (tens of KiB).
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

/// Nesting depth accepted in any JSON document the gate parses (serde_json's own recursion limit is
/// 128; real headers and configs nest three or four levels).
pub const MAX_JSON_DEPTH: usize = 64;

/// The engine's packer aligns each tensor to this many bytes; a zero-filled gap shorter than this that
/// ends on such a boundary is the one kind of hole accepted (spec section 3).
pub const TENSOR_ALIGNMENT: u64 = 64;

/// The most layers a draft config may declare, and the bound on a target's depth as the draft states
/// it (`num_target_layers`, each tap): the gate expects names for every layer, so this bounds the work a
/// config can ask for. Drafts have a handful, targets at most a few hundred.
pub const MAX_LAYERS: u64 = 1024;

/// The largest model dimension (hidden size, heads, head_dim, intermediate size, block size) accepted
/// from a config; real ones are below 2^17.
pub const MAX_DIMENSION: u64 = 1 << 20;

/// The largest vocabulary a config may declare (and so the bound on `mask_token_id`); real ones are
/// below 2^19.
pub const MAX_VOCAB: u64 = 1 << 24;

/// The longest GGUF metadata key (spec section 12.1; ggml's own writer never comes near it).
pub const MAX_GGUF_KEY_BYTES: u64 = 65_535;

/// The most metadata entries a GGUF may declare. Real ones carry a few dozen (the tokenizer is a
/// handful of keys whose values are long arrays); each entry is also checked against the bytes left.
pub const MAX_GGUF_METADATA_KEYS: u64 = 1 << 16;

/// The most tensor infos a GGUF may declare: the container's limit for one file.
pub const MAX_GGUF_TENSORS: u64 = MAX_TENSORS as u64;

/// How deep GGUF arrays may nest (an array of arrays is depth 2). ggml reads none nested; gguf-py
/// writes them for lists of lists. Each level is a recursion of the reader, so it is bounded.
pub const MAX_GGUF_ARRAY_DEPTH: usize = 4;

/// ggml's `GGML_MAX_NAME`: a tensor name must be shorter (ggml keeps it NUL-terminated in 64 bytes).
pub const GGML_MAX_NAME: u64 = 64;

/// ggml's `GGML_MAX_DIMS`: a tensor has 1 to this many dimensions.
pub const GGML_MAX_DIMS: u32 = 4;

/// The longest integer array of a kept GGUF key held with its elements (`{a}.target_layers` lists
/// layer ids, so [`MAX_LAYERS`] of them); a longer one is kept by its type and count only.
pub const MAX_GGUF_KEPT_ARRAY: u64 = MAX_LAYERS;

/// The largest target `tokenizer.json` read. Real ones are about 10 MB (Llama 3's 9 MB, Qwen3's 11 MB
/// for 151,669 tokens) and up to about 33 MB (Gemma 3's 262,144 tokens and their merges); 64 MiB
/// leaves twice that. It is read straight into the counts the checks need, never into a JSON tree,
/// and kept, so a token's text is found by scanning it again.
pub const MAX_TOKENIZER_BYTES: u64 = 64 * 1024 * 1024;

/// The most entries a tokenizer's `added_tokens` may hold. Real ones hold from a few dozen to a few
/// thousand (reserved and unused slots).
pub const MAX_ADDED_TOKENS: usize = 1 << 16;

/// The largest `mask_embedding.pt` read (spec section 18.2). It holds one id and one `[hidden]`
/// embedding: 4 bytes a value at [`MAX_DIMENSION`] is 4 MiB, and torch's archive adds a few KiB.
pub const MAX_TORCH_ARCHIVE_BYTES: u64 = 16 * 1024 * 1024;

/// The most entries a torch archive's central directory may declare. torch.save writes its pickle,
/// `version`, `byteorder`, `.format_version`, `.storage_alignment`, `.data/serialization_id` and one
/// entry per storage: under ten for a mask embedding.
pub const MAX_ZIP_ENTRIES: usize = 64;

/// The longest entry name a torch archive may hold (torch's are `<archive>/data/<key>`).
pub const MAX_ZIP_NAME_BYTES: usize = 256;

/// The longest string a pickle may hold (a dict key, a global's module or name, a storage key).
pub const MAX_PICKLE_STRING_BYTES: usize = 256;

/// How deep a pickle's values may nest (a tuple in a tuple is depth 2) and how many marks may be
/// open at once. A tensor dict nests four deep (dict, the rebuild's arguments, the storage's
/// persistent id, a size tuple).
pub const MAX_PICKLE_DEPTH: usize = 16;

/// The most values a pickle's stack may hold at once. A tensor dict's largest moment is a few
/// dozen (the rebuild's arguments above two open marks).
pub const MAX_PICKLE_STACK: usize = 256;

/// The most memo entries a pickle may store, and the bound on a memo key (torch's pickler numbers
/// them from 0, a tensor dict uses about twenty).
pub const MAX_PICKLE_MEMO: usize = 1024;

/// The most elements a tuple, list or dict of a pickle may hold (a shape, a dict of two keys).
pub const MAX_PICKLE_ITEMS: usize = 64;
