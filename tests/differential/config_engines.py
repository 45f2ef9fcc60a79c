"""SGLang's and vLLM's own config-reading code, run on each draft of a manifest, rule by rule.

Usage: python config_engines.py MANIFEST_JSON

The manifest is a list of `{"arm": NAME, "path": DRAFT_FOLDER, "target": TARGET_FOLDER or null}`.
Neither engine is imported: both import torch, CUDA kernels and their whole runtime at module load.
Instead the functions that read a draft's config are taken from the engine's own source files (the
directories named by `DFLASH_GATE_SGLANG_SRC`, the `sglang` package directory of the 0.5.23 wheel,
and `DFLASH_GATE_VLLM_SRC`, the `vllm` package directory of 0.33.0), parsed with `ast`, and exactly
those definitions (and the module constants they use) are executed in a namespace holding the few
names they need. What stands in for the rest of the engine is a stub, and says so: a server-args
object naming the draft's folder, a tensor-parallel rank of 0, a weight loader that records the names
it is handed. Nothing of either engine is copied here: a function missing from the files is an error
(the directory is not the release the tables were read from).

The config object each engine reads is the one it builds: transformers' `AutoConfig` on the folder
(SGLang's `get_config`, vLLM's `HFConfigParser`), or, for a speculators-format folder in vLLM, the
`SpeculatorsConfig` class of vLLM's `speculators/base.py` itself, whose `from_pretrained` runs the
`update_dflash` / `update_dflash2` of `speculators/algos.py`.

One JSON line per draft, engine and rule: `{"arm", "engine", "rule", "did", "message", "value"}`, where
`rule` is a row id of the engine's table in `gate/src/loaders/tables/` (or `form`, the engine's
reading of the folder at all), and `did` is one of
- `raised`: the engine's code raised (`message` is the exception's type and text);
- `guessed`: a value the config does not state was chosen by the engine (`value`, where it could be
  computed);
- `wrongly`: the config was read into a setting that serves the draft wrong (`value` says which);
- `accepted`: the rule's code ran and neither raised nor guessed;
- `cannot_run`: the code that decides the rule could not run here (`message` says why);
- `not_asked`: a pairing rule, and the manifest gave no target;
- `unavailable`: the engine's source directory is not given (`message` names the variable).
Rows the driver does not print are decided by code it does not run (weights loaded on a GPU).

Needs transformers (the engines' own config classes); torch only to read `mask_embedding.pt`
(without it those rows are `cannot_run`).
"""

import __future__

import ast
import contextlib
import dataclasses
import io
import json
import logging
import os
import struct
import sys
import types
from numbers import Integral
from types import SimpleNamespace
from typing import Any, List, Optional, Sequence, Tuple

SGLANG_VAR = "DFLASH_GATE_SGLANG_SRC"
VLLM_VAR = "DFLASH_GATE_VLLM_SRC"

logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
LOG = logging.getLogger("config_engines")
# The rows' stream: the engines' code runs with stdout sent to stderr.
OUT = sys.stdout


class Logger(logging.LoggerAdapter):
    """The engines' loggers: `logging` with vLLM's `warning_once`/`info_once`."""

    def __init__(self):
        super().__init__(LOG, {})

    def warning_once(self, *a, **k):
        self.warning(*a)

    def info_once(self, *a, **k):
        self.info(*a)

    def debug_once(self, *a, **k):
        self.debug(*a)


def first_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    if len(text) > 300:
        text = text[:300] + " ..."
    return f"{type(e).__name__}: {text}"


# ---------------------------------------------------------------------------------------------
# Taking definitions out of an engine's source file


class Source:
    """One source file of an engine, parsed."""

    def __init__(self, root: str, rel: str):
        self.path = os.path.join(root, rel)
        with open(self.path, encoding="utf-8") as f:
            self.tree = ast.parse(f.read(), filename=self.path)

    def _find(self, dotted: str):
        """The definition `name` or `Class.method` (a node), or an error naming the file."""
        parts = dotted.split(".")
        body = self.tree.body
        node = None
        for part in parts:
            node = next(
                (
                    n
                    for n in body
                    if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part
                ),
                None,
            )
            if node is None:
                raise LookupError(f"{self.path} defines no {dotted}: not the release the tables were read from")
            body = node.body
        return node

    def constant(self, name: str):
        """A module-level assignment to `name`."""
        for n in self.tree.body:
            targets = n.targets if isinstance(n, ast.Assign) else [getattr(n, "target", None)]
            if isinstance(n, (ast.Assign, ast.AnnAssign)) and any(
                isinstance(t, ast.Name) and t.id == name for t in targets
            ):
                return n
        raise LookupError(f"{self.path} assigns no {name}: not the release the tables were read from")

    def class_bases(self, cls: str) -> set:
        """The names of the classes `cls` extends, as written."""
        return {ast.unparse(b).split(".")[-1] for b in self._find(cls).bases}

    def class_constant(self, cls: str, name: str):
        """The literal a class body assigns to `name`."""
        for n in self._find(cls).body:
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets):
                return ast.literal_eval(n.value)
        raise LookupError(f"{self.path}: {cls} assigns no {name}: not the release the tables were read from")

    def load(self, names: Sequence[str], namespace: dict, constants: Sequence[str] = ()) -> dict:
        """Executes the definitions `names` (a `Class.method` as a plain function named
        `Class.method` in the namespace, its decorators dropped) and the module constants
        `constants` in a module of their own holding `namespace`, as the module's own code: its
        namespace."""
        nodes = [self.constant(c) for c in constants]
        renamed = {}
        for dotted in names:
            node = self._find(dotted)
            if "." in dotted:
                node = ast.FunctionDef(
                    name="__m_" + dotted.replace(".", "__"),
                    args=node.args,
                    body=node.body,
                    decorator_list=[],
                    returns=None,
                    type_comment=None,
                    type_params=[],
                )
                ast.copy_location(node, self._find(dotted))
                renamed[dotted] = node.name
            nodes.append(node)
        module = ast.fix_missing_locations(ast.Module(body=nodes, type_ignores=[]))
        # The engines' files begin with `from __future__ import annotations` or evaluate annotations
        # that name their own types: as strings, none is evaluated.
        code = compile(module, self.path, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
        # A module of its own, as dataclasses look a class's module up in sys.modules.
        module_name = "engine_source." + os.path.relpath(self.path, "/").replace("/", ".")
        module_object = types.ModuleType(module_name)
        module_object.__dict__.update(namespace)
        sys.modules[module_name] = module_object
        namespace = module_object.__dict__
        exec(code, namespace)
        for dotted, name in renamed.items():
            namespace[dotted] = namespace.pop(name)
        return namespace

    def statements(self, dotted: str, mentioning: str) -> types.CodeType:
        """The top-level statements of function `dotted` whose text mentions `mentioning`, compiled."""
        node = self._find(dotted)
        picked = [s for s in node.body if mentioning in ast.unparse(s)]
        if not picked:
            raise LookupError(f"{self.path}: {dotted} has no statement mentioning {mentioning}")
        module = ast.fix_missing_locations(ast.Module(body=picked, type_ignores=[]))
        return compile(module, self.path, "exec", dont_inherit=True)

    def self_attributes(self, dotted: str) -> set:
        """The attributes `self.X = ...` function `dotted` assigns (a module's children are among
        them)."""
        node = self._find(dotted)
        out = set()
        for n in ast.walk(node):
            targets = n.targets if isinstance(n, ast.Assign) else [getattr(n, "target", None)]
            for t in targets:
                if (
                    isinstance(t, ast.Attribute)
                    and isinstance(t.value, ast.Name)
                    and t.value.id == "self"
                ):
                    out.add(t.attr)
        return out


def stub_module(name: str, **attrs) -> None:
    """A module the engine's function imports inside its body, holding `attrs`."""
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module


def base_namespace() -> dict:
    import typing

    ns = {name: getattr(typing, name) for name in typing.__all__}
    ns.update(
        dataclass=dataclasses.dataclass,
        field=dataclasses.field,
        fields=dataclasses.fields,
        Integral=Integral,
        os=os,
        io=io,
        logger=Logger(),
        logging=logging,
    )
    return ns


def torch_or_none():
    try:
        import torch

        return torch
    except ImportError:
        return None


# ---------------------------------------------------------------------------------------------
# What every engine reads of a folder


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def tensor_names(folder: str) -> List[str]:
    """The names of every tensor in the folder's `*.safetensors` files, in file order."""
    names = []
    for file in sorted(os.listdir(folder)):
        if not file.endswith(".safetensors"):
            continue
        with open(os.path.join(folder, file), "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(length))
        names.extend(k for k in header if k != "__metadata__")
    return names


def auto_config(folder: str):
    """transformers' AutoConfig on the folder, as both engines read a z-lab folder."""
    from transformers import AutoConfig

    with contextlib.redirect_stdout(sys.stderr):
        return AutoConfig.from_pretrained(folder)


def target_tokenizer(target: str):
    """The target's tokenizer, as the engine's tokenizer manager loads it (tokenizer.json)."""
    path = os.path.join(target, "tokenizer.json")
    if not os.path.exists(path):
        return None
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_file=path)


class Rows:
    def __init__(self, arm: str, engine: str):
        self.arm, self.engine = arm, engine
        self.seen = set()

    def say(self, rule: str, did: str, message: str = "", value=None) -> None:
        if rule in self.seen:
            return
        self.seen.add(rule)
        row = {
            "arm": self.arm,
            "engine": self.engine,
            "rule": rule,
            "did": did,
            "message": message,
            "value": None if value is None else str(value),
        }
        print(json.dumps(row), file=OUT, flush=True)


# ---------------------------------------------------------------------------------------------
# SGLang 0.5.23


class Sglang:
    def __init__(self, root: str):
        utils = Source(root, "srt/speculative/dflash_utils.py")
        ns = utils.load(
            [
                "_cfg_get",
                "_get_text_config",
                "_get_dflash_config",
                "_parse_optional_int",
                "DFlashDraftConfig",
                "build_target_layer_ids",
                "parse_dflash_draft_config",
            ],
            base_namespace(),
            constants=["DEFAULT_DFLASH_MASK_TOKEN"],
        )
        self.utils = ns
        # `_resolve_dflash_aux_hidden_state` imports parse_dflash_draft_config from its module.
        stub_module("sglang", __path__=[])
        stub_module("sglang.srt", __path__=[])
        stub_module("sglang.srt.speculative", __path__=[])
        stub_module(
            "sglang.srt.speculative.dflash_utils",
            parse_dflash_draft_config=ns["parse_dflash_draft_config"],
        )
        aux = Source(root, "srt/model_executor/model_runner_components/spec_aux_hidden_state.py")
        self.aux = aux.load(
            ["_resolve_dflash_aux_hidden_state", "_map_muse_target_layer_ids"],
            base_namespace(),
        )
        import re as re_module
        from collections.abc import Iterable, Mapping
        from types import MappingProxyType

        self.compressed_tensors = Source(root, "srt/layers/quantization/compressed_tensors/utils.py").load(
            [
                "should_ignore_layer",
                "check_equal_or_regex_match",
                "find_matched_target",
                "_find_first_match",
                "_is_equal_or_regex_match",
                "_match_fused_layer",
            ],
            dict(
                base_namespace(), re=re_module, MappingProxyType=MappingProxyType,
                Iterable=Iterable, Mapping=Mapping, Module=object,
            ),
        )
        self.quantizable = Source(root, "srt/models/dflash.py").class_constant(
            "DFlashDraftModel", "supports_quantization"
        )
        worker = Source(root, "srt/speculative/dflash_worker_v2.py")
        self.worker = worker.load(
            [
                "DFlashWorkerV2._resolve_mask_token_id",
                "DFlashWorkerV2._maybe_merge_trained_mask_embedding",
            ],
            dict(
                base_namespace(),
                get_parallel=lambda: SimpleNamespace(tp_rank=0),
                torch=torch_or_none(),
            ),
        )

    def run(self, rows: Rows, draft: str, target: Optional[str]) -> None:
        try:
            hf_config = auto_config(draft)
        except Exception as e:
            rows.say("form", "raised", first_line(e))
            return
        rows.say("form", "accepted")
        parse = self.utils["parse_dflash_draft_config"]
        try:
            parsed = parse(draft_hf_config=hf_config)
        except Exception as e:
            # The parse reads every DFlash field at once: a refusal there stops everything after it.
            for rule in ("target_layer_ids_guessed", "mask_token_id_guessed"):
                rows.say(rule, "raised", first_line(e))
            return

        # The taps: resolved against the target by spec_aux_hidden_state's own function.
        if target is None:
            rows.say("taps_beyond_the_target", "not_asked")
            if parsed.target_layer_ids is None:
                rows.say("target_layer_ids_guessed", "guessed", "build_target_layer_ids over the target's layers")
            else:
                rows.say("target_layer_ids_guessed", "accepted", value=parsed.target_layer_ids)
        else:
            self.taps(rows, draft, target, hf_config, parsed)

        # The mask id: resolved against the target's vocabulary and tokenizer by the worker's own
        # method.
        mask_id = parsed.mask_token_id
        if target is None:
            rows.say("mask_id_outside_the_target_vocab", "not_asked")
            if mask_id is None:
                rows.say("mask_token_id_guessed", "guessed", "left to _resolve_mask_token_id's lookup in the target's tokenizer")
            else:
                rows.say("mask_token_id_guessed", "accepted", value=mask_id)
        else:
            mask_id = self.mask(rows, target, parsed)

        # mask_embedding.pt: merged by the worker's own method against the resolved id.
        self.mask_embedding(rows, draft, mask_id)
        self.quantized_layers(rows, draft, hf_config)

    def quantized_layers(self, rows, draft, hf_config):
        """A compressed-tensors draft's layer Linears, stored quantized or dense, against how SGLang
        builds them: should_ignore_layer and find_matched_target (SGLang's own) called with the
        names DFlashDraftModel gives them. Its layers take an empty prefix unless the class is
        quantizable (supports_quantization, read from the class), and each Linear then takes its
        bare name; the class states no packed_modules_mapping. A layer built the other way has its
        checkpoint weights skipped by load_weights ("Ignore unexpected weights")."""
        rule, untargeted = "layer_lists_on_bare_names", "targets_on_bare_names"
        q = read_json(os.path.join(draft, "config.json")).get("quantization_config") or {}
        if q.get("quant_method") != "compressed-tensors":
            for r in (rule, untargeted):
                rows.say(r, "accepted", f"quant_method is {q.get('quant_method')!r}, not 'compressed-tensors'")
            return
        if self.quantizable:
            for r in (rule, untargeted):
                rows.say(r, "cannot_run", "DFlashDraftModel.supports_quantization is true: its layers are named by path")
            return
        targets = [t for g in (q.get("config_groups") or {}).values() for t in g.get("targets", [])]
        ignore = q.get("ignore") or []
        ct = self.compressed_tensors

        def built_quantized(layer, cls):
            if ct["should_ignore_layer"](layer, ignore=ignore, fused_mapping={}):
                return False
            return ct["find_matched_target"](layer, type(cls, (), {})(), targets, {}) is not None

        names = set(tensor_names(draft))
        prefixed = any(n.startswith("model.") for n in names)
        linears = [
            ("self_attn", "qkv_proj", ["q_proj", "k_proj", "v_proj"], "QKVParallelLinear"),
            ("self_attn", "o_proj", ["o_proj"], "RowParallelLinear"),
            ("mlp", "gate_up_proj", ["gate_proj", "up_proj"], "MergedColumnParallelLinear"),
            ("mlp", "down_proj", ["down_proj"], "RowParallelLinear"),
        ]
        for i in range(int(hf_config.num_hidden_layers)):
            for scope, layer, modules, cls in linears:
                try:
                    built = built_quantized(layer, cls)
                except Exception as e:
                    # Raised while the model is built: no weight is loaded.
                    rows.say(untargeted, "raised", first_line(e))
                    rows.say(rule, "cannot_run", "the model was refused while it was built")
                    return
                for m in modules:
                    module = ("model." if prefixed else "") + f"layers.{i}.{scope}.{m}"
                    if f"{module}.weight_packed" in names or f"{module}.weight_scale" in names:
                        stored = True
                    elif f"{module}.weight" in names:
                        stored = False
                    else:
                        continue
                    if stored != built:
                        how = "quantized" if built else "dense"
                        rows.say(untargeted, "accepted", "a target matched every layer Linear met so far")
                        rows.say(rule, "wrongly", f"{layer} is built {how}: load_weights skips {module}'s tensors as unexpected")
                        return
        rows.say(untargeted, "accepted", "a target matched every layer Linear")
        rows.say(rule, "accepted", "every layer Linear is built as the checkpoint stores it")

    def taps(self, rows, draft, target, hf_config, parsed):
        target_config = auto_config(target)
        config = SimpleNamespace()
        algorithm = SimpleNamespace(is_dflash_family=lambda: True, is_dspark=lambda: False)
        draft_model_config = SimpleNamespace(hf_config=hf_config)
        self.aux.update(
            ModelConfig=SimpleNamespace(from_server_args=lambda *a, **k: draft_model_config),
            get_spec=lambda: SimpleNamespace(
                speculative_draft_model_path=draft, speculative_draft_model_revision=None
            ),
        )
        model_config = SimpleNamespace(hf_text_config=target_config, hf_config=target_config)
        try:
            self.aux["_resolve_dflash_aux_hidden_state"](
                config=config,
                server_args=SimpleNamespace(),
                model_config=model_config,
                spec_algorithm=algorithm,
                is_draft_worker=False,
            )
        except Exception as e:
            rows.say("taps_beyond_the_target", "raised", first_line(e))
            rows.say("target_layer_ids_guessed", "cannot_run", "the taps were refused first")
            return
        rows.say("taps_beyond_the_target", "accepted", value=config.dflash_target_layer_ids)
        if parsed.target_layer_ids is None:
            rows.say("target_layer_ids_guessed", "guessed", value=config.dflash_target_layer_ids)
        else:
            rows.say("target_layer_ids_guessed", "accepted", value=config.dflash_target_layer_ids)

    def mask(self, rows, target, parsed):
        target_config = auto_config(target)
        worker = SimpleNamespace(
            target_worker=SimpleNamespace(
                model_runner=SimpleNamespace(
                    model_config=SimpleNamespace(vocab_size=int(target_config.vocab_size))
                ),
                tokenizer=target_tokenizer(target),
            )
        )
        try:
            resolved = self.worker["DFlashWorkerV2._resolve_mask_token_id"](
                worker, mask_token=parsed.mask_token, mask_token_id=parsed.mask_token_id
            )
        except Exception as e:
            rows.say("mask_id_outside_the_target_vocab", "raised", first_line(e))
            rows.say("mask_token_id_guessed", "raised" if parsed.mask_token_id is None else "accepted", first_line(e))
            return None
        rows.say("mask_id_outside_the_target_vocab", "accepted", value=resolved)
        did = "guessed" if parsed.mask_token_id is None else "accepted"
        rows.say("mask_token_id_guessed", did, value=resolved)
        return resolved

    def mask_embedding(self, rows, draft, mask_id):
        rule = "mask_embedding_id"
        if not os.path.exists(os.path.join(draft, "mask_embedding.pt")):
            rows.say(rule, "accepted", "no mask_embedding.pt")
            return
        torch = self.worker["torch"]
        if torch is None:
            rows.say(rule, "cannot_run", "torch does not import: mask_embedding.pt is not read")
            return
        if mask_id is None:
            rows.say(rule, "cannot_run", "no mask id was resolved (it needs the target's tokenizer)")
            return
        stub_module("sglang.srt.arg_groups", __path__=[])
        stub_module(
            "sglang.srt.arg_groups.overrides",
            resolving_view=lambda args: SimpleNamespace(speculative_draft_model_path=draft),
        )

        class Rows_:
            dtype = torch.float32

            def __getitem__(self, i):
                return SimpleNamespace(copy_=lambda t: None)

        embedding = SimpleNamespace(weight=Rows_(), shard_indices=None)
        worker = SimpleNamespace(
            server_args=None,
            device="cpu",
            _mask_token_id=int(mask_id),
            _target_worker=SimpleNamespace(
                model_runner=SimpleNamespace(
                    model=SimpleNamespace(get_input_embeddings=lambda: embedding)
                )
            ),
        )
        try:
            self.worker["DFlashWorkerV2._maybe_merge_trained_mask_embedding"](worker)
        except Exception as e:
            rows.say(rule, "raised", first_line(e))
            return
        rows.say(rule, "accepted", value=mask_id)


# ---------------------------------------------------------------------------------------------
# vLLM 0.33.0


class Vllm:
    def __init__(self, root: str):
        from transformers import PreTrainedConfig

        algos = Source(root, "transformers_utils/configs/speculators/algos.py")
        ns = base_namespace()
        # algos.py is the registry and its updaters, and nothing else: executed whole.
        exec(compile(algos.tree, algos.path, "exec"), ns)
        base = Source(root, "transformers_utils/configs/speculators/base.py")
        self.speculators = base.load(
            ["SpeculatorsConfig"],
            dict(
                base_namespace(),
                PreTrainedConfig=PreTrainedConfig,
                SUPPORTED_SPECULATORS_TYPES=ns["SUPPORTED_SPECULATORS_TYPES"],
                without_trust_remote_code=lambda kwargs: {
                    k: v for k, v in kwargs.items() if k != "trust_remote_code"
                },
            ),
        )["SpeculatorsConfig"]
        self.spec_utils = Source(root, "v1/worker/gpu/spec_decode/utils.py").load(
            ["get_parallel_drafting_token_id"], base_namespace()
        )
        self.eagle3 = Source(root, "v1/worker/gpu/spec_decode/eagle/eagle3_utils.py").load(
            ["get_eagle3_aux_layers_from_config"], base_namespace()
        )
        self.interfaces = Source(root, "model_executor/models/interfaces.py").load(
            ["SupportsEagle3.get_eagle3_default_aux_hidden_state_layers"], base_namespace()
        )
        model = Source(root, "model_executor/models/qwen3_dflash.py")
        self.qwen3_dflash = model.load(
            [
                "_dflash_layer_causal",
                "DFlashQwen3ForCausalLM.load_weights",
                "DFlashQwen3ForCausalLM._read_mask_embedding",
            ],
            dict(base_namespace(), torch=torch_or_none()),
            constants=["_SLIDING_ATTENTION"],
        )
        # DFlashQwen3Model.__init__'s lines that read the mask id (and use_aux_hidden_state).
        self.drafter_lines = model.statements("DFlashQwen3Model.__init__", "drafter_config")
        # The modules load_weights' names must reach (AutoWeightsLoader walks them by name), for
        # each architecture registry.py maps to these files: DFlash2's classes extend DFlash's.
        model2 = Source(root, "model_executor/models/qwen3_dflash2.py")
        dflash = {
            "": model.self_attributes("DFlashQwen3ForCausalLM.__init__"),
            "model": model.self_attributes("DFlashQwen3Model.__init__"),
        }
        self.children = {
            "DFlashDraftModel": ("DFlashQwen3ForCausalLM", dflash),
            "DFlash2DraftModel": (
                "DFlash2Qwen3ForCausalLM",
                {
                    "": dflash[""] | model2.self_attributes("DFlash2Qwen3ForCausalLM.__init__"),
                    "model": dflash["model"] | model2.self_attributes("DFlash2Qwen3Model.__init__"),
                },
            ),
        }
        utils = Source(root, "model_executor/models/utils.py")
        self.mapper = utils.load(
            ["WeightsMapper"], dict(base_namespace(), re=__import__("re"), logger=Logger())
        )["WeightsMapper"]
        self.maybe_prefix = utils.load(["maybe_prefix"], base_namespace())["maybe_prefix"]
        # How a quantization config's module lists are matched: vLLM imports `regex as re`
        # (transformers depends on it); Python's `re` stands in without it (re.match is all these
        # functions call).
        try:
            import regex as re_module
        except ImportError:
            import re as re_module
        from collections.abc import Iterable, Mapping
        from fnmatch import fnmatch
        from types import MappingProxyType

        matching = dict(
            base_namespace(), re=re_module, fnmatch=fnmatch, MappingProxyType=MappingProxyType,
            Iterable=Iterable, Mapping=Mapping, Module=object,
        )
        quant = "model_executor/layers/quantization/"
        matching.update(Source(root, quant + "utils/config_utils.py").load(
            ["is_equal_or_regex_match", "find_matching_patterns"], dict(matching)
        ))
        self.compressed_tensors = Source(root, quant + "compressed_tensors/utils.py").load(
            ["should_ignore_layer", "find_matched_target", "_find_first_match", "_match_fused_layer"],
            dict(matching),
        )
        self.is_layer_skipped = Source(root, quant + "utils/quant_utils.py").load(
            ["is_layer_skipped"], dict(matching)
        )["is_layer_skipped"]
        # The draft's quant config is made afresh (get_draft_quant_config), so the only fused
        # mapping it gets is the one SupportsQuant's __init__ copies in: none unless the class (or
        # Qwen3ForCausalLM, which it extends) is SupportsQuant.
        qwen3 = Source(root, "model_executor/models/qwen3.py")
        supports_quant = "SupportsQuant" in (
            qwen3.class_bases("Qwen3ForCausalLM") | model.class_bases("DFlashQwen3ForCausalLM")
        )
        self.packed_modules_mapping = (
            qwen3.class_constant("Qwen3ForCausalLM", "packed_modules_mapping") if supports_quant else {}
        )

    def hf_config(self, draft: str):
        """The draft's config as vLLM builds it, and whether it is the speculators format."""
        if read_json(os.path.join(draft, "config.json")).get("speculators_config") is not None:
            config_dict = read_json(os.path.join(draft, "config.json"))
            # maybe_override_with_speculators validates the structure first.
            self.speculators.extract_vllm_speculative_config(config_dict=config_dict)
            with contextlib.redirect_stdout(sys.stderr):
                return self.speculators.from_pretrained(draft), True
        return auto_config(draft), False

    def run(self, rows: Rows, draft: str, target: Optional[str]) -> None:
        try:
            hf_config, speculators = self.hf_config(draft)
        except KeyError as e:
            # update_dflash reads these by name.
            rule = {
                "mask_token_id": "mask_token_id_required",
                "aux_hidden_state_layer_ids": "aux_hidden_state_layer_ids_required",
            }.get(e.args[0] if e.args else None)
            if rule is None:
                rows.say("form", "raised", first_line(e))
                return
            rows.say("form", "accepted")
            rows.say(rule, "raised", first_line(e))
            if rule == "mask_token_id_required":
                # update_dflash reads the taps before the mask id: they were there.
                rows.say("aux_hidden_state_layer_ids_required", "accepted")
            for other in (
                "aux_hidden_state_layer_ids_required",
                "mask_token_id_required",
                "every_layer_causal",
                "mask_embedding_id",
                "bare_names_only",
            ):
                rows.say(other, "cannot_run", f"the config was refused first ({first_line(e)})")
            return
        except Exception as e:
            rows.say("form", "raised", first_line(e))
            return
        rows.say("form", "accepted")
        if speculators:
            rows.say("aux_hidden_state_layer_ids_required", "accepted", value=hf_config.eagle_aux_hidden_state_layer_ids)

        # The mask id, as the V2 runner's parallel drafting reads it.
        try:
            mask_id = self.spec_utils["get_parallel_drafting_token_id"](hf_config)
            rows.say("mask_token_id_required", "accepted", value=mask_id)
        except Exception as e:
            rows.say("mask_token_id_required", "raised", first_line(e))

        # The taps: from the config, else the target model's defaults.
        spec_config = SimpleNamespace(draft_model_config=SimpleNamespace(hf_config=hf_config))
        layers = self.eagle3["get_eagle3_aux_layers_from_config"](spec_config)
        if layers:
            rows.say("target_layer_ids_guessed", "accepted", value=list(layers))
        elif target is None:
            rows.say("target_layer_ids_guessed", "guessed", "get_eagle3_default_aux_hidden_state_layers of the target")
        else:
            n = int(auto_config(target).num_hidden_layers)
            model = SimpleNamespace(model=SimpleNamespace(layers=[None] * n))
            guess = self.interfaces["SupportsEagle3.get_eagle3_default_aux_hidden_state_layers"](model)
            rows.say("target_layer_ids_guessed", "guessed", value=list(guess))

        # Causality, layer by layer.
        n = int(hf_config.num_hidden_layers)
        causal = [self.qwen3_dflash["_dflash_layer_causal"](hf_config, i) for i in range(n)]
        types_ = getattr(hf_config, "layer_types", None) or ["full_attention"] * n
        full_causal = [i for i in range(n) if causal[i] and types_[i] != "sliding_attention"]
        if full_causal:
            rows.say("every_layer_causal", "wrongly", f"full-attention layers {full_causal} run causal", value=causal)
        else:
            rows.say("every_layer_causal", "accepted", value=causal)

        # The model's own reading of the mask id, then mask_embedding.pt and the weights' names.
        this = SimpleNamespace(config=hf_config)
        scope = {"self": this, "getattr": getattr}
        exec(self.drafter_lines, scope)
        model = SimpleNamespace(
            mask_token_id=this.mask_token_id,
            use_aux_hidden_state=this.use_aux_hidden_state,
            has_separate_mask_embedding=False,
            _build_fused_kv_buffers=lambda: None,
        )
        outer = SimpleNamespace(
            model=model,
            draft_model_config=SimpleNamespace(model=draft, revision=None),
        )
        mask_embedding = self.mask_embedding(rows, draft, outer)
        outer._read_mask_embedding = lambda: mask_embedding
        self.names(rows, draft, outer, list(getattr(hf_config, "architectures", None) or []))
        self.quantized_layers(rows, draft, hf_config, target)

    def mask_embedding(self, rows, draft, outer):
        rule = "mask_embedding_id"
        path = os.path.join(draft, "mask_embedding.pt")
        if not os.path.exists(path):
            rows.say(rule, "accepted", "no mask_embedding.pt")
            return None
        if self.qwen3_dflash["torch"] is None:
            rows.say(rule, "cannot_run", "torch does not import: mask_embedding.pt is not read")
            return None

        def get_hf_file_bytes(file_name, model, revision="main"):
            # The local-folder branch of repo_utils.get_hf_file_bytes.
            p = os.path.join(model, file_name)
            if os.path.isfile(p):
                with open(p, "rb") as f:
                    return f.read()
            return None

        self.qwen3_dflash["get_hf_file_bytes"] = get_hf_file_bytes
        try:
            state = self.qwen3_dflash["DFlashQwen3ForCausalLM._read_mask_embedding"](outer)
        except Exception as e:
            rows.say(rule, "raised", first_line(e))
            return None
        rows.say(rule, "accepted", value=outer.model.mask_token_id)
        return state

    def names(self, rows, draft, outer, architectures):
        """load_weights run on the folder's tensor names, its loader recording what it is handed;
        then AutoWeightsLoader's walk by name over the two levels of modules the classes build
        (deeper, the module tree is not built here). A name that reaches no module is
        `bare_names_only` when the folder named it `model.*`, `unexpected_weight` otherwise."""
        known = [a for a in architectures if a in self.children]
        if not known:
            for rule in ("bare_names_only", "unexpected_weight"):
                rows.say(rule, "cannot_run", f"architectures {architectures}: not a DFlash class read here")
            return
        model_class, children = self.children[known[0]]
        handed = {}
        mapper_class = self.mapper

        class Loader:
            def __init__(self, module, **kwargs):
                pass

            def load_weights(self, weights, *, mapper=None):
                handed["names"] = [name for name, _ in weights]
                handed["mapper"] = mapper or mapper_class()

        self.qwen3_dflash.update(
            AutoWeightsLoader=Loader,
            WeightsMapper=mapper_class,
            process_eagle_weight=lambda model, name: None,
        )
        weights = [(name, None) for name in tensor_names(draft)]
        try:
            self.qwen3_dflash["DFlashQwen3ForCausalLM.load_weights"](outer, weights)
        except Exception as e:
            rows.say("bare_names_only", "raised", first_line(e))
            return
        stored = tensor_names(draft)
        for name in handed["names"]:
            mapped = handed["mapper"].map_name(name)
            if mapped is None:
                continue
            parts = mapped.split(".")
            missing = None
            if parts[0] not in children[""]:
                missing = parts[0]
            elif parts[0] == "model" and len(parts) > 1 and parts[1] not in children["model"]:
                missing = "model." + parts[1]
            # AutoWeightsLoader ignores an unexpected parameter ending in .bias.
            if missing is None or (missing == mapped and mapped.endswith(".bias")):
                continue
            prefixed = any(s.startswith("model.") for s in stored)
            rule = "bare_names_only" if prefixed else "unexpected_weight"
            rows.say(
                rule,
                "raised",
                f"ValueError: There is no module or parameter named {missing!r} in {model_class} (handed {mapped!r} by load_weights)",
            )
            break
        rows.say("bare_names_only", "accepted", "every name reaches a module the model builds (two levels deep)")
        rows.say("unexpected_weight", "cannot_run", "no name misses at the two levels walked; deeper, the module tree is not built here")

    # The Linears DFlashQwen3Model builds, under the names its __init__ gives them (qwen3_dflash.py:
    # the model under `model`, layer i numbered i + the target's layer count, each projection
    # under its layer's self_attn or mlp), with the class whose name find_matched_target reads.
    # With the checkpoint modules each one holds (load_weights' stacked names).
    LINEARS = [
        ("self_attn.qkv_proj", "QKVParallelLinear", ["q_proj", "k_proj", "v_proj"]),
        ("self_attn.o_proj", "RowParallelLinear", ["o_proj"]),
        ("mlp.gate_up_proj", "MergedColumnParallelLinear", ["gate_proj", "up_proj"]),
        ("mlp.down_proj", "RowParallelLinear", ["down_proj"]),
    ]

    def quantized_layers(self, rows, draft, hf_config, target):
        """Each Linear the draft stores, quantized or dense, against how vLLM builds it: the
        config's lists matched by vLLM's own functions (compressed-tensors' should_ignore_layer and
        find_matched_target, fp8's is_layer_skipped) against vLLM's names for it. A layer built
        the other way meets a weight it has no parameter for, or, fp8 built over a dense weight,
        casts it and never loads the scale."""
        every = ("ignore_on_vllms_names", "fp8_over_a_dense_weight", "lists_on_vllms_names_leave_dense")
        q = read_json(os.path.join(draft, "config.json")).get("quantization_config") or {}
        method = q.get("quant_method")
        if method not in ("compressed-tensors", "fp8"):
            for rule in every:
                rows.say(rule, "accepted", f"quant_method is {method!r}, not compressed-tensors or fp8")
            return
        rules = every
        to_quantized, to_dense = "ignore_on_vllms_names", "lists_on_vllms_names_leave_dense"
        if target is not None:
            offset = int(auto_config(target).num_hidden_layers)
        elif getattr(hf_config, "num_target_layers", None) is not None:
            offset = int(hf_config.num_target_layers)
        else:
            for rule in rules:
                rows.say(rule, "cannot_run", "no target and no num_target_layers: vLLM's layer numbers are not known")
            return
        packed = self.packed_modules_mapping
        if method == "compressed-tensors":
            targets = [t for g in (q.get("config_groups") or {}).values() for t in g.get("targets", [])]
            ignore = q.get("ignore") or []

            def built_quantized(layer, cls):
                module = type(cls, (), {})()
                if self.compressed_tensors["should_ignore_layer"](layer, ignore=ignore, fused_mapping=packed):
                    return False
                return self.compressed_tensors["find_matched_target"](layer, module, targets, packed) is not None
        else:
            ignored = q.get("ignored_layers") or q.get("modules_to_not_convert") or []

            def built_quantized(layer, cls):
                return not self.is_layer_skipped(layer, ignored, packed, match_mode="exact")

        names = tensor_names(draft)
        stored = set(names)
        prefixed = any(n.startswith("model.") for n in names)
        # (checkpoint module, vLLM's layer, its class)
        linears = [("fc", self.maybe_prefix("model", "fc"), "ReplicatedLinear")]
        for i in range(int(hf_config.num_hidden_layers)):
            at = self.maybe_prefix("model", f"layers.{i + offset}")
            for path, cls, modules in self.LINEARS:
                scope = path.split(".")[0]
                for m in modules:
                    linears.append((f"layers.{i}.{scope}.{m}", f"{at}.{path}", cls))
        said = set()
        for module, layer, cls in linears:
            spelled = ("model." if prefixed else "") + module
            parts = sorted(n for n in names if n.startswith(spelled + ".") and n != spelled + ".weight")
            if f"{spelled}.weight" not in stored and not parts:
                continue
            quantized = any(n.rsplit(".", 1)[1].startswith(("weight_packed", "weight_scale")) for n in parts)
            try:
                built = built_quantized(layer, cls)
            except Exception as e:
                rows.say(to_quantized, "raised", first_line(e))
                said.add(to_quantized)
                break
            if quantized == built:
                continue
            if built and method == "fp8":
                rule, did, message = "fp8_over_a_dense_weight", "wrongly", f"{layer} is built FP8 over the dense {module}.weight; its scale is never loaded"
            elif built and q.get("format") == "float-quantized":
                # compressed-tensors' FP8 scheme registers a `weight` of its own: the dense one is
                # cast into it, and its scale is never loaded.
                rule, did, message = "fp8_over_a_dense_weight", "wrongly", f"{layer} is built FP8 over the dense {module}.weight; its scale is never loaded"
            elif built:
                rule, did, message = to_quantized, "raised", f"ValueError: There is no module or parameter named '{module}.weight' in DFlashQwen3Model ({layer} is built quantized)"
            else:
                rule, did, message = to_dense, "raised", f"ValueError: There is no module or parameter named '{parts[0].removeprefix('model.')}' in DFlashQwen3Model ({layer} is built dense)"
            if rule not in said:
                rows.say(rule, did, message)
                said.add(rule)
        for rule in rules:
            if rule not in said:
                rows.say(rule, "accepted", "every Linear is built as the checkpoint stores it")


ENGINES = [("sglang", SGLANG_VAR, Sglang), ("vllm", VLLM_VAR, Vllm)]


def main() -> int:
    manifest = read_json(sys.argv[1])
    engines = []
    for name, var, make in ENGINES:
        root = os.environ.get(var)
        if not root:
            engines.append((name, None, f"{var} is not set"))
            continue
        engines.append((name, make(root), None))
    for entry in manifest:
        for name, engine, why in engines:
            rows = Rows(entry["arm"], name)
            if engine is None:
                rows.say("*", "unavailable", why)
                continue
            # Whatever an engine's code prints goes to stderr: stdout carries the rows alone.
            with contextlib.redirect_stdout(sys.stderr):
                engine.run(rows, entry["path"], entry.get("target"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
