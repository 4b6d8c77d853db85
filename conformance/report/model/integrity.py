"""The hashes over a report: ``integrity_hash`` over the whole of it in a canonical form,
``document_digest`` of a results document or a part, ``part_digests`` (what a signature covers),
``stable_hash`` over what two runs with the same inputs share."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from conformance.report.document import decoded
from conformance.run.transport import jsonable

VOLATILE_KEYS = frozenset({"timings", "measurements", "duration_s", "started", "finished", "integrity", "command"})
"""Keys whose values change from run to run: durations, memory measurements, timestamps."""
UNHASHED_KEYS = frozenset({"integrity", "signature"})
"""The only top-level keys of report.json outside the bytes of the integrity hash."""


def _stable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def canonical_bytes(report: Mapping[str, Any]) -> bytes:
    """The bytes the integrity hash covers: the report with its results as a list of records
    (``decoded``: the tables of report.json, or its layout, change nothing), as JSON data
    (``transport.jsonable``, idempotent, so the file read back gives the same bytes), keys sorted,
    compact, without ``integrity`` and ``signature``."""
    return _canonical({k: v for k, v in decoded(report).items() if k not in UNHASHED_KEYS})


def _canonical(value: Any) -> bytes:
    body = jsonable(value, None)
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=True).encode()


def document_digest(value: Any) -> str:
    """sha256 of any JSON value in canonical form (a results document, a part of a report)."""
    return hashlib.sha256(_canonical(value)).hexdigest()


def part_digests(report: Mapping[str, Any]) -> dict[str, str]:
    """sha256 of each top-level part of ``report`` (``decoded``) but ``integrity`` and ``signature``:
    what a signature covers, part by part, so that a mismatch names the parts that changed."""
    return {k: document_digest(v) for k, v in decoded(report).items() if k not in UNHASHED_KEYS}


def integrity_hash(report: Mapping[str, Any]) -> str:
    """sha256 over the whole report (summary, timings, run and environment included)."""
    return hashlib.sha256(canonical_bytes(report)).hexdigest()


def stable_hash(report: Mapping[str, Any]) -> str:
    """sha256 over what two runs with the same inputs share: everything but VOLATILE_KEYS
    (timings, durations, timestamps, the command line) and the list of merged parts."""
    body = {k: v for k, v in decoded(report).items() if k not in UNHASHED_KEYS}
    body["run"] = {k: v for k, v in (body.get("run") or {}).items() if k != "parts"}
    return hashlib.sha256(json.dumps(jsonable(_stable(body), None), sort_keys=True).encode()).hexdigest()
