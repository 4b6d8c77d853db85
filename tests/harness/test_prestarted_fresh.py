"""PRE-008's fresh processes started by certify before the checks' session (conformance.checks._fresh):
the check reads their digests only where they preprocessed the program it runs to the end, and
judges a backend the same either way; what still runs when the checks are over is ended."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conformance.checks import _fresh as fresh
from conformance.report.model import load_report

ROOT = Path(__file__).resolve().parents[2]
DIGESTS = {"processed_bytes": "ab" * 32, "size": 736, "debug_handle_map": None, "named_data": {}}


def _given(monkeypatch, directory: Path, spec: str = "reference") -> None:
    monkeypatch.setenv(fresh.PRESTART_ENV, json.dumps({"spec": spec, "directory": str(directory)}))


def _ended(directory: Path, seed: int, *records: dict, returncode: int = 0) -> None:
    (directory / f"seed-{seed}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (directory / f"seed-{seed}.exit").write_text(str(returncode))


def test_digests_of_the_program_the_check_runs_are_used(tmp_path, monkeypatch):
    _given(monkeypatch, tmp_path)
    for seed in fresh.HASH_SEEDS:
        _ended(tmp_path, seed, {"stage": "preprocess"}, {"stage": "done", "program": "mlp", **DIGESTS})
    runs = fresh.prestarted_runs("reference", "mlp")
    assert runs is not None and set(runs) == set(fresh.HASH_SEEDS) and runs[0]["size"] == 736


@pytest.mark.parametrize(
    "done",
    [
        {"stage": "done", "program": "chain", **DIGESTS},  # another choice of program
        {"stage": "done", "program": "*", "failure": "PREPROCESS_FAIL", "message": "refused"},  # failed there
        None,  # died in preprocess
    ],
    ids=["another program", "a failure", "a crash"],
)
def test_anything_but_digests_of_that_program_leaves_the_check_to_start_its_own(tmp_path, monkeypatch, done):
    _given(monkeypatch, tmp_path)
    for seed in fresh.HASH_SEEDS:
        _ended(tmp_path, seed, {"stage": "preprocess"}, *([done] if done else []), returncode=0 if done else -11)
    assert fresh.prestarted_runs("reference", "mlp") is None


def test_nothing_prestarted_or_for_another_backend_is_none(tmp_path, monkeypatch):
    monkeypatch.delenv(fresh.PRESTART_ENV, raising=False)
    assert fresh.prestarted_runs("reference", "mlp") is None
    _given(monkeypatch, tmp_path, spec="another")
    assert fresh.prestarted_runs("reference", "mlp") is None


def test_the_check_waits_for_the_processes_to_end(tmp_path, monkeypatch):
    _given(monkeypatch, tmp_path)
    _ended(tmp_path, 0, {"stage": "done", "program": "mlp", **DIGESTS})

    def later():
        time.sleep(0.5)
        _ended(tmp_path, 12345, {"stage": "done", "program": "mlp", **DIGESTS})

    thread = threading.Thread(target=later)
    thread.start()
    started = time.monotonic()
    runs = fresh.prestarted_runs("reference", "mlp")
    thread.join()
    assert runs is not None and time.monotonic() - started >= 0.4


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] in ("Z", "X")  # a zombie has ended
    except OSError:
        return True


@pytest.mark.slow
def test_stop_ends_the_processes_still_running_and_removes_their_files(tmp_path):
    """A backend that hangs in the fresh processes: stop, when the checks are over, ends them."""
    (tmp_path / "hangs.py").write_text(
        "import os, time\n"
        f"open(os.path.join({str(tmp_path)!r}, str(os.getpid())), 'w').close()\n"
        "time.sleep(600)\nbackend = None\n"
    )
    prestart = fresh.Prestart(f"{tmp_path / 'hangs.py'}:backend")
    deadline = time.monotonic() + 60
    while len([p for p in tmp_path.iterdir() if p.name.isdigit()]) < len(fresh.HASH_SEEDS):
        assert time.monotonic() < deadline, (prestart.directory / "prestart.log").read_text()
        time.sleep(0.1)
    pids = [int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()]
    assert not any(_gone(pid) for pid in pids)
    prestart.stop()
    deadline = time.monotonic() + 10
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(_gone(pid) for pid in pids)
    assert not prestart.directory.exists()


def _certify(spec: str, out: Path) -> dict:
    command = [sys.executable, "-m", "conformance", "certify", spec, "--profile", "core-fp32", "--ops", "aten.relu.default",
               "--dtypes", "float32", "--skip-perf", "--workers", "2", "--output", str(out)]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    reports = list(out.glob("*/report.json"))
    assert reports, done.stdout[-3000:] + done.stderr[-3000:]
    report = load_report(reports[0])
    return next(r for r in report["results"] if r["clause"] == "PRE-008")


@pytest.mark.slow
def test_certify_of_one_backend_judges_pre008_on_the_prestarted_processes(tmp_path):
    """The reference passes and a blob that follows the hash seed's string order fails, each on the
    digests of the processes certify started before the session (its measurements say so)."""
    ok = _certify("reference", tmp_path / "reference")
    assert ok["category"] == "PASS" and ok["measurements"] == {"prestarted_fresh_processes": True}, ok
    bad = _certify("tests/seeded/defects.py:blob_depends_on_hash_seed", tmp_path / "defect")
    assert bad["category"] == "CONTRACT_VIOLATION" and "different processed_bytes" in bad["message"], bad
    assert bad["measurements"] == {"prestarted_fresh_processes": True}, bad
