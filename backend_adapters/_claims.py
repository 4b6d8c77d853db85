"""The adapters' claims as data: ``backend_adapters/claims/<backend-name>.toml``.

A claims file holds what a backend's :class:`~conformance.api.Manifest` carries that is a
literal: the ops and dtypes it claims, the calls it documents refusing, the clauses that
cannot be observed on it (each with the reason its report shows), tolerance loosenings
(each with its reason), the blob's version field and compile specs. :func:`load` reads one
into a frozen :class:`Claims` and :meth:`Claims.manifest` builds the Manifest; an error names
the file and the entry, as ``conformance.specs`` does for the spec.

The format (every key optional but ``backend``)::

    backend = "executorch-xnnpack"        # the file's stem: the entry point's name
    extends = "_torchscript-family"       # a shared file (name starts with "_") merged under this one

    [[ops]]                               # claimed ops, in groups of the same dtypes
    names = ["aten.abs.default", ...]
    dtypes = ["float16", "float32"]       # or "*": every dtype the spec lists for the op

    [ops_from]                            # claimed ops not listed here, one of:
    profile = "lazy"                      #   every op of this spec profile (specs/profiles.toml)
    spec = true                           #   every spec'd op
    adapter = "how"                       #   computed by the adapter at run time (say from what)
    dtypes = "*"                          # (profile, spec) the dtypes claimed for each

    [refuses]                             # op (or "*") -> kinds of call it documents refusing
    "*" = ["empty", "0-d"]

    [[not_applicable]]                    # clause IDs (or family prefixes like "REG-") and why
    clauses = ["RT-006", "RT-007"]
    reason = "..."

    [[tolerances]]                        # ToleranceLoosening's fields
    op = "aten.exp.default"
    reason = "..."
    ulp = 4

    [blob_version]                        # BlobVersionField's fields
    offset = 39
    size = 1
    current = 49

    compile_specs = []

    latitudes = ["tf32", "ftz"]          # numerical latitudes taken (conformance.api.LATITUDES)

With ``extends``, the shared file's not_applicable, refuses, tolerances and latitudes come first and
this file's entries override them; ops, ops_from, blob_version and compile_specs are this
file's own.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from conformance.api import BlobVersionField, Manifest, ToleranceLoosening
from conformance.api.certification import ALL_DTYPES
from conformance.specs import expect_field, read_toml

CLAIMS_PACKAGE = "backend_adapters"
CLAIMS_DIR = "claims"


class ClaimsError(ValueError):
    """A claims file is malformed. The message names the file, the entry and the field."""


@dataclass(frozen=True)
class OpGroup:
    """Ops claimed in the same dtypes."""

    names: tuple[str, ...]
    dtypes: tuple[str, ...] | str
    """Dtype names, or ``"*"`` for every dtype the spec lists for the op."""


@dataclass(frozen=True)
class OpsFrom:
    """Claimed ops that the file does not list: a spec profile's, the whole spec's or the adapter's."""

    profile: str | None = None
    spec: bool = False
    adapter: str | None = None
    """Computed by the adapter at run time; the text says from what."""
    dtypes: tuple[str, ...] | str = ALL_DTYPES


@dataclass(frozen=True)
class Claims:
    """One backend's claims file, read and checked."""

    backend: str
    source: str
    """The file it was read from (and the files it extends), for messages."""
    ops: tuple[OpGroup, ...] = ()
    ops_from: OpsFrom | None = None
    not_applicable: Mapping[str, str] = field(default_factory=dict)
    refuses: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tolerances: tuple[ToleranceLoosening, ...] = ()
    blob_version: BlobVersionField | None = None
    compile_specs: tuple[str, ...] = ()
    latitudes: tuple[str, ...] = ()
    """The numerical latitudes the backend declares (conformance.api.LATITUDES), its own and those of the file it extends."""

    def __post_init__(self):
        object.__setattr__(self, "not_applicable", MappingProxyType(dict(self.not_applicable)))
        object.__setattr__(self, "refuses", MappingProxyType(dict(self.refuses)))

    def listed_ops(self) -> dict[str, tuple[str, ...] | str]:
        """The ops the file lists (``[[ops]]``), op -> dtypes."""
        return {name: group.dtypes for group in self.ops for name in group.names}

    def op_claims(self, computed: Mapping[str, tuple[str, ...] | str] | None = None, specs: Any = None) -> dict[str, tuple[str, ...] | str]:
        """Every claimed op -> dtypes: ``[ops_from]``'s (resolved through ``specs``, by default
        ``conformance.specs.load()``, or ``computed`` for an adapter's), then the listed ones over them."""
        where = f"{self.source}: ops_from"
        claims: dict[str, tuple[str, ...] | str] = {}
        source = self.ops_from
        if source is not None and source.adapter is not None:
            if computed is None:
                raise ClaimsError(f"{where}: the ops are computed by the adapter ({source.adapter}); pass them")
            claims.update(computed)
        elif computed is not None:
            raise ClaimsError(f"{self.source}: ops were computed for a backend whose claims file lists them")
        elif source is not None:
            if specs is None:
                from conformance import specs as spec_module

                specs = spec_module.load()
            if source.spec:
                names: tuple[str, ...] = tuple(sorted(specs.ops))
            else:
                try:
                    names = specs.profile(source.profile).ops
                except KeyError as exc:
                    raise ClaimsError(f"{where}: profile: {exc.args[0]}") from None
            claims.update({op: source.dtypes for op in names})
        claims.update(self.listed_ops())
        return claims

    def manifest(self, computed: Mapping[str, tuple[str, ...] | str] | None = None, specs: Any = None) -> Manifest:
        """The Manifest these claims make (``computed``: the ops of ``ops_from.adapter``; ``specs``:
        the spec ``ops_from.profile`` and ``ops_from.spec`` are read from, by default the harness's)."""
        try:
            return Manifest(
                ops=self.op_claims(computed, specs),
                compile_specs=self.compile_specs,
                tolerances=self.tolerances,
                not_applicable=self.not_applicable,
                blob_version=self.blob_version,
                refuses=self.refuses,
                latitudes=self.latitudes,
            )
        except ClaimsError:
            raise
        except ValueError as exc:
            raise ClaimsError(f"{self.source}: {exc}") from None


# ---------------------------------------------------------------------------------------------
# Reading


def claims_dir() -> Path:
    return Path(str(resources.files(CLAIMS_PACKAGE).joinpath(CLAIMS_DIR)))


def backends(directory: Path | None = None) -> list[str]:
    """The backends that have a claims file (shared files, named ``_*``, left out)."""
    return sorted(p.stem for p in (directory or claims_dir()).glob("*.toml") if not p.stem.startswith("_"))


@functools.cache
def load(backend: str, directory: Path | None = None) -> Claims:
    """``<directory>/<backend>.toml`` (by default the package's claims/), checked: ClaimsError
    naming the file and the entry otherwise."""
    return _load(Path(directory or claims_dir()) / f"{backend}.toml", backend, ())


_KEYS = {"backend", "extends", "ops", "ops_from", "refuses", "not_applicable", "tolerances", "blob_version", "compile_specs", "latitudes"}


def _load(path: Path, name: str, seen: tuple[str, ...]) -> Claims:
    where = str(path)
    data = _read(path)
    _no_extra(where, data, _KEYS if not name.startswith("_") else _KEYS - {"ops", "ops_from", "blob_version"})
    backend = _expect(where, data, "backend", str, name if name.startswith("_") else ...)
    if backend != name:
        raise ClaimsError(f"{where}: backend = {backend!r}, but the file is named for {name!r}")
    base = None
    if "extends" in data:
        parent = _expect(where, data, "extends", str)
        if not parent.startswith("_"):
            raise ClaimsError(f"{where}: extends = {parent!r}: only shared files (named '_...') can be extended")
        if parent in seen or parent == name:
            raise ClaimsError(f"{where}: extends = {parent!r} makes a cycle ({' -> '.join((*seen, name, parent))})")
        base = _load(path.with_name(f"{parent}.toml"), parent, (*seen, name))
    ops = tuple(_op_group(f"{where}: ops[{i}]", entry) for i, entry in enumerate(_tables(where, data, "ops")))
    ops_from = _ops_from(f"{where}: ops_from", data["ops_from"]) if "ops_from" in data else None
    not_applicable: dict[str, str] = dict(base.not_applicable) if base else {}
    for i, entry in enumerate(_tables(where, data, "not_applicable")):
        entry_where = f"{where}: not_applicable[{i}]"
        _no_extra(entry_where, entry, {"clauses", "reason"})
        reason = _expect(entry_where, entry, "reason", str)
        if not reason.strip():
            raise ClaimsError(f"{entry_where}: reason is empty; say why the clauses cannot be observed")
        for clause in _strings(entry_where, entry, "clauses"):
            not_applicable[clause] = reason
    refuses: dict[str, tuple[str, ...]] = dict(base.refuses) if base else {}
    for op, kinds in _expect(where, data, "refuses", dict, {}).items():
        refuses[op] = _strings(f"{where}: refuses", {op: kinds}, op)
    tolerances = list(base.tolerances) if base else []
    for i, entry in enumerate(_tables(where, data, "tolerances")):
        try:
            tolerances.append(ToleranceLoosening(**entry))
        except (TypeError, ValueError) as exc:
            raise ClaimsError(f"{where}: tolerances[{i}]: {exc}") from None
    blob_version = None
    if "blob_version" in data:
        try:
            blob_version = BlobVersionField(**_expect(where, data, "blob_version", dict))
        except TypeError as exc:
            raise ClaimsError(f"{where}: blob_version (offset, size, current, byteorder): {exc}") from None
    claims = Claims(
        backend=backend,
        source=where if base is None else f"{where} (extends {base.source})",
        ops=ops,
        ops_from=ops_from,
        not_applicable=not_applicable,
        refuses=refuses,
        tolerances=tuple(tolerances),
        blob_version=blob_version,
        compile_specs=_strings(where, data, "compile_specs", ()),
        latitudes=tuple(dict.fromkeys((*(base.latitudes if base else ()), *_strings(where, data, "latitudes", ())))),
    )
    try:  # dtypes, refusal kinds: checked as the Manifest checks them, with the file named
        Manifest(ops=claims.listed_ops(), refuses=claims.refuses, latitudes=claims.latitudes)
    except ValueError as exc:
        raise ClaimsError(f"{where}: {exc}") from None
    return claims


def _op_group(where: str, entry: Mapping[str, Any]) -> OpGroup:
    _no_extra(where, entry, {"names", "dtypes"})
    names = _strings(where, entry, "names")
    if not names:
        raise ClaimsError(f"{where}: names is empty")
    return OpGroup(names=names, dtypes=_dtypes(where, entry))


def _ops_from(where: str, entry: Any) -> OpsFrom:
    if not isinstance(entry, dict):
        raise ClaimsError(f"{where}: must be a table, got {type(entry).__name__}")
    _no_extra(where, entry, {"profile", "spec", "adapter", "dtypes"})
    chosen = [key for key in ("profile", "spec", "adapter") if key in entry]
    if len(chosen) != 1:
        raise ClaimsError(f"{where}: give exactly one of profile, spec, adapter (got {chosen or 'none'})")
    if "spec" in entry and _expect(where, entry, "spec", bool) is not True:
        raise ClaimsError(f"{where}: spec = false claims nothing; leave ops_from out instead")
    if "adapter" in entry and "dtypes" in entry:
        raise ClaimsError(f"{where}: dtypes: the adapter computes the dtypes with the ops")
    return OpsFrom(
        profile=_expect(where, entry, "profile", str, None),
        spec="spec" in entry,
        adapter=_expect(where, entry, "adapter", str, None),
        dtypes=_dtypes(where, entry) if "dtypes" in entry else ALL_DTYPES,
    )


def _dtypes(where: str, entry: Mapping[str, Any]) -> tuple[str, ...] | str:
    value = _expect(where, entry, "dtypes", (list, str))
    if isinstance(value, str):
        if value != ALL_DTYPES:
            raise ClaimsError(f"{where}: dtypes must be a list of dtype names or {ALL_DTYPES!r}, got {value!r}")
        return value
    return _strings(where, entry, "dtypes")


def _read(path: Path) -> dict:
    return read_toml(path, error=ClaimsError, missing=f" (known: {', '.join(backends(path.parent))})")


def _expect(where: str, data: Mapping, key: str, kind: type | tuple, default: Any = ...) -> Any:
    return expect_field(where, data, key, kind, default, error=ClaimsError)


def _strings(where: str, data: Mapping, key: str, default: Any = ...) -> tuple[str, ...]:
    value = _expect(where, data, key, list, default)
    bad = [v for v in value if not isinstance(v, str)]
    if bad:
        raise ClaimsError(f"{where}: field {key!r} must list strings, got {bad!r}")
    return tuple(value)


def _tables(where: str, data: Mapping, key: str) -> list[dict]:
    value = _expect(where, data, key, list, [])
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise ClaimsError(f"{where}: {key}[{i}] must be a table ([[{key}]]), got {type(entry).__name__}")
    return value


def _no_extra(where: str, data: Mapping, allowed: set[str]) -> None:
    extra = set(data) - allowed
    if extra:
        raise ClaimsError(f"{where}: unknown field(s) {sorted(extra)}; allowed: {sorted(allowed)}")


__all__ = ["Claims", "ClaimsError", "OpGroup", "OpsFrom", "backends", "claims_dir", "load"]
