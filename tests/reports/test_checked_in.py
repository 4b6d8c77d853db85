"""The reports checked in under reports/ are whole and honest: each verifies against this harness.

The reference's and torch-eager's reports must be current (same spec digest and harness version,
hash and renderings intact, verdict recomputed): they are cheap to regenerate (`nox -s certify --
reference`, `nox -s certify -- torch-eager`) and torch-eager's is the proof that a backend equal to
eager certifies. A real backend's report may be stale after a spec change (its regeneration takes
about an hour, `nox -s certify_real`): it must still verify with its staleness stated (schema, hash,
renderings; the verdict not recomputed), and reports/README.md lists which are stale.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.report.verify import Status, verify_file

ROOT = Path(__file__).resolve().parents[2] / "reports"
REPORTS = sorted([*ROOT.glob("*/report.json"), *ROOT.glob("*/*/report.json")])
"""Each backend's own profile (reports/BACKEND/) and the models and quantized profiles (reports/PROFILE/BACKEND/)."""


def test_every_backend_has_a_checked_in_report():
    assert {p.parent.name for p in REPORTS} >= {
        "reference", "torch-eager", "executorch-xnnpack", "executorch-portable", "torch-lazy-ts", "torch-aoti",
        "torchscript-backend-with-compiler-demo", "torchscript-test-backend",
    }  # fmt: skip
    for profile in ("models", "quantized"):  # noxfile.PROFILE_REPORTS
        assert {p.parent.name for p in REPORTS if p.parent.parent.name == profile} >= {"reference", "executorch-xnnpack", "executorch-portable"}


CURRENT = {"reference", "torch-eager"}
"""Backends whose own report (reports/BACKEND/) must be current."""


@pytest.mark.parametrize("path", REPORTS, ids=[str(p.parent.relative_to(ROOT)) for p in REPORTS])
def test_checked_in_report_is_valid(path):
    current = path.parent.name in CURRENT and path.parent.parent == ROOT
    outcome = verify_file(path, allow_stale=not current)
    allowed = {Status.VALID} if current else {Status.VALID, Status.UNCHECKED}
    assert outcome.status in allowed, f"{path.parent.name}: {outcome.status.value}: {outcome.problems}; regenerate it"


def test_reports_readme_names_every_stale_report():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    stale = [str(p.parent.relative_to(ROOT)) for p in REPORTS if verify_file(p).status is Status.STALE]
    missing = [name for name in stale if f"`{name}`" not in readme]
    assert not missing, f"reports/README.md does not list these stale reports: {missing}"
