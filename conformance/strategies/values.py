"""Named input-value domains as hypothesis strategies, for every dtype.

A domain says which values an op is defined on (log needs ``positive``); the
same name means the natural thing for each dtype (for integers ``small`` is
[-8, 8] clipped to the dtype). Floating domains with specials mix NaN, +-Inf and
-0.0 into otherwise arbitrary finite values of every magnitude; every float domain also
mixes in LANDMARKS (ties, small integers, large logits) where they fall inside it.
float8_e4m3fn has no infinities: its domains with specials hold NaN and -0.0 only.
Complex values draw their real and imaginary parts each from the domain in the parts'
dtype (float32 for complex64), independently: "positive" is the open first quadrant.
"""

from __future__ import annotations

import cmath
import functools
import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from conformance.api.scalar_type import component_dtype, is_complex, is_floating, numpy_dtype

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
    # drawn as float16 and rounded (elements()); their own largest finite values bound the domains
    "float8_e4m3fn": (16, float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max)),
    "float8_e5m2": (16, float(ml_dtypes.finfo(ml_dtypes.float8_e5m2).max)),
}
_NARROW = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
"""ml_dtypes' floats: drawn in a wider IEEE type and rounded into them."""


def has_infinities(dtype: str) -> bool:
    """float8_e4m3fn spends its infinity encodings on finite values (the "fn": finite, NaN)."""
    return dtype != "float8_e4m3fn"


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

    specials = st.sampled_from(SPECIALS if has_infinities(dtype) else (math.nan, -0.0, 0.0))
    table = {
        "any_finite": floats(),
        # floats() is two branches (any value, landmarks): specials twice keeps them at one draw in two
        "with_specials": st.one_of(floats(), specials, specials),
        "with_nan": st.one_of(floats(), st.sampled_from((math.nan, -0.0, 0.0))),
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


@functools.cache
def _int_bounds(dtype: str, domain: str) -> tuple[int, int, bool]:
    """(low, high, exclude_zero) for an integer dtype."""
    info = np.iinfo(numpy_dtype(dtype))
    lo, hi = int(info.min), int(info.max)
    table = {
        "any_finite": (lo, hi, False),
        "with_specials": (lo, hi, False),
        "with_nan": (lo, hi, False),
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


PYTHON_INT_MAX = 2**63 - 1
"""The largest Python int argument: an exported program carries it as an int64 (a SymInt or Scalar;
ExecuTorch's EValue Int), so uint64 scalars stay below 2**63 (tensors hold the whole range)."""


@functools.cache
def elements(dtype: str, domain: str, *, subnormal: bool = True) -> st.SearchStrategy:
    """Python scalars of ``domain`` that ``dtype`` represents exactly (``subnormal``: allow denormals;
    integers up to PYTHON_INT_MAX).

    Built once per process (strategies are immutable; hypothesis validates each new one on its
    first draw, which cost more than the draw)."""
    if dtype == "bool":
        return st.booleans() if domain not in ("positive", "ge_one") else st.just(True)
    if is_complex(dtype):
        part = elements(component_dtype(dtype), domain, subnormal=subnormal)
        return st.builds(complex, part, part)
    if is_floating(dtype):
        base = _float_elements(dtype, domain, subnormal)
        if dtype in _NARROW:  # round into the dtype so the value is representable, and still in the domain
            np_dtype, bounds = numpy_dtype(dtype), _float_bounds(dtype, domain)
            base = base.map(lambda v: float(np.float32(v).astype(np_dtype)))
            if dtype != "bfloat16":  # bfloat16 has float32's range: rounding keeps every domain
                base = base.filter(lambda v: bool(bounds.admits(np.asarray([v]))[0]))
        return base
    lo, hi, exclude_zero = _int_bounds(dtype, domain)
    ints = st.integers(lo, min(hi, PYTHON_INT_MAX))
    return ints.filter(lambda v: v != 0) if exclude_zero else ints


# ---------------------------------------------------------------------------------------------
# Domains as bounds, for the NumPy fillers and the edge set


@dataclass(frozen=True)
class _Bounds:
    lo: float
    hi: float
    lo_open: bool = False
    hi_open: bool = False
    nonzero: bool = False
    abs_ge_one: bool = False
    specials: bool = False
    """NaN and the infinities belong to the domain."""
    infinities: bool = True
    """With ``specials``: the infinities too (False: NaN only)."""

    def admits(self, x: np.ndarray) -> np.ndarray:
        """Elementwise: does the domain hold x (NaN/Inf only where specials are allowed)."""
        with np.errstate(invalid="ignore"):
            finite = np.isfinite(x)
            ok = finite & ((x > self.lo) if self.lo_open else (x >= self.lo)) & ((x < self.hi) if self.hi_open else (x <= self.hi))
            if self.nonzero:
                ok &= x != 0
            if self.abs_ge_one:
                ok &= np.abs(x) >= 1
            if self.specials:
                ok |= np.isnan(x) | (np.isinf(x) if self.infinities else False)
        return ok


@functools.cache
def _float_bounds(dtype: str, domain: str) -> _Bounds:
    big = _FLOAT_INFO[dtype][1]
    return {
        "any_finite": _Bounds(-big, big),
        "with_specials": _Bounds(-big, big, specials=True),
        "with_nan": _Bounds(-big, big, specials=True, infinities=False),
        "small": _Bounds(-8.0, 8.0),
        "small_with_specials": _Bounds(-8.0, 8.0, specials=True),
        "moderate": _Bounds(-1000.0, 1000.0),
        "positive": _Bounds(0.0, big, lo_open=True),
        "non_negative": _Bounds(0.0, big),
        "nonzero": _Bounds(-big, big, nonzero=True),
        "unit_interval": _Bounds(0.0, 1.0),
        "open_unit": _Bounds(-1.0, 1.0, lo_open=True, hi_open=True),
        "ge_one": _Bounds(1.0, big),
        "away_from_zero": _Bounds(-big, big, abs_ge_one=True),
    }[domain]


def _finfo(dtype: str):
    return ml_dtypes.finfo(numpy_dtype(dtype)) if dtype in _NARROW else np.finfo(numpy_dtype(dtype))


_COMPLEX_SPECIALS = (
    (math.nan, 0.0), (0.0, math.nan), (math.nan, math.nan), (math.inf, 0.0), (0.0, math.inf),
    (-math.inf, 0.0), (0.0, -math.inf), (math.inf, math.inf), (-math.inf, -math.inf), (math.inf, -math.inf),
    (-math.inf, math.inf), (math.inf, math.nan), (math.nan, -math.inf), (-0.0, 0.0), (0.0, -0.0),
    (-1.0, 0.0), (-1.0, -0.0),
)  # fmt: skip
"""Where complex kernels break: NaN or an infinity in either part (C99 Annex G gives e.g. exp(-inf + i nan)
= 0; a kernel that computes through |z| or a real formula gets NaN), the signs of a zero's parts, and
the negative real axis from either side (the branch cut of log and sqrt)."""
_COMPLEX_EDGES_MAX = 40
"""At most shapes.EDGE_SIDE edge values, so that every one appears in an edge-values tensor."""


def _complex_edges(dtype: str, domain: str) -> tuple:
    """Complex edge values: the specials the domain admits in both parts, then the parts' finite edge
    values paired with each other (each a real part and, half the list on, an imaginary part), up
    to _COMPLEX_EDGES_MAX."""
    part = component_dtype(dtype)
    bounds = _float_bounds(part, domain)
    finite = [v for v in edge_values(part, domain) if math.isfinite(v)]
    n = len(finite)
    out: list[complex] = []
    seen: set[tuple] = set()
    for re, im in (*_COMPLEX_SPECIALS, *((v, finite[(i + n // 2) % n]) for i, v in enumerate(finite))):
        key = tuple(("nan",) if v != v else (v, math.copysign(1.0, v)) for v in (re, im))
        if len(out) < _COMPLEX_EDGES_MAX and key not in seen and bool(bounds.admits(np.asarray([re, im])).all()):
            seen.add(key)
            out.append(complex(re, im))
    return tuple(out)


@functools.cache
def edge_values(dtype: str, domain: str) -> tuple:
    """The values of ``domain`` in ``dtype`` where kernels break, each once, in a fixed order.

    Floats: NaN, +-Inf, +-0.0 (where the domain has specials / zero), the smallest subnormal
    and the smallest normal of either sign, the largest finite values, ties (0.5, 1.5, 2.5,
    -2.5: round half to even, casts that round instead of truncating), small integers,
    and the largest logits of exp. Integers: the dtype's extremes and their neighbours, 0, +-1,
    +-2. Bools: both.
    """
    if dtype == "bool":
        return (False, True) if domain not in ("positive", "ge_one") else (True,)
    if is_complex(dtype):
        return _complex_edges(dtype, domain)
    if not is_floating(dtype):
        lo, hi, exclude_zero = _int_bounds(dtype, domain)
        cands = [lo, hi, 0, 1, -1, 2, -2, lo + 1, hi - 1, 7, -7, 100, -100]
        if dtype in ("uint16", "uint32", "uint64"):
            # the top bit set: a kernel that computes in the signed type of the same width (or in
            # int64, for uint64) turns these negative
            top = (hi + 1) // 2
            cands += [top, top - 1, top + 1]
        out = []
        for v in cands:
            if lo <= v <= hi and not (exclude_zero and v == 0) and v not in out:
                out.append(v)
        return tuple(out)
    info = _finfo(dtype)
    tiny, sub, big = float(info.smallest_normal), float(info.smallest_subnormal), float(info.max)
    cands = [
        math.nan, math.inf, -math.inf, 0.0, -0.0, sub, -sub, tiny, -tiny, big, -big,
        0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0, 3.0, 8.0, -8.0, 100.0, -100.0, 1000.0,
        # just past exp's range in float16/bfloat16 and float32: softmax and logsumexp without
        # the max subtracted, sigmoid and softplus written naively
        12.0, -12.0, 89.0, -89.0, 710.0, -710.0, 3.0e38, -3.0e38,
    ]
    bounds = _float_bounds(dtype, domain)
    np_dtype = numpy_dtype(dtype)
    out: list[float] = []
    seen: set[tuple] = set()
    for v in cands:
        with np.errstate(over="ignore"):
            r = float(np.asarray(v, dtype=np.float64).astype(np_dtype))
        if not bool(bounds.admits(np.asarray([r]))[0]):
            continue
        key = ("nan",) if r != r else (r, math.copysign(1.0, r))
        if key not in seen:
            seen.add(key)
            out.append(r)
    return tuple(out)


def _safe_value(dtype: str, domain: str):
    values = [v for v in edge_values(dtype, domain) if not (isinstance(v, (float, complex)) and not cmath.isfinite(v))]
    for v in (1.5, 0.5, 1, 2, 100, True):
        if v in values:
            return v
    return values[0]


def fill_edges(dtype: str, shape: tuple[int, ...], domain: str, offset: int = 0) -> np.ndarray:
    """An array of ``shape`` holding the domain's edge values cycled in order (from ``offset``)."""
    values = edge_values(dtype, domain)
    n = math.prod(shape)
    picked = [values[(offset + i) % len(values)] for i in range(n)]
    carrier = np.complex128 if is_complex(dtype) else np.float64 if is_floating(dtype) else object
    return _as_dtype(np.asarray(picked, dtype=carrier), dtype).reshape(shape)


def fill_spread(rng: np.random.Generator, dtype: str, shape: tuple[int, ...], domain: str, mix: str = "everything") -> np.ndarray:
    """Values of ``domain`` drawn with NumPy: one random draw per element, mixed by class.

    Classes: typical (uniform in [-10, 10] clipped to the domain), wide (magnitudes
    log-uniform over the dtype's whole exponent range, random sign), landmarks and edge
    values (ties, extremes, subnormals, specials where the domain has them). ``mix`` says
    which classes take part: ``typical``, ``wide``, ``typical+edges``, ``everything``.
    Out-of-domain results are replaced by an ordinary in-domain value.
    """
    n = math.prod(shape)
    if dtype == "bool":
        if domain in ("positive", "ge_one"):
            return np.ones(shape, dtype=bool)
        return rng.integers(0, 2, size=shape).astype(bool)
    if is_complex(dtype):
        part = component_dtype(dtype)  # both parts drawn alike, independently
        re, im = fill_spread(rng, part, shape, domain, mix), fill_spread(rng, part, shape, domain, mix)
        out = np.empty(shape, numpy_dtype(dtype))
        out.real, out.imag = re, im
        return out
    if not is_floating(dtype):
        lo, hi, exclude_zero = _int_bounds(dtype, domain)
        carrier = np.uint64 if hi >= 2**63 else np.int64  # uint64's upper half does not fit in int64
        small = rng.integers(max(lo, -10), min(hi, 10) + 1, size=n, dtype=np.int64).astype(carrier)
        if mix == "typical":
            out = small
        else:
            wide = _uniform_ints(rng, lo, hi, n).astype(carrier, copy=False)
            edges = np.asarray(edge_values(dtype, domain), dtype=carrier)
            which = rng.integers(0, 3, size=n)
            out = np.where(which == 0, small, np.where(which == 1, wide, edges[rng.integers(0, len(edges), size=n)]))
        out = out.astype(numpy_dtype(dtype))
        if exclude_zero:
            out[out == 0] = _safe_value(dtype, domain)
        return out.reshape(shape)
    info = _finfo(dtype)
    bounds = _float_bounds(dtype, domain)
    lo, hi = max(bounds.lo, -10.0), min(bounds.hi, 10.0)
    typical = rng.uniform(lo, hi, size=n)
    classes = [typical]
    if mix != "typical":
        log_lo, log_hi = math.log2(float(info.smallest_subnormal)), math.log2(float(info.max))
        magnitude = np.exp2(rng.uniform(log_lo, log_hi, size=n))
        wide = np.where(rng.integers(0, 2, size=n) == 1, -magnitude, magnitude)
        edges = np.asarray(edge_values(dtype, domain), dtype=np.float64)
        picked = edges[rng.integers(0, len(edges), size=n)]
        classes = {"wide": [typical, wide], "typical+edges": [typical, picked], "everything": [typical, wide, picked]}[mix]
    which = rng.integers(0, len(classes), size=n)
    values = np.choose(which, classes) if len(classes) > 1 else classes[0]
    out = _as_dtype(values, dtype)
    bad = ~bounds.admits(out.astype(np.float64))
    if bad.any():
        out[bad] = _safe_value(dtype, domain)
    return out.reshape(shape)


def fill_wide(rng: np.random.Generator, dtype: str, shape: tuple[int, ...], spread: float) -> np.ndarray:
    """Finite values uniform over [-spread, spread] (integers: clipped to the dtype), whatever the op's
    domain: the ``spread`` edge case of an op whose spec asks for it (``params.spread``)."""
    n = math.prod(shape)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if is_complex(dtype):
        part = component_dtype(dtype)
        out = np.empty(shape, numpy_dtype(dtype))
        out.real, out.imag = fill_wide(rng, part, shape, spread), fill_wide(rng, part, shape, spread)
        return out
    if not is_floating(dtype):
        info = np.iinfo(numpy_dtype(dtype))
        lo, hi = max(int(info.min), -int(spread)), min(int(info.max), int(spread))
        return rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64).astype(numpy_dtype(dtype)).reshape(shape)
    return _as_dtype(rng.uniform(-spread, spread, size=n), dtype).reshape(shape)


def _uniform_ints(rng: np.random.Generator, lo: int, hi: int, n: int) -> np.ndarray:
    if hi - lo < 2**63:
        return rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64)
    if lo >= 0:
        return rng.integers(lo, hi, size=n, endpoint=True, dtype=np.uint64)
    return rng.integers(0, 2**64 - 1, size=n, endpoint=True, dtype=np.uint64).view(np.int64)  # all of int64


def _as_dtype(values: np.ndarray, dtype: str) -> np.ndarray:
    np_dtype = numpy_dtype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == "bfloat16":
            return np.asarray(values, dtype=np.float64).astype(np.float32).astype(np_dtype)
        if is_complex(dtype):
            return np.asarray(values, dtype=np.complex128).astype(np_dtype)
        return np.asarray(values).astype(np_dtype)


MIXES = ("typical", "typical+edges", "wide", "everything")


def arrays(
    dtype: str, shape: tuple[int, ...], domain: str
) -> st.SearchStrategy[np.ndarray]:
    """Arrays of ``dtype`` and ``shape`` with elements from ``domain``.

    Values are filled by NumPy from a drawn seed and a drawn mix of value classes
    (``fill_spread``): drawing element by element through hypothesis was most of a
    certification's time. Shrinking still simplifies the mix (towards ``typical``) and
    the shapes; the failing example itself is saved whole for replay. Under a directive
    (``directed``) the array holds the edge set, the whole-domain spread, ordinary values or a
    wide finite spread (``fill_wide``) instead.
    """
    from . import directed

    state = directed.active()
    if state is not None and state.directive.values:
        kind = state.directive.values
        state.consumed.add("values")
        shape = tuple(shape)
        if kind == "edges":
            return st.just(fill_edges(dtype, shape, domain))
        rng = np.random.default_rng(directed._seed(state.directive.label, dtype, shape, domain))
        if kind == "wide":
            return st.just(fill_wide(rng, dtype, shape, state.directive.spread))
        mix = "typical" if kind == "typical" else "everything"
        return st.just(fill_spread(rng, dtype, shape, domain, mix))

    return _filled(dtype, tuple(shape), domain)


@functools.lru_cache(maxsize=4096)
def _filled(dtype: str, shape: tuple[int, ...], domain: str) -> st.SearchStrategy[np.ndarray]:
    """``arrays``' strategy outside a directive, one per (dtype, shape, domain) while it is in use: a
    new strategy costs hypothesis more (validation, its recursive properties) than drawing from it."""

    def build(drawn) -> np.ndarray:
        seed_, mix = drawn
        return fill_spread(np.random.default_rng(seed_), dtype, shape, domain, mix)

    return _seed_and_mix().map(build)


@functools.cache
def _seed_and_mix() -> st.SearchStrategy[tuple[int, str]]:
    """What ``arrays`` draws: a seed for NumPy and a mix of value classes (one strategy per process)."""
    return st.tuples(st.integers(0, 2**32 - 1), st.sampled_from(MIXES))


def scalars(dtype: str, domain: str) -> st.SearchStrategy:
    """A Python scalar (bool, int or float) of ``dtype``'s category from ``domain``.

    A complex dtype takes a real float scalar of its parts' dtype: a complex Python scalar has no
    spelling in an exported program's arguments that every backend reads, and a real one meets the
    complex tensor through type promotion all the same.

    Under an edge-values directive, round 0 takes an ordinary value and later rounds a special
    (NaN, an infinity, -0.0 or the smallest subnormal, whichever the domain admits first).
    """
    from . import directed

    floating = is_floating(dtype) or is_complex(dtype)
    category = ("float64" if component_dtype(dtype) == "float64" else "float32") if floating else dtype
    state = directed.active()
    if state is not None and state.directive.values == "edges":
        state.consumed.add("scalar")
        if state.directive.round == 0:
            value = _safe_value(category, domain)
        else:
            edges = [v for v in edge_values(category, domain) if floating or v <= PYTHON_INT_MAX]
            value = edges[(state.directive.round - 1) % len(edges)]
        if dtype == "bool":
            return st.just(bool(value))
        return st.just(float(value) if floating else int(value))
    if dtype == "bool":
        return elements("bool", domain)
    if floating:
        return elements(category, domain)
    return elements(dtype, domain).map(int)
