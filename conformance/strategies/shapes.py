"""Shape strategies shared by the signatures."""

from __future__ import annotations

import functools

from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

MAX_SIDE = 6


def _smallest_side(min_side: int) -> st.SearchStrategy[int]:
    """An empty tensor in one draw of three: empty tensors stay well covered, while most
    examples hold values that can show a wrong result."""
    return st.just(min_side) if min_side > 0 else st.sampled_from([1, 1, 0])


def _with_a_zero(shape: tuple) -> st.SearchStrategy[tuple]:
    if not shape:
        return st.just(shape)
    return st.integers(0, len(shape) - 1).map(lambda i: shape[:i] + (0,) + shape[i + 1 :])


def _directed_shape(min_rank: int, max_rank: int, min_side: int) -> tuple[int, ...] | None:
    """The shape the directive in force asks for, if it fits these bounds (and marks it consumed)."""
    from . import directed

    state = directed.active()
    if state is None or state.directive.shape is None:
        return None
    d, lo_side = state.directive, max(min_side, 1)
    shape: tuple[int, ...] | None = None
    if d.shape == "edges" and max_rank >= 1:
        rank = max(min_rank, 1)
        shape = (max(2, lo_side),) * (rank - 1) + (max(EDGE_SIDE, lo_side),)
    elif d.shape == "large":
        rank = min(max(min_rank, 3), max_rank)
        shape = directed.LARGE_SHAPES.get(rank)
        if shape is not None and min(shape) < min_side:
            shape = None
    elif d.shape == "long" and max_rank >= 1:
        shape = directed.LONG_SHAPES.get(min(max(min_rank, 2), max_rank))
        if shape is not None and min(shape) < min_side:
            shape = None
    elif d.shape == "empty" and max_rank >= 1 and min_side == 0:
        rank = min(max(min_rank, 2), max_rank)
        shape = (3,) * (rank - 1) + (0,)
    elif d.shape == "scalar" and min_rank == 0:
        shape = ()
    elif d.shape == "rank" and d.rank is not None and min_rank <= d.rank <= max_rank:
        shape = tuple(max(s, min_side) for s in directed.RANK_SIDES[: d.rank])
    elif d.shape == "model" and d.rank is not None and max_rank >= 1:
        rank = min(max(d.rank, min_rank, 1), max_rank)
        shape = directed.MODEL_SHAPES[rank] if rank in directed.MODEL_SHAPES else None
        if shape is not None and (min(shape) < min_side or (rank != d.rank and d.rank == 3)):
            shape = None  # the sequence shape on a rank-limited op would repeat the image one
    if shape is not None:
        state.consumed.add("shape")
    return shape


def _per_smallest_side(min_side: int, expand) -> st.SearchStrategy:
    """``expand(lo)`` for a drawn smallest side ``lo`` (``_smallest_side``), each built once."""
    built: dict[int, st.SearchStrategy] = {}

    def of(lo: int) -> st.SearchStrategy:
        if lo not in built:
            built[lo] = expand(lo)
        return built[lo]

    return _smallest_side(min_side).flatmap(of)


EDGE_SIDE = 40
"""The last side of an edge-values tensor: room for every edge value of a domain (at most ~34)."""


def shapes(min_rank: int = 0, max_rank: int = 4, min_side: int = 0, max_side: int = MAX_SIDE) -> st.SearchStrategy:
    """Shapes of ``min_rank`` to ``max_rank`` dims of ``min_side`` to ``max_side`` (the shape an active
    directive forces, under the edge set)."""
    forced = _directed_shape(min_rank, max_rank, min_side)
    return st.just(forced) if forced is not None else _shapes(min_rank, max_rank, min_side, max_side)


@functools.cache
def _shapes(min_rank: int, max_rank: int, min_side: int, max_side: int) -> st.SearchStrategy:
    """The drawn shapes of ``shapes``. Strategies are immutable, so each is built (and validated
    by hypothesis) once per process, not once per draw: that was most of a draw's time."""

    def expand(lo: int) -> st.SearchStrategy[tuple]:
        if lo > 0:
            return hnp.array_shapes(min_dims=min_rank, max_dims=max_rank, min_side=min(lo, max_side), max_side=max_side)
        # the empty branch: at least one zero-size dim (a 0-d tensor is never empty)
        ranked = hnp.array_shapes(min_dims=max(min_rank, 1), max_dims=max(max_rank, 1), min_side=0, max_side=max_side)
        return ranked.flatmap(_with_a_zero) if max_rank >= 1 else hnp.array_shapes(min_dims=0, max_dims=0)

    return _per_smallest_side(min_side, expand)


def broadcast_shapes(n: int, min_rank: int = 0, max_rank: int = 4, max_side: int = MAX_SIDE) -> st.SearchStrategy:
    """``n`` shapes that broadcast together (size-1 and missing dims included)."""
    forced = _directed_broadcast(n, min_rank, max_rank)
    return st.just(forced) if forced is not None else _broadcast_shapes(n, min_rank, max_rank, max_side)


@functools.cache
def _broadcast_shapes(n: int, min_rank: int, max_rank: int, max_side: int) -> st.SearchStrategy:
    def expand(lo: int) -> st.SearchStrategy:
        drawn = hnp.mutually_broadcastable_shapes(
            num_shapes=n, min_dims=min_rank, max_dims=max_rank, min_side=min(lo, max_side), max_side=max_side
        ).map(lambda bs: bs.input_shapes)
        return drawn if lo > 0 else drawn.flatmap(_emptied)

    return _per_smallest_side(0, expand)


def _directed_broadcast(n: int, min_rank: int, max_rank: int) -> tuple | None:
    from . import directed

    state = directed.active()
    if state is None:
        return None
    d = state.directive
    out: tuple | None = None
    if d.broadcast is not None:
        patterns = directed.broadcast_patterns(n)
        if d.broadcast < len(patterns):
            out = patterns[d.broadcast][1]
    elif d.shape == "edges" and max_rank >= 1:
        # operand i varies along its own axis: every combination of edge values meets once
        rank = min(n, max_rank)
        out = tuple(
            tuple(EDGE_SIDE if k == min(i, rank - 1) else 1 for k in range(rank)) for i in range(n)
        )
    elif d.shape == "large":
        full = directed.LARGE_SHAPES[3]
        out = (full,) + tuple((full[1:], (1, full[2]))[i % 2] for i in range(n - 1))
    elif d.shape == "empty":
        out = ((3, 0),) * n
    elif d.shape == "scalar":
        out = ((),) * n
    elif d.shape == "rank" and d.rank is not None:
        out = (tuple(directed.RANK_SIDES[: d.rank]),) * n
    elif d.shape == "model" and d.rank in directed.MODEL_SHAPES:
        full = directed.MODEL_SHAPES[d.rank]
        out = (full,) * n
    if out is None:
        return None
    if any(len(s) > max_rank for s in out) or max(len(s) for s in out) < min_rank:
        return None
    state.consumed.add("shape" if d.broadcast is None else "broadcast")
    return out


def _emptied(shapes_: tuple) -> st.SearchStrategy[tuple]:
    """The same broadcasting shapes with one broadcast dim made zero (a 0 broadcasts with 1)."""
    rank = max((len(s) for s in shapes_), default=0)
    if rank == 0:
        return st.just(shapes_)

    def zero_at(k: int) -> tuple:
        out, zeroed = [], False
        for s in shapes_:
            s = list(s)
            if len(s) > k and s[-1 - k] != 1:
                s[-1 - k], zeroed = 0, True
            out.append(s)
        if not zeroed:  # every operand has 1 (or lacks the dim) there: empty the first that has it
            first = next(s for s in out if len(s) > k)
            first[-1 - k] = 0
        return tuple(tuple(s) for s in out)

    return st.integers(0, rank - 1).map(zero_at)


def dim_index(rank: int) -> st.SearchStrategy[int]:
    """A dimension index of a tensor of ``rank``, negative spellings included."""
    forced = directed_dim(rank)
    if forced is not None:
        return st.just(forced)
    r = max(rank, 1)
    return st.integers(-r, r - 1)


def directed_dim(rank: int) -> int | None:
    """The dim a ``dim`` directive forces, if it is a valid dim of ``rank``."""
    from . import directed

    state = directed.active()
    if state is None or state.directive.dim is None:
        return None
    d = state.directive.dim
    if -max(rank, 1) <= d < max(rank, 1):
        state.consumed.add("dim")
        return d
    return None


def nonneg_dim(rank: int) -> st.SearchStrategy[int]:
    """A dimension index in [0, rank) (0 for a 0-d tensor); a ``dim`` directive's dim, normalized."""
    forced = directed_dim(rank)
    if forced is not None:
        return st.just(forced % max(rank, 1))
    return st.integers(0, max(rank, 1) - 1)


def spell_dim(draw, dim: int, rank: int) -> int:
    """``dim`` (non-negative) spelled as itself or as its negative alias (as a ``dim`` directive says)."""
    from . import directed

    state = directed.active()
    if state is not None and state.directive.dim is not None and "dim" in state.consumed:
        return dim - max(rank, 1) if state.directive.dim < 0 else dim
    return dim - max(rank, 1) if draw(st.booleans()) else dim
