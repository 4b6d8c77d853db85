"""Signatures of indexing ops: embedding, index_select, gather, index, index_put, scatter, *_scatter,
masked_scatter, _embedding_bag.

Index tensors are int64 or int32 (params ``index_dtypes``; an empty one of gather and scatter
``empty_index_dtypes`` where the spec names them), drawn in range:
[0, size) for the ops that refuse negatives, [-size, size) for index and
index_put, which wrap them. Where PyTorch leaves the result of duplicate targets
undefined (index_put without accumulate, scatter) the targets are drawn distinct.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from . import Call, Tensor, attr, param, signature
from .shape import scalar_of, slice_bounds, spell, tensor
from .shapes import broadcast_shapes, nonneg_dim, shapes
from .values import arrays


def _index_dtype(draw, spec, shape=None) -> str:
    """An index's dtype: params ``index_dtypes``, or ``empty_index_dtypes`` for an index of ``shape``
    with no elements where the spec names them (gather and the scatter family check the dtype of a
    nonempty index only)."""
    if shape is not None and math.prod(shape) == 0 and "empty_index_dtypes" in spec.params:
        return draw(st.sampled_from(spec.params["empty_index_dtypes"]))
    return draw(st.sampled_from(param(spec, "index_dtypes", ["int64", "int32"])))


def _rng(draw) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def index_tensor(draw, spec, shape, low: int, high: int) -> Tensor:
    """An index tensor of ``shape`` with values in [low, high) (high > low unless the shape is empty)."""
    shape = tuple(shape)
    if math.prod(shape) == 0:
        values = np.zeros(shape, np.int64)
    else:
        values = _rng(draw).integers(low, high, size=shape, dtype=np.int64)
    return Tensor(values.astype(_index_dtype(draw, spec, shape)))


@signature("embedding")
def embedding(draw, spec, dtype, op):
    """embedding(weight, indices[, padding_idx]): weight [num, dim] is a parameter; indices rank 0-3.

    padding_idx (gradient-only) is sometimes passed, as -1 or a row number.
    """
    num, dim = draw(st.integers(1, 8)), draw(st.integers(0, 6))
    weight = Tensor(draw_array(draw, spec, dtype, (num, dim)), role="parameter")
    indices = index_tensor(draw, spec, draw(shapes(0, 3, 0, 4)), 0, num)
    if draw(st.booleans()):
        return Call(op, (weight, indices, draw(st.integers(-1, num - 1))))
    return Call(op, (weight, indices))


def draw_array(draw, spec, dtype, shape):
    return tensor(draw, spec, dtype, shape).value


@signature("index_select")
def index_select(draw, spec, dtype, op):
    """index_select(self, dim, index): index 1-d (or 0-d) with values in [0, size)."""
    shape = tuple(draw(shapes(0, param(spec, "max_rank", 4))))
    rank = len(shape)
    dim = draw(nonneg_dim(rank))
    size = shape[dim] if rank else 1
    if rank == 0 or draw(st.integers(0, 4)) == 0:
        index_shape = () if size else (0,)
    else:
        index_shape = (draw(st.integers(0, 5)) if size else 0,)
    if rank == 0 and index_shape == ():
        index_shape = draw(st.sampled_from([(), (1,)]))
    index = index_tensor(draw, spec, index_shape, 0, size)
    return Call(op, (tensor(draw, spec, dtype, shape), spell(draw, dim, rank), index))


@signature("gather")
def gather(draw, spec, dtype, op):
    """gather(self, dim, index): index of self's rank, no larger than self off dim, values in [0, size)."""
    shape = tuple(draw(shapes(0, param(spec, "max_rank", 4))))
    rank = len(shape)
    dim = draw(nonneg_dim(rank))
    base = shape or (1,)
    index_shape = [draw(st.integers(0, n)) for n in base]
    index_shape[dim] = draw(st.integers(0, 4)) if base[dim] else 0
    if rank == 0 and draw(st.booleans()):
        index_shape = [] if index_shape == [1] else index_shape
    index = index_tensor(draw, spec, index_shape, 0, base[dim])
    return Call(op, (tensor(draw, spec, dtype, shape), spell(draw, dim, rank), index))


def _distinct_along(draw, shape, dim: int, size: int) -> np.ndarray:
    """Values in [0, size) of ``shape`` that never repeat along ``dim`` (shape[dim] <= size)."""
    keys = _rng(draw).random(tuple(size if d == dim else n for d, n in enumerate(shape)))
    order = np.argsort(keys, axis=dim, kind="stable")
    return np.take(order, np.arange(shape[dim]), axis=dim)


@signature("scatter")
def scatter(draw, spec, dtype, op):
    """scatter / scatter_add / scatter_reduce(self, dim, index, src or value).

    params: ``form``: "src" (a src tensor), "value" (a Python scalar) or "reduce"
    (src plus attrs ``reduce`` and ``include_self``); ``distinct`` (default true) keeps
    targets distinct along dim where PyTorch leaves duplicates undefined.
    """
    shape = tuple(draw(shapes(0, param(spec, "max_rank", 4))))
    rank = len(shape)
    base = shape or (1,)
    dim = draw(nonneg_dim(rank))
    distinct = param(spec, "distinct", True)
    index_shape = [draw(st.integers(0, n)) for n in base]
    if base[dim] == 0:
        index_shape[dim] = 0
    elif not distinct:
        index_shape[dim] = draw(st.integers(0, 4))
    if math.prod(index_shape) == 0:
        values = np.zeros(index_shape, np.int64)
    elif distinct:
        values = _distinct_along(draw, index_shape, dim, base[dim])
    else:
        values = _rng(draw).integers(0, base[dim], size=index_shape)
    if rank == 0 and index_shape == [1] and draw(st.booleans()):
        values = values.reshape(())
    index = Tensor(values.astype(_index_dtype(draw, spec, values.shape)))
    self = tensor(draw, spec, dtype, shape)
    args = (self, spell(draw, dim, rank), index)
    form = param(spec, "form", "src")
    if form == "value":
        return Call(op, (*args, scalar_of(draw, dtype, spec.domain)))
    src_shape = tuple(n + draw(st.integers(0, 1)) for n in index_shape) if values.ndim else ()
    src = tensor(draw, spec, dtype, src_shape)
    if form == "reduce":
        reduce = attr(draw, spec, "reduce", keep=lambda r: not (dtype == "bool" and r == "mean"))
        kwargs = {"include_self": attr(draw, spec, "include_self")}
        return Call(op, (*args, src, reduce), kwargs)
    return Call(op, (*args, src))


def _indices(draw, spec, shape, *, distinct: bool):
    """An index list for index/index_put: None entries, 1+ index tensors that broadcast.

    With ``distinct`` every index tensor has the full broadcast shape and the addressed
    positions never repeat.
    """
    rank = len(shape)
    count = draw(st.integers(1, rank))
    picked = draw(st.lists(st.booleans(), min_size=count, max_size=count).filter(any))
    dims = [d for d in range(count) if picked[d]]
    sizes = [shape[d] for d in dims]
    entries: list = [None] * count
    if distinct:
        positions = math.prod(sizes)
        bshape = tuple(draw(shapes(0, 2, 0, 3)))
        if math.prod(bshape) > positions:
            bshape = (draw(st.integers(0, positions)),)
        flat = _rng(draw).permutation(positions)[: math.prod(bshape)]
        coords = np.unravel_index(flat, sizes) if sizes else ()
        for d, c, n in zip(dims, coords, sizes):
            values = c.reshape(bshape).astype(np.int64)
            negate = _rng(draw).random(bshape) < 0.5
            entries[d] = Tensor(np.where(negate, values - n, values).astype(_index_dtype(draw, spec)))
        return entries
    bshapes = draw(broadcast_shapes(len(dims), 0, 2, 3))
    for d, n, s in zip(dims, sizes, bshapes):
        entries[d] = index_tensor(draw, spec, s, -n, n)
    return entries


def _indexed(draw, spec):
    """A shape of rank 1-4 whose indexed dims are non-empty (an index into an empty dim is out of range)."""
    return tuple(max(n, 1) for n in draw(shapes(1, param(spec, "max_rank", 4))))


@signature("index")
def index(draw, spec, dtype, op):
    """index(self, indices): advanced indexing with None entries, adjacent or not, negatives wrapped."""
    shape = _indexed(draw, spec)
    sizes = [n if draw(st.integers(0, 3)) else 0 for n in shape]
    entries = _indices(draw, spec, shape, distinct=False)
    shape = tuple(n if e is not None else s for n, s, e in zip(shape, sizes, entries + [None] * len(shape)))
    return Call(op, (tensor(draw, spec, dtype, shape), entries))


@signature("index_put")
def index_put(draw, spec, dtype, op):
    """index_put(self, indices, values, accumulate): values broadcast to the indexed shape.

    attrs: ``accumulate``. Without accumulate the addressed positions are distinct.
    """
    accumulate = attr(draw, spec, "accumulate")
    shape = _indexed(draw, spec)
    entries = _indices(draw, spec, shape, distinct=not accumulate)
    key = tuple(slice(None) if e is None else e.value.astype(np.intp) for e in entries)
    target = np.empty(shape, np.int8)[key].shape
    keep = draw(st.integers(0, len(target)))
    values_shape = tuple(1 if draw(st.integers(0, 3)) == 0 else n for n in target[len(target) - keep:])
    values = tensor(draw, spec, dtype, values_shape)
    args = (tensor(draw, spec, dtype, shape), entries, values)
    if not accumulate and draw(st.booleans()):
        return Call(op, args)
    return Call(op, (*args, accumulate))


@signature("slice_scatter")
def slice_scatter(draw, spec, dtype, op):
    """slice_scatter(self, src, dim, start, end, step): src has the slice's shape."""
    shape = tuple(draw(shapes(1, param(spec, "max_rank", 4))))
    dim = draw(nonneg_dim(len(shape)))
    start, end, step = slice_bounds(draw, shape[dim])
    length = len(range(*slice(start, end, step).indices(shape[dim])))
    src_shape = shape[:dim] + (length,) + shape[dim + 1:]
    args = (tensor(draw, spec, dtype, shape), tensor(draw, spec, dtype, src_shape), spell(draw, dim, len(shape)))
    return Call(op, (*args, start, end, step))


@signature("select_scatter")
def select_scatter(draw, spec, dtype, op):
    """select_scatter(self, src, dim, index): src has self's shape without dim."""
    shape = list(draw(shapes(1, param(spec, "max_rank", 4))))
    dim = draw(nonneg_dim(len(shape)))
    shape[dim] = max(shape[dim], 1)
    src_shape = shape[:dim] + shape[dim + 1:]
    args = (tensor(draw, spec, dtype, shape), tensor(draw, spec, dtype, src_shape), spell(draw, dim, len(shape)))
    return Call(op, (*args, draw(st.integers(-shape[dim], shape[dim] - 1))))


@signature("masked_scatter")
def masked_scatter(draw, spec, dtype, op):
    """masked_scatter(self, mask, source): self and a bool mask broadcast together (the result has the
    broadcast shape); source in self's dtype, 1-d or 2-d, with as many elements as the mask has true
    positions, or a few more (the rest are not read)."""
    self_shape, mask_shape = draw(broadcast_shapes(2, 0, param(spec, "max_rank", 4)))
    self = tensor(draw, spec, dtype, self_shape)
    mask = Tensor(draw(arrays("bool", mask_shape, "any_finite")))
    count = int(np.count_nonzero(np.broadcast_to(mask.value, np.broadcast_shapes(self_shape, mask_shape))))
    size = count + draw(st.integers(0, 3))
    rows = draw(st.sampled_from([d for d in (1, 2, 3) if size % d == 0]))
    source_shape = (size,) if draw(st.booleans()) else (rows, size // rows)
    return Call(op, (self, mask, tensor(draw, spec, dtype, source_shape)))


@signature("embedding_bag")
def embedding_bag(draw, spec, dtype, op):
    """_embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
    include_last_offset, padding_idx): weight (num, D) is a parameter of any drawn 2-d shape (the edge
    set's large, empty and real-world tables included); 0-12 indices in [0, num), int64 or int32, with
    offsets of the same dtype: 0, then non-decreasing cut points (empty bags included), and with
    include_last_offset one more offset, the number of indices (what EmbeddingBag passes).

    attrs: ``mode`` (0 sum, 1 mean, 2 max), ``include_last_offset``. per_sample_weights (sum mode
    only) half the time, in weight's dtype; padding_idx -1 (none) or a row. Steered around eager's
    quirks (see the op spec's notes): bfloat16 sums, and sums or means of 0-wide rows in the
    fast-path dtypes, always get a padding_idx (a row, present in the indices or not).
    """
    weight = Tensor(draw(arrays(dtype, tuple(draw(shapes(2, 2))), spec.domain)), role="parameter")
    num, dim = weight.value.shape
    mode = attr(draw, spec, "mode")
    last = attr(draw, spec, "include_last_offset")
    count = draw(st.integers(0, 12)) if num else 0
    index_dtype = _index_dtype(draw, spec)
    indices = index_tensor(draw, spec, (count,), 0, num) if count else Tensor(np.zeros(0, index_dtype))
    indices = Tensor(indices.value.astype(index_dtype))
    bags = draw(st.integers(1 if count else 0, 5))
    cuts = sorted(draw(st.lists(st.integers(0, count), min_size=max(bags - 1, 0), max_size=max(bags - 1, 0))))
    starts = [0, *cuts] if bags else []
    offsets = Tensor(np.array(starts + [count] if last else starts, dtype=index_dtype))
    weights = None
    if mode == 0 and draw(st.booleans()):
        weights = Tensor(draw(arrays(dtype, (count,), spec.domain)))
    fast_path = dtype != "float64" and mode in (0, 1)
    needs_padding = (dtype == "bfloat16" and mode == 0) or (dim == 0 and fast_path)
    padding = draw(st.integers(0 if needs_padding else -1, num - 1)) if num else -1
    flags = (draw(st.booleans()), draw(st.booleans()))  # scale_grad_by_freq, sparse: gradients only
    return Call(op, (weight, indices, offsets, flags[0], mode, flags[1], weights, last, padding))
