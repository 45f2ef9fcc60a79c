"""The stub (dflash_gate/_native.pyi, with py.typed) against the module it describes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_the_stub_matches_the_extension_module(tmp_path: Path) -> None:
    # stubtest imports the installed module and compares every name and signature with the stub.
    run = subprocess.run([sys.executable, "-m", "mypy.stubtest", "dflash_gate"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_typed_use_checks_under_mypy_strict(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                          str(HERE / "typing_usage.py")],
                         cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Success" in run.stdout
