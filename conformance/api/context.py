"""What the runtime lends a backend during init and execute, and its profiler hook.

Mirrors runtime/backend/backend_init_context.h, backend_execution_context.h and
the delegate half of runtime/core/event_tracer.h
(``event_tracer_start_profiling_delegate`` and friends, the seed's
RECORD_BACKEND_EVENT_TO_EDGE_PROFILER).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from .memory import MemoryAllocator
from .named_data import NamedDataMap


@dataclass(frozen=True)
class DelegateEvent:
    """One profiling event a backend reported."""

    name: str | None
    """A free-form event name, when the backend names events instead of numbering them."""
    delegate_debug_id: int | None
    """A key of the backend's ``debug_handle_map`` (the instruction that ran)."""
    start_ns: int
    end_ns: int
    metadata: bytes = b""


@dataclass
class EventTracerEntry:
    """Returned by ``start_profiling_delegate``; hand it back to ``end_profiling_delegate``."""

    name: str | None
    delegate_debug_id: int | None
    start_ns: int
    ended: bool = False


class EventTracer:
    """Receives delegate profiling events.

    As in ExecuTorch, an event is identified by exactly one of a name or a
    delegate debug id. Misuse (both, neither, a negative id, an end before its
    start, an entry ended twice) raises ``ValueError`` at the call, where the
    backend author can see it.
    """

    def __init__(self):
        self.events: list[DelegateEvent] = []

    @staticmethod
    def _check_identity(name: str | None, delegate_debug_id: int | None) -> None:
        if (name is None) == (delegate_debug_id is None):
            raise ValueError("EventTracer: give exactly one of name or delegate_debug_id")
        if name is not None and not isinstance(name, str):
            raise ValueError(f"EventTracer: name must be a str, got {type(name).__name__}")
        if delegate_debug_id is not None and (
            not isinstance(delegate_debug_id, int) or isinstance(delegate_debug_id, bool) or delegate_debug_id < 0
        ):
            raise ValueError(f"EventTracer: delegate_debug_id must be a non-negative int, got {delegate_debug_id!r}")

    def start_profiling_delegate(self, name: str | None = None, delegate_debug_id: int | None = None) -> EventTracerEntry:
        self._check_identity(name, delegate_debug_id)
        return EventTracerEntry(name, delegate_debug_id, time.perf_counter_ns())

    def end_profiling_delegate(self, entry: EventTracerEntry, metadata: bytes = b"") -> None:
        if not isinstance(entry, EventTracerEntry):
            raise ValueError("EventTracer: end_profiling_delegate needs the entry start_profiling_delegate returned")
        if entry.ended:
            raise ValueError("EventTracer: this entry was already ended")
        entry.ended = True
        self.events.append(
            DelegateEvent(entry.name, entry.delegate_debug_id, entry.start_ns, time.perf_counter_ns(), bytes(metadata))
        )

    def log_profiling_delegate(
        self,
        name: str | None,
        delegate_debug_id: int | None,
        start_ns: int,
        end_ns: int,
        metadata: bytes = b"",
    ) -> None:
        self._check_identity(name, delegate_debug_id)
        if not (isinstance(start_ns, int) and isinstance(end_ns, int)) or end_ns < start_ns:
            raise ValueError(f"EventTracer: bad event times start={start_ns!r} end={end_ns!r}")
        self.events.append(DelegateEvent(name, delegate_debug_id, start_ns, end_ns, bytes(metadata)))

    def clear(self) -> None:
        self.events.clear()


@dataclass
class BackendInitContext:
    """What ``init`` may use: an allocator for the handle's memory, named data, options."""

    runtime_allocator: MemoryAllocator
    event_tracer: EventTracer | None = None
    method_name: str | None = None
    named_data_map: NamedDataMap | None = None
    runtime_specs: Mapping[str, bool | int | str] = field(default_factory=dict)


@dataclass
class BackendExecutionContext:
    """What ``execute`` may use: scratch memory the runtime resets after the call, and the profiler."""

    temp_allocator: MemoryAllocator | None = None
    event_tracer: EventTracer | None = None
    method_name: str | None = None
