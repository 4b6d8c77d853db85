"""Matrix products: mm, bmm, addmm, baddbmm, linear, dot; distances: _cdist_forward, _pdist_forward.

Floating point products go to BLAS through ``np.matmul`` in the input dtype
(float32, float64); half types are multiplied in float32 and rounded once, as
ATen's CPU gemm does for them (aten/src/ATen/native/cpu/BlasKernel.cpp sums
products in ``opmath_t`` and stores ``beta * c + alpha * dot`` once).
Integer products are computed in int64 and wrapped to the dtype: ATen
accumulates in the integer type itself, and wrapping arithmetic is the same
modulo 2**bits whatever the order.

float32 results differ from eager's MKL in the last bits because the two BLAS
libraries sum in different orders; the op specs carry that tolerance.
"""

from __future__ import annotations

import numpy as np

from ._dtypes import bfloat16, cast, exact_type, float16, float32, float64, int64, is_bool, is_int
from ._registry import kernel


def _common_dtype(name: str, *tensors: np.ndarray) -> np.dtype:
    """The one dtype of all operands: ATen's matmul family does not promote."""
    dtypes = {np.asarray(t).dtype for t in tensors if t is not None}
    if len(dtypes) != 1:
        names = ", ".join(sorted(str(d) for d in dtypes))
        raise TypeError(f"{name}: expected all operands to have the same dtype, got {names}")
    dtype = dtypes.pop()
    if is_bool(dtype):
        raise TypeError(f"{name}: not implemented for bool tensors")
    return dtype


def _product(a: np.ndarray, b: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """a @ b in float64 for every float dtype (``exact_type``), not yet rounded: rounded once to
    ``dtype`` it is within the op spec's derived bound of any summation order."""
    compute = exact_type(dtype)
    return np.matmul(a.astype(compute, copy=False), b.astype(compute, copy=False))


def _scalar(value, dtype: np.dtype):
    """A beta/alpha Scalar as ATen converts it: to opmath for floats, truncated to the type for integers."""
    if is_int(dtype):
        if isinstance(value, float) and not np.isfinite(value):
            raise ValueError(f"cannot convert {value} to an integer scalar")
        return np.int64(int(value))  # c10::Scalar::to<int>: truncation toward zero
    return value


def _scaled_sum(self, product, beta, alpha, dtype: np.dtype) -> np.ndarray:
    """beta * self + alpha * product, rounded to ``dtype`` once.

    beta == 0 leaves ``self`` unread (NaN and Inf in it do not propagate), as in
    BLAS and in ATen's addmm/baddbmm (aten/src/ATen/native/LinearAlgebra.cpp).
    """
    beta, alpha = _scalar(beta, dtype), _scalar(alpha, dtype)
    if is_int(dtype):
        out = alpha * product
        if beta != 0:
            out = out + beta * self.astype(int64)
        return cast(out, dtype)
    with np.errstate(all="ignore"):
        if beta == 1 and alpha == 1 and dtype in (float32, float64):
            # A sum of two floats rounds the same directly as through float64.
            return np.add(product, self, dtype=dtype)
        if dtype in (float16, bfloat16):
            # BlasKernel.cpp: c = beta * c + alpha * dot, each step in float32.
            out = product if alpha == 1 else np.float32(alpha) * product
            if beta != 0:
                c = self.astype(float32)
                out = (c if beta == 1 else np.float32(beta) * c) + out
            return cast(out, dtype)
        if dtype == float32:
            # MKL scales and adds in float32 registers; one rounding of the exact
            # combination (computed in float64) is the closest we can say.
            wide = product.astype(float64)
            out = wide if alpha == 1 else alpha * wide
            if beta != 0:
                c = self.astype(float64)
                out = (c if beta == 1 else beta * c) + out
            return cast(out, dtype)
        out = product if alpha == 1 else alpha * product
        if beta != 0:
            out = (self if beta == 1 else beta * self) + out
        return cast(out, dtype)


def _check_matrix(name: str, a: np.ndarray, b: np.ndarray, rank: int) -> None:
    if a.ndim != rank or b.ndim != rank:
        raise ValueError(f"{name}: expected {rank}-D tensors, got shapes {list(a.shape)} and {list(b.shape)}")
    if a.shape[-1] != b.shape[-2] or (rank == 3 and a.shape[0] != b.shape[0]):
        raise ValueError(f"{name}: shapes {list(a.shape)} and {list(b.shape)} cannot be multiplied")


def _check_broadcast(name: str, self: np.ndarray, shape: tuple) -> np.ndarray:
    if self.shape == shape:
        return self
    try:
        return np.broadcast_to(self, shape)
    except ValueError:
        raise ValueError(f"{name}: self of shape {list(self.shape)} does not broadcast to {list(shape)}") from None


@kernel("aten.mm.default")
def mm(self, mat2):
    dtype = _common_dtype("mm", self, mat2)
    _check_matrix("mm", self, mat2, 2)
    return cast(_product(self, mat2, dtype), dtype)


@kernel("aten.bmm.default")
def bmm(self, mat2):
    dtype = _common_dtype("bmm", self, mat2)
    _check_matrix("bmm", self, mat2, 3)
    return cast(_product(self, mat2, dtype), dtype)


@kernel("aten.addmm.default")
def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    dtype = _common_dtype("addmm", self, mat1, mat2)
    _check_matrix("addmm", mat1, mat2, 2)
    shape = (mat1.shape[0], mat2.shape[1])
    self = _check_broadcast("addmm", self, shape)
    return _scaled_sum(self, _product(mat1, mat2, dtype), beta, alpha, dtype)


@kernel("aten.baddbmm.default")
def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
    dtype = _common_dtype("baddbmm", self, batch1, batch2)
    _check_matrix("baddbmm", batch1, batch2, 3)
    shape = (batch1.shape[0], batch1.shape[1], batch2.shape[2])
    self = _check_broadcast("baddbmm", self, shape)
    return _scaled_sum(self, _product(batch1, batch2, dtype), beta, alpha, dtype)


@kernel("aten.linear.default")
def linear(input, weight, bias=None):  # noqa: A002 - ATen's name
    """input @ weight.T + bias.

    With a bias, eager runs addmm on the flattened input (aten/src/ATen/native/
    Linear.cpp, _flatten_nd_linear), so half types round once after adding it.
    """
    dtype = _common_dtype("linear", input, weight, bias)
    if weight.ndim != 2 or input.ndim < 1 or input.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input {list(input.shape)} and weight {list(weight.shape)} cannot be multiplied")
    product = _product(input, weight.T, dtype)
    if bias is None:
        return cast(product, dtype)
    out_shape = product.shape
    bias = _check_broadcast("linear", bias, out_shape)
    return _scaled_sum(bias, product, 1, 1, dtype)


@kernel("aten.dot.default")
def dot(self, tensor):
    dtype = _common_dtype("dot", self, tensor)
    if self.ndim != 1 or tensor.ndim != 1 or self.shape != tensor.shape:
        raise ValueError(f"dot: expected two 1-D tensors of the same size, got {list(self.shape)} and {list(tensor.shape)}")
    return cast(_product(self, tensor, dtype), dtype)


# ---------------------------------------------------------------------------------------------
# Distances: _cdist_forward, _pdist_forward


def _distance_terms(diff: np.ndarray, p: float) -> np.ndarray:
    """The summands of a p-norm of ``diff`` = |a - b|, each computed in the input dtype as ATen does
    (so a square that underflows is 0 here too), returned as float64 for the sum:
    DistanceOpsKernel.cpp's ``map`` of each norm. p = 0 counts the nonzero differences
    (min(ceil(d), 1); NaN stays NaN); p = 1 and inf take d itself."""
    dtype = diff.dtype
    if p == 0:
        terms = np.where(np.isnan(diff), diff, np.minimum(np.ceil(diff), 1))
    elif p == 1 or np.isinf(p):
        terms = diff
    elif p == 2:
        terms = diff * diff
    else:
        terms = np.power(diff, np.asarray(p, dtype))
    return terms.astype(float64)


def _finish_norm(agg: np.ndarray, p: float, dtype: np.dtype) -> np.ndarray:
    """``finish`` of each norm on the aggregate, which ATen holds in the input dtype: sqrt for p = 2,
    std::pow(agg, 1.0 / p) (computed in double: the exponent is a double) for the other finite p > 0."""
    agg = cast(agg, dtype)
    if p == 0 or p == 1 or np.isinf(p):
        return agg
    if p == 2:
        return np.sqrt(agg)
    return cast(np.power(agg.astype(float64), 1.0 / p), dtype)


def _check_distance_dtype(name: str, *tensors: np.ndarray) -> np.dtype:
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) != 1:
        raise TypeError(f"{name}: X1 and X2 must have the same dtype, got {sorted(str(d) for d in dtypes)}")
    dtype = dtypes.pop()
    if dtype not in (float32, float64):
        raise TypeError(f"{name} only supports floating-point dtypes float32 and float64, got {dtype}")
    return dtype


def _euclidean_distance(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    """sqrt(max(||a||^2 + ||b||^2 - 2 a.b, 0)) for every row a of x1 and b of x2, in the input dtype:
    Distance.cpp's _euclidean_dist, one matrix product of [-2 x1, ||x1||^2, 1] and [x2, 1, ||x2||^2].
    The expansion cancels: near a zero distance its rounding error is about sqrt(M eps) ||a|| (the
    op spec's notes), so only the summation order separates this from eager; an infinity meets a
    finite difference as inf - inf = NaN where the direct formula gives inf."""
    with np.errstate(invalid="ignore", over="ignore"):
        n1 = np.sum(x1 * x1, axis=-1, keepdims=True)
        n2 = np.sum(x2 * x2, axis=-1, keepdims=True)
        left = np.concatenate([x1 * x1.dtype.type(-2), n1, np.ones_like(n1)], axis=-1)
        right = np.concatenate([x2, np.ones_like(n2), n2], axis=-1)
        squared = np.matmul(left, np.swapaxes(right, -1, -2))
        return np.sqrt(np.maximum(squared, 0))  # clamp_min_(0) keeps NaN, as np.maximum does


@kernel("aten._cdist_forward.default")
def _cdist_forward(x1, x2, p, compute_mode):
    """result[..., i, j] = ||x1[..., i, :] - x2[..., j, :]||_p, batch dims broadcast (Distance.cpp
    _cdist_forward, cdist_impl).

    ATen (DistanceOpsKernel.cpp run_parallel_cdist) folds |a - b| (rounded to the input dtype) through
    each norm's map and sum (max for p = inf, where std::max(agg, NaN) keeps agg: NaN differences drop
    out) in the input dtype; the reference sums the same terms in float64 and rounds once, within the
    op spec's tolerance. For p = 2 with compute_mode 1, or compute_mode None/0 and more than 25 rows
    in x1 or x2, ATen instead expands the square through a matrix product (``_euclidean_distance``).
    """
    dtype = _check_distance_dtype("cdist", x1, x2)
    if x1.ndim < 2 or x2.ndim < 2:
        raise ValueError(f"cdist only supports at least 2D tensors, got {x1.ndim}D and {x2.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise ValueError(f"cdist: X1 and X2 must have the same number of columns: {x1.shape[-1]} vs {x2.shape[-1]}")
    p = float(p)
    if p < 0 or np.isnan(p):
        raise ValueError(f"cdist only supports non-negative p values, got {p}")
    mode = 0 if compute_mode is None else int(compute_mode)
    if mode not in (0, 1, 2):
        raise ValueError(f"cdist: compute_mode must be None, 0, 1 or 2, got {compute_mode}")
    r1, r2 = x1.shape[-2], x2.shape[-2]
    batch = np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    x1 = np.broadcast_to(x1, (*batch, *x1.shape[-2:]))
    x2 = np.broadcast_to(x2, (*batch, *x2.shape[-2:]))
    if p == 2 and (mode == 1 or (mode == 0 and (r1 > 25 or r2 > 25))):
        return _euclidean_distance(x1, x2)
    a, b = x1[..., :, None, :], x2[..., None, :, :]
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - b)  # rounded to the input dtype, as ATen computes it
        terms = _distance_terms(diff, p)
        if np.isinf(p):
            agg = np.fmax.reduce(terms, axis=-1, initial=0.0) if terms.shape[-1] else np.zeros(terms.shape[:-1])
        else:
            agg = terms.sum(axis=-1)
        return _finish_norm(agg, p, dtype)


@kernel("aten._pdist_forward.default")
def _pdist_forward(self, p=2.0):
    """The p-norm distances between the rows of self (N, M): row i against every row j > i, in that
    order, N (N - 1) / 2 results (Distance.cpp _pdist_forward). ATen's pdist reduces vectors of
    |a - b| terms (vec::map2_reduce_all): its maximum for p = inf propagates NaN, unlike cdist's. As for
    cdist, the reference sums in float64 and rounds once."""
    dtype = _check_distance_dtype("pdist", self)
    if self.ndim != 2:
        raise ValueError(f"pdist only supports 2D tensors, got: {self.ndim}D")
    p = float(p)
    if p < 0 or np.isnan(p):
        raise ValueError(f"pdist only supports non-negative p values, got {p}")
    n = self.shape[0]
    i, j = np.triu_indices(n, k=1)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(self[i] - self[j])
        terms = _distance_terms(diff, p)
        if np.isinf(p):
            agg = np.maximum.reduce(terms, axis=-1, initial=0.0) if terms.shape[-1] else np.zeros(terms.shape[:-1])
        else:
            agg = terms.sum(axis=-1)
        return _finish_norm(agg, p, dtype)


__all__ = ["_cdist_forward", "_pdist_forward", "addmm", "baddbmm", "bmm", "dot", "linear", "mm"]
