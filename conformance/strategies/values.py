"""Named input-value domains as hypothesis strategies, for every dtype.

A domain says which values an op is defined on (log needs ``positive``); the
same name means the natural thing for each dtype (for integers ``small`` is
[-8, 8] clipped to the dtype). Floating domains with specials mix NaN, +-Inf and
-0.0 into otherwise arbitrary finite values of every magnitude; every float domain also
mixes in LANDMARKS (ties, small integers, large logits) where they fall inside it.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from conformance.api.scalar_type import is_floating, numpy_dtype

SPECIALS = (math.nan, math.inf, -math.inf, -0.0, 0.0)
LANDMARKS = (0.5, -0.5, 1.5, -2.5, 2.5, 1.0, -1.0, 3.0, 100.0, -100.0, 4096.0)
"""Values where common kernel bugs show and random floats rarely land: ties (round half to even,
casts that round instead of truncating), small integers, and logits past exp's float32 range
(softmax without max subtraction). Mixed into every float domain they fit, so a few examples find them."""
_FLOAT_INFO = {
    "float16": (16, float(np.finfo(np.float16).max)),
    "bfloat16": (32, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)),
    "float32": (32, float(np.finfo(np.float32).max)),
    "float64": (64, float(np.finfo(np.float64).max)),
}


def _float_elements(dtype: str, domain: str, subnormal: bool) -> st.SearchStrategy[float]:
    width, big = _FLOAT_INFO[dtype]

    def floats(lo=-big, hi=big, exclude_min=False, exclude_max=False):
        drawn = st.floats(
            lo, hi, width=width, allow_nan=False, allow_infinity=False,
            allow_subnormal=None if subnormal else False, exclude_min=exclude_min, exclude_max=exclude_max,
        )
        marks = [
            v for v in LANDMARKS
            if (lo < v if exclude_min else lo <= v) and (v < hi if exclude_max else v <= hi)
        ]
        return drawn | st.sampled_from(marks) if marks else drawn

    specials = st.sampled_from(SPECIALS)
    table = {
        "any_finite": floats(),
        # floats() is two branches (any value, landmarks): specials twice keeps them at one draw in two
        "with_specials": st.one_of(floats(), specials, specials),
        "small": floats(-8.0, 8.0),
        "small_with_specials": st.one_of(floats(-8.0, 8.0), specials, specials),
        "moderate": floats(-1000.0, 1000.0),
        "positive": floats(0.0, big, exclude_min=True),
        "non_negative": floats(0.0, big),
        "nonzero": floats().filter(lambda v: v != 0),
        "unit_interval": floats(0.0, 1.0),
        "open_unit": floats(-1.0, 1.0, exclude_min=True, exclude_max=True),
        "ge_one": floats(1.0, big),
        "away_from_zero": floats(1.0, big) | floats(-big, -1.0),
    }
    return table[domain]


def _int_bounds(dtype: str, domain: str) -> tuple[int, int, bool]:
    """(low, high, exclude_zero) for an integer dtype."""
    info = np.iinfo(numpy_dtype(dtype))
    lo, hi = int(info.min), int(info.max)
    table = {
        "any_finite": (lo, hi, False),
        "with_specials": (lo, hi, False),
        "small": (-8, 8, False),
        "small_with_specials": (-8, 8, False),
        "moderate": (-1000, 1000, False),
        "positive": (1, hi, False),
        "non_negative": (0, hi, False),
        "nonzero": (lo, hi, True),
        "unit_interval": (0, 1, False),
        "open_unit": (0, 0, False),
        "ge_one": (1, hi, False),
        "away_from_zero": (lo, hi, True),
    }
    low, high, exclude_zero = table[domain]
    return max(low, lo), min(high, hi), exclude_zero


def elements(dtype: str, domain: str, *, subnormal: bool = True) -> st.SearchStrategy:
    """Python scalars of ``domain`` that ``dtype`` represents exactly (``subnormal``: allow denormals)."""
    if dtype == "bool":
        return st.booleans() if domain not in ("positive", "ge_one") else st.just(True)
    if is_floating(dtype):
        base = _float_elements(dtype, domain, subnormal)
        if dtype == "bfloat16":  # round through bfloat16 so the value is representable
            base = base.map(lambda v: float(np.float32(v).astype(ml_dtypes.bfloat16)))
        return base
    lo, hi, exclude_zero = _int_bounds(dtype, domain)
    ints = st.integers(lo, hi)
    return ints.filter(lambda v: v != 0) if exclude_zero else ints


def arrays(
    dtype: str, shape: tuple[int, ...], domain: str, *, subnormal: bool = True
) -> st.SearchStrategy[np.ndarray]:
    """Arrays of ``dtype`` and ``shape`` with elements from ``domain``."""
    np_dtype = numpy_dtype(dtype)
    values = elements(dtype, domain, subnormal=subnormal)
    if dtype == "bfloat16":
        # hypothesis cannot fill ml_dtypes arrays; draw float32 values already rounded to bfloat16.
        return hnp.arrays(np.float32, shape, elements=values, fill=st.nothing()).map(lambda a: a.astype(ml_dtypes.bfloat16))
    # fill=nothing: every element drawn on its own. hypothesis' default fills an array with one
    # drawn value and sets a few positions, which makes NaN next to a number rare.
    return hnp.arrays(np_dtype, shape, elements=values, fill=st.nothing())


def scalars(dtype: str, domain: str, *, subnormal: bool = True) -> st.SearchStrategy:
    """A Python scalar (bool, int or float) of ``dtype``'s category from ``domain``."""
    if dtype == "bool":
        return elements("bool", domain)
    if is_floating(dtype):
        return elements("float64" if dtype == "float64" else "float32", domain, subnormal=subnormal)
    return elements(dtype, domain).map(int)
