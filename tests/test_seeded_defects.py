"""The harness proves itself: every seeded defect is caught, in its own clause, and nothing else.

Certification runs of the reference and every backend of tests/seeded/defects.py
under the ``seeded`` profile, in pytest-xdist workers with a short timeout, as a
user's run would (tests/seeded_proof.py deals them into a few runs, each its own
xdist group). Then, per backend:

- the clauses the defect must break come out failing (with the expected
  category for the crashing and hanging ones);
- no other clause fails, except in the families the defect is allowed to touch;
- nothing is inconclusive (a harness error would hide a defect);
- every check produced a result, so a crash or a hang cost one result, not the run;
- the reference passes everything and is certified.
"""

from __future__ import annotations

import pytest

from conformance.results import INCONCLUSIVE, Category
from tests.seeded_proof import DEFECTS, VARIANTS, group

pytestmark = pytest.mark.slow  # each test reads a certify run of a chunk of the seeded backends


def _failing(report) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in report["results"]:
        if Category(r["category"]).is_failure:
            out.setdefault(r["clause"], []).append(r)
    return out


@group("reference")
def test_reference_passes_everything(certified):
    report = certified["reference"]
    # Clauses of the other families (torchscript's, lazy's) are NOT_APPLICABLE, with the reason.
    bad = [
        (r["id"], r["category"], r.get("message", ""))
        for r in report["results"]
        if r["category"] != Category.PASS.value
        and not (r["category"] == Category.NOT_APPLICABLE.value and "is a delegate backend" in r.get("message", ""))
    ]
    assert not bad, bad
    assert report["verdict"]["certified"], report["verdict"]


@pytest.mark.parametrize("name", [pytest.param(n, marks=group(VARIANTS[n].name)) for n in sorted(VARIANTS)])
def test_correct_variant_certifies(certified, name):
    """A backend that computes what PyTorch computes by another legitimate route (another summation
    order, a wider accumulator) passes every check: the derived bounds fail no order."""
    report = certified[VARIANTS[name].name]
    bad = [
        (r["id"], r["category"], r.get("message", "")[:300])
        for r in report["results"]
        if r["category"] != Category.PASS.value
        and not (r["category"] == Category.NOT_APPLICABLE.value and "is a delegate backend" in r.get("message", ""))
    ]
    assert not bad, bad
    assert report["verdict"]["certified"], report["verdict"]


def test_there_are_at_least_thirty_defects_over_every_family():
    families = {d.must_fail[0].split("-")[0] for d in DEFECTS.values()}
    assert len(DEFECTS) >= 30
    assert {"PRE", "RT", "REG", "DBG", "NUM"} <= families


@pytest.mark.parametrize("name", [pytest.param(n, marks=group(DEFECTS[n].backend.name)) for n in sorted(DEFECTS)])
def test_defect_is_caught_in_its_clause_and_nowhere_else(certified, name):
    defect = DEFECTS[name]
    backend = defect.backend.name
    assert backend in certified, f"no results for {backend}"
    report = certified[backend]
    failing = _failing(report)
    missed = [c for c in defect.must_fail if c not in failing]
    assert not missed, f"{name}: the harness did not flag {missed}; failures: {sorted(failing)}"
    allowed = set(defect.must_fail) | set(defect.may_fail)
    stray = [c for c in failing if c not in allowed and c.split("-")[0] not in allowed]
    assert not stray, f"{name}: unexpected failures {[(r['id'], r['message'][:200]) for c in stray for r in failing[c]]}"
    if defect.categories:
        got = {r["category"] for c in defect.must_fail for r in failing[c]}
        assert got <= set(defect.categories), f"{name}: flagged as {got}, expected {defect.categories}"
    inconclusive = [(r["id"], r.get("message", "")) for r in report["results"] if Category(r["category"]) in INCONCLUSIVE]
    assert not inconclusive, f"{name}: harness-side results hide what the backend did: {inconclusive}"
    assert not report["verdict"]["certified"]


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=group(d.backend.name)) for n, d in sorted(DEFECTS.items()) if {"CRASH", "TIMEOUT"} & set(d.categories)],
)
def test_a_crash_or_hang_costs_one_result_not_the_run(certified, name):
    report = certified[DEFECTS[name].backend.name]
    reference_ids = {r["id"] for r in certified["reference"]["results"]}
    assert {r["id"] for r in report["results"]} == reference_ids, "some checks produced no result"
    lost = [r for r in report["results"] if r["category"] in (Category.CRASH.value, Category.TIMEOUT.value)]
    assert len(lost) == 1, [(r["id"], r["category"]) for r in lost]
