"""Shared fixtures: hypothesis profiles, and one certification session of every seeded backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import specs
from conformance.discovery import _import_path
from conformance.report import build_report
from conformance.strategies import profiles

profiles.register()

ROOT = Path(__file__).resolve().parent.parent
SEEDED = "tests/seeded/defects.py"
CHECK_TIMEOUT = 40  # far above any check on an idle 2-core machine (a few seconds); the hang defects cost this once each
HARD_TIMEOUT = 55


@pytest.fixture(scope="session")
def certified(tmp_path_factory, worker_id) -> dict[str, dict]:
    """backend name -> report of one seeded-profile session over all seeded backends.

    Run once per test run, whichever xdist worker asks first: the others wait on the lock
    and read the same results (pytest-xdist's recipe for once-only session fixtures).
    """
    from filelock import FileLock

    # Under xdist the base temp's parent is this run's own directory, common to its workers.
    shared = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    out = shared / "seeded"
    with FileLock(str(shared / "seeded.lock")):
        failed = shared / "seeded.failed"
        if failed.exists():
            pytest.fail(failed.read_text())
        if not (out / "session.log").exists():
            out.mkdir(exist_ok=True)
            problem = _certify_seeded(out)
            if problem:
                failed.write_text(problem)
                pytest.fail(problem)
    spec = specs.load()
    reports = {}
    for path in out.glob("*/results/*.json"):
        document = json.loads(path.read_text())
        reports[document["backend"]["name"]] = build_report([document], spec)
    return reports


def _certify_seeded(out: Path) -> str | None:
    names = ["reference"] + [f"{SEEDED}:{name}" for name in _import_path(f"{SEEDED}:DEFECTS")]
    command = [sys.executable, "-m", "pytest", "--pyargs", "conformance.checks"]
    for name in names:
        command += ["--conformance-backend", name]
    command += [
        "--conformance-profile", "seeded",
        "--conformance-out", str(out),
        "-n", "2",
        "--timeout", str(CHECK_TIMEOUT),
        "-o", "timeout_func_only=true",  # never interrupt pytest's own reporting (an INTERNALERROR)
        "--conformance-hard-timeout", str(HARD_TIMEOUT),
        "-k", "not test_PERF",
        "--benchmark-disable",
        "-p", "no:cacheprovider",
        "-o", "addopts=",
        "-q",
    ]
    env = {**os.environ, "HYPOTHESIS_PROFILE": "ci"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    (out / "session.log").write_text(done.stdout + done.stderr)
    if done.returncode not in (0, 1):
        return f"the certification session broke (exit {done.returncode}):\n{done.stdout[-4000:]}{done.stderr[-4000:]}"
    return None
