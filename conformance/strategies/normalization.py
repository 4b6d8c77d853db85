"""Signatures of normalization ops: batch norm (inference and training), layer norm, group norm."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from . import Call, Tensor, attr, directed, param, signature
from .shapes import EDGE_SIDE
from .values import arrays


def _affine_domain(spec) -> str:
    return param(spec, "affine_domain", spec.domain)


def _optional_parameter(draw, dtype: str, shape: tuple, domain: str):
    if draw(st.booleans()):
        return Tensor(draw(arrays(dtype, shape, domain)), "parameter")
    return None


def _side(spec):
    return st.integers(1, param(spec, "max_side", 6))


@signature("batch_norm")
def batch_norm(draw, spec, dtype, op):
    """Batch norm: _native_batch_norm_legit_no_training(input, weight, bias, running_mean,
    running_var, momentum, eps), _native_batch_norm_legit(input, weight, bias, running_mean,
    running_var, training, momentum, eps) or its no_stats overload (no running statistics).

    input (N, C, *spatial) of rank 2 to ``max_rank`` (default 5); weight and bias
    are optional parameters; running_mean and running_var (running_var the absolute
    values of its domain: a variance) are parameters, or program inputs with
    ``running_stats = "input"`` (an op that updates them in place: the program returns
    their new values), or absent with ``running_stats = "none"``. params:
    ``max_channels`` (default 8), ``max_side`` (default 6), ``stats_domain``
    (default: the op's domain) for the running statistics.
    attrs: ``training`` (where the schema has it), ``momentum``, ``eps``.
    """
    rank = draw(st.integers(2, param(spec, "max_rank", 5)))
    channels = draw(st.integers(1, param(spec, "max_channels", 8)))
    shape = (draw(st.integers(1, 2)), channels) + tuple(draw(_side(spec)) for _ in range(rank - 2))
    stats_domain = param(spec, "stats_domain", spec.domain)
    stats = param(spec, "running_stats", "parameter")
    x = Tensor(draw(arrays(dtype, shape, spec.domain)))
    weight = _optional_parameter(draw, dtype, (channels,), spec.domain)
    bias = _optional_parameter(draw, dtype, (channels,), spec.domain)
    args = [x, weight, bias]
    if stats != "none":
        role = "input" if stats == "input" else "parameter"
        mean = Tensor(draw(arrays(dtype, (channels,), stats_domain)), role)
        var = Tensor(np.abs(draw(arrays(dtype, (channels,), stats_domain))), role)
        args += [mean, var]
    if "training" in spec.attrs:
        args.append(attr(draw, spec, "training"))
    return Call(op, (*args, attr(draw, spec, "momentum", 0.1), attr(draw, spec, "eps")))


@signature("layer_norm")
def layer_norm(draw, spec, dtype, op):
    """native_layer_norm(input, normalized_shape, weight, bias, eps) over 1 to rank trailing dims.

    input of rank 1 to ``max_rank`` (default 4) with sides 1 to ``max_side``
    (default 6); weight and bias are optional parameters of the normalized
    shape, drawn from ``params.affine_domain`` (default: the op's domain).
    attrs: ``eps``. The edge set's shapes: _LAYER_NORM_SHAPES, and a model's (2, 16, 64) over
    hidden or (2, 16, 14, 14) over (C, H, W); its edge values and spreads go to the input only.
    """
    real = directed.model()
    edge = directed.edge_shape()
    if real is not None:  # a transformer's (over hidden) or an image's (over C, H, W) layer norm
        shape = directed.MODEL_SHAPES[real["rank"]]
        k = 1 if real["rank"] == 3 else 3
    elif edge is not None:
        shape, k = _LAYER_NORM_SHAPES[edge]
    else:
        shape = tuple(draw(st.lists(_side(spec), min_size=1, max_size=param(spec, "max_rank", 4))))
        k = draw(st.integers(1, len(shape)))
    normalized = list(shape[len(shape) - k :])
    x = Tensor(draw(arrays(dtype, shape, spec.domain)))
    with directed.ordinary_values():
        weight = _optional_parameter(draw, dtype, tuple(normalized), _affine_domain(spec))
        bias = _optional_parameter(draw, dtype, tuple(normalized), _affine_domain(spec))
    return Call(op, (x, normalized, weight, bias, attr(draw, spec, "eps")))


_LAYER_NORM_SHAPES = {
    "edges": ((2, EDGE_SIDE), 1),
    "empty": ((0, 5), 1),
    "large": (directed.LARGE_SHAPES[3], 2),
    "long": (directed.LONG_SHAPES[2], 1),
}
"""layer_norm's input and number of normalized dims under the edge set's shape cases: rows holding
every edge value, no rows, a large input normalized over its last two dims, rows of LONG_SIDE."""


@signature("group_norm")
def group_norm(draw, spec, dtype, op):
    """native_group_norm(input, weight, bias, N, C, HxW, group, eps).

    input (N, C, *spatial) with 0 to 3 spatial dims; C is a multiple of the
    group count drawn from ``attrs.group``, at most ``max_channels`` (default 8)
    when the group count allows; weight and bias are optional parameters (C,)
    drawn from ``params.affine_domain`` (default: the op's domain), and
    ``max_side`` (default 6) bounds the spatial sides. attrs: ``group``, ``eps``.
    The edge set's shapes: a model's images and sequences (16 channels, rounded up to a multiple of
    group), a channel of EDGE_SIDE edge values per group, an empty batch, and a large input whose
    groups each sum 32,800 elements; its edge values and spreads go to the input only.
    """
    max_channels = param(spec, "max_channels", 8)
    group = attr(draw, spec, "group")
    real = directed.model()
    edge = directed.edge_shape()
    if real is not None:  # a model's images (2, 16, 14, 14) or sequences (2, 16, 64), 16 channels rounded up
        shape = directed.MODEL_SHAPES[real["rank"]]
        n, channels, spatial = shape[0], group * -(-shape[1] // group), shape[2:]
    elif edge == "edges":  # each group one channel holding every edge value
        n, channels, spatial = 2, group, (EDGE_SIDE,)
    elif edge == "empty":
        n, channels, spatial = 0, group, (3,)
    elif edge in ("large", "long"):  # each group sums 4 x 8 x 1025 = 32,800 elements
        n, channels, spatial = 2, 4 * group, (8, 1025)
    else:
        channels = group * draw(st.integers(1, max(1, max_channels // group)))
        spatial = tuple(draw(st.lists(_side(spec), min_size=0, max_size=3)))
        n = draw(st.integers(1, 2))
    x = Tensor(draw(arrays(dtype, (n, channels, *spatial), spec.domain)))
    with directed.ordinary_values():
        weight = _optional_parameter(draw, dtype, (channels,), _affine_domain(spec))
        bias = _optional_parameter(draw, dtype, (channels,), _affine_domain(spec))
    hxw = int(np.prod(spatial)) if spatial else 1
    return Call(op, (x, weight, bias, n, channels, hxw, group, attr(draw, spec, "eps")))
