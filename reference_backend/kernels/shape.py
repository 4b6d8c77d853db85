"""Shape and view ops: view, permute, expand, slice, select, squeeze, cat, split, pad, flip, ...

PyTorch's view ops (view, permute, expand, slice, select, squeeze, unsqueeze,
split, unbind, unfold, diagonal) return NumPy views here; their Edge-dialect
``_copy`` spellings share the kernel because the runtime copies every result.
Ops that are not views in PyTorch (cat, repeat, flip, roll, constant_pad_nd,
tril, pixel_shuffle) return fresh arrays.

Dimension arguments accept negative spellings and wrap like ATen's
``maybe_wrap_dim`` (c10/core/WrapDimMinimal.h): a 0-d tensor accepts dims 0 and
-1 where the op wraps scalars. Argument checks follow
aten/src/ATen/native/TensorShape.cpp and raise where ATen raises.
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ._dtypes import promote_types
from ._registry import kernel


def wrap_dim(dim: int, ndim: int, *, wrap_scalar: bool = True) -> int:
    """ATen's maybe_wrap_dim: ``dim`` in [-ndim, ndim) made non-negative."""
    if ndim <= 0:
        if not wrap_scalar:
            raise IndexError(f"dimension specified as {dim} but tensor has no dimensions")
        ndim = 1
    if not -ndim <= dim < ndim:
        raise IndexError(f"dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {dim})")
    return dim % ndim


def wrap_dims(dims, ndim: int) -> tuple[int, ...]:
    """A list of dims wrapped, refusing repeats (ATen's dim_list_to_bitset)."""
    wrapped = tuple(wrap_dim(d, ndim) for d in dims)
    if len(set(wrapped)) != len(wrapped):
        raise ValueError(f"dims {list(dims)}: a dim appears multiple times in the list of dims")
    return wrapped


def along(dim: int, index) -> tuple:
    """An index tuple selecting ``index`` in ``dim``; the trailing Ellipsis keeps 0-d results arrays."""
    return (slice(None),) * dim + (index, Ellipsis)


def normalize_slice(start, end, step) -> slice:
    """slice.Tensor's bounds: None, negative and out-of-range values clamp like Python slicing.

    ATen (TensorShape.cpp, slice) wraps a negative start/end once, then clamps both to
    [0, size] and end to >= start: exactly Python's rule for a positive step.
    """
    if step <= 0:
        raise ValueError(f"slice step must be positive, got {step}")
    return slice(start, end, step)


def _infer_size(size, numel: int) -> tuple[int, ...]:
    """aten/src/ATen/InferSize.h: at most one -1, inferred from the element count."""
    size = [int(s) for s in size]
    infer = None
    known = 1
    for i, s in enumerate(size):
        if s == -1:
            if infer is not None:
                raise ValueError("view: only one dimension can be inferred")
            infer = i
        elif s < 0:
            raise ValueError(f"view: invalid shape dimension {s} at index {i} of shape {size}")
        else:
            known *= s
    if numel == known or (infer is not None and known > 0 and numel % known == 0):
        if infer is not None:
            if known == 0:
                raise ValueError(
                    f"view: cannot reshape a tensor of 0 elements into shape {size}: "
                    "the dimension -1 could be any value"
                )
            size[infer] = numel // known
        return tuple(size)
    raise ValueError(f"view: shape {size} is invalid for input of size {numel}")


@kernel("aten.view.default", "aten._unsafe_view.default", edge=("aten.view_copy.default",))
def view(self, size):
    return np.reshape(self, _infer_size(size, self.size))


@kernel("aten.permute.default", edge=("aten.permute_copy.default",))
def permute(self, dims):
    if len(dims) != self.ndim:
        raise ValueError(f"permute: {len(dims)} dims given for a tensor of rank {self.ndim}")
    return np.transpose(self, wrap_dims(dims, self.ndim)) if self.ndim else self


@kernel("aten.expand.default", edge=("aten.expand_copy.default",))
def expand(self, size, *, implicit=False):
    """Broadcast to ``size``; -1 keeps an existing size (ExpandUtils.cpp, inferExpandGeometry)."""
    size = [int(s) for s in size]
    lead = len(size) - self.ndim
    if lead < 0:
        raise ValueError(f"expand: {len(size)} sizes given, fewer than the tensor's {self.ndim} dimensions")
    out = []
    for i, s in enumerate(size):
        if i < lead:
            if s < 0:
                raise ValueError(f"expand: size {s} is not allowed in a leading, non-existing dimension {i}")
            out.append(s)
            continue
        current = self.shape[i - lead]
        if s == -1:
            s = current
        elif s < 0:
            raise ValueError(f"expand: invalid size {s}")
        elif current != s and current != 1:
            raise ValueError(f"expand: size {s} must match the existing size {current} at non-singleton dimension {i}")
        out.append(s)
    return np.broadcast_to(self, tuple(out))


@kernel("aten.slice.Tensor", edge=("aten.slice_copy.Tensor",))
def slice_(self, dim=0, start=None, end=None, step=1):
    if self.ndim == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor")
    d = wrap_dim(dim, self.ndim)
    return self[along(d, normalize_slice(start, end, step))]


def _check_index(self, d: int, index: int, op: str) -> int:
    size = self.shape[d]
    if not -size <= index < size:
        raise IndexError(f"{op}: index {index} out of range for tensor of size {list(self.shape)} at dimension {d}")
    return index % size


@kernel("aten.select.int", edge=("aten.select_copy.int",))
def select(self, dim, index):
    if self.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor")
    d = wrap_dim(dim, self.ndim)
    return self[along(d, _check_index(self, d, index, "select"))]


def _squeeze(self, dims):
    axes = tuple(d for d in dims if self.ndim and self.shape[d] == 1)
    return np.squeeze(self, axis=axes) if axes else self


@kernel("aten.squeeze.dims", edge=("aten.squeeze_copy.dims",))
def squeeze_dims(self, dim):
    return _squeeze(self, wrap_dims(dim, self.ndim))


@kernel("aten.squeeze.dim", edge=("aten.squeeze_copy.dim",))
def squeeze_dim(self, dim):
    return _squeeze(self, (wrap_dim(dim, self.ndim),))


@kernel("aten.squeeze.default", edge=("aten.squeeze_copy.default",))
def squeeze(self):
    return _squeeze(self, range(self.ndim))


@kernel("aten.unsqueeze.default", edge=("aten.unsqueeze_copy.default",))
def unsqueeze(self, dim):
    return np.expand_dims(self, wrap_dim(dim, self.ndim + 1))


def _common_dtype(tensors, op: str) -> np.dtype:
    if not tensors:
        raise ValueError(f"{op}: expected a non-empty list of tensors")
    return functools.reduce(promote_types, (t.dtype for t in tensors))


def _converted(tensors, dtype: np.dtype) -> list[np.ndarray]:
    """Inputs in the promoted dtype (large integers become inf in float16, as in ATen's copy)."""
    with np.errstate(over="ignore"):
        return [t.astype(dtype, copy=False) for t in tensors]


@kernel("aten.cat.default")
def cat(tensors, dim=0):
    """Concatenation with type promotion over every input (TensorShape.cpp, cat_meta).

    ATen's legacy rule skips 1-d empty tensors (shape [0]) in the shape checks and the
    output, whatever the other ranks, but they still take part in type promotion; the
    dim wraps against the first tensor that is not skipped.
    """
    dtype = _common_dtype(tensors, "cat")
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise ValueError(f"cat: zero-dimensional tensor (at position {i}) cannot be concatenated")
    parts = [t for t in tensors if t.shape != (0,)]
    if not parts:
        return np.empty((0,), dtype)
    d = wrap_dim(dim, parts[0].ndim)
    ref = parts[0].shape
    for t in parts:
        if t.ndim != len(ref) or any(a != b for k, (a, b) in enumerate(zip(t.shape, ref)) if k != d):
            raise ValueError(f"cat: sizes of tensors must match except in dimension {d}: {list(ref)} vs {list(t.shape)}")
    return np.concatenate(_converted(parts, dtype), axis=d)


@kernel("aten.stack.default")
def stack(tensors, dim=0):
    dtype = _common_dtype(tensors, "stack")
    ref = tensors[0].shape
    for t in tensors:
        if t.shape != ref:
            raise ValueError(f"stack expects each tensor to be equal size, but got {list(ref)} and {list(t.shape)}")
    d = wrap_dim(dim, len(ref) + 1)
    return np.stack(_converted(tensors, dtype), axis=d)


def _split_at(self, sizes, d: int) -> tuple[np.ndarray, ...]:
    bounds = np.cumsum([0, *sizes])
    return tuple(self[along(d, slice(int(a), int(b)))] for a, b in zip(bounds[:-1], bounds[1:]))


@kernel("aten.split_with_sizes.default", edge=("aten.split_with_sizes_copy.default",))
def split_with_sizes(self, split_sizes, dim=0):
    if self.ndim == 0:
        raise ValueError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, self.ndim)
    if any(s < 0 for s in split_sizes):
        raise ValueError(f"split_with_sizes expects non-negative split_sizes, got {list(split_sizes)}")
    if sum(split_sizes) != self.shape[d]:
        raise ValueError(
            f"split_with_sizes expects split_sizes to sum exactly to {self.shape[d]} "
            f"(the size of dimension {d}), got {list(split_sizes)}"
        )
    return _split_at(self, split_sizes, d)


@kernel("aten.split.Tensor", edge=("aten.split_copy.Tensor",))
def split(self, split_size, dim=0):
    """Chunks of ``split_size``, the last one smaller; at least one chunk (TensorShape.cpp, split)."""
    if self.ndim == 0:
        raise ValueError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, self.ndim)
    size = self.shape[d]
    if split_size < 0 or (split_size == 0 and size != 0):
        raise ValueError(f"split: split_size {split_size} is invalid for dimension size {size}")
    count = max(-(-size // split_size), 1) if split_size else 1
    sizes = [split_size] * (count - 1) + [size - split_size * (count - 1)]
    return _split_at(self, sizes, d)


@kernel("aten.unbind.int", edge=("aten.unbind_copy.int",))
def unbind(self, dim=0):
    d = wrap_dim(dim, self.ndim, wrap_scalar=False)
    return tuple(self[along(d, i)] for i in range(self.shape[d]))


@kernel("aten.repeat.default")
def repeat(self, repeats):
    if len(repeats) < self.ndim:
        raise ValueError("repeat: number of repeat dims can not be smaller than the number of tensor dims")
    if any(r < 0 for r in repeats):
        raise ValueError(f"repeat: negative repeats {list(repeats)}")
    counts = tuple(int(r) for r in repeats)
    if 0 in counts:
        # np.tile repeats one dim at a time, so the counts before a 0 would be paid for in full
        # (65536 copies of 8 KiB: 512 MiB) for an empty result; ATen allocates the result alone.
        shape = (1,) * (len(counts) - self.ndim) + self.shape
        return np.empty(tuple(n * r for n, r in zip(shape, counts)), self.dtype)
    return np.tile(self, counts)


@kernel("aten.flip.default")
def flip(self, dims):
    axes = wrap_dims(dims, self.ndim)
    if self.ndim == 0 or not axes:
        return self.copy()
    return np.flip(self, axis=axes).copy()


@kernel("aten.roll.default")
def roll(self, shifts, dims=()):
    """Rolls along ``dims``; with no dims the flattened tensor rolls (TensorTransformations.cpp)."""
    if not shifts:
        raise ValueError("roll: `shifts` required")
    if not dims:
        if len(shifts) != 1:
            raise ValueError(f"roll: shifts and dimensions must align: {len(shifts)} shifts, 0 dims")
        return np.roll(self.reshape(-1), int(shifts[0])).reshape(self.shape)
    if len(shifts) != len(dims):
        raise ValueError(f"roll: shifts and dimensions must align: {len(shifts)} shifts, {len(dims)} dims")
    axes = tuple(wrap_dim(d, self.ndim, wrap_scalar=False) for d in dims)
    return np.roll(self, tuple(int(s) for s in shifts), axis=axes)


@kernel("aten.constant_pad_nd.default")
def constant_pad_nd(self, pad, value=0):
    """Pads (or, for negative pads, crops) the last len(pad)/2 dims, last dim first (PadNd.cpp).

    ATen crops first with narrow(), which refuses a negative length even when the
    positive pad on the other side would make the final size non-negative.
    """
    from .creation import scalar_to

    if len(pad) % 2:
        raise ValueError(f"constant_pad_nd: length of pad must be even, got {len(pad)}")
    if len(pad) > 2 * self.ndim:
        raise ValueError(f"constant_pad_nd: {len(pad)} pads for a tensor of rank {self.ndim}")
    fill = scalar_to(value, self.dtype, "constant_pad_nd value")
    crop = [slice(None)] * self.ndim
    shape = list(self.shape)
    dst = [slice(None)] * self.ndim
    for i in range(len(pad) // 2):
        d = self.ndim - 1 - i
        left, right = int(pad[2 * i]), int(pad[2 * i + 1])
        size = self.shape[d]
        kept = size + min(left, 0) + min(right, 0)
        if kept < 0:
            raise ValueError(
                f"constant_pad_nd: the input size {size}, plus negative padding {left} and {right}, "
                "resulted in a negative size"
            )
        crop[d] = slice(max(-left, 0), max(-left, 0) + kept)
        dst[d] = slice(max(left, 0), max(left, 0) + kept)
        shape[d] = size + left + right
    out = np.full(shape, fill, dtype=self.dtype)
    out[tuple(dst)] = self[tuple(crop)]
    return out


@kernel("aten.unfold.default", edge=("aten.unfold_copy.default",))
def unfold(self, dimension, size, step):
    """Windows of ``size`` every ``step`` along ``dimension``, appended as the last dim."""
    d = wrap_dim(dimension, self.ndim)
    if step <= 0:
        raise ValueError(f"unfold: step is {step} but must be > 0")
    if size < 0:
        raise ValueError(f"unfold: size is {size} but must be >= 0")
    if self.ndim == 0:
        if size > 1:
            raise ValueError(f"unfold: maximum size for a 0-d tensor is 1 but size is {size}")
        return self.reshape(1)[:size]
    if size > self.shape[d]:
        raise ValueError(f"unfold: maximum size for tensor at dimension {d} is {self.shape[d]} but size is {size}")
    # as_strided goes through __array_interface__, whose typestr ("<f1") NumPy cannot read back for float8
    raw = self.view(f"u{self.dtype.itemsize}") if self.dtype.name.startswith("float8") else self
    windows = sliding_window_view(raw, size, axis=d)[along(d, slice(None, None, step))]
    return windows.view(self.dtype) if raw is not self else windows


@kernel("aten.diagonal.default", edge=("aten.diagonal_copy.default",))
def diagonal(self, offset=0, dim1=0, dim2=1):
    d1, d2 = wrap_dim(dim1, self.ndim), wrap_dim(dim2, self.ndim)
    if d1 == d2:
        raise ValueError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return np.diagonal(self, offset, d1, d2)


def _triangle(self, diagonal: int, upper: bool, op: str):
    """Zeroes (not multiplies, so NaN and Inf go too) outside the triangle (TriangularOps.cpp)."""
    if self.ndim < 2:
        raise ValueError(f"{op}: input tensor must have at least 2 dimensions")
    rows, cols = self.shape[-2:]
    keep = ~np.tri(rows, cols, diagonal - 1, dtype=bool) if upper else np.tri(rows, cols, diagonal, dtype=bool)
    return np.where(keep, self, np.zeros((), self.dtype))


@kernel("aten.tril.default")
def tril(self, diagonal=0):
    return _triangle(self, diagonal, False, "tril")


@kernel("aten.triu.default")
def triu(self, diagonal=0):
    return _triangle(self, diagonal, True, "triu")


def _check_shuffle_factor(self, factor: int, op: str) -> None:
    if self.ndim < 3:
        raise ValueError(f"{op} expects input to have at least 3 dimensions, but got {self.ndim}")
    if factor <= 0:
        raise ValueError(f"{op} expects a positive factor, but got {factor}")


@kernel("aten.pixel_shuffle.default")
def pixel_shuffle(self, upscale_factor):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r) (PixelShuffle.cpp)."""
    r = upscale_factor
    _check_shuffle_factor(self, r, "pixel_shuffle")
    *batch, c, h, w = self.shape
    if c % (r * r):
        raise ValueError(f"pixel_shuffle: channels {c} not divisible by upscale_factor^2 = {r * r}")
    n = len(batch)
    x = self.reshape(*batch, c // (r * r), r, r, h, w)
    x = x.transpose(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return np.ascontiguousarray(x).reshape(*batch, c // (r * r), h * r, w * r)


@kernel("aten.pixel_unshuffle.default")
def pixel_unshuffle(self, downscale_factor):
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W), the inverse of pixel_shuffle."""
    r = downscale_factor
    _check_shuffle_factor(self, r, "pixel_unshuffle")
    *batch, c, h, w = self.shape
    if h % r or w % r:
        raise ValueError(f"pixel_unshuffle: height {h} and width {w} must be divisible by downscale_factor {r}")
    n = len(batch)
    x = self.reshape(*batch, c, h // r, r, w // r, r)
    x = x.transpose(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return np.ascontiguousarray(x).reshape(*batch, c * r * r, h // r, w // r)


@kernel("aten.copy.default")
def copy(self, src):
    """The functional ``self.copy_(src)``: src converted to self's dtype with _to_copy's rules
    (c10::convert: floats truncate into integers, half types are built from float32, anything
    becomes bool as x != 0) and broadcast to self's shape; self contributes its shape and dtype,
    never its values (Copy.cpp, copy_impl). non_blocking, a placement argument, changes nothing on
    CPU and is not passed to kernels (a program spells it only when true, which the signature never
    draws)."""
    from .unary import _to_copy

    target = np.asarray(self)
    converted = _to_copy(np.asarray(src), dtype=target.dtype)
    try:
        return np.array(np.broadcast_to(converted, target.shape))
    except ValueError:
        raise ValueError(f"copy: src of shape {list(np.shape(src))} does not broadcast to self's shape {list(target.shape)}") from None


@kernel("aten.as_strided.default", edge=("aten.as_strided_copy.default",))
def as_strided(self, size, stride, storage_offset=None):
    """Element [i0, i1, ...] of the result is element offset + i0 * stride[0] + i1 * stride[1] + ...
    of self's storage. A program describes its inputs as fresh contiguous tensors, so that storage
    is self's elements in row-major order, and offset None means self's own offset, 0. ATen refuses
    negative sizes and strides, and a view that reaches past the storage (TensorImpl set_sizes_and_strides,
    checkInBoundsForStorage); strides of 0 and overlapping elements are allowed."""
    flat = np.asarray(self).reshape(-1)
    size, stride = [int(n) for n in size], [int(n) for n in stride]
    offset = 0 if storage_offset is None else int(storage_offset)
    if len(size) != len(stride):
        raise ValueError(f"as_strided: mismatch in length of strides and shape ({len(stride)} vs {len(size)})")
    if any(n < 0 for n in size) or any(n < 0 for n in stride) or offset < 0:
        raise ValueError(f"as_strided: negative size, stride or offset: {size}, {stride}, {offset}")
    if 0 in size:
        return np.empty(size, flat.dtype)
    last = offset + sum((n - 1) * st for n, st in zip(size, stride))
    if last >= flat.size:
        raise IndexError(
            f"as_strided: sizes {size}, strides {stride} and storage offset {offset} need a storage of "
            f"{last + 1} elements; self has {flat.size}"
        )
    index = np.full((1,) * len(size), offset, np.int64)
    for axis, (n, st) in enumerate(zip(size, stride)):
        index = index + (np.arange(n, dtype=np.int64) * st).reshape((1,) * axis + (n,) + (1,) * (len(size) - axis - 1))
    return np.asarray(flat[index])  # a 0-d view stays a 0-d array, not a NumPy scalar
