"""LAZY: the lazy tensor backend interface (torch::lazy::BackendImplInterface) on the lazy device.

These clauses apply to family "lazy" only (other backends get NOT_APPLICABLE
from the plugin before a check runs). A lazy backend's runtime exposes the
torch.lazy APIs the checks drive as ``backend.runtime.lazy``: an object that
implements ``conformance.api.LazyBackendHooks`` (and ``LazyDeviceList`` for
LAZY-010), whose docstrings say what each hook must do. Operator numerics on
the lazy device are NUM-001, run through the same backend.
"""

from __future__ import annotations

import numpy as np

from conformance.api.lazy import EXECUTION_COUNTERS, LazyDeviceList
from conformance.api.scalar_type import DTYPE_NAMES
from conformance.api.tensors import to_numpy, to_torch
from conformance.results import Category, CheckFailure

from . import _support as support
from ._lazy_cases import (
    SCALARS,
    byte_patterns,
    first_difference,
    hooks_of,
    mismatched,
    random_ops,
    same_bits,
    scalar_cases,
    shape_cases,
    training_step,
)

# ---------------------------------------------------------------------------------------------
# LAZY-001 data transfer


def test_LAZY_001_tensor_data_round_trip(backend, result):
    hooks = hooks_of(backend)
    device = hooks.device()
    checked = 0
    failures = []
    for dtype in DTYPE_NAMES:
        patterns = byte_patterns(dtype)
        for label, array in patterns.items():
            source = to_torch(np.ascontiguousarray(array))
            if label.startswith(("transposed", "strided")):  # a non-contiguous torch view of the same values
                base = to_torch(np.ascontiguousarray(patterns["random bits 6x7"]))
                source = base.t() if label.startswith("transposed") else base[::2, 1::3]
            want = to_numpy(source)
            # plain: the lazy tensor may keep the CPU tensor it was made from; through a graph: its
            # data is uploaded as a graph input and the result downloaded from the backend's data.
            for trip in ("plain", "through a graph (clone)"):
                try:
                    on_device = source.to(device)
                    if on_device.dtype != source.dtype or tuple(on_device.shape) != tuple(source.shape):
                        failures.append(f"{dtype} {label}: on the lazy device it is {on_device.dtype}{list(on_device.shape)}")
                        continue
                    if trip == "plain":
                        back = to_numpy(on_device.cpu())
                    else:
                        copied = on_device.clone()
                        hooks.sync()
                        back = to_numpy(copied.cpu())
                except Exception as exc:
                    failures.append(f"{dtype} {label} ({trip}): {type(exc).__name__}: {exc}")
                    continue
                checked += 1
                if not same_bits(want, back):
                    failures.append(f"{dtype} {label} ({trip}): {first_difference(want, back)}")
    result.stats(transfers=checked, dtypes=len(DTYPE_NAMES))
    mismatched(failures, "tensor(s) changed on the way to the lazy device and back")


# ---------------------------------------------------------------------------------------------
# LAZY-002 scalars


def test_LAZY_002_scalars_reach_computations_exactly(backend, result):
    hooks = hooks_of(backend)
    device = hooks.device()
    failures, checked = [], 0
    for dtype in SCALARS:
        for label, fn, tensor in scalar_cases(dtype):
            try:
                want = fn(tensor)
            except Exception:
                continue  # eager refuses this combination: nothing to compare
            try:
                got_lazy = fn(tensor.to(device))
                hooks.sync()
                got = got_lazy.cpu()
            except Exception as exc:
                failures.append(f"{dtype} {label}: {type(exc).__name__}: {exc}")
                continue
            checked += 1
            a, b = to_numpy(want), to_numpy(got)
            if not same_bits(a, b):
                failures.append(f"{dtype} {label}: {first_difference(a, b)}")
    result.stats(computations=checked)
    mismatched(failures, "computation(s) with a scalar differ from eager")


# ---------------------------------------------------------------------------------------------
# LAZY-003 shapes


def test_LAZY_003_shapes_known_before_execution(backend, result):
    import torch

    hooks = hooks_of(backend)
    device = hooks.device()
    checked = 0
    for label, fn, inputs in shape_cases():
        with torch.no_grad():
            want = fn(*inputs)
            lazy_inputs = [t.to(device) for t in inputs]
            hooks.sync()  # transfers done: from here on, nothing may execute until the sync below
            before = {k: hooks.counter_value(k) for k in EXECUTION_COUNTERS}
            got = fn(*lazy_inputs)
            shape, dtype = tuple(got.shape), got.dtype
            after = {k: hooks.counter_value(k) for k in EXECUTION_COUNTERS}
        if (shape, dtype) != (tuple(want.shape), want.dtype):
            raise CheckFailure(
                Category.CONTRACT_VIOLATION,
                f"{label}: before sync the lazy result is {dtype}{list(shape)}, eager computes {want.dtype}{list(want.shape)}",
            )
        moved = {k: (before[k], after[k]) for k in EXECUTION_COUNTERS if before[k] != after[k]}
        if moved:
            raise CheckFailure(
                Category.CONTRACT_VIOLATION,
                f"{label}: tracing and reading the shape executed something (counters moved: {moved})",
            )
        hooks.sync()
        data = got.cpu()
        if (tuple(data.shape), data.dtype) != (shape, dtype):
            raise CheckFailure(
                Category.CONTRACT_VIOLATION,
                f"{label}: the sync materialized {data.dtype}{list(data.shape)}, the traced tensor said {dtype}{list(shape)}",
            )
        tol = dict(atol=1e-3, rtol=1e-3) if dtype.is_floating_point else dict(atol=0, rtol=0)
        if not torch.allclose(data.to(want.dtype), want, equal_nan=True, **tol):
            raise CheckFailure(Category.MISMATCH, f"{label}: the synced values differ from eager's")
        checked += 1
    result.stats(computations=checked)


# ---------------------------------------------------------------------------------------------
# LAZY-004 cache


def test_LAZY_004_cached_computation_reused_and_stable(backend, result):
    import torch

    hooks = hooks_of(backend)
    device = hooks.device()
    program, run = training_step(device)
    _, eager_run = training_step(torch.device("cpu"))
    r = np.random.default_rng(4)
    x = torch.from_numpy(np.array(program.inputs[0]))
    target = torch.from_numpy(r.standard_normal((4, 8)).astype(np.float32))
    x2 = torch.from_numpy(r.standard_normal(tuple(x.shape)).astype(np.float32))

    def once(a, b):
        outs = run(a.to(device), b.to(device))
        hooks.sync()
        return [o.cpu() for o in outs]

    start = hooks.counter_value("UncachedCompile") or 0
    once(x, target)  # warm-up: this first sync also materializes the parameters moved to the device,
    first = once(x, target)  # so the graph of the first step differs from the steady one
    compiles = hooks.counter_value("UncachedCompile") or 0
    cached = hooks.counter_value("CachedCompile") or 0
    second = once(x, target)
    third = once(x2, target)
    new_compiles = (hooks.counter_value("UncachedCompile") or 0) - compiles
    new_cached = (hooks.counter_value("CachedCompile") or 0) - cached
    result.stats(
        compiles_in_first_two_steps=compiles - start,
        uncached_compiles_on_rerun=new_compiles,
        cached_compiles_on_rerun=new_cached,
    )
    if new_compiles:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"re-running the traced step with inputs of the same shapes compiled {new_compiles} new computation(s) "
            "(UncachedCompile grew); the computation cache was not used",
        )
    if new_cached < 2:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"two re-runs of the traced step counted {new_cached} CachedCompile(s); expected a cache hit per run",
        )
    for i, (a, b) in enumerate(zip(first, second)):
        if not same_bits(to_numpy(a), to_numpy(b)):
            raise CheckFailure(
                Category.CONTRACT_VIOLATION,
                f"output {i} of the cached computation differs bitwise from the first run: "
                f"{first_difference(to_numpy(a), to_numpy(b))}",
            )
    eager = eager_run(x2, target)
    stale = next((i for i, (got, want) in enumerate(zip(third, eager)) if not torch.allclose(got, want, atol=1e-5, rtol=1e-5)), None)
    if stale is not None:
        largest = float((third[stale] - eager[stale]).abs().max())
        raise CheckFailure(
            Category.MISMATCH,
            f"output {stale} of the cached computation on other input values differs from eager (max abs {largest:g}): "
            "the cache replayed stale data",
        )


# ---------------------------------------------------------------------------------------------
# LAZY-005 devices


def test_LAZY_005_default_device_type_and_ordinals(backend, result):
    import torch

    hooks = hooks_of(backend)
    kind = hooks.default_device_type()
    if not isinstance(kind, str) or not kind:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"the default device type is {kind!r}, not a device name")
    try:
        torch.device(kind.lower())
    except RuntimeError as exc:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"the default device type {kind!r} names no device: {exc}") from exc
    context = hooks.device_context()
    if getattr(context, "device", None) != kind:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"the default device context is for {getattr(context, 'device', None)!r}, the default device type is {kind!r}",
        )
    plain = torch.ones(3).to(hooks.device())
    if plain.device.type != hooks.device().type or (plain.device.index or 0) != 0:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"a tensor put on {hooks.device()} landed on {plain.device}")
    ordinal = hooks.device(1)
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    y = (x.to(ordinal) * 3 + 1).sum(0)
    if y.device != ordinal:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"a result computed on {ordinal} is on {y.device}")
    hooks.sync()
    if not torch.equal(y.cpu(), (x * 3 + 1).sum(0)):
        raise CheckFailure(Category.MISMATCH, f"a computation on {ordinal} gave {y.cpu().tolist()}")
    # Observation only: the interface defines no multi-device semantics for a single-device backend.
    try:
        mixed = plain + torch.ones(3).to(ordinal)
        hooks.sync()
        mixed_outcome = f"accepted, result on {mixed.device}"
    except Exception as exc:
        mixed_outcome = f"refused: {type(exc).__name__}"
    result.stats(default_device_type=kind, mixing_ordinals=mixed_outcome)


# ---------------------------------------------------------------------------------------------
# LAZY-006 / LAZY-007 random numbers


def test_LAZY_006_seeded_random_ops_reproduce(backend, result):
    import torch

    hooks = hooks_of(backend)
    device = hooks.device()

    def draw(fn, seed):
        hooks.manual_seed(seed)
        value = fn(device)
        hooks.sync()
        return value.cpu()

    equal_to_eager = []
    for name, fn in random_ops().items():
        a, b, c = draw(fn, 1234), draw(fn, 1234), draw(fn, 4321)
        if not torch.equal(a, b):
            raise CheckFailure(Category.CONTRACT_VIOLATION, f"{name}: the same seed gave different values ({a[:4].tolist()} vs {b[:4].tolist()})")
        if torch.equal(a, c):
            raise CheckFailure(Category.CONTRACT_VIOLATION, f"{name}: seeds 1234 and 4321 gave the same values: the seed is ignored")
        torch.manual_seed(1234)
        if torch.equal(fn("cpu"), a):
            equal_to_eager.append(name)
    result.stats(ops=len(random_ops()), same_values_as_eager=equal_to_eager)


def test_LAZY_007_random_values_fixed_when_recorded(backend, result):
    import torch

    hooks = hooks_of(backend)
    device = hooks.device()
    disagreements = []
    for name, fn in random_ops().items():
        hooks.manual_seed(77)
        reference = fn(device)
        hooks.sync()
        reference = reference.cpu()
        for label, between in (
            ("reseeding with another seed", lambda: hooks.manual_seed(78)),
            ("drawing an eager CPU random number", lambda: torch.rand(3)),
        ):
            hooks.manual_seed(77)
            recorded = fn(device)
            between()
            hooks.sync()
            if not torch.equal(recorded.cpu(), reference):
                disagreements.append(f"{name} after {label}")
    result.stats(ops=len(random_ops()), changed=len(disagreements))
    if disagreements:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            "random values recorded on the lazy device changed with what happened between recording and the sync: "
            + ", ".join(disagreements[:8])
            + ("" if len(disagreements) <= 8 else f" (+{len(disagreements) - 8} more)")
            + "; the generator is read when the graph executes, not when the op is recorded",
        )


# ---------------------------------------------------------------------------------------------
# LAZY-008 fallback, LAZY-009 metrics


def test_LAZY_008_eager_fallback_correct_and_counted(backend, result):
    import torch

    hooks = hooks_of(backend)
    device = hooks.device()
    x = torch.from_numpy(np.random.default_rng(8).standard_normal((4, 5)).astype(np.float32))
    forced = "aten::tanh"
    before = hooks.counters()
    try:
        hooks.force_fallback(forced)
        y = (x.to(device) * 2).tanh() + 1
        hooks.sync()
        got = y.cpu()
    finally:
        hooks.force_fallback("")
    after = hooks.counters()
    want = (x * 2).tanh() + 1
    if not torch.allclose(got, want, atol=1e-6, rtol=1e-6):
        raise CheckFailure(Category.MISMATCH, f"tanh forced to the eager fallback differs from eager: {got} vs {want}")
    if after.get(forced, 0) <= before.get(forced, 0):
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"tanh forced to the eager fallback was not counted as {forced}")
    fell_back = sorted(k for k, v in after.items() if k.startswith(hooks.fallback_prefix) and v > before.get(k, 0))
    # An op with no lowering at all falls back by itself; its result must still be eager's.
    probe = support.PROBE_OP  # aten.digamma.default: outside every backend's claims
    before = hooks.counters()
    z = torch.digamma(x.abs().to(device) + 0.5)
    hooks.sync()
    after = hooks.counters()
    want = torch.digamma(x.abs() + 0.5)
    if not torch.allclose(z.cpu(), want, atol=1e-6, rtol=1e-6):
        raise CheckFailure(Category.MISMATCH, f"{probe} on the lazy device differs from eager")
    natural = sorted(k for k, v in after.items() if k.startswith(hooks.fallback_prefix) and v > before.get(k, 0))
    lowered = sorted(k for k, v in after.items() if k.startswith(hooks.ir_prefix) and "digamma" in k and v > before.get(k, 0))
    if not natural and not lowered:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"digamma on the lazy device was counted neither as a fallback ({hooks.fallback_prefix}...) "
            f"nor as a traced op ({hooks.ir_prefix}...)",
        )
    result.stats(forced_fallback_counters=fell_back, digamma_counters=natural or lowered)


def test_LAZY_009_metrics_report_produced(backend, result):
    import torch

    hooks = hooks_of(backend)
    device = hooks.device()
    hooks.reset_metrics()
    a = torch.ones(3, 4).to(device)
    b = torch.full((3, 4), 2.0).to(device)
    c = a * b
    d = c * a
    hooks.sync()
    d.cpu()
    names = list(hooks.counters())
    report = hooks.metrics_report()
    if not isinstance(report, str) or not report.strip():
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"metrics_report() returned {report!r}")
    missing = [n for n in names if n not in report]
    if missing:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"the metrics report does not mention counter(s) {missing[:8]}")
    mul = f"{hooks.ir_prefix}mul"
    if hooks.counter_value(mul) != 2:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"two traced multiplications were counted {hooks.counter_value(mul)!r} time(s) under {mul} "
            f"(counters: {sorted(names)[:12]})",
        )
    hooks.reset_metrics()
    left = {n: v for n, v in hooks.counters().items() if v}
    if left or hooks.counter_value(mul):
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"reset() left counters {left or {mul: hooks.counter_value(mul)}}")
    result.stats(counters=len(names), report_chars=len(report))


# ---------------------------------------------------------------------------------------------
# LAZY-010 device enumeration


def test_LAZY_010_devices_enumerated(backend, result):
    """hooks.devices() (conformance.api.LazyDeviceList): BackendImplInterface::GetBackendDevices."""
    import torch

    hooks = hooks_of(backend)
    if not isinstance(hooks, LazyDeviceList):
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"{backend.name}'s lazy hooks have no devices() (GetBackendDevices); if the backend cannot be "
            "observed enumerating devices, its manifest must declare LAZY-010 not applicable with the reason",
        )
    devices = [(str(kind), int(ordinal)) for kind, ordinal in hooks.devices()]
    if not devices:
        raise CheckFailure(Category.CONTRACT_VIOLATION, "the backend enumerates no devices")
    twice = sorted({d for d in devices if devices.count(d) > 1})
    if twice:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"the device list {devices} names {twice} more than once")
    kind = hooks.default_device_type()
    default = (kind, hooks.device().index or 0)
    if default not in devices:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION, f"the device list {devices} does not contain the default device {default}"
        )
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    want = (x * 3 + 1).sum(0)
    for listed_kind, ordinal in devices:
        if listed_kind != kind:
            continue  # another real device type: not reachable through the default-type lazy device
        device = hooks.device(ordinal)
        y = (x.to(device) * 3 + 1).sum(0)
        hooks.sync()
        if y.device != device or not torch.equal(y.cpu(), want):
            raise CheckFailure(
                Category.MISMATCH, f"listed device {listed_kind}:{ordinal} computed {y.cpu().tolist()} on {y.device}"
            )
    result.stats(devices=devices)
