"""Declared numerical latitude: how an accelerator computes unlike a CPU on purpose, as exact models.

A backend names the latitudes it takes in its manifest (``Manifest.latitudes``, the names and
one-line models in ``conformance.api.LATITUDES``); without a declaration the strict semantics
hold. A latitude never widens a tolerance: an output that fails the strict comparison is judged
again against the model of the latitudes declared that cover it (``covering``), and the verdict is
that model's, its message naming them (``conformance.case.compare`` applies it; specs/README.md,
"Declared latitude"):

- ``tf32``: the op spec's ``latitudes.tf32`` operands (float32) rounded to a 10-bit mantissa, round to
  nearest even (``round_tf32``); the expected output is the reference kernel's on them, its derived
  bound too (a float32 accumulation in any order).
- ``daz``: every floating-point input's subnormals read as a zero of the same sign; the expected
  output is the reference kernel's on the flushed inputs.
- ``ftz``: subnormal results flushed to a zero of the same sign, on both sides (``flush``).
- ``fast-division``: the op spec's ``latitudes.fast-division`` dividend and divisor (true division
  only): within 2 ULP of the correctly rounded quotient, or bit for bit x * (1 / y) as the op's
  compute type rounds it (``reciprocal_quotient``: where 1 / y overflows or underflows the two differ
  by far more than 2 ULP).
- ``signed-zero``: the sign of a zero is not compared.
- ``reassociation``: the op spec's derived ``bound`` already admits every summation order, declared
  or not; declaring it names it in the verdict where it was taken (a result within the bound that is
  not the reference's bits), and an op without a bound stays strict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import ml_dtypes
import numpy as np

from conformance.api.scalar_type import dtype_name, is_complex, is_floating
from conformance.call import Call, Tensor
from conformance.specs import OpSpec, Tolerance

TF32_MANTISSA = 10
"""Explicit mantissa bits of TensorFloat-32 (NVIDIA Ampere and later: 8 exponent bits, 10 mantissa bits)."""
FAST_DIVISION_ULP = 2
"""x * (1 / y) rounds twice: within 1.5 ULP of x / y where neither rounding under- or overflows."""
INPUT_LATITUDES = ("tf32", "daz")
"""The latitudes whose model recomputes the expected output from transformed inputs."""


def covering(declared: Sequence[str], spec: OpSpec | None, call, dtype: str) -> tuple[str, ...]:
    """The latitudes of ``declared`` that cover an output of ``dtype`` of ``call`` (in declared order)."""
    if spec is None or call is None or not declared or not is_floating(dtype) or is_complex(dtype):
        return ()
    out = []
    for name in declared:
        if name == "tf32":
            applies = "tf32" in spec.latitudes and dtype == "float32"
        elif name == "fast-division":
            applies = "fast-division" in spec.latitudes and _true_division(call)
        elif name == "reassociation":  # where the op spec's bound holds (scatter_reduce's: reduce = "sum")
            applies = spec.bound is not None and _bound_applies(spec, call)
        else:  # ftz, daz, signed-zero: every op's floating-point outputs
            applies = True
        if applies:
            out.append(name)
    return tuple(out)


def _bound_applies(spec: OpSpec, call) -> bool:
    from conformance.oracle import arguments

    given = arguments(call) if spec.bound.when else {}
    return all(given.get(k) in allowed for k, allowed in spec.bound.when.items())


def _true_division(call) -> bool:
    from conformance.oracle import arguments

    return arguments(call).get("rounding_mode") is None


def round_mantissa(x: np.ndarray, bits: int) -> np.ndarray:
    """float32 ``x`` rounded to ``bits`` explicit mantissa bits, to nearest, ties to even, on the bits:
    a carry into the exponent is the IEEE result (the largest float32 rounds to infinity at 10 bits);
    NaN and the infinities are kept, subnormals keep their own (fewer) bits the same way."""
    x = np.asarray(x)
    if x.dtype != np.float32:
        return x
    drop = 23 - bits
    raw = np.ascontiguousarray(x).view(np.uint32).astype(np.uint64)
    half = np.uint64((1 << (drop - 1)) - 1)
    odd = (raw >> np.uint64(drop)) & np.uint64(1)
    rounded = ((raw + half + odd) >> np.uint64(drop)) << np.uint64(drop)
    out = (rounded & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32).reshape(x.shape)
    return np.where(np.isfinite(x), out, x)


def round_tf32(x: np.ndarray) -> np.ndarray:
    """float32 ``x`` as TensorFloat-32 holds it (``round_mantissa`` to 10 bits); other dtypes unchanged."""
    return round_mantissa(x, TF32_MANTISSA)


def _tiny(dtype: np.dtype) -> float:
    return float(ml_dtypes.finfo(dtype).smallest_normal)


def flush(x: np.ndarray) -> np.ndarray:
    """``x`` with its subnormals (of its own dtype) replaced by a zero of the same sign; other arrays unchanged."""
    x = np.asarray(x)
    try:
        name = dtype_name(x.dtype)
    except ValueError:
        return x
    if not is_floating(name) or is_complex(name) or x.size == 0:
        return x
    wide = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        subnormal = (wide != 0) & (np.abs(wide) < _tiny(x.dtype))
    if not subnormal.any():
        return x
    return np.where(subnormal, np.copysign(0.0, wide), wide).astype(x.dtype)


def transformed_call(call: Call, spec: OpSpec, names: Sequence[str]) -> Call:
    """``call`` with its inputs as the latitudes ``names`` read them: daz flushes every floating-point
    tensor's subnormals, tf32 rounds the op spec's tf32 operands of float32."""
    from conformance.programs.operators import resolve_op, schema_args

    schema = [a.name for a in schema_args(resolve_op(call.op))]
    rounded = set(spec.latitudes.get("tf32", ())) if "tf32" in names else set()

    def fn_for(name: str | None) -> Callable[[Tensor], Tensor]:
        def apply(t: Tensor) -> Tensor:
            value = t.value
            if "daz" in names:
                value = flush(value)
            if name in rounded:
                value = round_tf32(value)
            return t if value is t.value else Tensor(np.asarray(value), t.role)

        return apply

    def walk(arg, fn):
        if isinstance(arg, Tensor):
            return fn(arg)
        if isinstance(arg, (list, tuple)):
            return type(arg)(walk(a, fn) for a in arg)
        return arg

    args = tuple(walk(a, fn_for(schema[i] if i < len(schema) else None)) for i, a in enumerate(call.args))
    kwargs = {k: walk(v, fn_for(k)) for k, v in call.kwargs.items()}
    return Call(call.op, args, kwargs)


def reciprocal_quotient(call, spec: OpSpec, expected: np.ndarray) -> np.ndarray | None:
    """x * (1 / y) for the op spec's fast-division operands, computed as the op computes (float32 for
    the half types, else the output's dtype) and rounded to ``expected``'s dtype and shape; None where
    the operands are not there or do not broadcast to it."""
    from conformance.oracle import arguments

    names = spec.latitudes.get("fast-division", ())
    given = arguments(call)
    if len(names) != 2 or any(given.get(n) is None for n in names):
        return None
    out = np.dtype(expected.dtype)
    compute = np.float64 if out == np.float64 else np.float32
    x, y = (np.asarray(given[n]).astype(compute) for n in names)
    with np.errstate(all="ignore"):
        q = (x * (compute(1) / y).astype(compute)).astype(compute)
    try:
        return np.broadcast_to(q.astype(out), expected.shape).copy()
    except ValueError:
        return None


def tolerance(tol: Tolerance, names: Sequence[str]) -> Tolerance:
    """The strict tolerance ``tol`` as the latitudes ``names`` amend it (fast-division's ULP, signed-zero)."""
    if "fast-division" in names:
        tol = replace(tol, ulp=max(tol.ulp, FAST_DIVISION_ULP))
    if "signed-zero" in names:
        tol = replace(tol, signed_zero=False)
    return replace(tol, reason=f"{tol.reason}; declared latitude {', '.join(names)}", source=f"latitude {', '.join(names)}")
