"""The torch-eager adapter (issue 27): PyTorch eager behind the delegate contract.

Unit tests of its mapping onto the contract (blob format and its refusals, argument checks,
handles, debug handles and events, dtype conversions), then a short certification through the
CLI: a handful of contract clauses and NUM checks, each of which must PASS (a backend that
computes what eager computes must certify; a failure here is a defect of the harness, the
reference or the spec).
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ml_dtypes  # noqa: E402

from backend_adapters import torch_eager  # noqa: E402
from conformance.api import (  # noqa: E402
    BackendError,
    BackendExecutionContext,
    CompileSpec,
    Error,
    EValue,
    EventTracer,
    MemoryAllocator,
)
from conformance.checks import _support as support  # noqa: E402
from conformance.driver import Driver  # noqa: E402
from conformance.results import CheckFailure  # noqa: E402
from tests.certifying import certify  # noqa: E402


@pytest.fixture(scope="module")
def backend():
    return torch_eager.backend()


@pytest.fixture(scope="module")
def chain(backend):
    program = support.contract_program("chain")
    out, _ = Driver(backend).preprocess(program.fresh())
    return program, out


def _context(tracer=None):
    return BackendExecutionContext(temp_allocator=MemoryAllocator(1 << 20), event_tracer=tracer or EventTracer())


def _export(fn, *inputs):
    class Module(torch.nn.Module):
        def forward(self, *args):
            return fn(*args)

    return torch.export.export(Module(), tuple(inputs)).run_decompositions()


def _run(backend, exported, arrays):
    """Preprocess, init, execute and destroy ``exported`` on NumPy ``arrays``: its outputs."""
    expected = support.eager_outputs(exported, arrays)
    return Driver(backend).run(exported, list(arrays), expected).outputs, expected


def _tensor(array):
    from conformance.api.tensors import to_torch

    return to_torch(array, resizable=True)


# -- the entry point and its claims -------------------------------------------------------------


def test_entry_point_family_and_claims(backend):
    from conformance import specs as spec_module
    from conformance.discovery import load

    assert backend.name == "torch-eager" and backend.family == "delegate" and backend.profile == "full"
    assert backend.runtime.is_available()
    specs = spec_module.load()
    assert set(backend.manifest.ops) == set(specs.profile("full").ops) == set(specs.ops)
    assert set(backend.manifest.ops.values()) == {"*"}
    field = backend.manifest.blob_version
    assert (field.offset, field.size, field.current) == (
        torch_eager.VERSION_OFFSET, torch_eager.VERSION_SIZE, torch_eager.FORMAT_VERSION
    )
    assert not backend.manifest.not_applicable
    assert load("torch-eager").name == "torch-eager"  # the entry point (pip install -e . registers it)


# -- the blob --------------------------------------------------------------------------------


def test_round_trip_is_eager_bit_for_bit_with_events_and_handles(backend, chain):
    program, out = chain
    again, _ = Driver(backend).preprocess(program.fresh())
    assert again.processed_bytes == out.processed_bytes and again.debug_handle_map == out.debug_handle_map
    assert out.processed_bytes[:4] == torch_eager.MAGIC
    nodes = {n.meta["debug_handle"] for n in program.exported.graph.nodes if "debug_handle" in n.meta}
    assert {h for hs in out.debug_handle_map.values() for h in hs} == nodes
    expected = support.eager_outputs(program.exported, program.inputs)
    ran = Driver(backend).run(program.exported, program.inputs, expected)
    for got, want in zip(ran.outputs, expected):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert ran.events and {e.delegate_debug_id for e in ran.events} <= set(out.debug_handle_map)


def _init_error(backend, out, blob: bytes) -> BackendError:
    with pytest.raises(CheckFailure) as info:
        Driver(backend).init(out, processed_bytes=blob)
    cause = info.value.__cause__
    assert isinstance(cause, BackendError), info.value.message
    return cause


def test_malformed_and_truncated_blobs_are_refused(backend, chain):
    _, out = chain
    blob = out.processed_bytes
    for n in (0, 1, 3, torch_eager.HEADER.size - 1, torch_eager.HEADER.size, len(blob) // 2, len(blob) - 1):
        error = _init_error(backend, out, blob[:n])
        assert error.error is Error.InvalidProgram and ("truncated" in error.message or "shorter" in error.message), error
    assert _init_error(backend, out, blob + b"\0").error is Error.InvalidProgram
    assert "not a torch-eager blob" in _init_error(backend, out, b"PK\x03\x04" + blob[4:]).message
    flipped = bytearray(blob)
    flipped[len(blob) - 100] ^= 0xFF  # inside the archive
    assert "SHA-256" in _init_error(backend, out, bytes(flipped)).message
    # A blob whose digest matches but whose archive is garbage: torch.export.load's refusal, not a crash.
    garbage = torch_eager.write_blob(["relu"], b"PK\x03\x04" + b"\0" * 64)
    assert _init_error(backend, out, garbage).error is Error.InvalidProgram
    body = b"{not json"  # a digest that matches an unreadable table
    digest = hashlib.sha256(body).digest()
    header = torch_eager.HEADER.pack(torch_eager.MAGIC, torch_eager.FORMAT_VERSION, 0, len(body), 0, digest)
    assert "instruction table" in _init_error(backend, out, header + body).message


def test_other_format_versions_are_incompatible(backend, chain):
    _, out = chain
    for version in (0, torch_eager.FORMAT_VERSION + 1):
        forged = bytearray(out.processed_bytes)
        forged[torch_eager.VERSION_OFFSET : torch_eager.VERSION_OFFSET + torch_eager.VERSION_SIZE] = version.to_bytes(2, "little")
        assert _init_error(backend, out, bytes(forged)).error is Error.DelegateInvalidCompatibility


def test_unknown_compile_spec_is_refused(backend, chain):
    program, _ = chain
    with pytest.raises(BackendError) as info:
        torch_eager.EagerDetails.preprocess(program.fresh(), [CompileSpec("turbo", b"1")])
    assert info.value.error is Error.InvalidArgument and "turbo" in info.value.message


@pytest.mark.slow
def test_buffer_mutation_is_refused_at_preprocess(backend):
    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(1))

        def forward(self, x):
            self.count.add_(1)
            return x + self.count

    exported = torch.export.export(Counter(), (torch.ones(3),))
    for program in (exported, exported.run_decompositions()):  # add_ on the buffer; then a BUFFER_MUTATION output
        with pytest.raises(BackendError) as info:
            torch_eager.EagerDetails.preprocess(program, [])
        assert info.value.error is Error.NotSupported and "count" in info.value.message


# -- execute ---------------------------------------------------------------------------------


def test_execute_checks_arguments_and_handles(backend, chain):
    program, out = chain
    driver = Driver(backend)
    loaded = driver.init(out)
    x, y = program.inputs
    result = [EValue(np.zeros((4, 8), np.float32))]
    cases = {
        "no arguments": [],
        "arity": [EValue(x)] + result,
        "extra": [EValue(x), EValue(y)] + result + [EValue(np.zeros(3, np.float32))],
        "dtype": [EValue(x.astype(np.float64)), EValue(y)] + result,
        "bfloat16": [EValue(x.astype(ml_dtypes.bfloat16)), EValue(y)] + result,
        "shape": [EValue(np.zeros((5, 8), np.float32)), EValue(y)] + result,
        "rank": [EValue(np.zeros((4, 8, 1), np.float32)), EValue(y)] + result,
        "scalar": [EValue(1.0), EValue(y)] + result,
        "output shape": [EValue(x), EValue(y), EValue(np.zeros((3, 8), np.float32))],
    }
    for label, args in cases.items():
        with pytest.raises(BackendError) as info:
            backend.runtime.execute(_context(), loaded.handle, args)
        assert info.value.error is Error.InvalidArgument, (label, info.value)
    driver.destroy(loaded)
    for handle in (loaded.handle, None, object(), 7):
        with pytest.raises(BackendError) as info:
            backend.runtime.execute(_context(), handle, [EValue(x), EValue(y)] + result)
        assert info.value.error is Error.DelegateInvalidHandle
    again = driver.init(out)
    assert again.handle is not loaded.handle
    driver.destroy(again)


def test_failing_instruction_carries_its_debug_handle(backend):
    program = support.contract_program("index_failure")
    exported = program.fresh()
    out, _ = Driver(backend).preprocess(exported)
    loaded = Driver(backend).init(out)
    good = support.eager_outputs(program.exported, program.inputs)
    args = [EValue(program.inputs[0]), EValue(support.FAILING_INDEX)] + [EValue(np.zeros_like(g)) for g in good]
    with pytest.raises(BackendError) as info:
        backend.runtime.execute(_context(), loaded.handle, args)
    Driver(backend).destroy(loaded)
    error = info.value
    assert error.error is Error.InvalidArgument and "index_select" in error.message
    handles = out.debug_handle_map[error.debug_handle]
    names = {n.meta["debug_handle"]: n.name for n in exported.graph.nodes if "debug_handle" in n.meta}
    assert [names[h] for h in handles] == ["index_select"]


def test_a_program_that_writes_its_input_leaves_the_callers_array_alone(backend):
    exported = _export(lambda x: x.add_(1) * 2, torch.ones(3))
    x = np.arange(3, dtype=np.float32)
    before = x.copy()
    outputs, expected = _run(backend, exported, [x])
    assert np.array_equal(x, before) and np.array_equal(outputs[0], (before + 1) * 2)
    assert outputs[0].tobytes() == expected[0].tobytes()


@pytest.mark.slow
@pytest.mark.parametrize(
    "dtype, fn",
    [
        (ml_dtypes.bfloat16, lambda x: x * 3 + 1),
        (np.float16, lambda x: torch.sigmoid(x)),
        (ml_dtypes.float8_e4m3fn, lambda x: x.clone()),
        (ml_dtypes.float8_e5m2, lambda x: x.to(torch.float32)),
        (np.complex64, lambda x: x * x),
        (np.complex128, lambda x: x.sum()),
        (np.uint16, lambda x: x.clone()),
        (np.uint32, lambda x: x.to(torch.int64)),
        (np.uint64, lambda x: x.to(torch.int64)),
        (np.bool_, lambda x: ~x),
    ],
    ids=lambda v: getattr(v, "__name__", None) if isinstance(v, type) else None,
)
def test_dtype_conversions_are_exact(backend, dtype, fn):
    values = np.array([[0.5, -1.25, 2.0], [3.0, 0.0, 1.5]])
    if np.dtype(dtype).kind in "ub":
        array = np.abs(values * 2).astype(dtype)
    elif np.dtype(dtype).kind == "c":
        array = (values + 1j * values[::-1]).astype(dtype)
    else:
        array = values.astype(dtype)
    exported = _export(fn, _tensor(array))
    outputs, expected = _run(backend, exported, [array])
    for got, want in zip(outputs, expected):
        assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes(), (got, want)


def test_a_blob_is_loaded_once_and_each_init_gets_a_new_handle(backend, chain):
    """init/destroy cycles of one blob share its loaded program (torch_eager.LOADED_CACHE_SIZE):
    RT-016 measures no growth, and RT-019 still sees a new handle each time."""
    _, out = chain
    driver = Driver(backend)
    first = driver.init(out)
    loaded = first.handle.loaded
    driver.destroy(first)
    second = driver.init(out)
    assert second.handle is not first.handle and second.handle.loaded is loaded and first.handle.loaded is None
    driver.destroy(second)


def test_finding_fx_keeps_the_source_of_every_module_it_builds(chain):
    """Why loaded programs are cached: every GraphModule torch.fx builds registers its generated
    source in linecache under a fresh ``<eval_with_key>.N`` and never removes it, so a runtime that
    ran ``torch.export.load(...).module()`` on every init would grow with every init/destroy cycle."""
    import linecache

    program, _ = chain

    def keys():
        return {k for k in linecache.cache if str(k).startswith("<eval_with_key>")}

    before = keys()
    for _ in range(3):
        program.exported.module()
    assert len(keys() - before) >= 3


@pytest.mark.slow
@pytest.mark.parametrize("value", [True, False])
def test_a_bool_scalar_output_survives_the_archive(backend, value):
    """torch.export.save cannot write a SymBool output (_bool_outputs_as_ints): it travels as an int."""
    exported = _export(lambda x: torch.ops.aten._local_scalar_dense.default(x), torch.tensor(True))
    out, _ = Driver(backend).preprocess(exported)
    assert json_table(out.processed_bytes)["bool_outputs"] == [0]
    outputs, expected = _run(backend, exported, [np.array(value)])
    assert outputs[0] == expected[0] == value and isinstance(outputs[0], (bool, np.bool_))


class _Unbind(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten.unbind.int(x, 1)


def test_a_program_without_outputs_survives_the_archive(backend):
    """torch.export.save cannot write a program with no user outputs (_one_output_at_least): the
    archive returns the first input as a placeholder, which execute drops."""
    exported = torch.export.export(_Unbind(), (torch.zeros(3, 0),))  # not decomposed: the unbind node stays
    assert any(n.target is torch.ops.aten.unbind.int for n in exported.graph.nodes)
    out, _ = Driver(backend).preprocess(exported)
    assert json_table(out.processed_bytes)["dropped_outputs"] == 1
    outputs, expected = _run(backend, exported, [np.zeros((3, 0), np.float32)])
    assert list(outputs) == list(expected) == []


def json_table(blob: bytes) -> dict:
    import json

    table_size = torch_eager.HEADER.unpack_from(blob)[3]
    return json.loads(blob[torch_eager.HEADER.size : torch_eager.HEADER.size + table_size])


def test_handles_are_independent_across_threads(backend, chain):
    import threading

    program, out = chain
    driver = Driver(backend)
    expected = support.eager_outputs(program.exported, program.inputs)
    failures = []

    def work():
        try:
            loaded = driver.init(out)
            for _ in range(5):
                got = driver.execute(loaded, program.inputs, expected).outputs
                assert got[0].tobytes() == expected[0].tobytes()
            driver.destroy(loaded)
        except BaseException as exc:  # re-raised below
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures


# -- a short certification through the CLI -----------------------------------------------------

SHORT = {
    "PRE_002": "PASS",
    "PRE_006": "PASS",  # digamma: outside the spec, accepted and computed as eager computes it
    "RT_002": "PASS",
    "RT_009": "PASS",
    "RT_010": "PASS",
    "RT_012": "PASS",
    "RT_013": "PASS",
    "RT_019": "PASS",
    "REG_006": "PASS",
    "DBG_001": "PASS",
    "DBG_003": "PASS",
    "aten.relu.default|float32": "PASS",
    "aten.add.Tensor|float32": "PASS",
}


@pytest.mark.slow
def test_short_certification(tmp_path):
    selection = [*(f"test_{c}" for c in SHORT if "." not in c), "(NUM and aten.relu.default)", "(NUM and aten.add.Tensor)"]
    results, _ = certify("torch-eager", tmp_path, "core-fp32", *selection)
    for needle, category in SHORT.items():
        matches = {rid: r["category"] for rid, r in results.items() if needle in rid}
        assert matches, f"no result for {needle} in {sorted(results)}"
        messages = {rid: results[rid].get("message", "")[:300] for rid in matches if matches[rid] != category}
        assert set(matches.values()) == {category}, f"{needle}: {matches}, expected {category}: {messages}"
