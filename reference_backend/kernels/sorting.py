"""Sorting and order statistics: sort, topk, median.

The order is ATen's (cpu/SortingKernel.cpp, KeyValueCompAsc/Desc): NaN is greater
than every number, so it sorts last ascending and first descending; -0.0 and 0.0
are equal. The reference orders stably (equal elements keep their input order).
ATen's sort with ``stable=False``, topk and median.dim pick an unspecified order
among equal elements (std::sort, partial sorts and nth_element), so the op specs
draw distinct values for them; with distinct values every order agrees.
"""

from __future__ import annotations

import numpy as np

from ._dtypes import bfloat16, float16, float32, int64, is_bool, is_float
from ._registry import kernel
from .reduction import _require_nonempty, _wrap_dim

_NARROW = tuple(np.dtype(t) for t in (np.bool_, np.uint8, np.int8, np.int16, np.int32)) + (float16, bfloat16, float32)
"""Dtypes whose order keys fit in 32 bits, so a key and an index pack into one uint64."""


def _float_order(f: np.ndarray) -> np.ndarray:
    """Integers ordered like the floats ``f`` (float32 or float64): NaN largest, -0.0 == 0.0."""
    itype = np.int32 if f.dtype == float32 else np.int64
    info = np.iinfo(itype)
    bits = np.ascontiguousarray(f).view(itype)
    # Sign-magnitude to two's complement: a negative float of magnitude m maps to -m.
    ordered = np.where(bits < 0, itype(info.min) - bits, bits)
    return np.where(np.isnan(f), itype(info.max), ordered)


def _sort_key(x: np.ndarray, descending: bool) -> np.ndarray:
    """int64 keys whose ascending order is ATen's order of ``x`` (NaN largest), reversed if ``descending``."""
    if is_float(x.dtype):
        key = _float_order(x.astype(float32) if x.dtype in (float16, bfloat16) else x).astype(int64)
    elif x.dtype == np.uint64:
        key = (x ^ np.uint64(1 << 63)).view(int64)  # flipping the top bit maps uint64's order onto int64's
    else:
        key = x.astype(int64)  # bool as 0/1
    return ~key if descending else key  # ~k = -k - 1 reverses the order without overflow


def _unique_key(x: np.ndarray, axis: int, descending: bool) -> np.ndarray | None:
    """Sort keys with the position along ``axis`` packed in (uint64), so that no two are equal.

    Sorting them by any algorithm gives the stable order; None where the keys take
    64 bits (float64, int64) and leave no room for the position.
    """
    if x.dtype not in _NARROW:
        return None
    n = x.shape[axis]
    position = np.arange(n, dtype=np.uint64).reshape((n,) + (1,) * (x.ndim - 1 - axis))
    shifted = (_sort_key(x, descending) + (1 << 31)).astype(np.uint64)  # 32-bit keys, now >= 0
    return shifted * np.uint64(max(n, 1)) + position


def _order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable sorting permutation along ``axis`` (int64), NaN largest."""
    unique = _unique_key(x, axis, descending)
    if unique is not None:
        return np.argsort(unique, axis=axis).astype(int64)
    return np.argsort(_sort_key(x, descending), axis=axis, kind="stable").astype(int64)


def _first(x: np.ndarray, axis: int, k: int, descending: bool) -> np.ndarray:
    """Indices of the first ``k`` elements of the stable order along ``axis``, in that order."""
    n = x.shape[axis]
    unique = _unique_key(x, axis, descending)
    if unique is None or k in (0, n):
        return np.take(_order(x, axis, descending), np.arange(k), axis=axis)
    # Keys are distinct, so the k smallest are a well-defined set: partition, then sort only them.
    chosen = np.take(np.argpartition(unique, k - 1, axis=axis), np.arange(k), axis=axis)
    keys = np.take_along_axis(unique, chosen, axis=axis)
    return np.take_along_axis(chosen, np.argsort(keys, axis=axis), axis=axis).astype(int64)


def _sort(self, dim, descending: bool):
    x = np.asarray(self)
    axis = _wrap_dim(dim, x.ndim, "sort")
    if x.ndim == 0:
        return x.copy(), np.zeros((), int64)
    indices = _order(x, axis, descending)
    return np.take_along_axis(x, indices, axis=axis), indices


@kernel("aten.sort.default")
def sort(self, dim=-1, descending=False):
    return _sort(self, dim, descending)


@kernel("aten.sort.stable")
def sort_stable(self, *, stable, dim=-1, descending=False):
    # stable=None or False allows any order of equal elements, so a stable order is correct too.
    return _sort(self, dim, descending)


@kernel("aten.topk.default")
def topk(self, k, dim=-1, largest=True, sorted=True):  # noqa: A002 - ATen's name
    """The k largest (smallest) elements along ``dim`` and their indices, in sorted order.

    ``sorted=False`` lets ATen return them in any order; the reference returns them
    sorted, which is one of the allowed orders.
    """
    x = np.asarray(self)
    if is_bool(x.dtype):
        raise TypeError("topk: not implemented for bool tensors")
    axis = _wrap_dim(dim, x.ndim, "topk")
    size = x.shape[axis] if x.ndim else 1
    if not 0 <= k <= size:
        raise IndexError(f"topk: selected index k={k} out of range for a dimension of size {size}")
    if x.ndim == 0:
        return x.copy(), np.zeros((), int64)
    indices = _first(x, axis, k, descending=largest)
    return np.take_along_axis(x, indices, axis=axis), indices


def _check_median_dtype(x: np.ndarray) -> None:
    if is_bool(x.dtype):
        raise TypeError("median: not implemented for bool tensors")


@kernel("aten.median.default")
def median(self):
    """The lower median ((n - 1) // 2-th smallest) of all elements; NaN if any element is NaN."""
    x = np.asarray(self).reshape(-1)
    _check_median_dtype(x)
    if x.size == 0:
        if is_float(x.dtype):
            return np.full((), np.nan, x.dtype)
        # ATen writes NaN converted to the integer type: no defined value.
        raise ValueError("median: the median of an empty integer tensor is undefined")
    if is_float(x.dtype) and np.isnan(x).any():
        return np.full((), np.nan, x.dtype)
    k = (x.size - 1) // 2
    return x[np.argpartition(_sort_key(x, False), k)[k]].copy().reshape(())


@kernel("aten.median.dim")
def median_dim(self, dim, keepdim=False):
    """Lower median along ``dim`` and its index; a slice with NaN gives its first NaN.

    ATen (Sorting.cpp median_with_indices_impl) returns the first NaN of a slice if
    there is one, else runs nth_element, whose index among equal values is
    unspecified; the reference takes the stable order's.
    """
    x = np.asarray(self)
    _check_median_dtype(x)
    axis = _wrap_dim(dim, x.ndim, "median")
    if x.ndim == 0:
        return x.copy(), np.zeros((), int64)
    _require_nonempty(x, (axis,), "median")
    k = (x.shape[axis] - 1) // 2
    unique = _unique_key(x, axis, False)
    if unique is None:
        index = np.take(_order(x, axis, False), [k], axis=axis)
    else:
        index = np.take(np.argpartition(unique, k, axis=axis), [k], axis=axis).astype(int64)
    if is_float(x.dtype):
        nans = np.isnan(x)
        first_nan = np.argmax(nans, axis=axis, keepdims=True)
        index = np.where(nans.any(axis=axis, keepdims=True), first_nan, index).astype(int64)
    values = np.take_along_axis(x, index, axis=axis)
    if not keepdim:
        index, values = np.squeeze(index, axis), np.squeeze(values, axis)
    return values, index

