"""Moving tensors between torch and NumPy, bfloat16 and float8 included (torch.Tensor.numpy refuses them:
they cross as their bits)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

_BY_BITS = {  # ml_dtypes dtype name -> (torch dtype name, the NumPy integer of the same width)
    "bfloat16": ("bfloat16", np.int16),
    "float8_e4m3fn": ("float8_e4m3fn", np.uint8),
    "float8_e5m2": ("float8_e5m2", np.uint8),
}


def to_numpy(tensor) -> np.ndarray:
    """A torch tensor's values as a contiguous NumPy array that owns or shares nothing mutable; a
    Python scalar (what an op returning ``Scalar`` gives: _local_scalar_dense) as the NumPy scalar
    of its kind, bool, int64 or float64 (a ``np.generic``, which a program output holds as a Bool,
    Int or Double EValue)."""
    import torch

    if isinstance(tensor, (bool, int, float)):
        return np.bool_(tensor) if isinstance(tensor, bool) else np.int64(tensor) if isinstance(tensor, int) else np.float64(tensor)
    tensor = tensor.detach().cpu().contiguous()
    name = str(tensor.dtype).removeprefix("torch.")
    if name in _BY_BITS:
        bits = np.dtype(_BY_BITS[name][1])
        return tensor.view(getattr(torch, bits.name)).numpy().view(getattr(ml_dtypes, name))
    return tensor.numpy()


def to_torch(array: np.ndarray, *, resizable: bool = False):
    """A NumPy array as a torch tensor (a copy, so torch never writes into the caller's array).

    ``resizable``: in storage torch owns, so that an in-place op may grow it as in eager (resize_; a
    tensor over a NumPy buffer raises "Trying to resize storage that is not resizable"); it costs a
    second copy, so only in-place calls ask for it."""
    import torch

    array = np.array(array, order="C", copy=True)  # ascontiguousarray would turn 0-d into 1-d
    if array.dtype.name in _BY_BITS:
        torch_name, bits = _BY_BITS[array.dtype.name]
        tensor = torch.from_numpy(array.view(bits)).view(getattr(torch, torch_name))
    else:
        tensor = torch.from_numpy(array)
    if array.size == 0 or resizable:
        # NumPy gives an empty array all-zero strides, which torch never gives a fresh tensor;
        # torch.export records them, ExecuTorch's exporter refuses them ("0 in strides is not
        # supported") and its runtime aborts on them (tensor_ptr.cpp). The clone has torch's own.
        tensor = tensor.clone(memory_format=torch.contiguous_format)
    return tensor


INPUT_LAYOUTS = ("contiguous", "transposed", "offset", "channels_last")
"""The memory layouts in which a backend receives input tensors (specs/interface.toml, NUM-001).

An input EValue is a NumPy array whose strides need not be C-contiguous: ``transposed``
(dims stored in reverse order, what a permute hands on), ``offset`` (a view that starts
past the beginning of its buffer and steps over every other element of its last dim, what a
slice hands on), and ``channels_last`` for 4-d tensors (NCHW logically, NHWC in memory:
ExecuTorch's dim order (0, 2, 3, 1), what XNNPACK and most NPUs run). Strides are
positive. A backend reads inputs through their strides (np.ascontiguousarray does); it
never reinterprets the buffer. Outputs are preallocated C-contiguous. The NUM check hands each
tensor operand of a call in each layout in turn, the others contiguous (``one_strided``): a kernel
that walks every operand with the first one's strides is right whenever they share a layout.
"""


Layout = str | tuple[str, ...]
"""How a call's inputs reach a backend: one of INPUT_LAYOUTS for every input, or one per input
(``("contiguous", "transposed")``: the second operand alone strided)."""


def input_layouts(layout: Layout, count: int) -> tuple[str, ...]:
    """``layout`` as one layout per input, for ``count`` inputs."""
    if isinstance(layout, str):
        return (layout,) * count
    layouts = tuple(layout)
    if len(layouts) != count:
        raise ValueError(f"{len(layouts)} input layouts {list(layouts)} for {count} inputs")
    unknown = [name for name in layouts if name not in INPUT_LAYOUTS]
    if unknown:
        raise ValueError(f"unknown layout(s) {unknown}; known: {INPUT_LAYOUTS}")
    return layouts


def one_strided(layout: str, index: int, count: int) -> tuple[str, ...]:
    """Input ``index`` of ``count`` in ``layout``, every other one contiguous."""
    return tuple(layout if i == index else "contiguous" for i in range(count))


def describe_layout(layout: Layout) -> str:
    """"transposed" (every input), "input 1 transposed" (one input), "contiguous"."""
    if isinstance(layout, str):
        return layout
    strided = [(i, name) for i, name in enumerate(layout) if name != "contiguous"]
    if not strided:
        return "contiguous"
    if len(strided) == len(layout) and len({name for _, name in strided}) == 1:
        return strided[0][1]
    return ", ".join(f"input {i} {name}" for i, name in strided)


def layout_applies(array: np.ndarray, layout: str) -> bool:
    """Whether ``layout`` gives ``array`` strides different from C-contiguous ones."""
    if layout == "contiguous":
        return True
    nontrivial = sum(1 for s in array.shape if s > 1)
    if layout == "channels_last":
        return array.ndim == 4 and array.size > 0 and array.shape[1] > 1 and array.shape[2] * array.shape[3] > 1
    if layout == "transposed":
        return nontrivial >= 2
    return array.ndim >= 1 and array.size > 0


def with_layout(array: np.ndarray, layout: str) -> np.ndarray:
    """The values of ``array`` in a fresh buffer laid out as ``layout`` (see INPUT_LAYOUTS).

    Arrays the layout does not apply to come back as a C-contiguous copy.
    """
    array = np.asarray(array)
    if not layout_applies(array, layout) or layout == "contiguous":
        return np.array(array, order="C", copy=True)
    if layout == "transposed":
        out = np.empty(array.shape[::-1], array.dtype).T
    elif layout == "channels_last":
        n, c, h, w = array.shape
        out = np.empty((n, h, w, c), array.dtype).transpose(0, 3, 1, 2)
    elif layout == "offset":
        wide = np.empty(array.shape[:-1] + (2 * array.shape[-1] + 1,), array.dtype)
        out = wide[..., 1::2]
    else:
        raise ValueError(f"unknown layout {layout!r}; known: {INPUT_LAYOUTS}")
    out[...] = array
    return out
