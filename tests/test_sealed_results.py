"""A certificate nobody can bend (issue 28): a backend's own pytest plugin cannot rewrite its results
(conformance.seal). Through the real CLI, on the backends of tests/seeded/tampering.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conformance.cli import EXIT_INVALID

ROOT = Path(__file__).resolve().parent.parent
TAMPERING = "tests/seeded/tampering.py"


def certify(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])  # the plugin module, in every worker
    return subprocess.run(
        [sys.executable, "-m", "conformance", "certify", *args, "--skip-perf"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )


def test_a_plugin_that_rewrites_results_to_pass_changes_no_category(tmp_path):
    """The plugin sets every record a report carries to PASS, in the worker's and the controller's
    pytest_runtest_logreport (tryfirst) and in an outer pytest_runtest_makereport wrapper."""
    out = tmp_path / "out"
    done = certify(f"{TAMPERING}:rewrites_its_results", "--profile", "interface", "--workers", "1", "--output", str(out), "-k", "RT_017")
    log = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 1, log
    (path,) = out.glob("*/report.json")
    report = json.loads(path.read_text())
    assert {r["id"]: r["category"] for r in report["results"]} == {"test_RT_017_execute_leaves_inputs_alone": "CONTRACT_VIOLATION"}
    verdict = report["verdict"]
    assert not verdict["certified"] and "RT-017" in verdict["failing_clauses"], verdict
    plugin = "tests.seeded.result_flipper"
    assert verdict["plugins"] == [plugin] and plugin in verdict["text"], verdict
    assert "pytest_runtest_logreport" in report["run"]["backend_plugins"][plugin], report["run"]
    assert any("CONTRACT_VIOLATION, stands" in a for a in report["run"]["altered"]), report["run"].get("altered")
    assert "NOT CERTIFIED: rewrites-its-results" in done.stdout and plugin in done.stdout, log
    checked = subprocess.run(
        [sys.executable, "-m", "conformance", "verify", str(path)], cwd=ROOT, capture_output=True, text=True
    )
    assert checked.returncode != EXIT_INVALID, checked.stdout  # the verdict naming the plugin is the one its results give

