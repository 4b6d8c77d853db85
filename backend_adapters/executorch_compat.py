"""The private internals of ExecuTorch the ExecuTorch adapters use, each behind a version check.

Only the adapters import this module (the harness never imports ExecuTorch); the torch internals the
same adapters rely on are in ``conformance.compat.torch``. Tested on ExecuTorch 1.5.1 with torch 2.13.0
(CPU): tests/adapters/test_executorch.py and the checked-in reports of executorch-xnnpack and
executorch-portable. Outside ``TESTED`` (or with ``CONFORMANCE_COMPAT=public``) each function takes its
public route where one exists; where none does, its docstring says so.
"""

from __future__ import annotations

import functools

from conformance import compat
from conformance.compat import torch as compat_torch

TESTED = ((1, 5), (1, 6))
"""The ExecuTorch releases the private routes were tested on: the 1.5 series."""


@functools.cache
def _tested() -> bool:
    from executorch.version import __version__

    return compat.within(__version__, *TESTED)


def _probe_retraces() -> str | None:
    from torch.export import ExportedProgram

    if not callable(getattr(ExportedProgram, "run_decompositions", None)):
        return "ExportedProgram has no run_decompositions"
    return None


def skips_redundant_retraces() -> bool:
    """Whether ``without_redundant_retraces`` takes its private route (see there)."""
    return compat.private_route("executorch", "without_redundant_retraces", _tested, _probe_retraces)


def without_redundant_retraces(exported, count=None):
    """``exported`` (a private copy the adapter lowers), its ``run_decompositions`` skipping the calls that
    would only re-trace it.

    ``to_edge_transform_and_lower`` calls ``run_decompositions`` three times (functionalize; decompose all
    but what the partitioner keeps; decompose the rest), ``to_edge`` once; on a harness program that is
    already functional, static-shaped core ATen, each call only re-traces the graph: 75-90% of a lowering.

    Private route: the copy's class becomes a subclass of ExportedProgram whose ``run_decompositions``
    returns the program itself where ``compat.torch.retrace_is_identity`` proves the call would decompose
    nothing (``__class__`` assigned on the copy only): it relies on ExecuTorch calling
    ``run_decompositions`` on the program it was given, which is ExecuTorch's internal behaviour.
    tests/adapters/test_executorch.py lowers programs both ways and compares the .pte, payload, debug
    handle map, named data and refusal messages byte for byte. Tested on ExecuTorch 1.5.1, torch 2.13.

    Public fallback: ``exported`` unchanged (every call re-traces, as ExecuTorch wrote it).

    ``count``: called with True for each call answered with the program itself, False for each run."""
    if not skips_redundant_retraces():
        return exported
    exported.__class__ = _no_retrace_type(count)
    return exported


@functools.cache
def _no_retrace_type(count):
    from torch.export import ExportedProgram

    class _NoRetraceProgram(ExportedProgram):
        def run_decompositions(self, decomp_table=None, decompose_custom_triton_ops=False):
            skip = not decompose_custom_triton_ops and compat_torch.retrace_is_identity(self, decomp_table)
            if count is not None:
                count(skip)
            if skip:
                return self
            return super().run_decompositions(decomp_table, decompose_custom_triton_ops)

    return _NoRetraceProgram


def deserialize_pte(data: bytes):
    """The PTEFile (program, mutable data, named data) of a serialized .pte: the XNNPACK adapter's program
    template, into which ``init`` embeds a delegate payload (``executorch_runtime.embed``).

    Private route: ``executorch.exir._serialize._program.deserialize_pte_binary``. Tested on ExecuTorch
    1.5.1.

    No public fallback: ExecuTorch's public API writes a .pte (``to_executorch().buffer``) and loads one
    into its runtime, but does not read one back into its schema nor write one around another payload.
    The ``executorch`` extra pins the tested release (pyproject.toml)."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    return deserialize_pte_binary(data)


def serialize_pte(program, mutable_data, named_data) -> bytes:
    """A .pte of ``program`` (an ``executorch.exir.schema.Program``) with its mutable and named data, delegate
    segments extracted and aligned to 128 bytes, as ``to_executorch`` writes one.

    Private route: ``executorch.exir._serialize._program.PTEFile`` and ``serialize_pte_binary``. Tested on
    ExecuTorch 1.5.1. No public fallback (see ``deserialize_pte``)."""
    from executorch.exir._serialize._program import PTEFile, serialize_pte_binary

    pte = PTEFile(program=program, mutable_data=mutable_data, named_data=named_data)
    return bytes(serialize_pte_binary(pte, extract_delegate_segments=True, segment_alignment=128))
