"""Hooks a backend package may implement, in a pytest plugin module its ``BackendUnderTest``
names (``pytest_plugins``): certify loads that module into its otherwise closed run, and the
report lists it under ``run.plugins``. pytest-benchmark's ``pytest_benchmark_*`` hooks are the model.

The hooks here add facts to the report and prepare the backend. Such a module is a pytest plugin
and may implement any pytest hook, but it cannot change an outcome through the report: each
check's record is sealed in the process that ran it before any other plugin's report hook sees it,
and the results are built from the seals (``conformance.seal``). The report lists every such module
with the hooks it implements (``run.backend_plugins``), and the verdict names them.
"""

from __future__ import annotations

import pytest


def pytest_conformance_environment(config: pytest.Config, backend_name: str, environment: dict[str, str]) -> None:
    """Add what produced the numbers beyond Python, the libraries and the CPU, as strings: an
    accelerator's model, a driver or firmware version, a clock setting. ``environment`` is
    ``report.json``'s ``environment.backend``, empty when the hook is called; fill it in place.
    Called on the controller for every results document it writes."""


def pytest_conformance_backend_loaded(config: pytest.Config, backend) -> None:
    """``backend`` (a ``BackendUnderTest``) was just loaded in this process, before its first
    check here: open a device, warm a compiler cache. Called once per process and backend, in
    every pytest-xdist worker that runs its checks. An exception fails the checks that need it."""
