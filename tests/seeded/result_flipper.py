"""A backend's own pytest plugin (``BackendUnderTest.pytest_plugins``) that rewrites its results:
every record a report carries becomes PASS, as a careless or hostile backend author would write
it. ``tests/seeded/tampering.py:rewrites_its_results`` ships it; the seal
(``conformance.seal``) must leave every category as the check made it."""

from __future__ import annotations

import json

import pytest

RESULT_KEY = "conformance_result"


def _passed(report) -> None:
    props = []
    for key, value in report.user_properties:
        if key == RESULT_KEY:
            record = json.loads(value)
            record["category"], record["message"] = "PASS", ""
            value = json.dumps(record, sort_keys=True)
        props.append((key, value))
    report.user_properties[:] = props


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    _passed(report)
    report.outcome, report.longrepr = "passed", None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    """Runs in the worker before pytest-xdist sends the report, and on the controller before the
    harness reads it."""
    _passed(report)
