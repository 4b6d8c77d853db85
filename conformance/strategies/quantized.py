"""Signatures of PT2E's quantize and dequantize operators (quantized_decomposed.*).

Each call is one a quantized model makes: ``quant`` is an attribute whose allowed values are
``[dtype, quant_min, quant_max]`` triples (the quantized dtype with its full range or a restricted
one, such as XNNPACK's symmetric [-127, 127] for weights); the scale is drawn from the spec's
``scale`` list (powers of two, where x * (1 / scale) lands exactly on the ties the data hold, and
typical observer scales) or log-uniformly over [1e-4, 10]; the zero point anywhere in the range.
Float data mix the domain's values with exact ties (k + 0.5) * scale around and past the ends
of the quantized range, where rounding half to even and clamping decide the result.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from conformance.api.scalar_type import numpy_dtype

from . import Call, Tensor, attr, directed, param, signature
from .shapes import dim_index, shapes
from .values import arrays

_LOG10_SCALES = (-4.0, 1.0)
"""Scales drawn outside the spec's list are 10**u, u uniform in this interval."""


def _target(draw, spec, dtype: str | None = None) -> tuple[str, int, int]:
    """The quantized dtype and range: attrs.quant, a [dtype, quant_min, quant_max] triple
    (only the ones of ``dtype`` when given: a dequantize's input is already quantized)."""
    keep = None if dtype is None else (lambda q: q[0] == dtype)
    name, quant_min, quant_max = attr(draw, spec, "quant", keep=keep)
    return name, int(quant_min), int(quant_max)


def _scale(draw, spec) -> float:
    """A scale from attrs.scale, or half the time (never under a directive, whose cases are
    the spec's) a log-uniform one: a Python float, as PT2E's observers compute it in float64."""
    listed = attr(draw, spec, "scale")
    if directed.active() is not None or draw(st.booleans()):
        return listed
    return float(10 ** draw(st.floats(*_LOG10_SCALES), label="log10 scale"))


def _zero_point(draw, quant_min: int, quant_max: int) -> int:
    """Anywhere in [quant_min, quant_max], its ends and 0 (symmetric quantization) included."""
    return draw(st.one_of(st.sampled_from([0 if quant_min <= 0 <= quant_max else quant_min, quant_min, quant_max]),
                          st.integers(quant_min, quant_max)), label="zero_point")


def _with_ties(draw, x: np.ndarray, scale, zero_point, quant_min: int, quant_max: int) -> np.ndarray:
    """``x`` with about a third of its elements replaced by (k + 0.5) * scale, k from two steps
    below the quantized range to two past it (``scale`` and ``zero_point`` broadcast against ``x``:
    per-channel values). Exact ties wherever scale is a power of two and the product fits the
    dtype; rounded to the largest finite value where it does not (NaN and inf stay out)."""
    state = directed.active()
    if x.size == 0 or (state is not None and state.directive.values == "edges"):
        return x  # the edge values stay whole (their ties 0.5, 1.5, 2.5 meet the listed scale 1.0)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="ties seed"))
    zp = np.broadcast_to(np.asarray(zero_point, dtype=np.int64), x.shape)
    k = rng.integers(quant_min - zp - 2, quant_max - zp + 2, endpoint=True)
    big = float(np.finfo(np.float32).max) if x.dtype != np.float16 else float(np.finfo(np.float16).max)
    ties = np.clip((k + 0.5) * np.asarray(scale, dtype=np.float64), -big, big)
    out = np.array(x, copy=True)
    chosen = rng.random(x.shape) < 1 / 3
    out[chosen] = ties[chosen].astype(np.float32).astype(x.dtype)
    return out


def _scale_tensor(draw, spec, scale: float) -> Tensor:
    """A one-element scale tensor ([1] or 0-d) in a dtype of attrs.scale_dtype."""
    dtype = numpy_dtype(attr(draw, spec, "scale_dtype", "float64"))
    shape = draw(st.sampled_from([(1,), ()]), label="scale shape")
    return Tensor(np.full(shape, scale, dtype=dtype))


def _zero_point_tensor(draw, spec, zero_point: int, shape) -> Tensor:
    dtype = numpy_dtype(attr(draw, spec, "zero_point_dtype", "int64"))
    return Tensor(np.full(shape, zero_point, dtype=dtype))


def _out_dtype(draw, spec) -> dict:
    """{"out_dtype": name}, or {} for the default (TOML has no null: false stands for None)."""
    out = attr(draw, spec, "out_dtype", False)
    return {} if out is False else {"out_dtype": out}


@signature("quantize_per_tensor")
def quantize_per_tensor(draw, spec, dtype, op):
    """quantize_per_tensor(input, scale, zero_point, quant_min, quant_max, dtype).

    params: ``qparams`` ("scalar": scale and zero_point as Python numbers, the .default overload;
    "tensor": one-element tensors of attrs.scale_dtype and attrs.zero_point_dtype, the .tensor
    overload, as runtime inputs: dynamic quantization computes them with choose_qparams).
    attrs: ``quant``, ``scale``."""
    target, quant_min, quant_max = _target(draw, spec)
    scale = _scale(draw, spec)
    zero_point = _zero_point(draw, quant_min, quant_max)
    if param(spec, "qparams", "scalar") == "tensor":
        s = _scale_tensor(draw, spec, scale)
        z = _zero_point_tensor(draw, spec, zero_point, s.value.shape)
        scale = float(s.value.reshape(()))  # the value eager reads with .item()
        qparams = (s, z)
    else:
        qparams = (scale, zero_point)
    x = draw(arrays(dtype, draw(shapes(0, param(spec, "max_rank", 4))), spec.domain))
    x = _with_ties(draw, x, scale, zero_point, quant_min, quant_max)
    return Call(op, (Tensor(x), *qparams, quant_min, quant_max), {"dtype": target})


@signature("dequantize_per_tensor")
def dequantize_per_tensor(draw, spec, dtype, op):
    """dequantize_per_tensor(input, scale, zero_point, quant_min, quant_max, dtype, *, out_dtype).

    The input is the quantized tensor itself: ``dtype`` is its dtype, ``quant`` a range of that
    dtype (which dequantize does not read). params: ``qparams`` as for quantize_per_tensor.
    attrs: ``quant``, ``scale``, ``out_dtype`` (false: the default, float32)."""
    _, quant_min, quant_max = _target(draw, spec, dtype)
    scale = _scale(draw, spec)
    zero_point = _zero_point(draw, quant_min, quant_max)
    if param(spec, "qparams", "scalar") == "tensor":
        s = _scale_tensor(draw, spec, scale)
        qparams = (s, _zero_point_tensor(draw, spec, zero_point, s.value.shape))
    else:
        qparams = (scale, zero_point)
    x = draw(arrays(dtype, draw(shapes(0, param(spec, "max_rank", 4))), spec.domain))
    return Call(op, (Tensor(x), *qparams, quant_min, quant_max), {"dtype": dtype, **_out_dtype(draw, spec)})


def _per_channel(draw, spec, dtype: str, quantized: str | None):
    """(x, axis, scales, zero_points, quant): a tensor of rank 1 to max_rank, an axis (any valid
    dim, negative spellings included), one scale (of attrs.scale_dtype) and one zero point
    (int64, as PT2E's observers give them) per index along the axis, as parameters: per-channel
    quantization is for weights, baked into the program."""
    target, quant_min, quant_max = _target(draw, spec, quantized)
    shape = draw(shapes(1, param(spec, "max_rank", 4)))
    axis = draw(dim_index(len(shape)))
    channels = shape[axis]
    base = _scale(draw, spec)
    spread = draw(st.lists(st.floats(-1.0, 1.0), min_size=channels, max_size=channels), label="scale spread") if channels else []
    scale_dtype = numpy_dtype(attr(draw, spec, "scale_dtype", "float64"))
    # one channel keeps the listed scale itself (a power of two gives exact ties)
    scales = np.asarray([base] + [base * 10**u for u in spread[1:]], dtype=np.float64)[:channels].astype(scale_dtype)
    points = [_zero_point(draw, quant_min, quant_max) for _ in range(channels)]
    zero_points = np.asarray(points, dtype=np.int64)
    x = draw(arrays(dtype, shape, spec.domain))
    return x, axis, scales, zero_points, (target, quant_min, quant_max)


@signature("quantize_per_channel")
def quantize_per_channel(draw, spec, dtype, op):
    """quantize_per_channel(input, scales, zero_points, axis, quant_min, quant_max, dtype).
    attrs: ``quant``, ``scale`` (each channel's scale is it times 10**u, u in [-1, 1]), ``scale_dtype``."""
    x, axis, scales, zero_points, (target, quant_min, quant_max) = _per_channel(draw, spec, dtype, None)
    along = [1] * x.ndim
    along[axis] = -1
    x = _with_ties(draw, x, scales.astype(np.float64).reshape(along), zero_points.reshape(along), quant_min, quant_max)
    return Call(op, (Tensor(x), Tensor(scales, role="parameter"), Tensor(zero_points, role="parameter"), axis,
                     quant_min, quant_max), {"dtype": target})


@signature("dequantize_per_channel")
def dequantize_per_channel(draw, spec, dtype, op):
    """dequantize_per_channel(input, scales, zero_points, axis, quant_min, quant_max, dtype, *, out_dtype).
    attrs: ``quant`` (ranges of the input's dtype), ``scale``, ``scale_dtype``, ``out_dtype``,
    ``zero_points`` (false: None, upstream's symmetric case that skips the subtraction)."""
    x, axis, scales, zero_points, (_, quant_min, quant_max) = _per_channel(draw, spec, dtype, dtype)
    points = Tensor(zero_points, role="parameter") if attr(draw, spec, "zero_points", True) else None
    return Call(op, (Tensor(x), Tensor(scales, role="parameter"), points, axis, quant_min, quant_max),
                {"dtype": dtype, **_out_dtype(draw, spec)})


@signature("choose_qparams")
def choose_qparams(draw, spec, dtype, op):
    """choose_qparams(input, quant_min, quant_max, eps, dtype) on a non-empty input (eager's
    aminmax refuses an empty one). attrs: ``quant`` (ranges holding 0, as validate_qmin_qmax
    requires), ``eps``."""
    target, quant_min, quant_max = _target(draw, spec)
    eps = attr(draw, spec, "eps")
    x = draw(arrays(dtype, draw(shapes(0, param(spec, "max_rank", 4), min_side=1)), spec.domain))
    return Call(op, (Tensor(x), quant_min, quant_max, eps), {"dtype": target})
