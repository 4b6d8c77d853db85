"""The pytest plugin that turns the checks in ``conformance.checks`` into results.

Inert unless ``--conformance-backend`` is given, so it costs nothing in other test runs. It is wiring:
pytest registers the module the entry point (and certify's ``-p conformance.plugin``) names, with the
hooks and fixtures it finds there, so this module names each of them; the work is in the modules
they come from:

- ``options``: the ``--conformance-*`` options and the backends' hooks (``hookspecs``);
- ``configure``: a session's start in each process (state, run directory, a worker's cores);
- ``fixtures``: ``backend`` (parametrized over the named backends), ``specs``, ``profile``, ``result``,
  and NOT_APPLICABLE for a clause the backend rules out;
- ``selection``: the profile's checks, the shard, the resume list, longest first; the plan;
- ``watchdog``: the per-check timer, the controller's watchdog over workers, worker recycling;
- ``capture``: each check's record, classified and sealed in the process that ran it;
- ``collector``: the controller's records, journals and results documents.

The run machinery below it (the journal format, markers and kills, atomic files, the encoding
every record travels in) is ``conformance.run``.
"""

from conformance.plugin.capture import (
    ResultRecorder,
    pytest_report_to_serializable,
    pytest_runtest_makereport,
    pytest_runtest_setup,
)
from conformance.plugin.configure import pytest_configure, pytest_configure_node, pytest_sessionstart, share_cores
from conformance.plugin.fixtures import _clause_applies, backend, profile, pytest_generate_tests, result, specs
from conformance.plugin.options import pytest_addhooks, pytest_addoption
from conformance.plugin.selection import pytest_collection_finish, pytest_collection_modifyitems
from conformance.plugin.session import state
from conformance.plugin.watchdog import pytest_runtest_protocol, pytest_timeout_cancel_timer, pytest_timeout_set_timer

__all__ = [
    "ResultRecorder",
    "_clause_applies",
    "backend",
    "profile",
    "pytest_addhooks",
    "pytest_addoption",
    "pytest_collection_finish",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_configure_node",
    "pytest_generate_tests",
    "pytest_report_to_serializable",
    "pytest_runtest_makereport",
    "pytest_runtest_protocol",
    "pytest_runtest_setup",
    "pytest_sessionstart",
    "pytest_timeout_cancel_timer",
    "pytest_timeout_set_timer",
    "result",
    "share_cores",
    "specs",
    "state",
]
