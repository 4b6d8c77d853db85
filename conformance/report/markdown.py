"""report.json -> Markdown: verdict first, fit for a pull-request comment. A pure function."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from tabulate import tabulate

from conformance.results import Category

MARKS = {
    Category.PASS.value: "✅",
    Category.NOT_SUPPORTED.value: "—",
    Category.NOT_APPLICABLE.value: "n/a",
    Category.MISMATCH.value: "❌",
    Category.PREPROCESS_FAIL.value: "⛔",
    Category.INIT_FAIL.value: "⛔",
    Category.EXECUTE_FAIL.value: "⛔",
    Category.CONTRACT_VIOLATION.value: "⚠️",
    Category.CRASH.value: "💥",
    Category.TIMEOUT.value: "⏱",
    Category.ORACLE_DISAGREEMENT.value: "❓",
    Category.HARNESS_ERROR.value: "❓",
}
PERF_COLUMNS = ("preprocess", "init", "execute")


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(report: Mapping[str, Any], clauses: Mapping[str, Any] | None = None, *, max_failures: int = 50) -> str:
    backend = report["backend"]
    verdict = report["verdict"]
    summary = report["summary"]
    icon = "✅" if verdict["certified"] else "❌"
    lines = [
        f"# {icon} {_cell(backend['name'])}: {verdict['text']}",
        "",
        f"Backend version `{_cell(backend['version'])}` · harness {report['harness']['version']} · "
        f"spec `{report['spec']['digest'][:12]}` · profile `{verdict['profile']}` · "
        f"hypothesis profile `{report['run']['hypothesis_profile']}`",
        "",
    ]
    counts = summary["counts"]
    lines += [
        "## Results",
        "",
        tabulate(
            [(c, counts[c]) for c in sorted(counts, key=lambda c: list(Category.__members__).index(c))],
            headers=["category", "count"],
            tablefmt="github",
        ),
        "",
        f"Mandatory checks passed: **{summary['mandatory']['passed']} / {summary['mandatory']['total']}**. "
        f"Numerics: {summary['numerics']['passed']} / {summary['numerics']['total']} op x dtype pass "
        f"({summary['numerics']['not_supported']} not supported) over {summary['numerics']['ops']} ops and "
        f"{summary['numerics']['dtypes']} dtypes.",
        "",
    ]
    if verdict["failing_clauses"] or verdict["inconclusive"] or verdict["not_run"]:
        lines += ["## Failing clauses", ""]
        rows = []
        for clause in verdict["failing_clauses"]:
            meaning = clauses[clause].text if clauses and clause in clauses else ""
            rows.append((clause, _cell(meaning)))
        if rows:
            lines += [tabulate(rows, headers=["clause", "what must hold"], tablefmt="github"), ""]
        if verdict["inconclusive"]:
            lines += [f"Inconclusive (harness or reference at fault): {', '.join(verdict['inconclusive'][:20])}", ""]
        if verdict["not_run"]:
            lines += [f"Mandatory but not run: {', '.join(verdict['not_run'][:20])}", ""]
    failures = [r for r in report["results"] if Category(r["category"]).is_failure]
    if failures:
        lines += ["## Failures", ""]
        rows = [
            (_cell(r["id"]), r["category"], _cell(r.get("message", ""))[:300], f"`{_cell(r['replay'])}`" if r.get("replay") else "")
            for r in failures[:max_failures]
        ]
        lines += [tabulate(rows, headers=["check", "category", "message", "replay"], tablefmt="github"), ""]
        if len(failures) > max_failures:
            lines += [f"... and {len(failures) - max_failures} more in report.json.", ""]
    matrix = op_dtype_matrix(report)
    if matrix:
        dtypes = sorted({d for row in matrix.values() for d in row})
        rows = [[op] + [MARKS.get(matrix[op].get(d, ""), matrix[op].get(d, "")) for d in dtypes] for op in sorted(matrix)]
        lines += ["## Operators x dtypes", "", tabulate(rows, headers=["op"] + dtypes, tablefmt="github"), ""]
        lines += ["✅ pass · ❌ mismatch · ⛔ stage failure · ⚠️ contract violation · 💥 crash · ⏱ timeout · — not supported · ❓ inconclusive", ""]
    perf = performance_table(report)
    if perf:
        lines += ["## Performance (median, backend / reference and backend / eager)", ""]
        lines += [
            tabulate(
                perf,
                headers=["program", "stage", "backend ms", "reference ms", "eager ms", "vs reference", "vs eager"],
                tablefmt="github",
                floatfmt=".3f",
            ),
            "",
        ]
    env = report["environment"]
    lines += [
        "## Environment",
        "",
        f"Python {env['python']}, torch {env['torch']}, numpy {env['numpy']}, ml_dtypes {env['ml_dtypes']}, "
        f"{_cell(env['cpu'])} x{env['cpu_count']}, {env['os']}.",
        "",
    ]
    return "\n".join(lines)


def op_dtype_matrix(report: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """op -> dtype -> category of its numerics result."""
    matrix: dict[str, dict[str, str]] = defaultdict(dict)
    for r in report["results"]:
        if (r.get("clause") or "").startswith("NUM-") and r.get("op") and r.get("dtype"):
            matrix[r["op"]][r["dtype"]] = r["category"]
    return dict(matrix)


def performance_table(report: Mapping[str, Any]) -> list[tuple]:
    """Rows of (program, stage, backend, reference, eager, ratios) from PERF results."""
    medians: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for r in report["results"]:
        if (r.get("clause") or "").startswith("PERF-") and r["category"] == Category.PASS.value:
            median = (r.get("timings") or {}).get("median_ms")
            if median is not None:
                medians[(r["program"], r["stage"])][r["runner"]] = median
    rows = []
    for (program, stage), by in sorted(medians.items()):
        b, ref, eag = by.get("backend"), by.get("reference"), by.get("eager")
        rows.append(
            (
                program,
                stage,
                b,
                ref,
                eag,
                (b / ref) if b and ref else None,
                (b / eag) if b and eag else None,
            )
        )
    return rows
