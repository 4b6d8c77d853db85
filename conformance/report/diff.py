"""The regression gate: what changed between a baseline report and a new one.

    python -m conformance diff OLD.json NEW.json [--waivers waivers.toml] [--threshold 1.25]

The baseline is the list of expected failures: a result failing in both is
*known* and does not fail the gate. Every check's category and timing is compared,
and the gate fails (exit 6, ``conformance.cli.EXIT_REGRESSED``) on a regression:

- a *new* failure (failing now, not failing in the baseline);
- a result that *no longer passes*: PASS in the baseline, anything else now
  (NOT_SUPPORTED, SKIP, NOT_APPLICABLE, XFAIL, HARNESS_ERROR, ...);
- a *missing* result (in the baseline, absent now: a check that no longer runs
  proves nothing), and a mandatory check the new verdict lists as not run that the
  baseline's ran;
- a *dropped claim*: an op, or a dtype of one, the baseline's manifest claimed and
  the new one does not;
- a performance regression: the backend's median time of a PERF measurement grew
  by more than the threshold (default 1.25x), or a measurement with timings in the
  baseline has none now.

A live waiver covers a new failure, a result that no longer passes, a missing
result or lost timings. The gate's outcome is its own: the new report's verdict is
printed beside it, never in its place (``conformance.cli``).

A waiver names a result id (or a prefix ending in ``*``), a reason, a tracking
link and an expiry date. An expired waiver no longer waives and is reported;
one that matches no new failure or missing result is reported as unmatched. A
different spec digest, profile, backend or machine is reported at the top, never
silently compared. The command verifies both reports before it compares them,
and refuses reports of different specs or profiles (``conformance.cli.gate.compare``);
``diff`` itself compares whatever it is given.
"""

from __future__ import annotations

import datetime as dt
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.report.document import read_report
from conformance.report.model import records
from conformance.results import CaseResult, Category

DEFAULT_THRESHOLD = 1.25
MISSING_SHOWN = 50


@dataclass(frozen=True)
class Waiver:
    id: str
    reason: str
    tracking: str
    expires: dt.date

    def matches(self, result_id: str) -> bool:
        return result_id.startswith(self.id[:-1]) if self.id.endswith("*") else result_id == self.id


class WaiverError(ValueError):
    """A malformed waiver file; the message names the entry and field."""


class DiffError(ValueError):
    """A report the gate cannot read: a result whose category this harness does not know."""


def load_waivers(path: str | Path) -> list[Waiver]:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise WaiverError(f"{path}: {exc}") from None
    out = []
    for i, entry in enumerate(data.get("waiver", [])):
        where = f"{path}: waiver #{i + 1}"
        missing = [k for k in ("id", "reason", "tracking", "expires") if not entry.get(k)]
        if missing:
            raise WaiverError(f"{where}: missing {missing}; every waiver names the result, a reason, a tracking link and an expiry date")
        expires = entry["expires"]
        if isinstance(expires, str):
            try:
                expires = dt.date.fromisoformat(expires)
            except ValueError:
                raise WaiverError(f"{where}: expires must be a date (YYYY-MM-DD), got {expires!r}") from None
        if not isinstance(expires, dt.date):
            raise WaiverError(f"{where}: expires must be a date (YYYY-MM-DD)")
        out.append(Waiver(entry["id"], entry["reason"], entry["tracking"], expires))
    return out


@dataclass
class Diff:
    warnings: list[str] = field(default_factory=list)
    """What makes the comparison weaker (another spec, profile or environment), printed first."""
    new_failures: list[CaseResult] = field(default_factory=list)
    """Failing now, passing or absent in the baseline, and not waived: the gate fails."""
    waived: list[tuple[CaseResult, Waiver]] = field(default_factory=list)
    """Results an unexpired waiver excuses (failing, no longer passing or missing), with it: shown, not gated."""
    known_failures: list[CaseResult] = field(default_factory=list)
    """Failing in both reports."""
    fixed: list[CaseResult] = field(default_factory=list)
    """Failing in the baseline and passing now."""
    missing: list[str] = field(default_factory=list)
    """Check ids in the baseline and not in the new report: the gate fails."""
    added: list[str] = field(default_factory=list)
    """Check ids in the new report and not in the baseline (a larger profile or new clauses)."""
    regressions: list[dict] = field(default_factory=list)
    """Timings past the threshold, slower than the baseline's."""
    improvements: list[dict] = field(default_factory=list)
    """Timings past the threshold, faster than the baseline's."""
    expired_waivers: list[Waiver] = field(default_factory=list)
    """Waivers past their expiry date: they no longer excuse a failure."""
    unmatched_waivers: list[Waiver] = field(default_factory=list)
    """Waivers that match no failing check (stale: the failure is gone or renamed)."""
    no_longer_passing: list[tuple[CaseResult, CaseResult]] = field(default_factory=list)
    """(baseline, now) of each result that passed in the baseline and now is neither PASS nor a failure."""
    not_run: list[str] = field(default_factory=list)
    """Mandatory checks the new verdict lists as not run, and the baseline's does not."""
    dropped_claims: list[str] = field(default_factory=list)
    """Ops, or dtypes of one, the baseline's manifest claimed and the new one does not: the gate fails."""
    lost_timings: list[dict] = field(default_factory=list)
    """Measurements with a median time in the baseline and none now."""
    changed: list[tuple[CaseResult, CaseResult]] = field(default_factory=list)
    """Other moves between categories (neither a regression nor a fix): shown, not gated."""

    @property
    def failed(self) -> bool:
        return bool(
            self.new_failures or self.missing or self.regressions or self.no_longer_passing or self.not_run
            or self.dropped_claims or self.lost_timings
        )  # fmt: skip


def _by_id(report: Mapping[str, Any], which: str) -> dict[str, CaseResult]:
    try:
        return {r.id: r for r in records(report["results"])}
    except (ValueError, TypeError) as exc:
        raise DiffError(f"{which} report: {exc}") from None


def diff(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    waivers: list[Waiver] = (),
    today: dt.date | None = None,
) -> Diff:
    today = today or dt.date.today()
    old, new = read_report(old), read_report(new)  # a baseline of a previous format too
    out = Diff()
    if old["spec"]["digest"] != new["spec"]["digest"]:
        out.warnings.append(
            f"spec changed: {old['spec']['digest'][:12]} -> {new['spec']['digest'][:12]}; results are compared by check id, "
            "and checks the new spec added or dropped are listed below"
        )
    if old["spec"]["profile"] != new["spec"]["profile"]:
        out.warnings.append(f"profile changed: {old['spec']['profile']} -> {new['spec']['profile']}")
    if old["backend"]["name"] != new["backend"]["name"]:
        out.warnings.append(f"different backends: {old['backend']['name']} -> {new['backend']['name']}")
    if old["backend"].get("version") != new["backend"].get("version"):
        out.warnings.append(f"backend version {old['backend'].get('version')} -> {new['backend'].get('version')}")
    env_keys = ("cpu", "cpu_count", "torch", "python")
    if any(old["environment"].get(k) != new["environment"].get(k) for k in env_keys):
        out.warnings.append("different machine or libraries: performance ratios compare across environments")

    before = _by_id(old, "baseline")
    after = _by_id(new, "new")
    live = [w for w in waivers if w.expires >= today]
    out.expired_waivers = [w for w in waivers if w.expires < today]
    used: set[int] = set()

    def waived(r: CaseResult) -> bool:
        waiver = next((w for w in live if w.matches(r.id)), None)
        if waiver is not None:
            out.waived.append((r, waiver))
            used.add(id(waiver))
        return waiver is not None

    for rid, r in sorted(after.items()):
        previous = before.get(rid)
        was_failing = previous is not None and previous.category.is_failure
        if r.category.is_failure:
            if was_failing:
                out.known_failures.append(r)
            elif not waived(r):
                out.new_failures.append(r)
        elif r.category is Category.PASS:
            if was_failing:
                out.fixed.append(r)
            elif previous is not None and previous.category is not Category.PASS:
                out.changed.append((previous, r))  # e.g. NOT_SUPPORTED -> PASS: newly supported
        elif previous is not None and previous.category is Category.PASS:
            if not waived(r):
                out.no_longer_passing.append((previous, r))
        elif previous is not None and previous.category is not r.category:
            out.changed.append((previous, r))
    out.missing = [rid for rid in sorted(set(before) - set(after)) if not waived(before[rid])]
    out.added = sorted(set(after) - set(before))
    # A mandatory check the new verdict lists as not run, and the baseline's did not: a regression
    # unless a result listed above (missing, no longer passing, waived) already tells it.
    told_ids = (set(before) - set(after)) | {r.id for _, r in out.no_longer_passing} | {r.id for r, _ in out.waived}
    told = {key for rid in told_ids if rid in before for key in _verdict_keys(before[rid])}
    newly = set(new["verdict"].get("not_run", ())) - set(old["verdict"].get("not_run", ()))
    if old["spec"]["profile"] != new["spec"]["profile"]:
        newly = set()  # another profile mandates other checks (said at the top); results are still compared
    out.not_run = sorted(e for e in newly if e not in told and not any(w.matches(e) for w in live))
    out.dropped_claims = dropped_claims(old["backend"].get("claims") or {}, new["backend"].get("claims") or {})

    for rid, r in sorted(after.items()):
        previous = before.get(rid)
        if previous is None:
            continue
        new_median = r.timings.get("median_ms")
        old_median = previous.timings.get("median_ms")
        if old_median and not new_median:
            if r.category is Category.PASS and not waived(r):
                out.lost_timings.append({"id": rid, "old_ms": old_median, "category": r.category.value})
            continue  # a result that stopped passing is already listed as such
        if r.runner != "backend" or not new_median or not old_median:
            continue
        ratio = new_median / old_median
        entry = {"id": rid, "old_ms": old_median, "new_ms": new_median, "ratio": ratio}
        if ratio > threshold:
            out.regressions.append(entry)
        elif ratio < 1 / threshold:
            out.improvements.append(entry)
    out.unmatched_waivers = [w for w in live if id(w) not in used]
    return out


def _verdict_keys(r: CaseResult) -> set[str]:
    """How a verdict's ``not_run`` may name ``r``'s check (conformance.report.model.verdict)."""
    return {r.id, r.clause or "", f"{r.clause} {r.model}", f"NUM {r.op} {r.dtype}"}


def dropped_claims(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What the baseline's manifest claimed (op -> dtypes, or "*" for every dtype) that the new one
    does not: an op, or the dtypes of one."""
    out = []
    for op, was in sorted(old.items()):
        now = new.get(op)
        if now is None:
            out.append(op)
        elif was == now or now == "*":
            continue
        elif was == "*":
            out.append(f"{op} (every dtype -> {', '.join(now)})")
        elif lost := [d for d in was if d not in now]:
            out.append(f"{op} {', '.join(lost)}")
    return out


def render(d: Diff, threshold: float = DEFAULT_THRESHOLD) -> str:
    lines = []
    for w in d.warnings:
        lines.append(f"WARNING: {w}")
    outcome = "REGRESSED" if d.failed else "NO REGRESSION"
    lines.append(
        f"{outcome}: {len(d.new_failures)} new failure(s), {len(d.no_longer_passing)} result(s) no longer passing, "
        f"{len(d.missing)} missing result(s), {len(d.not_run)} mandatory check(s) newly not run, {len(d.dropped_claims)} claim(s) dropped, "
        f"{len(d.regressions)} performance regression(s) beyond {threshold:g}x, {len(d.lost_timings)} measurement(s) without timings; "
        f"{len(d.fixed)} fixed, {len(d.known_failures)} known failure(s), {len(d.waived)} waived"
    )
    missing = [f"{rid}: in the baseline, not in the new report" for rid in d.missing[:MISSING_SHOWN]]
    if len(d.missing) > MISSING_SHOWN:
        missing.append(f"... and {len(d.missing) - MISSING_SHOWN} more")
    sections = (
        ("NEW FAILURE", [f"{r.id}: {r.category.value}: {r.message[:200]}" for r in d.new_failures]),
        (
            "NO LONGER PASSES",
            [f"{r.id}: {was.category.value} -> {r.category.value}: {r.message[:200]}" for was, r in d.no_longer_passing],
        ),
        ("NOT RUN", [f"{entry}: mandatory, not run (the baseline ran it)" for entry in d.not_run]),
        ("CLAIM DROPPED", d.dropped_claims),
        (
            "NO TIMINGS",
            [f"{e['id']}: {e['old_ms']:.3f} ms in the baseline, no timing now ({e['category']})" for e in d.lost_timings],
        ),
        ("MISSING", missing),
        ("SLOWER", [_timing(e) for e in d.regressions]),
        ("FIXED", [r.id for r in d.fixed]),
        ("CHANGED", [f"{r.id}: {was.category.value} -> {r.category.value}" for was, r in d.changed]),
        ("WAIVED", [f"{r.id} until {w.expires} ({w.reason}; {w.tracking})" for r, w in d.waived]),
        (
            "EXPIRED WAIVER",
            [f"{w.id} expired {w.expires} ({w.tracking}): it no longer waives anything" for w in d.expired_waivers],
        ),
        ("UNMATCHED WAIVER", [f"{w.id} ({w.tracking}): matches no regression; remove it" for w in d.unmatched_waivers]),
        ("FASTER", [_timing(e) for e in d.improvements]),
        ("NEW CHECKS", [f"{len(d.added)}: {', '.join(d.added[:10])}"] if d.added else []),
    )
    lines += [f"  {label:12s} {entry}" for label, entries in sections for entry in entries]
    return "\n".join(lines)


def _timing(e: Mapping[str, Any]) -> str:
    """A timing that changed past the threshold: its check, the baseline's and the new milliseconds, the ratio."""
    return f"{e['id']}: {e['old_ms']:.3f} ms -> {e['new_ms']:.3f} ms ({e['ratio']:.2f}x)"
