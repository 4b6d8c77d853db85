"""Signature of aten.convolution: 1d/2d/3d, direct or transposed, strided, padded, dilated, grouped."""

from __future__ import annotations

import math

from hypothesis import strategies as st

from conformance.api.scalar_type import is_integral

from . import Call, Tensor, attr, directed, param, signature
from .shapes import EDGE_SIDE
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

    The edge set's cases (conformance/strategies/directed.py): a model's convolution (3x3 or 3-wide
    kernel, 16 -> 32 channels rounded up to a multiple of groups, "same" padding, a bias; over 14 x 14
    images or sequences of 64; direct unless the case forces an output_padding), honouring the
    attributes a case forces; edge values in the input only, from ``params.edge_domain`` (default:
    the op's domain), along a last side of EDGE_SIDE, the weights and bias ordinary (the choice and
    float32's range: specs/README.md, "The edge set"); an empty batch; a large input (batch 1,
    LARGE_ELEMENTS); a long one (the large input with a kernel of max_kernel taps per dim over enough
    channels that each output sums LONG_SIDE products or more).
    """
    real = directed.model()
    edge = directed.edge_shape()
    forced = directed.forced_attrs()
    allowed_dims = param(spec, "dims", [1, 2, 3])
    if real is not None:
        dims = 2 if real["rank"] == 4 else 1
        if dims not in allowed_dims:
            from hypothesis import reject

            reject()
    elif edge in ("edges", "long"):
        preferred = 1 if edge == "edges" else 2
        dims = preferred if preferred in allowed_dims else allowed_dims[0]
    else:
        dims = draw(st.sampled_from(allowed_dims))
    narrow_int = is_integral(dtype) and dtype != "int64"
    transposed = draw(st.sampled_from(param(spec, "transposed", [False, True])))
    if real is not None or edge == "long":
        transposed = False  # a model's convolution (and the long sums') is a direct one ...
    if forced.get("output_padding", 0) and True in param(spec, "transposed", [False, True]):
        transposed = True  # ... unless the case is about a transposed one's output_padding
    if narrow_int:
        transposed = False
    max_channels = param(spec, "max_channels", 8)
    max_side = min(param(spec, "max_side", 8), 5 if dims == 3 else 8)
    max_kernel = param(spec, "max_kernel", 3)

    groups = attr(draw, spec, "groups", 1, keep=lambda g: g <= max_channels)
    group_channels = max_channels // groups
    half_limit = param(spec, "half_transposed_group_channels", 2) if transposed and dtype in ("float16", "bfloat16") else None
    if half_limit is not None:
        group_channels = min(group_channels, half_limit)
    if real is not None:  # 16 -> 32 channels, rounded up to a multiple of groups
        in_channels = groups * min(-(-real["channels"] // groups), half_limit or real["channels"])
        out_channels = groups * -(-real["out_channels"] // groups)
        kernel = [real["kernel"]] * dims
    elif edge == "long":  # each output sums LONG_SIDE (or more) products
        kernel = [max_kernel] * dims
        in_channels = groups * -(-directed.LONG_SIDE // max_kernel**dims)
        out_channels = groups * 2
    else:
        in_channels = groups * draw(st.integers(1, group_channels))
        if param(spec, "depthwise", True) and not transposed and draw(st.integers(0, 4)) == 0 and "groups" not in forced:
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
        if real is not None and "padding" not in forced:
            pad = 1 if 1 in spec.attrs.get("padding", (1,)) else 0  # "same" padding of a 3x3 kernel
        else:
            pad = attr(draw, spec, "padding", 0)
        if transposed:
            # output = (size - 1) * stride - 2 * pad + extent + output_padding must be >= 1.
            op_limit = max(stride[i], dilation[i])
            output_padding[i] = attr(draw, spec, "output_padding", 0, keep=lambda v, lim=op_limit: v < lim)
            low = max(1, -(-(2 * pad - extent - output_padding[i] + 1) // stride[i]) + 1)
            if low > max_side and real is None and edge is None:
                pad, low = 0, 1
        else:
            if forced.get("output_padding") == 0:
                directed.consume("attr:output_padding")  # a direct convolution's output_padding is 0
            low = max(1, extent - 2 * pad)
            if low > max_side and real is None and edge is None:
                dilation[i], extent = 1, kernel[i]
                low = max(1, extent - 2 * pad)
        padding.append(pad)
        sizes.append(low)
    sizes = _sized(draw, edge, real, dims, in_channels, sizes, max_side)

    batch = real["batch"] if real is not None else 0 if edge == "empty" else 1 if edge else draw(st.integers(1, param(spec, "max_batch", 2)))
    x = Tensor(draw(arrays(dtype, (batch, in_channels, *sizes), param(spec, "edge_domain", spec.domain) if edge == "edges" else spec.domain)))
    if transposed:
        w_shape = (in_channels, out_channels // groups, *kernel)
    else:
        w_shape = (out_channels, in_channels // groups, *kernel)
    with directed.ordinary_values():  # the edge values go to the input only (specs/README.md, "The edge set")
        weight = Tensor(draw(arrays(dtype, w_shape, spec.domain)), "parameter")
        with_bias = real is not None or draw(st.booleans())
        bias = Tensor(draw(arrays(dtype, (out_channels,), spec.domain)), "parameter") if with_bias else None
    return Call(op, (x, weight, bias, stride, padding, dilation, transposed, output_padding, groups))


def _sized(draw, edge, real, dims: int, channels: int, low: list[int], max_side: int) -> list[int]:
    """The spatial sides, each at least ``low``: a model's (14 x 14 images, sequences of 64); the edge
    set's (the last side EDGE_SIDE wide for edge values, a large input of LARGE_ELEMENTS for the
    large and long cases, drawn sides under an empty batch); else drawn up to ``max_side``."""
    if real is not None:
        side = real["side"] if dims == 2 else real["hidden"]
        return [max(n, side) for n in low]
    if edge == "edges":
        return [*low[:-1], max(low[-1], EDGE_SIDE)]
    if edge in ("large", "long"):
        per_side = math.ceil((directed.LARGE_ELEMENTS / channels) ** (1 / dims))
        sides = [max(n, per_side) for n in low[:-1]]
        rest = -(-directed.LARGE_ELEMENTS // (channels * math.prod(sides)))
        return [*sides, max(low[-1], rest)]
    return [draw(st.integers(n, max(n, max_side))) for n in low]
