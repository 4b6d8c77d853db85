"""Error bounds derived from an op's computation (op spec ``bound``; conformance.specs.Bound):
the accumulation of sums in any order (Higham's gamma_n), and the moments of the normalizations."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from conformance.api.scalar_type import component_dtype, is_complex
from conformance.oracle.tolerances import ACCUMULATOR, unit_roundoff

__all__ = ["gamma", "accumulation_bound", "Moments", "moments_bound", "normalization_grad_bound"]


def gamma(n: np.ndarray, u: float) -> np.ndarray:
    """Higham's gamma_n = n u / (1 - n u): the relative bound of n roundings; inf once n u >= 1."""
    n = np.asarray(n, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n * u < 1, n * u / (1 - n * u), np.inf)


def accumulation_bound(bound, dtype: str, terms: np.ndarray, length: np.ndarray, arguments: Mapping[str, Any]) -> np.ndarray:
    """The per-element bound of an op spec ``bound`` (conformance.specs.Bound) on an output of
    ``dtype``: gamma(n + 2) * sum |terms| in the accumulation type, n = ``length`` (per element or one
    number), ``terms`` = the op on the absolute values of its inputs. Two more roundings than terms:
    the op's scalars (alpha, beta) and a mean's division. A complex output: gamma(n + 4), a complex
    product being up to two more roundings of each part. Where the terms are not finite the
    element is judged by the NaN and infinity rules alone (the bound is inf there)."""
    acc = bound.accumulator.get(dtype) or ACCUMULATOR.get(dtype, dtype)
    if bound.in_dtype_when and all(arguments.get(k) in allowed for k, allowed in bound.in_dtype_when.items()):
        acc = dtype
    u = unit_roundoff(acc)
    length = np.abs(np.asarray(length, np.float64))
    n = length + (4 if is_complex(dtype) else 2)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if bound.kind == "logsumexp":  # terms: the expected outputs; the bound is absolute
            log_n = 1 + np.log(np.maximum(length, 1))
            out = np.broadcast_to((gamma(n, u) + unit_roundoff(dtype)) * log_n, np.shape(terms)).copy()
        elif bound.kind == "relative":  # terms: the expected outputs, every term's magnitude in them
            e = np.abs(np.asarray(terms, np.float64))
            # and a root's exponent 1/p rounded: s^(1/p) moves by u |ln s^(1/p)| (the 3-norm of 2.6e-41 by 5e-15 in float64)
            out = e * (gamma(n, u) + u * np.abs(np.log(np.where(e > 0, e, 1.0))))
        elif bound.kind == "softmax":  # terms: the expected outputs; the bound is relative to them
            e = np.abs(np.asarray(terms, np.float64))
            log_n = 1 + np.log(np.maximum(length, 1))
            out = e * (gamma(n, u) * log_n + u * np.abs(np.log(np.where(e > 0, e, 1.0))))
        else:
            magnitude = np.abs(np.asarray(terms, np.float64))
            out = gamma(n, u) * magnitude
            # finite terms whose magnitudes sum past the accumulator's range overflow in some orders and
            # not in others (inf - inf is NaN): such an element's value is the order's, inf below
            out = np.where(magnitude > _largest(acc), np.inf, out)
    return np.where(np.isfinite(out), out, np.inf)


@dataclass(frozen=True)
class Moments:
    """Per-element and per-group bounds of a mean-and-variance computation (``moments_bound``)."""

    mean: np.ndarray
    """Per group: the mean's bound."""
    variance: np.ndarray
    """Per group: the bound of the variance, sum (x - mean)^2 / divisor."""
    rstd: np.ndarray
    """Per group: the bound of 1 / sqrt(biased variance + eps)."""
    normalized: np.ndarray
    """Per element (groups x n): the bound of (x - mean) * rstd * weight + bias."""


def moments_bound(x: np.ndarray, acc: str, divisor: np.ndarray | float, eps: float = 0.0,
                  weight: np.ndarray | None = None, bias: np.ndarray | None = None) -> Moments:
    """Bounds of the moments of each row of ``x`` (groups x n, float64) accumulated in ``acc``, in any
    order and by two passes or Welford's update (spec bound kind ``moments``):

    - mean: a sum of n terms and a division, |dmean| <= gamma(n + 1) mean |x| (Higham eq. 3.5);
    - S = sum (x - m)^2 with the computed mean m: S = S* + n (m - mean)^2 exactly (the deviations sum to 0),
      and its own n + 3 roundings (subtraction, square, sums): |dS| <= gamma(n + 3) S* + n dmean^2, plus
      2 n dmean mean |x - mean| for Welford's running mean (Chan, Golub and LeVeque 1983);
    - variance S / divisor, one rounding more; rstd = 1 / sqrt(S / n + eps): relative
      dS / (2 n (S / n + eps)) and three roundings (the eps addition, sqrt, division);
    - (x - m) rstd w + b: |w| rstd (dmean + |x - mean| (drstd / rstd + 4 u)) + 2 u |b|.

    A row holding NaN or an infinity, or empty, is decided by the NaN and infinity rules alone (inf)."""
    x = np.asarray(x, np.float64)
    n = x.shape[-1]
    u = unit_roundoff(acc)
    with np.errstate(all="ignore"):
        finite = np.all(np.isfinite(x), axis=-1) & (n > 0)
        xs = np.where(finite[..., None], x, 0.0)
        mean = xs.mean(axis=-1) if n else np.zeros(x.shape[:-1])
        dev = xs - mean[..., None]
        s = np.sum(dev * dev, axis=-1)
        dmean = gamma(n + 1, u) * (np.abs(xs).mean(axis=-1) if n else 0.0)
        ds = gamma(n + 3, u) * s + n * dmean * dmean + 2 * n * dmean * (np.abs(dev).mean(axis=-1) if n else 0.0)
        divisor = np.asarray(divisor, np.float64)
        variance = np.where(divisor > 0, ds / divisor + u * s / divisor, np.inf)
        var_eps = s / max(n, 1) + eps
        rstd = 1 / np.sqrt(var_eps)
        rel = np.where(var_eps > 0, ds / (2 * max(n, 1) * var_eps) + 3 * u, np.inf)
        w = np.abs(np.broadcast_to(1.0 if weight is None else np.asarray(weight, np.float64), x.shape))
        b = np.abs(np.broadcast_to(0.0 if bias is None else np.asarray(bias, np.float64), x.shape))
        w, b = np.where(np.isfinite(w), w, np.inf), np.where(np.isfinite(b), b, np.inf)
        normalized = w * rstd[..., None] * (dmean[..., None] + np.abs(dev) * (rel[..., None] + 4 * u)) + 2 * u * b

    def decided(v):
        v = np.where(finite.reshape(finite.shape + (1,) * (np.ndim(v) - finite.ndim)), v, np.inf)
        return np.where(np.isfinite(v), v, np.inf)

    return Moments(mean=decided(np.broadcast_to(dmean, finite.shape)), variance=decided(variance),
                   rstd=decided(rstd * rel), normalized=decided(normalized))


def normalization_grad_bound(g: np.ndarray, x: np.ndarray, mean: np.ndarray, rstd: np.ndarray, count: int,
                             length: int, acc: str) -> np.ndarray:
    """The bound of a normalization's input gradient (spec bound kind ``moments_backward``), per
    element of rows (groups x n) of |dy * gamma| ``g`` and ``x``, with the row's saved ``mean`` and
    ``rstd`` a (the op's inputs), ``count`` N the normalized elements and ``length`` the additions of
    its two row sums db = sum dy gamma and ds = sum dy gamma x, accumulated in ``acc``. Eager's form,
    dx = a dy gamma + b x + c with b = (db mean - ds) a^3 / N and c = -b mean - db a / N, is within

        db's error a / N  +  b's error |x - mean|  +  4 u (a |dy gamma| + |b| (|x| + |mean|) + |db| a / N)

    (c reuses the computed b and db, so b's error reaches dx only through x - mean); |db| <= sum g,
    |db mean - ds| <= sum g |mean| + sum g |x|, their errors gamma(length + 1) and gamma(length + 2)
    of those sums. The textbook form a (dy gamma - mean(dy gamma) - xhat mean(dy gamma xhat)) lands
    within it too. A row holding NaN or an infinity is decided by the NaN and infinity rules (inf)."""
    g, x = np.asarray(g, np.float64), np.asarray(x, np.float64)
    m, a = np.asarray(mean, np.float64)[:, None], np.abs(np.asarray(rstd, np.float64))[:, None]
    u = unit_roundoff(acc)
    with np.errstate(all="ignore"):
        finite = np.all(np.isfinite(g) & np.isfinite(x), axis=-1, keepdims=True) & np.isfinite(m) & np.isfinite(a)
        s1 = np.sum(g, axis=-1, keepdims=True)
        s2 = np.sum(g * np.abs(x), axis=-1, keepdims=True)
        d_db = gamma(length + 1, u) * s1
        magnitude = s1 * np.abs(m) + s2
        d_big = d_db * np.abs(m) + gamma(length + 2, u) * s2 + 2 * u * magnitude
        scale = a * a * a / max(count, 1)
        d_b = (d_big + 4 * u * magnitude) * scale
        b = magnitude * scale + d_b
        out = d_db * a / max(count, 1) + d_b * np.abs(x - m) + 4 * u * (a * g + b * (np.abs(x) + np.abs(m)) + s1 * a / max(count, 1))
    out = np.where(finite, out, np.inf)
    return np.where(np.isfinite(out), out, np.inf)


def _largest(dtype: str) -> float:
    part = component_dtype(dtype) if is_complex(dtype) else dtype
    return float(ml_dtypes.finfo(np.dtype(part)).max) if part.startswith(("bfloat16", "float8")) else float(np.finfo(np.dtype(part)).max)
