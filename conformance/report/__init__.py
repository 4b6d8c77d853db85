"""Reports: the model (results documents, report.json, verdict) and its renderers.

Renderers are pure functions of a report; ``load_report`` reads report.json (of this format or the
previous) into the report they take.
"""

from .document import load_report, read_report
from .model import (
    REPORT_SCHEMA,
    RESULTS_SCHEMA,
    ReportError,
    build_report,
    environment,
    results_document,
)

__all__ = ["REPORT_SCHEMA", "RESULTS_SCHEMA", "ReportError", "build_report", "environment", "load_report", "read_report", "results_document"]
