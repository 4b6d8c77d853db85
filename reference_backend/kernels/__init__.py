"""Vectorized NumPy kernels of the reference backend, one module per operator family.

Importing this package fills ``KERNELS`` (operators, by ATen overload name and
Edge-dialect spelling), ``ALTERNATIVES`` (eager's other accepted result, where its paths differ)
and ``GRAPH_OPS`` (symbolic-size plumbing).
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
from ._registry import ALTERNATIVES, EDGE_ALIASES, GRAPH_OPS, KERNELS, alternative, kernel

__all__ = ["ALTERNATIVES", "EDGE_ALIASES", "GRAPH_OPS", "KERNELS", "alternative", "kernel"]
