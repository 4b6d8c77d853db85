"""python -m conformance certify | report | diff | verify | merge | scoreboard | replay | list

A thin layer over pytest: ``certify`` runs the checks in ``conformance.checks``
(through the plugin, in pytest-xdist workers so a crash costs one result),
then the performance checks in a session of their own (timing under xdist is
unreliable), then merges both results documents into the report.

Exit codes (every command):

    0  certified; verify: the report is valid and current; diff: no regression
    1  not certified; diff: a regression (a new failure, a missing result, a slowdown)
    2  usage error: bad arguments, an unknown backend, an unreadable file
    3  invalid report: schema, integrity hash, signature, or a verdict/summary the results do not give
    4  cannot compare: the report's spec digest or harness version is not this harness's
       (verify --allow-stale accepts it; diff of reports under different specs)
  130  certify was interrupted (Ctrl-C, SIGTERM): the report written is partial, not certified
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from conformance.report.model import ReportError, records
from conformance.supervision import JOURNAL_SUFFIX, die_with_parent
from conformance.supervisor import Supervisor
from conformance.transport import clean_text

EXIT_OK, EXIT_NOT_CERTIFIED, EXIT_USAGE, EXIT_INVALID, EXIT_STALE = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130
"""certify stopped by Ctrl-C or SIGTERM: a partial report (not certified) was written."""
DEFAULT_TIMEOUT = 120
DEFAULT_BUDGET = 6 * 3600
"""Seconds a whole certify run may take before what is left is recorded "not run"."""
MAX_WORKER_RESTARTS = 20
"""Per pytest session; the supervisor starts another session for what a session left."""
REPORT_FILES = ("report.json", "report.md", "report.html", "junit.xml")
CLOSED_RUN_PLUGINS = (
    "-p", "conformance.plugin", "-p", "xdist.plugin", "-p", "pytest_timeout", "-p", "pytest_benchmark.plugin", "-p", "_hypothesis_pytestplugin",
    "--noconftest",  # nor a conftest.py of the directory certify runs in
)  # fmt: skip
"""The only pytest plugins a certification loads (report.json lists them under run.plugins)."""


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


def _split_selection(extra: list[str]) -> tuple[list[str], str | None]:
    """Take the user's -k expression out of ``extra`` so each phase can AND it with its own."""
    rest, expr, i = [], None, 0
    while i < len(extra):
        if extra[i] == "-k" and i + 1 < len(extra):
            expr = extra[i + 1] if expr is None else f"({expr}) and ({extra[i + 1]})"
            i += 2
        elif extra[i].startswith("-k") and len(extra[i]) > 2:
            expr = extra[i][2:] if expr is None else f"({expr}) and ({extra[i][2:]})"
            i += 1
        else:
            rest.append(extra[i])
            i += 1
    return rest, expr


def _and(base: str, user: str | None) -> str:
    return base if user is None else f"({base}) and ({user})"


def resolve_profile(ns: argparse.Namespace, backend, specs):
    """The profile a certify run checks: a name of specs/profiles.toml, ``claimed`` (what the
    manifest claims), or FILE.toml[:NAME] (a user's profiles file); narrowed by --ops/--dtypes."""
    from conformance import specs as spec_module

    value = ns.profile or backend.profile
    try:
        base = specs.profile(backend.profile) if backend.profile in specs.profiles else specs.profile("full")
        if value == spec_module.CLAIMED:
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
    except spec_module.SpecError as exc:
        raise UsageError(str(exc)) from None
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
    try:
        spec_module.check_claims(specs, backend.manifest.ops, f"the manifest of {backend.name!r}")
        spec_module.check_signatures(specs)
    except spec_module.SpecError as exc:
        raise UsageError(str(exc)) from None


def _load_specs():
    from conformance import specs as spec_module

    try:
        return spec_module.load()
    except spec_module.SpecError as exc:
        raise UsageError(f"the spec cannot be read: {exc}") from None


def certify(ns: argparse.Namespace, extra: list[str]) -> int:
    from conformance.plugin import safe_name, write_text_atomic
    from conformance.specs import is_builtin, profile_definition

    specs = _load_specs()
    backend = _backend_or_exit(ns.backend)  # fail fast (exit 2) on a name that cannot be built
    extra, selection = _split_selection(extra)
    _check_inputs(ns, backend, specs)
    profile = resolve_profile(ns, backend, specs)
    out = Path(ns.output)
    shard = _shard_tag(ns.shard)
    results_dir = out / safe_name(ns.backend) / "results"
    _check_output(out, results_dir.parent, ns.baseline)
    baseline = _load_json(ns.baseline, "baseline") if ns.baseline else None  # before the old report goes
    if not shard:
        # Nothing of an earlier run may stand beside this one's results: a run killed half-way
        # must leave no report that looks like its own.
        for stale in [*results_dir.glob("*.json"), *results_dir.glob(f"*{JOURNAL_SUFFIX}")]:
            stale.unlink()
        for stale in REPORT_FILES:
            (results_dir.parent / stale).unlink(missing_ok=True)
        shutil.rmtree(results_dir.parent / "replays", ignore_errors=True)  # an earlier run's failures
    results_dir.mkdir(parents=True, exist_ok=True)
    profile_file: list[str] = []
    if not is_builtin(profile, specs):  # claimed, a user's file, a selection: the sessions read its definition
        definition = results_dir.parent / "logs" / "profile.json"
        definition.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(definition, json.dumps(profile_definition(profile), indent=1))
        profile_file = ["--conformance-profile-file", str(definition)]
    # A certify run started from inside a pytest-xdist worker (a CI test) must not inherit its
    # identity: pytest-benchmark disables itself wherever PYTEST_XDIST_WORKER is set.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["HYPOTHESIS_PROFILE"] = ns.hypothesis_profile
    # A closed run: no pytest plugin another installed package registers may load (one could turn
    # failures into passes); only ours and the engines the checks use, named here. The xdist
    # workers inherit the variable and the -p options.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    common = [*CLOSED_RUN_PLUGINS,
        "--pyargs",
        "conformance.checks",
        "--conformance-backend",
        ns.backend,
        "--conformance-profile",
        profile.name,
        *profile_file,
        "--conformance-out",
        str(out),
        "--conformance-categories",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "-o",
        "python_files=test_*.py",
        "--rootdir",
        str(Path.cwd()),
    ]
    if shard:
        common += ["--conformance-shard", ns.shard]
    started = time.perf_counter()
    hard = ns.hard_timeout or 2 * ns.timeout + 10
    if hard <= ns.timeout:
        raise UsageError(f"--hard-timeout ({hard:g} s) must exceed --timeout ({ns.timeout:g} s): the watchdog kills what the timeout could not stop")
    supervisor = Supervisor(
        results_dir,
        hard_timeout=hard,
        deadline=time.monotonic() + ns.budget if ns.budget else None,
        budget_s=ns.budget,
    )
    workers = ["-n", str(ns.workers), "--max-worker-restart", str(MAX_WORKER_RESTARTS)] if ns.workers != "0" else ["-p", "no:xdist"]
    interrupt = _interruptible()
    checks = supervisor.run_phase(
        f"checks{shard}",
        common
        + workers
        + ["--timeout", str(ns.timeout), "-o", "timeout_func_only=true", "--conformance-hard-timeout", str(hard)]
        + ["-k", _and("not test_PERF", selection), "--benchmark-disable"]
        # Warnings stay in the worker: xdist would ship each to the controller, which imports the
        # warning's category to rebuild it (ExecuTorch's: ~3 s of importing executorch.exir there).
        + ["-p", "no:warnings"]
        + extra,
        env,
        in_process=ns.workers == "0",
    )
    _say(checks)
    perf_wanted = any(c.startswith("PERF-") for c in profile.clauses) and not ns.skip_perf
    if perf_wanted and supervisor.budget_left() and not supervisor.interrupted:
        print("conformance: timing preprocess, init and execute (pytest-benchmark, no workers) ...", flush=True)
        perf = supervisor.run_phase(
            f"perf{shard}",
            common
            + ["-p", "no:xdist", "--timeout", str(ns.timeout), "-o", "timeout_func_only=true", "-k", _and("test_PERF", selection)]
            + ["--benchmark-min-rounds", "15", "--benchmark-max-time", "0.5", "--benchmark-disable-gc", "-q"]
            + extra,
            env,
            in_process=True,
            log=results_dir.parent / "logs" / f"perf{shard}.log",
        )
        _say(perf)
    report_dir = out / safe_name(ns.backend)
    if shard:
        parts = sorted(results_dir.glob(f"*{shard}*.json"))
        failing = sum(r.category.is_failure for p in parts for r in records(json.loads(p.read_text())["results"]))
        print(f"shard {ns.shard}: results in {', '.join(map(str, parts))}; {failing} failing. "
              f"Merge every shard's results with: python -m conformance merge {report_dir} <results files or dirs>")
        return EXIT_NOT_CERTIFIED if failing else EXIT_OK
    if supervisor.interrupted:
        print(f"conformance: the run was {supervisor.interrupted}: writing a partial report from the results so far "
              "(press Ctrl-C again to abandon it)", file=sys.stderr, flush=True)
    interrupt.restore()
    report = _supervised_report(report_dir, supervisor)
    if report is None:
        return EXIT_INTERRUPTED if supervisor.interrupted else EXIT_NOT_CERTIFIED
    _print_summary(report, report_dir, time.perf_counter() - started)
    if supervisor.interrupted:
        return EXIT_INTERRUPTED
    if baseline is not None:
        return _gate(baseline, report, ns)
    return EXIT_OK if report["verdict"]["certified"] else EXIT_NOT_CERTIFIED


class _interruptible:
    """SIGTERM (a cancelled CI job) ends a run the way Ctrl-C does: the supervisor stops the running
    session and a partial report is written from the results so far."""

    def __init__(self):
        import signal

        def stop(signum, frame):
            raise KeyboardInterrupt("stopped by SIGTERM")

        self._previous = signal.signal(signal.SIGTERM, stop)

    def restore(self) -> None:
        import signal

        signal.signal(signal.SIGTERM, self._previous)


REPORT_TIMEOUT = 600


def _supervised_report(report_dir: Path, supervisor: Supervisor) -> dict | None:
    """``report`` in a process of its own, under the same watchdog as the checks: whatever the
    results hold, building the report ends, and a report that could not be built says why."""
    timeout = REPORT_TIMEOUT if supervisor.deadline is None else max(60.0, min(REPORT_TIMEOUT, supervisor.deadline - time.monotonic()))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "conformance", "report", str(report_dir)],
            capture_output=True, text=True, errors="replace", timeout=timeout,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - the CLI is single-threaded
        )
    except subprocess.TimeoutExpired:
        print(f"conformance: building the report did not finish in {timeout:.0f} s; the results are in {report_dir / 'results'}", file=sys.stderr)
        return None
    if done.returncode != EXIT_OK:
        print(f"conformance: cannot build the report: {clean_text(done.stderr.strip() or done.stdout.strip())[-2000:]}", file=sys.stderr)
        return None
    return json.loads((report_dir / "report.json").read_text())


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


def _shard_tag(text: str | None) -> str:
    if not text:
        return ""
    try:
        index, total = (int(x) for x in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard takes I/N, e.g. 1/4; got {text!r}") from None
    if not 1 <= index <= total:
        raise UsageError(f"--shard {text}: I must be between 1 and N")
    return f"-shard-{index}-of-{total}"


def _load_json(path: str, what: str) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{what} {path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} {path} is not JSON: {exc}") from None


def _gate(baseline: dict, report: dict, ns, paths: tuple[str | None, str | None] = (None, None)) -> int:
    """Verify both reports (3 invalid, 4 stale), refuse other specs or profiles (4), then diff (1 regressed)."""
    from conformance.report import verify as verifying
    from conformance.report.diff import DiffError, WaiverError, diff, load_waivers, render

    try:
        waivers = load_waivers(ns.waivers) if ns.waivers else []
        key = verifying.signing_key(getattr(ns, "key_file", None), os.environ)
    except (WaiverError, verifying.SigningKeyError) as exc:
        raise UsageError(str(exc)) from None
    for label, document, path in (("baseline", baseline, paths[0]), ("new report", report, paths[1])):
        outcome = verifying.verify(document, key=key, allow_stale=ns.allow_stale, path=path)
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
    return EXIT_NOT_CERTIFIED if result.failed else EXIT_OK


def build_and_write(report_dir: Path, specs) -> dict:
    """Merge results/*.json under ``report_dir`` into report.json and its renderings."""
    from conformance.plugin import write_json_atomic, write_text_atomic
    from conformance.report import build_report, html, junit
    from conformance.report.markdown import render
    from conformance.report.model import sign, validate
    from conformance.report.verify import signing_key
    from conformance.supervisor import complete_documents

    if (report_dir / "results").is_dir():
        complete_documents(report_dir / "results")  # sessions that died before writing their document
    parts = sorted((report_dir / "results").glob("*.json"))
    if not parts:
        raise FileNotFoundError(report_dir / "results")
    report = build_report([json.loads(p.read_text()) for p in parts], specs)
    problems = validate(report)
    if problems:  # the harness's own bug: say so instead of publishing a malformed certificate
        raise ReportError("report.json does not match its schema: " + "; ".join(problems[:5]))
    sign(report, signing_key(None, os.environ))  # CI holds CONFORMANCE_SIGNING_KEY; without it, unsigned
    # Each file whole or not at all, the renderings first and report.json last: a run killed in
    # between leaves renderings that name a report.json which is not there (verify says so).
    write_text_atomic(report_dir / "report.md", render(report, specs.clauses))
    write_text_atomic(report_dir / "junit.xml", junit.render(report))
    write_text_atomic(report_dir / "report.html", html.render(report, specs.clauses))
    write_json_atomic(report_dir / "report.json", report)
    return report


def _print_summary(report: dict, report_dir: Path, seconds: float) -> None:
    """The run's last words, reason first: what failed (by clause, then the first failures with
    their replay), what is not supported, then the counts and where the reports are."""
    from tabulate import tabulate

    from conformance.report import safe

    verdict = report["verdict"]
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
            print(f"  {r.category.value:17s} {r.id}: {safe.plain(r.message, 160)}")
            if r.replay:
                print(f"  {'':17s} {r.replay}")
        if len(failing) > 10:
            print(f"  ... and {len(failing) - 10} more in report.md")
    unsupported = verdict.get("unsupported", [])
    if unsupported:
        shown = ", ".join(unsupported[:8]) + (f" and {len(unsupported) - 8} more" if len(unsupported) > 8 else "")
        print(f"not supported but mandatory for profile {verdict['profile']}: {shown}")
    print(f"reports: {report_dir / 'report.json'}, report.md, report.html, junit.xml  ({seconds:.0f} s)")
    print(f"{'CERTIFIED' if verdict['certified'] else 'NOT CERTIFIED'}: {report['backend']['name']}: {verdict['text']}")


def report_command(ns: argparse.Namespace) -> int:
    from conformance import specs as spec_module

    try:
        report = build_and_write(Path(ns.directory), spec_module.load())
    except FileNotFoundError as exc:
        print(f"conformance: no results to build a report from ({exc}); see the pytest output above", file=sys.stderr)
        return EXIT_NOT_CERTIFIED
    except ReportError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return EXIT_NOT_CERTIFIED
    print(report["verdict"]["text"])
    return EXIT_OK


def replay(ns: argparse.Namespace) -> int:
    """Re-run a saved failing example through the backend and show the comparison."""
    import numpy as np

    from conformance import oracle
    from conformance import specs as spec_module
    from conformance.driver import Driver
    from conformance.programs import program_for
    from conformance.results import CheckFailure
    from conformance.strategies.case import Call

    directory = Path(ns.directory)
    try:
        saved = json.loads((directory / "call.json").read_text())
        arrays = dict(np.load(directory / "arrays.npz"))
    except FileNotFoundError as exc:
        raise UsageError(f"{directory} holds no saved example ({exc.filename} missing)") from None
    call = Call.from_json(saved["call"], arrays)
    from conformance.checks.test_numerics import REPLAY_BACKEND_FILE

    recorded = directory.parent / REPLAY_BACKEND_FILE
    name = ns.backend or (recorded.read_text(encoding="utf-8").strip() if recorded.is_file() else directory.parent.parent.name)
    backend = _backend_or_exit(name)
    spec = spec_module.load().op(call.op)
    print(f"backend: {backend.name}\ncall:    {call.describe()}\nsaved:   {saved['message']}")
    program = program_for(call, dynamic=spec.dynamic)
    expected = [arrays[k] for k in sorted(arrays) if k.startswith("expected")]
    expected = [e.view("bfloat16") if e.dtype == np.uint16 and call.tensors() and call.tensors()[0].dtype == "bfloat16" else e for e in expected]
    try:
        ran = Driver(backend).run(program.exported, program.inputs, expected)
    except CheckFailure as exc:
        print(f"now:     {exc.category.value}: {exc.message}")
        return EXIT_NOT_CERTIFIED
    failed = False
    for i, (a, e) in enumerate(zip(ran.outputs, expected)):
        cmp = oracle.compare(np.asarray(a), e, oracle.tolerance_for(spec, oracle.dtype_name(e.dtype), backend.manifest, call.op))
        print(f"output {i}: {'ok' if cmp.ok else 'MISMATCH'}: {cmp.message} (max abs {cmp.max_abs:g}, max ulp {cmp.max_ulp:g})")
        failed |= not cmp.ok
    return EXIT_NOT_CERTIFIED if failed else EXIT_OK


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

    try:
        key = verifying.signing_key(ns.key_file, os.environ)
        outcome = verifying.verify_file(ns.report, key=key, allow_stale=ns.allow_stale)
    except verifying.SigningKeyError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"report {ns.report}: {exc.strerror or exc}") from None
    print(verifying.render(outcome, ns.report))
    status = verifying.Status
    return {status.VALID: EXIT_OK, status.UNCHECKED: EXIT_OK, status.STALE: EXIT_STALE}.get(outcome.status, EXIT_INVALID)


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
    results_dir = target / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    for f in files:
        if f.parent.resolve() != results_dir.resolve():
            (results_dir / f.name).write_text(f.read_text())
    try:
        report = build_and_write(target, spec_module.load())
    except ReportError as exc:
        print(f"conformance: cannot merge: {exc}", file=sys.stderr)
        return EXIT_NOT_CERTIFIED
    print(f"merged {len(files)} results document(s) into {target / 'report.json'}: {report['verdict']['text']}")
    return EXIT_OK if report["verdict"]["certified"] else EXIT_NOT_CERTIFIED


def scoreboard_command(ns: argparse.Namespace) -> int:
    """Several backends side by side: OUTPUT/scoreboard.md and scoreboard.html."""
    from conformance import specs as spec_module
    from conformance.report import scoreboard
    from conformance.report import verify as verifying

    specs = spec_module.load()
    reports = [_load_json(path, "report") for path in ns.reports]
    key = verifying.signing_key(None, os.environ)
    outcomes = [verifying.verify(r, specs=specs, key=key, allow_stale=True, path=path) for r, path in zip(reports, ns.reports)]
    model = scoreboard.build(reports, specs.clauses, outcomes=outcomes)
    out = Path(ns.output)
    out.mkdir(parents=True, exist_ok=True)
    from conformance.plugin import write_text_atomic

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
        print(f"  {name:14s} {len(profile.clauses):3d} clauses, {len(profile.ops):3d} ops, {pairs:4d} op x dtype  {profile.description}")
    print(f"  {spec_module.CLAIMED:14s} the contract clauses plus exactly the ops and dtypes the backend's manifest claims")
    print("  FILE.toml[:NAME]  a profiles file of your own, in specs/profiles.toml's format (may extend the profiles above)")
    print("narrow any profile with --ops aten.add.*,*conv* and --dtypes float32,int32; `list --ops` lists the ops")
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    from conformance import __version__

    p = argparse.ArgumentParser(prog="python -m conformance", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=f"torch-backend-conformance {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("certify", help="certify a backend and write reports/NAME/report.{json,md}")
    c.add_argument("backend", help="entry-point name (see `list`) or module:attr")
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
    c.add_argument("--output", default="reports", help="directory for reports (default: reports)")
    c.add_argument("--hypothesis-profile", default=os.environ.get("HYPOTHESIS_PROFILE", "ci"), choices=["ci", "dev", "thorough"])
    c.add_argument("--workers", default="auto", help="pytest-xdist workers (default auto; 0 runs in-process, no crash isolation)")
    c.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per check before TIMEOUT")
    c.add_argument("--hard-timeout", type=float, default=None, help="seconds after which a check's process is killed (default 2 x --timeout + 10)")
    c.add_argument("--skip-perf", action="store_true", help="skip the performance session")
    c.add_argument("--budget", type=float, default=DEFAULT_BUDGET, help=f"seconds the whole run may take; checks left then are recorded not run (default {DEFAULT_BUDGET})")
    c.add_argument("--shard", default=None, metavar="I/N", help="run shard I of N; merge shards with `merge`")
    c.add_argument("--baseline", default=None, help="report.json of a previous run: exit non-zero only on new failures or regressions")
    _gate_options(c)
    r = sub.add_parser("report", help="rebuild report.json/md from DIR/results/*.json")
    r.add_argument("directory")
    rp = sub.add_parser("replay", help="re-run a saved failing example")
    rp.add_argument("directory")
    rp.add_argument("--backend", default=None, help="backend to run it on (default: the one that failed)")
    d = sub.add_parser("diff", help="compare two reports; exit 1 on new failures or performance regressions")
    d.add_argument("old")
    d.add_argument("new")
    _gate_options(d)
    d.add_argument("--key-file", default=None, help="signing key: both reports must be signed with it (default: $CONFORMANCE_SIGNING_KEY)")
    v = sub.add_parser("verify", help="check a report's schema, integrity hash, signature, verdict and renderings")
    v.add_argument("report")
    v.add_argument("--key-file", default=None, help="signing key: the report must be signed with it (default: $CONFORMANCE_SIGNING_KEY)")
    v.add_argument("--allow-stale", action="store_true", help="accept a report of another spec or harness version: check its integrity only")
    m = sub.add_parser("merge", help="merge results documents (shards) into DIR/report.json")
    m.add_argument("directory", help="output directory, e.g. reports/mybackend")
    m.add_argument("results", nargs="+", help="results/*.json files or directories holding them")
    sb = sub.add_parser("scoreboard", help="backends side by side from their report.json files")
    sb.add_argument("reports", nargs="+")
    sb.add_argument("--output", default="reports", help="directory for scoreboard.md/html (default: reports)")
    ls = sub.add_parser("list", help="list backends found through entry points, and the profiles")
    ls.add_argument("--ops", action="store_true", help="list every spec'd op with its dtypes (core: in torch's core ATen set)")
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
