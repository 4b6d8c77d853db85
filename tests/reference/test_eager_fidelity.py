"""Directed cases where the reference once departed from eager (issue 27, item 7: PyTorch's OpInfo
samples run through the reference), each checked against eager bit for bit, and the draws that now
reach them. The hypothesis checks (test_kernels_vs_eager.py) compare within the op's tolerance;
these pin the exact values."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance import oracle, specs
from conformance.case import reference
from conformance.programs import eager_outputs
from conformance.strategies import Call, Tensor, calls

SPECS = specs.load()
INTEGERS = (np.uint8, np.int8, np.int16, np.int32, np.int64)


def _call(op, *args, **kwargs) -> Call:
    return Call(op, tuple(Tensor(a) if isinstance(a, np.ndarray) else a for a in args), kwargs)


def _bits(x: np.ndarray) -> np.ndarray:
    """The values as comparable bytes per element: NaN payloads aside, equal bits mean equal values."""
    x = np.asarray(x)
    if x.dtype.kind == "f" or x.dtype in (ml_dtypes.bfloat16,):
        x = x.astype(np.float64)
        return np.where(np.isnan(x), np.nan, x).view(np.int64)
    return x


def _same_as_eager(call: Call) -> None:
    expected = eager_outputs(call).arrays
    actual = reference(call)
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        a = np.asarray(a)
        assert a.dtype == e.dtype and a.shape == e.shape, f"{call.describe()} output {i}: {a.dtype}{a.shape}, eager {e.dtype}{e.shape}"
        assert np.array_equal(_bits(a), _bits(e)), f"{call.describe()} output {i}: {a.ravel()[:8]} eager {e.ravel()[:8]}"


def _draws(name: str, dtype: str, n: int = 200):
    """``n`` calls the op's signature draws (hypothesis, no database)."""
    spec, out = SPECS.op(name), []

    @settings(max_examples=n, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def collect(data):
        out.append(data.draw(calls(spec, dtype, name)))

    collect()
    return out


# -- pow: integers to negative integer powers (ATen's powi) ----------------------------------------


@pytest.mark.parametrize("dtype", INTEGERS, ids=lambda d: np.dtype(d).name)
def test_integer_pow_to_negative_exponents_is_powi(dtype):
    info = np.iinfo(dtype)
    base = np.array([2, 1, -1, 0, 3, -2, 0, info.min, info.max, -1, 7], dtype=np.int64).astype(dtype)
    exponent = np.array([-1, -2, -3, -1, 5, -1, 0, 3, 2, -(2**62), 9], dtype=np.int64).astype(dtype)
    _same_as_eager(_call("aten.pow.Tensor_Tensor", base, exponent))
    for scalar in (2, -1, 1, 0, -3):
        _same_as_eager(_call("aten.pow.Scalar", scalar, exponent))


def test_pow_tensor_scalar_refuses_negative_integer_exponents_as_eager_does():
    call = _call("aten.pow.Tensor_Scalar", np.array([2, 0], np.int32), -2)
    with pytest.raises(RuntimeError, match="negative integer powers"):
        eager_outputs(call)
    with pytest.raises(ValueError, match="negative integer powers"):
        reference(call)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["aten.pow.Tensor_Tensor", "aten.pow.Scalar"])
def test_integer_pow_draws_negative_exponents(name):
    exponents = [c.args[1].value for c in _draws(name, "int32", 100)]
    assert any((e < 0).any() for e in exponents)


# -- _cdist_forward: eager's matrix-product path (p = 2, compute_mode None/0 past 25 rows, or 1) ----


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("mode", [None, 0, 1])
def test_cdist_matrix_product_path_on_integers(dtype, mode):
    rng = np.random.default_rng(0)
    x1 = rng.integers(-8, 9, size=(2, 30, 7)).astype(dtype)
    x2 = rng.integers(-8, 9, size=(27, 7)).astype(dtype)
    x2[:3] = x1[0, :3]  # zero distances
    x1[0, 5, 2], x1[1, 6, 0], x2[4, 1] = np.inf, np.nan, -np.inf  # inf - inf in the expansion
    call = _call("aten._cdist_forward.default", x1, x2, 2.0, mode)
    # eager's float32 sqrt is itself 1 ULP off correct rounding
    oracle.expect(reference(call)[:1], eager_outputs(call).arrays[:1], what=call.describe(), spec=SPECS.op(call.op), call=call)


@pytest.mark.slow
def test_cdist_draws_the_matrix_product_path():
    from conformance.strategies.linalg import _mm_path

    taken = [c for c in _draws("aten._cdist_forward.default", "float32", 300)
             if _mm_path(c.args[2], c.args[3], c.args[0].value.shape[-2], c.args[1].value.shape[-2])]
    assert any(c.args[0].value.size and c.args[1].value.size for c in taken)
    for c in taken:
        for x in (c.args[0].value, c.args[1].value):
            finite = x[np.isfinite(x)]
            assert np.array_equal(finite, np.round(finite)), "the matrix-product path draws integers"


# -- gather and scatter: an empty index of any dtype -------------------------------------------------

EMPTY_INDEX_DTYPES = (np.uint8, np.int8, np.int16, np.bool_, np.float32, np.int64)


@pytest.mark.parametrize("index_dtype", EMPTY_INDEX_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("index_shape", [(0, 3), (2, 0), (0,), (4, 0, 5)])
def test_gather_and_scatter_take_an_empty_index_of_any_dtype(index_dtype, index_shape):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    index = np.zeros(index_shape, index_dtype)
    _same_as_eager(_call("aten.gather.default", x, 0, index))
    _same_as_eager(_call("aten.scatter.src", x, 1, index, np.ones((2, 3), np.float32)))
    _same_as_eager(_call("aten.scatter.value", x, 0, index, 2.0))
    _same_as_eager(_call("aten.scatter_add.default", x, 0, index, np.ones((2, 3), np.float32)))
    _same_as_eager(_call("aten.scatter_reduce.two", x, 0, index, np.ones((2, 3), np.float32), "mean", include_self=False))


def test_a_nonempty_index_of_another_dtype_is_refused_by_both():
    call = _call("aten.gather.default", np.zeros((2, 3), np.float32), 0, np.zeros((1, 1), np.uint8))
    with pytest.raises(RuntimeError):
        eager_outputs(call)
    with pytest.raises(TypeError):
        reference(call)


@pytest.mark.slow
def test_gather_draws_empty_indices_of_other_dtypes():
    dtypes = {str(c.args[2].value.dtype) for c in _draws("aten.gather.default", "float32", 300) if c.args[2].value.size == 0}
    assert dtypes - {"int64", "int32"}


# -- div with rounding_mode in the half types -------------------------------------------------------


def _half_draws(dtype, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    from conformance.strategies.values import fill_spread

    return fill_spread(rng, dtype, (n,), "any_finite", "everything"), fill_spread(rng, dtype, (n,), "moderate", "everything")


@pytest.mark.parametrize("mode", ["trunc", "floor"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_div_rounding_follows_the_divisors_element_count(dtype, mode):
    """A divisor of several elements: eager rounds every operation to the half type (its vectorized
    and scalar loops alike); one element (a Scalar, a one-element tensor): float32, rounded once."""
    rng = np.random.default_rng(1)
    a, b = _half_draws(dtype, 4099, rng)
    for args in [(a, b), (a[:31], b[:31]), (a[:4096].reshape(64, 64), b[:64].reshape(64, 1)),
                 (a, b[5:6]), (a, np.asarray(1 / 3, np.float32))]:
        _same_as_eager(_call("aten.div.Tensor_mode", *args, rounding_mode=mode))
    _same_as_eager(_call("aten.div.Scalar_mode", a, float(b[7]), rounding_mode=mode))


# -- sort(stable=True): ties keep input order --------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "int8", "bfloat16"])
def test_stable_sort_draws_ties_and_matches_eager_indices(dtype):
    tied = 0
    for call in _draws("aten.sort.stable", dtype, 150):
        if call.kwargs.get("stable") is not True:
            continue
        x, axis = call.args[0].value, call.kwargs["dim"]
        if x.ndim and x.shape[axis] > 1:
            ordered = np.sort(np.moveaxis(x.astype(np.float64), axis, -1), axis=-1)
            tied += bool((ordered[..., 1:] == ordered[..., :-1]).any())
        _same_as_eager(call)
    assert tied >= 5


@pytest.mark.parametrize(
    ("start", "values", "index"),
    [
        (-400.0, [-400.0, -400.0, 10.0], [0, 0, 1]),  # past -448: saturates, then stays there
        (400.0, [400.0, -400.0], [0, 0]),  # saturates to 448, then 448 - 384 = 64
        (448.0, [448.0, -448.0, 448.0], [0, 0, 1]),
    ],
)
def test_float8_e4m3fn_index_put_accumulate_saturates_each_step(start, values, index):
    """Eager accumulates index_put in the float8 type one index at a time, each sum saturating at
    +-448 as c10's cast does; ml_dtypes' own add gives NaN past 448 (a draw of
    test_kernels_vs_eager found it: -448 in eager, NaN in the reference)."""
    e4m3 = ml_dtypes.float8_e4m3fn
    call = _call(
        "aten.index_put.default",
        np.full((2, 4), start, np.float32).astype(e4m3),
        [Tensor(np.array(index, np.int64))],
        np.array(values, np.float32).reshape(-1, 1).astype(e4m3),
        True,
    )
    _same_as_eager(call)
