"""A failing NUM check runs its remaining cases and reports its failures by kind (DESIGN 0, 2026-11-27).

The backends here have two defects on one op, so they do not fit tests/seeded/defects.py (one
defect each): ``maximum`` drops NaN (``fmax``: maximum(NaN, 1) is 1) and fails at execute on an
empty operand. The check's verdict stays its first failure (category, message, replayed example);
its ``failures`` name both kinds with counts, and show that cases ran after the first.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conformance import replay
from conformance.report import safe
from conformance.report.model import load_report
from conformance.results import CaseResult, FailureKind, FailureSummary, KindCount
from reference_backend import ReferenceRuntime, backend_under_test
from reference_backend.kernels import KERNELS
from reference_backend.kernels._dtypes import result_type

OP = "aten.maximum.default"
CHECK = f"test_NUM_001_matches_reference[{OP}|float32]"
SLEEP_S = 0.5
"""Per execute of the slow variant: its uncut check would outlast the short timeout below."""


def _maximum_two_defects(self, other):
    if np.size(self) == 0 or np.size(other) == 0:
        raise ValueError("empty tensors are not supported")
    return np.fmax(self, other).astype(result_type(self, other))


def _slow_maximum_two_defects(self, other):
    time.sleep(SLEEP_S)
    return _maximum_two_defects(self, other)


def _backend(name: str, kernel):
    table = dict(KERNELS)
    table[OP] = kernel
    reference = backend_under_test()
    return type(reference)(
        name=name, details=reference.details, runtime=ReferenceRuntime(kernels=table), version="test",
        manifest=reference.manifest, description="maximum drops NaN and fails on an empty operand",
    )  # fmt: skip


two_defects = _backend("two-defects", _maximum_two_defects)
slow_two_defects = _backend("slow-two-defects", _slow_maximum_two_defects)


def _certify(name: str, out: Path, *extra: str) -> tuple[dict, Path]:
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "certify", f"{__file__}:{name}", "--profile", "seeded", "--ops", OP,
         "--output", str(out), "--workers", "0", "--skip-perf", *extra, "--", "-k", "test_NUM_001 and float32"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    (report,) = out.glob("*/report.json")
    results = {r["id"]: r for r in load_report(report)["results"]}
    return results[CHECK], report.parent


def _outcome(failures: FailureSummary, outcome: str) -> FailureKind:
    found = [o for o in failures.outcomes if o.outcome == outcome]
    assert found, f"no {outcome!r} among {[o.outcome for o in failures.outcomes]}: {failures.summary}"
    return found[0]


def _kind(outcome: FailureKind, kind: str) -> KindCount:
    found = [k for k in outcome.kinds if k.kind == kind]
    assert found, f"{outcome.outcome}: no kind {kind!r} among {[k.kind for k in outcome.kinds]}"
    return found[0]


@pytest.mark.slow
def test_a_failing_check_reports_both_defects_by_kind_and_keeps_its_first_failure(tmp_path):
    result, where = _certify("two_defects", tmp_path)
    record = CaseResult.from_json(result)
    failures = record.failures
    assert record.category.value in ("MISMATCH", "EXECUTE_FAIL"), result
    assert failures is not None, result
    # both defects, each on every case of its kind
    nan = _kind(_outcome(failures, "NaN mismatch"), "NaN inputs")
    assert nan.failed == nan.of >= 1, failures.summary
    empty = _kind(_outcome(failures, "execute failed"), "empty")
    assert empty.failed == empty.of >= 1, failures.summary
    # cases ran after the first failure, and some of them matched
    assert failures.after_first >= 1 and failures.ran > failures.failed, failures.summary
    assert not failures.cut_short
    # the verdict is the first failure's: its message is the saved (replayed) example's
    assert record.replay and record.replay.endswith("NUM-001-aten.maximum.default-float32"), result
    saved = replay.load(where / "replays" / "NUM-001-aten.maximum.default-float32")
    assert record.message.endswith(saved.message), (record.message, saved.message)
    assert saved.call.describe() in record.message
    # the renderings name both kinds with their counts
    markdown = (where / "report.md").read_text()
    assert "### Failing cases by kind" in markdown
    row = next(line for line in markdown.splitlines() if line.startswith(f"| {OP}") and ("MISMATCH" in line or "EXECUTE_FAIL" in line))
    assert safe.markdown(f"NaN mismatch in {_outcome(failures, 'NaN mismatch').cases} (NaN inputs {nan.failed} of {nan.of}") in row, row
    assert safe.markdown(f"execute failed in {_outcome(failures, 'execute failed').cases} (empty {empty.failed} of {empty.of}") in row, row
    assert f"{failures.failed} / {failures.ran}" in row
    html = (where / "report.html").read_text()
    assert 'data-outcome="NaN mismatch"' in html and 'data-outcome="execute failed"' in html
    assert f'data-after-first="{failures.after_first}"' in html
    assert "failing cases: " in (where / "junit.xml").read_text()


@pytest.mark.slow
def test_the_budget_cuts_a_slow_failing_check_short_and_says_so(tmp_path):
    # --timeout 20: 5 s after the first failure (a quarter of it), the first failure's verdict kept
    # well before the timeout, where the whole check (some 40 executes of 0.5 s) would outlast it.
    result, _ = _certify("slow_two_defects", tmp_path, "--timeout", "20", "--hard-timeout", "60")
    record = CaseResult.from_json(result)
    assert record.category.value in ("MISMATCH", "EXECUTE_FAIL"), result
    failures = record.failures
    assert failures is not None and failures.cut_short and failures.budget_s == 5.0, result
    assert "cut short by its 5 s budget" in failures.summary
    assert record.duration_s < 20 * 0.75 + 3, result


def test_the_failure_summary_travels_through_json_and_the_schema():
    from conformance.report.model import schema

    summary = FailureSummary(
        failed=2, ran=9, after_first=7, budget_s=30.0, cut_short=False,
        outcomes=(FailureKind("NaN mismatch", 2, (KindCount("NaN inputs", 2, 2), KindCount("rank 2", 1, 5))),),
    )  # fmt: skip
    record = CaseResult(op=OP, dtype="float32", failures=summary)
    assert CaseResult.from_json(record.to_json()) == record
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator({"$defs": schema()["$defs"], "$ref": "#/$defs/result"})
    assert not list(validator.iter_errors({**record.to_json(), "clause": "NUM-001", "id": "x"}))
    assert summary.words() == "2 of 9 cases failed (7 run after the first): NaN mismatch in 2 (NaN inputs 2 of 2)"


@pytest.mark.parametrize(("timeout", "budget"), [(None, 30.0), (40, 10.0), (120, 30.0), (600, 30.0)])
def test_the_budget_is_a_quarter_of_the_timeout_at_most_thirty_seconds(timeout, budget):
    from conformance.checks._num_case import failure_budget

    assert failure_budget(timeout) == budget
