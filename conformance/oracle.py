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
from dataclasses import dataclass, fields, replace
from typing import Any

import ml_dtypes
import numpy as np

from conformance.api.scalar_type import dtype_name, is_floating
from conformance.specs import OpSpec, Tolerance

DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    # torch.testing.assert_close's defaults for the half and single types (torch/testing/_comparison.py),
    # with a relative floor (see Tolerance) so that atol cannot pass a result that is wholly wrong.
    "float16": Tolerance(atol=1e-5, rtol=1e-3, ulp=1, reason="torch.testing default"),
    "bfloat16": Tolerance(atol=1e-5, rtol=1.6e-2, ulp=1, reason="torch.testing default"),
    "float32": Tolerance(atol=1e-5, rtol=1.3e-6, ulp=1, reason="torch.testing default"),
    # torch.testing allows 1e-7 for float64, which a computation done in float32 (relative error
    # ~6e-8) passes. 1e-12 is ~4,500 ULP: far above libm differences, far below float32's error.
    "float64": Tolerance(atol=1e-12, rtol=1e-12, ulp=1, reason="float64 default: fails a float32 computation"),
}
EXACT = Tolerance(atol=0.0, rtol=0.0, reason="integers and bools compare exactly")
CORRECTLY_ROUNDED = "correctly rounded in IEEE arithmetic (op spec exact = true): bit for bit"


def tolerance_for(spec: OpSpec | None, dtype: str, manifest=None, op: str | None = None) -> Tolerance:
    """The tolerance for results of ``dtype``: default, then op spec, then the backend's loosening."""
    if not is_floating(dtype):
        return EXACT
    tol = DEFAULT_TOLERANCES[dtype]
    if spec is not None:
        if dtype in spec.tolerances:
            tol = spec.tolerances[dtype]
        elif spec.exact:
            tol = Tolerance(atol=0.0, rtol=0.0, ulp=0, reason=CORRECTLY_ROUNDED, source=f"op spec {spec.name}")
        tol = replace(tol, relative_floor=not spec.accumulates, signed_zero=spec.signed_zero)
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

    def stats(self) -> dict[str, Any]:
        """JSON-ready statistics (no verdict text)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "message"}  # asdict deep-copies every value
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


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    f = float(v)
    if f == 0.0:
        return "-0.0" if math.copysign(1.0, f) < 0 else 0.0
    return f if math.isfinite(f) else str(f)


def _ordered_ints(x: np.ndarray) -> np.ndarray:
    """Map floats to integers whose difference is the ULP distance (sign-magnitude -> two's complement)."""
    width = x.dtype.itemsize
    int_type = {2: np.int16, 4: np.int32, 8: np.int64}[width]
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


def compare(actual: np.ndarray, expected: np.ndarray, tol: Tolerance) -> Comparison:
    """Compare one output; the verdict follows ``tol`` (see Tolerance), the statistics are always full."""
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
    if not is_floating(dtype):
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
        within = diff <= tol.atol + tol.rtol * np.abs(e)
        if tol.relative_floor:
            within &= ~((e != 0) & (diff >= np.abs(e)))
    within |= ulps <= tol.ulp
    zero_sign = (a == 0) & (e == 0) & (np.signbit(a) != np.signbit(e)) if tol.signed_zero else np.zeros_like(finite)
    nan_bad = a_nan != e_nan
    inf_bad = (e_inf & (a != e)) | (a_inf & ~e_inf)
    fin_bad = finite & ~within
    bad = nan_bad | inf_bad | fin_bad | zero_sign
    mismatched = int(bad.sum())
    # The worst element: a violated one if any, the largest |error| otherwise.
    score = np.where(bad, np.inf, diff)
    worst = np.unravel_index(int(np.argmax(score)), expected.shape)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        signal = float(np.sum(np.where(finite, e, 0.0) ** 2))
        noise = float(np.sum(diff**2))
        snr = _snr_db(signal, noise)
    if mismatched:
        kinds = []
        for count, what in (
            (int(nan_bad.sum()), "NaN mismatches"),
            (int(inf_bad.sum()), "infinity mismatches"),
            (int(fin_bad.sum()), f"beyond atol={tol.atol:g} rtol={tol.rtol:g} ulp={tol.ulp}"
             + (" or off by 100%+" if tol.relative_floor else "")),
            (int(zero_sign.sum()), "zeros of the wrong sign"),
        ):
            if count:
                kinds.append(f"{count} {what}")
        message = (
            f"{mismatched}/{total} elements differ ({', '.join(kinds)}); worst at {[int(i) for i in worst]}: "
            f"got {_show(actual[worst])}, expected {_show(expected[worst])}"
        )
    else:
        message = "within tolerance"
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
        **base,
    )


def _show(v: Any) -> str:
    """A float as repr shows it, with the sign of zero and enough digits to tell neighbours apart."""
    f = float(v)
    return repr(f) if math.isfinite(f) and f != 0 else ("-0.0" if f == 0 and math.copysign(1, f) < 0 else repr(f))


def _same_bits(actual: np.ndarray, expected: np.ndarray) -> bool:
    """Whether two float arrays of one dtype and shape hold the same bits, element by element."""
    unsigned = {2: np.uint16, 4: np.uint32, 8: np.uint64}[expected.dtype.itemsize]
    return bool(np.array_equal(actual.view(unsigned), expected.view(unsigned)))


def _as_binary(x: np.ndarray) -> np.ndarray:
    """bfloat16 arrays viewed through a NumPy-native dtype of the same width, for bit tricks."""
    if x.dtype == np.dtype(ml_dtypes.bfloat16):
        return x.view(np.float16)  # same width; only the bits matter for ULP distance
    return x
