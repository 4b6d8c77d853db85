"""Ratios of a pytest-benchmark JSON from benchmarks/test_reference_vs_eager.py.

    python benchmarks/summarize.py benchmarks/latest.json

Prints a Markdown table (case, reference and eager medians, ratio), the geometric
mean and the worst case, and says whether the targets hold (geomean <= 2.0,
no case above 5.0). Exit code 0 either way: a benchmark measures, it does not gate.
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict

from tabulate import tabulate

GEOMEAN_TARGET, WORST_TARGET = 2.0, 5.0


def main(path: str) -> None:
    data = json.load(open(path))
    medians: dict[str, dict[str, float]] = defaultdict(dict)
    for bench in data["benchmarks"]:
        info = bench["extra_info"]
        medians[info["case"]][info["implementation"]] = bench["stats"]["median"]
    rows, ratios = [], []
    for case, by in medians.items():
        ratio = by["reference"] / by["eager"]
        ratios.append(ratio)
        rows.append((case, by["reference"] * 1e3, by["eager"] * 1e3, ratio))
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    worst = max(rows, key=lambda r: r[3])
    print(tabulate(rows, headers=["case", "reference ms", "eager ms", "reference / eager"], tablefmt="github", floatfmt=".3f"))
    print()
    print(f"geometric mean {geomean:.2f} (target <= {GEOMEAN_TARGET}); worst {worst[0]} {worst[3]:.2f} (target <= {WORST_TARGET})")
    machine = data.get("machine_info", {})
    print(f"machine: {machine.get('cpu', {}).get('brand_raw', machine.get('processor', '?'))}, python {machine.get('python_version', '?')}")
    if geomean > GEOMEAN_TARGET or worst[3] > WORST_TARGET:
        print("TARGETS MISSED")


if __name__ == "__main__":
    main(sys.argv[1])
