"""Tensor element types: ExecuTorch's ScalarType codes and their NumPy dtypes.

Codes follow runtime/core/portable_type/scalar_type.h (the same numbering as
c10::ScalarType). Names are the ones the specs use ("float32", "bfloat16", ...).
bfloat16 is ml_dtypes' NumPy dtype.
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
    Bool = 11
    BFloat16 = 15


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
}
DTYPE_NAMES: tuple[str, ...] = tuple(_BY_NAME)
DTYPE_ORDER: tuple[str, ...] = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
"""The order reports list dtypes in: bool, then integers, then floats, each by width."""
_NAME_BY_CODE = {code: name for name, (code, _) in _BY_NAME.items()}
_NAME_BY_NUMPY = {dt: name for name, (_, dt) in _BY_NAME.items()}


def scalar_type(name: str) -> ScalarType:
    try:
        return _BY_NAME[name][0]
    except KeyError:
        raise ValueError(f"unknown dtype name {name!r}; known: {', '.join(DTYPE_NAMES)}") from None


def numpy_dtype(name_or_code: str | int) -> np.dtype:
    name = name_or_code if isinstance(name_or_code, str) else dtype_name(name_or_code)
    try:
        return _BY_NAME[name][1]
    except KeyError:
        raise ValueError(f"unknown dtype name {name!r}; known: {', '.join(DTYPE_NAMES)}") from None


def dtype_name(value: int | np.dtype | type | object) -> str:
    """The spec name of a ScalarType code, a NumPy dtype, or a torch dtype."""
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
    return name in ("float16", "bfloat16", "float32", "float64")


def is_integral(name: str) -> bool:
    return name in ("uint8", "int8", "int16", "int32", "int64")


def torch_dtype(name: str):
    """The torch dtype of a spec name (imports torch)."""
    import torch

    numpy_dtype(name)  # validates the name
    return getattr(torch, name)
