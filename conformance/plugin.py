"""The pytest plugin that turns the checks in ``conformance.checks`` into results.

Inert unless ``--conformance-backend`` is given, so it costs nothing in other test runs.

Options (group "conformance", all prefixed): ``--conformance-backend NAME`` (repeatable), ``--conformance-profile``,
``--conformance-out DIR`` (where results go), ``--conformance-hard-timeout``.

What it does:
- makes ``backend`` a fixture parametrized over the named backends (id = the
  name, marker ``backend_<name>``), and deselects checks outside the profile;
- gives every check a ``result`` recorder; the record it makes is sealed in the process that
  ran the check before any other plugin's report hook sees it (``conformance.seal``), and
  the controller builds the results from the seals. Each report also carries its record
  in ``user_properties``, for display. A record travels as one JSON string
  (``conformance.transport``): execnet refuses integers
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

import dataclasses
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conformance import scheduling, seal, supervision, transport
from conformance.report.model import result_id
from conformance.results import CHECK_PARAMETERS, CLAUSE_FAMILIES, CaseResult, Category, CheckFailure

STASH_STATE = pytest.StashKey["_State"]()
META_KEY = "conformance_meta"
RESULT_KEY = "conformance_result"
_CLAUSE_IN_NAME = re.compile(rf"test_({'|'.join(CLAUSE_FAMILIES)})_(\d{{3}})")


def pytest_addoption(parser):
    group = parser.getgroup("conformance", "backend conformance certification")
    # Every option carries the --conformance- prefix: this plugin loads in any pytest run of an
    # environment that installs the harness, and a bare --profile clashed with pytest-profiling's.
    group.addoption("--conformance-backend", action="append", default=[], metavar="NAME",
                    help="backend to certify (entry-point name or module:attr); repeatable")
    group.addoption("--conformance-profile", default="full", metavar="NAME",
                    help="certification profile from specs/profiles.toml (default: full)")
    group.addoption(
        "--conformance-profile-file",
        default=None,
        metavar="FILE",
        help="the profile as a JSON definition (written by `certify` for a claimed, user-file or selected profile); overrides --conformance-profile",
    )
    group.addoption(
        "--conformance-categories",
        action="store_true",
        help="report outcomes in the harness's categories (PASS, MISMATCH ...) instead of passed/failed/skipped, "
        "without pytest's failure sections (certify's console; the harness prints its own summary)",
    )
    group.addoption("--conformance-out", default=None, help="directory for per-backend results documents")
    group.addoption("--conformance-specs", default=None, metavar="DIR",
                    help="the spec of record to certify against instead of the installed one (a specs/ directory)")
    group.addoption("--conformance-cache", default=None, metavar="DIR",
                    help="where programs, lowerings and compiled packages are cached on disk ('off': memory only; "
                    "default: $XDG_CACHE_HOME/torch-backend-conformance)")
    group.addoption("--conformance-run-dir", default=None, metavar="DIR",
                    help="where the processes running checks leave their markers and traces (the supervisor reads them; default: a new temporary directory)")
    group.addoption("--conformance-tag", default="run", help="name of this run's results file (results/<tag>.json)")
    group.addoption(
        "--conformance-shard",
        default=None,
        metavar="I/N",
        help="run only shard I of N (deterministic by check id); merge the shards' results with `conformance merge`",
    )
    group.addoption(
        "--conformance-only",
        default=None,
        metavar="FILE",
        help="run only the checks whose node ids FILE lists, one per line (the supervisor's resume runs)",
    )
    group.addoption(
        "--conformance-durations",
        default=None,
        metavar="FILE",
        help="run the checks longest first by the durations FILE holds (a report.json or a snapshot certify writes); "
        "default: contract checks first, then NUM",
    )
    group.addoption(
        "--conformance-hard-timeout",
        type=float,
        default=None,
        help="seconds after which a check's worker is killed and the check recorded as TIMEOUT "
        "(default: 2 x --timeout + 10)",
    )


def pytest_addhooks(pluginmanager):
    from conformance import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def _active(config) -> bool:
    return bool(config.getoption("conformance_backend", default=None))


# ---------------------------------------------------------------------------------------------
# Per-process state


class _State:
    def __init__(self, config):
        from conformance import specs

        self.config = config
        self.specs = specs.load()
        definition = config.getoption("conformance_profile_file")
        if definition:
            self.profile = specs.profile_from_definition(json.loads(Path(definition).read_text(encoding="utf-8")), self.specs)
        else:
            self.profile = self.specs.profile(config.getoption("conformance_profile"))
        self.names: list[str] = list(config.getoption("conformance_backend"))
        self.backends: dict[str, Any] = {}
        self.records: dict[str, CaseResult] = {}  # nodeid -> record (controller side)
        self.meta: dict[str, dict] = {}  # nodeid -> meta from the setup report
        self.killed: dict[str, float] = {}  # nodeid -> seconds, killed by the watchdog
        self.run_dir: Path | None = None
        self.owns_run_dir = False
        self.journals: dict[str, Path] = {}  # backend name -> the results journal of this session
        self.rescheduled: dict[str, int] = {}  # nodeid -> times put back after a worker died before it
        self.ignore_crash: set[str] = set()  # crash reports xdist will send for checks that never started
        self.recycle: str | None = None  # why this worker should be replaced before its next check
        self.sealer: seal.Sealer | None = None  # where this process seals the records it makes
        self.seals: seal.Seals | None = None  # the controller's reader of every process's seals
        self.altered: list[str] = []  # records a report brought changed from their seal
        self.started = time.time()

    def backend(self, name: str):
        if name not in self.backends:
            from conformance.discovery import load

            self.backends[name] = load(name)
            self.config.hook.pytest_conformance_backend_loaded(config=self.config, backend=self.backends[name])
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
    config.addinivalue_line("markers", "stage(name): the contract call a check measures (part of its result id)")
    if not _active(config):
        return
    for name in config.getoption("conformance_backend"):
        config.addinivalue_line("markers", f"backend_{_marker_name(name)}: checks of backend {name}")
    from conformance.strategies import profiles

    # Before hypothesis' own plugin reads --hypothesis-profile. Also makes every draw independent
    # of which modules this process has imported (hypothesis' "local constants"), so a check draws
    # the same examples whichever xdist worker runs it and whatever the backend's source holds.
    profiles.register()
    from conformance import specs

    specs.use(config.getoption("conformance_specs"))
    cache = config.getoption("conformance_cache")
    if cache is not None:
        from conformance import programs

        programs.use_cache_dir(None if cache == "off" else cache, disk=cache != "off")
    st = _State(config)
    config.stash[STASH_STATE] = st
    config.pluginmanager.register(_Collector(st), "conformance-collector")
    if _is_worker(config):
        given = config.workerinput.get(WORKER_RUN_DIR)
        st.run_dir = Path(given) if given else None
        st.sealer = seal.Sealer(st.run_dir) if st.run_dir is not None else None
        supervision.die_with_parent()  # a lost controller must not leave the backend running
        share_cores(int(config.workerinput.get("workercount", 1)))
        return
    # The run directory holds the markers, beacons and traces of every process running checks
    # (conformance.supervision). The CLI's supervisor gives one it reads after the session;
    # otherwise the session makes its own. Workers learn it from their workerinput.
    given = config.getoption("conformance_run_dir")
    st.owns_run_dir = not given
    st.run_dir = Path(given) if given else Path(tempfile.mkdtemp(prefix="conformance-run-"))
    st.sealer = seal.Sealer(st.run_dir)  # without workers this process runs the checks
    st.seals = seal.Seals(st.run_dir)


WORKER_RUN_DIR = "conformance_run_dir"


def worker_threads(workers: int) -> int:
    """PyTorch's intra-op threads for each of ``workers`` processes running checks side by side:
    the machine's cores shared out, at least one."""
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def share_cores(workers: int) -> None:
    """Give this xdist worker its share of the cores (``worker_threads``). Left at PyTorch's default
    (every core), each worker's OpenMP pool spins on cores the other workers are computing on: a
    certification of the reference on 2 cores spent a fifth of its CPU time so (152 s of user time
    against 120 s with one thread each, the same checks and verdicts)."""
    import torch

    torch.set_num_threads(worker_threads(workers))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist, on the controller, before a worker starts: hand it the run directory."""
    if _active(node.config):
        node.workerinput[WORKER_RUN_DIR] = str(state(node.config).run_dir)


def pytest_sessionstart(session):
    # Not in pytest_configure: xdist registers its "dsession" plugin in its own pytest_configure,
    # after ours (tryfirst), so only now can the controller tell that it has workers to watch.
    config = session.config
    if not _active(config):
        return
    st = state(config)
    if _is_worker(config):
        # Now, not at configure: pytest's faulthandler plugin points faulthandler at stderr then.
        supervision.arm(st.run_dir)
        return
    _open_journals(st)
    if not _uses_workers(config):
        supervision.arm(st.run_dir)  # this process runs the checks itself
        return
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

    def timed_out():
        raise CheckTimedOut(f"Timeout (>{settings.timeout:g}s): the check did not finish in time")

    signal.signal(signal.SIGALRM, supervision.timeout_handler(timed_out))  # never inside an import
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
    names = config.getoption("conformance_backend")
    metafunc.parametrize(
        "backend",
        [pytest.param(n, id=n, marks=getattr(pytest.mark, f"backend_{_marker_name(n)}")) for n in names],
        indirect=True,
        scope="session",
    )


@pytest.fixture(scope="session")
def backend(request):
    """The BackendUnderTest of this check (parametrized over --conformance-backend)."""
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
        self.record.stats.update(stats)

    def not_supported(self, message: str):
        raise Declined(Category.NOT_SUPPORTED, message)

    def not_applicable(self, message: str):
        raise Declined(Category.NOT_APPLICABLE, message)


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
    from conformance.invocation import parse_shard

    try:
        return parse_shard(text) if text else None
    except ValueError as exc:
        raise pytest.UsageError(f"--conformance-shard {exc}") from None


def _no_parameters(item) -> bool:
    """A check parametrized over nothing (NUM in a profile without ops): pytest's placeholder item."""
    marker = item.get_closest_marker("skip")
    return marker is not None and str(marker.kwargs.get("reason", "")).startswith("got empty parameter set")


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
    only = _only(config.getoption("conformance_only"))
    keep, drop = [], []
    for item in items:
        clause = _clause_of(item)
        selected = clause is None or clause.startswith("NUM-") or clause in mandatory
        selected = selected and not _no_parameters(item)
        if selected and shard is not None:
            selected = _shard_of(item, shard[1]) == shard[0] - 1
        if selected and only is not None:
            selected = item.nodeid in only
        (keep if selected else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    # Longest first (conformance.scheduling): at the end of a run under pytest-xdist the worker left
    # with a long check would keep the other cores idle. Without measured durations, the contract
    # checks first: a few take seconds (PRE-008 waits for two fresh processes), the NUM checks are
    # many and short.
    keep.sort(key=lambda item: (_clause_of(item) or "").startswith("NUM-"))
    durations = config.getoption("conformance_durations")
    if durations:
        measured = scheduling.read_durations(Path(durations))
        if measured:
            keep = [keep[n] for n in scheduling.longest_first([result_id(_meta(i)) for i in keep], measured)]
    items[:] = keep


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """The plan: every check this session will run, with its meta, for the supervisor to tell
    which ones a dead session never finished. Written once by whichever process collects first
    (every xdist worker collects the same items)."""
    config = session.config
    if not _active(config):
        return
    if session.items and not _uses_workers(config):
        supervision.freeze_heap()
    st = state(config)
    if st.run_dir is None or not session.items:
        return
    plan = st.run_dir / "plan.json"
    if plan.exists():
        return
    tmp = plan.with_name(f".plan.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({item.nodeid: _meta(item) for item in session.items}))
    os.replace(tmp, plan)


def _only(path: str | None) -> set[str] | None:
    if not path:
        return None
    try:
        return {line.strip() for line in Path(path).read_text().splitlines() if line.strip()}
    except OSError as exc:
        raise pytest.UsageError(f"--conformance-only {path}: {exc}") from None


# ---------------------------------------------------------------------------------------------
# Worker side: meta, watchdog files, classification


def _meta(item) -> dict[str, Any]:
    callspec = getattr(item, "callspec", None)
    params = dict(callspec.params) if callspec else {}
    meta = {"clause": _clause_of(item), "test": item.originalname or item.name}
    if "backend" in params:
        meta["backend"] = params["backend"]
    for key in CHECK_PARAMETERS:
        if key in params and isinstance(params[key], str):
            meta[key] = params[key]
    stage = item.get_closest_marker("stage")
    if stage is not None:
        meta["stage"] = stage.args[0]
    return meta


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    config = item.config
    if not _active(config):
        yield
        return
    st = state(config)
    if st.recycle and _is_worker(config):
        # Replace this worker before it runs another check: xdist sees it lost before this check
        # started, and the controller puts the check back in the queue (pytest_handlecrashitem).
        os._exit(0)
    threads = _live_threads()
    supervision.begin(item.nodeid)
    try:
        yield
    finally:
        supervision.end()
        stray = _live_threads() - threads
        if stray and not st.recycle:
            st.recycle = f"threads left running: {', '.join(sorted(stray))[:200]}"


def _live_threads() -> set[str]:
    """Non-daemon threads other than the main one (they keep a process from exiting)."""
    return {f"{t.name}#{t.ident}" for t in threading.enumerate() if not t.daemon and t is not threading.main_thread()}


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
    record = dataclasses.replace(recorder.record, stats=dict(recorder.record.stats)) if recorder else CaseResult(clause=_clause_of(item))
    meta = _meta(item)
    record.update(**meta)
    record.id = result_id(meta)  # from the check's parameters only, never from what it found
    category, message = _classify(report, call)
    record.category = category
    if message and (not record.message or category.is_failure):
        record.message = message
    exc = _check_failure(call.excinfo.value) if call.excinfo else None
    if exc is not None:
        record.stats.update(exc.stats)
        if exc.stage:
            record.failed_stage = exc.stage  # not "stage": that one is a parameter, part of the id
    record.phase = report.when
    record.nodeid = item.nodeid
    record.duration_s = round(report.duration, 6)
    st = item.config.stash[STASH_STATE]
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


# ---------------------------------------------------------------------------------------------
# Controller side: collect, crash and hang handling, write


class _Collector:
    """Controller-side hooks: gathers every result record, journals it, writes the results documents."""

    def __init__(self, st: _State):
        self.st = st

    def pytest_runtest_logreport(self, report):
        if _is_worker(self.st.config):
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
        if _is_worker(config):
            return
        st = self.st
        _keep_unreported(st)
        out = config.getoption("conformance_out")
        if out:
            from conformance.report import results_document

            for name in st.names:
                records = [r for r in st.records.values() if r.backend == name]
                document = results_document(st, name, records)
                path = _results_dir(out, name) / f"{config.getoption('conformance_tag')}.json"
                write_json_atomic(path, document)
                journal = st.journals.get(name)
                if journal is not None and st.owns_run_dir:  # unsupervised: the document says it all
                    journal.unlink(missing_ok=True)
        if st.run_dir is not None and st.owns_run_dir:
            shutil.rmtree(st.run_dir, ignore_errors=True)
        st.run_dir = None


def _results_dir(out: str | Path, name: str) -> Path:
    return Path(out) / safe_name(name) / "results"




def _open_journals(st: _State) -> None:
    out = st.config.getoption("conformance_out")
    if not out:
        return
    from conformance.report import results_document

    tag = st.config.getoption("conformance_tag")
    for name in st.names:
        path = _results_dir(out, name) / f"{tag}{supervision.JOURNAL_SUFFIX}"
        path.parent.mkdir(parents=True, exist_ok=True)
        header = results_document(st, name, [])
        header.pop("results")
        path.write_text(transport.dumps_document(header, indent=None) + "\n", encoding="utf-8")
        st.journals[name] = path


def _keep(st: _State, record: CaseResult) -> None:
    st.records[record.nodeid] = record
    journal = st.journals.get(record.backend)
    if journal is not None:
        with open(journal, "a", encoding="utf-8") as f:
            f.write(transport.dumps_document(record.to_json(transport=True), indent=None) + "\n")


def _sealed_record(st: _State, report, carried: Any, sealed: tuple[str, str] | None) -> CaseResult:
    """The record of ``report``'s check as its process sealed it (``conformance.seal``); what the
    report carried (``carried``) is only compared with it. A record without a seal is not believed."""
    meta = st.meta.get(report.nodeid, {})
    if sealed is None:
        record = CaseResult(
            category=Category.HARNESS_ERROR,
            **{"clause": _clause_from_nodeid(report.nodeid), **meta},
            message="the result record of this check arrived without its seal: it was not made by the process that "
            "ran the check (a plugin's hook added or rewrote it), and is not believed",
        )
        st.altered.append(transport.clean_text(f"{report.nodeid} ({report.when}): a record without a seal"))
    else:
        text, sha = sealed
        st.seals.taken.add((report.nodeid, report.when))
        record = _decoded(text, report.nodeid, meta)
        if not isinstance(carried, str) or seal.digest(carried) != sha:
            st.altered.append(transport.clean_text(
                f"{report.nodeid} ({report.when}): the report brought {_category_of(carried)}; "
                f"the sealed record, {record.category.value}, stands"
            ))
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


def _keep_unreported(st: _State) -> None:
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
        st.altered.append(transport.clean_text(f"{nodeid} ({phase}): its report did not reach the harness as made; the sealed record, {record.category.value}, stands"))
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
        **{"clause": _clause_from_nodeid(nodeid), **meta},
        message=transport.clean_text(f"the result record of this check could not be read ({problem}): {value!r}"),
    )


def _record_lost_worker(st: _State, report) -> None:
    """CRASH (or TIMEOUT, if the watchdog killed it) for the check a lost worker was running,
    with how the process ended and the last contract call it reached."""
    pid = None
    for info in supervision.running(st.run_dir) if st.run_dir else ():
        if info["nodeid"] == report.nodeid:
            pid = info["pid"]
    status = _exit_status(getattr(report, "node", None))
    meta = dict(st.meta.get(report.nodeid) or {"clause": _clause_from_nodeid(report.nodeid)})
    killed_after = st.killed.get(report.nodeid)
    record = lost_record(meta, st.run_dir, pid, None if killed_after is not None else status, killed_after=killed_after)
    if pid is not None and st.run_dir is not None:
        supervision.forget(st.run_dir, pid)  # the watchdog must not kill a reused pid
    record.update(nodeid=report.nodeid, duration_s=0.0, phase="call")
    _keep(st, record)


def lost_record(meta: dict, run_dir: Path | None, pid: int | None, status: int | None, *, killed_after: float | None = None) -> CaseResult:
    """The record of a check (``meta``: its parameters, as the plan or its setup report gave them)
    whose process died (``status``: its exit status, negative for a signal) or was killed by a
    watchdog after ``killed_after`` seconds."""
    words = supervision.last_words(run_dir, pid) if run_dir is not None and pid is not None else None
    where = words.describe() if words else ""
    stats: dict[str, Any] = {}
    if words is not None:
        stats.update({k: v for k, v in (("last_stage", words.stage), ("where", words.where), ("innermost_frame", words.innermost)) if v})
    if killed_after is not None:
        category = Category.TIMEOUT
        message = (
            f"no result after {killed_after:.0f} s; the process was killed (a hang the in-process timeout "
            "could not interrupt, e.g. native code holding the GIL)" + (f"; it was {where}" if where else "")
        )
        stats["killed_after_s"] = round(killed_after, 1)
    else:
        how, signame = supervision.describe_exit(status)
        category = Category.CRASH
        message = f"the process running this check {how}" + (f" {where}" if where else "") + "; the run went on in a new process"
        if words is not None and words.fatal:
            message += f" (faulthandler: {words.fatal})"
        stats["exit_status"] = status
        if signame:
            stats["signal"] = signame
    record = CaseResult(**meta)
    record.update(category=category, message=transport.clean_text(message), id=result_id(meta))
    record.stats.update(stats)
    return record


def _exit_status(node) -> int | None:
    """The exit status of a lost xdist worker (execnet keeps its Popen; private, so guarded)."""
    try:
        popen = node.gateway._io.popen
        return popen.wait(timeout=5)
    except Exception:
        return None


def _clause_from_nodeid(nodeid: str) -> str | None:
    match = _CLAUSE_IN_NAME.search(nodeid)
    return f"{match.group(1)}-{match.group(2)}" if match else None


def _watchdog(st: _State, hard_timeout: float) -> None:
    """Kill a worker whose check runs past ``hard_timeout``; xdist then reports it lost."""
    while True:
        time.sleep(0.25)
        run_dir = st.run_dir
        if run_dir is None or not run_dir.exists():
            return
        for info in supervision.running(run_dir):
            elapsed = time.time() - info["start"]
            if elapsed > hard_timeout and info["nodeid"] not in st.killed and info["pid"] != os.getpid():
                st.killed[info["nodeid"]] = elapsed
                supervision.kill(info["pid"])


SAFE_NAME_BYTES = 96


def safe_name(name: str) -> str:
    """A backend name (or any backend-provided string) as one path component: only word characters,
    dots and dashes, no leading or trailing dots (so never "." or ".."), and at most SAFE_NAME_BYTES
    bytes (a long one keeps a prefix and a hash of the whole, so two names stay two directories)."""
    text = re.sub(r"[^\w.-]", "_", name).strip(".") or "_"
    if len(text.encode()) > SAFE_NAME_BYTES:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        text = text.encode()[: SAFE_NAME_BYTES - 17].decode("utf-8", "ignore") + "-" + digest
    return text


def write_json_atomic(path: Path, document: Any) -> None:
    """``document`` as strict JSON (NaN and infinities as strings, text cleaned; see
    conformance.transport), written whole or not at all."""
    write_text_atomic(path, transport.dumps_document(document))


def write_text_atomic(path: Path, text: str) -> None:
    """``text`` at ``path``, whole or not at all (a temporary file beside it, then a rename). The
    temporary file goes when the write fails or is interrupted (Ctrl-C, SIGTERM); one that a killed
    writer left (its process is gone) goes with the next write of the same file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for orphan in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        pid = orphan.name[len(path.name) + 2 : -len(".tmp")]
        if pid.isdigit() and not _process_alive(int(pid)):
            orphan.unlink(missing_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
