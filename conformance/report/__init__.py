"""Reports: the model (results documents, report.json, verdict) and its renderers.

Renderers are pure functions of report.json.
"""

from .model import REPORT_SCHEMA, RESULTS_SCHEMA, ReportError, build_report, environment, results_document

__all__ = ["REPORT_SCHEMA", "RESULTS_SCHEMA", "ReportError", "build_report", "environment", "results_document"]
