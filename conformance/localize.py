"""Which operator of a program a backend gets wrong first.

A backend whose output of a whole program (a contract program, a model) differs from the
expected one rarely fails at the output: one interior operator goes wrong and everything after
it inherits the error. ``localize`` names that operator, by node name, ATen overload and debug
handle, in three steps:

1. **Eager's value of every node**: the program's graph interpreted node by node in PyTorch
   eager (``eager_values``), parameters, buffers and constants lifted as the graph signature
   says.
2. **The backend's value of every node**, compared in graph order with eager's, each with the
   tolerance ``tolerance(depth)`` for the node's depth (call_function nodes on the longest path
   from an input), since rounding error grows along a chain of ops:
   - from one run of the program with every intermediate tensor exposed as an output
     (``exposing``): one preprocess, init and execute;
   - where the backend refuses or fails that program (a fused pattern it no longer recognizes,
     too many outputs), from prefixes of the program, each ending at one node (``exposing``):
     starting at an output that differs, down through the op nodes it reads, to one that
     differs while every op node it reads matches (at most depth x fan-in lowerings).
   The node named is where the error starts: it differs, and every op node it reads matches.
3. **That node alone** (``isolated``): a program of just that node, its tensor arguments fed
   eager's values of them, run on the backend. Differing alone, the op itself is wrong on those
   inputs; matching alone, it goes wrong only in context (a fusion, a layout choice, a value the
   backend kept from another node).

The verdict of the program stays the caller's (MISMATCH on its outputs); this only says where.
Every step goes through the ``Driver``, so a backend is driven here exactly as in the checks.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from conformance import oracle
from conformance.api.ops import op_name
from conformance.api.tensors import to_numpy, to_torch
from conformance.driver import Driver
from conformance.programs.graphs import assemble, copy_program, input_spec, node_depths, signature
from conformance.results import CheckFailure


@dataclass(frozen=True)
class Localization:
    """The first node of a program whose output the backend gets wrong."""

    node: str
    """The node's name in the program's graph (``relu_3``)."""
    op: str
    """Its ATen overload (``aten.relu.default``)."""
    debug_handle: int | None
    """``node.meta["debug_handle"]``: what a backend's errors and events name the node by."""
    index: int
    """Its position among the program's tensor-valued op nodes, in graph order (0-based), of ``of``."""
    of: int
    depth: int
    """Operator nodes on the longest path from an input to it, itself included (``node_depths``)."""
    method: str
    """How the backend's intermediate values were seen: "intermediate outputs" or "prefixes"."""
    comparison: oracle.Comparison
    """The node's output from the backend against eager's, in the program."""
    isolated: oracle.Comparison | None = None
    """The node alone, on eager's values of its inputs (None when the backend refused that program)."""
    isolated_detail: str = ""
    """Why there is no isolated comparison, if there is none."""

    def describe(self) -> str:
        handle = f", debug handle {self.debug_handle}" if self.debug_handle is not None else ""
        text = (
            f"first diverging op: {self.node} ({self.op}{handle}), node {self.index + 1} of {self.of} at depth "
            f"{self.depth}, found from {self.method}: {self.comparison.message}"
        )
        if self.isolated is None:
            return text + (f"; alone: {self.isolated_detail}" if self.isolated_detail else "")
        if self.isolated.ok:
            return text + "; alone on eager's inputs it matches (wrong only in context: a fusion, a layout, state)"
        return text + f"; alone on eager's inputs it differs too (the op itself: max abs {self.isolated.max_abs:.3g})"

    def stats(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "op": self.op,
            "debug_handle": self.debug_handle,
            "depth": self.depth,
            "method": self.method,
            "alone": None if self.isolated is None else ("matches" if self.isolated.ok else "differs"),
            **{f"node_{k}": v for k, v in self.comparison.stats().items() if k in ("max_abs", "mae", "snr_db", "max_ulp")},
        }


Tolerances = Callable[[int], oracle.Tolerance]
"""The tolerance of a node's output at a given depth."""


def localize(backend, exported, inputs: Sequence[np.ndarray], tolerance: Tolerances, *,
             compile_specs: Sequence | None = None) -> Localization | None:
    """The first node of ``exported`` whose output ``backend`` computes unlike eager (see the
    module's docstring); None when every node's output matches (the difference lies in how the
    outputs were delivered, not in any node). ``compile_specs``: preprocess's for every program
    run here (default: the backend's own; the whole-program checks pass PARTIAL_DELEGATION too)."""
    eager = eager_values(exported, inputs)
    nodes = _tensor_nodes(exported, eager)
    if not nodes:
        return None
    depths = node_depths(exported)
    driver = Driver(backend)

    def compared(node_names: list[str], outputs) -> list[oracle.Comparison]:
        return [
            oracle.compare(np.asarray(a), eager[name], tolerance(depths[name])) for name, a in zip(node_names, outputs)
        ]

    names = [n.name for n in nodes]
    found: tuple[int, oracle.Comparison] | None = None
    try:
        ran = driver.run(exposing(exported, names), inputs, [eager[n] for n in names], compile_specs=compile_specs)
        method = "intermediate outputs"
        for i, cmp in enumerate(compared(names, ran.outputs)):
            if not cmp.ok:
                found = (i, cmp)
                break
    except CheckFailure:
        method = "prefixes"
        found = _descend(driver, exported, inputs, nodes, lambda i, out: compared([names[i]], out)[0], eager, compile_specs)
    if found is None:
        return None
    index, cmp = found
    node = nodes[index]
    op = producer(node)
    isolated, detail = None, ""
    try:
        program, feeds = isolated_program(exported, node.name, eager)
        out = driver.run(program, feeds, [eager[node.name]], compile_specs=compile_specs).outputs
        isolated = compared([node.name], out)[0]
    except CheckFailure as exc:
        detail = f"the backend did not run it ({exc.category.name}: {exc.message})"
    return Localization(
        node=op.name,
        op=op_name(op.target),
        debug_handle=op.meta.get("debug_handle", node.meta.get("debug_handle")),
        index=index,
        of=len(nodes),
        depth=depths[node.name],
        method=method,
        comparison=cmp,
        isolated=isolated,
        isolated_detail=detail,
    )


def _descend(driver, exported, inputs, nodes, compare_one, eager, compile_specs=None) -> tuple[int, oracle.Comparison] | None:
    """From the program's first output node that differs, down through the op nodes it reads to
    one that differs while every op node it reads matches: where the error starts. Each node's
    value comes from a prefix of the program ending at it (cached: each node lowered at most once)."""
    index = {n.name: i for i, n in enumerate(nodes)}
    cache: dict[str, oracle.Comparison | None] = {}

    def differs(name: str) -> oracle.Comparison | None:
        if name not in cache:
            try:
                out = driver.run(exposing(exported, [name]), inputs, [eager[name]], compile_specs=compile_specs).outputs
                cmp = compare_one(index[name], out)
                cache[name] = None if cmp.ok else cmp
            except CheckFailure as exc:  # a prefix it cannot run: it does not compute that node right
                reason = f"the program ending there failed ({exc.category.name}: {exc.message})"
                cache[name] = oracle.Comparison(False, reason, dtype="", shape=())
        return cache[name]

    outputs = [a.name for a in exported.graph.output_node().all_input_nodes if a.name in index]
    current = next((name for name in outputs if differs(name) is not None), None)
    if current is None:
        return None
    while True:
        node = producer(nodes[index[current]])
        reads = [a.name for a in node.all_input_nodes if a.name in index]
        nxt = next((name for name in reads if differs(name) is not None), None)
        if nxt is None:
            return index[current], cache[current]
        current = nxt


# ---------------------------------------------------------------------------------------------
# Programs and values


def eager_values(exported, inputs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Every tensor-valued node's value (by node name, placeholders included) when PyTorch eager
    interprets the graph on ``inputs``; a node returning several tensors has its own entry only
    through its getitem nodes."""
    import torch
    from torch.export.graph_signature import InputKind

    args, user = [], iter(inputs)
    for spec in exported.graph_signature.input_specs:
        if spec.kind is InputKind.USER_INPUT:
            args.append(to_torch(np.asarray(next(user))))
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER) and spec.target in exported.state_dict:
            args.append(exported.state_dict[spec.target])
        else:
            args.append(exported.constants[spec.target])
    values: dict[str, np.ndarray] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            result = super().run_node(n)
            if isinstance(result, torch.Tensor):
                values[n.name] = to_numpy(result.detach().clone())
            return result

    with torch.no_grad():
        Recorder(exported.graph_module).run(*args)
    return values


def _tensor_nodes(exported, eager: dict[str, np.ndarray]) -> list:
    """The call_function nodes with a tensor value, in graph order."""
    return [n for n in exported.graph.nodes if n.op == "call_function" and n.name in eager]


def producer(node):
    """The operator node that computes ``node``'s value: itself, or for a getitem the node whose
    outputs it picks from."""
    if node.target is operator.getitem and node.args and hasattr(node.args[0], "op"):
        return node.args[0]
    return node


def exposing(exported, names: Sequence[str]):
    """A copy of ``exported`` whose outputs are the nodes ``names`` (in that order), and whose graph
    keeps only what they need: the program a backend lowers to show its intermediate values.
    Inputs, parameters, constants and debug handles are the original's."""
    import torch.utils._pytree as pytree
    from torch.export.exported_program import ExportedProgram, ModuleCallEntry, ModuleCallSignature

    gm = copy_program(exported).graph_module  # a deep copy that keeps the names the signature uses
    graph = gm.graph
    by_name = {n.name: n for n in graph.nodes}
    chosen = [by_name[name] for name in names]
    output = graph.output_node()
    output.args = (tuple(chosen),)
    graph.eliminate_dead_code()
    gm.recompile()
    root = exported.module_call_graph[0].signature
    in_spec = root.in_spec if root is not None else pytree.tree_flatten(exported.example_inputs or ((), {}))[1]
    out_spec = pytree.tree_flatten(tuple(n.meta["val"] for n in chosen))[1]
    return ExportedProgram(
        root=gm,
        graph=gm.graph,
        graph_signature=signature(exported.graph_signature.input_specs, chosen),
        state_dict=exported.state_dict,
        range_constraints=exported.range_constraints,
        module_call_graph=[ModuleCallEntry("", ModuleCallSignature([], [], in_spec, out_spec))],
        example_inputs=exported.example_inputs,
        constants=exported.constants,
        verifiers=list(exported.verifiers),
    )


def isolated_program(exported, name: str, eager: dict[str, np.ndarray]):
    """A program of node ``name`` alone (its ``producer``, for an element of a node's several
    outputs), every tensor node it reads a user input, and the inputs that feed it eager's values
    of them (parameters and constants it reads become inputs too)."""
    import torch

    value = next(n for n in exported.graph.nodes if n.name == name)
    node = producer(value)
    graph = torch.fx.Graph()
    env, feeds, input_specs = {}, [], []
    for i, arg in enumerate(node.all_input_nodes):
        placeholder = graph.placeholder(f"x{i}")
        placeholder.meta = copy.copy(arg.meta)
        env[arg] = placeholder
        feeds.append(eager[arg.name])
        input_specs.append(input_spec(placeholder))
    copied = graph.node_copy(node, lambda n: env[n])
    if value is not node:  # one element of a node's several outputs
        env[node] = copied
        copied = graph.node_copy(value, lambda n: env[n])
    graph.output((copied,))
    real = [to_torch(np.asarray(f)) for f in feeds]
    return assemble(graph, signature(input_specs, [copied]), {}, real, (copied.meta["val"],)), feeds

