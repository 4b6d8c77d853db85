"""Hypothesis strategies that draw operator calls from op specs.

An op spec names a *signature* (``binary``, ``conv``, ``reduce_dims`` ...): a
function that draws shapes, values from the spec's domains and attributes from
its allowed values, and returns a ``Call``. Signatures live in modules of this
package by operator family and register themselves with ``@signature``.

    calls(spec, dtype)           # SearchStrategy[Call] for one op and dtype
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from conformance.call import Call, Tensor

SignatureFn = Callable[..., Call]
SIGNATURES: dict[str, SignatureFn] = {}
_FAMILY_MODULES = (
    "elementwise",
    "activation",
    "reduction",
    "sorting",
    "linalg",
    "conv",
    "normalization",
    "pooling",
    "padding",
    "upsample",
    "indexing",
    "shape",
    "creation",
    "quantized",
    "random",
    "backward",
    "fft",
)


def signature(name: str) -> Callable[[SignatureFn], SignatureFn]:
    """Register ``fn(draw, spec, dtype, op) -> Call`` as the signature ``name``."""

    def register(fn: SignatureFn) -> SignatureFn:
        if name in SIGNATURES:
            raise RuntimeError(f"signature {name!r} registered twice")
        SIGNATURES[name] = fn
        return fn

    return register


@functools.cache
def _load_families() -> None:
    """Import every family module once (not "while SIGNATURES is empty": a module imported on its
    own, e.g. by a test, registers its signatures and would keep the others from loading)."""
    for module in _FAMILY_MODULES:
        importlib.import_module(f"{__name__}.{module}")


def known_signatures() -> frozenset[str]:
    """Every signature an op spec may name."""
    _load_families()
    return frozenset(SIGNATURES)


def calls(spec, dtype: str, op: str | None = None) -> st.SearchStrategy[Call]:
    """Calls of ``op`` (default: the spec's own overload) in ``dtype``."""
    _load_families()
    fn = SIGNATURES.get(spec.signature)
    if fn is None:
        raise KeyError(f"{spec.source}: signature {spec.signature!r} is not defined; known: {sorted(SIGNATURES)}")
    if dtype not in spec.dtypes:
        raise ValueError(f"{spec.name} is not specified for {dtype}")
    return st.composite(lambda draw: fn(_skipping_constants(draw), spec, dtype, op or spec.name))()


def _skipping_constants(draw):
    """``draw``, except that a plain ``st.just(value)`` gives its value without a draw: the edge set's
    directives force most of a call that way, and each draw costs hypothesis a span of its own
    while it chooses nothing (the choice sequence, hence every drawn call, stays the same;
    ``compat.hypothesis.plain_just``)."""
    from conformance.compat.hypothesis import plain_just

    def drawing(strategy, label=None):
        plain, value = plain_just(strategy)
        if plain:
            return value
        return draw(strategy) if label is None else draw(strategy, label=label)

    return drawing


def param(spec, key: str, default: Any) -> Any:
    """A signature parameter from the spec, with a default."""
    return spec.params.get(key, default)


def attr(draw, spec, key: str, default: Any = ..., *, keep: Callable[[Any], bool] | None = None) -> Any:
    """Draw attribute ``key`` from the spec's allowed values (filtered by ``keep``)."""
    choices = spec.attrs.get(key)
    from . import directed

    state = directed.active()
    if state is not None and choices is not None:
        if key in state.directive.attrs:
            value = state.directive.attrs[key]
            if keep is None or keep(value):
                state.consumed.add(f"attr:{key}")
                return value
        elif state.directive.first_attrs:
            fitting = [c for c in choices if keep is None or keep(c)]
            if fitting:
                return fitting[0]
    if choices is None:
        if default is ...:
            raise KeyError(f"{spec.source}: attrs.{key} is required by signature {spec.signature!r}")
        return default
    if keep is not None:
        choices = tuple(c for c in choices if keep(c))
        if not choices:
            raise ValueError(f"{spec.source}: no allowed value of attrs.{key} fits this dtype")
    return draw(sampled_from(choices))


_SAMPLED: dict[tuple, st.SearchStrategy] = {}


def sampled_from(choices) -> st.SearchStrategy:
    """``st.sampled_from(choices)``, built once per process for each tuple of choices (a new
    strategy is validated by hypothesis on its first draw, which costs more than the draw)."""
    try:
        key = tuple((type(c), c) for c in choices)
        hash(key)
    except TypeError:  # unhashable choices (lists): not cached
        return st.sampled_from(choices)
    strategy = _SAMPLED.get(key)
    if strategy is None:
        strategy = _SAMPLED[key] = st.sampled_from(tuple(choices))
    return strategy


__all__ = ["SIGNATURES", "Call", "Tensor", "attr", "calls", "known_signatures", "param", "signature"]
