"""A backend package's own pytest plugin (conformance.plugin.hookspecs): certify loads it into its closed
run, its environment facts reach the report, and it is told when the backend is loaded."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conformance.report.model import load_report

ROOT = Path(__file__).resolve().parent.parent

PLUGIN = '''
import os
from pathlib import Path

MARKS = Path(__file__).with_name("loaded.txt")


def pytest_conformance_environment(config, backend_name, environment):
    environment["accelerator"] = "npu-sim v2"
    environment["firmware"] = "1.2.3"


def pytest_conformance_backend_loaded(config, backend):
    with open(MARKS, "a") as f:
        f.write(f"{os.getpid()} {backend.name}\\n")
'''

BACKEND = '''
import dataclasses
import reference_backend

backend = dataclasses.replace(reference_backend.backend_under_test(), name="with-plugin", pytest_plugins=("firmware_plugin",))
'''


@pytest.mark.slow
def test_a_backend_plugin_adds_environment_facts_and_hears_the_backend_loaded(tmp_path):
    (tmp_path / "firmware_plugin.py").write_text(textwrap.dedent(PLUGIN))
    (tmp_path / "with_plugin.py").write_text(textwrap.dedent(BACKEND))
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "certify", "with_plugin:backend", "--profile", "smoke", "--ops", "aten.add.Tensor",
         "--dtypes", "float32", "--skip-perf", "--workers", "2", "--output", str(out), "-k", "NUM_001 or RT_002"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # -k leaves mandatory clauses unrun
    report = load_report(out / "with_plugin_backend" / "report.json")
    assert report["summary"]["counts"] == {"PASS": 2}
    assert report["environment"]["backend"] == {"accelerator": "npu-sim v2", "firmware": "1.2.3"}
    assert any(p.startswith("firmware_plugin ") for p in report["run"]["plugins"]), report["run"]["plugins"]
    marks = (tmp_path / "loaded.txt").read_text().split()
    assert "with-plugin" in marks  # called in the processes that ran its checks
