"""Signatures of matrix products (mm, bmm, addmm, baddbmm, linear, dot) and distances (cdist, pdist)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from conformance.api.scalar_type import is_floating

from . import Call, Tensor, attr, directed, param, signature
from .shapes import EDGE_SIDE, shapes
from .values import arrays

LAYOUTS = ("mm", "bmm", "addmm", "baddbmm", "linear", "dot")


def _int_scalar(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@signature("matmul")
def matmul(draw, spec, dtype, op):
    """A matrix product with consistent operand shapes, all operands in ``dtype``.

    params: ``layout`` (required) picks the operand layout: ``mm`` (M,K)@(K,N);
    ``bmm`` (B,M,K)@(B,K,N); ``addmm`` self + (M,K)@(K,N) with ``self``
    broadcasting to (M,N); ``baddbmm`` the same with a batch dim; ``linear``
    input (*, K) with a parameter weight (N,K) and an optional parameter bias
    (N,); ``dot`` two (K,) vectors. ``max_side`` (default 6) bounds M, N and the
    batch, ``max_k`` (default 8) the contracted size; sizes start at 0.
    attrs: ``beta``/``alpha`` for addmm and baddbmm (integer dtypes keep only
    integer values: eager truncates a float scalar to the integer type).
    The edge set's shapes (_EDGE_SIZES): edge values as an outer product (K = 1: every pair of
    edge values meets in one product; dot sums EDGE_SIDE of them), an empty M (and batch), a large
    operand of LARGE_ELEMENTS, a long one whose every output sums LONG_SIDE products.
    """
    layout = param(spec, "layout", None)
    if layout not in LAYOUTS:
        raise ValueError(f"{spec.source}: params.layout must be one of {LAYOUTS}, got {layout!r}")
    side = st.integers(0, param(spec, "max_side", 6))
    real = directed.model()
    edge = directed.edge_shape()
    if real is not None:  # a linear layer of a model: (batch x) sequence x hidden -> out features
        m, n, b, k = real["seq"], real["out_features"], real["batch"], real["hidden"]
    elif edge is not None:
        m, k, n, b = _EDGE_SIZES[edge]
        if layout == "dot" and edge in ("large", "long"):
            k = directed.LARGE_ELEMENTS + 1
        elif layout == "dot" and edge == "edges":
            k = EDGE_SIDE
        elif layout == "dot":  # empty: a sum of no products
            k = 0
    else:
        m, n, b = draw(side), draw(side), draw(st.integers(0, 3))
        k = draw(st.integers(0, param(spec, "max_k", 8)))

    def tensor(shape, role="input"):
        return Tensor(draw(arrays(dtype, tuple(shape), spec.domain)), role)

    if layout == "mm":
        return Call(op, (tensor((m, k)), tensor((k, n))))
    if layout == "bmm":
        return Call(op, (tensor((b, m, k)), tensor((b, k, n))))
    if layout == "dot":
        return Call(op, (tensor((k,)), tensor((k,))))
    if layout == "linear":
        if real is not None:
            batch = [b, m] if real["rank"] == 3 else [m]
        else:
            batch = [m] if edge is not None else draw(st.lists(side, min_size=0, max_size=2))
        weight = tensor((n, k), "parameter")
        bias = tensor((n,), "parameter") if draw(st.booleans()) else None
        return Call(op, (tensor((*batch, k)), weight, bias))
    keep = None if is_floating(dtype) else _int_scalar
    kwargs = {key: attr(draw, spec, key, 1, keep=keep) for key in ("beta", "alpha")}
    if layout == "addmm":
        self_shape = draw(st.sampled_from([(m, n), (n,), (1, n), (m, 1), ()]))
        return Call(op, (tensor(self_shape), tensor((m, k)), tensor((k, n))), kwargs)
    self_shape = draw(st.sampled_from([(b, m, n), (m, n), (1, 1, n), (b, 1, n), ()]))
    return Call(op, (tensor(self_shape), tensor((b, m, k)), tensor((b, k, n))), kwargs)


_EDGE_SIZES = {
    "edges": (EDGE_SIDE, 1, EDGE_SIDE, 1),
    "empty": (0, 4, 3, 0),
    "large": (257, 257, 3, 1),
    "long": (16, directed.LONG_SIDE, 4, 1),
}
"""(M, K, N, batch) of matmul under the edge set's shape cases."""


def _mm_path(p: float, mode, rows: int, cols: int) -> bool:
    """Whether _cdist_forward takes its matrix-product path (_euclidean_dist): p = 2 with compute_mode
    1, or compute_mode None/0 and more than 25 rows in either operand (Distance.cpp)."""
    return p == 2 and (mode == 1 or (mode in (None, 0) and (rows > 25 or cols > 25)))


@signature("cdist")
def cdist(draw, spec, dtype, op):
    """_cdist_forward(x1, x2, p, compute_mode): x1 (*B1, P, M), x2 (*B2, R, M) with batch dims that
    broadcast (x2's may be missing or 1), P, R in 0-6 and M as x1's shape gives it (the edge set's
    large and real-world shapes included).

    attrs: ``p`` and ``compute_mode`` (``params.optional`` leaves it None). R is 26-32 a quarter of
    the time, past eager's threshold for its matrix-product path (p = 2 with compute_mode 1, or
    None/0 and more than 25 rows in either operand). That path's expansion cancels (the op spec's
    notes), so its draws hold integers (finite values rounded; NaN, +-inf kept), which it computes
    exactly in any summation order while every term and partial sum is an integer below 2**24
    (float32: sum |terms| <= 4 * 64 * M, so M <= 2**16; past that p = 2 keeps compute_mode 2).
    """
    x1_shape = tuple(draw(shapes(2, param(spec, "max_rank", 4))))
    *batch, rows, m = x1_shape
    keep = draw(st.integers(0, len(batch)))
    batch2 = [1 if draw(st.integers(0, 2)) == 0 else n for n in batch[len(batch) - keep:]]
    cols = draw(st.integers(26, 32)) if draw(st.integers(0, 3)) == 0 else draw(st.integers(0, 6))
    optional = "compute_mode" in param(spec, "optional", ())
    mode = None if optional and draw(st.booleans()) else attr(draw, spec, "compute_mode")
    p = attr(draw, spec, "p")
    mm_path = _mm_path(p, mode, rows, cols)
    if mm_path and dtype == "float32" and m > 2**16:
        mode, mm_path = 2, False
    x1 = draw(arrays(dtype, x1_shape, spec.domain))
    x2 = draw(arrays(dtype, (*batch2, cols, m), spec.domain))
    if mm_path:
        x1, x2 = np.round(x1), np.round(x2)
    return Call(op, (Tensor(x1), Tensor(x2), float(p), mode))


@signature("pdist")
def pdist(draw, spec, dtype, op):
    """_pdist_forward(self, p): self (N, M) of any drawn 2-d shape (the edge set's included); p from
    attrs.p, left out (the default, 2) when it is 2 half of the time."""
    x = Tensor(draw(arrays(dtype, tuple(draw(shapes(2, 2))), spec.domain)))
    p = float(attr(draw, spec, "p"))
    return Call(op, (x,) if p == 2 and draw(st.booleans()) else (x, p))
