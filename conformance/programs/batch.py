"""Batch programs: one program making several calls of one operator, side by side."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from conformance.api.tensors import to_torch
from conformance.call import Call
from conformance.compat import torch as compat_torch
from conformance.programs.build import build_program
from conformance.programs.calls import Program
from conformance.programs.graphs import assemble, assign_debug_handles, input_spec, signature
from conformance.programs.operators import HarnessError


@dataclass
class BatchProgram(Program):
    """One program making several calls of one operator, independently (``batch_program``)."""

    calls: tuple[Call, ...] = ()
    outputs_per_call: tuple[int, ...] = ()
    """How many of the program's outputs each call produced, in call order (``split_outputs``)."""


def batch_program(calls: Sequence[Call], programs: Sequence[Program] | None = None) -> BatchProgram:
    """One ExportedProgram making every call of ``calls`` (one operator), side by side.

    Each call's subgraph is the one ``build_program(call)`` builds, its nodes copied with
    their metadata (``val`` included): the parameters of every call first (``p_p0``, ...,
    numbered on across calls, as torch.export numbers a module's parameters), then every
    call's user inputs in call order (``x0``, ...), then the op nodes call by call; the
    outputs are every call's outputs in call order. Debug handles are renumbered 1, 2, ...
    over the whole graph, so they stay unique. Nothing connects two subgraphs: a backend
    computes each call as it would alone. ``split_outputs`` gives each call its outputs.

    A call ``build_program`` cannot express is a HarnessError naming it (batch the others,
    run it alone through ``program_for``). ``programs``: the calls' single programs, already
    built (``program_for``), so they are not built again.

    Only built programs are batched: their values share one FakeTensorMode, while each program
    torch.export gives has its own, which export's Verifier refuses to see in one graph. Where
    ``compat.torch.builds_programs()`` does not hold, a batch is a HarnessError and the NUM check
    runs each call alone (its fallback for a batch it cannot make).
    """
    import torch
    from torch.export.graph_signature import InputKind

    calls = tuple(calls)
    if not calls:
        raise HarnessError("batch_program needs at least one call")
    if not compat_torch.builds_programs():
        raise HarnessError("batches are made of built programs (compat.torch.builds_programs); each call runs alone")
    ops = sorted({c.op for c in calls})
    if len(ops) > 1:
        raise HarnessError(f"a batch holds calls of one operator, got {ops}")
    singles = [p.exported for p in programs] if programs is not None else []
    for call in calls[len(singles) :]:
        try:
            singles.append(build_program(call))
        except Exception as exc:
            raise HarnessError(f"cannot build {call.describe()} directly: {type(exc).__name__}: {exc}") from exc

    graph = torch.fx.Graph()
    envs: list[dict[Any, Any]] = [{} for _ in singles]
    input_specs, state = [], {}

    def placeholder(name: str, old):
        node = graph.placeholder(name)
        node.meta = copy.copy(old.meta)
        return node

    for env, single in zip(envs, singles):  # parameters first, as in every exported program
        nodes = {n.name: n for n in single.graph.nodes}
        for spec in single.graph_signature.input_specs:
            if spec.kind is InputKind.PARAMETER:
                name = f"p{len(state)}"
                old = nodes[spec.arg.name]
                env[old] = placeholder(f"p_{name}", old)
                state[name] = single.state_dict[spec.target]
                input_specs.append(input_spec(env[old], target=name))
    inputs_in_order = 0
    for env, single, call in zip(envs, singles, calls):
        nodes = {n.name: n for n in single.graph.nodes}
        for spec in single.graph_signature.input_specs:
            if spec.kind is InputKind.USER_INPUT:
                old = nodes[spec.arg.name]
                env[old] = placeholder(f"x{inputs_in_order}", old)
                inputs_in_order += 1
                input_specs.append(input_spec(env[old]))
            elif spec.kind is not InputKind.PARAMETER:
                raise HarnessError(f"build_program gave an input of kind {spec.kind} for {call.describe()}")
    results, counts = [], []
    for env, single in zip(envs, singles):
        for node in single.graph.nodes:
            if node.op == "call_function":
                env[node] = graph.node_copy(node, lambda n, env=env: env[n])
        outs = [env[n] for n in single.graph.output_node().args[0]]
        results.extend(outs)
        counts.append(len(outs))
    graph.output(tuple(results))
    real_inputs = [to_torch(t.value) for call in calls for t in call.inputs()]
    program = assemble(graph, signature(input_specs, results), state, real_inputs, tuple(n.meta["val"] for n in results))
    assign_debug_handles(program)
    inputs = [t.value for call in calls for t in call.inputs()]
    return BatchProgram(
        program,
        inputs,
        op=ops[0],
        description=f"batch of {len(calls)}: " + "; ".join(c.describe() for c in calls),
        calls=calls,
        outputs_per_call=tuple(counts),
    )


def split_outputs(batch: BatchProgram, outputs: Sequence[Any]) -> list[list[np.ndarray]]:
    """The outputs of a run of ``batch``, call by call (as many as each call's program has)."""
    if len(outputs) != sum(batch.outputs_per_call):
        raise HarnessError(f"a batch of {len(batch.calls)} calls has {sum(batch.outputs_per_call)} outputs, got {len(outputs)}")
    out, start = [], 0
    for count in batch.outputs_per_call:
        out.append([np.asarray(o) for o in outputs[start : start + count]])
        start += count
    return out
