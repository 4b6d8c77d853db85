"""What the LAZY checks drive and compare: the backend's lazy hooks (``conformance.api.LazyBackendHooks``),
bit-for-bit comparison of tensors, and the cases each clause runs on the lazy device: byte patterns
(LAZY-001), scalars (LAZY-002), shape-changing computations (LAZY-003), a training-like step
(LAZY-004) and random ops (LAZY-006, LAZY-007)."""

from __future__ import annotations

import numpy as np

from conformance.api.lazy import LazyBackendHooks, missing_members
from conformance.api.scalar_type import numpy_dtype
from conformance.api.tensors import to_torch
from conformance.results import Category, CheckFailure

from . import _support as support


def hooks_of(backend) -> LazyBackendHooks:
    """The backend's lazy hooks (``backend.runtime.lazy``); CONTRACT_VIOLATION where it has none or they are incomplete."""
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


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays have one dtype, one shape and the same bytes (NaN payloads and zero signs included)."""
    return a.dtype == b.dtype and a.shape == b.shape and _bits(a) == _bits(b)


def first_difference(a: np.ndarray, b: np.ndarray) -> str:
    """Where ``b`` first differs from ``a``: its dtype and shape, or the first element whose bytes differ."""
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


def mismatched(failures: list[str], what: str) -> None:
    """MISMATCH naming ``what`` went wrong and the first six ``failures`` ("<case>: <how>"), if there are any."""
    if failures:
        raise CheckFailure(Category.MISMATCH, f"{len(failures)} {what}: " + "; ".join(failures[:6]))


def byte_patterns(dtype: str) -> dict[str, np.ndarray]:
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


SCALARS = {
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


def scalar_cases(dtype: str):
    import torch

    values = SCALARS[dtype]
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


def shape_cases():
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


def training_step(device):
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


def random_ops():
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
