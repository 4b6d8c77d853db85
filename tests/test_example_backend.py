"""examples/minimal_backend: the template a backend author copies stays small, installable and certified."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.report.model import load_report

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "minimal_backend"
MODULE = EXAMPLE / "minimal_numpy_backend.py"
MAX_LINES = 150
CLAIMED = ("aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", "aten.neg.default", "aten.relu.default")


def test_the_template_module_stays_at_most_150_lines():
    lines = len(MODULE.read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULE.name} has {lines} lines; the template promises at most {MAX_LINES}"


@pytest.fixture(scope="module")
def template():
    spec = importlib.util.spec_from_file_location("minimal_numpy_backend_under_test", MODULE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_runtime_refuses_malformed_blobs_with_a_clear_backend_error(template):
    from conformance.api import BackendError, BackendInitContext, Error, FreeableBuffer, MemoryAllocator

    runtime = template.backend_under_test().runtime
    cases = {
        b"": (Error.InvalidProgram, "not a minimal-numpy blob"),
        b"ELF\x7f\x01{}": (Error.InvalidProgram, "not a minimal-numpy blob"),
        b"MNPY\x02{}": (Error.DelegateInvalidCompatibility, "blob version 2, runtime reads 1"),
        b'MNPY\x01{"values": [': (Error.InvalidProgram, "malformed minimal-numpy blob: JSONDecodeError"),
        b'MNPY\x01{"values": [{"op": "aten.digamma.default"}], "outputs": [0]}': (Error.InvalidProgram, "known operator"),
        b'MNPY\x01{"values": [{"input": [2]}], "outputs": [7]}': (Error.InvalidProgram, "an output refers to no value"),
    }
    for blob, (error, words) in cases.items():
        with pytest.raises(BackendError) as caught:
            runtime.init(BackendInitContext(MemoryAllocator(0)), FreeableBuffer(blob), [])
        assert caught.value.error is error and words in caught.value.message, (blob, str(caught.value))


def _installed(tmp_path: Path) -> dict[str, str]:
    """examples/minimal_backend built and installed into a directory put on PYTHONPATH (as tests/test_cli.py's
    _installed does), from a copy, so the build leaves nothing in the source tree."""
    package = tmp_path / "package"
    shutil.copytree(EXAMPLE, package, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(site), str(package)],
        check=True,
        capture_output=True,
    )
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.slow
def test_the_installed_template_is_certified_for_what_it_claims(tmp_path):
    env = {**os.environ, **_installed(tmp_path)}
    out = tmp_path / "reports"
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "certify", "minimal-numpy", "--profile", "claimed",
         "--workers", "1", "--skip-perf", "--output", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = load_report(out / "minimal-numpy" / "report.json")
    assert report["backend"]["name"] == "minimal-numpy"
    categories = {r["id"]: r["category"] for r in report["results"]}
    numerics = {f"test_NUM_001_matches_reference[{op}|float32]" for op in CLAIMED}
    assert {k: v for k, v in categories.items() if k.startswith("test_NUM_001")} == dict.fromkeys(numerics, "PASS")
    # Every contract clause passes, or cannot be observed on this backend (the torchscript-only ones, and
    # the contract programs it refuses: it runs none with index_select, conv, linear or attention).
    assert set(categories.values()) <= {"PASS", "NOT_APPLICABLE"}, {k: v for k, v in categories.items() if v != "PASS"}
    for clause in ("PRE_006", "RT_002", "RT_011", "RT_013", "RT_016", "DBG_002", "DBG_003", "REG_006"):
        assert [v for k, v in categories.items() if k.startswith(f"test_{clause}_")] == ["PASS"], clause
