"""PRE: the ahead-of-time half of the contract."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest

from conformance.api import BackendError, NamedDataStoreOutput, PreprocessResult
from conformance.driver import CLEAN_REFUSALS, Driver, describe_exception
from conformance.results import Category, CheckFailure

from . import _fresh as fresh
from . import _support as support

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _dims(sizes) -> str:
    """Sizes or strides, symbolic ones (SymInt) by their expression."""
    return "(" + ", ".join(str(s) for s in sizes) + ("," if len(sizes) == 1 else "") + ")"


def _describe(value: Any) -> str:
    """A stable description of a node argument or metadata value: tensors (FakeTensors in
    ``val``) by type, shape, dtype, stride and device; nodes by name; other values by repr,
    memory addresses removed."""
    import torch

    if isinstance(value, torch.fx.Node):
        return f"%{value.name}"
    if isinstance(value, torch.Tensor):
        try:
            stride = _dims(value.stride())
        except Exception:  # sparse and other layouts without strides
            stride = None
        return (f"{type(value).__name__}(shape={_dims(value.shape)}, dtype={value.dtype}, "
                f"stride={stride}, device={value.device}, requires_grad={value.requires_grad})")
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return f"{type(value).__name__}({value})"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__}[{', '.join(_describe(v) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in value.items()) + "}"
    return _ADDRESS.sub("", repr(value))


def _snapshot(exported) -> dict[str, Any]:
    """What preprocess must leave alone (PRE-003): every node's name, op, target, arguments and
    every metadata entry (stack_trace, nn_module_stack, from_node, val, debug_handle, ...), the
    graph signature, the generated code and the bytes of every state-dict tensor and constant."""
    import torch

    nodes = {}
    for node in exported.graph.nodes:
        nodes[node.name] = {
            "op": node.op,
            "target": _describe(node.target) if not callable(node.target) else str(node.target),
            "args": _describe(node.args),
            "kwargs": _describe(node.kwargs),
            **{f"meta[{key!r}]": _describe(node.meta[key]) for key in node.meta},
        }
    tensors = {}
    for kind, table in (("state_dict", exported.state_dict), ("constants", getattr(exported, "constants", {}) or {})):
        for name, tensor in sorted(table.items()):
            if isinstance(tensor, torch.Tensor):
                data = tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
                tensors[f"{kind}[{name!r}]"] = _describe(tensor) + " sha256 " + hashlib.sha256(data).hexdigest()[:16]
            else:
                tensors[f"{kind}[{name!r}]"] = _describe(tensor)
    return {
        "nodes": nodes,
        "order": list(nodes),
        "signature": str(exported.graph_signature),
        "range_constraints": _describe(dict(exported.range_constraints)),
        "code": exported.graph_module.code,
        "tensors": tensors,
    }


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What preprocess changed, one phrase per change, most telling first."""
    out = []
    removed = [n for n in before["order"] if n not in after["nodes"]]
    added = [n for n in after["order"] if n not in before["nodes"]]
    if removed:
        out.append(f"removed node(s) {removed[:5]}")
    if added:
        out.append(f"added node(s) {added[:5]}")
    if not removed and not added and before["order"] != after["order"]:
        out.append("reordered the nodes")
    for name in before["order"]:
        if name not in after["nodes"]:
            continue
        b, a = before["nodes"][name], after["nodes"][name]
        for key in b:
            if key not in a:
                out.append(f"node {name!r} lost {key}")
            elif a[key] != b[key]:
                out.append(f"{key} of node {name!r} changed from {_short(b[key])} to {_short(a[key])}")
        for key in a:
            if key not in b:
                out.append(f"node {name!r} gained {key} ({_short(a[key])})")
    for key in ("signature", "range_constraints", "code"):
        if before[key] != after[key]:
            out.append(f"the graph {key.replace('_', ' ')} changed")
    for key in sorted(set(before["tensors"]) | set(after["tensors"])):
        if before["tensors"].get(key) != after["tensors"].get(key):
            out.append(f"{key} changed" if key in before["tensors"] and key in after["tensors"] else
                       f"{key} {'disappeared' if key in before['tensors'] else 'appeared'}")
    return out


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
    before = _snapshot(exported)
    try:
        Driver(backend).preprocess(exported)
    except CheckFailure as exc:
        if exc.category is Category.NOT_SUPPORTED:
            result.not_applicable(f"the backend refuses {program} ({exc.message})")
        raise
    meta = [k for node in before["nodes"].values() for k in node if k.startswith("meta[")]
    result.stats(nodes=len(before["nodes"]), meta_entries=len(meta),
                 **{f"nodes_with_{k}": meta.count(f"meta[{k!r}]") for k in ("stack_trace", "nn_module_stack", "from_node", "val")})
    changes = _changes(before, _snapshot(exported))
    if changes:
        more = f" (and {len(changes) - 3} more change(s))" if len(changes) > 3 else ""
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"preprocess changed the {program} program it was given: {'; '.join(changes[:3])}{more}. "
            "The caller keeps using the program after preprocess; work on a copy (copy.deepcopy(edge_program)) "
            "instead of editing its graph, nodes or metadata in place.",
        )


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


_FRESH_RUNS: dict[tuple, dict[int, dict]] = {}


def _identity(obj) -> Any:
    try:
        hash(obj)
    except TypeError:
        return ("id", id(obj), obj)  # unhashable: by identity (the tuple keeps it alive, so the id stays its own)
    return obj


def test_PRE_008_deterministic_across_processes(backend, result, request):
    program = support.runnable(backend)
    result.set(program=program.name)
    spec = fresh.backend_spec(request)
    if spec is None:
        result.not_applicable("the run did not name the backend (--conformance-backend), so no fresh process can load it")
    seeds = fresh.HASH_SEEDS
    # The verdict is the AOT half's: a backend whose preprocess is the very object an earlier
    # backend of this session had checked (another runtime over the same AOT half) reuses the
    # fresh processes' digests instead of starting two more interpreters (a few seconds each).
    key = (_identity(backend.details), tuple(backend.compile_specs), program.name)
    runs = _FRESH_RUNS.get(key)
    if runs is None:
        runs = fresh.prestarted_runs(spec, program.name, seeds)  # certify started them before the session
        if runs is None:
            runs = fresh.preprocess_in_fresh_processes(spec, program.name, seeds)
        else:
            result.set(measurements={"prestarted_fresh_processes": True})  # depends on how the run was started: not a stat
        _FRESH_RUNS[key] = runs
    else:
        result.set(measurements={"reused_fresh_processes": True})  # depends on scheduling: not a stat
    first, second = (runs[s] for s in seeds)
    where = f"two fresh processes that differ only in PYTHONHASHSEED ({seeds[0]} and {seeds[1]})"
    for seed in seeds:
        if "failure" in runs[seed]:
            raise CheckFailure(
                Category.CONTRACT_VIOLATION,
                f"preprocess of {program.name} succeeds in this process but in a fresh one with PYTHONHASHSEED={seed} "
                f"it gave {runs[seed]['failure']}: {runs[seed]['message']}",
            )
    result.stats(processes=len(seeds), processed_bytes=first["size"])
    advice = ("It depends on string hashing, which Python randomizes per process: iterate sets and dicts of "
              "str or bytes keys in sorted order (or by position in the graph) before writing anything they order.")
    if first["processed_bytes"] != second["processed_bytes"]:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"preprocess of {program.name} gives different processed_bytes in {where}: "
            f"{first['size']} bytes, sha256 {first['processed_bytes'][:16]}... against {second['size']} bytes, "
            f"sha256 {second['processed_bytes'][:16]}... {advice}",
        )
    if first["debug_handle_map"] != second["debug_handle_map"]:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"preprocess of {program.name} gives different debug_handle_maps in {where}: "
            f"{first['debug_handle_map'][:200]} against {second['debug_handle_map'][:200]}. {advice}",
        )
    if first["named_data"] != second["named_data"]:
        differ = sorted(set(first["named_data"]) ^ set(second["named_data"])) or sorted(
            k for k in first["named_data"] if first["named_data"][k] != second["named_data"].get(k)
        )
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"preprocess of {program.name} gives different named data in {where} (keys {differ[:5]} differ). {advice}",
        )
