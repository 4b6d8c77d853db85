"""Signatures of pooling ops: windowed pooling (max, avg) and adaptive pooling."""

from __future__ import annotations

from hypothesis import strategies as st

from conformance.api.scalar_type import is_integral

from . import Call, Tensor, attr, directed, param, signature
from .values import arrays

_MAX_SIDE = {1: 10, 2: 10, 3: 6}
"""Largest spatial side drawn per number of spatial dims (3d volumes stay small)."""


def _domain(spec, dtype: str) -> str:
    if is_integral(dtype):
        return param(spec, "int_domain", spec.domain)
    return spec.domain


def _input(draw, spec, dtype: str, spatial: list[int], real: dict | None = None) -> Tensor:
    """(N, C, *spatial), or unbatched (C, *spatial) a quarter of the time; N, C <= 3. A model's:
    (2, 16, *spatial)."""
    if real is not None:
        return Tensor(draw(arrays(dtype, (real["batch"], real["channels"], *spatial), _domain(spec, dtype))))
    channels = draw(st.integers(1, 3))
    lead = [channels] if draw(st.integers(0, 3)) == 0 else [draw(st.integers(1, 3)), channels]
    return Tensor(draw(arrays(dtype, tuple(lead + spatial), _domain(spec, dtype))))


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
    only; ``false`` stands for None, which TOML cannot spell). Paddings are kept to at most half the kernel, input sides are
    drawn so that every output side is >= 1 (avg_pool3d also needs input >= kernel),
    and a max-pool window never lies wholly in padding and dilation gaps (eager then
    returns an index outside the plane).
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
    empty_stride = () in spec.attrs.get("stride", ()) and draw(st.integers(0, 3)) == 0
    ceil_mode = attr(draw, spec, "ceil_mode", False)
    kernel, stride, padding, dilation, spatial = [], [], [], [], []
    for _ in range(dims):
        k = attr(draw, spec, "kernel_size", keep=lambda v: v <= max_side)
        if real is not None and 2 in spec.attrs.get("kernel_size", ()):
            k = 2  # a model's downsampling: 2x2 windows, stride 2
        d = attr(draw, spec, "dilation", 1, keep=lambda v, k=k: (k - 1) * v + 1 <= max_side) if kind == "max" else 1
        effective = (k - 1) * d + 1
        # Eager's shape checks: pad <= kernel / 2 (undilated), and <= effective kernel / 2.
        p = attr(draw, spec, "padding", 0, keep=lambda v, k=k: v <= k // 2)
        s = k if empty_stride else attr(draw, spec, "stride", 1, keep=lambda v: v != ())
        if real is not None and k in spec.attrs.get("stride", ()):
            s = k
        low = max(1, effective - 2 * p, k if (kind == "avg" and dims == 3) else 1)
        n = max(low, max_side) if real is not None else draw(st.integers(low, max(low, max_side)))
        out = _output_size(n, k, p, s, d, ceil_mode)
        if kind == "max" and _has_empty_window(n, k, p, s, d, out):
            p, n = 0, max(n, effective)
        kernel.append(k)
        stride.append(s)
        padding.append(p)
        dilation.append(d)
        spatial.append(n)
    x = _input(draw, spec, dtype, spatial, real)
    stride_arg = [] if empty_stride else stride
    if kind == "max":
        return Call(op, (x, kernel, stride_arg, padding, dilation, ceil_mode))
    count_include_pad = attr(draw, spec, "count_include_pad", True)
    divisor_override = attr(draw, spec, "divisor_override", None)
    if divisor_override is False:  # TOML has no null: false stands for None
        divisor_override = None
    return Call(op, (x, kernel, stride_arg, padding, ceil_mode, count_include_pad, divisor_override))


@signature("adaptive_pool")
def adaptive_pool(draw, spec, dtype, op):
    """op(self, output_size): adaptive pooling to ``output_size``.

    params: ``dims`` (spatial dims, 2 or 3). Each output side is drawn from
    1..input side most of the time, and sometimes larger than the input (bins then
    overlap and repeat input elements).
    """
    dims = param(spec, "dims", 2)
    max_side = _MAX_SIDE[dims]
    spatial = [draw(st.integers(1, max_side)) for _ in range(dims)]
    output_size = []
    for n in spatial:
        larger = draw(st.integers(0, 4)) == 0
        output_size.append(draw(st.integers(n + 1, n + 3)) if larger else draw(st.integers(1, n)))
    x = _input(draw, spec, dtype, spatial)
    return Call(op, (x, output_size))
