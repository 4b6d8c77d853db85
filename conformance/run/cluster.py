"""Certification across machines: the shards of one run on a Ray cluster, and the checks of a
shard that never came back recorded as not run.

``python -m conformance certify NAME --cluster ADDRESS --shards K`` sends K tasks to Ray. Each
task is a whole supervised shard, ``python -m conformance certify NAME --shard I/K`` in a process
of its own on a node, with its own pytest-xdist workers, watchdog and supervisor: every guarantee
of a run on one machine holds on each node (a crash or a hang costs one result, a spent budget
ends with results). Ray adds what one machine lacks: the nodes that exist, where each shard runs
(as many at once as the nodes' CPUs hold, so K may exceed the node count), the task started again
on another node when its node dies (``max_retries``), and the results documents carried back to
the driver as bytes. What the driver does with them (write them into OUT/NAME/results, merge,
verify, gate) is the CLI's ``merge``.

pytest-xdist's own remote workers (``--tx ssh=...``, ``socket=...``) were the other engine at
hand. They send single checks to remote interpreters the controller drives, so a node that dies
takes the controller's session with it, and the files they need travel by rsync (deprecated in
xdist). A whole shard per task keeps the supervision on the node, next to the processes it
watches.

Every node needs the same harness, backend and torch installed as the driver, and the working
directory (``--cluster-workdir``, default the driver's) present: relative paths given to certify
(``--specs``, a profiles file) are read there. Ray is imported only by the functions the CLI calls
for ``--cluster``; installing it is ``pip install 'torch-backend-conformance[cluster]'``.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.results import CaseResult, Category, result_id
from conformance.run import invocation, supervision, transport
from conformance.run.journal import result_entries

RAY_MISSING = "--cluster needs Ray on this machine and on every node: pip install 'torch-backend-conformance[cluster]'"
DEFAULT_RETRIES = 3
"""Times Ray starts a shard again after its node (or its certify process) died."""
OUTPUT_TAIL = 20_000
"""Characters of a shard's console output kept (logs/shard-I-of-K.log on the driver)."""
COLLECT_TIMEOUT = 600


class ClusterError(Exception):
    """The cluster cannot be used as asked (Ray missing, no cluster at the address, no node with
    the CPUs a shard needs): a usage error, before any shard runs."""


class ShardFailed(Exception):
    """A shard's certify ended without its results (killed, or an exit status certify never gives
    after a run). Raised on the node, so Ray starts the task again (``retry_exceptions``)."""


@dataclass
class ShardResult:
    """What came back of one shard: its results documents, or why there are none."""

    index: int
    total: int
    documents: dict[str, dict[str, bytes]] = field(default_factory=dict)
    """Report directory name (one per backend of the run) -> results file name -> its bytes."""
    node: str | None = None
    """The Ray node id of the node the shard finished on."""
    address: str | None = None
    """That node's IP address."""
    status: int | None = None
    """The shard's certify exit status (0: no failing check, 1: some); None without results."""
    seconds: float = 0.0
    """From submission to the result, retries and queueing included."""
    error: str | None = None
    """Why the shard has no results after every try (its checks are recorded not run)."""
    output: str = ""
    """The tail of the shard's console output."""

    @property
    def name(self) -> str:
        return f"{self.index}/{self.total}"

    def summary(self) -> dict[str, Any]:
        """Everything but the documents and the output, for logs/cluster.json."""
        return {"shard": self.name, "node": self.node, "address": self.address, "status": self.status,
                "seconds": round(self.seconds, 1), "error": self.error}  # fmt: skip


@dataclass(frozen=True)
class Layout:
    """How a run is spread: K shards, each reserving ``cpus`` CPUs of a node, on these nodes."""

    shards: int
    cpus: int
    nodes: tuple[dict[str, Any], ...]
    """The alive nodes with at least ``cpus`` CPUs: id, address, CPUs."""


def connect(address: str):
    """Ray, connected to the cluster at ``address`` (a Ray address, ``auto`` for the one this machine
    belongs to, ``local`` for a Ray started here for this run)."""
    try:
        import ray
    except ImportError:
        raise ClusterError(RAY_MISSING) from None
    import logging

    options: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
    try:
        if address == "local":
            ray.init(include_dashboard=False, **options)
        else:
            ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ClusterError(f"--cluster {address}: cannot connect to a Ray cluster there ({exc})") from None
    return ray


def layout(ray, shards: int | None, cpus: int | None) -> Layout:
    """K (default twice the nodes that can run a shard, so one slow shard does not hold the run
    back and a dead node's retry costs half a node's share) and the CPUs per shard (default half
    the smallest node's, so each node runs two at once)."""
    alive = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
    if not alive:
        raise ClusterError("the Ray cluster has no alive node with a CPU to run a shard on")
    per_node = sorted(int(n["Resources"]["CPU"]) for n in alive)
    cpus = cpus or max(1, per_node[0] // 2)
    if cpus > per_node[-1]:
        raise ClusterError(f"--shard-cpus {cpus}: no node of the cluster has that many CPUs (the largest has {per_node[-1]})")
    able = [n for n in alive if n["Resources"]["CPU"] >= cpus]
    nodes = tuple({"id": n["NodeID"], "address": n.get("NodeManagerAddress"), "cpus": int(n["Resources"]["CPU"])} for n in able)
    return Layout(shards=shards or 2 * len(able), cpus=cpus, nodes=nodes)


def run_shards(
    ray,
    argv: Sequence[str],
    plan: Layout,
    *,
    retries: int,
    workdir: str,
    dirs: Sequence[str],
    say: Callable[[ShardResult], None] = lambda result: None,
) -> tuple[list[ShardResult], bool]:
    """Submit the K shards, wait for them all; (their results by index, whether the wait was
    interrupted). A shard that failed every try, or was cancelled by the interruption, comes back
    with ``error`` set and no documents."""
    task = ray.remote(run_shard)
    options = {
        "num_cpus": plan.cpus,
        "max_retries": retries,
        "retry_exceptions": [ShardFailed],
        # Over the nodes rather than packed on the first: shards are long and alike.
        "scheduling_strategy": "SPREAD",
    }
    submitted = time.monotonic()
    pending = {
        task.options(**options, name=f"conformance shard {i}/{plan.shards}").remote(list(argv), i, plan.shards, workdir, list(dirs)): i
        for i in range(1, plan.shards + 1)
    }
    done: dict[int, ShardResult] = {}
    interrupted = False
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                index = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    result = ShardResult(index, plan.shards, error=f"no results after {retries + 1} tries: {_reason(exc)}")
                result.seconds = time.monotonic() - submitted
                done[index] = result
                say(result)
    except KeyboardInterrupt:
        interrupted = True
        for ref, index in pending.items():
            ray.cancel(ref, force=True)
            done[index] = ShardResult(index, plan.shards, seconds=time.monotonic() - submitted, error="the run was interrupted")
    return [done[i] for i in sorted(done)], interrupted


def _reason(exc: BaseException) -> str:
    """The first line of what ended a task: a ShardFailed's own message, or Ray's (node died,
    worker crashed, cancelled)."""
    cause = getattr(exc, "cause", None)
    text = str(cause) if isinstance(cause, ShardFailed) else str(exc)
    return transport.clean_text(text.strip().splitlines()[0] if text.strip() else type(exc).__name__, 500)


def run_shard(argv: list[str], index: int, total: int, workdir: str, dirs: list[str]) -> ShardResult:
    """On a node: ``certify ARGV --shard INDEX/TOTAL`` into a scratch output directory; its results
    documents come back as bytes."""
    import ray

    context = ray.get_runtime_context()
    address = ray.util.get_node_ip_address()
    if not Path(workdir).is_dir():
        raise ShardFailed(f"node {address}: no working directory {workdir} (--cluster-workdir): every node needs the project there")
    with tempfile.TemporaryDirectory(prefix=f"conformance-shard-{index}-of-{total}-") as out:
        command = [sys.executable, "-m", "conformance", "certify", *argv, "--shard", f"{index}/{total}", "--output", out]
        done = subprocess.run(
            command, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
            preexec_fn=_die_with(),  # noqa: PLW1509 - the child only calls a function resolved before the fork
        )  # fmt: skip
        documents = {d: {p.name: p.read_bytes() for p in sorted((Path(out) / d / "results").glob("*.json"))} for d in dirs}
    output = done.stdout[-OUTPUT_TAIL:]
    if done.returncode not in (0, 1) or not any(documents.values()):
        last = " | ".join(line for line in output.strip().splitlines()[-3:])
        raise ShardFailed(f"shard {index}/{total} on node {address}: certify exited {done.returncode} without results: {last}")
    return ShardResult(index, total, documents, node=context.get_node_id(), address=address, status=done.returncode, output=output)


def _die_with():
    """A ``preexec_fn`` that has the kernel SIGKILL the shard's certify when the Ray worker running
    it dies (its node removed, the task cancelled): certify's own sessions then die with it. The
    libc function is looked up here, before the fork; a Ray worker has threads, and the child of a
    threaded process should only call what is already resolved."""
    import ctypes
    import signal

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: the shard is not tied to its worker
        return None
    pr_set_pdeathsig = 1
    return lambda: prctl(pr_set_pdeathsig, signal.SIGKILL)


def not_run_documents(
    run: invocation.Run,
    reason: str,
    *,
    dirs: Mapping[str, str],
    selection: str | None,
    extra: Sequence[str],
    perf: bool,
    env: Mapping[str, str],
) -> dict[str, dict[str, bytes]]:
    """Results documents recording every check of ``run``'s shard SKIP "not run: REASON", by report
    directory. The shard's checks are those its own certify would have collected: a pytest
    collection with the same options on this machine (the split is by check id, the same on every
    machine), which also writes the documents' header (backend, spec, harness, environment)."""
    index, total = invocation.parse_shard(run.shard or "")
    tag = f"not-run-shard-{index}-of-{total}"
    with tempfile.TemporaryDirectory(prefix="conformance-not-run-") as scratch:
        out, run_dir = Path(scratch) / "out", Path(scratch) / "run"
        run_dir.mkdir()
        expression = selection if perf else ("not test_PERF" if selection is None else f"(not test_PERF) and ({selection})")
        command = [
            sys.executable, "-m", "pytest", *dataclasses.replace(run, out=out).common(), "-p", "no:xdist", "--collect-only", "-q",
            "--conformance-tag", tag, "--conformance-run-dir", str(run_dir), *(["-k", expression] if expression else []), *extra,
        ]  # fmt: skip
        done = subprocess.run(command, env=dict(env), capture_output=True, text=True, errors="replace", timeout=COLLECT_TIMEOUT)
        plan = supervision.read_plan(run_dir)
        headers = {}
        for name, directory in dirs.items():
            path = out / directory / "results" / f"{tag}.json"
            if path.exists():
                headers[name] = json.loads(path.read_text())
    if done.returncode not in (0, 5) or len(headers) != len(dirs):
        raise ClusterError(f"cannot list the checks of shard {run.shard} (pytest exit status {done.returncode}): "
                           + transport.clean_text((done.stdout + done.stderr).strip()[-2000:]))  # fmt: skip
    first = next(iter(dirs))
    records: dict[str, list[CaseResult]] = {name: [] for name in dirs}
    for nodeid, meta in plan.items():
        record = CaseResult(**meta)
        record.update(nodeid=nodeid, id=result_id(meta), category=Category.SKIP, message=f"not run: {reason}", duration_s=0.0)
        records[meta.get("backend") if meta.get("backend") in records else first].append(record)
    return {
        dirs[name]: {f"{tag}.json": transport.dumps_document({**headers[name], "results": result_entries(found)}).encode()}
        for name, found in records.items()
    }
