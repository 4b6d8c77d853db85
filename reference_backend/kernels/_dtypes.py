"""PyTorch's type promotion and compute types, for NumPy arrays and Python scalars.

NumPy's own promotion differs from PyTorch's (``int64 + float16`` is float64 in
NumPy, float16 in PyTorch; a 0-d float64 array wins over a float32 array in
NumPy, loses in PyTorch), so kernels never let NumPy choose a result dtype.
The rules below follow c10/core/ScalarType.h (promoteTypes) and
aten/src/ATen/native/TypeProperties.cpp (result_type): tensors with dimensions
outrank 0-d tensors, which outrank Python scalars, unless a lower tier brings a
higher category (bool < integer < floating < complex).
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
complex64 = np.dtype(np.complex64)
complex128 = np.dtype(np.complex128)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)

DEFAULT_FLOAT = float32
"""torch.get_default_dtype(): the dtype a Python float takes when it sets the category."""

_INTEGERS = [np.dtype(t) for t in (np.uint8, np.int8, np.int16, np.int32, np.int64, np.uint16, np.uint32, np.uint64)]
_WIDE_UNSIGNED = [np.dtype(t) for t in (np.uint16, np.uint32, np.uint64)]
_FLOAT8 = [float8_e4m3fn, float8_e5m2]
_FLOATS = [float16, bfloat16, float32, float64, *_FLOAT8]
_COMPLEX = {complex64: float32, complex128: float64}


def is_float(dtype: np.dtype) -> bool:
    """Real floating point (float8 included; complex is ``is_complex``)."""
    return dtype in _FLOATS


def is_int(dtype: np.dtype) -> bool:
    return dtype in _INTEGERS


def is_bool(dtype: np.dtype) -> bool:
    return dtype == bool_


def is_complex(dtype: np.dtype) -> bool:
    return dtype in _COMPLEX


def real_of(dtype: np.dtype) -> np.dtype:
    """The dtype of a complex dtype's parts (complex64: float32); a real dtype itself."""
    return _COMPLEX.get(np.dtype(dtype), np.dtype(dtype))


def complex_of(dtype: np.dtype) -> np.dtype:
    """c10::toComplexType: the complex dtype with ``dtype``'s parts (float64: complex128)."""
    dtype = np.dtype(dtype)
    if is_complex(dtype):
        return dtype
    if dtype == float64:
        return complex128
    if dtype == float32:
        return complex64
    raise TypeError(f"no complex dtype of {dtype} parts in this suite (complex32 has no NumPy dtype)")


def _category(dtype: np.dtype) -> int:
    return 3 if is_complex(dtype) else 2 if is_float(dtype) else 1 if is_int(dtype) else 0


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """torch.promote_types (c10/core/ScalarType.cpp): float8 promotes with nothing else, the wide
    unsigned integers only with the real floats; complex keeps the wider of the parts."""
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    if a in _FLOAT8 or b in _FLOAT8:
        raise TypeError(f"Promotion for Float8 Types is not supported ({a}, {b})")
    if a in _WIDE_UNSIGNED or b in _WIDE_UNSIGNED:
        other = b if a in _WIDE_UNSIGNED else a
        if not is_float(other):
            raise TypeError(f"Promotion for uint16, uint32, uint64 types is not supported ({a}, {b})")
        return other
    if is_complex(a) or is_complex(b):
        parts = promote_types(real_of(a) if is_complex(a) else a, real_of(b) if is_complex(b) else b)
        return complex_of(parts if is_float(parts) else float32)
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
    if isinstance(value, (complex, np.complexfloating)):
        return complex128
    raise TypeError(f"not a tensor or a scalar: {value!r}")


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
            elif is_complex(dtype):
                dtype = complex_of(DEFAULT_FLOAT)
        tiers[tier] = dtype if tiers[tier] is None else promote_types(tiers[tier], dtype)

    def combine(higher: np.dtype | None, lower: np.dtype | None) -> np.dtype | None:
        # c10's combine_categories (aten/src/ATen/native/TypeProperties.cpp)
        if higher is None:
            return lower
        if lower is None or is_complex(higher):
            return higher
        if is_complex(lower):
            return complex_of(higher) if is_float(higher) else lower  # keeps the float's width
        if is_float(higher):
            return higher
        if is_bool(higher) or is_float(lower):
            return promote_types(higher, lower)
        return higher

    out = combine(tiers[0], combine(tiers[1], tiers[2]))
    if out is None:
        raise TypeError("result_type needs at least one operand")
    return out


def opmath(dtype: np.dtype) -> np.dtype:
    """The type PyTorch computes in: half and float8 types upcast to float32 (at::opmath_type)."""
    return float32 if dtype in (float16, bfloat16, *_FLOAT8) else dtype


def acc_type(dtype: np.dtype) -> np.dtype:
    """The type CPU kernels accumulate products in (at::acc_type): half types in float32,
    integers in int64, float32 and float64 in themselves."""
    if dtype in (float16, bfloat16):
        return float32
    if is_int(dtype):
        return int64
    return dtype


def exact_type(dtype: np.dtype) -> np.dtype:
    """The type the reference sums products of ``dtype`` in: float64 (complex128) for every
    floating type, so that a sum is rounded once, to the result, and any order an implementation
    takes is within the oracle's derived bound of it (op spec ``bound``); int64 for integers,
    where sums wrap as ATen's do."""
    if is_complex(dtype):
        return np.dtype(np.complex128)
    if is_float(dtype):
        return float64
    return acc_type(dtype)


def float_result(dtype: np.dtype) -> np.dtype:
    """Result dtype of an op that always returns floating point (sin of an int is float32, of a
    complex the complex)."""
    return dtype if is_float(dtype) or is_complex(dtype) else DEFAULT_FLOAT


def as_array(x: Any, dtype: np.dtype) -> np.ndarray:
    """``x`` (array or Python scalar) as an array of ``dtype``."""
    return cast(x, dtype)


def cast(x: Any, dtype: np.dtype) -> np.ndarray:
    """Round/convert a computed result to ``dtype``, keeping 0-d results as arrays."""
    x = np.asarray(x)
    if np.dtype(dtype) in _FLOAT8 and x.dtype != dtype:
        return to_float8(x, np.dtype(dtype))
    return x.astype(dtype, copy=False)


_E4M3FN_MAX = float(ml_dtypes.finfo(float8_e4m3fn).max)


def to_float8(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """c10's conversion into a Float8 type: built from a float (a double or an int64 rounds to float32
    first), rounded to nearest even; float8_e4m3fn, which has no infinities, saturates: every value
    beyond +-448, infinities included, becomes +-448 (NaN stays NaN). Measured on torch 2.13: a
    float32 1e6 or inf cast to float8_e4m3fn is 448 (ml_dtypes gives NaN); float8_e5m2 overflows to
    inf like an IEEE type (61440 and above)."""
    x = np.asarray(x)
    with np.errstate(invalid="ignore", over="ignore"):
        if x.dtype not in _FLOAT8 and x.dtype != float32:
            x = x.astype(float32)
        elif x.dtype in _FLOAT8:
            x = x.astype(float32)  # exact
        if dtype == float8_e4m3fn:
            x = np.where(np.isnan(x), x, np.clip(x, -_E4M3FN_MAX, _E4M3FN_MAX))
        return np.asarray(x).astype(dtype)


def complex_from(re: Any, im: Any, dtype: np.dtype) -> np.ndarray:
    """The complex array of ``dtype`` with parts ``re`` and ``im`` (broadcast)."""
    out = np.empty(np.broadcast_shapes(np.shape(re), np.shape(im)), dtype)
    out.real, out.imag = re, im
    return out


def complex_multiply(a: Any, b: Any) -> np.ndarray:
    """(ac - bd) + (ad + bc)i, each part rounded as written: c10::complex's operator* and
    Vectorized<c10::complex>'s (NumPy's multiply fuses products: up to 133 ULP apart in a part).
    Infinities give NaN parts as in eager ((inf + 0i)(1 + 0i) is inf + NaN i)."""
    a, b = np.asarray(a), np.asarray(b)
    with np.errstate(all="ignore"):
        return complex_from(a.real * b.real - a.imag * b.imag, a.real * b.imag + a.imag * b.real, np.result_type(a, b))
