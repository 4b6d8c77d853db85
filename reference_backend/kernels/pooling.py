"""Pooling: max (with indices), average and adaptive pooling over 1, 2 or 3 spatial dims; col2im.

Every kernel follows ATen's CPU loops exactly (aten/src/ATen/native/cpu/MaxPoolKernel.cpp,
AvgPoolKernel.cpp, AveragePool3d.cpp, AdaptiveAvgPoolKernel.cpp,
AdaptiveMaxPoolKernel.cpp), vectorized over all output positions at once: a loop
runs only over the kernel taps, in ATen's scan order (depth, then height, then
width), so float sums round exactly as ATen's sequential accumulation does. The
exception is adaptive_avg_pool1d to one output: eager takes a mean there, whose
cascade order (cpu/SumKernel.cpp) depends on the SIMD width and is not modelled.

Inputs are (N, C, *spatial) or unbatched (C, *spatial); leading dims are
flattened into one plane axis. Indices of max pooling are flat offsets within
one input plane (d * H * W + h * W + w), as ATen returns them. The 1d ops are
ATen's own composites: the 2d op on the input unsqueezed to one row.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ._dtypes import bfloat16, cast, float16, float32, int64, is_float, is_int, opmath
from ._registry import kernel

# ---------------------------------------------------------------------------------------------
# shapes and attributes


def _tuple(value, n: int, name: str, *, allow_empty: bool = False) -> tuple[int, ...] | None:
    """An int[n] attribute; ATen accepts one value for all dims (and [] for stride)."""
    if isinstance(value, (int, np.integer)):
        value = [int(value)]
    value = [int(v) for v in value]
    if not value:
        if allow_empty:
            return None
        raise ValueError(f"{name} must have 1 or {n} elements, got []")
    if len(value) == 1:
        return tuple(value) * n
    if len(value) != n:
        raise ValueError(f"{name} must have 1 or {n} elements, got {value}")
    return tuple(value)


def _planes(x: np.ndarray, nd: int, op: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """``x`` as (planes, *spatial) plus the leading shape to restore."""
    if x.ndim not in (nd + 1, nd + 2):
        raise ValueError(f"{op}: expected a {nd + 1}D or {nd + 2}D input, got shape {list(x.shape)}")
    lead = x.shape[: x.ndim - nd]
    # The batch dim may be empty; channels and spatial dims may not (Pool.h shape checks).
    if any(s == 0 for s in x.shape[x.ndim - nd - 1 :]):
        raise ValueError(f"{op}: non-batch dimensions must be non-empty, got shape {list(x.shape)}")
    return x.reshape((-1,) + x.shape[x.ndim - nd :]), lead


def _output_size(size: int, k: int, pad: int, stride: int, dil: int, ceil_mode: bool) -> int:
    """pooling_output_shape (aten/src/ATen/native/Pool.h), including its ceil_mode rule."""
    if stride <= 0:
        raise ValueError("pooling: stride must be greater than zero")
    if pad < 0:
        raise ValueError(f"pooling: pad must be non-negative, got {pad}")
    if pad > ((k - 1) * dil + 1) // 2:
        raise ValueError(f"pooling: pad should be at most half of effective kernel size, got pad={pad}, kernel_size={k}, dilation={dil}")
    out = (size + 2 * pad - dil * (k - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    # In ceil mode the last window must start inside the input or its left padding.
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _pool_geometry(x, nd, kernel_size, stride, padding, dilation, ceil_mode, op):
    k = _tuple(kernel_size, nd, "kernel_size")
    s = _tuple(stride, nd, "stride", allow_empty=True) or k
    p = _tuple(padding, nd, "padding")
    d = _tuple(dilation, nd, "dilation")
    if any(v <= 0 for v in k):
        raise ValueError(f"{op}: kernel size should be greater than zero, got {list(k)}")
    if any(v <= 0 for v in s):
        raise ValueError(f"{op}: stride should be greater than zero, got {list(s)}")
    if any(v <= 0 for v in d):
        raise ValueError(f"{op}: dilation should be greater than zero, got {list(d)}")
    if any(pi > ki // 2 for pi, ki in zip(p, k)):
        # Eager's pool2d/pool3d shape checks compare against the undilated kernel
        # (torch 2.13: "pad should be smaller than or equal to half of kernel size").
        raise ValueError(f"{op}: pad should be at most half of kernel size, got padding={list(p)}, kernel_size={list(k)}")
    planes, lead = _planes(x, nd, op)
    spatial = planes.shape[1:]
    out = tuple(_output_size(n, ki, pi, si, di, ceil_mode) for n, ki, pi, si, di in zip(spatial, k, p, s, d))
    if any(o < 1 for o in out):
        raise ValueError(f"{op}: output size is too small: input {list(spatial)}, output {list(out)}")
    return planes, lead, k, s, p, d, out


def _padded(planes, pads_lo, pads_hi, fill):
    """``planes`` padded on each spatial side by the given amounts with ``fill``."""
    widths = [(0, 0)] + [(lo, hi) for lo, hi in zip(pads_lo, pads_hi)]
    return np.pad(planes, widths, constant_values=fill)


def _tap_views(padded, k, s, d, out):
    """One strided view per kernel tap, in ATen's scan order, each of shape (planes, *out)."""
    strides = (padded.strides[0],) + tuple(st * si for st, si in zip(padded.strides[1:], s))
    shape = (padded.shape[0],) + tuple(out)
    for tap in np.ndindex(*k):
        origin = padded[(slice(None),) + tuple(slice(t * di, None) for t, di in zip(tap, d))]
        yield tap, as_strided(origin, shape, strides, writeable=False)


# ---------------------------------------------------------------------------------------------
# max pooling


def _lowest(dtype: np.dtype):
    # MaxPoolKernel.cpp starts every window at -inf (floats) or numeric_limits::min (integers).
    return -np.inf if is_float(dtype) else np.iinfo(dtype).min


def _max_pool(self, nd, kernel_size, stride, padding, dilation, ceil_mode, op, *, with_indices=True):
    x = np.asarray(self)
    dtype = x.dtype
    if not (is_float(dtype) or is_int(dtype)):
        raise TypeError(f"{op}: not implemented for {dtype}")
    planes, lead, k, s, p, d, out = _pool_geometry(
        x, nd, kernel_size, stride, padding, dilation, ceil_mode, op
    )
    spatial = planes.shape[1:]
    compute = float32 if dtype in (float16, bfloat16) else dtype  # half types compare in float (exact)
    planes = planes.astype(compute, copy=False)
    # Pad past the last window too (ceil mode); padded taps hold the start value and are never chosen.
    hi = [max(0, (o - 1) * si + (ki - 1) * di + 1 - pi - n) for o, si, ki, di, pi, n in zip(out, s, k, d, p, spatial)]
    lowest = _lowest(dtype)
    padded = np.ascontiguousarray(_padded(planes, p, hi, lowest))
    taps = list(_tap_views(padded, k, s, d, out))

    values = taps[0][1].copy()
    for _, view in taps[1:]:
        np.maximum(values, view, out=values)  # NaN propagates, as ATen's `val > max || isnan(val)` does
    # np.maximum may return either zero of a -0.0/0.0 tie; ATen keeps the first in scan order,
    # so values alone suffice unless the input holds a -0.0 that may tie with a 0.0.
    signed_zero_tie = is_float(compute) and (values == 0).any() and (np.signbit(planes) & (planes == 0)).any()
    if not with_indices and not signed_zero_tie:
        return cast(values.reshape(lead + out), dtype)

    # Which tap wins, as a small integer per output position. The first tap (scan order) equal
    # to the max wins ties, so walk the taps backwards and let earlier ones overwrite.
    # (best -= hit * (best - n) is a branch-free copyto(best, n, where=hit), several times faster.)
    small = np.uint8 if len(taps) < 256 else np.int32
    best = np.zeros(values.shape, dtype=small)
    hit = np.empty(values.shape, dtype=bool)
    step = np.empty(values.shape, dtype=small)

    def take_where_hit(number):
        np.subtract(best, small(number), out=step)
        np.multiply(step, hit.view(np.uint8), out=step)
        np.subtract(best, step, out=best)

    for number in range(len(taps) - 1, -1, -1):
        np.equal(taps[number][1], values, out=hit)
        take_where_hit(number)
    if is_float(compute) and np.isnan(values).any():
        # A NaN replaces the running max every time, so the *last* NaN in scan order wins.
        for number, (_, view) in enumerate(taps):
            np.isnan(view, out=hit)
            take_where_hit(number)

    # Flat input offset = window origin (may lie in the padding) + the winning tap's offset.
    plane_strides = [math.prod(spatial[i + 1 :]) for i in range(nd)]
    origins = np.meshgrid(*[np.arange(o) * si - pi for o, si, pi in zip(out, s, p)], indexing="ij")
    origin_flat = sum(o * ps for o, ps in zip(origins, plane_strides))
    tap_offsets = np.array([sum(t * di * ps for t, di, ps in zip(tap, d, plane_strides)) for tap, _ in taps], dtype=int64)
    indices = tap_offsets.take(best)
    indices += origin_flat

    # A window whose values all equal the start value keeps ATen's initial index: its first
    # in-bounds position (the start moved forward by whole dilation steps past the padding).
    # Padded taps hold that same value, so they may have won above; correct those windows.
    firsts, empty = [], []
    for o, si, pi, di, ki, n in zip(out, s, p, d, k, spatial):
        start = np.arange(o) * si - pi
        first = np.where(start < 0, start + (-start + di - 1) // di * di, start)
        firsts.append(first)
        # With dilation a window in the padding can step over the whole input: no tap is in bounds.
        empty.append(first >= np.minimum(start + (ki - 1) * di + 1, n))
    np.equal(values, lowest, out=hit)
    if hit.any():
        first_flat = sum(f * ps for f, ps in zip(np.meshgrid(*firsts, indexing="ij"), plane_strides))
        np.copyto(indices, np.broadcast_to(first_flat, indices.shape), where=hit)
    # Zeros and NaNs are read back at the chosen index, so -0.0/0.0 ties and NaN payloads match
    # ATen. An empty window keeps the start value and an index past the plane (ATen does not check).
    if is_float(compute):
        empty = np.logical_or.reduce(np.meshgrid(*empty, indexing="ij"))
        fix = ((values == 0) | np.isnan(values)) & ~empty
        if fix.any():
            where = np.nonzero(fix)
            values[where] = planes.reshape(planes.shape[0], -1)[where[0], indices[where]]
    if not with_indices:
        return cast(values.reshape(lead + out), dtype)
    return cast(values.reshape(lead + out), dtype), indices.reshape(lead + out)


@kernel("aten.max_pool2d_with_indices.default")
def max_pool2d_with_indices(self, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    return _max_pool(self, 2, kernel_size, stride, padding, dilation, ceil_mode, "max_pool2d_with_indices")


@kernel("aten.max_pool3d_with_indices.default")
def max_pool3d_with_indices(self, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    return _max_pool(self, 3, kernel_size, stride, padding, dilation, ceil_mode, "max_pool3d_with_indices")


@kernel("aten.max_pool2d.default")
def max_pool2d(self, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    # aten/src/ATen/native/Pooling.cpp: the values of max_pool2d_with_indices.
    return _max_pool(self, 2, kernel_size, stride, padding, dilation, ceil_mode, "max_pool2d", with_indices=False)


# ---------------------------------------------------------------------------------------------
# average pooling


def _avg_pool(self, nd, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, op):
    x = np.asarray(self)
    dtype = x.dtype
    allowed = (float32, np.dtype(np.float64), int64) + ((float16, bfloat16) if nd == 2 else ())
    if dtype not in allowed:
        raise TypeError(f"{op}: not implemented for {dtype}")
    if divisor_override is not None and divisor_override == 0:
        raise ZeroDivisionError(f"{op}: divisor must be not zero")
    planes, lead, k, s, p, _, out = _pool_geometry(
        x, nd, kernel_size, stride, padding, (1,), ceil_mode, op
    )
    spatial = planes.shape[1:]
    if nd == 3 and any(n < ki for n, ki in zip(spatial, k)):
        # AveragePool3d.cpp checks the input against the kernel (check_input_size).
        raise ValueError(f"{op}: input image {list(spatial)} smaller than kernel size {list(k)}")

    # Divisors per dim (AvgPoolKernel.cpp): the window clipped to the padded input for
    # count_include_pad, to the input otherwise; the divisor is the product over dims.
    counts = []
    for o, si, ki, pi, n in zip(out, s, k, p, spatial):
        start = np.arange(o, dtype=np.int64) * si - pi
        end = np.minimum(start + ki, n + pi)
        padded_len = end - start
        valid_len = np.minimum(end, n) - np.maximum(start, 0)
        counts.append(padded_len if count_include_pad else valid_len)
    if divisor_override is not None:
        divisor = np.int64(divisor_override)
    else:
        divisor = np.ones((1,) * nd, dtype=np.int64)
        for axis, c in enumerate(counts):
            divisor = divisor * c.reshape([-1 if i == axis else 1 for i in range(nd)])

    acc = opmath(dtype)  # half types accumulate in float (acc_t = opmath_type)
    hi = [max(0, (o - 1) * si + ki - pi - n) for o, si, ki, pi, n in zip(out, s, k, p, spatial)]
    padded = np.ascontiguousarray(_padded(planes.astype(acc, copy=False), p, hi, 0))
    # ATen adds only in-bounds taps, starting from 0; adding the zero padding instead is exact
    # (the running sum is never -0.0 and x + 0.0 == x for every other x).
    total = np.zeros((planes.shape[0],) + out, dtype=acc)
    with np.errstate(over="ignore", invalid="ignore"):  # inf - inf is NaN in ATen too
        for _, view in _tap_views(padded, k, s, (1,) * nd, out):
            total += view
    if is_int(dtype):
        # C++ integer division truncates toward zero.
        q = np.abs(total) // np.abs(divisor)
        result = np.where((total < 0) != (divisor < 0), -q, q)
    else:
        with np.errstate(all="ignore"):
            result = cast(total / divisor.astype(acc), dtype)
        # The output starts at 0 and the rounded mean is added to it, so -0.0 becomes 0.0.
        result[result == 0] = 0
    return cast(result.reshape(lead + out), dtype)


@kernel("aten.avg_pool2d.default")
def avg_pool2d(self, kernel_size, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True, divisor_override=None):
    return _avg_pool(self, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, "avg_pool2d")


@kernel("aten.avg_pool3d.default")
def avg_pool3d(self, kernel_size, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True, divisor_override=None):
    return _avg_pool(self, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, "avg_pool3d")


def _as_2d(x: np.ndarray, op: str) -> np.ndarray:
    """A 1d-pooling input as the 2d ops take it: unsqueeze(-2), as Pooling.cpp and
    AdaptiveAveragePooling.cpp do before calling the 2d op (checkDimRange: 2-D or 3-D)."""
    if x.ndim not in (2, 3):
        raise ValueError(f"{op}: expected a 2D or 3D input, got shape {list(x.shape)}")
    return x[..., None, :]


def _one(value, name: str, op: str) -> int:
    """An int[1] attribute (check1d: exactly one element)."""
    values = [int(value)] if isinstance(value, (int, np.integer)) else [int(v) for v in value]
    if len(values) != 1:
        raise ValueError(f"{op}: {name} must have exactly one element, got {values}")
    return values[0]


@kernel("aten.avg_pool1d.default")
def avg_pool1d(self, kernel_size, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True):
    # Pooling.cpp: avg_pool2d of the input unsqueezed to one row, window (1, k), stride (1, s),
    # padding (0, p), no divisor_override; then squeeze(-2).
    x = _as_2d(np.asarray(self), "avg_pool1d")
    k = _one(kernel_size, "kernel_size", "avg_pool1d")
    s = k if not isinstance(stride, (int, np.integer)) and len(stride) == 0 else _one(stride, "stride", "avg_pool1d")
    p = _one(padding, "padding", "avg_pool1d")
    out = _avg_pool(x, 2, (1, k), (1, s), (0, p), ceil_mode, count_include_pad, None, "avg_pool1d")
    return out[..., 0, :]


# ---------------------------------------------------------------------------------------------
# adaptive pooling


def _bins(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray]:
    """start_index / end_index of aten/src/ATen/native/AdaptivePooling.h: floor(i*in/out), ceil((i+1)*in/out)."""
    i = np.arange(out_size, dtype=np.int64)
    return (i * in_size) // out_size, -((-(i + 1) * in_size) // out_size)


def _adaptive_gather(self, nd, output_size, op, fill):
    """The input gathered into bins: (planes, *out, taps) with taps in scan order, plus bin geometry.

    Bins differ in size by at most one element per dim; taps past a bin's end hold ``fill``.
    """
    x = np.asarray(self)
    out = _tuple(output_size, nd, "output_size")
    if any(o < 0 for o in out):
        raise ValueError(f"{op}: output_size must be non-negative, got {list(out)}")
    planes, lead = _planes(x, nd, op)
    spatial = planes.shape[1:]
    starts, sizes, taps = [], [], []
    for n, o in zip(spatial, out):
        start, end = _bins(n, o)
        starts.append(start)
        sizes.append(end - start)
        taps.append(int((end - start).max()) if o else 1)
    # Per dim: input coordinate of (output i, tap j), clipped into range, and whether it is in the bin.
    coords, inside = [], []
    for start, size, t, n in zip(starts, sizes, taps, spatial):
        j = np.arange(t)
        coords.append(np.minimum(start[:, None] + j[None, :], n - 1))
        inside.append(j[None, :] < size[:, None])
    # Fancy-index to (planes, o1, t1, o2, t2, ...), then move taps last: (planes, *out, *taps).
    index = []
    for axis, c in enumerate(coords):
        shape = [1] * (2 * nd)
        shape[2 * axis], shape[2 * axis + 1] = c.shape
        index.append(c.reshape(shape))
    gathered = planes[(slice(None),) + tuple(index)]
    mask = np.ones((1,) * (2 * nd), dtype=bool)
    for axis, m in enumerate(inside):
        shape = [1] * (2 * nd)
        shape[2 * axis], shape[2 * axis + 1] = m.shape
        mask = mask & m.reshape(shape)
    order = [0] + [1 + 2 * a for a in range(nd)] + [2 + 2 * a for a in range(nd)]
    gathered = gathered.transpose(order)
    mask = np.broadcast_to(mask[None], gathered.shape[:1] + mask.shape).transpose(order)
    gathered = np.where(mask, gathered, fill).reshape(gathered.shape[: 1 + nd] + (math.prod(taps),))
    mask = mask.reshape(gathered.shape)
    return gathered, mask, lead, out, spatial, starts, taps, sizes


def _adaptive_avg(self, nd, output_size, op):
    with np.errstate(all="ignore"):  # overflow and inf - inf behave as in ATen
        return _adaptive_avg_impl(self, nd, output_size, op)


def _adaptive_avg_impl(self, nd, output_size, op):
    dtype = np.asarray(self).dtype
    if not is_float(dtype):
        raise TypeError(f"{op}: not implemented for {dtype}")
    acc = opmath(dtype)
    if nd == 3 and dtype in (float16, bfloat16):
        # Unlike the 2d kernel, eager's 3d kernel (torch 2.13) sums and divides in the half
        # type itself, rounding after every addition and division (checked against eager).
        acc = dtype
    gathered, _, lead, out, _, _, _, sizes = _adaptive_gather(np.asarray(self).astype(acc), nd, output_size, op, 0)
    if gathered.size == 0:
        return np.zeros(lead + out, dtype=dtype)
    if acc == dtype and dtype in (float16, bfloat16):
        total = np.zeros(gathered.shape[:-1], dtype=float32)
        for tap in range(gathered.shape[-1]):
            total = (total + gathered[..., tap].astype(float32)).astype(dtype).astype(float32)
        for axis, size in enumerate(sizes):
            total = (total / size.astype(float32).reshape([-1 if i == axis else 1 for i in range(nd)])).astype(dtype).astype(float32)
        return cast(total.reshape(lead + out), dtype)
    # Sequential accumulation from 0 in scan order (cumsum is sequential); empty taps add 0.0, which is exact.
    total = np.cumsum(gathered, axis=-1)[..., -1] + acc.type(0)
    # ATen divides by each bin extent in turn: sum / kd / kh / kw.
    for axis, size in enumerate(sizes):
        total = total / size.astype(acc).reshape([-1 if i == axis else 1 for i in range(nd)])
    return cast(total.reshape(lead + out), dtype)


@kernel("aten._adaptive_avg_pool2d.default")
def _adaptive_avg_pool2d(self, output_size):
    return _adaptive_avg(self, 2, output_size, "_adaptive_avg_pool2d")


@kernel("aten._adaptive_avg_pool3d.default")
def _adaptive_avg_pool3d(self, output_size):
    return _adaptive_avg(self, 3, output_size, "_adaptive_avg_pool3d")


@kernel("aten.adaptive_avg_pool1d.default")
def adaptive_avg_pool1d(self, output_size):
    # AdaptiveAveragePooling.cpp: adaptive_avg_pool2d of the input unsqueezed to one row, then
    # squeeze(-2). adaptive_avg_pool2d (not _adaptive_avg_pool2d) turns a (1, 1) output into
    # input.mean({-1, -2}): a sum in the accumulate type (float32 for half types) in
    # SumKernel.cpp's cascade order, divided by L, rounded to the dtype.
    x = _as_2d(np.asarray(self), "adaptive_avg_pool1d")
    o = _one(output_size, "output_size", "adaptive_avg_pool1d")
    if o != 1:
        return _adaptive_avg(x, 2, (1, o), "adaptive_avg_pool1d")[..., 0, :]
    dtype = x.dtype
    if not is_float(dtype):
        raise TypeError(f"adaptive_avg_pool1d: not implemented for {dtype}")
    _planes(x, 2, "adaptive_avg_pool1d")  # the shape checks of the 2d op
    acc = opmath(dtype)
    # The cascade's order depends on the SIMD width, so the sum is taken exactly and rounded once
    # to the accumulate type (what eager gives whenever its own sum is exact), then divided there.
    with np.errstate(all="ignore"):  # inf - inf is NaN in eager too
        total = np.sum(x.astype(np.float64), axis=(-2, -1)).astype(acc)
        return cast(total / acc.type(x.shape[-1]), dtype)[..., None]


def _adaptive_max(self, nd, output_size, op):
    x = np.asarray(self)
    dtype = x.dtype
    if not is_float(dtype):
        raise TypeError(f"{op}: not implemented for {dtype}")
    compute = opmath(dtype)
    gathered, _, lead, out, spatial, starts, taps, _ = _adaptive_gather(x.astype(compute), nd, output_size, op, -np.inf)
    if gathered.size == 0:
        return np.zeros(lead + out, dtype=dtype), np.zeros(lead + out, dtype=int64)
    # AdaptiveMaxPoolKernel.cpp: start at -inf and the first tap of the bin; take a tap when
    # it is greater or NaN. So: the first maximum, or the last NaN if the bin has one. The
    # first tap is always inside the bin, so an all -inf bin keeps it.
    values = gathered.max(axis=-1)
    pick = np.argmax(gathered == values[..., None], axis=-1)
    is_nan = np.isnan(gathered)
    if is_nan.any():
        last_nan = gathered.shape[-1] - 1 - np.argmax(is_nan[..., ::-1], axis=-1)
        pick = np.where(np.isnan(values), last_nan, pick)
    # Tap number -> input coordinates -> flat offset within the plane.
    tap_coords = np.unravel_index(pick, taps)
    plane_strides = [int(np.prod(spatial[i + 1 :])) for i in range(nd)]
    indices = np.zeros(pick.shape, dtype=int64)
    for axis, (t, start, ps) in enumerate(zip(tap_coords, starts, plane_strides)):
        shape = [1] * (nd + 1)
        shape[axis + 1] = -1
        indices += (start.reshape(shape) + t) * ps
    flat = x.reshape((-1,) + (math.prod(spatial),))
    values = np.take_along_axis(flat, indices.reshape(indices.shape[0], -1), axis=1)
    return values.reshape(lead + out), indices.reshape(lead + out)


@kernel("aten.adaptive_max_pool2d.default")
def adaptive_max_pool2d(self, output_size):
    return _adaptive_max(self, 2, output_size, "adaptive_max_pool2d")


@kernel("aten.adaptive_max_pool3d.default")
def adaptive_max_pool3d(self, output_size):
    return _adaptive_max(self, 3, output_size, "adaptive_max_pool3d")


# ---------------------------------------------------------------------------------------------
# sliding blocks


@kernel("aten.col2im.default")
def col2im(self, output_size, kernel_size, dilation, padding, stride):
    """Sums the columns of sliding blocks back into an image (nn.Fold).

    aten/src/ATen/native/Col2Im.cpp and im2col.h: the output starts at 0 and each column row
    c_col = (c, i, j) adds tap (i, j) of every block into the image in the input's own dtype,
    row by row (c10::Half and BFloat16 round after every addition, bool ORs); taps that land in
    the padding are dropped. So every output element sums its taps in (i, j) order, which the
    loop over taps below reproduces, each tap added to all blocks at once.
    """
    x = np.asarray(self)
    dtype = x.dtype
    if not (is_float(dtype) or dtype == np.bool_):
        raise TypeError(f'"col2im_out_cpu" not implemented for {dtype}')
    op = "col2im"
    h, w = _tuple(output_size, 2, "output_size")
    kh, kw = _tuple(kernel_size, 2, "kernel_size")
    dh, dw = _tuple(dilation, 2, "dilation")
    ph, pw = _tuple(padding, 2, "padding")
    sh, sw = _tuple(stride, 2, "stride")
    # im2col_shape_check.h, col2im_shape_check
    if kh <= 0 or kw <= 0:
        raise ValueError(f"{op}: kernel size should be greater than zero, got ({kh}, {kw})")
    if sh <= 0 or sw <= 0:
        raise ValueError(f"{op}: stride should be greater than zero, got ({sh}, {sw})")
    if dh <= 0 or dw <= 0:
        raise ValueError(f"{op}: dilation should be greater than zero, got ({dh}, {dw})")
    if ph < 0 or pw < 0:
        raise ValueError(f"{op}: padding should be non-negative, got ({ph}, {pw})")
    if not ((x.ndim == 2 and 0 not in x.shape) or (x.ndim == 3 and 0 not in x.shape[1:])):
        raise ValueError(
            f"{op}: Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and "
            f"non-zero dimensions for input, but got: {list(x.shape)}"
        )
    batched = x.ndim == 3
    cols = x if batched else x[None]
    if cols.shape[1] % (kh * kw):
        raise ValueError(f"{op}: input.size(1)={cols.shape[1]} is not divisible by the product of kernel_size ({kh}, {kw})")
    # Python's floor division is div_rtn's rounding toward -inf.
    bh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    bw = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if cols.shape[2] != bh * bw:
        raise ValueError(f"{op}: expected input.size(2) to match the number of sliding blocks {bh} * {bw}, got {cols.shape[2]}")
    if bh < 1 or bw < 1:
        raise ValueError(f"{op}: the array of sliding blocks ({bh}, {bw}) is too small (non-positive)")
    if h < 1 or w < 1:
        raise ValueError(f"{op}: expected output spatial size to be positive, but got: output_size=({h}, {w})")

    n, channels = cols.shape[0], cols.shape[1] // (kh * kw)
    cols = cols.reshape(n, channels, kh, kw, bh, bw)
    # The image with its padding: every tap of every block lands inside it; the padding is cut off.
    image = np.zeros((n, channels, h + 2 * ph, w + 2 * pw), dtype=dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow and inf - inf as in eager
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dh, i * dh + (bh - 1) * sh + 1, sh)
                columns = slice(j * dw, j * dw + (bw - 1) * sw + 1, sw)
                image[:, :, rows, columns] += cols[:, :, i, j]
    image = image[:, :, ph : ph + h, pw : pw + w]
    return np.ascontiguousarray(image if batched else image[0])
