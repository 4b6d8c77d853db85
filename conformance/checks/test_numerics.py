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

import dataclasses
import hashlib
import time
from collections import Counter
from pathlib import Path

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, reject, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from conformance import case as core
from conformance import replay
from conformance.api.scalar_type import dtype_name, is_floating
from conformance.api.tensors import INPUT_LAYOUTS, describe_layout, layout_applies, one_strided
from conformance.compat.hypothesis import without_database_key
from conformance.driver import Driver
from conformance.programs import HarnessError, batch_program, split_outputs
from conformance.results import Category, CheckFailure, FailureKind, FailureSummary, KindCount
from conformance.strategies import calls
from conformance.strategies.directed import draw_directed, plan


class _EnoughRefusals(BaseException):
    """Ends the hypothesis phase of a check whose draws the backend keeps refusing. A BaseException,
    so hypothesis lets it through instead of shrinking it as a failure."""


class _BudgetSpent(BaseException):
    """Ends a failing check whose time after its first failure is spent (``failure_budget``). A
    BaseException, so hypothesis lets it through."""


BATCH = 8
"""Directed calls per batch program on a backend whose preprocess is slow."""
FAILURE_BUDGET_S = 30.0
"""The most seconds a check runs after its first failure."""
FAILURE_BUDGET_SHARE = 0.25
"""... and at most this share of the per-check timeout (pytest-timeout's ``--timeout``; certify's)."""
FAILURE_DEADLINE_SHARE = 0.75
"""A failing check never runs past this share of the timeout from its start: the first failure's
verdict must not turn into a TIMEOUT."""
STAGE_OUTCOMES = {
    Category.PREPROCESS_FAIL: "preprocess failed",
    Category.INIT_FAIL: "init failed",
    Category.EXECUTE_FAIL: "execute failed",
    Category.CONTRACT_VIOLATION: "contract violation",
}


def failure_budget(timeout: float | None) -> float:
    """Seconds a check may run after its first failure: FAILURE_BUDGET_S, or a quarter of the
    per-check timeout where that is less (the seeded proof's 40 s timeout: 10 s)."""
    return min(FAILURE_BUDGET_S, FAILURE_BUDGET_SHARE * timeout) if timeout else FAILURE_BUDGET_S


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


class _Case:
    """The bookkeeping of one op x dtype's drawn calls, each run by the case core (conformance.case):
    counts, refusals by kind, worst statistics, saved examples, batches."""

    def __init__(self, backend, spec, op: str, dtype: str, claimed: bool, replay_dir: Path, result, requested: str | None = None, specs=None,
                 timeout: float | None = None):
        self.backend, self.spec, self.op, self.dtype, self.claimed = backend, spec, op, dtype, claimed
        self.specs = specs  # the spec of record (saved with an example)
        self.replay_dir, self.result = replay_dir, result
        self.requested = requested or backend.name  # the backend as certify was given it (saved with an example)
        self.driver = Driver(backend)
        self.worst: dict = {}
        self.compared = 0
        self.refused: list[str] = []  # refusals outside the manifest's declared ones, by drawn example
        self.refusals: dict[str, int] = {}  # every refusal, by kind of call (Call.features)
        self.declared = 0  # refusals the manifest documents
        self.taken: dict[str, int] = {}  # accepted draws, by kind
        self.latitudes: dict[str, int] = {}  # outputs of accepted draws that passed under a declared latitude, by name
        self.meta_disagreements: list[str] = []  # examples whose program PyTorch itself shapes unlike eager
        self.runs, self.seconds = 0, 0.0  # backend runs (refusals included) and their wall time
        self.batched = 0  # calls compared through a batch program
        # failures (the module's docstring): the first is the verdict, the rest are counted by kind
        self.first: CheckFailure | None = None
        self.failures: list[tuple[list[str], list[str]]] = []  # per failing case: (its outcomes, its kinds)
        self.ran_kinds: Counter[str] = Counter()  # cases run on the backend (failing or matching), by kind
        self.ran = self.after_first = 0
        self.origins: dict[str, str] = {}  # a directed case's label -> its kind
        self.started = time.perf_counter()
        self.timeout = timeout
        self.budget_s = failure_budget(timeout)
        self.deadline: float | None = None  # when the budget after the first failure runs out
        self.cut_short = False

    def run(self, call, *, label: str = "", layout="contiguous", expected=None, program=None):
        """Check one call; returns (expected outputs, program), or None when the example was set aside.

        Raises CheckFailure with the verdict against the backend (or the harness). A layout re-run
        passes the expected outputs and the program of the contiguous run of the same call."""
        where = f"[{label}] " if label else ""
        if describe_layout(layout) != "contiguous":
            where = f"[{label}, {_layout_words(layout)}] "
        self.within_budget()
        outcome = core.run(self.backend, self.spec, call, expected=expected, program=program, layout=layout)
        return self._verdict(call, label, layout, where, outcome)

    def _verdict(self, call, label: str, layout, where: str, outcome: core.Outcome):
        """Count the core's outcome of one call; returns (expected outputs, program), None when the
        example was set aside or refused, or raises the CheckFailure of a failure (its example saved)."""
        if outcome.ran:
            self.runs += 1
            self.seconds += outcome.seconds
        if outcome.ok:
            self._taken(call, outcome.comparisons, self._kinds(call, label, layout, outcome.expected))
            return outcome.expected, outcome.program
        if outcome.category is Category.SKIP:
            self.meta_disagreements.append(outcome.message)
            return None
        if outcome.category is Category.NOT_SUPPORTED:
            # Refused on this draw: count it by kind and go on, so the check still compares
            # every example the backend takes. A claimed op's undeclared refusal fails it at the end.
            self._refusal(call, where, outcome.detail, outcome.expected)
            return None
        if not outcome.ran:  # the harness's own failure (eager, the reference, the program): nothing to replay
            if self.first is None:
                raise outcome.failure(where)
            return None  # after the backend's first failure, which stays the verdict: not the backend's doing
        kinds = self._kinds(call, label, layout, outcome.expected)
        self._ran(kinds)
        self.failures.append((self._outcomes(outcome), kinds))
        if self.first is not None:
            return None
        # The first failure is the verdict, and its example the replayed one.
        if outcome.category is Category.MISMATCH:
            self._save(call, outcome.expected, outcome.outputs, outcome.blob, f"{where}{outcome.message}", layout)
            self.first = outcome.failure(where, case=label, layout=describe_layout(layout))
        else:
            self._save(call, outcome.expected, None, None, outcome.detail, layout)
            self.first = outcome.failure(where)
        now = time.perf_counter()
        self.deadline = now + self.budget_s
        if self.timeout:
            self.deadline = min(self.deadline, self.started + FAILURE_DEADLINE_SHARE * self.timeout)
        return None

    def _save(self, call, expected, actual, blob, message: str, layout="contiguous") -> None:
        replay.save(self.replay_dir, call, expected, actual, blob, message, backend=self.requested, specs=self.specs, layout=layout)

    # -- batches: many calls, one preprocess ---------------------------------------------------------

    @property
    def slow(self) -> bool:
        """Whether the edge set goes in batches: the backend says its preprocess is slow
        (``batch_numerics``), and the first calls ran alone (they decide whether it takes the op)."""
        return bool(getattr(self.backend, "batch_numerics", False)) and self.runs >= 2

    def run_batch(self, items: list[tuple[str, object]]) -> list:
        """``run`` for several calls through one program (``batch_program``): one preprocess, init and
        execute for all. A refused or failing batch is split in halves down to single calls (single
        calls at once while the backend has taken nothing: an op it refuses costs no bisection); a
        call whose batched outputs differ is run alone, so its verdict and replay are a single
        call's. Returns, per item, what ``run`` returns."""
        self.within_budget()
        prepared, out = [], [None] * len(items)
        for k, (label, call) in enumerate(items):
            ready = core.prepare(self.spec, call)
            if isinstance(ready, core.Outcome):
                self._verdict(call, label, "contiguous", f"[{label}] ", ready)  # raises, or sets the call aside
            else:
                prepared.append((k, label, call, ready))
        if len(prepared) < 2 or not self.compared:
            for k, label, call, ready in prepared:
                out[k] = self.run(call, label=label, expected=ready.expected, program=ready.program)
                self.not_supported_if_nothing_taken()
            return out
        try:
            batch = batch_program([call for _, _, call, _ in prepared], [ready.program for *_, ready in prepared])
        except HarnessError:
            return self._singles(items, prepared, out)
        started = time.perf_counter()
        try:
            ran = self.driver.run(batch.exported, batch.inputs, [e for *_, ready in prepared for e in ready.expected])
        except CheckFailure:
            self._timed(started)
            half = len(prepared) // 2
            for part in (prepared[:half], prepared[half:]):
                for (k, *_), got in zip(part, self.run_batch([(label, call) for _, label, call, _ in part])):
                    out[k] = got
            return out
        self._timed(started)
        self.batched += len(prepared)
        for (k, label, call, ready), outputs in zip(prepared, split_outputs(batch, ran.outputs)):
            compared = core.compare(self.backend, self.spec, call.op, outputs, ready.expected, call, ready.bounds, ready.alternatives)
            if all(c.ok for c in compared):
                self._taken(call, compared, self._kinds(call, label, "contiguous", ready.expected))
                out[k] = (ready.expected, ready.program)
            else:
                # the verdict of the call alone, from the core
                out[k] = self.run(call, label=label, expected=ready.expected, program=ready.program)
        return out

    def _singles(self, items, prepared, out) -> list:
        for k, label, call, ready in prepared:
            out[k] = self.run(call, label=label, expected=ready.expected, program=ready.program)
        return out

    def _timed(self, started: float) -> None:
        self.runs += 1
        self.seconds += time.perf_counter() - started

    def _taken(self, call, compared, kinds: list[str]) -> None:
        """Count an accepted, matching call: by kind, and in the worst statistics."""
        self.compared += 1
        self._ran(kinds)
        for feature in call.features():
            self.taken[feature] = self.taken.get(feature, 0) + 1
        for c in compared:
            for name in c.latitudes:  # a declared latitude this output needed (conformance.latitudes)
                self.latitudes[name] = self.latitudes.get(name, 0) + 1
        for cmp, tol in ((c.comparison, c.tolerance) for c in compared):
            if not self.worst or _magnitude(cmp.max_abs) >= _magnitude(self.worst.get("max_abs", 0)):
                self.worst.update(cmp.stats())
                if tol.source != "default":
                    self.worst["tolerance_source"] = tol.source
                    self.worst["tolerance_reason"] = tol.reason

    def _refusal(self, call, where: str, message: str, expected) -> None:
        features = call.features()
        for feature in features or ["other"]:
            self.refusals[feature] = self.refusals.get(feature, 0) + 1
        if self.backend.manifest.declared_refusal(self.op, features):
            self.declared += 1
            return
        if not self.refused and self.first is None:  # a failure's example stays the saved one
            self._save(call, expected, None, None, message)
        self.refused.append(f"{where}{message}")

    def refusal_summary(self) -> str:
        """"refused 15 of 37 draws: always 0-d (13 of 13), empty (4 of 4); sometimes broadcasting
        (10 of 21)": the kinds it never took first (what it refuses), then the rest."""
        if not self.refusals:
            return "refused nothing"
        total = self.declared + len(self.refused)
        def kinds(always: bool) -> str:
            chosen = [(k, n) for k, n in self.refusals.items() if (self.taken.get(k, 0) == 0) == always]
            chosen.sort(key=lambda kv: (-kv[1], kv[0]))
            return ", ".join(f"{k} ({n} of {n + self.taken.get(k, 0)})" for k, n in chosen)
        parts = [f"always {kinds(True)}" if kinds(True) else "", f"sometimes {kinds(False)}" if kinds(False) else ""]
        return f"refused {total} of {total + self.compared} draws: " + "; ".join(p for p in parts if p)

    def not_supported_if_nothing_taken(self) -> None:
        """An unclaimed op that has refused every draw so far (and at least three), and failed none, is not supported."""
        if not self.claimed and not self.compared and self.first is None and (self.declared + len(self.refused)) >= 3:
            self.result.stats(refused=self.declared + len(self.refused), refusals=self.refusals, refusal_summary=self.refusal_summary(), compared=0)
            self.result.not_supported(f"{self.op} {self.dtype}: {self.refusal_summary()}; first: {self.first_refusal}")

    @property
    def first_refusal(self) -> str:
        return self.refused[0] if self.refused else "(declared in the manifest)"

    # -- failures by kind ------------------------------------------------------------------------------

    def within_budget(self) -> None:
        """Raise _BudgetSpent once a failing check has spent its time after the first failure."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            self.cut_short = True
            raise _BudgetSpent()

    def _ran(self, kinds: list[str]) -> None:
        self.ran += 1
        self.after_first += self.first is not None
        self.ran_kinds.update(kinds)

    def _kinds(self, call, label: str, layout, expected) -> list[str]:
        """What kind of case this is: ``Call.features``, its special values, where it came from, its layout."""
        origin = f"edge set: {self.origins[label]}" if label in self.origins else "hypothesis draw" if not label else label
        layouts = [_layout_words(layout)] if describe_layout(layout) != "contiguous" else []
        return [*call.features(), *_value_kinds(call, expected), origin, *layouts]

    def _outcomes(self, outcome: core.Outcome) -> list[str]:
        """What went wrong in a failing case: the stage, or for a MISMATCH each kind of element
        violation of its differing outputs (the oracle's counts)."""
        if outcome.category is not Category.MISMATCH:
            words = STAGE_OUTCOMES.get(outcome.category, outcome.category.label)
            return [f"{words} in {outcome.stage}" if outcome.category is Category.CONTRACT_VIOLATION and outcome.stage else words]
        found: list[str] = []
        for c in outcome.comparisons:
            if c.ok:
                continue
            actual, expected = np.asarray(outcome.outputs[c.index]), np.asarray(outcome.expected[c.index])
            if actual.shape != expected.shape:
                kinds = ["wrong shape"]
            elif actual.dtype != expected.dtype:
                kinds = ["wrong dtype"]
            elif self.spec.values != "reference":
                kinds = ["law violated"]
            else:
                cmp = c.comparison
                kinds = [what for n, what in (
                    (cmp.nan_mismatched, "NaN mismatch"), (cmp.inf_mismatched, "infinity mismatch"),
                    (cmp.finite_mismatched, "finite beyond tolerance"), (cmp.zero_sign_mismatched, "zero of the wrong sign"),
                ) if n] or ["wrong values"]  # fmt: skip
            found += [k for k in kinds if k not in found]
        return found or ["wrong values"]

    def failure_summary(self) -> FailureSummary:
        """The failing cases by outcome, each with the kinds of case its failures share first."""
        by_outcome: dict[str, list[list[str]]] = {}
        for outcomes, kinds in self.failures:
            for outcome in outcomes:
                by_outcome.setdefault(outcome, []).append(kinds)
        entries = []
        for outcome, cases in by_outcome.items():
            counts = Counter(k for kinds in cases for k in kinds)
            found = [KindCount(k, n, max(self.ran_kinds.get(k, 0), n)) for k, n in counts.items()]
            found.sort(key=lambda c: (c.failed < len(cases), -c.failed / c.of, -c.failed, c.kind))
            entries.append(FailureKind(outcome, len(cases), tuple(found)))
        entries.sort(key=lambda e: (-e.cases, e.outcome))
        found = FailureSummary(
            failed=len(self.failures), ran=self.ran, after_first=self.after_first, budget_s=self.budget_s,
            cut_short=self.cut_short, outcomes=tuple(entries),
        )  # fmt: skip
        return dataclasses.replace(found, summary=found.words())


def _value_kinds(call, expected) -> list[str]:
    """The special values a case holds: NaN, infinite or subnormal inputs, subnormal expected values."""
    found: set[str] = set()
    for where, arrays in (("inputs", [t.value for t in call.tensors()]), ("expected", list(expected or ()))):
        for a in arrays:
            a = np.asarray(a)
            try:
                floating = is_floating(dtype_name(a.dtype))
            except ValueError:
                floating = False
            if not floating or a.size == 0:
                continue
            x = np.abs(a.astype(np.float64))
            if where == "inputs" and np.isnan(x).any():
                found.add("NaN inputs")
            if where == "inputs" and np.isinf(x).any():
                found.add("infinite inputs")
            if ((x > 0) & (x < float(ml_dtypes.finfo(a.dtype).smallest_normal))).any():
                found.add(f"subnormal {where}")
    return sorted(found)


def _magnitude(v) -> float:
    """A statistic as a number (integers past 32 bits travel as decimal strings)."""
    try:
        return abs(float(v))
    except (TypeError, ValueError):
        return 0.0


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


def _layout_words(layout) -> str:
    """"inputs transposed" (every input), "input 1 transposed" (one of several)."""
    words = describe_layout(layout)
    return words if words.startswith("input ") else f"inputs {words}"


def test_NUM_001_matches_reference(backend, result, op, dtype, specs, request):
    spec = specs.op(op)
    claimed = backend.manifest.claims(op, dtype)
    result.set(op=op, dtype=dtype)
    result.stats(claimed=claimed)
    requested = request.node.callspec.params.get("backend", backend.name)
    timeout = float(request.config.getoption("timeout", default=None) or 0) or None
    case = _Case(backend, spec, op, dtype, claimed, _replay_dir(request.config, requested, op, dtype), result, requested, specs, timeout)
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
        except _BudgetSpent:
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


def _directed_and_layouts(case: _Case, spec, op: str, dtype: str, strategy, directed_counts: dict, not_applied: dict, layouts: list) -> None:
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


def _weights(case: _Case, spec, applied: list[tuple], directed_counts: dict, not_applied: dict) -> None:
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


def _drawn(case: _Case, strategy, op: str, dtype: str, current, limit: int, drawn: dict) -> None:
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


def _fail(result, case: _Case, exc: CheckFailure):
    if exc.category.is_failure:
        result.set(replay=f"python -m conformance replay {case.replay_dir}")
    raise exc


def _digest(call) -> str:
    h = hashlib.sha256()
    for t in call.tensors():
        h.update(np.ascontiguousarray(t.value).view(np.uint8).tobytes() if t.value.size else b"")
    return h.hexdigest()[:16]
