"""The symbolic-shape plumbing of core ATen (specs/scope.toml) runs through the reference.

sym_size.int, sym_numel.default, sym_stride.int, sym_storage_offset.default and
sym_is_contiguous.default carry torch.Tag.core but are not operators on tensors: they give a
program the sizes it computes with. No NUM check certifies them (specs/scope.toml says why);
these tests run each through the reference inside a program and compare the program's result
with eager's.
"""

from __future__ import annotations

import operator

import numpy as np
import pytest
import torch

from conformance import specs
from conformance.driver import Driver
from conformance.programs import assemble, assign_debug_handles, export_module
from reference_backend import backend_under_test

SYMBOLIC = ("aten.sym_size.int", "aten.sym_numel.default", "aten.sym_stride.int",
            "aten.sym_storage_offset.default", "aten.sym_is_contiguous.default")


def _run(exported, inputs: list[np.ndarray], like: list[np.ndarray]) -> list[np.ndarray]:
    return Driver(backend_under_test()).run(exported, inputs, like).outputs


def test_every_symbolic_core_overload_is_listed_out_of_scope_with_where_it_runs():
    scope = specs.load().out_of_scope
    for name in SYMBOLIC:
        assert name in scope, f"{name} is neither spec'd nor in specs/scope.toml"
        assert "test_graph_plumbing" in scope[name].exercised


class Flatten(torch.nn.Module):
    def forward(self, x):
        return x.reshape(x.numel()) * x.shape[1], x.new_full((x.shape[0],), 2.0)


def test_a_dynamic_program_computes_its_sizes_with_sym_size():
    # Decomposed to core ATen, numel() becomes a product of sym_size.int (sym_numel is left to
    # the hand-built programs below).
    exported = export_module(Flatten(), (torch.randn(3, 4),), dynamic=True)
    targets = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    assert "aten.sym_size.int" in targets, targets
    for shape in ((3, 4), (5, 2), (2, 7)):
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        expected = [t.numpy() for t in Flatten()(torch.from_numpy(x))]
        actual = _run(exported, [x], expected)
        for a, e in zip(actual, expected):
            np.testing.assert_array_equal(a, e)


def _sized_by(op, *extra):
    """A program returning full([op(x, *extra) + 1], 1.0): the symbolic op's value becomes a size."""
    from torch.export.graph_signature import (
        ExportGraphSignature,
        InputKind,
        InputSpec,
        OutputKind,
        OutputSpec,
        TensorArgument,
    )

    x = torch.randn(3, 4)
    value = int(op(x, *extra))
    graph = torch.fx.Graph()
    placeholder = graph.placeholder("x")
    placeholder.meta["val"] = torch._subclasses.fake_tensor.FakeTensorMode().from_tensor(x)
    symbol = graph.call_function(op, (placeholder, *extra))
    symbol.meta["val"] = value
    size = graph.call_function(operator.add, (symbol, 1))
    size.meta["val"] = value + 1
    out = torch.full((value + 1,), 1.0)
    full = graph.call_function(torch.ops.aten.full.default, ([size], 1.0), {"dtype": torch.float32})
    full.meta["val"] = placeholder.meta["val"].fake_mode.from_tensor(out)
    graph.output((full,))
    signature = ExportGraphSignature(
        input_specs=[InputSpec(InputKind.USER_INPUT, TensorArgument(name="x"), target=None)],
        output_specs=[OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(name=full.name), target=None)],
    )
    program = assemble(graph, signature, {}, [x], (out,))
    assign_debug_handles(program)
    return program, x.numpy(), out.numpy()


@pytest.mark.parametrize(
    "op,extra",
    [
        (torch.ops.aten.sym_stride.int, (0,)),
        (torch.ops.aten.sym_stride.int, (1,)),
        (torch.ops.aten.sym_storage_offset.default, ()),
        (torch.ops.aten.sym_is_contiguous.default, ()),
        (torch.ops.aten.sym_size.int, (1,)),
        (torch.ops.aten.sym_numel.default, ()),
    ],
)
def test_each_symbolic_overload_gives_eagers_value_inside_a_program(op, extra):
    program, x, expected = _sized_by(op, *extra)
    (actual,) = _run(program, [x], [expected])
    assert actual.shape == expected.shape, f"{op}: the reference sized the output {actual.shape}, eager {expected.shape}"
