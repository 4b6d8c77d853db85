"""Every check ends: the per-check timer (pytest-timeout's, raising ``CheckTimedOut``), the
controller's watchdog that kills a worker hung past the hard timeout (a hang the timer could not
interrupt: native code holding the GIL), and worker recycling: a worker whose check timed out,
failed in the harness or left threads running is replaced before its next check.

The markers the watchdog reads, and its kill, are ``conformance.run.supervision``'s, shared with
the CLI's supervisor; a worker the watchdog killed is recorded TIMEOUT by the collector.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time

import pytest

from conformance.plugin.session import State, active, is_worker, state
from conformance.run import supervision


class CheckTimedOut(BaseException):
    """The per-check timeout. A BaseException, not pytest.fail's ``Failed``: hypothesis catches
    ``Failed`` as a test failure, shrinks and replays the example (which hangs again, now with
    no timer armed); this one it lets through, so the check ends at once as TIMEOUT."""


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    """pytest-timeout's signal method, raising CheckTimedOut instead of calling pytest.fail."""
    if not active(item.config) or settings.method != "signal":
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


def start_watchdog(st: State, hard_timeout: float) -> None:
    threading.Thread(target=_watchdog, args=(st, hard_timeout), daemon=True, name="conformance-watchdog").start()


def _watchdog(st: State, hard_timeout: float) -> None:
    """Kill a worker whose check runs past ``hard_timeout``; xdist then reports it lost."""
    while True:
        time.sleep(0.25)
        run_dir = st.run_dir
        if run_dir is None or not run_dir.exists():
            return
        supervision.kill_overdue(run_dir, lambda info: math.inf if info["pid"] == os.getpid() else hard_timeout, st.killed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    config = item.config
    if not active(config):
        yield
        return
    st = state(config)
    if st.recycle and is_worker(config):
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
