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
CHECK_TIMEOUT = 20
HARD_TIMEOUT = 45


@pytest.fixture(scope="session")
def certified(tmp_path_factory) -> dict[str, dict]:
    """backend name -> report of one seeded-profile session over all seeded backends."""
    out = tmp_path_factory.mktemp("seeded")
    names = ["reference"] + [f"{SEEDED}:{name}" for name in _import_path(f"{SEEDED}:DEFECTS")]
    command = [sys.executable, "-m", "pytest", "--pyargs", "conformance.checks"]
    for name in names:
        command += ["--backend", name]
    command += [
        "--profile", "seeded",
        "--conformance-out", str(out),
        "-n", "2",
        "--timeout", str(CHECK_TIMEOUT),
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
    assert done.returncode in (0, 1), f"the certification session broke (exit {done.returncode}):\n{done.stdout[-4000:]}{done.stderr[-4000:]}"
    spec = specs.load()
    reports = {}
    for path in out.glob("*/results/*.json"):
        document = json.loads(path.read_text())
        reports[document["backend"]["name"]] = build_report([document], spec)
    return reports
