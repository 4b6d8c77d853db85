"""``replay``: a saved failing example run again."""

from __future__ import annotations

import argparse
from pathlib import Path

from conformance.cli.exits import EXIT_NOT_CERTIFIED, EXIT_OK, UsageError
from conformance.cli.inputs import backend_or_exit


def replay_command(ns: argparse.Namespace) -> int:
    """Re-run a saved failing example through the backend and show the comparison."""
    from conformance import replay as replays

    try:
        saved = replays.load(Path(ns.directory))
    except replays.NoSavedExample as exc:
        raise UsageError(str(exc)) from None
    backend = backend_or_exit(ns.backend or saved.backend.name)
    return EXIT_OK if replays.rerun(saved, backend) else EXIT_NOT_CERTIFIED
