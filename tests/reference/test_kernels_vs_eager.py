"""Every reference kernel, in every specified dtype, against PyTorch eager.

The reference defines the expected semantics for every backend, so it must
agree with eager on hypothesis-drawn inputs: broadcasting, 0-d and empty
tensors, non-contiguous inputs, NaN/Inf/-0.0 and extreme magnitudes, within the
dtype's tolerance (exact for integers and bools). Where an op's values are random or
undefined (op spec ``values``), each of the two is held to the op's law instead.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from conformance import oracle, specs
from conformance.case import alternatives, bounds, reference
from conformance.programs import eager_outputs
from conformance.strategies import Call, Tensor, calls

SPECS = specs.load()


INNER_LOOP_DTYPES = ("float32", "int64", "bool")
"""The dtypes of the fast tier (``-m "not slow"``); the others are marked slow."""


def _cases():
    return [
        pytest.param(spec, name, dtype, id=f"{name}-{dtype}", marks=() if dtype in INNER_LOOP_DTYPES else pytest.mark.slow)
        for spec in sorted(SPECS.ops.values(), key=lambda s: s.name)
        for name in spec.names
        for dtype in spec.dtypes
    ]


def _non_contiguous(array: np.ndarray, how: str) -> np.ndarray:
    """The same values in a non-contiguous layout (what a permute or slice would hand a kernel)."""
    if array.ndim < 2 or how == "contiguous":
        return array
    if how == "transposed":
        out = np.empty(array.shape[::-1], array.dtype).T
    else:  # strided: every other element of a wider buffer
        out = np.empty(array.shape[:-1] + (2 * array.shape[-1],), array.dtype)[..., ::2]
    out[...] = array
    return out


def _relayout(call: Call, how: str) -> Call:
    def conv(a):
        if isinstance(a, Tensor):
            return Tensor(_non_contiguous(a.value, how), a.role)
        if isinstance(a, (list, tuple)):
            return type(a)(conv(x) for x in a)
        return a

    return Call(call.op, conv(call.args), {k: conv(v) for k, v in call.kwargs.items()})


@pytest.mark.parametrize("spec,name,dtype", _cases())
def test_kernel_matches_eager(spec, name, dtype):
    # An inner @given: hypothesis' pytest plugin re-wraps a decorated test's settings for
    # every parametrized case, and over a thousand cases that chain overflows the stack.
    @settings(max_examples=min(settings().max_examples, spec.max_examples or settings().max_examples))
    @given(data=st.data())
    def check(data):
        call = data.draw(calls(spec, dtype, name), label="call")
        layout = data.draw(st.sampled_from(["contiguous", "transposed", "strided"]), label="layout")
        note(call.describe())
        # Outputs in schema order, None where the call leaves one undefined, then mutated arguments.
        expected = eager_outputs(call).arrays
        actual = reference(_relayout(call, layout))
        assert len(actual) == len(expected), f"{name}: {len(actual)} outputs, eager gives {len(expected)}"
        if spec.values != "reference":
            # Random or undefined values (op spec values): the reference's outputs and eager's are each
            # held to the op's law, in eager's shapes and dtypes (oracle.compare_outputs).
            tols = [oracle.tolerance_for(spec, oracle.dtype_name(e.dtype)) for e in expected]
            for whose, outputs in (("the reference", actual), ("eager", expected)):
                for i, result in enumerate(oracle.compare_outputs(spec, call, outputs, expected, tols)):
                    assert result.ok, f"{call.describe()} output {i} of {whose}: {result.message}"
            return
        # The backend's rule with eager in the backend's place (conformance.case._expected): eager's
        # outputs held to the reference's, with the op's derived bounds.
        limits, others = bounds(spec, call, actual), alternatives(call, actual)
        for i, (a, e) in enumerate(zip(actual, expected)):
            if a is None:
                continue  # undefined by the call (output_mask); eager may compute it anyway
            assert e is not None, f"{call.describe()} output {i}: eager leaves it undefined"
            a = np.asarray(a)
            tol = oracle.tolerance_for(spec, oracle.dtype_name(a.dtype))
            limit = limits[i] if i < len(limits) and limits[i] is not None and np.shape(limits[i]) == a.shape else None
            result = oracle.compare(e, a, tol, limit, others[i] if i < len(others) else None)
            assert result.ok, f"{call.describe()} output {i}, eager held to the reference: {result.message}"

    # One example-database key per case, as the pytest plugin would give a parametrized test.
    check.hypothesis.inner_test._hypothesis_internal_add_digest = f"{name}|{dtype}".encode()
    check()


_RANDOM = ("uniform", "normal", "permutation", "dropout")
"""The op spec ``values`` modes of random ops (conformance.specs.VALUE_MODES)."""


@pytest.mark.parametrize("name", sorted(s.name for s in SPECS.ops.values() if s.values in _RANDOM))
def test_a_random_kernel_repeats_under_a_fixed_seed_and_only_then(name):
    """The reference's random stream is ATen's in kind (reference_backend/kernels/random.py): the
    same seed gives the same values, another seed or the next call others."""
    from conformance.strategies.directed import draw_directed, plan
    from reference_backend.kernels import KERNELS
    from reference_backend.kernels import random as stream

    spec = SPECS.op(name)
    large = next(d for group in plan(spec, spec.dtypes[0]) for d in group if d.kind == "large")
    call, _ = draw_directed(calls(spec, spec.dtypes[0], name), large, name)
    args, kwargs = call.numpy_args()

    def run(seed=None):
        if seed is not None:
            stream.seed(seed)
        out = KERNELS[name](*args, **kwargs)
        return [np.asarray(o).tobytes() for o in (out if isinstance(out, tuple) else (out,))]

    try:
        first, again = run(1), run(1)
        assert first == again, f"{call.describe()}: seed 1 twice gave different values"
        assert run() != first and run(2) != first, f"{call.describe()}: the values do not depend on the stream"
    finally:
        stream.seed(stream.SEED)
