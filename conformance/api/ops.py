"""Names of graph targets, the way specs, manifests and reports spell them.

``aten.add.Tensor`` for an ATen overload (Edge-dialect overloads included),
``sym.mul`` for the Python operators torch.export emits on symbolic sizes.
Works on the target objects without importing torch.
"""

from __future__ import annotations

import math
import operator
from typing import Any

_PYTHON_OPS = {
    operator.add: "sym.add",
    operator.sub: "sym.sub",
    operator.mul: "sym.mul",
    operator.floordiv: "sym.floordiv",
    operator.truediv: "sym.truediv",
    operator.mod: "sym.mod",
    operator.pow: "sym.pow",
    operator.neg: "sym.neg",
    operator.eq: "sym.eq",
    operator.ne: "sym.ne",
    operator.lt: "sym.lt",
    operator.le: "sym.le",
    operator.gt: "sym.gt",
    operator.ge: "sym.ge",
    operator.and_: "sym.and",
    operator.or_: "sym.or",
    operator.not_: "sym.not",
    operator.getitem: "getitem",
    math.ceil: "sym.ceil",
    math.floor: "sym.floor",
}


def op_name(target: Any) -> str:
    """A stable name for an FX ``call_function`` target."""
    if target in _PYTHON_OPS:
        return _PYTHON_OPS[target]
    inner = getattr(target, "_op", None)  # EdgeOpOverload wraps an OpOverload
    schema = getattr(target, "_schema", None) or getattr(inner, "_schema", None)
    if schema is not None:
        namespace, _, name = schema.name.partition("::")
        overload = schema.overload_name or "default"
        return f"{namespace}.{name}.{overload}"
    module = getattr(target, "__module__", None) or ""
    qualname = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    if module.startswith("torch") and qualname.startswith("sym_"):
        return f"sym.{qualname[4:]}"
    return f"{module}.{qualname}" if module else qualname
