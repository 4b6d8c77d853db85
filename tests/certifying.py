"""One ``certify`` run of a few checks in a subprocess, for the tests that prove a check through the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conformance.report.model import load_report


def certify(backend: str, out: Path, profile: str, *selection: str) -> tuple[dict[str, dict], dict]:
    """``python -m conformance certify BACKEND --profile PROFILE -- -k "A or B"`` without workers or
    timing: (results of its one report by check id, the report's verdict)."""
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "certify", backend, "--profile", profile, "--output", str(out), "--workers", "0",
         "--skip-perf", "--", "-k", " or ".join(selection)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    reports = list(out.glob("*/report.json"))
    assert len(reports) == 1, done.stdout[-3000:]
    document = load_report(reports[0])
    return {r["id"]: r for r in document["results"]}, document["verdict"]
