"""The backend contract: a Python mirror of the ExecuTorch delegate interface.

Importable on its own (it needs NumPy and ml_dtypes, not torch or the harness).
Adapters and third-party backends are written against these names.
"""

from .backend import PARTIAL_DELEGATION, BackendDetails, BackendInterface, CompileSpec, PreprocessResult
from .certification import LATITUDES, BackendUnderTest, BlobVersionField, Manifest, ToleranceLoosening
from .context import (
    BackendExecutionContext,
    BackendInitContext,
    DelegateEvent,
    EventTracer,
    EventTracerEntry,
)
from .errors import BackendError, Error
from .evalue import EValue, Tag, resize_tensor
from .lazy import LazyBackendHooks, LazyDeviceList
from .memory import FreeableBuffer, MemoryAllocator
from .named_data import DataEntry, NamedDataMap, NamedDataStore, NamedDataStoreOutput
from .registry import (
    MAX_BACKENDS,
    Backend,
    BackendRegistry,
    default_registry,
    get_backend_class,
    get_backend_name,
    get_num_registered_backends,
    register_backend,
)
from .scalar_type import DTYPE_NAMES, ScalarType, dtype_name, numpy_dtype

__all__ = [
    "MAX_BACKENDS",
    "DTYPE_NAMES",
    "LATITUDES",
    "PARTIAL_DELEGATION",
    "Backend",
    "BackendDetails",
    "BackendError",
    "BackendExecutionContext",
    "BackendInitContext",
    "BackendInterface",
    "BackendRegistry",
    "BackendUnderTest",
    "BlobVersionField",
    "CompileSpec",
    "DataEntry",
    "DelegateEvent",
    "EValue",
    "Error",
    "EventTracer",
    "EventTracerEntry",
    "FreeableBuffer",
    "LazyBackendHooks",
    "LazyDeviceList",
    "Manifest",
    "MemoryAllocator",
    "NamedDataMap",
    "NamedDataStore",
    "NamedDataStoreOutput",
    "PreprocessResult",
    "ScalarType",
    "Tag",
    "ToleranceLoosening",
    "default_registry",
    "dtype_name",
    "get_backend_class",
    "get_backend_name",
    "get_num_registered_backends",
    "numpy_dtype",
    "register_backend",
    "resize_tensor",
]
