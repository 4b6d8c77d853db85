"""Signatures of reflection and replication padding (the padding modes of F.pad other than constant)."""

from __future__ import annotations

import math

from hypothesis import reject
from hypothesis import strategies as st

from . import Call, Tensor, attr, directed, param, signature
from .shapes import EDGE_SIDE
from .values import arrays

_MAX_SIDE = {1: 12, 2: 8, 3: 5}
"""Largest input side drawn per number of padded dims (beyond the largest pad: reflection needs pad < side)."""


def _lead_and_spatial(draw, dims: int) -> tuple[list[int], list[int] | None]:
    """The leading dims (N, C) or (C,) and, when a directive forces them, the padded dims.

    A model's: images (2, 16, 14, 14) for 2-d padding, sequences (2, 16, 64) for 1-d (no model
    shape for 3-d). Large: LARGE_SHAPES of rank dims + 2. Empty: a batch of 0. Edge values: sides
    drawn as usual, but at least EDGE_SIDE elements, so the input holds every edge value.
    """
    real = directed.model()
    if real is not None:
        if dims == 3 or (real["rank"] == 4) != (dims == 2):
            reject()  # images for 2-d padding, sequences for 1-d
        spatial = [real["side"]] * 2 if dims == 2 else [real["hidden"]]
        return [real["batch"], real["channels"]], spatial
    state = directed.active()
    shape = state.directive.shape if state is not None else None
    if shape == "large":
        directed.consume("shape")
        large = list(directed.LARGE_SHAPES[dims + 2])
        return large[:2], large[2:]
    channels = draw(st.integers(1, 3))
    if shape == "empty":
        directed.consume("shape")
        return [0, channels], None
    if draw(st.integers(0, 3)) == 0:
        return [channels], None
    return [draw(st.integers(1, 3)), channels], None


@signature("pad_nd")
def pad_nd(draw, spec, dtype, op):
    """op(self, padding): reflection or replication padding of the last ``dims`` dims.

    params: ``dims`` (1, 2 or 3), ``mode`` ("reflect" or "replicate"). attrs: ``padding``,
    the allowed pad values, drawn per side (negative ones crop). Input (N, C, *sides) or
    unbatched (C, *sides) a quarter of the time, N and C <= 3; each side is drawn after its
    pads, so that eager accepts them: reflection needs each pad < side, and every output
    side is >= 1 (eager also allows an empty output side when another is >= 1; not drawn).
    Under a directive that forces the sides, the pads are drawn to fit them instead.
    """
    dims = param(spec, "dims", 2)
    reflect = param(spec, "mode", "reflect") == "reflect"
    if param(spec, "mode", "reflect") not in ("reflect", "replicate"):
        raise ValueError(f"{spec.source}: params.mode must be 'reflect' or 'replicate'")
    lead, forced = _lead_and_spatial(draw, dims)

    def fits(n: int, left: int, right: int) -> bool:
        return n + left + right >= 1 and not (reflect and (left >= n or right >= n))

    spatial, pads = [], []
    for axis in range(dims):
        if forced is not None:
            n = forced[axis]
            left = attr(draw, spec, "padding", 0, keep=lambda v, n=n: fits(n, v, 0))
            right = attr(draw, spec, "padding", 0, keep=lambda v, n=n, left=left: fits(n, left, v))
        else:
            left = attr(draw, spec, "padding", 0)
            right = attr(draw, spec, "padding", 0)
            low = max(1, 1 - left - right, max(left, right) + 1 if reflect else 1)
            n = draw(st.integers(low, max(low, _MAX_SIDE[dims])))
        spatial.append(n)
        pads.append((left, right))
    state = directed.active()
    if state is not None and state.directive.shape == "edges" and forced is None:
        # Room for every edge value: grow the last side (pads stay valid: sides only grow).
        directed.consume("shape")
        rest = math.prod(lead[-1:]) * math.prod(spatial[:-1])
        spatial[-1] = max(spatial[-1], -(-EDGE_SIDE // rest))
    padding = [p for left_right in reversed(pads) for p in left_right]  # last dim's (left, right) first
    x = Tensor(draw(arrays(dtype, (*lead, *spatial), spec.domain)))
    return Call(op, (x, padding))
