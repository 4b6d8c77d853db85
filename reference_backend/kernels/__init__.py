"""Vectorized NumPy kernels of the reference backend, one module per operator family.

Importing this package fills ``KERNELS`` (operators, by ATen overload name and
Edge-dialect spelling) and ``GRAPH_OPS`` (symbolic-size plumbing).
"""

from . import (  # noqa: F401  (registration by import)
    activation,
    backward,
    binary,
    conv,
    creation,
    fft,
    graph,
    indexing,
    linalg,
    normalization,
    padding,
    pooling,
    quantized,
    random,
    reduction,
    shape,
    sorting,
    unary,
    upsample,
)
from ._registry import EDGE_ALIASES, GRAPH_OPS, KERNELS, kernel

__all__ = ["EDGE_ALIASES", "GRAPH_OPS", "KERNELS", "kernel"]
