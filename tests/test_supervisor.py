"""A certification run always ends, with a result for every check it planned.

Each test certifies a misbehaving backend of tests/seeded/misbehaving.py through the real CLI
(``python -m conformance certify``, pytest-xdist workers, then the performance session without
workers) and reads the report: the run completes, every planned check holds a result in the
right category, naming the signal or exit status and the contract call reached; the exit status
is the documented one; ``verify`` accepts the report and rejects it edited.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.report.model import load_report

ROOT = Path(__file__).resolve().parent.parent
MISBEHAVING = "tests/seeded/misbehaving.py"
SELECTION = "RT_002 or RT_003 or RT_004 or RT_005 or PERF_002 or PERF_003"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env.update(extra)
    return env


def _certify(out: Path, backend: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "conformance", "certify", backend, "--profile", "interface", "--output", str(out), "--workers", "2", *args]
    return subprocess.run(command, cwd=ROOT, env=env or _env(), capture_output=True, text=True, errors="backslashreplace", timeout=900)


def _report(out: Path) -> dict:
    (path,) = out.glob("*/report.json")
    return load_report(path)


def _verify(path: Path, *args: str) -> int:
    return subprocess.run([sys.executable, "-m", "conformance", "verify", str(path), *args], cwd=ROOT, capture_output=True, text=True).returncode


@pytest.fixture(scope="module")
def reference_ids(tmp_path_factory) -> set[str]:
    """The checks the same selection gives the reference: what every run must hold a result for."""
    out = tmp_path_factory.mktemp("reference")
    done = _certify(out, "reference", "--timeout", "5", "-k", SELECTION)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # mandatory clauses deselected
    return {r["id"] for r in _report(out)["results"]}


def _by_id(report: dict) -> dict[str, dict]:
    return {r["id"]: r for r in report["results"]}


@pytest.mark.slow
def test_crashes_and_hangs_in_workers_and_in_the_timed_session_cost_one_result_each(tmp_path, reference_ids):
    out = tmp_path / "out"
    done = _certify(out, f"{MISBEHAVING}:misbehaves", "--timeout", "15", "--hard-timeout", "20", "-k", SELECTION)
    log = done.stdout + done.stderr
    assert done.returncode == 1, log[-4000:]  # not certified, and nothing else
    assert "INTERNALERROR" not in log and "Traceback" not in done.stderr, log[-4000:]
    report = _report(out)
    results = _by_id(report)
    assert set(results) == reference_ids, "some planned checks hold no result"

    def check(rid, category, **stats):
        r = results[rid]
        assert r["category"] == category, (rid, r)
        for key, value in stats.items():
            assert r["stats"].get(key) == value, (rid, key, r)
        return r

    check("test_RT_002_round_trip", "CRASH", exit_status=0, last_stage="execute")
    abort = check("test_RT_003_independent_handles", "CRASH", signal="SIGABRT", last_stage="init")
    assert "misbehaving.py" in abort["stats"]["where"] and "SIGABRT" in abort["message"]
    check("test_RT_004_repeated_execute_identical", "CRASH", signal="SIGSEGV", last_stage="execute")
    hang = check("test_RT_005_processed_buffer_freed_after_init", "TIMEOUT", last_stage="init")
    assert "_hang_holding_the_gil" in hang["stats"]["innermost_frame"]  # faulthandler dumped the hung stack
    # The session without workers (timing): the supervisor kills, records and resumes it.
    perf_hang = check("test_PERF_002_init_latency[mlp|backend|init]", "TIMEOUT", last_stage="init")
    assert "_hang_holding_the_gil" in perf_hang["stats"]["innermost_frame"]
    check("test_PERF_003_execute_latency[mlp|backend|execute]", "CRASH", signal="SIGSEGV", last_stage="execute")
    check("test_PERF_003_execute_latency[chain|backend|execute]", "CRASH", exit_status=0, last_stage="execute")
    lost = {rid for rid, r in results.items() if r["category"] in ("CRASH", "TIMEOUT")}
    assert len(lost) == 7, sorted(lost)
    assert all(r["category"] == "PASS" for rid, r in results.items() if rid not in lost)
    # Every init leaves a non-daemon thread: the session that outlived its results was ended.
    assert "still alive" in log and "threads left running" in log
    assert report["verdict"]["failing_clauses"] == ["RT-002", "RT-003", "RT-004", "RT-005"]

    path = next(out.glob("*/report.json"))
    assert _verify(path) == 5  # valid, unsigned
    forged = load_report(path)  # the records, edited and written back as a list (a form the schema takes)
    for r in forged["results"]:
        if r["category"] == "CRASH":
            r["category"] = "PASS"
    path.write_text(json.dumps(forged))
    assert _verify(path) == 3


@pytest.mark.slow
def test_crashes_past_xdists_restart_cap_resume_in_new_sessions(tmp_path, reference_ids):
    """xdist gives up after --max-worker-restart crashes (here 1, to make it cheap); the
    supervisor runs what was left in new sessions until every check has a result."""
    out = tmp_path / "out"
    done = _certify(out, f"{MISBEHAVING}:segfaults_in_every_execute", "--timeout", "20", "--skip-perf", "-k", SELECTION, "--", "--max-worker-restart", "1")
    log = done.stdout + done.stderr
    assert done.returncode == 1, log[-4000:]
    assert "maximum crashed workers reached" in log
    report = _report(out)
    assert len(report["run"]["parts"]) > 1, report["run"]["parts"]  # resumed
    results = _by_id(report)
    assert set(results) == {rid for rid in reference_ids if "PERF" not in rid}
    crashed = {rid for rid, r in results.items() if r["category"] == "CRASH"}
    assert crashed == {"test_RT_002_round_trip", "test_RT_003_independent_handles", "test_RT_004_repeated_execute_identical", "test_RT_005_processed_buffer_freed_after_init"}
    assert all(results[rid]["stats"]["signal"] == "SIGSEGV" for rid in crashed)


@pytest.mark.slow
def test_a_spent_budget_ends_the_run_with_what_is_left_recorded_not_run(tmp_path):
    out = tmp_path / "out"
    started = time.monotonic()
    done = _certify(out, f"{MISBEHAVING}:slow_init", "--budget", "25", "--skip-perf", "-k", "RT", env=_env(CONFORMANCE_TEST_INIT_SLEEP_S="2"))
    elapsed = time.monotonic() - started
    log = done.stdout + done.stderr
    assert done.returncode == 1, log[-4000:]
    assert "time budget" in log
    report = _report(out)
    not_run = [r for r in report["results"] if r["category"] == "SKIP" and "time budget" in r.get("message", "")]
    assert not_run, [(r["id"], r["category"]) for r in report["results"]]
    assert all(r["mandatory"] for r in not_run)
    assert "not run" in report["verdict"]["text"] and not report["verdict"]["certified"]
    assert elapsed < 25 + 60  # the budget, the report, and process start-up; never the whole run


@pytest.mark.slow
def test_a_budget_spent_before_any_check_finished_records_them_not_run_not_as_harness_errors(tmp_path):
    """Every check blocks in init far past the budget, so the budget kills a session that has finished
    nothing: what is left was not run for lack of time (SKIP), not lost to a broken session (seen as
    HARNESS_ERROR "twice without progress" under load, where collection ate most of the budget)."""
    out = tmp_path / "out"
    done = _certify(out, f"{MISBEHAVING}:slow_init", "--budget", "60", "--timeout", "300", "--skip-perf", "-k", "RT_002 or RT_003",
                    env=_env(CONFORMANCE_TEST_INIT_SLEEP_S="600"))  # fmt: skip
    log = done.stdout + done.stderr
    assert done.returncode == 1, log[-4000:]
    report = _report(out)
    categories = {r["id"]: (r["category"], r.get("message", "")[:120]) for r in report["results"]}
    assert set(categories) == {"test_RT_002_round_trip", "test_RT_003_independent_handles"}, (categories, log[-3000:])
    assert all(c == "SKIP" and "time budget" in m for c, m in categories.values()), categories


@pytest.mark.slow
def test_a_killed_cli_leaves_no_session_running_and_no_report_that_looks_like_its_own(tmp_path):
    out = tmp_path / "out"
    report_dir = out / "tests_seeded_misbehaving.py_slow_init"
    report_dir.mkdir(parents=True)
    (report_dir / "report.json").write_text('{"left": "by an earlier run"}')
    command = [sys.executable, "-m", "conformance", "certify", f"{MISBEHAVING}:slow_init", "--profile", "interface", "--output", str(out), "--workers", "2", "--skip-perf"]
    env = _env(CONFORMANCE_TEST_INIT_SLEEP_S="1", CONFORMANCE_TEST_MARK=str(tmp_path))
    cli = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = report_dir / "results" / "checks.journal"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (journal.exists() and len(journal.read_text().splitlines()) > 3):
        time.sleep(0.5)
    assert journal.exists(), "the run never started"
    assert not (report_dir / "report.json").exists()  # the earlier run's report went first
    cli.send_signal(signal.SIGKILL)
    cli.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _processes_marked(str(tmp_path)):
        time.sleep(0.5)
    assert not _processes_marked(str(tmp_path)), "sessions outlived the CLI"
    # What was computed is not lost: `report` builds the report from the journal.
    rebuilt = subprocess.run([sys.executable, "-m", "conformance", "report", str(report_dir)], cwd=ROOT, capture_output=True, text=True)
    assert rebuilt.returncode == 0, rebuilt.stderr
    report = load_report(report_dir / "report.json")
    assert report["results"] and not report["verdict"]["certified"]
    assert "not run" in report["verdict"]["text"]


def _processes_marked(mark: str) -> list[int]:
    """Processes whose environment carries CONFORMANCE_TEST_MARK=mark."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if f"CONFORMANCE_TEST_MARK={mark}".encode() in environ.split(b"\0"):
            found.append(int(proc.name))
    return found


@pytest.mark.slow
def test_backend_names_never_become_paths_outside_the_output(tmp_path):
    for name in ("named_dot_dot", "named_300_bytes"):
        out = tmp_path / name / "out"
        done = _certify(out, f"{MISBEHAVING}:{name}", "--profile", "smoke", "--skip-perf", "--workers", "1", "-k", "NUM and add and float32")
        assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
        (result,) = [r for r in _report(out)["results"] if r.get("op")]
        assert result["category"] == "MISMATCH", result  # not HARNESS_ERROR: its replay could be written
        written = [p for p in (tmp_path / name).rglob("*") if p.is_file()]
        assert written and all(out.resolve() in p.resolve().parents for p in written)
        assert any(p.name == "call.json" for p in written)
        assert all(len(part.encode()) <= 255 for p in written for part in p.relative_to(tmp_path).parts)


@pytest.mark.slow
def test_hostile_strings_reach_no_file_and_no_terminal_raw_and_no_megabytes(tmp_path):
    out = tmp_path / "out"
    done = _certify(out, f"{MISBEHAVING}:hostile_strings", "--profile", "smoke", "--workers", "2", "-k", "RT_002 or PERF_003 or (NUM and add and float32)")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "\x1b" not in done.stdout and "\x1b" not in done.stderr  # no escape sequence reaches the console
    (report_dir,) = out.iterdir()  # the replays too: named after the backend as requested, not its own name
    files = {p.name: p.read_bytes() for p in report_dir.iterdir() if p.is_file()}
    assert set(files) >= {"report.json", "report.md", "report.html", "junit.xml"}
    for name, data in files.items():
        text = data.decode("utf-8")  # well-formed UTF-8: no lone surrogate got through
        assert "\x1b" not in text and "\x00" not in text and "\x07" not in text, name
        assert len(data) < 1_000_000, (name, len(data))  # a megabyte string is capped, with a note
    import xml.etree.ElementTree as ET

    ET.fromstring(files["junit.xml"])
    html, md = files["report.html"].decode(), files["report.md"].decode()
    assert "<script>alert" not in html
    import re

    prose = re.sub(r"`[^`\n]*`", "", md)  # code spans show markup as text
    assert "<script>" not in prose and "](javascript:" not in prose  # markup and links escaped, not rendered
    report = json.loads(files["report.json"])
    assert report["backend"]["name"].startswith("hostile") and "truncated" in report["backend"]["description"]
    assert _verify(report_dir / "report.json") == 5  # valid, unsigned
