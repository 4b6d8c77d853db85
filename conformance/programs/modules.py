"""Whole nn.Modules exported once with fixed inputs: the contract programs, the models, the quantized programs."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from conformance.api.ops import op_name
from conformance.programs.cache import ProgramCache, default_cache
from conformance.programs.graphs import copy_program, node_depths


@dataclass(frozen=True)
class ModuleProgram:
    """A whole nn.Module exported once, with fixed inputs: a contract program
    (``checks/_support``) or a model (``conformance.programs.models``)."""

    name: str
    exported: Any
    inputs: tuple[np.ndarray, ...]
    ops: frozenset[str]
    module: Any
    """The nn.Module it was exported from (eager timing runs this, not the unlifted graph)."""

    def fresh(self):
        """A private copy for one preprocess call (preprocess may not mutate it, but might)."""
        return copy_program(self.exported)

    @functools.cached_property
    def depth(self) -> int:
        """Operator nodes on the longest path from an input to an output (``node_depths``)."""
        depths = node_depths(self.exported)
        return max((depths[n.name] for n in self.exported.graph.output_node().all_input_nodes), default=0)


def module_program(
    kind: str,
    name: str,
    builder: Callable[[], tuple[Any, tuple]],
    *,
    cache: ProgramCache | None = None,
    keep: Sequence[str] = (),
    source: str | None = None,
) -> ModuleProgram:
    """The program of ``builder()``'s module on its inputs, exported once with static shapes
    through the program cache (core ATen but for ``keep``), keyed by ``kind``, ``name`` and the
    builder's source (or ``source``, for a builder that is a closure over other code): an edited
    builder is a different program."""
    import inspect

    import torch

    module, inputs = builder()
    key = (kind, name, inspect.getsource(builder) if source is None else source)
    shapes = [tuple(a.shape) for a in inputs]

    def build():
        return module, [torch.from_numpy(np.array(a)) for a in inputs]

    exported = (cache or default_cache()).get(key, build, shapes, dynamic=False, keep=keep)
    ops = frozenset(op_name(n.target) for n in exported.graph.nodes if n.op == "call_function")
    return ModuleProgram(name, exported, tuple(inputs), ops, module)
