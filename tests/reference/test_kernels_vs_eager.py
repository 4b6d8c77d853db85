"""Every reference kernel, in every specified dtype, against PyTorch eager.

The reference defines the expected semantics for every backend, so it must
agree with eager on hypothesis-drawn inputs: broadcasting, 0-d and empty
tensors, non-contiguous inputs, NaN/Inf/-0.0 and extreme magnitudes, within the
dtype's tolerance (exact for integers and bools).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from conformance import oracle, specs
from conformance.api.tensors import to_numpy
from conformance.programs import _resolve_op
from conformance.strategies import Call, Tensor, calls
from reference_backend.kernels import KERNELS

SPECS = specs.load()


def _cases():
    return [
        pytest.param(spec, name, dtype, id=f"{name}-{dtype}")
        for spec in sorted(SPECS.ops.values(), key=lambda s: s.name)
        for name in spec.names
        for dtype in spec.dtypes
    ]


def _outputs(result) -> tuple:
    if isinstance(result, (tuple, list)):
        return tuple(result)
    return (result,)


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
    overload_fn = _resolve_op(name)

    @settings(max_examples=min(settings().max_examples, spec.max_examples or settings().max_examples))
    @given(data=st.data())
    def check(data):
        call = data.draw(calls(spec, dtype, name), label="call")
        layout = data.draw(st.sampled_from(["contiguous", "transposed", "strided"]), label="layout")
        note(call.describe())
        args, kwargs = call.torch_args()
        expected = _outputs(overload_fn(*args, **kwargs))
        np_args, np_kwargs = _relayout(call, layout).numpy_args()
        actual = _outputs(KERNELS[name](*np_args, **np_kwargs))
        assert len(actual) == len(expected), f"{name}: {len(actual)} outputs, eager gives {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            e = to_numpy(e)
            tol = oracle.tolerance_for(spec, oracle.dtype_name(e.dtype))
            result = oracle.compare(np.asarray(a), e, tol)
            assert result.ok, f"{call.describe()} output {i}: {result.message}"

    # One example-database key per case, as the pytest plugin would give a parametrized test.
    check.hypothesis.inner_test._hypothesis_internal_add_digest = f"{name}|{dtype}".encode()
    check()
