"""The comparison's statistics hold whatever a backend returns."""

from __future__ import annotations

import math

import numpy as np

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
