"""Named data: weights a backend stores beside its blob instead of inside it.

``NamedDataStore`` is the ahead-of-time half (exir/_serialize/_named_data_store.py):
preprocess adds bytes under a key and returns the store's output in its
``PreprocessResult``. ``NamedDataMap`` is the runtime half
(runtime/core/named_data_map.h): ``init`` looks the bytes up by key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .errors import BackendError, Error
from .memory import FreeableBuffer, _is_power_of_two


@dataclass(frozen=True)
class DataEntry:
    """One stored blob of named data."""

    data: bytes
    """The bytes, exactly as the backend added them."""
    alignment: int
    """Required alignment of the runtime address of ``data``, a power of two."""


@dataclass(frozen=True)
class NamedDataStoreOutput:
    """What a ``NamedDataStore`` hands to the serializer: key -> entry."""

    entries: Mapping[str, DataEntry] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "entries", MappingProxyType(dict(self.entries)))


class NamedDataStore:
    """Collects named data during preprocess.

    Adding the same key twice is allowed only with identical bytes (ExecuTorch
    deduplicates them); different bytes under one key raise ``ValueError``.
    """

    def __init__(self):
        self._entries: dict[str, DataEntry] = {}

    def add_named_data(self, key: str, data: bytes | bytearray | memoryview, alignment: int = 16) -> None:
        if not isinstance(key, str) or not key:
            raise ValueError(f"NamedDataStore: key must be a non-empty str, got {key!r}")
        if not _is_power_of_two(alignment):
            raise ValueError(f"NamedDataStore: alignment must be a power of two, got {alignment!r}")
        data = bytes(data)
        existing = self._entries.get(key)
        if existing is not None:
            if existing.data != data:
                raise ValueError(f"NamedDataStore: key {key!r} already holds different data")
            alignment = max(alignment, existing.alignment)
        self._entries[key] = DataEntry(data, alignment)

    def get_named_data_store_output(self) -> NamedDataStoreOutput:
        return NamedDataStoreOutput(dict(self._entries))

    def __len__(self) -> int:
        return len(self._entries)


class NamedDataMap:
    """Runtime view of named data: ``get_data(key)`` returns a ``FreeableBuffer``.

    The buffer's bytes sit at an address that honours the alignment recorded for
    the key. Unknown keys raise ``BackendError(NotFound)``. Every lookup is
    recorded in ``requested`` so a harness can see which keys a backend used.
    """

    def __init__(self, output: NamedDataStoreOutput | None = None):
        self._entries: dict[str, DataEntry] = dict(output.entries) if output is not None else {}
        self._keys = sorted(self._entries)
        self.requested: list[str] = []

    def get_data(self, key: str) -> FreeableBuffer:
        self.requested.append(key)
        entry = self._entries.get(key)
        if entry is None:
            raise BackendError(Error.NotFound, f"NamedDataMap has no key {key!r}")
        return FreeableBuffer(entry.data, alignment=entry.alignment)

    def get_num_keys(self) -> int:
        return len(self._keys)

    def get_key(self, index: int) -> str:
        if not 0 <= index < len(self._keys):
            raise BackendError(Error.InvalidArgument, f"key index {index} out of range [0, {len(self._keys)})")
        return self._keys[index]

    def keys(self) -> list[str]:
        return list(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def digest(self) -> str:
        """A content hash over keys and bytes, to tell two maps apart."""
        h = hashlib.sha256()
        for key in self._keys:
            h.update(key.encode())
            h.update(self._entries[key].data)
        return h.hexdigest()
