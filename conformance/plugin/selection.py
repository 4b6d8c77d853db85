"""Which checks a session runs and in what order: the profile's clauses, the shard (``--conformance-shard``),
the supervisor's resume list (``--conformance-only``), longest first by measured durations; and the
plan of them that the supervisor reads (``conformance.run.supervision.write_plan``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from conformance.plugin.items import clause_of, meta_of
from conformance.plugin.session import active, state, uses_workers
from conformance.results import result_id
from conformance.run import scheduling, supervision
from conformance.run.invocation import parse_shard


def _shard(text: str | None) -> tuple[int, int] | None:
    try:
        return parse_shard(text) if text else None
    except ValueError as exc:
        raise pytest.UsageError(f"--conformance-shard {exc}") from None


def _no_parameters(item) -> bool:
    """A check parametrized over nothing (NUM in a profile without ops): pytest's placeholder item."""
    marker = item.get_closest_marker("skip")
    return marker is not None and str(marker.kwargs.get("reason", "")).startswith("got empty parameter set")


def _shard_of(item, total: int) -> int:
    # By module and test id, not by path, so every machine computes the same split.
    key = f"{item.module.__name__}::{item.name}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "little") % total


def pytest_collection_modifyitems(session, config, items):
    if not active(config):
        return
    st = state(config)
    mandatory = set(st.profile.clauses)
    shard = _shard(config.getoption("conformance_shard"))
    only = _only(config.getoption("conformance_only"))
    keep, drop = [], []
    for item in items:
        clause = clause_of(item)
        selected = clause is None or clause.startswith("NUM-") or clause in mandatory
        selected = selected and not _no_parameters(item)
        if selected and shard is not None:
            selected = _shard_of(item, shard[1]) == shard[0] - 1
        if selected and only is not None:
            selected = item.nodeid in only
        (keep if selected else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    # Longest first (conformance.run.scheduling): at the end of a run under pytest-xdist the worker left
    # with a long check would keep the other cores idle. Without measured durations, the contract
    # checks first: a few take seconds (PRE-008 waits for two fresh processes), the NUM checks are
    # many and short.
    keep.sort(key=lambda item: (clause_of(item) or "").startswith("NUM-"))
    durations = config.getoption("conformance_durations")
    if durations:
        measured = scheduling.read_durations(Path(durations))
        if measured:
            keep = [keep[n] for n in scheduling.longest_first([result_id(meta_of(i)) for i in keep], measured)]
    items[:] = keep


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """The plan: every check this session will run, with its meta, for the supervisor to tell
    which ones a dead session never finished. Written once by whichever process collects first
    (every xdist worker collects the same items)."""
    config = session.config
    if not active(config):
        return
    if session.items and not uses_workers(config):
        supervision.freeze_heap()
    st = state(config)
    if st.run_dir is None or not session.items:
        return
    supervision.write_plan(st.run_dir, {item.nodeid: meta_of(item) for item in session.items})


def _only(path: str | None) -> set[str] | None:
    if not path:
        return None
    try:
        return {line.strip() for line in Path(path).read_text().splitlines() if line.strip()}
    except OSError as exc:
        raise pytest.UsageError(f"--conformance-only {path}: {exc}") from None
