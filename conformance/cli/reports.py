"""Reports written: ``report`` (built from results documents, or re-rendered), ``merge`` (shards
into one report) and ``scoreboard`` (backends side by side)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from conformance.cli.exits import EXIT_INVALID, EXIT_NOT_CERTIFIED, EXIT_OK, UsageError
from conformance.cli.inputs import load_json, private_key
from conformance.report.model import ReportError


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


def report_command(ns: argparse.Namespace) -> int:
    """Each DIR's report.json and renderings built from DIR/results/*.json, or with --rerender from its report.json."""
    from conformance import specs as spec_module

    status = EXIT_OK
    key = private_key(ns.sign)
    for directory in ns.directory:
        try:
            if ns.rerender:
                report, notes = rerender(Path(directory), spec_module.load(), key)
                print(
                    f"{directory}: re-rendered" + (f" ({'; '.join(notes)})" if notes else "") + f": {report['verdict']['text']}"
                )
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
    key = private_key(ns.sign)
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
    reports = [load_json(path, "report") for path in ns.reports]
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
