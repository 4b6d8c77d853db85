"""The reports checked in under reports/ are current: each verifies against this harness (same
spec digest and harness version, hash and renderings intact, verdict recomputed). A change to the
spec or the harness that changes what a report says fails here until the reports are regenerated
(`nox -s certify -- reference` for the reference; `nox -s certify_real` for the real backends)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.report.verify import Status, verify_file

ROOT = Path(__file__).resolve().parents[2] / "reports"
REPORTS = sorted([*ROOT.glob("*/report.json"), *ROOT.glob("*/*/report.json")])
"""Each backend's own profile (reports/BACKEND/) and the models and quantized profiles (reports/PROFILE/BACKEND/)."""


def test_every_backend_has_a_checked_in_report():
    assert {p.parent.name for p in REPORTS} >= {
        "reference", "executorch-xnnpack", "executorch-portable", "torch-lazy-ts", "torch-aoti",
        "torchscript-backend-with-compiler-demo", "torchscript-test-backend",
    }  # fmt: skip
    for profile in ("models", "quantized"):  # noxfile.PROFILE_REPORTS
        assert {p.parent.name for p in REPORTS if p.parent.parent.name == profile} >= {"reference", "executorch-xnnpack", "executorch-portable"}


@pytest.mark.parametrize("path", REPORTS, ids=[str(p.parent.relative_to(ROOT)) for p in REPORTS])
def test_checked_in_report_is_current_and_valid(path):
    outcome = verify_file(path)
    assert outcome.status is Status.VALID, f"{path.parent.name}: {outcome.status.value}: {outcome.problems}; regenerate it"
