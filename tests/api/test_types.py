"""Error codes, BackendError, CompileSpec, EValue, PreprocessResult, BackendDetails."""

import pickle

import numpy as np
import pytest

from conformance.api import (
    BackendDetails,
    BackendError,
    CompileSpec,
    Error,
    EValue,
    PreprocessResult,
    Tag,
    resize_tensor,
)

EXECUTORCH_CODES = {
    "Ok": 0x00, "Internal": 0x01, "InvalidState": 0x02, "EndOfMethod": 0x03, "AlreadyLoaded": 0x04,
    "NotSupported": 0x10, "NotImplemented": 0x11, "InvalidArgument": 0x12, "InvalidType": 0x13,
    "OperatorMissing": 0x14, "RegistrationExceedingMaxKernels": 0x15, "RegistrationAlreadyRegistered": 0x16,
    "NotFound": 0x20, "MemoryAllocationFailed": 0x21, "AccessFailed": 0x22, "InvalidProgram": 0x23,
    "InvalidExternalData": 0x24, "OutOfResources": 0x25, "DelegateInvalidCompatibility": 0x30,
    "DelegateMemoryAllocationFailed": 0x31, "DelegateInvalidHandle": 0x32,
}


def test_error_codes_are_executorchs():
    assert {e.name: int(e) for e in Error} == EXECUTORCH_CODES


def test_backend_error_carries_code_message_and_debug_handle_and_pickles():
    err = BackendError(Error.InvalidArgument, "bad input", debug_handle=7)
    assert err.error is Error.InvalidArgument and err.message == "bad input" and err.debug_handle == 7
    assert "InvalidArgument (0x12): bad input [debug handle 7]" == str(err)
    back = pickle.loads(pickle.dumps(err))
    assert (back.error, back.message, back.debug_handle) == (err.error, err.message, err.debug_handle)
    assert BackendError(0x23).error is Error.InvalidProgram


@pytest.mark.parametrize("code", [Error.Ok, 0x99])
def test_backend_error_refuses_ok_and_unknown_codes(code):
    with pytest.raises(ValueError):
        BackendError(code)


def test_compile_spec_is_frozen_and_typed():
    spec = CompileSpec("k", bytearray(b"v"))
    assert spec.value == b"v"
    with pytest.raises(AttributeError):  # frozen dataclass: FrozenInstanceError
        spec.key = "other"
    with pytest.raises(TypeError):
        CompileSpec("k", "text")
    with pytest.raises(ValueError):
        CompileSpec("", b"")


def test_evalue_tags_follow_executorch_and_refuse_wrong_reads():
    assert EValue(np.zeros(2)).tag is Tag.Tensor
    assert EValue(True).tag is Tag.Bool  # bool before int, as a bool is an int in Python
    assert EValue(3).tag is Tag.Int and EValue(3.0).tag is Tag.Double and EValue(None).tag is Tag.None_
    assert EValue([1, 2]).tag is Tag.ListInt and EValue([np.zeros(1)]).tag is Tag.ListTensor
    with pytest.raises(TypeError):
        EValue(3).to_tensor()
    with pytest.raises(TypeError):
        EValue(object())
    v = EValue(1)
    v.set(5)
    assert v.to_int() == 5
    with pytest.raises(TypeError):
        v.set(1.5)


def test_resize_tensor_hands_out_the_leading_elements_of_the_capacity():
    storage = np.arange(12, dtype=np.int64).reshape(6, 2)
    out = EValue(storage, capacity=storage)
    assert resize_tensor(out, (3, 2)) is Error.Ok
    assert out.value.shape == (3, 2) and np.shares_memory(out.value, storage)
    np.testing.assert_array_equal(out.value, [[0, 1], [2, 3], [4, 5]])
    assert resize_tensor(out, (0, 2)) is Error.Ok and out.value.shape == (0, 2)
    assert resize_tensor(out, (6, 2)) is Error.Ok and out.value.shape == (6, 2)


@pytest.mark.parametrize("sizes", [(7, 2), (3, 2, 1), (-1, 2), ("x", 2)])
def test_resize_tensor_refuses_sizes_past_the_capacity_or_of_another_rank(sizes):
    storage = np.zeros((6, 2), np.float32)
    out = EValue(storage, capacity=storage)
    assert resize_tensor(out, sizes) is Error.InvalidArgument
    assert out.value.shape == (6, 2)


def test_resize_tensor_of_a_static_output_or_a_scalar():
    static = EValue(np.zeros((2, 3), np.float32))
    assert resize_tensor(static, (2, 3)) is Error.Ok
    assert resize_tensor(static, (1, 3)) is Error.NotSupported
    assert resize_tensor(EValue(3), (1,)) is Error.InvalidArgument


def test_preprocess_result_defaults():
    r = PreprocessResult()
    assert r.processed_bytes == b"" and r.debug_handle_map is None and r.data_store_output is None


class Echo(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        return PreprocessResult(processed_bytes=f"{edge_program}:{len(compile_specs)}".encode())


def test_preprocess_multimethod_runs_each_partition_with_its_specs():
    out = Echo.preprocess_multimethod(
        {"forward": ["p0", "p1"], "other": ["q"]},
        {"forward": [[], [CompileSpec("a", b"")]], "other": [[]]},
    )
    assert [r.processed_bytes for r in out["forward"]] == [b"p0:0", b"p1:1"]
    assert [r.processed_bytes for r in out["other"]] == [b"q:0"]


def test_preprocess_multimethod_mismatches_are_clear_errors():
    with pytest.raises(ValueError, match="no compile specs for method"):
        Echo.preprocess_multimethod({"forward": ["p"]}, {})
    with pytest.raises(ValueError, match="2 partition.*1 compile spec"):
        Echo.preprocess_multimethod({"forward": ["p0", "p1"]}, {"forward": [[]]})


def test_backend_details_is_abstract():
    with pytest.raises(TypeError):
        BackendDetails()
