"""Tolerances: the dtype default (torch.testing's assert_close defaults), then the op spec's
override, then a loosening the backend declares in its manifest. The chosen tolerance says where
it came from, so a report can print it with its reason."""

from __future__ import annotations

from dataclasses import replace

import ml_dtypes
import numpy as np

from conformance.api.scalar_type import complex_dtype, component_dtype, is_complex, is_floating
from conformance.specs import OpSpec, Tolerance

__all__ = ["DEFAULT_TOLERANCES", "EXACT", "CORRECTLY_ROUNDED", "COMPLEX_EXACT", "UNDERFLOW", "UNDERFLOW_HALF", "HALF",
    "ACCUMULATOR", "CONTRACT_TOLERANCE", "unit_roundoff", "tolerance_for"]  # fmt: skip


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
CONTRACT_TOLERANCE = Tolerance(atol=1e-4, rtol=1e-4, reason="contract programs chain several float32 ops", relative_floor=True)
"""The outputs of the contract programs (checks/_support), whose ops no op spec's tolerance covers together."""
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
