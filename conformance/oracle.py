"""Deciding whether two results agree, and measuring by how much.

Tolerances are layered and live only here: the dtype default (torch.testing's
assert_close defaults), then the op spec's override, then a loosening the
backend declares in its manifest. The chosen tolerance says where it came from,
so a report can print it with its reason.

Rules: shapes and dtypes must match exactly; integers and bools exactly; for
floating point, NaN must be where NaN is expected, infinities must match in
position and sign, and finite values must satisfy |a - e| <= atol + rtol * |e|.
Every comparison records max abs error, max ULP distance, MAE, SNR and the
worst index, pass or fail.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import ml_dtypes
import numpy as np

from conformance.api.scalar_type import dtype_name, is_floating
from conformance.specs import OpSpec, Tolerance

DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    # torch.testing.assert_close defaults (torch/testing/_comparison.py)
    "float16": Tolerance(atol=1e-5, rtol=1e-3, reason="torch.testing default"),
    "bfloat16": Tolerance(atol=1e-5, rtol=1.6e-2, reason="torch.testing default"),
    "float32": Tolerance(atol=1e-5, rtol=1.3e-6, reason="torch.testing default"),
    "float64": Tolerance(atol=1e-7, rtol=1e-7, reason="torch.testing default"),
}
EXACT = Tolerance(atol=0.0, rtol=0.0, reason="integers and bools compare exactly")


def tolerance_for(spec: OpSpec | None, dtype: str, manifest=None, op: str | None = None) -> Tolerance:
    """The tolerance for results of ``dtype``: default, then op spec, then the backend's loosening."""
    if not is_floating(dtype):
        return EXACT
    tol = DEFAULT_TOLERANCES[dtype]
    if spec is not None and dtype in spec.tolerances:
        tol = spec.tolerances[dtype]
    if manifest is not None:
        loosening = manifest.loosening(op or (spec.name if spec else ""), dtype)
        if loosening is not None and (loosening.atol is not None or loosening.rtol is not None):
            tol = Tolerance(
                atol=max(tol.atol, loosening.atol or 0.0),
                rtol=max(tol.rtol, loosening.rtol or 0.0),
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
    max_abs: float = 0.0
    max_ulp: float = 0.0
    mae: float = 0.0
    snr_db: float | None = None
    worst_index: tuple[int, ...] | None = None
    expected_at_worst: Any = None
    actual_at_worst: Any = None
    atol: float = 0.0
    rtol: float = 0.0

    def stats(self) -> dict[str, Any]:
        """JSON-ready statistics (no verdict text)."""
        out = asdict(self)
        out.pop("message")
        out["shape"] = list(self.shape)
        out["worst_index"] = list(self.worst_index) if self.worst_index is not None else None
        for key in ("max_abs", "max_ulp", "mae", "snr_db"):
            v = out[key]
            if isinstance(v, float) and not math.isfinite(v):
                out[key] = str(v)
        for key in ("expected_at_worst", "actual_at_worst"):
            out[key] = _jsonable(out[key])
        return out


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    f = float(v)
    return f if math.isfinite(f) else str(f)


def _ordered_ints(x: np.ndarray) -> np.ndarray:
    """Map floats to integers whose difference is the ULP distance (sign-magnitude -> two's complement)."""
    width = x.dtype.itemsize
    int_type = {2: np.int16, 4: np.int32, 8: np.int64}[width]
    bits = x.view(int_type).astype(np.int64)
    minimum = np.int64(-(2 ** (8 * width - 1)))
    return np.where(bits < 0, minimum - bits, bits)


def ulp_distance(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    return np.abs(_ordered_ints(actual) - _ordered_ints(expected)).astype(np.float64)


def compare(actual: np.ndarray, expected: np.ndarray, tol: Tolerance) -> Comparison:
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    try:
        dtype = dtype_name(expected.dtype)
    except ValueError:
        dtype = str(expected.dtype)
    base = dict(dtype=dtype, shape=tuple(expected.shape), atol=tol.atol, rtol=tol.rtol)
    if actual.shape != expected.shape:
        return Comparison(False, f"shape {list(actual.shape)} != expected {list(expected.shape)}", **base)
    if actual.dtype != expected.dtype:
        return Comparison(False, f"dtype {actual.dtype} != expected {expected.dtype}", **base)
    total = int(expected.size)
    if total == 0:
        return Comparison(True, "empty", total=0, **base)

    if not is_floating(dtype):
        wrong = actual != expected
        mismatched = int(wrong.sum())
        diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
        worst = np.unravel_index(int(np.argmax(diff)), expected.shape) if mismatched else None
        return Comparison(
            ok=mismatched == 0,
            message="exact" if not mismatched else f"{mismatched}/{total} elements differ",
            total=total,
            mismatched=mismatched,
            max_abs=float(diff.max()),
            mae=float(diff.mean()),
            worst_index=tuple(int(i) for i in worst) if worst is not None else None,
            expected_at_worst=expected[worst] if worst is not None else None,
            actual_at_worst=actual[worst] if worst is not None else None,
            **base,
        )

    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    a_nan, e_nan = np.isnan(a), np.isnan(e)
    a_inf, e_inf = np.isinf(a), np.isinf(e)
    finite = ~(e_nan | e_inf | a_nan | a_inf)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(finite, np.abs(a - e), 0.0)
        allowed = tol.atol + tol.rtol * np.abs(e)
    bad = (a_nan != e_nan) | (e_inf & (a != e)) | (a_inf & ~e_inf) | (finite & (diff > allowed))
    ulps = np.where(finite | (a == e), ulp_distance(_as_binary(actual), _as_binary(expected)), np.inf)
    ulps = np.where(e_nan & a_nan, 0.0, ulps)
    mismatched = int(bad.sum())
    # The worst element: a violated one if any, the largest |error| otherwise.
    score = np.where(bad, np.inf, diff)
    worst = np.unravel_index(int(np.argmax(score)), expected.shape)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        signal = float(np.sum(np.where(finite, e, 0.0) ** 2))
        noise = float(np.sum(diff**2))
        snr = math.inf if noise == 0 else (10 * math.log10(signal / noise) if signal > 0 else -math.inf)
    if mismatched:
        kinds = []
        if int((a_nan != e_nan).sum()):
            kinds.append(f"{int((a_nan != e_nan).sum())} NaN mismatches")
        inf_bad = int(((e_inf & (a != e)) | (a_inf & ~e_inf)).sum())
        if inf_bad:
            kinds.append(f"{inf_bad} infinity mismatches")
        fin_bad = int((finite & (diff > allowed)).sum())
        if fin_bad:
            kinds.append(f"{fin_bad} beyond atol={tol.atol:g} rtol={tol.rtol:g}")
        message = (
            f"{mismatched}/{total} elements differ ({', '.join(kinds)}); worst at {list(worst)}: "
            f"got {actual[worst]!r}, expected {expected[worst]!r}"
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


def _as_binary(x: np.ndarray) -> np.ndarray:
    """bfloat16 arrays viewed through a NumPy-native dtype of the same width, for bit tricks."""
    if x.dtype == np.dtype(ml_dtypes.bfloat16):
        return x.view(np.float16)  # same width; only the bits matter for ULP distance
    return x
