"""ExportedPrograms for the checks: one op per program, or a small model.

A single-op program is *built*, not exported (``build_program``): the graph, signature,
module call graph and node metadata torch.export would produce for a module making the
call, in a few milliseconds instead of the 50-300 ms of torch.export plus
run_decompositions, so every drawn example gets its own static program
(tests/harness/test_programs.py proves the two equal for every op). torch.export remains
for the contract's small models and for ``program_for(..., export=True)``: exported once
per *structure* (``Call.structure``: op, dtypes, ranks, attributes, parameter shapes) with
dynamic, size-oblivious input dimensions, ``run_decompositions`` only when the graph holds
something other than core ATen and never on the op under test (as an ExecuTorch
partitioner keeps the ops its backend takes), and persisted in a disk cache keyed by a
content hash (``cache_dir``).

Every call_function node gets ``node.meta["debug_handle"]`` (1, 2, ... in graph
order), as ExecuTorch's to_edge does; plain torch.export leaves none.
"""

from __future__ import annotations

import collections
import copy
import functools
import hashlib
import io
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from conformance import __version__
from conformance.api.ops import op_name
from conformance.api.scalar_type import torch_dtype
from conformance.api.tensors import to_torch
from conformance.call import DTYPE_ATTRIBUTES, Call, Tensor
from conformance.compat import torch as compat_torch

PROGRAM_FORMAT = 4
"""Bump when the way programs are built changes, to invalidate disk caches.
4: example inputs of empty tensors have torch's strides, not NumPy's zeros (api/tensors.to_torch)."""

log = logging.getLogger(__name__)


class HarnessError(RuntimeError):
    """The harness could not build what a check needs. Never charged to the backend."""


# ---------------------------------------------------------------------------------------------
# Modules


_LIBRARIES = {"quantized_decomposed": "torch.ao.quantization.quantize_fx"}
"""Operator namespaces that torch.ops has only once a Python module has defined them (torch.library), and
a public module that defines them on import (quantize_fx imports torch.ao.quantization.fx._decomposed)."""


def _resolve_op(name: str):
    import importlib

    import torch

    namespace, op, overload = name.split(".")
    if namespace in _LIBRARIES:
        importlib.import_module(_LIBRARIES[namespace])
    try:
        return getattr(getattr(getattr(torch.ops, namespace), op), overload)
    except AttributeError:
        raise HarnessError(f"torch has no operator {name}") from None


@functools.cache
def core_aten() -> frozenset[str]:
    """Every overload of the installed torch tagged ``torch.Tag.core``, as ``aten.op.overload``.

    Read from every registered ``aten`` overload (``compat.torch.aten_overload_names``)."""
    import torch

    names = set()
    for name in compat_torch.aten_overload_names():
        try:
            overload = _resolve_op(name)
        except HarnessError:
            continue
        if torch.Tag.core in overload.tags:
            names.add(name)
    return frozenset(names)


@functools.cache
def mutated_arguments(op) -> tuple[tuple[int, str], ...]:
    """(position, name) of each argument ``op`` writes in place without returning it (``Tensor(a!)``
    in its schema while no return aliases it): _native_batch_norm_legit's running statistics."""
    returned = {a for r in op._schema.returns if r.alias_info is not None for a in r.alias_info.before_set}
    return tuple(
        (i, a.name) for i, a in enumerate(op._schema.arguments)
        if a.alias_info is not None and a.alias_info.is_write and not set(a.alias_info.before_set) & returned
    )


def mutated_values(op, args: Sequence[Any], kwargs: dict) -> list[Any]:
    """The values of the arguments ``op`` mutates (``mutated_arguments``) in a call ``op(*args, **kwargs)``."""
    values = (args[i] if i < len(args) else kwargs.get(name) for i, name in mutated_arguments(op))
    return [v for v in values if v is not None]


def program_results(returned: Any, mutated: Sequence[Any]) -> Any:
    """What a single-op program returns for a call that returned ``returned`` and mutated ``mutated``
    (``mutated_values``): the op's outputs without those it leaves undefined (None, an output_mask
    entry that is false), then the mutated arguments, whose new values are results of the call as
    much as its outputs (torch.export keeps the in-place op and returns its argument's placeholder).
    Anything else is returned as the op returned it."""
    undefined = isinstance(returned, (list, tuple)) and any(r is None for r in returned)
    if not mutated and not undefined:
        return returned
    kept = [r for r in returned if r is not None] if isinstance(returned, (list, tuple)) else [returned]
    return (*kept, *mutated)


def _torch_dtypes(kwargs: dict) -> dict:
    """``kwargs`` with the dtype attributes a Call spells by name as torch dtypes."""
    return {k: torch_dtype(v) if k in DTYPE_ATTRIBUTES and isinstance(v, str) else v for k, v in kwargs.items()}


class OpModule:
    """Factory for an nn.Module whose forward makes exactly one ``Call``."""

    @staticmethod
    def build(call: Call):
        import torch

        op = _resolve_op(call.op)
        params: dict[str, Any] = {}
        counter = iter(range(10**6))

        def template(a):
            if isinstance(a, Tensor):
                if a.role == "parameter":
                    name = f"p{len(params)}"
                    params[name] = to_torch(a.value)
                    return ("param", name)
                return ("input", next(counter))
            if isinstance(a, (list, tuple)):
                return type(a)(template(x) for x in a)
            return a

        args = template(call.args)
        kwargs = {k: template(v) for k, v in call.kwargs.items()}
        kwargs = _torch_dtypes(kwargs)

        class Single(torch.nn.Module):
            VARARGS = True

            def __init__(self):
                super().__init__()
                for name, value in params.items():
                    self.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))

            def forward(self, *inputs):
                def fill(a):
                    if isinstance(a, tuple) and len(a) == 2 and a[0] == "param" and isinstance(a[1], str):
                        return getattr(self, a[1])
                    if isinstance(a, tuple) and len(a) == 2 and a[0] == "input" and isinstance(a[1], int):
                        return inputs[a[1]]
                    if isinstance(a, (list, tuple)):
                        return type(a)(fill(x) for x in a)
                    return a

                called_args, called_kwargs = fill(args), {k: fill(v) for k, v in kwargs.items()}
                returned = op(*called_args, **called_kwargs)
                return program_results(returned, mutated_values(op, called_args, called_kwargs))

        Single.__name__ = f"Op_{call.op.replace('.', '_')}"
        return Single()


# ---------------------------------------------------------------------------------------------
# Export


def _is_core(target, keep: set[str]) -> bool:
    import torch

    if not isinstance(target, torch._ops.OpOverload):
        return True  # getitem and symbolic-size arithmetic
    return torch.Tag.core in target.tags or op_name(target) in keep


def assign_debug_handles(program) -> None:
    """node.meta["debug_handle"] = 1, 2, ... over call_function nodes, in graph order."""
    handle = 0
    for node in program.graph.nodes:
        if node.op == "call_function":
            handle += 1
            node.meta["debug_handle"] = handle


def export_module(module, example_inputs: Sequence[Any], *, dynamic: bool, keep: Sequence[str] = ()):
    """torch.export + (only if needed) run_decompositions, keeping ``keep`` undecomposed."""
    import torch
    from torch.export import Dim

    dynamic_shapes = None
    if dynamic:
        dynamic_shapes = tuple({i: Dim.AUTO for i in range(t.dim())} for t in example_inputs)
        if getattr(module, "VARARGS", False):
            dynamic_shapes = (dynamic_shapes,)  # forward(*inputs) binds all inputs to one parameter
    # Size-oblivious: sizes 0 and 1 do not specialize, so one program serves every size.
    with compat_torch.size_oblivious(dynamic):
        program = torch.export.export(module, tuple(example_inputs), dynamic_shapes=dynamic_shapes, strict=False)
    keep_set = set(keep)
    if not all(_is_core(n.target, keep_set) for n in program.graph.nodes if n.op == "call_function"):
        table = torch.export.default_decompositions()
        for name in keep_set:
            overload = _resolve_op(name)
            if overload in table:
                del table[overload]
        program = program.run_decompositions(table)
    assign_debug_handles(program)
    return program


# ---------------------------------------------------------------------------------------------
# Admissibility: does a program accept these input shapes?


def input_shapes_fit(program, shapes: Sequence[tuple[int, ...]]) -> bool:
    """True when every user input's dims match the program's static sizes and symbol ranges."""
    from torch.export.graph_signature import InputKind

    user = [s.arg.name for s in program.graph_signature.input_specs if s.kind is InputKind.USER_INPUT]
    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    if len(user) != len(shapes):
        return False
    bound: dict[Any, int] = {}
    for name, shape in zip(user, shapes):
        val = nodes[name].meta.get("val")
        if val is None or len(val.shape) != len(shape):
            return False
        for size, want in zip(val.shape, shape):
            if isinstance(size, int):
                if size != want:
                    return False
                continue
            expr = size.node.expr
            if not getattr(expr, "is_Symbol", False):
                return False
            if bound.setdefault(expr, want) != want:
                return False
            vr = program.range_constraints.get(expr)
            if vr is not None:
                lo = int(vr.lower) if getattr(vr.lower, "is_Integer", False) else 0
                hi = int(vr.upper) if getattr(vr.upper, "is_Integer", False) else None
                if want < lo or (hi is not None and want > hi):
                    return False
    return True


# ---------------------------------------------------------------------------------------------
# The cache


_CACHE_ROOT: list[Path | None] = []
"""The cache directory this process was told to use (``use_cache_dir``); [None]: no disk cache."""


def use_cache_dir(path: str | Path | None, *, disk: bool = True) -> None:
    """Where this process keeps programs, lowerings and compiled packages on disk (certify's
    ``--cache-dir``, the plugin's ``--conformance-cache``); ``disk=False``: nowhere (memory only)."""
    global _DEFAULT_CACHE
    _CACHE_ROOT[:] = [Path(path)] if path is not None else ([] if disk else [None])
    _DEFAULT_CACHE = None


def cache_dir() -> Path:
    """The cache directory: the one chosen with ``use_cache_dir``, else $XDG_CACHE_HOME (or
    ~/.cache) / torch-backend-conformance."""
    if _CACHE_ROOT and _CACHE_ROOT[0] is not None:
        return _CACHE_ROOT[0]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torch-backend-conformance"


def _digest(*parts: Any) -> str:
    import torch

    h = hashlib.sha256()
    for part in (PROGRAM_FORMAT, __version__, torch.__version__, *parts):
        h.update(repr(part).encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


@dataclass
class ProgramStats:
    exports: int = 0
    disk_hits: int = 0
    memory_hits: int = 0
    export_seconds: float = 0.0


class ProgramCache:
    """Programs by structure, in memory and on disk; safe to share between threads."""

    def __init__(self, directory: Path | None = None, *, use_disk: bool = True):
        self.directory = (directory or cache_dir()) / "programs"
        self.use_disk = use_disk
        self._variants: dict[str, list[Any]] = {}
        self._lock = threading.Lock()
        self.stats = ProgramStats()

    def _disk_path(self, key: str, index: int) -> Path:
        return self.directory / f"{key}-{index}.pt2"

    def _load_disk(self, key: str) -> list[Any]:
        out = []
        if not self.use_disk:
            return out
        index = 0
        while (path := self._disk_path(key, index)).exists():
            try:
                program = _read_program(path)
            except Exception as exc:  # a corrupt or stale entry is rebuilt, not fatal
                log.warning("program cache entry %s unreadable (%s); rebuilding", path, exc)
                break
            out.append(program)
            index += 1
        self.stats.disk_hits += len(out)
        return out

    def _store_disk(self, key: str, index: int, data: bytes) -> None:
        if not self.use_disk:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self._disk_path(key, index).with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, self._disk_path(key, index))
        except Exception as exc:
            log.warning("could not cache program %s: %s", key, exc)

    @staticmethod
    def _as_stored(program) -> tuple[Any, bytes | None]:
        """``program`` as a later process reads it back from the disk cache, and its bytes.

        torch.export.load does not give back the program torch.export.save was given: a node with
        several outputs gets a getitem for each, used or not (MobileNetV2: 80 operator nodes read
        back, 54 exported), so the debug handles differ too. Every process must see the same program
        whether it exported it or read it, so a new export is read back from its own bytes (and
        kept as exported only where it cannot be saved, which is logged)."""
        import torch

        try:
            buffer = io.BytesIO()
            torch.export.save(program, buffer)
            data = buffer.getvalue()
            return _read_program(io.BytesIO(data)), data
        except Exception as exc:  # noqa: BLE001 - a program export cannot serialize is still a program
            log.warning("an exported program does not survive torch.export.save/load (%s); used as exported", exc)
            return program, None

    def get(self, key_parts: Any, build: Callable[[], tuple[Any, list]], shapes: Sequence[tuple[int, ...]],
            dynamic: bool, keep: Sequence[str]):
        """The first cached variant that accepts ``shapes``, or a newly exported one."""
        import time

        key = _digest(key_parts)
        with self._lock:
            variants = self._variants.get(key)
            if variants is None:
                variants = self._load_disk(key)
                self._variants[key] = variants
            for program in variants:
                if input_shapes_fit(program, shapes):
                    self.stats.memory_hits += 1
                    return program
        module, example = build()
        start = time.perf_counter()
        program = None
        if dynamic:
            try:
                program = export_module(module, example, dynamic=True, keep=keep)
            except HarnessError:
                raise
            except Exception as exc:
                # Size-oblivious export cannot decide some broadcasts (a 1 against a 0);
                # a program specialized to these shapes is always possible.
                log.info("dynamic export failed (%s); exporting static shapes", exc)
        if program is None or not input_shapes_fit(program, shapes):
            try:
                program = export_module(module, example, dynamic=False, keep=keep)
            except HarnessError:
                raise
            except Exception as exc:
                raise HarnessError(f"torch.export failed: {type(exc).__name__}: {exc}") from exc
        program, data = self._as_stored(program)
        self.stats.exports += 1
        self.stats.export_seconds += time.perf_counter() - start
        with self._lock:
            variants.append(program)
            if data is not None:
                self._store_disk(key, len(variants) - 1, data)
        return program


def _read_program(source):
    """A program torch.export.save wrote (a path or a file object), with the harness's debug handles."""
    import torch

    program = torch.export.load(source)
    assign_debug_handles(program)
    return program


_DEFAULT_CACHE: ProgramCache | None = None


def default_cache() -> ProgramCache:
    global _DEFAULT_CACHE
    if _DEFAULT_CACHE is None:
        _DEFAULT_CACHE = ProgramCache(use_disk=_CACHE_ROOT != [None])
    return _DEFAULT_CACHE


# ---------------------------------------------------------------------------------------------
# Programs for calls


@dataclass
class Program:
    """An exported program ready for a backend, with the inputs of one call."""

    exported: Any
    """The ExportedProgram (a private copy: a backend may not mutate it, and if it does, only this copy)."""
    inputs: list[np.ndarray]
    """Runtime inputs, in the program's input order."""
    op: str | None = None
    """The op under test, for single-op programs."""
    description: str = ""
    outputs_from_eager: bool = False
    """The outputs' ``meta["val"]`` were described from eager's outputs, not computed by PyTorch's
    meta kernel (``build_program(call, like=...)``): the same program wherever the two agree, which
    ``meta_program`` decides when a verdict depends on it."""

    def torch_inputs(self) -> list[Any]:
        return [to_torch(a) for a in self.inputs]


def program_for(
    call: Call, *, dynamic: bool = True, cache: ProgramCache | None = None, export: bool = False, like: EagerOutputs | None = None
) -> Program:
    """The program that makes ``call`` on its inputs (parameters baked in with the call's values).

    By default the single-op program is built directly (``build_program``): the same
    graph, signature and metadata torch.export produces for a module making this
    call, in a few milliseconds instead of tens to hundreds, so every drawn example
    gets an exact, static program. ``export=True`` goes through torch.export (cached
    by structure, dynamic dims where they fit), which is also the fallback for a call
    the builder cannot express. ``like``: eager's outputs of the call, to describe the program's
    outputs from (``build_program``).
    """
    inputs = [t.value for t in call.inputs()]
    if not export:
        from_eager = like is not None and compat_torch.builds_programs() and eager_describes_outputs(_resolve_op(call.op), like.returned)
        exported = build_program(call, like=like.returned if from_eager else None)
        return Program(exported, inputs, op=call.op, description=call.describe(), outputs_from_eager=from_eager)
    cache = cache or default_cache()
    shapes = [tuple(a.shape) for a in inputs]

    def build():
        return OpModule.build(call), [to_torch(a) for a in inputs]

    skeleton = cache.get(call.structure(dynamic), build, shapes, dynamic, keep=(call.op,))
    exported = copy_program(skeleton)
    _set_parameters(exported, [t.value for t in call.tensors() if t.role == "parameter"])
    if not any(op_name(n.target) == call.op for n in exported.graph.nodes if n.op == "call_function"):
        raise HarnessError(f"the exported program for {call.op} does not contain {call.op}")
    return Program(exported, inputs, op=call.op, description=call.describe())


@dataclass(frozen=True)
class ModuleProgram:
    """A whole nn.Module exported once, with fixed inputs: a contract program
    (``checks/_support``) or a model (``conformance.models``)."""

    name: str
    exported: Any
    inputs: tuple[np.ndarray, ...]
    ops: frozenset[str]
    module: Any
    """The nn.Module it was exported from (eager timing runs this, not the unlifted graph)."""

    def fresh(self):
        """A private copy for one preprocess call (preprocess may not mutate it, but might)."""
        return copy_program(self.exported)

    @functools.cached_property
    def depth(self) -> int:
        """Operator nodes on the longest path from an input to an output (``node_depths``)."""
        depths = node_depths(self.exported)
        return max((depths[n.name] for n in self.exported.graph.output_node().all_input_nodes), default=0)


def module_program(kind: str, name: str, builder: Callable[[], tuple[Any, tuple]], *, cache: ProgramCache | None = None,
                   keep: Sequence[str] = (), source: str | None = None) -> ModuleProgram:
    """The program of ``builder()``'s module on its inputs, exported once with static shapes
    through the program cache (core ATen but for ``keep``), keyed by ``kind``, ``name`` and the
    builder's source (or ``source``, for a builder that is a closure over other code): an edited
    builder is a different program."""
    import inspect

    import torch

    module, inputs = builder()
    key = (kind, name, inspect.getsource(builder) if source is None else source)
    shapes = [tuple(a.shape) for a in inputs]

    def build():
        return module, [torch.from_numpy(np.array(a)) for a in inputs]

    exported = (cache or default_cache()).get(key, build, shapes, dynamic=False, keep=keep)
    ops = frozenset(op_name(n.target) for n in exported.graph.nodes if n.op == "call_function")
    return ModuleProgram(name, exported, tuple(inputs), ops, module)


def node_depths(exported) -> dict[str, int]:
    """Each node's depth: operator nodes on the longest path from an input, itself included
    (getitem, which picks one of an op's several outputs, is no operator)."""
    import operator

    depth: dict[str, int] = {}
    for n in exported.graph.nodes:  # FX graphs are in topological order
        before = max((depth[a.name] for a in n.all_input_nodes), default=0)
        depth[n.name] = before + (1 if n.op == "call_function" and n.target is not operator.getitem else 0)
    return depth


def copy_program(exported):
    """A deep copy of an ExportedProgram that still agrees with its own graph signature.

    ``copy.deepcopy`` renames a node whose name is a Python builtin (an export of
    ``forward(self, input)`` has a placeholder ``input``; the copy's is ``input_1``) but not the
    signature's input and output specs, so the copy breaks export's own invariants
    (``torch.export.save`` raises SpecViolationError) and a backend serializing what it is
    given would fail through no fault of its own. The copy takes back the original names."""
    clone = copy.deepcopy(exported)
    renamed = False
    for original, node in zip(exported.graph.nodes, clone.graph.nodes):
        if node.name != original.name:
            node.name = original.name
            renamed = True
    if renamed:
        clone.graph_module.recompile()
    return clone


def build_program(call: Call, *, like: Any = None):
    """The ExportedProgram torch.export gives for a module making ``call``, built directly.

    Parameters become PARAMETER placeholders (``p_p0``, ...) ahead of the user
    inputs, the op is one call_function node (getitem nodes pick a tuple's
    elements), every node's ``meta["val"]`` is a FakeTensor from running the op in
    a FakeTensorMode, and the module call graph carries the pytree specs that
    ``ExportedProgram.module()`` needs. tests/harness/test_programs.py checks the
    result against torch.export's, call for call.

    ``like``: what eager returned for the call (``eager_describes_outputs`` holds for it). The
    outputs' values are then FakeTensors of eager's sizes, strides and dtypes instead of the meta
    kernel's outputs, which cost more than the rest of the program (Python reference
    implementations for most ops); ``meta_program`` tells whether the two programs are the same.

    Where ``compat.torch.builds_programs()`` does not hold (a torch the builder was not tested on, or
    CONFORMANCE_COMPAT=public), the program is torch.export's own, with static shapes, through the
    program cache, and ``like`` is not used. A call torch.export refuses raises what it raised, as the
    builder raises what FakeTensorMode raised: PyTorch's tracing refused it (a batch norm of one element
    per channel divides by zero in its decomposition), which a NUM check sets aside like the builder's
    refusals, not a fault of the harness.
    """
    if not compat_torch.builds_programs():
        try:
            return program_for(call, export=True, dynamic=False).exported
        except HarnessError as exc:
            if exc.__cause__ is None:
                raise
            raise exc.__cause__ from None
    op = _resolve_op(call.op)
    if _returns_data_dependent_scalar(op):
        return _build_program(call, op, like, _symbolic_fake_mode())
    try:
        return _build_program(call, op, like, _fake_mode())
    except Exception as exc:
        if not compat_torch.sized_at_run_time(exc):
            raise
    # An output whose size depends on the input's values (nonzero; index with a bool mask): an
    # unbacked size, bounded by the program's range constraint, as torch.export gives it; the input
    # sizes stay static, so the bound is a number the runtime can allocate (NUM-001).
    return _build_program(call, op, None, _symbolic_fake_mode())


def _build_program(call: Call, op, like: Any, mode):
    """``build_program`` with the FakeTensorMode ``mode``: one with a ShapeEnv where an output is
    data-dependent (a Scalar read from the data, a size computed from it). The unbacked symbols of
    such outputs get what torch.export gives them: their bindings on the op's node, their value
    ranges in the program's range constraints, and the runtime asserts of those ranges in the graph."""
    import operator

    import torch
    import torch.utils._pytree as pytree
    from torch.export.graph_signature import (
        ExportGraphSignature,
        InputKind,
        InputSpec,
        OutputKind,
        OutputSpec,
        TensorArgument,
    )

    graph = torch.fx.Graph()
    input_specs, state, fakes = [], {}, {}
    params = [t for t in call.tensors() if t.role == "parameter"]
    inputs = call.inputs()
    nodes: dict[int, Any] = {}
    for index, tensor in enumerate(params):
        name = f"p{index}"
        node = graph.placeholder(f"p_{name}")
        state[name] = torch.nn.Parameter(to_torch(tensor.value), requires_grad=False)
        input_specs.append(InputSpec(InputKind.PARAMETER, TensorArgument(name=node.name), target=name, persistent=None))
        nodes[id(tensor)] = node
        fakes[node.name] = mode.from_tensor(state[name])
    real_inputs = []
    for index, tensor in enumerate(inputs):
        node = graph.placeholder(f"x{index}")
        real_inputs.append(to_torch(tensor.value))
        input_specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(name=node.name), target=None))
        nodes[id(tensor)] = node
        fakes[node.name] = compat_torch.fake_like(mode, real_inputs[-1])

    def as_node(a):
        if isinstance(a, Tensor):
            return nodes[id(a)]
        if isinstance(a, (list, tuple)):
            return type(a)(as_node(x) for x in a)
        return a

    kwargs = {k: as_node(v) for k, v in call.kwargs.items()}
    kwargs = _torch_dtypes(kwargs)
    args, kwargs = _as_traced(op, list(as_node(call.args)), kwargs)
    for node in graph.nodes:
        node.meta["val"] = fakes[node.name]
    target = graph.call_function(op, tuple(args), kwargs)
    if like is None:
        out = _fake_outputs(mode, op, tuple(args), kwargs)
    else:
        out = pytree.tree_map_only(torch.Tensor, lambda t: compat_torch.fake_like(mode, t), like)
    target.meta["val"] = out
    if isinstance(out, (list, tuple)):
        # One getitem per element, as tracing makes them: an undefined output's (None) has no user.
        items = []
        for i, value in enumerate(out):
            item = graph.call_function(operator.getitem, (target, i))
            item.meta["val"] = value
            items.append(item)
        results = [item for item, value in zip(items, out) if value is not None]
    else:
        results = [target]
    mutated = [nodes[id(t)] for t in mutated_values(op, call.args, call.kwargs)]
    results += mutated
    graph.output(tuple(results))
    signature = ExportGraphSignature(
        input_specs=input_specs,
        output_specs=[OutputSpec(OutputKind.USER_OUTPUT, output_argument(n), target=None) for n in results],
    )
    shape_env = mode.shape_env
    ranges = {}
    if shape_env is not None:
        from torch.fx.experimental.symbolic_shapes import compute_unbacked_bindings, free_unbacked_symbols

        bindings = compute_unbacked_bindings(shape_env, out)
        if bindings:
            target.meta["unbacked_bindings"] = bindings
        # the ranges of data-dependent sizes (what output_capacities allocates at); a Scalar output's
        # symbol has none to give (torch.export lists it as unbounded)
        sizes = [d for v in pytree.tree_leaves(out) if isinstance(v, torch.Tensor) for d in v.shape]
        symbols = set().union(*(free_unbacked_symbols(d) for d in sizes if type(d) is not int))
        ranges = {s: shape_env.var_to_range[s] for s in sorted(symbols, key=str)}
    program = assemble(graph, signature, state, real_inputs, program_results(out, [n.meta["val"] for n in mutated]), ranges)
    if ranges:
        from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts

        # torch.export's tracing made (and dropped) a first size node and comparison of each bound, so
        # the nodes its runtime asserts name in their messages are the second: sym_size_int_1, ge_1
        compat_torch.reserve_node_names(program.graph, ("sym_size_int", "ge", "le"))
        insert_deferred_runtime_asserts(program.graph_module, shape_env, "built", export=True)
    assign_debug_handles(program)
    return program


def output_argument(node):
    """The graph-signature argument of an output node, as torch.export spells it: a SymInt, SymFloat or
    SymBool argument for a Scalar output (_local_scalar_dense's), a TensorArgument otherwise."""
    import torch
    from torch.export.graph_signature import SymBoolArgument, SymFloatArgument, SymIntArgument, TensorArgument

    val = node.meta.get("val")
    for kind, argument in ((torch.SymBool, SymBoolArgument), (torch.SymInt, SymIntArgument), (torch.SymFloat, SymFloatArgument)):
        if isinstance(val, kind):
            return argument(name=node.name)
    return TensorArgument(name=node.name)


@functools.cache
def scalar_returns(op) -> tuple[bool, ...]:
    """Which of ``op``'s returns are Python numbers (Scalar, int, float, bool, SymInt in its schema), not
    tensors: a program returns them as scalar outputs (Double, Int, Bool EValues)."""
    return tuple(str(r.type) in ("number", "int", "float", "bool", "SymInt") for r in op._schema.returns)


@functools.cache
def _returns_data_dependent_scalar(op) -> bool:
    """Whether ``op`` returns a Scalar read from its input's data (_local_scalar_dense): its fake value
    is an unbacked symbol, which only a FakeTensorMode with a ShapeEnv can make."""
    import torch

    return (isinstance(op, torch._ops.OpOverload) and torch.Tag.data_dependent_output in op.tags
            and [str(r.type) for r in op._schema.returns] == ["number"])  # "Scalar" in the schema's text


def _symbolic_fake_mode():
    """A FakeTensorMode with its own ShapeEnv, for one program whose output is data-dependent (a Scalar
    read from the data, a size computed from it): a fresh one each time, so the program's symbol is u0
    (zuf0 for a float), as torch.export names it."""
    return compat_torch.fake_tensor_mode(symbolic=True)


def assemble(graph, signature, state: dict, real_inputs: list, out: Any, range_constraints: dict | None = None):
    """The ExportedProgram of a graph built by the harness (a single-op or batch program, an op of a
    program run alone by conformance.localize): no constants, range constraints only those given
    (a data-dependent output size's, ``build_program``), the module
    call graph of a module called with the user inputs as positional arguments, returning ``out``.

    Constructed by ``compat.torch.exported_program``: where its private route holds, the GraphModule
    generates its Python code when first used and export's Verifier is not run at construction."""
    import torch
    import torch.utils._pytree as pytree
    from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature

    in_spec = pytree.tree_flatten((tuple(real_inputs), {}))[1]
    out_spec = pytree.tree_flatten(out)[1]
    # torch.export's programs are in its training IR, where an op that mutates (resize_, a batch norm's
    # running statistics) stays; the ATen dialect's Verifier, the default here, refuses one ("operator
    # ... is not functional"), so a graph holding one says what torch.export says.
    mutable = any(isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable
                  for n in graph.nodes if n.op == "call_function")  # fmt: skip
    return compat_torch.exported_program(
        root=torch.nn.Module(),
        graph=graph,
        graph_signature=signature,
        state_dict=state,
        range_constraints=dict(range_constraints or {}),
        module_call_graph=[ModuleCallEntry("", ModuleCallSignature([], [], in_spec, out_spec))],
        example_inputs=(tuple(real_inputs), {}),
        constants={},
        verifiers=compat_torch.training_ir_verifiers() if mutable else None,
    )


@dataclass
class BatchProgram(Program):
    """One program making several calls of one operator, independently (``batch_program``)."""

    calls: tuple[Call, ...] = ()
    outputs_per_call: tuple[int, ...] = ()
    """How many of the program's outputs each call produced, in call order (``split_outputs``)."""


def batch_program(calls: Sequence[Call], programs: Sequence[Program] | None = None) -> BatchProgram:
    """One ExportedProgram making every call of ``calls`` (one operator), side by side.

    Each call's subgraph is the one ``build_program(call)`` builds, its nodes copied with
    their metadata (``val`` included): the parameters of every call first (``p_p0``, ...,
    numbered on across calls, as torch.export numbers a module's parameters), then every
    call's user inputs in call order (``x0``, ...), then the op nodes call by call; the
    outputs are every call's outputs in call order. Debug handles are renumbered 1, 2, ...
    over the whole graph, so they stay unique. Nothing connects two subgraphs: a backend
    computes each call as it would alone. ``split_outputs`` gives each call its outputs.

    A call ``build_program`` cannot express is a HarnessError naming it (batch the others,
    run it alone through ``program_for``). ``programs``: the calls' single programs, already
    built (``program_for``), so they are not built again.

    Only built programs are batched: their values share one FakeTensorMode, while each program
    torch.export gives has its own, which export's Verifier refuses to see in one graph. Where
    ``compat.torch.builds_programs()`` does not hold, a batch is a HarnessError and the NUM check
    runs each call alone (its fallback for a batch it cannot make).
    """
    import torch
    from torch.export.graph_signature import (
        ExportGraphSignature,
        InputKind,
        InputSpec,
        OutputKind,
        OutputSpec,
        TensorArgument,
    )

    calls = tuple(calls)
    if not calls:
        raise HarnessError("batch_program needs at least one call")
    if not compat_torch.builds_programs():
        raise HarnessError("batches are made of built programs (compat.torch.builds_programs); each call runs alone")
    ops = sorted({c.op for c in calls})
    if len(ops) > 1:
        raise HarnessError(f"a batch holds calls of one operator, got {ops}")
    singles = [p.exported for p in programs] if programs is not None else []
    for call in calls[len(singles) :]:
        try:
            singles.append(build_program(call))
        except Exception as exc:
            raise HarnessError(f"cannot build {call.describe()} directly: {type(exc).__name__}: {exc}") from exc

    graph = torch.fx.Graph()
    envs: list[dict[Any, Any]] = [{} for _ in singles]
    input_specs, state = [], {}

    def placeholder(name: str, old):
        node = graph.placeholder(name)
        node.meta = copy.copy(old.meta)
        return node

    for env, single in zip(envs, singles):  # parameters first, as in every exported program
        nodes = {n.name: n for n in single.graph.nodes}
        for spec in single.graph_signature.input_specs:
            if spec.kind is InputKind.PARAMETER:
                name = f"p{len(state)}"
                old = nodes[spec.arg.name]
                env[old] = placeholder(f"p_{name}", old)
                state[name] = single.state_dict[spec.target]
                input_specs.append(InputSpec(InputKind.PARAMETER, TensorArgument(env[old].name), target=name, persistent=None))
    inputs_in_order = 0
    for env, single, call in zip(envs, singles, calls):
        nodes = {n.name: n for n in single.graph.nodes}
        for spec in single.graph_signature.input_specs:
            if spec.kind is InputKind.USER_INPUT:
                old = nodes[spec.arg.name]
                env[old] = placeholder(f"x{inputs_in_order}", old)
                inputs_in_order += 1
                input_specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(env[old].name), target=None))
            elif spec.kind is not InputKind.PARAMETER:
                raise HarnessError(f"build_program gave an input of kind {spec.kind} for {call.describe()}")
    results, counts = [], []
    for env, single in zip(envs, singles):
        for node in single.graph.nodes:
            if node.op == "call_function":
                env[node] = graph.node_copy(node, lambda n, env=env: env[n])
        outs = [env[n] for n in single.graph.output_node().args[0]]
        results.extend(outs)
        counts.append(len(outs))
    graph.output(tuple(results))
    real_inputs = [to_torch(t.value) for call in calls for t in call.inputs()]
    signature = ExportGraphSignature(
        input_specs=input_specs,
        output_specs=[OutputSpec(OutputKind.USER_OUTPUT, output_argument(n), target=None) for n in results],
    )
    program = assemble(graph, signature, state, real_inputs, tuple(n.meta["val"] for n in results))
    assign_debug_handles(program)
    inputs = [t.value for call in calls for t in call.inputs()]
    return BatchProgram(
        program,
        inputs,
        op=ops[0],
        description=f"batch of {len(calls)}: " + "; ".join(c.describe() for c in calls),
        calls=calls,
        outputs_per_call=tuple(counts),
    )


def split_outputs(batch: BatchProgram, outputs: Sequence[Any]) -> list[list[np.ndarray]]:
    """The outputs of a run of ``batch``, call by call (as many as each call's program has)."""
    if len(outputs) != sum(batch.outputs_per_call):
        raise HarnessError(f"a batch of {len(batch.calls)} calls has {sum(batch.outputs_per_call)} outputs, got {len(outputs)}")
    out, start = [], 0
    for count in batch.outputs_per_call:
        out.append([np.asarray(o) for o in outputs[start : start + count]])
        start += count
    return out


@functools.cache
def _returns_fresh_tensors(op) -> bool:
    """Whether ``op`` returns new tensors whose sizes follow from its inputs' sizes and its arguments:
    not a view or an in-place op (those share their input's storage), not data-dependent, not random."""

    if not _outputs_follow_from_inputs(op):
        return False
    if any(a.alias_info is not None for a in op._schema.arguments):
        return False
    return all(str(r.type) in ("Tensor", "Tensor[]") for r in op._schema.returns)


def output_capacities(exported) -> list[tuple[int, ...] | None]:
    """For each output of ``exported``: None when its sizes are known before the run (static, or
    symbols the inputs bind), else the shape to allocate it at: each data-dependent size (an
    unbacked symbol, nonzero's row count) at the upper bound of its range constraint. A backend
    reports the size it computed by resizing the output within that buffer (NUM-001)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    capacities: list[tuple[int, ...] | None] = []
    for node in exported.graph.output_node().args[0]:
        shape = getattr(getattr(node, "meta", {}).get("val"), "shape", None)
        if shape is None or not any(free_unbacked_symbols(d) for d in shape if type(d) is not int):
            capacities.append(None)
            continue
        bound = []
        for d in shape:
            if type(d) is int:
                bound.append(d)
                continue
            ranges = exported.range_constraints.get(d.node.expr)
            upper = getattr(ranges, "upper", None)
            if upper is None or not getattr(upper, "is_finite", True) or not str(upper).lstrip("-").isdigit():
                raise HarnessError(f"output {node.name} has a data-dependent size {d} without an upper bound in the program")
            bound.append(int(upper))
        capacities.append(tuple(bound))
    return capacities


@functools.cache
def _outputs_follow_from_inputs(op) -> bool:
    """An ATen overload (not a prim) whose outputs follow from its inputs' metadata and arguments:
    not data-dependent, random or an in-place view, no device or out argument, no view returned."""
    import torch

    if not isinstance(op, torch._ops.OpOverload) or "prims::" in op._schema.name:
        return False
    if any(tag in op.tags for tag in (torch.Tag.dynamic_output_shape, torch.Tag.data_dependent_output,
                                      torch.Tag.nondeterministic_seeded, torch.Tag.inplace_view)):
        return False
    if any(a.name in ("device", "out") for a in op._schema.arguments):
        return False
    return all(r.alias_info is None for r in op._schema.returns)


EAGER_LAYS_OUT_AS_META = frozenset({
    "aten.grid_sampler_2d.default",
    "aten.upsample_bicubic2d.vec",
    "aten.upsample_bilinear2d.vec",
    "aten.upsample_trilinear3d.vec",
    "aten.upsample_linear1d.vec",
    "aten.embedding_dense_backward.default",
    "aten._pdist_forward.default",
})
"""Ops whose eager CPU kernels lay out their outputs as PyTorch's meta kernel does in every call, dims of
size 1 and empty outputs included (tests/harness/test_programs.py holds each to it, call by call, in
every dtype of its spec), and whose meta kernel is a long Python decomposition: eager describes all of
their outputs (``eager_describes_outputs``). A bicubic grid_sampler_2d's meta outputs cost 20 ms."""


@functools.cache
def _lays_out_as_meta(op) -> bool:
    return op_name(op) in EAGER_LAYS_OUT_AS_META


def eager_describes_outputs(op, returned) -> bool:
    """Whether eager's return value ``returned`` of ``op`` may describe a program's outputs
    (``build_program(call, like=returned)``): fresh CPU tensors of an op that makes fresh tensors,
    none empty and none with a dim of size 1. The strides of such dims say nothing of the layout,
    and there eager and the meta kernel often differ (in 307 of 33,242 calls of a full profile, all
    of them there; elsewhere they agreed on every stride), while a backend may still read them
    (ExecuTorch derives a dim order from strides, and refuses a stride of 0). The ops of
    ``EAGER_LAYS_OUT_AS_META`` are described whatever their outputs' sizes."""
    import torch

    leaves = returned if isinstance(returned, (list, tuple)) else (returned,)
    if not _returns_fresh_tensors(op):
        return False
    any_size = _lays_out_as_meta(op)
    return all(
        isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.storage_offset() == 0
        and (any_size or (t.numel() > 0 and 1 not in t.shape))
        for t in leaves
    )


def meta_program(program: Program, call: Call) -> Program | str:
    """The program PyTorch's meta kernel gives for ``call`` when ``program`` describes its outputs
    from eager's (``Program.outputs_from_eager``): ``program`` itself where the two agree in every
    output's size, stride and dtype, else the program built by the meta kernel, or a string saying
    why there is none (the meta kernel refuses the call, or shapes its outputs unlike eager)."""
    if not program.outputs_from_eager:
        return program
    try:
        built = build_program(call)
    except Exception as exc:  # noqa: BLE001 - PyTorch's tracing refuses what eager computed
        return f"tracing refused a call eager computes: {exc}"
    ours, theirs = _output_meta(program.exported), _output_meta(built)
    if ours == theirs:
        return program
    if [s for s, _, _ in ours] != [s for s, _, _ in theirs]:
        return shapes_disagree([s for s, _, _ in theirs], [s for s, _, _ in ours])
    return Program(built, program.inputs, op=program.op, description=program.description)


def shapes_disagree(declared, eager) -> str:
    """Why a call is set aside when its program (PyTorch's meta kernel) declares output shapes
    ``declared`` and eager computes ``eager``."""
    return f"program declares {[tuple(s) for s in declared]}, eager gives {[list(s) for s in eager]}"


def _output_meta(exported) -> list[tuple]:
    return [
        (tuple(int(d) for d in v.shape), tuple(int(d) for d in v.stride()), v.dtype)
        for v in (n.meta["val"] for n in exported.graph.output_node().args[0])
    ]


def _meta_kernel(op):
    """What FakeTensorMode runs for ``op`` on CPU FakeTensors, as a function of meta tensors that gives
    the same outputs, or None where no such function stands in for it (``compat.torch.meta_kernel``)."""
    return compat_torch.meta_kernel(op, _fake_mode(), _outputs_follow_from_inputs(op))


def _fake_outputs(mode, op, args: tuple, kwargs: dict):
    """The FakeTensor outputs of ``op`` on the fake values of the nodes in ``args``/``kwargs``
    (what ``with mode: op(*fakes)`` gives: tests/harness/test_programs.py compares with torch.export)."""
    import torch
    import torch.utils._pytree as pytree

    fakes = []

    def to_fake(a):
        if isinstance(a, torch.fx.Node):
            fakes.append(a.meta["val"])
            return a.meta["val"]
        return a

    fake_args, fake_kwargs = pytree.tree_map(to_fake, args), pytree.tree_map(to_fake, kwargs)
    kernel = _meta_kernel(op)
    if fakes and all(f.device.type == "cpu" for f in fakes) and kernel is not None:
        convert = compat_torch.fake_from_meta
        cpu = torch.device("cpu")
        # The outputs follow from the inputs' metadata and the other arguments alone (_meta_kernel):
        # a call repeating them repeats its outputs (the edge set's calls of one shape differ in values).
        key = _metadata_key(op, fake_args, fake_kwargs)
        known = _META_OUTPUTS.get(key) if key is not None else None
        if known is not None:
            _META_OUTPUTS.move_to_end(key)
            return pytree.tree_map_only(torch.Tensor, lambda t: convert(mode, t, cpu), known)
        metas: dict[int, Any] = {}

        def to_meta(a):
            if isinstance(a, torch.fx.Node):
                val = a.meta["val"]
                if id(val) not in metas:
                    metas[id(val)] = torch.empty_strided(
                        tuple(val.shape), tuple(val.stride()), dtype=val.dtype, device="meta"
                    ).as_strided(tuple(val.shape), tuple(val.stride()), val.storage_offset())
                return metas[id(val)]
            return a

        try:
            out = kernel(*pytree.tree_map(to_meta, args), **pytree.tree_map(to_meta, kwargs))
            if isinstance(out, tuple) and type(out) is not tuple:
                # a decomposition's named tuple (return_types_log_sigmoid_forward): through the
                # dispatcher, as under FakeTensorMode, the op returns a plain one (a program's output
                # spec must be one torch.export.save can write)
                out = tuple(out)
        except Exception:  # noqa: BLE001 - FakeTensorMode below raises its own error, or decides otherwise
            out = None
        else:
            leaves = pytree.tree_leaves(out)
            if all(isinstance(t, torch.Tensor) and t.device.type == "meta" and all(t is not m for m in metas.values())
                   for t in leaves if isinstance(t, torch.Tensor)):
                if key is not None:
                    _META_OUTPUTS[key] = out
                    if len(_META_OUTPUTS) > 4096:
                        _META_OUTPUTS.popitem(last=False)
                return pytree.tree_map_only(torch.Tensor, lambda t: convert(mode, t, cpu), out)
    with mode:
        if op._schema.is_mutable:
            # An op that mutates its argument (resize_ resizes it) must not change the placeholder's
            # own value: torch.export's input keeps the shape it was given.
            fake_args, fake_kwargs = pytree.tree_map_only(torch.Tensor, torch.clone, (fake_args, fake_kwargs))
        return op(*fake_args, **fake_kwargs)


_META_OUTPUTS: collections.OrderedDict[tuple, Any] = collections.OrderedDict()
"""The meta outputs ``_fake_outputs`` computed last (4,096 calls), by ``_metadata_key``."""


def _metadata_key(op, args, kwargs) -> tuple | None:
    """What the outputs of a call of ``op`` (one whose outputs follow from its inputs' metadata and its
    other arguments) follow from: each tensor's sizes, strides, offset and dtype, every other value as
    itself and its type (1, 1.0 and True differ). None where a value cannot be a key."""
    import torch

    def part(a):
        if isinstance(a, torch.Tensor):
            return (tuple(a.shape), tuple(a.stride()), a.storage_offset(), a.dtype)
        if isinstance(a, (list, tuple)):
            return (type(a), tuple(part(x) for x in a))
        if isinstance(a, float):
            return (float, repr(a))  # NaN equals nothing, -0.0 equals 0.0: their text tells them apart
        return (type(a), a)

    try:
        key = (op, part(args), tuple((k, part(v)) for k, v in sorted(kwargs.items())))
        hash(key)
    except TypeError:
        return None
    return key


@functools.cache
def _fake_mode():
    """One FakeTensorMode for every built program: creating one costs more than building a program.

    Its dispatch cache stays on: the drawn calls themselves hardly ever repeat (481 distinct among
    493 meta kernel calls of a shard), but the ops of a Python decomposition do (upsample_bicubic2d's
    meta outputs took 43 ms a call without the cache, 13 ms with it)."""
    return compat_torch.fake_tensor_mode()


@dataclass(frozen=True)
class _SchemaArg:
    """One argument of an op's schema, read once (each read of ``op._schema`` builds new objects)."""

    name: str
    kwarg_only: bool
    has_default: bool
    default: Any


@functools.cache
def _schema_args(op) -> tuple[_SchemaArg, ...]:
    return tuple(
        _SchemaArg(a.name, a.kwarg_only, a.has_default_value(), a.default_value if a.has_default_value() else None)
        for a in op._schema.arguments
    )


def _as_traced(op, args: list, kwargs: dict) -> tuple[list, dict]:
    """The argument form tracing records: positional arguments positionally, kwarg-only ones
    by name, both without the trailing values that equal the schema's defaults."""
    schema = _schema_args(op)
    positional = [a for a in schema if not a.kwarg_only]
    named = [i for i, a in enumerate(positional) if i >= len(args) and a.name in kwargs]
    for schema_arg in positional[len(args) : (named[-1] + 1 if named else 0)]:
        # a positional argument skipped by name takes its default, as the dispatcher fills it
        args.append(kwargs.pop(schema_arg.name) if schema_arg.name in kwargs else copy.copy(schema_arg.default))

    def is_default(schema_arg, value) -> bool:
        if not schema_arg.has_default:
            return False
        default = schema_arg.default
        if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
            return list(value) == list(default)
        return type(value) is type(default) and value == default or (value is None and default is None)

    while args and len(args) <= len(positional) and is_default(positional[len(args) - 1], args[-1]):
        args.pop()
    named = {a.name: a for a in schema if a.kwarg_only}
    order = {a.name: i for i, a in enumerate(schema)}
    kept = sorted((k for k in kwargs if not (k in named and is_default(named[k], kwargs[k]))), key=lambda k: order.get(k, len(order)))
    return args, {k: kwargs[k] for k in kept}


WEIGHT_ROLES = {"constants": "parameter", "inputs": "input"}
"""How the NUM check hands an op's weights (op spec ``weights``) in its ``weights`` case: as program
constants (parameters of the module, lifted by torch.export as PARAMETER inputs of the program, so a
backend reads them from named data at init) or as runtime inputs."""


def with_weights(call: Call, names: Sequence[str], role: str) -> Call | None:
    """``call`` with the tensor arguments named ``names`` (ATen schema names: ``mat2``, ``weight``)
    in ``role`` ("parameter": a program constant; "input"), the values unchanged; None when the call
    has none of them as a tensor, or all of them are in ``role`` already."""
    schema = _schema_args(_resolve_op(call.op))
    position = {a.name: i for i, a in enumerate(schema)}
    args, kwargs, changed = list(call.args), dict(call.kwargs), False
    for name in names:
        if name not in position:
            raise HarnessError(f"{call.op} has no argument {name!r} (op spec weights); its arguments: {[a.name for a in schema]}")
        i = position[name]
        holder, key = (args, i) if i < len(args) else (kwargs, name)
        tensor = holder[key] if (i < len(args) or name in kwargs) else None
        if isinstance(tensor, Tensor) and tensor.role != role:
            holder[key] = Tensor(tensor.value, role)
            changed = True
    return Call(call.op, tuple(args), kwargs) if changed else None


def _set_parameters(exported, values: list[np.ndarray]) -> None:
    import torch

    for index, value in enumerate(values):
        name = f"p{index}"
        target = exported.state_dict.get(name)
        if target is None:
            raise HarnessError(f"program lost parameter {name}")
        with torch.no_grad():
            target.copy_(to_torch(value))


def eager(call: Call) -> tuple[np.ndarray, ...]:
    """PyTorch eager's result of ``call``, as NumPy arrays."""
    return eager_outputs(call).arrays


@dataclass(frozen=True)
class EagerOutputs:
    """What eager returned for a call: the op's own return value (tensors, with their strides)
    and its tensors as NumPy arrays."""

    returned: Any
    arrays: tuple[np.ndarray | None, ...]
    """The op's outputs in schema order (None where it left one undefined), then the arguments it
    mutated, as they are after the call (``mutated_values``)."""


def eager_outputs(call: Call) -> EagerOutputs:
    """PyTorch eager's result of ``call``: as returned (``build_program(call, like=...)`` takes it) and as arrays."""
    from conformance.api.tensors import to_numpy

    args, kwargs = call.torch_args()
    op = _resolve_op(call.op)
    out = op(*args, **kwargs)
    mutated = tuple(to_numpy(t) for t in mutated_values(op, args, kwargs))
    if isinstance(out, (list, tuple)):
        return EagerOutputs(out, tuple(None if o is None else to_numpy(o) for o in out) + mutated)
    return EagerOutputs(out, (to_numpy(out),) + mutated)
