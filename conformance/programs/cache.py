"""The program cache: exported programs by structure, in memory and on disk.

torch.export costs 50-300 ms a program; a program is exported once per structure (what its
cache key names), kept in memory, and persisted under ``cache_dir()`` keyed by a content hash,
so later processes read it back instead of exporting it again.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance import __version__
from conformance.programs.export import export_module
from conformance.programs.graphs import assign_debug_handles, input_shapes_fit
from conformance.programs.operators import HarnessError

PROGRAM_FORMAT = 4
"""Bump when the way programs are built changes, to invalidate disk caches.
4: example inputs of empty tensors have torch's strides, not NumPy's zeros (api/tensors.to_torch)."""

log = logging.getLogger(__name__)


_CACHE_ROOT: list[Path | None] = []
"""The cache directory this process was told to use (``use_cache_dir``); [None]: no disk cache."""


def use_cache_dir(path: str | Path | None, *, disk: bool = True) -> None:
    """Where this process keeps programs, lowerings and compiled packages on disk (certify's
    ``--cache-dir``, the plugin's ``--conformance-cache``); ``disk=False``: nowhere (memory only)."""
    global _DEFAULT_CACHE
    _CACHE_ROOT[:] = [Path(path)] if path is not None else ([] if disk else [None])
    _DEFAULT_CACHE = None


def cache_dir() -> Path:
    """The cache directory: the one chosen with ``use_cache_dir``, else $XDG_CACHE_HOME (or
    ~/.cache) / torch-backend-conformance."""
    if _CACHE_ROOT and _CACHE_ROOT[0] is not None:
        return _CACHE_ROOT[0]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torch-backend-conformance"


def _digest(*parts: Any) -> str:
    import torch

    h = hashlib.sha256()
    for part in (PROGRAM_FORMAT, __version__, torch.__version__, *parts):
        h.update(repr(part).encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


@dataclass
class ProgramStats:
    exports: int = 0
    disk_hits: int = 0
    memory_hits: int = 0
    export_seconds: float = 0.0


class ProgramCache:
    """Programs by structure, in memory and on disk; safe to share between threads."""

    def __init__(self, directory: Path | None = None, *, use_disk: bool = True):
        self.directory = (directory or cache_dir()) / "programs"
        self.use_disk = use_disk
        self._variants: dict[str, list[Any]] = {}
        self._lock = threading.Lock()
        self.stats = ProgramStats()

    def _disk_path(self, key: str, index: int) -> Path:
        return self.directory / f"{key}-{index}.pt2"

    def _load_disk(self, key: str) -> list[Any]:
        out = []
        if not self.use_disk:
            return out
        index = 0
        while (path := self._disk_path(key, index)).exists():
            try:
                program = _read_program(path)
            except Exception as exc:  # a corrupt or stale entry is rebuilt, not fatal
                log.warning("program cache entry %s unreadable (%s); rebuilding", path, exc)
                break
            out.append(program)
            index += 1
        self.stats.disk_hits += len(out)
        return out

    def _store_disk(self, key: str, index: int, data: bytes) -> None:
        if not self.use_disk:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self._disk_path(key, index).with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, self._disk_path(key, index))
        except Exception as exc:
            log.warning("could not cache program %s: %s", key, exc)

    @staticmethod
    def _as_stored(program) -> tuple[Any, bytes | None]:
        """``program`` as a later process reads it back from the disk cache, and its bytes.

        torch.export.load does not give back the program torch.export.save was given: a node with
        several outputs gets a getitem for each, used or not (MobileNetV2: 80 operator nodes read
        back, 54 exported), so the debug handles differ too. Every process must see the same program
        whether it exported it or read it, so a new export is read back from its own bytes (and
        kept as exported only where it cannot be saved, which is logged)."""
        import torch

        try:
            buffer = io.BytesIO()
            torch.export.save(program, buffer)
            data = buffer.getvalue()
            return _read_program(io.BytesIO(data)), data
        except Exception as exc:  # noqa: BLE001 - a program export cannot serialize is still a program
            log.warning("an exported program does not survive torch.export.save/load (%s); used as exported", exc)
            return program, None

    def get(
        self,
        key_parts: Any,
        build: Callable[[], tuple[Any, list]],
        shapes: Sequence[tuple[int, ...]],
        dynamic: bool,
        keep: Sequence[str],
    ):
        """The first cached variant that accepts ``shapes``, or a newly exported one."""
        import time

        key = _digest(key_parts)
        with self._lock:
            variants = self._variants.get(key)
            if variants is None:
                variants = self._load_disk(key)
                self._variants[key] = variants
            for program in variants:
                if input_shapes_fit(program, shapes):
                    self.stats.memory_hits += 1
                    return program
        module, example = build()
        start = time.perf_counter()
        program = None
        if dynamic:
            try:
                program = export_module(module, example, dynamic=True, keep=keep)
            except HarnessError:
                raise
            except Exception as exc:
                # Size-oblivious export cannot decide some broadcasts (a 1 against a 0);
                # a program specialized to these shapes is always possible.
                log.info("dynamic export failed (%s); exporting static shapes", exc)
        if program is None or not input_shapes_fit(program, shapes):
            try:
                program = export_module(module, example, dynamic=False, keep=keep)
            except HarnessError:
                raise
            except Exception as exc:
                raise HarnessError(f"torch.export failed: {type(exc).__name__}: {exc}") from exc
        program, data = self._as_stored(program)
        self.stats.exports += 1
        self.stats.export_seconds += time.perf_counter() - start
        with self._lock:
            variants.append(program)
            if data is not None:
                self._store_disk(key, len(variants) - 1, data)
        return program


def _read_program(source):
    """A program torch.export.save wrote (a path or a file object), with the harness's debug handles."""
    import torch

    program = torch.export.load(source)
    assign_debug_handles(program)
    return program


_DEFAULT_CACHE: ProgramCache | None = None


def default_cache() -> ProgramCache:
    global _DEFAULT_CACHE
    if _DEFAULT_CACHE is None:
        _DEFAULT_CACHE = ProgramCache(use_disk=_CACHE_ROOT != [None])
    return _DEFAULT_CACHE
