"""Reading specs/ into the records of ``conformance.specs.model``: the only reader of specs/.

Each file is first checked against its kind's JSON Schema (``conformance.specs.validation``);
the checks here are those a schema cannot state: references between entries and files, and
rules that tie one field to another.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from conformance.api.scalar_type import complex_dtype, component_dtype
from conformance.specs.model import (
    Bound,
    Clause,
    InputRange,
    ModelSpec,
    OpSpec,
    OutOfScope,
    QuantizedSpec,
    SpecError,
    Specs,
    Tolerance,
    expand_dtypes,
)
from conformance.specs.profiles import load_profiles
from conformance.specs.validation import closest, read_toml, validate

__all__ = ["use", "chosen_root", "specs_root", "load"]

_CHOSEN_ROOT: list[Path] = []
"""The spec of record this process was told to use (``use``), if not the installed one."""


def use(root: str | Path | None) -> None:
    """Make ``root`` the spec of record of this process (the CLI's ``--specs``, the plugin's
    ``--conformance-specs``); None goes back to the installed one."""
    _CHOSEN_ROOT[:] = [Path(root)] if root is not None else []
    load.cache_clear()


def chosen_root() -> Path | None:
    """The spec root chosen with ``use`` (None: the installed one is in force)."""
    return _CHOSEN_ROOT[0] if _CHOSEN_ROOT else None


def specs_root() -> Path:
    """The spec of record: the one chosen with ``use``, else specs/ of the repository, else the
    copy shipped in the wheel (package conformance_specs)."""
    if _CHOSEN_ROOT:
        return _CHOSEN_ROOT[0]
    repo = Path(__file__).resolve().parents[2] / "specs"
    if (repo / "interface.toml").exists():
        return repo
    import importlib.resources

    return Path(str(importlib.resources.files("conformance_specs")))


@functools.cache
def load(root: str | Path | None = None) -> Specs:
    root = Path(root) if root is not None else specs_root()
    if not (root / "interface.toml").exists():
        raise SpecError(f"{root}: no interface.toml; pass --specs with the specs/ directory")
    files = [root / "interface.toml", root / "profiles.toml", *sorted((root / "ops").glob("*.toml"))]
    files += [root / name for name in ("models.toml", "quantized.toml", "scope.toml") if (root / name).exists()]
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.relative_to(root).as_posix().encode())
        digest.update(f.read_bytes())
    clauses = _load_clauses(root / "interface.toml")
    ops: dict[str, OpSpec] = {}
    for f in files[2:]:
        if f.parent == root:
            continue
        for spec in _load_ops(f):
            for name in spec.names:
                if name in ops or any(name in s.edge for s in ops.values()):
                    raise SpecError(f"{spec.source}: op {name} is specified twice")
            ops[spec.name] = spec
    models = _load_models(root / "models.toml") if (root / "models.toml").exists() else {}
    quantized = _load_quantized(root / "quantized.toml", models) if (root / "quantized.toml").exists() else {}
    profiles = load_profiles(root / "profiles.toml", clauses, ops, models=models, quantized=quantized)
    out_of_scope = _load_scope(root / "scope.toml", ops) if (root / "scope.toml").exists() else {}
    return Specs(
        root=root,
        clauses=MappingProxyType(clauses),
        ops=MappingProxyType(ops),
        profiles=MappingProxyType(profiles),
        digest=digest.hexdigest(),
        models=MappingProxyType(models),
        quantized=MappingProxyType(quantized),
        out_of_scope=MappingProxyType(out_of_scope),
    )


def _read(path: Path, kind: str) -> dict:
    data = read_toml(path)
    validate(kind, data, str(path))
    return data


def _load_clauses(path: Path) -> dict[str, Clause]:
    data = _read(path, "clauses")
    return {
        cid: Clause(
            id=cid,
            family=cid.partition("-")[0],
            title=body["title"],
            text=" ".join(body["text"].split()),
            applies_to=tuple(body.get("applies_to", ["delegate"])),
        )
        for cid, body in data["clause"].items()
    }


def _load_ops(path: Path) -> list[OpSpec]:
    data = _read(path, "ops")
    family = data.get("family", path.stem)
    accumulates = data.get("accumulates", False)
    out = []
    for body in data["op"]:
        name = body["name"]
        where = f"{path}: [{name}]"
        attrs = {key: tuple(tuple(c) if isinstance(c, list) else c for c in choices) for key, choices in body.get("attrs", {}).items()}
        dtypes = expand_dtypes(f"{where}.dtypes", body.get("dtypes", "all"))
        tolerances = {}
        for dtype, tol in body.get("tolerance", {}).items():
            if dtype not in dtypes and complex_dtype(dtype) not in dtypes and component_dtype(dtype) not in dtypes:
                # a float tolerance may hold the outputs of a complex op (abs, _fft_c2r) and back
                raise SpecError(f"{where}.tolerance.{dtype}: {dtype} is not among the op's dtypes (nor the parts of a complex one)")
            tolerances[dtype] = Tolerance(
                atol=float(tol["atol"]),
                rtol=float(tol["rtol"]),
                ulp=tol.get("ulp", 0),
                reason=tol["reason"],
                source=f"op spec {name}",
            )
        exact = body.get("exact", False)
        out.append(
            OpSpec(
                name=name,
                family=body.get("family", family),
                signature=body["signature"],
                dtypes=dtypes,
                domain=body.get("domain", "with_specials"),
                attrs=MappingProxyType(attrs),
                params=MappingProxyType(dict(body.get("params", {}))),
                tolerances=MappingProxyType(tolerances),
                core=body.get("core", False),
                edge=tuple(body.get("edge", [])),
                dynamic=body.get("dynamic", True),
                max_examples=body.get("max_examples", 0) or None,
                notes=" ".join(body.get("notes", "").split()),
                source=f"{path}: op {name}",
                exact=exact,
                signed_zero=body.get("signed_zero", exact),
                accumulates=body.get("accumulates", accumulates),
                bound=_bound(f"{where}.bound", body["bound"], dtypes) if "bound" in body else None,
                skip_edges=MappingProxyType(dict(body.get("skip_edges", {}))),
                values=body.get("values", "reference"),
                defined_outputs=tuple(_defined(entry) for entry in body.get("defined_outputs", [])),
                weights=tuple(body.get("weights", [])),
                latitudes=MappingProxyType({k: tuple(v) for k, v in body.get("latitudes", {}).items()}),
            )
        )
    return out


def _defined(entry: bool | Mapping[str, list]) -> Mapping[str, tuple[Any, ...]] | None:
    """A defined_outputs entry: true (always defined: None), false (never: an empty table, which no
    call satisfies), or the attribute values under which eager defines the output ({ mode = [1, 2] })."""
    if entry is True:
        return None
    return MappingProxyType({} if entry is False else {key: tuple(allowed) for key, allowed in entry.items()})


def _bound(where: str, table: Mapping, dtypes: tuple[str, ...]) -> Bound:
    """bound = { kind = "sum", length = "count", accumulator = { float16 = "float32" },
    in_dtype_when = { transposed = [true] }, when = { reduce = ["sum"] }, reason = "..." } (``Bound``)."""
    accumulator = table.get("accumulator", {})
    for dtype, acc in accumulator.items():
        if dtype not in dtypes:
            raise SpecError(f"{where}.accumulator.{dtype} = {acc!r}: {dtype} is not among the op's dtypes {list(dtypes)}")
    kind, taps, weight_sum = table["kind"], table.get("taps", 0), float(table.get("weight_sum", 0.0))
    if (kind == "interpolation") != (taps > 0 and weight_sum > 0):
        raise SpecError(f"{where}: taps and weight_sum (both positive) go with kind 'interpolation', and only with it")
    return Bound(
        kind=kind,
        length=table.get("length", "count"),
        accumulator=MappingProxyType(dict(accumulator)),
        taps=taps,
        weight_sum=weight_sum,
        in_dtype_when=MappingProxyType({k: tuple(v) for k, v in table.get("in_dtype_when", {}).items()}),
        when=MappingProxyType({k: tuple(v) for k, v in table.get("when", {}).items()}),
        reason=" ".join(table["reason"].split()),
    )


def _ranges(where: str, items: list[Mapping[str, float]]) -> tuple[InputRange, ...]:
    for i, item in enumerate(items):
        if not item["low"] < item["high"]:
            raise SpecError(f"{where}.inputs[{i}]: low ({item['low']}) must be below high ({item['high']})")
    return tuple(InputRange(item["low"], item["high"]) for item in items)


def _load_models(path: Path) -> dict[str, ModelSpec]:
    data = _read(path, "models")
    defaults = data["defaults"]
    return {
        name: ModelSpec(
            name=name,
            description=body["description"],
            inputs=_ranges(f"{path}: [model.{name}]", body["inputs"]),
            examples=body.get("examples", defaults["examples"]),
            reason=body.get("reason", defaults.get("reason", "")),
            source=str(path),
            per_op_atol=float(body.get("per_op_atol", defaults["per_op_atol"])),
            per_op_rtol=float(body.get("per_op_rtol", defaults["per_op_rtol"])),
        )
        for name, body in data["model"].items()
    }


def _load_quantized(path: Path, models: Mapping[str, ModelSpec]) -> dict[str, QuantizedSpec]:
    data = _read(path, "quantized")
    defaults = data["defaults"]
    out: dict[str, QuantizedSpec] = {}
    for name, body in data["program"].items():
        where = f"{path}: [program.{name}]"
        if body["kind"] == "op":
            inputs = _ranges(where, body["inputs"])
        else:
            if name not in models:
                hint = closest(name, models, cutoff=0.6)
                raise SpecError(f"{where}: kind \"model\" names a model of models.toml; {name!r}"
                                + (f" (did you mean {hint}?)" if hint else "") + f" is not one: {', '.join(models)}")
            if "inputs" in body:
                raise SpecError(f"{where}: a model's inputs are its models.toml ranges; remove inputs")
            inputs = models[name].inputs
        out[name] = QuantizedSpec(
            name=name,
            kind=body["kind"],
            description=body["description"],
            inputs=inputs,
            lsb=float(body.get("lsb", defaults["lsb"])),
            examples=body.get("examples", defaults["examples"]),
            reason=body.get("reason", defaults.get("reason", "")),
            source=str(path),
        )
    return out


def _load_scope(path: Path, ops: Mapping[str, OpSpec]) -> dict[str, OutOfScope]:
    data = _read(path, "scope")
    scope: dict[str, OutOfScope] = {}
    for body in data.get("out_of_scope", []):
        name = body["name"]
        where = f"{path}: [{name}]"
        if name in ops or any(name in s.edge for s in ops.values()):
            raise SpecError(f"{where}: {name} has an op spec in specs/ops/; it cannot also be out of scope")
        if name in scope:
            raise SpecError(f"{where}: listed twice")
        scope[name] = OutOfScope(name, body["reason"].strip(), body.get("exercised", "").strip())
    return scope
