"""TorchScript ``to_backend`` backends that ship inside the torch wheel, on the delegate contract.

Two backends are registered by shared libraries in ``torch/lib``:

``backend_with_compiler_demo`` (libbackend_with_compiler.so; sources:
pytorch test/cpp/jit/test_backend_compiler_preprocess.cpp and
test_backend_compiler_lib.cpp). Its preprocess inlines each method's graph and
accepts only ``prim::Constant``, ``aten::add`` and ``aten::sub`` nodes, refusing
any other node with "The node of <kind> is not supported in this compiler.
Source code: <source range>". The processed blob of a method is a string
``"<instruction><debug_handle><n>,..."`` (constants spelled
``prim::Constant#<value>``), one token per graph node, each with the debug handle
TorchScript's BackendDebugInfoRecorder gave that node. compile() parses the
tokens (std::stoi on the handle); execute() asserts exactly two inputs, checks
equal sizes and float32 dtypes, and for every add/sub instruction returns one
new tensor in which only element 0 is written (``y[0] = x[0] +/- h[0]``; the
rest is uninitialized memory; it warns "Only the first elements of the tensors
are added or subbed"). Constants (alpha) are ignored.

``test_backend`` (libjitbackend_test.so; test/cpp/jit/test_backend_lib.cpp): its
preprocess returns the module itself, compile() maps each method name to
itself, and execute() ignores the module: it returns ``[sum of inputs, first
input minus the others]`` for "forward" ("not intended to produce numerically
correct results").

Mapping onto the contract (conformance.api):

preprocess
    The core-ATen ExportedProgram becomes a TorchScript module (torchscript_codegen:
    one statement per FX node, in a generated .py file), is scripted and lowered
    with ``torch._C._jit_to_backend(name, scripted, {"forward": spec})``. A
    lowering the backend refuses ("... not supported ...") is
    BackendError(NotSupported) whose debug_handle is the FX node on the source line
    the backend cites; a program TorchScript cannot express is
    BackendError(NotSupported) saying so. ``processed_bytes`` is the forward
    method's processed blob from ``__loweredModule__.__getstate__()``: the string
    as UTF-8 for string-blob backends (the demo), ``torch.jit.save`` of the
    processed module for module-blob backends (test_backend). Nothing is
    normalized: TorchScript's process-global debug handle counter and type-name
    mangling show as they are.
    ``debug_handle_map``: TorchScript debug handle -> (FX debug handle,). The
    demo's preprocess walks the inlined, dead-code-eliminated forward graph in
    order, one ``<debug_handle>N`` per node; the adapter replays those passes on the
    same scripted graph, pairs node i with handle i, and maps the node's source
    line to the FX node written on it (constants hoisted without a source range
    are left out). Blobs without handles (test_backend) give no map.
    The lowered module itself (the generated wrapper TorchScript code around the
    blob) is stored beside the blob as named data ``torchscript/lowered_module``:
    ``torch.jit.save`` of it with the blob replaced by a placeholder (string blobs)
    or as is (module blobs).
init
    ``torch.jit.load`` of that archive with the processed bytes put in place of the
    placeholder at the pickle level (raw bytes reach the backend's compile through
    TorchScript's own unpickler, as on a device), which re-runs ``__setstate__``
    and the backend's ``compile``; for module blobs, ``torch.jit.load`` of the
    archive and of the blob, then ``__setstate__`` with the loaded module. Any
    failure is BackendError(InvalidProgram); a crash stays a crash.
execute
    The lowered ``forward`` on the inputs (torch tensors); outputs are copied into
    the pre-allocated arrays after checking dtype and shape. TorchScript's own
    argument-schema errors (wrong arity, a non-tensor) are
    BackendError(InvalidArgument). Every other failure is BackendError(Internal):
    the TorchScript interpreter rethrows every error as RuntimeError, so an
    argument check of the backend cannot be told from an internal failure, and the
    debug handle of c10::BackendRuntimeException is dropped. The lite interpreter
    symbolicates it (torch.jit.mobile, in this wheel too): the
    family check DBG-051 saves the lowered module (``Lowering.lowered``, which holds TorchScript's
    in-memory debug info; a torch.jit.save/load round trip loses it) for the lite interpreter with
    its debug info and follows an execute error back to the program's source line.
destroy
    Releases the module; the handle refuses further use.

Claims (ops, dtypes, the clauses no backend of the family can be observed on and why) are
data, all literal: ``backend_adapters/claims/torchscript-backend-with-compiler-demo.toml``
and ``torchscript-test-backend.toml``, which extend ``_torchscript-family.toml``.
"""

from __future__ import annotations

import io
import re
import struct
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from conformance.api import (
    BackendError,
    BackendInterface,
    BackendUnderTest,
    CompileSpec,
    Error,
    Manifest,
    NamedDataStore,
    PreprocessResult,
    resize_tensor,
)

from . import _claims
from . import torchscript_codegen as codegen

SKELETON_KEY = "torchscript/lowered_module"
PLACEHOLDER = "\x00conformance:processed-blob:forward\x00"
"""Stands in for the forward blob in the saved lowered module; unique in its pickle (a NUL can not
occur in a method name, a compile spec the harness writes, or a generated type name)."""
INSTALL = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
METHOD = "forward"
_DEBUG_HANDLE_RE = re.compile(r"<debug_handle>(-?\d+)")
_SCHEMA_ERROR_RE = re.compile(
    r"^(forward\(\) (is missing value|expected at most|expected a value)|Expected a value of type)", re.IGNORECASE
)
_LOADED: dict[str, str] = {}
_LOAD_LOCK = threading.Lock()

# ---------------------------------------------------------------------------------------------
# Libraries


def torch_lib_dir() -> Path:
    import torch

    return Path(torch.__file__).resolve().parent / "lib"


def load_library(library: str) -> Path:
    """Load ``torch/lib/<library>`` once per process (it registers the backend on load)."""
    from conformance.discovery import DiscoveryError

    with _LOAD_LOCK:
        if library in _LOADED:
            return Path(_LOADED[library])
        try:
            import torch
        except ImportError as exc:
            raise DiscoveryError(f"the TorchScript backends need torch: {INSTALL} ({exc})") from exc
        path = torch_lib_dir() / library
        if not path.exists():
            raise DiscoveryError(
                f"{path} is missing: this torch build does not ship the TorchScript test backends. "
                f"Install the CPU wheel that does: {INSTALL}"
            )
        torch.ops.load_library(str(path))
        _LOADED[library] = str(path)
        return path


# ---------------------------------------------------------------------------------------------
# Errors


def error_text(exc: BaseException) -> str:
    """An exception's message; pybind11 raises UnicodeDecodeError for a C++ message quoting raw blob
    bytes, whose ``object`` is that message: keep it, escaped."""
    if isinstance(exc, UnicodeDecodeError) and isinstance(exc.object, (bytes, bytearray)):
        return bytes(exc.object).decode("utf-8", errors="backslashreplace")
    return str(exc)


def summarize(exc: BaseException, limit: int = 600) -> str:
    """The useful lines of a TorchScript error: the error itself and where C++ raised it, no frames."""
    text = error_text(exc)
    lines = [line for line in text.splitlines() if line.strip()]
    keep = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("frame #") or stripped.startswith("<omitting"):
            continue
        if re.match(r"^[A-Za-z_.]*(Error|Exception): ", stripped) or stripped.startswith("Exception raised from"):
            keep.append(stripped)
    if not keep:
        keep = [lines[0].strip()] if lines else [type(exc).__name__]
    out = " | ".join(dict.fromkeys(keep))
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _is_schema_error(exc: BaseException) -> bool:
    return isinstance(exc, RuntimeError) and bool(_SCHEMA_ERROR_RE.match(error_text(exc).strip()))


# ---------------------------------------------------------------------------------------------
# Archives


def _binunicode(data: bytes) -> bytes:
    return b"X" + struct.pack("<I", len(data)) + data


def install_blob(skeleton: bytes, blob: bytes) -> bytes:
    """The saved lowered module with ``blob`` where preprocess left the placeholder (pickle level)."""
    source = zipfile.ZipFile(io.BytesIO(skeleton))
    marker = _binunicode(PLACEHOLDER.encode())
    out = io.BytesIO()
    placed = 0
    with zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename.endswith("/data.pkl"):
                placed += data.count(marker)
                data = data.replace(marker, _binunicode(blob))
            target.writestr(info, data)
    if placed != 1:
        raise ValueError(f"the lowered module archive holds the blob placeholder {placed} times, expected once")
    return out.getvalue()


def _save(module) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.jit.save(module, buffer)
    return buffer.getvalue()


def lowered_module_of(wrapper):
    """The ``__loweredModule__`` ScriptModule inside what ``_jit_to_backend`` returns."""
    return wrapper._c.__getattr__("__loweredModule__")


def lowered_state(wrapper) -> tuple:
    """``__loweredModule__.__getstate__()``: (method compile spec, processed, create-backend flag)."""
    return tuple(lowered_module_of(wrapper).__getstate__()[0])


def set_lowered_state(wrapper, state: tuple) -> None:
    lowered_module_of(wrapper)._get_method("__setstate__")(state)


# ---------------------------------------------------------------------------------------------
# The AOT half


@dataclass
class Lowering:
    """What one preprocess produced, for the family checks (conformance/checks/test_torchscript.py)."""

    generated: codegen.Generated
    scripted: Any
    lowered: Any
    result: PreprocessResult


class TorchScriptDetails:
    """``preprocess`` of one to_backend backend (``BackendDetails`` protocol)."""

    def __init__(self, backend_name: str, library: str, blob_kind: str):
        if blob_kind not in ("string", "module"):
            raise ValueError(f"blob_kind must be 'string' or 'module', got {blob_kind!r}")
        self.backend_name = backend_name
        self.library = library
        self.blob_kind = blob_kind

    def method_compile_spec(self, compile_specs) -> dict:
        spec = {}
        for item in compile_specs or ():
            try:
                spec[item.key] = item.value.decode("utf-8")
            except UnicodeDecodeError:
                raise BackendError(
                    Error.InvalidArgument, f"compile spec {item.key!r} is not UTF-8 text; TorchScript compile specs are str"
                ) from None
        # The PyTorch tests lower with {"": ""}: an entry per method is what selects it for lowering.
        return {METHOD: spec or {"": ""}}

    def script(self, edge_program):
        """(generated source, scripted module) of a program; BackendError(NotSupported) if inexpressible."""
        import torch

        try:
            generated = codegen.generate(edge_program)
            instance = codegen.instantiate(generated, edge_program)
        except codegen.Unexpressible as exc:
            raise BackendError(
                Error.NotSupported, f"TorchScript cannot express this program (to_backend lowers scripted modules only): {exc}"
            ) from None
        try:
            scripted = torch.jit.script(instance)
        except Exception as exc:
            raise BackendError(
                Error.NotSupported,
                f"TorchScript cannot compile the program's source (to_backend lowers scripted modules only): {summarize(exc)}",
            ) from None
        try:
            codegen.verify(generated, scripted)
        except codegen.Unexpressible as exc:
            raise BackendError(Error.NotSupported, f"TorchScript cannot express this program: {exc}") from None
        return generated, scripted

    def lower(self, edge_program, compile_specs) -> Lowering:
        import torch

        load_library(self.library)
        generated, scripted = self.script(edge_program)
        spec = self.method_compile_spec(compile_specs)
        try:
            lowered = torch._C._jit_to_backend(self.backend_name, scripted, spec)
        except Exception as exc:
            message, text = summarize(exc), error_text(exc)
            cited = codegen.source_line(text)
            node = generated.node_at(*cited) if cited else None
            where = f" (node {node[0]}, {node[2]})" if node else ""
            code = Error.NotSupported if "not supported" in text.lower() else Error.Internal
            raise BackendError(
                code,
                f"{self.backend_name} refused to lower the program{where}: {message}",
                debug_handle=node[1] if node else None,
            ) from None
        state = lowered_state(lowered)
        processed = state[1]
        blob, skeleton = self._blob_and_skeleton(lowered, state, processed)
        store = NamedDataStore()
        store.add_named_data(SKELETON_KEY, skeleton)
        result = PreprocessResult(
            processed_bytes=blob,
            debug_handle_map=self._debug_handle_map(generated, scripted, blob) if self.blob_kind == "string" else None,
            data_store_output=store.get_named_data_store_output(),
        )
        return Lowering(generated, scripted, lowered, result)

    def _blob_and_skeleton(self, lowered, state, processed) -> tuple[bytes, bytes]:
        import torch

        if self.blob_kind == "string":
            if not isinstance(processed, dict) or not isinstance(processed.get(METHOD), str):
                raise BackendError(
                    Error.Internal,
                    f"{self.backend_name} produced a processed value of type {type(processed).__name__}, "
                    f"expected a Dict[str, str] holding the {METHOD} blob",
                )
            blob = processed[METHOD].encode("utf-8")
            if PLACEHOLDER in processed.values():
                raise BackendError(Error.Internal, "the processed blob contains the adapter's placeholder")
            # Put the placeholder in the saved archive; compile runs on it once (both backends accept any string).
            set_lowered_state(lowered, (state[0], {**processed, METHOD: PLACEHOLDER}, False))
            try:
                skeleton = _save(lowered)
            finally:
                set_lowered_state(lowered, (state[0], processed, False))
            return blob, skeleton
        if not isinstance(processed, torch._C.ScriptModule):
            raise BackendError(
                Error.Internal,
                f"{self.backend_name} produced a processed value of type {type(processed).__name__}, expected a module",
            )
        blob = _save(torch.jit._recursive.wrap_cpp_module(processed))
        return blob, _save(lowered)

    @staticmethod
    def _debug_handle_map(generated, scripted, blob: bytes) -> dict[int, tuple[int, ...]] | None:
        import torch

        handles = [int(h) for h in _DEBUG_HANDLE_RE.findall(blob.decode("utf-8", errors="replace"))]
        if not handles:
            return None
        graph = scripted.forward.graph.copy()
        torch._C._jit_pass_inline(graph)  # what the demo's preprocess does before generate_debug_handles
        torch._C._jit_pass_dce(graph)
        nodes = list(graph.nodes())
        if len(nodes) != len(handles):
            raise BackendError(
                Error.Internal,
                f"the blob holds {len(handles)} debug handles for {len(nodes)} graph nodes; cannot map them to the program",
            )
        out: dict[int, tuple[int, ...]] = {}
        for node, handle in zip(nodes, handles):
            where = codegen.source_line(node.sourceRange())
            hit = generated.node_at(*where) if where else None
            if hit is not None and hit[1] is not None:
                out[handle] = tuple(sorted(set(out.get(handle, ())) | {hit[1]}))
        return out

    def preprocess(self, edge_program, compile_specs: list[CompileSpec]) -> PreprocessResult:
        return self.lower(edge_program, compile_specs).result


# ---------------------------------------------------------------------------------------------
# The runtime half


class Handle:
    """A loaded lowered module and the shape of its forward."""

    __slots__ = ("module", "n_inputs", "n_outputs", "backend_name")

    def __init__(self, module, n_inputs: int, n_outputs: int, backend_name: str):
        self.module = module
        self.n_inputs = n_inputs
        self.n_outputs = n_outputs
        self.backend_name = backend_name

    def __repr__(self) -> str:
        state = "destroyed" if self.module is None else "live"
        return f"<TorchScript {self.backend_name} handle ({state})>"


class TorchScriptRuntime(BackendInterface):
    """init / execute / destroy of lowered modules of one to_backend backend."""

    def __init__(self, backend_name: str, library: str, blob_kind: str):
        self.backend_name = backend_name
        self.library = library
        self.blob_kind = blob_kind

    def is_available(self) -> bool:
        import torch

        load_library(self.library)
        backend = getattr(torch.classes.__backends__, self.backend_name)()
        return bool(backend.is_available())

    def init(self, context, processed, compile_specs) -> Handle:
        import torch

        load_library(self.library)
        skeleton_buffer = context.named_data_map.get_data(SKELETON_KEY)  # BackendError(NotFound) if absent
        skeleton = bytes(skeleton_buffer.data)
        skeleton_buffer.free()
        blob = bytes(processed.data)  # TorchScript keeps its own copy: the runtime may free the buffer
        try:
            if self.blob_kind == "string":
                module = torch.jit.load(io.BytesIO(install_blob(skeleton, blob)))
            else:
                module = torch.jit.load(io.BytesIO(skeleton))
                processed_module = torch.jit.load(io.BytesIO(blob))
                state = lowered_state(module)
                set_lowered_state(module, (state[0], processed_module, True))
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(Error.InvalidProgram, f"{self.backend_name}: the lowered module did not load: {summarize(exc)}") from None
        schema = module._c._get_method(METHOD).schema
        n_inputs = len(schema.arguments) - 1  # self
        returns = schema.returns[0].type if schema.returns else None
        n_outputs = len(returns.elements()) if isinstance(returns, torch._C.TupleType) else 1
        return Handle(module, n_inputs, n_outputs, self.backend_name)

    def _handle(self, handle) -> Handle:
        if not isinstance(handle, Handle) or handle.backend_name != self.backend_name:
            raise BackendError(Error.DelegateInvalidHandle, f"{handle!r} is not a handle of {self.backend_name}")
        if handle.module is None:
            raise BackendError(Error.DelegateInvalidHandle, f"{handle!r} was destroyed")
        return handle

    def lowered_module(self, handle):
        """The live lowered module of a handle (family checks: save/load round trip)."""
        return self._handle(handle).module

    def execute(self, context, handle, args) -> Error:
        import torch

        from conformance.api.tensors import to_numpy, to_torch

        h = self._handle(handle)
        split = len(args) - h.n_outputs if len(args) >= h.n_outputs else len(args)
        inputs, outputs = args[:split], args[split:]
        values = []
        for arg in inputs:
            value = arg.value
            values.append(to_torch(value) if isinstance(value, np.ndarray) else value)
        try:
            with torch.no_grad():
                result = h.module(*values)
        except Exception as exc:
            code = Error.InvalidArgument if _is_schema_error(exc) else Error.Internal
            raise BackendError(code, f"{self.backend_name}: {summarize(exc)}") from None
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(results) != len(outputs):
            raise BackendError(
                Error.InvalidArgument, f"the lowered forward returns {len(results)} tensors, {len(outputs)} outputs were given"
            )
        for i, (got, slot) in enumerate(zip(results, outputs)):
            target = slot.value
            if not isinstance(target, np.ndarray):
                raise BackendError(Error.InvalidArgument, f"output {i} is {type(target).__name__}, not a pre-allocated tensor")
            if not isinstance(got, torch.Tensor):
                raise BackendError(Error.Internal, f"the lowered forward returned {type(got).__name__} for output {i}")
            value = to_numpy(got)
            if slot.capacity is not None and value.shape != target.shape and resize_tensor(slot, value.shape) is Error.Ok:
                target = slot.value  # a run-time size (NUM-001)
            if value.dtype != target.dtype or value.shape != target.shape:
                raise BackendError(
                    Error.Internal,
                    f"the lowered forward returned {value.dtype}{list(value.shape)} for output {i}; "
                    f"the program's output is {target.dtype}{list(target.shape)}",
                )
            np.copyto(target, value)
        return Error.Ok

    def destroy(self, handle) -> None:
        if isinstance(handle, Handle):
            handle.module = None


# ---------------------------------------------------------------------------------------------
# The backends


def make(
    name: str,
    backend_name: str,
    library: str,
    blob_kind: str,
    manifest: Manifest,
    description: str,
    details: Any = None,
    profile: str = "full",
) -> BackendUnderTest:
    import torch

    load_library(library)  # DiscoveryError with the install command if torch or the library is missing
    return BackendUnderTest(
        name=name,
        details=details or TorchScriptDetails(backend_name, library, blob_kind),
        runtime=TorchScriptRuntime(backend_name, library, blob_kind),
        version=f"torch {torch.__version__} ({library})",
        manifest=manifest,
        description=description,
        family="torchscript",
        profile=profile,
    )


def backend_with_compiler_demo() -> BackendUnderTest:
    return make(
        "torchscript-backend-with-compiler-demo",
        "backend_with_compiler_demo",
        "libbackend_with_compiler.so",
        "string",
        _claims.load("torchscript-backend-with-compiler-demo").manifest(),
        "TorchScript to_backend demo backend with an AOT compiler (aten::add/sub of two float tensors), "
        "from torch/lib/libbackend_with_compiler.so",
    )


def test_backend() -> BackendUnderTest:
    return make(
        "torchscript-test-backend",
        "test_backend",
        "libjitbackend_test.so",
        "module",
        _claims.load("torchscript-test-backend").manifest(),
        "TorchScript to_backend registration test backend (accumulator), from torch/lib/libjitbackend_test.so",
        # It lowers everything and computes nothing: full would be 2001 copies of one finding (~50 min).
        profile="core-fp32",
    )


test_backend.__test__ = False  # a factory, not a pytest test, if this module is ever collected
