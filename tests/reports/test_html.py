"""The HTML report, rendered from reports built here and loaded in a real headless Chromium.

Most reports are built in-process through ``conformance.report.model.build_report``
from results documents written here (fast, and every category can be staged); one
is produced by a real ``certify`` run of a backend whose error messages are
HTML/JavaScript payloads. Each page is opened in Chromium (Debian package
``chromium``): the DOM it dumps after loading is what the assertions read, so a
payload that ran, a cell that did not render or a missing section shows up.

Chromium is required, not optional: without it these tests fail and say how to
install it (CI installs it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from conformance import __version__
from conformance import specs as spec_module
from conformance.report.html import render
from conformance.report.markdown import performance_table
from conformance.report.model import RESULTS_SCHEMA, build_report, load_report, result_id
from conformance.results import COLOURS, Category

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
SPECS = spec_module.load()
PAYLOAD = (
    "<script>document.title='PWNED';document.body.setAttribute('data-pwned','1')</script>"
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">"
)
"""What a hostile (or merely careless) backend puts in an error message. If it ran,
the page's title would be PWNED and <body> would carry data-pwned."""

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


# ---------------------------------------------------------------------------------------------
# Chromium


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail(
        "Chromium is not installed, and the report tests load the HTML pages in a real headless browser. "
        "Install it with `apt-get update && apt-get install -y chromium` (Debian package: chromium); CI installs it.",
        pytrace=False,
    )


def _chromium(args: list[str], workdir: Path) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=workdir)
    try:
        return subprocess.run(
            [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def dump_dom(page: Path) -> str:
    """The page's DOM after it loaded (and after any script on it ran), serialized by Chromium."""
    done = _chromium(["--dump-dom", page.resolve().as_uri()], page.parent)
    assert done.returncode == 0 and "<html" in done.stdout, f"chromium --dump-dom failed: {done.stderr[-2000:]}"
    return done.stdout


def screenshot(page: Path, png: Path, size: str = "1400,2000") -> Path:
    done = _chromium([f"--screenshot={png}", f"--window-size={size}", "--hide-scrollbars", page.resolve().as_uri()], page.parent)
    assert done.returncode == 0 and png.exists() and png.stat().st_size > 10_000, f"chromium --screenshot failed: {done.stderr[-2000:]}"
    return png


def keep_artifact(png: Path, name: str) -> None:
    """A copy under tests/artifacts/ (gitignored), for a human to look at."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(png, ARTIFACTS / name)


# ---------------------------------------------------------------------------------------------
# A small DOM, so assertions read elements and their text, not substrings of markup

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Node:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Node | None):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node | str] = []

    def iter(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            if isinstance(child, Node):
                yield from child.iter()

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def find_all(self, tag: str | None = None, **attrs: Any) -> list[Node]:
        """Elements with ``tag`` whose attributes match (``data_op="x"`` means data-op="x"; True: present)."""
        wanted = {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()}
        found = []
        for node in self.iter():
            if tag is not None and node.tag != tag:
                continue
            if all(self._matches(node, name, value) for name, value in wanted.items()):
                found.append(node)
        return found

    @staticmethod
    def _matches(node: Node, name: str, value: Any) -> bool:
        if value is True:
            return name in node.attrs
        if name == "class":
            return value in node.attrs.get("class", "").split()
        return node.attrs.get(name) == value

    def find(self, tag: str | None = None, **attrs: Any) -> Node:
        found = self.find_all(tag, **attrs)
        assert found, f"no <{tag or '*'}> with {attrs}"
        return found[0]


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = self.current = Node("#document", {}, None)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: v if v is not None else "" for k, v in attrs}, self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Node(tag, {k: v if v is not None else "" for k, v in attrs}, self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def parse(markup: str) -> Node:
    builder = _Builder()
    builder.feed(markup)
    builder.close()
    return builder.root


# ---------------------------------------------------------------------------------------------
# Reports built here

ENVIRONMENT = {
    "python": "3.11.7",
    "torch": "2.13.0+cpu",
    "numpy": "2.4.6",
    "ml_dtypes": "0.6.0",
    "hypothesis": "6.170.15",
    "cpu": "Test CPU",
    "cpu_count": 2,
    "os": "Linux 6.1",
    "machine": "x86_64",
}


def results_document(name: str, results: list[dict], *, version: str = "1.0", profile: str = "smoke", digest: str | None = None) -> dict:
    """A results document as the plugin writes it."""
    return {
        "schema": RESULTS_SCHEMA,
        "harness": {"name": "torch-backend-conformance", "version": __version__},
        "spec": {"digest": digest or SPECS.digest, "profile": profile},
        "backend": {
            "name": name,
            "version": version,
            "description": f"{name}, built by the test",
            "claims": {},
            "compile_specs": [],
            "tolerance_loosenings": [],
            "not_applicable": {},
        },
        "environment": dict(ENVIRONMENT),
        "run": {
            "tag": "checks",
            "hypothesis_profile": "ci",
            "hypothesis_seed": None,
            "started": "2026-01-01T00:00:00+00:00",
            "finished": "2026-01-01T00:01:00+00:00",
            "command": "pytest --pyargs conformance.checks",
        },
        "results": sorted(({**r, "id": result_id(r)} for r in results), key=lambda r: r["id"]),
    }


PERF = {  # program -> runner -> median ms of execute; preprocess/init only for backend and reference
    "mlp": {"backend": 0.30, "reference": 0.32, "eager": 60.0},
    "chain": {"backend": 0.15, "reference": 0.15, "eager": 0.015},
}


def profile_results(profile: str = "smoke", defect: Callable[[dict], dict | None] | None = None, *, perf: bool = True) -> list[dict]:
    """A passing result for everything ``profile`` makes mandatory (plus timings); ``defect`` may change any of them."""
    p = SPECS.profile(profile)
    results = []
    for clause in p.clauses:
        if clause.startswith(("NUM-", "PERF-")):
            continue
        results.append({"test": f"test_{clause.replace('-', '_')}", "clause": clause, "program": "mlp", "category": "PASS", "message": "", "duration_s": 0.01})
    for op, dtypes in p.dtypes.items():
        for dtype in dtypes:
            results.append({"test": "test_NUM_001_matches_reference", "clause": "NUM-001", "op": op, "dtype": dtype, "category": "PASS", "message": "", "duration_s": 0.2})
    if perf:
        for program, runners in PERF.items():
            for runner, ms in runners.items():
                stages = ("execute",) if runner == "eager" else ("preprocess", "init", "execute")
                for stage in stages:
                    factor = {"preprocess": 4.0, "init": 1.5, "execute": 1.0}[stage]
                    clause = {"preprocess": "PERF-001", "init": "PERF-002", "execute": "PERF-003"}[stage]
                    results.append(
                        {
                            "test": f"test_{clause.replace('-', '_')}_latency",
                            "clause": clause,
                            "program": program,
                            "runner": runner,
                            "stage": stage,
                            "category": "PASS",
                            "message": "",
                            "duration_s": 0.1,
                            "timings": {"median_ms": ms * factor * (2.0 if runner == "backend" and stage == "preprocess" else 1.0)},
                        }
                    )
    if defect is not None:
        results = [changed for r in results if (changed := defect(dict(r))) is not None]
    return results


def make_report(name: str, defect=None, *, version: str = "1.0", profile: str = "smoke", digest: str | None = None, perf: bool = True) -> dict:
    return build_report([results_document(name, profile_results(profile, defect, perf=perf), version=version, profile=profile, digest=digest)], SPECS)


def nan_dropped_by_max(r: dict) -> dict:
    """As tests/seeded/defects.py:nan_dropped_by_max comes out: maximum loses NaN in floating dtypes."""
    if r.get("op") == "aten.maximum.default" and r["dtype"].startswith("float"):
        r["category"] = "MISMATCH"
        r["message"] = (
            f"aten.maximum.default({r['dtype']}[3], {r['dtype']}[3]) output 0: 1/3 elements differ (1 NaN mismatches); "
            f"worst at [1]: got 0.0, expected nan"
        )
        r["replay"] = f"python -m conformance replay reports/seeded/replays/NUM-001-aten.maximum.default-{r['dtype']}"
    return r


def hostile(r: dict) -> dict:
    """Handles that share state (RT-003) and an execute whose error message is a script."""
    if r.get("clause") == "RT-003":
        r["category"] = "CONTRACT_VIOLATION"
        r["message"] = "execute failed: Internal (0x01): " + PAYLOAD
    if r.get("op") == "aten.add.Tensor" and r.get("dtype") == "int32":
        r["category"] = "EXECUTE_FAIL"
        r["stage"] = "execute"
        r["message"] = "execute failed: Internal (0x01): " + PAYLOAD
        r["replay"] = "python -m conformance replay 'reports/evil/replays/NUM-001-aten.add.Tensor-int32' && echo \"<b>x</b>\""
    return nan_dropped_by_max(r)


# ---------------------------------------------------------------------------------------------
# What every page must hold


def assert_self_contained(markup: str) -> None:
    """No URL that would make the browser reach out: nothing to fetch, no link off the page, except
    plain links (<a href>, followed only when clicked) to a failure's saved files beside the report
    (replays/<name>/call.json, arrays.npz, blob.bin), never with a scheme, an absolute path or "..".."""
    doc = parse(markup)
    for node in doc.iter():
        for name in ("src", "href", "xlink:href", "action", "formaction", "srcset", "poster", "data", "background"):
            value = node.attrs.get(name)
            if value is None:
                continue
            artifact = (
                node.tag == "a" and name == "href" and re.fullmatch(r"replays/[A-Za-z0-9._-]+/(call\.json|arrays\.npz|blob\.bin)", value) is not None
                and ".." not in value
            )
            assert value.startswith(("#", "data:")) or artifact, f"<{node.tag} {name}={value!r}> points off the page"
    links = re.findall(r"""\b(?:src|href|action|srcset|poster)\s*=\s*["']?\s*(?:https?:)?//""", markup, flags=re.IGNORECASE)
    assert not links, f"network URLs in src/href attributes: {links}"
    assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//|@import", markup, flags=re.IGNORECASE), "CSS that fetches"
    assert not doc.find_all("script"), "the page needs no script"
    assert not doc.find_all("link"), "no external style sheets or fonts"
    csp = doc.find("meta", http_equiv="Content-Security-Policy").attrs["content"]
    assert "default-src 'none'" in csp


def assert_payload_inert(dom: Node, markup: str) -> None:
    """The payload is text on the page, and nothing of it ran or became an element."""
    assert dom.find("title").text().startswith(("CERTIFIED", "NOT CERTIFIED", "Conformance")), dom.find("title").text()
    body = dom.find("body")
    assert "data-pwned" not in body.attrs, "the payload's script or onerror handler ran"
    assert not dom.find_all("script"), "a <script> element made it into the DOM"
    assert not dom.find_all("img"), "an <img> element made it into the DOM"
    for node in dom.iter():
        handlers = [a for a in node.attrs if a.startswith("on")]
        assert not handlers, f"<{node.tag}> carries event handlers {handlers}"
    assert "&lt;script&gt;" in markup and "<script>" not in markup


def matrix_cells(matrix: Node) -> dict[tuple[str, str], Node]:
    """(op, dtype) -> the matrix's cell: the op is its row's (tr[data-op]), the dtype its own."""
    return {(row.attrs["data-op"], cell.attrs["data-dtype"]): cell
            for row in matrix.find("tbody").find_all("tr", data_op=True) for cell in row.find_all("td", data_category=True)}


def assert_coloured_by_category(markup: str, categories) -> None:
    """The page's CSS colours a matrix cell by its data-category (one rule per category, no style per cell)."""
    for category in categories:
        rule = re.search(rf'table\.matrix td\[data-category="{category}"\] \{{([^}}]*)\}}', markup)
        assert rule and COLOURS[Category(category)] in rule.group(1), category


def _write(tmp_path: Path, name: str, markup: str) -> Path:
    page = tmp_path / name
    page.write_text(markup, encoding="utf-8")
    return page


# ---------------------------------------------------------------------------------------------
# Tests


@pytest.mark.slow
def test_certified_report_in_chromium(tmp_path):
    report = make_report("reference", version="0.1.0 (blob format 1)")
    assert report["verdict"]["certified"], report["verdict"]
    markup = render(report, SPECS.clauses)
    assert render(report, SPECS.clauses) == markup, "a pure function of the report"
    assert_self_contained(markup)
    dom = parse(dump_dom(_write(tmp_path, "reference.html", markup)))

    verdict = dom.find(id="verdict")
    assert verdict.attrs["data-certified"] == "true" and verdict.attrs["data-state"] == "certified"
    assert verdict.find(class_="badge").text() == "CERTIFIED"
    assert dom.find(id="backend-name").text() == "reference"
    assert dom.find(id="backend-version").text() == "0.1.0 (blob format 1)"
    assert dom.find(id="verdict-text").text() == "certified for profile smoke"
    assert dom.find(id="meta-profile").text() == "smoke"
    assert dom.find(id="meta-spec-digest").text() == SPECS.digest
    assert dom.find(id="meta-hypothesis-profile").text() == "ci"
    assert dom.find(id="meta-harness").text().endswith(__version__)

    counts = {n.attrs["data-category"]: int(n.attrs["data-count"]) for n in dom.find(id="counts").find_all("li")}
    assert counts == {"PASS": len(report["results"])}
    assert dom.find(id="no-failing-clauses")

    cells = matrix_cells(dom.find(id="op-dtype-matrix"))
    expected = {(op, d) for op, ds in SPECS.profile("smoke").dtypes.items() for d in ds}
    assert set(cells) == expected
    assert {c.attrs["data-category"] for c in cells.values()} == {"PASS"}
    assert_coloured_by_category(markup, ["PASS"])
    assert not any("title" in c.attrs or c.find_all("details") for c in cells.values()), "a pass carries no message"

    rows = dom.find(id="clause-table").find_all("tr", data_id=True)
    assert {r.attrs["data-clause"] for r in rows} == {c for c in SPECS.profile("smoke").clauses if c != "NUM-001"}

    chart = dom.find("svg", id="perf-chart")
    bars = chart.find_all("rect", class_="bar")
    table = performance_table(report)
    want = {(p, s, "reference", round(rr, 4)) for p, s, *_x, rr, _re in table if rr} | {
        (p, s, "eager", round(re_, 4)) for p, s, *_x, _rr, re_ in table if re_
    }
    assert {(b.attrs["data-program"], b.attrs["data-stage"], b.attrs["data-series"], round(float(b.attrs["data-ratio"]), 4)) for b in bars} == want
    assert chart.find("line", id="perf-parity").attrs["data-ratio"] == "1"
    assert dom.find(id="environment").find(data_key="torch").text() == "2.13.0+cpu"
    assert dom.find(id="replay-empty")


@pytest.mark.slow
def test_failing_report_shows_failures_and_stays_inert_in_chromium(tmp_path):
    report = make_report("evil<b>backend</b>", hostile, version="1.0<script>document.title='PWNED-VERSION'</script>")
    verdict = report["verdict"]
    assert not verdict["certified"] and verdict["failing_clauses"] == ["NUM-001", "RT-003"]
    markup = render(report, SPECS.clauses)
    assert_self_contained(markup)
    page = _write(tmp_path, "report.html", markup)
    raw = dump_dom(page)
    dom = parse(raw)
    assert_payload_inert(dom, markup)

    # the verdict, with the hostile name and version shown as text
    header = dom.find(id="verdict")
    assert header.attrs["data-certified"] == "false" and header.attrs["data-state"] == "failed"
    assert header.find(class_="badge").text() == "NOT CERTIFIED"
    assert dom.find(id="backend-name").text() == "evil<b>backend</b>"
    assert dom.find(id="backend-version").text() == "1.0<script>document.title='PWNED-VERSION'</script>"
    assert dom.find(id="verdict-text").text() == verdict["text"]
    assert not header.find_all("b"), "the backend's <b> became markup"

    # counts per category
    counts = {n.attrs["data-category"]: int(n.attrs["data-count"]) for n in dom.find(id="counts").find_all("li")}
    assert counts == {"PASS": len(report["results"]) - 4, "MISMATCH": 2, "EXECUTE_FAIL": 1, "CONTRACT_VIOLATION": 1}

    # failing clauses with their meaning
    failing = dom.find(id="failing-clause-table")
    assert [r.attrs["data-clause"] for r in failing.find_all("tr", data_clause=True)] == ["NUM-001", "RT-003"]
    assert SPECS.clauses["RT-003"].text in failing.find("tr", data_clause="RT-003").text()
    assert SPECS.clauses["NUM-001"].title in failing.find("tr", data_clause="NUM-001").text()

    # the matrix: one cell per op x dtype, coloured by category, message on hover and on click
    matrix = dom.find(id="op-dtype-matrix")
    cells = matrix_cells(matrix)
    assert len(cells) == 15
    assert_coloured_by_category(markup, ["PASS", "MISMATCH", "EXECUTE_FAIL"])
    for dtype in ("float16", "float32"):
        cell = cells[("aten.maximum.default", dtype)]
        assert cell.attrs["data-category"] == "MISMATCH"
        assert cell.attrs["title"] == f"aten.maximum.default {dtype}: MISMATCH", "the message once: in the popup"
        assert "1 NaN mismatches" in cell.find("details").find(class_="msg").text()
        assert "expected nan" in cell.find("details").find(class_="msg").text()
    assert cells[("aten.maximum.default", "int32")].attrs["data-category"] == "PASS"
    evil = cells[("aten.add.Tensor", "int32")]
    assert evil.attrs["data-category"] == "EXECUTE_FAIL"
    assert evil.find(class_="msg").text() == "execute failed: Internal (0x01): " + PAYLOAD
    assert {r.attrs["data-op"] for r in matrix.find_all("tr", class_="has-failure")} == {"aten.maximum.default", "aten.add.Tensor"}
    assert matrix.find("td", class_="tally", data_passed="1").parent.attrs["data-op"] == "aten.maximum.default"

    # the clause table: every non-NUM result; the payload is text
    table = dom.find(id="clause-table")
    rows = table.find_all("tr", data_id=True)
    assert len(rows) == sum(not r["clause"].startswith("NUM-") for r in report["results"])
    assert rows[0].attrs["data-clause"] == "RT-003", "failures first"
    rt3 = table.find("tr", data_clause="RT-003")
    assert rt3.attrs["data-category"] == "CONTRACT_VIOLATION"
    assert rt3.find("td", class_="message").text() == "execute failed: Internal (0x01): " + PAYLOAD

    # performance, environment, replays
    assert dom.find("svg", id="perf-chart").find_all("rect", class_="bar")
    replays = {li.attrs["data-id"]: li.find("code").text() for li in dom.find(id="replay").find_all("li")}
    assert set(replays) == {r["id"] for r in report["results"] if r.get("replay")}
    assert any('echo "<b>x</b>"' in cmd for cmd in replays.values())

    png = screenshot(page, tmp_path / "report.png")
    keep_artifact(png, "report.png")


@pytest.mark.slow
def test_matrix_of_180_ops_by_10_dtypes(tmp_path):
    dtypes = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
    categories = ["PASS"] * 12 + ["NOT_SUPPORTED", "MISMATCH", "EXECUTE_FAIL", "NOT_APPLICABLE", "TIMEOUT"]
    results = [
        {
            "test": "test_NUM_001_matches_reference",
            "clause": "NUM-001",
            "op": f"aten.synthetic_op_{i:03d}.default",
            "dtype": dtype,
            "category": categories[(i * 7 + j * 3) % len(categories)],
            "message": "" if (i * 7 + j * 3) % len(categories) < 12 else f"op {i} dtype {dtype}: something went wrong",
        }
        for i in range(180)
        for j, dtype in enumerate(dtypes)
    ]
    report = build_report([results_document("wide", results)], SPECS)
    markup = render(report, SPECS.clauses)
    assert len(markup) < 3_000_000, f"the page is {len(markup)} characters"
    assert re.search(r"table\.matrix thead th \{[^}]*position: sticky", markup), "the dtype header must stay visible"
    dom = parse(dump_dom(_write(tmp_path, "wide.html", markup)))
    matrix = dom.find(id="op-dtype-matrix")
    assert [th.attrs["data-dtype"] for th in matrix.find("thead").find_all("th", data_dtype=True)] == dtypes
    cells = matrix_cells(matrix)
    assert len(cells) == 1800
    got = {key: c.attrs["data-category"] for key, c in cells.items()}
    assert got == {(r["op"], r["dtype"]): r["category"] for r in results}
    assert dom.find("input", id="matrix-only-failing", type="checkbox")
    # details only where a reader acts: a failure's message on its cell, none on a pass or a refusal
    for key, cell in cells.items():
        acted_on = cell.attrs["data-category"] in ("MISMATCH", "EXECUTE_FAIL", "TIMEOUT")
        assert bool(cell.find_all("details")) == acted_on, key
    # each refusal once, with the ops and dtypes it covers; a refused cell links to it
    refused = {(r["op"], r["dtype"]): r["message"] for r in results if r["category"] == "NOT_SUPPORTED"}
    rows = dom.find(id="refusal-table").find_all("tr", data_refusal=True)
    assert sum(int(row.attrs["data-checks"]) for row in rows) == len(refused)
    for (op, dtype), message in refused.items():
        link = cells[(op, dtype)].find("a").attrs["href"]
        row = dom.find("tr", id=link.removeprefix("#"))
        assert row.find("td", class_="msg").text() == message.removeprefix(f"{op} {dtype}: ")
        assert dtype in row.find("li", data_op=op).find(class_="dtypes").text().split(", ")
    png = screenshot(_write(tmp_path, "wide.html", markup), tmp_path / "matrix.png", size="1400,1400")
    keep_artifact(png, "report-matrix.png")


EVIL_BACKEND = '''
from dataclasses import replace

from conformance.api import BackendError, Error
from reference_backend import ReferenceRuntime, backend_under_test

PAYLOAD = {payload!r}


class EvilRuntime(ReferenceRuntime):
    def execute(self, context, handle, args):
        raise BackendError(Error.Internal, PAYLOAD)


backend = replace(
    backend_under_test(),
    name="evil<b>backend</b>",
    version="1.0<script>document.title='PWNED-VERSION'</script>",
    runtime=EvilRuntime(),
    description="raises errors whose messages are HTML",
)
'''


@pytest.mark.slow
def test_real_certify_run_of_a_hostile_backend(tmp_path):
    """One real run: a backend whose execute raises BackendError(Internal, <script>...)."""
    chromium()  # fail early, before the slow part, if there is no browser
    module = tmp_path / "evil_backend.py"
    module.write_text(textwrap.dedent(EVIL_BACKEND.format(payload=PAYLOAD)))
    out = tmp_path / "reports"
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "certify", f"{module}:backend", "--profile", "smoke", "--skip-perf",
         "--workers", "1", "--output", str(out), "--", "-k", "RT_002 or (NUM_001 and add and float32)"],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    [path] = out.glob("*/report.json")
    report = load_report(path)
    assert {r["id"]: r["category"] for r in report["results"]} == {
        "test_NUM_001_matches_reference[aten.add.Tensor|float32]": "EXECUTE_FAIL",  # ids from parameters only
        "test_RT_002_round_trip": "EXECUTE_FAIL",
    }
    markup = render(report, SPECS.clauses)
    assert_self_contained(markup)
    page = _write(tmp_path, "report.html", markup)
    dom = parse(dump_dom(page))
    assert_payload_inert(dom, markup)
    assert dom.find(id="verdict").attrs["data-certified"] == "false"
    assert dom.find(id="verdict").find(class_="badge").text() == "NOT CERTIFIED"
    assert dom.find(id="backend-name").text() == "evil<b>backend</b>"
    assert dom.find(id="verdict-text").text() == report["verdict"]["text"]
    cell = matrix_cells(dom.find(id="op-dtype-matrix"))[("aten.add.Tensor", "float32")]
    assert cell.attrs["data-category"] == "EXECUTE_FAIL"
    assert cell.find(class_="msg").text().endswith(PAYLOAD)
    row = dom.find(id="clause-table").find("tr", data_clause="RT-002")
    assert row.attrs["data-category"] == "EXECUTE_FAIL"
    assert row.find("td", class_="message").text().endswith(PAYLOAD)
    assert dom.find(id="not-run"), "the mandatory checks this selection skipped are listed"
    assert dom.find(id="replay").find_all("li"), "the failing NUM check saved a replayable example"


@pytest.mark.slow
def test_quantized_and_partially_delegated_programs_in_chromium(tmp_path):
    """The checked-in quantized report of executorch-xnnpack: one row per QNT result with its budget
    and worst error in steps, and the delegated fraction where XNNPACK took part of a program."""
    report = load_report(ROOT / "reports" / "quantized" / "executorch-xnnpack" / "report.json")
    markup = render(report, SPECS.clauses)
    assert_self_contained(markup)
    dom = parse(dump_dom(_write(tmp_path, "quantized.html", markup)))
    assert dom.find("a", href="#quantized") is not None
    rows = dom.find(id="quantized-table").find_all("tr", data_program=True)
    qnt = [r for r in report["results"] if r["clause"].startswith("QNT-")]
    assert {(r.attrs["data-program"], r.attrs["data-clause"]) for r in rows} == {(r["model"], r["clause"]) for r in qnt}
    partial = [r for r in qnt if (r.get("stats") or {}).get("delegated")]
    assert partial, "XNNPACK leaves max pooling to ExecuTorch's CPU kernels in conv_max_pool2d and resnet18"
    for result in partial:
        row = next(r for r in rows if (r.attrs["data-program"], r.attrs["data-clause"]) == (result["model"], result["clause"]))
        cells = [td.text() for td in row.find_all("td")]
        taken = result["stats"]["delegated"]
        assert f"{taken['ops']}/{taken['ops_total']} ops" in cells[8], cells
        assert row.find_all("td")[2].attrs["data-category"] == result["category"]
