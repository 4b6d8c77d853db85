"""What produced a report's numbers, as its results documents record it: the interpreter,
libraries, CPU and accelerators (``environment``), the backend as it describes itself
(``backend_info``), the spec and profile (``spec_section``), and the pytest plugins the session
loaded, foreign ones with their hooks."""

from __future__ import annotations

import functools
import os
import platform
import sys
from collections.abc import Mapping
from typing import Any


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


def session_environment(config, backend_name: str) -> dict[str, Any]:
    """``environment()`` and what the backend's own plugin adds (hook pytest_conformance_environment)."""
    from conformance.run.transport import clean_text

    env = environment()
    extra: dict[str, str] = {}
    config.hook.pytest_conformance_environment(config=config, backend_name=backend_name, environment=extra)
    if extra:
        env["backend"] = {
            clean_text(str(k), 100): clean_text(str(v), 500) for k, v in sorted(extra.items(), key=lambda kv: str(kv[0]))
        }
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


def foreign(state) -> dict[str, Any]:
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


def merged_foreign(documents: list[Mapping[str, Any]]) -> dict[str, Any]:
    """``foreign`` of several results documents, merged."""
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
        where = (
            ", ".join(f"{d} {importlib.metadata.version(d)}" for d in sorted(set(dists)))
            if dists
            else getattr(plugin, "__file__", "?")
        )
        out.add(f"{module} ({where})")
    return sorted(out)
