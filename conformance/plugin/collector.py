"""The controller's side of a session: every check's record taken from its seal (``conformance.seal``),
kept in the session's journal as it arrives (``conformance.run.journal``), a lost xdist worker's
check recorded CRASH (TIMEOUT if the watchdog killed it), and one results document per backend
written into ``--conformance-out`` when the session ends, even after crashes."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from conformance import seal
from conformance.plugin.capture import META_KEY, RESULT_KEY
from conformance.plugin.items import clause_from_nodeid
from conformance.plugin.session import State, is_worker
from conformance.results import CaseResult, Category
from conformance.run import journal, supervision, transport
from conformance.run.files import write_json_atomic


class Collector:
    """Controller-side hooks: gathers every result record, journals it, writes the results documents."""

    def __init__(self, st: State):
        self.st = st

    def pytest_runtest_logreport(self, report):
        if is_worker(self.st.config):
            return
        st = self.st
        props = dict(report.user_properties)
        if META_KEY in props:
            st.meta[report.nodeid] = _decoded_meta(props[META_KEY], report.nodeid)
        # Only a report that is not a passing setup or teardown can have a seal (see makereport);
        # one a plugin turned into such a report is taken from its seal when the session ends.
        may_be_sealed = report.when == "call" or not report.passed or RESULT_KEY in props
        sealed = st.seals.get(report.nodeid, report.when) if st.seals is not None and may_be_sealed else None
        if sealed is not None or RESULT_KEY in props:
            record = _sealed_record(st, report, props.get(RESULT_KEY), sealed)
            previous = st.records.get(report.nodeid)
            # A teardown error must not hide a call failure; otherwise the latest phase wins.
            if previous is None or not previous.category.is_failure:
                _keep(st, record)
        elif report.nodeid in st.ignore_crash:
            st.ignore_crash.discard(report.nodeid)
        elif report.failed and "crashed while running" in str(report.longrepr):
            _record_lost_worker(st, report)

    def pytest_report_teststatus(self, report, config):
        """With --conformance-categories (certify passes it): pytest's progress letters and closing
        line in the harness's words (PASS, MISMATCH, NOT_SUPPORTED ...), so they agree with the
        report, and a check's failure is told by the harness's summary, not by pytest's traceback
        of the harness. A plain pytest run keeps pytest's outcomes and failure sections."""
        if not config.getoption("conformance_categories"):
            return None
        sealed = self.st.seals.get(report.nodeid, report.when) if self.st.seals is not None else None
        if sealed is None:
            return None
        try:
            category = CaseResult.from_json(transport.decode(sealed[0])).category
        except (ValueError, TypeError):
            return None
        letter = {Category.PASS: ".", Category.NOT_SUPPORTED: "n", Category.NOT_APPLICABLE: "a", Category.SKIP: "s"}.get(
            category, "F" if category.is_failure else "E"
        )
        return category.value, letter, category.value

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem, report, sched):
        """A worker died with ``crashitem`` at the head of its queue. If the worker never started
        it (it was replaced on purpose, or died between checks), put it back in the queue, at most
        twice; if it had already reported it, leave its result alone."""
        st = self.st
        started = any(info["nodeid"] == crashitem for info in supervision.running(st.run_dir)) if st.run_dir else True
        if started:
            return  # it died in this check: _record_lost_worker records it
        if crashitem in st.records:
            why = "its worker ended after this check had reported"
        elif st.rescheduled.get(crashitem, 0) < 2:
            st.rescheduled[crashitem] = st.rescheduled.get(crashitem, 0) + 1
            sched.mark_test_pending(crashitem)
            why = "its worker was replaced before it started this check (after a timeout or a stray thread); it runs again"
        else:
            return  # workers keep dying before it starts: recorded as a crash of its own
        # Not a failure in pytest's terminal summary either.
        st.ignore_crash.add(crashitem)
        report.outcome = "skipped"
        report.longrepr = (report.location[0], 0, f"Skipped: {why}")

    def pytest_sessionfinish(self, session, exitstatus):
        config = self.st.config
        if is_worker(config):
            return
        st = self.st
        _keep_unreported(st)
        out = config.getoption("conformance_out")
        if out:
            from conformance.report import results_document

            for name in st.names:
                records = [r for r in st.records.values() if r.backend == name]
                document = results_document(st, name, records)
                path = journal.results_dir(out, name) / f"{config.getoption('conformance_tag')}.json"
                write_json_atomic(path, document)
                kept = st.journals.get(name)
                if kept is not None and st.owns_run_dir:  # unsupervised: the document says it all
                    kept.unlink(missing_ok=True)
        if st.run_dir is not None and st.owns_run_dir:
            shutil.rmtree(st.run_dir, ignore_errors=True)
        st.run_dir = None


def open_journals(st: State) -> None:
    out = st.config.getoption("conformance_out")
    if not out:
        return
    from conformance.report import results_document

    tag = st.config.getoption("conformance_tag")
    for name in st.names:
        path = journal.results_dir(out, name) / f"{tag}{journal.JOURNAL_SUFFIX}"
        header = results_document(st, name, [])
        header.pop("results")
        journal.write_header(path, header)
        st.journals[name] = path


def _keep(st: State, record: CaseResult) -> None:
    st.records[record.nodeid] = record
    path = st.journals.get(record.backend)
    if path is not None:
        journal.append_record(path, record)


def _sealed_record(st: State, report, carried: Any, sealed: tuple[str, str] | None) -> CaseResult:
    """The record of ``report``'s check as its process sealed it (``conformance.seal``); what the
    report carried (``carried``) is only compared with it. A record without a seal is not believed."""
    meta = st.meta.get(report.nodeid, {})
    if sealed is None:
        record = CaseResult(
            category=Category.HARNESS_ERROR,
            **{"clause": clause_from_nodeid(report.nodeid), **meta},
            message="the result record of this check arrived without its seal: it was not made by the process that "
            "ran the check (a plugin's hook added or rewrote it), and is not believed",
        )
        st.altered.append(transport.clean_text(f"{report.nodeid} ({report.when}): a record without a seal"))
    else:
        text, sha = sealed
        st.seals.taken.add((report.nodeid, report.when))
        record = _decoded(text, report.nodeid, meta)
        if not isinstance(carried, str) or seal.digest(carried) != sha:
            st.altered.append(
                transport.clean_text(
                    f"{report.nodeid} ({report.when}): the report brought {_category_of(carried)}; "
                    f"the sealed record, {record.category.value}, stands"
                )
            )
    record.nodeid = report.nodeid
    return record


def _category_of(carried: Any) -> str:
    """What a report's record (as carried, possibly rewritten) says the category is, in words."""
    if carried is None:
        return "no record"
    try:
        return str(transport.decode(carried)["category"])[:40]
    except Exception:
        return "an unreadable record"


def _keep_unreported(st: State) -> None:
    """Sealed records whose reports never reached the collector as such (a plugin's hook raised on
    the way, or made a failing phase look like a passing one): the check ran, its record stands,
    by the collector's rule (a failure is not replaced)."""
    if st.seals is None:
        return
    for nodeid, phase, text in st.seals.all():
        if (nodeid, phase) in st.seals.taken:
            continue
        record = _decoded(text, nodeid, st.meta.get(nodeid, {}))
        record.nodeid = nodeid
        st.altered.append(
            transport.clean_text(
                f"{nodeid} ({phase}): its report did not reach the harness as made; the sealed record, {record.category.value}, stands"
            )
        )
        previous = st.records.get(nodeid)
        if previous is None or not previous.category.is_failure:
            _keep(st, record)


def _decoded_meta(value: Any, nodeid: str) -> dict:
    """The meta a worker sent with a check's setup report ({} if unreadable: the record says so)."""
    try:
        decoded = transport.decode(value)
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


def _decoded(value: Any, nodeid: str, meta: dict) -> CaseResult:
    """A record as the worker encoded it; a HARNESS_ERROR (with ``meta``) if unreadable."""
    try:
        decoded = transport.decode(value)
        if isinstance(decoded, dict):
            return CaseResult.from_json(decoded)
        problem = f"a {type(decoded).__name__}, not a record"
    except (ValueError, TypeError) as exc:
        problem = str(exc)
    return CaseResult(
        category=Category.HARNESS_ERROR,
        **{"clause": clause_from_nodeid(nodeid), **meta},
        message=transport.clean_text(f"the result record of this check could not be read ({problem}): {value!r}"),
    )


def _record_lost_worker(st: State, report) -> None:
    """CRASH (or TIMEOUT, if the watchdog killed it) for the check a lost worker was running,
    with how the process ended and the last contract call it reached."""
    pid = None
    for info in supervision.running(st.run_dir) if st.run_dir else ():
        if info["nodeid"] == report.nodeid:
            pid = info["pid"]
    status = _exit_status(getattr(report, "node", None))
    meta = dict(st.meta.get(report.nodeid) or {"clause": clause_from_nodeid(report.nodeid)})
    killed = st.killed.get(report.nodeid)
    killed_after = killed[1] if killed is not None else None
    record = supervision.lost_record(
        meta, st.run_dir, pid, None if killed_after is not None else status, killed_after=killed_after
    )
    if pid is not None and st.run_dir is not None:
        supervision.forget(st.run_dir, pid)  # the watchdog must not kill a reused pid
    record.update(nodeid=report.nodeid, duration_s=0.0, phase="call")
    _keep(st, record)


def _exit_status(node) -> int | None:
    """The exit status of a lost xdist worker (execnet keeps its Popen; private, so guarded)."""
    try:
        popen = node.gateway._io.popen
        return popen.wait(timeout=5)
    except Exception:
        return None
