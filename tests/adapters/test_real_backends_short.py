"""A short certification of every real backend, end to end through the CLI, as CI runs it.

Each run selects a few checks whose outcome is known (reports/README.md explains each): the
clean results must stay clean and the findings must stay found, so a change in the harness or
in a backend's release shows up here. The full runs are `nox -s certify_real`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conformance.report.model import load_report

ROOT = Path(__file__).resolve().parents[2]

# backend -> (profile, -k selection, {check-id substring: expected category})
RUNS = {
    # No NUM here: every ExecuTorch example is a lowering, and shrinking a failure lowers again
    # (minutes); the NUM findings (rsqrt, max_pool2d) are in the full reports (certify_real).
    "executorch-xnnpack": (
        "executorch",
        "RT_001 or RT_002 or RT_010 or RT_011 or RT_012 or DBG_002",
        {
            "RT_001": "PASS",
            "RT_002": "PASS",
            "RT_012": "PASS",  # every truncated delegate payload refused by XNNCompiler
            "RT_010": "CONTRACT_VIOLATION",  # a wrong shape is NotSupported (set_inputs), not InvalidArgument
            "RT_011": "CRASH",  # a mutated payload's bytes in a log line abort the pybindings (finding)
            "DBG_002": "CONTRACT_VIOLATION",  # XnnpackBackend.preprocess returns an empty debug_handle_map
        },
    ),
    "executorch-portable": (
        "executorch",
        "RT_002 or RT_012 or RT_013",
        {"RT_002": "PASS", "RT_012": "PASS", "RT_013": "CONTRACT_VIOLATION"},  # old versions: InvalidProgram
    ),
    "torch-lazy-ts": (
        "lazy",
        "test_LAZY or (NUM and aten.pixel_shuffle.default-float32)",
        {
            "LAZY_001": "MISMATCH",  # a one-element tensor loses its NaN payload on upload
            "LAZY_003": "PASS",
            "LAZY_004": "PASS",
            "LAZY_007": "CONTRACT_VIOLATION",  # random values decided at the sync, not when recorded
            "LAZY_009": "PASS",
            "LAZY_010": "NOT_APPLICABLE",  # GetBackendDevices has no Python binding
            "aten.pixel_shuffle.default": "MISMATCH",  # traced as as_strided_copy of a fresh buffer
        },
    ),
    "torch-aoti": (  # a cold cache compiles a handful of C++ packages (about a minute)
        "aoti-sample",
        "RT_002 or RT_009 or (NUM and aten.relu)",
        {"RT_002": "PASS", "RT_009": "PASS", "aten.relu.default": "PASS"},
    ),
    "torchscript-backend-with-compiler-demo": (
        "full",
        "RT_002 or PRE_002 or RT_012 or PRE_006",
        {
            "RT_002": "MISMATCH",  # computes element 0 only
            "PRE_002": "CONTRACT_VIOLATION",  # process-global debug handles in the blob
            "RT_012": "CONTRACT_VIOLATION",  # truncated blobs accepted
            "PRE_006": "PASS",
        },
    ),
    "torchscript-test-backend": (
        "core-fp32",
        "PRE_001 or PRE_002",
        {"PRE_001": "PASS", "PRE_002": "CONTRACT_VIOLATION"},  # a fresh mangled type name per lowering
    ),
}


def _certify(name: str, profile: str, selection: str, out: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "certify", name, "--profile", profile, "--output", str(out),
         "--workers", "1", "--skip-perf", "--timeout", "900", "--", "-k", selection],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode in (0, 1), f"certify {name} broke (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    report = load_report(out / name / "report.json")
    assert (out / name / "report.html").exists() and (out / name / "junit.xml").exists()
    return report


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RUNS))
def test_short_certification(name, tmp_path):
    if name.startswith("executorch"):
        pytest.importorskip("executorch.runtime", reason="pip install '.[executorch]' (the tests session installs it)")
    profile, selection, expected = RUNS[name]
    report = _certify(name, profile, selection, tmp_path)
    got = {r["id"]: r["category"] for r in report["results"]}
    for needle, category in expected.items():
        matches = {rid: cat for rid, cat in got.items() if needle in rid}
        assert matches, f"{name}: no result for {needle} in {sorted(got)}"
        assert set(matches.values()) == {category}, f"{name}: {needle} gave {matches}, expected {category}"
