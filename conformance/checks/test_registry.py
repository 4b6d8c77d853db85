"""REG: the registry the backend's runtime uses (``BackendUnderTest.registry``)."""

from __future__ import annotations

from conformance.api import MAX_BACKENDS, Backend, BackendInterface, BackendRegistry, Error, default_registry
from conformance.driver import describe_exception
from conformance.results import Category, CheckFailure


class _Stub(BackendInterface):
    """A stand-in backend to fill registry slots."""

    def is_available(self):
        return True

    def init(self, context, processed, compile_specs):
        return object()

    def execute(self, context, handle, args):
        return Error.Ok

    def destroy(self, handle):
        return None


def _registry(backend):
    factory = backend.registry or BackendRegistry
    try:
        return factory()
    except Exception as exc:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"the backend's registry factory raised {describe_exception(exc)}") from exc


def _table(reg) -> list[str | None]:
    return [reg.get_backend_name(i) for i in range(reg.num_registered_backends())]


def _register(reg, name, runtime) -> Error:
    try:
        status = reg.register_backend(Backend(name, runtime))
    except Exception as exc:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"register_backend({name!r}) raised {describe_exception(exc)}") from exc
    if not isinstance(status, Error):
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"register_backend({name!r}) returned {status!r}, not an Error")
    return status


def _expect(status: Error, want: Error, what: str) -> None:
    if status is not want:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"{what} returned {status.name}, expected {want.name}")


def test_REG_001_sixteen_slots(backend, result):
    reg = _registry(backend)
    _expect(_register(reg, backend.name, backend.runtime), Error.Ok, f"registering {backend.name!r}")
    for i in range(1, MAX_BACKENDS):
        _expect(_register(reg, f"stub-{i}", _Stub()), Error.Ok, f"registration {i + 1} of {MAX_BACKENDS}")
    before = _table(reg)
    _expect(_register(reg, "one-too-many", _Stub()), Error.Internal, f"registration {MAX_BACKENDS + 1}")
    if _table(reg) != before or reg.get_backend_class("one-too-many") is not None:
        raise CheckFailure(Category.CONTRACT_VIOLATION, "the refused 17th registration changed the table")
    result.stats(slots=len(before))


def test_REG_002_duplicate_names_refused(backend, result):
    reg = _registry(backend)
    _expect(_register(reg, backend.name, backend.runtime), Error.Ok, f"registering {backend.name!r}")
    before = _table(reg)
    _expect(_register(reg, backend.name, _Stub()), Error.InvalidArgument, f"registering {backend.name!r} again")
    if _table(reg) != before or reg.get_backend_class(backend.name) is not backend.runtime:
        raise CheckFailure(Category.CONTRACT_VIOLATION, "the duplicate registration replaced the first one")


def test_REG_003_empty_name_refused(backend, result):
    reg = _registry(backend)
    _expect(_register(reg, "", backend.runtime), Error.InvalidArgument, "registering an empty name")
    if reg.num_registered_backends() != 0:
        raise CheckFailure(Category.CONTRACT_VIOLATION, "the refused empty name was added to the table")


def test_REG_004_unknown_names(backend, result):
    reg = _registry(backend)
    _register(reg, backend.name, backend.runtime)
    for name in ("not-registered", backend.name + "-x", backend.name.upper() if backend.name.upper() != backend.name else "X"):
        found = reg.get_backend_class(name)
        if found is not None:
            raise CheckFailure(Category.CONTRACT_VIOLATION, f"get_backend_class({name!r}) found {found!r} though it was never registered")


def test_REG_005_enumeration(backend, result):
    reg = _registry(backend)
    names = [backend.name, "stub-b", "stub-a"]
    for name in names:
        _register(reg, name, backend.runtime if name == backend.name else _Stub())
    if reg.num_registered_backends() != 3 or _table(reg) != names:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"enumeration gave {_table(reg)}, expected {names} in registration order")
    for index in (3, -1, 100):
        if reg.get_backend_name(index) is not None:
            raise CheckFailure(Category.CONTRACT_VIOLATION, f"get_backend_name({index}) returned a name for an index out of range")


def test_REG_006_backend_under_test_registers(backend, result):
    reg = _registry(backend)
    _expect(_register(reg, backend.name, backend.runtime), Error.Ok, f"registering {backend.name!r}")
    if reg.get_backend_class(backend.name) is not backend.runtime:
        raise CheckFailure(Category.CONTRACT_VIOLATION, f"{backend.name!r} is not found by name after registering")
    if backend.registry is None:  # the Python runtime: the process-wide default registry too
        process = default_registry()
        existing = process.get_backend_class(backend.name)
        if existing is None and process.num_registered_backends() >= MAX_BACKENDS:
            # Other backends certified in this worker process took the 16 slots: not this backend's doing.
            result.stats(default_registry="full: checked in a fresh registry only")
            return
        if existing is None:
            _expect(_register(process, backend.name, backend.runtime), Error.Ok, "registering in the default registry")
        if process.get_backend_class(backend.name) is None:
            raise CheckFailure(Category.CONTRACT_VIOLATION, f"{backend.name!r} is not found in the default registry")
