"""ExecuTorch as backends under test: ``executorch-xnnpack`` and ``executorch-portable``.

executorch-xnnpack
    The XNNPACK delegate. ``preprocess`` lowers the harness program with
    ``to_edge_transform_and_lower(..., partitioner=[XnnpackPartitioner()])`` and
    returns what ``XnnpackBackend.preprocess`` produced for the delegated
    partition (payload, debug_handle_map, named data). A program any of whose
    compute ops the partitioner leaves outside the delegate is refused with
    ``BackendError(NotSupported)`` naming them: those ops would run on
    ExecuTorch's CPU kernels, so neither their results nor the program's are
    XNNPACK's. The runtime half runs the payload through ExecuTorch's C++ runtime
    (``XnnpackBackend::init`` / ``execute`` / ``destroy``). For whole models and quantized
    programs the harness may ask for partial delegation (``PARTIAL_DELEGATION``): the blob is
    then the whole .pte, XNNPACK's partitions beside the ops the partitioner left to the CPU
    kernels, and the debug_handle_map names only the delegated nodes.
executorch-portable
    No delegate: ``to_edge(program).to_executorch()``; the .pte is the blob and
    every op runs on the CPU kernels the ExecuTorch pip wheel links (the
    optimized kernel library over the portable one). ``debug_handle_map`` is the
    emitter's instruction -> debug handles map.

Lowering details: ``executorch_lowering``; runtime details: ``executorch_runtime``.
Claims are what ExecuTorch documents, and every clause the Python runtime cannot
observe is declared not applicable with its reason. They are data:
``backend_adapters/claims/executorch-xnnpack.toml`` and ``executorch-portable.toml``
(read by ``backend_adapters._claims``) hold every literal: XNNPACK's claimed ops and
dtypes (its op-support table's), its documented refusals, both blobs' version fields
and the not-applicable clauses with their reasons. One claim stays code: portable's
ops and dtypes, which ``_portable_claims`` computes when the backend is built from
the installed ExecuTorch's kernels/portable/functions.yaml and edge.yaml.
"""

from __future__ import annotations

import functools

from conformance.api import PARTIAL_DELEGATION, BackendDetails, BackendUnderTest, PreprocessResult
from conformance.discovery import DiscoveryError

from . import _claims

EXECUTORCH_VERSION = "1.5.1"
INSTALL = f"executorch is not installed: pip install 'torch-backend-conformance[executorch]' (executorch=={EXECUTORCH_VERSION})"


def _require() -> str:
    """The installed ExecuTorch's version, or DiscoveryError saying how to install it.

    Found without importing: importing executorch.exir costs ~3.5 s, and the CLI and the pytest
    controller build this backend only to read its name, profile and manifest. The lowering and
    the runtime import what they use, in the worker that lowers."""
    import importlib.util
    import sys

    def findable(module: str) -> bool:
        if module in sys.modules:  # None there: a blocked import
            return sys.modules[module] is not None
        return importlib.util.find_spec(module) is not None

    try:
        missing = [m for m in ("executorch.exir", "executorch.runtime", "executorch.backends.xnnpack") if not findable(m)]
    except ImportError as exc:  # a parent package that fails to import
        raise DiscoveryError(f"{INSTALL} ({exc})") from exc
    if missing:
        raise DiscoveryError(f"{INSTALL} (cannot find {', '.join(missing)})")
    from executorch.version import __version__

    return __version__


# ---------------------------------------------------------------------------------------------
# AOT halves


class XnnpackDetails(BackendDetails):
    """preprocess: XnnpackBackend.preprocess's own output for the program's one XNNPACK partition."""

    @staticmethod
    def preprocess(edge_program, compile_specs):
        from .executorch_lowering import lower_xnnpack, lower_xnnpack_partial
        from .executorch_runtime import TEMPLATES

        specs = [s for s in compile_specs if s != PARTIAL_DELEGATION]
        if len(specs) < len(compile_specs):
            # The whole .pte: XNNPACK's partitions and the ops it left on ExecuTorch's CPU kernels;
            # the map names only the delegated nodes (BackendUnderTest.partial_delegation).
            lowered = lower_xnnpack_partial(edge_program, specs)
            return PreprocessResult(processed_bytes=lowered.processed_bytes, debug_handle_map=dict(lowered.debug_handle_map))
        lowered = lower_xnnpack(edge_program, specs)
        TEMPLATES.register(lowered.processed_bytes, lowered.template)
        return PreprocessResult(
            processed_bytes=lowered.processed_bytes,
            debug_handle_map=dict(lowered.debug_handle_map),
            data_store_output=lowered.named_output(),
        )


class PortableDetails(BackendDetails):
    """preprocess: the whole program as a .pte for ExecuTorch's CPU kernels."""

    @staticmethod
    def preprocess(edge_program, compile_specs):
        from .executorch_lowering import lower_portable

        lowered = lower_portable(edge_program, list(compile_specs))
        return PreprocessResult(
            processed_bytes=lowered.processed_bytes,
            debug_handle_map=dict(lowered.debug_handle_map),
            data_store_output=None,
        )


# ---------------------------------------------------------------------------------------------
# Claims computed at run time (the literals are in claims/executorch-*.toml)


_ET_DTYPES = {
    "Bool": "bool",
    "Byte": "uint8",
    "Char": "int8",
    "Short": "int16",
    "Int": "int32",
    "Long": "int64",
    "Half": "float16",
    "Float": "float32",
    "Double": "float64",
    "BFloat16": "bfloat16",
}


@functools.lru_cache(maxsize=1)
def _portable_claims() -> dict[str, tuple[str, ...] | str]:
    """Spec ops whose out variant kernels/portable/functions.yaml lists, in the dtypes
    exir/dialects/edge/edge.yaml (generated from the portable kernels) allows for their
    first tensor argument; every dtype when edge.yaml has no entry for the op."""
    from importlib import resources

    import yaml

    from conformance import specs as spec_module

    functions = yaml.safe_load(resources.files("executorch.kernels.portable").joinpath("functions.yaml").read_text())
    kernels = {entry["op"] for entry in functions if "op" in entry}
    edge = yaml.safe_load(resources.files("executorch.exir.dialects.edge").joinpath("edge.yaml").read_text())
    constraints = {}
    for entry in edge or ():
        name = entry["func"].split("::", 1)[-1]
        aliases = entry.get("type_alias", {})
        allowed = set()
        for constraint in entry.get("type_constraint", ()):
            first = next(iter(constraint.values()), None)
            allowed.update(aliases.get(first, ()))
        constraints[name] = tuple(sorted({_ET_DTYPES[d] for d in allowed if d in _ET_DTYPES}))
    claims: dict[str, tuple[str, ...] | str] = {}
    for spec in spec_module.load().ops.values():
        for name in spec.names:
            out = _out_variant(name)
            if out is None or out not in kernels:
                continue
            base = name.split(".", 1)[1]  # "add.Tensor"
            dtypes = constraints.get(base)
            claims[name] = dtypes if dtypes else "*"
    return claims


def _out_variant(name: str) -> str | None:
    """``aten.add.Tensor`` -> ``add.out`` (the kernel name functions.yaml uses)."""
    import torch
    from executorch.exir.operator.convert import to_out_variant

    namespace, op, overload = name.split(".")
    try:
        overload_fn = getattr(getattr(getattr(torch.ops, namespace), op), overload)
        out, _ = to_out_variant(overload_fn)
    except Exception:
        return None
    return f"{out._schema.name.split('::', 1)[-1]}.{out._schema.overload_name or 'default'}"


# ---------------------------------------------------------------------------------------------
# Factories


def xnnpack() -> BackendUnderTest:
    version = _require()
    from .executorch_runtime import CppRegistryView, XnnpackRuntime

    return BackendUnderTest(
        name="executorch-xnnpack",
        details=XnnpackDetails,
        runtime=XnnpackRuntime(),
        profile="executorch",  # every example is a lowering (1-2 s): full would take ~10 h
        version=f"executorch {version} (XNNPACK delegate, flatbuffer schema XN01)",
        manifest=_claims.load("executorch-xnnpack").manifest(),
        description="ExecuTorch's XNNPACK delegate: XnnpackPartitioner + XnnpackBackend.preprocess, "
        "run by ExecuTorch's C++ runtime through its Python bindings",
        registry=CppRegistryView,
        family="delegate",
        batch_numerics=True,  # a lowering per program: eight edge cases per lowering
        partial_delegation=True,  # whole models: XNNPACK's partitions, the rest on ExecuTorch's CPU kernels
    )


def portable() -> BackendUnderTest:
    version = _require()
    from .executorch_runtime import PortableRuntime

    return BackendUnderTest(
        name="executorch-portable",
        details=PortableDetails,
        runtime=PortableRuntime(),
        profile="executorch",
        version=f"executorch {version} (CPU kernels, program schema ET12)",
        manifest=_claims.load("executorch-portable").manifest(_portable_claims()),
        description="ExecuTorch without delegates: to_edge + to_executorch, every op on the CPU kernels "
        "the pip wheel links (optimized over portable), run by ExecuTorch's C++ runtime",
        family="delegate",
        batch_numerics=True,  # a lowering per program: eight edge cases per lowering
    )


__all__ = ["INSTALL", "PortableDetails", "XnnpackDetails", "portable", "xnnpack"]
