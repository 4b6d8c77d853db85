"""python -m conformance certify | report | diff | verify | merge | scoreboard | replay | list

A thin layer over pytest: ``certify`` runs the checks in ``conformance.checks``
(through the plugin, in pytest-xdist workers so a crash costs one result),
then the performance checks in a session of their own (timing under xdist is
unreliable), then merges both results documents into the report.
With ``--cluster``, the shards of the run go to a Ray cluster instead
(``conformance.run.cluster``), and their results documents are merged here.

One submodule per command family: ``certify`` (with ``preflight``, what it checks before a run,
``shards`` for a run on a cluster or a shard recorded not run, and ``console``, what it prints),
``reports`` (report, merge, scoreboard), ``gate`` (diff, verify and certify --baseline),
``replay``, ``listing``; ``arguments`` is the parser, ``exits`` the exit codes.
"""

from __future__ import annotations

import os
import sys

from conformance.cli import certify, gate, listing, replay, reports
from conformance.cli.arguments import parser
from conformance.cli.exits import (
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_NOT_CERTIFIED,
    EXIT_OK,
    EXIT_REGRESSED,
    EXIT_STALE,
    EXIT_UNSIGNED,
    EXIT_USAGE,
    UsageError,
)

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_INVALID",
    "EXIT_NOT_CERTIFIED",
    "EXIT_OK",
    "EXIT_REGRESSED",
    "EXIT_STALE",
    "EXIT_UNSIGNED",
    "EXIT_USAGE",
    "UsageError",
    "main",
    "parser",
]

COMMANDS = {
    "report": reports.report_command,
    "merge": reports.merge_command,
    "scoreboard": reports.scoreboard_command,
    "diff": gate.diff_command,
    "verify": gate.verify_command,
    "replay": replay.replay_command,
    "list": listing.list_command,
}
"""Each command but certify (which also takes pytest's arguments) and the function that runs it."""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    p = parser()
    ns, unknown = p.parse_known_args(argv)
    extra = unknown + extra  # unknown options go to pytest (-k, -x, --timeout-method ...)
    if ns.command != "certify" and extra:
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    from conformance import specs as spec_module

    spec_module.use(ns.specs)  # for this command only: main() may run in-process (tests)
    try:
        if ns.command == "certify":
            return certify.certify(ns, extra)
        return COMMANDS[ns.command](ns)
    except UsageError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `conformance list | head`: the reader left; nothing more to say
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    finally:
        spec_module.use(None)
