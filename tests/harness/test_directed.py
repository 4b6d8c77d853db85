"""The deterministic edge set of every NUM check: what it draws, that it draws it the same way
every time, and that it catches a backend whose only bug is at an edge (issue 9)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conformance import specs
from conformance.strategies import calls
from conformance.strategies.directed import LARGE_ELEMENTS, broadcast_patterns, draw_directed, plan

SPECS = specs.load()


def _directed(op: str, dtype: str) -> dict[str, object]:
    spec = SPECS.op(op)
    strategy = calls(spec, dtype, op)
    out = {}
    for group in plan(spec, dtype):
        for directive in group:
            call, _ = draw_directed(strategy, directive, op, dtype)
            if call is not None:
                out[directive.label] = call
    return out


def test_edge_values_reach_the_op_in_every_pair():
    cases = _directed("aten.add.Tensor", "float32")
    a, b = (t.value for t in cases["edge values"].tensors())
    for x in (a, b):
        flat = x.astype(np.float64).ravel()
        assert np.isnan(flat).any() and np.isposinf(flat).any() and np.isneginf(flat).any()
        assert any(v == 0 and math.copysign(1, v) < 0 for v in flat), "-0.0 missing"
        assert (np.abs(flat[np.isfinite(flat)]) == np.finfo(np.float32).smallest_subnormal).any()
    assert np.broadcast_shapes(a.shape, b.shape) == (a.size, b.size), "binary edges must meet as an outer product"


def test_large_empty_and_scalar_cases():
    cases = _directed("aten.exp.default", "float32")
    assert cases[next(k for k in cases if k.startswith("large"))].tensors()[0].value.size >= LARGE_ELEMENTS
    assert cases["empty tensor"].tensors()[0].value.size == 0
    assert cases["0-d tensor of edge values"].tensors()[0].value.shape == ()


def test_every_attribute_value_dim_and_broadcast_pattern():
    add = _directed("aten.add.Tensor", "float32")
    for alpha in SPECS.op("aten.add.Tensor").attrs["alpha"]:
        assert add[f"alpha={alpha!r}"].kwargs["alpha"] == alpha
    assert sum(k.startswith("broadcast") for k in add) == len(broadcast_patterns(2))
    sums = _directed("aten.sum.dim_IntList", "float32")
    dims = {(len(c.tensors()[0].value.shape), tuple(c.kwargs["dim"])) for k, c in sums.items() if k.startswith("dim ")}
    assert {(4, (-1,)), (4, (0,)), (4, (1,)), (4, (2,)), (1, (-1,))} <= dims
    assert all(c.tensors()[0].value.size for k, c in sums.items() if k.startswith("dim "))


def test_the_same_calls_in_every_process():
    script = textwrap.dedent(
        """
        import hashlib, json, numpy as np
        from conformance import specs
        from conformance.strategies import calls
        from conformance.strategies.directed import draw_directed, plan
        out = {}
        for op, dtype in [("aten.add.Tensor", "bfloat16"), ("aten.sum.dim_IntList", "int32"), ("aten.gelu.default", "float16")]:
            spec = specs.load().op(op)
            for group in plan(spec, dtype):
                for d in group:
                    call, _ = draw_directed(calls(spec, dtype, op), d, op, dtype)
                    if call is not None:
                        h = hashlib.sha256(call.describe().encode())
                        for t in call.tensors():
                            h.update(np.ascontiguousarray(t.value).view(np.uint8).tobytes())
                        out[f"{op}|{dtype}|{d.label}"] = h.hexdigest()
        print(json.dumps(out))
        """
    )
    runs = [
        json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env).stdout)
        for env in ({"PYTHONHASHSEED": "1", "PATH": ""}, {"PYTHONHASHSEED": "2", "PATH": ""})
    ]
    assert runs[0] == runs[1] and len(runs[0]) > 30


@pytest.mark.parametrize("name", ["relu_nan_is_zero"])
def test_a_plain_eager_backend_with_relu_nan_zero_fails_core_fp32(tmp_path, name):
    """Issue 9: such a backend was certified by core-fp32 at the ci profile (no NaN ever reached relu)."""
    backend = tmp_path / "eager_backend.py"
    backend.write_text(EAGER_BACKEND)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "certify", f"{backend}:backend", "--profile", "core-fp32",
         "--skip-perf", "--workers", "0", "--output", str(out), "-k", "NUM and relu"],
        capture_output=True, text=True,
    )
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(next(out.glob("*/report.json")).read_text())
    relu = [r for r in report["results"] if "aten.relu.default" in r["id"]]
    assert relu and relu[0]["category"] == "MISMATCH", relu
    assert "NaN" in relu[0]["message"]


EAGER_BACKEND = '''
"""A backend that runs every program with PyTorch eager, except that its relu maps NaN to 0."""
import io

import numpy as np
import torch

from conformance.api import BackendDetails, BackendError, BackendInterface, BackendUnderTest, Error, PreprocessResult
from conformance.api.tensors import to_numpy, to_torch


class Details(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        buffer = io.BytesIO()
        torch.export.save(edge_program, buffer)
        return PreprocessResult(processed_bytes=buffer.getvalue())


def _relu(x):
    return torch.where(x > 0, x, torch.zeros_like(x))  # NaN > 0 is false: NaN becomes 0


class Runtime(BackendInterface):
    def is_available(self):
        return True

    def init(self, context, processed, compile_specs):
        try:
            program = torch.export.load(io.BytesIO(bytes(processed.data)))
        except Exception as exc:
            raise BackendError(Error.InvalidProgram, f"not a saved program: {exc}") from None
        module = program.module()
        for node in module.graph.nodes:
            if node.op == "call_function" and node.target is torch.ops.aten.relu.default:
                node.target = _relu
        module.recompile()
        return {"module": module, "live": True}

    def execute(self, context, handle, args):
        if not isinstance(handle, dict) or not handle.get("live"):
            return Error.DelegateInvalidHandle
        n_out = len(args) - len(handle["module"].graph.find_nodes(op="placeholder"))
        inputs = [to_torch(a.value) for a in args[: len(args) - n_out]]
        with torch.no_grad():
            result = handle["module"](*inputs)
        for slot, value in zip(args[len(args) - n_out:], result if isinstance(result, (tuple, list)) else (result,)):
            slot.value[...] = to_numpy(value)
        return Error.Ok

    def destroy(self, handle):
        handle["live"] = False


def backend():
    return BackendUnderTest(name="eager-relu-nan-zero", details=Details, runtime=Runtime(), version="1")
'''
