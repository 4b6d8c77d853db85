"""MOD: whole models, end to end, against the reference and eager.

One check per model of the profile (specs/models.toml; conformance/models.py builds them). The
model is lowered once (preprocess, init) and executed on its own inputs, on the edge set (every
input at the low and the high end of its spec'd range, and zeros) and on hypothesis-drawn
inputs in those ranges. Each execution's outputs are compared with the reference's (the
reference's with eager's first: a disagreement there is ORACLE_DISAGREEMENT), within the
model's tolerance for its depth (``ModelSpec.tolerance``). The check records per-output
statistics over every execution (max abs, MAE, SNR, max ULP), against the reference and against
eager, and, when an output differs, names
the first operator that goes wrong (``conformance.localize``): the verdict stays MISMATCH on the
model's output, the message and the stats say where it starts.

A model the backend refuses at preprocess is NOT_SUPPORTED, naming the ops its manifest does not
claim; refusing a model made only of claimed ops is PREPROCESS_FAIL.
"""

from __future__ import annotations

import hashlib

import numpy as np
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from conformance import localize, oracle
from conformance.api.tensors import to_numpy, to_torch
from conformance.driver import Driver
from conformance.results import Category, CheckFailure

from . import _support as support


def pytest_generate_tests(metafunc):
    if "model" not in metafunc.fixturenames:
        return
    from conformance.plugin import state

    models = state(metafunc.config).profile.models
    metafunc.parametrize("model", models, ids=list(models))


def edge_inputs(spec, like: tuple[np.ndarray, ...]) -> list[tuple[str, tuple[np.ndarray, ...]]]:
    """Every input at the low end of its range, at the high end, and zeros (where 0 is in range)."""
    out = []
    for label, pick in (("low", lambda r, a: r.low), ("high", lambda r, a: r.high - (0 if a.dtype.kind == "f" else 1)), ("zeros", lambda r, a: 0)):
        values = tuple(np.full(a.shape, pick(r, a), dtype=a.dtype) for r, a in zip(spec.inputs, like))
        if label == "zeros" and any(not r.low <= 0 < r.high for r in spec.inputs):
            continue
        out.append((label, values))
    return out


def drawn_inputs(spec, like: tuple[np.ndarray, ...], seed_value: int) -> tuple[np.ndarray, ...]:
    """Inputs of ``like``'s shapes and dtypes, uniform in the spec'd ranges (NumPy from a drawn seed)."""
    rng = np.random.default_rng(seed_value)
    out = []
    for r, a in zip(spec.inputs, like):
        if a.dtype.kind == "f":
            out.append(rng.uniform(r.low, r.high, size=a.shape).astype(a.dtype))
        else:
            out.append(rng.integers(int(r.low), int(r.high), size=a.shape).astype(a.dtype))
    return tuple(out)


class _Worst:
    """Per-output statistics over every execution: the largest max abs, MAE and ULP, the lowest SNR."""

    def __init__(self):
        self.outputs: list[dict] = []

    def add(self, comparisons: list[oracle.Comparison]) -> None:
        for i, cmp in enumerate(comparisons):
            if i == len(self.outputs):
                self.outputs.append({"shape": list(cmp.shape), "max_abs": 0.0, "mae": 0.0, "max_ulp": 0.0, "snr_db": None})
            o = self.outputs[i]
            o["max_abs"] = max(o["max_abs"], float(cmp.max_abs))
            o["mae"] = max(o["mae"], float(cmp.mae))
            o["max_ulp"] = max(o["max_ulp"], float(cmp.max_ulp))
            if cmp.snr_db is not None:
                o["snr_db"] = float(cmp.snr_db) if o["snr_db"] is None else min(o["snr_db"], float(cmp.snr_db))

    def stats(self) -> list[dict]:
        """JSON-ready (an SNR of identical outputs is infinite: "inf", as oracle statistics write it)."""
        return [{**o, "snr_db": o["snr_db"] if o["snr_db"] is None or np.isfinite(o["snr_db"]) else str(o["snr_db"])} for o in self.outputs]


def test_MOD_001_model_matches_reference(backend, result, model, specs):
    from conformance.models import model_program

    spec = specs.models[model]
    result.set(model=model)
    try:
        program = model_program(model)
    except Exception as exc:
        raise CheckFailure(Category.HARNESS_ERROR, f"{model}: the model did not export: {type(exc).__name__}: {exc}") from exc
    if len(spec.inputs) != len(program.inputs):
        raise CheckFailure(
            Category.HARNESS_ERROR,
            f"{model}: specs/models.toml gives {len(spec.inputs)} input range(s), the model takes {len(program.inputs)}",
        )
    tolerance = spec.tolerance(program.depth)
    result.stats(
        depth=program.depth,
        nodes=sum(1 for n in program.exported.graph.nodes if n.op == "call_function"),
        atol=tolerance.atol,
        rtol=tolerance.rtol,
    )
    driver, reference = Driver(backend), Driver(support.reference_backend())
    try:
        lowered, _ = driver.preprocess(program.fresh())
    except CheckFailure as exc:
        if exc.category is not Category.NOT_SUPPORTED:
            raise
        unclaimed = sorted(op for op in program.ops if op != "getitem" and not backend.manifest.claims(op, "float32"))
        if not unclaimed:
            raise CheckFailure(
                Category.PREPROCESS_FAIL,
                f"{model}: the manifest claims every op of the model, but preprocess refused it: {exc.message}",
                stage="preprocess",
            ) from exc
        result.not_supported(f"{model}: refused at preprocess ({exc.message}); ops the manifest does not claim: {', '.join(unclaimed)}")
    module = program.exported.module()
    worst, worst_eager = _Worst(), _Worst()
    examples = {"count": 0}
    failure: list = []

    loaded = driver.init(lowered)
    expected_handle = reference.init(reference.preprocess(program.fresh())[0])
    try:

        def check(label: str, inputs: tuple[np.ndarray, ...]) -> None:
            import torch

            with torch.no_grad():
                out = module(*[to_torch(a) for a in inputs])
            eager = [to_numpy(o) for o in (out if isinstance(out, (list, tuple)) else (out,))]
            expected = reference.execute(expected_handle, inputs, eager).outputs
            for i, (r, e) in enumerate(zip(expected, eager)):
                cmp = oracle.compare(np.asarray(r), e, tolerance)
                if not cmp.ok:
                    raise CheckFailure(
                        Category.ORACLE_DISAGREEMENT, f"{model} [{label}]: reference and eager disagree on output {i}: {cmp.message}"
                    )
            got = driver.execute(loaded, inputs, expected).outputs
            compared = [oracle.compare(np.asarray(a), np.asarray(e), tolerance) for a, e in zip(got, expected)]
            examples["count"] += 1
            worst.add(compared)
            worst_eager.add([oracle.compare(np.asarray(a), e, tolerance) for a, e in zip(got, eager)])
            bad = next(((i, c) for i, c in enumerate(compared) if not c.ok), None)
            if bad is not None and not failure:
                failure.append((label, inputs, *bad))

        check("own inputs", program.inputs)
        for label, inputs in edge_inputs(spec, program.inputs):
            if not failure:
                check(label, inputs)
        if spec.examples and not failure:

            @seed(int.from_bytes(hashlib.sha256(f"MOD-001|{model}".encode()).digest()[:8], "little"))
            @settings(max_examples=spec.examples, database=None, deadline=None, suppress_health_check=list(HealthCheck))
            @given(seed_value=st.integers(0, 2**32 - 1))
            def drawn(seed_value):
                if not failure:  # record the first difference; no shrinking (localization says where)
                    check(f"drawn, seed {seed_value}", drawn_inputs(spec, program.inputs, seed_value))

            drawn()
    finally:
        driver.destroy(loaded)
        reference.destroy(expected_handle)
    result.stats(examples=examples["count"], outputs=worst.stats(), outputs_vs_eager=worst_eager.stats())
    if failure:
        label, inputs, index, cmp = failure[0]
        message = f"{model} [{label}] output {index}: {cmp.message}"
        stats = {**cmp.stats()}
        try:
            found = localize.localize(backend, program.fresh(), inputs, spec.tolerance)
        except Exception as exc:  # noqa: BLE001 - the verdict stands without the localization
            message += f"; localization failed: {type(exc).__name__}: {exc}"
        else:
            message += "; " + (found.describe() if found else "every operator's output matches: the difference is in how the outputs were delivered")
            if found:
                stats["localization"] = found.stats()
        raise CheckFailure(Category.MISMATCH, message, stats=stats)
