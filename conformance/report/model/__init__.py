"""The report: one JSON document per certification run, and the verdict.

Its parts: ``build`` (results documents and the report merged from them), ``judgement`` (mandatory
results, the summary, the verdict), ``provenance`` (the environment, backend and plugins a run
records), ``integrity`` (the hashes).

A run writes one *results document* per pytest session (``results/<tag>.json``:
the main checks, the performance phase, each shard). ``build_report`` merges
them into ``report.json``. Everything measured lives under the keys ``timings``,
``measurements``, ``duration_s``, ``started``, ``finished`` and ``command``, so two
runs with the same inputs differ only there (``stable_hash`` compares runs that way).

The file itself, its formats and how it is read, are ``conformance.report.document``'s.

``integrity`` holds the sha256 of the whole report (every key but ``integrity`` and
``signature``) in a canonical form: its results as a list of records, keys sorted, compact
JSON (``canonical_bytes``), so neither the layout of the file nor the tables change it. A
summary, a timing or a profile edited after the run no longer matches; and the sha256 of each
results document the report was built from (``results``, by part). Anyone can recompute an
unkeyed hash, so it proves only that the parts agree; ``signature`` (Ed25519,
``conformance.report.signing``) proves who published them. ``conformance.report.verify``
checks both and recomputes the verdict.
"""

from conformance.report.document import (
    PREVIOUS_REPORT_SCHEMAS,
    REPORT_SCHEMA,
    ReportError,
    load_report,
    read_report,
    records,
    report_text,
    schema,
    validate,
)
from conformance.report.model.build import (
    HARNESS_NAME,
    RESULTS_SCHEMA,
    build_report,
    report_profile,
    rerendered,
    results_digests,
    results_document,
)
from conformance.report.model.integrity import (
    UNHASHED_KEYS,
    VOLATILE_KEYS,
    canonical_bytes,
    document_digest,
    integrity_hash,
    part_digests,
    stable_hash,
)
from conformance.report.model.judgement import is_mandatory, latitudes_taken, partial_reason, summarize, verdict
from conformance.report.model.provenance import backend_info, environment, loaded_plugins, spec_section
from conformance.results import result_id

__all__ = [
    "HARNESS_NAME",
    "PREVIOUS_REPORT_SCHEMAS",
    "REPORT_SCHEMA",
    "RESULTS_SCHEMA",
    "UNHASHED_KEYS",
    "VOLATILE_KEYS",
    "ReportError",
    "backend_info",
    "build_report",
    "canonical_bytes",
    "document_digest",
    "environment",
    "integrity_hash",
    "is_mandatory",
    "latitudes_taken",
    "load_report",
    "loaded_plugins",
    "part_digests",
    "partial_reason",
    "read_report",
    "records",
    "report_profile",
    "report_text",
    "rerendered",
    "result_id",
    "results_digests",
    "results_document",
    "schema",
    "spec_section",
    "stable_hash",
    "summarize",
    "validate",
    "verdict",
]
