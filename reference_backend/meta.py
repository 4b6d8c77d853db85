"""The shapes a step will produce, known before its kernel runs: ATen's own shape rules.

The runtime bounds every step's memory before the kernel allocates (ReferenceRuntime._bound). A blob
declares each value's dims, but a step's attributes decide what its kernel allocates: repeat's
counts, randperm's n, upsample's scales, arange's range, full's size. Rather than a rule per op,
the step is evaluated on the ``meta`` device, where ATen computes output shapes (its meta and
shape functions, the ones torch.export's fake tensors use) without allocating data. A step whose
op has no meta function, or whose output shape depends on the data (nonzero, unique), has no
shape here; its results are then bounded by what the blob declares, and checked after the kernel.
A meta function that fails on an empty input (upsample's, on an empty batch) is asked again with
the empty dims made 1: the kernel allocates along the other dims all the same.

torch is imported on the first evaluation, not with the runtime.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from conformance.api import dtype_name

OVERFLOW = "overflow"
"""What ``result_shapes`` returns for a step whose results ATen cannot even size: its shape rules
overflow (repeat's counts of 10**14: "Storage size calculation overflowed"). Nothing could hold them."""
CACHE_ENTRIES = 256
"""Shapes remembered per program: a step evaluated once per distinct input shape, not per execute."""


class Shapes:
    """Meta evaluation of a program's steps, remembered per (step, argument shapes)."""

    def __init__(self) -> None:
        self._cache: dict[tuple, tuple | None] = {}
        self._lock = threading.Lock()

    def of(self, index: int, op: str, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple | None:
        """(shape, bytes per element) of each of the step's results (None for a non-tensor result),
        None when ATen cannot tell them without running the op, OVERFLOW when they are past sizing."""
        try:
            key = (index, _signature(args), _signature(tuple(kwargs.items())))
        except TypeError:  # an argument we do not know how to key: evaluate, do not remember
            return result_shapes(op, args, kwargs)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        shapes = result_shapes(op, args, kwargs)
        with self._lock:
            if len(self._cache) < CACHE_ENTRIES:
                self._cache[key] = shapes
        return shapes


def _signature(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return ("T", value.shape, value.dtype.str)
    if isinstance(value, (list, tuple)):
        return tuple(_signature(v) for v in value)
    if isinstance(value, np.dtype):
        return ("D", value.str)
    hash(value)
    return (type(value).__name__, value)


def result_shapes(op: str, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple | None:
    overload = _overload(op)
    if overload is None:
        return None
    out = _evaluate(overload, args, kwargs, empty_as=0)
    if out is OVERFLOW:
        return OVERFLOW
    if out is None and _has_empty(args):
        # Some meta functions fail on an empty input where the CPU kernel does not (upsample's, on
        # an empty batch), yet the kernel allocates along the other dims (its index arrays): size
        # such a step as if its empty dims were 1. The runtime counts an empty result's other dims.
        out = _evaluate(overload, args, kwargs, empty_as=1)
    if out is None or out is OVERFLOW:
        return out
    import torch

    results = out if isinstance(out, (tuple, list)) else (out,)
    return tuple((tuple(int(d) for d in r.shape), r.element_size()) if isinstance(r, torch.Tensor) else None for r in results)


def _evaluate(overload, args: Sequence[Any], kwargs: dict[str, Any], *, empty_as: int) -> Any:
    import torch

    try:
        meta_args = [_to_meta(a, empty_as) for a in args]
        meta_kwargs = {k: _to_meta(v, empty_as) for k, v in kwargs.items()}
        if _takes_device(overload):
            meta_kwargs["device"] = torch.device("meta")
        # Any failure (no meta kernel, a data-dependent shape, arguments ATen rejects) means no
        # shape from here: the kernel decides, bounded by the declared results.
        return overload(*meta_args, **meta_kwargs)
    except Exception as exc:  # noqa: BLE001 - see above
        return OVERFLOW if "overflow" in str(exc).lower() else None


def _has_empty(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.size == 0
    if isinstance(value, (list, tuple)):
        return any(_has_empty(v) for v in value)
    return False


@cache
def _overload(op: str):
    """The ATen OpOverload of a kernel-table name ("aten.repeat.default"), or None."""
    namespace, _, rest = op.partition(".")
    name, _, overload = rest.partition(".")
    if namespace != "aten" or not name or not overload:
        return None
    import torch

    try:
        return getattr(getattr(torch.ops.aten, name), overload)
    except (AttributeError, RuntimeError):
        return None


@cache
def _takes_device(overload) -> bool:
    """Factory ops (arange, full, randperm, ...) take a device, which the blob does not carry."""
    return any(a.name == "device" for a in overload._schema.arguments)


def _to_meta(value: Any, empty_as: int = 0) -> Any:
    """A meta tensor for an array (its zero dims made ``empty_as``), torch's dtype for a dtype."""
    import torch

    if isinstance(value, np.ndarray):
        shape = tuple(n or empty_as for n in value.shape)
        return torch.empty(shape, dtype=_torch_dtype(value.dtype), device="meta")
    if isinstance(value, np.dtype):
        return _torch_dtype(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_to_meta(v, empty_as) for v in value]
    return value


@cache
def _torch_dtype(dtype: np.dtype):
    import torch

    return getattr(torch, dtype_name(dtype))
