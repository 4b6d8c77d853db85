"""Preprocess in fresh Python processes (PRE-008): one per hash seed (PYTHONHASHSEED), each loading
the backend by the name this run did and rebuilding a contract program, and each writing the
digests of what preprocess returned, so a blob that follows the order of hashed strings shows.

Two fresh interpreters importing torch take seconds, the longest of the contract checks. ``certify``
starts them before the checks' session (``Prestart``), so they run beside the workers' start-up
instead of after it: such a process preprocesses the program the check will run (``runnable``'s
choice, made the same way), and the check reads its digests (``prestarted_runs``). Where those are
missing or are of another program, the check starts its own (``preprocess_in_fresh_processes``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from conformance.driver import Driver
from conformance.results import Category, CheckFailure
from conformance.run.supervision import die_with_parent

from ._support import contract_program, first_preprocessed

HASH_SEEDS = (0, 12345)
FRESH_PROCESS_TIMEOUT = 300.0
RUNNABLE = "*"
"""The program name a fresh process takes for "the first contract program the backend preprocesses"."""
PRESTART_ENV = "CONFORMANCE_PRESTARTED_FRESH"
"""How ``certify`` tells the checks' processes of the prestarted fresh processes (JSON: the backend's spec
and the directory they write in)."""


def backend_spec(request) -> str | None:
    """The name the run loaded the checked backend by (``--conformance-backend``), for a fresh process."""
    callspec = getattr(request.node, "callspec", None)
    spec = callspec.params.get("backend") if callspec else None
    return spec if isinstance(spec, str) else None


def _digest_result(result) -> dict[str, Any]:
    import hashlib

    named = result.data_store_output.entries if result.data_store_output else {}
    dhm = result.debug_handle_map
    return {
        "processed_bytes": hashlib.sha256(result.processed_bytes).hexdigest(),
        "size": len(result.processed_bytes),
        "debug_handle_map": None if dhm is None else repr(sorted((repr(k), tuple(v)) for k, v in dhm.items())),
        "named_data": {str(k): [hashlib.sha256(bytes(e.data)).hexdigest(), e.alignment] for k, e in sorted(named.items())},
    }


def fresh_process_main(argv: list[str] | None = None) -> None:
    """Entry point of one fresh process: preprocess one contract program (``RUNNABLE``: the first
    the backend takes), write digests as JSON lines."""
    spec, program_name, out_path = argv if argv is not None else sys.argv[1:4]

    def emit(record: dict) -> None:
        with open(out_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")

    from conformance.discovery import load

    backend = load(spec)
    if program_name != RUNNABLE:
        exported = contract_program(program_name).fresh()
    emit({"stage": "preprocess"})
    try:
        if program_name == RUNNABLE:
            program, result = first_preprocessed(backend)
            program_name = program.name
        else:
            result, _ = Driver(backend).preprocess(exported)
    except CheckFailure as exc:
        emit({"stage": "done", "program": program_name, "failure": exc.category.value, "message": exc.message})
        return
    emit({"stage": "done", "program": program_name, **_digest_result(result)})


def _start(spec: str, program_name: str, seeds, directory: Path, *, tied: bool = False) -> dict[int, subprocess.Popen]:
    """One fresh process per seed, writing ``seed-N.jsonl`` (records) and ``seed-N.log`` (its output)
    in ``directory``; ``tied``: each is killed when this process dies (only from a single-threaded one)."""
    code = "import sys; from conformance.checks._fresh import fresh_process_main; fresh_process_main(sys.argv[1:])"
    path = os.pathsep.join(p if p else os.getcwd() for p in sys.path)
    env = {k: v for k, v in os.environ.items() if k != PRESTART_ENV}
    procs = {}
    try:
        for seed in seeds:
            log = open(directory / f"seed-{seed}.log", "wb")  # a file: a chatty backend never blocks on a pipe
            try:
                procs[seed] = subprocess.Popen(
                    [sys.executable, "-c", code, spec, program_name, str(directory / f"seed-{seed}.jsonl")],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    env=dict(env, PYTHONHASHSEED=str(seed), PYTHONPATH=path), cwd=os.getcwd(),
                    preexec_fn=die_with_parent if tied else None,  # noqa: PLW1509 - see tied
                )  # fmt: skip
            finally:
                log.close()
    except BaseException:
        _kill(procs.values())
        raise
    return procs


def _kill(procs) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _wait(proc: subprocess.Popen, deadline: float) -> bool:
    """Wait for ``proc`` until ``deadline`` (time.monotonic), killing it past that; whether it was killed."""
    try:
        proc.wait(timeout=max(deadline - time.monotonic(), 1.0))
        return False
    except subprocess.TimeoutExpired:
        _kill([proc])
        return True


def _records(directory: Path, seed: int) -> list[dict]:
    """What the fresh process of ``seed`` wrote (``fresh_process_main``'s JSON lines), in order."""
    out = directory / f"seed-{seed}.jsonl"
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()] if out.exists() else []


def _outcome(spec: str, program_name: str, seed: int, directory: Path, returncode: int | None, timed_out: bool) -> dict:
    """The digests one fresh process wrote, or the CheckFailure its end was: one that died before
    preprocess is the harness's failure (HARNESS_ERROR); one that died or hung in preprocess is the
    backend's (CRASH, TIMEOUT)."""
    records = _records(directory, seed)
    stages = {r["stage"] for r in records}
    if "done" in stages:
        return next(r for r in records if r["stage"] == "done")
    log = directory / f"seed-{seed}.log"
    tail = (log.read_bytes() if log.exists() else b"").decode("utf-8", "replace").strip()[-1500:]
    where = f"a fresh process (PYTHONHASHSEED={seed}) preprocessing {program_name}"
    if "preprocess" not in stages:
        raise CheckFailure(
            Category.HARNESS_ERROR,
            f"{where} could not load backend {spec!r} or rebuild the program (exit status {returncode}): {tail or 'no output'}",
        )
    if timed_out:
        raise CheckFailure(Category.TIMEOUT, f"{where}: preprocess did not return within {FRESH_PROCESS_TIMEOUT:.0f} s")
    raise CheckFailure(Category.CRASH, f"{where}: the process died in preprocess (exit status {returncode}): {tail or 'no output'}")


def preprocess_in_fresh_processes(spec: str, program_name: str, seeds=HASH_SEEDS) -> dict[int, dict]:
    """Preprocess contract program ``program_name`` with backend ``spec`` in one fresh Python
    process per hash seed (PYTHONHASHSEED), concurrently; the digests each process wrote, by seed.

    The processes load the backend by the name this run did, from the same working directory
    and import path, and rebuild the program the same way (``contract_program``, from the
    program cache when it is on disk)."""
    with tempfile.TemporaryDirectory(prefix="conformance-fresh-") as tmp:
        directory = Path(tmp)
        procs = _start(spec, program_name, seeds, directory)
        try:
            deadline = time.monotonic() + FRESH_PROCESS_TIMEOUT
            results = {}
            for seed, proc in procs.items():
                timed_out = _wait(proc, deadline)
                results[seed] = _outcome(spec, program_name, seed, directory, proc.returncode, timed_out)
            return results
        finally:
            _kill(procs.values())


class Prestart:
    """PRE-008's fresh processes for one backend, started by ``certify`` before the checks' session
    (``RUNNABLE``: the program the check will run), under a small process of their own
    (``prestart_main``) that waits for them, kills one past ``FRESH_PROCESS_TIMEOUT`` and writes
    each one's end to ``seed-N.exit``, which the check reads; so the command stays single-threaded.
    ``stop`` ends what still runs when the checks are over (a check that never came); a killed
    command takes them with it (``die_with_parent``)."""

    def __init__(self, spec: str):
        self.spec = spec
        self.tmp = tempfile.TemporaryDirectory(prefix="conformance-prestarted-fresh-", ignore_cleanup_errors=True)
        self.directory = Path(self.tmp.name)
        code = "import sys; from conformance.checks._fresh import prestart_main; prestart_main(sys.argv[1:])"
        with open(self.directory / "prestart.log", "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code, spec, str(self.directory)], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,  # noqa: PLW1509 - certify's command is single-threaded
            )  # fmt: skip

    def environment(self) -> dict[str, str]:
        """What the checks' processes need to find these processes' digests."""
        return {PRESTART_ENV: json.dumps({"spec": self.spec, "directory": str(self.directory)})}

    def stop(self) -> None:
        _kill([self.proc])  # its fresh processes die with it
        self.tmp.cleanup()


def prestart_main(argv: list[str]) -> None:
    """The process ``Prestart`` starts: the fresh processes, each one's end written when it comes."""
    spec, directory = argv[0], Path(argv[1])
    procs = _start(spec, RUNNABLE, HASH_SEEDS, directory, tied=True)
    deadline = time.monotonic() + FRESH_PROCESS_TIMEOUT
    for seed, proc in procs.items():
        _wait(proc, deadline)
        partial = directory / f"seed-{seed}.exit.partial"
        partial.write_text(str(proc.returncode))
        partial.replace(directory / f"seed-{seed}.exit")  # whole or absent: the check reads it as soon as it exists


def prestarted_runs(spec: str, program_name: str, seeds=HASH_SEEDS) -> dict[int, dict] | None:
    """The digests of the fresh processes ``certify`` started before the session for backend
    ``spec`` (``Prestart``), once they have ended; None where there are none, or where a process
    did not preprocess ``program_name`` to the end (another choice of program, a failure, a crash:
    a prestarted process runs in the command's environment, not a worker's, so the check starts
    its own and judges what they do)."""
    try:
        given = json.loads(os.environ.get(PRESTART_ENV) or "{}")
    except ValueError:
        return None
    if given.get("spec") != spec:
        return None
    directory = Path(given["directory"])
    deadline = time.monotonic() + FRESH_PROCESS_TIMEOUT + 30
    runs = {}
    for seed in seeds:
        while not (directory / f"seed-{seed}.exit").exists():
            if time.monotonic() > deadline or not directory.is_dir():
                return None
            time.sleep(0.05)
        done = next((r for r in _records(directory, seed) if r["stage"] == "done"), None)
        if done is None or "failure" in done or done.get("program") != program_name:
            return None
        runs[seed] = done
    return runs
