"""Convolution: aten.convolution.default in 1, 2 and 3 spatial dims, direct and transposed.

The direct convolution is im2col: a sliding-window view over the padded input
gives every (dilated, strided) window without copying; one copy lays the
windows out as columns and a single batched ``np.matmul`` per group (BLAS for
float32/float64) contracts them with the weight. The transposed convolution
is its adjoint, computed the way ATen's slow_conv_transpose kernels do: the
weight times the input gives one column per kernel tap (gemm), and col2im adds
each tap's column into the strided output positions it reaches (a loop over
the kernel taps, each a strided slice of the whole output).

Half types accumulate in float32 and round once (ATen's slow_conv2d runs gemm in
opmath_t with the bias preloaded into the output); integers are computed in
int64 and wrapped, which is the same as ATen's accumulation in the integer
type itself.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ._dtypes import bfloat16, cast, exact_type, float16, float32, int64, is_bool, is_int
from ._registry import kernel


def _per_dim(name: str, values, dims: int) -> list[int]:
    """A stride/padding/dilation list, a single value expanded to every spatial dim as ATen does."""
    values = [int(v) for v in values]
    if len(values) == 1 and dims > 1:
        values = values * dims
    if len(values) != dims:
        raise ValueError(f"convolution: {name} must have 1 or {dims} entries, got {values}")
    return values


def _pad(x: np.ndarray, padding) -> np.ndarray:
    """Zero padding of the spatial dims (a preallocated copy: np.pad costs 20x more on small inputs)."""
    if not any(padding):
        return x
    spatial = x.shape[2:]
    out = np.zeros(x.shape[:2] + tuple(s + 2 * p for s, p in zip(spatial, padding)), x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(p, p + s) for s, p in zip(spatial, padding))] = x
    return out


def _windows(x: np.ndarray, kernel_size, stride, dilation) -> np.ndarray:
    """Every strided, dilated kernel window of ``x`` as a read-only view (N, C, *out, *kernel).

    This is the view ``sliding_window_view(x, extent, axis=spatial)[..., ::stride, ..., ::dilation]``
    makes, built in one ``as_strided`` call (sliding_window_view's argument handling
    dominates the cost of a small convolution).
    """
    spatial, steps = x.shape[2:], x.strides[2:]
    extent = [d * (k - 1) + 1 for d, k in zip(dilation, kernel_size)]
    for axis, (size, e) in enumerate(zip(spatial, extent)):
        if size < e:
            raise ValueError(
                f"convolution: padded input size {size} in spatial dim {axis} is smaller than the "
                f"dilated kernel size {e}"
            )
    out_size = tuple((size - e) // s + 1 for size, e, s in zip(spatial, extent, stride))
    strides = x.strides[:2] + tuple(t * s for t, s in zip(steps, stride)) + tuple(t * d for t, d in zip(steps, dilation))
    shape = x.shape[:2] + out_size + tuple(kernel_size)
    if x.flags.c_contiguous and x.size:
        # The same view straight from the buffer: a quarter of as_strided's cost.
        return np.ndarray(shape, x.dtype, buffer=x, strides=strides)
    return as_strided(x, shape, strides, writeable=False)


def _direct(x: np.ndarray, w: np.ndarray, stride, padding, dilation, groups: int) -> np.ndarray:
    """Direct convolution of ``x`` (N, C, *spatial) with ``w`` (O, C/groups, *kernel), unrounded."""
    dims = w.ndim - 2
    n = x.shape[0]
    o, cg = w.shape[:2]
    kernel_size = w.shape[2:]
    windows = _windows(_pad(x, padding), kernel_size, stride, dilation)  # (N, C, *out, *kernel)
    out_size = windows.shape[2 : 2 + dims]
    taps, positions = math.prod(kernel_size), math.prod(out_size)
    # Columns (N, G, C/G * taps, positions): the one copy im2col makes.
    windows = windows.reshape((n, groups, cg) + out_size + tuple(kernel_size))
    order = (0, 1, 2) + tuple(range(3 + dims, 3 + 2 * dims)) + tuple(range(3, 3 + dims))
    columns = windows.transpose(order).reshape(n, groups, cg * taps, positions)
    out = np.matmul(w.reshape(groups, o // groups, cg * taps), columns)  # (N, G, O/G, positions)
    return out.reshape((n, o) + out_size)


def _transposed(x: np.ndarray, w: np.ndarray, stride, padding, dilation, output_padding, groups: int, dtype) -> np.ndarray:
    """Transposed convolution of ``x`` (N, C, *spatial) with ``w`` (C, O/groups, *kernel).

    ATen's slow_conv_transpose{2,3}d (NaiveConvolutionTranspose2d.cpp, 3d.cpp)
    multiplies the weight into columns with gemm, stores them in the input
    dtype, then scatters them with col2im (aten/src/ATen/native/im2col.h),
    adding kernel taps to each output element in row-major tap order. For half
    types every one of those stores rounds, so this does the same: one rounding
    of the columns and one after each tap's addition. oneDNN's float32
    deconvolution sums in its own order, within the op's tolerance.
    """
    n, c = x.shape[:2]
    cg = c // groups
    og = w.shape[1]
    kernel_size = w.shape[2:]
    in_size = x.shape[2:]
    half = dtype in (float16, bfloat16)
    weight = w.reshape(groups, cg, og * math.prod(kernel_size)).swapaxes(1, 2)  # (G, O/G * taps, C/G)
    columns = np.matmul(weight, x.reshape(n, groups, cg, math.prod(in_size)))
    columns = columns.reshape((n, groups * og) + tuple(kernel_size) + tuple(in_size))
    if half:
        columns = cast(columns, dtype).astype(float32)
    full = [(i - 1) * s + d * (k - 1) + 1 + op for i, s, d, k, op in zip(in_size, stride, dilation, kernel_size, output_padding)]
    out_size = [f - 2 * p for f, p in zip(full, padding)]
    if min(out_size) < 1:
        raise ValueError(f"convolution: transposed convolution output size {out_size} is too small")
    out = np.zeros((n, groups * og) + tuple(full), columns.dtype)
    for tap in np.ndindex(*kernel_size):
        where = (slice(None), slice(None)) + tuple(
            slice(t * d, t * d + (i - 1) * s + 1, s) for t, d, i, s in zip(tap, dilation, in_size, stride)
        )
        out[where] += columns[(slice(None), slice(None)) + tap]
        if half:
            out[where] = cast(out[where], dtype)
    return out[(slice(None), slice(None)) + tuple(slice(p, p + size) for p, size in zip(padding, out_size))]


@kernel("aten.convolution.default")
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):  # noqa: A002
    dims = weight.ndim - 2
    if dims < 1 or input.ndim != weight.ndim:
        raise ValueError(
            f"convolution: expected a batched input of rank {weight.ndim} for weight of shape "
            f"{list(weight.shape)}, got input of shape {list(input.shape)}"
        )
    dtype = input.dtype
    if weight.dtype != dtype or (bias is not None and bias.dtype != dtype):
        raise TypeError("convolution: input, weight and bias must have the same dtype")
    if is_bool(dtype):
        raise TypeError("convolution: not implemented for bool tensors")
    stride = _per_dim("stride", stride, dims)
    padding = _per_dim("padding", padding, dims)
    dilation = _per_dim("dilation", dilation, dims)
    output_padding = _per_dim("output_padding", output_padding, dims) if transposed else [0] * dims
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0 or min(output_padding) < 0:
        raise ValueError("convolution: stride and dilation must be positive, padding and output_padding non-negative")
    groups = int(groups)
    channels = input.shape[1]
    if groups < 1 or channels % groups:
        raise ValueError(f"convolution: groups={groups} must divide the {channels} input channels")
    compute = exact_type(dtype)  # float64: the taps summed, then rounded once (transposed half types aside)
    x, w = input.astype(compute, copy=False), weight.astype(compute, copy=False)
    if is_int(dtype) and dtype != int64 and max(dilation) > 1 and not transposed:
        # ATen routes dilated integer convolutions to slow_conv_dilated, which dispatches int64 only.
        raise TypeError(f"convolution: dilated convolution is not implemented for {dtype}")
    if transposed:
        if is_int(dtype) and dtype != int64:
            # ATen's slow_conv_transpose kernels dispatch floating types and int64 only.
            raise TypeError(f"convolution: transposed convolution is not implemented for {dtype}")
        if weight.shape[0] != channels:
            raise ValueError(f"convolution: weight {list(weight.shape)} needs {weight.shape[0]} input channels, got {channels}")
        if any(op >= max(s, d) for op, s, d in zip(output_padding, stride, dilation)):
            raise ValueError("convolution: output padding must be smaller than either stride or dilation")
        out = _transposed(x, w, stride, padding, dilation, output_padding, groups, dtype)
    else:
        if weight.shape[1] * groups != channels or weight.shape[0] % groups:
            raise ValueError(
                f"convolution: weight {list(weight.shape)} with groups={groups} does not fit {channels} input channels"
            )
        out = _direct(x, w, stride, padding, dilation, groups)
    if bias is not None:
        if bias.shape != (out.shape[1],):
            raise ValueError(f"convolution: bias must have shape [{out.shape[1]}], got {list(bias.shape)}")
        if transposed and dtype in (float16, bfloat16):
            # slow_conv_transpose adds the bias to the already rounded output (output.add_(bias)).
            out = cast(out, dtype).astype(float32)
        out += bias.astype(compute, copy=False).reshape((1, -1) + (1,) * dims)
    return cast(out, dtype)


__all__ = ["convolution"]
