"""The torch.lazy TorchScript adapter: its mapping onto the contract, the LAZY checks, the findings.

The findings tests pin what reports/notes/lazy.md ("### Findings")
describes, each as its smallest reproduction: if a torch release changes one, its
test fails and the notes entry must be updated.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from backend_adapters import _claims, _exported, lazy  # noqa: E402
from conformance import specs as spec_module  # noqa: E402
from conformance.api import BackendError, Error, EValue  # noqa: E402
from conformance.call import Call, Tensor  # noqa: E402
from conformance.checks import _support as support  # noqa: E402
from conformance.checks import test_lazy as checks  # noqa: E402
from conformance.driver import Driver  # noqa: E402
from conformance.plugin import ResultRecorder  # noqa: E402
from conformance.programs import program_for  # noqa: E402
from conformance.report.model import load_report  # noqa: E402
from conformance.results import Category, CheckFailure  # noqa: E402


@pytest.fixture(scope="module")
def backend():
    return lazy.backend()


def _context():
    from conformance.api import BackendExecutionContext, EventTracer, MemoryAllocator

    return BackendExecutionContext(temp_allocator=MemoryAllocator(1 << 20), event_tracer=EventTracer())


def test_entry_point_family_and_claims(backend):
    assert backend.name == "torch-lazy-ts" and backend.family == "lazy"
    assert backend.runtime.is_available()
    specs = spec_module.load()
    profile = specs.profile("lazy")
    # One list of the lowered ops: the profile's; the claims file names it, the manifest reads it.
    assert _claims.load(lazy.NAME).ops_from.profile == "lazy"
    assert tuple(backend.manifest.ops) == tuple(profile.ops) == lazy.lowered_ops()
    assert set(backend.manifest.ops.values()) == {"*"}
    assert all(c in profile.clauses for c in specs.clauses if c.startswith("LAZY-"))


def test_contract_program_round_trip(backend):
    program = support.contract_program("mlp")
    expected = support.eager_outputs(program.exported, program.inputs)
    ran = Driver(backend).run(program.exported, program.inputs, expected)
    support.compare_outputs(ran.outputs, expected, what="mlp on the lazy device")


def test_fallback_op_refused_as_not_supported(backend):
    program = support.contract_program("unsupported_probe")  # aten.digamma: no lazy lowering
    with pytest.raises(CheckFailure) as info:
        Driver(backend).preprocess(program.fresh())
    assert info.value.category is Category.NOT_SUPPORTED
    assert "digamma" in info.value.message and "eager CPU fallback" in info.value.message


def test_execute_checks_arguments_and_handles(backend):
    program = support.contract_program("chain")
    driver = Driver(backend)
    out, _ = driver.preprocess(program.fresh())
    loaded = driver.init(out)
    x, y = program.inputs
    result = [EValue(np.zeros((4, 8), np.float32))]
    cases = {
        "arity": [EValue(x)] + result,
        "dtype": [EValue(x.astype(np.float64)), EValue(y)] + result,
        "shape": [EValue(np.zeros((5, 8), np.float32)), EValue(y)] + result,
    }
    for label, args in cases.items():
        with pytest.raises(BackendError) as info:
            backend.runtime.execute(_context(), loaded.handle, args)
        assert info.value.error is Error.InvalidArgument, label
    driver.destroy(loaded)
    with pytest.raises(BackendError) as info:
        backend.runtime.execute(_context(), loaded.handle, [EValue(x), EValue(y)] + result)
    assert info.value.error is Error.DelegateInvalidHandle


def test_unreadable_blob_is_invalid_program(backend):
    program = support.contract_program("chain")
    driver = Driver(backend)
    out, _ = driver.preprocess(program.fresh())
    for blob in (b"", out.processed_bytes[: len(out.processed_bytes) // 2], b"PK\x03\x04" + b"\0" * 64):
        with pytest.raises(CheckFailure) as info:
            driver.init(out, processed_bytes=blob)
        assert "InvalidProgram" in info.value.message


def test_size_oblivious_program_survives_serialization():
    """torch.export.save/load of a size-oblivious program whose range_constraints miss a symbol."""
    call = Call("aten.add.Tensor", (Tensor(np.ones((2, 1), np.float32)), Tensor(np.ones((1, 1, 1, 1), np.float32))), {})
    program = program_for(call, dynamic=True)
    before = dict(program.exported.range_constraints)
    loaded = _exported.deserialize(_exported.serialize(program.exported))
    out = loaded.module()(*program.torch_inputs())
    assert torch.equal(out, program.torch_inputs()[0] + program.torch_inputs()[1])
    assert dict(program.exported.range_constraints) == before  # the caller's program is untouched


# -- every LAZY check can fail --------------------------------------------------------------------
#
# test_lazy_checks_need_the_hooks below only proves the guard every check shares (a lazy runtime
# without `lazy` hooks is a CONTRACT_VIOLATION); it does not prove that any check notices a defect.
# Each case here breaks one thing the backend does (a hook, or, for the data path, the ATen calls on
# lazy tensors through a TorchDispatchMode) the way a defective backend would, and asserts that the
# clause's check fails with the expected category and says why.


class _Mode:
    """A TorchDispatchMode applying ``edit(func, args, kwargs, out) -> out`` to ops touching lazy tensors."""

    def __init__(self, edit, before=None):
        from torch.utils._python_dispatch import TorchDispatchMode

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                lazy_args = any(isinstance(a, torch.Tensor) and a.device.type == "lazy" for a in args)
                if before is not None and lazy_args:
                    args, kwargs = before(func, args, kwargs)
                out = func(*args, **kwargs)
                return edit(func, args, kwargs, out) if lazy_args else out

        self.mode = Mode()

    def __enter__(self):
        return self.mode.__enter__()

    def __exit__(self, *exc):
        return self.mode.__exit__(*exc)


def _lossy_download():
    """Downloads (lazy -> cpu) of floating tensors round through bfloat16: a lossy transfer."""

    def edit(func, args, kwargs, out):
        if func is torch.ops.aten._to_copy.default and out.device.type == "cpu" and out.dtype.is_floating_point:
            return out.to(torch.bfloat16).to(out.dtype) if out.dtype is not torch.bfloat16 else out * 1.5
        return out

    return _Mode(edit)


def _narrowed_scalars():
    """Python float scalars reach lazy computations rounded to float32."""

    def before(func, args, kwargs):
        def narrow(a):
            if type(a) is not float:
                return a
            with np.errstate(over="ignore"):
                return float(np.float32(a))

        return tuple(narrow(a) for a in args), {k: narrow(v) for k, v in kwargs.items()}

    return _Mode(lambda func, args, kwargs, out: out, before=before)


def _executes_when_asked(self, name):
    """A backend that runs the pending graph whenever it is queried: tracing is no longer deferred."""
    torch._lazy.mark_step()
    return lazy.LazyHooks.counter_value(self, name)


def _hooks_with(**overrides):
    class Broken(lazy.LazyHooks):
        pass

    for name, value in overrides.items():
        setattr(Broken, name, value)
    return Broken()


def _never_cached(self, name):
    return 0 if name == "CachedCompile" else lazy.LazyHooks.counter_value(self, name)


def _fresh_seed(self, seed):
    torch.seed()  # ignores the seed asked for, as an unimplemented SetRngSeed would


def _devices(listed):
    return lambda self: list(listed)


BROKEN = {
    # clause: (how it is broken, hooks overrides, dispatch mode factory, expected category, message fragment)
    "LAZY-001": ("lossy download", {}, _lossy_download, Category.MISMATCH, "random bits 6x7 (plain)"),
    "LAZY-002": ("scalars narrowed to float32", {}, _narrowed_scalars, Category.MISMATCH, "float64 x.add(0.1)"),
    "LAZY-003": ("executes while tracing", {"counter_value": _executes_when_asked}, None,
                 Category.CONTRACT_VIOLATION, "executed something"),
    "LAZY-004": ("the computation cache never hits", {"counter_value": _never_cached}, None,
                 Category.CONTRACT_VIOLATION, "CachedCompile"),
    "LAZY-005": ("no default device type", {"default_device_type": lambda self: "nodevice"}, None,
                 Category.CONTRACT_VIOLATION, "names no device"),
    "LAZY-006": ("the seed is ignored", {"manual_seed": _fresh_seed}, None,
                 Category.CONTRACT_VIOLATION, "the same seed gave different values"),
    "LAZY-008": ("the forced fallback is ignored", {"force_fallback": lambda self, op: None}, None,
                 Category.CONTRACT_VIOLATION, "was not counted"),
    "LAZY-009": ("an empty metrics report", {"metrics_report": lambda self: ""}, None,
                 Category.CONTRACT_VIOLATION, "metrics_report() returned"),
    "LAZY-010": ("the default device is not listed", {"devices": _devices([("CPU", 3)])}, None,
                 Category.CONTRACT_VIOLATION, "does not contain the default device"),
}
CHECKS = {
    "LAZY-001": checks.test_LAZY_001_tensor_data_round_trip,
    "LAZY-002": checks.test_LAZY_002_scalars_reach_computations_exactly,
    "LAZY-003": checks.test_LAZY_003_shapes_known_before_execution,
    "LAZY-004": checks.test_LAZY_004_cached_computation_reused_and_stable,
    "LAZY-005": checks.test_LAZY_005_default_device_type_and_ordinals,
    "LAZY-006": checks.test_LAZY_006_seeded_random_ops_reproduce,
    "LAZY-007": checks.test_LAZY_007_random_values_fixed_when_recorded,
    "LAZY-008": checks.test_LAZY_008_eager_fallback_correct_and_counted,
    "LAZY-009": checks.test_LAZY_009_metrics_report_produced,
    "LAZY-010": checks.test_LAZY_010_devices_enumerated,
}
FAILS_ON_THE_REAL_BACKEND = {"LAZY-001", "LAZY-007"}
"""The findings (reports/notes/lazy.md): single-element NaN payloads, random values read at the sync."""


def test_hooks_implement_the_protocol(backend):
    from conformance.api import LazyBackendHooks, LazyDeviceList
    from conformance.api.lazy import missing_members

    hooks = backend.runtime.lazy
    assert isinstance(hooks, LazyBackendHooks) and LazyBackendHooks in lazy.LazyHooks.__mro__
    assert missing_members(hooks) == []
    assert not isinstance(hooks, LazyDeviceList) and "LAZY-010" in backend.manifest.not_applicable


def test_hooks_lacking_members_are_a_contract_violation(backend):
    class Partial:
        fallback_prefix = "aten::"

        def sync(self):
            pass

    with pytest.raises(CheckFailure) as info:
        checks.test_LAZY_009_metrics_report_produced(_with_hooks(backend, Partial()), ResultRecorder("LAZY-009"))
    assert info.value.category is Category.CONTRACT_VIOLATION
    assert "lack counter_value, counters, default_device_type, device, device_context" in info.value.message
    assert "sync" not in info.value.message.split("lack")[1].split("of conformance")[0]


def test_every_lazy_clause_has_a_check_and_a_break():
    clauses = {c for c in spec_module.load().clauses if c.startswith("LAZY-")}
    assert clauses == set(CHECKS)
    # LAZY-007 needs no artificial break: the real backend fails it (test_finding_random_values_...).
    assert clauses == set(BROKEN) | {"LAZY-007"} and "LAZY-007" in FAILS_ON_THE_REAL_BACKEND


def _with_hooks(backend, hooks):
    from dataclasses import replace

    class Runtime(lazy.LazyRuntime):
        def __init__(self):
            self.lazy = hooks

    return replace(backend, runtime=Runtime())


@pytest.mark.parametrize("clause", sorted(BROKEN))
def test_lazy_check_fails_on_a_broken_backend(backend, clause):
    how, overrides, mode, category, fragment = BROKEN[clause]
    broken = _with_hooks(backend, _hooks_with(**overrides))
    with pytest.raises(CheckFailure) as info:
        if mode is None:
            CHECKS[clause](broken, ResultRecorder(clause))
        else:
            with mode():
                CHECKS[clause](broken, ResultRecorder(clause))
    assert info.value.category is category, (how, info.value.message)
    assert fragment in info.value.message, (how, info.value.message)


@pytest.mark.parametrize("clause", sorted(set(CHECKS) - FAILS_ON_THE_REAL_BACKEND - {"LAZY-010"}))
def test_lazy_check_passes_on_the_real_backend(backend, clause):
    CHECKS[clause](backend, ResultRecorder(clause))


@pytest.mark.parametrize("clause", sorted(FAILS_ON_THE_REAL_BACKEND))
def test_lazy_check_fails_on_the_real_backend(backend, clause):
    with pytest.raises(CheckFailure):
        CHECKS[clause](backend, ResultRecorder(clause))


def test_device_list_checks():
    """LAZY-010 on hooks that list devices (the TS backend binds none: manifest says not applicable)."""
    real = lazy.backend()
    assert "GetBackendDevices" in real.manifest.not_applicable_reason("LAZY-010")
    good = _with_hooks(real, _hooks_with(devices=_devices([("CPU", 0), ("CPU", 1)])))
    CHECKS["LAZY-010"](good, ResultRecorder("LAZY-010"))
    for listed, fragment in (([], "no devices"), ([("CPU", 0), ("CPU", 0)], "more than once")):
        with pytest.raises(CheckFailure) as info:
            CHECKS["LAZY-010"](_with_hooks(real, _hooks_with(devices=_devices(listed))), ResultRecorder("LAZY-010"))
        assert fragment in info.value.message
    with pytest.raises(CheckFailure) as info:  # the TS hooks have no devices(): the check says so
        CHECKS["LAZY-010"](real, ResultRecorder("LAZY-010"))
    assert "not applicable" in info.value.message


def test_lazy_checks_need_the_hooks(backend):
    from dataclasses import replace

    class Bare(lazy.LazyRuntime):
        def __init__(self):  # no `lazy` hooks
            pass

    bare = replace(backend, runtime=Bare())
    with pytest.raises(CheckFailure) as info:
        checks.test_LAZY_005_default_device_type_and_ordinals(bare, ResultRecorder(None))
    assert info.value.category is Category.CONTRACT_VIOLATION and "`lazy` hooks" in info.value.message


# -- findings (reports/notes/lazy.md) -----------------------------------------------------------


def test_finding_single_element_nan_payload_lost():
    """MakeComputationDataFromTensor uploads a one-element tensor through at::full(tensor.item())."""
    lazy.ensure_initialized()
    bits = np.array([0x7F800001], np.uint32).view(np.float32)  # a signalling NaN
    on_device = torch.from_numpy(bits).to("lazy").clone()
    torch._lazy.mark_step()
    assert on_device.cpu().view(torch.int32).item() == 0x7FC00001  # quieted; eager clone keeps 0x7F800001
    three = torch.from_numpy(np.repeat(bits, 3)).to("lazy").clone()
    torch._lazy.mark_step()
    assert three.cpu().view(torch.int32).tolist() == [0x7F800001] * 3  # more than one element: exact


def test_finding_random_values_read_at_sync_not_at_record():
    lazy.ensure_initialized()
    torch.manual_seed(0)
    recorded = torch.rand(4, device="lazy")
    torch.manual_seed(5)
    torch._lazy.mark_step()
    torch.manual_seed(5)
    assert torch.equal(recorded.cpu(), torch.rand(4))  # the seed in force at the sync decided


def test_finding_first_step_compiles_twice():
    """The first sync also returns the parameters moved to the device, so step 2 compiles again."""
    hooks = lazy.LazyHooks()
    device = hooks.device()
    linear = torch.nn.Linear(4, 3).to(device)
    counts = []
    for _ in range(3):
        with torch.no_grad():
            y = linear(torch.ones(2, 4).to(device))
        hooks.sync()
        y.cpu()
        counts.append(hooks.counter_value("UncachedCompile") or 0)
    assert counts[1] == counts[0] + 1 and counts[2] == counts[1]


@pytest.mark.slow
def test_report_reads_not_applicable_for_delegate_clauses(tmp_path):
    """RT-002 reports NOT_APPLICABLE with the family reason; LAZY-009 runs."""
    import subprocess
    import sys

    out = tmp_path / "r"
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "certify", "torch-lazy-ts", "--profile", "lazy", "--output", str(out),
         "--workers", "0", "--skip-perf", "--", "-k", "RT_002 or LAZY_009 or REG_001"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    results = {r["clause"]: r for r in load_report(out / "torch-lazy-ts" / "report.json")["results"]}
    for clause in ("RT-002", "REG-001"):
        assert results[clause]["category"] == "NOT_APPLICABLE"
        assert "torch-lazy-ts is a lazy backend" in results[clause]["message"]
    assert results["LAZY-009"]["category"] == "PASS"


def test_finding_pixel_shuffle_returns_uninitialized_memory():
    """pixel_shuffle is traced as as_strided_copy of a fresh device_data: the input is never read."""
    lazy.ensure_initialized()
    x = torch.arange(16, dtype=torch.float32).reshape(1, 4, 2, 2) + 1
    y = torch.pixel_shuffle(x.to("lazy"), 2)
    text = torch._C._lazy._get_tensors_text([y])
    torch._lazy.mark_step()
    assert y.shape == (1, 1, 4, 4) and "as_strided_copy" in text
    assert not torch.equal(y.cpu(), torch.pixel_shuffle(x, 2))


def test_finding_stack_keeps_the_first_inputs_dtype():
    lazy.ensure_initialized()
    a, b = torch.tensor(3, dtype=torch.uint8), torch.tensor(2.5)
    s = torch.stack([a.to("lazy"), b.to("lazy")])
    assert s.dtype == torch.uint8 and torch.stack([a, b]).dtype == torch.float32
    torch._lazy.mark_step()
    assert s.cpu().tolist() == [3, 2]


def test_finding_scalar_not_rounded_to_the_tensor_dtype():
    """Eager rounds the Python scalar to float16 (65520 -> inf); torch.lazy keeps it finite."""
    lazy.ensure_initialized()
    x = torch.tensor(float("inf"), dtype=torch.float16)
    got = torch.rsub(x.to("lazy"), 65520.0)
    torch._lazy.mark_step()
    assert got.cpu().item() == float("-inf") and torch.rsub(x, 65520.0).isnan().item()
