"""How the project's own test run would scale with workers: list scheduling of its measured test
durations, the way pytest-xdist's ``--dist loadgroup`` hands them out.

    python benchmarks/suite_scaling.py tests/artifacts/junit.xml [--workers 1,2,4,8,16] [--startup S]

``nox -s tests`` writes every test's time to tests/artifacts/junit.xml. The tests of one
``xdist_group`` run on one worker, one after another (they share a session fixture), so the model
schedules each group as a single task: its tests' summed time. A worker's start-up (``--startup``,
default 10 s: importing torch and collecting the suite) is paid by every worker. The longest task
plus a start-up is the floor no number of workers goes below.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import pytest
from tabulate import tabulate

from conformance.run.scheduling import critical_path, list_schedule

ROOT = Path(__file__).resolve().parents[1]


class _Groups:
    """A pytest plugin that records each collected test's xdist_group."""

    def __init__(self) -> None:
        self.group: dict[str, str] = {}

    def pytest_collection_modifyitems(self, items) -> None:
        for item in items:
            mark = item.get_closest_marker("xdist_group")
            if mark is not None:
                self.group[item.nodeid] = mark.args[0] if mark.args else mark.kwargs.get("name", "default")


def _junit_key(nodeid: str) -> tuple[str, str]:
    """A node id as junit names it: (dotted module path and classes, test name)."""
    path, *rest = nodeid.split("::")
    return path.removesuffix(".py").replace("/", ".") + "".join("." + r for r in rest[:-1]), rest[-1]


def groups() -> dict[tuple[str, str], str]:
    plugin = _Groups()
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", str(ROOT / "tests")], plugins=[plugin])
    if code not in (0, 5):
        sys.exit(f"collecting the tests failed (exit {code})")
    return {_junit_key(nodeid): group for nodeid, group in plugin.group.items()}


def durations(junit: Path) -> dict[tuple[str, str], float]:
    """Each test's seconds, keyed as junit names it."""
    return {
        (c.get("classname", ""), c.get("name", "")): float(c.get("time", 0)) for c in ET.parse(junit).getroot().iter("testcase")
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path)
    parser.add_argument("--workers", default="1,2,4,8,16")
    parser.add_argument("--startup", type=float, default=10.0)
    ns = parser.parse_args(argv)
    times = durations(ns.junit)
    by_group = groups()
    tasks: dict[str, float] = defaultdict(float)
    for key, seconds in times.items():
        tasks[by_group.get(key, "::".join(key))] += seconds
    counts = [int(w) for w in ns.workers.split(",")]
    walls = {w: list_schedule(tasks.values(), w, ns.startup) for w in {1, *counts}}
    rows = [[w, f"{walls[w]:.0f}", f"{walls[1] / walls[w]:.2f}"] for w in counts]
    longest = max(tasks, key=tasks.get)
    print(f"{len(times)} tests, {sum(times.values()):.0f} s of test time, {len(tasks)} tasks "
          f"({len(set(by_group.values()))} xdist groups); longest task {longest} {tasks[longest]:.0f} s")  # fmt: skip
    print(tabulate(rows, headers=["workers", "wall s (model)", "speed-up (model)"], tablefmt="github"))
    print(f"critical path {critical_path(tasks.values(), ns.startup):.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
