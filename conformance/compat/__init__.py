"""Every use of a dependency's private internals, one module per dependency, each with a public fallback.

The harness reaches past the public APIs of torch and hypothesis where they are too slow for a
drawn example per program (building an ExportedProgram directly instead of exporting it) or do not
offer what it needs (a draw seeded by a key, draws that do not depend on the modules a process has
loaded). Each such access is a function of ``conformance.compat.torch`` or
``conformance.compat.hypothesis`` (the ExecuTorch adapters': ``backend_adapters.executorch_compat``)
whose docstring says what it does, why it takes the private route, the versions that route was
tested on, and its public fallback. Nothing else in the package touches those internals.

Which route runs is decided per dependency: the private one where the installed version lies in the
range it was tested on and a probe finds the internals it uses, else the public fallback, which is
slower or less reproducible but gives the same verdicts (tests/harness/test_compat.py certifies the
reference with every fallback forced and compares each check's category). ``CONFORMANCE_COMPAT``
chooses:

- unset or ``auto``: the private route wherever the version check and probe allow it;
- ``public``: every fallback, whatever the versions (to certify on a version nobody tested the
  private routes on, or to rule them out when a result looks wrong).
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import re
from collections.abc import Callable

ENV = "CONFORMANCE_COMPAT"
"""The environment variable that forces every public fallback (``public``) or leaves the choice to the
version checks (unset, empty or ``auto``)."""
MODES = ("auto", "public")

log = logging.getLogger(__name__)


class CompatModeError(ValueError):
    """CONFORMANCE_COMPAT holds a value other than the documented ones."""


def mode() -> str:
    """``auto`` or ``public`` (``CONFORMANCE_COMPAT``, read on every call so a test or a subprocess can set it)."""
    value = os.environ.get(ENV, "").strip().lower() or "auto"
    if value not in MODES:
        raise CompatModeError(f"{ENV}={os.environ[ENV]!r}: expected one of {', '.join(MODES)} (unset means auto)")
    return value


def forced_public() -> bool:
    """Whether ``CONFORMANCE_COMPAT=public`` forces every fallback."""
    return mode() == "public"


def version_tuple(version: str) -> tuple[int, ...]:
    """The leading numeric release of a version string: ``2.13.0+cpu`` -> (2, 13, 0), ``6.170.17`` ->
    (6, 170, 17), ``2.14.0a0`` -> (2, 14, 0)."""
    parts = []
    for piece in version.split("+")[0].split("."):
        match = re.match(r"\d+", piece)
        if match is None:
            break
        parts.append(int(match.group()))
        if match.end() != len(piece):
            break
    return tuple(parts)


def within(version: str, lowest: tuple[int, ...], below: tuple[int, ...]) -> bool:
    """Whether ``version`` lies in [lowest, below), compared on its numeric release."""
    release = version_tuple(version)
    return lowest <= release < below


def tested_range(dependency: str, lowest: tuple[int, ...], below: tuple[int, ...]) -> Callable[[], bool]:
    """Whether the installed ``dependency`` lies in [lowest, below), the range its private routes were
    tested on: read once per process (the function's ``cache_clear`` reads it again)."""

    @functools.cache
    def tested() -> bool:
        return within(importlib.import_module(dependency).__version__, lowest, below)

    return tested


def private_route(dependency: str, name: str, tested: Callable[[], bool], probe: Callable[[], str | None]) -> bool:
    """Whether the private route ``name`` of ``dependency`` runs: not forced public, the installed version
    within the range the route was tested on (``tested()``) and ``probe()`` finding what it relies on (it
    returns None, or a sentence saying what is missing); neither is called when forced public. The version
    check and probe run once per process; a fallback they choose is logged as a warning (an untested
    version once per dependency and process)."""
    if forced_public():
        return False
    return _decided(dependency, name, tested, probe)


@functools.cache
def _decided(dependency: str, name: str, tested: Callable[[], bool], probe: Callable[[], str | None]) -> bool:
    if not tested():
        if dependency not in _UNTESTED:
            _UNTESTED.add(dependency)
            log.warning("compat: the installed %s is outside the range its private routes were tested on; every %s "
                        "route takes its public fallback (slower, the same verdicts)", dependency, dependency)
        return False
    try:
        missing = probe()
    except Exception as exc:  # noqa: BLE001 - any failure of the probe means the internals are not the tested ones
        missing = f"{type(exc).__name__}: {exc}"
    if missing is not None:
        log.warning("compat.%s.%s: the public fallback (%s's internals are not the tested ones: %s)",
                    dependency, name, dependency, missing)
        return False
    return True


_UNTESTED: set[str] = set()
"""The dependencies whose untested version this process has already warned of."""
