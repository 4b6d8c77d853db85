"""Drives one program through a backend exactly as an ExecuTorch runtime would.

preprocess(program, compile specs) -> PreprocessResult
  -> FreeableBuffer over processed_bytes, NamedDataMap over the data store output,
     a runtime MemoryAllocator, a BackendInitContext -> init -> handle
     (the processed buffer lives until destroy; RT-005 is the check that frees it
     right after init, as ExecuTorch does, so that one clause answers for it)
  -> inputs + outputs pre-allocated and filled with a sentinel, a temp allocator
     and an EventTracer in a BackendExecutionContext -> execute
  -> destroy

Every stage turns a backend's misbehaviour into a ``CheckFailure`` with the
right category: a BackendError is the backend refusing or failing (PREPROCESS_FAIL,
INIT_FAIL, EXECUTE_FAIL); any other exception, a wrong return type, or an
unwritten output is a CONTRACT_VIOLATION.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from conformance.api import (
    BackendError,
    BackendExecutionContext,
    BackendInitContext,
    BackendUnderTest,
    CompileSpec,
    Error,
    EValue,
    EventTracer,
    FreeableBuffer,
    MemoryAllocator,
    NamedDataMap,
    NamedDataStoreOutput,
    PreprocessResult,
)
from conformance.api.tensors import Layout, input_layouts, with_layout
from conformance.results import Category, CheckFailure
from conformance.run.supervision import stage

RUNTIME_CAPACITY = 1 << 30
TEMP_CAPACITY = 1 << 30
CLEAN_REFUSALS = (Error.NotSupported, Error.NotImplemented)


def describe_exception(exc: BaseException) -> str:
    if isinstance(exc, BackendError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


@dataclass
class Loaded:
    """A live handle and what the runtime lent the backend to build it."""

    handle: Any
    processed: FreeableBuffer
    named_data: NamedDataMap
    runtime_allocator: MemoryAllocator
    init_ns: int


@dataclass
class Execution:
    outputs: list[np.ndarray]
    events: list
    execute_ns: int
    temp_peak: int


@dataclass
class RunResult:
    outputs: list[np.ndarray]
    preprocess_result: PreprocessResult
    events: list = field(default_factory=list)


def sentinel_like(template: np.ndarray) -> np.ndarray:
    """An output buffer of ``template``'s shape and dtype, pre-filled so unwritten elements show; for a
    NumPy scalar (a Scalar output, ``case.reference``) a Python scalar of its kind, so the output
    EValue is a Double, Int or Bool one that the backend sets."""
    if isinstance(template, np.generic):
        kind = template.dtype.kind
        return float("nan") if kind == "f" else True if kind == "b" else 0x5A5A5A5A5A5A5A5A
    out = np.empty(template.shape, template.dtype)
    if out.dtype.kind in "fc" or out.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        out.fill(complex(np.nan, np.nan) if out.dtype.kind == "c" else np.nan)
    elif out.dtype.kind == "b":
        out.fill(True)
    else:
        out.reshape(-1).view(np.uint8).fill(0x5A)  # reshape: .view() refuses 0-d arrays
    return out


@contextmanager
def _runtime_stage(name: str, failed: Category) -> Iterator[None]:
    """A call into the runtime at stage ``name``: a BackendError is the stage failing (``failed``), any
    other exception a CONTRACT_VIOLATION (only BackendError may leave init and execute)."""
    stage(name)
    try:
        yield
    except BackendError as exc:
        raise CheckFailure(failed, f"{name} failed: {exc}", stage=name) from exc
    except Exception as exc:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION, f"{name} raised {describe_exception(exc)}; only BackendError may leave {name}", stage=name
        ) from exc


class Driver:
    """Runs programs through one ``BackendUnderTest``."""

    def __init__(self, backend: BackendUnderTest):
        self.backend = backend

    # -- preprocess -----------------------------------------------------------------------

    def preprocess(self, exported, compile_specs: Sequence[CompileSpec] | None = None) -> tuple[PreprocessResult, int]:
        specs = list(self.backend.compile_specs if compile_specs is None else compile_specs)
        start = time.perf_counter_ns()
        stage("preprocess")
        try:
            result = self.backend.details.preprocess(exported, specs)
        except BackendError as exc:
            category = Category.NOT_SUPPORTED if exc.error in CLEAN_REFUSALS else Category.PREPROCESS_FAIL
            raise CheckFailure(category, f"preprocess refused: {exc}", stage="preprocess") from exc
        except Exception as exc:
            raise CheckFailure(
                Category.PREPROCESS_FAIL,
                f"preprocess raised {describe_exception(exc)}",
                stage="preprocess",
            ) from exc
        elapsed = time.perf_counter_ns() - start
        check_preprocess_result(result)
        return result, elapsed

    # -- init -----------------------------------------------------------------------------

    def init(
        self,
        result: PreprocessResult,
        *,
        runtime_allocator: MemoryAllocator | None = None,
        free_processed: bool = False,
        processed_bytes: bytes | None = None,
    ) -> Loaded:
        processed = FreeableBuffer(result.processed_bytes if processed_bytes is None else processed_bytes)
        named = NamedDataMap(result.data_store_output or NamedDataStoreOutput())
        allocator = runtime_allocator if runtime_allocator is not None else MemoryAllocator(RUNTIME_CAPACITY)
        context = BackendInitContext(runtime_allocator=allocator, named_data_map=named, method_name="forward")
        start = time.perf_counter_ns()
        with _runtime_stage("init", Category.INIT_FAIL):
            handle = self.backend.runtime.init(context, processed, list(self.backend.compile_specs))
        elapsed = time.perf_counter_ns() - start
        if free_processed:
            processed.free()  # ExecuTorch releases the processed blob once init returns
        return Loaded(handle, processed, named, allocator, elapsed)

    # -- execute --------------------------------------------------------------------------

    def execute(
        self,
        loaded: Loaded,
        inputs: Sequence[np.ndarray],
        expected_like: Sequence[np.ndarray],
        *,
        temp_allocator: MemoryAllocator | None = None,
        args: list[EValue] | None = None,
        layout: Layout = "contiguous",
        capacities: Sequence[tuple[int, ...] | None] | None = None,
        undefined: Sequence[bool] | None = None,
    ) -> Execution:
        """``capacities``: for each output whose size the program leaves to run time, the upper-bound
        shape to allocate (``programs.output_capacities``); the backend reports the size it computed
        with ``resize_tensor`` (NUM-001). Other outputs are allocated as ``expected_like``.
        ``undefined``: per output, whether the call leaves it undefined (op spec ``defined_outputs``):
        such an output is allocated as ``expected_like`` with room behind it, so a backend whose kernel
        sizes it otherwise (CUDA batch norm's eval-mode statistics: [C] where CPU gives [0]) may
        ``resize_tensor`` it to as many elements as the largest input holds."""
        capacities = capacities or [None] * len(expected_like)
        undefined = undefined or [False] * len(expected_like)
        outputs = [sentinel_like(e) for e in expected_like]
        room = max((int(np.size(a)) for a in inputs), default=0)
        if args is None:
            args = [EValue(with_layout(a, each)) for a, each in zip(inputs, input_layouts(layout, len(inputs)))]
            for o, bound, free in zip(outputs, capacities, undefined):
                if bound is None and free and isinstance(o, np.ndarray) and o.ndim:
                    storage = sentinel_like(np.empty((max(o.size, room),) + (1,) * (o.ndim - 1), o.dtype))
                    args.append(EValue(storage.reshape(-1)[: o.size].reshape(o.shape), capacity=storage))
                elif bound is None:
                    args.append(EValue(o))
                else:
                    storage = sentinel_like(np.empty(bound, o.dtype))
                    args.append(EValue(storage, capacity=storage))
        tracer = EventTracer()
        temp = temp_allocator if temp_allocator is not None else MemoryAllocator(TEMP_CAPACITY)
        context = BackendExecutionContext(temp_allocator=temp, event_tracer=tracer, method_name="forward")
        start = time.perf_counter_ns()
        try:
            with _runtime_stage("execute", Category.EXECUTE_FAIL):
                status = self.backend.runtime.execute(context, loaded.handle, args)
        finally:
            peak = temp.peak
            temp.reset()  # the runtime resets the temp allocator after every execute
        elapsed = time.perf_counter_ns() - start
        if not isinstance(status, Error):
            raise CheckFailure(
                Category.CONTRACT_VIOLATION,
                f"execute returned {status!r}; it must return an Error (Error.Ok on success)",
                stage="execute",
            )
        if status is not Error.Ok:
            raise CheckFailure(Category.EXECUTE_FAIL, f"execute returned {status.name}", stage="execute")
        written = [a.value for a in args[len(inputs):]]
        return Execution(written, list(tracer.events), elapsed, peak)

    def destroy(self, loaded: Loaded) -> None:
        stage("destroy")
        try:
            self.backend.runtime.destroy(loaded.handle)
        except Exception as exc:
            raise CheckFailure(
                Category.CONTRACT_VIOLATION, f"destroy raised {describe_exception(exc)}", stage="destroy"
            ) from exc
        finally:
            loaded.processed.free()

    # -- the whole path -------------------------------------------------------------------

    def execute_once(self, result: PreprocessResult, inputs: Sequence[np.ndarray], expected_like: Sequence[np.ndarray],
                     **options) -> tuple[Loaded, Execution]:
        """init -> execute -> destroy of one preprocess result: the handle (its init time) and the
        execution; ``options`` go to ``execute``."""
        loaded = self.init(result)
        try:
            return loaded, self.execute(loaded, inputs, expected_like, **options)
        finally:
            self.destroy(loaded)

    def run(
        self, exported, inputs: Sequence[np.ndarray], expected_like: Sequence[np.ndarray], *, layout: Layout = "contiguous",
        compile_specs: Sequence[CompileSpec] | None = None,
    ) -> RunResult:
        """preprocess -> init -> execute -> destroy; inputs reach the backend in ``layout`` (INPUT_LAYOUTS, or one per input);
        ``compile_specs`` for preprocess (default: the backend's own)."""
        result, _ = self.preprocess(exported, compile_specs)
        _, execution = self.execute_once(result, inputs, expected_like, layout=layout)
        return RunResult(
            outputs=execution.outputs,
            preprocess_result=result,
            events=execution.events,
        )


def check_preprocess_result(result: Any) -> None:
    """PRE-001: preprocess returns a PreprocessResult with well-typed fields."""
    if not isinstance(result, PreprocessResult):
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"preprocess returned {type(result).__name__}, not a PreprocessResult",
            stage="preprocess",
        )
    if not isinstance(result.processed_bytes, bytes):
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"processed_bytes is {type(result.processed_bytes).__name__}, not bytes",
            stage="preprocess",
        )
    dhm = result.debug_handle_map
    if dhm is not None:
        if not isinstance(dhm, dict) or not all(
            isinstance(k, (int, str)) and isinstance(v, (tuple, list)) and all(isinstance(h, int) for h in v)
            for k, v in dhm.items()
        ):
            raise CheckFailure(
                Category.CONTRACT_VIOLATION,
                "debug_handle_map must map int or str ids to tuples of int debug handles",
                stage="preprocess",
            )
    if result.data_store_output is not None and not isinstance(result.data_store_output, NamedDataStoreOutput):
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"data_store_output is {type(result.data_store_output).__name__}, not a NamedDataStoreOutput",
            stage="preprocess",
        )
