"""The graphs of ExportedPrograms: assembled from a graph the harness built, copied, numbered, read.

What the builders (single-op and batch programs, ``conformance.localize``'s programs of one node)
and the cache share: a program's debug handles, its signature, its construction, a copy that keeps
its names, and what its inputs accept and its outputs hold.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from conformance.compat import torch as compat_torch
from conformance.programs.operators import HarnessError


def assign_debug_handles(program) -> None:
    """node.meta["debug_handle"] = 1, 2, ... over call_function nodes, in graph order."""
    handle = 0
    for node in program.graph.nodes:
        if node.op == "call_function":
            handle += 1
            node.meta["debug_handle"] = handle


def input_shapes_fit(program, shapes: Sequence[tuple[int, ...]]) -> bool:
    """True when every user input's dims match the program's static sizes and symbol ranges."""
    from torch.export.graph_signature import InputKind

    user = [s.arg.name for s in program.graph_signature.input_specs if s.kind is InputKind.USER_INPUT]
    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    if len(user) != len(shapes):
        return False
    bound: dict[Any, int] = {}
    for name, shape in zip(user, shapes):
        val = nodes[name].meta.get("val")
        if val is None or len(val.shape) != len(shape):
            return False
        for size, want in zip(val.shape, shape):
            if isinstance(size, int):
                if size != want:
                    return False
                continue
            expr = size.node.expr
            if not getattr(expr, "is_Symbol", False):
                return False
            if bound.setdefault(expr, want) != want:
                return False
            vr = program.range_constraints.get(expr)
            if vr is not None:
                lo = int(vr.lower) if getattr(vr.lower, "is_Integer", False) else 0
                hi = int(vr.upper) if getattr(vr.upper, "is_Integer", False) else None
                if want < lo or (hi is not None and want > hi):
                    return False
    return True


def node_depths(exported) -> dict[str, int]:
    """Each node's depth: operator nodes on the longest path from an input, itself included
    (getitem, which picks one of an op's several outputs, is no operator)."""
    import operator

    depth: dict[str, int] = {}
    for n in exported.graph.nodes:  # FX graphs are in topological order
        before = max((depth[a.name] for a in n.all_input_nodes), default=0)
        depth[n.name] = before + (1 if n.op == "call_function" and n.target is not operator.getitem else 0)
    return depth


def copy_program(exported):
    """A deep copy of an ExportedProgram that still agrees with its own graph signature.

    ``copy.deepcopy`` renames a node whose name is a Python builtin (an export of
    ``forward(self, input)`` has a placeholder ``input``; the copy's is ``input_1``) but not the
    signature's input and output specs, so the copy breaks export's own invariants
    (``torch.export.save`` raises SpecViolationError) and a backend serializing what it is
    given would fail through no fault of its own. The copy takes back the original names."""
    clone = copy.deepcopy(exported)
    renamed = False
    for original, node in zip(exported.graph.nodes, clone.graph.nodes):
        if node.name != original.name:
            node.name = original.name
            renamed = True
    if renamed:
        clone.graph_module.recompile()
    return clone


def output_argument(node):
    """The graph-signature argument of an output node, as torch.export spells it: a SymInt, SymFloat or
    SymBool argument for a Scalar output (_local_scalar_dense's), a TensorArgument otherwise."""
    import torch
    from torch.export.graph_signature import SymBoolArgument, SymFloatArgument, SymIntArgument, TensorArgument

    val = node.meta.get("val")
    for kind, argument in ((torch.SymBool, SymBoolArgument), (torch.SymInt, SymIntArgument), (torch.SymFloat, SymFloatArgument)):
        if isinstance(val, kind):
            return argument(name=node.name)
    return TensorArgument(name=node.name)


def input_spec(node, target: str | None = None):
    """The graph-signature entry of placeholder ``node``: a user input, or with ``target`` the
    parameter of that name in the program's state dict."""
    from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

    if target is None:
        return InputSpec(InputKind.USER_INPUT, TensorArgument(name=node.name), target=None)
    return InputSpec(InputKind.PARAMETER, TensorArgument(name=node.name), target=target, persistent=None)


def signature(input_specs: Sequence[Any], outputs: Sequence[Any]):
    """The graph signature of a program with inputs ``input_specs`` whose user outputs are the nodes
    ``outputs``, in order (``output_argument``)."""
    from torch.export.graph_signature import ExportGraphSignature, OutputKind, OutputSpec

    return ExportGraphSignature(
        input_specs=list(input_specs),
        output_specs=[OutputSpec(OutputKind.USER_OUTPUT, output_argument(n), target=None) for n in outputs],
    )


def assemble(graph, signature, state: dict, real_inputs: list, out: Any, range_constraints: dict | None = None):
    """The ExportedProgram of a graph built by the harness (a single-op or batch program, an op of a
    program run alone by conformance.localize): no constants, range constraints only those given
    (a data-dependent output size's, ``build_program``), the module
    call graph of a module called with the user inputs as positional arguments, returning ``out``.

    Constructed by ``compat.torch.exported_program``: where its private route holds, the GraphModule
    generates its Python code when first used and export's Verifier is not run at construction."""
    import torch
    import torch.utils._pytree as pytree
    from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature

    in_spec = pytree.tree_flatten((tuple(real_inputs), {}))[1]
    out_spec = pytree.tree_flatten(out)[1]
    # torch.export's programs are in its training IR, where an op that mutates (resize_, a batch norm's
    # running statistics) stays; the ATen dialect's Verifier, the default here, refuses one ("operator
    # ... is not functional"), so a graph holding one says what torch.export says.
    mutable = any(isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable
                  for n in graph.nodes if n.op == "call_function")  # fmt: skip
    return compat_torch.exported_program(
        root=torch.nn.Module(),
        graph=graph,
        graph_signature=signature,
        state_dict=state,
        range_constraints=dict(range_constraints or {}),
        module_call_graph=[ModuleCallEntry("", ModuleCallSignature([], [], in_spec, out_spec))],
        example_inputs=(tuple(real_inputs), {}),
        constants={},
        verifiers=compat_torch.training_ir_verifiers() if mutable else None,
    )


def output_capacities(exported) -> list[tuple[int, ...] | None]:
    """For each output of ``exported``: None when its sizes are known before the run (static, or
    symbols the inputs bind), else the shape to allocate it at: each data-dependent size (an
    unbacked symbol, nonzero's row count) at the upper bound of its range constraint. A backend
    reports the size it computed by resizing the output within that buffer (NUM-001)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    capacities: list[tuple[int, ...] | None] = []
    for node in exported.graph.output_node().args[0]:
        shape = getattr(getattr(node, "meta", {}).get("val"), "shape", None)
        if shape is None or not any(free_unbacked_symbols(d) for d in shape if type(d) is not int):
            capacities.append(None)
            continue
        bound = []
        for d in shape:
            if type(d) is int:
                bound.append(d)
                continue
            ranges = exported.range_constraints.get(d.node.expr)
            upper = getattr(ranges, "upper", None)
            if upper is None or not getattr(upper, "is_finite", True) or not str(upper).lstrip("-").isdigit():
                raise HarnessError(f"output {node.name} has a data-dependent size {d} without an upper bound in the program")
            bound.append(int(upper))
        capacities.append(tuple(bound))
    return capacities


def output_meta(exported) -> list[tuple]:
    """Each output's size, stride and dtype, as its ``meta["val"]`` describes it."""
    return [
        (tuple(int(d) for d in v.shape), tuple(int(d) for d in v.stride()), v.dtype)
        for v in (n.meta["val"] for n in exported.graph.output_node().args[0])
    ]
