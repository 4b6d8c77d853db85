"""PyTorch eager's result of a call, and whether it may describe a program's outputs."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from conformance.api.ops import op_name
from conformance.call import Call
from conformance.programs.operators import mutated_values, resolve_op, returns_fresh_tensors


def eager(call: Call) -> tuple[np.ndarray, ...]:
    """PyTorch eager's result of ``call``, as NumPy arrays."""
    return eager_outputs(call).arrays


@dataclass(frozen=True)
class EagerOutputs:
    """What eager returned for a call: the op's own return value (tensors, with their strides)
    and its tensors as NumPy arrays."""

    returned: Any
    arrays: tuple[np.ndarray | None, ...]
    """The op's outputs in schema order (None where it left one undefined), then the arguments it
    mutated, as they are after the call (``mutated_values``)."""


def eager_outputs(call: Call) -> EagerOutputs:
    """PyTorch eager's result of ``call``: as returned (``build_program(call, like=...)`` takes it) and as arrays."""
    from conformance.api.tensors import to_numpy

    args, kwargs = call.torch_args()
    op = resolve_op(call.op)
    out = op(*args, **kwargs)
    mutated = tuple(to_numpy(t) for t in mutated_values(op, args, kwargs))
    if isinstance(out, (list, tuple)):
        return EagerOutputs(out, tuple(None if o is None else to_numpy(o) for o in out) + mutated)
    return EagerOutputs(out, (to_numpy(out),) + mutated)


EAGER_LAYS_OUT_AS_META = frozenset(
    {
        "aten.grid_sampler_2d.default",
        "aten.upsample_bicubic2d.vec",
        "aten.upsample_bilinear2d.vec",
        "aten.upsample_trilinear3d.vec",
        "aten.upsample_linear1d.vec",
        "aten.embedding_dense_backward.default",
        "aten._pdist_forward.default",
    }
)
"""Ops whose eager CPU kernels lay out their outputs as PyTorch's meta kernel does in every call, dims of
size 1 and empty outputs included (tests/harness/test_programs.py holds each to it, call by call, in
every dtype of its spec), and whose meta kernel is a long Python decomposition: eager describes all of
their outputs (``eager_describes_outputs``). A bicubic grid_sampler_2d's meta outputs cost 20 ms."""


@functools.cache
def _lays_out_as_meta(op) -> bool:
    return op_name(op) in EAGER_LAYS_OUT_AS_META


def eager_describes_outputs(op, returned) -> bool:
    """Whether eager's return value ``returned`` of ``op`` may describe a program's outputs
    (``build_program(call, like=returned)``): fresh CPU tensors of an op that makes fresh tensors,
    none empty and none with a dim of size 1. The strides of such dims say nothing of the layout,
    and there eager and the meta kernel often differ (in 307 of 33,242 calls of a full profile, all
    of them there; elsewhere they agreed on every stride), while a backend may still read them
    (ExecuTorch derives a dim order from strides, and refuses a stride of 0). The ops of
    ``EAGER_LAYS_OUT_AS_META`` are described whatever their outputs' sizes."""
    import torch

    leaves = returned if isinstance(returned, (list, tuple)) else (returned,)
    if not returns_fresh_tensors(op):
        return False
    any_size = _lays_out_as_meta(op)
    return all(
        isinstance(t, torch.Tensor)
        and t.device.type == "cpu"
        and t.storage_offset() == 0
        and (any_size or (t.numel() > 0 and 1 not in t.shape))
        for t in leaves
    )
