"""The performance checks' timed regions, synchronized with the device a backend computes on.

A launch on an accelerator returns before the device has done the work: a region timed without
waiting measures the launch, and charges the queued work to whatever waits for the device next
(the following region, or the copy of the outputs to the host). So where a backend computes on a
device other than the CPU (``BackendUnderTest.device``), every timed region waits for that device
before it starts (its setup ends with a synchronize, outside the clock) and before it stops (the
timed call ends with one, inside it): ``torch.cuda.synchronize(device)`` on CUDA. On the CPU a call
has done its work when it returns, and nothing is added.

pytest-benchmark's ``pedantic`` calls ``setup`` before it reads the clock and stops the clock when
the target returns (``BenchmarkFixture._make_runner``), which is what puts the two synchronizations
where they belong; tests/harness/test_timing.py holds it to that with a recording clock.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

CPU = "cpu"


def _torch_synchronize(kind: str) -> Callable[[str], None] | None:
    """``torch.<kind>.synchronize`` (cuda, xpu, mps, ...) where torch has one."""
    import torch

    synchronize = getattr(getattr(torch, kind, None), "synchronize", None)
    if synchronize is None:
        return None
    if kind == "mps":  # torch.mps.synchronize() takes no device: there is one
        return lambda device: synchronize()
    return synchronize


SYNCHRONIZERS: MutableMapping[str, Callable[[str], None]] = {}
"""Device type -> what waits for a device of that type (called with the device's name), for the
device types torch has no ``torch.<type>.synchronize`` for (a backend's own accelerator, or a test's
recording one). Looked up before torch's."""


def synchronizer(device: str) -> Callable[[], None] | None:
    """What waits for ``device``'s queued work to finish: None on the CPU. A ValueError for a device
    type nothing can synchronize, before anything is timed: its timings would mean nothing."""
    kind = device.partition(":")[0]
    if kind == CPU:
        return None
    synchronize = SYNCHRONIZERS.get(kind) or _torch_synchronize(kind)
    if synchronize is None:
        raise ValueError(
            f"device {device!r}: torch.{kind} has no synchronize() and conformance.checks._timing.SYNCHRONIZERS "
            f"names none for {kind!r}, so its timings cannot wait for the device"
        )

    def wait() -> None:
        synchronize(device)

    return wait


def synchronized(
    target: Callable[[], Any], setup: Callable[[], Any] | None = None, synchronize: Callable[[], None] | None = None
) -> tuple[Callable[[], Any], Callable[[], Any] | None]:
    """(target, setup) for ``benchmark.pedantic`` that wait for the device: setup (untimed) ends with
    ``synchronize``, so the clock starts on an idle device; the target (timed) ends with it, so the
    clock stops when its work is done. Unchanged where ``synchronize`` is None (the CPU)."""
    if synchronize is None:
        return target, setup

    def timed() -> Any:
        value = target()
        synchronize()
        return value

    def before() -> Any:
        arguments = setup() if setup is not None else None
        synchronize()
        return arguments

    return timed, before


def time_rounds(
    benchmark,
    target: Callable[[], Any],
    *,
    rounds: int,
    setup: Callable[[], Any] | None = None,
    teardown: Callable[[], Any] | None = None,
    device: str = CPU,
    warmup_rounds: int = 1,
) -> dict[str, float]:
    """Time ``target`` with pytest-benchmark's ``pedantic`` on ``device`` (synchronized off the CPU):
    median, min, mean and standard deviation in milliseconds, and the rounds."""
    timed, before = synchronized(target, setup, synchronizer(device))
    benchmark.pedantic(timed, setup=before, teardown=teardown, rounds=rounds, warmup_rounds=warmup_rounds)
    stats = benchmark.stats.stats
    return {
        "median_ms": stats.median * 1e3,
        "min_ms": stats.min * 1e3,
        "mean_ms": stats.mean * 1e3,
        "stddev_ms": stats.stddev * 1e3,
        "rounds": stats.rounds,
    }
