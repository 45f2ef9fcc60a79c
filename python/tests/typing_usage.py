"""Typed use of dflash_gate, checked by ``mypy --strict`` (test_types.py), never run.

Each ``type: ignore`` marks a misuse the stub must reject: under --strict an ignore that is not
needed is an error, so a stub that grew loose (``Any``) fails the check.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import dflash_gate
from dflash_gate import Check, GateError, Report


def launch_if_gated(draft: str | os.PathLike[str], target: Path) -> int:
    try:
        report: Report = dflash_gate.gate(draft, target=target, source="ckpt", manifest=True)
        cached: Report = dflash_gate.gate("z-lab/draft", revision="main")
        print(cached.verdict)
    except GateError as e:
        reason: str = e.reason
        remedy: str | None = e.fix
        print(remedy)
        path: str = e.path
        package: str = e.package
        print(reason, path, package)
        return 2
    verdict: Literal["PASS", "FAIL", "UNDECIDED"] = report.verdict
    code: int = report.exit_code
    for check in report.checks:
        c: Check = check
        outcome: Literal["PASS", "FAIL", "UNDECIDED"] = c.outcome
        evidence: dict[str, Any] | None = c.evidence
        blocked: str | None = c.blocked_by
        fix: str | None = c.fix
        print(fix)
        print(c.id, outcome, c.message, evidence, blocked)
    census: dict[str, Any] = report.census
    items: list[str] = report.not_checked
    text: str = report.to_json()
    version: str = dflash_gate.__version__
    print(verdict, census, items, text, version, report.package)
    against: dict[str, str] | None = report.target
    source: dict[str, str] | None = report.source
    repository: str | None = report.repository
    revision: str | None = report.revision
    human: str = report.text(census=True, quiet=False)
    print(against, source, repository, revision, human)
    for row in dflash_gate.gate_all("models", target=target, loader=["vllm"]):
        kind: Literal["gated", "skipped", "not_gated"] = row.kind
        gated: Report | None = row.report
        error: GateError | None = row.error
        status: int = row.exit_code
        print(kind, gated, error, status, row.name, row.path, row.reason, row.message, row.note)
    return 0 if report else code


def misuse() -> None:
    dflash_gate.gate(3)  # type: ignore[arg-type]
    dflash_gate.gate("d", revision=3)  # type: ignore[arg-type]
    dflash_gate.gate("d", "target")  # type: ignore[call-arg]
    n: int = dflash_gate.gate("d").verdict  # type: ignore[assignment]
    dflash_gate.gate("d").verdict = "PASS"  # type: ignore[misc]
    dflash_gate.gate("d").text(True)  # type: ignore[call-arg]
    print(n)
