"""The spec of record and the reference agree: same ops, kernels shaped like their schemas."""

from __future__ import annotations

import inspect

import pytest

from conformance import specs
from conformance.programs import core_aten
from conformance.programs.operators import resolve_op
from conformance.strategies import SIGNATURES, calls
from reference_backend import supported_ops
from reference_backend.kernels import EDGE_ALIASES, KERNELS

SPECS = specs.load()


def test_every_specified_op_has_a_kernel_and_every_kernel_is_specified():
    specified = SPECS.all_op_names()
    missing = sorted(specified - supported_ops())
    unspecified = sorted(supported_ops() - specified)
    assert not missing, f"spec'd ops without a reference kernel: {missing}"
    assert not unspecified, f"reference kernels without an op spec: {unspecified}"


def test_edge_spellings_are_declared_on_the_spec_of_the_op_they_compute():
    for alias, core in EDGE_ALIASES.items():
        assert alias in SPECS.op(core).edge, f"{alias} computes {core} but is not listed in that op's edge field"


def test_every_core_aten_overload_is_specified_or_out_of_scope_with_a_reason():
    """Issue 14: the core set of the pinned torch, read from torch.Tag.core, is covered whole."""
    core = core_aten()
    assert len(core) > 150, f"torch.Tag.core found only {len(core)} overloads: is the schema walk broken?"
    specified = frozenset(SPECS.ops)
    uncovered = sorted(core - specified - set(SPECS.out_of_scope))
    assert not uncovered, f"core ATen overloads neither spec'd (specs/ops/) nor out of scope (specs/scope.toml): {uncovered}"
    not_core = sorted(set(SPECS.out_of_scope) - core)
    assert not not_core, f"specs/scope.toml lists overloads that are not core ATen: {not_core}"


def test_the_core_flag_of_every_op_spec_is_torch_tag_core():
    """The core-fp32 profile means PyTorch's core set: ``core = true`` exactly on torch.Tag.core."""
    core = core_aten()
    flagged = {name for name, spec in SPECS.ops.items() if spec.core}
    assert not flagged - core, f"core = true on overloads torch does not tag core: {sorted(flagged - core)}"
    unflagged = (set(SPECS.ops) & core) - flagged
    assert not unflagged, f"core ATen overloads without core = true: {sorted(unflagged)}"


def test_every_signature_a_spec_names_exists():
    calls(SPECS.op("aten.add.Tensor"), "float32")  # loads the signature modules
    unknown = sorted({spec.signature for spec in SPECS.ops.values()} - set(SIGNATURES))
    assert not unknown, f"op specs name undefined signatures: {unknown}"


# Placement keywords are dropped by preprocess; a kernel never sees them.
_PLACEMENT = {"device", "layout", "pin_memory", "memory_format", "non_blocking"}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_parameters_are_the_schema_arguments(name):
    schema = resolve_op(name)._schema
    expected = [a.name for a in schema.arguments if a.name not in _PLACEMENT]
    params = inspect.signature(KERNELS[name]).parameters.values()
    names = [p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    assert names == expected, f"{name}: kernel takes {names}, the ATen schema has {expected}"
