"""One numerics case: a drawn ``Call`` through eager, the reference kernel and a backend, compared.

``run`` is the one execution path of a numerics example. The NUM check (its bookkeeping:
counts, refusals by kind, worst statistics, batches), ``python -m conformance replay`` and
the ExecuTorch blob fuzzing call it; it keeps no counts and knows nothing of pytest.

1. Expected outputs: PyTorch eager and the reference kernel on the call. Eager refusing the
   call is HARNESS_ERROR (the op spec's domain is wrong); the reference failing, or disagreeing
   with eager beyond the op's tolerance, is ORACLE_DISAGREEMENT. A caller that already has
   expected outputs (a layout re-run, a saved example) passes them and none are computed.
2. The single-op program (``program_for``), its outputs described from eager's where the op
   makes fresh tensors (PyTorch's meta kernel costs more than the rest of the program). A call
   PyTorch's own tracing refuses, or shapes unlike eager, is set aside (SKIP): no backend can
   honour both. Whether it does is asked of the meta kernel only when the backend's verdict is
   not PASS: then the case stands as it is where the meta kernel describes the same outputs, is
   set aside where it refuses the call or disagrees with eager, and runs again on the meta
   kernel's program where only strides differ. The verdict is the one a program built by the
   meta kernel from the start would get.
3. preprocess -> init -> execute -> destroy through the ``Driver``, the inputs in ``layout``;
   ``blob`` replaces preprocess's processed bytes at init, ``preprocessed`` reuses an earlier
   preprocess result instead of running preprocess again. A stage's ``CheckFailure`` is the
   verdict (NOT_SUPPORTED for a clean refusal).
4. Every output compared with the oracle's layered tolerance
   (``oracle.tolerance_for(spec, dtype, backend.manifest, op)``), or held to the op's law where its
   values are random or undefined (op spec ``values``, ``oracle.compare_outputs``); the first that
   differs is the MISMATCH.

Messages name the call (``Call.describe``) and never a caller's label: a check prefixes its own.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from conformance import latitudes, oracle
from conformance.driver import Driver
from conformance.programs import (
    EagerOutputs,
    HarnessError,
    Program,
    eager_outputs,
    meta_program,
    output_capacities,
    program_for,
    shapes_disagree,
)
from conformance.results import Category, CheckFailure


@dataclass(frozen=True)
class Compared:
    """One output's comparison with its expected value, and the tolerance it was held to."""

    index: int
    comparison: oracle.Comparison
    tolerance: Any  # conformance.specs.Tolerance
    latitudes: tuple[str, ...] = ()
    """The declared latitudes this output was judged by (conformance.latitudes): those it passed
    under where the strict comparison failed (reassociation: passed within the bound, not bit for
    bit), or those it failed beyond."""

    @property
    def ok(self) -> bool:
        return self.comparison.ok


@dataclass(frozen=True)
class Prepared:
    """What a case needs before the backend: the expected outputs and the program."""

    expected: tuple[np.ndarray, ...]
    program: Program
    bounds: tuple[np.ndarray | None, ...] = ()
    """Per expected output, its accumulation bound (``bounds``), None where the op derives none."""
    alternatives: tuple[np.ndarray | None, ...] = ()
    """Per expected output, the other result eager's paths accept (``alternatives``), if any."""


@dataclass(frozen=True, eq=False)
class Outcome:
    """The verdict of one case, and everything it ran."""

    category: Category
    """PASS, MISMATCH, a stage's category (NOT_SUPPORTED for a clean refusal), HARNESS_ERROR or
    ORACLE_DISAGREEMENT before the backend ran, SKIP for a call set aside (see ``prepare``)."""
    message: str = ""
    """The verdict naming the call ("" on PASS), without any caller's label."""
    detail: str = ""
    """A failed stage's own message (the driver's), or why a call was set aside."""
    stage: str | None = None
    """The contract stage that failed (preprocess, init, execute, destroy), if one did."""
    stats: dict = field(default_factory=dict)
    """The failure's statistics: the differing output's comparison, or the stage's."""
    expected: tuple[np.ndarray, ...] | None = None
    outputs: tuple[np.ndarray, ...] | None = None
    """What the backend wrote (None unless execute returned)."""
    comparisons: tuple[Compared, ...] = ()
    """Every output compared (empty unless execute returned)."""
    program: Program | None = None
    preprocessed: Any = None
    """preprocess's PreprocessResult (or the one passed in), None if preprocess did not return."""
    blob: bytes | None = None
    """The processed bytes init was given (preprocess's or the override), None before init."""
    seconds: float | None = None
    """Wall time of the backend's stages; None when the backend was not run."""

    @property
    def ok(self) -> bool:
        return self.category is Category.PASS

    @property
    def ran(self) -> bool:
        """Whether the backend was run (refusals included)."""
        return self.seconds is not None

    @property
    def differing(self) -> Compared | None:
        """The first output that differs, if one does."""
        return next((c for c in self.comparisons if not c.ok), None)

    def failure(self, prefix: str = "", **stats) -> CheckFailure:
        """The outcome as the ``CheckFailure`` a check raises (``prefix`` before the message, ``stats`` after its own)."""
        return CheckFailure(self.category, f"{prefix}{self.message}", stats={**self.stats, **stats}, stage=self.stage)


def expected_outputs(spec, call) -> tuple[np.ndarray, ...]:
    """Eager's outputs, checked against the reference kernel's; the reference's are returned.

    Raises CheckFailure: HARNESS_ERROR when eager refuses the call, ORACLE_DISAGREEMENT when the
    reference fails or disagrees with eager."""
    return _expected(spec, call)[0]


def _expected(spec, call) -> tuple[tuple[np.ndarray, ...], EagerOutputs | None, tuple, tuple]:
    """``expected_outputs``, and eager's outputs as it returned them (None where they cannot describe
    the program), and the expected outputs' accumulation bounds (``bounds``) and alternatives
    (``alternatives``).

    The cross-check is the backend's check with eager in the backend's place: eager's outputs are
    held to the reference's with the same tolerance and bound, so an output of eager that passes
    here passes as a backend's, and the rule is one in both directions."""
    try:
        returned = eager_outputs(call)
        expected_eager = list(returned.arrays)
    except Exception as exc:
        raise CheckFailure(
            Category.HARNESS_ERROR, f"eager refused the drawn call {call.describe()}: {exc} (fix the op spec's domain)"
        ) from exc
    try:
        expected = reference(call)
    except Exception as exc:
        raise CheckFailure(
            Category.ORACLE_DISAGREEMENT, f"the reference failed on {call.describe()}: {type(exc).__name__}: {exc}"
        ) from exc
    if len(expected) != len(expected_eager):
        raise CheckFailure(
            Category.ORACLE_DISAGREEMENT,
            f"the reference gives {len(expected)} outputs for {call.describe()}, eager {len(expected_eager)}",
        )
    if spec is not None and spec.values != "reference":
        # Random or undefined values (op spec values; oracle.compare_outputs): the reference's outputs
        # and eager's are each held to the op's law, in eager's shapes and dtypes; never to each other.
        tols = [oracle.tolerance_for(spec, oracle.dtype_name(e.dtype)) for e in expected_eager]
        for whose, outputs in (("the reference", expected), ("eager", expected_eager)):
            for i, cmp in enumerate(oracle.compare_outputs(spec, call, outputs, expected_eager, tols)):
                if not cmp.ok:
                    raise CheckFailure(
                        Category.ORACLE_DISAGREEMENT,
                        f"{whose} breaks the law of {call.describe()} (values = {spec.values!r}) in output {i}: {cmp.message}",
                        stats=cmp.stats(),
                    )
        return tuple(expected), returned, (), ()
    limits, others = bounds(spec, call, expected), alternatives(call, expected)
    for i, (r, e) in enumerate(zip(expected, expected_eager)):
        if r is None:
            continue  # an output the call leaves undefined (output_mask): eager may compute it anyway
        if oracle.undefined_output(spec, call, i) is not None:
            continue  # values eager leaves undefined for this call (op spec defined_outputs)
        if e is None:
            raise CheckFailure(Category.ORACLE_DISAGREEMENT, f"eager leaves output {i} of {call.describe()} undefined, the reference does not")
        limit = limits[i] if i < len(limits) and limits[i] is not None and np.shape(limits[i]) == np.shape(r) else None
        other = others[i] if i < len(others) else None
        cmp = oracle.compare(e, r, oracle.tolerance_for(spec, oracle.dtype_name(r.dtype)), limit, other)
        if not cmp.ok:
            raise CheckFailure(
                Category.ORACLE_DISAGREEMENT,
                f"eager's output would fail as a backend's on {call.describe()} output {i} (eager held to the "
                f"reference by the backend's rule): {cmp.message}",
                stats=cmp.stats(),
            )
    limits = tuple(b for r, b in zip(expected, limits) if r is not None) if limits else ()
    others = tuple(b for r, b in zip(expected, others) if r is not None) if others else ()
    if any(r is None for r in expected):
        # The program's outputs are the defined ones (programs.program_results), which only the
        # meta kernel knows: eager may compute an output the call leaves undefined.
        return tuple(r for r in expected if r is not None), None, limits, others
    return tuple(expected), returned, limits, others


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
    from conformance.programs import _resolve_op
    from reference_backend.kernels import KERNELS

    op = _resolve_op(call.op)
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


def reference(call) -> list[np.ndarray | None]:
    """The reference kernel's outputs for ``call``, called directly, in the order of
    ``programs.EagerOutputs.arrays``: None where the call leaves an output undefined, then the
    arguments the op mutates (``programs.mutated_arguments``), which the kernel writes in place
    as ATen does (into copies here: the call's own arrays stay as drawn).

    The same values the reference backend computes for the call's program (its runtime
    calls this kernel on these arguments; tests/harness/test_programs.py shows the
    program path bit-identical), without lowering and running a second program per example.
    """
    from conformance.programs import _resolve_op, mutated_arguments, scalar_returns
    from reference_backend.kernels import KERNELS

    args, kwargs = call.numpy_args()
    mutated = []
    for i, name in mutated_arguments(_resolve_op(call.op)):
        if i < len(args) and args[i] is not None:
            args = (*args[:i], np.array(args[i], copy=True), *args[i + 1 :])
            mutated.append(args[i])
        elif kwargs.get(name) is not None:
            kwargs[name] = np.array(kwargs[name], copy=True)
            mutated.append(kwargs[name])
    out = KERNELS[call.op](*args, **kwargs)
    out = [*(out if isinstance(out, (tuple, list)) else (out,)), *mutated]
    scalar = scalar_returns(_resolve_op(call.op))
    # 0-d stays 0-d; a Scalar return (_local_scalar_dense) is a NumPy scalar, not a 0-d tensor
    return [None if o is None else np.asarray(o)[()] if i < len(scalar) and scalar[i] else np.array(o, order="C", copy=True)
            for i, o in enumerate(out)]


def prepare(spec, call, *, expected=None, program=None) -> Prepared | Outcome:
    """The expected outputs and the program of ``call`` (those given are kept), or the Outcome
    that ends the case before the backend: HARNESS_ERROR, ORACLE_DISAGREEMENT, or SKIP for a call
    set aside (PyTorch's tracing refuses a call eager computes, or declares other output shapes)."""
    built, like, limits, others = program is None, None, None, ()
    try:
        if expected is None:
            expected, like, limits, others = _expected(spec, call)
        expected = tuple(expected)
        if limits is None:
            limits, others = _judging(spec, call, expected)
        if built:
            program = program_for(call, dynamic=spec.dynamic, like=like)
    except CheckFailure as exc:
        return Outcome(exc.category, exc.message, stats=exc.stats, expected=expected)
    except HarnessError as exc:
        return Outcome(Category.HARNESS_ERROR, f"{call.describe()}: {exc}", detail=str(exc), expected=expected)
    except Exception as exc:
        # Eager computes the call but PyTorch's tracing (its meta kernel) refuses it (seen:
        # linalg_vector_norm's inf norm of an empty tensor): no program, so no test of a backend.
        reason = f"tracing refused a call eager computes: {exc}"
        return Outcome(Category.SKIP, f"{call.describe()}: {reason}", detail=reason, expected=expected)
    if built:
        declared = declared_shapes(program.exported)
        shapes = [tuple(e.shape) for e in expected]
        if declared is not None and declared != shapes:
            # PyTorch's own meta kernel disagrees with eager on this call (seen: aten.index.Tensor on
            # empty operands); no backend can honour both, so the example is not a test of one.
            reason = shapes_disagree(declared, shapes)
            return Outcome(Category.SKIP, f"{call.describe()}: {reason}", detail=reason, expected=expected, program=program)
    return Prepared(expected, program, limits, others)


def _judging(spec, call, expected) -> tuple[tuple, tuple]:
    """``bounds`` and ``alternatives`` for expected outputs given by a caller (the defined ones, in order)."""
    from reference_backend.kernels import ALTERNATIVES

    if (spec is None or spec.bound is None) and call.op not in ALTERNATIVES:
        return (), ()
    try:
        raw = reference(call)
    except Exception:
        return (), ()
    out = []
    for judged in (bounds(spec, call, raw), alternatives(call, raw)):
        defined = tuple(b for r, b in zip(raw, judged) if r is not None)
        out.append(defined if len(defined) == len(expected) else ())
    return out[0], out[1]


def alternatives(call, outputs) -> tuple[np.ndarray | None, ...]:
    """Per output of the reference kernel, the other result eager's paths accept where they
    compute the op two ways (``reference_backend.kernels.ALTERNATIVES``); () for the other ops."""
    from reference_backend.kernels import ALTERNATIVES

    if call.op not in ALTERNATIVES:
        return ()
    args, kwargs = call.numpy_args()
    with np.errstate(all="ignore"):
        out = ALTERNATIVES[call.op](*args, **kwargs)
    out = [None if o is None else np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else (out,))]
    return tuple(o if o is None or r is None or np.shape(o) == np.shape(r) else None for o, r in zip(out, outputs))


def declared_shapes(exported) -> list[tuple] | None:
    """The program's output shapes, or None where they are symbolic (an exported dynamic program)."""
    try:
        shapes = [tuple(n.meta["val"].shape) for n in exported.graph.output_node().args[0]]
    except (TypeError, AttributeError, KeyError):
        return None
    if not all(type(d) is int for shape in shapes for d in shape):
        return None  # a SymInt: int() of a data-dependent one raises rather than guess
    return shapes


def compare(backend, spec, op: str, outputs, expected, call=None, bounds=(), alternatives=()) -> tuple[Compared, ...]:
    """Every output against its expected value, with the oracle's layered tolerance and the outputs'
    accumulation ``bounds`` and ``alternatives`` (``Prepared``), the way the op spec's ``values`` says
    (``oracle.compare_outputs``: a law of random or undefined values needs the ``call``, whose
    arguments it involves)."""
    tols = [oracle.tolerance_for(spec, oracle.dtype_name(e.dtype), backend.manifest, op) for e in expected]
    outputs = [np.asarray(a) for a in outputs]
    compared = oracle.compare_outputs(spec, call, outputs, expected, tols, bounds or None, alternatives or None)
    declared = getattr(backend.manifest, "latitudes", ())
    if not declared or call is None or spec is None or spec.values != "reference":
        return tuple(Compared(i, c, t) for i, (c, t) in enumerate(zip(compared, tols)))
    model = _LatitudeModel(spec, call, expected, bounds, alternatives)
    out = []
    for i, (a, e, c, t) in enumerate(zip(outputs, expected, compared, tols)):
        names = latitudes.covering(declared, spec, call, oracle.dtype_name(np.asarray(e).dtype))
        if not names or oracle.undefined_output(spec, call, i) is not None or a.shape != e.shape or a.dtype != e.dtype:
            out.append(Compared(i, c, t))
        elif c.ok:
            taken = ("reassociation",) if "reassociation" in names and c.max_abs != 0 else ()
            out.append(Compared(i, c, t, taken))
        else:
            out.append(model.judge(i, a, c, t, names))
    return tuple(out)


class _LatitudeModel:
    """The expected outputs of one call as declared latitudes model them (conformance.latitudes),
    computed once for the call's outputs that fail the strict comparison."""

    def __init__(self, spec, call, expected, bounds, alternatives):
        self.spec, self.call, self.expected = spec, call, tuple(expected)
        self.bounds, self.alternatives = tuple(bounds or ()), tuple(alternatives or ())
        self._inputs: dict[tuple[str, ...], tuple] = {}

    def _recomputed(self, names: tuple[str, ...]):
        """(expected, bounds, alternatives, call) with the inputs as ``names`` read them; None where
        the reference fails on them or gives another number of outputs."""
        key = tuple(n for n in names if n in latitudes.INPUT_LATITUDES)
        if not key:
            return self.expected, self.bounds, self.alternatives, self.call
        if key not in self._inputs:
            moved = latitudes.transformed_call(self.call, self.spec, key)
            try:
                with np.errstate(all="ignore"):
                    raw = reference(moved)
            except Exception:  # the reference refuses the transformed inputs: no model, the strict verdict stands
                raw = []
            expected = tuple(r for r in raw if r is not None)
            if len(expected) != len(self.expected):
                self._inputs[key] = None
            else:
                defined = [[b for r, b in zip(raw, judged) if r is not None] for judged in (bounds(self.spec, moved, raw), alternatives(moved, raw))]
                self._inputs[key] = (expected, *(tuple(d) if len(d) == len(expected) else () for d in defined), moved)
        return self._inputs[key]

    def judge(self, i: int, actual: np.ndarray, strict: oracle.Comparison, tol, names: tuple[str, ...]) -> Compared:
        """Output ``i``, which failed the strict comparison, against the latitudes ``names``: passes
        within their model, naming the fewest of them it needs (each dropped that it passes without),
        else fails with them all named."""
        modelled = self._model(i, actual, tol, names)
        if modelled is None:
            said = ", ".join(names)
            return Compared(i, replace(strict, message=f"{strict.message} (declared latitude {said}: no model of this call)"), tol, names)
        cmp, amended = modelled
        if not cmp.ok:
            return Compared(i, replace(cmp, message=f"beyond its declared latitude {', '.join(names)}: {cmp.message}"), amended, names)
        for name in names if len(names) > 1 else ():
            fewer = tuple(n for n in names if n != name)
            again = self._model(i, actual, tol, fewer) if fewer else None
            if again is not None and again[0].ok:
                names, (cmp, amended) = fewer, again
        return Compared(i, replace(cmp, message=f"within declared latitude {', '.join(names)}"), amended, names)

    def _model(self, i: int, actual: np.ndarray, tol, names: tuple[str, ...]):
        """(the comparison of output ``i`` within the model of ``names``, its tolerance), or None."""
        modelled = self._recomputed(names)
        if modelled is None:
            return None
        expected, limits, others, call = modelled
        e = expected[i]
        bound = limits[i] if i < len(limits) and limits[i] is not None and np.shape(limits[i]) == np.shape(e) else None
        also = others[i] if i < len(others) else None
        if "fast-division" in names:
            also = latitudes.reciprocal_quotient(call, self.spec, e)
        if "ftz" in names:
            actual, e = latitudes.flush(actual), latitudes.flush(e)
            also = None if also is None else latitudes.flush(also)
        amended = latitudes.tolerance(tol, names)
        return oracle.compare(actual, e, amended, bound, also), amended


def _input_at(call, comparison) -> str:
    """", where the first tensor holds <value>" when the worst element has a counterpart in the call's
    first tensor argument (the same shape: an elementwise op), naming the input that went wrong (a
    tie, a subnormal), which the output values alone do not show."""
    tensors = call.tensors()
    index = comparison.worst_index
    if index is None or not tensors or tuple(tensors[0].value.shape) != tuple(comparison.shape):
        return ""
    value = tensors[0].value[tuple(index)]
    return f", where the first tensor holds {value.item() if value.dtype.kind in 'biuc' else float(value)!r}"


def run(
    backend,
    spec,
    call,
    *,
    expected=None,
    program: Program | None = None,
    layout: str = "contiguous",
    blob: bytes | None = None,
    preprocessed=None,
) -> Outcome:
    """Run ``call`` on ``backend`` and compare (see the module's docstring).

    ``expected`` and ``program``: those of an earlier run of the same call (a layout re-run, a saved
    example), used instead of computing them. ``layout``: how the inputs reach the backend
    (INPUT_LAYOUTS). ``blob``: processed bytes given to init instead of preprocess's.
    ``preprocessed``: an earlier PreprocessResult of ``program``, so preprocess does not run again."""
    prepared = prepare(spec, call, expected=expected, program=program)
    if isinstance(prepared, Outcome):
        return prepared
    outcome = _run(backend, spec, call, prepared, layout, blob, preprocessed)
    if outcome.ok or not prepared.program.outputs_from_eager:
        return outcome
    # Not a pass, on outputs described from eager's: the verdict of the meta kernel's program.
    checked = meta_program(prepared.program, call)
    if checked is prepared.program:
        return outcome
    if isinstance(checked, str):
        return Outcome(Category.SKIP, f"{call.describe()}: {checked}", detail=checked, expected=prepared.expected, program=prepared.program)
    return _run(backend, spec, call, Prepared(prepared.expected, checked, prepared.bounds, prepared.alternatives), layout, blob, None)


def _run(backend, spec, call, prepared: Prepared, layout: str, blob: bytes | None, preprocessed) -> Outcome:
    expected, program = prepared.expected, prepared.program
    driver = Driver(backend)
    result, given = preprocessed, None
    started = time.perf_counter()
    try:
        if result is None:
            result, _ = driver.preprocess(program.exported)
        given = result.processed_bytes if blob is None else blob
        loaded = driver.init(result, processed_bytes=blob)
        try:
            undefined = [oracle.undefined_output(spec, call, i) is not None for i in range(len(expected))]
            execution = driver.execute(loaded, program.inputs, expected, layout=layout, capacities=output_capacities(program.exported),
                                       undefined=undefined)
        finally:
            driver.destroy(loaded)
    except CheckFailure as exc:
        return Outcome(
            exc.category, f"{call.describe()}: {exc.message}", detail=exc.message, stage=exc.stage, stats=exc.stats,
            expected=expected, program=program, preprocessed=result, blob=given, seconds=time.perf_counter() - started,
        )  # fmt: skip
    seconds = time.perf_counter() - started
    outputs = tuple(execution.outputs)
    comparisons = compare(backend, spec, call.op, outputs, expected, call, prepared.bounds, prepared.alternatives)
    ran = {"expected": expected, "outputs": outputs, "comparisons": comparisons, "program": program,
           "preprocessed": result, "blob": given, "seconds": seconds}  # fmt: skip
    differing = next((c for c in comparisons if not c.ok), None)
    if differing is None:
        return Outcome(Category.PASS, **ran)
    message = f"{call.describe()} output {differing.index}: {differing.comparison.message}{_input_at(call, differing.comparison)}"
    return Outcome(Category.MISMATCH, message, detail=differing.comparison.message, stats=differing.comparison.stats(), **ran)
