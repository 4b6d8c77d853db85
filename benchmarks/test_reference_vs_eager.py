"""Reference kernels against PyTorch eager on the same inputs (nox -s bench).

Each case is timed twice in one run, once per implementation, in the same
pytest-benchmark group; summarize.py turns the medians into ratios
(reference / eager), their geometric mean and the worst case. The targets
(geomean <= 2.0, no case above 5.0) are reported there, never asserted in a test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from reference_backend.kernels import KERNELS

K = KERNELS
RNG = np.random.default_rng(0)


def randn(*shape):
    return RNG.standard_normal(shape, dtype=np.float32)


def _attention_reference(q, k, v):
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = K["aten.mul.Tensor"](K["aten.bmm.default"](q, K["aten.permute.default"](k, [0, 2, 1])), scale)
    return K["aten.bmm.default"](K["aten._softmax.default"](scores, -1, False), v)


def _attention_eager(q, k, v):
    scale = 1.0 / math.sqrt(q.shape[-1])
    return torch.bmm(torch.softmax(torch.bmm(q, k.transpose(1, 2)) * scale, dim=-1), v)


def _cases():
    a, b = randn(512, 512), randn(512, 512)
    x_conv, w_conv, b_conv = randn(1, 64, 56, 56), randn(64, 64, 3, 3), randn(64)
    big1, big2 = randn(1_000_000), randn(1_000_000)
    logits = randn(1024, 1024)
    ln_x, ln_w, ln_b = randn(64, 1024), randn(1024), randn(1024)
    pool_x = randn(1, 64, 112, 112)
    q, k, v = randn(8, 128, 64), randn(8, 128, 64), randn(8, 128, 64)
    t = torch.from_numpy
    return {
        "matmul 512x512": (
            lambda: K["aten.mm.default"](a, b),
            lambda: torch.mm(t(a), t(b)),
        ),
        "conv2d 1x64x56x56 3x3": (
            lambda: K["aten.convolution.default"](x_conv, w_conv, b_conv, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
            lambda: F.conv2d(t(x_conv), t(w_conv), t(b_conv), padding=1),
        ),
        "add 1M": (lambda: K["aten.add.Tensor"](big1, big2), lambda: torch.add(t(big1), t(big2))),
        "mul 1M": (lambda: K["aten.mul.Tensor"](big1, big2), lambda: torch.mul(t(big1), t(big2))),
        "softmax 1024x1024": (
            lambda: K["aten._softmax.default"](logits, -1, False),
            lambda: torch.softmax(t(logits), dim=-1),
        ),
        "layer_norm 64x1024": (
            lambda: K["aten.native_layer_norm.default"](ln_x, [1024], ln_w, ln_b, 1e-5),
            lambda: F.layer_norm(t(ln_x), [1024], t(ln_w), t(ln_b), 1e-5),
        ),
        "max_pool2d 1x64x112x112 k3 s2": (
            lambda: K["aten.max_pool2d_with_indices.default"](pool_x, [3, 3], [2, 2], [1, 1], [1, 1], False),
            lambda: F.max_pool2d(t(pool_x), 3, 2, 1),
        ),
        "attention 8x128x64": (
            lambda: _attention_reference(q, k, v),
            lambda: _attention_eager(t(q), t(k), t(v)),
        ),
    }


CASES = _cases()


@pytest.mark.parametrize("implementation", ["reference", "eager"])
@pytest.mark.parametrize("case", list(CASES))
def test_speed(benchmark, case, implementation):
    reference, eager = CASES[case]
    benchmark.group = case
    benchmark.extra_info["case"] = case
    benchmark.extra_info["implementation"] = implementation
    with torch.no_grad():
        benchmark(reference if implementation == "reference" else eager)
