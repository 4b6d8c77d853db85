"""The pytest plugin that turns the checks in ``conformance.checks`` into results.

Inert unless ``--backend`` is given, so it costs nothing in other test runs.

Options (group "conformance"): ``--backend NAME`` (repeatable), ``--profile``,
``--conformance-out DIR`` (where results go), ``--conformance-hard-timeout``.

What it does:
- makes ``backend`` a fixture parametrized over the named backends (id = the
  name, marker ``backend_<name>``), and deselects checks outside the profile;
- gives every check a ``result`` recorder; each report carries its result record
  in ``user_properties``, so pytest-xdist moves them with no extra plumbing. A record
  travels as one JSON string (``conformance.transport``): execnet refuses integers
  below -2**31 and strings with lone surrogates, and a report it refuses kills the
  worker and every check queued on it. The failure text pytest sends along is
  cleaned the same way, so no value a backend produces can end the session;
- classifies outcomes into categories (``conformance.results.Category``):
  a check raises ``CheckFailure`` with a category; pytest-timeout's timeout is
  TIMEOUT; a lost xdist worker is CRASH; a worker the hard-timeout watchdog had
  to kill (a hang the soft timeout could not interrupt) is TIMEOUT;
- on the controller, collects every record and writes one results document per
  backend into ``--conformance-out`` when the session ends, even after crashes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conformance import transport
from conformance.results import Category, CheckFailure

STASH_STATE = pytest.StashKey["_State"]()
META_KEY = "conformance_meta"
RESULT_KEY = "conformance_result"
_CLAUSE_IN_NAME = re.compile(r"test_(PRE|RT|REG|DBG|NUM|PERF|LAZY)_(\d{3})")


def pytest_addoption(parser):
    group = parser.getgroup("conformance", "backend conformance certification")
    group.addoption("--backend", action="append", default=[], help="backend to certify (entry-point name or module:attr); repeatable")
    group.addoption("--profile", default="full", help="certification profile from specs/profiles.toml (default: full)")
    group.addoption("--conformance-out", default=None, help="directory for per-backend results documents")
    group.addoption("--conformance-tag", default="run", help="name of this run's results file (results/<tag>.json)")
    group.addoption(
        "--conformance-shard",
        default=None,
        metavar="I/N",
        help="run only shard I of N (deterministic by check id); merge the shards' results with `conformance merge`",
    )
    group.addoption(
        "--conformance-hard-timeout",
        type=float,
        default=None,
        help="seconds after which a check's worker is killed and the check recorded as TIMEOUT "
        "(default: 2 x --timeout + 10)",
    )


def _active(config) -> bool:
    return bool(config.getoption("backend", default=None))


# ---------------------------------------------------------------------------------------------
# Per-process state


class _State:
    def __init__(self, config):
        from conformance import specs

        self.config = config
        self.specs = specs.load()
        self.profile = self.specs.profile(config.getoption("profile"))
        self.names: list[str] = list(config.getoption("backend"))
        self.backends: dict[str, Any] = {}
        self.records: dict[str, dict] = {}  # nodeid -> record (controller side)
        self.meta: dict[str, dict] = {}  # nodeid -> meta from the setup report
        self.killed: dict[str, float] = {}  # nodeid -> seconds, killed by the watchdog
        self.run_dir: Path | None = None
        self.started = time.time()

    def backend(self, name: str):
        if name not in self.backends:
            from conformance.discovery import load

            self.backends[name] = load(name)
        return self.backends[name]


def state(config) -> _State:
    return config.stash[STASH_STATE]


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def _uses_workers(config) -> bool:
    return not _is_worker(config) and config.pluginmanager.hasplugin("dsession")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.addinivalue_line("markers", "clause(id): the contract clause a check verifies")
    if not _active(config):
        return
    for name in config.getoption("backend"):
        config.addinivalue_line("markers", f"backend_{_marker_name(name)}: checks of backend {name}")
    from conformance.strategies import profiles

    # Before hypothesis' own plugin reads --hypothesis-profile. Also makes every draw independent
    # of which modules this process has imported (hypothesis' "local constants"), so a check draws
    # the same examples whichever xdist worker runs it and whatever the backend's source holds.
    profiles.register()
    st = _State(config)
    config.stash[STASH_STATE] = st
    config.pluginmanager.register(_Collector(st), "conformance-collector")
    if _is_worker(config):
        st.run_dir = Path(os.environ["CONFORMANCE_RUN_DIR"]) if os.environ.get("CONFORMANCE_RUN_DIR") else None
        return
    st.run_dir = Path(tempfile.mkdtemp(prefix="conformance-run-"))
    os.environ["CONFORMANCE_RUN_DIR"] = str(st.run_dir)  # inherited by xdist workers


def pytest_sessionstart(session):
    # Not in pytest_configure: xdist registers its "dsession" plugin in its own pytest_configure,
    # after ours (tryfirst), so only now can the controller tell that it has workers to watch.
    config = session.config
    if not _active(config) or _is_worker(config) or not _uses_workers(config):
        return
    st = state(config)
    timeout = config.getoption("timeout", default=None) or 0
    hard = config.getoption("conformance_hard_timeout") or (2 * float(timeout) + 10 if timeout else None)
    if hard and st.run_dir is not None:
        threading.Thread(target=_watchdog, args=(st, hard), daemon=True, name="conformance-watchdog").start()


class CheckTimedOut(BaseException):
    """The per-check timeout. A BaseException, not pytest.fail's ``Failed``: hypothesis catches
    ``Failed`` as a test failure, shrinks and replays the example (which hangs again, now with
    no timer armed); this one it lets through, so the check ends at once as TIMEOUT."""


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    """pytest-timeout's signal method, raising CheckTimedOut instead of calling pytest.fail."""
    if not _active(item.config) or settings.method != "signal":
        return None

    def on_alarm(signum, frame):
        raise CheckTimedOut(f"Timeout (>{settings.timeout:g}s): the check did not finish in time")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout)
    item.stash[_TIMER_ARMED] = True
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_cancel_timer(item):
    if not item.stash.get(_TIMER_ARMED, False):
        return None
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    item.stash[_TIMER_ARMED] = False
    return True


_TIMER_ARMED = pytest.StashKey[bool]()


def _marker_name(name: str) -> str:
    return re.sub(r"\W", "_", name)


# ---------------------------------------------------------------------------------------------
# Fixtures and parametrization


def pytest_generate_tests(metafunc):
    config = metafunc.config
    if not _active(config) or "backend" not in metafunc.fixturenames:
        return
    names = config.getoption("backend")
    metafunc.parametrize(
        "backend",
        [pytest.param(n, id=n, marks=getattr(pytest.mark, f"backend_{_marker_name(n)}")) for n in names],
        indirect=True,
        scope="session",
    )


@pytest.fixture(scope="session")
def backend(request):
    """The BackendUnderTest of this check (parametrized over --backend)."""
    from conformance.discovery import DiscoveryError

    try:
        return state(request.config).backend(request.param)
    except DiscoveryError as exc:
        pytest.exit(str(exc), returncode=2)


@pytest.fixture(scope="session")
def specs(request):
    return state(request.config).specs


@pytest.fixture(scope="session")
def profile(request):
    return state(request.config).profile


class ResultRecorder:
    """What a check says about its result beyond pass/fail: op, dtype, statistics, timings."""

    def __init__(self, clause: str | None):
        self.data: dict[str, Any] = {"clause": clause}

    def set(self, **fields: Any) -> None:
        self.data.update({k: v for k, v in fields.items() if v is not None})

    def stats(self, **stats: Any) -> None:
        self.data.setdefault("stats", {}).update(stats)

    def not_supported(self, message: str):
        self.data["category"] = Category.NOT_SUPPORTED.value
        pytest.skip(f"NOT_SUPPORTED: {message}")

    def not_applicable(self, message: str):
        self.data["category"] = Category.NOT_APPLICABLE.value
        pytest.skip(f"NOT_APPLICABLE: {message}")


@pytest.fixture
def result(request):
    """The recorder of this check's result."""
    return request.node.stash.setdefault(_RECORDER, ResultRecorder(_clause_of(request.node)))


_RECORDER = pytest.StashKey[ResultRecorder]()


@pytest.fixture(autouse=True)
def _clause_applies(request):
    """NOT_APPLICABLE, with the reason, for a clause the backend's family or manifest rules out."""
    if not _active(request.config) or "backend" not in request.fixturenames:
        return
    clause = _clause_of(request.node)
    if clause is None:
        return
    backend = request.getfixturevalue("backend")
    recorder = request.getfixturevalue("result")
    spec = state(request.config).specs.clauses.get(clause)
    if spec is not None and backend.family not in spec.applies_to:
        why = backend.manifest.not_applicable_reason(clause)  # the family's reason, when its adapter gives one
        recorder.not_applicable(
            f"{clause} applies to {', '.join(spec.applies_to)} backends; {backend.name} is a {backend.family} backend"
            + (f": {why}" if why else "")
        )
    reason = backend.manifest.not_applicable_reason(clause)
    if reason:
        recorder.not_applicable(reason)


def _clause_of(item) -> str | None:
    marker = item.get_closest_marker("clause")
    if marker:
        return marker.args[0]
    match = _CLAUSE_IN_NAME.search(item.name)
    return f"{match.group(1)}-{match.group(2)}" if match else None


# ---------------------------------------------------------------------------------------------
# Selection


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        index, total = (int(x) for x in text.split("/"))
    except ValueError:
        raise pytest.UsageError(f"--conformance-shard takes I/N, e.g. 2/4; got {text!r}") from None
    if not 1 <= index <= total:
        raise pytest.UsageError(f"--conformance-shard {text}: I must be between 1 and N")
    return index, total


def _shard_of(item, total: int) -> int:
    # By module and test id, not by path, so every machine computes the same split.
    key = f"{item.module.__name__}::{item.name}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "little") % total


def pytest_collection_modifyitems(session, config, items):
    if not _active(config):
        return
    st = state(config)
    mandatory = set(st.profile.clauses)
    shard = parse_shard(config.getoption("conformance_shard"))
    keep, drop = [], []
    for item in items:
        clause = _clause_of(item)
        selected = clause is None or clause.startswith("NUM-") or clause in mandatory
        if selected and shard is not None:
            selected = _shard_of(item, shard[1]) == shard[0] - 1
        (keep if selected else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# ---------------------------------------------------------------------------------------------
# Worker side: meta, watchdog files, classification


def _meta(item) -> dict[str, Any]:
    callspec = getattr(item, "callspec", None)
    params = dict(callspec.params) if callspec else {}
    meta = {"clause": _clause_of(item), "test": item.originalname or item.name}
    if "backend" in params:
        meta["backend"] = params["backend"]
    for key in ("op", "dtype", "program", "runner", "stage"):
        if key in params and isinstance(params[key], str):
            meta[key] = params[key]
    return meta


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    config = item.config
    if not _active(config):
        yield
        return
    st = state(config)
    marker = None
    if st.run_dir is not None and _is_worker(config):
        marker = st.run_dir / f"{os.getpid()}.json"
        marker.write_text(json.dumps({"nodeid": item.nodeid, "start": time.time(), "pid": os.getpid()}))
    try:
        yield
    finally:
        if marker is not None:
            marker.unlink(missing_ok=True)


def pytest_runtest_setup(item):
    if _active(item.config):
        item.user_properties.append((META_KEY, transport.encode(_meta(item))))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if not _active(item.config):
        return
    report = outcome.get_result()
    if report.passed and report.when in ("setup", "teardown"):
        _clean_report(report)
        return
    recorder = item.stash.get(_RECORDER, None)
    record = dict(recorder.data) if recorder else {"clause": _clause_of(item)}
    record.update(_meta(item))
    category, message = _classify(report, call, record.get("category"))
    record["category"] = category.value
    record.setdefault("message", message)
    if message and record["message"] != message and category.is_failure:
        record["message"] = message
    exc = _check_failure(call.excinfo.value) if call.excinfo else None
    if exc is not None:
        record.setdefault("stats", {}).update(exc.stats)
        if exc.stage:
            record["stage"] = exc.stage
    record["phase"] = report.when
    report.user_properties.append((RESULT_KEY, transport.encode(record)))
    _clean_report(report)


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
    if not _active(config) or not _is_worker(config):
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


def _classify(report, call, declared: str | None) -> tuple[Category, str]:
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        for category in (Category.NOT_SUPPORTED, Category.NOT_APPLICABLE):
            if reason.startswith(f"{category.value}: "):
                return category, reason[len(category.value) + 2 :]
        if hasattr(report, "wasxfail"):
            return Category.XFAIL, report.wasxfail
        return Category.SKIP, reason
    if report.passed:
        if hasattr(report, "wasxfail"):
            return Category.XPASS, report.wasxfail
        return (Category(declared) if declared else Category.PASS), ""
    exc = call.excinfo.value if call.excinfo else None
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


# ---------------------------------------------------------------------------------------------
# Controller side: collect, crash and hang handling, write


class _Collector:
    """Controller-side hooks: gathers every result record and writes the results documents."""

    def __init__(self, st: _State):
        self.st = st

    def pytest_runtest_logreport(self, report):
        if _is_worker(self.st.config):
            return
        st = self.st
        props = dict(report.user_properties)
        if META_KEY in props:
            st.meta[report.nodeid] = _decoded(props[META_KEY], report.nodeid, {})
        if RESULT_KEY in props:
            record = _decoded(props[RESULT_KEY], report.nodeid, st.meta.get(report.nodeid, {}))
            record["nodeid"] = report.nodeid
            record["duration_s"] = round(report.duration, 6)
            previous = st.records.get(report.nodeid)
            # A teardown error must not hide a call failure; otherwise the latest phase wins.
            if previous is None or not Category(previous["category"]).is_failure:
                st.records[report.nodeid] = record
        elif report.failed and "crashed while running" in str(report.longrepr):
            _record_lost_worker(st, report)

    def pytest_sessionfinish(self, session, exitstatus):
        config = self.st.config
        if _is_worker(config):
            return
        st = self.st
        out = config.getoption("conformance_out")
        if out:
            from conformance.report import results_document

            for name in st.names:
                records = [r for r in st.records.values() if r.get("backend") == name]
                document = results_document(st, name, records)
                path = Path(out) / safe_name(name) / "results" / f"{config.getoption('conformance_tag')}.json"
                write_json_atomic(path, document)
        if st.run_dir is not None:
            for leftover in st.run_dir.glob("*"):
                leftover.unlink(missing_ok=True)
            st.run_dir.rmdir()
            st.run_dir = None


def _decoded(value: Any, nodeid: str, meta: dict) -> dict:
    """A record or meta as the worker encoded it; a HARNESS_ERROR (with ``meta``) if unreadable."""
    try:
        decoded = transport.decode(value)
        if isinstance(decoded, dict):
            return decoded
        problem = f"a {type(decoded).__name__}, not a record"
    except ValueError as exc:
        problem = str(exc)
    return {
        "clause": _clause_from_nodeid(nodeid),
        **meta,
        "category": Category.HARNESS_ERROR.value,
        "message": transport.clean_text(f"the result record of this check could not be read ({problem}): {value!r}"),
    }


def _record_lost_worker(st: _State, report) -> None:
    for marker, info in _markers(st):  # the dead worker's: the watchdog must not kill a reused pid
        if info["nodeid"] == report.nodeid:
            marker.unlink(missing_ok=True)
    meta = dict(st.meta.get(report.nodeid) or {"clause": _clause_from_nodeid(report.nodeid)})
    if report.nodeid in st.killed:
        category = Category.TIMEOUT
        message = (
            f"no result after {st.killed[report.nodeid]:.0f} s; the worker was killed "
            "(a hang the in-process timeout could not interrupt, e.g. native code holding the GIL)"
        )
    else:
        category = Category.CRASH
        message = f"the process running this check died: {_last_line(str(report.longrepr))}"
    meta.update(category=category.value, message=message, nodeid=report.nodeid, duration_s=0.0, phase="call")
    st.records[report.nodeid] = meta


def _clause_from_nodeid(nodeid: str) -> str | None:
    match = _CLAUSE_IN_NAME.search(nodeid)
    return f"{match.group(1)}-{match.group(2)}" if match else None


def _markers(st: _State):
    """(path, {nodeid, start, pid}) of every check a worker is running now."""
    if st.run_dir is None:
        return
    for marker in st.run_dir.glob("*.json"):
        try:
            yield marker, json.loads(marker.read_text())
        except (OSError, ValueError):  # being written or just removed
            continue


def _watchdog(st: _State, hard_timeout: float) -> None:
    """Kill a worker whose check runs past ``hard_timeout``; xdist then reports it lost."""
    while True:
        time.sleep(0.25)
        if st.run_dir is None or not st.run_dir.exists():
            return
        for marker, info in _markers(st):
            elapsed = time.time() - info["start"]
            if elapsed > hard_timeout and info["nodeid"] not in st.killed:
                st.killed[info["nodeid"]] = elapsed
                try:
                    os.kill(info["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
                marker.unlink(missing_ok=True)


def safe_name(name: str) -> str:
    """A backend name as a directory name."""
    return re.sub(r"[^\w.-]", "_", name)


def write_json_atomic(path: Path, document: Any) -> None:
    """``document`` as strict JSON (NaN and infinities as strings, text cleaned; see
    conformance.transport), written whole or not at all."""
    text = transport.dumps_document(document)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
