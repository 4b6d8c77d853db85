"""The kernel table: ATen overload name -> NumPy function.

A kernel is a pure function of NumPy arrays and Python attributes whose
parameter names are the ATen schema's, so the runtime can pass a node's
arguments positionally or by keyword exactly as the graph spelled them. It
returns an array (or a tuple of arrays for multi-output ops) with PyTorch's
result dtype and shape.
"""

from __future__ import annotations

from collections.abc import Callable

Kernel = Callable[..., object]

KERNELS: dict[str, Kernel] = {}
"""Every operator the reference computes, under each name it accepts."""

EDGE_ALIASES: dict[str, str] = {}
"""Edge-dialect spellings (``aten.view_copy.default``) -> the core ATen name they compute."""

GRAPH_OPS: dict[str, Kernel] = {}
"""Graph plumbing that is not an operator: symbolic-size arithmetic and runtime asserts."""

ALTERNATIVES: dict[str, Kernel] = {}
"""Where eager's own paths compute an op two ways (its vectorized loop and its scalar tail), the
other accepted result: a kernel with the op's signature and outputs. The reference's kernel is the
expected value; an element equal to the alternative's passes too (conformance.oracle.compare)."""


def alternative(*names: str) -> Callable[[Kernel], Kernel]:
    """Register ``fn`` as the other accepted result of ATen overloads ``names`` (``ALTERNATIVES``)."""

    def register(fn: Kernel) -> Kernel:
        for name in names:
            if name in ALTERNATIVES:
                raise RuntimeError(f"alternative of {name} registered twice")
            ALTERNATIVES[name] = fn
        return fn

    return register


def kernel(*names: str, edge: tuple[str, ...] = ()) -> Callable[[Kernel], Kernel]:
    """Register ``fn`` under ATen overload ``names`` and Edge-dialect spellings ``edge``."""

    def register(fn: Kernel) -> Kernel:
        for name in (*names, *edge):
            if name in KERNELS:
                raise RuntimeError(f"kernel {name} registered twice ({KERNELS[name].__name__} and {fn.__name__})")
            KERNELS[name] = fn
        for name in edge:
            EDGE_ALIASES[name] = names[0]
        return fn

    return register


def graph_op(*names: str) -> Callable[[Kernel], Kernel]:
    def register(fn: Kernel) -> Kernel:
        for name in names:
            if name in GRAPH_OPS:
                raise RuntimeError(f"graph op {name} registered twice")
            GRAPH_OPS[name] = fn
        return fn

    return register
