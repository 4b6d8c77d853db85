"""Tensor creation: full, full_like, fill, scalar_tensor, arange; empty, empty_strided, resize_ (values undefined).

These ops take Python scalars, so the whole semantics is ATen's conversion of a
``Scalar`` to the result dtype (``Scalar::to<T>``, c10/core/Scalar.h, which calls
``checked_convert`` in c10/util/TypeCast.h) and its dtype inference for
``dtype=None`` (a float scalar gives the default dtype float32, an int gives
int64, a bool gives bool; scalar_tensor always gives float32).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ._dtypes import (
    DEFAULT_FLOAT,
    bfloat16,
    bool_,
    complex_from,
    float8_e4m3fn,
    float8_e5m2,
    float16,
    float32,
    float64,
    int64,
    is_bool,
    is_complex,
    is_float,
    is_int,
    real_of,
)
from ._registry import kernel

# numeric_limits<T>::max() of each floating type, the bound of checked_convert.
_FLOAT_MAX = {
    float16: float(np.finfo(np.float16).max),
    bfloat16: float(ml_dtypes.finfo(ml_dtypes.bfloat16).max),
    float32: float(np.finfo(np.float32).max),
    float64: math.inf,
    float8_e4m3fn: float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max),
    float8_e5m2: float(ml_dtypes.finfo(ml_dtypes.float8_e5m2).max),
}
_VIA_FLOAT32 = (float16, bfloat16, float8_e4m3fn, float8_e5m2)
"""c10::Half, BFloat16 and the Float8 types are built from a float: a double rounds twice."""


def _overflow(value, dtype: np.dtype, what: str) -> ValueError:
    return ValueError(f"{what}: value {value!r} cannot be converted to type {dtype} without overflow")


def scalar_to(value, dtype, what: str = "scalar") -> np.ndarray:
    """A Python scalar converted the way ATen's ``Scalar::to<T>`` does, as a 0-d array.

    - bool results: ``value != 0`` (NaN is true); never an overflow.
    - integers: an integral value must lie in [min, max], except that unsigned types
      also take negatives down to -max and wrap them (c10's ``overflows`` lets uint8
      treat -1 as 255); a float value must be finite and in [min, max], then truncates
      toward zero.
    - floats: NaN and +-Inf pass; any other value beyond +-max of the type raises.
      Half types are converted through float32 (c10::Half and c10::BFloat16 are built
      from a float), so a double is rounded twice; int64 converts to float32 directly.

    Eager skips the overflow check when it fills a one-element tensor (Fill.cpp takes a
    scalar fast path): ``torch.full([1], 70000.0, dtype=torch.float16)`` is inf while
    ``torch.full([2], 70000.0, dtype=torch.float16)`` raises. The reference raises in both.
    """
    dtype = np.dtype(dtype)
    if isinstance(value, np.generic):
        value = value.item()
    if is_complex(dtype):  # c10::complex<T> from a Scalar: each part checked and converted like a T
        parts = (value.real, value.imag) if isinstance(value, complex) else (value, 0.0)
        return complex_from(*(scalar_to(p, real_of(dtype), what) for p in parts), dtype)
    if isinstance(value, complex):
        raise TypeError(f"{what}: a complex value for a {dtype} tensor")
    if is_bool(dtype):
        return np.array(value != 0, dtype=bool_)
    if isinstance(value, bool):
        value = int(value)
    if is_int(dtype):
        info = np.iinfo(dtype)
        if isinstance(value, float):
            if not math.isfinite(value) or value < info.min or value > info.max:
                raise _overflow(value, dtype, what)
            value = int(value)  # truncates toward zero, as static_cast does
        low = info.min if info.min < 0 else -int(info.max)
        if value < low or value > info.max:
            raise _overflow(value, dtype, what)
        return np.array(value, dtype=int64).astype(dtype)
    if not is_float(dtype):
        raise TypeError(f"{what}: unsupported dtype {dtype}")
    limit = _FLOAT_MAX[dtype]
    if isinstance(value, int):
        if abs(value) > limit or not -(2**63) <= value < 2**63:
            raise _overflow(value, dtype, what)
        wide = np.array(value, dtype=int64).astype(float32 if dtype in _VIA_FLOAT32 else dtype)
        return wide.astype(dtype)
    value = float(value)
    if math.isfinite(value) and abs(value) > limit:
        raise _overflow(value, dtype, what)
    if dtype in _VIA_FLOAT32:
        return np.array(value, dtype=float64).astype(float32).astype(dtype)
    return np.array(value, dtype=float64).astype(dtype)


def _infer_dtype(value) -> np.dtype:
    """The dtype full() gives a scalar when dtype is None (TensorFactories.cpp, infer_full_dtype)."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    return DEFAULT_FLOAT


def _check_size(size) -> tuple[int, ...]:
    size = tuple(int(s) for s in size)
    if any(s < 0 for s in size):
        raise ValueError(f"trying to create a tensor with negative dimension: {list(size)}")
    return size


@kernel("aten.full.default")
def full(size, fill_value, *, dtype=None):
    dtype = np.dtype(dtype) if dtype is not None else _infer_dtype(fill_value)
    return np.full(_check_size(size), scalar_to(fill_value, dtype, "full"), dtype=dtype)


@kernel("aten.full_like.default")
def full_like(self, fill_value, *, dtype=None):
    dtype = np.dtype(dtype) if dtype is not None else self.dtype
    return np.full(self.shape, scalar_to(fill_value, dtype, "full_like"), dtype=dtype)


@kernel("aten.fill.Scalar")
def fill(self, value):
    """The functional ``self.fill_(value)``: self's shape and dtype, every element the value converted
    like Scalar::to<T> (Fill.cpp fill_out; the same conversion as full_like)."""
    return np.full(self.shape, scalar_to(value, self.dtype, "fill"), dtype=self.dtype)


@kernel("aten.scalar_tensor.default")
def scalar_tensor(s, *, dtype=None):
    dtype = np.dtype(dtype) if dtype is not None else DEFAULT_FLOAT
    return scalar_to(s, dtype, "scalar_tensor")


def _acc(value, acc: np.dtype, what: str):
    """``Scalar::to<accscalar_t>()`` as a Python number."""
    return scalar_to(value, acc, what).item()


def _trunc_div(a: int, b: int) -> int:
    """C++ integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@kernel("aten.arange.start_step")
def arange_start_step(start, end, step=1, *, dtype=None):
    """ATen's arange_out (RangeFactories.cpp) and its CPU kernel (cpu/RangeFactoriesKernel.cpp).

    dtype=None gives int64 when all three scalars are integral (bools count), float32
    otherwise. The scalars are first converted to the accumulate type: int64 for
    integer results (floats truncate: arange(0, 5.5, dtype=int32) has 6 elements,
    arange(0, 5.5, dtype=int64) has 5, because only int64 counts in that type),
    double for float32/float64, float for the half types. The length is
    ceil((end - start) / step) computed in double from the original scalars, except
    for int64. Element i is start + step * i in the accumulate type, rounded to the
    result type once; integers wrap.

    Eager's vectorized loop computes base = T(start + step * i0) for each vector of
    elements and then base + k * step, rounding twice, while its scalar tail rounds
    once; the reference follows the scalar path (see the op spec's notes).
    """
    if dtype is None:
        integral = all(isinstance(v, (bool, int, np.integer, np.bool_)) for v in (start, end, step))
        dtype = int64 if integral else DEFAULT_FLOAT
    dtype = np.dtype(dtype)
    if is_bool(dtype):
        raise TypeError("arange is not implemented for bool")
    acc = int64 if is_int(dtype) else float32 if dtype in (float16, bfloat16) else float64
    xstart, xend, xstep = (_acc(v, acc, "arange") for v in (start, end, step))
    if xstep == 0:
        raise ValueError("arange: step must be nonzero")
    if not (math.isfinite(xstart) and math.isfinite(xend)):
        raise ValueError(f"arange: unsupported range {xstart} -> {xend}")
    if not ((xstep > 0 and xend >= xstart) or (xstep < 0 and xend <= xstart)):
        raise ValueError("arange: upper bound and lower bound inconsistent with step sign")
    if dtype == int64:
        sign = 1 if xstep > 0 else -1
        length = _trunc_div(xend - xstart + xstep - sign, xstep)
    else:
        length = math.ceil((float(end) - float(start)) / float(step))
    if length < 0 or length > 2**62:
        raise ValueError("arange: invalid size, possible overflow?")
    index = np.arange(length, dtype=np.int64)
    if is_int(dtype):
        # int64 arithmetic wraps; the cast to a narrower type wraps again.
        with np.errstate(over="ignore"):
            return (np.int64(xstart) + np.int64(xstep) * index).astype(dtype)
    values = np.asarray(xstart, acc) + np.asarray(xstep, acc) * index.astype(acc)
    return values.astype(dtype)


@kernel("aten.arange.start")
def arange_start(start, end, *, dtype=None):
    return arange_start_step(start, end, 1, dtype=dtype)


@kernel("aten.arange.default")
def arange(end, *, dtype=None):
    return arange_start_step(0, end, 1, dtype=dtype)


# -- ops whose values are undefined ----------------------------------------------------------


@kernel("aten.empty.memory_format")
def empty(size, *, dtype=None):
    """Uninitialized memory, as ATen's: only the shape and dtype are defined (the layout a
    memory_format asks for is in the program's strides; outputs are read logically)."""
    return np.empty(_check_size(size), dtype=np.dtype(dtype) if dtype is not None else DEFAULT_FLOAT)


@kernel("aten.empty_strided.default")
def empty_strided(size, stride, *, dtype=None):
    """empty with the given strides: uninitialized, and the strides say only where the elements
    live, which a logically read output does not show."""
    size = _check_size(size)
    if len(tuple(stride)) != len(size):
        raise ValueError(f"mismatch in length of strides and shape: {list(stride)} for {list(size)}")
    return np.empty(size, dtype=np.dtype(dtype) if dtype is not None else DEFAULT_FLOAT)


@kernel("aten.resize_.default")
def resize_(self, size):
    """``self`` resized to ``size`` (TensorResize.cpp): its elements in flattened order fill the new
    shape as far as they go; the rest is grown storage, uninitialized. A program's resize_ returns
    the resized tensor (torch.export keeps the node and declares no input mutation), so the
    reference returns a new array and leaves ``self`` as it was."""
    size = _check_size(size)
    out = np.empty(size, dtype=self.dtype)
    kept = min(out.size, self.size)
    out.reshape(-1)[:kept] = np.asarray(self).reshape(-1)[:kept]
    return out
