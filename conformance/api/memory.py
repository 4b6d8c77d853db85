"""Buffers a runtime hands to a backend, and the allocators it lends it.

``FreeableBuffer`` mirrors runtime/core/freeable_buffer.h: the processed blob and
named data reach ``init`` through one, and the runtime may free it right after
``init`` returns. Freeing here is observable: the bytes are overwritten with a
poison pattern, as a debug allocator would, so a backend that kept a view of the
processed buffer instead of copying what it needs computes garbage and is caught.

``MemoryAllocator`` mirrors runtime/core/memory_allocator.h: a bump allocator over
a fixed region that returns ``None`` (nullptr) when it is exhausted.
"""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Callable

POISON_BYTE = 0xDD


def _is_power_of_two(n: int) -> bool:
    return isinstance(n, int) and n > 0 and (n & (n - 1)) == 0


class FreeableBuffer:
    """Read-only bytes a backend may use until it calls ``free()``.

    ``data`` is a read-only memoryview. ``free()`` is idempotent; ``data`` after
    ``free()`` raises ``ValueError``, like a released memoryview.
    """

    def __init__(
        self,
        data: bytes | bytearray | memoryview,
        free_fn: Callable[[], None] | None = None,
        *,
        alignment: int = 1,
    ):
        # Own a private copy so that freeing can poison it without touching the caller's bytes.
        size = len(memoryview(data).cast("B"))
        if alignment > 1:
            region = MemoryAllocator(size + alignment)
            storage = region.allocate(size, alignment)
            if storage is None:
                raise ValueError(f"FreeableBuffer: alignment must be a power of two, got {alignment!r}")
            storage[:] = data
            self._region: MemoryAllocator | None = region
        else:
            storage = bytearray(data)
            self._region = None
        self._storage: bytearray | memoryview | None = storage
        self._view = memoryview(storage).toreadonly()
        self._free_fn = free_fn
        self.size = size

    @property
    def data(self) -> memoryview:
        if self._storage is None:
            raise ValueError("FreeableBuffer.data accessed after free()")
        return self._view

    @property
    def freed(self) -> bool:
        return self._storage is None

    def free(self) -> None:
        if self._storage is None:
            return
        storage = self._storage
        self._storage = None
        storage[:] = bytes([POISON_BYTE]) * len(storage)
        self._region = None
        if self._free_fn is not None:
            self._free_fn()

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        state = "freed" if self.freed else "live"
        return f"FreeableBuffer(size={self.size}, {state})"


class MemoryAllocator:
    """A bump allocator over ``capacity`` bytes.

    ``allocate`` returns a writable memoryview whose address is a multiple of
    ``alignment``, or ``None`` when the request does not fit or the alignment is
    not a power of two, as ExecuTorch's allocator returns nullptr. The region is an
    anonymous mapping, so a large capacity costs nothing until it is used.
    """

    def __init__(self, capacity: int):
        if not isinstance(capacity, int) or capacity < 0:
            raise ValueError(f"MemoryAllocator: capacity must be a non-negative int, got {capacity!r}")
        self.capacity = capacity
        self._region = mmap.mmap(-1, max(capacity, 1))
        self._base = memoryview(self._region)
        self._address = ctypes.addressof(ctypes.c_char.from_buffer(self._region))
        self.used = 0
        self.peak = 0
        self.num_allocations = 0
        self.num_failures = 0

    def allocate(self, nbytes: int, alignment: int = 16) -> memoryview | None:
        if not isinstance(nbytes, int) or nbytes < 0 or not _is_power_of_two(alignment):
            self.num_failures += 1
            return None
        start = self.used
        misalignment = (self._address + start) % alignment
        if misalignment:
            start += alignment - misalignment
        end = start + nbytes
        if end > self.capacity:
            self.num_failures += 1
            return None
        self.used = end
        self.peak = max(self.peak, end)
        self.num_allocations += 1
        return self._base[start:end]

    def reset(self) -> None:
        """Release every allocation at once (the runtime does this to the temp allocator after execute)."""
        self.used = 0

    @property
    def available(self) -> int:
        return self.capacity - self.used

    def __repr__(self) -> str:
        return f"MemoryAllocator(capacity={self.capacity}, used={self.used}, peak={self.peak})"
