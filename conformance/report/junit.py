"""report.json -> JUnit XML, so any CI shows the results natively. A pure function.

One <testsuite> per clause family; one <testcase> per result, classname
``conformance.<family>.<clause>``. Failures of the backend are <failure>,
inconclusive results (harness or reference at fault) are <error>, and results
that did not run or were refused cleanly are <skipped> with their category.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any
from xml.etree import ElementTree as ET

from conformance.report import safe
from conformance.results import FAILURES, INCONCLUSIVE, Category

_SKIPPED = {Category.NOT_SUPPORTED, Category.NOT_APPLICABLE, Category.SKIP, Category.XFAIL}
INTEGRITY_PROPERTY = "conformance.report.sha256"
"""A property of every <testsuite>: which report.json this rendering shows (``verify`` compares them)."""


def render(report: Mapping[str, Any]) -> str:
    backend = report["backend"]["name"]
    integrity = str((report.get("integrity") or {}).get("sha256", ""))
    suites = ET.Element("testsuites", name=f"conformance {backend}")
    by_family: dict[str, list[dict]] = defaultdict(list)
    for r in report["results"]:
        by_family[(r.get("clause") or "OTHER").split("-")[0]].append(r)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for family in sorted(by_family):
        results = by_family[family]
        suite = ET.SubElement(suites, "testsuite", name=f"{backend}.{family}")
        properties = ET.SubElement(suite, "properties")
        ET.SubElement(properties, "property", name=INTEGRITY_PROPERTY, value=integrity)
        counts = {"tests": len(results), "failures": 0, "errors": 0, "skipped": 0}
        time_total = 0.0
        for r in results:
            category = Category(r["category"])
            duration = float(r.get("duration_s") or 0.0)
            time_total += duration
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"conformance.{family}.{r.get('clause') or 'none'}",
                name=r["id"],
                time=f"{duration:.3f}",
            )
            message = safe.plain(r.get("message") or "")
            if category in FAILURES:
                counts["failures"] += 1
                node = ET.SubElement(case, "failure", type=category.value, message=message[:500])
                node.text = _details(r)
            elif category in INCONCLUSIVE:
                counts["errors"] += 1
                node = ET.SubElement(case, "error", type=category.value, message=message[:500])
                node.text = _details(r)
            elif category in _SKIPPED:
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", type=category.value, message=f"{category.value}: {message}"[:500])
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", f"{time_total:.3f}")
    if not by_family:  # no suite to carry the property: the root carries it
        ET.SubElement(ET.SubElement(suites, "properties"), "property", name=INTEGRITY_PROPERTY, value=integrity)
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


def _details(r: Mapping[str, Any]) -> str:
    lines = [safe.plain(r.get("message") or "")]
    for key in ("op", "dtype", "program", "stage"):
        if r.get(key):
            lines.append(f"{key}: {r[key]}")
    stats = r.get("stats") or {}
    for key in ("max_abs", "max_ulp", "mae", "snr_db", "worst_index", "expected_at_worst", "actual_at_worst"):
        if key in stats:
            lines.append(f"{key}: {stats[key]}")
    if r.get("replay"):
        lines.append(f"replay: {r['replay']}")
    return "\n".join(lines)
