"""The comparison's statistics hold whatever a backend returns."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conformance import oracle


def test_garbage_outputs_are_a_mismatch_not_a_harness_error():
    """torch.lazy's pixel_shuffle returns uninitialized memory: float64 values near the largest
    double square past it, the noise sum is inf, and log10(signal / inf) raised "math domain error",
    recorded HARNESS_ERROR instead of the MISMATCH it is."""
    expected = np.linspace(-4, 4, 64).reshape(8, 8)
    actual = expected.copy()
    actual[0, :3] = (1.7e308, -1.2e308, 6.9e-310)
    result = oracle.compare(actual, expected, oracle.DEFAULT_TOLERANCES["float64"])
    assert not result.ok and result.mismatched == 3
    assert result.snr_db == -math.inf
    both = oracle.compare(np.full(4, 1e308), np.full(4, 1.5e308), oracle.DEFAULT_TOLERANCES["float64"])
    assert not both.ok  # signal and noise both overflow: no SNR to give, still a verdict
    assert oracle.compare(expected, expected, oracle.DEFAULT_TOLERANCES["float64"]).snr_db == math.inf


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("shape", [(), (5,), (2, 3)])
def test_identical_bits_take_the_fast_path_with_the_full_statistics(monkeypatch, dtype, shape):
    """Bit-identical outputs skip the float64 arithmetic; the Comparison is the one the full path gives."""
    from conformance.api.scalar_type import numpy_dtype

    values = np.array([np.nan, -0.0, np.inf, -np.inf, 1e-45, 3.5], dtype=np.float64)
    expected = np.resize(values, shape).astype(np.float32).astype(numpy_dtype(dtype))
    actual = expected.copy()
    tol = oracle.tolerance_for(None, dtype)
    fast = oracle.compare(actual, expected, tol)
    monkeypatch.setattr(oracle, "_same_bits", lambda a, e: False)
    full = oracle.compare(actual, expected, tol)
    assert fast.ok and full.ok
    assert fast.stats() == full.stats() and fast.message == full.message
    flipped = expected.copy().reshape(-1)
    flipped[:1] = -flipped[:1]  # the sign of a NaN, or of a zero: other bits, so the full comparison decides
    monkeypatch.undo()
    assert not oracle._same_bits(flipped.reshape(shape), expected)


def test_an_output_a_call_leaves_undefined_is_held_to_its_shape_and_dtype_only():
    """_embedding_bag defines bag_size only in mean and max mode (op spec defined_outputs): in sum mode
    any values pass, a wrong shape does not; in max mode max_indices is compared value by value, and a
    mode the call leaves out takes its schema default (0, sum)."""
    from conformance import specs
    from conformance.call import Call, Tensor

    spec = specs.load().op("aten._embedding_bag.default")
    weight = Tensor(np.arange(6, dtype=np.float32).reshape(3, 2), role="parameter")
    indices, offsets = Tensor(np.array([0, 2, 1], np.int64)), Tensor(np.array([0, 2], np.int64))

    def judged(mode, actual, expected):
        call = Call(spec.name, (weight, indices, offsets, False, mode) if mode is not None else (weight, indices, offsets))
        tols = [oracle.tolerance_for(spec, oracle.dtype_name(e.dtype)) for e in expected]
        return oracle.compare_outputs(spec, call, actual, expected, tols)

    output, bags = np.zeros((2, 2), np.float32), np.array([2, 1], np.int64)
    for mode in (0, None):
        sizes = judged(mode, [output, np.zeros(0, np.int64), bags + 7, bags], [output, np.zeros(0, np.int64), 0 * bags, 0 * bags])
        assert all(c.ok for c in sizes) and "defined_outputs" in sizes[2].message
        assert not judged(mode, [output, np.zeros(0, np.int64), np.zeros(3, np.int64), bags], [output, np.zeros(0, np.int64), bags, bags])[2].ok
    chosen = np.array([[2, 2], [1, 1]], np.int64)
    maxed = judged(2, [output, np.arange(3), bags, np.zeros_like(chosen)], [output, np.arange(3), bags, chosen])
    assert [c.ok for c in maxed] == [True, True, True, False]
