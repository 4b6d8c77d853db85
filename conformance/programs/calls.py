"""The programs of single calls, with their inputs: what the NUM check hands a backend."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from conformance.api.tensors import to_torch
from conformance.call import Call, Tensor
from conformance.compat import torch as compat_torch
from conformance.programs.build import build_program, export_call
from conformance.programs.cache import ProgramCache
from conformance.programs.eager import EagerOutputs, eager_describes_outputs
from conformance.programs.graphs import output_meta
from conformance.programs.operators import HarnessError, resolve_op, schema_args


@dataclass
class Program:
    """An exported program ready for a backend, with the inputs of one call."""

    exported: Any
    """The ExportedProgram (a private copy: a backend may not mutate it, and if it does, only this copy)."""
    inputs: list[np.ndarray]
    """Runtime inputs, in the program's input order."""
    op: str | None = None
    """The op under test, for single-op programs."""
    description: str = ""
    outputs_from_eager: bool = False
    """The outputs' ``meta["val"]`` were described from eager's outputs, not computed by PyTorch's
    meta kernel (``build_program(call, like=...)``): the same program wherever the two agree, which
    ``meta_program`` decides when a verdict depends on it."""

    def torch_inputs(self) -> list[Any]:
        return [to_torch(a) for a in self.inputs]


def program_for(
    call: Call, *, dynamic: bool = True, cache: ProgramCache | None = None, export: bool = False, like: EagerOutputs | None = None
) -> Program:
    """The program that makes ``call`` on its inputs (parameters baked in with the call's values).

    By default the single-op program is built directly (``build_program``): the same
    graph, signature and metadata torch.export produces for a module making this
    call, in a few milliseconds instead of tens to hundreds, so every drawn example
    gets an exact, static program. ``export=True`` goes through torch.export (cached
    by structure, dynamic dims where they fit: ``export_call``), which is also the fallback for a call
    the builder cannot express. ``like``: eager's outputs of the call, to describe the program's
    outputs from (``build_program``).
    """
    inputs = [t.value for t in call.inputs()]
    if not export:
        from_eager = (
            like is not None and compat_torch.builds_programs() and eager_describes_outputs(resolve_op(call.op), like.returned)
        )
        exported = build_program(call, like=like.returned if from_eager else None)
        return Program(exported, inputs, op=call.op, description=call.describe(), outputs_from_eager=from_eager)
    exported = export_call(call, dynamic=dynamic, cache=cache)
    return Program(exported, inputs, op=call.op, description=call.describe())


def meta_program(program: Program, call: Call) -> Program | str:
    """The program PyTorch's meta kernel gives for ``call`` when ``program`` describes its outputs
    from eager's (``Program.outputs_from_eager``): ``program`` itself where the two agree in every
    output's size, stride and dtype, else the program built by the meta kernel, or a string saying
    why there is none (the meta kernel refuses the call, or shapes its outputs unlike eager)."""
    if not program.outputs_from_eager:
        return program
    try:
        built = build_program(call)
    except Exception as exc:  # noqa: BLE001 - PyTorch's tracing refuses what eager computed
        return f"tracing refused a call eager computes: {exc}"
    ours, theirs = output_meta(program.exported), output_meta(built)
    if ours == theirs:
        return program
    if [s for s, _, _ in ours] != [s for s, _, _ in theirs]:
        return shapes_disagree([s for s, _, _ in theirs], [s for s, _, _ in ours])
    return Program(built, program.inputs, op=program.op, description=program.description)


def shapes_disagree(declared, eager) -> str:
    """Why a call is set aside when its program (PyTorch's meta kernel) declares output shapes
    ``declared`` and eager computes ``eager``."""
    return f"program declares {[tuple(s) for s in declared]}, eager gives {[list(s) for s in eager]}"


WEIGHT_ROLES = {"constants": "parameter", "inputs": "input"}
"""How the NUM check hands an op's weights (op spec ``weights``) in its ``weights`` case: as program
constants (parameters of the module, lifted by torch.export as PARAMETER inputs of the program, so a
backend reads them from named data at init) or as runtime inputs."""


def with_weights(call: Call, names: Sequence[str], role: str) -> Call | None:
    """``call`` with the tensor arguments named ``names`` (ATen schema names: ``mat2``, ``weight``)
    in ``role`` ("parameter": a program constant; "input"), the values unchanged; None when the call
    has none of them as a tensor, or all of them are in ``role`` already."""
    schema = schema_args(resolve_op(call.op))
    position = {a.name: i for i, a in enumerate(schema)}
    args, kwargs, changed = list(call.args), dict(call.kwargs), False
    for name in names:
        if name not in position:
            raise HarnessError(f"{call.op} has no argument {name!r} (op spec weights); its arguments: {[a.name for a in schema]}")
        i = position[name]
        holder, key = (args, i) if i < len(args) else (kwargs, name)
        tensor = holder[key] if (i < len(args) or name in kwargs) else None
        if isinstance(tensor, Tensor) and tensor.role != role:
            holder[key] = Tensor(tensor.value, role)
            changed = True
    return Call(call.op, tuple(args), kwargs) if changed else None
