"""A certificate nobody can bend (issue 28): a backend's own pytest plugin cannot rewrite its results
(conformance.seal), and the --baseline gate sees every move away from PASS, with an exit code of
its own beside the verdict (conformance.report.diff). Both through the real CLI, on the backends of
tests/seeded/tampering.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.cli import EXIT_INVALID, EXIT_REGRESSED
from conformance.report.model import load_report

ROOT = Path(__file__).resolve().parent.parent
TAMPERING = "tests/seeded/tampering.py"


def certify(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])  # the plugin module, in every worker
    return subprocess.run(
        [sys.executable, "-m", "conformance", "certify", *args, "--skip-perf"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )


@pytest.mark.slow
def test_a_plugin_that_rewrites_results_to_pass_changes_no_category(tmp_path):
    """The plugin sets every record a report carries to PASS, in the worker's and the controller's
    pytest_runtest_logreport (tryfirst) and in an outer pytest_runtest_makereport wrapper."""
    out = tmp_path / "out"
    done = certify(f"{TAMPERING}:rewrites_its_results", "--profile", "interface", "--workers", "1", "--output", str(out), "-k", "RT_017")
    log = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 1, log
    (path,) = out.glob("*/report.json")
    report = load_report(path)
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


@pytest.mark.slow
def test_a_version_that_drops_a_claim_and_refuses_it_is_a_regression_beside_its_verdict(tmp_path):
    """1.0 claims relu and passes it; 1.1 no longer claims it and refuses it cleanly (NOT_SUPPORTED,
    no failure). Gated against 1.0's report, certify exits 6 and prints both the verdict and the
    regressions (the gate used to print "OK: 0 new failure(s)" and exit 0)."""
    selection = ["--profile", "core-fp32", "--ops", "aten.relu.default", "--workers", "0", "-k", "NUM_001"]
    before = certify(f"{TAMPERING}:claims_relu", "--output", str(tmp_path / "1.0"), *selection)
    assert before.returncode == 1, before.stdout[-3000:] + before.stderr[-3000:]  # -k leaves the contract checks out
    (baseline,) = (tmp_path / "1.0").glob("*/report.json")
    checks = {r["id"]: r["category"] for r in load_report(baseline)["results"]}
    assert checks == {"test_NUM_001_matches_reference[aten.relu.default|float32]": "PASS"}, checks

    done = certify(f"{TAMPERING}:drops_relu", "--output", str(tmp_path / "1.1"), "--baseline", str(baseline), *selection)
    out = done.stdout
    assert done.returncode == EXIT_REGRESSED, out[-3000:] + done.stderr[-3000:]
    assert "NOT CERTIFIED: relu-dropper" in out and "mandatory op x dtype(s) not supported" in out, out[-3000:]
    assert "REGRESSED:" in out and "NO REGRESSION" not in out, out[-3000:]
    assert "NO LONGER PASSES test_NUM_001_matches_reference[aten.relu.default|float32]: PASS -> NOT_SUPPORTED" in out, out[-3000:]
    assert "CLAIM DROPPED aten.relu.default" in out, out[-3000:]
    assert out.rstrip().splitlines()[-1].startswith("NOT CERTIFIED: relu-dropper"), "the verdict has the last word"
