"""Normalization: batch norm (inference), layer norm, group norm.

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
  ``alpha = weight / sqrt(running_var + eps)`` and ``beta = bias - running_mean * alpha``.

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
    shape = (1, channels) + (1,) * (input.ndim - 2)
    with np.errstate(all="ignore"):
        # batch_norm_cpu_collect_linear_and_constant_terms: eps is cast to opmath first.
        invstd = compute.type(1) / np.sqrt(running_var.astype(compute) + compute.type(eps))
        alpha = invstd if weight is None else invstd * weight.astype(compute)
        beta = fma(-running_mean.astype(compute), alpha, 0.0 if bias is None else bias.astype(compute), compute)
        out = fma(input, alpha.reshape(shape), beta.reshape(shape), compute)
    empty = np.empty((0,), dtype)
    return cast(out, dtype), empty, empty.copy()


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


__all__ = ["_native_batch_norm_legit_no_training", "native_group_norm", "native_layer_norm"]
