"""certify on this machine: the checks and the performance phase under the supervisor, then the
reports built in a process of their own; a shard's results, or the run handed to a cluster."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from conformance.cli.console import conclude, say
from conformance.cli.exits import EXIT_INTERRUPTED, EXIT_NOT_CERTIFIED, EXIT_OK, UsageError
from conformance.cli.inputs import backend_or_exit, load_json, load_specs, private_key
from conformance.cli.interrupts import interruptible
from conformance.cli.preflight import (
    REPORT_FILES,
    check_inputs,
    check_output,
    durations_snapshot,
    require_quantizer,
    resolve_profile,
    shard_tag,
)
from conformance.cli.shards import certify_on_cluster, check_cluster_options, record_not_run
from conformance.report.model import load_report, records
from conformance.run.journal import JOURNAL_SUFFIX
from conformance.run.supervision import die_with_parent
from conformance.run.supervisor import Supervisor
from conformance.run.transport import clean_text


def certify(ns: argparse.Namespace, extra: list[str]) -> int:
    """Certify the backends: the checks, then the performance phase, then the reports; or one shard,
    or every shard on a cluster (``shards``). ``extra``: pytest's own arguments."""
    from conformance.run import invocation
    from conformance.run.files import safe_name, write_text_atomic
    from conformance.specs import is_builtin, profile_definition

    specs = load_specs()
    names = list(dict.fromkeys(ns.backend))
    backends = [backend_or_exit(name) for name in names]  # fail fast (exit 2) on a name that cannot be built
    if len(names) > 1 and ns.baseline:
        raise UsageError("--baseline gates one backend's report: certify that backend alone")
    extra, selection = invocation.split_selection(extra)
    check_cluster_options(ns)
    for backend in backends:
        check_inputs(ns, backend, specs)
    profile = resolve_profile(ns, backends[0], specs)  # every backend of a run is certified for the same profile
    require_quantizer(profile)
    private_key(ns.sign)  # a key that cannot sign is a usage error now, not after the run
    out = Path(ns.output)
    shard = shard_tag(ns.shard)
    report_dirs = {name: out / safe_name(name) for name in names}
    for report_dir in report_dirs.values():
        check_output(out, report_dir, ns.baseline)
    baseline = load_json(ns.baseline, "baseline") if ns.baseline else None  # before the old report goes
    durations = durations_snapshot(ns, report_dirs[names[0]], baseline)  # likewise
    for report_dir in report_dirs.values():
        results_dir = report_dir / "results"
        if not shard:
            # Nothing of an earlier run may stand beside this one's results: a run killed half-way
            # must leave no report that looks like its own.
            for stale in [*results_dir.glob("*.json"), *results_dir.glob(f"*{JOURNAL_SUFFIX}")]:
                stale.unlink()
            for stale in REPORT_FILES:
                (report_dir / stale).unlink(missing_ok=True)
            shutil.rmtree(report_dir / "replays", ignore_errors=True)  # an earlier run's failures
        results_dir.mkdir(parents=True, exist_ok=True)
    first = report_dirs[names[0]]
    definition = None
    if not is_builtin(profile, specs):  # claimed, a user's file, a selection: the sessions read its definition
        definition = first / "logs" / "profile.json"
        definition.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(definition, json.dumps(profile_definition(profile), indent=1))
    hard = ns.hard_timeout or 2 * ns.timeout + 10
    if hard <= ns.timeout:
        raise UsageError(
            f"--hard-timeout ({hard:g} s) must exceed --timeout ({ns.timeout:g} s): the watchdog kills what the timeout could not stop"
        )
    run = invocation.Run(
        backends=tuple(names),
        profile=profile.name,
        profile_file=definition,
        out=out,
        hypothesis_profile=ns.hypothesis_profile,
        specs_dir=Path(ns.specs) if ns.specs else None,
        cache=ns.cache_dir,
        shard=ns.shard,
        timeout=ns.timeout,
        hard_timeout=hard,
        plugins=tuple(dict.fromkeys(p for b in backends for p in b.pytest_plugins)),
        durations=durations,
    )
    env = invocation.environment()
    started = time.perf_counter()
    perf_wanted = any(c.startswith("PERF-") for c in profile.clauses) and not ns.skip_perf
    if ns.record_not_run:
        return record_not_run(ns, run, env, report_dirs, selection=selection, extra=extra, perf=perf_wanted)
    if ns.cluster:
        return certify_on_cluster(ns, run, env, report_dirs, selection=selection, extra=extra, perf=perf_wanted, baseline=baseline,
                                   started=started)  # fmt: skip
    supervisor = Supervisor(
        {name: d / "results" for name, d in report_dirs.items()},
        hard_timeout=hard,
        deadline=time.monotonic() + ns.budget if ns.budget else None,
        budget_s=ns.budget,
    )
    interrupt = interruptible()
    prestart = prestart_fresh_processes(ns, names, backends, profile, specs, selection)
    try:
        checks = supervisor.run_phase(
            f"checks{shard}",
            invocation.checks_args(run, workers=ns.workers, selection=selection, extra=extra),
            {**env, **(prestart.environment() if prestart else {})},
            in_process=ns.workers == "0",
        )
    finally:
        if prestart:
            prestart.stop()
    say(checks)
    if perf_wanted and supervisor.budget_left() and not supervisor.interrupted:
        print("conformance: timing preprocess, init and execute (pytest-benchmark, no workers) ...", flush=True)
        perf = supervisor.run_phase(
            f"perf{shard}",
            invocation.perf_args(run, selection=selection, extra=extra),
            env,
            in_process=True,
            log=first / "logs" / f"perf{shard}.log",
        )
        say(perf)
    if shard:
        parts = sorted(p for d in report_dirs.values() for p in (d / "results").glob(f"*{shard}*.json"))
        failing = sum(r.category.is_failure for p in parts for r in records(json.loads(p.read_text())["results"]))
        print(
            f"shard {ns.shard}: results in {', '.join(map(str, parts))}; {failing} failing. "
            f"Merge every shard's results with: python -m conformance merge {first} <results files or dirs>"
        )
        return EXIT_NOT_CERTIFIED if failing else EXIT_OK
    if supervisor.interrupted:
        print(
            f"conformance: the run was {supervisor.interrupted}: writing a partial report from the results so far "
            "(press Ctrl-C again to abandon it)",
            file=sys.stderr,
            flush=True,
        )
    interrupt.restore()
    status = conclude(_supervised_reports(list(report_dirs.values()), supervisor, ns.specs, ns.sign), ns, baseline, started)
    return EXIT_INTERRUPTED if supervisor.interrupted else status


def prestart_fresh_processes(ns, names, backends, profile, specs, selection):
    """PRE-008's two fresh interpreters, started now so they import torch beside the workers'
    start-up instead of after it (conformance.checks._fresh.Prestart): the longest contract check
    on an idle machine, and so the floor of a run's wall time however many workers it has. Only
    where the run surely checks PRE-008 of one backend: its profile has the clause, the backend's
    family is one it applies to, and neither a shard nor a -k selection may leave it out."""
    clause = specs.clauses.get("PRE-008")
    if (len(names) != 1 or ns.shard or selection or clause is None or "PRE-008" not in profile.clauses
            or backends[0].family not in clause.applies_to):  # fmt: skip
        return None
    from conformance.checks._fresh import Prestart

    return Prestart(names[0])


REPORT_TIMEOUT = 600
"""Seconds building one backend's report may take (less when the run's budget ends sooner)."""


def _supervised_reports(
    report_dirs: list[Path], supervisor: Supervisor, specs_dir: str | None, key_file: str | None = None
) -> dict[Path, dict | None]:
    """``report`` in a process of its own, under the same watchdog as the checks: whatever the
    results hold, building the reports ends, and a report that could not be built says why."""
    timeout = (
        REPORT_TIMEOUT if supervisor.deadline is None else max(60.0, min(REPORT_TIMEOUT, supervisor.deadline - time.monotonic()))
    )
    timeout *= len(report_dirs)
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "conformance",
                "report",
                *map(str, report_dirs),
                *(["--specs", specs_dir] if specs_dir else []),
                *(["--sign", key_file] if key_file else []),
            ],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - the CLI is single-threaded
        )
    except subprocess.TimeoutExpired:
        print(
            f"conformance: building the report did not finish in {timeout:.0f} s; the results are in {report_dirs[0] / 'results'}",
            file=sys.stderr,
        )
        return dict.fromkeys(report_dirs)
    if done.returncode != EXIT_OK:
        print(
            f"conformance: cannot build the report: {clean_text(done.stderr.strip() or done.stdout.strip())[-2000:]}",
            file=sys.stderr,
        )
    built = {}
    for report_dir in report_dirs:
        path = report_dir / "report.json"
        built[report_dir] = load_report(path) if path.exists() else None
    return built
