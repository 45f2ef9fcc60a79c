"""dflash_gate.gate() and its Report, held to the command-line gate's answers."""

from __future__ import annotations

import concurrent.futures
import importlib.metadata
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
from pathlib import Path

import pytest

import dflash_gate
from conftest import REPO, Packages


def cli_json(gate_bin: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([gate_bin, "--json", *args], capture_output=True)


def test_the_suite_runs_against_the_installed_wheel() -> None:
    # The source tree's package has no extension module: a test that imported it would not run.
    installed = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    module = Path(dflash_gate.__file__).resolve()
    assert module.parent.parent in installed, f"dflash_gate imported from {module}"


def test_version_is_the_gate_binary_s_and_the_wheel_s(gate_bin: Path) -> None:
    out = subprocess.run([gate_bin, "--version"], capture_output=True, check=True).stdout
    assert out.decode() == f"dflash-gate {dflash_gate.__version__}\n"
    assert importlib.metadata.version("dflash-gate") == dflash_gate.__version__


def test_pass(in_packages: Packages) -> None:
    report = dflash_gate.gate(in_packages.passing)
    assert report.verdict == "PASS"
    assert bool(report) is True
    assert report.exit_code == 0
    assert report.package == "pass"
    assert report.checks and all(c.outcome == "PASS" for c in report.checks)
    ids = [c.id for c in report.checks]
    assert "config.is_dflash" in ids and len(set(ids)) == len(ids)
    assert all(isinstance(c.message, str) and c.message for c in report.checks)
    # Evidence is plain Python data: a dict where the check gathered facts, else None.
    assert any(isinstance(c.evidence, dict) for c in report.checks)
    assert all(c.evidence is None or isinstance(c.evidence, dict) for c in report.checks)
    assert all(c.blocked_by is None for c in report.checks)
    census = report.census
    assert isinstance(census, dict) and census["weight_file"] == "model.q4nx"
    assert census["tensors"] and all(isinstance(t["shape"], list) for t in census["tensors"])
    assert any("--manifest" in item for item in report.not_checked)
    assert repr(report) == f'<dflash_gate.Report PASS "pass": {len(ids)} of {len(ids)} checks passed>'


def test_a_second_family_passes(in_packages: Packages) -> None:
    report = dflash_gate.gate(in_packages.dflash2)
    assert report.verdict == "PASS", report.to_json()
    assert report.census["family"] != dflash_gate.gate(in_packages.passing).census["family"]


def test_fail(in_packages: Packages) -> None:
    report = dflash_gate.gate(in_packages.failing)
    assert report.verdict == "FAIL"
    assert bool(report) is False
    assert report.exit_code == 1
    failed = [c for c in report.checks if c.outcome == "FAIL"]
    assert [c.id for c in failed] == ["projections.tile_grid"]
    assert "mlp.gate_proj" in failed[0].message
    assert "FAIL" in repr(report) and "FAIL" in repr(failed[0])


def test_undecided(in_packages: Packages) -> None:
    # --manifest where the package has none: nothing verified, so UNDECIDED, never a pass.
    report = dflash_gate.gate(in_packages.passing, manifest=True)
    assert report.verdict == "UNDECIDED"
    assert bool(report) is False
    assert report.exit_code == 3
    undecided = [c for c in report.checks if c.outcome == "UNDECIDED"]
    assert [c.id for c in undecided] == ["manifest.sha256"]
    # --manifest was given: its line says so and why, never "give --manifest".
    assert any("--manifest given" in item for item in report.not_checked)
    assert not any("give --manifest" in item for item in report.not_checked)


def test_source_and_target_are_asked(in_packages: Packages) -> None:
    report = dflash_gate.gate(in_packages.passing, source=in_packages.source,
                              target=in_packages.target)
    ids = {c.id for c in report.checks}
    assert any(i.startswith("source.") for i in ids) and any(i.startswith("target.") for i in ids)
    assert report.census["source_grids"]


@pytest.mark.parametrize("kind", [str, pathlib.Path, "pathlike"])
def test_paths_as_str_or_pathlike(in_packages: Packages, kind: object) -> None:
    class Named(os.PathLike[str]):
        def __init__(self, path: str) -> None:
            self.path = path

        def __fspath__(self) -> str:
            return self.path

    make = Named if kind == "pathlike" else kind
    report = dflash_gate.gate(make(in_packages.passing), source=make(in_packages.source))  # type: ignore[operator]
    assert report.verdict == "PASS" and report.package == "pass"


def test_a_path_of_another_type_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        dflash_gate.gate(3)  # type: ignore[arg-type]


def test_revision_is_honoured_not_ignored(in_packages: Packages) -> None:
    # A revision asks for a hub cache repository's snapshot: on a plain folder it is an error that
    # says so, never a report on the folder as if no revision had been given.
    with pytest.raises(dflash_gate.GateError, match="not one"):
        dflash_gate.gate(in_packages.passing, revision="main")
    # None is the default: no revision asked for.
    assert dflash_gate.gate(in_packages.passing, revision=None)


def test_a_hugging_face_folder_is_gated_in_its_form(in_packages: Packages) -> None:
    # The checkpoint a package was converted from is a draft in the publisher's form.
    report = dflash_gate.gate(in_packages.source)
    assert report.verdict == "PASS"
    assert json.loads(report.to_json())["census"]["form"] == "safetensors"
    assert "inventory.complete" in [c.id for c in report.checks]


@pytest.mark.parametrize("args", [
    ["pass"], ["fail"], ["pass", "--manifest"], ["dflash2"],
    ["pass", "--source", "pass-source", "--target", "target"],
])
def test_to_json_is_the_cli_document_byte_for_byte(in_packages: Packages, gate_bin: Path,
                                                     args: list[str]) -> None:
    options = {"manifest": "--manifest" in args}
    for option in ("source", "target"):
        if f"--{option}" in args:
            options[option] = args[args.index(f"--{option}") + 1]
    report = dflash_gate.gate(args[0], **options)  # type: ignore[arg-type]
    cli = cli_json(gate_bin, *args)
    assert cli.returncode == report.exit_code
    assert report.to_json().encode() == cli.stdout
    # The values are the document's.
    document = json.loads(report.to_json())
    assert document["verdict"] == report.verdict
    assert document["census"] == report.census
    assert document["not_checked"] == report.not_checked
    assert [c["evidence"] for c in document["checks"]] == [c.evidence for c in report.checks]
    assert [(c["id"], c["outcome"], c["message"], c.get("blocked_by"), c["fix"])
            for c in document["checks"]] \
        == [(c.id, c.outcome, c.message, c.blocked_by, c.fix) for c in report.checks]
    # What it was checked against, as the document names it.
    assert (report.target, report.source) == (document.get("target"), document.get("source"))
    assert (report.repository, report.revision) == (document.get("repository"),
                                                     document.get("revision"))


def test_a_report_names_what_it_was_checked_against(in_packages: Packages) -> None:
    report = dflash_gate.gate(in_packages.passing, source=in_packages.source,
                              target=in_packages.target)
    assert report.target == {"given": in_packages.target, "resolved": in_packages.target}
    assert report.source == {"given": in_packages.source, "resolved": in_packages.source}
    alone = dflash_gate.gate(in_packages.passing)
    assert (alone.target, alone.source, alone.repository, alone.revision) == (None,) * 4


def test_a_gate_error_says_its_fix(in_packages: Packages) -> None:
    with pytest.raises(dflash_gate.GateError) as raised:
        dflash_gate.gate(in_packages.passing, target=in_packages.passing)
    assert raised.value.fix and raised.value.fix.startswith("give --target the target model")
    assert str(raised.value).endswith(f"; fix: {raised.value.fix}")
    with pytest.raises(dflash_gate.GateError) as nowhere:
        dflash_gate.gate("nowhere")
    assert nowhere.value.fix is None


def test_a_report_from_the_hub_cache_names_its_repository_and_revision(
        in_packages: Packages, tmp_path: Path) -> None:
    commit = "4f3c2b1a" * 5
    repository = tmp_path / "models--z-lab--draft"
    snapshot = repository / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text(commit)
    for file in (in_packages.root / in_packages.passing).iterdir():
        shutil.copy(file, snapshot / file.name)
    report = dflash_gate.gate(repository)
    assert (report.repository, report.revision) == ("z-lab/draft", commit)
    assert f"z-lab/draft@{commit}" in report.text()


# The human report's last line says how long the gate took.
ELAPSED = re.compile(r"\(\d+\.\d\d s\)")


@pytest.mark.parametrize(("args", "census", "quiet"), [
    (["pass"], False, False), (["fail"], True, False), (["fail"], False, True),
    (["pass", "--target", "target"], False, False),
])
def test_text_is_the_cli_s_report(in_packages: Packages, gate_bin: Path, args: list[str],
                                  census: bool, quiet: bool) -> None:
    options = {"target": args[2]} if "--target" in args else {}
    report = dflash_gate.gate(args[0], **options)
    flags = ["--census"] * census + ["--quiet"] * quiet
    cli = subprocess.run([gate_bin, *args, *flags], capture_output=True, env={
        k: v for k, v in os.environ.items() if k != "CLICOLOR_FORCE"})
    assert cli.returncode == report.exit_code
    assert ELAPSED.sub("", report.text(census=census, quiet=quiet)) \
        == ELAPSED.sub("", cli.stdout.decode())
    assert "\x1b[" not in report.text()


def test_the_fixture_s_document(gate_bin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    assert dflash_gate.gate("fixtures/tiny").to_json().encode() \
        == cli_json(gate_bin, "fixtures/tiny").stdout


# One package (and options) per reason the gate can be made to give on demand.
ERROR_CASES: dict[str, tuple[str, dict[str, str]]] = {
    "no_such_directory": ("nowhere", {}),
    "not_a_directory": ("a-file", {}),
    "no_config": ("empty", {}),
    "not_a_regular_file": ("config-dir", {}),
    "outside_the_package": ("linked-out", {}),
    "file_not_found": ("pass", {"source": "no-weights"}),
    "malformed": ("pass", {"source": "bad-weights"}),
    "file_too_large": ("pass", {"source": "huge-index"}),
}


def make_error_packages(root: Path) -> None:
    """The packages ERROR_CASES names, beside a link to the passing package and its source."""
    (root / "a-file").write_text("not a directory\n")
    (root / "empty").mkdir()
    shutil.copytree(root / "pass", root / "config-dir")
    (root / "config-dir" / "config.json").unlink()
    (root / "config-dir" / "config.json").mkdir()
    shutil.copytree(root / "pass", root / "linked-out")
    (root / "linked-out" / "config.json").unlink()
    (root / "linked-out" / "config.json").symlink_to(root / "pass" / "config.json")
    (root / "no-weights").mkdir()
    (root / "no-weights" / "config.json").write_bytes((root / "pass-source" / "config.json").read_bytes())
    shutil.copytree(root / "no-weights", root / "bad-weights")
    (root / "bad-weights" / "model.safetensors").write_bytes(b"garbage\n")
    shutil.copytree(root / "no-weights", root / "huge-index")
    with open(root / "huge-index" / "model.safetensors.index.json", "wb") as index:
        index.truncate((64 << 20) + 1)  # one byte over the limit, sparse


# Reasons no test can bring about on demand: a file the running user cannot read (CI runs as root,
# who reads everything), a file changed between two reads of it, and a worker that panicked.
UNREACHABLE = {"unreadable", "changed_while_read", "internal"}


def test_every_reason_is_tested_or_said_unreachable() -> None:
    schema = json.loads((REPO / "schema" / "report.schema.json").read_text())
    reasons: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            reason = node.get("properties", {}).get("reason")
            if isinstance(reason, dict) and "enum" in reason:
                reasons.update(reason["enum"])
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    # The error document's reasons: those GateError carries (an --all array's skipped documents
    # have reasons of their own, which no call of gate() raises).
    walk(schema["$defs"]["error"])
    assert reasons == set(ERROR_CASES) | UNREACHABLE


def test_each_error_reason_is_a_gate_error_like_the_cli_s(packages: Packages, gate_bin: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    root = tmp_path
    (root / "pass").symlink_to(packages.root / "pass")
    (root / "pass-source").symlink_to(packages.root / "pass-source")
    make_error_packages(root)
    monkeypatch.chdir(root)
    for reason, (package, options) in ERROR_CASES.items():
        with pytest.raises(dflash_gate.GateError) as caught:
            dflash_gate.gate(package, **options)  # type: ignore[arg-type]
        error = caught.value
        args = [package] + [a for k, v in options.items() for a in (f"--{k}", v)]
        cli = cli_json(gate_bin, *args)
        assert cli.returncode == 2, reason
        document = json.loads(cli.stdout)
        assert (error.reason, error.path, error.package, str(error)) == (
            document["reason"], document["path"], document["package"], document["message"])
        assert error.reason == reason
        assert isinstance(error, Exception) and not isinstance(error, dflash_gate.Report)


def test_many_threads_at_once_get_the_serial_answers(in_packages: Packages) -> None:
    asks = [(in_packages.passing, {}), (in_packages.failing, {}),
            (in_packages.passing, {"manifest": True}),
            (in_packages.passing, {"source": in_packages.source})] * 6
    serial = [dflash_gate.gate(p, **o).to_json() for p, o in asks]  # type: ignore[arg-type]
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        threaded = list(pool.map(lambda a: dflash_gate.gate(a[0], **a[1]).to_json(), asks))
    assert threaded == serial
    assert {json.loads(t)["verdict"] for t in threaded} == {"PASS", "FAIL", "UNDECIDED"}


def test_the_gil_is_released_while_the_gate_runs(in_packages: Packages) -> None:
    # One thread gates (with --source: every weight compared) for a while; another counts how often
    # it gets to run Python code, waking every half millisecond. A call that held the GIL would let
    # the counter in only when the interpreter takes the GIL from the gating thread, at most once a
    # switch interval (set to 50 ms here): 30 ticks in 1.5 s, measured 29 with the call made holding
    # it. Released, the counter runs all through the calls (about 2,400 ticks, measured), however
    # long each call is: the bound is the switch interval's, not the call's (a count per call, as
    # this test once held, went red when the gate got faster).
    ticks = 0
    done = threading.Event()

    def gate_for_a_while() -> None:
        end = time.perf_counter() + 1.5
        while time.perf_counter() < end:
            report = dflash_gate.gate(in_packages.passing, source=in_packages.source)
            assert report.verdict == "PASS"
        done.set()

    def tick() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0.0005)

    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(0.05)
    try:
        threads = [threading.Thread(target=gate_for_a_while), threading.Thread(target=tick)]
        began = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - began
    finally:
        sys.setswitchinterval(switch_interval)
    held_at_most = elapsed / 0.05 + 1
    assert ticks >= 5 * held_at_most, (ticks, held_at_most)


def test_a_long_call_returns_whole_and_ctrl_c_is_never_swallowed(packages: Packages) -> None:
    # A process gates in a loop while a thread sends it SIGINT: the loop ends in KeyboardInterrupt,
    # and no call begun after the signal was sent returns a report.
    script = textwrap.dedent("""
        import os, signal, sys, threading, time
        import dflash_gate
        sent = threading.Event()
        def interrupt():
            time.sleep(0.3)
            # At the main thread, where Python runs its handlers; then a pause before saying so,
            # since a signal sent from one thread is delivered to another when it is next
            # scheduled, which on a loaded machine can be after this thread's next line.
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            time.sleep(0.05)
            sent.set()
        calls = 0
        threading.Thread(target=interrupt, daemon=True).start()
        try:
            end = time.monotonic() + 60
            while time.monotonic() < end:
                after = sent.is_set()
                report = dflash_gate.gate("pass", source="pass-source")
                calls += 1
                if after:
                    print("a report after the signal:", report.verdict)
                    sys.exit(1)
                assert report.verdict == "PASS"
        except KeyboardInterrupt:
            print("interrupted after", calls, "calls")
            sys.exit(0)
        print("never interrupted")
        sys.exit(1)
    """)
    run = subprocess.run([sys.executable, "-c", script], cwd=packages.root, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("interrupted after")
    # The calls before it were long ones that returned whole.
    assert int(run.stdout.split()[2]) > 0


def test_bool_is_true_only_for_pass(in_packages: Packages) -> None:
    verdicts = {
        dflash_gate.gate(in_packages.passing).verdict: bool(dflash_gate.gate(in_packages.passing)),
        dflash_gate.gate(in_packages.failing).verdict: bool(dflash_gate.gate(in_packages.failing)),
        dflash_gate.gate(in_packages.passing, manifest=True).verdict:
            bool(dflash_gate.gate(in_packages.passing, manifest=True)),
    }
    assert verdicts == {"PASS": True, "FAIL": False, "UNDECIDED": False}
    launched = [p for p in ("pass", "fail") if dflash_gate.gate(p)]
    assert launched == ["pass"]


def test_a_report_s_lists_are_its_own(in_packages: Packages) -> None:
    report = dflash_gate.gate(in_packages.failing)
    report.checks.clear()
    report.census.clear()
    report.not_checked.clear()
    assert report.checks and report.census and report.not_checked
    assert report.verdict == "FAIL"
    with pytest.raises(AttributeError):
        report.verdict = "PASS"  # type: ignore[misc]


def test_an_error_s_paths_are_the_paths_given_even_when_not_utf8(tmp_path: Path) -> None:
    # os.fsdecode's str of bytes that are not UTF-8 (surrogates for them): the error carries that
    # very str, so os.fsencode gives the caller's bytes back, never a lossy copy.
    raw = os.fsencode(tmp_path) + b"/absent-\xff\xfe"
    named = os.fsdecode(raw)
    with pytest.raises(dflash_gate.GateError) as caught:
        dflash_gate.gate(named)
    error = caught.value
    assert error.reason == "no_such_directory"
    assert (error.path, error.package) == (named, named)
    assert os.fsencode(error.path) == raw


def test_loaders_say_what_each_engine_would_do(in_packages: Packages) -> None:
    report = dflash_gate.gate(in_packages.passing)
    loaders = report.loaders
    assert [v["engine"] for v in loaders] == [
        "vllm", "sglang", "llama.cpp", "transformers", "mlx", "dflash-mlx"
    ]
    # A Q4NX package is none of their forms; the section says so and the verdict does not change.
    assert all(v["outcome"] == "not_its_form" for v in loaders)
    assert report.verdict == "PASS"
    asked = dflash_gate.gate(in_packages.passing, loader=["vllm", "llama.cpp"])
    ids = [c.id for c in asked.checks if c.id.startswith("loader.")]
    assert ids == ["loader.vllm", "loader.llama.cpp"]
    assert asked.verdict == "FAIL"
    assert asked.checks[-1].evidence["engine"] == "llama.cpp"


def test_an_unknown_loader_is_refused_naming_the_known_ones(in_packages: Packages) -> None:
    with pytest.raises(ValueError, match="known: vllm, sglang, llama.cpp"):
        dflash_gate.gate(in_packages.passing, loader=["vllm", "nope"])


def test_gate_all_is_the_cli_s_all(packages: Packages, gate_bin: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(packages.root.parent)
    models = packages.root.name
    rows = dflash_gate.gate_all(models, target=f"{models}/{packages.target}")
    cli = subprocess.run([gate_bin, "--json", "--all", models, "--target",
                          f"{models}/{packages.target}"], capture_output=True)
    documents = json.loads(cli.stdout)
    # A row per document, in the same order, saying the same.
    assert len(rows) == len(documents) and rows
    for row, document in zip(rows, documents):
        if row.kind == "gated":
            assert row.report is not None and document.get("kind") != "skipped"
            assert row.report.to_json() == json.dumps(document, indent=2) + "\n" or \
                json.loads(row.report.to_json()) == document
            assert row.exit_code == row.report.exit_code
        else:
            assert row.report is None and row.reason == document["reason"]
            assert row.message
    kinds = {row.kind for row in rows}
    assert "gated" in kinds and "skipped" in kinds, rows
    # The run's worst status is the command line's.
    rank = {0: 0, 3: 1, 1: 2, 2: 3}
    assert max((row.exit_code for row in rows), key=rank.__getitem__) == cli.returncode


def test_gate_all_keeps_a_broken_package_as_a_row(tmp_path: Path, packages: Packages) -> None:
    shutil.copytree(packages.root / packages.passing, tmp_path / "good")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "model.q4nx").write_bytes(b"")
    rows = {row.name.rsplit("/", 1)[-1]: row for row in dflash_gate.gate_all(tmp_path)}
    assert rows["good"].kind == "gated" and rows["good"].report
    broken = rows["broken"]
    assert broken.kind == "not_gated" and broken.exit_code == 2
    assert isinstance(broken.error, dflash_gate.GateError) and broken.reason == broken.error.reason
    with pytest.raises(dflash_gate.GateError):
        dflash_gate.gate_all(tmp_path / "nowhere")
