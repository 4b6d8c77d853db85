"""Is a report.json what this harness wrote, and does its verdict follow from its results?

    python -m conformance verify reports/NAME/report.json [--key-file KEY] [--allow-stale]

``verify`` checks, in order:

1. the schema (an unknown category, a missing field);
2. that the report was made under this harness: its spec digest and its harness name and
   version are the installed ones. Otherwise the report is *stale*: its verdict cannot be
   recomputed here, and it is refused unless ``allow_stale`` (then steps 3-5 still run, and
   the outcome says the verdict was not recomputed);
3. the integrity hash over the whole document (``model.canonical_bytes``);
4. the signature: with a key, a valid HMAC-SHA256 by that key is required; without one, a
   signature is reported as present and not checked;
5. the results: ids unique (the gate matches results by id); each result's ``mandatory`` flag,
   the summary and the verdict recomputed from the results under the installed spec must be
   what the report says (a stale report: the summary from its own flags, and no certified
   verdict over a failing mandatory result);
6. given the path of a report.json, that report.md, report.html and junit.xml beside it (if
   present) name this report's integrity hash: a rendering of another run is stale.

The integrity hash is unkeyed: anyone can recompute it after an edit, so steps 3 and 5
prove that the parts of a report agree, not who wrote it. Only the signature does that.
"""

from __future__ import annotations

import enum
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance import __version__
from conformance.report import html as html_report
from conformance.report import junit, markdown
from conformance.report.model import (
    HARNESS_NAME,
    SIGNATURE_ALG,
    integrity_hash,
    is_mandatory,
    key_id,
    records,
    report_profile,
    signature,
    summarize,
    validate,
    verdict,
)
from conformance.results import Category

SIGNING_KEY_ENV = "CONFORMANCE_SIGNING_KEY"
"""The environment variable that holds the signing key (CI keeps it as a secret)."""
RENDERINGS = {"report.md": markdown.embedded_hash, "report.html": html_report.embedded_hash, "junit.xml": junit.embedded_hash}
"""The files written beside report.json, and how each names the report it shows."""
_SHOWN = 5  # differing ids named in one problem


class Status(enum.Enum):
    VALID = "valid"
    """Schema, hash and signature (when a key was given) hold; flags, summary and verdict
    recompute under this harness's spec to what the report says."""
    UNCHECKED = "unchecked"
    """Stale, accepted on request: schema, hash and signature hold; the verdict was not recomputed."""
    STALE = "stale"
    """Made under another spec or harness: it cannot be recomputed here, and was refused."""
    INVALID = "invalid"
    """Not what the harness wrote, or what it says does not follow from its results."""


@dataclass(frozen=True)
class Outcome:
    status: Status
    problems: tuple[str, ...] = ()
    """Why the report is invalid or stale, one finding each."""
    notes: tuple[str, ...] = ()
    """What was not checked, and why (a signature without a key, a verdict not recomputed)."""
    report: Mapping[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.status in (Status.VALID, Status.UNCHECKED)


class InvalidReport(ValueError):
    """A file that is not a report at all (not JSON, not an object)."""


class SigningKeyError(ValueError):
    """A key file that cannot be read or is empty."""


def signing_key(key_file: str | Path | None = None, environ: Mapping[str, str] | None = None) -> bytes | None:
    """The key from ``key_file`` (trailing newline dropped), else from ``environ``'s
    CONFORMANCE_SIGNING_KEY; None when neither gives one."""
    if key_file is not None:
        try:
            key = Path(key_file).read_bytes().rstrip(b"\r\n")
        except OSError as exc:
            raise SigningKeyError(f"key file {key_file}: {exc.strerror or exc}") from None
        if not key:
            raise SigningKeyError(f"key file {key_file} is empty")
        return key
    value = (environ or {}).get(SIGNING_KEY_ENV)
    return value.encode() if value else None


def load(path: Path) -> dict[str, Any]:
    """report.json as a dict; OSError when unreadable, InvalidReport when not a JSON object."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidReport(f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise InvalidReport(f"not a report: a JSON {type(document).__name__}, not an object")
    return document


def verify_file(path: str | Path, **options: Any) -> Outcome:
    """``verify`` of the report.json at ``path``, its renderings beside it included."""
    path = Path(path)
    try:
        report = load(path)
    except InvalidReport as exc:
        return Outcome(Status.INVALID, (str(exc),))
    return verify(report, path=path, **options)


def verify(
    report: Mapping[str, Any],
    *,
    specs=None,
    key: bytes | None = None,
    allow_stale: bool = False,
    path: str | Path | None = None,
) -> Outcome:
    """Check ``report`` (see the module docstring); ``specs`` defaults to the installed spec."""
    if specs is None:
        from conformance import specs as spec_module

        specs = spec_module.load()
    problems = validate(report)
    if problems:
        shown = problems[:10] + ([f"... and {len(problems) - 10} more schema violations"] if len(problems) > 10 else [])
        return Outcome(Status.INVALID, tuple(f"schema: {p}" for p in shown), report=report)
    stale = staleness(report, specs)
    if stale and not allow_stale:
        return Outcome(Status.STALE, tuple(stale), report=report)

    notes: list[str] = []
    stored = report["integrity"]["sha256"]
    if integrity_hash(report) != stored:
        problems.append("integrity hash mismatch: the report was changed after it was written")
    problems += _signature_problems(report, key, notes)
    problems += _duplicate_ids(report["results"])
    if stale:
        problems += _consistency_problems(report)
        notes.append("verdict not recomputed: " + "; ".join(stale))
    else:
        problems += _recompute_problems(report, specs)
    if path is not None and Path(path).name == "report.json":
        problems += _rendering_problems(Path(path), stored)
    if problems:
        return Outcome(Status.INVALID, tuple(problems), tuple(notes), report)
    return Outcome(Status.UNCHECKED if stale else Status.VALID, (), tuple(notes), report)


def staleness(report: Mapping[str, Any], specs) -> list[str]:
    """Why ``report`` cannot be recomputed by this harness (empty when it can)."""
    reasons = []
    digest = report["spec"]["digest"]
    if digest != specs.digest:
        reasons.append(f"the report was certified against spec {digest[:12]}, this harness's spec is {specs.digest[:12]}")
    harness = report["harness"]
    if (harness.get("name"), harness.get("version")) != (HARNESS_NAME, __version__):
        reasons.append(
            f"the report was made by {harness.get('name')} {harness.get('version')}, this harness is {HARNESS_NAME} {__version__}"
        )
    return reasons


def _signature_problems(report: Mapping[str, Any], key: bytes | None, notes: list[str]) -> list[str]:
    signed = report.get("signature")
    if key is None:
        if signed:
            notes.append(f"signed (key id {signed['key_id']}), signature not checked: no key given")
        return []
    if not signed:
        return [f"not signed, but a signing key (key id {key_id(key)}) was given: a published report must be signed"]
    if signed["alg"] != SIGNATURE_ALG:
        return [f"signature algorithm {signed['alg']!r} is not {SIGNATURE_ALG}"]
    if signed["key_id"] != key_id(key):
        return [f"signed with key id {signed['key_id']}, not with the given key (key id {key_id(key)})"]
    if not hmac.compare_digest(signed["value"], signature(report, key)["value"]):
        return ["signature mismatch: the report was changed after it was signed"]
    notes.append(f"signature valid (key id {signed['key_id']})")
    return []


def _duplicate_ids(results: list[Mapping[str, Any]]) -> list[str]:
    seen: set[str] = set()
    duplicates = sorted({r["id"] for r in results if r["id"] in seen or seen.add(r["id"])})
    return [f"{len(duplicates)} result id(s) appear more than once: {_names(duplicates)}"] if duplicates else []


def _recompute_problems(report: Mapping[str, Any], specs) -> list[str]:
    """Flags, summary and verdict as this harness computes them from the results."""
    name = report["spec"]["profile"]
    try:
        profile = report_profile(report["spec"], specs)
    except KeyError:
        return [f"profile {name!r} is not in this harness's spec"]
    except ValueError as exc:  # SpecError: a definition this spec cannot hold
        return [f"profile {name!r}: {exc}"]
    results = records(report["results"])
    flipped = []
    for r in results:
        stored, r.mandatory = r.mandatory, is_mandatory(r, profile, specs)
        if r.mandatory != stored:
            flipped.append(r.id)
    problems = []
    if flipped:
        problems.append(f"{len(flipped)} result(s) carry a mandatory flag the spec does not give: {_names(flipped)}")
    problems += _differences("summary", report["summary"], summarize(results))
    problems += _differences("verdict", report["verdict"], verdict(results, profile, specs))
    return problems


def _consistency_problems(report: Mapping[str, Any]) -> list[str]:
    """What a stale report must still agree with: its summary with its own results and flags,
    and a certified verdict with no mandatory result failing."""
    results = report["results"]
    problems = _differences("summary", report["summary"], summarize(results))
    allowed = {Category.PASS.value, Category.NOT_APPLICABLE.value}
    failing = [r["id"] for r in results if r["mandatory"] and r["category"] not in allowed]
    if report["verdict"]["certified"] and failing:
        problems.append(f"the verdict says certified, but {len(failing)} mandatory result(s) did not pass: {_names(failing)}")
    return problems


def _differences(what: str, stored: Mapping[str, Any], recomputed: Mapping[str, Any]) -> list[str]:
    keys = sorted(set(stored) | set(recomputed))
    return [
        f"{what} does not follow from the results: {what}.{k} says {_short(stored.get(k))}, the results give {_short(recomputed.get(k))}"
        for k in keys
        if stored.get(k) != recomputed.get(k)
    ]


def _rendering_problems(path: Path, stored: str) -> list[str]:
    problems = []
    for name, embedded_hash in RENDERINGS.items():
        sibling = path.with_name(name)
        if not sibling.exists():
            continue
        try:
            named = embedded_hash(sibling.read_text(encoding="utf-8", errors="replace"))
        except OSError as exc:
            problems.append(f"{sibling}: cannot be read ({exc.strerror or exc})")
            continue
        if named is None:
            problems.append(f"{sibling} names no report integrity hash: a stale rendering (rebuild with `report`)")
        elif named != stored:
            problems.append(f"{sibling} shows another report (sha256 {named[:16]}, this one is {stored[:16]}): a stale rendering")
    return problems


def _names(ids: list[str]) -> str:
    return ", ".join(ids[:_SHOWN]) + (f" and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else "")


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render(outcome: Outcome, name: str) -> str:
    """What ``verify`` prints: the finding first, then what was not checked."""
    report = outcome.report or {}
    lines = []
    if outcome.ok:
        backend, verdict_ = report["backend"], report["verdict"]
        what = f"{backend['name']} {backend['version']}: {verdict_['text']} (sha256 {report['integrity']['sha256'][:16]})"
        if outcome.status is Status.VALID:
            lines.append(f"VALID: {what}")
        else:
            lines.append(f"VALID, VERDICT NOT RECOMPUTED: {what}")
    elif outcome.status is Status.STALE:
        lines += [f"STALE: {name}: {p}" for p in outcome.problems]
        lines.append(f"STALE: {name}: this harness cannot recompute its verdict; re-certify, or pass --allow-stale to check its integrity only")
    else:
        lines += [f"INVALID: {name}: {p}" for p in outcome.problems]
    lines += [f"note: {n}" for n in outcome.notes]
    return "\n".join(lines)
