"""certify's arguments, checked before anything runs: the profile, where the reports go, the
waivers and claims, the quantizer a profile needs, the durations that order the run, the shard.
A run that would fail on one of these fails now with a ``UsageError`` (exit 2), not after hours."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from conformance.cli.exits import UsageError
from conformance.report.model import load_report, read_report

DEFAULT_TIMEOUT = 120
DEFAULT_BUDGET = 6 * 3600
"""Seconds a whole certify run may take before what is left is recorded "not run"."""
REPORT_FILES = ("report.json", "report.md", "report.html", "junit.xml")


def resolve_profile(ns: argparse.Namespace, backend, specs):
    """The profile a certify run checks: a name of specs/profiles.toml, ``claimed`` (what the
    manifest claims), or FILE.toml[:NAME] (a user's profiles file); narrowed by --ops/--dtypes."""
    from conformance import specs as spec_module

    value = ns.profile or backend.profile
    try:
        if value == spec_module.CLAIMED:
            base = specs.profile(backend.profile if backend.profile in specs.profiles else "full")
            profile = spec_module.claimed_profile(specs, backend.manifest.ops, base)
            if not profile.ops:
                raise UsageError(f"--profile claimed: the manifest of {backend.name!r} claims no op the spec names")
        elif value in specs.profiles:
            profile = specs.profile(value)
        elif value.endswith(".toml") or ".toml:" in value or Path(value).is_file():
            path, _, name = value.partition(".toml:") if ".toml:" in value else (value, "", "")
            path = path + ".toml" if name else path
            if not Path(path).is_file():
                raise UsageError(f"--profile {value}: no such profiles file {path}")
            found = spec_module.profiles_from_file(path, specs)
            if not found:
                raise UsageError(f"--profile {value}: {path} defines no [profile.NAME] table")
            if not name and len(found) > 1:
                raise UsageError(f"--profile {value}: {path} defines {', '.join(sorted(found))}; say which: {path}:NAME")
            profile = found[name] if name else next(iter(found.values()))
            if name and name not in found:
                raise UsageError(f"--profile {value}: {path} defines {', '.join(sorted(found))}, not {name!r}")
        else:
            raise UsageError(
                f"unknown profile {value!r}; known: {', '.join(sorted([*specs.profiles, spec_module.CLAIMED]))}, "
                "or a profiles file (FILE.toml or FILE.toml:NAME)"
            )
        ops = [o for part in (ns.ops or []) for o in part.split(",") if o.strip()]
        dtypes = [d.strip() for part in (ns.dtypes or []) for d in part.split(",") if d.strip()]
        if ops or dtypes:
            profile = spec_module.narrowed(profile, specs, ops, dtypes)
    except (spec_module.SpecError, KeyError) as exc:  # KeyError: claimed, and the spec has no base profile
        raise UsageError(str(exc).strip("'\"")) from None
    return profile


def check_output(out: Path, backend_dir: Path, baseline: str | None) -> None:
    """The output directory can be written, and writing it will not destroy the baseline."""
    for parent in (out, *out.parents):
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"--output {out}: {parent} is a file, not a directory")
            break
    try:
        backend_dir.mkdir(parents=True, exist_ok=True)
        probe = backend_dir / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"--output {out}: cannot write there ({exc.strerror or exc})") from None
    if baseline:
        base = Path(baseline).resolve()
        if (
            any(base == (backend_dir / name).resolve() for name in REPORT_FILES)
            or base.parent == (backend_dir / "results").resolve()
        ):
            raise UsageError(
                f"--baseline {baseline} is a file this run writes ({backend_dir}): copy the baseline elsewhere first "
                f"(e.g. cp {baseline} baseline.json) or pass another --output"
            )


def check_inputs(ns: argparse.Namespace, backend, specs) -> None:
    """What else a run needs, checked before it starts: waivers and the manifest's claims."""
    from conformance import specs as spec_module

    if ns.waivers and not ns.baseline:
        raise UsageError("--waivers applies to the --baseline comparison: pass --baseline too (or drop --waivers)")
    if ns.waivers:
        from conformance.report.diff import WaiverError, load_waivers

        try:
            load_waivers(ns.waivers)
        except (WaiverError, OSError) as exc:
            raise UsageError(f"--waivers: {exc}") from None
    from conformance.strategies import known_signatures

    try:
        spec_module.check_claims(specs, backend.manifest.ops, f"the manifest of {backend.name!r}")
        spec_module.check_signatures(specs, known_signatures())
    except spec_module.SpecError as exc:
        raise UsageError(str(exc)) from None


def require_quantizer(profile) -> None:
    """A profile with quantized programs needs ExecuTorch's quantizer: without it every QNT check
    would end HARNESS_ERROR after the whole run, so its absence is a usage error before the run."""
    if not profile.quantized:
        return
    from conformance.programs.quantize import QuantizerMissing, require_quantizer

    try:
        require_quantizer()
    except QuantizerMissing as exc:
        raise UsageError(f"--profile {profile.name} holds {len(profile.quantized)} quantized program(s): {exc}") from None


def durations_snapshot(ns: argparse.Namespace, report_dir: Path, baseline: dict | None) -> Path | None:
    """The measured durations that order this run (conformance.run.scheduling), copied into the run's
    logs before the previous report is removed; None keeps the default order."""
    from conformance.run import scheduling

    choice = ns.durations_from
    if choice == "none":
        return None
    if choice is not None:
        if not Path(choice).is_file():
            raise UsageError(f"--durations-from {choice}: no such file (a report.json of an earlier run, or 'none')")
        measured = durations_of_report(Path(choice))
        if not measured:
            raise UsageError(
                f"--durations-from {choice}: holds no check durations (a report.json has them under results[].duration_s)"
            )
    else:
        measured = durations_of_report(report_dir / "report.json") or (
            scheduling.durations_of(read_report(baseline)) if baseline else {}
        )
    if not measured:
        return None
    snapshot = report_dir / "logs" / "durations.json"
    scheduling.write_durations(snapshot, measured)
    return snapshot.resolve()


def durations_of_report(path: Path) -> dict[str, float]:
    """Check durations from a report.json of any format this harness reads (its results are tables);
    empty when the file is not one or holds none."""
    from conformance.run import scheduling

    try:
        return scheduling.durations_of(load_report(path))
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def shard_tag(text: str | None) -> str:
    """The tag of --shard I/N in the names of the shard's files ("" without one)."""
    from conformance.run.invocation import parse_shard

    if not text:
        return ""
    try:
        index, total = parse_shard(text)
    except ValueError as exc:
        raise UsageError(f"--shard {exc}") from None
    return f"-shard-{index}-of-{total}"
