"""Signatures of pooling ops: windowed pooling (max, avg), adaptive pooling and col2im (fold)."""

from __future__ import annotations

import math

from hypothesis import strategies as st

from conformance.api.scalar_type import is_integral

from . import Call, Tensor, attr, directed, param, signature
from .shapes import EDGE_SIDE
from .values import arrays

_MAX_SIDE = {1: 40, 2: 10, 3: 6}
"""Largest spatial side drawn per number of spatial dims (3d volumes stay small; 1d sequences reach
past two SIMD vectors, where eager's sums take their vector path)."""


def _domain(spec, dtype: str) -> str:
    if is_integral(dtype):
        return param(spec, "int_domain", spec.domain)
    return spec.domain


def _edge_shape(spec) -> str | None:
    """The edge set's shape directive in force ("edges", "empty" or "large"), marked consumed, for an
    op whose spec opts in with ``params.edge_shapes``; None otherwise (the directive then does not
    apply, as for the pooling specs that have not opted in)."""
    state = directed.active()
    kind = state.directive.shape if state is not None else None
    if kind not in ("edges", "empty", "large") or not param(spec, "edge_shapes", False):
        return None
    directed.consume("shape")
    return kind


def _input(draw, spec, dtype: str, spatial: list[int], real: dict | None = None, edge: str | None = None) -> Tensor:
    """(N, C, *spatial), or unbatched (C, *spatial) a quarter of the time; N, C <= 3. A model's:
    (2, 16, *spatial). Edge shapes: LARGE_SHAPES' (N, C) ("large"), N = 0 ("empty"), and enough
    channels for every edge value ("edges")."""
    if real is not None:
        return Tensor(draw(arrays(dtype, (real["batch"], real["channels"], *spatial), _domain(spec, dtype))))
    if edge == "large":
        lead = list(directed.LARGE_SHAPES[len(spatial) + 2][:2])
        return Tensor(draw(arrays(dtype, tuple(lead + spatial), _domain(spec, dtype))))
    channels = draw(st.integers(1, 3))
    lead = [channels] if draw(st.integers(0, 3)) == 0 else [draw(st.integers(1, 3)), channels]
    if edge == "empty":
        lead = [0, channels]
    elif edge == "edges":
        lead = [1, max(channels, -(-EDGE_SIDE // math.prod(spatial)))]
    return Tensor(draw(arrays(dtype, tuple(lead + spatial), _domain(spec, dtype))))


def _large_sides(dims: int) -> list[int]:
    """The spatial sides of LARGE_SHAPES for an (N, C, *spatial) input."""
    return list(directed.LARGE_SHAPES[dims + 2][2:])


def _output_size(n: int, k: int, p: int, s: int, d: int, ceil_mode: bool) -> int:
    """pooling_output_shape of aten/src/ATen/native/Pool.h."""
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _has_empty_window(n: int, k: int, p: int, s: int, d: int, out: int) -> bool:
    """Whether some dilated window in the padding steps over every input element."""
    for o in range(out):
        start = o * s - p
        first = start + (-start + d - 1) // d * d if start < 0 else start
        if first >= min(start + (k - 1) * d + 1, n):
            return True
    return False


@signature("pool")
def pool(draw, spec, dtype, op):
    """op(self, kernel_size, stride, padding, [dilation], ceil_mode, [count_include_pad, divisor_override]).

    params: ``dims`` (spatial dims: 1, 2 or 3), ``kind`` ("max": max pooling with a
    dilation argument; "avg": average pooling with count_include_pad and
    divisor_override), ``int_domain`` (value domain for integer dtypes, default the
    op's). attrs, each drawn per spatial dim: ``kernel_size``, ``stride`` (the empty
    tuple stands for ``[]``, meaning stride = kernel_size), ``padding``, ``dilation``
    (max only); and ``ceil_mode``, ``count_include_pad``, ``divisor_override`` (avg
    only; ``false`` stands for None, which TOML cannot spell; without divisor_override
    attrs, as for avg_pool1d, the call has no such argument). Paddings are kept to at
    most half the kernel, input sides are
    drawn so that every output side is >= 1 (avg_pool3d also needs input >= kernel),
    and a max-pool window never lies wholly in padding and dilation gaps (eager then
    returns an index outside the plane). ``edge_shapes`` (true: the edge set's edge-value,
    empty and large directives apply, see _input; the large one takes LARGE_SHAPES' sides).
    """
    dims = param(spec, "dims", 2)
    kind = param(spec, "kind", "max")
    if kind not in ("max", "avg"):
        raise ValueError(f"{spec.source}: params.kind must be 'max' or 'avg', got {kind!r}")
    max_side = _MAX_SIDE[dims]
    real = directed.model()
    if real is not None:
        if dims != (2 if real["rank"] == 4 else 1):
            from hypothesis import reject

            reject()  # images for 2-d pooling, sequences for 1-d; no model shape for 3-d
        max_side = real["side"] if dims == 2 else real["hidden"]
    edge = _edge_shape(spec)
    if edge == "large":
        max_side = max(_large_sides(dims))
    # An attribute directive's value must fit: stride [] is the empty-stride spelling, and a forced
    # padding needs a kernel of at least twice it.
    state = directed.active()
    forced = state.directive.attrs if state is not None else {}
    if forced.get("stride", None) == ():
        empty_stride = True
        directed.consume("attr:stride")
    else:
        empty_stride = "stride" not in forced and () in spec.attrs.get("stride", ()) and draw(st.integers(0, 3)) == 0
    min_kernel = 2 * forced.get("padding", 0)
    ceil_mode = attr(draw, spec, "ceil_mode", False)
    kernel, stride, padding, dilation, spatial = [], [], [], [], []
    for axis in range(dims):
        k = attr(draw, spec, "kernel_size", keep=lambda v: min_kernel <= v <= max_side)
        if real is not None and 2 in spec.attrs.get("kernel_size", ()) and "kernel_size" not in forced:
            k = 2  # a model's downsampling: 2x2 windows, stride 2 (unless the case forces others)
        d = attr(draw, spec, "dilation", 1, keep=lambda v, k=k: (k - 1) * v + 1 <= max_side) if kind == "max" else 1
        effective = (k - 1) * d + 1
        # Eager's shape checks: pad <= kernel / 2 (undilated), and <= effective kernel / 2.
        p = attr(draw, spec, "padding", 0, keep=lambda v, k=k: v <= k // 2)
        s = k if empty_stride else attr(draw, spec, "stride", 1, keep=lambda v: v != ())
        if real is not None and k in spec.attrs.get("stride", ()) and "stride" not in forced:
            s = k
        low = max(1, effective - 2 * p, k if (kind == "avg" and dims == 3) else 1)
        if edge == "large":
            n = max(low, _large_sides(dims)[axis])
        else:
            n = max(low, max_side) if real is not None else draw(st.integers(low, max(low, max_side)))
        out = _output_size(n, k, p, s, d, ceil_mode)
        if kind == "max" and _has_empty_window(n, k, p, s, d, out):
            p, n = 0, max(n, effective)
        kernel.append(k)
        stride.append(s)
        padding.append(p)
        dilation.append(d)
        spatial.append(n)
    x = _input(draw, spec, dtype, spatial, real, edge)
    stride_arg = [] if empty_stride else stride
    if kind == "max":
        return Call(op, (x, kernel, stride_arg, padding, dilation, ceil_mode))
    count_include_pad = attr(draw, spec, "count_include_pad", True)
    if "divisor_override" not in spec.attrs:  # avg_pool1d has no such argument
        return Call(op, (x, kernel, stride_arg, padding, ceil_mode, count_include_pad))
    divisor_override = attr(draw, spec, "divisor_override", None)
    if divisor_override is False:  # TOML has no null: false stands for None
        divisor_override = None
    return Call(op, (x, kernel, stride_arg, padding, ceil_mode, count_include_pad, divisor_override))


@signature("adaptive_pool")
def adaptive_pool(draw, spec, dtype, op):
    """op(self, output_size): adaptive pooling to ``output_size``.

    params: ``dims`` (spatial dims, 1, 2 or 3), ``global`` (true: a third of the output
    sides are 1, global pooling, which eager's adaptive_avg_pool1d computes as a mean).
    Each output side is drawn from 1..input side most of the time, and sometimes larger
    than the input (bins then overlap and repeat input elements). A model's: global
    pooling of its images (2d) or sequences (1d). ``edge_shapes`` as for ``pool``.
    """
    dims = param(spec, "dims", 2)
    max_side = _MAX_SIDE[dims]
    real = directed.model()
    if real is not None:
        if dims != (2 if real["rank"] == 4 else 1):
            from hypothesis import reject

            reject()  # images for 2-d pooling, sequences for 1-d; no model shape for 3-d
        spatial = [real["side"]] * 2 if dims == 2 else [real["hidden"]]
        return Call(op, (_input(draw, spec, dtype, spatial, real), [1] * dims))
    edge = _edge_shape(spec)
    if edge == "large":
        spatial = _large_sides(dims)
    else:
        spatial = [draw(st.integers(1, max_side)) for _ in range(dims)]
    output_size = []
    for n in spatial:
        if param(spec, "global", False) and draw(st.integers(0, 2)) == 0:
            output_size.append(1)
            continue
        larger = draw(st.integers(0, 4)) == 0
        output_size.append(draw(st.integers(n + 1, n + 3)) if larger else draw(st.integers(1, n)))
    x = _input(draw, spec, dtype, spatial, edge=edge)
    return Call(op, (x, output_size))


def _blocks(out: int, k: int, d: int, p: int, s: int) -> int:
    """Sliding blocks along one side (im2col_shape_check.h; Python's // rounds as div_rtn)."""
    return (out + 2 * p - d * (k - 1) - 1) // s + 1


def _side_for_blocks(blocks: int, k: int, d: int, p: int, s: int) -> int:
    """The smallest output side with ``blocks`` sliding blocks (at least 1)."""
    side = (blocks - 1) * s + d * (k - 1) + 1 - 2 * p
    while side < 1 or _blocks(side, k, d, p, s) < blocks:
        side += 1
    return side


@signature("col2im")
def col2im(draw, spec, dtype, op):
    """col2im(self, output_size, kernel_size, dilation, padding, stride): nn.Fold.

    attrs, each drawn per spatial dim: ``kernel_size``, ``dilation``, ``padding``,
    ``stride``. Each output side is drawn up to 10 with at least one sliding block
    (side + 2 * padding >= the dilated kernel); the input is (N, C * kh * kw, L) with L
    the number of blocks, or unbatched (C * kh * kw, L) a quarter of the time, N, C <= 3.
    Directed shapes: a model's (the fold of a 3x3 'same' unfold of (2, 16, 14, 14)), a
    large one (>= LARGE_ELEMENTS input elements, blocks in an odd grid), an empty batch,
    and for edge values an input of at least EDGE_SIDE elements.
    """
    real = directed.model()
    if real is not None:
        if real["rank"] != 4:
            from hypothesis import reject

            reject()  # fold rebuilds images
        k, side = real["kernel"], real["side"]
        x = Tensor(draw(arrays(dtype, (real["batch"], real["channels"] * k * k, side * side), spec.domain)))
        return Call(op, (x, [side, side], [k, k], [1, 1], [k // 2, k // 2], [1, 1]))
    state = directed.active()
    shape = state.directive.shape if state is not None else None
    kernel, dilation, padding, stride, out = [], [], [], [], []
    for _ in range(2):
        k = attr(draw, spec, "kernel_size")
        d = attr(draw, spec, "dilation")
        p = attr(draw, spec, "padding")
        s = attr(draw, spec, "stride")
        low = max(1, d * (k - 1) + 1 - 2 * p)
        kernel.append(k)
        dilation.append(d)
        padding.append(p)
        stride.append(s)
        out.append(draw(st.integers(low, max(low, 10))))
    channels = draw(st.integers(1, 3))
    lead = [] if draw(st.integers(0, 3)) == 0 else [draw(st.integers(1, 3))]
    if shape == "empty":
        directed.consume("shape")
        lead = [0]
    elif shape in ("large", "edges"):
        directed.consume("shape")
        lead = [2] if shape == "large" else lead
        rows = math.prod(lead) * channels * kernel[0] * kernel[1]
        needed = -(-(directed.LARGE_ELEMENTS if shape == "large" else EDGE_SIDE) // rows)
        if shape == "large":
            # An odd grid of blocks (no vector width divides a row), about square.
            bh = math.isqrt(needed) | 1
            bw = -(-needed // bh) | 1
            out = [_side_for_blocks(b, k, d, p, s) for b, k, d, p, s in zip((bh, bw), kernel, dilation, padding, stride)]
        else:
            while _blocks(out[0], kernel[0], dilation[0], padding[0], stride[0]) * _blocks(out[1], kernel[1], dilation[1], padding[1], stride[1]) < needed:
                out[1] += 1
    blocks = [_blocks(o, k, d, p, s) for o, k, d, p, s in zip(out, kernel, dilation, padding, stride)]
    x = Tensor(draw(arrays(dtype, (*lead, channels * kernel[0] * kernel[1], blocks[0] * blocks[1]), spec.domain)))
    return Call(op, (x, out, kernel, dilation, padding, stride))
