"""The drawing of the package's imports in docs/design.md (tools/draw_layers.py) is the current one,
and it marks a back-edge, so the drawing a reader sees is the graph the layer check judges."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _draw(tree: Path) -> str:
    done = subprocess.run([sys.executable, str(tree / "tools" / "draw_layers.py")], cwd=tree, capture_output=True,
                          text=True, timeout=300, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_drawing_in_the_design_doc_is_current():
    doc = (ROOT / "docs" / "design.md").read_text()
    assert _draw(ROOT) in doc, "docs/design.md's drawing of the layers is stale: run python tools/draw_layers.py --write"


def test_a_back_edge_is_drawn_red(tmp_path):
    for part in ("conformance", "tools"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    assert "linkStyle" not in _draw(tmp_path)
    errors = tmp_path / "conformance" / "api" / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef _back_edge():\n    from conformance import cli  # noqa: F401\n")
    drawn = _draw(tmp_path)
    arrows = [line.strip() for line in drawn.splitlines() if "-->" in line]
    red = next(line for line in drawn.splitlines() if "linkStyle" in line)
    assert "api --> cli" in arrows and red.split()[1] == str(arrows.index("api --> cli")), drawn
