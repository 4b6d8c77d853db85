"""Reductions (sum, mean, prod, min/max, arg-extremes, var, any/all, norms), scans and softmax.

Dimension lists follow ATen's reduction helpers (aten/src/ATen/native/ReduceOpsUtils.h,
``make_dim_mask``): negative dims wrap, a repeated dim is an error, and ``None`` or an
empty list means every dim, except for ``any.dims``/``all.dims`` where an empty list
reduces nothing. A 0-d tensor accepts dim 0 and -1 and stays 0-d.

Result dtypes follow ReduceOps.cpp: sum, prod and the scans give int64 for integer
and bool inputs unless ``dtype`` is given (the input is converted to ``dtype`` first);
mean, var and norms need floating point; any/all give bool (uint8 for uint8 inputs).

Rounding follows the CPU kernels where their order is fixed: scans accumulate
sequentially in ``at::acc_type<T, /*is_cuda=*/false>`` (double for float, float for
the half types; ReduceOpsKernel.cpp), prod folds left to right in the result type
(c10::Half arithmetic rounds every product), var is computed in double and rounded
once. Floating sums are the exception: ATen's cascade sum (cpu/SumKernel.cpp) adds
in an order that depends on memory layout and SIMD width, so the reference sums in
float64 and rounds once, and the op specs give float32 sums a tolerance for eager's
rounding error.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np

from ._dtypes import (
    as_array,
    bfloat16,
    bool_,
    cast,
    complex_multiply,
    float16,
    float32,
    float64,
    int64,
    is_bool,
    is_complex,
    is_float,
    is_int,
    opmath,
)
from ._registry import alternative, kernel

_HALF_TYPES = (float16, bfloat16)
_UINT8 = np.dtype(np.uint8)


# ---------------------------------------------------------------------------------------------
# dims


def _wrap_dim(dim: int, ndim: int, op: str) -> int:
    """``dim`` wrapped into [0, max(ndim, 1)) (a 0-d tensor has dims 0 and -1), like maybe_wrap_dim."""
    r = max(ndim, 1)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be an int, got {dim!r}")
    if not -r <= dim < r:
        raise IndexError(f"{op}: dimension {dim} is out of range for a {ndim}-d tensor (expected [{-r}, {r - 1}])")
    return int(dim) % r


def _axes(dim, ndim: int, op: str, *, empty_means_all: bool = True) -> tuple[int, ...]:
    """NumPy axes of a reduction over ``dim`` (None, an int, or a list of ints)."""
    if dim is None:
        return tuple(range(ndim))
    dims = [dim] if isinstance(dim, (int, np.integer)) else list(dim)
    if not dims:
        return tuple(range(ndim)) if empty_means_all else ()
    seen: list[int] = []
    for d in dims:
        w = _wrap_dim(d, ndim, op)
        if w in seen:
            raise ValueError(f"{op}: dim {w} appears multiple times in the list of dims")
        seen.append(w)
    # A 0-d tensor reduced over its only (virtual) dim is itself.
    return tuple(sorted(seen)) if ndim else ()


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    return math.prod(shape[a] for a in axes)


def _require_nonempty(x: np.ndarray, axes: tuple[int, ...], op: str) -> None:
    # Reductions without an identity (max, min, argmax, ...) refuse empty reduced dims
    # (ReduceOpsUtils.h, zero_numel_check_dims).
    for a in axes:
        if x.shape[a] == 0:
            raise IndexError(f"{op}(): Expected reduction dim {a} to have non-zero size.")


def _comparable(x: np.ndarray) -> np.ndarray:
    """Values with the same order in a NumPy-native dtype (half types widen exactly to float32)."""
    return x.astype(float32) if x.dtype in _HALF_TYPES else x


def _integral_result(x: np.ndarray, dtype) -> np.dtype:
    """sum/prod/cumsum result dtype: ``dtype`` if given, int64 for integer and bool inputs."""
    if dtype is not None:
        return np.dtype(dtype)
    return int64 if is_int(x.dtype) or is_bool(x.dtype) else x.dtype


# ---------------------------------------------------------------------------------------------
# sum, mean, prod


def _sum(self, axes, keepdim: bool, dtype) -> np.ndarray:
    x = np.asarray(self)
    out = _integral_result(x, dtype)
    x = as_array(x, out)  # ATen converts the input to the result dtype before reducing
    if is_complex(out):  # the parts sum on their own, as the float ones do
        with np.errstate(invalid="ignore", over="ignore"):
            return cast(np.sum(x.astype(np.complex128), axis=axes, keepdims=keepdim), out)
    if is_float(out):
        with np.errstate(invalid="ignore", over="ignore"):  # inf + -inf is NaN, as in eager
            return cast(np.sum(x.astype(float64), axis=axes, keepdims=keepdim), out)
    if is_bool(out):
        return np.any(x, axis=axes, keepdims=keepdim)  # bool addition saturates
    # Integer sums wrap like ATen's two's complement arithmetic.
    return cast(np.sum(x.astype(int64), axis=axes, keepdims=keepdim), out)


@kernel("aten.sum.dim_IntList")
def sum_dim(self, dim, keepdim=False, *, dtype=None):
    return _sum(self, _axes(dim, np.ndim(self), "sum"), keepdim, dtype)


@kernel("aten.sum.default")
def sum_all(self, *, dtype=None):
    return _sum(self, None, False, dtype)


def _mean(self, axes, keepdim: bool, dtype) -> np.ndarray:
    x = np.asarray(self)
    out = np.dtype(dtype) if dtype is not None else x.dtype
    if not is_float(out) and not is_complex(out):
        raise TypeError(
            f"mean(): could not infer output dtype. Input dtype must be floating point, got {out}; "
            "pass a floating dtype"
        )
    axes = tuple(range(x.ndim)) if axes is None else axes
    n = _count(x.shape, axes)
    # ATen sums in the accumulate type and divides once (half types: float32, then one rounding).
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        total = np.sum(as_array(x, out).astype(np.complex128 if is_complex(out) else float64), axis=axes, keepdims=keepdim)
        return cast(total / n, out)  # 0 / 0 is NaN for an empty reduction


@kernel("aten.mean.dim")
def mean_dim(self, dim, keepdim=False, *, dtype=None):
    return _mean(self, _axes(dim, np.ndim(self), "mean"), keepdim, dtype)


@kernel("aten.mean.default")
def mean_all(self, *, dtype=None):
    return _mean(self, None, False, dtype)


def _prod(x: np.ndarray, axis: int, keepdim: bool, out: np.dtype) -> np.ndarray:
    """Left-to-right product along ``axis`` in ``out``'s arithmetic.

    ATen's prod (binary_kernel_reduce_vec in cpu/Reduce.h) folds sequentially in the
    result type whenever fewer than 4 SIMD vectors of elements are reduced; for the
    half types every c10::Half product is rounded. NumPy's float16 multiply.reduce
    keeps a float32 accumulator, so half types fold with multiply.accumulate, which
    rounds each partial product to the array's dtype.
    """
    x = as_array(x, out)
    if is_bool(out):
        return np.all(x, axis=axis, keepdims=keepdim)
    if is_int(out):
        return cast(np.prod(x.astype(int64), axis=axis, keepdims=keepdim), out)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        if x.shape[axis] == 0:
            result = np.ones(x.shape[:axis] + x.shape[axis + 1 :], out)
        elif out in _HALF_TYPES:
            result = np.take(np.multiply.accumulate(x, axis=axis), -1, axis=axis)
        elif is_complex(out):  # ATen's fold starts from 1: 1 * (inf + 0i) is inf + NaN i
            result = complex_multiply(np.ones((), out), np.multiply.reduce(x, axis=axis))
        else:
            result = np.multiply.reduce(x, axis=axis)
    result = np.asarray(result, out)
    return np.expand_dims(result, axis) if keepdim else result


def _prod_other_order(x: np.ndarray, axis: int, keepdim: bool, out: np.dtype, result: np.ndarray) -> np.ndarray:
    """``result`` with the other accepted value where the order of multiplication decides it: a
    product holding a zero and no NaN or infinity, whose factors of magnitude above 1 overflow
    ``out`` together, is NaN in an order that overflows before it meets the zero (inf * 0) and a
    signed zero in one that meets the zero first. eager's vectorized fold (several lanes from 4
    SIMD vectors on) and the reference's left-to-right fold take either."""
    if not is_float(out) or x.size == 0:
        return result
    w = as_array(x, out).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        big = np.sum(np.where(np.abs(w) > 1, np.log(np.abs(w)), 0.0), axis=axis, keepdims=keepdim)
        zero = np.any(w == 0, axis=axis, keepdims=keepdim)
        special = np.any(~np.isfinite(w), axis=axis, keepdims=keepdim)
        negative = np.sum(np.signbit(w), axis=axis, keepdims=keepdim) % 2 == 1
    limit = math.log(float(ml_dtypes.finfo(out).max)) if out in _HALF_TYPES or "float8" in str(out) else math.log(float(np.finfo(out).max))
    either = zero & ~special & (big > limit)
    signed_zero = np.where(negative, -0.0, 0.0)
    other = np.where(np.isnan(np.asarray(result, np.float64)), signed_zero, np.nan)
    return np.where(either, other, np.asarray(result, np.float64)).astype(out)


@alternative("aten.prod.dim_int")
def prod_dim_other_order(self, dim, keepdim=False, *, dtype=None):
    x = np.asarray(self)
    out = _integral_result(x, dtype)
    if x.ndim == 0:
        return as_array(x, out).copy()
    axis = _wrap_dim(dim, x.ndim, "prod")
    return _prod_other_order(x, axis, keepdim, out, _prod(x, axis, keepdim, out))


@alternative("aten.prod.default")
def prod_all_other_order(self, *, dtype=None):
    x = np.asarray(self).reshape(-1)
    out = _integral_result(x, dtype)
    return _prod_other_order(x, 0, False, out, _prod(x, 0, False, out))


@kernel("aten.prod.dim_int")
def prod_dim(self, dim, keepdim=False, *, dtype=None):
    x = np.asarray(self)
    out = _integral_result(x, dtype)
    axis = _wrap_dim(dim, x.ndim, "prod")
    if x.ndim == 0:
        return as_array(x, out).copy()
    return _prod(x, axis, keepdim, out)


@kernel("aten.prod.default")
def prod_all(self, *, dtype=None):
    x = np.asarray(self)
    out = _integral_result(x, dtype)
    # A contiguous tensor is folded in row-major order (TensorIterator coalesces its dims).
    return _prod(x.reshape(-1), 0, False, out)


# ---------------------------------------------------------------------------------------------
# extremes


def _extreme(self, dim, keepdim: bool, largest: bool, op: str) -> np.ndarray:
    x = np.asarray(self)
    axes = _axes(dim, x.ndim, op)
    _require_nonempty(x, axes, op)
    if x.ndim == 0:
        return x.copy()
    fn = np.max if largest else np.min  # both propagate NaN, as ATen's max/min reductions do
    return np.asarray(fn(_comparable(x), axis=axes, keepdims=keepdim)).astype(x.dtype)


@kernel("aten.amax.default")
def amax(self, dim=(), keepdim=False):
    return _extreme(self, dim, keepdim, True, "amax")


@kernel("aten.amin.default")
def amin(self, dim=(), keepdim=False):
    return _extreme(self, dim, keepdim, False, "amin")


def _extreme_all(self, largest: bool, op: str) -> np.ndarray:
    x = np.asarray(self)
    if x.size == 0:
        raise ValueError(
            f"{op}(): Expected reduction dim to be specified for input.numel() == 0. "
            "Specify the reduction dim with the 'dim' argument."
        )
    return _extreme(x, None, False, largest, op)


@kernel("aten.max.default")
def max_all(self):
    return _extreme_all(self, True, "max")


@kernel("aten.min.default")
def min_all(self):
    return _extreme_all(self, False, "min")


def _arg_extreme(x: np.ndarray, axis: int, largest: bool) -> np.ndarray:
    """Index of the first maximum (minimum) along ``axis``; a NaN counts as the extreme.

    ATen's max/min along a dim (cpu/TensorCompareKernel.cpp) replaces its running best
    only on a strictly better value and stops at the first NaN; ArgMaxOps/ArgMinOps
    (SharedReduceOps.h) break ties towards the lower index and rank NaN above
    everything. np.argmax/np.argmin return the first extreme and the first NaN.
    """
    fn = np.argmax if largest else np.argmin
    return fn(_comparable(x), axis=axis, keepdims=True).astype(int64)


def _extreme_dim(self, dim, keepdim: bool, largest: bool, op: str):
    x = np.asarray(self)
    axis = _wrap_dim(dim, x.ndim, op)
    if x.ndim == 0:
        return x.copy(), np.zeros((), int64)
    _require_nonempty(x, (axis,), op)
    index = _arg_extreme(x, axis, largest)
    values = np.take_along_axis(x, index, axis=axis)
    if not keepdim:
        index, values = np.squeeze(index, axis), np.squeeze(values, axis)
    return values, index


@kernel("aten.max.dim")
def max_dim(self, dim, keepdim=False):
    return _extreme_dim(self, dim, keepdim, True, "max")


@kernel("aten.min.dim")
def min_dim(self, dim, keepdim=False):
    return _extreme_dim(self, dim, keepdim, False, "min")


def _argextreme(self, dim, keepdim: bool, largest: bool, op: str) -> np.ndarray:
    x = np.asarray(self)
    if is_bool(x.dtype):
        raise TypeError(f"{op}: not implemented for bool tensors")
    if dim is None:
        if x.size == 0:
            raise ValueError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0.")
        index = _arg_extreme(x.reshape(-1), 0, largest).reshape(())
        return index.reshape((1,) * x.ndim) if keepdim else index
    return _extreme_dim(x, dim, keepdim, largest, op)[1]


@kernel("aten.argmax.default")
def argmax(self, dim=None, keepdim=False):
    return _argextreme(self, dim, keepdim, True, "argmax")


@kernel("aten.argmin.default")
def argmin(self, dim=None, keepdim=False):
    return _argextreme(self, dim, keepdim, False, "argmin")


# ---------------------------------------------------------------------------------------------
# var


@kernel("aten.var.correction")
def var(self, dim=None, *, correction=None, keepdim=False):
    """Variance with ``N - correction`` degrees of freedom (default correction 1).

    ATen (ReduceOps.cpp std_var_out) upcasts half types to float32 and computes in
    double (Welford, or two passes for full reductions), then rounds; two passes in
    float64 reproduce that. Degrees of freedom are clamped at 0, so a correction of
    N or more divides by zero: inf, or NaN when every deviation is zero.
    """
    x = np.asarray(self)
    if not is_float(x.dtype):
        raise TypeError("var(): std and var only support floating point and complex dtypes")
    axes = _axes(dim, x.ndim, "var")
    n = _count(x.shape, axes)
    c = 1 if correction is None else correction
    wide = x.astype(float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.sum(wide, axis=axes, keepdims=True) / n if n else np.full((1,) * x.ndim, np.nan)
        dev = wide - mean
        squares = np.sum(dev * dev, axis=axes, keepdims=keepdim)
        result = squares / max(0.0, n - c)
    return cast(cast(result, opmath(x.dtype)), x.dtype)


@kernel("aten.var.dim")
def var_dim(self, dim, unbiased=True, keepdim=False):
    """var.correction with correction 1 (unbiased) or 0: ATen's var(self, dim, unbiased, keepdim)
    calls std_var_out with exactly that correction (ReduceOps.cpp)."""
    return var(self, dim, correction=1 if unbiased else 0, keepdim=keepdim)


# ---------------------------------------------------------------------------------------------
# any / all


def _truth(self, axes, keepdim: bool, fn) -> np.ndarray:
    x = np.asarray(self)
    result = fn(x != 0, axis=axes, keepdims=keepdim)  # NaN is nonzero, so true
    # ATen keeps uint8 for uint8 inputs (a legacy of byte masks) and gives bool otherwise.
    return np.asarray(result).astype(_UINT8 if x.dtype == _UINT8 else bool_)


@kernel("aten.any.default")
def any_all(self):
    return _truth(self, None, False, np.any)


@kernel("aten.any.dim")
def any_dim(self, dim, keepdim=False):
    return _truth(self, _axes(dim, np.ndim(self), "any"), keepdim, np.any)


@kernel("aten.any.dims")
def any_dims(self, dim=None, keepdim=False):
    # An empty dim list reduces nothing here (unlike sum or amax): any.dims(x, []) is x != 0.
    return _truth(self, _axes(dim, np.ndim(self), "any", empty_means_all=False), keepdim, np.any)


@kernel("aten.all.default")
def all_all(self):
    return _truth(self, None, False, np.all)


@kernel("aten.all.dim")
def all_dim(self, dim, keepdim=False):
    return _truth(self, _axes(dim, np.ndim(self), "all"), keepdim, np.all)


@kernel("aten.all.dims")
def all_dims(self, dim=None, keepdim=False):
    return _truth(self, _axes(dim, np.ndim(self), "all", empty_means_all=False), keepdim, np.all)


# ---------------------------------------------------------------------------------------------
# scans


def _scan_acc(out: np.dtype) -> np.dtype:
    # at::acc_type<T, /*is_cuda=*/false>: double for float and double, float for half types.
    return float32 if out in _HALF_TYPES else float64


def _scan(self, dim, dtype, op: str, fn) -> np.ndarray:
    x = np.asarray(self)
    out = _integral_result(x, dtype)
    axis = _wrap_dim(dim, x.ndim, op)
    x = as_array(x, out)
    if x.ndim == 0:
        return x.copy()
    if is_float(out):
        acc = _scan_acc(out)
    elif is_complex(out):
        acc = np.complex128  # at::acc_type<c10::complex<float>, false> is c10::complex<double>
    elif is_bool(out):
        acc = int64  # bool results saturate: cast the integer scan back to bool
    else:
        acc = int64  # integer scans wrap in int64, then wrap again into ``out``
    with np.errstate(over="ignore", invalid="ignore"):
        return cast(fn(x.astype(acc), axis=axis), out)


@kernel("aten.cumsum.default")
def cumsum(self, dim, *, dtype=None):
    return _scan(self, dim, dtype, "cumsum", np.cumsum)


@kernel("aten.cumprod.default")
def cumprod(self, dim, *, dtype=None):
    return _scan(self, dim, dtype, "cumprod", np.cumprod)


# ---------------------------------------------------------------------------------------------
# logsumexp, vector norms


@kernel("aten.logsumexp.default")
def logsumexp(self, dim, keepdim=False):
    """log(sum(exp(x))) the way ReduceOps.cpp composes it, each step rounded to the dtype.

    maxes = amax(x, dim, keepdim=True) with infinite maxes replaced by 0, then
    log(sum(exp(x - maxes))) + maxes. Integer and bool inputs become float32.
    """
    x = np.asarray(self)
    dt = x.dtype if is_float(x.dtype) else float32
    x = x.astype(dt)
    acc = opmath(dt)
    axes = _axes(dim, x.ndim, "logsumexp")
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if x.size == 0:
            total = _sum(np.exp(x.astype(acc)).astype(dt), axes, keepdim, None)
            return cast(np.log(total.astype(acc)), dt)
        maxes = np.max(_comparable(x), axis=axes, keepdims=True).astype(dt)
        maxes = np.where(np.isinf(maxes), np.zeros((), dt), maxes)
        shifted = cast(x.astype(acc) - maxes.astype(acc), dt)
        exps = cast(np.exp(shifted.astype(acc)), dt)
        total = _sum(exps, axes, keepdim, None)
        logs = cast(np.log(total.astype(acc)), dt)
        squeezed = maxes if keepdim else maxes.reshape(logs.shape)
        return cast(logs.astype(acc) + squeezed.astype(acc), dt)


@kernel("aten.linalg_vector_norm.default")
def linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002 - ATen's name
    """sum(|x|^ord)^(1/ord); ord 0 counts nonzeros, +-inf take the max/min of |x|.

    ATen (LinearAlgebra.cpp, cpu/ReduceOpsKernel.cpp norm kernels) converts the input
    to ``dtype`` (which must not narrow it), accumulates in the opmath type (float32
    for half types and float32) without scaling, so sums of powers overflow where
    they overflow in that type, and raises 1/ord in that type.
    """
    x = np.asarray(self)
    if not is_float(x.dtype):
        raise TypeError(f"linalg.vector_norm: Expected a floating point tensor as input. Got {x.dtype}")
    out = x.dtype
    if dtype is not None:
        out = np.dtype(dtype)
        if not is_float(out) or (out != x.dtype and (x.dtype == float64 or out in _HALF_TYPES)):
            raise TypeError(f"linalg.vector_norm: the dtype of the input ({x.dtype}) should be convertible "
                            f"without narrowing to the specified dtype ({out})")
    acc = opmath(out)
    axes = _axes(dim, x.ndim, "linalg.vector_norm")
    p = float(ord)
    if math.isinf(p) and any(x.shape[a] == 0 for a in axes):
        raise ValueError(
            f"linalg.vector_norm cannot compute the {ord} norm on an empty tensor because the operation "
            "does not have an identity"
        )
    a = np.abs(as_array(x, out).astype(acc))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        explicit_0d = x.ndim == 0 and dim is not None and np.size(dim) > 0
        if p != 0 and math.prod(x.shape[i] for i in axes) == 1 and not explicit_0d:
            # one element per output: eager returns |x| for every ord but 0 (no power, so nothing
            # under- or overflows: the 2-norm of a 0-d 1e-20 is 1e-20 in float32, where squaring gives 0),
            # except a 0-d input given a dim ([0], -1): that one goes through the powers (measured)
            result = np.sum(a, axis=axes, keepdims=keepdim)
        elif p == 0:
            result = np.sum(a != 0, axis=axes, keepdims=keepdim, dtype=float64)
        elif p == math.inf:
            result = np.max(a, axis=axes, keepdims=keepdim)
        elif p == -math.inf:
            result = np.min(a, axis=axes, keepdims=keepdim)
        elif p == 1:
            result = np.sum(a.astype(float64), axis=axes, keepdims=keepdim)
        elif p == 2:
            sumsq = cast(np.sum(np.square(a).astype(float64), axis=axes, keepdims=keepdim), acc)
            result = np.sqrt(sumsq)
        else:
            powers = np.power(a, acc.type(p))
            total = cast(np.sum(powers.astype(float64), axis=axes, keepdims=keepdim), acc)
            result = np.power(total, acc.type(1) / acc.type(p))
    return cast(cast(result, acc), out)


# ---------------------------------------------------------------------------------------------
# softmax


_PARALLEL_MIN = 1 << 17
"""Elements from which softmax splits its work over two threads (NumPy ufuncs release the GIL)."""
_POOL: ThreadPoolExecutor | None = None


def _split_run(fn, x: np.ndarray, out: np.ndarray, axis: int) -> None:
    """fn(x, out) on two halves split along a dim other than ``axis``, like ATen's parallel_for."""
    global _POOL
    split = next((a for a in range(x.ndim) if a != axis and x.shape[a] >= 2), None)
    if x.size < _PARALLEL_MIN or split is None:
        fn(x, out)
        return
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reference-softmax")
    half = x.shape[split] // 2
    first = (slice(None),) * split + (slice(0, half),)
    second = (slice(None),) * split + (slice(half, None),)
    pending = _POOL.submit(fn, x[first], out[first])
    fn(x[second], out[second])
    pending.result()


def _softmax_input(self, dim, half_to_float: bool, op: str):
    x = np.asarray(self)
    if not is_float(x.dtype):
        raise TypeError(f"{op}: not implemented for {x.dtype}")
    if half_to_float:
        raise ValueError(f"{op}: softmax with half to float conversion is not supported on CPU")
    axis = _wrap_dim(dim, x.ndim, op)
    # SoftMax.cpp takes the *_lastdim kernels only when dim is the last dim of a tensor with dims.
    lastdim = x.ndim > 0 and axis == x.ndim - 1
    work = x.reshape(1) if x.ndim == 0 else x
    return x, work, axis, lastdim


@kernel("aten._softmax.default")
def _softmax(self, dim, half_to_float):
    """exp(x - max) / sum(exp(x - max)) in the opmath type, rounded once.

    Along the last dim ATen multiplies by the reciprocal of the sum
    (_vec_softmax_lastdim in cpu/SoftMaxKernel.cpp); other dims divide. A slice with
    NaN or +inf, or with every element -inf, is all NaN.
    """
    x, work, axis, lastdim = _softmax_input(self, dim, half_to_float, "softmax")
    acc = opmath(x.dtype)
    out = np.empty(work.shape, acc)

    def run(part: np.ndarray, e: np.ndarray) -> None:
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            np.subtract(part, np.max(part, axis=axis, keepdims=True).astype(acc), out=e, dtype=acc)
            np.exp(e, out=e)
            total = np.sum(e, axis=axis, keepdims=True)
            if lastdim:
                e *= acc.type(1) / total
            else:
                e /= total

    if x.size:
        _split_run(run, _comparable(work), out, axis)
    return cast(out.reshape(x.shape), x.dtype)


@kernel("aten._log_softmax.default")
def _log_softmax(self, dim, half_to_float):
    """x - max - log(sum(exp(x - max))) in the opmath type.

    For the half types along the last dim, ATen's _vec_log_softmax_lastdim keeps the
    per-row sum of exponentials in the tensor's dtype and takes its log there, so
    both the sum and its log are rounded to the half type before the subtraction.
    """
    x, work, axis, lastdim = _softmax_input(self, dim, half_to_float, "log_softmax")
    acc = opmath(x.dtype)
    out = np.empty(work.shape, acc)
    half = x.dtype in _HALF_TYPES

    def run(part: np.ndarray, shifted: np.ndarray) -> None:
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            np.subtract(part, np.max(part, axis=axis, keepdims=True).astype(acc), out=shifted, dtype=acc)
            total = np.sum(np.exp(shifted), axis=axis, keepdims=True)
            if lastdim and half:
                log_total = cast(np.log(cast(total, x.dtype).astype(acc)), x.dtype).astype(acc)
            else:
                log_total = np.log(total)
            shifted -= log_total

    if x.size:
        _split_run(run, _comparable(work), out, axis)
    return cast(out.reshape(x.shape), x.dtype)
