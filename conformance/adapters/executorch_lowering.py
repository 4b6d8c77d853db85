"""Ahead-of-time half of the ExecuTorch adapters: a harness program -> Edge -> XNNPACK or a .pte.

The harness hands ``preprocess`` a core-ATen ExportedProgram whose call_function
nodes carry its debug handles. ExecuTorch wants its own Edge dialect, so this
module lowers a private copy the way an ExecuTorch user would:

- XNNPACK: ``to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])``
  then ``to_executorch()``; the delegate payload, debug_handle_map and named data
  are ``XnnpackBackend.preprocess``'s own output for the one delegated partition.
- portable: ``to_edge(program).to_executorch()``: no partitioner, every op on
  ExecuTorch's CPU kernels; the whole .pte is the blob.

Three things the harness program needs before ExecuTorch takes it:

1. Debug handles. ``to_edge`` renumbers ``node.meta["debug_handle"]`` by source
   ancestor. Each harness handle is carried through in ``node.meta["custom"]``
   (which torch.export's retracing propagates to every node an op becomes) and a
   transform pass, run after ``to_edge`` and before partitioning, writes it back as
   the debug handle. XNNPACK's XNodes and the emitter's instruction map then name
   harness nodes. Nodes ExecuTorch created from nothing keep no handle.
2. Dynamic dimensions. The harness exports sizes dynamic and unbounded
   (``Dim.AUTO``); ExecuTorch plans memory for the upper bound of every size and
   falls back to the export hint when it is unbounded, so one program would only
   take its first example's sizes. Each unbounded size is bounded to
   ``max(hint, DYNAMIC_DIM_BOUND)`` on the private copy (the strategies draw sides
   of at most 10). A larger input is refused by ExecuTorch at ``set_inputs``.
3. Cost. Lowering takes 1-2 s (three ``run_decompositions`` in
   ``to_edge_transform_and_lower``), the numerics checks preprocess the same
   program for every example, and contract checks preprocess the same contract
   program many times. Lowerings (and refusals) are cached by a content hash of
   the program and compile specs. To keep PRE-002 (determinism) honest, the
   first repeat of a program re-runs the real ``XnnpackBackend.preprocess`` on a
   fresh copy of the partition (for portable: ``to_executorch`` again) and
   returns that second output; later repeats return the cached result.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from conformance.api import BackendError, CompileSpec, DataEntry, Error, NamedDataStoreOutput
from conformance.api.ops import op_name

DYNAMIC_DIM_BOUND = 16
"""Upper bound given to each unbounded dynamic size (never below the export hint)."""
CACHE_ENTRIES = 256
CUSTOM_KEY = "conformance_debug_handle"

_BOOKKEEPING = frozenset(
    {
        "getitem",
        "aten.sym_size.int",
        "aten.sym_numel.default",
        "aten.sym_stride.int",
        "aten.sym_storage_offset.default",
        "aten._assert_scalar.default",
        "aten._assert_async.msg",
        "aten.sym_constrain_range_for_size.default",
        "aten._assert_tensor_metadata.default",
    }
)
"""Graph nodes that compute no tensor: shape arithmetic and runtime asserts."""


# ---------------------------------------------------------------------------------------------
# The harness program, prepared for ExecuTorch


def fingerprint(program, compile_specs: Sequence[CompileSpec], flavour: str) -> str:
    """A content hash: graph, the node metadata that matters, ranges, weights and compile specs."""
    import torch

    h = hashlib.sha256(flavour.encode())
    h.update(program.graph_module.code.encode())
    for node in program.graph.nodes:
        val = node.meta.get("val")
        desc = f"{getattr(val, 'dtype', '')}{list(getattr(val, 'shape', ()))}" if val is not None else ""
        h.update(f"{node.name}|{node.op}|{node.target}|{node.args}|{node.kwargs}|{node.meta.get('debug_handle')}|{desc}".encode())
    h.update(repr(sorted((str(k), str(v)) for k, v in program.range_constraints.items())).encode())
    h.update(repr(program.graph_signature).encode())
    for name, tensor in sorted({**program.state_dict, **program.constants}.items()):
        h.update(name.encode())
        if isinstance(tensor, torch.Tensor):
            t = tensor.detach().contiguous().reshape(-1)
            h.update(f"{t.dtype}{list(tensor.shape)}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes())
        else:
            h.update(repr(tensor).encode())
    for spec in compile_specs:
        h.update(spec.key.encode() + b"=" + spec.value)
    return h.hexdigest()


def prepared_copy(program):
    """A private copy with harness handles in ``meta["custom"]`` and every dynamic size bounded."""
    from torch.utils._sympy.numbers import int_oo
    from torch.utils._sympy.value_ranges import ValueRanges

    exported = copy.deepcopy(program)
    shape_envs = set()
    for node in exported.graph.nodes:
        if node.op == "call_function" and "debug_handle" in node.meta:
            custom = dict(node.meta.get("custom") or {})
            custom[CUSTOM_KEY] = node.meta["debug_handle"]
            node.meta["custom"] = custom
        val = node.meta.get("val")
        for size in getattr(val, "shape", ()) or ():
            env = getattr(getattr(size, "node", None), "shape_env", None)
            if env is not None:
                shape_envs.add(env)
    hints = {}
    for env in shape_envs:
        for sym, hint in getattr(env, "backed_var_to_val", getattr(env, "var_to_val", {})).items():
            hints[sym] = hint
    for sym, vr in list(exported.range_constraints.items()):
        if getattr(vr.upper, "is_Integer", False) and vr.upper is not int_oo:
            continue  # already bounded
        upper = max(int(hints.get(sym, 0)), DYNAMIC_DIM_BOUND)
        bounded = ValueRanges(vr.lower, upper)
        exported.range_constraints[sym] = bounded
        for env in shape_envs:
            if sym in env.var_to_range:
                env.var_to_range[sym] = bounded
    return exported


def restore_harness_handles(graph_module):
    """Transform pass: the debug handle of every node is the harness handle it came from."""
    from torch.fx.passes.infra.pass_base import PassResult

    modules = [graph_module] + [m for m in graph_module.modules() if m is not graph_module and hasattr(m, "graph")]
    for gm in modules:
        for node in gm.graph.nodes:
            if node.op in ("placeholder", "output"):
                continue
            handle = (node.meta.get("custom") or {}).get(CUSTOM_KEY)
            if handle is None:
                node.meta.pop("debug_handle", None)
            else:
                node.meta["debug_handle"] = handle
    return PassResult(graph_module, True)


def leftover_ops(graph) -> tuple[list[str], int]:
    """(compute ops outside any delegate, each with its tensor arguments, as in
    ``aten.relu.default(float32[0])``; number of delegate calls) of a lowered top-level graph."""
    leftovers, delegates = [], 0
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        name = op_name(node.target)
        if "executorch_call_delegate" in name:
            delegates += 1
        elif name.startswith("sym.") or name in _BOOKKEEPING:
            continue
        else:
            leftovers.append(f"{name}({', '.join(_arg_specs(node))})")
    return leftovers, delegates


def _arg_specs(node) -> list[str]:
    """``float32[2, 0]`` for each tensor argument of ``node`` (what the partitioner judged)."""
    specs = []
    for arg in node.all_input_nodes:
        val = arg.meta.get("val")
        if hasattr(val, "dtype") and hasattr(val, "shape"):
            specs.append(f"{str(val.dtype).removeprefix('torch.')}{list(val.shape)}")
    return specs


UNDELEGATED_HINT = (
    "XnnpackPartitioner's common constraints (partition/config/xnnpack_config.py) refuse empty tensors "
    "and mixed input dtypes, its op configs their own attribute limits"
)


def _describe(ops: list[str]) -> str:
    counts: dict[str, int] = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    return ", ".join(f"{op} (x{n})" if n > 1 else op for op, n in sorted(counts.items()))


def refusal_from(exc: Exception) -> BackendError | None:
    """ExecuTorch's own clean refusals as BackendError(NotSupported); None for anything else."""
    from torch._export.verifier import SpecViolationError

    if isinstance(exc, SpecViolationError):
        text = " ".join(str(exc).split())
        return BackendError(Error.NotSupported, f"ExecuTorch's Edge dialect verifier refuses the program: {text[:600]}")
    return None


# ---------------------------------------------------------------------------------------------
# Results


@dataclass
class Lowered:
    """What one lowering produced, kept for repeats and for the runtime."""

    processed_bytes: bytes
    debug_handle_map: dict[int, tuple[int, ...]]
    named_data: dict[str, DataEntry]
    template: Any = None
    """XNNPACK: the PTEFile the delegate payload is embedded in at init."""
    partition: Any = None
    """XNNPACK: the Edge program of the delegated partition (re-preprocessed for PRE-002)."""
    et_compile_specs: list = field(default_factory=list)
    edge: Any = None
    """portable: the EdgeProgramManager (to_executorch again for PRE-002)."""
    reproduced: bool = False

    def named_output(self) -> NamedDataStoreOutput | None:
        return NamedDataStoreOutput(dict(self.named_data)) if self.named_data else None


class _Cache:
    """LRU of Lowered results and BackendError refusals by fingerprint; thread safe."""

    def __init__(self, size: int = CACHE_ENTRIES):
        self.size = size
        self.entries: OrderedDict[str, Lowered | BackendError] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: str):
        with self.lock:
            entry = self.entries.get(key)
            if entry is not None:
                self.entries.move_to_end(key)
            return entry

    def put(self, key: str, entry) -> None:
        with self.lock:
            self.entries[key] = entry
            self.entries.move_to_end(key)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)


_XNNPACK_CACHE = _Cache()
_PORTABLE_CACHE = _Cache()
_LOWER_LOCK = threading.Lock()  # ExecuTorch's lowering keeps global state (op registries, fake modes)


def _named_data(output) -> dict[str, DataEntry]:
    """ExecuTorch's NamedDataStoreOutput (pte_data: key -> buffer index, alignment) as harness entries."""
    if output is None:
        return {}
    if output.external_data:
        raise BackendError(
            Error.NotSupported,
            f"the delegate stored named data outside the program ({sorted(output.external_data)}); "
            "the adapter carries only data stored in the .pte",
        )
    return {key: DataEntry(bytes(output.buffers[e.buffer_index]), int(e.alignment)) for key, e in output.pte_data.items()}


def _et_specs(compile_specs: Sequence[CompileSpec]) -> list:
    from executorch.exir.backend.compile_spec_schema import CompileSpec as ETCompileSpec

    return [ETCompileSpec(s.key, s.value) for s in compile_specs]


def _dhm(raw) -> dict[int, tuple[int, ...]]:
    out = {}
    for key, value in (raw or {}).items():
        values = value if isinstance(value, (list, tuple)) else (value,)
        out[int(key) if not isinstance(key, str) else key] = tuple(int(v) for v in values if v is not None)
    return out


# ---------------------------------------------------------------------------------------------
# XNNPACK


def lower_xnnpack(program, compile_specs: Sequence[CompileSpec]) -> Lowered:
    """Preprocess for executorch-xnnpack (cached); raises BackendError(NotSupported) on refusal."""
    key = fingerprint(program, compile_specs, "xnnpack")
    entry = _XNNPACK_CACHE.get(key)
    if isinstance(entry, BackendError):
        raise BackendError(entry.error, entry.message)
    if entry is None:
        try:
            entry = _lower_xnnpack(program, compile_specs)
        except BackendError as exc:
            if exc.error is Error.NotSupported:
                _XNNPACK_CACHE.put(key, exc)
            raise
        _XNNPACK_CACHE.put(key, entry)
        return entry
    if not entry.reproduced:
        entry.reproduced = True
        again = _repreprocess_xnnpack(entry)
        if again is not None:
            return again
    return entry


def _lower_xnnpack(program, compile_specs) -> Lowered:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir._serialize._program import deserialize_pte_binary

    exported = prepared_copy(program)
    with _LOWER_LOCK:
        try:
            edge = to_edge_transform_and_lower(
                exported,
                transform_passes=[restore_harness_handles],
                partitioner=[XnnpackPartitioner()],
            )
        except Exception as exc:
            refusal = refusal_from(exc)
            if refusal is not None:
                raise refusal from exc
            raise
        top = edge.exported_program()
        leftovers, delegates = leftover_ops(top.graph)
        if leftovers:
            raise BackendError(
                Error.NotSupported,
                f"{_describe(leftovers)} left undelegated by the XnnpackPartitioner "
                f"(they would run on ExecuTorch's CPU kernels, not on XNNPACK; {UNDELEGATED_HINT})",
            )
        lowered = [m for _, m in top.graph_module.named_children() if hasattr(m, "processed_bytes")]
        if delegates == 0 or not lowered:
            raise BackendError(Error.NotSupported, "the XnnpackPartitioner delegated nothing of this program")
        if len(lowered) > 1 or delegates > 1:
            raise BackendError(
                Error.NotSupported,
                f"the XnnpackPartitioner split the program into {len(lowered)} delegate partitions; "
                "the adapter certifies one XNNPACK blob per program",
            )
        module = lowered[0]
        if module.backend_id != "XnnpackBackend":
            raise BackendError(Error.NotSupported, f"the program was delegated to {module.backend_id}, not XnnpackBackend")
        executorch = edge.to_executorch()
    template = deserialize_pte_binary(bytes(executorch.buffer))
    dhm = (module.meta or {}).get("debug_handle_map") if hasattr(module, "meta") else None
    return Lowered(
        processed_bytes=bytes(module.processed_bytes),
        debug_handle_map=_dhm(dhm),
        named_data=_named_data(module.named_data_store_output),
        template=template,
        partition=copy.deepcopy(module.original_module),
        et_compile_specs=list(module.compile_specs),
    )


def _repreprocess_xnnpack(entry: Lowered) -> Lowered | None:
    """XnnpackBackend.preprocess again, on a fresh copy of the partition it lowered."""
    from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend

    with _LOWER_LOCK:
        result = XnnpackBackend.preprocess(copy.deepcopy(entry.partition), list(entry.et_compile_specs))
    return Lowered(
        processed_bytes=bytes(result.processed_bytes),
        debug_handle_map=_dhm(result.debug_handle_map),
        named_data=_named_data(result.data_store_output),
        template=entry.template,
        partition=entry.partition,
        et_compile_specs=entry.et_compile_specs,
        reproduced=True,
    )


# ---------------------------------------------------------------------------------------------
# portable


@functools.lru_cache(maxsize=1)
def runtime_operators() -> frozenset[str]:
    """The kernels the pip runtime registered, as ``aten::add.out``."""
    from executorch.runtime import Runtime

    return frozenset(Runtime.get().operator_registry.operator_names)


def lower_portable(program, compile_specs: Sequence[CompileSpec]) -> Lowered:
    """Preprocess for executorch-portable (cached); raises BackendError(NotSupported) on refusal."""
    key = fingerprint(program, compile_specs, "portable")
    entry = _PORTABLE_CACHE.get(key)
    if isinstance(entry, BackendError):
        raise BackendError(entry.error, entry.message)
    if entry is None:
        try:
            entry = _lower_portable(program, compile_specs)
        except BackendError as exc:
            if exc.error is Error.NotSupported:
                _PORTABLE_CACHE.put(key, exc)
            raise
        _PORTABLE_CACHE.put(key, entry)
        return entry
    if not entry.reproduced:
        entry.reproduced = True
        with _LOWER_LOCK:
            executorch = copy.deepcopy(entry.edge).to_executorch()
        return Lowered(bytes(executorch.buffer), _instruction_map(executorch), {}, reproduced=True)
    return entry


def _instruction_map(executorch) -> dict[int, tuple[int, ...]]:
    raw = executorch.debug_handle_map.get("forward", {})
    return {int(k): v for k, v in _dhm(raw).items() if v}


def _lower_portable(program, compile_specs) -> Lowered:
    from executorch.exir import to_edge

    if compile_specs:
        raise BackendError(Error.InvalidArgument, f"executorch-portable takes no compile specs, got {[s.key for s in compile_specs]}")
    exported = prepared_copy(program)
    with _LOWER_LOCK:
        try:
            edge = to_edge(exported).transform([restore_harness_handles])
        except Exception as exc:
            refusal = refusal_from(exc)
            if refusal is not None:
                raise refusal from exc
            raise
        executorch = copy.deepcopy(edge).to_executorch()
    plan = executorch.executorch_program.execution_plan[0]
    have = runtime_operators()
    missing = sorted({f"aten.{o.name.split('::', 1)[-1]}.{o.overload or 'default'}"
                      for o in plan.operators
                      if f"{o.name}.{o.overload}" not in have and o.name not in have})
    if missing:
        raise BackendError(
            Error.NotSupported,
            f"the ExecuTorch runtime has no kernel for {', '.join(missing)} "
            "(it would fail at load_method with OperatorMissing)",
        )
    return Lowered(bytes(executorch.buffer), _instruction_map(executorch), {}, edge=edge)
