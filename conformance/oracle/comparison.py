"""Comparing one output with its expected value: the verdict under a tolerance (and a derived
bound), and its statistics (max abs error, max ULP, MAE, SNR, the worst element)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

import ml_dtypes
import numpy as np

from conformance.api.scalar_type import component_dtype, dtype_name, is_complex, is_floating
from conformance.oracle.statistics import FALSE_ALARM, bias_test
from conformance.oracle.tolerances import unit_roundoff
from conformance.specs import Tolerance

__all__ = ["Comparison", "compare", "ulp_distance"]


@dataclass(frozen=True)
class Comparison:
    """The verdict and the statistics of one output comparison (``compare``, or a law's test):
    ``stats`` is what a report carries of it."""

    ok: bool
    """The verdict: the output agrees with the expected one."""
    message: str
    """The verdict in words: what differs, where, and by how much."""
    dtype: str
    """The expected output's dtype."""
    shape: tuple[int, ...]
    """The expected output's shape."""
    total: int = 0
    """Elements compared."""
    mismatched: int = 0
    """Elements that break the rule (all of them when a law's test fails)."""
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
    differs = layout_differs(actual, expected, tol)
    if differs is not None:
        return differs
    base = base_fields(expected, tol)
    dtype = base["dtype"]
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
    cmp = _verdict(actual, expected, worst, (nan_bad, inf_bad, fin_bad, zero_sign), finite_bad, tol, diff, ulps, snr, base, show_float)
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


def show_float(v: Any) -> str:
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


def base_fields(expected: np.ndarray, tol: Tolerance) -> dict:
    """The fields every Comparison of an output expected as ``expected`` under ``tol`` carries."""
    try:
        dtype = dtype_name(expected.dtype)
    except ValueError:
        dtype = str(expected.dtype)
    return dict(dtype=dtype, shape=tuple(expected.shape), atol=tol.atol, rtol=tol.rtol, ulp=tol.ulp)


def layout_differs(actual: np.ndarray, expected: np.ndarray, tol: Tolerance) -> Comparison | None:
    """The failing comparison of an output of the wrong shape or dtype, None when both match."""
    base = base_fields(expected, tol)
    if actual.shape != expected.shape:
        return Comparison(False, f"shape {list(actual.shape)} != expected {list(expected.shape)}", **base)
    if actual.dtype != expected.dtype:
        return Comparison(False, f"dtype {actual.dtype} != expected {expected.dtype}", **base)
    return None
