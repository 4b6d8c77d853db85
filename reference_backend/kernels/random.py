"""Random ops: rand, randn, randperm, native_dropout.

Their values are draws, so nothing compares them with eager's or with another run's: the
harness holds them to their law (op spec ``values``; conformance/oracle/laws.py). The draws come
from one NumPy Generator per process, seeded with ``SEED`` at import and again by ``seed``, as
ATen's come from its default CPU generator and ``torch.manual_seed``: a fixed seed and a fixed
sequence of calls give the same values, and two calls give independent ones.
"""

from __future__ import annotations

import numpy as np

from ._dtypes import DEFAULT_FLOAT, bfloat16, float16, float32, float64, int64, is_float
from ._registry import kernel

SEED = 0
_GENERATOR = [np.random.default_rng(SEED)]


def seed(value: int) -> None:
    """Restart the reference's random stream from ``value`` (what ``torch.manual_seed`` does to eager's)."""
    _GENERATOR[0] = np.random.default_rng(value)


def _rng() -> np.random.Generator:
    return _GENERATOR[0]


_DIGITS = {float16: 11, bfloat16: 8, float32: 24, float64: 53}
"""std::numeric_limits<T>::digits: ATen draws U[0,1) as k * 2**-digits, k uniform in [0, 2**digits)."""


def _size(size) -> tuple[int, ...]:
    size = tuple(int(s) for s in size)
    if any(s < 0 for s in size):
        raise ValueError(f"trying to create a tensor with negative dimension: {list(size)}")
    return size


def _float_dtype(dtype, op: str) -> np.dtype:
    dtype = np.dtype(dtype) if dtype is not None else DEFAULT_FLOAT
    if dtype not in _DIGITS:
        raise TypeError(f"{op} is not implemented for {dtype}")  # check_uniform_bounds / normal_kernel
    return dtype


@kernel("aten.rand.default")
def rand(size, *, dtype=None):
    """U[0,1) on the grid of the dtype's precision (ATen's transformation::uniform_real): every
    value exact in the dtype, so never 1.0, which rounding a finer draw into float16 could give."""
    dtype = _float_dtype(dtype, "rand")
    digits = _DIGITS[dtype]
    k = _rng().integers(0, 2**digits, size=_size(size), dtype=np.uint64)
    return (k.astype(np.float64) * 2.0**-digits).astype(dtype)


@kernel("aten.randn.default")
def randn(size, *, dtype=None):
    """N(0,1), drawn in float64 and rounded into the dtype (through float32 for the half types,
    which ATen draws in float)."""
    dtype = _float_dtype(dtype, "randn")
    z = _rng().standard_normal(size=_size(size))
    if dtype in (float16, bfloat16):
        z = z.astype(float32)
    return z.astype(dtype)


def _randperm_limit(dtype: np.dtype) -> int | None:
    """The largest n randperm takes for ``dtype`` (check_supported_max_int_with_precision in
    TensorFactories.cpp: n - 1 must be exact in it), None for no limit that matters."""
    if dtype.kind in "iu":
        return int(np.iinfo(dtype).max) + 1
    if dtype == float16:
        return 2**11 + 1
    if dtype == bfloat16:
        return 2**8 + 1  # eager does not check, and above this returns rounded values that repeat
    return None


@kernel("aten.randperm.default")
def randperm(n, *, dtype=int64):
    dtype = np.dtype(dtype) if dtype is not None else int64
    n = int(n)
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    if dtype.kind == "b":
        raise TypeError("randperm is not implemented for bool")
    limit = _randperm_limit(dtype)
    if limit is not None and n > limit:
        raise ValueError(f"n ({n}) is too large for result tensor type: {dtype}")
    return _rng().permutation(n).astype(dtype)


@kernel("aten.native_dropout.default")
def native_dropout(input, p, train):  # noqa: A002 - ATen's name
    """native_dropout_cpu (aten/src/ATen/native/Dropout.cpp): with training (train True or None)
    the mask keeps each element with probability 1 - p and output = input * mask * scale, scale =
    1/(1-p) rounded to the input's dtype (0 for p = 1), the product rounded once (what eager gives,
    measured: not input / (1-p)); without it output is input and the mask all true.

    An empty input: eager returns (input, empty_like(input)), a mask in the input's dtype, while its
    meta kernel, and so every program, declares a bool mask; the reference follows the program."""
    p = float(p)
    if not 0 <= p <= 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not is_float(input.dtype):
        raise TypeError(f"result type Float can't be cast to the desired output type {input.dtype}")
    if input.size == 0 or not (train is None or train):
        return np.array(input, copy=True), np.ones(input.shape, dtype=bool)
    keep = _rng().random(size=input.shape) < 1.0 - p
    compute = float64 if input.dtype == float64 else float32
    # The scale is rounded to the input's dtype first (through float32 for the half types), as eager's is.
    scale = np.asarray(0.0 if p == 1 else 1.0 / (1.0 - p), float64).astype(compute).astype(input.dtype).astype(compute)
    with np.errstate(invalid="ignore", over="ignore"):
        out = input.astype(compute) * keep.astype(compute) * scale
        return out.astype(input.dtype), keep


__all__ = ["SEED", "seed"]
