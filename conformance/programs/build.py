"""The ExportedProgram of one call: built directly, or torch.export's through the program cache.

``build_program`` makes the graph, signature, module call graph and node metadata torch.export
would produce for a module making the call, in a few milliseconds instead of the 50-300 ms of
torch.export plus run_decompositions (tests/harness/test_programs.py proves the two equal for
every op). ``export_call`` is torch.export's program, exported once per *structure*
(``Call.structure``) with dynamic, size-oblivious input dimensions where they fit.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from conformance.api.ops import op_name
from conformance.api.tensors import to_torch
from conformance.call import Call, Tensor
from conformance.compat import torch as compat_torch
from conformance.programs.cache import ProgramCache, default_cache
from conformance.programs.export import OpModule
from conformance.programs.fake import fake_mode, fake_outputs, symbolic_fake_mode
from conformance.programs.graphs import assemble, assign_debug_handles, copy_program, input_spec, signature
from conformance.programs.operators import (
    HarnessError,
    dtypes_as_torch,
    mutated_values,
    program_results,
    resolve_op,
    returns_data_dependent_scalar,
    schema_args,
)


def build_program(call: Call, *, like: Any = None):
    """The ExportedProgram torch.export gives for a module making ``call``, built directly.

    Parameters become PARAMETER placeholders (``p_p0``, ...) ahead of the user
    inputs, the op is one call_function node (getitem nodes pick a tuple's
    elements), every node's ``meta["val"]`` is a FakeTensor from running the op in
    a FakeTensorMode, and the module call graph carries the pytree specs that
    ``ExportedProgram.module()`` needs. tests/harness/test_programs.py checks the
    result against torch.export's, call for call.

    ``like``: what eager returned for the call (``eager_describes_outputs`` holds for it). The
    outputs' values are then FakeTensors of eager's sizes, strides and dtypes instead of the meta
    kernel's outputs, which cost more than the rest of the program (Python reference
    implementations for most ops); ``meta_program`` tells whether the two programs are the same.

    Where ``compat.torch.builds_programs()`` does not hold (a torch the builder was not tested on, or
    CONFORMANCE_COMPAT=public), the program is torch.export's own, with static shapes, through the
    program cache, and ``like`` is not used. A call torch.export refuses raises what it raised, as the
    builder raises what FakeTensorMode raised: PyTorch's tracing refused it (a batch norm of one element
    per channel divides by zero in its decomposition), which a NUM check sets aside like the builder's
    refusals, not a fault of the harness.
    """
    if not compat_torch.builds_programs():
        try:
            return export_call(call, dynamic=False)
        except HarnessError as exc:
            if exc.__cause__ is None:
                raise
            raise exc.__cause__ from None
    op = resolve_op(call.op)
    if returns_data_dependent_scalar(op):
        return build_in_mode(call, op, like, symbolic_fake_mode())
    try:
        return build_in_mode(call, op, like, fake_mode())
    except Exception as exc:
        if not compat_torch.sized_at_run_time(exc):
            raise
    # An output whose size depends on the input's values (nonzero; index with a bool mask): an
    # unbacked size, bounded by the program's range constraint, as torch.export gives it; the input
    # sizes stay static, so the bound is a number the runtime can allocate (NUM-001).
    return build_in_mode(call, op, None, symbolic_fake_mode())


def build_in_mode(call: Call, op, like: Any, mode):
    """``build_program`` with the FakeTensorMode ``mode``: one with a ShapeEnv where an output is
    data-dependent (a Scalar read from the data, a size computed from it). The unbacked symbols of
    such outputs get what torch.export gives them: their bindings on the op's node, their value
    ranges in the program's range constraints, and the runtime asserts of those ranges in the graph."""
    import operator

    import torch
    import torch.utils._pytree as pytree

    graph = torch.fx.Graph()
    input_specs, state, fakes = [], {}, {}
    params = [t for t in call.tensors() if t.role == "parameter"]
    inputs = call.inputs()
    nodes: dict[int, Any] = {}
    for index, tensor in enumerate(params):
        name = f"p{index}"
        node = graph.placeholder(f"p_{name}")
        state[name] = torch.nn.Parameter(to_torch(tensor.value), requires_grad=False)
        input_specs.append(input_spec(node, target=name))
        nodes[id(tensor)] = node
        fakes[node.name] = mode.from_tensor(state[name])
    real_inputs = []
    for index, tensor in enumerate(inputs):
        node = graph.placeholder(f"x{index}")
        real_inputs.append(to_torch(tensor.value))
        input_specs.append(input_spec(node))
        nodes[id(tensor)] = node
        fakes[node.name] = compat_torch.fake_like(mode, real_inputs[-1])

    def as_node(a):
        if isinstance(a, Tensor):
            return nodes[id(a)]
        if isinstance(a, (list, tuple)):
            return type(a)(as_node(x) for x in a)
        return a

    kwargs = {k: as_node(v) for k, v in call.kwargs.items()}
    kwargs = dtypes_as_torch(kwargs)
    args, kwargs = _as_traced(op, list(as_node(call.args)), kwargs)
    for node in graph.nodes:
        node.meta["val"] = fakes[node.name]
    target = graph.call_function(op, tuple(args), kwargs)
    if like is None:
        out = fake_outputs(mode, op, tuple(args), kwargs)
    else:
        out = pytree.tree_map_only(torch.Tensor, lambda t: compat_torch.fake_like(mode, t), like)
    target.meta["val"] = out
    if isinstance(out, (list, tuple)):
        # One getitem per element, as tracing makes them: an undefined output's (None) has no user.
        items = []
        for i, value in enumerate(out):
            item = graph.call_function(operator.getitem, (target, i))
            item.meta["val"] = value
            items.append(item)
        results = [item for item, value in zip(items, out) if value is not None]
    else:
        results = [target]
    mutated = [nodes[id(t)] for t in mutated_values(op, call.args, call.kwargs)]
    results += mutated
    graph.output(tuple(results))
    shape_env = mode.shape_env
    ranges = {}
    if shape_env is not None:
        from torch.fx.experimental.symbolic_shapes import compute_unbacked_bindings, free_unbacked_symbols

        bindings = compute_unbacked_bindings(shape_env, out)
        if bindings:
            target.meta["unbacked_bindings"] = bindings
        # the ranges of data-dependent sizes (what output_capacities allocates at); a Scalar output's
        # symbol has none to give (torch.export lists it as unbounded)
        sizes = [d for v in pytree.tree_leaves(out) if isinstance(v, torch.Tensor) for d in v.shape]
        symbols = set().union(*(free_unbacked_symbols(d) for d in sizes if type(d) is not int))
        ranges = {s: shape_env.var_to_range[s] for s in sorted(symbols, key=str)}
    outputs = program_results(out, [n.meta["val"] for n in mutated])
    program = assemble(graph, signature(input_specs, results), state, real_inputs, outputs, ranges)
    if ranges:
        from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts

        # torch.export's tracing made (and dropped) a first size node and comparison of each bound, so
        # the nodes its runtime asserts name in their messages are the second: sym_size_int_1, ge_1
        compat_torch.reserve_node_names(program.graph, ("sym_size_int", "ge", "le"))
        insert_deferred_runtime_asserts(program.graph_module, shape_env, "built", export=True)
    assign_debug_handles(program)
    return program


def _as_traced(op, args: list, kwargs: dict) -> tuple[list, dict]:
    """The argument form tracing records: positional arguments positionally, kwarg-only ones
    by name, both without the trailing values that equal the schema's defaults."""
    schema = schema_args(op)
    positional = [a for a in schema if not a.kwarg_only]
    named = [i for i, a in enumerate(positional) if i >= len(args) and a.name in kwargs]
    for schema_arg in positional[len(args) : (named[-1] + 1 if named else 0)]:
        # a positional argument skipped by name takes its default, as the dispatcher fills it
        args.append(kwargs.pop(schema_arg.name) if schema_arg.name in kwargs else copy.copy(schema_arg.default))

    def is_default(schema_arg, value) -> bool:
        if not schema_arg.has_default:
            return False
        default = schema_arg.default
        if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
            return list(value) == list(default)
        return type(value) is type(default) and value == default or (value is None and default is None)

    while args and len(args) <= len(positional) and is_default(positional[len(args) - 1], args[-1]):
        args.pop()
    named = {a.name: a for a in schema if a.kwarg_only}
    order = {a.name: i for i, a in enumerate(schema)}
    kept = sorted(
        (k for k in kwargs if not (k in named and is_default(named[k], kwargs[k]))), key=lambda k: order.get(k, len(order))
    )
    return args, {k: kwargs[k] for k in kept}


def export_call(call: Call, *, dynamic: bool = True, cache: ProgramCache | None = None):
    """torch.export's program of a module making ``call`` (``OpModule``), exported once per structure
    through ``cache`` (dynamic dims where they fit) and copied, with the call's parameter values."""
    inputs = [t.value for t in call.inputs()]
    cache = cache or default_cache()
    shapes = [tuple(a.shape) for a in inputs]

    def build():
        return OpModule.build(call), [to_torch(a) for a in inputs]

    skeleton = cache.get(call.structure(dynamic), build, shapes, dynamic, keep=(call.op,))
    exported = copy_program(skeleton)
    _set_parameters(exported, [t.value for t in call.tensors() if t.role == "parameter"])
    if not any(op_name(n.target) == call.op for n in exported.graph.nodes if n.op == "call_function"):
        raise HarnessError(f"the exported program for {call.op} does not contain {call.op}")
    return exported


def _set_parameters(exported, values: list[np.ndarray]) -> None:
    import torch

    for index, value in enumerate(values):
        name = f"p{index}"
        target = exported.state_dict.get(name)
        if target is None:
            raise HarnessError(f"program lost parameter {name}")
        with torch.no_grad():
            target.copy_(to_torch(value))
