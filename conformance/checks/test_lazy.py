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

from conformance.api.lazy import EXECUTION_COUNTERS, LazyBackendHooks, LazyDeviceList, missing_members
from conformance.api.scalar_type import DTYPE_NAMES, numpy_dtype
from conformance.api.tensors import to_numpy, to_torch
from conformance.results import Category, CheckFailure

from . import _support as support


def _hooks(backend) -> LazyBackendHooks:
    hooks = getattr(backend.runtime, "lazy", None)
    if hooks is None:
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"{backend.name} is a lazy backend but its runtime exposes no `lazy` hooks "
            "(conformance.api.LazyBackendHooks); the LAZY clauses cannot reach it",
        )
    if not isinstance(hooks, LazyBackendHooks):
        raise CheckFailure(
            Category.CONTRACT_VIOLATION,
            f"{backend.name}'s lazy hooks lack {', '.join(missing_members(hooks))} of conformance.api.LazyBackendHooks; "
            "the LAZY clauses cannot reach the backend through them",
        )
    return hooks


def _bits(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array).tobytes()


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and _bits(a) == _bits(b)


def _first_difference(a: np.ndarray, b: np.ndarray) -> str:
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{b.dtype}{list(b.shape)} instead of {a.dtype}{list(a.shape)}"
    width = a.dtype.itemsize
    flat_a = np.ascontiguousarray(a).reshape(-1).view(np.uint8).reshape(-1, width) if a.size else a
    flat_b = np.ascontiguousarray(b).reshape(-1).view(np.uint8).reshape(-1, width) if b.size else b
    for i in range(a.size):
        if flat_a[i].tobytes() != flat_b[i].tobytes():
            return (
                f"element {i}: {a.reshape(-1)[i]!r} (0x{flat_a[i].tobytes()[::-1].hex()}) came back as "
                f"{b.reshape(-1)[i]!r} (0x{flat_b[i].tobytes()[::-1].hex()})"
            )
    return "bytes differ"


# ---------------------------------------------------------------------------------------------
# LAZY-001 data transfer


def _patterns(dtype: str) -> dict[str, np.ndarray]:
    """Arrays of ``dtype`` whose bytes must survive the trip: random bits, specials, odd layouts."""
    nd = numpy_dtype(dtype)
    rng = np.random.default_rng(1)
    width = nd.itemsize
    raw = rng.integers(0, 256, size=(6, 7, width), dtype=np.uint8)
    if dtype == "bool":
        random_bits = rng.integers(0, 2, size=(6, 7)).astype(np.bool_)
    else:
        random_bits = raw.view(nd).reshape(6, 7)
    out = {"random bits 6x7": random_bits}
    if nd.kind == "f" or dtype == "bfloat16":
        info_bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[width]
        specials = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0], dtype=nd)
        if dtype == "float32":
            extra = np.array([0x7F800001, 0x7FC00123, 0xFFBFFFFF, 0x00000001, 0x807FFFFF], dtype=info_bits).view(nd)
        elif dtype == "float64":
            extra = np.array([0x7FF0000000000001, 0x7FF8000000000123, 0x0000000000000001], dtype=info_bits).view(nd)
        elif dtype == "float16":
            extra = np.array([0x7C01, 0x7E12, 0x0001, 0x83FF], dtype=info_bits).view(nd)
        else:  # bfloat16
            extra = np.array([0x7F81, 0x7FC1, 0x0001, 0x807F], dtype=info_bits).view(nd)
        out["specials (NaN payloads, signalling NaN, +-inf, -0.0, subnormals)"] = np.concatenate([specials, extra])
        for i, value in enumerate(extra[:2]):
            out[f"single element NaN payload {i} (0x{value.tobytes()[::-1].hex()})"] = np.array([value])
        out["0-d -0.0"] = np.array(-0.0, dtype=nd)
    elif nd.kind in "iu":
        info = np.iinfo(nd)
        out["extremes"] = np.array([info.min, info.max, 0, -1 if info.min < 0 else 1], dtype=nd)
        out["single element max"] = np.array([info.max], dtype=nd)
        out["0-d min"] = np.array(info.min, dtype=nd)
    else:
        out["0-d True"] = np.array(True)
    out["empty 0x3"] = np.empty((0, 3), dtype=nd)
    out["transposed 7x6 view"] = random_bits.T
    out["strided view [::2, 1::3]"] = random_bits[::2, 1::3]
    return out


def test_LAZY_001_tensor_data_round_trip(backend, result):
    hooks = _hooks(backend)
    device = hooks.device()
    checked = 0
    failures = []
    for dtype in DTYPE_NAMES:
        patterns = _patterns(dtype)
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
                if not _same_bits(want, back):
                    failures.append(f"{dtype} {label} ({trip}): {_first_difference(want, back)}")
    result.stats(transfers=checked, dtypes=len(DTYPE_NAMES))
    if failures:
        raise CheckFailure(
            Category.MISMATCH,
            f"{len(failures)} tensor(s) changed on the way to the lazy device and back: " + "; ".join(failures[:6]),
        )


# ---------------------------------------------------------------------------------------------
# LAZY-002 scalars

_SCALARS = {
    "float32": [0.1, 1e300, -1e-310, float("nan"), float("inf"), float("-inf"), -0.0, 2.5, 16777217.0],
    "float64": [0.1, 1e300, 5e-324, float("nan"), float("-inf"), -0.0, 1 / 3, 9007199254740993.0],
    "float16": [0.1, 65519.0, 1e-7, float("nan"), -0.0, 2049.0],
    "bfloat16": [0.1, 3.0e38, float("nan"), -0.0, 257.0],
    "int64": [2**53 + 1, -(2**63), 2**63 - 1, -7, 3],
    "int32": [2**31 - 1, -(2**31), -7, 3],
    "int8": [127, -128, -7],
    "uint8": [255, 7],
    "bool": [True, False],
}


def _scalar_cases(dtype: str):
    import torch

    values = _SCALARS[dtype]
    nd = numpy_dtype(dtype)
    rng = np.random.default_rng(2)
    if dtype == "bool":
        base = rng.integers(0, 2, 5).astype(np.bool_)
    elif nd.kind in "iu":
        base = rng.integers(-3 if nd.kind == "i" else 0, 4, 5).astype(nd)
    else:
        base = rng.standard_normal(5).astype(nd)
    tensor = to_torch(base)
    for value in values:
        yield f"x.add({value!r})", lambda t, v=value: t.add(v) if dtype != "bool" else t.logical_or(torch.tensor(v)), tensor
        if dtype != "bool":
            yield f"x.mul({value!r})", lambda t, v=value: t.mul(v), tensor
        yield (
            f"full((3,), {value!r}, dtype={dtype})",
            lambda t, v=value: torch.full((3,), v, dtype=t.dtype, device=t.device),
            tensor,
        )
        yield f"where(x > 0, x, {value!r})", lambda t, v=value: torch.where(t > 0, t, v) if dtype != "bool" else torch.where(t, t, v), tensor


def test_LAZY_002_scalars_reach_computations_exactly(backend, result):
    hooks = _hooks(backend)
    device = hooks.device()
    failures, checked = [], 0
    for dtype in _SCALARS:
        for label, fn, tensor in _scalar_cases(dtype):
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
            if not _same_bits(a, b):
                failures.append(f"{dtype} {label}: {_first_difference(a, b)}")
    result.stats(computations=checked)
    if failures:
        raise CheckFailure(
            Category.MISMATCH,
            f"{len(failures)} computation(s) with a scalar differ from eager: " + "; ".join(failures[:6]),
        )


# ---------------------------------------------------------------------------------------------
# LAZY-003 shapes


def _shape_cases():
    import torch
    import torch.nn.functional as F

    r = np.random.default_rng(3)
    f32 = lambda *s: torch.from_numpy(r.standard_normal(s).astype(np.float32))  # noqa: E731
    cases = [
        ("broadcast add 4x1x3 + 5x1", lambda a, b: a + b, (f32(4, 1, 3), f32(5, 1))),
        ("int32 + float16 promotes", lambda a, b: a + b, (torch.arange(6, dtype=torch.int32).reshape(2, 3), f32(3).half())),
        ("matmul batch 2x3x4 @ 4x5", torch.matmul, (f32(2, 3, 4), f32(4, 5))),
        ("sum over dim 1 keepdim", lambda a: a.sum(1, keepdim=True), (f32(3, 4, 5),)),
        ("argmax dim 0 (int64)", lambda a: a.argmax(0), (f32(6, 2),)),
        ("comparison (bool)", lambda a, b: a > b, (f32(3, 3), f32(3))),
        ("cat on dim 1", lambda a, b: torch.cat([a, b], 1), (f32(2, 3), f32(2, 5))),
        ("view and permute", lambda a: a.view(3, 2, 4).permute(2, 0, 1), (f32(6, 4),)),
        ("conv2d stride 2", lambda x, w: F.conv2d(x, w, stride=2, padding=1), (f32(1, 3, 9, 9), f32(4, 3, 3, 3))),
        ("index_select", lambda a, i: a.index_select(0, i), (f32(5, 3), torch.tensor([4, 0, 4, 1]))),
        ("empty result", lambda a: a[2:2] * 2, (f32(4, 3),)),
        ("0-d result", lambda a: a.mean(), (f32(4, 3),)),
        ("to float64", lambda a: a.to(torch.float64) * 3, (f32(2, 2),)),
    ]
    for name in ("mlp", "attention", "chain"):
        program = support.contract_program(name)
        inputs = tuple(torch.from_numpy(np.array(a)) for a in program.inputs)
        cases.append((f"contract program {name}", _module_call(program.module), inputs))
    return cases


def _module_call(module):
    import copy

    def call(*inputs):
        device = inputs[0].device
        placed = copy.deepcopy(module).to(device)
        return placed(*inputs)

    return call


def test_LAZY_003_shapes_known_before_execution(backend, result):
    import torch

    hooks = _hooks(backend)
    device = hooks.device()
    checked = 0
    for label, fn, inputs in _shape_cases():
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


def _step(device):
    """A small training-loop-like step: contract mlp forward, a loss-like reduction, an update."""
    import copy

    import torch

    program = support.contract_program("mlp")
    module = copy.deepcopy(program.module).to(device)

    def run(x, target):
        with torch.no_grad():
            y = module(x)
            loss = ((y - target) ** 2).mean()
            scaled = torch.softmax(y, dim=-1) * loss
        return [y, loss, scaled]

    return program, run


def test_LAZY_004_cached_computation_reused_and_stable(backend, result):
    import torch

    hooks = _hooks(backend)
    device = hooks.device()
    program, run = _step(device)
    _, eager_run = _step(torch.device("cpu"))
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
        if not _same_bits(to_numpy(a), to_numpy(b)):
            raise CheckFailure(
                Category.CONTRACT_VIOLATION,
                f"output {i} of the cached computation differs bitwise from the first run: "
                f"{_first_difference(to_numpy(a), to_numpy(b))}",
            )
    for i, (got, want) in enumerate(zip(third, eager_run(x2, target))):
        if not torch.allclose(got, want, atol=1e-5, rtol=1e-5):
            raise CheckFailure(
                Category.MISMATCH,
                f"output {i} of the cached computation on other input values differs from eager "
                f"(max abs {float((got - want).abs().max()):g}): the cache replayed stale data",
            )


# ---------------------------------------------------------------------------------------------
# LAZY-005 devices


def test_LAZY_005_default_device_type_and_ordinals(backend, result):
    import torch

    hooks = _hooks(backend)
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


def _random_ops():
    import torch
    import torch.nn.functional as F

    return {
        "rand": lambda d: torch.rand(16, device=d),
        "randn": lambda d: torch.randn(16, device=d),
        "randint": lambda d: torch.randint(0, 1000, (16,), device=d),
        "uniform_": lambda d: torch.empty(16, device=d).uniform_(-2, 2),
        "normal_": lambda d: torch.empty(16, device=d).normal_(1, 3),
        "bernoulli": lambda d: torch.bernoulli(torch.full((32,), 0.5, device=d)),
        "dropout": lambda d: F.dropout(torch.ones(32, device=d), 0.5, training=True),
    }


def test_LAZY_006_seeded_random_ops_reproduce(backend, result):
    import torch

    hooks = _hooks(backend)
    device = hooks.device()

    def draw(fn, seed):
        hooks.manual_seed(seed)
        value = fn(device)
        hooks.sync()
        return value.cpu()

    equal_to_eager = []
    for name, fn in _random_ops().items():
        a, b, c = draw(fn, 1234), draw(fn, 1234), draw(fn, 4321)
        if not torch.equal(a, b):
            raise CheckFailure(Category.CONTRACT_VIOLATION, f"{name}: the same seed gave different values ({a[:4].tolist()} vs {b[:4].tolist()})")
        if torch.equal(a, c):
            raise CheckFailure(Category.CONTRACT_VIOLATION, f"{name}: seeds 1234 and 4321 gave the same values: the seed is ignored")
        torch.manual_seed(1234)
        if torch.equal(fn("cpu"), a):
            equal_to_eager.append(name)
    result.stats(ops=len(_random_ops()), same_values_as_eager=equal_to_eager)


def test_LAZY_007_random_values_fixed_when_recorded(backend, result):
    import torch

    hooks = _hooks(backend)
    device = hooks.device()
    disagreements = []
    for name, fn in _random_ops().items():
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
    result.stats(ops=len(_random_ops()), changed=len(disagreements))
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

    hooks = _hooks(backend)
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

    hooks = _hooks(backend)
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

    hooks = _hooks(backend)
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
