"""The regression gate (verified reports only), the schema, and sharded runs merged."""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import __version__, specs
from conformance.cli import EXIT_INVALID, EXIT_NOT_CERTIFIED, EXIT_OK, EXIT_REGRESSED, EXIT_STALE, main
from conformance.report import build_report
from conformance.report.diff import MISSING_SHOWN, DiffError, Waiver, WaiverError, diff, load_waivers
from conformance.report.model import RESULTS_SCHEMA, integrity_hash, load_report, result_id, stable_hash, validate
from tests.seeded_proof import group

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "conformance", *args], cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True
    )


def _document(results, *, backend="demo", version="1", digest=None, profile="smoke", claims=None):
    spec = specs.load()
    return {
        "schema": RESULTS_SCHEMA,
        "harness": {"name": "torch-backend-conformance", "version": __version__},
        "spec": {"digest": digest or spec.digest, "profile": profile},
        "backend": {"name": backend, "version": version, **({"claims": claims} if claims is not None else {})},
        "environment": {"python": "3.11", "torch": "2.13.0", "numpy": "2", "ml_dtypes": "0.6", "cpu": "cpu", "cpu_count": 2, "os": "Linux"},
        "run": {"tag": "checks", "hypothesis_profile": "ci", "started": "2026-01-01T00:00:00+00:00", "finished": "2026-01-01T00:01:00+00:00", "command": "x"},
        "results": results,
    }


def _result(test, category="PASS", clause="RT-002", **extra):
    record = {"clause": clause, "category": category, "message": "", "test": test, **extra}
    return {"id": result_id(record), **record}  # as the plugin writes it


def _report(results, **kw):
    return build_report([_document(results, **kw)], specs.load())


BASE = [
    _result("test_RT_002[mlp]"),
    _result("test_NUM_001", clause="NUM-001", op="aten.add.Tensor", dtype="float32"),
    _result("test_NUM_001", "MISMATCH", clause="NUM-001", op="aten.mul.Tensor", dtype="float32"),
    _result("test_PERF_003", clause="PERF-003", runner="backend", program="mlp", stage="execute", timings={"median_ms": 1.0}),
]


def test_report_matches_its_schema_and_the_schema_catches_damage():
    report = _report(BASE)
    assert validate(report) == []
    broken = copy.deepcopy(report)
    del broken["verdict"]
    broken["results"][0]["category"] = "FINE"
    problems = validate(broken)
    assert any("verdict" in p for p in problems) and any("FINE" in p for p in problems)


def test_diff_of_a_run_against_itself_is_clean():
    report = _report(BASE)
    d = diff(report, report)
    assert not d.failed and d.known_failures and not d.new_failures and not d.regressions


def test_new_failures_fixed_results_and_known_failures_are_told_apart():
    old = _report(BASE)
    new_results = copy.deepcopy(BASE)
    new_results[0]["category"] = "CONTRACT_VIOLATION"  # new
    new_results[2]["category"] = "PASS"  # fixed
    d = diff(old, _report(new_results))
    assert [r.id for r in d.new_failures] == ["test_RT_002[mlp]"]
    assert [r.id for r in d.fixed] == ["test_NUM_001[aten.mul.Tensor|float32]"]
    assert d.failed


@pytest.mark.parametrize("category", ["NOT_SUPPORTED", "SKIP", "HARNESS_ERROR", "XFAIL", "NOT_APPLICABLE", "TIMEOUT"])
def test_every_move_away_from_pass_is_a_regression(category):
    old = _report(BASE)
    new_results = copy.deepcopy(BASE)
    new_results[1]["category"] = category  # add float32 passed in the baseline
    d = diff(old, _report(new_results))
    moved = [r.id for _, r in d.no_longer_passing] + [r.id for r in d.new_failures]
    assert moved == ["test_NUM_001[aten.add.Tensor|float32]"] and d.failed


def test_a_dropped_claim_a_mandatory_check_not_run_and_lost_timings_are_regressions():
    old = _report(BASE, claims={"aten.add.Tensor": "*", "aten.relu.default": ["float32", "int32"], "aten.mul.Tensor": "*"})
    new = _report(BASE, claims={"aten.add.Tensor": "*", "aten.relu.default": ["float32"]})
    assert diff(old, new).dropped_claims == ["aten.mul.Tensor", "aten.relu.default int32"]
    untimed = copy.deepcopy(BASE)
    del untimed[3]["timings"]
    d = diff(old, _report(untimed, claims=old["backend"]["claims"]))
    assert [e["id"] for e in d.lost_timings] == ["test_PERF_003[mlp|backend|execute]"] and d.failed
    narrower = copy.deepcopy(old)
    narrower["verdict"]["not_run"] = [*old["verdict"]["not_run"], "RT-002"]  # ran in the baseline
    assert diff(old, narrower).not_run == ["RT-002"]


def test_performance_regression_past_the_threshold():
    old = _report(BASE)
    slower = copy.deepcopy(BASE)
    slower[3]["timings"] = {"median_ms": 1.3}
    assert [e["id"] for e in diff(old, _report(slower)).regressions] == ["test_PERF_003[mlp|backend|execute]"]
    assert not diff(old, _report(slower), threshold=1.5).regressions
    slower[3]["timings"] = {"median_ms": 1.2}
    assert not diff(old, _report(slower)).failed  # 1.2x is under the default 1.25x


def test_waivers_cover_new_failures_until_they_expire_and_unmatched_ones_are_reported():
    old = _report(BASE)
    new_results = copy.deepcopy(BASE)
    new_results[0]["category"] = "MISMATCH"
    new = _report(new_results)
    today = dt.date(2026, 6, 1)
    live = Waiver("test_RT_002*", "vendor bug", "https://tracker/1", dt.date(2026, 7, 1))
    stale = Waiver("test_RT_002[mlp]", "old", "https://tracker/2", dt.date(2026, 1, 1))
    unused = Waiver("test_REG_001", "nothing fails there", "https://tracker/3", dt.date(2026, 7, 1))
    d = diff(old, new, waivers=[live, stale, unused], today=today)
    assert not d.failed and [w.id for _, w in d.waived] == ["test_RT_002*"]
    assert d.expired_waivers == [stale] and d.unmatched_waivers == [unused]
    d = diff(old, new, waivers=[stale], today=today)
    assert d.failed, "an expired waiver must not waive"


def test_waiver_files_need_every_field(tmp_path):
    good = tmp_path / "w.toml"
    good.write_text('[[waiver]]\nid = "x"\nreason = "r"\ntracking = "https://t/1"\nexpires = 2027-01-01\n')
    assert load_waivers(good)[0].expires == dt.date(2027, 1, 1)
    bad = tmp_path / "bad.toml"
    bad.write_text('[[waiver]]\nid = "x"\nreason = "r"\n')
    with pytest.raises(WaiverError, match="tracking"):
        load_waivers(bad)


def test_changed_spec_profile_and_backend_are_reported():
    old = _report(BASE)
    new = copy.deepcopy(old)
    new["spec"]["digest"] = "f" * 64
    new["spec"]["profile"] = "full"
    new["backend"]["name"] = "other"
    warnings = " ".join(diff(old, new).warnings)
    assert "spec changed" in warnings and "profile changed" in warnings and "different backends" in warnings


def _write(path: Path, report: dict) -> str:
    path.write_text(json.dumps(report))
    return str(path)


def gate(capsys, old: dict, new: dict, tmp_path: Path, *options: str) -> tuple[int, str]:
    """``diff OLD NEW`` in-process: exit code and what it printed."""
    capsys.readouterr()
    rc = main(["diff", _write(tmp_path / "old.json", old), _write(tmp_path / "new.json", new), *options])
    return rc, capsys.readouterr().out


def test_diff_command_verifies_then_compares(capsys, tmp_path):
    old = _report(BASE)
    assert gate(capsys, old, old, tmp_path)[0] == EXIT_OK
    worse = copy.deepcopy(BASE)
    worse[0]["category"] = "CRASH"
    rc, out = gate(capsys, old, _report(worse), tmp_path)
    assert rc == EXIT_REGRESSED and "NEW FAILURE  test_RT_002[mlp]: CRASH" in out


def test_results_missing_from_the_new_report_are_a_regression(capsys, tmp_path):
    baseline = _report(BASE + [_result(f"test_RT_00{i}[mlp]", clause=f"RT-00{i}") for i in range(3, 9)])
    rc, out = gate(capsys, baseline, _report(BASE), tmp_path)
    assert rc == EXIT_REGRESSED, out
    missing = [line.split()[1] for line in out.splitlines() if line.strip().startswith("MISSING")]
    assert missing == [f"test_RT_00{i}[mlp]:" for i in range(3, 9)]
    assert "REGRESSED: 0 new failure(s), 0 result(s) no longer passing, 6 missing result(s)" in out
    # a live waiver covers a check dropped on purpose, and says so
    waivers = tmp_path / "w.toml"
    waivers.write_text('[[waiver]]\nid = "test_RT_00*"\nreason = "dropped"\ntracking = "https://t/1"\nexpires = 2999-01-01\n')
    rc, out = gate(capsys, baseline, _report(BASE), tmp_path, "--waivers", str(waivers))
    assert rc == EXIT_OK and out.count("WAIVED") == 6, out


def test_a_long_list_of_missing_results_is_cut_but_counted():
    baseline = _report(BASE + [_result(f"test_RT_002[p{i:03d}]") for i in range(MISSING_SHOWN + 7)])
    d = diff(baseline, _report(BASE))
    assert d.failed and len(d.missing) == MISSING_SHOWN + 7
    from conformance.report.diff import render

    assert "... and 7 more" in render(d)


@pytest.mark.slow
def test_a_crash_edited_to_pass_without_rehashing_is_an_invalid_report(capsys, tmp_path):
    crashed = copy.deepcopy(BASE)
    crashed[0]["category"] = "CRASH"
    old, new = _report(crashed), _report(crashed)
    next(r for r in new["results"] if r["category"] == "CRASH")["category"] = "PASS"  # "fixed", by hand
    rc, out = gate(capsys, old, new, tmp_path)
    assert rc == EXIT_INVALID, out
    assert "INVALID: new report" in out and "new.json" in out and "integrity hash mismatch" in out
    assert "FIXED" not in out, "an invalid report is never compared"
    rc, out = gate(capsys, new, old, tmp_path)  # the same forgery as the baseline
    assert rc == EXIT_INVALID and "INVALID: baseline" in out and "old.json" in out


def test_an_unknown_category_is_an_invalid_report_not_a_traceback(capsys, tmp_path):
    old = _report(BASE)
    new = copy.deepcopy(old)
    new["results"][0]["category"] = "MOSTLY_FINE"
    new["integrity"]["sha256"] = integrity_hash(new)
    rc, out = gate(capsys, old, new, tmp_path)
    assert rc == EXIT_INVALID and "MOSTLY_FINE" in out, out
    with pytest.raises(DiffError, match="MOSTLY_FINE"):  # diff() alone says which report, not a KeyError
        diff(old, new)


@pytest.mark.slow
def test_reports_of_different_specs_or_profiles_cannot_be_compared(capsys, tmp_path):
    old = _report(BASE)
    other_spec = _report(BASE, digest="e" * 64)
    rc, out = gate(capsys, old, other_spec, tmp_path)
    assert rc == EXIT_STALE and "STALE: new report" in out and "eeeeeeeeeeee" in out, out
    rc, out = gate(capsys, old, other_spec, tmp_path, "--allow-stale")
    assert rc == EXIT_OK and "WARNING: spec changed" in out, out
    assert "note: new report: verdict not recomputed: the report was certified against spec eeeeeeeeeeee" in out
    other_profile = _report(BASE, profile="full")
    rc, out = gate(capsys, old, other_profile, tmp_path)
    assert rc == EXIT_STALE and "CANNOT COMPARE" in out and "profile smoke -> full" in out, out
    rc, out = gate(capsys, old, other_profile, tmp_path, "--allow-stale")
    assert rc == EXIT_OK and "WARNING: profile changed: smoke -> full" in out, out
@pytest.mark.slow
@group("seeded-nan-dropped-by-max")
def test_diff_command_exits_zero_against_itself_and_one_on_a_seeded_defect(certified, tmp_path):
    reference = tmp_path / "reference.json"
    defect = tmp_path / "defect.json"
    reference.write_text(json.dumps(certified["reference"]))
    defect.write_text(json.dumps(certified["seeded-nan-dropped-by-max"]))
    assert cli("diff", str(reference), str(reference)).returncode == 0
    done = cli("diff", str(reference), str(defect))
    assert done.returncode == EXIT_REGRESSED
    assert "NEW FAILURE  test_NUM_001_matches_reference[aten.maximum.default|float32]" in done.stdout


SELECTION = "REG_00 or RT_002 or RT_003 or (NUM and add)"


@pytest.mark.slow
def test_a_sharded_run_merged_equals_the_unsharded_one(tmp_path):
    whole, shards = tmp_path / "whole", tmp_path / "shards"
    common = ["--profile", "smoke", "--workers", "1", "--skip-perf", "-k", SELECTION]
    assert cli("certify", "reference", "--output", str(whole), *common).returncode == 1  # partial: not certified
    for i in (1, 2):
        cli("certify", "reference", "--output", str(shards), "--shard", f"{i}/2", *common)
    parts = sorted((shards / "reference" / "results").glob("*.json"))
    assert len(parts) == 2
    merged_dir = tmp_path / "merged"
    cli("merge", str(merged_dir), *map(str, parts))
    a = load_report(whole / "reference" / "report.json")
    b = load_report(merged_dir / "report.json")
    assert [r["id"] for r in a["results"]] == [r["id"] for r in b["results"]]
    assert a["verdict"] == b["verdict"]
    assert stable_hash(a) == stable_hash(b), "identical results compare equal (timings, parts and timestamps excluded)"
    assert len(a["results"]) > 8


@pytest.mark.slow
def test_certify_with_a_baseline_catches_a_backend_that_sleeps_in_execute(tmp_path):
    backend = "tests/seeded/defects.py:sleepy"
    common = ["--profile", "smoke", "--workers", "1", "-k", "PERF_003 and mlp and backend"]
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    cli("certify", backend, "--output", str(fast), *common, env={"CONFORMANCE_TEST_SLEEP_MS": "0"})
    baseline = next(fast.glob("*/report.json"))
    done = cli(
        "certify", backend, "--output", str(slow), "--baseline", str(baseline), *common,
        env={"CONFORMANCE_TEST_SLEEP_MS": "50"},  # 50 ms on a ~0.1 ms execute: far past any load noise
    )
    assert done.returncode == EXIT_REGRESSED, done.stdout[-3000:]
    assert "SLOWER       test_PERF_003_execute_latency[mlp|backend|execute]" in done.stdout
    again = cli(  # a generous threshold: this asserts the gate's logic, not this machine's timing noise
        "certify", backend, "--output", str(slow), "--baseline", str(baseline), "--threshold", "10", *common,
        env={"CONFORMANCE_TEST_SLEEP_MS": "0"},
    )
    # No regression: the gate passes; -k left the contract checks out, so the verdict (printed, and
    # never replaced by the gate's outcome) is not certified.
    assert again.returncode == EXIT_NOT_CERTIFIED, again.stdout[-3000:]
    assert "NO REGRESSION" in again.stdout and "NOT CERTIFIED" in again.stdout
