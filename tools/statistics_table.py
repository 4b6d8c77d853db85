"""The catalog of statistics (conformance/statistics.py) as a Markdown table, for docs/reports.md.

    python tools/statistics_table.py            # print the table
    python tools/statistics_table.py --write    # write it into docs/reports.md between its markers

tests/harness/test_statistics.py fails when the table in the docs is not the catalog's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import doc_section

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from conformance.statistics import CATALOG  # noqa: E402 - the checkout's package, not an installed one

DOC = ROOT / "docs" / "reports.md"
BEGIN, END = "<!-- statistics: begin (tools/statistics_table.py --write) -->", "<!-- statistics: end -->"


def table() -> str:
    rows = ["| statistic | JSON type | written by | meaning |", "|---|---|---|---|"]
    for s in CATALOG:
        name = f"`{s.name}` (a pattern of keys)" if s.pattern else f"`{s.name}`"
        meaning = s.description.replace("|", "\\|")  # a bar inside a cell ends it
        rows.append(f"| {name} | {' or '.join(s.types)} | {', '.join(s.clauses) or 'any check'} | {meaning} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    return doc_section.main(argv, description=__doc__.splitlines()[0], doc=DOC, begin=BEGIN, end=END, section=table)


if __name__ == "__main__":
    sys.exit(main())
