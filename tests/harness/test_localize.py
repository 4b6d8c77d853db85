"""``conformance.localize`` names the operator a backend gets wrong first, by name and debug handle.

Each test seeds one interior defect in the reference backend (a kernel of one op made wrong)
and runs a whole program through it: the first node whose output differs must be that op's,
whether the backend shows its intermediate values (one program exposing them all) or only runs
prefixes ending at one node each, and isolating the node must say whether the op itself is wrong.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conformance import localize, oracle
from conformance.api import BackendError, Error
from conformance.checks import _support as support
from reference_backend import ReferenceBackend, ReferenceRuntime, backend_under_test
from reference_backend.kernels import KERNELS
from reference_backend.preprocess import lower

REFERENCE = backend_under_test()


def _tolerance(depth: int) -> oracle.Tolerance:
    return oracle.Tolerance(atol=1e-5 * depth, rtol=1e-5 * depth)


def _broken(op: str, fn, details=ReferenceBackend):
    table = dict(KERNELS)
    table[op] = fn
    return dataclasses.replace(REFERENCE, name="broken", runtime=ReferenceRuntime(kernels=table), details=details)


_relu = KERNELS["aten.relu.default"]
_softmax = KERNELS["aten._softmax.default"]
_BN = "aten._native_batch_norm_legit_no_training.default"


def _scaled_first(outputs):
    return (outputs[0] * np.float32(1.01), *outputs[1:])


class OneOutputOnly(ReferenceBackend):
    """Refuses a program with more than one output: intermediate values only through prefixes."""

    @staticmethod
    def preprocess(edge_program, compile_specs):
        if len(edge_program.graph_signature.output_specs) > 1:
            raise BackendError(Error.NotSupported, "one output per program")
        return lower(edge_program, compile_specs)


@pytest.mark.parametrize("details", [ReferenceBackend, OneOutputOnly], ids=["intermediate outputs", "prefixes"])
@pytest.mark.parametrize(
    ("program", "op", "kernel"),
    [
        ("mlp", "aten.relu.default", lambda x: _relu(x) * np.float32(1.01)),
        ("conv_block", "aten.relu.default", lambda x: _relu(x) * np.float32(1.01)),
        ("attention", "aten._softmax.default", lambda x, dim, half: _softmax(x, dim, half) + np.float32(1e-3)),
        ("conv_block", _BN, lambda *a, **k: _scaled_first(KERNELS[_BN](*a, **k))),  # one of several outputs
    ],
)
def test_a_wrong_interior_op_is_named(program, op, kernel, details):
    contract = support.contract_program(program)
    found = localize.localize(_broken(op, kernel, details), contract.fresh(), contract.inputs, _tolerance)
    assert found is not None
    assert found.op == op, found.describe()
    assert found.debug_handle is not None and found.node in {n.name for n in contract.exported.graph.nodes}
    assert found.method == ("intermediate outputs" if details is ReferenceBackend else "prefixes")
    assert found.isolated is not None and not found.isolated.ok  # the op itself is wrong
    assert f"first diverging op: {found.node} ({op}, debug handle {found.debug_handle})" in found.describe()


def test_a_correct_backend_has_no_diverging_op():
    contract = support.contract_program("conv_block")
    assert localize.localize(REFERENCE, contract.fresh(), contract.inputs, _tolerance) is None


def test_a_node_wrong_only_in_context_is_told_apart():
    """A backend that gets relu wrong only where its input came from a convolution (a fused
    conv+relu gone wrong): relu is named, and alone it matches."""

    fused = {"on": False}

    class Runtime(ReferenceRuntime):
        def init(self, context, processed, compile_specs):
            fused["on"] = b"aten.convolution.default" in bytes(processed.data)
            return super().init(context, processed, compile_specs)

    table = dict(KERNELS)
    table["aten.relu.default"] = lambda x: _relu(x) + np.float32(0.5) if fused["on"] else _relu(x)
    backend = dataclasses.replace(REFERENCE, name="fuses-badly", runtime=Runtime(kernels=table))
    contract = support.contract_program("conv_block")
    found = localize.localize(backend, contract.fresh(), contract.inputs, _tolerance)
    assert found is not None and found.op == "aten.relu.default", found and found.describe()
    assert found.isolated is not None and found.isolated.ok
    assert "wrong only in context" in found.describe()


def test_depths_count_ops_on_the_longest_path():
    contract = support.contract_program("mlp")
    depths = localize.node_depths(contract.exported)
    assert all(depths[n.name] == 0 for n in contract.exported.graph.nodes if n.op == "placeholder")
    ops = {n.name: depths[n.name] for n in contract.exported.graph.nodes if n.op == "call_function"}
    assert ops == {"permute": 1, "addmm": 2, "relu": 3, "permute_1": 1, "addmm_1": 4}  # linear, relu, linear


def test_a_contract_program_mismatch_names_the_op():
    """RT-002's comparison (``_support.compare_outputs``) localizes a mismatch on a contract program."""
    from conformance.driver import Driver
    from conformance.results import Category, CheckFailure

    backend = _broken("aten.relu.default", lambda x: _relu(x) * np.float32(1.01))
    contract = support.contract_program("mlp")
    expected = support.expected_for("mlp")
    ran = Driver(backend).run(contract.fresh(), contract.inputs, expected)
    with pytest.raises(CheckFailure) as info:
        support.compare_outputs(ran.outputs, expected, what="mlp", backend=backend, program=contract)
    assert info.value.category is Category.MISMATCH
    assert "first diverging op: relu (aten.relu.default" in info.value.message
    assert info.value.stats["localization"]["op"] == "aten.relu.default"
