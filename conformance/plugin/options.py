"""The plugin's command-line options (group "conformance", all prefixed ``--conformance-``) and the
hooks a backend's own plugin may implement (``conformance.plugin.hookspecs``)."""

from __future__ import annotations

from conformance.plugin import hookspecs


def pytest_addoption(parser):
    # fmt: off
    group = parser.getgroup("conformance", "backend conformance certification")
    # Every option carries the --conformance- prefix: this plugin loads in any pytest run of an
    # environment that installs the harness, and a bare --profile clashed with pytest-profiling's.
    group.addoption("--conformance-backend", action="append", default=[], metavar="NAME",
                    help="backend to certify (entry-point name or module:attr); repeatable")
    group.addoption("--conformance-profile", default="full", metavar="NAME",
                    help="certification profile from specs/profiles.toml (default: full)")
    group.addoption(
        "--conformance-profile-file",
        default=None,
        metavar="FILE",
        help="the profile as a JSON definition (written by `certify` for a claimed, user-file or selected profile); overrides --conformance-profile",
    )
    group.addoption(
        "--conformance-categories",
        action="store_true",
        help="report outcomes in the harness's categories (PASS, MISMATCH ...) instead of passed/failed/skipped, "
        "without pytest's failure sections (certify's console; the harness prints its own summary)",
    )
    group.addoption("--conformance-out", default=None, help="directory for per-backend results documents")
    group.addoption("--conformance-specs", default=None, metavar="DIR",
                    help="the spec of record to certify against instead of the installed one (a specs/ directory)")
    group.addoption("--conformance-cache", default=None, metavar="DIR",
                    help="where programs, lowerings and compiled packages are cached on disk ('off': memory only; "
                    "default: $XDG_CACHE_HOME/torch-backend-conformance)")
    group.addoption("--conformance-run-dir", default=None, metavar="DIR",
                    help="where the processes running checks leave their markers and traces (the supervisor reads them; default: a new temporary directory)")
    group.addoption("--conformance-tag", default="run", help="name of this run's results file (results/<tag>.json)")
    group.addoption(
        "--conformance-shard",
        default=None,
        metavar="I/N",
        help="run only shard I of N (deterministic by check id); merge the shards' results with `conformance merge`",
    )
    group.addoption(
        "--conformance-only",
        default=None,
        metavar="FILE",
        help="run only the checks whose node ids FILE lists, one per line (the supervisor's resume runs)",
    )
    group.addoption(
        "--conformance-durations",
        default=None,
        metavar="FILE",
        help="run the checks longest first by the durations FILE holds (a report.json or a snapshot certify writes); "
        "default: contract checks first, then NUM",
    )
    group.addoption(
        "--conformance-hard-timeout",
        type=float,
        default=None,
        help="seconds after which a check's worker is killed and the check recorded as TIMEOUT "
        "(default: 2 x --timeout + 10)",
    )
    # fmt: on


def pytest_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(hookspecs)
