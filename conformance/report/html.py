"""report.json -> one self-contained HTML page. A pure function.

The page needs nothing but itself: inline CSS, inline SVG, no script, no font,
image or style sheet from anywhere (a Content-Security-Policy says so to the
browser too). Details open on click through ``<details>``/``<summary>`` and
show on hover through ``title=``, so the page works with JavaScript disabled.

Every string that came from a backend or a report (names, versions, messages,
ids, ops, environment) goes through :func:`esc`: a backend whose error message
is ``<script>...`` shows that text, it does not run it.

Stable hooks for tests and scripts: ``#verdict[data-certified][data-state]``,
``#counts .count[data-category][data-count]``, ``#failing-clauses
tr[data-clause]``, ``#op-dtype-matrix td.cell[data-op][data-dtype]
[data-category]``, ``#clause-table tr[data-id][data-clause][data-category]``,
``#perf-chart rect.bar[data-program][data-stage][data-series][data-ratio]``,
``#environment [data-key]`` and ``#replay li[data-id]``. The page names the report.json
it shows in ``<meta name="conformance-report-sha256">`` (``verify`` compares them).
"""

from __future__ import annotations

import html
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from conformance.api.scalar_type import DTYPE_ORDER
from conformance.report import safe
from conformance.report.markdown import op_dtype_matrix, performance_gaps, performance_table
from conformance.results import COLOURS, FAILURES, INCONCLUSIVE, Category
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
# Small helpers shared with the scoreboard


def esc(value: Any) -> str:
    """Text or attribute value, escaped (quotes included)."""
    return html.escape(safe.plain(value), quote=True)


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


def shorten(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_failure(value: Any) -> bool:
    category = category_of(value)
    return category is not None and category in FAILURES


def page(title: str, body: Iterable[str], *, extra_css: str = "", integrity: str | None = None) -> str:
    """A complete, self-contained document around ``body`` (already escaped HTML);
    ``integrity`` names the report.json it shows."""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            '<meta name="referrer" content="no-referrer">',
            *([f'<meta name="{INTEGRITY_META}" content="{esc(integrity)}">'] if integrity is not None else []),
            f"<title>{esc(title)}</title>",
            f"<style>{BASE_CSS}{extra_css}</style>",
            "</head>",
            "<body>",
            *body,
            "</body>",
            "</html>",
            "",
        ]
    )


BASE_CSS = """
:root { --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --soft: #f6f8fa; --accent: #0969da; }
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin: 0; color: var(--fg); background: #fff;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "Noto Sans", "DejaVu Sans", Arial, sans-serif; }
main { max-width: 1280px; margin: 0 auto; padding: 0 24px 48px; }
h1 { font-size: 26px; margin: 0; line-height: 1.2; overflow-wrap: anywhere; }
h2 { font-size: 19px; margin: 32px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 15px; margin: 18px 0 6px; }
p { margin: 6px 0; }
code, pre, .mono { font-family: ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, Consolas, monospace;
  font-size: 12.5px; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; }
a { color: var(--accent); }
.muted { color: var(--muted); }
.nowrap { white-space: nowrap; }
table { border-collapse: separate; border-spacing: 0; }
table.grid { width: 100%; }
table.grid th, table.grid td { text-align: left; vertical-align: top; padding: 3px 8px;
  border-bottom: 1px solid var(--line); }
table.grid thead th { background: var(--soft); position: sticky; top: 0; z-index: 2;
  border-bottom: 2px solid var(--line); font-weight: 600; }
table.grid tbody tr:hover { background: #fbfcfd; }
.chip { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 11.5px; font-weight: 600;
  letter-spacing: .02em; white-space: nowrap; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 3px; vertical-align: -1px;
  margin-right: 6px; border: 1px solid rgba(0,0,0,.15); }
details > summary { cursor: pointer; }
.msg { white-space: pre-wrap; overflow-wrap: anywhere; font-family: ui-monospace, "DejaVu Sans Mono", monospace;
  font-size: 12px; }
.warning { background: #fff8c5; border: 1px solid #d4a72c; border-radius: 6px; padding: 8px 12px; margin: 12px 0; }
nav.toc { position: sticky; top: 0; z-index: 5; background: rgba(255,255,255,.96); border-bottom: 1px solid var(--line);
  padding: 6px 0; margin-bottom: 8px; font-size: 13px; }
nav.toc a { margin-right: 14px; text-decoration: none; }
"""

REPORT_CSS = """
#verdict { margin: 24px 0 8px; padding: 20px 24px; border-radius: 10px; color: #fff; }
#verdict .badge { font-size: 34px; font-weight: 800; letter-spacing: .04em; line-height: 1.1; }
#verdict .what { font-size: 18px; margin-top: 6px; overflow-wrap: anywhere; }
#verdict .what .label { opacity: .75; font-size: 14px; font-weight: 400; }
#verdict .text { font-size: 15px; margin-top: 4px; opacity: .95; }
#verdict dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 14px 0 0;
  font-size: 13px; }
#verdict dt { opacity: .85; }
#verdict dd { margin: 0; font-family: ui-monospace, "DejaVu Sans Mono", monospace; overflow-wrap: anywhere; }
#counts ul { list-style: none; padding: 0; margin: 0 0 8px; display: flex; flex-wrap: wrap; gap: 8px; }
#counts li { border: 1px solid var(--line); border-radius: 8px; padding: 6px 12px; background: var(--soft); }
#counts li b { font-size: 17px; margin-left: 6px; }
#counts svg { display: block; margin: 8px 0; width: 100%; height: 14px; }
.matrix-tools { margin: 6px 0 8px; display: flex; flex-wrap: wrap; gap: 6px 16px; align-items: center; font-size: 12.5px; }
.legend span { margin-right: 12px; white-space: nowrap; }
.legend .swatch { width: 16px; height: 16px; text-align: center; font-size: 11px; line-height: 14px; font-weight: 700; }
#matrix-only-failing:checked ~ table tbody tr:not(.has-failure) { display: none; }
table.matrix { font-size: 12px; }
table.matrix th, table.matrix td { padding: 0; border-bottom: 1px solid #fff; border-right: 1px solid #fff; }
table.matrix thead th { position: sticky; top: 34px; z-index: 3; background: #fff; padding: 4px 2px;
  font-weight: 600; font-size: 11.5px; border-bottom: 2px solid var(--line); white-space: nowrap; }
table.matrix th.op { position: sticky; left: 0; z-index: 1; background: #fff; text-align: left; font-weight: 400;
  padding: 1px 10px 1px 0; white-space: nowrap; font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 11.5px; }
table.matrix thead th.op { z-index: 4; font-family: inherit; font-weight: 600; }
table.matrix tbody tr:hover th.op { background: #eef4ff; }
table.matrix td.cell { width: 58px; min-width: 58px; height: 20px; text-align: center; position: relative;
  font-weight: 700; font-size: 12px; line-height: 20px; }
table.matrix td.none { background: repeating-linear-gradient(45deg, #fafafa 0 4px, #f0f0f0 4px 8px); }
table.matrix td.tally { padding: 0 8px; text-align: right; color: var(--muted); white-space: nowrap;
  font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 11.5px; }
td.cell details > summary { list-style: none; display: block; }
td.cell details > summary::-webkit-details-marker { display: none; }
td.cell details[open] > summary { outline: 2px solid #000; outline-offset: -2px; }
td.cell .pop { position: absolute; left: 0; top: 22px; z-index: 10; width: 440px; max-height: 320px; overflow: auto;
  background: #fff; color: var(--fg); border: 1px solid #8c959f; border-radius: 6px; padding: 8px 10px;
  box-shadow: 0 6px 18px rgba(0,0,0,.18); text-align: left; font-weight: 400; }
td.cell .pop .head { font-weight: 600; margin-bottom: 4px; font-family: inherit; }
#failures-table { table-layout: fixed; }
#failures-table th:nth-child(1) { width: 24%; }
#failures-table th:nth-child(2) { width: 175px; }
#failures-table th:nth-child(4) { width: 16%; }
#failures-table td { overflow-wrap: anywhere; vertical-align: top; }
#failures-table code { display: block; white-space: pre-wrap; overflow-wrap: anywhere; font-size: 12px; }
#failures-table a.artifact { font-size: 12px; margin-right: 8px; }
#clause-table { table-layout: fixed; }
#clause-table th:nth-child(1) { width: 27%; }
#clause-table th:nth-child(2) { width: 27%; }
#clause-table th:nth-child(3) { width: 170px; }
#clause-table td { overflow-wrap: anywhere; }
#clause-table td.message summary { overflow-wrap: anywhere; }
#clause-table tr.is-failure td:first-child { box-shadow: inset 3px 0 0 #c62828; }
#perf-chart { display: block; max-width: 100%; height: auto; }
#perf-chart text { font: 11.5px system-ui, "DejaVu Sans", sans-serif; fill: #1f2328; }
#perf-chart .tick { fill: #59636e; }
#environment dl { display: grid; grid-template-columns: max-content 1fr; gap: 3px 18px; margin: 0; }
#environment dt { color: var(--muted); }
#environment dd { margin: 0; overflow-wrap: anywhere; }
#replay ol { padding-left: 22px; }
#replay li { margin: 6px 0; }
#replay code { display: block; background: var(--soft); border: 1px solid var(--line); border-radius: 6px; padding: 6px 10px;
  overflow-wrap: anywhere; white-space: pre-wrap; }
"""


# ---------------------------------------------------------------------------------------------
# The page


def render(report: Mapping[str, Any], clauses: Mapping[str, Any] | None = None) -> str:
    """One self-contained HTML page showing ``report`` (a report.json document)."""
    backend = report.get("backend") or {}
    verdict = report.get("verdict") or {}
    state = verdict_state(verdict)
    title = f"{'CERTIFIED' if state == 'certified' else 'NOT CERTIFIED'}: {backend.get('name', '?')} {backend.get('version', '')}"
    failures = _failures_first(report)
    body = [
        "<main>",
        _verdict(report, state),
        _toc(has_failures=bool(failures)),
        failures,
        _counts(report),
        _failing_clauses(report, clauses),
        _matrix(report),
        _clause_table(report, clauses),
        _performance(report),
        _environment(report),
        _replays(report),
        "</main>",
    ]
    return page(title.strip(), body, extra_css=REPORT_CSS, integrity=str((report.get("integrity") or {}).get("sha256", "")))


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


def _failures_first(report: Mapping[str, Any]) -> str:
    """The failures, before anything else: check, category, message, the inputs it failed on, the
    command that replays it and the saved arrays and call."""
    verdict = report.get("verdict") or {}
    failing = set(verdict.get("failing") or ())
    rows = [r for r in report.get("results") or [] if r.get("id") in failing or (is_failure(r.get("category")) and not failing)]
    if not rows:
        return ""
    out = ['<section id="failures"><h2>Failures</h2>']
    body = []
    for r in rows[:MAX_FAILURES_FIRST]:
        stats = r.get("stats") or {}
        inputs = ", ".join(
            f"{k} {esc(v if not isinstance(v, list) else list(v))}" for k, v in (
                ("case", stats.get("case")), ("dtype", stats.get("dtype") or r.get("dtype")),
                ("shape", stats.get("shape")), ("layout", stats.get("layout")),
            ) if v not in (None, "", [])
        )
        worst = ""
        message = str(r.get("message") or "")
        if r.get("category") == Category.MISMATCH.value and "expected_at_worst" in stats and "worst at" not in message:
            worst = f"<br>worst at {esc(stats.get('worst_index'))}: got {esc(stats.get('actual_at_worst'))}, expected {esc(stats.get('expected_at_worst'))}"
        replay = r.get("replay") or ""
        link = _artifact_link(replay)
        artifacts = (f' <a class="artifact" href="{esc(link)}call.json">call.json</a> '
                     f'<a class="artifact" href="{esc(link)}arrays.npz">arrays.npz</a>') if link else ""
        if link and r.get("category") == Category.MISMATCH.value:  # it ran: the blob it ran is saved too
            artifacts += f' <a class="artifact" href="{esc(link)}blob.bin">blob.bin</a>' 
        body.append(
            f'<tr data-id="{esc(r.get("id", ""))}"><td class="mono">{esc(r.get("id", ""))}</td>'
            f'<td class="nowrap">{esc(r.get("category", ""))}</td>'
            f'<td>{esc(shorten(message, 400))}{worst}</td>'
            f"<td>{inputs}</td>"
            f'<td>{f"<code>{esc(replay)}</code>" if replay else ""}{artifacts}</td></tr>'
        )
    out.append(
        '<table class="grid" id="failures-table"><thead><tr><th>check</th><th>category</th><th>message</th>'
        "<th>inputs</th><th>replay</th></tr></thead><tbody>" + "".join(body) + "</tbody></table>"
    )
    if len(rows) > MAX_FAILURES_FIRST:
        out.append(f"<p>... and {len(rows) - MAX_FAILURES_FIRST} more in the clause table below and in report.json.</p>")
    out.append("</section>")
    return "\n".join(out)


def _verdict(report: Mapping[str, Any], state: str) -> str:
    backend = report.get("backend") or {}
    verdict = report.get("verdict") or {}
    spec = report.get("spec") or {}
    run = report.get("run") or {}
    harness = report.get("harness") or {}
    badge = VERDICT_BADGES[state]
    seed = run.get("hypothesis_seed")
    meta = [
        ("profile", verdict.get("profile") or spec.get("profile"), "profile"),
        ("harness", f"{harness.get('name', '')} {harness.get('version', '')}".strip(), "harness"),
        ("spec digest", spec.get("digest"), "spec-digest"),
        ("hypothesis profile", run.get("hypothesis_profile") if seed is None else f"{run.get('hypothesis_profile')} (seed {seed})", "hypothesis-profile"),
        ("run", f"{run.get('started', '?')} → {run.get('finished', '?')}", "run-time"),
    ]
    rows = "".join(f'<dt>{esc(k)}</dt><dd id="meta-{key}">{esc(v)}</dd>' for k, v, key in meta)
    colour = VERDICT_COLOURS[state]
    return (
        f'<header id="verdict" data-state="{state}" data-certified="{str(bool(verdict.get("certified"))).lower()}" '
        f'style="background:{colour}">'
        f'<div class="badge">{badge}</div>'
        f'<h1 class="what"><span id="backend-name">{esc(backend.get("name", "?"))}</span> '
        f'<span class="label">version</span> <span id="backend-version">{esc(backend.get("version", "?"))}</span></h1>'
        f'<div class="text" id="verdict-text">{esc(verdict.get("text", ""))}</div>'
        + (f'<div class="text" id="partial"><b>Partial run</b>: {esc(run["partial"])}.</div>' if run.get("partial") else "")
        + f"<dl>{rows}</dl>"
        "</header>"
    )


def _toc(has_failures: bool = False) -> str:
    links = [
        *([("failures", "Failures")] if has_failures else []),
        ("counts", "Counts"),
        ("failing-clauses", "Why not certified" if has_failures else "Failing clauses"),
        ("matrix", "Operators × dtypes"),
        ("clauses", "Clauses"),
        ("performance", "Performance"),
        ("environment", "Environment"),
        ("replay", "Replay"),
    ]
    return '<nav class="toc">' + "".join(f'<a href="#{a}">{t}</a>' for a, t in links) + "</nav>"


def _counts(report: Mapping[str, Any]) -> str:
    results = report.get("results") or []
    counts = Counter(r.get("category") for r in results)
    if not counts and (report.get("summary") or {}).get("counts"):
        counts = Counter(report["summary"]["counts"])
    order = sorted(counts, key=lambda c: (category_rank(c), str(c)))
    items = "".join(
        f'<li class="count" data-category="{esc(c)}" data-count="{counts[c]}">'
        f'<span class="swatch" style="background:{colour_of(c)}"></span>{esc(c)}<b>{counts[c]}</b></li>'
        for c in order
    )
    total = sum(counts.values())
    bar = _stacked_bar([(c, counts[c]) for c in order], total)
    summary = report.get("summary") or {}
    mandatory = summary.get("mandatory") or {}
    numerics = summary.get("numerics") or {}
    lines = [
        '<section id="counts"><h2>Results</h2>',
        f"<ul>{items}</ul>" if items else "<p>No results.</p>",
        bar,
        (
            f'<p id="mandatory" data-passed="{esc(mandatory.get("passed", 0))}" data-total="{esc(mandatory.get("total", 0))}">'
            f"Mandatory checks passed: <b>{esc(mandatory.get('passed', 0))} / {esc(mandatory.get('total', 0))}</b>. "
            f"Numerics: {esc(numerics.get('passed', 0))} / {esc(numerics.get('total', 0))} op × dtype results pass "
            f"({esc(numerics.get('not_supported', 0))} not supported) over {esc(numerics.get('ops', 0))} ops and "
            f"{esc(numerics.get('dtypes', 0))} dtypes. {total} results in all.</p>"
        ),
        "</section>",
    ]
    return "\n".join(lines)


def _stacked_bar(parts: list[tuple[str, int]], total: int, width: int = 760, height: int = 14) -> str:
    if total <= 0:
        return ""
    x = 0.0
    rects = []
    for category, n in parts:
        w = width * n / total
        rects.append(
            f'<rect x="{x:.2f}" y="0" width="{max(w, 0.5):.2f}" height="{height}" fill="{colour_of(category)}">'
            f"<title>{esc(category)}: {n}</title></rect>"
        )
        x += w
    return (
        f'<svg id="counts-bar" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" preserveAspectRatio="none" role="img" aria-label="results by category">{"".join(rects)}</svg>'
    )


def _clause_meaning(clause_id: str, clauses: Mapping[str, Any] | None) -> tuple[str, str]:
    clause = (clauses or {}).get(clause_id)
    if clause is None:
        return "", ""
    return str(getattr(clause, "title", "") or ""), str(getattr(clause, "text", "") or "")


def _failing_clauses(report: Mapping[str, Any], clauses: Mapping[str, Any] | None) -> str:
    verdict = report.get("verdict") or {}
    failing = list(verdict.get("failing_clauses") or [])
    unsupported = list(verdict.get("unsupported") or [])
    inconclusive = list(verdict.get("inconclusive") or [])
    not_run = list(verdict.get("not_run") or [])
    out = ['<section id="failing-clauses"><h2>Why not certified</h2>' if not verdict.get("certified") else '<section id="failing-clauses"><h2>Failing clauses</h2>']
    if not (failing or unsupported or inconclusive or not_run):
        out.append('<p id="no-failing-clauses">None: every mandatory check passed.</p></section>')
        return "\n".join(out)
    by_clause: dict[str, list[Mapping[str, Any]]] = {}
    failing_ids = set(verdict.get("failing") or ())
    for r in report.get("results") or []:
        if r.get("id") in failing_ids or (not failing_ids and r.get("mandatory") and is_failure(r.get("category"))):
            by_clause.setdefault(r.get("clause") or "?", []).append(r)
    if failing:
        rows = []
        for clause_id in failing:
            title, text = _clause_meaning(clause_id, clauses)
            hits = by_clause.get(clause_id, [])
            what = ", ".join(sorted({r.get("op") or r.get("program") or r.get("id") or "?" for r in hits}))
            rows.append(
                f'<tr data-clause="{esc(clause_id)}"><td class="mono nowrap"><b>{esc(clause_id)}</b></td>'
                f"<td><b>{esc(title)}</b>{'<br>' if title and text else ''}{esc(text)}</td>"
                f'<td>{len(hits)}</td><td class="mono">{esc(shorten(what, 300))}</td></tr>'
            )
        out.append(
            '<table class="grid" id="failing-clause-table"><thead><tr><th>clause</th><th>what must hold</th>'
            "<th>failing</th><th>where</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        )
    if unsupported:
        way_out = "" if str(verdict.get("profile", "")).startswith("claimed") else (
            " To certify only what the backend claims, run with <code>--profile claimed</code> (or a profiles file of your own)."
        )
        shown = "".join(f'<li class="mono">{esc(i)}</li>' for i in unsupported)
        out.append(
            f'<details id="unsupported"{" open" if len(unsupported) <= 12 else ""}><summary><b>Mandatory, not supported</b>: '
            f"{len(unsupported)} op x dtype(s) the backend refused cleanly (NOT_SUPPORTED): not a failure of a check, "
            f"but profile {esc(verdict.get('profile', ''))} requires them.{way_out}</summary><ul>{shown}</ul></details>"
        )
    for key, label, items in (
        ("inconclusive", "Inconclusive (the harness or the reference is at fault; the verdict stays open)", inconclusive),
        ("not-run", "Mandatory but not run", not_run),
    ):
        if items:
            shown = "".join(f'<li class="mono">{esc(i)}</li>' for i in items)
            out.append(
                f'<details id="{key}"{" open" if len(items) <= 12 else ""}><summary><b>{esc(label)}</b>: {len(items)}</summary>'
                f"<ul>{shown}</ul></details>"
            )
    out.append("</section>")
    return "\n".join(out)


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


def _matrix(report: Mapping[str, Any]) -> str:
    matrix = op_dtype_matrix(report)
    out = ['<section id="matrix"><h2>Operators × dtypes</h2>']
    if not matrix:
        out.append('<p id="op-dtype-matrix-empty">No operator numerics in this report.</p></section>')
        return "\n".join(out)
    results = _numerics_results(report)
    dtypes = sorted({d for row in matrix.values() for d in row}, key=dtype_key)
    present = Counter(c for row in matrix.values() for c in row.values())
    legend = "".join(
        f'<span data-category="{esc(c)}"><span class="swatch" style="{chip_style(c)}">{esc(glyph_of(c))}</span>'
        f"{esc(label_of(c))} ({present[c]})</span>"
        for c in sorted(present, key=lambda c: (category_rank(c), str(c)))
    )
    failing_rows = sum(any(is_failure(c) for c in row.values()) for row in matrix.values())
    out.append(
        f'<p class="muted">{len(matrix)} ops × {len(dtypes)} dtypes; {failing_rows} op(s) with a failure. '
        "Hover a cell for its message; click it to pin the message open.</p>"
    )
    out.append(
        '<input type="checkbox" id="matrix-only-failing">'
        '<label for="matrix-only-failing"> show only ops with a failure</label>'
        f'<div class="matrix-tools legend">{legend}</div>'
    )
    head = "".join(f'<th scope="col" data-dtype="{esc(d)}">{esc(d)}</th>' for d in dtypes)
    rows = []
    for op in sorted(matrix):
        row = matrix[op]
        cells = []
        for dtype in dtypes:
            category = row.get(dtype)
            if category is None:
                cells.append(f'<td class="cell none" data-op="{esc(op)}" data-dtype="{esc(dtype)}" title="not run"></td>')
                continue
            r = results.get((op, dtype), {})
            message = str(r.get("message") or "")
            hover = f"{op} {dtype}: {category}" + (f": {shorten(message, TITLE_LIMIT)}" if message else "")
            glyph = esc(glyph_of(category))
            if message or is_failure(category):
                replay = r.get("replay")
                inner = (
                    f"<details><summary>{glyph}</summary>"
                    f'<div class="pop"><div class="head">{esc(op)} · {esc(dtype)} · {esc(category)}</div>'
                    f'<div class="msg">{esc(message or "(no message)")}</div>'
                    + (f'<div class="msg muted">replay: {esc(replay)}</div>' if replay else "")
                    + "</div></details>"
                )
            else:
                inner = glyph
            cells.append(
                f'<td class="cell" data-op="{esc(op)}" data-dtype="{esc(dtype)}" data-category="{esc(category)}" '
                f'style="{chip_style(category)}" title="{esc(hover)}">{inner}</td>'
            )
        passed = sum(c == Category.PASS.value for c in row.values())
        failing = any(is_failure(c) for c in row.values())
        row_class = ' class="has-failure"' if failing else ""
        rows.append(
            f'<tr data-op="{esc(op)}"{row_class}>'
            f'<th scope="row" class="op" title="{esc(op)}">{esc(op)}</th>{"".join(cells)}'
            f'<td class="tally" data-passed="{passed}" data-total="{len(row)}">{passed}/{len(row)}</td></tr>'
        )
    out.append(
        '<table class="matrix" id="op-dtype-matrix">'
        f'<thead><tr><th class="op" scope="col">op</th>{head}<th scope="col">pass</th></tr></thead>'
        f'<tbody>{"".join(rows)}</tbody></table>'
    )
    out.append("</section>")
    return "\n".join(out)


def _message_cell(message: str) -> str:
    if not message:
        return '<td class="message muted"></td>'
    if len(message) <= 240 and "\n" not in message:
        return f'<td class="message"><span class="msg">{esc(message)}</span></td>'
    return (
        f'<td class="message"><details><summary>{esc(shorten(message, 160))}</summary>'
        f'<div class="msg">{esc(message)}</div></details></td>'
    )


def _clause_table(report: Mapping[str, Any], clauses: Mapping[str, Any] | None) -> str:
    rows = [r for r in report.get("results") or [] if not (r.get("clause") or "").startswith("NUM-")]
    out = ['<section id="clauses"><h2>Clauses</h2>']
    if not rows:
        out.append('<p id="clause-table-empty">No interface results in this report.</p></section>')
        return "\n".join(out)
    rows.sort(key=lambda r: (not is_failure(r.get("category")), category_of(r.get("category")) not in INCONCLUSIVE, clause_key(r.get("clause")), str(r.get("id"))))
    body = []
    for r in rows:
        clause = r.get("clause") or "?"
        category = r.get("category")
        title, text = _clause_meaning(clause, clauses)
        row_class = ' class="is-failure"' if is_failure(category) else ""
        body.append(
            f'<tr data-id="{esc(r.get("id"))}" data-clause="{esc(clause)}" data-category="{esc(category)}"'
            f"{row_class}>"
            f'<td class="mono">{esc(r.get("id"))}</td>'
            f'<td title="{esc(text)}"><span class="mono nowrap"><b>{esc(clause)}</b></span> {esc(title)}</td>'
            f'<td><span class="chip" style="{chip_style(category)}">{esc(category)}</span></td>'
            f"{_message_cell(str(r.get('message') or ''))}</tr>"
        )
    failing = sum(is_failure(r.get("category")) for r in rows)
    out.append(f'<p class="muted">{len(rows)} results outside the operator numerics; {failing} failing (listed first).</p>')
    out.append(
        '<table class="grid" id="clause-table"><thead><tr><th>check</th><th>clause</th><th>category</th>'
        f'<th>message</th></tr></thead><tbody>{"".join(body)}</tbody></table>'
    )
    out.append("</section>")
    return "\n".join(out)


def clause_key(clause: Any) -> tuple:
    """Clauses in the spec's order of families (PRE, RT, ... LAZY), then by number; unknown families last."""
    family, _, number = str(clause or "").partition("-")
    return (FAMILIES.index(family) if family in FAMILIES else len(FAMILIES), family, int(number) if number.isdigit() else 0, number)


# ---------------------------------------------------------------------------------------------
# Performance


def _performance(report: Mapping[str, Any]) -> str:
    rows = performance_table(report)
    gaps = performance_gaps(report)
    out = ['<section id="performance"><h2>Performance</h2>']
    if gaps:
        out.append(f'<p id="perf-gaps">{esc(gaps)}</p>')
    if not rows:
        if not gaps:
            out.append('<p id="perf-empty">No performance results (the performance session was skipped or measured nothing).</p>')
        out.append("</section>")
        return "\n".join(out)
    out.append(
        '<p class="muted">Median time of the backend divided by the reference backend and by PyTorch eager, '
        "per program and stage, on a log scale around 1.0: left of the line the backend is faster, right of it slower.</p>"
    )
    out.append(perf_chart(rows))
    table = "".join(
        f'<tr><td class="mono">{esc(p)}</td><td>{esc(s)}</td>'
        + "".join(f'<td class="mono">{_fmt(v)}</td>' for v in (b, ref, eag))
        + "".join(f'<td class="mono">{_fmt(v, "×")}</td>' for v in (rr, re))
        + "</tr>"
        for p, s, b, ref, eag, rr, re in rows
    )
    out.append(
        '<details id="perf-numbers"><summary>numbers</summary><table class="grid"><thead><tr><th>program</th><th>stage</th>'
        "<th>backend ms</th><th>reference ms</th><th>eager ms</th><th>vs reference</th><th>vs eager</th></tr></thead>"
        f"<tbody>{table}</tbody></table></details>"
    )
    out.append("</section>")
    return "\n".join(out)


def _fmt(value: Any, prefix: str = "") -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return ""
    return f"{prefix}{value:.3g}" if prefix else f"{value:.3f}"


def perf_chart(rows: list[tuple]) -> str:
    """Inline SVG: one group per (program, stage), a bar per ratio, log2 scale, a line at 1.0."""
    label_w, chart_w, value_w = 190, 620, 70
    bar_h, bar_gap, group_gap, top, bottom = 14, 3, 10, 30, 28
    ratios = [v for row in rows for v in row[5:7] if isinstance(v, (int, float)) and v > 0 and math.isfinite(v)]
    span = max([1.0] + [abs(math.log2(v)) for v in ratios])
    span = min(float(math.ceil(span)), 10.0)

    def x_of(ratio: float) -> float:
        lg = max(-span, min(span, math.log2(ratio)))
        return label_w + chart_w * (lg + span) / (2 * span)

    groups = []
    y = top
    for program, stage, _b, _ref, _eag, vs_ref, vs_eager in rows:
        series = [(key, legend, colour, value) for (key, legend, colour), value in zip(SERIES, (vs_ref, vs_eager))]
        series = [s for s in series if isinstance(s[3], (int, float)) and s[3] > 0 and math.isfinite(s[3])]
        if not series:
            continue
        height = len(series) * (bar_h + bar_gap) - bar_gap
        parts = [
            f'<text x="{label_w - 8}" y="{y + height / 2 + 4:.1f}" text-anchor="end">{esc(program)} · {esc(stage)}</text>'
        ]
        for key, legend, colour, value in series:
            x0, x1 = x_of(1.0), x_of(value)
            left, width = min(x0, x1), max(abs(x1 - x0), 1.0)
            parts.append(
                f'<rect class="bar" data-program="{esc(program)}" data-stage="{esc(stage)}" data-series="{key}" '
                f'data-ratio="{value:.6g}" x="{left:.1f}" y="{y}" width="{width:.1f}" height="{bar_h}" fill="{colour}" rx="2">'
                f"<title>{esc(program)} {esc(stage)}: {legend} = {value:.3g}</title></rect>"
                f'<circle cx="{x1:.1f}" cy="{y + bar_h / 2:.1f}" r="3.5" fill="{colour}" stroke="#fff" stroke-width="1"/>'
            )
            anchor_x = label_w + chart_w + 6
            parts.append(f'<text x="{anchor_x}" y="{y + bar_h - 3}" style="fill:{colour}">×{value:.3g}</text>')
            y += bar_h + bar_gap
        groups.append(f'<g class="perf-row" data-program="{esc(program)}" data-stage="{esc(stage)}">{"".join(parts)}</g>')
        y += group_gap - bar_gap
    height = y + bottom
    ticks = []
    for p in range(-int(span), int(span) + 1):
        if span > 6 and p % 2:
            continue
        x = x_of(2.0**p)
        if p == 0:
            continue  # the parity line has its own label
        label = f"×{2.0 ** p:g}" if p > 0 else f"×1/{2 ** -p}"
        ticks.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 6}" y2="{y}" stroke="#eaeef2"/>'
            f'<text class="tick" x="{x:.1f}" y="{y + 16}" text-anchor="middle">{label}</text>'
        )
    one = x_of(1.0)
    legend = "".join(
        f'<rect x="{label_w + i * 190}" y="6" width="12" height="12" fill="{c}" rx="2"/>'
        f'<text x="{label_w + i * 190 + 18}" y="16">{esc(t)}</text>'
        for i, (_k, t, c) in enumerate(SERIES)
    )
    total_w = label_w + chart_w + value_w
    return (
        f'<svg id="perf-chart" xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{height:.0f}" '
        f'viewBox="0 0 {total_w} {height:.0f}" role="img" aria-label="performance ratios">'
        f"{legend}{''.join(ticks)}"
        f'<text x="{label_w + chart_w - 4}" y="16" text-anchor="end" class="tick">lower is faster</text>'
        f"{''.join(groups)}"
        f'<line id="perf-parity" data-ratio="1" x1="{one:.1f}" x2="{one:.1f}" y1="{top - 6}" y2="{y + 4}" stroke="#1f2328" '
        'stroke-width="1.5" stroke-dasharray="4 3"/>'
        f'<text x="{one:.1f}" y="{y + 16}" text-anchor="middle" style="font-weight:700">1.0</text>'
        "</svg>"
    )


# ---------------------------------------------------------------------------------------------
# Environment and replays


_MONO = ' class="mono"'


def _environment(report: Mapping[str, Any]) -> str:
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
    body = "".join(
        f'<dt>{esc(k)}</dt><dd data-key="{esc(k)}"{_MONO if k in ("command", "integrity sha256") else ""}>{esc(v)}</dd>'
        for k, v in items
        if v not in (None, "")
    )
    loosenings = backend.get("tolerance_loosenings") or []
    extra = ""
    if loosenings:
        extra = (
            '<h3>Tolerance loosenings claimed by the backend</h3><table class="grid" id="loosenings"><thead><tr>'
            "<th>op</th><th>dtypes</th><th>atol</th><th>rtol</th><th>ulp</th><th>reason</th></tr></thead><tbody>"
            + "".join(
                f'<tr><td class="mono">{esc(t.get("op"))}</td><td>{esc(", ".join(map(str, t.get("dtypes") or [])))}</td>'
                f'<td>{esc(t.get("atol"))}</td><td>{esc(t.get("rtol"))}</td><td>{esc(t.get("ulp"))}</td><td>{esc(t.get("reason"))}</td></tr>'
                for t in loosenings
            )
            + "</tbody></table>"
        )
    return f'<section id="environment"><h2>Environment</h2><dl>{body}</dl>{extra}</section>'


def _replays(report: Mapping[str, Any]) -> str:
    failures = [r for r in report.get("results") or [] if is_failure(r.get("category")) and r.get("replay")]
    out = ['<section id="replay"><h2>Replay</h2>']
    if not failures:
        out.append('<p id="replay-empty">No failure saved a replayable example.</p></section>')
        return "\n".join(out)
    out.append('<p class="muted">Re-run a saved failing example against the backend (from the repository root):</p><ol>')
    for r in failures:
        out.append(
            f'<li data-id="{esc(r.get("id"))}"><span class="mono">{esc(r.get("id"))}</span> '
            f'<span class="chip" style="{chip_style(r.get("category"))}">{esc(r.get("category"))}</span>'
            f'<code>{esc(r.get("replay"))}</code></li>'
        )
    out.append("</ol></section>")
    return "\n".join(out)
