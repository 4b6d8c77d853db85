"""Certification across machines (conformance.run.cluster): the shards of one run on a Ray cluster of
three local nodes (``ray.cluster_utils.Cluster``: a head that only schedules and two worker nodes
of one CPU each), merged into a report equal, check by check, to a run on one machine; a worker
node removed while its shard runs, and the shard run again on the other; and, without Ray, the
checks of a shard whose machine left no results recorded not run, so the merged report is not
certified.

The Ray tests need ``pip install '.[cluster]'`` (``nox -s cluster`` runs this module with it);
without Ray they are skipped and say so.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.report.model import VOLATILE_KEYS, records
from conformance.report.verify import verify_file

needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="ray is not installed: pip install 'torch-backend-conformance[cluster]' (nox -s cluster runs these tests)",
)

PROFILE = """
[profile.across-nodes]
description = "Contract clauses that take well under a second each, and three operators in two dtypes."
clauses = ["PRE-001", "PRE-002", "PRE-003", "PRE-004", "PRE-005", "PRE-006", "PRE-007", "RT-001", "RT-002", "RT-003", "RT-004",
           "RT-005", "RT-006", "RT-007", "RT-008", "RT-009", "RT-010", "RT-012", "RT-013", "RT-014", "RT-015", "RT-017", "RT-019",
           "REG-*", "DBG-002", "DBG-003", "NUM-*"]
ops = ["aten.add.Tensor", "aten.mul.Tensor", "aten.where.self"]
dtypes = ["float32", "int32"]
"""
"""A small selection: the shards' start-up (a Python with torch, pytest and an xdist worker), not
their checks, is what a shard costs here."""
RUN_TIMEOUT = 900


def certify(*args: str, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conformance", "certify", "reference", *args, "--output", str(out)],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)  # fmt: skip


def conformance(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conformance", *args], capture_output=True, text=True, timeout=RUN_TIMEOUT)


def said(done: subprocess.CompletedProcess) -> str:
    return (done.stdout[-4000:] + "\n" + done.stderr[-4000:]).strip()


def results(report: dict) -> dict[str, dict]:
    """Each check's record without what changes from run to run (durations, timestamps)."""
    return {r.id: {k: v for k, v in r.to_json().items() if k not in VOLATILE_KEYS} for r in records(report["results"])}


def load(out: Path) -> dict:
    return json.loads((out / "reference" / "report.json").read_text())


def verifies(out: Path) -> bool:
    outcome = verify_file(out / "reference" / "report.json")
    return outcome.ok


@pytest.fixture(scope="module")
def profile(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("profiles") / "profiles.toml"
    path.write_text(PROFILE, encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def single(profile, tmp_path_factory) -> dict:
    """The same selection certified on this machine alone, with one worker like each shard."""
    out = tmp_path_factory.mktemp("single")
    started = time.monotonic()
    done = certify("--profile", profile, "--workers", "1", out=out)
    assert done.returncode == 0, said(done)
    print(f"one machine, one worker: {time.monotonic() - started:.0f} s")
    report = load(out)
    assert report["verdict"]["certified"] and len(records(report["results"])) >= 30, report["verdict"]
    return report


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    # The head only schedules (no CPU for a shard): every shard runs on a worker node.
    started = time.monotonic()
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    workers = [nodes.add_node(num_cpus=1) for _ in range(2)]
    nodes.wait_for_nodes()
    print(f"a Ray cluster of 3 local nodes: {time.monotonic() - started:.0f} s")
    yield nodes, workers
    nodes.shutdown()


def equal_check_by_check(merged: dict, single: dict) -> None:
    assert merged["spec"] == single["spec"] and merged["backend"] == single["backend"]
    mine, theirs = results(merged), results(single)
    assert sorted(mine) == sorted(theirs), sorted(set(mine) ^ set(theirs))
    for check_id in theirs:
        assert mine[check_id] == theirs[check_id], check_id
    assert merged["summary"] == single["summary"]
    assert merged["verdict"] == single["verdict"]


@pytest.mark.slow
@needs_ray
def test_the_shards_on_several_nodes_merge_into_the_report_of_one_machine(cluster, profile, single, tmp_path):
    nodes, workers = cluster
    started = time.monotonic()
    done = certify("--profile", profile, "--cluster", nodes.address, "--shards", "4", out=tmp_path)
    seconds = time.monotonic() - started
    assert done.returncode == 0, said(done)
    assert "4 shards on 2 Ray node(s)" in done.stdout and "CERTIFIED: reference" in done.stdout, said(done)
    merged = load(tmp_path)
    assert merged["run"]["parts"] == [f"checks-shard-{i}-of-4" for i in range(1, 5)]
    equal_check_by_check(merged, single)
    assert verifies(tmp_path)
    log = json.loads((tmp_path / "reference" / "logs" / "cluster.json").read_text())
    ran_on = {r["shard"]: r["node"] for r in log["results"]}
    assert sorted(ran_on) == ["1/4", "2/4", "3/4", "4/4"] and all(r["error"] is None for r in log["results"])
    assert set(ran_on.values()) == {w.node_id for w in workers}, "both worker nodes ran shards"
    print(f"4 shards on 2 one-CPU nodes: {seconds:.0f} s")


@pytest.mark.slow
@needs_ray
def test_a_shard_that_fails_every_try_has_its_checks_recorded_not_run(cluster, profile, single, tmp_path):
    """No node can run the shard (its working directory exists on none): Ray tries it twice, then
    the driver records every check of the shard not run, and the report says so."""
    nodes, _ = cluster
    started = time.monotonic()
    done = certify("--profile", profile, "--cluster", nodes.address, "--shards", "1", "--shard-retries", "1",
                   "--cluster-workdir", str(tmp_path / "not-on-any-node"), out=tmp_path / "out")  # fmt: skip
    assert done.returncode == 1, said(done)
    print(f"a shard failing every try, recorded not run: {time.monotonic() - started:.0f} s")
    assert "shard 1/1: no results after 2 tries: node " in done.stderr and "no working directory" in done.stderr, said(done)
    assert "NOT CERTIFIED: reference" in done.stdout, said(done)
    log = json.loads((tmp_path / "out" / "reference" / "logs" / "cluster.json").read_text())
    assert log["results"][0]["error"].startswith("no results after 2 tries") and log["results"][0]["node"] is None
    merged = load(tmp_path / "out")
    assert merged["run"]["parts"] == ["not-run-shard-1-of-1"]
    assert sorted(results(merged)) == sorted(results(single)), "every check of the run is named"
    found = records(merged["results"])
    assert {r.category.value for r in found} == {"SKIP"}
    assert all(r.message.startswith("not run: shard 1/1: no results after 2 tries") for r in found)
    assert not merged["verdict"]["certified"] and len(merged["verdict"]["not_run"]) == len(found)
    assert verifies(tmp_path / "out")


def processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process this machine runs."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        found[int(entry.name)] = (parent, command)
    return found


def descendants(root: int) -> dict[int, str]:
    table = processes()
    out, stack = {}, [root]
    while stack:
        pid = stack.pop()
        for child, (parent, command) in table.items():
            if parent == pid and child not in out:
                out[child] = command
                stack.append(child)
    return out


@pytest.mark.slow
@needs_ray
def test_a_shard_whose_node_dies_runs_again_on_another_node(cluster, profile, single, tmp_path):
    nodes, workers = cluster
    doomed, survivor = workers
    raylet = doomed.all_processes["raylet"][0].process.pid
    started = time.monotonic()
    cli = subprocess.Popen(
        [sys.executable, "-m", "conformance", "certify", "reference", "--profile", profile, "--cluster", nodes.address, "--shards", "4",
         "--output", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        # Wait until the doomed node runs a shard's checks: its certify and that certify's pytest session.
        deadline, shard, pids = time.monotonic() + 300, None, {}
        while time.monotonic() < deadline and cli.poll() is None:
            pids = descendants(raylet)
            certifies = {pid: c for pid, c in pids.items() if " conformance certify " in c and "--shard " in c}
            if certifies and any(" -m pytest " in c for c in pids.values()):
                shard = re.search(r"--shard (\d+/4)", next(iter(certifies.values()))).group(1)
                break
            time.sleep(0.5)
        assert shard is not None, "no shard ever ran on the node"
        removed = time.monotonic() - started
        nodes.remove_node(doomed)
        time.sleep(2)
        assert not set(pids) & set(processes()), "the removed node's shard processes died with it"
        output, _ = cli.communicate(timeout=RUN_TIMEOUT)
        print(f"4 shards, a node removed {removed:.0f} s in: {time.monotonic() - started:.0f} s")
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 0, output[-6000:]
    log = json.loads((tmp_path / "reference" / "logs" / "cluster.json").read_text())
    ran_on = {r["shard"]: r for r in log["results"]}
    assert ran_on[shard]["node"] == survivor.node_id and ran_on[shard]["error"] is None, (shard, ran_on)
    assert all(r["node"] == survivor.node_id or r["node"] == doomed.node_id for r in ran_on.values())
    merged = load(tmp_path)
    equal_check_by_check(merged, single)
    assert verifies(tmp_path)


@pytest.mark.slow
def test_a_shard_that_left_no_results_is_recorded_not_run_and_the_report_is_not_certified(profile, single, tmp_path):
    """Shard 1 of 2 certified, shard 2 lost (its machine died, its CI job was cancelled): its checks,
    listed as its own certify would have collected them, are SKIP "not run" in the merged report."""
    done = certify("--profile", profile, "--shard", "1/2", "--workers", "1", out=tmp_path)
    assert done.returncode == 0, said(done)
    ran = json.loads((tmp_path / "reference" / "results" / "checks-shard-1-of-2.json").read_text())["results"]
    done = certify("--profile", profile, "--shard", "2/2", "--record-not-run", "its machine was lost", out=tmp_path)
    assert done.returncode == 1, said(done)
    lost = json.loads((tmp_path / "reference" / "results" / "not-run-shard-2-of-2.json").read_text())["results"]
    assert lost and {r["id"] for r in ran}.isdisjoint(r["id"] for r in lost)
    assert f"shard 2/2: {len(lost)} check(s) recorded not run" in done.stdout
    done = conformance("merge", str(tmp_path / "reference"), str(tmp_path / "reference" / "results"))
    assert done.returncode == 1, said(done)
    merged = load(tmp_path)
    assert sorted(results(merged)) == sorted(results(single)), "every check of the run is in the report, run or not"
    by_id = results(merged)
    for record in lost:
        assert by_id[record["id"]]["category"] == "SKIP" and by_id[record["id"]]["message"] == "not run: its machine was lost"
    assert not merged["verdict"]["certified"]
    mandatory = [r["id"] for r in lost if by_id[r["id"]]["mandatory"]]
    assert mandatory and set(mandatory) <= set(merged["verdict"]["not_run"]), merged["verdict"]
    assert merged["run"]["partial"] == f"{len(lost)} planned check(s) not run: its machine was lost ({len(lost)})"
    assert verifies(tmp_path)


@pytest.mark.slow
def test_cluster_options_are_refused_where_they_do_not_apply(tmp_path, capsys):
    from conformance import cli

    cases = {
        ("--shards", "4"): "--shards apply to a run on a cluster: pass --cluster ADDRESS too",
        ("--cluster", "local", "--shard", "1/2"): "--cluster runs every shard of the run itself",
        ("--record-not-run", "lost"): "--record-not-run records the checks of one shard: pass --shard I/N too",
        ("--cluster", "local", "--shards", "0"): "--shards must be at least 1",
    }
    for args, message in cases.items():
        status = cli.main(["certify", "reference", *args, "--output", str(tmp_path)])
        err = capsys.readouterr().err
        assert status == cli.EXIT_USAGE and message in err, (args, err)
    assert not list(tmp_path.rglob("*.json")), "refused before anything was written"


def test_ray_is_imported_only_for_a_run_on_a_cluster():
    code = "import sys; from conformance import cli; from conformance.run import cluster; cli.parser(); print(sorted(m for m in sys.modules if m.split('.')[0] == 'ray'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", said(done)


def test_a_shard_gets_every_option_the_user_gave_but_the_drivers():
    """The options a node's certify receives: what the user gave, as given, less what the driver
    applies itself (output, the gate, signing, the cluster's own)."""
    from conformance import cli
    from conformance.cli.shards import shard_argv

    argv = ["certify", "reference", "--profile", "p.toml:x", "--ops", "aten.add.*", "--ops", "*mul*", "--dtypes", "float32",
            "--hypothesis-profile", "dev", "--timeout", "30", "--skip-perf", "--cache-dir", "off", "--budget", "600",
            "--specs", "specs", "--cluster", "auto", "--shards", "8", "--shard-cpus", "2", "--shard-retries", "1",
            "--baseline", "b.json", "--waivers", "w.toml", "--sign", "k.pem", "--output", "elsewhere"]  # fmt: skip
    ns = cli.parser().parse_args(argv)
    shard = shard_argv(ns, ["-x"], "add or mul", "2")
    assert shard[0] == "reference" and shard[shard.index("--") :] == ["--", "-k", "add or mul", "-x"]
    again = cli.parser().parse_args(["certify", *shard[: shard.index("--")]])
    for dest in ("profile", "ops", "dtypes", "hypothesis_profile", "timeout", "skip_perf", "cache_dir", "budget", "specs"):
        assert getattr(again, dest) == getattr(ns, dest), dest
    assert again.workers == "2"
    for dest in ("cluster", "shards", "shard_cpus", "shard_retries", "baseline", "waivers", "sign", "shard"):
        assert getattr(again, dest) is None, dest
    assert again.output == "reports", "the node writes where the shard task tells it, not the driver's --output"
