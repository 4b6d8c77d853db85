"""The one place that builds a certification's pytest run.

``certify`` (and so nox's certify sessions and the project's seeded-defect proof, which go
through ``certify``) runs every phase as ``python -m pytest <session_args(...)>`` in a
process of its own under the supervisor. Everything the plugin needs travels as a
``--conformance-*`` option (or hypothesis' and pytest-timeout's own options), never as an
environment variable read by another module; the xdist workers receive the same options.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

CLOSED_RUN_PLUGINS = (
    "-p", "conformance.plugin", "-p", "xdist.plugin", "-p", "pytest_timeout", "-p", "pytest_benchmark.plugin", "-p", "_hypothesis_pytestplugin",
    "--noconftest",  # nor a conftest.py of the directory certify runs in
)  # fmt: skip
"""The only pytest plugins a certification loads (report.json lists them under run.plugins)."""
HYPOTHESIS_PROFILES = ("ci", "dev", "thorough")
"""The hypothesis profiles conformance.strategies.profiles registers (tests/harness keeps them equal)."""
MAX_WORKER_RESTARTS = 20
"""Per pytest session; the supervisor starts another session for what a session left."""


@dataclass(frozen=True)
class Run:
    """What every phase of one certify run shares."""

    backends: tuple[str, ...]
    """The backends as the user named them (entry-point names, module:attr or path.py:attr)."""
    profile: str
    profile_file: Path | None
    """The profile's JSON definition, for a profile that is not one of the spec's own."""
    out: Path
    hypothesis_profile: str = "ci"
    specs_dir: Path | None = None
    """Another spec of record than the installed one (conformance.specs.load)."""
    cache: str | None = None
    """The disk cache directory, or 'off' (conformance.programs.use_cache_dir)."""
    shard: str | None = None
    timeout: float = 120.0
    hard_timeout: float = 250.0
    plugins: tuple[str, ...] = ()
    """The backends' own pytest plugin modules (BackendUnderTest.pytest_plugins)."""
    durations: Path | None = None
    """Measured check durations (conformance.run.scheduling) that order the checks longest first."""

    def common(self) -> list[str]:
        args = [*CLOSED_RUN_PLUGINS, "--pyargs", "conformance.checks"]
        for plugin in self.plugins:
            args += ["-p", plugin]
        for name in self.backends:
            args += ["--conformance-backend", name]
        args += ["--conformance-profile", self.profile, "--conformance-out", str(self.out), "--conformance-categories"]
        if self.profile_file is not None:
            args += ["--conformance-profile-file", str(self.profile_file)]
        if self.specs_dir is not None:
            args += ["--conformance-specs", str(self.specs_dir)]
        if self.cache is not None:
            args += ["--conformance-cache", self.cache]
        if self.shard:
            args += ["--conformance-shard", self.shard]
        if self.durations is not None:
            args += ["--conformance-durations", str(self.durations)]
        args += ["--hypothesis-profile", self.hypothesis_profile]
        args += ["--timeout", str(self.timeout), "-o", "timeout_func_only=true"]  # never interrupt pytest's own reporting
        args += ["-p", "no:cacheprovider", "-o", "addopts=", "-o", "python_files=test_*.py", "--rootdir", str(Path.cwd())]
        # pytest's unraisable-exception hook runs gc.collect five times when a session's process ends
        # (~1 s over a full certification's heap) to report unraisable exceptions nobody reads here.
        args += ["-p", "no:unraisableexception"]
        # pytest's log capture walks every logger the process has (torch registers hundreds) as each
        # phase of each check starts and ends: ~1.5 s of CPU over a full certification. Without it, a
        # backend's warnings and errors still reach the report, as captured stderr (logging's own
        # last-resort handler writes them there).
        args += ["-p", "no:logging"]
        return args


def checks_args(run: Run, *, workers: str, selection: str | None, extra: Sequence[str] = ()) -> list[str]:
    """The checks phase: every clause but PERF, in pytest-xdist workers (crash isolation)."""
    parallel = ["-n", workers, "--max-worker-restart", str(MAX_WORKER_RESTARTS)] if workers != "0" else ["-p", "no:xdist"]
    return (
        run.common()
        + parallel
        + ["--conformance-hard-timeout", str(run.hard_timeout), "-k", _and("not test_PERF", selection), "--benchmark-disable"]
        # Warnings stay in the worker: xdist would ship each to the controller, which imports the
        # warning's category to rebuild it (ExecuTorch's: ~3 s of importing executorch.exir there).
        + ["-p", "no:warnings"]
        + list(extra)
    )


def perf_args(run: Run, *, selection: str | None, extra: Sequence[str] = ()) -> list[str]:
    """The performance phase: PERF alone, in one process (timing under xdist is unreliable)."""
    return (
        run.common()
        + ["-p", "no:xdist", "-k", _and("test_PERF", selection)]
        + ["--benchmark-min-rounds", "15", "--benchmark-max-time", "0.5", "--benchmark-disable-gc", "-q"]
        + list(extra)
    )


def environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The sessions' environment: the caller's, closed to plugins other packages register, and
    without the identity of a pytest-xdist worker certify may itself run in (a CI test):
    pytest-benchmark disables itself wherever PYTEST_XDIST_WORKER is set."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("PYTEST_XDIST")}
    # A closed run: no pytest plugin another installed package registers may load (one could turn
    # failures into passes); only ours and the engines the checks use, named above. The xdist
    # workers inherit the variable and the -p options.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` (shard I of N, 1-based) as (I, N); a ValueError that says what is wrong otherwise."""
    try:
        index, total = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"takes I/N, e.g. 2/4; got {text!r}") from None
    if not 1 <= index <= total:
        raise ValueError(f"{text}: I must be between 1 and N")
    return index, total


def split_selection(extra: Sequence[str]) -> tuple[list[str], str | None]:
    """Take the user's -k expression out of ``extra`` so each phase can AND it with its own."""
    rest, expr, i = [], None, 0
    while i < len(extra):
        if extra[i] == "-k" and i + 1 < len(extra):
            expr = extra[i + 1] if expr is None else f"({expr}) and ({extra[i + 1]})"
            i += 2
        elif extra[i].startswith("-k") and len(extra[i]) > 2:
            expr = extra[i][2:] if expr is None else f"({expr}) and ({extra[i][2:]})"
            i += 1
        else:
            rest.append(extra[i])
            i += 1
    return rest, expr


def _and(base: str, user: str | None) -> str:
    return base if user is None else f"({base}) and ({user})"
