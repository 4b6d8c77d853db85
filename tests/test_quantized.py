"""QNT: the quantized programs, their spec, and defects of quantized backends caught through certify.

The reference certifies clean on every quantized program (the ``quantized`` profile); here a few
programs' checks alone, and two backends with one realistic int8 defect each
(tests/seeded/defects.py QUANTIZED_DEFECTS): one that folds quantize -> dequantize pairs away
(outputs close to the reference's, between its quantization steps: QNT-003 must catch it even
where the values are within budget), one that reads every channel's weight scale from channel 0
(QNT-001 must fail on per-channel programs and pass the per-tensor ones); and a quantize that rounds
ties away from zero (QNT-001 on exact ties at the input quantize).
"""

from __future__ import annotations

import numpy as np
import pytest

from conformance import specs
from conformance.checks.test_quantized import _tie_edge
from conformance.programs.quantize import OPS, Grid, quantized_program
from tests.certifying import certify

SPEC = specs.load()


def test_the_spec_and_the_builders_list_the_same_programs():
    ops = [n for n, q in SPEC.quantized.items() if q.kind == "op"]
    assert ops == list(OPS)
    assert SPEC.profile("quantized").quantized == tuple(SPEC.quantized)
    assert all(q.lsb > 0 for q in SPEC.quantized.values())


@pytest.mark.slow
@pytest.mark.parametrize("name", ["linear", "add", "mobilenet_v2"])
def test_a_quantized_program_holds_quantize_and_dequantize_and_ends_on_a_grid(name):
    spec = SPEC.quantized[name]
    program = quantized_program(name, spec.kind, spec.inputs)
    assert any(op.startswith("quantized_decomposed.quantize_per_tensor") for op in program.program.ops)
    assert any(op.startswith("quantized_decomposed.dequantize_per_") for op in program.program.ops)
    (grid,) = program.grids
    assert grid.quant_min == -128 and grid.quant_max == 127 and grid.scale > 0
    out = program.program.exported.module()(*[__import__("torch").from_numpy(a) for a in program.program.inputs])
    assert not grid.off_grid(out.detach().numpy()).any()


def test_the_grid_tells_steps_from_values_between_them():
    grid = Grid(scale=0.5, zero_point=-3, quant_min=-128, quant_max=127)
    on = (np.array([-128, -3, 0, 127], np.float32) + 3) * 0.5
    assert not grid.off_grid(on).any()
    assert grid.off_grid(np.array([0.26, (127 + 3 + 1) * 0.5, np.nan], np.float32)).all()  # between steps, past quant_max, NaN


@pytest.mark.slow
def test_the_reference_passes_and_stays_within_a_step_of_eager(tmp_path):
    results, _ = certify("reference", tmp_path, "quantized", "QNT and (conv_bn_relu or mul or lenet)")
    assert {"conv_bn_relu", "mul", "lenet"} <= {r["model"] for r in results.values()}  # -k matches substrings: lenet, mobilenet_v2
    assert {r["category"] for r in results.values()} == {"PASS"}, results
    for r in results.values():
        assert r["stats"]["max_lsb"] == 0 and r["stats"]["max_lsb_vs_eager"] <= 1, r
        spec = SPEC.quantized[r["model"]]
        ties = bool(_tie_edge(quantized_program(r["model"], spec.kind, spec.inputs).program))
        assert r["stats"]["examples"] == 9 + ties  # own inputs, 4 edges (+ exact ties where a quantize reads an input), 4 drawn
        if r["id"].startswith("test_QNT_001"):
            assert r["stats"]["input_ties"] > 0  # the input quantizes alone, held to 0 steps on exact ties


@pytest.mark.slow
def test_folding_quantize_pairs_away_is_off_the_grid(tmp_path):
    results, _ = certify("tests/seeded/defects.py:quantize_pairs_folded_away", tmp_path, "quantized", "QNT_003 and (conv2d or mlp)")
    for name in ("conv2d", "conv2d_relu", "mlp"):
        failed = results[f"test_QNT_003_outputs_on_quantization_grid[{name}]"]
        assert failed["category"] == "MISMATCH", failed
        assert "off the grid of its dequantize" in failed["message"] and failed["stats"]["off_grid"] > 0


@pytest.mark.slow
def test_one_weight_scale_for_every_channel_fails_the_per_channel_programs_only(tmp_path):
    results, _ = certify("tests/seeded/defects.py:per_channel_scale_of_channel_0", tmp_path, "quantized", "QNT_001 and (conv2d or add or mul)")
    for name in ("conv2d", "depthwise_conv2d", "conv2d_relu"):
        failed = results[f"test_QNT_001_quantized_op_matches_reference[{name}]"]
        assert failed["category"] == "MISMATCH", failed
        assert failed["stats"]["max_lsb"] > SPEC.quantized[name].lsb
        assert "first diverging op" in failed["message"]
    for name in ("add", "add_relu", "mul"):  # per-tensor only: no per-channel dequantize in them
        assert results[f"test_QNT_001_quantized_op_matches_reference[{name}]"]["category"] == "PASS"


@pytest.mark.slow
def test_a_quantize_rounding_ties_away_from_zero_fails_the_patterns(tmp_path):
    """A tie moves a pattern's output by one step, inside its budget: the exact-tie edge (every input
    a tie, so the errors add up) and the input quantizes held to 0 steps on exact ties catch it."""
    results, _ = certify("tests/seeded/defects.py:quantize_rounds_half_away_from_zero", tmp_path, "quantized", "QNT_001 and (linear or mul)")
    for name in ("linear", "linear_relu", "mul"):
        failed = results[f"test_QNT_001_quantized_op_matches_reference[{name}]"]
        assert failed["category"] == "MISMATCH" and "[exact ties at the input quantize]" in failed["message"], failed


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('kind = "model"\nlsb = 3\ndescription = "The MLP', 'kind = "model"\nlsb = 3\ninputs = [{ low = 0, high = 1 }]\ndescription = "The MLP'),
         "a model's inputs are its models.toml ranges"),
        (("[program.mlp]", "[program.mpl]"), "names a model of models.toml; 'mpl' (did you mean mlp?) is not one"),
        (('[program.add]\nkind = "op"', '[program.add]\nkind = "layer"'), 'kind must be "op" or "model"'),
        (("[defaults]\nlsb = 1", "[defaults]\nlsb = -1"), "lsb must be 0 or more"),
        (('quantized = "all"', 'quantized = ["linear", "conv3d"]'), "unknown quantized program(s) 'conv3d'"),
    ],
    ids=["model with inputs", "unknown model", "unknown kind", "negative budget", "profile names an unknown program"],
)
def test_a_broken_quantized_spec_is_refused_naming_file_entry_and_field(tmp_path, edit, message):
    import shutil

    root = tmp_path / "specs"
    shutil.copytree(specs.specs_root(), root)
    old, new = edit
    for name in ("quantized.toml", "profiles.toml"):
        text = (root / name).read_text()
        if old in text:
            (root / name).write_text(text.replace(old, new, 1))
            break
    else:
        raise AssertionError(f"{old!r} is in neither file")
    with pytest.raises(specs.SpecError, match=None) as caught:
        specs.load(root)
    assert message in str(caught.value) and str(root) in str(caught.value)
