"""The seeded proof's certification runs: the reference and every backend of tests/seeded/defects.py
under the ``seeded`` profile, through ``certify`` itself, as a user's run would go.

The backends are dealt into ``CHUNKS`` runs, each its own ``certify`` and its own pytest-xdist
group, so that a test run with more workers certifies them side by side (one run of all 97
backends took half of the test suite's time on one worker). A chunk is certified once per test run,
by whichever worker first asks for one of its reports; the others wait on its lock and read the
same reports (pytest-xdist's recipe for once-only session fixtures).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from filelock import FileLock

from conformance.discovery import _import_path
from conformance.report.model import load_report

ROOT = Path(__file__).resolve().parent.parent
SEEDED = "tests/seeded/defects.py"
DEFECTS = _import_path(f"{SEEDED}:DEFECTS")
VARIANTS = _import_path(f"{SEEDED}:VARIANTS")
CHECK_TIMEOUT = 40  # far above any check on an idle 2-core machine (a few seconds); the hang defects cost this once each
HARD_TIMEOUT = 55
CHUNKS = 12
"""Certify runs the seeded backends are dealt into, about eight backends each. Each run has one
worker: the test run's own workers are the parallelism (with two, two chunks at once keep two
cores busy, not four processes on two cores, which slows every check towards its timeout)."""

RUNS: dict[str, str] = {
    "reference": "reference",
    **{d.backend.name: f"{SEEDED}:{key}" for key, d in DEFECTS.items()},
    **{b.name: f"{SEEDED}:{key}" for key, b in VARIANTS.items()},
}
"""Report name (the backend's own name) -> the name certify takes."""
CHUNK = {name: i % CHUNKS for i, name in enumerate(RUNS)}


def group(backend: str) -> pytest.MarkDecorator:
    """The xdist group of a test that reads this backend's report: its chunk's (a test that reads
    another chunk's report too waits for it, or certifies it itself)."""
    return pytest.mark.xdist_group(f"seeded-{CHUNK[backend]}")


class SeededReports(Mapping[str, dict]):
    """backend name -> its report of the seeded run, certifying a backend's chunk on first use."""

    def __init__(self, shared: Path):
        self.dir = shared / "seeded"
        self.dir.mkdir(exist_ok=True)
        self.loaded: dict[int, dict[str, dict]] = {}

    def __getitem__(self, name: str) -> dict:
        chunk = self._chunk(CHUNK[name])
        if name not in chunk:
            raise KeyError(f"the seeded run of chunk {CHUNK[name]} wrote no report for {name}: see {self.dir}/chunk-{CHUNK[name]}/session.log")
        return chunk[name]

    def __iter__(self) -> Iterator[str]:
        return iter(RUNS)

    def __len__(self) -> int:
        return len(RUNS)

    def _chunk(self, index: int) -> dict[str, dict]:
        if index not in self.loaded:
            out = self.dir / f"chunk-{index}"
            with FileLock(str(self.dir / f"chunk-{index}.lock")):
                failed = self.dir / f"chunk-{index}.failed"
                if failed.exists():
                    pytest.fail(failed.read_text())
                if not (out / "session.log").exists():
                    out.mkdir(exist_ok=True)
                    problem = _certify([RUNS[n] for n, c in CHUNK.items() if c == index], out)
                    if problem:
                        failed.write_text(problem)
                        pytest.fail(problem)
            reports = (load_report(path) for path in out.glob("*/report.json"))
            self.loaded[index] = {report["backend"]["name"]: report for report in reports}
        return self.loaded[index]


def _certify(names: list[str], out: Path) -> str | None:
    """One certify run of these backends, one report each; what went wrong, if it broke."""
    command = [
        sys.executable, "-m", "conformance", "certify", *names,
        "--profile", "seeded", "--output", str(out), "--workers", "1", "--skip-perf",
        "--timeout", str(CHECK_TIMEOUT), "--hard-timeout", str(HARD_TIMEOUT),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    (out / "session.log").write_text(done.stdout + done.stderr)
    if done.returncode not in (0, 1):
        return f"the seeded certification broke (exit {done.returncode}):\n{done.stdout[-4000:]}{done.stderr[-4000:]}"
    return None
