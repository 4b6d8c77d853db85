"""python -m conformance certify | report | diff | verify | merge | scoreboard | replay | list

A thin layer over pytest: ``certify`` runs the checks in ``conformance.checks``
(through the plugin, in pytest-xdist workers so a crash costs one result),
then the performance checks in a session of their own (timing under xdist is
unreliable), then merges both results documents into the report.
With ``--cluster``, the shards of the run go to a Ray cluster instead
(``conformance.run.cluster``), and their results documents are merged here.

Exit codes (every command):

    0  certified (with --baseline: and no regression); verify: the report is valid and current;
       diff: no regression
    1  not certified (with --baseline: and no regression; the verdict is printed either way)
    2  usage error: bad arguments, an unknown backend, an unreadable file
    3  invalid report: schema, integrity hash, signature, or a verdict/summary the results do not give
    4  cannot compare: the report's spec digest or harness version is not this harness's
       (verify --allow-stale accepts it; diff of reports under different specs)
    5  verify: the report is valid but unsigned, or signed and no --public-key was given to
       check it: nothing shows who wrote it (with --public-key, an unsigned report is 3)
    6  certify --baseline, diff: a regression against the baseline (a result that no longer
       passes, a new failure, a result or mandatory check missing, a claim dropped, a slowdown
       or lost timings; conformance.report.diff), whatever the verdict
  130  certify was interrupted (Ctrl-C, SIGTERM): the report written is partial, not certified
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from conformance.report.model import ReportError, load_report, read_report, records
from conformance.run.invocation import HYPOTHESIS_PROFILES
from conformance.run.journal import JOURNAL_SUFFIX
from conformance.run.supervision import die_with_parent
from conformance.run.supervisor import Supervisor
from conformance.run.transport import clean_text

EXIT_OK, EXIT_NOT_CERTIFIED, EXIT_USAGE, EXIT_INVALID, EXIT_STALE = 0, 1, 2, 3, 4
EXIT_UNSIGNED = 5
"""verify: valid, but no signature was checked (unsigned, or no --public-key given)."""
EXIT_REGRESSED = 6
"""certify --baseline, diff: the new report regressed against the baseline (conformance.report.diff)."""
EXIT_INTERRUPTED = 130
"""certify stopped by Ctrl-C or SIGTERM: a partial report (not certified) was written."""
DEFAULT_TIMEOUT = 120
DEFAULT_BUDGET = 6 * 3600
"""Seconds a whole certify run may take before what is left is recorded "not run"."""
REPORT_FILES = ("report.json", "report.md", "report.html", "junit.xml")


class UsageError(Exception):
    pass


def _backend_or_exit(name: str):
    from conformance.discovery import DiscoveryError, load

    try:
        return load(name)
    except DiscoveryError as exc:
        raise UsageError(str(exc)) from None


def _pytest(args: list[str], env: dict[str, str], *, quiet: bool = False) -> int:
    command = [sys.executable, "-m", "pytest", *args]
    if not quiet:
        return subprocess.call(command, env=env)
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # show a broken session; results are in the report otherwise
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
    return done.returncode


def resolve_profile(ns: argparse.Namespace, backend, specs):
    """The profile a certify run checks: a name of specs/profiles.toml, ``claimed`` (what the
    manifest claims), or FILE.toml[:NAME] (a user's profiles file); narrowed by --ops/--dtypes."""
    from conformance import specs as spec_module

    value = ns.profile or backend.profile
    try:
        if value == spec_module.CLAIMED:
            base = specs.profile(backend.profile if backend.profile in specs.profiles else "full")
            profile = spec_module.claimed_profile(specs, backend.manifest.ops, base)
            if not profile.ops:
                raise UsageError(f"--profile claimed: the manifest of {backend.name!r} claims no op the spec names")
        elif value in specs.profiles:
            profile = specs.profile(value)
        elif value.endswith(".toml") or ".toml:" in value or Path(value).is_file():
            path, _, name = value.partition(".toml:") if ".toml:" in value else (value, "", "")
            path = path + ".toml" if name else path
            if not Path(path).is_file():
                raise UsageError(f"--profile {value}: no such profiles file {path}")
            found = spec_module.profiles_from_file(path, specs)
            if not found:
                raise UsageError(f"--profile {value}: {path} defines no [profile.NAME] table")
            if not name and len(found) > 1:
                raise UsageError(f"--profile {value}: {path} defines {', '.join(sorted(found))}; say which: {path}:NAME")
            profile = found[name] if name else next(iter(found.values()))
            if name and name not in found:
                raise UsageError(f"--profile {value}: {path} defines {', '.join(sorted(found))}, not {name!r}")
        else:
            raise UsageError(
                f"unknown profile {value!r}; known: {', '.join(sorted([*specs.profiles, spec_module.CLAIMED]))}, "
                "or a profiles file (FILE.toml or FILE.toml:NAME)"
            )
        ops = [o for part in (ns.ops or []) for o in part.split(",") if o.strip()]
        dtypes = [d.strip() for part in (ns.dtypes or []) for d in part.split(",") if d.strip()]
        if ops or dtypes:
            profile = spec_module.narrowed(profile, specs, ops, dtypes)
    except (spec_module.SpecError, KeyError) as exc:  # KeyError: claimed, and the spec has no base profile
        raise UsageError(str(exc).strip("'\"")) from None
    return profile


def _check_output(out: Path, backend_dir: Path, baseline: str | None) -> None:
    """The output directory can be written, and writing it will not destroy the baseline."""
    for parent in (out, *out.parents):
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"--output {out}: {parent} is a file, not a directory")
            break
    try:
        backend_dir.mkdir(parents=True, exist_ok=True)
        probe = backend_dir / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"--output {out}: cannot write there ({exc.strerror or exc})") from None
    if baseline:
        base = Path(baseline).resolve()
        if any(base == (backend_dir / name).resolve() for name in REPORT_FILES) or base.parent == (backend_dir / "results").resolve():
            raise UsageError(
                f"--baseline {baseline} is a file this run writes ({backend_dir}): copy the baseline elsewhere first "
                f"(e.g. cp {baseline} baseline.json) or pass another --output"
            )


def _check_inputs(ns: argparse.Namespace, backend, specs) -> None:
    """What else a run needs, checked before it starts: waivers and the manifest's claims."""
    from conformance import specs as spec_module

    if ns.waivers and not ns.baseline:
        raise UsageError("--waivers applies to the --baseline comparison: pass --baseline too (or drop --waivers)")
    if ns.waivers:
        from conformance.report.diff import WaiverError, load_waivers

        try:
            load_waivers(ns.waivers)
        except (WaiverError, OSError) as exc:
            raise UsageError(f"--waivers: {exc}") from None
    from conformance.strategies import known_signatures

    try:
        spec_module.check_claims(specs, backend.manifest.ops, f"the manifest of {backend.name!r}")
        spec_module.check_signatures(specs, known_signatures())
    except spec_module.SpecError as exc:
        raise UsageError(str(exc)) from None


def _load_specs():
    from conformance import specs as spec_module

    try:
        return spec_module.load()
    except spec_module.SpecError as exc:
        raise UsageError(f"the spec cannot be read: {exc}") from None


def _require_quantizer(profile) -> None:
    """A profile with quantized programs needs ExecuTorch's quantizer: without it every QNT check
    would end HARNESS_ERROR after the whole run, so its absence is a usage error before the run."""
    if not profile.quantized:
        return
    from conformance.quantize import QuantizerMissing, require_quantizer

    try:
        require_quantizer()
    except QuantizerMissing as exc:
        raise UsageError(f"--profile {profile.name} holds {len(profile.quantized)} quantized program(s): {exc}") from None


def certify(ns: argparse.Namespace, extra: list[str]) -> int:
    from conformance.run import invocation
    from conformance.run.files import safe_name, write_text_atomic
    from conformance.specs import is_builtin, profile_definition

    specs = _load_specs()
    names = list(dict.fromkeys(ns.backend))
    backends = [_backend_or_exit(name) for name in names]  # fail fast (exit 2) on a name that cannot be built
    if len(names) > 1 and ns.baseline:
        raise UsageError("--baseline gates one backend's report: certify that backend alone")
    extra, selection = invocation.split_selection(extra)
    _check_cluster_options(ns)
    for backend in backends:
        _check_inputs(ns, backend, specs)
    profile = resolve_profile(ns, backends[0], specs)  # every backend of a run is certified for the same profile
    _require_quantizer(profile)
    _private_key(ns.sign)  # a key that cannot sign is a usage error now, not after the run
    out = Path(ns.output)
    shard = _shard_tag(ns.shard)
    report_dirs = {name: out / safe_name(name) for name in names}
    for report_dir in report_dirs.values():
        _check_output(out, report_dir, ns.baseline)
    baseline = _load_json(ns.baseline, "baseline") if ns.baseline else None  # before the old report goes
    durations = _durations_snapshot(ns, report_dirs[names[0]], baseline)  # likewise
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
        raise UsageError(f"--hard-timeout ({hard:g} s) must exceed --timeout ({ns.timeout:g} s): the watchdog kills what the timeout could not stop")
    run = invocation.Run(
        backends=tuple(names), profile=profile.name, profile_file=definition, out=out, hypothesis_profile=ns.hypothesis_profile,
        specs_dir=Path(ns.specs) if ns.specs else None, cache=ns.cache_dir, shard=ns.shard, timeout=ns.timeout, hard_timeout=hard,
        plugins=tuple(dict.fromkeys(p for b in backends for p in b.pytest_plugins)), durations=durations,
    )
    env = invocation.environment()
    started = time.perf_counter()
    perf_wanted = any(c.startswith("PERF-") for c in profile.clauses) and not ns.skip_perf
    if ns.record_not_run:
        return _record_not_run(ns, run, env, report_dirs, selection=selection, extra=extra, perf=perf_wanted)
    if ns.cluster:
        return _certify_on_cluster(ns, run, env, report_dirs, selection=selection, extra=extra, perf=perf_wanted, baseline=baseline,
                                   started=started)  # fmt: skip
    supervisor = Supervisor(
        {name: d / "results" for name, d in report_dirs.items()},
        hard_timeout=hard,
        deadline=time.monotonic() + ns.budget if ns.budget else None,
        budget_s=ns.budget,
    )
    interrupt = _interruptible()
    checks = supervisor.run_phase(
        f"checks{shard}", invocation.checks_args(run, workers=ns.workers, selection=selection, extra=extra), env, in_process=ns.workers == "0"
    )
    _say(checks)
    if perf_wanted and supervisor.budget_left() and not supervisor.interrupted:
        print("conformance: timing preprocess, init and execute (pytest-benchmark, no workers) ...", flush=True)
        perf = supervisor.run_phase(
            f"perf{shard}",
            invocation.perf_args(run, selection=selection, extra=extra),
            env,
            in_process=True,
            log=first / "logs" / f"perf{shard}.log",
        )
        _say(perf)
    if shard:
        parts = sorted(p for d in report_dirs.values() for p in (d / "results").glob(f"*{shard}*.json"))
        failing = sum(r.category.is_failure for p in parts for r in records(json.loads(p.read_text())["results"]))
        print(f"shard {ns.shard}: results in {', '.join(map(str, parts))}; {failing} failing. "
              f"Merge every shard's results with: python -m conformance merge {first} <results files or dirs>")
        return EXIT_NOT_CERTIFIED if failing else EXIT_OK
    if supervisor.interrupted:
        print(f"conformance: the run was {supervisor.interrupted}: writing a partial report from the results so far "
              "(press Ctrl-C again to abandon it)", file=sys.stderr, flush=True)
    interrupt.restore()
    status = _conclude(_supervised_reports(list(report_dirs.values()), supervisor, ns.specs, ns.sign), ns, baseline, started)
    return EXIT_INTERRUPTED if supervisor.interrupted else status


def _conclude(reports: dict[Path, dict | None], ns: argparse.Namespace, baseline: dict | None, started: float) -> int:
    """The end of a certify run: each report's summary and verdict, with a baseline the gate's
    outcome beside it; the exit status (a report that could not be built is not certified)."""
    status = EXIT_OK
    for report_dir, report in reports.items():
        if report is None:
            status = max(status, EXIT_NOT_CERTIFIED)
            continue
        _print_summary(report, report_dir, time.perf_counter() - started, brief=len(reports) > 1)
        if not report["verdict"]["certified"]:
            status = max(status, EXIT_NOT_CERTIFIED)
        if baseline is not None:
            print(f"against the baseline {ns.baseline}:")
            gate = _gate(baseline, report, ns)
            status = max(status, gate)  # 6 regressed over 4 stale, 3 invalid, 1 not certified
            # The gate's outcome stands beside the verdict, never in its place.
            said = {EXIT_OK: "no regression", EXIT_REGRESSED: f"REGRESSED (exit {EXIT_REGRESSED})"}.get(gate, f"not compared (exit {gate})")
            certified = "CERTIFIED" if report["verdict"]["certified"] else "NOT CERTIFIED"
            print(f"{certified}: {report['backend']['name']}: {report['verdict']['text']}; against the baseline: {said}")
    return status


# -- certify across machines (conformance.run.cluster) ------------------------------------------------

CLUSTER_OPTIONS = ("shards", "shard_cpus", "shard_retries", "cluster_workdir")
"""Options of --cluster alone."""
DRIVER_OPTIONS = frozenset({"command", "backend", "output", "shard", "record_not_run", "cluster", *CLUSTER_OPTIONS,
                            "baseline", "waivers", "threshold", "allow_stale", "sign", "workers"})  # fmt: skip
"""certify's options a cluster's shards are not given: the driver applies them (where the report goes,
the gate, signing, the cluster itself), or sets them per shard (--shard, --workers)."""


def _check_cluster_options(ns: argparse.Namespace) -> None:
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


def _shard_argv(ns: argparse.Namespace, extra: list[str], selection: str | None, workers: str) -> list[str]:
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


def _certify_on_cluster(ns, run, env, report_dirs: dict[str, Path], *, selection, extra, perf, baseline, started) -> int:
    """certify --cluster: the shards run on Ray (conformance.run.cluster), their results documents are
    written here and merged (``merge``), a shard lost on every try has its checks recorded not run,
    the merged report is verified, then the verdict and the gate as after a run on one machine."""
    import dataclasses

    from conformance import specs as spec_module
    from conformance.report import verify as verifying
    from conformance.run import cluster
    from conformance.run.files import write_json_atomic, write_text_atomic

    key = _private_key(ns.sign)
    retries = cluster.DEFAULT_RETRIES if ns.shard_retries is None else ns.shard_retries
    workdir = str(Path(ns.cluster_workdir or os.getcwd()).resolve())
    dirs = {name: d.name for name, d in report_dirs.items()}
    try:
        ray = cluster.connect(ns.cluster)
    except cluster.ClusterError as exc:
        raise UsageError(str(exc)) from None
    interrupt = _interruptible()  # Ctrl-C or SIGTERM cancels the shards left; the report says which
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
                print(f"conformance: shard {result.name}: {result.error}; its checks are recorded not run", file=sys.stderr, flush=True)
                return
            count = sum(len(json.loads(data)["results"]) for files in result.documents.values() for data in files.values())
            print(f"conformance: shard {result.name}: {count} results from node {result.address} ({(result.node or '')[:8]}), "
                  f"exit {result.status}, {result.seconds:.0f} s after the start", flush=True)  # fmt: skip

        shards, interrupted = cluster.run_shards(
            ray, _shard_argv(ns, extra, selection, workers), plan, retries=retries, workdir=workdir, dirs=list(dirs.values()), say=say
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
        print(f"conformance: no report: the checks of a lost shard could not be listed; the results that came back are in "
              f"{', '.join(str(d / 'results') for d in report_dirs.values())} (logs/cluster.json says which shards)", file=sys.stderr)
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
    status = max(status, _conclude(reports, ns, baseline, started))
    return EXIT_INTERRUPTED if interrupted else status


def _record_not_run(ns, run, env, report_dirs: dict[str, Path], *, selection, extra, perf) -> int:
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


class _interruptible:
    """SIGTERM (a cancelled CI job) ends a run the way Ctrl-C does: the supervisor stops the running
    session and a partial report is written from the results so far.

    Ctrl-C works whatever the process that started certify handed on: Python keeps SIGINT ignored
    when its parent ignored it (a background job of a non-interactive shell, some test runners'
    workers), and a blocked signal is never delivered; either way a SIGINT would leave the run going
    (tests/test_cli_inputs.py saw it). certify installs Python's own handler and unblocks both."""

    def __init__(self):
        import signal

        def stop(signum, frame):
            raise KeyboardInterrupt("stopped by SIGTERM")

        self._previous = signal.signal(signal.SIGTERM, stop)
        self._previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
        self._previous_mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})

    def restore(self) -> None:
        import signal

        signal.signal(signal.SIGTERM, self._previous)
        signal.signal(signal.SIGINT, self._previous_int)
        signal.pthread_sigmask(signal.SIG_SETMASK, self._previous_mask)


REPORT_TIMEOUT = 600


def _supervised_reports(
    report_dirs: list[Path], supervisor: Supervisor, specs_dir: str | None, key_file: str | None = None
) -> dict[Path, dict | None]:
    """``report`` in a process of its own, under the same watchdog as the checks: whatever the
    results hold, building the reports ends, and a report that could not be built says why."""
    timeout = REPORT_TIMEOUT if supervisor.deadline is None else max(60.0, min(REPORT_TIMEOUT, supervisor.deadline - time.monotonic()))
    timeout *= len(report_dirs)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "conformance", "report", *map(str, report_dirs), *(["--specs", specs_dir] if specs_dir else []),
             *(["--sign", key_file] if key_file else [])],
            capture_output=True, text=True, errors="replace", timeout=timeout,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - the CLI is single-threaded
        )
    except subprocess.TimeoutExpired:
        print(f"conformance: building the report did not finish in {timeout:.0f} s; the results are in {report_dirs[0] / 'results'}", file=sys.stderr)
        return dict.fromkeys(report_dirs)
    if done.returncode != EXIT_OK:
        print(f"conformance: cannot build the report: {clean_text(done.stderr.strip() or done.stdout.strip())[-2000:]}", file=sys.stderr)
    built = {}
    for report_dir in report_dirs:
        path = report_dir / "report.json"
        built[report_dir] = load_report(path) if path.exists() else None
    return built


def _say(outcome) -> None:
    """What the supervisor had to do in a phase, in a line or two."""
    if outcome.sessions > 1:
        print(f"conformance: the {outcome.tag} phase took {outcome.sessions} pytest sessions "
              f"(exit statuses {outcome.exit_statuses}); every planned check was run again where a session ended early")
    if outcome.lost:
        print(f"conformance: {len(outcome.lost)} check(s) recorded by the supervisor (their process died or hung): "
              + ", ".join(outcome.lost[:5]) + (" ..." if len(outcome.lost) > 5 else ""))
    if outcome.budget_spent:
        print(f"conformance: the run's time budget was spent; {len(outcome.not_run)} check(s) of the {outcome.tag} phase not run", file=sys.stderr)
    for note in outcome.notes:
        print(f"conformance: {note}", file=sys.stderr)


def _durations_snapshot(ns: argparse.Namespace, report_dir: Path, baseline: dict | None) -> Path | None:
    """The measured durations that order this run (conformance.run.scheduling), copied into the run's
    logs before the previous report is removed; None keeps the default order."""
    from conformance.run import scheduling

    choice = ns.durations_from
    if choice == "none":
        return None
    if choice is not None:
        if not Path(choice).is_file():
            raise UsageError(f"--durations-from {choice}: no such file (a report.json of an earlier run, or 'none')")
        measured = _durations_of_file(Path(choice))
        if not measured:
            raise UsageError(f"--durations-from {choice}: holds no check durations (a report.json has them under results[].duration_s)")
    else:
        measured = _durations_of_file(report_dir / "report.json") or (scheduling.durations_of(read_report(baseline)) if baseline else {})
    if not measured:
        return None
    snapshot = report_dir / "logs" / "durations.json"
    scheduling.write_durations(snapshot, measured)
    return snapshot.resolve()


def _durations_of_file(path: Path) -> dict[str, float]:
    """Check durations from a report.json of any format this harness reads (its results are tables),
    or from a snapshot of durations; empty when the file holds none."""
    from conformance.run import scheduling

    try:
        return scheduling.durations_of(load_report(path)) or scheduling.read_durations(path)
    except (OSError, ValueError, TypeError, AttributeError):
        return scheduling.read_durations(path)


def _shard_tag(text: str | None) -> str:
    from conformance.run.invocation import parse_shard

    if not text:
        return ""
    try:
        index, total = parse_shard(text)
    except ValueError as exc:
        raise UsageError(f"--shard {exc}") from None
    return f"-shard-{index}-of-{total}"


def _load_json(path: str, what: str) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{what} {path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} {path} is not JSON: {exc}") from None


def _gate(baseline: dict, report: dict, ns, paths: tuple[str | None, str | None] = (None, None)) -> int:
    """Verify both reports (3 invalid, 4 stale), refuse other specs or profiles (4), then diff (6 regressed)."""
    from conformance.report import verify as verifying
    from conformance.report.diff import DiffError, WaiverError, diff, load_waivers, render

    try:
        waivers = load_waivers(ns.waivers) if ns.waivers else []
        key = _public_key(getattr(ns, "public_key", None))
    except WaiverError as exc:
        raise UsageError(str(exc)) from None
    for label, document, path in (("baseline", baseline, paths[0]), ("new report", report, paths[1])):
        outcome = verifying.verify(document, public_key=key, allow_stale=ns.allow_stale, path=path)
        if not outcome.ok:
            print(verifying.render(outcome, f"{label} {path}" if path else label))
            return EXIT_INVALID if outcome.status is verifying.Status.INVALID else EXIT_STALE
        for note in outcome.notes:
            print(f"note: {label}: {note}")
    apart = [f"{k} {baseline['spec'][k]} -> {report['spec'][k]}" for k in ("digest", "profile") if baseline["spec"][k] != report["spec"][k]]
    if apart and not ns.allow_stale:
        print(f"CANNOT COMPARE: the reports were certified under a different spec {' and '.join(apart)}; "
              "re-certify the baseline, or pass --allow-stale to compare them by check id")
        return EXIT_STALE
    try:
        result = diff(baseline, report, threshold=ns.threshold, waivers=waivers)
    except DiffError as exc:
        print(f"INVALID: {exc}")
        return EXIT_INVALID
    print(render(result, ns.threshold))
    return EXIT_REGRESSED if result.failed else EXIT_OK


def _private_key(path: str | None):
    """The Ed25519 private key of ``--sign PATH`` (None without one); a usage error when unusable."""
    from conformance.report import signing

    try:
        return signing.load_private_key(path) if path else None
    except signing.KeyFileError as exc:
        raise UsageError(f"--sign: {exc}") from None


def _public_key(path: str | None):
    """The Ed25519 public key of ``--public-key PATH`` (None without one); a usage error when unusable."""
    from conformance.report import signing

    try:
        return signing.load_public_key(path) if path else None
    except signing.KeyFileError as exc:
        raise UsageError(f"--public-key: {exc}") from None


def build_and_write(report_dir: Path, specs, key=None) -> dict:
    """Merge results/*.json under ``report_dir`` into report.json and its renderings; signed
    when ``key`` (an Ed25519 private key) is given."""
    from conformance.report import build_report
    from conformance.run.journal import complete_documents

    if (report_dir / "results").is_dir():
        complete_documents(report_dir / "results")  # sessions that died before writing their document
    parts = sorted((report_dir / "results").glob("*.json"))
    if not parts:
        raise FileNotFoundError(report_dir / "results")
    return write_report(report_dir, build_report([json.loads(p.read_text()) for p in parts], specs), specs, key)


def write_report(report_dir: Path, report: dict, specs, key=None) -> dict:
    """report.json (``model.report_text``) and its renderings in ``report_dir``, signed when ``key``
    is given; ReportError for a report that does not match its schema."""
    from conformance.report import html, junit
    from conformance.report.markdown import render
    from conformance.report.model import report_text, validate
    from conformance.report.signing import sign
    from conformance.run.files import write_text_atomic

    problems = validate(report)
    if problems:  # the harness's own bug: say so instead of publishing a malformed certificate
        raise ReportError("report.json does not match its schema: " + "; ".join(problems[:5]))
    if key is not None:
        sign(report, key)
    text = report_text(report)
    # Each file whole or not at all, the renderings first and report.json last: a run killed in
    # between leaves renderings that name a report.json which is not there (verify says so).
    write_text_atomic(report_dir / "report.md", render(report, specs.clauses))
    write_text_atomic(report_dir / "junit.xml", junit.render(report))
    write_text_atomic(report_dir / "report.html", html.render(report, specs.clauses))
    write_text_atomic(report_dir / "report.json", text)
    return report


def rerender(report_dir: Path, specs, key=None) -> tuple[dict, list[str]]:
    """report.json in ``report_dir`` (any format this harness reads) written again in this one, with
    its renderings, and what changed; its results, flags, summary and verdict as they were."""
    from conformance.report import verify as verifying
    from conformance.report.model import rerendered

    path = report_dir / "report.json"
    try:
        document = verifying.load(path)
    except verifying.InvalidReport as exc:
        raise ReportError(f"{path}: {exc}") from None
    outcome = verifying.verify(document, specs=specs, allow_stale=True, path=path)
    if not outcome.ok:  # re-rendering would give an edited report a fresh integrity hash
        raise ReportError(f"{path} does not verify, so it is not re-rendered: {'; '.join(outcome.problems[:3])}")
    report, notes = rerendered(document)
    return write_report(report_dir, report, specs, key), notes


def _print_summary(report: dict, report_dir: Path, seconds: float, *, brief: bool = False) -> None:
    """The run's last words, reason first: what failed (by clause, then the first failures with
    their replay), what is not supported, then the counts and where the reports are. ``brief``
    (a run of several backends): the verdict line alone, each report says the rest."""
    from tabulate import tabulate

    from conformance.report import safe

    verdict = report["verdict"]
    if brief:
        print(f"{'CERTIFIED' if verdict['certified'] else 'NOT CERTIFIED'}: {report['backend']['name']}: {verdict['text']}  ({report_dir / 'report.json'})")
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
                print(f"  {'':17s} {_replay_command(r.replay)}")
        if len(failing) > 10:
            print(f"  ... and {len(failing) - 10} more in report.md")
    unsupported = verdict.get("unsupported", [])
    if unsupported:
        shown = ", ".join(unsupported[:8]) + (f" and {len(unsupported) - 8} more" if len(unsupported) > 8 else "")
        print(f"not supported but mandatory for profile {verdict['profile']}: {shown}")
    print(f"reports: {report_dir / 'report.json'}, report.md, report.html, junit.xml  ({seconds:.0f} s)")
    print(f"{'CERTIFIED' if verdict['certified'] else 'NOT CERTIFIED'}: {report['backend']['name']}: {verdict['text']}")


def _replay_command(replay: str) -> str:
    """A report's replay command (``python -m conformance replay DIR``, portable) as this
    interpreter runs it: the system's python may lack the harness's dependencies (a nox session's
    environment has them)."""
    prefix = "python -m conformance "
    return f"{shlex.quote(sys.executable)} -m conformance {replay[len(prefix):]}" if replay.startswith(prefix) else replay


def report_command(ns: argparse.Namespace) -> int:
    from conformance import specs as spec_module

    status = EXIT_OK
    key = _private_key(ns.sign)
    for directory in ns.directory:
        try:
            if ns.rerender:
                report, notes = rerender(Path(directory), spec_module.load(), key)
                print(f"{directory}: re-rendered" + (f" ({'; '.join(notes)})" if notes else "") + f": {report['verdict']['text']}")
                continue
            report = build_and_write(Path(directory), spec_module.load(), key)
        except FileNotFoundError as exc:
            print(f"conformance: no results to build a report from ({exc}); see the pytest output above", file=sys.stderr)
            status = EXIT_NOT_CERTIFIED
            continue
        except ReportError as exc:
            print(f"conformance: {directory}: {exc}", file=sys.stderr)
            status = EXIT_NOT_CERTIFIED
            continue
        print(report["verdict"]["text"])
    return status


def replay(ns: argparse.Namespace) -> int:
    """Re-run a saved failing example through the backend and show the comparison."""
    from conformance import replay as replays

    try:
        saved = replays.load(Path(ns.directory))
    except replays.NoSavedExample as exc:
        raise UsageError(str(exc)) from None
    backend = _backend_or_exit(ns.backend or saved.backend.name)
    return EXIT_OK if replays.rerun(saved, backend) else EXIT_NOT_CERTIFIED


def diff_command(ns: argparse.Namespace) -> int:
    from conformance.report import verify as verifying

    reports = []
    for path in (ns.old, ns.new):
        try:
            reports.append(verifying.load(Path(path)))
        except OSError as exc:
            raise UsageError(f"report {path}: {exc.strerror or exc}") from None
        except verifying.InvalidReport as exc:
            print(f"INVALID: {path}: {exc}")
            return EXIT_INVALID
    return _gate(*reports, ns, paths=(ns.old, ns.new))


def verify_command(ns: argparse.Namespace) -> int:
    """Schema, staleness, integrity hash, signature, the verdict recomputed, the renderings beside it."""
    from conformance.report import verify as verifying

    key = _public_key(ns.public_key)
    try:
        outcome = verifying.verify_file(ns.report, public_key=key, allow_stale=ns.allow_stale)
    except OSError as exc:
        raise UsageError(f"report {ns.report}: {exc.strerror or exc}") from None
    print(verifying.render(outcome, ns.report))
    if outcome.ok:
        return EXIT_OK if outcome.signature is verifying.Signature.VERIFIED else EXIT_UNSIGNED
    return EXIT_STALE if outcome.status is verifying.Status.STALE else EXIT_INVALID


def merge_command(ns: argparse.Namespace) -> int:
    """Merge results documents (shards, phases) into DIR/report.json."""
    from conformance import specs as spec_module

    target = Path(ns.directory)
    files: list[Path] = []
    for item in ns.results:
        path = Path(item)
        found = sorted(path.glob("results/*.json")) + sorted(path.glob("*.json")) if path.is_dir() else [path]
        files += [f for f in found if f.name not in ("report.json",)]
    if not files:
        raise UsageError("no results documents given")
    key = _private_key(ns.sign)
    here = (target / "results").resolve()
    report = merge(target, {f.name: f.read_bytes() for f in files if f.parent.resolve() != here}, spec_module.load(), key)
    if report is None:
        return EXIT_NOT_CERTIFIED
    print(f"merged {len(files)} results document(s) into {target / 'report.json'}: {report['verdict']['text']}")
    return EXIT_OK if report["verdict"]["certified"] else EXIT_NOT_CERTIFIED


def merge(target: Path, documents: dict[str, bytes], specs, key=None) -> dict | None:
    """Results documents (file name -> bytes) written into ``target``/results beside those already
    there, and all of them merged into ``target``/report.json (None, said why, when they cannot be):
    ``merge`` and ``certify --cluster``."""
    results_dir = target / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    for name, data in documents.items():
        (results_dir / name).write_bytes(data)
    try:
        return build_and_write(target, specs, key)
    except ReportError as exc:
        print(f"conformance: cannot merge: {exc}", file=sys.stderr)
        return None


def scoreboard_command(ns: argparse.Namespace) -> int:
    """Several backends side by side: OUTPUT/scoreboard.md and scoreboard.html."""
    from conformance import specs as spec_module
    from conformance.report import scoreboard
    from conformance.report import verify as verifying

    specs = spec_module.load()
    reports = [_load_json(path, "report") for path in ns.reports]
    outcomes = [verifying.verify(r, specs=specs, allow_stale=True, path=path) for r, path in zip(reports, ns.reports)]
    model = scoreboard.build(reports, specs.clauses, outcomes=outcomes)
    out = Path(ns.output)
    out.mkdir(parents=True, exist_ok=True)
    from conformance.run.files import write_text_atomic

    write_text_atomic(out / "scoreboard.md", scoreboard.render_markdown(model))
    write_text_atomic(out / "scoreboard.html", scoreboard.render_html(model))
    for warning in model.get("warnings", []):
        print(f"WARNING: {warning['message'] if isinstance(warning, dict) else warning}")
    print(f"scoreboard of {len(reports)} backend(s): {out / 'scoreboard.md'}, {out / 'scoreboard.html'}")
    return EXIT_OK if all(o.status is not verifying.Status.INVALID for o in outcomes) else EXIT_INVALID


def list_command(ns: argparse.Namespace) -> int:
    """Backends (entry points), profiles (with what they hold), and with --ops every spec'd op."""
    from conformance import specs as spec_module
    from conformance.discovery import DiscoveryError, available, entry_points

    specs = _load_specs()
    if ns.ops:
        for name, spec in sorted(specs.ops.items()):
            print(f"{name:44s} {'core ' if spec.core else '     '}{','.join(spec.dtypes)}" + (f"  (also {', '.join(spec.edge)})" if spec.edge else ""))
        return EXIT_OK
    try:
        found = available()
    except DiscoveryError as exc:
        raise UsageError(str(exc)) from None
    print("backends (python -m conformance certify NAME):")
    for name in found:
        print(f"  {name:40s} {entry_points()[name].value}")
    print("profiles (--profile NAME):")
    for name, profile in specs.profiles.items():
        pairs = sum(len(d) for d in profile.dtypes.values())
        print(
            f"  {name:14s} {len(profile.clauses):3d} clauses, {len(profile.ops):3d} ops, {pairs:4d} op x dtype, "
            f"{len(profile.models):2d} models, {len(profile.quantized):2d} quantized  {profile.description}"
        )
    print(f"  {spec_module.CLAIMED:14s} the contract clauses plus exactly the ops and dtypes the backend's manifest claims")
    print("  FILE.toml[:NAME]  a profiles file of your own, in specs/profiles.toml's format (may extend the profiles above)")
    print("narrow any profile with --ops aten.add.*,*conv* and --dtypes float32,int32; `list --ops` lists the ops")
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    from conformance import __version__
    from conformance.run.cluster import DEFAULT_RETRIES

    p = argparse.ArgumentParser(prog="python -m conformance", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=f"torch-backend-conformance {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("certify", help="certify a backend and write reports/NAME/report.{json,md}")
    c.add_argument("backend", nargs="+", help="entry-point name (see `list`), module:attr or path.py:attr; several share one "
                   "pytest session and the profile, each gets its own report")
    c.add_argument(
        "--profile",
        default=None,
        help="certification profile: a name `list` shows, `claimed` (the ops the backend claims), or a profiles "
        "file FILE.toml[:NAME] in specs/profiles.toml's format (default: the backend's own, usually full)",
    )
    c.add_argument("--ops", action="append", default=None, metavar="PATTERNS",
                   help="only these ops of the profile: comma-separated names or patterns (aten.add.*, *conv*); repeatable")
    c.add_argument("--dtypes", action="append", default=None, metavar="DTYPES",
                   help="only these dtypes of the profile, comma-separated (float32,int32); repeatable")
    c.add_argument("--output", default="reports", help="where reports go: each backend's into OUTPUT/NAME/ (default: reports)")
    c.add_argument("--hypothesis-profile", default="ci", choices=HYPOTHESIS_PROFILES,
                   help="examples drawn per NUM check: ci 8 (default, derandomized), dev 100, thorough 1000 (nightly)")
    c.add_argument("--workers", default="auto", help="pytest-xdist workers (default auto: the cores, or with --cluster a shard's CPUs; "
                   "0 runs in-process, no crash isolation)")
    c.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per check before TIMEOUT")
    c.add_argument("--hard-timeout", type=float, default=None, help="seconds after which a check's process is killed (default 2 x --timeout + 10)")
    c.add_argument("--skip-perf", action="store_true", help="skip the performance session")
    c.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="where programs, lowerings and compiled packages are cached on disk, or 'off' "
                   "(default: $XDG_CACHE_HOME/torch-backend-conformance)")
    c.add_argument("--budget", type=float, default=DEFAULT_BUDGET, help=f"seconds the whole run may take; checks left then are recorded not run (default {DEFAULT_BUDGET})")
    c.add_argument("--shard", default=None, metavar="I/N", help="run shard I of N; merge shards with `merge`")
    c.add_argument("--record-not-run", default=None, metavar="REASON",
                   help="with --shard I/N: run nothing, record every check of the shard not run for REASON (its machine left no "
                   "results), to merge with the other shards (exit 1)")
    c.add_argument("--cluster", default=None, metavar="ADDRESS",
                   help="run the shards on a Ray cluster and merge them here: a Ray address, 'auto' (the cluster this machine "
                   "belongs to) or 'local' (a Ray started here); needs pip install 'torch-backend-conformance[cluster]'")
    c.add_argument("--shards", type=int, default=None, metavar="K", help="with --cluster: how many shards (default twice the nodes)")
    c.add_argument("--shard-cpus", type=int, default=None, metavar="C",
                   help="with --cluster: CPUs each shard reserves on its node, and its --workers unless given (default half the smallest node's)")
    c.add_argument("--shard-retries", type=int, default=None, metavar="R",
                   help=f"with --cluster: times a shard is started again on another node when its node dies (default {DEFAULT_RETRIES}); "
                   "a shard lost every time has its checks recorded not run")
    c.add_argument("--cluster-workdir", default=None, metavar="DIR",
                   help="with --cluster: where each node runs its shard, holding what relative paths name (default this directory)")
    c.add_argument("--durations-from", default=None, metavar="REPORT",
                   help="a report.json whose check durations order this run longest first (default: the backend's "
                        "previous report in --output, else --baseline; 'none' keeps contract checks first)")
    c.add_argument("--baseline", default=None, help="report.json of a previous run: also compare every check's category and timing with it; "
                   "exit 6 on a regression (the verdict is printed and gives 1 when not certified)")
    c.add_argument("--sign", default=None, metavar="KEY.pem", help="sign report.json with this Ed25519 private key (PEM; make a pair: "
                   "openssl genpkey -algorithm ed25519 -out KEY.pem && openssl pkey -in KEY.pem -pubout -out KEY.pub.pem)")
    _gate_options(c)
    r = sub.add_parser("report", help="rebuild report.json and its renderings from DIR/results/*.json")
    r.add_argument("directory", nargs="+")
    r.add_argument("--sign", default=None, metavar="KEY.pem", help="sign report.json with this Ed25519 private key (PEM)")
    r.add_argument("--rerender", action="store_true",
                   help="write DIR/report.json (of this or a previous report format) again in this harness's format, with its "
                        "renderings, from itself alone: its results and verdict as they were (not recomputed; a report of "
                        "another spec stays stale), its integrity hash computed again over the new form")
    rp = sub.add_parser("replay", help="re-run a saved failing example")
    rp.add_argument("directory", help="a failing example's replay directory, as the report and the console print it "
                                      "(reports/NAME/replays/...)")
    rp.add_argument("--backend", default=None, help="backend to run it on (default: the one that failed)")
    d = sub.add_parser("diff", help="compare two reports; exit 6 on a regression (a result no longer passing, missing or failing, a dropped claim, a slowdown)")
    d.add_argument("old")
    d.add_argument("new")
    _gate_options(d)
    d.add_argument("--public-key", default=None, metavar="PUB.pem", help="Ed25519 public key (PEM): both reports must be signed by its private key")
    v = sub.add_parser("verify", help="check a report's schema, integrity hash, signature, verdict and renderings")
    v.add_argument("report")
    v.add_argument("--public-key", default=None, metavar="PUB.pem",
                   help="Ed25519 public key (PEM): the report must be signed by its private key (without it: exit 5, signature not checked)")
    v.add_argument("--allow-stale", action="store_true", help="accept a report of another spec or harness version: check its integrity only")
    m = sub.add_parser("merge", help="merge results documents (shards) into DIR/report.json")
    m.add_argument("directory", help="output directory, e.g. reports/mybackend")
    m.add_argument("results", nargs="+", help="results/*.json files or directories holding them")
    m.add_argument("--sign", default=None, metavar="KEY.pem", help="sign report.json with this Ed25519 private key (PEM)")
    sb = sub.add_parser("scoreboard", help="backends side by side from their report.json files")
    sb.add_argument("reports", nargs="+")
    sb.add_argument("--output", default="reports", help="directory for scoreboard.md/html (default: reports)")
    ls = sub.add_parser("list", help="list backends found through entry points, and the profiles")
    ls.add_argument("--ops", action="store_true", help="list every spec'd op with its dtypes (core: in torch's core ATen set)")
    for command in (c, r, rp, d, v, m, sb, ls):
        command.add_argument("--specs", default=None, metavar="DIR", help="the spec of record to use instead of the installed one (a specs/ directory)")
    return p


def _gate_options(p: argparse.ArgumentParser) -> None:
    from conformance.report.diff import DEFAULT_THRESHOLD

    p.add_argument("--waivers", default=None, help="TOML file of waivers ([[waiver]] id, reason, tracking, expires)")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help="performance regression ratio (default 1.25)")
    p.add_argument("--allow-stale", action="store_true", help="compare reports of another spec, profile or harness version by check id")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    p = parser()
    ns, unknown = p.parse_known_args(argv)
    extra = unknown + extra  # unknown options go to pytest (-k, -x, --timeout-method ...)
    if ns.command != "certify" and extra:
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    from conformance import specs as spec_module

    spec_module.use(ns.specs)  # for this command only: main() may run in-process (tests)
    try:
        if ns.command == "certify":
            return certify(ns, extra)
        if ns.command == "report":
            return report_command(ns)
        if ns.command == "replay":
            return replay(ns)
        if ns.command == "diff":
            return diff_command(ns)
        if ns.command == "verify":
            return verify_command(ns)
        if ns.command == "merge":
            return merge_command(ns)
        if ns.command == "scoreboard":
            return scoreboard_command(ns)
        return list_command(ns)
    except UsageError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `conformance list | head`: the reader left; nothing more to say
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    finally:
        spec_module.use(None)
