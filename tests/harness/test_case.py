"""The case core (conformance.case) and the replay format (conformance.replay): one call, one verdict,
whoever runs it; a saved example replays from anywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch

from conformance import case, replay
from conformance import specs as spec_module
from conformance.call import Call, Tensor
from conformance.compat import torch as compat_torch
from conformance.discovery import load
from conformance.report.model import load_report
from conformance.results import Category

ROOT = Path(__file__).resolve().parents[2]
SEEDED = ROOT / "tests" / "seeded" / "defects.py"
DESCRIBED_FROM_EAGER = pytest.mark.skipif(
    not compat_torch.builds_programs(), reason="programs are exported (compat.torch.builds_programs): none is described from eager's outputs")


@pytest.fixture(scope="module")
def relu():
    call = Call("aten.relu.default", (Tensor(np.array([[np.nan, -1.0, 2.0], [0.5, -0.0, 3.0]], np.float32)),))
    return call, spec_module.load().op(call.op)


def test_the_same_call_passes_on_the_reference_and_mismatches_on_a_seeded_defect(relu):
    call, spec = relu
    good = case.run(load("reference"), spec, call)
    assert good.category is Category.PASS and good.ok and good.ran and good.message == ""
    assert [c.ok for c in good.comparisons] == [True] and good.blob and good.outputs is not None

    bad = case.run(load(f"{SEEDED}:relu_nan_is_zero"), spec, call)
    assert bad.category is Category.MISMATCH and bad.stage is None
    assert bad.message.startswith(f"{call.describe()} output 0: ") and "NaN" in bad.message
    assert bad.differing is bad.comparisons[0] and bad.stats == bad.comparisons[0].comparison.stats()
    np.testing.assert_array_equal(bad.expected[0], good.expected[0])
    failure = bad.failure("[edge] ", case="edge", layout="contiguous")
    assert failure.message == f"[edge] {bad.message}" and failure.stats["case"] == "edge"


def test_an_earlier_runs_expected_program_and_blob_are_reused(relu):
    call, spec = relu
    backend = load("reference")
    first = case.run(backend, spec, call)
    again = case.run(backend, spec, call, expected=first.expected, program=first.program, preprocessed=first.preprocessed, layout="transposed")
    assert again.ok and again.program is first.program and again.preprocessed is first.preprocessed
    broken = case.run(backend, spec, call, expected=first.expected, program=first.program, preprocessed=first.preprocessed, blob=b"not a blob")
    assert broken.blob == b"not a blob" and broken.stage == "init" and not broken.ok, broken
    assert broken.message == f"{call.describe()}: {broken.detail}"


def test_eager_refusing_the_call_is_a_harness_error_before_the_backend(relu):
    _, spec = relu
    call = Call("aten.relu.default", (Tensor(np.zeros((2,), np.float32)), Tensor(np.zeros((2,), np.float32))))
    outcome = case.run(load("reference"), spec, call)
    assert outcome.category is Category.HARNESS_ERROR and not outcome.ran
    assert outcome.message.startswith("eager refused the drawn call aten.relu.default(")


def test_save_and_load_keep_bfloat16_and_the_backend_as_given(tmp_path, monkeypatch):
    x = np.array([1.5, -2.0], ml_dtypes.bfloat16)
    call = Call("aten.neg.default", (Tensor(x),))
    monkeypatch.chdir(tmp_path)
    replay.save(tmp_path / "ex", call, [-x], [x], b"blob", "it differs", backend="backends.py:make")
    saved = replay.load(tmp_path / "ex")
    assert saved.format == replay.FORMAT and saved.message == "it differs" and saved.blob == b"blob"
    assert saved.backend == replay.BackendSource("path", f"{tmp_path / 'backends.py'}:make")
    assert saved.expected[0].dtype == ml_dtypes.bfloat16 and saved.actual[0].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(saved.expected[0], -x)
    np.testing.assert_array_equal(saved.inputs[0], x)
    replay.save(tmp_path / "ex", call, [-x], None, None, "refused", backend="reference")  # an example saved over another
    saved = replay.load(tmp_path / "ex")
    assert saved.blob is None and saved.actual is None and saved.backend == replay.BackendSource("entry point", "reference")
    assert replay.BackendSource.of("pkg.mod:make") == replay.BackendSource("module", "pkg.mod:make")


def test_an_older_example_finds_its_backend_in_backend_txt(tmp_path):
    call = Call("aten.neg.default", (Tensor(np.array([1.0], np.float32)),))
    example = tmp_path / "out" / "my_backend" / "replays" / "NUM-001-aten.neg.default-float32"
    replay.save(example, call, [np.array([-1.0], np.float32)], message="old")
    document = json.loads((example / "call.json").read_text())
    (example / "call.json").write_text(json.dumps({"call": document["call"], "message": document["message"]}))  # the old layout
    assert replay.load(example).backend == replay.BackendSource("directory name", "my_backend")
    (example.parent / replay.LEGACY_BACKEND_FILE).write_text("/abs/backends.py:make\n")
    saved = replay.load(example)
    assert saved.backend.name == "/abs/backends.py:make" and saved.format == 1
    with pytest.raises(replay.NoSavedExample, match="holds no saved example"):
        replay.load(tmp_path)


@pytest.mark.slow
def test_an_example_certify_saved_for_a_relative_path_backend_replays_from_another_directory(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    certify = [sys.executable, "-m", "conformance", "certify", "tests/seeded/defects.py:relu_nan_is_zero", "--profile", "seeded",
               "--ops", "aten.relu.default", "--dtypes", "float32", "-k", "NUM", "--workers", "0", "--skip-perf", "--output", str(out)]  # fmt: skip
    done = subprocess.run(certify, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    report = load_report(next(out.glob("*/report.json")))
    (num,) = [r for r in report["results"] if r["clause"] == "NUM-001"]
    assert num["category"] == "MISMATCH" and num["replay"].startswith("python -m conformance replay ")
    directory = Path(num["replay"].split(" replay ", 1)[1])
    saved = json.loads((directory / "call.json").read_text())
    assert saved["format"] == replay.FORMAT and saved["backend"] == {"kind": "path", "value": f"{SEEDED}:relu_nan_is_zero"}
    assert saved["specs"]["root"] == str(ROOT / "specs") and len(saved["specs"]["digest"]) == 64

    again = subprocess.run([sys.executable, "-m", "conformance", "replay", str(directory)], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 1, again.stdout[-2000:] + again.stderr[-2000:]
    assert "backend: seeded-relu-nan-is-zero" in again.stdout and "output 0: MISMATCH" in again.stdout and "NaN" in again.stdout


def test_a_saved_example_replays_under_the_spec_it_ran_under(tmp_path, relu):
    import io
    import shutil

    call, spec = relu
    ran_under = spec_module.load(shutil.copytree(spec_module.specs_root(), tmp_path / "specs"))
    replay.save(tmp_path / "example", call, case.expected_outputs(spec, call), backend="reference", specs=ran_under)
    saved = replay.load(tmp_path / "example")
    assert saved.specs_root == tmp_path / "specs" and saved.specs_digest == ran_under.digest
    assert replay.replay_specs_root(saved) == tmp_path / "specs"
    out = io.StringIO()
    assert replay.rerun(saved, load("reference"), out) and "spec:" not in out.getvalue()

    with (tmp_path / "specs" / "profiles.toml").open("a") as f:
        f.write("\n# edited after the run\n")  # the same directory, another spec: replay says so
    spec_module.load.cache_clear()
    out = io.StringIO()
    assert replay.rerun(saved, load("reference"), out)
    assert f"is not the spec the example ran under ({tmp_path / 'specs'}, digest {ran_under.digest[:16]})" in out.getvalue()

    spec_module.use(spec_module.specs_root())  # --specs given: that one, whatever the example recorded
    try:
        assert replay.replay_specs_root(saved) is None
    finally:
        spec_module.use(None)
    shutil.rmtree(tmp_path / "specs")  # the directory is gone: the installed spec
    assert replay.replay_specs_root(saved) is None


# -- outputs described from eager's, and the meta kernel asked only for a verdict that is not PASS --------


def _eager_returning(monkeypatch, make):
    """Make eager return ``make(what it returned)`` as the description of the program's outputs."""
    from conformance import programs

    real = programs.eager_outputs
    monkeypatch.setattr(case.expected, "eager_outputs", lambda call: programs.EagerOutputs(make(real(call).returned), real(call).arrays))


@DESCRIBED_FROM_EAGER
def test_a_pass_on_outputs_described_from_eager_never_asks_the_meta_kernel(relu, monkeypatch):
    from conformance import programs
    from conformance.programs.graphs import output_meta

    call, spec = relu
    asked = []
    monkeypatch.setattr(case.running, "meta_program", lambda *a: asked.append(a) or pytest.fail("meta kernel asked on a pass"))
    outcome = case.run(load("reference"), spec, call)
    assert outcome.ok and outcome.program.outputs_from_eager and not asked
    built = programs.build_program(call)  # the meta kernel's program describes the same outputs
    assert output_meta(outcome.program.exported) == output_meta(built)


@DESCRIBED_FROM_EAGER
def test_a_failure_on_eager_strides_the_meta_kernel_does_not_give_runs_again_on_the_meta_kernels_program(relu, monkeypatch):
    call, spec = relu
    _eager_returning(monkeypatch, lambda t: t.t().contiguous().t())  # eager's values, column-major
    assert case.run(load("reference"), spec, call).ok  # a pass stands on either program
    bad = case.run(load(f"{SEEDED}:relu_nan_is_zero"), spec, call)
    assert bad.category is Category.MISMATCH and not bad.program.outputs_from_eager
    out = bad.program.exported.graph.output_node().args[0][0].meta["val"]
    assert tuple(out.stride()) == (3, 1)  # the meta kernel's strides, not eager's (1, 2)


@DESCRIBED_FROM_EAGER
def test_a_failure_where_the_meta_kernel_shapes_unlike_eager_or_refuses_is_set_aside(relu, monkeypatch):
    from conformance import programs
    from conformance.programs import build, calls

    call, spec = relu
    # as if the meta kernel disagreed with eager on the shape
    monkeypatch.setattr(build, "fake_outputs", lambda mode, *_: compat_torch.fake_like(mode, torch.empty(6)))
    assert case.run(load("reference"), spec, call).ok  # the meta kernel is not asked on a pass
    bad = case.run(load(f"{SEEDED}:relu_nan_is_zero"), spec, call)
    assert bad.category is Category.SKIP and bad.detail == "program declares [(6,)], eager gives [[2, 3]]", bad.detail
    monkeypatch.undo()
    real = programs.build_program

    def meta_refuses(call, *, like=None):
        if like is None:
            raise RuntimeError("no meta kernel for this call")
        return real(call, like=like)

    monkeypatch.setattr(calls, "build_program", meta_refuses)
    refused = case.run(load(f"{SEEDED}:relu_nan_is_zero"), spec, call)
    assert refused.category is Category.SKIP and refused.detail.startswith("tracing refused a call eager computes: no meta kernel")
    assert case.run(load("reference"), spec, call).ok  # the meta kernel is not asked on a pass


@pytest.mark.slow
def test_a_num_check_whose_every_call_was_set_aside_is_a_harness_error_not_a_pass(tmp_path):
    """Seen on aten.nonzero.default before its programs went through torch.export: the builder's
    FakeTensorMode refused every call, the check compared 0 programs and reported PASS."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "conformance", "certify", "tests/harness/untraceable.py:backend", "--profile", "full",
         "--ops", "aten.add.Tensor", "--dtypes", "float32", "--output", str(tmp_path), "--workers", "0", "--skip-perf",
         "--", "-k", "NUM_001"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    (report,) = tmp_path.glob("*/report.json")
    (num,) = [r for r in load_report(report)["results"] if r["clause"] == "NUM-001"]
    assert num["category"] == "HARNESS_ERROR", num
    assert "no call reached the backend" in num["message"] and "test rig" in num["message"]
