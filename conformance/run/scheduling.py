"""The order checks run in, and what a schedule of measured durations predicts.

A certification's wall time on k workers is bounded below by two things: the total work divided
by k, and its critical path (a worker's start-up plus the longest check). Running the longest
checks first (Graham's LPT rule) keeps the second from adding to the first: a long check that
starts last leaves the other workers idle while it finishes. The durations come from an earlier
report of the same checks (``report.json``'s ``duration_s``); without one the plugin keeps its
default order (contract checks first, they are the long ones).

``list_schedule`` is the model ``nox -s scaling`` prints beside its measurements: greedy list
scheduling of the measured durations, longest first, on k identical workers that each pay a
start-up first. It ignores contention for memory bandwidth and the controller's own work, so it is
an upper bound on the speed-up, and the measured column says how close a machine comes.
"""

from __future__ import annotations

import heapq
import json
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path


def durations_of(report: Mapping) -> dict[str, float]:
    """Check id -> seconds, from a report or results document (its ``results`` entries: a list of
    records; report.json stores them as tables, which ``conformance.report.load_report`` reads)."""
    out: dict[str, float] = {}
    entries = report.get("results")
    for entry in entries if isinstance(entries, list) else ():
        seconds = entry.get("duration_s")
        if entry.get("id") and isinstance(seconds, int | float) and seconds >= 0:
            out[entry["id"]] = float(seconds)
    return out


def read_durations(path: Path) -> dict[str, float]:
    """``durations_of`` a JSON file; empty when the file is absent, unreadable or holds none (an
    order is an optimisation: a bad file costs speed, never a result)."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(document, dict):
        return {}
    if "results" not in document and all(isinstance(v, int | float) for v in document.values()):
        return {str(k): float(v) for k, v in document.items()}  # a snapshot written by write_durations
    return durations_of(document)


def write_durations(path: Path, durations: Mapping[str, float]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(dict(sorted(durations.items()))), encoding="utf-8")


def longest_first(ids: Iterable[str], durations: Mapping[str, float]) -> list[int]:
    """Positions of ``ids`` in longest-first order; a check with no measured duration counts as the
    median one. Ties keep their given order, so every process that sorts the same ids with the same
    durations gets the same order (pytest-xdist requires that of its workers)."""
    ids = list(ids)
    known = [durations[i] for i in ids if i in durations]
    default = statistics.median(known) if known else 0.0
    return sorted(range(len(ids)), key=lambda n: -durations.get(ids[n], default))


def list_schedule(durations: Iterable[float], workers: int, startup: float = 0.0) -> float:
    """The makespan of greedy list scheduling, longest first, on ``workers`` identical workers that
    each start after ``startup`` seconds."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    finish = [startup] * workers
    heapq.heapify(finish)
    for seconds in sorted(durations, reverse=True):
        heapq.heapreplace(finish, finish[0] + seconds)
    return max(finish)


def critical_path(durations: Iterable[float], startup: float = 0.0) -> float:
    """A worker's start-up plus the longest check: no number of workers finishes sooner."""
    return startup + max(durations, default=0.0)
