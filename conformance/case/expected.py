"""Expected outputs: the reference kernel called directly on a call, cross-checked with PyTorch
eager (``oracle.expect``), with what judges a backend's outputs beside them (accumulation bounds,
the other result eager's paths accept)."""

from __future__ import annotations

import numpy as np

from conformance import oracle
from conformance.case.accumulation import bounds
from conformance.programs import EagerOutputs, eager_outputs
from conformance.results import Category, CheckFailure


def expected_outputs(spec, call) -> tuple[np.ndarray, ...]:
    """Eager's outputs, checked against the reference kernel's; the reference's are returned.

    Raises CheckFailure: HARNESS_ERROR when eager refuses the call, ORACLE_DISAGREEMENT when the
    reference fails or disagrees with eager."""
    return expectations(spec, call)[0]


def expectations(spec, call) -> tuple[tuple[np.ndarray, ...], EagerOutputs | None, tuple, tuple]:
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
        oracle.expect(expected, expected_eager, what=call.describe(), spec=spec, call=call)
        return tuple(expected), returned, (), ()
    limits, others = bounds(spec, call, expected), alternatives(call, expected)
    oracle.expect(expected, expected_eager, what=call.describe(), spec=spec, call=call, bounds=limits, alternatives=others)
    limits = tuple(b for r, b in zip(expected, limits) if r is not None) if limits else ()
    others = tuple(b for r, b in zip(expected, others) if r is not None) if others else ()
    if any(r is None for r in expected):
        # The program's outputs are the defined ones (programs.program_results), which only the
        # meta kernel knows: eager may compute an output the call leaves undefined.
        return tuple(r for r in expected if r is not None), None, limits, others
    return tuple(expected), returned, limits, others


def reference(call) -> list[np.ndarray | None]:
    """The reference kernel's outputs for ``call``, called directly, in the order of
    ``programs.EagerOutputs.arrays``: None where the call leaves an output undefined, then the
    arguments the op mutates (``programs.mutated_arguments``), which the kernel writes in place
    as ATen does (into copies here: the call's own arrays stay as drawn).

    The same values the reference backend computes for the call's program (its runtime
    calls this kernel on these arguments; tests/harness/test_programs.py shows the
    program path bit-identical), without lowering and running a second program per example.
    """
    from conformance.programs.operators import mutated_arguments, resolve_op, scalar_returns
    from reference_backend.kernels import KERNELS

    args, kwargs = call.numpy_args()
    mutated = []
    for i, name in mutated_arguments(resolve_op(call.op)):
        if i < len(args) and args[i] is not None:
            args = (*args[:i], np.array(args[i], copy=True), *args[i + 1 :])
            mutated.append(args[i])
        elif kwargs.get(name) is not None:
            kwargs[name] = np.array(kwargs[name], copy=True)
            mutated.append(kwargs[name])
    out = KERNELS[call.op](*args, **kwargs)
    out = [*(out if isinstance(out, (tuple, list)) else (out,)), *mutated]
    scalar = scalar_returns(resolve_op(call.op))
    # 0-d stays 0-d; a Scalar return (_local_scalar_dense) is a NumPy scalar, not a 0-d tensor
    return [None if o is None else np.asarray(o)[()] if i < len(scalar) and scalar[i] else np.array(o, order="C", copy=True)
            for i, o in enumerate(out)]


def judging(spec, call, expected) -> tuple[tuple, tuple]:
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
