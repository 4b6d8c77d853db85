"""``verify``: a report carries its own proof, and each way of forging one is caught.

Reports are built the way a run builds them: a results document as the plugin writes it
(``tests/reports/test_html.py``), then ``python -m conformance report DIR`` in-process,
which merges it, signs it when given ``--sign KEY``, and writes report.json, report.md,
report.html and junit.xml. The forger then edits report.json the way someone
with a text editor and this package would: by hand (its results read back as records with
``read_report``, or its tables edited in place), with ``integrity_hash``, and even with
``summarize`` and ``verdict``, re-rendering the siblings so that only the check under test
stands between the forgery and a VALID. An unsigned report that holds is VALID, UNSIGNED (exit 5);
signatures are tests/reports/test_signatures.py's.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from conformance.cli import EXIT_INVALID, EXIT_STALE, EXIT_UNSIGNED, main
from conformance.report import html, junit, markdown
from conformance.report.model import integrity_hash, read_report, summarize, verdict
from conformance.report.verify import Signature, Status, verify
from tests.reports.test_html import SPECS, nan_dropped_by_max, profile_results, results_document


def certify(directory: Path, defect=None, *, digest: str | None = None, key_file: Path | None = None) -> dict:
    """report.json and its renderings in ``directory``, as ``certify`` leaves them."""
    (directory / "results").mkdir(parents=True)
    document = results_document("demo", profile_results("smoke", defect), digest=digest)
    (directory / "results" / "checks.json").write_text(json.dumps(document))
    assert main(["report", str(directory), *(["--sign", str(key_file)] if key_file else [])]) == 0
    return json.loads((directory / "report.json").read_text())


def forge(directory: Path, edit: Callable[[dict], None], *, rehash: bool = True, rerender: bool = True) -> None:
    """Edit report.json (its results as a list of records, a form the schema accepts too); then, as a
    careful forger, rehash it and re-render its siblings."""
    path = directory / "report.json"
    report = read_report(json.loads(path.read_text()))
    edit(report)
    if rehash:
        report["integrity"]["sha256"] = integrity_hash(report)
    path.write_text(json.dumps(report, indent=1))
    if rerender:
        (directory / "report.md").write_text(markdown.render(report, SPECS.clauses))
        (directory / "report.html").write_text(html.render(report, SPECS.clauses))
        (directory / "junit.xml").write_text(junit.render(report))


def run(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(list(args))
    return rc, capsys.readouterr().out


@pytest.fixture
def failing(tmp_path) -> Path:
    """A genuine report of a backend that is not certified (maximum drops NaN)."""
    certify(tmp_path / "failing", nan_dropped_by_max)
    return tmp_path / "failing"


@pytest.fixture
def passing(tmp_path) -> Path:
    certify(tmp_path / "passing")
    return tmp_path / "passing"


def test_a_genuine_report_and_its_renderings_verify(capsys, failing, passing):
    rc, out = run(capsys, "verify", str(failing / "report.json"))
    assert rc == EXIT_UNSIGNED and out.startswith("VALID, UNSIGNED: demo 1.0: not certified for profile smoke: 2 failing check(s) in NUM-001"), out
    rc, out = run(capsys, "verify", str(passing / "report.json"))
    assert rc == EXIT_UNSIGNED and "VALID, UNSIGNED: demo 1.0: certified for profile smoke" in out, out
    sha = json.loads((passing / "report.json").read_text())["integrity"]["sha256"]
    assert markdown.embedded_hash((passing / "report.md").read_text()) == sha
    assert html.embedded_hash((passing / "report.html").read_text()) == sha
    assert junit.embedded_hash((passing / "junit.xml").read_text()) == sha


def _flip_failures(report: dict) -> None:
    for r in report["results"]:
        if r["category"] == "MISMATCH":
            r["category"] = "PASS"
            r["message"] = ""


def _certify_by_hand(report: dict) -> None:
    report["verdict"] = dict(report["verdict"], certified=True, text="certified for profile smoke", failing_clauses=[], failing_ops=[])


def _flip_and_recompute_everything_but_flags(report: dict) -> None:
    """The cleverest forgery of a backend's own results: flags off, then summary and verdict
    recomputed with this package's own functions so that they agree with the edited results."""
    for r in report["results"]:
        if r["category"] == "MISMATCH":
            r["mandatory"] = False
    report["summary"] = summarize(report["results"])
    profile = SPECS.profile("smoke")
    report["verdict"] = verdict(report["results"], profile, SPECS)


def _summary(report: dict) -> None:
    report["summary"]["mandatory"] = {"total": 2069, "passed": 2069}


def _timings(report: dict) -> None:
    perf = next(r for r in report["results"] if r.get("timings"))
    perf["timings"]["median_ms"] /= 10


def _hypothesis_profile(report: dict) -> None:
    report["run"]["hypothesis_profile"] = "thorough"


def _duration(report: dict) -> None:
    report["results"][0]["duration_s"] = 0.0


def _environment(report: dict) -> None:
    report["environment"]["cpu"] = "a faster machine"


def _drop_failures(report: dict) -> None:
    report["results"] = [r for r in report["results"] if r["category"] != "MISMATCH"]


def _unknown_category(report: dict) -> None:
    report["results"][0]["category"] = "MOSTLY_FINE"


def _rename(report: dict) -> None:
    failing = next(r for r in report["results"] if r["category"] == "MISMATCH")
    failing["id"] = "test_NUM_001_matches_reference[aten.add.Tensor|float32]"  # a check that passed in the baseline


FORGERIES = {
    # name: (edit, rehash, exit code, what the finding says)
    "failure flipped to pass, rehashed": (_flip_failures, True, EXIT_INVALID, "verdict does not follow from the results"),
    "failure flipped, not rehashed": (_flip_failures, False, EXIT_INVALID, "integrity hash mismatch"),
    "verdict certified by hand, rehashed": (_certify_by_hand, True, EXIT_INVALID, "verdict.certified says true, the results give false"),
    "mandatory flags cleared, summary and verdict recomputed, rehashed": (
        _flip_and_recompute_everything_but_flags, True, EXIT_INVALID, "carry a mandatory flag the spec does not give"),
    "summary 2069/2069, rehashed": (_summary, True, EXIT_INVALID, "summary.mandatory says"),
    "summary 2069/2069, not rehashed": (_summary, False, EXIT_INVALID, "integrity hash mismatch"),
    "timings edited": (_timings, False, EXIT_INVALID, "integrity hash mismatch"),
    "a duration edited": (_duration, False, EXIT_INVALID, "integrity hash mismatch"),
    "hypothesis profile edited": (_hypothesis_profile, False, EXIT_INVALID, "integrity hash mismatch"),
    "environment edited": (_environment, False, EXIT_INVALID, "integrity hash mismatch"),
    "failing results dropped, rehashed": (_drop_failures, True, EXIT_INVALID, "summary.total says"),
    "unknown category, rehashed": (_unknown_category, True, EXIT_INVALID, "'MOSTLY_FINE' is not one of"),
    "failing result renamed to a passing check's id, rehashed": (_rename, True, EXIT_INVALID, "appear more than once"),
    "spec digest zeroed, not rehashed": (lambda r: r["spec"].update(digest="0" * 64), False, EXIT_STALE, "certified against spec 000000000000"),
    "spec digest zeroed, rehashed": (lambda r: r["spec"].update(digest="0" * 64), True, EXIT_STALE, "certified against spec 000000000000"),
    "harness version edited, rehashed": (lambda r: r["harness"].update(version="9.9"), True, EXIT_STALE, "made by torch-backend-conformance 9.9"),
}


@pytest.mark.parametrize("name", FORGERIES)
def test_a_forged_report_is_rejected(capsys, failing, name):
    edit, rehash, code, finding = FORGERIES[name]
    forge(failing, edit, rehash=rehash, rerender=edit is not _unknown_category)  # no renderer shows an unknown category
    rc, out = run(capsys, "verify", str(failing / "report.json"))
    assert rc == code, out
    assert finding in out, out
    assert "VALID," not in out


def test_a_zeroed_spec_digest_without_rehash_is_invalid_even_when_stale_reports_are_allowed(capsys, failing):
    forge(failing, lambda r: r["spec"].update(digest="0" * 64), rehash=False)
    rc, out = run(capsys, "verify", "--allow-stale", str(failing / "report.json"))
    assert rc == EXIT_INVALID and "integrity hash mismatch" in out, out


def test_a_stale_report_that_claims_a_certification_its_flags_deny_is_invalid(capsys, failing):
    """Under another spec the verdict cannot be recomputed, but the report must still agree with itself."""
    forge(failing, lambda r: (r["spec"].update(digest="0" * 64), _certify_by_hand(r)))
    rc, out = run(capsys, "verify", "--allow-stale", str(failing / "report.json"))
    assert rc == EXIT_INVALID and "the verdict says certified, but 2 mandatory result(s) did not pass" in out, out


@pytest.mark.slow
@pytest.mark.parametrize("sibling", ["report.md", "report.html", "junit.xml"])
def test_a_rendering_of_another_report_is_caught_and_named(capsys, failing, passing, sibling):
    shutil.copyfile(passing / sibling, failing / sibling)  # the certified run's page beside the failing run's report
    rc, out = run(capsys, "verify", str(failing / "report.json"))
    assert rc == EXIT_INVALID, out
    [finding] = [line for line in out.splitlines() if line.startswith("INVALID")]
    assert str(failing / sibling) in finding and "shows another report" in finding
    (failing / sibling).write_text("rendered by hand\n")
    rc, out = run(capsys, "verify", str(failing / "report.json"))
    assert rc == EXIT_INVALID and f"{failing / sibling} names no report integrity hash" in out, out
    (failing / sibling).unlink()  # absent renderings are fine: report.json is the record
    assert run(capsys, "verify", str(failing / "report.json"))[0] == EXIT_UNSIGNED


def test_a_report_of_another_spec_is_stale_unless_allowed(capsys, tmp_path):
    certify(tmp_path / "old", digest="a" * 64)  # a genuine run of a harness with another spec
    path = str(tmp_path / "old" / "report.json")
    rc, out = run(capsys, "verify", path)
    assert rc == EXIT_STALE and "certified against spec aaaaaaaaaaaa" in out and "--allow-stale" in out, out
    rc, out = run(capsys, "verify", "--allow-stale", path)
    assert rc == EXIT_UNSIGNED and out.startswith("VALID, VERDICT NOT RECOMPUTED, UNSIGNED: demo 1.0"), out
    assert "note: verdict not recomputed: the report was certified against spec aaaaaaaaaaaa" in out


def test_a_file_that_is_not_a_report(capsys, tmp_path):
    (tmp_path / "report.json").write_text("[1, 2")
    rc, out = run(capsys, "verify", str(tmp_path / "report.json"))
    assert rc == EXIT_INVALID and "not JSON" in out
    (tmp_path / "report.json").write_text("[1, 2]")
    assert run(capsys, "verify", str(tmp_path / "report.json"))[0] == EXIT_INVALID
    assert main(["verify", str(tmp_path / "absent.json")]) == 2


def test_the_api_returns_a_structured_outcome(failing):
    report = json.loads((failing / "report.json").read_text())
    outcome = verify(report)
    assert outcome.status is Status.VALID and outcome.ok and outcome.problems == () and outcome.signature is Signature.UNSIGNED
    report = read_report(report)
    assert verify(report).status is Status.VALID, "the records read back verify as the file does"
    report["results"][0]["message"] = "edited"
    outcome = verify(report)
    assert outcome.status is Status.INVALID and not outcome.ok
    assert [p.split(":")[0] for p in outcome.problems] == ["integrity hash mismatch"]


@pytest.mark.slow
def test_the_file_is_compact_and_an_edit_of_its_tables_is_caught(capsys, failing):
    """report.json is one line of compact JSON, its results tables; the hash covers the records they
    hold, so an edited shared text (one entry of ``texts``, which many results may point at) or a
    category edited in a row is a mismatch, and tables that do not read back are a schema problem."""
    path = failing / "report.json"
    text = path.read_text()
    document = json.loads(text)
    assert text == json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True) + "\n", "compact, keys sorted"
    assert document["schema"] == "torch-backend-conformance/report/2" and set(document["results"]) == {"paths", "texts", "tables"}
    records = read_report(document)["results"]
    assert [r["id"] for r in records] == sorted(r["id"] for r in records)

    edited = json.loads(text)
    edited["results"]["texts"][0] += " (edited)"
    path.write_text(json.dumps(edited))
    rc, out = run(capsys, "verify", str(path))
    assert rc == EXIT_INVALID and "integrity hash mismatch" in out, out

    edited = json.loads(text)
    category = edited["results"]["paths"].index(["category"])
    mismatch = next(t for t in edited["results"]["tables"] if [category, "MISMATCH"] in t.get("constant", ()))
    mismatch["constant"][mismatch["constant"].index([category, "MISMATCH"])][1] = "PASS"  # the failures, in one place
    path.write_text(json.dumps(edited))
    rc, out = run(capsys, "verify", str(path))
    assert rc == EXIT_INVALID and "integrity hash mismatch" in out, out

    edited = json.loads(text)
    edited["results"]["tables"][0]["rows"][0].append("one value too many")
    path.write_text(json.dumps(edited))
    rc, out = run(capsys, "verify", str(path))
    assert rc == EXIT_INVALID and "INVALID" in out and "table 0, row 0" in out, out
