"""Shape strategies shared by the signatures."""

from __future__ import annotations

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


def shapes(min_rank: int = 0, max_rank: int = 4, min_side: int = 0, max_side: int = MAX_SIDE) -> st.SearchStrategy:
    def of(lo: int) -> st.SearchStrategy[tuple]:
        if lo > 0:
            return hnp.array_shapes(min_dims=min_rank, max_dims=max_rank, min_side=min(lo, max_side), max_side=max_side)
        # the empty branch: at least one zero-size dim (a 0-d tensor is never empty)
        ranked = hnp.array_shapes(min_dims=max(min_rank, 1), max_dims=max(max_rank, 1), min_side=0, max_side=max_side)
        return ranked.flatmap(_with_a_zero) if max_rank >= 1 else hnp.array_shapes(min_dims=0, max_dims=0)

    return _smallest_side(min_side).flatmap(of)


def broadcast_shapes(n: int, min_rank: int = 0, max_rank: int = 4, max_side: int = MAX_SIDE) -> st.SearchStrategy:
    """``n`` shapes that broadcast together (size-1 and missing dims included)."""
    def of(lo: int) -> st.SearchStrategy:
        drawn = hnp.mutually_broadcastable_shapes(
            num_shapes=n, min_dims=min_rank, max_dims=max_rank, min_side=min(lo, max_side), max_side=max_side
        ).map(lambda bs: bs.input_shapes)
        return drawn if lo > 0 else drawn.flatmap(_emptied)

    return _smallest_side(0).flatmap(of)


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
    r = max(rank, 1)
    return st.integers(-r, r - 1)
