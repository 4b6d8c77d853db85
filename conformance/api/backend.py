"""The two halves of a backend: ahead-of-time ``BackendDetails`` and runtime ``BackendInterface``.

Mirrors exir/backend/backend_details.py and runtime/backend/interface.h.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import Error
from .memory import FreeableBuffer
from .named_data import NamedDataStoreOutput

if TYPE_CHECKING:  # torch is only needed by whoever calls preprocess
    from torch.export import ExportedProgram

    from .context import BackendExecutionContext, BackendInitContext
    from .evalue import EValue


@dataclass(frozen=True)
class CompileSpec:
    """One compile-time option: a key and opaque bytes."""

    key: str
    value: bytes

    def __post_init__(self):
        if not isinstance(self.key, str) or not self.key:
            raise ValueError(f"CompileSpec: key must be a non-empty str, got {self.key!r}")
        if isinstance(self.value, (bytearray, memoryview)):
            object.__setattr__(self, "value", bytes(self.value))
        if not isinstance(self.value, bytes):
            raise TypeError(f"CompileSpec {self.key!r}: value must be bytes, got {type(self.value).__name__}")


PARTIAL_DELEGATION = CompileSpec("conformance.partial_delegation", b"1")
"""The compile spec by which the whole-program checks ask a backend that declares
``BackendUnderTest.partial_delegation`` to take part of a program (see there)."""


@dataclass
class PreprocessResult:
    """What preprocess returns.

    ``debug_handle_map`` maps an id the runtime will report (an instruction, a
    kernel) to the debug handles of the source nodes it came from.
    """

    processed_bytes: bytes = b""
    debug_handle_map: dict[int, tuple[int, ...]] | dict[str, tuple[int, ...]] | None = None
    data_store_output: NamedDataStoreOutput | None = None


class BackendDetails(ABC):
    """Ahead-of-time half: lowers an exported program to a processed blob."""

    @staticmethod
    @abstractmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        """Turn ``edge_program`` into a blob. Must not modify ``edge_program``."""

    @classmethod
    def preprocess_multimethod(
        cls,
        edge_programs: Mapping[str, list[ExportedProgram]],
        compile_specs: Mapping[str, list[list[CompileSpec]]],
    ) -> dict[str, list[PreprocessResult]]:
        """Preprocess every partition of every method; result[m][i] belongs to edge_programs[m][i].

        The seed's default: one ``preprocess`` call per partition. Backends that
        share data across partitions override this.
        """
        missing = [m for m in edge_programs if m not in compile_specs]
        if missing:
            raise ValueError(f"preprocess_multimethod: no compile specs for method(s) {missing}")
        results: dict[str, list[PreprocessResult]] = {}
        for method, programs in edge_programs.items():
            specs = compile_specs[method]
            if len(specs) != len(programs):
                raise ValueError(
                    f"preprocess_multimethod: method {method!r} has {len(programs)} partition(s) "
                    f"but {len(specs)} compile spec list(s); give one list per partition"
                )
            results[method] = [cls.preprocess(program, spec) for program, spec in zip(programs, specs)]
        return results


class BackendInterface(ABC):
    """Runtime half: init a handle from a blob, execute it, destroy it.

    ``init`` and ``execute`` report failure by raising ``BackendError``, the only
    exception they may raise; ``execute`` may also return a non-Ok ``Error``.
    ``execute`` receives the method's inputs followed by pre-allocated outputs,
    which it writes in place.
    """

    @abstractmethod
    def is_available(self) -> bool:
        """Whether the hardware or library this backend needs is present."""

    @abstractmethod
    def init(self, context: BackendInitContext, processed: FreeableBuffer, compile_specs: list[CompileSpec]) -> Any:
        """Build a handle from the processed blob. The runtime may free ``processed`` afterwards."""

    @abstractmethod
    def execute(self, context: BackendExecutionContext, handle: Any, args: list[EValue]) -> Error:
        """Run ``handle`` on ``args`` (inputs then outputs); return ``Error.Ok`` on success.

        Input tensors may have any of the strides of ``conformance.api.tensors.INPUT_LAYOUTS``
        (transposed, offset and strided, channels-last): read them through their strides.
        Outputs are preallocated C-contiguous arrays the backend writes in place.
        """

    def destroy(self, handle: Any) -> None:  # noqa: B027 - a no-op default, as in the seed
        """Release everything ``handle`` holds. The default does nothing, as ExecuTorch's
        ``BackendInterface::destroy`` does: a backend whose handle owns nothing beyond Python
        objects need not override it (RT-016 still measures what init leaves behind)."""

    def set_option(self, options: Mapping[str, bool | int | str]) -> Error:
        return Error.Ok

    def get_option(self, options: dict[str, bool | int | str]) -> Error:
        return Error.Ok
