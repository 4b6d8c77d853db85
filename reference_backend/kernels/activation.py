"""Activation functions, with ATen's CPU formulas (aten/src/ATen/native/cpu/Activation.cpp,
GeluKernel.cpp, UnaryOpsKernel.cpp and aten/src/ATen/native/Activation.cpp).

Half types compute in float32 and round once, as those kernels do (their scalar
attributes are read as float for float16/bfloat16 inputs). Where ATen evaluates
a formula step by step in the compute type (hardswish, elu's coefficients,
softplus's branch test), the steps below round in the same places; transcendental
pieces are evaluated in float64 and rounded to the compute type (see unary.py).
Several of these ops are not core ATen (run_decompositions rewrites them) but
ExecuTorch's Edge dialect keeps them for delegates, so they are computed directly.
"""

from __future__ import annotations

import functools
import math

import ml_dtypes
import numpy as np

from ._dtypes import bfloat16, cast, float16, float64, is_bool, is_float, is_int, opmath
from ._registry import kernel
from .binary import clamp_like_aten
from .unary import blockwise64, erf64, round_from_float64, to_float_input

_HALF_TYPES = (float16, bfloat16)


def _float_input(self, op: str) -> tuple[np.ndarray, np.dtype]:
    """The input in its compute type, and its dtype; these ops have no integer or bool kernels."""
    x = np.asarray(self)
    if not is_float(x.dtype):
        raise TypeError(f"{op}: only floating-point tensors are supported, got {x.dtype}")
    return x.astype(opmath(x.dtype), copy=False), x.dtype


def _in_compute(fn, c: np.ndarray) -> np.ndarray:
    """A transcendental ``fn`` evaluated in float64 and rounded to the compute type of ``c``."""
    with np.errstate(all="ignore"):
        return blockwise64(fn, c).astype(c.dtype)


def _number(value, dtype: np.dtype) -> np.ndarray:
    """A Scalar attribute as ``Scalar::to<T>()`` gives it: checked against T's range (c10::checked_convert).

    Floating targets accept inf and NaN but refuse finite values beyond their largest
    (65504.5 does not convert to float16 even though it would round to 65504).
    Integer targets truncate toward zero; unsigned ones accept negative integers
    (two's complement wrap) but not negative floats below -max.
    """
    dtype = np.dtype(dtype)
    v = value
    if is_float(dtype):
        v = float(v)
        limit = float(ml_dtypes.finfo(dtype).max)
        if math.isfinite(v) and not (-limit <= v <= limit):
            raise ValueError(f"value {value!r} cannot be converted to type {dtype} without overflow")
        return round_from_float64(np.asarray(v), dtype)
    info = np.iinfo(dtype)
    if isinstance(v, float):
        if not math.isfinite(v) or not (info.min <= v <= info.max):
            raise ValueError(f"value {value!r} cannot be converted to type {dtype} without overflow")
        v = math.trunc(v)
    v = int(v)
    low = -int(info.max) if info.min == 0 else int(info.min)
    if not (low <= v <= int(info.max)):
        raise ValueError(f"value {value!r} cannot be converted to type {dtype} without overflow")
    return np.asarray(v % (int(info.max) + 1) if info.min == 0 else v, dtype=dtype)


def _attr_compute(value, dtype: np.dtype) -> np.ndarray:
    """A scalar attribute in the compute type: ``to<float>()`` for half types, ``to<scalar_t>()`` otherwise."""
    return _number(value, opmath(dtype))


# --------------------------------------------------------------------------------------------
# ReLU family


@kernel("aten.relu.default")
def relu(self):
    # ATen's relu is clamp_min(self, 0): NaN propagates; integers are supported, bool is not.
    x = np.asarray(self)
    if is_bool(x.dtype):
        raise TypeError("relu: not implemented for bool tensors")
    c = x.astype(opmath(x.dtype), copy=False)
    return cast(clamp_like_aten(c, np.zeros((), c.dtype), None), x.dtype)  # relu(-0.0) is -0.0


def _hardtanh(self, min_val, max_val, op: str):
    """ATen's hardtanh_out (native/Activation.cpp): clamp(self, min_val, max_val).

    Integer tensors read the limits with ``toLong()`` (truncation toward zero) and
    uint8 refuses negative limits. clamp is min(max(x, lo), hi): NaN propagates and
    lo > hi gives hi everywhere.
    """
    x = np.asarray(self)
    if is_bool(x.dtype):
        raise TypeError(f"{op}: bool inputs are not supported")
    if is_int(x.dtype):
        lo, hi = math.trunc(min_val), math.trunc(max_val)
        if x.dtype == np.uint8 and (lo < 0 or hi < 0):
            raise ValueError(f"{op}: cannot do hardtanh on an unsigned type with negative limits")
        lo, hi = _number(lo, x.dtype), _number(hi, x.dtype)
        return np.asarray(np.minimum(np.maximum(x, lo), hi))
    c = x.astype(opmath(x.dtype), copy=False)
    lo, hi = _attr_compute(min_val, x.dtype), _attr_compute(max_val, x.dtype)
    return cast(clamp_like_aten(c, np.asarray(lo, c.dtype), np.asarray(hi, c.dtype)), x.dtype)


@kernel("aten.hardtanh.default")
def hardtanh(self, min_val=-1, max_val=1):
    return _hardtanh(self, min_val, max_val, "hardtanh")


@kernel("aten.relu6.default")
def relu6(self):
    # CompositeImplicitAutograd: hardtanh(self, 0, 6).
    return _hardtanh(self, 0, 6, "relu6")


@kernel("aten.leaky_relu.default")
def leaky_relu(self, negative_slope=0.01):
    # leaky_relu_kernel: x > 0 ? x : x * negval, negval read in the compute type.
    c, dtype = _float_input(self, "leaky_relu")
    slope = _attr_compute(negative_slope, dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        return cast(np.where(c > 0, c, c * slope), dtype)


@kernel("aten.threshold.default")
def threshold(self, threshold, value):
    """x <= threshold ? value : x (threshold_kernel in Activation.cpp).

    Half types compare in float32 against the float32 threshold (bfloat16 0.10009765625
    is not <= 0.1) and store ``value`` rounded to the half type; integer tensors
    truncate both scalars toward zero (threshold 1.5 means 1) and refuse ones out of
    their range. NaN is never <= anything, so it passes through.
    """
    x = np.asarray(self)
    if is_bool(x.dtype):
        raise TypeError("threshold: not implemented for bool tensors")
    c = x.astype(opmath(x.dtype), copy=False)
    limit = _attr_compute(threshold, x.dtype)
    replacement = _number(value, x.dtype)
    return np.where(c <= limit, replacement, x).astype(x.dtype, copy=False)


@kernel("aten.prelu.default")
def prelu(self, weight):
    """CompositeImplicitAutograd (native/Activation.cpp): ``weight`` (one value, or one per
    channel, dim 1) is reshaped to broadcast over ``self`` and handed to _prelu_kernel."""
    x, w = np.asarray(self), np.asarray(weight)
    if x.dtype != w.dtype:
        raise TypeError(f"prelu: type promotion is not supported; got {x.dtype} and {w.dtype}")
    if w.ndim > 1:
        raise ValueError(f"prelu: expected weight to be a scalar or 1-D tensor, got ndim = {w.ndim}")
    if w.size != 1:
        if x.ndim == 0:
            raise ValueError("prelu: zero-dim input tensors are not allowed with several weights")
        channels = x.shape[1] if x.ndim > 1 else 1
        if channels != w.size:
            raise ValueError(f"prelu: {w.size} weights for {channels} channels")
    if x.ndim != w.ndim:
        shape = [1] * x.ndim
        if x.ndim > 1:
            shape[1] = w.size
        w = w.reshape(shape)
    return _prelu_kernel(x, w)


@kernel("aten._prelu_kernel.default")
def _prelu_kernel(self, weight):
    # prelu_kernel: x > 0 ? x : w * x, broadcasting; half types multiply in float32.
    c, dtype = _float_input(self, "prelu")
    w = np.asarray(weight)
    if w.dtype != dtype:
        raise TypeError(f"prelu: type promotion is not supported; got {dtype} and {w.dtype}")
    w = w.astype(c.dtype, copy=False)
    with np.errstate(invalid="ignore", over="ignore"):
        return cast(np.where(c > 0, c, w * c), dtype)


# --------------------------------------------------------------------------------------------
# Smooth activations


@kernel("aten.gelu.default")
def gelu(self, *, approximate="none"):
    """GeluKernelImpl (GeluKernel.cpp): x/2 (1 + erf(x/sqrt 2)), or with ``approximate="tanh"``
    x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). gelu(-inf) is NaN (-inf * 0) in both."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    c, dtype = _float_input(self, "gelu")
    if approximate == "none":
        limit = float(np.finfo(c.dtype).max)

        def exact(x):
            # Eager's vectorized loop on an AVX-512 CPU forms x * (1 + erf(x / sqrt 2)) before halving
            # it, in the compute type: past half the type's largest value that overflows to inf
            # (gelu(3.4e38) is inf in a float32 tensor of 16 elements, measured on an Intel Xeon). On an
            # AVX2 CPU (measured on an AMD EPYC, 2026-11-25) and in its scalar tail it halves first and
            # stays finite. The reference follows the vectorized loop of the CPU it runs on, as eager
            # there does: what PyTorch computes at the top of the range depends on the machine.
            if c.dtype == np.float64 or not _eager_gelu_overflows():  # eager's float64 gelu(1.8e308) is finite
                return x * 0.5 * (1 + erf64(x * math.sqrt(0.5)))
            y = x * (1 + erf64(x * math.sqrt(0.5)))
            return np.where(np.abs(y) > limit, np.copysign(np.inf, y), y) * 0.5

        return round_from_float64(blockwise64(exact, c), dtype)
    beta = math.sqrt(2) * (2 / math.sqrt(math.pi)) * 0.5  # M_SQRT2 * M_2_SQRTPI * 0.5
    kappa = 0.044715
    # ATen's constants are opmath_t: rounded to float32 for float, float16 and bfloat16.
    beta, kappa = float(np.asarray(beta, c.dtype)), float(np.asarray(kappa, c.dtype))
    return round_from_float64(
        blockwise64(lambda x: 0.5 * x * (1 + np.tanh(beta * (x + kappa * (x * x * x)))), c), dtype
    )




@functools.cache
def _eager_gelu_overflows() -> bool:
    """Whether eager's vectorized float gelu on this CPU overflows past half the largest value
    (ATen's AVX-512 kernels: see gelu). Without torch, the AVX-512 behaviour."""
    try:
        import torch
    except ImportError:
        return True
    return torch.backends.cpu.get_cpu_capability().startswith("AVX512")


@kernel("aten.silu.default")
def silu(self):
    # x / (1 + exp(-x)); silu(-inf) = -inf / inf = NaN.
    c, dtype = _float_input(self, "silu")
    return round_from_float64(blockwise64(lambda x: x / (1 + np.exp(-x)), c), dtype)


@kernel("aten.mish.default")
def mish(self):
    # x * tanh(softplus(x)) with softplus = log1p(exp(x)), no threshold; mish(-inf) is NaN.
    c, dtype = _float_input(self, "mish")
    return round_from_float64(blockwise64(lambda x: x * np.tanh(np.log1p(np.exp(x))), c), dtype)


@kernel("aten.hardswish.default")
def hardswish(self):
    # x * min(max(x + 3, 0), 6) / 6, each step rounded in the compute type; hardswish(-inf) is NaN.
    c, dtype = _float_input(self, "hardswish")
    three, zero, six = (np.asarray(v, c.dtype) for v in (3, 0, 6))
    with np.errstate(invalid="ignore", over="ignore"):
        return cast(c * np.minimum(np.maximum(c + three, zero), six) / six, dtype)


@kernel("aten.hardsigmoid.default")
def hardsigmoid(self):
    c, dtype = _float_input(self, "hardsigmoid")
    three, zero, six = (np.asarray(v, c.dtype) for v in (3, 0, 6))
    with np.errstate(invalid="ignore", over="ignore"):
        return cast(np.minimum(np.maximum(c + three, zero), six) / six, dtype)


@kernel("aten.softplus.default")
def softplus(self, beta=1, threshold=20):
    """x * beta > threshold ? x : log1p(exp(x * beta)) / beta (softplus_kernel); the product and
    the test are in the compute type, so the branch switches exactly where ATen's does."""
    c, dtype = _float_input(self, "softplus")
    b, t = _attr_compute(beta, dtype), _attr_compute(threshold, dtype)
    with np.errstate(all="ignore"):
        scaled = c * b
        soft = blockwise64(lambda z: np.log1p(np.exp(z)), scaled) / b.astype(float64)
        return round_from_float64(np.where(scaled > t, c.astype(float64), soft), dtype)


def _elu(self, alpha, scale, input_scale, op: str):
    """elu_kernel (Activation.cpp): x > 0 ? x * scale : expm1(x * input_scale) * (alpha * scale).

    The coefficients are read in the compute type and alpha * scale is rounded there.
    x <= 0 includes -0.0 and -inf (elu(-inf) = -alpha * scale); NaN stays NaN.
    """
    c, dtype = _float_input(self, op)
    pos = _attr_compute(scale, dtype)
    neg = (_attr_compute(alpha, dtype) * pos).astype(c.dtype)
    inp = _attr_compute(input_scale, dtype)
    with np.errstate(all="ignore"):
        negative = _in_compute(np.expm1, c * inp) * neg
        return cast(np.where(c > 0, c * pos, negative), dtype)


@kernel("aten.elu.default")
def elu(self, alpha=1, scale=1, input_scale=1):
    return _elu(self, alpha, scale, input_scale, "elu")


@kernel("aten.selu.default")
def selu(self):
    # CompositeImplicitAutograd: elu(self, alpha, scale) with SELU's constants (native/Activation.cpp).
    return _elu(self, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1, "selu")


@kernel("aten.celu.default")
def celu(self, alpha=1.0):
    # CompositeImplicitAutograd: elu(self, alpha, 1, 1 / alpha), the reciprocal taken in double.
    if float(alpha) == 0:
        raise ZeroDivisionError("celu: alpha cannot be 0")
    return _elu(self, alpha, 1.0, 1.0 / float(alpha), "celu")


@kernel("aten.glu.default")
def glu(self, dim=-1):
    """a * sigmoid(b) for the two halves a, b of ``self`` along ``dim`` (glu_kernel)."""
    c, dtype = _float_input(self, "glu")
    if c.ndim == 0:
        raise ValueError("glu: does not support scalars (0-dim tensors)")
    if not -c.ndim <= dim < c.ndim:
        raise IndexError(f"glu: dim {dim} is out of range for a {c.ndim}-d tensor")
    n = c.shape[dim]
    if n % 2:
        raise ValueError(f"glu: halving dimension must be even, but dimension {dim} is size {n}")
    a, b = np.split(c, 2, axis=dim)
    # glu_kernel (Activation.cpp) computes a * (1 / (1 + exp(-b))) in opmath, not a correctly
    # rounded sigmoid: exp(-b) overflows to inf for b < -88 in float32, the gate is exactly 0
    # and inf * 0 is NaN where a float64 sigmoid would give a subnormal gate and inf.
    one = c.dtype.type(1)
    with np.errstate(all="ignore"):
        return cast(a * (one / (one + np.exp(-b))), dtype)


@kernel("aten.logit.default")
def logit(self, eps=None):
    """log(x / (1 - x)), x first clamped to [eps, 1 - eps] when eps is given (logit_kernel).

    x == 1 gives inf. Integer and bool inputs give float32. float16 and bfloat16 take
    1 - x and the quotient in the half type (c10::Half arithmetic rounds each step),
    and only the logarithm in float32.
    """
    x, dtype = to_float_input(self)
    with np.errstate(all="ignore"):
        if eps is not None and float(eps) >= 0:
            lo = _number(eps, dtype)
            hi = cast(np.asarray(1, opmath(dtype)) - lo.astype(opmath(dtype)), dtype)
            x = np.where(x < lo, lo, np.where(x > hi, hi, x)).astype(dtype)
        c = x.astype(opmath(dtype))
        one = np.ones((), c.dtype)
        if dtype in _HALF_TYPES:
            ratio = cast(c / cast(one - c, dtype).astype(c.dtype), dtype).astype(c.dtype)
        else:
            ratio = c / (one - c)
        ratio = np.where(c == 1, np.inf, ratio)
        return round_from_float64(np.log(ratio.astype(float64)), dtype)


@kernel("aten.log_sigmoid_forward.default")
def log_sigmoid_forward(self):
    """(output, buffer): buffer = exp(-|x|), output = min(x, 0) - log1p(buffer) (log_sigmoid_cpu_kernel).

    For half types the output is computed from the float32 buffer, which is then rounded
    for storing.
    """
    c, dtype = _float_input(self, "log_sigmoid_forward")
    buffer = _in_compute(lambda x: np.exp(-np.abs(x)), c)
    with np.errstate(all="ignore"):
        out = np.minimum(c, np.zeros((), c.dtype)).astype(float64) - blockwise64(np.log1p, buffer)
    return round_from_float64(out, dtype), cast(buffer, dtype)

