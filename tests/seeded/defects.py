"""Backends with one seeded defect each: the harness must catch every one, and nothing else.

Each is the reference backend with a single, realistic bug. ``DEFECTS`` says which
clause must fail and which clause families may fail alongside (a defect in the
debug handle map shows up both in PRE-004 and the DBG clauses, for example);
tests/test_seeded_defects.py certifies them all in one run and checks exactly
that. Every backend is also an attribute of this module, so
``tests/seeded/defects.py:<name>`` certifies it from the command line.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import re
import threading
import time
import weakref
from dataclasses import dataclass

import numpy as np

from conformance.api import (
    Backend,
    BackendDetails,
    BackendError,
    BackendRegistry,
    BackendUnderTest,
    DataEntry,
    Error,
    NamedDataStoreOutput,
    PreprocessResult,
)
from reference_backend import FORMAT_VERSION, ReferenceBackend, ReferenceRuntime, backend_under_test
from reference_backend import blob as blob_format
from reference_backend.kernels import KERNELS
from reference_backend.kernels._dtypes import bfloat16, float16, result_type
from reference_backend.preprocess import lower

_REFERENCE = backend_under_test()
TARGET_OP = "aten.maximum.default"
"""The op whose programs make the crashing and hanging backends crash or hang, so
that one check (its NUM check) pays for it and the rest of the run completes."""


@dataclass(frozen=True)
class Defect:
    backend: BackendUnderTest
    must_fail: tuple[str, ...]
    """Clauses that must come out failing."""
    may_fail: tuple[str, ...] = ()
    """Other clause families allowed to fail as a consequence of the same defect."""
    categories: tuple[str, ...] = ()
    """If given, the category the must-fail results must have (CRASH, TIMEOUT)."""


DEFECTS: dict[str, Defect] = {}


def _make(name, *, details=ReferenceBackend, runtime=None, registry=None, manifest=None):
    return BackendUnderTest(
        name=f"seeded-{name.replace('_', '-')}",
        details=details,
        runtime=runtime if runtime is not None else ReferenceRuntime(),
        version="seeded",
        manifest=manifest or _REFERENCE.manifest,
        registry=registry,
        description=f"the reference with one seeded defect: {name}",
    )


def defect(name, must_fail, may_fail=(), categories=(), **parts):
    backend = _make(name, **parts)
    DEFECTS[name] = Defect(backend, tuple(must_fail), tuple(may_fail), tuple(categories))
    globals()[name] = backend
    return backend


def _with(op, fn):
    table = dict(KERNELS)
    table[op] = fn
    return ReferenceRuntime(kernels=table)


# -- NUM: wrong numbers -----------------------------------------------------------------------

_add = KERNELS["aten.add.Tensor"]


def _add_broadcast_off_by_one(self, other, *, alpha=1):
    out = _add(self, other, alpha=alpha)
    if np.shape(self) != np.shape(other) and out.ndim and out.shape[-1] > 1:
        return np.roll(out, 1, axis=-1)  # indexes the broadcast operand one element late
    return out


defect("broadcast_off_by_one", ["NUM-001"], runtime=_with("aten.add.Tensor", _add_broadcast_off_by_one))


def _add_int8_saturating(self, other, *, alpha=1):
    out = _add(self, other, alpha=alpha)
    if out.dtype == np.int8:
        wide = np.asarray(self, np.int64) + alpha * np.asarray(other, np.int64)
        return np.clip(wide, -128, 127).astype(np.int8)  # saturates where PyTorch wraps
    return out


defect("int8_add_saturates", ["NUM-001"], runtime=_with("aten.add.Tensor", _add_int8_saturating))


def _add_refuses_empty(self, other, *, alpha=1):
    if np.size(self) == 0 or np.size(other) == 0:
        raise ValueError("empty tensors are not supported")
    return _add(self, other, alpha=alpha)


defect("empty_tensor_fails", ["NUM-001"], runtime=_with("aten.add.Tensor", _add_refuses_empty))

defect(
    "nan_dropped_by_max",
    ["NUM-001"],
    runtime=_with(TARGET_OP, lambda self, other: np.fmax(self, other).astype(result_type(self, other))),
)

_div_mode = KERNELS["aten.div.Tensor_mode"]


def _div_floor_truncates(self, other, *, rounding_mode=None):
    if rounding_mode == "floor" and np.asarray(self).dtype.kind in "iu":
        rounding_mode = "trunc"  # integer floor division rounding toward zero
    return _div_mode(self, other, rounding_mode=rounding_mode)


defect("int_div_rounds_toward_zero", ["NUM-001"], runtime=_with("aten.div.Tensor_mode", _div_floor_truncates))

_remainder = KERNELS["aten.remainder.Tensor"]


def _remainder_c_sign(self, other):
    out = _remainder(self, other)
    return np.fmod(np.asarray(self, out.dtype), np.asarray(other, out.dtype)).astype(out.dtype)  # sign of the dividend


defect("remainder_takes_dividend_sign", ["NUM-001"], runtime=_with("aten.remainder.Tensor", _remainder_c_sign))

_round = KERNELS["aten.round.default"]


def _round_half_up(self):
    if self.dtype.kind == "f" or self.dtype.name == "bfloat16":
        return np.floor(self.astype(np.float64) + 0.5).astype(self.dtype)  # half up, not half to even
    return _round(self)


defect("round_half_up", ["NUM-001"], runtime=_with("aten.round.default", _round_half_up))

_sum = KERNELS["aten.sum.dim_IntList"]


def _sum_half_accumulator(self, dim, keepdim=False, *, dtype=None):
    if self.dtype == float16 and dtype is None:
        axes = tuple(range(self.ndim)) if not dim else tuple(d % max(self.ndim, 1) for d in dim)
        return np.asarray(np.sum(self, axis=axes, keepdims=keepdim, dtype=np.float16))  # no float32 accumulation
    return _sum(self, dim, keepdim, dtype=dtype)


defect("float16_sum_accumulates_in_float16", ["NUM-001"], runtime=_with("aten.sum.dim_IntList", _sum_half_accumulator))


def _softmax_unstable(self, dim, half_to_float):
    e = np.exp(self.astype(np.float32))  # no max subtraction: overflows for large logits
    return (e / e.sum(axis=dim, keepdims=True)).astype(self.dtype)


defect("softmax_without_max_subtraction", ["NUM-001"], runtime=_with("aten._softmax.default", _softmax_unstable))

_gelu = KERNELS["aten.gelu.default"]
defect(
    "gelu_always_tanh",
    ["NUM-001"],
    runtime=_with("aten.gelu.default", lambda self, *, approximate="none": _gelu(self, approximate="tanh")),
)


def _layer_norm_unbiased(input, normalized_shape, weight, bias, eps):  # noqa: A002 - ATen's names
    axes = tuple(range(input.ndim - len(normalized_shape), input.ndim))
    x = input.astype(np.float32)
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True, ddof=1)  # unbiased: layer_norm uses the biased variance
    rstd = 1 / np.sqrt(var + eps)
    out = (x - mean) * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out.astype(input.dtype), mean.astype(input.dtype), rstd.astype(input.dtype)


defect("layer_norm_unbiased_variance", ["NUM-001"], runtime=_with("aten.native_layer_norm.default", _layer_norm_unbiased))

_conv = KERNELS["aten.convolution.default"]


def _conv_pads_one_side(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):  # noqa: A002
    if transposed or not any(padding):
        return _conv(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    widths = [(0, 0), (0, 0)] + [(2 * p, 0) for p in padding]  # all padding before, none after
    return _conv(np.pad(input, widths), weight, bias, stride, [0] * len(padding), dilation, transposed, output_padding, groups)


defect("conv_pads_one_side", ["NUM-001"], runtime=_with("aten.convolution.default", _conv_pads_one_side))


# -- NUM: outputs some calls define (op spec defined_outputs) and Scalar outputs ------------------------

_embedding_bag = KERNELS["aten._embedding_bag.default"]


def _embedding_bag_without_max_indices(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                                       per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """An inference kernel that computes the bags and fills the bookkeeping outputs with zeros: right
    where eager leaves them undefined (sum mode, mean's max_indices), wrong for max's max_indices."""
    out = _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
                         include_last_offset, padding_idx)
    return out[0], out[1], out[2] if mode else np.full_like(out[2], -1), np.zeros_like(out[3])


defect("embedding_bag_without_max_indices", ["NUM-001"],
       runtime=_with("aten._embedding_bag.default", _embedding_bag_without_max_indices))


def _item_through_float32(self):
    value = KERNELS["aten._local_scalar_dense.default"](self)
    return np.float64(np.float32(value)) if isinstance(value, np.floating) else value  # a float EValue written as float


defect("item_rounds_to_float32", ["NUM-001"], runtime=_with("aten._local_scalar_dense.default", _item_through_float32))


# -- NUM: random values, judged by law (op spec values; conformance/oracle/laws.py) -------------------------

_rand = KERNELS["aten.rand.default"]


def _rand_constant(size, *, dtype=None):
    return np.full_like(_rand(size, dtype=dtype), 0.5)  # a generator that was never seeded, or stuck


defect("rand_constant", ["NUM-001"], runtime=_with("aten.rand.default", _rand_constant))


def _rand_shifted(size, *, dtype=None):
    u = _rand(size, dtype=dtype)
    return (0.05 + 0.95 * u.astype(np.float64)).astype(u.dtype)  # still in [0, 1), never below 0.05


defect("rand_shifted", ["NUM-001"], runtime=_with("aten.rand.default", _rand_shifted))

_randperm = KERNELS["aten.randperm.default"]


def _randperm_repeats(n, *, dtype=np.int64):
    out = _randperm(n, dtype=dtype)
    if out.size > 1:
        out[-1] = out[0]  # an off-by-one in the shuffle's swap: one value twice, one missing
    return out


defect("randperm_repeats_an_element", ["NUM-001"], runtime=_with("aten.randperm.default", _randperm_repeats))

_dropout = KERNELS["aten.native_dropout.default"]


def _dropout_unscaled(input, p, train):  # noqa: A002 - ATen's name
    out, mask = _dropout(input, p, train)
    if train is None or train:
        out = (input * mask).astype(input.dtype)  # the mask applied, the 1/(1-p) scale forgotten
    return out, mask


defect("dropout_does_not_scale", ["NUM-001"], runtime=_with("aten.native_dropout.default", _dropout_unscaled))


def _resize_zero_filled(self, size):
    return np.zeros(tuple(size), dtype=self.dtype)  # allocates the new shape and forgets the old values


defect("resize_loses_values", ["NUM-001"], runtime=_with("aten.resize_.default", _resize_zero_filled))



def _depthwise_first_filter(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):  # noqa: A002
    """A depthwise convolution (one group per channel) that applies the first channel's filter to
    every channel: a weight-layout bug of the kind depthwise kernels have."""
    if groups > 1 and groups == input.shape[1] and not transposed:
        weight = np.broadcast_to(weight[:1], weight.shape).copy()
    return _conv(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


_batch_norm = KERNELS["aten._native_batch_norm_legit.default"]


def _batch_norm_keeps_running_stats(input, weight, bias, running_mean, running_var, training, momentum, eps):  # noqa: A002
    """Training batch norm that normalizes right but updates copies of the running statistics: the
    in-place update of the schema's Tensor(a!) arguments is lost (the program returns them)."""
    stats = [None if t is None else np.array(t) for t in (running_mean, running_var)]
    return _batch_norm(input, weight, bias, *stats, training, momentum, eps)


defect(
    "batch_norm_running_stats_not_updated",
    ["NUM-001"],
    runtime=_with("aten._native_batch_norm_legit.default", _batch_norm_keeps_running_stats),
)


MODEL_DEFECTS: dict[str, BackendUnderTest] = {
    "depthwise_conv_first_filter": _make("depthwise_conv_first_filter", runtime=_with("aten.convolution.default", _depthwise_first_filter)),
}
"""Defects in an interior op of a model (MOD-001 must fail and name the op: tests/test_models.py).
Not in DEFECTS: the seeded profile has no models, and its one run stays short."""
globals().update(MODEL_DEFECTS)


# -- QNT: quantized programs ------------------------------------------------------------------

_DEQUANTIZE = "quantized_decomposed.dequantize_per_tensor.default"
_QUANTIZE = "quantized_decomposed.quantize_per_tensor.default"


class _FoldsQuantizePairs(ReferenceBackend):
    """A backend that "optimizes" quantize -> dequantize pairs away (x stays float where the program
    says it was quantized): outputs close to the reference's but between its quantization steps."""

    @staticmethod
    def preprocess(edge_program, compile_specs):
        from conformance.api.ops import op_name
        from conformance.programs import copy_program

        program = copy_program(edge_program)
        graph = program.graph
        for node in list(graph.nodes):
            source = node.args[0] if node.op == "call_function" and node.args else None
            if op_name(node.target) == _DEQUANTIZE and getattr(source, "op", None) == "call_function" and op_name(source.target) == _QUANTIZE:
                node.replace_all_uses_with(source.args[0])
        graph.eliminate_dead_code()
        program.graph_module.recompile()
        return lower(program, compile_specs)


def _dequantize_channel_zero_scale(input, scales, zero_points, axis, quant_min, quant_max, dtype, out_dtype=None):
    """Per-channel dequantize that reads every channel's scale from channel 0: a per-channel
    weight layout bug (per-tensor code reused for per-channel weights)."""
    scales = np.full_like(np.asarray(scales), np.asarray(scales).reshape(-1)[0])
    return _dequantize_per_channel(input, scales, zero_points, axis, quant_min, quant_max, dtype, out_dtype=out_dtype)


_dequantize_per_channel = KERNELS["quantized_decomposed.dequantize_per_channel.default"]

QUANTIZED_DEFECTS: dict[str, BackendUnderTest] = {
    "quantize_pairs_folded_away": _make("quantize_pairs_folded_away", details=_FoldsQuantizePairs),
    "per_channel_scale_of_channel_0": _make(
        "per_channel_scale_of_channel_0",
        runtime=_with("quantized_decomposed.dequantize_per_channel.default", _dequantize_channel_zero_scale),
    ),
}
"""Defects of quantized programs (tests/test_quantized.py certifies them on the quantized profile's
QNT checks): folding q/dq pairs away must fail QNT-003 (values off the grid); one scale for every
channel must fail QNT-001 on the per-channel convolutions and linears. Not in DEFECTS, like
MODEL_DEFECTS: the seeded profile's run stays short."""
globals().update(QUANTIZED_DEFECTS)


# -- Partial delegation ------------------------------------------------------------------------


class _MaxPoolOnFallback(ReferenceBackend):
    """Takes every op but max pooling. Given PARTIAL_DELEGATION it takes the program anyway, runs the
    pooling on its "fallback" (the same kernels: the outputs are right) and names only the other
    nodes in its debug_handle_map, as ExecuTorch's XNNPACK does with max_pool2d_with_indices."""

    @staticmethod
    def preprocess(edge_program, compile_specs):
        from conformance.api import PARTIAL_DELEGATION
        from conformance.api.ops import op_name

        specs = [c for c in compile_specs if c != PARTIAL_DELEGATION]
        pooled = {n.meta.get("debug_handle") for n in edge_program.graph.nodes
                  if n.op == "call_function" and op_name(n.target).startswith("aten.max_pool2d")}
        if pooled and len(specs) == len(compile_specs):
            raise BackendError(Error.NotSupported, "max pooling is not supported")
        result = lower(edge_program, specs)
        if pooled:
            kept = {k: tuple(h for h in v if h not in pooled) for k, v in (result.debug_handle_map or {}).items()}
            result.debug_handle_map = {k: v for k, v in kept.items() if v}
        return result


PARTIAL_BACKENDS: dict[str, BackendUnderTest] = {
    "partial_max_pool_on_fallback": dataclasses.replace(
        _make("partial_max_pool_on_fallback", details=_MaxPoolOnFallback), partial_delegation=True
    ),
    "partial_with_conv_padded_one_side": dataclasses.replace(
        _make("partial_with_conv_padded_one_side", details=_MaxPoolOnFallback,
              runtime=_with("aten.convolution.default", _conv_pads_one_side)),
        partial_delegation=True,
    ),
}
"""Backends that delegate part of a model (tests/test_partial_delegation.py): the whole-program checks
report the fraction they took and never count it a pass; a wrong op inside the delegate still fails."""
globals().update(PARTIAL_BACKENDS)

_to_copy = KERNELS["aten._to_copy.default"]


def _cast_rounds(self, *, dtype=None):
    if dtype is not None and np.dtype(dtype).kind in "iu" and (self.dtype.kind == "f" or self.dtype.name == "bfloat16"):
        return np.round(self.astype(np.float64)).astype(dtype)  # rounds where C++ truncates
    return _to_copy(self, dtype=dtype)


defect("float_to_int_cast_rounds", ["NUM-001"], runtime=_with("aten._to_copy.default", _cast_rounds))

def _quantize_half_away_from_zero(input, scale, zero_point, quant_min, quant_max, dtype):
    scaled = np.asarray(input).astype(np.float32) * np.float32(1.0 / scale)
    wide = scaled.astype(np.float64)
    rounded = np.copysign(np.floor(np.abs(wide) + 0.5), wide).astype(np.float32)  # C's roundf, not half to even
    shifted = rounded + np.float32(zero_point)
    return np.clip(shifted, np.float32(quant_min), np.float32(quant_max)).astype(dtype)


defect(
    "quantize_rounds_half_away_from_zero",
    ["NUM-001"],
    runtime=_with("quantized_decomposed.quantize_per_tensor.default", _quantize_half_away_from_zero),
)

# -- PRE: the ahead-of-time half ----------------------------------------------------------------


class NondeterministicBlob(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        result = lower(edge_program, compile_specs)
        # Name the weights with a fresh random suffix on every call (keys end up in the blob).
        salt = os.urandom(4).hex()
        program = blob_format.read(result.processed_bytes)
        renamed = {key: f"{key}#{salt}" for _, key in program.constants}
        program = blob_format.Program(
            program.symbols, program.values, program.inputs, program.outputs,
            tuple((vid, renamed[key]) for vid, key in program.constants), program.instructions,
        )
        store = NamedDataStoreOutput({renamed[k]: v for k, v in result.data_store_output.entries.items()})
        return PreprocessResult(blob_format.write(program), result.debug_handle_map, store)


defect("nondeterministic_blob", ["PRE-002"], may_fail=["PRE"], details=NondeterministicBlob)  # PRE-007 compares blobs too


class MutatesProgram(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        for node in edge_program.graph.nodes:  # "normalizes" the handles in place
            if "debug_handle" in node.meta:
                node.meta["debug_handle"] += 1000
        return lower(edge_program, compile_specs)


defect("program_mutated_in_preprocess", ["PRE-003"], details=MutatesProgram)


class DanglingDebugHandles(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        result = lower(edge_program, compile_specs)
        result.debug_handle_map = {k: tuple(h + 1000 for h in v) for k, v in result.debug_handle_map.items()}
        return result


defect("debug_handle_map_points_at_nothing", ["PRE-004"], may_fail=["DBG"], details=DanglingDebugHandles)

_GARBAGE = dict(KERNELS)
_GARBAGE["aten.digamma.default"] = lambda self: np.zeros_like(self)  # "supports" it, computes nothing


class AcceptsUnsupported(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        return lower(edge_program, compile_specs, kernels=_GARBAGE)


defect(
    "unsupported_op_accepted_then_wrong",
    ["PRE-006"],
    details=AcceptsUnsupported,
    runtime=ReferenceRuntime(kernels=_GARBAGE),
)


class RefusesWithKeyError(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        try:
            return lower(edge_program, compile_specs)
        except BackendError as exc:
            raise KeyError(exc.message) from None


defect("unsupported_op_refused_with_keyerror", ["PRE-006"], details=RefusesWithKeyError)


class NamedDataViews(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        result = lower(edge_program, compile_specs)
        entries = {k: DataEntry(memoryview(v.data), v.alignment) for k, v in result.data_store_output.entries.items()}
        result.data_store_output = NamedDataStoreOutput(entries)
        return result


defect("named_data_not_bytes", ["PRE-005"], details=NamedDataViews)


class MultimethodReversed(ReferenceBackend):
    @classmethod
    def preprocess_multimethod(cls, edge_programs, compile_specs):
        out = super().preprocess_multimethod(edge_programs, compile_specs)
        return {method: list(reversed(results)) for method, results in out.items()}


defect("multimethod_results_reversed", ["PRE-007"], details=MultimethodReversed)


class StripsSourceInfo(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        for node in edge_program.graph.nodes:  # "the blob must not carry source paths": strips them in place
            node.meta.pop("stack_trace", None)
            node.meta.pop("nn_module_stack", None)
        return lower(edge_program, compile_specs)


defect("preprocess_strips_source_info", ["PRE-003"], details=StripsSourceInfo)


class ReplacesVal(BackendDetails):
    """Writes the shapes it lowered for back into the caller's nodes, as contiguous meta tensors."""

    @staticmethod
    def preprocess(edge_program, compile_specs):
        import torch

        result = lower(edge_program, compile_specs)
        for node in edge_program.graph.nodes:
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                node.meta["val"] = torch.empty(val.shape, dtype=val.dtype, device="meta")
        return result


defect("preprocess_replaces_val", ["PRE-003"], details=ReplacesVal)


def _write_interning(program, names):
    """blob.write, with ``names`` put in the string table first, in their iteration order."""
    import types

    class Interning(blob_format._Writer):
        def __init__(self):
            super().__init__()
            for name in names:
                self.string(name)

    write = types.FunctionType(blob_format.write.__code__, {**vars(blob_format), "_Writer": Interning})
    return write(program)


class HashSeedDependentBlob(BackendDetails):
    """Interns the op names up front from the set of ops the program uses: a set of str iterates in
    an order that depends on the process's hash seed, so each process writes another string table."""

    @staticmethod
    def preprocess(edge_program, compile_specs):
        result = lower(edge_program, compile_specs)
        program = blob_format.read(result.processed_bytes)
        ops = {ins.op for ins in program.instructions}
        return PreprocessResult(_write_interning(program, ops), result.debug_handle_map, result.data_store_output)


# Same bytes on every call within a process (PRE-002 passes), different bytes across processes.
defect("blob_depends_on_hash_seed", ["PRE-008"], details=HashSeedDependentBlob)

# -- RT: the runtime lifecycle ------------------------------------------------------------------


class Unavailable(ReferenceRuntime):
    def is_available(self):
        return False


defect("reports_unavailable", ["RT-001"], runtime=Unavailable())


class SharedConstants(ReferenceRuntime):
    """Keeps weights in one table per runtime, keyed by value id: the last init wins for every handle."""

    def __init__(self):
        super().__init__()
        self._shared: dict[int, np.ndarray] = {}

    def _load_constants(self, program, context):
        self._shared.update(super()._load_constants(program, context))
        return self._shared


# One table for every handle also corrupts the single-op programs NUM runs one after another.
defect("handles_share_state", ["RT-003"], may_fail=["RT", "NUM"], runtime=SharedConstants())

_RETAINED: list = []


class LeakyDestroy(ReferenceRuntime):
    def destroy(self, handle):
        _RETAINED.append(handle.plan)  # "keeps it for reuse" and never lets go
        super().destroy(handle)


defect("destroy_leaks", ["RT-016"], runtime=LeakyDestroy())


_LIBC = ctypes.CDLL(None)
_LIBC.calloc.restype = ctypes.c_void_p
_LIBC.calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_NATIVE_WORKSPACE = 50 << 20
_EXECUTE_SCRATCH = 64 << 10


class LeaksWorkspace(ReferenceRuntime):
    """init callocs a 50 MB native workspace for the handle; destroy forgets to free it."""

    def init(self, context, processed, compile_specs):
        handle = super().init(context, processed, compile_specs)
        workspace = _LIBC.calloc(1, _NATIVE_WORKSPACE)
        if not workspace:
            raise BackendError(Error.MemoryAllocationFailed, "no memory for the workspace")
        ctypes.memset(workspace, 0x5A, 4096)  # writes its header page: the rest stays untouched (virtual)
        handle.plan.workspace = workspace
        return handle


defect("init_leaks_native_memory", ["RT-016"], runtime=LeaksWorkspace())


class LeaksScratch(ReferenceRuntime):
    """Every execute callocs (and fills) a 64 KiB native scratch buffer it never frees."""

    def execute(self, context, handle, args):
        scratch = _LIBC.calloc(1, _EXECUTE_SCRATCH)
        if scratch:
            ctypes.memset(scratch, 0, _EXECUTE_SCRATCH)
        return super().execute(context, handle, args)


defect("execute_leaks_native_memory", ["RT-018"], runtime=LeaksScratch())


class KeepsExecuteHistory(ReferenceRuntime):
    """Keeps a copy of every execute's inputs and outputs "for debugging", without bound."""

    def __init__(self):
        super().__init__()
        self._history: list = []

    def execute(self, context, handle, args):
        status = super().execute(context, handle, args)
        self._history.append([np.array(a.value) for a in args if isinstance(a.value, np.ndarray)])
        return status


defect("execute_leaks_python_memory", ["RT-018"], runtime=KeepsExecuteHistory())


class RecyclesHandles(ReferenceRuntime):
    """Keeps destroyed handle objects on a free list and hands them out again from init."""

    def __init__(self):
        super().__init__()
        self._free: list = []

    def init(self, context, processed, compile_specs):
        handle = super().init(context, processed, compile_specs)
        with self._lock:
            if not self._free:
                return handle
            recycled = self._free.pop()
            self._live.discard(handle)
            recycled.plan, handle.plan = handle.plan, None
            self._live.add(recycled)
        return recycled

    def destroy(self, handle):
        super().destroy(handle)
        with self._lock:
            self._free.append(handle)


defect("destroyed_handle_revived_by_init", ["RT-019"], runtime=RecyclesHandles())


class DestroyIsNoop(ReferenceRuntime):
    def destroy(self, handle):
        return None


defect("destroy_does_nothing", ["RT-006"], may_fail=["RT"], runtime=DestroyIsNoop())


class TrustsHandles(ReferenceRuntime):
    def _plan_of(self, handle):
        return handle.plan  # no check that it is one of ours


defect("foreign_handle_crashes", ["RT-007"], may_fail=["RT"], runtime=TrustsHandles())


class NoArityCheck(ReferenceRuntime):
    def _bind_inputs(self, plan, args):
        program = plan.program
        n = len(program.inputs) + len(program.outputs)
        return super()._bind_inputs(plan, (list(args) + [args[-1]] * n)[:n] if args else args)


defect("no_arity_check", ["RT-008"], runtime=NoArityCheck())


class CastsInputs(ReferenceRuntime):
    def _check_tensor(self, plan, value_id, array, what, symbols):
        array = array.astype(plan.dtypes[value_id])  # silently converts instead of refusing
        return super()._check_tensor(plan, value_id, array, what, symbols)

    def _bind_inputs(self, plan, args):
        from conformance.api import EValue

        fixed = list(args)
        for pos, vid in enumerate(plan.program.inputs[: len(fixed)]):
            if isinstance(fixed[pos], EValue) and isinstance(fixed[pos].value, np.ndarray):
                fixed[pos] = EValue(fixed[pos].value.astype(plan.dtypes[vid]))
        return super()._bind_inputs(plan, fixed)


defect("no_dtype_check", ["RT-009"], runtime=CastsInputs())


class ResizesInputs(ReferenceRuntime):
    def _bind_inputs(self, plan, args):
        from conformance.api import EValue
        from reference_backend.blob import DimKind

        fixed = list(args)
        for pos, vid in enumerate(plan.program.inputs[: len(fixed)]):
            dims = plan.program.values[vid].dims
            value = fixed[pos].value if isinstance(fixed[pos], EValue) else None
            if isinstance(value, np.ndarray) and all(d.kind is DimKind.STATIC for d in dims):
                fixed[pos] = EValue(np.resize(value, tuple(d.value for d in dims)))  # reads whatever is there
        return super()._bind_inputs(plan, fixed)


defect("no_shape_check", ["RT-010"], runtime=ResizesInputs())


class KeepsOutputCapacity(ReferenceRuntime):
    """Writes an output whose size is known only at run time (nonzero's rows) into the leading
    elements of the buffer allocated at its upper bound, but never reports the size (no
    resize_tensor): the caller sees the whole capacity, the computed rows and then sentinel."""

    def _write_outputs(self, plan, slots, args):
        for position, value_id in enumerate(plan.program.outputs):
            arg = args[len(plan.program.inputs) + position]
            value = slots[value_id]
            if arg.capacity is not None and isinstance(value, np.ndarray) and value.shape != arg.value.shape:
                kept = arg.value.copy()
                kept.reshape(-1)[: value.size] = value.reshape(-1)
                slots[value_id] = kept
        return super()._write_outputs(plan, slots, args)


defect("keeps_output_capacity", ["NUM-001"], runtime=KeepsOutputCapacity())


class KeyErrorOnBadBlob(ReferenceRuntime):
    def init(self, context, processed, compile_specs):
        try:
            return super().init(context, processed, compile_specs)
        except BackendError as exc:
            if exc.error in (Error.InvalidProgram, Error.DelegateInvalidCompatibility):
                raise KeyError(f"bad blob: {exc.message}") from None
            raise


defect("init_raises_keyerror_on_bad_blob", ["RT-011", "RT-012"], may_fail=["RT"], runtime=KeyErrorOnBadBlob())


class TrustsTheHeader(ReferenceRuntime):
    """Decodes a blob once per header and reuses it: a truncated copy with the same header loads."""

    def __init__(self):
        super().__init__()
        self._decoded: dict[bytes, bytes] = {}

    def init(self, context, processed, compile_specs):
        data = bytes(processed.data)
        header = data[: blob_format.HEADER_SIZE]
        if len(data) >= blob_format.HEADER_SIZE and header in self._decoded:
            from conformance.api import FreeableBuffer

            processed = FreeableBuffer(self._decoded[header])
        handle = super().init(context, processed, compile_specs)
        self._decoded.setdefault(header, data)
        return handle


defect("truncated_blob_accepted", ["RT-012"], runtime=TrustsTheHeader())


class IgnoresVersion(ReferenceRuntime):
    def init(self, context, processed, compile_specs):
        from conformance.api import FreeableBuffer

        data = bytearray(processed.data)
        if len(data) >= blob_format.HEADER_SIZE:
            data[blob_format.VERSION_OFFSET : blob_format.VERSION_OFFSET + 2] = FORMAT_VERSION.to_bytes(2, "little")
        return super().init(context, FreeableBuffer(bytes(data)), compile_specs)


defect("blob_version_not_checked", ["RT-013"], runtime=IgnoresVersion())


class AllocatorErrorIsInternal(ReferenceRuntime):
    def _load_constants(self, program, context):
        allocator = context.runtime_allocator
        if allocator is not None and program.constants and allocator.capacity == 0:
            raise RuntimeError("could not allocate weights")  # surfaces as Error.Internal
        return super()._load_constants(program, context)

    def execute(self, context, handle, args):
        temp = context.temp_allocator
        if temp is not None and temp.capacity == 0:
            raise BackendError(Error.Internal, "scratch allocation failed")
        return super().execute(context, handle, args)


defect("allocator_exhaustion_misreported", ["RT-014"], runtime=AllocatorErrorIsInternal())


class RacyScratch(ReferenceRuntime):
    """Stages inputs in one scratch slot per runtime: concurrent executes read each other's inputs."""

    def execute(self, context, handle, args):
        self._scratch = [a for a in args]
        time.sleep(0.002)  # lets another thread's execute overwrite the slot
        return super().execute(context, handle, self._scratch)


defect("concurrent_executes_race", ["RT-015"], runtime=RacyScratch())


class ClobbersInputs(ReferenceRuntime):
    def execute(self, context, handle, args):
        status = super().execute(context, handle, args)
        plan = self._plan_of(handle)
        for arg in args[: len(plan.program.inputs)]:
            if isinstance(arg.value, np.ndarray) and arg.value.flags.writeable:
                arg.value[...] = 0  # reuses the input buffers as scratch afterwards
        return status


defect("execute_overwrites_inputs", ["RT-017"], runtime=ClobbersInputs())


class LazyDecode(ReferenceRuntime):
    """Keeps a view of the processed buffer and decodes it at the first execute."""

    def init(self, context, processed, compile_specs):
        handle = super().init(context, processed, compile_specs)
        handle.plan.lazy_view = processed.data
        return handle

    def execute(self, context, handle, args):
        plan = self._plan_of(handle)
        view = getattr(plan, "lazy_view", None)
        if view is not None:
            blob_format.read(view)  # after free() these are poison bytes
        return super().execute(context, handle, args)


defect("keeps_view_of_processed_buffer", ["RT-005"], runtime=LazyDecode())


class FirstResultForever(ReferenceRuntime):
    """Remembers each handle's first outputs and returns them ever after, whatever the inputs."""

    def __init__(self):
        super().__init__()
        self._first = weakref.WeakKeyDictionary()

    def execute(self, context, handle, args):
        plan = self._plan_of(handle)
        n_in = len(plan.program.inputs)
        if handle in self._first:
            for arg, value in zip(args[n_in:], self._first[handle]):
                np.copyto(arg.value, value)
            return Error.Ok
        status = super().execute(context, handle, args)
        self._first[handle] = [np.array(a.value) for a in args[n_in:]]
        return status


defect("handle_keeps_first_result", ["RT-004"], runtime=FirstResultForever())

# -- REG: the registry ------------------------------------------------------------------------


class DuplicateReplaces(BackendRegistry):
    def register_backend(self, backend):
        for i, entry in enumerate(self._table):
            if entry.name == backend.name:
                self._table[i] = backend
                return Error.Ok
        return super().register_backend(backend)


class EmptyNameAccepted(BackendRegistry):
    def register_backend(self, backend):
        if isinstance(backend, Backend) and backend.name == "":
            self._table.append(backend)
            return Error.Ok
        return super().register_backend(backend)


class PrefixLookup(BackendRegistry):
    def get_backend_class(self, name):
        for entry in self._table:
            if name.startswith(entry.name):
                return entry.backend
        return None


class ReversedEnumeration(BackendRegistry):
    def get_backend_name(self, index):
        return super().get_backend_name(self.num_registered_backends() - 1 - index) if 0 <= index < self.num_registered_backends() else None


defect("seventeenth_registration_accepted", ["REG-001"], registry=lambda: BackendRegistry(max_backends=17))
defect("duplicate_registration_replaces", ["REG-002"], registry=DuplicateReplaces)
defect("empty_name_registers", ["REG-003"], registry=EmptyNameAccepted)
defect("lookup_matches_prefixes", ["REG-004"], may_fail=["REG"], registry=PrefixLookup)  # "stub-1" also finds "stub-10"
defect("enumeration_reversed", ["REG-005"], registry=ReversedEnumeration)

# -- DBG: debug handles and events ------------------------------------------------------------


class DropsDebugHandle(ReferenceRuntime):
    def execute(self, context, handle, args):
        try:
            return super().execute(context, handle, args)
        except BackendError as exc:
            raise BackendError(exc.error, exc.message) from None  # loses the failing instruction


defect("failure_without_debug_handle", ["DBG-001"], runtime=DropsDebugHandle())


class _OffsetTracer:
    def __init__(self, inner):
        self.inner = inner

    def log_profiling_delegate(self, name, delegate_debug_id, start_ns, end_ns, metadata=b""):
        self.inner.log_profiling_delegate(name, delegate_debug_id + 100, start_ns, end_ns, metadata)


class EventIdsOffset(ReferenceRuntime):
    def execute(self, context, handle, args):
        if context.event_tracer is not None:
            import copy

            context = copy.copy(context)
            context.event_tracer = _OffsetTracer(context.event_tracer)
        return super().execute(context, handle, args)


defect("events_name_unknown_ids", ["DBG-003"], runtime=EventIdsOffset())


class PartialMap(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        result = lower(edge_program, compile_specs)
        result.debug_handle_map = {k: v for k, v in result.debug_handle_map.items() if k != 0}
        return result


defect("debug_handle_map_incomplete", ["DBG-002"], may_fail=["DBG"], details=PartialMap)

# -- CRASH and TIMEOUT: the run must survive these --------------------------------------------


def _program_ops(handle_or_program) -> set[str]:
    plan = getattr(handle_or_program, "plan", None)
    if plan is not None:
        return {step.op for step in plan.steps}
    return set()


class SegfaultsOnMaximum(ReferenceRuntime):
    def execute(self, context, handle, args):
        if TARGET_OP in _program_ops(handle):
            ctypes.string_at(0)  # a null-pointer read: the process dies with SIGSEGV
        return super().execute(context, handle, args)


defect("execute_crashes_the_process", ["NUM-001"], categories=["CRASH"], runtime=SegfaultsOnMaximum())


class InitNeverReturns(ReferenceRuntime):
    def init(self, context, processed, compile_specs):
        handle = super().init(context, processed, compile_specs)
        if TARGET_OP in _program_ops(handle):
            threading.Event().wait()  # waits forever, interruptibly
        return handle


defect("init_never_returns", ["NUM-001"], categories=["TIMEOUT"], runtime=InitNeverReturns())


class ExecuteSpinsHoldingTheGil(ReferenceRuntime):
    def execute(self, context, handle, args):
        if TARGET_OP in _program_ops(handle):
            # Catastrophic backtracking: native code that never releases the GIL,
            # so no signal handler and no watchdog thread in this process can run.
            re.match(r"(a+)+$", "a" * 64 + "b")
        return super().execute(context, handle, args)


defect("execute_hangs_in_native_code", ["NUM-001"], categories=["TIMEOUT"], runtime=ExecuteSpinsHoldingTheGil())


class PreprocessLoops(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        from conformance.api.ops import op_name

        if any(n.op == "call_function" and op_name(n.target) == TARGET_OP for n in edge_program.graph.nodes):
            while True:
                time.sleep(0.05)
        return lower(edge_program, compile_specs)


defect("preprocess_never_returns", ["NUM-001"], categories=["TIMEOUT"], details=PreprocessLoops)


# -- Not a defect of the contract: a performance regression for the diff gate --------------------


class SleepsInExecute(ReferenceRuntime):
    """Sleeps CONFORMANCE_TEST_SLEEP_MS milliseconds in every execute (default 0)."""

    def execute(self, context, handle, args):
        time.sleep(float(os.environ.get("CONFORMANCE_TEST_SLEEP_MS", "0")) / 1000)
        return super().execute(context, handle, args)


sleepy = _make("sleepy", runtime=SleepsInExecute())



# -- NUM: the bugs real backends have (issue 9: edge values, precision, layouts, large outputs) --

_relu, _mul, _exp, _neg = (KERNELS[f"aten.{n}.default"] if n != "mul" else KERNELS["aten.mul.Tensor"] for n in ("relu", "mul", "exp", "neg"))


def _relu_nan_is_zero(self):
    x = np.asarray(self)
    return np.where(x > 0, x, np.zeros((), x.dtype)).astype(x.dtype) if x.dtype.kind == "f" or x.dtype == bfloat16 else _relu(self)


defect("relu_nan_is_zero", ["NUM-001"], runtime=_with("aten.relu.default", _relu_nan_is_zero))


def _mul_bf16_toward_zero(self, other):
    out = _mul(self, other)
    if out.dtype != bfloat16:
        return out
    wide = (np.asarray(self).astype(np.float32) * np.asarray(other).astype(np.float32)).astype(np.float32)
    return (wide.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32).astype(bfloat16)  # truncates the low bits


defect("bf16_mul_rounds_toward_zero", ["NUM-001"], runtime=_with("aten.mul.Tensor", _mul_bf16_toward_zero))


def _exp_in_float32(self):
    x = np.asarray(self)
    if x.dtype == np.float64:
        with np.errstate(over="ignore"):
            return np.exp(x.astype(np.float32)).astype(np.float64)  # float64 computed in float32
    return _exp(self)


defect("float64_exp_in_float32", ["NUM-001"], runtime=_with("aten.exp.default", _exp_in_float32))


def _neg_as_subtraction(self):
    x = np.asarray(self)
    return (np.zeros((), x.dtype) - x).astype(x.dtype) if x.dtype.kind == "f" else _neg(self)  # 0 - 0.0 is +0.0


defect("neg_loses_sign_of_zero", ["NUM-001"], runtime=_with("aten.neg.default", _neg_as_subtraction))


def _flush(a):
    a = np.asarray(a)
    if a.dtype.kind != "f":
        return a
    tiny = np.finfo(a.dtype).tiny
    return np.where(np.abs(a) < tiny, np.zeros((), a.dtype), a).astype(a.dtype)


defect("subnormal_inputs_flushed", ["NUM-001"], runtime=_with("aten.mul.Tensor", lambda self, other: _mul(_flush(self), _flush(other))))


def _mul_conjugates(self, other):
    out = _mul(self, other)
    return np.conj(out) if np.iscomplexobj(out) else out  # (ac - bd) - (ad + bc)i: the imaginary part's sign slips


defect("complex_mul_conjugates", ["NUM-001"], runtime=_with("aten.mul.Tensor", _mul_conjugates))


def _add_writes_first_4096(self, other, *, alpha=1):
    out = np.array(_add(self, other, alpha=alpha))
    if out.size > 4096:
        out.reshape(-1)[4096:] = 0  # a tiling bug: only the first tile of a large output is written
    return out


defect("large_output_partly_written", ["NUM-001"], runtime=_with("aten.add.Tensor", _add_writes_first_4096))

_max_pool2d = KERNELS["aten.max_pool2d.default"]


def _max_pool_zero_padding(self, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    pads = [padding] * 2 if isinstance(padding, int) else (list(padding) * 2)[:2]
    if not any(pads):
        return _max_pool2d(self, kernel_size, stride, padding, dilation, ceil_mode)
    x = np.asarray(self)
    width = [(0, 0)] * (x.ndim - 2) + [(pads[0], pads[0]), (pads[1], pads[1])]
    padded = np.pad(x, width, constant_values=0)  # pads with 0 where max pooling pads with -inf
    return _max_pool2d(padded, kernel_size, stride or kernel_size, (0,), dilation, ceil_mode)


defect("max_pool_pads_with_zero", ["NUM-001"], runtime=_with("aten.max_pool2d.default", _max_pool_zero_padding))


_max_pool_backward = KERNELS["aten.max_pool2d_with_indices_backward.default"]


def _max_pool_backward_by_rows(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """A kernel that views the gradient as one row per plane with reshape(planes, -1): an empty batch
    has no planes, and -1 cannot be inferred (the reference's own kernel had this bug until the
    backward ops' edge set reached it)."""
    x = np.asarray(self)
    np.asarray(grad_output).reshape(int(np.prod(x.shape[:-2])), -1)
    return _max_pool_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices)


defect("max_pool_backward_fails_on_an_empty_batch", ["NUM-001"],
       runtime=_with("aten.max_pool2d_with_indices_backward.default", _max_pool_backward_by_rows))


class ReadsBuffersAsContiguous(ReferenceRuntime):
    """Reads every input tensor's memory as if it were C-contiguous, ignoring its strides."""

    def execute(self, context, handle, args):
        from conformance.api import EValue

        fixed = []
        for a in args:
            v = a.value if isinstance(a, EValue) else None
            if isinstance(v, np.ndarray) and v.size and not v.flags.c_contiguous:
                v = np.lib.stride_tricks.as_strided(v, v.shape, np.empty(v.shape, v.dtype).strides).copy()
                a = EValue(v)
            fixed.append(a)
        return super().execute(context, handle, fixed)  # outputs are untouched, so they are the same objects


defect("strided_inputs_read_as_contiguous", ["NUM-001"], runtime=ReadsBuffersAsContiguous())

_sum_dims = KERNELS["aten.sum.dim_IntList"]


def _sum_negative_dims_for_rank_4(self, dim, keepdim=False, *, dtype=None):
    if dim:
        dim = [d + 4 if d < 0 else d for d in dim]  # normalizes negative dims as if every input were 4-d
    return _sum_dims(self, dim, keepdim, dtype=dtype)


defect("negative_dims_assume_rank_4", ["NUM-001"], runtime=_with("aten.sum.dim_IntList", _sum_negative_dims_for_rank_4))


def _sum_keepdim_ignored(self, dim, keepdim=False, *, dtype=None):
    return _sum_dims(self, dim, False, dtype=dtype)  # drops the reduced dims even with keepdim=True


defect("keepdim_ignored", ["NUM-001"], runtime=_with("aten.sum.dim_IntList", _sum_keepdim_ignored))


# -- NUM: what a refusal hides (issue 11: a check keeps drawing after a refusal) -----------------


def _program_input_shapes(edge_program) -> list[tuple[int, ...]]:
    return [tuple(int(d) for d in n.meta["val"].shape) for n in edge_program.graph.nodes if n.op == "placeholder" and "val" in n.meta]


def _refusing(op: str, refuse, crash=None):
    """A preprocess that refuses (BackendError NotSupported) programs of ``op`` whose input shapes
    ``refuse`` picks, and raises a plain exception (a crashing compiler pass) on those ``crash`` picks."""

    class Refusing(BackendDetails):
        @staticmethod
        def preprocess(edge_program, compile_specs):
            from conformance.api.ops import op_name

            if any(n.op == "call_function" and op_name(n.target) == op for n in edge_program.graph.nodes):
                shapes = _program_input_shapes(edge_program)
                if refuse(shapes):
                    raise BackendError(Error.NotSupported, f"{op}: this backend refuses inputs shaped {shapes}")
                if crash is not None and crash(shapes):
                    raise RuntimeError(f"internal error in LayoutPass on {shapes}")
            return lower(edge_program, compile_specs)

    return Refusing


def _without_claim(op: str, **fields):
    import dataclasses

    ops = {k: v for k, v in _REFERENCE.manifest.ops.items() if k != op}
    return dataclasses.replace(_REFERENCE.manifest, ops=ops, **fields)


def _claim_with_refusals(op: str, kinds: tuple[str, ...]):
    import dataclasses

    return dataclasses.replace(_REFERENCE.manifest, refuses={op: kinds})


def _empty_or_0d(shapes) -> bool:
    return any(len(s) == 0 or 0 in s for s in shapes)


defect(
    "unclaimed_op_refuses_empty_and_is_wrong_elsewhere",
    ["NUM-001"],
    details=_refusing("aten.sum.dim_IntList", _empty_or_0d),
    runtime=_with("aten.sum.dim_IntList", _sum_keepdim_ignored),
    manifest=_without_claim("aten.sum.dim_IntList"),
)
"""Not claimed; refuses empty and 0-d inputs (as XNNPACK does); ignores keepdim=True, which only the
attribute cases (after the empty one) meet. A check that stopped at the first refusal called it
NOT_SUPPORTED."""

defect(
    "unclaimed_op_lowering_crashes_on_rank_1",
    ["NUM-001"],
    categories=["PREPROCESS_FAIL"],
    details=_refusing("aten.maximum.default", _empty_or_0d, crash=lambda shapes: any(len(s) == 1 for s in shapes)),
    manifest=_without_claim("aten.maximum.default"),
)
"""Not claimed; refuses empty and 0-d inputs cleanly, but its lowering crashes (a plain exception,
not a refusal) on 1-d inputs, as ExecuTorch's XNNPACK lowering of prelu does on 1-3-d inputs."""

defect(
    "claimed_op_refuses_more_than_it_declares",
    ["NUM-001"],
    categories=["PREPROCESS_FAIL"],
    details=_refusing("aten.add.Tensor", _empty_or_0d),
    manifest=_claim_with_refusals("aten.add.Tensor", ("empty",)),
)
"""Claims add and declares it refuses empty tensors; it also refuses 0-d ones: only that fails."""


def _mixed_dtypes(edge_program) -> bool:
    dtypes = {n.meta["val"].dtype for n in edge_program.graph.nodes if n.op == "placeholder" and "val" in n.meta}
    return len(dtypes) > 1


class _RefusesPromotion(BackendDetails):
    """Refuses (cleanly) every program whose inputs are of more than one dtype, as XNNPACK does."""

    @staticmethod
    def preprocess(edge_program, compile_specs):
        if _mixed_dtypes(edge_program):
            raise BackendError(Error.NotSupported, "operands of mixed dtypes are not supported")
        return lower(edge_program, compile_specs)


def _maximum_maxps(self, other):
    return np.where(np.asarray(self) > np.asarray(other), self, other).astype(np.result_type(self, other))  # x86 maxps


defect(
    "maximum_drops_nan_and_refuses_promotion",
    ["NUM-001"],
    details=_RefusesPromotion,
    runtime=_with("aten.maximum.default", _maximum_maxps),
    manifest=dataclasses.replace(_REFERENCE.manifest, refuses={"*": ("mixed dtypes",)}),
)
"""maximum(NaN, 1) is 1 (maxps keeps the second operand when the first is NaN), as ExecuTorch's
XNNPACK maximum does; the backend refuses mixed dtypes and declares it. The edge values used to be
drawn with a mixed-dtype operand about half the time, and the refused case hid the NaN pairs: the
same-dtype edge directive (strategies/directed.py) meets them whatever the backend refuses."""


# -- Not defects of the contract: slow backends with a numeric bug, for batched edge sets ------------


class _SlowKernels(SleepsInExecute):
    def __init__(self, op, fn):
        table = dict(KERNELS)
        table[op] = fn
        super().__init__(kernels=table)


slow_negative_dims = dataclasses.replace(
    _make("slow_negative_dims", runtime=_SlowKernels("aten.sum.dim_IntList", _sum_negative_dims_for_rank_4)), batch_numerics=True
)
"""Sleeps CONFORMANCE_TEST_SLEEP_MS per execute (so the NUM check batches its edge set) and sums
the wrong dims for negative dims below rank 4: a failure inside a batch."""


# -- RT-016: resources other than memory that destroy forgets --------------------------------------


class OpensALogPerInit(ReferenceRuntime):
    """init opens a log file for the handle; destroy never closes it."""

    def init(self, context, processed, compile_specs):
        handle = super().init(context, processed, compile_specs)
        self.logs = [*getattr(self, "logs", []), open(os.devnull, "w")]  # noqa: SIM115 - the defect
        return handle


defect("init_leaks_a_file_descriptor", ["RT-016"], runtime=OpensALogPerInit())


class StartsAWorkerPerInit(ReferenceRuntime):
    """init starts a worker thread per handle; destroy never stops it (daemon, so a test process
    still exits: the harness counts native threads, not just the ones that block exit)."""

    def init(self, context, processed, compile_specs):
        handle = super().init(context, processed, compile_specs)
        threading.Thread(target=threading.Event().wait, args=(120,), daemon=True, name="backend-worker").start()
        return handle


defect("init_leaks_a_thread", ["RT-016"], runtime=StartsAWorkerPerInit())


# -- Input coverage (issue 27, item 6): same-byte-size arguments, one strided operand, constant weights,
# -- quantize ties. Each passed every check before the check it names was widened.


class ChecksInputsByByteCount(ReferenceRuntime):
    """Checks each input only by its byte count, as a runtime that memcpys inputs into planned
    buffers does: an input of another dtype or shape with the same number of bytes is taken and its
    bytes read as the program's dtype and shape."""

    def _bind_inputs(self, plan, args):
        from conformance.api import EValue
        from reference_backend.blob import DimKind

        program = plan.program
        if isinstance(args, (list, tuple)) and len(args) == len(program.inputs) + len(program.outputs):
            args = list(args)
            for position, value_id in enumerate(program.inputs):
                value = args[position].value if isinstance(args[position], EValue) else None
                dims = program.values[value_id].dims
                if not isinstance(value, np.ndarray) or any(d.kind is not DimKind.STATIC for d in dims):
                    continue
                dtype, shape = plan.dtypes[value_id], tuple(d.value for d in dims)
                if value.nbytes == np.empty(shape, dtype).nbytes and (value.dtype != dtype or value.shape != shape):
                    args[position] = EValue(np.ascontiguousarray(value).view(np.uint8).view(dtype).reshape(shape))
        return super()._bind_inputs(plan, args)


defect("inputs_checked_by_byte_count", ["RT-009", "RT-010"], runtime=ChecksInputsByByteCount())


class AddWalksOperandsWithFirstStrides(ReferenceRuntime):
    """add's kernel computes one set of strides, the first operand's, and walks both operands with
    it: right whenever the operands share a layout (both contiguous, both transposed), and with the
    first contiguous it reads the second operand's buffer as if it were contiguous."""

    def execute(self, context, handle, args):
        from conformance.api import EValue

        if "aten.add.Tensor" in _program_ops(handle) and len(args) >= 2:
            first, second = (a.value if isinstance(a, EValue) else None for a in args[:2])
            if (isinstance(first, np.ndarray) and isinstance(second, np.ndarray) and first.flags.c_contiguous
                    and second.size and not second.flags.c_contiguous):
                misread = np.lib.stride_tricks.as_strided(second, second.shape, np.empty(second.shape, second.dtype).strides)
                args = [args[0], EValue(misread.copy()), *args[2:]]
        return super().execute(context, handle, args)


defect("add_reads_second_operand_as_contiguous", ["NUM-001"], runtime=AddWalksOperandsWithFirstStrides())


class PacksConstantMatmulWeightsAsLinear(ReferenceRuntime):
    """Packs a constant matrix operand of addmm at init as if it were a linear layer's weight (stored
    [out_features, in_features], read transposed): right for a weight that arrives as an input,
    wrong for one in named data, the only kind a backend like XNNPACK delegates."""

    def _load_constants(self, program, context):
        from reference_backend.blob import Ref

        constants = super()._load_constants(program, context)
        for ins in program.instructions:
            mat2 = ins.args[2] if ins.op == "aten.addmm.default" and len(ins.args) > 2 else None
            if isinstance(mat2, Ref) and mat2.id in constants:
                weight = constants[mat2.id]
                k, n = weight.shape
                constants[mat2.id] = np.ascontiguousarray(weight.reshape(n, k).T)
        return constants


defect("constant_matmul_weight_packed_transposed", ["NUM-001"], runtime=PacksConstantMatmulWeightsAsLinear())


# -- NUM: verdicts at the margins (conformance/oracle/: derived bounds, half-type rounding) -------
# Each is wrong by less than a flat tolerance passed: the derived bound of an accumulating op, the
# 1-ULP rule and bias test of the half types, and relative tolerances on tiny results catch them.


def _conv_bfloat16_shifted(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):  # noqa: A002
    out = _conv(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    if out.dtype == bfloat16 and out.size:
        return (out.astype(np.float32) + 1.5).astype(bfloat16)  # a stray bias term: +1.5 on every element
    return out


defect("conv_bfloat16_adds_one_and_a_half", ["NUM-001"], runtime=_with("aten.convolution.default", _conv_bfloat16_shifted))


def _sum_scaled(self, dim, keepdim=False, *, dtype=None):
    out = _sum(self, dim, keepdim, dtype=dtype)
    if out.dtype == np.float32:
        return (out.astype(np.float64) * (1 + 1e-5)).astype(np.float32)  # a scale folded in twice, 84 ULP
    return out


defect("float32_sum_scaled_by_1e-5", ["NUM-001"], runtime=_with("aten.sum.dim_IntList", _sum_scaled))

_exp = KERNELS["aten.exp.default"]


def _exp_bfloat16_truncated(self):
    if np.asarray(self).dtype == bfloat16:
        wide = np.exp(np.asarray(self, np.float32))
        return (wide.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32).astype(bfloat16)  # drops the low bits: toward zero
    return _exp(self)


defect("exp_bfloat16_truncates", ["NUM-001"], runtime=_with("aten.exp.default", _exp_bfloat16_truncated))

_rsqrt = KERNELS["aten.rsqrt.default"]


def _rsqrt_off_at_the_top(self):
    out = _rsqrt(self)
    if out.dtype == np.float32:
        # a fast inverse square root whose initial guess saturates for the top binades: 1.5x off there
        return np.where(np.abs(np.asarray(self, np.float32)) > 1e38, out * np.float32(1.5), out).astype(np.float32)
    return out


defect("rsqrt_wrong_near_float32_max", ["NUM-001"], runtime=_with("aten.rsqrt.default", _rsqrt_off_at_the_top))

_layer_norm = KERNELS["aten.native_layer_norm.default"]


def _layer_norm_scaled(input, normalized_shape, weight, bias, eps):  # noqa: A002 - ATen's names
    out, mean, rstd = _layer_norm(input, normalized_shape, weight, bias, eps)
    if out.dtype == np.float32:  # a gain folded in as 1.0001: inside the flat atol 5e-4 + rtol 5e-5 once used here
        out = (out.astype(np.float64) * (1 + 1e-4)).astype(np.float32)
    return out, mean, rstd


defect("layer_norm_float32_scaled_by_1e-4", ["NUM-001"], runtime=_with("aten.native_layer_norm.default", _layer_norm_scaled))


def _div_half_floor_by_reciprocal(self, other, *, rounding_mode=None):
    out = _div_mode(self, other, rounding_mode=rounding_mode)
    half = {np.asarray(self).dtype, np.asarray(other).dtype} & {float16, bfloat16}
    if rounding_mode in ("floor", "trunc") and half and out.dtype in (float16, bfloat16):
        # a / b as a * (1 / b) with the reciprocal rounded to the half type: 6 / 3 becomes 1.99.. -> 1
        recip = (1 / np.asarray(other, np.float32)).astype(out.dtype).astype(np.float32)
        with np.errstate(all="ignore"):
            q = np.asarray(self, np.float32) * recip
            q = np.floor(q) if rounding_mode == "floor" else np.trunc(q)
        return np.where(np.isfinite(q), q, out.astype(np.float32)).astype(out.dtype)
    return out


defect("half_floor_division_off_by_one", ["NUM-001"], runtime=_with("aten.div.Tensor_mode", _div_half_floor_by_reciprocal))


# Correct variants: each computes what PyTorch computes, by another legitimate route; every one must
# certify (tests/test_seeded_defects.py). They prove the derived bounds fail no summation order.
VARIANTS: dict[str, BackendUnderTest] = {}


def variant(name, **parts):
    backend = _make(name, **parts)
    VARIANTS[name] = backend
    globals()[name] = backend
    return backend


def _lanes(x: np.ndarray, dim, out: np.dtype) -> tuple[np.ndarray, type]:
    """The terms of each output of sum(x, dim) along a last axis, in the accumulation type (float32,
    float64 for float64)."""
    acc = np.float64 if out == np.float64 else np.float32
    if x.ndim == 0:  # a 0-d input's sum over dim 0 or -1 is its one term
        return x.astype(acc).reshape(1), acc
    axes = tuple(range(x.ndim)) if not dim else tuple(d % x.ndim for d in dim)
    moved = np.moveaxis(x.astype(acc), axes, tuple(range(-len(axes), 0))) if axes else x.astype(acc)[..., None]
    return moved.reshape(moved.shape[: moved.ndim - max(len(axes), 1)] + (-1,)), acc


def _sum_reversed(self, dim, keepdim=False, *, dtype=None):
    """Sums in float32 (float64 for float64), last element first, one rounding per addition."""
    x = np.asarray(self)
    out = _sum(x, dim, keepdim, dtype=dtype)
    if out.dtype.kind != "f" or x.size == 0:
        return out
    flat, acc = _lanes(x, dim, out.dtype)
    total = np.zeros(flat.shape[:-1], acc)
    with np.errstate(all="ignore"):
        for k in range(flat.shape[-1] - 1, -1, -1):
            total = (total + flat[..., k]).astype(acc)
    return total.reshape(out.shape).astype(out.dtype)


def _sum_pairwise(self, dim, keepdim=False, *, dtype=None):
    """Pairwise (tree) summation in float32 (float64 for float64): halves added until one remains."""
    x = np.asarray(self)
    out = _sum(x, dim, keepdim, dtype=dtype)
    if out.dtype.kind != "f" or x.size == 0:
        return out
    level, acc = _lanes(x, dim, out.dtype)
    with np.errstate(all="ignore"):
        while level.shape[-1] > 1:
            if level.shape[-1] % 2:
                level = np.concatenate([level, np.zeros(level.shape[:-1] + (1,), acc)], axis=-1)
            level = (level[..., 0::2] + level[..., 1::2]).astype(acc)
    return level[..., 0].reshape(out.shape).astype(out.dtype)


_mm = KERNELS["aten.mm.default"]


def _mm_float64_accumulator(self, mat2):
    """float32 products accumulated in float64, then rounded once (a wider accumulator)."""
    if np.asarray(self).dtype == np.float32 and np.asarray(mat2).dtype == np.float32:
        return (np.asarray(self, np.float64) @ np.asarray(mat2, np.float64)).astype(np.float32)
    return _mm(self, mat2)


def _mm_float32_blocked(self, mat2):
    """float32 products accumulated in float32, K in blocks of 3 summed block by block."""
    a, b = np.asarray(self), np.asarray(mat2)
    if a.dtype != np.float32 or b.dtype != np.float32 or a.shape[1] == 0:
        return _mm(self, mat2)
    out = np.zeros((a.shape[0], b.shape[1]), np.float32)
    with np.errstate(all="ignore"):
        for k in range(0, a.shape[1], 3):
            out = (out + (a[:, k : k + 3] @ b[k : k + 3, :]).astype(np.float32)).astype(np.float32)
    return out


variant("sum_in_reverse_order", runtime=_with("aten.sum.dim_IntList", _sum_reversed))
variant("sum_pairwise", runtime=_with("aten.sum.dim_IntList", _sum_pairwise))
variant("mm_float64_accumulator", runtime=_with("aten.mm.default", _mm_float64_accumulator))
variant("mm_float32_blocked", runtime=_with("aten.mm.default", _mm_float32_blocked))
