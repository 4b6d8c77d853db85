"""The backend registry: 16 named slots, as in runtime/backend/interface.cpp."""

from __future__ import annotations

from dataclasses import dataclass

from .backend import BackendInterface
from .errors import Error

MAX_BACKENDS = 16


@dataclass(frozen=True)
class Backend:
    """A registry entry: a name and the runtime half it resolves to."""

    name: str
    backend: BackendInterface


class BackendRegistry:
    """A fixed table of at most ``MAX_BACKENDS`` backends.

    ``register_backend`` returns ``Error.Ok``; ``Error.InvalidArgument`` for an
    empty or duplicate name or a backend that is not a ``BackendInterface``;
    ``Error.Internal`` when the table is full. The table is unchanged on error.
    """

    def __init__(self, max_backends: int = MAX_BACKENDS):
        self.max_backends = max_backends
        self._table: list[Backend] = []

    def register_backend(self, backend: Backend) -> Error:
        if len(self._table) >= self.max_backends:
            return Error.Internal
        if not isinstance(backend, Backend) or not isinstance(backend.name, str) or not backend.name:
            return Error.InvalidArgument
        if not isinstance(backend.backend, BackendInterface):
            return Error.InvalidArgument
        if self.get_backend_class(backend.name) is not None:
            return Error.InvalidArgument
        self._table.append(backend)
        return Error.Ok

    def get_backend_class(self, name: str) -> BackendInterface | None:
        for entry in self._table:
            if entry.name == name:
                return entry.backend
        return None

    def num_registered_backends(self) -> int:
        return len(self._table)

    def get_backend_name(self, index: int) -> str | None:
        """The name in slot ``index`` (registration order), or None when out of range."""
        if isinstance(index, int) and 0 <= index < len(self._table):
            return self._table[index].name
        return None


_default_registry = BackendRegistry()


def default_registry() -> BackendRegistry:
    """The process-wide registry the module-level functions use."""
    return _default_registry


def register_backend(backend: Backend) -> Error:
    return _default_registry.register_backend(backend)


def get_backend_class(name: str) -> BackendInterface | None:
    return _default_registry.get_backend_class(name)


def get_num_registered_backends() -> int:
    return _default_registry.num_registered_backends()


def get_backend_name(index: int) -> str | None:
    return _default_registry.get_backend_name(index)
