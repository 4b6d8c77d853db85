"""Shape strategies shared by the signatures."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

MAX_SIDE = 6


def shapes(min_rank: int = 0, max_rank: int = 4, min_side: int = 0, max_side: int = MAX_SIDE) -> st.SearchStrategy:
    return hnp.array_shapes(min_dims=min_rank, max_dims=max_rank, min_side=min_side, max_side=max_side)


def broadcast_shapes(n: int, min_rank: int = 0, max_rank: int = 4, max_side: int = MAX_SIDE) -> st.SearchStrategy:
    """``n`` shapes that broadcast together (size-1 and missing dims included)."""
    return hnp.mutually_broadcastable_shapes(
        num_shapes=n, min_dims=min_rank, max_dims=max_rank, min_side=0, max_side=max_side
    ).map(lambda bs: bs.input_shapes)


def dim_index(rank: int) -> st.SearchStrategy[int]:
    """A dimension index of a tensor of ``rank``, negative spellings included."""
    r = max(rank, 1)
    return st.integers(-r, r - 1)
