"""A collected check as the harness sees it: its clause, its parameters, its backend's marker."""

from __future__ import annotations

import re
from typing import Any

from conformance.results import CHECK_PARAMETERS, CLAUSE_FAMILIES

_CLAUSE_IN_NAME = re.compile(rf"test_({'|'.join(CLAUSE_FAMILIES)})_(\d{{3}})")


def clause_of(item) -> str | None:
    marker = item.get_closest_marker("clause")
    if marker:
        return marker.args[0]
    match = _CLAUSE_IN_NAME.search(item.name)
    return f"{match.group(1)}-{match.group(2)}" if match else None


def clause_from_nodeid(nodeid: str) -> str | None:
    match = _CLAUSE_IN_NAME.search(nodeid)
    return f"{match.group(1)}-{match.group(2)}" if match else None


def meta_of(item) -> dict[str, Any]:
    """The check's clause, test and parameters: what its result id is made from."""
    callspec = getattr(item, "callspec", None)
    params = dict(callspec.params) if callspec else {}
    meta = {"clause": clause_of(item), "test": item.originalname or item.name}
    if "backend" in params:
        meta["backend"] = params["backend"]
    for key in CHECK_PARAMETERS:
        if key in params and isinstance(params[key], str):
            meta[key] = params[key]
    stage = item.get_closest_marker("stage")
    if stage is not None:
        meta["stage"] = stage.args[0]
    return meta


def marker_name(name: str) -> str:
    """The backend's marker (``backend_<name>``) without the characters a marker name cannot hold."""
    return re.sub(r"\W", "_", name)
