"""The ExecuTorch adapters (executorch-xnnpack, executorch-portable) on the contract.

Needs executorch (``pip install 'torch-backend-conformance[executorch]'``); without
it only the DiscoveryError test runs. Importing executorch costs ~10 s, lowering a
program 1-3 s: the module keeps to a handful of programs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conformance.api import BackendError, BackendUnderTest, Error
from conformance.discovery import DiscoveryError
from conformance.driver import Driver
from conformance.results import Category, CheckFailure

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def et():
    return pytest.importorskip("executorch.runtime", reason="executorch is not installed (pip install 'torch-backend-conformance[executorch]')")


@pytest.fixture(scope="module")
def xnnpack(et) -> BackendUnderTest:
    from conformance.adapters.executorch import xnnpack

    return xnnpack()


@pytest.fixture(scope="module")
def portable(et) -> BackendUnderTest:
    from conformance.adapters.executorch import portable

    return portable()


def _program(fn, *inputs):
    import torch

    from conformance.programs import export_module

    class Module(torch.nn.Module):
        def forward(self, *args):
            return fn(*args)

    return export_module(Module(), [torch.from_numpy(a) for a in inputs], dynamic=False)


def _add():
    import torch

    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((3, 5)).astype(np.float32) for _ in range(2))
    return _program(torch.ops.aten.add.Tensor, x, y), (x, y), [x + y]


def test_missing_executorch_is_a_discovery_error(monkeypatch):
    from conformance.adapters import executorch as adapter

    monkeypatch.setitem(sys.modules, "executorch.runtime", None)  # import raises ImportError
    for factory in (adapter.xnnpack, adapter.portable):
        with pytest.raises(DiscoveryError) as info:
            factory()
        assert str(info.value) == (
            "executorch is not installed: pip install 'torch-backend-conformance[executorch]' (executorch==1.5.1)"
        )


def test_factories_build(xnnpack, portable):
    assert (xnnpack.name, xnnpack.family) == ("executorch-xnnpack", "delegate")
    assert (portable.name, portable.family) == ("executorch-portable", "delegate")
    assert xnnpack.manifest.claims("aten.mul.Tensor", "float32")
    assert not xnnpack.manifest.claims("aten.mul.Tensor", "int32")
    assert portable.manifest.claims("aten.add.Tensor", "float32")
    assert xnnpack.runtime.is_available() and portable.runtime.is_available()
    assert "RT-014" in xnnpack.manifest.not_applicable and "REG-" in portable.manifest.not_applicable


@pytest.mark.parametrize("which", ["xnnpack", "portable"])
def test_add_round_trip(which, request):
    backend = request.getfixturevalue(which)
    program, inputs, expected = _add()
    driver = Driver(backend)
    result, _ = driver.preprocess(program)
    assert result.processed_bytes
    if which == "xnnpack":
        assert result.processed_bytes[4:8] == b"XH00"  # XnnpackBackend.preprocess's own payload
    else:
        assert result.processed_bytes[4:8] == b"ET12"  # a whole .pte
        handles = {n.meta["debug_handle"] for n in program.graph.nodes if n.op == "call_function"}
        assert {h for v in result.debug_handle_map.values() for h in v} == handles
    loaded = driver.init(result)
    try:
        ran = driver.execute(loaded, inputs, expected)
    finally:
        driver.destroy(loaded)
    np.testing.assert_allclose(ran.outputs[0], expected[0], rtol=1e-6, atol=1e-6)
    with pytest.raises(BackendError) as info:  # the handle is gone
        backend.runtime.execute(None, loaded.handle, [])
    assert info.value.error is Error.DelegateInvalidHandle


def test_wrong_dtype_is_refused_by_executorch(xnnpack):
    from conformance.api import EValue

    program, inputs, expected = _add()
    driver = Driver(xnnpack)
    loaded = driver.init(driver.preprocess(program)[0])
    try:
        args = [EValue(inputs[0].astype(np.float64)), EValue(inputs[1]), EValue(np.zeros_like(expected[0]))]
        with pytest.raises(BackendError) as info:
            xnnpack.runtime.execute(None, loaded.handle, args)
        assert info.value.error is Error.InvalidArgument  # Method::set_inputs' own check, code 0x12
    finally:
        driver.destroy(loaded)


def test_undelegated_op_is_refused_as_not_supported(xnnpack):
    import torch

    x = np.ones((5, 4), np.float32)
    index = np.array([0, 2], np.int64)
    program = _program(lambda a, i: torch.ops.aten.index_select.default(a, 0, i), x, index)  # no XNNPACK config
    with pytest.raises(CheckFailure) as info:
        Driver(xnnpack).preprocess(program)
    assert info.value.category is Category.NOT_SUPPORTED
    assert "index_select" in info.value.message and "left undelegated" in info.value.message
    assert "aten.index_select.default(float32[5, 4], int64[2])" in info.value.message  # what the partitioner judged


def test_empty_tensor_is_left_undelegated(xnnpack):
    """Documented in XnnpackPartitioner (xnnpack_config.py: "XNNPACK does not support empty tensors"):
    a claimed op on an empty tensor is refused, so NUM reports the claim as PREPROCESS_FAIL."""
    import torch

    program = _program(torch.ops.aten.relu.default, np.ones((0, 3), np.float32))
    with pytest.raises(CheckFailure) as info:
        Driver(xnnpack).preprocess(program)
    assert info.value.category is Category.NOT_SUPPORTED
    assert "aten.relu.default(float32[0, 3]) left undelegated" in info.value.message


def test_corrupted_payloads_are_refused(xnnpack):
    program, inputs, expected = _add()
    driver = Driver(xnnpack)
    result, _ = driver.preprocess(program)
    blob = result.processed_bytes
    newer = bytearray(blob)
    newer[39] = ord("2")  # flatbuffer identifier XN01 -> XN02
    truncated = blob[: len(blob) // 2]
    for label, data, errors in (
        ("newer schema", bytes(newer), {Error.DelegateInvalidCompatibility}),
        ("truncated", truncated, {Error.InvalidArgument, Error.DelegateInvalidCompatibility, Error.InvalidProgram}),
    ):
        with pytest.raises(CheckFailure) as info:
            driver.init(result, processed_bytes=data)
        assert info.value.category is Category.INIT_FAIL, label
        assert info.value.__cause__.error in errors, (label, info.value.message)


def test_non_utf8_log_message_aborts_only_a_subprocess(et):
    """Known ExecuTorch defect (reports/README.md): a payload whose corruption ends up in an ET_LOG
    message with non-UTF-8 bytes aborts the interpreter (pybind11's stderr redirect raises
    UnicodeDecodeError inside C++). The harness runs checks in xdist workers, so it costs one
    CRASH; here it must stay inside the child process."""
    script = textwrap.dedent(
        """
        import torch
        from conformance.adapters.executorch import xnnpack
        from conformance.driver import Driver
        from conformance.programs import export_module
        from conformance.results import CheckFailure

        class Add(torch.nn.Module):
            def forward(self, x, y):
                return x + y

        x = torch.ones(2, 2)
        driver = Driver(xnnpack())
        result, _ = driver.preprocess(export_module(Add(), [x, x], dynamic=False))
        blob = bytearray(result.processed_bytes)
        blob[6] = 0xFF  # header magic XH00 -> XH\\xff0
        try:
            driver.init(result, processed_bytes=bytes(blob))
        except CheckFailure as exc:
            print("REFUSED", exc.message)
        else:
            print("ACCEPTED")
        """
    )
    child = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    aborted = child.returncode in (-signal.SIGABRT, 128 + signal.SIGABRT)
    assert aborted or "REFUSED" in child.stdout, (child.returncode, child.stdout[-500:], child.stderr[-1500:])
    if aborted:
        assert "UnicodeDecodeError" in child.stderr
