"""Graph plumbing: symbolic sizes and runtime asserts that torch.export emits.

Not operators of the spec; they let a program with dynamic dimensions compute
the sizes it passes to view/expand and check its own guards.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ._registry import graph_op


@graph_op("aten.sym_size.int")
def sym_size(self: np.ndarray, dim: int) -> int:
    return int(self.shape[dim])


@graph_op("aten.sym_numel.default")
def sym_numel(self: np.ndarray) -> int:
    return int(self.size)


@graph_op("aten.sym_stride.int")
def sym_stride(self: np.ndarray, dim: int) -> int:
    # Strides of the contiguous tensor the program describes, in elements.
    return int(np.prod(self.shape[dim + 1 :], dtype=np.int64))


@graph_op("aten.sym_storage_offset.default")
def sym_storage_offset(self: np.ndarray) -> int:
    # The program describes its inputs as whole tensors; an offset into a buffer is the runtime's.
    return 0


@graph_op("aten.sym_is_contiguous.default")
def sym_is_contiguous(self: np.ndarray, memory_format=None) -> bool:
    # Inputs reach a backend in any layout and are read through their strides (NUM-001): the
    # contiguous tensor a program describes is contiguous.
    return True


@graph_op("aten._assert_scalar.default")
def assert_scalar(self, assert_msg: str) -> None:
    if not self:
        raise AssertionError(f"runtime assert failed: {assert_msg}")


@graph_op("aten._assert_tensor_metadata.default")
def assert_tensor_metadata(a: np.ndarray, size=None, stride=None, dtype=None, **_placement) -> None:
    if dtype is not None and a.dtype != dtype:
        raise AssertionError(f"tensor metadata assert: dtype {a.dtype} != {dtype}")
    if size is not None and tuple(a.shape) != tuple(size):
        raise AssertionError(f"tensor metadata assert: size {list(a.shape)} != {list(size)}")


@graph_op("aten.sym_constrain_range_for_size.default", "aten.sym_constrain_range.default")
def sym_constrain_range(size, min=None, max=None) -> None:  # noqa: A002 - ATen's names
    if (min is not None and size < min) or (max is not None and size > max):
        raise AssertionError(f"size {size} outside [{min}, {max}]")


_BINARY = {
    "sym.add": operator.add,
    "sym.sub": operator.sub,
    "sym.mul": operator.mul,
    "sym.floordiv": operator.floordiv,
    "sym.truediv": operator.truediv,
    "sym.mod": operator.mod,
    "sym.pow": operator.pow,
    "sym.eq": operator.eq,
    "sym.ne": operator.ne,
    "sym.lt": operator.lt,
    "sym.le": operator.le,
    "sym.gt": operator.gt,
    "sym.ge": operator.ge,
    "sym.and": operator.and_,
    "sym.or": operator.or_,
    "sym.max": max,
    "sym.min": min,
}
for _name, _fn in _BINARY.items():
    graph_op(_name)(lambda a, b, _fn=_fn: _fn(a, b))

graph_op("sym.neg")(operator.neg)
graph_op("sym.not")(operator.not_)
graph_op("sym.ceil")(math.ceil)
graph_op("sym.floor")(math.floor)
graph_op("sym.float")(float)
graph_op("sym.int")(int)
graph_op("sym.sqrt")(math.sqrt)
