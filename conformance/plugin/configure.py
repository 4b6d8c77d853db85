"""A session's start in each of its processes: the spec, the caches and the state; the run directory
the supervisor reads; in a worker, its share of the cores; on the controller, the journals and the
watchdog over the workers."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from conformance import seal
from conformance.plugin.collector import Collector, open_journals
from conformance.plugin.items import marker_name
from conformance.plugin.session import STASH_STATE, State, active, is_worker, state, uses_workers
from conformance.plugin.watchdog import start_watchdog
from conformance.run import supervision

WORKER_RUN_DIR = "conformance_run_dir"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.addinivalue_line("markers", "clause(id): the contract clause a check verifies")
    config.addinivalue_line("markers", "stage(name): the contract call a check measures (part of its result id)")
    if not active(config):
        return
    for name in config.getoption("conformance_backend"):
        config.addinivalue_line("markers", f"backend_{marker_name(name)}: checks of backend {name}")
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
    st = State(config)
    config.stash[STASH_STATE] = st
    config.pluginmanager.register(Collector(st), "conformance-collector")
    if is_worker(config):
        given = config.workerinput.get(WORKER_RUN_DIR)
        st.run_dir = Path(given) if given else None
        st.sealer = seal.Sealer(st.run_dir) if st.run_dir is not None else None
        supervision.die_with_parent()  # a lost controller must not leave the backend running
        share_cores(int(config.workerinput.get("workercount", 1)))
        return
    # The run directory holds the markers, beacons and traces of every process running checks
    # (conformance.run.supervision). The CLI's supervisor gives one it reads after the session;
    # otherwise the session makes its own. Workers learn it from their workerinput.
    given = config.getoption("conformance_run_dir")
    st.owns_run_dir = not given
    st.run_dir = Path(given) if given else Path(tempfile.mkdtemp(prefix="conformance-run-"))
    st.sealer = seal.Sealer(st.run_dir)  # without workers this process runs the checks
    st.seals = seal.Seals(st.run_dir)


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
    if active(node.config):
        node.workerinput[WORKER_RUN_DIR] = str(state(node.config).run_dir)


@pytest.hookimpl(wrapper=True)
def pytest_sessionstart(session):
    # Not in pytest_configure: xdist registers its "dsession" plugin in its own pytest_configure,
    # after ours (tryfirst), so only now can the controller tell that it has workers to watch.
    # After every other plugin's sessionstart (a wrapper's code after its yield): pytest-xdist's
    # controller starts its workers in its own, so what the controller does here (the journals'
    # headers describe the machine, which imports torch: about 3 s) overlaps their start-up
    # instead of delaying it. No result can arrive before: workers report in the run loop.
    yield
    config = session.config
    if not active(config):
        return
    st = state(config)
    if is_worker(config):
        # Now, not at configure: pytest's faulthandler plugin points faulthandler at stderr then.
        supervision.arm(st.run_dir)
        return
    open_journals(st)
    if not uses_workers(config):
        supervision.arm(st.run_dir)  # this process runs the checks itself
        return
    timeout = config.getoption("timeout", default=None) or 0
    hard = config.getoption("conformance_hard_timeout") or (2 * float(timeout) + 10 if timeout else None)
    if hard and st.run_dir is not None:
        start_watchdog(st, hard)
