"""Signatures of elementwise ops: unary (and unary_attrs), binary (broadcasting, mixed dtypes), binary_out,
item, where, clamp, to_copy."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from conformance.api.scalar_type import (
    DTYPE_NAMES,
    component_dtype,
    is_complex,
    is_floating,
    is_integral,
    numpy_dtype,
    promotable,
)

from . import Call, Tensor, attr, directed, param, signature
from .shapes import broadcast_shapes, shapes
from .values import arrays, scalars


def _domain(spec, dtype: str, key: str) -> str:
    """The domain of one operand: ``int_<key>`` for integer dtypes, then ``<key>``, then the op's."""
    if is_integral(dtype) and f"int_{key}" in spec.params:
        return spec.params[f"int_{key}"]
    return spec.params.get(key, spec.domain)


def _scalar_attr_fits(dtype: str):
    # PyTorch refuses a float alpha for integer tensors and a non-bool one for bool results.
    def keep(value) -> bool:
        if is_floating(dtype):
            return not isinstance(value, bool)
        if dtype == "bool":
            return isinstance(value, bool) or value == 1
        return isinstance(value, int) and not isinstance(value, bool)

    return keep


def other_dtype(draw, spec, dtype: str, sometimes: st.SearchStrategy[bool]) -> str:
    """The dtype of an operand that may promote: the check's own in a directive that wants one dtype,
    another of the op's dtypes in one that wants them mixed, else another one when ``sometimes``
    draws True (only when the spec's ``mixed_dtypes`` param, default true, allows it).

    Only dtypes eager promotes with ``dtype`` (``promotable``); a check in one of the ten dtypes of
    "all" mixes only those ten, so an op that gains complex or uint16 keeps its other checks' draws."""
    if not param(spec, "mixed_dtypes", True) or directed.same_dtypes():
        return dtype
    pool = [d for d in spec.dtypes if promotable(dtype, d) and (d in DTYPE_NAMES or dtype not in DTYPE_NAMES)]
    if directed.mixed_dtypes():
        others = [d for d in pool if d != dtype]
        if not others:
            return dtype
        directed.consume("mixed dtypes")
        return draw(st.sampled_from(others))
    return draw(st.sampled_from(pool)) if draw(sometimes) else dtype


def _kwargs(draw, spec, dtype: str) -> dict:
    out = {}
    for key in spec.attrs:
        keep = _scalar_attr_fits(dtype) if key == "alpha" else None
        out[key] = attr(draw, spec, key, keep=keep)
    return out


@signature("unary")
def unary(draw, spec, dtype, op):
    """op(self, **attrs) on any shape, rank 0 to ``max_rank``."""
    shape = draw(shapes(0, param(spec, "max_rank", 4)))
    x = draw(arrays(dtype, shape, _domain(spec, dtype, "self_domain")))
    return Call(op, (Tensor(x),), _kwargs(draw, spec, dtype))


@signature("binary")
def binary(draw, spec, dtype, op):
    """op(self, other, **attrs): two broadcasting tensors, or a tensor and a Python scalar.

    params: ``scalar_other`` / ``scalar_self`` make that operand a Python scalar;
    ``mixed_dtypes`` (default true) sometimes draws ``other`` in another of the
    op's dtypes to exercise type promotion; ``self_domain`` / ``other_domain``
    and ``int_self_domain`` / ``int_other_domain`` override the op's domain.
    """
    max_rank = param(spec, "max_rank", 4)
    self_shape, other_shape = draw(broadcast_shapes(2, 0, max_rank))
    b_dtype = other_dtype(draw, spec, dtype, st.booleans())
    if param(spec, "scalar_self", False):
        a = draw(scalars(dtype, _domain(spec, dtype, "self_domain")))
    else:
        a = Tensor(draw(arrays(dtype, self_shape, _domain(spec, dtype, "self_domain"))))
    if param(spec, "scalar_other", False):
        # An integer scalar is converted to an integer tensor's dtype, so draw it in that range.
        scalar_dtype = dtype if is_integral(dtype) and is_integral(b_dtype) else b_dtype
        b = draw(scalars(scalar_dtype, _domain(spec, scalar_dtype, "other_domain")))
    else:
        b = Tensor(draw(arrays(b_dtype, other_shape, _domain(spec, b_dtype, "other_domain"))))
    return Call(op, (a, b), _kwargs(draw, spec, dtype))


@signature("binary_out")
def binary_out(draw, spec, dtype, op):
    """op(self, other, *, out): ``binary``'s operands (params as for it), and an ``out`` tensor of
    their broadcast shape in the op's result dtype (their promoted dtype, float32 for integers and
    bool) or, a third of the time, another float dtype of the spec's (the result is converted to it;
    float64 only for a float64 result).
    Its values are drawn too: a backend must overwrite them, not hand them back."""
    import torch

    from conformance.api.scalar_type import dtype_name, torch_dtype

    call = binary(draw, spec, dtype, op)
    a, b = call.args
    promoted = dtype_name(torch.promote_types(torch_dtype(a.dtype), torch_dtype(b.dtype)))
    natural = promoted if is_floating(promoted) else "float32"
    # Not float64 for a narrower result: its float32 rounding error, within float32's tolerance,
    # would be judged by float64's.
    floats = [d for d in spec.dtypes if is_floating(d) and (d != "float64" or natural == "float64")] or [natural]
    target = draw(st.sampled_from(floats)) if draw(st.integers(0, 2)) == 0 and not directed.same_dtypes() else natural
    shape = np.broadcast_shapes(a.value.shape, b.value.shape)
    out = Tensor(draw(arrays(target, shape, _domain(spec, target, "self_domain"))))
    return Call(op, call.args, {**call.kwargs, "out": out})


@signature("item")
def item(draw, spec, dtype, op):
    """op(self) on a one-element tensor of rank 0-4 (every side 1), its value from the op's domain
    (the edge set's first edge value, NaN where the domain has it, under an edge-values directive)."""
    shape = (1,) * draw(st.integers(0, param(spec, "max_rank", 4)))
    return Call(op, (Tensor(draw(arrays(dtype, shape, _domain(spec, dtype, "self_domain")))),))


@signature("where")
def where(draw, spec, dtype, op):
    """where(condition, self, other), all three broadcasting; ``scalar_self``/``scalar_other`` as for binary."""
    c_shape, a_shape, b_shape = draw(broadcast_shapes(3, 0, param(spec, "max_rank", 4)))
    cond = Tensor(draw(arrays("bool", c_shape, "any_finite")))
    a = (
        draw(scalars(dtype, spec.domain))
        if param(spec, "scalar_self", False)
        else Tensor(draw(arrays(dtype, a_shape, spec.domain)))
    )
    b = (
        draw(scalars(dtype, spec.domain))
        if param(spec, "scalar_other", False)
        else Tensor(draw(arrays(dtype, b_shape, spec.domain)))
    )
    return Call(op, (cond, a, b))


@signature("clamp")
def clamp(draw, spec, dtype, op):
    """clamp(self, min, max): bounds are Python scalars, or tensors with ``tensor_bounds``; one may be None."""
    x_shape, lo_shape, hi_shape = draw(broadcast_shapes(3, 0, param(spec, "max_rank", 4)))
    x = Tensor(draw(arrays(dtype, x_shape, spec.domain)))
    bounds_domain = param(spec, "bounds_domain", "small")

    def bound(shape):
        if param(spec, "tensor_bounds", False):
            return Tensor(draw(arrays(dtype, shape, bounds_domain)))
        return draw(scalars(dtype, bounds_domain))

    which = draw(st.sampled_from(("both", "min", "max")))
    lo = bound(lo_shape) if which in ("both", "min") else None
    hi = bound(hi_shape) if which in ("both", "max") else None
    return Call(op, (x, lo, hi))


def _attr_fits(dtype: str):
    """Keep attribute values an integer tensor can take (ATen converts them with overflow checks)."""
    if not is_integral(dtype):
        return None
    info = np.iinfo(numpy_dtype(dtype))

    def keep(value) -> bool:
        if value is None or isinstance(value, str):
            return True
        return isinstance(value, (int, float)) and info.min <= value <= info.max

    return keep


def _excluded_to_zero(x: np.ndarray, window) -> np.ndarray:
    """Finite values whose magnitude lies in ``window`` ([lo, hi]) replaced by 0."""
    lo, hi = window
    with np.errstate(invalid="ignore"):
        mag = np.abs(x.astype(np.float64))
        return np.where((mag >= lo) & (mag <= hi), np.zeros((), x.dtype), x).astype(x.dtype)


@signature("unary_attrs")
def unary_attrs(draw, spec, dtype, op):
    """op(self, **attrs) like ``unary``, with per-dtype attribute filtering and optional keywords.

    params: ``max_rank`` (default 4); ``int_self_domain`` / ``self_domain`` override the
    op's domain; ``optional`` lists attributes that are sometimes left out (the schema
    default applies; TOML has no None); ``exclude_abs`` maps a dtype to [lo, hi]: finite
    inputs of that magnitude are replaced by 0 (a window where eager disagrees with
    itself, named in the op's notes); ``fit_attrs`` (default false): for integer dtypes
    draw only attribute values in the dtype's range (for ops that convert them to it).
    """
    shape = draw(shapes(0, param(spec, "max_rank", 4)))
    x = draw(arrays(dtype, shape, _domain(spec, dtype, "self_domain")))
    window = param(spec, "exclude_abs", {}).get(dtype)
    if window is not None:
        x = _excluded_to_zero(x, window)
    optional = set(param(spec, "optional", []))
    keep = _attr_fits(dtype) if param(spec, "fit_attrs", False) else None
    kwargs = {}
    for key in spec.attrs:
        if key in optional and draw(st.booleans()):
            continue
        kwargs[key] = attr(draw, spec, key, keep=keep)
    return Call(op, (Tensor(x),), kwargs)


# Float bounds inside each integer dtype's range that every float dtype can represent.
_INT_TARGET_BOUNDS = {
    "uint8": (0.0, 255.0),
    "int8": (-128.0, 127.0),
    "int16": (-32768.0, 32767.0),
    "int32": (-2147483520.0, 2147483520.0),
    "int64": (-(2.0**62), 2.0**62),
    "uint16": (0.0, 65535.0),
    "uint32": (0.0, 4294967040.0),
    "uint64": (0.0, 18446742974197923840.0),  # 2**64 - 2**40, float32's largest below 2**64
}


def _convertible_floats(source: str, target: str, shape) -> st.SearchStrategy:
    """Arrays of float dtype ``source`` whose values truncate into integer dtype ``target``."""
    lo, hi = _INT_TARGET_BOUNDS[target]
    src = numpy_dtype(source)
    big = float(ml_dtypes.finfo(src).max)
    lo, hi = max(lo, -big), min(hi, big)

    # The finite values of the source dtype (edge values, ordinary ones with fractions, wide ones),
    # clamped into the target's range: truncation and rounding disagree on every fraction.

    def clamp(a: np.ndarray) -> np.ndarray:
        wide = a.astype(np.float64)
        wide = np.where(np.isfinite(wide), np.clip(wide, lo, hi), 0.0)
        out = (wide.astype(np.float32) if source == "bfloat16" else wide).astype(src)
        back = out.astype(np.float64)
        return np.where((back >= lo) & (back <= hi), out, np.zeros((), src))  # rounded past a bound: 0

    return arrays(source, shape, "any_finite").map(clamp)


@signature("to_copy")
def to_copy(draw, spec, dtype, op):
    """_to_copy(self, dtype=<attrs.dtype>): a dtype conversion from ``dtype``.

    Float-to-integer conversions draw values that truncate into the target's range
    (others are undefined behaviour in C++: eager's result depends on the vector
    path), a complex source its real part so (the conversion keeps it); every other pair
    uses the op's domain, specials included. A check in one of the ten dtypes of "all"
    converts into those ten only; a check in another dtype (float8, complex, the wide
    unsigned integers) converts from it into any target and, in half the draws, into it
    from the target drawn: float32 -> float8_e4m3fn is where eager saturates.
    """
    target = attr(draw, spec, "dtype", keep=(lambda t: t in DTYPE_NAMES) if dtype in DTYPE_NAMES else None)
    source = dtype
    if dtype not in DTYPE_NAMES and target != dtype and draw(st.booleans()):
        source, target = target, dtype
    shape = draw(shapes(0, param(spec, "max_rank", 4)))
    if is_floating(source) and is_integral(target):
        x = draw(_convertible_floats(source, target, shape))
    elif is_complex(source) and is_integral(target):
        part = component_dtype(source)
        re = draw(_convertible_floats(part, target, shape))
        im = draw(arrays(part, shape, _domain(spec, part, "self_domain")))
        x = np.empty(shape, numpy_dtype(source))
        x.real, x.imag = re, im
    else:
        x = draw(arrays(source, shape, _domain(spec, source, "self_domain")))
    return Call(op, (Tensor(x),), {"dtype": target})
