"""The page's op x dtype matrix of the numerics results, and the refusals its refused cells link to."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from conformance.report.html.style import category_of, category_rank, dtype_key, is_failure, shorten
from conformance.report.markdown import REFUSAL_NOTE, op_dtype_matrix, refusal, refusal_groups, refused_entirely
from conformance.results import FAILURES, INCONCLUSIVE, Category

TITLE_LIMIT = 400
"""Characters of a message shown on hover; the click shows all of it."""


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


def refusals(report: Mapping[str, Any]) -> dict[str, Any] | None:
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
    return {
        "rows": rows,
        "checks": sum(g["checks"] for g in groups),
        "note": REFUSAL_NOTE,
        "anchors": {g["refusal"]: row["anchor"] for g, row in zip(groups, rows)},
    }


def _acted_on(category: Any) -> bool:
    """A result a reader must act on: a failure of the backend, or one the harness or reference caused."""
    found = category_of(category)
    return found is not None and (found in FAILURES or found in INCONCLUSIVE)


def table(report: Mapping[str, Any], refusals: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
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
