"""PyTorch eager behind the delegate contract: the BackendUnderTests ``torch-eager`` (CPU) and
``torch-eager-cuda`` (the current CUDA device).

Issue 27: a backend that computes exactly what PyTorch eager computes must certify, so every
check it fails is a defect of the harness, the reference or the spec, never of the backend.
This adapter is that backend; it is also a complete delegate, honouring every clause the
reference honours.

The delegate mapping:

- ``preprocess`` serializes the ExportedProgram (``torch.export.save`` bytes, through
  ``_exported.serialize``) behind a header of its own: magic, a format version at a fixed
  offset (RT-013: claims/torch-eager.toml names it), the lengths of a table and of the archive,
  and the SHA-256 of both, so a truncated or corrupted blob is refused before any byte of it is
  unpickled (RT-011, RT-012). The table lists the graph's ``call_function`` nodes by name: the
  instruction ids of ``debug_handle_map`` are their positions. A program whose user inputs are
  not all tensors, or that mutates a buffer (a handle must not carry state from one execute to
  the next, RT-004), is refused with ``BackendError(NotSupported)``, as the reference refuses it.
- ``init`` copies the blob (the processed buffer may be freed after it returns, RT-005), checks
  the header, loads the archive with ``torch.export.load`` and takes its unlifted module
  (``ExportedProgram.module()``: no further decomposition, the program's own ops). Loaded programs
  are kept by the blob's digest (a few, :data:`LOADED_CACHE_SIZE`): torch.fx never frees the source
  it generates for a module, so loading on every init would leak with every init/destroy cycle.
- ``execute`` checks the arguments against the program's signature (``_exported.split_args``:
  arity, dtype, shape -> ``BackendError(InvalidArgument)``), converts the NumPy inputs to torch
  (``conformance.api.tensors.to_torch``: bfloat16 and float8 as their bits through ml_dtypes,
  complex, uint16/32/64; resizable, so that ``resize_`` grows its input as in eager), runs the
  module node by node with ``torch.fx.Interpreter`` and copies the results into the
  pre-allocated outputs. Interpreting is what lets a failing node be named: an op that raises
  becomes ``BackendError(debug_handle=<its instruction id>)`` (DBG-001), and each instruction's
  time is reported to the EventTracer under its id (DBG-003). The node calls are eager's own.
- ``destroy`` drops the handle's reference to the loaded program; the handle is refused from then on
  (RT-006, RT-019).

On a CUDA device (``backend("cuda")``, the entry point ``torch-eager-cuda``) the contract's boundary
stays where it is: inputs and outputs are host NumPy arrays. ``init`` moves the loaded program onto
the device once (its weights, constants and the device arguments of its factory calls:
``_device.move_program``), so a handle's weights live there as a delegate's do after init;
``execute`` copies the inputs to the device, interprets the module there and copies the results
back into the host outputs. Where no CUDA device exists, building the backend is refused
(``_device.require``) before anything runs: it never certifies the CPU under the CUDA name.

The runtime and temp allocators are not used: eager allocates from c10's CPU allocator, and
RT-014 accepts a runtime that succeeds without that memory.

Claims are data: ``backend_adapters/claims/torch-eager.toml`` (the "full" profile's ops, every
dtype, and the blob's version field) and ``torch-eager-cuda.toml`` (the same, and the numerical
latitudes CUDA's kernels take).
"""

from __future__ import annotations

import hashlib
import json
import struct
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from conformance.api import (
    PARTIAL_DELEGATION,
    BackendDetails,
    BackendError,
    BackendInterface,
    BackendUnderTest,
    CompileSpec,
    Error,
    Manifest,
    PreprocessResult,
)

from . import _claims, _device, _exported

NAME = "torch-eager"
MAGIC = b"TEGR"
FORMAT_VERSION = 1
"""Bump when the header or the table changes; init refuses any other with DelegateInvalidCompatibility."""
HEADER = struct.Struct("<4sHHIQ32s")
"""magic, format version, reserved (0), table bytes, archive bytes, sha256(table + archive)."""
VERSION_OFFSET = 4
VERSION_SIZE = 2
ACCEPTED_COMPILE_SPECS = frozenset({PARTIAL_DELEGATION.key})
"""Eager takes every op, so partial delegation is whole delegation; any other key is refused."""

_load_lock = threading.Lock()
"""torch.export.load and unlifting touch process-wide state (the serializer's op tables, shape
environments); RT-015 inits handles from several threads at once."""


# ---------------------------------------------------------------------------------------------
# The blob


def _check_compile_specs(compile_specs) -> None:
    for spec in compile_specs or ():
        if not isinstance(spec, CompileSpec):
            raise BackendError(Error.InvalidArgument, f"compile spec {spec!r} is not a conformance.api.CompileSpec")
        if spec.key not in ACCEPTED_COMPILE_SPECS:
            raise BackendError(
                Error.InvalidArgument,
                f"unknown compile spec {spec.key!r}; {NAME} accepts only {sorted(ACCEPTED_COMPILE_SPECS)}: remove it",
            )


def _instructions(program) -> list:
    return [node for node in program.graph.nodes if node.op == "call_function"]


def _refuse_stateful(program) -> None:
    """NotSupported for a program that changes its own state: a buffer mutation in its signature
    (a functional program) or an op that writes a parameter, buffer or constant in place (a
    program before functionalization, or one like _native_batch_norm_legit on a buffer). The
    unlifted module would keep the change, and a handle must not carry state from one execute to
    the next (RT-004). User inputs may be written: execute hands the program copies."""
    from torch.export.graph_signature import InputKind, OutputKind

    for spec in program.graph_signature.output_specs:
        if spec.kind is OutputKind.BUFFER_MUTATION:
            raise BackendError(
                Error.NotSupported,
                f"{NAME}: the program mutates buffer {spec.target!r} (output {spec.arg.name}); a handle must not carry "
                "state from one execute to the next (RT-004): export the module with the buffer as an input instead",
            )
    state = {
        spec.arg.name: spec.target
        for spec in program.graph_signature.input_specs
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
    }
    for node in _instructions(program):
        schema = getattr(node.target, "_schema", None)
        for position, argument in enumerate(getattr(schema, "arguments", ())):
            if argument.alias_info is None or not argument.alias_info.is_write:
                continue
            value = node.args[position] if position < len(node.args) else node.kwargs.get(argument.name)
            if getattr(value, "name", None) in state:
                raise BackendError(
                    Error.NotSupported,
                    f"{NAME}: node {node.name} ({node.target}) writes {state[value.name]!r} in place; a handle must not "
                    "carry state from one execute to the next (RT-004): export the module with it as an input instead",
                )


def _bool_outputs_as_ints(program) -> tuple[Any, list[int]]:
    """``program``, or a copy whose SymBool user outputs are returned as ``sym_ite(b, 1, 0)``, and the
    positions of those outputs among the user outputs.

    torch.export.save cannot write a program that returns a SymBool (torch 2.13:
    ``GraphModuleSerializer.serialize_argument_spec`` has no case for SymBoolArgument and raises
    ``AssertionError("TODO")``); ``aten._local_scalar_dense`` of a bool tensor returns one. The copy
    returns the same value as an int, and execute turns it back into a bool."""
    import copy

    import torch
    from torch.export.graph_signature import OutputKind, SymBoolArgument, SymIntArgument

    specs = program.graph_signature.output_specs
    user = [i for i, spec in enumerate(specs) if spec.kind is OutputKind.USER_OUTPUT]
    flagged = [i for i in user if isinstance(specs[i].arg, SymBoolArgument)]
    if not flagged:
        return program, []
    fixed = copy.deepcopy(program)
    output = fixed.graph.output_node()
    values = list(output.args[0])
    for i in flagged:
        with fixed.graph.inserting_before(output):
            as_int = fixed.graph.call_function(torch.sym_ite, (values[i], 1, 0))
        as_int.meta["val"] = torch.sym_ite(values[i].meta["val"], 1, 0)
        values[i] = as_int
        fixed.graph_signature.output_specs[i].arg = SymIntArgument(name=as_int.name)
    output.args = (tuple(values),)
    fixed.graph_module.recompile()
    return fixed, [user.index(i) for i in flagged]


def _one_output_at_least(program) -> tuple[Any, int]:
    """``program``, or a copy that returns its first user input, and how many such placeholder outputs
    execute drops (0 or 1).

    torch.export.save cannot write a program without user outputs (torch 2.13: ``ValueError: not
    enough values to unpack (expected 2, got 0)``); ``aten.unbind.int`` along a dim of size 0 returns
    an empty list. The copy's archive saves and loads; execute returns its real (empty) outputs."""
    import copy

    from torch.export.graph_signature import InputKind, OutputKind, OutputSpec, TensorArgument
    from torch.utils import _pytree as pytree

    signature = program.graph_signature
    inputs = [spec.arg.name for spec in signature.input_specs if spec.kind is InputKind.USER_INPUT]
    if signature.user_outputs or not inputs:
        return program, 0
    fixed = copy.deepcopy(program)
    # torch.export.load cannot read a node that returns an empty list either (torch 2.13:
    # deserialize_multiple_outputs indexes its first output); with no outputs such a node has no users
    for node in reversed(list(fixed.graph.nodes)):
        if node.op == "call_function" and not node.users and isinstance(node.meta.get("val"), (list, tuple)) and not node.meta["val"]:
            fixed.graph.erase_node(node)
    output = fixed.graph.output_node()
    placeholder = next(n for n in fixed.graph.nodes if n.op == "placeholder" and n.name == inputs[0])
    values = output.args[0] if isinstance(output.args[0], (list, tuple)) else ()
    output.args = ((*values, placeholder),)
    fixed.graph_signature.output_specs.append(OutputSpec(kind=OutputKind.USER_OUTPUT, arg=TensorArgument(name=placeholder.name), target=None))
    for entry in fixed.module_call_graph[:1]:
        if entry.signature is not None:
            entry.signature.out_spec = pytree.tree_structure([0])
            entry.signature.outputs.append(TensorArgument(name=placeholder.name))
    fixed.graph_module.recompile()
    return fixed, 1


def write_blob(names: list[str], archive: bytes, bool_outputs: list[int] | tuple[int, ...] = (), dropped: int = 0) -> bytes:
    """Header, instruction table and archive: the processed bytes. ``bool_outputs``: the user outputs
    the archive returns as ints for bools (:func:`_bool_outputs_as_ints`); ``dropped``: the placeholder
    outputs at its end that execute drops (:func:`_one_output_at_least`)."""
    table = {"instructions": names, "bool_outputs": list(bool_outputs)}
    if dropped:
        table["dropped_outputs"] = dropped
    table = json.dumps(table, separators=(",", ":")).encode()
    digest = hashlib.sha256(table + archive).digest()
    return HEADER.pack(MAGIC, FORMAT_VERSION, 0, len(table), len(archive), digest) + table + archive


def read_blob(blob: bytes) -> tuple[list[str], list[int], int, bytes, bytes]:
    """(instruction names, bool outputs, dropped placeholder outputs, torch.export archive, their
    SHA-256) of a blob; BackendError naming what is wrong otherwise."""
    if len(blob) < HEADER.size:
        raise BackendError(
            Error.InvalidProgram, f"{NAME} blob of {len(blob)} bytes is shorter than its {HEADER.size}-byte header (truncated)"
        )
    magic, version, reserved, table_size, archive_size, digest = HEADER.unpack_from(blob)
    if magic != MAGIC:
        raise BackendError(Error.InvalidProgram, f"not a {NAME} blob: it starts with {magic!r}, expected {MAGIC!r}")
    if version != FORMAT_VERSION:
        raise BackendError(
            Error.DelegateInvalidCompatibility,
            f"{NAME} blob format version {version}; this runtime reads version {FORMAT_VERSION}: preprocess the program again",
        )
    if reserved != 0:
        raise BackendError(Error.InvalidProgram, f"{NAME} blob: reserved header field is {reserved}, expected 0 (corrupted)")
    expected = HEADER.size + table_size + archive_size
    if len(blob) != expected:
        raise BackendError(
            Error.InvalidProgram,
            f"{NAME} blob holds {len(blob)} bytes; its header announces {expected} "
            f"({'truncated' if len(blob) < expected else 'trailing bytes'})",
        )
    body = memoryview(blob)[HEADER.size :]
    if hashlib.sha256(body).digest() != digest:
        raise BackendError(Error.InvalidProgram, f"{NAME} blob is corrupted: its SHA-256 does not match the header's")
    try:
        table = json.loads(bytes(body[:table_size]).decode())
        names, bool_outputs, dropped = table["instructions"], table["bool_outputs"], table.get("dropped_outputs", 0)
        if type(dropped) is not int or not 0 <= dropped <= 1:
            raise ValueError(f"dropped_outputs must be 0 or 1, not {dropped!r}")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError("instructions must be a list of node names")
        if not isinstance(bool_outputs, list) or not all(type(n) is int and n >= 0 for n in bool_outputs):
            raise ValueError("bool_outputs must be a list of output positions")
    except (ValueError, KeyError, TypeError) as exc:  # json and unicode errors are ValueErrors
        raise BackendError(Error.InvalidProgram, f"{NAME} blob: unreadable instruction table: {exc}") from None
    return names, bool_outputs, dropped, bytes(body[table_size:]), digest


class EagerDetails(BackendDetails):
    """Ahead of time: the program's torch.export archive, its instruction table and debug handles."""

    @staticmethod
    def preprocess(edge_program, compile_specs):
        _check_compile_specs(compile_specs)
        _exported.signature(edge_program)  # NotSupported for a non-tensor user input, before any work
        _refuse_stateful(edge_program)
        nodes = _instructions(edge_program)
        debug_handle_map: dict[int, tuple[int, ...]] = {}
        for index, node in enumerate(nodes):
            handle = node.meta.get("debug_handle")
            if isinstance(handle, int) and not isinstance(handle, bool):
                debug_handle_map[index] = (handle,)
            elif isinstance(handle, (tuple, list)) and handle:
                debug_handle_map[index] = tuple(int(h) for h in handle)
        try:
            serializable, bool_outputs = _bool_outputs_as_ints(edge_program)
            serializable, dropped = _one_output_at_least(serializable)
            archive = _exported.serialize(serializable)
        except Exception as exc:
            raise BackendError(
                Error.NotSupported, f"{NAME}: torch.export.save cannot serialize this program: {type(exc).__name__}: {exc}"
            ) from None
        return PreprocessResult(
            processed_bytes=write_blob([n.name for n in nodes], archive, bool_outputs, dropped), debug_handle_map=debug_handle_map
        )


# ---------------------------------------------------------------------------------------------
# The runtime


@dataclass(frozen=True, eq=False)
class Loaded:
    """A blob's program, ready to run: immutable (stateful programs are refused at preprocess), so
    the handles of one blob share it."""

    module: Any
    """``ExportedProgram.module()`` of the archive."""
    signature: _exported.Signature
    ids: dict
    """Node of ``module``'s graph -> its instruction id (a key of debug_handle_map)."""
    bool_outputs: tuple[int, ...]
    """User outputs the module returns as 0/1 for a bool (_bool_outputs_as_ints)."""
    dropped: int = 0
    """Placeholder outputs at the end of the module's, which execute drops (_one_output_at_least)."""


LOADED_CACHE_SIZE = 4
"""Loaded programs kept by blob digest after their handles are destroyed.

Building a module costs torch.fx a code generation per GraphModule (torch.export.load builds one,
``module()`` four more), and torch.fx keeps every generated source for good (its linecache
entries, ``<eval_with_key>.N``): about 3 kB per load that no destroy can give back (RT-016 measured
11.5 kB of Python heap per init/destroy cycle of the mlp program). A runtime that loads each
distinct blob once, as a compilation cache would, grows with the programs it has seen, not with
its init/destroy cycles; the cache is bounded so that destroyed programs' weights do not pile up."""

_loaded: OrderedDict[tuple[bytes, str], Loaded] = OrderedDict()
"""By (blob digest, device)."""


def _load(names: list[str], bool_outputs: list[int], dropped: int, archive: bytes, digest: bytes, device: str = "cpu") -> Loaded:
    key = (digest, device)
    with _load_lock:
        loaded = _loaded.get(key)
        if loaded is None:
            program = _exported.deserialize(archive)
            if device != "cpu":
                program = _device.move_program(program, device, _device.backend_name(NAME, device))
            try:
                signature = _exported.signature(program)
                module = program.module()
            except BackendError:
                raise
            except Exception as exc:
                raise BackendError(
                    Error.InvalidProgram, f"{NAME}: the archive loads but its module cannot be built: {type(exc).__name__}: {exc}"
                ) from None
            position = {name: i for i, name in enumerate(names)}
            ids = {n: position[n.name] for n in module.graph.nodes if n.op == "call_function" and n.name in position}
            if any(i >= signature.outputs - dropped for i in bool_outputs) or dropped > signature.outputs:
                raise BackendError(
                    Error.InvalidProgram,
                    f"{NAME} blob: bool_outputs {bool_outputs} or dropped_outputs {dropped} name outputs the program does not have",
                )
            signature = replace(signature, outputs=signature.outputs - dropped)
            loaded = _loaded[key] = Loaded(module, signature, ids, tuple(bool_outputs), dropped)
            while len(_loaded) > LOADED_CACHE_SIZE:
                _loaded.popitem(last=False)
        _loaded.move_to_end(key)
        return loaded


class EagerHandle:
    """What init returns: a new object every time (RT-019), holding its blob's loaded program until destroy."""

    __slots__ = ("loaded", "__weakref__")

    def __init__(self, loaded: Loaded):
        self.loaded: Loaded | None = loaded

    def __repr__(self) -> str:
        state = "destroyed" if self.loaded is None else f"{len(self.loaded.ids)} instructions"
        return f"<{NAME} handle: {state}>"


_INVALID_CALL = (IndexError, ValueError, TypeError, ZeroDivisionError)
"""What an op raises for arguments it cannot take (index_select's "index out of range" is an IndexError)."""


def _failure(node, instruction: int | None, exc: BaseException) -> BackendError:
    import torch

    text = (str(exc).strip().splitlines() or [""])[0][:500]
    if node.op == "call_module":  # the unlifted module's input guards (_guards_fn)
        return BackendError(Error.InvalidArgument, f"the program's input guard {node.target} refused the inputs: {text}")
    what = f"{node.name} ({node.target})" if node.op == "call_function" else node.name
    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
        code = Error.MemoryAllocationFailed
    elif isinstance(exc, _INVALID_CALL):
        code = Error.InvalidArgument
    else:
        code = Error.Internal
    return BackendError(code, f"{what} failed: {type(exc).__name__}: {text}", debug_handle=instruction)


def _interpreter(module, ids: dict, tracer):
    import torch

    class Run(torch.fx.Interpreter):
        """The module's own node calls, one at a time: a failure names its node, each call is timed."""

        def run_node(self, node):
            instruction = ids.get(node)
            start = time.perf_counter_ns()
            try:
                value = super().run_node(node)
            except BackendError:
                raise
            except Exception as exc:
                raise _failure(node, instruction, exc) from exc
            if tracer is not None and instruction is not None:
                tracer.log_profiling_delegate(None, instruction, start, time.perf_counter_ns())
            return value

    run = Run(module)
    run.extra_traceback = False  # it would rewrite our BackendError's message
    return run


class EagerRuntime(BackendInterface):
    """At run time: the unlifted module, interpreted node by node with eager's kernels on ``device``
    (``"cpu"``, or a CUDA device as ``_device.require`` names it: ``"cuda:0"``)."""

    def __init__(self, device: str = "cpu"):
        self.device = device
        self._live: weakref.WeakSet[EagerHandle] = weakref.WeakSet()
        self._lock = threading.Lock()

    def is_available(self) -> bool:
        try:
            import torch
        except ImportError:
            return False
        return self.device == "cpu" or torch.cuda.is_available()

    def init(self, context, processed, compile_specs):
        _check_compile_specs(compile_specs)
        handle = EagerHandle(_load(*read_blob(bytes(processed.data)), device=self.device))
        with self._lock:
            self._live.add(handle)
        return handle

    def _loaded_of(self, handle) -> Loaded:
        with self._lock:
            loaded = handle.loaded if isinstance(handle, EagerHandle) and handle in self._live else None
        if loaded is None:
            raise BackendError(Error.DelegateInvalidHandle, f"{handle!r} is not a live handle of {NAME}: init one first")
        return loaded

    def execute(self, context, handle, args):
        import torch

        from conformance.api.tensors import to_torch

        loaded = self._loaded_of(handle)
        inputs, outputs = _exported.split_args(loaded.signature, list(args))
        tracer = getattr(context, "event_tracer", None)
        try:
            tensors = [to_torch(a, resizable=True) for a in inputs]  # copies: the caller's arrays stay as they are
            if self.device != "cpu":
                tensors = [t.to(self.device) for t in tensors]
            with torch.no_grad():
                result = _interpreter(loaded.module, loaded.ids, tracer).run(*tensors)
        except BackendError:
            raise
        except (MemoryError, torch.OutOfMemoryError) as exc:
            raise BackendError(Error.MemoryAllocationFailed, f"{NAME} execute ran out of memory: {exc}") from None
        except Exception as exc:
            raise BackendError(Error.Internal, f"{NAME} execute failed: {type(exc).__name__}: {exc}") from None
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        results = results[: len(results) - loaded.dropped]
        for i in loaded.bool_outputs:
            results[i] = bool(results[i])
        _exported.write_outputs(results, outputs)  # to_numpy copies a device tensor to the host
        return Error.Ok

    def destroy(self, handle):
        with self._lock:
            if isinstance(handle, EagerHandle) and handle in self._live:
                self._live.discard(handle)
                handle.loaded = None


# ---------------------------------------------------------------------------------------------
# The entry point


def manifest(device: str = "cpu") -> Manifest:
    """claims/torch-eager.toml: every op of the "full" profile in every dtype, and the blob's version field;
    on CUDA claims/torch-eager-cuda.toml: the same, and the numerical latitudes CUDA's kernels take."""
    return _claims.load(_device.backend_name(NAME, device)).manifest()


def _version(device: str = "cpu") -> str:
    import torch

    return f"torch {torch.__version__} (eager, {_device.describe(device)}; blob format {FORMAT_VERSION})"


def backend(device: str = "cpu") -> BackendUnderTest:
    """The entry point ``torch-eager`` (``device`` "cpu"), or this adapter on another device: "cuda" (the
    current CUDA device, the entry point ``torch-eager-cuda``) or "cuda:N". DiscoveryError, before
    anything runs, where the machine has no such device."""
    from conformance.discovery import DiscoveryError

    try:
        import torch  # noqa: F401
        import torch.export  # noqa: F401
    except ImportError as exc:
        raise DiscoveryError(f"{NAME} needs torch with torch.export ({exc}); install it with: pip install torch") from None
    name = _device.backend_name(NAME, device)
    device = _device.require(NAME, device)
    where = "on CPU" if device == "cpu" else f"on {device} (inputs and outputs host arrays; program and inputs moved to the device)"
    return BackendUnderTest(
        name=name,
        details=EagerDetails,
        runtime=EagerRuntime(device),
        version=_version(device),
        manifest=manifest(device),
        description=f"PyTorch eager {where}: the torch.export archive as blob, its unlifted module interpreted node by node",
        family="delegate",
        profile="full",
        device=device,
    )


def cuda_backend() -> BackendUnderTest:
    """The entry point ``torch-eager-cuda``: :func:`backend` on the current CUDA device."""
    return backend("cuda")
