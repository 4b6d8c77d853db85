"""On a backend whose runs are slow, a NUM check batches its edge set (one program holds up to
eight calls): the verdicts are the single calls' verdicts, with their replays."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.compat import torch as compat_torch
from conformance.report.model import load_report

ROOT = Path(__file__).resolve().parents[2]


def _certify(tmp_path: Path, backend: str, selection: str) -> dict[str, dict]:
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "conformance", "certify", f"tests/seeded/defects.py:{backend}", "--profile", "seeded",
        "--output", str(out), "--workers", "0", "--skip-perf", "-k", selection,
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env.update(CONFORMANCE_TEST_SLEEP_MS="300")
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    (path,) = out.glob("*/report.json")
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    return {r["op"]: r for r in load_report(path)["results"] if r.get("op")}, out


@pytest.mark.slow
@pytest.mark.skipif(not compat_torch.builds_programs(), reason="programs are exported (compat.torch.builds_programs): no batch")
def test_a_failure_inside_a_batch_is_the_single_calls_failure_with_its_replay(tmp_path):
    results, out = _certify(tmp_path, "slow_negative_dims", "NUM and (sum or relu)")
    relu, total = results["aten.relu.default"], results["aten.sum.dim_IntList"]
    assert relu["category"] == "PASS" and relu["stats"]["batched"] > 0  # batched, and nothing lost
    assert relu["stats"]["compared"] == relu["stats"]["batched"] + relu["stats"]["examples"] + 2 + sum(relu["stats"]["layouts"].values())
    assert total["category"] in ("MISMATCH", "EXECUTE_FAIL"), total
    assert "batch of" not in total["message"] and "aten.sum.dim_IntList(" in total["message"]  # one call named
    replay = next(out.glob("*/replays/NUM-001-aten.sum.dim_IntList-float16"))
    call = json.loads((replay / "call.json").read_text())
    assert call["call"]["op"] == "aten.sum.dim_IntList"
