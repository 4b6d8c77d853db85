"""What the check modules share: contract programs, expected outputs, the oracle cross-check.

Contract programs are small fixed models (static shapes) the PRE, RT, DBG and
PERF clauses run. A backend runs the first of them it accepts, so a backend that
only does elementwise ops is still checked against the whole contract.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from conformance import oracle
from conformance.api import BackendUnderTest
from conformance.api.tensors import to_numpy
from conformance.driver import Driver
from conformance.programs import ProgramCache, default_cache
from conformance.results import Category, CheckFailure


@dataclass(frozen=True)
class ContractProgram:
    name: str
    exported: Any
    inputs: tuple[np.ndarray, ...]
    ops: frozenset[str]
    module: Any
    """The nn.Module it was exported from (eager timing runs this, not the unlifted graph)."""

    def fresh(self):
        """A private copy for one preprocess call (preprocess may not mutate it, but might)."""
        import copy

        return copy.deepcopy(self.exported)


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _chain():
    import torch

    class Chain(torch.nn.Module):
        def forward(self, x, y):
            return torch.relu(x * y + x) - y

    r = _rng(1)
    return Chain(), (r.standard_normal((4, 8), np.float32), r.standard_normal((4, 8), np.float32))


def _mlp():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    return model, (_rng(2).standard_normal((4, 16), np.float32),)


def _conv_block():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2)
    ).eval()
    with torch.no_grad():
        model[1].running_mean.uniform_(-0.5, 0.5)
        model[1].running_var.uniform_(0.5, 1.5)
    return model, (_rng(3).standard_normal((1, 3, 16, 16), np.float32),)


def _attention():
    import torch

    class Attention(torch.nn.Module):
        def __init__(self, d: int = 16):
            super().__init__()
            self.q, self.k, self.v = (torch.nn.Linear(d, d) for _ in range(3))
            self.scale = 1.0 / math.sqrt(d)

        def forward(self, x):
            scores = self.q(x) @ self.k(x).transpose(-1, -2) * self.scale
            return torch.softmax(scores, dim=-1) @ self.v(x)

    torch.manual_seed(0)
    return Attention().eval(), (_rng(4).standard_normal((1, 8, 16), np.float32),)


CONTRACT_PROGRAMS: dict[str, Callable[[], tuple[Any, tuple]]] = {
    "mlp": _mlp,
    "chain": _chain,
    "conv_block": _conv_block,
    "attention": _attention,
}
"""The fixed program set, in the order a backend is offered them (weights first, so
the RT clauses exercise named data whenever the backend can)."""


def _index_select_failure():
    import torch

    class Gather(torch.nn.Module):
        def forward(self, x, index):
            return torch.relu(x).index_select(0, index) + 1.0

    r = _rng(5)
    return Gather(), (r.standard_normal((5, 4), np.float32), np.array([0, 4, 2], np.int64))


def _digamma_probe():
    import torch

    class Digamma(torch.nn.Module):
        def forward(self, x):
            return torch.ops.aten.digamma.default(x)

    return Digamma(), (np.abs(_rng(6).standard_normal((4, 4))).astype(np.float32) + 0.5,)


def _elementwise_add():
    import torch

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    r = _rng(7)
    return Add(), (r.standard_normal((4, 8), np.float32), r.standard_normal((4, 8), np.float32))


FALLBACK_PROGRAMS: dict[str, Callable[[], tuple[Any, tuple]]] = {"elementwise_add": _elementwise_add}
"""Offered by ``runnable`` only after a backend refused every contract program, so the runtime
clauses still observe a backend that takes a single elementwise op (TorchScript's
backend_with_compiler_demo lowers nothing but aten::add/sub). Not part of the fixed set: the
PRE-003/005/007 loops and PERF never see it."""

SPECIAL_PROGRAMS = {"index_failure": _index_select_failure, "unsupported_probe": _digamma_probe, **FALLBACK_PROGRAMS}
FAILING_INDEX = np.array([0, 5000, 2], np.int64)
"""Makes index_failure's index_select read out of range: its second row index does not exist."""
PROBE_OP = "aten.digamma.default"
"""An operator outside the spec: no backend is expected to run it, so it probes PRE-006."""


@functools.cache
def contract_program(name: str, cache: ProgramCache | None = None) -> ContractProgram:
    import inspect

    import torch

    from conformance.api.ops import op_name

    builder = CONTRACT_PROGRAMS.get(name) or SPECIAL_PROGRAMS[name]
    module, inputs = builder()
    key = ("contract", name, inspect.getsource(builder))  # an edited builder is a different program
    shapes = [tuple(a.shape) for a in inputs]

    def build():
        return module, [torch.from_numpy(np.array(a)) for a in inputs]

    keep = (PROBE_OP,) if name == "unsupported_probe" else ()
    exported = (cache or default_cache()).get(key, build, shapes, dynamic=False, keep=keep)
    ops = frozenset(op_name(n.target) for n in exported.graph.nodes if n.op == "call_function")
    return ContractProgram(name, exported, tuple(inputs), ops, module)


# ---------------------------------------------------------------------------------------------
# Expected outputs


@functools.lru_cache(maxsize=1)
def reference_backend() -> BackendUnderTest:
    from reference_backend import backend_under_test

    return backend_under_test()


def eager_outputs(exported, inputs) -> list[np.ndarray]:
    import torch

    with torch.no_grad():
        out = exported.module()(*[torch.from_numpy(np.array(a)) for a in inputs])
    return [to_numpy(o) for o in (out if isinstance(out, (list, tuple)) else (out,))]


def reference_outputs(exported, inputs, like: list[np.ndarray]) -> list[np.ndarray]:
    """The reference backend's outputs; raises ORACLE_DISAGREEMENT when it cannot produce them."""
    try:
        return Driver(reference_backend()).run(exported, inputs, like).outputs
    except CheckFailure as exc:
        raise CheckFailure(
            Category.ORACLE_DISAGREEMENT, f"the reference backend failed on this program: {exc.message}"
        ) from exc


@functools.cache
def expected_for(name: str) -> tuple[np.ndarray, ...]:
    """The reference's outputs of a contract program, checked against eager first."""
    program = contract_program(name)
    eager = eager_outputs(program.exported, program.inputs)
    ref = reference_outputs(program.exported, program.inputs, eager)
    for i, (r, e) in enumerate(zip(ref, eager)):
        tol = oracle.Tolerance(atol=1e-4, rtol=1e-4, reason="contract programs chain several float32 ops")
        cmp = oracle.compare(r, e, tol)
        if not cmp.ok:
            raise CheckFailure(
                Category.ORACLE_DISAGREEMENT, f"reference and eager disagree on {name} output {i}: {cmp.message}"
            )
    return tuple(ref)


def compare_outputs(actual, expected, *, what: str, backend: BackendUnderTest | None = None) -> dict:
    """Compare backend outputs with expected ones; MISMATCH on failure. Returns the worst stats."""
    if len(actual) != len(expected):
        raise CheckFailure(Category.MISMATCH, f"{what}: {len(actual)} outputs, expected {len(expected)}")
    worst: dict = {}
    for i, (a, e) in enumerate(zip(actual, expected)):
        tol = oracle.Tolerance(atol=1e-4, rtol=1e-4, reason="contract programs chain several float32 ops")
        cmp = oracle.compare(np.asarray(a), e, tol)
        if not cmp.ok:
            raise CheckFailure(Category.MISMATCH, f"{what}: output {i}: {cmp.message}", stats=cmp.stats())
        if not worst or cmp.max_abs > worst.get("max_abs", 0):
            worst = cmp.stats()
    return worst


_RUNNABLE: dict[str, str] = {}


def runnable(backend: BackendUnderTest) -> ContractProgram:
    """The first contract program this backend preprocesses; the RT clauses run it."""
    if backend.name in _RUNNABLE:
        return contract_program(_RUNNABLE[backend.name])
    driver = Driver(backend)
    refusals = []
    for name in (*CONTRACT_PROGRAMS, *FALLBACK_PROGRAMS):
        program = contract_program(name)
        try:
            driver.preprocess(program.fresh())
        except CheckFailure as exc:
            refusals.append(f"{name}: {exc.message}")
            continue
        _RUNNABLE[backend.name] = name
        return program
    raise CheckFailure(
        Category.PREPROCESS_FAIL,
        "the backend accepted none of the contract programs, so its runtime cannot be checked: " + "; ".join(refusals),
        stage="preprocess",
    )
