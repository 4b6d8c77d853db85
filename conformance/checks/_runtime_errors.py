"""What a runtime must refuse, and how it must say so: inputs of a wrong dtype or shape (RT-009,
RT-010), and the BackendError a stage must raise (or execute return) for a misuse, a blob it
cannot load or an exhausted allocator."""

from __future__ import annotations

import numpy as np

from conformance.api import BackendError, BackendExecutionContext, Error, EventTracer, MemoryAllocator
from conformance.api.scalar_type import dtype_name, numpy_dtype
from conformance.driver import describe_exception
from conformance.results import Category, CheckFailure

ALLOCATION_ERRORS = (Error.MemoryAllocationFailed, Error.DelegateMemoryAllocationFailed)


def context():
    """A fresh execution context for calling the runtime directly, past the driver."""
    return BackendExecutionContext(temp_allocator=MemoryAllocator(1 << 30), event_tracer=EventTracer())


def expect_error(fn, errors: tuple[Error, ...], what: str) -> None:
    """``fn`` must report one of ``errors``: raise BackendError, or return it from execute."""
    try:
        status = fn()
    except BackendError as exc:
        if exc.error in errors:
            return
        raise CheckFailure(
            Category.CONTRACT_VIOLATION, f"{what}: got {exc}, expected {' or '.join(e.name for e in errors)}"
        ) from exc
    except Exception as exc:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"{what}: raised {describe_exception(exc)}; expected BackendError({' or '.join(e.name for e in errors)})",
        ) from exc
    if isinstance(status, Error) and status in errors:
        return
    raise CheckFailure(
        Category.CONTRACT_VIOLATION,
        f"{what}: returned {status!r} instead of reporting {' or '.join(e.name for e in errors)}",
    )


def expect_init_error(driver, out, blob, label):
    """init on ``blob`` must raise BackendError(DelegateInvalidCompatibility): RT-013's forged format version."""
    try:
        loaded = driver.init(out, processed_bytes=blob)
    except CheckFailure as exc:
        cause = exc.__cause__
        if isinstance(cause, BackendError) and cause.error is Error.DelegateInvalidCompatibility:
            return
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"init on a blob of {label} gave {describe_exception(cause) if cause else exc.message}; "
            "expected BackendError(DelegateInvalidCompatibility)",
        ) from exc
    driver.destroy(loaded)
    raise CheckFailure(Category.CONTRACT_VIOLATION, f"init accepted a blob of {label}")


def allocation_failure(exc: CheckFailure, what: str) -> str:
    """The allocation error (``ALLOCATION_ERRORS``) a stage's failure reports, by name; any other
    failure of ``what`` is CONTRACT_VIOLATION (an exhausted allocator is reported, or the stage succeeds)."""
    cause = exc.__cause__
    if not (isinstance(cause, BackendError) and cause.error in ALLOCATION_ERRORS):
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"{what} gave {describe_exception(cause) if cause else exc.message}; "
            "expected MemoryAllocationFailed or DelegateMemoryAllocationFailed (or success)",
        ) from exc
    return cause.error.name


SAME_SIZE_DTYPES = {
    "float32": "int32", "int32": "float32", "float16": "bfloat16", "bfloat16": "float16",
    "float64": "int64", "int64": "float64", "int16": "float16", "int8": "uint8", "uint8": "int8", "bool": "uint8",
}
"""For each dtype, another of the same byte size: a runtime that checks an input by its byte count
alone (a memcpy into the planned buffer) takes it and reinterprets its bytes."""


def dtype_probes(array: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Input ``array`` in wrong dtypes (RT-009): a wider one (another byte size) and one of the same
    byte size (``SAME_SIZE_DTYPES``: float32 [4] as int32 [4], float16 as bfloat16), the values
    converted, so only the dtype tells them from the right input."""
    name = dtype_name(array.dtype)
    wider = np.float64 if name != "float64" else np.float32
    probes = [(f"{np.dtype(wider).name} (another byte size)", array.astype(wider))]
    same = SAME_SIZE_DTYPES.get(name)
    if same is not None:
        probes.append((f"{same} (the same byte size)", array.astype(numpy_dtype(same))))
    return probes


def shape_probes(array: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Input ``array`` in wrong shapes (RT-010): larger, higher rank, and the same element count
    (so the same byte size) in another shape: its dims reversed ([2, 3] as [3, 2]), flattened
    ([2, 3] as [6]) or, for a 1-d input, as a column ([6] as [6, 1])."""
    shape = array.shape
    probes = [("larger", np.zeros(tuple(s + 3 for s in shape), array.dtype)), ("higher rank", np.zeros(shape + (2,), array.dtype))]
    same = []
    if len(set(shape)) > 1:
        same.append(shape[::-1])
    same.append((array.size,) if array.ndim != 1 else (array.size, 1))
    for other in same:
        if other != shape:
            probes.append(("same byte size", np.ascontiguousarray(array).reshape(other)))
    return probes
