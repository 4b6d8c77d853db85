"""Upsampling (interpolation): nearest, nearest-exact, linear, bilinear, trilinear, bicubic; grid_sampler_2d.

The ``.vec`` overloads take either ``output_size`` or ``scale_factors``. With scale
factors the output side is floor(input side * factor) and the *given* factor (not the
size ratio) drives the source index, as 1 / factor; with output_size the ratio
input / output does (compute_scales_value in aten/src/ATen/native/UpSample.h).

Everything follows aten/src/ATen/native/cpu/UpSampleKernel.cpp, separable per spatial
dim: each output coordinate gets source indices and weights from the 1-D rules of
UpSample.h, computed in the op's math type (float32 for float16, bfloat16 and uint8;
float64 for float64), then the taps are combined from the outermost dim inwards.
Index arithmetic that ATen does in float32 (``floorf``, float scales) is done in
float32 here too, so borderline indices land on the same input element.

Eager uses two code paths for 2-D nearest, nearest-exact and bilinear: a
"channels-last" kernel when output height + width <= 128 (or the input is
channels-last with more than 3 channels, or, for bilinear, one thread and 3
channels), and a generic one otherwise. They differ in index shortcuts and in
rounding, so the reference picks the path by the same output-size rule (it cannot
see memory formats or thread counts: an NCHW input is assumed).
"""

from __future__ import annotations

import numpy as np

from ._dtypes import cast, is_float, opmath
from ._fma import fma
from ._registry import kernel

_UINT8 = np.dtype(np.uint8)


# ---------------------------------------------------------------------------------------------
# fused multiply-add, as the compiled kernels use it
#
# torch's AVX2 CPU kernels are built with FMA and GCC contracts `a * b + c` in
# UpSampleKernel.cpp / UpSample.h into fma(a, b, c) (checked against eager: source
# indices, interpolation sums and cubic weights only match with the contraction).
# NumPy has no fma, so it is emulated exactly: float32 through a float64 sum rounded to
# odd, float64 with error-free transformations (Boldo & Melquiond, "Emulation of FMA
# and correctly rounded sums: proved algorithms using rounding to odd", 2008).


# ---------------------------------------------------------------------------------------------
# sizes and scales


def _sizes(x: np.ndarray, output_size, scale_factors, nd: int, op: str):
    """Output spatial sizes and per-dim scale factors (None when output_size is given)."""
    if x.ndim != nd + 2:
        raise ValueError(f"{op}: expected a {nd + 2}D input, got shape {list(x.shape)}")
    spatial = x.shape[2:]
    if (output_size is None) == (scale_factors is None):
        raise ValueError(f"{op}: must specify exactly one of output_size and scale_factors")
    if output_size is not None:
        out = [int(v) for v in output_size]
        if len(out) != nd:
            raise ValueError(f"{op}: output_size must have {nd} elements, got {out}")
        scales = [None] * nd
    else:
        scales = [float(v) for v in scale_factors]
        if len(scales) != nd:
            raise ValueError(f"{op}: scale_factors must have {nd} elements, got {scales}")
        # upsample::compute_output_size: static_cast<int64_t>(double(input) * scale).
        out = [int(float(n) * s) for n, s in zip(spatial, scales)]
    if any(n <= 0 for n in spatial) or any(o <= 0 for o in out) or x.shape[1] == 0:
        raise ValueError(f"{op}: input and output sizes should be greater than 0, got input {list(spatial)} and output {out}")
    return out, scales


def _scale(in_size: int, out_size: int, scale, T) -> np.floating:
    """compute_scales_value<T>: 1 / scale factor when one is given (> 0), else input / output, in T."""
    if scale is not None and scale > 0:
        return T(1.0 / scale)
    return T(in_size) / T(out_size)


def _area_scale(in_size: int, out_size: int, align_corners: bool, scale, T) -> np.floating:
    """area_pixel_compute_scale<T>."""
    if align_corners:
        return T(in_size - 1) / T(out_size - 1) if out_size > 1 else T(0)
    return _scale(in_size, out_size, scale, T)


def _source_index(scale, out_size: int, align_corners: bool, cubic: bool, T) -> np.ndarray:
    """area_pixel_compute_source_index<T> for every output index (T arithmetic)."""
    i = np.arange(out_size).astype(T)
    if align_corners:
        return scale * i
    src = fma(scale, i + T(0.5), T(-0.5), T)  # scale * (i + 0.5) - 0.5, contracted
    return src if cubic else np.maximum(src, T(0))  # negative source indices clamp to 0 except for cubic


def _floorf(values: np.ndarray) -> np.ndarray:
    """static_cast<int64_t>(floorf(v)): ATen floors in float32, whatever the type of ``v``."""
    return np.floor(np.asarray(values).astype(np.float32)).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# nearest and nearest-exact: one source index per output index


def _nearest_generic(in_size, out_size, scale, T, exact: bool) -> np.ndarray:
    """HelperInterpNearest / HelperInterpNearestExact::compute_indices_weights (generic kernel)."""
    s = _scale(in_size, out_size, scale, T)
    if exact:
        real = _source_index(s, out_size, False, False, T)
        index = _floorf(real.astype(np.float64) + 0.5)  # `real + 0.5` promotes to double
    else:
        index = _floorf(s * np.arange(out_size).astype(T))
    return np.minimum(index, in_size - 1)


def _nearest_channels_last(in_size, out_size, scale, exact: bool) -> np.ndarray:
    """nearest_idx / nearest_exact_idx of UpSample.h (the channels-last kernel), float32 scale."""
    i = np.arange(out_size)
    s = _scale(in_size, out_size, scale, np.float32)
    if exact:
        # (dst_index + 0.5) is a double, so the product is formed in double before floorf.
        index = _floorf((i + 0.5) * np.float64(s))
    elif out_size == in_size:
        return i
    elif out_size == 2 * in_size:
        return i >> 1
    else:
        index = _floorf(i.astype(np.float32) * s)
    return np.minimum(index, in_size - 1)


def _nearest(x, output_size, scale_factors, nd, op, *, exact: bool):
    x = np.asarray(x)
    if not (is_float(x.dtype) or x.dtype == _UINT8):
        raise TypeError(f"{op}: not implemented for {x.dtype}")
    out, scales = _sizes(x, output_size, scale_factors, nd, op)
    T = np.float32 if x.dtype == _UINT8 else opmath(x.dtype).type  # uint8 indices are computed as for float
    channels_last = nd == 2 and out[0] + out[1] <= 128  # _use_vectorized_kernel_cond_2d
    index = []
    for axis, (n, o, sc) in enumerate(zip(x.shape[2:], out, scales)):
        if channels_last:
            idx = _nearest_channels_last(n, o, sc, exact)
        else:
            idx = _nearest_generic(n, o, sc, T, exact)
        shape = [1] * nd
        shape[axis] = o
        index.append(idx.reshape(shape))
    return x[(slice(None), slice(None)) + tuple(index)]


@kernel("aten.upsample_nearest1d.vec")
def upsample_nearest1d(input, output_size, scale_factors):
    return _nearest(input, output_size, scale_factors, 1, "upsample_nearest1d", exact=False)


@kernel("aten.upsample_nearest2d.vec")
def upsample_nearest2d(input, output_size, scale_factors):
    return _nearest(input, output_size, scale_factors, 2, "upsample_nearest2d", exact=False)


@kernel("aten.upsample_nearest3d.vec")
def upsample_nearest3d(input, output_size, scale_factors):
    return _nearest(input, output_size, scale_factors, 3, "upsample_nearest3d", exact=False)


@kernel("aten._upsample_nearest_exact1d.vec")
def _upsample_nearest_exact1d(input, output_size, scale_factors):
    return _nearest(input, output_size, scale_factors, 1, "_upsample_nearest_exact1d", exact=True)


@kernel("aten._upsample_nearest_exact2d.vec")
def _upsample_nearest_exact2d(input, output_size, scale_factors):
    return _nearest(input, output_size, scale_factors, 2, "_upsample_nearest_exact2d", exact=True)


@kernel("aten._upsample_nearest_exact3d.vec")
def _upsample_nearest_exact3d(input, output_size, scale_factors):
    return _nearest(input, output_size, scale_factors, 3, "_upsample_nearest_exact3d", exact=True)


# ---------------------------------------------------------------------------------------------
# linear family: two taps per dim


def _linear_taps(in_size, out_size, align_corners, scale, T, weight_type):
    """compute_source_index_and_lambda (UpSample.h): indices (2, out) and weights (2, out).

    Weights are computed in T and stored in ``weight_type``; ``lambda0 = 1 - lambda1`` is
    formed in the stored type (the generic kernel stores half-type weights).
    """
    if out_size == in_size:
        # scale_factor = 1: a plain copy, whatever the scale says.
        i = np.arange(out_size)
        return np.stack([i, i]), np.stack([np.ones(out_size, weight_type), np.zeros(out_size, weight_type)])
    s = _area_scale(in_size, out_size, align_corners, scale, T)
    real = _source_index(s, out_size, align_corners, False, T)
    index0 = np.minimum(_floorf(real), in_size - 1)
    lambda1 = np.minimum(np.maximum(real - index0.astype(T), T(0)), T(1)).astype(weight_type)
    index1 = index0 + (index0 < in_size - 1)
    lambda0 = (np.ones((), weight_type).astype(T) - lambda1.astype(T)).astype(weight_type)
    return np.stack([index0, index1]), np.stack([lambda0, lambda1])


def _cubic_taps(in_size, out_size, align_corners, scale, T, weight_type):
    """HelperInterpCubic::compute_indices_weights: 4 clamped indices and Keys weights (A = -0.75)."""
    s = _area_scale(in_size, out_size, align_corners, scale, T)
    real = _source_index(s, out_size, align_corners, True, T)
    index = np.minimum(_floorf(real), in_size - 1)
    t = np.minimum(np.maximum(real - index.astype(T), T(0)), T(1))
    A = T(-0.75)

    # The compiled polynomials fuse their first multiply-adds but not the last one
    # (found by matching eager's weights for every contraction pattern).

    def conv1(v):  # cubic_convolution1, |v| <= 1: ((A + 2) * v - (A + 3)) * v * v + 1
        return (fma(A + T(2), v, -(A + T(3)), T) * v) * v + T(1)

    def conv2(v):  # cubic_convolution2, 1 < |v| < 2: ((A * v - 5 * A) * v + 8 * A) * v - 4 * A
        return fma(fma(A, v, -(T(5) * A), T), v, T(8) * A, T) * v - T(4) * A

    weights = np.stack([conv2(t + T(1)), conv1(t), conv1(T(1) - t), conv2((T(1) - t) + T(1))])
    taps = np.stack([np.clip(index + j - 1, 0, in_size - 1) for j in range(4)])
    return taps, weights.astype(weight_type)


def _combine(x, taps, weights, T):
    """Interpolate<n, ...> of UpSampleKernel.cpp in T: out = sum_j inner(tap j) * w_j per dim.

    The first product starts each sum and the others are added in tap order (for two
    taps: t0 * w0 + t1 * w1). An inner dim's interpolation depends only on the source
    position of the outer dims, so it is computed once for every input row (innermost dim
    first) and the outer dims then combine those rows: the same operations as ATen's
    recursion from the outermost dim.
    """
    values = x.astype(T, copy=False)
    for axis in range(len(taps) - 1, -1, -1):
        dim = 2 + axis
        shape = [1] * values.ndim
        shape[dim] = -1
        inner = [np.take(values, index, axis=dim) for index in taps[axis]]
        w = [weight.astype(T).reshape(shape) for weight in weights[axis]]
        # Two taps: `t0 * w0 + t1 * w1` compiles to fma(t0, w0, t1 * w1). Four taps (the
        # loop `output = t0 * w0; output += tj * wj`) compiles the same way for the first two
        # terms, then output = fma(tj, wj, output).
        values = fma(inner[0], w[0], inner[1] * w[1], T)
        for t, wj in zip(inner[2:], w[2:]):
            values = fma(t, wj, values, T)
    return values


def _interpolate(x, output_size, align_corners, scale_factors, nd, op, mode):
    x = np.asarray(x)
    dtype = x.dtype
    uint8_ok = nd == 2  # bilinear and bicubic have a uint8 kernel
    if not (is_float(dtype) or (dtype == _UINT8 and uint8_ok)):
        raise TypeError(f"{op}: not implemented for {dtype}")
    out, scales = _sizes(x, output_size, scale_factors, nd, op)
    if dtype == _UINT8:
        return _uint8_separable(x, out, align_corners, scales, mode)
    T = opmath(dtype).type
    if mode == "linear" and nd == 2 and out[0] + out[1] <= 128:
        return _bilinear_channels_last(x, out, align_corners, scales, T)
    make = _linear_taps if mode == "linear" else _cubic_taps
    taps, weights = [], []
    for n, o, sc in zip(x.shape[2:], out, scales):
        t, w = make(n, o, align_corners, sc, T, dtype)
        taps.append(t)
        weights.append(w)
    with np.errstate(all="ignore"):  # inf * 0 and inf - inf are NaN in ATen as well
        return cast(_combine(x, taps, weights, T), dtype)


def _bilinear_channels_last(x, out, align_corners, scales, T):
    """cpu_upsample_linear_channels_last (2-D): weights stay in T, one four-term sum.

    out = i00 * (h0 * w0) + i01 * (h0 * w1) + i10 * (h1 * w0) + i11 * (h1 * w1), added left
    to right (the scalar loop eager runs for every channel when C is below the vector width).
    """
    (th, wh), (tw, ww) = (
        _linear_taps(n, o, align_corners, sc, T, np.dtype(T)) for n, o, sc in zip(x.shape[2:], out, scales)
    )
    v = x.astype(T, copy=False)
    rows = [v[:, :, th[a]] for a in range(2)]  # (N, C, OH, W)
    corner = [[r[:, :, :, tw[b]] for b in range(2)] for r in rows]  # (N, C, OH, OW)
    hw = [wh[a][:, None] for a in range(2)]
    ww_ = [ww[b][None, :] for b in range(2)]
    w = [[hw[a] * ww_[b] for b in range(2)] for a in range(2)]
    with np.errstate(all="ignore"):
        # Compiled as a chain of fused multiply-adds; which of the first two products is
        # fused differs by type (float16's operator* inlines differently), checked against eager.
        if x.dtype == np.float16:
            total = fma(corner[0][1], w[0][1], corner[0][0] * w[0][0], T)
        else:
            total = fma(corner[0][0], w[0][0], corner[0][1] * w[0][1], T)
        total = fma(corner[1][0], w[1][0], total, T)
        total = fma(corner[1][1], w[1][1], total, T)
    return cast(total, x.dtype)


def _uint8_weights(in_size, out_size, align_corners, scale, mode):
    """HelperInterpBase::_compute_index_ranges_int16_weights (antialias=False), in float64.

    Returns the first input index of each output, the number of taps used, the int16
    weights (out, taps) and their precision (fraction bits). Taps that fall outside the
    input are folded into the nearest border tap, as ATen does.
    """
    T = np.float64
    taps = 2 if mode == "linear" else 4
    s = _area_scale(in_size, out_size, align_corners, scale, T)
    real = _source_index(s, out_size, align_corners, mode == "cubic", T)
    index = np.minimum(_floorf(real), in_size - 1)
    lam = np.minimum(np.maximum(real - index.astype(T), T(0)), T(1))
    support = taps // 2
    unbound_min = index - support + 1
    index_min = np.maximum(unbound_min, 0)
    index_size = np.clip(np.minimum(index + support + 1, in_size) - index_min, 0, taps)
    A = T(-0.75)  # OpenCV's constant for antialias=False (aa_filter<double, false>)
    weights = np.zeros((out_size, taps), dtype=T)
    w_max = np.zeros(out_size, dtype=T)
    slot = np.zeros(out_size, dtype=np.int64)
    rows = np.arange(out_size)
    for j in range(taps):
        v = np.abs(T(j + 1 - support) - lam)
        if mode == "linear":
            w = np.where(v < 1, T(1) - v, T(0))
        else:
            near = (fma(A + T(2), v, -(A + T(3)), T) * v) * v + T(1)
            far = fma(fma(A, v, -(T(5) * A), T), v, T(8) * A, T) * v - T(4) * A
            w = np.where(v < 1, near, np.where(v < 2, far, T(0)))
        position = unbound_min + j
        slot = np.where(position <= 0, 0, np.where(position >= in_size - 1, index_size - 1, slot))
        weights[rows, slot] += w
        w_max = np.maximum(w_max, weights[rows, slot])  # ATen takes the max of partial sums too
        slot = slot + 1
    w_max = w_max.max()
    precision = 0
    while precision < 22 and int(0.5 + w_max * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    scaled = weights * (1 << precision)
    ints = np.where(scaled < 0, np.trunc(-0.5 + scaled), np.trunc(0.5 + scaled)).astype(np.int64)
    return index_min, index_size, ints, precision


def _uint8_pass(x, axis, in_size, out_size, align_corners, scale, mode):
    """One separable pass (basic_loop_aa_horizontal/vertical<uint8_t>): integer sums, rounded and clamped."""
    index_min, index_size, ints, precision = _uint8_weights(in_size, out_size, align_corners, scale, mode)
    total = np.full(x.shape[:axis] + (out_size,) + x.shape[axis + 1 :], 1 << (precision - 1), dtype=np.int64)
    shape = [1] * x.ndim
    shape[axis] = out_size
    for j in range(ints.shape[1]):
        used = j < index_size  # taps past index_size carry zero weight
        src = np.minimum(index_min + j, in_size - 1)
        w = np.where(used, ints[:, j], 0).reshape(shape)
        total += np.take(x, src, axis=axis).astype(np.int64) * w
    return np.clip(total >> precision, 0, 255).astype(np.uint8)


def _uint8_separable(x, out, align_corners, scales, mode):
    """uint8 bilinear/bicubic (upsample_avx_bilinear_bicubic_uint8 and its separable fallback).

    Weights are computed in float64, scaled to int16 with a shared precision, and each
    pass (width first, then height; a pass is skipped when its size is unchanged) sums
    in integers and rounds to uint8: (2**(p-1) + sum(x * w)) >> p, clamped to [0, 255].
    """
    result = x
    for axis in (3, 2):
        n, o = x.shape[axis], out[axis - 2]
        if n != o:
            result = _uint8_pass(result, axis, n, o, align_corners, scales[axis - 2], mode)
    return result.copy() if result is x else result


@kernel("aten.upsample_linear1d.vec")
def upsample_linear1d(input, output_size, align_corners, scale_factors):
    return _interpolate(input, output_size, align_corners, scale_factors, 1, "upsample_linear1d", "linear")


@kernel("aten.upsample_bilinear2d.vec")
def upsample_bilinear2d(input, output_size, align_corners, scale_factors):
    return _interpolate(input, output_size, align_corners, scale_factors, 2, "upsample_bilinear2d", "linear")


@kernel("aten.upsample_trilinear3d.vec")
def upsample_trilinear3d(input, output_size, align_corners, scale_factors):
    return _interpolate(input, output_size, align_corners, scale_factors, 3, "upsample_trilinear3d", "linear")


@kernel("aten.upsample_bicubic2d.vec")
def upsample_bicubic2d(input, output_size, align_corners, scale_factors):
    return _interpolate(input, output_size, align_corners, scale_factors, 2, "upsample_bicubic2d", "cubic")


# ---------------------------------------------------------------------------------------------
# grid_sampler_2d
#
# aten/src/ATen/native/cpu/GridSamplerKernel.cpp: one vectorized kernel for every dtype, each
# Vectorized<T> operation rounded to T (the half types compute each one in float32 and round back),
# in the order written there. Checked bit for bit against eager (torch 2.13, AVX512 and AVX2), which
# also fixes where the compiled code fuses multiply-adds: the unnormalization without
# align_corners ((g + 1) * size/2 - 0.5), the reflection's extra = |x| - flips * span, the
# bilinear sum (each corner's product fused into the sum so far), the cubic weights of the two
# inner taps ((A + 2) x - (A + 3)) x * x + 1 and the bicubic sums: along x only the first two
# products are fused (fma(c0, v0, c1 v1), then plain adds), along y every product is.


def _gs_fma(a, b, c, T) -> np.ndarray:
    """a * b + c as GridSamplerKernel.cpp's compiled float32/float64 code contracts it; the half
    types round the product and the sum each (their Vectorized ops convert through float32)."""
    if T in (np.float32, np.float64):
        return fma(a, b, c, T).astype(T, copy=False)
    return (np.asarray(a * b, T) + c).astype(T, copy=False)


def _gs_clip(x: np.ndarray, size: int, T) -> np.ndarray:
    """clip_coordinates: clamp_max(size - 1, clamp_min(0, x)), with NaN clamped to 0."""
    return np.minimum(np.maximum(np.where(np.isnan(x), T(0), x), T(0)), T(size - 1)).astype(T, copy=False)


def _gs_reflect(x: np.ndarray, size: int, align_corners: bool, T) -> np.ndarray:
    """reflect_coordinates: reflect into [0, size - 1] (align_corners) or [-0.5, size - 0.5]."""
    if align_corners:
        if size <= 1:
            return np.zeros_like(x)
        span, low = T((size - 1) * 2), None
        a = np.abs(x)
    else:
        span, low = T(size * 2), T(-0.5)
        a = np.abs((x - low).astype(T))
    flips = np.trunc((a / span).astype(T))
    extra = _gs_fma(-flips, span, a, T)
    out = np.minimum(extra, (span - extra).astype(T))
    return out if low is None else (out + low).astype(T)


def _gs_unnormalize(g: np.ndarray, size: int, align_corners: bool, T) -> np.ndarray:
    if align_corners:
        return ((g + T(1)).astype(T) * T(T(size - 1) / T(2))).astype(T)
    return _gs_fma((g + T(1)).astype(T), T(T(size) / T(2)), T(-0.5), T)


def _gs_coordinates(x: np.ndarray, size: int, padding_mode: int, align_corners: bool, T) -> np.ndarray:
    """compute_coordinates: zeros keeps x, border clips it, reflection reflects then clips."""
    if padding_mode == 1:
        return _gs_clip(x, size, T)
    if padding_mode == 2:
        return _gs_clip(_gs_reflect(x, size, align_corners, T), size, T)
    return x


def _gs_int(v: np.ndarray, T) -> np.ndarray:
    """convert_to_int_of_same_size: truncation to int32 (INT_MIN for NaN, infinities and values out
    of range, as cvttps does); the half types keep the low 16 bits (their integer of the same size is
    int16), so an unrepresentable coordinate becomes 0 there, a valid index."""
    wide = v.astype(np.float64)
    with np.errstate(invalid="ignore"):
        out = np.where(np.isfinite(wide) & (np.abs(wide) < 2.0**31), np.trunc(wide), -(2.0**31)).astype(np.int64)
    if T not in (np.float32, np.float64):
        out = (out + 2**15) % 2**16 - 2**15
    return out


def _gs_take(x: np.ndarray, ix: np.ndarray, iy: np.ndarray, inside: np.ndarray | None) -> np.ndarray:
    """x[n, :, iy, ix] for index arrays of shape (N, Ho, Wo), 0 where ``inside`` is false: (N, C, Ho, Wo)."""
    n, c, h, w = x.shape
    if inside is None:
        inside = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
    batch = np.arange(n).reshape(n, 1, 1)
    values = x.transpose(0, 2, 3, 1)[batch, np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)]
    values = np.where(inside[..., None], values, x.dtype.type(0))
    return values.transpose(0, 3, 1, 2)


def _gs_cubic_weights(t: np.ndarray, T) -> list[np.ndarray]:
    """get_cubic_coefficients with A = -0.75: the outer taps ((A x - 5A) x + 8A) x - 4A at x = t + 1
    and 2 - t, the inner ones ((A + 2) x - (A + 3)) x x + 1 at x = t and 1 - t."""
    a = T(-0.75)

    def outer(x):
        r = ((a * x).astype(T) - T(5 * -0.75)).astype(T)
        r = ((r * x).astype(T) + T(8 * -0.75)).astype(T)
        return ((r * x).astype(T) - T(4 * -0.75)).astype(T)

    def inner(x):
        r = _gs_fma(T(1.25), x, T(-2.25), T)
        return _gs_fma((r * x).astype(T), x, T(1), T)

    return [outer((t + T(1)).astype(T)), inner(t), inner((T(1) - t).astype(T)), outer((T(2) - t).astype(T))]


@kernel("aten.grid_sampler_2d.default")
def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):  # noqa: A002 - ATen's names
    """Samples input (N, C, H, W) at grid (N, Ho, Wo, 2) locations: (x, y) in [-1, 1] span the input
    (the corner pixels' centers with align_corners, their outer edges without); out (N, C, Ho, Wo).

    interpolation_mode 0 bilinear (the four neighbours, weights from the distances), 1 nearest
    (coordinates rounded half to even), 2 bicubic (4 x 4 taps, A = -0.75); padding_mode 0 zeros
    (taps outside read 0), 1 border (coordinates clipped into the input), 2 reflection (reflected
    at the borders, then clipped). Bilinear and nearest pad the coordinate once; bicubic pads each
    tap's coordinate. Rounding follows the compiled kernel (see above).
    """
    x, g = np.asarray(input), np.asarray(grid)
    if x.ndim != 4 or g.ndim != 4 or g.shape[-1] != 2 or x.shape[0] != g.shape[0]:
        raise ValueError(f"grid_sampler_2d: expected input (N, C, H, W) and grid (N, H, W, 2), got {list(x.shape)} and {list(g.shape)}")
    if x.dtype != g.dtype or not is_float(x.dtype):
        raise TypeError(f"grid_sampler_2d: input and grid must have the same floating dtype, got {x.dtype} and {g.dtype}")
    if x.shape[2] == 0 or x.shape[3] == 0:
        raise ValueError(f"grid_sampler_2d: expected input to have non-empty spatial dimensions, got {list(x.shape)}")
    if interpolation_mode not in (0, 1, 2) or padding_mode not in (0, 1, 2):
        raise ValueError(f"grid_sampler_2d: interpolation_mode and padding_mode must be 0, 1 or 2, got {interpolation_mode}, {padding_mode}")
    T = x.dtype.type
    n, c, h, w = x.shape
    if 0 in (n, c) or 0 in g.shape[1:3]:
        return np.zeros((n, c, *g.shape[1:3]), x.dtype)
    gx, gy = g[..., 0], g[..., 1]
    with np.errstate(all="ignore"):
        if interpolation_mode == 2:
            return _gs_bicubic(x, gx, gy, padding_mode, align_corners, T)
        px = _gs_coordinates(_gs_unnormalize(gx, w, align_corners, T), w, padding_mode, align_corners, T)
        py = _gs_coordinates(_gs_unnormalize(gy, h, align_corners, T), h, padding_mode, align_corners, T)
        if interpolation_mode == 1:
            ix, iy = _gs_int(np.rint(px), T), _gs_int(np.rint(py), T)
            return _gs_take(x, ix, iy, None if padding_mode == 0 else np.ones(ix.shape, bool))
        fx, fy = np.floor(px), np.floor(py)
        dx, dy = (px - fx).astype(T), (py - fy).astype(T)
        ex, sy = (T(1) - dx).astype(T), (T(1) - dy).astype(T)
        weights = ((sy * ex).astype(T), (sy * dx).astype(T), (dy * ex).astype(T), (dy * dx).astype(T))
        ix, iy = _gs_int(fx, T), _gs_int(fy, T)
        out = None
        for (oy, ox), weight in zip(((0, 0), (0, 1), (1, 0), (1, 1)), weights):
            cx, cy = ix + ox, iy + oy
            if padding_mode == 0:
                inside = (cx > -1) & (cx < w) & (cy > -1) & (cy < h)
            else:  # border and reflection coordinates are in the input; only the far neighbours may not be
                inside = (cx < w) & (cy < h)
            value = _gs_take(x, cx, cy, inside)
            out = (value * weight[:, None]).astype(T) if out is None else _gs_fma(value, weight[:, None], out, T)
        return out


def _gs_bicubic(x, gx, gy, padding_mode, align_corners, T) -> np.ndarray:
    _, _, h, w = x.shape
    px, py = _gs_unnormalize(gx, w, align_corners, T), _gs_unnormalize(gy, h, align_corners, T)
    fx, fy = np.floor(px), np.floor(py)
    wx = _gs_cubic_weights((px - fx).astype(T), T)
    wy = _gs_cubic_weights((py - fy).astype(T), T)
    columns = [_gs_int(_gs_coordinates((fx + T(k - 1)).astype(T), w, padding_mode, align_corners, T), T) for k in range(4)]
    out = None
    for j in range(4):
        row = _gs_int(_gs_coordinates((fy + T(j - 1)).astype(T), h, padding_mode, align_corners, T), T)
        v = [_gs_take(x, col, row, None if padding_mode == 0 else np.ones(row.shape, bool)) for col in columns]
        line = _gs_fma(wx[0][:, None], v[0], (wx[1][:, None] * v[1]).astype(T), T)
        line = (line + (wx[2][:, None] * v[2]).astype(T)).astype(T)
        line = (line + (wx[3][:, None] * v[3]).astype(T)).astype(T)
        out = (wy[0][:, None] * line).astype(T) if out is None else _gs_fma(wy[j][:, None], line, out, T)
    return out
