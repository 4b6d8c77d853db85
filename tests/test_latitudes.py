"""Declared latitude, proven end to end: the seeded backends of tests/seeded/latitudes.py, each the
reference computing one op as an accelerator does, certified through ``certify`` at the
``latitudes`` profile narrowed to that op (float32, numerics only: seconds, not minutes).

Per latitude: declared, the backend is certified and its verdict says "with latitude: NAME";
undeclared, its NUM check fails (a MISMATCH); TF32 declared by a backend that rounds its operands
to bfloat16 instead fails, the message naming tf32. ``reassociation`` is the one latitude every op
with a derived bound grants undeclared (specs/README.md, "Declared latitude"): undeclared, the
reversed sum is certified too, and no latitude is named.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.report.model import load_report
from conformance.results import Category

ROOT = Path(__file__).resolve().parent.parent
SEEDED = "tests/seeded/latitudes.py"
GROUPS = {
    "tf32": (("tf32", "tf32_undeclared", "tf32_exceeded"), "aten.mm.default,aten.addmm.default,aten.convolution.default"),
    "ftz": (("ftz", "ftz_undeclared"), "aten.mul.Tensor"),
    "fast-division": (("fast_division", "fast_division_undeclared"), "aten.div.Tensor"),
    "reassociation": (("reassociation", "reassociation_undeclared"), "aten.sum.dim_IntList"),
    "signed-zero": (("signed_zero", "signed_zero_undeclared"), "aten.relu.default"),
}


def _certify(out: Path, names, ops: str) -> dict[str, dict]:
    """backend attribute name -> its report, from one certify run of ``names`` on ``ops``."""
    command = [
        sys.executable, "-m", "conformance", "certify", *(f"{SEEDED}:{n}" for n in names),
        "--profile", "latitudes", "--ops", ops, "--output", str(out), "--workers", "0", "--skip-perf",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode in (0, 1), f"certify broke (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    reports = {}
    for path in out.glob("*/report.json"):
        report = load_report(path)
        reports[report["backend"]["name"]] = report
    return {n: reports[f"latitude-{n.replace('_', '-')}"] for n in names}


def _num(report) -> list[dict]:
    return [r for r in report["results"] if (r.get("clause") or "").startswith("NUM-")]


@pytest.mark.slow
@pytest.mark.parametrize("latitude", sorted(GROUPS))
def test_a_declared_latitude_is_certified_and_named_and_an_undeclared_one_fails(tmp_path, latitude):
    names, ops = GROUPS[latitude]
    reports = _certify(tmp_path, names, ops)
    declared, undeclared = reports[names[0]], reports[names[1]]

    verdict = declared["verdict"]
    assert verdict["certified"], verdict["text"]
    assert verdict["text"].endswith(f"with latitude: {latitude}"), verdict
    assert declared["backend"]["latitudes"] == [latitude]
    taken = [r["stats"].get("latitudes_taken", {}).get(latitude, 0) for r in _num(declared)]
    assert len(taken) == len(ops.split(",")) and all(taken), taken  # every op needed it

    if latitude == "reassociation":  # the derived bound: any summation order, declared or not
        assert undeclared["verdict"]["certified"] and "with latitude" not in undeclared["verdict"]["text"], undeclared["verdict"]
    else:
        assert not undeclared["verdict"]["certified"] and undeclared["verdict"]["failing_clauses"] == ["NUM-001"]
        failed = [r for r in _num(undeclared) if Category(r["category"]) is Category.MISMATCH]
        assert len(failed) == len(ops.split(",")), [(r["id"], r["category"], r.get("message", "")[:200]) for r in _num(undeclared)]
        assert all("declared latitude" not in r["message"] for r in failed)

    if latitude == "tf32":
        exceeded = reports["tf32_exceeded"]
        assert not exceeded["verdict"]["certified"] and exceeded["verdict"]["failing_clauses"] == ["NUM-001"]
        failed = [r for r in _num(exceeded) if Category(r["category"]) is Category.MISMATCH]
        assert len(failed) == 3 and all("beyond its declared latitude tf32" in r["message"] for r in failed), failed
