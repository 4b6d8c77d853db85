"""The command line: usage errors, and a backend found only through another package's entry point."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conformance.report.model import load_report

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


@pytest.mark.slow
def test_unknown_profile_is_a_usage_error():
    done = run("certify", "reference", "--profile", "nope")
    assert done.returncode == 2 and "unknown profile 'nope'" in done.stderr


@pytest.mark.slow
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


def _installed(tmp_path: Path, name: str, version: str, entry_points: str, module: str, source: str) -> dict[str, str]:
    """Build and install (into a directory put on PYTHONPATH) a one-module package: the env to use it."""
    package = tmp_path / "package"
    package.mkdir()
    (package / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [build-system]
            requires = ["setuptools>=68"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "{name}"
            version = "{version}"
            """
        )
        + textwrap.dedent(entry_points)
        + f'\n[tool.setuptools]\npy-modules = ["{module}"]\n'
    )
    (package / f"{module}.py").write_text(textwrap.dedent(source))
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(site), str(package)],
        check=True,
        capture_output=True,
    )
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.slow
def test_a_backend_in_another_package_is_certified_by_its_entry_point_name(tmp_path):
    env = _installed(
        tmp_path, "tiny-demo-backend", "0.0.1",
        """
        [project.entry-points."conformance.backends"]
        tiny-demo = "tiny_demo:make"
        """,
        "tiny_demo",
        """
        from conformance.api import BackendUnderTest
        from reference_backend import ReferenceBackend, ReferenceRuntime


        def make():
            return BackendUnderTest(
                name="tiny-demo", details=ReferenceBackend, runtime=ReferenceRuntime(), version="0.0.1"
            )
        """,
    )  # fmt: skip
    listed = run("list", env=env)
    assert "tiny-demo" in listed.stdout and "tiny_demo:make" in listed.stdout
    out = tmp_path / "reports"
    done = run(
        "certify", "tiny-demo", "--profile", "smoke", "--output", str(out), "--skip-perf", "--workers", "1",
        "-k", "RT_002 or REG_006 or (NUM and add and float32)",
        env=env,
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # a partial run is not a certificate
    report = load_report(out / "tiny-demo" / "report.json")
    assert report["backend"]["name"] == "tiny-demo" and report["backend"]["version"] == "0.0.1"
    categories = {r["id"]: r["category"] for r in report["results"]}
    assert categories and set(categories.values()) == {"PASS"}, categories
    assert any(k.startswith("test_NUM_001") for k in categories)
    assert report["verdict"]["not_run"], "clauses that did not run must be listed, not passed"


@pytest.mark.slow
def test_a_closed_run_ignores_installed_pytest_plugins_and_a_shadowing_backend_name_is_an_error(tmp_path):
    """Another installed package brings a pytest plugin that turns every failure into a pass, and an
    entry point named like the built-in reference backend."""
    env = _installed(
        tmp_path, "helpful-extras", "6.6.6",
        """
        [project.entry-points.pytest11]
        helpful = "helpful_extras"

        [project.entry-points."conformance.backends"]
        reference = "helpful_extras:backend"
        """,
        "helpful_extras",
        """
        import pytest


        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(item, call):
            outcome = yield
            report = outcome.get_result()
            report.outcome, report.longrepr = "passed", None


        def backend():
            from reference_backend import backend_under_test
            return backend_under_test()
        """,
    )  # fmt: skip
    out = tmp_path / "reports"
    done = run(
        "certify", "tests/seeded/defects.py:execute_overwrites_inputs", "--profile", "interface", "--output", str(out),
        "--skip-perf", "--workers", "1", "-k", "RT_017", env=env,
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = out.glob("*/report.json")
    report = load_report(path)
    assert {r["id"]: r["category"] for r in report["results"]} == {"test_RT_017_execute_leaves_inputs_alone": "CONTRACT_VIOLATION"}
    assert not any("helpful" in p for p in report["run"]["plugins"]), report["run"]["plugins"]
    assert any(p.startswith("conformance.plugin") for p in report["run"]["plugins"])
    shadowed = run("certify", "reference", "--profile", "interface", "--output", str(out), env=env)
    assert shadowed.returncode == 2
    assert "helpful-extras 6.6.6" in shadowed.stderr and "torch-backend-conformance" in shadowed.stderr, shadowed.stderr


def test_the_plugin_options_do_not_clash_with_other_plugins(tmp_path):
    """The plugin loads in every pytest run of an environment that installs the harness (entry point
    pytest11): its options are all --conformance-*, so pytest-profiling's --profile (or any plugin's
    --backend) can sit beside it. With bare --profile/--backend every such run failed at start-up."""
    (tmp_path / "other_plugin.py").write_text(
        "def pytest_addoption(parser):\n"
        "    parser.addoption('--profile', action='store_true', dest='profile')\n"
        "    parser.addoption('--backend', default=None, dest='backend')\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "other_plugin", "-p", "conformance.plugin", "--help"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--conformance-backend" in done.stdout and "--conformance-profile" in done.stdout


def test_the_console_prints_a_replay_command_this_interpreter_runs():
    from conformance.cli.console import replay_invocation

    command = replay_invocation("python -m conformance replay reports/x/replays/NUM-001-abc")
    assert command == f"{shlex.quote(sys.executable)} -m conformance replay reports/x/replays/NUM-001-abc"
    assert replay_invocation("something else") == "something else"
