"""The reference backend in a process where PyTorch's tracing refuses every call eager computes.

A test rig for tests/harness/test_case.py: certifying ``tests/harness/untraceable.py:backend``
patches the program builder NUM checks use, so every drawn call is set aside before it reaches
the backend. Such a check compared nothing and must not pass.
"""

from __future__ import annotations

import conformance.case.running as running
from reference_backend import backend_under_test


def _refuse(call, **_):
    raise RuntimeError(f"tracing refused {call.op} (test rig: tests/harness/untraceable.py)")


running.program_for = _refuse
backend = backend_under_test()
