"""The order a certification runs its checks in, and the list-scheduling model of its wall time."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conformance.run import scheduling
from conformance.run.invocation import CLOSED_RUN_PLUGINS, environment


def test_list_schedule_is_greedy_longest_first():
    # LPT on 2 workers: 7 | 5, then 4 -> the 5, 3 -> the 7, 2 -> the 9 ... makespan 11 (total 21).
    assert scheduling.list_schedule([2, 7, 3, 5, 4], workers=2) == 11
    assert scheduling.list_schedule([2, 7, 3, 5, 4], workers=1) == 21
    assert scheduling.list_schedule([2, 7, 3, 5, 4], workers=5) == 7
    assert scheduling.list_schedule([2, 7, 3, 5, 4], workers=2, startup=1.5) == 12.5
    assert scheduling.list_schedule([], workers=3, startup=2) == 2
    with pytest.raises(ValueError):
        scheduling.list_schedule([1], workers=0)


def test_critical_path_bounds_every_schedule():
    durations = [0.5] * 40 + [9.0]
    for workers in (1, 2, 16, 64):
        assert scheduling.list_schedule(durations, workers, startup=3) >= scheduling.critical_path(durations, startup=3)
    assert scheduling.list_schedule(durations, 64, startup=3) == scheduling.critical_path(durations, startup=3) == 12


def test_longest_first_counts_an_unmeasured_check_as_the_median_one_and_keeps_ties_in_order():
    ids = ["a", "b", "new", "c", "d", "e"]
    durations = {"a": 1.0, "b": 8.0, "c": 3.0, "d": 3.0, "e": 0.1}
    order = [ids[n] for n in scheduling.longest_first(ids, durations)]
    assert order == ["b", "new", "c", "d", "a", "e"]  # median 3.0: "new" ties c and d, before them by position
    assert scheduling.longest_first(ids, {}) == list(range(len(ids)))


def test_durations_are_read_from_a_report_or_a_snapshot_and_a_bad_file_gives_none(tmp_path):
    report = {"results": [{"id": "x", "duration_s": 2.5}, {"id": "y"}, {"id": "z", "duration_s": "slow"}]}
    (tmp_path / "report.json").write_text(json.dumps(report))
    assert scheduling.read_durations(tmp_path / "report.json") == {"x": 2.5}
    scheduling.write_durations(tmp_path / "logs" / "durations.json", {"x": 2.5, "w": 1})
    assert scheduling.read_durations(tmp_path / "logs" / "durations.json") == {"w": 1.0, "x": 2.5}
    (tmp_path / "broken.json").write_text("{not json")
    assert scheduling.read_durations(tmp_path / "broken.json") == {}
    assert scheduling.read_durations(tmp_path / "absent.json") == {}
    (tmp_path / "list.json").write_text("[1, 2]")
    assert scheduling.read_durations(tmp_path / "list.json") == {}


def _collected(tmp_path, *extra: str) -> list[str]:
    args = [sys.executable, "-m", "pytest", *CLOSED_RUN_PLUGINS, "--pyargs", "conformance.checks", "-p", "no:cacheprovider",
            "-o", "addopts=", "--conformance-backend", "reference", "--conformance-profile", "smoke",
            "--collect-only", "-q", *extra]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, env=environment(), timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


def _result_id(nodeid: str) -> str:
    """report.json's id of a check: its name and parameters but the backend (``test[op|dtype]``)."""
    name, _, params = nodeid.split("::")[-1].partition("[")
    kept = [p for p in params.rstrip("]").split("-") if p and p != "reference"]
    return f"{name}[{'|'.join(kept)}]" if kept else name


@pytest.mark.slow
def test_the_plugin_runs_measured_checks_longest_first(tmp_path):
    default = _collected(tmp_path)
    assert default, "nothing collected"
    numerics = [n for n, nodeid in enumerate(default) if "test_NUM_" in nodeid]
    assert numerics and min(numerics) > max(n for n, nodeid in enumerate(default) if "test_NUM_" not in nodeid)
    # A NUM check measured as the longest runs first; one measured as instant runs last.
    slow = next(nodeid for nodeid in default if "test_NUM_" in nodeid)
    fast = next(nodeid for nodeid in default if "test_RT_" in nodeid)
    ids = {nodeid: _result_id(nodeid) for nodeid in default}
    durations = {ids[nodeid]: 1.0 for nodeid in default} | {ids[slow]: 60.0, ids[fast]: 0.0}
    snapshot = tmp_path / "durations.json"
    scheduling.write_durations(snapshot, durations)
    ordered = _collected(tmp_path, "--conformance-durations", str(snapshot))
    assert sorted(ordered) == sorted(default)
    assert ordered[0] == slow and ordered[-1] == fast, (ordered[:3], ordered[-3:])
