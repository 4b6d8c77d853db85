"""Several report.json documents side by side: one column per backend. Pure functions.

``build`` turns reports into a scoreboard *model* (plain JSON-able dicts):

* ``backends``: the columns, with each backend's verdict;
* ``clauses``: one row per clause id, the worst category of each backend's results for it;
* ``ops``: one row per operator, "passed/total" dtypes of each backend's numerics results
  and the worst category among them;
* ``warnings``: what makes the columns less comparable than they look. Reports
  certified against different specs (different spec digests) are still shown, but
  never silently: the model records a ``spec-digest`` warning naming which backend
  was held to which spec, and both renderers print it above the table.

Each report is verified first (``conformance.report.verify``). An invalid one (a hash
or signature that does not match, a summary or verdict its results do not give) keeps
its column, marked ``invalid``, with none of its numbers: an ``invalid-report`` warning
says why. A stale one (another spec or harness) is shown, its verdict marked as not
recomputed (an ``unverified`` warning).

``render_markdown`` and ``render_html`` show a model; the HTML page follows the
rules of ``conformance.report.html`` (self-contained, no script, every string escaped):
``html_view`` turns the model into plain view data, the template ``templates/scoreboard.html.j2``
lays it out on the same base page as the report.
"""

from __future__ import annotations

import html as _html
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from tabulate import tabulate

from conformance.report import html as report_html
from conformance.report.document import read_report
from conformance.report.html import VERDICT_BADGES, VERDICT_COLOURS, chip_style, render_template, tint_style
from conformance.report.markdown import MARKS, op_dtype_matrix
from conformance.report.verify import Outcome, Status, verify
from conformance.results import Category

SCHEMA = "torch-backend-conformance/scoreboard/1"

SEVERITY = (
    Category.CRASH,
    Category.TIMEOUT,
    Category.CONTRACT_VIOLATION,
    Category.MISMATCH,
    Category.EXECUTE_FAIL,
    Category.INIT_FAIL,
    Category.PREPROCESS_FAIL,
    Category.XPASS,
    Category.HARNESS_ERROR,
    Category.ORACLE_DISAGREEMENT,
    Category.NOT_SUPPORTED,
    Category.SKIP,
    Category.XFAIL,
    Category.NOT_APPLICABLE,
    Category.PASS,
)
"""Worst first: a backend's cell for a clause shows the worst of its results there."""


def worst(categories: Iterable[str]) -> str | None:
    """The most severe category (unknown categories count as worst of all)."""
    rank = {c.value: i for i, c in enumerate(SEVERITY)}
    found = [c for c in categories if c is not None]
    if not found:
        return None
    return min(found, key=lambda c: (rank.get(c, -1), str(c)))


INVALID_STATE = "invalid"
STATE_COLOURS = {**VERDICT_COLOURS, INVALID_STATE: "#24292f"}
STATE_BADGES = {**VERDICT_BADGES, INVALID_STATE: "INVALID REPORT"}


def build(
    reports: list[Mapping[str, Any]],
    clauses: Mapping[str, Any] | None = None,
    *,
    outcomes: list[Outcome] | None = None,
) -> dict[str, Any]:
    """The scoreboard model of ``reports`` (report.json documents of any format this harness reads),
    one column each, in the order given.

    ``clauses`` (``conformance.specs.load().clauses``) adds each clause's title to its row.
    ``outcomes`` are the reports' verifications (``verify.verify``, one per report); without
    them each report is verified here against the installed spec, stale reports accepted.
    """
    if outcomes is None:
        outcomes = [verify(report, allow_stale=True) for report in reports]
    if len(outcomes) != len(reports):
        raise ValueError(f"{len(reports)} reports but {len(outcomes)} verification outcomes")
    invalid = [outcome.status is Status.INVALID for outcome in outcomes]
    reports = [_readable(report) for report in reports]
    # An invalid report's results are not shown: its rows stay empty, its column says why.
    shown = [{"results": []} if bad else report for report, bad in zip(reports, invalid)]
    backends: list[dict[str, Any]] = []
    names = Counter(str((r.get("backend") or {}).get("name", "?")) for r in reports)
    keys: set[str] = set()
    for report, outcome in zip(reports, outcomes):
        backend = report.get("backend") or {}
        verdict = report.get("verdict") or {}
        spec = report.get("spec") or {}
        summary = report.get("summary") or {}
        name, version = str(backend.get("name", "?")), str(backend.get("version", "?"))
        key = name if names[name] == 1 else f"{name} {version}"
        n = 2
        while key in keys:
            key, n = f"{name} {version} #{n}", n + 1
        keys.add(key)
        entry = {
            "key": key,
            "name": name,
            "version": version,
            "profile": verdict.get("profile") or spec.get("profile"),
            "spec_digest": spec.get("digest"),
            "harness_version": (report.get("harness") or {}).get("version"),
            "validity": outcome.status.value,
            "problems": list(outcome.problems),
            "certified": bool(verdict.get("certified")),
            "state": report_html.verdict_state(verdict),
            "verdict": verdict.get("text", ""),
            "failing_clauses": list(verdict.get("failing_clauses") or []),
            "mandatory": dict(summary.get("mandatory") or {}),
            "counts": dict(Counter(r.get("category") for r in report.get("results") or [])),
        }
        if outcome.status is Status.INVALID:
            entry.update(
                certified=False,
                state=INVALID_STATE,
                verdict=f"invalid report: {'; '.join(outcome.problems)}",
                failing_clauses=[],
                mandatory={},
                counts={},
            )
        backends.append(entry)
    model: dict[str, Any] = {
        "schema": SCHEMA,
        "backends": backends,
        "warnings": _validity_warnings(backends) + _warnings(backends, names),
        "spec_digests": _group(backends, "spec_digest"),
        "clauses": _clause_rows(shown, backends, clauses),
        "ops": _op_rows(shown, backends),
    }
    model["comparable"] = not any(w["kind"] == "spec-digest" for w in model["warnings"])
    return model


def _readable(report: Mapping[str, Any]) -> Mapping[str, Any]:
    """``read_report`` of a report, or the report without results when they cannot be read (an
    invalid report's column shows none of its numbers anyway)."""
    try:
        return read_report(report)
    except (ValueError, TypeError, KeyError, AttributeError):
        return {**report, "results": []}


def _validity_warnings(backends: list[dict[str, Any]]) -> list[dict[str, str]]:
    warnings = []
    for b in backends:
        if b["validity"] == Status.INVALID.value:
            warnings.append(
                {
                    "kind": "invalid-report",
                    "message": f"The report of {b['key']} is invalid and none of its numbers are shown: {'; '.join(b['problems'])}",
                }
            )
    unchecked = [b["key"] for b in backends if b["validity"] == Status.UNCHECKED.value]
    if unchecked:
        warnings.append(
            {
                "kind": "unverified",
                "message": f"The verdicts of {', '.join(unchecked)} were made under another spec or harness version "
                "and were not recomputed by this harness (their integrity hashes hold).",
            }
        )
    return warnings


def _group(backends: list[dict[str, Any]], field: str) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for b in backends:
        groups[str(b[field])].append(b["key"])
    return dict(groups)


SPLITS = (
    ("spec_digest", "spec-digest", "spec {value:.12}",
     "These reports were certified against {n} different specs ({held}). Their results were not held to the same clauses, "
     "ops, dtypes and tolerances: do not compare them cell by cell; re-certify against one spec."),
    ("profile", "profile", "{value}",
     "These reports were certified for different profiles ({held}): a verdict means something different in each column."),
    ("harness_version", "harness", "{value}", "These reports come from different harness versions ({held})."),
)  # fmt: skip
"""What the backends of a scoreboard may differ in, each a warning: the backends' field, the warning's
kind, how a value is named, and the message ({n} values, {held}: which backends hold each)."""


def _warnings(backends: list[dict[str, Any]], names: Counter) -> list[dict[str, str]]:
    warnings = []
    for key, kind, value_name, message in SPLITS:
        groups = _group(backends, key)
        if len(groups) > 1:
            held = "; ".join(f"{value_name.format(value=value)}: {', '.join(keys)}" for value, keys in groups.items())
            warnings.append({"kind": kind, "message": message.format(n=len(groups), held=held)})
    for name, n in sorted(names.items()):
        if n > 1:
            warnings.append(
                {"kind": "duplicate-backend", "message": f"Backend {name} appears in {n} reports; its columns are told apart by version."}
            )
    return warnings


def _clause_rows(reports, backends, clauses) -> list[dict[str, Any]]:
    per_backend: list[dict[str, Counter]] = []
    for report in reports:
        by_clause: dict[str, Counter] = defaultdict(Counter)
        for r in report.get("results") or []:
            by_clause[str(r.get("clause") or "?")][r.get("category")] += 1
        per_backend.append(by_clause)
    ids = sorted({c for by in per_backend for c in by}, key=report_html.clause_key)
    rows = []
    for clause_id in ids:
        clause = (clauses or {}).get(clause_id)
        rows.append(
            {
                "id": clause_id,
                "title": str(getattr(clause, "title", "") or ""),
                "text": str(getattr(clause, "text", "") or ""),
                "cells": _cells(backends, per_backend, clause_id, _clause_result),
            }
        )
    return rows


def _clause_result(counts: Counter) -> dict[str, Any]:
    """One backend's results of one clause: its worst category and the count of each."""
    return {
        "category": worst(counts),
        "counts": dict(sorted(counts.items(), key=lambda kv: str(kv[0]))),
        "total": sum(counts.values()),
        "failing": sum(n for c, n in counts.items() if report_html.is_failure(c)),
    }


def _op_rows(reports, backends) -> list[dict[str, Any]]:
    matrices = [op_dtype_matrix(report) for report in reports]
    ops = sorted({op for m in matrices for op in m})
    return [{"op": op, "cells": _cells(backends, matrices, op, _op_result)} for op in ops]


def _op_result(dtypes: Mapping[str, Any]) -> dict[str, Any]:
    """One backend's numerics results of one op: the category of each dtype, in dtype order."""
    ordered = dict(sorted(dtypes.items(), key=lambda kv: report_html.dtype_key(kv[0])))
    return {
        "passed": sum(c == Category.PASS.value for c in ordered.values()),
        "total": len(ordered),
        "category": worst(ordered.values()),
        "dtypes": ordered,
        "failing_dtypes": [d for d, c in ordered.items() if report_html.is_failure(c)],
    }


def _cells(backends, per_backend: list[Mapping[str, Any]], key: str, cell) -> dict[str, Any]:
    """A row's cell for each backend: ``cell`` of what its report holds under ``key``, None where it holds nothing."""
    return {backend["key"]: cell(found) if (found := by.get(key)) else None for backend, by in zip(backends, per_backend)}


# ---------------------------------------------------------------------------------------------
# Markdown


def _md(text: Any) -> str:
    """A table cell: no pipes or newlines, and no HTML (GitHub renders inline HTML)."""
    return _html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ")


def render_markdown(model: Mapping[str, Any]) -> str:
    backends = model["backends"]
    headers = [""] + [_md(b["key"]) for b in backends]
    lines = [f"# Conformance scoreboard: {len(backends)} backend(s)", ""]
    for w in model.get("warnings") or []:
        lines += [f"> ⚠️ **{_md(w['kind'])}**: {_md(w['message'])}", ""]
    verdicts = [
        ["verdict"] + [_md_verdict(b) for b in backends],
        ["version"] + [_md(b["version"]) for b in backends],
        ["profile"] + [_md(b["profile"]) for b in backends],
        ["spec"] + [f"`{_md(str(b['spec_digest'])[:12])}`" for b in backends],
        ["mandatory passed"] + [_invalid_or(b, f"{b['mandatory'].get('passed', 0)}/{b['mandatory'].get('total', 0)}") for b in backends],
        ["failing clauses"] + [_invalid_or(b, _md(", ".join(b["failing_clauses"]) or "none")) for b in backends],
    ]
    lines += ["## Verdicts", "", tabulate(verdicts, headers=headers, tablefmt="github"), ""]
    if model["clauses"]:
        rows = []
        for row in model["clauses"]:
            label = f"{row['id']} {row['title']}".strip()
            rows.append([_md(label)] + [_invalid_or(b, _md_clause_cell(row["cells"].get(b["key"]))) for b in backends])
        lines += ["## Clauses (worst result per backend)", "", tabulate(rows, headers=headers, tablefmt="github"), ""]
    if model["ops"]:
        rows = [[_md(row["op"])] + [_invalid_or(b, _md_op_cell(row["cells"].get(b["key"]))) for b in backends] for row in model["ops"]]
        lines += ["## Operators (dtypes passed / run)", "", tabulate(rows, headers=headers, tablefmt="github"), ""]
    lines += ["✅ pass · ❌ mismatch · ⛔ stage failure · ⚠️ contract violation · 💥 crash · ⏱ timeout · — not supported · ❓ inconclusive", ""]
    return "\n".join(lines)


def _md_verdict(b: Mapping[str, Any]) -> str:
    if b["state"] == INVALID_STATE:
        return "⛔ INVALID REPORT"
    text = "✅ certified" if b["certified"] else "❌ not certified"
    return f"{text} (not recomputed)" if b["validity"] == Status.UNCHECKED.value else text


def _invalid_or(b: Mapping[str, Any], text: str) -> str:
    """An invalid report's cells say so instead of showing its numbers."""
    return "⛔ invalid" if b["state"] == INVALID_STATE else text


def _md_clause_cell(cell: Mapping[str, Any] | None) -> str:
    if cell is None:
        return ""
    category = cell["category"]
    text = f"{MARKS.get(category, '')} {category}".strip()
    if cell["failing"]:
        text += f" ({cell['failing']}/{cell['total']} failing)"
    return _md(text)


def _md_op_cell(cell: Mapping[str, Any] | None) -> str:
    if cell is None:
        return ""
    text = f"{MARKS.get(cell['category'], '')} {cell['passed']}/{cell['total']}".strip()
    if cell["failing_dtypes"]:
        text += f" ({', '.join(cell['failing_dtypes'])})"
    return _md(text)


# ---------------------------------------------------------------------------------------------
# HTML


def render_html(model: Mapping[str, Any]) -> str:
    """The scoreboard as one self-contained HTML page (``templates/scoreboard.html.j2``)."""
    return render_template("scoreboard.html.j2", **html_view(model))


def html_view(model: Mapping[str, Any]) -> dict[str, Any]:
    """What the HTML scoreboard shows, as plain data: the columns, then the rows of each group
    (verdicts, clauses, ops), one cell per backend. A cell's ``kind`` is ``invalid`` (the
    report is invalid: none of its numbers), ``empty`` (not run) or ``cell``."""
    backends = model["backends"]
    meta = (
        ("profile", "profile", str),
        ("spec", "spec_digest", lambda d: str(d)[:12]),
        ("mandatory passed", "mandatory", lambda m: f"{m.get('passed', 0)}/{m.get('total', 0)}"),
    )
    return {
        "title": f"Conformance scoreboard: {', '.join(b['key'] for b in backends)}",
        "backends": [{"key": b["key"], "name": b["name"], "version": b["version"]} for b in backends],
        "warnings": [{"kind": w["kind"], "message": w["message"]} for w in model.get("warnings") or []],
        "comparable": str(bool(model.get("comparable", True))).lower(),
        "verdicts": [
            {
                "key": b["key"],
                "certified": str(b["certified"]).lower(),
                "validity": b["validity"],
                "verdict": b["verdict"],
                "colour": STATE_COLOURS[b["state"]],
                "badge": STATE_BADGES[b["state"]],
                "recomputed": b["validity"] != Status.UNCHECKED.value,
            }
            for b in backends
        ],
        "meta": [
            {
                "field": field,
                "label": label,
                "cells": [
                    {"kind": "invalid", "key": b["key"]}
                    if b["state"] == INVALID_STATE and field == "mandatory"
                    else {"kind": "cell", "key": b["key"], "title": b[field], "text": fmt(b[field])}
                    for b in backends
                ],
            }
            for label, field, fmt in meta
        ],
        "clauses": [
            {
                "id": row["id"],
                "title": row["title"],
                "hover": _join(row["title"], row["text"]),
                "cells": [_clause_cell(b, row["cells"].get(b["key"])) for b in backends],
            }
            for row in model["clauses"]
        ],
        "ops": [{"op": row["op"], "cells": [_op_cell(b, row["cells"].get(b["key"])) for b in backends]} for row in model["ops"]],
    }


def _cell_style(category: str) -> str:
    """Failures and the like in their full colour; passes on a pale wash, so the failures stand out."""
    return tint_style(category) if category == Category.PASS.value else chip_style(category)


def _join(title: str, text: str) -> str:
    return f"{title}: {text}" if title and text else title or text


def _cell(backend: Mapping[str, Any], cell: Mapping[str, Any] | None, hover: str, **counts: Any) -> dict[str, Any]:
    """One backend's cell of a clause or op row: invalid report, no result, or the category with its counts."""
    if backend["state"] == INVALID_STATE:
        return {"kind": "invalid", "key": backend["key"]}
    if cell is None:
        return {"kind": "empty", "key": backend["key"]}
    category = cell["category"]
    return {"kind": "cell", "key": backend["key"], "category": category, "style": _cell_style(category), "hover": hover, **counts}


def _clause_cell(backend: Mapping[str, Any], cell: Mapping[str, Any] | None) -> dict[str, Any]:
    hover = ", ".join(f"{c}: {n}" for c, n in cell["counts"].items()) if cell else ""
    return _cell(backend, cell, hover, failing=cell and cell["failing"], total=cell and cell["total"])


def _op_cell(backend: Mapping[str, Any], cell: Mapping[str, Any] | None) -> dict[str, Any]:
    """The hover names the dtypes that did not pass (the cell's "passed/total" says the rest)."""
    hover = ", ".join(f"{d}: {c}" for d, c in cell["dtypes"].items() if c != Category.PASS.value) if cell else ""
    return _cell(backend, cell, hover, passed=cell and cell["passed"], total=cell and cell["total"])
