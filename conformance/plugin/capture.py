"""Record capture, in the process that ran the check: the check's ``result`` recorder, its outcome
classified into a category (``conformance.results.Category``: a check raises ``CheckFailure`` with
one; pytest-timeout's timeout is TIMEOUT), and the record sealed (``conformance.seal``) before any
other plugin's report hook sees it.

Each report also carries its record in ``user_properties``, for display. A record travels as one
JSON string (``conformance.run.transport``): execnet refuses integers below -2**31 and strings with
lone surrogates, and a report it refuses kills the worker and every check queued on it. The failure
text pytest sends along is cleaned the same way, so no value a backend produces can end the session.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from conformance import statistics
from conformance.plugin.items import clause_of, meta_of
from conformance.plugin.session import active, is_worker, state
from conformance.plugin.watchdog import CheckTimedOut
from conformance.results import CaseResult, Category, CheckFailure, result_id
from conformance.run import transport

META_KEY = "conformance_meta"
RESULT_KEY = "conformance_result"


class Declined(pytest.skip.Exception):
    """A check that ends without a verdict on purpose, in the harness's own category
    (NOT_SUPPORTED, NOT_APPLICABLE): pytest reports it skipped, the plugin reads the category
    from the exception, never from its text."""

    def __init__(self, category: Category, message: str):
        super().__init__(message)
        self.category = category


class ResultRecorder:
    """What a check says about its result beyond pass/fail: op, dtype, statistics, timings.
    Holds the check's ``CaseResult``; the plugin completes it with the outcome."""

    def __init__(self, clause: str | None):
        self.record = CaseResult(clause=clause)

    def set(self, **fields: Any) -> None:
        self.record.update(**{k: v for k, v in fields.items() if v is not None})

    def stats(self, **stats: Any) -> None:
        """Record statistics; each key must be declared in ``conformance.statistics`` with the value's
        type (TypeError otherwise: the check's result is a HARNESS_ERROR that names the key)."""
        statistics.check(stats, clause=self.record.clause)
        self.record.stats.update(stats)

    def not_supported(self, message: str):
        raise Declined(Category.NOT_SUPPORTED, message)

    def not_applicable(self, message: str):
        raise Declined(Category.NOT_APPLICABLE, message)


RECORDER = pytest.StashKey[ResultRecorder]()


def pytest_runtest_setup(item):
    if active(item.config):
        item.user_properties.append((META_KEY, transport.encode(meta_of(item))))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if not active(item.config):
        return
    report = outcome.get_result()
    if report.passed and report.when in ("setup", "teardown"):
        _clean_report(report)
        return
    recorder = item.stash.get(RECORDER, None)
    record = (
        dataclasses.replace(recorder.record, stats=dict(recorder.record.stats))
        if recorder
        else CaseResult(clause=clause_of(item))
    )
    meta = meta_of(item)
    record.update(**meta)
    record.id = result_id(meta)  # from the check's parameters only, never from what it found
    category, message = _classify(report, call)
    record.category = category
    if message and (not record.message or category.is_failure):
        record.message = message
    exc = _check_failure(call.excinfo.value) if call.excinfo else None
    if exc is not None:
        merge_failure_stats(record, exc)
        if exc.stage:
            record.failed_stage = exc.stage  # not "stage": that one is a parameter, part of the id
    record.phase = report.when
    record.nodeid = item.nodeid
    record.duration_s = round(report.duration, 6)
    st = state(item.config)
    if category in (Category.TIMEOUT, Category.HARNESS_ERROR) and not st.recycle:
        # An interrupted import or a half-built fixture can poison every later check in this
        # process: the worker is replaced before its next check.
        st.recycle = f"{category.value} in {item.nodeid}"
    text = transport.encode(record.to_json(transport=True))
    if st.sealer is not None:
        # Before this hook returns the report: a plugin's pytest_runtest_logreport (tryfirst or
        # not) and every later hook see it only after the record is sealed (conformance.seal).
        st.sealer.seal(item.nodeid, report.when, text)
    report.user_properties.append((RESULT_KEY, text))
    _clean_report(report)


def merge_failure_stats(record: CaseResult, exc: CheckFailure) -> None:
    """The statistics a failure carries, into its check's record. Undeclared or wrongly typed ones
    are the harness's mistake, not the backend's: the failure stays the verdict, its statistics are
    left out (the report must validate) and the message says why."""
    try:
        statistics.check(exc.stats, clause=record.clause)
    except TypeError as wrong:
        record.message = f"{record.message} [statistics left out: {wrong}]"
    else:
        record.stats.update(exc.stats)


def _clean_report(report) -> None:
    """The failure text and captured output of ``report`` as text any process boundary carries."""
    report.longrepr = transport.clean_longrepr(report.longrepr)
    if report.sections:
        report.sections = transport.clean_sections(report.sections)


@pytest.hookimpl(hookwrapper=True)
def pytest_report_to_serializable(config, report):
    """The last guard before execnet on a worker: a report it would refuse (a value that slipped
    past the cleaning above, e.g. a check's own ``record_property``) is made carriable instead of
    ending the worker and losing every check queued on it."""
    outcome = yield
    if not active(config) or not is_worker(config):
        return
    data = outcome.get_result()
    if data is None:
        return
    try:
        import execnet
    except ImportError:  # pragma: no cover - xdist brings it
        return
    try:
        execnet.dumps(data)
    except Exception:
        outcome.force_result(transport.carriable(data))


def _check_failure(exc: BaseException | None) -> CheckFailure | None:
    if isinstance(exc, CheckFailure):
        return exc
    if isinstance(exc, BaseExceptionGroup):  # hypothesis reports several distinct failures as a group
        for inner in exc.exceptions:
            found = _check_failure(inner)
            if found is not None:
                return found
    return None


def _classify(report, call) -> tuple[Category, str]:
    exc = call.excinfo.value if call.excinfo else None
    if report.skipped:
        if isinstance(exc, Declined):
            return exc.category, exc.msg
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        if hasattr(report, "wasxfail"):
            return Category.XFAIL, report.wasxfail
        return Category.SKIP, reason
    if report.passed:
        if hasattr(report, "wasxfail"):
            return Category.XPASS, report.wasxfail
        return Category.PASS, ""
    found = _check_failure(exc)
    if found is not None:
        return found.category, found.message
    from conformance.programs import HarnessError

    if isinstance(exc, HarnessError):
        return Category.HARNESS_ERROR, str(exc)
    if isinstance(exc, CheckTimedOut):
        return Category.TIMEOUT, str(exc)
    text = str(report.longrepr)
    if "Timeout" in text and (exc is None or type(exc).__name__ == "Failed"):
        return Category.TIMEOUT, _last_line(text)
    if report.when != "call":
        return Category.HARNESS_ERROR, f"error in {report.when}: {_last_line(text)}"
    if isinstance(exc, AssertionError):
        return Category.CONTRACT_VIOLATION, _last_line(text)
    if exc is not None:
        return Category.HARNESS_ERROR, f"{type(exc).__name__}: {exc}"[:2000]
    return Category.HARNESS_ERROR, _last_line(text)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("E "):
            return line[2:].strip()[:2000]
    return (lines[-1] if lines else "").strip()[:2000]
