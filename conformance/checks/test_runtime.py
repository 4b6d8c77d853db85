"""RT: init / execute / destroy, and everything a runtime may throw at them."""

from __future__ import annotations

import threading

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.api import Error, EValue, MemoryAllocator
from conformance.driver import describe_exception
from conformance.results import Category, CheckFailure

from . import _leaks as leaks
from . import _runtime_errors as runtime_errors
from . import _support as support

LEAK_CYCLES = 1000
"""init/destroy cycles RT-016 measures (fewer when init is slow: _leaks.measure_growth)."""
LEAK_EXECUTES = 800
"""executes RT-018 measures on one handle (fewer when execute is slow)."""
LEAK_WARMUP = 64


def _other_inputs(program, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(a.shape).astype(a.dtype) for a in program.inputs)


def _expected(program, inputs, like):
    return support.reference_outputs(program.exported, inputs, like)


def test_RT_001_is_available(backend, result):
    try:
        available = backend.runtime.is_available()
    except Exception as exc:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"is_available raised {describe_exception(exc)}") from exc
    if available is not True:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"is_available returned {available!r} on this machine")


def test_RT_002_round_trip(backend, result):
    driver, program, out, expected = support.prepared(backend, result)
    loaded, ran = driver.execute_once(out, program.inputs, expected)
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
    driver, program, out, expected = support.prepared(backend, result)
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
    driver, program, out, expected = support.prepared(backend, result)
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
    driver, program, out, expected = support.prepared(backend, result)
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
    driver, program, out, expected = support.prepared(backend, result)
    loaded = driver.init(out)
    driver.destroy(loaded)
    args = [EValue(np.array(a)) for a in program.inputs] + [EValue(np.zeros_like(e)) for e in expected]
    runtime_errors.expect_error(
        lambda: backend.runtime.execute(runtime_errors.context(), loaded.handle, args),
        (Error.DelegateInvalidHandle,),
        "execute after destroy",
    )


def test_RT_007_foreign_handle(backend, result):
    driver, program, out, expected = support.prepared(backend, result)
    for foreign in (None, object(), 12345, "handle"):
        args = [EValue(np.array(a)) for a in program.inputs] + [EValue(np.zeros_like(e)) for e in expected]
        runtime_errors.expect_error(
            lambda: backend.runtime.execute(runtime_errors.context(), foreign, args),
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
    driver, program, out, expected = support.prepared(backend, result)
    inputs = [EValue(np.array(a)) for a in program.inputs]
    outputs = [EValue(np.zeros_like(e)) for e in expected]

    def check(loaded):
        for label, args in (
            ("no arguments", []),
            ("one input missing", inputs[1:] + outputs),
            ("outputs missing", inputs),
            ("one extra argument", inputs + outputs + [EValue(np.zeros(3, np.float32))]),
        ):
            runtime_errors.expect_error(
                lambda: backend.runtime.execute(runtime_errors.context(), loaded.handle, list(args)),
                (Error.InvalidArgument,),
                f"execute with {label}",
            )

    _with_handle(driver, out, check)


def _refuses_each(backend, result, make_probes, describe) -> list:
    """Execute with input 0 replaced by each of ``make_probes(input 0)``'s arrays: every one must be
    InvalidArgument. ``describe(label, wrong, first)`` names a probe in the failure. Returns the probes."""
    driver, program, out, expected = support.prepared(backend, result)
    first = program.inputs[0]
    probes = make_probes(first)
    outputs = [EValue(np.zeros_like(e)) for e in expected]

    def check(loaded):
        for label, wrong in probes:
            args = [EValue(wrong)] + [EValue(np.array(a)) for a in program.inputs[1:]] + outputs
            runtime_errors.expect_error(lambda: backend.runtime.execute(runtime_errors.context(), loaded.handle, args), (Error.InvalidArgument,),
                          describe(label, wrong, first))

    _with_handle(driver, out, check)
    return probes


def test_RT_009_wrong_dtype(backend, result):
    probes = _refuses_each(backend, result, runtime_errors.dtype_probes, lambda label, wrong, first: f"execute with input 0 {list(first.shape)} as {label}")
    result.stats(probes=[label for label, _ in probes])


def test_RT_010_wrong_shape(backend, result):
    probes = _refuses_each(
        backend, result, runtime_errors.shape_probes,
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
    driver, program, out, expected = support.prepared(backend, result)
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
    driver, program, out, expected = support.prepared(backend, result)
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
    driver, program, out, expected = support.prepared(backend, result)
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
        runtime_errors.expect_init_error(driver, out, bytes(forged), f"{label} format version {version}")


def test_RT_014_allocator_exhaustion(backend, result):
    driver, program, out, expected = support.prepared(backend, result)
    outcomes = {}
    try:
        loaded = driver.init(out, runtime_allocator=MemoryAllocator(0))
    except CheckFailure as exc:
        outcomes["init"] = runtime_errors.allocation_failure(exc, "init with an exhausted runtime allocator")
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
        outcomes["execute"] = runtime_errors.allocation_failure(exc, "execute with an exhausted temp allocator")
    finally:
        driver.destroy(loaded)
    result.stats(**outcomes)


def test_RT_015_concurrent_handles(backend, result):
    driver, program, out, expected = support.prepared(backend, result)
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
    driver, program, out, expected = support.prepared(backend, result)
    before = leaks.process_resources()
    threads_before = set(threading.enumerate())
    growth = leaks.measure_growth(
        lambda: driver.destroy(driver.init(out)), what="init/destroy cycle", ops=LEAK_CYCLES, warmup=LEAK_WARMUP
    )
    leaks.judge_threads_left(result, threads_before)
    leaks.judge_resources(result, before, leaks.process_resources(), growth.ops + growth.warmup, "init/destroy cycle")
    leaks.judge_growth(
        result, growth,
        "Something init allocates outlives destroy: free in destroy everything init allocated "
        "(buffers from malloc or a native library included), and keep no reference to a handle's data after it.",
    )


def test_RT_017_execute_leaves_inputs_alone(backend, result):
    driver, program, out, expected = support.prepared(backend, result)
    inputs = [np.array(a) for a in program.inputs]
    args = [EValue(a) for a in inputs] + [EValue(np.zeros_like(e)) for e in expected]

    def check(loaded):
        driver.execute(loaded, inputs, expected, args=args)
        for i, (before, after) in enumerate(zip(program.inputs, inputs)):
            if before.tobytes() != after.tobytes():
                raise CheckFailure(Category.CONTRACT_VIOLATION, f"execute modified input {i}")

    _with_handle(driver, out, check)


def test_RT_018_no_leak_over_executes(backend, result):
    driver, program, out, expected = support.prepared(backend, result)
    loaded = driver.init(out)
    try:
        growth = leaks.measure_growth(
            lambda: driver.execute(loaded, program.inputs, expected), what="execute", ops=LEAK_EXECUTES, warmup=LEAK_WARMUP
        )
    finally:
        driver.destroy(loaded)
    leaks.judge_growth(
        result, growth,
        "Something execute allocates is never released: free per-execute buffers before execute returns "
        "(or reuse one buffer per handle), and keep no per-execute history on the handle or the runtime.",
    )


def _same_handle(a, b) -> bool:
    """``b`` is the very handle ``a`` (for plain-value handles such as ints: an equal value)."""
    return a is b or (type(a) in (int, str, bytes) and type(b) is type(a) and a == b)


def test_RT_019_destroyed_handle_stays_invalid(backend, result):
    driver, program, out, expected = support.prepared(backend, result)
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
        runtime_errors.expect_error(
            lambda: backend.runtime.execute(runtime_errors.context(), destroyed.handle, args),
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
