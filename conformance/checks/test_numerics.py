"""NUM: every op x dtype of the profile, on hypothesis-drawn inputs, against the reference.

One check per (op, dtype). Each example: draw a call from the op's spec, build its
single-op program, compute PyTorch eager and the reference kernel on the call (a
disagreement between those two is ORACLE_DISAGREEMENT, the harness's problem), run
the backend on the program through the driver, compare with the oracle.

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
from hypothesis import HealthCheck, given, reject, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from conformance import oracle
from conformance.driver import Driver
from conformance.programs import HarnessError, eager, program_for
from conformance.results import Category, CheckFailure
from conformance.strategies import calls


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
    driver = Driver(backend)
    worst: dict = {}
    examples = {"count": 0}
    refused: list[str] = []  # a claimed op's refusals, by drawn example
    meta_disagreements: list[str] = []  # examples whose program PyTorch itself shapes unlike eager
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
            expected_eager = list(eager(call))
        except Exception as exc:
            raise CheckFailure(
                Category.HARNESS_ERROR, f"eager refused the drawn call {call.describe()}: {exc} (fix the op spec's domain)"
            ) from exc
        try:
            program = program_for(call, dynamic=spec.dynamic)
        except HarnessError as exc:
            raise CheckFailure(Category.HARNESS_ERROR, f"{call.describe()}: {exc}") from exc
        except Exception as exc:
            # Eager computes the call but PyTorch's tracing (its meta kernel) refuses it (seen:
            # linalg_vector_norm's inf norm of an empty tensor): no program, so no test of a backend.
            if not meta_disagreements:
                meta_disagreements.append(f"{call.describe()}: tracing refused a call eager computes: {exc}")
            reject()
        declared = _declared_shapes(program.exported)
        if declared is not None and declared != [tuple(e.shape) for e in expected_eager]:
            # PyTorch's own meta kernel disagrees with eager on this call (seen: aten.index.Tensor on
            # empty operands); no backend can honour both, so the example is not a test of one.
            if not meta_disagreements:
                meta_disagreements.append(f"{call.describe()}: program declares {declared}, eager gives "
                                          f"{[list(e.shape) for e in expected_eager]}")
            reject()
        try:
            expected = _reference(call)
        except Exception as exc:
            raise CheckFailure(
                Category.ORACLE_DISAGREEMENT, f"the reference failed on {call.describe()}: {type(exc).__name__}: {exc}"
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
                # A claimed op refused on this draw (e.g. a documented shape restriction): count it,
                # keep the first for replay, and go on drawing, so the check still measures the
                # numerics of the examples the backend takes. The refusal fails the check at the end.
                if not refused:
                    _save(replay_dir, call, program.inputs, expected, None, None, exc.message)
                refused.append(exc.message)
                if len(refused) <= limit:
                    reject()
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
        try:
            example()
        except Unsatisfiable:
            if not refused:
                raise
        if refused:
            ran = examples["count"]
            raise CheckFailure(
                Category.PREPROCESS_FAIL,
                f"claimed in the manifest but refused {len(refused)} drawn example(s) "
                f"({f'the {ran} it took match the reference' if ran else 'it took none'}); first: {refused[0]}",
                stage="preprocess",
                stats={"refused": len(refused), "examples": ran, **worst},
            )
    except CheckFailure as exc:
        if exc.category.is_failure:
            result.set(replay=f"python -m conformance replay {replay_dir}")
        raise
    if meta_disagreements:
        result.stats(skipped_meta_disagreement=meta_disagreements[0])
    result.stats(examples=examples["count"], **worst)


def _declared_shapes(exported) -> list[tuple] | None:
    """The program's output shapes, or None where they are symbolic (an exported dynamic program)."""
    try:
        return [tuple(int(d) for d in n.meta["val"].shape) for n in exported.graph.output_node().args[0]]
    except (TypeError, ValueError, AttributeError, KeyError):
        return None


def _reference(call) -> list[np.ndarray]:
    """The reference kernel's outputs for ``call``, called directly.

    The same values the reference backend computes for the call's program (its runtime
    calls this kernel on these arguments; tests/harness/test_programs.py shows the
    program path bit-identical), without lowering and running a second program per example.
    """
    from reference_backend.kernels import KERNELS

    args, kwargs = call.numpy_args()
    out = KERNELS[call.op](*args, **kwargs)
    return [np.array(o, order="C", copy=True) for o in (out if isinstance(out, (tuple, list)) else (out,))]  # 0-d stays 0-d


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
