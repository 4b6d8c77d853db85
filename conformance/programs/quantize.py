"""Quantized int8 programs of the QNT clauses: PyTorch 2 export quantization as ExecuTorch users run it.

Most deployed delegates run int8. The flow here is the one ExecuTorch documents for XNNPACK:
``torch.export`` the float module, ``prepare_pt2e`` with ExecuTorch's ``XNNPACKQuantizer``
(``get_symmetric_quantization_config(is_per_channel=True)``: weights int8 symmetric per output
channel in [-127, 127], activations int8 asymmetric per tensor in [-128, 127]), calibrate,
``convert_pt2e``, export again. The program a backend gets holds the float operators between
``quantized_decomposed`` quantize/dequantize nodes (the "reference representation": dq -> op -> q),
decomposed to core ATen like every harness program; a backend either fuses each
dq -> op -> q into an integer kernel (XNNPACK) or runs it as written (the reference).

Two sets of programs, both named in specs/quantized.toml:

- operator patterns (QNT-001): one tiny module per pattern the quantizer annotates (linear,
  conv2d, depthwise conv2d, conv + BatchNorm + ReLU, add, mul, max and adaptive average
  pooling after a convolution, ...);
- models (QNT-002): the zoo of ``conformance.programs.models``, quantized.

Calibration is deterministic: the program's own inputs, every input at the low and the high
end of its spec'd range, and four seeded uniform draws in it; so the observers, hence every
scale and zero point, are the same on every machine. ``quantized_program(name)`` exports the
converted module once through the program cache (keyed by the sources of the float builder,
of this module's flow and of the calibration), and reads each output's quantization grid
(the scale, zero point and range of the dequantize that produces it).

ExecuTorch's quantizer ships with the ``executorch`` extra; without it building a program
raises ``QuantizerMissing`` saying how to install it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from conformance.programs.cache import ProgramCache
from conformance.programs.models import MODELS, model_source, vary_batch_norms
from conformance.programs.modules import ModuleProgram, module_program

QUANTIZER = "XNNPACKQuantizer, get_symmetric_quantization_config(is_per_channel=True)"
"""The quantization recipe, as reports name it."""
CALIBRATION_DRAWS = 4


class QuantizerMissing(RuntimeError):
    """ExecuTorch's XNNPACKQuantizer (the ``executorch`` extra) is not installed."""


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------------------------
# Operator patterns: the float modules the quantizer annotates (executorch's
# xnnpack_quantizer_utils OP_TO_ANNOTATOR: linear, linear_relu, conv, conv_relu, conv_bn(_relu),
# add, add_relu, mul, cat, adaptive_avg_pool2d; max_pool2d shares its input's parameters).


def _linear():
    import torch

    torch.manual_seed(0)
    return torch.nn.Linear(16, 8).eval(), (_rng(30).standard_normal((4, 16), np.float32),)


def _linear_relu():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU()).eval(), (_rng(31).standard_normal((4, 16), np.float32),)


def _conv2d():
    import torch

    torch.manual_seed(0)
    return torch.nn.Conv2d(3, 8, 3, padding=1).eval(), (_rng(32).standard_normal((1, 3, 8, 8), np.float32),)


def _conv2d_relu():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.ReLU())
    return model.eval(), (_rng(33).standard_normal((1, 3, 9, 9), np.float32),)


def _depthwise_conv2d():
    import torch

    torch.manual_seed(0)
    return torch.nn.Conv2d(8, 8, 3, padding=1, groups=8).eval(), (_rng(34).standard_normal((1, 8, 6, 6), np.float32),)


def _conv_bn_relu():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()).eval()
    vary_batch_norms(model)
    return model, (_rng(35).standard_normal((1, 4, 8, 8), np.float32),)


def _binary(fn: Callable, seed: int):
    import torch

    class Binary(torch.nn.Module):
        def forward(self, x, y):
            return fn(x, y)

    r = _rng(seed)
    return Binary().eval(), (r.standard_normal((2, 8, 4), np.float32), r.standard_normal((2, 8, 4), np.float32))


def _add():
    return _binary(lambda x, y: x + y, 36)


def _add_relu():
    import torch

    return _binary(lambda x, y: torch.relu(x + y), 37)


def _mul():
    return _binary(lambda x, y: x * y, 38)


def _conv_max_pool2d():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.MaxPool2d(2))
    return model.eval(), (_rng(39).standard_normal((1, 3, 8, 8), np.float32),)


def _conv_adaptive_avg_pool2d():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.AdaptiveAvgPool2d(1))
    return model.eval(), (_rng(40).standard_normal((1, 3, 8, 8), np.float32),)


OPS: dict[str, Callable[[], tuple[Any, tuple[np.ndarray, ...]]]] = {
    "linear": _linear,
    "linear_relu": _linear_relu,
    "conv2d": _conv2d,
    "conv2d_relu": _conv2d_relu,
    "depthwise_conv2d": _depthwise_conv2d,
    "conv_bn_relu": _conv_bn_relu,
    "add": _add,
    "add_relu": _add_relu,
    "mul": _mul,
    "conv_max_pool2d": _conv_max_pool2d,
    "conv_adaptive_avg_pool2d": _conv_adaptive_avg_pool2d,
}
"""Quantized operator patterns (QNT-001); every builder returns ``(float module.eval(), inputs)``."""


def float_builder(name: str, kind: str) -> Callable[[], tuple[Any, tuple[np.ndarray, ...]]]:
    """The float module of quantized program ``name``: an operator pattern, or a model of the zoo."""
    if kind == "op":
        return OPS[name]
    return MODELS[name]


# ---------------------------------------------------------------------------------------------
# The flow


def calibration_inputs(inputs: tuple[np.ndarray, ...], ranges, seed: int) -> list[tuple[np.ndarray, ...]]:
    """The program's own inputs, every input at its range's low and high end, and seeded uniform
    draws in the ranges (integer inputs, token ids, in [low, high))."""

    def full(pick):
        return tuple(np.full(a.shape, pick(r, a), a.dtype) for r, a in zip(ranges, inputs))

    out = [tuple(inputs), full(lambda r, a: r.low), full(lambda r, a: r.high - (0 if a.dtype.kind == "f" else 1))]
    rng = _rng(seed)
    for _ in range(CALIBRATION_DRAWS):
        out.append(
            tuple(
                rng.uniform(r.low, r.high, a.shape).astype(a.dtype)
                if a.dtype.kind == "f"
                else rng.integers(int(r.low), int(r.high), a.shape).astype(a.dtype)
                for r, a in zip(ranges, inputs)
            )
        )
    return out


INSTALL = "pip install 'torch-backend-conformance[executorch]'"
"""What installs the quantizer (``nox -s certify -- NAME --profile quantized`` does it itself)."""


def _quantizer():
    """(XNNPACKQuantizer, get_symmetric_quantization_config, prepare_pt2e, convert_pt2e), or
    QuantizerMissing saying how to install them."""
    try:
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    except ImportError as exc:
        raise QuantizerMissing(
            f"the QNT programs are quantized with ExecuTorch's XNNPACKQuantizer, which is not installed ({exc}): {INSTALL}"
        ) from exc
    return XNNPACKQuantizer, get_symmetric_quantization_config, prepare_pt2e, convert_pt2e


def require_quantizer() -> None:
    """QuantizerMissing unless the QNT programs can be built here (certify asks before it runs)."""
    _quantizer()


def quantize(module, inputs: tuple[np.ndarray, ...], calibration: list[tuple[np.ndarray, ...]]):
    """``convert_pt2e(prepare_pt2e(export(module), XNNPACKQuantizer))`` after running ``calibration``."""
    import torch

    XNNPACKQuantizer, get_symmetric_quantization_config, prepare_pt2e, convert_pt2e = _quantizer()
    exported = torch.export.export(module, tuple(torch.from_numpy(np.array(a)) for a in inputs))
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(exported.module(), quantizer)
    with torch.no_grad():
        for batch in calibration:
            prepared(*[torch.from_numpy(np.array(a)) for a in batch])
    return convert_pt2e(prepared)


@dataclass(frozen=True)
class Grid:
    """The quantization grid of one output: the dequantize producing it maps integers q in
    [quant_min, quant_max] to (q - zero_point) * scale."""

    scale: float
    zero_point: int
    quant_min: int
    quant_max: int

    def steps(self, values: np.ndarray) -> np.ndarray:
        """``values`` in quantization steps from the zero point (integers on the grid)."""
        return np.asarray(values, np.float64) / self.scale + self.zero_point

    def off_grid(self, values: np.ndarray, slack: float = 1e-3) -> np.ndarray:
        """Where ``values`` are not (q - zero_point) * scale for an integer q in range, within
        ``slack`` of a step (the dequantize itself rounds to float32)."""
        q = self.steps(values)
        nearest = np.rint(q)
        return ~np.isfinite(q) | (np.abs(q - nearest) > slack) | (nearest < self.quant_min) | (nearest > self.quant_max)


@dataclass(frozen=True)
class QuantizedProgram:
    """A quantized program: the exported module and inputs, and each output's grid."""

    program: ModuleProgram
    grids: tuple[Grid | None, ...]
    """Per output, the grid of the per-tensor dequantize producing it; None when another op does."""


def output_grids(exported) -> tuple[Grid | None, ...]:
    from conformance.api.ops import op_name

    out = []
    for node in exported.graph.output_node().args[0]:
        target = op_name(node.target) if getattr(node, "op", None) == "call_function" else ""
        if target == "quantized_decomposed.dequantize_per_tensor.default":
            _, scale, zero_point, quant_min, quant_max = node.args[:5]
            out.append(Grid(float(scale), int(zero_point), int(quant_min), int(quant_max)))
        else:
            out.append(None)
    return tuple(out)


@dataclass(frozen=True)
class InputQuantize:
    """The quantize_per_tensor that reads a program input directly (the pattern's input quantize)."""

    input: int
    """The user input it reads, by position."""
    node: str
    """Its node's name in the program's graph."""
    grid: Grid


def input_quantizes(exported) -> tuple[InputQuantize, ...]:
    """Every per-tensor quantize of the program that reads a user input, in input order."""
    from torch.export.graph_signature import InputKind

    from conformance.api.ops import op_name

    user = [spec.arg.name for spec in exported.graph_signature.input_specs if spec.kind is InputKind.USER_INPUT]
    nodes = {n.name: n for n in exported.graph.nodes}
    out = []
    for index, name in enumerate(user):
        for reader in nodes[name].users:
            if op_name(reader.target) == "quantized_decomposed.quantize_per_tensor.default":
                _, scale, zero_point, quant_min, quant_max = reader.args[:5]
                out.append(InputQuantize(index, reader.name, Grid(float(scale), int(zero_point), int(quant_min), int(quant_max))))
    return tuple(out)


def tie_values(grid: Grid, shape: tuple[int, ...]) -> np.ndarray:
    """float32 values of ``shape`` that ``grid``'s quantize sees as exact ties: x * float32(1 / scale)
    is exactly k + 0.5 - zero_point in float32 (the product quantize_per_tensor rounds), for k over
    the grid's steps, so the rounding alone decides q: half to even (torch.round, as PyTorch
    quantizes), never half away from zero. Ties that float32 cannot hold exactly are left out."""
    inv_scale = np.float32(1.0 / grid.scale)
    k = np.arange(grid.quant_min, grid.quant_max, dtype=np.float64) - grid.zero_point + 0.5
    x = (k / np.float64(inv_scale)).astype(np.float32)
    exact = (x * inv_scale).astype(np.float64) == k
    ties = x[exact]
    if not ties.size:
        raise ValueError(f"no float32 value is an exact tie of the grid {grid}")
    return np.resize(ties, shape).astype(np.float32)


def _source(name: str, kind: str) -> str:
    """What the cached program depends on: the float builder (a model's with the helpers it shares,
    ``model_source``) and this flow."""
    parts = [inspect.getsource(float_builder(name, kind)) if kind == "op" else model_source(name)]
    parts += [inspect.getsource(f) for f in (quantize, calibration_inputs)]
    return "\n".join(parts) + QUANTIZER + str(CALIBRATION_DRAWS)


@functools.cache
def quantized_program(name: str, kind: str, ranges: tuple, cache: ProgramCache | None = None) -> QuantizedProgram:
    """Quantized program ``name`` (``kind`` "op" or "model"), calibrated on ``ranges`` (one
    ``InputRange`` per input), exported once through the program cache."""
    builder = float_builder(name, kind)
    seed = sum(name.encode())

    def quantized():
        module, inputs = builder()
        if len(ranges) != len(inputs):
            raise ValueError(f"{name}: the spec gives {len(ranges)} input range(s), the module takes {len(inputs)}")
        return quantize(module, inputs, calibration_inputs(inputs, ranges, seed)), inputs

    program = module_program("quantized", name, quantized, cache=cache, source=_source(name, kind))
    return QuantizedProgram(program, output_grids(program.exported))


__all__ = [
    "OPS",
    "QUANTIZER",
    "Grid",
    "InputQuantize",
    "QuantizedProgram",
    "QuantizerMissing",
    "input_quantizes",
    "quantized_program",
    "tie_values",
]
