"""Exit codes (every command):

  0  certified (with --baseline: and no regression); verify: the report is valid and current;
     diff: no regression
  1  not certified (with --baseline: and no regression; the verdict is printed either way)
  2  usage error: bad arguments, an unknown backend, an unreadable file
  3  invalid report: schema, integrity hash, signature, or a verdict/summary the results do not give
  4  cannot compare: the report's spec digest or harness version is not this harness's
     (verify --allow-stale accepts it; diff of reports under different specs)
  5  verify: the report is valid but unsigned, or signed and no --public-key was given to
     check it: nothing shows who wrote it (with --public-key, an unsigned report is 3)
  6  certify --baseline, diff: a regression against the baseline (a result that no longer
     passes, a new failure, a result or mandatory check missing, a claim dropped, a slowdown
     or lost timings; conformance.report.diff), whatever the verdict
130  certify was interrupted (Ctrl-C, SIGTERM): the report written is partial, not certified
"""

EXIT_OK, EXIT_NOT_CERTIFIED, EXIT_USAGE, EXIT_INVALID, EXIT_STALE = 0, 1, 2, 3, 4
EXIT_UNSIGNED = 5
"""verify: valid, but no signature was checked (unsigned, or no --public-key given)."""
EXIT_REGRESSED = 6
"""certify --baseline, diff: the new report regressed against the baseline (conformance.report.diff)."""
EXIT_INTERRUPTED = 130
"""certify stopped by Ctrl-C or SIGTERM: a partial report (not certified) was written."""


class UsageError(Exception):
    """Bad arguments, an unknown backend, an unreadable file: printed, exit 2."""
