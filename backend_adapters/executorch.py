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
    (``XnnpackBackend::init`` / ``execute`` / ``destroy``).
executorch-portable
    No delegate: ``to_edge(program).to_executorch()``; the .pte is the blob and
    every op runs on the CPU kernels the ExecuTorch pip wheel links (the
    optimized kernel library over the portable one). ``debug_handle_map`` is the
    emitter's instruction -> debug handles map.

Lowering details: ``executorch_lowering``; runtime details: ``executorch_runtime``.
Claims are what ExecuTorch documents (see ``_xnnpack_claims`` / ``_portable_claims``),
and every clause the Python runtime cannot observe is declared not applicable
with its reason.
"""

from __future__ import annotations

import functools

from conformance.api import (
    BackendDetails,
    BackendUnderTest,
    BlobVersionField,
    Manifest,
    PreprocessResult,
)
from conformance.discovery import DiscoveryError

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
        from .executorch_lowering import lower_xnnpack
        from .executorch_runtime import TEMPLATES

        lowered = lower_xnnpack(edge_program, list(compile_specs))
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
# Claims


_XNNPACK_DOCUMENTED = (
    # docs/source/backends/xnnpack/op-support.csv (ExecuTorch), operators listed with no
    # constraint, as the harness names them. Compute dtypes documented: fp16, fp32.
    "aten.abs.default",
    "aten.bmm.default",
    "aten.cat.default",
    "aten.ceil.default",
    "aten.clamp.default",
    "aten.div.Tensor",
    "aten.elu.default",
    "aten.exp.default",
    "aten.floor.default",
    "aten.gelu.default",
    "aten.hardswish.default",
    "aten.hardtanh.default",
    "aten.leaky_relu.default",
    "aten.log.default",
    "aten.maximum.default",
    "aten.minimum.default",
    "aten.mul.Tensor",
    "aten.neg.default",
    "aten.permute.default",
    "aten.permute_copy.default",
    "aten.relu.default",
    "aten.rsqrt.default",
    "aten.sigmoid.default",
    "aten.sqrt.default",
    "aten.tanh.default",
)
"""Not claimed though listed, because the table restricts them in ways the harness's
draws cross (refusals are NOT_SUPPORTED, accepted calls are still checked):
_to_dim_order_copy (no dtype conversion), add/sub (alpha=1), avg_pool2d (ceil_mode,
count_include_pad, divisor_override), constant_pad_nd (no negative padding),
conv1d/conv2d and linear (constant weights; aten.convolution also covers 3-d and
transposed), max_pool2d (stride <= kernel, ceil_mode static only), mean (4-d, dims
[-2,-1]), pow (power=2), slice_copy (no zero-dim, no dynamic shapes), softmax (last
dim), upsample_bilinear2d (no dynamic output sizes)."""


def _xnnpack_claims() -> dict[str, tuple[str, ...]]:
    return {op: ("float16", "float32") for op in _XNNPACK_DOCUMENTED}


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
# What the Python runtime cannot observe


_NO_ALLOCATORS = (
    "ExecuTorch's runtime allocates the method's planned arenas and the delegate's memory itself "
    "(the pybindings own the MemoryManager); the harness's MemoryAllocator cannot reach the C++ runtime, "
    "so exhaustion cannot be simulated (an init that ignores it would pass vacuously)"
)
_NO_HANDLES = (
    "the C++ delegate handle never leaves ExecuTorch: Method owns it and frees it with the method, and "
    "XnnpackBackend::execute static_casts whatever handle it is given without validation "
    "(backends/xnnpack/runtime/XNNPACKBackend.cpp), relying on Method never passing a stale or foreign one; "
    "the Python API cannot pass one, so only the adapter's own bookkeeping could be checked"
)
_NO_ETDUMP = (
    "ETDump is reachable from Python only as one dump per loaded Program "
    "(write_etdump_result_to_file finalizes the flatcc builder: a second call writes a buffer without the "
    "ED00 identifier) and parsing it spawns flatc (~0.2 s), so events cannot be attributed to one execute; "
    "what one dump shows is in reports/README.md"
)
_CPP_REGISTRY = (
    "ExecuTorch's backend table (runtime/backend/interface.cpp) is filled by static initializers of the "
    "linked C++ backends; Python can list it and ask is_available but cannot register into it, so its slot "
    "limit, duplicate and empty-name handling and enumeration order cannot be exercised from Python"
)


def _xnnpack_not_applicable() -> dict[str, str]:
    na = {f"REG-00{i}": _CPP_REGISTRY for i in range(1, 6)}
    na.update({"RT-006": _NO_HANDLES, "RT-007": _NO_HANDLES, "RT-019": _NO_HANDLES, "RT-014": _NO_ALLOCATORS, "DBG-003": _NO_ETDUMP})
    return na


def _portable_not_applicable() -> dict[str, str]:
    return {
        "REG-": "executorch-portable delegates nothing: no backend enters ExecuTorch's backend table",
        "RT-006": _NO_HANDLES.replace("XnnpackBackend::execute static_casts", "delegates static_cast")
        .replace(" (backends/xnnpack/runtime/XNNPACKBackend.cpp)", ""),
        "RT-019": "executorch-portable has no delegate handle to destroy and revive: Method itself is the handle",
        "RT-007": "executorch-portable has no delegate handle: Method itself is the handle and is owned by "
        "the pybindings, which cannot be handed a foreign one",
        "RT-014": _NO_ALLOCATORS,
        "DBG-003": _NO_ETDUMP,
        "PRE-005": "executorch-portable stores weights in the .pte's constant segment; it produces no named data",
    }


# ---------------------------------------------------------------------------------------------
# Factories


XNNPACK_REFUSES = {"*": ("empty", "0-d", "mixed dtypes")}
"""What the XnnpackPartitioner documents leaving undelegated for every op: empty tensors
(partition/config/xnnpack_config.py: "XNNPACK does not support empty tensors"), 0-d operands, and
operands of mixed dtypes (a promotion needs _to_dim_order_copy with a dtype change, which XNNPACK
does not take). A claimed op refusing anything else fails its check."""

XNNPACK_VERSION_OFFSET = 32 + 4 + 3
"""The XNNPACK payload: a 32-byte XNNHeader ("XH00" at 4), then the flatbuffer, whose
file identifier "XN01" sits at offset 4 of it; its last character is the schema
version XNNCompiler checks (it accepts XN00 and XN01)."""


def xnnpack() -> BackendUnderTest:
    version = _require()
    from .executorch_runtime import CppRegistryView, XnnpackRuntime

    return BackendUnderTest(
        name="executorch-xnnpack",
        details=XnnpackDetails,
        runtime=XnnpackRuntime(),
        profile="executorch",  # every example is a lowering (1-2 s): full would take ~10 h
        version=f"executorch {version} (XNNPACK delegate, flatbuffer schema XN01)",
        manifest=Manifest(
            ops=_xnnpack_claims(),
            not_applicable=_xnnpack_not_applicable(),
            refuses=XNNPACK_REFUSES,
            blob_version=BlobVersionField(offset=XNNPACK_VERSION_OFFSET, size=1, current=ord("1")),
        ),
        description="ExecuTorch's XNNPACK delegate: XnnpackPartitioner + XnnpackBackend.preprocess, "
        "run by ExecuTorch's C++ runtime through its Python bindings",
        registry=CppRegistryView,
        family="delegate",
        batch_numerics=True,  # a lowering per program: eight edge cases per lowering
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
        manifest=Manifest(
            ops=_portable_claims(),
            not_applicable=_portable_not_applicable(),
            # The .pte's flatbuffer file identifier "ET12" (bytes 4..8): "12" is the schema version.
            blob_version=BlobVersionField(offset=6, size=2, current=int.from_bytes(b"12", "big"), byteorder="big"),
        ),
        description="ExecuTorch without delegates: to_edge + to_executorch, every op on the CPU kernels "
        "the pip wheel links (optimized over portable), run by ExecuTorch's C++ runtime",
        family="delegate",
        batch_numerics=True,  # a lowering per program: eight edge cases per lowering
    )


__all__ = ["INSTALL", "PortableDetails", "XnnpackDetails", "portable", "xnnpack"]
