"""Error codes and the one exception a backend may raise from init and execute.

Mirrors ExecuTorch's runtime/core/error.h: the numeric values are the same, so a
code printed by a C++ runtime and one printed here mean the same thing.
"""

from __future__ import annotations

from enum import IntEnum


class Error(IntEnum):
    """ExecuTorch's runtime error codes, with their values."""

    Ok = 0x00
    Internal = 0x01
    InvalidState = 0x02
    EndOfMethod = 0x03
    AlreadyLoaded = 0x04
    NotSupported = 0x10
    NotImplemented = 0x11
    InvalidArgument = 0x12
    InvalidType = 0x13
    OperatorMissing = 0x14
    RegistrationExceedingMaxKernels = 0x15
    RegistrationAlreadyRegistered = 0x16
    NotFound = 0x20
    MemoryAllocationFailed = 0x21
    AccessFailed = 0x22
    InvalidProgram = 0x23
    InvalidExternalData = 0x24
    OutOfResources = 0x25
    DelegateInvalidCompatibility = 0x30
    DelegateMemoryAllocationFailed = 0x31
    DelegateInvalidHandle = 0x32


class BackendError(Exception):
    """A backend's failure, with an ExecuTorch error code.

    ``debug_handle`` names the instruction that failed (a key of the
    ``debug_handle_map`` the backend returned from preprocess), so the failure can
    be traced back to a node of the source program.
    """

    def __init__(self, error: Error | int, message: str = "", *, debug_handle: int | None = None):
        try:
            error = Error(error)
        except ValueError:
            raise ValueError(f"BackendError: {error!r} is not an ExecuTorch error code") from None
        if error is Error.Ok:
            raise ValueError("BackendError: Error.Ok is not an error")
        if debug_handle is not None and not isinstance(debug_handle, int):
            raise TypeError(f"BackendError: debug_handle must be an int, got {type(debug_handle).__name__}")
        super().__init__(error, message, debug_handle)
        self.error = error
        self.message = message
        self.debug_handle = debug_handle

    def __reduce__(self):
        # Keep the keyword-only debug handle across pickling (pytest-xdist, multiprocessing).
        return (_rebuild_backend_error, (int(self.error), self.message, self.debug_handle))

    def __str__(self) -> str:
        text = f"{self.error.name} (0x{int(self.error):02x})"
        if self.message:
            text += f": {self.message}"
        if self.debug_handle is not None:
            text += f" [debug handle {self.debug_handle}]"
        return text


def _rebuild_backend_error(error: int, message: str, debug_handle: int | None) -> BackendError:
    return BackendError(error, message, debug_handle=debug_handle)
