"""Indexing ops: embedding, index_select, gather, index, index_put, scatter family, *_scatter.

Index tensors are int64 or int32 (index.Tensor and index_put also take bool and
uint8 masks). Which ops accept negative indices follows ATen: index and
index_put wrap them like Python; embedding, index_select, gather and the
scatter family refuse them. Every out-of-range index raises IndexError.

Accumulating ops apply duplicates one at a time in increasing order of the
index position, as ATen's serial CPU loops do (cpu/IndexKernel.cpp,
cpu/ScatterGatherKernel.cpp); ``np.ufunc.at`` has exactly that order. index_put
with accumulate=True rounds after every step in the tensor's dtype, half types
included; scatter_add and scatter_reduce accumulate half types in float32 and
round once.
"""

from __future__ import annotations

import numpy as np

from ._dtypes import bfloat16, bool_, cast, float8_e4m3fn, float16, float32, float64, is_bool, is_float, is_int, opmath
from ._registry import kernel
from .creation import scalar_to
from .shape import along, normalize_slice, wrap_dim

_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))


def _index_array(index: np.ndarray, op: str) -> np.ndarray:
    if index.dtype not in _INDEX_DTYPES:
        raise TypeError(f"{op}: expected an int64 or int32 index tensor, got {index.dtype}")
    return index.astype(np.intp, copy=False)


def _check_bounds(index: np.ndarray, size: int, op: str) -> None:
    """Indices must lie in [0, size): these ops do not wrap negatives."""
    if index.size and (index.min() < 0 or index.max() >= size):
        bad = index[(index < 0) | (index >= size)].flat[0]
        raise IndexError(f"{op}: index {bad} is out of bounds for dimension with size {size}")


def copy_cast(src: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``Tensor.copy_``'s conversion: half types are built from float32 (c10::Half(float))."""
    if src.dtype == dtype:
        return src
    if dtype in (float16, bfloat16):
        src = src.astype(float32)  # exact for every source but float64 and the large integers
    return src.astype(dtype)


@kernel("aten.embedding.default")
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight``; padding_idx, scale_grad_by_freq and sparse only affect gradients."""
    if weight.ndim != 2:
        raise ValueError(f"embedding: 'weight' must be 2-D, got rank {weight.ndim}")
    idx = _index_array(indices, "embedding")
    _check_bounds(idx, weight.shape[0], "embedding")
    return weight[idx]


@kernel("aten.index_select.default")
def index_select(self, dim, index):
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    idx = _index_array(index, "index_select").reshape(-1)
    d = wrap_dim(dim, self.ndim)
    if self.ndim == 0:
        if idx.size != 1:
            raise ValueError(f"index_select(): index to a scalar can have only 1 value, got {idx.size}")
        _check_bounds(idx, 1, "index_select")
        return self.copy()
    _check_bounds(idx, self.shape[d], "index_select")
    return np.take(self, idx, axis=d)


def _grid(shape: tuple[int, ...], dim: int, index: np.ndarray) -> tuple:
    """The fancy index reading ``t[i0, .., index[i], .., in]`` for every position i of ``shape``."""
    out = []
    for d, n in enumerate(shape):
        if d == dim:
            out.append(index)
        else:
            axis = [1] * len(shape)
            axis[d] = n
            out.append(np.arange(n).reshape(axis))
    return tuple(out)


def _scatter_gather_setup(self, dim, index, src, op: str):
    """Checks of ATen's gather/scatter (ScatterGatherChecks.h), 0-d tensors counting as 1-d.

    Returns ``self`` as at least 1-d, the wrapped dim, the index as at least 1-d intp and
    the fancy index of the positions it addresses; for an empty index, None for both:
    scatter_gather_dtype_check and the shape checks look only at an index with elements
    (measured on torch 2.13: gather of an empty uint8, bool or float32 index, of any rank,
    is an empty result of the index's shape; scatter returns self).
    """
    d = wrap_dim(dim, self.ndim)
    base = self.reshape(1) if self.ndim == 0 else self
    if index.size == 0:
        return base, d, None, None
    idx = _index_array(index, op)
    idx = idx.reshape(1) if idx.ndim == 0 else idx
    if idx.ndim != base.ndim:
        raise ValueError(f"{op}: index tensor must have the same number of dimensions as the input tensor")
    if src is not None:
        src_shape = src.shape or (1,)
        if len(src_shape) != base.ndim:
            raise ValueError(f"{op}: index tensor must have the same number of dimensions as the src tensor")
    for k in range(base.ndim):
        if k != d and idx.shape[k] > base.shape[k]:
            raise ValueError(
                f"{op}: index {list(idx.shape)} must be no larger than self {list(base.shape)} apart from dimension {d}"
            )
        if src is not None and idx.shape[k] > src_shape[k]:
            raise ValueError(f"{op}: index {list(idx.shape)} must be no larger than src {list(src_shape)}")
    _check_bounds(idx, base.shape[d], op)
    return base, d, idx, _grid(idx.shape, d, idx)


def _src_region(src: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    src = src.reshape(1) if src.ndim == 0 else src
    return src[tuple(slice(0, n) for n in shape)]


@kernel("aten.gather.default")
def gather(self, dim, index, *, sparse_grad=False):
    base, d, idx, grid = _scatter_gather_setup(self, dim, index, None, "gather")
    if idx is None:
        return np.empty(index.shape, self.dtype)
    return base[grid].reshape(index.shape)


def _check_same_dtype(self, src, op: str) -> None:
    if src.dtype != self.dtype:
        raise TypeError(f"{op}(): expected self.dtype to be equal to src.dtype, got {self.dtype} and {src.dtype}")


def _scatter(self, dim, index, src, op: str, apply) -> np.ndarray:
    base, d, idx, grid = _scatter_gather_setup(self, dim, index, src if isinstance(src, np.ndarray) else None, op)
    out = base.copy()
    if idx is not None:
        apply(out, grid, idx.shape)
    return out.reshape(self.shape)


@kernel("aten.scatter.src")
def scatter_src(self, dim, index, src):
    """out[.., index[i], ..] = src[i]; duplicate targets are undefined in PyTorch (the last wins here)."""
    _check_same_dtype(self, src, "scatter")

    def assign(out, grid, shape):
        out[grid] = _src_region(src, shape)

    return _scatter(self, dim, index, src, "scatter", assign)


@kernel("aten.scatter.value")
def scatter_value(self, dim, index, value):
    fill = scalar_to(value, self.dtype, "scatter value")

    def assign(out, grid, shape):
        out[grid] = fill

    return _scatter(self, dim, index, None, "scatter", assign)


def _reduce_at(ufunc, out: np.ndarray, grid: tuple, values: np.ndarray) -> None:
    """``ufunc.at`` in the compute type: half types accumulate in float32 and round once.

    torch 2.13's CPU scatter kernels do so (cpu/ScatterGatherKernel.cpp); checked
    against eager: scatter_add of [1, 1] into 2048 in float16 gives 2050, where
    per-step float16 rounding (and index_put with accumulate) gives 2048.
    """
    compute = opmath(out.dtype)
    with np.errstate(all="ignore"):
        if compute == out.dtype:
            ufunc.at(out, grid, values)
            return
        wide = out.astype(compute)
        ufunc.at(wide, grid, values.astype(compute))
        out[...] = cast(wide, out.dtype)


@kernel("aten.scatter_add.default")
def scatter_add(self, dim, index, src):
    _check_same_dtype(self, src, "scatter_add")

    def accumulate(out, grid, shape):
        _reduce_at(np.add, out, grid, _src_region(src, shape))

    return _scatter(self, dim, index, src, "scatter_add", accumulate)


_REDUCE_UFUNCS = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


def _reduce_identity(reduce: str, dtype: np.dtype):
    """The value include_self=False starts scattered positions from (TensorAdvancedIndexing.cpp)."""
    if reduce in ("sum", "mean"):
        return np.zeros((), dtype)
    if reduce == "prod":
        return np.ones((), dtype)
    if is_float(dtype):
        return np.array(-np.inf if reduce == "amax" else np.inf).astype(dtype)
    if is_bool(dtype):
        return np.array(reduce == "amin")
    info = np.iinfo(dtype)
    return np.array(info.min if reduce == "amax" else info.max, dtype)


@kernel("aten.scatter_reduce.two")
def scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
    """Reduces ``src`` into ``self`` at ``index``: sum, prod, mean, amax or amin.

    amax/amin propagate NaN. mean divides by the number of values reduced into each
    position (self counts unless include_self=False; untouched positions keep their
    value), flooring for integers, in the tensor's dtype (TensorAdvancedIndexing.cpp).
    """
    if reduce not in _REDUCE_UFUNCS:
        raise ValueError(f"scatter_reduce: reduce argument must be sum, prod, mean, amax or amin, got {reduce!r}")
    _check_same_dtype(self, src, "scatter_reduce")
    if reduce == "mean" and is_bool(self.dtype):
        raise TypeError("scatter_reduce: mean is not implemented for bool")
    ufunc = _REDUCE_UFUNCS[reduce]

    def apply(out, grid, shape):
        if not include_self:
            out[grid] = _reduce_identity(reduce, out.dtype)
        _reduce_at(ufunc, out, grid, _src_region(src, shape))
        if reduce == "mean":
            count = np.full(out.shape, 1 if include_self else 0, dtype=out.dtype)
            np.add.at(count, grid, np.ones((), out.dtype))
            count[count == 0] = 1
            if is_int(out.dtype):
                out[...] = np.floor_divide(out, count)
            else:
                with np.errstate(all="ignore"):
                    out[...] = np.true_divide(out, count)

    return _scatter(self, dim, index, src, "scatter_reduce", apply)


def _advanced_index(self, indices, op: str) -> tuple:
    """``indices`` (a list of optional tensors) as a NumPy index tuple.

    None keeps a dim (a full slice); bool and uint8 tensors are masks over as many dims
    as they have; int64/int32 tensors broadcast together and wrap negatives. NumPy's
    placement rule for the indexed dims is PyTorch's: where the index tensors are
    adjacent the result dims replace them in place, otherwise they go first.
    """
    out = []
    consumed = 0
    for t in indices:
        if t is None:
            out.append(slice(None))
            consumed += 1
        elif t.dtype in (bool_, np.dtype(np.uint8)):
            mask = t.astype(bool, copy=False)
            out.extend(np.nonzero(mask) if mask.ndim else (mask,))
            consumed += max(mask.ndim, 1) if mask.ndim else 0
        elif t.dtype in _INDEX_DTYPES:
            out.append(t.astype(np.intp, copy=False))
            consumed += 1
        else:
            raise IndexError(f"{op}: tensors used as indices must be long, int, byte or bool tensors, got {t.dtype}")
    if consumed > self.ndim:
        raise IndexError(f"{op}: too many indices for tensor of dimension {self.ndim} (got {consumed})")
    return tuple(out)


@kernel("aten.index.Tensor")
def index(self, indices):
    if not any(t is not None for t in indices):
        raise IndexError("index: at least one index must be provided")
    return np.array(self[_advanced_index(self, indices, "index")], copy=True)


@kernel("aten.index_put.default")
def index_put(self, indices, values, accumulate=False):
    """self with self[indices] = values (or += values with ``accumulate``).

    ``values`` must have self's dtype and broadcast to the indexed shape. Without
    accumulate, PyTorch leaves the winner among duplicate targets undefined.
    """
    if not any(t is not None for t in indices):
        # Eager fails an internal assert here (IndexKernelUtils.h: ntensor >= 3).
        raise IndexError("index_put: at least one index must be provided")
    if values.dtype != self.dtype:
        raise TypeError(
            f"index_put: requires the source and destination dtypes match, got {self.dtype} and {values.dtype}"
        )
    key = _advanced_index(self, indices, "index_put")
    target = np.shape(self[key])
    if values.ndim > len(target) or np.broadcast_shapes(values.shape, target) != target:
        raise ValueError(f"index_put: value tensor of shape {list(values.shape)} cannot be broadcast to {list(target)}")
    out = self.copy()
    if accumulate and out.dtype == float8_e4m3fn:
        _saturating_add_at(out, key, np.broadcast_to(values, target))
    elif accumulate:
        with np.errstate(all="ignore"):
            np.add.at(out, key, np.broadcast_to(values, target))
    else:
        out[key] = values
    return out


def _saturating_add_at(out: np.ndarray, key, values: np.ndarray) -> None:
    """``np.add.at`` for float8_e4m3fn as eager's index_put accumulates it: one add per index, in
    index order, each sum rounded to the type with c10's saturation (``cast``), where ml_dtypes'
    own add gives NaN past 448. Checked against eager: 384 accumulated with 384 and then -384 gives
    448 - 384 = 64. The indices are applied in rounds, the k-th occurrence of every target in
    round k, so that no round writes one element twice."""
    flat = out.reshape(-1)  # out is a fresh copy: contiguous, so this is a view
    targets = np.arange(out.size).reshape(out.shape)[key].reshape(-1)
    addends = values.reshape(-1)
    order = np.argsort(targets, kind="stable")
    ranked = targets[order]
    starts = np.r_[0, np.flatnonzero(ranked[1:] != ranked[:-1]) + 1]
    rank = np.empty(len(targets), dtype=np.int64)
    rank[order] = np.arange(len(targets)) - np.repeat(starts, np.diff(np.r_[starts, len(targets)]))
    for k in range(int(rank.max(initial=-1)) + 1):
        now = rank == k
        with np.errstate(all="ignore"):
            flat[targets[now]] = cast(flat[targets[now]].astype(float32) + addends[now].astype(float32), out.dtype)


@kernel("aten.slice_scatter.default")
def slice_scatter(self, src, dim=0, start=None, end=None, step=1):
    """self with the slice replaced by ``src`` (which must have the slice's exact shape)."""
    if self.ndim == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor")
    d = wrap_dim(dim, self.ndim)
    key = along(d, normalize_slice(start, end, step))
    return _replace(self, key, src, "slice_scatter")


@kernel("aten.select_scatter.default")
def select_scatter(self, src, dim, index):
    if self.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor")
    d = wrap_dim(dim, self.ndim)
    size = self.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(self.shape)} at dimension {d}")
    return _replace(self, along(d, index % size), src, "select_scatter")


def _replace(self, key, src, op: str) -> np.ndarray:
    out = self.copy()
    view = out[key]
    if view.shape != src.shape:
        raise ValueError(
            f"{op}: expected src to have a size equal to the slice of self: src {list(src.shape)}, slice {list(view.shape)}"
        )
    view[...] = copy_cast(src, self.dtype)
    return out


@kernel("aten.nonzero.default")
def nonzero(self):
    # (n, ndim) int64 indices of the nonzero elements in row-major order; NaN is nonzero. The row
    # count is known only once the data is: the program leaves it to run time (a data-dependent
    # size, which the runtime reports by resizing its output: specs/interface.toml NUM-001).
    return np.argwhere(self).astype(np.int64, copy=False).reshape(-1 if self.ndim else np.count_nonzero(self), self.ndim)


@kernel("aten.masked_scatter.default")
def masked_scatter(self, mask, source):
    """self and mask broadcast together; the positions where the mask is true, in row-major order,
    take source's elements in flattened order (TensorAdvancedIndexing.cpp masked_scatter: expand_outplace,
    then masked_scatter_ on the copy). The mask must be bool, source of self's dtype with at least as
    many elements as the mask has true positions."""
    x, m, src = np.asarray(self), np.asarray(mask), np.asarray(source)
    if not is_bool(m.dtype):
        raise TypeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype {m.dtype}")
    if src.dtype != x.dtype:
        raise TypeError(f"masked_scatter: expected self and source to have same dtypes but got {x.dtype} and {src.dtype}")
    shape = np.broadcast_shapes(x.shape, m.shape)
    out = np.array(np.broadcast_to(x, shape))
    where = np.broadcast_to(m, shape)
    count = int(np.count_nonzero(where))
    if src.size < count:
        raise ValueError(f"masked_scatter: number of elements of source ({src.size}) < number of ones in mask ({count})")
    out[where] = src.reshape(-1)[:count]
    return out


_EMBEDDING_BAG_MODES = {0: "sum", 1: "mean", 2: "max"}


@kernel("aten._embedding_bag.default")
def _embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """Bags of rows of ``weight`` reduced by sum, mean or max (EmbeddingBag.cpp, _embedding_bag_cpu_impl).

    Bag b holds indices[offsets[b]:offsets[b + 1]] (the last bag runs to the end of indices; with
    include_last_offset the last offset only closes the list, and offset2bag and bag_size still let
    the last bag run to the end, as ATen's slow path does). Indices equal to padding_idx (>= 0; -1 is
    none) take no part. Returns (output, offset2bag, bag_size, max_indices), as eager's CPU kernel
    fills them:

    - output (bags, D): sum (each row scaled by per_sample_weights, sum mode only), mean (the sum
      rounded to the dtype, divided by max(bag_size, 1) in it) or max (strictly greater replaces, in
      index order: a NaN first element stays, later NaNs are skipped, the first of equal values
      wins); an empty bag gives 0. Sums are computed in float64 and rounded once (through float32 for
      the half types, which eager accumulates in float32; eager sums float32 in index order, within
      the op spec's tolerance).
    - offset2bag (N,): the bag of each index; empty (0,) in sum mode on eager's fast path (float32,
      float16 and bfloat16 without a padding_idx), which skips computing it.
    - bag_size (bags,): the number of non-padding indices per bag (mean, max); zeros in sum mode.
    - max_indices: (bags, D) the index chosen by max (0 for an empty bag); in mean mode a copy of
      bag_size, in sum mode zeros.

    scale_grad_by_freq and sparse only change gradients. Index outputs have the dtype indices and
    offsets promote to.
    """
    w, idx, off = np.asarray(weight), np.asarray(indices), np.asarray(offsets)
    mode = int(mode)
    if mode not in _EMBEDDING_BAG_MODES:
        raise ValueError(f"embedding_bag: mode must be 0 (sum), 1 (mean) or 2 (max), got {mode}")
    if not is_float(w.dtype) or w.ndim != 2:
        raise TypeError(f"embedding_bag: weight must be a 2-D floating tensor, got {w.dtype}{list(w.shape)}")
    if idx.dtype not in _INDEX_DTYPES or off.dtype not in _INDEX_DTYPES:
        raise TypeError(f"embedding_bag: indices and offsets must be int32 or int64, got {idx.dtype} and {off.dtype}")
    if idx.ndim != 1 or off.ndim != 1:
        raise ValueError(f"embedding_bag: indices and offsets must be 1-D here, got ranks {idx.ndim} and {off.ndim}")
    index_dtype = np.promote_types(idx.dtype, off.dtype)
    n, (num, dim) = idx.size, w.shape
    bags = off.size - (1 if include_last_offset else 0)
    if include_last_offset and off.size < 1:
        raise ValueError("include_last_offset: number of offset should be at least 1")
    if off.size and (off[0] != 0 or off[-1] > n):
        raise ValueError(f"embedding_bag: offsets[0] must be 0 and offsets[-1] at most {n}, got {off[0]} and {off[-1]}")
    starts = off[:bags].astype(np.int64)
    if np.any(np.diff(starts) < 0) or (bags == 0 and n):
        raise ValueError("embedding_bag: offsets must be non-decreasing and hold every index in a bag")
    _check_bounds(idx, num, "embedding_bag")
    weights = None
    if per_sample_weights is not None:
        weights = np.asarray(per_sample_weights)
        if mode != 0:
            raise ValueError("embedding_bag: per_sample_weights only supported with mode='sum'")
        if weights.dtype != w.dtype or weights.shape != (n,):
            raise ValueError(f"embedding_bag: per_sample_weights must be {w.dtype}[{n}], got {weights.dtype}{list(weights.shape)}")
    bag_of = np.searchsorted(starts, np.arange(n), side="right") - 1  # offset2bag
    valid = idx != padding_idx if padding_idx >= 0 else np.ones(n, bool)
    counts = np.bincount(bag_of[valid], minlength=bags).astype(np.int64) if bags else np.zeros(0, np.int64)
    rows = w[idx[valid].astype(np.intp)]
    where = bag_of[valid]
    if mode == 2:
        output, chosen = _bag_max(rows, idx[valid], where, counts, bags, dim, w.dtype)
    else:
        total = np.zeros((bags, dim), float64)
        with np.errstate(invalid="ignore", over="ignore"):
            terms = rows.astype(float64)
            if weights is not None:
                terms = terms * weights[valid].astype(float64)[:, None]
            np.add.at(total, where, terms)
        output = total.astype(opmath(w.dtype)).astype(w.dtype)
        if mode == 1:
            with np.errstate(invalid="ignore", divide="ignore"):
                divisor = np.maximum(counts, 1).astype(w.dtype).astype(opmath(w.dtype))[:, None]
                output = (output.astype(opmath(w.dtype)) / divisor).astype(w.dtype)
    fast_sum = mode == 0 and w.dtype != np.float64 and padding_idx < 0
    offset2bag = np.zeros(0, index_dtype) if fast_sum else bag_of.astype(index_dtype)
    bag_size = (counts if mode else np.zeros(bags, np.int64)).astype(index_dtype)
    max_indices = chosen.astype(index_dtype) if mode == 2 else bag_size.copy()
    return output, offset2bag, bag_size, max_indices


def _bag_max(rows, chosen_index, where, counts, bags: int, dim: int, dtype):
    """Max mode of _embedding_bag: eager's loop (embedding_bag_cpu_max_out) keeps the first element of a
    bag and replaces it by every later one that is strictly greater. So a NaN first element stays, later
    NaNs are never greater, and among equal values (-0.0 and 0.0 too) the first stays: the result is the
    first element if it is NaN, else the first occurrence of the largest non-NaN value. Empty bags give
    0 and index 0. Returns (values, the indices of the chosen rows)."""
    output = np.zeros((bags, dim), dtype)
    chosen = np.zeros((bags, dim), np.int64)
    filled = np.flatnonzero(counts)
    if not filled.size or not dim:
        return output, chosen
    seg = np.concatenate([[0], np.cumsum(counts)[:-1]])[filled]  # first row of each non-empty bag
    with np.errstate(invalid="ignore"):
        best = np.fmax.reduceat(rows, seg, axis=0)  # NaN only where a bag holds nothing else
    first = rows[seg]
    best = np.where(np.isnan(first), first, best)
    position = np.arange(rows.shape[0])[:, None]
    bag_rank = np.searchsorted(filled, where)  # the row of ``best`` each element belongs to
    hit = (rows == best[bag_rank]) | (np.isnan(best[bag_rank]) & (position == seg[bag_rank][:, None]))
    at = np.minimum.reduceat(np.where(hit, position, rows.shape[0]), seg, axis=0)
    output[filled] = rows[at, np.arange(dim)]
    chosen[filled] = np.asarray(chosen_index)[at]
    return output, chosen
