"""The report's page: its view, section by section, rendered through ``report.html.j2``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from conformance.report.document import read_report
from conformance.report.html import matrix, performance, sections
from conformance.report.html.style import chip_style, verdict_state
from conformance.report.html.templating import INTEGRITY, render_template
from conformance.report.markdown import MODEL_COLUMNS, QUANTIZED_COLUMNS, model_table, quantized_table
from conformance.results import Category


def render(report: Mapping[str, Any], clauses: Mapping[str, Any] | None = None) -> str:
    """One self-contained HTML page showing ``report`` (a report.json document)."""
    return render_template("report.html.j2", **view(report, clauses))


def view(report: Mapping[str, Any], clauses: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the page shows, section by section, as plain data (``report.html.j2`` lays it out)."""
    report = read_report(report)
    backend = report.get("backend") or {}
    verdict = report.get("verdict") or {}
    state = verdict_state(verdict)
    title = f"{'CERTIFIED' if state == 'certified' else 'NOT CERTIFIED'}: {backend.get('name', '?')} {backend.get('version', '')}"
    failures = sections.failures_first(report)
    models = model_table(report)
    quantized = quantized_table(report)
    refusals = matrix.refusals(report)
    return {
        "title": title.strip(),
        "integrity": str((report.get("integrity") or {}).get("sha256", "")),
        "verdict": sections.verdict(report, state),
        "toc": sections.toc(
            has_failures=failures is not None,
            has_models=bool(models),
            has_quantized=bool(quantized),
            has_out_of_scope=bool((report.get("spec") or {}).get("out_of_scope")),
            has_refusals=bool(refusals),
        ),
        "failures": failures,
        "counts": sections.counts(report),
        "failing_clauses": sections.failing_clauses(report, clauses),
        "models": {"columns": MODEL_COLUMNS, "rows": models},
        "quantized": {"columns": QUANTIZED_COLUMNS, "rows": quantized},
        "matrix": matrix.table(report, refusals),
        "refusals": refusals,
        "category_styles": [(c.value, chip_style(c.value)) for c in Category],
        "out_of_scope": sorted(((report.get("spec") or {}).get("out_of_scope") or {}).items()),
        "clauses": sections.clause_table(report, clauses),
        "performance": performance.section(report),
        "environment": sections.environment(report),
        "replays": sections.replays(report),
    }


def embedded_hash(markup: str) -> str | None:
    """The integrity sha256 the page's <head> names (None without one)."""
    head = markup.split("</head>", 1)[0]  # the body holds backend text; only the head is ours
    found = INTEGRITY.findall(head)
    return found[0] if len(found) == 1 else None
