"""The reference blob reader and runtime on hostile input: only BackendError, never a crash or a hang.

The fuzz runs in two regimes. Raw mutations are mostly caught by the checksum, so
the second regime recomputes the checksum after mutating: those blobs reach the
structural validation (bounds, counts, ids, dataflow, types) and every one of
them must still be refused with BackendError or decode to a program that runs.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
from conformance.checks import _support as support
from reference_backend import FORMAT_VERSION, ReferenceBackend, ReferenceRuntime, blob

BLOB_ERRORS = {Error.InvalidProgram, Error.DelegateInvalidCompatibility}
FUZZ_EXAMPLES = 5000  # per regime: 10,000 blobs in all


@pytest.fixture(scope="module")
def mlp():
    program = support.contract_program("mlp")
    result = ReferenceBackend.preprocess(program.fresh(), [])
    return program, result


def _init(runtime, data: bytes, result):
    context = BackendInitContext(MemoryAllocator(1 << 24), named_data_map=NamedDataMap(result.data_store_output))
    return runtime.init(context, FreeableBuffer(data), [])


def _fix_checksum(data: bytearray) -> bytes:
    if len(data) >= blob.HEADER_SIZE:
        struct.pack_into("<I", data, 16, zlib.crc32(bytes(data[blob.HEADER_SIZE :])))
    return bytes(data)


def _must_be_clean(runtime, data: bytes, result, program) -> str:
    try:
        handle = _init(runtime, data, result)
    except BackendError as exc:
        assert exc.error in BLOB_ERRORS, f"init refused a bad blob with {exc.error.name}: {exc}"
        return "refused"
    # It decoded: executing must also report problems through BackendError only.
    try:
        args = [EValue(np.array(a)) for a in program.inputs] + [EValue(np.zeros((4, 8), np.float32))]
        runtime.execute(BackendExecutionContext(MemoryAllocator(1 << 24)), handle, args)
    except BackendError:
        pass
    finally:
        runtime.destroy(handle)
    return "accepted"


mutations = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=6)


@pytest.mark.slow
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(edits=mutations, cut=st.none() | st.integers(0, 10**6), fix=st.booleans())
def test_mutated_and_truncated_blobs_only_raise_backend_error(mlp, edits, cut, fix):
    program, result = mlp
    data = bytearray(result.processed_bytes)
    for position, value in edits:
        data[position % len(data)] = value
    if cut is not None:
        data = data[: cut % len(data)]
    if fix:
        data = bytearray(_fix_checksum(data))
    _must_be_clean(ReferenceRuntime(), bytes(data), result, program)


@pytest.mark.slow
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(edits=mutations)
def test_checksum_valid_hostile_blobs_reach_validation_and_are_refused_cleanly(mlp, edits):
    program, result = mlp
    data = bytearray(result.processed_bytes)
    for position, value in edits:
        # Past the header: the structure, not the magic or the version.
        index = blob.HEADER_SIZE + position % (len(data) - blob.HEADER_SIZE)
        data[index] = value if data[index] != value else value ^ 0xFF
    _must_be_clean(ReferenceRuntime(), _fix_checksum(data), result, program)


def test_every_truncation_is_refused(mlp):
    program, result = mlp
    data = result.processed_bytes
    for n in range(len(data)):
        with pytest.raises(BackendError) as err:
            _init(ReferenceRuntime(), data[:n], result)
        assert err.value.error is Error.InvalidProgram


@pytest.mark.parametrize("version", [0, FORMAT_VERSION + 1, 0xFFFF])
def test_other_format_versions_are_incompatible(mlp, version):
    program, result = mlp
    data = bytearray(result.processed_bytes)
    struct.pack_into("<H", data, blob.VERSION_OFFSET, version)
    with pytest.raises(BackendError) as err:
        _init(ReferenceRuntime(), bytes(data), result)
    assert err.value.error is Error.DelegateInvalidCompatibility
    assert f"version {version}" in err.value.message


def test_hostile_counts_do_not_allocate_or_loop(mlp):
    # A section claiming 2**32-1 entries in a handful of bytes is refused by arithmetic, not by trying.
    program, result = mlp
    p = blob.read(result.processed_bytes)
    raw = bytearray(blob.write(p))
    directory_offset = blob.HEADER_SIZE
    kind, offset, length = struct.unpack_from("<III", raw, directory_offset)
    assert kind == blob.Section.STRINGS
    struct.pack_into("<I", raw, blob.HEADER_SIZE + offset, 0xFFFFFFFF)
    with pytest.raises(BackendError, match="claims 4294967295 strings"):
        _init(ReferenceRuntime(), _fix_checksum(raw), result)


def test_blob_has_nothing_executable(mlp):
    program, result = mlp
    data = result.processed_bytes
    assert b"pickle" not in data and b"\x80\x04" not in data[:2]
    decoded = blob.read(data)
    assert all(isinstance(i.op, str) for i in decoded.instructions)


def test_missing_named_data_is_an_invalid_program(mlp):
    program, result = mlp
    context = BackendInitContext(MemoryAllocator(1 << 24), named_data_map=NamedDataMap())
    with pytest.raises(BackendError) as err:
        ReferenceRuntime().init(context, FreeableBuffer(result.processed_bytes), [])
    assert err.value.error is Error.InvalidProgram and "lacks" in err.value.message


def _arange_blob(end: int):
    from conformance.programs import program_for
    from conformance.strategies import Call

    return ReferenceBackend.preprocess(program_for(Call("aten.arange.start_step", (0, end, 1), {"dtype": "int64"})).exported, [])


def test_a_blob_cannot_make_the_runtime_allocate_past_the_temp_allocator():
    """Issue 10: a 973-byte blob (arange to 2**27) made the reference allocate 3.1 GB before any check."""
    from reference_backend.kernels import KERNELS

    calls = []
    table = dict(KERNELS)
    table["aten.arange.start_step"] = lambda *a, **k: calls.append(a) or KERNELS["aten.arange.start_step"](*a, **k)
    runtime = ReferenceRuntime(kernels=table)
    result = _arange_blob(1 << 20)  # 8 MiB of int64
    assert len(result.processed_bytes) < 2048
    handle = runtime.init(
        BackendInitContext(runtime_allocator=MemoryAllocator(1 << 20), named_data_map=NamedDataMap()),
        FreeableBuffer(result.processed_bytes),
        [],
    )
    small = BackendExecutionContext(temp_allocator=MemoryAllocator(1 << 20))
    with pytest.raises(BackendError) as info:
        runtime.execute(small, handle, [EValue(np.empty(1 << 20, np.int64))])
    assert info.value.error is Error.MemoryAllocationFailed and "refused before running" in str(info.value)
    assert not calls, "the kernel ran (and allocated) before the bound was checked"
    with pytest.raises(BackendError) as info:  # an output smaller than the program declares: refused up front
        runtime.execute(BackendExecutionContext(temp_allocator=MemoryAllocator(1 << 30)), handle, [EValue(np.empty(5, np.int64))])
    assert info.value.error is Error.InvalidArgument and not calls
    out = np.empty(1 << 20, np.int64)
    assert runtime.execute(BackendExecutionContext(temp_allocator=MemoryAllocator(1 << 30)), handle, [EValue(out)]) is Error.Ok
    assert calls and out[-1] == (1 << 20) - 1
    runtime.destroy(handle)


def _lying(call, edit) -> bytes:
    """The reference blob of ``call`` with its one instruction's arguments edited by ``edit``: a blob
    that declares one result and asks the kernel for another."""
    import dataclasses

    from conformance.programs import program_for
    from reference_backend import blob as blob_format

    program = blob_format.read(ReferenceBackend.preprocess(program_for(call).exported, []).processed_bytes)
    (ins,) = program.instructions
    return blob_format.write(dataclasses.replace(program, instructions=(dataclasses.replace(ins, args=edit(ins.args)),)))


@pytest.mark.parametrize(
    "case",
    [
        ("arange to 2**27", "aten.arange.start_step", (0, 5, 1), {"dtype": "int64"}, lambda a: (a[0], 2**27), (5,), np.int64),
        ("full 3 x 2**28", "aten.full.default", ([1, 5], 1.0), {"dtype": "float32"}, lambda a: ((3, 2**28), a[1]), (1, 5), np.float32),
    ],
    ids=lambda c: c[0],
)
def test_a_blob_whose_arguments_ask_for_gigabytes_is_refused_before_the_kernel_allocates(case):
    """Issue 10: the declared result is small; the arguments ask for gigabytes. The bound on the
    declared shape alone let the kernel allocate it all before the shape check."""
    import resource

    from conformance.strategies import Call

    _, op, args, kwargs, edit, shape, dtype = case
    data = _lying(Call(op, args, kwargs), edit)
    runtime = ReferenceRuntime()
    handle = runtime.init(
        BackendInitContext(runtime_allocator=MemoryAllocator(1 << 20), named_data_map=NamedDataMap()), FreeableBuffer(data), []
    )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(BackendError) as info:
        runtime.execute(BackendExecutionContext(temp_allocator=MemoryAllocator(1 << 30)), handle, [EValue(np.empty(shape, dtype))])
    assert info.value.error is Error.MemoryAllocationFailed and "refused before running" in str(info.value)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # kB: nothing near a gigabyte
    runtime.destroy(handle)


@pytest.mark.slow
def test_a_short_seeded_fuzz_of_the_runtime_finds_nothing_but_backend_errors():
    """The fuzzer of `nox -s fuzz` (100,000 blobs, figures in docs/performance.md), on 300 seeds."""
    from tests.reference.fuzz_blobs import fuzz

    report = fuzz(300, jobs=1, chunk=300, first_seed=10_000_000)
    assert not report["findings"], report["findings"][:3]
    assert sum(report["outcomes"].values()) == 300
    assert report["outcomes"].get("executed", 0) > 0  # some mutations get past init and run
