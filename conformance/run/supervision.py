"""What a process running checks leaves behind for whoever supervises it.

A check that kills its process (a segfault, an abort, ``os._exit``) or hangs it (native code
holding the GIL) cannot report its own result. So every process that runs checks keeps, in the
run directory the plugin was given (``--conformance-run-dir``, or its own):

- ``<pid>.json``, the *marker*: which check it is running and since when (removed when the
  check ends, so a marker left behind names the check the process died in);
- ``<pid>.stage``, the *beacon*: the contract call it is in (preprocess, init, execute,
  destroy), written by ``conformance.driver`` through a shared memory map, so it survives
  ``os._exit`` and SIGKILL and costs a memory write per call;
- ``<pid>.trace``, Python's faulthandler output: the stack of every thread on a fatal signal
  (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL) and on SIGUSR1, which the watchdog sends before
  it kills a hung process (faulthandler writes from its C handler, so even a thread holding
  the GIL in native code gets its stack dumped).

The watchdog (``kill_overdue``), the reader (``last_words``) and the record of a check whose
process died (``lost_record``) are shared by the pytest plugin's watchdog over xdist workers and
by the CLI's supervisor over whole sessions (``conformance.run.supervisor``).
"""

from __future__ import annotations

import faulthandler
import gc
import json
import mmap
import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.results import CaseResult, Category, result_id
from conformance.run import transport

STAGES = ("preprocess", "init", "execute", "destroy")
_BEACON_BYTES = 64
_TRACE_SIGNAL = signal.SIGUSR1

_beacon: mmap.mmap | None = None
_trace_file = None
_run_dir: Path | None = None


def run_dir() -> Path | None:
    return _run_dir


def arm(directory: str | os.PathLike | None = None) -> Path | None:
    """Start leaving traces in ``directory`` (the run directory the plugin was given); idempotent per process."""
    global _beacon, _trace_file, _run_dir
    if not directory:
        return None
    path = Path(directory)
    if _run_dir == path and _trace_file is not None:
        return path
    path.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    with open(path / f"{pid}.stage", "wb") as f:
        f.write(b"\0" * _BEACON_BYTES)
    with open(path / f"{pid}.stage", "r+b") as f:
        _beacon = mmap.mmap(f.fileno(), _BEACON_BYTES)
    _trace_file = open(path / f"{pid}.trace", "w")  # noqa: SIM115 - faulthandler needs it open for the process's life
    faulthandler.enable(file=_trace_file, all_threads=True)
    faulthandler.register(_TRACE_SIGNAL, file=_trace_file, all_threads=True, chain=False)
    try:  # a fatal signal must not write gigabytes of core dump
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):  # pragma: no cover - not Linux
        pass
    _run_dir = path
    return path


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the process that started it dies (a killed CLI
    must not leave sessions running its backend). Call it in the child."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


_HEAP_FROZEN = False
HEAP_THRESHOLDS = (2000, 20, 100)
"""gc thresholds in a process running checks (Python's are 700, 10, 10): with them the two workers of
a full certification of the reference spent 2.7 and 3.6 s collecting, against 6.7 and 5.3 s."""


def freeze_heap() -> None:
    """Before the checks run in this process: move what start-up made (PyTorch's, ExecuTorch's and
    hypothesis' modules, the collected items) out of the cyclic garbage collector's sight
    (``gc.freeze``). Each full collection would otherwise walk that heap again: 9 s of the two
    workers' CPU time over a full certification of the reference on 2 cores, a tenth of it.

    The collector's thresholds rise too (``HEAP_THRESHOLDS``): a frozen heap leaves the collector
    few long-lived objects to weigh new ones against, so its full collections came more often,
    and the checks' programs are cyclic garbage by the thousand (FX graphs and their nodes)."""
    global _HEAP_FROZEN
    gc.collect()
    gc.freeze()
    gc.set_threshold(*HEAP_THRESHOLDS)
    _HEAP_FROZEN = True


def thaw() -> None:
    """``gc.unfreeze()`` after a measurement that froze the heap of its own, and the start-up
    freeze again where this process had made one (``gc.unfreeze`` releases every frozen object)."""
    gc.unfreeze()
    if _HEAP_FROZEN:
        gc.collect()
        gc.freeze()


def stage(name: str) -> None:
    """Record the contract call this process is about to make (a no-op when not armed)."""
    if _beacon is not None:
        data = name.encode()[: _BEACON_BYTES - 1]
        _beacon[: len(data) + 1] = data + b"\0"


# -- the per-check timeout -------------------------------------------------------------------------


IMPORT_GRACE = 120.0
"""Seconds a check's timeout waits for an import it fell into to finish before it interrupts it anyway
(a hung import): importing torch._inductor or torch._dynamo on a loaded machine takes tens of seconds."""
IMPORT_RECHECK = 0.05
"""Seconds between looks at whether the import a timeout waits for has finished."""


def importing(frame) -> bool:
    """Whether the code ``frame`` runs (a signal handler's interrupted frame) is inside an import:
    a module's top-level code runs under importlib's ``_bootstrap`` frames."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


def timeout_handler(raise_timeout: Callable[[], None], *, grace: float = IMPORT_GRACE, recheck: float = IMPORT_RECHECK):
    """A SIGALRM handler that calls ``raise_timeout`` (which raises), except while the interrupted code
    is importing a module: then it re-arms the timer and raises once the import is done (at most
    ``grace`` seconds later).

    An exception raised inside an import leaves the package half-built: Python drops the package
    and the module it was running from sys.modules but keeps the submodules that had finished, and
    importing the package again binds none of them as its attributes. Every later check in the
    process then fails on the package (a PERF-001 timeout inside ``import torch._dynamo`` made
    PERF-003 fail with "module 'torch._dynamo' has no attribute 'utils'"; sympy's "no attribute
    'core'" is the same). A timed-out check ends a little later instead, with the imports whole."""
    deadline: list[float] = []

    def on_alarm(signum, frame) -> None:
        if importing(frame):
            now = time.monotonic()
            if not deadline:
                deadline.append(now + grace)
            if now < deadline[0]:
                signal.setitimer(signal.ITIMER_REAL, recheck)
                return
        raise_timeout()

    return on_alarm


# -- markers ---------------------------------------------------------------------------------------


def begin(nodeid: str) -> None:
    """This process starts running check ``nodeid``."""
    if _run_dir is None:
        return
    stage("")
    marker = _run_dir / f"{os.getpid()}.json"
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps({"nodeid": nodeid, "start": time.time(), "pid": os.getpid()}))
    os.replace(tmp, marker)


def end() -> None:
    if _run_dir is not None:
        (_run_dir / f"{os.getpid()}.json").unlink(missing_ok=True)


def running(directory: Path) -> list[dict]:
    """The markers of ``directory``: {nodeid, start, pid} of every check being run (or died in)."""
    found = []
    for marker in directory.glob("*.json"):
        try:
            info = json.loads(marker.read_text())
        except (OSError, ValueError):  # being replaced or just removed
            continue
        if isinstance(info, dict) and {"nodeid", "start", "pid"} <= info.keys():
            found.append(info)
    return found


PLAN = "plan.json"
"""In the run directory: every check a session collected, nodeid -> its parameters (the meta its
result id is made from), written once by the process that collects first."""


def write_plan(directory: Path, plan: dict[str, dict]) -> None:
    path = directory / PLAN
    if path.exists():
        return
    tmp = path.with_name(f".plan.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(plan))
    os.replace(tmp, path)


def read_plan(directory: Path) -> dict[str, dict]:
    """The plan a session wrote into ``directory``; empty when it wrote none (it collected nothing)."""
    try:
        return json.loads((directory / PLAN).read_text())
    except (OSError, ValueError):
        return {}


def forget(directory: Path, pid: int) -> None:
    """Remove what process ``pid`` left (after its death has been recorded)."""
    for suffix in (".json", ".stage", ".trace"):
        (directory / f"{pid}{suffix}").unlink(missing_ok=True)


# -- the watchdog's kill ----------------------------------------------------------------------------


def kill_overdue(directory: Path, limit: Callable[[dict], float], killed: dict[str, tuple[int, float]]) -> None:
    """Kill each process of ``directory`` whose check has run past ``limit(marker)`` seconds, once per
    check; ``killed`` gets the nodeid of each, with (pid, the seconds it had run)."""
    for info in running(directory):
        elapsed = time.time() - info["start"]
        if elapsed > limit(info) and info["nodeid"] not in killed:
            killed[info["nodeid"]] = (info["pid"], elapsed)
            kill(info["pid"])


def kill(pid: int, *, grace: float = 1.0) -> None:
    """SIGUSR1 (faulthandler dumps every thread's stack), then SIGKILL."""
    try:
        os.kill(pid, _TRACE_SIGNAL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        time.sleep(0.05)
        try:  # stop waiting as soon as the dump has been written
            os.kill(pid, 0)
        except ProcessLookupError:
            return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# -- reading what a dead process left --------------------------------------------------------------


@dataclass(frozen=True)
class LastWords:
    stage: str | None
    """The contract call the process was in (from the beacon), if any."""
    where: str | None
    """The first frame outside the harness on the check's stack (file:line in function)."""
    innermost: str | None
    """The innermost frame of that stack."""
    fatal: str | None
    """faulthandler's headline ("Segmentation fault", "Aborted", ...), if a fatal signal was caught."""

    def describe(self) -> str:
        parts = []
        if self.stage:
            parts.append(f"during {self.stage}")
        if self.where:
            parts.append(f"at {self.where}")
        if self.innermost and self.innermost != self.where:
            parts.append(f"innermost frame {self.innermost}")
        return ", ".join(parts)


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+) in (?P<func>\S+)')
_HARNESS = str(Path(__file__).resolve().parent.parent)
_MACHINERY = ("/_pytest/", "/pytest/", "/pluggy/", "/hypothesis/", "/xdist/", "/execnet/", "/pytest_timeout", "/pytest_benchmark/", "/runpy.py", "/threading.py")


def _machinery(path: str) -> bool:
    return path.startswith((_HARNESS, "<")) or any(m in path for m in _MACHINERY)


def last_words(directory: Path, pid: int) -> LastWords:
    stage_name = None
    try:
        raw = (directory / f"{pid}.stage").read_bytes().split(b"\0", 1)[0]
        stage_name = raw.decode(errors="replace") or None
    except OSError:
        pass
    try:
        text = (directory / f"{pid}.trace").read_text(errors="replace")
    except OSError:
        text = ""
    fatal = None
    match = re.search(r"Fatal Python error: ([^\n]+)", text)
    if match:
        fatal = match.group(1).strip()
    frames = _main_thread_frames(text)
    where = innermost = None
    if frames:
        innermost = _frame_text(frames[0])
        # Most recent call first: the outermost frame that is neither the harness nor the test
        # machinery around it is where the harness called into the backend.
        outside = [f for f in frames if not _machinery(f["file"])]
        where = _frame_text(outside[-1]) if outside else None
    return LastWords(stage_name, where, innermost, fatal)


def _main_thread_frames(text: str) -> list[dict]:
    """The frames of the thread faulthandler marks current (or, from SIGUSR1, the main thread's)
    in its last dump, most recent call first."""
    dumps = re.split(r"\n(?=(?:Fatal Python error|Current thread|Thread 0x))", "\n" + text)
    blocks = [b for b in dumps if b.startswith(("Current thread", "Thread 0x"))]
    if not blocks:
        return []
    current = [b for b in blocks if b.startswith("Current thread")]
    block = current[-1] if current else blocks[-1]
    frames = []
    for line in block.splitlines()[1:]:
        m = _FRAME.match(line)
        if m:
            frames.append(m.groupdict())
    return frames


def _frame_text(frame: dict) -> str:
    path = frame["file"]
    short = "/".join(Path(path).parts[-2:]) if path else "?"
    return f"{short}:{frame['line']} in {frame['func']}"


def describe_exit(status: int | None) -> tuple[str, str | None]:
    """("was killed by SIGSEGV (signal 11)", "SIGSEGV") or ("exited with status 0", None)."""
    if status is None:
        return "vanished (exit status unknown)", None
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"was killed by {name} (signal {-status})", name
    return f"exited with status {status}", None


def lost_record(meta: dict, run_dir: Path | None, pid: int | None, status: int | None, *, killed_after: float | None = None) -> CaseResult:
    """The record of a check (``meta``: its parameters, as the plan or its setup report gave them)
    whose process died (``status``: its exit status, negative for a signal) or was killed by a
    watchdog after ``killed_after`` seconds."""
    words = last_words(run_dir, pid) if run_dir is not None and pid is not None else None
    where = words.describe() if words else ""
    stats: dict[str, Any] = {}
    if words is not None:
        stats.update({k: v for k, v in (("last_stage", words.stage), ("where", words.where), ("innermost_frame", words.innermost)) if v})
    if killed_after is not None:
        category = Category.TIMEOUT
        message = (
            f"no result after {killed_after:.0f} s; the process was killed (a hang the in-process timeout "
            "could not interrupt, e.g. native code holding the GIL)" + (f"; it was {where}" if where else "")
        )
        stats["killed_after_s"] = round(killed_after, 1)
    else:
        how, signame = describe_exit(status)
        category = Category.CRASH
        message = f"the process running this check {how}" + (f" {where}" if where else "") + "; the run went on in a new process"
        if words is not None and words.fatal:
            message += f" (faulthandler: {words.fatal})"
        stats["exit_status"] = status
        if signame:
            stats["signal"] = signame
    record = CaseResult(**meta)
    record.update(category=category, message=transport.clean_text(message), id=result_id(meta))
    record.stats.update(stats)
    return record
