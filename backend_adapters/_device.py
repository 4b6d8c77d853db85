"""The device an adapter computes on: which ones it may name, and the refusal where one is absent.

Adapters that run PyTorch on an accelerator keep the contract's boundary as it is (inputs and
outputs are host NumPy arrays) and move the program and its inputs onto the device themselves.
A backend built for a device this machine lacks is refused when it is built, with the CPU backend
to certify instead, so that a certification never runs on another device than its name says.
"""

from __future__ import annotations

DEVICE_TYPES = ("cpu", "cuda")
"""The device types the in-tree adapters have claims files for (``<name>`` and ``<name>-cuda``)."""


def backend_name(cpu_name: str, device: str) -> str:
    """The entry-point name of ``cpu_name``'s backend on ``device``: ``torch-eager`` on the CPU,
    ``torch-eager-cuda`` on any CUDA device."""
    kind = device_type(device)
    return cpu_name if kind == "cpu" else f"{cpu_name}-{kind}"


def device_type(device: str) -> str:
    """``"cuda"`` of ``"cuda:1"``; a LookupError (DiscoveryError) naming the supported types otherwise."""
    from conformance.discovery import DiscoveryError

    kind, _, index = str(device).partition(":")
    if kind not in DEVICE_TYPES or (index and not index.isdigit()):
        raise DiscoveryError(f"device {device!r}: the in-tree adapters run on {' or '.join(DEVICE_TYPES)} (e.g. 'cuda:0')")
    return kind


def require(cpu_name: str, device: str) -> str:
    """``device`` as torch names it (``"cuda:0"`` for ``"cuda"``: the current CUDA device) when this
    machine has it; DiscoveryError before anything runs otherwise."""
    import torch

    from conformance.discovery import DiscoveryError

    name = backend_name(cpu_name, device)
    if device_type(device) == "cpu":
        return "cpu"
    if not torch.cuda.is_available():
        raise DiscoveryError(
            f"{name} needs a CUDA device; torch.cuda.is_available() is False on this machine: certify {cpu_name} for CPU"
        )
    where = torch.device(device)
    index = torch.cuda.current_device() if where.index is None else where.index
    if index >= torch.cuda.device_count():
        raise DiscoveryError(f"{name}: no device {device!r}; this machine has {torch.cuda.device_count()} CUDA device(s)")
    return f"cuda:{index}"


def describe(device: str) -> str:
    """``"CPU"``, or the CUDA device's name and compute capability, for a backend's version string."""
    if device_type(device) == "cpu":
        return "CPU"
    import torch

    major, minor = torch.cuda.get_device_capability(device)
    return f"{device} {torch.cuda.get_device_name(device)}, compute capability {major}.{minor}, CUDA {torch.version.cuda}"


def move_program(program, device: str, name: str):
    """``program`` (an ExportedProgram this adapter owns) with its weights, constants and the device
    arguments of its factory calls on ``device`` (``torch.export.passes.move_to_device_pass``: a
    ``full`` or ``arange`` exported on the CPU names the CPU in its arguments)."""
    import torch
    from torch.export.passes import move_to_device_pass

    from conformance.api import BackendError, Error

    try:
        return move_to_device_pass(program, device)
    except torch.OutOfMemoryError as exc:
        raise BackendError(Error.MemoryAllocationFailed, f"{name}: the program's weights do not fit on {device}: {exc}") from None
    except Exception as exc:
        raise BackendError(
            Error.InvalidProgram, f"{name}: cannot move the program to {device}: {type(exc).__name__}: {exc}"
        ) from None
