"""Tensor element types: ExecuTorch's ScalarType codes and their NumPy dtypes.

Codes follow runtime/core/portable_type/scalar_type.h (the same numbering as
c10::ScalarType). Names are the ones the specs use ("float32", "bfloat16", ...).
bfloat16, float8_e4m3fn and float8_e5m2 are ml_dtypes' NumPy dtypes.

``DTYPE_NAMES`` are the ten dtypes every operator family is specified over ("all" in the
specs); ``EXTRA_DTYPE_NAMES`` are the dtypes eager CPU supports only for some ops (the wide
unsigned integers, complex, float8), which an op spec lists by name or by a named set.
"""

from __future__ import annotations

from enum import IntEnum

import ml_dtypes
import numpy as np


class ScalarType(IntEnum):
    Byte = 0
    Char = 1
    Short = 2
    Int = 3
    Long = 4
    Half = 5
    Float = 6
    Double = 7
    ComplexFloat = 9
    ComplexDouble = 10
    Bool = 11
    BFloat16 = 15
    Float8_e5m2 = 23
    Float8_e4m3fn = 24
    UInt16 = 27
    UInt32 = 28
    UInt64 = 29


_BY_NAME: dict[str, tuple[ScalarType, np.dtype]] = {
    "uint8": (ScalarType.Byte, np.dtype(np.uint8)),
    "int8": (ScalarType.Char, np.dtype(np.int8)),
    "int16": (ScalarType.Short, np.dtype(np.int16)),
    "int32": (ScalarType.Int, np.dtype(np.int32)),
    "int64": (ScalarType.Long, np.dtype(np.int64)),
    "float16": (ScalarType.Half, np.dtype(np.float16)),
    "float32": (ScalarType.Float, np.dtype(np.float32)),
    "float64": (ScalarType.Double, np.dtype(np.float64)),
    "bool": (ScalarType.Bool, np.dtype(np.bool_)),
    "bfloat16": (ScalarType.BFloat16, np.dtype(ml_dtypes.bfloat16)),
    "uint16": (ScalarType.UInt16, np.dtype(np.uint16)),
    "uint32": (ScalarType.UInt32, np.dtype(np.uint32)),
    "uint64": (ScalarType.UInt64, np.dtype(np.uint64)),
    "complex64": (ScalarType.ComplexFloat, np.dtype(np.complex64)),
    "complex128": (ScalarType.ComplexDouble, np.dtype(np.complex128)),
    "float8_e4m3fn": (ScalarType.Float8_e4m3fn, np.dtype(ml_dtypes.float8_e4m3fn)),
    "float8_e5m2": (ScalarType.Float8_e5m2, np.dtype(ml_dtypes.float8_e5m2)),
}
DTYPE_NAMES: tuple[str, ...] = tuple(_BY_NAME)[:10]
"""The ten dtypes of "all" in the specs."""
EXTRA_DTYPE_NAMES: tuple[str, ...] = tuple(_BY_NAME)[10:]
"""Dtypes an op spec names explicitly (eager CPU runs few ops in them)."""
KNOWN_DTYPE_NAMES: tuple[str, ...] = tuple(_BY_NAME)
DTYPE_ORDER: tuple[str, ...] = (
    "bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
    "float8_e5m2", "float8_e4m3fn", "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
)  # fmt: skip
"""The order reports list dtypes in: bool, then integers (unsigned, then signed), then floats, then
complex, each by width (float8_e5m2 before float8_e4m3fn: its range is float16's, e4m3fn's is narrower)."""
_FLOATING = ("float8_e5m2", "float8_e4m3fn", "float16", "bfloat16", "float32", "float64")
_INTEGRAL = ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64")
_COMPLEX = {"complex64": "float32", "complex128": "float64"}
_NAME_BY_CODE = {code: name for name, (code, _) in _BY_NAME.items()}
_NAME_BY_NUMPY = {dt: name for name, (_, dt) in _BY_NAME.items()}


def scalar_type(name: str) -> ScalarType:
    try:
        return _BY_NAME[name][0]
    except KeyError:
        raise ValueError(f"unknown dtype name {name!r}; known: {', '.join(KNOWN_DTYPE_NAMES)}") from None


def numpy_dtype(name_or_code: str | int) -> np.dtype:
    name = name_or_code if isinstance(name_or_code, str) else dtype_name(name_or_code)
    try:
        return _BY_NAME[name][1]
    except KeyError:
        raise ValueError(f"unknown dtype name {name!r}; known: {', '.join(KNOWN_DTYPE_NAMES)}") from None


def dtype_name(value: int | np.dtype | type | object) -> str:
    """The spec name of a ScalarType code, a NumPy dtype, or a torch dtype."""
    if isinstance(value, np.dtype):
        # the common case, first: a dtype's str() is Python code in NumPy, a dict lookup is not
        name = _NAME_BY_NUMPY.get(value)
        if name is not None:
            return name
    if isinstance(value, (int, ScalarType)) and not isinstance(value, bool):
        try:
            return _NAME_BY_CODE[ScalarType(value)]
        except ValueError:
            raise ValueError(f"unsupported ScalarType code {value!r}") from None
    text = str(value)
    if text.startswith("torch."):
        name = text[len("torch."):]
        if name in _BY_NAME:
            return name
        raise ValueError(f"unsupported torch dtype {text}")
    try:
        return _NAME_BY_NUMPY[np.dtype(value)]
    except (KeyError, TypeError):
        raise ValueError(f"unsupported dtype {value!r}") from None


def is_floating(name: str) -> bool:
    """Real floating point, float8 included (complex is not: ``is_complex``)."""
    return name in _FLOATING


def is_integral(name: str) -> bool:
    return name in _INTEGRAL


def is_complex(name: str) -> bool:
    return name in _COMPLEX


def component_dtype(name: str) -> str:
    """The dtype of a complex dtype's real and imaginary parts (complex64: float32); others: themselves."""
    return _COMPLEX.get(name, name)


def complex_dtype(name: str) -> str | None:
    """The complex dtype whose parts are ``name`` (float32: complex64), or None."""
    return next((c for c, part in _COMPLEX.items() if part == name), None)


def torch_dtype(name: str):
    """The torch dtype of a spec name (imports torch)."""
    import torch

    numpy_dtype(name)  # validates the name
    return getattr(torch, name)


def promotable(a: str, b: str) -> bool:
    """Whether eager combines operands of dtypes ``a`` and ``b`` (add, cat, where ...) into a dtype
    of this suite whatever their ranks.

    torch.promote_types (c10/core/ScalarType.cpp) refuses float8 with any other dtype, and the wide
    unsigned integers with anything but themselves and the real floats ("Promotion for uint16,
    uint32, uint64 types is not supported"). A complex 0-d tensor meeting a float16 or bfloat16
    tensor with dims gives complex32 (result_type keeps the float's width), which has no NumPy
    dtype, so those pairs are left out too.
    """
    if a == b:
        return True
    if "float8_e4m3fn" in (a, b) or "float8_e5m2" in (a, b):
        return False
    wide = ("uint16", "uint32", "uint64")
    if a in wide or b in wide:
        other = b if a in wide else a
        return other in ("float16", "bfloat16", "float32", "float64")
    if is_complex(a) or is_complex(b):
        other = b if is_complex(a) else a
        return other not in ("float16", "bfloat16")
    return True
