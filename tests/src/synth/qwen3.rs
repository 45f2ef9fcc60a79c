//! A Qwen3 target as a GGUF llama.cpp loads and runs: every tensor its `qwen3` graph creates, with
//! seeded random weights, and a SentencePiece-style vocabulary (`tokenizer.ggml.model` `llama`) whose
//! 256 byte tokens let any prompt be tokenized by byte fallback. It is what a DFlash draft is paired
//! with when llama.cpp runs the two together (`differential::gguf_pairs_against_llama_cpps_speculative_decoding`):
//! a target of the generator's usual shape ([`super::Geometry::small`]'s hidden size, depth and
//! vocabulary), small enough to write in a test (about 10 MB) and to run a few tokens of on a CPU.

use super::gguf::GgufFile;
use super::source::source_matrix;
use super::Geometry;
use dflash_gate::__private::gguf::GgmlType;
use half::f16;

/// The shape of a runnable Qwen3 target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Qwen3Target {
    pub hidden: u64,
    pub layers: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub intermediate: u64,
    /// The vocabulary's length: `tokenizer.ggml.tokens` and the rows of `token_embd.weight`.
    pub vocab: u64,
    /// A row made a CONTROL token of its own (`<|mask|>`), as a target's added special token is; none
    /// when it lies past the vocabulary.
    pub mask_row: Option<u64>,
}

/// The first ordinary token: after `<unk>`, `<s>`, `</s>` and the 256 byte tokens.
const FIRST_WORD: u64 = 3 + 256;

impl Qwen3Target {
    /// The target a draft of `g` is made for: its hidden size, `num_target_layers` layers, its
    /// vocabulary, the draft's mask id a CONTROL row.
    pub fn matching(g: &Geometry) -> Qwen3Target {
        Qwen3Target {
            hidden: g.hidden,
            layers: g.num_target_layers,
            heads: 4,
            kv_heads: 2,
            head_dim: 64,
            intermediate: 512,
            vocab: g.vocab_size,
            mask_row: (g.mask_token_id < g.vocab_size).then_some(g.mask_token_id),
        }
    }

    /// The GGUF, its weights drawn from `seed`.
    pub fn gguf(&self, seed: u64) -> GgufFile {
        let mut f = GgufFile::new();
        f.string("general.architecture", "qwen3");
        f.string("general.name", "synthetic qwen3 target");
        f.u32("general.file_type", 1);
        f.u32("qwen3.context_length", 4096);
        f.u32("qwen3.embedding_length", self.hidden as u32);
        f.u32("qwen3.feed_forward_length", self.intermediate as u32);
        f.u32("qwen3.block_count", self.layers as u32);
        f.u32("qwen3.attention.head_count", self.heads as u32);
        f.u32("qwen3.attention.head_count_kv", self.kv_heads as u32);
        f.u32("qwen3.attention.key_length", self.head_dim as u32);
        f.u32("qwen3.attention.value_length", self.head_dim as u32);
        f.f32("qwen3.rope.freq_base", 1_000_000.0);
        f.f32("qwen3.attention.layer_norm_rms_epsilon", 1e-6);
        self.tokenizer(&mut f);

        let (h, q, kv, ff) = (
            self.hidden,
            self.heads * self.head_dim,
            self.kv_heads * self.head_dim,
            self.intermediate,
        );
        let mut n = 0u64;
        let mut matrix = |f: &mut GgufFile, name: &str, cols: u64, rows: u64| {
            n += 1;
            let data = source_matrix(rows, cols, seed.wrapping_add(n))
                .iter()
                .flat_map(|&v| f16::from_f32(v).to_bits().to_le_bytes())
                .collect();
            f.tensor(name, vec![cols, rows], GgmlType::F16, data);
        };
        let ones = |f: &mut GgufFile, name: &str, len: u64| {
            let data = (0..len).flat_map(|_| 1f32.to_le_bytes()).collect();
            f.tensor(name, vec![len], GgmlType::F32, data);
        };
        // The head is tied to the embedding (no output.weight), as Qwen3's small models are; the
        // draft borrows both from the target.
        matrix(&mut f, "token_embd.weight", h, self.vocab);
        ones(&mut f, "output_norm.weight", h);
        for i in 0..self.layers {
            let name = |t: &str| format!("blk.{i}.{t}.weight");
            ones(&mut f, &name("attn_norm"), h);
            matrix(&mut f, &name("attn_q"), h, q);
            matrix(&mut f, &name("attn_k"), h, kv);
            matrix(&mut f, &name("attn_v"), h, kv);
            matrix(&mut f, &name("attn_output"), q, h);
            ones(&mut f, &name("attn_q_norm"), self.head_dim);
            ones(&mut f, &name("attn_k_norm"), self.head_dim);
            ones(&mut f, &name("ffn_norm"), h);
            matrix(&mut f, &name("ffn_gate"), h, ff);
            matrix(&mut f, &name("ffn_up"), h, ff);
            matrix(&mut f, &name("ffn_down"), ff, h);
        }
        f
    }

    /// `<unk>`, `<s>`, `</s>`, the byte tokens `<0x00>` to `<0xFF>`, then words `▁w{i}`, the mask row
    /// `<|mask|>` where it falls inside.
    fn tokenizer(&self, f: &mut GgufFile) {
        let mut tokens = vec!["<unk>".to_owned(), "<s>".to_owned(), "</s>".to_owned()];
        let mut types = vec![2, 3, 3];
        for b in 0..=255u8 {
            tokens.push(format!("<0x{b:02X}>"));
            types.push(6);
        }
        for i in FIRST_WORD..self.vocab {
            if Some(i) == self.mask_row {
                tokens.push("<|mask|>".to_owned());
                types.push(3);
            } else {
                tokens.push(format!("\u{2581}w{i}"));
                types.push(1);
            }
        }
        tokens.truncate(self.vocab as usize);
        types.truncate(self.vocab as usize);
        let scores: Vec<f32> = (0..tokens.len()).map(|i| -(i as f32)).collect();
        f.string("tokenizer.ggml.model", "llama");
        f.string_array("tokenizer.ggml.tokens", &tokens);
        f.f32_array("tokenizer.ggml.scores", &scores);
        f.i32_array("tokenizer.ggml.token_type", &types);
        f.u32("tokenizer.ggml.unknown_token_id", 0);
        f.u32("tokenizer.ggml.bos_token_id", 1);
        f.u32("tokenizer.ggml.eos_token_id", 2);
    }
}
