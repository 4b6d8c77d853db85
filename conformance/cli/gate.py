"""Reports compared and checked: ``diff`` (and certify --baseline through ``compare``), ``verify``."""

from __future__ import annotations

import argparse
from pathlib import Path

from conformance.cli.exits import EXIT_INVALID, EXIT_OK, EXIT_REGRESSED, EXIT_STALE, EXIT_UNSIGNED, UsageError
from conformance.cli.inputs import public_key


def compare(baseline: dict, report: dict, ns, paths: tuple[str | None, str | None] = (None, None)) -> int:
    """Verify both reports (3 invalid, 4 stale), refuse other specs or profiles (4), then diff (6 regressed)."""
    from conformance.report import verify as verifying
    from conformance.report.diff import DiffError, WaiverError, diff, load_waivers, render

    try:
        waivers = load_waivers(ns.waivers) if ns.waivers else []
        key = public_key(getattr(ns, "public_key", None))
    except WaiverError as exc:
        raise UsageError(str(exc)) from None
    for label, document, path in (("baseline", baseline, paths[0]), ("new report", report, paths[1])):
        outcome = verifying.verify(document, public_key=key, allow_stale=ns.allow_stale, path=path)
        if not outcome.ok:
            print(verifying.render(outcome, f"{label} {path}" if path else label))
            return EXIT_INVALID if outcome.status is verifying.Status.INVALID else EXIT_STALE
        for note in outcome.notes:
            print(f"note: {label}: {note}")
    apart = [
        f"{k} {baseline['spec'][k]} -> {report['spec'][k]}"
        for k in ("digest", "profile")
        if baseline["spec"][k] != report["spec"][k]
    ]
    if apart and not ns.allow_stale:
        print(
            f"CANNOT COMPARE: the reports were certified under a different spec {' and '.join(apart)}; "
            "re-certify the baseline, or pass --allow-stale to compare them by check id"
        )
        return EXIT_STALE
    try:
        result = diff(baseline, report, threshold=ns.threshold, waivers=waivers)
    except DiffError as exc:
        print(f"INVALID: {exc}")
        return EXIT_INVALID
    print(render(result, ns.threshold))
    return EXIT_REGRESSED if result.failed else EXIT_OK


def diff_command(ns: argparse.Namespace) -> int:
    """Two reports verified, then compared: exit 6 on a regression."""
    from conformance.report import verify as verifying

    reports = []
    for path in (ns.old, ns.new):
        try:
            reports.append(verifying.load(Path(path)))
        except OSError as exc:
            raise UsageError(f"report {path}: {exc.strerror or exc}") from None
        except verifying.InvalidReport as exc:
            print(f"INVALID: {path}: {exc}")
            return EXIT_INVALID
    return compare(*reports, ns, paths=(ns.old, ns.new))


def verify_command(ns: argparse.Namespace) -> int:
    """Schema, staleness, integrity hash, signature, the verdict recomputed, the renderings beside it."""
    from conformance.report import verify as verifying

    key = public_key(ns.public_key)
    try:
        outcome = verifying.verify_file(ns.report, public_key=key, allow_stale=ns.allow_stale)
    except OSError as exc:
        raise UsageError(f"report {ns.report}: {exc.strerror or exc}") from None
    print(verifying.render(outcome, ns.report))
    if outcome.ok:
        return EXIT_OK if outcome.signature is verifying.Signature.VERIFIED else EXIT_UNSIGNED
    return EXIT_STALE if outcome.status is verifying.Status.STALE else EXIT_INVALID
