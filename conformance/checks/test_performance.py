"""PERF: latency of preprocess, init and execute on the contract programs, with pytest-benchmark.

Measured against the reference and PyTorch eager in the same run and reported as
ratios. Never part of the verdict: ``conformance diff`` gates regressions. Timing
under pytest-xdist is unreliable, so the CLI runs this module in its own session
without workers; under xdist pytest-benchmark disables itself and these checks
report NOT_APPLICABLE.

A backend on an accelerator (``BackendUnderTest.device``) is timed with the device synchronized
before each timed region starts and before it stops (``_timing``); eager runs on the same device,
so "vs eager" compares like with like, and the reference (NumPy) on the CPU. Each result records
the device its timings are of (``measurements.device``).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from conformance.driver import Driver

from . import _support as support
from . import _timing

PROGRAMS = list(support.CONTRACT_PROGRAMS)


def _per_program(stage: str, runners: tuple[str, ...] = ("backend", "reference")):
    """The marks of a PERF check: its stage, and one test per contract program and runner (the program's
    id first, as stacked parametrize marks give it)."""

    def mark(test):
        each = pytest.mark.parametrize("runner", list(runners))(pytest.mark.parametrize("program", PROGRAMS)(test))
        return pytest.mark.stage(stage)(each)

    return mark


def _runner(backend, runner: str):
    return backend if runner == "backend" else support.reference_backend()


def _device(backend, runner: str) -> str:
    """The device a runner computes on: the backend's for the backend and eager, the CPU for the reference."""
    return _timing.CPU if runner == "reference" else backend.device


def _measure(benchmark, result, stage, target, setup=None, teardown=None, device=_timing.CPU):
    result.set(stage=stage)
    if benchmark.disabled:
        result.not_applicable("pytest-benchmark is disabled in this session (xdist or --benchmark-disable)")
    timings = _timing.time_rounds(benchmark, target, setup=setup, teardown=teardown, rounds=_rounds(benchmark), device=device)
    result.set(timings=timings, measurements={"device": device})


def _rounds(benchmark) -> int:
    return max(5, int(getattr(benchmark, "_min_rounds", 15)))


def _accepting(backend, runner, program_name, result):
    from conformance.results import Category, CheckFailure

    program = support.contract_program(program_name)
    who = _runner(backend, runner)
    driver = Driver(who)
    try:
        out, _ = driver.preprocess(program.fresh())
    except CheckFailure as exc:
        if exc.category is Category.NOT_SUPPORTED:
            result.not_supported(f"{who.name} refuses {program_name}")
        raise
    return driver, program, out


@_per_program("preprocess")
def test_PERF_001_preprocess_latency(backend, result, benchmark, program, runner):
    driver, contract, _ = _accepting(backend, runner, program, result)
    copies = []
    _measure(benchmark, result, "preprocess", lambda: driver.preprocess(copies.pop()), setup=lambda: copies.append(contract.fresh()),
             device=_device(backend, runner))


@_per_program("init")
def test_PERF_002_init_latency(backend, result, benchmark, program, runner):
    driver, _, out = _accepting(backend, runner, program, result)
    handles = []
    _measure(
        benchmark,
        result,
        "init",
        lambda: handles.append(driver.init(out)),
        teardown=lambda: driver.destroy(handles.pop()),
        device=_device(backend, runner),
    )


@_per_program("execute", ("backend", "reference", "eager"))
def test_PERF_003_execute_latency(backend, result, benchmark, program, runner):
    import torch

    expected = list(support.expected_for(program))
    device = _device(backend, runner)
    if runner == "eager":
        contract = support.contract_program(program)
        module = contract.module if device == _timing.CPU else copy.deepcopy(contract.module).to(device)
        inputs = [torch.from_numpy(np.array(a)).to(device) for a in contract.inputs]

        def run_eager():
            with torch.no_grad():
                module(*inputs)

        _measure(benchmark, result, "execute", run_eager, device=device)
        return
    driver, contract, out = _accepting(backend, runner, program, result)
    loaded = driver.init(out)
    try:
        _measure(benchmark, result, "execute", lambda: driver.execute(loaded, contract.inputs, expected), device=device)
    finally:
        driver.destroy(loaded)
