"""RT: init / execute / destroy, and everything a runtime may throw at them."""

from __future__ import annotations

import threading

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.api import BackendError, Error, EValue, MemoryAllocator
from conformance.driver import Driver, describe_exception
from conformance.results import Category, CheckFailure

from . import _support as support

LEAK_CYCLES = 1000
"""init/destroy cycles RT-016 measures (fewer when init is slow: support.measure_growth)."""
LEAK_EXECUTES = 800
"""executes RT-018 measures on one handle (fewer when execute is slow)."""
LEAK_WARMUP = 64
LEAK_BUDGETS = {"python_heap": 256, "native_heap": 1024, "rss": 4096}
"""Bytes per operation each measure may grow by, steadily (in every segment of the measurement's
second half: support.GROWTH_SEGMENTS), before RT-016 and RT-018 call it a leak. Measured on the
four contract programs (three runs each): the reference grows steadily by at most 7 bytes per
execute or cycle on the heap and 11 in native memory (single segments up to 40 and 190 bytes:
a sample's own allocations, malloc's bookkeeping) and not at all in the resident set (single
segments up to 524 bytes); ExecuTorch's runtimes by under 25 bytes on mlp.
Native memory gets more room than the heap because tracemalloc's own tables and malloc's
bookkeeping move it; the resident set moves by whole pages. A leak of a 64 KiB buffer per
execute is 64 times the native budget."""
ALLOCATION_ERRORS = (Error.MemoryAllocationFailed, Error.DelegateMemoryAllocationFailed)


def _prepared(backend, result):
    """(driver, contract program, preprocess result, expected outputs) for the runnable program."""
    program = support.runnable(backend)
    result.set(program=program.name)
    driver = Driver(backend)
    out, _ = driver.preprocess(program.fresh())
    return driver, program, out, list(support.expected_for(program.name))


def _other_inputs(program, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(a.shape).astype(a.dtype) for a in program.inputs)


def _expected(program, inputs, like):
    return support.reference_outputs(program.exported, inputs, like)


def _expect_error(fn, errors: tuple[Error, ...], what: str) -> None:
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


def _context():
    from conformance.api import BackendExecutionContext, EventTracer

    return BackendExecutionContext(temp_allocator=MemoryAllocator(1 << 30), event_tracer=EventTracer())


def test_RT_001_is_available(backend, result):
    try:
        available = backend.runtime.is_available()
    except Exception as exc:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"is_available raised {describe_exception(exc)}") from exc
    if available is not True:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"is_available returned {available!r} on this machine")


def test_RT_002_round_trip(backend, result):
    driver, program, out, expected = _prepared(backend, result)
    loaded = driver.init(out)
    try:
        ran = driver.execute(loaded, program.inputs, expected)
    finally:
        driver.destroy(loaded)
    stats = support.compare_outputs(ran.outputs, expected, what=program.name, backend=backend, program=program)
    result.stats(**stats)
    result.set(timings={"init_ms": loaded.init_ns / 1e6, "execute_ms": ran.execute_ns / 1e6})


def _reweighted(program):
    """A copy of the program with every floating weight scaled, or None if it has none."""
    import torch

    exported = program.fresh()
    weights = [t for t in exported.state_dict.values() if t.is_floating_point()]
    if not weights:
        return None
    with torch.no_grad():
        for t in weights:
            t.mul_(1.5)
    return exported


def test_RT_003_independent_handles(backend, result):
    driver, program, out, expected = _prepared(backend, result)
    other_inputs = _other_inputs(program, 11)
    other_expected = _expected(program, other_inputs, expected)
    handles = [("first handle", driver.init(out), program.inputs, expected),
               ("second handle", driver.init(out), other_inputs, other_expected)]
    reweighted = _reweighted(program)
    if reweighted is not None:  # a handle of another blob: weights must not leak between handles
        out3, _ = driver.preprocess(reweighted)
        want3 = support.reference_outputs(reweighted, program.inputs, expected)
        handles.append(("handle of a blob with other weights", driver.init(out3), program.inputs, want3))
    try:
        for _ in range(2):  # interleaved
            for label, loaded, inputs, want in handles:
                ran = driver.execute(loaded, inputs, want)
                support.compare_outputs(ran.outputs, want, what=f"{label} (interleaved)")
        driver.destroy(handles[0][1])
        for label, loaded, inputs, want in handles[1:]:
            ran = driver.execute(loaded, inputs, want)
            support.compare_outputs(ran.outputs, want, what=f"{label} after the first handle was destroyed")
    finally:
        for _, loaded, _, _ in handles[1:]:
            driver.destroy(loaded)
    result.stats(handles=len(handles))


def test_RT_004_repeated_execute_identical(backend, result):
    driver, program, out, expected = _prepared(backend, result)
    other_inputs = _other_inputs(program, 12)
    other_expected = _expected(program, other_inputs, expected)
    loaded = driver.init(out)
    try:
        runs = [driver.execute(loaded, program.inputs, expected).outputs for _ in range(5)]
        other = driver.execute(loaded, other_inputs, other_expected).outputs
        again = driver.execute(loaded, program.inputs, expected).outputs
    finally:
        driver.destroy(loaded)
    support.compare_outputs(runs[0], expected, what="first execution")
    for i, outputs in enumerate(runs[1:] + [again], start=2):
        for j, (a, b) in enumerate(zip(runs[0], outputs)):
            if a.tobytes() != b.tobytes():
                raise CheckFailure(
                    Category.CONTRACT_VIOLATION, f"execution {i} output {j} differs bitwise from the first execution"
                )
    support.compare_outputs(other, other_expected, what="the same handle executed on other inputs (state kept from the first?)")


def test_RT_005_processed_buffer_freed_after_init(backend, result):
    driver, program, out, expected = _prepared(backend, result)
    kept = driver.init(out, free_processed=False)
    freed = driver.init(out, free_processed=True)
    try:
        with_buffer = driver.execute(kept, program.inputs, expected).outputs
        without = driver.execute(freed, program.inputs, expected).outputs
    finally:
        driver.destroy(kept)
        driver.destroy(freed)
    support.compare_outputs(with_buffer, expected, what="processed buffer kept alive")
    support.compare_outputs(without, expected, what="processed buffer freed after init (the backend kept a view of it)")


def test_RT_006_execute_after_destroy(backend, result):
    driver, program, out, expected = _prepared(backend, result)
    loaded = driver.init(out)
    driver.destroy(loaded)
    args = [EValue(np.array(a)) for a in program.inputs] + [EValue(np.zeros_like(e)) for e in expected]
    _expect_error(
        lambda: backend.runtime.execute(_context(), loaded.handle, args),
        (Error.DelegateInvalidHandle,),
        "execute after destroy",
    )


def test_RT_007_foreign_handle(backend, result):
    driver, program, out, expected = _prepared(backend, result)
    for foreign in (None, object(), 12345, "handle"):
        args = [EValue(np.array(a)) for a in program.inputs] + [EValue(np.zeros_like(e)) for e in expected]
        _expect_error(
            lambda: backend.runtime.execute(_context(), foreign, args),
            (Error.DelegateInvalidHandle,),
            f"execute with foreign handle {foreign!r}",
        )


def _with_handle(driver, out, fn):
    loaded = driver.init(out)
    try:
        return fn(loaded)
    finally:
        driver.destroy(loaded)


def test_RT_008_wrong_arity(backend, result):
    driver, program, out, expected = _prepared(backend, result)
    inputs = [EValue(np.array(a)) for a in program.inputs]
    outputs = [EValue(np.zeros_like(e)) for e in expected]

    def check(loaded):
        for label, args in (
            ("no arguments", []),
            ("one input missing", inputs[1:] + outputs),
            ("outputs missing", inputs),
            ("one extra argument", inputs + outputs + [EValue(np.zeros(3, np.float32))]),
        ):
            _expect_error(
                lambda: backend.runtime.execute(_context(), loaded.handle, list(args)),
                (Error.InvalidArgument,),
                f"execute with {label}",
            )

    _with_handle(driver, out, check)


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
    from conformance.api.scalar_type import dtype_name, numpy_dtype

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


def _refuses_each(backend, result, make_probes, describe) -> list:
    """Execute with input 0 replaced by each of ``make_probes(input 0)``'s arrays: every one must be
    InvalidArgument. ``describe(label, wrong, first)`` names a probe in the failure. Returns the probes."""
    driver, program, out, expected = _prepared(backend, result)
    first = program.inputs[0]
    probes = make_probes(first)
    outputs = [EValue(np.zeros_like(e)) for e in expected]

    def check(loaded):
        for label, wrong in probes:
            args = [EValue(wrong)] + [EValue(np.array(a)) for a in program.inputs[1:]] + outputs
            _expect_error(lambda: backend.runtime.execute(_context(), loaded.handle, args), (Error.InvalidArgument,),
                          describe(label, wrong, first))

    _with_handle(driver, out, check)
    return probes


def test_RT_009_wrong_dtype(backend, result):
    probes = _refuses_each(backend, result, dtype_probes, lambda label, wrong, first: f"execute with input 0 {list(first.shape)} as {label}")
    result.stats(probes=[label for label, _ in probes])


def test_RT_010_wrong_shape(backend, result):
    probes = _refuses_each(
        backend, result, shape_probes,
        lambda label, wrong, first: f"execute with a {label} input 0 {list(wrong.shape)} (the program's is {list(first.shape)})",
    )
    result.stats(probes=[f"{label} {list(wrong.shape)}" for label, wrong in probes])


def _init_must_be_clean(driver, out, blob: bytes, program, expected, what: str) -> str:
    """init on ``blob``: success or BackendError; a handle it returns must execute or raise BackendError."""
    try:
        loaded = driver.init(out, processed_bytes=blob)
    except CheckFailure as exc:
        if exc.category is Category.INIT_FAIL:
            return "refused"
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"{what}: {exc.message}") from exc
    try:
        driver.execute(loaded, program.inputs, expected)
    except CheckFailure as exc:
        if exc.category is not Category.EXECUTE_FAIL:
            raise CheckFailure(Category.CONTRACT_VIOLATION, f"{what}: accepted by init, then {exc.message}") from exc
    finally:
        try:
            driver.destroy(loaded)
        except CheckFailure:
            pass
    return "accepted"


def test_RT_011_mutated_blobs(backend, result):
    driver, program, out, expected = _prepared(backend, result)
    blob = out.processed_bytes
    if not blob:
        result.not_applicable("the backend's processed blob is empty")
    outcomes = {"refused": 0, "accepted": 0}

    @settings(max_examples=60, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(
        positions=st.lists(st.integers(0, len(blob) - 1), min_size=1, max_size=8),
        values=st.lists(st.integers(0, 255), min_size=8, max_size=8),
    )
    def mutate(positions, values):
        data = bytearray(blob)
        for pos, val in zip(positions, values):
            data[pos] = val if data[pos] != val else val ^ 0xFF
        what = f"init on the blob with bytes {sorted(set(positions))[:8]} changed"
        outcomes[_init_must_be_clean(driver, out, bytes(data), program, expected, what)] += 1

    mutate()
    result.stats(**outcomes)


def test_RT_012_truncated_blobs(backend, result):
    driver, program, out, expected = _prepared(backend, result)
    blob = out.processed_bytes
    if not blob:
        result.not_applicable("the backend's processed blob is empty")
    lengths = sorted({0, 1, len(blob) // 2, len(blob) - 1, *range(0, len(blob), max(1, len(blob) // 64))} - {len(blob)})
    for n in lengths:
        try:
            loaded = driver.init(out, processed_bytes=blob[:n])
        except CheckFailure as exc:
            if exc.category is Category.INIT_FAIL:
                continue
            raise CheckFailure(Category.CONTRACT_VIOLATION, f"init on the blob truncated to {n} bytes: {exc.message}") from exc
        driver.destroy(loaded)
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"init accepted the blob truncated to {n} of {len(blob)} bytes; a truncated blob must be refused",
        )
    result.stats(lengths_checked=len(lengths))


def test_RT_013_blob_version_checked(backend, result):
    field = backend.manifest.blob_version
    if field is None:
        result.not_applicable("the manifest does not say where the blob carries its format version (blob_version)")
    driver, program, out, expected = _prepared(backend, result)
    blob = bytearray(out.processed_bytes)
    stored = int.from_bytes(blob[field.offset : field.offset + field.size], field.byteorder)
    if stored != field.current:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"the blob holds version {stored} at offset {field.offset}, the manifest says the current one is {field.current}",
        )
    for label, version in (("older", field.current - 1), ("newer", field.current + 1)):
        if version < 0:
            continue
        forged = bytearray(blob)
        forged[field.offset : field.offset + field.size] = version.to_bytes(field.size, field.byteorder)
        _expect_init_error(driver, out, bytes(forged), f"{label} format version {version}")


def _expect_init_error(driver, out, blob, label):
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


def test_RT_014_allocator_exhaustion(backend, result):
    driver, program, out, expected = _prepared(backend, result)
    outcomes = {}
    try:
        loaded = driver.init(out, runtime_allocator=MemoryAllocator(0))
    except CheckFailure as exc:
        cause = exc.__cause__
        if not (isinstance(cause, BackendError) and cause.error in ALLOCATION_ERRORS):
            raise CheckFailure(
                Category.CONTRACT_VIOLATION,
                f"init with an exhausted runtime allocator gave {describe_exception(cause) if cause else exc.message}; "
                "expected MemoryAllocationFailed or DelegateMemoryAllocationFailed (or success)",
            ) from exc
        outcomes["init"] = cause.error.name
    else:
        outcomes["init"] = "succeeded"
        try:
            ran = driver.execute(loaded, program.inputs, expected)
            support.compare_outputs(ran.outputs, expected, what="after init with an exhausted runtime allocator")
        finally:
            driver.destroy(loaded)
    loaded = driver.init(out)
    try:
        ran = driver.execute(loaded, program.inputs, expected, temp_allocator=MemoryAllocator(0))
        support.compare_outputs(ran.outputs, expected, what="execute with an exhausted temp allocator")
        outcomes["execute"] = "succeeded"
    except CheckFailure as exc:
        cause = exc.__cause__
        if not (isinstance(cause, BackendError) and cause.error in ALLOCATION_ERRORS):
            raise CheckFailure(
                Category.CONTRACT_VIOLATION,
                f"execute with an exhausted temp allocator gave {describe_exception(cause) if cause else exc.message}; "
                "expected MemoryAllocationFailed or DelegateMemoryAllocationFailed (or success)",
            ) from exc
        outcomes["execute"] = cause.error.name
    finally:
        driver.destroy(loaded)
    result.stats(**outcomes)


def test_RT_015_concurrent_handles(backend, result):
    driver, program, out, expected = _prepared(backend, result)
    threads_n, rounds = 4, 10
    cases = []
    for t in range(threads_n):
        inputs = _other_inputs(program, 100 + t)
        cases.append((inputs, _expected(program, inputs, expected)))
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads_n)

    def work(inputs, want):
        try:
            loaded = driver.init(out)
            barrier.wait()
            try:
                for _ in range(rounds):
                    support.compare_outputs(driver.execute(loaded, inputs, want).outputs, want, what="concurrent execution")
            finally:
                driver.destroy(loaded)
        except BaseException as exc:  # collected and re-raised in the main thread
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=work, args=case) for case in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real:
        first = real[0]
        if isinstance(first, CheckFailure):
            raise CheckFailure(first.category, f"with {threads_n} threads: {first.message}") from first
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"with {threads_n} threads: {describe_exception(first)}") from first
    result.stats(threads=threads_n, executions=threads_n * rounds)


def test_RT_016_no_leak_over_init_destroy_cycles(backend, result):
    driver, program, out, expected = _prepared(backend, result)
    before = _process_resources()
    threads_before = set(threading.enumerate())
    growth = support.measure_growth(
        lambda: driver.destroy(driver.init(out)), what="init/destroy cycle", ops=LEAK_CYCLES, warmup=LEAK_WARMUP
    )
    _judge_threads_left(result, threads_before)
    _judge_resources(result, before, _process_resources(), growth.ops + growth.warmup, "init/destroy cycle")
    _judge_growth(
        result, growth,
        "Something init allocates outlives destroy: free in destroy everything init allocated "
        "(buffers from malloc or a native library included), and keep no reference to a handle's data after it.",
    )


def _judge_threads_left(result, before: set[threading.Thread]) -> None:
    """Python threads the cycles started that still run after every handle was destroyed, by name.
    A daemon thread may be a pool the backend keeps (recorded); a non-daemon one keeps every process
    that loaded the backend from exiting (the supervisor has to kill it): CONTRACT_VIOLATION."""
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    if not left:
        return
    result.stats(threads_left=[f"{t.name} ({'daemon' if t.daemon else 'non-daemon'})" for t in left])
    blocking = [t.name for t in left if not t.daemon]
    if blocking:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"after every handle was destroyed, {len(blocking)} non-daemon thread(s) the backend started still run: "
            f"{', '.join(repr(n) for n in blocking[:5])}{' ...' if len(blocking) > 5 else ''}; no process that loaded the "
            "backend can exit. Stop and join them in destroy (or make a pool shared by handles a daemon).",
        )


def test_RT_017_execute_leaves_inputs_alone(backend, result):
    driver, program, out, expected = _prepared(backend, result)
    inputs = [np.array(a) for a in program.inputs]
    args = [EValue(a) for a in inputs] + [EValue(np.zeros_like(e)) for e in expected]

    def check(loaded):
        driver.execute(loaded, inputs, expected, args=args)
        for i, (before, after) in enumerate(zip(program.inputs, inputs)):
            if before.tobytes() != after.tobytes():
                raise CheckFailure(Category.CONTRACT_VIOLATION, f"execute modified input {i}")

    _with_handle(driver, out, check)


def test_RT_018_no_leak_over_executes(backend, result):
    driver, program, out, expected = _prepared(backend, result)
    loaded = driver.init(out)
    try:
        growth = support.measure_growth(
            lambda: driver.execute(loaded, program.inputs, expected), what="execute", ops=LEAK_EXECUTES, warmup=LEAK_WARMUP
        )
    finally:
        driver.destroy(loaded)
    _judge_growth(
        result, growth,
        "Something execute allocates is never released: free per-execute buffers before execute returns "
        "(or reuse one buffer per handle), and keep no per-execute history on the handle or the runtime.",
    )


def _process_resources() -> dict[str, int]:
    """Open file descriptors and threads (native ones included: /proc/self/task) of this process."""
    import os

    counts = {"threads": threading.active_count()}
    for name, path in (("file descriptors", "/proc/self/fd"), ("native threads", "/proc/self/task")):
        try:
            counts[name] = len(os.listdir(path))
        except OSError:  # not Linux
            pass
    return counts


def _judge_resources(result, before: dict[str, int], after: dict[str, int], cycles: int, unit: str) -> None:
    """CONTRACT_VIOLATION when file descriptors or threads grew with the cycles (more than a fixed
    pool a backend may start once: RESOURCE_SLACK, or one per eight cycles)."""
    grown = {k: after[k] - before[k] for k in before if k in after}
    result.stats(resources_grown=grown, resource_cycles=cycles)
    allowed = max(RESOURCE_SLACK, cycles // 8)
    over = [f"{k} grew by {n} over {cycles} {unit}s" for k, n in grown.items() if n > allowed]
    if over:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            "; ".join(over) + f" (at most {allowed} allowed): destroy must close every file and stop every thread init opened or started.",
        )


RESOURCE_SLACK = 8


def _judge_growth(result, growth, advice: str) -> None:
    """RT-016 and RT-018: record the measurements and the budgets, then hold the growth to them."""
    result.stats(budget_bytes_per_op=LEAK_BUDGETS)
    result.set(measurements=growth.measurements())
    support.check_growth(growth, LEAK_BUDGETS, advice=advice)


def _same_handle(a, b) -> bool:
    """``b`` is the very handle ``a`` (for plain-value handles such as ints: an equal value)."""
    return a is b or (type(a) in (int, str, bytes) and type(b) is type(a) and a == b)


def test_RT_019_destroyed_handle_stays_invalid(backend, result):
    driver, program, out, expected = _prepared(backend, result)
    destroyed = driver.init(out)
    driver.destroy(destroyed)
    later = []
    try:
        for label in ("second", "third"):
            loaded = driver.init(out)
            later.append(loaded)
            if _same_handle(destroyed.handle, loaded.handle):
                raise CheckFailure(
                    Category.CONTRACT_VIOLATION,
                    f"init of a {label} handle of the same blob, after the first was destroyed, returned the destroyed "
                    f"handle again ({destroyed.handle!r}): a caller still holding the old handle now runs the new one. "
                    "Return a new handle object from every init; never recycle a destroyed one.",
                )
        args = [EValue(np.array(a)) for a in program.inputs] + [EValue(np.zeros_like(e)) for e in expected]
        _expect_error(
            lambda: backend.runtime.execute(_context(), destroyed.handle, args),
            (Error.DelegateInvalidHandle,),
            "execute of a destroyed handle after two later inits of the same blob",
        )
        for label, loaded in zip(("second", "third"), later):
            ran = driver.execute(loaded, program.inputs, expected)
            support.compare_outputs(ran.outputs, expected, what=f"the {label} handle, initialized after the first was destroyed")
    finally:
        for loaded in later:
            driver.destroy(loaded)
    result.stats(later_inits=len(later))
