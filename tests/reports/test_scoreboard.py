"""The scoreboard: the reference and seeded-defect backends side by side, in Markdown and in Chromium."""

from __future__ import annotations

import json
import re

import pytest

from conformance.report import scoreboard
from conformance.report.verify import Outcome, Status
from conformance.results import COLOURS, Category
from tests.reports.test_html import (
    PAYLOAD,
    ROOT,
    SPECS,
    _chromium,
    assert_payload_inert,
    assert_self_contained,
    dump_dom,
    keep_artifact,
    make_report,
    nan_dropped_by_max,
    parse,
    screenshot,
)

HOSTILE_NAME = "seeded-handles-share-state<script>document.title='PWNED'</script>"


def handles_share_state(r: dict) -> dict:
    """As tests/seeded/defects.py:handles_share_state comes out: RT-003 fails, with a hostile message."""
    if r.get("clause") == "RT-003":
        r["category"] = "CONTRACT_VIOLATION"
        r["message"] = "handle 1 returned handle 2's outputs " + PAYLOAD
    return r


def int_div_rounds_toward_zero(r: dict) -> dict:
    if r.get("op") == "aten.div.Tensor_mode" and r.get("dtype") == "int32":
        r["category"] = "MISMATCH"
        r["message"] = "aten.div.Tensor_mode(int32[2], int32[2], rounding_mode='floor') output 0: got -1, expected -2"
    return r


def reports() -> list[dict]:
    return [
        make_report("reference", version="0.1.0 (blob format 1)"),
        make_report("seeded-nan-dropped-by-max", nan_dropped_by_max, version="seeded"),
        make_report(HOSTILE_NAME, handles_share_state, version="seeded<img src=x onerror=alert(1)>"),
        make_report("seeded-int-div-rounds-toward-zero", int_div_rounds_toward_zero, version="seeded"),
    ]


def test_model_has_a_column_per_backend_and_the_worst_result_per_clause():
    model = scoreboard.build(reports(), SPECS.clauses)
    keys = [b["key"] for b in model["backends"]]
    assert keys == ["reference", "seeded-nan-dropped-by-max", HOSTILE_NAME, "seeded-int-div-rounds-toward-zero"]
    assert [b["certified"] for b in model["backends"]] == [True, False, False, False]
    assert model["warnings"] == [] and model["comparable"]
    assert json.loads(json.dumps(model)) == model, "the model is plain JSON"

    clauses = {row["id"]: row for row in model["clauses"]}
    assert set(clauses) >= set(SPECS.profile("smoke").clauses)
    num = clauses["NUM-001"]["cells"]
    assert num["reference"]["category"] == "PASS"
    assert num["seeded-nan-dropped-by-max"] == {
        "category": "MISMATCH",
        "counts": {"MISMATCH": 2, "PASS": 13},
        "total": 15,
        "failing": 2,
    }
    assert clauses["RT-003"]["cells"][HOSTILE_NAME]["category"] == "CONTRACT_VIOLATION"
    assert clauses["RT-003"]["title"] == SPECS.clauses["RT-003"].title

    ops = {row["op"]: row["cells"] for row in model["ops"]}
    assert ops["aten.maximum.default"]["seeded-nan-dropped-by-max"]["passed"] == 1
    assert ops["aten.maximum.default"]["seeded-nan-dropped-by-max"]["total"] == 3
    assert ops["aten.maximum.default"]["seeded-nan-dropped-by-max"]["failing_dtypes"] == ["float16", "float32"]
    assert ops["aten.div.Tensor_mode"]["seeded-int-div-rounds-toward-zero"]["category"] == "MISMATCH"
    assert all(cell["passed"] == cell["total"] == 3 for cell in (row["reference"] for row in ops.values()))


def test_different_spec_digests_are_never_mixed_silently():
    old = make_report("seeded-nan-dropped-by-max", nan_dropped_by_max, version="older", digest="0" * 64)
    model = scoreboard.build([make_report("reference"), old], SPECS.clauses)
    [warning] = [w for w in model["warnings"] if w["kind"] == "spec-digest"]
    assert "2 different specs" in warning["message"] and "000000000000" in warning["message"] and SPECS.digest[:12] in warning["message"]
    assert model["comparable"] is False
    assert set(model["spec_digests"]) == {SPECS.digest, "0" * 64}
    assert "spec-digest" in scoreboard.render_markdown(model) and "2 different specs" in scoreboard.render_markdown(model)
    dom = parse(scoreboard.render_html(model))
    assert "2 different specs" in dom.find(id="warnings").find("li", data_warning="spec-digest").text()
    assert dom.find("table", id="scoreboard").attrs["data-comparable"] == "false"

    same = scoreboard.build([make_report("reference", version="1"), make_report("reference", version="2")])
    assert [b["key"] for b in same["backends"]] == ["reference 1", "reference 2"]
    assert [w["kind"] for w in same["warnings"]] == ["duplicate-backend"]


def test_markdown_scoreboard():
    text = scoreboard.render_markdown(scoreboard.build(reports(), SPECS.clauses))
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("|") and "seeded-nan-dropped-by-max" in line)
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns[1:] == [
        "reference",
        "seeded-nan-dropped-by-max",
        "seeded-handles-share-state&lt;script&gt;document.title='PWNED'&lt;/script&gt;",
        "seeded-int-div-rounds-toward-zero",
    ]

    def row(label: str) -> list[str]:
        found = [line for line in lines if line.startswith(f"| {label}")]
        assert found, f"no row {label}"
        return [c.strip() for c in found[0].strip("|").split("|")][1:]

    assert row("verdict") == ["✅ certified", "❌ not certified", "❌ not certified", "❌ not certified"]
    num = row("NUM-001")
    assert num[0] == "✅ PASS" and num[1].startswith("❌ MISMATCH (2/15") and num[3].startswith("❌ MISMATCH (1/15")
    assert row("RT-003")[2].startswith("⚠️ CONTRACT_VIOLATION")
    assert row("aten.maximum.default") == ["✅ 3/3", "❌ 1/3 (float16, float32)", "✅ 3/3", "✅ 3/3"]
    assert row("aten.div.Tensor_mode")[3] == "❌ 2/3 (int32)"
    assert "<script>" not in text and "<img" not in text, "HTML from a backend must not reach the Markdown as markup"


@pytest.mark.slow
def test_html_scoreboard_in_chromium(tmp_path):
    model = scoreboard.build(reports(), SPECS.clauses)
    markup = scoreboard.render_html(model)
    assert_self_contained(markup)
    page = tmp_path / "scoreboard.html"
    page.write_text(markup, encoding="utf-8")
    dom = parse(dump_dom(page))
    assert_payload_inert(dom, markup)

    table = dom.find("table", id="scoreboard")
    heads = table.find("thead").find_all("th", data_backend=True)
    assert [h.attrs["data-backend"] for h in heads] == [b["key"] for b in model["backends"]]
    assert heads[2].text().startswith(HOSTILE_NAME), "the hostile name is text"
    assert heads[2].find(class_="version").text() == "seeded<img src=x onerror=alert(1)>"

    verdicts = {c.attrs["data-backend"]: c.attrs["data-certified"] for c in table.find("tr", data_row="verdict").find_all("td")}
    assert verdicts == {"reference": "true", "seeded-nan-dropped-by-max": "false", HOSTILE_NAME: "false", "seeded-int-div-rounds-toward-zero": "false"}

    def cell(**where):
        return table.find("td", **where)

    failing = {
        "seeded-nan-dropped-by-max": cell(data_backend="seeded-nan-dropped-by-max", data_op="aten.maximum.default"),
        HOSTILE_NAME: cell(data_backend=HOSTILE_NAME, data_clause="RT-003"),
        "seeded-int-div-rounds-toward-zero": cell(data_backend="seeded-int-div-rounds-toward-zero", data_op="aten.div.Tensor_mode"),
    }
    assert failing["seeded-nan-dropped-by-max"].attrs["data-category"] == "MISMATCH"
    assert failing["seeded-nan-dropped-by-max"].text().endswith("1/3")
    assert (failing["seeded-nan-dropped-by-max"].attrs["data-passed"], failing["seeded-nan-dropped-by-max"].attrs["data-total"]) == ("1", "3")
    assert failing[HOSTILE_NAME].attrs["data-category"] == "CONTRACT_VIOLATION"
    assert failing["seeded-int-div-rounds-toward-zero"].attrs["data-category"] == "MISMATCH"
    for name, node in failing.items():
        assert COLOURS[Category(node.attrs["data-category"])] in node.attrs["style"], name
    assert cell(data_backend="seeded-nan-dropped-by-max", data_clause="NUM-001").attrs["data-category"] == "MISMATCH"
    reference_cells = table.find_all("td", data_backend="reference", data_category=True)
    assert reference_cells and {c.attrs["data-category"] for c in reference_cells} == {"PASS"}
    assert not dom.find_all(id="warnings")

    keep_artifact(screenshot(page, tmp_path / "scoreboard.png", size="1200,1600"), "scoreboard.png")


def forged_summary(report: dict) -> dict:
    """A failing report whose summary claims every mandatory check passed, rehashed so the hash agrees."""
    from conformance.report.model import integrity_hash

    report["summary"]["mandatory"] = {"total": 2069, "passed": 2069}
    report["verdict"] = dict(report["verdict"], certified=True, text="certified for profile smoke", failing_clauses=[])
    report["integrity"]["sha256"] = integrity_hash(report)
    return report


def test_an_invalid_report_is_marked_and_none_of_its_numbers_are_shown():
    forged = forged_summary(make_report("seeded-nan-dropped-by-max", nan_dropped_by_max, version="seeded"))
    stale = make_report("older", version="1", digest="0" * 64)
    model = scoreboard.build([make_report("reference"), forged, stale], SPECS.clauses)
    reference, bad, old = model["backends"]
    assert (reference["validity"], bad["validity"], old["validity"]) == ("valid", "invalid", "unchecked")
    assert bad["certified"] is False and bad["state"] == "invalid" and bad["mandatory"] == {} and bad["counts"] == {}
    assert any("summary.mandatory says" in p for p in bad["problems"])
    [warning] = [w for w in model["warnings"] if w["kind"] == "invalid-report"]
    assert "seeded-nan-dropped-by-max" in warning["message"] and "verdict does not follow" in warning["message"]
    [unverified] = [w for w in model["warnings"] if w["kind"] == "unverified"]
    assert "older" in unverified["message"]
    assert all(row["cells"][bad["key"]] is None for row in model["clauses"] + model["ops"])

    text = scoreboard.render_markdown(model)
    verdict_row = next(line for line in text.splitlines() if line.startswith("| verdict"))
    assert [c.strip() for c in verdict_row.strip("|").split("|")][1:] == [
        "✅ certified", "⛔ INVALID REPORT", "✅ certified (not recomputed)"
    ]
    assert "2069" not in text.replace(warning["message"].replace("|", "\\|"), ""), "the forged numbers appear only in the warning"
    assert "invalid-report" in text

    dom = parse(scoreboard.render_html(model))
    table = dom.find("table", id="scoreboard")
    cell = table.find("td", class_="verdict", data_backend=bad["key"])
    assert cell.attrs["data-validity"] == "invalid" and "INVALID REPORT" in cell.text()
    assert cell.attrs["data-certified"] == "false"
    invalid_cells = table.find_all("td", data_backend=bad["key"], data_invalid="true")
    assert len(invalid_cells) == 1 + len(model["clauses"]) + len(model["ops"])  # mandatory, every clause and op
    assert not table.find_all("td", data_backend=bad["key"], data_category=True)
    assert dom.find(id="warnings").find("li", data_warning="invalid-report")


def test_scoreboard_command_verifies_each_report_and_warns(tmp_path, capsys):
    from conformance.cli import EXIT_INVALID, EXIT_OK, main

    good, bad = tmp_path / "reference.json", tmp_path / "forged.json"
    good.write_text(json.dumps(make_report("reference")))
    bad.write_text(json.dumps(forged_summary(make_report("seeded-nan-dropped-by-max", nan_dropped_by_max))))
    out = tmp_path / "out"
    assert main(["scoreboard", str(good), "--output", str(out)]) == EXIT_OK
    capsys.readouterr()
    assert main(["scoreboard", str(good), str(bad), "--output", str(out)]) == EXIT_INVALID
    printed = capsys.readouterr().out
    assert "WARNING: The report of seeded-nan-dropped-by-max is invalid" in printed
    assert "⛔ INVALID REPORT" in (out / "scoreboard.md").read_text()


# ---------------------------------------------------------------------------------------------
# Layout: the scoreboard of the checked-in reports, measured in Chromium at two widths

LAYOUT_PROBE = """<script>
(() => {
  // Line boxes a piece of text sits on: distinct tops of its client rects.
  function lines(range) {
    const tops = new Set();
    for (const r of range.getClientRects()) if (r.width > 0 && r.height > 0) tops.add(Math.round(r.top));
    return tops.size;
  }
  function textRange(root, wanted) {
    const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      const at = node.data.indexOf(wanted);
      if (at >= 0) { const r = document.createRange(); r.setStart(node, at); r.setEnd(node, at + wanted.length); return r; }
    }
    return null;
  }
  function clipped(el) {
    return el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1;
  }
  const table = document.getElementById('scoreboard');
  const out = {width: window.innerWidth, pageOverflows: document.documentElement.scrollWidth > window.innerWidth + 1,
               badges: [], categories: [], ops: [], ids: []};
  for (const chip of table.querySelectorAll('td.verdict .chip')) {
    const td = chip.closest('td'), c = chip.getBoundingClientRect(), t = td.getBoundingClientRect();
    const whole = document.createRange(); whole.selectNodeContents(chip);
    out.badges.push({backend: td.dataset.backend, text: chip.textContent, lines: lines(whole),
                     clipped: clipped(chip) || clipped(td) || c.left < t.left - 0.5 || c.right > t.right + 0.5});
  }
  for (const td of table.querySelectorAll('td.cell[data-clause][data-category]')) {
    const range = textRange(td, td.dataset.category);
    out.categories.push({backend: td.dataset.backend, row: td.dataset.clause, category: td.dataset.category,
                         lines: range ? lines(range) : -1, clipped: clipped(td)});
  }
  for (const td of table.querySelectorAll('td.cell[data-op][data-category]')) {  // "✓ 3/3": one line
    const whole = document.createRange(); whole.selectNodeContents(td);
    out.ops.push({backend: td.dataset.backend, row: td.dataset.op, text: td.textContent, lines: lines(whole), clipped: clipped(td)});
  }
  for (const b of table.querySelectorAll('tr[data-clause] th[scope=row] b')) {
    const whole = document.createRange(); whole.selectNodeContents(b);
    out.ids.push({id: b.textContent, lines: lines(whole)});
  }
  document.body.setAttribute('data-layout', JSON.stringify(out));
})();
</script>"""
"""Measures the page where it is shown and writes the measures into <body data-layout>, which
``--dump-dom`` then serializes. Injected into a test copy only: the page itself runs no script
(and its Content-Security-Policy, dropped from the copy, would refuse this one)."""


def checked_in_scoreboard() -> dict:
    """The scoreboard model of every checked-in report, plus one column for each other verdict badge.

    Every report is shown as valid: this is a test of the layout, and validity is tested
    elsewhere (tests/reports/test_checked_in.py), so every cell is drawn whatever the
    installed spec says of a report. The extra columns are copies of one report shown as
    not certified for want of results ("incomplete"), invalid and stale.
    """
    paths = sorted((ROOT / "reports").glob("*/report.json"))
    assert len(paths) >= 5, paths
    reports = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
    outcomes = [Outcome(Status.VALID) for _ in reports]
    first = reports[0]

    def renamed(suffix: str, **verdict) -> dict:
        return dict(first, backend={**first["backend"], "name": f"{first['backend']['name']}-{suffix}"}, verdict={**first["verdict"], **verdict})

    reports += [
        renamed("incomplete", certified=False, failing_clauses=[], unsupported=[]),
        renamed("invalid"),
        renamed("stale"),
    ]
    outcomes += [Outcome(Status.VALID), Outcome(Status.INVALID, problems=("hash does not match",)), Outcome(Status.UNCHECKED)]
    return scoreboard.build(reports, SPECS.clauses, outcomes=outcomes)


@pytest.mark.slow
@pytest.mark.parametrize("width", [800, 1600])
def test_badges_are_never_clipped_and_categories_never_broken_inside_a_word(tmp_path, width):
    model = checked_in_scoreboard()
    markup = scoreboard.render_html(model)
    probe = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", markup).replace("</body>", LAYOUT_PROBE + "</body>")
    page = tmp_path / "scoreboard.html"
    page.write_text(probe, encoding="utf-8")
    done = _chromium([f"--window-size={width},1200", "--dump-dom", page.resolve().as_uri()], tmp_path)
    assert done.returncode == 0 and "data-layout" in done.stdout, f"chromium --dump-dom failed: {done.stderr[-2000:]}"
    layout = json.loads(parse(done.stdout).find("body").attrs["data-layout"])
    assert layout["width"] == width, "the window width was not applied"

    badges = layout["badges"]
    assert len(badges) == len(model["backends"])
    assert {b["text"] for b in badges} >= {"CERTIFIED", "NOT CERTIFIED", "INVALID REPORT"}
    bad = [b for b in badges if b["clipped"] or b["lines"] != 1]
    assert not bad, f"at {width} px, verdict badges clipped or wrapped: {bad}"

    categories = layout["categories"]
    assert len(categories) > 100 and {"CONTRACT_VIOLATION", "NOT_APPLICABLE", "MISMATCH"} <= {c["category"] for c in categories}
    bad = [c for c in categories if c["lines"] != 1 or c["clipped"]]
    assert not bad, f"at {width} px, {len(bad)} category label(s) broken inside the word or clipped, e.g. {bad[:5]}"
    ops = layout["ops"]
    assert len(ops) > 300
    bad = [c for c in ops if c["lines"] != 1 or c["clipped"]]
    assert not bad, f"at {width} px, {len(bad)} operator cell(s) wrapped or clipped, e.g. {bad[:5]}"
    assert layout["ids"] and all(i["lines"] == 1 for i in layout["ids"]), [i for i in layout["ids"] if i["lines"] != 1]
    assert not layout["pageOverflows"], "a table wider than the window scrolls in its own box, not the page"

    if width == 800:
        page.write_text(markup, encoding="utf-8")
        keep_artifact(screenshot(page, tmp_path / "scoreboard-800.png", size="800,1200"), "scoreboard-800.png")
