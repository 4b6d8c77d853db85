"""Discrete Fourier transforms: the two core ATen FFT ops, _fft_r2c and _fft_c2r.

ATen's CPU FFTs (aten/src/ATen/native/mkl/SpectralOps.cpp) run oneMKL's DFTI (pocketfft where
torch is built without MKL); numpy.fft runs pocketfft. Both compute the same sums in another
order, so the reference transforms in float64 (complex128) and rounds once: its results are
the exact transform to within float64's rounding, and eager's own rounding, which grows with
log2 of the transform size, is what the op specs' tolerances measure (specs/ops/fft.toml).

``normalization`` is ATen's fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n, where n is the
product of the signal sizes along ``dim`` (the output's, for c2r). numpy.fft names the scaling
by the direction it applies to, so the same mode spells differently for the two directions.
"""

from __future__ import annotations

import numpy as np

from ._dtypes import complex_of, float32, float64, is_complex, real_of
from ._registry import kernel

_FORWARD_NORM = {0: "backward", 1: "ortho", 2: "forward"}
"""fft_norm_mode -> numpy's norm for a forward transform (numpy's "backward" scales nothing forward)."""
_INVERSE_NORM = {0: "forward", 1: "ortho", 2: "backward"}
"""fft_norm_mode -> numpy's norm for an inverse transform (numpy's "forward" scales nothing backward)."""


def _dims(dim, ndim: int, op: str) -> list[int]:
    """``dim`` as ATen's internal FFT ops take it: non-negative, distinct, at least one (torch.fft
    wraps negative dims before calling them; the ops themselves fail an internal assert)."""
    axes = [int(d) for d in dim]
    if not axes or len(set(axes)) != len(axes) or any(not 0 <= d < ndim for d in axes):
        raise ValueError(f"{op}: dim must be distinct non-negative dims of a {ndim}-d tensor, got {list(dim)}")
    return axes


def _check_norm(normalization: int, op: str) -> None:
    if normalization not in _FORWARD_NORM:
        raise ValueError(f"{op}: normalization must be 0 (none), 1 (1/sqrt(n)) or 2 (1/n), got {normalization}")


@kernel("aten._fft_r2c.default")
def _fft_r2c(self, dim, normalization, onesided):
    """Forward transform of a real tensor over ``dim``, complex result (complex64 of float32).

    ``onesided``: the last dim of ``dim`` keeps its n // 2 + 1 non-negative frequencies (the rest
    are their conjugates), as numpy's rfftn; otherwise every frequency, as fftn of the real input.
    """
    x = np.asarray(self)
    if x.dtype not in (float32, float64):
        raise TypeError(f"_fft_r2c: float32 or float64 input expected, got {x.dtype}")
    axes = _dims(dim, x.ndim, "_fft_r2c")
    _check_norm(normalization, "_fft_r2c")
    transform = np.fft.rfftn if onesided else np.fft.fftn
    return transform(x.astype(float64), axes=axes, norm=_FORWARD_NORM[normalization]).astype(complex_of(x.dtype))


@kernel("aten._fft_c2r.default")
def _fft_c2r(self, dim, normalization, last_dim_size):
    """Inverse transform over ``dim`` of a onesided (Hermitian) spectrum, real result of
    ``last_dim_size`` along the last dim of ``dim``, whose input size must be last_dim_size // 2 + 1.

    As every real inverse FFT (pocketfft's and oneMKL's alike), the imaginary parts that a real
    signal's spectrum cannot have (the zero frequency's, and n/2's for even n) are ignored.
    """
    z = np.asarray(self)
    if not is_complex(z.dtype):
        raise TypeError(f"_fft_c2r: complex input expected, got {z.dtype}")
    axes = _dims(dim, z.ndim, "_fft_c2r")
    _check_norm(normalization, "_fft_c2r")
    n = int(last_dim_size)
    if n < 1 or z.shape[axes[-1]] != n // 2 + 1:
        raise ValueError(f"_fft_c2r: last_dim_size {n} needs {n // 2 + 1} elements along dim {axes[-1]}, got {z.shape[axes[-1]]}")
    sizes = [z.shape[a] for a in axes[:-1]] + [n]
    out = np.fft.irfftn(z.astype(np.complex128), s=sizes, axes=axes, norm=_INVERSE_NORM[normalization])
    return out.astype(real_of(z.dtype))
