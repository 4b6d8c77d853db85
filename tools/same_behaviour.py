"""Compare two certifications of one backend check by check: the same checks, categories, program
counts and statistics? (What a refactoring of the harness must leave unchanged.)

    python tools/same_behaviour.py OLD/report.json NEW/report.json [--ignore KEY ...]

Timings (``duration_s``, measurements) differ run to run and are not compared; statistics whose
values are timings or depend on scheduling are named with ``--ignore``. A failing NUM check cut
short by its failure budget ran as many cases as its time allowed: its counts are not compared, its
first failure (the message) is. Exit 0 when every check
agrees, 1 otherwise, with one line per difference.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from conformance.report.document import load_report


def _records(path: str) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in load_report(path)["results"]}


def _stats(record: dict[str, Any], ignore: set[str]) -> dict[str, Any]:
    return {k: v for k, v in (record.get("stats") or {}).items() if k not in ignore}


_SIZED_BY_BUDGET = {"compared", "examples", "programs", "refusal_summary", "refusals", "refused", "mismatched", "edge_cases", "edge_cases_not_applicable", "layouts"}
"""Counts of a NUM check cut short by its failure budget (they grow with the cases it had time for)."""


def _cut_short(record: dict[str, Any]) -> bool:
    return bool((record.get("failures") or {}).get("cut_short"))


def compare(old: str, new: str, ignore: set[str]) -> tuple[list[str], dict[str, int]]:
    a, b = _records(old), _records(new)
    lines = [f"only in {old}: {i}" for i in sorted(a.keys() - b.keys())]
    lines += [f"only in {new}: {i}" for i in sorted(b.keys() - a.keys())]
    counts = {"checks": len(a.keys() & b.keys()), "same category": 0, "same programs": 0, "same statistics": 0,
              "cut short by the failure budget: same first failure": 0}  # fmt: skip
    for i in sorted(a.keys() & b.keys()):
        x, y = a[i], b[i]
        if x["category"] == y["category"]:
            counts["same category"] += 1
        else:
            lines.append(f"{i}: category {x['category']} -> {y['category']}")
        sx, sy = _stats(x, ignore), _stats(y, ignore)
        if _cut_short(x) or _cut_short(y):
            # A failing NUM check runs cases for a time budget after its first failure: how many
            # is sized by speed, what fails first is not.
            counts["cut short by the failure budget: same first failure"] += x.get("message") == y.get("message")
            sx, sy = {k: v for k, v in sx.items() if k not in _SIZED_BY_BUDGET}, {k: v for k, v in sy.items() if k not in _SIZED_BY_BUDGET}
            if x.get("message") != y.get("message"):
                lines.append(f"{i}: first failure {x.get('message', '')[:200]!r} -> {y.get('message', '')[:200]!r}")
        if sx.get("programs") == sy.get("programs"):
            counts["same programs"] += 1
        else:
            lines.append(f"{i}: programs {sx.get('programs')} -> {sy.get('programs')}")
        if sx == sy:
            counts["same statistics"] += 1
        else:
            keys = sorted(k for k in sx.keys() | sy.keys() if sx.get(k) != sy.get(k))
            lines.append(
                f"{i}: statistics differ in {', '.join(keys)}: " + json.dumps({k: [sx.get(k), sy.get(k)] for k in keys})[:400]
            )
    return lines, counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--ignore", action="append", default=[], help="a statistic not to compare (repeatable)")
    ns = parser.parse_args(argv)
    lines, counts = compare(ns.old, ns.new, set(ns.ignore))
    print(", ".join(f"{k} {v}" for k, v in counts.items()))
    for line in lines:
        print(line)
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
