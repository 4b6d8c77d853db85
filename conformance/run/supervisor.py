"""The CLI's supervisor: every phase of a certification run ends, and every planned check ends
with a result.

pytest-xdist isolates a crash to one check and replaces the worker, and the plugin's watchdog
kills a worker hung past the hard timeout. Where they fall short, this module takes over:

- xdist stops replacing workers after ``--max-worker-restart`` crashes (default 4 per worker)
  and ends the session with the rest of the checks unrun; a pytest session can itself die
  (an INTERNALERROR, a killed controller). So a phase is a loop of sessions: each session's
  plan (``plan.json``, written by the plugin at collection) and journal (``results/<tag>.journal``,
  one record per finished check: ``conformance.run.journal``) say what is left, and the next
  session runs exactly that (``--conformance-only``), until nothing is left, nothing moves, or the
  run's budget is spent.
- A session without workers (the performance phase: timing under xdist is unreliable) has no
  one to kill a hung check: here the supervisor's own watchdog reads the markers
  (``conformance.run.supervision``) and kills the session past the hard timeout; the check it was
  running is recorded TIMEOUT and the phase resumes after it. A session that dies mid-check
  (a segfault, ``os._exit``) records that check CRASH with the signal or exit status and the
  last contract call it reached.
- A session whose process outlives its results (a backend's non-daemon thread still running)
  is killed a few seconds after it wrote them.
- Children die with the CLI (PR_SET_PDEATHSIG) and run in their own process group, so a killed
  CLI or a spent budget leaves no session behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from conformance.results import CaseResult, Category, result_id
from conformance.run import supervision
from conformance.run.journal import JOURNAL_SUFFIX, append_record, complete_documents, read_journal, write_header

EXIT_GRACE_S = 10.0
"""How long a session's process may live on after writing its results."""
WORKER_MARGIN_S = 15.0
"""Extra time the supervisor gives a worker's check before killing it itself: the plugin's own
watchdog (in the xdist controller) acts first, and records the kill as the check's result."""
MAX_ROUNDS = 50


@dataclass
class PhaseOutcome:
    tag: str
    sessions: int = 0
    exit_statuses: list[int] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    """Checks the supervisor recorded itself (a session died or was killed in them)."""
    not_run: list[str] = field(default_factory=list)
    budget_spent: bool = False
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)


class Supervisor:
    """Runs the phases of a certification into each backend's results directory (``results_dirs``:
    backend name as the run names it -> its ``results/``; one pytest session checks them all)."""

    def __init__(self, results_dirs: dict[str, Path], *, hard_timeout: float, deadline: float | None, budget_s: float | None):
        self.results_dirs = dict(results_dirs)
        self.hard_timeout = hard_timeout
        self.deadline = deadline  # time.monotonic() by which everything must have ended
        self.budget_s = budget_s
        self.interrupted: str | None = None
        """Why the run was stopped (Ctrl-C, SIGTERM): no session starts after it."""

    def budget_left(self) -> bool:
        return self.deadline is None or time.monotonic() < self.deadline

    def run_phase(self, tag: str, args: list[str], env: dict[str, str], *, in_process: bool, log: Path | None = None) -> PhaseOutcome:
        """Sessions of ``pytest args`` until every check of the phase's plan has a result."""
        outcome = PhaseOutcome(tag)
        plan: dict[str, dict] = {}
        only: list[str] | None = None
        header_tag = tag
        try:
            for round_ in range(MAX_ROUNDS):
                if self.interrupted:
                    outcome.interrupted = True
                    break
                if not self.budget_left():
                    outcome.budget_spent = True
                    break
                session_tag = tag if round_ == 0 else f"{tag}-resume-{round_}"
                before = self._done(tag)
                status, run_dir, lost = self._session(session_tag, args, env, only, in_process=in_process, log=log, outcome=outcome)
                if round_ == 0:
                    plan = supervision.read_plan(run_dir)
                if any((d / f"{session_tag}{JOURNAL_SUFFIX}").exists() for d in self.results_dirs.values()):
                    header_tag = header_tag if round_ else session_tag
                outcome.lost += lost
                supervision_cleanup(run_dir)
                self._complete()
                done = self._done(tag)
                left = [nodeid for nodeid in plan if nodeid not in done]
                if self.interrupted:
                    outcome.interrupted = True
                    break
                if outcome.budget_spent:  # killed for the budget: what is left was not run, not lost
                    break
                if not left or not plan:
                    if not plan and status not in (0, 1, 5):
                        outcome.notes.append(f"the {tag} session ended with pytest exit status {status} before it collected any check")
                    break
                if len(done) == len(before):
                    # A session that ends without finishing a single check will not do better next time.
                    self._record(tag, header_tag, {n: plan[n] for n in left}, Category.HARNESS_ERROR,
                                 f"not run: the {tag} session ended (pytest exit status {status}) {len(left)} check(s) short, "
                                 "twice without progress; see the console output above")
                    outcome.not_run += left
                    break
                only = left
            else:
                outcome.notes.append(f"gave up after {MAX_ROUNDS} sessions")
        except KeyboardInterrupt as exc:  # Ctrl-C between sessions: reading journals, completing documents
            self.interrupted = self.interrupted or str(exc) or "interrupted (Ctrl-C)"
            outcome.interrupted = True
        if outcome.interrupted:
            left = [nodeid for nodeid in plan if nodeid not in self._done(tag)]
            if left:
                self._record(tag, header_tag, {n: plan[n] for n in left}, Category.SKIP,
                             f"not run: the run was {self.interrupted}; the report holds the results so far")
                outcome.not_run += left
        elif outcome.budget_spent or not self.budget_left():
            outcome.budget_spent = True
            left = [nodeid for nodeid in plan if nodeid not in self._done(tag)]
            if left:
                self._record(tag, header_tag, {n: plan[n] for n in left}, Category.SKIP,
                             f"not run: the run's time budget of {self.budget_s:.0f} s was spent (--budget)")
                outcome.not_run += left
        self._complete()
        self._close_journals(tag)
        return outcome

    def _complete(self) -> None:
        for directory in self.results_dirs.values():
            complete_documents(directory)

    def _dir_of(self, meta: dict) -> Path:
        """The results directory of the backend a check (its plan meta) belongs to."""
        return self.results_dirs.get(meta.get("backend"), next(iter(self.results_dirs.values())))

    # -- one session -----------------------------------------------------------------------------

    def _session(self, session_tag, args, env, only, *, in_process, log, outcome) -> tuple[int, Path, list[str]]:
        run_dir = Path(tempfile.mkdtemp(prefix="conformance-run-"))
        command = [sys.executable, "-m", "pytest", *args, "--conformance-tag", session_tag, "--conformance-run-dir", str(run_dir)]
        if only is not None:
            listing = run_dir / "only.txt"
            listing.write_text("\n".join(only) + "\n")
            command += ["--conformance-only", str(listing)]
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
        out = open(log, "a") if log is not None else None  # noqa: SIM115 - closed below
        try:
            proc = subprocess.Popen(
                command,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT if out is not None else None,
                start_new_session=True,  # one process group: a spent budget kills the whole session
                preexec_fn=supervision.die_with_parent,  # noqa: PLW1509 - the CLI is single-threaded
            )
            outcome.sessions += 1
            killed: dict[str, tuple[int, float]] = {}
            try:
                self._watch(proc, run_dir, session_tag, killed, outcome)
            except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM turned into it by the CLI
                self.interrupted = str(exc) or "interrupted (Ctrl-C)"
                outcome.interrupted = True
                _kill_group(proc)
            status = proc.wait()
        finally:
            if out is not None:
                out.close()
        outcome.exit_statuses.append(status)
        lost = [] if outcome.budget_spent or outcome.interrupted else self._record_lost(session_tag, run_dir, proc.pid, status, killed)
        return status, run_dir, lost

    def _watch(self, proc, run_dir: Path, session_tag: str, killed: dict, outcome: PhaseOutcome) -> None:
        """Until the session ends: kill a check's process past the hard timeout, the session when the
        budget is spent or when it outlives its results by EXIT_GRACE_S."""
        finished_at = None
        while proc.poll() is None:
            time.sleep(0.2)
            supervision.kill_overdue(run_dir, lambda info: self.hard_timeout + (0.0 if info["pid"] == proc.pid else WORKER_MARGIN_S), killed)
            if not self.budget_left():
                _kill_group(proc)
                outcome.budget_spent = True
                return
            if finished_at is None and all((d / f"{session_tag}.json").exists() for d in self.results_dirs.values()):
                finished_at = time.monotonic()
            elif finished_at is not None and time.monotonic() - finished_at > EXIT_GRACE_S:
                outcome.notes.append(
                    f"the {session_tag} session wrote its results but its process was still alive "
                    f"{EXIT_GRACE_S:.0f} s later (threads left running?); it was killed"
                )
                _kill_group(proc)
                return

    def _record_lost(self, session_tag, run_dir, session_pid, status, killed) -> list[str]:
        """Records for the checks the session's own process died or was killed in. A check a worker
        was running when the session's controller died is not charged: it runs again."""
        plan = supervision.read_plan(run_dir)
        lost = []
        for info in supervision.running(run_dir):
            nodeid = info["nodeid"]
            if info["pid"] != session_pid and nodeid not in killed:
                continue
            meta = dict(plan.get(nodeid) or {"clause": None, "test": nodeid})
            killed_after = killed[nodeid][1] if nodeid in killed else None
            record = supervision.lost_record(meta, run_dir, info["pid"], None if killed_after is not None else status, killed_after=killed_after)
            record.update(nodeid=nodeid, duration_s=round(time.time() - info["start"], 3), phase="call")
            journal = self._dir_of(meta) / f"{session_tag}{JOURNAL_SUFFIX}"
            if journal.exists():
                append_record(journal, record)
                lost.append(nodeid)
        return lost

    # -- bookkeeping -------------------------------------------------------------------------------

    def _journals(self, tag: str) -> list[Path]:
        return sorted(p for d in self.results_dirs.values() for p in d.glob(f"{tag}*{JOURNAL_SUFFIX}") if _phase_of(p.name, tag))

    def _done(self, tag: str) -> set[str]:
        done: set[str] = set()
        for journal in self._journals(tag):
            _, records = read_journal(journal)
            done.update(records)
        return done

    def _record(self, tag, header_tag, metas: dict[str, dict], category: Category, message: str) -> None:
        """Records the supervisor writes itself, in a journal of their own beside each backend's
        results (header from the phase's)."""
        for nodeid, meta in metas.items():
            directory = self._dir_of(meta)
            source = directory / f"{header_tag}{JOURNAL_SUFFIX}"
            if not source.exists():
                continue
            target = directory / f"{tag}-supervisor{JOURNAL_SUFFIX}"
            if not target.exists():
                header, _ = read_journal(source)
                write_header(target, {**header, "run": {**header["run"], "tag": f"{tag}-supervisor"}})
            record = CaseResult(**meta)
            record.update(nodeid=nodeid, id=result_id(meta), category=category, message=message, duration_s=0.0)
            append_record(target, record)
            (directory / f"{tag}-supervisor.json").unlink(missing_ok=True)

    def _close_journals(self, tag: str) -> None:
        for journal in self._journals(tag):
            if journal.with_suffix(".json").exists():
                journal.unlink()


def _phase_of(name: str, tag: str) -> bool:
    stem = name.removesuffix(JOURNAL_SUFFIX)
    return stem == tag or stem.startswith(f"{tag}-resume-") or stem == f"{tag}-supervisor"


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def supervision_cleanup(run_dir: Path) -> None:
    import shutil

    shutil.rmtree(run_dir, ignore_errors=True)
