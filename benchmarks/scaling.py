"""How a certification's wall time falls with the workers it is given (``nox -s scaling``).

    python benchmarks/scaling.py [--profile core-fp32] [--workers 1,2,4] [--old-tree DIR]

One warm-up run fills the program cache and measures every check; then one certification per
worker count, each ordered longest first by the warm-up's durations (as ``certify`` orders a run
by the previous report), all in this one process so the machine and its load are the same for
every row. Beside each measured wall time: what list scheduling of the measured durations
predicts (``conformance.run.scheduling.list_schedule``, each worker paying the start-up measured as
the 1-worker run's wall time less its checks' time), and the same model for 16 workers.

``--old-tree DIR`` also times another checkout of the project (``git worktree add DIR REV``) at
the largest worker count, alternating with this one, so a change is compared with what it
replaces on the same machine and load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

from conformance.report.model import load_report
from conformance.run import scheduling

ROOT = Path(__file__).resolve().parents[1]


def certify(tree: Path, out: Path, profile: str, workers: int, durations: Path | None) -> tuple[float, dict]:
    """One `certify reference` in ``tree``'s checkout: its wall time and its report."""
    cmd = [sys.executable, "-m", "conformance", "certify", "reference", "--profile", profile, "--skip-perf",
           "--workers", str(workers), "--output", str(out)]  # fmt: skip
    if durations is not None and (tree / "conformance" / "report" / "document.py").exists():  # older trees cannot read report.json format 2
        cmd += ["--durations-from", str(durations)]
    env = dict(os.environ, PYTHONPATH=str(tree))
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    report_path = out / "reference" / "report.json"
    if not report_path.exists():
        sys.exit(f"certify with {workers} worker(s) in {tree} wrote no report (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return wall, load_report(report_path)  # its results as records, whichever report format the tree writes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="core-fp32")
    cores = os.cpu_count() or 1
    default_workers = ",".join(str(2**i) for i in range(cores.bit_length()) if 2**i <= cores)
    parser.add_argument("--workers", default=default_workers, help=f"worker counts (default: powers of 2 up to the {cores} cores)")
    parser.add_argument("--predict", default="16", help="worker counts the model predicts beyond those run (default 16)")
    parser.add_argument("--old-tree", default=None, help="another checkout to time at the largest worker count, alternating")
    parser.add_argument("--json", default=None, help="write the table as JSON here too")
    ns = parser.parse_args(argv)
    counts = sorted({int(w) for w in ns.workers.split(",")})
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="conformance-scaling-") as tmp:
        tmp_path = Path(tmp)
        print(f"warm-up: certify reference --profile {ns.profile} --workers {counts[-1]} ...", flush=True)
        certify(ROOT, tmp_path / "warm", ns.profile, counts[-1], None)
        warm_report = tmp_path / "warm" / "reference" / "report.json"
        walls: dict[int, float] = {}
        old_walls: list[float] = []
        for workers in counts:
            print(f"certify with {workers} worker(s) ...", flush=True)
            walls[workers], report = certify(ROOT, tmp_path / f"w{workers}", ns.profile, workers, warm_report)
            if workers == 1:
                one = scheduling.durations_of(report)
            if ns.old_tree and workers == counts[-1]:
                print(f"  and the same in {ns.old_tree} ...", flush=True)
                old_walls.append(certify(Path(ns.old_tree), tmp_path / "old", ns.profile, workers, warm_report)[0])
                walls[workers] = min(walls[workers], certify(ROOT, tmp_path / f"w{workers}b", ns.profile, workers, warm_report)[0])
                old_walls.append(certify(Path(ns.old_tree), tmp_path / "old2", ns.profile, workers, warm_report)[0])
        if 1 not in walls:
            print("certify with 1 worker (the model's durations) ...", flush=True)
            walls[1], report = certify(ROOT, tmp_path / "w1", ns.profile, 1, warm_report)
            one = scheduling.durations_of(report)

    work = sum(one.values())
    startup = max(walls[1] - work, 0.0)
    rows = []
    for workers in sorted(set(walls) | {int(w) for w in ns.predict.split(",")}):
        predicted = scheduling.list_schedule(one.values(), workers, startup)
        measured = walls.get(workers)
        rows.append([workers, f"{measured:.1f}" if measured else "", f"{predicted:.1f}",
                     f"{walls[1] / measured:.2f}" if measured else "", f"{walls[1] / predicted:.2f}"])  # fmt: skip
    path = scheduling.critical_path(one.values(), startup)
    longest = max(one, key=one.get)
    print()
    print(f"certify reference --profile {ns.profile} --skip-perf, {len(one)} checks, {cores} cores, "
          f"load average {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(tabulate(rows, headers=["workers", "wall s (measured)", "wall s (model)", "speed-up (measured)", "speed-up (model)"],
                   tablefmt="github"))  # fmt: skip
    print(f"\nwork {work:.1f} s in checks; start-up and reporting {startup:.1f} s; longest check {longest} {one[longest]:.1f} s; "
          f"critical path {path:.1f} s")
    for workers in counts:
        print(f"critical path / wall at {workers} worker(s): {100 * path / walls[workers]:.1f}%")
    if old_walls:
        print(f"\nat {counts[-1]} workers: this tree {walls[counts[-1]]:.1f} s (best of 2), {ns.old_tree} {min(old_walls):.1f} s (best of 2)")
    if ns.json:
        Path(ns.json).write_text(json.dumps({"profile": ns.profile, "cores": cores, "walls": walls, "old_walls": old_walls,
                                             "startup": startup, "work": work, "critical_path": path, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
