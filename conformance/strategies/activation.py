"""Signatures of activation ops with a parameter tensor or a shape constraint: prelu, glu.

Activations of one tensor and scalar attributes use ``unary_attrs`` (elementwise.py).
"""

from __future__ import annotations

from hypothesis import strategies as st

from . import Call, Tensor, attr, param, signature
from .shapes import dim_index, shapes
from .values import arrays


@signature("prelu")
def prelu(draw, spec, dtype, op):
    """prelu(self, weight): ``weight`` a parameter with one value or one per channel (dim 1 of
    ``self``; 1 for a 1-d ``self``), as a 1-d or (single value) 0-d tensor.

    params: ``max_rank`` (default 4), ``weight_domain`` (default "small").
    """
    x_shape = draw(shapes(0, param(spec, "max_rank", 4)))
    x = draw(arrays(dtype, x_shape, spec.domain))
    channels = x_shape[1] if len(x_shape) > 1 else 1
    per_channel = len(x_shape) > 0 and draw(st.booleans())
    if per_channel:
        w_shape = (channels,)
    else:
        w_shape = draw(st.sampled_from([(1,), ()]))
    w = draw(arrays(dtype, w_shape, param(spec, "weight_domain", "small")))
    return Call(op, (Tensor(x), Tensor(w, role="parameter")))


@signature("prelu_kernel")
def prelu_kernel(draw, spec, dtype, op):
    """_prelu_kernel(self, weight): ``weight`` a parameter that broadcasts to ``self``'s shape
    (some dims kept, the others 1, possibly fewer leading dims).

    params: ``max_rank`` (default 4), ``weight_domain`` (default "small").
    """
    x_shape = draw(shapes(0, param(spec, "max_rank", 4)))
    x = draw(arrays(dtype, x_shape, spec.domain))
    keep = draw(st.lists(st.booleans(), min_size=len(x_shape), max_size=len(x_shape)))
    w_shape = tuple(s if k else 1 for s, k in zip(x_shape, keep))
    w_shape = w_shape[draw(st.integers(0, len(w_shape))):]
    w = draw(arrays(dtype, w_shape, param(spec, "weight_domain", "small")))
    return Call(op, (Tensor(x), Tensor(w, role="parameter")))


@signature("glu")
def glu(draw, spec, dtype, op):
    """glu(self, dim): ``self`` of rank 1 to ``max_rank`` (default 4) whose size along ``dim`` is
    even (0 included); ``dim`` drawn from attrs.dim when given, else any valid index."""
    rank = draw(st.integers(1, param(spec, "max_rank", 4)))
    if "dim" in spec.attrs:
        dim = attr(draw, spec, "dim", keep=lambda d: -rank <= d < rank)
    else:
        dim = draw(dim_index(rank))
    shape = list(draw(shapes(rank, rank)))
    shape[dim] = 2 * draw(st.integers(0, 3))
    x = draw(arrays(dtype, tuple(shape), spec.domain))
    return Call(op, (Tensor(x),), {"dim": dim})
