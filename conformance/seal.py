"""Results sealed where they are made, before any third-party hook sees them.

A backend may ship pytest plugins of its own (``BackendUnderTest.pytest_plugins``, the hooks of
``conformance.plugin.hookspecs``); certify loads them into its otherwise closed run. Such a plugin can
implement any pytest hook, and every hook that sees a report after the check ran
(``pytest_runtest_makereport`` wrappers outside ours, ``pytest_runtest_logreport`` in the worker
and on the controller, the report's (de)serialization) can rewrite the record it carries. So the
record on the report is not the one the results are built from:

- In the process that ran the check, the plugin's ``pytest_runtest_makereport`` wrapper makes the
  record (category, message, statistics, duration) and, before the hook returns the report,
  appends it with the SHA-256 of its encoded text to a *seal file* of that process in the run
  directory (``sealed/<pid>.jsonl``, one JSON line per record, written and flushed at once). The
  same encoded text goes on the report (``conformance_result``), for display.
- The controller takes each check's record from the seal files, never from the report; a line
  whose text does not match its hash (torn, edited) is not a seal. When the record the report
  brought differs from the sealed one (its hash differs), the sealed one stands and the change is
  listed in the results document (``run.altered``): a plugin may add facts through the hooks of
  ``conformance.plugin.hookspecs``, it cannot change a category.
- A record that arrives with no seal is not believed: the check is a HARNESS_ERROR that says so.
  A sealed record whose report never reached the controller (a hook raised on the way) is still
  kept when the session ends.
- Every plugin module outside pytest, the harness and the engines of a closed run is *foreign*:
  the results document lists each with the hooks it implements (``run.backend_plugins``), and the
  verdict names them.

Why this holds: pytest calls ``pytest_runtest_makereport`` wrappers from the last registered out,
and certify registers ``conformance.plugin`` (``-p``) before a backend's plugins, so their wrappers
sit outside ours and see the report after the seal (one marked ``trylast`` would sit inside, like
a plain implementation: see below); ``pytest_runtest_logreport`` and everything
after it come later still. A hash alone would not do (anyone can recompute SHA-256): the seal is
the copy that never travels on the report. The hash tells a torn or edited line, and whether the
report's copy was changed.

What a seal cannot do: code running in the checks' own process can change what a check observes
before its record is made: the backend itself, or a plugin that makes the report itself (a plain
``pytest_runtest_makereport`` or a ``pytest_pyfunc_call``) or reaches into the harness. No hash
made in that process can tell; that is why the report names every foreign plugin with its hooks,
and the verdict names the plugins. The seal closes the report path, the one a plugin is given.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

SEALS_DIR = "sealed"
HARNESS_PLUGINS = frozenset({"conformance", "xdist", "pytest_timeout", "pytest_benchmark", "_hypothesis_pytestplugin", "hypothesis"})
"""Top-level packages whose pytest plugins a closed run loads itself (conformance.run.invocation)."""


def digest(text: str) -> str:
    """The SHA-256 of a record's encoded text (``conformance.run.transport.encode``: canonical JSON,
    keys sorted, ASCII)."""
    return hashlib.sha256(text.encode("ascii", "backslashreplace")).hexdigest()


class Sealer:
    """The seal file of the process running checks."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / SEALS_DIR / f"{os.getpid()}.jsonl"

    def seal(self, nodeid: str, phase: str, text: str) -> str:
        """Append the record ``text`` of ``nodeid``'s ``phase``; its hash."""
        sha = digest(text)
        line = json.dumps({"nodeid": nodeid, "phase": phase, "record": text, "sha256": sha}, ensure_ascii=True, sort_keys=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One write of a whole line, flushed before the report leaves this hook; O_APPEND keeps the
        # lines of a replaced worker and its successor with a reused pid whole.
        data = (line + "\n").encode("ascii")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)
        return sha


class Seals:
    """The controller's view of every seal file of a run directory, read as they grow."""

    def __init__(self, run_dir: Path):
        self.dir = Path(run_dir) / SEALS_DIR
        self._offsets: dict[Path, int] = {}
        self._seals: dict[tuple[str, str], tuple[str, str]] = {}  # (nodeid, phase) -> (text, sha256)
        self._order: list[tuple[str, str]] = []
        self.taken: set[tuple[str, str]] = set()
        """(nodeid, phase) of the seals the controller has matched with a report."""

    def get(self, nodeid: str, phase: str) -> tuple[str, str] | None:
        """(encoded record, sha256) sealed for ``nodeid``'s ``phase``, or None."""
        key = (nodeid, phase)
        if key not in self._seals:
            self._read()
        return self._seals.get(key)

    def all(self) -> list[tuple[str, str, str]]:
        """Every seal so far, in the order it was read: (nodeid, phase, encoded record)."""
        self._read()
        return [(nodeid, phase, self._seals[(nodeid, phase)][0]) for nodeid, phase in self._order]

    def _read(self) -> None:
        if not self.dir.is_dir():
            return
        for path in sorted(self.dir.glob("*.jsonl")):
            offset = self._offsets.get(path, 0)
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    chunk = f.read()
            except OSError:
                continue
            end = chunk.rfind(b"\n") + 1  # a line still being written is read next time
            self._offsets[path] = offset + end
            for raw in chunk[:end].splitlines():
                self._add(raw)

    def _add(self, raw: bytes) -> None:
        try:
            entry: Any = json.loads(raw)
            nodeid, phase, text, sha = entry["nodeid"], entry["phase"], entry["record"], entry["sha256"]
        except (ValueError, KeyError, TypeError):
            return
        if not all(isinstance(v, str) for v in (nodeid, phase, text, sha)) or digest(text) != sha:
            return
        key = (nodeid, phase)
        if key not in self._seals:
            self._order.append(key)
        self._seals[key] = (text, sha)


def foreign_plugins(pluginmanager) -> dict[str, list[str]]:
    """Plugin modules loaded from outside pytest, the harness and a closed run's engines, each with
    the pytest hooks it implements: what could have reached a check beyond the harness."""
    out: dict[str, list[str]] = {}
    for _, plugin in pluginmanager.list_name_plugin():
        module = getattr(plugin, "__name__", None)
        if not isinstance(module, str) or module in ("pytest", "__main__"):
            continue
        top = module.split(".")[0]
        if top.startswith("_pytest") or top in HARNESS_PLUGINS:
            continue
        hooks = sorted(caller.name for caller in pluginmanager.get_hookcallers(plugin) or ())
        out[module] = sorted(set(out.get(module, [])) | set(hooks))
    return dict(sorted(out.items()))
