"""What the suite gates: packages written by the project's generator (``synth``), and the two
binaries the Python module is held to (``dflash-gate`` and ``synth``, built by cargo).

The suite tests the installed wheel, not the source tree: run it with the venv's ``pytest`` from
anywhere but ``python/`` (``python -m pytest`` there would put the source tree first on the path).
``DFLASH_GATE_BIN`` and ``DFLASH_GATE_SYNTH`` name the binaries; by default they are cargo's debug
builds under ``target/``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


# Resolved now, while the working directory is the one the suite was started from: the tests move it.
BINARIES = {variable: Path(os.environ.get(variable) or REPO / "target" / "debug" / name).resolve()
            for variable, name in (("DFLASH_GATE_BIN", "dflash-gate"),
                                   ("DFLASH_GATE_SYNTH", "synth"))}


def binary(variable: str) -> Path:
    path = BINARIES[variable]
    if not path.is_file():
        pytest.fail(f"{path} is not built: run `cargo build --locked -p dflash-gate -p gate-tests` "
                    f"or set {variable}")
    return path


@dataclass(frozen=True)
class Packages:
    """Package directories, named relative to ``root`` (the working directory the CLI and the
    module are both run from, so that the reports name them the same)."""

    root: Path
    passing: str
    failing: str
    source: str
    dflash2: str
    target: str


@pytest.fixture(scope="session")
def gate_bin() -> Path:
    return binary("DFLASH_GATE_BIN")


@pytest.fixture(scope="session")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Packages:
    synth = binary("DFLASH_GATE_SYNTH")
    root = tmp_path_factory.mktemp("packages")
    subprocess.run([synth, "small", "pass", "--source", "pass-source"], cwd=root, check=True)
    subprocess.run([synth, "dflash2-small", "dflash2"], cwd=root, check=True)
    # The same package with a config that asks for twice the MLP width its grids have.
    shutil.copytree(root / "pass", root / "fail")
    config = json.loads((root / "fail" / "config.json").read_text())
    config["intermediate_size"] *= 2
    (root / "fail" / "config.json").write_text(json.dumps(config, indent=2))
    # A target for --target: the model the draft drafts for, by its config alone (a draft given as
    # the target is refused as the draft it is).
    draft = json.loads((root / "pass" / "config.json").read_text())
    dflash_fields = {"dflash_config", "architectures", "model_type", "block_size",
                     "target_layer_ids", "mask_token_id", "num_target_layers", "embedding_scale"}
    target = {k: v for k, v in draft.items() if k not in dflash_fields}
    target.update(architectures=["Qwen3ForCausalLM"], model_type="qwen3",
                  num_hidden_layers=draft["num_target_layers"])
    (root / "target").mkdir()
    (root / "target" / "config.json").write_text(json.dumps(target, indent=2))
    return Packages(root, "pass", "fail", "pass-source", "dflash2", "target")


@pytest.fixture
def in_packages(packages: Packages, monkeypatch: pytest.MonkeyPatch) -> Packages:
    """The packages, with the working directory at their root."""
    monkeypatch.chdir(packages.root)
    return packages
