"""The plugin's state in one process of a session, and what every hook asks first: is the harness
active, is this process an xdist worker, does it have workers."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from conformance import seal
from conformance.results import CaseResult

STASH_STATE = pytest.StashKey["State"]()


def active(config) -> bool:
    """Inert unless ``--conformance-backend`` is given, so the plugin costs nothing in other test runs."""
    return bool(config.getoption("conformance_backend", default=None))


def is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def uses_workers(config) -> bool:
    return not is_worker(config) and config.pluginmanager.hasplugin("dsession")


class State:
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
        self.killed: dict[str, tuple[int, float]] = {}  # nodeid -> (pid, seconds), killed by the watchdog
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


def state(config) -> State:
    return config.stash[STASH_STATE]
