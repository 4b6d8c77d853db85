"""Backends that compute one op as an accelerator does, emulated on CPU (issue 30): each is the
reference with one kernel replaced, certified with and without declaring the latitude it takes.

tests/test_latitudes.py proves each: declared, it is certified and the verdict names the latitude;
undeclared, its NUM check fails; and TF32 declared by a backend that rounds its operands to
bfloat16's 7-bit mantissa instead fails, naming tf32. The emulations are written here without the
oracle's own models (conformance.latitudes), so they test them. ``tests/seeded/latitudes.py:<name>``
certifies any of them from the command line.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np

from conformance.api import BackendUnderTest
from reference_backend import ReferenceBackend, ReferenceRuntime, backend_under_test
from reference_backend.kernels import KERNELS

_REFERENCE = backend_under_test()
BACKENDS: dict[str, BackendUnderTest] = {}


def _backend(name: str, kernels: dict, latitudes=(), what: str = "") -> BackendUnderTest:
    table = dict(KERNELS)
    table.update(kernels)
    backend = BackendUnderTest(
        name=f"latitude-{name.replace('_', '-')}",
        details=ReferenceBackend,
        runtime=ReferenceRuntime(kernels=table),
        version="seeded",
        manifest=dataclasses.replace(_REFERENCE.manifest, latitudes=tuple(latitudes)),
        description=f"the reference computing {what}; declares {', '.join(latitudes) or 'no latitude'}",
    )
    BACKENDS[name] = backend
    globals()[name] = backend
    return backend


# -- tf32: matmul and convolution operands rounded to a 10-bit mantissa --------------------------------


def _significant(x, bits: int):
    """float32 ``x`` with ``bits`` significant bits (the implicit one included), to nearest, ties to
    even, in a format of float32's exponent range: x divided by its quantum (2**(e - bits) for frexp's
    exponent e, no finer than the subnormals' 2**(-125 - bits)), rounded by np.round (half to even)."""
    x = np.asarray(x)
    if x.dtype != np.float32:
        return x
    with np.errstate(all="ignore"):
        wide = x.astype(np.float64)
        _, e = np.frexp(wide)
        quantum = np.ldexp(1.0, np.maximum(e, -125) - bits)
        out = (np.round(wide / quantum) * quantum).astype(np.float32)
    return np.where(np.isfinite(x), out, x)


def _tf32(x):
    return _significant(x, 11)  # TensorFloat-32: 10 explicit mantissa bits


def _bfloat16(x):
    x = np.asarray(x)
    return x.astype(ml_dtypes.bfloat16).astype(np.float32) if x.dtype == np.float32 else x


_mm, _addmm, _convolution = KERNELS["aten.mm.default"], KERNELS["aten.addmm.default"], KERNELS["aten.convolution.default"]


def _tensor_cores(rounding):
    """mm, addmm and convolution with their float32 operands rounded by ``rounding``; mm accumulates
    in float32 (NumPy's sgemm: its own blocking), addmm and convolution in the reference's float64;
    addmm's self and a convolution's bias added unrounded, as cuBLAS' and cuDNN's epilogues do."""

    def mm(self, mat2):
        a, b = np.asarray(self), np.asarray(mat2)
        if a.dtype != np.float32 or b.dtype != np.float32:
            return _mm(self, mat2)
        with np.errstate(all="ignore"):
            return np.matmul(rounding(a), rounding(b)).astype(np.float32)

    def addmm(self, mat1, mat2, *, beta=1, alpha=1):
        return _addmm(self, rounding(mat1), rounding(mat2), beta=beta, alpha=alpha)

    def convolution(input, weight, bias, *args, **kwargs):  # noqa: A002
        return _convolution(rounding(input), rounding(weight), bias, *args, **kwargs)

    return {"aten.mm.default": mm, "aten.addmm.default": addmm, "aten.convolution.default": convolution}


_backend("tf32", _tensor_cores(_tf32), ["tf32"], "mm, addmm and convolution on TF32-rounded operands")
_backend("tf32_undeclared", _tensor_cores(_tf32), [], "mm, addmm and convolution on TF32-rounded operands")
_backend("tf32_exceeded", _tensor_cores(_bfloat16), ["tf32"], "mm, addmm and convolution on bfloat16-rounded operands")


# -- ftz: subnormal results flushed to zero ------------------------------------------------------------

_mul = KERNELS["aten.mul.Tensor"]


def _mul_flushing(self, other):
    out = np.asarray(_mul(self, other))
    if out.dtype.kind != "f":
        return out
    with np.errstate(invalid="ignore"):
        subnormal = (out != 0) & (np.abs(out) < np.finfo(out.dtype).tiny)
    return np.where(subnormal, np.copysign(np.zeros((), out.dtype), out), out).astype(out.dtype)


_backend("ftz", {"aten.mul.Tensor": _mul_flushing}, ["ftz"], "mul with subnormal results flushed to zero")
_backend("ftz_undeclared", {"aten.mul.Tensor": _mul_flushing}, [], "mul with subnormal results flushed to zero")


# -- fast-division: x * (1 / y) ------------------------------------------------------------------------

_div = KERNELS["aten.div.Tensor"]


def _div_by_reciprocal(self, other):
    a, b = np.asarray(self), np.asarray(other)
    if a.dtype != np.float32 or b.dtype != np.float32:
        return _div(self, other)
    with np.errstate(all="ignore"):
        return (a * (np.float32(1) / b)).astype(np.float32)


_backend("fast_division", {"aten.div.Tensor": _div_by_reciprocal}, ["fast-division"], "div as x * (1 / y)")
_backend("fast_division_undeclared", {"aten.div.Tensor": _div_by_reciprocal}, [], "div as x * (1 / y)")


# -- reassociation: another summation order ------------------------------------------------------------

_sum = KERNELS["aten.sum.dim_IntList"]


def _sum_reversed(self, dim, keepdim=False, *, dtype=None):
    """Sums in float32 (float64 for float64), the last term first, one rounding per addition."""
    x = np.asarray(self)
    out = np.asarray(_sum(self, dim, keepdim, dtype=dtype))
    if out.dtype.kind != "f" or x.size == 0 or x.ndim == 0:
        return out
    acc = np.float64 if out.dtype == np.float64 else np.float32
    axes = tuple(range(x.ndim)) if not dim else tuple(sorted({d % x.ndim for d in dim}))
    moved = np.moveaxis(x.astype(acc), axes, tuple(range(-len(axes), 0)))
    terms = moved.reshape(moved.shape[: moved.ndim - len(axes)] + (-1,))
    total = np.zeros(terms.shape[:-1], acc)
    with np.errstate(all="ignore"):
        for k in range(terms.shape[-1] - 1, -1, -1):
            total = (total + terms[..., k]).astype(acc)
    return total.reshape(out.shape).astype(out.dtype)


_backend("reassociation", {"aten.sum.dim_IntList": _sum_reversed}, ["reassociation"], "sum in reverse order")
_backend("reassociation_undeclared", {"aten.sum.dim_IntList": _sum_reversed}, [], "sum in reverse order")


# -- signed-zero: relu(-0.0) as +0.0 -------------------------------------------------------------------

_relu = KERNELS["aten.relu.default"]


def _relu_positive_zero(self):
    out = np.asarray(_relu(self))
    return np.where(out == 0, np.zeros((), out.dtype), out).astype(out.dtype) if out.dtype.kind == "f" else out


_backend("signed_zero", {"aten.relu.default": _relu_positive_zero}, ["signed-zero"], "relu with +0.0 for -0.0")
_backend("signed_zero_undeclared", {"aten.relu.default": _relu_positive_zero}, [], "relu with +0.0 for -0.0")
