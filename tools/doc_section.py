"""A generated section of a docs page: print it, or write it between the page's two markers.

The tools that generate one (draw_layers.py, statistics_table.py) share this command line:
without arguments they print the section, with ``--write`` they replace what stands between the
markers, and a test compares the page with what they print.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def main(argv: list[str] | None, *, description: str, doc: Path, begin: str, end: str, section: Callable[[], str]) -> int:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--write", action="store_true", help=f"write it into {doc.name} between its markers")
    ns = parser.parse_args(argv)
    text = section()
    if not ns.write:
        sys.stdout.write(text)
        return 0
    page = doc.read_text()
    if begin not in page or end not in page:
        sys.exit(f"{doc} has no markers {begin!r} ... {end!r}: put them where the section goes")
    head, rest = page.split(begin, 1)
    _, tail = rest.split(end, 1)
    doc.write_text(f"{head}{begin}\n{text}{end}{tail}")
    return 0
