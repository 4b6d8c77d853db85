"""report.json -> one self-contained HTML page. A pure function.

The page needs nothing but itself: inline CSS, inline SVG, no script, no font,
image or style sheet from anywhere (a Content-Security-Policy says so to the
browser too). Details open on click through ``<details>``/``<summary>`` and
show on hover through ``title=``, so the page works with JavaScript disabled.

``page`` assembles the view from ``sections``, the op x dtype ``matrix`` and ``performance``;
``templating`` and ``style`` are shared with the scoreboard.

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

from conformance.report.html.page import embedded_hash, render, view
from conformance.report.html.style import (
    VERDICT_BADGES,
    VERDICT_COLOURS,
    chip_style,
    clause_key,
    dtype_key,
    is_failure,
    tint_style,
    verdict_state,
)
from conformance.report.html.templating import render_template

__all__ = [
    "VERDICT_BADGES",
    "VERDICT_COLOURS",
    "chip_style",
    "clause_key",
    "dtype_key",
    "embedded_hash",
    "is_failure",
    "render",
    "render_template",
    "tint_style",
    "verdict_state",
    "view",
]
