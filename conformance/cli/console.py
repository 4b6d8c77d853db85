"""What certify prints: what the supervisor had to do in a phase, and at the end each report's
summary (reason first), its verdict and the baseline gate's outcome beside it."""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import textwrap
import time
from pathlib import Path

from conformance.cli.exits import EXIT_NOT_CERTIFIED, EXIT_OK, EXIT_REGRESSED
from conformance.cli.gate import compare
from conformance.report.model import records


def conclude(reports: dict[Path, dict | None], ns: argparse.Namespace, baseline: dict | None, started: float) -> int:
    """The end of a certify run: each report's summary and verdict, with a baseline the gate's
    outcome beside it; the exit status (a report that could not be built is not certified)."""
    status = EXIT_OK
    for report_dir, report in reports.items():
        if report is None:
            status = max(status, EXIT_NOT_CERTIFIED)
            continue
        print_summary(report, report_dir, time.perf_counter() - started, brief=len(reports) > 1)
        if not report["verdict"]["certified"]:
            status = max(status, EXIT_NOT_CERTIFIED)
        if baseline is not None:
            print(f"against the baseline {ns.baseline}:")
            gate = compare(baseline, report, ns)
            status = max(status, gate)  # 6 regressed over 4 stale, 3 invalid, 1 not certified
            # The gate's outcome stands beside the verdict, never in its place.
            said = {EXIT_OK: "no regression", EXIT_REGRESSED: f"REGRESSED (exit {EXIT_REGRESSED})"}.get(
                gate, f"not compared (exit {gate})"
            )
            certified = "CERTIFIED" if report["verdict"]["certified"] else "NOT CERTIFIED"
            print(f"{certified}: {report['backend']['name']}: {report['verdict']['text']}; against the baseline: {said}")
    return status


def say(outcome) -> None:
    """What the supervisor had to do in a phase, in a line or two."""
    if outcome.sessions > 1:
        print(
            f"conformance: the {outcome.tag} phase took {outcome.sessions} pytest sessions "
            f"(exit statuses {outcome.exit_statuses}); every planned check was run again where a session ended early"
        )
    if outcome.lost:
        print(
            f"conformance: {len(outcome.lost)} check(s) recorded by the supervisor (their process died or hung): "
            + ", ".join(outcome.lost[:5])
            + (" ..." if len(outcome.lost) > 5 else "")
        )
    if outcome.budget_spent:
        print(
            f"conformance: the run's time budget was spent; {len(outcome.not_run)} check(s) of the {outcome.tag} phase not run",
            file=sys.stderr,
        )
    for note in outcome.notes:
        print(f"conformance: {note}", file=sys.stderr)


def print_summary(report: dict, report_dir: Path, seconds: float, *, brief: bool = False) -> None:
    """The run's last words, reason first: what failed (by clause, then the first failures with
    their replay), what is not supported, then the counts and where the reports are. ``brief``
    (a run of several backends): the verdict line alone, each report says the rest."""
    from tabulate import tabulate

    from conformance.report import safe

    verdict = report["verdict"]
    if brief:
        print(
            f"{'CERTIFIED' if verdict['certified'] else 'NOT CERTIFIED'}: {report['backend']['name']}: {verdict['text']}  ({report_dir / 'report.json'})"
        )
        return
    print()
    print(tabulate(sorted(report["summary"]["counts"].items()), headers=["category", "count"], tablefmt="simple"))
    results = records(report["results"])
    slow = sorted(results, key=lambda r: -(r.duration_s or 0))[:5]
    print("slowest checks:", ", ".join(f"{r.id} {r.duration_s or 0:.1f}s" for r in slow))
    by_id = {r.id: r for r in results}
    failing = [by_id[i] for i in verdict.get("failing", []) if i in by_id]
    if failing:
        per_clause: dict[str, int] = {}
        for r in failing:
            per_clause[r.clause] = per_clause.get(r.clause, 0) + 1
        print("failing clauses:", ", ".join(f"{c} ({n})" for c, n in sorted(per_clause.items())))
        for r in failing[:10]:
            # The whole message (to a point), wrapped: its clue ("where the first tensor holds nan")
            # is often at its end.
            text = f"{r.category.value:17s} {r.id}: {safe.plain(r.message, 1200)}"
            print(textwrap.fill(text, width=max(shutil.get_terminal_size().columns, 80) - 2, initial_indent="  ",
                                subsequent_indent=" " * 20, break_on_hyphens=False))  # fmt: skip
            if r.replay:
                print(f"  {'':17s} {replay_invocation(r.replay)}")
        if len(failing) > 10:
            print(f"  ... and {len(failing) - 10} more in report.md")
    unsupported = verdict.get("unsupported", [])
    if unsupported:
        shown = ", ".join(unsupported[:8]) + (f" and {len(unsupported) - 8} more" if len(unsupported) > 8 else "")
        print(f"not supported but mandatory for profile {verdict['profile']}: {shown}")
    print(f"reports: {report_dir / 'report.json'}, report.md, report.html, junit.xml  ({seconds:.0f} s)")
    print(f"{'CERTIFIED' if verdict['certified'] else 'NOT CERTIFIED'}: {report['backend']['name']}: {verdict['text']}")


def replay_invocation(replay: str) -> str:
    """A report's replay command (``python -m conformance replay DIR``, portable) as this
    interpreter runs it: the system's python may lack the harness's dependencies (a nox session's
    environment has them)."""
    prefix = "python -m conformance "
    return f"{shlex.quote(sys.executable)} -m conformance {replay[len(prefix) :]}" if replay.startswith(prefix) else replay
