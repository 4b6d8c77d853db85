"""The page's sections but the matrix and the performance: the failures first, the verdict, the
contents, the counts, why not certified, the clauses, the environment and the replays."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from conformance.report.html.style import (
    VERDICT_BADGES,
    VERDICT_COLOURS,
    category_of,
    category_rank,
    clause_key,
    dtype_key,
    is_failure,
    shorten,
)
from conformance.results import INCONCLUSIVE, Category, FailureSummary

MAX_FAILURES_FIRST = 25


def _artifact_link(replay: str) -> str:
    """The replay directory of a failure relative to report.html (replays/<name>/ beside it), or ""."""
    path = str(replay).split(" ")[-1]
    _, sep, tail = path.rpartition("/replays/")
    tail = tail.strip("/")
    return f"replays/{tail}/" if sep and re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]*", tail) and ".." not in tail else ""


def failures_first(report: Mapping[str, Any]) -> dict[str, Any] | None:
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
            worst = {
                "index": stats.get("worst_index"),
                "actual": stats.get("actual_at_worst"),
                "expected": stats.get("expected_at_worst"),
            }
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
        outcomes.append(
            {
                "outcome": o.outcome,
                "cases": o.cases,
                "all": bool(shared),
                "kinds": [(k.kind, k.failed, k.of) for k in shared or o.kinds[:2]],
            }
        )
    return {
        "failed": f.failed,
        "ran": f.ran,
        "after_first": f.after_first,
        "cut_short": f.cut_short,
        "budget_s": f"{f.budget_s:g}",
        "outcomes": outcomes,
    }


def verdict(report: Mapping[str, Any], state: str) -> dict[str, Any]:
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
            (
                "hypothesis profile",
                run.get("hypothesis_profile") if seed is None else f"{run.get('hypothesis_profile')} (seed {seed})",
                "hypothesis-profile",
            ),
            ("run", f"{run.get('started', '?')} → {run.get('finished', '?')}", "run-time"),
        ],
    }


def toc(
    has_failures: bool = False,
    has_models: bool = False,
    has_quantized: bool = False,
    has_out_of_scope: bool = False,
    has_refusals: bool = False,
) -> list[tuple[str, str]]:
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


def counts(report: Mapping[str, Any]) -> dict[str, Any]:
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


def failing_clauses(report: Mapping[str, Any], clauses: Mapping[str, Any] | None) -> dict[str, Any]:
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
            (
                "inconclusive",
                "Inconclusive (the harness or the reference is at fault; the verdict stays open)",
                list(verdict.get("inconclusive") or []),
            ),
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


def clause_table(report: Mapping[str, Any], clauses: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Every result outside the operator numerics, failures first; None without any."""
    results = [r for r in report.get("results") or [] if not (r.get("clause") or "").startswith("NUM-")]
    if not results:
        return None
    results.sort(
        key=lambda r: (
            not is_failure(r.get("category")),
            category_of(r.get("category")) not in INCONCLUSIVE,
            clause_key(r.get("clause")),
            str(r.get("id")),
        )
    )
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


def environment(report: Mapping[str, Any]) -> dict[str, Any]:
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


def replays(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {"id": r.get("id"), "category": r.get("category"), "replay": r.get("replay")}
        for r in report.get("results") or []
        if is_failure(r.get("category")) and r.get("replay")
    ]
