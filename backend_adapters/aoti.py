"""AOTInductor (``torch._inductor.aoti_compile_and_package`` / ``aoti_load_package``) as the
BackendUnderTests ``torch-aoti`` (CPU: C++ kernels) and ``torch-aoti-cuda`` (the current CUDA
device: Triton kernels and cuBLAS/cuDNN calls).

The delegate mapping:

- ``preprocess`` compiles the ExportedProgram into a ``.pt2`` package (C++
  wrapper and kernels built into a shared library, weights beside it); the
  processed blob is the package's bytes. Compiling takes tens of seconds, so
  packages are cached on disk under ``conformance.programs.cache_dir() / "aoti"``
  by a hash of the program (:func:`program_fingerprint`: its ``torch.export.save``
  archive without the example inputs' values), the torch version and the compile
  options (see :func:`cache_key`): a second certify run compiles nothing.
  ``AOTI_CACHE=0`` in the environment turns the cache off.
- ``init`` writes the bytes to a private temporary file and loads it with
  ``aoti_load_package``. Whatever the loader raises for a package it cannot read
  (zip, archive-format and shared-library errors) is ``BackendError(InvalidProgram)``;
  a native crash stays a crash.
- ``execute`` checks the argument count against the package's call spec, calls
  the runner on the inputs and copies its outputs into the pre-allocated ones.
  Input dtypes and shapes are checked by the runner itself: the generated code
  carries those checks but runs them only when ``AOTI_RUNTIME_CHECK_INPUTS=1``
  (read once per loaded library), so this adapter sets that variable unless the
  environment already sets it. Without it the runner reinterprets an input of the
  wrong dtype and reads a wrongly shaped one out of bounds (reports/notes/aoti.md).
- ``destroy`` drops the runner.

On a CUDA device (``backend("cuda")``) preprocess compiles a copy of the program moved onto the
device (``_device.move_program``: AOTInductor generates code for the device its weights and
example inputs are on), the cache key adds the device's compute capability (a package holds
kernels built for one architecture), init loads the package on that device, and execute copies
the host inputs there and the outputs back: the contract's boundary stays host NumPy arrays.
Where no CUDA device exists, building the backend is refused (``_device.require``) before anything
runs.

AOTInductor keeps no debug handles: its generated code does not carry the
program's ``node.meta["debug_handle"]``, so ``debug_handle_map`` is None and the
DBG clauses are declared not applicable in the manifest.

Claims are data, all literal: ``backend_adapters/claims/torch-aoti.toml`` and
``torch-aoti-cuda.toml`` (every spec'd op in every dtype, resolved through ``conformance.specs``;
the not-applicable clauses with their reasons, shared in ``_aoti-family.toml``; on CUDA the
numerical latitudes its kernels take).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import os
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.api import (
    BackendDetails,
    BackendError,
    BackendInterface,
    BackendUnderTest,
    Error,
    Manifest,
    PreprocessResult,
)

from . import _claims, _device, _exported

NAME = "torch-aoti"
CHECK_INPUTS_ENV = "AOTI_RUNTIME_CHECK_INPUTS"
CACHE_FORMAT = 2
"""Bump to invalidate cached packages when the way they are built changes."""
COMPILE_OPTIONS: dict[str, Any] = {}
"""Inductor options passed to aoti_compile_and_package (defaults: the backend as shipped)."""

_lock = threading.Lock()


@dataclass
class CompileStats:
    compiles: int = 0
    cache_hits: int = 0
    compile_seconds: float = 0.0
    programs: list = field(default_factory=list)


STATS = CompileStats()
"""Per-process counts, for the adapter's tests and for measuring what a certify run costs."""


def cache_root() -> Path:
    from conformance.programs import cache_dir

    return cache_dir() / "aoti"


def cache_enabled() -> bool:
    return os.environ.get("AOTI_CACHE", "1") != "0"


def cache_key(serialized: bytes, device: str = "cpu") -> str:
    """The package's cache name: the program's fingerprint, the torch version, the compile options and,
    off the CPU, the device's architecture (the CPU's key leaves it out, so CPU caches stay valid)."""
    import torch

    h = hashlib.sha256()
    parts = [f"aoti-cache-{CACHE_FORMAT}", torch.__version__, repr(sorted(COMPILE_OPTIONS.items()))]
    if device != "cpu":
        major, minor = torch.cuda.get_device_capability(device)
        parts.append(f"cuda sm_{major}{minor}")
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    h.update(serialized)
    return h.hexdigest()[:32]


def program_fingerprint(program) -> bytes:
    """What identifies ``program`` for the cache: its ``torch.export.save`` archive minus example inputs.

    torch.export.save validates the program first, and some valid-to-compile programs fail that
    validation: ``copy.deepcopy`` of a program whose input placeholder is named ``input`` renames the
    node to ``input_1`` but not its input spec (torch 2.13), and the harness hands preprocess such
    deep copies. For those the fingerprint is the graph's code, signature, ranges and every
    parameter, buffer and constant's bytes, which is what the compiled package depends on.
    """
    try:
        archive = _exported.serialize(program)
    except Exception:
        archive = None
    if archive is not None:
        # Not the whole archive: it also holds the example inputs' values (the program cache keeps
        # whichever example first built a program of these shapes, so they change between runs while
        # the compiled package does not depend on them) and a random serialization id.
        import io
        import zipfile

        h = hashlib.sha256()
        with zipfile.ZipFile(io.BytesIO(archive)) as zf:
            for name in sorted(zf.namelist()):
                if "sample_inputs" in name or name.endswith("serialization_id"):
                    continue
                h.update(name.encode() + b"\0" + hashlib.sha256(zf.read(name)).digest())
        return b"archive:" + h.digest()
    import torch

    h = hashlib.sha256()
    for part in (program.graph_module.code, str(program.graph_signature), str(sorted(map(str, program.range_constraints.items())))):
        h.update(part.encode())
        h.update(b"\0")
    for node in program.graph.nodes:
        if node.op == "placeholder":
            h.update(f"{node.name}:{node.meta.get('val')!r}".encode())
    for name, value in sorted({**program.state_dict, **program.constants}.items()):
        h.update(name.encode())
        if isinstance(value, torch.Tensor):
            t = value.detach().contiguous().cpu()
            h.update(f"{t.dtype}{list(t.shape)}".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        else:
            h.update(repr(value).encode())
    return b"fingerprint:" + h.digest()


def compile_package(program, device: str = "cpu") -> bytes:
    """The .pt2 package of ``program`` for ``device``: from the disk cache, or compiled (and cached).
    ``program`` is left as it was (a device other than the CPU compiles a moved copy)."""
    import time

    import torch

    key = cache_key(program_fingerprint(program), device)
    cached = cache_root() / f"{key}.pt2"
    if cache_enabled() and cached.exists():
        with _lock:
            STATS.cache_hits += 1
        return cached.read_bytes()
    workdir = Path(tempfile.mkdtemp(prefix="aoti-compile-"))
    try:
        start = time.perf_counter()
        if device != "cpu":
            program = _device.move_program(copy.deepcopy(program), device, _device.backend_name(NAME, device))
        try:
            path = torch._inductor.aoti_compile_and_package(
                program, package_path=str(workdir / "model.pt2"), inductor_configs=dict(COMPILE_OPTIONS) or None
            )
        except NotImplementedError as exc:
            raise BackendError(Error.NotSupported, f"AOTInductor cannot compile this program: {exc}") from None
        elapsed = time.perf_counter() - start
        blob = Path(path).read_bytes()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    with _lock:
        STATS.compiles += 1
        STATS.compile_seconds += elapsed
        STATS.programs.append((key, round(elapsed, 1)))
    if cache_enabled():
        try:
            cache_root().mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_bytes(blob)
            os.replace(tmp, cached)
        except OSError:
            pass  # a read-only cache costs time, not correctness
    return blob


class AotiDetails(BackendDetails):
    """Ahead of time: aoti_compile_and_package, cached on disk by program hash."""

    @staticmethod
    def preprocess(edge_program, compile_specs):
        return PreprocessResult(processed_bytes=compile_package(edge_program))


@functools.cache
def details(device: str = "cpu") -> type[BackendDetails]:
    """The ahead-of-time half compiling for ``device`` (``"cpu"``: :class:`AotiDetails`)."""
    if device == "cpu":
        return AotiDetails

    class OnDevice(AotiDetails):
        @staticmethod
        def preprocess(edge_program, compile_specs):
            return PreprocessResult(processed_bytes=compile_package(edge_program, device))

    OnDevice.__name__ = OnDevice.__qualname__ = f"AotiDetails[{device}]"
    OnDevice.__doc__ = f"Ahead of time: aoti_compile_and_package of the program moved to {device}, cached on disk by program hash."
    return OnDevice


@dataclass
class AotiHandle:
    runner: Any
    inputs: int
    outputs: int
    directory: Path
    alive: bool = True


_INPUT_CHECK = re.compile(r"input_handles\[\d+\]|expected inputs vector size")
"""What the runner's own argument checks say (the generated __check_inputs_outputs and the container)."""


class AotiRuntime(BackendInterface):
    """At run time: the package loaded with aoti_load_package on ``device`` (``"cpu"``, or a CUDA
    device as ``_device.require`` names it: ``"cuda:0"``), called per execute."""

    def __init__(self, device: str = "cpu"):
        self.device = device

    def is_available(self) -> bool:
        try:
            import torch
            import torch._inductor  # noqa: F401
            from torch._inductor import aoti_load_package  # noqa: F401
        except Exception:
            return False
        return self.device == "cpu" or torch.cuda.is_available()

    def init(self, context, processed, compile_specs):
        import torch

        os.environ.setdefault(CHECK_INPUTS_ENV, "1")
        blob = bytes(processed.data)
        if not blob:
            raise BackendError(Error.InvalidProgram, "empty package")
        directory = Path(tempfile.mkdtemp(prefix="aoti-load-"))
        path = directory / "model.pt2"
        path.write_bytes(blob)
        try:
            index = torch.device(self.device).index
            runner = torch._inductor.aoti_load_package(str(path), device_index=-1 if index is None else index)
            in_spec, out_spec = _call_spec(runner)
        except BackendError:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        except Exception as exc:  # zipfile, PytorchStreamReader, dlopen, metadata errors
            shutil.rmtree(directory, ignore_errors=True)
            raise BackendError(
                Error.InvalidProgram, f"aoti_load_package refused the package: {type(exc).__name__}: {_first_line(exc)}"
            ) from None
        path.unlink(missing_ok=True)  # the loader extracted what it needs
        return AotiHandle(runner, in_spec, out_spec, directory)

    def execute(self, context, handle, args):
        import numpy as np
        import torch

        from conformance.api.tensors import to_torch

        if not isinstance(handle, AotiHandle) or not handle.alive:
            raise BackendError(Error.DelegateInvalidHandle, "not a live handle of this backend")
        args = list(args)
        if len(args) != handle.inputs + handle.outputs:
            raise BackendError(
                Error.InvalidArgument,
                f"execute got {len(args)} argument(s); the package takes {handle.inputs} input(s) and {handle.outputs} output(s)",
            )
        inputs = []
        for i, arg in enumerate(args[: handle.inputs]):
            value = getattr(arg, "value", None)
            if isinstance(value, np.ndarray):
                inputs.append(to_torch(value) if self.device == "cpu" else to_torch(value).to(self.device))
            elif isinstance(value, (bool, int, float)):
                inputs.append(value)
            else:
                raise BackendError(Error.InvalidArgument, f"input {i} is {type(value).__name__}")
        try:
            with torch.no_grad():
                result = handle.runner(*inputs)
        except Exception as exc:
            text = _first_line(exc)
            code = Error.InvalidArgument if _INPUT_CHECK.search(str(exc)) else Error.Internal
            raise BackendError(code, f"the AOTInductor runner raised {type(exc).__name__}: {text}") from None
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        _exported.write_outputs(results, args[handle.inputs :])  # to_numpy copies a device tensor to the host
        return Error.Ok

    def destroy(self, handle):
        if isinstance(handle, AotiHandle) and handle.alive:
            handle.alive = False
            handle.runner = None
            shutil.rmtree(handle.directory, ignore_errors=True)


def _call_spec(runner) -> tuple[int, int]:
    """Number of input and output leaves, from the package's serialized pytree call spec."""
    from torch.utils import _pytree as pytree

    in_spec, out_spec = runner.get_call_spec() if hasattr(runner, "get_call_spec") else runner.loader.get_call_spec()
    ins = pytree.treespec_loads(in_spec)
    outs = pytree.treespec_loads(out_spec)
    return ins.num_leaves, outs.num_leaves


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines() or [""])[0][:500]


def manifest(device: str = "cpu") -> Manifest:
    """claims/torch-aoti.toml: the whole spec (Inductor lowers every ATen op or calls its kernel), and the
    clauses without debug handles or a fixed version field, with the reasons; on CUDA
    claims/torch-aoti-cuda.toml: the same, and the numerical latitudes its kernels take."""
    return _claims.load(_device.backend_name(NAME, device)).manifest()


def _version(device: str = "cpu") -> str:
    import torch

    return f"torch {torch.__version__} (AOTInductor, {_device.describe(device)}, {CHECK_INPUTS_ENV}={os.environ.get(CHECK_INPUTS_ENV, '1')})"


def backend(device: str = "cpu") -> BackendUnderTest:
    """The entry point ``torch-aoti`` (``device`` "cpu"), or AOTInductor on another device: "cuda" (the
    current CUDA device, the entry point ``torch-aoti-cuda``) or "cuda:N". DiscoveryError, before
    anything runs, where the machine has no such device."""
    from conformance.discovery import DiscoveryError

    name = _device.backend_name(NAME, device)
    device = _device.require(NAME, device)  # before importing Inductor (seconds): a refusal is immediate
    try:
        import torch._inductor  # noqa: F401
        from torch._inductor import aoti_compile_and_package, aoti_load_package  # noqa: F401
    except ImportError as exc:
        raise DiscoveryError(f"{name} needs torch>=2.6 with AOTInductor ({exc}); install it with: pip install torch") from None
    if shutil.which(os.environ.get("CXX", "g++")) is None and shutil.which("c++") is None:
        raise DiscoveryError(f"{name} compiles C++: it needs a C++ compiler; install it with: apt-get install g++")
    os.environ.setdefault(CHECK_INPUTS_ENV, "1")
    on = "CPU" if device == "cpu" else f"{device} (Triton kernels; inputs and outputs host arrays)"
    return BackendUnderTest(
        name=name,
        details=details(device),
        runtime=AotiRuntime(device),
        version=_version(device),
        manifest=manifest(device),
        description=f"AOTInductor: ExportedProgram compiled to a .pt2 package (C++ shared library) and run on {on}",
        family="delegate",
        profile="aoti-sample",  # every program is a compile (tens of seconds): a cached sample
        device=device,
    )


def cuda_backend() -> BackendUnderTest:
    """The entry point ``torch-aoti-cuda``: :func:`backend` on the current CUDA device."""
    return backend("cuda")
