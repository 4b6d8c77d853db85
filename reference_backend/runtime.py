"""Runtime half of the reference backend: init / execute / destroy.

``init`` decodes and validates the whole blob (``blob.read``), resolves every op
in the kernel table, and copies constants out of the NamedDataMap into memory
from the runtime allocator, so neither the processed buffer nor the named data
is needed afterwards. ``execute`` checks its arguments against the blob, runs
the instructions in order with NumPy kernels, places intermediates in the temp
allocator, writes the pre-allocated outputs in place and reports one profiling
event per instruction. Only ``BackendError`` leaves init and execute.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from conformance.api import (
    BackendError,
    BackendExecutionContext,
    BackendInitContext,
    BackendInterface,
    CompileSpec,
    Error,
    EValue,
    FreeableBuffer,
    MemoryAllocator,
    numpy_dtype,
    resize_tensor,
)

from . import blob
from .blob import NO_VALUE, DimKind, Dtype, Ref, ValueKind
from .kernels import GRAPH_OPS, KERNELS
from .meta import OVERFLOW, Shapes
from .preprocess import check_compile_specs

CONSTANT_ALIGNMENT = 64


@dataclass(frozen=True)
class _Step:
    op: str
    kernel: Callable[..., Any]
    debug_id: int
    args: tuple
    kwargs: tuple
    outputs: tuple[int, ...]


class _Plan:
    """The decoded program, ready to run: immutable, shared by concurrent executes."""

    def __init__(self, program: blob.Program, constants: dict[int, np.ndarray], kernels: Mapping[str, Callable]):
        self.program = program
        self.constants = constants
        self.steps = tuple(
            _Step(ins.op, _lookup(ins.op, kernels), ins.debug_id, ins.args, ins.kwargs, ins.outputs)
            for ins in program.instructions
        )
        self.dtypes = {
            i: numpy_dtype(int(v.dtype)) for i, v in enumerate(program.values) if v.kind is ValueKind.TENSOR
        }
        self.shapes = Shapes()


def _lookup(op: str, kernels: Mapping[str, Callable]) -> Callable[..., Any]:
    fn = kernels.get(op) or GRAPH_OPS.get(op)
    if fn is None:
        raise BackendError(
            Error.InvalidProgram, f"reference blob: op {op!r} is not in this runtime's kernel table"
        )
    return fn


class _Handle:
    __slots__ = ("plan", "__weakref__")

    def __init__(self, plan: _Plan):
        self.plan = plan

    def __repr__(self) -> str:
        if self.plan is None:
            return "<reference handle: destroyed>"
        return f"<reference handle: {len(self.plan.steps)} instructions>"


_SCALAR_TYPES = {ValueKind.INT: int, ValueKind.FLOAT: float, ValueKind.BOOL: bool}


class ReferenceRuntime(BackendInterface):
    """The reference runtime. One instance serves any number of handles, from any thread.

    ``kernels`` replaces the kernel table (the harness's seeded-defect backends use it).
    """

    def __init__(self, kernels: Mapping[str, Callable] | None = None):
        self.kernels = KERNELS if kernels is None else kernels
        self._live: weakref.WeakSet[_Handle] = weakref.WeakSet()
        self._lock = threading.Lock()

    def is_available(self) -> bool:
        return True

    # -- init -------------------------------------------------------------------------------

    def init(self, context: BackendInitContext, processed: FreeableBuffer, compile_specs: list[CompileSpec]) -> _Handle:
        try:
            check_compile_specs(compile_specs)
            program = blob.read(processed.data)
            constants = self._load_constants(program, context)
            handle = _Handle(_Plan(program, constants, self.kernels))
        except BackendError:
            raise
        except MemoryError as exc:
            raise BackendError(Error.MemoryAllocationFailed, f"init ran out of memory: {exc}") from exc
        except Exception as exc:  # a reference bug must still surface through the contract
            raise BackendError(Error.Internal, f"reference init failed: {type(exc).__name__}: {exc}") from exc
        with self._lock:
            self._live.add(handle)
        return handle

    def _load_constants(self, program: blob.Program, context: BackendInitContext) -> dict[int, np.ndarray]:
        if not program.constants:
            return {}
        named = getattr(context, "named_data_map", None)
        if named is None:
            raise BackendError(Error.InvalidProgram, "reference blob needs named data but init got no NamedDataMap")
        allocator: MemoryAllocator | None = getattr(context, "runtime_allocator", None)
        out: dict[int, np.ndarray] = {}
        for value_id, key in program.constants:
            info = program.values[value_id]
            dtype = numpy_dtype(int(info.dtype))
            shape = tuple(d.value for d in info.dims)
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            try:
                buffer = named.get_data(key)
            except BackendError as exc:
                raise BackendError(
                    Error.InvalidProgram, f"reference blob names data key {key!r} that the NamedDataMap lacks"
                ) from exc
            try:
                if buffer.size != nbytes:
                    raise BackendError(
                        Error.InvalidProgram,
                        f"named data {key!r} holds {buffer.size} bytes; the blob expects {nbytes} for "
                        f"{dtype.name}{list(shape)}",
                    )
                if allocator is None:
                    storage: Any = bytearray(nbytes)
                else:
                    storage = allocator.allocate(nbytes, CONSTANT_ALIGNMENT)
                    if storage is None:
                        raise BackendError(
                            Error.MemoryAllocationFailed,
                            f"runtime allocator cannot hold constant {key!r} ({nbytes} bytes; "
                            f"{allocator.available} of {allocator.capacity} left)",
                        )
                storage[:] = buffer.data
            finally:
                buffer.free()
            array = np.frombuffer(storage, dtype=dtype).reshape(shape)
            array.flags.writeable = False
            out[value_id] = array
        return out

    # -- execute ----------------------------------------------------------------------------

    def _plan_of(self, handle: Any) -> _Plan:
        with self._lock:
            live = isinstance(handle, _Handle) and handle in self._live
        if not live:
            raise BackendError(Error.DelegateInvalidHandle, f"{handle!r} is not a live handle of this runtime")
        return handle.plan

    def execute(self, context: BackendExecutionContext, handle: Any, args: list[EValue]) -> Error:
        plan = self._plan_of(handle)
        try:
            slots = self._bind_inputs(plan, args)
            self._run(plan, slots, context)
            self._write_outputs(plan, slots, args)
        except BackendError:
            raise
        except MemoryError as exc:
            raise BackendError(Error.MemoryAllocationFailed, f"execute ran out of memory: {exc}") from exc
        except Exception as exc:
            raise BackendError(Error.Internal, f"reference execute failed: {type(exc).__name__}: {exc}") from exc
        return Error.Ok

    def _bind_inputs(self, plan: _Plan, args: list[EValue]) -> list[Any]:
        program = plan.program
        expected = len(program.inputs) + len(program.outputs)
        if not isinstance(args, (list, tuple)) or len(args) != expected:
            got = len(args) if isinstance(args, (list, tuple)) else type(args).__name__
            raise BackendError(
                Error.InvalidArgument,
                f"expected {len(program.inputs)} inputs + {len(program.outputs)} outputs = {expected} args, got {got}",
            )
        slots: list[Any] = [None] * len(program.values)
        symbols: dict[int, int] = {}
        for position, (value_id, arg) in enumerate(zip(program.inputs, args)):
            array = _tensor_arg(arg, f"input {position}")
            self._check_tensor(plan, value_id, array, f"input {position}", symbols)
            slots[value_id] = array
        for position, value_id in enumerate(program.outputs):
            arg = args[len(program.inputs) + position]
            info = program.values[value_id]
            if info.kind is ValueKind.TENSOR:
                out = _tensor_arg(arg, f"output {position}")
                if out.dtype != plan.dtypes[value_id]:
                    raise BackendError(
                        Error.InvalidArgument,
                        f"output {position} is {out.dtype}, the program produces {plan.dtypes[value_id]}",
                    )
                if not out.flags.writeable:
                    raise BackendError(Error.InvalidArgument, f"output {position} is read-only")
                declared = program.values[value_id].dims
                if out.ndim != len(declared) or any(
                    d.kind is DimKind.STATIC and d.value != n for d, n in zip(declared, out.shape)
                ):
                    shown = [d.value if d.kind is DimKind.STATIC else "?" for d in declared]
                    raise BackendError(
                        Error.InvalidArgument, f"output {position} was allocated as {list(out.shape)}, the program declares {shown}"
                    )
            elif not isinstance(arg, EValue) or not isinstance(arg.value, _SCALAR_TYPES[info.kind]):
                raise BackendError(Error.InvalidArgument, f"output {position} must be a {info.kind.name} EValue")
        for value_id, array in plan.constants.items():
            slots[value_id] = array
        return slots

    def _check_tensor(self, plan: _Plan, value_id: int, array: np.ndarray, what: str, symbols: dict[int, int]) -> None:
        info = plan.program.values[value_id]
        if array.dtype != plan.dtypes[value_id]:
            raise BackendError(Error.InvalidArgument, f"{what} is {array.dtype}, the program expects {plan.dtypes[value_id]}")
        if array.ndim != len(info.dims):
            raise BackendError(
                Error.InvalidArgument, f"{what} has rank {array.ndim}, the program expects rank {len(info.dims)}"
            )
        for axis, (size, dim) in enumerate(zip(array.shape, info.dims)):
            if dim.kind is DimKind.STATIC and size != dim.value:
                raise BackendError(
                    Error.InvalidArgument, f"{what} has size {size} in dim {axis}, the program expects {dim.value}"
                )
            if dim.kind is DimKind.SYMBOL:
                lo, hi = plan.program.symbols[dim.value]
                bound = symbols.setdefault(dim.value, size)
                if bound != size:
                    raise BackendError(
                        Error.InvalidArgument,
                        f"{what} has size {size} in dim {axis}, but another input set that dimension to {bound}",
                    )
                if size < lo or (hi != -1 and size > hi):
                    raise BackendError(
                        Error.InvalidArgument,
                        f"{what} has size {size} in dim {axis}, outside the range [{lo}, {'inf' if hi == -1 else hi}]",
                    )

    def _run(self, plan: _Plan, slots: list[Any], context: BackendExecutionContext) -> None:
        tracer = getattr(context, "event_tracer", None)
        temp: MemoryAllocator | None = getattr(context, "temp_allocator", None)
        symbols = self._symbols(plan, slots)
        for index, step in enumerate(plan.steps):
            args = [_resolve(a, slots) for a in step.args]
            kwargs = {k: _resolve(v, slots) for k, v in step.kwargs}
            self._bound(plan, index, step, args, kwargs, symbols, temp)
            start = time.perf_counter_ns()
            try:
                result = step.kernel(*args, **kwargs)
            except BackendError as exc:
                raise BackendError(exc.error, f"{step.op}: {exc.message}", debug_handle=step.debug_id) from exc
            except (ZeroDivisionError, IndexError, ValueError, TypeError, AssertionError) as exc:
                raise BackendError(
                    Error.InvalidArgument, f"{step.op} failed: {type(exc).__name__}: {exc}", debug_handle=step.debug_id
                ) from exc
            except MemoryError as exc:
                raise BackendError(
                    Error.MemoryAllocationFailed, f"{step.op} ran out of memory", debug_handle=step.debug_id
                ) from exc
            except Exception as exc:
                raise BackendError(
                    Error.Internal, f"{step.op} failed: {type(exc).__name__}: {exc}", debug_handle=step.debug_id
                ) from exc
            # Kernels return a tuple exactly when the op returns several tensors or a Tensor[] (split
            # into one chunk included); a single tensor is never a tuple.
            results = () if result is None else tuple(result) if isinstance(result, (tuple, list)) else (result,)
            if len(results) != len(step.outputs):
                raise BackendError(
                    Error.Internal,
                    f"kernel {step.op} returned {len(results)} results for {len(step.outputs)} outputs",
                    debug_handle=step.debug_id,
                )
            for value_id, value in zip(step.outputs, results):
                if value_id != NO_VALUE:
                    slots[value_id] = self._place(plan, step, value_id, value, temp)
            if tracer is not None:
                tracer.log_profiling_delegate(None, step.debug_id, start, time.perf_counter_ns())

    @staticmethod
    def _symbols(plan: _Plan, slots: list[Any]) -> dict[int, int]:
        """The sizes the bound inputs gave the program's symbolic dims."""
        out: dict[int, int] = {}
        for value_id in plan.program.inputs:
            for dim, size in zip(plan.program.values[value_id].dims, np.shape(slots[value_id])):
                if dim.kind is DimKind.SYMBOL:
                    out[dim.value] = int(size)
        return out

    def _bound(
        self, plan: _Plan, index: int, step: _Step, args: list, kwargs: dict, symbols: dict[int, int], temp: MemoryAllocator | None
    ) -> None:
        """Refuse a step whose results cannot fit before its kernel allocates anything.

        Each result's size is the larger of what the blob declares and what the step's arguments
        make ATen's shape rules compute (meta.Shapes: repeat's counts, randperm's n, upsample's
        scales, arange's range all decide it), so a blob that declares 5 elements and asks for 2**27
        is measured by the 2**27. A kernel needs its results plus transients of up to KERNEL_HEADROOM
        times that. Checking after the kernel (as _place does) is too late: a 300-byte blob asking
        repeat for 2**28 elements would have the process allocate gigabytes first.

        A computed shape that differs from the declared one is not refused here: ATen's meta
        functions size some auxiliary results otherwise than its CPU kernels, which export follows
        (_embedding_bag's offset2bag and bag_size, the saved statistics of batch norm without
        training), so legitimate programs disagree. _place checks each result after its kernel.
        """
        available = temp.available if temp is not None else UNBOUNDED_TEMP_BYTES
        computed = plan.shapes.of(index, step.op, args, kwargs) if step.op not in GRAPH_OPS else None
        if computed is OVERFLOW:
            raise BackendError(
                Error.MemoryAllocationFailed,
                f"{step.op}'s arguments ask for results too large for ATen's shape rules to size (they overflow); "
                "refused before running",
                debug_handle=step.debug_id,
            )
        if computed is not None and len(computed) != len(step.outputs):
            computed = None
        total = _working_elements(step.op, args) * 8
        for position, value_id in enumerate(step.outputs):
            if value_id == NO_VALUE or plan.program.values[value_id].kind is not ValueKind.TENSOR:
                continue
            shape, itemsize = computed[position] if computed is not None and computed[position] is not None else ((), 0)
            declared = 1
            for dim in plan.program.values[value_id].dims:
                if dim.kind is DimKind.STATIC:
                    declared *= dim.value
                elif dim.kind is DimKind.SYMBOL and dim.value in symbols:
                    declared *= symbols[dim.value]
                else:
                    declared = 0  # data-dependent: the kernel's result is checked by _place
                    break
            total += max(declared, _product(shape) if itemsize else 0) * max(itemsize, plan.dtypes[value_id].itemsize)
        if total * KERNEL_HEADROOM > available:
            raise BackendError(
                Error.MemoryAllocationFailed,
                f"{step.op} needs {total} bytes for its results and working memory; with its transients that exceeds "
                f"the {available} bytes the temp allocator has left, so it was refused before running",
                debug_handle=step.debug_id,
            )

    def _place(self, plan: _Plan, step: _Step, value_id: int, value: Any, temp: MemoryAllocator | None) -> Any:
        info = plan.program.values[value_id]
        if info.kind is not ValueKind.TENSOR:
            return _SCALAR_TYPES[info.kind](value)
        value = np.asarray(value)
        expected = plan.dtypes[value_id]
        if value.dtype != expected or value.ndim != len(info.dims) or any(
            d.kind is DimKind.STATIC and d.value != n for d, n in zip(info.dims, value.shape)
        ):
            raise BackendError(
                Error.Internal,
                f"kernel {step.op} produced {value.dtype}{list(value.shape)}, the program expects "
                f"{expected}{[d.value if d.kind is DimKind.STATIC else '?' for d in info.dims]}",
                debug_handle=step.debug_id,
            )
        if temp is None:
            return value
        memory = temp.allocate(value.nbytes, 16)
        if memory is None:
            raise BackendError(
                Error.MemoryAllocationFailed,
                f"temp allocator cannot hold the {value.nbytes}-byte result of {step.op} "
                f"({temp.available} of {temp.capacity} left)",
                debug_handle=step.debug_id,
            )
        placed = np.frombuffer(memory, dtype=value.dtype, count=value.size).reshape(value.shape)
        placed[...] = value
        return placed

    def _write_outputs(self, plan: _Plan, slots: list[Any], args: list[EValue]) -> None:
        program = plan.program
        for position, value_id in enumerate(program.outputs):
            arg = args[len(program.inputs) + position]
            value = slots[value_id]
            if program.values[value_id].kind is not ValueKind.TENSOR:
                arg.set(value)
                continue
            if arg.value.shape != value.shape and arg.capacity is not None:
                # A size the program leaves to run time: report it within the allocated capacity (NUM-001).
                status = resize_tensor(arg, value.shape)
                if status is not Error.Ok:
                    raise BackendError(
                        status, f"output {position} ({arg.capacity.size} elements allocated) cannot hold the {list(value.shape)} computed"
                    )
            out = arg.value
            if out.shape != value.shape:
                raise BackendError(
                    Error.InvalidArgument,
                    f"output {position} was allocated as {list(out.shape)}, the program computes {list(value.shape)}",
                )
            np.copyto(out, value, casting="no")

    # -- destroy ----------------------------------------------------------------------------

    def destroy(self, handle: Any) -> None:
        with self._lock:
            if not isinstance(handle, _Handle) or handle not in self._live:
                raise BackendError(Error.DelegateInvalidHandle, f"{handle!r} is not a live handle of this runtime")
            self._live.discard(handle)
        handle.plan = None


def _product(shape: tuple[int, ...]) -> int:
    """Elements of a result for the bound: an empty result counts its other dims, since a kernel
    allocates along them (index arrays, per-dim transients) before it finds nothing to compute."""
    out = 1
    for n in shape:
        out *= max(n, 1)
    return out


def _working_elements(op: str, args: list) -> int:
    """Elements a kernel allocates beyond its results because of its attributes: the padded input
    of a convolution (padding is unbounded in ATen; a stride as large can keep the result small)."""
    if not op.startswith("aten.convolution."):
        return 0
    try:
        x, padding = np.asarray(args[0]), [int(p) for p in args[4]]
        spatial = [n + 2 * p for n, p in zip(x.shape[2:], padding)]
        return _product((*x.shape[:2], *spatial))
    except (TypeError, ValueError, IndexError, OverflowError):
        return 0


KERNEL_HEADROOM = 4
"""A kernel may need this many times its result in transients (casts to the compute type, copies)."""
UNBOUNDED_TEMP_BYTES = 1 << 30
"""The budget of a step when the caller gives no temp allocator."""


def _tensor_arg(arg: Any, what: str) -> np.ndarray:
    if not isinstance(arg, EValue) or not isinstance(arg.value, np.ndarray):
        got = arg.tag.name if isinstance(arg, EValue) else type(arg).__name__
        raise BackendError(Error.InvalidArgument, f"{what} must be a tensor EValue, got {got}")
    return arg.value


def _resolve(arg: Any, slots: list[Any]) -> Any:
    if isinstance(arg, Ref):
        return slots[arg.id]
    if isinstance(arg, tuple):
        return [_resolve(a, slots) for a in arg]
    if isinstance(arg, Dtype):
        return numpy_dtype(int(arg.code))
    return arg
