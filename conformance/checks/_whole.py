"""What the MOD and QNT checks share: one whole program, lowered once, run on many input sets.

A ``Subject`` is a program with its input ranges, the tolerance of each output and the edge
set; ``check`` lowers it (preprocess, init), runs it on its own inputs, the edge set and
hypothesis-drawn inputs, and compares every run's outputs with the reference's, eager's held
to the reference's first (``oracle.expect``; ORACLE_DISAGREEMENT otherwise). It records per-output
statistics against both, and on the first difference names the first operator that goes
wrong (``conformance.localize``).

Partial delegation. A backend that refuses the whole program may, if it declares
``partial_delegation``, take it again with the ``PARTIAL_DELEGATION`` compile spec: it
delegates what it takes, runs the rest on a fallback of its own, and its debug_handle_map
names the nodes it delegated. The check still compares the whole program's outputs (what the
user deploys), reports the delegated fraction by ops and by FLOPs (``Delegation``) and what was
left outside, and is NOT_SUPPORTED when the outputs match: what ran outside the backend is never
counted as the backend's pass (a model in the profile is then not certified). Outputs that differ
are the MISMATCH of the whole, localized, with the delegated fraction beside it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from conformance import localize, oracle
from conformance.api import PARTIAL_DELEGATION
from conformance.api.tensors import to_numpy, to_torch
from conformance.driver import Driver
from conformance.results import Category, CheckFailure

from . import _support as support


@dataclass
class Subject:
    """One whole program a check runs end to end."""

    label: str
    """What messages call it ("mlp", "quantized conv2d")."""
    seed_key: str
    """Seeds the drawn inputs ("MOD-001|mlp"): the same draws in every process."""
    program: Any  # conformance.programs.ModuleProgram
    ranges: tuple
    """One ``specs.InputRange`` per input: drawn inputs are uniform in it."""
    examples: int
    tolerances: Sequence[oracle.Tolerance]
    """Per output: how close it must come to the reference (and the reference to eager)."""
    localize_tolerance: Callable[[int], oracle.Tolerance]
    """The tolerance of an intermediate value at a depth, for ``localize``."""
    edges: list[tuple[str, tuple[np.ndarray, ...]]] = field(default_factory=list)
    on_outputs: Callable[[str, list[np.ndarray]], None] | None = None
    """Called with every run's backend outputs (QNT-003 checks the grid there); raises CheckFailure."""
    judge_values: bool = True
    """Whether an output beyond its tolerance is the verdict (False: only ``on_outputs`` judges, on
    every run; the statistics are kept either way)."""


def edge_inputs(ranges, like: tuple[np.ndarray, ...], *, past: bool = False) -> list[tuple[str, tuple[np.ndarray, ...]]]:
    """Every input at the low end of its range, at the high end, and zeros (where 0 is in range);
    with ``past``, floating inputs at twice the high end (past a calibrated range)."""
    picks = [("low", lambda r, a: r.low), ("high", lambda r, a: r.high - (0 if a.dtype.kind == "f" else 1)), ("zeros", lambda r, a: 0)]
    if past:
        picks.append(("past the range", lambda r, a: 2 * r.high if a.dtype.kind == "f" else r.high - 1))
    out = []
    for label, pick in picks:
        if label == "zeros" and any(not r.low <= 0 < r.high for r in ranges):
            continue
        out.append((label, tuple(np.full(a.shape, pick(r, a), dtype=a.dtype) for r, a in zip(ranges, like))))
    return out


def drawn_inputs(ranges, like: tuple[np.ndarray, ...], seed_value: int) -> tuple[np.ndarray, ...]:
    """Inputs of ``like``'s shapes and dtypes, uniform in the ranges (NumPy from a drawn seed)."""
    rng = np.random.default_rng(seed_value)
    out = []
    for r, a in zip(ranges, like):
        if a.dtype.kind == "f":
            out.append(rng.uniform(r.low, r.high, size=a.shape).astype(a.dtype))
        else:
            out.append(rng.integers(int(r.low), int(r.high), size=a.shape).astype(a.dtype))
    return tuple(out)


class Worst:
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


# ---------------------------------------------------------------------------------------------
# Partial delegation


@dataclass(frozen=True)
class Delegation:
    """How much of a program a partially delegating backend took (its debug_handle_map's nodes)."""

    ops: int
    """Operator nodes the backend delegated (getitem and shape bookkeeping are no operators)."""
    ops_total: int
    flops: int
    """FLOPs of the delegated nodes on the program's own inputs (torch.utils.flop_counter)."""
    flops_total: int
    outside: dict[str, int]
    """Operators left outside the delegate, by overload, with their counts."""
    handles: frozenset = frozenset()
    """The debug handles of the delegated nodes (not reported: ``ops`` counts them)."""

    def stats(self) -> dict:
        return {
            "ops": self.ops,
            "ops_total": self.ops_total,
            "ops_fraction": round(self.ops / self.ops_total, 4) if self.ops_total else 0.0,
            "flops": self.flops,
            "flops_total": self.flops_total,
            "flops_fraction": round(self.flops / self.flops_total, 4) if self.flops_total else None,
            "outside": dict(sorted(self.outside.items())),
        }

    def describe(self) -> str:
        flops = f", {100 * self.flops / self.flops_total:.1f}% of its FLOPs" if self.flops_total else ""
        outside = ", ".join(f"{op} (x{n})" if n > 1 else op for op, n in sorted(self.outside.items()))
        return f"partially delegated: {self.ops} of {self.ops_total} operators{flops}; left outside the delegate: {outside}"


def _operator_nodes(exported) -> list:
    """The nodes that compute: not getitem (one of an op's outputs), not symbolic-size arithmetic."""
    import operator

    from conformance.api.ops import op_name

    return [n for n in exported.graph.nodes
            if n.op == "call_function" and n.target is not operator.getitem and not op_name(n.target).startswith("sym")]


def node_flops(exported, inputs: tuple[np.ndarray, ...]) -> dict[str, int]:
    """FLOPs of every operator node on ``inputs``, as torch.utils.flop_counter counts them
    (matrix products and convolutions; elementwise ops count 0)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    flops: dict[str, int] = {}

    class Counting(torch.fx.Interpreter):
        def run_node(self, n):
            if n.op != "call_function":
                return super().run_node(n)
            with FlopCounterMode(display=False) as counter:
                out = super().run_node(n)
            flops[n.name] = int(counter.get_total_flops())
            return out

    module = exported.module()
    with torch.no_grad():
        Counting(module).run(*[to_torch(np.array(a)) for a in inputs])
    return flops


def delegation(exported, inputs, debug_handle_map) -> Delegation:
    """The delegated fraction of ``exported``: the nodes whose debug handles the backend's map names."""
    from conformance.api.ops import op_name

    handles = {h for values in (debug_handle_map or {}).values() for h in (values if isinstance(values, (list, tuple)) else (values,))}
    nodes = _operator_nodes(exported)
    flops = node_flops(exported, inputs)
    inside = [n for n in nodes if n.meta.get("debug_handle") in handles]
    return Delegation(
        ops=len(inside),
        ops_total=len(nodes),
        flops=sum(flops.get(n.name, 0) for n in inside),
        flops_total=sum(flops.get(n.name, 0) for n in nodes),
        outside=dict(Counter(op_name(n.target) for n in nodes if n.meta.get("debug_handle") not in handles)),
        handles=frozenset(handles),
    )


# ---------------------------------------------------------------------------------------------
# The check


def unclaimed(backend, program) -> list[str]:
    """The program's ops the backend's manifest does not claim (in the dtype of their first tensor)."""
    from conformance.api.ops import op_name

    out = set()
    for n in _operator_nodes(program.exported):
        first = next((a.meta.get("val") for a in n.all_input_nodes if hasattr(a.meta.get("val"), "dtype")), None)
        dtype = str(first.dtype).removeprefix("torch.") if first is not None else "float32"
        name = op_name(n.target)
        if not backend.manifest.claims(name, dtype):
            out.add(name)
    return sorted(out)



def lower(backend, result, subject: Subject):
    """preprocess the whole program: (driver, PreprocessResult, Delegation or None). A refusal is
    NOT_SUPPORTED naming the ops the manifest does not claim (``unclaimed``); with none it is
    PREPROCESS_FAIL. A backend that declares partial delegation is asked again with
    ``PARTIAL_DELEGATION`` before either."""
    driver = Driver(backend)
    program = subject.program
    try:
        lowered, _ = driver.preprocess(program.fresh())
        return driver, lowered, None
    except CheckFailure as exc:
        if exc.category is not Category.NOT_SUPPORTED:
            raise
        refusal = exc
    if getattr(backend, "partial_delegation", False):
        try:
            lowered, _ = driver.preprocess(program.fresh(), [*backend.compile_specs, PARTIAL_DELEGATION])
        except CheckFailure as exc:
            if exc.category is not Category.NOT_SUPPORTED:
                raise
        else:
            taken = delegation(program.exported, program.inputs, lowered.debug_handle_map)
            result.stats(delegated=taken.stats())
            if taken.ops:
                # Every node named: the backend took the whole program after all, judged as such.
                return driver, lowered, (taken if taken.ops < taken.ops_total else None)
    missing = unclaimed(backend, program)
    if not missing:
        raise CheckFailure(
            Category.PREPROCESS_FAIL,
            f"{subject.label}: the manifest claims every op of the program, but preprocess refused it: {refusal.message}",
            stage="preprocess",
        ) from refusal
    result.not_supported(f"{subject.label}: refused at preprocess ({refusal.message}); ops the manifest does not claim: {', '.join(missing)}")


def check(backend, result, subject: Subject) -> None:
    """Run ``subject`` end to end (see the module's docstring); raises the verdict's CheckFailure."""
    program = subject.program
    driver, lowered, partial = lower(backend, result, subject)
    reference = Driver(support.reference_backend())
    module = program.exported.module()
    worst, worst_eager = Worst(), Worst()
    examples = {"count": 0}
    failure: list = []

    loaded = driver.init(lowered)
    expected_handle = reference.init(reference.preprocess(program.fresh())[0])
    try:

        def run(label: str, inputs: tuple[np.ndarray, ...]) -> None:
            import torch

            with torch.no_grad():
                out = module(*[to_torch(a) for a in inputs])
            eager = [to_numpy(o) for o in (out if isinstance(out, (list, tuple)) else (out,))]
            expected = reference.execute(expected_handle, inputs, eager).outputs
            oracle.expect(expected, eager, what=f"{subject.label} [{label}]", tolerances=subject.tolerances)
            got = driver.execute(loaded, inputs, expected).outputs
            compared = [oracle.compare(np.asarray(a), np.asarray(e), t) for a, e, t in zip(got, expected, subject.tolerances)]
            examples["count"] += 1
            worst.add(compared)
            worst_eager.add([oracle.compare(np.asarray(a), e, t) for a, e, t in zip(got, eager, subject.tolerances)])
            bad = next(((i, c) for i, c in enumerate(compared) if not c.ok), None)
            if bad is not None and not failure and subject.judge_values:
                failure.append((label, inputs, *bad))
            if subject.on_outputs is not None:
                subject.on_outputs(label, [np.asarray(a) for a in got])

        run("own inputs", program.inputs)
        for label, inputs in subject.edges:
            if not failure:
                run(label, inputs)
        if subject.examples and not failure:

            @seed(int.from_bytes(hashlib.sha256(subject.seed_key.encode()).digest()[:8], "little"))
            @settings(max_examples=subject.examples, database=None, deadline=None, suppress_health_check=list(HealthCheck))
            @given(seed_value=st.integers(0, 2**32 - 1))
            def drawn(seed_value):
                if not failure:  # record the first difference; no shrinking (localization says where)
                    run(f"drawn, seed {seed_value}", drawn_inputs(subject.ranges, program.inputs, seed_value))

            drawn()
    finally:
        driver.destroy(loaded)
        reference.destroy(expected_handle)
    result.stats(examples=examples["count"], outputs=worst.stats(), outputs_vs_eager=worst_eager.stats())
    if failure:
        label, inputs, index, cmp = failure[0]
        message = f"{subject.label} [{label}] output {index}: {cmp.message}"
        if partial is not None:
            message += f" ({partial.describe()})"
        stats = {**cmp.stats()}
        specs = [*backend.compile_specs, PARTIAL_DELEGATION] if partial is not None else None
        try:
            found = localize.localize(backend, program.fresh(), inputs, subject.localize_tolerance, compile_specs=specs)
        except Exception as exc:  # noqa: BLE001 - the verdict stands without the localization
            message += f"; localization failed: {type(exc).__name__}: {exc}"
        else:
            message += "; " + (found.describe() if found else "every operator's output matches: the difference is in how the outputs were delivered")
            if found:
                stats["localization"] = found.stats()
            if found and partial is not None:
                inside = found.debug_handle in partial.handles
                message += " (inside the delegate)" if inside else " (a node left outside the delegate: the backend's fallback ran it)"
                stats["localization"]["delegated"] = inside
        raise CheckFailure(Category.MISMATCH, message, stats=stats)
    if partial is not None:
        result.not_supported(
            f"{subject.label}: {partial.describe()}. The whole program's outputs match the reference on every run, but what ran "
            "outside the delegate is not the backend's: not counted as a pass"
        )
