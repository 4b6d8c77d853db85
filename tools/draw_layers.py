"""Draw the imports between conformance's packages as a Mermaid flowchart, layer by layer.

    python tools/draw_layers.py            # print the drawing
    python tools/draw_layers.py --write    # write it into docs/design.md between its markers

The layers are those of the ``layers`` contract in ``.importlinter`` (the one CI checks with
import-linter); the imports are read by grimp, import-linter's own graph builder, so the drawing
shows exactly what the check judges. Every arrow points down a layer: an arrow up would be a
back-edge, drawn red, and the layer check would fail on it.
"""

from __future__ import annotations

import configparser
from pathlib import Path

import doc_section
import grimp

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "design.md"
BEGIN, END = "<!-- layers drawing: begin (tools/draw_layers.py --write) -->", "<!-- layers drawing: end -->"


def layers(path: Path = ROOT / ".importlinter") -> list[list[str]]:
    """The ``layers`` contract's layers, top first, each a list of the modules that share it."""
    config = configparser.ConfigParser()
    config.read(path)
    raw = config["importlinter:contract:layers"]["layers"]
    return [[m.strip() for m in line.split("|")] for line in raw.strip().splitlines() if line.strip()]


def imports(units: list[str]) -> set[tuple[str, str]]:
    """(importer, imported) for every pair of distinct units with a direct import between their modules."""
    graph = grimp.build_graph("conformance", include_external_packages=False)
    owner = {}
    for module in graph.modules:
        candidates = [u for u in units if module == u or module.startswith(u + ".")]
        if candidates:
            owner[module] = max(candidates, key=len)
    edges = set()
    for module, unit in owner.items():
        for imported in graph.find_modules_directly_imported_by(module):
            other = owner.get(imported)
            if other is not None and other != unit:
                edges.add((unit, other))
    return edges


def drawing() -> str:
    stack = layers()
    rank = {unit: i for i, layer in enumerate(stack) for unit in layer}
    edges = imports(list(rank))
    node = {unit: unit.replace("conformance.", "").replace(".", "_") for unit in rank}
    lines = ["```mermaid", "flowchart TB"]
    for i, layer in enumerate(stack):
        lines.append(f'    subgraph L{i}["layer {i + 1}"]')
        lines.extend(f'        {node[u]}["{u.replace("conformance.", "")}"]' for u in layer)
        lines.append("    end")
    back = []
    arrows = sorted(edges, key=lambda e: (rank[e[0]], e[0], rank[e[1]], e[1]))
    for n, (source, target) in enumerate(arrows):
        lines.append(f"    {node[source]} --> {node[target]}")
        if rank[target] <= rank[source]:
            back.append(n)
    if back:
        lines.append(f"    linkStyle {','.join(map(str, back))} stroke:red,stroke-width:3px")
    lines.append("```")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return doc_section.main(argv, description=__doc__.splitlines()[0], doc=DOC, begin=BEGIN, end=END, section=drawing)


if __name__ == "__main__":
    raise SystemExit(main())
