"""The report: one JSON document per certification run, and the verdict.

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

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from conformance import __version__

# report.json's file and formats are document's; the names importable from here before stay so ("X as X")
from conformance.report.document import PREVIOUS_REPORT_SCHEMAS as PREVIOUS_REPORT_SCHEMAS
from conformance.report.document import REPORT_SCHEMA, ReportError, decoded, layouts_as_counts, read_report
from conformance.report.document import load_report as load_report
from conformance.report.document import report_text as report_text
from conformance.report.document import schema as schema
from conformance.report.document import validate as validate
from conformance.results import FAILURES, INCONCLUSIVE, CaseResult, Category, listed_results
from conformance.results import result_id as result_id
from conformance.run.journal import result_entries
from conformance.run.transport import jsonable
from conformance.specs import quantized_programs

RESULTS_SCHEMA = "torch-backend-conformance/results/1"
HARNESS_NAME = "torch-backend-conformance"
VOLATILE_KEYS = frozenset({"timings", "measurements", "duration_s", "started", "finished", "integrity", "command"})
"""Keys whose values change from run to run: durations, memory measurements, timestamps."""
UNHASHED_KEYS = frozenset({"integrity", "signature"})
"""The only top-level keys of report.json outside the bytes of the integrity hash."""


def _version(module: str) -> str | None:
    """The version of the module this process runs, without importing it when it is not loaded
    yet (importing torch costs the pytest controller ~1 s it otherwise never spends)."""
    import importlib.metadata

    loaded = sys.modules.get(module)
    if loaded is not None and isinstance(getattr(loaded, "__version__", None), str):
        return loaded.__version__
    try:
        return importlib.metadata.version(module)
    except importlib.metadata.PackageNotFoundError:
        return None


def _devices() -> list[dict[str, str]]:
    """The accelerators torch sees, each with its name, compute capability and the CUDA runtime torch
    was built with (a GPU run's numbers are that device's); empty on a machine without one."""
    try:
        import torch

        if not torch.cuda.is_available():
            return []
        return [{"kind": "cuda", "name": torch.cuda.get_device_name(i), "compute_capability": "{}.{}".format(*torch.cuda.get_device_capability(i)),
                 "cuda": torch.version.cuda or ""} for i in range(torch.cuda.device_count())]  # fmt: skip
    except Exception:  # a broken driver must not cost the report
        return []


def environment() -> dict[str, Any]:
    """What produced the numbers: interpreter, libraries, CPU, OS and accelerators (``_devices``)."""
    torch, numpy, ml_dtypes, hyp = (_version(m) for m in ("torch", "numpy", "ml_dtypes", "hypothesis"))
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "python": platform.python_version(),
        "torch": torch,
        "numpy": numpy,
        "ml_dtypes": ml_dtypes,
        "hypothesis": hyp,
        "cpu": cpu or platform.machine(),
        "cpu_count": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        **({"devices": devices} if (devices := _devices()) else {}),
    }


def records(results: Any) -> list[CaseResult]:
    """The records of report.json's ``results`` in either form (a list, or tables), or records already."""
    return [r if isinstance(r, CaseResult) else CaseResult.from_json(r) for r in listed_results(results)]


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
        "environment": _environment(config, backend_name),
        "run": {
            "tag": config.getoption("conformance_tag"),
            "hypothesis_profile": hypothesis_profile or "ci",
            "hypothesis_seed": config.getoption("hypothesis_seed", default=None),
            "plugins": loaded_plugins(config),
            **_foreign(state),
            "started": datetime.fromtimestamp(state.started, UTC).isoformat(timespec="seconds"),
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
        },
        "results": results,
    }


def _environment(config, backend_name: str) -> dict[str, Any]:
    """``environment()`` and what the backend's own plugin adds (hook pytest_conformance_environment)."""
    from conformance.run.transport import clean_text

    env = environment()
    extra: dict[str, str] = {}
    config.hook.pytest_conformance_environment(config=config, backend_name=backend_name, environment=extra)
    if extra:
        env["backend"] = {clean_text(str(k), 100): clean_text(str(v), 500) for k, v in sorted(extra.items(), key=lambda kv: str(kv[0]))}
    return env


def spec_section(specs, profile) -> dict[str, Any]:
    """The spec digest and profile name; for a profile with operator numerics, the core ATen overloads
    the spec leaves out of them with the reasons (specs/scope.toml); the profile's definition too when it is not one of the
    spec's own (claimed, a user's file, an --ops/--dtypes selection), so the report can be verified."""
    from conformance.specs import is_builtin, profile_definition

    section = {"digest": specs.digest, "profile": profile.name}
    if any(c.startswith("NUM-") for c in profile.clauses) and specs.out_of_scope:
        section["out_of_scope"] = {name: entry.reason for name, entry in sorted(specs.out_of_scope.items())}
    if not is_builtin(profile, specs):
        section["profile_definition"] = profile_definition(profile)
    return section


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


def backend_info(backend, requested: str | None = None) -> dict[str, Any]:
    """What the report says of the backend; its own strings cleaned and capped (a backend's name,
    version and description are its words, and can be anything)."""
    from conformance.run.transport import clean_text

    manifest = backend.manifest
    return {
        "name": clean_text(backend.name, 200) or "?",
        "version": clean_text(backend.version, 200),
        "description": clean_text(backend.description),
        "claims": {op: (list(d) if not isinstance(d, str) else d) for op, d in sorted(manifest.ops.items())},
        "compile_specs": [{"key": s.key, "value_hex": s.value.hex()} for s in backend.compile_specs],
        "tolerance_loosenings": [
            {"op": t.op, "dtypes": list(t.dtypes), "atol": t.atol, "rtol": t.rtol, "ulp": t.ulp, "reason": t.reason}
            for t in manifest.tolerances
        ],
        "not_applicable": {clause: clean_text(why) for clause, why in sorted(manifest.not_applicable.items())},
        "refuses": {op: list(kinds) for op, kinds in sorted(manifest.refuses.items())},
        **({"latitudes": list(manifest.latitudes)} if getattr(manifest, "latitudes", ()) else {}),
        **({"device": clean_text(backend.device, 40)} if getattr(backend, "device", "cpu") != "cpu" else {}),
        "source": _source(requested or backend.name),
    }


def _source(name: str) -> dict[str, str]:
    from conformance.discovery import DiscoveryError, source

    try:
        return source(name)
    except DiscoveryError as exc:
        return {"kind": "unknown", "value": str(exc)[:500]}


@functools.cache
def _package_owners() -> Mapping[str, list[str]]:
    """importlib.metadata.packages_distributions(), read once per process: it reads every installed
    distribution's file list (torch's alone is thousands of lines), 1.4 s here, and a session asks
    twice (the journal's header when it starts, the results document when it ends)."""
    import importlib.metadata

    return importlib.metadata.packages_distributions()


def _foreign(state) -> dict[str, Any]:
    """The session's foreign plugins with their hooks, and the records a report brought changed
    from their seals (``conformance.seal``); each key only where there is something to say."""
    from conformance.seal import foreign_plugins

    out: dict[str, Any] = {}
    plugins = foreign_plugins(state.config.pluginmanager)
    if plugins:
        out["backend_plugins"] = plugins
    if getattr(state, "altered", None):
        out["altered"] = list(state.altered)
    return out


def _merged_foreign(documents: list[Mapping[str, Any]]) -> dict[str, Any]:
    """``_foreign`` of several results documents, merged."""
    plugins: dict[str, set[str]] = {}
    altered: list[str] = []
    for doc in documents:
        for module, hooks in (doc["run"].get("backend_plugins") or {}).items():
            plugins.setdefault(module, set()).update(hooks)
        altered += doc["run"].get("altered") or []
    out: dict[str, Any] = {}
    if plugins:
        out["backend_plugins"] = {m: sorted(h) for m, h in sorted(plugins.items())}
    if altered:
        out["altered"] = sorted(set(altered))
    return out


def loaded_plugins(config) -> list[str]:
    """The plugin modules this session loaded from outside pytest itself ("module (distribution version)"),
    conftest files included: what could have changed an outcome."""
    import importlib.metadata

    owners = _package_owners()
    out = set()
    for _, plugin in config.pluginmanager.list_name_plugin():
        module = getattr(plugin, "__name__", None)
        if not isinstance(module, str) or module.startswith("_pytest") or module in ("pytest", "__main__"):
            continue
        top = module.split(".")[0]
        dists = owners.get(top) or []
        where = ", ".join(f"{d} {importlib.metadata.version(d)}" for d in sorted(set(dists))) if dists else getattr(plugin, "__file__", "?")
        out.add(f"{module} ({where})")
    return sorted(out)


# ---------------------------------------------------------------------------------------------
# Merge and verdict


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
            raise ReportError(
                f"cannot merge results of backends {first['backend']['name']!r} and {doc['backend']['name']!r}"
            )
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
            **_merged_foreign(documents),
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


def partial_reason(results: Iterable[CaseResult]) -> str | None:
    """Why the report holds fewer results than the run planned (interrupted, budget spent), or None."""
    left = [r for r in results if r.category is Category.SKIP and r.message.startswith("not run:")]
    if not left:
        return None
    reasons = Counter(r.message.split(";")[0].removeprefix("not run: ") for r in left)
    return f"{len(left)} planned check(s) not run: " + "; ".join(f"{why} ({n})" for why, n in reasons.most_common())


def is_mandatory(result: CaseResult, profile, specs) -> bool:
    clause = result.clause or ""
    if clause.startswith("NUM-"):
        if result.op is None:
            return False
        try:
            core = specs.op(result.op).name
        except KeyError:
            return False
        return result.dtype in profile.dtypes.get(core, ())
    if clause.startswith("PERF-"):
        return False  # performance is measured and gated by diff, not certified
    if clause.startswith("MOD-"):
        return clause in profile.clauses and result.model in profile.models
    if clause.startswith("QNT-"):
        return clause in profile.clauses and result.model in profile.quantized
    return clause in profile.clauses


def summarize(results: Iterable[CaseResult | Mapping[str, Any]]) -> dict[str, Any]:
    results = records(results)
    counts = Counter(r.category.value for r in results)
    mandatory = [r for r in results if r.mandatory]
    num = [r for r in results if (r.clause or "").startswith("NUM-")]
    clauses: dict[str, Counter] = {}
    for r in results:
        clauses.setdefault(r.clause or "?", Counter())[r.category.value] += 1
    return {
        "total": len(results),
        "counts": dict(sorted(counts.items())),
        "mandatory": {"total": len(mandatory), "passed": sum(r.category is Category.PASS for r in mandatory)},
        "numerics": {
            "total": len(num),
            "passed": sum(r.category is Category.PASS for r in num),
            "not_supported": sum(r.category is Category.NOT_SUPPORTED for r in num),
            "ops": len({r.op for r in num}),
            "dtypes": len({r.dtype for r in num}),
        },
        "clauses": {c: dict(sorted(v.items())) for c, v in sorted(clauses.items())},
    }


def latitudes_taken(results: Iterable[CaseResult]) -> list[str]:
    """The declared latitudes (conformance.api.LATITUDES, in that order) that passing NUM checks
    needed: some output passed under the latitude's model where the strict comparison failed
    (``stats.latitudes_taken``, conformance/checks/test_numerics.py)."""
    from conformance.api import LATITUDES

    found = {name for r in results if r.category is Category.PASS for name in ((r.stats or {}).get("latitudes_taken") or {})}
    return [name for name in LATITUDES if name in found]


def verdict(results: Iterable[CaseResult | Mapping[str, Any]], profile, specs, plugins: Iterable[str] = ()) -> dict[str, Any]:
    """Certified for the profile, or why not, reason first: failing checks (by clause), mandatory
    op x dtype the backend does not support, inconclusive results, mandatory checks not run.
    ``plugins``: the foreign pytest plugins the run loaded (``run.backend_plugins``), which the
    verdict names: their hooks could not change a category (``conformance.seal``), but they ran."""
    failing: list[str] = []
    failing_clauses: set[str] = set()
    failing_ops: set[str] = set()
    unsupported: list[str] = []
    inconclusive: list[str] = []
    not_run: list[str] = []
    allowed = {Category.PASS, Category.NOT_APPLICABLE}
    results = records(results)
    for r in results:
        if not r.mandatory or r.category in allowed:
            continue
        op_dtype = f"{r.op} {r.dtype or ''}".strip()
        if r.category in INCONCLUSIVE:
            inconclusive.append(r.id)
        elif r.category is Category.NOT_SUPPORTED and r.op:
            unsupported.append(op_dtype)
        elif r.category is Category.NOT_SUPPORTED and r.model:
            unsupported.append(f"{'quantized' if (r.clause or '').startswith('QNT-') else 'model'} {r.model}")
        elif r.category in FAILURES or r.category is Category.NOT_SUPPORTED:  # a refused contract program fails its clause
            failing.append(r.id)
            failing_clauses.add(r.clause)
            if r.op:
                failing_ops.add(op_dtype)
        else:
            not_run.append(r.id)
    seen_clauses = {r.clause for r in results}
    for clause in profile.clauses:
        if clause not in seen_clauses and not clause.startswith(("PERF-", "MOD-", "QNT-")):
            not_run.append(clause)
    seen_models = {(r.clause, r.model) for r in results if (r.clause or "").startswith(("MOD-", "QNT-"))}
    for clause in (c for c in profile.clauses if c.startswith(("MOD-", "QNT-"))):
        planned = profile.models if clause.startswith("MOD-") else quantized_programs(clause, profile, specs)
        not_run += [f"{clause} {m}" for m in planned if (clause, m) not in seen_models]
    seen_num = {(r.op, r.dtype) for r in results if (r.clause or "").startswith("NUM-")}
    for op, dtypes in profile.dtypes.items():
        for dtype in dtypes:
            if (op, dtype) not in seen_num:
                not_run.append(f"NUM {op} {dtype}")
    certified = not (failing or unsupported or inconclusive or not_run)
    taken = latitudes_taken(results)
    if certified:
        text = f"certified for profile {profile.name}" + (f" with latitude: {', '.join(taken)}" if taken else "")
    else:
        parts = []
        if failing:
            clauses = sorted(failing_clauses)
            named = ", ".join(clauses[:6]) + (f" and {len(clauses) - 6} more" if len(clauses) > 6 else "")
            parts.append(f"{len(failing)} failing check(s) in {named}")
        if unsupported:
            kinds = "op x dtype(s)" if not any(u.startswith(("model ", "quantized ")) for u in unsupported) else "op x dtype(s) or program(s)"
            parts.append(
                f"{len(unsupported)} mandatory {kinds} not supported"
                + ("" if profile.name.startswith("claimed") else " (--profile claimed certifies only what the backend claims)")
            )
        if inconclusive:
            parts.append(f"{len(inconclusive)} inconclusive result(s)")
        if not_run:
            parts.append(f"{len(not_run)} mandatory check(s) not run")
        text = f"not certified for profile {profile.name}: " + "; ".join(parts)
    foreign = sorted(plugins)
    if foreign:
        text += f" (run with foreign pytest plugins: {', '.join(foreign)})"
    out = {
        "certified": certified,
        "profile": profile.name,
        "text": text,
        "failing": sorted(failing),
        "failing_clauses": sorted(failing_clauses),
        "failing_ops": sorted(failing_ops),
        "unsupported": sorted(unsupported),
        "inconclusive": sorted(inconclusive),
        "not_run": sorted(not_run),
    }
    if foreign:
        out["plugins"] = foreign
    return out


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


def _stable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def canonical_bytes(report: Mapping[str, Any]) -> bytes:
    """The bytes the integrity hash covers: the report with its results as a list of records
    (``decoded``: the tables of report.json, or its layout, change nothing), as JSON data
    (``transport.jsonable``, idempotent, so the file read back gives the same bytes), keys sorted,
    compact, without ``integrity`` and ``signature``."""
    return _canonical({k: v for k, v in decoded(report).items() if k not in UNHASHED_KEYS})


def _canonical(value: Any) -> bytes:
    body = jsonable(value, None)
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=True).encode()


def document_digest(value: Any) -> str:
    """sha256 of any JSON value in canonical form (a results document, a part of a report)."""
    return hashlib.sha256(_canonical(value)).hexdigest()


def part_digests(report: Mapping[str, Any]) -> dict[str, str]:
    """sha256 of each top-level part of ``report`` (``decoded``) but ``integrity`` and ``signature``:
    what a signature covers, part by part, so that a mismatch names the parts that changed."""
    return {k: document_digest(v) for k, v in decoded(report).items() if k not in UNHASHED_KEYS}


def integrity_hash(report: Mapping[str, Any]) -> str:
    """sha256 over the whole report (summary, timings, run and environment included)."""
    return hashlib.sha256(canonical_bytes(report)).hexdigest()


def stable_hash(report: Mapping[str, Any]) -> str:
    """sha256 over what two runs with the same inputs share: everything but VOLATILE_KEYS
    (timings, durations, timestamps, the command line) and the list of merged parts."""
    body = {k: v for k, v in decoded(report).items() if k not in UNHASHED_KEYS}
    body["run"] = {k: v for k, v in (body.get("run") or {}).items() if k != "parts"}
    return hashlib.sha256(json.dumps(jsonable(_stable(body), None), sort_keys=True).encode()).hexdigest()
