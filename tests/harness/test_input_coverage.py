"""Input coverage (issue 27, item 6): the argument probes of RT-009/RT-010 keep the byte size, the
layout re-run strides each operand in turn and its replay carries the layout, an op's weights are
handed as program constants and as inputs, and a single-tensor cat is a refusal kind a claim declares."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ml_dtypes import bfloat16

from conformance import case, replay, specs
from conformance.call import Call, Tensor
from conformance.checks._runtime_errors import dtype_probes, shape_probes
from conformance.checks.test_numerics import _layout_targets
from conformance.programs import with_weights
from conformance.programs.operators import resolve_op

ROOT = Path(__file__).resolve().parents[2]
SEEDED = ROOT / "tests" / "seeded" / "defects.py"


def test_the_dtype_probes_include_one_of_the_same_byte_size():
    probes = dict(dtype_probes(np.arange(4, dtype=np.float32)))
    same = [a for a in probes.values() if a.nbytes == 16]
    assert [a.dtype for a in same] == [np.int32] and same[0].shape == (4,)
    (half,) = [a for a in dict(dtype_probes(np.zeros(4, np.float16))).values() if a.nbytes == 8]
    assert half.dtype == bfloat16


def test_the_shape_probes_include_the_same_element_count_in_other_shapes():
    shapes = [a.shape for label, a in shape_probes(np.zeros((2, 3), np.float32)) if label == "same byte size"]
    assert shapes == [(3, 2), (6,)]
    assert [a.shape for label, a in shape_probes(np.zeros(6, np.float32)) if label == "same byte size"] == [(6, 1)]


def _add(a_shape, b_shape):
    r = np.random.default_rng(0)
    return Call("aten.add.Tensor", (Tensor(r.standard_normal(a_shape).astype(np.float32)), Tensor(r.standard_normal(b_shape).astype(np.float32))), {"alpha": 1})


def test_each_operand_takes_each_layout_in_turn_the_others_contiguous():
    applied = [("broadcast", _add((3, 4), (4,)), None), ("same shape", _add((2, 3, 4, 5), (2, 3, 4, 5)), None)]
    targets = [(label, layout) for label, _, _, layout in _layout_targets(applied)]
    assert ("broadcast", ("transposed", "contiguous")) in targets  # operand 0 of the first call allows it
    assert ("same shape", ("contiguous", "transposed")) in targets  # operand 1 only in the second
    assert ("same shape", ("contiguous", "channels_last")) in targets and ("same shape", ("channels_last", "contiguous")) in targets
    assert all(sum(name != "contiguous" for name in layout) == 1 for _, layout in targets)


@pytest.mark.slow
def test_a_layout_failure_replays_in_its_layout_and_fails(tmp_path):
    spec = specs.load().op("aten.add.Tensor")
    call = _add((4, 5), (4, 5))
    layout = ("contiguous", "transposed")
    backend = f"{SEEDED}:add_reads_second_operand_as_contiguous"
    replay.save(tmp_path / "ex", call, case.expected_outputs(spec, call), message="it differs", backend=backend, layout=layout)
    saved = replay.load(tmp_path / "ex")
    assert saved.layout == layout
    from conformance.discovery import load

    defective = load(backend)
    assert not replay.rerun(saved, defective, out=open("/dev/null", "w"))
    done = subprocess.run([sys.executable, "-m", "conformance", "replay", str(tmp_path / "ex")], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode != 0 and "layout:  input 1 transposed" in done.stdout, done.stdout + done.stderr
    replay.save(tmp_path / "plain", call, case.expected_outputs(spec, call), backend=backend)  # contiguous: it passes
    assert replay.load(tmp_path / "plain").layout == "contiguous"
    assert replay.rerun(replay.load(tmp_path / "plain"), defective, out=open("/dev/null", "w"))


def test_weights_switch_between_program_constants_and_inputs():
    r = np.random.default_rng(1)
    call = Call("aten.addmm.default", tuple(Tensor(r.standard_normal(s).astype(np.float32)) for s in ((3,), (2, 4), (4, 3))), {})
    const = with_weights(call, ["mat2"], "parameter")
    assert [t.role for t in const.tensors()] == ["input", "input", "parameter"]
    assert with_weights(const, ["mat2"], "parameter") is None  # already constants: no second case
    assert [t.role for t in with_weights(const, ["mat2"], "input").tensors()] == ["input"] * 3
    out = case.run(__import__("reference_backend").backend_under_test(), specs.load().op("aten.addmm.default"), const)
    assert out.ok and any(s.kind.name == "PARAMETER" for s in out.program.exported.graph_signature.input_specs)


def test_every_spec_weight_names_a_tensor_argument_of_its_op():
    spec = specs.load()
    marked = {name: op.weights for name, op in spec.ops.items() if op.weights}
    assert {"aten.addmm.default", "aten.linear.default", "aten.convolution.default", "aten.native_layer_norm.default"} <= set(marked)
    for name, weights in marked.items():
        arguments = {a.name: str(a.type) for a in resolve_op(name)._schema.arguments}
        for w in weights:
            assert w in arguments and "Tensor" in arguments[w], (name, w, arguments)


def test_a_spec_weights_field_must_be_argument_names(tmp_path):
    import shutil

    root = tmp_path / "specs"
    shutil.copytree(specs.specs_root(), root)
    path = root / "ops" / "linalg.toml"
    path.write_text(path.read_text().replace('weights = ["mat2"]', 'weights = ["mat2", "mat2"]', 1))
    with pytest.raises(specs.SpecError, match=r"\[aten\.mm\.default\]\.weights names \"mat2\" twice") as caught:
        specs.load(root)
    assert str(path) in str(caught.value)


def test_xnnpack_declares_its_single_tensor_cat_refusal():
    from backend_adapters._claims import load

    manifest = load("executorch-xnnpack").manifest()
    one = Call("aten.cat.default", ([Tensor(np.zeros((3, 4), np.float32))], -1))
    two = Call("aten.cat.default", ([Tensor(np.zeros((3, 4), np.float32)), Tensor(np.ones((3, 4), np.float32))], -1))
    assert "one-tensor list" in one.features() and "one-tensor list" not in two.features()
    assert manifest.declared_refusal("aten.cat.default", one.features()) == "one-tensor list"
    assert manifest.declared_refusal("aten.cat.default", two.features()) is None
