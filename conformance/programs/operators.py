"""Operators by name, and what their schemas and tags say about a call of one.

The layer every other module of ``conformance.programs`` stands on: which overload a name is
(``resolve_op``), which are core ATen, which arguments an op writes, what its returns are.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from conformance.api.scalar_type import torch_dtype
from conformance.call import DTYPE_ATTRIBUTES
from conformance.compat import torch as compat_torch


class HarnessError(RuntimeError):
    """The harness could not build what a check needs. Never charged to the backend."""


_LIBRARIES = {"quantized_decomposed": "torch.ao.quantization.quantize_fx"}
"""Operator namespaces that torch.ops has only once a Python module has defined them (torch.library), and
a public module that defines them on import (quantize_fx imports torch.ao.quantization.fx._decomposed)."""


def resolve_op(name: str):
    """The overload named ``name`` (``aten.add.Tensor``); HarnessError where torch has none."""
    import importlib

    import torch

    namespace, op, overload = name.split(".")
    if namespace in _LIBRARIES:
        importlib.import_module(_LIBRARIES[namespace])
    try:
        return getattr(getattr(getattr(torch.ops, namespace), op), overload)
    except AttributeError:
        raise HarnessError(f"torch has no operator {name}") from None


@functools.cache
def core_aten() -> frozenset[str]:
    """Every overload of the installed torch tagged ``torch.Tag.core``, as ``aten.op.overload``.

    Read from every registered ``aten`` overload (``compat.torch.aten_overload_names``)."""
    import torch

    names = set()
    for name in compat_torch.aten_overload_names():
        try:
            overload = resolve_op(name)
        except HarnessError:
            continue
        if torch.Tag.core in overload.tags:
            names.add(name)
    return frozenset(names)


@functools.cache
def mutated_arguments(op) -> tuple[tuple[int, str], ...]:
    """(position, name) of each argument ``op`` writes in place without returning it (``Tensor(a!)``
    in its schema while no return aliases it): _native_batch_norm_legit's running statistics."""
    returned = {a for r in op._schema.returns if r.alias_info is not None for a in r.alias_info.before_set}
    return tuple(
        (i, a.name)
        for i, a in enumerate(op._schema.arguments)
        if a.alias_info is not None and a.alias_info.is_write and not set(a.alias_info.before_set) & returned
    )


def mutated_values(op, args: Sequence[Any], kwargs: dict) -> list[Any]:
    """The values of the arguments ``op`` mutates (``mutated_arguments``) in a call ``op(*args, **kwargs)``."""
    values = (args[i] if i < len(args) else kwargs.get(name) for i, name in mutated_arguments(op))
    return [v for v in values if v is not None]


def program_results(returned: Any, mutated: Sequence[Any]) -> Any:
    """What a single-op program returns for a call that returned ``returned`` and mutated ``mutated``
    (``mutated_values``): the op's outputs without those it leaves undefined (None, an output_mask
    entry that is false), then the mutated arguments, whose new values are results of the call as
    much as its outputs (torch.export keeps the in-place op and returns its argument's placeholder).
    Anything else is returned as the op returned it."""
    undefined = isinstance(returned, (list, tuple)) and any(r is None for r in returned)
    if not mutated and not undefined:
        return returned
    kept = [r for r in returned if r is not None] if isinstance(returned, (list, tuple)) else [returned]
    return (*kept, *mutated)


def dtypes_as_torch(kwargs: dict) -> dict:
    """``kwargs`` with the dtype attributes a Call spells by name as torch dtypes."""
    return {k: torch_dtype(v) if k in DTYPE_ATTRIBUTES and isinstance(v, str) else v for k, v in kwargs.items()}


@dataclass(frozen=True)
class SchemaArg:
    """One argument of an op's schema, read once (each read of ``op._schema`` builds new objects)."""

    name: str
    kwarg_only: bool
    has_default: bool
    default: Any


@functools.cache
def schema_args(op) -> tuple[SchemaArg, ...]:
    """``op``'s arguments in schema order."""
    return tuple(
        SchemaArg(a.name, a.kwarg_only, a.has_default_value(), a.default_value if a.has_default_value() else None)
        for a in op._schema.arguments
    )


@functools.cache
def scalar_returns(op) -> tuple[bool, ...]:
    """Which of ``op``'s returns are Python numbers (Scalar, int, float, bool, SymInt in its schema), not
    tensors: a program returns them as scalar outputs (Double, Int, Bool EValues)."""
    return tuple(str(r.type) in ("number", "int", "float", "bool", "SymInt") for r in op._schema.returns)


@functools.cache
def returns_data_dependent_scalar(op) -> bool:
    """Whether ``op`` returns a Scalar read from its input's data (_local_scalar_dense): its fake value
    is an unbacked symbol, which only a FakeTensorMode with a ShapeEnv can make."""
    import torch

    return (
        isinstance(op, torch._ops.OpOverload)
        and torch.Tag.data_dependent_output in op.tags
        and [str(r.type) for r in op._schema.returns] == ["number"]
    )  # "Scalar" in the schema's text


@functools.cache
def outputs_follow_from_inputs(op) -> bool:
    """An ATen overload (not a prim) whose outputs follow from its inputs' metadata and arguments:
    not data-dependent, random or an in-place view, no device or out argument, no view returned."""
    import torch

    if not isinstance(op, torch._ops.OpOverload) or "prims::" in op._schema.name:
        return False
    if any(
        tag in op.tags
        for tag in (
            torch.Tag.dynamic_output_shape,
            torch.Tag.data_dependent_output,
            torch.Tag.nondeterministic_seeded,
            torch.Tag.inplace_view,
        )
    ):
        return False
    if any(a.name in ("device", "out") for a in op._schema.arguments):
        return False
    return all(r.alias_info is None for r in op._schema.returns)


@functools.cache
def returns_fresh_tensors(op) -> bool:
    """Whether ``op`` returns new tensors whose sizes follow from its inputs' sizes and its arguments:
    not a view or an in-place op (those share their input's storage), not data-dependent, not random."""
    if not outputs_follow_from_inputs(op):
        return False
    if any(a.alias_info is not None for a in op._schema.arguments):
        return False
    return all(str(r.type) in ("Tensor", "Tensor[]") for r in op._schema.returns)
