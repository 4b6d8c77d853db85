"""Signatures of backward ops: the gradient calls autograd makes for a forward call.

Each draws the forward's call with the forward's own signature (pooling.py, conv.py,
normalization.py, indexing.py's helpers), runs the forward in eager for its output's shape and for
what it saves for the backward (max pooling's indices, the normalizations' mean and rstd), draws
grad_output in the output's shape from the op's domain, and calls the backward overload with its
schema. The spec's attrs hold the forward signature's attributes and the backward's own
(output_mask, padding_idx, ...); an output_mask entry for an affine parameter's or a bias's
gradient comes with that parameter, as autograd asks for it only then.
"""

from __future__ import annotations

import numpy as np
from hypothesis import reject
from hypothesis import strategies as st

from . import SIGNATURES, Call, Tensor, attr, param, signature
from .indexing import index_tensor
from .shapes import shapes
from .values import arrays

_HALF = ("float16", "bfloat16")


def _forward(draw, spec, dtype: str, name: str, op: str) -> tuple[Call, tuple]:
    """The forward call drawn by signature ``name`` (the spec's attrs and params serve it too),
    and eager's outputs of it."""
    from conformance.programs import eager

    call = SIGNATURES[name](draw, spec, dtype, op)
    return call, eager(call)


def _grad(draw, spec, dtype: str, like: np.ndarray) -> Tensor:
    return Tensor(draw(arrays(dtype, tuple(like.shape), spec.domain)))


@signature("adaptive_avg_pool2d_backward")
def adaptive_avg_pool2d_backward(draw, spec, dtype, op):
    """_adaptive_avg_pool2d_backward(grad_output, self): self and the output size as the
    ``adaptive_pool`` signature draws them (dims 2)."""
    forward, (out,) = _forward(draw, spec, dtype, "adaptive_pool", "aten._adaptive_avg_pool2d.default")
    x = forward.args[0]
    return Call(op, (_grad(draw, spec, dtype, out), x))


@signature("pool_backward")
def pool_backward(draw, spec, dtype, op):
    """avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
    count_include_pad, divisor_override) or max_pool2d_with_indices_backward(grad_output, self,
    kernel_size, stride, padding, dilation, ceil_mode, indices): the forward's call as the ``pool``
    signature draws it (params ``kind``: avg or max, dims 2), with max pooling's indices from
    eager's forward."""
    kind = param(spec, "kind", "max")
    forward_op = "aten.max_pool2d_with_indices.default" if kind == "max" else "aten.avg_pool2d.default"
    forward, outputs = _forward(draw, spec, dtype, "pool", forward_op)
    x, *attrs = forward.args
    grad = _grad(draw, spec, dtype, outputs[0])
    if kind == "avg":
        return Call(op, (grad, x, *attrs))
    indices = outputs[1]
    plane = int(np.prod(x.value.shape[-2:]))
    if indices.size and (indices.min() < 0 or indices.max() >= plane):
        reject()  # a window wholly in padding (not drawn by ``pool``): eager would write out of bounds
    return Call(op, (grad, x, *attrs, Tensor(indices)))


@signature("convolution_backward")
def convolution_backward(draw, spec, dtype, op):
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask): the forward's call as the ``convolution``
    signature draws it; bias_sizes is [out_channels] when the forward has a bias or output_mask
    asks for its gradient, else None. attrs: ``output_mask`` and the forward's.

    Half-type direct convolutions keep at most ``half_direct_group_channels`` (default 2) output
    channels per group (the forward's weight is cut to them): eager's grad_input is then a
    transposed convolution whose gemm columns, sums over those channels, it rounds to the half type
    before col2im, so with three or more which way a column rounds depends on the BLAS's summation
    order (the ``convolution`` signature's half_transposed_group_channels, for the same reason)."""
    forward = SIGNATURES["convolution"](draw, spec, dtype, "aten.convolution.default")
    x, weight, bias, stride, padding, dilation, transposed, output_padding, groups = forward.args
    limit = param(spec, "half_direct_group_channels", 2)
    per_group = weight.value.shape[0] // groups
    if dtype in _HALF and not transposed and per_group > limit:
        w = weight.value.reshape((groups, per_group) + weight.value.shape[1:])[:, :limit]
        weight = Tensor(np.ascontiguousarray(w.reshape((groups * limit,) + w.shape[2:])), weight.role)
        bias = None if bias is None else Tensor(bias.value.reshape(groups, per_group)[:, :limit].reshape(-1), bias.role)
        forward = Call(forward.op, (x, weight, bias, *forward.args[3:]))
    from conformance.programs import eager

    (out,) = eager(forward)
    mask = list(attr(draw, spec, "output_mask"))
    bias_sizes = [out.shape[1]] if bias is not None or mask[2] else None
    args = (_grad(draw, spec, dtype, out), x, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, mask)
    return Call(op, args)


@signature("embedding_backward")
def embedding_backward(draw, spec, dtype, op):
    """embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq).

    indices of rank 0 to 3 (sides up to 4) in [0, num_weights) as int64 or int32 (params
    ``index_dtypes``), num_weights 1 to ``max_weights`` (default 8), grad_output the indices' shape
    plus an embedding dim of 0 to ``max_dim`` (default 40; ``half_max_dim``, default 15, for the
    half types: eager adds a row with alpha in a vector loop from 16 elements on (32 with AVX512)
    and in a scalar loop below, which round differently). attrs: ``padding_idx``,
    ``scale_grad_by_freq``."""
    num = draw(st.integers(1, param(spec, "max_weights", 8)))
    dim = draw(st.integers(0, param(spec, "half_max_dim", 15) if dtype in _HALF else param(spec, "max_dim", 40)))
    indices = index_tensor(draw, spec, draw(shapes(0, 3, 0, 4)), 0, num)
    grad = Tensor(draw(arrays(dtype, tuple(indices.value.shape) + (dim,), spec.domain)))
    return Call(op, (grad, indices, num, attr(draw, spec, "padding_idx"), attr(draw, spec, "scale_grad_by_freq")))


def _affine(draw, spec, dtype: str, tensor: Tensor | None, shape: tuple, wanted: bool) -> Tensor | None:
    """The forward's affine parameter, or one drawn (as the forward signature draws them) when
    output_mask asks for its gradient and the forward had none."""
    if tensor is not None or not wanted:
        return tensor
    return Tensor(draw(arrays(dtype, tuple(shape), param(spec, "affine_domain", spec.domain))), "parameter")


@signature("layer_norm_backward")
def layer_norm_backward(draw, spec, dtype, op):
    """native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
    output_mask): the forward's call as the ``layer_norm`` signature draws it, its mean and rstd
    from eager. attrs: ``output_mask`` and the forward's ``eps``.

    Half types keep at most ``half_max_rows`` (default 4) rows of normalized elements (the
    forward's input cut to them, its leading dims merged into one): eager rounds dgamma and dbeta
    to the half type after every row, in one buffer per thread, so its result depends on the
    number of threads by up to about 1% of the rows' sum of |dy| (bfloat16), which only few rows
    keep within a meaningful tolerance."""
    from conformance.programs import eager

    forward, (_, mean, rstd) = _forward(draw, spec, dtype, "layer_norm", "aten.native_layer_norm.default")
    x, normalized, weight, bias, _ = forward.args
    rows = x.value.size // max(1, int(np.prod(normalized)))
    limit = param(spec, "half_max_rows", 4)
    if dtype in _HALF and rows > limit:
        x = Tensor(np.ascontiguousarray(x.value.reshape((rows, *normalized))[:limit]), x.role)
        forward = Call(forward.op, (x, *forward.args[1:]))
        _, mean, rstd = eager(forward)
    mask = list(attr(draw, spec, "output_mask"))
    weight = _affine(draw, spec, dtype, weight, normalized, mask[1])
    bias = _affine(draw, spec, dtype, bias, normalized, mask[2])
    grad = _grad(draw, spec, dtype, x.value)
    return Call(op, (grad, x, normalized, Tensor(mean), Tensor(rstd), weight, bias, mask))


@signature("group_norm_backward")
def group_norm_backward(draw, spec, dtype, op):
    """native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group,
    output_mask): the forward's call as the ``group_norm`` signature draws it, its mean and rstd
    from eager. grad_weight and grad_bias both need a weight (eager computes them from it).
    attrs: ``output_mask`` and the forward's ``group``, ``eps``."""
    forward, (_, mean, rstd) = _forward(draw, spec, dtype, "group_norm", "aten.native_group_norm.default")
    x, weight, _, n, c, hxw, group, _ = forward.args
    mask = list(attr(draw, spec, "output_mask"))
    weight = _affine(draw, spec, dtype, weight, (c,), mask[1] or mask[2])
    grad = _grad(draw, spec, dtype, x.value)
    return Call(op, (grad, x, Tensor(mean), Tensor(rstd), weight, n, c, hxw, group, mask))
