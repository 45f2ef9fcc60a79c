"""Drafts written by the real libraries, and each good file read back by the library itself.

Usage: python writers.py COMMAND WORK_DIR ARGS...

- `mask WORK_DIR HIDDEN MASK_ID WITNESS`: `mask_embedding.pt` files written by `torch.save` itself,
  each as `WORK_DIR/<case>/mask_embedding.pt` (so the archive's record prefix is `mask_embedding`,
  as torch names it from the file): `dict_f32`, `dict_bf16`, `ordered_f32`, `ordered_bf16` (a plain
  dict and an `OrderedDict` of `{"mask_token_id": id, "embedding": tensor [hidden]}`), the controls
  `wrong_id` (id + 1), `wrong_length` (hidden + 1 values), `nan` (element 3 NaN), and `malicious`: the
  id an object whose `__reduce__` calls `os.system("touch WITNESS")`, so that unpickling it with
  code execution creates WITNESS. Each good file is read back with `torch.load(weights_only=True)`
  and compared, and its line carries the id, dtype and values saved (NaN as null); the malicious one
  must be refused by `torch.load(weights_only=True)` too.
- `speculators WORK_DIR ZLAB_DFLASH_DIR ZLAB_DFLASH2_DIR`: drafts written by speculators' own config
  classes and models (`DFlashSpeculatorConfig` / `DFlash2SpeculatorConfig`, `DFlashDraftModel` /
  `DFlash2DraftModel`, `save_pretrained`), of the synthetic z-lab folders' geometry, with random
  weights: `dflash`, `dflash2`, and `reduced` (a DFlash draft over 500 of the verifier's 1000 tokens,
  with its own head, `d2t` and `t2d`). Each is loaded back by `from_pretrained` and its state dict
  compared with the one saved. And `converted`: the z-lab DFlash folder converted by speculators' own
  `DFlashConverter` (`speculators convert --algorithm dflash`, validated by its own `from_pretrained`),
  its tensors compared bit for bit with the folder's.
- `compressed WORK_DIR BF16_DIR`: the bf16 folder quantized by compressed-tensors' own code
  (`QuantizationConfig`, `apply_quantization_config`, `calculate_qparams`, then
  `ModelCompressor.compress_model` in the pack-quantized format and `update_config`), in the schemes
  `w4_group32_sym`, `w4_group128_asym`, `w4_channel_sym`, `w4_channel_asym`, `w8_channel_sym`, each in
  `WORK_DIR/<scheme>`; the controls `scale_nan` (`fc.weight_scale[0, 3]` NaN) and `packed_truncated`
  (`fc.weight_packed` one column short) are written from `w4_group32_sym`. Each good folder is read
  back: compressed-tensors' own `decompress` of every module, held to the dequantization the gate
  expects (`scale * (q - zero)`, q unpacked as spec section 17.1 says, element j of a word at bit
  j * bits) and to the bf16 weights (within half a step, one step for the asymmetric schemes, plus
  the scale's bf16 rounding).
  Then compressed-tensors' float presets, each by the same code path (the preset's name as the
  config group, `generate_gparam` for the global scales) in the format llm-compressor saves it in:
  `fp8_tensor` (`FP8`, `float-quantized`: F8_E4M3 `weight`, bf16 `weight_scale` [1], and a static
  bf16 `input_scale` [1] calibrated to an activation range of 8.96, so 0.02), `fp8_channel`
  (`FP8_DYNAMIC`: `weight_scale` [rows, 1], dynamic input, nothing stored for it), `fp8_block`
  (`FP8_BLOCK`: `weight_scale` [ceil(rows / 128), cols / 128]), `nvfp4a16` (`NVFP4A16`,
  `nvfp4-pack-quantized`: U8 `weight_packed` [rows, cols / 2], two E2M1 codes a byte, the low
  nibble first; F8_E4M3 `weight_scale` [rows, cols / 16]; F32 `weight_global_scale` [1]) and
  `nvfp4` (`NVFP4`: the same plus F32 `input_global_scale` [1]). Each is read back by the format's
  own compressor's `decompress`, held to `scale * q` (divided by the global scale for NVFP4) and to
  the bf16 weights within half a step of the element format plus its clamp and bf16 rounding. The
  controls `fp8_weight_nan` (`fc.weight[0, 5]` the byte 0x7f, E4M3's NaN) and `fp8_scale_zero`
  (`fc.weight_scale[2, 0]` zero) are written from `fp8_channel`; `nvfp4_global_scale_zero`
  (`fc.weight_global_scale` zero) and `nvfp4_scale_nan` (`fc.weight_scale[1, 2]` the byte 0x7f)
  from `nvfp4a16`.
- `mlx WORK_DIR BF16_DIR`: the bf16 folder's tensors as an MLX module saved by mlx-lm's own
  `save_model` (`model.safetensors` plus `model.safetensors.index.json`) and `save_config`, in
  `WORK_DIR/plain`; and quantized by mlx-lm's `quantize_model` (affine, group 64, 4 bits) in
  `WORK_DIR/quantized`. Read back with `mx.load` (the plain one compared bit for bit; the quantized
  one dequantized by `mx.dequantize` and held to one step: MLX's affine quantizer refits each
  group's scale so its larger end is exact, and may clamp the other end by up to a step).
  Then, by the same `quantize_model`: `affine_2_128`, `affine_3_32`, `affine_6_64`, `affine_8_32`
  (mode affine, bits, group; U32 words holding each row as one little-endian bit stream, so 3- and
  6-bit codes straddle words; bf16 `scales` and `biases` [rows, cols / group]); `mxfp4`, `nvfp4`,
  `mxfp8` (the modes' own defaults: group 32, 16, 32; U8 `scales`, E8M0 for mx and E4M3 for nvfp4,
  no `biases`, no global scale); and `override`: affine 4/64 but 8/32 for
  `layers.0.mlp.down_proj` (stated as its own entry under `quantization`) and `fc` left dense
  (stated nowhere but by its bf16 `weight`). Each read back by `mx.dequantize` with the module's
  own group, bits and mode, which the config must state too, held to the bf16 weights: affine
  within a step as above; fp modes within half the element format's step plus the clamp their
  scale rounding allows. These lines carry the config's `quantization`. Controls from `quantized`:
  `mlx_scale_nan` (`fc.scales[0, 1]` NaN, rewritten by `mx.save_safetensors` with MLX's
  metadata) and `mlx_bits_disagree` (config `quantization.bits`, and its `quantization_config`
  copy, say 8 of the 4-bit files).
- `hf_fp8 WORK_DIR BF16_DIR`: the bf16 folder quantized by Transformers 5.19's own fine-grained
  FP8 op (`Fp8Quantize`: F8_E4M3 `weight`, F32 `weight_scale_inv` per 128x128 block) on every
  `*_proj` and `fc` weight, with `FineGrainedFP8Config().to_dict()` as `quantization_config`, in
  `WORK_DIR/fp8_block`; read back by Transformers' own `Fp8Dequantize`.
- `modelopt WORK_DIR`: ModelOpt 0.47's DFlash exporter (`export_speculative_decoding`) on the CPU:
  a two-layer DFlash draft ModelOpt builds for a small Qwen3 target (`mtsp.convert`, seeded),
  exported unquantized (`bf16`) and after `mtq.quantize` with `NVFP4_DEFAULT_CFG` (`nvfp4`),
  `W4A16_NVFP4_CFG` (`w4a16_nvfp4`: no input scales) and `FP8_DEFAULT_CFG` (`fp8`), calibrated on
  random inputs. config.json's `quantization_config` is
  ModelOpt's own object (producer and `quantization`, no `quant_method`), with
  `hf_quant_config.json` beside it. Each quantized export is read back by ModelOpt's own
  `NVFP4QTensor` / `FP8QTensor` dequantization and held to the bf16 export within a step of each
  block.

Each file or folder written is one JSON line: `{"case", "path", "readback"}`, where `readback` is
`"ok"`, or what the library's own reading found wrong.
"""

import json
import os
import sys
from collections import OrderedDict
from pathlib import Path


def emit(case, path, readback="ok", **extra):
    print(json.dumps({"case": case, "path": str(path), "readback": readback, **extra}), flush=True)


# ---------------------------------------------------------------------------------------------
# torch.save: mask_embedding.pt


class Touch:
    """Unpickled with code execution, runs `touch PATH`."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def mask(work: Path, hidden: int, mask_id: int, witness: str) -> int:
    import torch

    torch.manual_seed(47)
    base = torch.randn(hidden, dtype=torch.float32) * 0.02
    good = {
        "dict_f32": (dict, mask_id, base.clone()),
        "dict_bf16": (dict, mask_id, base.to(torch.bfloat16)),
        "ordered_f32": (OrderedDict, mask_id, base.clone()),
        "ordered_bf16": (OrderedDict, mask_id, base.to(torch.bfloat16)),
    }
    nan = base.clone()
    nan[3] = float("nan")
    bad = {
        "wrong_id": (dict, mask_id + 1, base.clone()),
        "wrong_length": (dict, mask_id, torch.cat([base, torch.tensor([0.5])])),
        "nan": (dict, mask_id, nan),
    }
    for case, (kind, mid, emb) in {**good, **bad}.items():
        path = work / case / "mask_embedding.pt"
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(kind([("mask_token_id", mid), ("embedding", emb)]), path)
        back = torch.load(path, weights_only=True)
        wrong = []
        if type(back) is not kind:
            wrong.append(f"read back as {type(back).__name__}, not {kind.__name__}")
        if back.get("mask_token_id") != mid:
            wrong.append(f"mask_token_id read back as {back.get('mask_token_id')!r}")
        e = back.get("embedding")
        if not isinstance(e, torch.Tensor) or e.dtype != emb.dtype or e.shape != emb.shape:
            wrong.append(f"embedding read back as {e!r}")
        elif not torch.equal(torch.nan_to_num(e, nan=7.0), torch.nan_to_num(emb, nan=7.0)):
            wrong.append("embedding values differ from those saved")
        emit(
            case,
            path,
            "; ".join(wrong) or "ok",
            mask_token_id=mid,
            dtype=str(emb.dtype).removeprefix("torch."),
            values=[None if v != v else float(v) for v in emb.float().tolist()],
        )

    path = work / "malicious" / "mask_embedding.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"mask_token_id": Touch(witness), "embedding": base.clone()}, path)
    # torch's own safe reader refuses it too, and creates nothing.
    try:
        torch.load(path, weights_only=True)
        readback = "torch.load(weights_only=True) accepted it"
    except Exception as e:  # noqa: BLE001 (any refusal is the answer)
        readback = "ok" if "system" in str(e) else f"refused for another reason: {e}"
    if os.path.exists(witness):
        readback = f"{witness} exists after torch's safe load"
    emit("malicious", path, readback)
    return 0


# ---------------------------------------------------------------------------------------------
# speculators 0.9.0: the model classes and save_pretrained


def randomise(model, seed):
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.state_dict().items():
            if not p.is_floating_point():
                continue
            if p.dim() == 1 and name.endswith("norm.weight"):
                p.copy_(1.0 + 0.01 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.02 * torch.randn(p.shape, generator=g))


def speculators(work: Path, zlab_dflash: Path, zlab_dflash2: Path) -> int:
    import torch
    from safetensors.torch import save_file
    from transformers.models.qwen3.configuration_qwen3 import Qwen3Config

    from speculators.config import SpeculatorsConfig, VerifierConfig
    from speculators.models.dflash import DFlashDraftModel, DFlashSpeculatorConfig
    from speculators.models.dflash2 import DFlash2DraftModel, DFlash2SpeculatorConfig
    from speculators.proposals.greedy import GreedyTokenProposalConfig

    def layer_config(zlab):
        keep = (
            "vocab_size hidden_size intermediate_size num_hidden_layers num_attention_heads "
            "num_key_value_heads head_dim rms_norm_eps max_position_embeddings attention_bias "
            "layer_types sliding_window tie_word_embeddings rope_theta"
        ).split()
        fields = {k: zlab[k] for k in keep if k in zlab}
        # Qwen3Config keeps sliding_window only with use_sliding_window: a draft with sliding layers
        # states both, as a verifier config with sliding layers does.
        fields["use_sliding_window"] = "sliding_attention" in zlab.get("layer_types", [])
        return Qwen3Config(**fields)

    def build(zlab, cls, config_cls, draft_vocab=None, **family):
        dflash = zlab.get("dflash_config", {})
        block = dflash.get("block_size", zlab.get("block_size"))
        tl = layer_config(zlab)
        config = config_cls(
            transformer_layer_config=tl,
            draft_vocab_size=draft_vocab or tl.vocab_size,
            block_size=block,
            # speculators counts the embedding output as layer 0: z-lab's ids plus one.
            aux_hidden_state_layer_ids=[i + 1 for i in dflash["target_layer_ids"]],
            mask_token_id=dflash["mask_token_id"],
            speculators_config=SpeculatorsConfig(
                algorithm=config_cls.model_fields["speculators_model_type"].default,
                proposal_methods=[GreedyTokenProposalConfig(speculative_tokens=block - 1)],
                default_proposal_method="greedy",
                verifier=VerifierConfig(
                    name_or_path=str(work / "verifier"), architectures=["Qwen3ForCausalLM"]
                ),
            ),
            **family,
        )
        config.transformer_layer_config._attn_implementation = "eager"
        return cls(config=config)

    z1 = json.loads((zlab_dflash / "config.json").read_text())
    # The verifier from_pretrained reads the embedding, head and final norm from: a local folder
    # (speculators fetches a hub id from the network, which a test does not reach).
    verifier = work / "verifier"
    verifier.mkdir(parents=True, exist_ok=True)
    tl = layer_config(z1)
    (verifier / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["Qwen3ForCausalLM"],
                "model_type": "qwen3",
                "vocab_size": tl.vocab_size,
                "hidden_size": tl.hidden_size,
                "num_hidden_layers": z1.get("num_target_layers", 8),
            }
        )
    )
    g = torch.Generator().manual_seed(46)
    save_file(
        {
            "model.embed_tokens.weight": 0.02 * torch.randn(tl.vocab_size, tl.hidden_size, generator=g),
            "lm_head.weight": 0.02 * torch.randn(tl.vocab_size, tl.hidden_size, generator=g),
            "model.norm.weight": torch.ones(tl.hidden_size),
        },
        str(verifier / "model.safetensors"),
    )
    z2 = json.loads((zlab_dflash2 / "config.json").read_text())
    d2 = z2.get("dflash_config", {})
    fam2 = {
        k: d2.get(k, z2.get(k))
        for k in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k")
        if d2.get(k, z2.get(k)) is not None
    }
    drafts = {
        "dflash": lambda: build(z1, DFlashDraftModel, DFlashSpeculatorConfig),
        "dflash2": lambda: build(z2, DFlash2DraftModel, DFlash2SpeculatorConfig, **fam2),
        "reduced": lambda: build(z1, DFlashDraftModel, DFlashSpeculatorConfig, draft_vocab=500),
    }
    for seed, (case, make) in enumerate(drafts.items()):
        model = make()
        randomise(model, seed)
        if case == "reduced":
            # Draft token i is target token 2i: d2t holds the offsets, t2d marks the even ids.
            model.d2t.copy_(torch.arange(500, dtype=torch.long))
            t2d = torch.zeros_like(model.t2d)
            t2d[0::2] = True
            model.t2d.copy_(t2d)
        model = model.to(torch.bfloat16)
        path = work / case
        model.save_pretrained(str(path))
        saved = {
            k: v
            for k, v in model.state_dict().items()
            if k not in model._keys_to_ignore_on_save
        }
        back = type(model).from_pretrained(str(path))
        theirs = back.state_dict()
        wrong = [
            k for k, v in saved.items() if k not in theirs or not torch.equal(theirs[k].to(v.dtype), v)
        ]
        readback = f"from_pretrained read these back otherwise: {wrong}" if wrong else "ok"
        emit(case, path, readback)

    # `speculators convert --algorithm dflash`'s converter, from the z-lab folder itself: the body's
    # tensors copied as they are (compared bit for bit), validated by its own from_pretrained.
    from safetensors.torch import load_file

    from speculators.convert.dflash.converter import DFlashConverter

    path = work / "converted"
    DFlashConverter().convert(
        str(zlab_dflash), str(path), base_model=str(verifier), validate=True
    )
    source = load_file(str(zlab_dflash / "model.safetensors"))
    converted = load_file(str(path / "model.safetensors"))
    wrong = [k for k, v in source.items() if k not in converted or not torch.equal(converted[k], v)]
    emit("converted", path, f"the converter changed {wrong}" if wrong else "ok")
    return 0


# ---------------------------------------------------------------------------------------------
# compressed-tensors 0.20: pack-quantized


SCHEMES = {
    "w4_group32_sym": (4, "group", 32, True),
    "w4_group128_asym": (4, "group", 128, False),
    "w4_channel_sym": (4, "channel", None, True),
    "w4_channel_asym": (4, "channel", None, False),
    "w8_channel_sym": (8, "channel", None, True),
}


def linear_module(weights):
    """A module tree holding every tensor of a flat state dict; 2-D `*_proj`/`fc` weights as Linears."""
    import torch
    from torch import nn

    root = nn.Module()
    for name, t in weights.items():
        *path, leaf = name.split(".")
        m = root
        for part in path:
            if not hasattr(m, part):
                m.add_module(part, nn.Module())
            m = getattr(m, part)
        m.register_parameter(leaf, nn.Parameter(t.clone(), requires_grad=False))
    for mname, m in list(root.named_modules()):
        w = getattr(m, "weight", None)
        is_linear = mname.endswith("_proj") or mname.endswith("fc") or mname == "lm_head"
        if is_linear and isinstance(w, torch.Tensor) and w.dim() == 2 and not list(m.children()):
            lin = nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=w.dtype)
            lin.weight = nn.Parameter(w.data, requires_grad=False)
            *parent, child = mname.split(".")
            p = root.get_submodule(".".join(parent)) if parent else root
            setattr(p, child, lin)
    return root


def unpack(packed, bits, cols):
    """The gate's reading (spec 17.1): element j of a row at bit j * bits, offset 2^(bits-1)."""
    import torch

    words = packed.to(torch.int64) & 0xFFFFFFFF
    per = 32 // bits
    shifts = torch.arange(per, dtype=torch.int64) * bits
    values = (words.unsqueeze(-1) >> shifts) & ((1 << bits) - 1)
    values = values.reshape(packed.shape[0], -1)[:, :cols]
    return values - (1 << (bits - 1))


def compress_and_save(model, fmt, path, bf16_dir):
    """compressed-tensors' own compression of `model` in `fmt`, saved as llm-compressor saves it:
    the state dict, the bf16 folder's config.json, and `update_config`'s quantization_config."""
    import shutil

    from safetensors.torch import save_file

    from compressed_tensors.compressors import ModelCompressor

    compressor = ModelCompressor.from_pretrained_model(model, fmt)
    compressor.compress_model(model)
    path.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(bf16_dir / "config.json", path / "config.json")
    compressor.update_config(str(path))
    return path


def compressed(work: Path, bf16_dir: Path) -> int:
    import shutil

    from safetensors.torch import load_file, save_file

    from compressed_tensors.quantization import QuantizationConfig, apply_quantization_config
    from compressed_tensors.quantization.utils import calculate_qparams

    original = load_file(str(bf16_dir / "model.safetensors"))
    for case, (bits, strategy, group, symmetric) in SCHEMES.items():
        weights_args = {
            "num_bits": bits,
            "type": "int",
            "symmetric": symmetric,
            "strategy": strategy,
            "group_size": group,
            "dynamic": False,
            "observer": "minmax",
        }
        qconfig = QuantizationConfig(
            config_groups={"group_0": {"targets": ["Linear"], "weights": weights_args}},
            format="pack-quantized",
            ignore=[],
        )
        model = linear_module(original)
        apply_quantization_config(model, qconfig)
        # What llm-compressor's min/max observer computes, by compressed-tensors' own qparams.
        for _, m in model.named_modules():
            scheme = getattr(m, "quantization_scheme", None)
            if scheme is None:
                continue
            w = m.weight.data.float()
            n, k = w.shape
            g = k if strategy == "channel" else group
            blocks = w.reshape(n, k // g, g)
            scale, zp = calculate_qparams(blocks.amin(-1), blocks.amax(-1), scheme.weights)
            m.weight_scale.data.copy_(scale.to(m.weight_scale.dtype).reshape(m.weight_scale.shape))
            if hasattr(m, "weight_zero_point"):
                m.weight_zero_point.data.copy_(
                    zp.to(m.weight_zero_point.dtype).reshape(m.weight_zero_point.shape)
                )
        path = compress_and_save(model, "pack-quantized", work / case, bf16_dir)
        emit(case, path, readback_compressed(path, original, qconfig, bits, strategy, group))

    # Controls, from the first scheme's folder.
    first = work / "w4_group32_sym"
    for case, edit in {
        "scale_nan": lambda s: s["fc.weight_scale"].__setitem__((0, 3), float("nan")),
        "packed_truncated": lambda s: s.__setitem__(
            "fc.weight_packed", s["fc.weight_packed"][:, :-1].contiguous()
        ),
    }.items():
        path = work / case
        shutil.copytree(first, path)
        state = load_file(str(path / "model.safetensors"))
        edit(state)
        save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
        emit(case, path, "ok")

    compressed_float(work, bf16_dir, original)
    return 0


# compressed-tensors' own float presets, each with the format llm-compressor saves it in.
FLOAT_PRESETS = {
    "fp8_tensor": ("FP8", "float-quantized"),
    "fp8_channel": ("FP8_DYNAMIC", "float-quantized"),
    "fp8_block": ("FP8_BLOCK", "float-quantized"),
    "nvfp4a16": ("NVFP4A16", "nvfp4-pack-quantized"),
    "nvfp4": ("NVFP4", "nvfp4-pack-quantized"),
}

# The static activation range the input scales are calibrated to (no forward pass is run):
# 0.02 * 448, so FP8's tensor input scale is 0.02 and NVFP4's input global scale 448 * 6 / 8.96.
ACTIVATION_AMAX = 8.96


def observed_minmax(w, args):
    """Min and max over each of the weight's quantization blocks, as llm-compressor's min/max
    observer reduces them for the strategy: whole tensor, row, 128x128 block, or group (the
    draft's dimensions are multiples of 128, so no block is padded)."""
    strategy = str(args.strategy.value if hasattr(args.strategy, "value") else args.strategy)
    n, k = w.shape
    if strategy == "tensor":
        blocks = w.reshape(1, 1, -1)
    elif strategy == "channel":
        blocks = w.reshape(n, 1, k)
    elif strategy == "block":
        bn, bk = args.block_structure
        blocks = w.reshape(n // bn, bn, k // bk, bk).transpose(1, 2).reshape(n // bn, k // bk, -1)
    else:  # group, tensor_group
        blocks = w.reshape(n, k // args.group_size, args.group_size)
    return blocks.amin(-1), blocks.amax(-1)


def compressed_float(work: Path, bf16_dir: Path, original) -> None:
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    from compressed_tensors.quantization import QuantizationConfig, apply_quantization_config
    from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam

    for case, (preset, fmt) in FLOAT_PRESETS.items():
        # A preset name as the group's key is how compressed-tensors expands it into its scheme.
        qconfig = QuantizationConfig(config_groups={preset: ["Linear"]}, format=fmt, ignore=[])
        model = linear_module(original)
        apply_quantization_config(model, qconfig)
        amax = torch.tensor([ACTIVATION_AMAX])
        for _, m in model.named_modules():
            scheme = getattr(m, "quantization_scheme", None)
            if scheme is None:
                continue
            w = m.weight.data.float()
            lo, hi = observed_minmax(w, scheme.weights)
            gscale = None
            if hasattr(m, "weight_global_scale"):
                # NVFP4: the tensor's global scale first, then group scales relative to it.
                gscale = generate_gparam(w.amin().reshape(1), w.amax().reshape(1))
                m.weight_global_scale.data.copy_(gscale)
            scale, _ = calculate_qparams(lo, hi, scheme.weights, global_scale=gscale)
            m.weight_scale.data.copy_(scale.to(m.weight_scale.dtype).reshape(m.weight_scale.shape))
            if hasattr(m, "input_global_scale"):
                m.input_global_scale.data.copy_(generate_gparam(-amax, amax))
            if hasattr(m, "input_scale"):
                iscale, _ = calculate_qparams(-amax, amax, scheme.input_activations)
                iscale = iscale.to(m.input_scale.dtype).reshape(m.input_scale.shape)
                m.input_scale.data.copy_(iscale)
        path = compress_and_save(model, fmt, work / case, bf16_dir)
        emit(case, path, readback_float(path, original, qconfig.config_groups[preset], fmt))

    def set_byte(name, index, byte):
        return lambda s: s[name].view(torch.uint8).__setitem__(index, byte)

    # Controls. 0x7f is NaN in E4M3 (S.1111.111), the only NaN encoding it has.
    for case, (source, edit) in {
        "fp8_weight_nan": ("fp8_channel", set_byte("fc.weight", (0, 5), 0x7F)),
        "fp8_scale_zero": (
            "fp8_channel", lambda s: s["fc.weight_scale"].__setitem__((2, 0), 0)
        ),
        "nvfp4_global_scale_zero": (
            "nvfp4a16", lambda s: s["fc.weight_global_scale"].zero_()
        ),
        "nvfp4_scale_nan": ("nvfp4a16", set_byte("fc.weight_scale", (1, 2), 0x7F)),
    }.items():
        path = work / case
        shutil.copytree(work / source, path)
        state = load_file(str(path / "model.safetensors"))
        edit(state)
        save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
        emit(case, path, "ok")


def readback_float(path, original, scheme, fmt):
    import torch
    from safetensors.torch import load_file

    from compressed_tensors.compressors.naive_quantized.base import FloatQuantizationCompressor
    from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor
    from compressed_tensors.compressors.nvfp4.helpers import unpack_fp4_from_uint8

    state = load_file(str(path / "model.safetensors"))
    nvfp4 = fmt == "nvfp4-pack-quantized"
    modules = sorted(
        k.removesuffix(".weight_scale") for k in state if k.endswith(".weight_scale")
    )
    if not modules:
        return "no module was stored quantized"
    wrong = []
    for module in modules:
        local = {
            k.removeprefix(module + "."): v for k, v in state.items() if k.startswith(module + ".")
        }
        w = original[module + ".weight"].float()
        n, k = w.shape
        scale = local["weight_scale"].float().reshape(-1, local["weight_scale"].shape[-1])
        # Each scale over its block of the weight (one, a row, 128x128, or 16 columns).
        scale = scale.repeat_interleave(n // scale.shape[0], 0)
        scale = scale.repeat_interleave(k // scale.shape[1], 1)
        if nvfp4:
            theirs = NVFP4PackedCompressor.decompress(local, scheme)["weight"]
            q = unpack_fp4_from_uint8(local["weight_packed"], n, k, torch.float32)
            scale = scale / local["weight_global_scale"].float()
        else:
            theirs = FloatQuantizationCompressor.decompress(local, scheme)["weight"]
            q = local["weight"].float()
        dtype, theirs = theirs.dtype, theirs.float()
        ours = (q * scale).to(dtype).float()
        if not torch.equal(theirs, ours):
            worst = float((theirs - ours).abs().max())
            wrong.append(f"{module}: decompress differs from scale * q by up to {worst}")
            continue
        x = (w / scale).abs()
        if nvfp4:
            # Half an E2M1 step at x = w / (scale / global): 0.25 below 1 (steps of 0.5 from 0),
            # x / 4 from 1 to 6 (one mantissa bit); a group's max lies at most at 6 * (1 + 2^-4)
            # after its E4M3 scale's rounding, clamped to 6: also within x / 4.
            half = torch.clamp(x / 4, min=0.25)
        else:
            # Half an E4M3 step: 2^-4 of x for normals (3 mantissa bits), 2^-10 among the
            # subnormals (spacing 2^-9 below 2^-6); the clamp at 448, after the bf16 scale's
            # rounding, is 2^-9 of the value at most.
            half = torch.clamp(x * 2.0**-4, min=2.0**-10)
        # Plus the result's own rounding to bf16.
        bound = scale * half + w.abs() * 2.0**-8 + 1e-7
        over = (theirs - w).abs() > bound
        if over.any():
            i = int(over.flatten().nonzero()[0])
            wrong.append(f"{module}: element {i} is {float((theirs - w).flatten()[i])} from bf16")
    return "; ".join(wrong) or "ok"


def readback_compressed(path, original, qconfig, bits, strategy, group):
    import torch
    from safetensors.torch import load_file

    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationScheme

    state = load_file(str(path / "model.safetensors"))
    weights = qconfig.config_groups["group_0"].weights
    scheme = QuantizationScheme(targets=["Linear"], weights=weights)
    wrong = []
    modules = sorted(k.removesuffix(".weight_packed") for k in state if k.endswith(".weight_packed"))
    if not modules:
        return "no module was stored packed"
    for module in modules:
        local = {
            k.removeprefix(module + "."): v for k, v in state.items() if k.startswith(module + ".")
        }
        theirs = PackedQuantizationCompressor.decompress(local, scheme)["weight"]
        dtype, theirs = theirs.dtype, theirs.float()
        n, k = [int(d) for d in local["weight_shape"]]
        g = k if strategy == "channel" else group
        scale = local["weight_scale"].float().repeat_interleave(g, dim=1)[:, :k]
        q = unpack(local["weight_packed"], bits, k).float()
        if "weight_zero_point" in local:
            zp = unpack(local["weight_zero_point"].t().contiguous(), bits, n).t().float()
            zero = zp.repeat_interleave(g, dim=1)[:, :k]
        else:
            zero = torch.zeros_like(q)
        # In f32, rounded once to the scale's type (compressed-tensors returns the scale's dtype).
        ours = (scale * (q - zero)).to(dtype).float()
        if not torch.equal(theirs, ours):
            worst = float((theirs - ours).abs().max())
            wrong.append(f"{module}: decompress differs from scale * (q - zero) by up to {worst}")
            continue
        w = original[module + ".weight"].float()
        # Half a step of the group, plus the scale's own bf16 rounding over the code's reach and the
        # result's own rounding to bf16. Asymmetric, the zero point is rounded to an integer too, so
        # a value at the end of its group's range, clamped to the last code, may lie up to another
        # half step away: compressed-tensors' own output does (spec 17.2's half step holds for the
        # symmetric schemes only).
        steps = 0.5 if "weight_zero_point" not in local else 1.0
        reach = (q - zero).abs() + 0.5
        bound = scale * steps + scale * reach * 2.0**-8 + w.abs() * 2.0**-8 + 1e-7
        over = (theirs - w).abs() > bound
        if over.any():
            i = int(over.flatten().nonzero()[0])
            wrong.append(f"{module}: element {i} is {float((theirs - w).flatten()[i])} from bf16")
    return "; ".join(wrong) or "ok"


# ---------------------------------------------------------------------------------------------
# MLX: mlx-lm's save_model, plain and quantized


def mlx(work: Path, bf16_dir: Path) -> int:
    import shutil

    import mlx.core as mx
    import mlx.nn as nn
    from mlx_lm.utils import quantize_model, save_config, save_model

    weights = mx.load(str(bf16_dir / "model.safetensors"))
    config = json.loads((bf16_dir / "config.json").read_text())

    def build():
        root = nn.Module()
        for name, arr in weights.items():
            *path, leaf = name.split(".")
            m = root
            for part in path:
                if part not in m:
                    m[part] = nn.Module()
                m = m[part]
            m[leaf] = arr
        # Linears (as mlx-lm's model classes build them), so quantize_model finds them.
        for mname, m in list(root.named_modules()):
            last = mname.rsplit(".", 1)[-1]
            if (last.endswith("_proj") or last in ("fc", "lm_head")) and "weight" in m:
                w = m["weight"]
                lin = nn.Linear(w.shape[1], w.shape[0], bias=False)
                lin.weight = w
                *parent, child = mname.split(".")
                p = root
                for part in parent:
                    p = p[part]
                p[child] = lin
        return root

    plain = work / "plain"
    model = build()
    save_model(plain, model)
    save_config(dict(config), plain / "config.json")
    back = mx.load(str(plain / "model.safetensors"))
    wrong = [k for k, v in weights.items() if k not in back or not mx.array_equal(back[k], v)]
    extra = sorted(set(back) - set(weights))
    emit("plain", plain, f"read back otherwise: {wrong}, extra {extra}" if wrong or extra else "ok")

    quantized = work / "quantized"
    model, qconfig = quantize_model(build(), dict(config), 64, 4)
    save_model(quantized, model)
    save_config(qconfig, quantized / "config.json")
    back = mx.load(str(quantized / "model.safetensors"))
    wrong = []
    for name in sorted(k.removesuffix(".scales") for k in back if k.endswith(".scales")):
        w = mx.dequantize(
            back[name + ".weight"], back[name + ".scales"], back[name + ".biases"], 64, 4
        ).astype(mx.float32)
        ref = weights[name + ".weight"].astype(mx.float32)
        step = mx.repeat(back[name + ".scales"].astype(mx.float32), 64, axis=1)
        # One step, plus the bf16 rounding of the scale (over 15 codes), the bias and the result.
        # Not half a step: MLX's affine quantizer makes the group's larger end exact (it refits the
        # scale so that end is a whole number of steps from zero), which narrows the range by up to
        # a step, and values at the other end are clamped to the last code.
        bias = mx.repeat(mx.abs(back[name + ".biases"].astype(mx.float32)), 64, axis=1)
        bound = mx.abs(step) * (1 + 16 * 2.0**-8) + (mx.abs(ref) + bias) * 2.0**-8 + 1e-6
        if mx.any(mx.abs(w - ref) > bound).item():
            wrong.append(name)
    readback = "ok" if not wrong else f"dequantized beyond one step: {wrong}"
    emit("quantized", quantized, readback, quantized_modules=len([k for k in back if k.endswith(".scales")]))

    def override(path, module):
        # Per-module parameters, as mlx-lm's mixed recipes return them; fc left dense.
        if path == "layers.0.mlp.down_proj":
            return {"group_size": 32, "bits": 8, "mode": "affine"}
        return path != "fc"

    for case, (mode, group, bits, predicate) in MLX_CASES.items():
        path = work / case
        model, qconfig = quantize_model(
            build(), dict(config), group, bits, mode=mode,
            quant_predicate=override if predicate else None,
        )
        save_model(path, model)
        save_config(qconfig, path / "config.json")
        written = json.loads((path / "config.json").read_text())
        readback = readback_mlx(path, model, weights, written)
        emit(case, path, readback, quantization=written.get("quantization"))

    # Controls, from the 4-bit folder; the file rewritten as MLX writes it.
    nan = work / "mlx_scale_nan"
    shutil.copytree(quantized, nan)
    # Read from the original: mx.load maps the file lazily, so saving over the file it read from
    # would write arrays still being read out of it.
    arrays = mx.load(str(quantized / "model.safetensors"))
    scales = arrays["fc.scales"]
    flat = mx.arange(scales.size).reshape(scales.shape)
    arrays["fc.scales"] = mx.where(flat == 1, mx.array(float("nan"), dtype=scales.dtype), scales)
    mx.save_safetensors(str(nan / "model.safetensors"), arrays, metadata={"format": "mlx"})
    emit("mlx_scale_nan", nan, "ok")

    disagree = work / "mlx_bits_disagree"
    shutil.copytree(quantized, disagree)
    written = json.loads((disagree / "config.json").read_text())
    # mlx-lm writes the same parameters under both keys; both say 8 so neither reader sees 4.
    for key in ("quantization", "quantization_config"):
        if key in written:
            written[key]["bits"] = 8
    (disagree / "config.json").write_text(json.dumps(written, indent=4))
    emit("mlx_bits_disagree", disagree, "ok")
    return 0


# mode, group size, bits (None: the mode's default, as mlx-lm fills it), per-module override.
MLX_CASES = {
    "affine_2_128": ("affine", 128, 2, False),
    "affine_3_32": ("affine", 32, 3, False),
    "affine_6_64": ("affine", 64, 6, False),
    "affine_8_32": ("affine", 32, 8, False),
    "mxfp4": ("mxfp4", None, None, False),
    "nvfp4": ("nvfp4", None, None, False),
    "mxfp8": ("mxfp8", None, None, False),
    "override": ("affine", 64, 4, True),
}


def readback_mlx(path, model, weights, written):
    """Each quantized module dequantized by mx.dequantize with the module's own parameters, which
    the written config must state too (its per-module entry, else its top level)."""
    import mlx.core as mx
    import mlx.nn as nn

    back = mx.load(str(path / "model.safetensors"))
    quant = written.get("quantization", {})
    wrong = []
    for name, m in model.named_modules():
        if not isinstance(m, nn.QuantizedLinear):
            dense = back.get(name + ".weight")
            if isinstance(m, nn.Linear) and not mx.array_equal(dense, weights[name + ".weight"]):
                wrong.append(f"{name}: left dense but not stored as it was")
            continue
        gs, bits, mode = m.group_size, m.bits, m.mode
        stated = quant.get(name, quant)
        said = (stated.get("group_size"), stated.get("bits"), stated.get("mode", "affine"))
        if said != (gs, bits, mode):
            wrong.append(f"{name}: config states {stated}, module is {mode} {bits}/{gs}")
        biases = back.get(name + ".biases")
        w = mx.dequantize(
            back[name + ".weight"], back[name + ".scales"], biases, gs, bits, mode=mode
        ).astype(mx.float32)
        ref = weights[name + ".weight"].astype(mx.float32)
        scales = back[name + ".scales"]
        if mode == "affine":
            step = mx.abs(mx.repeat(scales.astype(mx.float32), gs, axis=1))
            bias = mx.abs(mx.repeat(biases.astype(mx.float32), gs, axis=1))
            # As for `quantized`: one step (the refit scale and the clamp), the scale's bf16
            # rounding over 2^bits codes, the bias's and the result's.
            bound = step * (1 + 2**bits * 2.0**-8) + (mx.abs(ref) + bias) * 2.0**-8 + 1e-6
        else:
            bound = fp_bound(mode, gs, scales, ref)
        over = mx.abs(w - ref) > bound
        if mx.any(over).item():
            i = int(mx.argmax(over.flatten()).item())
            wrong.append(f"{name}: element {i} is {(w - ref).flatten()[i].item()} from bf16")
    return "; ".join(wrong) or "ok"


def fp_bound(mode, gs, scales, ref):
    """How far the fp modes' own rounding may move each weight, from the decoded group scale s
    and x = |w| / s: half the element format's step at x, plus the clamp past its top code."""
    import mlx.core as mx

    if mode.startswith("mx"):
        s = mx.power(2.0, scales.astype(mx.float32) - 127)  # E8M0: a bare exponent
    else:
        s = mx.from_fp8(scales, mx.float32)  # nvfp4: E4M3
    s = mx.repeat(s, gs, axis=1)
    w = mx.abs(ref)
    top = 448.0 if mode == "mxfp8" else 6.0
    x = w / s
    if mode == "mxfp8":
        half = mx.maximum(mx.minimum(x, top) * 2.0**-4, 2.0**-10)  # E4M3: 3 mantissa bits
    else:
        half = mx.maximum(mx.minimum(x, top) / 4, 0.25)  # E2M1: 0.5 apart below 2, 1 bit above
    excess = mx.maximum(w - top * s, 0)
    if mode.startswith("mx"):
        # MLX rounds a group's amax / top to a power of two (not down, as the OCP MX spec's
        # floor does): down only when its mantissa is below about 1.4, so the group's largest
        # element reaches less than 1.5 top and is clamped by less than half the top code.
        allowed = top * s / 2
    else:
        # nvfp4 (no global scale): s is amax / 6 rounded to E4M3, so the clamp is at most six
        # half E4M3 steps at amax / 6: 2^-4 of amax, or 6 * 2^-10 among E4M3's subnormals,
        # where small groups' scales fall.
        amax = mx.repeat(mx.max(w.reshape(w.shape[0], -1, gs), axis=-1), gs, axis=1)
        allowed = mx.maximum(amax * 2.0**-4, 6 * 2.0**-10)
    # Past the allowed clamp nothing is: the bound then fails for that element.
    bound = s * half + mx.where(excess <= allowed, excess, 0) + w * 2.0**-8 + 1e-7
    return bound


# ---------------------------------------------------------------------------------------------
# Transformers' fine-grained FP8


def hugging_face_fp8(work: Path, bf16_dir: Path) -> int:
    """The bf16 folder quantized by Transformers' own fine-grained FP8 op (`Fp8Quantize`, the
    quantizer's conversion of a weight into FP8 and its 128x128 block `weight_scale_inv`: quantizing
    a model with it needs a GPU, the op itself does not), every 2-D `*_proj` and `fc` weight, and
    `FineGrainedFP8Config().to_dict()` as config.json's `quantization_config`, as `save_pretrained`
    writes it. Read back by Transformers' own `Fp8Dequantize` and held to the bf16 weights within
    E4M3's half step (a sixteenth of the value) plus the scale's subnormal step."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file
    from transformers import FineGrainedFP8Config
    from transformers.integrations.finegrained_fp8 import Fp8Dequantize, Fp8Quantize
    from transformers.quantizers.quantizer_finegrained_fp8 import FineGrainedFP8HfQuantizer

    config = FineGrainedFP8Config()
    quantizer = FineGrainedFP8HfQuantizer(config)
    quantize, dequantize = Fp8Quantize(quantizer), Fp8Dequantize(quantizer)
    original = load_file(str(bf16_dir / "model.safetensors"))
    out = {}
    for key, value in original.items():
        module = key.removesuffix(".weight")
        linear = key.endswith(".weight") and value.dim() == 2 and (module.endswith("_proj") or module == "fc")
        out.update(quantize._quantize_one(key, value) if linear else {key: value})
    path = work / "fp8_block"
    path.mkdir(parents=True, exist_ok=True)
    save_file(out, str(path / "model.safetensors"), metadata={"format": "pt"})
    stated = json.loads((bf16_dir / "config.json").read_text())
    stated["quantization_config"] = json.loads(json.dumps(config.to_dict()))
    (path / "config.json").write_text(json.dumps(stated, indent=2))
    wrong = []
    modules = sorted(k.removesuffix(".weight_scale_inv") for k in out if k.endswith(".weight_scale_inv"))
    for name in modules:
        ref = original[name + ".weight"].float()
        scale = out[name + ".weight_scale_inv"]
        got = dequantize._dequantize_one(out[name + ".weight"], scale, torch.float32)
        step = scale.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)[: ref.shape[0], : ref.shape[1]]
        if got.shape != ref.shape or bool(((got - ref).abs() > ref.abs() / 16 + step * 2.0**-9 + 1e-7).any()):
            wrong.append(name)
    readback = "ok" if not wrong else f"dequantized beyond E4M3's step: {wrong}"
    emit("fp8_block", path, readback, quantized_modules=len(modules))
    return 0


# ---------------------------------------------------------------------------------------------
# ModelOpt 0.47: its DFlash exporter (export_speculative_decoding)


MODELOPT_CONFIGS = {
    "nvfp4": "NVFP4_DEFAULT_CFG",
    "w4a16_nvfp4": "W4A16_NVFP4_CFG",
    "fp8": "FP8_DEFAULT_CFG",
}

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def modelopt(work: Path) -> int:
    """A two-layer DFlash draft of a small Qwen3 target, as ModelOpt builds one (`mtsp.convert`,
    seeded), exported by ModelOpt's DFlash exporter unquantized (`bf16`, the source) and after
    `mtq.quantize` with each config (on the CPU, calibrated on random inputs). Read back: each
    quantized Linear dequantized by ModelOpt's own `NVFP4QTensor` / `FP8QTensor` lies within a
    step of its block (NVFP4: twice the block's scale, E2M1's widest step; FP8: an eighth of the
    value, E4M3's relative step, plus the scale's subnormal step) of the bf16 export."""
    import torch
    import transformers

    import modelopt.torch.quantization as mtq
    import modelopt.torch.speculative as mtsp
    from modelopt.torch.export import export_speculative_decoding
    from modelopt.torch.quantization.qtensor import FP8QTensor, NVFP4QTensor
    from safetensors.torch import load_file

    def build():
        torch.manual_seed(0)
        target = transformers.Qwen3Config(
            vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=8,
            num_attention_heads=4, num_key_value_heads=2, head_dim=64,
            max_position_embeddings=4096, tie_word_embeddings=False,
            architectures=["Qwen3ForCausalLM"],
        )
        model = transformers.Qwen3ForCausalLM(target).to(torch.bfloat16)
        draft = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                 "head_dim": 64, "intermediate_size": 512}
        mtsp.convert(model, [("dflash", {"dflash_block_size": 8, "dflash_mask_token_id": 999,
                                         "dflash_architecture_config": draft})])
        return model

    source = work / "bf16"
    model = build()
    model.eval()
    export_speculative_decoding(model, dtype=torch.bfloat16, export_dir=source)
    emit("bf16", source)
    original = load_file(str(source / "model.safetensors"))

    for case, preset in MODELOPT_CONFIGS.items():
        model = build()
        linears = [
            m
            for name, m in model.named_modules()
            if name.startswith("dflash_module.") and isinstance(m, torch.nn.Linear)
        ]

        def calibrate(m):
            for lin in linears:
                lin(torch.randn(4, lin.in_features, dtype=torch.bfloat16))

        mtq.quantize(model, getattr(mtq, preset), calibrate)
        model.eval()
        path = work / case
        export_speculative_decoding(model, dtype=torch.bfloat16, export_dir=path)
        back = load_file(str(path / "model.safetensors"))
        modules = sorted(k.removesuffix(".weight_scale") for k in back if k.endswith(".weight_scale"))
        wrong = []
        for name in modules:
            ref = original[name + ".weight"].float()
            codes, scale = back[name + ".weight"], back[name + ".weight_scale"]
            if case.endswith("nvfp4"):
                second = back[name + ".weight_scale_2"]
                got = NVFP4QTensor(ref.shape, torch.float32, codes).dequantize(
                    torch.float32, scale=scale, double_scale=second, block_sizes={-1: 16}
                )
                bound = 2 * (scale.float() * second.float()).repeat_interleave(16, dim=1)
            else:
                got = FP8QTensor(ref.shape, torch.float32, codes).dequantize(torch.float32, scale=scale)
                bound = ref.abs() / 8 + scale.float() * 2.0**-6
            if got.shape != ref.shape or bool(((got - ref).abs() > bound + 1e-7).any()):
                wrong.append(name)
        readback = "ok" if not wrong else f"dequantized beyond a step of the bf16 export: {wrong}"
        emit(case, path, readback, quantized_modules=len(modules))
    return 0


def main() -> int:
    # Nothing is fetched: every library reads local folders only.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    command, work, args = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    work.mkdir(parents=True, exist_ok=True)
    if command == "mask":
        return mask(work, int(args[0]), int(args[1]), args[2])
    if command == "speculators":
        return speculators(work, Path(args[0]), Path(args[1]))
    if command == "compressed":
        return compressed(work, Path(args[0]))
    if command == "mlx":
        return mlx(work, Path(args[0]))
    if command == "modelopt":
        return modelopt(work)
    if command == "hf_fp8":
        return hugging_face_fp8(work, Path(args[0]))
    sys.stderr.write(f"unknown command {command}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
