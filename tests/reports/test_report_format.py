"""report.json's results as tables (``conformance.results.tabulate_results``): they read back as the
records they were made from, each field named once, a shared text written once, and a table that
does not read back is refused by name."""

from __future__ import annotations

import json

import pytest

from conformance.report.model import REPORT_SCHEMA, build_report, read_report, report_text, validate
from conformance.results import REFUSAL_LEAD, listed_results, result_id, tabulate_results, untabulate_results
from tests.reports.test_html import SPECS, profile_results, results_document

REASON = "correctly rounded in IEEE arithmetic (op spec exact = true): bit for bit"
REFUSED_FIRST = "[edge values] preprocess refused: NotSupported (0x10): the node of prim::ListConstruct is not supported"


def num(op: str, dtype: str, category: str = "PASS", **fields) -> dict:
    record = {"test": "test_NUM_001_matches_reference", "clause": "NUM-001", "op": op, "dtype": dtype, "category": category,
              "mandatory": True, "duration_s": 0.25, **fields}  # fmt: skip
    record["id"] = result_id(record)
    return record


def refused(op: str, dtype: str, summary: str = "refused 3 of 3 draws: always rank 4 (3 of 3)") -> dict:
    stats = {"claimed": False, "compared": 0, "refused": 3, "refusal_summary": summary, "refusals": {"rank 4": 3}}
    message = REFUSAL_LEAD.format(op=op, dtype=dtype, summary=summary) + REFUSED_FIRST
    return num(op, dtype, "NOT_SUPPORTED", message=message, stats=stats)


def passed(op: str, dtype: str) -> dict:
    stats = {"max_ulp": 0.0, "tolerance_reason": REASON, "tolerance_source": f"op spec {op}", "layouts": {"offset": 2, "transposed": 2},
             "edge_cases": {"empty": 1, "values": 2}, "refusals": {}, "shape": [2, 3], "snr_db": "inf"}  # fmt: skip
    return num(op, dtype, stats=stats)


RECORDS = sorted(
    [passed("aten.add.Tensor", d) for d in ("float16", "float32", "int32")]
    + [refused(op, d) for op in ("aten.cat.default", "aten.stack.default") for d in ("float32", "int64")]
    + [{"test": "test_RT_002_round_trip", "clause": "RT-002", "category": "EXECUTE_FAIL", "mandatory": True, "message": "execute failed",
        "id": "a check whose id is its own"}]  # fmt: skip
    + [{"clause": None, "category": "HARNESS_ERROR", "mandatory": False, "id": "test_collect[x]", "message": "import failed"}],
    key=lambda r: r["id"],
)


def test_the_tables_read_back_as_the_records_and_name_each_field_and_shared_text_once():
    records = RECORDS
    block = tabulate_results(records)
    assert untabulate_results(json.loads(json.dumps(block))) == records
    text = json.dumps(block)
    assert text.count(REASON) == 1 and text.count(REFUSED_FIRST) == 1, "a text many results share, once"
    assert text.count('"tolerance_reason"') == 1 and text.count('"max_ulp"') == 1, "each field named once"
    assert "aten.cat.default float32: refused" not in text, "a refusal's message is its record's lead and the shared refusal"
    assert "test_NUM_001_matches_reference[" not in text, "an id its check and parameters give is left out"
    assert "a check whose id is its own" in text, "one they do not give is kept"
    assert listed_results(block) == records and listed_results(records) == records


@pytest.mark.parametrize(
    ("damage", "finding"),
    [
        (lambda b: b["tables"][0]["rows"][0].append(1), "table 0, row 0: 2 values for 1 fields"),
        (lambda b: b["tables"][0]["fields"].append(10_000), "table 0 is malformed"),
        (lambda b: b["tables"][0].update(text_fields=[0]) or b["tables"][0]["rows"][0].__setitem__(0, 99), "refers to no text"),
        (lambda b: b.pop("paths"), "lists of paths, texts and tables"),
    ],
)
def test_a_table_that_does_not_read_back_is_refused_by_name(damage, finding):
    block = tabulate_results([{"id": "x", "clause": None, "category": "PASS", "mandatory": False}, {"id": "y", "clause": None, "category": "SKIP", "mandatory": False}])
    block["tables"] = [{"fields": [block["paths"].index(["id"])], "rows": [["x"]]}]
    damage(block)
    with pytest.raises(ValueError, match=finding):
        untabulate_results(block)


def test_report_json_is_compact_sorted_and_reads_back_with_a_valid_schema():
    report = build_report([results_document("demo", profile_results("smoke"))], SPECS)
    assert report["schema"] == REPORT_SCHEMA and not validate(report)
    text = report_text(report)
    document = json.loads(text)
    assert text == json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True) + "\n"
    assert not validate(document)
    assert read_report(document) == json.loads(json.dumps(report))
    assert read_report(report) is report, "a report already read is taken as it is"


def test_results_out_of_id_order_are_refused_rather_than_written_otherwise():
    report = build_report([results_document("demo", profile_results("smoke"))], SPECS)
    report["results"] = list(reversed(report["results"]))
    with pytest.raises(ValueError, match="id order"):
        report_text(report)
