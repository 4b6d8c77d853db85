"""The spec of record, loaded into frozen dataclasses. The only reader of specs/.

specs/interface.toml   contract clauses with stable IDs
specs/ops/*.toml       operator specs, one file per family
specs/models.toml      models of the MOD clauses (conformance/models.py builds them)
specs/quantized.toml   quantized int8 programs of the QNT clauses (conformance/quantize.py builds them)
specs/profiles.toml    certification profiles
specs/scope.toml       core ATen overloads no NUM check certifies, each with the reason

A broken spec file is refused with a message naming the file, the entry and the
field, and what was expected.
"""

from __future__ import annotations

import functools
import hashlib
import tomllib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from conformance.api.scalar_type import DTYPE_NAMES, KNOWN_DTYPE_NAMES, complex_dtype, component_dtype
from conformance.results import CLAUSE_FAMILIES

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
    """A quantized int8 program of the QNT clauses (specs/quantized.toml; conformance/quantize.py
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


# ---------------------------------------------------------------------------------------------


_CHOSEN_ROOT: list[Path] = []
"""The spec of record this process was told to use (``use``), if not the installed one."""


def use(root: str | Path | None) -> None:
    """Make ``root`` the spec of record of this process (the CLI's ``--specs``, the plugin's
    ``--conformance-specs``); None goes back to the installed one."""
    _CHOSEN_ROOT[:] = [Path(root)] if root is not None else []
    load.cache_clear()


def chosen_root() -> Path | None:
    """The spec root chosen with ``use`` (None: the installed one is in force)."""
    return _CHOSEN_ROOT[0] if _CHOSEN_ROOT else None


def specs_root() -> Path:
    """The spec of record: the one chosen with ``use``, else specs/ of the repository, else the
    copy shipped in the wheel (package conformance_specs)."""
    if _CHOSEN_ROOT:
        return _CHOSEN_ROOT[0]
    repo = Path(__file__).resolve().parent.parent / "specs"
    if (repo / "interface.toml").exists():
        return repo
    import importlib.resources

    return Path(str(importlib.resources.files("conformance_specs")))


@functools.cache
def load(root: str | Path | None = None) -> Specs:
    root = Path(root) if root is not None else specs_root()
    if not (root / "interface.toml").exists():
        raise SpecError(f"{root}: no interface.toml; pass --specs with the specs/ directory")
    files = [root / "interface.toml", root / "profiles.toml", *sorted((root / "ops").glob("*.toml"))]
    files += [root / name for name in ("models.toml", "quantized.toml", "scope.toml") if (root / name).exists()]
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.relative_to(root).as_posix().encode())
        digest.update(f.read_bytes())
    clauses = _load_clauses(root / "interface.toml")
    ops: dict[str, OpSpec] = {}
    for f in files[2:]:
        if f.parent == root:
            continue
        for spec in _load_ops(f):
            for name in spec.names:
                if name in ops or any(name in s.edge for s in ops.values()):
                    raise SpecError(f"{spec.source}: op {name} is specified twice")
            ops[spec.name] = spec
    models = _load_models(root / "models.toml") if (root / "models.toml").exists() else {}
    quantized = _load_quantized(root / "quantized.toml", models) if (root / "quantized.toml").exists() else {}
    profiles = _load_profiles(root / "profiles.toml", clauses, ops, models=models, quantized=quantized)
    out_of_scope = _load_scope(root / "scope.toml", ops) if (root / "scope.toml").exists() else {}
    return Specs(
        root=root,
        clauses=MappingProxyType(clauses),
        ops=MappingProxyType(ops),
        profiles=MappingProxyType(profiles),
        digest=digest.hexdigest(),
        models=MappingProxyType(models),
        quantized=MappingProxyType(quantized),
        out_of_scope=MappingProxyType(out_of_scope),
    )


@dataclass(frozen=True)
class OutOfScope:
    """A core ATen overload the NUM clauses leave out, and why."""

    name: str
    reason: str
    """Why no NUM check certifies it."""
    exercised: str
    """Where the harness runs it all the same ("" if nowhere)."""


def _load_scope(path: Path, ops: Mapping[str, OpSpec]) -> dict[str, OutOfScope]:
    data = read_toml(path)
    _no_extra(str(path), data, {"out_of_scope"})
    entries = expect_field(str(path), data, "out_of_scope", list, [])
    scope: dict[str, OutOfScope] = {}
    for index, body in enumerate(entries):
        where = f"{path}: out_of_scope[{index}]"
        if not isinstance(body, dict):
            raise SpecError(f"{where}: must be a table with name, reason and exercised")
        _no_extra(where, body, {"name", "reason", "exercised"})
        name = expect_field(where, body, "name", str)
        where = f"{path}: out_of_scope {name}"
        reason = expect_field(where, body, "reason", str)
        if not reason.strip():
            raise SpecError(f"{where}: reason must say why the overload is left out")
        if name in ops or any(name in s.edge for s in ops.values()):
            raise SpecError(f"{where}: {name} has an op spec in specs/ops/; it cannot also be out of scope")
        if name in scope:
            raise SpecError(f"{where}: listed twice")
        scope[name] = OutOfScope(name, reason.strip(), expect_field(where, body, "exercised", str, "").strip())
    return scope


def _tables(path: Path, data: Mapping, kind: str, allowed: set[str]):
    """(name, table, where) of each ``[kind.NAME]`` table of a spec file, its fields within ``allowed``."""
    for name, body in _expect(str(path), data, kind, dict).items():
        where = f"{path}: {kind} {name}"
        if not isinstance(body, dict):
            raise SpecError(f"{where}: must be a table ([{kind}.{name}])")
        _no_extra(where, body, allowed)
        yield name, body, where


def _ranges(where: str, items: list) -> tuple[InputRange, ...]:
    ranges = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or set(item) != {"low", "high"}:
            raise SpecError(f"{where}: inputs[{i}] must be a table {{ low = ..., high = ... }}, got {item!r}")
        low, high = (_expect(f"{where}: inputs[{i}]", item, k, (int, float)) for k in ("low", "high"))
        if not low < high:
            raise SpecError(f"{where}: inputs[{i}]: low ({low}) must be below high ({high})")
        ranges.append(InputRange(low, high))
    return tuple(ranges)


def _load_quantized(path: Path, models: Mapping[str, ModelSpec]) -> dict[str, QuantizedSpec]:
    data = _read(path)
    _no_extra(str(path), data, {"defaults", "program"})
    defaults = _expect(str(path), data, "defaults", dict)
    _no_extra(f"{path}: [defaults]", defaults, {"lsb", "examples", "reason"})
    out: dict[str, QuantizedSpec] = {}
    for name, body, where in _tables(path, data, "program", {"kind", "description", "inputs", "lsb", "examples", "reason"}):
        kind = _expect(where, body, "kind", str)
        if kind == "op":
            inputs = _ranges(where, _expect(where, body, "inputs", list))
        elif kind == "model":
            if name not in models:
                hint = closest(name, models, cutoff=0.6)
                raise SpecError(f"{where}: kind \"model\" names a model of models.toml; {name!r}"
                                + (f" (did you mean {hint}?)" if hint else "") + f" is not one: {', '.join(models)}")
            if "inputs" in body:
                raise SpecError(f"{where}: a model's inputs are its models.toml ranges; remove inputs")
            inputs = models[name].inputs
        else:
            raise SpecError(f"{where}: kind must be \"op\" or \"model\", got {kind!r}")
        lsb = _expect(where, body, "lsb", (int, float), _expect(f"{path}: [defaults]", defaults, "lsb", (int, float)))
        if not lsb >= 0:
            raise SpecError(f"{where}: lsb must be 0 or more, got {lsb}")
        examples = _expect(where, body, "examples", int, _expect(f"{path}: [defaults]", defaults, "examples", int))
        if examples < 0:
            raise SpecError(f"{where}: examples must be 0 or more, got {examples}")
        out[name] = QuantizedSpec(
            name=name,
            kind=kind,
            description=_expect(where, body, "description", str),
            inputs=inputs,
            lsb=float(lsb),
            examples=examples,
            reason=_expect(where, body, "reason", str, _expect(f"{path}: [defaults]", defaults, "reason", str, "")),
            source=str(path),
        )
    return out


def _load_models(path: Path) -> dict[str, ModelSpec]:
    data = _read(path)
    _no_extra(str(path), data, {"defaults", "model"})
    defaults = _expect(str(path), data, "defaults", dict)
    _no_extra(f"{path}: [defaults]", defaults, {"per_op_atol", "per_op_rtol", "examples", "reason"})
    out: dict[str, ModelSpec] = {}
    for name, body, where in _tables(path, data, "model", {"description", "inputs", "per_op_atol", "per_op_rtol", "examples", "reason"}):
        ranges = _ranges(where, _expect(where, body, "inputs", list))
        numbers = {}
        for key in ("per_op_atol", "per_op_rtol"):
            value = _expect(where, body, key, (int, float), _expect(f"{path}: [defaults]", defaults, key, (int, float)))
            if not value > 0:
                raise SpecError(f"{where}: {key} must be positive, got {value}")
            numbers[key] = float(value)
        examples = _expect(where, body, "examples", int, _expect(f"{path}: [defaults]", defaults, "examples", int))
        if examples < 0:
            raise SpecError(f"{where}: examples must be 0 or more, got {examples}")
        out[name] = ModelSpec(
            name=name,
            description=_expect(where, body, "description", str),
            inputs=ranges,
            examples=examples,
            reason=_expect(where, body, "reason", str, _expect(f"{path}: [defaults]", defaults, "reason", str, "")),
            source=str(path),
            **numbers,
        )
    return out


def read_toml(path: Path, *, error: type[Exception] = SpecError, missing: str = "") -> dict:
    """A TOML file of records; ``error`` (naming the file) when it is missing or not TOML."""
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise error(f"{path}: missing{missing}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML: {exc}") from None


def expect_field(where: str, data: Mapping, key: str, kind: type | tuple, default: Any = ..., *, error: type[Exception] = SpecError) -> Any:
    """``data[key]`` of type ``kind`` (``default`` when absent, if given); ``error`` naming ``where`` and the field otherwise."""
    if key not in data:
        if default is ...:
            raise error(f"{where}: missing field {key!r}")
        return default
    value = data[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise error(f"{where}: field {key!r} must be {names}, got {type(value).__name__} {value!r}")
    return value


_read = read_toml
_expect = expect_field


def _no_extra(where: str, data: Mapping, allowed: set[str]) -> None:
    extra = set(data) - allowed
    if extra:
        raise SpecError(f"{where}: unknown field(s) {sorted(extra)}; allowed: {sorted(allowed)}")


def _load_clauses(path: Path) -> dict[str, Clause]:
    data = _read(path)
    _no_extra(str(path), data, {"clause"})
    out: dict[str, Clause] = {}
    for cid, body in _expect(str(path), data, "clause", dict).items():
        where = f"{path}: clause {cid}"
        family, _, number = cid.partition("-")
        if family not in FAMILIES or not number.isdigit() or len(number) != 3:
            raise SpecError(f"{where}: IDs look like PRE-001 with a family in {FAMILIES}")
        if not isinstance(body, dict):
            raise SpecError(f"{where}: must be a table")
        _no_extra(where, body, {"title", "text", "applies_to"})
        text = _expect(where, body, "text", str)
        if not text.strip():
            raise SpecError(f"{where}: text must say what must hold and why")
        out[cid] = Clause(
            id=cid,
            family=family,
            title=_expect(where, body, "title", str),
            text=" ".join(text.split()),
            applies_to=tuple(_expect(where, body, "applies_to", list, ["delegate"])),
        )
    return out


_OP_FIELDS = {
    "name",
    "family",
    "signature",
    "dtypes",
    "domain",
    "attrs",
    "params",
    "tolerance",
    "core",
    "edge",
    "dynamic",
    "max_examples",
    "notes",
    "exact",
    "signed_zero",
    "accumulates",
    "bound",
    "skip_edges",
    "values",
    "defined_outputs",
    "weights",
    "latitudes",
}

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


def _dtypes(where: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        if value not in DTYPE_SETS:
            raise SpecError(f"{where}: dtype set {value!r} unknown; known sets: {sorted(DTYPE_SETS)}")
        return DTYPE_SETS[value]
    if not isinstance(value, list) or not value:
        raise SpecError(f"{where}: dtypes must be a non-empty list or a set name")
    unknown = [d for d in value if d not in KNOWN_DTYPE_NAMES and d not in DTYPE_SETS]
    if unknown:
        raise SpecError(f"{where}: unknown dtype(s) {unknown}; known: {list(KNOWN_DTYPE_NAMES)} and the sets {sorted(DTYPE_SETS)}")
    out: list[str] = []
    for item in value:
        for d in DTYPE_SETS.get(item, (item,)):
            if d in out:
                raise SpecError(f"{where}: dtype {d} is listed twice")
            out.append(d)
    return tuple(out)


EDGE_KINDS = ("model", "values", "large", "large_finite", "spread", "empty", "scalar", "attr", "pairwise", "dim", "broadcast", "weights")


def _skip_edges(where: str, table: dict) -> dict[str, str]:
    for kind, reason in table.items():
        if kind not in EDGE_KINDS:
            raise SpecError(f"{where}: skip_edges.{kind}: unknown edge kind; known: {list(EDGE_KINDS)}")
        if not isinstance(reason, str) or not reason.strip():
            raise SpecError(f"{where}: skip_edges.{kind} needs the reason as a string")
    return dict(table)


def _weights(where: str, names: list) -> tuple[str, ...]:
    """weights: the names of tensor arguments that models hold as weights, each once."""
    if not all(isinstance(n, str) and n.isidentifier() for n in names):
        raise SpecError(f"{where}: weights must be a list of argument names (ATen schema names, e.g. \"mat2\"), got {names!r}")
    if len(set(names)) != len(names):
        raise SpecError(f"{where}: weights names an argument twice: {names!r}")
    return tuple(names)


OP_LATITUDES = ("tf32", "fast-division")
"""The latitudes (conformance.api.LATITUDES) an op spec grants by name, with the arguments they concern."""


def _latitudes(where: str, table: dict) -> Mapping[str, tuple[str, ...]]:
    """latitudes = { tf32 = ["self", "mat2"] }: per op-specific latitude, the tensor arguments it concerns."""
    out = {}
    for name, arguments in table.items():
        if name not in OP_LATITUDES:
            raise SpecError(f"{where}: latitudes.{name}: an op spec grants only {list(OP_LATITUDES)} (the others hold for every op)")
        if not isinstance(arguments, list) or not arguments or not all(isinstance(a, str) and a.isidentifier() for a in arguments):
            raise SpecError(f"{where}: latitudes.{name} must be a non-empty list of argument names (ATen schema names)")
        out[name] = tuple(arguments)
    return MappingProxyType(out)


def _defined_outputs(where: str, entries: list) -> tuple[Mapping[str, tuple[Any, ...]] | None, ...]:
    """defined_outputs: per output, true (always defined), false (never: an empty table, which no
    call satisfies), or a table of the attribute values under which eager defines its values
    ({ mode = [1, 2] })."""
    out: list[Mapping[str, tuple[Any, ...]] | None] = []
    for i, entry in enumerate(entries):
        ewhere = f"{where}: defined_outputs[{i}]"
        if entry is True:
            out.append(None)
            continue
        if entry is False:
            out.append(MappingProxyType({}))
            continue
        if not isinstance(entry, dict) or not entry:
            raise SpecError(f"{ewhere}: must be true, false or a table of attribute values, e.g. {{ mode = [1, 2] }}")
        for key, allowed in entry.items():
            if not isinstance(allowed, list) or not allowed:
                raise SpecError(f"{ewhere}.{key}: must be a non-empty list of the values under which the output is defined")
        out.append(MappingProxyType({key: tuple(allowed) for key, allowed in entry.items()}))
    return tuple(out)


def _bound(where: str, table: dict, attrs: Mapping[str, tuple], dtypes: tuple[str, ...]) -> Bound | None:
    """bound = { kind = "sum", length = "count", accumulator = { float16 = "float32" },
    in_dtype_when = { transposed = [true] }, when = { reduce = ["sum"] }, reason = "..." } (``Bound``); {} for none."""
    if not table:
        return None
    bwhere = f"{where}: bound"
    _no_extra(bwhere, table, {"kind", "length", "accumulator", "in_dtype_when", "when", "taps", "weight_sum", "reason"})
    kind = _expect(bwhere, table, "kind", str)
    if kind not in BOUND_KINDS:
        raise SpecError(f"{bwhere}.kind {kind!r} unknown; known: " + "; ".join(f"{k!r} ({v})" for k, v in BOUND_KINDS.items()))
    length = _expect(bwhere, table, "length", str, "count")
    if length not in BOUND_LENGTHS and not (length.startswith("numel:") and length[6:].isidentifier()):
        raise SpecError(f"{bwhere}.length {length!r} unknown; known: {list(BOUND_LENGTHS)} (see conformance.specs.Bound)")
    accumulator = _expect(bwhere, table, "accumulator", dict, {})
    for dtype, acc in accumulator.items():
        if dtype not in dtypes or acc not in KNOWN_DTYPE_NAMES:
            raise SpecError(f"{bwhere}.accumulator.{dtype} = {acc!r}: needs one of the op's dtypes mapped to a dtype name")
    conditions = {}
    for name in ("in_dtype_when", "when"):
        conditions[name] = {}
        for key, allowed in _expect(bwhere, table, name, dict, {}).items():
            if not isinstance(allowed, list) or not allowed:
                raise SpecError(f"{bwhere}.{name}.{key}: must be a non-empty list of attribute values")
            conditions[name][key] = tuple(allowed)
    reason = _expect(bwhere, table, "reason", str)
    if not reason.strip():
        raise SpecError(f"{bwhere}: needs the derivation as its reason")
    taps, weight_sum = _expect(bwhere, table, "taps", int, 0), float(_expect(bwhere, table, "weight_sum", (int, float), 0.0))
    if (kind == "interpolation") != (taps > 0 and weight_sum > 0):
        raise SpecError(f"{bwhere}: taps and weight_sum (both positive) go with kind 'interpolation', and only with it")
    return Bound(kind=kind, length=length, accumulator=MappingProxyType(dict(accumulator)), taps=taps, weight_sum=weight_sum,
                 in_dtype_when=MappingProxyType(conditions["in_dtype_when"]), when=MappingProxyType(conditions["when"]),
                 reason=" ".join(reason.split()))


def _values(where: str, mode: str) -> str:
    if mode not in VALUE_MODES:
        hint = closest(mode, VALUE_MODES, cutoff=0.6)
        raise SpecError(
            f"{where}: values {mode!r} is not a way of judging outputs"
            + (f" (did you mean {hint!r}?)" if hint else "")
            + "; known: " + "; ".join(f"{k!r} ({v})" for k, v in VALUE_MODES.items())
        )
    return mode


def _load_ops(path: Path) -> list[OpSpec]:
    data = _read(path)
    _no_extra(str(path), data, {"family", "op", "accumulates"})
    family = _expect(str(path), data, "family", str, path.stem)
    accumulates = _expect(str(path), data, "accumulates", bool, False)
    out = []
    for index, body in enumerate(_expect(str(path), data, "op", list)):
        where = f"{path}: op #{index + 1}"
        if not isinstance(body, dict):
            raise SpecError(f"{where}: must be a table")
        name = _expect(where, body, "name", str)
        where = f"{path}: op {name}"
        _no_extra(where, body, _OP_FIELDS)
        if name.count(".") != 2:
            raise SpecError(f"{where}: name must be namespace.op.overload, e.g. aten.add.Tensor")
        domain = _expect(where, body, "domain", str, "with_specials")
        if domain not in DOMAINS:
            raise SpecError(f"{where}: domain {domain!r} unknown; known: {list(DOMAINS)}")
        attrs = {}
        for key, choices in _expect(where, body, "attrs", dict, {}).items():
            if not isinstance(choices, list) or not choices:
                raise SpecError(f"{where}: attrs.{key} must be a non-empty list of allowed values")
            attrs[key] = tuple(tuple(c) if isinstance(c, list) else c for c in choices)
        dtypes = _dtypes(where, body.get("dtypes", "all"))
        tolerances = {}
        for dtype, tol in _expect(where, body, "tolerance", dict, {}).items():
            twhere = f"{where}: tolerance.{dtype}"
            if dtype not in dtypes and complex_dtype(dtype) not in dtypes and component_dtype(dtype) not in dtypes:
                # a float tolerance may hold the outputs of a complex op (abs, _fft_c2r) and back
                raise SpecError(f"{twhere}: {dtype} is not among the op's dtypes (nor the parts of a complex one)")
            if not isinstance(tol, dict):
                raise SpecError(f"{twhere}: must be a table with atol, rtol (and ulp), reason")
            _no_extra(twhere, tol, {"atol", "rtol", "ulp", "reason"})
            reason = _expect(twhere, tol, "reason", str)
            if not reason.strip():
                raise SpecError(f"{twhere}: every loosening needs a reason")
            tolerances[dtype] = Tolerance(
                atol=float(_expect(twhere, tol, "atol", (int, float))),
                rtol=float(_expect(twhere, tol, "rtol", (int, float))),
                ulp=_expect(twhere, tol, "ulp", int, 0),
                reason=reason,
                source=f"op spec {name}",
            )
        max_examples = _expect(where, body, "max_examples", int, 0) or None
        exact = _expect(where, body, "exact", bool, False)
        out.append(
            OpSpec(
                name=name,
                family=_expect(where, body, "family", str, family),
                signature=_expect(where, body, "signature", str),
                dtypes=dtypes,
                domain=domain,
                attrs=MappingProxyType(attrs),
                params=MappingProxyType(dict(_expect(where, body, "params", dict, {}))),
                tolerances=MappingProxyType(tolerances),
                core=_expect(where, body, "core", bool, False),
                edge=tuple(_expect(where, body, "edge", list, [])),
                dynamic=_expect(where, body, "dynamic", bool, True),
                max_examples=max_examples,
                notes=" ".join(_expect(where, body, "notes", str, "").split()),
                source=where,
                exact=exact,
                signed_zero=_expect(where, body, "signed_zero", bool, exact),
                accumulates=_expect(where, body, "accumulates", bool, accumulates),
                bound=_bound(where, _expect(where, body, "bound", dict, {}), attrs, dtypes),
                skip_edges=MappingProxyType(_skip_edges(where, _expect(where, body, "skip_edges", dict, {}))),
                values=_values(where, _expect(where, body, "values", str, "reference")),
                defined_outputs=_defined_outputs(where, _expect(where, body, "defined_outputs", list, [])),
                weights=_weights(where, _expect(where, body, "weights", list, [])),
                latitudes=_latitudes(where, _expect(where, body, "latitudes", dict, {})),
            )
        )
    return out


def _load_profiles(
    path: Path,
    clauses: Mapping[str, Clause],
    ops: Mapping[str, OpSpec],
    known: Mapping[str, Profile] | None = None,
    models: Mapping[str, ModelSpec] | None = None,
    quantized: Mapping[str, QuantizedSpec] | None = None,
) -> dict[str, Profile]:
    """The profiles of a profiles.toml; ``known`` (the spec's own) may be extended by a user's file."""
    models = models or {}
    quantized = quantized or {}
    data = _read(path)
    _no_extra(str(path), data, {"profile"})
    out: dict[str, Profile] = {}
    for name, body, where in _tables(path, data, "profile", {"description", "clauses", "ops", "dtypes", "extends", "models", "quantized"}):
        base = (out.get(body["extends"]) or (known or {}).get(body["extends"])) if "extends" in body else None
        if "extends" in body and base is None:
            raise SpecError(f"{where}: extends {body['extends']!r}, which is not defined above it")
        clause_ids = list(base.clauses) if base else []
        for pattern in _expect(where, body, "clauses", list, []):
            matched = _match(pattern, clauses)
            if not matched:
                raise SpecError(f"{where}: clause pattern {pattern!r} matches no clause")
            clause_ids += [c for c in matched if c not in clause_ids]
        op_names = list(base.ops) if base else []
        op_field = _expect(where, body, "ops", (list, str), [])
        selected = _select_ops(where, op_field, ops)
        op_names += [o for o in selected if o not in op_names]
        dtype_field = _expect(where, body, "dtypes", (list, str, dict), "spec")
        dtypes = dict(base.dtypes) if base else {}
        for op in selected:
            spec_dtypes = ops[op].dtypes
            wanted = dtype_field
            if isinstance(dtype_field, dict):  # per-op lists; unlisted ops keep their spec's dtypes
                wanted = dtype_field.get(op, "spec")
            if wanted == "spec":
                dtypes[op] = spec_dtypes
            else:
                wanted = _dtypes(f"{where}: dtypes of {op}", wanted)
                missing = [d for d in wanted if d not in spec_dtypes] if isinstance(dtype_field, dict) else []
                if missing:
                    raise SpecError(f"{where}: {op} is not specified for {missing}")
                dtypes[op] = tuple(d for d in spec_dtypes if d in wanted)
        if isinstance(dtype_field, dict):
            unknown = sorted(set(dtype_field) - set(selected))
            if unknown:
                raise SpecError(f"{where}: dtypes given for ops the profile does not select: {unknown}")
        model_names = _names(where, body, "models", "model", models, list(base.models) if base else [])
        quantized_names = _names(where, body, "quantized", "quantized program", quantized, list(base.quantized) if base else [])
        out[name] = Profile(
            name=name,
            description=_expect(where, body, "description", str),
            clauses=tuple(clause_ids),
            ops=tuple(op_names),
            dtypes=MappingProxyType(dtypes),
            models=tuple(model_names),
            quantized=tuple(quantized_names),
        )
    return out


def _names(where: str, body: Mapping, key: str, what: str, known: Mapping, names: list[str]) -> list[str]:
    """A profile's ``models`` or ``quantized``: "all" or a list of names ``known`` defines (each a
    ``what``), after ``names`` (its base's)."""
    field_ = _expect(where, body, key, (list, str), [])
    if field_ == "all":
        field_ = list(known)
    elif isinstance(field_, str):
        raise SpecError(f"{where}: {key} must be 'all' or a list of {what} names")
    unknown = [m for m in field_ if m not in known]
    if unknown:
        raise SpecError(f"{where}: unknown {what}(s) {', '.join(with_suggestion(m, known) for m in unknown)}")
    return names + [m for m in field_ if m not in names]


def _match(pattern: str, clauses: Mapping[str, Clause]) -> list[str]:
    if pattern.endswith("*"):
        return sorted(c for c in clauses if c.startswith(pattern[:-1]))
    return [pattern] if pattern in clauses else []


def _select_ops(where: str, value: list | str, ops: Mapping[str, OpSpec]) -> list[str]:
    if value == "all":
        return sorted(ops)
    if value == "core":
        return sorted(name for name, spec in ops.items() if spec.core)
    if isinstance(value, str) and value.startswith("family:"):
        family = value.removeprefix("family:")
        chosen = sorted(name for name, spec in ops.items() if spec.family == family)
        if not chosen:
            raise SpecError(f"{where}: ops {value!r}: no op spec is of family {family!r}")
        return chosen
    if isinstance(value, str):
        raise SpecError(f"{where}: ops must be 'all', 'core', 'family:NAME' or a list of op names")
    unknown = [o for o in value if o not in ops]
    if unknown:
        raise SpecError(f"{where}: unknown op(s) {', '.join(with_suggestion(o, ops) for o in unknown)}")
    return list(value)


def closest(name: str, known: Iterable[str], cutoff: float = 0.8) -> str | None:
    """The known name ``name`` most likely misspells, if one is close enough."""
    import difflib

    close = difflib.get_close_matches(str(name), sorted(known), n=1, cutoff=cutoff)
    return close[0] if close else None


def with_suggestion(name: str, known: Iterable[str]) -> str:
    hint = closest(name, known)
    return f"{name!r} (did you mean {hint}?)" if hint else repr(name)


def check_claims(specs: Specs, claims: Iterable[str], whose: str = "the backend's manifest") -> None:
    """Every op a manifest claims is spec'd (SpecError naming the typos otherwise): a misspelt claim
    would silently drop the op from everything the claims decide."""
    names = specs.all_op_names()
    unknown = sorted(op for op in claims if op not in names)
    if unknown:
        raise SpecError(
            f"{whose} claims op(s) no spec names: "
            + ", ".join(with_suggestion(o, names) for o in unknown)
            + " (spell them as ATen overloads, e.g. aten.add.Tensor; `python -m conformance list --ops` lists them)"
        )


# ---------------------------------------------------------------------------------------------
# Profiles beyond profiles.toml: the backend's claims, a user's file, a selection


CLAIMED = "claimed"
"""The profile of exactly what the backend's manifest claims (op x dtype), plus the contract clauses."""


def profile_definition(profile: Profile) -> dict[str, Any]:
    """A profile as data (carried in a report whose profile is not one of the spec's own)."""
    return {
        "name": profile.name,
        "description": profile.description,
        "clauses": list(profile.clauses),
        "ops": {op: list(profile.dtypes.get(op, ())) for op in profile.ops},
        **({"models": list(profile.models)} if profile.models else {}),
        **({"quantized": list(profile.quantized)} if profile.quantized else {}),
    }


def profile_from_definition(definition: Mapping[str, Any], specs: Specs) -> Profile:
    """The inverse of ``profile_definition``, checked against the spec (SpecError otherwise)."""
    where = f"profile definition {definition.get('name')!r}" if isinstance(definition, Mapping) else "profile definition"
    if not isinstance(definition, Mapping):
        raise SpecError(f"{where}: must be an object")
    _no_extra(where, definition, {"name", "description", "clauses", "ops", "models", "quantized"})
    name = _expect(where, definition, "name", str)
    clause_ids = _expect(where, definition, "clauses", list)
    unknown = [c for c in clause_ids if c not in specs.clauses]
    if unknown:
        raise SpecError(f"{where}: unknown clause(s) {unknown}")
    op_map = _expect(where, definition, "ops", dict)
    ops_known = specs.ops
    bad = [o for o in op_map if o not in ops_known]
    if bad:
        raise SpecError(f"{where}: unknown op(s) {', '.join(with_suggestion(o, ops_known) for o in bad)}")
    dtypes = {}
    for op, wanted in op_map.items():
        if not isinstance(wanted, list) or any(d not in ops_known[op].dtypes for d in wanted):
            raise SpecError(f"{where}: {op}: dtypes must be a list of {list(ops_known[op].dtypes)}, got {wanted!r}")
        dtypes[op] = tuple(d for d in ops_known[op].dtypes if d in wanted)
    models = _expect(where, definition, "models", list, [])
    unknown_models = [m for m in models if m not in specs.models]
    if unknown_models:
        raise SpecError(f"{where}: unknown model(s) {unknown_models}")
    quantized = _expect(where, definition, "quantized", list, [])
    unknown_quantized = [m for m in quantized if m not in specs.quantized]
    if unknown_quantized:
        raise SpecError(f"{where}: unknown quantized program(s) {unknown_quantized}")
    description = _expect(where, definition, "description", str, "")
    return Profile(name, description, tuple(clause_ids), tuple(op_map), MappingProxyType(dtypes), tuple(models), tuple(quantized))


def claimed_profile(specs: Specs, claims: Mapping[str, Any], base: Profile) -> Profile:
    """Every op x dtype ``claims`` (a manifest's ops: name -> dtypes or "*") names that the spec
    specifies, with ``base``'s clauses: a first certification of a backend that covers a few ops.
    A claim of an op the spec does not know is a SpecError (``check_claims``)."""
    check_claims(specs, claims)
    dtypes: dict[str, tuple[str, ...]] = {}
    for name, claimed in claims.items():
        core = specs.op(name).name
        spec_dtypes = specs.ops[core].dtypes
        # "*" is the op's dtypes among the ten of "all": the others are claimed by name (Manifest.claims)
        wanted = tuple(d for d in spec_dtypes if d in DTYPE_NAMES) if claimed == "*" else tuple(claimed)
        have = set(dtypes.get(core, ())) | {d for d in wanted if d in spec_dtypes}
        dtypes[core] = tuple(d for d in spec_dtypes if d in have)
    clauses = tuple(c for c in base.clauses if not c.startswith("NUM-")) + tuple(c for c in specs.clauses if c.startswith("NUM-"))
    ops = tuple(op for op in sorted(dtypes) if dtypes[op])
    return Profile(
        CLAIMED,
        f"The contract clauses of profile {base.name} plus the numerics of exactly the {len(ops)} op(s) the manifest claims, in the dtypes it claims.",
        clauses,
        ops,
        MappingProxyType({op: dtypes[op] for op in ops}),
        base.models,
        base.quantized,
    )


def profiles_from_file(path: str | Path, specs: Specs) -> dict[str, Profile]:
    """A user's profiles file, in profiles.toml's format; its profiles may extend the spec's."""
    return _load_profiles(Path(path), specs.clauses, specs.ops, known=specs.profiles, models=specs.models, quantized=specs.quantized)


def narrowed(profile: Profile, specs: Specs, ops: Sequence[str] | None, dtypes: Sequence[str] | None) -> Profile:
    """``profile`` with its numerics limited to the ops matching ``ops`` (names or fnmatch patterns,
    e.g. aten.add.* or *conv*) and the dtypes in ``dtypes``; the contract clauses stay."""
    import fnmatch

    selected = list(profile.ops)
    if ops:
        patterns = [p.strip() for p in ops if p.strip()]
        selected = [op for op in selected if any(fnmatch.fnmatchcase(n, p) for p in patterns for n in specs.ops[op].names)]
        unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(n, p) for op in profile.ops for n in specs.ops[op].names)]
        if unmatched:
            raise SpecError(
                f"--ops: {', '.join(with_suggestion(p, specs.all_op_names()) for p in unmatched)} "
                f"match(es) no op of profile {profile.name}"
            )
    if dtypes:
        unknown = [d for d in dtypes if d not in KNOWN_DTYPE_NAMES]
        if unknown:
            raise SpecError(f"--dtypes: unknown dtype(s) {unknown}; known: {', '.join(KNOWN_DTYPE_NAMES)}")
    table = {op: tuple(d for d in profile.dtypes.get(op, ()) if not dtypes or d in dtypes) for op in selected}
    table = {op: ds for op, ds in table.items() if ds}
    if not table and (ops or dtypes):
        raise SpecError(f"--ops/--dtypes select no op x dtype of profile {profile.name}")
    parts = [f"ops {','.join(ops)}" if ops else "", f"dtypes {','.join(dtypes)}" if dtypes else ""]
    label = "; ".join(p for p in parts if p)
    return Profile(
        f"{profile.name}[{label}]",
        f"{profile.description} Selected: {label}.",
        profile.clauses,
        tuple(table),
        MappingProxyType(table),
        profile.models,
        profile.quantized,
    )


def check_signatures(specs: Specs, known: Collection[str]) -> None:
    """Every op spec names a signature in ``known``, those the strategies define
    (``conformance.strategies.known_signatures``; SpecError naming the file otherwise): checked
    before a run, not found half-way as a HARNESS_ERROR."""
    bad = [spec for spec in specs.ops.values() if spec.signature not in known]
    if bad:
        first = bad[0]
        raise SpecError(
            f"{first.source}: signature {first.signature!r} is not defined"
            + (f" (did you mean {hint}?)" if (hint := closest(first.signature, known, cutoff=0.6)) else "")
            + f"; known: {', '.join(sorted(known))}"
            + (f"; {len(bad) - 1} more op(s) name an undefined signature" if len(bad) > 1 else "")
        )


def is_builtin(profile: Profile, specs: Specs) -> bool:
    return specs.profiles.get(profile.name) == profile
