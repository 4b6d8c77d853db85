"""Reflection and replication padding over the last 1, 2 or 3 dims: copies, exact in every dtype.

ATen's CPU kernel (aten/src/ATen/native/cpu/PaddingKernel.cpp, ReflectionPad/ReplicationPad
``index``) reads output position j of a dim of size n padded by (left, right) from input
position k = j - left, folded back into [0, n):

    reflection:  k < 0 -> -k,  k >= n -> 2 * (n - 1) - k   (the edge element is not repeated)
    replication: k clipped to [0, n - 1]

Negative pads crop: the output is the window [-left, n + right) of that extended input, so a
crop on one side and a pad on the other reflect about the input's own edge element, reading
elements the crop removed (reflection_pad1d(arange(5), [-3, 4]) is [3, 4, 3, 2, 1, 0]).
The index arrays are built per dim and gathered in one fancy-indexing step.
"""

from __future__ import annotations

import numpy as np

from ._dtypes import is_float, is_int
from ._registry import kernel


def _checked(self, padding, nd: int, reflect: bool, op: str) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The input and its (left, right) pads per spatial dim, first to last, after ATen's checks
    (aten/src/ATen/native/Padding.h check_valid_input, ReflectionPad.cpp, ReplicationPadding.cpp)."""
    x = np.asarray(self)
    if not (is_float(x.dtype) or is_int(x.dtype)):
        raise TypeError(f'"{op}" not implemented for {x.dtype}')
    padding = [int(p) for p in padding]
    if len(padding) != 2 * nd:
        raise ValueError(f"{op}: padding size is expected to be {2 * nd}, but got: {len(padding)}")
    # The batch dim may be empty; channels and spatial dims may not.
    if x.ndim not in (nd + 1, nd + 2) or 0 in x.shape[x.ndim - nd - 1 :]:
        raise ValueError(
            f"{op}: Expected {nd + 1}D or {nd + 2}D (batch mode) tensor with possibly 0 batch size and "
            f"other non-zero dimensions for input, but got: {list(x.shape)}"
        )
    # padding lists (left, right) of the last dim first, then of the dim before it, ...
    pads = [(padding[2 * i], padding[2 * i + 1]) for i in reversed(range(nd))]
    spatial = x.shape[x.ndim - nd :]
    outs = [n + lo + hi for n, (lo, hi) in zip(spatial, pads)]
    if reflect:
        for n, (lo, hi) in zip(spatial, pads):
            if not (lo < n and hi < n):
                raise ValueError(
                    f"{op}: Padding size should be less than the corresponding input dimension, "
                    f"but got: padding ({lo}, {hi}) of input {list(x.shape)}"
                )
    if any(o < 0 for o in outs):
        raise ValueError(f"{op}: Trying to create tensor with negative dimension: output {outs}")
    # ATen checks only that some output dim is >= 1: a 2d/3d output may be empty along the others.
    if all(o < 1 for o in outs):
        raise ValueError(f"{op}: input {list(spatial)} is too small. Calculated output {outs}")
    return x, pads


def _pad(self, padding, nd: int, reflect: bool, op: str) -> np.ndarray:
    x, pads = _checked(self, padding, nd, reflect, op)
    spatial = x.shape[x.ndim - nd :]
    index = []
    for axis, (n, (lo, hi)) in enumerate(zip(spatial, pads)):
        k = np.arange(-lo, n + hi, dtype=np.int64)
        if reflect:
            k = np.where(k < 0, -k, np.where(k >= n, 2 * (n - 1) - k, k))
        else:
            k = np.clip(k, 0, n - 1)
        shape = [1] * nd
        shape[axis] = -1
        index.append(k.reshape(shape))
    return x[(Ellipsis, *index)]


@kernel("aten.reflection_pad1d.default")
def reflection_pad1d(self, padding):
    return _pad(self, padding, 1, True, "reflection_pad1d")


@kernel("aten.reflection_pad2d.default")
def reflection_pad2d(self, padding):
    return _pad(self, padding, 2, True, "reflection_pad2d")


@kernel("aten.reflection_pad3d.default")
def reflection_pad3d(self, padding):
    return _pad(self, padding, 3, True, "reflection_pad3d")


@kernel("aten.replication_pad2d.default")
def replication_pad2d(self, padding):
    return _pad(self, padding, 2, False, "replication_pad2d")


@kernel("aten.replication_pad3d.default")
def replication_pad3d(self, padding):
    return _pad(self, padding, 3, False, "replication_pad3d")
