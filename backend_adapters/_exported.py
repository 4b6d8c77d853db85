"""What the torch.lazy, AOTInductor and torch-eager adapters share: an ExportedProgram's calling convention.

These backends run a whole ``torch.export`` program, so ``execute`` checks its
arguments against the program's own signature (user inputs: dtype, rank, static
sizes, one value per symbolic size; user outputs: count) and copies the results
into the pre-allocated outputs. Nothing here knows about a particular backend.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from conformance.api import BackendError, Error, EValue, resize_tensor
from conformance.api.tensors import to_numpy


@dataclass(frozen=True)
class TensorSpec:
    dtype: Any
    """torch dtype."""
    shape: tuple[Any, ...]
    """Static sizes as int, symbolic ones as their sympy symbol (str)."""

    def describe(self) -> str:
        return f"{str(self.dtype).removeprefix('torch.')}{list(self.shape)}"


@dataclass(frozen=True)
class Signature:
    inputs: tuple[TensorSpec, ...]
    outputs: int
    ranges: dict
    """symbol -> (lower, upper or None)."""


def signature(program) -> Signature:
    """User inputs and output count of an ExportedProgram, from its placeholders' example values."""
    from torch.export.graph_signature import InputKind

    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    specs = []
    for spec in program.graph_signature.input_specs:
        if spec.kind is not InputKind.USER_INPUT:
            continue
        val = nodes[spec.arg.name].meta.get("val")
        if val is None or not hasattr(val, "shape"):
            raise BackendError(Error.NotSupported, f"input {spec.arg.name} is not a tensor; only tensor inputs are supported")
        shape = tuple(s if isinstance(s, int) else str(s.node.expr) for s in val.shape)
        specs.append(TensorSpec(val.dtype, shape))
    ranges = {}
    for symbol, vr in program.range_constraints.items():
        lo = int(vr.lower) if getattr(vr.lower, "is_Integer", False) else 0
        hi = int(vr.upper) if getattr(vr.upper, "is_Integer", False) else None
        ranges[str(symbol)] = (lo, hi)
    return Signature(tuple(specs), len(program.graph_signature.user_outputs), ranges)


def split_args(sig: Signature, args: list[EValue]) -> tuple[list[np.ndarray], list[EValue]]:
    """Inputs (validated against ``sig``) and output EValues; BackendError(InvalidArgument) otherwise."""
    want = len(sig.inputs) + sig.outputs
    if len(args) != want:
        raise BackendError(
            Error.InvalidArgument,
            f"execute got {len(args)} argument(s); this program takes {len(sig.inputs)} input(s) and {sig.outputs} output(s)",
        )
    inputs = []
    bound: dict[str, int] = {}
    for i, (spec, arg) in enumerate(zip(sig.inputs, args)):
        value = getattr(arg, "value", None)
        if not isinstance(value, np.ndarray):
            raise BackendError(Error.InvalidArgument, f"input {i} is {type(value).__name__}, expected a tensor {spec.describe()}")
        got = _torch_dtype(value.dtype)
        if got != spec.dtype:
            raise BackendError(Error.InvalidArgument, f"input {i} has dtype {got}, the program expects {spec.describe()}")
        if value.ndim != len(spec.shape):
            raise BackendError(Error.InvalidArgument, f"input {i} has shape {list(value.shape)}, the program expects {spec.describe()}")
        for d, (size, declared) in enumerate(zip(value.shape, spec.shape)):
            if isinstance(declared, int):
                if size != declared:
                    raise BackendError(
                        Error.InvalidArgument, f"input {i} has shape {list(value.shape)}, the program expects {spec.describe()}"
                    )
                continue
            if bound.setdefault(declared, size) != size:
                raise BackendError(
                    Error.InvalidArgument,
                    f"input {i} dim {d} is {size} but {declared} is already {bound[declared]} from another input",
                )
            lo, hi = sig.ranges.get(declared, (0, None))
            if size < lo or (hi is not None and size > hi):
                raise BackendError(Error.InvalidArgument, f"input {i} dim {d} = {size} is outside {declared}'s range [{lo}, {hi}]")
        inputs.append(value)
    return inputs, list(args[len(sig.inputs) :])


def _torch_dtype(dtype: np.dtype):
    """The torch dtype of a NumPy one (ml_dtypes' bfloat16 and float8 included), None if torch has none."""
    from conformance.api.scalar_type import dtype_name, torch_dtype

    try:
        return torch_dtype(dtype_name(dtype))
    except ValueError:
        return None


def write_outputs(results: Sequence[Any], outputs: list[EValue]) -> None:
    """Copy torch results into the pre-allocated output EValues; InvalidArgument when they do not fit."""
    import torch

    if len(results) != len(outputs):
        raise BackendError(Error.Internal, f"the program produced {len(results)} output(s), {len(outputs)} were pre-allocated")
    for i, (result, out) in enumerate(zip(results, outputs)):
        if isinstance(result, torch.Tensor):
            array = to_numpy(result)
            if out.capacity is not None and out.value.shape != array.shape:
                resize_tensor(out, array.shape)  # a run-time size (NUM-001); a misfit is reported below
            target = out.value
            if not isinstance(target, np.ndarray):
                raise BackendError(Error.InvalidArgument, f"output {i} is a tensor but its pre-allocated EValue holds {type(target).__name__}")
            if target.shape != array.shape or target.dtype != array.dtype:
                raise BackendError(
                    Error.InvalidArgument,
                    f"output {i} is {array.dtype}{list(array.shape)}; the pre-allocated output is {target.dtype}{list(target.shape)}",
                )
            np.copyto(target, array, casting="no")
        else:  # a scalar output (int, float, bool) replaces the EValue's value, as a C++ runtime sets it
            out.value = result


def serialize(program) -> bytes:
    """torch.export.save bytes of ``program``, loadable again with :func:`deserialize`.

    A program exported with size-oblivious dynamic dims can reach us with a symbolic
    input size that ``range_constraints`` does not list; torch.export.save writes it
    and torch.export.load then fails ("vr must not be None for symbol s21"). The
    archive is written from a copy whose range_constraints name every input symbol
    with the range its shape environment knows (the caller's program is untouched).
    """
    import torch

    buffer = io.BytesIO()
    torch.export.save(_with_complete_ranges(program), buffer)
    return buffer.getvalue()


def _with_complete_ranges(program):
    import copy

    from conformance.compat.torch import value_range

    missing = {}
    for node in program.graph.nodes:
        val = node.meta.get("val") if node.op == "placeholder" else None
        for size in getattr(val, "shape", ()):
            if isinstance(size, int):
                continue
            shape_env = size.node.shape_env
            for symbol in size.node.expr.free_symbols:
                if symbol not in program.range_constraints and symbol not in missing:
                    known = shape_env.var_to_range.get(symbol) if shape_env is not None else None
                    missing[symbol] = known if known is not None else value_range(0, int(2**63 - 1))
    if not missing:
        return program
    fixed = copy.copy(program)  # shares graph and weights; only the range table is new
    fixed._range_constraints = {**program.range_constraints, **missing}
    return fixed


def deserialize(blob: bytes):
    """torch.export.load of ``blob``; BackendError(InvalidProgram) for anything it cannot read."""
    import torch

    try:
        return torch.export.load(io.BytesIO(bytes(blob)))
    except Exception as exc:  # zipfile, unpickling, schema and version errors alike
        raise BackendError(Error.InvalidProgram, f"not a readable torch.export archive: {type(exc).__name__}: {exc}") from None
