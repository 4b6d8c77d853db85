"""Certification profiles: those of profiles.toml and a user's file, and the profiles made at run
time (the backend's claims, a selection of ops and dtypes, the definition a report carries)."""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from conformance.api.scalar_type import DTYPE_NAMES, KNOWN_DTYPE_NAMES
from conformance.specs.model import Clause, ModelSpec, OpSpec, Profile, QuantizedSpec, SpecError, Specs, expand_dtypes
from conformance.specs.validation import closest, read_toml, validate, with_suggestion

__all__ = ["CLAIMED", "profiles_from_file", "profile_definition", "profile_from_definition", "claimed_profile", "narrowed",
    "check_claims", "check_signatures", "is_builtin"]  # fmt: skip


def load_profiles(
    path: Path,
    clauses: Mapping[str, Clause],
    ops: Mapping[str, OpSpec],
    known: Mapping[str, Profile] | None = None,
    models: Mapping[str, ModelSpec] | None = None,
    quantized: Mapping[str, QuantizedSpec] | None = None,
) -> dict[str, Profile]:
    """The profiles of a profiles.toml; ``known`` (the spec's own) may be extended by a user's file."""
    models = models or {}
    quantized = quantized or {}
    data = read_toml(path)
    validate("profiles", data, str(path))
    out: dict[str, Profile] = {}
    for name, body in data["profile"].items():
        where = f"{path}: [profile.{name}]"
        base = (out.get(body["extends"]) or (known or {}).get(body["extends"])) if "extends" in body else None
        if "extends" in body and base is None:
            raise SpecError(f"{where}: extends {body['extends']!r}, which is not defined above it")
        clause_ids = list(base.clauses) if base else []
        for pattern in body.get("clauses", []):
            matched = _match(pattern, clauses)
            if not matched:
                raise SpecError(f"{where}: clause pattern {pattern!r} matches no clause")
            clause_ids += [c for c in matched if c not in clause_ids]
        op_names = list(base.ops) if base else []
        selected = _select_ops(where, body.get("ops", []), ops)
        op_names += [o for o in selected if o not in op_names]
        dtype_field = body.get("dtypes", "spec")
        dtypes = dict(base.dtypes) if base else {}
        for op in selected:
            spec_dtypes = ops[op].dtypes
            wanted = dtype_field
            if isinstance(dtype_field, dict):  # per-op lists; unlisted ops keep their spec's dtypes
                wanted = dtype_field.get(op, "spec")
            if wanted == "spec":
                dtypes[op] = spec_dtypes
            else:
                wanted = expand_dtypes(f"{where}: dtypes of {op}", wanted)
                missing = [d for d in wanted if d not in spec_dtypes] if isinstance(dtype_field, dict) else []
                if missing:
                    raise SpecError(f"{where}: {op} is not specified for {missing}")
                dtypes[op] = tuple(d for d in spec_dtypes if d in wanted)
        if isinstance(dtype_field, dict):
            unknown = sorted(set(dtype_field) - set(selected))
            if unknown:
                raise SpecError(f"{where}: dtypes given for ops the profile does not select: {unknown}")
        model_names = _names(where, body.get("models", []), "model", models, list(base.models) if base else [])
        quantized_names = _names(where, body.get("quantized", []), "quantized program", quantized, list(base.quantized) if base else [])
        out[name] = Profile(
            name=name,
            description=body["description"],
            clauses=tuple(clause_ids),
            ops=tuple(op_names),
            dtypes=MappingProxyType(dtypes),
            models=tuple(model_names),
            quantized=tuple(quantized_names),
        )
    return out


def _names(where: str, field_: str | list[str], what: str, known: Mapping, names: list[str]) -> list[str]:
    """A profile's ``models`` or ``quantized``: "all" or a list of names ``known`` defines (each a
    ``what``), after ``names`` (its base's)."""
    if field_ == "all":
        field_ = list(known)
    unknown = [m for m in field_ if m not in known]
    if unknown:
        raise SpecError(f"{where}: unknown {what}(s) {', '.join(with_suggestion(m, known) for m in unknown)}")
    return names + [m for m in field_ if m not in names]


def _match(pattern: str, clauses: Mapping[str, Clause]) -> list[str]:
    if pattern.endswith("*"):
        return sorted(c for c in clauses if c.startswith(pattern[:-1]))
    return [pattern] if pattern in clauses else []


def _select_ops(where: str, value: list | str, ops: Mapping[str, OpSpec]) -> list[str]:
    if value == "all":
        return sorted(ops)
    if value == "core":
        return sorted(name for name, spec in ops.items() if spec.core)
    if isinstance(value, str):  # family:NAME (the schema admits no other string)
        family = value.removeprefix("family:")
        chosen = sorted(name for name, spec in ops.items() if spec.family == family)
        if not chosen:
            raise SpecError(f"{where}: ops {value!r}: no op spec is of family {family!r}")
        return chosen
    unknown = [o for o in value if o not in ops]
    if unknown:
        raise SpecError(f"{where}: unknown op(s) {', '.join(with_suggestion(o, ops) for o in unknown)}")
    return list(value)


def check_claims(specs: Specs, claims: Iterable[str], whose: str = "the backend's manifest") -> None:
    """Every op a manifest claims is spec'd (SpecError naming the typos otherwise): a misspelt claim
    would silently drop the op from everything the claims decide."""
    names = specs.all_op_names()
    unknown = sorted(op for op in claims if op not in names)
    if unknown:
        raise SpecError(
            f"{whose} claims op(s) no spec names: "
            + ", ".join(with_suggestion(o, names) for o in unknown)
            + " (spell them as ATen overloads, e.g. aten.add.Tensor; `python -m conformance list --ops` lists them)"
        )


# ---------------------------------------------------------------------------------------------
# Profiles beyond profiles.toml: the backend's claims, a user's file, a selection


CLAIMED = "claimed"
"""The profile of exactly what the backend's manifest claims (op x dtype), plus the contract clauses."""


def profile_definition(profile: Profile) -> dict[str, Any]:
    """A profile as data (carried in a report whose profile is not one of the spec's own)."""
    return {
        "name": profile.name,
        "description": profile.description,
        "clauses": list(profile.clauses),
        "ops": {op: list(profile.dtypes.get(op, ())) for op in profile.ops},
        **({"models": list(profile.models)} if profile.models else {}),
        **({"quantized": list(profile.quantized)} if profile.quantized else {}),
    }


def profile_from_definition(definition: Mapping[str, Any], specs: Specs) -> Profile:
    """The inverse of ``profile_definition``, checked against the spec (SpecError otherwise)."""
    where = f"profile definition {definition.get('name')!r}" if isinstance(definition, Mapping) else "profile definition"
    validate("profile-definition", definition, where)
    clause_ids = definition["clauses"]
    unknown = [c for c in clause_ids if c not in specs.clauses]
    if unknown:
        raise SpecError(f"{where}: unknown clause(s) {unknown}")
    op_map = definition["ops"]
    ops_known = specs.ops
    bad = [o for o in op_map if o not in ops_known]
    if bad:
        raise SpecError(f"{where}: unknown op(s) {', '.join(with_suggestion(o, ops_known) for o in bad)}")
    dtypes = {}
    for op, wanted in op_map.items():
        if any(d not in ops_known[op].dtypes for d in wanted):
            raise SpecError(f"{where}: {op}: dtypes must be a list of {list(ops_known[op].dtypes)}, got {wanted!r}")
        dtypes[op] = tuple(d for d in ops_known[op].dtypes if d in wanted)
    models = definition.get("models", [])
    unknown_models = [m for m in models if m not in specs.models]
    if unknown_models:
        raise SpecError(f"{where}: unknown model(s) {unknown_models}")
    quantized = definition.get("quantized", [])
    unknown_quantized = [m for m in quantized if m not in specs.quantized]
    if unknown_quantized:
        raise SpecError(f"{where}: unknown quantized program(s) {unknown_quantized}")
    description = definition.get("description", "")
    return Profile(definition["name"], description, tuple(clause_ids), tuple(op_map), MappingProxyType(dtypes), tuple(models), tuple(quantized))


def claimed_profile(specs: Specs, claims: Mapping[str, Any], base: Profile) -> Profile:
    """Every op x dtype ``claims`` (a manifest's ops: name -> dtypes or "*") names that the spec
    specifies, with ``base``'s clauses: a first certification of a backend that covers a few ops.
    A claim of an op the spec does not know is a SpecError (``check_claims``)."""
    check_claims(specs, claims)
    dtypes: dict[str, tuple[str, ...]] = {}
    for name, claimed in claims.items():
        core = specs.op(name).name
        spec_dtypes = specs.ops[core].dtypes
        # "*" is the op's dtypes among the ten of "all": the others are claimed by name (Manifest.claims)
        wanted = tuple(d for d in spec_dtypes if d in DTYPE_NAMES) if claimed == "*" else tuple(claimed)
        have = set(dtypes.get(core, ())) | {d for d in wanted if d in spec_dtypes}
        dtypes[core] = tuple(d for d in spec_dtypes if d in have)
    clauses = tuple(c for c in base.clauses if not c.startswith("NUM-")) + tuple(c for c in specs.clauses if c.startswith("NUM-"))
    ops = tuple(op for op in sorted(dtypes) if dtypes[op])
    return Profile(
        CLAIMED,
        f"The contract clauses of profile {base.name} plus the numerics of exactly the {len(ops)} op(s) the manifest claims, in the dtypes it claims.",
        clauses,
        ops,
        MappingProxyType({op: dtypes[op] for op in ops}),
        base.models,
        base.quantized,
    )


def profiles_from_file(path: str | Path, specs: Specs) -> dict[str, Profile]:
    """A user's profiles file, in profiles.toml's format; its profiles may extend the spec's."""
    return load_profiles(Path(path), specs.clauses, specs.ops, known=specs.profiles, models=specs.models, quantized=specs.quantized)


def narrowed(profile: Profile, specs: Specs, ops: Sequence[str] | None, dtypes: Sequence[str] | None) -> Profile:
    """``profile`` with its numerics limited to the ops matching ``ops`` (names or fnmatch patterns,
    e.g. aten.add.* or *conv*) and the dtypes in ``dtypes``; the contract clauses stay."""
    selected = list(profile.ops)
    if ops:
        patterns = [p.strip() for p in ops if p.strip()]
        selected = [op for op in selected if any(fnmatch.fnmatchcase(n, p) for p in patterns for n in specs.ops[op].names)]
        unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(n, p) for op in profile.ops for n in specs.ops[op].names)]
        if unmatched:
            raise SpecError(
                f"--ops: {', '.join(with_suggestion(p, specs.all_op_names()) for p in unmatched)} "
                f"match(es) no op of profile {profile.name}"
            )
    if dtypes:
        unknown = [d for d in dtypes if d not in KNOWN_DTYPE_NAMES]
        if unknown:
            raise SpecError(f"--dtypes: unknown dtype(s) {unknown}; known: {', '.join(KNOWN_DTYPE_NAMES)}")
    table = {op: tuple(d for d in profile.dtypes.get(op, ()) if not dtypes or d in dtypes) for op in selected}
    table = {op: ds for op, ds in table.items() if ds}
    if not table and (ops or dtypes):
        raise SpecError(f"--ops/--dtypes select no op x dtype of profile {profile.name}")
    parts = [f"ops {','.join(ops)}" if ops else "", f"dtypes {','.join(dtypes)}" if dtypes else ""]
    label = "; ".join(p for p in parts if p)
    return Profile(
        f"{profile.name}[{label}]",
        f"{profile.description} Selected: {label}.",
        profile.clauses,
        tuple(table),
        MappingProxyType(table),
        profile.models,
        profile.quantized,
    )


def check_signatures(specs: Specs, known: Collection[str]) -> None:
    """Every op spec names a signature in ``known``, those the strategies define
    (``conformance.strategies.known_signatures``; SpecError naming the file otherwise): checked
    before a run, not found half-way as a HARNESS_ERROR."""
    bad = [spec for spec in specs.ops.values() if spec.signature not in known]
    if bad:
        first = bad[0]
        raise SpecError(
            f"{first.source}: signature {first.signature!r} is not defined"
            + (f" (did you mean {hint}?)" if (hint := closest(first.signature, known, cutoff=0.6)) else "")
            + f"; known: {', '.join(sorted(known))}"
            + (f"; {len(bad) - 1} more op(s) name an undefined signature" if len(bad) > 1 else "")
        )


def is_builtin(profile: Profile, specs: Specs) -> bool:
    return specs.profiles.get(profile.name) == profile
