"""The deterministic part of every NUM check: an edge set and a coverage plan derived from the spec.

Hypothesis draws are random and few (8 per op x dtype in the ``ci`` profile), so on their
own they rarely meet the case that matters: NaN reaching relu, a subnormal reaching mul,
a reduction over a non-last dim, an operand that broadcasts along its leading axes. Beside
them, every check runs a fixed list of ``Directive``s. A directive forces some choices of
the op's own signature (the strategy that draws its calls) and leaves the rest to a
deterministic draw:

- ``values``: the data operands hold the domain's edge values (NaN, +-Inf, +-0.0, the
  smallest subnormal and normal, the dtype's extremes, ties), shaped so that binary ops
  meet every pair (``(k, 1)`` against ``(1, k)``); one round puts a special in the Python
  scalar operand too;
- ``large``: one input of at least 65,536 elements in a non-trivial shape, with values
  spread over the whole domain (wide magnitudes where naive formulas overflow);
- ``large_finite`` (ops that accumulate): a finite large input of ordinary values whose last dim
  is LONG_SIDE long, reduced along it where the op takes a dim, so a wrong sum of thousands of
  finite terms shows (the ``large`` input holds NaN and infinities, which hide it);
- ``spread`` (ops whose spec sets ``params.spread``: softmax, logsumexp, the norms): finite values
  spread over [-spread, spread] on a real-world shape, along its last dim, where exp without the
  max subtracted, or a variance without the mean subtracted, fails;
- ``empty`` and ``scalar``: a zero-size and a 0-d tensor;
- ``attr``: every allowed value of every attribute of the spec, each meeting the edge values;
- ``pairwise``: every pair of values of two attributes in some case (a covering design of the
  attributes' values, not their product), on a real-world shape with ordinary values;
- ``dim``: every dim of every rank (the last spelled -1), on a non-empty input;
- ``broadcast``: every broadcast pattern of each operand (missing, size-1 leading and
  trailing dims, a 0-d operand, the outer product), on non-empty inputs;
- ``model``: the shapes real models feed the op (NCHW activations with real channel counts;
  batch x sequence x hidden for linear layers and attention), so each op is compared on inputs
  a backend built for models accepts even when it refuses the edge shapes.

The strategy helpers (``values.arrays``, ``values.scalars``, ``shapes.shapes``,
``shapes.broadcast_shapes``, ``shapes.dim_index``, ``attr``) obey the directive in force
and record what they consumed. A directive whose forced parts the signature never asked
for does not apply to that op (pooling draws its own shapes, for example): the check
reports it as not applied, never as passed.

Every case is non-empty and finite unless emptiness or a special value is its point: only the
``empty`` case holds a zero-size tensor (a draw that gives another case one is drawn again, with
another seed), and only ``values``, ``large`` and ``scalar`` hold NaN and infinities.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from random import Random
from types import MappingProxyType
from typing import Any

from conformance.compat.hypothesis import NoDraw, draw_seeded

LARGE_ELEMENTS = 65_536
"""The large edge case holds at least this many elements."""
LARGE_SHAPES = {1: (65_537,), 2: (257, 263), 3: (3, 131, 173), 4: (2, 3, 107, 103), 5: (2, 2, 3, 73, 79)}
"""Non-trivial shapes (odd, prime sides: no vector width divides them) of at least LARGE_ELEMENTS."""
RANK_SIDES = (3, 4, 5, 2, 3, 2)
"""Sides of the non-empty inputs of ``dim`` directives: distinct neighbours, so a kernel that mixes up
two dims changes the result's shape or values."""
MAX_DIRECTED_RANK = 4
MODEL_SHAPES = {4: (2, 16, 14, 14), 3: (2, 16, 64), 2: (16, 64), 1: (64,)}
"""Real-world activations: NCHW with 16 channels (rank 4), batch x sequence x hidden (rank 3)."""
LONG_SIDE = 4_099
"""The last side of the ``large_finite`` input: the length of the reductions it checks."""
LONG_SHAPES = {1: (65_537,), 2: (17, LONG_SIDE), 3: (2, 9, LONG_SIDE), 4: (2, 3, 3, LONG_SIDE)}
"""Large shapes (at least LARGE_ELEMENTS) whose last dim is LONG_SIDE long."""
SPREAD_RANK = 3
"""The ``spread`` case's real-world shape: MODEL_SHAPES[3], batch x sequence x hidden."""
NONEMPTY_TRIES = 16
"""Draws a case other than ``empty`` gets to give non-empty inputs before it counts as not applied."""
MODEL_SIZES = {"batch": 2, "channels": 16, "out_channels": 32, "side": 14, "seq": 16, "hidden": 64, "out_features": 32, "kernel": 3}
"""The sizes the hand-drawn signatures (convolution, matmul, pooling) take under a ``model`` directive."""


@dataclass(frozen=True)
class Directive:
    """One deterministic case of a NUM check."""

    kind: str
    """specs.EDGE_KINDS (values, large, large_finite, spread, empty, scalar, attr, pairwise, dim,
    broadcast, model): the report counts cases by kind."""
    label: str
    values: str | None = None
    """edges (the domain's edge values), spread (the whole domain), typical (ordinary values) or wide
    (uniform over [-spread, spread]), for data operands."""
    shape: str | None = None
    """edges, large, long, empty, scalar, rank or model: what shapes() and broadcast_shapes() return."""
    rank: int | None = None
    attrs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    dim: int | None = None
    broadcast: int | None = None
    """Index into broadcast_patterns(n) for the n operands the signature broadcasts."""
    round: int = 0
    """Which edge value a Python scalar operand takes (round 0: an ordinary value)."""
    first_attrs: bool = True
    """Attributes not forced take their first allowed value (the spec lists the plain one first, e.g.
    alpha=1), so edge values meet the op itself rather than its attribute arithmetic."""
    dtypes: str | None = None
    """"same": every operand in the check's dtype; "mixed": the signature's other operands in another
    of the op's dtypes (type promotion); None: as the signature draws them."""
    spread: float | None = None
    """The half-width of ``wide`` values."""
    optional: frozenset[str] = frozenset()
    """Forced parts the signature takes where it can, without which the case still applies ("shape":
    a signature that draws its own shapes takes the case on them; "dim": an op without a dim)."""

    def required(self) -> set[str]:
        """The parts a signature must consume for the directive to apply."""
        need = set()
        if self.values:
            need.add("values")
        if self.shape:
            need.add("shape")
        if self.dim is not None:
            need.add("dim")
        if self.broadcast is not None:
            need.add("broadcast")
        need |= {f"attr:{k}" for k in self.attrs}
        if self.round:
            need.add("scalar")
        if self.dtypes == "mixed":
            need.add("mixed dtypes")
        return need - self.optional


@dataclass
class _Active:
    directive: Directive
    consumed: set[str] = field(default_factory=set)


_ACTIVE: contextvars.ContextVar[_Active | None] = contextvars.ContextVar("conformance_directive", default=None)


def active() -> _Active | None:
    """The directive in force for the current draw, if any (the strategy helpers call this)."""
    return _ACTIVE.get()


def model(rank_hint: int | None = None) -> dict[str, Any] | None:
    """MODEL_SIZES plus the directive's rank (4: images, 3: sequences) when a ``model`` directive is
    in force (and marks the shape consumed); None otherwise. For signatures that draw their own
    shapes."""
    current = _ACTIVE.get()
    if current is None or current.directive.shape != "model":
        return None
    current.consumed.add("shape")
    return {**MODEL_SIZES, "rank": current.directive.rank or rank_hint}


def in_model() -> bool:
    """Whether a ``model`` directive is in force: operands then share the op's dtype, as a model's do."""
    current = _ACTIVE.get()
    return current is not None and current.directive.shape == "model"


def same_dtypes() -> bool:
    """Whether operands must share the op's dtype: in ``model`` directives (as a model's do) and in
    the ``large`` one (it exercises a kernel's vector loops over the whole domain; an operand of
    another dtype would let a backend that refuses promotions skip it, leaving no large input compared)."""
    current = _ACTIVE.get()
    return current is not None and (current.directive.shape in ("model", "large") or current.directive.dtypes == "same")


def mixed_dtypes() -> bool:
    """Whether the directive in force asks for operands of another dtype than the check's (a
    signature that honours it consumes "mixed dtypes")."""
    current = _ACTIVE.get()
    return current is not None and current.directive.dtypes == "mixed"


def edge_shape(kinds: tuple[str, ...] = ("edges", "empty", "large", "long")) -> str | None:
    """The shape directive in force among ``kinds`` (marked consumed), for signatures that draw their
    own shapes (convolution, the normalizations, matrix products) and build each case's shape
    themselves: edges (room for every edge value), empty (a zero batch), large (LARGE_ELEMENTS), long
    (large, with LONG_SIDE terms in each sum); None otherwise."""
    current = _ACTIVE.get()
    if current is None or current.directive.shape not in kinds:
        return None
    current.consumed.add("shape")
    return current.directive.shape


def forced_attrs() -> Mapping[str, Any]:
    """The attribute values the directive in force fixes (empty outside directives)."""
    current = _ACTIVE.get()
    return current.directive.attrs if current is not None else MappingProxyType({})


@contextlib.contextmanager
def ordinary_values() -> Iterator[None]:
    """Within: data operands take ordinary values though the directive in force asks for edge values
    or a wide spread (a convolution's weights, a normalization's affine parameters: the case is about
    the input, see specs/README.md)."""
    current = _ACTIVE.get()
    if current is None or current.directive.values not in ("edges", "wide"):
        yield
        return
    shadow = _Active(dataclasses.replace(current.directive, values="typical"), current.consumed)
    token = _ACTIVE.set(shadow)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def consume(part: str) -> None:
    current = _ACTIVE.get()
    if current is not None:
        current.consumed.add(part)


@contextlib.contextmanager
def _directing(directive: Directive) -> Iterator[_Active]:
    state = _Active(directive)
    token = _ACTIVE.set(state)
    try:
        yield state
    finally:
        _ACTIVE.reset(token)


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little")


def draw_directed(strategy, directive: Directive, *key: Any) -> tuple[Any, set[str]]:
    """Draw once from ``strategy`` under ``directive``: (the call, set()), or (None, the parts the
    signature never consumed) when the directive does not apply to this op.

    The unforced choices come from a Random seeded by ``key`` and the directive's label, so
    the same op, dtype and directive give the same call in every process
    (``compat.hypothesis.draw_seeded``).

    A case other than ``empty`` whose call holds a zero-size tensor compares nothing: it is drawn
    again with another seed, up to NONEMPTY_TRIES times, and does not apply ("nonempty") if every
    draw holds one. A case whose shape is optional and that the op's signature cannot draw on that
    shape is drawn on the signature's own shapes.
    """
    for attempt in range(NONEMPTY_TRIES):
        call, missing = _draw_once(strategy, directive, key, attempt)
        if call is None and directive.shape is not None and "shape" in directive.optional:
            # the forced shape does not fit this op (a model's image for a 1-d pooling): its own shapes
            return draw_directed(strategy, dataclasses.replace(directive, shape=None, rank=None), *key)
        if call is None or directive.kind == "empty" or all(t.value.size for t in call.tensors()):
            return call, missing
    return None, {"nonempty"}


def _draw_once(strategy, directive: Directive, key: tuple, attempt: int) -> tuple[Any, set[str]]:
    seed = _seed(*key, directive.label) if attempt == 0 else _seed(*key, directive.label, attempt)

    def build(draw):
        with _directing(directive) as state:
            return draw(strategy), state

    try:
        call, state = draw_seeded(build, seed)
    except NoDraw:  # a forced value the signature cannot build on (a filter it never passes)
        return None, {"draw"}
    missing = directive.required() - state.consumed
    if directive.kind != "values" and not call.tensors():
        # A call without tensor arguments (rand, empty, full: sizes and scalars) has no data for the
        # directive's values to fill; its shape (large, 0-d, real-world) applies on its own. The
        # ``values`` kind is about the data, so it does not.
        missing.discard("values")
    return (None, missing) if missing else (call, set())


# ---------------------------------------------------------------------------------------------
# The plan


def broadcast_patterns(n: int) -> list[tuple[str, tuple[tuple[int, ...], ...]]]:
    """Every way one of ``n`` operands broadcasts against the others, plus the outer product."""
    full = (3, 4)
    out: list[tuple[str, tuple[tuple[int, ...], ...]]] = [("same shape", (full,) * n)]
    for i in range(n):
        for name, shape in (("0-d", ()), ("missing leading dim", (4,)), ("leading 1", (1, 4)), ("trailing 1", (3, 1))):
            shapes = tuple(shape if j == i else full for j in range(n))
            out.append((f"operand {i} {name}", shapes))
    outer = tuple(tuple(3 + j if k == j else 1 for k in range(n)) for j in range(n))
    out.append(("outer product", outer))
    rank4 = ((2, 1, 4, 1), (3, 1, 5)) + ((2, 3, 4, 5),) * (n - 2)
    out.append(("rank 4 against rank 3", rank4[:n]))
    return out


def plan(spec, dtype: str) -> list[list[Directive]]:
    """The directives of one op x dtype check, in a fixed order, in groups.

    A group is abandoned when its first directive does not apply (an op without a dim
    attribute takes none of the ``dim`` directives), so trying costs one draw, not twenty.
    """
    groups = [
        # Real-world shapes first: a backend built for models takes these even when it refuses
        # edge shapes, and an op it refuses on these too is not supported at all.
        [Directive("model", f"real-world shape {MODEL_SHAPES[rank]}", values="typical", shape="model", rank=rank) for rank in (4, 3)],
        # Edge values meet the op in its own dtype first: a backend that refuses type promotion
        # (XNNPACK) would otherwise skip them whenever an operand was drawn in another dtype.
        [Directive("values", "edge values", values="edges", shape="edges", dtypes="same")],
        [Directive("values", "edge values, special scalar operand", values="edges", shape="edges", round=1, dtypes="same")],
        [Directive("values", "edge values, operands of mixed dtypes", values="edges", shape="edges", dtypes="mixed")],
        [Directive("large", f"large input (>= {LARGE_ELEMENTS} elements, whole domain)", values="spread", shape="large")],
    ]
    if spec.accumulates:
        # The large input above holds NaN and infinities, so a reduction compares NaN with NaN: a
        # wrong sum of finite values shows only beside it, over thousands of ordinary terms.
        groups.append([Directive(
            "large_finite", f"large finite input, sums of {LONG_SIDE} terms or more", values="typical",
            shape="long", dim=-1, optional=frozenset({"dim"}), dtypes="same",
        )])
    spread = spec.params.get("spread")
    if spread:
        groups.append([Directive(
            "spread", f"finite values spread over [-{spread:g}, {spread:g}] along the last dim", values="wide",
            spread=float(spread), shape="model", rank=SPREAD_RANK, dim=-1, optional=frozenset({"dim"}), dtypes="same",
        )])
    groups += [
        [Directive("empty", "empty tensor", shape="empty")],
        [Directive("scalar", "0-d tensor of edge values", values="edges", shape="scalar")],
    ]
    # Each attribute value meets the edge values (on the edge-values shape where the signature takes
    # it), the other attributes at their plain (first) values.
    for key, choices in spec.attrs.items():
        groups.append([
            Directive(
                "attr", f"{key}={value!r}, edge values", values="edges", shape="edges", dtypes="same",
                attrs=MappingProxyType({key: value}), optional=frozenset({"shape"}),
            )
            for value in choices
        ])
    # Attribute interactions: every pair of values of two attributes, in ordinary values on a
    # real-world shape (the signature's own shapes where it takes none).
    if spec.attrs:
        groups.append(pairwise(spec, dtype))
    # Every dim of every rank once, the last spelled -1 and the others non-negative, so each rank
    # also meets a negative dim.
    groups.append([
        Directive("dim", f"dim {dim} of rank {rank}", values="typical", shape="rank", rank=rank, dim=dim, first_attrs=False)
        for rank in range(1, MAX_DIRECTED_RANK + 1)
        for dim in (-1, *range(rank - 1))
    ])
    groups.append([
        Directive("broadcast", f"broadcast pattern {j}", values="typical", broadcast=j, first_attrs=False)
        for j in range(len(broadcast_patterns(3)))
    ])
    skipped = getattr(spec, "skip_edges", {})
    return [[d for d in group if d.kind not in skipped] for group in groups if group]


# ---------------------------------------------------------------------------------------------
# Pairwise attributes

PAIRWISE_CHECKS = 160
"""Draws the pairwise design may spend per op x dtype finding out which rows the signature takes."""
_CANDIDATES = 4_096
"""Up to this many rows the design picks from the whole product of the values; beyond, from as many
rows drawn at random (seeded) per step."""


def _pair_row(spec, row: Mapping[str, Any]) -> Directive:
    label = "pairwise " + ", ".join(f"{k}={v!r}" for k, v in row.items())
    return Directive(
        "pairwise", label, values="typical", shape="model", rank=4, attrs=MappingProxyType(dict(row)),
        first_attrs=False, optional=frozenset({"shape"}),
    )


def pairwise(spec, dtype: str) -> list[Directive]:
    """Rows of a pairwise covering design of the spec's attribute values: every pair of values of two
    attributes appears in some row the op's signature takes (tried by drawing it: a transposed
    convolution's output_padding needs a stride or dilation above it), each row forcing every
    attribute. Greedy (AETG): each step takes the row that covers most pairs not yet covered. With
    one attribute, a row per value. A pair no row the signature takes can hold is left out."""
    from . import calls

    keys = list(spec.attrs)
    sizes = [len(spec.attrs[k]) for k in keys]
    if len(keys) == 1:  # the first value met the real-world shapes in the ``model`` cases
        return [_pair_row(spec, {keys[0]: v}) for v in spec.attrs[keys[0]][1:]]
    strategy = calls(spec, dtype, spec.name)

    def row_of(index: tuple[int, ...]) -> dict:
        return {k: spec.attrs[k][i] for k, i in zip(keys, index)}

    def pairs_of(index: tuple[int, ...]) -> set:
        return {(a, index[a], b, index[b]) for a in range(len(keys)) for b in range(a + 1, len(keys))}

    uncovered = {
        (a, i, b, j) for a in range(len(keys)) for b in range(a + 1, len(keys)) for i in range(sizes[a]) for j in range(sizes[b])
    }
    total = math.prod(sizes)
    rng = Random(_seed(spec.name, dtype, "pairwise"))
    everything = list(itertools.product(*map(range, sizes))) if total <= _CANDIDATES else None
    refused: set[tuple[int, ...]] = set()
    rows: list[Directive] = []
    checks = 0
    while uncovered and checks < PAIRWISE_CHECKS:
        pool = everything if everything is not None else [tuple(rng.randrange(n) for n in sizes) for _ in range(_CANDIDATES)]
        ranked = sorted(
            ((len(pairs_of(c) & uncovered), c) for c in pool if c not in refused), key=lambda gc: -gc[0]
        )
        taken = None
        for gain, candidate in ranked:
            if gain == 0 or checks >= PAIRWISE_CHECKS:
                break
            directive = _pair_row(spec, row_of(candidate))
            checks += 1
            call, _ = draw_directed(strategy, directive, spec.name, dtype)
            if call is not None:
                taken = candidate
                rows.append(directive)
                break
            refused.add(candidate)
        if taken is None:
            break  # no row the signature takes covers a pair still open
        uncovered -= pairs_of(taken)
    return rows
