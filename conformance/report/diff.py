"""The regression gate: what changed between a baseline report and a new one.

    python -m conformance diff OLD.json NEW.json [--waivers waivers.toml] [--threshold 1.25]

The baseline is the list of expected failures: a result failing in both is
*known* and does not fail the gate. The gate fails (exit 1) on a *new* failure
(failing now, not failing in the baseline), on a *missing* result (in the
baseline, absent now: a check that no longer runs proves nothing), unless a live
waiver covers it, or on a performance regression: the backend's median time of a
PERF measurement grew by more than the threshold (default 1.25x).

A waiver names a result id (or a prefix ending in ``*``), a reason, a tracking
link and an expiry date. An expired waiver no longer waives and is reported;
one that matches no new failure or missing result is reported as unmatched. A
different spec digest, profile, backend or machine is reported at the top, never
silently compared. The command verifies both reports before it compares them,
and refuses reports of different specs or profiles (``conformance.cli._gate``);
``diff`` itself compares whatever it is given.
"""

from __future__ import annotations

import datetime as dt
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.report.model import records
from conformance.results import CaseResult

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
    new_failures: list[CaseResult] = field(default_factory=list)
    waived: list[tuple[CaseResult, Waiver]] = field(default_factory=list)
    known_failures: list[CaseResult] = field(default_factory=list)
    fixed: list[CaseResult] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    regressions: list[dict] = field(default_factory=list)
    improvements: list[dict] = field(default_factory=list)
    expired_waivers: list[Waiver] = field(default_factory=list)
    unmatched_waivers: list[Waiver] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.new_failures or self.missing or self.regressions)


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
        was_failing = rid in before and before[rid].category.is_failure
        if r.category.is_failure:
            if was_failing:
                out.known_failures.append(r)
            elif not waived(r):
                out.new_failures.append(r)
        elif was_failing:
            out.fixed.append(r)
    out.missing = [rid for rid in sorted(set(before) - set(after)) if not waived(before[rid])]
    out.unmatched_waivers = [w for w in live if id(w) not in used]
    out.added = sorted(set(after) - set(before))

    for rid, r in sorted(after.items()):
        previous = before.get(rid)
        if r.runner != "backend" or previous is None:
            continue
        new_median = r.timings.get("median_ms")
        old_median = previous.timings.get("median_ms")
        if not new_median or not old_median:
            continue
        ratio = new_median / old_median
        entry = {"id": rid, "old_ms": old_median, "new_ms": new_median, "ratio": ratio}
        if ratio > threshold:
            out.regressions.append(entry)
        elif ratio < 1 / threshold:
            out.improvements.append(entry)
    return out


def render(d: Diff, threshold: float = DEFAULT_THRESHOLD) -> str:
    lines = []
    for w in d.warnings:
        lines.append(f"WARNING: {w}")
    verdict = "REGRESSED" if d.failed else "OK"
    lines.append(
        f"{verdict}: {len(d.new_failures)} new failure(s), {len(d.missing)} missing result(s), {len(d.regressions)} performance "
        f"regression(s) beyond {threshold:g}x, {len(d.fixed)} fixed, {len(d.known_failures)} known failure(s), {len(d.waived)} waived"
    )
    for r in d.new_failures:
        lines.append(f"  NEW FAILURE  {r.id}: {r.category.value}: {r.message[:200]}")
    for rid in d.missing[:MISSING_SHOWN]:
        lines.append(f"  MISSING      {rid}: in the baseline, not in the new report")
    if len(d.missing) > MISSING_SHOWN:
        lines.append(f"  MISSING      ... and {len(d.missing) - MISSING_SHOWN} more")
    for e in d.regressions:
        lines.append(f"  SLOWER       {e['id']}: {e['old_ms']:.3f} ms -> {e['new_ms']:.3f} ms ({e['ratio']:.2f}x)")
    for r in d.fixed:
        lines.append(f"  FIXED        {r.id}")
    for r, w in d.waived:
        lines.append(f"  WAIVED       {r.id} until {w.expires} ({w.reason}; {w.tracking})")
    for w in d.expired_waivers:
        lines.append(f"  EXPIRED WAIVER {w.id} expired {w.expires} ({w.tracking}): it no longer waives anything")
    for w in d.unmatched_waivers:
        lines.append(f"  UNMATCHED WAIVER {w.id} ({w.tracking}): matches no new failure or missing result; remove it")
    for e in d.improvements:
        lines.append(f"  FASTER       {e['id']}: {e['old_ms']:.3f} ms -> {e['new_ms']:.3f} ms ({e['ratio']:.2f}x)")
    if d.added:
        lines.append(f"  NEW CHECKS   {len(d.added)}: {', '.join(d.added[:10])}")
    return "\n".join(lines)
