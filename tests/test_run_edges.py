"""The run's edges that issue 28 found bent, one test each: a thread a backend leaves running after
destroy, the quantized profile without its quantizer, Ctrl-C while the supervisor reads a journal,
a write that is interrupted or killed half-way, text that reorders or breaks lines in a report,
and a backend name two installed distributions provide."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.report.model import load_report

ROOT = Path(__file__).resolve().parent.parent
MISBEHAVING = "tests/seeded/misbehaving.py"


@pytest.mark.slow
def test_a_thread_left_running_after_destroy_is_named_in_the_report(tmp_path):
    """One non-daemon thread, started by the first init and stopped by no destroy: no count grows
    with the cycles, yet no process that loaded the backend can exit. RT-016 names it."""
    out = tmp_path / "out"
    command = [sys.executable, "-m", "conformance", "certify", f"{MISBEHAVING}:leaves_a_thread", "--profile", "interface",
               "--output", str(out), "--workers", "1", "--skip-perf", "-k", "RT_016"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = out.glob("*/report.json")
    (result,) = [r for r in load_report(path)["results"] if r["clause"] == "RT-016"]
    assert result["category"] == "CONTRACT_VIOLATION", result
    assert "'backend-poller'" in result["message"] and "non-daemon" in result["message"], result
    assert result["stats"]["threads_left"] == ["backend-poller (non-daemon)"]
    md = (path.parent / "report.md").read_text()
    assert "backend-poller" in md


@pytest.mark.slow
def test_the_quantized_profile_without_its_quantizer_is_a_usage_error_in_seconds(tmp_path):
    """Without the executorch extra, every QNT check would end HARNESS_ERROR after the whole run
    (644 s measured); certify says so before it starts, naming the install command."""
    out = tmp_path / "out"
    without = "import sys; sys.modules['executorch'] = None; from conformance.cli import main; sys.exit(main(sys.argv[1:]))"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", without, "certify", "reference", "--profile", "quantized", "--output", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    assert "pip install 'torch-backend-conformance[executorch]'" in done.stderr and "--profile quantized" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert not out.exists()  # refused before anything was written
    assert elapsed < 60, elapsed


def test_ctrl_c_while_the_supervisor_reads_a_journal_ends_the_phase_as_interrupted(tmp_path, monkeypatch):
    """Ctrl-C reached the supervisor between sessions, in read_journal: a KeyboardInterrupt
    traceback instead of the partial report an interrupted run writes."""
    from conformance.run import journal, supervisor

    results = tmp_path / "results"
    results.mkdir()
    (results / f"checks{journal.JOURNAL_SUFFIX}").write_text('{"run": {"tag": "checks"}}\n')
    run = supervisor.Supervisor({"b": results}, hard_timeout=10, deadline=None, budget_s=None)
    monkeypatch.setattr(supervisor.Supervisor, "_session", lambda self, *a, **k: pytest.fail("no session may start"))
    real, pressed = supervisor.read_journal, []

    def read_journal(path):
        if not pressed:
            pressed.append(path)
            raise KeyboardInterrupt
        return real(path)

    monkeypatch.setattr(supervisor, "read_journal", read_journal)
    try:
        outcome = run.run_phase("checks", [], {}, in_process=True)
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C in read_journal escaped the supervisor (a traceback, no partial report)")
    assert pressed and outcome.interrupted and run.interrupted == "interrupted (Ctrl-C)"


def test_an_interrupted_write_leaves_no_temporary_file_and_a_killed_writers_is_swept(tmp_path, monkeypatch):
    from conformance.run.files import write_text_atomic

    target = tmp_path / "report.html"

    def half_then_ctrl_c(self, text, encoding=None):
        with open(self, "w", encoding=encoding) as f:
            f.write(text[: len(text) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", half_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        write_text_atomic(target, "x" * 1000)
    monkeypatch.undo()
    assert not list(tmp_path.iterdir()), list(tmp_path.iterdir())
    # A writer killed half-way (SIGKILL: nothing of it runs) leaves its file; the next write of the
    # same file sweeps it, and keeps one whose writer still runs.
    killed, running = (subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]) for _ in range(2))
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        for writer in (killed, running):
            (tmp_path / f".report.html.{writer.pid}.tmp").write_text("half of a rep")
        write_text_atomic(target, "whole")
        assert sorted(p.name for p in tmp_path.iterdir()) == [f".report.html.{running.pid}.tmp", "report.html"]
        assert target.read_text() == "whole"
    finally:
        running.kill()
        running.wait()


def test_bidirectional_controls_and_line_separators_reach_no_report_format():
    """U+202E shows what follows reversed (a verdict or a file name read backwards); U+2028 breaks a
    line that Markdown, a JUnit viewer or a terminal does not see. A backend controls its name,
    version and messages: none reaches report.md, report.html or junit.xml raw."""
    from conformance import specs as spec_module
    from conformance.report import html, junit, markdown
    from tests.reports.test_html import make_report

    tricky = "\u202edeifitrec\u2028\u2029\u2066x\u2069"

    def failing(r):
        if r["test"] == "test_NUM_001_matches_reference" and r.get("op") == "aten.add.Tensor":
            return {**r, "category": "MISMATCH", "message": f"max abs error 1.0 {tricky}"}
        return r

    report = make_report(f"bidi{tricky}", failing, version=f"1.0{tricky}")
    clauses = spec_module.load().clauses
    for name, text in (("md", markdown.render(report, clauses)), ("html", html.render(report, clauses)), ("junit", junit.render(report))):
        assert "deifitrec" in text, name  # the text is there ...
        for ch in "\u202e\u2028\u2029\u2066\u2069":
            assert ch not in text, (name, f"U+{ord(ch):04X}")  # ... without what reorders or breaks it


def test_two_distributions_naming_one_backend_block_that_name_only(tmp_path, monkeypatch):
    from conformance import discovery

    for dist in ("twin-a", "twin-b"):
        info = tmp_path / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[{discovery.GROUP}]\ntwin = {dist.replace('-', '_')}:backend\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert discovery.load("reference").name == "reference"  # another backend certifies as before
    assert discovery.source("reference")["kind"] == "entry point"
    assert "twin" not in discovery.available()
    with pytest.raises(discovery.DiscoveryError) as info:
        discovery.load("twin")
    assert "twin-a 1.0" in str(info.value) and "twin-b 1.0" in str(info.value)
