"""A drawn operator call: the op, its arguments, and the tensors in them: the core record of a
numerics case.

The strategies (conformance.strategies) draw it; the same ``Call`` feeds the reference kernel
and torch eager, the program builder (``conformance.programs.program_for`` builds the single-op
program that makes exactly this call), the case core (``conformance.case``), the replay format
(``to_json``/``from_json``, conformance.replay) and the reports (``describe``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from conformance.api.scalar_type import dtype_name
from conformance.api.tensors import to_torch

ROLES = ("input", "parameter")
DTYPE_ATTRIBUTES = ("dtype", "out_dtype")
"""Keyword attributes whose values are dtypes, spelled by name ("float16") in a Call."""


@dataclass(frozen=True, eq=False)
class Tensor:
    """A tensor argument: a program input, or a parameter baked into the program."""

    value: np.ndarray
    role: str = "input"

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"Tensor role must be one of {ROLES}, got {self.role!r}")

    @property
    def dtype(self) -> str:
        return dtype_name(self.value.dtype)

    def describe(self) -> str:
        mark = "param " if self.role == "parameter" else ""
        return f"{mark}{self.dtype}{list(self.value.shape)}"


def _map(arg: Any, fn: Callable[[Tensor], Any]) -> Any:
    if isinstance(arg, Tensor):
        return fn(arg)
    if isinstance(arg, (list, tuple)):
        return type(arg)(_map(a, fn) for a in arg)
    return arg


def _walk(arg: Any, out: list[Tensor]) -> None:
    if isinstance(arg, Tensor):
        out.append(arg)
    elif isinstance(arg, (list, tuple)):
        for a in arg:
            _walk(a, out)


def _literal(value: Any) -> Any:
    """A hashable spelling of an attribute value for structure keys."""
    if isinstance(value, float) and value != value:
        return ("nan",)
    if isinstance(value, (list, tuple)):
        return tuple(_literal(v) for v in value)
    if isinstance(value, np.dtype):
        return ("dtype", dtype_name(value))
    return value


@dataclass(frozen=True, eq=False)
class Call:
    """``op(*args, **kwargs)`` with Tensor placeholders for every tensor argument.

    Attribute values that are dtypes (``DTYPE_ATTRIBUTES``) are spelled as dtype names ("float16"),
    which ``numpy_args`` and ``torch_args`` turn into each library's dtype.
    """

    op: str
    args: tuple
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def tensors(self) -> list[Tensor]:
        out: list[Tensor] = []
        _walk(self.args, out)
        _walk(tuple(self.kwargs.values()), out)
        return out

    def inputs(self) -> list[Tensor]:
        return [t for t in self.tensors() if t.role == "input"]

    def features(self) -> list[str]:
        """What a backend may refuse about this call, in the words of ``Manifest.refuses``:
        "empty", "0-d", "rank N" (its highest input rank), "mixed dtypes", "broadcasting",
        "large" (an input of 65,536 elements or more), "one-tensor list" (a Tensor[] argument
        holding a single tensor: cat or stack of one)."""
        tensors = self.tensors()
        out = []
        if any(t.value.size == 0 for t in tensors):
            out.append("empty")
        if any(t.value.ndim == 0 for t in tensors):
            out.append("0-d")
        if tensors:
            out.append(f"rank {max(t.value.ndim for t in tensors)}")
        if len({t.value.dtype.name for t in tensors}) > 1:
            out.append("mixed dtypes")
        inputs = [t for t in tensors if t.role == "input"]
        if len({t.value.shape for t in inputs}) > 1:
            try:  # shapes that differ and broadcast together (a matmul's operands differ by nature)
                np.broadcast_shapes(*(t.value.shape for t in inputs))
                out.append("broadcasting")
            except ValueError:
                pass
        if any(t.value.size >= 65_536 for t in tensors):
            out.append("large")
        lists = [a for a in (*self.args, *self.kwargs.values()) if isinstance(a, (list, tuple)) and a and all(isinstance(x, Tensor) for x in a)]
        if any(len(a) == 1 for a in lists):
            out.append("one-tensor list")
        return out

    def numpy_args(self) -> tuple[tuple, dict]:
        from conformance.api.scalar_type import numpy_dtype

        def conv(a):
            return a.value

        args = _map(self.args, conv)
        kwargs = {k: _map(v, conv) for k, v in self.kwargs.items()}
        kwargs = {k: numpy_dtype(v) if k in DTYPE_ATTRIBUTES and isinstance(v, str) else v for k, v in kwargs.items()}
        return args, kwargs

    def torch_args(self) -> tuple[tuple, dict]:
        from conformance.api.scalar_type import torch_dtype

        resizable = self.op.split(".")[-2].endswith("_")  # an in-place op (resize_) may grow its input
        args = _map(self.args, lambda t: to_torch(t.value, resizable=resizable))
        kwargs = {k: _map(v, lambda t: to_torch(t.value, resizable=resizable)) for k, v in self.kwargs.items()}
        kwargs = {k: torch_dtype(v) if k in DTYPE_ATTRIBUTES and isinstance(v, str) else v for k, v in kwargs.items()}
        return args, kwargs

    def structure(self, dynamic: bool) -> tuple:
        """What a program for this call depends on: everything except input values.

        With ``dynamic``, input sizes are left open (-1): the program is exported
        with dynamic, size-oblivious dimensions, so only ranks, dtypes, parameter
        shapes and attributes tell two programs apart.
        """

        def key(t: Tensor):
            shape = t.value.shape
            if dynamic and t.role == "input":
                shape = (-1,) * len(shape)
            return ("T", t.dtype, tuple(shape), t.role)

        return (
            self.op,
            _literal(_map(self.args, key)),
            tuple(sorted((k, _literal(_map(v, key))) for k, v in self.kwargs.items())),
        )

    def describe(self) -> str:
        def show(a: Any) -> str:
            if isinstance(a, Tensor):
                return a.describe()
            if isinstance(a, (list, tuple)):
                inner = ", ".join(show(x) for x in a)
                return f"[{inner}]"
            return repr(a)

        parts = [show(a) for a in self.args] + [f"{k}={show(v)}" for k, v in self.kwargs.items()]
        return f"{self.op}({', '.join(parts)})"

    # -- serialization for replays ------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The call with tensors as references ``{"tensor": i, ...}`` into ``tensors()`` order."""
        tensors = self.tensors()
        index = {id(t): i for i, t in enumerate(tensors)}

        def enc(a: Any) -> Any:
            if isinstance(a, Tensor):
                return {"tensor": index[id(a)], "role": a.role, "dtype": a.dtype, "shape": list(a.value.shape)}
            if isinstance(a, float) and (a != a or a in (float("inf"), float("-inf"))):
                return {"float": str(a)}
            if isinstance(a, (list, tuple)):
                return {"list" if isinstance(a, list) else "tuple": [enc(x) for x in a]}
            return a

        return {"op": self.op, "args": [enc(a) for a in self.args], "kwargs": {k: enc(v) for k, v in self.kwargs.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Call:
        """Inverse of ``to_json``; ``arrays["tensor<i>"]`` hold the values (bfloat16 and float8 as
        unsigned integers of their width: npz cannot hold ml_dtypes' types)."""
        from conformance.api.scalar_type import numpy_dtype

        def dec(a: Any) -> Any:
            if isinstance(a, dict):
                if "tensor" in a:
                    value = np.asarray(arrays[f"tensor{a['tensor']}"])
                    if value.dtype != numpy_dtype(a["dtype"]):
                        value = value.view(numpy_dtype(a["dtype"]))
                    return Tensor(value.reshape(a["shape"]), a["role"])
                if "float" in a:
                    return float(a["float"])
                if "list" in a:
                    return [dec(x) for x in a["list"]]
                if "tuple" in a:
                    return tuple(dec(x) for x in a["tuple"])
            return a

        return cls(data["op"], tuple(dec(a) for a in data["args"]), {k: dec(v) for k, v in data["kwargs"].items()})

