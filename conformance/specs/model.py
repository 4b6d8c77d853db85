"""The spec's records: frozen dataclasses, and the vocabulary an op spec may use.

Every name here is re-exported by ``conformance.specs``; ``conformance.specs.loading`` builds
these records from specs/*.toml.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from conformance.api.scalar_type import DTYPE_NAMES
from conformance.results import CLAUSE_FAMILIES

__all__ = ["FAMILIES", "DTYPE_SETS", "DOMAINS", "VALUE_MODES", "EDGE_KINDS", "OP_LATITUDES", "BOUND_KINDS", "BOUND_LENGTHS",
    "STEP_SLACK", "QUANTIZED_KINDS", "SpecError", "Clause", "Tolerance", "Bound", "OpSpec", "Profile", "InputRange",
    "ModelSpec", "QuantizedSpec", "OutOfScope", "Specs", "quantized_programs"]  # fmt: skip

FAMILIES = CLAUSE_FAMILIES

DTYPE_SETS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "all": DTYPE_NAMES,
        "float": ("float32", "float16", "bfloat16", "float64"),
        "int": ("uint8", "int8", "int16", "int32", "int64"),
        "signed_int": ("int8", "int16", "int32", "int64"),
        "real": ("float32", "float16", "bfloat16", "float64", "uint8", "int8", "int16", "int32", "int64"),
        "signed_real": ("float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64"),
        "int_bool": ("uint8", "int8", "int16", "int32", "int64", "bool"),
        # eager CPU runs only some ops in these: never part of "all", listed on each op that has them
        "unsigned_wide": ("uint16", "uint32", "uint64"),
        "complex": ("complex64", "complex128"),
        "float8": ("float8_e4m3fn", "float8_e5m2"),
    }
)
"""Named dtype sets an op spec may use instead of a list, or inside one (["all", "complex"])."""

DOMAINS = (
    "any_finite",
    "with_specials",
    "with_nan",
    "small",
    "small_with_specials",
    "positive",
    "non_negative",
    "nonzero",
    "unit_interval",
    "open_unit",
    "ge_one",
    "moderate",
    "away_from_zero",
)
"""Named input-value domains (conformance.strategies.values implements them)."""

VALUE_MODES: Mapping[str, str] = MappingProxyType(
    {
        "reference": "value by value against the reference, within the op's tolerance",
        "undefined": "shape and dtype only: the op leaves the values undefined (empty)",
        "prefix": "the first elements in flattened order, as many as the op's first tensor argument holds, "
        "against the reference; the rest are undefined (resize_)",
        "uniform": "every value in [0, 1) and the sample U[0,1) by a Kolmogorov-Smirnov test (rand)",
        "normal": "every value finite and the sample N(0,1) by a Kolmogorov-Smirnov test (randn)",
        "permutation": "a permutation of 0..n-1, and positions independent of values by a test on blocks (randperm)",
        "dropout": "output = input * mask * 1/(1-p) as eager rounds it, for the mask returned; the mask all true "
        "without training, else its dropped fraction p by a binomial test (native_dropout)",
    }
)
"""The allowed values of an op spec's ``values`` field, each with what is checked
(conformance.oracle implements each; the statistical tests run at ``oracle.FALSE_ALARM``)."""


EDGE_KINDS = ("model", "values", "large", "large_finite", "spread", "empty", "scalar", "attr", "pairwise", "dim", "broadcast", "weights")
"""Kinds of directed edge cases (conformance/strategies/directed.py) an op spec may leave out (``skip_edges``)."""

OP_LATITUDES = ("tf32", "fast-division")
"""The latitudes (conformance.api.LATITUDES) an op spec grants by name, with the arguments they concern."""


class SpecError(ValueError):
    """A spec file is malformed. The message names file, entry and field."""


@dataclass(frozen=True)
class Clause:
    """One contract clause."""

    id: str
    family: str
    title: str
    text: str
    """One sentence: what must hold and why."""
    applies_to: tuple[str, ...] = ("delegate",)
    """Backend families the clause applies to (delegate, torchscript, lazy)."""


@dataclass(frozen=True)
class Tolerance:
    """When an actual floating-point element agrees with the expected one (conformance.oracle).

    An element passes when it is within ``ulp`` units in the last place of the expected
    value, or within ``atol + rtol * |expected|`` plus, for an op with a derived ``Bound``,
    that element's accumulation bound. With ``relative_floor`` (model outputs only), an
    absolute tolerance never passes an element that is off by 100% or more of a nonzero
    expected value. With ``signed_zero``, -0.0 and +0.0 differ. With ``bias``, the elements
    that differ must not lean one way (conformance.oracle.bias_test): a truncating half-type
    kernel is within 1 ULP everywhere and wrong in the mean.
    """

    atol: float
    rtol: float
    ulp: int = 0
    reason: str = ""
    source: str = "default"
    """Where this tolerance came from: default, op spec, or a backend's manifest."""
    relative_floor: bool = False
    signed_zero: bool = False
    bias: bool = False


BOUND_KINDS: Mapping[str, str] = MappingProxyType(
    {
        "sum": "each output element is a sum of n products of the inputs (a sum, a dot product, a convolution tap "
        "sum, a scatter-add): |error| <= gamma(n + 2) * sum |terms|, n counted per element",
        "mean": "each output element is such a sum divided by its length n: |error| <= gamma(n + 2) * mean |terms|",
        "logsumexp": "m + log(sum exp(x - m)) (logsumexp, log_softmax): the sum of n positive terms has relative "
        "error gamma(n + 2), so its log an absolute one: |error| <= gamma(n + 2) * (1 + log n) + u_out * (1 + log n)",
        "softmax": "exp(x - m) / sum exp(x - m): a relative error gamma(n + 2) from the sum and u |x - m| from exp's "
        "argument: |error| <= |e| * (gamma(n + 2) * (1 + log n) + u * |log |e||)",
        "interpolation": "a weighted sum of ``taps`` input elements of one plane with weights of signs the op chooses "
        "(sum |w| <= ``weight_sum``): |error| <= gamma(taps + 2) * weight_sum * max |x| over the plane",
        "relative": "a product of n factors, or a sum of n terms of one sign (a vector norm's powers): every term's "
        "magnitude is in the result, |error| <= |e| (gamma(n + 2) + u |ln |e||), the last term for a root's "
        "exponent 1/p rounded",
        "moments": "mean and variance of n elements, then (x - mean) * rstd * weight + bias (var, layer_norm, "
        "group_norm): the mean within gamma(n + 1) * mean |x|, the sum of squared deviations within "
        "gamma(n + 3) * S + 2 n dmean mean |x - mean| + n dmean^2 (two passes or Welford, any order), rstd and "
        "the output by first-order propagation (conformance.oracle.moments_bound)",
        "moments_backward": "layer_norm's and group_norm's backward: the input gradient from the row sums of dy gamma and "
        "dy gamma x (conformance.oracle.normalization_grad_bound), the weight's and bias's gradients sums over the "
        "rows, gamma(rows + 3) sum |dy| rstd (|x| + |mean|) and gamma(rows + 1) sum |dy| (``accumulator``: theirs)",
    }
)
"""The allowed ``kind`` of an op spec's ``bound`` (conformance.oracle.accumulation_bound)."""
BOUND_LENGTHS = ("count", "ratio", "numel", "dim", "kernel", "bins", "numel:")
"""``numel:NAME``: the numel of the call's tensor argument NAME (an upper bound: an embedding bag's rows)."""


@dataclass(frozen=True)
class Bound:
    """An op's error bound derived from its computation (op spec ``bound``; conformance.oracle).

    Each output element is a sum of terms, each a product of input elements (and the op's
    scalars); ``sum |terms|`` per element is the op evaluated on the absolute values of its
    inputs, in float64. In any summation order (pairwise, blocked, atomics, a wider
    accumulator) a sum of n terms accumulated in a type of unit roundoff u is within
    gamma(n) * sum |terms| of the exact sum, gamma(n) = n u / (1 - n u) (Higham, Accuracy and
    Stability of Numerical Algorithms, 2nd ed., eq. 3.5 and section 4.2); two more roundings
    (the op's scalars alpha/beta, a division by n) make it gamma(n + 2). The output is then
    rounded to its dtype: the oracle adds 2 u_out |expected| (the op's tolerance)."""

    kind: str
    """``BOUND_KINDS``: sum, mean, logsumexp, softmax, interpolation, relative or moments."""
    length: str = "count"
    """How n is found per output element: ``count`` the op evaluated on the nonzero pattern of its
    inputs (ones, scalars 1: a sum gives its length, mm its inner size, cumsum i + 1); ``ratio``
    numel(input) / numel(output) (a mean over dims); ``numel`` the numel of the largest input
    (an upper bound); ``dim`` the size of the call's ``dim`` (softmax, cumprod); ``kernel`` the product of
    ``kernel_size`` (a pooling window's taps, or the windows covering one input element in the backward);
    ``bins`` the largest adaptive-pooling bin, prod over the pooled dims of ceil(L / l) + 1 with L, l the
    larger and smaller of the input and output sides; ``numel:NAME`` the numel of tensor argument NAME.
    ``moments`` counts its own n (the normalized elements)."""
    accumulator: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """dtype -> the type eager accumulates it in, beside the default (the half types and float8
    in float32, complex in its parts' type, the rest in themselves)."""
    in_dtype_when: Mapping[str, tuple[Any, ...]] = field(default_factory=lambda: MappingProxyType({}))
    """Attribute values under which a half type accumulates in itself (a transposed convolution's
    col2im adds its taps in the half type)."""
    when: Mapping[str, tuple[Any, ...]] = field(default_factory=lambda: MappingProxyType({}))
    """Attribute values under which the op is such a sum (scatter_reduce with reduce "sum"); in other
    calls the flat tolerance alone holds."""
    taps: int = 0
    """``interpolation``: the number of input elements each output element weighs."""
    weight_sum: float = 0.0
    """``interpolation``: the largest sum of the absolute weights of one output element."""
    reason: str = ""
    """The derivation, in the op's words."""


@dataclass(frozen=True)
class OpSpec:
    """An operator overload and what the suite draws for it."""

    name: str
    """ATen overload, e.g. aten.add.Tensor."""
    family: str
    signature: str
    """Name of the hypothesis strategy that builds calls (conformance.strategies)."""
    dtypes: tuple[str, ...]
    domain: str
    """Value domain of the op's floating-point tensor inputs."""
    attrs: Mapping[str, tuple[Any, ...]]
    """Allowed values of each attribute."""
    params: Mapping[str, Any]
    """Signature-specific settings (ranks, which argument is a scalar, ...), validated by the signature."""
    tolerances: Mapping[str, Tolerance]
    """Per-dtype overrides of the dtype defaults, each with a reason."""
    core: bool
    """Part of the core-fp32 profile."""
    edge: tuple[str, ...]
    """Edge-dialect spellings computed the same way (aten.view_copy.default)."""
    dynamic: bool
    """Export with dynamic dimensions where the drawn shapes allow."""
    max_examples: int | None
    """Caps hypothesis examples for slow ops (None: the profile's setting)."""
    notes: str
    source: str
    exact: bool = False
    """Correctly rounded (IEEE add, sub, mul, div, sqrt, conversions, min/max, copies): every
    float dtype compares bit for bit (0 ULP), NaN payloads aside."""
    signed_zero: bool = False
    """PyTorch defines the sign of a zero result (neg(0.0) is -0.0): -0.0 and +0.0 differ."""
    skip_edges: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Kinds of directed edge cases (conformance/strategies/directed.py) left out for this op, each
    with the measured reason; the report lists them."""
    accumulates: bool = False
    """Results come from sums of many terms (reductions, matmul, conv, norms): cancellation makes
    an absolute tolerance the right measure near zero, so a flat tolerance of such an op may carry
    an atol (a ``bound`` derives it per element instead)."""
    bound: Bound | None = None
    """The error bound derived from the computation (``Bound``), or None: the flat tolerance alone."""
    values: str = "reference"
    """How the outputs' values are judged (``VALUE_MODES``; conformance.oracle.compare_outputs):
    against the reference's, value by value (the default), or where the op leaves them random or
    undefined, by what holds for every draw."""
    defined_outputs: tuple[Mapping[str, tuple[Any, ...]] | None, ...] = ()
    """Per output (in order; missing entries count as None): None where eager always defines its values,
    else the attribute values (by ATen schema name) under which it does, e.g. {"mode": (1, 2)}. In
    other calls the output is checked for its shape and dtype only (conformance.oracle.undefined_output):
    _embedding_bag's bag_size in sum mode holds whatever eager's kernel leaves there."""
    weights: tuple[str, ...] = ()
    """The tensor arguments (ATen schema names) that are weights in real models (a matmul's ``mat2``,
    a convolution's ``weight`` and ``bias``, a norm's affine ``weight`` and ``bias``): the NUM check's
    ``weights`` cases hand them as program constants and as runtime inputs
    (``conformance.programs.with_weights``), since a backend may delegate only constant weights."""
    latitudes: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    """The op-specific latitudes a backend may take on this op (``OP_LATITUDES``), each with the
    tensor arguments (ATen schema names) it concerns: tf32's rounded operands ({ tf32 = ["self",
    "mat2"] }: not addmm's or a convolution's bias, which the accumulation adds in float32),
    fast-division's dividend and divisor. The other latitudes hold for every op (conformance/latitudes.py)."""

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.edge)


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    clauses: tuple[str, ...]
    """Mandatory clause IDs (patterns like "PRE-*" are expanded at load)."""
    ops: tuple[str, ...]
    """Mandatory ops."""
    dtypes: Mapping[str, tuple[str, ...]]
    """op -> mandatory dtypes."""
    models: tuple[str, ...] = ()
    """Mandatory models (the MOD clauses run each)."""
    quantized: tuple[str, ...] = ()
    """Mandatory quantized programs (specs/quantized.toml: the QNT clauses run each)."""


@dataclass(frozen=True)
class InputRange:
    """Where a model's input values are drawn from: [low, high] for a floating input, [low, high)
    for integers (token ids)."""

    low: float
    high: float


@dataclass(frozen=True)
class ModelSpec:
    """A model of the MOD clauses: what its inputs are and how close its outputs must come."""

    name: str
    description: str
    inputs: tuple[InputRange, ...]
    """One range per input of the model, in order."""
    per_op_atol: float
    per_op_rtol: float
    """The outputs' tolerance grows with the model's depth d (operator nodes on the longest path
    from an input to an output): atol = per_op_atol * d, rtol = per_op_rtol * d."""
    examples: int
    """Hypothesis-drawn input sets, after the model's own inputs and the edge set."""
    reason: str = ""
    source: str = ""

    def tolerance(self, depth: int):
        """The tolerance of an output (or an intermediate value) at ``depth``."""
        d = max(int(depth), 1)
        return Tolerance(atol=self.per_op_atol * d, rtol=self.per_op_rtol * d, reason=self.reason, source="model spec", relative_floor=True)


@dataclass(frozen=True)
class QuantizedSpec:
    """A quantized int8 program of the QNT clauses (specs/quantized.toml; conformance/programs/quantize.py
    builds it): an operator pattern (kind "op") or a model of models.toml (kind "model")."""

    name: str
    kind: str
    description: str
    inputs: tuple[InputRange, ...]
    """One range per input (a model's are its models.toml ranges)."""
    lsb: float
    """An output passes within this many quantization steps of the reference (``tolerance``)."""
    examples: int
    reason: str = ""
    source: str = ""

    def tolerance(self, scale: float):
        """The tolerance of an output whose dequantize has ``scale``: ``lsb`` steps of it, plus
        ``STEP_SLACK`` of a step for the float32 rounding of the dequantized values. Purely absolute:
        one step off a value one step from zero is 100% off, and still one step."""
        return Tolerance(atol=(self.lsb + STEP_SLACK) * scale, rtol=0.0, relative_floor=False,
                         reason=f"{self.lsb:g} quantization step(s) of {scale:.4g}: {self.reason}", source="quantized spec")


STEP_SLACK = 1e-3
"""Part of a quantization step added to a QNT budget: (q - z) * s in float32 is not exactly a
multiple of s, so two values one step apart may differ by a hair more than s."""
QUANTIZED_KINDS = {"QNT-001": "op", "QNT-002": "model"}
"""The kind of quantized program a QNT clause runs; a clause not listed (QNT-003) runs every one."""


def quantized_programs(clause: str, profile, specs) -> tuple[str, ...]:
    """The quantized programs of ``profile`` that ``clause`` runs (``QUANTIZED_KINDS``)."""
    kind = QUANTIZED_KINDS.get(clause)
    return tuple(n for n in profile.quantized if kind is None or specs.quantized[n].kind == kind)


@dataclass(frozen=True)
class Specs:
    root: Path
    clauses: Mapping[str, Clause]
    ops: Mapping[str, OpSpec]
    profiles: Mapping[str, Profile]
    digest: str
    """sha256 over every spec file: the spec version a report carries."""
    models: Mapping[str, ModelSpec] = field(default_factory=lambda: MappingProxyType({}))
    quantized: Mapping[str, QuantizedSpec] = field(default_factory=lambda: MappingProxyType({}))
    out_of_scope: Mapping[str, OutOfScope] = field(default_factory=lambda: MappingProxyType({}))
    """Core ATen overloads (torch.Tag.core) no NUM check certifies, by name (specs/scope.toml)."""

    def op(self, name: str) -> OpSpec:
        """The spec of an overload, looked up by its core name or an Edge spelling."""
        spec = self.ops.get(name)
        if spec is None:
            spec = next((s for s in self.ops.values() if name in s.edge), None)
        if spec is None:
            raise KeyError(f"no op spec for {name!r}")
        return spec

    def profile(self, name: str) -> Profile:
        try:
            return self.profiles[name]
        except KeyError:
            raise KeyError(f"unknown profile {name!r}; known: {', '.join(sorted(self.profiles))}") from None

    def all_op_names(self) -> frozenset[str]:
        """Every spec'd overload, Edge spellings included."""
        return frozenset(n for spec in self.ops.values() for n in spec.names)


@dataclass(frozen=True)
class OutOfScope:
    """A core ATen overload the NUM clauses leave out, and why."""

    name: str
    reason: str
    """Why no NUM check certifies it."""
    exercised: str
    """Where the harness runs it all the same ("" if nowhere)."""


def expand_dtypes(where: str, value: str | list[str]) -> tuple[str, ...]:
    """A dtypes field (a set name, or a list of dtype and set names; the schema has checked the
    names) as the dtypes it names, in order; SpecError naming ``where`` if one is named twice."""
    out: list[str] = []
    for item in [value] if isinstance(value, str) else value:
        for d in DTYPE_SETS.get(item, (item,)):
            if d in out:
                raise SpecError(f"{where}: dtype {d} is listed twice")
            out.append(d)
    return tuple(out)
