"""Signatures of creation ops: full, full_like, fill, scalar_tensor, arange; empty, empty_strided, resize_.

They take no tensor inputs (full_like takes one for its shape), so a signature
draws only attributes. The spec dtype names the result dtype: it is passed as
``dtype=``, or left out when the scalars' own kind infers it (float -> float32,
int -> int64, bool -> bool), which exercises dtype inference.
"""

from __future__ import annotations

import ml_dtypes
from hypothesis import strategies as st

from conformance.api.scalar_type import DTYPE_NAMES, is_floating, is_integral, numpy_dtype

from . import Call, directed, param, sampled_from, signature
from .shape import _factor, scalar_of, tensor
from .shapes import shapes

_INFERRED = {"float32": float, "int64": int, "bool": bool}
"""Result dtypes that dtype=None gives for a Python scalar of that kind."""


def fill_value(draw, spec, dtype: str):
    """A scalar that converts to ``dtype`` without overflow, sometimes of another kind.

    Integers take in-range floats (truncated) and floats take integers; bools take any
    number (non-zero is true).
    """
    kind = draw(st.integers(0, 3))
    if kind == 0 and dtype == "bool":
        return draw(st.integers(-3, 3) | st.floats(-2.0, 2.0))
    if kind == 0 and is_integral(dtype):
        low, high = (0, 255) if dtype.startswith("uint") else (-100, 100)
        return draw(st.floats(low, high))
    if kind == 0 and is_floating(dtype):
        bound = min(2048, int(float(ml_dtypes.finfo(numpy_dtype(dtype)).max)))  # float8_e4m3fn's is 448
        return draw(st.integers(-bound, bound))
    if kind == 1 and is_floating(dtype):
        # A double that has to be rounded (through float32 for the half types).
        bound = min(60000.0, float(ml_dtypes.finfo(numpy_dtype(dtype)).max))
        return draw(st.floats(-bound, bound))
    return scalar_of(draw, dtype, spec.domain)


def _dtype_kwarg(draw, dtype: str, value) -> dict:
    """{} when the value's kind infers ``dtype``, else {"dtype": dtype}."""
    inferred = _INFERRED.get(dtype)
    if inferred is not None and type(value) is inferred:
        return {} if draw(st.booleans()) else {"dtype": dtype}
    return {"dtype": dtype}


@signature("full")
def full(draw, spec, dtype, op):
    """full(size, fill_value, dtype=): size rank 0-4 (sides 0-6)."""
    size = list(draw(shapes(0, param(spec, "max_rank", 4))))
    inferred = _INFERRED.get(dtype)
    if inferred is not None and draw(st.booleans()):
        value = inferred(scalar_of(draw, dtype, spec.domain))
        return Call(op, (size, value))
    value = fill_value(draw, spec, dtype)
    return Call(op, (size, value), {"dtype": dtype})


@signature("full_like")
def full_like(draw, spec, dtype, op):
    """full_like(self, fill_value, dtype=): self in ``dtype`` (dtype left out), or in any dtype with dtype=."""
    shape = draw(shapes(0, param(spec, "max_rank", 4)))
    value = fill_value(draw, spec, dtype)
    if draw(st.booleans()):
        return Call(op, (tensor(draw, spec, dtype, shape), value))
    # A check in one of the ten dtypes of "all" draws self among those ten only: a backend claiming
    # full_like in float64 has not claimed a float8 or complex input.
    others = [d for d in spec.dtypes if d in DTYPE_NAMES or dtype not in DTYPE_NAMES]
    other = draw(sampled_from(others))
    return Call(op, (tensor(draw, spec, other, shape), value), {"dtype": dtype})


@signature("fill")
def fill(draw, spec, dtype, op):
    """fill(self, value): self in ``dtype`` (rank 0-4, sides 0-6), a value that converts to it
    without overflow (``fill_value``: sometimes of another kind than the dtype's)."""
    shape = draw(shapes(0, param(spec, "max_rank", 4)))
    return Call(op, (tensor(draw, spec, dtype, shape), fill_value(draw, spec, dtype)))


@signature("scalar_tensor")
def scalar_tensor(draw, spec, dtype, op):
    """scalar_tensor(s, dtype=): float32 also without dtype=, from a float, int or bool."""
    if dtype == "float32" and draw(st.booleans()):
        s = draw(st.sampled_from([float, int, bool]))(scalar_of(draw, "float32", "moderate"))
        return Call(op, (s,))
    return Call(op, (fill_value(draw, spec, dtype),), {"dtype": dtype})


def _arange_floats(draw, dtype: str):
    """start, step, count for a float result.

    Values are multiples of a power of two with at most 8 significant bits, so every
    element start + i * step is exact in every float dtype: eager's vectorized loop and
    its scalar tail then agree (see the op spec's notes). float32/float64 also draw
    non-dyadic starts and steps with elements below 100 in magnitude, where the two
    paths differ by less than the tolerance.
    """
    if dtype in ("float32", "float64") and draw(st.integers(0, 2)) == 0:
        start = draw(st.sampled_from([0.0, 0.1, -0.7, 1.3, -2.35]))
        step = draw(st.sampled_from([0.1, -0.3, 0.7, 1.1, -1.9, 0.01]))
        count = draw(st.integers(0, int(90 // abs(step))))
        return start, step, count
    unit = draw(st.sampled_from([1.0, 0.5, 0.25, 2.0]))
    a = draw(st.integers(-32, 32))
    b = draw(st.integers(-4, 4).filter(bool))
    count = draw(st.integers(0, min(48, (256 - abs(a)) // abs(b))))
    return a * unit, b * unit, count


@signature("arange")
def arange(draw, spec, dtype, op):
    """arange([start,] end[, step], dtype=): the op name says which arguments it takes.

    end sits a fraction of a step before a whole count, so the length rounds up. Integer
    results sometimes get float scalars (ATen truncates them to int64 first).
    """
    overload = op.rsplit(".", 1)[1]
    if is_floating(dtype):
        start, step, count = _arange_floats(draw, dtype)
    else:
        start = draw(st.integers(-20, 20))
        step = draw(st.integers(-5, 5).filter(bool))
        count = draw(st.integers(0, 30))
    if overload != "start_step":
        step = 1 if not is_floating(dtype) or draw(st.booleans()) else 1.0
        start = abs(start) if step > 0 else start
    if overload == "default":
        start = 0
    fraction = draw(st.sampled_from([0, 0, 0.5, 0.25]))
    end = start + (count - fraction) * step
    if not is_floating(dtype) and not fraction and draw(st.integers(0, 2)):
        end = int(end)
    if is_integral(dtype) and draw(st.integers(0, 4)) == 0:
        # Truncation moves start by at most one unit towards end: still consistent with step.
        nudge = 0.5 * (1 if step > 0 else -1) if count and draw(st.booleans()) else 0.0
        start, end = float(start) + nudge, float(end)
    if count == 0 and fraction:
        end = start
    args = {"default": (end,), "start": (start, end), "start_step": (start, end, step)}[overload]
    if overload == "start_step" and step == 1 and draw(st.booleans()):
        args = args[:2]
    integral = all(isinstance(v, int) for v in args)
    inferred = (dtype == "int64" and integral) or (dtype == "float32" and not integral)
    kwargs = {} if inferred and draw(st.booleans()) else {"dtype": dtype}
    return Call(op, args, kwargs)


@signature("empty")
def empty(draw, spec, dtype, op):
    """empty(size, dtype=): size rank 0-4 (the edge set's large, empty, 0-d and real-world shapes
    included); dtype=None gives float32. memory_format is not drawn: the layout it asks for is in the
    program's output strides, and outputs are read logically."""
    size = list(draw(shapes(0, param(spec, "max_rank", 4))))
    return Call(op, (size,), {} if dtype == "float32" and draw(st.booleans()) else {"dtype": dtype})


@signature("empty_strided")
def empty_strided(draw, spec, dtype, op):
    """empty_strided(size, stride, dtype=): the strides of a dense tensor whose dims are stored in a
    drawn order (contiguous, transposed, channels-last and the rest), what decompositions ask for;
    not overlapping or gapped strides, which a program's output cannot carry to every backend."""
    size = list(draw(shapes(0, param(spec, "max_rank", 4))))
    order = draw(st.permutations(range(len(size))))  # outermost first
    stride, step = [0] * len(size), 1
    for d in reversed(order):
        stride[d] = step
        step *= max(size[d], 1)
    return Call(op, (size, stride), {} if dtype == "float32" and draw(st.booleans()) else {"dtype": dtype})


@signature("resize")
def resize(draw, spec, dtype, op):
    """resize_(self, size): self of any shape (the edge set's included); a size of 0, fewer, as many
    or more elements (more under the edge set's directives), of a rank up to self's: torch.export
    cannot raise an input's rank with resize_ (see the op spec), so no program does. memory_format is
    not drawn: ATen lays the new shape out in it over the same storage, which changes which logical
    elements are kept."""
    self = tensor(draw, spec, dtype, draw(shapes(0, param(spec, "max_rank", 4))))
    numel, top = int(self.value.size), self.value.ndim
    if top == 0:
        return Call(op, (self, []))
    state = directed.active()
    # The edge set's shapes and values grow: every element self has is then checked.
    kind = "more" if state is not None and "shape" in state.consumed else draw(st.sampled_from(["fewer", "same", "more", "none"]))
    n = {"fewer": lambda: draw(st.integers(0, max(numel - 1, 0))), "same": lambda: numel,
         "more": lambda: numel + draw(st.integers(1, 64)), "none": lambda: 0}[kind]()  # fmt: skip
    if n == 0:
        size = [draw(st.integers(0, 4)) for _ in range(draw(st.integers(1, top)))]
        size[draw(st.integers(0, len(size) - 1))] = 0
    elif n == 1 and draw(st.booleans()):
        size = []
    else:
        size = _factor(draw, n, draw(st.integers(1, top)))
    return Call(op, (self, size))
