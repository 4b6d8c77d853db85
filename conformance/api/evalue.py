"""EValue: the tagged value ``execute`` receives, mirroring runtime/core/evalue.h.

Tensors are NumPy arrays (bfloat16 through ml_dtypes); scalars are Python
int/float/bool; None is None. Tags keep ExecuTorch's numbering. An EValue is
mutable so that a backend can write a scalar output in place, as it would set an
output EValue in C++, and give a tensor output the size it computed at run time
(``resize_tensor``, runtime/core/exec_aten/util/tensor_util.h's namesake).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import numpy as np

from .errors import Error


class Tag(IntEnum):
    None_ = 0
    Tensor = 1
    String = 2
    Double = 3
    Int = 4
    Bool = 5
    ListBool = 6
    ListDouble = 7
    ListInt = 8
    ListTensor = 9


def _infer_tag(value: Any) -> Tag:
    if value is None:
        return Tag.None_
    if isinstance(value, np.ndarray):
        return Tag.Tensor
    if isinstance(value, (bool, np.bool_)):
        return Tag.Bool
    if isinstance(value, (int, np.integer)):
        return Tag.Int
    if isinstance(value, (float, np.floating)):
        return Tag.Double
    if isinstance(value, str):
        return Tag.String
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, np.ndarray) for v in value):
            return Tag.ListTensor
        if all(isinstance(v, (bool, np.bool_)) for v in value):
            return Tag.ListBool
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in value):
            return Tag.ListInt
        if all(isinstance(v, (int, float, np.integer, np.floating)) for v in value):
            return Tag.ListDouble
    raise TypeError(f"EValue cannot hold a {type(value).__name__}")


class EValue:
    """A tagged value. ``EValue(x)`` infers the tag from ``x``."""

    __slots__ = ("capacity", "tag", "value")

    def __init__(self, value: Any = None, *, capacity: np.ndarray | None = None):
        self.tag = _infer_tag(value)
        self.value = value
        self.capacity = capacity
        """For a tensor output whose size the program leaves to run time (a data-dependent size,
        e.g. nonzero's row count): the C-contiguous buffer the runtime allocated at the program's
        upper bound, of which ``resize_tensor`` hands out the leading elements. None otherwise."""

    def is_none(self) -> bool:
        return self.tag is Tag.None_

    def is_tensor(self) -> bool:
        return self.tag is Tag.Tensor

    def is_int(self) -> bool:
        return self.tag is Tag.Int

    def is_double(self) -> bool:
        return self.tag is Tag.Double

    def is_bool(self) -> bool:
        return self.tag is Tag.Bool

    def _expect(self, tag: Tag) -> Any:
        if self.tag is not tag:
            raise TypeError(f"EValue holds {self.tag.name}, not {tag.name}")
        return self.value

    def to_tensor(self) -> np.ndarray:
        return self._expect(Tag.Tensor)

    def to_int(self) -> int:
        return int(self._expect(Tag.Int))

    def to_double(self) -> float:
        return float(self._expect(Tag.Double))

    def to_bool(self) -> bool:
        return bool(self._expect(Tag.Bool))

    def set(self, value: Any) -> None:
        """Replace a scalar output's value; the tag must not change."""
        tag = _infer_tag(value)
        if tag is not self.tag:
            raise TypeError(f"EValue holds {self.tag.name}; cannot set a {tag.name}")
        self.value = value

    def __repr__(self) -> str:
        if self.tag is Tag.Tensor:
            return f"EValue(Tensor {self.value.dtype}{list(self.value.shape)})"
        return f"EValue({self.tag.name} {self.value!r})"


def resize_tensor(evalue: EValue, sizes) -> Error:
    """Give a tensor output the sizes it has at run time (specs/interface.toml NUM-001).

    A program may leave an output's size to run time (a data-dependent size: nonzero's row count).
    The runtime then allocates the output at the upper bound the program states for it
    (``EValue.capacity``) and the backend, once it knows the size, calls this: the output becomes
    the first prod(sizes) elements of that buffer, C-contiguous, in ``sizes``. ``Error.Ok``, or
    ``Error.InvalidArgument`` when ``evalue`` is not a tensor or the sizes exceed the capacity; an
    output allocated at a static size may only be "resized" to that same size (``Error.NotSupported``
    otherwise), as ExecuTorch's static tensors."""
    if evalue.tag is not Tag.Tensor:
        return Error.InvalidArgument
    try:
        sizes = tuple(int(n) for n in sizes)
    except (TypeError, ValueError):
        return Error.InvalidArgument
    if any(n < 0 for n in sizes):
        return Error.InvalidArgument
    storage = evalue.capacity
    if storage is None:
        return Error.Ok if sizes == tuple(evalue.value.shape) else Error.NotSupported
    count = int(np.prod(sizes, dtype=np.int64))
    if len(sizes) != storage.ndim or count > storage.size:
        return Error.InvalidArgument
    evalue.value = storage.reshape(-1)[:count].reshape(sizes)
    return Error.Ok
