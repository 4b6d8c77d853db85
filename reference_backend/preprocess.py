"""Ahead-of-time half of the reference backend: ExportedProgram -> blob.

Walks the graph once in order. Every ``call_function`` node becomes one
instruction whose op must be in the kernel table; anything else is refused
here with ``BackendError(NotSupported)`` naming the op and the node, so an
unsupported program never reaches the runtime. Parameters, buffers and lifted
constants go to the NamedDataStore under content-bound keys; the blob holds
only their keys, dtypes and shapes.
"""

from __future__ import annotations

import hashlib
from typing import Any

from conformance.api import (
    BackendDetails,
    BackendError,
    CompileSpec,
    Error,
    NamedDataStore,
    PreprocessResult,
    dtype_name,
)
from conformance.api.ops import op_name
from conformance.api.scalar_type import scalar_type
from conformance.api.tensors import to_numpy

from . import blob
from .blob import NO_VALUE, Dim, DimKind, Dtype, Instruction, Ref, ValueInfo, ValueKind
from .kernels import GRAPH_OPS, KERNELS

ACCEPTED_COMPILE_SPECS: frozenset[str] = frozenset()
"""The reference takes no compile specs; an unknown key is refused, not ignored."""

# Keyword arguments that describe placement, not values; NumPy arrays are always
# dense CPU memory, so these are checked and dropped rather than passed on.
_PLACEMENT_KWARGS = {"device", "layout", "pin_memory", "memory_format", "non_blocking"}


def check_compile_specs(compile_specs: Any) -> None:
    for spec in compile_specs or ():
        if not isinstance(spec, CompileSpec):
            raise BackendError(Error.InvalidArgument, f"compile spec {spec!r} is not a CompileSpec")
        if spec.key not in ACCEPTED_COMPILE_SPECS:
            raise BackendError(
                Error.InvalidArgument,
                f"unknown compile spec {spec.key!r}; the reference backend accepts "
                f"{sorted(ACCEPTED_COMPILE_SPECS) or 'none'}",
            )


class ReferenceBackend(BackendDetails):
    """Lowers a core-ATen (or Edge) ExportedProgram to the reference blob."""

    @staticmethod
    def preprocess(edge_program, compile_specs: list[CompileSpec]) -> PreprocessResult:
        return lower(edge_program, compile_specs)


def lower(edge_program, compile_specs, kernels=None) -> PreprocessResult:
    """preprocess with an explicit kernel table (default: the reference's)."""
    check_compile_specs(compile_specs)
    return _Lowering(edge_program, KERNELS if kernels is None else kernels).run()


class _Lowering:
    def __init__(self, program, kernels):
        self.program = program
        self.kernels = kernels
        self.values: list[ValueInfo] = []
        self.node_values: dict[str, Any] = {}  # node name -> value id, or tuple of ids for multi-output nodes
        self.symbols: dict[Any, int] = {}
        self.symbol_ranges: list[tuple[int, int]] = []
        self.instructions: list[Instruction] = []
        self.debug_handle_map: dict[int, tuple[int, ...]] = {}
        self.store = NamedDataStore()
        self.constants: list[tuple[int, str]] = []

    # -- values -----------------------------------------------------------------------------

    def _new_value(self, info: ValueInfo) -> int:
        self.values.append(info)
        return len(self.values) - 1

    def _dims(self, shape, node, bind_symbols: bool) -> tuple[Dim, ...]:
        dims = []
        for size in shape:
            if isinstance(size, int):
                dims.append(Dim(DimKind.STATIC, size))
                continue
            expr = size.node.expr
            if getattr(expr, "is_Symbol", False) and (bind_symbols or expr in self.symbols):
                if expr not in self.symbols:
                    lo, hi = self._range(expr)
                    self.symbols[expr] = len(self.symbol_ranges)
                    self.symbol_ranges.append((lo, hi))
                dims.append(Dim(DimKind.SYMBOL, self.symbols[expr]))
            elif getattr(expr, "is_Integer", False):
                dims.append(Dim(DimKind.STATIC, int(expr)))
            else:
                dims.append(Dim(DimKind.COMPUTED, 0))
        return tuple(dims)

    def _range(self, expr) -> tuple[int, int]:
        vr = self.program.range_constraints.get(expr)
        if vr is None:
            return 0, -1
        lo = int(vr.lower) if getattr(vr.lower, "is_Integer", False) else 0
        hi = int(vr.upper) if getattr(vr.upper, "is_Integer", False) else -1
        return max(lo, 0), hi

    def _value_for(self, val, node, *, bind_symbols: bool = False) -> int:
        import torch

        if isinstance(val, torch.Tensor):
            try:
                code = scalar_type(dtype_name(val.dtype))
            except ValueError:
                raise self._refuse(node, f"dtype {val.dtype} is not supported") from None
            return self._new_value(ValueInfo(ValueKind.TENSOR, code, self._dims(val.shape, node, bind_symbols)))
        if isinstance(val, (bool, torch.SymBool)):
            return self._new_value(ValueInfo(ValueKind.BOOL))
        if isinstance(val, (int, torch.SymInt)):
            return self._new_value(ValueInfo(ValueKind.INT))
        if isinstance(val, (float, torch.SymFloat)):
            return self._new_value(ValueInfo(ValueKind.FLOAT))
        raise self._refuse(node, f"produces a {type(val).__name__}, which the reference cannot hold")

    def _refuse(self, node, why: str) -> BackendError:
        target = op_name(node.target) if node.op == "call_function" else node.op
        return BackendError(Error.NotSupported, f"reference backend: node {node.name!r} ({target}): {why}")

    # -- arguments --------------------------------------------------------------------------

    def _arg(self, a, node):
        import torch

        if isinstance(a, torch.fx.Node):
            ref = self.node_values.get(a.name)
            if not isinstance(ref, int):
                raise self._refuse(node, f"argument {a.name!r} is not a single value")
            return Ref(ref)
        if a is None or isinstance(a, (bool, str)):
            return a
        if isinstance(a, int):
            if not -(2**63) <= a < 2**63:
                raise self._refuse(node, f"integer argument {a} does not fit in 64 bits")
            return a
        if isinstance(a, float):
            return a
        if isinstance(a, torch.dtype):
            try:
                return Dtype(scalar_type(dtype_name(a)))
            except ValueError:
                raise self._refuse(node, f"dtype argument {a} is not supported") from None
        if isinstance(a, (list, tuple)):
            return tuple(self._arg(x, node) for x in a)
        raise self._refuse(node, f"argument {a!r} of type {type(a).__name__} cannot be encoded")

    def _kwargs(self, node) -> tuple[tuple[str, Any], ...]:
        import torch

        out = []
        for key, value in node.kwargs.items():
            if key in _PLACEMENT_KWARGS:
                if key == "device" and value is not None and torch.device(value).type != "cpu":
                    raise self._refuse(node, f"device {value} is not cpu")
                if key == "layout" and value not in (None, torch.strided):
                    raise self._refuse(node, f"layout {value} is not strided")
                continue
            out.append((key, self._arg(value, node)))
        return tuple(out)

    # -- graph ------------------------------------------------------------------------------

    def run(self) -> PreprocessResult:
        from torch.export.graph_signature import InputKind, OutputKind

        sig = self.program.graph_signature
        kinds = {spec.arg.name: spec for spec in sig.input_specs}
        for spec in sig.output_specs:
            if spec.kind is not OutputKind.USER_OUTPUT:
                raise BackendError(
                    Error.NotSupported,
                    f"reference backend: output {spec.arg} is a {spec.kind.name}; programs that mutate "
                    "buffers or inputs are not supported",
                )
        inputs: list[int] = []
        outputs: list[int] = []
        for node in self.program.graph.nodes:
            if node.op == "placeholder":
                spec = kinds.get(node.name)
                val = node.meta.get("val")
                if spec is None or spec.kind is InputKind.USER_INPUT:
                    if not hasattr(val, "shape"):
                        raise self._refuse(node, "user inputs must be tensors")
                    vid = self._value_for(val, node, bind_symbols=True)
                    inputs.append(vid)
                elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                    vid = self._constant(node, spec.target)
                else:
                    raise self._refuse(node, f"input kind {spec.kind.name} is not supported")
                self.node_values[node.name] = vid
            elif node.op == "call_function":
                self._call(node)
            elif node.op == "output":
                for out in node.args[0]:
                    if not hasattr(out, "name") or not isinstance(self.node_values.get(out.name), int):
                        raise self._refuse(node, f"output {out!r} is not a value the graph computes")
                    outputs.append(self.node_values[out.name])
            else:
                raise self._refuse(node, f"{node.op} nodes (submodules, control flow) are not supported")

        program = blob.Program(
            symbols=tuple(self.symbol_ranges),
            values=tuple(self.values),
            inputs=tuple(inputs),
            outputs=tuple(outputs),
            constants=tuple(self.constants),
            instructions=tuple(self.instructions),
        )
        return PreprocessResult(
            processed_bytes=blob.write(program),
            debug_handle_map=dict(self.debug_handle_map),
            data_store_output=self.store.get_named_data_store_output(),
        )

    def _constant(self, node, target: str) -> int:
        tensor = self.program.state_dict.get(target)
        if tensor is None:
            tensor = self.program.constants.get(target)
        if tensor is None:
            raise self._refuse(node, f"constant {target!r} is missing from the program's state")
        array = to_numpy(tensor)
        data = array.tobytes()
        key = f"{target}@{hashlib.sha256(data).hexdigest()[:16]}"
        self.store.add_named_data(key, data, alignment=64)
        vid = self._value_for(tensor, node)
        self.constants.append((vid, key))
        return vid

    def _copy_mutated(self, node) -> None:
        """Copy on write for an op that writes arguments in place (``Tensor(a!)`` in its schema,
        no return aliasing them: _native_batch_norm_legit's running statistics). Its kernel writes
        into a clone, which the rest of the graph (the program's outputs) uses from here on, so a
        caller's input tensors stay as they were (RT-017) while the program returns the new values."""
        schema = getattr(node.target, "_schema", None)
        if schema is None:
            return
        returned = {a for r in schema.returns if r.alias_info is not None for a in r.alias_info.before_set}
        for position, argument in enumerate(schema.arguments):
            info = argument.alias_info
            if info is None or not info.is_write or set(info.before_set) & returned:
                continue
            value = node.args[position] if position < len(node.args) else node.kwargs.get(argument.name)
            if not hasattr(value, "name") or not isinstance(self.node_values.get(value.name), int):
                continue
            source = self.node_values[value.name]
            copy = self._new_value(self.values[source])
            index = len(self.instructions)
            self.instructions.append(Instruction("aten.clone.default", index, (Ref(source),), (), (copy,)))
            handle = node.meta.get("debug_handle")
            if isinstance(handle, int):
                self.debug_handle_map[index] = (handle,)
            self.node_values[value.name] = copy

    def _call(self, node) -> None:
        name = op_name(node.target)
        if name == "getitem":
            source, index = node.args
            produced = self.node_values.get(source.name)
            if isinstance(produced, tuple) and 0 <= index < len(produced) and produced[index] == NO_VALUE and not node.users:
                return  # tracing picks every element, an undefined (None) output too; nothing uses it
            if not isinstance(produced, tuple) or not 0 <= index < len(produced) or produced[index] == NO_VALUE:
                raise self._refuse(node, "getitem of something that is not an instruction's tuple result")
            self.node_values[node.name] = produced[index]
            return
        if name not in self.kernels and name not in GRAPH_OPS:
            raise self._refuse(node, f"operator {name} has no reference kernel")
        self._copy_mutated(node)
        args = tuple(self._arg(a, node) for a in node.args)
        kwargs = self._kwargs(node)
        val = node.meta.get("val")
        if isinstance(val, (tuple, list)):
            produced = tuple(NO_VALUE if v is None else self._value_for(v, node) for v in val)
            self.node_values[node.name] = produced
            outs = produced
        elif val is None:
            outs = ()
            self.node_values[node.name] = ()
        else:
            vid = self._value_for(val, node)
            self.node_values[node.name] = vid
            outs = (vid,)
        index = len(self.instructions)
        self.instructions.append(Instruction(name, index, args, kwargs, outs))
        handle = node.meta.get("debug_handle")
        if isinstance(handle, int):
            self.debug_handle_map[index] = (handle,)
        elif isinstance(handle, (tuple, list)) and handle:
            self.debug_handle_map[index] = tuple(int(h) for h in handle)
