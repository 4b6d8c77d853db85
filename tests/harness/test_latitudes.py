"""Declared latitude (conformance/latitudes.py), case by case: each model passes what it admits and
fails, naming itself, what it does not; unknown names are refused before a run. The certifications
of the seeded latitude backends are in tests/test_latitudes.py."""

from __future__ import annotations

from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from conformance import case, latitudes, specs
from conformance.api import LATITUDES, Manifest
from conformance.call import Call, Tensor
from conformance.results import Category

SPECS = specs.load()


def _backend(*names: str):
    return SimpleNamespace(manifest=Manifest(latitudes=names))


def _judge(names, op: str, call: Call, actual: np.ndarray):
    """The one output of ``call`` as ``case.compare`` judges it for a backend declaring ``names``."""
    spec = SPECS.op(op)
    expected, _, limits, others = case.expectations(spec, call)  # eager, the reference and the cross-check; no program
    return case.compare(_backend(*names), spec, op, [actual], expected, call, limits, others)[0], SimpleNamespace(expected=expected)


def test_unknown_latitudes_are_refused_when_the_manifest_is_built():
    with pytest.raises(ValueError, match=r"unknown latitude\(s\) \['tf16'\]; known: tf32, ftz"):
        Manifest(latitudes=("tf32", "tf16"))
    with pytest.raises(ValueError, match="unknown latitude"):
        Manifest.from_dict({"latitudes": ["fast_division"]})
    with pytest.raises(ValueError, match="a list of names"):
        Manifest(latitudes="tf32")
    assert Manifest.from_dict({"latitudes": ["ftz", "tf32", "ftz"]}).latitudes == ("ftz", "tf32")
    assert set(LATITUDES) == {"tf32", "ftz", "daz", "reassociation", "fast-division", "signed-zero"}


def test_certify_refuses_a_backend_declaring_an_unknown_latitude_before_it_runs(tmp_path):
    """What certify does first (conformance.cli.inputs.backend_or_exit): the backend is built, and a
    manifest naming an unknown latitude is a usage error (exit 2) that says which names exist."""
    from conformance.cli.exits import UsageError
    from conformance.cli.inputs import backend_or_exit

    path = tmp_path / "accelerator.py"
    path.write_text(
        "from dataclasses import replace\n"
        "from reference_backend import backend_under_test\n\n"
        "def backend():\n"
        "    reference = backend_under_test()\n"
        "    return replace(reference, manifest=replace(reference.manifest, latitudes=('tf32', 'bf16')))\n"
    )
    with pytest.raises(UsageError, match=r"unknown latitude\(s\) \['bf16'\]; known: tf32, ftz, daz, reassociation, fast-division, signed-zero"):
        backend_or_exit(f"{path}:backend")


def test_tf32_rounding_is_to_nearest_even_on_a_10_bit_mantissa():
    one = np.float32(1)
    step = np.float32(2.0**-10)
    x = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-11 + 2.0**-20, -(1 + 2.0**-11), 3.4028235e38, np.inf, 1e-45], np.float32)
    got = latitudes.round_tf32(x)
    assert got[0] == one  # a tie goes to the even neighbour
    assert got[1] == one + 2 * step  # 1 + 1.5 steps: the even neighbour is 1 + 2 steps
    assert got[2] == one + step  # above the tie
    assert got[3] == -one
    assert np.isposinf(got[4]) and np.isposinf(got[5])  # the largest float32 rounds past the largest TF32
    assert got[6] == 0  # the smallest subnormal is below half of TF32's smallest step (2**-136)
    assert np.isnan(latitudes.round_tf32(np.float32([np.nan]))).all()
    rng = np.random.default_rng(3)
    y = (rng.standard_normal(4096) * 10.0 ** rng.integers(-30, 30, 4096)).astype(np.float32)
    m, e = np.frexp(y.astype(np.float64))  # an independent spelling: 11 significant bits, np.round half to even
    np.testing.assert_array_equal(latitudes.round_tf32(y), np.ldexp(np.round(m * 2048) / 2048, e).astype(np.float32))


def test_flush_gives_a_zero_of_the_same_sign_in_each_float_type():
    for dtype in (np.float32, np.float16, np.dtype(ml_dtypes.bfloat16), np.float64):
        info = ml_dtypes.finfo(dtype)
        x = np.array([info.smallest_subnormal, -info.smallest_subnormal, info.smallest_normal, 0.0, 1.0], dtype)
        got = latitudes.flush(x)
        assert got.dtype == x.dtype
        assert got[0] == 0 and not np.signbit(got[0]) and got[1] == 0 and np.signbit(got[1])
        np.testing.assert_array_equal(got[2:], x[2:])


def _mm_call(rng):
    a = rng.uniform(-4, 4, (16, 64)).astype(np.float32)
    b = rng.uniform(-4, 4, (64, 8)).astype(np.float32)
    return Call("aten.mm.default", (Tensor(a), Tensor(b))), a, b


def test_tf32_passes_rounded_operands_and_fails_bfloat16_naming_itself():
    call, a, b = _mm_call(np.random.default_rng(5))
    tf32 = np.matmul(latitudes.round_tf32(a), latitudes.round_tf32(b))
    strict, _ = _judge((), "aten.mm.default", call, tf32)
    assert not strict.ok and strict.latitudes == ()
    declared, prepared = _judge(("tf32",), "aten.mm.default", call, tf32)
    assert declared.ok and declared.latitudes == ("tf32",) and "within declared latitude tf32" in declared.comparison.message
    assert declared.tolerance.source == "latitude tf32"
    exact, _ = _judge(("tf32",), "aten.mm.default", call, prepared.expected[0])
    assert exact.ok and exact.latitudes == ()  # a backend may compute exactly where it declares tf32
    bf16 = np.matmul(*(x.astype(ml_dtypes.bfloat16).astype(np.float32) for x in (a, b)))
    exceeded, _ = _judge(("tf32",), "aten.mm.default", call, bf16)
    assert not exceeded.ok and exceeded.comparison.message.startswith("beyond its declared latitude tf32: ")
    # tf32 does not reach ops outside the matmul and convolution family, nor other dtypes
    assert latitudes.covering(("tf32",), SPECS.op("aten.add.Tensor"), call, "float32") == ()
    assert latitudes.covering(("tf32",), SPECS.op("aten.mm.default"), call, "float64") == ()


def test_addmm_under_tf32_keeps_its_bias_unrounded():
    rng = np.random.default_rng(6)
    bias, m1, m2 = (rng.uniform(-4, 4, s).astype(np.float32) * 1.0001 for s in ((8,), (4, 32), (32, 8)))
    call = Call("aten.addmm.default", (Tensor(bias), Tensor(m1), Tensor(m2)))
    product = np.matmul(latitudes.round_tf32(m1).astype(np.float64), latitudes.round_tf32(m2).astype(np.float64))
    kept = (bias.astype(np.float64) + product).astype(np.float32)
    assert _judge(("tf32",), "aten.addmm.default", call, kept)[0].ok
    rounded = (latitudes.round_tf32(bias).astype(np.float64) + product).astype(np.float32)
    assert not _judge(("tf32",), "aten.addmm.default", call, rounded)[0].ok


def test_ftz_flushes_both_sides_and_daz_the_inputs():
    tiny = np.float32(np.finfo(np.float32).tiny)
    x = np.array([tiny, -tiny, 3.0, tiny], np.float32)
    y = np.array([0.5, 0.25, 2.0, 4.0], np.float32)
    call = Call("aten.mul.Tensor", (Tensor(x), Tensor(y)))
    flushed = np.array([0.0, -0.0, 6.0, 4 * tiny], np.float32)
    assert not _judge((), "aten.mul.Tensor", call, flushed)[0].ok  # mul is exact: subnormals compare bit for bit
    passed, _ = _judge(("ftz",), "aten.mul.Tensor", call, flushed)
    assert passed.ok and passed.latitudes == ("ftz",)
    wrong_sign = np.array([0.0, 0.0, 6.0, 4 * tiny], np.float32)  # flushed to +0.0 where the result is negative
    failed, _ = _judge(("ftz",), "aten.mul.Tensor", call, wrong_sign)
    assert not failed.ok and "latitude ftz" in failed.comparison.message
    sub = np.array([1e-40, -1e-40, 2.0], np.float32)
    daz_call = Call("aten.mul.Tensor", (Tensor(sub), Tensor(np.float32([2.0**100, 2.0**100, 1.0]))))
    read_as_zero = np.array([0.0, -0.0, 2.0], np.float32)
    assert not _judge(("ftz",), "aten.mul.Tensor", daz_call, read_as_zero)[0].ok  # 1e-40 * 2**100 is normal: no flush
    assert _judge(("daz",), "aten.mul.Tensor", daz_call, read_as_zero)[0].ok


def test_fast_division_admits_2_ulp_and_the_reciprocal_product_and_no_more():
    rng = np.random.default_rng(9)
    x = rng.uniform(-100, 100, 512).astype(np.float32)
    y = rng.uniform(0.5, 3, 512).astype(np.float32)
    call = Call("aten.div.Tensor", (Tensor(x), Tensor(y)))
    quotient = x / y
    reciprocal = (x * (np.float32(1) / y)).astype(np.float32)
    assert (reciprocal != quotient).any()
    assert not _judge((), "aten.div.Tensor", call, reciprocal)[0].ok
    assert _judge(("fast-division",), "aten.div.Tensor", call, reciprocal)[0].ok
    two = np.nextafter(np.nextafter(quotient, np.float32(np.inf)), np.float32(np.inf))
    assert _judge(("fast-division",), "aten.div.Tensor", call, two)[0].ok
    three = np.nextafter(two, np.float32(np.inf))
    failed, _ = _judge(("fast-division",), "aten.div.Tensor", call, three)
    assert not failed.ok and failed.comparison.message.startswith("beyond its declared latitude fast-division")
    # x * (1 / y) where 1 / y overflows: infinitely far from x / y, and still the model
    big = Call("aten.div.Tensor", (Tensor(np.float32([1e-30])), Tensor(np.float32([1e-39]))))
    assert _judge(("fast-division",), "aten.div.Tensor", big, np.float32([np.inf]))[0].ok
    assert not _judge(("fast-division",), "aten.div.Tensor", big, np.float32([-np.inf]))[0].ok
    floor = Call("aten.div.Tensor_mode", (Tensor(x), Tensor(y)), {"rounding_mode": "floor"})
    assert latitudes.covering(("fast-division",), SPECS.op("aten.div.Tensor_mode"), floor, "float32") == ()


def test_signed_zero_leaves_only_the_sign_of_zero_uncompared():
    call = Call("aten.relu.default", (Tensor(np.float32([-0.0, 0.0, -1.0, 2.0])),))
    positive = np.float32([0.0, 0.0, 0.0, 2.0])
    assert not _judge((), "aten.relu.default", call, positive)[0].ok
    passed, _ = _judge(("signed-zero",), "aten.relu.default", call, positive)
    assert passed.ok and passed.latitudes == ("signed-zero",)
    assert not _judge(("signed-zero",), "aten.relu.default", call, np.float32([0.0, 0.0, 0.0, 2.5]))[0].ok


def test_reassociation_is_the_bound_and_reaches_no_op_without_one():
    rng = np.random.default_rng(11)
    x = rng.uniform(-8, 8, (8, 1024)).astype(np.float32)
    call = Call("aten.sum.dim_IntList", (Tensor(x), [1]), {})
    reversed_order = np.zeros(8, np.float32)
    for k in range(x.shape[1] - 1, -1, -1):
        reversed_order = (reversed_order + x[:, k]).astype(np.float32)
    undeclared, prepared = _judge((), "aten.sum.dim_IntList", call, reversed_order)
    assert undeclared.ok and undeclared.latitudes == ()  # the derived bound admits every order, declared or not
    declared, _ = _judge(("reassociation",), "aten.sum.dim_IntList", call, reversed_order)
    assert declared.ok and declared.latitudes == ("reassociation",)
    shifted, _ = _judge(("reassociation",), "aten.sum.dim_IntList", call, (prepared.expected[0] + np.float32(2)).astype(np.float32))
    assert not shifted.ok and "latitude reassociation" in shifted.comparison.message
    assert latitudes.covering(("reassociation",), SPECS.op("aten.mul.Tensor"), call, "float32") == ()


def test_batch_norm_statistics_a_call_leaves_undefined_may_come_sized_c():
    """Eager on CUDA returns save_mean and save_invstd sized [C] in eval mode, on CPU [0]: unspecified
    (op spec defined_outputs), so only their dtype is compared, and the harness leaves room behind such
    an output for a backend to resize it (resize_tensor, NUM-001). Eager on CPU (torch-eager) stands in
    for the device, its statistics resized to [C] after it ran."""
    from conformance.api import BackendInterface, BackendUnderTest, Error, resize_tensor
    from conformance.discovery import load

    eager = load("torch-eager")

    class SizedC(BackendInterface):
        def is_available(self):
            return eager.runtime.is_available()

        def init(self, context, processed, compile_specs):
            return eager.runtime.init(context, processed, compile_specs)

        def execute(self, context, handle, args):
            status = eager.runtime.execute(context, handle, args)
            channels = args[0].value.shape[1]
            for out in args[-2:]:
                if resize_tensor(out, (channels,)) is not Error.Ok:
                    return Error.InvalidArgument
                out.value[...] = 1
            return status

        def destroy(self, handle):
            eager.runtime.destroy(handle)

    name = "aten._native_batch_norm_legit_no_training.default"
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    channels = [Tensor(rng.uniform(0.5, 2, 3).astype(np.float32), role="parameter") for _ in range(4)]
    call = Call(name, (Tensor(x), *channels, 0.1, 1e-5))
    cuda_like = BackendUnderTest(name="cuda-like", details=eager.details, runtime=SizedC(), manifest=eager.manifest)
    spec = SPECS.op(name)
    outcome = case.run(cuda_like, spec, call)
    assert outcome.category is Category.PASS, outcome.message
    assert [np.shape(o) for o in outcome.outputs] == [x.shape, (3,), (3,)]
    assert "not compared" in outcome.comparisons[1].comparison.message
    assert case.run(eager, spec, call).ok
