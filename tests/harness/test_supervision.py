"""The pieces the supervisor stands on: workers replaced after a suspicious check, the last words
of a dead process, journals that survive a torn write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conformance.run import supervision
from conformance.run.journal import complete_documents, read_journal

RAW_CHECKS = '''
import os
import threading
import time


def test_RT_001_a_first(backend, result):
    result.set(measurements={"pid": os.getpid()})


def test_RT_001_b_times_out(backend, result):
    result.set(measurements={"pid": os.getpid()})
    time.sleep(30)  # past --timeout: in a real run, an import interrupted half-way


def test_RT_001_c_after_the_timeout(backend, result):
    result.set(measurements={"pid": os.getpid()})


def test_RT_001_d_leaves_a_thread(backend, result):
    result.set(measurements={"pid": os.getpid()})
    threading.Thread(target=time.sleep, args=(3,), daemon=False).start()


def test_RT_001_e_after_the_thread(backend, result):
    result.set(measurements={"pid": os.getpid()})
'''


def _session(tmp_path: Path, selection: str) -> dict[str, dict]:
    """Run RAW_CHECKS matching ``selection`` on one xdist worker: check name -> result."""
    (tmp_path / "test_raw.py").write_text(RAW_CHECKS)
    out = tmp_path / f"out-{len(list(tmp_path.iterdir()))}"
    command = [
        sys.executable, "-m", "pytest", "test_raw.py", "--conformance-backend", "reference", "--conformance-profile", "seeded",
        "--conformance-out", str(out), "-n", "1", "--timeout", "3", "-o", "timeout_func_only=true",
        "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", str(tmp_path), "-k", selection,
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    (path,) = (out / "reference" / "results").glob("*.json")
    results = {r["id"].removeprefix("test_RT_001_"): r for r in json.loads(path.read_text())["results"]}
    assert "crashed while running" not in done.stdout  # a replaced worker's next check is put back, not lost
    return results


@pytest.mark.slow
def test_a_worker_is_replaced_after_a_timeout_and_no_check_is_lost(tmp_path):
    results = _session(tmp_path, "a_first or b_times or c_after")
    assert set(results) == {"a_first", "b_times_out", "c_after_the_timeout"}
    assert [results[k]["category"] for k in sorted(results)] == ["PASS", "TIMEOUT", "PASS"]
    pid = {k: r["measurements"]["pid"] for k, r in results.items()}
    assert pid["a_first"] == pid["b_times_out"]  # one worker until the timeout ...
    assert pid["c_after_the_timeout"] != pid["b_times_out"]  # ... then a fresh one


@pytest.mark.slow
def test_a_worker_is_replaced_after_a_check_leaves_a_thread_running(tmp_path):
    results = _session(tmp_path, "d_leaves or e_after")
    assert [results[k]["category"] for k in sorted(results)] == ["PASS", "PASS"]
    assert results["e_after_the_thread"]["measurements"]["pid"] != results["d_leaves_a_thread"]["measurements"]["pid"]


DYING = """
import os, sys
sys.path.insert(0, {root!r})
from conformance.run import supervision
supervision.arm({run_dir!r})

def execute():
    supervision.stage("execute")
    import ctypes
    ctypes.string_at(0)

execute()
"""


def test_last_words_name_the_stage_the_frame_and_the_fatal_signal(tmp_path):
    backend_dir = tmp_path / "somebackend"
    backend_dir.mkdir()
    script = backend_dir / "runtime.py"
    run_dir = tmp_path / "run"
    root = str(Path(__file__).resolve().parents[2])
    script.write_text(textwrap.dedent(DYING.format(root=root, run_dir=str(run_dir))))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True)
    how, name = supervision.describe_exit(proc.returncode)
    assert name == "SIGSEGV" and "signal 11" in how
    words = supervision.last_words(run_dir, _only_pid(run_dir))
    assert words.stage == "execute"
    assert words.fatal == "Segmentation fault"
    assert words.where == "somebackend/runtime.py:11 in <module>" or "runtime.py" in words.where
    assert "string_at" in words.innermost
    assert "during execute" in words.describe()


def _only_pid(run_dir: Path) -> int:
    (stage,) = run_dir.glob("*.stage")
    return int(stage.stem)


def test_a_journal_with_a_torn_last_line_still_becomes_a_results_document(tmp_path):
    header = {"schema": "x", "run": {"tag": "checks", "started": "2026-01-01T00:00:00+00:00"}, "backend": {"name": "b"}}
    passed = {"nodeid": "t.py::a", "clause": "RT-001", "test": "test_RT_001_a", "category": "PASS"}
    failed = {"nodeid": "t.py::b", "clause": "RT-002", "test": "test_RT_002_b", "category": "CRASH", "message": "gone"}
    teardown_after_failure = {**failed, "category": "PASS"}
    journal = tmp_path / "checks.journal"
    lines = [json.dumps(header), json.dumps(passed), json.dumps(failed), json.dumps(teardown_after_failure), '{"nodeid": "t.py::c", "categ']
    journal.write_text("\n".join(lines))
    _, records = read_journal(journal)
    assert set(records) == {"t.py::a", "t.py::b"}
    assert records["t.py::b"].category.value == "CRASH"  # a later non-failure does not hide a failure
    (written,) = complete_documents(tmp_path)
    document = json.loads(written.read_text())
    assert [r["id"] for r in document["results"]] == ["test_RT_001_a", "test_RT_002_b"]
    assert "nodeid" not in document["results"][0] and document["run"]["finished"]
    assert complete_documents(tmp_path) == []  # once


SLOW_PACKAGE = {
    "__init__.py": "from .done import VALUE\nfrom . import slow\n",  # binds pkg.done only when done.py loads
    "done.py": "VALUE = 1\n",
    "slow.py": "import time\ntime.sleep(1.0)\n",
}
TIMED_IMPORT = '''
import signal, sys, time
from conformance.run import supervision

class TimedOut(BaseException):
    pass

def timed_out():
    raise TimedOut()

deferring = sys.argv[1] == "deferring"
signal.signal(signal.SIGALRM, supervision.timeout_handler(timed_out) if deferring else lambda s, f: timed_out())
signal.setitimer(signal.ITIMER_REAL, 0.2)  # while slow.py sleeps, inside the import of pkg
start = time.monotonic()
try:
    import pkg
    time.sleep(5)  # the import finished: the deferred timeout ends this wait
except TimedOut:
    print("timed out after", round(time.monotonic() - start, 1), "s")
signal.setitimer(signal.ITIMER_REAL, 0)
import pkg
print("pkg.done.VALUE =", pkg.done.VALUE)
'''


def _import_with_a_timeout(tmp_path, handler: str) -> subprocess.CompletedProcess:
    package = tmp_path / handler / "pkg"
    package.mkdir(parents=True)
    for name, text in SLOW_PACKAGE.items():
        (package / name).write_text(text)
    path = os.pathsep.join([str(package.parent), str(Path(__file__).resolve().parents[2])])
    return subprocess.run([sys.executable, "-c", TIMED_IMPORT, handler], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": path})


@pytest.mark.slow
def test_a_timeout_never_leaves_an_import_half_done(tmp_path):
    """The per-check timeout (supervision.timeout_handler, the plugin's SIGALRM handler) waits for an
    import it falls into: raised inside one, it leaves the package without the submodules it had
    already imported (PERF-003 after a PERF-001 timeout: "module 'torch._dynamo' has no attribute
    'utils'"). The plain handler shows the damage; the deferring one ends the check after the import."""
    plain = _import_with_a_timeout(tmp_path, "plain")
    assert "timed out after 0.2 s" in plain.stdout
    assert "AttributeError: module 'pkg' has no attribute 'done'" in plain.stderr

    deferring = _import_with_a_timeout(tmp_path, "deferring")
    assert deferring.returncode == 0, deferring.stderr
    assert "timed out after 1.0 s" in deferring.stdout  # when the import was done, not 4 s later
    assert "pkg.done.VALUE = 1" in deferring.stdout


def test_an_import_is_recognized_by_its_frames(tmp_path, monkeypatch):
    import inspect

    (tmp_path / "frame_probe.py").write_text("import sys\nFRAME = sys._getframe()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import frame_probe

    try:
        assert supervision.importing(frame_probe.FRAME)  # a module's top-level code, run by the import
        assert not supervision.importing(inspect.currentframe())
    finally:
        sys.modules.pop("frame_probe", None)
