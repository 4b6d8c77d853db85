"""Normalization: batch norm (inference and training), layer norm, group norm.

Statistics are computed in the compute type (float32 for half types and
float32, as ATen's opmath): the mean from a float64-accumulated row sum, the
biased variance in two passes. ATen's RowwiseMoments (Welford with a cascade
sum, aten/src/ATen/native/cpu/moments_utils.h) is nearly as accurate, so the
two agree to the last bit or two of the mean. rstd is ``1 / sqrt(var + eps)``.

The normalization itself follows each ATen kernel's formula, because the
formulas round differently:

* layer norm, float32/float64 (aten/src/ATen/native/cpu/layer_norm_kernel.cpp):
  ``(x - mean) * rstd * gamma + beta``;
* layer norm, half types: ``(x * rstd + (-rstd * mean)) * gamma + beta`` in float32;
* group norm (group_norm_kernel.cpp): ``(x - mean) * rstd`` without affine
  parameters, else ``x * scale + bias`` with ``scale = rstd * gamma`` and
  ``bias = beta - scale * mean`` per channel;
* batch norm inference (batch_norm_kernel.cpp): ``x * alpha + beta`` with
  ``alpha = weight / sqrt(running_var + eps)`` and ``beta = bias - running_mean * alpha``;
  in training the same with the batch's mean and invstd (``_batch_norm_training``, whose
  statistics follow Normalization.cpp's own orders, not the two passes above).

The compiled CPU kernels contract ``a * b + c`` into fused multiply-adds, so the
reference computes those with one rounding (float32 operands multiply exactly
in float64). ``x * alpha + beta`` cancels when ``x`` is near the mean, and
there the fused and unfused results differ by far more than an ulp of the result.
"""

from __future__ import annotations

import math

import numpy as np

from ._dtypes import bfloat16, cast, float16, float64, is_float, opmath
from ._fma import fma
from ._registry import kernel


def _check_float(name: str, x: np.ndarray) -> np.dtype:
    if not is_float(x.dtype):
        raise TypeError(f"{name}: expected a floating point input, got {x.dtype}")
    return x.dtype


def _moments(rows: np.ndarray, compute: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, biased variance and ``rows - mean`` of each row of a 2-D array, in ``compute``.

    The row sums accumulate in float64, so the mean is the correctly rounded one
    (a constant row gets its value back exactly, as Welford gives it); the
    variance is the mean square of the residuals about that mean (two passes,
    no cancellation).
    """
    n = rows.shape[1]
    x = np.ascontiguousarray(rows, dtype=compute)
    if n == 0:  # Welford's empty state: mean 0, variance 0 / 0
        return np.zeros(rows.shape[0], compute), np.full(rows.shape[0], np.nan, compute), x
    mean = (np.einsum("ij->i", x, dtype=float64) / n).astype(compute)
    centered = x - mean[:, None]
    var = np.vecdot(centered, centered) / compute.type(n)
    return mean, var, centered


def _param(value, size: int, default: float, compute: np.dtype) -> np.ndarray:
    if value is None:
        return np.full(size, default, compute)
    return np.asarray(value).reshape(-1).astype(compute)


@kernel("aten._native_batch_norm_legit_no_training.default")
def _native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps):  # noqa: A002
    """Inference batch norm over dim 1; the 2nd and 3rd outputs are empty (no batch statistics)."""
    dtype = _check_float("batch_norm", input)
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input of rank >= 2, got shape {list(input.shape)}")
    channels = input.shape[1]
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and t.size != channels:
            raise ValueError(f"batch_norm: {name} must have {channels} elements, got shape {list(t.shape)}")
    compute = opmath(dtype)
    with np.errstate(all="ignore"):
        # batch_norm_cpu_collect_linear_and_constant_terms: eps is cast to opmath first.
        invstd = compute.type(1) / np.sqrt(running_var.astype(compute) + compute.type(eps))
        out = _batch_norm_apply(input, weight, bias, running_mean, invstd, compute)
    empty = np.empty((0,), dtype)
    return cast(out, dtype), empty, empty.copy()


def _batch_norm_apply(input, weight, bias, mean, invstd, compute: np.dtype, *, fused_beta: bool = True) -> np.ndarray:  # noqa: A002
    """x * alpha + beta with alpha = invstd * weight and beta = bias - mean * alpha per channel
    (batch_norm_cpu_collect_linear_and_constant_terms), in ``compute``: the output's multiply-add
    fused, beta's too unless ``fused_beta`` is false (float16 in training, measured)."""
    shape = (1, input.shape[1]) + (1,) * (input.ndim - 2)
    invstd = np.asarray(invstd).astype(compute)
    alpha = invstd if weight is None else invstd * weight.astype(compute)
    mean = np.asarray(mean).astype(compute)
    bias = compute.type(0) if bias is None else bias.astype(compute)
    beta = fma(-mean, alpha, bias, compute) if fused_beta else (bias - mean * alpha).astype(compute)
    return fma(input, alpha.reshape(shape), beta.reshape(shape), compute)


def _check_batch_norm(input, **params) -> np.dtype:  # noqa: A002
    dtype = _check_float("batch_norm", input)
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input of rank >= 2, got shape {list(input.shape)}")
    if input.size == 0:
        raise ValueError(f"batch_norm: input tensor must have at least one element, got shape {list(input.shape)}")
    for name, t in params.items():
        if t is not None and t.size != input.shape[1]:
            raise ValueError(f"batch_norm: {name} must have {input.shape[1]} elements, got shape {list(t.shape)}")
        if t is not None and t.dtype != dtype:
            raise TypeError(f"batch_norm: {name} is {t.dtype}, the input {dtype}")
    return dtype


def _channel_rows(input) -> tuple[np.ndarray, int]:  # noqa: A002
    """Each channel's values in memory order (C, N * spatial), and their count."""
    rows = np.moveaxis(input, 1, 0).reshape(input.shape[1], -1)
    return rows, rows.shape[1]


def _batch_norm_training(input, weight, bias, running_mean, running_var, momentum, eps):  # noqa: A002
    """Training batch norm (batch_norm_cpu_update_stats_template, then the transform): normalize
    by the batch's mean and biased variance (returned as save_mean and save_invstd); update the
    running statistics in place, when given, with the unbiased variance:
    new = momentum * batch + (1 - momentum) * old.

    float32 and float64 (batch_norm_cpu_collect_stats_contiguous_impl): the sum in double element
    by element in memory order (cumsum is sequential), the mean rounded to the dtype, the squares
    of x - mean (in the dtype) summed in double and rounded: var_sum. invstd = 1 / sqrt(var_sum / n
    + eps) in double (0 where var and eps are both 0); the running updates multiply in the dtype,
    the unbiased variance var_sum / (n - 1) (a division in the dtype) times momentum in double.

    The half types differ from each other in torch 2.13 (both measured against eager): float16
    keeps every statistic in float32 (vectorized float32 sums; float64 here) and rounds only what
    it returns or stores; bfloat16 keeps them in bfloat16 and computes the running updates and
    var_sum / n in bfloat16 arithmetic, n itself rounded to bfloat16 (c10's BFloat16 / int64).
    Both transform the input with the returned, rounded mean and invstd. A single value per
    channel makes the unbiased variance 0 / 0: the running variance becomes NaN, as in eager."""
    dtype = _check_batch_norm(input, weight=weight, bias=bias, running_mean=running_mean, running_var=running_var)
    compute = opmath(dtype)
    f32 = np.float32
    rows, n = _channel_rows(input)
    with np.errstate(all="ignore"):
        if dtype == float16 or dtype == bfloat16:
            x = rows.astype(float64)
            mean = (x.sum(axis=1) / n).astype(f32)
            if dtype == bfloat16:
                mean = cast(mean, dtype).astype(f32)
            d = x - mean.astype(float64)[:, None]
            var_sum = (d * d).sum(axis=1).astype(f32)
            if dtype == float16:
                var = var_sum / f32(n)
                unbiased = var_sum / f32(n - 1)
                m = f32(momentum)
                new_mean = m * mean + (f32(1) - m) * _as(running_mean, f32)
                new_var = m * unbiased + (f32(1) - m) * _as(running_var, f32)
            else:
                def b(v):  # a BFloat16 operation's rounding
                    return cast(v, dtype).astype(f32)

                var_sum = b(var_sum)
                var, unbiased = b(var_sum / b(n)), b(var_sum / b(n - 1))
                m = b(momentum)
                new_mean = b(b(m * mean) + b(b(f32(1) - m) * _as(running_mean, f32)))
                new_var = m * unbiased + b(b(f32(1) - m) * _as(running_var, f32))
            invstd = np.where((var == 0) & (eps == 0), 0, f32(1) / np.sqrt(var + f32(eps))).astype(f32)
        else:
            mean = (np.cumsum(rows, axis=1, dtype=float64)[:, -1] / n).astype(dtype)
            d = rows - mean[:, None]
            var_sum = np.cumsum(d * d, axis=1, dtype=float64)[:, -1].astype(dtype)
            var = var_sum / dtype.type(n)
            invstd = np.where((var == 0) & (eps == 0), 0, 1 / np.sqrt(var.astype(float64) + eps)).astype(dtype)
            m = dtype.type(momentum)
            new_mean = m * mean + (dtype.type(1) - m) * _as(running_mean, dtype)
            unbiased = (var_sum / dtype.type(n - 1)).astype(float64)
            new_var = np.float64(m) * unbiased + ((dtype.type(1) - m) * _as(running_var, dtype)).astype(float64)
        if running_mean is not None:
            running_mean[...] = cast(new_mean, dtype)
        if running_var is not None:
            running_var[...] = cast(new_var, dtype)
        save_mean, save_invstd = cast(mean, dtype), cast(invstd, dtype)
        # float16's beta = bias - mean * alpha rounds the product (the other dtypes fuse it): a
        # single value per channel shows it, where x * alpha + beta leaves the rounding residue.
        out = _batch_norm_apply(input, weight, bias, save_mean, save_invstd, compute, fused_beta=dtype != float16)
    return cast(out, dtype), save_mean, save_invstd


def _as(array, dtype):
    """``array`` in ``dtype``, or 0 when absent (the update's result is then unused)."""
    return np.zeros((), dtype) if array is None else array.astype(dtype)


@kernel("aten._native_batch_norm_legit.default")
def _native_batch_norm_legit(input, weight, bias, running_mean, running_var, training, momentum, eps):  # noqa: A002
    """Batch norm over dim 1 -> (out, save_mean, save_invstd). Training: batch statistics, and
    running_mean and running_var updated in place (the schema's ``Tensor(a!)``). Inference: the
    running statistics, left unchanged, and empty save_mean and save_invstd."""
    if not training:
        return _native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps)
    return _batch_norm_training(input, weight, bias, running_mean, running_var, momentum, eps)


@kernel("aten._native_batch_norm_legit.no_stats")
def _native_batch_norm_legit_no_stats(input, weight, bias, training, momentum, eps):  # noqa: A002
    """Batch norm over dim 1 with batch statistics and no running statistics -> (out, save_mean,
    save_invstd). Eager CPU crashes (segfault) with training false: there is nothing to normalize by."""
    if not training:
        raise ValueError("batch_norm: running_mean and running_var must be defined in evaluation mode")
    return _batch_norm_training(input, weight, bias, None, None, momentum, eps)


@kernel("aten.native_layer_norm.default")
def native_layer_norm(input, normalized_shape, weight, bias, eps):  # noqa: A002
    """Normalize over the trailing ``normalized_shape`` dims -> (out, mean, rstd).

    mean and rstd have the input's shape with the normalized dims set to 1, in
    the input dtype (ATen's CPU kernel stores them as the parameter type, which
    is the input type unless half inputs come with float32 parameters).
    """
    dtype = _check_float("layer_norm", input)
    normalized_shape = tuple(int(s) for s in normalized_shape)
    axis = input.ndim - len(normalized_shape)
    if not normalized_shape or axis < 0 or tuple(input.shape[axis:]) != normalized_shape:
        raise ValueError(
            f"layer_norm: normalized_shape {list(normalized_shape)} does not match the trailing dims of "
            f"input shape {list(input.shape)}"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != normalized_shape:
            raise ValueError(f"layer_norm: {name} must have shape {list(normalized_shape)}, got {list(t.shape)}")
    compute = opmath(dtype)
    m, n = math.prod(input.shape[:axis]), math.prod(normalized_shape)
    rows = input.reshape(m, n)
    stats_shape = input.shape[:axis] + (1,) * len(normalized_shape)
    with np.errstate(all="ignore"):
        mean, var, centered = _moments(rows, compute)
        # rstd_val = T(1) / std::sqrt(rstd_val + eps), eps cast to the compute type first.
        rstd = compute.type(1) / np.sqrt(var + compute.type(eps))
        if dtype in (float16, bfloat16):
            x = rows.astype(compute)
            # layer_norm_kernel_mixed_type: fused x * scale + bias with bias = -rstd * mean.
            y = fma(x, rstd[:, None], (-rstd * mean)[:, None], compute)
            if weight is not None or bias is not None:
                gamma = _param(weight, n, 1.0, compute)
                beta = _param(bias, n, 0.0, compute)
                y = fma(y, gamma, beta, compute)
        else:
            y = centered  # x - mean, a fresh array
            y *= rstd[:, None]
            if weight is not None:
                y *= weight.reshape(n).astype(compute, copy=False)
            if bias is not None:
                y += bias.reshape(n).astype(compute, copy=False)
    return (
        cast(y, dtype).reshape(input.shape),
        cast(mean, dtype).reshape(stats_shape),
        cast(rstd, dtype).reshape(stats_shape),
    )


@kernel("aten.native_group_norm.default")
def native_group_norm(input, weight, bias, N, C, HxW, group, eps):  # noqa: A002, N803 - ATen's names
    """Normalize each of ``group`` channel groups per sample -> (out, mean (N, group), rstd (N, group))."""
    dtype = _check_float("group_norm", input)
    n, c, hw, g = int(N), int(C), int(HxW), int(group)
    if input.size != n * c * hw or input.ndim < 2 or input.shape[0] != n or input.shape[1] != c:
        raise ValueError(f"group_norm: input of shape {list(input.shape)} is not N={n}, C={c}, HxW={hw}")
    if g < 1 or c % g:
        raise ValueError(f"group_norm: {g} groups must divide the {c} channels")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.size != c:
            raise ValueError(f"group_norm: {name} must have {c} elements, got shape {list(t.shape)}")
    compute = opmath(dtype)
    d = c // g
    groups = input.reshape(n * g, d * hw)
    with np.errstate(all="ignore"):
        mean, var, _ = _moments(groups, compute)
        # rstd = opmath(1) / std::sqrt(max(var, 0) + eps) with eps a double: computed in double, stored in opmath.
        rstd = (1.0 / np.sqrt(np.maximum(var, 0).astype(float64) + float(eps))).astype(compute)
        x = input.reshape(n, g, d, hw).astype(compute, copy=False)
        mean4, rstd4 = mean.reshape(n, g, 1, 1), rstd.reshape(n, g, 1, 1)
        if weight is None and bias is None:
            y = (x - mean4) * rstd4
        else:
            gamma = _param(weight, c, 1.0, compute).reshape(1, g, d, 1)
            beta = _param(bias, c, 0.0, compute).reshape(1, g, d, 1)
            scale = (rstd4 * gamma).astype(compute)
            shift = fma(-scale, mean4, beta, compute)
            y = fma(scale, x, shift, compute)
    return (
        cast(y, dtype).reshape(input.shape),
        cast(mean, dtype).reshape(n, g),
        cast(rstd, dtype).reshape(n, g),
    )


__all__ = [
    "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_stats",
    "_native_batch_norm_legit_no_training",
    "native_group_norm",
    "native_layer_norm",
]
