"""Signatures of shape and view ops: view, permute, expand, slice, select, squeeze, cat, split, pad, ...

Each draws an input shape (sizes 0 and 1 included) and the attributes that fit
it: a target shape with the same element count, a permutation, split sizes that
sum to the dim, pads that do not crop below zero. Dims are spelled negative about
half of the time, since every dim argument accepts both spellings.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from conformance.api.scalar_type import component_dtype, is_integral

from . import Call, Tensor, attr, directed, param, signature
from .elementwise import other_dtype
from .shapes import nonneg_dim, shapes, spell_dim
from .values import arrays, elements


def tensor(draw, spec, dtype: str, shape) -> Tensor:
    """A runtime input of ``shape`` with values from the op's domain."""
    return Tensor(draw(arrays(dtype, tuple(shape), spec.domain)))


def spell(draw, dim: int, rank: int) -> int:
    """``dim`` (non-negative) spelled as itself or as its negative alias."""
    return spell_dim(draw, dim, rank)


def scalar_of(draw, dtype: str, domain: str):
    """A Python scalar that converts to ``dtype`` without overflow (fill and pad values); a real one for
    complex dtypes (an exported program's Scalar arguments have no complex spelling in ExecuTorch)."""
    if dtype == "bool":
        return draw(st.booleans())
    if is_integral(dtype):
        return draw(elements(dtype, "any_finite"))
    return draw(elements(component_dtype(dtype), domain))


def _shape(draw, spec, min_rank=0, max_rank=None, min_side=0) -> tuple[int, ...]:
    return tuple(draw(shapes(min_rank, param(spec, "max_rank", 4) if max_rank is None else max_rank, min_side)))


def _factor(draw, numel: int, rank: int) -> list[int]:
    """``rank`` sizes whose product is ``numel`` (> 0): prime factors dealt out to random dims."""
    sizes = [1] * rank
    n, p = numel, 2
    while n > 1:
        while n % p == 0:
            sizes[draw(st.integers(0, rank - 1))] *= p
            n //= p
        p += 1
    return sizes


@signature("view")
def view(draw, spec, dtype, op):
    """view(self, size): a target shape with self's element count, sometimes with one -1."""
    shape = _shape(draw, spec)
    numel = math.prod(shape)
    if numel == 0:
        target = list(draw(shapes(1, 4, 0, 4)))
        target[draw(st.integers(0, len(target) - 1))] = 0
    else:
        rank = draw(st.integers(1 if numel > 1 else 0, 4))
        target = _factor(draw, numel, rank)
        if target and draw(st.booleans()):
            target[draw(st.integers(0, len(target) - 1))] = -1
    return Call(op, (tensor(draw, spec, dtype, shape), target))


@signature("permute")
def permute(draw, spec, dtype, op):
    """permute(self, dims): a permutation of self's dims, negative spellings mixed in."""
    shape = _shape(draw, spec)
    order = draw(st.permutations(range(len(shape))))
    return Call(op, (tensor(draw, spec, dtype, shape), [spell(draw, d, len(shape)) for d in order]))


@signature("expand")
def expand(draw, spec, dtype, op):
    """expand(self, size): size-1 dims grow (to 0 too), others keep their size or say -1; new leading dims."""
    shape = _shape(draw, spec, max_rank=3)
    lead = draw(st.lists(st.integers(0, 3), max_size=4 - len(shape)))
    size = list(lead)
    for n in shape:
        size.append(draw(st.sampled_from([-1, 0, 1, 2, 3]) if n == 1 else st.sampled_from([n, -1])))
    return Call(op, (tensor(draw, spec, dtype, shape), size))


def slice_bounds(draw, size: int):
    """start, end (None, negative, or beyond the size) and a positive step for one dim."""
    bound = st.none() | st.integers(-size - 2, size + 2)
    start = draw(bound)
    end = draw(bound | st.just(2**63 - 1))
    return start, end, draw(st.integers(1, 3))


@signature("slice")
def slice_(draw, spec, dtype, op):
    """slice(self, dim, start, end, step) on rank >= 1; trailing defaults are sometimes left out."""
    shape = _shape(draw, spec, min_rank=1)
    dim = draw(nonneg_dim(len(shape)))
    start, end, step = slice_bounds(draw, shape[dim])
    args = [tensor(draw, spec, dtype, shape), spell(draw, dim, len(shape)), start, end, step]
    if step == 1 and draw(st.booleans()):
        args.pop()
    return Call(op, tuple(args))


@signature("select")
def select(draw, spec, dtype, op):
    """select(self, dim, index): the selected dim has size >= 1; index in [-size, size)."""
    shape = list(_shape(draw, spec, min_rank=1))
    dim = draw(nonneg_dim(len(shape)))
    shape[dim] = max(shape[dim], 1)
    index = draw(st.integers(-shape[dim], shape[dim] - 1))
    return Call(op, (tensor(draw, spec, dtype, shape), spell(draw, dim, len(shape)), index))


@signature("squeeze")
def squeeze(draw, spec, dtype, op):
    """squeeze(self[, dim]): shapes rich in size-1 dims.

    params: ``form`` is "dims" (a list of distinct dims), "dim" (one dim) or "all" (no dim).
    """
    rank = draw(st.integers(0, param(spec, "max_rank", 4)))
    shape = [draw(st.sampled_from([0, 1, 1, 2, 3])) for _ in range(rank)]
    x = tensor(draw, spec, dtype, shape)
    form = param(spec, "form", "dims")
    if form == "all":
        return Call(op, (x,))
    if form == "dim":
        return Call(op, (x, spell(draw, draw(st.integers(0, max(rank, 1) - 1)), rank)))
    dims = draw(st.lists(st.integers(0, max(rank, 1) - 1), unique=True, max_size=max(rank, 1)))
    return Call(op, (x, [spell(draw, d, rank) for d in dims]))


@signature("unsqueeze")
def unsqueeze(draw, spec, dtype, op):
    """unsqueeze(self, dim) with dim in [-(rank + 1), rank]."""
    shape = _shape(draw, spec, max_rank=3)
    return Call(op, (tensor(draw, spec, dtype, shape), draw(st.integers(-len(shape) - 1, len(shape)))))


ONE_IN_FOUR = st.integers(0, 3).map(lambda i: i == 0)
"""How often a tensor of these signatures is drawn in another dtype (outside directed cases)."""


@signature("cat")
def cat(draw, spec, dtype, op):
    """cat(tensors, dim): 1-4 tensors agreeing except along dim.

    params: ``mixed_dtypes`` (default true) draws some tensors in another of the op's
    dtypes (the result promotes); ``legacy_empty`` (default true) sometimes adds a 1-d
    empty tensor, which ATen skips whatever the other ranks are.
    """
    real = directed.model()
    if real is not None:  # a model's concatenation: two activations along the channels
        shape = list(directed.MODEL_SHAPES[real["rank"]])
        return Call(op, ([tensor(draw, spec, dtype, shape) for _ in range(2)], 1))
    shape = list(_shape(draw, spec, min_rank=1))
    dim = draw(nonneg_dim(len(shape)))
    count = draw(st.integers(1, 4))
    tensors = []
    for _ in range(count):
        shape[dim] = draw(st.integers(0, 4))
        tensors.append(tensor(draw, spec, other_dtype(draw, spec, dtype, ONE_IN_FOUR), shape))
    if param(spec, "legacy_empty", True) and draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(tensors)))
        tensors.insert(at, tensor(draw, spec, other_dtype(draw, spec, dtype, ONE_IN_FOUR), (0,)))
    args = (tensors, spell(draw, dim, len(shape)))
    return Call(op, args[:1] if dim == 0 and draw(st.booleans()) else args)


@signature("stack")
def stack(draw, spec, dtype, op):
    """stack(tensors, dim): 1-4 tensors of one shape (rank 0-3), dim in [-(rank + 1), rank]."""
    shape = _shape(draw, spec, max_rank=3)
    tensors = [tensor(draw, spec, other_dtype(draw, spec, dtype, ONE_IN_FOUR), shape) for _ in range(draw(st.integers(1, 4)))]
    return Call(op, (tensors, draw(st.integers(-len(shape) - 1, len(shape)))))


@signature("split_with_sizes")
def split_with_sizes(draw, spec, dtype, op):
    """split_with_sizes(self, split_sizes, dim): 1-4 non-negative sizes summing to the dim's size."""
    shape = _shape(draw, spec, min_rank=1)
    dim = draw(nonneg_dim(len(shape)))
    cuts = sorted(draw(st.lists(st.integers(0, shape[dim]), max_size=3)))
    bounds = [0, *cuts, shape[dim]]
    sizes = [b - a for a, b in zip(bounds[:-1], bounds[1:])]
    return Call(op, (tensor(draw, spec, dtype, shape), sizes, spell(draw, dim, len(shape))))


@signature("split")
def split(draw, spec, dtype, op):
    """split(self, split_size, dim): split_size >= 1 (0 only for an empty dim), up to beyond the size."""
    shape = _shape(draw, spec, min_rank=1)
    dim = draw(nonneg_dim(len(shape)))
    low = 0 if shape[dim] == 0 else 1
    split_size = draw(st.integers(low, shape[dim] + 1))
    return Call(op, (tensor(draw, spec, dtype, shape), split_size, spell(draw, dim, len(shape))))


@signature("unbind")
def unbind(draw, spec, dtype, op):
    """unbind(self, dim) on rank >= 1."""
    shape = _shape(draw, spec, min_rank=1)
    dim = draw(nonneg_dim(len(shape)))
    return Call(op, (tensor(draw, spec, dtype, shape), spell(draw, dim, len(shape))))


@signature("repeat")
def repeat(draw, spec, dtype, op):
    """repeat(self, repeats): rank(self) to rank + 2 repeat counts in 0-3."""
    shape = _shape(draw, spec, max_rank=3, min_side=0)
    extra = draw(st.integers(0, min(2, 4 - len(shape))))
    repeats = draw(st.lists(st.integers(0, 3), min_size=len(shape) + extra, max_size=len(shape) + extra))
    return Call(op, (tensor(draw, spec, dtype, shape), repeats))


@signature("flip")
def flip(draw, spec, dtype, op):
    """flip(self, dims): distinct dims, possibly none."""
    shape = _shape(draw, spec)
    dims = draw(st.lists(st.integers(0, max(len(shape), 1) - 1), unique=True, max_size=len(shape)))
    return Call(op, (tensor(draw, spec, dtype, shape), [spell(draw, d, len(shape)) for d in dims]))


@signature("roll")
def roll(draw, spec, dtype, op):
    """roll(self, shifts, dims): one shift of the flattened tensor, or a shift per dim (repeats allowed)."""
    shape = _shape(draw, spec)
    shift = st.integers(-8, 8)
    x = tensor(draw, spec, dtype, shape)
    if not shape or draw(st.integers(0, 3)) == 0:
        shifts = [draw(shift)]
        return Call(op, (x, shifts) if draw(st.booleans()) else (x, shifts, []))
    dims = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape) + 1))
    return Call(op, (x, [draw(shift) for _ in dims], [spell(draw, d, len(shape)) for d in dims]))


@signature("pad")
def pad(draw, spec, dtype, op):
    """constant_pad_nd(self, pad, value): pads of the last dims, negative ones crop (never below 0).

    The value is a scalar of the dtype's kind (sometimes left at its default 0).
    """
    shape = _shape(draw, spec)
    pairs = draw(st.integers(0, len(shape)))
    pads = []
    for i in range(pairs):
        size = shape[len(shape) - 1 - i]
        left = draw(st.integers(-size, 3))
        right = draw(st.integers(-(size + min(left, 0)), 3))
        pads += [left, right]
    x = tensor(draw, spec, dtype, shape)
    if draw(st.integers(0, 3)) == 0:
        return Call(op, (x, pads))
    return Call(op, (x, pads, scalar_of(draw, dtype, spec.domain)))


@signature("unfold")
def unfold(draw, spec, dtype, op):
    """unfold(self, dimension, size, step): size up to the dim's size (up to 1 for 0-d), step 1-3."""
    shape = _shape(draw, spec)
    rank = len(shape)
    dim = draw(st.integers(0, max(rank, 1) - 1))
    size = draw(st.integers(0, shape[dim] if rank else 1))
    step = draw(st.integers(1, 3))
    return Call(op, (tensor(draw, spec, dtype, shape), spell(draw, dim, rank), size, step))


@signature("diagonal")
def diagonal(draw, spec, dtype, op):
    """diagonal(self, offset, dim1, dim2): two distinct dims of a rank >= 2 tensor, any offset."""
    shape = _shape(draw, spec, min_rank=2)
    dim1, dim2 = draw(st.permutations(range(len(shape))))[:2]
    offset = draw(st.integers(-4, 4))
    x = tensor(draw, spec, dtype, shape)
    if (dim1, dim2) == (0, 1) and draw(st.booleans()):
        return Call(op, (x, offset) if offset else (x,))
    return Call(op, (x, offset, spell(draw, dim1, len(shape)), spell(draw, dim2, len(shape))))


@signature("triangle")
def triangle(draw, spec, dtype, op):
    """tril/triu(self, diagonal) on rank >= 2, diagonal in [-4, 4]."""
    shape = _shape(draw, spec, min_rank=2)
    x = tensor(draw, spec, dtype, shape)
    diagonal = draw(st.integers(-4, 4))
    return Call(op, (x, diagonal) if diagonal or draw(st.booleans()) else (x,))


@signature("pixel_shuffle")
def pixel_shuffle(draw, spec, dtype, op):
    """pixel_shuffle / pixel_unshuffle(self, factor) on rank 3-5.

    attrs: ``factor``. params: ``inverse`` (pixel_unshuffle: height and width are multiples
    of the factor; otherwise the channels are).
    """
    factor = attr(draw, spec, "factor")
    inverse = param(spec, "inverse", False)
    # Eager's pixel_unshuffle returns an empty input unchanged (wrong shape); see the spec notes.
    batch = draw(shapes(0, 2, 1 if inverse else 0, 3))
    channels, height, width = draw(st.integers(0, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    if inverse:
        shape = (*batch, channels + 1, height * factor, width * factor)
    else:
        shape = (*batch, channels * factor * factor, height, width)
    return Call(op, (tensor(draw, spec, dtype, shape), factor))


@signature("copy")
def copy(draw, spec, dtype, op):
    """copy(self, src): self in ``dtype``; src broadcasts to self's shape (fewer,
    size-1 or 0-d dims: self takes the broadcast shape of the two drawn shapes) and is in ``dtype``
    or another of the op's dtypes (a conversion). A float src copied into an integer self holds values
    that truncate into its range (others are undefined behaviour in C++, as for _to_copy)."""
    from conformance.api.scalar_type import is_floating

    from .elementwise import _convertible_floats
    from .shapes import broadcast_shapes

    a, b = draw(broadcast_shapes(2, 0, param(spec, "max_rank", 4)))
    self_shape = tuple(int(n) for n in np.broadcast_shapes(a, b))
    src_dtype = other_dtype(draw, spec, dtype, ONE_IN_FOUR)
    if is_floating(src_dtype) and is_integral(dtype):
        src = Tensor(draw(_convertible_floats(src_dtype, dtype, b)))
    else:
        src = tensor(draw, spec, src_dtype, b)
    return Call(op, (tensor(draw, spec, dtype, self_shape), src))


@signature("as_strided")
def as_strided(draw, spec, dtype, op):
    """as_strided(self, size, stride[, storage_offset]) of a contiguous self (any drawn shape): a view
    of rank 0-4 with sides 0-4 and strides 0-5 (broadcasting, overlapping, skipping and transposed
    views), and an offset; sides are cut so the view stays within self's elements (ATen refuses a
    view past the storage). storage_offset is left out (None: self's own offset, 0) a third of the time."""
    shape = _shape(draw, spec)
    numel = math.prod(shape)
    rank = draw(st.integers(0, 4))
    size = [draw(st.integers(0, 4)) for _ in range(rank)]
    stride = [draw(st.sampled_from([0, 1, 1, 2, 3, 5])) for _ in range(rank)]
    if numel == 0:
        if rank:
            size[draw(st.integers(0, rank - 1))] = 0  # an empty storage holds only empty views
        else:
            rank, size, stride = 1, [0], [1]
        offset = 0
    else:
        budget = numel - 1
        for k in range(rank):
            if stride[k]:
                size[k] = min(size[k], budget // stride[k] + 1)
                budget -= max(size[k] - 1, 0) * stride[k]
        offset = draw(st.integers(0, budget)) if 0 not in size else draw(st.integers(0, numel))
    args = (tensor(draw, spec, dtype, shape), size, stride)
    if offset == 0 and draw(st.integers(0, 2)) == 0:
        return Call(op, args)
    return Call(op, (*args, offset))
