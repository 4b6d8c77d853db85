"""The FakeTensor values of an op's outputs in a program the harness builds.

FakeTensorMode runs an op on FakeTensors as torch.export's tracing does; where the op's outputs
follow from its inputs' metadata alone, its meta kernel runs on meta tensors instead (cheaper, the
same outputs: tests/harness/test_programs.py holds every op to it) and its outputs are remembered
by what they follow from.
"""

from __future__ import annotations

import collections
import functools
from typing import Any

from conformance.compat import torch as compat_torch
from conformance.programs.operators import outputs_follow_from_inputs


def meta_kernel(op):
    """What FakeTensorMode runs for ``op`` on CPU FakeTensors, as a function of meta tensors that gives
    the same outputs, or None where no such function stands in for it (``compat.torch.meta_kernel``)."""
    return compat_torch.meta_kernel(op, fake_mode(), outputs_follow_from_inputs(op))


def fake_outputs(mode, op, args: tuple, kwargs: dict):
    """The FakeTensor outputs of ``op`` on the fake values of the nodes in ``args``/``kwargs``
    (what ``with mode: op(*fakes)`` gives: tests/harness/test_programs.py compares with torch.export)."""
    import torch
    import torch.utils._pytree as pytree

    fakes = []

    def to_fake(a):
        if isinstance(a, torch.fx.Node):
            fakes.append(a.meta["val"])
            return a.meta["val"]
        return a

    fake_args, fake_kwargs = pytree.tree_map(to_fake, args), pytree.tree_map(to_fake, kwargs)
    kernel = meta_kernel(op)
    if fakes and all(f.device.type == "cpu" for f in fakes) and kernel is not None:
        convert = compat_torch.fake_from_meta
        cpu = torch.device("cpu")
        # The outputs follow from the inputs' metadata and the other arguments alone (meta_kernel):
        # a call repeating them repeats its outputs (the edge set's calls of one shape differ in values).
        key = metadata_key(op, fake_args, fake_kwargs)
        known = _META_OUTPUTS.get(key) if key is not None else None
        if known is not None:
            _META_OUTPUTS.move_to_end(key)
            return pytree.tree_map_only(torch.Tensor, lambda t: convert(mode, t, cpu), known)
        metas: dict[int, Any] = {}

        def to_meta(a):
            if isinstance(a, torch.fx.Node):
                val = a.meta["val"]
                if id(val) not in metas:
                    metas[id(val)] = torch.empty_strided(
                        tuple(val.shape), tuple(val.stride()), dtype=val.dtype, device="meta"
                    ).as_strided(tuple(val.shape), tuple(val.stride()), val.storage_offset())
                return metas[id(val)]
            return a

        try:
            out = kernel(*pytree.tree_map(to_meta, args), **pytree.tree_map(to_meta, kwargs))
            if isinstance(out, tuple) and type(out) is not tuple:
                # a decomposition's named tuple (return_types_log_sigmoid_forward): through the
                # dispatcher, as under FakeTensorMode, the op returns a plain one (a program's output
                # spec must be one torch.export.save can write)
                out = tuple(out)
        except Exception:  # noqa: BLE001 - FakeTensorMode below raises its own error, or decides otherwise
            out = None
        else:
            leaves = pytree.tree_leaves(out)
            if all(
                isinstance(t, torch.Tensor) and t.device.type == "meta" and all(t is not m for m in metas.values())
                for t in leaves
                if isinstance(t, torch.Tensor)
            ):
                if key is not None:
                    _META_OUTPUTS[key] = out
                    if len(_META_OUTPUTS) > 4096:
                        _META_OUTPUTS.popitem(last=False)
                return pytree.tree_map_only(torch.Tensor, lambda t: convert(mode, t, cpu), out)
    with mode:
        if op._schema.is_mutable:
            # An op that mutates its argument (resize_ resizes it) must not change the placeholder's
            # own value: torch.export's input keeps the shape it was given.
            fake_args, fake_kwargs = pytree.tree_map_only(torch.Tensor, torch.clone, (fake_args, fake_kwargs))
        return op(*fake_args, **fake_kwargs)


_META_OUTPUTS: collections.OrderedDict[tuple, Any] = collections.OrderedDict()
"""The meta outputs ``fake_outputs`` computed last (4,096 calls), by ``metadata_key``."""


def metadata_key(op, args, kwargs) -> tuple | None:
    """What the outputs of a call of ``op`` (one whose outputs follow from its inputs' metadata and its
    other arguments) follow from: each tensor's sizes, strides, offset and dtype, every other value as
    itself and its type (1, 1.0 and True differ). None where a value cannot be a key."""
    import torch

    def part(a):
        if isinstance(a, torch.Tensor):
            return (tuple(a.shape), tuple(a.stride()), a.storage_offset(), a.dtype)
        if isinstance(a, (list, tuple)):
            return (type(a), tuple(part(x) for x in a))
        if isinstance(a, float):
            return (float, repr(a))  # NaN equals nothing, -0.0 equals 0.0: their text tells them apart
        return (type(a), a)

    try:
        key = (op, part(args), tuple((k, part(v)) for k, v in sorted(kwargs.items())))
        hash(key)
    except TypeError:
        return None
    return key


@functools.cache
def fake_mode():
    """One FakeTensorMode for every built program: creating one costs more than building a program.

    Its dispatch cache stays on: the drawn calls themselves hardly ever repeat (481 distinct among
    493 meta kernel calls of a shard), but the ops of a Python decomposition do (upsample_bicubic2d's
    meta outputs took 43 ms a call without the cache, 13 ms with it)."""
    return compat_torch.fake_tensor_mode()


def symbolic_fake_mode():
    """A FakeTensorMode with its own ShapeEnv, for one program whose output is data-dependent (a Scalar
    read from the data, a size computed from it): a fresh one each time, so the program's symbol is u0
    (zuf0 for a float), as torch.export names it."""
    return compat_torch.fake_tensor_mode(symbolic=True)
