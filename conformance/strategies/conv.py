"""Signature of aten.convolution: 1d/2d/3d, direct or transposed, strided, padded, dilated, grouped."""

from __future__ import annotations

from hypothesis import strategies as st

from conformance.api.scalar_type import is_integral

from . import Call, Tensor, attr, directed, param, signature
from .values import arrays


def _dims_attr(draw, spec, key: str, dims: int, default: int, keep=None) -> list[int]:
    """One value per spatial dim, each drawn from ``attrs[key]``."""
    return [attr(draw, spec, key, default, keep=keep) for _ in range(dims)]


@signature("convolution")
def convolution(draw, spec, dtype, op):
    """convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups).

    The weight (and the bias, present half of the time) are parameters.
    params: ``dims`` spatial ranks to draw from (default [1, 2, 3]);
    ``transposed`` choices (default [false, true]); ``max_channels`` per
    tensor (default 8); ``max_side`` spatial size (default 8, and at most 5 in
    3d); ``max_kernel`` (default 3); ``max_batch`` (default 2); ``depthwise``
    (default true) sometimes draws groups == in_channels.
    attrs: ``stride``, ``padding``, ``dilation``, ``output_padding`` give the
    allowed values of each spatial entry (drawn per dim); ``groups`` the
    allowed group counts. Shapes are drawn to fit: channels are multiples of
    groups, the padded input holds the dilated kernel, output_padding is below
    max(stride, dilation), and a transposed output is at least 1 wide.
    Integer dtypes other than int64 get neither transposed nor dilated
    convolutions: eager dispatches those kernels (slow_conv_transpose*,
    slow_conv_dilated*) for floating types and int64 only.
    Half-type transposed convolutions get at most
    ``half_transposed_group_channels`` (default 2) input channels per group:
    eager rounds each gemm column (a float32 sum over those channels) to the
    half type before col2im, so with three or more channels which way a column
    rounds depends on the BLAS summation order, which no reference can match;
    a sum of two products is the same in any order.
    """
    real = directed.model()
    allowed_dims = param(spec, "dims", [1, 2, 3])
    if real is not None:
        return _model_convolution(draw, spec, dtype, op, real, allowed_dims)
    dims = draw(st.sampled_from(allowed_dims))
    narrow_int = is_integral(dtype) and dtype != "int64"
    transposed = draw(st.sampled_from(param(spec, "transposed", [False, True])))
    if narrow_int:
        transposed = False
    max_channels = param(spec, "max_channels", 8)
    max_side = min(param(spec, "max_side", 8), 5 if dims == 3 else 8)
    max_kernel = param(spec, "max_kernel", 3)

    groups = attr(draw, spec, "groups", 1, keep=lambda g: g <= max_channels)
    group_channels = max_channels // groups
    if transposed and dtype in ("float16", "bfloat16"):
        group_channels = min(group_channels, param(spec, "half_transposed_group_channels", 2))
    in_channels = groups * draw(st.integers(1, group_channels))
    if param(spec, "depthwise", True) and not transposed and draw(st.integers(0, 4)) == 0:
        groups = in_channels
    out_channels = groups * draw(st.integers(1, max(1, max_channels // groups)))

    kernel = [draw(st.integers(1, max_kernel)) for _ in range(dims)]
    stride = _dims_attr(draw, spec, "stride", dims, 1)
    dilation = _dims_attr(draw, spec, "dilation", dims, 1, keep=(lambda d: d == 1) if narrow_int else None)
    padding = []
    sizes = []
    output_padding = [0] * dims
    for i in range(dims):
        extent = dilation[i] * (kernel[i] - 1) + 1
        if transposed:
            pad = attr(draw, spec, "padding", 0)
            # output = (size - 1) * stride - 2 * pad + extent + output_padding must be >= 1.
            op_limit = max(stride[i], dilation[i])
            output_padding[i] = attr(draw, spec, "output_padding", 0, keep=lambda v, lim=op_limit: v < lim)
            low = max(1, -(-(2 * pad - extent - output_padding[i] + 1) // stride[i]) + 1)
            if low > max_side:
                pad, low = 0, 1
            size = draw(st.integers(low, max_side))
        else:
            pad = attr(draw, spec, "padding", 0)
            low = max(1, extent - 2 * pad)
            if low > max_side:
                dilation[i], extent = 1, kernel[i]
                low = max(1, extent - 2 * pad)
            size = draw(st.integers(low, max(low, max_side)))
        padding.append(pad)
        sizes.append(size)

    batch = draw(st.integers(1, param(spec, "max_batch", 2)))
    x = Tensor(draw(arrays(dtype, (batch, in_channels, *sizes), spec.domain)))
    if transposed:
        w_shape = (in_channels, out_channels // groups, *kernel)
    else:
        w_shape = (out_channels, in_channels // groups, *kernel)
    weight = Tensor(draw(arrays(dtype, w_shape, spec.domain)), "parameter")
    bias = Tensor(draw(arrays(dtype, (out_channels,), spec.domain)), "parameter") if draw(st.booleans()) else None
    return Call(op, (x, weight, bias, stride, padding, dilation, transposed, output_padding, groups))


def _model_convolution(draw, spec, dtype, op, real, allowed_dims):
    """A model's convolution: a 3x3 (or 3-wide) kernel, 16 -> 32 channels, stride 1, padding 1,
    over 14x14 images (rank 4) or sequences of 64 (rank 3), with a bias; None where the spec
    allows no such convolution."""
    from hypothesis import reject

    dims = 2 if real["rank"] == 4 else 1
    if dims not in allowed_dims:
        reject()
    k, c_in, c_out = real["kernel"], real["channels"], real["out_channels"]
    side = real["side"] if dims == 2 else real["hidden"]
    pad = 1 if 1 in spec.attrs.get("padding", (1,)) else 0
    x = Tensor(draw(arrays(dtype, (real["batch"], c_in, *([side] * dims)), spec.domain)))
    weight = Tensor(draw(arrays(dtype, (c_out, c_in, *([k] * dims)), spec.domain)), "parameter")
    bias = Tensor(draw(arrays(dtype, (c_out,), spec.domain)), "parameter")
    return Call(op, (x, weight, bias, [1] * dims, [pad] * dims, [1] * dims, False, [0] * dims, 1))
