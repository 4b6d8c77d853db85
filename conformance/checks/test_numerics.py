"""NUM: every op x dtype of the profile, on an edge set and hypothesis-drawn inputs, against the reference.

One check per (op, dtype), in three parts: the deterministic edge set and coverage plan
of conformance/strategies/directed.py (edge values, a large input, empty and 0-d tensors,
every attribute value, every dim, every broadcast pattern), the same values handed to the
backend in non-contiguous layouts (transposed, offset and strided, channels-last), then
the hypothesis draws. Each example: build its single-op program, compute PyTorch eager and
the reference kernel on the call (a disagreement between those two is
ORACLE_DISAGREEMENT, the harness's problem), run the backend on the program through the
driver, compare with the oracle. The result counts the edge cases applied by kind, those
that do not apply to the op, and the layouts checked.

Claims and refusals: a refusal is only a ``BackendError(NotSupported)`` from preprocess (any
other exception is PREPROCESS_FAIL, claimed op or not). A check never stops at a refusal: it
keeps drawing, compares every draw the backend accepts, and summarizes what it refused by kind
(``Call.features``: empty, 0-d, rank N, mixed dtypes, broadcasting, large). An op the manifest
claims may refuse only the kinds its ``refuses`` declares; any other refusal fails the check.
An op it does not claim is NOT_SUPPORTED when it refuses every draw (the real-world shapes, which
come first, and the edge values: then the check stops early); otherwise its accepted draws are
compared like a claim's.

Failures: a check does not stop at its first failing case either. It runs its remaining cases
(edge set, layouts, hypothesis draws; hypothesis is never handed the failure, so nothing is
shrunk: the edge cases are small already) within a budget of time after the first failure
(``failure_budget``), and summarizes its failing cases by outcome (a failing stage, or for a
MISMATCH the kind of element violation the oracle counts) and by the kinds of case they share
(``Call.features``, special input and expected values, where the case came from, its layout),
each out of the cases of that kind it ran: the result's ``failures``. The verdict is the first
failure's: its category and message, and its example, saved (call, inputs, expected, actual,
blob) with a command that replays it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, reject, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from conformance.api.tensors import INPUT_LAYOUTS, layout_applies, one_strided
from conformance.compat.hypothesis import without_database_key
from conformance.results import Category, CheckFailure
from conformance.strategies import calls
from conformance.strategies.directed import draw_directed, plan

from ._num_case import BudgetSpent, NumCase


class _EnoughRefusals(BaseException):
    """Ends the hypothesis phase of a check whose draws the backend keeps refusing. A BaseException,
    so hypothesis lets it through instead of shrinking it as a failure."""


BATCH = 8
"""Directed calls per batch program on a backend whose preprocess is slow."""


def pytest_generate_tests(metafunc):
    if "op" not in metafunc.fixturenames:
        return
    from conformance.plugin import state

    st_ = state(metafunc.config)
    specs, profile = st_.specs, st_.profile
    params = []
    for core_op in profile.ops:
        spec = specs.ops[core_op]
        for name in spec.names:
            for dtype in profile.dtypes.get(core_op, ()):
                params.append((name, dtype))
    metafunc.parametrize(("op", "dtype"), params, ids=[f"{o}-{d}" for o, d in params])


def _seed(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("|".join(parts).encode()).digest()[:8], "little")


def _replay_dir(config, backend_name: str, op: str, dtype: str) -> Path:
    """Beside the backend's report: the directory is named after the backend as requested (--conformance-backend)."""
    from conformance.run.files import safe_name

    out = config.getoption("conformance_out")
    root = Path(out) if out else Path(config.rootpath) / ".conformance-replays"
    replays = root / safe_name(backend_name) / "replays"
    return replays / safe_name(f"NUM-001-{op}-{dtype}")


def _layout_targets(applied: list[tuple]) -> list[tuple]:
    """Which directed calls to re-run with non-contiguous inputs, and how: each tensor operand in
    each layout in turn, the others contiguous (``one_strided``), on the first call whose operand at
    that position allows the layout. One operand at a time because a kernel that walks every operand
    with the first one's strides is right whenever they share a layout (issue 27: add failed, sub of
    the same kernel passed, when the layout re-run strided both)."""
    out = []
    for layout in INPUT_LAYOUTS[1:]:
        for position in range(max((len(call.inputs()) for _, call, _ in applied), default=0)):
            for label, call, done in applied:
                inputs = call.inputs()
                if position < len(inputs) and layout_applies(inputs[position].value, layout):
                    out.append((label, call, done, one_strided(layout, position, len(inputs))))
                    break
    return out


def test_NUM_001_matches_reference(backend, result, op, dtype, specs, request):
    spec = specs.op(op)
    claimed = backend.manifest.claims(op, dtype)
    result.set(op=op, dtype=dtype)
    result.stats(claimed=claimed)
    requested = request.node.callspec.params.get("backend", backend.name)
    timeout = float(request.config.getoption("timeout", default=None) or 0) or None
    case = NumCase(backend, spec, op, dtype, claimed, _replay_dir(request.config, requested, op, dtype), result, requested, specs, timeout)
    strategy = calls(spec, dtype, op)
    current = settings()
    limit = min(current.max_examples, spec.max_examples or current.max_examples)
    directed_counts: dict[str, int] = {}
    not_applied: dict[str, int] = {}
    layouts: list[str] = []
    drawn = {"count": 0, "refused": 0}

    def depth() -> dict:
        """What the check ran: examples, edge cases by kind, layouts, compared and refused draws."""
        return dict(
            examples=drawn["count"],
            edge_cases=directed_counts,
            edge_cases_not_applicable=not_applied,
            layouts=layouts,
            compared=case.compared,
            refused=case.declared + len(case.refused),
            refusals=case.refusals,
            **({"batched": case.batched} if case.batched else {}),
            **({"latitudes_taken": dict(sorted(case.latitudes.items()))} if case.latitudes else {}),
            **({"refusal_summary": case.refusal_summary()} if case.refusals else {}),
        )

    try:
        try:
            _directed_and_layouts(case, spec, op, dtype, strategy, directed_counts, not_applied, layouts)
            _drawn(case, strategy, op, dtype, current, limit, drawn)
        except BudgetSpent:
            pass  # a failing check's time after its first failure is spent (case.cut_short)
        if case.first is not None:
            # The verdict is the first failure; the rest are counted by kind.
            result.set(failures=case.failure_summary())
            result.stats(**depth())
            raise case.first
        if case.refused and claimed:
            raise CheckFailure(
                Category.PREPROCESS_FAIL,
                f"claimed in the manifest but refused {len(case.refused)} example(s) its manifest does not declare "
                f"({f'the {case.compared} it took match the reference' if case.compared else 'it took none'}); "
                f"{case.refusal_summary()}; first: {case.refused[0]}",
                stage="preprocess",
                stats={"refused": len(case.refused) + case.declared, "refusals": case.refusals, "compared": case.compared, **case.worst},
            )
        if not case.compared and not case.refused and not case.declared and case.meta_disagreements:
            # Nothing reached the backend: a pass would certify an op no program of the harness carried.
            raise CheckFailure(
                Category.HARNESS_ERROR,
                f"{op} {dtype}: no call reached the backend, PyTorch's tracing set every one aside; first: {case.meta_disagreements[0]}",
            )
        case.not_supported_if_nothing_taken()
        if not case.compared and not claimed:
            result.stats(refused=case.declared + len(case.refused), refusals=case.refusals, refusal_summary=case.refusal_summary(), compared=0)
            result.not_supported(f"{op} {dtype}: {case.refusal_summary()}; first: {case.first_refusal}")
    except CheckFailure as exc:
        _fail(result, case, exc)
    if case.meta_disagreements:
        result.stats(skipped_meta_disagreement=case.meta_disagreements[0])
    result.stats(**depth(), **case.worst)


def _directed_and_layouts(case: NumCase, spec, op: str, dtype: str, strategy, directed_counts: dict, not_applied: dict, layouts: list) -> None:
    """1. The deterministic edge set and coverage plan (conformance/strategies/directed.py); 2. input
    layouts: strided, offset and channels-last views of the same values (and the same program: what a
    backend did to its copy of the program shows in PRE-003, not here)."""
    applied: list[tuple[str, object, list]] = []
    seen: set[str] = set()
    pending: list[tuple[object, object]] = []  # directed calls waiting for a batch (slow backends)

    def settle():
        """Run the pending directed calls: one by one, or as batches once preprocess proves slow."""
        items = list(pending)
        pending.clear()
        for directive, _ in items:
            case.origins[directive.label] = directive.kind
        try:
            done_all = case.run_batch([(d.label, c) for d, c in items]) if len(items) > 1 else [case.run(c, label=d.label) for d, c in items]
        except CheckFailure as exc:
            _fail(case.result, case, exc)
        for (directive, call), done in zip(items, done_all):
            if done is not None:
                directed_counts[directive.kind] = directed_counts.get(directive.kind, 0) + 1
                applied.append((directive.label, call, done))

    for group in plan(spec, dtype):
        misses = 0
        for i, directive in enumerate(group):
            call, missing = draw_directed(strategy, directive, op, dtype)
            if call is None:
                not_applied[directive.kind] = not_applied.get(directive.kind, 0) + 1
                misses = misses + 1 if missing - {"shape", "draw", "values", "scalar"} else 0
                if misses == 2 and i == 1:
                    not_applied[directive.kind] += len(group) - 2
                    break  # the op has no such attribute, dim or broadcasting operand
                continue
            key = call.describe() + _digest(call)
            if key in seen:
                continue  # two directives that lead to the same call (e.g. a forced attr's default)
            seen.add(key)
            pending.append((directive, call))
            if not case.slow or len(pending) >= BATCH:
                settle()
        if not case.slow:
            settle()
            case.not_supported_if_nothing_taken()
    settle()
    for label, call, (expected, program), layout in _layout_targets(applied):
        try:
            if case.run(call, label=label, layout=layout, expected=expected, program=program) is not None:
                layouts.append(next(name for name in layout if name != "contiguous"))
        except CheckFailure as exc:
            _fail(case.result, case, exc)
    _weights(case, spec, applied, directed_counts, not_applied)


WEIGHT_CASES = 6
"""Directed calls re-run with their weights as program constants, and as runtime inputs (each way
the draw did not already take): the first ones of the plan (real-world shapes, edge values, large)."""


def _weights(case: NumCase, spec, applied: list[tuple], directed_counts: dict, not_applied: dict) -> None:
    """The ``weights`` cases (op spec ``weights``): the same values with the weight arguments as
    program constants (lifted parameters, read from named data at init), and as runtime inputs. A
    backend that delegates only constant weights (XNNPACK's linear and convolution) is compared on
    them; one that computes a constant weight another way than an input is caught."""
    from conformance.programs import WEIGHT_ROLES, with_weights

    if not spec.weights:
        return
    for how, role in WEIGHT_ROLES.items():
        flipped = [(label, other, expected) for label, call, (expected, _) in applied
                   if (other := with_weights(call, spec.weights, role)) is not None][:WEIGHT_CASES]
        if not flipped:
            not_applied["weights"] = not_applied.get("weights", 0) + 1
        for label, call, expected in flipped:
            try:
                if case.run(call, label=f"{label}, weights as {how}", expected=expected) is not None:
                    directed_counts["weights"] = directed_counts.get("weights", 0) + 1
            except CheckFailure as exc:
                _fail(case.result, case, exc)


def _drawn(case: NumCase, strategy, op: str, dtype: str, current, limit: int, drawn: dict) -> None:
    """3. The hypothesis draws. A failing draw is counted (``case.failures``), never raised: hypothesis
    would shrink it and stop drawing."""

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
        call = data.draw(strategy, label="call")
        if drawn["refused"] > limit:
            # Enough refused draws: what is left is not worth a preprocess each. Not reject(): a
            # replay of an earlier example would then be rejected too (hypothesis' FlakyFailure).
            raise _EnoughRefusals()
        failing = len(case.failures)
        if case.run(call) is None and len(case.failures) == failing:
            drawn["refused"] += 1
            reject()
        drawn["count"] += 1

    # No example database (database=None), so no database key to make (compat.hypothesis)
    without_database_key(example)
    try:
        example()
    except _EnoughRefusals:
        pass
    except Unsatisfiable:
        if not case.refusals and not case.compared and case.first is None:
            raise


def _fail(result, case: NumCase, exc: CheckFailure):
    if exc.category.is_failure:
        result.set(replay=f"python -m conformance replay {case.replay_dir}")
    raise exc


def _digest(call) -> str:
    h = hashlib.sha256()
    for t in call.tensors():
        h.update(np.ascontiguousarray(t.value).view(np.uint8).tobytes() if t.value.size else b"")
    return h.hexdigest()[:16]
