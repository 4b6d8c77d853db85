"""report.json: the file, the formats it had, and the report they hold.

report.json (``REPORT_SCHEMA``) is written compact, keys sorted, ASCII, its ``results`` as tables
(``conformance.results.tabulate_results``: each field of the records named once, a field with one
value across a table stored once, a text many results share stored once). ``read_report`` gives the
report with its results as a list of records, the form ``build_report`` makes and every renderer,
``verify``, ``diff`` and the scoreboard take, for this format and for the previous ones
(``PREVIOUS_REPORT_SCHEMAS``); ``decoded`` gives it in its own format, the form its integrity hash
and signature cover (``conformance.report.model.canonical_bytes``); ``records`` gives its results as
``CaseResult`` records.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conformance.results import CaseResult, listed_results, tabulate_results, untabulate_results
from conformance.run.transport import jsonable

REPORT_SCHEMA = "torch-backend-conformance/report/2"
PREVIOUS_REPORT_SCHEMAS = ("torch-backend-conformance/report/1",)
"""Formats of report.json this harness still reads: ``read_report`` brings them to ``REPORT_SCHEMA``
(report/1: results as a list of records, ``stats.layouts`` a list with one name per run); ``verify``
checks each against its own schema (report-1.schema.json) and its own integrity hash."""


class ReportError(ValueError):
    """A report that cannot be built or written: results documents that cannot be merged (different
    backend, spec or profile), or results that would not read back from report.json."""


def layouts_as_counts(stats: dict[str, Any]) -> None:
    """``stats.layouts`` as runs per layout: a NUM check lists one name per run with non-contiguous
    inputs (conformance/checks/test_numerics.py), which a report of thousands of checks repeats."""
    layouts = stats.get("layouts")
    if isinstance(layouts, list):
        stats["layouts"] = dict(sorted(Counter(str(name) for name in layouts).items()))


SCHEMA_FILES = {REPORT_SCHEMA: "report.schema.json", PREVIOUS_REPORT_SCHEMAS[0]: "report-1.schema.json"}


def schema(version: str = REPORT_SCHEMA) -> dict[str, Any]:
    """The JSON Schema of report.json (of ``version``, one of the formats this harness reads), shipped in the package."""
    import importlib.resources

    return json.loads(importlib.resources.files("conformance.report").joinpath(SCHEMA_FILES[version]).read_text())


def validate(report: Mapping[str, Any]) -> list[str]:
    """Schema violations of ``report`` (empty when valid), against the schema of its own format; the
    records of a report whose results are tables are checked one by one (``$defs.result``)."""
    from jsonschema import Draft202012Validator

    version = report.get("schema")
    if version not in SCHEMA_FILES:
        known = ", ".join(sorted(SCHEMA_FILES))
        return [f"schema: {version!r} is not a report format this harness reads ({known})"]
    shipped = schema(version)
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in Draft202012Validator(shipped).iter_errors(report)]
    if problems or not isinstance(report.get("results"), Mapping):
        return problems
    try:
        results = untabulate_results(report["results"])
    except ValueError as exc:
        return [str(exc)]
    record = Draft202012Validator({"$defs": shipped["$defs"], "$ref": "#/$defs/result"})
    for r in results:
        problems += [f"results/{r.get('id')}/{'/'.join(map(str, e.absolute_path)) or '<record>'}: {e.message}" for e in record.iter_errors(r)]
    return problems


def decoded(report: Mapping[str, Any]) -> dict[str, Any]:
    """``report`` with its results as a list of records, in its own format (no upgrade): what its
    integrity hash and signature cover. ValueError for tables that do not decode."""
    if isinstance(report.get("results"), Mapping):
        return {**report, "results": untabulate_results(report["results"])}
    return dict(report)


def read_report(document: Mapping[str, Any]) -> dict[str, Any]:
    """The report a report.json document holds, in this harness's format: its results a list of
    records. A report of a previous format (``PREVIOUS_REPORT_SCHEMAS``) is brought to this one
    (its records' ``stats.layouts`` as counts); nothing else changes, its verdict is not recomputed.
    A report already in this form is returned as it is: every renderer may call this on what it is given."""
    if document.get("schema") == REPORT_SCHEMA and not isinstance(document.get("results"), Mapping):
        return document  # type: ignore[return-value]
    report = decoded(document)
    if report.get("schema") in PREVIOUS_REPORT_SCHEMAS:
        report["results"] = [dict(r, stats=dict(r["stats"])) if isinstance(r.get("stats"), Mapping) else dict(r) for r in report["results"]]
        for r in report["results"]:
            layouts_as_counts(r.get("stats") or {})
        report["schema"] = REPORT_SCHEMA
    return report


def records(results: Any) -> list[CaseResult]:
    """The records of report.json's ``results`` in either form (a list, or tables), or records already."""
    return [r if isinstance(r, CaseResult) else CaseResult.from_json(r) for r in listed_results(results)]


def load_report(path: str | Path) -> dict[str, Any]:
    """``read_report`` of the report.json at ``path`` (OSError, ValueError for a file that is not one)."""
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise ValueError(f"{path}: not a report: a JSON {type(document).__name__}, not an object")
    return read_report(document)


def report_text(report: Mapping[str, Any]) -> str:
    """report.json's text: compact, keys sorted, ASCII, its results as tables (``tabulate_results``).
    ReportError if the tables would not read back as the report's records (the file is the record)."""
    body = jsonable(dict(report), None)
    records_ = listed_results(body["results"])
    tables = tabulate_results(records_)
    if untabulate_results(json.loads(json.dumps(tables))) != records_:
        raise ReportError("the report's results do not read back from their tables: they must be in id order, each id once")
    body["results"] = tables
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=True) + "\n"
