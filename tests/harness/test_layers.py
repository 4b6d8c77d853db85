"""The package's layers (.importlinter): each module imports only the layers below it, checked by
import-linter over every import, those inside functions too. A back-edge breaks the contract."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _lint(tree: Path) -> subprocess.CompletedProcess:
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(lint), "--config", str(tree / ".importlinter"), "--no-cache"], cwd=tree,
                          capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"})


def test_the_layers_hold():
    result = _lint(ROOT)
    assert result.returncode == 0 and re.search(r"\b[1-9]\d* kept, 0 broken", result.stdout), result.stdout + result.stderr


def test_a_back_edge_breaks_them(tmp_path):
    """The contract API importing the command line (a layer far above it) is reported, with the line."""
    shutil.copytree(ROOT / "conformance", tmp_path / "conformance", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    errors = tmp_path / "conformance" / "api" / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef _back_edge():\n    from conformance import cli  # noqa: F401\n")
    result = _lint(tmp_path)
    assert result.returncode != 0 and "BROKEN" in result.stdout, result.stdout + result.stderr
    assert "conformance.api.errors -> conformance.cli" in result.stdout, result.stdout
