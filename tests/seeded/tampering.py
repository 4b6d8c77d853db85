"""Backends that try to bend the certificate rather than the run: one ships a pytest plugin that
rewrites its results, one is a new version that stops claiming an op and refuses it cleanly.
tests/test_sealed_results.py certifies them through the real CLI (``tests/seeded/tampering.py:<name>``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from conformance.api import BackendDetails, BackendError, BackendUnderTest, Error
from reference_backend import ReferenceBackend, ReferenceRuntime, backend_under_test

_REFERENCE = backend_under_test()


class ClobbersInputs(ReferenceRuntime):
    """Fails RT-017: reuses its input buffers as scratch after each execute."""

    def execute(self, context, handle, args):
        status = super().execute(context, handle, args)
        plan = self._plan_of(handle)
        for arg in args[: len(plan.program.inputs)]:
            if isinstance(arg.value, np.ndarray) and arg.value.flags.writeable:
                arg.value[...] = 0
        return status


rewrites_its_results = BackendUnderTest(
    name="rewrites-its-results",
    details=ReferenceBackend,
    runtime=ClobbersInputs(),
    version="seeded",
    manifest=_REFERENCE.manifest,
    description="fails RT-017, and its pytest plugin rewrites every result to PASS",
    pytest_plugins=("tests.seeded.result_flipper",),
)


class RefusesRelu(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        from conformance.api.ops import op_name

        if any(n.op == "call_function" and op_name(n.target) == "aten.relu.default" for n in edge_program.graph.nodes):
            raise BackendError(Error.NotSupported, "relu is no longer supported")
        return ReferenceBackend.preprocess(edge_program, compile_specs)


claims_relu = dataclasses.replace(_REFERENCE, name="relu-dropper", version="1.0", description="the reference, as version 1.0")
"""The baseline: version 1.0 claims relu and computes it."""
drops_relu = BackendUnderTest(
    name="relu-dropper",
    details=RefusesRelu,
    runtime=ReferenceRuntime(),
    version="1.1",
    manifest=dataclasses.replace(_REFERENCE.manifest, ops={k: v for k, v in _REFERENCE.manifest.ops.items() if k != "aten.relu.default"}),
    description="the reference's next version: it no longer claims relu and refuses it cleanly",
)
