"""Signatures of upsample (interpolation) ops: the ``.vec`` overloads torch.export produces."""

from __future__ import annotations

import math

from hypothesis import strategies as st

from . import Call, Tensor, attr, param, signature
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
