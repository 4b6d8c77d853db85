"""The command line: usage errors, and a backend found only through another package's entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*args, env=None, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "conformance", *args], cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True
    )


def test_unknown_backend_is_a_usage_error_listing_what_exists():
    done = run("certify", "no-such-backend")
    assert done.returncode == 2
    assert "unknown backend 'no-such-backend'" in done.stderr
    assert "reference" in done.stderr


def test_unknown_profile_is_a_usage_error():
    done = run("certify", "reference", "--profile", "nope")
    assert done.returncode == 2 and "unknown profile 'nope'" in done.stderr


def test_broken_module_path_says_what_is_wrong(tmp_path):
    bad = tmp_path / "backend.py"
    bad.write_text("make = 3\n")
    done = run("certify", f"{bad}:make")
    assert done.returncode == 2 and "neither a BackendUnderTest nor a factory" in done.stderr
    done = run("certify", f"{bad}:missing")
    assert done.returncode == 2 and "has no attribute 'missing'" in done.stderr


def test_replay_of_a_directory_without_an_example():
    done = run("replay", str(ROOT))
    assert done.returncode == 2 and "holds no saved example" in done.stderr


def test_a_backend_in_another_package_is_certified_by_its_entry_point_name(tmp_path):
    package = tmp_path / "package"
    package.mkdir()
    (package / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = ["setuptools>=68"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "tiny-demo-backend"
            version = "0.0.1"

            [project.entry-points."conformance.backends"]
            tiny-demo = "tiny_demo:make"

            [tool.setuptools]
            py-modules = ["tiny_demo"]
            """
        )
    )
    (package / "tiny_demo.py").write_text(
        textwrap.dedent(
            """
            from conformance.api import BackendUnderTest
            from reference_backend import ReferenceBackend, ReferenceRuntime


            def make():
                return BackendUnderTest(
                    name="tiny-demo", details=ReferenceBackend, runtime=ReferenceRuntime(), version="0.0.1"
                )
            """
        )
    )
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(site), str(package)],
        check=True,
        capture_output=True,
    )
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    listed = run("list", env=env)
    assert "tiny-demo" in listed.stdout and "tiny_demo:make" in listed.stdout
    out = tmp_path / "reports"
    done = run(
        "certify", "tiny-demo", "--profile", "smoke", "--output", str(out), "--skip-perf", "--workers", "1",
        "-k", "RT_002 or REG_006 or (NUM and add and float32)",
        env=env,
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # a partial run is not a certificate
    report = json.loads((out / "tiny-demo" / "report.json").read_text())
    assert report["backend"]["name"] == "tiny-demo" and report["backend"]["version"] == "0.0.1"
    categories = {r["id"]: r["category"] for r in report["results"]}
    assert categories and set(categories.values()) == {"PASS"}, categories
    assert any(k.startswith("test_NUM_001") for k in categories)
    assert report["verdict"]["not_run"], "clauses that did not run must be listed, not passed"
