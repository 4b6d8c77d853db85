"""Directly built single-op programs are what torch.export would give, op for op.

NUM checks build their programs directly (conformance.programs.build_program)
because torch.export costs 10x more per program. This proves the shortcut honest:
for calls of every specified op, the built program and the exported one have the
same placeholders (kinds, dtypes, shapes), the same operator nodes, the same
outputs, lower to byte-identical reference blobs, and compute the same values.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.export.graph_signature import InputKind

from conformance import specs
from conformance.api import BackendError
from conformance.api.ops import op_name
from conformance.checks import _support as support
from conformance.driver import Driver
from conformance.programs import ProgramCache, build_program, program_for
from conformance.results import CheckFailure
from conformance.strategies import calls
from reference_backend import ReferenceBackend

SPECS = specs.load()
CACHE = ProgramCache(use_disk=False)


def _signature(program):
    nodes = {n.name: n for n in program.graph.nodes}
    placeholders = [
        (spec.kind, str(nodes[spec.arg.name].meta["val"].dtype), tuple(nodes[spec.arg.name].meta["val"].shape))
        for spec in program.graph_signature.input_specs
    ]
    ops = [op_name(n.target) for n in program.graph.nodes if n.op == "call_function"]
    outputs = [(str(v.dtype), tuple(v.shape)) for v in (n.meta["val"] for n in program.graph.output_node().args[0])]
    return placeholders, ops, outputs


@pytest.mark.parametrize("name", sorted(SPECS.all_op_names()))
def test_built_program_equals_the_exported_one(name):
    spec = SPECS.op(name)
    dtype = "float32" if "float32" in spec.dtypes else spec.dtypes[0]

    @settings(max_examples=2, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def check(data):
        call = data.draw(calls(spec, dtype, name))
        try:
            built = build_program(call)
        except Exception as exc:  # PyTorch's meta kernel refuses it: then torch.export must refuse it too
            with pytest.raises(Exception, match=re.escape(str(exc).splitlines()[0][:60])):
                program_for(call, export=True, dynamic=False, cache=CACHE)
            return
        exported = program_for(call, export=True, dynamic=False, cache=CACHE).exported
        assert _signature(built) == _signature(exported)
        assert any(k == InputKind.USER_INPUT for k, _, _ in _signature(built)[0]) or not call.inputs()
        try:
            a = ReferenceBackend.preprocess(built, [])
            b = ReferenceBackend.preprocess(exported, [])
        except BackendError as exc:
            pytest.fail(f"{call.describe()}: the reference refused a program: {exc}")
        assert a.processed_bytes == b.processed_bytes, f"{call.describe()}: different blobs"
        assert a.debug_handle_map == b.debug_handle_map
        inputs = [t.value for t in call.inputs()]
        like = support.eager_outputs(exported, inputs)
        try:
            ran_a = Driver(support.reference_backend()).run(built, inputs, like).outputs
            ran_b = Driver(support.reference_backend()).run(exported, inputs, like).outputs
        except CheckFailure as exc:
            if exc.stage == "execute":
                return  # inputs the op refuses at run time (both programs refuse alike: same blob)
            raise
        for x, y in zip(ran_a, ran_b):
            x, y = np.asarray(x), np.asarray(y)
            assert (x.dtype, x.shape) == (y.dtype, y.shape)
            assert x.tobytes() == y.tobytes(), f"{call.describe()}: different outputs"  # bit for bit, NaNs included

    check()
