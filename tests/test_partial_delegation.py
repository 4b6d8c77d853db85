"""Partial delegation: a backend that takes part of a model (BackendUnderTest.partial_delegation).

The whole-program checks ask it again with PARTIAL_DELEGATION after a refusal, compare the whole
program's outputs, report the delegated fraction by ops and FLOPs and what was left outside, and
never count the result a pass (NOT_SUPPORTED, so a mandatory model is not certified); a wrong
operator inside the delegate is still a MISMATCH, named. The backends are in tests/seeded/defects.py
(PARTIAL_BACKENDS): the reference with max pooling left to a fallback.
"""

from __future__ import annotations

import pytest

from conformance.checks._whole import delegation
from conformance.programs.models import model_program
from tests.certifying import certify


@pytest.mark.slow
def test_the_delegated_fraction_counts_the_nodes_the_map_names():
    program = model_program("resnet18")
    handles = {n.meta["debug_handle"] for n in program.exported.graph.nodes if n.op == "call_function"}
    pool = {n.meta["debug_handle"] for n in program.exported.graph.nodes if "max_pool2d" in str(n.target)}
    whole = delegation(program.exported, program.inputs, {0: tuple(handles)})
    assert whole.ops == whole.ops_total and whole.flops == whole.flops_total > 0 and not whole.outside
    part = delegation(program.exported, program.inputs, {0: tuple(handles - pool)})
    assert part.ops == part.ops_total - 1 and part.outside == {"aten.max_pool2d_with_indices.default": 1}
    assert part.flops == part.flops_total  # pooling counts no FLOPs (torch.utils.flop_counter)
    assert delegation(program.exported, program.inputs, {}).ops == 0


@pytest.mark.slow
def test_a_partially_delegated_model_reports_its_fraction_and_is_not_a_pass(tmp_path):
    results, verdict = certify("tests/seeded/defects.py:partial_max_pool_on_fallback", tmp_path, "models", "MOD and (resnet18 or lenet)")
    assert results["test_MOD_001_model_matches_reference[lenet]"]["category"] == "PASS"  # no max pooling: all delegated
    partial = results["test_MOD_001_model_matches_reference[resnet18]"]
    assert partial["category"] == "NOT_SUPPORTED", partial
    taken = partial["stats"]["delegated"]
    assert taken["ops"] == taken["ops_total"] - 1 and taken["outside"] == {"aten.max_pool2d_with_indices.default": 1}
    assert "partially delegated" in partial["message"] and "not counted as a pass" in partial["message"]
    assert partial["stats"]["examples"] == 8  # every run compared, as for a whole delegation
    assert not verdict["certified"] and "model resnet18" in verdict["unsupported"]


@pytest.mark.slow
def test_a_wrong_op_inside_a_partial_delegate_is_a_mismatch(tmp_path):
    results, _ = certify("tests/seeded/defects.py:partial_with_conv_padded_one_side", tmp_path, "models", "MOD and resnet18")
    failed = results["test_MOD_001_model_matches_reference[resnet18]"]
    assert failed["category"] == "MISMATCH", failed
    assert "partially delegated: 69 of 70 operators" in failed["message"]
    assert failed["stats"]["delegated"]["outside"] == {"aten.max_pool2d_with_indices.default": 1}
    found = failed["stats"]["localization"]  # localized with PARTIAL_DELEGATION too: the first padded convolution
    assert found["op"] == "aten.convolution.default" and found["delegated"] is True, found
    assert "(inside the delegate)" in failed["message"]
