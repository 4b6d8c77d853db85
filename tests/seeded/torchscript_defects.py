"""A seeded defect of the TorchScript to_backend family: the demo backend with one output perturbed.

``perturbed_demo`` is TorchScript's real ``backend_with_compiler_demo`` (lowered,
loaded and executed exactly as backend_adapters.torchscript does it) whose
runtime then nudges the first element of the last output by a relative 1e-3, far
beyond float32's tolerance: the kind of slightly-wrong kernel a vendor ships.
tests/adapters/test_torchscript.py certifies it next to the unperturbed demo and
checks that the harness flags it (NUM MISMATCH) where the demo passes.

Certify from the command line with ``tests/seeded/torchscript_defects.py:perturbed_demo``.
"""

from __future__ import annotations

import numpy as np

from backend_adapters import torchscript as ts
from conformance.api import BackendUnderTest, Error

RELATIVE_ERROR = 1e-3


class PerturbingRuntime(ts.TorchScriptRuntime):
    """The demo's runtime, then element 0 of the last output times (1 + 1e-3) (+1e-3 if it is 0)."""

    def execute(self, context, handle, args) -> Error:
        status = super().execute(context, handle, args)
        if status is Error.Ok and args:
            out = args[-1].value
            if isinstance(out, np.ndarray) and out.size and out.dtype.kind == "f":
                flat = out.reshape(-1)
                value = flat[0]
                flat[0] = value + (abs(value) if value else 1) * out.dtype.type(RELATIVE_ERROR)
        return status


def perturbed_demo() -> BackendUnderTest:
    demo = ts.backend_with_compiler_demo()
    return BackendUnderTest(
        name="torchscript-demo-perturbed",
        details=demo.details,
        runtime=PerturbingRuntime("backend_with_compiler_demo", "libbackend_with_compiler.so", "string"),
        version=demo.version + " + seeded perturbation",
        manifest=demo.manifest,
        description="backend_with_compiler_demo with element 0 of its last output off by a relative 1e-3 (seeded defect)",
        family="torchscript",
    )
