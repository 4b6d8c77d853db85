"""Shared fixtures: hypothesis profiles, and the seeded proof's certification runs."""

from __future__ import annotations

import pytest

from conformance.strategies import profiles

profiles.register()


def pytest_configure(config):
    """The project's own xdist workers share the cores as certify's do (conformance.plugin.share_cores)."""
    if hasattr(config, "workerinput"):
        from conformance.plugin import share_cores

        share_cores(int(config.workerinput.get("workercount", 1)))


@pytest.fixture(scope="session")
def certified(tmp_path_factory, worker_id):
    """backend name -> its report of the seeded proof (tests/seeded_proof.py): each chunk of the
    seeded backends certified once per test run, by the first worker that reads one of its reports.
    Imported here, not at start-up: the seeded backends load only in runs that read them."""
    from tests.seeded_proof import SeededReports
    # Under xdist the base temp's parent is this run's own directory, common to its workers.
    shared = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    return SeededReports(shared)


def pytest_collection_modifyitems(config, items):
    """The seeded proof's chunks first (a stable sort: the rest keep their order). Each is minutes of
    one worker's time; collected last (tests/test_seeded_defects.py), they left the other workers
    idle while the last chunks ran. pytest-xdist hands out the groups in collection order."""

    def chunk_first(item) -> int:
        group = item.get_closest_marker("xdist_group")
        return 0 if group and str(group.args[0]).startswith("seeded-") else 1

    items.sort(key=chunk_first)
