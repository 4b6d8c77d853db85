"""Whether a backend leaks (RT-016, RT-018): memory measured over repeated operations (the Python
heap, native memory, the resident set) and held to a budget per operation, and the files and
threads left behind once every handle is destroyed."""

from __future__ import annotations

import ctypes
import functools
import gc
import os
import threading
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conformance.results import Category, CheckFailure
from conformance.run import supervision

GROWTH_SEGMENTS = 4
"""The second half of a measurement is cut into this many segments, and memory counts as
leaking only if it grew faster than the budget in every one of them: a one-off allocation
(a cache filled once, a pool or a table grown once) lands in one segment and is never
mistaken for a leak, while a leak grows in all of them."""
RUNAWAY_BYTES = 512 << 20
"""Growth (since the first operation) that stops a measurement at once: no noise is this large,
and going on could exhaust the machine (a backend leaking 50 MB per init)."""
TRACED_SLOWDOWN = 3.0
"""How much slower an operation runs under tracemalloc (measured: 3x for the reference's execute)."""

MEASURES = {
    "python_heap": "the Python heap (tracemalloc)",
    "native_heap": "native memory in use (malloc's bytes in use, glibc mallinfo2)",
    "rss": "the resident set (/proc/self/statm)",
}


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")
    ]


@functools.cache
def _mallinfo2() -> Callable[[], _MallInfo2] | None:
    """glibc's mallinfo2 (2.33 and later), or None where there is none (musl, macOS)."""
    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    fn.argtypes = []
    return fn


class MemoryMeter:
    """Reads the process's memory: the Python heap (while tracemalloc traces), the bytes malloc
    has handed out and not had back (arenas and mmapped chunks: counted whether or not the
    memory was touched) and the resident set (counts what malloc does not see: direct mmaps,
    other allocators, once touched). Each read costs about a microsecond."""

    def __init__(self):
        self._mallinfo2 = _mallinfo2()
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        try:
            self._statm = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:
            self._statm = None

    def close(self) -> None:
        if self._statm is not None:
            os.close(self._statm)
            self._statm = None

    @property
    def measures(self) -> list[str]:
        return ["python_heap"] + (["native_heap"] if self._mallinfo2 else []) + (["rss"] if self._statm is not None else [])

    def native(self) -> dict[str, int]:
        out = {}
        if self._mallinfo2 is not None:
            info = self._mallinfo2()
            out["native_heap"] = info.uordblks + info.hblkhd
        if self._statm is not None:
            out["rss"] = int(os.pread(self._statm, 128, 0).split()[1]) * self._page
        return out

    def sample(self) -> dict[str, int]:
        """Every measure, after a collection (cyclic garbage is not a leak)."""
        gc.collect()
        out = {"python_heap": tracemalloc.get_traced_memory()[0]} if tracemalloc.is_tracing() else {}
        out.update(self.native())
        return out


@dataclass
class Growth:
    """How memory grew over repeated operations (one execute, one init/destroy cycle)."""

    what: str
    warmup: int
    ops: int
    """Operations measured after the warm-up (the last half of them is judged)."""
    rates: dict[str, list[float]]
    """Per measure: bytes per operation in each segment of the second half."""
    half: dict[str, int]
    """Per measure: bytes grown over the second half."""
    seconds: float
    runaway: tuple[str, int, int] | None = None
    """(measure, bytes, operations) when a runaway growth stopped the measurement."""

    def steady(self, measure: str) -> float:
        """The rate memory grew at in every segment (the smallest segment rate)."""
        return min(self.rates[measure])

    def measurements(self) -> dict[str, Any]:
        out: dict[str, Any] = {"warmup": self.warmup, "ops": self.ops, "seconds": round(self.seconds, 3)}
        if self.runaway:
            measure, grown, count = self.runaway
            out["runaway"] = {"measure": measure, "bytes": grown, f"{self.unit}s": count}
            return out
        for measure, rates in self.rates.items():
            out[f"{measure}_bytes_per_{self.unit}"] = [round(r, 1) for r in rates]
            out[f"{measure}_growth_second_half_bytes"] = self.half[measure]
        return out

    @property
    def unit(self) -> str:
        return self.what.replace("/", "_").replace(" ", "_")


class _Runaway(Exception):
    pass


def measure_growth(step: Callable[[], Any], *, what: str, ops: int, warmup: int, min_ops: int = 2 * 2 * GROWTH_SEGMENTS,
                   time_budget: float = 6.0) -> Growth:
    """Run ``step`` up to ``warmup`` times, then up to ``ops`` times measuring memory.

    Both shrink with a slow ``step``, so a check ends in about ``time_budget`` seconds whatever
    the backend's speed (an init of 40 ms once took RT-016 past its timeout): the warm-up to
    half the budget (at least 4 operations), the measured operations to what the budget
    affords at the speed a few operations *under tracemalloc* show (not below ``min_ops``).
    Samples are taken after a garbage collection, with everything that existed before the
    measurement frozen out of the collector (``gc.freeze``: a full collection then costs
    microseconds, not 0.1 s). Growth past ``RUNAWAY_BYTES`` stops the measurement at once.
    """
    meter = MemoryMeter()
    per = 2 * GROWTH_SEGMENTS
    done = 0
    start_time = time.perf_counter()
    started_tracing = False
    frozen = False
    try:
        t0 = time.perf_counter()
        step()
        first = time.perf_counter() - t0
        done = 1
        base = meter.native()

        def guarded(n: int) -> None:
            nonlocal done
            for _ in range(n):
                step()
                done += 1
                for measure, value in meter.native().items():
                    if value - base[measure] > RUNAWAY_BYTES:
                        raise _Runaway(measure, value - base[measure], done - 1)  # operations since ``base``

        warm = min(max(warmup - 1, 0), max(int(time_budget / 2 / max(first, 1e-9)), 4))
        t0 = time.perf_counter()
        guarded(warm)
        per_op = (time.perf_counter() - t0) / max(warm, 1)
        affordable = int(time_budget / max(per_op * TRACED_SLOWDOWN, 1e-9))
        if affordable < ops:  # slow: how slow under tracemalloc, from a few traced operations
            if not tracemalloc.is_tracing():
                tracemalloc.start()
                started_tracing = True
            t0 = time.perf_counter()
            guarded(2)
            affordable = int(time_budget / max((time.perf_counter() - t0) / 2, 1e-9))
        ops = max(min(ops, affordable), min_ops) // per * per
        gc.collect()
        gc.freeze()
        frozen = True
        if not tracemalloc.is_tracing():
            tracemalloc.start()
            started_tracing = True
        measure_start = time.perf_counter()
        guarded(ops // 2)
        samples = [meter.sample()]
        segment = ops // per
        for _ in range(GROWTH_SEGMENTS):
            guarded(segment)
            samples.append(meter.sample())
        seconds = time.perf_counter() - measure_start
    except _Runaway as runaway:
        measure, grown, count = runaway.args
        return Growth(what, min(warmup, count), count, {measure: [grown / count]}, {measure: grown},
                      time.perf_counter() - start_time, runaway=(measure, grown, count))
    finally:
        if started_tracing:
            tracemalloc.stop()
        if frozen:
            supervision.thaw()
        meter.close()
    rates = {m: [(b[m] - a[m]) / segment for a, b in zip(samples, samples[1:])] for m in MEASURES if m in samples[0]}
    half = {m: samples[-1][m] - samples[0][m] for m in rates}
    return Growth(what, warm + 1, ops, rates, half, seconds)


def _bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} bytes"


def check_growth(growth: Growth, budgets: dict[str, int], *, advice: str) -> None:
    """CONTRACT_VIOLATION when any measure grew faster than its budget per operation, steadily."""
    unit = growth.what
    if growth.runaway:
        measure, grown, count = growth.runaway
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"{MEASURES[measure]} grew by {_bytes(grown)} within {count} {unit}s ({_bytes(grown / count)} per {unit}), "
            f"so the check stopped there (budget: {budgets.get(measure, 0)} bytes per {unit}). {advice}",
        )
    over = []
    for measure, budget in budgets.items():
        if measure in growth.rates and growth.steady(measure) > budget:
            rates = growth.rates[measure]
            over.append(
                f"{MEASURES[measure]} grew by {_bytes(growth.half[measure] / (growth.ops / 2))} per {unit}, steadily "
                f"({_bytes(min(rates))} to {_bytes(max(rates))} per {unit} in each of the {len(rates)} segments of the "
                f"last {growth.ops // 2} of {growth.ops} {unit}s, {_bytes(growth.half[measure])} in all; "
                f"budget {budget} bytes per {unit})"
            )
    if over:
        raise CheckFailure(Category.CONTRACT_VIOLATION, "; ".join(over) + f". {advice}")


LEAK_BUDGETS = {"python_heap": 256, "native_heap": 1024, "rss": 4096}
"""Bytes per operation each measure may grow by, steadily (in every segment of the measurement's
second half: GROWTH_SEGMENTS), before RT-016 and RT-018 call it a leak. Measured on the
four contract programs (three runs each): the reference grows steadily by at most 7 bytes per
execute or cycle on the heap and 11 in native memory (single segments up to 40 and 190 bytes:
a sample's own allocations, malloc's bookkeeping) and not at all in the resident set (single
segments up to 524 bytes); ExecuTorch's runtimes by under 25 bytes on mlp.
Native memory gets more room than the heap because tracemalloc's own tables and malloc's
bookkeeping move it; the resident set moves by whole pages. A leak of a 64 KiB buffer per
execute is 64 times the native budget."""
RESOURCE_SLACK = 8
"""Files and threads a backend may open or start once, whatever the number of cycles."""


def process_resources() -> dict[str, int]:
    """Open file descriptors and threads (native ones included: /proc/self/task) of this process."""
    counts = {"threads": threading.active_count()}
    for name, path in (("file descriptors", "/proc/self/fd"), ("native threads", "/proc/self/task")):
        try:
            counts[name] = len(os.listdir(path))
        except OSError:  # not Linux
            pass
    return counts


def judge_resources(result, before: dict[str, int], after: dict[str, int], cycles: int, unit: str) -> None:
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


def judge_growth(result, growth, advice: str) -> None:
    """RT-016 and RT-018: record the measurements and the budgets, then hold the growth to them."""
    result.stats(budget_bytes_per_op=LEAK_BUDGETS)
    result.set(measurements=growth.measurements())
    check_growth(growth, LEAK_BUDGETS, advice=advice)


def judge_threads_left(result, before: set[threading.Thread]) -> None:
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
