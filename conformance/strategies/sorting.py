"""Signatures of sorting ops (sort, topk), and tensors with distinct values along a dim.

Eager's order among equal elements is unspecified for sort with ``stable`` unset,
topk and median.dim (std::sort, partial sorts, nth_element), so these signatures can
draw every slice along the sorted dim with pairwise distinct values: NaN at most
once, and -0.0 and 0.0 count as equal.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from conformance.api.scalar_type import is_floating, is_integral, numpy_dtype

from . import Call, Tensor, attr, param, signature
from .shapes import dim_index, shapes
from .values import _int_bounds, arrays, elements


def value_domain(spec, dtype: str) -> str:
    """The op's domain, or ``params.int_domain`` for integer dtypes."""
    if is_integral(dtype):
        return param(spec, "int_domain", spec.domain)
    return spec.domain


def _tie_key(value):
    """Values that compare equal share a key: every NaN, and -0.0 with 0.0."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else value + 0.0
    return value


def distinct_capacity(dtype: str, domain: str) -> int:
    """How many pairwise distinct values ``domain`` has for ``dtype`` (a large number for floats)."""
    if dtype == "bool":
        return 1 if domain in ("positive", "ge_one") else 2
    if is_integral(dtype):
        lo, hi, exclude_zero = _int_bounds(dtype, domain)
        return hi - lo + 1 - (1 if exclude_zero and lo <= 0 <= hi else 0)
    return 1 << 20


def distinct_along(draw, dtype: str, shape: tuple[int, ...], axis: int, domain: str) -> np.ndarray:
    """An array of ``shape`` whose slices along ``axis`` hold pairwise distinct values.

    The caller keeps ``shape[axis]`` within ``distinct_capacity``.
    """
    if not shape:
        return draw(arrays(dtype, (), domain))
    n = shape[axis]
    others = tuple(s for i, s in enumerate(shape) if i != axis)
    count = math.prod(others)
    rows = draw(
        st.lists(
            st.lists(elements(dtype, domain), min_size=n, max_size=n, unique_by=_tie_key),
            min_size=count,
            max_size=count,
        )
    )
    np_dtype = numpy_dtype(dtype)
    carrier = np.float64 if is_floating(dtype) else (np.bool_ if dtype == "bool" else np.int64)
    flat = np.array(rows, dtype=carrier).reshape(others + (n,))
    return np.moveaxis(flat, -1, axis).astype(np_dtype)


def dim_attr(draw, rank: int) -> int:
    """A dim of a tensor of ``rank`` (0-d tensors take 0 or -1), negative spellings included."""
    return draw(dim_index(rank))


def values_along(draw, spec, dtype: str, shape: list[int], axis: int, distinct: bool) -> np.ndarray:
    """Input values: distinct along ``axis`` when ``distinct`` (shrinking that side to fit)."""
    domain = value_domain(spec, dtype)
    if distinct and shape:
        shape[axis] = min(shape[axis], distinct_capacity(dtype, domain))
        return distinct_along(draw, dtype, tuple(shape), axis, domain)
    return draw(arrays(dtype, tuple(shape), domain))


@signature("sort")
def sort(draw, spec, dtype, op):
    """sort(self, dim, descending) and sort.stable(self, *, stable, dim, descending).

    attrs: ``descending``, ``stable`` (sort.stable only). params: ``max_rank`` (4),
    ``distinct`` (default true: slices along ``dim`` hold distinct values, because
    the order of equal elements is unspecified unless ``stable=True``; a drawn
    ``stable=True`` lifts it), ``int_domain``.
    """
    shape = list(draw(shapes(0, param(spec, "max_rank", 4))))
    rank = len(shape)
    kwargs = {}
    if "stable" in spec.attrs:
        kwargs["stable"] = attr(draw, spec, "stable")
    dim = dim_attr(draw, rank)
    kwargs["dim"] = dim
    kwargs["descending"] = attr(draw, spec, "descending")
    distinct = param(spec, "distinct", True) and kwargs.get("stable") is not True
    x = values_along(draw, spec, dtype, shape, dim % max(rank, 1), distinct)
    return Call(op, (Tensor(x),), kwargs)


@signature("topk")
def topk(draw, spec, dtype, op):
    """topk(self, k, dim, largest, sorted) with 0 <= k <= size of ``dim``.

    attrs: ``largest``, ``sorted`` (only true: with sorted=False eager's order is
    unspecified and the comparison is order-sensitive). params: ``max_rank`` (4),
    ``distinct`` (default true: distinct values along ``dim``, since the indices of
    equal elements are unspecified), ``int_domain``.
    """
    shape = list(draw(shapes(0, param(spec, "max_rank", 4))))
    rank = len(shape)
    dim = dim_attr(draw, rank)
    x = values_along(draw, spec, dtype, shape, dim % max(rank, 1), param(spec, "distinct", True))
    size = x.shape[dim] if rank else 1
    k = draw(st.integers(0, size))
    kwargs = {"dim": dim, "largest": attr(draw, spec, "largest"), "sorted": attr(draw, spec, "sorted")}
    return Call(op, (Tensor(x), k), kwargs)
