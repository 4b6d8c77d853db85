"""Accumulation bounds of a call's expected outputs (op spec ``bound``; ``oracle.accumulation_bound``):
how far a correct computation of the op may stray from the reference's by its summation order,
from the call's own terms, lengths and moments."""

from __future__ import annotations

import re

import numpy as np

from conformance import oracle


def bounds(spec, call, outputs) -> tuple[np.ndarray | None, ...]:
    """Per output of the reference kernel (``reference``'s order, None where it leaves one undefined),
    the accumulation bound of an op whose spec derives one (op spec ``bound``;
    ``oracle.accumulation_bound``), else None; () for an op without one. Sum |terms| is the reference
    kernel on the absolute values of the call's floating-point tensors and Scalar arguments, in
    float64; the length n (``Bound.length``) "count" the kernel on their nonzero pattern (ones,
    Scalars 1), "ratio" numel(first tensor) / numel(output), "numel" the largest tensor's numel."""
    rule = spec.bound if spec is not None and spec.values == "reference" else None
    if rule is None:
        return ()
    arguments = oracle.arguments(call)
    if any(arguments.get(k) not in allowed for k, allowed in rule.when.items()):
        return ()
    if rule.kind == "moments":
        return _moments(call, arguments, outputs, rule)
    if rule.kind == "moments_backward":
        return _moments_backward(call, arguments, outputs, rule)
    sizes = [int(t.value.size) for t in call.tensors()]
    if rule.length == "count":
        lengths = _transformed(call, lambda v: (v != 0).astype(np.float64), lambda v: 1)
    elif rule.length == "dim":
        shape = call.tensors()[0].value.shape
        dims = arguments.get("dim")
        dims = [dims] if isinstance(dims, int) else list(dims or range(len(shape)))
        lengths = [None if o is None else float(np.prod([shape[d] for d in dims])) if shape else 1.0 for o in outputs]
    elif rule.length in ("kernel", "bins"):
        lengths = [None if o is None else _window(call, arguments, o, rule.length) for o in outputs]
    elif rule.length.startswith("numel:"):
        lengths = [None if o is None else float(np.size(arguments.get(rule.length[6:]))) for o in outputs]
    else:
        first = sizes[0] if sizes else 1
        lengths = [None if o is None else (first / max(1, np.size(o)) if rule.length == "ratio" else max(sizes, default=1))
                   for o in outputs]  # fmt: skip
    if rule.kind == "interpolation":  # weights the op chooses: the largest |x| of the input's plane (N, C, ...)
        x = _finite_magnitudes(np.asarray(call.tensors()[0].value))
        with np.errstate(invalid="ignore"):
            plane = np.max(x.reshape(x.shape[:2] + (-1,)), axis=-1, initial=0.0) if x.ndim > 2 and x.size else None
        terms = [None if o is None or plane is None or np.shape(o)[:2] != plane.shape
                 else np.broadcast_to(plane.reshape(plane.shape + (1,) * (np.ndim(o) - 2)), np.shape(o)) * rule.weight_sum
                 for o in outputs]  # fmt: skip
        lengths = [None if o is None else float(rule.taps) for o in outputs]
    elif rule.kind in ("sum", "mean"):
        terms = _transformed(call, _finite_magnitudes, abs)
    else:  # the log-sum and relative kinds: a function of n and of the expected value alone (oracle.accumulation_bound)
        terms = [None if o is None else np.asarray(o) for o in outputs]
    out = []
    for o, t, n in zip(outputs, terms, lengths):
        if o is None or t is None or n is None or np.asarray(o).dtype.kind not in "fcV" or np.shape(t) != np.shape(o):
            out.append(None)
            continue
        out.append(oracle.accumulation_bound(rule, oracle.dtype_name(np.asarray(o).dtype), t, n, arguments))
    return tuple(out)


def _pooled_dims(op: str, fallback: int) -> int:
    """The number of pooled dims of a pooling op: the digit of its name's ``Nd`` (avg_pool2d: 2)."""
    match = re.search(r"(\d)d[._]", op)
    return int(match.group(1)) if match else fallback


def _window(call, arguments, output, length: str) -> float:
    """Bound length ``kernel`` (the product of kernel_size over the pooled dims) or ``bins`` (the largest
    adaptive bin, or the bins covering one input element: ceil(L / l) + 1 per pooled dim)."""
    if length == "kernel":
        k = [int(v) for v in np.atleast_1d(arguments["kernel_size"])]
        d = _pooled_dims(call.op, len(k))
        return float(np.prod(k) if len(k) == d else k[0] ** d)
    first = np.shape(call.tensors()[0].value)
    d = _pooled_dims(call.op, 1)
    n = 1.0
    for a, b in zip(first[len(first) - d :], np.shape(output)[np.ndim(output) - d :]):
        big, small = max(a, b), max(1, min(a, b))
        n *= -(-big // small) + 1
    return n


def _moments(call, arguments, outputs, rule) -> tuple[np.ndarray | None, ...]:
    """Bounds of a ``moments`` op (oracle.moments_bound): the input's normalized elements as rows of a
    (groups, n) matrix by the op's schema: ``normalized_shape`` (layer_norm: the trailing dims), ``group``
    (group_norm: (N, group, C / group * HxW), weight per channel), else ``dim`` with ``correction`` or
    ``unbiased`` (var: the reduced dims, divided by n - correction)."""
    x = np.asarray(call.tensors()[0].value)
    dtype = oracle.dtype_name(x.dtype) if x.dtype.kind in "fV" else "float32"
    acc = rule.accumulator.get(dtype) or oracle.ACCUMULATOR.get(dtype, dtype)
    xf = x.astype(np.float64)
    if "normalized_shape" in arguments:
        k = len(arguments["normalized_shape"])
        lead = x.shape[: x.ndim - k]
        rows = xf.reshape(int(np.prod(lead)), int(np.prod(x.shape[x.ndim - k :])))
        weight, bias = (None if arguments.get(a) is None else np.asarray(arguments[a], np.float64).reshape(1, rows.shape[1])
                        for a in ("weight", "bias"))  # fmt: skip
        m = oracle.moments_bound(rows, acc, rows.shape[1], float(arguments["eps"]), weight, bias)
        return _fit(outputs, (m.normalized.reshape(x.shape), m.mean, m.rstd))
    if "group" in arguments:
        n_, c, g = x.shape[0], x.shape[1], int(arguments["group"])
        rows = xf.reshape(n_ * g, int(np.prod(x.shape[1:])) // max(1, g))
        per = rows.shape[1] // max(1, c // g) if c else 0

        def per_channel(name):
            v = arguments.get(name)
            if v is None:
                return None
            weights = np.asarray(v, np.float64).reshape(g, c // max(1, g))
            return np.broadcast_to(np.repeat(weights, per, axis=1)[None], (n_, g, rows.shape[1])).reshape(rows.shape)

        m = oracle.moments_bound(rows, acc, rows.shape[1], float(arguments["eps"]), per_channel("weight"), per_channel("bias"))
        return _fit(outputs, (m.normalized.reshape(x.shape), m.mean, m.rstd))
    if "running_var" in arguments and not arguments.get("training", False):  # batch norm in inference
        return _batch_inference(x, xf, arguments, outputs, acc)
    if "training" in arguments:  # batch norm in training: per channel over (N, *spatial)
        return _batch_moments(x, xf, arguments, outputs, acc)
    dims = arguments.get("dim")
    dims = list(range(x.ndim)) if dims is None or (not isinstance(dims, int) and len(dims) == 0) else np.atleast_1d(dims).tolist()
    dims = sorted({d % max(1, x.ndim) for d in dims}) if x.ndim else []
    kept = [d for d in range(x.ndim) if d not in dims]
    shape = (int(np.prod([x.shape[d] for d in kept])), int(np.prod([x.shape[d] for d in dims])))
    rows = np.transpose(xf, kept + dims).reshape(shape) if x.ndim else xf.reshape(1, 1)
    correction = arguments.get("correction")
    if correction is None:
        correction = 1 if arguments.get("unbiased", True) is not False else 0
    m = oracle.moments_bound(rows, acc, max(0.0, rows.shape[1] - float(correction)))
    return _fit(outputs, (m.variance,))


def _moments_backward(call, arguments, outputs, rule) -> tuple[np.ndarray | None, ...]:
    """Bounds of (grad_input, grad_weight, grad_bias) of native_layer_norm_backward (rows: the
    normalized trailing dims) or native_group_norm_backward (rows: (N, group), D channels x HxW each).
    The input gradient is computed in the opmath type (``oracle.ACCUMULATOR``), the parameters'
    gradients in the spec's ``accumulator`` (eager rounds a half type's after every row)."""
    x = np.asarray(arguments["input"])
    dtype = oracle.dtype_name(x.dtype)
    acc = oracle.ACCUMULATOR.get(dtype, dtype)
    acc_params = rule.accumulator.get(dtype) or acc
    xf, dy = x.astype(np.float64), np.asarray(arguments["grad_out"]).astype(np.float64)
    mean, rstd = np.asarray(arguments["mean"], np.float64).reshape(-1), np.asarray(arguments["rstd"], np.float64).reshape(-1)
    weight = arguments.get("weight")
    if "normalized_shape" in arguments:
        n = int(np.prod([int(v) for v in arguments["normalized_shape"]]))
        rows = xf.size // max(n, 1) if n else mean.size
        gamma_rows = np.ones(n) if weight is None else np.asarray(weight, np.float64).reshape(n)
        xr, dyr = xf.reshape(rows, n), dy.reshape(rows, n)
        g = np.abs(dyr * gamma_rows)
        dx = oracle.normalization_grad_bound(g, xr, mean, rstd, n, n, acc).reshape(x.shape)
        # per column: sums over the rows of dy (a x - a mean) and of dy
        terms = np.abs(dyr) * np.abs(rstd)[:, None] * (np.abs(xr) + np.abs(mean)[:, None])
        d_weight = oracle.gamma(rows + 3, oracle.unit_roundoff(acc_params)) * terms.sum(axis=0)
        d_bias = oracle.gamma(rows + 1, oracle.unit_roundoff(acc_params)) * np.abs(dyr).sum(axis=0)
        return _fit(outputs, (dx, d_weight, d_bias))
    n_, c, hw, groups = (int(arguments[k]) for k in ("N", "C", "HxW", "group"))
    d = c // max(groups, 1)
    gamma_c = np.ones(c) if weight is None else np.asarray(weight, np.float64).reshape(c)
    x4, dy4 = xf.reshape(n_, groups, d, hw), dy.reshape(n_, groups, d, hw)
    g = np.abs(dy4 * gamma_c.reshape(1, groups, d, 1)).reshape(n_ * groups, d * hw)
    dx = oracle.normalization_grad_bound(g, x4.reshape(n_ * groups, d * hw), mean, rstd, d * hw, hw + d, acc).reshape(x.shape)
    m4, r4 = mean.reshape(n_, groups, 1, 1), np.abs(rstd).reshape(n_, groups, 1, 1)
    terms = (np.abs(dy4) * r4 * (np.abs(x4) + np.abs(m4))).sum(axis=(0, 3)).reshape(c)
    d_weight = oracle.gamma(n_ + hw + 3, oracle.unit_roundoff(acc_params)) * terms
    d_bias = oracle.gamma(n_ + hw + 1, oracle.unit_roundoff(acc_params)) * np.abs(dy4).sum(axis=(0, 3)).reshape(c)
    return _fit(outputs, (dx, d_weight, d_bias))


def _batch_inference(x, xf, arguments, outputs, acc: str) -> tuple[np.ndarray | None, ...]:
    """Batch norm with its running statistics: out = x alpha + beta with alpha = weight / sqrt(running_var
    + eps) and beta = bias - running_mean alpha, no accumulation: a few roundings in ``acc`` of the
    terms, 6 u (|x| + |running_mean|) |alpha| + 3 u |bias| (x alpha and beta cancel near zero: eager's
    vectorized and scalar paths round them differently). The other outputs keep their rounding."""
    c = x.shape[1] if x.ndim > 1 else 1
    shape = (1, c) + (1,) * max(0, x.ndim - 2)
    u = oracle.unit_roundoff(acc)
    with np.errstate(all="ignore"):
        weight = 1.0 if arguments.get("weight") is None else np.abs(np.asarray(arguments["weight"], np.float64))
        bias = 0.0 if arguments.get("bias") is None else np.abs(np.asarray(arguments["bias"], np.float64))
        alpha = weight / np.sqrt(np.abs(np.asarray(arguments["running_var"], np.float64)) + float(arguments["eps"]))
        mean = np.abs(np.asarray(arguments["running_mean"], np.float64))
        out = 6 * u * (np.abs(xf) + np.broadcast_to(mean, (c,)).reshape(shape)) * np.broadcast_to(alpha, (c,)).reshape(shape)
        out = out + 3 * u * np.broadcast_to(bias, (c,)).reshape(shape)
    return _fit(outputs, (np.where(np.isfinite(out), out, np.inf),))


def _batch_moments(x, xf, arguments, outputs, acc: str) -> tuple[np.ndarray | None, ...]:
    """Batch norm in training: each channel's rows over (N, *spatial); outputs (out, save_mean,
    save_invstd) and, with running statistics, running_mean and running_var updated to
    momentum * batch + (1 - momentum) * old (the variance unbiased)."""
    c = x.shape[1] if x.ndim > 1 else 1
    moved = np.moveaxis(xf.reshape(x.shape[0], c, -1) if x.size else xf.reshape(x.shape[0], c, 0), 1, 0)
    rows = moved.reshape(c, -1)
    n = rows.shape[1]
    weight, bias = (None if arguments.get(a) is None else np.broadcast_to(np.asarray(arguments[a], np.float64).reshape(c, 1), rows.shape)
                    for a in ("weight", "bias"))  # fmt: skip
    m = oracle.moments_bound(rows, acc, max(0, n - 1), float(arguments["eps"]), weight, bias)
    out = np.moveaxis(m.normalized.reshape(moved.shape), 0, 1).reshape(x.shape)
    momentum, u = abs(float(arguments.get("momentum") or 0.0)), oracle.unit_roundoff(acc)
    bounds = [out, m.mean, m.rstd]
    if arguments.get("running_mean") is not None:
        for k, (old, moment) in enumerate((("running_mean", m.mean), ("running_var", m.variance)), start=3):
            previous = np.abs(np.asarray(arguments[old], np.float64))
            updated = np.abs(np.asarray(outputs[k], np.float64)) if k < len(outputs) and outputs[k] is not None else previous
            bounds.append(momentum * moment + 3 * u * (previous + updated))
    return _fit(outputs, tuple(bounds))


def _fit(outputs, bounds) -> tuple[np.ndarray | None, ...]:
    """Each bound reshaped to its output (None where the output is undefined or its size differs)."""
    return tuple(None if o is None or b is None or np.size(b) != np.size(o) or np.asarray(o).dtype.kind not in "fcV"
                 else np.asarray(b, np.float64).reshape(np.shape(o)) for o, b in zip(outputs, bounds))  # fmt: skip


def _finite_magnitudes(v: np.ndarray) -> np.ndarray:
    """|v| in float64 with NaN and infinities as 0: the terms whose sum's rounding the bound covers
    (a NaN or an infinite input decides its outputs by the NaN and infinity rules alone)."""
    m = np.abs(v.astype(np.complex128 if v.dtype.kind == "c" else np.float64)).astype(np.float64)
    return np.where(np.isfinite(m), m, 0.0)


def _transformed(call, tensor, scalar) -> list[np.ndarray | None]:
    """The reference kernel's outputs on the call with each floating-point tensor replaced by
    ``tensor(value)`` (float64) and each Scalar argument of the schema by ``scalar(value)``; a
    ``dtype`` attribute that names a float type becomes float64."""
    from conformance.programs.operators import resolve_op
    from reference_backend.kernels import KERNELS

    op = resolve_op(call.op)
    scalars = {a.name for a in op._schema.arguments if str(a.type).rstrip("?") in ("Scalar", "number")}
    names = [a.name for a in op._schema.arguments]
    args, kwargs = call.numpy_args()

    def convert(value, name):
        if isinstance(value, np.ndarray) and value.dtype.kind in "fcV":
            return tensor(value)
        if isinstance(value, (list, tuple)):
            return type(value)(convert(v, None) for v in value)
        if name in scalars and isinstance(value, (int, float)) and not isinstance(value, bool):
            return scalar(value)
        return value

    args = tuple(convert(a, names[i] if i < len(names) else None) for i, a in enumerate(args))
    kwargs = {k: convert(v, k) for k, v in kwargs.items()}
    if isinstance(kwargs.get("dtype"), np.dtype) and kwargs["dtype"].kind in "fcV":
        kwargs["dtype"] = np.dtype(np.float64)
    with np.errstate(all="ignore"):
        out = KERNELS[call.op](*args, **kwargs)
    return [None if o is None else np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else (out,))]
