"""The bookkeeping of one NUM check (op x dtype): each drawn call run by the case core
(conformance.case) and counted: compared and refused draws by kind, the worst statistics, the
declared latitudes taken, batches of calls through one program on a backend whose preprocess is
slow, and the failures after the first by outcome and kind within a budget of time
(checks/test_numerics.py says how the check uses it)."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from pathlib import Path

import ml_dtypes
import numpy as np

from conformance import case as core
from conformance import replay
from conformance.api.scalar_type import dtype_name, is_floating
from conformance.api.tensors import describe_layout
from conformance.driver import Driver
from conformance.programs import HarnessError, batch_program, split_outputs
from conformance.results import Category, CheckFailure, FailureKind, FailureSummary, KindCount


class BudgetSpent(BaseException):
    """Ends a failing check whose time after its first failure is spent (``failure_budget``). A
    BaseException, so hypothesis lets it through."""


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


class NumCase:
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
        """Raise BudgetSpent once a failing check has spent its time after the first failure."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            self.cut_short = True
            raise BudgetSpent()

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


def _layout_words(layout) -> str:
    """"inputs transposed" (every input), "input 1 transposed" (one of several)."""
    words = describe_layout(layout)
    return words if words.startswith("input ") else f"inputs {words}"
