"""Signatures of upsample (interpolation) ops: the ``.vec`` overloads torch.export produces; grid_sampler_2d."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from . import Call, Tensor, attr, directed, param, signature
from .shapes import shapes
from .values import arrays

_MAX_SIDE = {1: 10, 2: 10, 3: 6}
"""Largest input side per number of spatial dims (3d volumes stay small)."""


@signature("upsample")
def upsample(draw, spec, dtype, op):
    """op(input, output_size, [align_corners,] scale_factors), exactly one of the sizes given.

    params: ``dims`` (spatial dims: 1, 2 or 3), ``align_corners`` (true when the op
    takes that argument: linear, bilinear, trilinear, bicubic). attrs:
    ``scale_factors`` (allowed factors, drawn per dim; the input side is drawn so the
    output side floor(side * factor) is >= 1), ``align_corners``. Half the calls give
    ``output_size`` instead (each side 1..2 * max side: down- and upsampling), which
    is what F.interpolate(size=...) exports; F.interpolate(scale_factor=...) exports
    the scale factors. Input is (N, C, *spatial) with N, C <= 3 and sides <= 10 (3d:
    6). uint8 bilinear/bicubic with 3 channels never resizes to 1x1 (eager fails an
    internal assert there).
    """
    dims = param(spec, "dims", 2)
    has_align_corners = param(spec, "align_corners", False)
    max_side = _MAX_SIDE[dims]
    use_scales = draw(st.booleans())
    spatial, output_size, scale_factors = [], [], []
    for _ in range(dims):
        if use_scales:
            factor = float(attr(draw, spec, "scale_factors"))
            low = max(1, math.ceil(1 / factor))
            while int(low * factor) < 1:  # guard the float product near integers
                low += 1
            n = draw(st.integers(min(low, max_side), max_side)) if low <= max_side else low
            scale_factors.append(factor)
            spatial.append(n)
        else:
            spatial.append(draw(st.integers(1, max_side)))
            output_size.append(draw(st.integers(1, 2 * max_side)))
    batch = draw(st.integers(1, 3))
    channels = draw(st.integers(1, 3))
    if dtype == "uint8" and dims == 2 and has_align_corners and channels == 3:
        out = output_size if not use_scales else [int(n * f) for n, f in zip(spatial, scale_factors)]
        if out == [1, 1]:
            channels = 2
    x = Tensor(draw(arrays(dtype, (batch, channels, *spatial), spec.domain)))
    sizes = (None, scale_factors) if use_scales else (output_size, None)
    if has_align_corners:
        align_corners = attr(draw, spec, "align_corners", False)
        return Call(op, (x, sizes[0], align_corners, sizes[1]))
    return Call(op, (x, sizes[0], sizes[1]))


HALF_PLANE = 32768
"""Eager's half-type grid sampler gathers with int16 offsets: it reads the wrong elements (or past the
input) of a plane larger than this (see the op spec's notes)."""


@signature("grid_sampler")
def grid_sampler(draw, spec, dtype, op):
    """grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners): input (N, C, H, W)
    with H x W from the drawn 2-d shapes (sides >= 1; the edge set's large and real-world ones too),
    N in 0-2 and C in 1-3; grid (N, Ho, Wo, 2) with Ho, Wo in 0-6 (sizes 0 and 1 less often) and
    values from the op's domain divided by 4 ([-2, 2] with NaN and infinities for
    "small_with_specials": inside and outside [-1, 1]), half of the time snapped to multiples of 1/8
    (pixel centers and corners, and ties of the nearest mode). attrs: ``interpolation_mode``,
    ``padding_mode``, ``align_corners``. Half types keep H x W <= 32768 (eager's int16 gather offsets).
    """
    h, w = draw(shapes(2, 2, 1))
    if dtype in ("float16", "bfloat16") and h * w > HALF_PLANE:
        h = HALF_PLANE // w
    # Sizes of 1 and 0 in a third of the draws or fewer: an output with such a dim is described by
    # the meta kernel, here a Python decomposition that costs ten times the rest of the case.
    n, c = draw(st.sampled_from([2, 1, 2, 0])), draw(st.sampled_from([2, 3, 1]))
    ho, wo = (draw(st.sampled_from([2, 3, 4, 5, 6, 1, 0])) for _ in range(2))
    state = directed.active()
    if state is not None and state.directive.shape == "empty":  # spatial sides must stay >= 1: an empty batch
        directed.consume("shape")
        n = 0
    x = Tensor(draw(arrays(dtype, (n, c, h, w), spec.domain)))
    g = draw(arrays(dtype, (n, ho, wo, 2), spec.domain))
    with np.errstate(invalid="ignore", over="ignore"):
        quarter = g.astype(np.float64) / 4
        if draw(st.booleans()):
            quarter = np.round(quarter * 8) / 8
        grid = Tensor(quarter.astype(np.float32).astype(g.dtype) if dtype == "bfloat16" else quarter.astype(g.dtype))
    args = [attr(draw, spec, key) for key in ("interpolation_mode", "padding_mode", "align_corners")]
    return Call(op, (x, grid, *args))
