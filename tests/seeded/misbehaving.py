"""Backends that attack the run itself rather than the contract: they kill, hang or outlive the
process that runs them, or feed it hostile strings and names. tests/test_supervisor.py and the
report tests certify them through the real CLI and check that the run still ends, with a result
for every planned check, the right categories, the documented exit status and a report that
``verify`` accepts.

Each is the reference backend with one misbehaviour. Several misbehave only in a named check
(pytest sets PYTEST_CURRENT_TEST while a test runs), so one test pays for one misbehaviour and
its result can be checked precisely. Every backend is an attribute of this module:
``tests/seeded/misbehaving.py:<name>`` certifies it from the command line.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time

from conformance.api import BackendUnderTest
from reference_backend import ReferenceBackend, ReferenceRuntime, backend_under_test

_REFERENCE = backend_under_test()
_LIBC = ctypes.CDLL(None)
_PYLIBC = ctypes.PyDLL(None)  # calls through it keep the GIL


def _make(name: str, runtime=None, details=ReferenceBackend, **fields) -> BackendUnderTest:
    return BackendUnderTest(
        name=f"misbehaving-{name.replace('_', '-')}",
        details=details,
        runtime=runtime if runtime is not None else ReferenceRuntime(),
        version="seeded",
        manifest=_REFERENCE.manifest,
        description=f"the reference, misbehaving: {name}",
        **fields,
    )


def _in(*parts: str) -> bool:
    """Whether the running check's node id holds every one of ``parts``."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "")
    return all(p in current for p in parts)


def _segfault() -> None:
    ctypes.string_at(0)  # a null-pointer read: SIGSEGV


def _hang_holding_the_gil() -> None:
    """Lock a pthread mutex twice through a ctypes.PyDLL call, which keeps the GIL: a deadlock in
    native code that no signal ends (a mutex wait is not interrupted by signals), so neither a
    Python signal handler nor any other thread of this process ever runs again."""
    mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER on glibc
    _PYLIBC.pthread_mutex_lock(mutex)
    _PYLIBC.pthread_mutex_lock(mutex)


# -- crashes and hangs -------------------------------------------------------------------------


class SegfaultsInEveryExecute(ReferenceRuntime):
    def execute(self, context, handle, args):
        _segfault()
        return super().execute(context, handle, args)


segfaults_in_every_execute = _make("segfaults_in_every_execute", SegfaultsInEveryExecute())
"""Dozens of crashes in one run: far past pytest-xdist's cap on worker restarts."""


class Misbehaves(ReferenceRuntime):
    """One way to end or stall a process per check, so each costs exactly that check's result:

    ========================  =======  ==================================================
    check                     call     misbehaviour
    ========================  =======  ==================================================
    RT-002 (round trip)       execute  ``os._exit(0)``: "exits cleanly" mid-call
    RT-003 (two handles)      init     ``abort()``: SIGABRT, a failed native assertion
    RT-004 (repeat execute)   execute  a null-pointer read: SIGSEGV
    RT-005 (buffer freed)     init     deadlocks in native code holding the GIL
    PERF-002, mlp             init     deadlocks holding the GIL, in the session that has
                                       no xdist worker to lose
    PERF-003, mlp             execute  SIGSEGV, likewise
    PERF-003, chain           execute  ``os._exit(0)``, likewise
    every init                         starts a non-daemon thread destroy never stops,
                                       so no process that ran the backend can exit
    ========================  =======  ==================================================
    """

    def init(self, context, processed, compile_specs):
        if _in("RT_003"):
            _LIBC.abort()
        if _in("RT_005") or _in("PERF_002", "mlp", "backend"):
            _hang_holding_the_gil()
        handle = super().init(context, processed, compile_specs)
        stop = threading.Event()
        threading.Thread(target=stop.wait, args=(600,), name="backend-watcher", daemon=False).start()
        return handle

    def execute(self, context, handle, args):
        if _in("RT_002") or _in("PERF_003", "chain", "backend"):
            os._exit(0)
        if _in("RT_004") or _in("PERF_003", "mlp", "backend"):
            _segfault()
        return super().execute(context, handle, args)


misbehaves = _make("misbehaves", Misbehaves())


class SleepsThenWorks(ReferenceRuntime):
    """Each init sleeps CONFORMANCE_TEST_INIT_SLEEP_S seconds (default 0): a slow backend for
    the run's time budget."""

    def init(self, context, processed, compile_specs):
        time.sleep(float(os.environ.get("CONFORMANCE_TEST_INIT_SLEEP_S", "0")))
        return super().init(context, processed, compile_specs)


slow_init = _make("slow_init", SleepsThenWorks())


class LeavesAThread(ReferenceRuntime):
    """Its first init starts one non-daemon thread, "backend-poller", which no destroy stops: a
    single thread, so no count of threads grows with init/destroy cycles, yet no process that
    loaded the backend can exit."""

    _poller: threading.Thread | None = None

    def init(self, context, processed, compile_specs):
        if LeavesAThread._poller is None:
            LeavesAThread._poller = threading.Thread(target=threading.Event().wait, args=(600,), name="backend-poller", daemon=False)
            LeavesAThread._poller.start()
        return super().init(context, processed, compile_specs)


leaves_a_thread = _make("leaves_a_thread", LeavesAThread())


# -- hostile names ------------------------------------------------------------------------------


def _wrong_add_runtime() -> ReferenceRuntime:
    from reference_backend.kernels import KERNELS

    table = dict(KERNELS)
    add = KERNELS["aten.add.Tensor"]
    table["aten.add.Tensor"] = lambda self, other, *, alpha=1: add(self, other, alpha=alpha) + 1
    return ReferenceRuntime(kernels=table)


def _named(name: str) -> BackendUnderTest:
    return BackendUnderTest(
        name=name, details=ReferenceBackend, runtime=_wrong_add_runtime(), version="seeded", manifest=_REFERENCE.manifest,
        description="adds one too many, under a name that must not become a path as it is",
    )


named_dot_dot = _named("..")
"""Its replays would land one directory above --output if its name became a path as it is."""
named_300_bytes = _named("b" * 150 + "/é" * 50)
"""300 bytes: over a file system's 255-byte limit for one path component."""


# -- hostile strings ----------------------------------------------------------------------------

HOSTILE = "\x1b[2J\x1b]0;pwned\x07<script>alert(1)</script>[x](javascript:alert(1)) \udc80\x00\r"


class ShoutsInErrors(ReferenceRuntime):
    def execute(self, context, handle, args):
        from conformance.api import BackendError, Error

        raise BackendError(Error.Internal, HOSTILE + "y" * 1_000_000)


hostile_strings = BackendUnderTest(
    name="hostile" + HOSTILE,
    details=ReferenceBackend,
    runtime=ShoutsInErrors(),
    version="1.0" + HOSTILE,
    manifest=_REFERENCE.manifest,
    description=HOSTILE + "d" * 1_000_000,
)
"""Terminal escapes, a lone surrogate, NUL, markup and a megabyte in its name, version, description
and every error message."""
