"""A session's results as they are made, and the results documents made from them.

``OUT/<backend>/results/<tag>.journal`` holds a session's results document header on its first
line, then one record per line as each check ends, so a session that dies loses nothing already
computed: ``complete_documents`` turns a journal without its document (``<tag>.json``) into one.
The plugin writes a session's journal; the supervisor adds the records of checks it had to end
itself and reads the journals to tell which checks are left.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from conformance.results import CaseResult, result_id
from conformance.run import transport
from conformance.run.files import safe_name, write_json_atomic

JOURNAL_SUFFIX = ".journal"


def results_dir(out: str | Path, name: str) -> Path:
    """Where a run writing into ``out`` keeps backend ``name``'s results documents and journals."""
    return Path(out) / safe_name(name) / "results"


def write_header(path: Path, header: dict[str, Any]) -> None:
    """A new journal at ``path`` with ``header`` (a results document without its results)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(transport.dumps_document(header, indent=None) + "\n", encoding="utf-8")


def append_record(path: Path, record: CaseResult) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(transport.dumps_document(record.to_json(transport=True), indent=None) + "\n")


def read_journal(path: Path) -> tuple[dict[str, Any], dict[str, CaseResult]]:
    """(header, nodeid -> record) of a journal; a torn last line (the writer died) is skipped.
    A failure is not overwritten by a later phase's non-failure (a teardown after a failed call)."""
    header: dict[str, Any] = {}
    records: dict[str, CaseResult] = {}
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if not isinstance(value, dict):
                continue
            if i == 0:
                header = value
                continue
            try:
                record = CaseResult.from_json(value)
            except (ValueError, TypeError):
                continue
            if not isinstance(record.nodeid, str):
                continue
            previous = records.get(record.nodeid)
            if previous is None or not previous.category.is_failure:
                records[record.nodeid] = record
    return header, records


def result_entries(records: Iterable[CaseResult]) -> list[dict[str, Any]]:
    """The ``results`` of a results document: records without their transport fields, by id (one
    computed from the check's parameters where a journal's record lacks it)."""
    entries = []
    for r in records:
        entry = r.to_json()
        entry["id"] = r.id or result_id(entry)
        entries.append(entry)
    return sorted(entries, key=lambda e: e["id"])


def complete_documents(results_dir: Path) -> list[Path]:
    """Turn every journal without its results document into one (a session that died, or the
    supervisor's own records), so what was computed reaches the report."""
    written = []
    for journal in sorted(results_dir.glob(f"*{JOURNAL_SUFFIX}")):
        document_path = journal.with_suffix(".json")
        if document_path.exists():
            continue
        header, records = read_journal(journal)
        if not header:
            continue
        document = dict(header)
        document["run"] = {**header.get("run", {}), "finished": datetime.now(UTC).isoformat(timespec="seconds")}
        document["results"] = result_entries(records.values())
        write_json_atomic(document_path, document)
        written.append(document_path)
    return written
