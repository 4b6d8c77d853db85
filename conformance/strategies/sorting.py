"""Signatures of sorting ops (sort, topk), and tensors with distinct values along a dim.

Eager's order among equal elements is unspecified for sort with ``stable`` unset,
topk and median.dim (std::sort, partial sorts, nth_element), so these signatures can
draw every slice along the sorted dim with pairwise distinct values: NaN at most
once, and -0.0 and 0.0 count as equal.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import reject
from hypothesis import strategies as st

from conformance.api.scalar_type import is_floating, is_integral, numpy_dtype

from . import Call, Tensor, attr, param, signature
from .shapes import dim_index, shapes
from .values import (
    _as_dtype,
    _finfo,
    _float_bounds,
    _int_bounds,
    _seed_and_mix,
    _uniform_ints,
    arrays,
    edge_values,
    fill_spread,
)


def value_domain(spec, dtype: str) -> str:
    """The op's domain, or ``params.int_domain`` for integer dtypes."""
    if is_integral(dtype):
        return param(spec, "int_domain", spec.domain)
    return spec.domain


def distinct_capacity(dtype: str, domain: str) -> int:
    """How many pairwise distinct values ``domain`` has for ``dtype`` (a large number for floats)."""
    if dtype == "bool":
        return 1 if domain in ("positive", "ge_one") else 2
    if is_integral(dtype):
        lo, hi, exclude_zero = _int_bounds(dtype, domain)
        return hi - lo + 1 - (1 if exclude_zero and lo <= 0 <= hi else 0)
    return 1 << 20


def _keys(values: np.ndarray) -> np.ndarray:
    """int64 keys equal exactly where values tie: every NaN shares one, -0.0 shares 0.0's."""
    if values.dtype == np.float64:
        with np.errstate(invalid="ignore"):
            return np.where(np.isnan(values), np.nan, values + 0.0).view(np.int64)
    return values


def _duplicates(values: np.ndarray) -> np.ndarray:
    """Per row of ``values`` (rows x n): True where an element ties with an earlier one of its row."""
    keys = _keys(values)
    order = np.argsort(keys, axis=1, kind="stable")
    ordered = np.take_along_axis(keys, order, axis=1)
    tied = np.zeros(ordered.shape, dtype=bool)
    tied[:, 1:] = ordered[:, 1:] == ordered[:, :-1]
    out = np.empty_like(tied)
    np.put_along_axis(out, order, tied, axis=1)
    return out


def _in_domain(values: np.ndarray, dtype: str, domain: str) -> np.ndarray:
    if is_floating(dtype):
        return _float_bounds(dtype, domain).admits(values)
    lo, hi, exclude_zero = _int_bounds(dtype, domain)
    return (values >= lo) & (values <= hi) & ((values != 0) if exclude_zero else True)


def _fresh(rng: np.random.Generator, dtype: str, domain: str, k: int) -> np.ndarray:
    """``k`` new values for tied slots, in the carrier (float64 or int64); some may fall outside the domain."""
    if is_floating(dtype):
        bounds = _float_bounds(dtype, domain)
        drawn = rng.uniform(max(bounds.lo, -10.0), min(bounds.hi, 10.0), size=k)
        return _as_dtype(drawn, dtype).astype(np.float64)
    lo, hi, _ = _int_bounds(dtype, domain)
    return _uniform_ints(rng, lo, hi, k)


def _every_value(dtype: str, domain: str) -> np.ndarray | None:
    """Every value of ``domain`` in ``dtype`` once per tie class (None when there are too many to list)."""
    if is_floating(dtype):
        if dtype not in ("float16", "bfloat16"):
            return None
        patterns = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        with np.errstate(invalid="ignore"):
            values = patterns.view(numpy_dtype(dtype)).astype(np.float64)
    else:
        lo, hi, _ = _int_bounds(dtype, domain)
        if hi - lo > 1 << 17:
            return None
        values = np.arange(lo, hi + 1, dtype=np.int64)
    values = values[_in_domain(values, dtype, domain)]
    _, first = np.unique(_keys(values), return_index=True)
    return values[np.sort(first)]


def _make_distinct(rng: np.random.Generator, rows: np.ndarray, dtype: str, domain: str) -> None:
    """Replace, in place, every element that ties with an earlier one of its row by a value new to the row.

    Random values first (a few rounds settle all but the tightest rows), then, for a row still
    tied, a pick among the values its row lacks; ``reject`` when a row is longer than the domain."""
    for _ in range(8):
        bad = _duplicates(rows) | ~_in_domain(rows, dtype, domain)
        if not bad.any():
            return
        rows[bad] = _fresh(rng, dtype, domain, int(bad.sum()))
    bad = _duplicates(rows) | ~_in_domain(rows, dtype, domain)
    if not bad.any():
        return
    pool = _every_value(dtype, domain)
    for r in np.flatnonzero(bad.any(axis=1)):
        row, slots = rows[r], bad[r]
        if pool is None:  # float32/64 or wide ints: random values keep coming
            for _ in range(64):
                row[slots] = _fresh(rng, dtype, domain, int(slots.sum()))
                slots = _duplicates(row[None])[0] | ~_in_domain(row, dtype, domain)
                if not slots.any():
                    break
            else:
                reject()
            continue
        free = pool[~np.isin(_keys(pool), _keys(row[~slots]))]
        if len(free) < slots.sum():
            reject()  # more slots than the domain has distinct values (float16's 65,537-element large case)
        row[slots] = rng.choice(free, size=int(slots.sum()), replace=False)


def _plant_edges(rng: np.random.Generator, rows: np.ndarray, dtype: str, domain: str) -> None:
    """Put the domain's edge values into rows at seeded positions: each special (NaN, +-Inf, +-0.0,
    subnormals, extremes; an integer dtype's min and max) into a row with probability 1/5, each
    other edge value (landmarks) with 1/20."""
    count, n = rows.shape
    edges = edge_values(dtype, domain)
    if is_floating(dtype):
        info = _finfo(dtype)
        marks = {float(info.max), float(info.smallest_subnormal), float(info.smallest_normal), math.inf, 0.0}
        special = [v != v or abs(v) in marks for v in edges]
    else:
        lo, hi, _ = _int_bounds(dtype, domain)
        special = [v in (lo, hi) for v in edges]
    for value, vip in zip(edges, special):
        chosen = np.flatnonzero(rng.random(count) < (0.2 if vip else 0.05))
        rows[chosen, rng.integers(0, n, size=len(chosen))] = value


def fill_distinct(rng: np.random.Generator, dtype: str, shape: tuple[int, ...], axis: int, domain: str, mix: str) -> np.ndarray:
    """``fill_spread`` values of ``shape`` (edge values planted for the mixes with edges), then made
    pairwise distinct along ``axis``. ``shape[axis]`` stays within ``distinct_capacity``."""
    n = shape[axis]
    others = tuple(s for i, s in enumerate(shape) if i != axis)
    count = math.prod(others)
    np_dtype = numpy_dtype(dtype)
    if dtype == "bool":  # n <= 2: True alone, or False and True in a random order
        pick = np.ones((count, n), dtype=bool) if n < 2 else rng.permuted(np.tile([False, True], (count, 1)), axis=1)
        if n == 1 and domain not in ("positive", "ge_one"):
            pick = rng.integers(0, 2, size=(count, 1)).astype(bool)
        rows = pick
    else:
        carrier = np.float64 if is_floating(dtype) else np.uint64 if dtype == "uint64" else np.int64
        rows = fill_spread(rng, dtype, (count, n), domain, mix).astype(carrier)
        if count and n:
            if mix in ("typical+edges", "everything"):
                _plant_edges(rng, rows, dtype, domain)
            _make_distinct(rng, rows, dtype, domain)
    flat = rows.reshape(others + (n,))
    return _as_dtype(np.moveaxis(flat, -1, axis), dtype) if is_floating(dtype) else np.moveaxis(flat, -1, axis).astype(np_dtype)


def distinct_along(draw, dtype: str, shape: tuple[int, ...], axis: int, domain: str) -> np.ndarray:
    """An array of ``shape`` whose slices along ``axis`` hold pairwise distinct values.

    NumPy fills it (``fill_distinct``) from a drawn seed and mix of value classes, as ``arrays``
    does: drawing element by element through hypothesis cost 65,537 draws for the large case.
    The caller keeps ``shape[axis]`` within ``distinct_capacity``.
    """
    if not shape:
        return draw(arrays(dtype, (), domain))
    seed, mix = draw(_seed_and_mix())
    return fill_distinct(np.random.default_rng(seed), dtype, tuple(shape), axis, domain, mix)


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
    ``stable=True`` lifts it, and half of its draws are made of ties, ``with_ties``),
    ``int_domain``.
    """
    shape = list(draw(shapes(0, param(spec, "max_rank", 4))))
    rank = len(shape)
    kwargs = {}
    if "stable" in spec.attrs:
        kwargs["stable"] = attr(draw, spec, "stable")
    dim = dim_attr(draw, rank)
    kwargs["dim"] = dim
    kwargs["descending"] = attr(draw, spec, "descending")
    stable = kwargs.get("stable") is True
    distinct = param(spec, "distinct", True) and not stable
    x = values_along(draw, spec, dtype, shape, dim % max(rank, 1), distinct)
    if stable and rank and draw(st.booleans()):
        x = with_ties(np.random.default_rng(draw(st.integers(0, 2**32 - 1))), x, dim % rank)
    return Call(op, (Tensor(x),), kwargs)


def with_ties(rng: np.random.Generator, x: np.ndarray, axis: int) -> np.ndarray:
    """``x`` with every slice along ``axis`` refilled from its own first third (at least one element),
    so that each value it keeps comes about three times: the ties whose order sort(stable=True)
    defines (input order), which drawn values rarely hold."""
    n = x.shape[axis]
    if n == 0:
        return x
    sources = rng.integers(0, max(1, (n + 2) // 3), size=x.shape)
    return np.take_along_axis(x, sources, axis=axis)


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
