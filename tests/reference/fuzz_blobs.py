"""A seeded mutation fuzzer of the reference runtime's blob reader: ``nox -s fuzz -- --blobs 100000``.

Every blob is a real one (the reference's preprocess of the contract programs and of single-op
programs of many signatures) changed by one or more mutations drawn from a seed: bit flips, bytes
set to 0x00/0xff/0x7f/0x80, a 4- or 8-byte field set to an extreme, truncation, a splice of two
blobs; most get their checksum fixed afterwards so they reach the structural checks behind it.
Each goes through init, execute (inputs of the program's declared shapes) and destroy. The only
acceptable outcomes are success and ``BackendError``; anything else is a finding, saved with its
seed: another exception, a crash, an allocation that failed against the address-space limit
instead of being refused before running, or a blob that raised the process's peak resident
memory past ``peak_bound`` (64 bytes per blob byte plus the data it is given, times a kernel's
headroom). The peak of each blob is measured (PeakMemory) and summarized in the report.

Chunks of seeds run in subprocesses (at most ``--jobs`` at once) with an address-space limit; a
chunk whose process dies is split until the seed that kills it is found. tests/reference/
test_blob_safety.py runs a few hundred seeds in the default test run.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 4 << 30
"""Address space of a fuzzing process: a backstop. A kernel's allocation that fails against it
("ran out of memory") is a finding too: the runtime's bound should have refused the step first."""
TEMP_CAPACITY = 1 << 26
"""The temp allocator of each execute (the runtime refuses a step whose results, times its
headroom, exceed it)."""
BLOB_FACTOR = 64
KERNEL_HEADROOM = 4
PROCESS_NOISE = 16 << 20
"""What one execute may add to a warmed process's peak resident memory beyond its data: malloc's
arenas and Python's own growth (measured over 100,000 blobs: at most 8.0 MiB, 99.9% under 1.1 MiB)."""
EXTREMES = (0, 1, 0x7F, 0x80, 0xFF, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 0xFFFF_FFFF_FFFF_FFFF, 0x7FFF_FFFF_FFFF_FFFF)


def peak_bound(blob_bytes: int, data_bytes: int) -> int:
    """The most one blob's init, execute and destroy may add to the process's peak resident memory:
    64 bytes per blob byte, the inputs and outputs the fuzzer allocates from the program's declared
    shapes times a kernel's headroom (its result plus transients), and PROCESS_NOISE. A blob past it
    made the runtime allocate what nothing it declares or is given accounts for: a finding."""
    return BLOB_FACTOR * blob_bytes + KERNEL_HEADROOM * data_bytes + PROCESS_NOISE


class PeakMemory:
    """The process's peak resident memory since the last ``reset``, from Linux's /proc: writing 5
    to /proc/self/clear_refs sets VmHWM (the high-water mark) to the current resident size."""

    def __init__(self) -> None:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.available, self.why_not = True, ""
        except OSError as exc:
            self.available, self.why_not = False, f"/proc/self/clear_refs: {exc}"
        self.base = 0

    @staticmethod
    def _status(field: str) -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
        raise OSError(f"/proc/self/status has no {field}")

    def reset(self) -> None:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        self.base = self._status("VmRSS:")

    def growth(self) -> int:
        """Bytes the peak resident memory rose above the resident memory at the last reset."""
        return max(self._status("VmHWM:") - self.base, 0)


def _outputs(exported) -> list[tuple[tuple[int, ...], np.dtype]]:
    from conformance.api.scalar_type import numpy_dtype

    out = []
    for node in exported.graph.output_node().args[0]:
        val = node.meta["val"]
        out.append((tuple(int(d) for d in val.shape), numpy_dtype(str(val.dtype).removeprefix("torch."))))
    return out


def base_blobs() -> list[tuple[bytes, list, list]]:
    """(blob, input and output shapes and dtypes) of real programs: the contract programs and single ops."""
    from conformance import specs
    from conformance.checks import _support as support
    from conformance.programs import program_for
    from conformance.strategies import calls
    from conformance.strategies.directed import draw_directed, plan
    from reference_backend import ReferenceBackend

    out = []
    for name in support.CONTRACT_PROGRAMS:
        program = support.contract_program(name)
        exported = program.fresh()
        result = ReferenceBackend.preprocess(exported, [])
        out.append((result.processed_bytes, [(np.shape(a), np.asarray(a).dtype) for a in program.inputs], _outputs(exported)))
    spec_set = specs.load()
    for op in ("aten.add.Tensor", "aten.convolution.default", "aten.sum.dim_IntList", "aten.cat.default", "aten.max_pool2d.default",
               "aten.arange.start_step", "aten.full.default", "aten.index_select.default", "aten.native_layer_norm.default",
               "aten.addmm.default", "aten.where.self", "aten._softmax.default", "aten.constant_pad_nd.default", "aten.split_with_sizes.default",
               "aten.repeat.default", "aten.randperm.default", "aten.upsample_nearest2d.vec", "aten.upsample_bilinear2d.vec"):
        spec = spec_set.op(op)
        strategy = calls(spec, "float32" if "float32" in spec.dtypes else spec.dtypes[0], op)
        for directive in plan(spec, "float32")[0][:2]:
            call, _ = draw_directed(strategy, directive, op, "fuzz")
            if call is None:
                continue
            program = program_for(call)
            result = ReferenceBackend.preprocess(program.exported, [])
            out.append((result.processed_bytes, [(np.shape(a), np.asarray(a).dtype) for a in program.inputs], _outputs(program.exported)))
    return out


def mutate(rng: random.Random, blobs: list, fix_checksum) -> tuple[bytes, int]:
    index = rng.randrange(len(blobs))
    data = bytearray(blobs[index][0])
    for _ in range(rng.choice((1, 1, 2, 3, 5))):
        kind = rng.randrange(6)
        at = rng.randrange(len(data)) if data else 0
        if not data:
            break
        if kind == 0:
            data[at] ^= 1 << rng.randrange(8)
        elif kind == 1:
            data[at] = rng.choice((0x00, 0xFF, 0x7F, 0x80))
        elif kind in (2, 3):
            width = 4 if kind == 2 else 8
            at = min(at, max(len(data) - width, 0))
            data[at : at + width] = (rng.choice(EXTREMES) & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
        elif kind == 4:
            del data[rng.randrange(len(data) + 1) :]
        else:
            other = blobs[rng.randrange(len(blobs))][0]
            cut = rng.randrange(len(data) + 1)
            data = data[:cut] + bytearray(other[rng.randrange(len(other) + 1) :])
    if rng.random() < 0.8 and data:
        data = bytearray(fix_checksum(data))
    return bytes(data), index


def run_chunk(start: int, count: int) -> dict:
    """Fuzz seeds [start, start + count) in this process: outcome counts, findings, and the peak
    resident memory each blob added (``peaks``, bytes, in seed order)."""
    import resource

    from conformance.api import BackendError
    from reference_backend import ReferenceRuntime
    from tests.reference.test_blob_safety import _fix_checksum

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    blobs = base_blobs()
    runtime = ReferenceRuntime()
    memory = PeakMemory()
    for data, inputs, outputs in blobs:  # warm: first calls (imports, caches) are not a blob's doing
        _run_one(runtime, data, inputs + outputs)
    outcomes: Counter = Counter()
    findings = []
    peaks = []
    for seed in range(start, start + count):
        data, index = mutate(random.Random(seed), blobs, _fix_checksum)
        shapes = blobs[index][1] + blobs[index][2]
        if memory.available:
            memory.reset()
        outcome, stage, error = _run_one(runtime, data, shapes)
        outcomes[outcome] += 1
        if error is not None and not isinstance(error, BackendError):  # only BackendError may leave the runtime
            findings.append({"seed": seed, "stage": stage, "error": f"{type(error).__name__}: {error}"[:500]})
        elif isinstance(error, BackendError) and "ran out of memory" in error.message:
            findings.append({"seed": seed, "stage": stage, "error": f"an allocation failed past the {MEMORY_LIMIT >> 30} GiB limit "
                             f"instead of being refused before running: {error.message}"[:500]})
        if memory.available:
            grew = memory.growth()
            peaks.append(grew)
            bound = peak_bound(len(data), sum(int(np.prod(s)) * np.dtype(d).itemsize for s, d in shapes))
            if grew > bound:
                outcomes["past the memory bound"] += 1
                findings.append({"seed": seed, "stage": stage, "error": f"peak resident memory rose {grew} bytes for a "
                                 f"{len(data)}-byte blob, past its bound of {bound}"})
    return {"outcomes": dict(outcomes), "findings": findings, "peaks": peaks, "peaks_unmeasured": memory.why_not}


def _run_one(runtime, data: bytes, shapes: list) -> tuple[str, str, BaseException | None]:
    """One blob through init, execute (zero inputs and outputs of ``shapes``) and destroy: its
    outcome, the stage it ended in, and the BackendError or other exception that ended it."""
    from conformance.api import (
        BackendError,
        BackendExecutionContext,
        BackendInitContext,
        EValue,
        FreeableBuffer,
        MemoryAllocator,
        NamedDataMap,
    )

    stage = "init"
    try:
        handle = runtime.init(
            BackendInitContext(runtime_allocator=MemoryAllocator(1 << 26), named_data_map=NamedDataMap()), FreeableBuffer(data), []
        )
        stage = "execute"
        try:
            args = [EValue(np.zeros(shape, dtype)) for shape, dtype in shapes]
            runtime.execute(BackendExecutionContext(temp_allocator=MemoryAllocator(TEMP_CAPACITY)), handle, args)
            return "executed", stage, None
        except BackendError as exc:
            return f"execute refused: {exc.error.name}", stage, exc
        finally:
            stage = "destroy"
            runtime.destroy(handle)
    except BackendError as exc:
        return f"{stage} refused: {exc.error.name}", stage, exc
    except Exception as exc:
        return f"{stage} raised {type(exc).__name__}", stage, exc


def _chunk_in_subprocess(start: int, count: int, timeout: float) -> dict:
    command = [sys.executable, "-m", "tests.reference.fuzz_blobs", "--chunk", str(start), str(count)]
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        done = None
    if done is not None and done.returncode == 0:
        part = json.loads(done.stdout.splitlines()[-1])
        part["peaks"] = list(zip(range(start, start + count), part["peaks"]))
        return part
    if count == 1:
        how = "timed out" if done is None else f"died with status {done.returncode}"
        return {"outcomes": {f"process {how}": 1}, "findings": [{"seed": start, "stage": "?", "error": f"the fuzzing process {how}"}],
                "peaks": [], "peaks_unmeasured": ""}
    half = count // 2  # find the seed that kills the process
    parts = [_chunk_in_subprocess(start, half, timeout), _chunk_in_subprocess(start + half, count - half, timeout)]
    return _merge(parts)


def _merge(parts: list[dict]) -> dict:
    return {
        "outcomes": dict(sum((Counter(p["outcomes"]) for p in parts), Counter())),
        "findings": [f for p in parts for f in p["findings"]],
        "peaks": [x for p in parts for x in p["peaks"]],
        "peaks_unmeasured": next((p["peaks_unmeasured"] for p in parts if p["peaks_unmeasured"]), ""),
    }


def fuzz(blobs: int, jobs: int = 2, chunk: int = 2000, first_seed: int = 0, timeout: float = 900) -> dict:
    started = time.perf_counter()
    starts = range(first_seed, first_seed + blobs, chunk)
    with ThreadPoolExecutor(jobs) as pool:
        merged = _merge(list(pool.map(lambda s: _chunk_in_subprocess(s, min(chunk, first_seed + blobs - s), timeout), starts)))
    return {
        "blobs": blobs,
        "seconds": round(time.perf_counter() - started, 1),
        "outcomes": dict(Counter(merged["outcomes"]).most_common()),
        "findings": merged["findings"],
        "peak_memory": _peak_summary(merged["peaks"], merged["peaks_unmeasured"]),
    }


def _peak_summary(peaks: list[tuple[int, int]], unmeasured: str) -> dict:
    """What the blobs added to their process's peak resident memory: quantiles, the largest with seeds."""
    if not peaks:
        return {"measured": 0, "why_not": unmeasured or "no blob ran"}
    values = np.array([p for _, p in peaks])
    largest = sorted(peaks, key=lambda p: -p[1])[:5]
    return {
        "measured": len(peaks),
        "bound": f"{BLOB_FACTOR} x blob bytes + {KERNEL_HEADROOM} x inputs and outputs + {PROCESS_NOISE >> 20} MiB",
        "median_bytes": int(np.median(values)),
        "p99_bytes": int(np.quantile(values, 0.99)),
        "p999_bytes": int(np.quantile(values, 0.999)),
        "max_bytes": int(values.max()),
        "over_1MiB": int((values > 1 << 20).sum()),
        "largest": [{"seed": s, "bytes": b} for s, b in largest],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blobs", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--chunk", nargs=2, type=int, metavar=("START", "COUNT"), help=argparse.SUPPRESS)
    parser.add_argument("--findings", default="fuzz-findings.json", help="where the findings go (with their seeds)")
    ns = parser.parse_args(argv)
    if ns.chunk:
        print(json.dumps(run_chunk(*ns.chunk)))
        return 0
    report = fuzz(ns.blobs, ns.jobs, first_seed=ns.seed)
    rate = report["blobs"] / max(report["seconds"], 1e-9)
    print(f"{report['blobs']} blobs in {report['seconds']} s ({rate:.0f}/s) with {ns.jobs} processes")
    for outcome, n in report["outcomes"].items():
        print(f"{n:>8}  {outcome}")
    peak = report["peak_memory"]
    if peak["measured"]:
        print(
            f"peak resident memory a blob added (bound: {peak['bound']}): median {peak['median_bytes']} B, "
            f"p99 {peak['p99_bytes']} B, p99.9 {peak['p999_bytes']} B, max {peak['max_bytes']} B "
            f"(seed {peak['largest'][0]['seed']}); {peak['over_1MiB']} blob(s) over 1 MiB"
        )
    else:
        print(f"peak memory not measured: {peak['why_not']}")
    Path(ns.findings).write_text(json.dumps(report, indent=1))
    print(f"{len(report['findings'])} finding(s); {ns.findings}")
    return 1 if report["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
