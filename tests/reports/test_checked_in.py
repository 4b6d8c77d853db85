"""Checked-in reports: the golden report is whole and current; reports/ is readable and verifies.

A certification of a real backend takes up to an hour, so a change of the spec must not wait for
reports/ to be regenerated. Each report there names the spec it was certified under (its spec
digest); under another spec it is *stale*: it must still verify with its staleness stated
(schema, integrity hash, renderings, summary and verdict consistent with its own results, the
verdict not recomputed), and it must be in this harness's report format (``report --rerender``
brings one of a previous format up without certifying again). reports/ holds report.json,
report.md, report.html and junit.xml per backend and nothing else the repository tracks, at most
10 MB in all.

What the harness does end to end is held to a small golden report instead,
tests/reports/golden/report-2/reference: the reference certified for tests/reports/golden/profile.toml
(two contract clauses, two operators in two dtypes: a minute). It is certified again here and
must give the same checks with the same categories, a report that verifies as VALID under this
spec; the checked-in one verifies too (VALID while its spec is this one, stale after a spec
change, which needs no regeneration). golden/report-1/reference is the same run written by the
harness before report/2 (results as a list of records, ``stats.layouts`` one name per run): a
report of the previous format is still read, verified, compared and re-rendered.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import specs as spec_module
from conformance.cli import main
from conformance.report import scoreboard
from conformance.report.diff import diff
from conformance.report.model import PREVIOUS_REPORT_SCHEMAS, REPORT_SCHEMA, load_report, read_report
from conformance.report.verify import Status, verify_file

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "reports"
CHECKED_IN = sorted([*REPORTS.glob("*/report.json"), *REPORTS.glob("*/*/report.json")])
"""Each backend's own profile (reports/BACKEND/) and the models and quantized profiles (reports/PROFILE/BACKEND/)."""
GOLDEN = Path(__file__).resolve().parent / "golden"
CURRENT = GOLDEN / "report-2" / "reference"
PREVIOUS = GOLDEN / "report-1" / "reference"
SPECS = spec_module.load()


def test_every_backend_has_a_checked_in_report():
    assert {p.parent.name for p in CHECKED_IN} >= {
        "reference", "torch-eager", "executorch-xnnpack", "executorch-portable", "torch-lazy-ts", "torch-aoti",
        "torchscript-backend-with-compiler-demo", "torchscript-test-backend",
    }  # fmt: skip
    for profile in ("models", "quantized"):  # noxfile.PROFILE_REPORTS
        assert {p.parent.name for p in CHECKED_IN if p.parent.parent.name == profile} >= {"reference", "executorch-xnnpack", "executorch-portable"}


@pytest.mark.slow
@pytest.mark.parametrize("path", CHECKED_IN, ids=[str(p.parent.relative_to(REPORTS)) for p in CHECKED_IN])
def test_checked_in_report_verifies_and_says_whether_it_is_stale(path):
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["schema"] == REPORT_SCHEMA, f"{path}: {document['schema']}; bring it up: python -m conformance report --rerender {path.parent}"
    outcome = verify_file(path, allow_stale=True)
    stale = document["spec"]["digest"] != SPECS.digest
    assert outcome.status is (Status.UNCHECKED if stale else Status.VALID), f"{path.parent.name}: {outcome.status.value}: {outcome.problems}"
    if stale:
        assert verify_file(path).status is Status.STALE
        assert any("verdict not recomputed" in note for note in outcome.notes), outcome.notes


BUDGET_BYTES = 10_000_000
"""What reports/ may hold in all (issue 29: replays, results and logs are build output, not committed)."""
RENDERINGS = {"report.json", "report.md", "report.html", "junit.xml"}
BUILD_OUTPUT = {"results", "replays", "logs"}


def _tracked() -> list[Path]:
    """The files of reports/ git tracks (a run of one's own into reports/ is not the repository's)."""
    try:
        done = subprocess.run(["git", "ls-files", "-z", "reports"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout: which files of reports/ are the repository's is git's to say")
    return [ROOT / name for name in done.stdout.split("\0") if name]


def test_reports_holds_only_the_four_files_per_backend_within_its_budget():
    files = _tracked()
    assert not [p for p in files if BUILD_OUTPUT & set(p.relative_to(REPORTS).parts)], "build output is not committed"
    extra = [str(p.relative_to(REPORTS)) for p in files if p.name not in RENDERINGS and p.parent != REPORTS]
    assert not extra, f"only {sorted(RENDERINGS)} per backend: {extra}"
    top = {p.name for p in files if p.parent == REPORTS}
    assert top <= {"README.md", "scoreboard.md", "scoreboard.html"}, top
    size = sum(p.stat().st_size for p in files)
    assert size <= BUDGET_BYTES, f"reports/ holds {size / 1e6:.1f} MB, over its {BUDGET_BYTES / 1e6:.0f} MB"


def test_the_golden_report_verifies():
    path = CURRENT / "report.json"
    outcome = verify_file(path, allow_stale=True)
    if json.loads(path.read_text())["spec"]["digest"] == SPECS.digest:
        assert outcome.status is Status.VALID, outcome.problems
    else:  # the spec changed since it was made: still whole, verdict not recomputed
        assert outcome.status is Status.UNCHECKED, outcome.problems
    assert outcome.report["verdict"]["certified"]


@pytest.mark.slow
def test_the_golden_selection_certifies_again_as_it_did(tmp_path):
    """The golden profile certified now: the same checks, the same categories, VALID here."""
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "certify", "reference", "--profile", str(GOLDEN / "profile.toml"),
         "--skip-perf", "--workers", "1", "--output", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    now = tmp_path / "reference" / "report.json"
    assert main(["verify", str(now)]) == 5  # VALID, UNSIGNED
    golden, fresh = load_report(CURRENT / "report.json"), load_report(now)
    assert {r["id"]: r["category"] for r in fresh["results"]} == {r["id"]: r["category"] for r in golden["results"]}
    assert fresh["verdict"]["text"] == golden["verdict"]["text"] == "certified for profile golden"
    result = diff(golden, fresh, threshold=1e9)  # timings of another machine and load: not gated here
    assert not (result.new_failures or result.missing or result.no_longer_passing or result.dropped_claims), result


def test_a_report_of_the_previous_format_is_read_verified_compared_and_rerendered(tmp_path, capsys):
    path = PREVIOUS / "report.json"
    document = json.loads(path.read_text())
    assert document["schema"] == PREVIOUS_REPORT_SCHEMAS[0] and isinstance(document["results"], list)
    outcome = verify_file(path, allow_stale=True)
    assert outcome.status in (Status.VALID, Status.UNCHECKED), outcome.problems

    report = read_report(document)
    assert report["schema"] == REPORT_SCHEMA
    layouts = [r["stats"]["layouts"] for r in report["results"] if "layouts" in (r.get("stats") or {})]
    assert layouts and all(isinstance(found, dict) for found in layouts), "layouts read as runs per layout"
    before = next(r for r in document["results"] if r["stats"].get("layouts"))
    after = next(r for r in report["results"] if r["id"] == before["id"])
    assert sum(after["stats"]["layouts"].values()) == len(before["stats"]["layouts"])

    # the gate and the scoreboard take it beside a report of this format
    result = diff(document, load_report(CURRENT / "report.json"), threshold=1e9)
    assert not (result.new_failures or result.missing or result.no_longer_passing), result
    model = scoreboard.build([document, json.loads((CURRENT / "report.json").read_text())], SPECS.clauses)
    assert [b["counts"] for b in model["backends"]] == [{"PASS": 6}, {"PASS": 6}]

    # re-rendered from itself alone: this format, the same results and verdict, a new hash over the new form
    copy = tmp_path / "reference"
    shutil.copytree(PREVIOUS, copy)
    assert main(["report", "--rerender", str(copy)]) == 0
    assert "report/1 -> torch-backend-conformance/report/2" in capsys.readouterr().out
    rewritten = json.loads((copy / "report.json").read_text())
    assert rewritten["schema"] == REPORT_SCHEMA and set(rewritten["results"]) == {"paths", "texts", "tables"}
    assert rewritten["verdict"] == document["verdict"] and rewritten["summary"] == document["summary"]
    assert rewritten["integrity"]["results"] == document["integrity"]["results"], "the results documents it was built from"
    assert rewritten["integrity"]["sha256"] != document["integrity"]["sha256"]
    assert verify_file(copy / "report.json", allow_stale=True).status is outcome.status  # renderings and results/ agree
    assert read_report(rewritten)["results"] == report["results"]
