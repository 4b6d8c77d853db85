"""The ExecuTorch adapters (executorch-xnnpack, executorch-portable) on the contract.

Needs executorch (``pip install 'torch-backend-conformance[executorch]'``); without
it only the DiscoveryError test runs. Importing executorch costs ~10 s, lowering a
program 0.1-0.7 s; the whole module takes about a minute on two cores, most of it
lowering programs both ways (with and without re-tracing) to prove them the same.
Its tests run without the disk cache of lowerings, except those about that cache,
which put it in a temporary directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from backend_adapters import executorch_compat
from conformance.api import BackendError, BackendUnderTest, Error
from conformance.compat import torch as compat_torch
from conformance.discovery import DiscoveryError
from conformance.driver import Driver
from conformance.results import Category, CheckFailure

BUILT = pytest.mark.skipif(not compat_torch.builds_programs(),
                           reason="programs are exported (compat.torch.builds_programs): no batch, no NUM program to cache on disk")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def et():
    return pytest.importorskip("executorch.runtime", reason="executorch is not installed (pip install 'torch-backend-conformance[executorch]')")


@pytest.fixture(scope="module")
def xnnpack(et) -> BackendUnderTest:
    """Every test that lowers through it is marked slow: the first one pays importing ExecuTorch's
    exir and XNNPACK's partitioner (half a minute on a loaded 2-core machine)."""
    from backend_adapters.executorch import xnnpack

    return xnnpack()


@pytest.fixture(scope="module")
def portable(et) -> BackendUnderTest:
    from backend_adapters.executorch import portable

    return portable()


def _program(fn, *inputs):
    import torch

    from conformance.programs import export_module

    class Module(torch.nn.Module):
        def forward(self, *args):
            return fn(*args)

    return export_module(Module(), [torch.from_numpy(a) for a in inputs], dynamic=False)


def _add():
    import torch

    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((3, 5)).astype(np.float32) for _ in range(2))
    return _program(torch.ops.aten.add.Tensor, x, y), (x, y), [x + y]


def test_missing_executorch_is_a_discovery_error(monkeypatch):
    from backend_adapters import executorch as adapter

    monkeypatch.setitem(sys.modules, "executorch.runtime", None)  # import raises ImportError
    for factory in (adapter.xnnpack, adapter.portable):
        with pytest.raises(DiscoveryError) as info:
            factory()
        assert str(info.value) == (
            "executorch is not installed: pip install 'torch-backend-conformance[executorch]' (executorch==1.5.1)"
            " (cannot find executorch.runtime)"
        )


def test_building_the_backend_does_not_import_executorch():
    """The CLI and the pytest controller build the backend only to read its name, profile and manifest:
    importing executorch.exir (~3.5 s) is left to the workers that lower (issue 11's warm re-run)."""
    code = (
        "import sys\n"
        "from conformance.discovery import load\n"
        "b = load('executorch-xnnpack')\n"
        "assert b.manifest.claims('aten.mul.Tensor', 'float32')\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(('executorch.exir', 'executorch.runtime', 'torch')))\n"
        "assert not heavy, heavy[:5]\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
def test_factories_build(xnnpack, portable):
    assert (xnnpack.name, xnnpack.family) == ("executorch-xnnpack", "delegate")
    assert (portable.name, portable.family) == ("executorch-portable", "delegate")
    assert xnnpack.manifest.claims("aten.mul.Tensor", "float32")
    assert not xnnpack.manifest.claims("aten.mul.Tensor", "int32")
    assert portable.manifest.claims("aten.add.Tensor", "float32")
    assert xnnpack.runtime.is_available() and portable.runtime.is_available()
    assert "RT-014" in xnnpack.manifest.not_applicable and "REG-" in portable.manifest.not_applicable


@pytest.mark.slow
@pytest.mark.parametrize("which", ["xnnpack", "portable"])
def test_add_round_trip(which, request):
    backend = request.getfixturevalue(which)
    program, inputs, expected = _add()
    driver = Driver(backend)
    result, _ = driver.preprocess(program)
    assert result.processed_bytes
    if which == "xnnpack":
        assert result.processed_bytes[4:8] == b"XH00"  # XnnpackBackend.preprocess's own payload
    else:
        assert result.processed_bytes[4:8] == b"ET12"  # a whole .pte
        handles = {n.meta["debug_handle"] for n in program.graph.nodes if n.op == "call_function"}
        assert {h for v in result.debug_handle_map.values() for h in v} == handles
    loaded = driver.init(result)
    try:
        ran = driver.execute(loaded, inputs, expected)
    finally:
        driver.destroy(loaded)
    np.testing.assert_allclose(ran.outputs[0], expected[0], rtol=1e-6, atol=1e-6)
    with pytest.raises(BackendError) as info:  # the handle is gone
        backend.runtime.execute(None, loaded.handle, [])
    assert info.value.error is Error.DelegateInvalidHandle


@pytest.mark.slow
def test_wrong_dtype_is_refused_by_executorch(xnnpack):
    from conformance.api import EValue

    program, inputs, expected = _add()
    driver = Driver(xnnpack)
    loaded = driver.init(driver.preprocess(program)[0])
    try:
        args = [EValue(inputs[0].astype(np.float64)), EValue(inputs[1]), EValue(np.zeros_like(expected[0]))]
        with pytest.raises(BackendError) as info:
            xnnpack.runtime.execute(None, loaded.handle, args)
        assert info.value.error is Error.InvalidArgument  # Method::set_inputs' own check, code 0x12
    finally:
        driver.destroy(loaded)


@pytest.mark.slow
def test_undelegated_op_is_refused_as_not_supported(xnnpack):
    import torch

    x = np.ones((5, 4), np.float32)
    index = np.array([0, 2], np.int64)
    program = _program(lambda a, i: torch.ops.aten.index_select.default(a, 0, i), x, index)  # no XNNPACK config
    with pytest.raises(CheckFailure) as info:
        Driver(xnnpack).preprocess(program)
    assert info.value.category is Category.NOT_SUPPORTED
    assert "index_select" in info.value.message and "left undelegated" in info.value.message
    assert "aten.index_select.default(float32[5, 4], int64[2])" in info.value.message  # what the partitioner judged


@pytest.mark.slow
def test_empty_tensor_is_left_undelegated(xnnpack):
    """Documented in XnnpackPartitioner (xnnpack_config.py: "XNNPACK does not support empty tensors"):
    a claimed op on an empty tensor is refused, so NUM reports the claim as PREPROCESS_FAIL."""
    import torch

    program = _program(torch.ops.aten.relu.default, np.ones((0, 3), np.float32))
    with pytest.raises(CheckFailure) as info:
        Driver(xnnpack).preprocess(program)
    assert info.value.category is Category.NOT_SUPPORTED
    assert "aten.relu.default(float32[0, 3]) left undelegated" in info.value.message


@pytest.mark.slow
def test_corrupted_payloads_are_refused(xnnpack):
    program, inputs, expected = _add()
    driver = Driver(xnnpack)
    result, _ = driver.preprocess(program)
    blob = result.processed_bytes
    newer = bytearray(blob)
    newer[39] = ord("2")  # flatbuffer identifier XN01 -> XN02
    truncated = blob[: len(blob) // 2]
    for label, data, errors in (
        ("newer schema", bytes(newer), {Error.DelegateInvalidCompatibility}),
        ("truncated", truncated, {Error.InvalidArgument, Error.DelegateInvalidCompatibility, Error.InvalidProgram}),
    ):
        with pytest.raises(CheckFailure) as info:
            driver.init(result, processed_bytes=data)
        assert info.value.category is Category.INIT_FAIL, label
        assert info.value.__cause__.error in errors, (label, info.value.message)


@pytest.mark.slow
def test_non_utf8_log_message_aborts_only_a_subprocess(et):
    """Known ExecuTorch defect (reports/README.md): a payload whose corruption ends up in an ET_LOG
    message with non-UTF-8 bytes aborts the interpreter (pybind11's stderr redirect raises
    UnicodeDecodeError inside C++). The harness runs checks in xdist workers, so it costs one
    CRASH; here it must stay inside the child process."""
    script = textwrap.dedent(
        """
        import torch
        from backend_adapters.executorch import xnnpack
        from conformance.driver import Driver
        from conformance.programs import export_module
        from conformance.results import CheckFailure

        class Add(torch.nn.Module):
            def forward(self, x, y):
                return x + y

        x = torch.ones(2, 2)
        driver = Driver(xnnpack())
        result, _ = driver.preprocess(export_module(Add(), [x, x], dynamic=False))
        blob = bytearray(result.processed_bytes)
        blob[6] = 0xFF  # header magic XH00 -> XH\\xff0
        try:
            driver.init(result, processed_bytes=bytes(blob))
        except CheckFailure as exc:
            print("REFUSED", exc.message)
        else:
            print("ACCEPTED")
        """
    )
    child = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    aborted = child.returncode in (-signal.SIGABRT, 128 + signal.SIGABRT)
    assert aborted or "REFUSED" in child.stdout, (child.returncode, child.stdout[-500:], child.stderr[-1500:])
    if aborted:
        assert "UnicodeDecodeError" in child.stderr


# ---------------------------------------------------------------------------------------------
# What lowering costs: redundant re-tracing, the disk cache, batches (executorch_lowering's docstring)


SAMPLE_OPS = (
    "aten.add.Tensor", "aten.mul.Tensor", "aten.relu.default", "aten.sigmoid.default", "aten.convolution.default",
    "aten.addmm.default", "aten.max_pool2d.default", "aten.avg_pool2d.default", "aten.cat.default", "aten.mean.dim",
    "aten.prelu.default", "aten.rsqrt.default", "aten.hardtanh.default",
)
"""The operator kinds the lowering-cost measurements used, all in the executorch profile: ops XNNPACK
keeps whole, ops torch decomposes on the way (max_pool2d and prelu are CompositeImplicitAutograd),
ops XNNPACK refuses on some draws (addmm, mean.dim, pooling attributes) and one it crashes on (prelu
of rank 3)."""


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    """Lowerings in this module come from this process, except where a test sets a disk cache up."""
    monkeypatch.setenv("CONFORMANCE_NO_LOWERING_CACHE", "1")


def _sample_calls(name: str, kinds: tuple[str, ...]) -> list:
    """The NUM check's first directed call of each kind in ``kinds`` (no empty tensors)."""
    from conformance import specs
    from conformance.strategies import calls
    from conformance.strategies.directed import draw_directed, plan

    spec = specs.load().op(name)
    strategy = calls(spec, "float32", name)
    out = {}
    for group in plan(spec, "float32"):
        for directive in group:
            if directive.kind in kinds and directive.kind not in out:
                call, _ = draw_directed(strategy, directive, name, "float32")
                if call is not None and all(t.value.size for t in call.tensors()):
                    out[directive.kind] = call
    return [out[k] for k in kinds if k in out]


def _outcome(lower, program, **kwargs):
    """Everything a lowering produced, or what it raised."""

    try:
        lowered = lower(program, [], **kwargs)
    except Exception as exc:
        return ("raised", type(exc).__name__, str(exc))
    named = {k: (e.data, e.alignment) for k, e in lowered.named_data.items()}
    return ("lowered", lowered.processed_bytes, lowered.debug_handle_map, named, lowered.pte)


def _assert_same_both_ways(lower, program, what: str) -> tuple[int, int]:
    """Lower ``program`` as ExecuTorch wrote it and without redundant re-tracing: the same .pte,
    payload, debug handle map, named data, or the same refusal. (skipped, run) re-tracings."""
    from backend_adapters import executorch_lowering as lowering

    full = _outcome(lower, program, skip_retraces=False)
    before = (lowering.STATS.retraces_skipped, lowering.STATS.retraces_run)
    fast = _outcome(lower, program, skip_retraces=True)
    skipped, run = lowering.STATS.retraces_skipped - before[0], lowering.STATS.retraces_run - before[1]
    assert fast[0] == full[0], f"{what}: {full[:3]} as ExecuTorch lowers it, {fast[:3]} without re-tracing"
    if full[0] == "raised":
        assert fast == full, what
    else:
        for label, a, b in zip(("processed bytes", "debug handle map", "named data", ".pte"), full[1:], fast[1:]):
            assert a == b, f"{what}: {label} differ without re-tracing"
    return skipped, run


@pytest.mark.slow
@pytest.mark.parametrize("name", SAMPLE_OPS)
def test_xnnpack_without_redundant_retraces_lowers_the_same(et, name):
    from backend_adapters.executorch_lowering import _lower_xnnpack
    from conformance import specs
    from conformance.programs import build_program

    assert name in specs.load().profile("executorch").ops
    for call in _sample_calls(name, ("model", "attr", "broadcast")):
        skipped, _ = _assert_same_both_ways(_lower_xnnpack, build_program(call), call.describe())
        if executorch_compat.skips_redundant_retraces():  # else (CONFORMANCE_COMPAT=public) every call re-traces
            assert skipped >= 2, f"{call.describe()}: only {skipped} of three run_decompositions skipped"


@pytest.mark.slow
@pytest.mark.parametrize("name", SAMPLE_OPS)
def test_portable_without_redundant_retraces_lowers_the_same(et, name):
    from backend_adapters.executorch_lowering import _lower_portable
    from conformance.programs import build_program

    for call in _sample_calls(name, ("model",)):
        _assert_same_both_ways(_lower_portable, build_program(call), call.describe())


@pytest.mark.slow
def test_contract_programs_and_batches_without_redundant_retraces_lower_the_same(et):
    from backend_adapters.executorch_lowering import _lower_portable, _lower_xnnpack
    from conformance.checks import _support as support
    from conformance.compat.torch import retrace_is_identity
    from conformance.programs import ProgramCache, batch_program

    skips = executorch_compat.skips_redundant_retraces()  # else (CONFORMANCE_COMPAT=public) every call re-traces
    cache = ProgramCache(use_disk=False)
    for name in (*support.CONTRACT_PROGRAMS, *support.SPECIAL_PROGRAMS):
        program = support.contract_program(name, cache).exported
        for lower in (_lower_xnnpack, _lower_portable):
            skipped, run = _assert_same_both_ways(lower, program, f"{lower.__name__}({name})")
            assert (skipped, run) == (((3, 0) if lower is _lower_xnnpack else (1, 0)) if skips else (0, 0)), name
    if compat_torch.builds_programs():  # else no batch (programs.batch_program)
        batch = batch_program(_batch_calls("conv"))
        assert _assert_same_both_ways(_lower_xnnpack, batch.exported, "a batch of 8 convolutions") == ((3, 0) if skips else (0, 0))
    # What the guard turns down: a dynamic program (its ranges would be re-derived), a mutation.
    dynamic = _program_dynamic()
    assert not retrace_is_identity(dynamic, {})
    _assert_same_both_ways(_lower_portable, dynamic, "a dynamic add")


def _program_dynamic():
    import torch

    from conformance.programs import export_module

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    x = torch.ones(3, 4)
    return export_module(Add(), [x, x], dynamic=True)


def _batch_calls(kind: str) -> list:
    """Eight calls of one op that XNNPACK takes (real-world and small shapes, ranks 1 to 4)."""
    from conformance.call import Call, Tensor

    rng = np.random.default_rng(11)

    def f(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    shapes = [(2, 16, 14, 14), (2, 16, 64), (16, 64), (3, 5), (1, 8, 7, 7), (4, 4, 4), (64,), (2, 3, 9, 9)]
    if kind == "add":
        return [Call("aten.add.Tensor", (Tensor(f(*s)), Tensor(f(*s)))) for s in shapes]
    if kind == "relu":
        return [Call("aten.relu.default", (Tensor(f(*s)),)) for s in shapes]
    out = []
    for i in range(8):
        cin, cout, k = [(16, 32, 3), (3, 8, 3), (8, 8, 1), (4, 16, 5)][i % 4]
        side = 14 - i
        out.append(Call("aten.convolution.default", (
            Tensor(f(2, cin, side, side)), Tensor(f(cout, cin, k, k), "parameter"), Tensor(f(cout), "parameter"),
            [1, 1], [k // 2, k // 2], [1, 1], False, [0, 0], 1,
        )))
    return out


@pytest.mark.slow
@BUILT
@pytest.mark.parametrize("kind", ["add", "relu", "conv"])
def test_a_batch_is_one_xnnpack_delegate_and_matches_its_calls_alone(xnnpack, kind):
    from backend_adapters.executorch_runtime import TEMPLATES
    from conformance.checks import _support as support
    from conformance.programs import batch_program, build_program, split_outputs

    calls = _batch_calls(kind)
    batch = batch_program(calls)
    driver = Driver(xnnpack)
    ran = driver.run(batch.exported, batch.inputs, support.eager_outputs(batch.exported, batch.inputs))
    plan = TEMPLATES.find(ran.preprocess_result.processed_bytes).program.execution_plan[0]
    assert [d.id for d in plan.delegates] == ["XnnpackBackend"], "one XNNPACK delegate for the whole batch"
    assert len(plan.inputs) == len(batch.inputs) and len(plan.outputs) == len(calls)
    for call, got in zip(calls, split_outputs(batch, ran.outputs)):
        program = build_program(call)
        inputs = [t.value for t in call.inputs()]
        alone = driver.run(program, inputs, support.eager_outputs(program, inputs)).outputs
        assert [np.asarray(a).tobytes() for a in got] == [np.asarray(a).tobytes() for a in alone], call.describe()


# The disk cache


def _entry(n: int = 1):
    from backend_adapters.executorch_lowering import Lowered
    from conformance.api import DataEntry

    return Lowered(
        processed_bytes=bytes(range(n, n + 64)),
        debug_handle_map={0: (1, 2), 3: (), "name": (4,)},
        named_data={"w": DataEntry(b"\x01" * 10, 16), "b": DataEntry(b"", 1)},
        pte=b"PTE" * n,
    )


def test_disk_cache_round_trips_lowerings_and_refusals(tmp_path):
    from backend_adapters.executorch_lowering import LoweringDiskCache

    cache = LoweringDiskCache(tmp_path)
    assert cache.load("k1") is None
    cache.store("k1", _entry())
    cache.store("k2", BackendError(Error.NotSupported, "refused: aten.relu.default(float32[0, 3]) left undelegated"))
    got = cache.load("k1")
    want = _entry()
    assert (got.processed_bytes, got.debug_handle_map, got.named_data, got.pte) == (
        want.processed_bytes, want.debug_handle_map, want.named_data, want.pte)
    assert got.from_disk and got.reproduced  # nothing to re-run for it
    refusal = cache.load("k2")
    assert isinstance(refusal, BackendError) and refusal.error is Error.NotSupported
    assert refusal.message == "refused: aten.relu.default(float32[0, 3]) left undelegated"
    from backend_adapters.executorch_lowering import CachedCrash, Crash

    cache.store("k3", Crash("IndexError", "tuple index out of range", "Traceback ...\nIndexError"))
    crash = cache.load("k3")
    assert crash == Crash("IndexError", "tuple index out of range", "Traceback ...\nIndexError")
    raised = crash.exception()
    assert isinstance(raised, CachedCrash) and type(raised).__name__ == "IndexError" and str(raised) == "tuple index out of range"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k1.lowered", "k2.lowered", "k3.lowered"]  # no temporary files left


def test_disk_cache_drops_unreadable_entries(tmp_path):
    from backend_adapters.executorch_lowering import LoweringDiskCache

    cache = LoweringDiskCache(tmp_path)
    cache.store("k", _entry())
    data = cache.path("k").read_bytes()
    for damaged in (data[:-1], data[:-1] + bytes([data[-1] ^ 1]), b"", b"garbage" * 10):
        cache.path("k").write_bytes(damaged)
        assert cache.load("k") is None
        assert not cache.path("k").exists()


def test_disk_cache_evicts_the_least_recently_used_beyond_its_size(tmp_path):
    from backend_adapters.executorch_lowering import LoweringDiskCache

    size = len(LoweringDiskCache(tmp_path / "probe")._encode(_entry()))
    cache = LoweringDiskCache(tmp_path / "c", max_bytes=5 * size)
    for i in range(5):
        cache.store(f"k{i}", _entry())
        os.utime(cache.path(f"k{i}"), (1_000_000 + i, 1_000_000 + i))  # k0 oldest
    assert cache.load("k0") is not None  # a hit makes k0 the most recently used
    cache.store("k5", _entry())
    kept = sorted(p.stem for p in (tmp_path / "c").iterdir())
    total = sum(p.stat().st_size for p in (tmp_path / "c").iterdir())
    assert total <= 5 * size and "k5" in kept and "k0" in kept
    assert "k1" not in kept, kept  # the least recently used went first


_WRITER = """
import sys
from backend_adapters.executorch_lowering import Lowered, LoweringDiskCache
from conformance.api import DataEntry
cache = LoweringDiskCache(sys.argv[1])
n = int(sys.argv[2])
for i in range(200):
    cache.store(f"k{i % 3}", Lowered(bytes([n]) * (1000 + 7 * n), {1: (n,)}, {"w": DataEntry(bytes([n]) * 5000, 64)}, pte=b"x" * n))
"""


@pytest.mark.slow
def test_disk_cache_concurrent_writers_never_show_a_partial_entry(tmp_path):
    """xdist workers store the same keys at once: a reader sees a whole entry of one writer, or none."""
    from backend_adapters.executorch_lowering import LoweringDiskCache

    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), str(n)], cwd=ROOT) for n in (1, 2, 3)
    ]
    cache = LoweringDiskCache(tmp_path)
    seen = 0
    while any(w.poll() is None for w in writers):
        for key in ("k0", "k1", "k2"):
            entry = cache.load(key)
            if entry is not None:
                n = entry.debug_handle_map[1][0]
                assert entry.processed_bytes == bytes([n]) * (1000 + 7 * n) and entry.pte == b"x" * n
                assert entry.named_data["w"].data == bytes([n]) * 5000
                seen += 1
    assert [w.returncode for w in writers] == [0, 0, 0]
    assert seen and all(cache.load(k) is not None for k in ("k0", "k1", "k2"))
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))


def _relu_call(shape=(2, 3, 4)):
    from conformance.call import Call, Tensor

    return Call("aten.relu.default", (Tensor(np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape)),))


@pytest.fixture
def fresh_lowering(monkeypatch, tmp_path):
    """This process as a new xdist worker would see it: empty memory caches, a disk cache under tmp_path."""
    from backend_adapters import executorch_lowering as lowering

    monkeypatch.delenv("CONFORMANCE_NO_LOWERING_CACHE", raising=False)
    from conformance import programs

    programs.use_cache_dir(tmp_path)

    def restart():
        monkeypatch.setattr(lowering, "_XNNPACK_CACHE", lowering._Cache())
        monkeypatch.setattr(lowering, "_PORTABLE_CACHE", lowering._Cache())

    restart()
    yield restart
    programs.use_cache_dir(None)


@pytest.mark.slow
@BUILT
def test_disk_cache_serves_num_programs_to_a_new_process(xnnpack, portable, fresh_lowering, tmp_path, monkeypatch):
    from backend_adapters import executorch_lowering as lowering
    from conformance.programs import build_program

    stats = lowering.STATS
    taken, refused = build_program(_relu_call()), build_program(_relu_call((0, 3)))
    for backend in (xnnpack, portable):
        driver = Driver(backend)
        first, _ = driver.preprocess(taken)
        assert lowering.disk_cacheable(taken)
        fresh_lowering()  # a new worker: nothing in memory
        before = (stats.lowerings, stats.disk_hits)
        second, _ = driver.preprocess(build_program(_relu_call()))
        assert (stats.lowerings, stats.disk_hits) == (before[0], before[1] + 1)
        assert (second.processed_bytes, second.debug_handle_map) == (first.processed_bytes, first.debug_handle_map)
        x = _relu_call().inputs()[0].value
        ran = driver.run(taken, [x], [np.maximum(x, 0)])  # served from memory now: the runtime takes it
        np.testing.assert_array_equal(ran.outputs[0], np.maximum(x, 0))
    with pytest.raises(CheckFailure) as info:
        Driver(xnnpack).preprocess(refused)
    fresh_lowering()
    before = stats.lowerings
    with pytest.raises(CheckFailure) as again:
        Driver(xnnpack).preprocess(refused)
    assert stats.lowerings == before and again.value.message == info.value.message
    assert again.value.category is Category.NOT_SUPPORTED
    assert len(list((tmp_path / "lowered").glob("*.lowered"))) == 3  # xnnpack, portable, the refusal

    monkeypatch.setenv("CONFORMANCE_NO_LOWERING_CACHE", "1")
    fresh_lowering()
    before = stats.lowerings
    Driver(xnnpack).preprocess(taken)
    assert stats.lowerings == before + 1  # the variable turns the disk cache off


@BUILT
@pytest.mark.slow
def test_a_crashing_lowering_is_kept_and_raised_again_as_it_was(xnnpack, fresh_lowering, tmp_path):
    """ExecuTorch's ChannelsLastTaggedReshapePass crashes on prelu of rank 3 (a parameter weight): the crash is as
    deterministic as a lowering (same program, ExecuTorch, torch: same key), so a warm run raises it
    again from disk, same type name and message, without lowering (issue 11's warm re-run)."""
    from backend_adapters import executorch_lowering as lowering
    from conformance.call import Call, Tensor
    from conformance.programs import build_program

    def prelu():  # the real-world shape the executorch-xnnpack report fails on
        x = np.linspace(-1, 1, 2 * 16 * 64, dtype=np.float32).reshape(2, 16, 64)
        return build_program(Call("aten.prelu.default", (Tensor(x), Tensor(np.full((16,), 0.25, np.float32), "parameter"))))

    stats = lowering.STATS
    with pytest.raises(CheckFailure) as first:
        Driver(xnnpack).preprocess(prelu())
    assert first.value.category is Category.PREPROCESS_FAIL
    for fresh in (False, True):  # from memory, then from disk in a new worker
        if fresh:
            fresh_lowering()
        before = stats.lowerings
        with pytest.raises(CheckFailure) as again:
            Driver(xnnpack).preprocess(prelu())
        assert stats.lowerings == before
        assert (again.value.category, again.value.message) == (Category.PREPROCESS_FAIL, first.value.message)
        cause = again.value.__cause__
        assert isinstance(cause, lowering.CachedCrash) and type(cause).__name__ == type(first.value.__cause__).__name__
        assert "ChannelsLastTaggedReshapePass" in "".join(cause.__notes__)  # the first traceback travels with it


def test_machine_failures_are_not_kept_as_crashes():
    from backend_adapters.executorch_lowering import Crash

    assert Crash.of(MemoryError()) is None and Crash.of(OSError(28, "No space left on device")) is None
    assert Crash.of(BackendError(Error.Internal, "x")) is None
    kept = Crash.of(IndexError("tuple index out of range"))
    assert (kept.type_name, kept.message) == ("IndexError", "tuple index out of range")


@pytest.mark.slow
@BUILT
def test_contract_programs_are_never_served_from_disk(xnnpack, fresh_lowering, tmp_path, monkeypatch):
    """PRE-002 compares two real preprocess outputs of this process, PRE-008 needs fresh processes that
    really preprocess: contract programs bypass the disk cache, NUM programs (built by the harness) use it."""
    from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend

    from backend_adapters import executorch_lowering as lowering
    from conformance.checks import _support as support
    from conformance.programs import ProgramCache, batch_program, build_program

    cache = ProgramCache(use_disk=False)
    for name in (*support.CONTRACT_PROGRAMS, *support.SPECIAL_PROGRAMS):
        assert not lowering.disk_cacheable(support.contract_program(name, cache).exported), name
    assert lowering.disk_cacheable(build_program(_relu_call()))
    assert lowering.disk_cacheable(batch_program([_relu_call(), _relu_call((5,))]).exported)

    calls = []
    real = XnnpackBackend.preprocess
    monkeypatch.setattr(XnnpackBackend, "preprocess", lambda *a, **k: calls.append(1) or real(*a, **k))
    program = support.contract_program("mlp", cache)
    for _ in range(2):  # two processes, each running PRE-002
        fresh_lowering()
        first, _ = Driver(xnnpack).preprocess(program.fresh())
        second, _ = Driver(xnnpack).preprocess(program.fresh())
        assert first.processed_bytes == second.processed_bytes
    assert len(calls) == 4  # each process: the lowering's preprocess, then the repeat's
    assert not list((tmp_path / "lowered").glob("*.lowered"))


_WARM_WORKER = """
import json, sys
import numpy as np
from backend_adapters import executorch_lowering as lowering
from backend_adapters.executorch import xnnpack
from conformance.driver import Driver
from conformance.programs import build_program
from conformance.programs import use_cache_dir
from tests.adapters.test_executorch import _batch_calls, support_like

use_cache_dir(sys.argv[1])
driver = Driver(xnnpack())
out = []
for call in _batch_calls("conv")[:3]:
    program = build_program(call)
    inputs = [t.value for t in call.inputs()]
    ran = driver.run(program, inputs, support_like(program))
    out.append([ran.preprocess_result.processed_bytes.hex()[:64], np.asarray(ran.outputs[0]).tobytes().hex()[:64]])
print(json.dumps({"lowerings": lowering.STATS.lowerings, "disk_hits": lowering.STATS.disk_hits, "out": out}))
"""


@BUILT
@pytest.mark.slow
def test_a_new_process_with_another_hash_seed_lowers_nothing(xnnpack, fresh_lowering, tmp_path):
    """Keys are the same in every process (no address, no hash order in them): a warm worker takes
    every program from disk, and its runtime runs them as the cold one did."""
    from conformance.programs import build_program

    driver = Driver(xnnpack)
    expected = []
    for call in _batch_calls("conv")[:3]:
        program = build_program(call)
        inputs = [t.value for t in call.inputs()]
        ran = driver.run(program, inputs, support_like(program))
        expected.append([ran.preprocess_result.processed_bytes.hex()[:64], np.asarray(ran.outputs[0]).tobytes().hex()[:64]])
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=ROOT)
    env.pop("CONFORMANCE_NO_LOWERING_CACHE", None)
    child = subprocess.run([sys.executable, "-c", _WARM_WORKER, str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-2000:]
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert (report["lowerings"], report["disk_hits"]) == (0, 3)
    assert report["out"] == expected


def support_like(program) -> list[np.ndarray]:
    return [np.zeros(v.meta["val"].shape, np.float32) for v in program.graph.output_node().args[0]]


@pytest.mark.slow
def test_partial_delegation_runs_the_whole_program_and_names_only_what_xnnpack_took(xnnpack, portable):
    """PARTIAL_DELEGATION (the whole-program checks): the blob is the whole .pte, XNNPACK's partitions
    beside the max pooling its partitioner leaves to ExecuTorch's CPU kernels; the map names only
    the delegated nodes; the outputs are the program's. Without it the program is still refused."""
    import torch

    from conformance.api import PARTIAL_DELEGATION
    from conformance.programs import export_module

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.MaxPool2d(2), torch.nn.ReLU()).eval()
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    program = export_module(model, [torch.from_numpy(x)], dynamic=False)
    with pytest.raises(CheckFailure) as refused:
        Driver(xnnpack).preprocess(program)
    assert refused.value.category is Category.NOT_SUPPORTED and "max_pool2d_with_indices" in refused.value.message
    driver = Driver(xnnpack)
    result, _ = driver.preprocess(program, [PARTIAL_DELEGATION])
    assert result.processed_bytes[4:8] == b"ET12"
    handles = {n.name: n.meta["debug_handle"] for n in program.graph.nodes if n.op == "call_function"}
    named = {h for v in result.debug_handle_map.values() for h in v}
    assert handles["convolution"] in named and handles["relu"] in named and handles["max_pool2d_with_indices"] not in named
    with torch.no_grad():
        expected = model(torch.from_numpy(x)).numpy()
    loaded = driver.init(result)
    try:
        out = driver.execute(loaded, [x], [expected]).outputs[0]
    finally:
        driver.destroy(loaded)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    assert not portable.partial_delegation  # a .pte already: nothing to take part of
