"""DBG: debug handles and profiling events lead back to source nodes."""

from __future__ import annotations

from conformance.api import BackendError
from conformance.driver import Driver
from conformance.results import Category, CheckFailure

from . import _support as support


def _handles_by_node(exported) -> dict[int, str]:
    return {n.meta["debug_handle"]: n.name for n in exported.graph.nodes if n.op == "call_function" and "debug_handle" in n.meta}


def test_DBG_001_failure_carries_debug_handle(backend, result):
    program = support.contract_program("index_failure")
    result.set(program=program.name)
    exported = program.fresh()
    driver = Driver(backend)
    try:
        out, _ = driver.preprocess(exported)
    except CheckFailure as exc:
        if exc.category is Category.NOT_SUPPORTED:
            result.not_applicable(f"the backend refuses the index_select program ({exc.message})")
        raise
    nodes = _handles_by_node(exported)
    failing_node = next(n.name for n in exported.graph.nodes if n.op == "call_function" and "index_select" in str(n.target))
    good = support.eager_outputs(program.exported, program.inputs)
    loaded = driver.init(out)
    try:
        inputs = (program.inputs[0], support.FAILING_INDEX)
        try:
            driver.execute(loaded, inputs, good)
        except CheckFailure as exc:
            cause = exc.__cause__
            if not isinstance(cause, BackendError):
                raise CheckFailure(Category.CONTRACT_VIOLATION, f"an out-of-range index_select gave {exc.message}") from exc
            if cause.debug_handle is None:
                raise CheckFailure(
                    Category.CONTRACT_VIOLATION, f"the failure carries no debug handle ({cause}); set BackendError.debug_handle"
                ) from exc
            dhm = out.debug_handle_map or {}
            sources = dhm.get(cause.debug_handle)
            if sources is None:
                raise CheckFailure(
                    Category.CONTRACT_VIOLATION,
                    f"the failure's debug handle {cause.debug_handle} is not a key of debug_handle_map ({sorted(dhm)[:10]})",
                ) from exc
            names = [nodes.get(h, f"<no node {h}>") for h in sources]
            if failing_node not in names:
                raise CheckFailure(
                    Category.CONTRACT_VIOLATION,
                    f"the failure's debug handle {cause.debug_handle} maps to {names}, not to the failing node {failing_node}",
                ) from exc
            result.stats(debug_handle=cause.debug_handle, source_nodes=names)
            return
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"index_select with index {int(support.FAILING_INDEX[1])} into a dimension of size "
            f"{program.inputs[0].shape[0]} succeeded; an out-of-range index must fail with BackendError",
        )
    finally:
        driver.destroy(loaded)


def test_DBG_002_debug_handles_cover_delegated_nodes(backend, result):
    program = support.runnable(backend)
    result.set(program=program.name)
    exported = program.fresh()
    out, _ = Driver(backend).preprocess(exported)
    if out.debug_handle_map is None:
        result.not_applicable("the backend returns no debug_handle_map")
    nodes = _handles_by_node(exported)
    mapped = {h for values in out.debug_handle_map.values() for h in values}
    uncovered = sorted(set(nodes) - mapped)
    if uncovered:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"debug_handle_map covers no id for node(s) {[nodes[h] for h in uncovered][:10]}",
        )
    unknown = sorted(mapped - set(nodes))
    if unknown:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"debug_handle_map maps to handles {unknown[:10]} no node has")
    result.stats(ids=len(out.debug_handle_map), nodes=len(nodes))


def test_DBG_003_events_name_real_instructions(backend, result):
    driver, program, out, expected = support.prepared(backend, result)
    _, ran = driver.execute_once(out, program.inputs, expected)
    if not ran.events:
        result.not_applicable("the backend reports no profiling events")
    keys = set((out.debug_handle_map or {}).keys())
    for event in ran.events:
        ident = event.delegate_debug_id if event.delegate_debug_id is not None else event.name
        if ident not in keys:
            raise CheckFailure(
                Category.CONTRACT_VIOLATION,
                f"profiling event {ident!r} is not a key of debug_handle_map ({sorted(map(str, keys))[:10]})",
            )
        if event.end_ns < event.start_ns:
            raise CheckFailure(Category.CONTRACT_VIOLATION, f"profiling event {ident!r} ends before it starts")
    result.stats(events=len(ran.events))
