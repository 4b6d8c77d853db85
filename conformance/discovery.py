"""Finding the backend to certify: an entry-point name, or a ``module:attr`` path.

Third-party packages expose a ``BackendUnderTest`` (or a zero-argument callable
returning one) in the entry-point group ``conformance.backends``::

    [project.entry-points."conformance.backends"]
    mybackend = "mypackage.conformance:backend_under_test"

``path/to/file.py:attr`` and ``package.module:attr`` work too, without packaging.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
from pathlib import Path
from typing import Any

from conformance.api import BackendUnderTest

GROUP = "conformance.backends"


class DiscoveryError(LookupError):
    """The backend could not be found or built. The message says what to do."""


def entry_points(name: str | None = None) -> dict[str, importlib.metadata.EntryPoint]:
    """name -> entry point. A name two installed distributions both provide is ambiguous (one
    would silently shadow the other: whichever comes last on sys.path): asking for it (``name``)
    is an error naming both, and the mapping leaves it out. Other backends are not affected."""
    found: dict[str, list[importlib.metadata.EntryPoint]] = {}
    for ep in importlib.metadata.entry_points(group=GROUP):
        same = found.setdefault(ep.name, [])
        if not any(_where(e) == _where(ep) for e in same):  # one distribution seen twice on sys.path
            same.append(ep)
    if name is not None and len(found.get(name, ())) > 1:
        raise DiscoveryError(
            f"backend name {name!r} is provided by more than one installed distribution in entry-point group {GROUP!r}: "
            + " and ".join(f"{ep.value} (distribution {_where(ep)})" for ep in found[name])
            + ". Uninstall one, or rename its entry point, so the name says which backend is certified."
        )
    return {n: eps[0] for n, eps in found.items() if len(eps) == 1}


def _where(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"{dist.metadata['Name']} {dist.version}" if dist is not None else "unknown"


def source(name: str) -> dict[str, str]:
    """Where the backend named ``name`` comes from: its entry point and distribution, or its path."""
    if ":" in name:
        return {"kind": "path", "value": name}
    ep = entry_points(name).get(name)
    if ep is None:
        return {"kind": "unknown", "value": name}
    return {"kind": "entry point", "group": GROUP, "name": ep.name, "value": ep.value, "distribution": _where(ep)}


def available() -> list[str]:
    return sorted(entry_points())


def _import_path(spec: str) -> Any:
    module_part, _, attr = spec.rpartition(":")
    if not module_part or not attr:
        raise DiscoveryError(f"{spec!r}: expected module:attr or path/to/file.py:attr")
    if module_part.endswith(".py") or "/" in module_part:
        path = Path(module_part)
        if not path.exists():
            raise DiscoveryError(f"{spec!r}: no such file {path}")
        name = f"_conformance_backend_{abs(hash(str(path.resolve())))}"
        module = sys.modules.get(name)
        if module is None:
            loader_spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[name] = module
            loader_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(module_part)
        except ImportError as exc:
            raise DiscoveryError(f"{spec!r}: cannot import {module_part}: {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise DiscoveryError(f"{spec!r}: {module_part} has no attribute {attr!r}") from None


def _materialize(obj: Any, source: str) -> BackendUnderTest:
    if isinstance(obj, BackendUnderTest):
        return obj
    if callable(obj):
        try:
            made = obj()
        except DiscoveryError:
            raise
        except Exception as exc:
            raise DiscoveryError(f"{source}: building the backend failed: {type(exc).__name__}: {exc}") from exc
        if isinstance(made, BackendUnderTest):
            return made
        raise DiscoveryError(f"{source}: the factory returned {type(made).__name__}, not a BackendUnderTest")
    raise DiscoveryError(f"{source}: {type(obj).__name__} is neither a BackendUnderTest nor a factory of one")


def load(name: str) -> BackendUnderTest:
    """The BackendUnderTest named ``name`` (an entry point) or at ``name`` (module:attr)."""
    if ":" in name:
        return _materialize(_import_path(name), name)
    eps = entry_points(name)  # a shadowed name is an error here, before anything runs
    if name not in eps:
        found = ", ".join(sorted(eps)) or "none"
        raise DiscoveryError(
            f"unknown backend {name!r}. Backends found in entry-point group {GROUP!r}: {found}. "
            "Install the package that provides it, or pass a module:attr path."
        )
    try:
        obj = eps[name].load()
    except DiscoveryError:
        raise
    except Exception as exc:
        raise DiscoveryError(f"backend {name!r}: loading {eps[name].value} failed: {type(exc).__name__}: {exc}") from exc
    return _materialize(obj, f"backend {name!r} ({eps[name].value})")
