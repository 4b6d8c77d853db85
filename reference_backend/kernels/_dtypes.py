"""PyTorch's type promotion and compute types, for NumPy arrays and Python scalars.

NumPy's own promotion differs from PyTorch's (``int64 + float16`` is float64 in
NumPy, float16 in PyTorch; a 0-d float64 array wins over a float32 array in
NumPy, loses in PyTorch), so kernels never let NumPy choose a result dtype.
The rules below follow c10/core/ScalarType.h (promoteTypes) and
aten/src/ATen/native/TypeProperties.cpp (result_type): tensors with dimensions
outrank 0-d tensors, which outrank Python scalars, unless a lower tier brings a
higher category (bool < integer < floating).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

bfloat16 = np.dtype(ml_dtypes.bfloat16)
float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)

DEFAULT_FLOAT = float32
"""torch.get_default_dtype(): the dtype a Python float takes when it sets the category."""

_INTEGERS = [np.dtype(t) for t in (np.uint8, np.int8, np.int16, np.int32, np.int64)]
_FLOATS = [float16, bfloat16, float32, float64]


def is_float(dtype: np.dtype) -> bool:
    return dtype in _FLOATS


def is_int(dtype: np.dtype) -> bool:
    return dtype in _INTEGERS


def is_bool(dtype: np.dtype) -> bool:
    return dtype == bool_


def _category(dtype: np.dtype) -> int:
    return 2 if is_float(dtype) else 1 if is_int(dtype) else 0


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """torch.promote_types for the real dtypes."""
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    if is_bool(a):
        return b
    if is_bool(b):
        return a
    if is_float(a) and is_float(b):
        if {a, b} == {float16, bfloat16}:
            return float32
        return max(a, b, key=_FLOATS.index)
    if is_float(a):
        return a
    if is_float(b):
        return b
    # Both integers. uint8 with a signed type needs a signed type that holds 0..255.
    if np.dtype(np.uint8) in (a, b):
        other = b if a == np.uint8 else a
        return np.dtype(np.int16) if other == np.int8 else other
    return max(a, b, key=lambda t: t.itemsize)


def _scalar_dtype(value: Any) -> np.dtype:
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    if isinstance(value, (float, np.floating)):
        return float64
    raise TypeError(f"not a tensor or a real scalar: {value!r}")


def result_type(*operands: Any) -> np.dtype:
    """torch.result_type over arrays and Python scalars (None is skipped)."""
    tiers: list[np.dtype | None] = [None, None, None]  # dim > 0, 0-d, Python scalar
    for x in operands:
        if x is None:
            continue
        if isinstance(x, np.ndarray):
            tier, dtype = (0 if x.ndim else 1), x.dtype
        else:
            tier, dtype = 2, _scalar_dtype(x)
            if is_float(dtype):
                dtype = DEFAULT_FLOAT
        tiers[tier] = dtype if tiers[tier] is None else promote_types(tiers[tier], dtype)

    def combine(higher: np.dtype | None, lower: np.dtype | None) -> np.dtype | None:
        if higher is None:
            return lower
        if lower is None or is_float(higher):
            return higher
        if is_bool(higher) or is_float(lower):
            return promote_types(higher, lower)
        return higher

    out = combine(tiers[0], combine(tiers[1], tiers[2]))
    if out is None:
        raise TypeError("result_type needs at least one operand")
    return out


def opmath(dtype: np.dtype) -> np.dtype:
    """The type PyTorch computes in: half types upcast to float32 (at::opmath_type)."""
    return float32 if dtype in (float16, bfloat16) else dtype


def acc_type(dtype: np.dtype) -> np.dtype:
    """The type CPU kernels accumulate products in (at::acc_type): half types in float32,
    integers in int64, float32 and float64 in themselves."""
    if dtype in (float16, bfloat16):
        return float32
    if is_int(dtype):
        return int64
    return dtype


def float_result(dtype: np.dtype) -> np.dtype:
    """Result dtype of an op that always returns floating point (sin of an int is float32)."""
    return dtype if is_float(dtype) else DEFAULT_FLOAT


def as_array(x: Any, dtype: np.dtype) -> np.ndarray:
    """``x`` (array or Python scalar) as an array of ``dtype``."""
    return np.asarray(x).astype(dtype, copy=False)


def cast(x: Any, dtype: np.dtype) -> np.ndarray:
    """Round/convert a computed result to ``dtype``, keeping 0-d results as arrays."""
    return np.asarray(x).astype(dtype, copy=False)
