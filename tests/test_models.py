"""MOD: the model zoo, its spec, and a defect in an interior op of a model caught and localized.

The reference certifies on every model (the ``models`` profile: tests/test_workflow.py runs the
whole README path; here a model's check alone). A backend whose depthwise convolutions apply the
first channel's filter to every channel (tests/seeded/defects.py) passes the models without
depthwise convolutions and fails MobileNetV2, and the failure names a depthwise convolution node
of the model by name, overload and debug handle, through ``certify`` itself.
"""

from __future__ import annotations

import numpy as np
import pytest

from conformance import specs
from conformance.programs.models import MODELS, model_program
from tests.certifying import certify

SPEC = specs.load()


def test_the_spec_and_the_zoo_list_the_same_models():
    assert list(SPEC.models) == list(MODELS)
    assert SPEC.profile("models").models == tuple(MODELS)


@pytest.mark.slow
def test_every_model_has_an_input_range_per_input_and_a_depth():
    for name, spec in SPEC.models.items():
        program = model_program(name)
        assert len(spec.inputs) == len(program.inputs), name
        for r, a in zip(spec.inputs, program.inputs):  # integer inputs (token ids) get integer ranges
            assert a.dtype.kind == "f" or (float(r.low).is_integer() and float(r.high).is_integer()), (name, r)
        assert program.depth >= 4, name


@pytest.mark.slow
def test_a_wrong_depthwise_convolution_is_localized_in_mobilenet(tmp_path):
    results, _ = certify("tests/seeded/defects.py:depthwise_conv_first_filter", tmp_path, "models", "mobilenet_v2", "lenet")
    assert results["test_MOD_001_model_matches_reference[lenet]"]["category"] == "PASS"  # no depthwise convolution there
    failed = results["test_MOD_001_model_matches_reference[mobilenet_v2]"]
    assert failed["category"] == "MISMATCH", failed
    found = failed["stats"]["localization"]
    assert found["op"] == "aten.convolution.default" and found["alone"] == "differs", found
    node = next(n for n in model_program("mobilenet_v2").exported.graph.nodes if n.name == found["node"])
    weight = node.args[1].meta["val"]
    assert node.args[-1] > 1 and node.args[-1] == weight.shape[0], f"{found['node']} is not a depthwise convolution"
    assert found["debug_handle"] == node.meta["debug_handle"]
    assert f"first diverging op: {found['node']} (aten.convolution.default, debug handle {found['debug_handle']})" in failed["message"]
    assert "alone on eager's inputs it differs too (the op itself" in failed["message"]


def test_edge_and_drawn_inputs_keep_to_the_spec():
    from conformance.checks._whole import drawn_inputs, edge_inputs

    spec, program = SPEC.models["text_classifier"], model_program("text_classifier")
    edges = dict(edge_inputs(spec.inputs, program.inputs))
    assert set(edges) == {"low", "high", "zeros"}
    assert edges["high"][0].max() == 99 and edges["high"][0].dtype == np.int64  # token ids below the vocabulary size
    drawn = drawn_inputs(spec.inputs, program.inputs, 7)[0]
    assert drawn.shape == program.inputs[0].shape and 0 <= drawn.min() and drawn.max() < 100
    assert not np.array_equal(drawn, drawn_inputs(spec.inputs, program.inputs, 8)[0])
