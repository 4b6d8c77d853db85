"""The one record: CaseResult is what the shipped JSON Schema describes, field for field."""

from __future__ import annotations

import json

import pytest

from conformance.report.model import records, schema
from conformance.results import CaseResult, Category


def test_the_shipped_schema_describes_exactly_the_record():
    shipped = schema()["$defs"]
    assert shipped["category"] == {"enum": [c.value for c in Category]}
    # On failure: paste this into conformance/report/report.schema.json's $defs.result.
    assert shipped["result"] == CaseResult.json_schema(), json.dumps(CaseResult.json_schema(), indent=2)


def test_a_record_goes_to_json_and_back_unchanged():
    record = CaseResult(Category.MISMATCH, "NUM-001", id="t[aten.add.Tensor|float32]", op="aten.add.Tensor", dtype="float32",
                        message="off by one", stats={"max_abs": 1.0}, replay="python -m conformance replay x", nodeid="n", backend="b")
    assert CaseResult.from_json(record.to_json(transport=True)) == record
    report_form = record.to_json()
    assert "nodeid" not in report_form and "backend" not in report_form
    assert records([report_form])[0].category is Category.MISMATCH


def test_an_unknown_field_or_category_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown field.*colour"):
        CaseResult.from_json({"id": "x", "clause": None, "category": "PASS", "colour": "red"})
    with pytest.raises(ValueError, match="BROKEN"):
        CaseResult.from_json({"id": "x", "clause": None, "category": "BROKEN"})
    with pytest.raises(TypeError, match="no field 'catgory'"):
        CaseResult().update(catgory="PASS")


def test_certify_offers_exactly_the_registered_hypothesis_profiles():
    from hypothesis import settings

    from conformance.run.invocation import HYPOTHESIS_PROFILES
    from conformance.strategies import profiles

    profiles.register()
    for name in HYPOTHESIS_PROFILES:
        settings.get_profile(name)  # raises for a profile nobody registered
    registered = {name for name in settings._profiles if not name.startswith("hypothesis-") and name != "default"}
    assert registered == set(HYPOTHESIS_PROFILES)
