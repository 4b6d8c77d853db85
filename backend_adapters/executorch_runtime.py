"""Runtime half of the ExecuTorch adapters: blobs run through ExecuTorch's C++ runtime.

``init`` turns the processed bytes into a .pte, loads it with
``executorch.runtime.Runtime.get().load_program`` (flatbuffer verification on)
and loads method "forward", which is where ExecuTorch calls a delegate's C++
``init`` (for XNNPACK, ``XNNCompiler::compileModel`` on the payload).
``execute`` hands the inputs to the method (ExecuTorch checks their count, dtype
and shape in ``Method::set_inputs``) and copies its outputs into the
pre-allocated output arrays. ``destroy`` drops the method and program, which
frees the delegate handle (``XnnpackBackend::destroy``) with them.

XNNPACK: a .pte needs the whole program, so preprocess leaves a program template
(the lowered program as ExecuTorch serialized it, delegate data inline) in
``TEMPLATES``, keyed by the SHA-256 of the delegate payload. ``init`` embeds the
bytes it is given, verbatim, as that delegate's data (mutated, truncated or
forged bytes included, so RT-011/012/013 reach ``XNNCompiler`` itself) and the
named data from the init context's NamedDataMap as the program's named data.
Bytes that are not a known payload take the template of the known payload they
resemble most (same length and fewest differing bytes, else longest common
prefix): the template only supplies the surrounding method (I/O tensors, the
delegate call), the delegate sees exactly the bytes the harness passed.

Error mapping: the pybindings raise ``RuntimeError`` whose message ends in
"failed with error 0xNN" (load_program, load_method, set_inputs, execute); the
code is ExecuTorch's ``Error`` and becomes ``BackendError(Error(0xNN))``
unchanged. A message without a code is ``Error.Internal``. Arity of the
pre-allocated outputs, their dtype and shape, are the adapter's to check (the
Python API takes no output buffers): a mismatch is ``InvalidArgument``.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import io
import re
import sys
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from conformance.api import (
    Backend,
    BackendError,
    BackendInterface,
    Error,
    EValue,
    resize_tensor,
)
from conformance.api.tensors import to_numpy, to_torch

from . import executorch_compat

_CODE = re.compile(r"error(?: code)?:? ?0x:?([0-9a-fA-F]+)")  # "error 0x12"; load_program says "error: 0x:23"
TEMPLATE_ENTRIES = 512
PTE_IDENTIFIER = b"ET12"
"""The flatbuffer file identifier of an ExecuTorch program (bytes 4 to 8 of a .pte)."""


_FAILED_INSTRUCTION = re.compile(r"failed at instruction (\d+):(\d+)")  # runtime/executor/method.cpp


def backend_error(exc: BaseException, what: str, log: list[str] = (), *, instruction_handles: bool = False) -> BackendError:
    """ExecuTorch's error code from a pybinding exception message, with what the runtime logged.

    ``instruction_handles``: the debug_handle_map is keyed by instruction index
    (executorch-portable), so the instruction the runtime's log names as failing
    ("KernelCall failed at instruction 0:3 ...") becomes the error's debug handle.
    """
    text = str(exc)
    match = _CODE.search(text)
    error = Error.Internal
    if match:
        try:
            error = Error(int(match.group(1), 16))
        except ValueError:
            error = Error.Internal
        if error is Error.Ok:
            error = Error.Internal
    logged = " | ".join(
        line.strip() for line in "".join(log).splitlines() if line.strip() and "cpuinfo_utils" not in line
    )
    message = f"{what}: {type(exc).__name__}: {text}" + (f" [runtime log: {logged}]" if logged else "")
    handle = None
    failed = _FAILED_INSTRUCTION.search(logged)
    if instruction_handles and failed:
        handle = int(failed.group(2))
    return BackendError(error, message[:2000], debug_handle=handle)


# ---------------------------------------------------------------------------------------------
# The runtime's log
#
# The pybindings send ET_LOG to std::cerr under pybind11's scoped_estream_redirect, i.e. to
# whatever sys.stderr is when the call starts. A router on sys.stderr hands what a thread
# writes during its own ExecuTorch call to that thread's buffer (and passes it on, so users
# still see it): the failing instruction and the delegate's reason are only in this log.


class _LogRouter(io.TextIOBase):
    def __init__(self, target):
        self.target = target

    def write(self, text):
        buffer = getattr(_LOCAL, "buffer", None)
        if buffer is not None:
            buffer.append(text)
        return self.target.write(text)

    def flush(self):
        return self.target.flush()

    def __getattr__(self, name):
        return getattr(self.target, name)


_LOCAL = threading.local()
_ROUTER_LOCK = threading.Lock()


@contextlib.contextmanager
def runtime_log():
    """The text the ExecuTorch runtime logs from this thread inside the block."""
    with _ROUTER_LOCK:
        if not isinstance(sys.stderr, _LogRouter):
            sys.stderr = _LogRouter(sys.stderr)
    previous = getattr(_LOCAL, "buffer", None)
    _LOCAL.buffer = lines = []
    try:
        yield lines
    finally:
        _LOCAL.buffer = previous


# ---------------------------------------------------------------------------------------------
# Program templates (XNNPACK)


class _Templates:
    def __init__(self, size: int = TEMPLATE_ENTRIES):
        self.size = size
        self.by_digest: OrderedDict[str, tuple[bytes, Any]] = OrderedDict()
        self.lock = threading.Lock()

    def register(self, payload: bytes, template: Any) -> None:
        digest = hashlib.sha256(payload).hexdigest()
        with self.lock:
            self.by_digest[digest] = (payload, template)
            self.by_digest.move_to_end(digest)
            while len(self.by_digest) > self.size:
                self.by_digest.popitem(last=False)

    def find(self, blob: bytes) -> Any | None:
        digest = hashlib.sha256(blob).hexdigest()
        with self.lock:
            hit = self.by_digest.get(digest)
            if hit is not None:
                return hit[1]
            known = list(self.by_digest.values())
        if not known:
            return None
        same = [(p, t) for p, t in known if len(p) == len(blob)]
        if same:
            a = np.frombuffer(blob, np.uint8)
            return min(same, key=lambda pt: int(np.count_nonzero(np.frombuffer(pt[0], np.uint8) != a)))[1]

        def common(p: bytes) -> int:
            n = min(len(p), len(blob))
            a, b = np.frombuffer(p[:n], np.uint8), np.frombuffer(blob[:n], np.uint8)
            diff = np.flatnonzero(a != b)
            return int(diff[0]) if diff.size else n

        return max(reversed(known), key=lambda pt: common(pt[0]))[1]


TEMPLATES = _Templates()


def embed(template, payload: bytes, named_data_map) -> bytes:
    """The template program with ``payload`` as its delegate data and named data from the map."""
    from executorch.exir.schema import BackendDelegateInlineData

    program = copy.copy(template.program)
    data = list(program.backend_delegate_data)
    if len(data) != 1:
        raise BackendError(Error.Internal, f"program template holds {len(data)} delegate blobs, expected 1")
    data[0] = BackendDelegateInlineData(data=payload)
    program.backend_delegate_data = data
    named = template.named_data
    if named is not None and named.pte_data:
        if named_data_map is None:
            raise BackendError(Error.NotFound, "the program needs named data but init was given no NamedDataMap")
        buffers, entries = [], {}
        for key, entry in named.pte_data.items():
            buffer = named_data_map.get_data(key)  # BackendError(NotFound) when absent
            try:
                buffers.append(bytes(buffer.data))
            finally:
                buffer.free()
            entries[key] = dataclasses.replace(entry, buffer_index=len(buffers) - 1)
        named = dataclasses.replace(named, buffers=buffers, pte_data=entries, external_data={})
    return executorch_compat.serialize_pte(program, template.mutable_data, named)


# ---------------------------------------------------------------------------------------------
# Handles and the runtime


class _Handle:
    """A loaded program and its forward method."""

    __slots__ = ("owner", "program", "method", "num_inputs", "num_outputs", "lock", "destroyed")

    def __init__(self, owner, program, method):
        meta = method.metadata
        self.owner = owner
        self.program = program
        self.method = method
        self.num_inputs = meta.num_inputs()
        self.num_outputs = meta.num_outputs()
        self.lock = threading.Lock()  # one ExecuTorch Method is not safe to execute concurrently
        self.destroyed = False


def load_kernel_libraries() -> None:
    """Register the kernel libraries an ExecuTorch app links beside the portable ones: the quantized
    kernels (quantize/dequantize of PT2E programs) exist only once ``executorch.kernels.quantized``
    is imported, for ``to_executorch`` (their out variants) and for the runtime alike. Lowering and
    init both call this: a process whose programs all came from the disk cache of lowerings never
    lowered one (else load_method fails with OperatorMissing for kernels the pip wheel ships)."""
    import executorch.kernels.quantized  # noqa: F401


class ExecuTorchRuntime(BackendInterface):
    """BackendInterface over ExecuTorch's C++ runtime (pybindings)."""

    cpp_backend: str | None = None
    """The name the C++ backend registers under (``XnnpackBackend``); None: no delegate."""
    instruction_handles = False
    """Whether debug_handle_map is keyed by the program's instruction index."""

    def is_available(self) -> bool:
        try:
            from executorch.runtime import Runtime

            runtime = Runtime.get()
        except Exception:
            return False
        if self.cpp_backend is None:
            return True
        return bool(runtime.backend_registry.is_available(self.cpp_backend))

    def program_bytes(self, context, processed: bytes) -> bytes:
        raise NotImplementedError

    def init(self, context, processed, compile_specs):
        from executorch.runtime import Runtime, Verification

        load_kernel_libraries()

        try:
            blob = bytes(processed.data)
        except Exception as exc:
            raise BackendError(Error.InvalidArgument, f"the processed buffer cannot be read: {exc}") from None
        pte = self.program_bytes(context, blob)
        with runtime_log() as log:
            try:
                program = Runtime.get().load_program(pte, verification=Verification.InternalConsistency)
            except RuntimeError as exc:
                raise backend_error(exc, "load_program", log) from None
            try:
                method = program.load_method("forward")
            except RuntimeError as exc:
                raise backend_error(exc, "load_method (the delegate's init)", log) from None
            except KeyError:
                raise BackendError(Error.InvalidProgram, "the program has no method 'forward'") from None
        return _Handle(self, program, method)

    def _check(self, handle) -> _Handle:
        if not isinstance(handle, _Handle) or handle.owner is not self:
            raise BackendError(Error.DelegateInvalidHandle, f"not a handle of this runtime: {type(handle).__name__}")
        if handle.destroyed:
            raise BackendError(Error.DelegateInvalidHandle, "the handle was destroyed")
        return handle

    def execute(self, context, handle, args):
        handle = self._check(handle)
        if not isinstance(args, (list, tuple)):
            raise BackendError(Error.InvalidArgument, "args must be a list of EValues")
        if len(args) < handle.num_outputs:
            raise BackendError(
                Error.InvalidArgument,
                f"{len(args)} arguments; the method takes {handle.num_inputs} inputs then {handle.num_outputs} outputs",
            )
        # The last num_outputs arguments are the outputs (ours to check); whatever precedes them
        # goes to Method::set_inputs, which checks the input count, dtypes and shapes itself.
        n_in = len(args) - handle.num_outputs
        inputs = []
        for arg in args[:n_in]:
            value = arg.value if isinstance(arg, EValue) else arg
            inputs.append(to_torch(value) if isinstance(value, np.ndarray) else value)
        outputs = list(args[n_in:])
        with handle.lock:
            if handle.destroyed:
                raise BackendError(Error.DelegateInvalidHandle, "the handle was destroyed")
            with runtime_log() as log:
                try:
                    produced = handle.method.execute(inputs)
                except RuntimeError as exc:
                    raise backend_error(exc, "Method::execute", log, instruction_handles=self.instruction_handles) from None
                except TypeError as exc:
                    raise BackendError(Error.InvalidArgument, f"Method::execute refused the inputs: {exc}") from None
        if len(produced) != len(outputs):
            raise BackendError(Error.Internal, f"the method returned {len(produced)} outputs, its metadata says {len(outputs)}")
        for i, (slot, value) in enumerate(zip(outputs, produced)):
            target = slot.value if isinstance(slot, EValue) else slot
            result = to_numpy(value) if hasattr(value, "detach") else np.asarray(value)
            if not isinstance(target, np.ndarray):
                raise BackendError(Error.InvalidArgument, f"output {i} is a {type(target).__name__}, not a tensor")
            if target.dtype != result.dtype:
                raise BackendError(
                    Error.InvalidArgument, f"output {i}: pre-allocated {target.dtype}, the method produced {result.dtype}"
                )
            if isinstance(slot, EValue) and slot.capacity is not None and target.shape != result.shape:
                if resize_tensor(slot, result.shape) is Error.Ok:  # a run-time size (NUM-001)
                    target = slot.value
            if target.shape != result.shape:
                raise BackendError(
                    Error.InvalidArgument,
                    f"output {i}: pre-allocated shape {list(target.shape)}, the method produced {list(result.shape)}",
                )
            np.copyto(target, result)
        return Error.Ok

    def destroy(self, handle) -> None:
        if not isinstance(handle, _Handle) or handle.owner is not self:
            return
        with handle.lock:
            handle.destroyed = True
            handle.method = None
            handle.program = None


class XnnpackRuntime(ExecuTorchRuntime):
    """The XNNPACK delegate: the payload is embedded in its program template at init."""

    cpp_backend = "XnnpackBackend"

    def program_bytes(self, context, processed: bytes) -> bytes:
        if processed[4:8] == PTE_IDENTIFIER:
            return processed  # a partially delegated program: the whole .pte (PARTIAL_DELEGATION)
        template = TEMPLATES.find(processed)
        if template is None:
            raise BackendError(
                Error.InvalidState,
                "no program template in this process: preprocess the program with this adapter first "
                "(an XNNPACK payload runs only inside the ExecuTorch program it was lowered with)",
            )
        return embed(template, processed, getattr(context, "named_data_map", None))


class PortableRuntime(ExecuTorchRuntime):
    """No delegate: the processed bytes are the .pte itself."""

    cpp_backend = None
    instruction_handles = True

    def program_bytes(self, context, processed: bytes) -> bytes:
        return processed


# ---------------------------------------------------------------------------------------------
# A view of the C++ backend registry (REG-006)


class CppRegistryView:
    """ExecuTorch's C++ backend table, as far as Python can see it.

    The table (runtime/backend/interface.cpp) is filled by static initializers of
    the linked backends; Python can only list it (``registered_backend_names``)
    and ask ``is_available``. ``register_backend(Backend(name, runtime))``
    therefore accepts only an ExecuTorch adapter runtime whose C++ backend is in
    that table, recording ``name`` as its alias; ``get_backend_class`` finds an
    alias only while the C++ table still holds and reports available its backend.
    Python backends cannot enter the C++ table: they are refused with NotSupported.
    """

    def __init__(self):
        from executorch.runtime import Runtime

        self._registry = Runtime.get().backend_registry
        self._aliases: dict[str, ExecuTorchRuntime] = {}

    def register_backend(self, backend: Backend) -> Error:
        if not isinstance(backend, Backend) or not isinstance(backend.name, str) or not backend.name:
            return Error.InvalidArgument
        if backend.name in self._aliases:
            return Error.InvalidArgument
        runtime = backend.backend
        if not isinstance(runtime, ExecuTorchRuntime) or runtime.cpp_backend is None:
            return Error.NotSupported
        if runtime.cpp_backend not in self._registry.registered_backend_names:
            return Error.NotFound
        self._aliases[backend.name] = runtime
        return Error.Ok

    def get_backend_class(self, name: str):
        runtime = self._aliases.get(name)
        if runtime is None or not self._registry.is_available(runtime.cpp_backend):
            return None
        return runtime

    def num_registered_backends(self) -> int:
        return len(self._registry.registered_backend_names)

    def get_backend_name(self, index: int) -> str | None:
        names = list(self._registry.registered_backend_names)
        if isinstance(index, int) and 0 <= index < len(names):
            return names[index]
        return None
