"""A zoo of small real-world models, for certifying a backend on whole models, not single ops.

The contract programs (``checks/_support``) prove the runtime contract on the smallest
models that exercise it; the op checks prove each operator alone. Neither shows that a
backend gets a real network right end to end: tens to hundreds of ops chained, errors
compounding through BatchNorm, residual adds, attention and recurrences. These models do.

Each one is the topology of a well-known architecture (an MLP, LeNet-5, MobileNetV2,
ResNet-18, a Transformer encoder layer, multi-head attention, a GRU and an LSTM, a text
classifier, a UNet block) written here in code with reduced widths and random weights:
no download, no torchvision, a few seconds for the whole zoo. A builder returns
``(module.eval(), inputs)``: weights from ``torch.manual_seed``, BatchNorm running stats
and affine parameters drawn so that no BatchNorm is an identity, and inputs (a tuple of
NumPy arrays, float32 except the text classifier's int64 token ids) from a seeded
``np.random.default_rng``, so a model is the same on every machine and every run.

``model_program(name)`` exports a model once with static shapes (torch.export, then
core-ATen decompositions, through the program cache: on disk, keyed by the sources of the
builder and of the helpers builders share, so an edited builder is a new program) and returns
it with its inputs, the set of ops it holds and its depth (operator nodes on the longest
input-to-output path).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from conformance.programs.cache import ProgramCache
from conformance.programs.modules import ModuleProgram, module_program


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _mlp():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 64),
        torch.nn.GELU(),
        torch.nn.Linear(64, 10),
    )
    return model.eval(), (_rng(10).standard_normal((4, 32), np.float32),)


def _lenet():
    import torch

    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2),  # 28x28 in, as LeNet-5's 32x32 with the border padded away
        nn.Tanh(),
        nn.AvgPool2d(2),
        nn.Conv2d(6, 16, 5),
        nn.Tanh(),
        nn.AvgPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120),
        nn.Tanh(),
        nn.Linear(120, 84),
        nn.Tanh(),
        nn.Linear(84, 10),
    )
    return model.eval(), (_rng(11).standard_normal((2, 1, 28, 28), np.float32),)


def _mobilenet_v2():
    import torch

    nn = torch.nn

    def conv_bn(cin, cout, kernel, stride=1, groups=1, act=True):
        layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
        return layers + [nn.ReLU6()] if act else layers

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            hidden = cin * expand
            self.residual = stride == 1 and cin == cout
            self.block = nn.Sequential(
                *conv_bn(cin, hidden, 1),  # expand
                *conv_bn(hidden, hidden, 3, stride, groups=hidden),  # depthwise
                *conv_bn(hidden, cout, 1, act=False),  # project (linear bottleneck)
            )

        def forward(self, x):
            return x + self.block(x) if self.residual else self.block(x)

    class MobileNetV2(nn.Module):
        def __init__(self, classes=10):
            super().__init__()
            self.features = nn.Sequential(
                *conv_bn(3, 16, 3, stride=2),  # stem
                InvertedResidual(16, 16, 1, 4),
                InvertedResidual(16, 24, 2, 4),
                InvertedResidual(24, 24, 1, 4),
                InvertedResidual(24, 32, 2, 4),
            )
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Linear(32, classes)

        def forward(self, x):
            return self.classifier(torch.flatten(self.pool(self.features(x)), 1))

    torch.manual_seed(0)
    model = MobileNetV2()
    vary_batch_norms(model)
    return model.eval(), (_rng(12).standard_normal((1, 3, 32, 32), np.float32),)


def _resnet18():
    import torch

    nn = torch.nn

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = torch.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            identity = x if self.downsample is None else self.downsample(x)
            return torch.relu(out + identity)

    class ResNet18(nn.Module):
        def __init__(self, widths=(8, 16, 32, 64), classes=10):
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, widths[0], 7, 2, 3, bias=False),
                nn.BatchNorm2d(widths[0]),
                nn.ReLU(),
                nn.MaxPool2d(3, 2, 1),
            )
            stages, cin = [], widths[0]
            for i, width in enumerate(widths):
                stride = 1 if i == 0 else 2
                stages += [BasicBlock(cin, width, stride), BasicBlock(width, width, 1)]
                cin = width
            self.stages = nn.Sequential(*stages)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(cin, classes)

        def forward(self, x):
            return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))

    torch.manual_seed(0)
    model = ResNet18()
    vary_batch_norms(model)
    return model.eval(), (_rng(13).standard_normal((1, 3, 32, 32), np.float32),)


def _transformer_encoder():
    import torch

    torch.manual_seed(0)
    model = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
    return model.eval(), (_rng(14).standard_normal((2, 8, 32), np.float32),)


def _multihead_attention():
    import torch

    class SelfAttention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, x):
            return self.attn(x, x, x, need_weights=False)[0]

    torch.manual_seed(0)
    return SelfAttention().eval(), (_rng(15).standard_normal((2, 8, 32), np.float32),)


def _gru():
    import torch

    return _recurrent_head(torch.nn.GRU, 16)


def _lstm():
    import torch

    return _recurrent_head(torch.nn.LSTM, 17)


def _recurrent_head(rnn, seed: int):
    """Two stacked ``rnn`` layers (torch.nn.GRU or LSTM) and a linear head on the last step's output,
    on an input drawn with ``seed``."""
    import torch

    class RecurrentHead(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = rnn(8, 16, num_layers=2, batch_first=True)
            self.head = torch.nn.Linear(16, 4)

        def forward(self, x):
            return self.head(self.rnn(x)[0][:, -1])

    torch.manual_seed(0)
    return RecurrentHead().eval(), (_rng(seed).standard_normal((2, 6, 8), np.float32),)


def _text_classifier():
    import torch

    class TextClassifier(torch.nn.Module):
        def __init__(self, vocab=100, dim=32, classes=4):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, dim)
            self.norm = torch.nn.LayerNorm(dim)
            self.head = torch.nn.Linear(dim, classes)

        def forward(self, ids):
            return self.head(self.norm(self.embed(ids)).mean(dim=1))

    torch.manual_seed(0)
    return TextClassifier().eval(), (_rng(18).integers(0, 100, (2, 12), dtype=np.int64),)


def _unet_block():
    import torch

    nn = torch.nn

    def double_conv(cin, cout):
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
        )

    class UNetBlock(nn.Module):
        def __init__(self, cin=3, width=8, classes=2):
            super().__init__()
            self.down = double_conv(cin, width)
            self.pool = nn.MaxPool2d(2)
            self.bottom = double_conv(width, 2 * width)
            self.up = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
            self.merge = double_conv(2 * width, width)
            self.out = nn.Conv2d(width, classes, 1)

        def forward(self, x):
            skip = self.down(x)
            up = self.up(self.bottom(self.pool(skip)))
            return self.out(self.merge(torch.cat([skip, up], dim=1)))

    torch.manual_seed(0)
    model = UNetBlock()
    vary_batch_norms(model)
    return model.eval(), (_rng(19).standard_normal((1, 3, 16, 16), np.float32),)


def vary_batch_norms(model) -> None:
    """Give every BatchNorm2d of ``model`` running statistics and an affine transform of its own
    (drawn from torch's generator, seeded by the caller), not the identity a new layer has."""
    import torch

    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)


MODELS: dict[str, Callable[[], tuple[Any, tuple[np.ndarray, ...]]]] = {
    "mlp": _mlp,
    "lenet": _lenet,
    "mobilenet_v2": _mobilenet_v2,
    "resnet18": _resnet18,
    "transformer_encoder": _transformer_encoder,
    "multihead_attention": _multihead_attention,
    "gru": _gru,
    "lstm": _lstm,
    "text_classifier": _text_classifier,
    "unet_block": _unet_block,
}
"""The zoo, smallest first within each family; every builder returns ``(module.eval(), inputs)``."""


def model_source(name: str) -> str:
    """What the program of model ``name`` depends on: its builder's source and those of the helpers
    builders share, so that editing a helper makes a new program as editing a builder does."""
    return "\n".join(inspect.getsource(f) for f in (MODELS[name], _recurrent_head, vary_batch_norms))


@functools.cache
def model_program(name: str, cache: ProgramCache | None = None) -> ModuleProgram:
    """The exported program of model ``name`` with its inputs (``conformance.programs.modules.module_program``)."""
    return module_program("model", name, MODELS[name], cache=cache, source=model_source(name))
