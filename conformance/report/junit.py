"""report.json -> JUnit XML, so any CI shows the results natively. A pure function.

One <testsuite> per clause family; one <testcase> per result, classname
``conformance.<family>.<clause>``. Failures of the backend are <failure>, and so is
a clean refusal (NOT_SUPPORTED) of a check the profile makes mandatory: it keeps the
backend from being certified. Inconclusive results (harness or reference at fault)
are <error>; results that did not run, or were refused cleanly and are not
mandatory, are <skipped> with their category. A result's message is said once: the
``message`` attribute holds it (up to ``MESSAGE_LIMIT`` characters); the element's text
holds only what the attribute lacks (the rest of a longer message, the error statistics,
the failing cases by kind, the replay command). An op x dtype check the backend refused on
every draw says its refusal (``markdown.refusal``: its op and dtype are the test case's name). A last suite, ``<backend>.VERDICT``,
holds one testcase, the certification itself, failed when the run is not certified,
so a CI test view agrees with the exit code. Every suite carries the verdict, the
profile, the spec digest and the report's integrity hash as properties.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any
from xml.etree import ElementTree as ET

from conformance.report import safe
from conformance.report.document import read_report
from conformance.report.markdown import refusal, refused_entirely
from conformance.report.model import records
from conformance.results import FAILURES, INCONCLUSIVE, CaseResult, Category

_SKIPPED = {Category.NOT_SUPPORTED, Category.NOT_APPLICABLE, Category.SKIP, Category.XFAIL}
INTEGRITY_PROPERTY = "conformance.report.sha256"
"""A property of every <testsuite>: which report.json this rendering shows (``verify`` compares them)."""
VERDICT_SUITE = "VERDICT"
MESSAGE_LIMIT = 500
"""Characters of a message in the ``message`` attribute; the rest goes in the element's text."""


def _properties(parent, report: Mapping[str, Any], integrity: str) -> None:
    verdict = report.get("verdict") or {}
    properties = ET.SubElement(parent, "properties")
    for name, value in (
        (INTEGRITY_PROPERTY, integrity),
        ("conformance.certified", str(bool(verdict.get("certified"))).lower()),
        ("conformance.verdict", safe.plain(verdict.get("text") or "")),
        ("conformance.profile", safe.plain(verdict.get("profile") or (report.get("spec") or {}).get("profile") or "")),
        ("conformance.spec.digest", str((report.get("spec") or {}).get("digest") or "")),
        ("conformance.harness.version", str((report.get("harness") or {}).get("version") or "")),
    ):
        ET.SubElement(properties, "property", name=name, value=value)


def render(report: Mapping[str, Any]) -> str:
    report = read_report(report)
    backend = safe.plain(report["backend"]["name"])
    integrity = str((report.get("integrity") or {}).get("sha256", ""))
    suites = ET.Element("testsuites", name=f"conformance {backend}")
    by_family: dict[str, list[CaseResult]] = defaultdict(list)
    for r in records(report["results"]):
        by_family[r.family or "OTHER"].append(r)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for family in sorted(by_family):
        results = by_family[family]
        suite = ET.SubElement(suites, "testsuite", name=f"{backend}.{family}")
        _properties(suite, report, integrity)
        counts = {"tests": len(results), "failures": 0, "errors": 0, "skipped": 0}
        time_total = 0.0
        for r in results:
            category = r.category
            duration = float(r.duration_s or 0.0)
            time_total += duration
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"conformance.{family}.{r.clause or 'none'}",
                name=r.id,
                time=f"{duration:.3f}",
            )
            if category is Category.NOT_SUPPORTED and r.mandatory:
                counts["failures"] += 1
                _outcome(case, "failure", r, "mandatory and not supported: ")
            elif category in FAILURES:
                counts["failures"] += 1
                _outcome(case, "failure", r)
            elif category in INCONCLUSIVE:
                counts["errors"] += 1
                _outcome(case, "error", r)
            elif category in _SKIPPED:
                counts["skipped"] += 1
                _outcome(case, "skipped", r, f"{category.value}: ")
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", f"{time_total:.3f}")
    verdict = report.get("verdict") or {}
    suite = ET.SubElement(suites, "testsuite", name=f"{backend}.{VERDICT_SUITE}", tests="1", time="0.000")
    _properties(suite, report, integrity)
    case = ET.SubElement(suite, "testcase", classname=f"conformance.{VERDICT_SUITE}", name=f"certified for profile {verdict.get('profile', '?')}", time="0.000")
    failed = not verdict.get("certified")
    if failed:
        node = ET.SubElement(case, "failure", type="NOT_CERTIFIED", message=safe.plain(verdict.get("text") or "")[:500])
        node.text = _verdict_details(verdict)
    suite.set("failures", "1" if failed else "0")
    suite.set("errors", "0")
    suite.set("skipped", "0")
    totals["tests"] += 1
    totals["failures"] += int(failed)
    for key, value in totals.items():
        suites.set(key, str(value))
    ET.indent(suites)
    return safe.xml(ET.tostring(suites, encoding="unicode", xml_declaration=True)) + "\n"


def embedded_hash(text: str) -> str | None:
    """The integrity sha256 the properties name (None when none does, or when they disagree)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return None
    found = {p.get("value") for p in root.iter("property") if p.get("name") == INTEGRITY_PROPERTY}
    return found.pop() if len(found) == 1 else None


def _verdict_details(verdict: Mapping[str, Any]) -> str:
    lines = [safe.plain(verdict.get("text") or "")]
    for key, label in (("failing", "failing"), ("unsupported", "mandatory, not supported"), ("inconclusive", "inconclusive"), ("not_run", "not run")):
        items = list(verdict.get(key) or ())
        if items:
            lines.append(f"{label} ({len(items)}): {', '.join(items[:40])}{' ...' if len(items) > 40 else ''}")
    return "\n".join(safe.plain(line) for line in lines)


def _outcome(case, tag: str, r: CaseResult, lead: str = "") -> None:
    """The <failure>, <error> or <skipped> of ``r``: its message once, in the attribute, and as text
    only what the attribute lacks (``_details``)."""
    entry = r.to_json()
    message = lead + safe.plain(refusal(entry, mask=False) if refused_entirely(entry) else r.message)
    node = ET.SubElement(case, tag, type=r.category.value, message=message[:MESSAGE_LIMIT])
    rest = message[MESSAGE_LIMIT:]
    details = _details(r) if tag != "skipped" else ""
    text = "\n".join(part for part in (f"... {rest}" if rest else "", details) if part)
    if text:
        node.text = text


def _details(r: CaseResult) -> str:
    """What a failure's attribute and its test case's name (the check and its parameters) do not
    say: the stage it failed in, the error statistics, the failing cases by kind, the replay command."""
    lines = [f"failed in: {r.failed_stage}"] if r.failed_stage else []
    for key in ("max_abs", "max_ulp", "mae", "snr_db", "worst_index", "expected_at_worst", "actual_at_worst"):
        if key in r.stats:
            lines.append(f"{key}: {r.stats[key]}")
    if r.failures is not None:
        lines.append(f"failing cases: {r.failures.summary}")
    if r.replay:
        lines.append(f"replay: {r.replay}")
    return "\n".join(lines)
