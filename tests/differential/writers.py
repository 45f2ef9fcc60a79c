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
- `mlx WORK_DIR BF16_DIR`: the bf16 folder's tensors as an MLX module saved by mlx-lm's own
  `save_model` (`model.safetensors` plus `model.safetensors.index.json`) and `save_config`, in
  `WORK_DIR/plain`; and quantized by mlx-lm's `quantize_model` (affine, group 64, 4 bits) in
  `WORK_DIR/quantized`. Read back with `mx.load` (the plain one compared bit for bit; the quantized
  one dequantized by `mx.dequantize` and held to one step: MLX's affine quantizer refits each
  group's scale so its larger end is exact, and may clamp the other end by up to a step).

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


def compressed(work: Path, bf16_dir: Path) -> int:
    import shutil

    from safetensors.torch import load_file, save_file

    from compressed_tensors.compressors import ModelCompressor
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
        compressor = ModelCompressor.from_pretrained_model(model, "pack-quantized")
        compressor.compress_model(model)
        path = work / case
        path.mkdir(parents=True, exist_ok=True)
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
        shutil.copy(bf16_dir / "config.json", path / "config.json")
        compressor.update_config(str(path))
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
    return 0


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
    sys.stderr.write(f"unknown command {command}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
