"""Each draft of a manifest, loaded by the engines' own loaders: one JSON line per draft and engine.

Usage: python engines.py MANIFEST_JSON

The manifest is a list of `{"draft": NAME, "path": FOLDER}`. For each folder, three loaders run, each
as the engine runs it:

- `transformers`: z-lab's `dflash` 0.1.0 through Transformers, as `dflash/benchmark.py`
  (`load_transformers_models`) loads a draft: `AutoConfig.from_pretrained`, then
  `DFlashDraftModel` (or `DFlash2DraftModel`) `.from_pretrained(path, attn_implementation="sdpa",
  dtype=torch.bfloat16)`, with `output_loading_info=True` to read its load report.
- `mlx`: z-lab's `dflash/model_mlx.py` `load_draft`. It takes a hub id only and reads the
  `*.safetensors` and `*.json` it downloads; here its `snapshot_download` is replaced by one that
  returns the local folder, so the rest of `load_draft` (the config it reads, the model it builds,
  `model.load_weights(..., strict=True)`) runs as released.
- `dflash-mlx`: `dflash_mlx.runtime.loading.load_draft_bundle(path, lazy=False)`, which takes a
  local path (through mlx-lm's `load_model`, strict).

Each line: `{"draft", "engine", "outcome", "message", "missing", "unexpected"}`, where `outcome` is
`raised` (an exception at load; `message` is its type and text), `missing` (loaded, with weights the
loader reports missing), `unexpected` (loaded, with tensors it reports unexpected and ignored),
`clean` (loaded, nothing reported), or `unavailable` (the engine's packages do not import here;
`message` says which). Needs torch, transformers and `dflash` 0.1.0 for the first; `mlx` and
`mlx_lm` for the second; `dflash_mlx` 0.1.8 for the third.
"""

import contextlib
import json
import sys


def first_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    if len(text) > 400:
        text = text[:400] + " ..."
    return f"{type(e).__name__}: {text}"


def transformers_loader():
    import torch
    from transformers import AutoConfig
    from transformers.utils import logging as hf_logging

    from dflash.model import DFlash2DraftModel, DFlashDraftModel

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()

    def load(path):
        config = AutoConfig.from_pretrained(path)
        cls = (
            DFlash2DraftModel
            if "DFlash2DraftModel" in (config.architectures or [])
            else DFlashDraftModel
        )
        _, info = cls.from_pretrained(
            path,
            attn_implementation="sdpa",
            dtype=torch.bfloat16,
            output_loading_info=True,
        )
        return sorted(info.get("missing_keys", ())), sorted(info.get("unexpected_keys", ()))

    return load


def mlx_loader():
    import mlx.core  # noqa: F401  (the engine's runtime: unavailable without it)

    import dflash.model_mlx as zm

    def load(path):
        released = zm.snapshot_download
        zm.snapshot_download = lambda draft_id, allow_patterns=None: draft_id
        try:
            zm.load_draft(path)
        finally:
            zm.snapshot_download = released
        return [], []

    return load


def dflash_mlx_loader():
    from dflash_mlx.runtime.loading import load_draft_bundle

    def load(path):
        load_draft_bundle(path, lazy=False)
        return [], []

    return load


LOADERS = [
    ("transformers", transformers_loader),
    ("mlx", mlx_loader),
    ("dflash-mlx", dflash_mlx_loader),
]


def run(load, path):
    try:
        # Whatever an engine prints goes to stderr: stdout carries the results alone.
        with contextlib.redirect_stdout(sys.stderr):
            missing, unexpected = load(path)
    except Exception as e:  # the outcome under test: any exception at load is a refusal
        return {"outcome": "raised", "message": first_line(e), "missing": [], "unexpected": []}
    if missing:
        outcome, message = "missing", f"loaded; reported missing: {', '.join(missing)}"
    elif unexpected:
        outcome, message = "unexpected", f"loaded; reported unexpected: {', '.join(unexpected)}"
    else:
        outcome, message = "clean", "loaded"
    return {"outcome": outcome, "message": message, "missing": missing, "unexpected": unexpected}


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as f:
        manifest = json.load(f)
    loaders = []
    for engine, make in LOADERS:
        try:
            with contextlib.redirect_stdout(sys.stderr):
                loaders.append((engine, make(), None))
        except ImportError as e:
            loaders.append((engine, None, first_line(e)))
    for entry in manifest:
        for engine, load, unavailable in loaders:
            if load is None:
                result = {"outcome": "unavailable", "message": unavailable, "missing": [], "unexpected": []}
            else:
                result = run(load, entry["path"])
            print(json.dumps({"draft": entry["draft"], "engine": engine, **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
