"""Signatures of the FFT ops: _fft_r2c (real in, complex out) and _fft_c2r (complex in, real out).

Both transform over ``dim``, one to three distinct non-negative dims (ATen's internal FFT ops fail
an internal assert on a negative or repeated one; torch.fft wraps them first), the last of which
is the one halved (r2c) or restored (c2r). Every transformed dim has at least one element (oneMKL
refuses an empty signal or batch: "Inconsistent configuration parameters"), so the empty and 0-d
edge cases do not apply. The transformed sizes multiply to at most ``params.max_points`` (default
4096): eager's rounding error grows with the transform's size, and the op's tolerance is stated
for that bound (specs/ops/fft.toml).
"""

from __future__ import annotations

import math

from hypothesis import reject
from hypothesis import strategies as st

from . import Call, Tensor, attr, param, signature
from .shapes import nonneg_dim, shapes
from .values import arrays


def _fft_dims(draw, spec, shape: tuple[int, ...]) -> list[int]:
    """The transformed dims: a last one (a ``dim`` directive's, normalized), then up to two more
    before it in a drawn order, each only while the transformed sizes stay within max_points."""
    rank = len(shape)
    cap = param(spec, "max_points", 4096)
    last = draw(nonneg_dim(rank))
    if shape[last] > cap:
        # a directed shape with a longer side (the large_finite case's 4,099) does not apply: the
        # report counts it among the cases that do not (the large case's sides are primes below 200)
        reject()
    others = [d for d in range(rank) if d != last]
    extra = draw(st.lists(st.sampled_from(others), unique=True, max_size=min(2, len(others)))) if others else []
    dims, points = [], shape[last]
    for d in extra:
        if points * shape[d] <= cap:
            dims.append(d)
            points *= shape[d]
    return [*dims, last]


@signature("fft_r2c")
def fft_r2c(draw, spec, dtype, op):
    """_fft_r2c(self, dim, normalization, onesided): a real tensor of rank 1 to ``max_rank`` (4)
    with values from the op's domain; attrs normalization (0, 1, 2) and onesided."""
    shape = tuple(draw(shapes(1, param(spec, "max_rank", 4), min_side=1)))
    dims = _fft_dims(draw, spec, shape)
    x = draw(arrays(dtype, shape, spec.domain))
    return Call(op, (Tensor(x), dims, attr(draw, spec, "normalization"), attr(draw, spec, "onesided")))


@signature("fft_c2r")
def fft_c2r(draw, spec, dtype, op):
    """_fft_c2r(self, dim, normalization, last_dim_size): a complex onesided spectrum, each part
    from the op's domain (not necessarily Hermitian: the transform reads the half it needs, and
    oneMKL and pocketfft agree on such input to float64's rounding); last_dim_size is 2(m - 1) or
    2(m - 1) + 1 for the m elements along the last dim (at least 1)."""
    shape = tuple(draw(shapes(1, param(spec, "max_rank", 4), min_side=1)))
    dims = _fft_dims(draw, spec, shape)
    m = shape[dims[-1]]
    last_dim_size = max(1, 2 * (m - 1) + draw(st.integers(0, 1)))
    if math.prod(shape[d] for d in dims[:-1]) * last_dim_size > 2 * param(spec, "max_points", 4096):
        last_dim_size = max(1, 2 * (m - 1))  # the output's points stay within the bound too (to a factor of 2)
    z = draw(arrays(dtype, shape, spec.domain))
    return Call(op, (Tensor(z), dims, attr(draw, spec, "normalization"), last_dim_size))
