"""Backward ops of the core ATen set: the gradients autograd computes for pooling, convolution,
embedding and the normalizations, as ATen's CPU kernels compute them.

Pooling gradients scatter each output's gradient back into the input elements it came from,
adding in the order ATen's loops visit the outputs (aten/src/ATen/native/cpu/AvgPoolKernel.cpp,
AdaptiveAvgPoolKernel.cpp, MaxPoolKernel.cpp): for each input element, output by output in
row-major order, each addition rounded in the tensor's dtype (half types too: ``scalar_t +=``).
Vectorized over all elements at once: a loop runs over kernel taps or bin offsets only, in
the order that gives every element its contributions in ATen's order.

embedding_dense_backward adds rows of grad_output into grad_weight in index order
(aten/src/ATen/native/Embedding.cpp): ``np.add.at`` has that order.

The convolution and normalization gradients are sums over many products; eager computes them
with blocked, vectorized reductions (oneDNN, ``vec::reduce_all``) whose order no reference can
follow. They are computed here in float64 and rounded once, except where eager rounds in between
in a way the result shows: the half types' convolution gradients follow ATen's native kernels
(col2im, one gemm per batch element), and layer norm's dgamma and dbeta are added row by row as
one thread of eager adds them. The op specs bound the rest (specs/ops/backward.toml).
"""

from __future__ import annotations

import math

import numpy as np

from ._dtypes import bfloat16, cast, float16, float32, float64, is_float, opmath
from ._fma import fma
from ._registry import kernel
from .conv import convolution
from .pooling import _output_size, _planes, _tuple

_HALF = (float16, bfloat16)


def _check_float(op: str, *arrays) -> np.dtype:
    dtype = arrays[0].dtype
    if not is_float(dtype):
        raise TypeError(f"{op}: not implemented for {dtype}")
    for a in arrays[1:]:
        if a is not None and a.dtype != dtype:
            raise TypeError(f"{op}: expected every tensor in {dtype}, got {a.dtype}")
    return dtype


def _grad_planes(grad_output, x, nd: int, out: tuple[int, ...], op: str) -> np.ndarray:
    """grad_output as (planes, *out), checked against the forward's output shape."""
    lead = x.shape[: x.ndim - nd]
    if tuple(grad_output.shape) != tuple(lead) + tuple(out):
        raise ValueError(f"{op}: grad_output has shape {list(grad_output.shape)}, the forward's output is {list(lead + tuple(out))}")
    return grad_output.reshape((-1,) + tuple(out))


def _scatter_add(total: np.ndarray, where, values: np.ndarray, dtype: np.dtype) -> None:
    """total[where] += values, rounded to ``dtype`` as ATen's ``scalar_t +=`` rounds (half types
    add in float32 and round; float32 and float64 in themselves)."""
    if dtype in _HALF:
        total[where] = cast(total[where] + values, dtype).astype(float32)
    else:
        total[where] += values


# ---------------------------------------------------------------------------------------------
# average pooling


@kernel("aten.avg_pool2d_backward.default")
def avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """Each output's gradient divided by its window's divisor, added to the window's in-bounds
    input elements (cpu_avg_pool2d_backward)."""
    op = "avg_pool2d_backward"
    dtype = _check_float(op, self, grad_output)
    if divisor_override is not None and divisor_override == 0:
        raise ZeroDivisionError(f"{op}: divisor must be not zero")
    k = _tuple(kernel_size, 2, "kernel_size")
    s = _tuple(stride, 2, "stride", allow_empty=True) or k
    p = _tuple(padding, 2, "padding")
    if any(pi > ki // 2 for pi, ki in zip(p, k)):
        raise ValueError(f"{op}: pad should be at most half of kernel size, got padding={list(p)}, kernel_size={list(k)}")
    planes, lead = _planes(self, 2, op)
    spatial = planes.shape[1:]
    out = tuple(_output_size(n, ki, pi, si, 1, ceil_mode) for n, ki, pi, si in zip(spatial, k, p, s))
    grad = _grad_planes(grad_output, self, 2, out, op)
    acc = opmath(dtype)
    divisor = _avg_divisors(spatial, out, k, s, p, count_include_pad, divisor_override)
    with np.errstate(all="ignore"):
        if dtype in _HALF:  # scalar_t grad_delta = grad_output / divide_factor: a Half division
            delta = cast(grad.astype(float32) / divisor.astype(float32), dtype).astype(float32)
        else:
            delta = grad / divisor.astype(acc)
        # A buffer padded on every side past the last window; out-of-bounds taps land in the margin.
        hi = [max(0, (o - 1) * si + ki - pi - n) for o, si, ki, pi, n in zip(out, s, k, p, spatial)]
        total = np.zeros((planes.shape[0],) + tuple(n + pi + h for n, pi, h in zip(spatial, p, hi)), acc)
        # Output o reaches padded position o * s + t through tap t: of the outputs reaching one
        # element, later ones do so through earlier taps, so taps in reverse give ATen's output order.
        for tap in reversed(list(np.ndindex(*k))):
            where = (slice(None),) + tuple(slice(t, t + (o - 1) * si + 1, si) for t, o, si in zip(tap, out, s))
            _scatter_add(total, where, delta, dtype)
    inside = (slice(None),) + tuple(slice(pi, pi + n) for pi, n in zip(p, spatial))
    return cast(total[inside], dtype).reshape(self.shape)


def _avg_divisors(spatial, out, k, s, p, count_include_pad, divisor_override) -> np.ndarray:
    """The divide_factor of every output window (AvgPoolKernel.cpp), shape ``out``."""
    if divisor_override is not None:
        return np.full(out, int(divisor_override), np.int64)
    divisor = np.ones((1,) * len(out), np.int64)
    for axis, (o, si, ki, pi, n) in enumerate(zip(out, s, k, p, spatial)):
        start = np.arange(o, dtype=np.int64) * si - pi
        end = np.minimum(start + ki, n + pi)
        size = end - start if count_include_pad else np.minimum(end, n) - np.maximum(start, 0)
        divisor = divisor * size.reshape([-1 if i == axis else 1 for i in range(len(out))])
    return divisor


def _covering(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """For each input index of an adaptive pooling dim: the output bins covering it, ascending
    (n_in, J) padded with 0, and which of the J entries are real."""
    i = np.arange(n_out)
    start, end = (i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)
    cover = (np.arange(n_in)[:, None] >= start[None, :]) & (np.arange(n_in)[:, None] < end[None, :])
    count = cover.sum(axis=1)
    j = max(int(count.max(initial=0)), 1)
    first = np.argmax(cover, axis=1)
    bins = first[:, None] + np.arange(j)[None, :]
    valid = np.arange(j)[None, :] < count[:, None]
    return np.where(valid, bins, 0), valid


@kernel("aten._adaptive_avg_pool2d_backward.default")
def _adaptive_avg_pool2d_backward(grad_output, self):
    """Each bin's gradient divided by its height, then its width, added to the bin's input
    elements (cpu_adaptive_avg_pool2d_backward)."""
    op = "_adaptive_avg_pool2d_backward"
    dtype = _check_float(op, self, grad_output)
    if grad_output.ndim != self.ndim or grad_output.ndim not in (3, 4):
        raise ValueError(f"{op}: grad_output {list(grad_output.shape)} and self {list(self.shape)} must both be 3-D or 4-D")
    planes, lead = _planes(self, 2, op)
    (h, w), out = planes.shape[1:], tuple(grad_output.shape[-2:])
    grad = _grad_planes(grad_output, self, 2, out, op)
    acc = opmath(dtype)
    sizes = []
    for n_in, n_out in ((h, out[0]), (w, out[1])):
        i = np.arange(n_out)
        sizes.append(-((-(i + 1) * n_in) // n_out) - (i * n_in) // n_out)
    with np.errstate(all="ignore"):
        if dtype in _HALF:  # grad_output / kh / kw: two Half divisions, each rounded
            delta = cast(grad.astype(float32) / sizes[0].astype(float32)[:, None], dtype).astype(float32)
            delta = cast(delta / sizes[1].astype(float32)[None, :], dtype).astype(float32)
        else:
            delta = grad / sizes[0].astype(acc)[:, None] / sizes[1].astype(acc)[None, :]
        total = np.zeros(planes.shape, acc)
        if delta.size and total.size:
            rows, row_ok = _covering(h, out[0])
            cols, col_ok = _covering(w, out[1])
            # Bins in (oh, ow) row-major order per input element: the j-th covering row bin, then the
            # k-th covering column bin; a missing bin adds 0, which changes no sum (they start at +0).
            for j in range(rows.shape[1]):
                by_row = delta[:, rows[:, j], :]
                for c in range(cols.shape[1]):
                    mask = row_ok[:, j][:, None] & col_ok[:, c][None, :]
                    _scatter_add(total, Ellipsis, np.where(mask, by_row[:, :, cols[:, c]], 0), dtype)
    return cast(total, dtype).reshape(self.shape)


# ---------------------------------------------------------------------------------------------
# max pooling


@kernel("aten.max_pool2d_with_indices_backward.default")
def max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """Each output's gradient added to the input element its index names (cpu_max_pool_backward),
    output by output, so overlapping windows that chose the same element add in output order."""
    op = "max_pool2d_with_indices_backward"
    dtype = _check_float(op, self, grad_output)
    if indices.dtype != np.int64:
        raise TypeError(f"{op}: indices must be int64, got {indices.dtype}")
    if indices.shape != grad_output.shape:
        raise ValueError(f"{op}: indices {list(indices.shape)} and grad_output {list(grad_output.shape)} differ in shape")
    planes, lead = _planes(self, 2, op)
    plane = math.prod(planes.shape[1:])
    # each plane's outputs in a row (an empty batch has no planes: -1 cannot infer a row's length)
    outputs_per_plane = math.prod(grad_output.shape[-2:])
    grad = grad_output.reshape(planes.shape[0], outputs_per_plane)
    index = indices.reshape(planes.shape[0], outputs_per_plane)
    if index.size and (index.min() < 0 or index.max() >= plane):
        raise IndexError(f"{op}: an index is outside the input plane of {plane} elements")
    # One flat buffer; each plane's indices offset into its own range. add.at adds duplicates in
    # array order (output order), rounding every addition in the array's dtype, as ATen does.
    total = np.zeros(planes.shape[0] * plane, dtype)
    flat = (index + (np.arange(planes.shape[0]) * plane)[:, None]).reshape(-1)
    with np.errstate(all="ignore"):
        np.add.at(total, flat, grad.reshape(-1))
    return total.reshape(self.shape)


# ---------------------------------------------------------------------------------------------
# embedding


@kernel("aten.embedding_dense_backward.default")
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    """grad_weight[k] += grad_output[i] * scale for every index k = indices[i] but padding_idx, in
    index order (embedding_dense_backward_cpu: ``grad_weight[k].add_(grad[i], scale)``), with
    scale = 1 / (occurrences of k) under scale_grad_by_freq."""
    op = "embedding_dense_backward"
    dtype = _check_float(op, grad_output)
    if indices.dtype not in (np.dtype(np.int64), np.dtype(np.int32)):
        raise TypeError(f"{op}: indices must be int64 or int32, got {indices.dtype}")
    num = int(num_weights)
    if grad_output.shape[: indices.ndim] != indices.shape or grad_output.ndim != indices.ndim + 1:
        raise ValueError(f"{op}: grad_output {list(grad_output.shape)} is not indices {list(indices.shape)} plus one dim")
    dim = grad_output.shape[-1]
    idx = indices.reshape(-1).astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= num):
        raise IndexError(f"{op}: an index is outside [0, {num})")
    grad = grad_output.reshape(idx.size, dim)
    keep = idx != int(padding_idx)
    idx, grad = idx[keep], grad[keep]
    with np.errstate(all="ignore"):
        if not scale_grad_by_freq:
            total = np.zeros((num, dim), dtype)
            np.add.at(total, idx, grad)  # alpha 1: a + b, rounded in the dtype
            return total
        # The occurrences count the padding index too (they are counted before it is skipped).
        counts = np.bincount(indices.reshape(-1).astype(np.int64), minlength=num)
        scale = 1.0 / counts[idx]  # a double, as ATen's
        compute = opmath(dtype)
        if dtype in _HALF:
            # add_ with alpha on a short half row runs the scalar loop: alpha and alpha * b round to
            # the half type, then a + that product rounds (the vector loop fuses both; not drawn).
            product = cast(cast(scale, dtype).astype(float32)[:, None] * grad.astype(float32), dtype)
            total = np.zeros((num, dim), dtype)
            np.add.at(total, idx, product)
            return total
        # float32, float64: fma(b, alpha, a), one rounding per addition, duplicates in order: the
        # r-th occurrences of distinct rows are independent, so one step handles each rank.
        alpha = scale.astype(compute)
        rank = _occurrence_rank(idx)
        total = np.zeros((num, dim), compute)
        for r in range(int(rank.max(initial=-1)) + 1):
            at = rank == r
            rows = idx[at]
            total[rows] = fma(grad[at].astype(compute), alpha[at][:, None], total[rows], compute)
        return total.astype(dtype)


def _occurrence_rank(idx: np.ndarray) -> np.ndarray:
    """For each position, how many earlier positions hold the same value (0 for a first occurrence)."""
    order = np.argsort(idx, kind="stable")
    sorted_idx = idx[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_idx)) + 1] if idx.size else np.zeros(0, np.int64)
    group_start = np.repeat(starts, np.diff(np.r_[starts, idx.size]))
    rank = np.empty(idx.size, np.int64)
    rank[order] = np.arange(idx.size) - group_start
    return rank


# ---------------------------------------------------------------------------------------------
# convolution


def _conv_weight_grad(inp: np.ndarray, gout: np.ndarray, kernel_size, stride, padding, dilation, groups: int) -> np.ndarray:
    """result[o, c, *k] = sum over n and output positions of gout[n, o, pos] * inp_padded[n, c, pos * s + k * d]
    within each group: the weight gradient of a direct convolution (and, with the roles of input
    and grad_output swapped, of a transposed one)."""
    from .conv import _pad, _windows

    dims = len(kernel_size)
    n, o = gout.shape[:2]
    cg = inp.shape[1] // groups
    windows = _windows(_pad(inp, padding), kernel_size, stride, dilation)  # (N, C, *out, *k)
    windows = windows[(slice(None), slice(None)) + tuple(slice(0, size) for size in gout.shape[2:])]
    positions, taps = math.prod(gout.shape[2:]), math.prod(kernel_size)
    cols = windows.reshape((n, groups, cg) + tuple(gout.shape[2:]) + tuple(kernel_size))
    order = (1, 2) + tuple(range(3 + dims, 3 + 2 * dims)) + (0,) + tuple(range(3, 3 + dims))
    cols = cols.transpose(order).reshape(groups, cg * taps, n * positions)  # (G, C/G * taps, N * P)
    g = gout.reshape(n, groups, o // groups, positions).transpose(1, 2, 0, 3).reshape(groups, o // groups, n * positions)
    out = np.matmul(g, cols.swapaxes(1, 2))  # (G, O/G, C/G * taps)
    return out.reshape((o, cg) + tuple(kernel_size))


@kernel("aten.convolution_backward.default")
def convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, output_mask):  # noqa: A002
    """(grad_input, grad_weight, grad_bias) of aten.convolution, each None where output_mask is false.

    grad_input is the adjoint convolution of grad_output (transposed for a direct convolution,
    direct for a transposed one), grad_weight the correlation of the input with grad_output,
    grad_bias the sum of grad_output over every dim but the channels; float32 and float64 are
    computed in float64 and rounded once. Half types follow ATen's native CPU kernels
    (slow_conv2d/3d, slow_conv_dilated, slow_conv_transpose: oneDNN's, where a CPU has them,
    round once, within the spec's tolerance):

    * a direct convolution's grad_input is the transposed convolution of grad_output, computed as
      aten.convolution computes one (gemm columns rounded to the half type, col2im rounding after
      every kernel tap); a transposed convolution's is a direct convolution, rounded once;
    * grad_weight adds each batch element's float32 gemm into the half-type result (gemm with
      beta = 1: one rounding per batch element);
    * grad_bias is the float32 sum rounded once, except for dilated direct convolutions
      (slow_conv_dilated), which round each batch element's sum and add them in the half type.
    """
    op = "convolution_backward"
    dtype = _check_float(op, grad_output, input, weight)
    dims = weight.ndim - 2
    if dims < 1 or input.ndim != weight.ndim or grad_output.ndim != weight.ndim:
        raise ValueError(f"{op}: expected batched input and grad_output of rank {weight.ndim}")
    from .conv import _per_dim

    stride = _per_dim("stride", stride, dims)
    padding = _per_dim("padding", padding, dims)
    dilation = _per_dim("dilation", dilation, dims)
    output_padding = _per_dim("output_padding", output_padding, dims) if transposed else [0] * dims
    groups = int(groups)
    # The forward defines the shapes: grad_output must be what it returned.
    kernel_size = weight.shape[2:]
    extents = [d * (k - 1) + 1 for d, k in zip(dilation, kernel_size)]
    if transposed:
        spatial = [(n - 1) * s - 2 * p + e + o for n, s, p, e, o in zip(input.shape[2:], stride, padding, extents, output_padding)]
        expected = (input.shape[0], weight.shape[1] * groups, *spatial)
    else:
        spatial = [(n + 2 * p - e) // s + 1 for n, s, p, e in zip(input.shape[2:], stride, padding, extents)]
        expected = (input.shape[0], weight.shape[0], *spatial)
    if tuple(grad_output.shape) != tuple(expected):
        raise ValueError(f"{op}: grad_output has shape {list(grad_output.shape)}, the convolution gives {list(expected)}")
    half = dtype in _HALF
    go, x, w = (a.astype(float64) for a in (grad_output, input, weight))
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        if transposed:
            grad_input = convolution(go, w, None, stride, padding, dilation, False, [0] * dims, groups)
            # Output padding of stride or more (allowed below the dilation) adds windows past the input.
            grad_input = grad_input[(slice(None), slice(None)) + tuple(slice(0, n) for n in input.shape[2:])]
        else:
            # The transposed convolution gives back the input's size with the rows the forward's
            # stride dropped added as output padding.
            extra = [n - ((o - 1) * s - 2 * p + d * (k - 1) + 1)
                     for n, o, s, p, d, k in zip(input.shape[2:], grad_output.shape[2:], stride, padding, dilation, kernel_size)]
            given = (grad_output, weight) if half else (go, w)  # half types: col2im's roundings
            grad_input = convolution(*given, None, stride, padding, dilation, True, extra, groups)
        grad_input = cast(grad_input, dtype)
    if output_mask[1]:
        operands = (go, x) if transposed else (x, go)
        if half:
            grad_weight = np.zeros(weight.shape, float32)
            for n in range(input.shape[0]):  # one gemm with beta = 1 per batch element
                part = _conv_weight_grad(operands[0][n : n + 1], operands[1][n : n + 1], kernel_size, stride, padding, dilation, groups)
                grad_weight = cast(grad_weight + part.reshape(weight.shape), dtype).astype(float32)
        else:
            grad_weight = _conv_weight_grad(*operands, kernel_size, stride, padding, dilation, groups).reshape(weight.shape)
        grad_weight = cast(grad_weight, dtype)
    if output_mask[2]:
        per_batch = go.sum(axis=tuple(range(2, go.ndim)))  # (N, C)
        if half and not transposed and max(dilation) > 1:
            grad_bias = np.zeros(per_batch.shape[1], float32)
            for part in cast(per_batch, dtype).astype(float32):
                grad_bias = cast(grad_bias + part, dtype).astype(float32)
        else:
            grad_bias = per_batch.sum(axis=0)
        grad_bias = cast(grad_bias, dtype)
    return grad_input, grad_weight, grad_bias


# ---------------------------------------------------------------------------------------------
# layer and group norm


def _affine_grads_requested(op: str, output_mask, weight, bias, *, bias_needs_weight: bool = False) -> None:
    """Eager fails ("tensor does not have a device") when asked for the gradient of an affine
    parameter the forward did not have; autograd never asks."""
    if output_mask[1] and weight is None:
        raise ValueError(f"{op}: output_mask asks for grad_weight, but weight is None")
    if output_mask[2] and (weight is None if bias_needs_weight else bias is None):
        raise ValueError(f"{op}: output_mask asks for grad_bias, but {'weight' if bias_needs_weight else 'bias'} is None")


@kernel("aten.native_layer_norm_backward.default")
def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):  # noqa: A002
    """(grad_input, grad_weight, grad_bias) of native_layer_norm, from the mean and rstd it saved,
    each None where output_mask is false (LayerNormBackwardKernelImplInternal):

        dx = a * dy * gamma + b * x + c,  a = rstd, b = (db * mean - ds) * a^3 / N, c = -b * mean - db * a / N
        ds = sum_j dy * gamma * x,  db = sum_j dy * gamma  (per row of N normalized elements)
        dgamma = sum over rows of dy * (rstd * x - rstd * mean),  dbeta = sum over rows of dy

    grad_input is computed in float64 and rounded once (eager: float32 vectorized sums for float32
    and the half types, double for float64); dgamma and dbeta as one thread of eager adds them up
    (``_layer_norm_affine_grads``)."""
    op = "native_layer_norm_backward"
    dtype = _check_float(op, input, grad_out, mean, rstd)
    _affine_grads_requested(op, output_mask, weight, bias)
    normalized_shape = tuple(int(s) for s in normalized_shape)
    axis = input.ndim - len(normalized_shape)
    if not normalized_shape or axis < 0 or tuple(input.shape[axis:]) != normalized_shape or grad_out.shape != input.shape:
        raise ValueError(f"{op}: normalized_shape {list(normalized_shape)} does not match input {list(input.shape)} and grad_out {list(grad_out.shape)}")
    m, n = math.prod(input.shape[:axis]), math.prod(normalized_shape)
    if mean.size != m or rstd.size != m:
        raise ValueError(f"{op}: mean and rstd must have {m} elements, got {mean.size} and {rstd.size}")
    x = input.reshape(m, n).astype(float64)
    dy = grad_out.reshape(m, n).astype(float64)
    mu, a = mean.reshape(m, 1).astype(float64), rstd.reshape(m, 1).astype(float64)
    gamma = np.ones(n) if weight is None else weight.reshape(n).astype(float64)
    grad_input = grad_weight = grad_bias = None
    with np.errstate(all="ignore"):
        if output_mask[0]:
            dyg = dy * gamma
            ds = (dyg * x).sum(axis=1, keepdims=True)
            db = dyg.sum(axis=1, keepdims=True)
            b = (db * mu - ds) * a * a * a / n
            c = -b * mu - db * a / n
            grad_input = cast(a * dyg + b * x + c, dtype).reshape(input.shape)
        if output_mask[1] or output_mask[2]:
            grad_weight, grad_bias = _layer_norm_affine_grads(grad_out.reshape(m, n), input.reshape(m, n), mean.reshape(m), rstd.reshape(m), dtype)
            grad_weight = cast(grad_weight, weight.dtype).reshape(weight.shape) if output_mask[1] else None
            grad_bias = cast(grad_bias, bias.dtype).reshape(bias.shape) if output_mask[2] else None
    return grad_input, grad_weight, grad_bias


def _layer_norm_affine_grads(dy, x, mean, rstd, dtype) -> tuple[np.ndarray, np.ndarray]:
    """dgamma and dbeta as one thread of LayerNormBackwardKernelImplInternal adds them up: row by
    row into a buffer of the input dtype, dgamma += dy * (a * x + b) with a = rstd, b = -a * mean,
    both multiply-adds fused in the compute type (vec::fmadd), dbeta += dy, every row's result
    rounded to the dtype. Eager gives each thread a block of rows and a buffer of its own, then
    adds the buffers: with several threads the roundings differ (the spec's tolerance)."""
    compute = opmath(dtype)
    a = rstd.astype(compute)
    b = (-a * mean.astype(compute)).astype(compute)
    dgamma = np.zeros(x.shape[1], compute)
    dbeta = np.zeros(x.shape[1], compute)
    xs, dys = x.astype(compute), dy.astype(compute)
    for i in range(x.shape[0]):  # the order of eager's sequential loop over rows
        dgamma = cast(fma(dys[i], fma(a[i], xs[i], b[i], compute), dgamma, compute), dtype).astype(compute)
        dbeta = cast(dbeta + dys[i], dtype).astype(compute)
    return dgamma, dbeta


@kernel("aten.native_group_norm_backward.default")
def native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask):  # noqa: A002, N803
    """(grad_input, grad_weight, grad_bias) of native_group_norm, from the mean and rstd (N, group)
    it saved, each None where output_mask is false (GroupNormBackwardKernelImplInternal): with
    per-channel sums ds = sum dy * x and db = sum dy, per group ds_g = sum gamma * ds and
    db_g = sum gamma * db over the group's D channels, and s = 1 / (D * HxW):

        dx = rstd * gamma * dy + c2 * x + c3,  c2 = (db_g * mean - ds_g) * rstd^3 * s,  c3 = -c2 * mean - db_g * rstd * s
        dgamma = sum_n (ds - db * mean) * rstd,  dbeta = sum_n db

    computed in float64 and rounded once. Eager computes grad_bias only with a weight too."""
    op = "native_group_norm_backward"
    dtype = _check_float(op, input, grad_out, mean, rstd)
    _affine_grads_requested(op, output_mask, weight, None, bias_needs_weight=True)
    n, c, hw, g = int(N), int(C), int(HxW), int(group)
    if input.size != n * c * hw or grad_out.shape != input.shape or g < 1 or c % g:
        raise ValueError(f"{op}: input {list(input.shape)} is not N={n}, C={c}, HxW={hw} in {g} groups")
    if mean.size != n * g or rstd.size != n * g:
        raise ValueError(f"{op}: mean and rstd must have N * group = {n * g} elements")
    d = c // g
    x = input.reshape(n, g, d, hw).astype(float64)
    dy = grad_out.reshape(n, g, d, hw).astype(float64)
    mu, r = mean.reshape(n, g, 1, 1).astype(float64), rstd.reshape(n, g, 1, 1).astype(float64)
    gamma = (np.ones(c) if weight is None else weight.reshape(c).astype(float64)).reshape(1, g, d, 1)
    grad_input = grad_weight = grad_bias = None
    with np.errstate(all="ignore"):
        ds = (dy * x).sum(axis=3, keepdims=True)  # (N, G, D, 1)
        db = dy.sum(axis=3, keepdims=True)
        if output_mask[0]:
            ds_g = (ds * gamma).sum(axis=2, keepdims=True)
            db_g = (db * gamma).sum(axis=2, keepdims=True)
            s = 1.0 / (d * hw)
            c2 = (db_g * mu - ds_g) * r * r * r * s
            c3 = -c2 * mu - db_g * r * s
            grad_input = cast(r * gamma * dy + c2 * x + c3, dtype).reshape(input.shape)
        if output_mask[1]:
            grad_weight = cast(((ds - db * mu) * r).sum(axis=0).reshape(c), weight.dtype).reshape(weight.shape)
        if output_mask[2]:
            grad_bias = cast(db.sum(axis=0).reshape(c), weight.dtype).reshape(weight.shape)
    return grad_input, grad_weight, grad_bias
