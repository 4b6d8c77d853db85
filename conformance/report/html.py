"""report.json -> one self-contained HTML page. A pure function.

The page needs nothing but itself: inline CSS, inline SVG, no script, no font,
image or style sheet from anywhere (a Content-Security-Policy says so to the
browser too). Details open on click through ``<details>``/``<summary>`` and
show on hover through ``title=``, so the page works with JavaScript disabled.

The markup is in Jinja2 templates (``templates/``: ``base.html.j2`` holds the
document, its head and the CSS every page shares; ``report.html.j2`` this page).
Python only prepares the *view*: plain dicts and lists of strings and numbers
read from the report (:func:`view`). The templates are rendered with autoescape,
and every value printed passes :func:`conformance.report.safe.plain` first
(:func:`environment`), so every string that came from a backend or a report
(names, versions, messages, ids, ops, environment) is shown as text: a backend
whose error message is ``<script>...`` shows that text, it does not run it.

The op x dtype matrix says a cell's category by its glyph and colour (a rule of the page's CSS
per category, not a style per cell); only the results a reader acts on (failures, inconclusive
results) carry their message on the cell. A check the backend refused on every draw
(NOT_SUPPORTED) links to its refusal in ``#refusals``, where each refusal is shown once with
the ops and dtypes it covers (``markdown.refusal_groups``).

Stable hooks for tests and scripts: ``#verdict[data-certified][data-state]``,
``#counts .count[data-category][data-count]``, ``#failing-clauses tr[data-clause]``,
``#op-dtype-matrix tr[data-op] td[data-dtype][data-category]``,
``#refusal-table tr[data-refusal][data-checks] li[data-op] .dtypes``, ``#unsupported li`` (one
per op, its dtypes in parentheses), ``#clause-table tr[data-id][data-clause][data-category]``,
``#perf-chart rect.bar[data-program][data-stage][data-series][data-ratio]``,
``#environment [data-key]`` and ``#replay li[data-id]``. The page names the report.json
it shows in ``<meta name="conformance-report-sha256">`` (``verify`` compares them).
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import jinja2
from markupsafe import Markup

from conformance.api.scalar_type import DTYPE_ORDER
from conformance.report import safe
from conformance.report.document import read_report
from conformance.report.markdown import (
    MODEL_COLUMNS,
    QUANTIZED_COLUMNS,
    REFUSAL_NOTE,
    model_table,
    op_dtype_matrix,
    performance_devices,
    performance_gaps,
    performance_table,
    quantized_table,
    refusal,
    refusal_groups,
    refused_entirely,
)
from conformance.results import COLOURS, FAILURES, INCONCLUSIVE, Category, FailureSummary
from conformance.specs import FAMILIES

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
"""No script, no network: only the inline styles and inline SVG of the page itself."""

INTEGRITY_META = "conformance-report-sha256"
_INTEGRITY = re.compile(rf'<meta name="{INTEGRITY_META}" content="([0-9a-f]{{64}})">')

UNKNOWN_COLOUR = "#757575"
"""A category this harness does not know (a report from a newer harness)."""

GLYPHS = {
    Category.PASS: "✓",
    Category.NOT_SUPPORTED: "–",
    Category.NOT_APPLICABLE: "·",
    Category.PREPROCESS_FAIL: "P",
    Category.INIT_FAIL: "I",
    Category.EXECUTE_FAIL: "E",
    Category.MISMATCH: "✕",
    Category.CONTRACT_VIOLATION: "C",
    Category.CRASH: "☠",
    Category.TIMEOUT: "T",
    Category.ORACLE_DISAGREEMENT: "?",
    Category.HARNESS_ERROR: "H",
    Category.SKIP: "s",
    Category.XFAIL: "x",
    Category.XPASS: "!",
}
"""One character per category, so the matrix reads without colour too."""

SERIES = (("reference", "backend / reference", "#1565c0"), ("eager", "backend / eager", "#00897b"))
"""Performance ratios drawn, their legend and colour."""

TITLE_LIMIT = 400
"""Characters of a message shown on hover; the click shows all of it."""


# ---------------------------------------------------------------------------------------------
# Templates


def _text(value: Any) -> Any:
    """What every ``{{ value }}`` prints, before autoescape: printable text, capped (``safe.plain``);
    markup a template made itself (a macro's ``caller()``) passes as it is."""
    return value if isinstance(value, Markup) else safe.plain(value)


@functools.cache
def environment() -> jinja2.Environment:
    """The templates of every HTML rendering, loaded once per process."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("conformance.report", "templates"),
        autoescape=True,  # every template here is HTML
        undefined=jinja2.StrictUndefined,
        finalize=_text,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(chip_style=chip_style, tint_style=tint_style, colour=colour_of, glyph=glyph_of, label=label_of)
    env.globals.update(CSP=CSP, INTEGRITY_META=INTEGRITY_META)
    return env


def render_template(name: str, **view: Any) -> str:
    return environment().get_template(name).render(**view)


# ---------------------------------------------------------------------------------------------
# Small helpers shared with the scoreboard


def category_of(value: Any) -> Category | None:
    try:
        return Category(value)
    except ValueError:
        return None


def colour_of(value: Any) -> str:
    category = category_of(value)
    return COLOURS[category] if category is not None else UNKNOWN_COLOUR


def glyph_of(value: Any) -> str:
    category = category_of(value)
    return GLYPHS.get(category, "?") if category is not None else "?"


def label_of(value: Any) -> str:
    category = category_of(value)
    return category.label if category is not None else str(value)


def ink_on(background: str) -> str:
    """Black or white, whichever reads better on ``background`` (#rrggbb)."""
    r, g, b = (int(background[i : i + 2], 16) / 255 for i in (1, 3, 5))
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    luminance = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    return "#000" if luminance > 0.35 else "#fff"


def chip_style(category: Any) -> str:
    colour = colour_of(category)
    return f"background:{colour};color:{ink_on(colour)}"


def tint_style(category: Any, strength: float = 0.16) -> str:
    """The category's colour as text on a pale wash of itself: for cells that should not shout (PASS)."""
    colour = colour_of(category)
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    wash = "#" + "".join(f"{round(255 - (255 - c) * strength):02x}" for c in (r, g, b))
    return f"background:{wash};color:{colour}"


def category_rank(value: Any) -> int:
    """Order of Category's declaration; unknown categories last."""
    names = list(Category.__members__)
    return names.index(value) if value in names else len(names)


def dtype_key(dtype: str) -> tuple[int, str]:
    return (DTYPE_ORDER.index(dtype), dtype) if dtype in DTYPE_ORDER else (len(DTYPE_ORDER), dtype)


def clause_key(clause: Any) -> tuple:
    """Clauses in the spec's order of families (PRE, RT, ... LAZY), then by number; unknown families last."""
    family, _, number = str(clause or "").partition("-")
    return (FAMILIES.index(family) if family in FAMILIES else len(FAMILIES), family, int(number) if number.isdigit() else 0, number)


def shorten(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_failure(value: Any) -> bool:
    category = category_of(value)
    return category is not None and category in FAILURES


# ---------------------------------------------------------------------------------------------
# The page


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
    failures = _failures_first(report)
    models = model_table(report)
    quantized = quantized_table(report)
    refusals = _refusals(report)
    return {
        "title": title.strip(),
        "integrity": str((report.get("integrity") or {}).get("sha256", "")),
        "verdict": _verdict(report, state),
        "toc": _toc(has_failures=failures is not None, has_models=bool(models), has_quantized=bool(quantized),
                    has_out_of_scope=bool((report.get("spec") or {}).get("out_of_scope")), has_refusals=bool(refusals)),
        "failures": failures,
        "counts": _counts(report),
        "failing_clauses": _failing_clauses(report, clauses),
        "models": {"columns": MODEL_COLUMNS, "rows": models},
        "quantized": {"columns": QUANTIZED_COLUMNS, "rows": quantized},
        "matrix": _matrix(report, refusals),
        "refusals": refusals,
        "category_styles": [(c.value, chip_style(c.value)) for c in Category],
        "out_of_scope": sorted(((report.get("spec") or {}).get("out_of_scope") or {}).items()),
        "clauses": _clause_table(report, clauses),
        "performance": _performance(report),
        "environment": _environment(report),
        "replays": _replays(report),
    }


def embedded_hash(markup: str) -> str | None:
    """The integrity sha256 the page's <head> names (None without one)."""
    head = markup.split("</head>", 1)[0]  # the body holds backend text; only the head is ours
    found = _INTEGRITY.findall(head)
    return found[0] if len(found) == 1 else None


VERDICT_COLOURS = {"certified": COLOURS[Category.PASS], "failed": "#c62828", "incomplete": "#9a6700"}
VERDICT_BADGES = {"certified": "CERTIFIED", "failed": "NOT CERTIFIED", "incomplete": "NOT CERTIFIED (incomplete)"}


def verdict_state(verdict: Mapping[str, Any]) -> str:
    """certified; failed (a failing check, or a mandatory op x dtype not supported); or incomplete
    (inconclusive or not run, nothing failing)."""
    if verdict.get("certified"):
        return "certified"
    return "failed" if verdict.get("failing_clauses") or verdict.get("unsupported") else "incomplete"


MAX_FAILURES_FIRST = 25


def _artifact_link(replay: str) -> str:
    """The replay directory of a failure relative to report.html (replays/<name>/ beside it), or ""."""
    path = str(replay).split(" ")[-1]
    _, sep, tail = path.rpartition("/replays/")
    tail = tail.strip("/")
    return f"replays/{tail}/" if sep and re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]*", tail) and ".." not in tail else ""


def _failures_first(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """The failures, before anything else: check, category, message, the inputs it failed on, the
    command that replays it and the saved arrays and call. None without a failure."""
    verdict = report.get("verdict") or {}
    failing = set(verdict.get("failing") or ())
    rows = [r for r in report.get("results") or [] if r.get("id") in failing or (is_failure(r.get("category")) and not failing)]
    if not rows:
        return None
    shown = []
    for r in rows[:MAX_FAILURES_FIRST]:
        stats = r.get("stats") or {}
        inputs = [
            (k, v)
            for k, v in (
                ("case", stats.get("case")), ("dtype", stats.get("dtype") or r.get("dtype")),
                ("shape", stats.get("shape")), ("layout", stats.get("layout")),
            )
            if v not in (None, "", [])
        ]  # fmt: skip
        message = str(r.get("message") or "")
        worst = None
        if r.get("category") == Category.MISMATCH.value and "expected_at_worst" in stats and "worst at" not in message:
            worst = {"index": stats.get("worst_index"), "actual": stats.get("actual_at_worst"), "expected": stats.get("expected_at_worst")}
        replay = r.get("replay") or ""
        link = _artifact_link(replay)
        artifacts = [f"{link}call.json", f"{link}arrays.npz"] if link else []
        if link and r.get("category") == Category.MISMATCH.value:  # it ran: the blob it ran is saved too
            artifacts.append(f"{link}blob.bin")
        shown.append(
            {
                "id": r.get("id", ""),
                "category": r.get("category", ""),
                "message": shorten(message, 400),
                "worst": worst,
                "inputs": inputs,
                "replay": replay,
                "artifacts": [(href, href.rpartition("/")[2]) for href in artifacts],
                "failures": _failure_kinds(r.get("failures")),
            }
        )
    return {"rows": shown, "more": max(len(rows) - MAX_FAILURES_FIRST, 0)}


def _failure_kinds(found: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A failing check's failures by kind (``FailureSummary``): the counts, and per outcome the kinds
    every one of its cases has (else its commonest), each as failing of run."""
    if not found:
        return None
    f = FailureSummary.from_json(found)
    outcomes = []
    for o in f.outcomes:
        shared = [k for k in o.kinds if k.failed == o.cases][:3]
        outcomes.append({"outcome": o.outcome, "cases": o.cases, "all": bool(shared),
                         "kinds": [(k.kind, k.failed, k.of) for k in shared or o.kinds[:2]]})
    return {"failed": f.failed, "ran": f.ran, "after_first": f.after_first, "cut_short": f.cut_short, "budget_s": f"{f.budget_s:g}",
            "outcomes": outcomes}


def _verdict(report: Mapping[str, Any], state: str) -> dict[str, Any]:
    backend = report.get("backend") or {}
    verdict = report.get("verdict") or {}
    spec = report.get("spec") or {}
    run = report.get("run") or {}
    harness = report.get("harness") or {}
    seed = run.get("hypothesis_seed")
    return {
        "state": state,
        "certified": str(bool(verdict.get("certified"))).lower(),
        "colour": VERDICT_COLOURS[state],
        "badge": VERDICT_BADGES[state],
        "name": backend.get("name", "?"),
        "version": backend.get("version", "?"),
        "text": verdict.get("text", ""),
        "partial": run.get("partial") or None,
        "meta": [
            ("profile", verdict.get("profile") or spec.get("profile"), "profile"),
            ("harness", f"{harness.get('name', '')} {harness.get('version', '')}".strip(), "harness"),
            ("spec digest", spec.get("digest"), "spec-digest"),
            ("hypothesis profile", run.get("hypothesis_profile") if seed is None else f"{run.get('hypothesis_profile')} (seed {seed})", "hypothesis-profile"),
            ("run", f"{run.get('started', '?')} → {run.get('finished', '?')}", "run-time"),
        ],
    }


def _toc(has_failures: bool = False, has_models: bool = False, has_quantized: bool = False,
         has_out_of_scope: bool = False, has_refusals: bool = False) -> list[tuple[str, str]]:
    return [
        *([("failures", "Failures")] if has_failures else []),
        ("counts", "Counts"),
        ("failing-clauses", "Why not certified" if has_failures else "Failing clauses"),
        *([("models", "Models")] if has_models else []),
        *([("quantized", "Quantized programs")] if has_quantized else []),
        ("matrix", "Operators × dtypes"),
        *([("refusals", "Not supported")] if has_refusals else []),
        *([("out-of-scope", "Not certified")] if has_out_of_scope else []),
        ("clauses", "Clauses"),
        ("performance", "Performance"),
        ("environment", "Environment"),
        ("replay", "Replay"),
    ]


def _counts(report: Mapping[str, Any]) -> dict[str, Any]:
    results = report.get("results") or []
    counts = Counter(r.get("category") for r in results)
    if not counts and (report.get("summary") or {}).get("counts"):
        counts = Counter(report["summary"]["counts"])
    order = sorted(counts, key=lambda c: (category_rank(c), str(c)))
    total = sum(counts.values())
    summary = report.get("summary") or {}
    mandatory = summary.get("mandatory") or {}
    numerics = summary.get("numerics") or {}
    return {
        "items": [(c, counts[c]) for c in order],
        "total": total,
        "bar": _stacked_bar([(c, counts[c]) for c in order], total),
        "mandatory": {k: mandatory.get(k, 0) for k in ("passed", "total")},
        "numerics": {k: numerics.get(k, 0) for k in ("passed", "total", "not_supported", "ops", "dtypes")},
    }


def _stacked_bar(parts: list[tuple[str, int]], total: int, width: int = 760, height: int = 14) -> dict[str, Any] | None:
    """The counts as one bar: each category's share of ``width``."""
    if total <= 0:
        return None
    x = 0.0
    rects = []
    for category, n in parts:
        w = width * n / total
        rects.append({"category": category, "n": n, "x": x, "width": max(w, 0.5)})
        x += w
    return {"width": width, "height": height, "rects": rects}


def _clause_meaning(clause_id: str, clauses: Mapping[str, Any] | None) -> tuple[str, str]:
    clause = (clauses or {}).get(clause_id)
    if clause is None:
        return "", ""
    return str(getattr(clause, "title", "") or ""), str(getattr(clause, "text", "") or "")


def _failing_clauses(report: Mapping[str, Any], clauses: Mapping[str, Any] | None) -> dict[str, Any]:
    verdict = report.get("verdict") or {}
    failing = list(verdict.get("failing_clauses") or [])
    unsupported = list(verdict.get("unsupported") or [])
    by_clause: dict[str, list[Mapping[str, Any]]] = {}
    failing_ids = set(verdict.get("failing") or ())
    for r in report.get("results") or []:
        if r.get("id") in failing_ids or (not failing_ids and r.get("mandatory") and is_failure(r.get("category"))):
            by_clause.setdefault(r.get("clause") or "?", []).append(r)
    rows = []
    for clause_id in failing:
        title, text = _clause_meaning(clause_id, clauses)
        hits = by_clause.get(clause_id, [])
        what = ", ".join(sorted({r.get("op") or r.get("program") or r.get("id") or "?" for r in hits}))
        rows.append({"clause": clause_id, "title": title, "text": text, "failing": len(hits), "where": shorten(what, 300)})
    lists = [
        {"id": key, "label": label, "items": items}
        for key, label, items in (
            ("inconclusive", "Inconclusive (the harness or the reference is at fault; the verdict stays open)", list(verdict.get("inconclusive") or [])),
            ("not-run", "Mandatory but not run", list(verdict.get("not_run") or [])),
        )
        if items
    ]
    return {
        "heading": "Failing clauses" if verdict.get("certified") else "Why not certified",
        "none": not (rows or unsupported or lists),
        "rows": rows,
        "unsupported": _by_op(unsupported),
        "unsupported_count": len(unsupported),
        "refusals": any(" " in u and not u.startswith(("model ", "quantized ")) for u in unsupported),
        "profile": verdict.get("profile", ""),
        "way_out": not str(verdict.get("profile", "")).startswith("claimed"),
        "lists": lists,
    }


def _by_op(unsupported: list[str]) -> list[str]:
    """The verdict's "op dtype" items as one per op, "op (dtype, dtype)"; other items ("model m") as they are."""
    dtypes: dict[str, list[str]] = {}
    for item in unsupported:
        op, _, dtype = item.rpartition(" ")
        if item.startswith(("model ", "quantized ")) or not op:
            dtypes.setdefault(item, [])
        else:
            dtypes.setdefault(op, []).append(dtype)
    return [f"{op} ({', '.join(sorted(ds, key=dtype_key))})" if ds else op for op, ds in dtypes.items()]


def _numerics_results(report: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """(op, dtype) -> its NUM result (the worst one, should a report hold several)."""
    cells: dict[tuple[str, str], Mapping[str, Any]] = {}
    for r in report.get("results") or []:
        if (r.get("clause") or "").startswith("NUM-") and r.get("op") and r.get("dtype"):
            key = (str(r["op"]), str(r["dtype"]))
            previous = cells.get(key)
            if previous is None or (is_failure(r.get("category")) and not is_failure(previous.get("category"))):
                cells[key] = r
    return cells


def _refusals(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """The NUM checks refused on every draw, one row per refusal (``markdown.refusal_groups``), each
    with its anchor (``refusal-N``) that the matrix's refused cells link to; None without any."""
    groups = refusal_groups(report)
    if not groups:
        return None
    rows = [
        {"anchor": f"refusal-{n}", "refusal": g["refusal"], "checks": g["checks"],
         "ops": [{"op": op, "dtypes": ", ".join(dtypes)} for op, dtypes in g["ops"]]}
        for n, g in enumerate(groups, 1)
    ]  # fmt: skip
    return {"rows": rows, "checks": sum(g["checks"] for g in groups), "note": REFUSAL_NOTE,
            "anchors": {g["refusal"]: row["anchor"] for g, row in zip(groups, rows)}}


def _acted_on(category: Any) -> bool:
    """A result a reader must act on: a failure of the backend, or one the harness or reference caused."""
    found = category_of(category)
    return found is not None and (found in FAILURES or found in INCONCLUSIVE)


def _matrix(report: Mapping[str, Any], refusals: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The op x dtype matrix of the numerics results; None without any. A cell carries its message
    (on hover, and on click) only for a result a reader acts on; a refused one links to its refusal."""
    matrix = op_dtype_matrix(report)
    if not matrix:
        return None
    anchors = (refusals or {}).get("anchors") or {}
    results = _numerics_results(report)
    dtypes = sorted({d for row in matrix.values() for d in row}, key=dtype_key)
    present = Counter(c for row in matrix.values() for c in row.values())
    rows = []
    for op in sorted(matrix):
        row = matrix[op]
        cells = []
        for dtype in dtypes:
            category = row.get(dtype)
            if category is None:
                cells.append({"dtype": dtype, "category": None})
                continue
            r = results.get((op, dtype), {})
            message = str(r.get("message") or "")
            acted_on = _acted_on(category)
            refused = anchors.get(refusal(r)) if r and refused_entirely(r) else None
            if acted_on:  # the message once: in the popup a click opens
                hover = f"{op} {dtype}: {category}"
            elif message and not refused and category != Category.PASS.value:
                hover = f"{op} {dtype}: {category}: {shorten(message, TITLE_LIMIT)}"
            else:
                hover = None
            cells.append(
                {
                    "dtype": dtype,
                    "category": category,
                    "hover": hover,
                    "popup": {"message": message or "(no message)", "replay": r.get("replay")} if acted_on else None,
                    "refusal": refused,
                }
            )
        rows.append(
            {
                "op": op,
                "cells": cells,
                "passed": sum(c == Category.PASS.value for c in row.values()),
                "total": len(row),
                "failing": any(is_failure(c) for c in row.values()),
            }
        )
    return {
        "dtypes": dtypes,
        "legend": [(c, present[c]) for c in sorted(present, key=lambda c: (category_rank(c), str(c)))],
        "failing_rows": sum(row["failing"] for row in rows),
        "rows": rows,
    }


def _message_cell(message: str) -> dict[str, str]:
    """Short messages whole; a long one (or one of several lines) said once: its beginning, and the
    rest when it is opened (a click)."""
    if not message:
        return {"kind": "empty"}
    if len(message) <= 240 and "\n" not in message:
        return {"kind": "short", "message": message}
    first = message.split("\n", 1)[0][:160]
    cut = first.rfind(" ", 80) + 1 or len(first)
    return {"kind": "long", "summary": message[:cut], "rest": message[cut:]}


def _clause_table(report: Mapping[str, Any], clauses: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Every result outside the operator numerics, failures first; None without any."""
    results = [r for r in report.get("results") or [] if not (r.get("clause") or "").startswith("NUM-")]
    if not results:
        return None
    results.sort(key=lambda r: (not is_failure(r.get("category")), category_of(r.get("category")) not in INCONCLUSIVE, clause_key(r.get("clause")), str(r.get("id"))))
    rows = []
    for r in results:
        clause = r.get("clause") or "?"
        title, text = _clause_meaning(clause, clauses)
        rows.append(
            {
                "id": r.get("id"),
                "clause": clause,
                "category": r.get("category"),
                "failing": is_failure(r.get("category")),
                "title": title,
                "text": text,
                "message": _message_cell(str(r.get("message") or "")),
            }
        )
    return {"rows": rows, "failing": sum(row["failing"] for row in rows)}


# ---------------------------------------------------------------------------------------------
# Performance


def _performance(report: Mapping[str, Any]) -> dict[str, Any]:
    rows = performance_table(report)
    return {
        "gaps": performance_gaps(report),
        "devices": performance_devices(report) if rows else None,
        "chart": perf_chart(rows) if rows else None,
        "rows": [(p, s, *(_fmt(v) for v in (b, ref, eag)), *(_fmt(v, "×") for v in (rr, re))) for p, s, b, ref, eag, rr, re in rows],
    }


def _fmt(value: Any, prefix: str = "") -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return ""
    return f"{prefix}{value:.3g}" if prefix else f"{value:.3f}"


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and value > 0 and math.isfinite(value)


def perf_chart(rows: list[tuple]) -> dict[str, Any]:
    """The geometry of the performance chart (``report.html.j2`` draws it as inline SVG): one group
    per (program, stage), a bar per ratio, log2 scale, a line at 1.0."""
    label_w, chart_w, value_w = 190, 620, 70
    bar_h, bar_gap, group_gap, top, bottom = 14, 3, 10, 30, 28
    ratios = [v for row in rows for v in row[5:7] if _positive(v)]
    span = max([1.0] + [abs(math.log2(v)) for v in ratios])
    span = min(float(math.ceil(span)), 10.0)

    def x_of(ratio: float) -> float:
        lg = max(-span, min(span, math.log2(ratio)))
        return label_w + chart_w * (lg + span) / (2 * span)

    groups = []
    y = top
    for program, stage, _b, _ref, _eag, vs_ref, vs_eager in rows:
        series = [(key, legend, colour, value) for (key, legend, colour), value in zip(SERIES, (vs_ref, vs_eager)) if _positive(value)]
        if not series:
            continue
        height = len(series) * (bar_h + bar_gap) - bar_gap
        group = {"program": program, "stage": stage, "label_y": y + height / 2 + 4, "bars": []}
        for key, legend, colour, value in series:
            x0, x1 = x_of(1.0), x_of(value)
            group["bars"].append(
                {
                    "series": key,
                    "legend": legend,
                    "colour": colour,
                    "ratio": value,
                    "x": min(x0, x1),
                    "y": y,
                    "width": max(abs(x1 - x0), 1.0),
                    "end": x1,
                }
            )
            y += bar_h + bar_gap
        groups.append(group)
        y += group_gap - bar_gap
    ticks = [
        {"x": x_of(2.0**p), "label": f"×{2.0 ** p:g}" if p > 0 else f"×1/{2 ** -p}"}
        for p in range(-int(span), int(span) + 1)
        if not (span > 6 and p % 2) and p != 0  # the parity line (p == 0) has its own label
    ]
    return {
        "label_w": label_w,
        "chart_w": chart_w,
        "width": label_w + chart_w + value_w,
        "height": y + bottom,
        "bar_h": bar_h,
        "top": top,
        "bottom_y": y,
        "parity_x": x_of(1.0),
        "series": [{"x": label_w + i * 190, "text": t, "colour": c} for i, (_k, t, c) in enumerate(SERIES)],
        "ticks": ticks,
        "groups": groups,
    }


# ---------------------------------------------------------------------------------------------
# Environment and replays


def _environment(report: Mapping[str, Any]) -> dict[str, Any]:
    env = report.get("environment") or {}
    run = report.get("run") or {}
    backend = report.get("backend") or {}
    integrity = (report.get("integrity") or {}).get("sha256")
    items = [(k, env[k]) for k in sorted(env)]
    items += [
        ("backend description", backend.get("description")),
        ("claimed ops", len(backend.get("claims") or {})),
        ("tolerance loosenings", len(backend.get("tolerance_loosenings") or [])),
        ("compile specs", ", ".join(str(s.get("key")) for s in backend.get("compile_specs") or []) or "none"),
        ("parts", ", ".join(map(str, run.get("parts") or []))),
        ("command", run.get("command")),
        ("report schema", report.get("schema")),
        ("integrity sha256", integrity),
    ]
    return {
        "items": [(k, v, k in ("command", "integrity sha256")) for k, v in items if v not in (None, "")],
        "loosenings": [
            {
                "op": t.get("op"),
                "dtypes": ", ".join(map(str, t.get("dtypes") or [])),
                "atol": t.get("atol"),
                "rtol": t.get("rtol"),
                "ulp": t.get("ulp"),
                "reason": t.get("reason"),
            }
            for t in backend.get("tolerance_loosenings") or []
        ],
    }


def _replays(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {"id": r.get("id"), "category": r.get("category"), "replay": r.get("replay")}
        for r in report.get("results") or []
        if is_failure(r.get("category")) and r.get("replay")
    ]
