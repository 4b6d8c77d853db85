"""The verdict of a report: which results are mandatory for the profile, the summary of the
categories, and certified or why not, reason first."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from conformance.report.document import records
from conformance.results import FAILURES, INCONCLUSIVE, CaseResult, Category
from conformance.specs import quantized_programs


def partial_reason(results: Iterable[CaseResult]) -> str | None:
    """Why the report holds fewer results than the run planned (interrupted, budget spent), or None."""
    left = [r for r in results if r.category is Category.SKIP and r.message.startswith("not run:")]
    if not left:
        return None
    reasons = Counter(r.message.split(";")[0].removeprefix("not run: ") for r in left)
    return f"{len(left)} planned check(s) not run: " + "; ".join(f"{why} ({n})" for why, n in reasons.most_common())


def is_mandatory(result: CaseResult, profile, specs) -> bool:
    clause = result.clause or ""
    if clause.startswith("NUM-"):
        if result.op is None:
            return False
        try:
            core = specs.op(result.op).name
        except KeyError:
            return False
        return result.dtype in profile.dtypes.get(core, ())
    if clause.startswith("PERF-"):
        return False  # performance is measured and gated by diff, not certified
    if clause.startswith("MOD-"):
        return clause in profile.clauses and result.model in profile.models
    if clause.startswith("QNT-"):
        return clause in profile.clauses and result.model in profile.quantized
    return clause in profile.clauses


def summarize(results: Iterable[CaseResult | Mapping[str, Any]]) -> dict[str, Any]:
    results = records(results)
    counts = Counter(r.category.value for r in results)
    mandatory = [r for r in results if r.mandatory]
    num = [r for r in results if (r.clause or "").startswith("NUM-")]
    clauses: dict[str, Counter] = {}
    for r in results:
        clauses.setdefault(r.clause or "?", Counter())[r.category.value] += 1
    return {
        "total": len(results),
        "counts": dict(sorted(counts.items())),
        "mandatory": {"total": len(mandatory), "passed": sum(r.category is Category.PASS for r in mandatory)},
        "numerics": {
            "total": len(num),
            "passed": sum(r.category is Category.PASS for r in num),
            "not_supported": sum(r.category is Category.NOT_SUPPORTED for r in num),
            "ops": len({r.op for r in num}),
            "dtypes": len({r.dtype for r in num}),
        },
        "clauses": {c: dict(sorted(v.items())) for c, v in sorted(clauses.items())},
    }


def latitudes_taken(results: Iterable[CaseResult]) -> list[str]:
    """The declared latitudes (conformance.api.LATITUDES, in that order) that passing NUM checks
    needed: some output passed under the latitude's model where the strict comparison failed
    (``stats.latitudes_taken``, conformance/checks/test_numerics.py)."""
    from conformance.api import LATITUDES

    found = {name for r in results if r.category is Category.PASS for name in ((r.stats or {}).get("latitudes_taken") or {})}
    return [name for name in LATITUDES if name in found]


def verdict(results: Iterable[CaseResult | Mapping[str, Any]], profile, specs, plugins: Iterable[str] = ()) -> dict[str, Any]:
    """Certified for the profile, or why not, reason first: failing checks (by clause), mandatory
    op x dtype the backend does not support, inconclusive results, mandatory checks not run.
    ``plugins``: the foreign pytest plugins the run loaded (``run.backend_plugins``), which the
    verdict names: their hooks could not change a category (``conformance.seal``), but they ran."""
    failing: list[str] = []
    failing_clauses: set[str] = set()
    failing_ops: set[str] = set()
    unsupported: list[str] = []
    inconclusive: list[str] = []
    not_run: list[str] = []
    allowed = {Category.PASS, Category.NOT_APPLICABLE}
    results = records(results)
    for r in results:
        if not r.mandatory or r.category in allowed:
            continue
        op_dtype = f"{r.op} {r.dtype or ''}".strip()
        if r.category in INCONCLUSIVE:
            inconclusive.append(r.id)
        elif r.category is Category.NOT_SUPPORTED and r.op:
            unsupported.append(op_dtype)
        elif r.category is Category.NOT_SUPPORTED and r.model:
            unsupported.append(f"{'quantized' if (r.clause or '').startswith('QNT-') else 'model'} {r.model}")
        elif r.category in FAILURES or r.category is Category.NOT_SUPPORTED:  # a refused contract program fails its clause
            failing.append(r.id)
            failing_clauses.add(r.clause)
            if r.op:
                failing_ops.add(op_dtype)
        else:
            not_run.append(r.id)
    seen_clauses = {r.clause for r in results}
    for clause in profile.clauses:
        if clause not in seen_clauses and not clause.startswith(("PERF-", "MOD-", "QNT-")):
            not_run.append(clause)
    seen_models = {(r.clause, r.model) for r in results if (r.clause or "").startswith(("MOD-", "QNT-"))}
    for clause in (c for c in profile.clauses if c.startswith(("MOD-", "QNT-"))):
        planned = profile.models if clause.startswith("MOD-") else quantized_programs(clause, profile, specs)
        not_run += [f"{clause} {m}" for m in planned if (clause, m) not in seen_models]
    seen_num = {(r.op, r.dtype) for r in results if (r.clause or "").startswith("NUM-")}
    for op, dtypes in profile.dtypes.items():
        for dtype in dtypes:
            if (op, dtype) not in seen_num:
                not_run.append(f"NUM {op} {dtype}")
    certified = not (failing or unsupported or inconclusive or not_run)
    taken = latitudes_taken(results)
    if certified:
        text = f"certified for profile {profile.name}" + (f" with latitude: {', '.join(taken)}" if taken else "")
    else:
        parts = []
        if failing:
            clauses = sorted(failing_clauses)
            named = ", ".join(clauses[:6]) + (f" and {len(clauses) - 6} more" if len(clauses) > 6 else "")
            parts.append(f"{len(failing)} failing check(s) in {named}")
        if unsupported:
            kinds = (
                "op x dtype(s)"
                if not any(u.startswith(("model ", "quantized ")) for u in unsupported)
                else "op x dtype(s) or program(s)"
            )
            parts.append(
                f"{len(unsupported)} mandatory {kinds} not supported"
                + ("" if profile.name.startswith("claimed") else " (--profile claimed certifies only what the backend claims)")
            )
        if inconclusive:
            parts.append(f"{len(inconclusive)} inconclusive result(s)")
        if not_run:
            parts.append(f"{len(not_run)} mandatory check(s) not run")
        text = f"not certified for profile {profile.name}: " + "; ".join(parts)
    foreign = sorted(plugins)
    if foreign:
        text += f" (run with foreign pytest plugins: {', '.join(foreign)})"
    out = {
        "certified": certified,
        "profile": profile.name,
        "text": text,
        "failing": sorted(failing),
        "failing_clauses": sorted(failing_clauses),
        "failing_ops": sorted(failing_ops),
        "unsupported": sorted(unsupported),
        "inconclusive": sorted(inconclusive),
        "not_run": sorted(not_run),
    }
    if foreign:
        out["plugins"] = foreign
    return out
