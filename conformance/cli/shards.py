"""certify in shards: every shard on a Ray cluster, merged here (``--cluster``), or one shard whose
machine left no results recorded not run (``--shard I/N --record-not-run``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from conformance.cli.arguments import parser
from conformance.cli.console import conclude
from conformance.cli.exits import EXIT_INTERRUPTED, EXIT_INVALID, EXIT_NOT_CERTIFIED, EXIT_OK, UsageError
from conformance.cli.inputs import private_key
from conformance.cli.interrupts import interruptible
from conformance.cli.reports import merge

CLUSTER_OPTIONS = ("shards", "shard_cpus", "shard_retries", "cluster_workdir")
"""Options of --cluster alone."""
DRIVER_OPTIONS = frozenset({"command", "backend", "output", "shard", "record_not_run", "cluster", *CLUSTER_OPTIONS,
                            "baseline", "waivers", "threshold", "allow_stale", "sign", "workers"})  # fmt: skip
"""certify's options a cluster's shards are not given: the driver applies them (where the report goes,
the gate, signing, the cluster itself), or sets them per shard (--shard, --workers)."""


def check_cluster_options(ns: argparse.Namespace) -> None:
    """--cluster's options only with --cluster, and --shard or --record-not-run only without it."""
    import importlib.util

    if ns.cluster is None:
        given = [f"--{o.replace('_', '-')}" for o in CLUSTER_OPTIONS if getattr(ns, o) is not None]
        if given:
            raise UsageError(f"{', '.join(given)} apply to a run on a cluster: pass --cluster ADDRESS too")
    else:
        if ns.shard:
            raise UsageError("--cluster runs every shard of the run itself: drop --shard (or --cluster to run one shard here)")
        if ns.record_not_run:
            raise UsageError("--record-not-run records one shard (--shard I/N) here: drop --cluster")
        for option in ("shards", "shard_cpus"):
            if getattr(ns, option) is not None and getattr(ns, option) < 1:
                raise UsageError(f"--{option.replace('_', '-')} must be at least 1")
        if ns.shard_retries is not None and ns.shard_retries < 0:
            raise UsageError("--shard-retries must be 0 or more")
        if importlib.util.find_spec("ray") is None:
            from conformance.run.cluster import RAY_MISSING

            raise UsageError(RAY_MISSING)
    if ns.record_not_run and not ns.shard:
        raise UsageError("--record-not-run records the checks of one shard: pass --shard I/N too")


def shard_argv(ns: argparse.Namespace, extra: list[str], selection: str | None, workers: str) -> list[str]:
    """certify's arguments for one shard on a node: the backends, every option the user gave that a
    shard uses (as its long option, --dest-with-dashes), the workers, and pytest's arguments."""
    defaults = vars(parser().parse_args(["certify", "_"]))
    argv = list(ns.backend)
    for dest, value in vars(ns).items():
        if dest in DRIVER_OPTIONS or value is None or value is False or value == defaults.get(dest):
            continue
        option = f"--{dest.replace('_', '-')}"
        if value is True:
            argv.append(option)
        elif isinstance(value, list):
            argv += [part for v in value for part in (option, str(v))]
        else:
            argv += [option, str(value)]
    argv += ["--workers", workers]
    tail = [*(["-k", selection] if selection else []), *extra]
    return argv + (["--", *tail] if tail else [])


def certify_on_cluster(ns, run, env, report_dirs: dict[str, Path], *, selection, extra, perf, baseline, started) -> int:
    """certify --cluster: the shards run on Ray (conformance.run.cluster), their results documents are
    written here and merged (``merge``), a shard lost on every try has its checks recorded not run,
    the merged report is verified, then the verdict and the gate as after a run on one machine."""
    import dataclasses

    from conformance import specs as spec_module
    from conformance.report import verify as verifying
    from conformance.run import cluster
    from conformance.run.files import write_json_atomic, write_text_atomic

    key = private_key(ns.sign)
    retries = cluster.DEFAULT_RETRIES if ns.shard_retries is None else ns.shard_retries
    workdir = str(Path(ns.cluster_workdir or os.getcwd()).resolve())
    dirs = {name: d.name for name, d in report_dirs.items()}
    try:
        ray = cluster.connect(ns.cluster)
    except cluster.ClusterError as exc:
        raise UsageError(str(exc)) from None
    interrupt = interruptible()  # Ctrl-C or SIGTERM cancels the shards left; the report says which
    try:
        try:
            plan = cluster.layout(ray, ns.shards, ns.shard_cpus)
        except cluster.ClusterError as exc:
            raise UsageError(str(exc)) from None
        workers = str(plan.cpus) if ns.workers == "auto" else ns.workers
        print(f"conformance: {plan.shards} shards on {len(plan.nodes)} Ray node(s) ({ns.cluster}), {plan.cpus} CPU(s) and "
              f"--workers {workers} each, up to {retries} retries per shard", flush=True)  # fmt: skip

        def say(result):
            if result.error:
                print(
                    f"conformance: shard {result.name}: {result.error}; its checks are recorded not run",
                    file=sys.stderr,
                    flush=True,
                )
                return
            count = sum(len(json.loads(data)["results"]) for files in result.documents.values() for data in files.values())
            print(f"conformance: shard {result.name}: {count} results from node {result.address} ({(result.node or '')[:8]}), "
                  f"exit {result.status}, {result.seconds:.0f} s after the start", flush=True)  # fmt: skip

        shards, interrupted = cluster.run_shards(
            ray,
            shard_argv(ns, extra, selection, workers),
            plan,
            retries=retries,
            workdir=workdir,
            dirs=list(dirs.values()),
            say=say,
        )
    finally:
        ray.shutdown()
        interrupt.restore()
    documents: dict[str, dict[str, bytes]] = {d: {} for d in dirs.values()}
    lost = False
    for shard in shards:
        found = shard.documents
        if shard.error is not None:
            try:
                found = cluster.not_run_documents(dataclasses.replace(run, shard=shard.name), f"shard {shard.name}: {shard.error}",
                                                  dirs=dirs, selection=selection, extra=extra, perf=perf, env=env)  # fmt: skip
            except cluster.ClusterError as exc:
                print(f"conformance: {exc}", file=sys.stderr)
                lost = True
        for directory, files in found.items():
            documents[directory].update(files)
    for report_dir in report_dirs.values():
        logs = report_dir / "logs"
        write_json_atomic(logs / "cluster.json", {"address": ns.cluster, "shards": plan.shards, "cpus_per_shard": plan.cpus,
                                                  "retries": retries, "nodes": list(plan.nodes),
                                                  "results": [s.summary() for s in shards]})  # fmt: skip
        for shard in shards:
            write_text_atomic(logs / f"shard-{shard.index}-of-{shard.total}.log", shard.output or f"{shard.error}\n")
    if lost:
        # Without the lost shard's checks named, a merged report could look complete: none is built.
        for report_dir in report_dirs.values():
            for name, data in documents[report_dir.name].items():
                write_text_atomic(report_dir / "results" / name, data.decode())
        print(
            f"conformance: no report: the checks of a lost shard could not be listed; the results that came back are in "
            f"{', '.join(str(d / 'results') for d in report_dirs.values())} (logs/cluster.json says which shards)",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED if interrupted else EXIT_NOT_CERTIFIED
    reports: dict[Path, dict | None] = {}
    status = EXIT_OK
    for report_dir in report_dirs.values():
        reports[report_dir] = merge(report_dir, documents[report_dir.name], spec_module.load(), key)
        if reports[report_dir] is None:
            continue
        outcome = verifying.verify_file(str(report_dir / "report.json"), public_key=None, allow_stale=False)
        print(verifying.render(outcome, str(report_dir / "report.json")))
        if not outcome.ok:
            status = EXIT_INVALID
    status = max(status, conclude(reports, ns, baseline, started))
    return EXIT_INTERRUPTED if interrupted else status


def record_not_run(ns, run, env, report_dirs: dict[str, Path], *, selection, extra, perf) -> int:
    """certify --shard I/N --record-not-run REASON: every check of the shard recorded not run, for a
    shard whose machine left no results (a CI job that died): merged with the other shards, the
    report names these checks instead of leaving them out."""
    from conformance.run import cluster
    from conformance.run.files import write_text_atomic

    try:
        documents = cluster.not_run_documents(run, ns.record_not_run, dirs={n: d.name for n, d in report_dirs.items()},
                                              selection=selection, extra=extra, perf=perf, env=env)  # fmt: skip
    except cluster.ClusterError as exc:
        raise UsageError(str(exc)) from None
    for report_dir in report_dirs.values():
        for name, data in documents[report_dir.name].items():
            write_text_atomic(report_dir / "results" / name, data.decode())
            count = len(json.loads(data)["results"])
            print(f"shard {ns.shard}: {count} check(s) recorded not run ({ns.record_not_run}) in {report_dir / 'results' / name}")
    return EXIT_NOT_CERTIFIED
