"""The hooks a lazy-tensor backend (family "lazy") gives the LAZY checks.

The seed interface is ``torch::lazy::BackendImplInterface``
(torch/csrc/lazy/backend/backend_interface.h) and the LazyTensor core around it: data
transfer, tracing into IR, compiling and caching synced graphs, the eager fallback, the RNG
seed, devices and metrics. Python reaches only part of it, through ``torch._lazy``; a lazy
backend's runtime exposes what the checks drive as ``backend.runtime.lazy``, an object that
implements :class:`LazyBackendHooks` (and :class:`LazyDeviceList` when its device list can be
observed). ``backend_adapters.lazy.LazyHooks`` is the TorchScript lazy backend's; another
torch.lazy backend (XLA, a vendor's LTC backend) certifies through the same checks by
providing its own.

The LAZY clauses (specs/interface.toml, checked by conformance/checks/test_lazy.py) state the
semantics; each method below says which clauses rely on it. Operator numerics on the lazy
device are NUM-001, run through the backend's delegate mapping like any other backend's.

Importable without torch: the types below are annotations only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    import torch

EXECUTION_COUNTERS = ("MarkStep", "SyncedTensorsWithIR", "UncachedCompile", "CachedCompile")
"""torch.lazy counters that move when a graph is synced, compiled or executed (LAZY-003, LAZY-004)."""


@runtime_checkable
class LazyBackendHooks(Protocol):
    """The torch.lazy APIs the LAZY checks drive, behind one object (``backend.runtime.lazy``)."""

    fallback_prefix: str
    """Prefix of the metrics counter of an op that ran through the eager CPU fallback
    (torch.lazy counts it as ``aten::<op>``, so ``"aten::"``). LAZY-008."""

    ir_prefix: str
    """Prefix of the metrics counter of an op traced into the backend's IR
    (``lazy::<op>`` for torch.lazy, so ``"lazy::"``). LAZY-008, LAZY-009."""

    def device(self, ordinal: int | None = None) -> torch.device:
        """The lazy device (``ordinal`` None: the default one), initializing the backend if needed.

        Tensors moved there are traced, not computed, until :meth:`sync`; every ordinal the
        backend accepts computes there and keeps results on that device (LAZY-005)."""
        ...

    def sync(self) -> None:
        """Materialize every pending lazy tensor and wait for the device
        (``LazyGraphExecutor::SyncLiveTensorsGraph``, ``torch._lazy.mark_step`` then
        ``wait_device_ops``). Nothing may execute before it (LAZY-003); a graph synced again
        with the same structure reuses its compiled computation (LAZY-004)."""
        ...

    def counters(self) -> dict[str, int]:
        """Every metrics counter, name -> value (``torch._lazy.metrics``): the fallback and IR
        counters (:attr:`fallback_prefix`, :attr:`ir_prefix`) and :data:`EXECUTION_COUNTERS`."""
        ...

    def counter_value(self, name: str) -> int | None:
        """One counter's value, None when it has never counted (LAZY-003, LAZY-004, LAZY-009)."""
        ...

    def metrics_report(self) -> str:
        """The backend's human-readable metrics report: non-empty once something ran (LAZY-009)."""
        ...

    def reset_metrics(self) -> None:
        """Zero every counter: afterwards :meth:`counters` lists none above 0 (LAZY-009)."""
        ...

    def default_device_type(self) -> str:
        """``BackendImplInterface::GetDefaultDeviceType``: the name of the hardware the lazy device
        computes on (e.g. ``"CPU"``); lower-cased, a torch device type (LAZY-005)."""
        ...

    def device_context(self, device: str | None = None) -> Any:
        """The LazyTensor device context of ``device`` (None: the default device); its ``device``
        attribute is the default device type (LAZY-005)."""
        ...

    def manual_seed(self, seed: int) -> None:
        """Seed the random ops run on the lazy device (``BackendImplInterface::SetRngSeed``): the
        same seed gives the same values, another seed others (LAZY-006, LAZY-007)."""
        ...

    def force_fallback(self, op: str) -> None:
        """Route ``op`` (e.g. ``"aten::tanh"``) through the eager CPU fallback from now on; ``""``
        restores normal lowering. A forced op still computes correctly and is counted under
        :attr:`fallback_prefix` (LAZY-008)."""
        ...


@runtime_checkable
class LazyDeviceList(Protocol):
    """Optional: the device list, where the backend lets it be observed (LAZY-010).

    A backend whose hooks lack ``devices`` must declare LAZY-010 not applicable in its
    manifest, with the reason (torch 2.13 binds no ``GetBackendDevices`` to Python)."""

    def devices(self) -> list[tuple[str, int]]:
        """``BackendImplInterface::GetBackendDevices``: (device type, ordinal) of every device, each
        once, the default device among them; each listed device of the default type computes."""
        ...


def missing_members(obj: object, protocol: type = LazyBackendHooks) -> list[str]:
    """The members of ``protocol`` (methods and annotated attributes) that ``obj`` lacks."""
    members = {name for name in vars(protocol) if not name.startswith("_")} | set(protocol.__annotations__)
    return sorted(name for name in members if not hasattr(obj, name))


__all__ = ["EXECUTION_COUNTERS", "LazyBackendHooks", "LazyDeviceList", "missing_members"]
