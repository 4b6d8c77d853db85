"""Shared fixtures: hypothesis profiles, and one certification session of every seeded backend."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.discovery import _import_path
from conformance.report.model import load_report
from conformance.strategies import profiles

profiles.register()

ROOT = Path(__file__).resolve().parent.parent
SEEDED = "tests/seeded/defects.py"
CHECK_TIMEOUT = 40  # far above any check on an idle 2-core machine (a few seconds); the hang defects cost this once each
HARD_TIMEOUT = 55


def pytest_configure(config):
    """The project's own xdist workers share the cores as certify's do (conformance.plugin.share_cores)."""
    if hasattr(config, "workerinput"):
        from conformance.plugin import share_cores

        share_cores(int(config.workerinput.get("workercount", 1)))


@pytest.fixture(scope="session")
def certified(tmp_path_factory, worker_id) -> dict[str, dict]:
    """backend name -> report of one ``certify`` run of the seeded profile over all seeded backends.

    Run once per test run, whichever xdist worker asks first: the others wait on the lock
    and read the same reports (pytest-xdist's recipe for once-only session fixtures).
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
    reports = {}
    for path in out.glob("*/report.json"):
        report = load_report(path)
        reports[report["backend"]["name"]] = report
    return reports


def _certify_seeded(out: Path) -> str | None:
    """The seeded proof goes through certify itself: one run, every seeded backend, one report each."""
    names = ["reference"] + [f"{SEEDED}:{name}" for name in (*_import_path(f"{SEEDED}:DEFECTS"), *_import_path(f"{SEEDED}:VARIANTS"))]
    command = [
        sys.executable, "-m", "conformance", "certify", *names,
        "--profile", "seeded", "--output", str(out), "--workers", "2", "--skip-perf",
        "--timeout", str(CHECK_TIMEOUT), "--hard-timeout", str(HARD_TIMEOUT),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    (out / "session.log").write_text(done.stdout + done.stderr)
    if done.returncode not in (0, 1):
        return f"the seeded certification broke (exit {done.returncode}):\n{done.stdout[-4000:]}{done.stderr[-4000:]}"
    return None
