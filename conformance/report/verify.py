"""Is a report.json what this harness wrote, and does its verdict follow from its results?

    python -m conformance verify reports/NAME/report.json [--public-key PUB.pem] [--allow-stale]

``verify`` checks, in order:

1. the schema of the report's own format (an unknown category, a missing field, a field
   ``integrity`` or ``signature`` does not define; tables of results that do not read back);
   a report of a previous format (``model.PREVIOUS_REPORT_SCHEMAS``) is checked against its own;
2. that the report was made under this harness: its spec digest and its harness name and
   version are the installed ones. Otherwise the report is *stale*: its verdict cannot be
   recomputed here, and it is refused unless ``allow_stale`` (then steps 3-6 still run, and
   the outcome says the verdict was not recomputed);
3. the integrity hash over the whole report, its results as a list of records
   (``model.canonical_bytes``: the layout of the file and its tables do not change it);
4. the signature (Ed25519, ``conformance.report.signing``): with a public key, a signature
   by that key over the report's parts and the digests of its results documents is
   required, and a mismatch names the parts that differ from what was signed; without one,
   the report is *unsigned* or its signature *not checked*, and says so (``Signature``);
5. the results: ids unique (the gate matches results by id); each result's ``mandatory`` flag,
   the summary and the verdict recomputed from the results under the installed spec must be
   what the report says (a stale report: the summary from its own flags, and no certified
   verdict over a failing mandatory result);
6. given the path of a report.json, that report.md, report.html and junit.xml beside it (if
   present) name this report's integrity hash (a rendering of another run is stale), and
   that the documents of results/ beside it (if present) are those it was built from, or,
   the signature checked, those that were signed.

The integrity hash is unkeyed: anyone can recompute it after an edit, and anyone can edit
results/ and rebuild the report with ``conformance report``; steps 3, 5 and 6 then all hold.
They prove that the parts of a report agree, not who wrote it. Only the signature does that.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance import __version__
from conformance.report import html as html_report
from conformance.report import junit, markdown, signing
from conformance.report.document import decoded, read_report, validate
from conformance.report.model import (
    HARNESS_NAME,
    integrity_hash,
    is_mandatory,
    records,
    report_profile,
    results_digests,
    summarize,
    verdict,
)
from conformance.results import Category

RENDERINGS = {"report.md": markdown.embedded_hash, "report.html": html_report.embedded_hash, "junit.xml": junit.embedded_hash}
"""The files written beside report.json, and how each names the report it shows."""
_SHOWN = 5  # differing ids named in one problem


class Signature(enum.Enum):
    """Who wrote the report, as far as ``verify`` could tell."""

    VERIFIED = "verified"
    """Signed, and the signature holds under the public key given: its parts and results are
    the ones that key's holder signed."""
    NOT_CHECKED = "not checked"
    """Signed, but no public key was given: nothing about the signature was checked (anyone can
    write a signature block)."""
    UNSIGNED = "unsigned"
    """No signature: the report agrees with itself, which anyone who edits it can arrange."""
    INVALID = "invalid"
    """A public key was given and the signature does not hold under it (or there is none)."""


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
    signature: Signature = Signature.UNSIGNED

    @property
    def ok(self) -> bool:
        return self.status in (Status.VALID, Status.UNCHECKED)


class InvalidReport(ValueError):
    """A file that is not a report at all (not JSON, not an object)."""


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
    public_key: signing.Ed25519PublicKey | None = None,
    allow_stale: bool = False,
    path: str | Path | None = None,
) -> Outcome:
    """Check ``report`` (see the module docstring): a report.json document of any format this harness
    reads, or a report as ``build_report`` makes it; ``specs`` defaults to the installed spec.
    With ``public_key``, the report must be signed by it."""
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
    body = decoded(report)  # what the hash and the signature cover
    stored = body["integrity"]["sha256"]
    if integrity_hash(body) != stored:
        problems.append("integrity hash mismatch: the report was changed after it was written")
    signed, signature_problems, signed_results = _signature(body, public_key, notes)
    problems += signature_problems
    problems += _duplicate_ids(body["results"])
    if stale:
        problems += _consistency_problems(body)
        notes.append("verdict not recomputed: " + "; ".join(stale))
    else:
        problems += _recompute_problems(read_report(body), specs)
    if path is not None and Path(path).name == "report.json":
        problems += _rendering_problems(Path(path), stored)
        built_from = body["integrity"].get("results") if signed_results is None else signed_results
        problems += _results_problems(Path(path).parent / "results", built_from, signed_results is not None)
    if problems:
        return Outcome(Status.INVALID, tuple(problems), tuple(notes), report, signed)
    return Outcome(Status.UNCHECKED if stale else Status.VALID, (), tuple(notes), report, signed)


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


def _signature(report: Mapping[str, Any], key, notes: list[str]) -> tuple[Signature, list[str], Mapping[str, str] | None]:
    """What the signature shows, its problems, and the results digests it authenticates (None
    unless the signature block was made by ``key``, whether or not the report still matches it)."""
    signed = report.get("signature")
    if key is None:
        if signed:
            notes.append(f"signed (key id {signed['key_id']}), signature not checked: no --public-key given")
            return Signature.NOT_CHECKED, [], None
        notes.append("unsigned: nothing shows who wrote this report (sign it: certify --sign KEY.pem)")
        return Signature.UNSIGNED, [], None
    if not signed:
        given = signing.key_id(key)
        return Signature.INVALID, [f"unsigned, but a public key (key id {given}) was given: a published report must be signed"], None
    problems = signing.authenticate(signed, key)
    if problems:
        return Signature.INVALID, problems, None
    problems = signing.differences(report)
    if problems:
        return Signature.INVALID, problems, signed["results"]
    notes.append(f"signature valid (key id {signed['key_id']})")
    return Signature.VERIFIED, [], signed["results"]


def _results_problems(directory: Path, built_from: Mapping[str, str] | None, signed: bool) -> list[str]:
    """The documents of results/ beside a report against the digests it was built from (or that
    were signed). A part absent from results/, or a document of another part, is not compared:
    results/ is build output, and a later ``certify --shard`` adds to it."""
    if not built_from or not directory.is_dir():
        return []
    files, documents = [], []
    for path in sorted(directory.glob("*.json")):
        try:
            document = json.loads(path.read_text(encoding="utf-8", errors="replace"))
            document["run"]["tag"]
        except (OSError, ValueError, TypeError, KeyError):
            continue  # not a results document
        files.append(path)
        documents.append(document)
    what = "that was signed" if signed else "the report was built from"
    return [
        f"{directory.name}/{path.name} (part {part!r}, sha256 {digest[:16]}) is not the results document {what} "
        f"(sha256 {built_from[part][:16]}): results/ changed after {'signing' if signed else 'the report was built'}"
        for path, (part, digest) in zip(files, results_digests(documents).items())
        if part in built_from and built_from[part] != digest
    ]


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
    plugins = report["run"].get("backend_plugins", ())  # the foreign plugins the verdict names
    problems += _differences("verdict", report["verdict"], verdict(results, profile, specs, plugins=plugins))
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


SIGNATURE_WORDS = {Signature.VERIFIED: "SIGNED", Signature.NOT_CHECKED: "SIGNATURE NOT CHECKED", Signature.UNSIGNED: "UNSIGNED"}


def render(outcome: Outcome, name: str) -> str:
    """What ``verify`` prints: the finding first, then what was not checked."""
    report = outcome.report or {}
    lines = []
    if outcome.ok:
        backend, verdict_ = report["backend"], report["verdict"]
        what = f"{backend['name']} {backend['version']}: {verdict_['text']} (sha256 {report['integrity']['sha256'][:16]})"
        qualifiers = ["VERDICT NOT RECOMPUTED"] if outcome.status is Status.UNCHECKED else []
        qualifiers.append(SIGNATURE_WORDS[outcome.signature])
        lines.append(f"VALID, {', '.join(qualifiers)}: {what}")
    elif outcome.status is Status.STALE:
        lines += [f"STALE: {name}: {p}" for p in outcome.problems]
        lines.append(f"STALE: {name}: this harness cannot recompute its verdict; re-certify, or pass --allow-stale to check its integrity only")
    else:
        lines += [f"INVALID: {name}: {p}" for p in outcome.problems]
    lines += [f"note: {n}" for n in outcome.notes]
    return "\n".join(lines)
