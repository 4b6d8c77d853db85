"""fma(a, b, c): a * b + c rounded once, as the compiled ATen kernels contract it.

ATen's CPU kernels are built with floating-point contraction, and many of them
(add with alpha, batch and group norm, the upsampling interpolations) call
vec::fmadd outright, so a * b + c is rounded once, not twice. NumPy has no fma;
this emulates it exactly:

* float32: the product of two float32 values is exact in float64; adding c in
  float64 with round-to-odd keeps the single final rounding to float32 exact.
* float64: error-free transforms (Dekker's product, Knuth's sum) give the exact
  result inside the range where they cannot overflow; outside it, where a * b
  overflows double, the x87 extended type (15 exponent bits) still has room, so
  inf - inf does not turn into NaN where the fused operation gives inf or a finite value.
"""

from __future__ import annotations

import numpy as np

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _two_prod(a, b):
    p = a * b

    def split(v):
        c = v * 134217729.0  # 2**27 + 1: Veltkamp split into two 26-bit halves
        hi = c - (c - v)
        return hi, v - hi

    ah, al = split(a)
    bh, bl = split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _sum_round_to_odd(a, b):
    """a + b in float64 rounded to odd: the exact sum truncated toward zero, last bit set if inexact."""
    s, e = _two_sum(a, b)
    inexact = (e != 0) & np.isfinite(s)  # an infinite or NaN sum is already the answer
    truncated = np.where(inexact & ((e < 0) != (s < 0)) & (s != 0), np.nextafter(s, 0), s)
    return np.where(inexact, (truncated.view(np.int64) | 1).view(np.float64), truncated)


def fma(a, b, c, dtype) -> np.ndarray:
    """a * b + c in ``dtype`` (float32 or float64), rounded once."""
    dtype = np.dtype(dtype)
    with np.errstate(all="ignore"):
        if dtype == _F32:
            a, b, c = (np.asarray(v, _F32).astype(_F64) for v in (a, b, c))
            return _zero_sign(np.asarray(_sum_round_to_odd(a * b, c)).astype(_F32), a, b, c)
        if dtype != _F64:
            raise TypeError(f"fma is defined here for float32 and float64, not {dtype}")
        a, b, c = np.broadcast_arrays(*(np.asarray(v, _F64) for v in (a, b, c)))
        uh, ul = _two_prod(a, b)
        th, tl = _two_sum(c, ul)
        vh, vl = _two_sum(uh, th)
        fused = vh + _sum_round_to_odd(vl, tl)
        # the error-free product needs its error term in range: a product below 2**-969 loses it to
        # underflow (fma(0.5, 5e-324, 5e-324) is 1e-323; the transforms gave 5e-324)
        tiny = (np.abs(uh) < 2.0**-969) & (a != 0) & (b != 0)
        exact_range = np.isfinite(fused) & (np.abs(uh) < 1e300) & (np.abs(c) < 1e300) & ~tiny
        if exact_range.all():
            return _zero_sign(fused, a, b, c)
        wide = np.longdouble
        outside = (a.astype(wide) * b.astype(wide) + c.astype(wide)).astype(_F64)
        return _zero_sign(np.where(exact_range, fused, outside), a, b, c)


def _zero_sign(result, a, b, c):
    """A zero fma result has the sign IEEE gives it: that of a * b + c computed plainly where it is
    exactly zero ((-0.0) * 2 + (-0.0) is -0.0; x + (-x) is +0.0), and the sign of the exact value
    where a nonzero one rounds to zero (fma(0.5, -5e-324, 0.0) is -0.0, while the plain product
    underflows to -0.0 and -0.0 + 0.0 is +0.0); the error-free transforms lose both. The exact value's
    sign comes from extended precision (x87's wider exponent: the product does not underflow there)."""
    plain = np.asarray(a * b + c).astype(result.dtype)
    with np.errstate(all="ignore"):
        wide = np.asarray(np.asarray(a, np.longdouble) * np.asarray(b, np.longdouble) + np.asarray(c, np.longdouble))
    signed = np.where(wide != 0, np.copysign(np.zeros_like(plain), wide.astype(np.float64)), plain)
    return np.where(result == 0, signed, result) if np.ndim(result) else (signed[()] if result == 0 else result)
