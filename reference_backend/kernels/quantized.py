"""PT2E's quantize and dequantize operators (the ``quantized_decomposed`` library), as eager computes them.

Upstream defines them in Python, in torch/ao/quantization/fx/_decomposed.py, as short chains of
ATen ops; each kernel here takes the same steps in the same dtypes, rounding where ATen's
TensorIterator rounds, so the reference agrees with eager bit for bit. Two rules of TensorIterator
decide the dtypes of the steps (aten/src/ATen/native/cpu/BinaryOpsKernel.cpp): a Python scalar
operand takes the tensor's dtype (the scalar ``zero_point`` of a dequantize to float16 is rounded
to float16), except that mul and div of a float16/bfloat16 tensor by a Python float read the
scalar in float32 (``original_scalar_value<opmath_t>``); and every step on a float16/bfloat16
tensor is computed in float32 and rounded to the tensor's dtype.
"""

from __future__ import annotations

import numpy as np

from ._dtypes import bfloat16, cast, float16, float32, float64, int64, opmath, promote_types
from ._registry import kernel
from .unary import _to_copy

_HALF_TYPES = (float16, bfloat16)
int32 = np.dtype(np.int32)
_QUANT_BOUNDS = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max)) for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32)}
"""_DTYPE_TO_QVALUE_BOUNDS of _decomposed.py, for the integer dtypes (the float8 ones are not computed here)."""


def _check_bounds(quant_min: int, quant_max: int, dtype: np.dtype) -> None:
    """_quant_min_max_bounds_check: [quant_min, quant_max] within the quantized dtype's range."""
    if dtype not in _QUANT_BOUNDS:
        raise ValueError(f"unsupported quantized dtype {dtype}")
    lo, hi = _QUANT_BOUNDS[dtype]
    if quant_min < lo or quant_max > hi:
        raise ValueError(f"[{quant_min}, {quant_max}] is outside {dtype}'s range [{lo}, {hi}]")


def _float32_input(input) -> np.ndarray:
    """quantize_* convert float16 and bfloat16 inputs to float32 (exactly) and refuse any other dtype."""
    x = np.asarray(input)
    if x.dtype in _HALF_TYPES:
        return x.astype(float32)
    if x.dtype != float32:
        raise TypeError(f"expecting a float32, float16 or bfloat16 input, got {x.dtype}")
    return x


def _round_shift_clamp(scaled: np.ndarray, zero_point, quant_min: int, quant_max: int, dtype) -> np.ndarray:
    """torch.clamp(torch.round(scaled) + zero_point, quant_min, quant_max).to(dtype), in scaled's dtype.

    torch.round rounds half to even, as np.rint does; clamp reads its int bounds in the tensor's
    dtype. NaN has no quantized value (its cast to an integer is undefined behaviour in C++)."""
    kind = scaled.dtype.type
    shifted = np.rint(scaled) + zero_point
    with np.errstate(invalid="ignore"):
        return np.clip(shifted, kind(quant_min), kind(quant_max)).astype(dtype)


@kernel("quantized_decomposed.quantize_per_tensor.default")
def quantize_per_tensor(input, scale, zero_point, quant_min, quant_max, dtype):
    """round(input * (1.0 / scale)) + zero_point, clamped to [quant_min, quant_max], as ``dtype``.

    inv_scale = 1.0 / scale is a Python (double) division; the float32 tensor's mul reads it in
    float32, so the product is float32(x * float32(inv_scale)), not x / scale."""
    dtype = np.dtype(dtype)
    _check_bounds(quant_min, quant_max, dtype)
    x = _float32_input(input)
    inv_scale = float32.type(1.0 / scale)
    with np.errstate(over="ignore"):
        return _round_shift_clamp(x * inv_scale, float32.type(zero_point), quant_min, quant_max, dtype)


@kernel("quantized_decomposed.quantize_per_tensor.tensor")
def quantize_per_tensor_tensor(input, scale, zero_point, quant_min, quant_max, dtype):
    """quantize_per_tensor with scale.item() and zero_point.item() (one element each)."""
    return quantize_per_tensor(input, float(_item(scale, "scale")), int(_item(zero_point, "zero_point")), quant_min, quant_max, dtype)


@kernel("quantized_decomposed.dequantize_per_tensor.default")
def dequantize_per_tensor(input, scale, zero_point, quant_min, quant_max, dtype, out_dtype=None):
    """(input.to(out_dtype) - zero_point) * scale, out_dtype float32 by default.

    quant_min and quant_max are not used (upstream keeps them for pattern matching). In a
    float16/bfloat16 out_dtype the zero_point is rounded to it and each step rounds to it, while
    the scale stays float32: dequantizing int16 with zero_point 2049 to float16 subtracts 2048."""
    x = np.asarray(input)
    if x.dtype != np.dtype(dtype):
        raise TypeError(f"expecting an input of dtype {np.dtype(dtype)}, got {x.dtype}")
    out = float32 if out_dtype is None else np.dtype(out_dtype)
    compute = opmath(out)
    with np.errstate(over="ignore", invalid="ignore"):
        shifted = cast(_to_copy(x, dtype=out).astype(compute) - _to_copy(np.asarray(zero_point), dtype=out).astype(compute), out)
        return cast(shifted.astype(compute) * compute.type(scale), out)


@kernel("quantized_decomposed.dequantize_per_tensor.tensor")
def dequantize_per_tensor_tensor(input, scale, zero_point, quant_min, quant_max, dtype, out_dtype=None):
    """dequantize_per_tensor with scale.item() and zero_point.item() (one element each)."""
    return dequantize_per_tensor(
        input, float(_item(scale, "scale")), int(_item(zero_point, "zero_point")), quant_min, quant_max, dtype, out_dtype
    )


def _item(t, name: str):
    t = np.asarray(t)
    if t.size != 1:
        raise ValueError(f"expecting {name} to have one element, got {t.size}")
    return t.reshape(()).item()


def _along(values, axis: int, ndim: int) -> np.ndarray:
    """A per-channel vector shaped to broadcast along ``axis`` (upstream permutes ``axis`` to the
    front and views the vector as [C, 1, ...]; the results are the same elementwise)."""
    v = np.asarray(values)
    shape = [1] * ndim
    shape[axis] = v.shape[0]
    return v.reshape(shape)


def _check_axis(x: np.ndarray, axis: int) -> None:
    # upstream checks only axis < dim; a negative axis indexes from the end (permute accepts it)
    if not -x.ndim <= axis < x.ndim:
        raise IndexError(f"axis {axis} is not a dim of a rank-{x.ndim} input")


@kernel("quantized_decomposed.quantize_per_channel.default")
def quantize_per_channel(input, scales, zero_points, axis, quant_min, quant_max, dtype):
    """round(input * (1.0 / scales)) + zero_points along ``axis``, clamped, as ``dtype``.

    Tensor arithmetic with torch's promotion: 1.0 / scales is scales.reciprocal() in the scales'
    dtype, and float64 scales make the product, the rounding and the shift float64."""
    dtype = np.dtype(dtype)
    x = _float32_input(input)
    _check_axis(x, axis)
    _check_bounds(quant_min, quant_max, dtype)
    s = np.asarray(scales)
    compute = promote_types(x.dtype, s.dtype)
    with np.errstate(divide="ignore", over="ignore"):
        inv = _along(s.dtype.type(1) / s, axis, x.ndim)
        scaled = x.astype(compute) * inv.astype(compute)
        zp = _along(zero_points, axis, x.ndim).astype(compute)
        return _round_shift_clamp(scaled, zp, quant_min, quant_max, dtype)


@kernel("quantized_decomposed.dequantize_per_channel.default")
def dequantize_per_channel(input, scales, zero_points, axis, quant_min, quant_max, dtype, out_dtype=None):
    """((input - zero_points) * scales).to(out_dtype) along ``axis``, out_dtype float32 by default.

    Tensor arithmetic with torch's promotion: an int8 input minus int64 zero_points subtracts in
    int64 (exactly), the product is in the scales' dtype, and only the result is converted."""
    x = np.asarray(input)
    if x.dtype != np.dtype(dtype):
        raise TypeError(f"expecting an input of dtype {np.dtype(dtype)}, got {x.dtype}")
    _check_axis(x, axis)
    _check_bounds(quant_min, quant_max, np.dtype(dtype))
    s = np.asarray(scales)
    if zero_points is not None:
        zp = np.asarray(zero_points)
        x = x.astype(promote_types(x.dtype, zp.dtype)) - _along(zp, axis, x.ndim).astype(promote_types(x.dtype, zp.dtype))
    compute = promote_types(x.dtype, s.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        product = cast(_to_copy(x, dtype=compute).astype(opmath(compute)) * _along(s, axis, x.ndim).astype(opmath(compute)), compute)
        return _to_copy(product, dtype=float32 if out_dtype is None else np.dtype(out_dtype))


@kernel("quantized_decomposed.choose_qparams.tensor")
def choose_qparams(input, quant_min, quant_max, eps, dtype):
    """(scale, zero_point) of per-tensor affine quantization: torch.ao.quantization.utils'
    determine_qparams over torch.aminmax(input), as float64[1] and int64[1].

    scale = max((max(x_max, 0) - min(x_min, 0)) / (quant_max - quant_min), eps), the subtraction
    and division in the input's dtype (float16 input: rounded to float16), the max with
    torch.Tensor([eps]) in float32; zero_point = clamp(quant_min - round(min(x_min, 0) / scale)),
    the quotient in float32 and the rounding (half to even) cast to int32."""
    x = np.asarray(input)
    if x.dtype not in (float32, *_HALF_TYPES):
        raise TypeError(f"expecting a float32, float16 or bfloat16 input, got {x.dtype}")
    if np.dtype(dtype) not in _QUANT_BOUNDS:
        raise ValueError(f"unsupported quantized dtype {np.dtype(dtype)}")
    if not quant_min <= 0 <= quant_max or quant_min >= quant_max:  # validate_qmin_qmax
        raise ValueError(f"[{quant_min}, {quant_max}] must hold 0 and more than one value")
    if x.size == 0:
        raise ValueError("aminmax of an empty tensor has no identity")
    compute = opmath(x.dtype)
    zero = np.zeros((), x.dtype)
    min_neg, max_pos = np.minimum(x.min(), zero), np.maximum(x.max(), zero)  # NaN would propagate
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        span = cast(max_pos.astype(compute) - min_neg.astype(compute), x.dtype)
        scale = cast(span.astype(compute) / compute.type(quant_max - quant_min), x.dtype)
        # torch.max of the 0-d scale and the 1-element float32 tensor eps: float32 wins (a dimensioned tensor)
        scale = np.maximum(scale.astype(float32), float32.type(eps)).reshape(1)
        shift = np.rint(min_neg.astype(float32) / scale).astype(int32)
    zero_point = np.clip(int32.type(quant_min) - shift, int32.type(quant_min), int32.type(quant_max))
    return scale.astype(float64), zero_point.astype(int64)
