"""tools/same_behaviour.py, which shows a refactoring of the harness left a backend's certification as
it was: it must flag every change of category, program count, statistic and first failure, and
forgive only what is sized by speed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from conformance.report.document import REPORT_SCHEMA

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("same_behaviour", ROOT / "tools" / "same_behaviour.py")
same_behaviour = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(same_behaviour)


def _record(id_, category="PASS", message="", cut_short=False, **stats):
    record = {"id": id_, "clause": "NUM-001", "category": category, "mandatory": True, "message": message, "stats": stats}
    if cut_short:
        record["failures"] = {"cut_short": True, "failed": 2, "ran": 9}
    return record


def _write(path: Path, *records) -> str:
    path.write_text(json.dumps({"schema": REPORT_SCHEMA, "results": list(records)}))
    return str(path)


def _run(tmp_path, old, new, *args):
    return same_behaviour.main([_write(tmp_path / "old.json", *old), _write(tmp_path / "new.json", *new), *args])


def test_the_same_certification_agrees(tmp_path, capsys):
    records = [_record("a", programs=3, max_ulp=0), _record("b", "MISMATCH", "x differs", programs=1)]
    assert _run(tmp_path, records, records) == 0
    assert "checks 2, same category 2, same programs 2, same statistics 2" in capsys.readouterr().out


def test_every_kind_of_change_is_named(tmp_path, capsys):
    old = [_record("a", programs=3), _record("b", programs=2, max_ulp=0), _record("c"), _record("d")]
    new = [_record("a", "MISMATCH", programs=3), _record("b", programs=4, max_ulp=1), _record("c"), _record("e")]
    assert _run(tmp_path, old, new) == 1
    out = capsys.readouterr().out
    assert "a: category PASS -> MISMATCH" in out
    assert "b: programs 2 -> 4" in out and "b: statistics differ in max_ulp, programs" in out
    assert "only in" in out and ": d" in out and ": e" in out


def test_an_ignored_statistic_is_not_compared(tmp_path):
    assert _run(tmp_path, [_record("a", resource_cycles=424)], [_record("a", resource_cycles=1064)]) == 1
    assert _run(tmp_path, [_record("a", resource_cycles=424)], [_record("a", resource_cycles=1064)], "--ignore", "resource_cycles") == 0


def test_a_check_cut_short_by_its_budget_is_held_to_its_first_failure(tmp_path, capsys):
    old = _record("a", "MISMATCH", "[edge values] add: 64 elements differ", cut_short=True, compared=7, examples=4, max_ulp=9)
    more = _record("a", "MISMATCH", "[edge values] add: 64 elements differ", cut_short=True, compared=9, examples=6, max_ulp=9)
    assert _run(tmp_path, [old], [more]) == 0, "more cases in the same budget is speed, not behaviour"
    other = _record("a", "MISMATCH", "[random] add: 3 elements differ", cut_short=True, compared=7, examples=4, max_ulp=9)
    assert _run(tmp_path, [old], [other]) == 1
    assert "a: first failure" in capsys.readouterr().out
    worse = _record("a", "MISMATCH", "[edge values] add: 64 elements differ", cut_short=True, compared=7, examples=4, max_ulp=12)
    assert _run(tmp_path, [old], [worse]) == 1, "a statistic the budget does not size is still compared"
