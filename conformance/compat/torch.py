"""The private internals of torch the harness uses, each behind a version check with a public fallback.

Tested on torch 2.13.0 (CPU): the project's tests and checked-in reports, and a certification of the
reference in ``core-fp32`` with every fallback forced (tests/harness/test_compat.py). Outside
``TESTED`` (or with ``CONFORMANCE_COMPAT=public``) every function here takes its public route.

Deliberately not here: ``torch._ops.OpOverload`` (the type of ``torch.ops.aten.add.Tensor``) and its
``_schema`` (a ``torch.FunctionSchema``). They are the operator model every part of the harness works
in, named in the signatures of torch's public ``torch.library`` API and read by torch.export's own
serializer, unchanged since torch 1.13; there is no public alternative a fallback could use. Nor
``torch.utils._pytree``: its TreeSpec is the type of the public ``ModuleCallSignature.in_spec``/``out_spec``
and ``ExportedProgram.call_spec``, and torch 2.13 has no public module that makes one. Nor the
backends whose subject is a private torch API (``torch._lazy``, ``torch._C._jit_to_backend``,
``torch._inductor``): those adapters certify that API itself.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import threading
from collections.abc import Iterator
from typing import Any

from conformance import compat

TESTED = ((2, 13), (2, 14))
"""The torch releases the private routes were tested on: [2.13, 2.14)."""


_tested = compat.tested_range("torch", *TESTED)


def _route(name: str, probe) -> bool:
    return compat.private_route("torch", name, _tested, probe)


# ---------------------------------------------------------------------------------------------
# Building single-op programs without torch.export


def _probe_builder() -> str | None:
    import torch
    import torch.export.exported_program as exported_program
    from torch._subclasses.fake_tensor import DynamicOutputShapeException, FakeTensorMode  # noqa: F401
    from torch.fx.experimental.symbolic_shapes import ShapeEnv  # noqa: F401

    mode = FakeTensorMode()
    if not hasattr(mode, "fake_tensor_converter") or not hasattr(mode.fake_tensor_converter, "from_meta_and_device"):
        return "FakeTensorMode has no fake_tensor_converter.from_meta_and_device"
    if not hasattr(torch.fx.Graph(), "_graph_namespace"):
        return "torch.fx.Graph has no _graph_namespace"
    if not callable(getattr(exported_program, "_create_graph_module_for_export", None)):
        return "torch.export.exported_program has no _create_graph_module_for_export"
    return None


def builds_programs() -> bool:
    """Whether single-op programs are built directly (``conformance.programs.build_program``) rather than
    exported.

    Private route: the graph, signature and module call graph torch.export would give are assembled by
    hand, and every node's ``meta["val"]`` is a FakeTensor from a ``torch._subclasses`` FakeTensorMode
    (``fake_tensor_mode``, ``fake_like``, ``fake_from_meta``, ``sized_at_run_time``,
    ``reserve_node_names``): 2-5 ms a program against 50-300 ms for torch.export, so every drawn
    example gets its own static program. tests/harness/test_programs.py proves the built program equal
    to torch.export's for every specified op. Tested on torch 2.13.

    Public fallback: ``torch.export.export`` of a module making the call, with static shapes, through the
    program cache (``programs.program_for(call, export=True, dynamic=False)``): the program that test
    compares against, at torch.export's cost."""
    return _route("builds_programs", _probe_builder)


def fake_tensor_mode(*, symbolic: bool = False):
    """A new FakeTensorMode (``torch._subclasses``), with its own ShapeEnv when ``symbolic`` (a program whose
    output is data-dependent gets an unbacked symbol). Only the builder calls it, where
    ``builds_programs()`` holds; the fallback is torch.export's own (see ``builds_programs``)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    return FakeTensorMode(shape_env=ShapeEnv()) if symbolic else FakeTensorMode()


def fake_like(mode, tensor):
    """``mode.from_tensor(tensor)`` for a fresh CPU tensor (no storage offset, not a parameter), without
    describing and converting the real tensor: a FakeTensor over an empty meta tensor of the same sizes,
    strides and dtype, through the converter's ``from_meta_and_device`` (a fifth of from_tensor's time).
    Builder only (``builds_programs``); ``mode.from_tensor`` where the probe fails."""
    import torch

    meta = torch.empty_strided(tuple(tensor.shape), tuple(tensor.stride()), dtype=tensor.dtype, device="meta")
    return fake_from_meta(mode, meta, tensor.device)


def fake_from_meta(mode, meta, device):
    """A FakeTensor of ``mode`` on ``device`` with the sizes, strides and dtype of the meta tensor ``meta``
    (``fake_tensor_converter.from_meta_and_device``). Builder only (``builds_programs``)."""
    return mode.fake_tensor_converter.from_meta_and_device(mode, meta, device)


def sized_at_run_time(exc: BaseException | None) -> bool:
    """Whether FakeTensorMode refused a call because an output's size depends on the input's values
    (its DynamicOutputShapeException, possibly wrapped). Builder only (``builds_programs``)."""
    from torch._subclasses.fake_tensor import DynamicOutputShapeException

    while exc is not None:
        if isinstance(exc, DynamicOutputShapeException):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def reserve_node_names(graph, names) -> None:
    """Take one of each name in ``names`` from ``graph``'s namespace, so the next node made with it gets the
    suffix ``_1`` (torch.export's tracing makes and drops a first size node and comparison of each bound,
    so the runtime asserts of a data-dependent size name the second). Builder only (``builds_programs``)."""
    for name in names:
        graph._graph_namespace.create_name(name, None)


# ---------------------------------------------------------------------------------------------
# Assembling an ExportedProgram


def _probe_assembly() -> str | None:
    import torch.export.exported_program as exported_program
    from torch.export import ExportedProgram
    from torch.fx._lazy_graph_module import _LazyGraphModule  # noqa: F401

    if not callable(getattr(exported_program, "_create_graph_module_for_export", None)):
        return "torch.export.exported_program has no _create_graph_module_for_export"
    if not callable(getattr(ExportedProgram, "validate", None)):
        return "ExportedProgram has no validate"
    return None


def fast_assembly() -> bool:
    """Whether ``exported_program`` takes its private route (see there)."""
    return _route("fast_assembly", _probe_assembly)


def exported_program(**fields):
    """``torch.export.ExportedProgram(**fields)`` for a graph the harness built (a single-op or batch
    program, one op of a model run alone).

    Private route: the program's GraphModule generates its Python code when first used
    (``torch.fx._lazy_graph_module._LazyGraphModule`` in place of
    ``torch.export.exported_program._create_graph_module_for_export``), and export's Verifier is not run
    at construction (``ExportedProgram.validate`` replaced while the constructor runs). A backend reading
    ``graph_module.code``, calling the module or pickling it gets what an eager GraphModule gives; one that
    walks the graph, as most do, does not pay for code generation (a third of building a program), nor
    for the Verifier (a tenth). Both are swapped under a lock and put back before returning, so no other
    construction in the process sees them. Every graph built so is the one torch.export gives, which
    tests/harness/test_programs.py shows and validates call for call; a backend calling ``validate()``
    runs it as usual. Tested on torch 2.13.

    Public fallback: the plain constructor (an eager GraphModule, the Verifier run)."""
    from torch.export import ExportedProgram

    if not fast_assembly():
        return ExportedProgram(**fields)
    import torch.export.exported_program as module
    from torch.fx._lazy_graph_module import _LazyGraphModule

    with _ASSEMBLY_LOCK:
        eager = module._create_graph_module_for_export
        module._create_graph_module_for_export = _LazyGraphModule
        validate, ExportedProgram.validate = ExportedProgram.validate, _no_validation
        try:
            return ExportedProgram(**fields)
        finally:
            module._create_graph_module_for_export = eager
            ExportedProgram.validate = validate


def _no_validation(self) -> None:
    """ExportedProgram.validate while ``exported_program`` constructs one."""


_ASSEMBLY_LOCK = threading.Lock()


def _probe_training_verifier() -> str | None:
    from torch._export.verifier import TrainingIRVerifier, Verifier

    return None if issubclass(TrainingIRVerifier, Verifier) else "TrainingIRVerifier is no Verifier"


def training_ir_verifiers() -> list:
    """The verifiers of a program in torch.export's training IR, where an op that mutates its argument
    (resize_, a batch norm's running statistics) stays; the ATen dialect's Verifier, the default of a
    constructed ExportedProgram, refuses one ("operator ... is not functional").

    Private route: ``[torch._export.verifier.TrainingIRVerifier]``. Tested on torch 2.13.

    Public fallback: the ``verifiers`` of a program ``torch.export.export`` gives (exported once per
    process: the same list, since torch.export's programs are in that IR)."""
    if _route("training_ir_verifiers", _probe_training_verifier):
        from torch._export.verifier import TrainingIRVerifier

        return [TrainingIRVerifier]
    return list(_exported_verifiers())


@functools.cache
def _exported_verifiers() -> tuple:
    import torch

    class Identity(torch.nn.Module):
        def forward(self, x):
            return x + 1

    return tuple(torch.export.export(Identity(), (torch.zeros(1),), strict=False).verifiers)


# ---------------------------------------------------------------------------------------------
# What FakeTensorMode runs for an op, on meta tensors


def _probe_meta_kernel() -> str | None:
    import torch
    from torch._decomp import decomposition_table, meta_table  # noqa: F401
    from torch._subclasses.fake_impls import op_implementations_checks
    from torch._subclasses.fake_tensor import FakeTensorMode, torch_decomp_decompositions  # noqa: F401

    if not all(isinstance(entry, tuple) and len(entry) == 2 for entry in op_implementations_checks):
        return "fake_impls.op_implementations_checks is not a list of (check, implementation)"
    if not hasattr(torch._library.simple_registry.singleton, "find"):
        return "torch._library.simple_registry.singleton has no find"
    if not callable(getattr(FakeTensorMode, "cpp_meta_supports_symint", None)):
        return "FakeTensorMode has no cpp_meta_supports_symint"
    if not callable(getattr(torch._C, "_dispatch_has_kernel_for_dispatch_key", None)):
        return "torch._C has no _dispatch_has_kernel_for_dispatch_key"
    return None


def meta_kernel(op, mode, outputs_follow_from_inputs: bool):
    """What FakeTensorMode ``mode`` runs for ``op`` on CPU FakeTensors, as a function of meta tensors that
    gives the same outputs, or None where no such function stands in for it (then the caller runs the op
    under the FakeTensorMode).

    Private route: FakeTensorMode's own decision (fake_tensor.py, ``_dispatch_impl``) copied: its special
    rules (``torch._subclasses.fake_impls.op_implementations_checks``) and registered fake kernels
    (``torch._library.simple_registry``) excluded, then a Python meta kernel or a C++ one taking symbolic
    sizes (the op itself on meta tensors), else a Python decomposition from ``torch._decomp`` (that
    decomposition on meta tensors), else the op's CompositeImplicitAutograd decomposition, else the op's
    meta kernel. Each decomposition is dozens of ATen calls, and FakeTensorMode's dispatch of each costs
    more than the meta kernel it ends in: a grid_sampler_2d costs 24 ms through FakeTensorMode, 2 ms on
    meta tensors. A kernel that reads its inputs' device (``torch._meta_registrations``' device_hint, a
    ``torch._decomp`` function testing ``.is_cpu``: read from their source with ``inspect.getsource``)
    would take another branch on meta tensors than on CPU FakeTensors, and gets None.
    tests/harness/test_programs.py holds every op spec's calls to FakeTensorMode's outputs. Tested on
    torch 2.13.

    Public fallback: None for every op (every call runs under FakeTensorMode: the same outputs, slower).

    ``outputs_follow_from_inputs``: the op's outputs are fresh tensors whose sizes follow from its inputs'
    metadata (the caller's test); None otherwise, since a view among them shares its input's storage."""
    if not outputs_follow_from_inputs or not _route("meta_kernel", _probe_meta_kernel):
        return None
    return _meta_kernel(op, mode)


@functools.cache
def _meta_kernel(op, mode):
    import torch
    from torch._decomp import decomposition_table, meta_table
    from torch._subclasses.fake_impls import op_implementations_checks
    from torch._subclasses.fake_tensor import torch_decomp_decompositions

    if any(check(op) for check, _ in op_implementations_checks):
        return None
    try:
        if torch._library.simple_registry.singleton.find(op.name()).fake_impl.kernel:
            return None
    except AttributeError:
        return None
    composite = torch._C.DispatchKey.CompositeImplicitAutograd
    if op in meta_table or mode.cpp_meta_supports_symint(op):
        kernel, reads_device = op, _meta_kernel_reads_device(meta_table.get(op))
    elif op in decomposition_table and torch_decomp_decompositions(op):
        kernel = decomposition_table[op]
        reads_device = _decomposition_reads_device(kernel)
    elif composite in op.py_kernels or torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), composite):
        # in C++: its device logic, if any, is the dispatcher's, the same for both
        kernel, reads_device = op.decompose, False
    else:
        kernel, reads_device = op, _meta_kernel_reads_device(meta_table.get(op))
    return None if reads_device else kernel


def _meta_kernel_reads_device(kernel) -> bool:
    """Whether a Python meta kernel branches on its inputs' device (torch._meta_registrations'
    device_hint): on meta tensors it takes another branch than on CPU FakeTensors (the FFT ops lay
    their outputs out as the device's FFT library does: _fft_r2c of a 2 x 2 float32 over [0, 1] has
    strides (1, 2) on meta tensors and (2, 1) on CPU, as eager)."""
    import inspect

    try:
        return kernel is not None and "device_hint" in inspect.getsource(kernel)
    except (OSError, TypeError):
        return True  # no source to read: the slow path is the faithful one


DEVICE_BRANCHES_ALIKE = frozenset({
    # Its CPU branch unbinds stacks of t (slices with t's sizes and strides), the other computes the
    # same four weights elementwise from t: tensors laid out alike, so the bicubic modes of
    # grid_sampler_2d and upsample_bicubic2d lay out their outputs alike on CPU and meta tensors.
    "_upsample_get_cubic_coefficients",
})
"""Functions of torch._decomp that test their tensors' device in a way that changes no output's sizes,
strides or dtype (``_decomposition_reads_device``; tests/harness/test_programs.py holds it call by call)."""


def _decomposition_reads_device(function, _seen: set | None = None) -> bool:
    """Whether a Python decomposition tells a CPU tensor from a meta one, itself or in a function of
    torch._decomp it calls (the batch norm decompositions do, in native_batch_norm_helper: on CPU
    the saved statistics of an evaluation are empty and in the input's dtype). A test for another
    device (grid_sampler_2d's ``a.device.type in ("cuda", "xpu")``) is false on both."""
    import inspect

    seen = set() if _seen is None else _seen
    function = inspect.unwrap(function)
    if id(function) in seen or function.__name__ in DEVICE_BRANCHES_ALIKE:
        return False
    seen.add(id(function))
    try:
        lines = inspect.getsource(function).splitlines()
    except (OSError, TypeError):
        return True  # no source to read: the slow path is the faithful one
    for i, line in enumerate(lines):
        if "device_hint" in line or ".is_cpu" in line:
            return True
        if ".device.type" in line or "device_type" in line or ".device ==" in line or ".device !=" in line:
            around = " ".join(lines[i : i + 2])
            compared = any(c in around for c in ("==", "!=", " in "))
            if not compared or any(name in around for name in ('"cpu"', "'cpu'", '"meta"', "'meta'")):
                return True
    code = getattr(function, "__code__", None)
    called = (function.__globals__.get(name) for name in (code.co_names if code else ()))
    return any(_decomposition_reads_device(f, seen) for f in called
               if inspect.isfunction(f) and f.__module__.startswith("torch._decomp"))


# ---------------------------------------------------------------------------------------------
# Exporting with size-oblivious dims


def _probe_size_oblivious() -> str | None:
    import torch.fx.experimental._config as fx_config

    return None if hasattr(fx_config, "backed_size_oblivious") else "torch.fx.experimental._config has no backed_size_oblivious"


@contextlib.contextmanager
def size_oblivious(enabled: bool) -> Iterator[None]:
    """Around a dynamic ``torch.export.export``: sizes 0 and 1 do not specialize, so one program serves
    every size of a structure.

    Private route: ``torch.fx.experimental._config.patch(backed_size_oblivious=enabled)``. Tested on torch
    2.13.

    Public fallback: nothing changed. An export may then specialize a dim to 0 or 1, and the program cache
    (``programs.graphs.input_shapes_fit``) exports another variant for inputs it does not fit: more exports, the
    same programs for the shapes they serve."""
    if not enabled or not _route("size_oblivious", _probe_size_oblivious):
        yield
        return
    import torch.fx.experimental._config as fx_config

    with fx_config.patch(backed_size_oblivious=True):
        yield


# ---------------------------------------------------------------------------------------------
# The registered ATen overloads


def _probe_schemas() -> str | None:
    import torch

    return None if callable(getattr(torch._C, "_jit_get_all_schemas", None)) else "torch._C has no _jit_get_all_schemas"


def aten_overload_names() -> frozenset[str]:
    """Every ``aten`` overload the installed torch registers, as ``aten.op.overload``.

    Private route: ``torch._C._jit_get_all_schemas()``, every registered schema. Tested on torch 2.13.

    Public fallback: the packets ``torch.ops.aten`` gives for every name of torch's public namespaces
    (``torch``, ``torch.Tensor``, ``torch.nn.functional``, ``torch.linalg``, ``torch.special``, ``torch.fft``,
    and ``sym_`` before a Tensor method's name) and those it has created, with their ``overloads()``:
    iterating ``dir(torch.ops.aten)`` alone misses the packets torch.ops creates on first access. On torch
    2.13, in a fresh process, it finds every one of the 193 core overloads the private route finds; an
    overload of no Python binding would be missing."""
    import torch

    if _route("aten_overload_names", _probe_schemas):
        names = set()
        for schema in torch._C._jit_get_all_schemas():
            if schema.name.startswith("aten::"):
                names.add(f"aten.{schema.name[len('aten::'):]}.{schema.overload_name or 'default'}")
        return frozenset(names)
    candidates = set(dir(torch.ops.aten))
    for namespace in (torch, torch.Tensor, torch.nn.functional, torch.linalg, torch.special, torch.fft):
        candidates.update(dir(namespace))
    candidates.update(f"sym_{name}" for name in dir(torch.Tensor))  # sym_size, sym_is_contiguous: SymInt variants
    names = set()
    for candidate in sorted(candidates):
        try:
            packet = getattr(torch.ops.aten, candidate)
        except (AttributeError, RuntimeError):
            continue
        overloads = getattr(packet, "overloads", None)
        if callable(overloads):
            names.update(f"aten.{candidate}.{overload}" for overload in overloads())
    return frozenset(names)


# ---------------------------------------------------------------------------------------------
# Used by the ExecuTorch adapters (backend_adapters.executorch_compat decides whether they run)


def _probe_retrace() -> str | None:
    from torch._export.utils import _is_aten_op, _is_cia_op, _is_preservable_cia_op  # noqa: F401
    from torch.export.decomp_utils import CustomDecompTable

    table = CustomDecompTable()
    for attribute in ("decomp_table", "has_materialized", "deleted_custom_ops"):
        if not hasattr(table, attribute):
            return f"CustomDecompTable has no {attribute}"
    return None


def retrace_is_identity(program, table) -> bool:
    """Whether ``program.run_decompositions(table)`` could only re-trace ``program``.

    True when the graph is already what the call produces: every call_function target an ATen operator
    overload (or ``getitem``) with a functional schema, not in ``table`` and not a CompositeImplicitAutograd
    op torch decomposes whatever the table says; no input or buffer mutation to functionalize; static
    shapes (no range constraints, so no guards to re-derive); no submodules. Anything else gets the real
    call.

    Private route: torch.export's own tests (``torch._export.utils``' ``_is_cia_op``,
    ``_is_preservable_cia_op``, ``_is_aten_op``) and a look into a ``CustomDecompTable`` without
    materializing it (that collects every CompositeImplicitAutograd op of every namespace: ~70 ms a call).
    Tested on torch 2.13.

    Public fallback: False (the call re-traces, as ``run_decompositions`` always does)."""
    if not _route("retrace_is_identity", _probe_retrace):
        return False
    import torch
    from torch._export.utils import _is_cia_op, _is_preservable_cia_op
    from torch.export.graph_signature import OutputKind

    if program.range_constraints:
        return False
    if any(spec.kind is not OutputKind.USER_OUTPUT for spec in program.graph_signature.output_specs):
        return False
    for node in program.graph.nodes:
        if node.op in ("call_module", "get_attr"):
            return False
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        target = node.target
        if not isinstance(target, torch._ops.OpOverload) or target._schema.is_mutable:
            return False
        if _is_cia_op(target) and not _is_preservable_cia_op(target):
            return False
        if _decomposes(table, target):
            return False
    return True


def _decomposes(table, op) -> bool:
    """``op in table``, without materializing a CustomDecompTable."""
    from torch._export.utils import _is_aten_op, _is_preservable_cia_op
    from torch.export.decomp_utils import CustomDecompTable

    if table is None:
        table = _default_table()
    if not isinstance(table, CustomDecompTable):
        return op in table
    if op in table.decomp_table:
        return True
    # Its constructor loads every aten entry; materialize() adds the preservable CIA ops of
    # other namespaces that were not deleted (torch/export/decomp_utils.py).
    if table.has_materialized or _is_aten_op(op):
        return False
    return _is_preservable_cia_op(op) and op not in table.deleted_custom_ops


@functools.cache
def _default_table():
    import torch

    return torch.export.default_decompositions()


def is_spec_violation(exc: BaseException) -> bool:
    """Whether ``exc`` is torch.export's SpecViolationError (a verifier refusing a graph: ExecuTorch's Edge
    dialect verifier raises it). Matched by the class's name along its MRO, which needs no import of
    ``torch._export.verifier``: the same answer on every version that names it so."""
    return any(cls.__name__ == "SpecViolationError" for cls in type(exc).__mro__)


def is_unbounded(upper: Any) -> bool:
    """Whether a range constraint's upper bound is not a number (sympy's oo, torch's ``int_oo``, a symbol):
    read through sympy's public ``is_Integer`` rather than ``torch.utils._sympy.numbers.int_oo``, which is
    no sympy Integer."""
    return not getattr(upper, "is_Integer", False)


def _probe_value_ranges() -> str | None:
    from torch.utils._sympy.value_ranges import ValueRanges

    return None if ValueRanges(0, 1).upper == 1 else "ValueRanges(0, 1) has another upper bound"


def value_range(lower: Any, upper: Any):
    """A range constraint [lower, upper] of an ExportedProgram's ``range_constraints``.

    Private route: ``torch.utils._sympy.value_ranges.ValueRanges(lower, upper)``. Tested on torch 2.13.

    Public fallback: the class of a range constraint of a program ``torch.export.export`` gives with a
    dynamic dim (exported once per process), called with the same bounds: the same class."""
    if _route("value_range", _probe_value_ranges):
        from torch.utils._sympy.value_ranges import ValueRanges

        return ValueRanges(lower, upper)
    return _range_class()(lower, upper)


@functools.cache
def _range_class():
    import torch

    class Identity(torch.nn.Module):
        def forward(self, x):
            return x + 1

    exported = torch.export.export(Identity(), (torch.zeros(3),), dynamic_shapes=({0: torch.export.Dim("n")},), strict=False)
    return type(next(iter(exported.range_constraints.values())))
