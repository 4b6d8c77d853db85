"""Preprocess in fresh Python processes (PRE-008): one per hash seed (PYTHONHASHSEED), each loading
the backend by the name this run did and rebuilding a contract program, and each writing the
digests of what preprocess returned, so a blob that follows the order of hashed strings shows."""

from __future__ import annotations

import os
import time
from typing import Any

from conformance.driver import Driver
from conformance.results import Category, CheckFailure

from ._support import contract_program

HASH_SEEDS = (0, 12345)
FRESH_PROCESS_TIMEOUT = 300.0


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
    """Entry point of one fresh process: preprocess one contract program, write digests as JSON lines."""
    import json
    import sys

    spec, program_name, out_path = argv if argv is not None else sys.argv[1:4]

    def emit(record: dict) -> None:
        with open(out_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")

    from conformance.discovery import load

    backend = load(spec)
    program = contract_program(program_name)
    exported = program.fresh()
    emit({"stage": "preprocess"})
    try:
        result, _ = Driver(backend).preprocess(exported)
    except CheckFailure as exc:
        emit({"stage": "done", "failure": exc.category.value, "message": exc.message})
        return
    emit({"stage": "done", **_digest_result(result)})


def preprocess_in_fresh_processes(spec: str, program_name: str, seeds=HASH_SEEDS) -> dict[int, dict]:
    """Preprocess contract program ``program_name`` with backend ``spec`` in one fresh Python
    process per hash seed (PYTHONHASHSEED), concurrently; the digests each process wrote, by seed.

    The processes load the backend by the name this run did, from the same working directory
    and import path, and rebuild the program the same way (``contract_program``, from the
    program cache when it is on disk). A process that dies before preprocess is the harness's
    failure (HARNESS_ERROR); one that dies or hangs in preprocess is the backend's (CRASH, TIMEOUT).
    """
    import json
    import subprocess
    import sys
    import tempfile

    code = "import sys; from conformance.checks._fresh import fresh_process_main; fresh_process_main(sys.argv[1:])"
    path = os.pathsep.join(p if p else os.getcwd() for p in sys.path)
    results: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="conformance-fresh-") as tmp:
        procs = {}
        try:
            for seed in seeds:
                env = dict(os.environ, PYTHONHASHSEED=str(seed), PYTHONPATH=path)
                out = os.path.join(tmp, f"seed-{seed}.jsonl")
                log = open(os.path.join(tmp, f"seed-{seed}.log"), "wb")  # a file: a chatty backend never blocks on a pipe
                try:
                    proc = subprocess.Popen(
                        [sys.executable, "-c", code, spec, program_name, out],
                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=os.getcwd(),
                    )
                finally:
                    log.close()
                procs[seed] = (proc, out)
            deadline = time.monotonic() + FRESH_PROCESS_TIMEOUT
            for seed, (proc, out) in procs.items():
                try:
                    proc.wait(timeout=max(deadline - time.monotonic(), 1.0))
                    timed_out = False
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    timed_out = True
                with open(os.path.join(tmp, f"seed-{seed}.log"), "rb") as fh:
                    output = fh.read()
                records = []
                if os.path.exists(out):
                    with open(out, encoding="utf-8") as fh:
                        records = [json.loads(line) for line in fh if line.strip()]
                stages = {r["stage"] for r in records}
                tail = output.decode("utf-8", "replace").strip()[-1500:]
                where = f"a fresh process (PYTHONHASHSEED={seed}) preprocessing {program_name}"
                if "done" in stages:
                    results[seed] = next(r for r in records if r["stage"] == "done")
                elif "preprocess" not in stages:
                    raise CheckFailure(
                        Category.HARNESS_ERROR,
                        f"{where} could not load backend {spec!r} or rebuild the program "
                        f"(exit status {proc.returncode}): {tail or 'no output'}",
                    )
                elif timed_out:
                    raise CheckFailure(
                        Category.TIMEOUT, f"{where}: preprocess did not return within {FRESH_PROCESS_TIMEOUT:.0f} s"
                    )
                else:
                    raise CheckFailure(
                        Category.CRASH,
                        f"{where}: the process died in preprocess (exit status {proc.returncode}): {tail or 'no output'}",
                    )
        finally:
            for proc, _ in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    return results
