"""What the check modules share: contract programs, their expected outputs (cross-checked with
eager by ``oracle.expect``) and the comparison of a backend's outputs with them.

Contract programs are small fixed models (static shapes) the PRE, RT, DBG and
PERF clauses run. A backend runs the first of them it accepts, so a backend that
only does elementwise ops is still checked against the whole contract.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from conformance import oracle
from conformance.api import BackendUnderTest
from conformance.api.tensors import to_numpy, to_torch
from conformance.driver import Driver
from conformance.programs import ModuleProgram, ProgramCache, module_program
from conformance.results import Category, CheckFailure

ContractProgram = ModuleProgram
"""A contract program: a small fixed model with its inputs (``conformance.programs.ModuleProgram``)."""


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
    builder = CONTRACT_PROGRAMS.get(name) or SPECIAL_PROGRAMS[name]
    keep = (PROBE_OP,) if name == "unsupported_probe" else ()
    return module_program("contract", name, builder, cache=cache, keep=keep)


# ---------------------------------------------------------------------------------------------
# Expected outputs


@functools.lru_cache(maxsize=1)
def reference_backend() -> BackendUnderTest:
    from reference_backend import backend_under_test

    return backend_under_test()


def eager_outputs(exported, inputs) -> list[np.ndarray]:
    import torch

    with torch.no_grad():
        out = exported.module()(*[to_torch(np.array(a), resizable=True) for a in inputs])  # bfloat16 through ml_dtypes
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
    """The reference's outputs of a contract program, checked against eager first (``oracle.expect``)."""
    program = contract_program(name)
    eager = eager_outputs(program.exported, program.inputs)
    ref = reference_outputs(program.exported, program.inputs, eager)
    oracle.expect(ref, eager, what=name, tolerances=[oracle.CONTRACT_TOLERANCE] * len(ref))
    return tuple(ref)


def compare_outputs(actual, expected, *, what: str, backend: BackendUnderTest | None = None, program: ContractProgram | None = None) -> dict:
    """Compare backend outputs with expected ones; MISMATCH on failure. Returns the worst stats.

    ``backend`` and ``program`` (run on its own inputs): a MISMATCH also names the first op of the
    program the backend gets wrong (``conformance.localize``)."""
    if len(actual) != len(expected):
        raise CheckFailure(Category.MISMATCH, f"{what}: {len(actual)} outputs, expected {len(expected)}")
    worst: dict = {}
    for i, (a, e) in enumerate(zip(actual, expected)):
        cmp = oracle.compare(np.asarray(a), e, oracle.CONTRACT_TOLERANCE)
        if not cmp.ok:
            message, stats = f"{what}: output {i}: {cmp.message}", cmp.stats()
            if backend is not None and program is not None:
                from conformance import localize

                try:
                    found = localize.localize(backend, program.fresh(), program.inputs, lambda depth: oracle.CONTRACT_TOLERANCE)
                except Exception as exc:  # noqa: BLE001 - the verdict stands without it
                    message += f"; localization failed: {type(exc).__name__}: {exc}"
                else:
                    if found is not None:
                        message, stats = f"{message}; {found.describe()}", {**stats, "localization": found.stats()}
            raise CheckFailure(Category.MISMATCH, message, stats=stats)
        if not worst or cmp.max_abs > worst.get("max_abs", 0):
            worst = cmp.stats()
    return worst


_RUNNABLE: dict[str, str] = {}


def runnable(backend: BackendUnderTest) -> ContractProgram:
    """The first contract program this backend preprocesses; the RT clauses run it."""
    if backend.name in _RUNNABLE:
        return contract_program(_RUNNABLE[backend.name])
    return first_preprocessed(backend)[0]


def first_preprocessed(backend: BackendUnderTest) -> tuple[ContractProgram, Any]:
    """``runnable``'s choice and what preprocess returned for it (the fresh processes of PRE-008
    started before the checks make the same choice and digest that result)."""
    driver = Driver(backend)
    refusals, failures = [], []
    for name in (*CONTRACT_PROGRAMS, *FALLBACK_PROGRAMS):
        program = contract_program(name)
        try:
            processed, _ = driver.preprocess(program.fresh())
        except CheckFailure as exc:
            if exc.category is Category.CONTRACT_VIOLATION:
                # It took the program and returned something the contract forbids (processed_bytes
                # a str, ...): that is the failure, whatever the other programs would do.
                raise CheckFailure(exc.category, f"{exc.message} (preprocess of the {name} program)", stage=exc.stage) from exc
            (refusals if exc.category is Category.NOT_SUPPORTED else failures).append(f"{name}: {exc.message}")
            continue
        _RUNNABLE[backend.name] = name
        return program, processed
    raise CheckFailure(
        Category.PREPROCESS_FAIL,
        "the backend accepted none of the contract programs, so its runtime cannot be checked: "
        + "; ".join([*failures, *refusals]),  # a crash says more than a refusal
        stage="preprocess",
    )


def prepared(backend: BackendUnderTest, result) -> tuple[Driver, ContractProgram, Any, list[np.ndarray]]:
    """(driver, the runnable contract program, its preprocess result, its expected outputs): where the
    runtime clauses start; the program's name goes with the result."""
    program = runnable(backend)
    result.set(program=program.name)
    driver = Driver(backend)
    out, _ = driver.preprocess(program.fresh())
    return driver, program, out, list(expected_for(program.name))
