"""torch.lazy with its TorchScript backend (``torch._lazy.ts_backend``) as a BackendUnderTest.

The seed interface is ``torch::lazy::BackendImplInterface``
(torch/csrc/lazy/backend/backend_interface.h): data transfer (tensor/scalar ->
backend data -> tensor), placeholders, lowering and compilation of traced
graphs, execution, devices, the RNG seed and metrics. Its own semantics are the
LAZY clauses (conformance/checks/test_lazy.py), which reach the backend through
``runtime.lazy``: a :class:`LazyHooks`, this backend's ``conformance.api.LazyBackendHooks``.

To run the NUM checks unchanged, the lazy device is mapped onto the delegate
contract:

- ``preprocess`` serializes the ExportedProgram (``torch.export.save`` bytes).
  It first traces the program once on the lazy device with placeholder-shaped
  inputs and refuses, with ``BackendError(NotSupported)``, a program in which an
  operator runs through torch.lazy's eager CPU fallback (counted by torch.lazy as
  ``aten::<op>``): such an op is not computed by the backend, as a delegate's
  partitioner would leave it undelegated.
- ``init`` loads the archive and moves the unlifted module to the lazy device
  (device arguments of factory ops follow it there).
- ``execute`` checks the arguments against the program's signature, copies the
  inputs to the lazy device, traces the module, syncs (``torch._lazy.mark_step``)
  and copies the results back into the pre-allocated outputs.
- ``destroy`` drops the module.

The delegate-only clauses (blob format, handles, registry, debug handles) would
test this plumbing, not torch.lazy: they name only the delegate and torchscript
families in specs/interface.toml, so they are NOT_APPLICABLE for family "lazy".

Claims are data: ``backend_adapters/claims/torch-lazy-ts.toml`` names the spec profile
"lazy" as the claimed ops (specs/profiles.toml lists them once; :func:`lowered_ops`
reads them from there) and declares LAZY-010 not applicable with the reason.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Any

from conformance.api import (
    BackendDetails,
    BackendError,
    BackendInterface,
    BackendUnderTest,
    Error,
    LazyBackendHooks,
    Manifest,
    PreprocessResult,
)

from . import _claims, _exported

NAME = "torch-lazy-ts"
DEVICE = "lazy"
FALLBACK_PREFIX = "aten::"
"""torch.lazy counts an op that ran through the eager fallback as ``aten::<op>``."""
IR_PREFIX = "lazy::"
"""... and an op it traced into its IR as ``lazy::<op>``."""

_init_lock = threading.Lock()
_initialized = False


def ensure_initialized() -> None:
    """``torch._lazy.ts_backend.init()`` once per process (it registers the TorchScript backend)."""
    global _initialized
    with _init_lock:
        if not _initialized:
            import torch._lazy
            import torch._lazy.ts_backend

            torch._lazy.ts_backend.init()
            _initialized = True


# ---------------------------------------------------------------------------------------------
# What the LAZY checks use


class LazyHooks(LazyBackendHooks):
    """The TorchScript lazy backend's ``conformance.api.LazyBackendHooks`` (``runtime.lazy``): the
    torch.lazy APIs the LAZY checks drive, behind one object. The protocol's docstrings say what
    each must do; this class says only how torch._lazy does it.

    It does not implement ``LazyDeviceList``: torch 2.13 binds no GetBackendDevices to Python
    (LAZY-010 is declared not applicable in claims/torch-lazy-ts.toml). ``ir_text`` and
    ``backend_text`` are extras (torch._C._lazy's dumps) for the adapter's tests and notes.
    """

    device_type = DEVICE
    fallback_prefix = FALLBACK_PREFIX
    ir_prefix = IR_PREFIX

    def device(self, ordinal: int | None = None):
        import torch

        ensure_initialized()
        return torch.device(DEVICE) if ordinal is None else torch.device(DEVICE, ordinal)

    def sync(self) -> None:
        """``torch._lazy.mark_step`` (LazyGraphExecutor::SyncLiveTensorsGraph), then ``wait_device_ops``."""
        import torch._lazy

        torch._lazy.mark_step()
        torch._lazy.wait_device_ops()

    def counters(self) -> dict[str, int]:
        import torch._lazy.metrics as metrics

        return {name: int(metrics.counter_value(name) or 0) for name in metrics.counter_names()}

    def counter_value(self, name: str) -> int | None:
        import torch._lazy.metrics as metrics

        return metrics.counter_value(name)

    def metrics_report(self) -> str:
        import torch._lazy.metrics as metrics

        return metrics.metrics_report()

    def reset_metrics(self) -> None:
        import torch._lazy.metrics as metrics

        metrics.reset()

    def default_device_type(self) -> str:
        """BackendImplInterface::GetDefaultDeviceType, as torch._C._lazy exposes it."""
        import torch._C._lazy

        ensure_initialized()
        return torch._C._lazy._get_default_device_type()

    def device_context(self, device: str | None = None):
        import torch._lazy.device_context

        return torch._lazy.device_context.get_device_context(device)

    def manual_seed(self, seed: int) -> None:
        """The seed random ops on the lazy device use (torch.lazy exposes no SetRngSeed to Python)."""
        import torch

        torch.manual_seed(seed)

    def force_fallback(self, op: str) -> None:
        """Route ``op`` (e.g. "aten::tanh") through the eager fallback; "" restores normal lowering."""
        import torch._C._lazy

        torch._C._lazy._set_force_fallback(op)

    def ir_text(self, tensors) -> str:
        import torch._C._lazy

        return torch._C._lazy._get_tensors_text(list(tensors))

    def backend_text(self, tensors) -> str:
        import torch._C._lazy

        return torch._C._lazy._get_tensors_backend(list(tensors))


# ---------------------------------------------------------------------------------------------
# Moving a program to the lazy device


def _on_device(module, device):
    """The unlifted module on ``device``, with factory ops' ``device=cpu`` arguments moved there too."""
    import torch

    module = module.to(device)
    changed = False
    for node in module.graph.nodes:
        if node.op != "call_function":
            continue
        value = node.kwargs.get("device")
        if isinstance(value, torch.device) and value.type == "cpu":
            node.kwargs = {**node.kwargs, "device": device}
            changed = True
    if changed:
        module.recompile()
    return module


def _probe_inputs(program):
    """Tensors of the placeholders' example shapes: ones (floats), zeros (ints, indices), False (bool)."""
    import torch
    from torch.export.graph_signature import InputKind

    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    out = []
    for spec in program.graph_signature.input_specs:
        if spec.kind is not InputKind.USER_INPUT:
            continue
        val = nodes[spec.arg.name].meta["val"]
        shape = [s if isinstance(s, int) else int(s.node.hint if s.node.hint is not None else 2) for s in val.shape]
        fill = 1 if val.dtype.is_floating_point or val.dtype.is_complex else 0
        out.append(torch.full(shape, fill, dtype=val.dtype))
    return out


def fallback_ops(program) -> list[str]:
    """The ops of ``program`` that torch.lazy runs through its eager CPU fallback when traced."""
    import torch

    hooks = LazyHooks()
    device = hooks.device()
    before = hooks.counters()
    try:
        module = _on_device(copy.deepcopy(program).module(), device)
        inputs = [t.to(device) for t in _probe_inputs(program)]
        with torch.no_grad():
            module(*inputs)  # the fallback runs (and is counted) while tracing; nothing is synced
    except Exception:
        pass  # probe values can be invalid for the op; whatever fell back until then is counted
    after = hooks.counters()
    return sorted(
        name for name, value in after.items() if name.startswith(FALLBACK_PREFIX) and value > before.get(name, 0)
    )


# ---------------------------------------------------------------------------------------------
# The delegate mapping


_UNHASHABLE_SCALARS = ("torch.float8_e4m3fn", "torch.float8_e5m2")


class LazyDetails(BackendDetails):
    """Ahead of time: the program's torch.export archive, refused if torch.lazy would not trace it."""

    @staticmethod
    def preprocess(edge_program, compile_specs):
        ensure_initialized()
        for node in edge_program.graph.nodes:
            val = node.meta.get("val")
            if getattr(val, "ndim", None) == 0 and str(val.dtype) in _UNHASHABLE_SCALARS:
                # torch.lazy hashes a 0-d tensor by its value (torch/csrc/lazy/core/hash.h), with no case
                # for these dtypes: tracing fails an internal assert ("Unsupported scalar type")
                raise BackendError(Error.NotSupported, f"{node.name} is a 0-d {val.dtype} tensor, which torch.lazy cannot hash")
        fell_back = fallback_ops(edge_program)
        if fell_back:
            raise BackendError(
                Error.NotSupported,
                f"{', '.join(op.removeprefix(FALLBACK_PREFIX) for op in fell_back)} left to torch.lazy's eager CPU "
                f"fallback (metrics counter {', '.join(fell_back)}): the TorchScript lazy backend has no lowering for it",
            )
        try:
            blob = _exported.serialize(edge_program)
        except Exception as exc:
            raise BackendError(Error.NotSupported, f"torch.export.save cannot serialize this program: {exc}") from None
        return PreprocessResult(processed_bytes=blob)


@dataclass
class LazyHandle:
    module: Any
    signature: _exported.Signature
    alive: bool = True
    lock: threading.Lock = field(default_factory=threading.Lock)


class LazyRuntime(BackendInterface):
    """At run time: the program's module traced on the lazy device and synced per execute."""

    def __init__(self):
        self.lazy = LazyHooks()

    def is_available(self) -> bool:
        try:
            ensure_initialized()
        except Exception:
            return False
        return True

    def init(self, context, processed, compile_specs):
        ensure_initialized()
        program = _exported.deserialize(bytes(processed.data))
        try:
            sig = _exported.signature(program)
            module = _on_device(program.module(), self.lazy.device())
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(Error.InvalidProgram, f"cannot place the program on the lazy device: {exc}") from None
        return LazyHandle(module, sig)

    def execute(self, context, handle, args):
        import torch

        from conformance.api.tensors import to_torch

        if not isinstance(handle, LazyHandle) or not handle.alive:
            raise BackendError(Error.DelegateInvalidHandle, "not a live handle of this backend")
        inputs, outputs = _exported.split_args(handle.signature, list(args))
        device = self.lazy.device()
        try:
            with handle.lock, torch.no_grad():
                lazy_inputs = [to_torch(a).to(device) for a in inputs]
                result = handle.module(*lazy_inputs)
                results = list(result) if isinstance(result, (list, tuple)) else [result]
                self.lazy.sync()
                results = [r.cpu() if isinstance(r, torch.Tensor) else r for r in results]
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(Error.Internal, f"torch.lazy failed: {type(exc).__name__}: {exc}") from None
        _exported.write_outputs(results, outputs)
        return Error.Ok

    def destroy(self, handle):
        if isinstance(handle, LazyHandle):
            handle.alive = False
            handle.module = None


def lowered_ops() -> tuple[str, ...]:
    """The spec'd ops torch's TorchScript lazy backend traces into its IR for every spec'd dtype: the
    ops of the spec profile "lazy" (specs/profiles.toml), the one list, which claims/torch-lazy-ts.toml
    names. The other spec'd ops fall back to eager CPU (aten::acos, aten::amax, aten::where.self, ...):
    preprocess refuses them, so they report NOT_SUPPORTED."""
    return tuple(manifest().ops)


def manifest() -> Manifest:
    """claims/torch-lazy-ts.toml: the "lazy" profile's ops in every dtype; LAZY-010 not applicable."""
    return _claims.load(NAME).manifest()


def _version() -> str:
    import torch

    return f"torch {torch.__version__} (torch._lazy TorchScript backend)"


def backend() -> BackendUnderTest:
    """The entry point ``torch-lazy-ts``."""
    from conformance.discovery import DiscoveryError

    try:
        import torch._lazy.ts_backend  # noqa: F401
    except ImportError as exc:
        raise DiscoveryError(
            f"torch-lazy-ts needs torch with torch._lazy ({exc}); install it with: pip install torch"
        ) from None
    return BackendUnderTest(
        name=NAME,
        details=LazyDetails,
        runtime=LazyRuntime(),
        version=_version(),
        manifest=manifest(),
        description="torch.lazy (LazyTensor core) with the TorchScript backend, device 'lazy', executing on CPU",
        family="lazy",
        profile="lazy",
    )
