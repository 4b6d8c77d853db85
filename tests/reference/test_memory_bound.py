"""Issue 28: one memory bound for every op of the reference runtime.

A blob declares every value's shape, but a step's attributes decide what its kernel allocates.
Blobs of under 400 bytes that declare a small result and ask repeat for 2**12 x 2**12 copies,
randperm for 2**25 elements or upsample for a scale of 4096 made the runtime allocate 256 MiB
(1.3-1.9 GB with larger attributes) and fail afterwards; the runtime now computes each step's
result shapes with ATen's shape rules (reference_backend/meta.py) and refuses the step before the
kernel runs. The peak is measured in a fresh process (tests.reference.fuzz_blobs.PeakMemory), after
the same program with its honest attributes has run there once, so imports and first calls are
not counted.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from conformance.api import numpy_dtype
from conformance.programs import program_for
from conformance.strategies import Call, Tensor
from reference_backend import ReferenceBackend, blob
from tests.reference.fuzz_blobs import ROOT, PeakMemory

ASKED = 256 << 20
"""What each hostile blob asks its kernel to allocate (bytes of its result alone)."""
PEAK_BOUND = 32 << 20
"""What refusing it may add to the process's peak resident memory: half the temp allocator
(TEMP_CAPACITY, 64 MiB) and an eighth of what is asked."""

HOSTILE = {
    # (4096 x 1, 4096 x 4) float32
    "repeat": (Call("aten.repeat.default", (Tensor(np.ones((1, 4), np.float32)), [2, 1])), lambda a: (a[0], (2**12, 2**12))),
    # 2**25 int64 (and the kernel's permutation and cast besides)
    "randperm": (Call("aten.randperm.default", (5,), {"dtype": "int64"}), lambda a: (2**25, *a[1:])),
    # (1, 1, 2 x 4096, 2 x 4096) float32
    "upsample_nearest2d": (
        Call("aten.upsample_nearest2d.vec", (Tensor(np.ones((1, 1, 2, 2), np.float32)), None, [2.0, 2.0])),
        lambda a: (a[0], a[1], (4096.0, 4096.0)),
    ),
    # (0, 1, 2 x 2**22, 2 x 2**22): nothing, but the kernel's index arrays run along the other dims
    "upsample_nearest2d_empty_batch": (
        Call("aten.upsample_nearest2d.vec", (Tensor(np.ones((0, 1, 2, 2), np.float32)), None, [2.0, 2.0])),
        lambda a: (a[0], a[1], (float(2**22), float(2**22))),
    ),
}


def _blob(call: Call) -> tuple[bytes, list]:
    """The reference's blob of ``call`` and the (shape, dtype) of every argument execute takes
    (inputs, then the declared outputs)."""
    data = ReferenceBackend.preprocess(program_for(call, dynamic=False).exported, []).processed_bytes
    program = blob.read(data)
    shapes = []
    for value_id in program.inputs + program.outputs:
        info = program.values[value_id]
        shapes.append(([d.value for d in info.dims], numpy_dtype(int(info.dtype)).name))
    return data, shapes


def _blobs(name: str) -> tuple[bytes, bytes, list]:
    """The honest blob of the case, the same blob with the hostile attributes, and the shapes."""
    call, edit = HOSTILE[name]
    honest, shapes = _blob(call)
    program = blob.read(honest)
    (ins,) = program.instructions
    hostile = blob.write(dataclasses.replace(program, instructions=(dataclasses.replace(ins, args=edit(ins.args)),)))
    return honest, hostile, shapes


def _measure(warm: bytes, warm_shapes: list, measured: bytes, shapes: list) -> dict:
    """In a fresh process: run ``warm`` (imports, first calls), then ``measured``; how much the
    peak resident memory rose during the second, and the BackendError it ended with."""
    job = json.dumps({"warm": warm.hex(), "warm_shapes": warm_shapes, "measured": measured.hex(), "shapes": shapes})
    done = subprocess.run([sys.executable, "-c", _MEASURE], input=job, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


_MEASURE = r"""
import json, sys
import numpy as np
from conformance.api import BackendError, BackendExecutionContext, BackendInitContext, EValue, FreeableBuffer, MemoryAllocator, NamedDataMap
from reference_backend import ReferenceRuntime
from tests.reference.fuzz_blobs import TEMP_CAPACITY, PeakMemory

def run(data, shapes):
    runtime = ReferenceRuntime()
    handle = runtime.init(BackendInitContext(MemoryAllocator(1 << 20), named_data_map=NamedDataMap()), FreeableBuffer(data), [])
    try:
        runtime.execute(BackendExecutionContext(MemoryAllocator(TEMP_CAPACITY)), handle, [EValue(np.zeros(s, d)) for s, d in shapes])
    except BackendError as exc:
        return exc
    finally:
        runtime.destroy(handle)

job = json.load(sys.stdin)
warm = run(bytes.fromhex(job["warm"]), [(tuple(s), np.dtype(d)) for s, d in job["warm_shapes"]])
assert warm is None, f"the honest program was refused: {warm}"
memory = PeakMemory()
memory.reset()
error = run(bytes.fromhex(job["measured"]), [(tuple(s), np.dtype(d)) for s, d in job["shapes"]])
print(json.dumps({"grew": memory.growth(), "error": error.error.name if error else None, "message": str(error) if error else ""}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_small_blob_whose_attributes_ask_for_much_is_refused_before_the_process_grows(name):
    if not PeakMemory().available:
        pytest.skip(f"peak resident memory cannot be reset here: {PeakMemory().why_not}")
    honest, hostile, shapes = _blobs(name)
    assert len(hostile) < 400, len(hostile)
    seen = _measure(honest, shapes, hostile, shapes)
    assert seen["error"] == "MemoryAllocationFailed" and "refused before running" in seen["message"], seen
    assert seen["grew"] < PEAK_BOUND, (
        f"a {len(hostile)}-byte blob asking for {ASKED >> 20} MiB raised the peak resident memory by "
        f"{seen['grew'] / 2**20:.1f} MiB (bound {PEAK_BOUND >> 20} MiB): {seen['message']}"
    )


@pytest.mark.slow
def test_an_empty_repeat_does_not_pay_for_the_counts_before_its_zero():
    """Fuzz seed 84908: repeat's kernel (np.tile) repeats one dim at a time, so counts of
    (32768, 0) on a 16 x 64 tensor allocated 32768 copies of it (128 MiB) for an empty result.
    A legitimate program: it runs, and the process does not grow."""
    if not PeakMemory().available:
        pytest.skip(f"peak resident memory cannot be reset here: {PeakMemory().why_not}")
    warm, warm_shapes = _blob(Call("aten.repeat.default", (Tensor(np.ones((16, 64), np.float32)), [2, 1])))
    empty, shapes = _blob(Call("aten.repeat.default", (Tensor(np.ones((16, 64), np.float32)), [2**15, 0])))
    assert shapes[-1] == ([2**19, 0], "float32")
    seen = _measure(warm, warm_shapes, empty, shapes)
    assert seen["error"] is None, seen
    assert seen["grew"] < PEAK_BOUND, f"an empty repeat raised the peak resident memory by {seen['grew'] / 2**20:.1f} MiB"


@pytest.mark.parametrize("op", ["aten._embedding_bag.default", "aten._native_batch_norm_legit_no_training.default"])
def test_results_whose_meta_shapes_differ_from_the_cpu_kernels_are_not_refused(op, monkeypatch):
    """ATen's meta functions size some auxiliary results otherwise than its CPU kernels, which
    export follows (_embedding_bag's offset2bag and bag_size, batch norm's saved statistics): the
    bound takes the larger size and never refuses a program for the disagreement (a first version
    did, on 19 of 2,367 directed cases of every op)."""
    from conformance import case, specs
    from conformance.strategies import calls
    from conformance.strategies.directed import draw_directed, plan
    from reference_backend import backend_under_test, runtime

    disagreements = []
    bound = runtime.ReferenceRuntime._bound

    def watched(self, plan_, index, step, args, kwargs, symbols, temp):
        computed = plan_.shapes.of(index, step.op, args, kwargs) or ()
        for value_id, result in zip(step.outputs, computed):
            dims = plan_.program.values[value_id].dims if value_id != blob.NO_VALUE else ()
            if (
                result is not None
                and all(d.kind is blob.DimKind.STATIC for d in dims)
                and result[0] != tuple(d.value for d in dims)
            ):
                disagreements.append((step.op, result[0], [d.value for d in dims]))
        return bound(self, plan_, index, step, args, kwargs, symbols, temp)

    monkeypatch.setattr(runtime.ReferenceRuntime, "_bound", watched)
    spec = specs.load().op(op)
    strategy = calls(spec, "float32", op)
    outcomes = []
    for group in plan(spec, "float32"):
        call, _ = draw_directed(strategy, group[0], op, "meta-disagrees")
        if call is not None:
            outcomes.append(case.run(backend_under_test(), spec, call))
        if disagreements and len(outcomes) >= 3:
            break
    assert disagreements, "no case whose meta shapes differ from the declared ones: the test proves nothing"
    assert all(o.ok for o in outcomes), [(o.category, o.message, o.detail) for o in outcomes if not o.ok]


def test_results_past_sizing_are_refused_before_running():
    """Fuzz seeds 27352, 49187, 59132: repeat's counts of 10**14 give results whose size overflows
    ATen's shape rules ("Storage size calculation overflowed"); the kernel then tried to allocate
    them and failed against the address-space limit. Refused before running instead."""
    from conformance.api import (
        BackendError,
        BackendExecutionContext,
        BackendInitContext,
        Error,
        EValue,
        FreeableBuffer,
        MemoryAllocator,
        NamedDataMap,
    )
    from reference_backend import ReferenceRuntime

    call, _ = HOSTILE["repeat"]
    honest, shapes = _blob(call)
    program = blob.read(honest)
    (ins,) = program.instructions
    data = blob.write(dataclasses.replace(program, instructions=(dataclasses.replace(ins, args=(ins.args[0], (2**40, 2**40))),)))
    runtime = ReferenceRuntime()
    handle = runtime.init(BackendInitContext(MemoryAllocator(1 << 20), named_data_map=NamedDataMap()), FreeableBuffer(data), [])
    try:
        with pytest.raises(BackendError) as info:
            runtime.execute(BackendExecutionContext(MemoryAllocator(1 << 26)), handle, [EValue(np.zeros(s, d)) for s, d in shapes])
    finally:
        runtime.destroy(handle)
    assert info.value.error is Error.MemoryAllocationFailed, info.value
    assert "refused before running" in info.value.message and "overflow" in info.value.message, info.value.message
