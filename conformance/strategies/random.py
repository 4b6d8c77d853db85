"""Signatures of random ops: rand, randn, randperm, native_dropout.

Their outputs are judged by law (op spec ``values``; conformance/oracle.py), with tests whose
power grows with the sample: outside the edge set's directives a draw holds at least
``MIN_SAMPLE`` elements (param ``min_elements``) in seven draws of eight, and any small shape
(empty and 0-d included) in the eighth. The edge set's large, empty, 0-d and real-world
directives reach the sizes as they reach any op's shapes; its edge values reach
native_dropout's input.
"""

from __future__ import annotations

import math

from hypothesis import reject
from hypothesis import strategies as st

from . import Call, Tensor, attr, directed, param, signature
from .shapes import shapes
from .values import arrays

MIN_SAMPLE = 16_384
"""Elements of a drawn sample: enough for Kolmogorov-Smirnov at oracle.FALSE_ALARM (critical
0.024 + the dtype's resolution) to catch a shift of 0.1 sigma of N(0,1), a CDF distance of 0.04."""


def sample_shape(draw, spec, min_side: int = 0) -> tuple[int, ...]:
    """The shape of a sample whose law is tested (see the module docstring); sides of at least ``min_side``."""
    max_rank = param(spec, "max_rank", 4)
    state = directed.active()
    if (state is not None and state.directive.shape is not None) or draw(st.integers(0, 7)) == 0:
        return tuple(draw(shapes(0, max_rank, min_side)))
    rank = draw(st.integers(1, max_rank))
    sides = [draw(st.integers(max(min_side, 1), 6)) for _ in range(rank - 1)]
    sides.insert(draw(st.integers(0, rank - 1)), -(-param(spec, "min_elements", MIN_SAMPLE) // math.prod(sides)) + draw(st.integers(0, 64)))
    return tuple(sides)


def _dtype_kwarg(draw, dtype: str, default: str) -> dict:
    """{"dtype": dtype}, or {} in half the draws where ``dtype`` is what the op gives without one."""
    return {} if dtype == default and draw(st.booleans()) else {"dtype": dtype}


@signature("random_sizes")
def random_sizes(draw, spec, dtype, op):
    """rand(size, dtype=) / randn(size, dtype=): dtype=None gives float32 (the default dtype)."""
    return Call(op, (list(sample_shape(draw, spec)),), _dtype_kwarg(draw, dtype, "float32"))


@signature("randperm")
def randperm(draw, spec, dtype, op):
    """randperm(n, dtype=): n is the length of a 1-d shape under the edge set's directives (large:
    65,537; empty: 0; real-world: 64); otherwise 0-10 in one draw of four, else 64-8,192, enough
    for the uniformity test to have blocks. params.max_n: the largest n eager takes (or gives a
    permutation for) in a dtype; a directive that asks for more does not apply."""
    limit = param(spec, "max_n", {}).get(dtype)
    state = directed.active()
    if state is not None and state.directive.shape is not None:
        n = draw(shapes(1, 1))[0]
    elif draw(st.integers(0, 3)) == 0:
        n = draw(st.integers(0, 10))
    else:
        n = draw(st.integers(64, min(limit or 8192, 8192)))
    if limit is not None and n > limit:
        reject()
    return Call(op, (n,), _dtype_kwarg(draw, dtype, "int64"))


@signature("dropout")
def dropout(draw, spec, dtype, op):
    """native_dropout(input, p, train): input non-empty (see the op spec's skip_edges), p and train
    from attrs; a true train is sometimes spelled None, which ATen's ``bool? train`` also trains with."""
    x = draw(arrays(dtype, sample_shape(draw, spec, min_side=1), spec.domain))
    p = attr(draw, spec, "p")
    state = directed.active()
    # A directive that forces p meets it in training, where p matters.
    train = True if state is not None and "p" in state.directive.attrs else attr(draw, spec, "train")
    if train and draw(st.integers(0, 3)) == 0:
        train = None
    return Call(op, (Tensor(x), p, train))
