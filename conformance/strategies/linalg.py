"""Signatures of matrix products: mm, bmm, addmm, baddbmm, linear, dot."""

from __future__ import annotations

from hypothesis import strategies as st

from conformance.api.scalar_type import is_floating

from . import Call, Tensor, attr, directed, param, signature
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
    """
    layout = param(spec, "layout", None)
    if layout not in LAYOUTS:
        raise ValueError(f"{spec.source}: params.layout must be one of {LAYOUTS}, got {layout!r}")
    side = st.integers(0, param(spec, "max_side", 6))
    real = directed.model()
    if real is not None:  # a linear layer of a model: (batch x) sequence x hidden -> out features
        m, n, b, k = real["seq"], real["out_features"], real["batch"], real["hidden"]
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
        batch = [b, m] if real is not None and real["rank"] == 3 else [m] if real is not None else draw(st.lists(side, min_size=0, max_size=2))
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
