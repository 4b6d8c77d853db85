"""Signatures of reductions, scans and softmax.

reduce_dims   op(self, dim=<int list | None | []>, keepdim, **attrs)   sum, mean, amax, var, norms
reduce_dim    op(self, dim=<int | None>, keepdim, **attrs)             max.dim, argmax, prod.dim_int
reduce_all    op(self, **attrs)                                        sum.default, max.default
cumulative    op(self, dim=<int>, **attrs)                             cumsum, cumprod
softmax       op(self, dim=<int>, half_to_float)                       _softmax, _log_softmax

Every attribute goes by keyword. ``keepdim`` is drawn from attrs.keepdim, or both
ways when the spec lists none. ``dtype`` is drawn from attrs.dtype among the dtypes
that do not narrow the input (PyTorch's promote_types(input, dtype) == dtype), or
left out; attributes named in ``params.optional`` are left out half the time (TOML
cannot spell None, and leaving one out exercises the schema default).
"""

from __future__ import annotations

import math

from hypothesis import strategies as st

from conformance.api.scalar_type import is_floating, is_integral

from . import Call, Tensor, attr, directed, param, signature
from .shapes import directed_dim, shapes
from .sorting import dim_attr, values_along

_FLOAT_RANK = {"float16": 1, "bfloat16": 1, "float32": 2, "float64": 3}


def _widens(src: str, dst: str) -> bool:
    """Whether converting ``src`` to ``dst`` does not narrow it (torch.promote_types(src, dst) == dst)."""
    if src == dst or src == "bool":
        return True
    if is_floating(dst):
        if not is_floating(src):
            return True
        return _FLOAT_RANK[src] < _FLOAT_RANK[dst]
    if is_integral(dst):
        return is_integral(src) and dst == "int64"
    return False


def _attrs(draw, spec, dtype: str, skip: tuple[str, ...] = ()) -> dict:
    """keepdim and the spec's other attributes, as keyword arguments."""
    out = {}
    optional = set(param(spec, "optional", ()))
    state = directed.active()
    forced = state.directive.attrs if state is not None else {}
    if "keepdim" not in skip:
        out["keepdim"] = attr(draw, spec, "keepdim") if "keepdim" in spec.attrs else draw(st.booleans())
    for key in spec.attrs:
        if key in skip or key == "keepdim":
            continue
        if key == "dtype":
            if "dtype" in forced:  # a directive's dtype, where it does not narrow the input
                if _widens(dtype, forced["dtype"]):
                    out["dtype"] = attr(draw, spec, "dtype")
                continue
            choices = [d for d in spec.attrs["dtype"] if _widens(dtype, d)]
            if choices and draw(st.booleans()):
                out["dtype"] = draw(st.sampled_from(choices))
            continue
        if key in optional and key not in forced and draw(st.booleans()):
            continue
        out[key] = attr(draw, spec, key)
    return out


def _shape(draw, spec, min_rank: int = 0) -> list[int]:
    return list(draw(shapes(min_rank, param(spec, "max_rank", 4))))


def _fill_empty(shape: list[int], dims) -> None:
    """Give the reduced ``dims`` a nonzero size (reductions without an identity refuse empty ones)."""
    for d in dims:
        shape[d] = max(shape[d], 1)


def _cap_numel(shape: list[int], cap: int) -> None:
    """Shrink sides, last first, until the tensor has at most ``cap`` elements."""
    for i in reversed(range(len(shape))):
        while math.prod(shape) > cap and shape[i] > 1:
            shape[i] -= 1


def _dim_list(draw, rank: int) -> list[int]:
    """A nonempty list of distinct dims in any order, each possibly spelled negative."""
    forced = directed_dim(rank)
    if forced is not None:
        return [forced]
    if rank == 0:
        return [draw(st.sampled_from((0, -1)))]
    dims = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    return [d - rank if draw(st.booleans()) else d for d in dims]


@signature("reduce_dims")
def reduce_dims(draw, spec, dtype, op):
    """op(self, dim=<list of ints, None or []>, keepdim=..., **attrs).

    params: ``max_rank`` (4); ``dim_none`` (default true: dim may be None, every dim);
    ``dim_empty`` (default true: dim may be []); ``empty_reduces_all`` (default true:
    [] means every dim; false for any.dims/all.dims, where it reduces nothing);
    ``nonempty`` (default false: reduced dims get a nonzero size, for ops without an
    identity); ``nonempty_ords`` (values of attrs.ord that need nonempty reduced dims:
    the +-inf norms); ``optional``; ``int_domain``.
    """
    shape = _shape(draw, spec)
    rank = len(shape)
    kinds = ["list"]
    if param(spec, "dim_none", True):
        kinds.append("none")
    if param(spec, "dim_empty", True):
        kinds.append("empty")
    forced = directed_dim(rank)  # a ``dim`` directive asks for a list of that one dim
    model = directed.in_model() and rank >= 2
    kind = "forced" if forced is not None else "model" if model else draw(st.sampled_from(kinds))
    if kind == "model":  # a model's reduction: over the last dims (global average pooling over H, W; a norm over hidden)
        dim = [-2, -1] if rank == 4 else [-1]
        reduced = [d % rank for d in dim]
    elif kind == "forced":
        dim, reduced = [forced], [forced % rank] if rank else ()
    elif kind == "none":
        dim, reduced = None, range(rank)
    elif kind == "empty":
        dim, reduced = [], (range(rank) if param(spec, "empty_reduces_all", True) else ())
    else:
        dim = _dim_list(draw, rank)
        reduced = [d % rank for d in dim] if rank else ()
    kwargs = {"dim": dim, **_attrs(draw, spec, dtype)}
    if kind == "model" and "keepdim" in kwargs and "keepdim" not in directed.active().directive.attrs:
        kwargs["keepdim"] = True
    if param(spec, "nonempty", False) or kwargs.get("ord") in param(spec, "nonempty_ords", ()):
        _fill_empty(shape, reduced)
    x = values_along(draw, spec, dtype, shape, 0, False)
    return Call(op, (Tensor(x),), kwargs)


@signature("reduce_dim")
def reduce_dim(draw, spec, dtype, op):
    """op(self, dim=<int, or None>, keepdim=..., **attrs).

    params: ``max_rank`` (4); ``dim_none`` (default false: dim may be None, the
    flattened tensor, as argmax allows); ``nonempty`` (default false: the reduced dim,
    or the whole tensor for dim=None, gets a nonzero size); ``distinct`` (default
    false: values along dim pairwise distinct, for ops whose index among equal values
    is unspecified); ``optional``; ``int_domain``.
    """
    shape = _shape(draw, spec)
    rank = len(shape)
    if param(spec, "dim_none", False) and draw(st.booleans()):
        dim, reduced = None, range(rank)
    else:
        dim = dim_attr(draw, rank)
        reduced = (dim % rank,) if rank else ()
    if param(spec, "nonempty", False):
        _fill_empty(shape, reduced)
    axis = dim % rank if (dim is not None and rank) else 0
    x = values_along(draw, spec, dtype, shape, axis, param(spec, "distinct", False) and dim is not None)
    return Call(op, (Tensor(x),), {"dim": dim, **_attrs(draw, spec, dtype)})


@signature("reduce_all")
def reduce_all(draw, spec, dtype, op):
    """op(self, **attrs) over every element (no dim, no keepdim).

    params: ``max_rank`` (4); ``nonempty`` (default false: no zero-size dims);
    ``max_numel`` (cap on the number of elements, for ops whose eager rounding order
    changes past a SIMD width); ``optional``; ``int_domain``.
    """
    shape = _shape(draw, spec)
    if param(spec, "nonempty", False):
        _fill_empty(shape, range(len(shape)))
    cap = param(spec, "max_numel", None)
    if cap is not None:
        _cap_numel(shape, cap)
    x = values_along(draw, spec, dtype, shape, 0, False)
    return Call(op, (Tensor(x),), _attrs(draw, spec, dtype, skip=("keepdim",)))


@signature("cumulative")
def cumulative(draw, spec, dtype, op):
    """op(self, dim=<int>, **attrs): scans along one dim. params: ``max_rank`` (4), ``int_domain``."""
    shape = _shape(draw, spec)
    dim = dim_attr(draw, len(shape))
    x = values_along(draw, spec, dtype, shape, 0, False)
    return Call(op, (Tensor(x),), {"dim": dim, **_attrs(draw, spec, dtype, skip=("keepdim",))})


@signature("softmax")
def softmax(draw, spec, dtype, op):
    """op(self, dim=<int>, half_to_float=attrs.half_to_float). params: ``max_rank`` (4)."""
    shape = _shape(draw, spec)
    dim = dim_attr(draw, len(shape))
    x = values_along(draw, spec, dtype, shape, 0, False)
    kwargs = {"dim": dim, "half_to_float": attr(draw, spec, "half_to_float")}
    return Call(op, (Tensor(x),), kwargs)

