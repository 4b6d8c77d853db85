"""Binary elementwise arithmetic, bitwise and logical ops, comparisons, where and clamp.

Every op broadcasts like NumPy (PyTorch's rule is the same) and takes its result
dtype from ``result_type`` (PyTorch promotion), computing half types in float32
and rounding once at the end, as ATen's CPU kernels do through opmath_type.
"""

from __future__ import annotations

import numpy as np

from ._dtypes import (
    as_array,
    bfloat16,
    cast,
    complex_multiply,
    float16,
    float32,
    float_result,
    is_bool,
    is_complex,
    is_float,
    is_int,
    opmath,
    result_type,
)
from ._fma import fma
from ._registry import alternative, kernel


def _operands(dtype, *xs):
    """Inputs converted to the common dtype, then to its compute type (TensorIterator's order)."""
    compute = opmath(dtype)
    return [as_array(x, dtype).astype(compute, copy=False) for x in xs]


def _arith_operands(dtype, self, other):
    """Operands of mul and div (true, trunc and floor).

    For half types, when ``other`` has one element, these ATen CPU kernels read its
    original value straight into float32 (``iter.original_scalar_value<opmath_t>``
    in BinaryOpsKernel.cpp) instead of rounding it to the half type first. add and
    sub do round it first (checked against torch 2.13: bf16 3.0 + 0.0078126 is 3.0).
    """
    if dtype in (float16, bfloat16) and np.size(other) == 1:
        return as_array(self, dtype).astype(float32), as_array(other, float32)
    return _operands(dtype, self, other)


def _scalar(value, dtype):
    """A Python scalar attribute converted like ATen's ``Scalar::to<T>`` (wrapping for integers)."""
    return as_array(value, dtype)


def _integer_zero_division(divisor: np.ndarray, op: str) -> None:
    # ATen's integer division kernels throw rather than produce a value (c10 ZeroDivisionError).
    if np.any(divisor == 0):
        raise ZeroDivisionError(f"{op}: integer division by zero")


def _add_scaled(self, other, alpha, dtype, other_path: bool = False):
    """self + alpha * other the way ATen's add kernel rounds it (ufunc/add.h).

    Half types compute ``alpha * other`` in the half type (c10::Half arithmetic
    rounds each operation), then add. float32 and float64 use a fused multiply-add
    (vec::fmadd). Integers wrap. ``other_path``: the rounding of eager's other loop
    for alpha != 1 (the ``alternative``): half types converted to float32 and fused
    there (vec::fmadd), then rounded once to the half type, so ``alpha * other``
    does not overflow the half type (65504 - 2 * 65504 is -65504, not -inf); float32
    and float64 rounded twice, as the scalar tail and 0-d operands do.
    """
    if is_bool(dtype):
        return _operands(dtype, self)[0] | (_operands(dtype, other)[0] & bool(alpha))
    a, b = _operands(dtype, self, other)
    if is_complex(dtype):
        # alpha * other is a complex product even for alpha = 1 (Vectorized<c10::complex>): an
        # infinite part of other gives NaN in the other part, (inf + 0i) + 0 is inf + NaN i
        return np.add(a, complex_multiply(_scalar(alpha, dtype), b))
    if alpha == 1:
        return cast(a + b, dtype)
    alpha = _scalar(alpha, dtype)
    if dtype in (float16, bfloat16):
        if other_path:
            return cast(fma(alpha.astype(float32), b.astype(float32), a.astype(float32), float32), dtype)
        scaled = cast(alpha.astype(float32) * b, dtype).astype(float32)
        return cast(a + scaled, dtype)
    if dtype in (float32, np.float64):
        if other_path:
            return cast(a + cast(alpha * b, dtype), dtype)
        return cast(fma(alpha, b, a, dtype), dtype)
    return cast(a + alpha * b, dtype)


@kernel("aten.add.Tensor", "aten.add.Scalar")
def add(self, other, alpha=1):  # alpha positional in the .Scalar schema, keyword-only in .Tensor's
    return _add_scaled(self, other, alpha, result_type(self, other))


@alternative("aten.add.Tensor", "aten.add.Scalar")
def add_other_path(self, other, alpha=1):
    """Eager's other loop's rounding of self + alpha * other (``_add_scaled``)."""
    return _add_scaled(self, other, alpha, result_type(self, other), other_path=True)


@kernel("aten.sub.Tensor", "aten.sub.Scalar")
def sub(self, other, alpha=1):  # alpha positional in the .Scalar schema, keyword-only in .Tensor's
    dtype = result_type(self, other)
    if is_bool(dtype):
        raise TypeError("sub: subtraction of bool tensors is not supported; use logical_xor")
    return _add_scaled(self, other, -alpha, dtype)  # ATen's sub is add with -alpha


@alternative("aten.sub.Tensor", "aten.sub.Scalar")
def sub_other_path(self, other, alpha=1):
    """Eager's other loop's rounding of self - alpha * other (``_add_scaled``)."""
    return _add_scaled(self, other, -alpha, result_type(self, other), other_path=True)


@kernel("aten.rsub.Scalar", "aten.rsub.Tensor")
def rsub(self, other, alpha=1):  # alpha positional in the .Scalar schema, keyword-only in .Tensor's
    """other - alpha * self."""
    dtype = result_type(self, other)
    if is_bool(dtype):
        raise TypeError("rsub: subtraction of bool tensors is not supported")
    return _add_scaled(other, self, -alpha, dtype)


@alternative("aten.rsub.Scalar", "aten.rsub.Tensor")
def rsub_other_path(self, other, alpha=1):
    """Eager's other loop's rounding of other - alpha * self (``_add_scaled``)."""
    return _add_scaled(other, self, -alpha, result_type(self, other), other_path=True)


@kernel("aten.mul.Tensor", "aten.mul.Scalar")
def mul(self, other):
    dtype = result_type(self, other)
    a, b = _arith_operands(dtype, self, other)
    if is_bool(dtype):
        return a & b
    if is_complex(dtype):
        return complex_multiply(a, b)
    return cast(a * b, dtype)


def _true_divide(self, other):
    dtype = float_result(result_type(self, other))
    a, b = _arith_operands(dtype, self, other)
    with np.errstate(divide="ignore", invalid="ignore"):
        return cast(a / b, dtype)


@kernel("aten.div.Tensor", "aten.div.Scalar")
def div(self, other):
    return _true_divide(self, other)


@kernel("aten.div.Tensor_mode", "aten.div.Scalar_mode")
def div_mode(self, other, *, rounding_mode=None):
    if rounding_mode is None:
        return _true_divide(self, other)
    if rounding_mode not in ("trunc", "floor"):
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    dtype = result_type(self, other)
    a, b = _arith_operands(dtype, self, other)
    if is_int(dtype) or is_bool(dtype):
        if is_bool(dtype):
            a, b = a.astype(np.uint8), b.astype(np.uint8)
        _integer_zero_division(b, f"div(rounding_mode={rounding_mode!r})")
        q = np.floor_divide(a, b)
        if rounding_mode == "trunc":
            # floor and trunc differ by one where the division is inexact and the signs differ.
            q = q + ((np.remainder(a, b) != 0) & ((a < 0) != (b < 0))).astype(q.dtype)
        return cast(q, dtype)
    # BinaryOpsKernel.cpp (div_trunc_kernel, div_floor_kernel): a half-type divisor of one element
    # (a Scalar, or iter.is_scalar(2)) is read into float32 and the quotient rounded once; otherwise
    # both the vectorized loop and the scalar one compute in the half type, rounding the result of
    # every operation (trunc(a / b) truncates the rounded quotient). Measured on torch 2.13: exact for
    # contiguous, short, strided and broadcast tensors alike; the two differ on 0.2-6% of elements.
    rounded = _rounded_to(dtype) if dtype in (float16, bfloat16) and np.size(other) != 1 else _identity
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if rounding_mode == "trunc":
            return cast(np.trunc(rounded(a / b)), dtype)
        return cast(_floor_divide_float(a, b, rounded), dtype)


@alternative("aten.div.Tensor_mode", "aten.div.Scalar_mode")
def div_mode_other_rule(self, other, *, rounding_mode=None):
    """The half types' other accepted rounding of div with rounding_mode (``div_mode``): the
    quotient rounded once where eager rounds every step, and every step where it rounds once (a
    float32 implementation, such as inductor's, gives the former). Other dtypes: ``div_mode``."""
    dtype = result_type(self, other)
    if rounding_mode not in ("trunc", "floor") or dtype not in (float16, bfloat16):
        return div_mode(self, other, rounding_mode=rounding_mode)
    a, b = _arith_operands(dtype, self, other)
    rounded = _rounded_to(dtype) if np.size(other) == 1 else _identity
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if rounding_mode == "trunc":
            return cast(np.trunc(rounded(a / b)), dtype)
        return cast(_floor_divide_float(a, b, rounded), dtype)


def _identity(x):
    return x


def _rounded_to(dtype):
    """float32 values rounded to ``dtype`` and back: what one half-type operation of ATen returns."""
    return lambda x: cast(x, dtype).astype(float32)


def _floor_divide_float(a: np.ndarray, b: np.ndarray, rounded=_identity) -> np.ndarray:
    """ATen's div_floor_floating (c10/util/generic_math.h; div_floor_floating_vec in
    BinaryOpsKernel.cpp), Python's float // rules, ``rounded`` applied to every operation's result."""
    a, b = np.broadcast_arrays(a, b)
    mod = np.fmod(a, b)
    div = rounded(rounded(a - mod) / b)
    adjust = (mod != 0) & ((b < 0) != (mod < 0))
    div = np.where(adjust, rounded(div - 1), div)
    floordiv = np.floor(div)
    floordiv = np.where(rounded(div - floordiv) > 0.5, rounded(floordiv + 1), floordiv)
    floordiv = np.where(div == 0, np.copysign(np.zeros_like(div), rounded(a / b)), floordiv)
    return np.where(b == 0, rounded(a / b), floordiv)


@kernel("aten.remainder.Tensor", "aten.remainder.Scalar")
def remainder(self, other):
    dtype = result_type(self, other)
    a, b = _operands(dtype, self, other)
    if is_int(dtype):
        _integer_zero_division(b, "remainder")
        return cast(np.remainder(a, b), dtype)
    # ATen: mod = fmod(a, b); if mod != 0 and sign(b) != sign(mod): mod += b. Zero keeps fmod's sign.
    with np.errstate(divide="ignore", invalid="ignore"):
        mod = np.fmod(a, b)
        mod = np.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)
    return cast(mod, dtype)


@kernel("aten.fmod.Tensor", "aten.fmod.Scalar")
def fmod(self, other):
    dtype = result_type(self, other)
    a, b = _operands(dtype, self, other)
    if is_int(dtype):
        _integer_zero_division(b, "fmod")
    with np.errstate(divide="ignore", invalid="ignore"):
        return cast(np.fmod(a, b), dtype)


# ATen's pow_tensor_scalar_optimized_kernel (PowKernel.cpp) takes these shortcuts for
# float and double only; half types go through std::pow in float32. The shortcuts
# differ from IEEE pow for -inf and -0.0 (sqrt(-inf) is NaN where pow gives inf).
_POW_SHORTCUTS = {
    0.5: np.sqrt,
    -0.5: lambda x: 1 / np.sqrt(x),
    2: lambda x: x * x,
    3: lambda x: x * x * x,
    -1: lambda x: 1 / x,
    -2: lambda x: 1 / (x * x),
}


def _integer_pow(base: np.ndarray, exp: np.ndarray) -> np.ndarray:
    """ATen's powi (native/Pow.h): base ** exp wrapping in the dtype; to a negative exponent, 1/base**k
    truncated toward zero: 1 for base 1, +-1 for base -1 by the exponent's parity, 0 otherwise (0 too)."""
    power = np.power(base, np.maximum(exp, 0))
    reciprocal = np.where(base == 1, 1, np.where(base == -1, np.where(exp % 2 == 0, 1, -1), 0))
    return np.where(exp < 0, reciprocal, power)


@kernel("aten.pow.Tensor_Tensor", "aten.pow.Tensor_Scalar", "aten.pow.Scalar")
def pow(self, exponent):  # noqa: A001 - ATen's name
    dtype = result_type(self, exponent)
    base, exp = _operands(dtype, self, exponent)
    if is_int(dtype):
        if not isinstance(exponent, np.ndarray) and exponent < 0:
            # pow.Tensor_Scalar's meta function (Pow.cpp) refuses an integer (or bool) base with a
            # negative integer Scalar exponent; a tensor exponent (pow.Tensor_Tensor, and pow.Scalar,
            # which redispatches to it) goes through powi instead.
            raise ValueError("pow: integers to negative integer powers are not allowed")
        return cast(_integer_pow(base, exp), dtype)
    if is_bool(dtype):
        return np.power(base.astype(np.uint8), exp.astype(np.uint8)).astype(bool)
    with np.errstate(all="ignore"):
        if not isinstance(exponent, np.ndarray) and dtype in (float32, np.float64):
            shortcut = _POW_SHORTCUTS.get(exponent)
            if shortcut is not None:
                return cast(shortcut(base), dtype)
        # A full-shape, at-least-1-d exponent keeps NumPy off its own scalar shortcuts (it takes
        # them for a 0-d exponent too: pow(-inf, 0.5) would be sqrt's NaN), so this is IEEE pow.
        # NumPy's float32 pow loop also departs from C's powf at -inf ** 0.5 (NaN, powf gives inf):
        # float32 and the half types (whose opmath is float32) compute in float64, rounded once.
        shape = np.broadcast_shapes(base.shape, exp.shape)
        b = np.broadcast_to(base.astype(np.float64), shape).reshape(-1)
        e = np.broadcast_to(exp.astype(np.float64), shape).reshape(-1)
        return cast(np.power(b, e).reshape(shape), dtype)


@kernel("aten.maximum.default")
def maximum(self, other):
    dtype = result_type(self, other)
    a, b = (as_array(x, dtype) for x in (self, other))
    return np.maximum(a, b)  # propagates NaN, as torch.maximum does


@kernel("aten.minimum.default")
def minimum(self, other):
    dtype = result_type(self, other)
    a, b = (as_array(x, dtype) for x in (self, other))
    return np.minimum(a, b)


@kernel("aten.atan2.default")
def atan2(self, other):
    dtype = float_result(result_type(self, other))
    a, b = _operands(dtype, self, other)
    return cast(np.arctan2(a, b), dtype)


@kernel("aten.atan2.out")
def atan2_out(self, other, *, out):
    """atan2 into ``out``: computed as atan2.default does, in the operands' promoted float dtype
    (integers and bool in float32), then converted to out's dtype (TensorIterator's
    cast_common_dtype_to_outputs: float32 operands written to a float64 out keep float32's
    precision). out gives only its dtype, which must be floating (ATen refuses to cast a float
    result into an integer or bool out); ATen resizes it to the broadcast shape. float64 reaches the
    half types through float32, as c10::Half and c10::BFloat16 are built from float."""
    result = atan2(self, other)
    target = np.asarray(out).dtype
    if not is_float(target):
        raise TypeError(f"result type {result.dtype} can't be cast to the desired output type {target}")
    if target in (float16, bfloat16) and result.dtype not in (float16, bfloat16, float32):
        result = result.astype(float32)
    return cast(result, target)


@kernel("aten.hypot.default")
def hypot(self, other):
    dtype = result_type(self, other)
    a, b = _operands(dtype, self, other)
    return cast(np.hypot(a, b), dtype)


def _bitwise(fn, name):
    def op(self, other):
        dtype = result_type(self, other)
        if is_float(dtype):
            raise TypeError(f"{name} is only defined for integer and bool tensors")
        a, b = (as_array(x, dtype) for x in (self, other))
        return fn(a, b)

    op.__name__ = name
    return op


bitwise_and = kernel("aten.bitwise_and.Tensor", "aten.bitwise_and.Scalar")(_bitwise(np.bitwise_and, "bitwise_and"))
bitwise_or = kernel("aten.bitwise_or.Tensor", "aten.bitwise_or.Scalar")(_bitwise(np.bitwise_or, "bitwise_or"))
bitwise_xor = kernel("aten.bitwise_xor.Tensor", "aten.bitwise_xor.Scalar")(_bitwise(np.bitwise_xor, "bitwise_xor"))


def _truth(self, other):
    # Both operands are converted to the promoted dtype first, so 1e-300 (float64)
    # against a float16 tensor is 0 and therefore false, as in ATen.
    dtype = result_type(self, other)
    return as_array(self, dtype) != 0, as_array(other, dtype) != 0


@kernel("aten.logical_and.default")
def logical_and(self, other):
    return np.logical_and(*_truth(self, other))


@kernel("aten.logical_or.default")
def logical_or(self, other):
    return np.logical_or(*_truth(self, other))


@kernel("aten.logical_xor.default")
def logical_xor(self, other):
    return np.logical_xor(*_truth(self, other))


def _comparison(fn, name):
    # Both sides are converted to the promoted dtype first, so a Python scalar is
    # rounded (or wrapped) to the tensor's dtype exactly as ATen does.
    def op(self, other):
        dtype = result_type(self, other)
        a, b = (as_array(x, dtype) for x in (self, other))
        return np.asarray(fn(a, b))

    op.__name__ = name
    return op


eq = kernel("aten.eq.Tensor", "aten.eq.Scalar")(_comparison(np.equal, "eq"))
ne = kernel("aten.ne.Tensor", "aten.ne.Scalar")(_comparison(np.not_equal, "ne"))
lt = kernel("aten.lt.Tensor", "aten.lt.Scalar")(_comparison(np.less, "lt"))
le = kernel("aten.le.Tensor", "aten.le.Scalar")(_comparison(np.less_equal, "le"))
gt = kernel("aten.gt.Tensor", "aten.gt.Scalar")(_comparison(np.greater, "gt"))
ge = kernel("aten.ge.Tensor", "aten.ge.Scalar")(_comparison(np.greater_equal, "ge"))


@kernel("aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar")
def where(condition, self, other):
    dtype = result_type(self, other)
    a, b = (as_array(x, dtype) for x in (self, other))
    return np.where(np.asarray(condition).astype(bool), a, b)


@kernel("aten.clamp.default", "aten.clamp.Tensor")
def clamp(self, min=None, max=None):  # noqa: A002 - ATen's names
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    dtype = result_type(self, min, max)
    compute = opmath(dtype)
    out = as_array(self, compute)
    # torch.clamp is min(max(x, lo), hi) with c10's max(a, b) = a < b ? b : a: NaN anywhere
    # propagates, lo > hi gives hi, and an equal bound keeps x (clamp(-0.0, min=0.0) is -0.0).
    return cast(clamp_like_aten(out, min if min is None else as_array(min, compute), max if max is None else as_array(max, compute)), dtype)


def clamp_like_aten(x, lo, hi):
    """min(max(x, lo), hi) as ATen computes it: x < lo ? lo : x, then x > hi ? hi : x, NaN propagating."""
    with np.errstate(invalid="ignore"):
        if lo is not None:
            x = np.where(np.isnan(lo) | (x < lo), lo, x) if np.asarray(lo).dtype.kind == "f" else np.where(x < lo, lo, x)
        if hi is not None:
            x = np.where(np.isnan(hi) | (x > hi), hi, x) if np.asarray(hi).dtype.kind == "f" else np.where(x > hi, hi, x)
    return np.asarray(x)
