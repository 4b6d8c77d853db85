"""The reference CPU backend: the yardstick every backend is measured with.

``ReferenceBackend.preprocess`` lowers a core-ATen ExportedProgram to a
versioned blob (``blob``); ``ReferenceRuntime`` runs it with vectorized NumPy
kernels (``kernels``). It is certified through the same entry point as any
third-party backend, under the name ``reference``.
"""

from __future__ import annotations

from .blob import FORMAT_VERSION, VERSION_OFFSET, VERSION_SIZE
from .kernels import KERNELS
from .preprocess import ReferenceBackend
from .runtime import ReferenceRuntime

__version__ = "0.1.0"
BACKEND_NAME = "reference"


def supported_ops() -> frozenset[str]:
    """Every ATen overload the reference computes (Edge-dialect spellings included)."""
    return frozenset(KERNELS)


def backend_under_test():
    """The reference as a ``BackendUnderTest``: it claims every op it has a kernel for, in every dtype."""
    from conformance.api import BackendUnderTest, BlobVersionField, Manifest

    return BackendUnderTest(
        name=BACKEND_NAME,
        details=ReferenceBackend,
        runtime=ReferenceRuntime(),
        version=f"{__version__} (blob format {FORMAT_VERSION})",
        manifest=Manifest(
            ops={op: "*" for op in sorted(KERNELS)},
            blob_version=BlobVersionField(offset=VERSION_OFFSET, size=VERSION_SIZE, current=FORMAT_VERSION),
        ),
        description="NumPy reference backend of the conformance suite",
    )


__all__ = ["BACKEND_NAME", "ReferenceBackend", "ReferenceRuntime", "backend_under_test", "supported_ops"]
