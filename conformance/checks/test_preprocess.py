"""PRE: the ahead-of-time half of the contract."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from conformance.api import BackendError, NamedDataStoreOutput, PreprocessResult
from conformance.driver import CLEAN_REFUSALS, Driver, describe_exception
from conformance.results import Category, CheckFailure

from . import _support as support


def _fingerprint(exported) -> str:
    """Graph code, node metadata that matters, and every state-dict tensor's bytes."""
    h = hashlib.sha256()
    h.update(exported.graph_module.code.encode())
    for node in exported.graph.nodes:
        h.update(f"{node.name}|{node.op}|{node.target}|{node.args}|{node.kwargs}|{node.meta.get('debug_handle')}".encode())
    for name, tensor in sorted(exported.state_dict.items()):
        h.update(name.encode())
        h.update(np.ascontiguousarray(tensor.detach().float().numpy()).tobytes())
    return h.hexdigest()


def _node_handles(exported) -> set[int]:
    return {n.meta["debug_handle"] for n in exported.graph.nodes if n.op == "call_function" and "debug_handle" in n.meta}


def test_PRE_001_result_is_a_preprocess_result(backend, result):
    program = support.runnable(backend)
    out, elapsed = Driver(backend).preprocess(program.fresh())  # validates every field
    result.set(program=program.name)
    result.stats(processed_bytes=len(out.processed_bytes))


def test_PRE_002_deterministic(backend, result):
    program = support.runnable(backend)
    driver = Driver(backend)
    first, _ = driver.preprocess(program.fresh())
    second, _ = driver.preprocess(program.fresh())
    result.set(program=program.name)
    if first.processed_bytes != second.processed_bytes:
        diff = next(i for i, (a, b) in enumerate(zip(first.processed_bytes, second.processed_bytes)) if a != b) \
            if len(first.processed_bytes) == len(second.processed_bytes) else None
        where = f"first difference at byte {diff}" if diff is not None else \
            f"lengths {len(first.processed_bytes)} and {len(second.processed_bytes)}"
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"processed_bytes differ between two identical calls ({where})")
    if first.debug_handle_map != second.debug_handle_map:
        raise CheckFailure(Category.CONTRACT_VIOLATION, "debug_handle_map differs between two identical calls")
    entries = lambda r: dict(r.data_store_output.entries) if r.data_store_output else {}  # noqa: E731
    if entries(first) != entries(second):
        raise CheckFailure(Category.CONTRACT_VIOLATION, "named data differs between two identical calls")


@pytest.mark.parametrize("program", list(support.CONTRACT_PROGRAMS))
def test_PRE_003_program_not_mutated(backend, result, program):
    contract = support.contract_program(program)
    exported = contract.fresh()
    before = _fingerprint(exported)
    try:
        Driver(backend).preprocess(exported)
    except CheckFailure as exc:
        if exc.category is Category.NOT_SUPPORTED:
            result.not_applicable(f"the backend refuses {program} ({exc.message})")
        raise
    if _fingerprint(exported) != before:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"preprocess changed the {program} program it was given")


def test_PRE_004_debug_handle_map_points_at_real_nodes(backend, result):
    program = support.runnable(backend)
    exported = program.fresh()
    out, _ = Driver(backend).preprocess(exported)
    result.set(program=program.name)
    handles = _node_handles(exported)
    dhm = out.debug_handle_map
    if dhm is None:
        result.not_applicable("the backend returns no debug_handle_map")
    dangling = sorted({h for values in dhm.values() for h in values} - handles)
    if dangling:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"debug_handle_map refers to debug handle(s) {dangling[:10]} that no node of the program has "
            f"(the program's handles are {sorted(handles)[:10]}...)",
        )


def test_PRE_005_named_data_well_formed(backend, result):
    driver = Driver(backend)
    checked = 0
    for name in support.CONTRACT_PROGRAMS:
        try:
            out, _ = driver.preprocess(support.contract_program(name).fresh())
        except CheckFailure as exc:
            if exc.category is Category.NOT_SUPPORTED:
                continue
            raise
        store = out.data_store_output or NamedDataStoreOutput()
        for key, entry in store.entries.items():
            if not isinstance(key, str) or not key:
                raise CheckFailure(Category.CONTRACT_VIOLATION, f"{name}: named data key {key!r} is not a non-empty str")
            if not isinstance(entry.data, bytes):
                raise CheckFailure(Category.CONTRACT_VIOLATION, f"{name}: named data {key!r} is not bytes")
            if entry.alignment <= 0 or entry.alignment & (entry.alignment - 1):
                raise CheckFailure(
                    Category.CONTRACT_VIOLATION, f"{name}: named data {key!r} alignment {entry.alignment} is not a power of two"
                )
        loaded = driver.init(out)
        missing = [k for k in loaded.named_data.requested if k not in store.entries]
        driver.destroy(loaded)
        if missing:
            raise CheckFailure(Category.CONTRACT_VIOLATION, f"{name}: init asked for named data {missing} that preprocess never stored")
        checked += 1
    result.stats(programs=checked)
    if not checked:
        result.not_applicable("the backend accepts none of the contract programs")


def test_PRE_006_unsupported_op_refused_at_preprocess(backend, result):
    program = support.contract_program("unsupported_probe")
    result.set(program=program.name)
    driver = Driver(backend)
    try:
        out, _ = driver.preprocess(program.fresh())
    except CheckFailure as exc:
        cause = exc.__cause__
        if isinstance(cause, BackendError) and cause.error in CLEAN_REFUSALS:
            if support.PROBE_OP.split(".")[1] not in cause.message:
                raise CheckFailure(
                    Category.CONTRACT_VIOLATION,
                    f"the refusal does not name the operator {support.PROBE_OP}: {cause}",
                ) from exc
            return
        detail = describe_exception(cause) if cause else exc.message
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"{support.PROBE_OP} was refused with {detail}; refuse unsupported ops with BackendError(NotSupported)",
        ) from exc
    # Accepted: then it must compute it.
    eager = support.eager_outputs(program.exported, program.inputs)
    loaded = driver.init(out)
    try:
        ran = driver.execute(loaded, program.inputs, eager)
    finally:
        driver.destroy(loaded)
    support.compare_outputs(ran.outputs, eager, what=f"accepted {support.PROBE_OP}")


def test_PRE_007_multimethod_lines_up(backend, result):
    details = backend.details
    if not callable(getattr(details, "preprocess_multimethod", None)):
        result.not_applicable("the backend's AOT half has no preprocess_multimethod")
    accepted = []
    driver = Driver(backend)
    for name in support.CONTRACT_PROGRAMS:
        program = support.contract_program(name)
        try:
            single, _ = driver.preprocess(program.fresh())
        except CheckFailure as exc:
            if exc.category is Category.NOT_SUPPORTED:
                continue
            raise
        accepted.append((name, program, single))
    if len(accepted) < 1:
        result.not_applicable("the backend accepts none of the contract programs")
    methods = {"forward": [p.fresh() for _, p, _ in accepted], "second": [accepted[0][1].fresh()]}
    specs = {m: [list(backend.compile_specs) for _ in programs] for m, programs in methods.items()}
    try:
        out = details.preprocess_multimethod(methods, specs)
    except Exception as exc:
        raise CheckFailure(Category.PREPROCESS_FAIL, f"preprocess_multimethod raised {describe_exception(exc)}") from exc
    if not isinstance(out, dict) or set(out) != set(methods):
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"preprocess_multimethod returned methods {sorted(out) if isinstance(out, dict) else out!r}, expected {sorted(methods)}")
    expected = {"forward": [s for _, _, s in accepted], "second": [accepted[0][2]]}
    for method, results in out.items():
        if len(results) != len(expected[method]):
            raise CheckFailure(Category.CONTRACT_VIOLATION, f"method {method}: {len(results)} results for {len(expected[method])} partitions")
        for i, (got, want) in enumerate(zip(results, expected[method])):
            if not isinstance(got, PreprocessResult) or got.processed_bytes != want.processed_bytes:
                raise CheckFailure(
                    Category.CONTRACT_VIOLATION,
                    f"method {method} partition {i}: result differs from preprocess of the same program",
                )
    result.stats(partitions=sum(len(v) for v in methods.values()))
