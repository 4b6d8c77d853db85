"""The deterministic edge set of every NUM check: what it draws, that it draws it the same way
every time, and that it catches a backend whose only bug is at an edge (issue 9)."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conformance import specs
from conformance.report.model import load_report
from conformance.strategies import calls, directed
from conformance.strategies.directed import LARGE_ELEMENTS, LONG_SIDE, broadcast_patterns, draw_directed, plan

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
        case = add[f"alpha={alpha!r}, edge values"]
        assert case.kwargs["alpha"] == alpha
        assert all(np.isnan(t.value).any() for t in case.tensors()), "each attribute value meets the edge values"
    assert sum(k.startswith("broadcast") for k in add) == len(broadcast_patterns(2))
    sums = _directed("aten.sum.dim_IntList", "float32")
    dims = {(len(c.tensors()[0].value.shape), tuple(c.kwargs["dim"])) for k, c in sums.items() if k.startswith("dim ")}
    assert {(4, (-1,)), (4, (0,)), (4, (1,)), (4, (2,)), (1, (-1,))} <= dims
    assert all(c.tensors()[0].value.size for k, c in sums.items() if k.startswith("dim "))


def _cases(op: str, dtype: str) -> list[tuple[object, object]]:
    """(directive, call) of every directed case of ``op`` in ``dtype`` that applies."""
    spec = SPECS.op(op)
    strategy = calls(spec, dtype, op)
    out = []
    for group in plan(spec, dtype):
        for directive in group:
            call, _ = draw_directed(strategy, directive, op, dtype)
            if call is not None:
                out.append((directive, call))
    return out


PRINCIPLE_OPS = [
    ("aten.convolution.default", "float32"), ("aten.convolution.default", "int8"),
    ("aten.native_layer_norm.default", "float16"), ("aten.native_group_norm.default", "float32"),
    ("aten.addmm.default", "float32"), ("aten.addmm.default", "int32"), ("aten.sum.dim_IntList", "float32"),
    ("aten._softmax.default", "float32"), ("aten.max_pool2d.default", "float32"), ("aten.add.Tensor", "float32"),
    ("aten.convolution_backward.default", "float32"), ("aten.native_layer_norm_backward.default", "float32"),
]  # fmt: skip


@pytest.mark.parametrize(("op", "dtype"), PRINCIPLE_OPS)
def test_every_case_is_nonempty_and_finite_unless_that_is_its_point(op, dtype):
    """Issue 27: a case that varies an attribute drew (0, 0, 1) and compared nothing."""
    for directive, call in _cases(op, dtype):
        if directive.kind == "empty":
            assert any(t.value.size == 0 for t in call.tensors()), directive.label
            continue
        assert all(t.value.size for t in call.tensors()), f"{directive.label}: {call.describe()}"
        if directive.kind not in ("values", "large", "scalar", "attr"):
            for t in call.tensors():
                if t.value.dtype.kind in "fc":
                    assert np.isfinite(t.value.astype(np.complex128)).all(), f"{directive.label}: non-finite input"


@pytest.mark.slow
@pytest.mark.parametrize(("op", "dtype"), [
    ("aten.convolution.default", "float32"), ("aten.convolution.default", "int8"), ("aten.addmm.default", "float32"),
    ("aten.linalg_vector_norm.default", "float32"), ("aten.max_pool2d.default", "float32"),
    ("aten.native_group_norm_backward.default", "float32"), ("aten.sum.dim_IntList", "float32"),
])  # fmt: skip
def test_every_pair_of_attribute_values_meets_in_a_case(op, dtype):
    """Issue 27: attributes were varied one at a time. The pairwise cases (a covering design, far
    fewer than the product) hold every pair of values of two attributes that the signature can draw
    together in one call, on the real-world shape where the signature takes it."""
    spec = SPECS.op(op)
    rows = [d for d, _ in _cases(op, dtype) if d.kind == "pairwise"]
    keys = list(spec.attrs)
    product = np.prod([len(v) for v in spec.attrs.values()])
    assert rows and (len(rows) < product or len(keys) == 2), f"{len(rows)} rows for a product of {product}"
    covered = {(a, repr(r.attrs[a]), b, repr(r.attrs[b])) for r in rows for i, a in enumerate(keys) for b in keys[i + 1:]}
    strategy = calls(spec, dtype, op)
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            for va in spec.attrs[a]:
                for vb in spec.attrs[b]:
                    if (a, repr(va), b, repr(vb)) in covered:
                        continue
                    # a pair no row holds must be one the signature cannot draw, whatever the other attributes
                    for other in itertools.product(*(spec.attrs[k] for k in keys if k not in (a, b))):
                        row = dict(zip([k for k in keys if k not in (a, b)], other)) | {a: va, b: vb}
                        directive = directed._pair_row(spec, {k: row[k] for k in keys})
                        assert draw_directed(strategy, directive, op, dtype)[0] is None, f"pair {a}={va!r}, {b}={vb!r} missing"
    model = [c for d, c in _cases(op, dtype) if d.kind == "pairwise" and d.shape == "model"]
    assert len(model) == len(rows) or op == "aten.max_pool2d.default" and not model, "pairwise rows on the real-world shape"


@pytest.mark.parametrize("op", ["aten.sum.dim_IntList", "aten.sum.default", "aten.cumsum.default", "aten._log_softmax.default",
                                "aten.mm.default", "aten.addmm.default", "aten.native_layer_norm.default"])
def test_a_finite_large_input_reduces_thousands_of_elements(op):
    """Issue 27: the large input of a reduction holds NaN, and its reduction summed 393 elements."""
    cases = {d.kind: c for d, c in _cases(op, "float32")}
    assert "large_finite" in cases, op
    call = cases["large_finite"]
    x = max(call.inputs(), key=lambda t: t.value.size).value
    assert x.size >= LARGE_ELEMENTS and np.isfinite(x).all()
    reduced = x.shape[-1] if call.kwargs.get("dim") not in (None, []) or op.startswith("aten.native") else x.size
    if op in ("aten.mm.default", "aten.addmm.default"):
        reduced = x.shape[-1]  # the contracted size of mat1 (M, K)
    assert reduced >= 1000 and reduced >= LONG_SIDE
    dim = call.kwargs.get("dim")
    assert dim in (None, -1, [-1]), dim


@pytest.mark.parametrize("op", ["aten._softmax.default", "aten._log_softmax.default", "aten.logsumexp.default",
                                "aten.linalg_vector_norm.default", "aten.native_layer_norm.default", "aten.native_group_norm.default"])
def test_normalizing_ops_meet_a_wide_finite_spread(op):
    """Issue 27: no finite input spread widely along a softmax's dim (exp without the max subtracted
    overflows float32 from 89)."""
    cases = {d.kind: c for d, c in _cases(op, "float32")}
    x = cases["spread"].inputs()[0].value
    assert np.isfinite(x).all() and x.max() > 89 and x.min() < -89 and x.shape[-1] >= 64
    assert cases["spread"].kwargs.get("dim", -1) in (-1, [-1])


@pytest.mark.parametrize("op", ["aten.convolution.default", "aten.convolution_backward.default", "aten.native_layer_norm.default",
                                "aten.native_group_norm.default", "aten.native_layer_norm_backward.default",
                                "aten.native_group_norm_backward.default", "aten.addmm.default", "aten.mm.default", "aten.linear.default"])
def test_self_shaping_signatures_take_edge_empty_and_large_cases(op):
    """Issue 27: convolution, the normalizations and addmm drew their own shapes, so the edge-value,
    empty and large cases did not apply to them."""
    cases = {d.kind: c for d, c in _cases(op, "float32")}
    assert {"values", "empty", "large", "large_finite", "model"} <= set(cases), sorted(cases)
    assert any(t.value.size == 0 for t in cases["empty"].inputs())
    assert max(t.value.size for t in cases["large"].inputs()) >= LARGE_ELEMENTS
    edge_input = cases["values"].inputs()[0 if "backward" not in op else 1].value
    assert len(set(edge_input.ravel().tolist()) - {float("nan")}) >= 10, "the edge values reach the data input"


def test_convolution_edge_values_hold_specials_but_no_overflowing_sum():
    """specs/README.md, "The edge set": the convolution's edge values put NaN and +-inf in its input
    and keep every finite magnitude small (weights ordinary), so no finite sum passes float32's range."""
    cases = {d.label: c for d, c in _cases("aten.convolution.default", "float32")}
    x, w, *_ = cases["edge values"].tensors()
    assert np.isnan(x.value).any() and np.isinf(x.value).any()
    assert np.isfinite(w.value).all()
    finite = np.abs(x.value[np.isfinite(x.value)]).max()
    assert finite * np.abs(w.value).max() * w.value[0].size < np.finfo(np.float32).max / 1e30


def test_new_case_kinds_are_reported():
    from conformance.specs import EDGE_KINDS

    assert {"large_finite", "spread", "pairwise", "attr", "large", "empty", "values"} <= set(EDGE_KINDS)


@pytest.mark.slow
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


@pytest.mark.slow
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
    report = load_report(next(out.glob("*/report.json")))
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
