"""Results documents (one per pytest session) and the report merged from them: ``build_report``
for a run, ``rerendered`` for a report of any format this harness reads, written again in this one."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from conformance import __version__
from conformance.report.document import REPORT_SCHEMA, ReportError, layouts_as_counts, read_report, records
from conformance.report.model.integrity import document_digest, integrity_hash
from conformance.report.model.judgement import is_mandatory, partial_reason, summarize, verdict
from conformance.report.model.provenance import (
    backend_info,
    foreign,
    loaded_plugins,
    merged_foreign,
    session_environment,
    spec_section,
)
from conformance.results import CaseResult
from conformance.run.journal import result_entries

RESULTS_SCHEMA = "torch-backend-conformance/results/1"
HARNESS_NAME = "torch-backend-conformance"


def results_document(state, backend_name: str, records: Iterable[CaseResult]) -> dict[str, Any]:
    """One pytest session's results for one backend (written by the plugin)."""
    from conformance.discovery import DiscoveryError

    try:
        backend = state.backend(backend_name)  # the controller has not loaded it yet under xdist
    except DiscoveryError:
        backend = None  # the run's checks record why; the document still carries them
    config = state.config
    hypothesis_profile = config.getoption("hypothesis_profile", default=None)
    results = result_entries(records)
    return {
        "schema": RESULTS_SCHEMA,
        "harness": {"name": HARNESS_NAME, "version": __version__},
        "spec": spec_section(state.specs, state.profile),
        "backend": backend_info(backend, backend_name) if backend is not None else {"name": backend_name, "version": "unknown"},
        "environment": session_environment(config, backend_name),
        "run": {
            "tag": config.getoption("conformance_tag"),
            "hypothesis_profile": hypothesis_profile or "ci",
            "hypothesis_seed": config.getoption("hypothesis_seed", default=None),
            "plugins": loaded_plugins(config),
            **foreign(state),
            "started": datetime.fromtimestamp(state.started, UTC).isoformat(timespec="seconds"),
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
        },
        "results": results,
    }


def report_profile(spec: Mapping[str, Any], specs):
    """The profile a report (or results document) was certified for (KeyError/SpecError if unknown here)."""
    from conformance.specs import profile_from_definition

    definition = spec.get("profile_definition")
    if definition is not None:
        profile = profile_from_definition(definition, specs)
        if profile.name != spec["profile"]:
            raise KeyError(f"profile {spec['profile']!r} carries the definition of {profile.name!r}")
        return profile
    return specs.profile(spec["profile"])


def build_report(documents: list[Mapping[str, Any]], specs) -> dict[str, Any]:
    """Merge results documents of one backend and one spec into a report with a verdict."""
    if not documents:
        raise ReportError("no results documents to build a report from")
    first = documents[0]
    for doc in documents[1:]:
        for key in ("spec", "harness"):
            if doc[key] != first[key]:
                raise ReportError(f"cannot merge results with different {key}: {doc[key]} vs {first[key]}")
        if doc["backend"]["name"] != first["backend"]["name"]:
            raise ReportError(f"cannot merge results of backends {first['backend']['name']!r} and {doc['backend']['name']!r}")
    merged: dict[str, CaseResult] = {}
    for doc in documents:
        try:
            found = records(doc["results"])
        except (ValueError, TypeError) as exc:
            raise ReportError(f"cannot build the report: results of part {doc['run'].get('tag')!r}: {exc}") from None
        for result in found:
            previous = merged.get(result.id)
            if previous is not None and previous != result and previous.category.is_failure:
                continue  # the same check ran twice (a re-run shard): keep the failure
            merged[result.id] = result
    try:
        profile = report_profile(first["spec"], specs)
    except (KeyError, ValueError) as exc:
        raise ReportError(f"cannot build the report: {exc}") from None
    results = sorted(merged.values(), key=lambda r: r.id)
    for r in results:
        r.mandatory = is_mandatory(r, profile, specs)
        layouts_as_counts(r.stats)
    report = {
        "schema": REPORT_SCHEMA,
        "harness": first["harness"],
        "spec": first["spec"],
        "backend": first["backend"],
        "environment": first["environment"],
        "run": {
            "hypothesis_profile": first["run"]["hypothesis_profile"],
            "hypothesis_seed": first["run"].get("hypothesis_seed"),
            "parts": sorted(doc["run"]["tag"] for doc in documents),
            "plugins": sorted({p for doc in documents for p in doc["run"].get("plugins", ())}),
            **merged_foreign(documents),
            "started": min(doc["run"]["started"] for doc in documents),
            "finished": max(doc["run"]["finished"] for doc in documents),
            "command": first["run"]["command"],
        },
        "results": [r.to_json() for r in results],
    }
    partial = partial_reason(results)
    if partial:
        report["run"]["partial"] = partial
    report["summary"] = summarize(results)
    report["verdict"] = verdict(results, profile, specs, plugins=report["run"].get("backend_plugins", ()))
    report["integrity"] = {"sha256": integrity_hash(report), "results": results_digests(documents)}
    return report


def results_digests(documents: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The sha256 of each results document (``document_digest``) by its part (``run.tag``):
    what a report was built from, which a signature covers and ``verify`` compares with the
    files of results/ beside the report."""
    digests: dict[str, str] = {}
    for doc in documents:
        part = str(doc["run"]["tag"])
        key, n = part, 1
        while key in digests:  # two documents of one part (a shard given twice): both are named
            n += 1
            key = f"{part}#{n}"
        digests[key] = document_digest(doc)
    return digests


def rerendered(document: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A report of any format this harness reads, in this one, with what changed in words: its
    results, flags, summary and verdict as they were (not recomputed: the spec it was certified
    under may not be this harness's), its integrity hash computed again over the new form (the
    digests of its results documents kept). A report of a previous format loses its signature, which
    covered the old form (sign it again: ``report --rerender --sign KEY``)."""
    old = document.get("schema")
    report = read_report(document)
    report = dict(report)
    notes = []
    if old != REPORT_SCHEMA:
        notes.append(f"{old} -> {REPORT_SCHEMA}")
        if report.pop("signature", None) is not None:
            notes.append("its signature covered the previous format and was dropped")
    report["integrity"] = {**report["integrity"], "sha256": integrity_hash(report)}
    return report, notes
