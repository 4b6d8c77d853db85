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
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from conformance.report.model import ReportError
from conformance.results import Category

EXIT_OK, EXIT_NOT_CERTIFIED, EXIT_USAGE, EXIT_INVALID, EXIT_STALE = 0, 1, 2, 3, 4
DEFAULT_TIMEOUT = 120


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


def certify(ns: argparse.Namespace, extra: list[str]) -> int:
    from conformance import specs as spec_module
    from conformance.plugin import safe_name

    backend = _backend_or_exit(ns.backend)  # fail fast (exit 2) on a name that cannot be built
    extra, selection = _split_selection(extra)
    specs = spec_module.load()
    try:
        profile = specs.profile(ns.profile or backend.profile)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None
    out = Path(ns.output)
    shard = _shard_tag(ns.shard)
    results_dir = out / safe_name(ns.backend) / "results"
    if results_dir.exists() and not shard:
        for stale in results_dir.glob("*.json"):
            stale.unlink()
    baseline = _load_json(ns.baseline, "baseline") if ns.baseline else None
    # A certify run started from inside a pytest-xdist worker (a CI test) must not inherit its
    # identity: pytest-benchmark disables itself wherever PYTEST_XDIST_WORKER is set.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["HYPOTHESIS_PROFILE"] = ns.hypothesis_profile
    common = [
        "--pyargs",
        "conformance.checks",
        "--backend",
        ns.backend,
        "--profile",
        profile.name,
        "--conformance-out",
        str(out),
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
    workers = ["-n", str(ns.workers)] if ns.workers != "0" else ["-p", "no:xdist"]
    status = _pytest(
        common
        + workers
        + ["--conformance-tag", f"checks{shard}", "--timeout", str(ns.timeout), "-o", "timeout_func_only=true", "-k", _and("not test_PERF", selection)]
        + ["--benchmark-disable"]
        + extra,
        env,
    )
    if status not in (0, 1):
        print(f"conformance: the check session ended with pytest exit code {status}", file=sys.stderr)
    if any(c.startswith("PERF-") for c in profile.clauses) and not ns.skip_perf:
        print("conformance: timing preprocess, init and execute (pytest-benchmark, no workers) ...", flush=True)
        _pytest(
            common
            + ["-p", "no:xdist", "--conformance-tag", f"perf{shard}", "--timeout", str(ns.timeout), "-o", "timeout_func_only=true", "-k", _and("test_PERF", selection)]
            + ["--benchmark-min-rounds", "15", "--benchmark-max-time", "0.5", "--benchmark-disable-gc", "-q"]
            + extra,
            env,
            quiet=True,
        )
    report_dir = out / safe_name(ns.backend)
    if shard:
        parts = sorted(results_dir.glob(f"*{shard}.json"))
        failing = sum(Category(r["category"]).is_failure for p in parts for r in json.loads(p.read_text())["results"])
        print(f"shard {ns.shard}: results in {', '.join(map(str, parts))}; {failing} failing. "
              f"Merge every shard's results with: python -m conformance merge {report_dir} <results files or dirs>")
        return EXIT_NOT_CERTIFIED if failing else EXIT_OK
    try:
        report = build_and_write(report_dir, specs)
    except FileNotFoundError as exc:
        print(f"conformance: no results were written ({exc}); see the pytest output above", file=sys.stderr)
        return EXIT_NOT_CERTIFIED
    except ReportError as exc:
        print(f"conformance: cannot build the report: {exc}", file=sys.stderr)
        return EXIT_NOT_CERTIFIED
    _print_summary(report, report_dir, time.perf_counter() - started)
    if baseline is not None:
        return _gate(baseline, report, ns)
    return EXIT_OK if report["verdict"]["certified"] else EXIT_NOT_CERTIFIED


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


def _gate(baseline: dict, report: dict, ns) -> int:
    from conformance.report.diff import WaiverError, diff, load_waivers, render

    try:
        waivers = load_waivers(ns.waivers) if ns.waivers else []
    except WaiverError as exc:
        raise UsageError(str(exc)) from None
    result = diff(baseline, report, threshold=ns.threshold, waivers=waivers)
    print(render(result, ns.threshold))
    return EXIT_NOT_CERTIFIED if result.failed else EXIT_OK


def build_and_write(report_dir: Path, specs) -> dict:
    """Merge results/*.json under ``report_dir`` into report.json and its renderings."""
    from conformance.plugin import write_json_atomic
    from conformance.report import build_report, html, junit
    from conformance.report.markdown import render
    from conformance.report.model import validate

    parts = sorted((report_dir / "results").glob("*.json"))
    if not parts:
        raise FileNotFoundError(report_dir / "results")
    report = build_report([json.loads(p.read_text()) for p in parts], specs)
    problems = validate(report)
    if problems:  # the harness's own bug: say so instead of publishing a malformed certificate
        raise ReportError("report.json does not match its schema: " + "; ".join(problems[:5]))
    write_json_atomic(report_dir / "report.json", report)
    (report_dir / "report.md").write_text(render(report, specs.clauses))
    (report_dir / "junit.xml").write_text(junit.render(report))
    (report_dir / "report.html").write_text(html.render(report, specs.clauses))
    return report


def _print_summary(report: dict, report_dir: Path, seconds: float) -> None:
    from tabulate import tabulate

    verdict = report["verdict"]
    print()
    print(f"{'CERTIFIED' if verdict['certified'] else 'NOT CERTIFIED'}: {report['backend']['name']}: {verdict['text']}")
    print(tabulate(sorted(report["summary"]["counts"].items()), headers=["category", "count"], tablefmt="simple"))
    if verdict["failing_clauses"]:
        print("failing clauses:", ", ".join(verdict["failing_clauses"]))
    slow = sorted(report["results"], key=lambda r: -r.get("duration_s", 0))[:5]
    print("slowest checks:", ", ".join(f"{r['id']} {r.get('duration_s', 0):.1f}s" for r in slow))
    print(f"reports: {report_dir / 'report.json'}, report.md, report.html, junit.xml  ({seconds:.0f} s)")


def report_command(ns: argparse.Namespace) -> int:
    from conformance import specs as spec_module

    report = build_and_write(Path(ns.directory), spec_module.load())
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
    name = ns.backend or directory.parent.parent.name
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
    old, new = _load_json(ns.old, "report"), _load_json(ns.new, "report")
    return _gate(old, new, ns)


def verify_command(ns: argparse.Namespace) -> int:
    """Schema, integrity hash, and (when the spec matches) the verdict recomputed from the results."""
    from conformance import specs as spec_module
    from conformance.report.model import integrity_hash, validate, verdict

    report = _load_json(ns.report, "report")
    problems = validate(report)
    stored = (report.get("integrity") or {}).get("sha256")
    if not problems and integrity_hash(report) != stored:
        problems.append("integrity hash mismatch: results, spec, backend, environment or verdict were changed after the run")
    specs = spec_module.load()
    if not problems and specs.digest == report["spec"]["digest"]:
        recomputed = verdict(report["results"], specs.profile(report["spec"]["profile"]), specs)
        if recomputed != report["verdict"]:
            problems.append("the verdict does not follow from the results under this spec")
    elif not problems:
        print(f"note: report spec {report['spec']['digest'][:12]} differs from this harness's {specs.digest[:12]}; verdict not recomputed")
    if problems:
        for p in problems:
            print(f"INVALID: {p}")
        return EXIT_NOT_CERTIFIED
    print(f"VALID: {report['backend']['name']} {report['backend']['version']}: {report['verdict']['text']} (sha256 {stored[:16]})")
    return EXIT_OK


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

    reports = [_load_json(path, "report") for path in ns.reports]
    model = scoreboard.build(reports, spec_module.load().clauses)
    out = Path(ns.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scoreboard.md").write_text(scoreboard.render_markdown(model))
    (out / "scoreboard.html").write_text(scoreboard.render_html(model))
    for warning in model.get("warnings", []):
        print(f"WARNING: {warning['message'] if isinstance(warning, dict) else warning}")
    print(f"scoreboard of {len(reports)} backend(s): {out / 'scoreboard.md'}, {out / 'scoreboard.html'}")
    return EXIT_OK


def list_command(ns: argparse.Namespace) -> int:
    from conformance.discovery import available, entry_points

    for name in available():
        print(f"{name:32s} {entry_points()[name].value}")
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m conformance", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("certify", help="certify a backend and write reports/NAME/report.{json,md}")
    c.add_argument("backend", help="entry-point name (see `list`) or module:attr")
    c.add_argument("--profile", default=None, help="certification profile (default: the backend's own, usually full)")
    c.add_argument("--output", default="reports", help="directory for reports (default: reports)")
    c.add_argument("--hypothesis-profile", default=os.environ.get("HYPOTHESIS_PROFILE", "ci"), choices=["ci", "dev", "thorough"])
    c.add_argument("--workers", default="auto", help="pytest-xdist workers (default auto; 0 runs in-process, no crash isolation)")
    c.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per check before TIMEOUT")
    c.add_argument("--skip-perf", action="store_true", help="skip the performance session")
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
    v = sub.add_parser("verify", help="check a report's schema, integrity hash and verdict")
    v.add_argument("report")
    m = sub.add_parser("merge", help="merge results documents (shards) into DIR/report.json")
    m.add_argument("directory", help="output directory, e.g. reports/mybackend")
    m.add_argument("results", nargs="+", help="results/*.json files or directories holding them")
    sb = sub.add_parser("scoreboard", help="backends side by side from their report.json files")
    sb.add_argument("reports", nargs="+")
    sb.add_argument("--output", default="reports", help="directory for scoreboard.md/html (default: reports)")
    sub.add_parser("list", help="list backends found through entry points")
    return p


def _gate_options(p: argparse.ArgumentParser) -> None:
    from conformance.report.diff import DEFAULT_THRESHOLD

    p.add_argument("--waivers", default=None, help="TOML file of waivers ([[waiver]] id, reason, tracking, expires)")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help="performance regression ratio (default 1.25)")


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
