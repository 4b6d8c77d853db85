"""Judging an op's outputs the way its spec's ``values`` says (conformance.specs.VALUE_MODES):
value by value against the reference, or where the op leaves them random or undefined, by the law
that holds for every draw."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from conformance.oracle.comparison import Comparison, base_fields, compare, layout_differs, show_float
from conformance.oracle.statistics import FALSE_ALARM, ks_test, normal_cdf, resolution_of
from conformance.specs import OpSpec

__all__ = ["compare_outputs", "undefined_output", "arguments", "dropout_output"]


def compare_outputs(spec: OpSpec | None, call, actual, expected, tolerances, bounds=None, alternatives=None) -> list[Comparison]:
    """Each output of ``call`` against its expected one, the way the op spec's ``values`` says
    (conformance.specs.VALUE_MODES). "reference": ``compare``, value by value, with each output's
    accumulation bound from ``bounds`` and the other result eager's paths accept from ``alternatives``
    (None, or None per output, where there is none). Otherwise ``expected``
    says only the shapes and dtypes (and, for "prefix", the defined values), and the values are held
    to what the op guarantees for every draw: neither eager's values nor the reference's can be
    another run's (a backend's random stream never equals eager's)."""
    mode = spec.values if spec is not None else "reference"
    if mode == "reference":
        out = []
        for i, (a, e, t) in enumerate(zip(actual, expected, tolerances)):
            why = undefined_output(spec, call, i)
            if why is None:
                b = bounds[i] if bounds is not None and i < len(bounds) else None
                alt = alternatives[i] if alternatives is not None and i < len(alternatives) else None
                out.append(compare(a, e, t, b if b is not None and np.shape(b) == np.shape(e) else None, alt))
            else:
                a, e = np.asarray(a), np.asarray(e)
                # neither its values nor its size: eager's CUDA batch norm returns save_mean sized [C] in
                # eval mode where its CPU kernel returns [0]; only the dtype is the op's
                if a.dtype != e.dtype:
                    out.append(Comparison(False, f"dtype {a.dtype} != expected {e.dtype} ({why})", **base_fields(e, t)))
                else:
                    out.append(Comparison(True, f"dtype matches; size {list(a.shape)} and values not compared ({why})",
                                          total=int(e.size), **base_fields(e, t)))
        return out
    return _LAWS[mode]([np.asarray(a) for a in actual], [np.asarray(e) for e in expected], list(tolerances), call)


def undefined_output(spec: OpSpec | None, call, index: int) -> str | None:
    """Why output ``index`` of ``call`` has no defined values, or None when it has: the op spec's
    ``defined_outputs`` names the attribute values under which eager defines each output (an
    attribute the call leaves out takes its schema default; an empty table, ``false`` in the spec,
    defines it for no call)."""
    rules = spec.defined_outputs if spec is not None else ()
    if call is None or index >= len(rules) or rules[index] is None:
        return None
    if not rules[index]:
        return "values undefined for every call (op spec defined_outputs: false)"
    from conformance.programs.operators import resolve_op, schema_args

    given = arguments(call)
    defaults = {a.name: a.default for a in schema_args(resolve_op(call.op)) if a.has_default}
    for key, allowed in rules[index].items():
        value = given.get(key, defaults.get(key))
        if value not in allowed:
            return f"values undefined for {key}={value!r}: defined for {key} in {list(allowed)} (op spec defined_outputs)"
    return None


def arguments(call) -> dict[str, Any]:
    """The call's arguments by their ATen schema names, tensors as NumPy arrays (the schema's
    defaults for those it leaves out)."""
    from conformance.programs.operators import resolve_op, schema_args

    args, kwargs = call.numpy_args()
    schema = schema_args(resolve_op(call.op))
    bound = {a.name: a.default for a in schema if a.has_default}
    bound.update(zip((a.name for a in schema), args))
    bound.update(kwargs)
    return bound


def _undefined(actual, expected, tolerances, call) -> list[Comparison]:
    return [
        layout_differs(a, e, t) or Comparison(True, "shape and dtype match (values undefined)", total=int(e.size), **base_fields(e, t))
        for a, e, t in zip(actual, expected, tolerances)
    ]


def _prefix(actual, expected, tolerances, call) -> list[Comparison]:
    """resize_: the elements the op's first tensor argument had keep their values, in flattened
    order; the elements past them are undefined (ATen leaves grown storage uninitialized)."""
    tensors = call.tensors()
    defined = int(tensors[0].value.size) if tensors else 0
    out = []
    for a, e, t in zip(actual, expected, tolerances):
        differs = layout_differs(a, e, t)
        if differs is not None:
            out.append(differs)
            continue
        k = min(defined, int(e.size))
        cmp = compare(a.reshape(-1)[:k], e.reshape(-1)[:k], t)
        out.append(replace(cmp, message=f"first {k} of {e.size} elements, flattened (the rest are undefined): {cmp.message}"))
    return out


def _one_output(actual, expected, tolerances):
    """A one-output law's output, expected output, Comparison fields and size, and its verdict when
    there is nothing to test (wrong shape or dtype, or empty), else None."""
    a, e, t = actual[0], expected[0], tolerances[0]
    differs = layout_differs(a, e, t)
    n = int(e.size)
    done = [differs or Comparison(True, "empty", **base_fields(e, t))] if differs is not None or n == 0 else None
    return a, e, base_fields(e, t), n, done


def _sample_law(name: str, admits, admitted: str, cdf):
    """A law of one output whose elements are independent draws from one distribution: every value
    in its support, and the sample that distribution by Kolmogorov-Smirnov."""

    def check(actual, expected, tolerances, call) -> list[Comparison]:
        a, e, base, n, done = _one_output(actual, expected, tolerances)
        if done is not None:
            return done
        x = a.astype(np.float64)
        with np.errstate(invalid="ignore"):
            outside = ~admits(x)
        if outside.any():
            worst = np.unravel_index(int(np.argmax(outside)), e.shape)
            return [Comparison(
                False, f"{int(outside.sum())}/{n} values outside {admitted} (the support of {name}); first at "
                f"{[int(i) for i in worst]}: got {show_float(a[worst])}", total=n, mismatched=int(outside.sum()),
                worst_index=tuple(int(i) for i in worst), actual_at_worst=a[worst], **base,
            )]  # fmt: skip
        resolution = resolution_of(e.dtype)
        statistic, p_value = ks_test(x, cdf, resolution)
        test = {"test": f"Kolmogorov-Smirnov against {name}", "statistic": statistic, "p_value": p_value,
                "false_alarm": FALSE_ALARM, "n": n}  # fmt: skip
        detail = f"(n = {n}; {resolution:.2g} of the statistic set aside for {base['dtype']}'s resolution)"
        if p_value < FALSE_ALARM:
            return [Comparison(False, f"KS statistic {statistic:.4g}: p = {p_value:.3g} < false-alarm {FALSE_ALARM:g} {detail}: "
                               f"not {name}", total=n, mismatched=n, test=test, **base)]
        return [Comparison(True, f"{name} by KS: statistic {statistic:.4g}, p = {p_value:.3g} {detail}", total=n, test=test, **base)]

    return check


def _permutation(actual, expected, tolerances, call) -> list[Comparison]:
    """randperm(n): the values are 0..n-1, each once; and, for n >= 64, the position of a value is
    independent of the value: positions and values cut into k blocks (k = 2..16, at least 64
    elements a block), every block of positions holds each block of values as often as a uniform
    permutation does (its count is hypergeometric: scipy.stats.hypergeom, two-sided), tested on all
    k * k counts at once (Bonferroni)."""
    from scipy import stats

    a, e, base, n, done = _one_output(actual, expected, tolerances)
    if done is not None:
        return done
    w = a.reshape(-1).astype(np.float64)
    with np.errstate(invalid="ignore"):
        outside = ~((w >= 0) & (w < n) & (w == np.floor(w)))
    if outside.any():
        first = int(np.argmax(outside))
        return [Comparison(False, f"{int(outside.sum())}/{n} values are not integers in 0..{n - 1}; first at [{first}]: "
                           f"got {a.reshape(-1)[first]!r}", total=n, mismatched=int(outside.sum()), **base)]
    counts = np.bincount(w.astype(np.int64), minlength=n)
    if (counts != 1).any():
        repeated, missing = np.flatnonzero(counts > 1), np.flatnonzero(counts == 0)
        return [Comparison(
            False, f"not a permutation of 0..{n - 1}: {len(repeated)} value(s) repeated (first {int(repeated[0])}, "
            f"{int(counts[repeated[0]])} times), {len(missing)} missing (first {int(missing[0])})",
            total=n, mismatched=int(len(missing)), **base,
        )]  # fmt: skip
    if n < 64:
        return [Comparison(True, f"a permutation of 0..{n - 1} (n < 64: too few for a test of uniformity)", total=n, **base)]
    k = max(2, min(16, math.isqrt(n // 64)))
    block = np.arange(n) * k // n
    table = np.bincount(block * k + w.astype(np.int64) * k // n, minlength=k * k).reshape(k, k)
    sizes = np.bincount(block, minlength=k)
    draws, share = sizes[:, None], sizes[None, :]
    law = stats.hypergeom(n, share, draws)  # cell (i, j): draws[i] positions taking from sizes[j] values of n
    p_cells = np.minimum(1.0, 2 * np.minimum(law.cdf(table), law.sf(table - 1)))
    i, j = np.unravel_index(int(np.argmin(p_cells)), p_cells.shape)
    p_value = min(1.0, float(p_cells[i, j]) * k * k)
    test = {"test": f"uniform permutation: {k} x {k} block counts (hypergeometric, Bonferroni)",
            "statistic": int(table[i, j]), "p_value": p_value, "false_alarm": FALSE_ALARM, "n": n}  # fmt: skip
    cell = (f"positions block {i} of {k} holds {int(table[i, j])} values of values block {j} "
            f"(a uniform permutation: {float(draws[i, 0] * share[0, j] / n):.1f} on average)")  # fmt: skip
    if p_value < FALSE_ALARM:
        return [Comparison(False, f"a permutation, but not a uniform one: {cell}; p = {p_value:.3g} < false-alarm "
                           f"{FALSE_ALARM:g}", total=n, mismatched=n, test=test, **base)]
    return [Comparison(True, f"a uniform permutation: least likely block count p = {p_value:.3g}", total=n, test=test, **base)]


def dropout_output(input: np.ndarray, mask: np.ndarray, p: float) -> np.ndarray:  # noqa: A002 - ATen's name
    """input * mask * scale as eager's native_dropout computes it (measured, torch 2.13 CPU): scale =
    1/(1-p) in double (0 for p = 1) rounded to the input's dtype (through float32 for the half types, as
    c10::Half and c10::BFloat16 are built from a float), the product rounded once; a dropped element is
    input * 0 (-0.0 for a negative input, NaN for an infinite one). Not input / (1-p): at p = 0.3 that
    differs from eager in one float16 element in seven."""
    compute = np.float64 if input.dtype == np.float64 else np.float32
    scale = np.asarray(0.0 if p == 1 else 1.0 / (1.0 - p), np.float64).astype(compute).astype(input.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        return (input.astype(compute) * mask.astype(compute) * scale.astype(compute)).astype(input.dtype)


def _dropout(actual, expected, tolerances, call) -> list[Comparison]:
    """native_dropout(input, p, train) -> (output, mask). Without training (train False) output is
    input and mask all true; with it (train True or None), output is ``dropout_output`` of the mask
    returned, and the mask drops each element with probability p: all kept for p = 0, none for
    p = 1, else its dropped count binomial(n, p), by the exact binomial test (scipy.stats.binomtest)."""
    from scipy import stats

    given = arguments(call)
    x, p, train = given["input"], float(given["p"]), given.get("train")
    (out, mask), (e_out, e_mask), (t_out, t_mask) = actual, expected, tolerances
    differs = [layout_differs(out, e_out, t_out), layout_differs(mask, e_mask, t_mask)]
    if any(differs):
        return [d or Comparison(True, "not judged: the other output has the wrong shape or dtype", **base_fields(e, t))
                for d, e, t in zip(differs, expected, tolerances)]  # fmt: skip
    training = train is None or bool(train)
    keep = mask.astype(bool)
    want = dropout_output(x, keep, p) if training else np.array(x, copy=True)
    cmp = compare(out, want, t_out)
    law = "input * mask * 1/(1-p) for the mask returned" if training else "input (train=False)"
    results = [replace(cmp, message=f"against {law}: {cmp.message}")]
    base = base_fields(e_mask, t_mask)
    n = int(e_mask.size)
    dropped = n - int(np.count_nonzero(keep))
    rate = p if training else 0.0
    if n == 0:
        return [*results, Comparison(True, "empty", **base)]
    p_value = float(stats.binomtest(dropped, n, rate).pvalue)
    test = {"test": f"binomial: dropped count of {n} at p = {rate:g} (exact, two-sided)", "statistic": dropped,
            "p_value": p_value, "false_alarm": FALSE_ALARM, "n": n}  # fmt: skip
    what = f"{dropped} of {n} elements dropped ({dropped / n:.4g}) where p = {rate:g}{'' if training else ' (train=False)'}"
    if p_value < FALSE_ALARM:
        results.append(Comparison(False, f"{what}: p = {p_value:.3g} < false-alarm {FALSE_ALARM:g}", total=n,
                                  mismatched=abs(dropped - round(n * rate)), test=test, **base))
    else:
        results.append(Comparison(True, f"{what}: p = {p_value:.3g}", total=n, test=test, **base))
    return results


_LAWS = {
    "undefined": _undefined,
    "prefix": _prefix,
    "uniform": _sample_law("U[0,1)", lambda x: (x >= 0) & (x < 1), "[0, 1)", lambda x: x),
    "normal": _sample_law("N(0,1)", np.isfinite, "the finite numbers", normal_cdf),
    "permutation": _permutation,
    "dropout": _dropout,
}
"""The law of each op spec ``values`` mode but "reference" (conformance.specs.VALUE_MODES)."""
