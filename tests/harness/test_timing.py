"""The performance checks' timed regions wait for the backend's device (conformance/checks/_timing.py).

A recording device ("recording", through the synchronizer hook ``_timing.SYNCHRONIZERS``) and a
recording clock given to a real pytest-benchmark fixture show where each synchronization falls:
after the untimed setup and before the clock starts, and after the timed call and before the clock
stops. On the CPU nothing is added. The PERF checks themselves pass the backend's device, and each
result names the device its timings are of.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from conformance.checks import _support as support
from conformance.checks import _timing
from conformance.checks import test_performance as perf
from conformance.plugin import ResultRecorder

DEVICE = "recording:1"


@pytest.fixture
def events(monkeypatch):
    """What happened, in order: setup, target, teardown, each reading of the clock, each synchronize."""
    seen: list = []
    monkeypatch.setitem(_timing.SYNCHRONIZERS, "recording", lambda device: seen.append(f"sync {device}"))
    return seen


def _benchmark(events: list, *, min_rounds: int = 3):
    """A pytest-benchmark fixture, enabled, whose clock records each reading."""
    from pytest_benchmark.fixture import BenchmarkFixture

    def clock() -> float:
        events.append("clock")
        return float(len(events))

    quiet = SimpleNamespace(debug=lambda *a, **k: None, info=lambda *a, **k: None, warning=lambda *a, **k: None)
    return BenchmarkFixture(
        SimpleNamespace(name="timed", nodeid="timed"), disable_gc=False, timer=SimpleNamespace(target=clock),
        min_rounds=min_rounds, min_time=0.0, max_time=1.0, precision=None, confidence=None, warmup=False,
        warmup_iterations=0, calibration_precision=10, add_stats=lambda stats: None, logger=quiet,
        warner=lambda *a, **k: None, disabled=False, cprofile=False, cprofile_loops=None, cprofile_dump=None,
    )  # fmt: skip


def test_each_timed_region_starts_and_stops_with_the_device_synchronized(events):
    timings = _timing.time_rounds(
        _benchmark(events), lambda: events.append("target"), rounds=3, warmup_rounds=1,
        setup=lambda: events.append("setup"), teardown=lambda: events.append("teardown"), device=DEVICE,
    )  # fmt: skip
    region = ["setup", f"sync {DEVICE}", "clock", "target", f"sync {DEVICE}", "clock", "teardown"]
    assert events == region * 4  # the warm-up round and the three timed ones
    assert timings["rounds"] == 3


def test_on_the_cpu_nothing_is_added(events):
    _timing.time_rounds(_benchmark(events), lambda: events.append("target"), rounds=2, warmup_rounds=0, device="cpu")
    assert events == ["clock", "target", "clock"] * 2


def test_a_device_nothing_can_synchronize_is_refused_before_timing():
    with pytest.raises(ValueError, match="torch.nosuchdevice has no synchronize"):
        _timing.synchronizer("nosuchdevice:0")
    assert _timing.synchronizer("cpu") is None
    assert callable(_timing.synchronizer("cuda"))  # torch.cuda.synchronize, not called here


@pytest.mark.parametrize(("runner", "device"), [("backend", DEVICE), ("reference", "cpu")])
def test_the_execute_check_times_the_backend_on_its_device(events, runner, device):
    """PERF-003 of a backend on the recording device: the backend's executes are synchronized, the
    reference's (NumPy, on the CPU) are not; each result says which device its timings are of."""
    backend = dataclasses.replace(support.reference_backend(), device=DEVICE)
    result = ResultRecorder("PERF-003")
    benchmark = _benchmark(events)
    perf.test_PERF_003_execute_latency(backend, result, benchmark, "chain", runner)
    rounds = perf._rounds(benchmark)
    assert result.record.timings["rounds"] == rounds
    regions = 1 + rounds  # the warm-up round and the timed ones
    assert events.count(f"sync {DEVICE}") == (2 * regions if runner == "backend" else 0)
    assert events.count("clock") == 2 * regions
    assert result.record.measurements == {"device": device}


def test_the_report_says_which_device_the_timings_are_of():
    """report.md and report.html name each runner's device where one is not the CPU; a CPU run's
    performance section reads as before."""
    from conformance.report import html, markdown
    from tests.reports.test_html import make_report

    def on_cuda(r: dict) -> dict:
        if r["clause"].startswith("PERF-"):
            r["measurements"] = {"device": "cpu" if r["runner"] == "reference" else "cuda:0"}
        return r

    report = make_report("gpu-backend", on_cuda)
    text = "Timed backend on cuda:0; reference on cpu; eager on cuda:0."
    assert markdown.performance_devices(report).startswith(text)
    assert text in markdown.render(report) and text in html.render(report)
    cpu = make_report("cpu-backend", lambda r: {**r, "measurements": {"device": "cpu"}} if r["clause"].startswith("PERF-") else r)
    assert markdown.performance_devices(cpu) is None and "Timed " not in markdown.render(cpu)
