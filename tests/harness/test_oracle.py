"""The comparison's statistics hold whatever a backend returns."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conformance import oracle
from conformance.oracle import comparison as comparing


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


@pytest.mark.slow
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
    monkeypatch.setattr(comparing, "_same_bits", lambda a, e: False)
    full = oracle.compare(actual, expected, tol)
    assert fast.ok and full.ok
    assert fast.stats() == full.stats() and fast.message == full.message
    flipped = expected.copy().reshape(-1)
    flipped[:1] = -flipped[:1]  # the sign of a NaN, or of a zero: other bits, so the full comparison decides
    monkeypatch.undo()
    assert not comparing._same_bits(flipped.reshape(shape), expected)


def test_an_output_a_call_leaves_undefined_is_held_to_its_dtype_only():
    """_embedding_bag defines bag_size only in mean and max mode (op spec defined_outputs): in sum mode
    any values and any size pass (CUDA batch norm sizes its eval-mode statistics [C], CPU [0]), a wrong dtype
    does not; in max mode max_indices is compared value by value, and a
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
        assert judged(mode, [output, np.zeros(0, np.int64), np.zeros(3, np.int64), bags], [output, np.zeros(0, np.int64), bags, bags])[2].ok
        assert not judged(mode, [output, np.zeros(0, np.int64), bags.astype(np.int32), bags], [output, np.zeros(0, np.int64), bags, bags])[2].ok
    chosen = np.array([[2, 2], [1, 1]], np.int64)
    maxed = judged(2, [output, np.arange(3), bags, np.zeros_like(chosen)], [output, np.arange(3), bags, chosen])
    assert [c.ok for c in maxed] == [True, True, True, False]


# -- verdicts at the margins -------------------------------------------------------------------

from conformance import case, specs  # noqa: E402
from conformance.call import Call, Tensor  # noqa: E402

SPECS = specs.load()


def _judged(op: str, call: Call):
    """The reference's outputs of ``call``, their tolerance, bounds and alternatives: what a NUM case holds a backend to."""
    spec = SPECS.op(op)
    prepared = case.prepare(spec, call)
    assert isinstance(prepared, case.Prepared), prepared.message
    out = prepared.expected[0]
    return spec, out, oracle.tolerance_for(spec, oracle.dtype_name(out.dtype)), prepared


def test_a_tiny_result_is_held_to_a_relative_tolerance():
    """rsqrt(3.4e38) is 5.4e-20: 8.1e-20 is 1.5x off and an absolute tolerance of 1e-5 passed it."""
    tol = oracle.tolerance_for(SPECS.op("aten.rsqrt.default"), "float32")
    assert not oracle.compare(np.float32([8.13e-20]), np.float32([5.42e-20]), tol).ok
    assert oracle.compare(np.float32([5.4200003e-20]), np.float32([5.42e-20]), tol).ok  # 1 ULP


def test_below_the_smallest_normal_an_absolute_tolerance_holds_in_both_directions():
    """eager's sigmoid(-100) is 0.0, the exact value 3.8e-44: either passes as the other's expected value."""
    tol = oracle.tolerance_for(SPECS.op("aten.sigmoid.default"), "float32")
    tiny, zero = np.float32([3.78e-44]), np.float32([0.0])
    assert oracle.compare(zero, tiny, tol).ok and oracle.compare(tiny, zero, tol).ok
    assert not oracle.compare(np.float32([2e-38]), np.float32([4e-38]), tol).ok  # normal numbers: relative


@pytest.mark.slow
def test_a_half_type_kernel_that_truncates_fails_the_bias_test_and_one_that_rounds_passes():
    import ml_dtypes

    bf16 = np.dtype(ml_dtypes.bfloat16)
    x = np.linspace(-10, 10, 4096).astype(bf16)
    exact = np.exp(x.astype(np.float64)).astype(bf16)
    truncated = (np.exp(x.astype(np.float32)).view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32).astype(bf16)
    rounded = np.exp(x.astype(np.float32)).astype(bf16)
    tol = oracle.tolerance_for(SPECS.op("aten.exp.default"), "bfloat16")
    assert oracle.ulp_distance(comparing._as_binary(truncated), comparing._as_binary(exact)).max() <= 1  # within 1 ULP everywhere
    failed = oracle.compare(truncated, exact, tol)
    assert not failed.ok and "systematic bias" in failed.message and failed.test["p_value"] < oracle.FALSE_ALARM
    passed = oracle.compare(rounded, exact, tol)
    assert passed.ok and passed.test["p_value"] >= oracle.FALSE_ALARM


def _sum_call(values: np.ndarray) -> Call:
    return Call("aten.sum.dim_IntList", (Tensor(values), [1]), {})


def test_a_derived_bound_passes_every_summation_order_and_fails_a_scaled_sum():
    rng = np.random.default_rng(7)
    x = rng.uniform(-8, 8, (64, 320)).astype(np.float32)
    spec, expected, tol, prepared = _judged("aten.sum.dim_IntList", _sum_call(x))
    bound = prepared.bounds[0]

    def ordered(parts):
        total = np.zeros(x.shape[0], np.float32)
        for part in parts:
            total = (total + part).astype(np.float32)
        return total

    def pairwise(level):
        while level.shape[-1] > 1:
            level = (level[:, 0::2] + level[:, 1::2]).astype(np.float32)
        return level[:, 0]

    orders = {
        "left to right": ordered(x.T),
        "right to left": ordered(x.T[::-1]),
        "pairwise": pairwise(x[:, :256]) + pairwise(x[:, 256:]),
        "float64": x.astype(np.float64).sum(1).astype(np.float32),
        "blocks of 16 lanes": ordered(x.reshape(64, -1, 16).sum(-1, dtype=np.float32).T),
    }
    for name, got in orders.items():
        assert oracle.compare(got, expected, tol, bound).ok, name
    # scaled by 1 + 1e-5 (84 ULP): caught wherever the bound is below 1e-5 |sum|, i.e. n u sum|x| < 1e-5 |sum|
    # (terms that do not cancel, n < ~160); the worst-case bound of 320 cancelling terms holds it
    positive = _judged("aten.sum.dim_IntList", _sum_call(rng.uniform(0, 8, (64, 20)).astype(np.float32)))
    scaled = (positive[1].astype(np.float64) * (1 + 1e-5)).astype(np.float32)
    assert not oracle.compare(scaled, positive[1], positive[2], positive[3].bounds[0]).ok
    # a sum of tiny terms returned as 0 or negated fails: the bound scales with the terms
    small = _judged("aten.sum.dim_IntList", _sum_call(np.full((2, 8), 1e-30, np.float32)))
    assert not oracle.compare(np.zeros(2, np.float32), small[1], small[2], small[3].bounds[0]).ok
    assert not oracle.compare(-small[1], small[1], small[2], small[3].bounds[0]).ok


def test_a_matmul_bound_counts_the_inner_size_and_the_scalars():
    a, b = np.ones((2, 5), np.float32), np.full((5, 3), -2.0, np.float32)
    call = Call("aten.addmm.default", (Tensor(np.ones((2, 3), np.float32)), Tensor(a), Tensor(b)), {"beta": 0.5, "alpha": -3})
    spec, expected, tol, prepared = _judged("aten.addmm.default", call)
    u = 2.0**-24
    n = 5 + 1 + 2  # K products, the beta term, two scalings
    terms = 0.5 * 1 + 3 * 5 * 2  # |beta| |self| + |alpha| sum |a| |b|
    np.testing.assert_allclose(prepared.bounds[0], n * u / (1 - n * u) * terms, rtol=1e-12)
    assert not oracle.compare(expected + np.float32(1.5e-4) * 64, expected, tol, prepared.bounds[0]).ok


def test_the_cross_check_holds_eager_to_the_reference_as_a_backend():
    """The same pair passes or fails in both directions: eager's output is judged as a backend's would be."""
    x = np.array([-100.0, -89.0, 0.5], np.float32)
    prepared = case.prepare(SPECS.op("aten.sigmoid.default"), Call("aten.sigmoid.default", (Tensor(x),), {}))
    assert isinstance(prepared, case.Prepared)
    import torch

    eager = torch.sigmoid(torch.from_numpy(x)).numpy()
    assert eager[0] == 0.0 and prepared.expected[0][0] > 0  # eager flushes, the reference does not
    tol = oracle.tolerance_for(SPECS.op("aten.sigmoid.default"), "float32")
    assert oracle.compare(eager, prepared.expected[0], tol).ok


def test_an_element_equal_to_the_alternative_path_passes():
    expected = np.float32([1.0, 2.0, 3.0])
    also = np.float32([1.0, 1.0, 3.0])
    tol = oracle.tolerance_for(None, "float32")
    assert oracle.compare(np.float32([1.0, 1.0, 3.0]), expected, tol, also=also).ok
    assert not oracle.compare(np.float32([1.0, 0.0, 3.0]), expected, tol, also=also).ok
