"""REG rules of the contract: 16 slots, refusals leave the table unchanged."""

import pytest

from conformance.api import MAX_BACKENDS, Backend, BackendInterface, BackendRegistry, Error
from conformance.api import registry as registry_module


class Dummy(BackendInterface):
    def is_available(self):
        return True

    def init(self, context, processed, compile_specs):
        return object()

    def execute(self, context, handle, args):
        return Error.Ok

    def destroy(self, handle):
        pass


def table(reg: BackendRegistry) -> list[str]:
    return [reg.get_backend_name(i) for i in range(reg.num_registered_backends())]


def test_sixteen_slots_then_internal_and_table_unchanged():
    reg = BackendRegistry()
    assert MAX_BACKENDS == 16
    for i in range(16):
        assert reg.register_backend(Backend(f"b{i}", Dummy())) is Error.Ok
    before = table(reg)
    assert reg.register_backend(Backend("b16", Dummy())) is Error.Internal
    assert table(reg) == before
    assert reg.get_backend_class("b16") is None


def test_full_table_reports_internal_even_for_a_duplicate_name():
    reg = BackendRegistry()
    for i in range(16):
        reg.register_backend(Backend(f"b{i}", Dummy()))
    # ExecuTorch checks capacity first (runtime/backend/interface.cpp).
    assert reg.register_backend(Backend("b0", Dummy())) is Error.Internal


@pytest.mark.parametrize("name", ["", None, 7])
def test_empty_or_non_string_name_is_invalid_argument(name):
    reg = BackendRegistry()
    assert reg.register_backend(Backend(name, Dummy())) is Error.InvalidArgument
    assert reg.num_registered_backends() == 0


def test_duplicate_name_is_invalid_argument_and_first_registration_wins():
    reg = BackendRegistry()
    first, second = Dummy(), Dummy()
    assert reg.register_backend(Backend("x", first)) is Error.Ok
    assert reg.register_backend(Backend("x", second)) is Error.InvalidArgument
    assert reg.get_backend_class("x") is first
    assert reg.num_registered_backends() == 1


def test_a_backend_that_is_not_a_backend_interface_is_refused():
    reg = BackendRegistry()
    assert reg.register_backend(Backend("x", object())) is Error.InvalidArgument


def test_lookup_and_enumeration_order():
    reg = BackendRegistry()
    backends = {n: Dummy() for n in ("c", "a", "b")}
    for n, b in backends.items():
        reg.register_backend(Backend(n, b))
    assert table(reg) == ["c", "a", "b"]
    assert reg.get_backend_class("a") is backends["a"]
    assert reg.get_backend_class("missing") is None
    assert reg.get_backend_name(3) is None
    assert reg.get_backend_name(-1) is None


def test_module_level_functions_use_one_process_wide_registry(monkeypatch):
    fresh = BackendRegistry()
    monkeypatch.setattr(registry_module, "_default_registry", fresh)
    backend = Dummy()
    assert registry_module.register_backend(Backend("proc", backend)) is Error.Ok
    assert registry_module.get_backend_class("proc") is backend
    assert registry_module.get_num_registered_backends() == 1
    assert registry_module.get_backend_name(0) == "proc"
    assert registry_module.default_registry() is fresh
