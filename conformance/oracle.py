"""Deciding whether two results agree, and measuring by how much.

Tolerances are layered and live only here: the dtype default (torch.testing's
assert_close defaults), then the op spec's override, then a loosening the
backend declares in its manifest. The chosen tolerance says where it came from,
so a report can print it with its reason.

Rules: shapes and dtypes must match exactly; integers and bools exactly (with
exact statistics, int64 extremes included); for floating point, NaN must be
where NaN is expected, infinities must match in position and sign, and a finite
element passes when it is within ``ulp`` ULP of the expected value or within
``atol + rtol * |e|`` -- an absolute tolerance never passes an element that is
off by 100% or more of a nonzero expected value (except for ops whose spec says
they accumulate, where cancellation makes absolute error the measure). Ops the
spec marks ``exact`` (correctly rounded) compare bit for bit, and ops marked
``signed_zero`` compare the sign of zero. Every comparison records max abs
error, max ULP distance, MAE, SNR and the worst index, pass or fail.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

import ml_dtypes
import numpy as np

from conformance.api.scalar_type import complex_dtype, component_dtype, dtype_name, is_complex, is_floating
from conformance.specs import OpSpec, Tolerance


def _tiny(dtype: str) -> float:
    """The smallest normal number of a float dtype."""
    return float(ml_dtypes.finfo(np.dtype(dtype)).smallest_normal) if dtype.startswith(("bfloat16", "float8")) else float(
        np.finfo(np.dtype(dtype)).tiny
    )


def unit_roundoff(dtype: str) -> float:
    """u = eps / 2 of a float dtype (of its parts' dtype for a complex one)."""
    part = component_dtype(dtype) if is_complex(dtype) else dtype
    return float(ml_dtypes.finfo(np.dtype(part)).eps) / 2 if part.startswith(("bfloat16", "float8")) else float(np.finfo(np.dtype(part)).eps) / 2


UNDERFLOW = (
    "an absolute tolerance only below the smallest normal number, where the type holds no relative "
    "precision (gradual underflow: sigmoid(-100) is 3.8e-44, and 0.0 by eager's formula)"
)
HALF = (
    "eager computes a half type in float32 and rounds once: within 1 ULP of the expected value "
    "(correct rounding or a neighbour at a near-tie), and the elements that differ lean neither way "
    "(bias test at the false-alarm rate FALSE_ALARM)"
)
UNDERFLOW_HALF = "an absolute tolerance only below float32's smallest normal, the computation type's underflow range"
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    # Relative tolerances: an absolute one would pass a tiny result that is wholly wrong (rsqrt(3.4e38)
    # is 5.4e-20: 8.1e-20 is 50% off). float32: torch.testing's rtol (about 11 ULP) or 1 ULP.
    "float16": Tolerance(atol=_tiny("float32"), rtol=0.0, ulp=1, bias=True, reason=f"{HALF}; {UNDERFLOW_HALF}"),
    "bfloat16": Tolerance(atol=_tiny("float32"), rtol=0.0, ulp=1, bias=True, reason=f"{HALF}; {UNDERFLOW_HALF}"),
    "float32": Tolerance(atol=_tiny("float32"), rtol=1.3e-6, ulp=1, reason=f"torch.testing's rtol; {UNDERFLOW}"),
    # torch.testing allows 1e-7 for float64, which a computation done in float32 (relative error
    # ~6e-8) passes. 1e-12 is ~4,500 ULP: far above libm differences, far below float32's error.
    "float64": Tolerance(atol=_tiny("float64"), rtol=1e-12, ulp=1, reason=f"fails a float32 computation; {UNDERFLOW}"),
    # eager computes in float32 and rounds once into 3 (e4m3fn) or 2 (e5m2) mantissa bits
    "float8_e4m3fn": Tolerance(atol=0.0, rtol=0.0, ulp=1, reason="float8 default: one rounding of a float32 result"),
    "float8_e5m2": Tolerance(atol=0.0, rtol=0.0, ulp=1, reason="float8 default: one rounding of a float32 result"),
    # each part by its float dtype's ulp, or |a - e| <= atol + rtol * |e| (see compare)
    "complex64": Tolerance(atol=_tiny("float32"), rtol=1.3e-6, ulp=1, reason=f"float32's (modulus and parts); {UNDERFLOW}"),
    "complex128": Tolerance(atol=_tiny("float64"), rtol=1e-12, ulp=1, reason=f"float64's (modulus and parts); {UNDERFLOW}"),
}
EXACT = Tolerance(atol=0.0, rtol=0.0, reason="integers and bools compare exactly")
CORRECTLY_ROUNDED = "correctly rounded in IEEE arithmetic (op spec exact = true): bit for bit"
COMPLEX_EXACT = (
    "an exact op in complex (op spec exact = true): a complex product or quotient is several IEEE operations, "
    "which eager's vectorized and scalar paths round differently (FMA contraction, scaled vs Smith's division; "
    "measured up to 10.8 ULP of |e| for division): 16 ULP of |e|, absolute below the smallest normal"
)
ACCUMULATOR = {"float16": "float32", "bfloat16": "float32", "float8_e4m3fn": "float32", "float8_e5m2": "float32",
               "complex64": "float32", "complex128": "float64"}  # fmt: skip
"""The type eager accumulates a dtype's sums in (its opmath type, ATen's at::opmath_type); the rest accumulate in themselves."""


def _complex_exact(dtype: str, spec: OpSpec) -> Tolerance:
    info = np.finfo(np.dtype(component_dtype(dtype)))
    return Tolerance(atol=float(info.smallest_normal), rtol=float(16 * info.eps), ulp=0, reason=COMPLEX_EXACT, source=f"op spec {spec.name}")


def _rounding_of(dtype: str, spec: OpSpec) -> Tolerance:
    """The flat part of a derived bound: the final rounding into ``dtype`` of both sides (2 u |e|,
    1 ULP in a half type), and the underflow range."""
    half = dtype in ("float16", "bfloat16") or dtype.startswith("float8")
    return Tolerance(
        atol=_tiny("float32") if half else _tiny(component_dtype(dtype) if is_complex(dtype) else dtype),
        rtol=2 * unit_roundoff(dtype),
        ulp=1,
        bias=dtype in ("float16", "bfloat16"),
        reason=f"derived bound (op spec bound): {spec.bound.reason}",
        source=f"op spec {spec.name}",
    )


def tolerance_for(spec: OpSpec | None, dtype: str, manifest=None, op: str | None = None) -> Tolerance:
    """The tolerance for results of ``dtype``: default, then op spec, then the backend's loosening.

    An op with a derived ``bound`` (op spec ``bound``) takes the rounding of its output here, and
    its per-element accumulation bound from ``accumulation_bound``. A complex output without a
    tolerance of its own takes the op's tolerance of its parts' dtype (complex64: float32; an
    exact op: ``_complex_exact``), the arithmetic its parts are computed in; a real output in a
    dtype the op does not take (_fft_c2r of complex64 is float32) takes the op's tolerance of its
    complex counterpart."""
    if not (is_floating(dtype) or is_complex(dtype)):
        return EXACT
    tol = DEFAULT_TOLERANCES[dtype]
    if spec is not None:
        counterpart = component_dtype(dtype) if is_complex(dtype) else complex_dtype(dtype)
        if dtype in spec.tolerances:
            tol = spec.tolerances[dtype]
        elif spec.exact and is_complex(dtype):
            tol = _complex_exact(dtype, spec)
        elif counterpart in spec.tolerances and (is_complex(dtype) or dtype not in spec.dtypes):
            part = spec.tolerances[counterpart]
            tol = replace(part, reason=f"{part.reason} (the op's {counterpart} tolerance, for its {dtype} outputs)")
        elif spec.exact:
            tol = Tolerance(atol=0.0, rtol=0.0, ulp=0, reason=CORRECTLY_ROUNDED, source=f"op spec {spec.name}")
        elif spec.bound is not None:
            tol = _rounding_of(dtype, spec)
        # the sign of a zero part of a complex product or quotient depends on eager's path (div(z, z)
        # is 1 + 0i vectorized, 1 - 0i by Smith's algorithm): complex outputs leave zero signs alone
        tol = replace(tol, signed_zero=spec.signed_zero and not is_complex(dtype))
    if manifest is not None:
        loosening = manifest.loosening(op or (spec.name if spec else ""), dtype)
        if loosening is not None:
            tol = replace(
                tol,
                atol=max(tol.atol, loosening.atol or 0.0),
                rtol=max(tol.rtol, loosening.rtol or 0.0),
                ulp=max(tol.ulp, loosening.ulp or 0),
                reason=loosening.reason,
                source="backend manifest",
            )
    return tol


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


@dataclass(frozen=True)
class Comparison:
    """The verdict and the statistics of one output comparison."""

    ok: bool
    message: str
    dtype: str
    shape: tuple[int, ...]
    total: int = 0
    mismatched: int = 0
    max_abs: float | int = 0.0
    """Largest |actual - expected| over finite pairs; an exact Python int for integer dtypes."""
    max_ulp: float = 0.0
    mae: float = 0.0
    snr_db: float | None = None
    worst_index: tuple[int, ...] | None = None
    expected_at_worst: Any = None
    actual_at_worst: Any = None
    atol: float = 0.0
    rtol: float = 0.0
    ulp: int = 0
    test: dict[str, Any] | None = None
    """The statistical test of a law (op spec ``values``, ``compare_outputs``): what was tested, the
    statistic, its p-value, the false-alarm rate and the sample size; None for value comparisons."""
    # Of ``mismatched`` (float and complex outputs; ``_verdict``): the elements of each kind of
    # violation the message counts. An element may break two rules; NUM's failure summary reads these.
    nan_mismatched: int = 0
    """Elements where exactly one of actual and expected is NaN."""
    inf_mismatched: int = 0
    """Elements where an infinity is expected and another value came, or an unexpected infinity came."""
    finite_mismatched: int = 0
    """Finite elements beyond the tolerance."""
    zero_sign_mismatched: int = 0
    """Zeros of the wrong sign (only where the tolerance compares the sign of zero)."""

    def stats(self) -> dict[str, Any]:
        """JSON-ready statistics (no verdict text, no per-kind counts: the message says them)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_STATS}  # asdict deep-copies every value
        if out["test"] is None:
            del out["test"]
        out["shape"] = list(self.shape)
        out["worst_index"] = list(self.worst_index) if self.worst_index is not None else None
        for key in ("max_abs", "max_ulp", "mae", "snr_db"):
            v = out[key]
            if isinstance(v, float) and not math.isfinite(v):
                out[key] = str(v)
        for key in ("expected_at_worst", "actual_at_worst"):
            out[key] = _jsonable(out[key])
        for key in ("max_abs", "expected_at_worst", "actual_at_worst"):
            # exact, and safe to carry between pytest-xdist workers: execnet refuses ints past 32 bits
            if isinstance(out[key], int) and not isinstance(out[key], bool) and not -(2**31) <= out[key] < 2**31:
                out[key] = str(out[key])
        return out


_NOT_STATS = frozenset({"message", "nan_mismatched", "inf_mismatched", "finite_mismatched", "zero_sign_mismatched"})


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (complex, np.complexfloating)):
        return repr(complex(v))  # "(1.5-infj)"
    f = float(v)
    if f == 0.0:
        return "-0.0" if math.copysign(1.0, f) < 0 else 0.0
    return f if math.isfinite(f) else str(f)


def _ordered_ints(x: np.ndarray) -> np.ndarray:
    """Map floats to integers whose difference is the ULP distance (sign-magnitude -> two's complement)."""
    width = x.dtype.itemsize
    int_type = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[width]
    bits = x.view(int_type).astype(np.int64)
    minimum = np.int64(-(2 ** (8 * width - 1)))
    return np.where(bits < 0, minimum - bits, bits)


def ulp_distance(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """|ordered(actual) - ordered(expected)| as float64; inf where the int64 difference overflows."""
    a, e = _ordered_ints(actual), _ordered_ints(expected)
    with np.errstate(over="ignore"):
        d = a - e
    overflow = ((a ^ e) < 0) & ((d ^ a) < 0)
    return np.where(overflow, np.inf, np.abs(d).astype(np.float64))


def _integer_comparison(actual: np.ndarray, expected: np.ndarray, base: dict) -> Comparison:
    """Exact verdict and exact statistics: differences of int64 extremes computed in Python ints."""
    total = int(expected.size)
    wrong = actual != expected
    mismatched = int(wrong.sum())
    if not mismatched:
        return Comparison(True, "exact", total=total, max_abs=0, **base)
    flat_a, flat_e = actual[wrong].tolist(), expected[wrong].tolist()
    diffs = [abs(int(x) - int(y)) for x, y in zip(flat_a, flat_e)]
    k = max(range(len(diffs)), key=diffs.__getitem__)
    worst = tuple(int(i) for i in np.argwhere(wrong)[k])
    return Comparison(
        ok=False,
        message=f"{mismatched}/{total} elements differ; worst at {list(worst)}: got {flat_a[k]!r}, expected {flat_e[k]!r}",
        total=total,
        mismatched=mismatched,
        max_abs=diffs[k],
        mae=sum(diffs) / total,
        worst_index=worst,
        expected_at_worst=expected[worst],
        actual_at_worst=actual[worst],
        **base,
    )


def _snr_db(signal: float, noise: float) -> float:
    """10 log10(signal / noise), whatever the sums overflowed to: garbage outputs (uninitialized
    float64 memory) square past the largest double, and log10(finite / inf) is a math domain error."""
    if noise == 0:
        return math.inf
    ratio = signal / noise  # float division: inf / inf is nan, finite / inf is 0.0
    if math.isnan(ratio):
        return math.nan
    if ratio == 0:
        return -math.inf
    return math.inf if math.isinf(ratio) else 10 * math.log10(ratio)


def compare(
    actual: np.ndarray, expected: np.ndarray, tol: Tolerance, bound: np.ndarray | None = None, also: np.ndarray | None = None
) -> Comparison:
    """Compare one output; the verdict follows ``tol`` (see Tolerance) and, for an op whose spec
    derives one, the per-element accumulation ``bound`` (``accumulation_bound``, added to
    atol + rtol |e|). ``also``: the other result eager's paths accept where they compute the op two
    ways (the reference's ``ALTERNATIVES``): an element equal to it, bit for bit, passes. The
    statistics are always full."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    try:
        dtype = dtype_name(expected.dtype)
    except ValueError:
        dtype = str(expected.dtype)
    base = dict(dtype=dtype, shape=tuple(expected.shape), atol=tol.atol, rtol=tol.rtol, ulp=tol.ulp)
    if actual.shape != expected.shape:
        return Comparison(False, f"shape {list(actual.shape)} != expected {list(expected.shape)}", **base)
    if actual.dtype != expected.dtype:
        return Comparison(False, f"dtype {actual.dtype} != expected {expected.dtype}", **base)
    total = int(expected.size)
    if total == 0:
        return Comparison(True, "empty", total=0, **base)
    if not (is_floating(dtype) or is_complex(dtype)):
        return _integer_comparison(actual, expected, base)
    if _same_bits(actual, expected):
        # What the full comparison below gives for identical bits (NaN payloads and zero signs
        # included), without its float64 copies and ULP arithmetic: most outputs of a passing
        # backend are bit for bit the reference's.
        worst = (0,) * expected.ndim
        return Comparison(
            ok=True, message="within tolerance", total=total, max_abs=0.0, max_ulp=0.0, mae=0.0, snr_db=math.inf,
            worst_index=worst, expected_at_worst=expected[worst], actual_at_worst=actual[worst], **base,
        )  # fmt: skip
    if bound is not None:
        bound = np.broadcast_to(np.asarray(bound, np.float64), expected.shape)
    if is_complex(dtype):
        return _complex_comparison(actual, expected, tol, base, bound)

    nan_bad, inf_bad, finite, within, ulps, zero_sign, diff, e = _element_rule(actual, expected, tol, bound)
    fin_bad = finite & ~within
    if bound is not None:  # an infinite bound: the summation order decides (accumulation_bound)
        undecided = np.isposinf(bound)
        nan_bad, inf_bad, fin_bad = nan_bad & ~undecided, inf_bad & ~undecided, fin_bad & ~undecided
    if also is not None and np.shape(also) == expected.shape and np.asarray(also).dtype == expected.dtype:
        other = _same_elements(actual, np.asarray(also))
        nan_bad, inf_bad, fin_bad, zero_sign = (m & ~other for m in (nan_bad, inf_bad, fin_bad, zero_sign))
        within = within & ~other  # the bias test judges the elements held to the expected value
    bad = nan_bad | inf_bad | fin_bad | zero_sign
    # The worst element: a violated one if any, the largest |error| otherwise.
    score = np.where(bad, np.inf, diff)
    worst = np.unravel_index(int(np.argmax(score)), expected.shape)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        signal = float(np.sum(np.where(finite, e, 0.0) ** 2))
        noise = float(np.sum(diff**2))
        snr = _snr_db(signal, noise)
    finite_bad = f"beyond atol={tol.atol:g} rtol={tol.rtol:g} ulp={tol.ulp}" + (" and the accumulation bound" if bound is not None else "")
    cmp = _verdict(actual, expected, worst, (nan_bad, inf_bad, fin_bad, zero_sign), finite_bad, tol, diff, ulps, snr, base, _show)
    # the bias test judges the elements held to a relative rule: below atol (the underflow range)
    # a flush to zero is one-sided by nature and within tolerance
    judged = finite & within & (np.abs(e) > tol.atol)
    if tol.bias and bound is not None:
        # where the computation's own error may reach half an ULP of the output, its direction is the
        # computation's (one rounding of a shared row sum shifts a whole row), not the output rounding's
        with np.errstate(invalid="ignore"):
            judged &= bound <= unit_roundoff(dtype_name(expected.dtype)) * np.abs(e) / 2
    return _biased(cmp, actual, expected, judged) if tol.bias else cmp


def _biased(cmp: Comparison, actual: np.ndarray, expected: np.ndarray, judged: np.ndarray) -> Comparison:
    """``cmp`` failed where the elements within tolerance that differ from the expected ones lean one
    way (``bias_test``), else ``cmp`` with the test attached."""
    test = bias_test(actual[judged], expected[judged])
    if test is None:
        return cmp
    if test["p_value"] >= FALSE_ALARM or not cmp.ok:
        return replace(cmp, test=test)
    return replace(cmp, ok=False, mismatched=test["leaning"], test=test, message=f"{test['leaning']}/{cmp.total} elements "
                   f"{test['detail']}: a systematic bias, not rounding (p = {test['p_value']:.3g} < false-alarm "
                   f"{FALSE_ALARM:g}); truncated or directed rounding?")


def bias_test(actual: np.ndarray, expected: np.ndarray) -> dict | None:
    """Whether the elements of ``actual`` that differ from ``expected`` lean one way: above vs below
    it, and toward zero vs away from it. A correctly rounding kernel differs from the reference only
    where a near-tie went the other way, equally often each way (each direction Bernoulli(1/2));
    one that truncates lands below |e| on about half of all elements. Both counts by the exact
    binomial test (scipy.stats.binomtest, two-sided), two tests at once (Bonferroni) at
    ``FALSE_ALARM``. None when nothing differs."""
    from scipy import stats

    a, e = actual.astype(np.float64).reshape(-1), expected.astype(np.float64).reshape(-1)
    differ = a != e
    m = int(differ.sum())
    if m == 0:
        return None
    a, e = a[differ], e[differ]
    counts = {"above": int((a > e).sum()), "toward zero": int((np.abs(a) < np.abs(e)).sum())}
    p_values = {k: float(stats.binomtest(c, m, 0.5).pvalue) for k, c in counts.items()}
    kind = min(p_values, key=p_values.__getitem__)
    leaning = counts[kind] if 2 * counts[kind] >= m else m - counts[kind]
    where = {"above": ("above the expected value", "below the expected value"),
             "toward zero": ("nearer zero than the expected value", "farther from zero than the expected value")}[kind]
    detail = where[0] if 2 * counts[kind] >= m else where[1]
    return {"test": f"sign of the differing elements' errors: {kind} (exact binomial, two tests)", "statistic": counts[kind],
            "p_value": min(1.0, 2 * p_values[kind]), "false_alarm": FALSE_ALARM, "n": m, "leaning": leaning,
            "detail": f"of {m} that differ are {detail}"}  # fmt: skip


def _verdict(actual, expected, worst, masks, finite_bad: str, tol: Tolerance, diff, ulps, snr, base, show) -> Comparison:
    """The Comparison of a float or complex output from its per-element violations ``masks`` (NaN,
    infinity, finite, zero sign), |error| ``diff``, ``ulps`` and SNR; ``show`` prints one element."""
    nan_bad, inf_bad, fin_bad, zero_sign = masks
    bad = nan_bad | inf_bad | fin_bad | zero_sign
    mismatched, total = int(bad.sum()), int(expected.size)
    by_kind = [int(m.sum()) for m in masks]
    message = "within tolerance"
    if mismatched:
        kinds = []
        for count, what in zip(by_kind, (
            "NaN mismatches",
            "infinity mismatches",
            finite_bad + (" or off by 100%+" if tol.relative_floor else ""),
            "zeros of the wrong sign",
        )):
            if count:
                kinds.append(f"{count} {what}")
        message = (
            f"{mismatched}/{total} elements differ ({', '.join(kinds)}); worst at {[int(i) for i in worst]}: "
            f"got {show(actual[worst])}, expected {show(expected[worst])}"
        )
    return Comparison(
        ok=mismatched == 0,
        message=message,
        total=total,
        mismatched=mismatched,
        max_abs=float(diff.max()),
        max_ulp=float(ulps.max()),
        mae=float(diff.mean()),
        snr_db=snr,
        worst_index=tuple(int(i) for i in worst),
        expected_at_worst=expected[worst],
        actual_at_worst=actual[worst],
        nan_mismatched=by_kind[0],
        inf_mismatched=by_kind[1],
        finite_mismatched=by_kind[2],
        zero_sign_mismatched=by_kind[3],
        **base,
    )


def _show(v: Any) -> str:
    """A float as repr shows it, with the sign of zero and enough digits to tell neighbours apart."""
    f = float(v)
    return repr(f) if math.isfinite(f) and f != 0 else ("-0.0" if f == 0 and math.copysign(1, f) < 0 else repr(f))


def _same_elements(actual: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Per element of two float arrays of one dtype: equal, with the sign of zero, or both NaN."""
    a, o = actual.astype(np.float64), other.astype(np.float64)
    return ((a == o) & (np.signbit(a) == np.signbit(o))) | (np.isnan(a) & np.isnan(o))


def _same_bits(actual: np.ndarray, expected: np.ndarray) -> bool:
    """Whether two float arrays of one dtype and shape hold the same bits, element by element."""
    if expected.dtype.itemsize == 16:  # complex128: two 64-bit halves per element
        actual, expected = np.ascontiguousarray(actual).reshape(-1), np.ascontiguousarray(expected).reshape(-1)
    unsigned = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.uint64}[expected.dtype.itemsize]
    return bool(np.array_equal(actual.view(unsigned), expected.view(unsigned)))


def _element_rule(actual: np.ndarray, expected: np.ndarray, tol: Tolerance, bound: np.ndarray | None = None):
    """The float rule per element of two float arrays: (nan_bad, inf_bad, finite, within, ulps,
    zero_sign, |a - e| where finite, expected in float64). ``within``: by ``ulp`` or by
    atol + rtol * |e| + ``bound`` (with the relative floor); NaN must meet NaN, an infinity its equal."""
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    a_nan, e_nan = np.isnan(a), np.isnan(e)
    a_inf, e_inf = np.isinf(a), np.isinf(e)
    finite = ~(e_nan | e_inf | a_nan | a_inf)
    ulps = ulp_distance(_as_binary(actual), _as_binary(expected))
    ulps = np.where(finite | (a == e), ulps, np.inf)
    ulps = np.where(e_nan & a_nan, 0.0, ulps)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(finite, np.abs(a - e), 0.0)
        within = diff <= tol.atol + tol.rtol * np.abs(e) + (0.0 if bound is None else bound)
        if tol.relative_floor:
            within &= ~((e != 0) & (diff >= np.abs(e)))
    within |= ulps <= tol.ulp
    zero_sign = (a == 0) & (e == 0) & (np.signbit(a) != np.signbit(e)) if tol.signed_zero else np.zeros_like(finite)
    return a_nan != e_nan, (e_inf & (a != e)) | (a_inf & ~e_inf), finite, within, ulps, zero_sign, diff, e


def _as_binary(x: np.ndarray) -> np.ndarray:
    """bfloat16 arrays viewed through a NumPy-native dtype of the same width, for bit tricks."""
    if x.dtype == np.dtype(ml_dtypes.bfloat16):
        return x.view(np.float16)  # same width; only the bits matter for ULP distance
    return x


def _complex_comparison(actual: np.ndarray, expected: np.ndarray, tol, base: dict, bound: np.ndarray | None = None) -> Comparison:
    """Complex outputs: NaN and infinities per part, in position (and sign); an element whose four
    parts are finite passes when each part is within ``ulp`` ULP of its expected part, or when
    ``|a - e| <= atol + rtol * |e|`` in the complex modulus (with the relative floor: never when
    ``|a - e| >= |e| > 0``); the finite part of an element whose other part is not finite is held
    to the float rule alone. The modulus, not each part, because complex arithmetic is accurate
    normwise only: a product's real part ac - bd cancels, so eager's vectorized mul (the products as
    written) and its FMA-contracted scalar tail differ in that part by far more than its ULP while
    both are within an ULP of |e| (see specs/README.md). Statistics are of the modulus |a - e|;
    max_ulp of the parts."""
    part = np.dtype(component_dtype(dtype_name(expected.dtype)))
    parts = []  # per part: (nan_bad, inf_bad, finite, within by the float rule, ulps, zero_sign)
    for pa, pe in ((actual.real, expected.real), (actual.imag, expected.imag)):
        pa, pe = np.ascontiguousarray(pa, dtype=part), np.ascontiguousarray(pe, dtype=part)
        parts.append(_element_rule(pa, pe, tol)[:6])
    (re_nan, re_inf, re_fin, re_ok, re_ulp, re_zero), (im_nan, im_inf, im_fin, im_ok, im_ulp, im_zero) = parts
    a, e = actual.astype(np.complex128), expected.astype(np.complex128)
    finite = re_fin & im_fin
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(finite, np.abs(a - e), 0.0)
        magnitude = np.where(finite, np.abs(e), 0.0)
        normwise = diff <= tol.atol + tol.rtol * magnitude + (0.0 if bound is None else bound)
        if tol.relative_floor:
            normwise &= ~((magnitude != 0) & (diff >= magnitude))
    partwise = (re_ok | ~re_fin) & (im_ok | ~im_fin)  # a non-finite part is judged by the NaN/Inf rules
    nan_bad, inf_bad, zero_sign = re_nan | im_nan, re_inf | im_inf, re_zero | im_zero
    fin_bad = (finite & ~(partwise | normwise)) | (~finite & ~partwise)
    bad = nan_bad | inf_bad | fin_bad | zero_sign
    worst = np.unravel_index(int(np.argmax(np.where(bad, np.inf, diff))), expected.shape)
    ulps = np.maximum(re_ulp, im_ulp)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        snr = _snr_db(float(np.sum(magnitude**2)), float(np.sum(diff**2)))
    finite_bad = f"beyond atol={tol.atol:g} rtol={tol.rtol:g} (modulus) and ulp={tol.ulp} (parts)"
    return _verdict(actual, expected, worst, (nan_bad, inf_bad, fin_bad, zero_sign), finite_bad, tol, diff, ulps, snr, base,
                    lambda v: repr(complex(v)))


# ---------------------------------------------------------------------------------------------
# Outputs judged by law (op spec ``values``): random and undefined values


FALSE_ALARM = 1e-8
"""The false-alarm rate of every statistical test of a law: the probability that a correct sample
fails it. A NUM check of a random op runs a few dozen (one per case for each of eager, the reference
and the backend), so a check false-alarms with probability below 1e-6, and a full certification,
with about twenty random op x dtype checks, below 1e-5. Every test is exact at every sample size,
from scipy.stats: Kolmogorov-Smirnov by the exact distribution of its statistic (kstwo), binomial
and hypergeometric counts by their exact tails (binomtest, hypergeom), several tests at once by
Bonferroni's correction."""


def compare_outputs(spec: OpSpec | None, call, actual, expected, tolerances, bounds=None, alternatives=None) -> list[Comparison]:
    """Each output of ``call`` against its expected one, the way the op spec's ``values`` says
    (conformance.specs.VALUE_MODES). "reference": ``compare``, value by value, with each output's
    accumulation bound from ``bounds`` and the other result eager's paths accept from ``alternatives``
    (None, or None per output, where there is none). Otherwise ``expected``
    says only the shapes and dtypes (and, for "prefix", the defined values), and the values are held
    to what the op guarantees for every draw: neither eager's values nor the reference's can be
    another run's (a backend's random stream never equals eager's)."""
    mode = spec.values if spec is not None else "reference"
    if mode == "reference":
        out = []
        for i, (a, e, t) in enumerate(zip(actual, expected, tolerances)):
            why = undefined_output(spec, call, i)
            if why is None:
                b = bounds[i] if bounds is not None and i < len(bounds) else None
                alt = alternatives[i] if alternatives is not None and i < len(alternatives) else None
                out.append(compare(a, e, t, b if b is not None and np.shape(b) == np.shape(e) else None, alt))
            else:
                a, e = np.asarray(a), np.asarray(e)
                # neither its values nor its size: eager's CUDA batch norm returns save_mean sized [C] in
                # eval mode where its CPU kernel returns [0]; only the dtype is the op's
                if a.dtype != e.dtype:
                    out.append(Comparison(False, f"dtype {a.dtype} != expected {e.dtype} ({why})", **_base(e, t)))
                else:
                    out.append(Comparison(True, f"dtype matches; size {list(a.shape)} and values not compared ({why})",
                                          total=int(e.size), **_base(e, t)))
        return out
    return _LAWS[mode]([np.asarray(a) for a in actual], [np.asarray(e) for e in expected], list(tolerances), call)


def _base(expected: np.ndarray, tol: Tolerance) -> dict:
    try:
        dtype = dtype_name(expected.dtype)
    except ValueError:
        dtype = str(expected.dtype)
    return dict(dtype=dtype, shape=tuple(expected.shape), atol=tol.atol, rtol=tol.rtol, ulp=tol.ulp)


def _layout_differs(actual: np.ndarray, expected: np.ndarray, tol: Tolerance) -> Comparison | None:
    """The failing comparison of an output of the wrong shape or dtype, None when both match."""
    base = _base(expected, tol)
    if actual.shape != expected.shape:
        return Comparison(False, f"shape {list(actual.shape)} != expected {list(expected.shape)}", **base)
    if actual.dtype != expected.dtype:
        return Comparison(False, f"dtype {actual.dtype} != expected {expected.dtype}", **base)
    return None


def undefined_output(spec: OpSpec | None, call, index: int) -> str | None:
    """Why output ``index`` of ``call`` has no defined values, or None when it has: the op spec's
    ``defined_outputs`` names the attribute values under which eager defines each output (an
    attribute the call leaves out takes its schema default; an empty table, ``false`` in the spec,
    defines it for no call)."""
    rules = spec.defined_outputs if spec is not None else ()
    if call is None or index >= len(rules) or rules[index] is None:
        return None
    if not rules[index]:
        return "values undefined for every call (op spec defined_outputs: false)"
    from conformance.programs import _resolve_op, _schema_args

    given = arguments(call)
    defaults = {a.name: a.default for a in _schema_args(_resolve_op(call.op)) if a.has_default}
    for key, allowed in rules[index].items():
        value = given.get(key, defaults.get(key))
        if value not in allowed:
            return f"values undefined for {key}={value!r}: defined for {key} in {list(allowed)} (op spec defined_outputs)"
    return None


def arguments(call) -> dict[str, Any]:
    """The call's arguments by their ATen schema names, tensors as NumPy arrays (the schema's
    defaults for those it leaves out)."""
    from conformance.programs import _resolve_op, _schema_args

    args, kwargs = call.numpy_args()
    schema = _schema_args(_resolve_op(call.op))
    bound = {a.name: a.default for a in schema if a.has_default}
    bound.update(zip((a.name for a in schema), args))
    bound.update(kwargs)
    return bound


def _undefined(actual, expected, tolerances, call) -> list[Comparison]:
    return [
        _layout_differs(a, e, t) or Comparison(True, "shape and dtype match (values undefined)", total=int(e.size), **_base(e, t))
        for a, e, t in zip(actual, expected, tolerances)
    ]


def _prefix(actual, expected, tolerances, call) -> list[Comparison]:
    """resize_: the elements the op's first tensor argument had keep their values, in flattened
    order; the elements past them are undefined (ATen leaves grown storage uninitialized)."""
    tensors = call.tensors()
    defined = int(tensors[0].value.size) if tensors else 0
    out = []
    for a, e, t in zip(actual, expected, tolerances):
        differs = _layout_differs(a, e, t)
        if differs is not None:
            out.append(differs)
            continue
        k = min(defined, int(e.size))
        cmp = compare(a.reshape(-1)[:k], e.reshape(-1)[:k], t)
        out.append(replace(cmp, message=f"first {k} of {e.size} elements, flattened (the rest are undefined): {cmp.message}"))
    return out


def _resolution(dtype: np.dtype) -> float:
    """The unit roundoff of a float dtype (2**-11 for float16, 2**-8 for bfloat16): the widest gap
    between neighbours in [0.5, 1), so rounding a uniform sample into the dtype (or drawing it on a
    grid of that step, as ATen does) moves its CDF by at most this much; a normal sample's CDF moves
    by at most max |x| phi(x) = 0.242 times it."""
    return float(ml_dtypes.finfo(dtype).eps) / 2


def _ks(x: np.ndarray, cdf, resolution: float) -> tuple[float, float]:
    """The Kolmogorov-Smirnov statistic sup |F_n - F| of sample ``x`` against the continuous CDF
    ``cdf`` (scipy.stats.kstest), and its p-value with ``resolution`` of it set aside for the dtype's
    rounding (scipy.stats.kstwo, the exact distribution of the two-sided statistic)."""
    from scipy import stats

    x = x.reshape(-1)
    statistic = float(stats.kstest(x, cdf).statistic)
    return statistic, float(stats.kstwo.sf(max(0.0, statistic - resolution), x.size))


def _normal_cdf(x: np.ndarray) -> np.ndarray:
    from scipy import stats

    return stats.norm.cdf(np.asarray(x, np.float64))


def _sample_law(name: str, admits, admitted: str, cdf):
    """A law of one output whose elements are independent draws from one distribution: every value
    in its support, and the sample that distribution by Kolmogorov-Smirnov."""

    def check(actual, expected, tolerances, call) -> list[Comparison]:
        a, e, t = actual[0], expected[0], tolerances[0]
        base = _base(e, t)
        differs = _layout_differs(a, e, t)
        n = int(e.size)
        if differs is not None or n == 0:
            return [differs or Comparison(True, "empty", **base)]
        x = a.astype(np.float64)
        with np.errstate(invalid="ignore"):
            outside = ~admits(x)
        if outside.any():
            worst = np.unravel_index(int(np.argmax(outside)), e.shape)
            return [Comparison(
                False, f"{int(outside.sum())}/{n} values outside {admitted} (the support of {name}); first at "
                f"{[int(i) for i in worst]}: got {_show(a[worst])}", total=n, mismatched=int(outside.sum()),
                worst_index=tuple(int(i) for i in worst), actual_at_worst=a[worst], **base,
            )]  # fmt: skip
        resolution = _resolution(e.dtype)
        statistic, p_value = _ks(x, cdf, resolution)
        test = {"test": f"Kolmogorov-Smirnov against {name}", "statistic": statistic, "p_value": p_value,
                "false_alarm": FALSE_ALARM, "n": n}  # fmt: skip
        detail = f"(n = {n}; {resolution:.2g} of the statistic set aside for {base['dtype']}'s resolution)"
        if p_value < FALSE_ALARM:
            return [Comparison(False, f"KS statistic {statistic:.4g}: p = {p_value:.3g} < false-alarm {FALSE_ALARM:g} {detail}: "
                               f"not {name}", total=n, mismatched=n, test=test, **base)]
        return [Comparison(True, f"{name} by KS: statistic {statistic:.4g}, p = {p_value:.3g} {detail}", total=n, test=test, **base)]

    return check


def _permutation(actual, expected, tolerances, call) -> list[Comparison]:
    """randperm(n): the values are 0..n-1, each once; and, for n >= 64, the position of a value is
    independent of the value: positions and values cut into k blocks (k = 2..16, at least 64
    elements a block), every block of positions holds each block of values as often as a uniform
    permutation does (its count is hypergeometric: scipy.stats.hypergeom, two-sided), tested on all
    k * k counts at once (Bonferroni)."""
    from scipy import stats

    a, e, t = actual[0], expected[0], tolerances[0]
    base = _base(e, t)
    differs = _layout_differs(a, e, t)
    n = int(e.size)
    if differs is not None or n == 0:
        return [differs or Comparison(True, "empty", **base)]
    w = a.reshape(-1).astype(np.float64)
    with np.errstate(invalid="ignore"):
        outside = ~((w >= 0) & (w < n) & (w == np.floor(w)))
    if outside.any():
        first = int(np.argmax(outside))
        return [Comparison(False, f"{int(outside.sum())}/{n} values are not integers in 0..{n - 1}; first at [{first}]: "
                           f"got {a.reshape(-1)[first]!r}", total=n, mismatched=int(outside.sum()), **base)]
    counts = np.bincount(w.astype(np.int64), minlength=n)
    if (counts != 1).any():
        repeated, missing = np.flatnonzero(counts > 1), np.flatnonzero(counts == 0)
        return [Comparison(
            False, f"not a permutation of 0..{n - 1}: {len(repeated)} value(s) repeated (first {int(repeated[0])}, "
            f"{int(counts[repeated[0]])} times), {len(missing)} missing (first {int(missing[0])})",
            total=n, mismatched=int(len(missing)), **base,
        )]  # fmt: skip
    if n < 64:
        return [Comparison(True, f"a permutation of 0..{n - 1} (n < 64: too few for a test of uniformity)", total=n, **base)]
    k = max(2, min(16, math.isqrt(n // 64)))
    block = np.arange(n) * k // n
    table = np.bincount(block * k + w.astype(np.int64) * k // n, minlength=k * k).reshape(k, k)
    sizes = np.bincount(block, minlength=k)
    draws, share = sizes[:, None], sizes[None, :]
    law = stats.hypergeom(n, share, draws)  # cell (i, j): draws[i] positions taking from sizes[j] values of n
    p_cells = np.minimum(1.0, 2 * np.minimum(law.cdf(table), law.sf(table - 1)))
    i, j = np.unravel_index(int(np.argmin(p_cells)), p_cells.shape)
    p_value = min(1.0, float(p_cells[i, j]) * k * k)
    test = {"test": f"uniform permutation: {k} x {k} block counts (hypergeometric, Bonferroni)",
            "statistic": int(table[i, j]), "p_value": p_value, "false_alarm": FALSE_ALARM, "n": n}  # fmt: skip
    cell = (f"positions block {i} of {k} holds {int(table[i, j])} values of values block {j} "
            f"(a uniform permutation: {float(draws[i, 0] * share[0, j] / n):.1f} on average)")  # fmt: skip
    if p_value < FALSE_ALARM:
        return [Comparison(False, f"a permutation, but not a uniform one: {cell}; p = {p_value:.3g} < false-alarm "
                           f"{FALSE_ALARM:g}", total=n, mismatched=n, test=test, **base)]
    return [Comparison(True, f"a uniform permutation: least likely block count p = {p_value:.3g}", total=n, test=test, **base)]


def dropout_output(input: np.ndarray, mask: np.ndarray, p: float) -> np.ndarray:  # noqa: A002 - ATen's name
    """input * mask * scale as eager's native_dropout computes it (measured, torch 2.13 CPU): scale =
    1/(1-p) in double (0 for p = 1) rounded to the input's dtype (through float32 for the half types, as
    c10::Half and c10::BFloat16 are built from a float), the product rounded once; a dropped element is
    input * 0 (-0.0 for a negative input, NaN for an infinite one). Not input / (1-p): at p = 0.3 that
    differs from eager in one float16 element in seven."""
    compute = np.float64 if input.dtype == np.float64 else np.float32
    scale = np.asarray(0.0 if p == 1 else 1.0 / (1.0 - p), np.float64).astype(compute).astype(input.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        return (input.astype(compute) * mask.astype(compute) * scale.astype(compute)).astype(input.dtype)


def _dropout(actual, expected, tolerances, call) -> list[Comparison]:
    """native_dropout(input, p, train) -> (output, mask). Without training (train False) output is
    input and mask all true; with it (train True or None), output is ``dropout_output`` of the mask
    returned, and the mask drops each element with probability p: all kept for p = 0, none for
    p = 1, else its dropped count binomial(n, p), by the exact binomial test (scipy.stats.binomtest)."""
    from scipy import stats

    given = arguments(call)
    x, p, train = given["input"], float(given["p"]), given.get("train")
    (out, mask), (e_out, e_mask), (t_out, t_mask) = actual, expected, tolerances
    differs = [_layout_differs(out, e_out, t_out), _layout_differs(mask, e_mask, t_mask)]
    if any(differs):
        return [d or Comparison(True, "not judged: the other output has the wrong shape or dtype", **_base(e, t))
                for d, e, t in zip(differs, expected, tolerances)]  # fmt: skip
    training = train is None or bool(train)
    keep = mask.astype(bool)
    want = dropout_output(x, keep, p) if training else np.array(x, copy=True)
    cmp = compare(out, want, t_out)
    law = "input * mask * 1/(1-p) for the mask returned" if training else "input (train=False)"
    results = [replace(cmp, message=f"against {law}: {cmp.message}")]
    base = _base(e_mask, t_mask)
    n = int(e_mask.size)
    dropped = n - int(np.count_nonzero(keep))
    rate = p if training else 0.0
    if n == 0:
        return [*results, Comparison(True, "empty", **base)]
    p_value = float(stats.binomtest(dropped, n, rate).pvalue)
    test = {"test": f"binomial: dropped count of {n} at p = {rate:g} (exact, two-sided)", "statistic": dropped,
            "p_value": p_value, "false_alarm": FALSE_ALARM, "n": n}  # fmt: skip
    what = f"{dropped} of {n} elements dropped ({dropped / n:.4g}) where p = {rate:g}{'' if training else ' (train=False)'}"
    if p_value < FALSE_ALARM:
        results.append(Comparison(False, f"{what}: p = {p_value:.3g} < false-alarm {FALSE_ALARM:g}", total=n,
                                  mismatched=abs(dropped - round(n * rate)), test=test, **base))
    else:
        results.append(Comparison(True, f"{what}: p = {p_value:.3g}", total=n, test=test, **base))
    return results


_LAWS = {
    "undefined": _undefined,
    "prefix": _prefix,
    "uniform": _sample_law("U[0,1)", lambda x: (x >= 0) & (x < 1), "[0, 1)", lambda x: x),
    "normal": _sample_law("N(0,1)", np.isfinite, "the finite numbers", _normal_cdf),
    "permutation": _permutation,
    "dropout": _dropout,
}
"""The law of each op spec ``values`` mode but "reference" (conformance.specs.VALUE_MODES)."""
