"""FreeableBuffer, MemoryAllocator, NamedDataStore/NamedDataMap, EventTracer."""

import numpy as np
import pytest

from conformance.api import (
    BackendError,
    Error,
    EventTracer,
    FreeableBuffer,
    MemoryAllocator,
    NamedDataMap,
    NamedDataStore,
)
from conformance.api.memory import POISON_BYTE


def address(view: memoryview) -> int:
    return np.frombuffer(view, dtype=np.uint8).ctypes.data


def test_freeable_buffer_free_is_idempotent_and_poisons_retained_views():
    source = bytes(range(8))
    buf = FreeableBuffer(source)
    kept = buf.data  # a backend that keeps a view instead of copying
    assert bytes(kept) == source and buf.size == 8
    buf.free()
    buf.free()
    assert buf.freed
    with pytest.raises(ValueError):
        _ = buf.data
    assert bytes(kept) == bytes([POISON_BYTE]) * 8
    assert source == bytes(range(8))  # the caller's bytes are untouched


def test_freeable_buffer_is_read_only_and_honours_alignment():
    buf = FreeableBuffer(b"abc", alignment=64)
    assert address(buf.data) % 64 == 0
    with pytest.raises(TypeError):
        buf.data[0] = 1


def test_allocator_aligns_tracks_use_and_returns_none_when_exhausted():
    alloc = MemoryAllocator(256)
    a = alloc.allocate(10, alignment=64)
    b = alloc.allocate(10, alignment=64)
    assert address(a) % 64 == 0 and address(b) % 64 == 0 and address(b) > address(a)
    assert alloc.num_allocations == 2 and alloc.used >= 74
    assert alloc.allocate(1000) is None
    assert alloc.allocate(8, alignment=3) is None  # not a power of two
    assert alloc.num_failures == 2
    alloc.reset()
    assert alloc.used == 0 and alloc.peak >= 74
    assert MemoryAllocator(0).allocate(1) is None
    assert MemoryAllocator(0).allocate(0) is not None


def test_named_data_store_dedups_and_refuses_conflicts():
    store = NamedDataStore()
    store.add_named_data("w", b"1234", alignment=16)
    store.add_named_data("w", b"1234", alignment=64)
    with pytest.raises(ValueError, match="different data"):
        store.add_named_data("w", b"9999")
    with pytest.raises(ValueError):
        store.add_named_data("", b"x")
    with pytest.raises(ValueError):
        store.add_named_data("k", b"x", alignment=24)
    out = store.get_named_data_store_output()
    assert out.entries["w"].alignment == 64


def test_named_data_map_returns_aligned_buffers_and_not_found():
    store = NamedDataStore()
    store.add_named_data("b", b"bb", alignment=128)
    store.add_named_data("a", b"a")
    data = NamedDataMap(store.get_named_data_store_output())
    buf = data.get_data("b")
    assert bytes(buf.data) == b"bb" and address(buf.data) % 128 == 0
    assert data.get_num_keys() == 2 and [data.get_key(i) for i in range(2)] == ["a", "b"]
    with pytest.raises(BackendError) as err:
        data.get_data("missing")
    assert err.value.error is Error.NotFound
    assert data.requested == ["b", "missing"]
    with pytest.raises(BackendError):
        data.get_key(2)


def test_event_tracer_records_events_and_refuses_misuse():
    tracer = EventTracer()
    entry = tracer.start_profiling_delegate(delegate_debug_id=3)
    tracer.end_profiling_delegate(entry, b"meta")
    tracer.log_profiling_delegate("conv", None, 10, 20)
    assert [(e.name, e.delegate_debug_id) for e in tracer.events] == [(None, 3), ("conv", None)]
    assert tracer.events[0].end_ns >= tracer.events[0].start_ns and tracer.events[0].metadata == b"meta"
    with pytest.raises(ValueError):
        tracer.end_profiling_delegate(entry)
    with pytest.raises(ValueError):
        tracer.start_profiling_delegate("x", 1)
    with pytest.raises(ValueError):
        tracer.start_profiling_delegate()
    with pytest.raises(ValueError):
        tracer.log_profiling_delegate(None, -1, 0, 1)
    with pytest.raises(ValueError):
        tracer.log_profiling_delegate(None, 1, 5, 4)
