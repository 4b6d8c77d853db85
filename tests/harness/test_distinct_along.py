"""distinct_along: NumPy-filled slices with pairwise distinct values, specials still reachable."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.api.scalar_type import is_floating
from conformance.strategies.sorting import _keys, distinct_capacity, fill_distinct
from conformance.strategies.values import MIXES, _float_bounds, _int_bounds

DTYPES = ["bool", "uint8", "int8", "int16", "int64", "float16", "bfloat16", "float32", "float64"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("domain", ["with_specials", "small", "unit_interval", "nonzero"])
def test_slices_are_distinct_and_in_domain(dtype, domain):
    specials = set()
    for seed in range(60):
        rng = np.random.default_rng(seed)
        shape = [int(s) for s in rng.integers(1, 6, size=rng.integers(1, 4))]
        axis = int(rng.integers(0, len(shape)))
        shape[axis] = min(shape[axis] * 3, distinct_capacity(dtype, domain))
        x = fill_distinct(np.random.default_rng(seed), dtype, tuple(shape), axis, domain, MIXES[seed % 4])
        assert x.shape == tuple(shape) and str(x.dtype) == dtype
        if dtype == "bool":
            continue
        rows = np.moveaxis(x.astype(np.float64 if is_floating(dtype) else np.int64), axis, -1).reshape(-1, shape[axis])
        for row in rows:
            assert len(set(_keys(row).tolist())) == len(row), row
        if is_floating(dtype):
            assert _float_bounds(dtype, domain).admits(rows).all()
            specials |= {"nan"} if np.isnan(rows).any() else set()
            specials |= {"inf"} if np.isinf(rows).any() else set()
            specials |= {"-0.0"} if ((rows == 0) & np.signbit(rows)).any() else set()
        else:
            lo, hi, _ = _int_bounds(dtype, domain)
            assert ((rows >= lo) & (rows <= hi)).all()
            specials |= {v for v in (lo, hi) if (rows == v).any()}
    if domain == "with_specials" and dtype != "bool":
        assert specials == ({"nan", "inf", "-0.0"} if is_floating(dtype) else set(_int_bounds(dtype, domain)[:2]))


def test_large_slice_is_distinct():
    x = fill_distinct(np.random.default_rng(0), "float32", (65_537,), 0, "with_specials", "everything")
    assert len(set(_keys(x.astype(np.float64)).tolist())) == 65_537
