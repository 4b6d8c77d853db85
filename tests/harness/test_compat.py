"""Every private internal of torch, hypothesis and ExecuTorch sits behind conformance.compat (or
backend_adapters.executorch_compat) with a public fallback, and the fallbacks give the same verdicts.

(a) With CONFORMANCE_COMPAT=public each compat function takes its fallback: the private attribute
    it would use is made to raise, and the function still answers (and answers right).
(b) The reference certified with every fallback forced gives the same category for every check as
    with the private routes, on a profile that goes through each route of the case path: built and
    exported programs (a data-dependent size, a Scalar output, a mutated argument, decompositions run
    on meta tensors, a kernel that reads the device), the directed draws and the hypothesis draws,
    on a sample of core-fp32's NUM checks (the whole profile: docs/design.md, "Compatibility").
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conformance import compat, programs
from conformance.api.ops import op_name
from conformance.call import Call, Tensor
from conformance.compat import hypothesis as compat_hypothesis
from conformance.compat import torch as compat_torch
from conformance.programs import build, fake
from conformance.programs.operators import resolve_op
from conformance.report.model import load_report

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def public(monkeypatch):
    """CONFORMANCE_COMPAT=public for one test, with every route decided afresh before and after."""
    compat._decided.cache_clear()
    monkeypatch.setenv(compat.ENV, "public")
    yield
    monkeypatch.delenv(compat.ENV)
    compat._decided.cache_clear()


def _raises(*_, **__):
    raise AssertionError("a private route ran although CONFORMANCE_COMPAT=public")


def _call(op="aten.add.Tensor", *args):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    return Call(op, args or (Tensor(x), Tensor(x + 1)), {})


# ---------------------------------------------------------------------------------------------
# (a) each fallback, with its private route made to fail


def test_the_mode_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv(compat.ENV, raising=False)
    assert compat.mode() == "auto" and not compat.forced_public()
    monkeypatch.setenv(compat.ENV, " Public ")
    assert compat.forced_public()
    monkeypatch.setenv(compat.ENV, "private")
    with pytest.raises(compat.CompatModeError, match="CONFORMANCE_COMPAT='private': expected one of auto, public"):
        compat.mode()


def test_versions_are_compared_on_their_release():
    assert compat.version_tuple("2.13.0+cpu") == (2, 13, 0)
    assert compat.version_tuple("2.14.0a0+git1234") == (2, 14, 0)
    assert compat.within("2.13.1", (2, 13), (2, 14)) and not compat.within("2.14.0.dev20261101", (2, 13), (2, 14))
    assert compat.within("6.170.17", (6, 170), (6, 171)) and not compat.within("6.169.4", (6, 170), (6, 171))


def test_an_untested_version_takes_every_fallback(monkeypatch):
    compat._decided.cache_clear()
    compat_torch._tested.cache_clear()
    compat_hypothesis._tested.cache_clear()
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    monkeypatch.setattr(__import__("hypothesis"), "__version__", "7.0.0")
    try:
        assert not compat_torch.builds_programs() and not compat_torch.fast_assembly()
        assert compat_torch.meta_kernel(torch.ops.aten.relu.default, fake.fake_mode(), True) is None
        assert compat_hypothesis.plain_just(__import__("hypothesis").strategies.just(1)) == (False, None)
    finally:
        monkeypatch.undo()
        compat._decided.cache_clear()
        compat_torch._tested.cache_clear()
        compat_hypothesis._tested.cache_clear()


def test_a_probe_that_finds_the_internals_changed_takes_the_fallback(monkeypatch, caplog):
    import torch._subclasses.fake_impls as fake_impls

    compat._decided.cache_clear()
    monkeypatch.delattr(fake_impls, "op_implementations_checks")
    try:
        with caplog.at_level("WARNING", logger="conformance.compat"):
            assert compat_torch.meta_kernel(torch.ops.aten.relu.default, fake.fake_mode(), True) is None
        assert compat.forced_public() or "compat.torch.meta_kernel: the public fallback" in caplog.text
    finally:
        monkeypatch.undo()
        compat._decided.cache_clear()


def test_build_program_exports_instead_of_building(public, monkeypatch):
    monkeypatch.setattr(build, "build_in_mode", _raises)
    monkeypatch.setattr(compat_torch, "fake_tensor_mode", _raises)
    assert not compat_torch.builds_programs()
    call = _call()
    program = programs.build_program(call)
    assert [op_name(n.target) for n in program.graph.nodes if n.op == "call_function"] == ["aten.add.Tensor"]
    ready = programs.program_for(call, like=programs.eager_outputs(call))
    assert not ready.outputs_from_eager  # the outputs are torch.export's, never described from eager's
    assert programs.meta_program(ready, call) is ready


def test_exported_program_is_constructed_plainly(public, monkeypatch):
    import copy

    import torch.fx._lazy_graph_module as lazy
    from torch.export import ExportedProgram

    monkeypatch.setattr(lazy, "_LazyGraphModule", _raises)
    validated = []
    real = ExportedProgram.validate
    monkeypatch.setattr(ExportedProgram, "validate", lambda self: validated.append(self) or real(self))
    exported = copy.deepcopy(programs.build_program(_call()))
    rebuilt = compat_torch.exported_program(
        root=torch.nn.Module(), graph=exported.graph, graph_signature=exported.graph_signature,
        state_dict=exported.state_dict, range_constraints=exported.range_constraints,
        module_call_graph=exported.module_call_graph, example_inputs=exported.example_inputs, constants={},
    )  # fmt: skip
    assert validated and validated[-1] is rebuilt  # export's Verifier ran at construction
    assert "torch.ops.aten.add.Tensor" in rebuilt.graph_module.code


def test_a_batch_is_refused_so_each_call_runs_alone(public):
    with pytest.raises(programs.HarnessError, match="each call runs alone"):
        programs.batch_program([_call(), _call()])


def test_training_ir_verifiers_come_from_an_exported_program(public, monkeypatch):
    import torch._export.verifier as verifier

    real = verifier.TrainingIRVerifier
    compat_torch._exported_verifiers()  # torch.export reads the module's class too: export before the swap

    class Leaked(real):
        dialect = "LEAKED"

    monkeypatch.setattr(verifier, "TrainingIRVerifier", Leaked)
    assert compat_torch.training_ir_verifiers() == [real]


def test_meta_kernel_is_none(public, monkeypatch):
    import torch._subclasses.fake_impls as fake_impls

    monkeypatch.setattr(fake_impls, "op_implementations_checks", [(_raises, None)])
    for op in (torch.ops.aten.relu.default, torch.ops.aten.grid_sampler_2d.default):
        assert compat_torch.meta_kernel(op, fake.fake_mode(), True) is None


def test_size_oblivious_changes_nothing(public, monkeypatch):
    import torch.fx.experimental._config as fx_config

    monkeypatch.setattr(type(fx_config), "patch", _raises)
    with compat_torch.size_oblivious(True):
        pass


def test_aten_overload_names_from_public_namespaces(public, monkeypatch):
    monkeypatch.delenv(compat.ENV)
    compat._decided.cache_clear()
    private = compat_torch.aten_overload_names()
    monkeypatch.setenv(compat.ENV, "public")
    monkeypatch.setattr(torch._C, "_jit_get_all_schemas", _raises)
    found = compat_torch.aten_overload_names()
    core = {n for n in private if torch.Tag.core in resolve_op(n).tags}
    assert core and core <= found, sorted(core - found)  # every core overload (193 on torch 2.13)


def test_retrace_is_identity_is_false(public, monkeypatch):
    import torch._export.utils as export_utils

    monkeypatch.setattr(export_utils, "_is_cia_op", _raises)
    program = programs.build_program(_call())
    assert compat_torch.retrace_is_identity(program, None) is False


def test_the_public_helpers_for_executorch():
    from torch._export.verifier import SpecViolationError
    from torch.utils._sympy.numbers import int_oo
    from torch.utils._sympy.value_ranges import ValueRanges

    assert compat_torch.is_spec_violation(SpecViolationError("refused")) and not compat_torch.is_spec_violation(ValueError())
    assert compat_torch.is_unbounded(int_oo) and not compat_torch.is_unbounded(ValueRanges(0, 10).upper)
    bounded = compat_torch.value_range(2, 64)
    assert type(bounded) is ValueRanges and (bounded.lower, bounded.upper) == (2, 64)


def test_value_range_from_an_exported_program(public, monkeypatch):
    from torch.utils._sympy import value_ranges

    real = value_ranges.ValueRanges
    compat_torch._range_class()  # torch.export reads the module's class too: export before the swap

    class Leaked(real):
        pass

    monkeypatch.setattr(value_ranges, "ValueRanges", Leaked)
    bounded = compat_torch.value_range(0, 10)
    assert type(bounded) is real and (bounded.lower, bounded.upper) == (0, 10)


def test_without_redundant_retraces_leaves_the_program_alone(public):
    from backend_adapters import executorch_compat

    program = programs.build_program(_call())
    before = type(program)
    assert executorch_compat.without_redundant_retraces(program) is program and type(program) is before


def test_draw_only_global_constants_leaves_hypothesis_alone(public, monkeypatch):
    from hypothesis.internal.conjecture import providers

    def scan():
        raise AssertionError("not to be called here")

    monkeypatch.setattr(providers, "_get_local_constants", scan)
    assert compat_hypothesis.draw_only_global_constants() is False
    assert providers._get_local_constants is scan


@pytest.mark.slow
def test_draw_seeded_is_deterministic_through_given(public, monkeypatch):
    import hypothesis.control as control
    from hypothesis import strategies as st

    from conformance.specs import load
    from conformance.strategies import calls

    monkeypatch.setattr(control, "BuildContext", _raises)  # the engine holds its own reference
    strategy = st.lists(st.integers(-1000, 1000), min_size=3, max_size=8)
    draws = [compat_hypothesis.draw_seeded(lambda draw: draw(strategy), seed) for seed in (1, 1, 2, 3, 4)]
    assert draws[0] == draws[1] and len({tuple(d) for d in draws[1:]}) > 1
    spec = load().op("aten.add.Tensor")
    first = compat_hypothesis.draw_seeded(lambda draw: draw(calls(spec, "float32")), 7)
    again = compat_hypothesis.draw_seeded(lambda draw: draw(calls(spec, "float32")), 7)
    assert first.describe() == again.describe()
    assert all(np.array_equal(a.value, b.value, equal_nan=True) for a, b in zip(first.tensors(), again.tensors()))
    with pytest.raises(compat_hypothesis.NoDraw):
        compat_hypothesis.draw_seeded(lambda draw: draw(st.integers().filter(lambda _: False)), 1)


def test_plain_just_draws_every_strategy(public, monkeypatch):
    import hypothesis.strategies._internal.misc as misc
    from hypothesis import strategies as st

    just = st.just(3)
    monkeypatch.setattr(misc, "JustStrategy", _raises)
    assert compat_hypothesis.plain_just(just) == (False, None)


def test_without_database_key_leaves_the_test_alone(public):
    def test():
        pass

    assert compat_hypothesis.without_database_key(test) is test
    assert not hasattr(test, "_hypothesis_internal_database_key")


PRIVATE = re.compile(
    r"^hypothesis\.(internal|strategies\._internal|control)|_hypothesis_internal|"
    r"^torch\.(_subclasses|_decomp|_library|_export|fx\._lazy_graph_module|fx\.experimental\._config|utils\._sympy)|"
    r"^torch\._C\.(_jit_get_all_schemas|_dispatch)|_graph_namespace|_create_graph_module_for_export|exir\._serialize"
)
"""The private internals compat's routes use, as an import or an attribute chain spells them."""

SUBJECTS = {"backend_adapters/lazy.py", "backend_adapters/torchscript.py", "backend_adapters/aoti.py"}
"""Adapters whose subject is a private torch API (torch._lazy, torch._C._jit_to_backend, torch._inductor):
they certify that API itself (compat.torch's docstring)."""


def _private_uses(path: Path) -> list[str]:
    """Imports and attribute chains of ``path`` that name a private internal (docstrings and comments are
    not code), and assignments to an object's ``__class__``."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Attribute):
            names = [ast.unparse(node)]
        elif isinstance(node, ast.Assign):
            names = ["__class__ =" for t in node.targets if isinstance(t, ast.Attribute) and t.attr == "__class__"]
        found += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names if PRIVATE.search(n) or n == "__class__ ="]
    return found


@pytest.mark.slow
def test_no_module_outside_compat_reaches_a_private_internal():
    """The private internals of compat's routes appear nowhere else in the packages."""
    allowed = {ROOT / "conformance" / "compat", ROOT / "backend_adapters" / "executorch_compat.py"}
    found = []
    for folder in ("conformance", "reference_backend", "backend_adapters"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if not any(path == a or a in path.parents for a in allowed) and str(path.relative_to(ROOT)) not in SUBJECTS:
                found += _private_uses(path)
    assert not found, "\n".join(found)


def test_the_scan_finds_a_private_internal(tmp_path, monkeypatch):
    """The scan above is not blind: it sees an import, an attribute chain and a class swap, not a docstring."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    probe = tmp_path / "probe.py"
    probe.write_text('"""torch._decomp"""\nimport torch._subclasses.fake_tensor\nx = torch.fx._lazy_graph_module.X\nx.__class__ = int\n',
                     encoding="utf-8")
    assert {line.split(":")[1] for line in _private_uses(probe)} == {"2", "3", "4"}


# ---------------------------------------------------------------------------------------------
# (b) the reference's verdicts with every fallback forced

SAMPLE_OPS = (
    "aten.add.Tensor",  # broadcasting, the edge set's values
    "aten.convolution.default",  # parameters as program constants (the weights case)
    "aten.nonzero.default",  # a size computed from the data: unbacked symbol, range constraint, runtime asserts
    "aten._local_scalar_dense.default",  # a Scalar output
    "aten._native_batch_norm_legit.default",  # mutated running statistics: the training IR's verifier
    "aten.grid_sampler_2d.default",  # a torch._decomp decomposition run on meta tensors
    "aten._fft_r2c.default",  # a meta kernel that reads the device: under FakeTensorMode
    "aten.sum.dim_IntList",  # a reduction: the large_finite and dim cases
    "aten.max_pool2d_with_indices.default",  # hand-drawn shapes (pooling), two outputs
)
"""Ops of core-fp32 whose NUM checks go through every route of compat.torch's builder and both draw routes
of compat.hypothesis. The whole of core-fp32, certified in both modes, takes minutes more than this on 2
cores (docs/design.md, "Compatibility", has both runs); the contract's checks (PRE, RT, REG, DBG) are left
out here because no compat route but hypothesis' local constants is on their path."""

PROFILE = """\
[profile.compat-sample]
description = "A sample of core-fp32's NUM checks that goes through every compatibility route."
clauses = ["NUM-*"]
ops = {ops}
dtypes = ["float32"]
"""


def _certify(out: Path, profile: str, mode: str) -> tuple[dict[str, str], dict]:
    env = dict(os.environ, **{compat.ENV: mode})
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "certify", "reference", "--profile", profile, "--output", str(out),
         "--workers", "0", "--skip-perf", "--cache-dir", str(out / "cache")],
        capture_output=True, text=True, timeout=1500, env=env, cwd=out,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    document = load_report(out / "reference" / "report.json")
    return {r["id"]: r["category"] for r in document["results"]}, document


@pytest.mark.slow
def test_the_reference_gives_the_same_categories_with_every_fallback_forced(tmp_path):
    profile = tmp_path / "profiles.toml"
    profile.write_text(PROFILE.format(ops=json.dumps(list(SAMPLE_OPS))), encoding="utf-8")
    (tmp_path / "auto").mkdir()
    (tmp_path / "public").mkdir()
    private, _ = _certify(tmp_path / "auto", f"{profile}:compat-sample", "auto")
    public, document = _certify(tmp_path / "public", f"{profile}:compat-sample", "public")
    assert document["verdict"]["certified"], document["verdict"]
    assert sum(1 for i in public if "NUM_001" in i) == len(SAMPLE_OPS)
    assert public == private, {i: (private.get(i), public.get(i)) for i in set(private) | set(public) if private.get(i) != public.get(i)}
