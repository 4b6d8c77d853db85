"""What the check modules share: contract programs, expected outputs, the oracle cross-check.

Contract programs are small fixed models (static shapes) the PRE, RT, DBG and
PERF clauses run. A backend runs the first of them it accepts, so a backend that
only does elementwise ops is still checked against the whole contract.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import math
import os
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from conformance import oracle
from conformance.api import BackendUnderTest
from conformance.api.tensors import to_numpy, to_torch
from conformance.driver import Driver
from conformance.programs import ModuleProgram, ProgramCache, module_program
from conformance.results import Category, CheckFailure
from conformance.run import supervision

ContractProgram = ModuleProgram
"""A contract program: a small fixed model with its inputs (``conformance.programs.ModuleProgram``)."""


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _chain():
    import torch

    class Chain(torch.nn.Module):
        def forward(self, x, y):
            return torch.relu(x * y + x) - y

    r = _rng(1)
    return Chain(), (r.standard_normal((4, 8), np.float32), r.standard_normal((4, 8), np.float32))


def _mlp():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    return model, (_rng(2).standard_normal((4, 16), np.float32),)


def _conv_block():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2)
    ).eval()
    with torch.no_grad():
        model[1].running_mean.uniform_(-0.5, 0.5)
        model[1].running_var.uniform_(0.5, 1.5)
    return model, (_rng(3).standard_normal((1, 3, 16, 16), np.float32),)


def _attention():
    import torch

    class Attention(torch.nn.Module):
        def __init__(self, d: int = 16):
            super().__init__()
            self.q, self.k, self.v = (torch.nn.Linear(d, d) for _ in range(3))
            self.scale = 1.0 / math.sqrt(d)

        def forward(self, x):
            scores = self.q(x) @ self.k(x).transpose(-1, -2) * self.scale
            return torch.softmax(scores, dim=-1) @ self.v(x)

    torch.manual_seed(0)
    return Attention().eval(), (_rng(4).standard_normal((1, 8, 16), np.float32),)


CONTRACT_PROGRAMS: dict[str, Callable[[], tuple[Any, tuple]]] = {
    "mlp": _mlp,
    "chain": _chain,
    "conv_block": _conv_block,
    "attention": _attention,
}
"""The fixed program set, in the order a backend is offered them (weights first, so
the RT clauses exercise named data whenever the backend can)."""


def _index_select_failure():
    import torch

    class Gather(torch.nn.Module):
        def forward(self, x, index):
            return torch.relu(x).index_select(0, index) + 1.0

    r = _rng(5)
    return Gather(), (r.standard_normal((5, 4), np.float32), np.array([0, 4, 2], np.int64))


def _digamma_probe():
    import torch

    class Digamma(torch.nn.Module):
        def forward(self, x):
            return torch.ops.aten.digamma.default(x)

    return Digamma(), (np.abs(_rng(6).standard_normal((4, 4))).astype(np.float32) + 0.5,)


def _elementwise_add():
    import torch

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    r = _rng(7)
    return Add(), (r.standard_normal((4, 8), np.float32), r.standard_normal((4, 8), np.float32))


FALLBACK_PROGRAMS: dict[str, Callable[[], tuple[Any, tuple]]] = {"elementwise_add": _elementwise_add}
"""Offered by ``runnable`` only after a backend refused every contract program, so the runtime
clauses still observe a backend that takes a single elementwise op (TorchScript's
backend_with_compiler_demo lowers nothing but aten::add/sub). Not part of the fixed set: the
PRE-003/005/007 loops and PERF never see it."""

SPECIAL_PROGRAMS = {"index_failure": _index_select_failure, "unsupported_probe": _digamma_probe, **FALLBACK_PROGRAMS}
FAILING_INDEX = np.array([0, 5000, 2], np.int64)
"""Makes index_failure's index_select read out of range: its second row index does not exist."""
PROBE_OP = "aten.digamma.default"
"""An operator outside the spec: no backend is expected to run it, so it probes PRE-006."""


@functools.cache
def contract_program(name: str, cache: ProgramCache | None = None) -> ContractProgram:
    builder = CONTRACT_PROGRAMS.get(name) or SPECIAL_PROGRAMS[name]
    keep = (PROBE_OP,) if name == "unsupported_probe" else ()
    return module_program("contract", name, builder, cache=cache, keep=keep)


# ---------------------------------------------------------------------------------------------
# Expected outputs


@functools.lru_cache(maxsize=1)
def reference_backend() -> BackendUnderTest:
    from reference_backend import backend_under_test

    return backend_under_test()


def eager_outputs(exported, inputs) -> list[np.ndarray]:
    import torch

    with torch.no_grad():
        out = exported.module()(*[to_torch(np.array(a), resizable=True) for a in inputs])  # bfloat16 through ml_dtypes
    return [to_numpy(o) for o in (out if isinstance(out, (list, tuple)) else (out,))]


def reference_outputs(exported, inputs, like: list[np.ndarray]) -> list[np.ndarray]:
    """The reference backend's outputs; raises ORACLE_DISAGREEMENT when it cannot produce them."""
    try:
        return Driver(reference_backend()).run(exported, inputs, like).outputs
    except CheckFailure as exc:
        raise CheckFailure(
            Category.ORACLE_DISAGREEMENT, f"the reference backend failed on this program: {exc.message}"
        ) from exc


CONTRACT_TOLERANCE = oracle.Tolerance(atol=1e-4, rtol=1e-4, reason="contract programs chain several float32 ops", relative_floor=True)


@functools.cache
def expected_for(name: str) -> tuple[np.ndarray, ...]:
    """The reference's outputs of a contract program, checked against eager first."""
    program = contract_program(name)
    eager = eager_outputs(program.exported, program.inputs)
    ref = reference_outputs(program.exported, program.inputs, eager)
    for i, (r, e) in enumerate(zip(ref, eager)):
        cmp = oracle.compare(r, e, CONTRACT_TOLERANCE)
        if not cmp.ok:
            raise CheckFailure(
                Category.ORACLE_DISAGREEMENT, f"reference and eager disagree on {name} output {i}: {cmp.message}"
            )
    return tuple(ref)


def compare_outputs(actual, expected, *, what: str, backend: BackendUnderTest | None = None, program: ContractProgram | None = None) -> dict:
    """Compare backend outputs with expected ones; MISMATCH on failure. Returns the worst stats.

    ``backend`` and ``program`` (run on its own inputs): a MISMATCH also names the first op of the
    program the backend gets wrong (``conformance.localize``)."""
    if len(actual) != len(expected):
        raise CheckFailure(Category.MISMATCH, f"{what}: {len(actual)} outputs, expected {len(expected)}")
    worst: dict = {}
    for i, (a, e) in enumerate(zip(actual, expected)):
        cmp = oracle.compare(np.asarray(a), e, CONTRACT_TOLERANCE)
        if not cmp.ok:
            message, stats = f"{what}: output {i}: {cmp.message}", cmp.stats()
            if backend is not None and program is not None:
                from conformance import localize

                try:
                    found = localize.localize(backend, program.fresh(), program.inputs, lambda depth: CONTRACT_TOLERANCE)
                except Exception as exc:  # noqa: BLE001 - the verdict stands without it
                    message += f"; localization failed: {type(exc).__name__}: {exc}"
                else:
                    if found is not None:
                        message, stats = f"{message}; {found.describe()}", {**stats, "localization": found.stats()}
            raise CheckFailure(Category.MISMATCH, message, stats=stats)
        if not worst or cmp.max_abs > worst.get("max_abs", 0):
            worst = cmp.stats()
    return worst


_RUNNABLE: dict[str, str] = {}


def runnable(backend: BackendUnderTest) -> ContractProgram:
    """The first contract program this backend preprocesses; the RT clauses run it."""
    if backend.name in _RUNNABLE:
        return contract_program(_RUNNABLE[backend.name])
    driver = Driver(backend)
    refusals, failures = [], []
    for name in (*CONTRACT_PROGRAMS, *FALLBACK_PROGRAMS):
        program = contract_program(name)
        try:
            driver.preprocess(program.fresh())
        except CheckFailure as exc:
            if exc.category is Category.CONTRACT_VIOLATION:
                # It took the program and returned something the contract forbids (processed_bytes
                # a str, ...): that is the failure, whatever the other programs would do.
                raise CheckFailure(exc.category, f"{exc.message} (preprocess of the {name} program)", stage=exc.stage) from exc
            (refusals if exc.category is Category.NOT_SUPPORTED else failures).append(f"{name}: {exc.message}")
            continue
        _RUNNABLE[backend.name] = name
        return program
    raise CheckFailure(
        Category.PREPROCESS_FAIL,
        "the backend accepted none of the contract programs, so its runtime cannot be checked: "
        + "; ".join([*failures, *refusals]),  # a crash says more than a refusal
        stage="preprocess",
    )


# ---------------------------------------------------------------------------------------------
# Memory growth (RT-016, RT-018)

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


# ---------------------------------------------------------------------------------------------
# Preprocess in fresh processes (PRE-008)

HASH_SEEDS = (0, 12345)
FRESH_PROCESS_TIMEOUT = 300.0


def backend_spec(request) -> str | None:
    """The name the run loaded the checked backend by (``--conformance-backend``), for a fresh process."""
    callspec = getattr(request.node, "callspec", None)
    spec = callspec.params.get("backend") if callspec else None
    return spec if isinstance(spec, str) else None


def _digest_result(result) -> dict[str, Any]:
    import hashlib

    named = result.data_store_output.entries if result.data_store_output else {}
    dhm = result.debug_handle_map
    return {
        "processed_bytes": hashlib.sha256(result.processed_bytes).hexdigest(),
        "size": len(result.processed_bytes),
        "debug_handle_map": None if dhm is None else repr(sorted((repr(k), tuple(v)) for k, v in dhm.items())),
        "named_data": {str(k): [hashlib.sha256(bytes(e.data)).hexdigest(), e.alignment] for k, e in sorted(named.items())},
    }


def _fresh_process_main(argv: list[str] | None = None) -> None:
    """Entry point of one fresh process: preprocess one contract program, write digests as JSON lines."""
    import json
    import sys

    spec, program_name, out_path = argv if argv is not None else sys.argv[1:4]

    def emit(record: dict) -> None:
        with open(out_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")

    from conformance.discovery import load

    backend = load(spec)
    program = contract_program(program_name)
    exported = program.fresh()
    emit({"stage": "preprocess"})
    try:
        result, _ = Driver(backend).preprocess(exported)
    except CheckFailure as exc:
        emit({"stage": "done", "failure": exc.category.value, "message": exc.message})
        return
    emit({"stage": "done", **_digest_result(result)})


def preprocess_in_fresh_processes(spec: str, program_name: str, seeds=HASH_SEEDS) -> dict[int, dict]:
    """Preprocess contract program ``program_name`` with backend ``spec`` in one fresh Python
    process per hash seed (PYTHONHASHSEED), concurrently; the digests each process wrote, by seed.

    The processes load the backend by the name this run did, from the same working directory
    and import path, and rebuild the program the same way (``contract_program``, from the
    program cache when it is on disk). A process that dies before preprocess is the harness's
    failure (HARNESS_ERROR); one that dies or hangs in preprocess is the backend's (CRASH, TIMEOUT).
    """
    import json
    import subprocess
    import sys
    import tempfile

    code = "import sys; from conformance.checks._support import _fresh_process_main; _fresh_process_main(sys.argv[1:])"
    path = os.pathsep.join(p if p else os.getcwd() for p in sys.path)
    results: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="conformance-fresh-") as tmp:
        procs = {}
        try:
            for seed in seeds:
                env = dict(os.environ, PYTHONHASHSEED=str(seed), PYTHONPATH=path)
                out = os.path.join(tmp, f"seed-{seed}.jsonl")
                log = open(os.path.join(tmp, f"seed-{seed}.log"), "wb")  # a file: a chatty backend never blocks on a pipe
                try:
                    proc = subprocess.Popen(
                        [sys.executable, "-c", code, spec, program_name, out],
                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=os.getcwd(),
                    )
                finally:
                    log.close()
                procs[seed] = (proc, out)
            deadline = time.monotonic() + FRESH_PROCESS_TIMEOUT
            for seed, (proc, out) in procs.items():
                try:
                    proc.wait(timeout=max(deadline - time.monotonic(), 1.0))
                    timed_out = False
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    timed_out = True
                with open(os.path.join(tmp, f"seed-{seed}.log"), "rb") as fh:
                    output = fh.read()
                records = []
                if os.path.exists(out):
                    with open(out, encoding="utf-8") as fh:
                        records = [json.loads(line) for line in fh if line.strip()]
                stages = {r["stage"] for r in records}
                tail = output.decode("utf-8", "replace").strip()[-1500:]
                where = f"a fresh process (PYTHONHASHSEED={seed}) preprocessing {program_name}"
                if "done" in stages:
                    results[seed] = next(r for r in records if r["stage"] == "done")
                elif "preprocess" not in stages:
                    raise CheckFailure(
                        Category.HARNESS_ERROR,
                        f"{where} could not load backend {spec!r} or rebuild the program "
                        f"(exit status {proc.returncode}): {tail or 'no output'}",
                    )
                elif timed_out:
                    raise CheckFailure(
                        Category.TIMEOUT, f"{where}: preprocess did not return within {FRESH_PROCESS_TIMEOUT:.0f} s"
                    )
                else:
                    raise CheckFailure(
                        Category.CRASH,
                        f"{where}: the process died in preprocess (exit status {proc.returncode}): {tail or 'no output'}",
                    )
        finally:
            for proc, _ in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    return results
