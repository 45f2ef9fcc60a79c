"""``python -m dflash_gate`` is ``dflash-gate``: the same arguments, output, colours and exit
statuses, byte for byte (but for the time a gate took)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import REPO, Packages

# The human report's last line says how long the gate took.
ELAPSED = re.compile(rb"\(\d+\.\d\d s\)")


def both(gate_bin: Path, args: list[str], cwd: Path,
         env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[bytes], ...]:
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("NO_COLOR", "CLICOLOR", "CLICOLOR_FORCE")}
    environment.update(env or {})
    runs = []
    for command in ([gate_bin], [sys.executable, "-m", "dflash_gate"]):
        runs.append(subprocess.run([*command, *args], cwd=cwd, env=environment,
                                   capture_output=True, timeout=120))
    return tuple(runs)


@pytest.mark.parametrize(("args", "status"), [
    (["pass"], 0),
    (["fail"], 1),
    (["pass", "--manifest"], 3),
    (["nowhere"], 2),
    (["pass", "--bogus"], 2),
    ([], 2),
    (["--version"], 0),
    (["--help"], 0),
    (["pass", "--json"], 0),
    (["fail", "--json", "--source", "pass-source"], 1),
    (["nowhere", "--json"], 2),
    (["pass", "fail", "nowhere"], 2),
    (["pass", "fail", "--json"], 1),
    (["fail", "--census", "--full"], 1),
    (["fail", "-q"], 1),
    (["--all", "."], 1),
    (["pass", "--quiet", "--json"], 2),
    (["fail", "--color", "always"], 1),
    (["fail", "--color", "never"], 1),
    (["fail", "--color", "sometimes"], 2),
    (["pass", "fail", "nowhere", "--format", "github"], 2),
])
def test_same_output_and_status(packages: Packages, gate_bin: Path, args: list[str],
                                status: int) -> None:
    binary, module = both(gate_bin, args, packages.root)
    assert (module.returncode, binary.returncode) == (status, status)
    assert ELAPSED.sub(b"", module.stdout) == ELAPSED.sub(b"", binary.stdout)
    assert module.stderr == binary.stderr


def test_colour_follows_the_environment_as_the_binary_s(packages: Packages, gate_bin: Path) -> None:
    binary, module = both(gate_bin, ["fail"], packages.root, {"CLICOLOR_FORCE": "1"})
    assert b"\x1b[" in binary.stdout
    assert ELAPSED.sub(b"", module.stdout) == ELAPSED.sub(b"", binary.stdout)


def test_an_argument_that_is_not_utf8_reaches_the_gate_unchanged(packages: Packages,
                                                                   gate_bin: Path,
                                                                   tmp_path: Path) -> None:
    name = os.fsdecode(b"pa\xffss")
    os.symlink(packages.root / "pass", tmp_path / name)
    binary, module = both(gate_bin, [name], tmp_path)
    assert (module.returncode, binary.returncode) == (0, 0)
    assert ELAPSED.sub(b"", module.stdout) == ELAPSED.sub(b"", binary.stdout)


def test_the_fixture_document(gate_bin: Path) -> None:
    binary, module = both(gate_bin, ["fixtures/tiny", "--json"], REPO)
    assert module.returncode == binary.returncode == 0
    assert module.stdout == binary.stdout and module.stdout.startswith(b"{")



def test_pip_installs_the_dflash_gate_command(packages: Packages, gate_bin: Path) -> None:
    # The console script the wheel declares, in the environment's scripts directory beside python.
    command = Path(sysconfig.get_path("scripts")) / "dflash-gate"
    assert command.is_file(), f"{command}: the wheel installs no dflash-gate command"
    for args in (["pass"], ["fail", "-q"], ["--version"]):
        installed = subprocess.run([command, *args], cwd=packages.root, capture_output=True,
                                   timeout=120)
        binary = subprocess.run([gate_bin, *args], cwd=packages.root, capture_output=True,
                                timeout=120)
        assert installed.returncode == binary.returncode
        assert ELAPSED.sub(b"", installed.stdout) == ELAPSED.sub(b"", binary.stdout)
