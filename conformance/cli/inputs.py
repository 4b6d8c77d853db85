"""What a command reads from the names on its command line: a backend, the spec, a JSON file, a key.
Each that cannot be read is a ``UsageError`` (exit 2) saying which and why."""

from __future__ import annotations

import json
from pathlib import Path

from conformance.cli.exits import UsageError


def backend_or_exit(name: str):
    """The backend ``name`` names (an entry point, module:attr or path.py:attr), built."""
    from conformance.discovery import DiscoveryError, load

    try:
        return load(name)
    except DiscoveryError as exc:
        raise UsageError(str(exc)) from None


def load_specs():
    """The spec of record this command uses (``--specs`` or the installed one)."""
    from conformance import specs as spec_module

    try:
        return spec_module.load()
    except spec_module.SpecError as exc:
        raise UsageError(f"the spec cannot be read: {exc}") from None


def load_json(path: str, what: str) -> dict:
    """The JSON document at ``path``, ``what`` naming it in the error."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{what} {path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} {path} is not JSON: {exc}") from None


def private_key(path: str | None):
    """The Ed25519 private key of ``--sign PATH`` (None without one); a usage error when unusable."""
    from conformance.report import signing

    try:
        return signing.load_private_key(path) if path else None
    except signing.KeyFileError as exc:
        raise UsageError(f"--sign: {exc}") from None


def public_key(path: str | None):
    """The Ed25519 public key of ``--public-key PATH`` (None without one); a usage error when unusable."""
    from conformance.report import signing

    try:
        return signing.load_public_key(path) if path else None
    except signing.KeyFileError as exc:
        raise UsageError(f"--public-key: {exc}") from None
