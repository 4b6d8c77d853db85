"""Unary elementwise math, predicates, rounding, copies and dtype conversion.

Result dtypes follow ATen's unary TensorIterator configurations
(aten/src/ATen/TensorIterator.cpp, ``build_borrowing_unary_float_op``): floating
functions of integer or bool tensors compute and return float32 (``float_result``);
everything else keeps the input dtype, and predicates return bool.

Transcendental functions are evaluated in float64 and rounded once to float32,
then (for float16 and bfloat16) to the half type: ATen's CPU kernels compute half
types in float32 (Vectorized<Half> converts to float and back) with SLEEF or MKL
routines accurate to about one float32 ulp, so the correctly rounded float32 value
is the closest model of that computation. Operations that IEEE arithmetic defines
exactly (division, sqrt, comparisons, rounding) run in the compute type itself,
so they round where ATen's kernels round.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ._dtypes import (
    bfloat16,
    bool_,
    cast,
    complex_from,
    complex_multiply,
    float8_e4m3fn,
    float8_e5m2,
    float16,
    float32,
    float64,
    float_result,
    is_bool,
    is_complex,
    is_float,
    is_int,
    opmath,
    to_float8,
)
from ._registry import kernel

_HALF_TYPES = (float16, bfloat16)
_FLOAT8 = (float8_e4m3fn, float8_e5m2)


def _check_not_bool(x: np.ndarray, op: str) -> None:
    # ATen dispatches these ops over AT_DISPATCH_ALL_TYPES..., which has no bool case.
    if is_bool(x.dtype):
        raise TypeError(f"{op}: not implemented for bool tensors")


def _check_float(x: np.ndarray, op: str) -> None:
    if not is_float(x.dtype):
        raise TypeError(f"{op}: only floating-point tensors are supported, got {x.dtype}")


def to_float_input(self) -> tuple[np.ndarray, np.dtype]:
    """The input converted to the op's floating result dtype (int and bool -> float32), and that dtype."""
    x = np.asarray(self)
    dtype = float_result(x.dtype)
    return x.astype(dtype, copy=False), dtype


def round_from_float64(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A float64 result rounded to ``dtype`` the way ATen's kernels produce it.

    float16 and bfloat16 go through float32 first: their kernels produce a float32
    value and round that (c10::Half and c10::BFloat16 are only constructible from
    float), so a double rounding is part of their semantics.
    """
    y = np.asarray(y)
    if dtype == float64:
        return y
    with np.errstate(over="ignore", invalid="ignore"):
        y = y.astype(float32)
        return y if dtype == float32 else y.astype(dtype)


_BLOCK = 1 << 16


def blockwise64(fn, *xs: np.ndarray) -> np.ndarray:
    """``fn`` (elementwise, float64) over same-shape arrays, in blocks that stay in cache.

    Polynomial evaluations such as erf make dozens of passes over their operands; on
    activations of a million elements, blocks of 64K run them about twice as fast.
    """
    xs = [np.asarray(x, dtype=float64) for x in xs]
    with np.errstate(all="ignore"):
        if xs[0].size <= _BLOCK:
            return np.asarray(fn(*xs), dtype=float64)
        flat = [np.ascontiguousarray(x).reshape(-1) for x in xs]
        out = np.empty(flat[0].shape, float64)
        for start in range(0, out.size, _BLOCK):
            out[start : start + _BLOCK] = fn(*(f[start : start + _BLOCK] for f in flat))
        return out.reshape(xs[0].shape)


def float_math(fn, self):
    """``fn`` (a float64 NumPy function) applied to ``self`` with ATen's result dtype and rounding.

    Complex inputs are computed in their own dtype: eager's complex kernels call libm's complex
    functions (c10::complex -> std::sin -> glibc's csinf for complex64), and NumPy's complex ufuncs
    call the same ones (bit for bit, measured on torch 2.13); log1p, expm1 and sigmoid follow
    eager's own formulas (``_COMPLEX_VARIANTS``)."""
    x, dtype = to_float_input(self)
    if is_complex(dtype):
        with np.errstate(all="ignore"):
            return np.asarray(_COMPLEX_VARIANTS.get(fn, fn)(x), dtype=dtype)
    return round_from_float64(blockwise64(fn, x), dtype)


def _log1p_complex(z: np.ndarray) -> np.ndarray:
    """c10's log1p for complex on CPU (c10/util/complex_math.h, after numpy/numpy#22611): with
    u = z + 1, z itself where u is 1, log(u) where u - 1 gives z back, else log(u) * (z / (u - 1)).
    NumPy's log1p differs (NaN for some finite inputs)."""
    one = np.ones((), z.real.dtype)
    u = complex_from(z.real + one, z.imag, z.dtype)
    log_u = np.log(u)
    um1 = complex_from(u.real - one, u.imag, z.dtype)
    same = (um1.real == z.real) & (um1.imag == z.imag)
    scaled = complex_multiply(log_u, z / um1)
    return np.where((u.real == one) & (u.imag == 0), z, np.where(same, log_u, scaled))


def _expm1_complex(z: np.ndarray) -> np.ndarray:
    """c10's expm1 for complex: expm1(x) cos(y) - 2 sin(y/2)^2 + i exp(x) sin(y)."""
    x, y = z.real, z.imag
    a = np.sin(y / 2)
    return complex_from(np.expm1(x) * np.cos(y) - 2 * a * a, np.exp(x) * np.sin(y), z.dtype)


def _sigmoid_complex(z: np.ndarray) -> np.ndarray:
    # ATen's sigmoid_kernel for complex: 1 / (1 + exp(0 - z)) in complex arithmetic
    one, zero = np.ones((), z.dtype), np.zeros((), z.dtype)
    return one / (one + np.exp(zero - z))


def _unary_float(name: str, fn):
    def op(self):
        return float_math(fn, self)

    op.__name__ = name
    op.__doc__ = f"aten.{name}: floating result (int and bool inputs give float32)."
    return op


# --------------------------------------------------------------------------------------------
# erf and erfinv. NumPy has neither; ATen computes them with SLEEF/MKL (float32, float64)
# to about one ulp, so these float64 versions aim at full double precision.

# erf(x) / x on |x| < 1 as a polynomial (highest degree first) in t = x^2: a 12-term Chebyshev
# fit computed with mpmath at 40 digits (mpmath.chebyfit), relative error below 3e-16 in float64.
_ERF_SMALL_POLY = (
    -7.795898827002142e-10, 1.3720064546777686e-08, -1.6208483801871705e-07, 1.6447424703317362e-06,
    -1.492473690741966e-05, 0.00012055294904839707, -0.0008548325975389692, 0.0052239776071164225,
    -0.02686617064323777, 0.11283791670945006, -0.37612638903183543, 1.1283791670955126,
)  # fmt: skip

# erfcx(a) = exp(a^2) erfc(a) on 1 <= a <= 6 as a polynomial (highest degree first) in
# s = (2/(2+a) - 0.458333...) / 0.208333..., s in [-1, 1]: a 16-term Chebyshev fit computed the
# same way, relative error below 8e-16 in float64.
_ERFCX_S_MID = 0.4583333333333333
_ERFCX_S_HALF = 0.20833333333333334
_ERFCX_POLY = (
    4.4133850329466983e-13, 1.8386753405993422e-11, -7.45510449620631e-11, -2.6260417449824267e-10,
    2.6248030731791732e-09, -5.937642934649013e-10, -7.00535615043276e-08, 1.6350179331888476e-07,
    1.9795619117948376e-06, -7.3405185545281365e-06, -8.079220427446309e-05, 0.00019713917780504528,
    0.005588816281840148, 0.03856057042517875, 0.16189356804102498, 0.22142954022993183,
)  # fmt: skip
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


def _horner(coefficients, t: np.ndarray) -> np.ndarray:
    out = np.full_like(t, coefficients[0])
    for c in coefficients[1:]:  # in place: these run over whole activations (gelu)
        out *= t
        out += c
    return out


def _erf_small(x: np.ndarray) -> np.ndarray:
    """erf(x) for |x| <= 1."""
    out = _horner(_ERF_SMALL_POLY, x * x)
    out *= x
    return out


def _erfc_mid(a: np.ndarray) -> np.ndarray:
    """erfc(a) for 1 <= a <= 6."""
    s = 2 / (2 + a)
    s -= _ERFCX_S_MID
    s /= _ERFCX_S_HALF
    out = _horner(_ERFCX_POLY, s)
    out *= np.exp(-(a * a))
    return out


def _erfc_positive(a: np.ndarray) -> np.ndarray:
    """erfc(a) for a >= 0 (float64), with full relative precision for large a."""
    out = np.empty_like(a)
    with np.errstate(all="ignore"):
        small = a < 1
        out[small] = 1 - _erf_small(a[small])
        mid = ~small & (a <= 6)
        out[mid] = _erfc_mid(a[mid])
        far = ~(small | mid)  # a > 6 and NaN
        out[far] = np.exp(-a[far] * a[far]) * _erfcx_continued_fraction(a[far])
    return out


def _erfcx_continued_fraction(a: np.ndarray) -> np.ndarray:
    """exp(a^2) erfc(a) = 1/sqrt(pi) / (a + (1/2)/(a + 1/(a + (3/2)/(a + ...)))), for a > 6, where
    30 levels reach double precision (erfinv's Newton steps may step there; erf itself stops at 6)."""
    f = a
    for k in range(30, 0, -1):
        f = a + (k / 2) / f
    return 1 / (math.sqrt(math.pi) * f)


def erf64(x: np.ndarray) -> np.ndarray:
    """erf in float64, vectorized: a polynomial below 1, 1 - erfc from 1 to 6, +-1 beyond
    (erfc(6) = 2e-17 is below half an ulp of 1). NaN propagates."""
    x = np.asarray(x, dtype=float64)
    with np.errstate(all="ignore"):
        a = np.abs(x)
        small = a <= 1
        if small.all():
            return _erf_small(x)
        out = np.empty_like(x)
        out[small] = _erf_small(x[small])
        rest = ~small
        far = 1 - _erfc_mid(np.minimum(a[rest], 6.0))
        out[rest] = np.copysign(far, x[rest])
        return out


def _erfinv64(y: np.ndarray) -> np.ndarray:
    """erfinv in float64, to full precision up to |y| = 1 - 2^-53, as eager's is (within an ulp
    there in float32 and float64): the rational first guess older ATen versions used in
    calc_erfinv (aten/src/ATen/native/Math.h, after Pavlis' MATLAB erfinv), refined by Newton
    steps on erf for |y| <= 0.5 and on erfc above, where q = 1 - |y| is exact."""
    y = np.asarray(y, dtype=float64)
    with np.errstate(all="ignore"):
        a = np.abs(y)
        z = y * y
        central = y * _horner((-0.140543331, 0.914624893, -1.645349621, 0.886226899), z) / _horner(
            (0.012229801, -0.329097515, 1.442710462, -2.118377725, 1.0), z
        )
        w = np.sqrt(-np.log((1 - np.minimum(a, 1)) / 2))
        outer = _horner((1.641345311, 3.429567803, -1.624906493, -1.970840454), w) / _horner(
            (1.637067800, 3.543889200, 1.0), w
        )
        x = np.where(a <= 0.7, np.abs(central), outer)
        inner = a <= 0.5
        q = 1 - a  # exact for a >= 0.5 (Sterbenz)
        for _ in range(3):
            deriv = _TWO_OVER_SQRT_PI * np.exp(-x * x)
            residual = np.where(inner, erf64(x) - a, q - _erfc_positive(x))
            x = x - residual / deriv
        x = np.where(a == 1, np.inf, x)
        x = np.where((a > 1) | np.isnan(y), np.nan, x)
        x = np.where(y == 0, 0.0, x)
        return np.copysign(x, y)


@kernel("aten.erf.default")
def erf(self):
    return float_math(erf64, self)


@kernel("aten.erfinv.default")
def erfinv(self):
    return float_math(_erfinv64, self)


# --------------------------------------------------------------------------------------------
# Floating functions


FLOAT_FUNCTIONS = {
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "log2": np.log2,
    "log10": np.log10, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh,
}  # fmt: skip
"""ATen's floating unary functions (``aten.<name>.default``) and the float64 NumPy function each is
computed with (``float_math``: ATen's result dtype and rounding)."""
for _name, _fn in FLOAT_FUNCTIONS.items():
    kernel(f"aten.{_name}.default")(_unary_float(_name, _fn))


def sigmoid64(x: np.ndarray) -> np.ndarray:
    # ATen's sigmoid_kernel: 1 / (1 + exp(-x)); exp(inf) = inf makes sigmoid(-inf) = 0.
    return 1 / (1 + np.exp(-x))


sigmoid = kernel("aten.sigmoid.default")(_unary_float("sigmoid", sigmoid64))
_COMPLEX_VARIANTS = {np.log1p: _log1p_complex, np.expm1: _expm1_complex, sigmoid64: _sigmoid_complex}
"""Complex inputs of these float functions follow eager's own formulas, not NumPy's."""


@kernel("aten.sqrt.default")
def sqrt(self):
    # IEEE sqrt is correctly rounded in every type, so the compute type gives ATen's bits.
    x, dtype = to_float_input(self)
    with np.errstate(invalid="ignore"):
        return cast(np.sqrt(x.astype(opmath(dtype))), dtype)


@kernel("aten.rsqrt.default")
def rsqrt(self):
    # Vectorized<float>::rsqrt is 1 / sqrt(x): two IEEE roundings in the compute type.
    x, dtype = to_float_input(self)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        c = x.astype(opmath(dtype))
        return cast(np.ones((), c.dtype) / np.sqrt(c), dtype)


@kernel("aten.reciprocal.default")
def reciprocal(self):
    x, dtype = to_float_input(self)
    with np.errstate(divide="ignore", over="ignore"):
        c = x.astype(opmath(dtype))
        return cast(np.ones((), c.dtype) / c, dtype)


# --------------------------------------------------------------------------------------------
# Sign and magnitude: exact in every dtype; integers wrap (abs and neg of int8 -128 are -128).


@kernel("aten.abs.default")
def abs(self):  # noqa: A001 - ATen's name
    x = np.asarray(self)
    _check_not_bool(x, "abs")
    if is_complex(x.dtype):  # the modulus, real: std::abs -> hypot in the parts' precision
        with np.errstate(over="ignore"):
            return np.asarray(np.hypot(x.real, x.imag))
    return cast(np.abs(x.astype(opmath(x.dtype))), x.dtype)


@kernel("aten.neg.default")
def neg(self):
    x = np.asarray(self)
    if is_bool(x.dtype):
        raise TypeError("neg: negation of a bool tensor is not supported; use logical_not")
    if is_complex(x.dtype):  # Vectorized<c10::complex>::neg is 0 - z: neg(1 + 0j) is -1 + 0j, not -1 - 0j
        return np.subtract(np.zeros((), x.dtype), x)
    return cast(np.negative(x.astype(opmath(x.dtype))), x.dtype)


@kernel("aten.sign.default", "aten.sgn.default")
def sign(self):
    """(0 < x) - (x < 0), as ATen's sign_kernel: NaN gives 0 and -0.0 gives +0.0; bool is kept.

    sgn equals sign for real dtypes (it differs only for complex numbers).
    """
    x = np.asarray(self)
    if is_bool(x.dtype):
        return x.copy()
    c = x.astype(opmath(x.dtype))
    if x.dtype == np.uint8:
        return np.asarray(c > 0).astype(x.dtype)
    return cast((c > 0).astype(c.dtype) - (c < 0).astype(c.dtype), x.dtype)


# --------------------------------------------------------------------------------------------
# Rounding. Integers are returned unchanged; bool is refused (no bool case in ATen's dispatch).


def _rounding(name: str, fn):
    def op(self):
        x = np.asarray(self)
        _check_not_bool(x, name)
        if is_int(x.dtype):
            return x.copy()
        return cast(fn(x.astype(opmath(x.dtype))), x.dtype)

    op.__name__ = name
    return op


floor = kernel("aten.floor.default")(_rounding("floor", np.floor))
ceil = kernel("aten.ceil.default")(_rounding("ceil", np.ceil))
trunc = kernel("aten.trunc.default")(_rounding("trunc", np.trunc))
# std::nearbyint in the default rounding mode: half to even, as np.rint.
round = kernel("aten.round.default")(_rounding("round", np.rint))  # noqa: A001 - ATen's name


@kernel("aten.round.decimals")
def round_decimals(self, *, decimals):
    """ATen's round_decimals_kernel (UnaryOpsKernel.cpp): scale by 10**|decimals| in the compute
    type, round half to even, scale back. The scaling can overflow (float32 3e38 with decimals=2
    gives inf) and is inexact (1.005 -> 1.0), exactly as in ATen."""
    x = np.asarray(self)
    _check_float(x, "round.decimals")
    c = x.astype(opmath(x.dtype))
    scale = np.asarray(10.0 ** abs(int(decimals))).astype(c.dtype)  # static_cast<opmath_t>(std::pow(10, d))
    with np.errstate(over="ignore", invalid="ignore"):
        if decimals < 0:
            out = np.rint(c / scale) * scale
        else:
            out = np.rint(c * scale) / scale
    return cast(out, x.dtype)


@kernel("aten.frac.default")
def frac(self):
    # x - trunc(x) in the input type: exact, and NaN for +-inf.
    x = np.asarray(self)
    _check_float(x, "frac")
    c = x.astype(opmath(x.dtype))
    with np.errstate(invalid="ignore"):
        return cast(c - np.trunc(c), x.dtype)


# --------------------------------------------------------------------------------------------
# Predicates and logical/bitwise negation


def _float_predicate(name: str, fn, int_value: bool):
    # ATen answers these for integer and bool tensors without looking at the values.
    def op(self):
        x = np.asarray(self)
        if is_complex(x.dtype):  # either part NaN (isinf: either infinite; isfinite: both finite)
            return np.asarray(fn(x))
        if not is_float(x.dtype):
            return np.full(x.shape, int_value, dtype=bool_)
        return np.asarray(fn(x.astype(opmath(x.dtype))))

    op.__name__ = name
    return op


isnan = kernel("aten.isnan.default")(_float_predicate("isnan", np.isnan, False))
isinf = kernel("aten.isinf.default")(_float_predicate("isinf", np.isinf, False))
isfinite = kernel("aten.isfinite.default")(_float_predicate("isfinite", np.isfinite, True))
isposinf = kernel("aten.isposinf.default")(_float_predicate("isposinf", lambda x: x == np.inf, False))
isneginf = kernel("aten.isneginf.default")(_float_predicate("isneginf", lambda x: x == -np.inf, False))


@kernel("aten.logical_not.default")
def logical_not(self):
    # static_cast<bool>(!a): NaN is truthy, so logical_not(NaN) is False.
    x = np.asarray(self)
    return np.asarray(x == 0) if not is_bool(x.dtype) else np.asarray(~x)


@kernel("aten.bitwise_not.default")
def bitwise_not(self):
    # bool: logical not (ATen's bitwise_not_kernel special-cases it); integers: ~x.
    x = np.asarray(self)
    if is_float(x.dtype):
        raise TypeError("bitwise_not: only integer and bool tensors are supported")
    return np.asarray(np.invert(x))


@kernel("aten.nan_to_num.default")
def nan_to_num(self, nan=None, posinf=None, neginf=None):
    """Replacements are converted to the tensor's dtype (``static_cast<scalar_t>(double)``, so a
    half type rounds through float32 and overflows to inf); infinities default to the dtype's
    largest finite values. Integer and bool tensors are copied unchanged."""
    x = np.asarray(self)
    if is_complex(x.dtype):  # each part on its own (ATen's nan_to_num for complex)
        part = nan_to_num(x.real.copy(), nan, posinf, neginf), nan_to_num(x.imag.copy(), nan, posinf, neginf)
        return complex_from(*part, x.dtype)
    if not is_float(x.dtype):
        return x.copy()

    def replacement(value, default):
        if value is None:
            return np.asarray(default, dtype=x.dtype)
        return round_from_float64(np.asarray(float(value)), x.dtype)

    largest = np.asarray(ml_dtypes.finfo(x.dtype).max, dtype=x.dtype)
    out = np.where(np.isnan(x), replacement(nan, 0.0), x)
    out = np.where(x == np.inf, replacement(posinf, largest), out)
    out = np.where(x == -np.inf, replacement(neginf, -largest), out)
    return np.asarray(out, dtype=x.dtype)


# --------------------------------------------------------------------------------------------
# Copies and conversion


@kernel("aten.clone.default")
def clone(self):
    return np.array(self, copy=True)


@kernel("aten.alias.default", edge=("aten.alias_copy.default",))
def alias(self):
    return np.asarray(self)  # a view op; the runtime copies results it hands out


@kernel("aten._local_scalar_dense.default")
def _local_scalar_dense(self):
    """Tensor.item(): the one element of a one-element tensor of any rank, as the Scalar ATen returns
    (a C++ double for floating dtypes, int64 for integers, bool for bool): here the NumPy scalar of
    that kind, which a program output holds as a Double, Int or Bool EValue. Widening to double is
    exact, so the value is the element's own."""
    x = np.asarray(self)
    if x.size != 1:
        raise ValueError(f"a Tensor with {x.size} elements cannot be converted to Scalar")
    value = x.reshape(-1)[0]
    if is_bool(x.dtype):
        return np.bool_(value)
    if is_int(x.dtype):
        return np.int64(value)
    return np.float64(value)


@kernel("aten._to_copy.default")
def _to_copy(self, *, dtype=None):
    """dtype conversion with c10::convert's rules (c10/util/TypeCast.h).

    Floating to integer truncates toward zero (values outside the target's range,
    NaN and inf are undefined behaviour in C++ and have no specified result);
    anything to bool is ``x != 0`` (NaN is true); integers wrap to narrower integers.
    float16 and bfloat16 are constructed from float, so float64 and int64 sources
    round to float32 first: a double rounding (float64 1 + 2^-11 + 2^-40 becomes
    float16 1.0, not 1 + 2^-10).
    """
    x = np.asarray(self)
    target = x.dtype if dtype is None else np.dtype(dtype)
    with np.errstate(all="ignore"):
        if is_bool(target):
            return np.asarray(x != 0)  # a complex number is true when either part is nonzero
        if is_complex(x.dtype) and not is_complex(target):
            x = x.real  # c10::convert from complex keeps the real part (eager warns)
        if target in _FLOAT8 and x.dtype != target:
            return to_float8(x, target)  # saturating into float8_e4m3fn
        if target in _HALF_TYPES and x.dtype not in _HALF_TYPES and x.dtype != float32:
            x = x.astype(float32)
        if is_int(target) and (x.dtype in _HALF_TYPES or x.dtype in _FLOAT8):
            x = x.astype(float32)
        return np.array(x, dtype=target, copy=True)
