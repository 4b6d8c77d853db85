"""NUM: every op x dtype of the profile, on hypothesis-drawn inputs, against the reference.

One check per (op, dtype). Each example: draw a call from the op's spec, get its
program (exported once per structure), compute PyTorch eager and the reference
on it (a disagreement between those two is ORACLE_DISAGREEMENT, the harness's
problem), run the backend through the driver, compare with the oracle.

Claims: an op x dtype the manifest claims must pass; one it does not claim and
refuses cleanly is NOT_SUPPORTED; one it does not claim but accepts is checked
like a claim. The shrunk failing example is saved (call, inputs, expected,
actual, blob) with a command that replays it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from conformance import oracle
from conformance.driver import Driver
from conformance.programs import HarnessError, eager, program_for
from conformance.results import Category, CheckFailure
from conformance.strategies import calls

from . import _support as support


def pytest_generate_tests(metafunc):
    if "op" not in metafunc.fixturenames:
        return
    from conformance.plugin import state

    st_ = state(metafunc.config)
    specs, profile = st_.specs, st_.profile
    params = []
    for core in profile.ops:
        spec = specs.ops[core]
        for name in spec.names:
            for dtype in profile.dtypes.get(core, ()):
                params.append((name, dtype))
    metafunc.parametrize(("op", "dtype"), params, ids=[f"{o}-{d}" for o, d in params])


def _seed(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("|".join(parts).encode()).digest()[:8], "little")


def _replay_dir(config, backend_name: str, op: str, dtype: str) -> Path:
    from conformance.plugin import safe_name

    out = config.getoption("conformance_out")
    root = Path(out) if out else Path(config.rootpath) / ".conformance-replays"
    return root / safe_name(backend_name) / "replays" / safe_name(f"NUM-001-{op}-{dtype}")


def test_NUM_001_matches_reference(backend, result, op, dtype, specs, request):
    spec = specs.op(op)
    claimed = backend.manifest.claims(op, dtype)
    result.set(op=op, dtype=dtype)
    result.stats(claimed=claimed)
    reference = support.reference_backend()
    ref_driver, driver = Driver(reference), Driver(backend)
    worst: dict = {}
    examples = {"count": 0}
    current = settings()
    limit = min(current.max_examples, spec.max_examples or current.max_examples)
    replay_dir = _replay_dir(request.config, backend.name, op, dtype)

    @seed(_seed(op, dtype, current.max_examples.__str__()))
    @settings(
        current,
        max_examples=limit,
        derandomize=False,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def example(data):
        call = data.draw(calls(spec, dtype, op), label="call")
        try:
            program = program_for(call, dynamic=spec.dynamic)
        except HarnessError as exc:
            raise CheckFailure(Category.HARNESS_ERROR, f"{call.describe()}: {exc}") from exc
        try:
            expected_eager = list(eager(call))
        except Exception as exc:
            raise CheckFailure(
                Category.HARNESS_ERROR, f"eager refused the drawn call {call.describe()}: {exc} (fix the op spec's domain)"
            ) from exc
        try:
            expected = ref_driver.run(program.exported, program.inputs, expected_eager).outputs
        except CheckFailure as exc:
            raise CheckFailure(
                Category.ORACLE_DISAGREEMENT, f"the reference failed on {call.describe()}: {exc.message}"
            ) from exc
        for i, (r, e) in enumerate(zip(expected, expected_eager)):
            cmp = oracle.compare(r, e, oracle.tolerance_for(spec, oracle.dtype_name(e.dtype)))
            if not cmp.ok:
                raise CheckFailure(
                    Category.ORACLE_DISAGREEMENT,
                    f"reference and eager disagree on {call.describe()} output {i}: {cmp.message}",
                    stats=cmp.stats(),
                )
        try:
            ran = driver.run(program.exported, program.inputs, expected)
        except CheckFailure as exc:
            if exc.category is Category.NOT_SUPPORTED and not claimed:
                result.not_supported(f"{op} {dtype}: {exc.message}")
            if exc.category is Category.NOT_SUPPORTED:
                exc = CheckFailure(
                    Category.PREPROCESS_FAIL, f"claimed in the manifest but refused: {exc.message}", stage="preprocess"
                )
            _save(replay_dir, call, program.inputs, expected, None, None, exc.message)
            raise exc
        examples["count"] += 1
        for i, (a, e) in enumerate(zip(ran.outputs, expected)):
            tol = oracle.tolerance_for(spec, oracle.dtype_name(e.dtype), backend.manifest, op)
            cmp = oracle.compare(np.asarray(a), e, tol)
            if not cmp.ok:
                message = f"{call.describe()} output {i}: {cmp.message}"
                _save(replay_dir, call, program.inputs, expected, ran.outputs, ran.preprocess_result.processed_bytes, message)
                raise CheckFailure(Category.MISMATCH, message, stats=cmp.stats())
            if not worst or cmp.max_abs >= worst.get("max_abs", 0):
                worst.update(cmp.stats())
                if tol.source != "default":
                    worst["tolerance_source"] = tol.source
                    worst["tolerance_reason"] = tol.reason

    try:
        example()
    except CheckFailure as exc:
        if exc.category.is_failure:
            result.set(replay=f"python -m conformance replay {replay_dir}")
        raise
    result.stats(examples=examples["count"], **worst)


def _save(directory: Path, call, inputs, expected, actual, blob, message: str) -> None:
    """The failing example as files: call.json + arrays.npz (+ blob.bin), for ``conformance replay``."""
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {}
    tensors = call.tensors()
    for i, t in enumerate(tensors):
        arrays[f"tensor{i}"] = _storable(t.value)
    for i, e in enumerate(expected):
        arrays[f"expected{i}"] = _storable(e)
    for i, a in enumerate(actual or ()):
        arrays[f"actual{i}"] = _storable(np.asarray(a))
    np.savez(directory / "arrays.npz", **arrays)
    (directory / "call.json").write_text(json.dumps({"call": call.to_json(), "message": message}, indent=1))
    if blob is not None:
        (directory / "blob.bin").write_bytes(blob)


def _storable(a: np.ndarray) -> np.ndarray:
    # npz cannot hold ml_dtypes' bfloat16; keep its bits and say so in the name of the dtype.
    return a.view(np.uint16) if a.dtype.name == "bfloat16" else a
