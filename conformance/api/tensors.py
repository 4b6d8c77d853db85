"""Moving tensors between torch and NumPy, bfloat16 included (torch.Tensor.numpy refuses it)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

_BF16 = np.dtype(ml_dtypes.bfloat16)


def to_numpy(tensor) -> np.ndarray:
    """A torch tensor's values as a contiguous NumPy array that owns or shares nothing mutable."""
    import torch

    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(_BF16)
    return tensor.numpy()


def to_torch(array: np.ndarray):
    """A NumPy array as a torch tensor (a copy, so torch never writes into the caller's array)."""
    import torch

    array = np.array(array, order="C", copy=True)  # ascontiguousarray would turn 0-d into 1-d
    if array.dtype == _BF16:
        tensor = torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    else:
        tensor = torch.from_numpy(array)
    if array.size == 0:
        # NumPy gives an empty array all-zero strides, which torch never gives a fresh tensor;
        # torch.export records them, ExecuTorch's exporter refuses them ("0 in strides is not
        # supported") and its runtime aborts on them (tensor_ptr.cpp). Use torch's own strides.
        tensor = tensor.clone(memory_format=torch.contiguous_format)
    return tensor
